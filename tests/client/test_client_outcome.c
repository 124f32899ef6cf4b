/* The outcome an append reports must be one the caller can trust, also when a step is
 * delayed at the worst moment. Steps are delayed or altered by wrapping internal transport
 * functions at link time (-Wl,--wrap=...): a retry's stream open held until the caller has
 * returned, a half-close that reports the send failure a broken connection would. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "client_fixture.h"
#include "rpc_client.h"
#include "test_support.h"

#define TIMEOUT 30000
#define GRPC_INVALID_ARGUMENT 3
#define GRPC_UNAVAILABLE 14

/* ---- the wrapped transport -------------------------------------------------------------- */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t caller;
    bool hold_other_threads_open; /* opens from threads other than caller wait for release */
    bool released;
    bool fake_close_failure; /* close_send reports the send failure of a broken connection */
    int opens_held;
    int destroys;
} w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

varlog_err_t __real_rpc_stream_open(rpc_client_t *c, const char *target, const char *method,
                                    const rpc_stream_opts_t *opts, const ProtobufCMessage *request,
                                    rpc_stream_t **out);
varlog_err_t __wrap_rpc_stream_open(rpc_client_t *c, const char *target, const char *method,
                                    const rpc_stream_opts_t *opts, const ProtobufCMessage *request,
                                    rpc_stream_t **out);
varlog_err_t __real_rpc_stream_close_send(rpc_stream_t *s);
varlog_err_t __wrap_rpc_stream_close_send(rpc_stream_t *s);
void __real_rpc_stream_destroy(rpc_stream_t *s);
void __wrap_rpc_stream_destroy(rpc_stream_t *s);

varlog_err_t __wrap_rpc_stream_open(rpc_client_t *c, const char *target, const char *method,
                                    const rpc_stream_opts_t *opts, const ProtobufCMessage *request,
                                    rpc_stream_t **out)
{
    pthread_mutex_lock(&w.mu);
    if (w.hold_other_threads_open && !pthread_equal(pthread_self(), w.caller)) {
        w.opens_held++;
        pthread_cond_broadcast(&w.cv);
        int64_t until = test_now_ms() + 60000;
        while (!w.released && test_now_ms() < until) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 10000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&w.cv, &w.mu, &ts);
        }
    }
    pthread_mutex_unlock(&w.mu);
    return __real_rpc_stream_open(c, target, method, opts, request, out);
}

varlog_err_t __wrap_rpc_stream_close_send(rpc_stream_t *s)
{
    varlog_err_t err = __real_rpc_stream_close_send(s);
    pthread_mutex_lock(&w.mu);
    bool fake = w.fake_close_failure;
    pthread_mutex_unlock(&w.mu);
    /* What the transport says when a send batch failed: it cannot know why. */
    return fake && err == VARLOG_OK ? VARLOG_ERR_RPC_UNAVAILABLE : err;
}

void __wrap_rpc_stream_destroy(rpc_stream_t *s)
{
    __real_rpc_stream_destroy(s);
    if (!s)
        return;
    pthread_mutex_lock(&w.mu);
    w.destroys++;
    pthread_cond_broadcast(&w.cv);
    pthread_mutex_unlock(&w.mu);
}

static void wrap_reset(void)
{
    pthread_mutex_lock(&w.mu);
    w.caller = pthread_self();
    w.hold_other_threads_open = false;
    w.released = false;
    w.fake_close_failure = false;
    w.opens_held = 0;
    w.destroys = 0;
    pthread_mutex_unlock(&w.mu);
}

static bool destroys_reached(void *arg)
{
    int want = *(int *)arg;
    pthread_mutex_lock(&w.mu);
    bool ok = w.destroys >= want;
    pthread_mutex_unlock(&w.mu);
    return ok;
}

/* ---- tests -------------------------------------------------------------------------------- */

/* A retry whose stream open is delayed past the caller's deadline: the caller must not be
 * told NOT_APPENDED while that retry can still send. Either it reports MAYBE_APPENDED, or
 * nothing is ever stored. */
static void test_late_retry_never_contradicts_outcome(void **state)
{
    (void)state;
    wrap_reset();
    client_fixture_t f;
    cf_start(&f, 1, 1, "append.retry.backoff.ms", "1", "append.retry.backoff.max.ms", "1",
             "append.deny.ttl.ms", "0", NULL);
    /* The first attempt is refused before storing, so the retry is what matters. */
    assert_int_equal(
        varlog_server_fail_next(f.srv, CF_PATH_APPEND, GRPC_UNAVAILABLE, "not primary replica", 1),
        VARLOG_OK);
    pthread_mutex_lock(&w.mu);
    w.hold_other_threads_open = true;
    pthread_mutex_unlock(&w.mu);

    varlog_record_t rec = cf_record("late");
    varlog_outcome_t outcome = VARLOG_APPENDED;
    int64_t timeout = test_under_valgrind() ? 3000 : 1000;
    varlog_err_t err = varlog_append_to(f.client, 1, 1, &rec, 1, timeout, NULL, &outcome);
    assert_int_equal(err, VARLOG_ERR_TIMED_OUT);
    pthread_mutex_lock(&w.mu);
    int held = w.opens_held;
    w.released = true;
    pthread_cond_broadcast(&w.cv);
    pthread_mutex_unlock(&w.mu);
    assert_int_equal(held, 1); /* the retry did reach its open before the deadline */

    /* Let the retry finish whatever it does, then compare with what the server holds. */
    int want = 2;
    assert_true(test_wait_until(destroys_reached, &want, cf_wait_bound_ms() * 3));
    uint64_t stored = varlog_server_stored_bytes(f.srv);
    if (stored > 0)
        assert_int_equal(outcome, VARLOG_MAYBE_APPENDED);
    /* The retry was on its way when the deadline struck: "maybe" is the honest answer. */
    assert_int_equal(outcome, VARLOG_MAYBE_APPENDED);
    cf_stop(&f);
}

/* A send that fails because the call already failed must be judged by the call's final
 * status (here a refusal of the request), not by the transport's guess "unavailable",
 * which would deny the log stream and retry a request the server refused as such. */
static void test_failed_send_classified_by_final_status(void **state)
{
    (void)state;
    wrap_reset();
    client_fixture_t f;
    cf_start(&f, 1, 1, "append.retry.backoff.ms", "1", NULL);
    assert_int_equal(
        varlog_server_fail_next(f.srv, CF_PATH_APPEND, GRPC_INVALID_ARGUMENT, "no payload", 1),
        VARLOG_OK);
    pthread_mutex_lock(&w.mu);
    w.fake_close_failure = true;
    pthread_mutex_unlock(&w.mu);
    varlog_record_t rec = cf_record("x");
    varlog_outcome_t outcome = VARLOG_APPENDED;
    varlog_err_t err = varlog_append_to(f.client, 1, 1, &rec, 1, TIMEOUT, NULL, &outcome);
    pthread_mutex_lock(&w.mu);
    w.fake_close_failure = false;
    pthread_mutex_unlock(&w.mu);
    assert_int_equal(err, VARLOG_ERR_RPC_INVALID_ARGUMENT);
    assert_int_equal(outcome, VARLOG_NOT_APPENDED);
    varlog_client_stats_t s = cf_stats(f.client);
    assert_int_equal(s.append_attempts, 1);
    assert_int_equal(s.denials, 0);
    assert_int_equal(varlog_server_stored_bytes(f.srv), 0);
    cf_stop(&f);
}

/* error.h: a successful call leaves the thread's last error alone, also when the append
 * succeeded only after a failed attempt. */
static void test_success_after_retry_keeps_last_error(void **state)
{
    (void)state;
    wrap_reset();
    client_fixture_t f;
    cf_start(&f, 1, 1, "append.retry.backoff.ms", "1", "append.deny.ttl.ms", "0", NULL);
    varlog_record_t rec = cf_record("x");
    assert_int_equal(varlog_append(f.client, 1, NULL, 1, TIMEOUT, NULL, NULL),
                     VARLOG_ERR_INVALID_ARG);
    char before[512];
    snprintf(before, sizeof(before), "%s", varlog_last_error());
    assert_non_null(strstr(before, "records is NULL"));
    assert_int_equal(
        varlog_server_fail_next(f.srv, CF_PATH_APPEND, GRPC_UNAVAILABLE, "not primary replica", 1),
        VARLOG_OK);
    assert_int_equal(varlog_append_to(f.client, 1, 1, &rec, 1, TIMEOUT, NULL, NULL), VARLOG_OK);
    assert_int_equal(cf_stats(f.client).append_attempts, 2);
    assert_string_equal(varlog_last_error(), before);
    cf_stop(&f);
}

/* Topic ids start at 1 like log stream ids: both are refused as bad input alike. */
static void test_bad_topic_id_is_invalid_arg(void **state)
{
    (void)state;
    wrap_reset();
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    varlog_record_t rec = cf_record("x");
    int32_t bad[] = {0, -1};
    for (size_t i = 0; i < 2; i++) {
        varlog_outcome_t outcome = VARLOG_APPENDED;
        assert_int_equal(varlog_append(f.client, bad[i], &rec, 1, TIMEOUT, NULL, &outcome),
                         VARLOG_ERR_INVALID_ARG);
        assert_int_equal(outcome, VARLOG_NOT_APPENDED);
        assert_non_null(strstr(varlog_last_error(), "topic id"));
        assert_int_equal(varlog_append_to(f.client, bad[i], 1, &rec, 1, TIMEOUT, NULL, &outcome),
                         VARLOG_ERR_INVALID_ARG);
    }
    assert_int_equal(varlog_server_call_count(f.srv, CF_PATH_METADATA), 1); /* the open's */
    cf_stop(&f);
}

/* timeout -1 means "bounded by the retries": each attempt has a bound of its own, so a hung
 * node cannot hold the call for ever. The attempt that hits the bound had sent its request:
 * MAYBE_APPENDED, and the log stream is denied as unresponsive. */
static void test_attempt_bound_with_no_deadline(void **state)
{
    (void)state;
    wrap_reset();
    client_fixture_t f;
    cf_start(&f, 1, 1, "append.attempt.timeout.ms", "300", "append.retries", "0",
             "append.resolve.maybe.appended", "false", NULL);
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_APPEND, 60000), VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    varlog_outcome_t outcome = VARLOG_APPENDED;
    varlog_err_t err = varlog_append_to(f.client, 1, 1, &rec, 1, -1, NULL, &outcome);
    assert_int_equal(err, VARLOG_ERR_RPC_DEADLINE_EXCEEDED);
    assert_int_equal(outcome, VARLOG_MAYBE_APPENDED);
    assert_non_null(strstr(varlog_last_error(), "append.attempt.timeout.ms"));
    assert_int_equal(cf_stats(f.client).denials, 1);
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_APPEND, 0), VARLOG_OK);
    cf_stop(&f);
}

/* A failure that is not the attempt's bound is reported as itself: the text once said "no
 * answer within append.attempt.timeout.ms" after any failure (a broken pipe, a refusal). */
static void test_attempt_failure_reported_as_itself(void **state)
{
    (void)state;
    wrap_reset();
    client_fixture_t f;
    cf_start(&f, 1, 1, "append.retries", "0", "append.resolve.maybe.appended", "false", NULL);
    assert_int_equal(
        varlog_server_fail_next(f.srv, CF_PATH_APPEND, GRPC_UNAVAILABLE, "injected refusal", 1),
        VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    assert_int_equal(varlog_append_to(f.client, 1, 1, &rec, 1, TIMEOUT, NULL, NULL),
                     VARLOG_ERR_RPC_UNAVAILABLE);
    assert_non_null(strstr(varlog_last_error(), "injected refusal"));
    if (strstr(varlog_last_error(), "no answer within"))
        fail_msg("a refusal reported as a timeout: %s", varlog_last_error());
    cf_stop(&f);
}

/* An append to a topic the view does not know asks the metadata repository; when that
 * lookup fails (twice: a failed member is asked once more through discovery), its failure
 * is the answer, not UNKNOWN_TOPIC. */
static void test_failed_lookup_is_reported(void **state)
{
    (void)state;
    wrap_reset();
    client_fixture_t f;
    cf_start(&f, 1, 1, "metadata.call.timeout.ms", "2000", NULL);
    assert_int_equal(
        varlog_server_fail_next(f.srv, CF_PATH_METADATA, GRPC_UNAVAILABLE, "injected outage", 2),
        VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    varlog_err_t err = varlog_append(f.client, 7, &rec, 1, TIMEOUT, NULL, NULL);
    assert_int_not_equal(err, VARLOG_ERR_UNKNOWN_TOPIC);
    assert_int_equal(err, VARLOG_ERR_RPC_UNAVAILABLE);
    assert_non_null(strstr(varlog_last_error(), "injected outage"));
    /* With the metadata reachable, an unknown topic is still reported as such. */
    assert_int_equal(varlog_append(f.client, 7, &rec, 1, TIMEOUT, NULL, NULL),
                     VARLOG_ERR_UNKNOWN_TOPIC);
    cf_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_late_retry_never_contradicts_outcome),
        cmocka_unit_test(test_failed_send_classified_by_final_status),
        cmocka_unit_test(test_success_after_retry_keeps_last_error),
        cmocka_unit_test(test_bad_topic_id_is_invalid_arg),
        cmocka_unit_test(test_attempt_bound_with_no_deadline),
        cmocka_unit_test(test_attempt_failure_reported_as_itself),
        cmocka_unit_test(test_failed_lookup_is_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
