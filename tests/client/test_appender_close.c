/* How the pipelined appender (varlog/appender.h) drains and ends, against the embedded
 * server: flush, close (intake stopped at once, leftovers failed, bounded with a stalled
 * server), flush and close called from inside a callback, and the client destroyed under
 * open appenders. What it takes and in which order is in test_appender.c; what the two share
 * is appender_fixture.h.
 *
 * Callbacks run on the appender's thread, where a cmocka assertion cannot stop the test: they
 * note what is wrong (atu_note_bad) and the test thread asserts that nothing was noted. */
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
#include <sys/resource.h>
#include <time.h>

#include <cmocka.h>

#include "appender_fixture.h"
#include "client_fixture.h"
#include "test_support.h"
#include "varlog/appender.h"

/* ---- helpers ---------------------------------------------------------------------------- */

/* Waits until at least n callbacks ran; false at the timeout. */
static bool tracker_wait(tracker_t *t, long n, int64_t timeout_ms)
{
    return atu_wait_at_least(&t->sync, &t->callbacks, n, timeout_ms);
}

static void count_cb(const varlog_append_result_t *r, void *opaque)
{
    (void)r;
    atomic_fetch_add((atomic_int *)opaque, 1);
}

/* No callback after close returned. Callbacks of an appender with its own thread run only
 * there, and close joined it: once no such thread is listed (the kernel unlists a joined
 * thread a moment after the join) none can come, and the count is what it was. An event,
 * where a wait of a fixed time for a late callback would prove nothing about the time after
 * it. On a shared thread (appender.threads, the _shared copy), which outlives the close: a
 * second appender of the client, on that thread, has its call settled by its own close, so
 * the thread went on past the first close, and the count is still what it was. */
static void assert_no_late_callback(fixture_t *x, long n)
{
    const char *conf = getenv("VARLOG_TEST_CONF");
    if (!conf || !strstr(conf, "appender.threads=")) {
        assert_int_equal(test_await_thread_count_named("varlog-appender", 0, cf_wait_bound_ms()),
                         0);
    } else {
        varlog_appender_t *other = NULL;
        assert_int_equal(varlog_appender_new(x->f.client, 1, 0, &other), VARLOG_OK);
        atomic_int settled = 0;
        varlog_record_t one = cf_record("barrier");
        assert_int_equal(varlog_appender_append(other, &one, 1, 0, count_cb, &settled), VARLOG_OK);
        varlog_appender_close(&other, 0);
        assert_int_equal(atomic_load(&settled), 1);
    }
    assert_int_equal(tracker_callbacks(&x->t), n);
}

/* Appends a 16-byte record for each of calls[0..n) with timeout 0: each must be taken. */
static void append_each(varlog_appender_t *app, call_t *calls, size_t n)
{
    varlog_record_t one = cf_record("0123456789abcdef");
    for (size_t i = 0; i < n; i++)
        assert_int_equal(varlog_appender_append(app, &one, 1, 0, track_cb, &calls[i]), VARLOG_OK);
}

/* ---- flush ------------------------------------------------------------------------------ */

static void test_flush_ignores_linger(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 1, 1, "appender.linger.ms", "60000", NULL);
    varlog_appender_t *app = x.app;
    call_t calls[10];
    calls_init(calls, 10);
    append_each(app, calls, 10);
    /* linger holds the batch: nothing has been sent yet */
    assert_int_equal(tracker_callbacks(&x.t), 0);
    int64_t t0 = test_now_ms();
    flush_ok(app);
    int64_t took = test_now_ms() - t0;
    if (took > cf_wait_bound_ms())
        fail_msg("flush took %lld ms with linger 60 s", (long long)took);
    assert_int_equal(tracker_callbacks(&x.t), 10);
    for (int i = 0; i < 10; i++)
        assert_int_equal(calls[i].err, VARLOG_OK);
    assert_int_equal(app_stats(app).pending_calls, 0);
    /* Again, after the first flush. */
    call_t more;
    calls_init(&more, 1);
    more.seq = 10;
    append_each(app, &more, 1);
    flush_ok(app);
    assert_int_equal(atomic_load(&more.cbs), 1);
    assert_int_equal(more.first.glsn, calls[9].first.glsn + 1);
    /* close with nothing pending: OK */
    fx_stop(&x);
}

/* A stalled server: flush times out and reports what is pending; the calls go on and
 * complete once the server answers. */
static void test_flush_timeout_stalled_server(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 1, 1, "appender.linger.ms", "0", NULL);
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 1500), VARLOG_OK);
    varlog_appender_t *app = x.app;
    call_t calls[3];
    calls_init(calls, 3);
    append_each(app, calls, 3);
    size_t pending = 0;
    int64_t t0 = test_now_ms();
    assert_int_equal(varlog_appender_flush(app, 100, &pending), VARLOG_ERR_TIMED_OUT);
    int64_t took = test_now_ms() - t0;
    /* The flush's timeout is the time under test, from both sides: not before it (5 ms for
     * the two clocks' rounding to ms), not long after it. */
    assert_true(took >= 95);
    assert_true(took < 100 + cf_wait_bound_ms());
    /* (a loaded machine may have run callbacks since flush returned) */
    assert_true(pending >= 1 && pending <= 3);
    assert_true(pending >= 3 - (size_t)tracker_callbacks(&x.t));
    /* The calls were not abandoned: they complete. */
    flush_ok(app);
    assert_settled(calls, 3, VARLOG_OK);
    fx_stop(&x);
}

/* Voluntary context switches of the calling thread so far. */
static long thread_sleeps(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_nvcsw;
}

/* A flush waiting for many batches that settle one by one (one record each, one in flight, a
 * server answering each 1 ms after it read it) sleeps until the last has settled: it is not
 * woken for each (it was, with a scan of every slot each time: one wake-up per request for a
 * producer that queues and then flushes, as bench_append's rows do). Its thread may sleep a
 * few times more on the appender's mutex, not once per batch. */
static void test_flush_wakes_once_for_many_batches(void **state)
{
    (void)state;
    enum { N = 200 };
    fixture_t x;
    fx_start(&x, 1, 1, "appender.batch.max.records", "1", "appender.pipeline.depth", "1",
             "appender.linger.ms", "0", NULL);
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 1), VARLOG_OK);
    static call_t calls[N];
    calls_init(calls, N);
    append_each(x.app, calls, N);
    long sleeps0 = thread_sleeps();
    flush_ok(x.app);
    long sleeps = thread_sleeps() - sleeps0;
    assert_settled(calls, N, VARLOG_OK);
    print_message("flush of %d batches settling one by one: the flushing thread slept %ld times\n",
                  N, sleeps);
    /* Woken per batch, it sleeps about N times. Runs here sleep once or twice; a CI run
     * under load once counted 30 (futex waits on the appender's mutex count too): a quarter
     * of N still tells one wake-up per flush from one per batch. */
    if (sleeps > N / 4)
        fail_msg("the flushing thread slept %ld times for %d batches", sleeps, N);
    fx_stop(&x);
}

/* ---- close ------------------------------------------------------------------------------ */

typedef struct closer {
    varlog_appender_t *app;
    int64_t timeout_ms;
    varlog_err_t rc;
    bool done;
    tracker_t *t;
} closer_t;

static void *close_thread(void *arg)
{
    closer_t *c = arg;
    c->rc = varlog_appender_close(&c->app, c->timeout_ms);
    atomic_store(&c->t->closed_returned, true);
    return NULL;
}

/* Close stops intake at once (even while it waits for callbacks), settles what was queued
 * before it, and returns only after the last callback. The queue holds 64 records, and the
 * first callback is held at the gate, so the producer's appends are taken until the queue is
 * full and then wait for room: what ends the wait is close beginning (an event: it wakes
 * the waiting producers, which then get CLOSED), not a time. */
static void test_close_stops_intake(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 1, 1, "appender.linger.ms", "0", "appender.queue.max.records", "64",
             "appender.batch.max.records", "16", NULL);
    varlog_appender_t *app = x.app;
    x.app = NULL; /* the closing thread's */
    enum { N = 128 };
    call_t *calls = malloc(N * sizeof(*calls));
    assert_non_null(calls);
    calls_init(calls, N);
    varlog_record_t one = cf_record("0123456789abcdef");
    assert_int_equal(varlog_appender_append(app, &one, 1, 0, gated_cb, &calls[0]), VARLOG_OK);
    assert_true(gate_wait_entered(&x.g, 1, cf_wait_bound_ms()));
    assert_int_equal(varlog_appender_append(app, &one, 1, 0, gated_cb, &calls[1]), VARLOG_OK);

    closer_t c = {app, -1, VARLOG_ERR_INTERNAL, false, &x.t};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, close_thread, &c), 0);
    /* Until close began, appends are taken (or wait for room: nothing settles while the
     * first callback is held); then CLOSED. The callback held at the gate keeps close from
     * returning, so app stays valid meanwhile. */
    int used = 2;
    varlog_err_t rc = VARLOG_OK, other = VARLOG_OK;
    while (used < N) {
        rc = varlog_appender_append(app, &one, 1, cf_wait_bound_ms(), gated_cb, &calls[used]);
        if (rc == VARLOG_ERR_CLOSED)
            break;
        if (rc != VARLOG_OK) {
            other = rc; /* QUEUE_FULL: close never began */
            break;
        }
        used++;
    }
    char closed_text[256];
    snprintf(closed_text, sizeof(closed_text), "%s", varlog_last_error());
    /* Close waits for the held callback. */
    bool returned_early = atomic_load(&x.t.closed_returned);
    gate_open(&x.g);
    pthread_join(th, NULL);
    assert_int_equal(other, VARLOG_OK);
    assert_int_equal(rc, VARLOG_ERR_CLOSED);
    if (!contains_ci(closed_text, "clos"))
        fail_msg("CLOSED with varlog_last_error() \"%s\"", closed_text);
    assert_false(returned_early);
    assert_null(c.app);
    /* flush -1: every call queued before close was settled by the flush */
    assert_int_equal(c.rc, VARLOG_OK);
    assert_true(used <= 64);
    assert_int_equal(tracker_callbacks(&x.t), used);
    assert_settled(calls, (size_t)used, VARLOG_OK);
    assert_int_equal(atomic_load(&calls[used].cbs), 0);
    fx_stop(&x);
    free(calls);
}

/* Leftovers: with linger 60 s and close(0), queued calls fail with CLOSED and NOT_APPENDED
 * through their callbacks before close returns; none runs after. */
static void test_close_fails_leftovers(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 1, 1, "appender.linger.ms", "60000", NULL);
    /* Nothing reaches the server in time: every request is held 60 s. */
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 60000), VARLOG_OK);
    call_t calls[5];
    calls_init(calls, 5);
    append_each(x.app, calls, 5);
    int64_t took;
    varlog_err_t rc = timed_close(&x, 0, &took);
    assert_int_equal(rc, VARLOG_ERR_TIMED_OUT);
    assert_null(x.app);
    if (took > cf_wait_bound_ms())
        fail_msg("close(0) took %lld ms", (long long)took);
    assert_int_equal(tracker_callbacks(&x.t), 5);
    /* queued (lingering) calls were certainly not sent, unless close(0)'s flush began sending
     * them: then MAYBE_APPENDED */
    assert_settled(calls, 5, VARLOG_ERR_CLOSED);
    assert_no_late_callback(&x, 5);
    fx_stop(&x);
}

/* A stalled server (60 s): close(300) returns TIMED_OUT within its timeout plus a small
 * bound; in-flight calls end MAYBE_APPENDED, queued ones NOT_APPENDED, all CLOSED. */
static void test_close_stalled_server_bounded(void **state)
{
    (void)state;
    fixture_t x;
    /* Batches of up to 2 records: the queue grows to hold the 8 records its bound allows,
     * however the thread groups them. */
    fx_start(&x, 1, 1, "appender.linger.ms", "0", "appender.batch.max.records", "2",
             "appender.pipeline.depth", "2", "appender.queue.max.records", "8", NULL);
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 60000), VARLOG_OK);
    call_t calls[9];
    calls_init(calls, 9);
    varlog_err_t arc;
    int accepted = append_until_refused(x.app, calls, 9, &arc);
    assert_int_equal(arc, VARLOG_ERR_QUEUE_FULL);
    assert_int_equal(accepted, 8);
    /* Let the pipeline fill: two requests reach the server. */
    cf_count_wait_t w = {x.f.srv, CF_PATH_APPEND, 0};
    assert_true(test_wait_until(cf_call_count_above, &w, cf_wait_bound_ms()));
    int64_t took;
    varlog_err_t rc = timed_close(&x, 300, &took);
    assert_int_equal(rc, VARLOG_ERR_TIMED_OUT);
    if (took < 290 || took > 300 + cf_wait_bound_ms())
        fail_msg("close(300) with a stalled server took %lld ms", (long long)took);
    assert_int_equal(tracker_callbacks(&x.t), accepted);
    assert_settled(calls, (size_t)accepted, VARLOG_ERR_CLOSED);
    int maybe = 0;
    for (int i = 0; i < accepted; i++)
        maybe += calls[i].outcome == VARLOG_MAYBE_APPENDED;
    /* At most depth (2) requests of up to 2 records were in flight. */
    assert_true(maybe >= 1 && maybe <= 4);
    /* The last calls sat in the waiting and the open slot: certainly not sent. */
    assert_int_equal(calls[accepted - 1].outcome, VARLOG_NOT_APPENDED);
    assert_int_equal(calls[accepted - 2].outcome, VARLOG_NOT_APPENDED);
    assert_no_late_callback(&x, accepted);
    fx_stop(&x);
}

/* ---- calls from inside callbacks --------------------------------------------------------- */

typedef struct reentry {
    varlog_appender_t *app;
    varlog_client_t *client;
    char destroy_text[256];
    varlog_err_t flush_rc, close_rc, append_rc;
    call_t inner;
    bool ran;
} reentry_t;

static reentry_t *g_re;

static void reentrant_cb(const varlog_append_result_t *r, void *opaque)
{
    reentry_t *re = g_re;
    if (!re->ran) {
        re->ran = true;
        varlog_client_destroy(re->client); /* refused: it would join this thread */
        snprintf(re->destroy_text, sizeof re->destroy_text, "%s", varlog_last_error());
        size_t pending = 0;
        re->flush_rc = varlog_appender_flush(re->app, 1000, &pending);
        varlog_appender_t *a = re->app;
        re->close_rc = varlog_appender_close(&a, 1000);
        if (a != re->app)
            atu_note_bad("close from a callback changed the handle");
        varlog_record_t one = cf_record("from-callback-16");
        re->inner.n = 1;
        re->inner.seq = 1;
        re->append_rc = varlog_appender_append(re->app, &one, 1, 0, track_cb, &re->inner);
    }
    track(g_tracker, opaque, r);
}

/* From an append callback, flush and close of its own appender and destroy of the client
 * are refused (each would wait for the thread it runs on); an append is taken. */
static void test_calls_from_callback(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 1, 1, NULL);
    reentry_t re;
    memset(&re, 0, sizeof(re));
    g_re = &re;
    re.app = x.app;
    re.client = x.f.client;
    call_t first;
    calls_init(&first, 1);
    varlog_record_t one = cf_record("0123456789abcdef");
    assert_int_equal(varlog_appender_append(re.app, &one, 1, 0, reentrant_cb, &first), VARLOG_OK);
    assert_true(tracker_wait(&x.t, 2, flush_bound_ms()));
    flush_ok(re.app);
    assert_true(re.ran);
    assert_int_equal(re.flush_rc, VARLOG_ERR_STATE);
    assert_int_equal(re.close_rc, VARLOG_ERR_STATE);
    if (!strstr(re.destroy_text, "own threads"))
        fail_msg("client destroy from a callback: last error '%s'", re.destroy_text);
    assert_int_equal(re.append_rc, VARLOG_OK);
    assert_int_equal(first.err, VARLOG_OK);
    assert_int_equal(atomic_load(&re.inner.cbs), 1);
    assert_int_equal(re.inner.err, VARLOG_OK);
    assert_int_equal(re.inner.first.glsn, first.first.glsn + 1);
    /* The appender still works after the refused flush and close. */
    assert_int_equal(varlog_appender_close(&x.app, 1000), VARLOG_OK);
    assert_null(x.app);
    fx_stop(&x);
}

/* ---- the client destroyed under open appenders ------------------------------------------ */

static void test_client_destroyed_with_open_appenders(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 2, 1, "appender.linger.ms", "0", NULL); /* x.app: bound to log stream 1 */
    varlog_appender_t *topic = new_appender(&x.f, 1, 0);
    /* A third one has nothing to settle. */
    varlog_appender_t *idle = new_appender(&x.f, 1, 2);
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 60000), VARLOG_OK);
    call_t calls[12];
    calls_init(calls, 12);
    append_each(x.app, calls, 6);
    append_each(topic, calls + 6, 6);
    int64_t t0 = test_now_ms();
    varlog_client_destroy(x.f.client);
    x.f.client = NULL;
    int64_t took = test_now_ms() - t0;
    if (took > cf_wait_bound_ms())
        fail_msg("client destroy with appenders in flight took %lld ms", (long long)took);
    /* Every call settled with CLOSED by the time destroy returned. */
    assert_int_equal(tracker_callbacks(&x.t), 12);
    assert_settled(calls, 12, VARLOG_ERR_CLOSED);
    /* The handles are valid for close only, which frees them (ASan / valgrind check). */
    (void)varlog_appender_close(&x.app, 0);
    (void)varlog_appender_close(&topic, 1000);
    (void)varlog_appender_close(&idle, -1);
    assert_null(x.app);
    assert_null(topic);
    assert_null(idle);
    assert_int_equal(tracker_callbacks(&x.t), 12);
    fx_stop(&x);
}

/* An optional argument runs only the tests whose names match it (cmocka's pattern). */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flush_ignores_linger),
        cmocka_unit_test(test_flush_timeout_stalled_server),
        cmocka_unit_test(test_flush_wakes_once_for_many_batches),
        cmocka_unit_test(test_close_stops_intake),
        cmocka_unit_test(test_close_fails_leftovers),
        cmocka_unit_test(test_close_stalled_server_bounded),
        cmocka_unit_test(test_calls_from_callback),
        cmocka_unit_test(test_client_destroyed_with_open_appenders),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
