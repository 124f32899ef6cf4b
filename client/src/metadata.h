#ifndef VARLOG_METADATA_H
#define VARLOG_METADATA_H

/*
 * The client's view of the cluster metadata: an immutable, reference-counted snapshot built
 * from one GetMetadata answer, swapped whole when a newer one arrives. Readers take a
 * reference and use it without locks; nothing in a view ever changes.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "varlog/error.h"

typedef struct md_log_stream {
    int32_t topic_id;
    int32_t log_stream_id;
    bool sealed;         /* LS_STATUS_SEALED or SEALING in the metadata */
    const char *primary; /* address of replicas[0]'s storage node; NULL if unresolvable */
} md_log_stream_t;

typedef struct md_topic {
    int32_t topic_id;
    size_t n_log_streams;
    int32_t *log_stream_ids; /* increasing */
} md_topic_t;

typedef struct md_view {
    atomic_int refs;
    uint64_t applied_index;
    size_t n_topics;
    md_topic_t *topics; /* by increasing id */
    size_t n_log_streams;
    md_log_stream_t *log_streams; /* by increasing (log stream id, topic id) */
    size_t n_nodes;
    char **node_addresses; /* owned strings the log streams point into */
} md_view_t;

struct ProtobufCMessage;

/* Builds a view from a decoded varlog.varlogpb.MetadataDescriptor. Unknown storage nodes
 * leave a log stream's primary NULL. Returns NULL when memory runs out. */
md_view_t *md_view_build(const struct ProtobufCMessage *metadata_descriptor);
md_view_t *md_view_ref(md_view_t *v);
void md_view_unref(md_view_t *v); /* accepts NULL */
const md_topic_t *md_view_topic(const md_view_t *v, int32_t topic_id);
const md_log_stream_t *md_view_log_stream(const md_view_t *v, int32_t topic_id,
                                          int32_t log_stream_id);

struct varlog_client;

/* Discovery as varlog.Open does it (wire reference 6.1): GetClusterInfo on every seed, keep
 * the valid answer with the highest applied index, then the first member endpoint that
 * answers GetClusterInfo validly becomes the client's metadata address. Runs on the caller's
 * thread until deadline_ms (wire_now_ms clock). Errors: the last failure's code, STATE on a
 * cluster id mismatch, TIMED_OUT; the thread's error text says which address failed how. */
varlog_err_t md_discover(struct varlog_client *c, int64_t deadline_ms);

/* GetMetadata through the current metadata address (discovering again first when the last
 * call failed) and installs the answer if its applied index differs. Concurrent callers
 * share one call in flight. timeout_ms bounds the caller's wait and the call. Errors:
 * CLOSED, TIMED_OUT, DECODE, NOMEM, RPC_* codes. */
varlog_err_t md_fetch(struct varlog_client *c, int64_t timeout_ms);

/* The current view with a reference the caller drops with md_view_unref. Never NULL once
 * the client is open. */
md_view_t *md_current(struct varlog_client *c);

/* Starts / stops the periodic refresh thread ("varlog-meta"); no thread when the interval is
 * 0. md_refresher_stop joins it and accepts a never-started refresher. */
varlog_err_t md_refresher_start(struct varlog_client *c);
void md_refresher_stop(struct varlog_client *c);

#endif
