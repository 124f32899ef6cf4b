/* The client's OpenTelemetry messaging metrics: see metrics.h. */
#include "metrics.h"

#include <stddef.h>

#define MS 1000000LL
#define S 1000000000LL

const metrics_bounds_t metrics_bounds_send = {
    "send",
    19,
    {100000, 250000, 500000, 1 * MS, 2500000, 5 * MS, 10 * MS, 25 * MS, 50 * MS, 75 * MS, 100 * MS,
     250 * MS, 500 * MS, 750 * MS, 1 * S, 2500 * MS, 5 * S, 7500 * MS, 10 * S}};

const metrics_bounds_t metrics_bounds_delivery = {
    "delivery", 22, {1000,     2500,     5000,    10000,     25000,   50000,   100000,  250000,
                     500000,   1 * MS,   2500000, 5 * MS,    10 * MS, 25 * MS, 50 * MS, 100 * MS,
                     250 * MS, 500 * MS, 1 * S,   2500 * MS, 5 * S,   10 * S}};

const metrics_bounds_t metrics_bounds_stage = {
    "stage", 21, {10,     25,     50,      100,    250,     500,      1000,
                  2500,   5000,   10000,   25000,  50000,   100000,   250000,
                  500000, 1 * MS, 2500000, 5 * MS, 10 * MS, 100 * MS, 1 * S}};

const char *const metrics_stage_names[METRICS_STAGES] = {"enqueue", "transmit_queue", "dispatch",
                                                         "handler"};

/* Failures a producer meets while a cluster recovers or refuses (RELIABILITY.md), and the
 * RPC codes a node or gRPC may end a call with. */
const varlog_err_t metrics_append_errors[METRICS_APPEND_ERRORS] = {
    VARLOG_ERR_TIMED_OUT,
    VARLOG_ERR_CLOSED,
    VARLOG_ERR_NO_LOG_STREAM,
    VARLOG_ERR_UNKNOWN_TOPIC,
    VARLOG_ERR_UNKNOWN_LOG_STREAM,
    VARLOG_ERR_SEALED,
    VARLOG_ERR_RPC_CANCELLED,
    VARLOG_ERR_RPC_UNKNOWN,
    VARLOG_ERR_RPC_INVALID_ARGUMENT,
    VARLOG_ERR_RPC_DEADLINE_EXCEEDED,
    VARLOG_ERR_RPC_RESOURCE_EXHAUSTED,
    VARLOG_ERR_RPC_FAILED_PRECONDITION,
    VARLOG_ERR_RPC_INTERNAL,
    VARLOG_ERR_RPC_UNAVAILABLE,
    VARLOG_ERR_INTERNAL,
    VARLOG_ERR_NOMEM,
};

void metrics_hist_init(metrics_hist_t *h, const metrics_bounds_t *bounds)
{
    h->bounds = bounds;
}

static void series_init(metrics_series_t *s)
{
    metrics_hist_init(&s->send, &metrics_bounds_send);
    metrics_hist_init(&s->receive, &metrics_bounds_delivery);
    metrics_hist_init(&s->process, &metrics_bounds_delivery);
}

void metrics_init(client_metrics_t *m)
{
    for (size_t i = 0; i < METRICS_SERIES_MAX; i++)
        series_init(&m->series[i]);
    series_init(&m->untracked);
    for (size_t i = 0; i < METRICS_FAILURES_MAX; i++)
        metrics_hist_init(&m->failures[i].send, &metrics_bounds_send);
    metrics_hist_init(&m->failures_untracked.send, &metrics_bounds_send);
    for (size_t i = 0; i < METRICS_STAGES; i++)
        metrics_hist_init(&m->stage[i], &metrics_bounds_stage);
}

static size_t duration_bucket(const metrics_bounds_t *b, int64_t ns)
{
    size_t i = 0;
    while (i < b->n && ns > b->ns[i])
        i++;
    return i;
}

void metrics_hist_record(metrics_hist_t *h, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    atomic_fetch_add_explicit(&h->buckets[duration_bucket(h->bounds, ns)], 1, memory_order_relaxed);
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
    size_t b = duration_bucket(r->h->bounds, ns);
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

/* Claims or finds key in an open-addressed table of slots whose first member is the key;
 * *(claimed) (a bool *, or NULL) is set when this call claimed it. */
#define CLAIM(table, n, key_value, untracked, claimed)                                             \
    do {                                                                                           \
        for (size_t i_ = 0; i_ < (n); i_++) {                                                      \
            uint_fast64_t k_ = atomic_load_explicit(&(table)[i_].key, memory_order_acquire);       \
            if (k_ == 0) {                                                                         \
                uint_fast64_t zero_ = 0;                                                           \
                if (atomic_compare_exchange_strong_explicit(&(table)[i_].key, &zero_, (key_value), \
                                                            memory_order_acq_rel,                  \
                                                            memory_order_acquire)) {               \
                    if (claimed)                                                                   \
                        *(claimed) = true;                                                         \
                    return &(table)[i_];                                                           \
                }                                                                                  \
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
    CLAIM(m->series, METRICS_SERIES_MAX, key, &m->untracked, (bool *)NULL);
}

metrics_series_t *metrics_series_use(client_metrics_t *m, int32_t topic, int32_t ls, unsigned use)
{
    metrics_series_t *s = metrics_series_get(m, topic, ls);
    if ((atomic_load_explicit(&s->uses, memory_order_relaxed) & use) != use)
        atomic_fetch_or_explicit(&s->uses, use, memory_order_relaxed);
    return s;
}

/* topic's slot (claimed on first call; NULL once the table is full) */
static metrics_topic_t *topic_get(client_metrics_t *m, int32_t topic, bool *claimed)
{
    uint64_t key = (uint64_t)(uint32_t)topic + 1;
    CLAIM(m->topics, METRICS_TOPICS_MAX, key, (metrics_topic_t *)NULL, claimed);
}

bool metrics_topic_use(client_metrics_t *m, int32_t topic)
{
    bool claimed = false;
    (void)topic_get(m, topic, &claimed);
    return claimed;
}

metrics_failure_t *metrics_failure_get(client_metrics_t *m, int32_t topic, varlog_err_t err)
{
    uint64_t key = (((uint64_t)(uint32_t)topic << 32) | (uint32_t)(-(int64_t)err)) + 1;
    CLAIM(m->failures, METRICS_FAILURES_MAX, key, &m->failures_untracked, (bool *)NULL);
}

void metrics_note_append(client_metrics_t *m, int32_t topic, int32_t ls, varlog_err_t err,
                         uint64_t records, int64_t duration_ns)
{
    if (err == VARLOG_OK) {
        metrics_series_t *s = metrics_series_use(m, topic, ls, METRICS_USE_SEND);
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
