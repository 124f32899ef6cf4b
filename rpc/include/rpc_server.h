#ifndef VARLOG_RPC_SERVER_H
#define VARLOG_RPC_SERVER_H

/*
 * Server side of the transport: a gRPC core listener with one completion queue and one
 * thread, dispatching calls by method path to handlers. Internal to server/.
 *
 * Threading: every handler callback runs on the server thread, one at a time, and must not
 * block. rpc_server_call_* functions may be called from handlers and from any other thread
 * (for example a thread that injects a delay), as long as the caller holds a reference
 * (handlers implicitly do until on_done returns; other threads take rpc_server_call_ref).
 *
 * Flow control: a call keeps at most one SEND_MESSAGE in flight; further messages wait in a
 * per-call FIFO. Server-streaming handlers produce lazily from on_writable, which is invoked
 * only when the FIFO is empty and the send slot is free, so a slow client holds at most one
 * message per stream in this process (plus what gRPC buffers).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>

#include "varlog/error.h"

typedef struct rpc_server rpc_server_t;
typedef struct rpc_server_call rpc_server_call_t;

typedef enum {
    RPC_METHOD_UNARY,         /* one request, one response */
    RPC_METHOD_SERVER_STREAM, /* one request, a stream of responses */
    RPC_METHOD_BIDI,          /* a stream each way */
} rpc_method_kind_t;

typedef struct rpc_method {
    const char *path; /* "/varlog.snpb.LogIO/Append" */
    rpc_method_kind_t kind;
    /* Requests are decoded before handlers run, unless this is &rpc_raw_request_descriptor
     * (see rpc_raw_request_t below). */
    const ProtobufCMessageDescriptor *request;

    /* A call arrived. UNARY and SERVER_STREAM: req is the single request (freed after the
     * callback returns; copy what you keep). BIDI: req is NULL; requests follow through
     * on_message. A request that cannot be decoded ends the call with INVALID_ARGUMENT
     * before any handler sees it. Required. */
    void (*on_start)(rpc_server_call_t *call, const ProtobufCMessage *req, void *arg);
    /* BIDI only: the next request, in arrival order (freed after return). */
    void (*on_message)(rpc_server_call_t *call, const ProtobufCMessage *req, void *arg);
    /* BIDI only: the client half-closed; no more on_message. NULL = finish with OK. Requests
     * are no longer read once the call is finished. */
    void (*on_half_close)(rpc_server_call_t *call, void *arg);
    /* The send FIFO is empty and the call is not finished: send a message, finish, or do
     * nothing (then nothing happens until rpc_server_call_wake). Optional. */
    void (*on_writable)(rpc_server_call_t *call, void *arg);
    /* Last callback of a call: it finished, the client cancelled, or the server is stopping.
     * Free per-call state here. cancelled is true unless the status was sent normally. Runs
     * exactly once for every call whose on_start ran, and never for the others (a unary call
     * cancelled before its request arrived, an unknown method). Optional. */
    void (*on_done)(rpc_server_call_t *call, bool cancelled, void *arg);
    void *arg;
} rpc_method_t;

/* Undecoded requests: a method whose request descriptor is &rpc_raw_request_descriptor gets
 * its requests as received, for handlers that decode them faster by hand than protobuf-c
 * (which allocates every repeated bytes element). on_start (UNARY, SERVER_STREAM) and
 * on_message (BIDI) then get an rpc_raw_request_t as req: cast it back with
 * (const rpc_raw_request_t *)req. bb is valid until the callback returns (a handler that
 * keeps the bytes takes its own copy, e.g. grpc_byte_buffer_copy); refusing a malformed
 * request is the handler's own business. The descriptor is a marker only: it must never be
 * handed to protobuf-c. */
extern const ProtobufCMessageDescriptor rpc_raw_request_descriptor;
typedef struct rpc_raw_request {
    ProtobufCMessage base; /* base.descriptor == &rpc_raw_request_descriptor */
    grpc_byte_buffer *bb;
} rpc_raw_request_t;

typedef struct rpc_server_opts {
    const char *listen_addr; /* "127.0.0.1:0" picks a free port */
    const rpc_method_t *methods;
    size_t n_methods;
} rpc_server_opts_t;

/* Binds and starts serving. The methods array must outlive the server. Errors:
 * INVALID_ARG (NULL, no methods, a method without on_start, duplicate path), RPC_UNAVAILABLE
 * (the address cannot be bound), NOMEM. */
varlog_err_t rpc_server_start(const rpc_server_opts_t *opts, rpc_server_t **out);

/* The bound port (useful after listening on port 0). */
int rpc_server_port(const rpc_server_t *srv);

/* Stops accepting calls, cancels live calls (clients see UNAVAILABLE or CANCELLED), runs
 * on_done for each, joins the server thread and frees everything. Accepts NULL. Blocks for
 * a bounded time; must not be called from a handler. */
void rpc_server_stop(rpc_server_t *srv);

/* Per-call user pointer, NULL initially. */
void rpc_server_call_set_user(rpc_server_call_t *call, void *user);
void *rpc_server_call_user(const rpc_server_call_t *call);
/* The method the call was dispatched to. */
const rpc_method_t *rpc_server_call_method(const rpc_server_call_t *call);

/* Queues msg (encoded now; the caller keeps msg) for sending. Returns STATE after
 * rpc_server_call_finish or once the call is done, ENCODE/NOMEM on failure. */
varlog_err_t rpc_server_call_send(rpc_server_call_t *call, const ProtobufCMessage *msg);

/* As rpc_server_call_send for a message already encoded in msg (the call takes its own
 * reference; the caller keeps its own), so that a handler that encodes by hand hands its
 * bytes over without another copy. Returns STATE as rpc_server_call_send, NOMEM. */
varlog_err_t rpc_server_call_send_slice(rpc_server_call_t *call, grpc_slice msg);

/* Ends the call with a status, sent after every queued message. details, when n_details > 0,
 * are sent as google.rpc.Status{code, message, ErrorDetail(details[i])...} in the
 * grpc-status-details-bin trailer, as Varlog's Go servers do. Only the first finish counts
 * (later ones return STATE). */
varlog_err_t rpc_server_call_finish(rpc_server_call_t *call, grpc_status_code code,
                                    const char *message, const char *const *details,
                                    size_t n_details);

/* BIDI: stop (true) or resume (false) reading requests, for server-side pipelining limits. */
void rpc_server_call_pause_recv(rpc_server_call_t *call, bool paused);

/* Asks for on_writable to run again on the server thread (any thread; coalesced). */
void rpc_server_call_wake(rpc_server_call_t *call);

/* Messages queued but not yet handed to gRPC, including the one in flight. */
size_t rpc_server_call_pending_sends(const rpc_server_call_t *call);

/* References for threads other than the server thread; the call's memory stays valid until
 * every reference is released and on_done has run. */
void rpc_server_call_ref(rpc_server_call_t *call);
void rpc_server_call_unref(rpc_server_call_t *call);

#endif
