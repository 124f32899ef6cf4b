#ifndef VQ_TASK_H
#define VQ_TASK_H

/* Tasks: a handler, its per-task deadline, its retry policy and an optional after-callback.
 * The deadline covers every attempt and every retry delay together. */
#include <stdbool.h>
#include <stdint.h>

#include "vq/logger.h"
#include "vq/metrics.h"

/* Handed to a handler; valid only during that call. */
typedef struct vq_ctx vq_ctx_t;

/* Returns 0 on success, VQ_ERR_PANIC for a fault that must not be retried, or any other
 * code (VQ_ERR_USER and up for the handler's own) for a failure that may be retried. */
typedef int (*vq_handler_fn)(vq_ctx_t *ctx, void *arg);

/* Receives the task's single result: the handler's, VQ_ERR_TIMEOUT, or VQ_ERR_SHUTDOWN for
 * a task dropped unrun by a release with zero workers. */
typedef void (*vq_after_fn)(void *arg, int result);

typedef struct vq_retry {
    unsigned count;   /* extra attempts after the first; 0 = no retry */
    int64_t delay_ns; /* fixed delay between attempts; 0 = exponential backoff below */
    int64_t min_ns;   /* backoff floor; 0 = 100 ms */
    int64_t max_ns;   /* backoff cap; 0 = 10 s */
    double factor;    /* growth per attempt; <= 0 = 2 */
    bool jitter;      /* draw each delay uniformly from [min, computed) */
} vq_retry_t;

typedef struct vq_task_spec {
    vq_handler_fn handler; /* required */
    void *arg;             /* borrowed: must outlive the handler even after a timeout */
    vq_after_fn after;     /* optional */
    int64_t timeout_ns;    /* 0 = the engine's default; must not be negative */
    vq_retry_t retry;
} vq_task_spec_t;

/* Monotonic clock in nanoseconds. */
int64_t vq_now_ns(void);

/* True once the task's deadline has passed or its engine is shutting down. Handlers that
 * poll this stop promptly; those that do not are abandoned at their deadline. Never blocks. */
bool vq_ctx_cancelled(const vq_ctx_t *ctx);

/* Absolute deadline (vq_now_ns clock) and 0-based attempt number of the running call. */
int64_t vq_ctx_deadline_ns(const vq_ctx_t *ctx);
unsigned vq_ctx_attempt(const vq_ctx_t *ctx);

/* Blocks the handler for up to ns, returning early when the context is cancelled.
 * Returns true if cancelled (deadline or shutdown), false if ns elapsed. */
bool vq_ctx_wait(vq_ctx_t *ctx, int64_t ns);

/* The delay before retry number `attempt` (0-based): min * factor^attempt, drawn uniformly
 * from [min, that) when jitter is set, clamped to [min, max] (max when min >= max).
 * rng is a caller-owned xorshift state (any non-zero seed); it is advanced only for jitter.
 * Pure apart from rng; never blocks. */
int64_t vq_backoff_ns(const vq_retry_t *r, unsigned attempt, uint64_t *rng);

/* Runs spec's handler with its retries on the calling thread, with no queue or worker:
 * the C counterpart of golang-queue's handle(). The deadline is checked between attempts
 * (a running handler cannot be pre-empted on the caller's own thread). Blocks for the
 * handler and the retry delays. Logs retries through logger (may be NULL) when
 * vq_logger_info_enabled says so; counts retries in metrics (may be NULL). spec->after is
 * not called. Returns the task result: 0, the last handler error, VQ_ERR_PANIC,
 * VQ_ERR_TIMEOUT, or VQ_ERR_INVALID for a bad spec. Allocates nothing. */
int vq_task_run_inline(const vq_task_spec_t *spec, const vq_logger_t *logger,
                       vq_metrics_t *metrics);

#endif
