/* Gaps in a topic-wide subscription (issue 18, and issue 37's faithful range ends): a GLSN
 * the merge waits for held by a log stream the subscription's client does not know yet,
 * found without anyone refreshing that client (the fixture's periodic refresh is off); a gap
 * no log stream fills, passed over; a sealed topic that grows. Also where the log streams
 * the subscription reads keep their streams open without sending, as a real node does
 * (wire protocol 6.3; the embedded server does the same, test_server_log_io). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "client_fixture.h"
#include "subscribe_fixture.h"
#include "subscribe_test_util.h"
#include "varlog/subscribe.h"

/* Issue 18, point 2.1: a log stream added after the subscription started, which this client
 * has not heard of, holds the GLSN the merge waits for, while a known log stream already
 * holds a later one. GLSNs are dense: the subscription must find the new log stream (fresh
 * metadata) and deliver GLSN 1 before GLSN 2, without anyone calling varlog_client_refresh
 * on its client (whose periodic refresh is off). It once passed over GLSN 1 for good. */
static void test_gap_from_unknown_log_stream(void **state)
{
    (void)state;
    t_start(1, 1, 100, NULL);
    subscribe_iter_ok(1, 1, VARLOG_GLSN_MAX, &T.sub2);
    varlog_entry_t e;
    assert_int_equal(varlog_subscription_next(T.sub2, 0, &e), VARLOG_ERR_TIMED_OUT);
    int32_t ls = 0;
    assert_int_equal(varlog_server_add_log_stream(T.f.srv, 1, &ls), VARLOG_OK);
    assert_int_equal(ls, 2);
    varlog_client_t *other = other_client();
    stu_append_n(other, &T.log, 1, 2, 1, 0, 2); /* GLSN 1, in the log stream it does not know */
    stu_append_n(other, &T.log, 1, 1, 1, 0, 3); /* GLSN 2 */
    varlog_client_destroy(other);
    drain_ok(T.sub2, &T.sink2, 2);
    stu_verify(&T.sink2, &T.log, 1, 0, 1, 2);
    assert_int_equal(stu_stats(T.sub2).log_streams, 2);
    t_finish();
}

/* As above for a bounded range that the log streams the subscription knows end short of:
 * the rest is in the log stream added since, not the end of the subscription. */
static void test_bounded_gap_from_unknown_log_stream(void **state)
{
    (void)state;
    t_start(1, 1, 100, NULL);
    int32_t ls = 0;
    assert_int_equal(varlog_server_add_log_stream(T.f.srv, 1, &ls), VARLOG_OK);
    varlog_client_t *other = other_client();
    stu_append_n(other, &T.log, 1, 2, 2, 0, 2); /* GLSNs 1 and 2 */
    stu_append_n(other, &T.log, 1, 1, 1, 0, 3); /* GLSN 3 */
    varlog_client_destroy(other);
    subscribe_ok(1, 1, 3, &T.sink, &T.sub); /* its client knows log stream 1 only */
    assert_ended(&T.sink);
    stu_verify(&T.sink, &T.log, 1, 0, 1, 2);
    t_finish();
}

/* Tailing a topic whose only log stream is sealed (as the client's metadata shows): entries
 * come from a log stream added since, which no gap announces. The subscription reads it
 * without anyone refreshing its client (whose periodic refresh is off). */
static void test_sealed_topic_grows(void **state)
{
    (void)state;
    t_start(1, 1, 100, "metadata.recheck.interval.ms", "100", NULL);
    assert_int_equal(varlog_server_seal(T.f.srv, 1, 1), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(T.f.client, -1), VARLOG_OK);
    subscribe_iter_ok(1, 1, VARLOG_GLSN_MAX, &T.sub2);
    varlog_entry_t e;
    assert_int_equal(varlog_subscription_next(T.sub2, 0, &e), VARLOG_ERR_TIMED_OUT);
    int32_t ls = 0;
    assert_int_equal(varlog_server_add_log_stream(T.f.srv, 1, &ls), VARLOG_OK);
    varlog_client_t *other = other_client();
    stu_append_n(other, &T.log, 1, ls, 3, 0, 2);
    varlog_client_destroy(other);
    drain_ok(T.sub2, &T.sink2, 3);
    stu_verify(&T.sink2, &T.log, 1, 0, 1, 3);
    t_finish();
}

/* A gap that no log stream of the topic fills (fresh metadata shows none unknown to the
 * subscription) is passed over: here the subscription starts at GLSN 0, which no entry has. */
static void test_gap_below_first_entry(void **state)
{
    (void)state;
    t_start(1, 2, 100, NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, 6, 0, 1);
    subscribe_iter_ok(1, 0, 7, &T.sub2);
    drain_ok(T.sub2, &T.sink2, 6);
    stu_verify(&T.sink2, &T.log, 1, 0, 1, 6);
    t_finish();
}

/* A node keeps a GLSN range's stream open when its log stream holds entries past the range
 * but not the range's end - 1. Log stream 1, the one the subscription's client knows, holds
 * GLSNs 1 and 4; log stream 2, added since, 2 and 3. Of [1, 4) log stream 1 sends GLSN 1,
 * then nothing, and does not end: the merge waits for GLSN 2 without a head, which the gap
 * lookup does not cover (it needs every log stream to hold a head or to have ended). */
static void test_gap_behind_an_open_stream(void **state)
{
    (void)state;
    t_start(1, 1, 100, NULL);
    int32_t ls = 0;
    assert_int_equal(varlog_server_add_log_stream(T.f.srv, 1, &ls), VARLOG_OK);
    varlog_client_t *other = other_client();
    stu_append_n(other, &T.log, 1, 1, 1, 0, 2);  /* GLSN 1 */
    stu_append_n(other, &T.log, 1, ls, 2, 0, 2); /* GLSNs 2 and 3 */
    stu_append_n(other, &T.log, 1, 1, 1, 0, 3);  /* GLSN 4 */
    varlog_client_destroy(other);
    subscribe_ok(1, 1, 4, &T.sink, &T.sub);
    assert_ended(&T.sink);
    stu_verify(&T.sink, &T.log, 1, 0, 1, 3);
    assert_int_equal(stu_stats(T.sub).log_streams, 2);
    t_finish();
}

/* As above with a head: log stream 2 holds GLSN 4, the range's end - 1, and ends its
 * stream; log stream 1 holds 1 and 5 and keeps its stream open; log stream 3, added since,
 * holds 2 and 3. The merge waits for GLSN 2 behind the head 4 and a log stream without one:
 * no gap lookup either. (The stall check would reopen log stream 1's stream, and the
 * reopening's metadata lookup show log stream 3: it is off here.) */
static void test_gap_behind_a_head_and_an_open_stream(void **state)
{
    (void)state;
    t_start(1, 2, 100, "subscribe.stall.timeout.ms", "0", NULL);
    int32_t ls = 0;
    assert_int_equal(varlog_server_add_log_stream(T.f.srv, 1, &ls), VARLOG_OK);
    varlog_client_t *other = other_client();
    stu_append_n(other, &T.log, 1, 1, 1, 0, 2);  /* GLSN 1 */
    stu_append_n(other, &T.log, 1, ls, 2, 0, 2); /* GLSNs 2 and 3 */
    stu_append_n(other, &T.log, 1, 2, 1, 0, 3);  /* GLSN 4 */
    stu_append_n(other, &T.log, 1, 1, 1, 0, 4);  /* GLSN 5 */
    varlog_client_destroy(other);
    subscribe_iter_ok(1, 1, 5, &T.sub2);
    drain_ok(T.sub2, &T.sink2, 4);
    varlog_entry_t e;
    assert_int_equal(varlog_subscription_next(T.sub2, bound_ms(), &e), VARLOG_ERR_END);
    stu_verify(&T.sink2, &T.log, 1, 0, 1, 4);
    assert_int_equal(stu_stats(T.sub2).log_streams, 3);
    t_finish();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_gap_from_unknown_log_stream, teardown),
        cmocka_unit_test_teardown(test_bounded_gap_from_unknown_log_stream, teardown),
        cmocka_unit_test_teardown(test_gap_behind_an_open_stream, teardown),
        cmocka_unit_test_teardown(test_gap_behind_a_head_and_an_open_stream, teardown),
        cmocka_unit_test_teardown(test_gap_below_first_entry, teardown),
        cmocka_unit_test_teardown(test_sealed_topic_grows, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
