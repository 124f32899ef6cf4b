#ifndef VARLOG_PY_APPENDER_INTERNAL_H
#define VARLOG_PY_APPENDER_INTERNAL_H

/* varlog.Appender's state, shared by appender.c (the Python type) and appender_settle.c (the
 * list of settled calls, the futures' resolution and the resolver thread). */
#include "varlog_py.h"

#include <stdatomic.h>

/* Settled calls waiting for their future: past this the appender's thread waits for the
 * resolvers, which keeps the library's memory bound (appender.queue.max.*) meaningful. */
#define DONE_MAX 65536
/* How long settled calls wait for the producer to resolve them before the resolver thread
 * takes the GIL: the latency a future gets when the producer is idle. */
#define RESOLVER_GRACE_NS (500 * 1000L)

typedef struct done {
    struct done *next;
    vp_appender_t *owner;
    PyObject *fut;
    varlog_err_t err;
    varlog_outcome_t outcome;
    varlog_entry_meta_t meta;   /* one record's position (metas NULL) */
    varlog_entry_meta_t *metas; /* a sequence's n positions, malloc'ed by the append */
    size_t n;
    char *errtext; /* malloc'ed, failures only */
} done_t;

struct vp_appender {
    PyObject_HEAD varlog_appender_t *app; /* NULL once close began */
    vp_client_t *client;
    PyObject *weakreflist;
    int calls;           /* producers waiting in the library with the GIL released (GIL-guarded) */
    int draining;        /* depth of the drains resolving futures on drainer (GIL-guarded) */
    pthread_t drainer;   /* the thread draining, while draining */
    done_t *taken;       /* settled calls a drain took from the list, not resolved yet (GIL) */
    PyObject *interrupt; /* a BaseException a done-callback raised, not raised yet (GIL) */
    _Atomic int no_room_wait; /* > 0: on_appended does not wait for room in the list */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_room;
    done_t *head, *tail;
    _Atomic size_t count;
    bool stop;
    bool resolver_started;
    pthread_t resolver;
};

/* The library's callback (its appender thread): queues the settled call d (opaque) for the
 * resolvers; waits for room past DONE_MAX. Never takes the GIL. */
void vp_app_on_appended(const varlog_append_result_t *r, void *opaque);
/* The same for future=False (opaque the appender): only a failure is queued, to be logged. */
void vp_app_on_appended_bare(const varlog_append_result_t *r, void *opaque);
/* Raises the BaseException a done-callback raised, if there is one: returns -1 then. GIL. */
int vp_app_raise_interrupt(vp_appender_t *a);
void vp_app_done_free(done_t *d);
/* Whether this thread is draining a's settled calls (a done-callback of its drain runs). */
bool vp_app_drains_here(vp_appender_t *a);
/* Resolves every settled call's future, in order; false when another thread's drain is in
 * progress. GIL held. */
bool vp_app_drain(vp_appender_t *a);
/* Waits, GIL held, until every call settled so far has its future resolved. */
void vp_app_drain_all(vp_appender_t *a);
/* Around a wait in the library that nobody else may drain for: the library's thread does
 * not wait for room meanwhile. */
void vp_app_room_wait_off(vp_appender_t *a);
void vp_app_room_wait_on(vp_appender_t *a);
/* The resolver thread ("varlog-py-res"): holds a reference to a, dropped as it ends. */
void *vp_app_resolver_main(void *arg);

#endif
