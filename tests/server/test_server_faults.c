/* Fault injection of the embedded server: injected statuses, delays, dropped streams,
 * seal/unseal, stop and restart on the same port keeping the data, call counters. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server_test_util.h"
#include "test_support.h"

static int setup(void **state)
{
    return fixture_setup(state, 1, 2);
}

static int teardown(void **state)
{
    return fixture_teardown(state);
}

static varlog_err_t cluster_info(srv_fixture_t *f, int64_t timeout_ms, rpc_status_t *st)
{
    Varlog__Mrpb__GetClusterInfoRequest r = VARLOG__MRPB__GET_CLUSTER_INFO_REQUEST__INIT;
    r.cluster_id = 1;
    ProtobufCMessage *m = NULL;
    varlog_err_t err =
        rpc_unary(f->client, f->addr, M_PATH_CLUSTER_INFO, &r.base,
                  &varlog__mrpb__get_cluster_info_response__descriptor, timeout_ms, &m, st);
    free_msg(m);
    return err;
}

/* The next n calls fail with the given status; then the method works again. */
static void test_fail_next_unary(void **state)
{
    srv_fixture_t *f = *state;
    assert_int_equal(varlog_server_fail_next(f->srv, M_PATH_METADATA, 14, "injected", 2),
                     VARLOG_OK);
    Varlog__Mrpb__GetMetadataResponse *md = NULL;
    assert_int_equal(get_metadata(f, &md), VARLOG_ERR_RPC_UNAVAILABLE);
    assert_int_equal(get_metadata(f, &md), VARLOG_ERR_RPC_UNAVAILABLE);
    assert_int_equal(get_metadata(f, &md), VARLOG_OK);
    free_msg(md);
    assert_int_equal(varlog_server_call_count(f->srv, M_PATH_METADATA), 3);

    /* n = 0 clears; other methods are unaffected. */
    assert_int_equal(varlog_server_fail_next(f->srv, M_PATH_TRIM, 2, "x", 5), VARLOG_OK);
    assert_int_equal(varlog_server_fail_next(f->srv, M_PATH_TRIM, 2, "x", 0), VARLOG_OK);
    assert_int_equal(trim_call(f, 1, 1), VARLOG_OK);
    assert_int_equal(varlog_server_fail_next(f->srv, "/no/Such", 2, "x", 1),
                     VARLOG_ERR_INVALID_ARG);
    assert_int_equal(varlog_server_fail_next(f->srv, M_PATH_TRIM, 0, "x", 1),
                     VARLOG_ERR_INVALID_ARG);
    assert_int_equal(varlog_server_fail_next(f->srv, M_PATH_TRIM, 17, "x", 1),
                     VARLOG_ERR_INVALID_ARG);
}

/* Append failures count per request: the stream answers the requests before the failing
 * one, then ends with the injected status; nothing of the failed request is stored. */
static void test_fail_next_append(void **state)
{
    srv_fixture_t *f = *state;
    assert_int_equal(append_batches(f, 1, 1, 1, 1, NULL, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(varlog_server_fail_next(f->srv, M_PATH_APPEND, 9, "sealed", 1), VARLOG_OK);
    rpc_status_t st;
    rpc_status_init(&st);
    size_t answered = 9;
    assert_int_equal(append_batches(f, 1, 1, 3, 1, NULL, NULL, &answered, &st),
                     VARLOG_ERR_RPC_FAILED_PRECONDITION);
    assert_int_equal(answered, 0);
    assert_string_equal(st.message, "sealed");
    rpc_status_clear(&st);
    uint64_t g;
    assert_int_equal(append_batches(f, 1, 1, 1, 1, &g, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(g, 2);
    assert_int_equal(varlog_server_call_count(f->srv, M_PATH_APPEND), 3);
    /* 1 + the failing one (the stream reads no further) + 1. */
    assert_int_equal(varlog_server_request_count(f->srv, M_PATH_APPEND), 3);
}

/* Injected failures may carry Varlog error details, as Go servers send them. */
static void test_fail_with_details(void **state)
{
    srv_fixture_t *f = *state;
    const char *details[] = {"log stream: logstream: trimmed", "logstream: trimmed"};
    assert_int_equal(varlog_server_fail_next_details(f->srv, M_PATH_SUBSCRIBE, 11,
                                                     "log stream: logstream: trimmed", details, 2,
                                                     1),
                     VARLOG_OK);
    rpc_stream_t *s = subscribe_open(f, false, 1, 1, 1, 10, 4);
    ProtobufCMessage *m = NULL;
    assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_ERR_RPC_OUT_OF_RANGE);
    const rpc_status_t *st = rpc_stream_status(s);
    assert_int_equal(st->n_details, 2);
    assert_string_equal(rpc_status_reason(st), "logstream: trimmed");
    rpc_stream_destroy(s);
    assert_int_equal(varlog_server_call_count(f->srv, M_PATH_SUBSCRIBE), 1);
}

/* Delays: a unary answer comes late (or after the client's deadline), Append responses come
 * late and in order, a subscription starts late. */
static void test_delay(void **state)
{
    srv_fixture_t *f = *state;
    const int64_t d = 150;
    assert_int_equal(varlog_server_delay(f->srv, M_PATH_CLUSTER_INFO, d), VARLOG_OK);
    int64_t t0 = test_now_ms();
    assert_int_equal(cluster_info(f, T_TIMEOUT, NULL), VARLOG_OK);
    assert_true(test_now_ms() - t0 >= d);
    assert_int_equal(cluster_info(f, 30, NULL), VARLOG_ERR_RPC_DEADLINE_EXCEEDED);
    /* Clearing must remove the delay: a call after clearing a 60 s delay answers well within
     * its (shorter) deadline, with a margin no loaded machine erodes. */
    assert_int_equal(varlog_server_delay(f->srv, M_PATH_CLUSTER_INFO, 60000), VARLOG_OK);
    assert_int_equal(varlog_server_delay(f->srv, M_PATH_CLUSTER_INFO, 0), VARLOG_OK);
    assert_int_equal(cluster_info(f, T_TIMEOUT, NULL), VARLOG_OK);

    assert_int_equal(varlog_server_delay(f->srv, M_PATH_APPEND, 50), VARLOG_OK);
    uint64_t g[3];
    t0 = test_now_ms();
    assert_int_equal(append_batches(f, 1, 1, 3, 2, g, NULL, NULL, NULL), VARLOG_OK);
    assert_true(test_now_ms() - t0 >= 3 * 50);
    assert_int_equal(g[0], 1);
    assert_int_equal(g[1], 3);
    assert_int_equal(g[2], 5);
    assert_int_equal(varlog_server_delay(f->srv, M_PATH_APPEND, 0), VARLOG_OK);

    assert_int_equal(varlog_server_delay(f->srv, M_PATH_SUBSCRIBE, d), VARLOG_OK);
    t0 = test_now_ms();
    rpc_stream_t *s = subscribe_open(f, false, 1, 1, 1, 7, 8);
    size_t n = 0;
    assert_int_equal(subscribe_collect(s, 8, T_TIMEOUT, NULL, NULL, &n), VARLOG_ERR_END);
    assert_int_equal(n, 6);
    assert_true(test_now_ms() - t0 >= d);
    rpc_stream_destroy(s);
    assert_int_equal(varlog_server_delay(f->srv, M_PATH_SUBSCRIBE, -1), VARLOG_ERR_INVALID_ARG);
}

static bool both_arrived(void *arg)
{
    srv_fixture_t *f = arg;
    return varlog_server_request_count(f->srv, M_PATH_APPEND) >= 1 &&
           varlog_server_call_count(f->srv, M_PATH_SUBSCRIBE) >= 1;
}

/* A delayed response still pending when the server stops is answered UNAVAILABLE and its
 * references are released (valgrind checks the latter). */
static void test_delay_then_stop(void **state)
{
    srv_fixture_t *f = *state;
    assert_int_equal(varlog_server_delay(f->srv, M_PATH_APPEND, 60000), VARLOG_OK);
    assert_int_equal(varlog_server_delay(f->srv, M_PATH_REPLICA_MD, 60000), VARLOG_OK);
    assert_int_equal(varlog_server_delay(f->srv, M_PATH_SUBSCRIBE, 60000), VARLOG_OK);
    rpc_stream_opts_t o = {.kind = RPC_STREAM_BIDI,
                           .response = &varlog__snpb__append_response__descriptor,
                           .recv_window = 4,
                           .timeout_ms = T_TIMEOUT,
                           .wait_for_ready = false,
                           .notify = NULL,
                           .notify_arg = NULL,
                           .deadline_ms = 0};
    rpc_stream_t *a = NULL;
    assert_int_equal(rpc_stream_open(f->client, f->addr, M_PATH_APPEND, &o, NULL, &a), VARLOG_OK);
    Varlog__Snpb__AppendRequest *r = append_request(1, 1, 1, "d");
    rpc_stream_send(a, &r->base);
    append_request_free(r);
    rpc_stream_t *s = subscribe_open(f, false, 1, 1, 1, 7, 8);
    assert_true(test_wait_until(both_arrived, f, T_TIMEOUT));
    assert_int_equal(varlog_server_stop(f->srv), VARLOG_OK);
    ProtobufCMessage *m = NULL;
    varlog_err_t err = rpc_stream_recv(a, T_TIMEOUT, &m);
    assert_true(err == VARLOG_ERR_RPC_UNAVAILABLE || err == VARLOG_ERR_RPC_CANCELLED);
    err = rpc_stream_recv(s, T_TIMEOUT, &m);
    assert_true(err == VARLOG_ERR_RPC_UNAVAILABLE || err == VARLOG_ERR_RPC_CANCELLED);
    rpc_stream_destroy(a);
    rpc_stream_destroy(s);
    assert_int_equal(varlog_server_stop(f->srv), VARLOG_ERR_STATE);
    varlog_server_clear_faults(f->srv);
    assert_int_equal(varlog_server_restart(f->srv), VARLOG_OK);
}

/* Streams dropped after k messages end with UNAVAILABLE; only the next n streams are. */
static void test_drop_stream_after(void **state)
{
    srv_fixture_t *f = *state;
    assert_int_equal(append_batches(f, 1, 1, 1, 5, NULL, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(varlog_server_drop_stream_after(f->srv, M_PATH_SUBSCRIBE, 2, 1), VARLOG_OK);
    rpc_stream_t *s = subscribe_open(f, false, 1, 1, 1, 6, 8);
    uint64_t g[8];
    size_t n = 0;
    assert_int_equal(subscribe_collect(s, 8, T_TIMEOUT, g, NULL, &n), VARLOG_ERR_RPC_UNAVAILABLE);
    assert_int_equal(n, 2);
    assert_string_equal(rpc_stream_status(s)->message, "fault injection: stream dropped");
    rpc_stream_destroy(s);
    s = subscribe_open(f, false, 1, 1, 1, 6, 8);
    assert_int_equal(subscribe_collect(s, 8, T_TIMEOUT, g, NULL, &n), VARLOG_ERR_END);
    assert_int_equal(n, 5);
    rpc_stream_destroy(s);

    /* k = 0 on SubscribeTo: dropped before the first message, for every stream until
     * cleared. */
    assert_int_equal(varlog_server_drop_stream_after(f->srv, M_PATH_SUBSCRIBE_TO, 0, -1),
                     VARLOG_OK);
    for (int i = 0; i < 2; i++) {
        s = subscribe_open(f, true, 1, 1, 1, 6, 8);
        assert_int_equal(subscribe_collect(s, 8, T_TIMEOUT, g, NULL, &n),
                         VARLOG_ERR_RPC_UNAVAILABLE);
        assert_int_equal(n, 0);
        rpc_stream_destroy(s);
    }
    assert_int_equal(varlog_server_drop_stream_after(f->srv, M_PATH_SUBSCRIBE_TO, -1, 0),
                     VARLOG_OK);
    s = subscribe_open(f, true, 1, 1, 1, 6, 8);
    assert_int_equal(subscribe_collect(s, 8, T_TIMEOUT, g, NULL, &n), VARLOG_ERR_END);
    rpc_stream_destroy(s);

    /* Append: k responses, then the stream ends; request k + 1 is not stored. */
    assert_int_equal(varlog_server_drop_stream_after(f->srv, M_PATH_APPEND, 1, 1), VARLOG_OK);
    size_t answered = 0;
    uint64_t first[3];
    assert_int_equal(append_batches(f, 1, 1, 3, 1, first, NULL, &answered, NULL),
                     VARLOG_ERR_RPC_UNAVAILABLE);
    assert_int_equal(answered, 1);
    assert_int_equal(first[0], 6);
    uint64_t next;
    assert_int_equal(append_batches(f, 1, 1, 1, 1, &next, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(next, 7);
    assert_int_equal(varlog_server_drop_stream_after(f->srv, M_PATH_TRIM, 1, 1),
                     VARLOG_ERR_INVALID_ARG);
}

/* Stop and restart on the same port keep the log, the numbering and the topology; while
 * stopped, calls fail with UNAVAILABLE. */
static void test_stop_restart_keeps_data(void **state)
{
    srv_fixture_t *f = *state;
    assert_int_equal(append_batches(f, 1, 1, 2, 2, NULL, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(append_batches(f, 1, 2, 1, 1, NULL, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(varlog_server_seal(f->srv, 1, 2), VARLOG_OK);
    rpc_stream_t *tail = subscribe_open(f, false, 1, 1, 1, UINT64_MAX, 8);
    size_t n = 0;
    assert_int_equal(subscribe_collect(tail, 4, T_TIMEOUT, NULL, NULL, &n), VARLOG_OK);
    int port = varlog_server_port(f->srv);
    char addr[64];
    snprintf(addr, sizeof(addr), "%s", f->addr);

    int64_t t0 = test_now_ms();
    assert_int_equal(varlog_server_stop(f->srv), VARLOG_OK);
    int64_t t1 = test_now_ms();
    ProtobufCMessage *m = NULL;
    varlog_err_t err = rpc_stream_recv(tail, T_TIMEOUT, &m);
    assert_true(err == VARLOG_ERR_RPC_UNAVAILABLE || err == VARLOG_ERR_RPC_CANCELLED);
    rpc_stream_destroy(tail);
    assert_int_equal(cluster_info(f, 2000, NULL), VARLOG_ERR_RPC_UNAVAILABLE);

    int64_t t2 = test_now_ms();
    assert_int_equal(varlog_server_restart(f->srv), VARLOG_OK);
    int64_t t3 = test_now_ms();
    print_message("stop %lld ms, restart %lld ms\n", (long long)(t1 - t0), (long long)(t3 - t2));
    assert_int_equal(varlog_server_port(f->srv), port);
    assert_string_equal(varlog_server_address(f->srv), addr);

    /* The client reconnects on its own (gRPC backs off; wait_for_ready is not used, so
     * retry a bounded number of times). */
    t0 = test_now_ms();
    while (cluster_info(f, 1000, NULL) != VARLOG_OK)
        assert_true(test_now_ms() - t0 < T_TIMEOUT);
    rpc_stream_t *s = subscribe_open(f, false, 1, 1, 1, 6, 8);
    uint64_t g[8];
    assert_int_equal(subscribe_collect(s, 8, T_TIMEOUT, g, NULL, &n), VARLOG_ERR_END);
    assert_int_equal(n, 4);
    rpc_stream_destroy(s);
    uint64_t next;
    assert_int_equal(append_batches(f, 1, 1, 1, 1, &next, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(next, 6);
    /* Still sealed. */
    assert_int_equal(append_batches(f, 1, 2, 1, 1, NULL, NULL, NULL, NULL),
                     VARLOG_ERR_RPC_FAILED_PRECONDITION);
    /* restart while running is stop + start. */
    assert_int_equal(varlog_server_restart(f->srv), VARLOG_OK);
    assert_int_equal(varlog_server_port(f->srv), port);
}

/* Calls are counted per method across restarts. */
static void test_call_counts(void **state)
{
    srv_fixture_t *f = *state;
    for (int i = 0; i < 3; i++)
        assert_int_equal(cluster_info(f, T_TIMEOUT, NULL), VARLOG_OK);
    assert_int_equal(append_batches(f, 1, 1, 4, 1, NULL, NULL, NULL, NULL), VARLOG_OK);
    Varlog__Snpb__LogStreamReplicaMetadataResponse *md = NULL;
    assert_int_equal(replica_md(f, 1, 1, &md, NULL), VARLOG_OK);
    free_msg(md);
    assert_int_equal(varlog_server_restart(f->srv), VARLOG_OK);
    int64_t t0 = test_now_ms();
    while (trim_call(f, 1, 1) != VARLOG_OK)
        assert_true(test_now_ms() - t0 < T_TIMEOUT);
    assert_int_equal(varlog_server_call_count(f->srv, M_PATH_CLUSTER_INFO), 3);
    assert_int_equal(varlog_server_call_count(f->srv, M_PATH_APPEND), 1);
    assert_int_equal(varlog_server_request_count(f->srv, M_PATH_APPEND), 4);
    assert_int_equal(varlog_server_call_count(f->srv, M_PATH_REPLICA_MD), 1);
    assert_true(varlog_server_call_count(f->srv, M_PATH_TRIM) >= 1);
    assert_int_equal(varlog_server_call_count(f->srv, M_PATH_SUBSCRIBE), 0);
    assert_int_equal(varlog_server_call_count(f->srv, "/nope"), 0);
    assert_int_equal(varlog_server_call_count(NULL, M_PATH_TRIM), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fail_next_unary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fail_next_append, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fail_with_details, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delay_then_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drop_stream_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_restart_keeps_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_counts, setup, teardown),
    };
    if (getenv("TEST_FILTER"))
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
