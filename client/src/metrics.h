#ifndef VARLOG_METRICS_H
#define VARLOG_METRICS_H

/*
 * The client's metrics in OpenTelemetry's messaging vocabulary (semantic conventions
 * v1.27.0, status "development"), kept for varlog_stats_prometheus (stats_prometheus.c):
 *
 *   messaging.client.operation.duration  histogram, s: append calls ("send") per topic and
 *                                        log stream (error.type on failure, per topic) and
 *                                        subscription reads ("receive": a response's arrival
 *                                        to the entry's hand-out to the application)
 *   messaging.client.sent.messages       counter: records the node confirmed (and, with
 *                                        error.type, records that failed)
 *   messaging.client.consumed.messages   counter: entries delivered to the application
 *   messaging.process.duration           histogram, s: a subscription handler's time
 *
 * plus the subscribe path's stage durations (varlog.client.subscribe.stage.duration).
 * Durations use the conventions' advised bucket boundaries: 14 fixed buckets are three
 * relaxed atomic adds per record and a scrape of a few hundred lines, where the client's
 * log-linear histogram (histogram.h: 57 KiB and thousands of buckets) would be neither.
 * The percentiles of varlog_stats_t keep coming from the log-linear histograms.
 *
 * Series per (topic, log stream) are claimed on first use and kept for the client's life, up
 * to METRICS_SERIES_MAX; later ones are summed in `untracked`. A series pointer is stable:
 * a hot path looks it up once (metrics_series_get) and keeps it.
 *
 * Every field is a relaxed atomic: recording never takes a lock; a reader sees each counter
 * whole and never smaller than an earlier read.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "varlog/error.h"

/* OpenTelemetry's advised boundaries for messaging durations, in seconds:
 * 0.005 0.01 0.025 0.05 0.075 0.1 0.25 0.5 0.75 1 2.5 5 7.5 10, here in ns. */
#define METRICS_DURATION_BUCKETS 14
extern const int64_t metrics_duration_bounds_ns[METRICS_DURATION_BUCKETS];

#define METRICS_SERIES_MAX 64
#define METRICS_FAILURES_MAX 32

typedef struct metrics_hist {
    /* buckets[i]: durations <= bounds[i] and > bounds[i-1]; buckets[BUCKETS]: above the
     * last bound. Not cumulative: the exposition sums them. */
    atomic_uint_fast64_t buckets[METRICS_DURATION_BUCKETS + 1];
    atomic_uint_fast64_t count;
    atomic_uint_fast64_t sum_ns;
} metrics_hist_t;

/* The subscribe path's stages of one entry (the observer's and the statistics' names). */
typedef enum metrics_stage {
    METRICS_STAGE_ENQUEUE,        /* its response's arrival -> in the subscription's queue */
    METRICS_STAGE_TRANSMIT_QUEUE, /* waited in that queue until the merge took it */
    METRICS_STAGE_DISPATCH,       /* merge hand-out -> the handler or next()'s caller has it */
    METRICS_STAGE_HANDLER,        /* the handler's own time (callback subscriptions) */
    METRICS_STAGES
} metrics_stage_t;

/* "enqueue", "transmit_queue", "dispatch", "handler" */
extern const char *const metrics_stage_names[METRICS_STAGES];

/* One (topic, log stream). */
typedef struct metrics_series {
    atomic_uint_fast64_t key; /* (topic << 32 | log stream) + 1 once claimed, 0 while free */
    metrics_hist_t send;      /* APPENDED calls that stored here (only with stats.latency) */
    atomic_uint_fast64_t sent_records;
    atomic_uint_fast64_t consumed;
    metrics_hist_t receive; /* only with stage timing on */
    metrics_hist_t process; /* only with stage timing on */
} metrics_series_t;

/* Failed append calls of one (topic, error). */
typedef struct metrics_failure {
    atomic_uint_fast64_t key; /* (topic << 32 | (uint32_t)-err) + 1 once claimed, 0 free */
    metrics_hist_t send;
    atomic_uint_fast64_t records;
} metrics_failure_t;

typedef struct client_metrics {
    metrics_series_t series[METRICS_SERIES_MAX];
    metrics_series_t untracked; /* key 0: what came past METRICS_SERIES_MAX */
    metrics_failure_t failures[METRICS_FAILURES_MAX];
    metrics_failure_t failures_untracked;
    metrics_hist_t stage[METRICS_STAGES]; /* per client, only with stage timing on */
} client_metrics_t;

/* Records one duration (ns; a negative one counts as 0). Lock-free, any thread. */
void metrics_hist_record(metrics_hist_t *h, int64_t ns);

/* As vhist_run_t (histogram.h) for metrics_hist_t: one thread's values in a row, one atomic
 * add per run of values in one bucket and one for the count and the sum; exactly as if each
 * was recorded with metrics_hist_record once metrics_hist_run_end returned. */
typedef struct metrics_hist_run {
    metrics_hist_t *h;
    size_t bucket;      /* of the values not flushed yet */
    uint64_t in_bucket; /* how many (0: none) */
    uint64_t count, sum_ns;
} metrics_hist_run_t;

void metrics_hist_run_begin(metrics_hist_run_t *r, metrics_hist_t *h);
void metrics_hist_run_add(metrics_hist_run_t *r, int64_t ns);
void metrics_hist_run_end(metrics_hist_run_t *r);

/* The series of (topic, ls), claimed on first call; &m->untracked once the table is full.
 * Never NULL. Lock-free, any thread; a linear probe: keep the pointer on a hot path. */
metrics_series_t *metrics_series_get(client_metrics_t *m, int32_t topic, int32_t ls);

/* The failures of (topic, err); &m->failures_untracked once the table is full. */
metrics_failure_t *metrics_failure_get(client_metrics_t *m, int32_t topic, varlog_err_t err);

/* An append call's end: APPENDED to (topic, ls) with records, or failed with err (ls
 * unused). duration_ns < 0: not timed (only the counters move). */
void metrics_note_append(client_metrics_t *m, int32_t topic, int32_t ls, varlog_err_t err,
                         uint64_t records, int64_t duration_ns);

static inline void metrics_series_consumed(metrics_series_t *s, uint64_t n)
{
    atomic_fetch_add_explicit(&s->consumed, n, memory_order_relaxed);
}

/* stats_prometheus.c: value as a Prometheus label value (backslash, double quote and newline
 * escaped) into out, NUL-terminated; false (out empty) when it does not fit in cap. */
bool metrics_escape_label_value(const char *value, char *out, size_t cap);

/* Decodes a series' key; false for a free slot. */
bool metrics_series_key(uint64_t key, int32_t *topic, int32_t *ls);

#endif
