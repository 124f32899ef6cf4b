/* The test service of the transport tests (see test_service.h). */
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

#include "test_service.h"

struct svc_delayed {
    svc_delayed_t *next;
    rpc_server_call_t *call;
    int64_t due_ms;
    uint64_t seq;
};

/* Per-call state: a copy of the request (it is freed after on_start). */
struct call_state {
    request_t *req;
    uint64_t next;
    uint32_t answered;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static request_t *copy_request(const ProtobufCMessage *msg)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(len ? len : 1);
    assert_non_null(buf);
    protobuf_c_message_pack(msg, buf);
    request_t *copy = libvarlog__transporttest__request__unpack(NULL, len, buf);
    free(buf);
    assert_non_null(copy);
    return copy;
}

static struct call_state *state_new(rpc_server_call_t *call, const ProtobufCMessage *req)
{
    struct call_state *st = calloc(1, sizeof(*st));
    assert_non_null(st);
    st->req = req ? copy_request(req) : NULL;
    st->next = 1;
    rpc_server_call_set_user(call, st);
    return st;
}

static void reply(rpc_server_call_t *call, uint64_t seq, ProtobufCBinaryData payload)
{
    response_t resp = LIBVARLOG__TRANSPORTTEST__RESPONSE__INIT;
    resp.seq = seq;
    resp.payload = payload;
    rpc_server_call_send(call, &resp.base);
}

static void fail_call(rpc_server_call_t *call, const request_t *req)
{
    assert_int_equal(
        rpc_server_call_finish(call, (grpc_status_code)req->fail_code, req->fail_message,
                               (const char *const *)req->fail_details, req->n_fail_details),
        VARLOG_OK);
}

static void park(struct svc *s, rpc_server_call_t *call)
{
    rpc_server_call_ref(call);
    pthread_mutex_lock(&s->mu);
    assert_null(s->parked);
    s->parked = call;
    pthread_mutex_unlock(&s->mu);
}

void svc_unpark(struct svc *s)
{
    pthread_mutex_lock(&s->mu);
    rpc_server_call_t *call = s->parked;
    s->parked = NULL;
    pthread_mutex_unlock(&s->mu);
    rpc_server_call_unref(call);
}

/* ---- Unary --------------------------------------------------------------------------------- */

static void delay(struct svc *s, rpc_server_call_t *call, const request_t *req)
{
    svc_delayed_t *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    d->call = call;
    d->seq = req->seq;
    d->due_ms = now_ms() + req->delay_ms;
    rpc_server_call_ref(call);
    pthread_mutex_lock(&s->mu);
    d->next = s->delayed;
    s->delayed = d;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* One thread answers every delayed call when it is due, so that svc_stop need not wait for
 * answers due long after the test is over (a deadline test asks for 10 s): it drops them. */
static void *delayer_main(void *arg)
{
    struct svc *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        int64_t now = now_ms(), next_due = now + 1000;
        for (svc_delayed_t **pp = &s->delayed; *pp;) {
            svc_delayed_t *d = *pp;
            if (d->due_ms <= now) {
                *pp = d->next;
                ProtobufCBinaryData none = {0, NULL};
                reply(d->call, d->seq, none);
                rpc_server_call_finish(d->call, GRPC_STATUS_OK, NULL, NULL, 0);
                rpc_server_call_unref(d->call);
                free(d);
            } else {
                if (d->due_ms < next_due)
                    next_due = d->due_ms;
                pp = &d->next;
            }
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t wait = next_due - now;
        ts.tv_sec += (time_t)(wait / 1000);
        ts.tv_nsec += (long)(wait % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    while (s->delayed) {
        svc_delayed_t *d = s->delayed;
        s->delayed = d->next;
        rpc_server_call_unref(d->call);
        free(d);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void unary_start(rpc_server_call_t *call, const ProtobufCMessage *msg, void *arg)
{
    struct svc *s = arg;
    const request_t *req = (const request_t *)msg;
    atomic_fetch_add(&s->started, 1);
    state_new(call, NULL);
    if (req->fail_code) {
        fail_call(call, req);
        return;
    }
    if (req->delay_ms) {
        delay(s, call, req);
        return;
    }
    reply(call, req->seq, req->payload);
    assert_int_equal(rpc_server_call_finish(call, GRPC_STATUS_OK, NULL, NULL, 0), VARLOG_OK);
    /* Only the first finish counts, and nothing may be sent after it. */
    assert_int_equal(rpc_server_call_finish(call, GRPC_STATUS_INTERNAL, "late", NULL, 0),
                     VARLOG_ERR_STATE);
    assert_int_equal(rpc_server_call_send(call, msg), VARLOG_ERR_STATE);
}

/* ---- Bidi, PausedBidi ---------------------------------------------------------------------- */

static void bidi_start(rpc_server_call_t *call, const ProtobufCMessage *msg, void *arg)
{
    struct svc *s = arg;
    assert_null(msg);
    atomic_fetch_add(&s->started, 1);
    state_new(call, NULL);
}

static void bidi_message(rpc_server_call_t *call, const ProtobufCMessage *msg, void *arg)
{
    struct svc *s = arg;
    const request_t *req = (const request_t *)msg;
    struct call_state *st = rpc_server_call_user(call);
    atomic_fetch_add(&s->bidi_seen, 1);
    if (req->fail_code && st->answered >= req->fail_after) {
        fail_call(call, req);
        return;
    }
    reply(call, req->seq, req->payload);
    st->answered++;
}

static void bidi_half_close(rpc_server_call_t *call, void *arg)
{
    (void)arg;
    rpc_server_call_finish(call, GRPC_STATUS_OK, NULL, NULL, 0);
}

static void paused_bidi_start(rpc_server_call_t *call, const ProtobufCMessage *msg, void *arg)
{
    bidi_start(call, msg, arg);
    park(arg, call);
}

/* One request at a time: the test thread resumes reading. */
static void paused_bidi_message(rpc_server_call_t *call, const ProtobufCMessage *msg, void *arg)
{
    rpc_server_call_pause_recv(call, true);
    bidi_message(call, msg, arg);
}

/* ---- ServerStream, WokenStream ------------------------------------------------------------- */

static void stream_start(rpc_server_call_t *call, const ProtobufCMessage *msg, void *arg)
{
    struct svc *s = arg;
    atomic_fetch_add(&s->started, 1);
    state_new(call, msg);
}

static void note_pending(struct svc *s, rpc_server_call_t *call)
{
    size_t pending = rpc_server_call_pending_sends(call);
    size_t seen = atomic_load(&s->max_pending);
    while (pending > seen && !atomic_compare_exchange_weak(&s->max_pending, &seen, pending))
        ;
}

static void stream_writable(rpc_server_call_t *call, void *arg)
{
    struct svc *s = arg;
    struct call_state *st = rpc_server_call_user(call);
    const request_t *req = st->req;
    /* The contract: on_writable runs only with an empty FIFO and a free send slot. */
    assert_int_equal(rpc_server_call_pending_sends(call), 0);
    if (req->fail_code && st->next > req->fail_after) {
        fail_call(call, req);
        return;
    }
    if (req->count && st->next > req->count) {
        rpc_server_call_finish(call, GRPC_STATUS_OK, NULL, NULL, 0);
        return;
    }
    reply(call, st->next++, req->payload);
    atomic_fetch_add(&s->produced, 1);
    note_pending(s, call);
}

static void woken_stream_start(rpc_server_call_t *call, const ProtobufCMessage *msg, void *arg)
{
    stream_start(call, msg, arg);
    park(arg, call);
}

/* Produces only while the test thread handed out credits (and woke the call). */
static void woken_stream_writable(rpc_server_call_t *call, void *arg)
{
    struct svc *s = arg;
    struct call_state *st = rpc_server_call_user(call);
    int credits = atomic_load(&s->credits);
    if (credits == 0)
        return;
    atomic_fetch_sub(&s->credits, 1);
    if (st->req->count && st->next > st->req->count) {
        rpc_server_call_finish(call, GRPC_STATUS_OK, NULL, NULL, 0);
        return;
    }
    ProtobufCBinaryData none = {0, NULL};
    reply(call, st->next++, none);
}

/* ---- common -------------------------------------------------------------------------------- */

static void call_done(rpc_server_call_t *call, bool cancelled, void *arg)
{
    struct svc *s = arg;
    struct call_state *st = rpc_server_call_user(call);
    assert_non_null(st);
    if (st->req)
        libvarlog__transporttest__request__free_unpacked(st->req, NULL);
    free(st);
    rpc_server_call_set_user(call, NULL);
    /* The call is over: the API refuses further work without touching gRPC. */
    assert_int_equal(rpc_server_call_finish(call, GRPC_STATUS_OK, NULL, NULL, 0), VARLOG_ERR_STATE);
    rpc_server_call_wake(call);
    /* done last: a test that waits for done == started then reads done_cancelled. */
    if (cancelled)
        atomic_fetch_add(&s->done_cancelled, 1);
    atomic_fetch_add(&s->done, 1);
}

static void svc_methods(struct svc *s)
{
    rpc_method_t m[5] = {
        {UNARY, RPC_METHOD_UNARY, request_desc, unary_start, NULL, NULL, NULL, call_done, s},
        {BIDI, RPC_METHOD_BIDI, request_desc, bidi_start, bidi_message, bidi_half_close, NULL,
         call_done, s},
        {SERVER_STREAM, RPC_METHOD_SERVER_STREAM, request_desc, stream_start, NULL, NULL,
         stream_writable, call_done, s},
        {PAUSED_BIDI, RPC_METHOD_BIDI, request_desc, paused_bidi_start, paused_bidi_message,
         bidi_half_close, NULL, call_done, s},
        {WOKEN_STREAM, RPC_METHOD_SERVER_STREAM, request_desc, woken_stream_start, NULL, NULL,
         woken_stream_writable, call_done, s},
    };
    memcpy(s->methods, m, sizeof(m));
}

varlog_err_t svc_start(struct svc *s, int port)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    svc_methods(s);
    char listen[64];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    rpc_server_opts_t opts = {listen, s->methods, 5};
    varlog_err_t err = rpc_server_start(&opts, &s->srv);
    if (err != VARLOG_OK) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        return err;
    }
    s->live = true;
    s->port = rpc_server_port(s->srv);
    snprintf(s->addr, sizeof(s->addr), "127.0.0.1:%d", s->port);
    assert_int_equal(pthread_create(&s->delayer, NULL, delayer_main, s), 0);
    return VARLOG_OK;
}

void svc_stop(struct svc *s)
{
    if (!s->live)
        return;
    s->live = false;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->delayer, NULL);
    rpc_server_stop(s->srv); /* NULL when the test stopped it */
    s->srv = NULL;
    if (s->parked)
        svc_unpark(s);
    /* Every call whose handler started saw on_done exactly once (a second on_done would
     * also free its state twice). */
    assert_int_equal(atomic_load(&s->done), atomic_load(&s->started));
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}
