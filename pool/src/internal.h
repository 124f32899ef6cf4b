#ifndef VQ_INTERNAL_H
#define VQ_INTERNAL_H

/* Shared between pool/ sources only. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "vq/task.h"

struct vq_engine;
struct vq_worker;

struct vq_ctx {
    int64_t deadline;
    unsigned attempt;
    struct vq_engine *engine; /* NULL when run inline */
    struct vq_worker *worker;
};

enum vq_wait_result { VQ_WAIT_ELAPSED, VQ_WAIT_STOPPED, VQ_WAIT_DEADLINE };

/* Sleeps until `until` or the context's deadline or shutdown, whichever is first. When
 * `retry_delay` is set the engine's watchdog leaves the worker alone meanwhile: the worker
 * enforces its own deadline there. */
enum vq_wait_result vq_ctx_sleep_until(vq_ctx_t *ctx, int64_t until, bool retry_delay);

/* Engine hooks used by the context functions. */
bool vq_engine_stopping_(const struct vq_engine *e);
enum vq_wait_result vq_engine_sleep_(struct vq_engine *e, struct vq_worker *w, int64_t until,
                                     int64_t deadline);

/* The retry loop: attempts, delays, retry logging. Returns the task's result. */
int vq_handle_(const vq_task_spec_t *spec, vq_ctx_t *ctx, const vq_logger_t *logger,
               vq_metrics_t *metrics, uint64_t *rng);

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

#endif
