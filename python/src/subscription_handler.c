/* varlog.Subscription's handler form (subscribe(..., handler=fn)): the callbacks the library
 * calls on its subscription thread ("varlog-sub"), which take the GIL and call fn(entry), and
 * wait(), which sleeps until the subscription is over. What fn raises ends the subscription
 * (closed from the handler: no handler runs after it) and is kept as its failure, which wait()
 * raises. While a handler may run, the subscription holds a reference to itself (self_ref),
 * dropped by on_end, on_error and close. */
#include "subscription.h"

#include <time.h>

void vp_sub_mark_done(vp_subscription_t *s)
{
    pthread_mutex_lock(&s->done_mu);
    s->done = true;
    pthread_cond_broadcast(&s->done_cv);
    pthread_mutex_unlock(&s->done_mu);
}

/* Drops the reference held while handlers may run: the last thing a caller does with s
 * (it may free s). GIL held. */
void vp_sub_drop_self_ref(vp_subscription_t *s)
{
    if (s->self_ref) {
        s->self_ref = false;
        Py_DECREF(s);
    }
}

/* ---- handler form: called on the library's subscription thread ---- */

/* What a handler raised: kept as the subscription's failure (wait() raises it), logged on
 * the client's logger, and the subscription closed from the handler. GIL held, error set. */
static void handler_raised(vp_subscription_t *s)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    if (ev != NULL && tb != NULL)
        PyException_SetTraceback(ev, tb);
    Py_XDECREF(et);
    Py_XDECREF(tb);
    if (ev == NULL)
        return;
    PyObject *args = Py_BuildValue("(sO)",
                                   "subscription handler raised %r: the subscription is "
                                   "closed",
                                   ev);
    PyObject *kw = Py_BuildValue("{s:O}", "exc_info", ev);
    PyObject *log = PyObject_GetAttrString(s->client->logger, "error");
    PyObject *r = args && kw && log ? PyObject_Call(log, args, kw) : NULL;
    if (r == NULL)
        PyErr_WriteUnraisable(s->client->logger);
    Py_XDECREF(r);
    Py_XDECREF(log);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    if (s->ended == VARLOG_OK) {
        s->ended = VARLOG_ERR_STATE; /* a failure: wait() raises s->failure */
        s->failure = ev;
    } else {
        Py_DECREF(ev);
    }
    if (s->published)
        vp_sub_close(s);
    else
        s->close_when_published = true;
}

void vp_sub_on_entry(const varlog_entry_t *e, void *opaque)
{
    vp_subscription_t *s = opaque;
    PyGILState_STATE st;
    if (atomic_load(&s->closing) || !vp_gil_enter(&st))
        return;
    if (!atomic_load(&s->closing) && s->ended == VARLOG_OK && s->handler != NULL) {
        Py_INCREF(s);
        PyObject *fn = s->handler;
        Py_INCREF(fn);
        PyObject *entry = vp_entry_new(e);
        PyObject *r = entry ? PyObject_CallOneArg(fn, entry) : NULL;
        Py_XDECREF(entry);
        if (r == NULL)
            handler_raised(s);
        Py_XDECREF(r);
        Py_DECREF(fn);
        Py_DECREF(s);
    }
    PyGILState_Release(st);
}

void vp_sub_on_end(void *opaque)
{
    vp_subscription_t *s = opaque;
    PyGILState_STATE st;
    if (!vp_gil_enter(&st)) {
        vp_sub_mark_done(s);
        return;
    }
    if (s->ended == VARLOG_OK)
        s->ended = VARLOG_ERR_END;
    vp_sub_mark_done(s);
    vp_sub_drop_self_ref(s);
    PyGILState_Release(st);
}

void vp_sub_on_error(varlog_err_t err, const char *why, void *opaque)
{
    vp_subscription_t *s = opaque;
    PyGILState_STATE st;
    if (!vp_gil_enter(&st)) {
        vp_sub_mark_done(s);
        return;
    }
    if (s->ended == VARLOG_OK) {
        s->failure = vp_make_error(err, why, -1);
        if (s->failure == NULL)
            PyErr_WriteUnraisable((PyObject *)s);
        else
            s->ended = err;
    }
    vp_sub_mark_done(s);
    vp_sub_drop_self_ref(s);
    PyGILState_Release(st);
}

/* ---- handler form: waiting for the end ---- */

PyObject *vp_sub_wait(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"timeout", NULL};
    vp_subscription_t *s = (vp_subscription_t *)self;
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:wait", kwlist, &timeout))
        return NULL;
    int64_t ms = vp_timeout_ms(timeout, -1);
    if (ms == -2)
        return NULL;
    if (!s->handler_form)
        return vp_sub_raise_state("wait() is for a subscription with a handler: iterate this one");
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        bool done;
        int64_t chunk = WAIT_CHUNK_MS;
        if (ms >= 0) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            int64_t left =
                ms - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
            chunk = left < 0 ? 0 : left < chunk ? left : chunk;
        }
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&s->done_mu);
        if (!s->done && chunk > 0) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += chunk * 1000000L;
            until.tv_sec += until.tv_nsec / 1000000000L;
            until.tv_nsec %= 1000000000L;
            pthread_cond_timedwait(&s->done_cv, &s->done_mu, &until);
        }
        done = s->done;
        pthread_mutex_unlock(&s->done_mu);
        Py_END_ALLOW_THREADS
        if (done)
            break;
        if (chunk == 0 && ms >= 0)
            Py_RETURN_FALSE;
        if (PyErr_CheckSignals() < 0)
            return NULL;
    }
    if (s->ended != VARLOG_OK && s->ended != VARLOG_ERR_END && s->failure != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(s->failure), s->failure);
        return NULL;
    }
    Py_RETURN_TRUE;
}
