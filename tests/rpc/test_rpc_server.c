/* The server transport (rpc/include/rpc_server.h) driven by a small raw gRPC-core client, so
 * that the server is tested without the client transport. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>

#include "raw_grpc_client.h"
#include "rpc_server.h"
#include "test_service.h"
#include "test_support.h"
#include "transport_test.pb-c.h"
#include "wire.h"

/* ==== fixture ============================================================================== */

struct fixture {
    struct svc svc;
    grpc_channel *ch;
};

static int setup(void **state)
{
    wire_grpc_ref(); /* the test's own client */
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(svc_start(&f->svc, 0), VARLOG_OK);
    assert_true(f->svc.port > 0);
    f->ch = channel_new(f->svc.port);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    svc_stop(&f->svc);
    grpc_channel_destroy(f->ch);
    free(f);
    wire_grpc_unref();
    return 0;
}

static bool all_done(void *arg)
{
    struct svc *s = arg;
    return atomic_load(&s->done) == atomic_load(&s->started);
}

static request_t request(uint64_t seq)
{
    request_t r = LIBVARLOG__TRANSPORTTEST__REQUEST__INIT;
    r.seq = seq;
    return r;
}

/* ==== tests ================================================================================ */

static void test_unary_round_trip(void **state)
{
    struct fixture *f = *state;
    for (uint64_t i = 1; i <= 3; i++) {
        request_t req = request(i);
        uint8_t payload[] = "hello";
        req.payload.data = payload;
        req.payload.len = 5;
        unary_result_t r;
        unary_raw(f->ch, UNARY, pack_request(&req), &r);
        assert_int_equal(r.status.code, GRPC_STATUS_OK);
        assert_non_null(r.resp);
        assert_int_equal(r.resp->seq, i);
        assert_int_equal(r.resp->payload.len, 5);
        assert_memory_equal(r.resp->payload.data, "hello", 5);
        unary_result_clear(&r);
    }
    assert_true(test_wait_until(all_done, &f->svc, WAIT_MS));
    assert_int_equal(atomic_load(&f->svc.done), 3);
    assert_int_equal(atomic_load(&f->svc.done_cancelled), 0);
}

static void test_unary_answered_from_other_thread(void **state)
{
    struct fixture *f = *state;
    request_t req = request(42);
    req.delay_ms = 20;
    unary_result_t r;
    unary_raw(f->ch, UNARY, pack_request(&req), &r);
    assert_int_equal(r.status.code, GRPC_STATUS_OK);
    assert_non_null(r.resp);
    assert_int_equal(r.resp->seq, 42);
    unary_result_clear(&r);
}

static void test_unknown_method(void **state)
{
    struct fixture *f = *state;
    request_t req = request(1);
    unary_result_t r;
    unary_raw(f->ch, SVC "NoSuchMethod", pack_request(&req), &r);
    assert_int_equal(r.status.code, GRPC_STATUS_UNIMPLEMENTED);
    assert_null(r.resp);
    unary_result_clear(&r);
    /* No handler ran, so no on_done either. */
    assert_int_equal(atomic_load(&f->svc.started), 0);
}

static void test_undecodable_request(void **state)
{
    struct fixture *f = *state;
    /* Field 2 (bytes) claims 5 bytes but only 2 follow. */
    static const uint8_t garbage[] = {0x12, 0x05, 'a', 'b'};
    unary_result_t r;
    unary_raw(f->ch, UNARY, raw_buffer(garbage, sizeof(garbage)), &r);
    assert_int_equal(r.status.code, GRPC_STATUS_INVALID_ARGUMENT);
    unary_result_clear(&r);
    assert_int_equal(atomic_load(&f->svc.started), 0);
}

static void test_unary_status_with_details(void **state)
{
    struct fixture *f = *state;
    request_t req = request(1);
    char *details[] = {"outer: wrapped", "logstream: sealed"};
    req.fail_code = GRPC_STATUS_FAILED_PRECONDITION;
    req.fail_message = "asked to fail";
    req.fail_details = details;
    req.n_fail_details = 2;
    unary_result_t r;
    unary_raw(f->ch, UNARY, pack_request(&req), &r);
    assert_int_equal(r.status.code, GRPC_STATUS_FAILED_PRECONDITION);
    assert_string_equal(r.status.message, "asked to fail");
    assert_int_equal(r.status.n_details, 2);
    assert_string_equal(r.status.details[0], "outer: wrapped");
    assert_string_equal(r.status.details[1], "logstream: sealed");
    assert_string_equal(rpc_status_reason(&r.status), "logstream: sealed");
    unary_result_clear(&r);

    /* Without details: no trailer. */
    req.n_fail_details = 0;
    req.fail_code = GRPC_STATUS_NOT_FOUND;
    unary_raw(f->ch, UNARY, pack_request(&req), &r);
    assert_int_equal(r.status.code, GRPC_STATUS_NOT_FOUND);
    assert_string_equal(r.status.message, "asked to fail");
    assert_int_equal(r.status.n_details, 0);
    unary_result_clear(&r);
    assert_true(test_wait_until(all_done, &f->svc, WAIT_MS));
    /* A status sent normally is not a cancellation, even when it is an error. */
    assert_int_equal(atomic_load(&f->svc.done_cancelled), 0);
}

static void test_bidi_pipelined_in_order(void **state)
{
    struct fixture *f = *state;
    const uint64_t n = (uint64_t)test_scale(10000, 10);
    cstream_t s;
    cs_open(&s, f->ch, BIDI, NULL);
    uint64_t sent = 0, received = 0;
    bool closed = false;
    cs_arm_recv(&s);
    while (received < n) {
        if (!s.send_busy && sent < n) {
            request_t req = request(++sent);
            cs_send(&s, pack_request(&req));
        } else if (!s.send_busy && !closed) {
            cs_close_send(&s);
            closed = true;
        }
        intptr_t tag = cs_next(&s, WAIT_MS);
        assert_int_not_equal(tag, 0);
        if (tag == T_RECV) {
            assert_true(s.recv_ok);
            response_t *r = cs_take(&s);
            assert_non_null(r);
            assert_int_equal(r->seq, ++received);
            libvarlog__transporttest__response__free_unpacked(r, NULL);
            if (received < n)
                cs_arm_recv(&s);
        }
    }
    cs_wait_idle_send(&s);
    if (!closed)
        cs_close_send(&s);
    /* The status follows the last response: the end of the stream, then OK. */
    assert_null(cs_recv(&s));
    rpc_status_t st;
    rpc_status_init(&st);
    cs_wait_status(&s, &st);
    assert_int_equal(st.code, GRPC_STATUS_OK);
    rpc_status_clear(&st);
    cs_destroy(&s);
    assert_int_equal(atomic_load(&f->svc.bidi_seen), (int)n);
    assert_true(test_wait_until(all_done, &f->svc, WAIT_MS));
    assert_int_equal(atomic_load(&f->svc.done_cancelled), 0);
}

static void test_bidi_failure_with_details(void **state)
{
    struct fixture *f = *state;
    cstream_t s;
    cs_open(&s, f->ch, BIDI, NULL);
    char *details[] = {"bidi detail"};
    for (uint64_t i = 1; i <= 3; i++) {
        request_t req = request(i);
        req.fail_code = GRPC_STATUS_ABORTED;
        req.fail_message = "third one fails";
        req.fail_details = details;
        req.n_fail_details = 1;
        req.fail_after = 2;
        cs_send(&s, pack_request(&req));
        cs_wait_idle_send(&s);
    }
    for (uint64_t i = 1; i <= 2; i++) {
        response_t *r = cs_recv(&s);
        assert_non_null(r);
        assert_int_equal(r->seq, i);
        libvarlog__transporttest__response__free_unpacked(r, NULL);
    }
    rpc_status_t st;
    rpc_status_init(&st);
    cs_wait_status(&s, &st);
    assert_int_equal(st.code, GRPC_STATUS_ABORTED);
    assert_string_equal(st.message, "third one fails");
    assert_int_equal(st.n_details, 1);
    assert_string_equal(st.details[0], "bidi detail");
    rpc_status_clear(&st);
    cs_destroy(&s);
    assert_true(test_wait_until(all_done, &f->svc, WAIT_MS));
}

static bool parked(void *arg)
{
    struct svc *s = arg;
    pthread_mutex_lock(&s->mu);
    bool yes = s->parked != NULL;
    pthread_mutex_unlock(&s->mu);
    return yes;
}

static bool bidi_seen_at_least(void *arg)
{
    struct fixture *f = arg;
    return atomic_load(&f->svc.bidi_seen) >= atomic_load(&f->svc.target);
}

static void test_bidi_pause_recv(void **state)
{
    struct fixture *f = *state;
    const int n = 5;
    cstream_t s;
    cs_open(&s, f->ch, PAUSED_BIDI, NULL);
    /* All requests go out at once; the server takes them one at a time. */
    for (int i = 1; i <= n; i++) {
        request_t req = request((uint64_t)i);
        cs_send(&s, pack_request(&req));
        cs_wait_idle_send(&s);
    }
    cs_close_send(&s);
    assert_true(test_wait_until(parked, &f->svc, WAIT_MS));
    for (int i = 1; i <= n; i++) {
        atomic_store(&f->svc.target, i);
        assert_true(test_wait_until(bidi_seen_at_least, f, WAIT_MS));
        response_t *r = cs_recv(&s);
        assert_non_null(r);
        assert_int_equal(r->seq, (uint64_t)i);
        libvarlog__transporttest__response__free_unpacked(r, NULL);
        /* Paused: the next request stays unread although the client sent it long ago. */
        assert_int_equal(atomic_load(&f->svc.bidi_seen), i);
        pthread_mutex_lock(&f->svc.mu);
        rpc_server_call_pause_recv(f->svc.parked, false);
        pthread_mutex_unlock(&f->svc.mu);
    }
    rpc_status_t st;
    rpc_status_init(&st);
    cs_wait_status(&s, &st);
    assert_int_equal(st.code, GRPC_STATUS_OK);
    rpc_status_clear(&st);
    cs_destroy(&s);
    assert_true(test_wait_until(all_done, &f->svc, WAIT_MS));
    svc_unpark(&f->svc);
}

static void test_wake_from_other_thread(void **state)
{
    struct fixture *f = *state;
    request_t req = request(0);
    req.count = 3;
    cstream_t s;
    cs_open(&s, f->ch, WOKEN_STREAM, pack_request(&req));
    assert_true(test_wait_until(parked, &f->svc, WAIT_MS));
    for (uint64_t i = 1; i <= 4; i++) {
        atomic_store(&f->svc.credits, 1);
        pthread_mutex_lock(&f->svc.mu);
        rpc_server_call_wake(f->svc.parked);
        rpc_server_call_wake(f->svc.parked); /* coalesced */
        pthread_mutex_unlock(&f->svc.mu);
        response_t *r = cs_recv(&s);
        if (i <= 3) {
            assert_non_null(r);
            assert_int_equal(r->seq, i);
            libvarlog__transporttest__response__free_unpacked(r, NULL);
        } else {
            assert_null(r);
        }
    }
    rpc_status_t st;
    rpc_status_init(&st);
    cs_wait_status(&s, &st);
    assert_int_equal(st.code, GRPC_STATUS_OK);
    rpc_status_clear(&st);
    cs_destroy(&s);
    assert_true(test_wait_until(all_done, &f->svc, WAIT_MS));
    svc_unpark(&f->svc);
}

struct quiet {
    struct svc *svc;
    unsigned long long last;
    int64_t since;
};

/* True once the server has produced nothing new for a while: it waits for the client. */
static bool production_stalled(void *arg)
{
    struct quiet *q = arg;
    unsigned long long now = atomic_load(&q->svc->produced);
    if (now != q->last) {
        q->last = now;
        q->since = test_now_ms();
        return false;
    }
    return test_now_ms() - q->since >= 300;
}

static void test_server_stream_slow_client_bounded(void **state)
{
    struct fixture *f = *state;
    /* 32 MiB (16 under valgrind) in all, far beyond what HTTP/2 windows and socket buffers
     * hold (a few MiB), so a server without back-pressure would produce everything. */
    /* Under TSan a 64 KiB (multi-slice) message takes about a second to receive; 16 KiB
     * ones flow at about 0.4 MB/s, so there the same 32 MiB go as 16 KiB messages. */
    const size_t payload_len = test_under_tsan() ? 16 * 1024 : 64 * 1024;
    const uint64_t n = (test_under_valgrind() ? 16u << 20 : 32u << 20) / payload_len;
    uint8_t *payload = calloc(1, payload_len);
    assert_non_null(payload);
    request_t req = request(0);
    req.count = n;
    req.payload.data = payload;
    req.payload.len = payload_len;
    cstream_t s;
    int64_t t0 = test_now_ms();
    /* BDP probing would let a loaded machine grow the window towards the whole transfer. */
    grpc_channel *ch = channel_new_fixed_window(f->svc.port);
    cs_open(&s, ch, SERVER_STREAM, pack_request(&req));
    free(payload);
    uint64_t got = 0;
    for (; got < 4; got++) {
        response_t *r = cs_recv(&s);
        assert_non_null(r);
        assert_int_equal(r->seq, got + 1);
        libvarlog__transporttest__response__free_unpacked(r, NULL);
    }
    /* The client stops reading: the server must stop producing. */
    struct quiet q = {&f->svc, 0, test_now_ms()};
    assert_true(test_wait_until(production_stalled, &q, 60000));
    unsigned long long produced = atomic_load(&f->svc.produced);
    print_message("produced %llu of %llu while the client stalled (%lld ms)\n", produced,
                  (unsigned long long)n, (long long)(test_now_ms() - t0));
    assert_true(produced < n);
    assert_true(atomic_load(&f->svc.max_pending) <= 1);
    /* Then reads the rest, in order. Under TSan reading it all would take over a minute, so
     * there the test checks that the flow resumes in order for a while and then cancels. */
    response_t *r;
    if (test_under_tsan()) {
        for (uint64_t until = got + 64; got < until;) {
            assert_non_null(r = cs_recv(&s));
            assert_int_equal(r->seq, ++got);
            libvarlog__transporttest__response__free_unpacked(r, NULL);
        }
        cs_destroy(&s);
        grpc_channel_destroy(ch);
        assert_true(test_wait_until(all_done, &f->svc, WAIT_MS));
        return;
    }
    while ((r = cs_recv(&s)) != NULL) {
        assert_int_equal(r->seq, ++got);
        assert_int_equal(r->payload.len, payload_len);
        libvarlog__transporttest__response__free_unpacked(r, NULL);
    }
    rpc_status_t st;
    rpc_status_init(&st);
    cs_wait_status(&s, &st);
    if (got != n || st.code != GRPC_STATUS_OK)
        fail_msg("got %llu of %llu (server produced %llu), then status %d (%s)",
                 (unsigned long long)got, (unsigned long long)n,
                 (unsigned long long)atomic_load(&f->svc.produced), st.code, st.message);
    rpc_status_clear(&st);
    cs_destroy(&s);
    grpc_channel_destroy(ch);
    assert_true(atomic_load(&f->svc.max_pending) <= 1);
    assert_true(test_wait_until(all_done, &f->svc, WAIT_MS));
}

static void test_server_stream_fails_midway(void **state)
{
    struct fixture *f = *state;
    request_t req = request(0);
    req.count = 10;
    req.fail_code = GRPC_STATUS_OUT_OF_RANGE;
    req.fail_message = "trimmed";
    req.fail_after = 3;
    cstream_t s;
    cs_open(&s, f->ch, SERVER_STREAM, pack_request(&req));
    uint64_t got = 0;
    response_t *r;
    while ((r = cs_recv(&s)) != NULL) {
        assert_int_equal(r->seq, ++got);
        libvarlog__transporttest__response__free_unpacked(r, NULL);
    }
    assert_int_equal(got, 3);
    rpc_status_t st;
    rpc_status_init(&st);
    cs_wait_status(&s, &st);
    assert_int_equal(st.code, GRPC_STATUS_OUT_OF_RANGE);
    assert_string_equal(st.message, "trimmed");
    rpc_status_clear(&st);
    cs_destroy(&s);
}

static void test_client_cancel_runs_on_done(void **state)
{
    struct fixture *f = *state;
    cstream_t s;
    cs_open(&s, f->ch, BIDI, NULL);
    request_t req = request(7);
    cs_send(&s, pack_request(&req));
    response_t *r = cs_recv(&s);
    assert_non_null(r);
    libvarlog__transporttest__response__free_unpacked(r, NULL);
    cs_destroy(&s); /* cancels */
    assert_true(test_wait_until(all_done, &f->svc, WAIT_MS));
    assert_int_equal(atomic_load(&f->svc.done), 1);
    assert_int_equal(atomic_load(&f->svc.done_cancelled), 1);
}

static bool started_at_least(void *arg)
{
    struct fixture *f = arg;
    return atomic_load(&f->svc.started) >= 3;
}

static bool is_stop_code(grpc_status_code code)
{
    return code == GRPC_STATUS_UNAVAILABLE || code == GRPC_STATUS_CANCELLED;
}

static void test_stop_mid_stream(void **state)
{
    struct fixture *f = *state;
    /* A stream that never ends (count 0), read for a while. */
    request_t req = request(0);
    cstream_t tail;
    cs_open(&tail, f->ch, SERVER_STREAM, pack_request(&req));
    for (uint64_t i = 1; i <= 10; i++) {
        response_t *r = cs_recv(&tail);
        assert_non_null(r);
        assert_int_equal(r->seq, i);
        libvarlog__transporttest__response__free_unpacked(r, NULL);
    }
    /* An idle bidi stream and a unary call whose answer is due long after the stop. */
    cstream_t idle;
    cs_open(&idle, f->ch, BIDI, NULL);
    grpc_channel *ch2 = channel_new(f->svc.port);
    req.delay_ms = 2000;
    cstream_t slow;
    cs_open(&slow, ch2, UNARY, pack_request(&req));
    assert_true(test_wait_until(started_at_least, f, WAIT_MS));

    int64_t t0 = test_now_ms();
    rpc_server_stop(f->svc.srv);
    f->svc.srv = NULL; /* teardown still joins and checks */
    assert_true(test_now_ms() - t0 < 5000);
    /* Every started call got its on_done, cancelled, before stop returned. */
    assert_int_equal(atomic_load(&f->svc.done), 3);
    assert_int_equal(atomic_load(&f->svc.done_cancelled), 3);

    cstream_t *all[] = {&tail, &idle, &slow};
    for (size_t i = 0; i < 3; i++) {
        rpc_status_t st;
        rpc_status_init(&st);
        cs_wait_status(all[i], &st);
        if (!is_stop_code(st.code))
            fail_msg("stream %zu ended with %d (%s)", i, st.code, st.message);
        rpc_status_clear(&st);
        cs_destroy(all[i]);
    }
    grpc_channel_destroy(ch2);
    /* The unary answer comes from a thread that still holds a reference to its call: it
     * finds the call over (send and finish refuse) and releases it after the server is
     * gone; teardown joins it. */
}

/* Threads of the process before gRPC ever ran (sanitizer runtimes may add their own). */
static int g_baseline_threads;

struct threads_back {
    int baseline;
};

/* No server thread is left, and the process is back to its thread count from before gRPC
 * ran (gRPC's own threads exit at grpc_shutdown). Under TSan and a loaded machine gRPC's
 * threads were seen to linger past the wait, so there only the server threads count. */
static bool threads_settled(void *arg)
{
    struct threads_back *t = arg;
    if (test_thread_count_named("varlog-server") != 0)
        return false;
    return test_under_tsan() || test_thread_count() <= t->baseline;
}

static void unary_ok(int port)
{
    grpc_channel *ch = channel_new(port);
    request_t req = request(9);
    unary_result_t r;
    unary_raw(ch, UNARY, pack_request(&req), &r);
    assert_int_equal(r.status.code, GRPC_STATUS_OK);
    assert_non_null(r.resp);
    assert_int_equal(r.resp->seq, 9);
    unary_result_clear(&r);
    grpc_channel_destroy(ch);
}

static void test_start_stop_no_thread_leak(void **state)
{
    (void)state;
    /* Earlier tests' gRPC threads may still be exiting: start from the baseline. */
    struct threads_back t = {g_baseline_threads};
    assert_true(test_wait_until(threads_settled, &t, WAIT_MS));
    const long rounds = 20;
    for (long i = 0; i < rounds; i++) {
        struct svc a, b;
        assert_int_equal(svc_start(&a, 0), VARLOG_OK);
        assert_int_equal(svc_start(&b, 0), VARLOG_OK);
        assert_true(a.port > 0 && b.port > 0);
        assert_int_not_equal(a.port, b.port);
        if (i % 5 == 0) {
            /* Both answer; a client of the test needs gRPC of its own. */
            wire_grpc_ref();
            unary_ok(a.port);
            unary_ok(b.port);
            wire_grpc_unref();
        }
        svc_stop(&a);
        svc_stop(&b);
    }
    /* grpc_shutdown ran with the last stop; its threads may take a moment to exit. */
    if (!test_wait_until(threads_settled, &t, WAIT_MS))
        fail_msg("%d threads, %d before gRPC ever ran", test_thread_count(), t.baseline);
}

static void test_restart_same_port(void **state)
{
    (void)state;
    wire_grpc_ref();
    struct svc s;
    assert_int_equal(svc_start(&s, 0), VARLOG_OK);
    int port = s.port;
    unary_ok(port);
    /* Taken: a second server cannot bind it. */
    struct svc other;
    assert_int_equal(svc_start(&other, port), VARLOG_ERR_RPC_UNAVAILABLE);
    svc_stop(&s);
    assert_int_equal(svc_start(&s, port), VARLOG_OK);
    assert_int_equal(s.port, port);
    unary_ok(port);
    svc_stop(&s);
    wire_grpc_unref();
}

static void noop_start(rpc_server_call_t *call, const ProtobufCMessage *req, void *arg)
{
    (void)call;
    (void)req;
    (void)arg;
}

static void test_start_rejects_bad_options(void **state)
{
    (void)state;
    rpc_server_t *srv = (rpc_server_t *)1;
    rpc_method_t m[2] = {
        {UNARY, RPC_METHOD_UNARY, request_desc, noop_start, NULL, NULL, NULL, NULL, NULL},
        {UNARY, RPC_METHOD_UNARY, request_desc, noop_start, NULL, NULL, NULL, NULL, NULL},
    };
    rpc_server_opts_t opts = {"127.0.0.1:0", m, 2};
    assert_int_equal(rpc_server_start(NULL, &srv), VARLOG_ERR_INVALID_ARG);
    assert_null(srv);
    assert_int_equal(rpc_server_start(&opts, NULL), VARLOG_ERR_INVALID_ARG);
    assert_int_equal(rpc_server_start(&opts, &srv), VARLOG_ERR_INVALID_ARG); /* duplicate */
    opts.n_methods = 0;
    assert_int_equal(rpc_server_start(&opts, &srv), VARLOG_ERR_INVALID_ARG);
    opts.n_methods = 1;
    m[0].on_start = NULL;
    assert_int_equal(rpc_server_start(&opts, &srv), VARLOG_ERR_INVALID_ARG);
    m[0].on_start = noop_start;
    opts.listen_addr = "not an address";
    assert_int_equal(rpc_server_start(&opts, &srv), VARLOG_ERR_RPC_UNAVAILABLE);
    assert_null(srv);
    opts.listen_addr = "127.0.0.1:0";
    assert_int_equal(rpc_server_start(&opts, &srv), VARLOG_OK);
    assert_true(rpc_server_port(srv) > 0);
    rpc_server_stop(srv);
    rpc_server_stop(NULL);
}

static void *noop_thread(void *arg)
{
    return arg;
}

int main(void)
{
    /* ThreadSanitizer starts a helper thread with the first pthread_create: let it, so that
     * the baseline counts it. */
    pthread_t t;
    if (pthread_create(&t, NULL, noop_thread, NULL) == 0)
        pthread_join(t, NULL);
    g_baseline_threads = test_thread_count();
    /* TEST_FILTER=pattern runs a subset, for chasing a failure. */
    if (getenv("TEST_FILTER"))
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_unary_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unary_answered_from_other_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_method, setup, teardown),
        cmocka_unit_test_setup_teardown(test_undecodable_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unary_status_with_details, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bidi_pipelined_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bidi_failure_with_details, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bidi_pause_recv, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wake_from_other_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_stream_slow_client_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_stream_fails_midway, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_cancel_runs_on_done, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_mid_stream, setup, teardown),
        cmocka_unit_test(test_start_stop_no_thread_leak),
        cmocka_unit_test(test_restart_same_port),
        cmocka_unit_test(test_start_rejects_bad_options),
    };
    return cmocka_run_group_tests_name("rpc_server", tests, NULL, NULL);
}
