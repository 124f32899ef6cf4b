/*
 * The configuration's property table: one row a property, which parsing, range checks, get,
 * defaults (conf.c) and the generated CONFIGURATION.md all read, so adding a row is the
 * whole job of adding a property.
 */
#include "conf_table.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "conf_internal.h"

static const char *const level_symbols[] = {"emerg",  "alert", "crit",  "err", "warning",
                                            "notice", "info",  "debug", NULL};
static const char *const ctx_symbols[] = {"conf",      "rpc",   "metadata", "append",
                                          "subscribe", "retry", NULL};

/* Enum values are symbol indexes and context bits are symbol positions. */
_Static_assert(VARLOG_LOG_EMERG == 0 && VARLOG_LOG_DEBUG == 7, "log levels are 0..7");
_Static_assert(sizeof(level_symbols) / sizeof(level_symbols[0]) == 8 + 1, "one name a level");
_Static_assert(sizeof(ctx_symbols) / sizeof(ctx_symbols[0]) == 6 + 1, "one name a context");
_Static_assert(VARLOG_LOG_CTX_ALL == (1u << 6) - 1, "contexts are bits 0..5");
_Static_assert(VARLOG_LOG_CTX_RETRY == 1 << 5, "retry is the last context bit");
_Static_assert(sizeof(varlog_log_level_t) == sizeof(int), "enum fields are int-sized");

/* Offset of field f, refusing to compile unless f has type T: a row whose type disagrees
 * with its field would write past the field. */
#define FIELD(f, T)                                                                                \
    (offsetof(struct varlog_conf, f) +                                                             \
     0 * sizeof(char[_Generic(((struct varlog_conf *)0)->f, T : 1, default                         \
                              : -1)]))

#define INT_PROP(n, f, d, lo, hi, u, text)                                                         \
    {                                                                                              \
        .name = n, .type = CONF_TYPE_INT, .def = d, .min = lo, .max = hi, .unit = u, .desc = text, \
        .offset = FIELD(f, int64_t)                                                                \
    }
#define BOOL_PROP(n, f, d, text)                                                                   \
    {                                                                                              \
        .name = n, .type = CONF_TYPE_BOOL, .def = d, .unit = "", .desc = text,                     \
        .offset = FIELD(f, bool)                                                                   \
    }

#define MS "ms"

static const conf_property_t props[] = {
    {.name = "metadata.addresses",
     .type = CONF_TYPE_ADDRS,
     .def = "",
     .unit = "",
     .desc = "Seed addresses of the metadata repository (the RPC endpoints of Varlog's MR "
             "nodes), as host:port separated by commas; IPv6 hosts in brackets. Spaces around "
             "an address are dropped. Required: varlog_client_new refuses a configuration "
             "without it.",
     .offset = FIELD(metadata_addresses, char *)},
    INT_PROP("cluster.id", cluster_id, "1", 1, INT32_MAX, "",
             "Cluster id the metadata repository must report; discovery refuses a repository "
             "of another cluster."),
    INT_PROP("open.timeout.ms", open_timeout_ms, "10000", 1, 3600000, MS,
             "Bound on the discovery varlog_client_new performs (reaching a metadata "
             "repository and fetching the cluster's metadata)."),
    INT_PROP("metadata.call.timeout.ms", metadata_call_timeout_ms, "1000", 1, 600000, MS,
             "Deadline of each GetClusterInfo or GetMetadata call to the metadata repository."),
    INT_PROP("metadata.refresh.interval.ms", metadata_refresh_interval_ms, "60000", 0, 86400000, MS,
             "Period of the background metadata refresh. 0 turns the periodic refresh off "
             "(metadata is then fetched only when an operation needs it)."),
    INT_PROP("metadata.recheck.interval.ms", metadata_recheck_interval_ms, "1000", 0, 600000, MS,
             "Least time between two metadata lookups that appends or subscriptions ask for "
             "because the client's metadata looks out of date: a topic without an appendable "
             "log stream (every one sealed, or none yet), one whose sealed or denied log "
             "streams appends pass over, or a GLSN a subscription waits for that no log stream "
             "it reads has sent (varlog/subscribe.h). Such lookups are shared by every caller "
             "of the client. An "
             "unsealed or new log stream is used within about this time of the cluster "
             "showing it. 0 turns them off (then only the periodic refresh notices)."),
    INT_PROP("append.retries", append_retries, "-1", -1, 100, "",
             "Retries after a failed attempt of an append (varlog_append, varlog_append_to, the "
             "pipelined appender). -1: no count; a failure after which the records are "
             "certainly not stored (a sealed log stream, no appendable log stream, a refused "
             "connection, a full node) is retried, with backoff, until the call's deadline "
             "(its timeout, appender.delivery.timeout.ms for the appender), waiting for the "
             "cluster to take appends again; 3 retries where there is no deadline. 0 means a "
             "single attempt."),
    INT_PROP("append.retry.backoff.ms", append_retry_backoff_ms, "10", 1, 60000, MS,
             "Base delay before the first retry; each further retry doubles it, up to "
             "append.retry.backoff.max.ms. Each delay is drawn uniformly from [d/2, d) so that "
             "calls that failed together do not retry together."),
    INT_PROP("append.retry.backoff.max.ms", append_retry_backoff_max_ms, "1000", 1, 600000, MS,
             "Cap of the retry delay. Must be at least append.retry.backoff.ms."),
    BOOL_PROP("append.retry.maybe.appended", append_retry_maybe_appended, "false",
              "Also retry after an ambiguous failure, one after which the records may have "
              "been appended: a retry may then append them twice."),
    BOOL_PROP("append.resolve.maybe.appended", append_resolve_maybe_appended, "true",
              "Decide an ambiguous failure (a batch sent whose stream broke without an answer) "
              "by reading the log stream back before reporting it, until the call's deadline: "
              "the batch's records found there make it APPENDED at the GLSNs they have; proved "
              "absent (a replica of the log stream reports it sealed, and the records are not "
              "among its entries after the last one the client knew stored), the batch is "
              "certainly not stored and is retried; otherwise it ends MAYBE_APPENDED. Costs a "
              "short read of the log stream, only on such a failure. Matching is by bytes: "
              "another writer's identical records can be taken for ours (docs/RELIABILITY.md). "
              "false: ambiguous failures are reported MAYBE_APPENDED at once."),
    INT_PROP("append.attempt.timeout.ms", append_attempt_timeout_ms, "10000", 1, 3600000, MS,
             "Bound on one append attempt (sending the batch and waiting for its answer). An "
             "attempt that reaches it while the call still has time is taken for a hung node: "
             "its log stream is denied and the attempt counts as MAYBE_APPENDED. It also bounds "
             "the attempts of a call with timeout -1, whose whole duration the retries then "
             "bound."),
    INT_PROP("append.deny.ttl.ms", append_deny_ttl_ms, "600000", 0, 86400000, MS,
             "How long varlog_append skips a log stream after an append to it failed for a "
             "reason of the log stream's own (sealed, unreachable, not on its node, full); the "
             "caller's timeout and the client closing never deny. 0 never denies a log "
             "stream."),
    INT_PROP("append.record.max.bytes", append_record_max_bytes, "4194304", 1, 1073741824, "bytes",
             "Largest record an append accepts. Must not exceed append.batch.max.bytes."),
    INT_PROP("append.batch.max.records", append_batch_max_records, "10000", 1, 1000000, "records",
             "Most records one append call accepts."),
    INT_PROP("append.batch.max.bytes", append_batch_max_bytes, "67108864", 1, INT32_MAX, "bytes",
             "Most payload bytes one append call accepts (the sum of its records' sizes)."),
    INT_PROP("appender.pipeline.depth", appender_pipeline_depth, "2", 1, 64, "requests",
             "AppendRequests a pipelined appender keeps in flight on each Append stream before "
             "it waits for an answer. Varlog's Go client uses 2; a Varlog storage node reads "
             "up to 8 ahead per stream, so more mostly adds buffering."),
    INT_PROP("appender.linger.ms", appender_linger_ms, "5", 0, 60000, MS,
             "How long a pipelined appender waits for more records before it sends a batch "
             "that is not full. While every pipeline is full, records keep joining the open "
             "batch whatever this says; flush and close do not wait for it."),
    INT_PROP("appender.batch.max.records", appender_batch_max_records, "1000", 1, 1000000,
             "records",
             "Most records a pipelined appender packs into one AppendRequest, and most records "
             "one varlog_appender_append call accepts. Must not exceed append.batch.max.records "
             "or appender.queue.max.records."),
    INT_PROP("appender.batch.max.bytes", appender_batch_max_bytes, "1048576", 1, INT32_MAX, "bytes",
             "Most payload bytes a pipelined appender packs into one AppendRequest, and most one "
             "varlog_appender_append call accepts. Each transmit-queue slot reserves this much "
             "(address space; memory as it is used). Must not exceed append.batch.max.bytes or "
             "appender.queue.max.bytes."),
    INT_PROP("appender.queue.max.records", appender_queue_max_records, "100000", 1, INT32_MAX,
             "records",
             "Most records a pipelined appender holds, from the append call until its callback "
             "returned; appends beyond it wait (up to their timeout) or fail with QUEUE_FULL. "
             "The transmit queue grows to hold them, up to this / appender.batch.max.records "
             "batches (at most 4096) beyond its initial ones, and gives back the added batch "
             "slots that stay free for a second. appender.client.queue.max.records bounds all "
             "the appenders of a client together. A record held costs about 110 bytes beside "
             "its payload: a producer that outruns the log keeps 100,000 records of 128 B in "
             "24 MB (50,000 in 12, at a few per cent more CPU per record on an 8-log-stream "
             "topic)."),
    INT_PROP("appender.queue.max.bytes", appender_queue_max_bytes, "67108864", 1, INT64_MAX,
             "bytes",
             "Most payload bytes a pipelined appender holds, counted as "
             "appender.queue.max.records. A producer that outruns the log keeps it full, and "
             "producers that waited go on once a quarter of it is free: keep it well above what "
             "the pipelines hold (log streams x (appender.pipeline.depth + 1) x a batch's bytes), "
             "or some of them run short and each record costs more CPU (docs/"
             "BENCHMARKS-CLUSTER.md, \"The queue's bound against RSS\"). On an 8-log-stream "
             "topic with depth 8 and 4 KiB records, 48 MiB cost the CPU of 64 MiB and 60 "
             "instead of 77 MB of RSS."),
    INT_PROP("appender.threads", appender_threads, "0", 0, 64, "threads",
             "0 (the default): each pipelined appender has a thread of its own, which sends its "
             "batches, completes its Append streams and runs its callbacks. N: the client's "
             "appenders share N threads (each new appender goes to the one running the fewest), "
             "started as appenders need them and ended by the client's destroy. Sharing saves a "
             "thread and its wake-ups per appender, which counts with many appenders at a "
             "trickle; in exchange a callback that blocks delays every appender of its thread, "
             "and a callback may not flush or close any of them (STATE) nor wait for room in "
             "their queues (varlog/appender.h, Threads)."),
    INT_PROP("appender.client.queue.max.records", appender_client_queue_max_records, "100000", 0,
             INT32_MAX, "records",
             "Most records all the pipelined appenders of one client hold together, counted as "
             "appender.queue.max.records (the bound of librdkafka's "
             "queue.buffering.max.messages): with one appender per log stream, the client holds "
             "what one topic-wide appender would, not that many times over. An append beyond it "
             "waits (up to its timeout) for any appender of the client to settle calls, or fails "
             "with QUEUE_FULL. Never below appender.queue.max.records, which it is raised to: "
             "one appender alone meets its own bound first. 0: no client-wide bound."),
    INT_PROP("appender.client.queue.max.bytes", appender_client_queue_max_bytes, "67108864", 0,
             INT64_MAX, "bytes",
             "Most payload bytes all the pipelined appenders of one client hold together, as "
             "appender.client.queue.max.records (librdkafka's queue.buffering.max.kbytes). Never "
             "below appender.queue.max.bytes, which it is raised to. 0: no client-wide bound."),
    INT_PROP("appender.delivery.timeout.ms", appender_delivery_timeout_ms, "30000", 0, 86400000, MS,
             "Bound on the time from a pipelined append call to its callback: queueing, every "
             "attempt and every backoff. A call whose batch is still unsettled then fails with "
             "TIMED_OUT (MAYBE_APPENDED if an attempt may have stored it); a batch in flight is "
             "given up by ending its stream. 30 s rides out a storage node restart or a "
             "metadata repository failover (seconds) and reports a dead cluster within half a "
             "minute. 0: no bound (append.retries alone ends a batch's attempts)."),
    INT_PROP("subscribe.prefetch.entries", subscribe_prefetch_entries, "256", 1, 1000000, "entries",
             "Entries a subscription buffers per log stream before it stops receiving from "
             "that log stream's storage node (gRPC's flow control then holds the node back). "
             "With subscribe.prefetch.bytes it bounds a subscription's memory whatever its "
             "range, beside what gRPC itself holds in each stream's HTTP/2 window, which it "
             "sizes from the connection's measured bandwidth-delay product, and which a "
             "topic-wide subscription's read window bounds (subscribe.window.bytes; docs/"
             "ARCHITECTURE.md, \"Subscriptions\")."),
    INT_PROP("subscribe.prefetch.bytes", subscribe_prefetch_bytes, "4194304", 0, INT64_MAX, "bytes",
             "Received bytes a subscription buffers per log stream, as "
             "subscribe.prefetch.entries; an entry larger than this still gets through, alone. "
             "0 bounds entries only."),
    INT_PROP("subscribe.window.bytes", subscribe_window_bytes, "33554432", 0, INT64_MAX, "bytes",
             "About how many bytes of entries a subscription asks the storage nodes for at a "
             "time, its read window: its streams ask for a range of GLSNs (LLSNs for "
             "varlog_subscribe_to; this over the mean size of the entries read lately, at "
             "least 64 per log stream), and the "
             "next range's streams open when the merge is a quarter of a range from its end. "
             "What the nodes send ahead of a reader slower than them, and gRPC holds in its "
             "HTTP/2 windows, is then at most 1.25 ranges of entries, however many log streams "
             "the topic has (without: about a window per log stream, which gRPC sizes from the "
             "connection's bandwidth-delay product, tens of MB each on a fast network). Each "
             "range costs a stream per log stream; a smaller one costs more CPU per entry "
             "(1 MiB of 100-byte entries: about 10 %). 0: one range for the whole "
             "subscription, bounded by gRPC's windows alone."),
    INT_PROP("subscribe.retry.timeout.ms", subscribe_retry_timeout_ms, "60000", -1, 86400000, MS,
             "How long a log stream of a subscription may go without progress before its last "
             "failure ends the subscription. A log stream's outage begins when its stream "
             "breaks (or cannot be opened); until then it is opened again, on the next replica, "
             "after each failure (subscribe.retry.backoff.ms). Progress ends the outage: an "
             "entry received that the log stream had not sent before, or a stream that stayed "
             "open for 1 s over a connection that is up while the subscription was not waiting "
             "for an entry from it (an idle topic's tail). The default is twice "
             "appender.delivery.timeout.ms: a reader outlives a storage node restart that the "
             "writers ride out, and is there to read what they appended once it is back. 0 "
             "ends a subscription at the first failure; -1 waits for ever."),
    INT_PROP("subscribe.retries", subscribe_retries, "-1", -1, 1000000, "",
             "Optional bound in reopenings, besides subscribe.retry.timeout.ms: a log stream's "
             "stream is opened again at most this many times in a row without progress (as "
             "subscribe.retry.timeout.ms defines it); one more failure ends the subscription "
             "with that error. -1 (the default): no such bound, time alone decides. A count "
             "cannot say how long a storage node restart is ridden out (the backoff sets the "
             "time between failures); it stays for configurations that set it."),
    INT_PROP("subscribe.retry.backoff.ms", subscribe_retry_backoff_ms, "50", 1, 60000, MS,
             "Base delay before a subscription opens a broken stream again; it doubles with "
             "each failure in a row, up to subscribe.retry.backoff.max.ms, drawn from [d/2, "
             "d)."),
    INT_PROP("subscribe.retry.backoff.max.ms", subscribe_retry_backoff_max_ms, "2000", 1, 600000,
             MS, "Cap of the delay before a broken subscription stream is opened again."),
    INT_PROP("subscribe.stall.timeout.ms", subscribe_stall_timeout_ms, "5000", 0, 3600000, MS,
             "A log stream's stream that received nothing for this long while the subscription "
             "waits for it (another log stream already holds a later GLSN, so the wanted one "
             "exists) is taken for a hung node and opened again on the next replica. 0 never "
             "does. A subscription tailing an idle topic waits without churn."),
    INT_PROP("subscribe.self.receive.max", subscribe_self_receive_max, "8", 0, 1000000,
             "subscriptions",
             "Subscriptions of a client whose consumer (varlog-sub, or the caller of "
             "varlog_subscription_next) receives its own messages from gRPC: no hand-off "
             "between threads, 1.4 instead of 2.5 us of client CPU per entry from a real "
             "storage node (docs/BENCHMARKS-CLUSTER.md). Past this many, gRPC's I/O thread "
             "receives for the others and wakes their consumers (subscribe.wakeup.*): with "
             "hundreds of consumers each waiting inside gRPC's poller, 500 handler "
             "subscriptions beside 1,000 appenders took three times the CPU of one receiving "
             "thread (69 against 22 s, test_resource_bounds)."),
    INT_PROP("subscribe.handler.threads", subscribe_handler_threads, "0", 0, 64, "threads",
             "0: each handler-form subscription (varlog_subscribe, varlog_subscribe_to with "
             "handlers) has its own thread (varlog-sub). N >= 1: the client's handler-form "
             "subscriptions share N threads (varlog-sub), each subscription given to the one "
             "serving the fewest, created when a subscription needs it and ended when its last "
             "subscription closed; each thread receives its subscriptions' messages on one "
             "poller and runs their handlers one at a time, so a handler that blocks delays the "
             "other subscriptions of its thread (varlog/subscribe.h, \"Shared threads\"). For "
             "many subscriptions of low rate: 64 at 100 entries/s each ran 64 threads and "
             "their context switches otherwise. Iterator-form subscriptions are not affected; "
             "shared ones do not count against subscribe.self.receive.max."),
    INT_PROP("subscribe.wakeup.entries", subscribe_wakeup_entries, "16", 1, 1000000, "entries",
             "For subscriptions past subscribe.self.receive.max: while one is busy (its "
             "consumer took at least this many entries since it last slept), its consumer "
             "sleeps until this many messages arrived or subscribe.wakeup.wait.us passed, "
             "rather than being woken by the I/O thread for each. A subscription that is not "
             "busy is woken at every entry. 1 wakes it at every entry always."),
    INT_PROP("subscribe.wakeup.wait.us", subscribe_wakeup_wait_us, "500", 0, 10000000, "us",
             "For subscriptions past subscribe.self.receive.max: the longest a busy "
             "subscription's consumer waits for subscribe.wakeup.entries messages, the most "
             "latency the batching adds, only while entries stream in. 0 turns the batching "
             "off."),
    BOOL_PROP("subscribe.stage.timing", subscribe_stage_timing, "false",
              "Subscriptions time each entry's four stages on the subscribe path (response "
              "arrival -> the subscription's queue -> the merge's hand-out -> the handler or "
              "varlog_subscription_next's caller -> the handler's return) for the stage "
              "percentiles of the statistics, the receive and process durations of "
              "varlog_stats_prometheus and the observer of "
              "varlog_conf_set_subscribe_observer (docs/STATISTICS.md). It costs per entry one "
              "clock read on gRPC's thread, three (iterator) or four (handler) on the "
              "consumer's and seven to ten histogram records: about 0.3-0.4 us of CPU on a "
              "2-core VM, 5-20 % of the client's CPU per entry in bench_subscribe. false adds "
              "no clock read per entry and leaves those fields at 0; entries are counted either "
              "way."),
    INT_PROP("retry.workers", retry_workers, "8", 1, 256, "threads",
             "Worker threads that run append retries."),
    INT_PROP("lookup.batch.size", lookup_batch_size, "8", 0, 100, "keys",
             "Most metadata lookups made by retries that are folded into one RPC. 0 turns "
             "batching off. Must not exceed retry.workers: each waiting lookup holds a retry "
             "worker, so a larger batch could never fill."),
    INT_PROP("lookup.batch.wait.ms", lookup_batch_wait_ms, "5", 0, 60000, MS,
             "How long a lookup waits for others to join its batch before it is sent."),
    INT_PROP("reconnect.backoff.max.ms", reconnect_backoff_max_ms, "1000", 100, 120000, MS,
             "Cap of the delay between attempts to reconnect to a node (storage node or "
             "metadata repository) that could not be reached; the first delay is 100 ms (or "
             "this cap if smaller) and grows 1.6-fold with 20% jitter. While a reconnection "
             "waits, calls to the node fail at once as unreachable, so this bounds how long a "
             "node that came back stays unused. gRPC's own cap is 120000."),
    BOOL_PROP("grpc.absl.deadlock.detection", absl_deadlock_detection, "false",
              "Whether abseil's mutex deadlock detection, which gRPC core's locks go through, "
              "is left as the process has it. Debian's abseil is built with it on (a debug "
              "aid: every lock gRPC takes updates a graph of locks), which cost 8-12 % of the "
              "client's CPU per message. false: varlog_client_new turns it off for the whole "
              "process, once (the first client with false does; nothing turns it on again), "
              "as a release build of abseil has it. true: the client leaves it alone, for an "
              "application that wants abseil to report lock-order inversions."),
    BOOL_PROP("grpc.bdp.probe", grpc_bdp_probe, "true",
              "Whether gRPC sizes each stream's HTTP/2 receive window from its estimate of the "
              "connection's bandwidth-delay product (its BDP probe). The window is what a "
              "storage node may send ahead of what the client has taken: a topic-wide reader "
              "slower than the nodes would hold about a window per log stream in gRPC, beside "
              "subscribe.prefetch.*, as gRPC grows it from the data's flow, not from the "
              "reader's memory (4 KiB entries as fast as they could be read: 278 MB of RSS "
              "over 8 log streams, 571 over 32, Go's reader 61 and 67), were it not for its "
              "read window (subscribe.window.bytes). "
              "false: the windows stay at 64 KiB, and the same reads without a read window "
              "held 33-34 MB at 1.5 times the CPU per entry and 0.65 times the rate (docs/"
              "BENCHMARKS-CLUSTER.md, \"Sixth step\"). Every connection of the client; "
              "appends cost the same either way."),
    INT_PROP("channel.unlisted.grace.ms", channel_unlisted_grace_ms, "60000", 0, 86400000, MS,
             "How long a cached connection to an address that the metadata no longer lists "
             "(nor metadata.addresses, nor the metadata repository member in use) is kept "
             "before it is closed. Checked whenever metadata is fetched; a connection with "
             "calls still running is closed after its last call."),
    INT_PROP("stats.interval.ms", stats_interval_ms, "0", 0, 86400000, MS,
             "Period of the statistics emit: every this many milliseconds a thread of the "
             "client (\"varlog-stats\") hands one JSON document (docs/STATISTICS.md) to the "
             "callback set with varlog_conf_set_stats_cb. 0 turns it off, as does an unset "
             "callback: no thread is started. varlog_stats_get works either way."),
    BOOL_PROP("stats.latency", stats_latency, "true",
              "The pipelined appenders time each append call, from varlog_appender_append to its "
              "callback, for the latency percentiles of the statistics (docs/STATISTICS.md). "
              "It costs a stamp per call on the producer's thread (the CPU's time-stamp "
              "counter, about 12 ns on a 2-core KVM guest; a clock read where the counter is "
              "not invariant) and a histogram record per call on the appender's: 0.01-0.03 us "
              "per record in bench_append at batch 1000. false leaves the latency fields at 0."),
    INT_PROP("stats.lag.timeout.ms", stats_lag_timeout_ms, "1000", 0, 600000, MS,
             "Bound of the look varlog_stats_prometheus takes, per scrape, at the committed end "
             "of every log stream an open subscription reads (LogStreamReplicaMetadata to each "
             "replica, all at once), for the consumer lag "
             "(varlog_client_subscription_lag_entries and _seconds: docs/STATISTICS.md). Nothing "
             "is asked while nobody scrapes, nor with no subscription open; a replica that does "
             "not answer costs a scrape this bound once. 0 turns the lag off (no call, no "
             "series)."),
    {.name = "log.level",
     .type = CONF_TYPE_ENUM,
     .def = "warning",
     .unit = "",
     .desc = "Lowest level of the log lines emitted (case-insensitive). DEBUG lines also need "
             "their context listed in debug. The default keeps a healthy run silent: only "
             "warnings and errors that no call returns to its caller (an error a call "
             "returns is logged at DEBUG at most). info also shows the client opening, "
             "log streams joining and resubscriptions; notice, denials.",
     .offset = FIELD(log_level, varlog_log_level_t),
     .symbols = level_symbols},
    {.name = "debug",
     .type = CONF_TYPE_CTXS,
     .def = "",
     .unit = "",
     .desc = "Contexts whose DEBUG lines are emitted, comma-separated and case-insensitive: "
             "any of the names in the range, \"all\" for every context, the empty string "
             "for none. A listed context logs at DEBUG level whatever log.level says.",
     .offset = FIELD(debug_contexts, unsigned),
     .symbols = ctx_symbols},
};

#define N_PROPS (sizeof(props) / sizeof(props[0]))

/* ---- table access ------------------------------------------------------------------------ */

size_t conf_property_count(void)
{
    return N_PROPS;
}

const conf_property_t *conf_property(size_t i)
{
    return i < N_PROPS ? &props[i] : NULL;
}

const char *conf_type_name(conf_type_t type)
{
    switch (type) {
    case CONF_TYPE_INT:
        return "int";
    case CONF_TYPE_BOOL:
        return "bool";
    case CONF_TYPE_ADDRS:
        return "address list";
    case CONF_TYPE_ENUM:
        return "enum";
    case CONF_TYPE_CTXS:
        return "context list";
    }
    return "?";
}

const char *conf_property_range(const conf_property_t *p, char *buf, size_t size)
{
    if (!buf || size == 0)
        return buf;
    buf[0] = '\0';
    switch (p->type) {
    case CONF_TYPE_INT:
        snprintf(buf, size, "[%" PRId64 ", %" PRId64 "]", p->min, p->max);
        break;
    case CONF_TYPE_BOOL:
        snprintf(buf, size, "true, false");
        break;
    case CONF_TYPE_ADDRS:
        snprintf(buf, size, "host:port, ... with port in [1, %d]", CONF_PORT_MAX);
        break;
    case CONF_TYPE_ENUM:
    case CONF_TYPE_CTXS: {
        size_t len = 0;
        for (size_t i = 0; p->symbols[i] && len < size; i++) {
            int n = snprintf(buf + len, size - len, "%s%s", i ? ", " : "", p->symbols[i]);
            len += n > 0 ? (size_t)n : 0;
        }
        if (p->type == CONF_TYPE_CTXS && len < size)
            snprintf(buf + len, size - len, ", " CONF_CTX_ALL_WORD);
        break;
    }
    }
    return buf;
}

const conf_property_t *conf_find_property(const char *name)
{
    for (size_t i = 0; i < N_PROPS; i++) {
        if (strcmp(props[i].name, name) == 0)
            return &props[i];
    }
    return NULL;
}
