/* A lane's deadline checks outlive the streams it cancels (issue 24, section 1). When the
 * appender's thread cancels a stream at a deadline and every batch on it is answered before
 * the cancel's end is read, the stream is dropped with nothing riding on it; what the cancel
 * noted must go with it, or the lane's later streams are never checked again: a call to a
 * node that stops answering waits as long as the node takes, and the next unrelated failure
 * reads as a hung node's.
 *
 * The window (answers arriving after the thread drained them, a deadline passing before it
 * checks) opens by itself under load or behind a slow callback; here a wrap of the check's
 * app_inflight_deadline (appender_deadline.c, linked with -Wl,--wrap) holds one check until
 * every batch on the lane has its answer waiting and the deadline passed, so that it opens on
 * every run. Everything else goes through the public headers and the embedded server.
 *
 * Callbacks keep call order when a deadline settles a log stream's batches (issue 34): an
 * older batch in flight, or waiting in a retry task, and younger ones waiting to be sent all
 * reach their delivery deadline in the same round of the thread. The round is made the same
 * on every run by holding a step until the last call's deadline passed: the in-flight check
 * (app_inflight_deadline, as above) or the waiting batches' expiry (app_expire_waiting_locked,
 * also wrapped). */
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
#include "appender_internal.h"
#include "test_support.h"
#include "wire.h"

/* ---- the wrapped check ------------------------------------------------------------------ */

/* Which deadline the next held check waits for; 0 = let checks through. HOLD_END waits
 * instead for the end of the lane's stream (with its first attempt unanswered) and for the
 * test to append once more meanwhile; HOLD_UNTIL for the test's clock to reach g_until_ms
 * (the last delivery deadline of the test's calls). */
typedef enum { HOLD_NONE, HOLD_DELIVERY, HOLD_ATTEMPT, HOLD_END, HOLD_UNTIL } hold_t;
static _Atomic hold_t g_hold;
static atomic_int g_held; /* checks held so far */
static _Atomic(int64_t) g_until_ms;

/* The time under test is a delivery deadline: the held step waits for the clock to pass it
 * (test_now_ms and the library's wire_now_ms read the same monotonic clock). */
static bool until_passed(void *arg)
{
    (void)arg;
    return wire_now_ms() >= atomic_load(&g_until_ms);
}

int64_t __real_app_inflight_deadline(const app_lane_t *lane);
int64_t __wrap_app_inflight_deadline(const app_lane_t *lane);

typedef struct window {
    const app_lane_t *lane;
    int64_t due;
} window_t;

/* On the appender's thread, which owns the lane: the thread completes its streams itself,
 * in its poller's poll, so what reached it while it was busy (answers, the stream's end) gets
 * into the stream when it next polls, which it does here, as it would in a wait of its own. */
static void poll_in(const app_lane_t *lane)
{
    while (rpc_poller_poll(lane->app->poller, 0))
        ;
}

/* Every batch on the lane answered (the answers wait in the stream) and the deadline passed. */
static bool window_open(void *arg)
{
    const window_t *w = arg;
    poll_in(w->lane);
    return wire_now_ms() >= w->due && rpc_stream_buffered(w->lane->st.rpc) >= w->lane->inflight.n;
}

/* The stream's end reached the thread (polled in, not yet read by the lane). */
static bool stream_ended(void *arg)
{
    const app_lane_t *lane = arg;
    poll_in(lane);
    return rpc_stream_status(lane->st.rpc) != NULL;
}

/* HOLD_END's hand-shake with the test thread: held once the end is there, go once the test
 * appended. */
static atu_sync_t g_end_sync; /* initialised by the test */
static bool g_end_held, g_end_go;

int64_t __wrap_app_inflight_deadline(const app_lane_t *lane)
{
    int64_t expiry = __real_app_inflight_deadline(lane);
    hold_t hold = atomic_exchange(&g_hold, HOLD_NONE);
    if (hold == HOLD_NONE)
        return expiry;
    if (hold == HOLD_END) {
        if (lane->inflight.head->attempts > 1) {
            atu_note_bad("the held check came after a retry: a round outlasted the server's "
                         "delay");
            return expiry;
        }
        if (!test_wait_until(stream_ended, (void *)lane, 4 * cf_wait_bound_ms()))
            atu_note_bad("the held check never saw the lane's stream end");
        atu_set_true(&g_end_sync, &g_end_held);
        if (!atu_wait_true(&g_end_sync, &g_end_go, 4 * cf_wait_bound_ms()))
            atu_note_bad("the held check was never let go");
        atomic_fetch_add(&g_held, 1);
        return expiry;
    }
    if (hold == HOLD_UNTIL) {
        if (!test_wait_until(until_passed, NULL,
                             atomic_load(&g_until_ms) - wire_now_ms() + cf_wait_bound_ms()))
            atu_note_bad("the held check never saw the clock pass the calls' deadlines");
        atomic_fetch_add(&g_held, 1);
        return expiry;
    }
    window_t w = {.lane = lane, .due = expiry};
    if (hold == HOLD_ATTEMPT)
        w.due = lane->inflight.head->sent_ms + lane->app->attempt_timeout_ms;
    if (!test_wait_until(window_open, &w, 4 * cf_wait_bound_ms()))
        atu_note_bad("the held check never saw its batches answered past the deadline");
    atomic_fetch_add(&g_held, 1);
    return expiry;
}

/* The expiry of waiting batches, held once (g_hold_expiry) when a retry task holds batches:
 * with the appender's mu held, as the caller holds it, so that the task cannot put them back
 * on the ready list meanwhile, until the clock passed g_until_ms; it then expires with that
 * time. g_expiry_window counts the holds after which the retry task still held its batches,
 * the window the test needs. */
static atomic_bool g_hold_expiry;
static atomic_int g_expiry_window;

int64_t __real_app_expire_waiting_locked(app_thread_state_t *ts, int64_t now_ms);
int64_t __wrap_app_expire_waiting_locked(app_thread_state_t *ts, int64_t now_ms);

static bool retry_holds_batches(const varlog_appender_t *app)
{
    for (const app_retry_t *r = app->retries; r; r = r->next)
        if (!r->taken && r->batches.head)
            return true;
    return false;
}

int64_t __wrap_app_expire_waiting_locked(app_thread_state_t *ts, int64_t now_ms)
{
    if (atomic_load(&g_hold_expiry) && retry_holds_batches(ts->app)) {
        atomic_store(&g_hold_expiry, false);
        if (!test_wait_until(until_passed, NULL,
                             atomic_load(&g_until_ms) - wire_now_ms() + cf_wait_bound_ms()))
            atu_note_bad("the held expiry never saw the clock pass the calls' deadlines");
        now_ms = wire_now_ms();
        if (retry_holds_batches(ts->app))
            atomic_fetch_add(&g_expiry_window, 1);
    }
    return __real_app_expire_waiting_locked(ts, now_ms);
}

/* ---- calls -------------------------------------------------------------------------------- */

typedef struct tcall {
    call_t c; /* first: track's */
    atomic_llong at_ms;
    int64_t slow_ms;     /* the callback takes this long */
    int64_t appended_ms; /* test clock, read before the append */
    atomic_int order;    /* 1 + how many of the test's callbacks ran before this one */
    char text[512];
} tcall_t;

static atomic_int g_order; /* callbacks run so far (calls numbered by timed_cb) */

static void timed_cb(const varlog_append_result_t *r, void *opaque)
{
    tcall_t *tc = opaque;
    snprintf(tc->text, sizeof(tc->text), "%s", r->errtext ? r->errtext : "");
    atomic_store(&tc->order, atomic_fetch_add(&g_order, 1) + 1);
    atomic_store(&tc->at_ms, test_now_ms());
    /* A callback that takes a while, as appender.h allows: the steps, in which the
     * deadline passed while the thread ran it. The time is part of the scenario, not a wait
     * for an event (the window the test needs is opened by the held check, not by it), and
     * the deadlines are checked from both sides against the delivery timeout. */
    if (tc->slow_ms > 0)
        nanosleep(&(struct timespec){.tv_sec = tc->slow_ms / 1000,
                                     .tv_nsec = (tc->slow_ms % 1000) * 1000000},
                  NULL);
    track(g_tracker, &tc->c, r);
}

static void append_one(varlog_appender_t *app, tcall_t *t)
{
    varlog_record_t one = cf_record("0123456789abcdef");
    varlog_err_t rc = varlog_appender_append(app, &one, 1, 0, timed_cb, t);
    if (rc != VARLOG_OK)
        fail_msg("append %ld: %s: %s", t->c.seq, varlog_err_name(rc), varlog_last_error());
}

/* The call's callback (the test's calls are settled one after another, so call i is the
 * (i+1)-th callback, counted under the tracker's lock once the call's result is written)
 * within bound ms of t0, or the test fails saying how long it waited. */
static void await_call(tcall_t *t, int64_t t0, int64_t bound)
{
    int64_t left = bound - (test_now_ms() - t0);
    if (!atu_wait_at_least(&g_tracker->sync, &g_tracker->callbacks, t->c.seq + 1,
                           left > 0 ? left : 0))
        fail_msg("call %ld: no callback %lld ms after its append", t->c.seq,
                 (long long)(test_now_ms() - t0));
}

/* The unit of time: slowed builds (valgrind, TSan) may not even send a batch in 100 ms. */
static int64_t unit_ms(void)
{
    return test_under_valgrind() || test_under_tsan() ? 1000 : 100;
}

/* Calls 1 and 2 of the steps (slow callbacks), the first held at its delivery
 * deadline (or its attempt timeout) until its answer waits: both APPENDED, and the lane's
 * first stream was cancelled with nothing riding on it by its end. */
static void open_window(fixture_t *x, hold_t hold, tcall_t *t)
{
    int64_t u = unit_ms();
    /* The answer comes after the thread's first look, so that a check sees the batch out. */
    assert_int_equal(varlog_server_delay(x->f.srv, CF_PATH_APPEND, u / 2), VARLOG_OK);
    atomic_store(&g_held, 0);
    atomic_store(&g_hold, hold);
    for (int i = 0; i < 2; i++) {
        t[i].c.seq = i;
        t[i].c.n = 1;
        t[i].slow_ms = u;
        int64_t t0 = test_now_ms();
        append_one(x->app, &t[i]);
        await_call(&t[i], t0, 12 * u + cf_wait_bound_ms());
        if (t[i].c.err != VARLOG_OK)
            fail_msg("call %d: %s: %s", i, varlog_err_name(t[i].c.err), t[i].text);
    }
    assert_int_equal(atomic_load(&g_held), 1);
    /* The held check cancelled the first stream; the second call needed a new one. */
    assert_int_equal(app_stats(x->app).streams_opened, 2);
}

/* The steps: delivery timeout 300 ms, attempt timeout 1000 ms, slow callbacks on the
 * first two calls (the first stream cancelled at the delivery deadline with its batch
 * answered), then a node that delays its answers 8 s: the third call has TIMED_OUT at its
 * delivery deadline, not APPENDED after 8 s. */
static void test_deadline_checked_after_cancel_with_nothing_riding(void **state)
{
    (void)state;
    int64_t u = unit_ms();
    char dt[32], at[32];
    snprintf(dt, sizeof(dt), "%lld", (long long)(3 * u));
    snprintf(at, sizeof(at), "%lld", (long long)(10 * u));
    fixture_t x;
    fx_start(&x, 1, 1, "appender.delivery.timeout.ms", dt, "append.attempt.timeout.ms", at,
             "appender.batch.max.records", "1", "appender.linger.ms", "0", NULL);
    tcall_t *t = calloc(3, sizeof(*t));
    assert_non_null(t);
    open_window(&x, HOLD_DELIVERY, t);

    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 80 * u), VARLOG_OK);
    t[2].c.seq = 2;
    t[2].c.n = 1;
    int64_t t0 = test_now_ms();
    append_one(x.app, &t[2]);
    /* Its deadline plus the time to notice; well short of the node's 8 s. */
    await_call(&t[2], t0, 3 * u + 20 * u);
    int64_t at_ms = atomic_load(&t[2].at_ms) - t0;
    print_message("    third call: %s after %lld ms: %s\n", varlog_err_name(t[2].c.err),
                  (long long)at_ms, t[2].text);
    assert_int_equal(t[2].c.err, VARLOG_ERR_TIMED_OUT);
    assert_int_equal(t[2].c.outcome, VARLOG_MAYBE_APPENDED);
    assert_true(at_ms >= 3 * u - 10);
    assert_non_null(strstr(t[2].text, "appender.delivery.timeout.ms"));
    fx_stop(&x);
    free(t);
}

/* The same window at the attempt timeout: the next stream's unrelated failure (the node
 * answers UNAVAILABLE) is reported as itself, not as "no answer within
 * append.attempt.timeout.ms", and a node that then stops answering is still caught by the
 * attempt timeout. */
static void test_attempt_timeout_not_carried_to_next_stream(void **state)
{
    (void)state;
    int64_t u = unit_ms();
    char at[32];
    snprintf(at, sizeof(at), "%lld", (long long)(3 * u));
    fixture_t x;
    fx_start(&x, 1, 1, "appender.delivery.timeout.ms", "0", "append.attempt.timeout.ms", at,
             "append.retries", "0", "appender.batch.max.records", "1", "appender.linger.ms", "0",
             NULL);
    tcall_t *t = calloc(4, sizeof(*t));
    assert_non_null(t);
    open_window(&x, HOLD_ATTEMPT, t);

    /* A refusal of the node's own, on the lane's second stream. */
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 0), VARLOG_OK);
    assert_int_equal(
        varlog_server_fail_next(x.f.srv, CF_PATH_APPEND, 14 /* UNAVAILABLE */, "injected", 1),
        VARLOG_OK);
    t[2].c.seq = 2;
    t[2].c.n = 1;
    int64_t t0 = test_now_ms();
    append_one(x.app, &t[2]);
    await_call(&t[2], t0, cf_wait_bound_ms());
    print_message("    third call: %s: %s\n", varlog_err_name(t[2].c.err), t[2].text);
    assert_int_equal(t[2].c.err, VARLOG_ERR_RPC_UNAVAILABLE);
    assert_null(strstr(t[2].text, "append.attempt.timeout.ms"));
    assert_non_null(strstr(t[2].text, "injected"));

    /* A node that stops answering: the attempt timeout still ends the call. */
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 80 * u), VARLOG_OK);
    t[3].c.seq = 3;
    t[3].c.n = 1;
    t0 = test_now_ms();
    append_one(x.app, &t[3]);
    await_call(&t[3], t0, 3 * u + 20 * u + 1000 /* the failure's reopen backoff */);
    print_message("    fourth call: %s after %lld ms: %s\n", varlog_err_name(t[3].c.err),
                  (long long)(atomic_load(&t[3].at_ms) - t0), t[3].text);
    assert_int_equal(t[3].c.err, VARLOG_ERR_RPC_DEADLINE_EXCEEDED);
    assert_non_null(strstr(t[3].text, "append.attempt.timeout.ms"));
    fx_stop(&x);
    free(t);
}

/* A bound lane's stream ended with a batch on it that may be sent again (here a dropped
 * stream, with append.retry.maybe.appended) and the end reached the thread after it had read
 * the lane's answers and before it planned the round: a batch appended meanwhile was given to
 * the lane, whose next send first read the end, held the lane for the first batch's retry,
 * and then opened a new stream for the newer batch anyway. The newer call was stored, and
 * called back, before the older (test_appender_faults saw it under valgrind with refused
 * batches: "callback of call 122 after call 135"). Here the server ends the stream a while
 * after the batch arrived, so that the thread's first check of the batch in flight comes
 * before the end; the check is held until the end is there and the newer call appended. */
static void test_end_between_drain_and_plan_keeps_order(void **state)
{
    (void)state;
    int64_t u = unit_ms();
    fixture_t x;
    fx_start(&x, 1, 1, "appender.batch.max.records", "1", "appender.linger.ms", "0",
             "append.retry.maybe.appended", "true", "append.deny.ttl.ms", "0",
             "append.retry.backoff.ms", "1", "append.retry.backoff.max.ms", "10", NULL);
    call_t c[2];
    calls_init(c, 2);
    varlog_record_t one = cf_record("0123456789abcdef");
    /* The lane's first stream: its first request is held 2 units, then the stream drops. */
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 2 * u), VARLOG_OK);
    assert_int_equal(varlog_server_drop_stream_after(x.f.srv, CF_PATH_APPEND, 0, 1), VARLOG_OK);
    atu_sync_init(&g_end_sync);
    g_end_held = g_end_go = false;
    atomic_store(&g_held, 0);
    atomic_store(&g_hold, HOLD_END);
    assert_int_equal(varlog_appender_append(x.app, &one, 1, 0, track_cb, &c[0]), VARLOG_OK);
    assert_true(atu_wait_true(&g_end_sync, &g_end_held, 2 * u + 4 * cf_wait_bound_ms()));
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 0), VARLOG_OK);
    assert_int_equal(varlog_appender_append(x.app, &one, 1, 0, track_cb, &c[1]), VARLOG_OK);
    atu_set_true(&g_end_sync, &g_end_go);

    assert_true(atu_wait_at_least(&x.t.sync, &x.t.callbacks, 2, 4 * cf_wait_bound_ms()));
    assert_int_equal(atomic_load(&g_held), 1);
    assert_int_equal(c[0].err, VARLOG_OK);
    assert_int_equal(c[1].err, VARLOG_OK);
    print_message("    GLSN of the dropped call %llu, of the newer one %llu\n",
                  (unsigned long long)c[0].first.glsn, (unsigned long long)c[1].first.glsn);
    assert_true(c[0].first.glsn < c[1].first.glsn);
    fx_stop(&x); /* asserts the callbacks' order (the tracker's notes) */
    atu_sync_destroy(&g_end_sync);
}

/* ---- call order at a delivery deadline (issue 34) ------------------------------------------ */

enum { ORDER_CALLS = 6 };

/* Call w (a single record, gated_cb) is answered and its callback held at the fixture's gate;
 * meanwhile t[0..n) are appended (calls 1..n, one batch each), so that when the gate opens
 * the first goes out alone (pipeline depth 1) and the rest wait behind it. g_until_ms is set
 * to the last of their delivery deadlines. The caller sets the node's fault and arms the hold,
 * then opens the gate. */
static void append_behind_gate(fixture_t *x, call_t *w, tcall_t *t, int n, int64_t delivery)
{
    varlog_record_t one = cf_record("0123456789abcdef");
    calls_init(w, 1);
    assert_int_equal(varlog_appender_append(x->app, &one, 1, 0, gated_cb, w), VARLOG_OK);
    assert_true(gate_wait_entered(&x->g, 1, cf_wait_bound_ms()));
    atomic_store(&g_order, 0);
    for (int i = 0; i < n; i++) {
        t[i].c.seq = i + 1;
        t[i].c.n = 1;
        t[i].appended_ms = test_now_ms();
        append_one(x->app, &t[i]);
    }
    /* Each call's deadline is its batch's opening time plus the timeout: no later than this. */
    atomic_store(&g_until_ms, test_now_ms() + delivery);
}

/* Every call had its callback, in call order, within its delivery deadline and the time to
 * notice it (the held step waited for the last deadline: the earlier calls' callbacks may come
 * that much after theirs), and not before the deadline: the bound from both sides. */
static void assert_order_and_deadlines(fixture_t *x, tcall_t *t, int n, int64_t delivery)
{
    int64_t bound = atomic_load(&g_until_ms) - t[0].appended_ms + cf_wait_bound_ms();
    if (!atu_wait_at_least(&x->t.sync, &x->t.callbacks, n + 1, bound))
        fail_msg("%ld of %d callbacks within %lld ms", tracker_callbacks(&x->t), n + 1,
                 (long long)bound);
    char seen[128] = "";
    size_t len = 0;
    bool in_order = true;
    for (int k = 1; k <= n; k++) {
        for (int i = 0; i < n; i++) {
            if (atomic_load(&t[i].order) == k)
                len += (size_t)snprintf(seen + len, sizeof(seen) - len, " %ld", t[i].c.seq);
        }
    }
    for (int i = 0; i < n; i++)
        in_order &= atomic_load(&t[i].order) == i + 1;
    print_message("    callbacks in the order of calls%s\n", seen);
    for (int i = 0; i < n; i++)
        print_message("    call %ld: %s, %s after %lld ms: %s\n", t[i].c.seq,
                      varlog_err_name(t[i].c.err), varlog_outcome_name(t[i].c.outcome),
                      (long long)(atomic_load(&t[i].at_ms) - t[i].appended_ms), t[i].text);
    if (!in_order)
        fail_msg("callbacks of one log stream out of call order: calls%s", seen);
    for (int i = 0; i < n; i++) {
        int64_t at = atomic_load(&t[i].at_ms);
        if (t[i].c.err != VARLOG_ERR_TIMED_OUT || at - t[i].appended_ms < delivery ||
            at > atomic_load(&g_until_ms) + cf_wait_bound_ms())
            fail_msg("call %ld: %s after %lld ms (delivery timeout %lld ms): %s", t[i].c.seq,
                     varlog_err_name(t[i].c.err), (long long)(at - t[i].appended_ms),
                     (long long)delivery, t[i].text);
    }
    for (int i = 1; i < n; i++) {
        assert_int_equal(t[i].c.outcome, VARLOG_NOT_APPENDED);
        assert_non_null(strstr(t[i].text, "before the batch could be sent"));
    }
}

/* The older batch in flight to a node that holds it, the younger ones waiting to be sent: the
 * deadline check is held until every call's deadline passed, so that one round cancels the
 * older batch's stream (settled once its end is read) and finds the younger ones expired.
 * Before the fix their callbacks ran first ("calls 2 3 4 5 6 1"). */
static void test_deadline_in_flight_and_waiting_keep_order(void **state)
{
    (void)state;
    int64_t u = unit_ms();
    char dt[32], at[32];
    snprintf(dt, sizeof(dt), "%lld", (long long)(5 * u));
    snprintf(at, sizeof(at), "%lld", (long long)(100 * u));
    fixture_t x;
    fx_start(&x, 1, 1, "appender.delivery.timeout.ms", dt, "append.attempt.timeout.ms", at,
             "appender.pipeline.depth", "1", "appender.batch.max.records", "1",
             "appender.linger.ms", "0", NULL);
    call_t w;
    tcall_t *t = calloc(ORDER_CALLS, sizeof(*t));
    assert_non_null(t);
    append_behind_gate(&x, &w, t, ORDER_CALLS, 5 * u);
    /* A node that holds the first batch far beyond its deadline. */
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 100 * u), VARLOG_OK);
    atomic_store(&g_held, 0);
    atomic_store(&g_hold, HOLD_UNTIL);
    gate_open(&x.g);
    assert_order_and_deadlines(&x, t, ORDER_CALLS, 5 * u);
    assert_int_equal(atomic_load(&g_held), 1);
    assert_int_equal(w.err, VARLOG_OK);
    assert_int_equal(t[0].c.outcome, VARLOG_MAYBE_APPENDED);
    assert_non_null(strstr(t[0].text, "the stream was cancelled at the delivery deadline"));
    fx_stop(&x);
    free(t);
}

/* The older batch refused and waiting in a retry task (its backoff outlasts its deadline), the
 * younger ones waiting behind it: the expiry is held, with the appender's lock, until every
 * call's deadline passed, so that one pass takes the retry's batch back and finds the younger
 * ones expired. Before the fix their callbacks ran first ("calls 2 3 4 5 6 1"). */
static void test_deadline_in_retry_and_waiting_keep_order(void **state)
{
    (void)state;
    int64_t u = unit_ms();
    char dt[32], at[32];
    snprintf(dt, sizeof(dt), "%lld", (long long)(10 * u));
    snprintf(at, sizeof(at), "%lld", (long long)(100 * u));
    fixture_t x;
    fx_start(&x, 1, 1, "appender.delivery.timeout.ms", dt, "append.attempt.timeout.ms", at,
             "appender.pipeline.depth", "1", "appender.batch.max.records", "1",
             "appender.linger.ms", "0", "append.retries", "3", "append.retry.maybe.appended",
             "true", "append.retry.backoff.ms", "60000", "append.retry.backoff.max.ms", "60000",
             "append.deny.ttl.ms", "0", NULL);
    call_t w;
    tcall_t *t = calloc(ORDER_CALLS, sizeof(*t));
    assert_non_null(t);
    append_behind_gate(&x, &w, t, ORDER_CALLS, 10 * u);
    /* The first batch is refused (a retriable code): it waits in a retry task until its
     * deadline (the backoff, a minute, is cut to the time left, drawn from its second half). */
    assert_int_equal(
        varlog_server_fail_next(x.f.srv, CF_PATH_APPEND, 14 /* UNAVAILABLE */, "injected", 1),
        VARLOG_OK);
    atomic_store(&g_expiry_window, 0);
    atomic_store(&g_hold_expiry, true);
    gate_open(&x.g);
    assert_order_and_deadlines(&x, t, ORDER_CALLS, 10 * u);
    /* The retry task still held the first batch when the held expiry ran. */
    assert_int_equal(atomic_load(&g_expiry_window), 1);
    assert_int_equal(w.err, VARLOG_OK);
    assert_non_null(strstr(t[0].text, "while the batch waited to be sent again"));
    fx_stop(&x);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deadline_checked_after_cancel_with_nothing_riding),
        cmocka_unit_test(test_attempt_timeout_not_carried_to_next_stream),
        cmocka_unit_test(test_end_between_drain_and_plan_keeps_order),
        cmocka_unit_test(test_deadline_in_flight_and_waiting_keep_order),
        cmocka_unit_test(test_deadline_in_retry_and_waiting_keep_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
