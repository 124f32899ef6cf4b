#ifndef VQ_ENGINE_H
#define VQ_ENGINE_H

/* The queue engine: a bounded ring of tasks, one persistent dispatcher thread and a set of
 * reusable worker threads.
 *
 * Threads. Workers take tasks from the ring themselves under the engine lock and keep their
 * slot across consecutive tasks, so a busy engine hands over work without waking anyone.
 * The dispatcher creates and replaces workers, and is the watchdog: a handler still running
 * at its deadline is reported as VQ_ERR_TIMEOUT, its slot is freed at once and its thread
 * is set aside until the handler returns (its late result is counted and discarded).
 * A failed attempt with retries left waits out its retry delay on the dispatcher's timer
 * heap, holding no slot and no thread, and re-enters the queue when due.
 * After-callbacks and release callbacks run on worker threads outside the slots; a callback
 * that blocks (for example waiting for another task) makes the dispatcher add a thread
 * after a short grace. No thread is created per task.
 *
 * Callbacks. Handlers, after-callbacks, release callbacks and the logger never run with the
 * engine lock held, so each may call any function below (vq_engine_release excepted: see
 * there). */
#include <stddef.h>
#include <stdint.h>

#include "vq/err.h"
#include "vq/logger.h"
#include "vq/metrics.h"
#include "vq/task.h"

typedef struct vq_engine vq_engine_t;

typedef struct vq_engine_opts {
    unsigned workers;           /* slots; 0 = created paused (see vq_engine_set_workers) */
    size_t queue_limit;         /* tasks waiting (queued or in a retry delay) that submit
                                   accepts; 0 = unbounded */
    size_t min_capacity;        /* ring slots kept after draining; 0 = 2 */
    int64_t default_timeout_ns; /* for specs with timeout_ns 0; 0 = 60 min */
    size_t task_cache;          /* finished task records kept for reuse; 0 = max(1024, min) */
    const vq_logger_t *logger;  /* borrowed, must outlive the engine; NULL = stderr */
} vq_engine_opts_t;

/* Defaults: workers = online CPUs, everything else 0 (meaning the defaults above). */
void vq_engine_opts_init(vq_engine_opts_t *o);

/* Creates a stopped engine; tasks may be submitted before vq_engine_start. *out is owned by
 * the caller and freed by vq_engine_release. Does not block; starts no thread.
 * Errors: VQ_ERR_INVALID (NULL arguments, negative timeout), VQ_ERR_NOMEM. */
vq_err_t vq_engine_create(const vq_engine_opts_t *o, vq_engine_t **out);

/* Starts the dispatcher, which starts the workers. Idempotent: later calls do nothing and
 * return VQ_OK. Does not wait for the workers to come up.
 * Errors: VQ_ERR_SHUTDOWN (after shutdown), VQ_ERR_THREAD (engine unchanged). */
vq_err_t vq_engine_start(vq_engine_t *e);

/* Queues a copy of *spec (with retry.delay_first: puts it in its first delay instead). On
 * success spec->arg is the engine's until spec->release (if any) is called; on any error
 * nothing is kept and release is not called. Never blocks on a full queue. Thread-safe,
 * callable from handlers and callbacks. In steady state allocates nothing (task records and
 * the timer heap are recycled).
 * Errors: VQ_ERR_INVALID (bad spec: no handler, negative timeout or delay), VQ_ERR_SHUTDOWN,
 * VQ_ERR_FULL (limit reached, nothing queued), VQ_ERR_NOMEM. */
vq_err_t vq_engine_submit(vq_engine_t *e, const vq_task_spec_t *spec);

/* As vq_engine_submit, but waits while the queue is full: up to timeout_ns, or without
 * bound when timeout_ns < 0. Shutdown wakes it with VQ_ERR_SHUTDOWN.
 * Errors: as vq_engine_submit except that VQ_ERR_FULL becomes VQ_ERR_TIMEOUT. */
vq_err_t vq_engine_submit_wait(vq_engine_t *e, const vq_task_spec_t *spec, int64_t timeout_ns);

/* Sets the number of slots. Raising it starts queued work at once (threads are created by
 * the dispatcher); lowering it lets running tasks finish and then retires the surplus
 * threads; 0 pauses. Does not block on tasks. Errors: none besides VQ_ERR_INVALID (NULL). */
vq_err_t vq_engine_set_workers(vq_engine_t *e, unsigned n);
unsigned vq_engine_workers(const vq_engine_t *e);

/* Stops intake (submit returns VQ_ERR_SHUTDOWN), wakes producers blocked in
 * vq_engine_submit_wait, cancels pending retry delays (the task ends with its last attempt's
 * error, or VQ_ERR_SHUTDOWN if delay_first kept it from running at all) and makes
 * vq_ctx_cancelled true for running handlers.
 * Queued tasks still run as slots free up. But when every slot stays held by a running
 * handler with no task completing for 100 ms, the tasks still queued are completed unrun
 * with VQ_ERR_SHUTDOWN (after-callback, then release), on a thread added for them if none
 * is free: the handlers holding the slots may be waiting for those very tasks, and nothing
 * else would ever free a slot. Does not block; idempotent; callable from any thread,
 * including handlers and callbacks. Logs "shutdown: N busy workers" (INFO) after dropping
 * the lock. */
void vq_engine_shutdown(vq_engine_t *e);

/* Shuts down, waits until every queued task has run or been completed unrun (see
 * vq_engine_shutdown), every running handler has returned or timed out, and every
 * after-callback and release callback of those tasks has returned; then joins the threads
 * and frees the engine. Handlers abandoned at their deadline are not waited for: their
 * threads exit on their own when the handler returns, and call the task's release then (a
 * caller that must outlive those handlers waits for its own release callbacks). With zero
 * workers or a never-started engine, queued tasks are not run: each is completed with
 * VQ_ERR_SHUTDOWN (after-callback and release run on the calling thread). Blocks at most as
 * long as the longest remaining task deadline. e is invalid afterwards.
 * Errors: VQ_ERR_BUSY when called from one of e's own threads (nothing done). */
vq_err_t vq_engine_release(vq_engine_t *e);

/* Live counters; valid until vq_engine_release. */
const vq_metrics_t *vq_engine_metrics(const vq_engine_t *e);

/* Thread counts, for tests and diagnostics: dispatchers (0 or 1), worker threads attached
 * to the pool, and abandoned handlers still running. Takes the engine lock briefly. */
typedef struct vq_engine_threads {
    unsigned dispatchers, workers, abandoned;
} vq_engine_threads_t;
void vq_engine_thread_counts(vq_engine_t *e, vq_engine_threads_t *out);

#endif
