#ifndef VARLOG_SERVER_H
#define VARLOG_SERVER_H

/*
 * The embedded single-node Varlog server: one process-local listener on 127.0.0.1 that
 * speaks Varlog's real wire protocol (metadata repository discovery, the storage node's
 * LogIO service and the admin's ClusterManager service on the same port), keeps the log in
 * memory, and lets tests inject faults.
 *
 * Threads: while it serves, a server owns one transport thread ("varlog-server", it runs
 * every RPC handler) and one timer thread ("varlog-srv-tmr", it releases delayed responses);
 * both are joined by stop and destroy. The API takes no callbacks, so no user code ever runs
 * on those threads. Every function may be called from any thread; the server may be shared
 * by threads, except that destroy must not race with other calls on the same server.
 *
 * Method names: the full gRPC paths, e.g. "/varlog.snpb.LogIO/Append". Known methods:
 *   /varlog.mrpb.Management/GetClusterInfo
 *   /varlog.mrpb.MetadataRepositoryService/GetMetadata
 *   /varlog.snpb.LogIO/Append
 *   /varlog.snpb.LogIO/Subscribe
 *   /varlog.snpb.LogIO/SubscribeTo
 *   /varlog.snpb.LogIO/TrimDeprecated
 *   /varlog.snpb.LogIO/LogStreamReplicaMetadata
 *   /varlog.admpb.ClusterManager/<M> for each of its 26 methods: GetStorageNode,
 *     ListStorageNodes, AddStorageNode, UnregisterStorageNode, GetTopic, DescribeTopic,
 *     ListTopics, AddTopic, UnregisterTopic, GetLogStream, ListLogStreams, AddLogStream,
 *     UpdateLogStream, UnregisterLogStream, RemoveLogStreamReplica, Seal, Unseal, Sync, Trim,
 *     GetMetadataRepositoryNode, ListMetadataRepositoryNodes, GetMRMembers,
 *     AddMetadataRepositoryNode, AddMRPeer, DeleteMetadataRepositoryNode, RemoveMRPeer
 *     (docs/SERVER.md says what each answers on a server of one node)
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "varlog/error.h"
#include "varlog/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct varlog_server varlog_server_t;

/* Most topics, and most log streams, a server holds: every one stays in memory and in every
 * metadata answer, and a count near 2^31 would exhaust the machine's memory long before an
 * allocation failed (Linux overcommits; the process would be killed, not told NOMEM). */
#define VARLOG_SERVER_MAX_TOPICS (1 << 20)
#define VARLOG_SERVER_MAX_LOG_STREAMS (1 << 20)

typedef struct varlog_server_opts {
    /* "127.0.0.1:PORT"; PORT 0 picks a free port. NULL = "127.0.0.1:0". Only 127.0.0.1 is
     * accepted: the server is for tests and local tools, never for a network. */
    const char *listen_address;
    int32_t topics;                /* topic ids 1..topics; 0 is allowed (none) */
    int32_t log_streams_per_topic; /* numbered from 1 across all topics, topic by topic */
    /* Bound on the memory the log takes, 0 = 1 GiB. By default a retention bound: the log's
     * resident bytes (payloads with their chunks' slack, and the per-entry metadata arrays;
     * varlog_server_resident_bytes) stay at or below it after every append, because an
     * append that would pass it first trims the oldest entries of the whole server (oldest
     * payload chunk first, each trim cutting that chunk's topic up to the chunk's last GLSN,
     * sealed log streams included) down to 7/8 of it. Subscribers of a trimmed range then
     * get OutOfRange "log stream: logstream: trimmed", as after TrimDeprecated. Only a batch
     * too large for an empty store is refused (RESOURCE_EXHAUSTED "storage: byte limit
     * reached", nothing trimmed for it). See refuse_when_full for the other behaviour. */
    uint64_t max_bytes;
    /* A full node: appends that would take the payload bytes (varlog_server_stored_bytes,
     * no overhead counted) past max_bytes fail with RESOURCE_EXHAUSTED "storage: byte limit
     * reached" and nothing is trimmed; TrimDeprecated frees room. false = retention. */
    bool refuse_when_full;
    /* Where retention writes one line per pass (not per entry): what it trimmed and the
     * resident size before and after. Written on the server's thread with an internal lock
     * held; not closed by the server. NULL = no log. */
    FILE *log_file;
} varlog_server_opts_t;

/* Creates a server with cluster id 1 and one storage node (id 1) and starts serving.
 * opts is read during the call only. On success *out is owned by the caller
 * (varlog_server_destroy). Blocks for a few milliseconds (binding, starting threads).
 * Errors: INVALID_ARG (NULL, a negative count, more than VARLOG_SERVER_MAX_TOPICS topics or
 * VARLOG_SERVER_MAX_LOG_STREAMS log streams, a listen address that is not 127.0.0.1:PORT),
 * RPC_UNAVAILABLE (the port cannot be bound), NOMEM, INTERNAL (a thread could not be
 * started). */
VARLOG_API varlog_err_t varlog_server_start(const varlog_server_opts_t *opts,
                                            varlog_server_t **out);

/* "127.0.0.1:PORT", the address clients give as metadata address and the address the
 * metadata advertises for the storage node. Owned by the server, valid until destroy; stays
 * the same across stop and restart. Does not block. */
VARLOG_API const char *varlog_server_address(const varlog_server_t *srv);

/* The bound port (stable across restart). Does not block. */
VARLOG_API int varlog_server_port(const varlog_server_t *srv);

/* Stops serving but keeps the log, the metadata and the fault settings: the listener
 * closes, live calls end (clients see UNAVAILABLE or CANCELLED), responses still held by an
 * injected delay are answered UNAVAILABLE. Blocks until the server's threads are joined
 * (milliseconds).
 * Errors: INVALID_ARG (NULL), STATE (already stopped). */
VARLOG_API varlog_err_t varlog_server_stop(varlog_server_t *srv);

/* Serves again on the same port with the same data; stops first if running. Blocks for a
 * few milliseconds. Errors: INVALID_ARG (NULL), RPC_UNAVAILABLE (the port was taken
 * meanwhile; the server stays stopped), NOMEM, INTERNAL. */
VARLOG_API varlog_err_t varlog_server_restart(varlog_server_t *srv);

/* Stops if running and frees everything. Accepts NULL. Blocks until threads are joined. */
VARLOG_API void varlog_server_destroy(varlog_server_t *srv);

/* ---- topology (each change bumps the metadata's applied index, as the real MR does) ---- */

/* Adds a topic without log streams; its id (the largest so far + 1) goes to *topic_id
 * (may be NULL). Errors: INVALID_ARG (NULL, VARLOG_SERVER_MAX_TOPICS topics held), NOMEM. */
VARLOG_API varlog_err_t varlog_server_add_topic(varlog_server_t *srv, int32_t *topic_id);

/* Adds a log stream to topic; its id (the largest in the cluster + 1) goes to *log_stream_id
 * (may be NULL). Errors: INVALID_ARG (NULL, VARLOG_SERVER_MAX_LOG_STREAMS ids given out),
 * RPC_NOT_FOUND (no such topic), NOMEM. */
VARLOG_API varlog_err_t varlog_server_add_log_stream(varlog_server_t *srv, int32_t topic_id,
                                                     int32_t *log_stream_id);

/* Seals / unseals a log stream: appends to a sealed one fail with FAILED_PRECONDITION
 * "sealed"; reads keep working; the metadata shows LS_STATUS_SEALED. Idempotent.
 * Errors: INVALID_ARG (NULL), RPC_NOT_FOUND (no such topic or log stream). */
VARLOG_API varlog_err_t varlog_server_seal(varlog_server_t *srv, int32_t topic_id,
                                           int32_t log_stream_id);
VARLOG_API varlog_err_t varlog_server_unseal(varlog_server_t *srv, int32_t topic_id,
                                             int32_t log_stream_id);

/* The metadata's current applied index. Does not block (a brief internal lock). */
VARLOG_API uint64_t varlog_server_applied_index(varlog_server_t *srv);

/* Payload bytes currently stored. Does not block (a brief internal lock). */
VARLOG_API uint64_t varlog_server_stored_bytes(varlog_server_t *srv);

/* The log's resident bytes, what retention bounds by max_bytes: every payload chunk still
 * allocated (header, payloads, and slack: trimmed payloads sharing a chunk with live ones,
 * unused tails) and the entry arrays' capacity (per-entry metadata, 40 bytes an entry on
 * 64-bit platforms). The allocator's own overhead and per-call state are not counted. 0 for
 * NULL. Does not block (a brief internal lock). */
VARLOG_API uint64_t varlog_server_resident_bytes(varlog_server_t *srv);

/* ---- fault injection (modelled on librdkafka's mock cluster) ----------------------------
 * Settings live until changed or varlog_server_clear_faults, and survive stop/restart. */

/* The next n calls of method end with code (a grpc status number, 1..16) and message
 * (copied; NULL = ""), without running the method. For Append each AppendRequest counts as
 * one call: the stream answers the requests before it and then ends with the status, as a
 * real failure would. An injected failure is answered at once, without an injected delay.
 * n = 0 clears. Errors: INVALID_ARG (NULL, unknown method, code out of range, n < 0),
 * NOMEM. */
VARLOG_API varlog_err_t varlog_server_fail_next(varlog_server_t *srv, const char *method, int code,
                                                const char *message, int n);

/* As varlog_server_fail_next, with Varlog error details (google.rpc.Status carrying
 * errpb.ErrorDetail strings, outermost first, copied) in the grpc-status-details-bin
 * trailer, as Go servers send for Subscribe errors. */
VARLOG_API varlog_err_t varlog_server_fail_next_details(varlog_server_t *srv, const char *method,
                                                        int code, const char *message,
                                                        const char *const *details,
                                                        size_t n_details, int n);

/* Delays every response of method by ms (0 = no delay). Unary calls answer ms after they
 * arrived; each Append request is answered ms after it was read, in order (the server reads
 * the next request only then); Subscribe/SubscribeTo start streaming ms after the call
 * arrived. Errors: INVALID_ARG (NULL, unknown method, ms < 0). */
VARLOG_API varlog_err_t varlog_server_delay(varlog_server_t *srv, const char *method, int64_t ms);

/* The next n streams of method (n < 0: all streams until cleared) are dropped after k
 * messages: they end with UNAVAILABLE "fault injection: stream dropped" as a broken
 * connection would. For Append, k responses are sent and request k+1 is neither stored nor
 * answered. k < 0 clears. Applies to Append, Subscribe and SubscribeTo. Errors: INVALID_ARG
 * (NULL, unknown or unary method). */
VARLOG_API varlog_err_t varlog_server_drop_stream_after(varlog_server_t *srv, const char *method,
                                                        int64_t k, int n);

/* As varlog_server_drop_stream_after, but the request at the drop is stored: for Append
 * only, the next n streams (n < 0: all until cleared) answer k requests, store request k + 1
 * as any other (same checks: a sealed log stream still refuses it with FAILED_PRECONDITION)
 * and then end with UNAVAILABLE "fault injection: stream dropped" without its answer, as a
 * connection lost after the write would: the client must take it for maybe appended, and
 * the records can be read back. Replaces a varlog_server_drop_stream_after setting of Append
 * (one drop setting per method); k < 0 clears. Does not block (a brief internal lock).
 * Errors: INVALID_ARG (NULL, a method other than Append). */
VARLOG_API varlog_err_t varlog_server_drop_stream_after_write(varlog_server_t *srv,
                                                              const char *method, int64_t k, int n);

/* Calls of method that reached the server since start (not reset by restart): unary calls,
 * Subscribe/SubscribeTo streams and Append streams. 0 for an unknown method or NULL. */
VARLOG_API uint64_t varlog_server_call_count(varlog_server_t *srv, const char *method);

/* Requests received by method: for Append the number of AppendRequests, otherwise equal to
 * the call count. 0 for an unknown method or NULL. */
VARLOG_API uint64_t varlog_server_request_count(varlog_server_t *srv, const char *method);

/* Clears every failure, delay and drop setting (not the counters). Accepts NULL. */
VARLOG_API void varlog_server_clear_faults(varlog_server_t *srv);

#ifdef __cplusplus
}
#endif
#endif
