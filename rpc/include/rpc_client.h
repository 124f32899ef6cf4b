#ifndef VARLOG_RPC_CLIENT_H
#define VARLOG_RPC_CLIENT_H

/*
 * Client side of the transport over gRPC core. Internal: the public API is built on it.
 *
 * One rpc_client_t owns one completion queue and one I/O thread ("varlog-io"). The I/O thread
 * only dispatches completions: it never blocks on anything but brief internal mutexes and
 * never runs user code (the optional notify hooks are internal and must not block either).
 * Channels are cached per target address; they live until the client is destroyed or until
 * rpc_client_retain_targets (below) drops addresses no longer needed, and never go
 * while a call runs on them. Their reconnect backoff is bounded (rpc_client_new_opts).
 *
 * Streams: at most one SEND_MESSAGE is in flight per call, further messages wait in a FIFO;
 * exactly one RECV_MESSAGE is outstanding while the stream's receive window has room, so a
 * consumer that stops reading stops the transfer (HTTP/2 flow control pushes back to the
 * server). Each call keeps a sticky error: after the first failure every operation returns it.
 *
 * A stream may instead be completed by a thread of the caller's (rpc_poller_t, below): its
 * completions, notify hook included, then run inside that thread's rpc_poller_poll, so that a
 * thread which consumes answers and sends the next requests needs no hand-off through the
 * I/O thread. At every moment some thread of the client polls gRPC's poller, which reads
 * every connection of the process: the I/O thread, unless a poller's owner holds the
 * polling role and no call of the I/O thread's own runs (rpc_client.c, "the polling rule").
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "varlog/error.h"
#include "wire.h"

typedef struct rpc_client rpc_client_t;
typedef struct rpc_stream rpc_stream_t;
typedef struct rpc_poller rpc_poller_t;

/* Starts the I/O thread. Errors: NOMEM, INTERNAL (thread or completion queue creation). */
varlog_err_t rpc_client_new(rpc_client_t **out);

/* Cancels every call still running (their streams end with RPC_CANCELLED or CLOSED), waits
 * until gRPC returned all their operations, joins the I/O thread and frees the client.
 * Streams the caller still holds stay valid for rpc_stream_recv (which reports the end) and
 * must still be released with rpc_stream_destroy. Accepts NULL. Blocks for a bounded time:
 * cancellation completes every operation promptly. Must not be called from the I/O thread. */
void rpc_client_destroy(rpc_client_t *c);

/* Cancels every call still running and makes later calls fail with CLOSED, without freeing
 * anything: threads still inside rpc_* functions return promptly and the client stays valid
 * until rpc_client_destroy. Idempotent; any thread but the I/O thread; does not block on
 * the network. */
void rpc_client_shutdown(rpc_client_t *c);

/* Calls currently known to the client (unary and streams not yet finished). */
size_t rpc_client_live_calls(rpc_client_t *c);

/* The I/O thread's kernel thread id, for tests that read its counters in /proc (threads
 * gRPC starts from it inherit its name, varlog-io, so the name alone does not single it
 * out). Waits for the thread to have started. */
long rpc_client_io_tid(rpc_client_t *c);

/* Pollers' owners holding the client's polling role now, held or lapsed (rpc_client.c, the
 * polling rule); 0: the I/O thread polls. For tests. */
size_t rpc_client_polling_holders(rpc_client_t *c);

/* A blocking unary call on the caller's thread. req is borrowed; on VARLOG_OK *resp is a new
 * message of resp_desc owned by the caller (free with protobuf_c_message_free_unpacked).
 * status (optional, initialised by the caller) receives the call's status, message and
 * error details whatever the outcome. timeout_ms < 0 = no deadline.
 * Returns OK, a VARLOG_ERR_RPC_* code from the status (RPC_DEADLINE_EXCEEDED when the
 * deadline passes, RPC_UNAVAILABLE when the target cannot be reached), DECODE when the
 * response is malformed or missing, CLOSED while the client is being destroyed,
 * INVALID_ARG, NOMEM, INTERNAL. */
varlog_err_t rpc_unary(rpc_client_t *c, const char *target, const char *method,
                       const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
                       int64_t timeout_ms, ProtobufCMessage **resp, rpc_status_t *status);

typedef enum {
    RPC_STREAM_BIDI,   /* messages both ways; rpc_stream_send and rpc_stream_close_send */
    RPC_STREAM_SERVER, /* one request (given to open), a stream of responses */
} rpc_stream_kind_t;

typedef struct rpc_stream_opts {
    rpc_stream_kind_t kind;
    const ProtobufCMessageDescriptor *response; /* how received messages are decoded */
    /* Received messages buffered before the next receive is no longer armed (>= 1). */
    size_t recv_window;
    int64_t timeout_ms;  /* deadline of the whole call; < 0 = none */
    bool wait_for_ready; /* wait for the connection instead of failing fast with UNAVAILABLE */
    /* Optional hook run on the I/O thread after a message or the end of the call becomes
     * available to rpc_stream_recv. It runs with the stream's lock held and never after
     * rpc_stream_destroy returned, so its argument only has to outlive the handle. It must
     * not block and must not call any rpc_stream_* function on this stream; it is meant to
     * signal another thread (taking a lock that is never held while calling into this
     * stream). */
    void (*notify)(void *arg);
    void *notify_arg;
    /* Absolute deadline of the whole call (wire_now_ms clock), used instead of timeout_ms
     * when > 0: a caller whose own deadline is fixed gives it as is, so time spent before
     * the call starts cannot extend it. */
    int64_t deadline_ms;
    /* Received bytes buffered (0 = no bound), as recv_window: the next receive is armed only
     * while the buffered messages hold fewer, so a message larger than the bound still gets
     * through, alone. */
    size_t recv_window_bytes;
    /* Complete the stream on this poller's owner thread instead of the I/O thread (NULL: the
     * I/O thread). The poller must outlive the stream's call (rpc_poller_destroy waits). */
    rpc_poller_t *poller;
    /* Keep each received message's arrival: a CLOCK_MONOTONIC read (ns) on the I/O thread as
     * its receive completes, before the notify hook, returned by rpc_stream_recv_buffer_at.
     * Off: no clock read per message. */
    bool stamp_arrivals;
} rpc_stream_opts_t;

/* Opens a call. request (borrowed) is required for RPC_STREAM_SERVER and, for
 * RPC_STREAM_BIDI, an optional first message. Does not wait for the connection; connection
 * failures show up as the stream's status. Errors: INVALID_ARG, CLOSED (client being
 * destroyed), NOMEM, INTERNAL. */
varlog_err_t rpc_stream_open(rpc_client_t *c, const char *target, const char *method,
                             const rpc_stream_opts_t *opts, const ProtobufCMessage *request,
                             rpc_stream_t **out);

/* BIDI: encodes msg (borrowed) and queues it; it is sent after the messages queued before it.
 * Never blocks: the FIFO is unbounded, callers bound what they queue. Any thread.
 * Errors: the stream's sticky error once it failed, CLOSED after it finished normally,
 * STATE after rpc_stream_close_send or on a server stream, ENCODE, NOMEM. */
varlog_err_t rpc_stream_send(rpc_stream_t *s, const ProtobufCMessage *msg);

/* BIDI: as rpc_stream_send for a message already encoded as the concatenation of head and
 * body, where body is a reference-counted slice (for example from grpc_slice_malloc) that
 * the message shares rather than copies: a large part encoded once can be sent by several
 * calls, with a small head that varies between them. body stays the caller's (this call
 * takes its own reference); head is copied. Errors as rpc_stream_send. */
varlog_err_t rpc_stream_send_shared(rpc_stream_t *s, const void *head, size_t head_len,
                                    grpc_slice body);

/* BIDI: as rpc_stream_send_shared for a message in n pieces, sent as the concatenation of
 * slices[0..n) (the pieces stay the caller's: the message takes its own reference to each),
 * so that parts of it can be sent from where they are without a copy. Errors as
 * rpc_stream_send. */
varlog_err_t rpc_stream_send_slices(rpc_stream_t *s, const grpc_slice *slices, size_t n);

/* BIDI: half-closes after every queued message was sent. Any thread. Errors as send. */
varlog_err_t rpc_stream_close_send(rpc_stream_t *s);

/* Takes the next received message, waiting up to timeout_ms (< 0 = for ever, 0 = poll).
 * On OK, *msg is owned by the caller (protobuf_c_message_free_unpacked). Returns END when
 * the server finished with OK and every message was taken, the status's VARLOG_ERR_RPC_*
 * code when it failed (RPC_CANCELLED after rpc_stream_cancel), CLOSED when the client was
 * destroyed, DECODE when a message was malformed (the call is then cancelled), TIMED_OUT.
 * One consumer thread at a time. */
varlog_err_t rpc_stream_recv(rpc_stream_t *s, int64_t timeout_ms, ProtobufCMessage **msg);

/* As rpc_stream_recv, but hands over the received message undecoded: on OK *bb is owned by
 * the caller (grpc_byte_buffer_destroy). For callers that decode a hot message themselves;
 * one that finds the message malformed calls rpc_stream_fail_decode. */
varlog_err_t rpc_stream_recv_buffer(rpc_stream_t *s, int64_t timeout_ms, grpc_byte_buffer **bb);

/* As rpc_stream_recv_buffer, and on OK *arrival_ns (optional) receives the message's arrival
 * time when the stream was opened with stamp_arrivals (left alone otherwise). */
varlog_err_t rpc_stream_recv_buffer_at(rpc_stream_t *s, int64_t timeout_ms, grpc_byte_buffer **bb,
                                       int64_t *arrival_ns);

/* Fails the stream with DECODE (its sticky error) and cancels the call. Any thread. */
void rpc_stream_fail_decode(rpc_stream_t *s);

/* The call's final status; NULL until the status arrived (rpc_stream_recv returned END or
 * an RPC error). Valid until rpc_stream_destroy. */
const rpc_status_t *rpc_stream_status(rpc_stream_t *s);

/* Messages queued for sending and not yet completed by gRPC, including the one in flight. */
size_t rpc_stream_pending_sends(rpc_stream_t *s);

/* Messages gRPC reported as handed to the transport (send completed successfully), plus the
 * one in flight if any, plus those whose send was cut short by a cancellation, the client
 * closing or a deadline (gRPC fails a send whose write it issued but had not confirmed): a
 * message counted may have reached the server, one not counted never did. A send's
 * completion can arrive after the call's status, so this first waits up to settle_ms for the
 * send in flight to complete (once the call ended that is prompt). */
size_t rpc_stream_sent(rpc_stream_t *s, int64_t settle_ms);

/* Messages received and waiting for rpc_stream_recv. */
size_t rpc_stream_buffered(rpc_stream_t *s);

/* Replaces the notify hook and its argument (NULL: none): the completions after it call the
 * new one. A stream whose messages no one waits for yet may so be opened without one. Takes
 * the stream's lock: not from a hook of this stream. */
void rpc_stream_set_notify(rpc_stream_t *s, void (*notify)(void *arg), void *arg);

/* Cancels the call (no-op once finished). Any thread; does not block. */
void rpc_stream_cancel(rpc_stream_t *s);

/* Cancels the call if it is still running and releases the caller's handle. Does not block:
 * gRPC's remaining completions are absorbed by the I/O thread, which frees the stream last.
 * Accepts NULL. */
void rpc_stream_destroy(rpc_stream_t *s);

/* ---- pollers: streams completed on their consumer's thread ------------------------------ */

/* A completion queue for streams whose consumer completes them itself. The thread that polls
 * it is its owner (rpc_poller_own); streams opened with opts.poller run every completion,
 * their notify hooks included, inside the owner's rpc_poller_poll, and the owner's blocking
 * calls on them (rpc_stream_recv* with a timeout, rpc_stream_sent) poll instead of waiting.
 * Other threads may still use those streams as any other (send, cancel, destroy, recv
 * without waiting); a wait of theirs ends when the owner polls. The poller belongs to c,
 * whose streams it completes, and must be destroyed before c. Errors: INVALID_ARG, NOMEM,
 * INTERNAL. */
varlog_err_t rpc_poller_new(rpc_client_t *c, rpc_poller_t **out);

/* The calling thread becomes p's owner, the one thread that calls rpc_poller_poll. */
void rpc_poller_own(rpc_poller_t *p);

typedef enum {
    RPC_POLL_TIMEOUT = 0, /* the deadline passed */
    RPC_POLL_RAN,         /* a stream's completion ran */
    RPC_POLL_KICKED,      /* rpc_poller_kick */
} rpc_poll_t;

/* Owner only: waits until deadline_ms (wire_now_ms clock; INT64_MAX = none) for one
 * completion and runs it, or for a kick. Takes the client's polling role (rpc_client.c, the
 * polling rule: some thread of the client always polls gRPC's poller, which reads every
 * connection of the process), as rpc_poller_hold. */
rpc_poll_t rpc_poller_poll(rpc_poller_t *p, int64_t deadline_ms);

/* The owner (or a thread starting it, on its behalf) takes the client's polling role: the
 * I/O thread parks unless calls of its own run, and the owner must poll promptly and keep
 * coming back to its poll until it gives the role up, with rpc_poller_lapse before it leaves
 * for a time nobody knows (a sleep on a condition variable, a return to the application),
 * or with rpc_poller_release for good. Every poll takes it. Does not block beyond the
 * client's lock; kicks the I/O thread out of its queue when it polled for nobody. */
void rpc_poller_hold(rpc_poller_t *p);

/* How long a holder that lapsed keeps the role (rpc_client.c, the polling rule): the longest
 * a close may then wait to be read, and the I/O thread wakes at most twice per period for a
 * holder that keeps coming and going. */
#define RPC_POLL_LAPSE_MS 50

/* Owner only: leaves the role for now. It keeps it for RPC_POLL_LAPSE_MS (50 ms) and loses
 * it unless it polls again by then; the I/O thread then polls in its place. Cheap: no
 * system call unless the I/O thread must start timing the lapse. Accepts NULL. */
void rpc_poller_lapse(rpc_poller_t *p);

/* Owner only: whether it holds the polling role (held or lapsed). */
bool rpc_poller_holding(const rpc_poller_t *p);

/* Gives the role up at once (nothing if not held); the I/O thread polls unless another
 * owner holds it. Does not block beyond the client's lock. Accepts NULL. */
void rpc_poller_release(rpc_poller_t *p);

/* Owner only: runs one completion that is already queued, or that gRPC finds ready on its
 * sockets without waiting (one non-blocking look), and returns RPC_POLL_RAN (KICKED for a
 * kick); RPC_POLL_TIMEOUT when there is none. Reads no clock of ours: a consumer taking
 * messages that stream in calls it per message. Takes the polling role, as rpc_poller_poll. */
rpc_poll_t rpc_poller_poll_ready(rpc_poller_t *p);

/* Makes the owner's current rpc_poller_poll return (or its next one, at once). Any thread;
 * does not block beyond gRPC's queue lock; each kick costs one completion (an allocation
 * inside gRPC), so callers kick once per sleep. */
void rpc_poller_kick(rpc_poller_t *p);

/* Streams opened on p whose call has not finished yet (released ones included): while
 * there are any the owner must keep polling. */
size_t rpc_poller_live(rpc_poller_t *p);

/* Owner only (or any thread once the owner stopped polling for good): polls until every
 * stream opened on p finished (the caller cancelled or destroyed them; cancellation
 * completes promptly), then shuts the queue down, gives up the polling role and frees p.
 * Accepts NULL. */
void rpc_poller_destroy(rpc_poller_t *p);

/* ---- channel policy (used by the client core and tests) ---------------------------------- */

/* gRPC's reconnect backoff on every channel of a client. gRPC's own default (1 s growing
 * 1.6-fold to 120 s) kept a node that came back from a 90 s outage unreachable for 18 s more;
 * the first delay is RPC_RECONNECT_BACKOFF_INITIAL_MS (or the maximum if smaller), gRPC
 * raises anything below 100 ms to 100 ms. */
#define RPC_RECONNECT_BACKOFF_INITIAL_MS 100
#define RPC_RECONNECT_BACKOFF_MAX_DEFAULT_MS 1000

typedef struct rpc_client_opts {
    int64_t reconnect_backoff_max_ms; /* <= 0: RPC_RECONNECT_BACKOFF_MAX_DEFAULT_MS */
    /* gRPC's BDP probe off (grpc.http2.bdp_probe 0): every stream's HTTP/2 receive window
     * stays at 64 KiB instead of growing with gRPC's estimate of the connection's
     * bandwidth-delay product, which bounds what a stream whose receives wait holds in
     * gRPC, at more CPU per received byte (WINDOW_UPDATEs every few frames). */
    bool fixed_windows;
} rpc_client_opts_t;

/* As rpc_client_new (which uses the defaults), with options (NULL = defaults). Errors as
 * rpc_client_new. */
varlog_err_t rpc_client_new_opts(const rpc_client_opts_t *opts, rpc_client_t **out);

/* Drops cached channels whose target is not among targets[0..n): a channel found missing is
 * destroyed once it has been missing from every retain for grace_ms (0 = at once), or, if
 * calls still run on it then, when its last call ends (the calls are never cancelled by
 * this). A listed channel is kept, its missing time forgotten, and if it is in
 * TRANSIENT_FAILURE its connect backoff is reset so that the next call reconnects at once.
 * Returns the number of channels destroyed by this call. Does not block on the network;
 * any thread but the I/O thread; NOMEM-free. */
size_t rpc_client_retain_targets(rpc_client_t *c, const char *const *targets, size_t n,
                                 int64_t grace_ms);

/* Channels currently cached (including dropped ones that wait for their last call). */
size_t rpc_client_channel_count(rpc_client_t *c);

/* Reconnections so far: a channel seen READY, then not READY (its connection lost or gone
 * idle), then READY again. gRPC reports states only when asked, so a channel's state is
 * looked at when a call starts or ends on it and by this function: a loss and return that
 * no call nor reader saw are not counted. Does not block beyond the client's lock; 0 for
 * NULL. */
uint64_t rpc_client_reconnects(rpc_client_t *c);

/* Whether the cached channel to target is connected (READY) as gRPC last saw it; false when
 * there is none or the client is closing. Some thread of the client always polls (the
 * polling rule), so a server's close is seen as soon as gRPC has read it. Only looks: it
 * starts no connection. Does not block beyond the client's lock. A subscription asks it to
 * tell a stream that waits quietly on a live connection from one still connecting to a node
 * that does not answer. */
bool rpc_client_target_ready(rpc_client_t *c, const char *target);

#endif
