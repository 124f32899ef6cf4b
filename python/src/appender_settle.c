/* varlog.Appender's settled calls: the library's callback queues each on the appender's
 * list (a mutex, never the GIL), and whichever comes first resolves their futures with the
 * GIL held, in callback order: the producer on its next append, flush or close, or the
 * resolver thread ("varlog-py-res"), once per batch of settled calls rather than once per
 * call. appender.c says why the drain is re-entrant and when the library's thread may not
 * wait for room. */
#include "appender_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Thread_local int vp_drain_depth;

void vp_app_on_appended(const varlog_append_result_t *r, void *opaque)
{
    done_t *d = opaque;
    vp_appender_t *a = d->owner;
    d->err = r->err;
    d->outcome = r->outcome;
    if (r->err == VARLOG_OK && r->n > 0 && r->metas != NULL && d->metas != NULL)
        memcpy(d->metas, r->metas, (r->n < d->n ? r->n : d->n) * sizeof *d->metas);
    else if (r->err == VARLOG_OK && r->n > 0 && r->metas != NULL)
        d->meta = r->metas[0];
    else if (r->err != VARLOG_OK)
        d->errtext = strdup(r->errtext ? r->errtext : "");
    pthread_mutex_lock(&a->mu);
    while (atomic_load(&a->count) >= DONE_MAX && atomic_load(&a->no_room_wait) == 0 &&
           !atomic_load(&vp_shutting_down)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&a->cv_room, &a->mu, &ts);
    }
    if (a->tail)
        a->tail->next = d;
    else
        a->head = d;
    a->tail = d;
    atomic_fetch_add(&a->count, 1);
    pthread_cond_signal(&a->cv_work);
    pthread_mutex_unlock(&a->mu);
}

/* Records appended with future=False: a success needs nothing from Python; a failure is
 * queued for the resolvers, which log it (there is no future to carry it). */
void vp_app_on_appended_bare(const varlog_append_result_t *r, void *opaque)
{
    if (r->err == VARLOG_OK)
        return;
    done_t *d = calloc(1, sizeof *d);
    if (d == NULL)
        return; /* counted in stats()["calls_failed"] all the same */
    d->owner = opaque;
    vp_app_on_appended(r, d);
}

static void keep_or_report(vp_appender_t *a, PyObject *obj);

static void log_failure(done_t *d)
{
    PyObject *r = PyObject_CallMethod(
        d->owner->client->logger, "log", "issss", 30, "append (future=False) failed: %s (%s): %s",
        varlog_err_name(d->err), varlog_outcome_name(d->outcome), d->errtext ? d->errtext : "");
    if (r == NULL)
        keep_or_report(d->owner, d->owner->client->logger);
    Py_XDECREF(r);
}

/* Keeps what a done-callback raised that is not an Exception (KeyboardInterrupt, SystemExit:
 * concurrent.futures lets those through) for the waiting call to raise; anything else, or a
 * second one, is unraisable as before. GIL held, an error set. */
static void keep_or_report(vp_appender_t *a, PyObject *obj)
{
    if (a->interrupt == NULL && !PyErr_ExceptionMatches(PyExc_Exception)) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyErr_NormalizeException(&et, &ev, &tb);
        if (ev != NULL && tb != NULL)
            PyException_SetTraceback(ev, tb);
        Py_XDECREF(et);
        Py_XDECREF(tb);
        a->interrupt = ev;
        if (a->interrupt != NULL)
            return;
        PyErr_SetString(PyExc_SystemError, "a done-callback's exception was lost");
    }
    PyErr_WriteUnraisable(obj);
}

/* Raises the BaseException a done-callback raised, if there is one: returns -1 then. */
int vp_app_raise_interrupt(vp_appender_t *a)
{
    PyObject *ev = a->interrupt;
    if (ev == NULL)
        return 0;
    a->interrupt = NULL;
    PyErr_SetObject((PyObject *)Py_TYPE(ev), ev);
    Py_DECREF(ev);
    return -1;
}

void vp_app_done_free(done_t *d)
{
    free(d->errtext);
    free(d->metas);
    free(d);
}

/* A sequence's result: its records' EntryMeta in order. */
static PyObject *meta_list(const done_t *d)
{
    PyObject *l = PyList_New((Py_ssize_t)d->n);
    for (size_t i = 0; l != NULL && i < d->n; i++) {
        PyObject *m = vp_meta_new(&d->metas[i]);
        if (m == NULL)
            Py_CLEAR(l);
        else
            PyList_SET_ITEM(l, (Py_ssize_t)i, m);
    }
    return l;
}

static void resolve(done_t *d)
{
    if (d->fut == NULL) {
        log_failure(d);
        vp_app_done_free(d);
        return;
    }
    PyObject *arg = d->err != VARLOG_OK ? vp_make_error(d->err, d->errtext, (int)d->outcome)
                    : d->metas != NULL  ? meta_list(d)
                                        : vp_meta_new(&d->meta);
    if (arg == NULL || vp_future_resolve(d->fut, arg, d->err != VARLOG_OK) < 0)
        keep_or_report(d->owner, d->fut);
    Py_XDECREF(arg);
    Py_DECREF(d->fut);
    vp_app_done_free(d);
}

bool vp_app_drains_here(vp_appender_t *a)
{
    return a->draining > 0 && pthread_equal(a->drainer, pthread_self());
}

/* Resolves every settled call's future, in order, one at a time from a->taken, so that a drain
 * begun inside a done-callback of this thread's drain (its flush, close or append) continues
 * the same list where the outer one is. GIL held. Returns false when another thread's drain is
 * in progress (the caller may wait for it). */
bool vp_app_drain(vp_appender_t *a)
{
    if (a->draining > 0 && !vp_app_drains_here(a))
        return false;
    a->draining++;
    a->drainer = pthread_self();
    vp_drain_depth++;
    for (;;) {
        if (a->taken == NULL) {
            pthread_mutex_lock(&a->mu);
            a->taken = a->head;
            a->head = a->tail = NULL;
            atomic_store(&a->count, 0);
            pthread_cond_broadcast(&a->cv_room);
            pthread_mutex_unlock(&a->mu);
            if (a->taken == NULL)
                break;
        }
        done_t *d = a->taken;
        a->taken = d->next;
        resolve(d);
    }
    a->draining--;
    vp_drain_depth--;
    return true;
}

/* Around a wait in the library that nobody else may drain for: this thread's own drain is
 * under way (a done-callback waits), or a close settles every call. Wakes the library's
 * thread if it already waits for room. */
void vp_app_room_wait_off(vp_appender_t *a)
{
    pthread_mutex_lock(&a->mu);
    atomic_fetch_add(&a->no_room_wait, 1);
    pthread_cond_broadcast(&a->cv_room);
    pthread_mutex_unlock(&a->mu);
}

void vp_app_room_wait_on(vp_appender_t *a)
{
    atomic_fetch_sub(&a->no_room_wait, 1);
}

/* Waits, GIL held, until every call settled so far has its future resolved (on the draining
 * thread, from a done-callback, by draining them itself). */
void vp_app_drain_all(vp_appender_t *a)
{
    while (!vp_app_drain(a) || atomic_load(&a->count) > 0) {
        Py_BEGIN_ALLOW_THREADS
        sched_yield();
        Py_END_ALLOW_THREADS
    }
}

void *vp_app_resolver_main(void *arg)
{
    vp_appender_t *a = arg;
    pthread_setname_np(pthread_self(), "varlog-py-res");
    for (;;) {
        pthread_mutex_lock(&a->mu);
        while (a->head == NULL && !a->stop)
            pthread_cond_wait(&a->cv_work, &a->mu);
        bool stop = a->stop;
        pthread_mutex_unlock(&a->mu);
        if (stop)
            break;
        /* A producer that keeps appending resolves the futures itself, without a GIL
         * hand-off (which costs it the switch interval's wait and two context switches):
         * give it RESOLVER_GRACE_NS first, and take the GIL only for what is still there. */
        struct timespec grace = {0, RESOLVER_GRACE_NS};
        nanosleep(&grace, NULL);
        pthread_mutex_lock(&a->mu);
        bool work = a->head != NULL;
        stop = a->stop;
        pthread_mutex_unlock(&a->mu);
        if (stop)
            break;
        if (!work)
            continue;
        PyGILState_STATE st;
        if (!vp_gil_enter(&st))
            break;
        if (!vp_app_drain(a)) {
            /* the producer is resolving them: let it, rather than spin on the GIL */
            Py_BEGIN_ALLOW_THREADS
            sched_yield();
            Py_END_ALLOW_THREADS
        }
        PyGILState_Release(st);
    }
    /* the reference taken for this thread; not dropped when Python is finalizing */
    PyGILState_STATE st;
    if (vp_gil_enter(&st)) {
        Py_DECREF(a);
        PyGILState_Release(st);
    }
    return NULL;
}
