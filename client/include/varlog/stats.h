#ifndef VARLOG_STATS_H
#define VARLOG_STATS_H

/*
 * Client statistics: a snapshot pulled into a struct (varlog_stats_get), and the same
 * snapshot emitted as one JSON document every stats.interval.ms through the callback set
 * with varlog_conf_set_stats_cb. docs/STATISTICS.md documents every field of both (type,
 * unit, meaning); a test checks the JSON against that document.
 *
 * Counters count from varlog_client_new and never go back; gauges (pending, in flight, lag,
 * open handles) are what holds when the snapshot is taken. Counters are kept without a lock
 * (relaxed atomics): a snapshot is not one instant, but each field is whole and a counter
 * read later is never smaller.
 */
#include <stddef.h>
#include <stdint.h>

#include "varlog/error.h"
#include "varlog/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct varlog_client varlog_client_t;

/* Most log streams whose counters the client keeps apart (varlog_stats_t.log_streams): the
 * first ones appended to get a slot for the client's lifetime; records appended to later
 * ones are summed in log_streams_untracked_*. */
#define VARLOG_STATS_LOG_STREAMS_MAX 64

/* Appended records of one log stream since the client opened (varlog_append, varlog_append_to
 * and the pipelined appenders). */
typedef struct varlog_stats_log_stream {
    int32_t topic_id;
    int32_t log_stream_id;
    uint64_t appended_records;
    uint64_t appended_bytes; /* payload bytes */
} varlog_stats_log_stream_t;

/* Append latency of the pipelined appenders' calls that were APPENDED, from
 * varlog_appender_append to the moment their batch's callbacks start, in microseconds,
 * nearest-rank percentiles within 0.4 % (a log-linear histogram). All zero before the
 * first such call, and always with stats.latency false. */
typedef struct varlog_stats_latency {
    uint64_t count; /* calls measured */
    uint64_t p50_us, p90_us, p99_us, p999_us, max_us;
} varlog_stats_latency_t;

/* One stage of the subscribe path (subscribe.stage.timing; varlog/subscribe.h says where each
 * begins and ends), over every entry the client's subscriptions delivered, in nanoseconds:
 * nearest-rank percentiles within 0.4 % (a log-linear histogram). All zero before the first
 * entry timed, and always with subscribe.stage.timing false. */
typedef struct varlog_stats_stage {
    uint64_t count; /* entries timed */
    uint64_t p50_ns, p90_ns, p99_ns, p999_ns, max_ns;
} varlog_stats_stage_t;

typedef struct varlog_stats {
    int64_t ts_ms;     /* wall clock when taken, ms since the Unix epoch */
    int64_t uptime_ms; /* since varlog_client_new began opening the client */

    /* Pipelined appenders open now, and what they hold (gauges). */
    uint32_t appenders;
    uint64_t pending_records; /* from the append call until its callback returned */
    uint64_t pending_bytes;
    uint64_t inflight_records; /* sent in an AppendRequest not answered yet */
    uint64_t inflight_bytes;

    /* Append calls and their records by outcome (varlog_append, varlog_append_to and the
     * appenders' callbacks), counters. Calls refused before anything was queued (invalid
     * arguments, QUEUE_FULL, CLOSED at intake) are not counted here. */
    uint64_t appended_calls, appended_records, appended_bytes;
    uint64_t not_appended_calls, not_appended_records;
    uint64_t maybe_appended_calls, maybe_appended_records;
    uint64_t retries;    /* varlog_append attempts after the first + appender batches resent */
    uint64_t queue_full; /* varlog_appender_append calls refused with QUEUE_FULL */
    uint64_t queue_full_waits; /* varlog_appender_append calls that waited for room */
    /* Ambiguous appends read back from the log (append.resolve.maybe.appended): passes
     * made, and appends (calls of varlog_append, batches of the appenders) found stored or
     * proved absent by them. */
    uint64_t resolve_passes, resolved_found, resolved_absent;

    /* Metadata and connections, counters. */
    uint64_t lookups;             /* metadata lookups requested by retries */
    uint64_t lookup_batch_calls;  /* GetMetadata calls that served a batch of lookups */
    uint64_t lookup_single_calls; /* GetMetadata calls that served one lookup */
    uint64_t metadata_fetches;    /* GetMetadata calls (refreshes and lookups) */
    uint64_t reconnects;          /* connections found ready again after being lost */

    varlog_stats_latency_t append_latency;

    /* Subscriptions: open now (gauge), entries delivered (counters, closed ones included),
     * and lag (gauge, summed over the open ones): for each, the highest position (GLSN;
     * LLSN for varlog_subscribe_to) received in any log stream's next entry, minus the
     * next position wanted, plus 1; 0 when no received entry is past the wanted one. GLSNs
     * are shared by every topic, so for a topic subscription it bounds the entries behind
     * from above. */
    uint32_t subscriptions;
    uint64_t subscribe_entries;
    uint64_t subscribe_bytes;
    uint64_t subscribe_lag;
    /* Outages of subscriptions (counters, closed ones included): times a subscription began
     * reconnecting (varlog_subscription_health's outages, summed), and their length in ms,
     * the current ones up to now; and the log streams of open subscriptions reconnecting
     * now (gauge). */
    uint64_t subscribe_outages;
    uint64_t subscribe_outage_ms;
    uint32_t subscribe_log_streams_down;

    /* Subscribe stage timings, per client (subscribe.stage.timing): response arrival -> the
     * subscription's queue; waited there until the merge took it; merge hand-out -> the
     * handler or varlog_subscription_next's caller has it; the handler's own time (handler
     * form only). */
    varlog_stats_stage_t subscribe_enqueue;
    varlog_stats_stage_t subscribe_transmit_queue;
    varlog_stats_stage_t subscribe_dispatch;
    varlog_stats_stage_t subscribe_handler;

    /* Per log stream, in the order they were first appended to. */
    uint32_t n_log_streams; /* entries of log_streams filled */
    uint64_t log_streams_untracked_records, log_streams_untracked_bytes;
    varlog_stats_log_stream_t log_streams[VARLOG_STATS_LOG_STREAMS_MAX];
} varlog_stats_t;

/*
 * Fills *out with a snapshot of client's statistics. Any thread, including a stats, log,
 * append or subscription callback. Does not block beyond brief internal locks (the client's,
 * then each open appender's in turn); no network call. Valid until varlog_client_destroy
 * begins. Errors: INVALID_ARG (NULL client or out).
 */
VARLOG_API varlog_err_t varlog_stats_get(varlog_client_t *client, varlog_stats_t *out);

/*
 * The periodic emit: json is one JSON document (the snapshot of varlog_stats_get, schema in
 * docs/STATISTICS.md), len bytes, NUL-terminated, valid only during the call (copy what must
 * outlive it). Runs on the client's "varlog-stats" thread, once every stats.interval.ms, never
 * with a library lock held; it may call any client function (varlog_client_destroy returns
 * at once there, refused with VARLOG_ERR_STATE: it would have to join this thread).
 * A slow callback delays the next emit, nothing else. No call runs after
 * varlog_client_destroy returned (destroy joins the thread first).
 */
typedef void varlog_stats_cb(const char *json, size_t len, void *opaque);

/* One entry's way through the subscribe path, for the observer of
 * varlog_conf_set_subscribe_observer. Durations in ns (CLOCK_MONOTONIC; varlog/subscribe.h
 * says where each clock read is). */
typedef struct varlog_subscribe_stages {
    int32_t topic_id;
    int32_t log_stream_id;
    uint64_t glsn; /* 0 for varlog_subscribe_to, whose node does not send it */
    uint64_t llsn;
    int64_t enqueue_ns;        /* response arrival -> in the subscription's queue */
    int64_t transmit_queue_ns; /* waited in that queue until the merge took it */
    int64_t dispatch_ns;       /* merge hand-out -> the handler or next()'s caller has it */
    int64_t handler_ns;        /* the handler's own time; -1 in the iterator form */
} varlog_subscribe_stages_t;

/*
 * The subscribe observer: called once per entry a subscription delivers, only while
 * subscribe.stage.timing is true, with no library lock held. stages is valid during the call
 * only. Thread: in the handler form, the subscription's own thread ("varlog-sub"), right
 * after on_entry returned; in the iterator form, the thread calling varlog_subscription_next,
 * inside that call, just before it returns the entry. Calls for one subscription never
 * overlap; calls for different subscriptions may run at once on their threads. It delays
 * its subscription's next entry as a handler does (its own time lands in no stage of this
 * entry), so it should only record and return. It may call library functions that a
 * handler may (varlog_stats_get, varlog_subscription_stats, appends), but not
 * varlog_subscription_next or varlog_subscription_close on the subscription it observes, nor
 * varlog_client_destroy. It returns nothing: the library does not look at what it did.
 */
typedef void varlog_subscribe_observer_cb(const varlog_subscribe_stages_t *stages, void *opaque);

/*
 * The snapshot as the periodic emit writes it: one JSON document, malloc'ed and
 * NUL-terminated, into *json (free with varlog_stats_json_free), its length without the NUL
 * into *len (optional). For tools that print statistics without the periodic thread.
 * Errors: INVALID_ARG (NULL client or json), NOMEM.
 */
VARLOG_API varlog_err_t varlog_stats_json(varlog_client_t *client, char **json, size_t *len);

/* Frees a document of varlog_stats_json. Accepts NULL. */
VARLOG_API void varlog_stats_json_free(char *json);

/*
 * The client's metrics in the Prometheus text exposition format 0.0.4, for an application
 * to serve on its own /metrics endpoint (the library opens no port; varlog-cli's
 * --metrics-listen and examples/metrics_http.c show how). The names, units and attributes are
 * OpenTelemetry's messaging semantic conventions v1.27.0 (messaging.client.sent.messages,
 * messaging.client.operation.duration, ...) translated as OpenTelemetry translates to
 * Prometheus (dots to underscores, a _seconds unit suffix, _total on counters), and the
 * client's own under varlog_; docs/STATISTICS.md lists every one. Every family has HELP and
 * TYPE lines; counters never go back; histograms' buckets are cumulative and end with +Inf
 * equal to _count. One snapshot per call: each value is read once, after the last metric
 * family's series were found, so the families agree as varlog_stats_get's fields do.
 *
 * *text receives a malloc'ed, NUL-terminated document (free it with
 * varlog_stats_prometheus_free), *len (optional) its length without the NUL. Any thread,
 * including the client's callbacks.
 * Blocks: with subscriptions open, for the consumer lag (varlog_client_subscription_lag_*),
 * it asks every replica of each log stream they read for its committed end, all at once, and
 * waits up to stats.lag.timeout.ms (default 1 s; 0 = no lag and no call) for the answers: a
 * log stream none of whose replicas answered in time has no lag series in this scrape.
 * Otherwise only the brief locks of varlog_stats_get and a read of the client's metadata.
 * Valid until varlog_client_destroy begins. Errors: INVALID_ARG (NULL client or text), NOMEM.
 */
VARLOG_API varlog_err_t varlog_stats_prometheus(varlog_client_t *client, char **text, size_t *len);

/* Frees a document of varlog_stats_prometheus. Accepts NULL. */
VARLOG_API void varlog_stats_prometheus_free(char *text);

#ifdef __cplusplus
}
#endif
#endif
