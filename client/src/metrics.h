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
 * Each duration instrument has bucket boundaries of its own (OpenTelemetry's advice is per
 * instrument): an append is 100 us to seconds, an entry's way to the application microseconds,
 * a stage of the subscribe path tens of ns. At most METRICS_BUCKETS_MAX fixed buckets are a
 * few relaxed atomic adds per record and a scrape of a few hundred lines, where the client's
 * log-linear histogram (histogram.h: 57 KiB and thousands of buckets) would be neither. The
 * percentiles of varlog_stats_t keep coming from the log-linear histograms.
 *
 * Series per (topic, log stream) are claimed on first use and kept for the client's life, up
 * to METRICS_SERIES_MAX; later ones are summed in `untracked`. A series pointer is stable:
 * a hot path looks it up once (metrics_series_get) and keeps it. A series is exported at 0
 * from the moment a producer or a subscription claims it, before its first record, and a
 * topic a producer uses (metrics_topic_use) has its failure counters at 0 for every error an
 * append can end with: a counter that appears holding its first burst is not counted by
 * PromQL's increase() or rate().
 *
 * Every field is a relaxed atomic: recording never takes a lock; a reader sees each counter
 * whole and never smaller than an earlier read.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "varlog/error.h"

#define METRICS_BUCKETS_MAX 24

/* An instrument's bucket upper bounds in ns, ascending; +Inf is implied. */
typedef struct metrics_bounds {
    const char *name; /* what it is for (docs, tests) */
    size_t n;
    int64_t ns[METRICS_BUCKETS_MAX];
} metrics_bounds_t;

/* Sends (append calls): OpenTelemetry's advised 5 ms .. 10 s, with 100 us .. 2.5 ms below
 * them, since an append to a nearby node takes about a millisecond. */
extern const metrics_bounds_t metrics_bounds_send;
/* Receive (a response's arrival to the entry's hand-out) and process (a handler's call):
 * 1 us .. 10 s. */
extern const metrics_bounds_t metrics_bounds_delivery;
/* The subscribe path's stages: 10 ns .. 1 s. */
extern const metrics_bounds_t metrics_bounds_stage;

#define METRICS_SERIES_MAX 64
#define METRICS_FAILURES_MAX 64
#define METRICS_TOPICS_MAX 16

typedef struct metrics_hist {
    const metrics_bounds_t *bounds; /* set by metrics_init, never changed */
    /* buckets[i]: durations <= bounds[i] and > bounds[i-1]; buckets[bounds->n]: above the
     * last bound. Not cumulative: the exposition sums them. */
    atomic_uint_fast64_t buckets[METRICS_BUCKETS_MAX + 1];
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
/* What claimed a series: which of its counters are exported (at 0 before the first). */
enum { METRICS_USE_SEND = 1, METRICS_USE_RECEIVE = 2 };

typedef struct metrics_series {
    atomic_uint_fast64_t key; /* (topic << 32 | log stream) + 1 once claimed, 0 while free */
    atomic_uint uses;         /* METRICS_USE_* */
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

/* A topic a producer used: its failure counters are exported at 0 (metrics_topic_use). */
typedef struct metrics_topic {
    atomic_uint_fast64_t key; /* topic + 1 once claimed, 0 while free */
} metrics_topic_t;

typedef struct client_metrics {
    metrics_topic_t topics[METRICS_TOPICS_MAX];
    metrics_series_t series[METRICS_SERIES_MAX];
    metrics_series_t untracked; /* key 0: what came past METRICS_SERIES_MAX */
    metrics_failure_t failures[METRICS_FAILURES_MAX];
    metrics_failure_t failures_untracked;
    metrics_hist_t stage[METRICS_STAGES]; /* per client, only with stage timing on */
} client_metrics_t;

/* Gives every histogram of m its instrument's bounds. m must be zeroed. */
void metrics_init(client_metrics_t *m);
/* A zeroed histogram with bounds (tests). */
void metrics_hist_init(metrics_hist_t *h, const metrics_bounds_t *bounds);

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

/* metrics_series_get, marking the series used by a producer or a subscription
 * (METRICS_USE_*), which exports its counter from then on, at 0 before the first record. */
metrics_series_t *metrics_series_use(client_metrics_t *m, int32_t topic, int32_t ls, unsigned use);

/* A producer begins to use topic: its failure counters are exported from now on, at 0 for
 * each error of metrics_append_errors. Lock-free, any thread; a scan of at most
 * METRICS_TOPICS_MAX keys. Topics past the table are exported from their first failure. */
bool metrics_topic_use(client_metrics_t *m, int32_t topic); /* true: first use */

/* The errors an append call can end with, exported at 0 per used topic. */
#define METRICS_APPEND_ERRORS 16
extern const varlog_err_t metrics_append_errors[METRICS_APPEND_ERRORS];

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
