/* varlog.Subscription: varlog_subscribe / varlog_subscribe_to in either form.
 *
 * Iterator form (no handler): __next__ first asks for a buffered entry with the GIL held (no
 * hand-off when entries stream in), and otherwise waits in the library with the GIL
 * released, WAIT_CHUNK_MS at a time so that signals (KeyboardInterrupt) are noticed between
 * waits. Each entry's bytes are copied once into a bytes object: the library's buffer is
 * valid only until the next call. __aiter__ / __anext__ are varlog/_aio.py's: the same
 * no-wait take on the event loop, and the waits on a reader thread of the subscription's.
 *
 * Handler form (subscribe(..., handler=fn)): the library's subscription thread ("varlog-sub")
 * calls fn(entry) with the GIL taken for each entry. What fn raises ends the subscription
 * (closed from the handler, so no handler runs after it) and is kept as its failure, which
 * wait() raises. While a handler may run, the subscription holds a reference to itself, so
 * that it is not freed under its thread; on_end, on_error and close drop it.
 *
 * Locks: rw guards the pointer to the library's subscription: every use holds it for reading,
 * close takes it for writing only to take the pointer, and closes outside it (from another
 * thread, varlog_subscription_close waits for a running handler, which may itself read the
 * health). It prefers writers, so that a reader that takes it again after each chunk of its
 * wait cannot keep a close out. mu makes the readers of next() one at a time. Both are only
 * waited for with the GIL released (or tried). */
#include "subscription.h"

#include <stdatomic.h>
#include <string.h>
#include <structmember.h>
#include <time.h>

static void locks_init(vp_subscription_t *s)
{
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->rw, &attr);
    pthread_rwlockattr_destroy(&attr);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->done_mu, NULL);
    pthread_cond_init(&s->done_cv, NULL);
}

PyObject *vp_sub_raise_state(const char *text)
{
    PyObject *exc = vp_make_error(VARLOG_ERR_STATE, text, -1);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

static PyObject *raise_closed(const char *text)
{
    PyObject *exc = vp_make_error(VARLOG_ERR_CLOSED, text, -1);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

PyObject *vp_entry_new(const varlog_entry_t *e)
{
    PyObject *o = PyStructSequence_New(vp.entry_type);
    if (o == NULL)
        return NULL;
    PyStructSequence_SET_ITEM(o, 0, PyLong_FromUnsignedLongLong(e->meta.glsn));
    PyStructSequence_SET_ITEM(o, 1, PyLong_FromUnsignedLongLong(e->meta.llsn));
    PyStructSequence_SET_ITEM(o, 2, PyLong_FromLong(e->meta.topic_id));
    PyStructSequence_SET_ITEM(o, 3, PyLong_FromLong(e->meta.log_stream_id));
    PyStructSequence_SET_ITEM(o, 4, PyBytes_FromStringAndSize(e->data, (Py_ssize_t)e->len));
    for (Py_ssize_t i = 0; i < 5; i++)
        if (PyStructSequence_GET_ITEM(o, i) == NULL) {
            Py_DECREF(o);
            return NULL;
        }
    return o;
}

/* ---- creation ---- */

static PyObject *make_sub(PyObject *self, int32_t topic, int32_t ls, unsigned long long begin,
                          PyObject *end_obj, PyObject *handler)
{
    uint64_t end = VARLOG_GLSN_MAX;
    if (end_obj != Py_None) {
        end = PyLong_AsUnsignedLongLong(end_obj);
        if (end == (uint64_t)-1 && PyErr_Occurred())
            return NULL;
    }
    if (handler == Py_None)
        handler = NULL;
    if (handler != NULL) {
        if (!PyCallable_Check(handler)) {
            PyErr_SetString(PyExc_TypeError, "handler must be callable");
            return NULL;
        }
        PyObject *is_coro = vp_aio("is_coroutine_function");
        PyObject *r = is_coro ? PyObject_CallOneArg(is_coro, handler) : NULL;
        Py_XDECREF(is_coro);
        if (r == NULL)
            return NULL;
        int coro = PyObject_IsTrue(r);
        Py_DECREF(r);
        if (coro) {
            PyErr_SetString(PyExc_TypeError,
                            "handler must be a plain function (it runs on the subscription's "
                            "thread); in asyncio, use `async for entry in subscription`");
            return NULL;
        }
    }
    vp_client_t *c = (vp_client_t *)self;
    varlog_client_t *cl = vp_client_get(c);
    if (cl == NULL)
        return NULL;
    vp_subscription_t *s = PyObject_New(vp_subscription_t, &vp_subscription_type);
    if (s == NULL)
        return NULL;
    s->sub = NULL;
    locks_init(s);
    atomic_init(&s->closers, 0);
    atomic_init(&s->closing, false);
    s->client = c;
    Py_INCREF(c);
    s->weakreflist = NULL;
    s->ended = VARLOG_OK;
    s->failure = NULL;
    s->handler_form = handler != NULL;
    s->handler = handler;
    Py_XINCREF(handler);
    s->self_ref = false;
    s->published = false;
    s->close_when_published = false;
    s->done = false;
    s->aio = NULL;
    if (handler != NULL) {
        Py_INCREF(s); /* its thread's: handlers may run as soon as subscribe started it */
        s->self_ref = true;
    }
    varlog_subscribe_handlers_t h = {.on_entry = vp_sub_on_entry,
                                     .on_end = vp_sub_on_end,
                                     .on_error = vp_sub_on_error,
                                     .opaque = s};
    varlog_subscription_t *sub = NULL;
    varlog_err_t err;
    c->calls++;
    Py_BEGIN_ALLOW_THREADS
    if (ls > 0 && handler != NULL)
        err = varlog_subscribe_to(cl, topic, ls, (uint64_t)begin, end, &h, &sub);
    else if (ls > 0)
        err = varlog_subscribe_to_iter(cl, topic, ls, (uint64_t)begin, end, &sub);
    else if (handler != NULL)
        err = varlog_subscribe(cl, topic, (uint64_t)begin, end, &h, &sub);
    else
        err = varlog_subscribe_iter(cl, topic, (uint64_t)begin, end, &sub);
    Py_END_ALLOW_THREADS
    if (err == VARLOG_OK) {
        /* with the GIL, which the handler holds when it looks at published; nobody else
         * has s yet, so the lock is free */
        pthread_rwlock_wrlock(&s->rw);
        s->sub = sub;
        pthread_rwlock_unlock(&s->rw);
        s->published = true;
    }
    if (err != VARLOG_OK) {
        c->calls--;
        vp_sub_drop_self_ref(s);
        Py_DECREF(s);
        return vp_raise(err, -1);
    }
    if (c->client == NULL) {
        /* closed meanwhile: its close is waiting for this call */
        vp_sub_close(s);
        c->calls--;
        Py_DECREF(s);
        return raise_closed("the client was closed");
    }
    if (s->close_when_published)
        vp_sub_close(s);
    /* counted in c->calls until adopted: a close that begins meanwhile waits for it */
    int rc = vp_client_adopt(c, (PyObject *)s);
    c->calls--;
    if (rc < 0) {
        vp_sub_close(s);
        Py_DECREF(s);
        return NULL;
    }
    return (PyObject *)s;
}

PyObject *vp_client_subscribe(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "begin", "end", "handler", NULL};
    int32_t topic;
    unsigned long long begin;
    PyObject *end = Py_None, *handler = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iK|O$O:subscribe", kwlist, &topic, &begin, &end,
                                     &handler))
        return NULL;
    return make_sub(self, topic, 0, begin, end, handler);
}

PyObject *vp_client_subscribe_to(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "log_stream", "begin", "end", "handler", NULL};
    int32_t topic, ls;
    unsigned long long begin;
    PyObject *end = Py_None, *handler = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iiK|O$O:subscribe_to", kwlist, &topic, &ls, &begin,
                                     &end, &handler))
        return NULL;
    if (ls < 1) {
        PyErr_SetString(vp.InvalidArgument, "log_stream must be 1 or more");
        return NULL;
    }
    return make_sub(self, topic, ls, begin, end, handler);
}

/* ---- close ---- */

/* Idempotent. From another thread, returns once no handler runs (the library's close waits
 * for it); from the handler, at once (its return ends delivery). GIL held; keeps the error
 * indicator as it found it. */
void vp_sub_close(vp_subscription_t *s)
{
    varlog_subscription_t *p;
    atomic_store(&s->closing, true);
    Py_BEGIN_ALLOW_THREADS
    atomic_fetch_add(&s->closers, 1);
    pthread_rwlock_wrlock(&s->rw);
    p = s->sub;
    s->sub = NULL;
    pthread_rwlock_unlock(&s->rw);
    atomic_fetch_sub(&s->closers, 1);
    varlog_subscription_close(&p);
    Py_END_ALLOW_THREADS
    vp_sub_mark_done(s);
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (s->aio != NULL) {
        /* the async iterator's reader thread: its read returned CLOSED; end and join it */
        PyObject *r = PyObject_CallMethod(s->aio, "stop", NULL);
        if (r == NULL)
            PyErr_WriteUnraisable(s->aio);
        Py_XDECREF(r);
    }
    /* no handler runs any more (or it is this thread's, which holds its own references) */
    Py_CLEAR(s->handler);
    PyErr_Restore(et, ev, tb);
    vp_sub_drop_self_ref(s); /* last: may free s */
}

void vp_subscription_forget(vp_subscription_t *s)
{
    locks_init(s); /* a thread of the parent may have held them */
    atomic_init(&s->closers, 0);
    s->sub = NULL;
}

void vp_subscription_close_quiet(vp_subscription_t *s)
{
    vp_sub_close(s);
}

/* ---- iterator form ---- */

/* One varlog_subscription_next with mu and rw held, or CLOSED (*gone set) when the
 * subscription is gone. */
static varlog_err_t next_locked(vp_subscription_t *s, int64_t ms, varlog_entry_t *e, bool *gone)
{
    if (s->sub == NULL) {
        *gone = true;
        return VARLOG_ERR_CLOSED;
    }
    return varlog_subscription_next(s->sub, ms, e);
}

static void unlock_reader(vp_subscription_t *s)
{
    pthread_rwlock_unlock(&s->rw);
    pthread_mutex_unlock(&s->mu);
}

/* Returns a new Entry, NULL with StopIteration semantics (no error set) at the end, or NULL
 * with an exception. timeout_ms: -1 for ever. */
static PyObject *sub_next_timed(vp_subscription_t *s, int64_t timeout_ms, bool *timed_out)
{
    if (s->handler_form)
        return vp_sub_raise_state(
            "a subscription with a handler has no next(): its entries go to the "
            "handler (wait() waits for its end)");
    if (s->ended == VARLOG_ERR_END)
        return NULL;
    if (s->ended != VARLOG_OK) {
        PyErr_SetObject((PyObject *)Py_TYPE(s->failure), s->failure);
        return NULL;
    }
    bool gone = false;
    varlog_entry_t e;
    varlog_err_t err = VARLOG_ERR_TIMED_OUT;
    PyObject *res = NULL;
    /* the entry must be turned into bytes before the locks are released: a close would free
     * it */
    if (pthread_mutex_trylock(&s->mu) == 0) {
        if (pthread_rwlock_tryrdlock(&s->rw) == 0) {
            err = next_locked(s, 0, &e, &gone);
            if (err == VARLOG_OK)
                res = vp_entry_new(&e);
            pthread_rwlock_unlock(&s->rw);
        }
        pthread_mutex_unlock(&s->mu);
        if (err == VARLOG_OK)
            return res;
    }
    int64_t waited = 0;
    while (err == VARLOG_ERR_TIMED_OUT && (timeout_ms < 0 || waited < timeout_ms)) {
        int64_t chunk = WAIT_CHUNK_MS;
        if (timeout_ms >= 0 && timeout_ms - waited < chunk)
            chunk = timeout_ms - waited;
        Py_BEGIN_ALLOW_THREADS
        if (atomic_load(&s->closers) > 0) { /* a close waits for rw: let it in */
            err = VARLOG_ERR_CLOSED;
            gone = true;
        } else {
            pthread_mutex_lock(&s->mu);
            pthread_rwlock_rdlock(&s->rw);
            err = next_locked(s, chunk, &e, &gone);
            if (err != VARLOG_OK)
                unlock_reader(s);
        }
        Py_END_ALLOW_THREADS
        if (err == VARLOG_OK) {
            res = vp_entry_new(&e);
            unlock_reader(s);
            return res;
        }
        waited += chunk;
        if (err == VARLOG_ERR_TIMED_OUT && PyErr_CheckSignals() < 0)
            return NULL;
    }
    if (err == VARLOG_ERR_TIMED_OUT) {
        *timed_out = true;
        return NULL;
    }
    if (err == VARLOG_ERR_END) {
        s->ended = err;
        return NULL;
    }
    /* the library's text is this thread's, set by the call that just failed */
    s->failure = vp_make_error(err, gone ? "the subscription was closed" : varlog_last_error(), -1);
    if (s->failure == NULL)
        return NULL;
    s->ended = err;
    PyErr_SetObject((PyObject *)Py_TYPE(s->failure), s->failure);
    return NULL;
}

static PyObject *sub_iternext(PyObject *self)
{
    bool timed_out = false;
    return sub_next_timed((vp_subscription_t *)self, -1, &timed_out);
}

static PyObject *sub_next(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"timeout", NULL};
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:next", kwlist, &timeout))
        return NULL;
    int64_t ms = vp_timeout_ms(timeout, -1);
    if (ms == -2)
        return NULL;
    bool timed_out = false;
    PyObject *r = sub_next_timed((vp_subscription_t *)self, ms, &timed_out);
    if (r == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return r;
}

static PyObject *sub_iter(PyObject *self)
{
    if (((vp_subscription_t *)self)->handler_form)
        return vp_sub_raise_state(
            "a subscription with a handler cannot be iterated: its entries go "
            "to the handler");
    Py_INCREF(self);
    return self;
}

static PyObject *sub_aiter(PyObject *self)
{
    return sub_iter(self);
}

static PyObject *sub_anext(PyObject *self)
{
    if (((vp_subscription_t *)self)->handler_form)
        return sub_iter(self);
    PyObject *fn = vp_aio("sub_anext");
    if (fn == NULL)
        return NULL;
    PyObject *coro = PyObject_CallOneArg(fn, self);
    Py_DECREF(fn);
    return coro;
}

static PyObject *sub_close(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    vp_sub_close((vp_subscription_t *)self);
    Py_RETURN_NONE;
}

static PyObject *sub_enter(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    Py_INCREF(self);
    return self;
}

static PyObject *sub_exit(PyObject *self, PyObject *args)
{
    (void)args;
    vp_sub_close((vp_subscription_t *)self);
    Py_RETURN_FALSE;
}

static PyObject *sub_stats(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    vp_subscription_t *s = (vp_subscription_t *)self;
    varlog_subscription_stats_t st;
    varlog_err_t err;
    Py_BEGIN_ALLOW_THREADS
    pthread_rwlock_rdlock(&s->rw);
    err = s->sub ? varlog_subscription_stats(s->sub, &st) : VARLOG_ERR_CLOSED;
    pthread_rwlock_unlock(&s->rw);
    Py_END_ALLOW_THREADS
    if (err != VARLOG_OK)
        return vp_raise(err, -1);
    return Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:I,s:K}", "entries", (unsigned long long)st.entries, "bytes",
        (unsigned long long)st.bytes, "next_position", (unsigned long long)st.next_position,
        "resubscribes", (unsigned long long)st.resubscribes, "stalls",
        (unsigned long long)st.stalls, "duplicates", (unsigned long long)st.duplicates,
        "log_streams", (unsigned int)st.log_streams, "windows", (unsigned long long)st.windows);
}

static PyTypeObject *health_type;

static PyStructSequence_Field health_fields[] = {
    {"reconnecting", "some log stream of the subscription is in an outage"},
    {"log_streams_down", "how many are"},
    {"log_stream_id", "the one in an outage longest; 0 when none"},
    {"down_ms", "for how long, ms (0 when none); stops growing once the subscription ended"},
    {"timeout_ms", "subscribe.retry.timeout.ms: down_ms at which the subscription ends; -1 for "
                   "ever"},
    {"outages", "times the subscription began reconnecting (a change: an outage since)"},
    {"last_failure", "the latest failure of a stream ('log stream L at ADDR: what: reason'); "
                     "'' before the first"},
    {NULL, NULL},
};
static PyStructSequence_Desc health_desc = {
    "varlog.SubscriptionHealth",
    "Whether a subscription is reconnecting (varlog_subscription_health), as its consumer last "
    "saw it.",
    health_fields, 7};

static PyObject *sub_health(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    vp_subscription_t *s = (vp_subscription_t *)self;
    varlog_subscription_health_t h;
    varlog_err_t err;
    Py_BEGIN_ALLOW_THREADS
    pthread_rwlock_rdlock(&s->rw);
    err = s->sub ? varlog_subscription_health(s->sub, &h) : VARLOG_ERR_CLOSED;
    pthread_rwlock_unlock(&s->rw);
    Py_END_ALLOW_THREADS
    if (err != VARLOG_OK)
        return vp_raise(err, -1);
    h.last_failure[sizeof h.last_failure - 1] = '\0';
    PyObject *o = PyStructSequence_New(health_type);
    if (o == NULL)
        return NULL;
    PyStructSequence_SET_ITEM(o, 0, PyBool_FromLong(h.reconnecting));
    PyStructSequence_SET_ITEM(o, 1, PyLong_FromUnsignedLong(h.log_streams_down));
    PyStructSequence_SET_ITEM(o, 2, PyLong_FromLong(h.log_stream_id));
    PyStructSequence_SET_ITEM(o, 3, PyLong_FromLongLong(h.down_ms));
    PyStructSequence_SET_ITEM(o, 4, PyLong_FromLongLong(h.timeout_ms));
    PyStructSequence_SET_ITEM(o, 5, PyLong_FromUnsignedLongLong(h.outages));
    PyStructSequence_SET_ITEM(
        o, 6, PyUnicode_DecodeUTF8(h.last_failure, (Py_ssize_t)strlen(h.last_failure), "replace"));
    for (Py_ssize_t i = 0; i < 7; i++)
        if (PyStructSequence_GET_ITEM(o, i) == NULL) {
            Py_DECREF(o);
            return NULL;
        }
    return o;
}

static PyObject *sub_get_closed(PyObject *self, void *closure)
{
    (void)closure;
    vp_subscription_t *s = (vp_subscription_t *)self;
    bool closed;
    Py_BEGIN_ALLOW_THREADS
    pthread_rwlock_rdlock(&s->rw);
    closed = s->sub == NULL;
    pthread_rwlock_unlock(&s->rw);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(closed);
}

static void sub_dealloc(PyObject *self)
{
    vp_subscription_t *s = (vp_subscription_t *)self;
    /* not while a handler may run: its thread holds a reference (self_ref) */
    if (s->weakreflist != NULL)
        PyObject_ClearWeakRefs(self);
    vp_sub_close(s);
    pthread_rwlock_destroy(&s->rw);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->done_mu);
    pthread_cond_destroy(&s->done_cv);
    Py_XDECREF(s->failure);
    Py_XDECREF(s->handler);
    Py_XDECREF(s->aio);
    Py_XDECREF(s->client);
    PyObject_Free(self);
}

#define KW (PyCFunction)(void (*)(void))
static PyMethodDef sub_methods[] = {
    {"next", KW sub_next, METH_VARARGS | METH_KEYWORDS,
     "next(timeout=None) -> Entry | None\n\nThe next entry, waiting up to timeout seconds with "
     "the GIL released (None: for ever); None when the timeout passed or the range is "
     "complete (see ended). Raises the subscription's failure (Trimmed, VarlogError with an "
     "ERR_RPC_* name, ...) at this and every later call, Closed after close(). A subscription "
     "with a handler has none (VarlogError ERR_STATE)."},
    {"wait", KW vp_sub_wait, METH_VARARGS | METH_KEYWORDS,
     "wait(timeout=None) -> bool\n\nA subscription with a handler: waits, GIL released, until "
     "it is over, up to timeout seconds (None: for ever); True once its range was delivered "
     "or it was closed, False at the timeout. Raises its failure: the library's (Trimmed, "
     "VarlogError ERR_RPC_*, ...) or what the handler raised (the same exception object, "
     "KeyboardInterrupt included). Notices KeyboardInterrupt within 0.1 s."},
    {"close", sub_close, METH_NOARGS,
     "close() -> None\n\nEnds the subscription and its streams; a next() waiting on another "
     "thread raises Closed, an async iteration ends (StopAsyncIteration). With a handler: "
     "no handler runs after close() returns (from the handler itself, after it returns). "
     "Idempotent; does not block on the network."},
    {"__enter__", sub_enter, METH_NOARGS, NULL},
    {"__exit__", sub_exit, METH_VARARGS, NULL},
    {"stats", sub_stats, METH_NOARGS, "stats() -> dict\n\nvarlog_subscription_stats as a dict."},
    {"health", sub_health, METH_NOARGS,
     "health() -> SubscriptionHealth\n\nWhether the subscription is reconnecting "
     "(varlog_subscription_health), as its consumer last saw it: the reader of next() or "
     "the iterator (which notices failures only while it waits), or the handler's thread. "
     "A named tuple (reconnecting, log_streams_down, log_stream_id, down_ms, timeout_ms, "
     "outages, last_failure). Does not block (a brief lock). Raises Closed after close()."},
    {NULL, NULL, 0, NULL},
};

static PyObject *sub_get_ended(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(((vp_subscription_t *)self)->ended == VARLOG_ERR_END);
}

static PyGetSetDef sub_getset[] = {
    {"closed", sub_get_closed, NULL, "True once close() was called (or the handler raised).", NULL},
    {"ended", sub_get_ended, NULL, "True once every entry of the range was delivered.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef sub_members[] = {
    {"_aio", T_OBJECT, offsetof(vp_subscription_t, aio), 0,
     "varlog._aio's state of the async iterator."},
    {NULL, 0, 0, 0, NULL},
};

static PyAsyncMethods sub_async = {
    .am_aiter = sub_aiter,
    .am_anext = sub_anext,
};

PyTypeObject vp_subscription_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "varlog.Subscription",
    .tp_basicsize = sizeof(vp_subscription_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A subscription (Client.subscribe / subscribe_to). Without a handler: an "
              "iterator of Entry (for, or async for) in GLSN (LLSN) order, each position of "
              "the range once, without gaps; StopIteration (StopAsyncIteration) once the range "
              "is complete; the subscription's failure raised otherwise. Waits with the GIL "
              "released, noticing KeyboardInterrupt within 0.1 s; async for waits off the "
              "event loop. One reader at a time; any thread may close it. With a handler: "
              "entries go to it on the subscription's thread; wait() waits for the end.",
    .tp_weaklistoffset = offsetof(vp_subscription_t, weakreflist),
    .tp_dealloc = sub_dealloc,
    .tp_as_async = &sub_async,
    .tp_iter = sub_iter,
    .tp_iternext = sub_iternext,
    .tp_methods = sub_methods,
    .tp_members = sub_members,
    .tp_getset = sub_getset,
};

int vp_subscription_init_type(PyObject *m)
{
    if (PyType_Ready(&vp_subscription_type) < 0)
        return -1;
    health_type = PyStructSequence_NewType(&health_desc);
    if (health_type == NULL ||
        PyModule_AddObjectRef(m, "SubscriptionHealth", (PyObject *)health_type) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "Subscription", (PyObject *)&vp_subscription_type);
}
