/* The client's statistics (varlog/stats.h): the counters' upkeep, the snapshot, and the
 * "varlog-stats" thread of the periodic emit. The JSON form is stats_json.c. */
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "appender_internal.h"
#include "client_internal.h"
#include "errtext.h"
#include "metadata.h"
#include "stats_internal.h"
#include "subscribe_internal.h"
#include "wire.h"

static inline void add(atomic_uint_fast64_t *counter, uint64_t n)
{
    atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

static inline uint64_t get(const atomic_uint_fast64_t *counter)
{
    return atomic_load_explicit((atomic_uint_fast64_t *)counter, memory_order_relaxed);
}

bool stats_init(client_stats_t *s, const varlog_conf_t *conf)
{
    memset(s, 0, sizeof(*s));
    s->opened_ms = wire_now_ms();
    metrics_init(&s->metrics);
    stats_lag_init(&s->lag);
    s->cb = conf->stats_cb;
    s->opaque = conf->stats_opaque;
    s->interval_ms = conf->stats_interval_ms;
    pthread_mutex_init(&s->mu, NULL);
    wire_cond_init(&s->wake);
    s->latency_ok = vhist_init(&s->latency, 0) == 0;
    if (!s->latency_ok)
        return false;
    if (conf->subscribe_stage_timing) {
        s->stage_ok = true;
        for (size_t i = 0; i < METRICS_STAGES; i++)
            s->stage_ok = vhist_init(&s->stage[i], 0) == 0 && s->stage_ok;
    }
    return !conf->subscribe_stage_timing || s->stage_ok; /* the client's cleanup calls fini */
}

void stats_fini(client_stats_t *s)
{
    if (s->latency_ok)
        vhist_destroy(&s->latency);
    s->latency_ok = false;
    for (size_t i = 0; i < METRICS_STAGES; i++)
        vhist_destroy(&s->stage[i]); /* one whose init failed (or never ran) is empty */
    s->stage_ok = false;
    stats_lag_fini(&s->lag);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
}

void stats_producer_uses(varlog_client_t *c, int32_t topic, int32_t ls)
{
    client_metrics_t *m = &c->cstats.metrics;
    bool first = metrics_topic_use(m, topic);
    if (ls > 0) {
        metrics_series_use(m, topic, ls, METRICS_USE_SEND);
        return;
    }
    if (!first) /* a log stream added since is exported from its first record */
        return;
    md_view_t *v = md_current(c);
    const md_topic_t *t = v ? md_view_topic(v, topic) : NULL;
    for (size_t i = 0; t && i < t->n_log_streams; i++)
        metrics_series_use(m, topic, t->log_stream_ids[i], METRICS_USE_SEND);
    md_view_unref(v);
}

void stats_add_log_stream(client_stats_t *s, int32_t topic, int32_t ls, uint64_t records,
                          uint64_t bytes)
{
    uint64_t key = (((uint64_t)(uint32_t)topic << 32) | (uint32_t)ls) + 1;
    /* Slots are claimed in order and never given back: a scan stops at the first free one,
     * and a log stream keeps its slot, so the common case is a short read-only scan. */
    for (size_t i = 0; i < VARLOG_STATS_LOG_STREAMS_MAX; i++) {
        stats_ls_slot_t *slot = &s->ls[i];
        uint64_t k = get(&slot->key);
        if (k == 0) {
            uint_fast64_t expected = 0;
            if (atomic_compare_exchange_strong_explicit(&slot->key, &expected, key,
                                                        memory_order_relaxed, memory_order_relaxed))
                k = key;
            else
                k = expected; /* claimed meanwhile: perhaps for this very log stream */
        }
        if (k == key) {
            add(&slot->records, records);
            add(&slot->bytes, bytes);
            return;
        }
    }
    add(&s->ls_untracked_records, records);
    add(&s->ls_untracked_bytes, bytes);
}

void stats_add_outcome(client_stats_t *s, varlog_outcome_t outcome, uint64_t calls,
                       uint64_t records, uint64_t bytes)
{
    if (calls == 0)
        return;
    switch (outcome) {
    case VARLOG_APPENDED:
        add(&s->appended_calls, calls);
        add(&s->appended_records, records);
        add(&s->appended_bytes, bytes);
        break;
    case VARLOG_NOT_APPENDED:
        add(&s->not_appended_calls, calls);
        add(&s->not_appended_records, records);
        break;
    case VARLOG_MAYBE_APPENDED:
        add(&s->maybe_appended_calls, calls);
        add(&s->maybe_appended_records, records);
        break;
    }
}

static uint64_t us_of(int64_t ns)
{
    return ns > 0 ? (uint64_t)(ns + 500) / 1000 : 0;
}

varlog_err_t varlog_stats_get(varlog_client_t *c, varlog_stats_t *out)
{
    if (!c || !out)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "varlog_stats_get: NULL argument");
    client_stats_t *s = &c->cstats;
    memset(out, 0, sizeof(*out));
    struct timeval tv;
    gettimeofday(&tv, NULL);
    out->ts_ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
    out->uptime_ms = wire_now_ms() - s->opened_ms;

    /* Gauges of the open handles. Lock order: the client's mu, then each appender's; a
     * subscription's counters are atomics its consumer alone writes. */
    pthread_mutex_lock(&c->mu);
    for (varlog_appender_t *app = c->appenders; app; app = app->next_in_client) {
        out->appenders++;
        pthread_mutex_lock(&app->mu);
        out->pending_records += app->pending_records;
        out->pending_bytes += app->pending_bytes;
        pthread_mutex_unlock(&app->mu);
        out->inflight_records += get(&app->inflight_records);
        out->inflight_bytes += get(&app->inflight_bytes);
    }
    out->subscribe_entries = s->closed_sub_entries;
    out->subscribe_bytes = s->closed_sub_bytes;
    out->subscribe_outages = s->closed_sub_outages;
    out->subscribe_outage_ms = s->closed_sub_outage_ms;
    int64_t now = wire_now_ms();
    for (varlog_subscription_t *sub = c->subscriptions; sub; sub = sub->next_open) {
        out->subscriptions++;
        out->subscribe_entries += get(&sub->n_entries);
        out->subscribe_bytes += get(&sub->n_bytes);
        uint64_t outages, outage_ms;
        uint32_t down;
        sub_outage_totals(sub, now, &outages, &outage_ms, &down);
        out->subscribe_outages += outages;
        out->subscribe_outage_ms += outage_ms;
        out->subscribe_log_streams_down += down;
        uint64_t seen = get(&sub->n_seen_max), next = get(&sub->n_next);
        if (seen >= next && next > 0)
            out->subscribe_lag += seen - next + 1;
    }
    pthread_mutex_unlock(&c->mu);

    out->appended_calls = get(&s->appended_calls);
    out->appended_records = get(&s->appended_records);
    out->appended_bytes = get(&s->appended_bytes);
    out->not_appended_calls = get(&s->not_appended_calls);
    out->not_appended_records = get(&s->not_appended_records);
    out->maybe_appended_calls = get(&s->maybe_appended_calls);
    out->maybe_appended_records = get(&s->maybe_appended_records);
    out->retries = get(&s->retries) + get(&c->stats.append_retries);
    out->queue_full = get(&s->queue_full);
    out->queue_full_waits = get(&s->queue_full_waits);
    out->resolve_passes = get(&c->stats.resolve_passes);
    out->resolved_found = get(&c->stats.resolved_found);
    out->resolved_absent = get(&c->stats.resolved_absent);

    out->lookups = get(&c->stats.lookups);
    if (c->batcher) {
        vq_batcher_stats_t bs;
        vq_batcher_stats(c->batcher, &bs);
        out->lookup_batch_calls = bs.batch_calls;
        out->lookup_single_calls = bs.single_calls;
    }
    out->metadata_fetches = get(&c->stats.metadata_fetches);
    out->reconnects = rpc_client_reconnects(c->rpc);

    if (s->stage_ok) {
        varlog_stats_stage_t *st[METRICS_STAGES] = {
            [METRICS_STAGE_ENQUEUE] = &out->subscribe_enqueue,
            [METRICS_STAGE_TRANSMIT_QUEUE] = &out->subscribe_transmit_queue,
            [METRICS_STAGE_DISPATCH] = &out->subscribe_dispatch,
            [METRICS_STAGE_HANDLER] = &out->subscribe_handler};
        for (size_t i = 0; i < METRICS_STAGES; i++) {
            const vhist_t *h = &s->stage[i];
            st[i]->count = vhist_count(h);
            if (st[i]->count > 0) {
                st[i]->p50_ns = (uint64_t)vhist_percentile(h, 50);
                st[i]->p90_ns = (uint64_t)vhist_percentile(h, 90);
                st[i]->p99_ns = (uint64_t)vhist_percentile(h, 99);
                st[i]->p999_ns = (uint64_t)vhist_percentile(h, 99.9);
                st[i]->max_ns = (uint64_t)vhist_max(h);
            }
        }
    }

    if (s->latency_ok) {
        const vhist_t *h = &s->latency;
        varlog_stats_latency_t *l = &out->append_latency;
        l->count = vhist_count(h);
        if (l->count > 0) {
            l->p50_us = us_of(vhist_percentile(h, 50));
            l->p90_us = us_of(vhist_percentile(h, 90));
            l->p99_us = us_of(vhist_percentile(h, 99));
            l->p999_us = us_of(vhist_percentile(h, 99.9));
            l->max_us = us_of(vhist_max(h));
        }
    }

    for (size_t i = 0; i < VARLOG_STATS_LOG_STREAMS_MAX; i++) {
        const stats_ls_slot_t *slot = &s->ls[i];
        uint64_t key = get(&slot->key);
        if (key == 0)
            break;
        key--;
        varlog_stats_log_stream_t *o = &out->log_streams[out->n_log_streams++];
        o->topic_id = (int32_t)(uint32_t)(key >> 32);
        o->log_stream_id = (int32_t)(uint32_t)key;
        o->appended_records = get(&slot->records);
        o->appended_bytes = get(&slot->bytes);
    }
    out->log_streams_untracked_records = get(&s->ls_untracked_records);
    out->log_streams_untracked_bytes = get(&s->ls_untracked_bytes);
    return VARLOG_OK;
}

varlog_err_t varlog_stats_json(varlog_client_t *c, char **json, size_t *len)
{
    if (json)
        *json = NULL;
    if (len)
        *len = 0;
    if (!c || !json)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "varlog_stats_json: NULL argument");
    varlog_stats_t *st = malloc(sizeof(*st));
    if (!st)
        return errtext_set(VARLOG_ERR_NOMEM, "varlog_stats_json: out of memory");
    varlog_stats_get(c, st);
    size_t n = 0;
    *json = stats_to_json(st, &n);
    free(st);
    if (!*json)
        return errtext_set(VARLOG_ERR_NOMEM, "varlog_stats_json: out of memory");
    if (len)
        *len = n;
    return VARLOG_OK;
}

void varlog_stats_json_free(char *json)
{
    stats_json_free(json);
}

/* ---- the periodic emit ----------------------------------------------------------------- */

static void *stats_thread_main(void *arg)
{
    varlog_client_t *c = arg;
    /* Named here too: the creator's naming may come after this thread's first callback. */
    pthread_setname_np(pthread_self(), "varlog-stats");
    client_thread_own(c);
    client_stats_t *s = &c->cstats;
    int64_t next = wire_now_ms() + s->interval_ms;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        int64_t now = wire_now_ms();
        if (now < next) {
            struct timespec until;
            abs_deadline(&until, next - now);
            pthread_cond_timedwait(&s->wake, &s->mu, &until);
            continue;
        }
        /* Fixed rate, not fixed delay; a callback that overran skips the emits it missed. */
        next += s->interval_ms;
        if (next <= now)
            next = now + s->interval_ms;
        pthread_mutex_unlock(&s->mu);
        char *json = NULL;
        size_t len = 0;
        if (varlog_stats_json(c, &json, &len) == VARLOG_OK) {
            s->cb(json, len, s->opaque);
            stats_json_free(json);
        } else {
            log_line(&c->log, VARLOG_LOG_WARNING, VARLOG_LOG_CTX_CONF,
                     "statistics not emitted: out of memory");
        }
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

varlog_err_t stats_start(varlog_client_t *c)
{
    client_stats_t *s = &c->cstats;
    if (s->interval_ms <= 0 || !s->cb)
        return VARLOG_OK;
    if (pthread_create(&s->thread, NULL, stats_thread_main, c) != 0)
        return errtext_set(VARLOG_ERR_INTERNAL, "could not start the statistics thread");
    /* Named by its creator, so that it bears its name by the time varlog_client_new returns. */
    pthread_setname_np(s->thread, "varlog-stats");
    s->started = true;
    return VARLOG_OK;
}

void stats_stop(varlog_client_t *c)
{
    client_stats_t *s = &c->cstats;
    if (!s->started)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->started = false;
}
