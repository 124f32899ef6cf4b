/* How long a subscription rides out a broken log stream (issue 23): the bound is a time
 * without progress (subscribe.retry.timeout.ms), not a count of failures, and
 * varlog_subscription_health tells when it is reconnecting and when it is back.
 *
 * Outages are Subscribe calls the embedded server fails (UNAVAILABLE, at once: many
 * failures in little time, which a count of 10 could not ride out) or streams it drops. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "appender_test_util.h"
#include "client_fixture.h"
#include "subscribe_test_util.h"
#include "test_support.h"
#include "varlog/subscribe.h"

#define GRPC_UNAVAILABLE 14
#define INJECTED "injected unavailable"
/* More failures than the old count-based bound (subscribe.retries 10) allowed. */
#define MANY_FAILURES 40

typedef struct t {
    client_fixture_t f;
    stu_log_t log;
    stu_sink_t sink;
    varlog_subscription_t *sub;
    bool iter;
    bool started;
} t_t;

/* Not on a test's stack: the teardown of a failed test still reaches it. */
static t_t T;

static void t_start(bool iter, long cap, ...)
{
    memset(&T, 0, sizeof(T));
    va_list ap;
    va_start(ap, cap);
    cf_start_adjusted(&T.f, 1, 1, atu_conf_adjust, &ap, NULL);
    va_end(ap);
    stu_log_init(&T.log, (size_t)cap + 64);
    stu_sink_init(&T.sink, cap);
    atu_bad_reset();
    T.iter = iter;
    T.started = true;
}

static void t_finish(void)
{
    atu_set_true(&T.sink.sync, &T.sink.release);
    varlog_subscription_close(&T.sub);
    cf_stop(&T.f);
    stu_log_free(&T.log);
    stu_sink_free(&T.sink);
    T.started = false;
}

static int teardown(void **state)
{
    (void)state;
    if (T.started)
        t_finish();
    return 0;
}

static int64_t bound_ms(void)
{
    return 3 * cf_wait_bound_ms();
}

static void open_sub(uint64_t begin, uint64_t end)
{
    varlog_err_t rc;
    if (T.iter) {
        rc = varlog_subscribe_iter(T.f.client, 1, begin, end, &T.sub);
    } else {
        varlog_subscribe_handlers_t h = stu_handlers(&T.sink);
        rc = varlog_subscribe(T.f.client, 1, begin, end, &h, &T.sub);
    }
    if (rc != VARLOG_OK)
        fail_msg("subscribe: %s: %s", varlog_err_name(rc), varlog_last_error());
}

static varlog_subscription_health_t health(void)
{
    varlog_subscription_health_t h;
    assert_int_equal(varlog_subscription_health(T.sub, &h), VARLOG_OK);
    return h;
}

/* The iterator form has no thread: its failures are handled inside next. Takes what next
 * gives; fails the test on an error (the subscription ended where it should not). */
static void pump(void)
{
    if (!T.iter)
        return;
    varlog_entry_t e;
    varlog_err_t rc = varlog_subscription_next(T.sub, 20, &e);
    if (rc == VARLOG_OK)
        stu_sink_add(&T.sink, &e);
    else if (rc != VARLOG_ERR_TIMED_OUT)
        fail_msg("next: %s: %s", varlog_err_name(rc), varlog_last_error());
}

/* The sink's error in the handler form, as a test failure. */
static void assert_no_error(void)
{
    pthread_mutex_lock(&T.sink.sync.mu);
    long errors = T.sink.errors, ends = T.sink.ends;
    varlog_err_t err = T.sink.err;
    char why[512];
    memcpy(why, T.sink.why, sizeof(why));
    pthread_mutex_unlock(&T.sink.sync.mu);
    if (errors || ends)
        fail_msg("the subscription ended: %s %s", errors ? varlog_err_name(err) : "END",
                 errors ? why : "");
}

static bool subscribe_calls_reached(void *arg)
{
    pump();
    assert_no_error();
    return varlog_server_call_count(T.f.srv, STU_PATH_SUBSCRIBE) >= *(uint64_t *)arg;
}

static void receive_ok(long want)
{
    varlog_err_t rc =
        T.iter ? stu_drain(T.sub, &T.sink, want, bound_ms())
               : (stu_wait_n(&T.sink, want, bound_ms()) ? VARLOG_OK : VARLOG_ERR_TIMED_OUT);
    if (rc != VARLOG_OK) {
        assert_no_error();
        fail_msg("%s after %ld of %ld entries: %s", varlog_err_name(rc), stu_sink_n(&T.sink), want,
                 T.iter ? varlog_last_error() : "");
    }
}

/* The subscription's failure in either form: on_error's (exactly once) or next's (sticky). */
static varlog_err_t failure_of(char *why, size_t why_size)
{
    if (T.iter) {
        varlog_entry_t e;
        varlog_err_t rc = VARLOG_ERR_TIMED_OUT;
        int64_t deadline = test_now_ms() + bound_ms();
        while (rc == VARLOG_ERR_TIMED_OUT && test_now_ms() < deadline)
            rc = varlog_subscription_next(T.sub, 50, &e);
        if (rc == VARLOG_OK)
            fail_msg("next gave an entry (glsn %llu) where a failure was due",
                     (unsigned long long)e.meta.glsn);
        snprintf(why, why_size, "%s", varlog_last_error());
        if (rc != VARLOG_ERR_TIMED_OUT)
            assert_int_equal(varlog_subscription_next(T.sub, 0, &e), rc);
        return rc;
    }
    if (!stu_wait_done(&T.sink, bound_ms()))
        return VARLOG_ERR_TIMED_OUT;
    pthread_mutex_lock(&T.sink.sync.mu);
    long ends = T.sink.ends, errors = T.sink.errors;
    varlog_err_t err = T.sink.err;
    snprintf(why, why_size, "%s", T.sink.why);
    pthread_mutex_unlock(&T.sink.sync.mu);
    if (ends)
        fail_msg("on_end where a failure was due");
    assert_int_equal(errors, 1);
    return err;
}

static void assert_contains(const char *text, const char *want, const char *what)
{
    if (!strstr(text, want))
        fail_msg("%s \"%s\" does not say \"%s\"", what, text, want);
}

/* ---- an outage longer than a count of failures ------------------------------------------ */

/* Every Subscribe call fails at once for MANY_FAILURES calls, with a backoff of a few ms:
 * the old bound (10 failures in a row) ended the subscription within about 50 ms. With the
 * default subscribe.retry.timeout.ms (60 s) it keeps reopening, says it is reconnecting
 * (which log stream, where, why), reads every entry once the calls succeed again, and says
 * it is back. */
static void outage_outlasts_count(bool iter)
{
    t_start(iter, 10, "subscribe.retry.backoff.ms", "1", "subscribe.retry.backoff.max.ms", "5",
            NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, 5, 0, 1);
    assert_int_equal(
        varlog_server_fail_next(T.f.srv, STU_PATH_SUBSCRIBE, GRPC_UNAVAILABLE, INJECTED, 1000000),
        VARLOG_OK);
    open_sub(1, VARLOG_GLSN_MAX);
    uint64_t want_calls = MANY_FAILURES;
    if (!test_wait_until(subscribe_calls_reached, &want_calls, bound_ms()))
        fail_msg("%llu Subscribe calls in %lld ms, waiting for %llu",
                 (unsigned long long)varlog_server_call_count(T.f.srv, STU_PATH_SUBSCRIBE),
                 (long long)bound_ms(), (unsigned long long)want_calls);
    assert_no_error();

    varlog_subscription_health_t h = health();
    assert_true(h.reconnecting);
    assert_int_equal(h.log_streams_down, 1);
    assert_int_equal(h.log_stream_id, 1);
    assert_true(h.down_ms >= 0);
    assert_int_equal(h.timeout_ms, 60000);
    assert_int_equal(h.outages, 1);
    assert_contains(h.last_failure, "log stream 1 at 127.0.0.1:", "last_failure");
    assert_contains(h.last_failure, INJECTED, "last_failure");
    assert_int_equal(stu_sink_n(&T.sink), 0);

    varlog_server_clear_faults(T.f.srv);
    receive_ok(5);
    stu_verify(&T.sink, &T.log, 1, 0, 1, 5);
    h = health();
    assert_false(h.reconnecting);
    assert_int_equal(h.log_streams_down, 0);
    assert_int_equal(h.log_stream_id, 0);
    assert_int_equal(h.down_ms, 0);
    assert_int_equal(h.outages, 1);
    assert_contains(h.last_failure, INJECTED, "last_failure after the outage");
    assert_no_error();
    print_message("    %llu Subscribe calls, then 5 entries\n",
                  (unsigned long long)varlog_server_call_count(T.f.srv, STU_PATH_SUBSCRIBE));
    stu_close(&T.sink, &T.sub);
    atu_assert_nothing_bad();
    t_finish();
}

static void test_outage_outlasts_count_handlers(void **state)
{
    (void)state;
    outage_outlasts_count(false);
}

static void test_outage_outlasts_count_iter(void **state)
{
    (void)state;
    outage_outlasts_count(true);
}

static bool clock_passed(void *arg)
{
    return test_now_ms() >= *(const int64_t *)arg;
}

/* ---- the time bound ----------------------------------------------------------------------- */

/* Every Subscribe call fails: the subscription ends with the last failure once
 * subscribe.retry.timeout.ms passed, not before, and not a wait bound after; the text names
 * the bound, the log stream, the address and the server's reason. */
static void timeout_ends(bool iter)
{
    const int64_t limit = 400;
    t_start(iter, 10, "subscribe.retry.timeout.ms", "400", "subscribe.retry.backoff.ms", "1",
            "subscribe.retry.backoff.max.ms", "20", NULL);
    assert_int_equal(
        varlog_server_fail_next(T.f.srv, STU_PATH_SUBSCRIBE, GRPC_UNAVAILABLE, INJECTED, 1000000),
        VARLOG_OK);
    int64_t t0 = test_now_ms();
    open_sub(1, VARLOG_GLSN_MAX);
    char why[512];
    varlog_err_t err = failure_of(why, sizeof(why));
    int64_t took = test_now_ms() - t0;
    if (err != VARLOG_ERR_RPC_UNAVAILABLE)
        fail_msg("failure %s (%s), expected RPC_UNAVAILABLE", varlog_err_name(err), why);
    assert_contains(why, "subscribe.retry.timeout.ms 400", "the failure");
    assert_contains(why, "log stream 1 of topic 1", "the failure");
    assert_contains(why, "at 127.0.0.1:", "the failure");
    assert_contains(why, INJECTED, "the failure");
    uint64_t calls = varlog_server_call_count(T.f.srv, STU_PATH_SUBSCRIBE);
    print_message("    ended after %lld ms and %llu Subscribe calls: %s\n", (long long)took,
                  (unsigned long long)calls, why);
    if (took < limit)
        fail_msg("ended after %lld ms, before the bound of %lld ms", (long long)took,
                 (long long)limit);
    if (took > limit + cf_wait_bound_ms())
        fail_msg("ended after %lld ms, long past the bound of %lld ms", (long long)took,
                 (long long)limit);
    varlog_subscription_health_t h = health();
    assert_true(h.reconnecting);
    assert_int_equal(h.log_stream_id, 1);
    assert_true(h.down_ms >= limit);
    assert_contains(h.last_failure, INJECTED, "last_failure");
    /* down_ms stops growing once the subscription ended */
    int64_t later = test_now_ms() + 30;
    assert_true(test_wait_until(clock_passed, &later, 1000));
    assert_int_equal(health().down_ms, h.down_ms);
    stu_close(&T.sink, &T.sub);
    if (!iter)
        assert_int_equal(T.sink.errors, 1);
    atu_assert_nothing_bad();
    t_finish();
}

static void test_timeout_ends_handlers(void **state)
{
    (void)state;
    timeout_ends(false);
}

static void test_timeout_ends_iter(void **state)
{
    (void)state;
    timeout_ends(true);
}

/* ---- progress resets the clock ------------------------------------------------------------ */

/* Every stream is dropped after one message: each log stream is broken again and again, but
 * each new stream delivers a new entry first (progress). Altogether longer than the bound,
 * each outage shorter: the subscription reads everything. A bound on the total time, or on
 * time since the first failure, would end it. */
static void test_progress_resets_clock(void **state)
{
    (void)state;
    const int64_t backoff = test_under_valgrind() ? 1000 : 100;
    const int64_t limit = 3 * backoff;
    const long n = 8; /* n reopenings at >= backoff / 2 each: more than the bound */
    char b[32], l[32];
    snprintf(b, sizeof(b), "%lld", (long long)backoff);
    snprintf(l, sizeof(l), "%lld", (long long)limit);
    t_start(false, n, "subscribe.retry.timeout.ms", l, "subscribe.retry.backoff.ms", b,
            "subscribe.retry.backoff.max.ms", b, NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, n, 0, 1);
    assert_int_equal(varlog_server_drop_stream_after(T.f.srv, STU_PATH_SUBSCRIBE, 1, -1),
                     VARLOG_OK);
    int64_t t0 = test_now_ms();
    open_sub(1, (uint64_t)n + 1);
    if (!stu_wait_n(&T.sink, n, bound_ms()))
        assert_no_error();
    assert_true(stu_wait_n(&T.sink, n, 0));
    int64_t took = test_now_ms() - t0;
    stu_verify(&T.sink, &T.log, 1, 0, 1, n);
    assert_true(stu_wait_done(&T.sink, bound_ms()));
    assert_int_equal(T.sink.ends, 1);
    assert_int_equal(T.sink.errors, 0);
    varlog_subscription_health_t h = health();
    print_message("    %ld entries in %lld ms through %llu outages (bound %lld ms)\n", n,
                  (long long)took, (unsigned long long)h.outages, (long long)limit);
    if (took <= limit)
        fail_msg("read in %lld ms, within the bound of %lld ms: the test shows nothing",
                 (long long)took, (long long)limit);
    assert_true(h.outages >= (uint64_t)n - 1);
    stu_close(&T.sink, &T.sub);
    t_finish();
}

/* ---- back without an entry ---------------------------------------------------------------- */

static bool back(void *arg)
{
    (void)arg;
    pump();
    return !health().reconnecting;
}

/* Tailing an idle topic: the first Subscribe calls fail, the next one opens and stays open
 * with nothing to send. That stream is progress after 1 s on a live connection: the
 * subscription says it is back without any entry. */
static void test_back_without_entry(void **state)
{
    (void)state;
    t_start(false, 10, "subscribe.retry.backoff.ms", "1", "subscribe.retry.backoff.max.ms", "5",
            NULL);
    assert_int_equal(
        varlog_server_fail_next(T.f.srv, STU_PATH_SUBSCRIBE, GRPC_UNAVAILABLE, INJECTED, 3),
        VARLOG_OK);
    int64_t t0 = test_now_ms();
    open_sub(1, VARLOG_GLSN_MAX);
    uint64_t want_calls = 4;
    assert_true(test_wait_until(subscribe_calls_reached, &want_calls, bound_ms()));
    varlog_subscription_health_t h = health();
    if (h.outages != 1)
        fail_msg("outages %llu after 3 failures", (unsigned long long)h.outages);
    if (!test_wait_until(back, NULL, bound_ms()))
        fail_msg("still reconnecting %lld ms after the calls succeed again", (long long)bound_ms());
    int64_t took = test_now_ms() - t0;
    h = health();
    assert_int_equal(h.outages, 1);
    assert_int_equal(h.down_ms, 0);
    assert_int_equal(stu_sink_n(&T.sink), 0);
    assert_int_equal(varlog_server_call_count(T.f.srv, STU_PATH_SUBSCRIBE), 4);
    if (took < 1000)
        fail_msg("back after %lld ms: a stream must stay open 1 s to count", (long long)took);
    assert_no_error();
    /* and it reads what comes */
    stu_append_n(T.f.client, &T.log, 1, 0, 3, 0, 1);
    receive_ok(3);
    stu_verify(&T.sink, &T.log, 1, 0, 1, 3);
    t_finish();
}

static void test_health_null(void **state)
{
    (void)state;
    varlog_subscription_health_t h;
    assert_int_equal(varlog_subscription_health(NULL, &h), VARLOG_ERR_INVALID_ARG);
    assert_non_null(strstr(varlog_last_error(), "sub is NULL"));
    t_start(false, 1, NULL);
    open_sub(1, VARLOG_GLSN_MAX);
    assert_int_equal(varlog_subscription_health(T.sub, NULL), VARLOG_ERR_INVALID_ARG);
    assert_non_null(strstr(varlog_last_error(), "out is NULL"));
    h = health();
    assert_false(h.reconnecting);
    assert_int_equal(h.outages, 0);
    assert_string_equal(h.last_failure, "");
    assert_int_equal(h.timeout_ms, 60000);
    t_finish();
}

/* An optional argument runs only the tests whose names match it (cmocka's pattern). */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_outage_outlasts_count_handlers, teardown),
        cmocka_unit_test_teardown(test_outage_outlasts_count_iter, teardown),
        cmocka_unit_test_teardown(test_timeout_ends_handlers, teardown),
        cmocka_unit_test_teardown(test_timeout_ends_iter, teardown),
        cmocka_unit_test_teardown(test_progress_resets_clock, teardown),
        cmocka_unit_test_teardown(test_back_without_entry, teardown),
        cmocka_unit_test_teardown(test_health_null, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
