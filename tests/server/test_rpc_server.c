/* The server transport (server/src/rpc_server.h) driven by a small raw gRPC-core client, so
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

#include "rpc_server.h"
#include "test_support.h"
#include "transport_test.pb-c.h"
#include "wire.h"

#define SVC "/libvarlog.transporttest.Transport/"
#define UNARY SVC "Unary"
#define BIDI SVC "Bidi"
#define SERVER_STREAM SVC "ServerStream"
/* Extra paths served only by this test, with the same messages. */
#define PAUSED_BIDI SVC "PausedBidi"
#define WOKEN_STREAM SVC "WokenStream"

#define WAIT_MS 20000

typedef Libvarlog__Transporttest__Request request_t;
typedef Libvarlog__Transporttest__Response response_t;
static const ProtobufCMessageDescriptor *const request_desc =
    &libvarlog__transporttest__request__descriptor;
static const ProtobufCMessageDescriptor *const response_desc =
    &libvarlog__transporttest__response__descriptor;

/* ==== the service ========================================================================== */

#define MAX_DELAYERS 16

struct svc {
    rpc_method_t methods[5];
    rpc_server_t *srv;
    int port;
    char addr[64];
    atomic_int started, done, done_cancelled, bidi_seen;
    atomic_size_t max_pending; /* largest pending_sends seen right after a stream's send */
    atomic_ullong produced;    /* messages produced by server streams */
    atomic_int credits;        /* WokenStream: messages it may produce */
    atomic_int target;         /* what bidi_seen_at_least waits for */
    bool live;                 /* started and not yet stopped */

    pthread_mutex_t mu;
    rpc_server_call_t *parked; /* PausedBidi / WokenStream call, referenced */
    pthread_t delayers[MAX_DELAYERS];
    int n_delayers;
};

/* Per-call state: a copy of the request (it is freed after on_start). */
struct call_state {
    request_t *req;
    uint64_t next;
    uint32_t answered;
};

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

static void unpark(struct svc *s)
{
    pthread_mutex_lock(&s->mu);
    rpc_server_call_t *call = s->parked;
    s->parked = NULL;
    pthread_mutex_unlock(&s->mu);
    rpc_server_call_unref(call);
}

struct delayed {
    rpc_server_call_t *call;
    uint64_t seq;
    uint32_t delay_ms;
};

/* Answers from a thread of its own, as handlers that wait for something else do. */
static void *delayer_main(void *arg)
{
    struct delayed *d = arg;
    struct timespec ts = {(time_t)(d->delay_ms / 1000), (long)(d->delay_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    ProtobufCBinaryData none = {0, NULL};
    reply(d->call, d->seq, none);
    rpc_server_call_finish(d->call, GRPC_STATUS_OK, NULL, NULL, 0);
    rpc_server_call_unref(d->call);
    free(d);
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
        struct delayed *d = calloc(1, sizeof(*d));
        assert_non_null(d);
        d->call = call;
        d->seq = req->seq;
        d->delay_ms = req->delay_ms;
        rpc_server_call_ref(call);
        pthread_mutex_lock(&s->mu);
        assert_true(s->n_delayers < MAX_DELAYERS);
        assert_int_equal(pthread_create(&s->delayers[s->n_delayers++], NULL, delayer_main, d), 0);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    reply(call, req->seq, req->payload);
    assert_int_equal(rpc_server_call_finish(call, GRPC_STATUS_OK, NULL, NULL, 0), VARLOG_OK);
    /* Only the first finish counts, and nothing may be sent after it. */
    assert_int_equal(rpc_server_call_finish(call, GRPC_STATUS_INTERNAL, "late", NULL, 0),
                     VARLOG_ERR_STATE);
    assert_int_equal(rpc_server_call_send(call, msg), VARLOG_ERR_STATE);
}

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
    atomic_fetch_add(&s->done, 1);
    if (cancelled)
        atomic_fetch_add(&s->done_cancelled, 1);
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

static varlog_err_t svc_start(struct svc *s, int port)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    svc_methods(s);
    char listen[64];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    rpc_server_opts_t opts = {listen, s->methods, 5};
    varlog_err_t err = rpc_server_start(&opts, &s->srv);
    if (err != VARLOG_OK) {
        pthread_mutex_destroy(&s->mu);
        return err;
    }
    s->live = true;
    s->port = rpc_server_port(s->srv);
    snprintf(s->addr, sizeof(s->addr), "127.0.0.1:%d", s->port);
    return VARLOG_OK;
}

/* Stops the server (if a test did not already) and joins the answering threads. */
static void svc_stop(struct svc *s)
{
    if (!s->live)
        return;
    s->live = false;
    rpc_server_stop(s->srv); /* NULL when the test stopped it */
    s->srv = NULL;
    for (int i = 0; i < s->n_delayers; i++)
        pthread_join(s->delayers[i], NULL);
    s->n_delayers = 0;
    if (s->parked)
        unpark(s);
    /* Every call whose handler started saw on_done exactly once (a second on_done would
     * also free its state twice). */
    assert_int_equal(atomic_load(&s->done), atomic_load(&s->started));
    pthread_mutex_destroy(&s->mu);
}

/* ==== a raw gRPC-core client =============================================================== */

static grpc_channel *channel_new(int port)
{
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(target, creds, wire_channel_args(WIRE_ARGS_CLIENT));
    grpc_channel_credentials_release(creds);
    assert_non_null(ch);
    return ch;
}

static grpc_byte_buffer *pack_request(const request_t *req)
{
    return wire_pack(&req->base);
}

static grpc_byte_buffer *raw_buffer(const void *data, size_t len)
{
    grpc_slice s = grpc_slice_from_copied_buffer(data, len);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

static void pluck_cq_destroy(grpc_completion_queue *cq)
{
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
}

/* The status as the client saw it, details decoded from grpc-status-details-bin. */
static void read_status(rpc_status_t *st, grpc_status_code code, grpc_slice details,
                        const grpc_metadata_array *trailing)
{
    char *text = grpc_slice_to_c_string(details);
    assert_int_equal(rpc_status_set(st, code, text), VARLOG_OK);
    gpr_free(text);
    rpc_status_read_details(st, trailing);
}

typedef struct unary_result {
    rpc_status_t status;
    response_t *resp;
} unary_result_t;

/* One unary call: the 6-op batch on a pluck queue. Takes req_bb. */
static void unary_raw(grpc_channel *ch, const char *method, grpc_byte_buffer *req_bb,
                      unary_result_t *out)
{
    rpc_status_init(&out->status);
    out->resp = NULL;
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                               grpc_slice_from_static_string(method), NULL,
                                               wire_deadline(WAIT_MS), NULL);
    assert_non_null(call);
    grpc_metadata_array initial, trailing;
    grpc_metadata_array_init(&initial);
    grpc_metadata_array_init(&trailing);
    grpc_byte_buffer *resp_bb = NULL;
    grpc_status_code code = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = req_bb;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &resp_bb;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
    ops[5].data.recv_status_on_client.status = &code;
    ops[5].data.recv_status_on_client.status_details = &details;
    void *tag = (void *)1;
    assert_int_equal(grpc_call_start_batch(call, ops, 6, tag, NULL), GRPC_CALL_OK);
    grpc_event ev = grpc_completion_queue_pluck(cq, tag, wire_deadline(WAIT_MS + 5000), NULL);
    assert_int_equal(ev.type, GRPC_OP_COMPLETE);
    assert_true(ev.success);
    read_status(&out->status, code, details, &trailing);
    if (resp_bb) {
        out->resp = (response_t *)wire_unpack(response_desc, resp_bb);
        assert_non_null(out->resp);
        grpc_byte_buffer_destroy(resp_bb);
    }
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&initial);
    grpc_metadata_array_destroy(&trailing);
    grpc_byte_buffer_destroy(req_bb);
    grpc_call_unref(call);
    pluck_cq_destroy(cq);
}

static void unary_result_clear(unary_result_t *r)
{
    rpc_status_clear(&r->status);
    if (r->resp)
        libvarlog__transporttest__response__free_unpacked(r->resp, NULL);
    r->resp = NULL;
}

/* A streaming call on a next queue of its own, driven by one thread: at most one batch of
 * each kind outstanding, as gRPC requires. */
enum { T_START = 1, T_SEND, T_CLOSE, T_RECV, T_STATUS };

typedef struct cstream {
    grpc_completion_queue *cq;
    grpc_call *call;
    grpc_metadata_array initial, trailing;
    grpc_status_code code;
    grpc_slice details;
    grpc_byte_buffer *start_bb, *send_bb, *recv_bb;
    int pending;
    bool send_busy, recv_busy, recv_ok, status_done;
} cstream_t;

static void cs_start(cstream_t *s, const grpc_op *ops, size_t n, intptr_t tag)
{
    assert_int_equal(grpc_call_start_batch(s->call, ops, n, (void *)tag, NULL), GRPC_CALL_OK);
    s->pending++;
}

/* Opens a call. first (taken) is sent at once and followed by a half-close, for server
 * streams; NULL for bidi. */
static void cs_open(cstream_t *s, grpc_channel *ch, const char *method, grpc_byte_buffer *first)
{
    memset(s, 0, sizeof(*s));
    grpc_metadata_array_init(&s->initial);
    grpc_metadata_array_init(&s->trailing);
    s->details = grpc_empty_slice();
    s->code = GRPC_STATUS_UNKNOWN;
    s->cq = grpc_completion_queue_create_for_next(NULL);
    s->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq,
                                       grpc_slice_from_static_string(method), NULL,
                                       wire_deadline(60000), NULL);
    assert_non_null(s->call);
    grpc_op ops[4];
    memset(ops, 0, sizeof(ops));
    size_t n = 0;
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (first) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = first;
        ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
        s->start_bb = first;
    }
    /* Messages queue behind the initial metadata: without this, no receive completes. */
    ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[n++].data.recv_initial_metadata.recv_initial_metadata = &s->initial;
    cs_start(s, ops, n, T_START);
    grpc_op st;
    memset(&st, 0, sizeof(st));
    st.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    st.data.recv_status_on_client.trailing_metadata = &s->trailing;
    st.data.recv_status_on_client.status = &s->code;
    st.data.recv_status_on_client.status_details = &s->details;
    cs_start(s, &st, 1, T_STATUS);
}

/* Waits for the next completion of s; returns its tag (0 on timeout). */
static intptr_t cs_next(cstream_t *s, int64_t timeout_ms)
{
    grpc_event ev = grpc_completion_queue_next(s->cq, wire_deadline(timeout_ms), NULL);
    if (ev.type != GRPC_OP_COMPLETE)
        return 0;
    s->pending--;
    intptr_t tag = (intptr_t)ev.tag;
    switch (tag) {
    case T_START:
        if (s->start_bb)
            grpc_byte_buffer_destroy(s->start_bb);
        s->start_bb = NULL;
        break;
    case T_SEND:
        grpc_byte_buffer_destroy(s->send_bb);
        s->send_bb = NULL;
        s->send_busy = false;
        break;
    case T_RECV:
        s->recv_busy = false;
        s->recv_ok = ev.success != 0;
        break;
    case T_STATUS:
        s->status_done = true;
        break;
    default:
        break;
    }
    return tag;
}

static void cs_send(cstream_t *s, grpc_byte_buffer *bb)
{
    assert_false(s->send_busy);
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = bb;
    s->send_bb = bb;
    s->send_busy = true;
    cs_start(s, &op, 1, T_SEND);
}

static void cs_close_send(cstream_t *s)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    cs_start(s, &op, 1, T_CLOSE);
}

static void cs_arm_recv(cstream_t *s)
{
    assert_false(s->recv_busy);
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &s->recv_bb;
    s->recv_busy = true;
    cs_start(s, &op, 1, T_RECV);
}

/* Takes the received message, if any: NULL at the end of the stream. */
static response_t *cs_take(cstream_t *s)
{
    if (!s->recv_bb)
        return NULL;
    response_t *r = (response_t *)wire_unpack(response_desc, s->recv_bb);
    assert_non_null(r);
    grpc_byte_buffer_destroy(s->recv_bb);
    s->recv_bb = NULL;
    return r;
}

/* The next message (NULL at the end), other completions handled on the way. */
static response_t *cs_recv(cstream_t *s)
{
    cs_arm_recv(s);
    while (s->recv_busy)
        assert_int_not_equal(cs_next(s, WAIT_MS), 0);
    return cs_take(s);
}

static void cs_wait_idle_send(cstream_t *s)
{
    while (s->send_busy)
        assert_int_not_equal(cs_next(s, WAIT_MS), 0);
}

/* Waits for the status and returns it in st. Messages still on their way are read and
 * dropped: gRPC delivers the status only after them. */
static void cs_wait_status(cstream_t *s, rpc_status_t *st)
{
    bool ended = false;
    while (!s->status_done) {
        if (!s->recv_busy && !ended)
            cs_arm_recv(s);
        intptr_t tag = cs_next(s, WAIT_MS);
        assert_int_not_equal(tag, 0);
        if (tag == T_RECV) {
            response_t *r = cs_take(s);
            if (r)
                libvarlog__transporttest__response__free_unpacked(r, NULL);
            else
                ended = true;
        }
    }
    read_status(st, s->code, s->details, &s->trailing);
}

/* Cancels if still running, waits for every batch, frees everything. */
static void cs_destroy(cstream_t *s)
{
    if (!s->status_done)
        grpc_call_cancel(s->call, NULL);
    while (s->pending) {
        assert_int_not_equal(cs_next(s, WAIT_MS), 0);
        response_t *r = cs_take(s);
        if (r)
            libvarlog__transporttest__response__free_unpacked(r, NULL);
    }
    grpc_call_unref(s->call);
    grpc_metadata_array_destroy(&s->initial);
    grpc_metadata_array_destroy(&s->trailing);
    grpc_slice_unref(s->details);
    grpc_completion_queue_shutdown(s->cq);
    while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(s->cq);
}

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
    unpark(&f->svc);
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
    unpark(&f->svc);
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
    const uint64_t n = (uint64_t)test_scale((long)((32u << 20) / payload_len), 2);
    uint8_t *payload = calloc(1, payload_len);
    assert_non_null(payload);
    request_t req = request(0);
    req.count = n;
    req.payload.data = payload;
    req.payload.len = payload_len;
    cstream_t s;
    int64_t t0 = test_now_ms();
    cs_open(&s, f->ch, SERVER_STREAM, pack_request(&req));
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

static bool threads_settled(void *arg)
{
    struct threads_back *t = arg;
    return test_thread_count() <= t->baseline;
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
