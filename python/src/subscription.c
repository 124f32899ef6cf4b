/* varlog.Subscription: the iterator form of varlog_subscribe / varlog_subscribe_to.
 *
 * __next__ first asks for a buffered entry with the GIL held (no hand-off when entries
 * stream in), and otherwise waits in the library with the GIL released, WAIT_CHUNK_MS at a
 * time so that signals (KeyboardInterrupt) are noticed between waits. Each entry's bytes are
 * copied once into a bytes object: the library's buffer is valid only until the next call. */
#include "varlog_py.h"

#include <stdatomic.h>
#include <string.h>

#define WAIT_CHUNK_MS 100

struct vp_subscription {
    PyObject_HEAD
        /* guarded by mu, which is only ever waited for with the GIL released (or tried) */
        varlog_subscription_t *sub;
    pthread_mutex_t mu;
    /* closes waiting for mu: a reader stops taking it back, as a mutex is not fair and a
     * reader that relocks after each chunk of its wait could keep a close out for ever */
    atomic_int closers;
    vp_client_t *client;
    PyObject *weakreflist;
    varlog_err_t ended; /* END, or the failure, once reported (GIL-guarded) */
    PyObject *failure;  /* the exception raised for it, raised again by later calls */
};

static PyObject *entry_new(const varlog_entry_t *e)
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

static PyObject *adopt_sub(vp_client_t *c, varlog_subscription_t *sub);

static PyObject *make_sub(PyObject *self, int32_t topic, int32_t ls, unsigned long long begin,
                          PyObject *end_obj)
{
    uint64_t end = VARLOG_GLSN_MAX;
    if (end_obj != Py_None) {
        end = PyLong_AsUnsignedLongLong(end_obj);
        if (end == (uint64_t)-1 && PyErr_Occurred())
            return NULL;
    }
    vp_client_t *c = (vp_client_t *)self;
    varlog_client_t *cl = vp_client_get(c);
    if (cl == NULL)
        return NULL;
    varlog_subscription_t *sub = NULL;
    varlog_err_t err;
    c->calls++;
    Py_BEGIN_ALLOW_THREADS
    if (ls > 0)
        err = varlog_subscribe_to_iter(cl, topic, ls, (uint64_t)begin, end, &sub);
    else
        err = varlog_subscribe_iter(cl, topic, (uint64_t)begin, end, &sub);
    Py_END_ALLOW_THREADS
    if (err == VARLOG_OK && c->client == NULL) {
        /* closed meanwhile: its close is waiting for this call */
        varlog_subscription_close(&sub);
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
    /* counted in c->calls until adopted: a close that begins meanwhile waits for it */
    PyObject *s = adopt_sub(c, sub);
    c->calls--;
    return s;
}

static PyObject *adopt_sub(vp_client_t *c, varlog_subscription_t *sub)
{
    vp_subscription_t *s = PyObject_New(vp_subscription_t, &vp_subscription_type);
    if (s == NULL) {
        varlog_subscription_close(&sub);
        return NULL;
    }
    s->sub = sub;
    pthread_mutex_init(&s->mu, NULL);
    atomic_init(&s->closers, 0);
    s->client = c;
    Py_INCREF(c);
    s->weakreflist = NULL;
    s->ended = VARLOG_OK;
    s->failure = NULL;
    if (vp_client_adopt(c, (PyObject *)s) < 0) {
        Py_DECREF(s);
        return NULL;
    }
    return (PyObject *)s;
}

PyObject *vp_client_subscribe(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "begin", "end", NULL};
    int32_t topic;
    unsigned long long begin;
    PyObject *end = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iK|O:subscribe", kwlist, &topic, &begin, &end))
        return NULL;
    return make_sub(self, topic, 0, begin, end);
}

PyObject *vp_client_subscribe_to(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "log_stream", "begin", "end", NULL};
    int32_t topic, ls;
    unsigned long long begin;
    PyObject *end = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iiK|O:subscribe_to", kwlist, &topic, &ls, &begin,
                                     &end))
        return NULL;
    if (ls < 1) {
        PyErr_SetString(vp.InvalidArgument, "log_stream must be 1 or more");
        return NULL;
    }
    return make_sub(self, topic, ls, begin, end);
}

static void sub_close_impl(vp_subscription_t *s)
{
    varlog_subscription_t *p;
    Py_BEGIN_ALLOW_THREADS
    atomic_fetch_add(&s->closers, 1);
    pthread_mutex_lock(&s->mu);
    p = s->sub;
    s->sub = NULL;
    varlog_subscription_close(&p);
    pthread_mutex_unlock(&s->mu);
    atomic_fetch_sub(&s->closers, 1);
    Py_END_ALLOW_THREADS
}

void vp_subscription_forget(vp_subscription_t *s)
{
    pthread_mutex_init(&s->mu, NULL); /* a reader of the parent may have held it */
    atomic_init(&s->closers, 0);
    s->sub = NULL;
}

void vp_subscription_close_quiet(vp_subscription_t *s)
{
    sub_close_impl(s);
}

/* One varlog_subscription_next under mu, or CLOSED (*gone set) when the subscription is gone. */
static varlog_err_t next_locked(vp_subscription_t *s, int64_t ms, varlog_entry_t *e, bool *gone)
{
    if (s->sub == NULL) {
        *gone = true;
        return VARLOG_ERR_CLOSED;
    }
    return varlog_subscription_next(s->sub, ms, e);
}

/* Returns a new Entry, NULL with StopIteration semantics (no error set) at the end, or NULL
 * with an exception. timeout_ms: -1 for ever. */
static PyObject *sub_next_timed(vp_subscription_t *s, int64_t timeout_ms, bool *timed_out)
{
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
    /* the entry must be turned into bytes before mu is released: a close would free it */
    if (pthread_mutex_trylock(&s->mu) == 0) {
        err = next_locked(s, 0, &e, &gone);
        if (err == VARLOG_OK)
            res = entry_new(&e);
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
        if (atomic_load(&s->closers) > 0) { /* a close waits for mu: let it in */
            err = VARLOG_ERR_CLOSED;
            gone = true;
        } else {
            pthread_mutex_lock(&s->mu);
            err = next_locked(s, chunk, &e, &gone);
            if (err != VARLOG_OK)
                pthread_mutex_unlock(&s->mu);
        }
        Py_END_ALLOW_THREADS
        if (err == VARLOG_OK) {
            res = entry_new(&e);
            pthread_mutex_unlock(&s->mu);
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

static PyObject *sub_close(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    sub_close_impl((vp_subscription_t *)self);
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
    sub_close_impl((vp_subscription_t *)self);
    Py_RETURN_FALSE;
}

static PyObject *sub_stats(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    vp_subscription_t *s = (vp_subscription_t *)self;
    varlog_subscription_stats_t st;
    varlog_err_t err;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&s->mu);
    err = s->sub ? varlog_subscription_stats(s->sub, &st) : VARLOG_ERR_CLOSED;
    pthread_mutex_unlock(&s->mu);
    Py_END_ALLOW_THREADS
    if (err != VARLOG_OK)
        return vp_raise(err, -1);
    return Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:I}", "entries", (unsigned long long)st.entries, "bytes",
        (unsigned long long)st.bytes, "next_position", (unsigned long long)st.next_position,
        "resubscribes", (unsigned long long)st.resubscribes, "stalls",
        (unsigned long long)st.stalls, "duplicates", (unsigned long long)st.duplicates,
        "log_streams", (unsigned int)st.log_streams);
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
    pthread_mutex_lock(&s->mu);
    err = s->sub ? varlog_subscription_health(s->sub, &h) : VARLOG_ERR_CLOSED;
    pthread_mutex_unlock(&s->mu);
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
    pthread_mutex_lock(&s->mu);
    closed = s->sub == NULL;
    pthread_mutex_unlock(&s->mu);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(closed);
}

static void sub_dealloc(PyObject *self)
{
    vp_subscription_t *s = (vp_subscription_t *)self;
    if (s->weakreflist != NULL)
        PyObject_ClearWeakRefs(self);
    sub_close_impl(s);
    pthread_mutex_destroy(&s->mu);
    Py_XDECREF(s->failure);
    Py_XDECREF(s->client);
    PyObject_Free(self);
}

#define KW (PyCFunction)(void (*)(void))
static PyMethodDef sub_methods[] = {
    {"next", KW sub_next, METH_VARARGS | METH_KEYWORDS,
     "next(timeout=None) -> Entry | None\n\nThe next entry, waiting up to timeout seconds with "
     "the GIL released (None: for ever); None when the timeout passed or the range is "
     "complete (see ended). Raises the subscription's failure (Trimmed, VarlogError with an "
     "ERR_RPC_* name, ...) at this and every later call, Closed after close()."},
    {"close", sub_close, METH_NOARGS,
     "close() -> None\n\nEnds the subscription and its streams; a next() waiting on another "
     "thread raises Closed. Idempotent; does not block on the network."},
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
    {"closed", sub_get_closed, NULL, "True once close() was called.", NULL},
    {"ended", sub_get_ended, NULL, "True once every entry of the range was delivered.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject vp_subscription_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "varlog.Subscription",
    .tp_basicsize = sizeof(vp_subscription_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An iterator of Entry (Client.subscribe / subscribe_to): in GLSN (LLSN) order, "
              "each position of the range once, without gaps; StopIteration once the range is "
              "complete; the subscription's failure raised otherwise. Waits with the GIL "
              "released, noticing KeyboardInterrupt within 0.1 s. One reader at a time; any "
              "thread may close it.",
    .tp_weaklistoffset = offsetof(vp_subscription_t, weakreflist),
    .tp_dealloc = sub_dealloc,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = sub_iternext,
    .tp_methods = sub_methods,
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
