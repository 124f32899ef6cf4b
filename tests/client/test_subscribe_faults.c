/* Subscriptions under faults of the embedded server (issue 11): streams dropped mid-way and
 * opened again (the delivered sequence is still every GLSN once, in order), a server stop
 * and restart while tailing, failures past subscribe.retries when set (on_error exactly
 * once, next returns the error again and again; the time bound, subscribe.retry.timeout.ms,
 * is test_subscribe_reconnect's), trimmed ranges (a real trim and an injected
 * OutOfRange with Varlog's details) for both orders.
 *
 * Handlers run on the subscription's thread, where a cmocka assertion cannot stop the test:
 * they note what is wrong (atu_note_bad) and the test thread asserts that nothing was noted. */
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

#include <cmocka.h>

#include "appender_test_util.h"
#include "client_fixture.h"
#include "subscribe_test_util.h"
#include "test_support.h"
#include "varlog/subscribe.h"

#define GRPC_UNAVAILABLE 14
#define GRPC_OUT_OF_RANGE 11

typedef struct t {
    client_fixture_t f;
    stu_log_t log;
    stu_sink_t sink;
    varlog_subscription_t *sub;
    bool started;
} t_t;

/* Not on a test's stack: the teardown of a failed test still reaches it. */
static t_t T;

static void t_start(int32_t log_streams, long cap, ...)
{
    memset(&T, 0, sizeof(T));
    va_list ap;
    va_start(ap, cap);
    cf_start_adjusted(&T.f, 1, log_streams, atu_conf_adjust, &ap, NULL);
    va_end(ap);
    stu_log_init(&T.log, (size_t)cap + 64);
    stu_sink_init(&T.sink, cap);
    atu_bad_reset();
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

/* Opens T.sub on [begin, end) of topic 1 in the given form. */
static void open_sub(bool iter, uint64_t begin, uint64_t end)
{
    varlog_err_t rc;
    if (iter) {
        rc = varlog_subscribe_iter(T.f.client, 1, begin, end, &T.sub);
    } else {
        varlog_subscribe_handlers_t h = stu_handlers(&T.sink);
        rc = varlog_subscribe(T.f.client, 1, begin, end, &h, &T.sub);
    }
    if (rc != VARLOG_OK)
        fail_msg("subscribe: %s: %s", varlog_err_name(rc), varlog_last_error());
}

/* Waits for want entries in either form; returns OK or what stopped it. */
static varlog_err_t receive(bool iter, long want)
{
    if (iter)
        return stu_drain(T.sub, &T.sink, want, bound_ms());
    return stu_wait_n(&T.sink, want, bound_ms()) ? VARLOG_OK : VARLOG_ERR_TIMED_OUT;
}

static void receive_ok(bool iter, long want)
{
    varlog_err_t rc = receive(iter, want);
    if (rc != VARLOG_OK) {
        pthread_mutex_lock(&T.sink.sync.mu);
        long errors = T.sink.errors;
        varlog_err_t err = T.sink.err;
        char why[512];
        memcpy(why, T.sink.why, sizeof(why));
        pthread_mutex_unlock(&T.sink.sync.mu);
        fail_msg("%s after %ld of %ld entries: %s%s%s%s", varlog_err_name(rc), stu_sink_n(&T.sink),
                 want, iter ? varlog_last_error() : "", errors ? "; on_error " : "",
                 errors ? varlog_err_name(err) : "", errors ? why : "");
    }
}

/* The subscription's failure, in either form: on_error's (exactly once, nothing after it) or
 * what next returns (again on later calls); *why receives its text. */
static varlog_err_t failure_of(bool iter, char *why, size_t why_size)
{
    if (iter) {
        varlog_entry_t e;
        varlog_err_t rc = VARLOG_ERR_TIMED_OUT;
        int64_t deadline = test_now_ms() + bound_ms();
        while (rc == VARLOG_ERR_TIMED_OUT && test_now_ms() < deadline)
            rc = varlog_subscription_next(T.sub, 200, &e);
        if (rc == VARLOG_OK)
            fail_msg("next gave an entry (glsn %llu) where a failure was due",
                     (unsigned long long)e.meta.glsn);
        snprintf(why, why_size, "%s", varlog_last_error());
        if (rc != VARLOG_ERR_TIMED_OUT) {
            /* sticky */
            assert_int_equal(varlog_subscription_next(T.sub, 0, &e), rc);
            assert_int_equal(varlog_subscription_next(T.sub, 50, &e), rc);
        }
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

/* ---- stream drops ------------------------------------------------------------------------ */

/* Every Subscribe stream is dropped after 7 messages, the first 12 of them: each log stream
 * is opened again from its next undelivered GLSN, entries a new stream repeats are dropped,
 * and the sequence delivered is still exactly [1, total], each once. Stored range first. */
static void drops_stored(bool iter)
{
    long total = test_scale(600, 5);
    t_start(2, total, "subscribe.retry.backoff.ms", "1", "subscribe.retry.backoff.max.ms", "20",
            NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, total, 0, 1);
    assert_int_equal(varlog_server_drop_stream_after(T.f.srv, STU_PATH_SUBSCRIBE, 7, 12),
                     VARLOG_OK);
    open_sub(iter, 1, (uint64_t)total + 1);
    receive_ok(iter, total);
    stu_verify(&T.sink, &T.log, 1, 0, 1, total);
    if (iter) {
        varlog_entry_t e;
        assert_int_equal(varlog_subscription_next(T.sub, bound_ms(), &e), VARLOG_ERR_END);
    } else {
        assert_true(stu_wait_done(&T.sink, bound_ms()));
        assert_int_equal(T.sink.ends, 1);
        assert_int_equal(T.sink.errors, 0);
    }
    varlog_subscription_stats_t st = stu_stats(T.sub);
    uint64_t calls = varlog_server_call_count(T.f.srv, STU_PATH_SUBSCRIBE);
    print_message("    %ld entries: %llu Subscribe calls, %llu resubscribes, %llu duplicates\n",
                  total, (unsigned long long)calls, (unsigned long long)st.resubscribes,
                  (unsigned long long)st.duplicates);
    if (st.resubscribes < 1)
        fail_msg("stats.resubscribes %llu after %llu Subscribe calls",
                 (unsigned long long)st.resubscribes, (unsigned long long)calls);
    assert_true(calls > 2);
    assert_int_equal(st.entries, (uint64_t)total);
    stu_close(&T.sink, &T.sub);
    t_finish();
}

static void test_drops_stored_handlers(void **state)
{
    (void)state;
    drops_stored(false);
}

static void test_drops_stored_iter(void **state)
{
    (void)state;
    drops_stored(true);
}

/* Tailing while two threads append and every stream is dropped after 5 messages until the
 * faults are cleared: exactly the committed GLSNs, once each, in order. */
static void test_drops_while_tailing(void **state)
{
    (void)state;
    stu_producer_t p[2];
    memset(p, 0, sizeof(p));
    long total = 0;
    for (int i = 0; i < 2; i++) {
        p[i].topic = 1;
        p[i].id = i + 1;
        p[i].calls = test_scale(200, 5);
        p[i].max_batch = 3;
        total += stu_producer_records(&p[i]);
    }
    t_start(2, total, "subscribe.retry.backoff.ms", "1", "subscribe.retry.backoff.max.ms", "20",
            NULL);
    assert_int_equal(varlog_server_drop_stream_after(T.f.srv, STU_PATH_SUBSCRIBE, 5, -1),
                     VARLOG_OK);
    open_sub(false, 1, VARLOG_GLSN_MAX);
    for (int i = 0; i < 2; i++) {
        p[i].client = T.f.client;
        p[i].log = &T.log;
        stu_producer_start(&p[i]);
    }
    /* half of it under drops, the rest after they stopped */
    assert_true(stu_wait_n(&T.sink, total / 2, bound_ms()));
    varlog_server_clear_faults(T.f.srv);
    for (int i = 0; i < 2; i++)
        stu_producer_join(&p[i]);
    receive_ok(false, total);
    stu_verify(&T.sink, &T.log, 1, 0, 1, total);
    varlog_subscription_stats_t st = stu_stats(T.sub);
    assert_true(st.resubscribes >= 1);
    assert_int_equal(T.sink.ends + T.sink.errors, 0);
    stu_close(&T.sink, &T.sub);
    t_finish();
}

/* SubscribeTo dropped after 4 messages a few times: LLSNs 1..n once each. */
static void test_drops_subscribe_to(void **state)
{
    (void)state;
    long n = 60;
    t_start(2, 2 * n, "subscribe.retry.backoff.ms", "1", "subscribe.retry.backoff.max.ms", "20",
            NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, 2 * n, 0, 1);
    long in_ls2 = stu_log_count_ls(&T.log, 2);
    assert_int_equal(varlog_server_drop_stream_after(T.f.srv, STU_PATH_SUBSCRIBE_TO, 4, 5),
                     VARLOG_OK);
    T.sink.by_llsn = true;
    assert_int_equal(varlog_subscribe_to_iter(T.f.client, 1, 2, 1, (uint64_t)in_ls2 + 1, &T.sub),
                     VARLOG_OK);
    receive_ok(true, in_ls2);
    varlog_entry_t e;
    assert_int_equal(varlog_subscription_next(T.sub, bound_ms(), &e), VARLOG_ERR_END);
    stu_verify(&T.sink, &T.log, 1, 2, 1, in_ls2);
    assert_true(stu_stats(T.sub).resubscribes >= 1);
    t_finish();
}

/* ---- server restart --------------------------------------------------------------------- */

static bool resubscribed(void *arg)
{
    /* The iterator form has no thread: its streams are opened again by the caller of next. */
    if (*(bool *)arg) {
        varlog_entry_t e;
        if (varlog_subscription_next(T.sub, 20, &e) == VARLOG_OK)
            stu_sink_add(&T.sink, &e);
    }
    varlog_subscription_stats_t st;
    return varlog_subscription_stats(T.sub, &st) == VARLOG_OK && st.resubscribes > 0;
}

/* The server stops and restarts while a subscription tails: delivery resumes, and what
 * arrives is every GLSN once, those appended before the stop and after the restart. */
static void restart(bool iter)
{
    long before = 50, after = 50;
    /* subscribe.retry.timeout.ms (60 s) outlasts the channel's reconnect delay */
    t_start(2, before + after, "subscribe.retry.backoff.ms", "5", "subscribe.retry.backoff.max.ms",
            "100", "append.retries", "50", "append.retry.backoff.ms", "5",
            "append.retry.backoff.max.ms", "100", NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, before, 0, 1);
    open_sub(iter, 1, VARLOG_GLSN_MAX);
    receive_ok(iter, before);
    assert_int_equal(varlog_server_stop(T.f.srv), VARLOG_OK);
    /* the outage is felt: the streams broke and are being opened again */
    bool felt = test_wait_until(resubscribed, &iter, bound_ms());
    assert_int_equal(varlog_server_restart(T.f.srv), VARLOG_OK);
    stu_append_n(T.f.client, &T.log, 1, 0, after, 0, 2);
    receive_ok(iter, before + after);
    stu_verify(&T.sink, &T.log, 1, 0, 1, before + after);
    assert_int_equal(T.sink.ends + T.sink.errors, 0);
    if (!felt)
        fail_msg("stats.resubscribes still 0 %lld ms after the server stopped",
                 (long long)bound_ms());
    stu_close(&T.sink, &T.sub);
    t_finish();
}

static void test_restart_handlers(void **state)
{
    (void)state;
    restart(false);
}

static void test_restart_iter(void **state)
{
    (void)state;
    restart(true);
}

/* ---- retries exhausted ------------------------------------------------------------------ */

/* Every Subscribe call fails with UNAVAILABLE: after subscribe.retries reopenings (set; by
 * default there is no count) the subscription ends with that error, once (on_error) or for
 * good (next), having opened the log stream's stream 1 + retries times, and says which bound
 * ended it; nothing is delivered. */
static void retries_exhausted(bool iter)
{
    t_start(1, 10, "subscribe.retries", "2", "subscribe.retry.backoff.ms", "1",
            "subscribe.retry.backoff.max.ms", "5", NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, 5, 0, 1);
    assert_int_equal(varlog_server_fail_next(T.f.srv, STU_PATH_SUBSCRIBE, GRPC_UNAVAILABLE,
                                             "injected unavailable", 1000),
                     VARLOG_OK);
    open_sub(iter, 1, 6);
    char why[512];
    varlog_err_t err = failure_of(iter, why, sizeof(why));
    if (err != VARLOG_ERR_RPC_UNAVAILABLE)
        fail_msg("failure %s (%s), expected RPC_UNAVAILABLE", varlog_err_name(err), why);
    if (!strstr(why, "subscribe.retries 2") || !strstr(why, "injected unavailable"))
        fail_msg("the failure \"%s\" does not name the bound and the last failure", why);
    assert_int_equal(varlog_server_call_count(T.f.srv, STU_PATH_SUBSCRIBE), 3);
    assert_int_equal(stu_sink_n(&T.sink), 0);
    print_message("    %s: %s\n", varlog_err_name(err), why);
    stu_close(&T.sink, &T.sub);
    assert_int_equal(T.sink.errors, iter ? 0 : 1);
    atu_assert_nothing_bad();
    t_finish();
}

static void test_retries_exhausted_handlers(void **state)
{
    (void)state;
    retries_exhausted(false);
}

static void test_retries_exhausted_iter(void **state)
{
    (void)state;
    retries_exhausted(true);
}

/* Entries delivered, then the stream breaks and every reopening fails: the first 10 GLSNs
 * arrive, then the failure, exactly once; no entry after it. */
static void test_failure_after_entries(void **state)
{
    (void)state;
    t_start(1, 40, "subscribe.retries", "3", "subscribe.retry.backoff.ms", "1",
            "subscribe.retry.backoff.max.ms", "5", NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, 30, 0, 1);
    assert_int_equal(varlog_server_drop_stream_after(T.f.srv, STU_PATH_SUBSCRIBE, 10, 1),
                     VARLOG_OK);
    T.sink.block_at = 1;
    open_sub(false, 1, 31);
    /* the first stream passed its failure check: fail the ones after it */
    assert_true(atu_wait_true(&T.sink.sync, &T.sink.blocked, bound_ms()));
    assert_int_equal(varlog_server_fail_next(T.f.srv, STU_PATH_SUBSCRIBE, GRPC_UNAVAILABLE,
                                             "injected unavailable", 1000),
                     VARLOG_OK);
    atu_set_true(&T.sink.sync, &T.sink.release);
    char why[512];
    varlog_err_t err = failure_of(false, why, sizeof(why));
    if (err != VARLOG_ERR_RPC_UNAVAILABLE)
        fail_msg("failure %s (%s), expected RPC_UNAVAILABLE", varlog_err_name(err), why);
    stu_verify(&T.sink, &T.log, 1, 0, 1, 10);
    /* the first stream, then retries or 1 + retries failing ones: whether the first stream's
     * break counts against subscribe.retries is not said (it had delivered entries) */
    uint64_t calls = varlog_server_call_count(T.f.srv, STU_PATH_SUBSCRIBE);
    if (calls < 4 || calls > 5)
        fail_msg("%llu Subscribe calls with subscribe.retries 3", (unsigned long long)calls);
    stu_close(&T.sink, &T.sub);
    assert_int_equal(T.sink.errors, 1);
    assert_int_equal(T.sink.ends, 0);
    t_finish();
}

/* ---- trimmed ranges ---------------------------------------------------------------------- */

/* After a trim up to GLSN 50: a range beginning in the trimmed prefix ends with TRIMMED, one
 * beginning after it is read normally. */
static void trimmed(bool iter)
{
    t_start(2, 100, NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, 100, 0, 1);
    stu_trim_raw(T.f.srv, 1, 50);
    open_sub(iter, 10, 60);
    char why[512];
    varlog_err_t err = failure_of(iter, why, sizeof(why));
    if (err != VARLOG_ERR_TRIMMED)
        fail_msg("subscription of [10, 60) after trimming to 50: %s (%s), expected TRIMMED",
                 varlog_err_name(err), why);
    assert_int_equal(stu_sink_n(&T.sink), 0);
    stu_close(&T.sink, &T.sub);
    stu_sink_free(&T.sink);
    stu_sink_init(&T.sink, 100);
    open_sub(iter, 51, 61);
    receive_ok(iter, 10);
    stu_verify(&T.sink, &T.log, 1, 0, 51, 10);
    stu_close(&T.sink, &T.sub);
    t_finish();
}

static void test_trimmed_handlers(void **state)
{
    (void)state;
    trimmed(false);
}

static void test_trimmed_iter(void **state)
{
    (void)state;
    trimmed(true);
}

/* A storage node's OutOfRange "trimmed" answer, injected with Varlog's error details, ends
 * the subscription with TRIMMED at once: it is not a failure that a retry repairs (the
 * injection covers one call only; a retry would succeed and deliver). */
static void test_trimmed_injected(void **state)
{
    (void)state;
    t_start(1, 20, "subscribe.retry.backoff.ms", "1", NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, 10, 0, 1);
    const char *details[] = {"log stream: logstream: trimmed", "logstream: trimmed"};
    assert_int_equal(varlog_server_fail_next_details(T.f.srv, STU_PATH_SUBSCRIBE, GRPC_OUT_OF_RANGE,
                                                     "log stream: logstream: trimmed", details, 2,
                                                     1),
                     VARLOG_OK);
    open_sub(true, 1, 11);
    char why[512];
    varlog_err_t err = failure_of(true, why, sizeof(why));
    if (err != VARLOG_ERR_TRIMMED)
        fail_msg("injected trimmed answer: %s (%s), expected TRIMMED", varlog_err_name(err), why);
    assert_int_equal(stu_sink_n(&T.sink), 0);
    assert_int_equal(varlog_server_call_count(T.f.srv, STU_PATH_SUBSCRIBE), 1);
    t_finish();
}

/* SubscribeTo from LLSN 1 after the first entries were trimmed: TRIMMED; from the first live
 * LLSN on: read normally. */
static void test_trimmed_subscribe_to(void **state)
{
    (void)state;
    t_start(1, 40, NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, 30, 0, 1);
    stu_trim_raw(T.f.srv, 1, 10);
    assert_int_equal(varlog_subscribe_to_iter(T.f.client, 1, 1, 1, 20, &T.sub), VARLOG_OK);
    char why[512];
    varlog_err_t err = failure_of(true, why, sizeof(why));
    if (err != VARLOG_ERR_TRIMMED)
        fail_msg("SubscribeTo [1, 20) after trimming to 10: %s (%s), expected TRIMMED",
                 varlog_err_name(err), why);
    varlog_subscription_close(&T.sub);
    T.sink.by_llsn = true;
    assert_int_equal(varlog_subscribe_to_iter(T.f.client, 1, 1, 11, 21, &T.sub), VARLOG_OK);
    receive_ok(true, 10);
    stu_verify(&T.sink, &T.log, 1, 1, 11, 10);
    t_finish();
}

/* An optional argument runs only the tests whose names match it (cmocka's pattern). */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_drops_stored_handlers, teardown),
        cmocka_unit_test_teardown(test_drops_stored_iter, teardown),
        cmocka_unit_test_teardown(test_drops_while_tailing, teardown),
        cmocka_unit_test_teardown(test_drops_subscribe_to, teardown),
        cmocka_unit_test_teardown(test_restart_handlers, teardown),
        cmocka_unit_test_teardown(test_restart_iter, teardown),
        cmocka_unit_test_teardown(test_retries_exhausted_handlers, teardown),
        cmocka_unit_test_teardown(test_retries_exhausted_iter, teardown),
        cmocka_unit_test_teardown(test_failure_after_entries, teardown),
        cmocka_unit_test_teardown(test_trimmed_handlers, teardown),
        cmocka_unit_test_teardown(test_trimmed_iter, teardown),
        cmocka_unit_test_teardown(test_trimmed_injected, teardown),
        cmocka_unit_test_teardown(test_trimmed_subscribe_to, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
