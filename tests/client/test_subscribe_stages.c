/* Subscribe stage timings (subscribe.stage.timing, varlog_conf_set_subscribe_observer; the
 * stages are in varlog/subscribe.h): a handler that sleeps a known time shows in the handler
 * stage, in the process duration of its (topic, log stream) and in the observer's call, which
 * runs once per entry on the handler's thread (the caller's in the iterator form); with the
 * property off the observer is never called, nothing is timed, no clock is read per entry,
 * and entries are still counted per (topic, log stream).
 *
 * The entries are appended before the subscription opens, and the first handler is held
 * until the test saw it run. Clock reads are counted with clock_gettime wrapped at link time,
 * on the subscription's thread, between the first handler's end and the last handler's
 * start: an entry that has reached the client is taken with a poll that does not wait and
 * reads no clock, so with stage timing off the only reads are those of a consumer that had to
 * wait (two per wait) or ran its periodic check (one), both counted inside the subscription;
 * with it on, at least four per entry. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "client_fixture.h"
#include "client_internal.h"
#include "subscribe_internal.h"
#include "test_support.h"
#include "varlog/stats.h"
#include "varlog/subscribe.h"

#define N 6                 /* entries, alternating between log streams 1 and 2 */
#define SLEEP_NS 20000000LL /* each handler's sleep, the time under test: 20 ms */
#define LS_OF(glsn) ((int32_t)(2 - (glsn) % 2)) /* GLSN 1 -> 1, 2 -> 2, 3 -> 1, ... */

/* ---- clock reads on the subscription's thread -------------------------------------------- */

int __real_clock_gettime(clockid_t id, struct timespec *ts);
int __wrap_clock_gettime(clockid_t id, struct timespec *ts);

static atomic_bool g_counting;
static atomic_uintptr_t g_counted_thread; /* pthread_t of the thread whose reads count */
static atomic_long g_clock_reads;

int __wrap_clock_gettime(clockid_t id, struct timespec *ts)
{
    if (atomic_load(&g_counting) && (pthread_t)atomic_load(&g_counted_thread) == pthread_self())
        atomic_fetch_add(&g_clock_reads, 1);
    return __real_clock_gettime(id, ts);
}

/* ---- what the handlers and the observer saw ---------------------------------------------- */

typedef struct world {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool gate_open;     /* the first handler may return */
    bool ended;         /* on_end ran */
    int handled[N + 1]; /* handler calls per GLSN */
    pthread_t handler_thread[N + 1];
    int observed[N + 1]; /* observer calls per GLSN (or LLSN position in iterator tests) */
    int observed_total;  /* every call, whatever its GLSN */
    pthread_t observer_thread[N + 1];
    varlog_subscribe_stages_t st[N + 1];
    varlog_client_t *client;    /* the observer reads its statistics: no library lock is held */
    varlog_subscription_t *sub; /* set before the gate opens; its consumer is the handler's */
    uint64_t waits0, checks0, waits, checks; /* its sleeps and checks while reads counted */
    int stats_ok;                            /* observer calls whose varlog_stats_get returned OK */
} world_t;

static world_t W;

static void world_reset(void)
{
    pthread_mutex_init(&W.mu, NULL);
    pthread_cond_init(&W.cv, NULL);
    W.gate_open = W.ended = false;
    memset(W.handled, 0, sizeof(W.handled));
    memset(W.observed, 0, sizeof(W.observed));
    W.observed_total = 0;
    W.client = NULL;
    W.sub = NULL;
    W.stats_ok = 0;
    atomic_store(&g_counting, false);
    atomic_store(&g_clock_reads, 0);
}

static void world_destroy(void)
{
    pthread_mutex_destroy(&W.mu);
    pthread_cond_destroy(&W.cv);
}

static void sleep_ns(long long ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000), .tv_nsec = (long)(ns % 1000000000)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void on_entry(const varlog_entry_t *e, void *opaque)
{
    world_t *w = opaque;
    uint64_t g = e->meta.glsn;
    if (g < 1 || g > N)
        return; /* the asserts below find the missing call */
    pthread_mutex_lock(&w->mu);
    w->handled[g]++;
    w->handler_thread[g] = pthread_self();
    pthread_cond_broadcast(&w->cv);
    if (g == 1) {
        /* Bounded: the test opens the gate once it saw the handler run, or fails. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += cf_wait_bound_ms() / 1000 + 1;
        while (!w->gate_open && pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0)
            ;
    }
    if (g == N) {
        atomic_store(&g_counting, false);
        w->waits = w->sub->waits - w->waits0;
        w->checks = w->sub->checks - w->checks0;
    }
    pthread_mutex_unlock(&w->mu);
    sleep_ns(SLEEP_NS);
    if (g == 1) {
        pthread_mutex_lock(&w->mu);
        w->waits0 = w->sub->waits;
        w->checks0 = w->sub->checks;
        pthread_mutex_unlock(&w->mu);
        atomic_store(&g_counted_thread, (uintptr_t)pthread_self());
        atomic_store(&g_counting, true);
    }
}

static void on_end(void *opaque)
{
    world_t *w = opaque;
    pthread_mutex_lock(&w->mu);
    w->ended = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void observe(const varlog_subscribe_stages_t *st, void *opaque)
{
    world_t *w = opaque;
    uint64_t pos = st->glsn ? st->glsn : st->llsn;
    varlog_stats_t s;
    bool stats_ok = w->client && varlog_stats_get(w->client, &s) == VARLOG_OK;
    pthread_mutex_lock(&w->mu);
    w->stats_ok += stats_ok;
    w->observed_total++;
    if (pos >= 1 && pos <= N) {
        w->observed[pos]++;
        w->observer_thread[pos] = pthread_self();
        w->st[pos] = *st;
    }
    pthread_mutex_unlock(&w->mu);
}

static void set_observer(varlog_conf_t *conf, void *arg)
{
    varlog_conf_set_subscribe_observer(conf, observe, arg);
}

/* ---- helpers ----------------------------------------------------------------------------- */

/* N entries, GLSN g in log stream LS_OF(g). */
static void append_alternating(varlog_client_t *c)
{
    for (uint64_t g = 1; g <= N; g++) {
        varlog_record_t r = cf_record("entry");
        varlog_entry_meta_t m;
        assert_int_equal(varlog_append_to(c, 1, LS_OF(g), &r, 1, 10000, &m, NULL), VARLOG_OK);
        assert_int_equal(m.glsn, g);
    }
}

static bool handler_entered(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&W.mu);
    bool in = W.handled[1] > 0;
    pthread_mutex_unlock(&W.mu);
    return in;
}

static bool ended(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&W.mu);
    bool e = W.ended;
    pthread_mutex_unlock(&W.mu);
    return e;
}

/* Subscribes [1, N + 1) with the handlers, holds the first one until the test saw it,
 * and waits for on_end. */
static void run_handler_subscription(client_fixture_t *f)
{
    append_alternating(f->client);
    varlog_subscribe_handlers_t h = {.on_entry = on_entry, .on_end = on_end, .opaque = &W};
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe(f->client, 1, 1, N + 1, &h, &sub), VARLOG_OK);
    assert_true(test_wait_until(handler_entered, NULL, cf_wait_bound_ms()));
    pthread_mutex_lock(&W.mu);
    W.sub = sub;
    W.gate_open = true;
    pthread_cond_broadcast(&W.cv);
    pthread_mutex_unlock(&W.mu);
    assert_true(test_wait_until(ended, NULL, cf_wait_bound_ms() + N * SLEEP_NS / 1000000));
    varlog_subscription_close(&sub);
}

static metrics_series_t *series(varlog_client_t *c, int32_t ls)
{
    return metrics_series_get(&c->cstats.metrics, 1, ls);
}

static uint64_t load(atomic_uint_fast64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

/* ---- tests ------------------------------------------------------------------------------- */

/* Handler form, stage timing on: the handler's sleep in every place that reports it, the
 * observer once per entry on the handler's thread, the wait behind slow handlers before the
 * hand-out, and the clock reads it costs. */
static void test_handler_stages(void **state)
{
    (void)state;
    world_reset();
    client_fixture_t f;
    cf_start_adjusted(&f, 1, 2, set_observer, &W, "subscribe.stage.timing", "true", NULL);
    W.client = f.client;
    run_handler_subscription(&f);

    pthread_mutex_lock(&W.mu);
    assert_int_equal(W.observed_total, N);
    assert_int_equal(W.stats_ok, N);
    for (uint64_t g = 1; g <= N; g++) {
        assert_int_equal(W.handled[g], 1);
        assert_int_equal(W.observed[g], 1);
        assert_true(pthread_equal(W.observer_thread[g], W.handler_thread[g]));
        const varlog_subscribe_stages_t *st = &W.st[g];
        assert_int_equal(st->topic_id, 1);
        assert_int_equal(st->log_stream_id, LS_OF(g));
        assert_int_equal(st->glsn, g);
        assert_int_equal(st->llsn, (g + 1) / 2);
        assert_true(st->enqueue_ns >= 0);
        assert_true(st->transmit_queue_ns >= 0);
        assert_true(st->dispatch_ns >= 0);
        assert_true(st->handler_ns >= SLEEP_NS);
    }
    pthread_mutex_unlock(&W.mu);

    varlog_stats_t s;
    assert_int_equal(varlog_stats_get(f.client, &s), VARLOG_OK);
    assert_int_equal(s.subscribe_enqueue.count, N);
    assert_int_equal(s.subscribe_transmit_queue.count, N);
    assert_int_equal(s.subscribe_dispatch.count, N);
    assert_int_equal(s.subscribe_handler.count, N);
    assert_true(s.subscribe_handler.p50_ns >= SLEEP_NS);
    assert_true(s.subscribe_handler.p99_ns >= SLEEP_NS);
    assert_true(s.subscribe_handler.max_ns >= s.subscribe_handler.p50_ns);

    client_metrics_t *m = &f.client->cstats.metrics;
    for (int i = 0; i < METRICS_STAGES; i++)
        assert_int_equal(load(&m->stage[i].count), N);
    for (int32_t ls = 1; ls <= 2; ls++) {
        metrics_series_t *se = series(f.client, ls);
        assert_int_equal(load(&se->consumed), N / 2);
        assert_int_equal(load(&se->receive.count), N / 2);
        assert_int_equal(load(&se->process.count), N / 2);
        assert_true(load(&se->process.sum_ns) >= (uint64_t)(N / 2) * SLEEP_NS);
    }
    /* Entries 2 .. N - 1 whole in the window: a stamp into the merge's queue, the hand-out,
     * the handler's start and end. */
    assert_true(atomic_load(&g_clock_reads) >= 4 * (N - 2));
    cf_stop(&f);
    world_destroy();
}

/* Stage timing off (the default) with an observer set: the observer is never called, no
 * stage is timed, no clock is read per entry, and entries are counted all the same. */
static void test_timing_off(void **state)
{
    (void)state;
    world_reset();
    client_fixture_t f;
    cf_start_adjusted(&f, 1, 2, set_observer, &W, NULL);
    run_handler_subscription(&f);

    pthread_mutex_lock(&W.mu);
    assert_int_equal(W.observed_total, 0);
    for (uint64_t g = 1; g <= N; g++)
        assert_int_equal(W.handled[g], 1);
    pthread_mutex_unlock(&W.mu);
    /* None per entry: only a consumer that had to wait (an entry not in yet on a loaded
     * machine) or ran its periodic check read the clock. */
    long reads = atomic_load(&g_clock_reads);
    print_message("    clock reads on the consumer between the first and last handlers: %ld "
                  "(%llu waits, %llu checks)\n",
                  reads, (unsigned long long)W.waits, (unsigned long long)W.checks);
    assert_true(reads <= (long)(2 * W.waits + W.checks));

    varlog_stats_t s;
    assert_int_equal(varlog_stats_get(f.client, &s), VARLOG_OK);
    assert_int_equal(s.subscribe_enqueue.count, 0);
    assert_int_equal(s.subscribe_transmit_queue.count, 0);
    assert_int_equal(s.subscribe_dispatch.count, 0);
    assert_int_equal(s.subscribe_handler.count, 0);
    assert_int_equal(s.subscribe_handler.max_ns, 0);
    assert_int_equal(s.subscribe_entries, N);

    client_metrics_t *m = &f.client->cstats.metrics;
    for (int i = 0; i < METRICS_STAGES; i++)
        assert_int_equal(load(&m->stage[i].count), 0);
    for (int32_t ls = 1; ls <= 2; ls++) {
        metrics_series_t *se = series(f.client, ls);
        assert_int_equal(load(&se->consumed), N / 2);
        assert_int_equal(load(&se->receive.count), 0);
        assert_int_equal(load(&se->process.count), 0);
    }
    cf_stop(&f);
    world_destroy();
}

/* Iterator form, stage timing on: the observer runs on the caller of
 * varlog_subscription_next, once per entry, with no handler stage; LLSN order works the
 * same (GLSN 0 in the entry and the observer). */
static void test_iterator_stages(void **state)
{
    (void)state;
    world_reset();
    client_fixture_t f;
    cf_start_adjusted(&f, 1, 1, set_observer, &W, "subscribe.stage.timing", "true", NULL);
    for (int i = 0; i < N; i++) {
        varlog_record_t r = cf_record("entry");
        assert_int_equal(varlog_append_to(f.client, 1, 1, &r, 1, 10000, NULL, NULL), VARLOG_OK);
    }
    for (int order = 0; order < 2; order++) {
        pthread_mutex_lock(&W.mu);
        memset(W.observed, 0, sizeof(W.observed));
        W.observed_total = 0;
        pthread_mutex_unlock(&W.mu);
        varlog_subscription_t *sub = NULL;
        if (order == 0)
            assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, N + 1, &sub), VARLOG_OK);
        else
            assert_int_equal(varlog_subscribe_to_iter(f.client, 1, 1, 1, N + 1, &sub), VARLOG_OK);
        varlog_entry_t e;
        for (uint64_t p = 1; p <= N; p++) {
            assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_OK);
            pthread_mutex_lock(&W.mu);
            assert_int_equal(W.observed[p], 1); /* inside the call that returned the entry */
            assert_true(pthread_equal(W.observer_thread[p], pthread_self()));
            assert_int_equal(W.st[p].glsn, order == 0 ? p : 0);
            assert_int_equal(W.st[p].llsn, p);
            assert_int_equal(W.st[p].log_stream_id, 1);
            assert_int_equal(W.st[p].handler_ns, -1);
            assert_true(W.st[p].enqueue_ns >= 0 && W.st[p].transmit_queue_ns >= 0 &&
                        W.st[p].dispatch_ns >= 0);
            pthread_mutex_unlock(&W.mu);
        }
        assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_ERR_END);
        pthread_mutex_lock(&W.mu);
        assert_int_equal(W.observed_total, N);
        pthread_mutex_unlock(&W.mu);
        varlog_subscription_close(&sub);
    }

    varlog_stats_t s;
    assert_int_equal(varlog_stats_get(f.client, &s), VARLOG_OK);
    assert_int_equal(s.subscribe_enqueue.count, 2 * N);
    assert_int_equal(s.subscribe_transmit_queue.count, 2 * N);
    assert_int_equal(s.subscribe_dispatch.count, 2 * N);
    assert_int_equal(s.subscribe_handler.count, 0);
    metrics_series_t *se = series(f.client, 1);
    assert_int_equal(load(&se->consumed), 2 * N);
    assert_int_equal(load(&se->receive.count), 2 * N);
    assert_int_equal(load(&se->process.count), 0);
    assert_int_equal(load(&f.client->cstats.metrics.stage[METRICS_STAGE_HANDLER].count), 0);
    cf_stop(&f);
    world_destroy();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handler_stages),
        cmocka_unit_test(test_timing_off),
        cmocka_unit_test(test_iterator_stages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
