/* Linked before libvarlog_rpc.a, this file provides every symbol the server takes from
 * rpc_server.o, so that archive member is never pulled in and no gRPC server runs. */
#include "fake_rpc_server.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "snpb/log_io.pb-c.h"

const ProtobufCMessageDescriptor rpc_raw_request_descriptor = {
    .magic = PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,
    .name = "libvarlog.rpc.RawRequest",
    .short_name = "RawRequest",
    .c_name = "rpc_raw_request_t",
    .package_name = "libvarlog.rpc",
    .sizeof_message = sizeof(rpc_raw_request_t),
};

static struct {
    const rpc_method_t *methods;
    size_t n;
} table;
static int the_server;

const rpc_method_t *fake_rpc_methods(size_t *n)
{
    *n = table.n;
    return table.methods;
}

varlog_err_t rpc_server_start(const rpc_server_opts_t *opts, rpc_server_t **out)
{
    table.methods = opts->methods;
    table.n = opts->n_methods;
    *out = (rpc_server_t *)(void *)&the_server;
    return VARLOG_OK;
}

int rpc_server_port(const rpc_server_t *srv)
{
    (void)srv;
    return 1;
}

void rpc_server_stop(rpc_server_t *srv)
{
    (void)srv;
}

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

varlog_err_t rpc_server_call_send(rpc_server_call_t *call, const ProtobufCMessage *msg)
{
    if (call->finished)
        return VARLOG_ERR_STATE;
    /* Packing walks the whole message: a dangling or uninitialised part is an ASan report. */
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(n ? n : 1);
    FUZZ_CHECK(buf);
    FUZZ_CHECK(protobuf_c_message_pack(msg, buf) == n);
    free(buf);
    call->sent++;
    return VARLOG_OK;
}

varlog_err_t rpc_server_call_send_slice(rpc_server_call_t *call, grpc_slice msg)
{
    if (call->finished)
        return VARLOG_ERR_STATE;
    /* Only Append encodes by hand: what it wrote must be an AppendResponse. */
    Varlog__Snpb__AppendResponse *r = varlog__snpb__append_response__unpack(
        NULL, GRPC_SLICE_LENGTH(msg), GRPC_SLICE_START_PTR(msg));
    FUZZ_CHECK(r);
    varlog__snpb__append_response__free_unpacked(r, NULL);
    call->sent++;
    return VARLOG_OK;
}

varlog_err_t rpc_server_call_finish(rpc_server_call_t *call, grpc_status_code code,
                                    const char *message, const char *const *details,
                                    size_t n_details)
{
    (void)code;
    if (call->finished)
        return VARLOG_ERR_STATE;
    call->finished = true;
    FUZZ_CHECK(!message || strlen(message) < (1u << 20));
    for (size_t i = 0; i < n_details; i++)
        FUZZ_CHECK(details[i]);
    return VARLOG_OK;
}

void rpc_server_call_pause_recv(rpc_server_call_t *call, bool paused)
{
    (void)call;
    (void)paused;
}

void rpc_server_call_wake(rpc_server_call_t *call)
{
    call->woken = true;
}

size_t rpc_server_call_pending_sends(const rpc_server_call_t *call)
{
    (void)call;
    return 0;
}

void rpc_server_call_ref(rpc_server_call_t *call)
{
    call->refs++;
}

void rpc_server_call_unref(rpc_server_call_t *call)
{
    call->refs--;
}
