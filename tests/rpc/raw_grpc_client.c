/* A small raw gRPC-core client for test_rpc_server (see raw_grpc_client.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>

#include "raw_grpc_client.h"

grpc_channel *channel_new(int port)
{
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(target, creds, wire_channel_args(WIRE_ARGS_CLIENT));
    grpc_channel_credentials_release(creds);
    assert_non_null(ch);
    return ch;
}

grpc_channel *channel_new_fixed_window(int port)
{
    const grpc_channel_args *base = wire_channel_args(WIRE_ARGS_CLIENT);
    grpc_arg args[16];
    size_t n = 0;
    for (size_t i = 0; i < base->num_args && n < 15; i++)
        args[n++] = base->args[i];
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_HTTP2_BDP_PROBE;
    args[n++].value.integer = 0;
    grpc_channel_args ca = {.num_args = n, .args = args};
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(target, creds, &ca);
    grpc_channel_credentials_release(creds);
    assert_non_null(ch);
    return ch;
}

grpc_byte_buffer *pack_request(const request_t *req)
{
    return wire_pack(&req->base);
}

grpc_byte_buffer *raw_buffer(const void *data, size_t len)
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

/* One unary call: the 6-op batch on a pluck queue. Takes req_bb. */
void unary_raw(grpc_channel *ch, const char *method, grpc_byte_buffer *req_bb, unary_result_t *out)
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

void unary_result_clear(unary_result_t *r)
{
    rpc_status_clear(&r->status);
    if (r->resp)
        libvarlog__transporttest__response__free_unpacked(r->resp, NULL);
    r->resp = NULL;
}

static void cs_start(cstream_t *s, const grpc_op *ops, size_t n, intptr_t tag)
{
    assert_int_equal(grpc_call_start_batch(s->call, ops, n, (void *)tag, NULL), GRPC_CALL_OK);
    s->pending++;
}

/* Opens a call. first (taken) is sent at once and followed by a half-close, for server
 * streams; NULL for bidi. */
void cs_open(cstream_t *s, grpc_channel *ch, const char *method, grpc_byte_buffer *first)
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
intptr_t cs_next(cstream_t *s, int64_t timeout_ms)
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

void cs_send(cstream_t *s, grpc_byte_buffer *bb)
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

void cs_close_send(cstream_t *s)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    cs_start(s, &op, 1, T_CLOSE);
}

void cs_arm_recv(cstream_t *s)
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
response_t *cs_take(cstream_t *s)
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
response_t *cs_recv(cstream_t *s)
{
    cs_arm_recv(s);
    while (s->recv_busy)
        assert_int_not_equal(cs_next(s, WAIT_MS), 0);
    return cs_take(s);
}

void cs_wait_idle_send(cstream_t *s)
{
    while (s->send_busy)
        assert_int_not_equal(cs_next(s, WAIT_MS), 0);
}

/* Waits for the status and returns it in st. Messages still on their way are read and
 * dropped: gRPC delivers the status only after them. */
void cs_wait_status(cstream_t *s, rpc_status_t *st)
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
void cs_destroy(cstream_t *s)
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
