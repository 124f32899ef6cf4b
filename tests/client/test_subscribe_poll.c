/* A subscription's consumer reads its own streams (subscribe.h, "Threads"): the streams
 * complete on the subscription's poller, so that entries streaming in are received on the
 * consumer's thread (the caller of varlog_subscription_next, or varlog-sub) and gRPC's I/O
 * thread is not woken for them; a consumer waiting in its poll still sees an entry the
 * moment it comes, one at a time (nothing batches them), and a close from another thread.
 *
 * rpc_poller_kick is wrapped at link time to count the kicks that make a polling consumer
 * return: a close from another thread must kick it (a consumer left in its poll would only
 * see the close at its next check, up to 250 ms later). A close racing a retry that reopens
 * a stream on the subscription's poller, many times over, is for the sanitizers (the poller
 * must outlive the retry's open and kick).
 *
 * The I/O thread's sleeps are read from /proc (voluntary context switches of "varlog-io")
 * around a read of READ_N entries: when it carried the messages it slept 17 times in the
 * iterator's read and 99 in the handlers' (2,000 entries); now it stays parked while the
 * consumer holds the polling role (rpc_client.c, the polling rule: 1-5), and an iterator's
 * lapse between two calls of next wakes it at most twice per 50 ms. Releasing the role at
 * every return of next instead cost some 400 sleeps; without the role it polls beside the
 * consumer and takes events from it (9 to 89). */
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
#include "rpc_client.h"
#include "subscribe_internal.h"
#include "subscribe_test_util.h"
#include "test_support.h"
#include "varlog/subscribe.h"

/* ---- kicks of the subscription's poller ---- */

void __real_rpc_poller_kick(rpc_poller_t *p);
void __wrap_rpc_poller_kick(rpc_poller_t *p);

static atomic_long g_kicks;

void __wrap_rpc_poller_kick(rpc_poller_t *p)
{
    atomic_fetch_add(&g_kicks, 1);
    __real_rpc_poller_kick(p);
}

#define CALL 100        /* records per append call */
#define READ_N 2000     /* entries read while the I/O thread is watched */
#define IO_SLEEPS_MAX 5 /* its sleeps allowed meanwhile (parking): none per entry */

/* The I/O thread's sleeps allowed while n entries were read over `periods` lapse periods: a
 * hand-over or two per period, none per entry. Valgrind runs one thread at a time and
 * switches among them on its own clock, so the consumer is often stopped between two calls
 * with the role lapsed, and the I/O thread takes it and gives it back each time (36 times
 * for 500 entries once, beside a sanitizer build): there a tenth of the entries is allowed
 * too, which a wake-up per entry still exceeds tenfold. */
static long io_sleeps_allowed(long periods, int n)
{
    return IO_SLEEPS_MAX + 2 * periods + (test_under_valgrind() ? n / 10 : 0);
}

static void append_n(varlog_client_t *c, int n)
{
    varlog_record_t r[CALL];
    while (n > 0) {
        int k = n < CALL ? n : CALL;
        for (int i = 0; i < k; i++)
            r[i] = cf_record("entry");
        assert_int_equal(varlog_append(c, 1, r, (size_t)k, 10000, NULL, NULL), VARLOG_OK);
        n -= k;
    }
}

static int read_n(void)
{
    return test_under_valgrind() ? READ_N / 4 : READ_N;
}

/* Iterator form: READ_N entries taken in order, and the I/O thread slept at most a few
 * times meanwhile (metadata calls may run on it; entries do not). */
static void test_iterator_reads_on_its_own_thread(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    int n = read_n();
    append_n(f.client, n);
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, (uint64_t)n + 1, &sub), VARLOG_OK);
    /* Counted from here: the subscribe call hands the polling role to its caller and back
     * (a kick and a signal of varlog-io, 2-4 sleeps under valgrind), once, not per entry. */
    long before = test_thread_switches_tid(rpc_client_io_tid(f.client->rpc));
    int64_t t0 = test_now_ms();
    varlog_entry_t e;
    for (uint64_t g = 1; g <= (uint64_t)n; g++) {
        varlog_err_t rc = varlog_subscription_next(sub, cf_wait_bound_ms(), &e);
        if (rc != VARLOG_OK)
            fail_msg("GLSN %llu: %s: %s", (unsigned long long)g, varlog_err_name(rc),
                     varlog_last_error());
        assert_int_equal(e.meta.glsn, g);
    }
    assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_ERR_END);
    long sleeps = test_thread_switches_tid(rpc_client_io_tid(f.client->rpc)) - before;
    /* Each return of next lapses the polling role; timing the lapses costs the I/O thread
     * at most two wake-ups per lapse period of the read (its own time, measured), not one
     * per entry. */
    long periods = (long)((test_now_ms() - t0) / RPC_POLL_LAPSE_MS) + 1;
    print_message("    varlog-io slept %ld times while %d entries were read (%ld lapse periods)\n",
                  sleeps, n, periods);
    assert_true(sleeps <= io_sleeps_allowed(periods, n));
    varlog_subscription_close(&sub);
    cf_stop(&f);
}

typedef struct handler_state {
    atu_sync_t sync;
    uint64_t next; /* the GLSN expected next */
    bool bad, ended;
    long io_tid;
    long sleeps_before; /* varlog-io's sleeps when the first entry came */
    int64_t first_ms;   /* and when */
} handler_state_t;

static void on_entry(const varlog_entry_t *e, void *opaque)
{
    handler_state_t *h = opaque;
    if (h->next == 1) {
        h->sleeps_before = test_thread_switches_tid(h->io_tid);
        h->first_ms = test_now_ms();
    }
    if (e->meta.glsn != h->next)
        h->bad = true;
    h->next++;
}

static void on_end(void *opaque)
{
    handler_state_t *h = opaque;
    pthread_mutex_lock(&h->sync.mu);
    h->ended = true;
    pthread_cond_broadcast(&h->sync.cv);
    pthread_mutex_unlock(&h->sync.mu);
}

/* Handler form: the same on varlog-sub. */
static void test_handler_reads_on_its_own_thread(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    int n = read_n();
    append_n(f.client, n);
    handler_state_t h = {.next = 1, .io_tid = rpc_client_io_tid(f.client->rpc)};
    atu_sync_init(&h.sync);
    varlog_subscribe_handlers_t hs = {.on_entry = on_entry, .on_end = on_end, .opaque = &h};
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe(f.client, 1, 1, (uint64_t)n + 1, &hs, &sub), VARLOG_OK);
    assert_true(atu_wait_true(&h.sync, &h.ended, cf_wait_bound_ms()));
    /* Counted from the first entry, as the iterator's from its subscribe call's return: the
     * subscription's start (its metadata look-up, the streams' opening) may take the I/O
     * thread through a few hand-overs of its own, more under valgrind on a busy machine
     * (11 in all in one CI run). Then, as the iterator's: none per entry, and at most a
     * hand-over or two per lapse period the read took, where the handler's thread waited
     * for the node between messages (a TSan build in CI saw 6, a quick one 0-2). */
    long sleeps = test_thread_switches_tid(h.io_tid) - h.sleeps_before;
    long periods = (long)((test_now_ms() - h.first_ms) / RPC_POLL_LAPSE_MS) + 1;
    print_message("    varlog-io slept %ld times while %d entries were handled (%ld lapse "
                  "periods)\n",
                  sleeps, n, periods);
    assert_false(h.bad);
    assert_int_equal(h.next, (uint64_t)n + 1);
    assert_true(sleeps <= io_sleeps_allowed(periods, n));
    varlog_subscription_close(&sub);
    atu_sync_destroy(&h.sync);
    cf_stop(&f);
}

static bool next_sleeping(void *arg)
{
    return stu_next_sleeping(arg);
}

/* A consumer polling for the next entry gets each entry of a trickle as it comes: one at a
 * time, in order, each while next still waits (its timeout is far away). */
static void test_trickle_delivered_one_by_one(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, VARLOG_GLSN_MAX, &sub), VARLOG_OK);
    for (uint64_t g = 1; g <= 5; g++) {
        stu_next_call_t n = {.sub = sub, .timeout_ms = -1};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, stu_next_call_main, &n), 0);
        assert_true(test_wait_until(next_sleeping, sub, cf_wait_bound_ms()));
        append_n(f.client, 1);
        pthread_join(th, NULL);
        assert_int_equal(n.rc, VARLOG_OK);
        assert_int_equal(n.e.meta.glsn, g);
    }
    varlog_subscription_close(&sub);
    cf_stop(&f);
}

/* The iterator's caller may change between calls: entries taken on alternating threads come
 * in order, and each thread polls the streams while it waits. */
static void test_next_from_alternating_threads(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    append_n(f.client, 200);
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, 401, &sub), VARLOG_OK);
    for (uint64_t g = 1; g <= 400; g++) {
        if (g == 201)
            append_n(f.client, 200); /* the rest comes while the subscription tails */
        stu_next_call_t n = {.sub = sub, .timeout_ms = cf_wait_bound_ms()};
        if (g % 2) {
            stu_next_call_main(&n);
        } else {
            pthread_t th;
            assert_int_equal(pthread_create(&th, NULL, stu_next_call_main, &n), 0);
            pthread_join(th, NULL);
        }
        assert_int_equal(n.rc, VARLOG_OK);
        assert_int_equal(n.e.meta.glsn, g);
    }
    varlog_subscription_close(&sub);
    cf_stop(&f);
}

/* Close from another thread while next(-1) polls an idle topic: one kick ends the poll, next
 * returns CLOSED. */
static void test_close_kicks_a_polling_next(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, VARLOG_GLSN_MAX, &sub), VARLOG_OK);
    stu_next_call_t n = {.sub = sub, .timeout_ms = -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stu_next_call_main, &n), 0);
    assert_true(test_wait_until(next_sleeping, sub, cf_wait_bound_ms()));
    long before = atomic_load(&g_kicks);
    varlog_subscription_close(&sub);
    pthread_join(th, NULL);
    assert_int_equal(n.rc, VARLOG_ERR_CLOSED);
    assert_true(atomic_load(&g_kicks) - before >= 1);
    cf_stop(&f);
}

/* A close racing the retry that reopens a failed stream (opened on the subscription's
 * poller by the client's engine, then handed over with a kick), at every point of the
 * retry: each close returns, and the sanitizers see no use of a freed poller. */
static void test_close_races_a_reopen(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "subscribe.retry.backoff.ms", "1", "subscribe.retry.backoff.max.ms", "2",
             NULL);
    append_n(f.client, 1);
    int rounds = test_under_valgrind() || test_under_tsan() ? 20 : 200;
    uint64_t resubscribes = 0;
    for (int i = 0; i < rounds; i++) {
        assert_int_equal(varlog_server_fail_next(f.srv, STU_PATH_SUBSCRIBE, 14, "test: reopen", 1),
                         VARLOG_OK);
        varlog_subscription_t *sub = NULL;
        assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, VARLOG_GLSN_MAX, &sub), VARLOG_OK);
        /* The consumer sees the failure in its poll and schedules the reopening. */
        varlog_entry_t e;
        varlog_err_t rc = varlog_subscription_next(sub, i % 3, &e);
        assert_true(rc == VARLOG_OK || rc == VARLOG_ERR_TIMED_OUT);
        varlog_subscription_stats_t st;
        assert_int_equal(varlog_subscription_stats(sub, &st), VARLOG_OK);
        resubscribes += st.resubscribes;
        /* Not a wait for anything: 0 to 1.8 ms, varied per round, spreads the close over the
         * retry's steps (its backoff is 1-2 ms), so that the rounds hit different points. */
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(i % 7) * 300000L};
        nanosleep(&ts, NULL);
        varlog_subscription_close(&sub);
        assert_null(sub);
    }
    print_message("    %d closes, %llu reopenings scheduled before them\n", rounds,
                  (unsigned long long)resubscribes);
    assert_true(resubscribes > 0); /* the race was run */
    cf_stop(&f);
}

/* subscribe.self.receive.max 1: the first subscription receives its own messages, the
 * second (past the limit) is received by the I/O thread, both read everything in order; once
 * the first closes, a new one takes its place. */
static void test_self_receive_max(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, "subscribe.self.receive.max", "1", NULL);
    append_n(f.client, 300);
    varlog_subscription_t *a = NULL, *b = NULL;
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, 301, &a), VARLOG_OK);
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, 301, &b), VARLOG_OK);
    assert_non_null(a->poller);
    assert_null(b->poller);
    varlog_entry_t e;
    for (uint64_t g = 1; g <= 300; g++) {
        assert_int_equal(varlog_subscription_next(a, cf_wait_bound_ms(), &e), VARLOG_OK);
        assert_int_equal(e.meta.glsn, g);
        assert_int_equal(varlog_subscription_next(b, cf_wait_bound_ms(), &e), VARLOG_OK);
        assert_int_equal(e.meta.glsn, g);
    }
    varlog_subscription_close(&a);
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, 301, &a), VARLOG_OK);
    assert_non_null(a->poller);
    assert_int_equal(varlog_subscription_next(a, cf_wait_bound_ms(), &e), VARLOG_OK);
    assert_int_equal(e.meta.glsn, 1);
    varlog_subscription_close(&a);
    varlog_subscription_close(&b);
    cf_stop(&f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iterator_reads_on_its_own_thread),
        cmocka_unit_test(test_handler_reads_on_its_own_thread),
        cmocka_unit_test(test_trickle_delivered_one_by_one),
        cmocka_unit_test(test_next_from_alternating_threads),
        cmocka_unit_test(test_close_kicks_a_polling_next),
        cmocka_unit_test(test_close_races_a_reopen),
        cmocka_unit_test(test_self_receive_max),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
