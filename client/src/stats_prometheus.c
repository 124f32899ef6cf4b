/* varlog_stats_prometheus: the client's metrics in the Prometheus text format 0.0.4, named
 * after OpenTelemetry's messaging conventions v1.27.0 (metrics.h) and translated as
 * OpenTelemetry's Prometheus exporter does: dots become underscores, a duration in seconds
 * gets _seconds, a counter _total, and a unit in braces ({message}) is dropped. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "errtext.h"
#include "metadata.h"
#include "metrics.h"
#include "stats_internal.h"
#include "varlog/stats.h"

/* ---- output ---------------------------------------------------------------------------- */

typedef struct text {
    char *buf;
    size_t len, cap;
    bool failed; /* out of memory: the rest is dropped, the call fails */
} text_t;

static void put(text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text_t *t, const char *fmt, ...)
{
    if (t->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2 + (size_t)n;
        char *grown = realloc(t->buf, cap);
        if (!grown) {
            t->failed = true;
            return;
        }
        t->buf = grown;
        t->cap = cap;
    }
}

/* A series' labels, already rendered as `name="value",...` without braces. */
typedef struct labels {
    char text[512];
} labels_t;

bool metrics_escape_label_value(const char *value, char *out, size_t cap)
{
    size_t e = 0;
    for (const char *v = value; *v; v++) {
        bool escape = *v == '\\' || *v == '"' || *v == '\n';
        if (e + (escape ? 2 : 1) >= cap) {
            if (cap)
                out[0] = '\0';
            return false;
        }
        if (escape)
            out[e++] = '\\';
        out[e++] = *v == '\n' ? 'n' : *v;
    }
    if (e >= cap)
        return false;
    out[e] = '\0';
    return true;
}

/* Appends name="value"; a label that does not fit is dropped whole rather than cut. */
static void labels_add(labels_t *l, const char *name, const char *value)
{
    char escaped[256];
    if (!metrics_escape_label_value(value, escaped, sizeof escaped))
        return;
    size_t used = strlen(l->text);
    int n = snprintf(l->text + used, sizeof l->text - used, "%s%s=\"%s\"", used ? "," : "", name,
                     escaped);
    if (n < 0 || (size_t)n >= sizeof l->text - used)
        l->text[used] = '\0';
}

static void family(text_t *t, const char *name, const char *type, const char *help)
{
    put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample_u64(text_t *t, const char *name, const labels_t *l, uint64_t v)
{
    put(t, "%s{%s} %" PRIu64 "\n", name, l->text, v);
}

/* ---- the snapshot ---------------------------------------------------------------------- */

/* A histogram read once: cumulative buckets; the +Inf bucket is the count, so the two agree
 * whatever records land while it is read. */
typedef struct hist_snap {
    const metrics_bounds_t *bounds;
    uint64_t cumulative[METRICS_BUCKETS_MAX + 1];
    uint64_t count;
    double sum_s;
} hist_snap_t;

static void hist_read(const metrics_hist_t *h, hist_snap_t *out)
{
    uint64_t run = 0;
    out->bounds = h->bounds;
    for (size_t i = 0; i <= h->bounds->n; i++) {
        run += atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
        out->cumulative[i] = run;
    }
    out->count = run;
    out->sum_s = (double)atomic_load_explicit(&h->sum_ns, memory_order_relaxed) / 1e9;
}

static void put_hist(text_t *t, const char *name, const labels_t *l, const hist_snap_t *h)
{
    const char *sep = l->text[0] ? "," : "";
    for (size_t i = 0; i < h->bounds->n; i++)
        put(t, "%s_bucket{%s%sle=\"%g\"} %" PRIu64 "\n", name, l->text, sep,
            (double)h->bounds->ns[i] / 1e9, h->cumulative[i]);
    put(t, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, l->text, sep, h->count);
    put(t, "%s_sum{%s} %.9g\n", name, l->text, h->sum_s);
    put(t, "%s_count{%s} %" PRIu64 "\n", name, l->text, h->count);
}

typedef struct series_snap {
    int32_t topic, ls;
    bool untracked;
    unsigned uses; /* METRICS_USE_*: counters exported at 0 */
    char server_host[200];
    char server_port[16];
    hist_snap_t send, receive, process;
    uint64_t sent, consumed;
} series_snap_t;

typedef struct failure_snap {
    int32_t topic;
    varlog_err_t err;
    bool untracked;
    hist_snap_t send;
    uint64_t records;
} failure_snap_t;

typedef struct snapshot {
    varlog_stats_t st;
    size_t n_topics;
    int32_t topics[METRICS_TOPICS_MAX]; /* used by producers: failures at 0 */
    size_t n_series;
    series_snap_t series[METRICS_SERIES_MAX + 1];
    size_t n_failures;
    failure_snap_t failures[METRICS_FAILURES_MAX + 1];
    hist_snap_t stage[METRICS_STAGES];
} snapshot_t;

/* "host:port" or "[v6]:port" into its parts; false when there is no port. */
static bool split_address(const char *addr, char *host, size_t host_cap, char *port,
                          size_t port_cap)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || strlen(colon + 1) >= port_cap)
        return false;
    const char *h = addr;
    size_t hlen = (size_t)(colon - addr);
    if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    if (hlen >= host_cap)
        return false;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    snprintf(port, port_cap, "%s", colon + 1);
    return true;
}

static void series_read(const metrics_series_t *s, series_snap_t *out)
{
    hist_read(&s->send, &out->send);
    hist_read(&s->receive, &out->receive);
    hist_read(&s->process, &out->process);
    out->uses = atomic_load_explicit(&s->uses, memory_order_relaxed);
    out->sent = atomic_load_explicit(&s->sent_records, memory_order_relaxed);
    out->consumed = atomic_load_explicit(&s->consumed, memory_order_relaxed);
}

static void snapshot_take(varlog_client_t *c, snapshot_t *snap)
{
    client_metrics_t *m = &c->cstats.metrics;
    for (size_t i = 0; i < METRICS_TOPICS_MAX; i++) {
        uint64_t key = atomic_load_explicit(&m->topics[i].key, memory_order_acquire);
        if (key != 0)
            snap->topics[snap->n_topics++] = (int32_t)(uint32_t)(key - 1);
    }
    md_view_t *view = md_current(c);
    for (size_t i = 0; i < METRICS_SERIES_MAX; i++) {
        uint64_t key = atomic_load_explicit(&m->series[i].key, memory_order_acquire);
        series_snap_t *s = &snap->series[snap->n_series];
        if (!metrics_series_key(key, &s->topic, &s->ls))
            continue;
        /* The node a send went to: the log stream's primary in the metadata now. */
        const md_log_stream_t *mls = view ? md_view_log_stream(view, s->topic, s->ls) : NULL;
        if (!mls || !mls->primary ||
            !split_address(mls->primary, s->server_host, sizeof s->server_host, s->server_port,
                           sizeof s->server_port))
            s->server_host[0] = s->server_port[0] = '\0';
        series_read(&m->series[i], s);
        snap->n_series++;
    }
    md_view_unref(view);
    series_snap_t *u = &snap->series[snap->n_series];
    series_read(&m->untracked, u);
    if (u->sent + u->consumed + u->send.count + u->receive.count + u->process.count > 0) {
        u->untracked = true;
        snap->n_series++;
    }
    for (size_t i = 0; i < METRICS_FAILURES_MAX; i++) {
        uint64_t key = atomic_load_explicit(&m->failures[i].key, memory_order_acquire);
        if (key == 0)
            continue;
        failure_snap_t *f = &snap->failures[snap->n_failures++];
        f->topic = (int32_t)(uint32_t)((key - 1) >> 32);
        f->err = (varlog_err_t)(-(int64_t)(uint32_t)(key - 1));
        hist_read(&m->failures[i].send, &f->send);
        f->records = atomic_load_explicit(&m->failures[i].records, memory_order_relaxed);
    }
    failure_snap_t *fu = &snap->failures[snap->n_failures];
    hist_read(&m->failures_untracked.send, &fu->send);
    fu->records = atomic_load_explicit(&m->failures_untracked.records, memory_order_relaxed);
    if (fu->records + fu->send.count > 0) {
        fu->untracked = true;
        snap->n_failures++;
    }
    for (size_t i = 0; i < METRICS_STAGES; i++)
        hist_read(&m->stage[i], &snap->stage[i]);
}

/* ---- the families ---------------------------------------------------------------------- */

static void base_labels(labels_t *l, const char *operation)
{
    l->text[0] = '\0';
    labels_add(l, "messaging_system", "varlog");
    if (operation) {
        labels_add(l, "messaging_operation_name", operation);
        labels_add(l, "messaging_operation_type", operation);
    }
}

static void series_labels(labels_t *l, const series_snap_t *s, const char *operation,
                          bool with_server)
{
    base_labels(l, operation);
    if (s->untracked) {
        labels_add(l, "varlog_untracked", "true");
        return;
    }
    char id[16];
    snprintf(id, sizeof id, "%" PRId32, s->topic);
    labels_add(l, "messaging_destination_name", id);
    snprintf(id, sizeof id, "%" PRId32, s->ls);
    labels_add(l, "messaging_destination_partition_id", id);
    if (with_server && s->server_host[0]) {
        labels_add(l, "server_address", s->server_host);
        labels_add(l, "server_port", s->server_port);
    }
}

static void failure_labels(labels_t *l, const failure_snap_t *f)
{
    base_labels(l, "send");
    if (f->untracked) {
        labels_add(l, "varlog_untracked", "true");
        labels_add(l, "error_type", "_OTHER");
        return;
    }
    char id[16];
    snprintf(id, sizeof id, "%" PRId32, f->topic);
    labels_add(l, "messaging_destination_name", id);
    labels_add(l, "error_type", varlog_err_name(f->err));
}

/* Each topic a producer used has a failure counter for every error an append ends with
 * from then on: at 0 until its first failure, so that increase() counts that one too. Not
 * once failures were summed as untracked: a 0 there would hide where they went. */
static void put_failures_at_zero(text_t *t, const char *name, const snapshot_t *s)
{
    for (size_t i = 0; i < s->n_failures; i++)
        if (s->failures[i].untracked)
            return;
    for (size_t i = 0; i < s->n_topics; i++) {
        for (size_t e = 0; e < METRICS_APPEND_ERRORS; e++) {
            failure_snap_t zero = {.topic = s->topics[i], .err = metrics_append_errors[e]};
            bool seen = false;
            for (size_t f = 0; f < s->n_failures && !seen; f++)
                seen = s->failures[f].topic == zero.topic && s->failures[f].err == zero.err;
            if (seen)
                continue;
            labels_t l;
            failure_labels(&l, &zero);
            sample_u64(t, name, &l, 0);
        }
    }
}

static void put_otel(text_t *t, const snapshot_t *s)
{
    labels_t l;
    const char *name = "messaging_client_operation_duration_seconds";
    family(t, name, "histogram",
           "Duration of messaging operation initiated by a producer or consumer client: append "
           "calls (send, with stats.latency) and entries read (receive: a response's arrival to "
           "the entry's hand-out, with subscribe.stage.timing).");
    for (size_t i = 0; i < s->n_series; i++) {
        if (s->series[i].send.count == 0 && !(s->series[i].uses & METRICS_USE_SEND))
            continue;
        series_labels(&l, &s->series[i], "send", true);
        put_hist(t, name, &l, &s->series[i].send);
    }
    for (size_t i = 0; i < s->n_failures; i++) {
        if (s->failures[i].send.count == 0)
            continue;
        failure_labels(&l, &s->failures[i]);
        put_hist(t, name, &l, &s->failures[i].send);
    }
    for (size_t i = 0; i < s->n_series; i++) {
        if (s->series[i].receive.count == 0)
            continue;
        series_labels(&l, &s->series[i], "receive", false);
        put_hist(t, name, &l, &s->series[i].receive);
    }

    name = "messaging_client_sent_messages_total";
    family(t, name, "counter",
           "Records of append calls: confirmed by the storage node, or (with error_type) failed.");
    for (size_t i = 0; i < s->n_series; i++) {
        if (s->series[i].sent == 0 && !(s->series[i].uses & METRICS_USE_SEND))
            continue;
        series_labels(&l, &s->series[i], "send", true);
        sample_u64(t, name, &l, s->series[i].sent);
    }
    for (size_t i = 0; i < s->n_failures; i++) {
        failure_labels(&l, &s->failures[i]);
        sample_u64(t, name, &l, s->failures[i].records);
    }
    put_failures_at_zero(t, name, s);

    name = "messaging_client_consumed_messages_total";
    family(t, name, "counter", "Entries delivered to the application by subscriptions.");
    for (size_t i = 0; i < s->n_series; i++) {
        if (s->series[i].consumed == 0 && !(s->series[i].uses & METRICS_USE_RECEIVE))
            continue;
        series_labels(&l, &s->series[i], "receive", false);
        sample_u64(t, name, &l, s->series[i].consumed);
    }

    name = "messaging_process_duration_seconds";
    family(t, name, "histogram",
           "Duration of a subscription handler's call per entry (with subscribe.stage.timing).");
    for (size_t i = 0; i < s->n_series; i++) {
        if (s->series[i].process.count == 0)
            continue;
        series_labels(&l, &s->series[i], "process", false);
        put_hist(t, name, &l, &s->series[i].process);
    }
}

/* One family of one value (no attribute but messaging_system). */
static void put_single(text_t *t, const char *name, const char *type, const char *help, uint64_t v)
{
    labels_t l;
    base_labels(&l, NULL);
    family(t, name, type, help);
    sample_u64(t, name, &l, v);
}

static void put_single_seconds(text_t *t, const char *name, const char *type, const char *help,
                               uint64_t ms)
{
    labels_t l;
    base_labels(&l, NULL);
    family(t, name, type, help);
    put(t, "%s{%s} %.3f\n", name, l.text, (double)ms / 1000.0);
}

static void lag_labels(labels_t *l, const stats_lag_row_t *r)
{
    base_labels(l, NULL);
    char id[24];
    snprintf(id, sizeof id, "%" PRIu64, r->sub_id);
    labels_add(l, "varlog_subscription", id);
    snprintf(id, sizeof id, "%" PRId32, r->topic);
    labels_add(l, "messaging_destination_name", id);
    snprintf(id, sizeof id, "%" PRId32, r->ls);
    labels_add(l, "messaging_destination_partition_id", id);
}

/* The consumer lag per open subscription and log stream (stats_lag.c). */
static void put_lag(text_t *t, const stats_lag_row_t *rows, size_t n)
{
    labels_t l;
    const char *name = "varlog_client_subscription_lag_entries";
    family(t, name, "gauge",
           "Entries committed in the log stream after the last one the subscription delivered "
           "(up to its range's end): the consumer lag, asked of the replicas at each scrape "
           "(stats.lag.timeout.ms).");
    for (size_t i = 0; i < n; i++) {
        lag_labels(&l, &rows[i]);
        sample_u64(t, name, &l, rows[i].entries);
    }
    name = "varlog_client_subscription_lag_seconds";
    family(t, name, "gauge",
           "How long the oldest entry not delivered yet has been committed, at least: since the "
           "first scrape that saw the log stream's end past it; 0 when caught up.");
    for (size_t i = 0; i < n; i++) {
        lag_labels(&l, &rows[i]);
        put(t, "%s{%s} %.3f\n", name, l.text, rows[i].seconds);
    }
}

static void put_own(text_t *t, const snapshot_t *s, const varlog_client_stats_t *cs)
{
    const varlog_stats_t *st = &s->st;
    labels_t l;
    static const char *const OUTCOMES[] = {"appended", "not_appended", "maybe_appended"};
    const uint64_t calls[] = {st->appended_calls, st->not_appended_calls, st->maybe_appended_calls};
    const uint64_t records[] = {st->appended_records, st->not_appended_records,
                                st->maybe_appended_records};
    const char *name = "varlog_client_append_calls_total";
    family(t, name, "counter", "Append calls by outcome (varlog_append and appenders).");
    for (size_t i = 0; i < 3; i++) {
        base_labels(&l, NULL);
        labels_add(&l, "varlog_outcome", OUTCOMES[i]);
        sample_u64(t, name, &l, calls[i]);
    }
    name = "varlog_client_append_records_total";
    family(t, name, "counter", "Records of append calls by outcome.");
    for (size_t i = 0; i < 3; i++) {
        base_labels(&l, NULL);
        labels_add(&l, "varlog_outcome", OUTCOMES[i]);
        sample_u64(t, name, &l, records[i]);
    }
    put_single(t, "varlog_client_appended_bytes_total", "counter",
               "Payload bytes of records appended.", st->appended_bytes);
    put_single(t, "varlog_client_pending_records", "gauge",
               "Records in open appenders from the append call until its callback returned.",
               st->pending_records);
    put_single(t, "varlog_client_pending_bytes", "gauge", "Payload bytes of pending records.",
               st->pending_bytes);
    put_single(t, "varlog_client_inflight_records", "gauge",
               "Records sent in an AppendRequest not answered yet.", st->inflight_records);
    put_single(t, "varlog_client_inflight_bytes", "gauge", "Payload bytes of in-flight records.",
               st->inflight_bytes);
    put_single(t, "varlog_client_retries_total", "counter",
               "varlog_append attempts after the first and appender batches sent again.",
               st->retries);
    put_single(t, "varlog_client_queue_full_total", "counter",
               "Appender calls refused with QUEUE_FULL (a binding's wait counts once, when it "
               "gives up).",
               st->queue_full);
    put_single(t, "varlog_client_queue_full_waits_total", "counter",
               "Appender calls that waited for room in a full queue.", st->queue_full_waits);
    put_single(t, "varlog_client_denials_total", "counter",
               "Log streams put on the client's deny list after a failure of their own.",
               cs->denials);
    put_single(t, "varlog_client_metadata_fetches_total", "counter",
               "GetMetadata calls (refreshes and lookups).", st->metadata_fetches);
    put_single(t, "varlog_client_reconnects_total", "counter",
               "Connections found ready again after being lost.", st->reconnects);
    put_single(t, "varlog_client_appenders", "gauge", "Pipelined appenders open.", st->appenders);
    put_single(t, "varlog_client_subscriptions", "gauge", "Subscriptions open.", st->subscriptions);
    put_single(t, "varlog_client_subscription_buffered_entries", "gauge",
               "Positions received but not yet delivered, summed over open subscriptions "
               "(docs/STATISTICS.md: subscribe_lag); the consumer lag is "
               "varlog_client_subscription_lag_entries.",
               st->subscribe_lag);
    put_single(t, "varlog_client_subscription_outages_total", "counter",
               "Times a subscription began reconnecting: a log stream's stream broke "
               "(varlog_subscription_health's outages, summed; closed subscriptions included).",
               st->subscribe_outages);
    put_single_seconds(t, "varlog_client_subscription_outage_seconds_total", "counter",
                       "Time subscriptions spent reconnecting, the current outages up to now.",
                       st->subscribe_outage_ms);
    put_single(t, "varlog_client_subscription_reconnecting", "gauge",
               "Log streams of open subscriptions reconnecting now.",
               st->subscribe_log_streams_down);
    put_single(t, "varlog_client_consumed_bytes_total", "counter",
               "Payload bytes of entries delivered by subscriptions.", st->subscribe_bytes);

    name = "varlog_client_subscribe_stage_duration_seconds";
    family(t, name, "histogram",
           "Time of each stage of an entry on the subscribe path (with subscribe.stage.timing): "
           "enqueue, transmit_queue, dispatch, handler (docs/STATISTICS.md).");
    for (size_t i = 0; i < METRICS_STAGES; i++) {
        base_labels(&l, NULL);
        labels_add(&l, "varlog_stage", metrics_stage_names[i]);
        put_hist(t, name, &l, &s->stage[i]);
    }
}

varlog_err_t varlog_stats_prometheus(varlog_client_t *client, char **text, size_t *len)
{
    if (text)
        *text = NULL;
    if (len)
        *len = 0;
    if (!client || !text)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "varlog_stats_prometheus: NULL argument (%s)",
                           !client ? "client" : "text");
    /* First the lag, which asks the replicas: the snapshot after it is then as fresh as a
     * scrape without subscriptions. */
    stats_lag_row_t *lag = NULL;
    size_t n_lag = 0;
    if (stats_lag_collect(client, &lag, &n_lag) != VARLOG_OK)
        return errtext_set(VARLOG_ERR_NOMEM, "varlog_stats_prometheus: out of memory");
    snapshot_t *snap = calloc(1, sizeof *snap);
    if (!snap) {
        free(lag);
        return errtext_set(VARLOG_ERR_NOMEM, "varlog_stats_prometheus: out of memory");
    }
    varlog_client_stats_t cs;
    varlog_err_t err = varlog_stats_get(client, &snap->st);
    if (err == VARLOG_OK)
        err = varlog_client_stats(client, &cs);
    if (err != VARLOG_OK) {
        free(lag);
        free(snap);
        return err;
    }
    snapshot_take(client, snap);
    text_t t = {.cap = 16384};
    t.buf = malloc(t.cap);
    t.failed = t.buf == NULL;
    put_otel(&t, snap);
    put_own(&t, snap, &cs);
    put_lag(&t, lag, n_lag);
    free(lag);
    free(snap);
    if (t.failed) {
        free(t.buf);
        return errtext_set(VARLOG_ERR_NOMEM, "varlog_stats_prometheus: out of memory");
    }
    *text = t.buf;
    if (len)
        *len = t.len;
    return VARLOG_OK;
}

void varlog_stats_prometheus_free(char *text)
{
    free(text);
}
