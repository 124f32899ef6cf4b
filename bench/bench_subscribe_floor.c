/* bench_subscribe's GrpcFloor row (see bench_subscribe.h). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "bench_subscribe.h"
#include "harness.h"
#include "wire.h"

/* GrpcFloor: the same Subscribe as the library's, on a bare gRPC-core call whose
 * completion queue the benchmark thread polls itself (grpc_completion_queue_next reads the
 * socket on the calling thread: no I/O thread, no hand-off), one RECV_MESSAGE per entry, the
 * GLSN read from the message's first bytes. What is left per entry is gRPC core's and the
 * kernel's own cost of a message: the floor under any client built on gRPC core. */

/* A channel to address with the library's client arguments and -chanarg's. */
static grpc_channel *floor_channel(const char *address)
{
    wire_grpc_ref();
    const grpc_channel_args *base = wire_channel_args(WIRE_ARGS_CLIENT);
    grpc_arg args[32];
    size_t na = 0;
    for (size_t i = 0; i < base->num_args && na < 32; i++)
        args[na++] = base->args[i];
    for (size_t i = 0; i < n_chan_args && na < 32; i++)
        args[na++] = chan_args[i];
    grpc_channel_args ca = {.num_args = na, .args = args};
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(address, creds, &ca);
    grpc_channel_credentials_release(creds);
    return ch;
}

void floor_open(env_t *e, const char *address)
{
    e->ch = floor_channel(address);
    e->cq = grpc_completion_queue_create_for_next(NULL);
}

void floor_close(env_t *e)
{
    for (size_t j = 0; j < e->n_each_ch; j++) {
        grpc_channel_destroy(e->each_ch[j]);
        wire_grpc_unref();
    }
    e->n_each_ch = 0;
    if (e->ch) {
        grpc_channel_destroy(e->ch);
        e->ch = NULL;
        wire_grpc_unref();
    }
    if (e->cq) {
        grpc_completion_queue_shutdown(e->cq);
        while (grpc_completion_queue_next(e->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(e->cq);
        e->cq = NULL;
    }
}

enum { T_START = 1, T_STATUS, T_RECV };

static bool floor_batch(grpc_call *call, const grpc_op *ops, size_t n, intptr_t tag)
{
    return grpc_call_start_batch(call, ops, n, (void *)tag, NULL) == GRPC_CALL_OK;
}

/* Waits for tag; other completions are noted in *done (bit per tag). */
static bool floor_wait(env_t *e, intptr_t tag, unsigned *done, bool *ok)
{
    while (!(*done & (1u << tag))) {
        grpc_event ev = grpc_completion_queue_next(e->cq, wire_deadline(NEXT_TIMEOUT_MS), NULL);
        if (ev.type != GRPC_OP_COMPLETE)
            return false;
        *done |= 1u << (intptr_t)ev.tag;
        if ((intptr_t)ev.tag == tag)
            *ok = ev.success != 0;
    }
    *done &= ~(1u << tag);
    return true;
}

/* A request of four varint fields numbered 1 to 4 (SubscribeRequest: begin, end, topic, log
 * stream; SubscribeToRequest: topic, log stream, begin, end), in a byte buffer of its own. */
static grpc_byte_buffer *request_of(const uint64_t fields[4])
{
    uint8_t req[4 * 11];
    size_t len = 0;
    for (unsigned i = 0; i < 4; i++) {
        req[len++] = (uint8_t)((i + 1) << 3);
        len += wire_varint_put(req + len, fields[i]);
    }
    grpc_slice rs = grpc_slice_from_copied_buffer((const char *)req, len);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&rs, 1);
    grpc_slice_unref(rs);
    return bb;
}

/* The two batches that start a server-streaming call: ops[4] sends send and takes the initial
 * metadata, st takes the status into the places given. */
static void stream_ops(grpc_op ops[4], grpc_op *st, grpc_byte_buffer *send,
                       grpc_metadata_array *initial, grpc_metadata_array *trailing,
                       grpc_status_code *code, grpc_slice *details)
{
    memset(ops, 0, 4 * sizeof(*ops));
    memset(st, 0, sizeof(*st));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = initial;
    st->op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    st->data.recv_status_on_client.trailing_metadata = trailing;
    st->data.recv_status_on_client.status = code;
    st->data.recv_status_on_client.status_details = details;
}

/* The GLSN of a SubscribeResponse (field 1 first, as Go and protobuf-c write it); 0 when
 * the message does not start with it. */
static uint64_t floor_glsn(grpc_byte_buffer *bb)
{
    grpc_byte_buffer_reader r;
    grpc_slice *sl;
    uint8_t head[11];
    size_t got = 0;
    if (!grpc_byte_buffer_reader_init(&r, bb))
        return 0;
    /* A message's bytes may be split anywhere, even inside the first varint. */
    while (got < sizeof(head) && grpc_byte_buffer_reader_peek(&r, &sl)) {
        size_t take = GRPC_SLICE_LENGTH(*sl);
        if (take > sizeof(head) - got)
            take = sizeof(head) - got;
        memcpy(head + got, GRPC_SLICE_START_PTR(*sl), take);
        got += take;
    }
    grpc_byte_buffer_reader_destroy(&r);
    uint64_t v = 0;
    if (got < 2 || head[0] != 0x08)
        return 0;
    for (size_t i = 1, shift = 0; i < got && shift < 64; i++, shift += 7) {
        v |= (uint64_t)(head[i] & 0x7f) << shift;
        if (!(head[i] & 0x80))
            break;
    }
    return v;
}

int64_t read_floor(bench_b_t *b, env_t *e)
{
    uint64_t begin = e->first, end = e->first + (uint64_t)b->n;
    grpc_byte_buffer *send =
        request_of((const uint64_t[4]){begin, end, (uint64_t)topic_id, (uint64_t)e->log_stream});
    grpc_call *call =
        grpc_channel_create_call(e->ch, NULL, GRPC_PROPAGATE_DEFAULTS, e->cq,
                                 grpc_slice_from_static_string("/varlog.snpb.LogIO/Subscribe"),
                                 NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    grpc_metadata_array initial, trailing;
    grpc_metadata_array_init(&initial);
    grpc_metadata_array_init(&trailing);
    grpc_status_code code = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[4], st;
    stream_ops(ops, &st, send, &initial, &trailing, &code, &details);
    int64_t bytes = -1;
    unsigned done = 0;
    bool ok = false, started = call && floor_batch(call, ops, 4, T_START) &&
                               floor_batch(call, &st, 1, T_STATUS);
    if (!started) {
        bfail(b, "grpc_call_start_batch", VARLOG_ERR_INTERNAL, "Subscribe");
        goto out;
    }
    bytes = 0;
    for (uint64_t want = begin; want < end; want++) {
        grpc_byte_buffer *bb = NULL;
        grpc_op rop;
        memset(&rop, 0, sizeof(rop));
        rop.op = GRPC_OP_RECV_MESSAGE;
        rop.data.recv_message.recv_message = &bb;
        if (!floor_batch(call, &rop, 1, T_RECV) || !floor_wait(e, T_RECV, &done, &ok) || !bb) {
            char t[96];
            snprintf(t, sizeof(t), "no message for GLSN %llu", (unsigned long long)want);
            bfail(b, "GrpcFloor", VARLOG_ERR_RPC_UNAVAILABLE, t);
            bytes = -1;
            goto out;
        }
        uint64_t g = floor_glsn(bb);
        bytes += (int64_t)grpc_byte_buffer_length(bb);
        grpc_byte_buffer_destroy(bb);
        if (g != want) {
            char t[96];
            snprintf(t, sizeof(t), "wanted GLSN %llu, got %llu", (unsigned long long)want,
                     (unsigned long long)g);
            bfail(b, "GrpcFloor", VARLOG_ERR_INTERNAL, t);
            bytes = -1;
            goto out;
        }
    }
    if (!floor_wait(e, T_STATUS, &done, &ok) || code != GRPC_STATUS_OK) {
        bfail(b, "GrpcFloor: the stream's status", VARLOG_ERR_RPC_UNKNOWN, "not OK");
        bytes = -1;
    }
out:
    if (call) {
        grpc_call_cancel(call, NULL);
        /* Drain what is still in flight before the call and its arrays go. */
        if (started) {
            if (!(done & (1u << T_START)))
                floor_wait(e, T_START, &done, &ok);
            if (bytes < 0 && !(done & (1u << T_STATUS)))
                floor_wait(e, T_STATUS, &done, &ok);
        }
        grpc_call_unref(call);
    }
    grpc_byte_buffer_destroy(send);
    grpc_metadata_array_destroy(&initial);
    grpc_metadata_array_destroy(&trailing);
    grpc_slice_unref(details);
    return bytes;
}

/* ---- GrpcFloorEach ------------------------------------------------------------------- */

int floor_each_open(env_t *e, size_t i, const char *address)
{
    /* One channel per storage node, as the library keeps one per address. */
    for (size_t j = 0; j < e->n_each_ch; j++) {
        if (strcmp(e->each_addr[j], address) == 0) {
            e->each[i].ch = e->each_ch[j];
            return 0;
        }
    }
    if (snprintf(e->each_addr[e->n_each_ch], sizeof(e->each_addr[0]), "%s", address) >=
        (int)sizeof(e->each_addr[0])) {
        fprintf(stderr, "GrpcFloorEach: address too long: %s\n", address);
        return -1;
    }
    if (!e->cq)
        e->cq = grpc_completion_queue_create_for_next(NULL);
    e->each[i].ch = e->each_ch[e->n_each_ch++] = floor_channel(address);
    return 0;
}

/* One bare SubscribeTo call of a GrpcFloorEach round. Its tags are its address plus one of
 * T_START, T_STATUS, T_RECV (the struct is aligned to more than 4). */
typedef struct floor_call {
    each_sub_t *s;
    grpc_call *call;
    grpc_byte_buffer *bb;
    grpc_metadata_array initial, trailing;
    grpc_status_code code;
    grpc_slice details;
    int pending; /* batches started and not completed */
    bool status; /* its status arrived */
} floor_call_t;

static void *fc_tag(floor_call_t *fc, intptr_t kind)
{
    return (void *)((uintptr_t)fc | (uintptr_t)kind);
}

static bool fc_recv(floor_call_t *fc)
{
    grpc_op rop;
    memset(&rop, 0, sizeof(rop));
    rop.op = GRPC_OP_RECV_MESSAGE;
    rop.data.recv_message.recv_message = &fc->bb;
    fc->bb = NULL;
    if (grpc_call_start_batch(fc->call, &rop, 1, fc_tag(fc, T_RECV), NULL) != GRPC_CALL_OK)
        return false;
    fc->pending++;
    return true;
}

static bool fc_start(env_t *e, floor_call_t *fc)
{
    each_sub_t *s = fc->s;
    fc->call =
        grpc_channel_create_call(s->ch, NULL, GRPC_PROPAGATE_DEFAULTS, e->cq,
                                 grpc_slice_from_static_string("/varlog.snpb.LogIO/SubscribeTo"),
                                 NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    if (!fc->call)
        return false;
    grpc_byte_buffer *send = request_of((const uint64_t[4]){
        (uint64_t)topic_id, (uint64_t)s->log_stream, s->first, s->first + s->want});
    grpc_op ops[4], st;
    stream_ops(ops, &st, send, &fc->initial, &fc->trailing, &fc->code, &fc->details);
    bool ok = grpc_call_start_batch(fc->call, ops, 4, fc_tag(fc, T_START), NULL) == GRPC_CALL_OK;
    grpc_byte_buffer_destroy(send); /* the batch holds its own reference */
    if (!ok)
        return false;
    fc->pending++;
    if (grpc_call_start_batch(fc->call, &st, 1, fc_tag(fc, T_STATUS), NULL) != GRPC_CALL_OK)
        return false;
    fc->pending++;
    return fc_recv(fc);
}

int64_t read_floor_each(bench_b_t *b, env_t *e)
{
    size_t n = e->n_each;
    floor_call_t calls[MAX_EACH];
    memset(calls, 0, sizeof(calls));
    if (each_shares(b, e) != 0)
        return -1;
    int64_t bytes = 0;
    size_t open = 0; /* calls not yet ended with their last entry and their status */
    for (size_t i = 0; i < n; i++) {
        floor_call_t *fc = &calls[i];
        fc->s = &e->each[i];
        grpc_metadata_array_init(&fc->initial);
        grpc_metadata_array_init(&fc->trailing);
        fc->details = grpc_empty_slice();
        fc->code = GRPC_STATUS_UNKNOWN;
        if (fc->s->want == 0) {
            fc->status = true;
            continue;
        }
        open++;
        if (!fc_start(e, fc)) {
            bfail(b, "GrpcFloorEach: grpc_call_start_batch", VARLOG_ERR_INTERNAL, "SubscribeTo");
            bytes = -1;
            goto out;
        }
    }
    while (open > 0) {
        grpc_event ev = grpc_completion_queue_next(e->cq, wire_deadline(NEXT_TIMEOUT_MS), NULL);
        if (ev.type != GRPC_OP_COMPLETE) {
            bfail(b, "GrpcFloorEach", VARLOG_ERR_TIMED_OUT, "no completion");
            bytes = -1;
            goto out;
        }
        floor_call_t *fc = (floor_call_t *)((uintptr_t)ev.tag & ~(uintptr_t)3);
        intptr_t kind = (intptr_t)((uintptr_t)ev.tag & 3);
        each_sub_t *s = fc->s;
        fc->pending--;
        if (kind == T_RECV) {
            if (!fc->bb) {
                if (s->count < s->want) {
                    char t[128];
                    snprintf(t, sizeof(t), "log stream %d ended after %llu of %llu entries",
                             s->log_stream, (unsigned long long)s->count,
                             (unsigned long long)s->want);
                    bfail(b, "GrpcFloorEach", VARLOG_ERR_RPC_UNAVAILABLE, t);
                    bytes = -1;
                    goto out;
                }
                continue;
            }
            bytes += (int64_t)grpc_byte_buffer_length(fc->bb);
            grpc_byte_buffer_destroy(fc->bb);
            fc->bb = NULL;
            if (++s->count < s->want && !fc_recv(fc)) {
                bfail(b, "GrpcFloorEach: grpc_call_start_batch", VARLOG_ERR_INTERNAL, "recv");
                bytes = -1;
                goto out;
            }
        } else if (kind == T_STATUS) {
            /* Entries still on their way are counted by their receives. */
            fc->status = true;
            if (fc->code != GRPC_STATUS_OK) {
                char t[128];
                snprintf(t, sizeof(t), "log stream %d: status %d after %llu of %llu entries",
                         s->log_stream, (int)fc->code, (unsigned long long)s->count,
                         (unsigned long long)s->want);
                bfail(b, "GrpcFloorEach", VARLOG_ERR_RPC_UNKNOWN, t);
                bytes = -1;
                goto out;
            }
        }
        if (kind != T_START && fc->status && s->count == s->want)
            open--;
    }
out:
    /* What is still in flight completes before the calls and their arrays go. */
    int pending = 0;
    for (size_t i = 0; i < n; i++) {
        if (calls[i].call)
            grpc_call_cancel(calls[i].call, NULL);
        pending += calls[i].pending;
    }
    for (; pending > 0; pending--) {
        grpc_event ev =
            grpc_completion_queue_next(e->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        floor_call_t *fc = (floor_call_t *)((uintptr_t)ev.tag & ~(uintptr_t)3);
        if ((((uintptr_t)ev.tag & 3) == T_RECV) && fc->bb) {
            grpc_byte_buffer_destroy(fc->bb);
            fc->bb = NULL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        floor_call_t *fc = &calls[i];
        if (fc->call)
            grpc_call_unref(fc->call);
        grpc_metadata_array_destroy(&fc->initial);
        grpc_metadata_array_destroy(&fc->trailing);
        grpc_slice_unref(fc->details);
    }
    return bytes;
}
