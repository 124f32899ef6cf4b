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

#include <cmocka.h>

#include "appender_fixture.h"
#include "test_support.h"

#define TIMEOUT 30000

/* A tracked call, with when its callback ran and its text. */
typedef struct tcall {
    call_t c; /* first: track_cb's opaque */
    atomic_llong at_ms;
    char text[512];
} tcall_t;

static void timed_cb(const varlog_append_result_t *r, void *opaque)
{
    tcall_t *tc = opaque;
    snprintf(tc->text, sizeof(tc->text), "%s", r->errtext ? r->errtext : "");
    atomic_store(&tc->at_ms, test_now_ms());
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
        assert_int_equal(t[i].c.err, VARLOG_ERR_TIMED_OUT);
        if (!strstr(t[i].text, named))
            fail_msg("call %d: %s", i, t[i].text);
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
         * pipe" once sent): MAYBE_APPENDED, honestly, and not retried. Every other call
         * waits out its deadline. */
        bool racing = t[i].c.err == VARLOG_ERR_RPC_UNAVAILABLE &&
                      t[i].c.outcome == VARLOG_MAYBE_APPENDED && strstr(t[i].text, "(attempt 1)");
        bool expired = t[i].c.err == VARLOG_ERR_TIMED_OUT && t[i].c.outcome == VARLOG_NOT_APPENDED;
        if (!racing && !expired)
            fail_msg("call %d: %s, %s: %s", i, varlog_err_name(t[i].c.err),
                     varlog_outcome_name(t[i].c.outcome), t[i].text);
        timed_out += expired;
        int64_t at = atomic_load(&t[i].at_ms) - t0;
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
    fx_start(&x, 1, 1, "appender.delivery.timeout.ms", "0", "append.retries", "2",
             "append.retry.backoff.ms", "10", "append.retry.backoff.max.ms", "50",
             "appender.batch.max.records", "1", "appender.linger.ms", "0", NULL);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stalled_node_times_out),
        cmocka_unit_test(test_dead_server_bounded_by_delivery_timeout),
        cmocka_unit_test(test_unreachable_fails_waiting_batches_together),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
