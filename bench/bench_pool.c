/* bench_pool: the golang-queue benchmarks in C, printed as Go benchmark lines.
 *
 *   bench_pool [-benchtime=D|Nx] [-count=N] [-bench=REGEX] [FILTER]   (see harness.h)
 *
 * With no arguments every benchmark runs once for about 200 ms; -count runs each N times in
 * a row (as Go's -count), for medians. The names are golang-queue's, so that benchstat pairs
 * them. Each measures the same work per op as its Go counterpart (reference section 2.2);
 * B/op counts requested bytes, not Go's size-class-rounded bytes. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "vq/vq.h"
#include "harness.h"

static void pool_fail(bench_b_t *b, const char *what, int rc)
{
    b_failf(b, "%s: %s (%d)", what, vq_err_str(rc), rc);
}

/* ---- ring -------------------------------------------------------------------------- */

/* Go's Ring takes its mutex on every Queue and Request; the engine takes its lock around
 * the ring the same way, so the ring benchmarks do too. */
static pthread_mutex_t ring_mu = PTHREAD_MUTEX_INITIALIZER;

static void bench_ring_burst(bench_b_t *b)
{
    size_t min = *(const size_t *)b->arg;
    vq_ring_t r;
    static int task;
    if (vq_ring_init(&r, 0, min) != VQ_OK)
        return pool_fail(b, "ring init", VQ_ERR_NOMEM);
    b_reset_timer(b);
    for (long i = 0; i < b->n; i++) {
        for (int k = 0; k < 1024; k++) {
            pthread_mutex_lock(&ring_mu);
            vq_err_t rc = vq_ring_push(&r, &task);
            pthread_mutex_unlock(&ring_mu);
            if (rc != VQ_OK)
                return pool_fail(b, "push", rc);
        }
        for (int k = 0; k < 1024; k++) {
            void *p;
            pthread_mutex_lock(&ring_mu);
            vq_err_t rc = vq_ring_pop(&r, &p);
            pthread_mutex_unlock(&ring_mu);
            if (rc != VQ_OK)
                return pool_fail(b, "pop", rc);
        }
    }
    b_stop_timer(b);
    vq_ring_destroy(&r);
}

/* Count held at the capacity (4 or 1,024); one push and one pop per op. */
static void bench_ring_boundary(bench_b_t *b)
{
    size_t fill = *(const size_t *)b->arg;
    vq_ring_t r;
    static int task;
    if (vq_ring_init(&r, 0, 0) != VQ_OK)
        return pool_fail(b, "ring init", VQ_ERR_NOMEM);
    for (size_t k = 0; k < fill; k++)
        vq_ring_push(&r, &task);
    b_reset_timer(b);
    for (long i = 0; i < b->n; i++) {
        void *p;
        pthread_mutex_lock(&ring_mu);
        vq_err_t rc = vq_ring_push(&r, &task);
        if (rc == VQ_OK)
            rc = vq_ring_pop(&r, &p);
        pthread_mutex_unlock(&ring_mu);
        if (rc != VQ_OK)
            return pool_fail(b, "push/pop", rc);
    }
    b_stop_timer(b);
    vq_ring_destroy(&r);
}

/* ---- handle ------------------------------------------------------------------------ */

typedef struct flaky {
    int fails, attempts;
} flaky_t;

static int flaky_handler(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    flaky_t *f = arg;
    return f->attempts++ < f->fails ? VQ_ERR_USER : VQ_OK;
}

static void bench_handle_retry(bench_b_t *b)
{
    int retries = *(const int *)b->arg;
    flaky_t f = {.fails = retries};
    vq_task_spec_t s = {.handler = flaky_handler, .arg = &f, .timeout_ns = 60000000000LL};
    s.retry.delay_ns = 1;
    const vq_logger_t *l = vq_logger_discard();
    b_reset_timer(b);
    for (long i = 0; i < b->n; i++) {
        f.attempts = 0;
        s.retry.count = (unsigned)retries;
        int rc = vq_task_run_inline(&s, l, NULL);
        if (rc != VQ_OK || f.attempts != retries + 1)
            return pool_fail(b, "handle", rc);
    }
}

/* BenchmarkQueueTask: enqueue into an engine that is not started (unbounded ring). */
static void bench_submit(bench_b_t *b)
{
    vq_engine_opts_t o;
    vq_engine_opts_init(&o);
    o.workers = 1;
    o.logger = vq_logger_discard();
    o.task_cache = 1;
    vq_engine_t *e;
    vq_err_t rc = vq_engine_create(&o, &e);
    if (rc != VQ_OK)
        return pool_fail(b, "create", rc);
    vq_task_spec_t s = {.handler = flaky_handler};
    b_reset_timer(b);
    for (long i = 0; i < b->n; i++) {
        if ((rc = vq_engine_submit(e, &s)) != VQ_OK)
            return pool_fail(b, "submit", rc);
    }
    b_stop_timer(b);
    vq_engine_shutdown(e);
    vq_engine_set_workers(e, 0);
    vq_engine_release(e); /* not started: completes the tasks unrun */
}

/* ---- end to end -------------------------------------------------------------------- */

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_long done;
    long target;
} waiter_t;

static void waiter_hit(waiter_t *w)
{
    if (atomic_fetch_add_explicit(&w->done, 1, memory_order_acq_rel) + 1 == w->target) {
        pthread_mutex_lock(&w->mu);
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
}

static void waiter_wait(waiter_t *w)
{
    pthread_mutex_lock(&w->mu);
    while (atomic_load_explicit(&w->done, memory_order_acquire) < w->target)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

static int signal_task(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    waiter_hit(arg);
    return VQ_OK;
}

static int noop_task(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
    return VQ_OK;
}

static void signal_after(void *arg, int r)
{
    (void)r;
    waiter_hit(arg);
}

/* Fails its first attempt: the engine's retry path (delay 1 ns, so the retry is due at once
 * and goes straight back to the queue). */
static int retry_once_task(vq_ctx_t *ctx, void *arg)
{
    if (vq_ctx_attempt(ctx) == 0)
        return VQ_ERR_USER;
    waiter_hit(arg);
    return VQ_OK;
}

typedef struct e2e {
    unsigned workers;
    int producers; /* 0 = the benchmark thread submits */
    size_t min_capacity;
    bool after;
    bool retry; /* every task fails once and is retried */
} e2e_t;

typedef struct prod {
    vq_engine_t *e;
    const vq_task_spec_t *spec;
    long n;
    int rc;
} prod_t;

static void *producer(void *arg)
{
    prod_t *p = arg;
    for (long i = 0; i < p->n && p->rc == VQ_OK; i++)
        p->rc = vq_engine_submit(p->e, p->spec);
    return NULL;
}

static void bench_e2e(bench_b_t *b)
{
    const e2e_t *c = b->arg;
    vq_engine_opts_t o;
    vq_engine_opts_init(&o);
    o.workers = c->workers;
    o.min_capacity = c->min_capacity;
    o.logger = vq_logger_discard();
    vq_engine_t *e;
    vq_err_t rc = vq_engine_create(&o, &e);
    if (rc != VQ_OK)
        return pool_fail(b, "create", rc);
    if ((rc = vq_engine_start(e)) != VQ_OK)
        return pool_fail(b, "start", rc);
    waiter_t w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    vq_task_spec_t s = {.handler = c->after ? noop_task : signal_task, .arg = &w};
    if (c->after)
        s.after = signal_after;
    if (c->retry) {
        s.handler = retry_once_task;
        s.retry.count = 1;
        s.retry.delay_ns = 1;
    }
    b_reset_timer(b);
    for (long left = b->n; left > 0;) {
        long batch = left < 1024 ? left : 1024;
        atomic_store(&w.done, 0);
        w.target = batch;
        if (c->producers == 0) {
            for (long i = 0; i < batch; i++) {
                if ((rc = vq_engine_submit(e, &s)) != VQ_OK)
                    return pool_fail(b, "submit", rc);
            }
        } else {
            pthread_t th[8];
            prod_t p[8];
            for (int k = 0; k < c->producers; k++) {
                p[k] = (prod_t){e, &s, batch / c->producers + (k < batch % c->producers), 0};
                pthread_create(&th[k], NULL, producer, &p[k]);
            }
            for (int k = 0; k < c->producers; k++) {
                pthread_join(th[k], NULL);
                if (p[k].rc != VQ_OK)
                    return pool_fail(b, "submit", p[k].rc);
            }
        }
        waiter_wait(&w);
        left -= batch;
    }
    /* Handlers signal before the engine counts them: give the counters a moment. */
    const vq_metrics_t *m = vq_engine_metrics(e);
    for (int spin = 0; vq_metrics_success(m) < (uint64_t)b->n && spin < 1000000; spin++)
        sched_yield();
    uint64_t ok = vq_metrics_success(m);
    vq_engine_release(e);
    b_stop_timer(b);
    if (ok != (uint64_t)b->n)
        pool_fail(b, "success count", (int)ok);
}

static const size_t def = 0, retain = 1024, four = 4;
static const e2e_t p1d = {4, 1, 0, false, false}, p1r = {4, 1, 1024, false, false};
static const e2e_t p4d = {4, 4, 0, false, false}, p4r = {4, 4, 1024, false, false};
static const int r0 = 0, r1 = 1, r3 = 3, r10 = 10;
static const e2e_t w1 = {1, 0, 0, false, false}, w4 = {4, 0, 0, false, false},
                   w12 = {12, 0, 0, false, false};
static const e2e_t af = {4, 0, 0, true, false};
/* One op = a task that fails once and succeeds on its retry (two attempts). */
static const e2e_t rt = {4, 0, 0, false, true};

static const bench_t benches[] = {
    {.name = "RingBurstDrain/default", .fn = bench_ring_burst, .arg = &def},
    {.name = "RingBurstDrain/retain1024", .fn = bench_ring_burst, .arg = &retain},
    {.name = "RingBoundary/count=4", .fn = bench_ring_boundary, .arg = &four},
    {.name = "RingBoundary/count=1024", .fn = bench_ring_boundary, .arg = &retain},

    {.name = "QueueTask", .fn = bench_submit, .arg = NULL},

    {.name = "QueueBurstProducers/producers=1/default", .fn = bench_e2e, .arg = &p1d},
    {.name = "QueueBurstProducers/producers=1/retain1024", .fn = bench_e2e, .arg = &p1r},
    {.name = "QueueBurstProducers/producers=4/default", .fn = bench_e2e, .arg = &p4d},
    {.name = "QueueBurstProducers/producers=4/retain1024", .fn = bench_e2e, .arg = &p4r},

    {.name = "HandleRetry/retries=0", .fn = bench_handle_retry, .arg = &r0},
    {.name = "HandleRetry/retries=1", .fn = bench_handle_retry, .arg = &r1},
    {.name = "HandleRetry/retries=3", .fn = bench_handle_retry, .arg = &r3},
    {.name = "HandleRetry/retries=10", .fn = bench_handle_retry, .arg = &r10},

    {.name = "QueueEndToEnd/workers=1", .fn = bench_e2e, .arg = &w1},
    {.name = "QueueEndToEnd/workers=4", .fn = bench_e2e, .arg = &w4},
    {.name = "QueueEndToEnd/workers=12", .fn = bench_e2e, .arg = &w12},
    {.name = "QueueAfterFnEndToEnd", .fn = bench_e2e, .arg = &af},
    {.name = "QueueRetryEndToEnd", .fn = bench_e2e, .arg = &rt},
};

int main(int argc, char **argv)
{
    static const bench_opts_t o = {.benchtime_ns = 200000000};
    return bench_main(argc, argv, &o, benches, sizeof(benches) / sizeof(benches[0]));
}
