#include "echo_service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "transport_test.pb-c.h"

typedef Libvarlog__Transporttest__Request request_t;
typedef Libvarlog__Transporttest__Response response_t;

struct echo_delayed {
    echo_delayed_t *next;
    rpc_server_call_t *call;
    int64_t due_ms;
    uint64_t seq;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void reply(rpc_server_call_t *call, uint64_t seq, ProtobufCBinaryData payload)
{
    response_t resp = LIBVARLOG__TRANSPORTTEST__RESPONSE__INIT;
    resp.seq = seq;
    resp.payload = payload;
    rpc_server_call_send(call, &resp.base);
}

static void fail(rpc_server_call_t *call, const request_t *req)
{
    rpc_server_call_finish(call, (grpc_status_code)req->fail_code, req->fail_message,
                           (const char *const *)req->fail_details, req->n_fail_details);
}

/* ---- Unary --------------------------------------------------------------------------------- */

static void unary_start(rpc_server_call_t *call, const ProtobufCMessage *msg, void *arg)
{
    echo_service_t *e = arg;
    const request_t *req = (const request_t *)msg;
    atomic_fetch_add(&e->calls_started, 1);
    if (req->fail_code) {
        fail(call, req);
        return;
    }
    if (req->delay_ms) {
        echo_delayed_t *d = calloc(1, sizeof(*d));
        if (!d)
            abort();
        d->call = call;
        d->seq = req->seq;
        d->due_ms = now_ms() + req->delay_ms;
        rpc_server_call_ref(call);
        pthread_mutex_lock(&e->mu);
        d->next = e->delayed;
        e->delayed = d;
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->mu);
        return;
    }
    reply(call, req->seq, req->payload);
    rpc_server_call_finish(call, GRPC_STATUS_OK, NULL, NULL, 0);
}

static void *delayer_main(void *arg)
{
    echo_service_t *e = arg;
    pthread_mutex_lock(&e->mu);
    while (!e->stopping) {
        int64_t now = now_ms(), next_due = now + 1000;
        for (echo_delayed_t **pp = &e->delayed; *pp;) {
            echo_delayed_t *d = *pp;
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
        pthread_cond_timedwait(&e->cv, &e->mu, &ts);
    }
    while (e->delayed) {
        echo_delayed_t *d = e->delayed;
        e->delayed = d->next;
        rpc_server_call_unref(d->call);
        free(d);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* ---- Bidi ---------------------------------------------------------------------------------- */

struct bidi_state {
    uint32_t answered;
};

static void bidi_start(rpc_server_call_t *call, const ProtobufCMessage *msg, void *arg)
{
    (void)msg;
    echo_service_t *e = arg;
    atomic_fetch_add(&e->calls_started, 1);
    struct bidi_state *st = calloc(1, sizeof(*st));
    if (!st)
        abort();
    rpc_server_call_set_user(call, st);
}

static void bidi_message(rpc_server_call_t *call, const ProtobufCMessage *msg, void *arg)
{
    echo_service_t *e = arg;
    const request_t *req = (const request_t *)msg;
    struct bidi_state *st = rpc_server_call_user(call);
    atomic_fetch_add(&e->bidi_messages, 1);
    if (req->fail_code && st->answered >= req->fail_after) {
        fail(call, req);
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

/* ---- ServerStream -------------------------------------------------------------------------- */

struct stream_state {
    request_t *req; /* a copy: the request is freed after on_start */
    uint64_t next;
};

static void stream_start(rpc_server_call_t *call, const ProtobufCMessage *msg, void *arg)
{
    echo_service_t *e = arg;
    atomic_fetch_add(&e->calls_started, 1);
    struct stream_state *st = calloc(1, sizeof(*st));
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(len ? len : 1);
    if (!st || !buf)
        abort();
    protobuf_c_message_pack(msg, buf);
    st->req = libvarlog__transporttest__request__unpack(NULL, len, buf);
    free(buf);
    st->next = 1;
    rpc_server_call_set_user(call, st);
}

static void stream_writable(rpc_server_call_t *call, void *arg)
{
    echo_service_t *e = arg;
    struct stream_state *st = rpc_server_call_user(call);
    size_t pending = rpc_server_call_pending_sends(call);
    size_t seen = atomic_load(&e->max_pending);
    while (pending > seen && !atomic_compare_exchange_weak(&e->max_pending, &seen, pending))
        ;
    const request_t *req = st->req;
    if (req->fail_code && st->next > req->fail_after) {
        fail(call, req);
        return;
    }
    if (req->count && st->next > req->count) {
        rpc_server_call_finish(call, GRPC_STATUS_OK, NULL, NULL, 0);
        return;
    }
    reply(call, st->next++, req->payload);
    atomic_fetch_add(&e->stream_sent, 1);
}

/* ---- common -------------------------------------------------------------------------------- */

static void call_done(rpc_server_call_t *call, bool cancelled, void *arg)
{
    echo_service_t *e = arg;
    const rpc_method_t *m = rpc_server_call_method(call);
    if (m->kind == RPC_METHOD_SERVER_STREAM) {
        struct stream_state *st = rpc_server_call_user(call);
        if (st) {
            libvarlog__transporttest__request__free_unpacked(st->req, NULL);
            free(st);
        }
    } else {
        free(rpc_server_call_user(call));
    }
    rpc_server_call_set_user(call, NULL);
    atomic_fetch_add(&e->calls_done, 1);
    if (cancelled)
        atomic_fetch_add(&e->calls_cancelled, 1);
}

varlog_err_t echo_service_start(echo_service_t *e, int port)
{
    memset(e, 0, sizeof(*e));
    const ProtobufCMessageDescriptor *rd = &libvarlog__transporttest__request__descriptor;
    rpc_method_t m[3] = {
        {"/libvarlog.transporttest.Transport/Unary", RPC_METHOD_UNARY, rd, unary_start, NULL, NULL,
         NULL, call_done, e},
        {"/libvarlog.transporttest.Transport/Bidi", RPC_METHOD_BIDI, rd, bidi_start, bidi_message,
         bidi_half_close, NULL, call_done, e},
        {"/libvarlog.transporttest.Transport/ServerStream", RPC_METHOD_SERVER_STREAM, rd,
         stream_start, NULL, NULL, stream_writable, call_done, e},
    };
    memcpy(e->methods, m, sizeof(m));
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    char listen[64];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    rpc_server_opts_t opts = {listen, e->methods, 3};
    varlog_err_t err = rpc_server_start(&opts, &e->server);
    if (err != VARLOG_OK) {
        pthread_cond_destroy(&e->cv);
        pthread_mutex_destroy(&e->mu);
        return err;
    }
    e->port = rpc_server_port(e->server);
    snprintf(e->address, sizeof(e->address), "127.0.0.1:%d", e->port);
    pthread_create(&e->delayer, NULL, delayer_main, e);
    return VARLOG_OK;
}

void echo_service_stop(echo_service_t *e)
{
    if (!e->server)
        return;
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->delayer, NULL);
    rpc_server_stop(e->server);
    e->server = NULL;
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
}
