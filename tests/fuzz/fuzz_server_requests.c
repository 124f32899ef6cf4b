/* The embedded server's request handling (server/src: log_io.c, metadata.c, admin*.c) with
 * requests from the input: Append's are read by its hand-written decoder, every other
 * method's by protobuf-c, as the transport does, and then handled. The transport is
 * fake_rpc_server.c: handlers run on this thread and their responses are packed and
 * checked. One server per input, so that an input replays alone as it ran.
 *
 * Input: the server's shape (topics, log streams, byte bound), then calls: a method byte
 * and its request piece; Append takes a count of request pieces and their cuts. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>

#include "fake_rpc_server.h"
#include "fuzz_slices.h"
#include "fuzz_util.h"
#include "server_internal.h"
#include "varlog/server.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    wire_grpc_ref(); /* byte buffers and slices */
    return 0;
}

/* on_writable until the call finishes or stops asking (a subscriber waiting for
 * commits), at most a bounded number of times. */
static void pump(rpc_server_call_t *call)
{
    const rpc_method_t *m = call->method;
    for (int i = 0; i < 256 && m->on_writable && !call->finished; i++) {
        call->woken = false;
        m->on_writable(call, m->arg);
        if (!call->woken && i > 0)
            break;
    }
}

static void run_append(const rpc_method_t *m, fuzz_input_t *in)
{
    rpc_server_call_t call = {.method = m};
    m->on_start(&call, NULL, m->arg);
    size_t n_msgs = fuzz_u8(in) % 5;
    for (size_t i = 0; i < n_msgs && !call.finished; i++) {
        uint8_t cuts[4];
        size_t n_cuts = fuzz_u8(in) % 5;
        for (size_t k = 0; k < n_cuts; k++)
            cuts[k] = fuzz_u8(in);
        size_t len;
        const uint8_t *p = fuzz_piece(in, &len);
        fuzz_slices_t sl;
        fuzz_slices_make(&sl, p, len, cuts, n_cuts);
        grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(sl.s, sl.n);
        fuzz_slices_free(&sl);
        rpc_raw_request_t req = {.base = {.descriptor = &rpc_raw_request_descriptor}, .bb = bb};
        m->on_message(&call, &req.base, m->arg);
        grpc_byte_buffer_destroy(bb);
        pump(&call);
    }
    if (!call.finished) {
        if (m->on_half_close)
            m->on_half_close(&call, m->arg);
        else
            (void)rpc_server_call_finish(&call, GRPC_STATUS_OK, NULL, NULL, 0);
    }
    pump(&call);
    if (m->on_done)
        m->on_done(&call, false, m->arg);
}

static void run_call(const rpc_method_t *m, fuzz_input_t *in)
{
    size_t len;
    const uint8_t *p = fuzz_piece(in, &len);
    ProtobufCMessage *req = protobuf_c_message_unpack(m->request, NULL, len, p);
    if (!req)
        return; /* the transport ends such a call before any handler sees it */
    rpc_server_call_t call = {.method = m};
    m->on_start(&call, req, m->arg);
    protobuf_c_message_free_unpacked(req, NULL);
    pump(&call);
    /* A subscriber still waiting is cancelled, as when its client goes away. */
    bool cancelled = !call.finished;
    if (m->on_done)
        m->on_done(&call, cancelled, m->arg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input_t in = {data, size};
    uint8_t shape = fuzz_u8(&in);
    varlog_server_opts_t opts = {
        .topics = shape % 3,
        .log_streams_per_topic = (shape / 3) % 3,
        /* Small bounds, so that retention and refusal run too. */
        .max_bytes = (shape & 0x40) ? 256 + 64 * (uint64_t)fuzz_u8(&in) : 0,
        .refuse_when_full = (shape & 0x80) != 0,
    };
    varlog_server_t *srv = NULL;
    FUZZ_CHECK(varlog_server_start(&opts, &srv) == VARLOG_OK);
    size_t n_methods;
    const rpc_method_t *methods = fake_rpc_methods(&n_methods);
    FUZZ_CHECK(n_methods == M_COUNT);
    for (int calls = 0; calls < 16 && in.left > 0; calls++) {
        const rpc_method_t *m = &methods[fuzz_u8(&in) % M_COUNT];
        if (m->request == &rpc_raw_request_descriptor)
            run_append(m, &in);
        else
            run_call(m, &in);
    }
    varlog_server_destroy(srv);
    return 0;
}
