/* varlog.Appender: the pipelined appender, its futures and their resolver thread.
 *
 * No Python code runs on the library's appender thread: its callback only moves the result
 * into this appender's list of settled calls (a mutex, never the GIL). The futures are then
 * resolved with the GIL held, in callback order, by whichever comes first: the producer on
 * its next append, flush or close, or the appender's resolver thread ("varlog-py-res"),
 * which takes the GIL once per batch of settled calls rather than once per call.
 *
 * A future's done-callback runs inside a drain and may flush, close or append (waiting for
 * room). While it waits, no other thread can resolve futures (the drain is its thread's), so
 * that wait drains itself (drain is re-entrant on the draining thread and continues the same
 * list in order) and the library's thread does not wait for room in the list of settled
 * calls meanwhile (no_room_wait). A KeyboardInterrupt or other BaseException a callback
 * raises is kept (interrupt) and raised by the waiting call (append, flush, close) of
 * whichever thread calls one first, after the other futures' callbacks ran. */
#include "appender_internal.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WAIT_CHUNK_MS 100

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static vp_appender_t *make_appender(vp_client_t *c, varlog_appender_t *app);

PyObject *vp_client_appender(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "log_stream", NULL};
    PyObject *topic_obj;
    int32_t topic, ls = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|i:appender", kwlist, &topic_obj, &ls))
        return NULL;
    if (PyTuple_Check(topic_obj)) {
        if (!PyArg_ParseTuple(topic_obj, "ii:appender", &topic, &ls))
            return NULL;
    } else {
        long t = PyLong_AsLong(topic_obj);
        if (t == -1 && PyErr_Occurred())
            return NULL;
        topic = (int32_t)t;
    }
    vp_client_t *c = (vp_client_t *)self;
    varlog_client_t *cl = vp_client_get(c);
    if (cl == NULL)
        return NULL;
    varlog_appender_t *app = NULL;
    varlog_err_t err;
    c->calls++;
    Py_BEGIN_ALLOW_THREADS
    err = varlog_appender_new(cl, topic, ls, &app);
    Py_END_ALLOW_THREADS
    if (err == VARLOG_OK && c->client == NULL) {
        /* closed meanwhile: its close is waiting for this call, and would leave the new
         * handle good only for varlog_appender_close */
        Py_BEGIN_ALLOW_THREADS
        varlog_appender_close(&app, 0);
        Py_END_ALLOW_THREADS
        c->calls--;
        PyObject *exc = vp_make_error(VARLOG_ERR_CLOSED, "the client was closed", -1);
        if (exc != NULL) {
            PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
            Py_DECREF(exc);
        }
        return NULL;
    }
    if (err != VARLOG_OK) {
        c->calls--;
        return vp_raise(err, -1);
    }
    /* still counted in c->calls until adopted: a close that begins meanwhile (the code below
     * may let the GIL go) waits for this and then closes the new appender with the others */
    vp_appender_t *a = make_appender(c, app);
    c->calls--;
    return (PyObject *)a;
}

static vp_appender_t *make_appender(vp_client_t *c, varlog_appender_t *app)
{
    vp_appender_t *a = PyObject_New(vp_appender_t, &vp_appender_type);
    if (a == NULL) {
        varlog_appender_close(&app, 0);
        return NULL;
    }
    a->app = app;
    a->client = c;
    Py_INCREF(c);
    a->weakreflist = NULL;
    a->calls = a->draining = 0;
    a->taken = NULL;
    a->interrupt = NULL;
    atomic_init(&a->no_room_wait, 0);
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv_work, NULL);
    pthread_cond_init(&a->cv_room, NULL);
    a->head = a->tail = NULL;
    atomic_init(&a->count, 0);
    a->stop = false;
    /* the resolver's reference: an open appender lives until close, its client's close or
     * interpreter exit, whoever drops the Python object */
    Py_INCREF(a);
    a->resolver_started = pthread_create(&a->resolver, NULL, vp_app_resolver_main, a) == 0;
    if (!a->resolver_started) {
        Py_DECREF(a);
        Py_XDECREF(vp_appender_close_quiet(a));
        Py_DECREF(a);
        PyErr_SetString(PyExc_RuntimeError, "could not start the appender's resolver thread");
        return NULL;
    }
    if (vp_client_adopt(c, (PyObject *)a) < 0) {
        Py_XDECREF(vp_appender_close_quiet(a));
        Py_DECREF(a);
        return NULL;
    }
    return a;
}

static PyObject *closed_error(void)
{
    PyObject *exc = vp_make_error(VARLOG_ERR_CLOSED, "the appender is closed", VARLOG_NOT_APPENDED);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

static PyObject *app_append(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"records", "timeout", "future", NULL};
    vp_appender_t *a = (vp_appender_t *)self;
    PyObject *records, *timeout = Py_None;
    int want_future = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$p:append", kwlist, &records, &timeout,
                                     &want_future))
        return NULL;
    int64_t ms = vp_timeout_ms(timeout, -1);
    if (ms == -2)
        return NULL;
    if (a->app == NULL)
        return closed_error();
    if (atomic_load_explicit(&a->count, memory_order_relaxed) > 0)
        vp_app_drain(a);
    if (vp_app_raise_interrupt(a) < 0)
        return NULL; /* nothing queued */
    vp_records_t r;
    if (vp_records_get(records, &r) < 0)
        return NULL; /* nothing queued */
    done_t *d = NULL;
    PyObject *fut = NULL;
    varlog_append_cb *cb = vp_app_on_appended_bare;
    void *opaque = a;
    if (want_future) {
        d = calloc(1, sizeof *d);
        if (d != NULL && !r.one) {
            /* a sequence: its future gets a list of the positions the callback gives */
            d->n = (size_t)r.n;
            d->metas = calloc(d->n, sizeof *d->metas);
        }
        fut = d && (r.one || d->metas) ? vp_future_new() : PyErr_NoMemory();
        if (fut == NULL) {
            if (d != NULL)
                vp_app_done_free(d);
            vp_records_release(&r);
            return NULL;
        }
        d->owner = a;
        d->fut = fut;
        Py_INCREF(fut); /* the callback's */
        cb = vp_app_on_appended;
        opaque = d;
    }
    /* first without waiting, GIL held: the common case costs no GIL hand-off */
    /* a->app again: the Python code run since the check (drain, the future's creation) may
     * have let another thread close the appender */
    /* The client's statistics count one refusal per QUEUE_FULL the caller of append sees and
     * one wait per call that waited: the look before the wait and every chunk but the last
     * say so (varlog_appender_append_ex's flags). */
    varlog_err_t err =
        a->app == NULL
            ? VARLOG_ERR_CLOSED
            : varlog_appender_append_ex(a->app, r.records, (size_t)r.n, 0,
                                        ms != 0 ? VARLOG_APPEND_REFUSAL_RETRIED : 0, cb, opaque);
    if (err == VARLOG_ERR_QUEUE_FULL && ms != 0) {
        int64_t deadline = ms < 0 ? INT64_MAX : now_ms() + ms;
        for (bool first = true;; first = false) {
            int64_t left = deadline == INT64_MAX ? WAIT_CHUNK_MS : deadline - now_ms();
            /* the last chunk waits what is left, perhaps nothing: one more look */
            bool last = deadline != INT64_MAX && left <= WAIT_CHUNK_MS;
            int64_t chunk = last ? (left > 0 ? left : 0) : WAIT_CHUNK_MS;
            unsigned flags = (first ? 0u : (unsigned)VARLOG_APPEND_WAIT_CONTINUED) |
                             (last ? 0u : (unsigned)VARLOG_APPEND_REFUSAL_RETRIED);
            varlog_appender_t *p = a->app;
            if (p == NULL) {
                err = VARLOG_ERR_CLOSED;
                break;
            }
            bool nested = vp_app_drains_here(a);
            if (nested)
                vp_app_room_wait_off(a);
            a->calls++;
            Py_BEGIN_ALLOW_THREADS
            err = varlog_appender_append_ex(p, r.records, (size_t)r.n, chunk, flags, cb, opaque);
            Py_END_ALLOW_THREADS
            a->calls--;
            if (nested)
                vp_app_room_wait_on(a);
            if (err != VARLOG_ERR_QUEUE_FULL || last)
                break;
            vp_app_drain(a);
            if (vp_app_raise_interrupt(a) < 0 || PyErr_CheckSignals() < 0) {
                err = VARLOG_ERR_QUEUE_FULL;
                goto interrupted;
            }
            if (a->app == NULL) {
                err = VARLOG_ERR_CLOSED;
                break;
            }
        }
    }
    vp_records_release(&r);
    if (err != VARLOG_OK) {
        Py_XDECREF(fut);
        Py_XDECREF(fut);
        if (d != NULL)
            vp_app_done_free(d);
        return vp_raise(err, VARLOG_NOT_APPENDED);
    }
    if (fut == NULL)
        Py_RETURN_NONE;
    return fut;
interrupted:
    vp_records_release(&r);
    Py_XDECREF(fut);
    Py_XDECREF(fut);
    if (d != NULL)
        vp_app_done_free(d);
    return NULL;
}

/* Flushes p in bounded waits (so that signals are noticed); returns the calls still pending,
 * or -1 with an exception set (interrupted, or a done-callback's KeyboardInterrupt). GIL held.
 * closing: called by close, which owns p. Otherwise a close on another thread may free p
 * whenever this thread runs Python code (the drain's callbacks, a signal handler) or lets the
 * GIL go with a->calls 0, so p is used only while a->app still is p, looked at right before
 * each call with nothing in between that could let the GIL go; a->calls, counted before the
 * GIL is released, then makes that close wait. */
static Py_ssize_t flush_chunked(vp_appender_t *a, varlog_appender_t *p, int64_t ms, bool closing)
{
    int64_t deadline = ms < 0 ? INT64_MAX : now_ms() + ms;
    size_t pending = 0;
    for (;;) {
        int64_t left = deadline == INT64_MAX ? WAIT_CHUNK_MS : deadline - now_ms();
        if (left < 0)
            left = 0;
        if (!closing && a->app != p) {
            pending = 0; /* closed meanwhile: the close settles every call */
            break;
        }
        varlog_err_t err;
        bool nested = vp_app_drains_here(a);
        if (nested)
            vp_app_room_wait_off(a);
        a->calls++;
        Py_BEGIN_ALLOW_THREADS
        err = varlog_appender_flush(p, left < WAIT_CHUNK_MS ? left : WAIT_CHUNK_MS, &pending);
        Py_END_ALLOW_THREADS
        a->calls--;
        if (nested)
            vp_app_room_wait_on(a);
        vp_app_drain(a);
        if (vp_app_raise_interrupt(a) < 0)
            return -1;
        if (!closing && a->app != p) {
            pending = 0;
            break;
        }
        if (err == VARLOG_OK || left == 0)
            break;
        if (err != VARLOG_ERR_TIMED_OUT) {
            vp_raise(err, -1);
            return -1;
        }
        if (PyErr_CheckSignals() < 0)
            return -1;
    }
    vp_app_drain_all(a);
    if (vp_app_raise_interrupt(a) < 0)
        return -1;
    return (Py_ssize_t)pending;
}

static PyObject *app_flush(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"timeout", NULL};
    vp_appender_t *a = (vp_appender_t *)self;
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:flush", kwlist, &timeout))
        return NULL;
    int64_t ms = vp_timeout_ms(timeout, -1);
    if (ms == -2)
        return NULL;
    if (a->app == NULL)
        return closed_error();
    Py_ssize_t n = flush_chunked(a, a->app, ms, false);
    return n < 0 ? NULL : PyLong_FromSsize_t(n);
}

/* Close with a flush of up to ms first; returns -1 with an exception set when the flush was
 * interrupted (the appender is closed all the same). GIL held. */
static int app_close_impl(vp_appender_t *a, int64_t ms)
{
    varlog_appender_t *p = a->app;
    if (p == NULL)
        return 0;
    a->app = NULL; /* no new appends; those waiting in the library see it within a chunk */
    while (a->calls > 0) {
        Py_BEGIN_ALLOW_THREADS
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        Py_END_ALLOW_THREADS
    }
    int rc = 0;
    if (ms != 0 && flush_chunked(a, p, ms, true) < 0)
        rc = -1;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    /* close settles every call; the list of settled calls may exceed its bound meanwhile
     * (this thread may be the one that would drain it: close from a done-callback) */
    vp_app_room_wait_off(a);
    Py_BEGIN_ALLOW_THREADS
    varlog_appender_close(&p, 0);
    Py_END_ALLOW_THREADS
    vp_app_room_wait_on(a);
    if (a->resolver_started) {
        pthread_mutex_lock(&a->mu);
        a->stop = true;
        pthread_cond_broadcast(&a->cv_work);
        pthread_mutex_unlock(&a->mu);
        if (pthread_equal(a->resolver, pthread_self())) {
            pthread_detach(a->resolver); /* closed from a future's callback on it */
        } else {
            Py_BEGIN_ALLOW_THREADS
            pthread_join(a->resolver, NULL);
            Py_END_ALLOW_THREADS
        }
        a->resolver_started = false;
    }
    vp_app_drain_all(a);
    PyErr_Restore(et, ev, tb);
    if (rc == 0 && vp_app_raise_interrupt(a) < 0)
        rc = -1;
    return rc;
}

void vp_appender_forget(vp_appender_t *a)
{
    /* a thread of the parent may have held them; the resolver's reference stays (leaked) */
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv_work, NULL);
    pthread_cond_init(&a->cv_room, NULL);
    a->app = NULL;
    a->calls = 0;
    a->draining = 0;
    a->resolver_started = false;
    atomic_store(&a->no_room_wait, 0);
}

PyObject *vp_appender_close_quiet(vp_appender_t *a)
{
    PyObject *et, *ev, *tb, *kept = NULL;
    PyErr_Fetch(&et, &ev, &tb);
    if (app_close_impl(a, 0) < 0) {
        if (PyErr_ExceptionMatches(PyExc_Exception)) {
            PyErr_Clear();
        } else {
            PyObject *kt, *kb;
            PyErr_Fetch(&kt, &kept, &kb);
            PyErr_NormalizeException(&kt, &kept, &kb);
            if (kept != NULL && kb != NULL)
                PyException_SetTraceback(kept, kb);
            Py_XDECREF(kt);
            Py_XDECREF(kb);
        }
    }
    PyErr_Restore(et, ev, tb);
    return kept;
}

static PyObject *app_close(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"timeout", NULL};
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:close", kwlist, &timeout))
        return NULL;
    int64_t ms = vp_timeout_ms(timeout, -1);
    if (ms == -2)
        return NULL;
    if (app_close_impl((vp_appender_t *)self, ms) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *app_enter(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    if (((vp_appender_t *)self)->app == NULL)
        return closed_error();
    Py_INCREF(self);
    return self;
}

static PyObject *app_exit(PyObject *self, PyObject *args)
{
    (void)args;
    if (app_close_impl((vp_appender_t *)self, -1) < 0)
        return NULL;
    Py_RETURN_FALSE;
}

static PyObject *app_stats(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    vp_appender_t *a = (vp_appender_t *)self;
    if (a->app == NULL)
        return closed_error();
    varlog_appender_stats_t s;
    varlog_err_t err = varlog_appender_stats(a->app, &s);
    if (err != VARLOG_OK)
        return vp_raise(err, -1);
    return Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "calls_appended",
        (unsigned long long)s.calls_appended, "calls_failed", (unsigned long long)s.calls_failed,
        "records_appended", (unsigned long long)s.records_appended, "batches_sent",
        (unsigned long long)s.batches_sent, "batches_retried",
        (unsigned long long)s.batches_retried, "streams_opened",
        (unsigned long long)s.streams_opened, "queue_full", (unsigned long long)s.queue_full,
        "queue_full_waits", (unsigned long long)s.queue_full_waits, "pending_calls",
        (unsigned long long)s.pending_calls, "pending_records",
        (unsigned long long)s.pending_records, "pending_bytes", (unsigned long long)s.pending_bytes,
        "inflight_batches", (unsigned long long)s.inflight_batches, "batch_slots",
        (unsigned long long)s.batch_slots, "batch_slots_released",
        (unsigned long long)s.batch_slots_released);
}

static PyObject *app_get_closed(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(((vp_appender_t *)self)->app == NULL);
}

static void app_dealloc(PyObject *self)
{
    vp_appender_t *a = (vp_appender_t *)self;
    /* only reached once closed: an open appender is referenced by its resolver thread */
    if (a->weakreflist != NULL)
        PyObject_ClearWeakRefs(self);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv_work);
    pthread_cond_destroy(&a->cv_room);
    Py_XDECREF(a->interrupt);
    Py_XDECREF(a->client);
    PyObject_Free(self);
}

#define KW (PyCFunction)(void (*)(void))
static PyMethodDef app_methods[] = {
    {"append", KW app_append, METH_VARARGS | METH_KEYWORDS,
     "append(records, timeout=None, *, future=True) -> AppendFuture | None\n\nQueues one "
     "record (bytes-like), or a sequence of them as one call (stored together, in one log "
     "stream, with consecutive GLSNs and LLSNs, or not at all; at most "
     "appender.batch.max.records records and appender.batch.max.bytes bytes), and returns a "
     "future resolved exactly once: with the record's EntryMeta (a sequence: a list of "
     "EntryMeta, one per record, in order) when stored, or with NotAppended / MaybeAppended. "
     "The records are copied once, into the transmit queue, before append returns: the "
     "buffers may be reused at once. A full queue (appender.queue.max.records/.bytes) is "
     "waited for, with the GIL released, up to timeout seconds (None: until there is room; 0: "
     "not at all), then QueueFull (a NotAppended: nothing queued) is raised. Raises Closed "
     "after close(); InvalidArgument for an empty sequence, an empty or too large record, or "
     "too many records; TypeError for a str or an element that is not bytes-like. Nothing of "
     "a refused call is queued. future=False: no future (about half the cost per record); the "
     "outcome is then only counted (stats()) and a failure logged at WARNING on the client's "
     "logger."},
    {"flush", KW app_flush, METH_VARARGS | METH_KEYWORDS,
     "flush(timeout=None) -> int\n\nSends what is queued now and waits (GIL released) until "
     "every append made before it has its future resolved; returns how many are still pending "
     "(0 when done; they go on). timeout: seconds, None = until done, 0 = only start sending. "
     "May be called from a future's done-callback. Raises a KeyboardInterrupt a done-callback "
     "raised (after every other callback ran)."},
    {"close", KW app_close, METH_VARARGS | METH_KEYWORDS,
     "close(timeout=None) -> None\n\nStops intake (later appends raise Closed), flushes for up "
     "to timeout seconds (None: until every call settled), then ends the appender: calls still "
     "queued fail with Closed as NotAppended, calls in flight as MaybeAppended. Every future is "
     "resolved when close returns. Idempotent."},
    {"__enter__", app_enter, METH_NOARGS, NULL},
    {"__exit__", app_exit, METH_VARARGS, "Closes with timeout=None."},
    {"stats", app_stats, METH_NOARGS, "stats() -> dict\n\nvarlog_appender_stats as a dict."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef app_getset[] = {
    {"closed", app_get_closed, NULL, "True once close() began.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject vp_appender_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "varlog.Appender",
    .tp_basicsize = sizeof(vp_appender_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A pipelined appender (Client.appender). Any thread may append; futures are "
              "resolved on the appending thread or the appender's resolver thread, in the "
              "order the library settled the calls, never on a library thread.",
    .tp_weaklistoffset = offsetof(vp_appender_t, weakreflist),
    .tp_dealloc = app_dealloc,
    .tp_methods = app_methods,
    .tp_getset = app_getset,
};

int vp_appender_init_type(PyObject *m)
{
    if (PyType_Ready(&vp_appender_type) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "Appender", (PyObject *)&vp_appender_type);
}
