/* The _varlog module: errors, configuration, the log bridge, entry types and shutdown. */
#include "varlog_py.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

vp_state_t vp;
_Atomic int vp_shutting_down;

#if PY_VERSION_HEX >= 0x030D0000
#define VP_IS_FINALIZING() Py_IsFinalizing()
#else
#define VP_IS_FINALIZING() _Py_IsFinalizing()
#endif

bool vp_gil_enter(PyGILState_STATE *st)
{
    /* Both checks race with the start of finalization, which is why the atexit hook closes
     * every client (and so joins every thread that could get here) before it begins. */
    if (atomic_load(&vp_shutting_down) || VP_IS_FINALIZING())
        return false;
    *st = PyGILState_Ensure();
    return true;
}

PyObject *vp_make_error(varlog_err_t err, const char *text, int outcome)
{
    PyObject *cls;
    if (err == VARLOG_ERR_INVALID_ARG)
        cls = vp.InvalidArgument;
    else if (err == VARLOG_ERR_QUEUE_FULL)
        cls = vp.QueueFull;
    else if (err == VARLOG_ERR_CLOSED && outcome == VARLOG_NOT_APPENDED)
        cls = vp.ClosedNotAppended;
    else if (outcome == VARLOG_MAYBE_APPENDED)
        cls = vp.MaybeAppended;
    else if (outcome == VARLOG_NOT_APPENDED)
        cls = vp.NotAppended;
    else if (err == VARLOG_ERR_CLOSED)
        cls = vp.Closed;
    else if (err == VARLOG_ERR_TIMED_OUT)
        cls = vp.TimedOut;
    else if (err == VARLOG_ERR_UNKNOWN_TOPIC)
        cls = vp.UnknownTopic;
    else if (err == VARLOG_ERR_UNKNOWN_LOG_STREAM)
        cls = vp.UnknownLogStream;
    else if (err == VARLOG_ERR_TRIMMED)
        cls = vp.Trimmed;
    else
        cls = vp.VarlogError;
    if (text == NULL || text[0] == '\0')
        text = varlog_err_str(err);
    PyObject *kw = Py_BuildValue(
        "{s:i,s:s,s:s,s:O}", "code", (int)err, "name", varlog_err_name(err), "outcome",
        outcome < 0 ? NULL : varlog_outcome_name((varlog_outcome_t)outcome), "retriable",
        varlog_err_is_retriable(err) ? Py_True : Py_False);
    if (kw == NULL)
        return NULL;
    PyObject *args = Py_BuildValue("(s)", text);
    if (args == NULL) {
        /* a text that is not UTF-8 (a server's message): replace what cannot be decoded */
        PyErr_Clear();
        PyObject *s = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
        args = s ? PyTuple_Pack(1, s) : NULL;
        Py_XDECREF(s);
    }
    PyObject *exc = args ? PyObject_Call(cls, args, kw) : NULL;
    Py_XDECREF(args);
    Py_DECREF(kw);
    return exc;
}

PyObject *vp_raise(varlog_err_t err, int outcome)
{
    PyObject *exc = vp_make_error(err, varlog_last_error(), outcome);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

PyObject *vp_meta_new(const varlog_entry_meta_t *m)
{
    PyObject *o = PyStructSequence_New(vp.meta_type);
    if (o == NULL)
        return NULL;
    PyStructSequence_SET_ITEM(o, 0, PyLong_FromLong(m->topic_id));
    PyStructSequence_SET_ITEM(o, 1, PyLong_FromLong(m->log_stream_id));
    PyStructSequence_SET_ITEM(o, 2, PyLong_FromUnsignedLongLong(m->glsn));
    PyStructSequence_SET_ITEM(o, 3, PyLong_FromUnsignedLongLong(m->llsn));
    for (Py_ssize_t i = 0; i < 4; i++)
        if (PyStructSequence_GET_ITEM(o, i) == NULL) {
            Py_DECREF(o);
            return NULL;
        }
    return o;
}

int64_t vp_timeout_ms(PyObject *obj, int64_t dflt)
{
    if (obj == NULL || obj == Py_None)
        return dflt;
    double s = PyFloat_AsDouble(obj);
    if (s == -1.0 && PyErr_Occurred())
        return -2;
    if (!(s >= 0.0) || s > 1e12) {
        PyErr_Format(PyExc_ValueError, "timeout must be None or seconds >= 0, not %R", obj);
        return -2;
    }
    return (int64_t)ceil(s * 1000.0);
}

/* The string form varlog_conf_set takes: bools as true/false, sequences comma-separated. */
static PyObject *conf_value(PyObject *v)
{
    if (PyBool_Check(v))
        return PyUnicode_FromString(v == Py_True ? "true" : "false");
    if (PyLong_Check(v))
        return PyObject_Str(v);
    if (PyUnicode_Check(v)) {
        Py_INCREF(v);
        return v;
    }
    if (PyList_Check(v) || PyTuple_Check(v)) {
        PyObject *sep = PyUnicode_FromString(",");
        PyObject *strs = PyList_New(0);
        if (sep == NULL || strs == NULL)
            goto fail;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); i++) {
            PyObject *s = conf_value(PySequence_Fast_GET_ITEM(v, i));
            if (s == NULL || PyList_Append(strs, s) < 0) {
                Py_XDECREF(s);
                goto fail;
            }
            Py_DECREF(s);
        }
        PyObject *joined = PyUnicode_Join(sep, strs);
        Py_DECREF(sep);
        Py_DECREF(strs);
        return joined;
    fail:
        Py_XDECREF(sep);
        Py_XDECREF(strs);
        return NULL;
    }
    PyErr_Format(PyExc_TypeError, "a property value must be str, int, bool or a list, not %.100s",
                 Py_TYPE(v)->tp_name);
    return NULL;
}

static int conf_set_one(varlog_conf_t *conf, PyObject *key, PyObject *value, bool kwarg)
{
    if (!PyUnicode_Check(key)) {
        PyErr_SetString(PyExc_TypeError, "property names must be str");
        return -1;
    }
    PyObject *name =
        kwarg ? PyObject_CallMethod(key, "replace", "ss", "_", ".") : (Py_INCREF(key), key);
    if (name == NULL)
        return -1;
    PyObject *sval = conf_value(value);
    int rc = -1;
    if (sval != NULL) {
        const char *n = PyUnicode_AsUTF8(name), *s = PyUnicode_AsUTF8(sval);
        if (n != NULL && s != NULL) {
            char errstr[512];
            varlog_err_t err = varlog_conf_set(conf, n, s, errstr, sizeof errstr);
            if (err == VARLOG_OK)
                rc = 0;
            else
                vp_raise(err, -1);
        }
    }
    Py_DECREF(name);
    Py_XDECREF(sval);
    return rc;
}

int vp_conf_apply(varlog_conf_t *conf, PyObject *properties, PyObject *kwargs)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    if (properties != NULL && properties != Py_None) {
        if (!PyDict_Check(properties)) {
            PyErr_SetString(PyExc_TypeError, "properties must be a dict of property names");
            return -1;
        }
        while (PyDict_Next(properties, &pos, &key, &value))
            if (conf_set_one(conf, key, value, false) < 0)
                return -1;
    }
    pos = 0;
    if (kwargs != NULL)
        while (PyDict_Next(kwargs, &pos, &key, &value))
            if (conf_set_one(conf, key, value, true) < 0)
                return -1;
    return 0;
}

void vp_log_cb(void *opaque, varlog_log_level_t level, varlog_log_ctx_t ctx, const char *message)
{
    PyGILState_STATE st;
    if (!vp_gil_enter(&st))
        return;
    int pylevel = level <= VARLOG_LOG_CRIT      ? 50
                  : level == VARLOG_LOG_ERR     ? 40
                  : level == VARLOG_LOG_WARNING ? 30
                  : level == VARLOG_LOG_DEBUG   ? 10
                                                : 20;
    /* the thread may be inside a call that is about to raise: keep its exception */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *r = PyObject_CallMethod((PyObject *)opaque, "log", "isss", pylevel, "[%s] %s",
                                      varlog_log_ctx_name(ctx), message);
    if (r == NULL)
        PyErr_WriteUnraisable((PyObject *)opaque);
    Py_XDECREF(r);
    PyErr_Restore(et, ev, tb);
    PyGILState_Release(st);
}

/* ---- asyncio ---- */

PyObject *vp_aio(const char *name)
{
    static PyObject *mod; /* varlog._aio, imported on first use (it imports asyncio) */
    if (mod == NULL && (mod = PyImport_ImportModule("varlog._aio")) == NULL)
        return NULL;
    return PyObject_GetAttrString(mod, name);
}

/* ---- records ---- */

void vp_records_release(vp_records_t *r)
{
    for (Py_ssize_t i = 0; i < r->n; i++)
        PyBuffer_Release(&r->views[i]);
    if (r->views != &r->view1) {
        PyMem_Free(r->views);
        PyMem_Free(r->records);
    }
    r->n = 0;
    r->views = NULL;
    r->records = NULL;
}

int vp_records_get(PyObject *obj, vp_records_t *r)
{
    r->n = 0;
    r->one = false;
    r->views = NULL;
    r->records = NULL;
    if (PyObject_CheckBuffer(obj)) {
        if (PyObject_GetBuffer(obj, &r->view1, PyBUF_SIMPLE) < 0)
            return -1;
        r->one = true;
        r->views = &r->view1;
        r->records = &r->rec1;
        r->rec1.data = r->view1.buf;
        r->rec1.len = (size_t)r->view1.len;
        r->n = 1;
        return 0;
    }
    if (PyUnicode_Check(obj)) {
        PyErr_SetString(PyExc_TypeError,
                        "records must be a bytes-like object or a sequence of them, not 'str'");
        return -1;
    }
    PyObject *seq =
        PySequence_Fast(obj, "records must be a bytes-like object or a sequence of them");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n == 0) {
        Py_DECREF(seq);
        PyErr_SetString(vp.InvalidArgument, "no records to append");
        return -1;
    }
    r->views = PyMem_Calloc((size_t)n, sizeof *r->views);
    r->records = PyMem_Calloc((size_t)n, sizeof *r->records);
    if (r->views == NULL || r->records == NULL) {
        Py_DECREF(seq);
        vp_records_release(r);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (PyObject_GetBuffer(item, &r->views[i], PyBUF_SIMPLE) < 0) {
            if (PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError,
                             "records[%zd]: a bytes-like object is required, not '%.100s'", i,
                             Py_TYPE(item)->tp_name);
            }
            Py_DECREF(seq);
            vp_records_release(r);
            return -1;
        }
        r->n = i + 1;
        r->records[i].data = r->views[i].buf;
        r->records[i].len = (size_t)r->views[i].len;
    }
    Py_DECREF(seq);
    return 0;
}

/* ---- fork ---- */

static bool library_used, library_forked;

int vp_library_check(void)
{
    if (library_forked) {
        PyObject *exc = vp_make_error(
            VARLOG_ERR_STATE,
            "libvarlog cannot be used in the child of a fork of a process that used it (its "
            "gRPC threads were not copied): start the process with exec (multiprocessing's "
            "'spawn' or 'forkserver')",
            -1);
        if (exc != NULL) {
            PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
            Py_DECREF(exc);
        }
        return -1;
    }
    library_used = true;
    return 0;
}

static void ***tracked; /* fields holding a Server's or Admin's C pointer (GIL-guarded) */
static size_t n_tracked, cap_tracked;

int vp_fork_track(void **slot)
{
    for (size_t i = 0; i < n_tracked; i++)
        if (tracked[i] == slot)
            return 0;
    if (n_tracked == cap_tracked) {
        size_t cap = cap_tracked ? 2 * cap_tracked : 16;
        void ***t = PyMem_Realloc(tracked, cap * sizeof *t);
        if (t == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        tracked = t;
        cap_tracked = cap;
    }
    tracked[n_tracked++] = slot;
    return 0;
}

void vp_fork_untrack(void **slot)
{
    for (size_t i = 0; i < n_tracked; i++)
        if (tracked[i] == slot) {
            tracked[i] = tracked[--n_tracked];
            return;
        }
}

static PyObject *mod_after_fork_child(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    vp_client_forget_all();
    library_forked = library_forked || library_used;
    for (size_t i = 0; i < n_tracked; i++)
        *tracked[i] = NULL;
    n_tracked = 0;
    Py_RETURN_NONE;
}

/* ---- module functions ---- */

static PyObject *mod_shutdown(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    vp_client_close_all();
    atomic_store(&vp_shutting_down, 1);
    Py_RETURN_NONE;
}

static PyObject *mod_version(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyUnicode_FromString(varlog_version_str());
}

static PyObject *mod_err_name(PyObject *self, PyObject *arg)
{
    (void)self;
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(varlog_err_name((varlog_err_t)code));
}

static PyMethodDef mod_methods[] = {
    {"_shutdown", mod_shutdown, METH_NOARGS,
     "_shutdown() -> None\n\nCloses every open client (their appenders and subscriptions first), "
     "then stops every C "
     "thread from entering Python. Registered with atexit by the package."},
    {"_after_fork_child", mod_after_fork_child, METH_NOARGS,
     "_after_fork_child() -> None\n\nIn the child of os.fork (registered by the package): every "
     "Client, Appender, "
     "Subscription, Admin and Server of the parent is made to look closed, without calling "
     "into the library (whose threads the child does not have) and without freeing it."},
    {"version", mod_version, METH_NOARGS, "version() -> str\n\nlibvarlog's version string."},
    {"err_name", mod_err_name, METH_O,
     "err_name(code, /) -> str\n\nThe name of a varlog_err_t code, e.g. 'ERR_TIMED_OUT'."},
    {NULL, NULL, 0, NULL},
};

static PyStructSequence_Field meta_fields[] = {
    {"topic_id", "the entry's topic"},
    {"log_stream_id", "the log stream it was stored in"},
    {"glsn", "its global position (GLSN) in the topic"},
    {"llsn", "its local position (LLSN) in the log stream"},
    {NULL, NULL},
};
static PyStructSequence_Desc meta_desc = {
    "varlog.EntryMeta", "Where an entry landed: (topic_id, log_stream_id, glsn, llsn).",
    meta_fields, 4};

static PyStructSequence_Field entry_fields[] = {
    {"glsn", "global position (0 for subscribe_to, whose node does not send it)"},
    {"llsn", "local position in the log stream"},
    {"topic_id", "topic"},
    {"log_stream_id", "log stream it came from"},
    {"data", "the payload: bytes, copied from the library's receive buffer"},
    {NULL, NULL},
};
static PyStructSequence_Desc entry_desc = {
    "varlog.Entry", "One entry of the log: (glsn, llsn, topic_id, log_stream_id, data).",
    entry_fields, 5};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT,
    "_varlog",
    "The C extension behind the varlog package (see varlog's docstrings).",
    -1,
    mod_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

static int load_errors(void)
{
    PyObject *errors = PyImport_ImportModule("varlog.errors");
    if (errors == NULL)
        return -1;
    struct {
        PyObject **slot;
        const char *name;
    } names[] = {
        {&vp.VarlogError, "VarlogError"},
        {&vp.NotAppended, "NotAppended"},
        {&vp.MaybeAppended, "MaybeAppended"},
        {&vp.QueueFull, "QueueFull"},
        {&vp.InvalidArgument, "InvalidArgument"},
        {&vp.Closed, "Closed"},
        {&vp.TimedOut, "TimedOut"},
        {&vp.UnknownTopic, "UnknownTopic"},
        {&vp.UnknownLogStream, "UnknownLogStream"},
        {&vp.Trimmed, "Trimmed"},
        {&vp.ClosedNotAppended, "ClosedNotAppended"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        *names[i].slot = PyObject_GetAttrString(errors, names[i].name);
        if (*names[i].slot == NULL) {
            Py_DECREF(errors);
            return -1;
        }
    }
    Py_DECREF(errors);
    PyObject *logging = PyImport_ImportModule("logging");
    if (logging == NULL)
        return -1;
    vp.default_logger = PyObject_CallMethod(logging, "getLogger", "s", "varlog");
    Py_DECREF(logging);
    return vp.default_logger ? 0 : -1;
}

PyMODINIT_FUNC PyInit__varlog(void)
{
    if (load_errors() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (m == NULL)
        return NULL;
    vp.meta_type = PyStructSequence_NewType(&meta_desc);
    vp.entry_type = PyStructSequence_NewType(&entry_desc);
    if (vp.meta_type == NULL || vp.entry_type == NULL)
        goto fail;
    if (PyModule_AddObjectRef(m, "EntryMeta", (PyObject *)vp.meta_type) < 0 ||
        PyModule_AddObjectRef(m, "Entry", (PyObject *)vp.entry_type) < 0)
        goto fail;
    if (PyType_Ready(&vp_client_type) < 0 ||
        PyModule_AddObjectRef(m, "Client", (PyObject *)&vp_client_type) < 0)
        goto fail;
    if (vp_future_init_type(m) < 0 || vp_appender_init_type(m) < 0 ||
        vp_subscription_init_type(m) < 0 || vp_admin_server_init_types(m) < 0)
        goto fail;
    PyModule_AddObject(m, "GLSN_MAX", PyLong_FromUnsignedLongLong(VARLOG_GLSN_MAX));
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
