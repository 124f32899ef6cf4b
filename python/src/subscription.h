/* The Subscription object, shared by subscription.c (creation, close, the iterator and
 * async forms, health and stats) and subscription_handler.c (the handler form's callbacks and
 * wait()). See subscription.c for the locks. */
#ifndef VARLOG_PY_SUBSCRIPTION_H
#define VARLOG_PY_SUBSCRIPTION_H

#include "varlog_py.h"

#include <stdatomic.h>

#define WAIT_CHUNK_MS 100

struct vp_subscription {
    PyObject_HEAD varlog_subscription_t *sub; /* NULL once closed (guarded by rw) */
    pthread_rwlock_t rw;
    pthread_mutex_t mu;
    /* closes waiting for rw: a waiting reader returns CLOSED at its next chunk */
    atomic_int closers;
    atomic_bool closing; /* close began: the handler is not called any more */
    vp_client_t *client;
    PyObject *weakreflist;
    varlog_err_t ended; /* END, or the failure, once reported (GIL-guarded) */
    PyObject *failure;  /* the exception raised for it, raised again by later calls */
    /* handler form */
    bool handler_form;
    PyObject *handler;         /* cleared once closed (GIL) */
    bool self_ref;             /* the reference held while handlers may run (GIL) */
    bool published;            /* sub was set by subscribe (GIL) */
    bool close_when_published; /* the handler raised before that (GIL) */
    pthread_mutex_t done_mu;   /* done: ended, failed or closed; wait() sleeps on done_cv */
    pthread_cond_t done_cv;
    bool done;
    PyObject *aio; /* varlog._aio's reader of the async iterator, NULL before its first use */
};

/* subscription.c */
void vp_sub_close(vp_subscription_t *s); /* idempotent; GIL held; may free s (last ref) */
PyObject *vp_entry_new(const varlog_entry_t *e);
PyObject *vp_sub_raise_state(const char *text); /* VarlogError ERR_STATE; returns NULL */

/* subscription_handler.c */
void vp_sub_mark_done(vp_subscription_t *s);
void vp_sub_drop_self_ref(vp_subscription_t *s);
void vp_sub_on_entry(const varlog_entry_t *e, void *opaque);
void vp_sub_on_end(void *opaque);
void vp_sub_on_error(varlog_err_t err, const char *why, void *opaque);
PyObject *vp_sub_wait(PyObject *self, PyObject *args, PyObject *kw);

#endif
