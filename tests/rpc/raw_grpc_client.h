/* A small raw gRPC-core client for test_rpc_server, so that the server is tested without
 * the client transport: unary calls as one batch on a pluck queue, streaming calls on a next
 * queue of their own. */
#ifndef VARLOG_TESTS_RAW_GRPC_CLIENT_H
#define VARLOG_TESTS_RAW_GRPC_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/grpc.h>

#include "test_service.h"
#include "wire.h"

#define WAIT_MS 20000

/* An insecure channel to 127.0.0.1:port with the client transport's channel arguments. */
grpc_channel *channel_new(int port);
/* As channel_new, with HTTP/2 BDP probing off: the receive window stays at its initial size
 * instead of growing with the load, so back-pressure shows after a bounded amount of data. */
grpc_channel *channel_new_fixed_window(int port);

/* The request, encoded into a new byte buffer. */
grpc_byte_buffer *pack_request(const request_t *req);

/* A new byte buffer holding a copy of data, for bytes that are no valid message. */
grpc_byte_buffer *raw_buffer(const void *data, size_t len);

typedef struct unary_result {
    rpc_status_t status;
    response_t *resp;
} unary_result_t;

/* One unary call: the 6-op batch on a pluck queue. Takes req_bb. */
void unary_raw(grpc_channel *ch, const char *method, grpc_byte_buffer *req_bb, unary_result_t *out);

/* Frees what unary_raw put in r. */
void unary_result_clear(unary_result_t *r);

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

/* Opens a call. first (taken) is sent at once and followed by a half-close, for server
 * streams; NULL for bidi. */
void cs_open(cstream_t *s, grpc_channel *ch, const char *method, grpc_byte_buffer *first);

/* Waits for the next completion of s; returns its tag (0 on timeout). */
intptr_t cs_next(cstream_t *s, int64_t timeout_ms);

/* Sends bb (taken); the previous send must have completed. */
void cs_send(cstream_t *s, grpc_byte_buffer *bb);

/* Half-closes the stream. */
void cs_close_send(cstream_t *s);

/* Starts receiving one message; cs_next reports it as T_RECV, cs_take takes it. */
void cs_arm_recv(cstream_t *s);

/* Takes the received message, if any: NULL at the end of the stream. */
response_t *cs_take(cstream_t *s);

/* The next message (NULL at the end), other completions handled on the way. */
response_t *cs_recv(cstream_t *s);

/* Waits until the outstanding send has completed. */
void cs_wait_idle_send(cstream_t *s);

/* Waits for the status and returns it in st. Messages still on their way are read and
 * dropped: gRPC delivers the status only after them. */
void cs_wait_status(cstream_t *s, rpc_status_t *st);

/* Cancels if still running, waits for every batch, frees everything. */
void cs_destroy(cstream_t *s);

#endif
