#ifndef VARLOG_STATS_INTERNAL_H
#define VARLOG_STATS_INTERNAL_H

/*
 * The client's statistics (varlog/stats.h): what the appenders, varlog_append and the
 * subscriptions add up as they go, and the periodic emit's thread. Every counter is a relaxed
 * atomic so that recording never takes a lock; a snapshot is therefore not one instant, each
 * field is whole. Counters are added per settled batch, not per append call, except the
 * latency histogram (one record per call, on the appender's thread).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "histogram.h"
#include "metrics.h"
#include "ticks.h"
#include "varlog/client.h"
#include "varlog/stats.h"

/* One log stream's counters: key is (topic << 32 | log stream) + 1 once claimed, 0 free. */
typedef struct stats_ls_slot {
    atomic_uint_fast64_t key;
    atomic_uint_fast64_t records, bytes;
} stats_ls_slot_t;

/* Consumer lag (stats_lag.c): what the scrapes saw of each subscribed log stream's
 * committed end, for the seconds of the lag. */
#define STATS_LAG_SAMPLES 16
typedef struct stats_lag_sample {
    int64_t ms;    /* wire_now_ms of the scrape that saw it first */
    uint64_t llsn; /* the committed end then */
} stats_lag_sample_t;

typedef struct stats_lag_tail {
    int32_t topic, ls;
    uint64_t scrape; /* the last scrape that asked for it */
    size_t n;        /* samples, oldest first, each end higher than the one before */
    stats_lag_sample_t s[STATS_LAG_SAMPLES];
} stats_lag_tail_t;

typedef struct stats_lag {
    pthread_mutex_t mu;
    stats_lag_tail_t *tails;
    size_t n, cap;
    uint64_t scrapes;
} stats_lag_t;

/* One (subscription, log stream)'s lag. */
typedef struct stats_lag_row {
    uint64_t sub_id;
    int32_t topic, ls;
    uint64_t entries; /* committed after the last entry delivered (up to the range's end) */
    double seconds;   /* the oldest of them was committed at least this long ago */
} stats_lag_row_t;

typedef struct client_stats {
    int64_t opened_ms; /* wire_now_ms at creation */
    atomic_uint_fast64_t appended_calls, appended_records, appended_bytes;
    atomic_uint_fast64_t not_appended_calls, not_appended_records;
    atomic_uint_fast64_t maybe_appended_calls, maybe_appended_records;
    atomic_uint_fast64_t retries;          /* appender batches sent again */
    atomic_uint_fast64_t queue_full;       /* appender calls refused with QUEUE_FULL */
    atomic_uint_fast64_t queue_full_waits; /* appender calls that waited for room */
    stats_ls_slot_t ls[VARLOG_STATS_LOG_STREAMS_MAX];
    atomic_uint_fast64_t ls_untracked_records, ls_untracked_bytes; /* past the table's cap */
    /* Append latency of the appenders' calls, ns. One for the client: vhist_record is
     * lock-free, only the appenders' threads record into it, and a closed appender's calls
     * stay counted. */
    vhist_t latency;
    bool latency_ok; /* vhist_init succeeded */
    /* Subscribe stage timings (subscribe.stage.timing), ns, by metrics_stage_t: recorded by
     * every subscription's consumer, lock-free. Allocated only with the property on. */
    vhist_t stage[METRICS_STAGES];
    bool stage_ok; /* vhist_init of all four succeeded */
    /* OpenTelemetry's messaging metrics, for varlog_stats_prometheus (metrics.h). */
    client_metrics_t metrics;
    /* Subscriptions already closed (client mu): their counts are folded in at unlink. */
    uint64_t closed_sub_entries, closed_sub_bytes;
    uint64_t closed_sub_outages, closed_sub_outage_ms;
    stats_lag_t lag;

    /* The periodic emit. */
    varlog_stats_cb *cb;
    void *opaque;
    int64_t interval_ms;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    bool stop;
    bool started;
    pthread_t thread;
} client_stats_t;

/* CLOCK_MONOTONIC in ns: varlog_append's timing and the subscribe stages (the appender's
 * calls are stamped in ticks: ticks.h). */
static inline int64_t stats_now_ns(void)
{
    return (int64_t)ticks_clock_ns();
}

/* Sets up s (no thread yet). false when out of memory. */
bool stats_init(client_stats_t *s, const varlog_conf_t *conf);
/* Frees what stats_init took; the thread must be stopped. */
void stats_fini(client_stats_t *s);

/* Starts "varlog-stats" when stats.interval.ms > 0 and a callback is set. INTERNAL when the
 * thread cannot be started. */
varlog_err_t stats_start(varlog_client_t *c);
/* Stops and joins the thread, if any; no callback runs after it returns. Idempotent. */
void stats_stop(varlog_client_t *c);

/* Adds records/bytes appended to (topic, ls) to its slot (or to the untracked counters once
 * the table is full). Lock-free; any thread. */
void stats_add_log_stream(client_stats_t *s, int32_t topic, int32_t ls, uint64_t records,
                          uint64_t bytes);

/* A producer (an appender's creation, a varlog_append call) begins to use topic, or one of
 * its log streams (ls > 0): their counters are exported from now on, at 0 before the first
 * record (metrics.h). For the whole topic, every log stream the metadata names now. */
void stats_producer_uses(varlog_client_t *c, int32_t topic, int32_t ls);

void stats_lag_init(stats_lag_t *l);
void stats_lag_fini(stats_lag_t *l);
/* The lag of every open subscription's log streams whose committed end a replica told
 * within stats.lag.timeout.ms and whose position is known (none with the property 0).
 * Blocks for those calls. *rows is malloc'ed (free it), *n_rows its length. NOMEM. */
varlog_err_t stats_lag_collect(varlog_client_t *c, stats_lag_row_t **rows, size_t *n_rows);

/* One append call's end (varlog_append, or a run of appender callbacks added together). */
void stats_add_outcome(client_stats_t *s, varlog_outcome_t outcome, uint64_t calls,
                       uint64_t records, uint64_t bytes);

/* stats_json.c: the snapshot as one JSON document (malloc'ed, NUL-terminated, *len without
 * the NUL); NULL when out of memory. */
char *stats_to_json(const varlog_stats_t *st, size_t *len);
/* Frees a document of stats_to_json (cJSON's allocator). Accepts NULL. */
void stats_json_free(char *json);

#endif
