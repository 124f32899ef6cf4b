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
    /* Addresses of the replicas' storage nodes in the metadata's order (replicas[0] is the
     * primary), those that resolve only: readers (subscribe, peek, trim) try them in turn. */
    size_t n_replicas;
    const char **replicas;
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

/* Pause between discovery passes: doubles from the first to the second, jittered. */
#define MD_DISCOVER_BACKOFF_MIN_MS 100
#define MD_DISCOVER_BACKOFF_MAX_MS 1000

/* Discovery as varlog.Open does it (wire reference 6.1): GetClusterInfo on every seed, keep
 * the valid answer with the highest applied index, then the first member endpoint that
 * answers GetClusterInfo validly becomes the client's metadata address. Passes repeat, with
 * a jittered pause doubling from MD_DISCOVER_BACKOFF_MIN_MS to MD_DISCOVER_BACKOFF_MAX_MS,
 * until one succeeds or deadline_ms (wire_now_ms clock) passes; the pause ends early when
 * the client closes. Runs on the caller's thread. bound and bound_ms name the deadline in the
 * error text ("open.timeout.ms", 10000). Errors: the code of the last failed call (its text in
 * "discovery: no answer within <bound> N ms; last failure: ..."), TIMED_OUT when no call
 * could be made in time, STATE on a cluster id mismatch, CLOSED, NOMEM. */
varlog_err_t md_discover(struct varlog_client *c, int64_t deadline_ms, const char *bound,
                         int64_t bound_ms);

/* What varlog_client_new does to get its first view: discovery, then GetMetadata, going back
 * to discovery after a GetMetadata failure that implicates the member, until deadline_ms.
 * Errors as md_discover and md_fetch. */
varlog_err_t md_open(struct varlog_client *c, int64_t deadline_ms);

/* GetMetadata through the current metadata address (discovering again first when it was
 * forgotten) and installs the answer if its applied index differs; then drops cached
 * channels the metadata no longer needs (md_retain_channels). Each call is bounded by
 * metadata.call.timeout.ms and by timeout_ms (< 0: the former alone). Concurrent callers
 * share one call in flight; when the shared call ends on its starter's deadline (TIMED_OUT),
 * a joiner with time left starts or joins another. The member address is forgotten only
 * after failures that implicate it (unreachable, slower than metadata.call.timeout.ms, an
 * error status or a malformed answer), never after the caller's deadline, the client
 * closing or a local failure. Errors: CLOSED, TIMED_OUT (the caller's deadline), DECODE,
 * NOMEM, RPC_* codes. */
varlog_err_t md_fetch(struct varlog_client *c, int64_t timeout_ms);

/* As md_fetch, but the answer must come from a call that began at or after not_before_ns
 * (vq_now_ns clock): a call in flight that began earlier is waited out rather than joined,
 * as its answer may predate what the caller reacts to (a refusal, a gap). 0: any call. */
varlog_err_t md_fetch_after(struct varlog_client *c, int64_t timeout_ms, int64_t not_before_ns);

/* Tells the transport which addresses the client still needs (the current view's storage
 * nodes, the seeds and the metadata member), so that channels to others are closed after
 * channel.unlisted.grace.ms, and channels to listed nodes in connect backoff retry at once.
 * Never fails (out of memory: nothing is dropped). */
void md_retain_channels(struct varlog_client *c);

/* The current view with a reference the caller drops with md_view_unref. Never NULL once
 * the client is open. */
md_view_t *md_current(struct varlog_client *c);

/* Starts / stops the periodic refresh thread ("varlog-meta"); no thread when the interval is
 * 0. md_refresher_stop joins it and accepts a never-started refresher; it also wakes
 * discovery pauses on other threads, which then see the client closing. */
varlog_err_t md_refresher_start(struct varlog_client *c);
void md_refresher_stop(struct varlog_client *c);

#endif
