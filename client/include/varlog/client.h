#ifndef VARLOG_CLIENT_H
#define VARLOG_CLIENT_H

/*
 * The client: one handle per Varlog cluster, safe to share by any number of threads.
 *
 * Threads a client owns: one gRPC I/O thread ("varlog-io", runs no user code), one metadata
 * thread ("varlog-meta", periodic refresh; absent when metadata.refresh.interval.ms is 0),
 * and a retry engine: one dispatcher and `retry.workers` worker threads that run append
 * retries, one thread per pipelined appender ("varlog-appender", varlog/appender.h), and the
 * statistics' emit ("varlog-stats", only with stats.interval.ms and a stats callback set,
 * varlog/stats.h), which destroy stops first.
 * The log callback may run on the metadata thread, on a retry worker, on an appender's
 * thread, on the statistics' thread or on the caller's thread. Synchronous calls run their
 * first attempt on the caller's thread. All of them are joined by varlog_client_destroy;
 * gRPC core's own threads are gRPC's.
 *
 * Errors: every call returns a varlog_err_t; varlog_last_error() gives the calling thread's
 * text for the last failure.
 */
#include <stddef.h>
#include <stdint.h>

#include "varlog/conf.h"
#include "varlog/error.h"
#include "varlog/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct varlog_client varlog_client_t;

/* One record to append: len bytes at data (len >= 1). Borrowed by the call. */
typedef struct varlog_record {
    const void *data;
    size_t len;
} varlog_record_t;

/* Where an entry landed: its topic, log stream, global (GLSN) and local (LLSN) positions. */
typedef struct varlog_entry_meta {
    int32_t topic_id;
    int32_t log_stream_id;
    uint64_t glsn;
    uint64_t llsn;
} varlog_entry_meta_t;

/* What an append call knows about its records when it returns. */
typedef enum varlog_outcome {
    VARLOG_APPENDED = 0,     /* stored; the metas are filled in */
    VARLOG_NOT_APPENDED = 1, /* certainly not stored: safe to retry */
    /* perhaps stored: a request reached the network and its answer was lost (timeout,
     * broken connection, client closed). Retrying may store the records twice. */
    VARLOG_MAYBE_APPENDED = 2,
} varlog_outcome_t;

/* "APPENDED", "NOT_APPENDED", "MAYBE_APPENDED"; "?" otherwise. Static; any thread. */
VARLOG_API const char *varlog_outcome_name(varlog_outcome_t outcome);

/*
 * Opens a client: checks the configuration across properties, then discovers the cluster
 * through `metadata.addresses` (GetClusterInfo on each seed, then GetMetadata on a member)
 * within `open.timeout.ms`, and starts the client's threads.
 *
 * Ownership: on success the client takes *conf and sets *conf to NULL; on failure *conf is
 * left to the caller. *out receives the client (free with varlog_client_destroy).
 * Blocks: yes, for discovery. The log callback may run on this thread.
 * Errors (errstr, optional, and varlog_last_error() say which property or server):
 * INVALID_ARG (NULL arguments, a cross-property rule broken, metadata.addresses unset),
 * RPC_UNIMPLEMENTED at once, without waiting for open.timeout.ms, when every address of
 * metadata.addresses answered that it serves no metadata repository (gRPC UNIMPLEMENTED for
 * varlog.mrpb.Management: a storage node's or varlogadm's address); the text names each
 * address. Otherwise discovery goes on until open.timeout.ms (an address that is down may
 * come up), then fails with RPC_* codes or TIMED_OUT when no seed gave valid cluster
 * information or metadata in time (the last failure's code; the text also names an address
 * that answered UNIMPLEMENTED), STATE (the cluster id differs from cluster.id), NOMEM,
 * INTERNAL (a thread could not be started).
 */
VARLOG_API varlog_err_t varlog_client_new(varlog_conf_t **conf, varlog_client_t **out, char *errstr,
                                          size_t errstr_size);

/*
 * Closes the client: appenders still open are closed first, as varlog_appender_close with
 * timeout 0 would (their pending calls get CLOSED callbacks, on their threads, before this
 * returns; the handles then serve only varlog_appender_close, which must not run concurrently
 * with this call). Then new calls fail with CLOSED, calls in progress on other threads are
 * cancelled and each returns exactly once (CLOSED, or their result if it arrived first; an
 * append whose request was sent reports MAYBE_APPENDED), then every thread is joined and
 * everything freed. Retries queued behind busy retry workers are not started: their calls
 * return CLOSED. No log callback runs after it returns. Blocks for a bounded time (calls in
 * progress end promptly when cancelled), plus as long as a log callback already running on
 * one of the client's threads takes to return: destroy waits for it rather than free what
 * that thread still uses. Accepts NULL. The client must not be used once it returned.
 * Called on one of the client's own threads (from an append callback, a subscription handler,
 * a stats callback), it would have to join the thread it runs on: it then destroys nothing,
 * logs that at VARLOG_LOG_CRIT and sets varlog_last_error() (STATE), and the client stays
 * usable; destroy it from another thread. Must not be called from a log callback.
 */
VARLOG_API void varlog_client_destroy(varlog_client_t *client);

/*
 * Fetches the cluster metadata now (GetMetadata) and replaces the client's view when it
 * changed. Blocks for at most timeout_ms (-1 = metadata.call.timeout.ms). Concurrent
 * refreshes share one call. Errors: INVALID_ARG (NULL client, timeout_ms 0 or below -1),
 * CLOSED, TIMED_OUT, RPC_* codes.
 */
VARLOG_API varlog_err_t varlog_client_refresh(varlog_client_t *client, int64_t timeout_ms);

/* The applied index of the metadata the client currently uses. Does not block. 0 for NULL. */
VARLOG_API uint64_t varlog_client_applied_index(varlog_client_t *client);

/*
 * Lists ids from the client's current metadata view (no network call): topics, the log
 * streams of a topic, or the log streams varlog_append prefers now (the topic's unsealed log
 * streams minus the ones denied after a failure). Up to cap ids are written to ids (may be NULL
 * when cap is 0), in increasing order; *n receives the total count, which may exceed cap.
 * Does not block beyond a brief internal lock.
 * Errors: INVALID_ARG (NULL client or n, NULL ids with cap > 0), UNKNOWN_TOPIC, CLOSED.
 */
VARLOG_API varlog_err_t varlog_client_topics(varlog_client_t *client, int32_t *ids, size_t cap,
                                             size_t *n);
VARLOG_API varlog_err_t varlog_client_log_streams(varlog_client_t *client, int32_t topic_id,
                                                  int32_t *ids, size_t cap, size_t *n);
VARLOG_API varlog_err_t varlog_client_appendable_log_streams(varlog_client_t *client,
                                                             int32_t topic_id, int32_t *ids,
                                                             size_t cap, size_t *n);

/*
 * Appends n records as one batch to one log stream of topic_id, chosen round robin among
 * the topic's unsealed log streams that are not denied. The batch is stored atomically with
 * consecutive GLSNs and LLSNs in one log stream, or not at all.
 *
 * A failed attempt is retried (with jittered exponential backoff, within timeout_ms) when the
 * records were certainly not stored: until timeout_ms with `append.retries` -1 (the default;
 * 3 retries when timeout_ms is -1), waiting out a sealed log stream or a topic with none
 * appendable; `append.retries` times where it is set. After an ambiguous failure (sent, no
 * answer) the records are read back from the log (`append.resolve.maybe.appended`, the
 * default): found, the call succeeds with their positions; proved absent (the primary they
 * were sent to reports the log stream sealed without them), they are retried as above;
 * neither within timeout_ms, the call fails MAYBE_APPENDED. With
 * `append.retry.maybe.appended` true they are retried instead. Before each retry the client
 * refreshes its metadata; concurrent retries share that lookup (`lookup.batch.size`). A log
 * stream that fails for reasons of its own (sealed, unreachable, unknown to its node, not
 * answering within `append.attempt.timeout.ms`) is denied for `append.deny.ttl.ms` and the
 * retry picks another; a call's own timeout (or a pipelined appender's
 * appender.delivery.timeout.ms) or the client's closing never denies a log stream. A denial ends
 * early when an append to the log stream succeeds or a new metadata version shows it unsealed with
 * a primary; when every unsealed log stream is denied, the one whose denial ends first is tried.
 *
 * Ownership: records and their bytes are borrowed for the call. metas (optional, n entries)
 * receives each record's position on success; outcome (optional) receives what is known
 * about the records whatever the result. A success leaves varlog_last_error() as it was,
 * also when attempts failed before it.
 * Blocks: yes, up to timeout_ms. -1 = no overall deadline: each attempt is bounded by
 * `append.attempt.timeout.ms`, so the call is bounded by the retries; 0 is refused.
 * The log callback may run on the calling thread. Called from a log callback on one of the
 * client's retry workers, the call runs its retries on that thread instead of queueing them
 * behind the worker it occupies.
 * Errors: INVALID_ARG (NULL client or records, a topic id below 1, n == 0, an empty record,
 * a record above append.record.max.bytes, more than append.batch.max.records records or
 * append.batch.max.bytes bytes, timeout_ms 0 or below -1), UNKNOWN_TOPIC (also after a
 * refresh), UNKNOWN_LOG_STREAM (a log stream the metadata no longer lists), NO_LOG_STREAM
 * (no log stream of the topic can take appends: it has none, or every one is sealed, even
 * in metadata fetched within metadata.recheck.interval.ms; with append.retries -1 only when
 * timeout_ms is -1, otherwise waited for until TIMED_OUT), SEALED (append.retries set),
 * TIMED_OUT (with the last attempt's cause in the text),
 * CLOSED, NOMEM, DECODE (an answer that could not be read: MAYBE_APPENDED), RPC_* codes of
 * the last attempt (RPC_DEADLINE_EXCEEDED when an attempt reached append.attempt.timeout.ms)
 * or of the metadata lookup an unknown topic needed.
 */
VARLOG_API varlog_err_t varlog_append(varlog_client_t *client, int32_t topic_id,
                                      const varlog_record_t *records, size_t n, int64_t timeout_ms,
                                      varlog_entry_meta_t *metas, varlog_outcome_t *outcome);

/*
 * As varlog_append, but to the given log stream; retries go to the same log stream, denied
 * or not (a success ends its denial). A sealed log stream fails with SEALED once the
 * refreshed metadata confirms it is sealed.
 * Errors: as varlog_append, with INVALID_ARG also for a log stream id below 1 and
 * UNKNOWN_LOG_STREAM for one the metadata does not list (after a refresh), and without
 * NO_LOG_STREAM.
 */
VARLOG_API varlog_err_t varlog_append_to(varlog_client_t *client, int32_t topic_id,
                                         int32_t log_stream_id, const varlog_record_t *records,
                                         size_t n, int64_t timeout_ms, varlog_entry_meta_t *metas,
                                         varlog_outcome_t *outcome);

/* Counters since the client was opened (of varlog_append and the metadata; varlog/stats.h
 * has the client-wide snapshot, appenders and subscriptions included). */
typedef struct varlog_client_stats {
    uint64_t appends_ok;       /* append calls that stored their records */
    uint64_t appends_failed;   /* append calls that returned an error */
    uint64_t append_attempts;  /* Append RPCs started (first attempts and retries) */
    uint64_t append_retries;   /* attempts after the first */
    uint64_t lookups;          /* metadata lookups requested by retries */
    uint64_t metadata_fetches; /* GetMetadata calls made (refreshes and lookups) */
    uint64_t metadata_updates; /* times the view changed (a new applied index) */
    uint64_t denials;          /* log streams put on the deny list */
    /* Ambiguous appends read back from the log (append.resolve.maybe.appended), the
     * appender's and varlog_append's: passes made (one read of the log stream each), and
     * appends found stored or proved absent by them. */
    uint64_t resolve_passes;
    uint64_t resolved_found;
    uint64_t resolved_absent;
} varlog_client_stats_t;

/* Copies the counters into *out. Does not block. Errors: INVALID_ARG (NULL). */
VARLOG_API varlog_err_t varlog_client_stats(varlog_client_t *client, varlog_client_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif
