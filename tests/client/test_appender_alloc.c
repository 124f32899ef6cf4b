/* No heap allocation per append in steady state (varlog/appender.h, "Transmit queue").
 *
 * The server runs as a child process (varlog-server), so every allocation this process makes
 * is the client's. malloc, calloc and realloc are counted twice over: per thread (what the
 * producer's varlog_appender_append calls allocate: must be none) and process-wide (the
 * appender's thread, gRPC, protobuf-c: far below one per append at batch 1000).
 *
 * Counting (alloc_hook.h): in plain and UBSan builds malloc & co. are interposed in the
 * executable, so the shared libraries' allocations (gRPC, protobuf-c) are counted too. ASan
 * and TSan own malloc, so there the build wraps the static objects' calls at link time
 * instead (-Wl,--wrap): libvarlog's own allocations are still all seen, gRPC's are not.
 * valgrind replaces the interposed malloc too, so its runs count nothing. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include <cmocka.h>

#include "alloc_hook.h"
#include "appender_test_util.h"
#include "child_env.h"
#include "test_support.h"
#include "varlog/appender.h"
#include "varlog/client.h"

/* ---- the server and the client ------------------------------------------------------------- */

typedef child_env_t env_t;

/* ---- callbacks ------------------------------------------------------------------------------ */

typedef struct sink {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool hold;     /* callbacks wait while set */
    long held;     /* callbacks waiting */
    uint64_t done; /* callbacks returned */
    uint64_t failed;
} sink_t;

static sink_t g_sink = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0, 0, 0};

/* Nanoseconds each callback spins: slow callbacks keep the queue full, the steady state of a
 * producer that outruns its appender, where every append waits for room. */
static atomic_long slow_cb_ns;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sink_cb(const varlog_append_result_t *r, void *opaque)
{
    (void)opaque;
    sink_t *s = &g_sink;
    long spin = atomic_load(&slow_cb_ns);
    if (spin > 0)
        for (int64_t until = now_ns() + spin; now_ns() < until;)
            ;
    pthread_mutex_lock(&s->mu);
    if (s->hold) {
        s->held++;
        pthread_cond_broadcast(&s->cv);
        /* bounded: a broken appender must not hang the test */
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 120;
        while (s->hold && pthread_cond_timedwait(&s->cv, &s->mu, &dl) == 0)
            ;
        s->held--;
    }
    if (r->err != VARLOG_OK)
        s->failed++;
    s->done++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void sink_set_hold(bool hold)
{
    pthread_mutex_lock(&g_sink.mu);
    g_sink.hold = hold;
    pthread_cond_broadcast(&g_sink.cv);
    pthread_mutex_unlock(&g_sink.mu);
}

static bool sink_wait_held(int64_t timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)(timeout_ms / 1000);
    pthread_mutex_lock(&g_sink.mu);
    while (g_sink.held == 0 && pthread_cond_timedwait(&g_sink.cv, &g_sink.mu, &dl) == 0)
        ;
    bool ok = g_sink.held > 0;
    pthread_mutex_unlock(&g_sink.mu);
    return ok;
}

static uint64_t sink_failed(void)
{
    pthread_mutex_lock(&g_sink.mu);
    uint64_t n = g_sink.failed;
    pthread_mutex_unlock(&g_sink.mu);
    return n;
}

/* One environment per test, stopped by the teardown also when the test failed half-way (the
 * next test could not start its child server otherwise). */
static env_t g_env = {.server = -1};

static int teardown(void **state)
{
    (void)state;
    child_env_stop(&g_env);
    sink_set_hold(false);
    return 0;
}

/* ---- the measurement ---------------------------------------------------------------------- */

static void flush_ok(varlog_appender_t *app)
{
    size_t pending = 0;
    varlog_err_t rc = varlog_appender_flush(app, 120000, &pending);
    if (rc != VARLOG_OK)
        fail_msg("flush: %s, %zu pending", varlog_err_name(rc), pending);
}

static void run_alloc(int32_t log_streams, int32_t bound_ls, size_t per_call, long spin_ns)
{
    /* Below what the slots hold (3 x 1000 records): the records bound is what fills, and a
     * producer faster than the server spends its steady state waiting on it. */
    long queue = 2000;
    char queue_s[32];
    snprintf(queue_s, sizeof(queue_s), "%ld", queue);
    alloc_hook_trace_reset();
    /* The counters see this thread's allocations (none under valgrind, which replaces the
     * interposed malloc: there the test checks only that appends work). */
    uint64_t mine = alloc_hook_thread(ALLOC_HOOK_ALL);
    void *volatile probe = malloc(16);
    free(probe);
    assert_int_equal(alloc_hook_thread(ALLOC_HOOK_ALL), mine + (alloc_hook_counting() ? 1 : 0));
    env_t *e = &g_env;
    /* linger 1 s: a batch leaves when full (1000 records), the configuration measured */
    child_env_start(e, log_streams, "appender.batch.max.records", "1000", "appender.linger.ms",
                    "1000", "appender.queue.max.records", queue_s, NULL);
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(e->client, 1, bound_ls, &app), VARLOG_OK);
    char data[10][100];
    varlog_record_t recs[10];
    for (size_t i = 0; i < per_call; i++) {
        memset(data[i], 'a' + (int)i, sizeof(data[i]));
        recs[i] = (varlog_record_t){data[i], sizeof(data[i])};
    }

    /* Warm-up 1: the queue filled to its bound while callbacks are held, so that every pool
     * of the appender (result objects, slots) reaches the most it can ever need. */
    sink_set_hold(true);
    assert_int_equal(varlog_appender_append(app, recs, per_call, -1, sink_cb, NULL), VARLOG_OK);
    (void)varlog_appender_flush(app, 0, NULL);
    assert_true(sink_wait_held(60000));
    long filled = 1;
    for (;;) {
        varlog_err_t rc = varlog_appender_append(app, recs, per_call, 0, sink_cb, NULL);
        if (rc == VARLOG_ERR_QUEUE_FULL)
            break;
        assert_int_equal(rc, VARLOG_OK);
        filled++;
        assert_true(filled <= queue);
    }
    sink_set_hold(false);
    flush_ok(app);
    /* Warm-up 2: the measured loop once. */
    long n = test_scale(200000, 40) / (long)per_call;
    for (long i = 0; i < n / 4; i++)
        assert_int_equal(varlog_appender_append(app, recs, per_call, -1, sink_cb, NULL), VARLOG_OK);
    flush_ok(app);

    atomic_store(&slow_cb_ns, spin_ns);
    varlog_appender_stats_t s0, s1;
    assert_int_equal(varlog_appender_stats(app, &s0), VARLOG_OK);
    uint64_t producer = 0, calls_allocating = 0;
    uint64_t all0 = alloc_hook_total(ALLOC_HOOK_ALL);
    for (long i = 0; i < n; i++) {
        uint64_t before = alloc_hook_thread(ALLOC_HOOK_ALL);
        alloc_hook_capture(true, ALLOC_HOOK_ALL);
        varlog_err_t rc = varlog_appender_append(app, recs, per_call, -1, sink_cb, NULL);
        alloc_hook_capture(false, ALLOC_HOOK_ALL);
        uint64_t d = alloc_hook_thread(ALLOC_HOOK_ALL) - before;
        producer += d;
        calls_allocating += d > 0;
        if (rc != VARLOG_OK)
            fail_msg("append %ld: %s", i, varlog_err_name(rc));
    }
    flush_ok(app);
    uint64_t all = alloc_hook_total(ALLOC_HOOK_ALL) - all0;
    atomic_store(&slow_cb_ns, 0);
    assert_int_equal(varlog_appender_stats(app, &s1), VARLOG_OK);
    uint64_t batches = s1.batches_sent - s0.batches_sent;
    double per_append = (double)all / (double)((uint64_t)n * per_call); /* per record */
    print_message("    [%s] %ld appends of %zu x 100 B (%s, callbacks spin %ld ns, queue filled "
                  "with %ld calls): "
                  "producer allocations %llu (in %llu calls); process-wide %llu = %.4f per "
                  "record; %llu batches, %.1f records per batch\n",
                  alloc_hook_mode(), n, per_call, bound_ls ? "bound" : "topic", spin_ns, filled,
                  (unsigned long long)producer, (unsigned long long)calls_allocating,
                  (unsigned long long)all, per_append, (unsigned long long)batches,
                  batches ? (double)(s1.records_appended - s0.records_appended) / (double)batches
                          : 0.0);
    assert_int_equal(sink_failed(), 0);
    assert_int_equal(s1.calls_appended - s0.calls_appended, (uint64_t)n);
    if (producer != 0)
        (void)alloc_hook_trace_print("the first allocation inside varlog_appender_append:");
    if (producer != 0)
        fail_msg("varlog_appender_append allocated %llu times in %llu of %ld calls after "
                 "warm-up",
                 (unsigned long long)producer, (unsigned long long)calls_allocating, n);
    if (per_append >= 0.1)
        fail_msg("%.4f allocations per record process-wide (batch 1000), expected < 0.1",
                 per_append);
    assert_int_equal(varlog_appender_close(&app, 10000), VARLOG_OK);
    child_env_stop(e);
}

static void test_no_allocation_per_append_bound(void **state)
{
    (void)state;
    run_alloc(1, 1, 1, 0);
}

static void test_no_allocation_per_append_topic(void **state)
{
    (void)state;
    run_alloc(2, 0, 1, 0);
}

/* Calls of several records: still nothing per call. */
static void test_no_allocation_per_append_10_records(void **state)
{
    (void)state;
    run_alloc(1, 1, 10, 0);
}

/* Callbacks slower than the producer: the queue stays full and every append waits for the
 * room a callback frees; waiting must not cost an allocation either. */
static void test_no_allocation_per_append_queue_full(void **state)
{
    (void)state;
    run_alloc(1, 1, 1, 5000);
}

/* An optional argument runs only the tests whose names match it (cmocka's pattern). */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_no_allocation_per_append_bound, teardown),
        cmocka_unit_test_teardown(test_no_allocation_per_append_topic, teardown),
        cmocka_unit_test_teardown(test_no_allocation_per_append_10_records, teardown),
        cmocka_unit_test_teardown(test_no_allocation_per_append_queue_full, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
