/* varlog.AppendFuture: a concurrent.futures.Future subclass that costs little when nobody
 * waits on it.
 *
 * concurrent.futures.Future.__init__ creates a threading.Condition (a lock, a list, bound
 * methods) and set_result takes it and notifies: about 1.7 µs per future, more than the whole
 * append. Most futures of a producer are never waited on, so here the Condition is created on
 * first access of _condition (by result, exception, done, add_done_callback, wait,
 * as_completed, __repr__: everything in concurrent/futures/_base.py that reads or waits takes
 * it first), and the appender resolves a future whose Condition was never created by setting
 * _result / _exception and _state directly.
 *
 * Why that is race-free: the resolver's check (no Condition) and its set (_state FINISHED)
 * run with the GIL held, and nothing between them can run Python code (no allocation, so no
 * collection and no finalizer either). A waiter first gets _condition, creating and
 * publishing it (set-if-absent, so two waiters share one), and only then checks _state under
 * it. So the resolver either sees no Condition, and has set _state before any waiter checks
 * it (the waiter finds FINISHED and does not wait), or sees the Condition and takes the base
 * class's set_result / set_exception, which takes the Condition, notifies, and serves
 * _waiters (wait, as_completed) and the done-callbacks. Waiters and callbacks are only added
 * with _condition held, so a future that never had one has neither.
 *
 * The per-future state is six fields after the base class's part of the object: _state,
 * _result and _exception as member descriptors (so the base class's code reads and writes them
 * there, not in the instance dict), and the lazy parts under _lazy_condition, _lazy_waiters and
 * _lazy_done_callbacks, unset (NULL) until first use. They are T_OBJECT_EX members of the heap
 * type, which the inherited traversal and dealloc of Python classes visit and clear as they do
 * __slots__. (A first version kept them in the instance dict, set-if-absent with
 * PyDict_SetDefault and later with a re-check: on 3.11 the race test of tests/test_future.py
 * then left waiters on a Condition that was no longer the published one. The cause was not
 * pinned down; fields of our own leave the dict's inline values out of the question.) */
#include "varlog_py.h"

#include <structmember.h>

static PyTypeObject *future_type;
static PyObject *base_set_result, *base_set_exception, *base_result, *base_exception, *base_done;
static PyObject *condition_cls;         /* threading.Condition */
static PyObject *futures_log_error;     /* concurrent.futures._base.LOGGER.error */
static PyObject *base_invoke_callbacks; /* Future._invoke_callbacks */
static PyObject *st_pending, *st_finished;
static PyObject *empty_tuple;

enum { F_STATE, F_RESULT, F_EXCEPTION, F_COND, F_WAITERS, F_CALLBACKS, F_COUNT };
static Py_ssize_t fields_offset; /* the base class's basicsize: it differs between versions */

static PyObject **fields(PyObject *self)
{
    return (PyObject **)((char *)self + fields_offset);
}

/* The lazy field i, created by make on first access. make may run Python code
 * (threading.Condition() does), so another thread may publish one meanwhile: look again after
 * it, and publish only if nobody did (no Python code runs between that look and the store), so
 * that everyone gets the one published first. */
static PyObject *lazy_get(PyObject *self, int i, PyObject *(*make)(void))
{
    PyObject **f = fields(self);
    if (f[i] == NULL) {
        PyObject *fresh = make();
        if (fresh == NULL)
            return NULL;
        if (f[i] == NULL)
            f[i] = fresh;
        else
            Py_DECREF(fresh);
    }
    Py_INCREF(f[i]);
    return f[i];
}

static PyObject *new_condition(void)
{
    return PyObject_CallNoArgs(condition_cls);
}

static PyObject *new_list(void)
{
    return PyList_New(0);
}

static PyObject *get_condition(PyObject *self, void *closure)
{
    (void)closure;
    return lazy_get(self, F_COND, new_condition);
}

static PyObject *get_waiters(PyObject *self, void *closure)
{
    (void)closure;
    return lazy_get(self, F_WAITERS, new_list);
}

static PyObject *get_callbacks(PyObject *self, void *closure)
{
    (void)closure;
    return lazy_get(self, F_CALLBACKS, new_list);
}

static void set_field(PyObject *self, int i, PyObject *value)
{
    PyObject *old = fields(self)[i];
    Py_INCREF(value);
    fields(self)[i] = value;
    Py_XDECREF(old); /* may run Python code (a finalizer) */
}

/* Assignments (a subclass's __init__ calling Future.__init__) store the value as given. */
static int set_lazy(PyObject *self, PyObject *value, int i)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete a future's attribute");
        return -1;
    }
    set_field(self, i, value);
    return 0;
}

static int set_condition(PyObject *self, PyObject *value, void *closure)
{
    (void)closure;
    return set_lazy(self, value, F_COND);
}

static int set_waiters(PyObject *self, PyObject *value, void *closure)
{
    (void)closure;
    return set_lazy(self, value, F_WAITERS);
}

static int set_callbacks(PyObject *self, PyObject *value, void *closure)
{
    (void)closure;
    return set_lazy(self, value, F_CALLBACKS);
}

static int is_finished(PyObject *self)
{
    PyObject *st = fields(self)[F_STATE];
    if (st == NULL) { /* AppendFuture.__new__ without __init__ */
        PyErr_SetString(PyExc_AttributeError, "_state");
        return -1;
    }
    return st == st_finished;
}

int vp_future_resolve(PyObject *fut, PyObject *value, bool exception)
{
    PyObject **f = fields(fut);
    if (f[F_STATE] == st_pending && f[F_COND] == NULL) {
        /* Nobody ever took the Condition: nobody waits and no callback is registered. The
         * check and the stores below run no Python code (the old values are None and PENDING,
         * which other references keep alive), so no thread can take the Condition between
         * them; a waiter that takes it later finds _state FINISHED and does not wait. */
        PyObject *old = f[exception ? F_EXCEPTION : F_RESULT];
        Py_INCREF(value);
        f[exception ? F_EXCEPTION : F_RESULT] = value;
        Py_INCREF(st_finished);
        f[F_STATE] = st_finished;
        Py_DECREF(st_pending);
        Py_XDECREF(old);
        return 0;
    }
    PyObject *r = PyObject_CallFunctionObjArgs(exception ? base_set_exception : base_set_result,
                                               fut, value, NULL);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* A pending future: what Future.__init__ sets, but no Condition and no lists yet. */
static void init_fields(PyObject *self)
{
    set_field(self, F_STATE, st_pending);
    set_field(self, F_RESULT, Py_None);
    set_field(self, F_EXCEPTION, Py_None);
}

PyObject *vp_future_new(void)
{
    PyObject *f = future_type->tp_new(future_type, empty_tuple, NULL);
    if (f != NULL)
        init_fields(f);
    return f;
}

static PyObject *none(void)
{
    Py_INCREF(Py_None);
    return Py_None;
}

static PyObject *fut_set_result(PyObject *self, PyObject *value)
{
    return vp_future_resolve(self, value, false) < 0 ? NULL : none();
}

static PyObject *fut_set_exception(PyObject *self, PyObject *value)
{
    return vp_future_resolve(self, value, true) < 0 ? NULL : none();
}

/* The base class's method on self with the same arguments. */
static PyObject *call_base(PyObject *method, PyObject *self, PyObject *const *args,
                           Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *stack[4];
    Py_ssize_t n = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    if (n > 3) {
        PyErr_SetString(PyExc_TypeError, "too many arguments");
        return NULL;
    }
    stack[0] = self;
    for (Py_ssize_t i = 0; i < n; i++)
        stack[1 + i] = args[i];
    return PyObject_Vectorcall(method, stack, 1 + nargs, kwnames);
}

/* A FINISHED future never changes again, so its outcome is read without the Condition (and
 * without creating one); any other state takes the base class's path, which waits. */
static PyObject *fut_result(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    int done = is_finished(self);
    PyObject *exc = done > 0 ? fields(self)[F_EXCEPTION] : NULL;
    if (done <= 0 || exc == NULL || (exc != Py_None && !PyExceptionInstance_Check(exc)))
        return done < 0 ? NULL : call_base(base_result, self, args, nargs, kwnames);
    if (exc != Py_None) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        return NULL;
    }
    PyObject *r = fields(self)[F_RESULT];
    r = r ? r : Py_None;
    Py_INCREF(r);
    return r;
}

static PyObject *fut_exception(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    int done = is_finished(self);
    PyObject *exc = done > 0 ? fields(self)[F_EXCEPTION] : NULL;
    if (exc == NULL)
        return done < 0 ? NULL : call_base(base_exception, self, args, nargs, kwnames);
    Py_INCREF(exc);
    return exc;
}

static PyObject *fut_done(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *st = fields(self)[F_STATE];
    if (st == st_finished)
        Py_RETURN_TRUE;
    if (st == st_pending)
        Py_RETURN_FALSE;
    return PyObject_CallOneArg(base_done, self);
}

/* concurrent.futures' _invoke_callbacks (which set_result and set_exception call), except that
 * a callback raising what is not an Exception (KeyboardInterrupt, SystemExit) does not skip
 * the callbacks after it: the first such exception is raised once all ran, so that the
 * appender hands it to the call that waits. An Exception is logged as the base class does. */
static PyObject *fut_invoke_callbacks(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *cbs = fields(self)[F_CALLBACKS];
    if (cbs == NULL)
        return none();
    if (!PyList_Check(cbs)) /* replaced by a subclass: the base class's way */
        return PyObject_CallOneArg(base_invoke_callbacks, self);
    Py_INCREF(cbs);
    PyObject *et = NULL, *ev = NULL, *tb = NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(cbs); i++) {
        PyObject *cb = PyList_GET_ITEM(cbs, i);
        Py_INCREF(cb);
        PyObject *r = PyObject_CallOneArg(cb, self);
        Py_DECREF(cb);
        if (r != NULL) {
            Py_DECREF(r);
        } else if (PyErr_ExceptionMatches(PyExc_Exception)) {
            /* LOGGER.exception("exception calling callback for %r", self), as the base does */
            PyObject *t, *v, *b;
            PyErr_Fetch(&t, &v, &b);
            PyErr_NormalizeException(&t, &v, &b);
            if (v != NULL && b != NULL)
                PyException_SetTraceback(v, b);
            PyObject *args = Py_BuildValue("(sO)", "exception calling callback for %r", self);
            PyObject *kw = Py_BuildValue("{s:O}", "exc_info", v ? v : Py_True);
            PyObject *lr = args && kw ? PyObject_Call(futures_log_error, args, kw) : NULL;
            if (lr == NULL)
                PyErr_WriteUnraisable(self);
            Py_XDECREF(lr);
            Py_XDECREF(args);
            Py_XDECREF(kw);
            Py_XDECREF(t);
            Py_XDECREF(v);
            Py_XDECREF(b);
        } else if (et == NULL) {
            PyErr_Fetch(&et, &ev, &tb);
        } else {
            PyErr_WriteUnraisable(self);
        }
    }
    Py_DECREF(cbs);
    if (et != NULL) {
        PyErr_Restore(et, ev, tb);
        return NULL;
    }
    return none();
}

static PyObject *fut_cancel(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    Py_RETURN_FALSE;
}

static int fut_init(PyObject *self, PyObject *args, PyObject *kw)
{
    if (PyTuple_GET_SIZE(args) > 0 || (kw && PyDict_GET_SIZE(kw) > 0)) {
        PyErr_SetString(PyExc_TypeError, "AppendFuture() takes no arguments");
        return -1;
    }
    if (fields(self)[F_STATE] != NULL) {
        /* a second __init__: must not make a resolved future pending again */
        PyErr_SetString(PyExc_RuntimeError, "AppendFuture already initialized");
        return -1;
    }
    init_fields(self);
    return 0;
}

/* await: varlog/_aio.py's future_await, which gives a resolved future's outcome at once and
 * chains a pending one to the running loop (its done-callback, on the thread that resolves
 * it, wakes the task through loop.call_soon_threadsafe), so that asyncio code awaits an
 * append without asyncio.wrap_future. */
static PyObject *fut_await(PyObject *self)
{
    PyObject *fn = vp_aio("future_await");
    if (fn == NULL)
        return NULL;
    PyObject *it = PyObject_CallOneArg(fn, self);
    Py_DECREF(fn);
    return it;
}

#define FASTKW(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL | METH_KEYWORDS

static PyMethodDef fut_methods[] = {
    {"cancel", fut_cancel, METH_NOARGS,
     "cancel() -> False\n\nAn append cannot be cancelled: once queued, a record's fate is the "
     "cluster's. Changes nothing."},
    {"done", fut_done, METH_NOARGS, "done() -> bool\n\nTrue once the future is resolved."},
    {"result", FASTKW(fut_result),
     "result(timeout=None) -> EntryMeta | list[EntryMeta]\n\nThe record's EntryMeta (a list "
     "of them for a sequence of records), or raises its NotAppended / "
     "MaybeAppended; waits up to timeout seconds (None: until resolved), then raises "
     "TimeoutError."},
    {"exception", FASTKW(fut_exception),
     "exception(timeout=None) -> Optional[VarlogError]\n\nNone when the record was stored, else "
     "its NotAppended / MaybeAppended; waits as result() does."},
    {"_invoke_callbacks", fut_invoke_callbacks, METH_NOARGS,
     "Runs the done-callbacks as concurrent.futures does; a KeyboardInterrupt (any "
     "BaseException that is not an Exception) one raises is raised after the others ran."},
    {"set_result", fut_set_result, METH_O,
     "set_result(result, /) -> None\n\nFor the appender (and tests): resolves the future, "
     "once; InvalidStateError after."},
    {"set_exception", fut_set_exception, METH_O,
     "set_exception(exception, /) -> None\n\nFor the appender (and tests): resolves the "
     "future with an exception, once."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef fut_getset[] = {
    {"_condition", get_condition, set_condition,
     "The threading.Condition of concurrent.futures, created on first use.", NULL},
    {"_waiters", get_waiters, set_waiters, NULL, NULL},
    {"_done_callbacks", get_callbacks, set_callbacks, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* Offsets filled in by vp_future_init_type. T_OBJECT_EX and writable: the members the
 * inherited traversal and dealloc visit and clear (as for __slots__). */
static PyMemberDef fut_members[] = {
    {"_state", T_OBJECT_EX, 0, 0, NULL},
    {"_result", T_OBJECT_EX, 0, 0, NULL},
    {"_exception", T_OBJECT_EX, 0, 0, NULL},
    {"_lazy_condition", T_OBJECT_EX, 0, 0, NULL},
    {"_lazy_waiters", T_OBJECT_EX, 0, 0, NULL},
    {"_lazy_done_callbacks", T_OBJECT_EX, 0, 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot fut_slots[] = {
    {Py_tp_doc, "A concurrent.futures.Future resolved exactly once by the appender: with the "
                "record's EntryMeta when it was stored, or with NotAppended / MaybeAppended (a "
                "VarlogError). It cannot be cancelled: cancel() returns False and changes "
                "nothing. Its threading.Condition is created only when something waits on it "
                "or adds a callback. Awaitable in asyncio: `await app.append(...)`."},
    {Py_tp_init, fut_init},
    {Py_am_await, fut_await},
    {Py_tp_methods, fut_methods},
    {Py_tp_getset, fut_getset},
    {Py_tp_members, fut_members},
    {0, NULL},
};

static PyType_Spec fut_spec = {
    .name = "varlog.AppendFuture",
    .basicsize = 0, /* set by vp_future_init_type */
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = fut_slots,
};

static PyObject *attr(PyObject *obj, const char *name)
{
    return PyObject_GetAttrString(obj, name);
}

int vp_future_init_type(PyObject *m)
{
    PyObject *base_mod = PyImport_ImportModule("concurrent.futures._base");
    PyObject *threading = PyImport_ImportModule("threading");
    if (base_mod == NULL || threading == NULL)
        goto fail;
    PyObject *base = attr(base_mod, "Future");
    if (base == NULL)
        goto fail;
    st_pending = attr(base_mod, "PENDING");
    st_finished = attr(base_mod, "FINISHED");
    condition_cls = attr(threading, "Condition");
    base_set_result = attr(base, "set_result");
    base_set_exception = attr(base, "set_exception");
    base_result = attr(base, "result");
    base_exception = attr(base, "exception");
    base_done = attr(base, "done");
    base_invoke_callbacks = attr(base, "_invoke_callbacks");
    PyObject *logger = attr(base_mod, "LOGGER");
    futures_log_error = logger ? attr(logger, "error") : NULL;
    Py_XDECREF(logger);
    empty_tuple = PyTuple_New(0);
    if (!st_pending || !st_finished || !condition_cls || !base_set_result || !base_set_exception ||
        !base_result || !base_exception || !base_done || !base_invoke_callbacks ||
        !futures_log_error || !empty_tuple) {
        Py_DECREF(base);
        goto fail;
    }
    fields_offset = ((PyTypeObject *)base)->tp_basicsize;
    fields_offset =
        (fields_offset + sizeof(PyObject *) - 1) / sizeof(PyObject *) * sizeof(PyObject *);
    fut_spec.basicsize = (int)(fields_offset + F_COUNT * sizeof(PyObject *));
    for (int i = 0; i < F_COUNT; i++)
        fut_members[i].offset = fields_offset + i * (Py_ssize_t)sizeof(PyObject *);
    future_type = (PyTypeObject *)PyType_FromSpecWithBases(&fut_spec, base);
    Py_DECREF(base);
    if (future_type == NULL)
        goto fail;
    if (PyModule_AddObjectRef(m, "AppendFuture", (PyObject *)future_type) < 0)
        goto fail;
    Py_DECREF(base_mod);
    Py_DECREF(threading);
    return 0;
fail:
    Py_XDECREF(base_mod);
    Py_XDECREF(threading);
    return -1;
}
