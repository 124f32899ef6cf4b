#ifndef VARLOG_ADMIN_H
#define VARLOG_ADMIN_H

/*
 * Administering a cluster: topics, log streams (add, seal, unseal, trim), storage nodes and
 * metadata-repository nodes, through Varlog's admin service varlog.admpb.ClusterManager, as
 * Go's varlog.Admin and varlogctl do.
 *
 * The address is the admin's, not the metadata repository's: a real cluster's admin server
 * (varlogadm, its --listen address, default port 9090), or varlog-server's address (it
 * serves the admin service on its one port).
 *
 * An admin handle is independent of any client: it holds no metadata view and starts no
 * call on its own. Every operation is one unary call on the caller's thread (two when a
 * NotFound must be told apart, below), with no retry: an admin operation such as AddTopic is
 * not idempotent, so whether to repeat one that failed with RPC_UNAVAILABLE or TIMED_OUT is
 * the caller's decision (varlog_err_is_retriable says which errors are transient). A change
 * shows in a client's metadata at its next refresh (varlog_client_refresh, or the periodic
 * one).
 *
 * Threads: the handle owns one gRPC I/O thread ("varlog-io", runs no user code), joined by
 * varlog_admin_destroy. The log callback runs on the thread of the call that logs. A handle
 * may be shared by any number of threads; its calls run concurrently.
 *
 * Results: every result is a fixed-size struct or an array of them that the caller
 * provides; nothing the caller must free. Lists fill up to cap elements, in increasing id
 * order, and give the total count, which may exceed cap (call again with a larger array).
 * On failure the caller's structs, arrays and counts are left as they were.
 *
 * Timeouts: every call takes timeout_ms, the bound of the whole call: a positive number of
 * milliseconds, or -1 for VARLOG_ADMIN_TIMEOUT_DEFAULT_MS. 0 and values below -1 are refused
 * with INVALID_ARG, as varlog_append refuses them. A call that reaches it returns TIMED_OUT;
 * the operation may still complete on the server.
 *
 * Errors, common to every call (the function comments list only what they add):
 *   INVALID_ARG   a NULL handle or required pointer, an id below 1, a NULL array with
 *                 cap > 0, a bad timeout_ms (nothing is sent);
 *   TIMED_OUT     timeout_ms passed before the answer came;
 *   CLOSED        varlog_admin_destroy began;
 *   DECODE        the answer could not be decoded, lacks what the call returns, or holds an
 *                 address longer than VARLOG_ADMIN_ADDRESS_MAX - 1 bytes;
 *   NOMEM, INTERNAL;
 *   RPC_*         the server's status: RPC_UNAVAILABLE when the admin cannot be reached,
 *                 RPC_UNIMPLEMENTED when the address serves no admin service (a metadata
 *                 repository's or storage node's address), RPC_FAILED_PRECONDITION for what
 *                 the cluster refuses in its state (e.g. a second storage node on
 *                 varlog-server), RPC_NOT_FOUND for an unknown storage node or MR node.
 * A NotFound answer about a topic or a log stream is reported as UNKNOWN_TOPIC or
 * UNKNOWN_LOG_STREAM: for calls that name only a topic it is the topic; for calls that name
 * a log stream of a topic, the call asks the server once more (GetTopic) whether the topic
 * exists, since Varlog's texts are not a contract, and only if that answer is
 * inconclusive goes by the text ("no such topic" means the topic).
 * Each failure sets varlog_last_error() to a text naming the operation, the ids, the
 * address and the server's own message, e.g.
 * `seal log stream 3 of topic 1 at 127.0.0.1:9090: ERR_UNKNOWN_LOG_STREAM (ERR_RPC_NOT_FOUND:
 * seal: no such log stream: tpid 1, lsid 3)`. A success leaves the text as it was.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "varlog/conf.h"
#include "varlog/error.h"
#include "varlog/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct varlog_admin varlog_admin_t;

/* timeout_ms -1 means this. Admin operations on a real cluster involve the metadata
 * repository's consensus and the storage nodes (AddLogStream seals and unseals the new log
 * stream), so the default is far longer than a client's metadata call. */
#define VARLOG_ADMIN_TIMEOUT_DEFAULT_MS 10000

/* Replica storage node ids a varlog_log_stream_info_t holds. Varlog's replication factor is
 * usually 3; a log stream with more replicas reports its true count in n_replicas and the
 * first VARLOG_ADMIN_MAX_REPLICAS ids (the primary first). */
#define VARLOG_ADMIN_MAX_REPLICAS 16

/* Bytes of an address or URL field, NUL included: a DNS name (at most 253 bytes) with a
 * scheme and a port fits. */
#define VARLOG_ADMIN_ADDRESS_MAX 320

/* Status values are the wire's (varlogpb). A value this library does not know is passed
 * through as the server sent it; the *_name functions then give "?". */
typedef enum varlog_topic_status {
    VARLOG_TOPIC_RUNNING = 0,
    VARLOG_TOPIC_DELETED = 1,
} varlog_topic_status_t;

typedef enum varlog_log_stream_status {
    VARLOG_LOG_STREAM_RUNNING = 0,   /* appendable */
    VARLOG_LOG_STREAM_SEALING = 1,   /* being sealed: appends are refused */
    VARLOG_LOG_STREAM_SEALED = 2,    /* appends are refused with VARLOG_ERR_SEALED; reads work */
    VARLOG_LOG_STREAM_DELETED = 3,   /* unregistered */
    VARLOG_LOG_STREAM_UNSEALING = 4, /* being unsealed */
} varlog_log_stream_status_t;

typedef enum varlog_storage_node_status {
    VARLOG_STORAGE_NODE_RUNNING = 0,
    VARLOG_STORAGE_NODE_DELETED = 1,
} varlog_storage_node_status_t;

/* "RUNNING", "DELETED", "SEALING", ...; "?" for a value not listed above. Static; any
 * thread. */
VARLOG_API const char *varlog_topic_status_name(varlog_topic_status_t status);
VARLOG_API const char *varlog_log_stream_status_name(varlog_log_stream_status_t status);
VARLOG_API const char *varlog_storage_node_status_name(varlog_storage_node_status_t status);

/* A topic. Its log streams are listed by varlog_admin_list_log_streams. */
typedef struct varlog_topic_info {
    int32_t topic_id;
    varlog_topic_status_t status;
    size_t n_log_streams;
} varlog_topic_info_t;

/* A log stream: its replicas' storage node ids, the primary (where appends go) first. */
typedef struct varlog_log_stream_info {
    int32_t topic_id;
    int32_t log_stream_id;
    varlog_log_stream_status_t status;
    size_t n_replicas; /* the true count; ids beyond VARLOG_ADMIN_MAX_REPLICAS are not kept */
    int32_t replicas[VARLOG_ADMIN_MAX_REPLICAS];
} varlog_log_stream_info_t;

/* A storage node: the address clients dial, and the log stream replicas it hosts as it
 * reported them (0 when the admin has not heard from it). */
typedef struct varlog_storage_node_info {
    int32_t storage_node_id;
    varlog_storage_node_status_t status;
    char address[VARLOG_ADMIN_ADDRESS_MAX];
    size_t n_log_stream_replicas;
} varlog_storage_node_info_t;

/* A metadata-repository node: its Raft URL, its RPC address (what clients give as
 * metadata.addresses), whether it leads the Raft group, and whether it is a learner. */
typedef struct varlog_mr_node_info {
    uint64_t node_id;
    char raft_url[VARLOG_ADMIN_ADDRESS_MAX];
    char rpc_addr[VARLOG_ADMIN_ADDRESS_MAX];
    bool leader;
    bool learner;
} varlog_mr_node_info_t;

/* A member of the metadata repository's Raft group as GetMRMembers names it: Varlog's admin
 * gives the member's Raft URL (its peer address). */
typedef struct varlog_mr_member {
    uint64_t node_id;
    char peer[VARLOG_ADMIN_ADDRESS_MAX];
} varlog_mr_member_t;

/*
 * Opens an admin handle for the admin service at address ("host:port", or any gRPC target).
 * No network call is made: an address that does not answer shows up at the first operation
 * as RPC_UNAVAILABLE.
 *
 * conf (optional, borrowed for the call: the handle keeps its own copy of what it uses;
 * NULL = defaults): only reconnect.backoff.max.ms, log.level, debug and the log callback
 * apply (the callback's opaque pointer must stay valid while the handle lives); the other
 * properties are client properties and are ignored.
 * Ownership: *out receives the handle (free with varlog_admin_destroy). address is copied.
 * Blocks: briefly (starts the I/O thread).
 * Errors (errstr, optional, errstr_size bytes, always NUL-terminated, and
 * varlog_last_error() say why): INVALID_ARG (NULL address or out, an empty address, one
 * with spaces or commas, which would be a list), NOMEM, INTERNAL (the I/O thread could not
 * be started).
 */
VARLOG_API varlog_err_t varlog_admin_new(const char *address, const varlog_conf_t *conf,
                                         varlog_admin_t **out, char *errstr, size_t errstr_size);

/*
 * Closes the handle: calls in progress on other threads are cancelled and each returns
 * CLOSED (or its result, if it came first), later calls return CLOSED, then the I/O thread
 * is joined and everything freed. Blocks for a bounded time (cancellation ends calls
 * promptly), plus as long as a log callback already running inside a call takes to return.
 * Accepts NULL. Must not be called from a log callback; the handle must not be used once it
 * returned.
 */
VARLOG_API void varlog_admin_destroy(varlog_admin_t *admin);

/* The address given to varlog_admin_new. Owned by the handle, valid until destroy. "" for
 * NULL. Does not block. */
VARLOG_API const char *varlog_admin_address(const varlog_admin_t *admin);

/* ---- topics --------------------------------------------------------------------------------- */

/* Adds a topic, without log streams; the server picks its id, written to *topic_id.
 * Errors: common ones. */
VARLOG_API varlog_err_t varlog_admin_add_topic(varlog_admin_t *admin, int64_t timeout_ms,
                                               int32_t *topic_id);

/* Describes topic_id into *out. Errors: common ones, UNKNOWN_TOPIC. */
VARLOG_API varlog_err_t varlog_admin_get_topic(varlog_admin_t *admin, int32_t topic_id,
                                               int64_t timeout_ms, varlog_topic_info_t *out);

/* Lists every topic (up to cap into out; out may be NULL when cap is 0; *n_total receives
 * the count). Errors: common ones. */
VARLOG_API varlog_err_t varlog_admin_list_topics(varlog_admin_t *admin, int64_t timeout_ms,
                                                 varlog_topic_info_t *out, size_t cap,
                                                 size_t *n_total);

/* Unregisters topic_id. What happens to its log streams is the cluster's policy (Varlog
 * leaves them as they are). Errors: common ones, UNKNOWN_TOPIC. */
VARLOG_API varlog_err_t varlog_admin_unregister_topic(varlog_admin_t *admin, int32_t topic_id,
                                                      int64_t timeout_ms);

/* ---- log streams ---------------------------------------------------------------------------- */

/* Adds a log stream to topic_id, its replicas placed by the server; *out receives it (its
 * new id, its replicas; RUNNING once the server answered, which it does after the log
 * stream could take appends).
 * Errors: common ones, UNKNOWN_TOPIC, RPC_RESOURCE_EXHAUSTED or RPC_FAILED_PRECONDITION
 * (no storage node can take it, too few storage nodes for the replication factor). */
VARLOG_API varlog_err_t varlog_admin_add_log_stream(varlog_admin_t *admin, int32_t topic_id,
                                                    int64_t timeout_ms,
                                                    varlog_log_stream_info_t *out);

/* Describes log stream log_stream_id of topic_id into *out.
 * Errors: common ones, UNKNOWN_TOPIC, UNKNOWN_LOG_STREAM (also for a log stream of another
 * topic). */
VARLOG_API varlog_err_t varlog_admin_get_log_stream(varlog_admin_t *admin, int32_t topic_id,
                                                    int32_t log_stream_id, int64_t timeout_ms,
                                                    varlog_log_stream_info_t *out);

/* Lists the log streams of topic_id (as varlog_admin_list_topics).
 * Errors: common ones, UNKNOWN_TOPIC. */
VARLOG_API varlog_err_t varlog_admin_list_log_streams(varlog_admin_t *admin, int32_t topic_id,
                                                      int64_t timeout_ms,
                                                      varlog_log_stream_info_t *out, size_t cap,
                                                      size_t *n_total);

/* Seals a log stream: from then on appends to it fail with VARLOG_ERR_SEALED (a client's
 * varlog_append moves on to the topic's other log streams once its metadata shows the
 * seal), reads keep working. *sealed_glsn (optional) receives the GLSN of the log stream's
 * last committed entry (0 when it has none). Sealing a sealed log stream is answered as the
 * server decides (Varlog: OK, with the same GLSN). The pair (topic, log stream) is checked
 * with the admin first (one GetTopic call within the timeout): varlogadm itself would seal
 * log stream log_stream_id of whichever topic has it.
 * Errors: common ones, UNKNOWN_TOPIC, UNKNOWN_LOG_STREAM (also for a log stream of another
 * topic). */
VARLOG_API varlog_err_t varlog_admin_seal(varlog_admin_t *admin, int32_t topic_id,
                                          int32_t log_stream_id, int64_t timeout_ms,
                                          uint64_t *sealed_glsn);

/* Unseals a sealed log stream: appends to it are accepted again. *out (optional) receives
 * the log stream as the server describes it after the unseal. The pair is checked first, as
 * varlog_admin_seal does.
 * Errors: common ones, UNKNOWN_TOPIC, UNKNOWN_LOG_STREAM (also for a log stream of another
 * topic), RPC_FAILED_PRECONDITION or others
 * the server gives for a log stream that cannot be unsealed in its state. */
VARLOG_API varlog_err_t varlog_admin_unseal(varlog_admin_t *admin, int32_t topic_id,
                                            int32_t log_stream_id, int64_t timeout_ms,
                                            varlog_log_stream_info_t *out);

/* Trims the prefix of topic_id up to last_glsn (inclusive) in every log stream of the
 * topic: a subscription of a range below last_glsn + 1 then ends with VARLOG_ERR_TRIMMED.
 * OK when every log stream replica reported success (also for a topic without log streams:
 * nothing to trim). Otherwise the first failed replica's error (SEALED when its text says
 * "sealed", RPC_UNKNOWN for any other text, the form in which a Varlog storage node's
 * failure reaches the admin), with a text listing every failed replica (storage node, log
 * stream, the node's message); the others were trimmed.
 * Errors: common ones (INVALID_ARG also for last_glsn 0 or UINT64_MAX), UNKNOWN_TOPIC,
 * SEALED, RPC_UNKNOWN. */
VARLOG_API varlog_err_t varlog_admin_trim(varlog_admin_t *admin, int32_t topic_id,
                                          uint64_t last_glsn, int64_t timeout_ms);

/* ---- storage nodes and the metadata repository ---------------------------------------------- */

/* Describes storage node storage_node_id into *out. Errors: common ones (RPC_NOT_FOUND for
 * an unknown node). */
VARLOG_API varlog_err_t varlog_admin_get_storage_node(varlog_admin_t *admin,
                                                      int32_t storage_node_id, int64_t timeout_ms,
                                                      varlog_storage_node_info_t *out);

/* Lists the cluster's storage nodes (as varlog_admin_list_topics). Errors: common ones. */
VARLOG_API varlog_err_t varlog_admin_list_storage_nodes(varlog_admin_t *admin, int64_t timeout_ms,
                                                        varlog_storage_node_info_t *out, size_t cap,
                                                        size_t *n_total);

/* Lists the metadata repository's nodes (as varlog_admin_list_topics). Errors: common
 * ones. */
VARLOG_API varlog_err_t varlog_admin_list_mr_nodes(varlog_admin_t *admin, int64_t timeout_ms,
                                                   varlog_mr_node_info_t *out, size_t cap,
                                                   size_t *n_total);

/* The metadata repository's Raft group: *leader (optional) the leader's node id,
 * *replication_factor (optional) the storage replication factor of the cluster, and its
 * members (as varlog_admin_list_topics, in node id order). Errors: common ones. */
VARLOG_API varlog_err_t varlog_admin_get_mr_members(varlog_admin_t *admin, int64_t timeout_ms,
                                                    uint64_t *leader, int32_t *replication_factor,
                                                    varlog_mr_member_t *out, size_t cap,
                                                    size_t *n_total);

#ifdef __cplusplus
}
#endif
#endif
