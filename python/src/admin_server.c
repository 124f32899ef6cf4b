/* varlog.Admin (admin.h) and varlog.Server (the embedded server, server.h). */
#include "varlog_py.h"

#include <time.h>

#include <varlog/server.h>

/* ---- Admin ---- */

typedef struct vp_admin {
    PyObject_HEAD varlog_admin_t *admin;
    PyObject *logger;
    int calls; /* calls running with the GIL released (GIL-guarded) */
} vp_admin_t;

static int admin_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    vp_admin_t *a = (vp_admin_t *)self;
    const char *address;
    PyObject *properties = Py_None;
    if (!PyArg_ParseTuple(args, "s|O:Admin", &address, &properties))
        return -1;
    PyObject *rest = kwargs ? PyDict_Copy(kwargs) : PyDict_New();
    if (rest == NULL)
        return -1;
    PyObject *v, *logger = vp.default_logger;
    if ((v = PyDict_GetItemString(rest, "properties")) != NULL) {
        properties = v;
    }
    Py_INCREF(properties);
    PyDict_DelItemString(rest, "properties") < 0 ? PyErr_Clear() : (void)0;
    if ((v = PyDict_GetItemString(rest, "logger")) != NULL && v != Py_None)
        logger = v;
    Py_INCREF(logger);
    PyDict_DelItemString(rest, "logger") < 0 ? PyErr_Clear() : (void)0;
    int rc = -1;
    varlog_conf_t *conf = varlog_conf_new();
    if (conf == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    if (vp_conf_apply(conf, properties, rest) < 0)
        goto out;
    Py_XSETREF(a->logger, logger);
    Py_INCREF(logger);
    varlog_conf_set_log_cb(conf, vp_log_cb, a->logger);
    if (vp_library_check() < 0)
        goto out;
    char errstr[512];
    varlog_err_t err = varlog_admin_new(address, conf, &a->admin, errstr, sizeof errstr);
    if (err != VARLOG_OK) {
        PyObject *exc = vp_make_error(err, errstr, -1);
        if (exc) {
            PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
            Py_DECREF(exc);
        }
        goto out;
    }
    rc = vp_fork_track((void **)&a->admin);
out:
    varlog_conf_destroy(conf);
    Py_DECREF(properties);
    Py_DECREF(logger);
    Py_DECREF(rest);
    return rc;
}

static void admin_close_impl(vp_admin_t *a)
{
    varlog_admin_t *p = a->admin;
    if (p == NULL)
        return;
    a->admin = NULL;
    Py_BEGIN_ALLOW_THREADS
    varlog_admin_destroy(p);
    Py_END_ALLOW_THREADS
}

static void admin_dealloc(PyObject *self)
{
    admin_close_impl((vp_admin_t *)self);
    vp_fork_untrack((void **)&((vp_admin_t *)self)->admin);
    Py_XDECREF(((vp_admin_t *)self)->logger);
    Py_TYPE(self)->tp_free(self);
}

static varlog_admin_t *admin_get(vp_admin_t *a)
{
    if (a->admin == NULL) {
        PyObject *exc = vp_make_error(VARLOG_ERR_CLOSED, "the admin handle is closed", -1);
        if (exc) {
            PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
            Py_DECREF(exc);
        }
    }
    return a->admin;
}

static PyObject *topic_dict(const varlog_topic_info_t *t)
{
    return Py_BuildValue("{s:i,s:s,s:n}", "topic_id", t->topic_id, "status",
                         varlog_topic_status_name(t->status), "log_streams",
                         (Py_ssize_t)t->n_log_streams);
}

static PyObject *ls_dict(const varlog_log_stream_info_t *l)
{
    size_t n =
        l->n_replicas < VARLOG_ADMIN_MAX_REPLICAS ? l->n_replicas : VARLOG_ADMIN_MAX_REPLICAS;
    PyObject *reps = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; reps && i < n; i++)
        PyList_SET_ITEM(reps, (Py_ssize_t)i, PyLong_FromLong(l->replicas[i]));
    if (reps == NULL)
        return NULL;
    return Py_BuildValue("{s:i,s:i,s:s,s:N}", "topic_id", l->topic_id, "log_stream_id",
                         l->log_stream_id, "status", varlog_log_stream_status_name(l->status),
                         "replicas", reps);
}

static PyObject *sn_dict(const varlog_storage_node_info_t *s)
{
    return Py_BuildValue("{s:i,s:s,s:s,s:n}", "storage_node_id", s->storage_node_id, "status",
                         varlog_storage_node_status_name(s->status), "address", s->address,
                         "log_stream_replicas", (Py_ssize_t)s->n_log_stream_replicas);
}

/* One admin operation: op is the C call, run with the GIL released. */
#define ADMIN_CALL(self, timeout, call)                                                            \
    vp_admin_t *a_ = (vp_admin_t *)(self);                                                         \
    int64_t ms = vp_timeout_ms(timeout, -1);                                                       \
    varlog_admin_t *adm = ms == -2 ? NULL : admin_get(a_);                                         \
    if (adm == NULL)                                                                               \
        return NULL;                                                                               \
    varlog_err_t err;                                                                              \
    a_->calls++;                                                                                   \
    Py_BEGIN_ALLOW_THREADS                                                                         \
    err = (call);                                                                                  \
    Py_END_ALLOW_THREADS                                                                           \
    a_->calls--;                                                                                   \
    if (err != VARLOG_OK)                                                                          \
        return vp_raise(err, -1);

static PyObject *admin_add_topic(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"timeout", NULL};
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:add_topic", kwlist, &timeout))
        return NULL;
    int32_t id = 0;
    ADMIN_CALL(self, timeout, varlog_admin_add_topic(adm, ms, &id));
    return PyLong_FromLong(id);
}

static PyObject *admin_get_topic(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "timeout", NULL};
    PyObject *timeout = Py_None;
    int32_t topic;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|O:get_topic", kwlist, &topic, &timeout))
        return NULL;
    varlog_topic_info_t t;
    ADMIN_CALL(self, timeout, varlog_admin_get_topic(adm, topic, ms, &t));
    return topic_dict(&t);
}

static PyObject *admin_unregister_topic(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "timeout", NULL};
    PyObject *timeout = Py_None;
    int32_t topic;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|O:unregister_topic", kwlist, &topic, &timeout))
        return NULL;
    ADMIN_CALL(self, timeout, varlog_admin_unregister_topic(adm, topic, ms));
    Py_RETURN_NONE;
}

#define LIST_CAP 1024
static PyObject *admin_list_topics(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"timeout", NULL};
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:list_topics", kwlist, &timeout))
        return NULL;
    varlog_topic_info_t *out = PyMem_Calloc(LIST_CAP, sizeof *out);
    if (out == NULL)
        return PyErr_NoMemory();
    size_t n = 0;
    vp_admin_t *a_ = (vp_admin_t *)self;
    int64_t ms = vp_timeout_ms(timeout, -1);
    varlog_admin_t *adm = ms == -2 ? NULL : admin_get(a_);
    varlog_err_t err = VARLOG_ERR_CLOSED;
    if (adm != NULL) {
        Py_BEGIN_ALLOW_THREADS
        err = varlog_admin_list_topics(adm, ms, out, LIST_CAP, &n);
        Py_END_ALLOW_THREADS
    }
    PyObject *l = NULL;
    if (adm != NULL && err != VARLOG_OK)
        vp_raise(err, -1);
    else if (adm != NULL && (l = PyList_New(0)) != NULL)
        for (size_t i = 0; i < n && i < LIST_CAP; i++) {
            PyObject *d = topic_dict(&out[i]);
            if (d == NULL || PyList_Append(l, d) < 0) {
                Py_XDECREF(d);
                Py_CLEAR(l);
                break;
            }
            Py_DECREF(d);
        }
    PyMem_Free(out);
    return l;
}

static PyObject *admin_list_log_streams(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "timeout", NULL};
    PyObject *timeout = Py_None;
    int32_t topic;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|O:list_log_streams", kwlist, &topic, &timeout))
        return NULL;
    varlog_log_stream_info_t *out = PyMem_Calloc(LIST_CAP, sizeof *out);
    if (out == NULL)
        return PyErr_NoMemory();
    size_t n = 0;
    vp_admin_t *a_ = (vp_admin_t *)self;
    int64_t ms = vp_timeout_ms(timeout, -1);
    varlog_admin_t *adm = ms == -2 ? NULL : admin_get(a_);
    varlog_err_t err = VARLOG_ERR_CLOSED;
    if (adm != NULL) {
        Py_BEGIN_ALLOW_THREADS
        err = varlog_admin_list_log_streams(adm, topic, ms, out, LIST_CAP, &n);
        Py_END_ALLOW_THREADS
    }
    PyObject *l = NULL;
    if (adm != NULL && err != VARLOG_OK)
        vp_raise(err, -1);
    else if (adm != NULL && (l = PyList_New(0)) != NULL)
        for (size_t i = 0; i < n && i < LIST_CAP; i++) {
            PyObject *d = ls_dict(&out[i]);
            if (d == NULL || PyList_Append(l, d) < 0) {
                Py_XDECREF(d);
                Py_CLEAR(l);
                break;
            }
            Py_DECREF(d);
        }
    PyMem_Free(out);
    return l;
}

static PyObject *admin_list_storage_nodes(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"timeout", NULL};
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:list_storage_nodes", kwlist, &timeout))
        return NULL;
    varlog_storage_node_info_t out[64];
    size_t n = 0;
    ADMIN_CALL(self, timeout, varlog_admin_list_storage_nodes(adm, ms, out, 64, &n));
    PyObject *l = PyList_New(0);
    for (size_t i = 0; l && i < n && i < 64; i++) {
        PyObject *d = sn_dict(&out[i]);
        if (d == NULL || PyList_Append(l, d) < 0)
            Py_CLEAR(l);
        Py_XDECREF(d);
    }
    return l;
}

static PyObject *admin_get_storage_node(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"storage_node", "timeout", NULL};
    PyObject *timeout = Py_None;
    int32_t id;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|O:get_storage_node", kwlist, &id, &timeout))
        return NULL;
    varlog_storage_node_info_t sn;
    ADMIN_CALL(self, timeout, varlog_admin_get_storage_node(adm, id, ms, &sn));
    return sn_dict(&sn);
}

static PyObject *admin_list_mr_nodes(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"timeout", NULL};
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:list_mr_nodes", kwlist, &timeout))
        return NULL;
    varlog_mr_node_info_t out[16];
    size_t n = 0;
    ADMIN_CALL(self, timeout, varlog_admin_list_mr_nodes(adm, ms, out, 16, &n));
    PyObject *l = PyList_New(0);
    for (size_t i = 0; l && i < n && i < 16; i++) {
        PyObject *d = Py_BuildValue(
            "{s:K,s:s,s:s,s:O,s:O}", "node_id", (unsigned long long)out[i].node_id, "raft_url",
            out[i].raft_url, "rpc_addr", out[i].rpc_addr, "leader",
            out[i].leader ? Py_True : Py_False, "learner", out[i].learner ? Py_True : Py_False);
        if (d == NULL || PyList_Append(l, d) < 0)
            Py_CLEAR(l);
        Py_XDECREF(d);
    }
    return l;
}

static PyObject *admin_get_mr_members(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"timeout", NULL};
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:get_mr_members", kwlist, &timeout))
        return NULL;
    varlog_mr_member_t out[16];
    size_t n = 0;
    uint64_t leader = 0;
    int32_t rf = 0;
    ADMIN_CALL(self, timeout, varlog_admin_get_mr_members(adm, ms, &leader, &rf, out, 16, &n));
    PyObject *members = PyDict_New();
    for (size_t i = 0; members && i < n && i < 16; i++) {
        PyObject *k = PyLong_FromUnsignedLongLong(out[i].node_id);
        PyObject *v = PyUnicode_FromString(out[i].peer);
        if (k == NULL || v == NULL || PyDict_SetItem(members, k, v) < 0)
            Py_CLEAR(members);
        Py_XDECREF(k);
        Py_XDECREF(v);
    }
    if (members == NULL)
        return NULL;
    return Py_BuildValue("{s:K,s:i,s:N}", "leader", (unsigned long long)leader,
                         "replication_factor", rf, "members", members);
}

static PyObject *admin_add_log_stream(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "timeout", NULL};
    PyObject *timeout = Py_None;
    int32_t topic;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|O:add_log_stream", kwlist, &topic, &timeout))
        return NULL;
    varlog_log_stream_info_t l;
    ADMIN_CALL(self, timeout, varlog_admin_add_log_stream(adm, topic, ms, &l));
    return ls_dict(&l);
}

static PyObject *admin_get_log_stream(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "log_stream", "timeout", NULL};
    PyObject *timeout = Py_None;
    int32_t topic, ls;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ii|O:get_log_stream", kwlist, &topic, &ls,
                                     &timeout))
        return NULL;
    varlog_log_stream_info_t l;
    ADMIN_CALL(self, timeout, varlog_admin_get_log_stream(adm, topic, ls, ms, &l));
    return ls_dict(&l);
}

static PyObject *admin_seal(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "log_stream", "timeout", NULL};
    PyObject *timeout = Py_None;
    int32_t topic, ls;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ii|O:seal", kwlist, &topic, &ls, &timeout))
        return NULL;
    uint64_t glsn = 0;
    ADMIN_CALL(self, timeout, varlog_admin_seal(adm, topic, ls, ms, &glsn));
    return PyLong_FromUnsignedLongLong(glsn);
}

static PyObject *admin_unseal(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "log_stream", "timeout", NULL};
    PyObject *timeout = Py_None;
    int32_t topic, ls;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ii|O:unseal", kwlist, &topic, &ls, &timeout))
        return NULL;
    varlog_log_stream_info_t l;
    ADMIN_CALL(self, timeout, varlog_admin_unseal(adm, topic, ls, ms, &l));
    return ls_dict(&l);
}

static PyObject *admin_trim(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topic", "last_glsn", "timeout", NULL};
    PyObject *timeout = Py_None;
    int32_t topic;
    unsigned long long last;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iK|O:trim", kwlist, &topic, &last, &timeout))
        return NULL;
    ADMIN_CALL(self, timeout, varlog_admin_trim(adm, topic, (uint64_t)last, ms));
    Py_RETURN_NONE;
}

static PyObject *admin_close(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    vp_admin_t *a = (vp_admin_t *)self;
    if (a->calls > 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Admin.close() with calls in progress on other threads");
        return NULL;
    }
    admin_close_impl(a);
    Py_RETURN_NONE;
}

static PyObject *ctx_enter(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    Py_INCREF(self);
    return self;
}

static PyObject *admin_exit(PyObject *self, PyObject *args)
{
    (void)args;
    PyObject *r = admin_close(self, NULL);
    Py_XDECREF(r);
    if (r == NULL)
        return NULL;
    Py_RETURN_FALSE;
}

#define KW (PyCFunction)(void (*)(void))
#define KWM METH_VARARGS | METH_KEYWORDS
static PyMethodDef admin_methods[] = {
    {"add_topic", KW admin_add_topic, KWM, "add_topic(timeout=None) -> int: the new topic's id."},
    {"get_topic", KW admin_get_topic, KWM, "get_topic(topic, timeout=None) -> dict. UnknownTopic."},
    {"list_topics", KW admin_list_topics, KWM, "list_topics(timeout=None) -> list[dict]"},
    {"unregister_topic", KW admin_unregister_topic, KWM,
     "unregister_topic(topic, timeout=None) -> None. UnknownTopic."},
    {"add_log_stream", KW admin_add_log_stream, KWM,
     "add_log_stream(topic, timeout=None) -> dict: the new log stream."},
    {"get_log_stream", KW admin_get_log_stream, KWM,
     "get_log_stream(topic, log_stream, timeout=None) -> dict. UnknownTopic, UnknownLogStream."},
    {"list_log_streams", KW admin_list_log_streams, KWM,
     "list_log_streams(topic, timeout=None) -> list[dict]"},
    {"seal", KW admin_seal, KWM,
     "seal(topic, log_stream, timeout=None) -> int: the GLSN of its last committed entry."},
    {"unseal", KW admin_unseal, KWM, "unseal(topic, log_stream, timeout=None) -> dict"},
    {"trim", KW admin_trim, KWM,
     "trim(topic, last_glsn, timeout=None) -> None: trims every log stream of the topic."},
    {"list_storage_nodes", KW admin_list_storage_nodes, KWM,
     "list_storage_nodes(timeout=None) -> list[dict]"},
    {"get_storage_node", KW admin_get_storage_node, KWM,
     "get_storage_node(storage_node, timeout=None) -> dict. VarlogError ERR_RPC_NOT_FOUND."},
    {"list_mr_nodes", KW admin_list_mr_nodes, KWM,
     "list_mr_nodes(timeout=None) -> list[dict]: the metadata repository's nodes."},
    {"get_mr_members", KW admin_get_mr_members, KWM,
     "get_mr_members(timeout=None) -> dict: leader, replication_factor, members {id: peer}."},
    {"close", admin_close, METH_NOARGS, "close() -> None. Idempotent."},
    {"__enter__", ctx_enter, METH_NOARGS, NULL},
    {"__exit__", admin_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyTypeObject vp_admin_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "varlog.Admin",
    .tp_basicsize = sizeof(vp_admin_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Admin(address, properties=None, *, logger=None, **props)\n\nThe admin API "
              "(varlog/admin.h) of the admin at address (varlogadm's, or a Server's). Every "
              "call is one unary call on the caller's thread with the GIL released, without "
              "retry (admin operations are not idempotent); timeout in seconds, None = 10 s. "
              "Errors as Client's: UnknownTopic, UnknownLogStream, TimedOut, VarlogError.",
    .tp_new = PyType_GenericNew,
    .tp_init = admin_init,
    .tp_dealloc = admin_dealloc,
    .tp_methods = admin_methods,
};

/* ---- Server ---- */

typedef struct vp_server {
    PyObject_HEAD varlog_server_t *srv;
    int calls; /* stop and restart running with the GIL released (GIL-guarded) */
} vp_server_t;

static int server_init(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"topics",    "log_streams_per_topic", "listen_address",
                             "max_bytes", "refuse_when_full",      NULL};
    vp_server_t *s = (vp_server_t *)self;
    varlog_server_opts_t o = {.topics = 1, .log_streams_per_topic = 1};
    int refuse = 0;
    unsigned long long max_bytes = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|iizKp:Server", kwlist, &o.topics,
                                     &o.log_streams_per_topic, &o.listen_address, &max_bytes,
                                     &refuse))
        return -1;
    o.max_bytes = max_bytes;
    o.refuse_when_full = refuse;
    if (s->srv != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Server.__init__ called twice");
        return -1;
    }
    if (vp_library_check() < 0)
        return -1;
    varlog_err_t err;
    Py_BEGIN_ALLOW_THREADS
    err = varlog_server_start(&o, &s->srv);
    Py_END_ALLOW_THREADS
    if (err != VARLOG_OK) {
        vp_raise(err, -1);
        return -1;
    }
    return vp_fork_track((void **)&s->srv);
}

static void server_close_impl(vp_server_t *s)
{
    varlog_server_t *p = s->srv;
    s->srv = NULL;
    /* a stop or restart on another thread still uses p: wait for it rather than free it */
    while (p != NULL && s->calls > 0) {
        Py_BEGIN_ALLOW_THREADS
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        Py_END_ALLOW_THREADS
    }
    if (p != NULL) {
        Py_BEGIN_ALLOW_THREADS
        varlog_server_destroy(p);
        Py_END_ALLOW_THREADS
    }
}

static void server_dealloc(PyObject *self)
{
    server_close_impl((vp_server_t *)self);
    vp_fork_untrack((void **)&((vp_server_t *)self)->srv);
    Py_TYPE(self)->tp_free(self);
}

static varlog_server_t *server_get(PyObject *self)
{
    varlog_server_t *p = ((vp_server_t *)self)->srv;
    if (p == NULL) {
        PyObject *exc = vp_make_error(VARLOG_ERR_CLOSED, "the server is closed", -1);
        if (exc) {
            PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
            Py_DECREF(exc);
        }
    }
    return p;
}

static PyObject *server_close(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    server_close_impl((vp_server_t *)self);
    Py_RETURN_NONE;
}

static PyObject *server_exit(PyObject *self, PyObject *args)
{
    (void)args;
    server_close_impl((vp_server_t *)self);
    Py_RETURN_FALSE;
}

#define SRV_OR_NULL(p)                                                                             \
    varlog_server_t *p = server_get(self);                                                         \
    if (p == NULL)                                                                                 \
        return NULL;

static PyObject *server_stop(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    SRV_OR_NULL(p);
    varlog_err_t err;
    ((vp_server_t *)self)->calls++;
    Py_BEGIN_ALLOW_THREADS
    err = varlog_server_stop(p);
    Py_END_ALLOW_THREADS((vp_server_t *)self)
    ->calls--;
    return err ? vp_raise(err, -1) : (Py_INCREF(Py_None), Py_None);
}

static PyObject *server_restart(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    SRV_OR_NULL(p);
    varlog_err_t err;
    ((vp_server_t *)self)->calls++;
    Py_BEGIN_ALLOW_THREADS
    err = varlog_server_restart(p);
    Py_END_ALLOW_THREADS((vp_server_t *)self)
    ->calls--;
    return err ? vp_raise(err, -1) : (Py_INCREF(Py_None), Py_None);
}

static PyObject *server_add_topic(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    SRV_OR_NULL(p);
    int32_t id = 0;
    varlog_err_t err = varlog_server_add_topic(p, &id);
    return err ? vp_raise(err, -1) : PyLong_FromLong(id);
}

static PyObject *server_add_log_stream(PyObject *self, PyObject *arg)
{
    SRV_OR_NULL(p);
    long topic = PyLong_AsLong(arg);
    if (topic == -1 && PyErr_Occurred())
        return NULL;
    int32_t id = 0;
    varlog_err_t err = varlog_server_add_log_stream(p, (int32_t)topic, &id);
    return err ? vp_raise(err, -1) : PyLong_FromLong(id);
}

static PyObject *server_seal_impl(PyObject *self, PyObject *args, bool seal)
{
    int32_t topic, ls;
    if (!PyArg_ParseTuple(args, "ii", &topic, &ls))
        return NULL;
    SRV_OR_NULL(p);
    varlog_err_t err = seal ? varlog_server_seal(p, topic, ls) : varlog_server_unseal(p, topic, ls);
    return err ? vp_raise(err, -1) : (Py_INCREF(Py_None), Py_None);
}

static PyObject *server_seal(PyObject *self, PyObject *args)
{
    return server_seal_impl(self, args, true);
}

static PyObject *server_unseal(PyObject *self, PyObject *args)
{
    return server_seal_impl(self, args, false);
}

static PyObject *server_fail_next(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"method", "code", "message", "n", NULL};
    const char *method, *message = NULL;
    int code, n = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "si|zi:fail_next", kwlist, &method, &code, &message,
                                     &n))
        return NULL;
    SRV_OR_NULL(p);
    varlog_err_t err = varlog_server_fail_next(p, method, code, message, n);
    return err ? vp_raise(err, -1) : (Py_INCREF(Py_None), Py_None);
}

static PyObject *server_delay(PyObject *self, PyObject *args)
{
    const char *method;
    long long ms;
    if (!PyArg_ParseTuple(args, "sL:delay", &method, &ms))
        return NULL;
    SRV_OR_NULL(p);
    varlog_err_t err = varlog_server_delay(p, method, (int64_t)ms);
    return err ? vp_raise(err, -1) : (Py_INCREF(Py_None), Py_None);
}

static PyObject *server_drop_stream_after(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"method", "k", "n", NULL};
    const char *method;
    long long k;
    int n = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sL|i:drop_stream_after", kwlist, &method, &k, &n))
        return NULL;
    SRV_OR_NULL(p);
    varlog_err_t err = varlog_server_drop_stream_after(p, method, (int64_t)k, n);
    return err ? vp_raise(err, -1) : (Py_INCREF(Py_None), Py_None);
}

static PyObject *server_drop_stream_after_write(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"method", "k", "n", NULL};
    const char *method;
    long long k;
    int n = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sL|i:drop_stream_after_write", kwlist, &method, &k,
                                     &n))
        return NULL;
    SRV_OR_NULL(p);
    varlog_err_t err = varlog_server_drop_stream_after_write(p, method, (int64_t)k, n);
    return err ? vp_raise(err, -1) : (Py_INCREF(Py_None), Py_None);
}

static PyObject *server_clear_faults(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    SRV_OR_NULL(p);
    varlog_server_clear_faults(p);
    Py_RETURN_NONE;
}

static PyObject *server_call_count(PyObject *self, PyObject *arg)
{
    SRV_OR_NULL(p);
    const char *m = PyUnicode_AsUTF8(arg);
    return m ? PyLong_FromUnsignedLongLong(varlog_server_call_count(p, m)) : NULL;
}

static PyObject *server_request_count(PyObject *self, PyObject *arg)
{
    SRV_OR_NULL(p);
    const char *m = PyUnicode_AsUTF8(arg);
    return m ? PyLong_FromUnsignedLongLong(varlog_server_request_count(p, m)) : NULL;
}

static PyObject *server_get_address(PyObject *self, void *closure)
{
    (void)closure;
    SRV_OR_NULL(p);
    return PyUnicode_FromString(varlog_server_address(p));
}

static PyObject *server_get_port(PyObject *self, void *closure)
{
    (void)closure;
    SRV_OR_NULL(p);
    return PyLong_FromLong(varlog_server_port(p));
}

static PyObject *server_get_stored_bytes(PyObject *self, void *closure)
{
    (void)closure;
    SRV_OR_NULL(p);
    return PyLong_FromUnsignedLongLong(varlog_server_stored_bytes(p));
}

static PyObject *server_get_applied_index(PyObject *self, void *closure)
{
    (void)closure;
    SRV_OR_NULL(p);
    return PyLong_FromUnsignedLongLong(varlog_server_applied_index(p));
}

static PyMethodDef server_methods[] = {
    {"close", server_close, METH_NOARGS,
     "close() -> None: stops and frees the server. Idempotent."},
    {"__enter__", ctx_enter, METH_NOARGS, NULL},
    {"__exit__", server_exit, METH_VARARGS, NULL},
    {"stop", server_stop, METH_NOARGS,
     "stop() -> None: stops serving, keeping the log (clients see UNAVAILABLE)."},
    {"restart", server_restart, METH_NOARGS, "restart() -> None: serves again on the same port."},
    {"add_topic", server_add_topic, METH_NOARGS, "add_topic() -> int: a new topic's id."},
    {"add_log_stream", server_add_log_stream, METH_O,
     "add_log_stream(topic, /) -> int: a new log stream's id."},
    {"seal", server_seal, METH_VARARGS, "seal(topic, log_stream, /) -> None"},
    {"unseal", server_unseal, METH_VARARGS, "unseal(topic, log_stream, /) -> None"},
    {"fail_next", KW server_fail_next, KWM,
     "fail_next(method, code, message=None, n=1) -> None: the next n calls of method (a full "
     "gRPC path such as '/varlog.snpb.LogIO/Append') end with gRPC status code."},
    {"delay", server_delay, METH_VARARGS, "delay(method, ms, /) -> None: delays every response."},
    {"drop_stream_after", KW server_drop_stream_after, KWM,
     "drop_stream_after(method, k, n=1) -> None: the next n streams end UNAVAILABLE after k "
     "messages."},
    {"drop_stream_after_write", KW server_drop_stream_after_write, KWM,
     "drop_stream_after_write(method, k, n=1) -> None: as drop_stream_after, but Append request "
     "k+1 is stored before its stream ends without the answer."},
    {"clear_faults", server_clear_faults, METH_NOARGS, "clear_faults() -> None"},
    {"call_count", server_call_count, METH_O, "call_count(method, /) -> int"},
    {"request_count", server_request_count, METH_O, "request_count(method, /) -> int"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef server_getset[] = {
    {"address", server_get_address, NULL, "'127.0.0.1:PORT': metadata and admin address.", NULL},
    {"port", server_get_port, NULL, "The bound port.", NULL},
    {"stored_bytes", server_get_stored_bytes, NULL, "Payload bytes stored.", NULL},
    {"applied_index", server_get_applied_index, NULL, "The metadata's applied index.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject vp_server_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "varlog.Server",
    .tp_basicsize = sizeof(vp_server_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Server(topics=1, log_streams_per_topic=1, listen_address=None, max_bytes=0, "
              "refuse_when_full=False)\n\nThe embedded single-node Varlog server "
              "(varlog/server.h): real wire protocol on 127.0.0.1, the log in memory, fault "
              "injection for tests. Serves on its own threads, which run no Python code; "
              "starts at once. Context manager; close() stops it.",
    .tp_new = PyType_GenericNew,
    .tp_init = server_init,
    .tp_dealloc = server_dealloc,
    .tp_methods = server_methods,
    .tp_getset = server_getset,
};

int vp_admin_server_init_types(PyObject *m)
{
    if (PyType_Ready(&vp_admin_type) < 0 || PyType_Ready(&vp_server_type) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "Admin", (PyObject *)&vp_admin_type) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "Server", (PyObject *)&vp_server_type);
}
