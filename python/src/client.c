/* varlog.Client: one libvarlog client, its synchronous calls, statistics and the log bridge. */
#include "varlog_py.h"

#include <time.h>

static vp_client_t *live_clients; /* guarded by the GIL */

/* Calls in progress with the GIL released hold the C pointer; close waits for them rather
 * than free what they are about to use (each is bounded by its own timeout). */
#define CALL_BEGIN(c) (((vp_client_t *)(c))->calls++)
#define CALL_END(c) (((vp_client_t *)(c))->calls--)

varlog_client_t *vp_client_get(vp_client_t *c)
{
    if (c->client == NULL) {
        PyObject *exc = vp_make_error(VARLOG_ERR_CLOSED, "the client is closed", -1);
        if (exc != NULL) {
            PyErr_SetObject(vp.Closed, exc);
            Py_DECREF(exc);
        }
        return NULL;
    }
    return c->client;
}

int vp_client_adopt(vp_client_t *c, PyObject *child)
{
    PyObject *ref = PyWeakref_NewRef(child, NULL);
    if (ref == NULL)
        return -1;
    /* drop references to children already gone, so a long-lived client does not grow */
    Py_ssize_t n = PyList_GET_SIZE(c->children);
    for (Py_ssize_t i = n - 1; i >= 0; i--)
        if (PyWeakref_GetObject(PyList_GET_ITEM(c->children, i)) == Py_None)
            PySequence_DelItem(c->children, i);
    int rc = PyList_Append(c->children, ref);
    Py_DECREF(ref);
    return rc;
}

static void pause_1ms(void)
{
    Py_BEGIN_ALLOW_THREADS
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
    Py_END_ALLOW_THREADS
}

/* Closes c once. c->client is cleared first, so that no call, appender or subscription starts
 * once close began; the calls in progress (appender and subscribe among them, which adopt
 * their child before they end) are waited for; only then are the children closed, all of them,
 * none being added any more. A close while another thread's is under way waits for it, except
 * inside a drain (a done-callback): the closing thread may be waiting for that drain. */
static int client_close_impl(vp_client_t *c)
{
    if (c->client == NULL) {
        while (c->closing && vp_drain_depth == 0)
            pause_1ms();
        return 0;
    }
    PyObject *kept = NULL; /* the first KeyboardInterrupt a done-callback raised */
    varlog_client_t *p = c->client;
    c->client = NULL;
    c->closing = true;
    while (c->calls > 0)
        pause_1ms();
    /* appenders first, as varlog_client_destroy would (timeout 0), but through their Python
     * objects so that their futures are resolved and their resolver threads joined */
    while (c->children != NULL && PyList_GET_SIZE(c->children) > 0) {
        PyObject *kids = c->children;
        c->children = PyList_New(0);
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(kids); i++) {
            PyObject *o = PyWeakref_GetObject(PyList_GET_ITEM(kids, i));
            if (o == Py_None)
                continue;
            Py_INCREF(o);
            if (PyObject_TypeCheck(o, &vp_appender_type)) {
                PyObject *k = vp_appender_close_quiet((vp_appender_t *)o);
                if (kept == NULL)
                    kept = k;
                else
                    Py_XDECREF(k);
            } else
                vp_subscription_close_quiet((vp_subscription_t *)o);
            Py_DECREF(o);
        }
        Py_DECREF(kids);
    }
    Py_BEGIN_ALLOW_THREADS
    varlog_client_destroy(p);
    Py_END_ALLOW_THREADS
    if (c->prev)
        c->prev->next = c->next;
    else if (live_clients == c)
        live_clients = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    c->closing = false;
    if (kept == NULL)
        return 0;
    PyErr_SetObject((PyObject *)Py_TYPE(kept), kept);
    Py_DECREF(kept);
    return -1;
}

void vp_client_forget_all(void)
{
    for (vp_client_t *c = live_clients, *next; c != NULL; c = next) {
        next = c->next;
        c->client = NULL;
        c->calls = 0;
        c->closing = false;
        for (Py_ssize_t i = 0; c->children != NULL && i < PyList_GET_SIZE(c->children); i++) {
            PyObject *o = PyWeakref_GetObject(PyList_GET_ITEM(c->children, i));
            if (o == Py_None)
                continue;
            if (PyObject_TypeCheck(o, &vp_appender_type))
                vp_appender_forget((vp_appender_t *)o);
            else
                vp_subscription_forget((vp_subscription_t *)o);
        }
        c->prev = c->next = NULL;
    }
    live_clients = NULL;
}

void vp_client_close_all(void)
{
    while (live_clients != NULL) {
        vp_client_t *c = live_clients;
        Py_INCREF(c);
        if (client_close_impl(c) < 0)
            PyErr_WriteUnraisable((PyObject *)c);
        if (live_clients == c) /* unlinked by close; defensive against a loop */
            live_clients = c->next;
        Py_DECREF(c);
    }
}

static int client_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    vp_client_t *c = (vp_client_t *)self;
    if (c->client != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Client.__init__ called twice");
        return -1;
    }
    PyObject *addresses = NULL, *properties = Py_None, *logger = Py_None;
    if (!PyArg_ParseTuple(args, "O|O:Client", &addresses, &properties))
        return -1;
    PyObject *rest = kwargs ? PyDict_Copy(kwargs) : PyDict_New();
    if (rest == NULL)
        return -1;
    PyObject *v;
    if ((v = PyDict_GetItemString(rest, "properties")) != NULL) {
        properties = v;
        Py_INCREF(properties);
        PyDict_DelItemString(rest, "properties");
    } else {
        Py_INCREF(properties);
    }
    if ((v = PyDict_GetItemString(rest, "logger")) != NULL) {
        logger = v;
        PyDict_DelItemString(rest, "logger"); /* still referenced by kwargs */
    }
    int rc = -1;
    varlog_conf_t *conf = varlog_conf_new();
    if (conf == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    PyObject *addr_list =
        PyUnicode_Check(addresses) ? PyTuple_Pack(1, addresses) : PySequence_Tuple(addresses);
    if (addr_list == NULL)
        goto out;
    PyObject *props = PyDict_New();
    if (props == NULL || PyDict_SetItemString(props, "metadata.addresses", addr_list) < 0) {
        Py_DECREF(addr_list);
        Py_XDECREF(props);
        goto out;
    }
    Py_DECREF(addr_list);
    int crc = vp_conf_apply(conf, props, NULL);
    Py_DECREF(props);
    if (crc < 0 || vp_conf_apply(conf, properties, rest) < 0)
        goto out;
    c->logger = logger == Py_None ? vp.default_logger : logger;
    Py_INCREF(c->logger);
    varlog_conf_set_log_cb(conf, vp_log_cb, c->logger);
    if (vp_library_check() < 0)
        goto out;
    char errstr[512];
    varlog_client_t *client = NULL;
    varlog_err_t err;
    Py_BEGIN_ALLOW_THREADS
    err = varlog_client_new(&conf, &client, errstr, sizeof errstr);
    Py_END_ALLOW_THREADS
    if (err != VARLOG_OK) {
        PyObject *exc = vp_make_error(err, errstr, -1);
        if (exc != NULL) {
            PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
            Py_DECREF(exc);
        }
        goto out;
    }
    c->client = client;
    c->next = live_clients;
    if (live_clients)
        live_clients->prev = c;
    live_clients = c;
    rc = 0;
out:
    varlog_conf_destroy(conf);
    Py_DECREF(properties);
    Py_DECREF(rest);
    return rc;
}

static PyObject *client_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    vp_client_t *c = (vp_client_t *)type->tp_alloc(type, 0);
    if (c == NULL)
        return NULL;
    c->children = PyList_New(0);
    if (c->children == NULL) {
        Py_DECREF(c);
        return NULL;
    }
    return (PyObject *)c;
}

static void client_dealloc(PyObject *self)
{
    vp_client_t *c = (vp_client_t *)self;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (client_close_impl(c) < 0)
        PyErr_WriteUnraisable(self);
    PyErr_Restore(et, ev, tb);
    if (c->weakreflist != NULL)
        PyObject_ClearWeakRefs(self);
    Py_XDECREF(c->logger);
    Py_XDECREF(c->children);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *client_close(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    if (client_close_impl((vp_client_t *)self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *client_enter(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    if (vp_client_get((vp_client_t *)self) == NULL)
        return NULL;
    Py_INCREF(self);
    return self;
}

static PyObject *client_exit(PyObject *self, PyObject *args)
{
    (void)args;
    if (client_close_impl((vp_client_t *)self) < 0)
        return NULL;
    Py_RETURN_FALSE;
}

static PyObject *id_list(const int32_t *ids, size_t n)
{
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l != NULL && i < n; i++) {
        PyObject *v = PyLong_FromLong(ids[i]);
        if (v == NULL) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, v);
    }
    return l;
}

/* which: 0 topics, 1 log streams, 2 appendable log streams */
static PyObject *list_ids(vp_client_t *c, int which, int32_t topic)
{
    varlog_client_t *cl = vp_client_get(c);
    if (cl == NULL)
        return NULL;
    int32_t stack[64], *ids = stack;
    size_t cap = 64, n = 0;
    for (;;) {
        varlog_err_t err = which == 0 ? varlog_client_topics(cl, ids, cap, &n)
                           : which == 1
                               ? varlog_client_log_streams(cl, topic, ids, cap, &n)
                               : varlog_client_appendable_log_streams(cl, topic, ids, cap, &n);
        if (err != VARLOG_OK) {
            if (ids != stack)
                PyMem_Free(ids);
            return vp_raise(err, -1);
        }
        if (n <= cap)
            break;
        if (ids != stack)
            PyMem_Free(ids);
        cap = n;
        ids = PyMem_Malloc(cap * sizeof *ids);
        if (ids == NULL)
            return PyErr_NoMemory();
    }
    PyObject *l = id_list(ids, n);
    if (ids != stack)
        PyMem_Free(ids);
    return l;
}

static PyObject *client_topics(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    return list_ids((vp_client_t *)self, 0, 0);
}

static PyObject *client_log_streams(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "appendable", NULL};
    int32_t topic;
    int appendable = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|$p:log_streams", kwlist, &topic, &appendable))
        return NULL;
    return list_ids((vp_client_t *)self, appendable ? 2 : 1, topic);
}

static PyObject *client_refresh(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"timeout", NULL};
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:refresh", kwlist, &timeout))
        return NULL;
    int64_t ms = vp_timeout_ms(timeout, -1);
    varlog_client_t *cl = vp_client_get((vp_client_t *)self);
    if (ms == -2 || cl == NULL)
        return NULL;
    varlog_err_t err;
    CALL_BEGIN(self);
    Py_BEGIN_ALLOW_THREADS
    err = varlog_client_refresh(cl, ms);
    Py_END_ALLOW_THREADS
    CALL_END(self);
    if (err != VARLOG_OK)
        return vp_raise(err, -1);
    return PyLong_FromUnsignedLongLong(varlog_client_applied_index(cl));
}

static PyObject *do_append(PyObject *self, int32_t topic, int32_t ls, PyObject *records,
                           PyObject *timeout)
{
    int64_t ms = vp_timeout_ms(timeout, -1);
    if (ms == -2)
        return NULL;
    if (ms == 0) {
        PyErr_SetString(PyExc_ValueError, "timeout must be None or above 0 for append");
        return NULL;
    }
    vp_records_t r;
    if (vp_records_get(records, &r) < 0)
        return NULL;
    /* after vp_records_get, which may run Python code (a generator, a buffer exporter) during
     * which another thread may close the client */
    varlog_client_t *cl = vp_client_get((vp_client_t *)self);
    if (cl == NULL) {
        vp_records_release(&r);
        return NULL;
    }
    varlog_entry_meta_t stack[16], *metas = stack;
    if (r.n > 16 && (metas = PyMem_Malloc((size_t)r.n * sizeof *metas)) == NULL) {
        vp_records_release(&r);
        return PyErr_NoMemory();
    }
    varlog_err_t err;
    varlog_outcome_t outcome = VARLOG_NOT_APPENDED;
    CALL_BEGIN(self);
    Py_BEGIN_ALLOW_THREADS
    if (ls > 0)
        err = varlog_append_to(cl, topic, ls, r.records, (size_t)r.n, ms, metas, &outcome);
    else
        err = varlog_append(cl, topic, r.records, (size_t)r.n, ms, metas, &outcome);
    Py_END_ALLOW_THREADS
    CALL_END(self);
    PyObject *res = NULL;
    if (err != VARLOG_OK) {
        vp_raise(err, (int)outcome);
    } else if ((res = PyList_New(r.n)) != NULL) {
        for (Py_ssize_t i = 0; i < r.n; i++) {
            PyObject *m = vp_meta_new(&metas[i]);
            if (m == NULL) {
                Py_CLEAR(res);
                break;
            }
            PyList_SET_ITEM(res, i, m);
        }
    }
    if (metas != stack)
        PyMem_Free(metas);
    vp_records_release(&r);
    return res;
}

static PyObject *client_append(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "records", "timeout", NULL};
    int32_t topic;
    PyObject *records, *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iO|O:append", kwlist, &topic, &records, &timeout))
        return NULL;
    return do_append(self, topic, 0, records, timeout);
}

static PyObject *client_append_to(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "log_stream", "records", "timeout", NULL};
    int32_t topic, ls;
    PyObject *records, *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iiO|O:append_to", kwlist, &topic, &ls, &records,
                                     &timeout))
        return NULL;
    if (ls < 1) {
        PyErr_SetString(vp.InvalidArgument, "log_stream must be 1 or more");
        return NULL;
    }
    return do_append(self, topic, ls, records, timeout);
}

static PyObject *client_peek(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "log_stream", "timeout", NULL};
    int32_t topic, ls;
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ii|O:peek", kwlist, &topic, &ls, &timeout))
        return NULL;
    int64_t ms = vp_timeout_ms(timeout, -1);
    varlog_client_t *cl = vp_client_get((vp_client_t *)self);
    if (ms == -2 || cl == NULL)
        return NULL;
    varlog_entry_meta_t first, last;
    bool complete = false;
    varlog_err_t err;
    CALL_BEGIN(self);
    Py_BEGIN_ALLOW_THREADS
    err = varlog_peek(cl, topic, ls, ms, &first, &last, &complete);
    Py_END_ALLOW_THREADS
    CALL_END(self);
    if (err != VARLOG_OK)
        return vp_raise(err, -1);
    return Py_BuildValue("(NNO)", vp_meta_new(&first), vp_meta_new(&last),
                         complete ? Py_True : Py_False);
}

static PyObject *client_trim(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "until_glsn", "timeout", NULL};
    int32_t topic;
    unsigned long long until;
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iK|O:trim", kwlist, &topic, &until, &timeout))
        return NULL;
    int64_t ms = vp_timeout_ms(timeout, -1);
    varlog_client_t *cl = vp_client_get((vp_client_t *)self);
    if (ms == -2 || cl == NULL)
        return NULL;
    varlog_err_t err;
    CALL_BEGIN(self);
    Py_BEGIN_ALLOW_THREADS
    err = varlog_trim(cl, topic, (uint64_t)until, ms);
    Py_END_ALLOW_THREADS
    CALL_END(self);
    if (err != VARLOG_OK)
        return vp_raise(err, -1);
    Py_RETURN_NONE;
}

static PyObject *client_stats(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    varlog_client_t *cl = vp_client_get((vp_client_t *)self);
    if (cl == NULL)
        return NULL;
    char *json = NULL;
    size_t len = 0;
    varlog_err_t err = varlog_stats_json(cl, &json, &len);
    if (err != VARLOG_OK)
        return vp_raise(err, -1);
    PyObject *jsonmod = PyImport_ImportModule("json");
    PyObject *res = NULL;
    if (jsonmod != NULL) {
        res = PyObject_CallMethod(jsonmod, "loads", "s#", json, (Py_ssize_t)len);
        Py_DECREF(jsonmod);
    }
    varlog_stats_json_free(json);
    return res;
}

/* The Prometheus text, with the GIL released: it reads the client's metadata and may ask
 * storage nodes for log streams' tails (bounded by metadata.call.timeout.ms). */
static PyObject *client_metrics(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    varlog_client_t *cl = vp_client_get((vp_client_t *)self);
    if (cl == NULL)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    varlog_err_t err;
    CALL_BEGIN(self);
    Py_BEGIN_ALLOW_THREADS
    err = varlog_stats_prometheus(cl, &text, &len);
    Py_END_ALLOW_THREADS
    CALL_END(self);
    if (err != VARLOG_OK)
        return vp_raise(err, -1);
    PyObject *res = PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "replace");
    varlog_stats_prometheus_free(text);
    return res;
}

static PyObject *client_get_closed(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(((vp_client_t *)self)->client == NULL);
}

static PyObject *client_get_applied_index(PyObject *self, void *closure)
{
    (void)closure;
    varlog_client_t *cl = vp_client_get((vp_client_t *)self);
    return cl ? PyLong_FromUnsignedLongLong(varlog_client_applied_index(cl)) : NULL;
}

/* defined in appender.c and subscription.c, methods of Client */
PyObject *vp_client_appender(PyObject *self, PyObject *args, PyObject *kw);
PyObject *vp_client_subscribe(PyObject *self, PyObject *args, PyObject *kw);
PyObject *vp_client_subscribe_to(PyObject *self, PyObject *args, PyObject *kw);

#define KW (PyCFunction)(void (*)(void))
static PyMethodDef client_methods[] = {
    {"close", client_close, METH_NOARGS,
     "close() -> None\n\nCloses the client: later calls raise Closed at once; waits for calls "
     "in progress on other threads to return (each bounded by its timeout); then closes its "
     "appenders, as Appender.close(timeout=0) (pending futures fail with Closed or "
     "MaybeAppended), and its subscriptions, those created by the calls waited for among "
     "them; joins every thread of the library. No log record is emitted after it returns. "
     "Idempotent: a close while another thread's runs waits for it (except from a "
     "done-callback, whose drain that close may be waiting for)."},
    {"__enter__", client_enter, METH_NOARGS, NULL},
    {"__exit__", client_exit, METH_VARARGS, NULL},
    {"topics", client_topics, METH_NOARGS,
     "topics() -> list[int]\n\nTopic ids in the client's current metadata view (no network "
     "call), increasing."},
    {"log_streams", KW client_log_streams, METH_VARARGS | METH_KEYWORDS,
     "log_streams(topic, *, appendable=False) -> list[int]\n\nLog stream ids of topic in the "
     "metadata view (appendable=True: those append() would pick now). Raises UnknownTopic."},
    {"refresh", KW client_refresh, METH_VARARGS | METH_KEYWORDS,
     "refresh(timeout=None) -> int\n\nFetches the metadata now; returns its applied index. "
     "Releases the GIL while it waits."},
    {"append", KW client_append, METH_VARARGS | METH_KEYWORDS,
     "append(topic, records, timeout=None) -> list[EntryMeta]\n\nAppends records (one "
     "bytes-like object, or a list of them) as one batch, stored atomically with consecutive "
     "GLSNs in one log stream, and waits for the answer with the GIL released. The buffers are "
     "read in place (no copy) during the call. timeout: seconds for the whole call with its "
     "retries; None = no overall deadline (each attempt is bounded by "
     "append.attempt.timeout.ms).\nRaises NotAppended (certainly not stored: safe to retry), "
     "MaybeAppended (perhaps stored), InvalidArgument (a ValueError: empty record, too large "
     "a batch; nothing sent), TypeError (not bytes-like), Closed."},
    {"append_to", KW client_append_to, METH_VARARGS | METH_KEYWORDS,
     "append_to(topic, log_stream, records, timeout=None) -> list[EntryMeta]\n\nAs append(), "
     "to the given log stream (retries stay there)."},
    {"appender", KW vp_client_appender, METH_VARARGS | METH_KEYWORDS,
     "appender(topic, log_stream=0) -> Appender\n\nA pipelined appender for topic (or a "
     "(topic, log_stream) tuple): bound to log_stream when > 0, topic-wide when 0. Its "
     "properties are the client's appender.* properties."},
    {"subscribe", KW vp_client_subscribe, METH_VARARGS | METH_KEYWORDS,
     "subscribe(topic, begin, end=None, *, handler=None) -> Subscription\n\nThe topic's "
     "entries with GLSN in [begin, end) in GLSN order, each once, without gaps; end None tails "
     "for ever. Without a handler, an iterator of them (for, async for, next()). With one, "
     "handler(entry) is called for each, one at a time, on the subscription's own thread "
     "(varlog-sub), with the GIL taken there; what it raises ends the subscription (no "
     "handler after it) and is raised by wait(); no handler runs after close() returns. "
     "handler must be a plain function (TypeError for a coroutine function)."},
    {"subscribe_to", KW vp_client_subscribe_to, METH_VARARGS | METH_KEYWORDS,
     "subscribe_to(topic, log_stream, begin, end=None, *, handler=None) -> Subscription\n\n"
     "Entries of one log stream with LLSN in [begin, end), in LLSN order (their glsn is 0); "
     "handler as for subscribe."},
    {"peek", KW client_peek, METH_VARARGS | METH_KEYWORDS,
     "peek(topic, log_stream, timeout=None) -> (EntryMeta, EntryMeta, bool)\n\nThe first and "
     "last entries of a log stream as its replicas report them (zeros when empty) and whether "
     "the answer is complete (False: every answering replica is sealing)."},
    {"trim", KW client_trim, METH_VARARGS | METH_KEYWORDS,
     "trim(topic, until_glsn, timeout=None) -> None\n\nDeletes the topic's entries with GLSN "
     "<= until_glsn on every node holding it (asynchronously on the node); see "
     "varlog_trim in subscribe.h for what a node refuses silently."},
    {"stats", client_stats, METH_NOARGS,
     "stats() -> dict\n\nThe client's statistics document (varlog_stats_json, "
     "docs/STATISTICS.md), parsed."},
    {"metrics", client_metrics, METH_NOARGS,
     "metrics() -> str\n\nThe client's metrics in the Prometheus text exposition format 0.0.4 "
     "(varlog_stats_prometheus; every family in docs/STATISTICS.md), for an application to "
     "serve on its own /metrics endpoint. Releases the GIL while the library builds it (it "
     "reads the client's metadata and may ask storage nodes, within "
     "metadata.call.timeout.ms). Raises Closed after close()."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef client_getset[] = {
    {"closed", client_get_closed, NULL, "True once close() began.", NULL},
    {"applied_index", client_get_applied_index, NULL,
     "The applied index of the metadata the client uses.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject vp_client_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "varlog.Client",
    .tp_basicsize = sizeof(vp_client_t),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Client(addresses, properties=None, *, logger=None, **props)\n\n"
              "A client of one Varlog cluster, safe to share by threads. addresses: the "
              "metadata repository's 'host:port' (a str, comma-separated, or a list). "
              "Properties are the C library's (CONFIGURATION.md): dotted names in the "
              "properties dict, or as keyword arguments with underscores for dots "
              "(open_timeout_ms=2000 is open.timeout.ms). Values: str, int, bool, or a "
              "list (comma-joined). The library's log goes to logger (default "
              "logging.getLogger('varlog')), from whichever thread logs.\n"
              "Opening blocks (GIL released) for discovery within open.timeout.ms. Raises "
              "InvalidArgument (ValueError) for a bad property, VarlogError subclasses when "
              "discovery fails.",
    .tp_weaklistoffset = offsetof(vp_client_t, weakreflist),
    .tp_new = client_new,
    .tp_init = client_init,
    .tp_dealloc = client_dealloc,
    .tp_methods = client_methods,
    .tp_getset = client_getset,
};
