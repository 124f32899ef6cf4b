/* The retry loop shared by the engine's workers and the inline runner, the backoff maths
 * and the handler context. */
#include <errno.h>
#include <stdint.h>

#include "internal.h"
#include "vq/err.h"

#define DEFAULT_MIN_NS 100000000LL
#define DEFAULT_MAX_NS 10000000000LL
#define DEFAULT_TIMEOUT_NS (60LL * 60 * 1000000000LL)

int64_t vq_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int vq_cond_init_(pthread_cond_t *c)
{
    pthread_condattr_t a;
    int rc = pthread_condattr_init(&a);
    if (rc)
        return rc;
    rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    if (!rc)
        rc = pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
    return rc;
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ULL;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 2685821657736338717ULL;
}

int64_t vq_backoff_ns(const vq_retry_t *r, unsigned attempt, uint64_t *rng)
{
    double min = (double)(r->min_ns > 0 ? r->min_ns : DEFAULT_MIN_NS);
    double max = (double)(r->max_ns > 0 ? r->max_ns : DEFAULT_MAX_NS);
    double factor = r->factor > 0 ? r->factor : 2.0;
    double d = min;
    if (min >= max) {
        d = max;
    } else {
        /* Multiplying step by step stops as soon as the cap is passed, so a large attempt
         * number cannot overflow to infinity. */
        for (unsigned i = 0; i < attempt && d <= max; i++)
            d *= factor;
        if (!(d <= max))
            d = max;
    }
    if (r->jitter && rng) {
        /* [d/2, d) rather than Go's [min, d): the latter leaves the first delay (d == min)
         * without jitter, so callers that failed together retried together. */
        double u = (double)(xorshift(rng) >> 11) * 0x1.0p-53;
        d = d / 2 + u * (d / 2);
        if (d < 1)
            d = 1;
    }
    return (int64_t)d;
}

int64_t vq_retry_delay_(const vq_retry_t *r, unsigned n, uint64_t *rng)
{
    if (r->delay_ns > 0)
        return r->delay_ns;
    return vq_backoff_ns(r, r->delay_first ? n : n - 1, rng);
}

void vq_note_retry_(const vq_logger_t *logger, vq_metrics_t *metrics, unsigned left, int64_t delay)
{
    if (metrics)
        atomic_fetch_add_explicit(&metrics->retries, 1, memory_order_relaxed);
    /* The hook is asked first so a disabled logger costs no formatting at all. */
    if (vq_logger_info_enabled(logger))
        vq_log(logger, VQ_LOG_INFO, "retry remaining times: %u, delay time: %lld ns", left,
               (long long)delay);
}

bool vq_ctx_cancelled(const vq_ctx_t *ctx)
{
    if (ctx->engine && vq_engine_stopping_(ctx->engine))
        return true;
    return vq_now_ns() >= ctx->deadline;
}

int64_t vq_ctx_deadline_ns(const vq_ctx_t *ctx)
{
    return ctx->deadline;
}

unsigned vq_ctx_attempt(const vq_ctx_t *ctx)
{
    return ctx->attempt;
}

enum vq_wait_result vq_ctx_sleep_until(vq_ctx_t *ctx, int64_t until)
{
    if (ctx->engine)
        return vq_engine_sleep_(ctx->engine, until, ctx->deadline);
    int64_t end = until < ctx->deadline ? until : ctx->deadline;
    if (vq_now_ns() < end) {
        struct timespec ts = vq_ts_(end);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
    }
    return vq_now_ns() >= ctx->deadline ? VQ_WAIT_DEADLINE : VQ_WAIT_ELAPSED;
}

bool vq_ctx_wait(vq_ctx_t *ctx, int64_t ns)
{
    int64_t now = vq_now_ns();
    int64_t until = ns > INT64_MAX - now ? INT64_MAX : now + ns;
    return vq_ctx_sleep_until(ctx, until) != VQ_WAIT_ELAPSED;
}

/* The inline retry loop (the engine runs one attempt per slot and keeps delays on its timer
 * heap instead). */
static int handle(const vq_task_spec_t *spec, vq_ctx_t *ctx, const vq_logger_t *logger,
                  vq_metrics_t *metrics, uint64_t *rng)
{
    const vq_retry_t *retry = &spec->retry;
    for (unsigned k = 0;; k++) {
        if (k > 0 || retry->delay_first) {
            int64_t d = vq_retry_delay_(retry, k, rng);
            int64_t now = vq_now_ns();
            if (vq_ctx_sleep_until(ctx, d > INT64_MAX - now ? INT64_MAX : now + d) !=
                VQ_WAIT_ELAPSED)
                return VQ_ERR_TIMEOUT; /* no engine here: the deadline is the only stop */
            vq_note_retry_(logger, metrics, retry->count - k, d);
        }
        ctx->attempt = k;
        int r = spec->handler(ctx, spec->arg);
        if (vq_now_ns() >= ctx->deadline) {
            /* Whatever it says, an answer after the deadline is late: the task's result is
             * the timeout, as if the caller had stopped waiting. */
            if (metrics)
                atomic_fetch_add_explicit(&metrics->late, 1, memory_order_relaxed);
            return VQ_ERR_TIMEOUT;
        }
        if (r == VQ_OK || r == VQ_ERR_PANIC || k == retry->count)
            return r;
    }
}

int vq_task_run_inline(const vq_task_spec_t *spec, const vq_logger_t *logger, vq_metrics_t *metrics)
{
    if (!spec || !spec->handler || spec->timeout_ns < 0 || spec->retry.delay_ns < 0)
        return VQ_ERR_INVALID;
    static _Thread_local uint64_t rng;
    int64_t now = vq_now_ns();
    if (!rng)
        rng = (uint64_t)now ^ (uint64_t)(uintptr_t)&rng;
    int64_t t = spec->timeout_ns ? spec->timeout_ns : DEFAULT_TIMEOUT_NS;
    vq_ctx_t ctx = {.deadline = t > INT64_MAX - now ? INT64_MAX : now + t};
    return handle(spec, &ctx, logger, metrics, &rng);
}
