#ifndef VQ_INTERNAL_H
#define VQ_INTERNAL_H

/* Shared between pool/ sources only. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "vq/logger.h"
#include "vq/metrics.h"
#include "vq/ring.h"
#include "vq/task.h"

struct vq_engine;

struct vq_ctx {
    int64_t deadline;
    unsigned attempt;
    struct vq_engine *engine; /* NULL when run inline */
};

enum vq_wait_result { VQ_WAIT_ELAPSED, VQ_WAIT_STOPPED, VQ_WAIT_DEADLINE };

/* Sleeps until `until` or the context's deadline or shutdown, whichever is first. */
enum vq_wait_result vq_ctx_sleep_until(vq_ctx_t *ctx, int64_t until);

/* Engine hooks used by the context functions. */
bool vq_engine_stopping_(const struct vq_engine *e);
enum vq_wait_result vq_engine_sleep_(struct vq_engine *e, int64_t until, int64_t deadline);

/* The delay before attempt n >= 1 (or n >= 0 with delay_first): see vq_retry_t. */
int64_t vq_retry_delay_(const vq_retry_t *r, unsigned n, uint64_t *rng);

/* Counts a retry and logs its line when vq_logger_info_enabled says so: no formatting for a
 * disabled logger. Called without any lock (the logger is a user callback). */
void vq_note_retry_(const vq_logger_t *logger, vq_metrics_t *metrics, unsigned left, int64_t delay);

/* A condition variable on CLOCK_MONOTONIC, so waits survive wall-clock jumps. */
int vq_cond_init_(pthread_cond_t *c);

static inline struct timespec vq_ts_(int64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000), .tv_nsec = (long)(ns % 1000000000)};
    return ts;
}

static inline void vq_cpu_relax_(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* ---- engine internals: engine.c, engine_run.c and wake.c ---------------------------- */

/* A task record. It is as small as the old one (104 bytes; a record is allocated per queued
 * task until the free list has enough): spec.timeout_ns holds the relative timeout until
 * the deadline starts, then the absolute deadline (see vq_job_start_deadline_ below). */
typedef struct vq_job {
    vq_task_spec_t spec;
    union {
        struct vq_job *next; /* free list or completion queue */
        int64_t delay;       /* queued or in the timer heap: the delay before the pending
                                attempt, for the retry line; 0 = none */
    } u;
    unsigned attempt; /* number of the next attempt */
    int result;       /* the last attempt's, then the task's */
    int refs;         /* under e->mu: 2 while an abandoned handler and its completion both run */
} vq_job_t;

/* The deadline starts with the first attempt, or with the first delay (delay_first), and
 * then replaces the relative timeout in the record. */
static inline bool vq_job_deadline_started_(const vq_job_t *j)
{
    return j->attempt > 0 || j->spec.retry.delay_first;
}

static inline void vq_job_start_deadline_(vq_job_t *j, int64_t now)
{
    int64_t t = j->spec.timeout_ns;
    j->spec.timeout_ns = t > INT64_MAX - now ? INT64_MAX : now + t;
}

static inline int64_t vq_job_deadline_(const vq_job_t *j)
{
    return j->spec.timeout_ns;
}

/* A timer heap entry: the key is kept beside the pointer, so sifting reads no job. */
typedef struct vq_timer {
    int64_t due;
    vq_job_t *job;
} vq_timer_t;

typedef struct vq_worker {
    struct vq_engine *e;
    pthread_t th;
    struct vq_worker *next, *prev;
    vq_job_t *job;
    int64_t deadline;
    bool running; /* holds a slot and runs job */
    bool zombie;  /* abandoned at its deadline; handler still running */
    bool orphan;  /* zombie outliving vq_engine_release: frees itself */
    vq_ctx_t ctx;
    uint64_t rng;
} vq_worker_t;

/* Locking: mu guards everything except the atomics (stopping, spinning, queued, refs). The
 * metrics are atomics for their readers; the engine writes submitted, success, failure and
 * busy only with mu held, as plain stores (no locked instruction per task); retries and
 * late are added atomically, off the common path. */
struct vq_engine {
    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* idle workers */
    pthread_cond_t space_cv; /* producers waiting for room */
    pthread_cond_t stop_cv;  /* retry delays and vq_ctx_wait */
    pthread_cond_t disp_cv;  /* dispatcher */
    pthread_cond_t idle_cv;  /* release waiting for quiescence */
    vq_ring_t ring;
    vq_metrics_t metrics;
    const vq_logger_t *logger;
    int64_t default_timeout;
    unsigned workers;  /* slots */
    unsigned busy;     /* slots in use */
    unsigned nthreads; /* pool threads, abandoned ones excluded */
    unsigned nidle, nafter, nzombies;
    unsigned nwake; /* signals sent to idle workers not yet consumed */
    unsigned producers_waiting;
    bool release_waiting;
    uint64_t progress;                 /* completions, to tell a slow callback from a stuck one */
    vq_job_t *after_head, *after_tail; /* completions waiting for a thread */
    vq_timer_t *timers;                /* min-heap by due: tasks waiting out a retry delay */
    size_t ntimers, timers_cap;
    size_t limit; /* queue_limit: ring plus timers, checked by submit */
    uint64_t rng; /* jitter of delay_first delays, drawn at submit */
    vq_job_t *free_jobs;
    size_t nfree, free_max;
    vq_worker_t *threads; /* every worker thread, abandoned ones included */
    atomic_bool stopping;
    bool started, exiting;
    pthread_t disp;
    int64_t disp_wake_at;
    bool ticking; /* the dispatcher is waking idle workers on WAKE_TICK_NS */
    uint64_t tick_progress;
    size_t tick_queued;
    int64_t tick_at;
    bool shortage;
    int64_t shortage_since;
    uint64_t shortage_mark;
    bool stalled; /* stopping, every slot held, tasks queued: see vq_engine_shutdown */
    int64_t stalled_since;
    uint64_t stalled_mark;
    int64_t spawn_retry_at; /* after a failed thread creation */
    atomic_uint refs;       /* the owner plus each orphan */
    atomic_int spinning;
    atomic_size_t queued;
    unsigned ncpu; /* online CPUs at creation */
};

/* A counter only ever written with e->mu held: a plain load and store, no locked
 * instruction, yet readers without the lock see whole values. Inline because submit counts
 * every task. */
static inline void vq_bump_locked_(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* engine.c and engine_run.c call each other through these, each commented where it is
 * defined. Called with e->mu held, except vq_engine_unref_, vq_engine_on_own_thread_,
 * vq_complete_ and vq_dispatcher_main_. */
/* engine.c */
void vq_engine_unref_(struct vq_engine *e);
/* engine_run.c */
bool vq_engine_on_own_thread_(const struct vq_engine *e);
void vq_job_free_locked_(struct vq_engine *e, vq_job_t *j);
void vq_count_locked_(struct vq_engine *e, int r);
void vq_check_shortage_locked_(struct vq_engine *e);
bool vq_pop_locked_(struct vq_engine *e, vq_job_t **out);
bool vq_timer_push_locked_(struct vq_engine *e, vq_job_t *j, int64_t due);
void vq_cancel_timers_locked_(struct vq_engine *e);
void vq_complete_(struct vq_engine *e, vq_job_t *j, int r);
void vq_unlink_worker_locked_(struct vq_engine *e, vq_worker_t *w);
void *vq_dispatcher_main_(void *arg); /* the dispatcher thread; arg is the engine */

/* wake.c: when idle workers are woken, when one spins, and the dispatcher's wake tick. All
 * with e->mu held. */
void vq_wake_worker_locked_(struct vq_engine *e);
/* Spins briefly for queued work if no other thread spins and a CPU is spare, dropping the
 * lock meanwhile. Returns whether it spun (the caller re-checks for work). */
bool vq_spin_locked_(struct vq_engine *e);
/* The dispatcher's wake tick; returns when it is due next, INT64_MAX when it stopped. */
int64_t vq_wake_tick_locked_(struct vq_engine *e, int64_t now);

#endif
