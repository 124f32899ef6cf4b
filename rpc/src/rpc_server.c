/* Server side of the transport: see rpc_server.h. */
#include "rpc_server.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc_security.h>

#include "bb_fifo.h"
#include "wire.h"

/* Enough pending request_call slots that a burst of new calls does not wait for the server
 * thread to re-arm; each slot is one preallocated call object. */
#define SRV_PENDING_REQUESTS 8

/* What the server thread receives as a completion-queue tag: it just calls fn. */
struct srv_tag {
    void (*fn)(struct srv_tag *tag, bool ok);
};

struct rpc_server {
    grpc_server *server;
    grpc_completion_queue *cq;
    pthread_t thread;
    int port;
    const rpc_method_t *methods;
    size_t n_methods;
    struct srv_tag shutdown_tag;
    atomic_bool stopping; /* written by rpc_server_stop, read by the server thread */

    /* Server thread only. The queue is shut down once the server's shutdown tag came back,
     * every request slot returned and every call finished: after that no batch may start. */
    size_t requests_pending;
    size_t live_calls;
    bool shutdown_notified;
    bool cq_shut;
};

struct rpc_server_call {
    rpc_server_t *srv; /* used on the server thread only, and only until the call finished */
    const rpc_method_t *method; /* NULL: unknown method */
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array request_md;
    struct srv_tag new_tag, close_tag, recv_tag, send_tag, kick_tag;
    void *user;

    /* Server thread only. */
    grpc_byte_buffer *recv_bb;
    int close_cancelled;
    bool started; /* on_start ran, so on_done must run */
    bool half_closed;

    pthread_mutex_t mu; /* guards everything below; never held while a handler runs */
    int refs;           /* the server's own + rpc_server_call_ref */
    int batches;        /* batches gRPC has not returned, + 1 while the server thread works */
    bool finished;      /* batches reached 0: grpc_call released, no batch may start */
    bool dead;          /* closed, cancelled or broken: no more sends */
    bool closed;        /* RECV_CLOSE_ON_SERVER returned */
    bool initial_md_sent;
    bool recv_armed, recv_paused, recv_stopped;
    bool kick_pending;
    bool writable_armed;
    bool send_busy;        /* a SEND_MESSAGE or the status is in flight */
    bool status_queued;    /* finish() accepted */
    bool status_started;   /* SEND_STATUS_FROM_SERVER handed to gRPC */
    bool status_delivered; /* ... and gRPC reported it sent */
    bb_fifo_t to_send;
    grpc_byte_buffer *in_flight;
    atomic_size_t pending_sends; /* to_send.count + (in_flight != NULL), for lock-free reads */
    grpc_status_code status_code;
    grpc_slice status_message;
    grpc_metadata status_trailer; /* grpc-status-details-bin, when details were given */
    size_t n_status_trailer;
};

/* A marker, never given to protobuf-c: only its address is compared. */
const ProtobufCMessageDescriptor rpc_raw_request_descriptor = {
    .magic = PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,
    .name = "libvarlog.rpc.RawRequest",
    .short_name = "RawRequest",
    .c_name = "rpc_raw_request_t",
    .package_name = "libvarlog.rpc",
    .sizeof_message = sizeof(rpc_raw_request_t),
};

/* ---- call lifetime ------------------------------------------------------------------------- */

static void on_new_call(struct srv_tag *tag, bool ok);
static void on_close_done(struct srv_tag *tag, bool ok);
static void on_recv_done(struct srv_tag *tag, bool ok);
static void on_send_done(struct srv_tag *tag, bool ok);
static void on_kick(struct srv_tag *tag, bool ok);

static rpc_server_call_t *call_new(rpc_server_t *srv)
{
    rpc_server_call_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NULL;
    }
    /* A call object can outlive its server (a foreign thread's reference), and it may still
     * release gRPC objects then, so it keeps gRPC initialised on its own. */
    wire_grpc_ref();
    c->srv = srv;
    c->refs = 1;
    c->new_tag.fn = on_new_call;
    c->close_tag.fn = on_close_done;
    c->recv_tag.fn = on_recv_done;
    c->send_tag.fn = on_send_done;
    c->kick_tag.fn = on_kick;
    c->writable_armed = true;
    c->status_message = grpc_empty_slice();
    grpc_call_details_init(&c->details);
    grpc_metadata_array_init(&c->request_md);
    atomic_init(&c->pending_sends, 0);
    return c;
}

/* Releases every gRPC object the call holds. Runs once, on the server thread, when no batch
 * is outstanding any more (or the call never existed). */
static void call_release_grpc(rpc_server_call_t *c)
{
    if (c->call)
        grpc_call_unref(c->call);
    c->call = NULL;
    grpc_call_details_destroy(&c->details);
    grpc_metadata_array_destroy(&c->request_md);
    if (c->recv_bb)
        grpc_byte_buffer_destroy(c->recv_bb);
    c->recv_bb = NULL;
    pthread_mutex_lock(&c->mu);
    bb_fifo_clear(&c->to_send);
    if (c->in_flight)
        grpc_byte_buffer_destroy(c->in_flight);
    c->in_flight = NULL;
    atomic_store(&c->pending_sends, 0);
    grpc_slice_unref(c->status_message);
    c->status_message = grpc_empty_slice();
    if (c->n_status_trailer)
        grpc_slice_unref(c->status_trailer.value);
    c->n_status_trailer = 0;
    pthread_mutex_unlock(&c->mu);
}

static void call_free(rpc_server_call_t *c)
{
    pthread_mutex_destroy(&c->mu);
    free(c);
    wire_grpc_unref();
}

void rpc_server_call_ref(rpc_server_call_t *call)
{
    pthread_mutex_lock(&call->mu);
    call->refs++;
    pthread_mutex_unlock(&call->mu);
}

void rpc_server_call_unref(rpc_server_call_t *call)
{
    if (!call)
        return;
    pthread_mutex_lock(&call->mu);
    bool last = --call->refs == 0;
    pthread_mutex_unlock(&call->mu);
    if (last)
        call_free(call);
}

static void maybe_shutdown_cq(rpc_server_t *srv)
{
    if (srv->cq_shut || !srv->shutdown_notified || srv->requests_pending || srv->live_calls)
        return;
    srv->cq_shut = true;
    grpc_completion_queue_shutdown(srv->cq);
}

/* Starts a batch with c->mu held. A refused batch leaves the call in an unknown state (in
 * 1.51 it can poison every later send), so the call is cancelled and marked dead; the
 * outstanding close batch then brings it down. */
static bool start_locked(rpc_server_call_t *c, const grpc_op *ops, size_t n, struct srv_tag *tag)
{
    if (c->finished)
        return false;
    WIRE_TAG_RELEASE(tag);
    grpc_call_error ce = grpc_call_start_batch(c->call, ops, n, tag, NULL);
    if (ce != GRPC_CALL_OK) {
        grpc_call_cancel(c->call, NULL);
        c->dead = true;
        return false;
    }
    c->batches++;
    return true;
}

/* Hands the next message, or the status once the FIFO drained, to gRPC if the send slot is
 * free. Any thread, c->mu held: gRPC lets send-only batches be synchronised apart from
 * receives, and every send batch starts under this lock. */
static void pump_locked(rpc_server_call_t *c)
{
    if (c->send_busy || c->dead || c->finished || c->status_started)
        return;
    grpc_op ops[2];
    memset(ops, 0, sizeof(ops));
    size_t n = 0;
    if (!c->initial_md_sent) {
        ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
        n++;
    }
    if (c->to_send.count) {
        grpc_byte_buffer *bb = bb_fifo_pop(&c->to_send);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        /* More is queued, so a later write flushes this one. */
        ops[n].flags = c->to_send.count || c->status_queued ? GRPC_WRITE_BUFFER_HINT : 0;
        ops[n].data.send_message.send_message = bb;
        n++;
        c->in_flight = bb;
    } else if (c->status_queued) {
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n].data.send_status_from_server.status = c->status_code;
        ops[n].data.send_status_from_server.status_details = &c->status_message;
        ops[n].data.send_status_from_server.trailing_metadata_count = c->n_status_trailer;
        ops[n].data.send_status_from_server.trailing_metadata =
            c->n_status_trailer ? &c->status_trailer : NULL;
        n++;
        c->status_started = true;
    } else {
        return;
    }
    c->send_busy = true;
    c->initial_md_sent = true;
    if (!start_locked(c, ops, n, &c->send_tag)) {
        c->send_busy = false;
        if (c->in_flight) {
            grpc_byte_buffer_destroy(c->in_flight);
            c->in_flight = NULL;
            atomic_fetch_sub(&c->pending_sends, 1);
        }
    }
}

/* Server thread: keeps one RECV_MESSAGE outstanding on bidi calls while reading is wanted. */
static void arm_recv(rpc_server_call_t *c)
{
    pthread_mutex_lock(&c->mu);
    if (!c->recv_armed && !c->recv_paused && !c->recv_stopped && !c->half_closed && !c->dead &&
        !c->status_queued) {
        grpc_op op;
        memset(&op, 0, sizeof(op));
        op.op = GRPC_OP_RECV_MESSAGE;
        op.data.recv_message.recv_message = &c->recv_bb;
        c->recv_armed = start_locked(c, &op, 1, &c->recv_tag);
    }
    pthread_mutex_unlock(&c->mu);
}

/* Posts the kick tag (an empty batch completes at once) so that the server thread looks at
 * the call again. c->mu held; the batch count keeps the call alive until the tag returns. */
static void kick_locked(rpc_server_call_t *c)
{
    if (c->kick_pending || c->finished || c->dead)
        return;
    c->kick_pending = start_locked(c, NULL, 0, &c->kick_tag);
}

/* Server thread: runs on_writable if the call asked for it and can take a message now. */
static void maybe_writable(rpc_server_call_t *c)
{
    if (!c->started || !c->method->on_writable)
        return;
    pthread_mutex_lock(&c->mu);
    bool run = c->writable_armed && !c->send_busy && c->to_send.count == 0 && !c->dead &&
               !c->status_queued && !c->finished;
    if (run)
        c->writable_armed = false;
    pthread_mutex_unlock(&c->mu);
    if (run)
        c->method->on_writable(c, c->method->arg);
}

/* Server thread, at the end of every event of the call: drops the batch the event stood for;
 * the last one finishes the call. */
static void release_batch(rpc_server_call_t *c)
{
    pthread_mutex_lock(&c->mu);
    bool last = --c->batches == 0;
    if (last) {
        c->finished = true;
        c->dead = true;
    }
    bool cancelled = c->close_cancelled || !c->status_delivered;
    pthread_mutex_unlock(&c->mu);
    if (!last)
        return;
    rpc_server_t *srv = c->srv;
    c->srv = NULL;
    call_release_grpc(c);
    if (c->started && c->method->on_done)
        c->method->on_done(c, cancelled, c->method->arg);
    srv->live_calls--;
    maybe_shutdown_cq(srv);
    rpc_server_call_unref(c);
}

/* ---- events -------------------------------------------------------------------------------- */

static void post_request(rpc_server_t *srv)
{
    rpc_server_call_t *c = call_new(srv);
    if (!c)
        return; /* the other slots keep serving; the next new call tries again */
    WIRE_TAG_RELEASE(&c->new_tag);
    grpc_call_error ce = grpc_server_request_call(srv->server, &c->call, &c->details,
                                                  &c->request_md, srv->cq, srv->cq, &c->new_tag);
    if (ce != GRPC_CALL_OK) {
        call_release_grpc(c);
        call_free(c);
        return;
    }
    srv->requests_pending++;
}

static const rpc_method_t *find_method(const rpc_server_t *srv, grpc_slice path)
{
    for (size_t i = 0; i < srv->n_methods; i++) {
        if (grpc_slice_str_cmp(path, srv->methods[i].path) == 0)
            return &srv->methods[i];
    }
    return NULL;
}

static varlog_err_t finish_call(rpc_server_call_t *call, grpc_status_code code, const char *message,
                                const char *const *details, size_t n_details);

/* gRPC-Go's UNIMPLEMENTED texts for a path no method matches, which clients show as they
 * are: "unknown service S" when no registered method is of service S, "unknown method M
 * for service S" when some is, "malformed method name: \"P\"" without a '/'. */
static void unknown_method_text(const rpc_server_t *srv, grpc_slice path, char *buf, size_t size)
{
    const char *p = (const char *)GRPC_SLICE_START_PTR(path);
    size_t len = GRPC_SLICE_LENGTH(path);
    size_t skip = len > 0 && p[0] == '/' ? 1 : 0;
    const char *slash = NULL;
    for (size_t i = skip; i < len; i++) {
        if (p[i] == '/')
            slash = p + i;
    }
    if (!slash) {
        snprintf(buf, size, "malformed method name: \"%.*s\"", (int)len, p);
        return;
    }
    const char *service = p + skip;
    size_t slen = (size_t)(slash - service);
    bool known = false;
    for (size_t i = 0; i < srv->n_methods && !known; i++) {
        const char *mp = srv->methods[i].path;
        mp += mp[0] == '/';
        known = strncmp(mp, service, slen) == 0 && mp[slen] == '/';
    }
    if (known)
        snprintf(buf, size, "unknown method %.*s for service %.*s",
                 (int)(len - (size_t)(slash + 1 - p)), slash + 1, (int)slen, service);
    else
        snprintf(buf, size, "unknown service %.*s", (int)slen, service);
}

static void on_new_call(struct srv_tag *tag, bool ok)
{
    rpc_server_call_t *c = VARLOG_CONTAINER_OF(tag, rpc_server_call_t, new_tag);
    rpc_server_t *srv = c->srv;
    srv->requests_pending--;
    if (!ok) {
        /* The server is shutting down and gave the slot back. */
        call_release_grpc(c);
        call_free(c);
        maybe_shutdown_cq(srv);
        return;
    }
    bool stopping = atomic_load(&srv->stopping);
    if (!stopping)
        post_request(srv);
    srv->live_calls++;
    c->method = find_method(srv, c->details.method);

    pthread_mutex_lock(&c->mu);
    c->batches = 1; /* this event */
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &c->close_cancelled;
    /* The only way to learn that the client went away or the server cancelled the call. */
    start_locked(c, &op, 1, &c->close_tag);
    if (stopping) {
        /* Matched after cancel_all_calls may have run: end it here. */
        grpc_call_cancel_with_status(c->call, GRPC_STATUS_UNAVAILABLE, "server stopping", NULL);
        c->dead = true;
    } else if (c->method) {
        grpc_op ops[2];
        memset(ops, 0, sizeof(ops));
        /* Headers go out at once, so clients see the stream open before any response. */
        ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
        ops[1].op = GRPC_OP_RECV_MESSAGE;
        ops[1].data.recv_message.recv_message = &c->recv_bb;
        c->initial_md_sent = true;
        c->recv_armed = start_locked(c, ops, 2, &c->recv_tag);
    }
    pthread_mutex_unlock(&c->mu);

    if (!stopping && !c->method) {
        char text[256];
        unknown_method_text(srv, c->details.method, text, sizeof(text));
        finish_call(c, GRPC_STATUS_UNIMPLEMENTED, text, NULL, 0);
    } else if (!stopping && c->method->kind == RPC_METHOD_BIDI) {
        c->started = true;
        c->method->on_start(c, NULL, c->method->arg);
        maybe_writable(c);
    }
    release_batch(c);
}

static void on_close_done(struct srv_tag *tag, bool ok)
{
    rpc_server_call_t *c = VARLOG_CONTAINER_OF(tag, rpc_server_call_t, close_tag);
    pthread_mutex_lock(&c->mu);
    c->closed = true;
    c->dead = true;
    if (!ok)
        c->close_cancelled = 1;
    pthread_mutex_unlock(&c->mu);
    release_batch(c);
}

static void on_recv_done(struct srv_tag *tag, bool ok)
{
    rpc_server_call_t *c = VARLOG_CONTAINER_OF(tag, rpc_server_call_t, recv_tag);
    const rpc_method_t *m = c->method;
    grpc_byte_buffer *bb = c->recv_bb;
    c->recv_bb = NULL;
    pthread_mutex_lock(&c->mu);
    c->recv_armed = false;
    if (!ok)
        c->recv_stopped = true;
    pthread_mutex_unlock(&c->mu);

    if (!ok)
        goto out;
    if (!bb) {
        c->half_closed = true;
        if (m->kind != RPC_METHOD_BIDI)
            finish_call(c, GRPC_STATUS_INVALID_ARGUMENT, "missing request", NULL, 0);
        else if (m->on_half_close)
            m->on_half_close(c, m->arg);
        else
            finish_call(c, GRPC_STATUS_OK, NULL, NULL, 0);
        goto out;
    }
    rpc_raw_request_t raw = {PROTOBUF_C_MESSAGE_INIT(&rpc_raw_request_descriptor), bb};
    bool is_raw = m->request == &rpc_raw_request_descriptor;
    ProtobufCMessage *req = is_raw ? &raw.base : wire_unpack(m->request, bb);
    if (!is_raw) {
        grpc_byte_buffer_destroy(bb);
        bb = NULL;
    }
    if (!req) {
        pthread_mutex_lock(&c->mu);
        c->recv_stopped = true;
        pthread_mutex_unlock(&c->mu);
        finish_call(c, GRPC_STATUS_INVALID_ARGUMENT, "cannot decode request", NULL, 0);
        goto out;
    }
    if (m->kind == RPC_METHOD_BIDI) {
        if (m->on_message)
            m->on_message(c, req, m->arg);
        if (!is_raw)
            protobuf_c_message_free_unpacked(req, NULL);
        arm_recv(c);
    } else {
        /* The single request is in: the client's half-close is of no interest. */
        c->started = true;
        m->on_start(c, req, m->arg);
        if (!is_raw)
            protobuf_c_message_free_unpacked(req, NULL);
    }
    maybe_writable(c);
out:
    if (bb)
        grpc_byte_buffer_destroy(bb);
    release_batch(c);
}

static void on_send_done(struct srv_tag *tag, bool ok)
{
    rpc_server_call_t *c = VARLOG_CONTAINER_OF(tag, rpc_server_call_t, send_tag);
    pthread_mutex_lock(&c->mu);
    c->send_busy = false;
    if (c->in_flight) {
        grpc_byte_buffer_destroy(c->in_flight);
        c->in_flight = NULL;
        atomic_fetch_sub(&c->pending_sends, 1);
    } else if (c->status_started) {
        c->status_delivered = ok;
    }
    if (!ok) {
        c->dead = true; /* cancelled or broken: the close batch will tell */
    } else {
        pump_locked(c);
        if (!c->send_busy)
            c->writable_armed = true;
    }
    pthread_mutex_unlock(&c->mu);
    maybe_writable(c);
    release_batch(c);
}

static void on_kick(struct srv_tag *tag, bool ok)
{
    (void)ok;
    rpc_server_call_t *c = VARLOG_CONTAINER_OF(tag, rpc_server_call_t, kick_tag);
    pthread_mutex_lock(&c->mu);
    c->kick_pending = false;
    pthread_mutex_unlock(&c->mu);
    if (c->started && c->method->kind == RPC_METHOD_BIDI)
        arm_recv(c);
    maybe_writable(c);
    release_batch(c);
}

static void on_shutdown_notified(struct srv_tag *tag, bool ok)
{
    (void)ok;
    rpc_server_t *srv = VARLOG_CONTAINER_OF(tag, rpc_server_t, shutdown_tag);
    srv->shutdown_notified = true;
    maybe_shutdown_cq(srv);
}

static void run_loop(rpc_server_t *srv)
{
    for (;;) {
        grpc_event ev =
            grpc_completion_queue_next(srv->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            return;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        struct srv_tag *tag = ev.tag;
        WIRE_TAG_ACQUIRE(tag);
        tag->fn(tag, ev.success != 0);
    }
}

static void *server_main(void *arg)
{
    run_loop(arg);
    return NULL;
}

/* ---- server -------------------------------------------------------------------------------- */

static bool opts_valid(const rpc_server_opts_t *opts)
{
    if (!opts || !opts->listen_addr || !opts->methods || opts->n_methods == 0)
        return false;
    for (size_t i = 0; i < opts->n_methods; i++) {
        const rpc_method_t *m = &opts->methods[i];
        if (!m->path || m->path[0] != '/' || !m->request || !m->on_start)
            return false;
        if (m->kind != RPC_METHOD_UNARY && m->kind != RPC_METHOD_SERVER_STREAM &&
            m->kind != RPC_METHOD_BIDI)
            return false;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(opts->methods[j].path, m->path) == 0)
                return false;
        }
    }
    return true;
}

/* Shuts down what rpc_server_start built, whether or not the server thread runs. */
static void begin_shutdown(rpc_server_t *srv)
{
    atomic_store(&srv->stopping, true);
    WIRE_TAG_RELEASE(&srv->shutdown_tag);
    grpc_server_shutdown_and_notify(srv->server, srv->cq, &srv->shutdown_tag);
    /* Without this, shutdown waits for every live stream to end on its own. */
    grpc_server_cancel_all_calls(srv->server);
}

static void destroy_server(rpc_server_t *srv)
{
    grpc_server_destroy(srv->server);
    grpc_completion_queue_destroy(srv->cq);
    free(srv);
    wire_grpc_unref();
}

varlog_err_t rpc_server_start(const rpc_server_opts_t *opts, rpc_server_t **out)
{
    if (!out)
        return VARLOG_ERR_INVALID_ARG;
    *out = NULL;
    if (!opts_valid(opts))
        return VARLOG_ERR_INVALID_ARG;
    rpc_server_t *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return VARLOG_ERR_NOMEM;
    wire_grpc_ref();
    srv->methods = opts->methods;
    srv->n_methods = opts->n_methods;
    srv->shutdown_tag.fn = on_shutdown_notified;
    atomic_init(&srv->stopping, false);
    srv->cq = grpc_completion_queue_create_for_next(NULL);
    srv->server = grpc_server_create(wire_channel_args(WIRE_ARGS_SERVER), NULL);
    grpc_server_register_completion_queue(srv->server, srv->cq, NULL);
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    srv->port = grpc_server_add_http2_port(srv->server, opts->listen_addr, creds);
    grpc_server_credentials_release(creds);
    if (srv->port <= 0) {
        /* Never started: no calls, no pending tags, so the queue drains at once. */
        grpc_completion_queue_shutdown(srv->cq);
        while (
            grpc_completion_queue_next(srv->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
            GRPC_QUEUE_SHUTDOWN)
            ;
        destroy_server(srv);
        return VARLOG_ERR_RPC_UNAVAILABLE;
    }
    grpc_server_start(srv->server);
    for (int i = 0; i < SRV_PENDING_REQUESTS; i++)
        post_request(srv);
    if (srv->requests_pending == 0 || pthread_create(&srv->thread, NULL, server_main, srv) != 0) {
        begin_shutdown(srv);
        run_loop(srv);
        destroy_server(srv);
        return VARLOG_ERR_NOMEM;
    }
    pthread_setname_np(srv->thread, "varlog-server");
    *out = srv;
    return VARLOG_OK;
}

int rpc_server_port(const rpc_server_t *srv)
{
    return srv ? srv->port : 0;
}

void rpc_server_stop(rpc_server_t *srv)
{
    if (!srv)
        return;
    begin_shutdown(srv);
    pthread_join(srv->thread, NULL);
    destroy_server(srv);
}

/* ---- call API ------------------------------------------------------------------------------ */

void rpc_server_call_set_user(rpc_server_call_t *call, void *user)
{
    call->user = user;
}

void *rpc_server_call_user(const rpc_server_call_t *call)
{
    return call->user;
}

const rpc_method_t *rpc_server_call_method(const rpc_server_call_t *call)
{
    return call->method;
}

static bool accepts_sends_locked(const rpc_server_call_t *c)
{
    return !c->finished && !c->dead && !c->status_queued;
}

/* Queues bb (taken) for sending. */
static varlog_err_t send_bb(rpc_server_call_t *call, grpc_byte_buffer *bb)
{
    if (!bb)
        return VARLOG_ERR_NOMEM;
    varlog_err_t err = VARLOG_OK;
    pthread_mutex_lock(&call->mu);
    if (!accepts_sends_locked(call)) {
        err = VARLOG_ERR_STATE;
    } else if (!bb_fifo_push(&call->to_send, bb)) {
        err = VARLOG_ERR_NOMEM;
    } else {
        bb = NULL;
        atomic_fetch_add(&call->pending_sends, 1);
        pump_locked(call);
    }
    pthread_mutex_unlock(&call->mu);
    if (bb)
        grpc_byte_buffer_destroy(bb);
    return err;
}

/* Whether the call still takes messages. Checked before encoding so that nothing is packed
 * for a call that is over (gRPC may be shut down by then); send_bb checks again because the
 * call may end meanwhile. */
static bool accepts_sends(rpc_server_call_t *call)
{
    pthread_mutex_lock(&call->mu);
    bool open = accepts_sends_locked(call);
    pthread_mutex_unlock(&call->mu);
    return open;
}

varlog_err_t rpc_server_call_send(rpc_server_call_t *call, const ProtobufCMessage *msg)
{
    if (!call || !msg)
        return VARLOG_ERR_INVALID_ARG;
    if (!accepts_sends(call))
        return VARLOG_ERR_STATE;
    return send_bb(call, wire_pack(msg));
}

varlog_err_t rpc_server_call_send_slice(rpc_server_call_t *call, grpc_slice msg)
{
    if (!call)
        return VARLOG_ERR_INVALID_ARG;
    if (!accepts_sends(call))
        return VARLOG_ERR_STATE;
    /* The byte buffer takes its own reference on the slice. */
    return send_bb(call, grpc_raw_byte_buffer_create(&msg, 1));
}

static varlog_err_t finish_call(rpc_server_call_t *call, grpc_status_code code, const char *message,
                                const char *const *details, size_t n_details)
{
    pthread_mutex_lock(&call->mu);
    bool open = accepts_sends_locked(call);
    pthread_mutex_unlock(&call->mu);
    if (!open)
        return VARLOG_ERR_STATE;
    grpc_slice trailer = grpc_empty_slice();
    if (n_details > 0 && !wire_status_details_encode(code, message, details, n_details, &trailer))
        return VARLOG_ERR_NOMEM;
    grpc_slice text = grpc_slice_from_copied_string(message ? message : "");
    varlog_err_t err = VARLOG_OK;
    pthread_mutex_lock(&call->mu);
    if (!accepts_sends_locked(call)) {
        err = VARLOG_ERR_STATE;
    } else {
        call->status_queued = true;
        call->status_code = code;
        grpc_slice_unref(call->status_message);
        call->status_message = text;
        text = grpc_empty_slice();
        if (n_details > 0) {
            /* A -bin key: gRPC base64-encodes the raw bytes on the wire. */
            call->status_trailer.key = grpc_slice_from_static_string(WIRE_STATUS_DETAILS_KEY);
            call->status_trailer.value = trailer;
            call->n_status_trailer = 1;
            trailer = grpc_empty_slice();
        }
        pump_locked(call);
    }
    pthread_mutex_unlock(&call->mu);
    grpc_slice_unref(text);
    grpc_slice_unref(trailer);
    return err;
}

varlog_err_t rpc_server_call_finish(rpc_server_call_t *call, grpc_status_code code,
                                    const char *message, const char *const *details,
                                    size_t n_details)
{
    if (!call || (n_details > 0 && !details))
        return VARLOG_ERR_INVALID_ARG;
    return finish_call(call, code, message, details, n_details);
}

void rpc_server_call_pause_recv(rpc_server_call_t *call, bool paused)
{
    pthread_mutex_lock(&call->mu);
    bool resume = call->recv_paused && !paused;
    call->recv_paused = paused;
    /* Receives start only on the server thread; the kick gets it to re-arm. */
    if (resume)
        kick_locked(call);
    pthread_mutex_unlock(&call->mu);
}

void rpc_server_call_wake(rpc_server_call_t *call)
{
    pthread_mutex_lock(&call->mu);
    call->writable_armed = true;
    kick_locked(call);
    pthread_mutex_unlock(&call->mu);
}

size_t rpc_server_call_pending_sends(const rpc_server_call_t *call)
{
    return atomic_load(&call->pending_sends);
}
