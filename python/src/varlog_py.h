/* Shared declarations of the varlog extension module (_varlog). Every Python object of the
 * module is touched only with the GIL held; C threads of the library reach Python only
 * through vp_gil_enter, which refuses once the interpreter is shutting down. */
#ifndef VARLOG_PY_H
#define VARLOG_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <varlog/varlog.h>

#if PY_VERSION_HEX < 0x030A0000
/* 3.9: PyModule_AddObjectRef is 3.10's */
static inline int PyModule_AddObjectRef(PyObject *m, const char *name, PyObject *v)
{
    Py_XINCREF(v);
    int rc = PyModule_AddObject(m, name, v);
    if (rc < 0)
        Py_XDECREF(v);
    return rc;
}
#endif

/* Module state, one interpreter (the module declares no subinterpreter support). */
typedef struct vp_state {
    PyObject *VarlogError, *NotAppended, *MaybeAppended, *QueueFull, *InvalidArgument, *Closed,
        *TimedOut, *UnknownTopic, *UnknownLogStream, *Trimmed, *ClosedNotAppended;
    PyTypeObject *entry_type, *meta_type;
    PyObject *default_logger; /* logging.getLogger("varlog") */
} vp_state_t;

extern vp_state_t vp;

/* Set by the atexit hook (varlog._shutdown) before the interpreter finalizes: from then on
 * no C thread enters Python. Read without the GIL, so atomic. */
extern _Atomic int vp_shutting_down;

/* PyGILState_Ensure unless the interpreter is finalizing (taking the GIL then would end the
 * calling C thread inside the library). Returns false when Python must not be entered. */
bool vp_gil_enter(PyGILState_STATE *st);

/* Raises the exception for err with varlog_last_error()'s text. outcome: -1 when the call
 * has no append outcome, else the varlog_outcome_t; the append classes are chosen by it. */
PyObject *vp_raise(varlog_err_t err, int outcome);
/* The exception object (not raised) for err, text and outcome; NULL with an error set. */
PyObject *vp_make_error(varlog_err_t err, const char *text, int outcome);

PyObject *vp_meta_new(const varlog_entry_meta_t *m);

/* Timeouts in seconds (None = the default given) to milliseconds; -2 with an error set. */
int64_t vp_timeout_ms(PyObject *obj, int64_t dflt);

/* The records of an append: one bytes-like object (one) or a sequence of them, borrowed
 * through the buffer protocol (no copy) until vp_records_release. records[0..n) point into
 * the views; a single record uses the struct's own storage (no allocation), so the struct
 * must not be moved. Errors, with nothing held: TypeError (a str, or an element that is not
 * bytes-like, named by its index), InvalidArgument (an empty sequence). */
typedef struct vp_records {
    Py_buffer *views;
    varlog_record_t *records;
    Py_ssize_t n;
    bool one;
    Py_buffer view1;
    varlog_record_t rec1;
} vp_records_t;
int vp_records_get(PyObject *obj, vp_records_t *r);
void vp_records_release(vp_records_t *r);

/* A new reference to varlog._aio's attribute name (the asyncio helpers), importing the module
 * on first use; NULL with an error set. GIL held. */
PyObject *vp_aio(const char *name);

/* Fills conf from properties (a dict of dotted names) and kwargs (underscores for dots).
 * Returns 0, or -1 with an exception set. */
int vp_conf_apply(varlog_conf_t *conf, PyObject *properties, PyObject *kwargs);

/* The library's log line to a logging.Logger (opaque, borrowed for the client's life). */
void vp_log_cb(void *opaque, varlog_log_level_t level, varlog_log_ctx_t ctx, const char *message);

/* ---- types ---- */
typedef struct vp_client vp_client_t;
typedef struct vp_appender vp_appender_t;
typedef struct vp_subscription vp_subscription_t;

struct vp_client {
    PyObject_HEAD varlog_client_t *client; /* NULL once closed */
    PyObject *logger;
    PyObject *children; /* list of weakrefs to appenders and subscriptions */
    PyObject *weakreflist;
    int calls;    /* calls running with the GIL released, or adopting a child (GIL-guarded) */
    bool closing; /* a close is under way (GIL-guarded) */
    vp_client_t *prev, *next; /* live clients, for the atexit hook */
};

extern PyTypeObject vp_client_type, vp_appender_type, vp_subscription_type, vp_admin_type,
    vp_server_type;

varlog_client_t *vp_client_get(vp_client_t *c); /* NULL with Closed raised */
int vp_client_adopt(vp_client_t *c, PyObject *child);

/* Drains (future resolutions) under way on this thread: a done-callback runs when > 0. */
extern _Thread_local int vp_drain_depth;

/* Close children (appenders, subscriptions) without raising; used by Client.close. The
 * appender's returns what one of its done-callbacks raised that is not an Exception
 * (KeyboardInterrupt: a new reference, for Client.close to raise), else NULL. */
PyObject *vp_appender_close_quiet(vp_appender_t *a);
void vp_subscription_close_quiet(vp_subscription_t *s);

/* Closes every live client (atexit). */
void vp_client_close_all(void);

/* In the child of a fork (os.register_at_fork): every handle of the parent is made to look
 * closed without calling into the library, whose threads the child does not have; their C
 * objects are left as they are (leaked). */
void vp_client_forget_all(void);
void vp_appender_forget(vp_appender_t *a);
void vp_subscription_forget(vp_subscription_t *s);
/* Before a Client, Admin or Server starts the library: -1 with an error set in the child of a
 * fork of a process that had started it (gRPC's threads were not copied: it would hang). */
int vp_library_check(void);
/* Server and Admin handles register the field holding their C pointer for that. GIL held. */
int vp_fork_track(void **slot);
void vp_fork_untrack(void **slot);

/* varlog.AppendFuture (future.c): a new pending future, and its resolution (exactly once;
 * InvalidStateError after). GIL held. Returns -1 with an error set. */
PyObject *vp_future_new(void);
int vp_future_resolve(PyObject *fut, PyObject *value, bool exception);

int vp_future_init_type(PyObject *m);
int vp_appender_init_type(PyObject *m);
int vp_subscription_init_type(PyObject *m);
int vp_admin_server_init_types(PyObject *m);

#endif
