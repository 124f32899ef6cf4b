#ifndef VQ_TASK_H
#define VQ_TASK_H

/* Tasks: a handler, its per-task deadline, its retry policy, an optional after-callback and
 * an optional release callback. The deadline covers every attempt and every retry delay
 * together; it starts when the first attempt starts, or when the first delay starts for a
 * task with delay_first. Time spent queued before that does not count. */
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
 * a task completed unrun (see vq_engine_shutdown and vq_engine_release). */
typedef void (*vq_after_fn)(void *arg, int result);

/* Delays. The delay before attempt n (0-based) is delay_ns when set, else
 * vq_backoff_ns(retry, n - 1), or vq_backoff_ns(retry, n) with delay_first: with it, the
 * first attempt run here is itself a retry of an attempt made elsewhere (for example on the
 * caller's thread), so it waits backoff(0) before attempt 0, backoff(1) before attempt 1,
 * and so on. delay_first does not change the number of attempts (count + 1). */
typedef struct vq_retry {
    /* Wide fields first: no padding, so a task record stays small (see docs/POOL.md). */
    int64_t delay_ns; /* fixed delay between attempts; 0 = exponential backoff below */
    int64_t min_ns;   /* backoff floor; 0 = 100 ms */
    int64_t max_ns;   /* backoff cap; 0 = 10 s */
    double factor;    /* growth per attempt; <= 0 = 2 */
    unsigned count;   /* extra attempts after the first; 0 = no retry */
    bool jitter;      /* spread each backoff delay over [d/2, d) (see vq_backoff_ns) */
    bool delay_first; /* wait a delay before attempt 0 as well (see above) */
} vq_retry_t;

/* Called once per task accepted by vq_engine_submit(_wait), when the engine will never touch
 * arg again: after the after-callback returned and after the handler returned for the last
 * time. For a handler abandoned at its deadline that is when the late handler finally
 * returns, possibly after vq_engine_release has returned (the callback must then not call
 * the engine, which is gone). */
typedef void (*vq_release_fn)(void *arg);

typedef struct vq_task_spec {
    vq_handler_fn handler; /* required */
    void *arg;             /* borrowed until release (or, without release, see below) */
    vq_after_fn after;     /* optional */
    /* Optional. Runs outside the engine lock, on an engine thread (or on the thread of
     * vq_engine_release for a task it completes unrun); should not block. Not called when
     * submit fails: the caller keeps arg. Without release, arg must still outlive the
     * handler even after a timeout, and the after-callback may run before an abandoned
     * handler has returned: release is how to know when both are done. */
    vq_release_fn release;
    int64_t timeout_ns; /* 0 = the engine's default; must not be negative */
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

/* The backoff delay number `attempt` (0-based): d = min * factor^attempt capped at max (max
 * when min >= max). With jitter and a non-NULL rng the delay is drawn uniformly from
 * [d/2, d) (at least 1 ns) and rng advances on every draw, the first delay included, so
 * callers started together spread out from their first retry on. rng is a caller-owned
 * xorshift state (any seed; 0 is replaced). Pure apart from rng; never blocks. */
int64_t vq_backoff_ns(const vq_retry_t *r, unsigned attempt, uint64_t *rng);

/* Runs spec's handler with its retries on the calling thread, with no queue or worker:
 * the C counterpart of golang-queue's handle(). The deadline is checked between attempts
 * (a running handler cannot be pre-empted on the caller's own thread). Blocks for the
 * handler and the retry delays, sleeping them on the calling thread (delay_first included). Logs
 * retries through logger (may be NULL) when vq_logger_info_enabled says so; counts retries in
 * metrics (may be NULL). spec->after is not called. Returns the task result: 0, the last handler
 * error, VQ_ERR_PANIC, VQ_ERR_TIMEOUT, or VQ_ERR_INVALID for a bad spec. spec->release is not
 * called either. Allocates nothing. */
int vq_task_run_inline(const vq_task_spec_t *spec, const vq_logger_t *logger,
                       vq_metrics_t *metrics);

#endif
