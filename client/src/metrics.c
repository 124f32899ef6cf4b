/* The client's OpenTelemetry messaging metrics: see metrics.h. */
#include "metrics.h"

#include <stddef.h>

const int64_t metrics_duration_bounds_ns[METRICS_DURATION_BUCKETS] = {
    5000000,   10000000,  25000000,   50000000,   75000000,   100000000,  250000000,
    500000000, 750000000, 1000000000, 2500000000, 5000000000, 7500000000, 10000000000,
};

const char *const metrics_stage_names[METRICS_STAGES] = {"enqueue", "transmit_queue", "dispatch",
                                                         "handler"};

static size_t duration_bucket(int64_t ns)
{
    size_t i = 0;
    while (i < METRICS_DURATION_BUCKETS && ns > metrics_duration_bounds_ns[i])
        i++;
    return i;
}

void metrics_hist_record(metrics_hist_t *h, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    atomic_fetch_add_explicit(&h->buckets[duration_bucket(ns)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, (uint64_t)ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

void metrics_hist_run_begin(metrics_hist_run_t *r, metrics_hist_t *h)
{
    *r = (metrics_hist_run_t){.h = h};
}

static void run_flush_bucket(metrics_hist_run_t *r)
{
    if (r->in_bucket)
        atomic_fetch_add_explicit(&r->h->buckets[r->bucket], r->in_bucket, memory_order_relaxed);
    r->in_bucket = 0;
}

void metrics_hist_run_add(metrics_hist_run_t *r, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    size_t b = duration_bucket(ns);
    if (b != r->bucket || r->in_bucket == 0) {
        run_flush_bucket(r);
        r->bucket = b;
    }
    r->in_bucket++;
    r->count++;
    r->sum_ns += (uint64_t)ns;
}

void metrics_hist_run_end(metrics_hist_run_t *r)
{
    if (r->count == 0)
        return;
    run_flush_bucket(r);
    atomic_fetch_add_explicit(&r->h->sum_ns, r->sum_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->h->count, r->count, memory_order_relaxed);
    r->count = r->sum_ns = 0;
}

/* Claims or finds key in an open-addressed table of slots whose first member is the key. */
#define CLAIM(table, n, key_value, untracked)                                                      \
    do {                                                                                           \
        for (size_t i_ = 0; i_ < (n); i_++) {                                                      \
            uint_fast64_t k_ = atomic_load_explicit(&(table)[i_].key, memory_order_acquire);       \
            if (k_ == 0) {                                                                         \
                uint_fast64_t zero_ = 0;                                                           \
                if (atomic_compare_exchange_strong_explicit(&(table)[i_].key, &zero_, (key_value), \
                                                            memory_order_acq_rel,                  \
                                                            memory_order_acquire))                 \
                    return &(table)[i_];                                                           \
                k_ = zero_;                                                                        \
            }                                                                                      \
            if (k_ == (key_value))                                                                 \
                return &(table)[i_];                                                               \
        }                                                                                          \
        return (untracked);                                                                        \
    } while (0)

metrics_series_t *metrics_series_get(client_metrics_t *m, int32_t topic, int32_t ls)
{
    uint64_t key = (((uint64_t)(uint32_t)topic << 32) | (uint32_t)ls) + 1;
    CLAIM(m->series, METRICS_SERIES_MAX, key, &m->untracked);
}

metrics_failure_t *metrics_failure_get(client_metrics_t *m, int32_t topic, varlog_err_t err)
{
    uint64_t key = (((uint64_t)(uint32_t)topic << 32) | (uint32_t)(-(int64_t)err)) + 1;
    CLAIM(m->failures, METRICS_FAILURES_MAX, key, &m->failures_untracked);
}

void metrics_note_append(client_metrics_t *m, int32_t topic, int32_t ls, varlog_err_t err,
                         uint64_t records, int64_t duration_ns)
{
    if (err == VARLOG_OK) {
        metrics_series_t *s = metrics_series_get(m, topic, ls);
        atomic_fetch_add_explicit(&s->sent_records, records, memory_order_relaxed);
        if (duration_ns >= 0)
            metrics_hist_record(&s->send, duration_ns);
        return;
    }
    metrics_failure_t *f = metrics_failure_get(m, topic, err);
    atomic_fetch_add_explicit(&f->records, records, memory_order_relaxed);
    if (duration_ns >= 0)
        metrics_hist_record(&f->send, duration_ns);
}

bool metrics_series_key(uint64_t key, int32_t *topic, int32_t *ls)
{
    if (key == 0)
        return false;
    key--;
    *topic = (int32_t)(uint32_t)(key >> 32);
    *ls = (int32_t)(uint32_t)key;
    return true;
}
