#include "rpc_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct rpc_stream {
    rpc_client_t *client;
    struct rpc_call_link link;
    rpc_stream_opts_t opts;
    rpc_poller_t *poller; /* opts.poller: whose thread completes the call (NULL: the I/O thread) */

    struct rpc_tag send_tag, recv_tag, status_tag;

    pthread_mutex_t mu;
    pthread_cond_t readable;
    /* The caller's handle + the live call. Atomic so rpc_client_destroy can take a reference
     * while holding the client's lock without taking this stream's (the lock order is stream,
     * then client); a linked stream still holds its live-call reference, so it cannot be
     * freed under destroy's feet. */
    atomic_int refs;
    int tags_pending; /* batches gRPC has not completed yet */
    bool finished;    /* call unref'd and unlinked; no gRPC object left */
    bool user_released;
    bool client_closing;
    varlog_err_t sticky; /* first failure; VARLOG_OK while healthy */

    /* send side: one SEND_MESSAGE (or the start / half-close batch) in flight at a time */
    bb_fifo_t to_send;
    grpc_byte_buffer *in_flight;
    bool send_busy;
    bool close_requested, close_started;
    bool send_failed; /* gRPC failed a send batch: the call is broken, its status will say why */
    size_t sent;      /* messages whose send completed successfully */
    size_t sends_cut; /* messages whose send batch started but completed with a failure */

    /* receive side: one RECV_MESSAGE outstanding while `received` has room */
    grpc_metadata_array initial_md;
    grpc_byte_buffer *recv_bb;
    bool recv_armed, recv_eof;
    bb_fifo_t received;
    size_t received_bytes; /* of the messages in `received`, counted with recv_window_bytes */
    /* opts.stamp_arrivals: the arrival time (ns) of each message of `received`, in the same
     * order, in a ring grown by doubling (once it holds the receive window, never again). */
    int64_t *arrivals;
    size_t arrivals_cap, arrivals_head;

    /* status */
    grpc_metadata_array trailing_md;
    grpc_status_code code;
    grpc_slice details;
    bool status_received;
    rpc_status_t status;
};

static void stream_free(rpc_stream_t *s)
{
    bb_fifo_clear(&s->to_send);
    bb_fifo_clear(&s->received);
    free(s->arrivals);
    if (s->in_flight)
        grpc_byte_buffer_destroy(s->in_flight);
    if (s->recv_bb)
        grpc_byte_buffer_destroy(s->recv_bb);
    grpc_metadata_array_destroy(&s->initial_md);
    grpc_metadata_array_destroy(&s->trailing_md);
    grpc_slice_unref(s->details);
    rpc_status_clear(&s->status);
    pthread_cond_destroy(&s->readable);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void rpc_stream_ref(rpc_stream_t *s)
{
    atomic_fetch_add(&s->refs, 1);
}

void rpc_stream_unref(rpc_stream_t *s)
{
    if (atomic_fetch_sub(&s->refs, 1) == 1)
        stream_free(s);
}

rpc_stream_t *rpc_stream_from_link(struct rpc_call_link *link)
{
    return VARLOG_CONTAINER_OF(link, rpc_stream_t, link);
}

static void set_sticky(rpc_stream_t *s, varlog_err_t err)
{
    if (s->sticky == VARLOG_OK)
        s->sticky = err;
}

/* A batch gRPC refused leaves the call in an unknown state (it can poison later sends), so
 * the call is cancelled and the stream failed. Called with s->mu held. */
static bool start_batch_locked(rpc_stream_t *s, const grpc_op *ops, size_t n, struct rpc_tag *tag)
{
    WIRE_TAG_RELEASE(tag);
    grpc_call_error ce = grpc_call_start_batch(s->link.call, ops, n, tag, NULL);
    if (ce != GRPC_CALL_OK) {
        set_sticky(s, VARLOG_ERR_INTERNAL);
        grpc_call_cancel(s->link.call, NULL);
        return false;
    }
    s->tags_pending++;
    return true;
}

/* Reserves the next RECV_MESSAGE while the receive window has room: true when the caller
 * must start it with start_recv once it released s->mu. The reservation (recv_armed, a
 * pending tag) keeps every other thread from starting a receive and the call from being
 * released meanwhile. Called with s->mu held. */
static bool reserve_recv_locked(rpc_stream_t *s)
{
    if (s->recv_armed || s->recv_eof || s->finished || s->received.count >= s->opts.recv_window)
        return false;
    if (s->opts.recv_window_bytes > 0 && s->received_bytes >= s->opts.recv_window_bytes)
        return false;
    s->recv_armed = true;
    s->tags_pending++;
    return true;
}

static void after_event(rpc_stream_t *s, bool readable);

/* Starts the receive reserved by reserve_recv_locked, without s->mu: gRPC lets batches of
 * receives alone be synchronised apart from sends, and grpc_call_start_batch is a third of
 * gRPC's work per message, which the consumer taking a message from the same stream would
 * otherwise wait for (measured: half the futex calls per subscribed entry). */
static void start_recv(rpc_stream_t *s)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &s->recv_bb;
    /* Read before the tag's release: once the batch started, its completion may release
     * the call on the I/O thread (ThreadSanitizer cannot see gRPC order the two). */
    grpc_call *call = s->link.call;
    WIRE_TAG_RELEASE(&s->recv_tag);
    if (grpc_call_start_batch(call, &op, 1, &s->recv_tag, NULL) == GRPC_CALL_OK)
        return;
    pthread_mutex_lock(&s->mu);
    s->recv_armed = false;
    s->tags_pending--;
    set_sticky(s, VARLOG_ERR_INTERNAL);
    grpc_call_cancel(s->link.call, NULL);
    after_event(s, true);
}

/* Starts the next send-side batch if the slot is free. Called with s->mu held. */
static void pump_send_locked(rpc_stream_t *s)
{
    if (s->send_busy || s->finished)
        return;
    grpc_op op;
    memset(&op, 0, sizeof(op));
    if (s->sticky != VARLOG_OK || s->status_received || s->send_failed) {
        bb_fifo_clear(&s->to_send);
        return;
    }
    grpc_byte_buffer *bb = bb_fifo_pop(&s->to_send);
    if (bb) {
        op.op = GRPC_OP_SEND_MESSAGE;
        op.data.send_message.send_message = bb;
        /* Let gRPC coalesce writes while more are queued; the last one flushes. */
        if (s->to_send.count > 0)
            op.flags = GRPC_WRITE_BUFFER_HINT;
        s->in_flight = bb;
        s->send_busy = start_batch_locked(s, &op, 1, &s->send_tag);
        return;
    }
    if (s->close_requested && !s->close_started) {
        op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
        s->close_started = true;
        s->send_busy = start_batch_locked(s, &op, 1, &s->send_tag);
    }
}

/* Releases the gRPC call once nothing is pending and nobody needs more from it: the status
 * arrived and either every message was received, or nobody will read them (cancelled,
 * released, client closing). Called with s->mu held; returns true when the caller must drop
 * the live call's reference after unlocking. */
static bool maybe_finish_locked(rpc_stream_t *s)
{
    if (s->finished || s->tags_pending > 0 || !s->status_received)
        return false;
    bool reading_done =
        s->recv_eof || s->user_released || s->client_closing || s->code != GRPC_STATUS_OK;
    if (!reading_done)
        return false;
    s->finished = true;
    s->recv_eof = true;
    /* Lock order is stream, then client: unlinking here cannot deadlock with destroy, which
     * never holds the client lock while taking a stream's. */
    rpc_client_unlink(s->client, &s->link);
    grpc_call_unref(s->link.call);
    s->link.call = NULL;
    if (s->poller)
        atomic_fetch_sub(&s->poller->live, 1);
    pthread_cond_broadcast(&s->readable);
    return true;
}

/* Common tail of every completion: maybe finish, signal, notify. */
static void after_event(rpc_stream_t *s, bool readable)
{
    bool drop = maybe_finish_locked(s);
    if (readable)
        pthread_cond_broadcast(&s->readable);
    /* Under the lock, and only while the owner holds the stream: once rpc_stream_destroy
     * returned, the hook's argument may be gone. */
    if (readable && s->opts.notify && !s->user_released)
        s->opts.notify(s->opts.notify_arg);
    pthread_mutex_unlock(&s->mu);
    if (drop)
        rpc_stream_unref(s);
}

/* Completion of the send side's current batch: the start batch, a message or the
 * half-close; they share one tag because only one of them is in flight at a time. */
static void on_send_done(struct rpc_tag *tag, bool ok)
{
    rpc_stream_t *s = VARLOG_CONTAINER_OF(tag, rpc_stream_t, send_tag);
    pthread_mutex_lock(&s->mu);
    s->tags_pending--;
    s->send_busy = false;
    if (s->in_flight) {
        grpc_byte_buffer_destroy(s->in_flight);
        s->in_flight = NULL;
        s->sent += ok;
        s->sends_cut += !ok;
    }
    if (!ok)
        s->send_failed = true;
    pump_send_locked(s);
    if (!s->send_busy) /* rpc_stream_sent may wait for the send side to settle */
        pthread_cond_broadcast(&s->readable);
    after_event(s, false);
}

/* Notes the arrival of the message about to join `received` (at its index there). false
 * when the ring could not grow. */
static bool stamp_arrival_locked(rpc_stream_t *s)
{
    size_t n = s->received.count;
    if (n == s->arrivals_cap) {
        size_t cap = s->arrivals_cap ? s->arrivals_cap * 2 : 8;
        int64_t *a = malloc(cap * sizeof(*a));
        if (!a)
            return false;
        for (size_t i = 0; i < n; i++)
            a[i] = s->arrivals[(s->arrivals_head + i) % s->arrivals_cap];
        free(s->arrivals);
        s->arrivals = a;
        s->arrivals_cap = cap;
        s->arrivals_head = 0;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s->arrivals[(s->arrivals_head + n) % s->arrivals_cap] =
        (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    return true;
}

static void on_recv_done(struct rpc_tag *tag, bool ok)
{
    rpc_stream_t *s = VARLOG_CONTAINER_OF(tag, rpc_stream_t, recv_tag);
    bool start = false;
    pthread_mutex_lock(&s->mu);
    s->tags_pending--;
    s->recv_armed = false;
    if (ok && s->recv_bb) {
        size_t len = s->opts.recv_window_bytes > 0 ? grpc_byte_buffer_length(s->recv_bb) : 0;
        if ((!s->opts.stamp_arrivals || stamp_arrival_locked(s)) &&
            bb_fifo_push(&s->received, s->recv_bb)) {
            s->received_bytes += len;
        } else {
            grpc_byte_buffer_destroy(s->recv_bb);
            set_sticky(s, VARLOG_ERR_NOMEM);
            grpc_call_cancel(s->link.call, NULL);
        }
        s->recv_bb = NULL;
        start = reserve_recv_locked(s);
    } else {
        if (s->recv_bb) {
            grpc_byte_buffer_destroy(s->recv_bb);
            s->recv_bb = NULL;
        }
        s->recv_eof = true;
    }
    after_event(s, true);
    if (start)
        start_recv(s);
}

static void on_status_done(struct rpc_tag *tag, bool ok)
{
    (void)ok; /* RECV_STATUS_ON_CLIENT always reports a status */
    rpc_stream_t *s = VARLOG_CONTAINER_OF(tag, rpc_stream_t, status_tag);
    pthread_mutex_lock(&s->mu);
    s->tags_pending--;
    s->status_received = true;
    rpc_status_clear(&s->status);
    s->status.code = s->code;
    s->status.message = wire_slice_strdup(s->details);
    rpc_status_read_details(&s->status, &s->trailing_md);
    if (s->code != GRPC_STATUS_OK)
        set_sticky(s, rpc_status_to_err(&s->status));
    if (s->client_closing && s->code == GRPC_STATUS_CANCELLED)
        s->sticky = VARLOG_ERR_CLOSED;
    bb_fifo_clear(&s->to_send);
    after_event(s, true);
}

/* Most received messages a stream's buffer is sized for when it opens (pointers: 8 KiB). */
#define RECV_RESERVE_MAX 1024

static int64_t call_timeout_ms(const rpc_stream_opts_t *opts)
{
    if (opts->deadline_ms <= 0)
        return opts->timeout_ms;
    int64_t left = opts->deadline_ms - wire_now_ms();
    return left > 0 ? left : 0;
}

varlog_err_t rpc_stream_open(rpc_client_t *c, const char *target, const char *method,
                             const rpc_stream_opts_t *opts, const ProtobufCMessage *request,
                             rpc_stream_t **out)
{
    if (!out)
        return VARLOG_ERR_INVALID_ARG;
    *out = NULL;
    if (!c || !target || !method || !opts || !opts->response || opts->recv_window == 0)
        return VARLOG_ERR_INVALID_ARG;
    if (opts->kind == RPC_STREAM_SERVER && !request)
        return VARLOG_ERR_INVALID_ARG;
    if (opts->poller && opts->poller->client != c)
        return VARLOG_ERR_INVALID_ARG; /* its owner holds c's polling role, no other's */
    rpc_stream_t *s = calloc(1, sizeof(*s));
    if (!s)
        return VARLOG_ERR_NOMEM;
    grpc_byte_buffer *first = request ? wire_pack(request) : NULL;
    if (request && !first) {
        free(s);
        return VARLOG_ERR_NOMEM;
    }
    /* The receive buffer holds at most the window (or, bounded by bytes, some more): sized
     * here, its growth would allocate on the thread that completes receives. */
    (void)bb_fifo_reserve(&s->received, opts->recv_window < RECV_RESERVE_MAX ? opts->recv_window
                                                                             : RECV_RESERVE_MAX);
    s->client = c;
    s->opts = *opts;
    s->poller = opts->poller;
    s->link.kind = RPC_LINK_STREAM;
    s->link.polled = s->poller != NULL;
    s->send_tag.fn = on_send_done;
    s->recv_tag.fn = on_recv_done;
    s->status_tag.fn = on_status_done;
    atomic_init(&s->refs, 2);
    s->code = GRPC_STATUS_UNKNOWN;
    s->details = grpc_empty_slice();
    rpc_status_init(&s->status);
    pthread_mutex_init(&s->mu, NULL);
    wire_cond_init(&s->readable);
    grpc_metadata_array_init(&s->initial_md);
    grpc_metadata_array_init(&s->trailing_md);

    varlog_err_t err = VARLOG_OK;
    pthread_mutex_lock(&s->mu);
    pthread_mutex_lock(&c->mu);
    grpc_channel *ch = c->closing ? NULL : rpc_client_channel_locked(c, target);
    if (ch) {
        grpc_slice method_slice = grpc_slice_from_copied_string(method);
        s->link.call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS,
                                                s->poller ? s->poller->cq : c->cq, method_slice,
                                                NULL, wire_deadline(call_timeout_ms(opts)), NULL);
        grpc_slice_unref(method_slice);
    }
    if (!ch)
        err = c->closing ? VARLOG_ERR_CLOSED : VARLOG_ERR_NOMEM;
    else if (!s->link.call)
        err = VARLOG_ERR_INTERNAL;
    else
        rpc_client_link_locked(c, &s->link);
    if (err == VARLOG_OK && s->poller)
        atomic_fetch_add(&s->poller->live, 1);
    pthread_mutex_unlock(&c->mu);
    if (err != VARLOG_OK) {
        pthread_mutex_unlock(&s->mu);
        if (first)
            grpc_byte_buffer_destroy(first);
        atomic_store(&s->refs, 1);
        rpc_stream_unref(s);
        return err;
    }

    /* Three batches: the send side's start, the status, and the first receive, which must
     * carry RECV_INITIAL_METADATA or no message is ever delivered. */
    grpc_op ops[3];
    memset(ops, 0, sizeof(ops));
    size_t n = 0;
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (opts->wait_for_ready)
        ops[n].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY;
    n++;
    if (opts->kind == RPC_STREAM_SERVER) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = first;
        ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
        s->in_flight = first;
        s->close_requested = s->close_started = true;
    } else if (first && !bb_fifo_push(&s->to_send, first)) {
        grpc_byte_buffer_destroy(first);
        set_sticky(s, VARLOG_ERR_NOMEM);
    }
    s->send_busy = start_batch_locked(s, ops, n, &s->send_tag);

    grpc_op status_op;
    memset(&status_op, 0, sizeof(status_op));
    status_op.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    status_op.data.recv_status_on_client.trailing_metadata = &s->trailing_md;
    status_op.data.recv_status_on_client.status = &s->code;
    status_op.data.recv_status_on_client.status_details = &s->details;
    if (!start_batch_locked(s, &status_op, 1, &s->status_tag)) {
        /* Without a status batch the call could never finish: fake its end. */
        s->status_received = true;
        s->code = GRPC_STATUS_INTERNAL;
    }

    grpc_op recv_ops[2];
    memset(recv_ops, 0, sizeof(recv_ops));
    recv_ops[0].op = GRPC_OP_RECV_INITIAL_METADATA;
    recv_ops[0].data.recv_initial_metadata.recv_initial_metadata = &s->initial_md;
    recv_ops[1].op = GRPC_OP_RECV_MESSAGE;
    recv_ops[1].data.recv_message.recv_message = &s->recv_bb;
    s->recv_armed = start_batch_locked(s, recv_ops, 2, &s->recv_tag);
    if (!s->recv_armed)
        s->recv_eof = true;

    if (s->sticky != VARLOG_OK) {
        err = s->sticky;
        s->user_released = true;
        if (s->link.call)
            grpc_call_cancel(s->link.call, NULL);
        after_event(s, false); /* unlocks; finishes when the cancelled batches return */
        rpc_stream_unref(s);
        return err;
    }
    pthread_mutex_unlock(&s->mu);
    *out = s;
    return VARLOG_OK;
}

/* Waits, with s->mu held, for something to change on the stream until `until` (NULL = no
 * limit); ETIMEDOUT once it passed. The owner of the stream's poller polls instead, until
 * until_ms (the same time on the wire_now_ms clock; INT64_MAX = no limit): nobody else would
 * complete the call. */
static int stream_wait_locked(rpc_stream_t *s, const struct timespec *until, int64_t until_ms)
{
    if (s->poller && rpc_poller_owned(s->poller)) {
        pthread_mutex_unlock(&s->mu);
        rpc_poller_poll(s->poller, until_ms);
        pthread_mutex_lock(&s->mu);
        return until_ms != INT64_MAX && wire_now_ms() >= until_ms ? ETIMEDOUT : 0;
    }
    if (!until)
        return pthread_cond_wait(&s->readable, &s->mu);
    return pthread_cond_timedwait(&s->readable, &s->mu, until);
}

/* The error an operation on a stream that can no longer send gets. Called with s->mu held. */
static varlog_err_t send_refusal_locked(const rpc_stream_t *s)
{
    if (s->sticky != VARLOG_OK)
        return s->sticky;
    if (s->status_received || s->finished)
        return VARLOG_ERR_CLOSED;
    if (s->send_failed) /* the status that explains it is on its way */
        return VARLOG_ERR_RPC_UNAVAILABLE;
    if (s->opts.kind != RPC_STREAM_BIDI || s->close_requested)
        return VARLOG_ERR_STATE;
    return VARLOG_OK;
}

/* The early look senders take before building a message: a stream that cannot send any more
 * costs them no encoding. send_buffer looks again under the lock. */
static varlog_err_t send_refusal(rpc_stream_t *s)
{
    pthread_mutex_lock(&s->mu);
    varlog_err_t err = send_refusal_locked(s);
    pthread_mutex_unlock(&s->mu);
    return err;
}

/* Queues bb (consumed whatever the outcome). */
static varlog_err_t send_buffer(rpc_stream_t *s, grpc_byte_buffer *bb)
{
    pthread_mutex_lock(&s->mu);
    varlog_err_t err = send_refusal_locked(s);
    if (err == VARLOG_OK && !bb_fifo_push(&s->to_send, bb))
        err = VARLOG_ERR_NOMEM;
    if (err == VARLOG_OK)
        pump_send_locked(s);
    pthread_mutex_unlock(&s->mu);
    if (err != VARLOG_OK)
        grpc_byte_buffer_destroy(bb);
    return err;
}

varlog_err_t rpc_stream_send(rpc_stream_t *s, const ProtobufCMessage *msg)
{
    if (!s || !msg)
        return VARLOG_ERR_INVALID_ARG;
    varlog_err_t err = send_refusal(s);
    if (err != VARLOG_OK)
        return err;
    /* Encode outside the lock: it is the expensive part and needs no shared state. */
    grpc_byte_buffer *bb = wire_pack(msg);
    if (!bb)
        return VARLOG_ERR_NOMEM;
    return send_buffer(s, bb);
}

varlog_err_t rpc_stream_send_slices(rpc_stream_t *s, const grpc_slice *slices, size_t n)
{
    if (!s || (!slices && n))
        return VARLOG_ERR_INVALID_ARG;
    varlog_err_t err = send_refusal(s);
    if (err != VARLOG_OK)
        return err;
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create((grpc_slice *)slices, n);
    if (!bb)
        return VARLOG_ERR_NOMEM;
    return send_buffer(s, bb);
}

varlog_err_t rpc_stream_send_shared(rpc_stream_t *s, const void *head, size_t head_len,
                                    grpc_slice body)
{
    if (!head && head_len)
        return VARLOG_ERR_INVALID_ARG;
    /* A head this small is inlined in the slice itself: no allocation. The byte buffer takes
     * its own references to both slices. */
    grpc_slice slices[2] = {grpc_slice_from_copied_buffer(head, head_len), body};
    varlog_err_t err = rpc_stream_send_slices(s, slices, 2);
    grpc_slice_unref(slices[0]);
    return err;
}

varlog_err_t rpc_stream_close_send(rpc_stream_t *s)
{
    if (!s)
        return VARLOG_ERR_INVALID_ARG;
    pthread_mutex_lock(&s->mu);
    varlog_err_t err = send_refusal_locked(s);
    if (err == VARLOG_OK) {
        s->close_requested = true;
        pump_send_locked(s);
    }
    pthread_mutex_unlock(&s->mu);
    return err;
}

varlog_err_t rpc_stream_recv(rpc_stream_t *s, int64_t timeout_ms, ProtobufCMessage **msg)
{
    if (!s || !msg)
        return VARLOG_ERR_INVALID_ARG;
    *msg = NULL;
    grpc_byte_buffer *bb = NULL;
    varlog_err_t err = rpc_stream_recv_buffer(s, timeout_ms, &bb);
    if (err != VARLOG_OK)
        return err;
    *msg = wire_unpack(s->opts.response, bb);
    grpc_byte_buffer_destroy(bb);
    if (*msg)
        return VARLOG_OK;
    rpc_stream_fail_decode(s);
    return VARLOG_ERR_DECODE;
}

void rpc_stream_fail_decode(rpc_stream_t *s)
{
    pthread_mutex_lock(&s->mu);
    set_sticky(s, VARLOG_ERR_DECODE);
    if (!s->finished)
        grpc_call_cancel(s->link.call, NULL);
    pthread_mutex_unlock(&s->mu);
}

varlog_err_t rpc_stream_recv_buffer(rpc_stream_t *s, int64_t timeout_ms, grpc_byte_buffer **out)
{
    return rpc_stream_recv_buffer_at(s, timeout_ms, out, NULL);
}

varlog_err_t rpc_stream_recv_buffer_at(rpc_stream_t *s, int64_t timeout_ms, grpc_byte_buffer **out,
                                       int64_t *arrival_ns)
{
    if (!s || !out)
        return VARLOG_ERR_INVALID_ARG;
    *out = NULL;
    struct timespec deadline;
    int64_t deadline_ms = INT64_MAX; /* a poller's owner polls until then */
    if (timeout_ms > 0) {
        abs_deadline(&deadline, timeout_ms);
        if (s->poller) /* a clock read only where it is used: consumers count them */
            deadline_ms = wire_deadline_ms(timeout_ms);
    }
    pthread_mutex_lock(&s->mu);
    for (;;) {
        grpc_byte_buffer *bb = bb_fifo_pop(&s->received);
        if (bb) {
            if (s->opts.stamp_arrivals) {
                if (arrival_ns)
                    *arrival_ns = s->arrivals[s->arrivals_head];
                s->arrivals_head = (s->arrivals_head + 1) % s->arrivals_cap;
            }
            if (s->opts.recv_window_bytes > 0)
                s->received_bytes -= grpc_byte_buffer_length(bb);
            bool start = reserve_recv_locked(s);
            pthread_mutex_unlock(&s->mu);
            if (start)
                start_recv(s);
            *out = bb;
            return VARLOG_OK;
        }
        if (s->recv_eof && s->status_received) {
            varlog_err_t err = s->sticky != VARLOG_OK ? s->sticky : VARLOG_ERR_END;
            pthread_mutex_unlock(&s->mu);
            return err;
        }
        if (timeout_ms == 0) {
            pthread_mutex_unlock(&s->mu);
            return VARLOG_ERR_TIMED_OUT;
        }
        if (stream_wait_locked(s, timeout_ms > 0 ? &deadline : NULL, deadline_ms) == ETIMEDOUT)
            timeout_ms = 0; /* one more look, then report the timeout */
    }
}

const rpc_status_t *rpc_stream_status(rpc_stream_t *s)
{
    pthread_mutex_lock(&s->mu);
    const rpc_status_t *st = s->status_received ? &s->status : NULL;
    pthread_mutex_unlock(&s->mu);
    return st;
}

size_t rpc_stream_pending_sends(rpc_stream_t *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->to_send.count + (s->in_flight ? 1 : 0);
    pthread_mutex_unlock(&s->mu);
    return n;
}

size_t rpc_stream_sent(rpc_stream_t *s, int64_t settle_ms)
{
    struct timespec deadline;
    abs_deadline(&deadline, settle_ms > 0 ? settle_ms : 0);
    int64_t deadline_ms = s->poller ? wire_deadline_ms(settle_ms > 0 ? settle_ms : 0) : 0;
    pthread_mutex_lock(&s->mu);
    while (s->send_busy && !s->finished && settle_ms > 0 &&
           stream_wait_locked(s, &deadline, deadline_ms) == 0)
        ;
    /* A message still in flight may be on the wire already: count it. */
    size_t n = s->sent + (s->send_busy && s->in_flight ? 1 : 0);
    /* A send cut short by a cancellation or a deadline (ours: the call was still running)
     * may have been written before the cut: gRPC fails the batch whose write it had issued
     * but not yet confirmed. A send that failed for a connection that never came up (the
     * status is then UNAVAILABLE) never reached a server. */
    bool cut_by_us =
        s->client_closing || (s->status_received && (s->code == GRPC_STATUS_CANCELLED ||
                                                     s->code == GRPC_STATUS_DEADLINE_EXCEEDED));
    if (cut_by_us)
        n += s->sends_cut;
    pthread_mutex_unlock(&s->mu);
    return n;
}

size_t rpc_stream_buffered(rpc_stream_t *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->received.count;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void rpc_stream_set_notify(rpc_stream_t *s, void (*notify)(void *arg), void *arg)
{
    pthread_mutex_lock(&s->mu);
    s->opts.notify = notify;
    s->opts.notify_arg = arg;
    pthread_mutex_unlock(&s->mu);
}

void rpc_stream_cancel(rpc_stream_t *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    if (!s->finished)
        grpc_call_cancel(s->link.call, NULL);
    pthread_mutex_unlock(&s->mu);
}

void rpc_stream_client_closing(rpc_stream_t *s)
{
    pthread_mutex_lock(&s->mu);
    s->client_closing = true;
    if (!s->finished)
        grpc_call_cancel(s->link.call, NULL);
    after_event(s, true);
}

void rpc_stream_destroy(rpc_stream_t *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->user_released = true;
    if (!s->finished)
        grpc_call_cancel(s->link.call, NULL);
    after_event(s, false);
    rpc_stream_unref(s);
}
