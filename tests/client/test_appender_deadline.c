/* The appender's bounds in time (issue 19, point 1): every call has its callback within
 * appender.delivery.timeout.ms of the append (plus the time to notice), whether its batch
 * waits for a stalled node, sits in a retry backoff, or waits behind others; and when a log
 * stream's node cannot be reached, the batches waiting for it fail together with the cause
 * instead of each going through its own attempts, one group per retry cycle. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "appender_fixture.h"
#include "test_support.h"

#define TIMEOUT 30000

/* A tracked call, with when its callback ran and its text. */
typedef struct tcall {
    call_t c; /* first: track_cb's opaque */
    atomic_llong at_ms;
    char text[512];
    /* Optional: runs in the callback, on the appender's thread, before it is tracked. */
    void (*hook)(struct tcall *tc);
    void *hook_arg;
    struct tcall *other; /* the call the hook waits for */
    int64_t due_ms;      /* test clock: when the call's delivery deadline passes */
} tcall_t;

static void timed_cb(const varlog_append_result_t *r, void *opaque)
{
    tcall_t *tc = opaque;
    snprintf(tc->text, sizeof(tc->text), "%s", r->errtext ? r->errtext : "");
    atomic_store(&tc->at_ms, test_now_ms());
    if (tc->hook)
        tc->hook(tc);
    track(g_tracker, &tc->c, r);
}

static tcall_t *tcalls_new(size_t n)
{
    tcall_t *t = calloc(n, sizeof(*t));
    assert_non_null(t);
    for (size_t i = 0; i < n; i++) {
        t[i].c.seq = (long)i;
        t[i].c.n = 1;
    }
    return t;
}

/* Appends n single-record calls with timeout 0; all must be taken. */
static void append_n(varlog_appender_t *app, tcall_t *t, size_t n)
{
    varlog_record_t one = cf_record("0123456789abcdef");
    for (size_t i = 0; i < n; i++) {
        varlog_err_t rc = varlog_appender_append(app, &one, 1, 0, timed_cb, &t[i]);
        if (rc != VARLOG_OK)
            fail_msg("append %zu: %s: %s", i, varlog_err_name(rc), varlog_last_error());
    }
}

typedef struct callbacks_wait {
    tracker_t *t;
    long n;
} callbacks_wait_t;

static bool callbacks_reached(void *arg)
{
    callbacks_wait_t *w = arg;
    return tracker_callbacks(w->t) >= w->n;
}

static void await_callbacks(fixture_t *x, long n, int64_t bound)
{
    callbacks_wait_t w = {&x->t, n};
    if (!test_wait_until(callbacks_reached, &w, bound))
        fail_msg("%ld of %ld callbacks within %lld ms", tracker_callbacks(&x->t), n,
                 (long long)bound);
}

/* A node that takes requests and never answers: every call gets TIMED_OUT once its delivery
 * timeout passed, those in flight MAYBE_APPENDED (sent), those waiting NOT_APPENDED. */
static void test_stalled_node_times_out(void **state)
{
    (void)state;
    fixture_t x;
    /* Slowed builds may not even send a batch within 300 ms. */
    int64_t timeout = test_under_valgrind() || test_under_tsan() ? 3000 : 300;
    char tv[32], named[96];
    snprintf(tv, sizeof(tv), "%lld", (long long)timeout);
    snprintf(named, sizeof(named), "appender.delivery.timeout.ms (%lld ms)", (long long)timeout);
    fx_start(&x, 1, 1, "appender.delivery.timeout.ms", tv, "appender.batch.max.records", "2",
             "appender.linger.ms", "0", NULL);
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 60000), VARLOG_OK);
    enum { N = 12 };
    tcall_t *t = tcalls_new(N);
    int64_t t0 = test_now_ms();
    append_n(x.app, t, N);
    await_callbacks(&x, N, timeout + cf_wait_bound_ms());
    int maybe = 0, not_appended = 0;
    for (int i = 0; i < N; i++) {
        /* A batch sent behind the first to expire, whose own deadline was a few ms later (a
         * slowed build appends slowly), ends with the stream that deadline cancelled: it may
         * be stored, so it is not sent again, and says why (appender.h). */
        bool behind = t[i].c.err == VARLOG_ERR_RPC_CANCELLED &&
                      t[i].c.outcome == VARLOG_MAYBE_APPENDED &&
                      strstr(t[i].text, "another batch on the stream reached "
                                        "appender.delivery.timeout.ms");
        if ((t[i].c.err != VARLOG_ERR_TIMED_OUT || !strstr(t[i].text, named)) && !behind)
            fail_msg("call %d: %s: %s", i, varlog_err_name(t[i].c.err), t[i].text);
        assert_true(atomic_load(&t[i].at_ms) - t0 >= timeout - 10);
        maybe += t[i].c.outcome == VARLOG_MAYBE_APPENDED;
        not_appended += t[i].c.outcome == VARLOG_NOT_APPENDED;
    }
    print_message("    %d MAYBE_APPENDED (in flight), %d NOT_APPENDED; e.g. %s\n", maybe,
                  not_appended, t[N - 1].text);
    assert_true(maybe >= 1);
    assert_true(not_appended >= 1);
    fx_stop(&x);
    free(t);
}

/* The server gone, retries enough to outlast any deadline: each call still has its callback
 * within its delivery timeout plus the time to notice, and says what failed last. */
static void test_dead_server_bounded_by_delivery_timeout(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 1, 1, "appender.delivery.timeout.ms", "1000", "append.retries", "100",
             "append.retry.backoff.ms", "10", "append.retry.backoff.max.ms", "200",
             "appender.batch.max.records", "4", NULL);
    assert_int_equal(varlog_server_stop(x.f.srv), VARLOG_OK);
    enum { N = 200 };
    tcall_t *t = tcalls_new(N);
    int64_t t0 = test_now_ms();
    append_n(x.app, t, N);
    await_callbacks(&x, N, 1000 + 1000 + cf_wait_bound_ms());
    int64_t last = 0;
    int timed_out = 0;
    for (int i = 0; i < N; i++) {
        /* The first batches may go out on the connection the stop is tearing down ("broken
         * pipe" once sent): MAYBE_APPENDED, honestly, and not sent again; read back from a
         * log that cannot be reached until their deadline (TIMED_OUT, "read back"), or
         * reported at once with append.resolve.maybe.appended false. Every other call waits
         * out its deadline. */
        bool racing = t[i].c.outcome == VARLOG_MAYBE_APPENDED && strstr(t[i].text, "(attempt 1)") &&
                      (t[i].c.err == VARLOG_ERR_RPC_UNAVAILABLE ||
                       (t[i].c.err == VARLOG_ERR_TIMED_OUT && strstr(t[i].text, "read back")));
        bool expired = t[i].c.err == VARLOG_ERR_TIMED_OUT && t[i].c.outcome == VARLOG_NOT_APPENDED;
        if (!racing && !expired)
            fail_msg("call %d: %s, %s: %s", i, varlog_err_name(t[i].c.err),
                     varlog_outcome_name(t[i].c.outcome), t[i].text);
        timed_out += expired;
        int64_t at = atomic_load(&t[i].at_ms) - t0;
        /* Not before its deadline: the other side of the bound checked below. */
        if (expired && at < 1000)
            fail_msg("call %d: TIMED_OUT %lld ms after the first append (delivery timeout "
                     "1000 ms): %s",
                     i, (long long)at, t[i].text);
        if (at > last)
            last = at;
    }
    print_message("    last callback %lld ms after the first append; e.g. %s\n", (long long)last,
                  t[N - 1].text);
    /* The promise (appender.h): within the delivery timeout plus about a second; slowed
     * builds (valgrind, TSan) get the fixture's bound instead of the second. */
    int64_t slack = test_under_valgrind() || test_under_tsan() ? cf_wait_bound_ms() : 1000;
    if (last > 1000 + slack)
        fail_msg("the last callback came %lld ms after the first append", (long long)last);
    /* At most the pipeline's batches (depth 2, of 4 records) raced the stop. */
    assert_true(timed_out >= N - 2 * 4);
    int tried = 0;
    for (int i = 0; i < N && !tried; i++)
        tried = strstr(t[i].text, "the last:") != NULL; /* tried, and says how it failed */
    assert_true(tried);
    fx_stop(&x);
    free(t);
}

/* No delivery bound: a dead node's batches still end together once the first of them used
 * its attempts, each with the cause ("unreachable"), rather than one group per retry cycle. */
static void test_unreachable_fails_waiting_batches_together(void **state)
{
    (void)state;
    fixture_t x;
    /* No read-back: with no delivery bound, a batch that raced the stop would be read back
     * from the dead node for an attempt's bound (10 s) while its lane waits, and the rule
     * under test would come 10 s later (beyond the wait below on a loaded machine). */
    fx_start(&x, 1, 1, "appender.delivery.timeout.ms", "0", "append.retries", "2",
             "append.retry.backoff.ms", "10", "append.retry.backoff.max.ms", "50",
             "appender.batch.max.records", "1", "appender.linger.ms", "0",
             "append.resolve.maybe.appended", "false", NULL);
    assert_int_equal(varlog_server_stop(x.f.srv), VARLOG_OK);
    enum { N = 60 };
    tcall_t *t = tcalls_new(N);
    append_n(x.app, t, N);
    await_callbacks(&x, N, TIMEOUT);
    int behind = 0;
    for (int i = 0; i < N; i++) {
        /* As above, a first batch may have gone out on the connection being torn down. */
        bool racing = t[i].c.outcome == VARLOG_MAYBE_APPENDED && strstr(t[i].text, "(attempt 1)");
        if (t[i].c.err != VARLOG_ERR_RPC_UNAVAILABLE ||
            (t[i].c.outcome != VARLOG_NOT_APPENDED && !racing))
            fail_msg("call %d: %s, %s: %s", i, varlog_err_name(t[i].c.err),
                     varlog_outcome_name(t[i].c.outcome), t[i].text);
        behind += strstr(t[i].text, "unreachable") != NULL;
    }
    varlog_appender_stats_t s = app_stats(x.app);
    print_message("    %d of %d calls failed behind an unreachable node; %llu batches sent, "
                  "%llu retried\n",
                  behind, N, (unsigned long long)s.batches_sent,
                  (unsigned long long)s.batches_retried);
    /* At most the pipeline's batches (depth 2, each with its attempts) went out. */
    assert_true(behind >= N - 2 * 3);
    fx_stop(&x);
    free(t);
}

/* ---- the appender's own deadlines (issue 24, sections 2 and 3) ---------------------------- */

/* The unit of time: slowed builds (valgrind, TSan) may not even send a batch in 100 ms. */
static int64_t unit_ms(void)
{
    return test_under_valgrind() || test_under_tsan() ? 1000 : 100;
}

static void sleep_ms(int64_t ms)
{
    if (ms > 0)
        nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000}, NULL);
}

/* Appends one call. */
static void append_call(varlog_appender_t *app, tcall_t *t)
{
    varlog_record_t one = cf_record("0123456789abcdef");
    varlog_err_t rc = varlog_appender_append(app, &one, 1, 0, timed_cb, t);
    if (rc != VARLOG_OK)
        fail_msg("append %ld: %s: %s", t->c.seq, varlog_err_name(rc), varlog_last_error());
}

/* One call answered before the test's own: the connection is up, so that the first batch's
 * timing is the node's delay and not a connection's setup (seconds under valgrind). Counts
 * as the tracker's first callback. */
static void warm_up(fixture_t *x)
{
    static tcall_t w;
    memset(&w, 0, sizeof(w));
    w.c.n = 1;
    w.c.producer = -1; /* outside the order the test's calls are checked in */
    append_call(x->app, &w);
    await_callbacks(x, 1, cf_wait_bound_ms());
    assert_int_equal(w.c.err, VARLOG_OK);
}

/* Batch A goes out to a node that delays its answers far beyond the delivery timeout (5
 * units); batch B follows 2 units later on the same stream. A's deadline cancels the stream.
 * Returns when both have their callback; *t0 is A's append time, *t1 B's. */
static void expire_ahead_of_younger(fixture_t *x, tcall_t *t, int64_t *t0, int64_t *t1)
{
    int64_t u = unit_ms();
    warm_up(x);
    assert_int_equal(varlog_server_delay(x->f.srv, CF_PATH_APPEND, 50 * u), VARLOG_OK);
    uint64_t requests = varlog_server_request_count(x->f.srv, CF_PATH_APPEND);
    *t0 = test_now_ms();
    append_call(x->app, &t[0]);
    /* The time under test: the distance between two deadlines. B is appended 2 units after
     * A, so that when A's deadline cancels the stream B still has 2 units to go, and its fate
     * is the cancel's, not its own deadline's. */
    sleep_ms(*t0 + 2 * u - test_now_ms());
    *t1 = test_now_ms();
    append_call(x->app, &t[1]);
    await_callbacks(x, 3, 5 * u + 2 * u + cf_wait_bound_ms());
    /* A was on the node when B went out behind it on the same stream. */
    assert_true(varlog_server_request_count(x->f.srv, CF_PATH_APPEND) >= requests + 1);
    assert_int_equal(app_stats(x->app).streams_opened, 1 + (t[1].c.err == VARLOG_OK));
    /* A's callback at its deadline, from both sides: not before it, and within the time to
     * notice. */
    int64_t at_a = atomic_load(&t[0].at_ms) - *t0;
    if (at_a < 5 * u || at_a > 5 * u + cf_wait_bound_ms())
        fail_msg("A's callback %lld ms after its append (delivery timeout %lld ms)",
                 (long long)at_a, (long long)(5 * u));
}

static void start_own_deadline(fixture_t *x, const char *retry_maybe)
{
    char dt[32];
    snprintf(dt, sizeof(dt), "%lld", (long long)(5 * unit_ms()));
    /* Topic mode: a denial would show in the appendable log streams of the topic. */
    fx_start(x, 1, 0, "appender.delivery.timeout.ms", dt, "append.retry.maybe.appended",
             retry_maybe, "appender.batch.max.records", "1", "appender.linger.ms", "0", NULL);
}

/* No denial: the node was slower than the caller's bound, which says nothing about it. */
static void assert_not_denied(fixture_t *x)
{
    int32_t ids[4] = {0};
    size_t n = cf_appendable(x->f.client, 1, ids, 4);
    uint64_t denials = cf_stats(x->f.client).denials;
    print_message("    denials %llu, appendable log streams %zu\n", (unsigned long long)denials, n);
    assert_int_equal(denials, 0);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 1);
}

/* A batch in flight reaches its delivery deadline: TIMED_OUT with a text that says the
 * stream was cancelled at that deadline (not "rpc cancelled" as if someone else had), the
 * log stream is not denied, and the batch behind it, which cannot be sent again without
 * risking a duplicate (append.retry.maybe.appended false), fails with a text naming the
 * other batch's deadline as the cause. */
static void test_own_deadline_denies_nothing(void **state)
{
    (void)state;
    fixture_t x;
    start_own_deadline(&x, "false");
    tcall_t *t = tcalls_new(2);
    int64_t t0, t1;
    expire_ahead_of_younger(&x, t, &t0, &t1);
    print_message("    A after %lld ms: %s\n    B after %lld ms: %s\n",
                  (long long)(atomic_load(&t[0].at_ms) - t0), t[0].text,
                  (long long)(atomic_load(&t[1].at_ms) - t1), t[1].text);
    assert_int_equal(t[0].c.err, VARLOG_ERR_TIMED_OUT);
    assert_int_equal(t[0].c.outcome, VARLOG_MAYBE_APPENDED);
    assert_non_null(strstr(t[0].text, "the stream was cancelled at the delivery deadline"));
    assert_null(strstr(t[0].text, "rpc cancelled"));
    /* B was sent: it may be stored, so it is not sent again; its text says why it ended. */
    assert_int_equal(t[1].c.outcome, VARLOG_MAYBE_APPENDED);
    assert_non_null(
        strstr(t[1].text, "another batch on the stream reached appender.delivery.timeout.ms"));
    assert_non_null(strstr(t[1].text, "append.retry.maybe.appended"));
    assert_not_denied(&x);
    fx_stop(&x);
    free(t);
}

/* A's callback: the node answers at once from now on (B's next attempt is sent after it). */
static void node_recovers(tcall_t *tc)
{
    fixture_t *x = tc->hook_arg;
    if (varlog_server_delay(x->f.srv, CF_PATH_APPEND, 0) != VARLOG_OK)
        atu_note_bad("varlog_server_delay failed");
}

/* The same with append.retry.maybe.appended true: the batch behind the expired one is sent
 * again within its own deadline (the client gave it up, the node did not refuse it) and
 * stored, and nothing is denied. */
static void test_younger_batch_not_failed_early(void **state)
{
    (void)state;
    fixture_t x;
    start_own_deadline(&x, "true");
    tcall_t *t = tcalls_new(2);
    t[0].hook = node_recovers;
    t[0].hook_arg = &x;
    int64_t t0, t1;
    expire_ahead_of_younger(&x, t, &t0, &t1);
    int64_t at_b = atomic_load(&t[1].at_ms) - t1;
    print_message("    A after %lld ms: %s\n    B after %lld ms: %s\n",
                  (long long)(atomic_load(&t[0].at_ms) - t0), t[0].text, (long long)at_b,
                  t[1].text);
    assert_int_equal(t[0].c.err, VARLOG_ERR_TIMED_OUT);
    if (t[1].c.err != VARLOG_OK)
        fail_msg("B: %s, %s after %lld ms: %s", varlog_err_name(t[1].c.err),
                 varlog_outcome_name(t[1].c.outcome), (long long)at_b, t[1].text);
    assert_true(app_stats(x.app).batches_retried >= 1);
    assert_not_denied(&x);
    fx_stop(&x);
    free(t);
}

/* X's callback: the node goes away (Y, behind X, ends UNAVAILABLE), and the callback takes
 * until Y's deadline has passed, so that Y's stream failure, not its deadline, settles it.
 * The time under test is Y's deadline: the callback blocks (as appender.h allows) until the
 * clock passed it, by 20 ms for the ms rounding of the two clocks' reads. */
static void stop_and_outlast(tcall_t *tc)
{
    fixture_t *x = tc->hook_arg;
    if (varlog_server_stop(x->f.srv) != VARLOG_OK)
        atu_note_bad("varlog_server_stop failed");
    sleep_ms(tc->other->due_ms - test_now_ms() + 20);
}

/* One try of the scenario below: true when Y was settled by its stream's failure, false when
 * the deadline's own cancel came first. */
static bool try_expired_by_stream_failure(int64_t u)
{
    char dt[32];
    snprintf(dt, sizeof(dt), "%lld", (long long)(3 * u));
    fixture_t x;
    fx_start(&x, 1, 1, "appender.delivery.timeout.ms", dt, "appender.batch.max.records", "1",
             "appender.linger.ms", "0", NULL);
    warm_up(&x);
    /* X is answered after 1 unit, Y (read after X's answer) would be after 2. */
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, u), VARLOG_OK);
    tcall_t *t = tcalls_new(2);
    t[0].hook = stop_and_outlast;
    t[0].hook_arg = &x;
    t[0].other = &t[1];
    append_call(x.app, &t[0]);
    t[1].due_ms = test_now_ms() + 3 * u;
    append_call(x.app, &t[1]);
    await_callbacks(&x, 3, 3 * u + cf_wait_bound_ms());
    print_message("    X: %s\n    Y: %s\n", varlog_err_name(t[0].c.err), t[1].text);
    assert_int_equal(t[0].c.err, VARLOG_OK);
    assert_int_equal(t[1].c.err, VARLOG_ERR_TIMED_OUT);
    assert_null(strstr(t[1].text, "  "));
    assert_non_null(strstr(t[1].text, "while the batch was in flight to log stream 1 of topic 1"));
    assert_non_null(strstr(t[1].text, "; the last: "));
    bool by_failure = strstr(t[1].text, "unavailable") != NULL;
    if (!by_failure)
        assert_non_null(strstr(t[1].text, "cancelled at the delivery deadline"));
    fx_stop(&x);
    free(t);
    return by_failure;
}

/* A batch whose deadline passed and that a stream failure (not its deadline) settles: the
 * TIMED_OUT text says where the batch was and what failed, in words (issue 24, section 3:
 * it read "passed  after 1 attempt").
 *
 * When X's callback returns, Y's deadline has passed and the node's end is in the socket;
 * the appender reads what came during the stall before it checks deadlines, but gRPC can take
 * more than one pass over the socket to turn the bytes into the stream's end (a GOAWAY read
 * alone ends nothing), so now and then the deadline's cancel comes first (1 run of CI's in
 * about 30). Both texts are true and both are checked; the path under test is the failure's,
 * so the scenario repeats until it takes that path, a few times at most. */
static void test_expired_by_stream_failure_says_where(void **state)
{
    (void)state;
    int64_t u = unit_ms();
    int tries = 0;
    bool by_failure = false;
    while (!by_failure && tries < 6) {
        by_failure = try_expired_by_stream_failure(u);
        tries++;
    }
    print_message("    settled by the stream's failure after %d tr%s\n", tries,
                  tries == 1 ? "y" : "ies");
    assert_true(by_failure);
}

/* ---- call order at the deadline, with the defaults (issue 34) ----------------------------- */

typedef struct order_state {
    atomic_long latest;    /* the latest call that had its callback (-1: none) */
    atomic_long reordered; /* callbacks that came after a later call's */
    atomic_long timed_out;
    atu_sync_t sync;
    long callbacks; /* under sync.mu */
} order_state_t;

typedef struct ocall {
    order_state_t *st;
    long seq;
} ocall_t;

static void order_cb(const varlog_append_result_t *r, void *opaque)
{
    const ocall_t *oc = opaque;
    order_state_t *st = oc->st;
    /* Callbacks run one at a time, on the appender's thread. */
    if (atomic_load(&st->latest) > oc->seq)
        atomic_fetch_add(&st->reordered, 1);
    else
        atomic_store(&st->latest, oc->seq);
    if (r->err == VARLOG_ERR_TIMED_OUT)
        atomic_fetch_add(&st->timed_out, 1);
    pthread_mutex_lock(&st->sync.mu);
    st->callbacks++;
    pthread_cond_broadcast(&st->sync.cv);
    pthread_mutex_unlock(&st->sync.mu);
}

/* The reviewer's reproduction: every default but a shorter delivery timeout, a producer that
 * queues as fast as it can, and a node that holds every request. The batches in flight (the
 * pipeline's two) and the many waiting behind them reach their deadlines within milliseconds
 * of each other; before the fix, 2,000 to 6,000 of 20,000 callbacks came after later calls'
 * (the waiting batches expired in the round that cancelled the stream, whose end settled the
 * older ones a round later). Every call has its callback in call order, TIMED_OUT. */
static void test_hung_node_fast_producer_keeps_order(void **state)
{
    (void)state;
    fixture_t x;
    int64_t delivery = test_under_valgrind() || test_under_tsan() ? 3000 : 1000;
    char dt[32];
    snprintf(dt, sizeof(dt), "%lld", (long long)delivery);
    fx_start(&x, 1, 1, "appender.delivery.timeout.ms", dt, NULL);
    /* The connection is up and the lane's stream open before the node hangs. */
    call_t warm;
    calls_init(&warm, 1);
    varlog_record_t one = cf_record("0123456789abcdef");
    assert_int_equal(varlog_appender_append(x.app, &one, 1, 0, track_cb, &warm), VARLOG_OK);
    assert_true(atu_wait_at_least(&x.t.sync, &x.t.callbacks, 1, cf_wait_bound_ms()));
    assert_int_equal(warm.err, VARLOG_OK);
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 600000), VARLOG_OK);
    long n = test_scale(20000, 20);
    ocall_t *calls = calloc((size_t)n, sizeof(*calls));
    assert_non_null(calls);
    order_state_t st = {0};
    atomic_init(&st.latest, -1);
    atu_sync_init(&st.sync);
    for (long i = 0; i < n; i++) {
        calls[i] = (ocall_t){&st, i};
        varlog_err_t rc = varlog_appender_append(x.app, &one, 1, 0, order_cb, &calls[i]);
        if (rc != VARLOG_OK)
            fail_msg("append %ld: %s: %s", i, varlog_err_name(rc), varlog_last_error());
    }
    int64_t appended = test_now_ms();
    bool all = atu_wait_at_least(&st.sync, &st.callbacks, n, delivery + cf_wait_bound_ms());
    print_message("    %ld calls: %ld TIMED_OUT, %ld callbacks after a later call's; the last "
                  "%lld ms after the last append\n",
                  n, atomic_load(&st.timed_out), atomic_load(&st.reordered),
                  (long long)(test_now_ms() - appended));
    if (!all)
        fail_msg("%ld of %ld callbacks within the delivery timeout and %lld ms", st.callbacks, n,
                 (long long)cf_wait_bound_ms());
    assert_int_equal(atomic_load(&st.reordered), 0);
    assert_int_equal(atomic_load(&st.timed_out), n);
    fx_stop(&x);
    atu_sync_destroy(&st.sync);
    free(calls);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stalled_node_times_out),
        cmocka_unit_test(test_dead_server_bounded_by_delivery_timeout),
        cmocka_unit_test(test_unreachable_fails_waiting_batches_together),
        cmocka_unit_test(test_own_deadline_denies_nothing),
        cmocka_unit_test(test_younger_batch_not_failed_early),
        cmocka_unit_test(test_expired_by_stream_failure_says_where),
        cmocka_unit_test(test_hung_node_fast_producer_keeps_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
