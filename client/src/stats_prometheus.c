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
    uint64_t cumulative[METRICS_DURATION_BUCKETS + 1];
    uint64_t count;
    double sum_s;
} hist_snap_t;

static void hist_read(const metrics_hist_t *h, hist_snap_t *out)
{
    uint64_t run = 0;
    for (size_t i = 0; i <= METRICS_DURATION_BUCKETS; i++) {
        run += atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
        out->cumulative[i] = run;
    }
    out->count = run;
    out->sum_s = (double)atomic_load_explicit(&h->sum_ns, memory_order_relaxed) / 1e9;
}

static void put_hist(text_t *t, const char *name, const labels_t *l, const hist_snap_t *h)
{
    const char *sep = l->text[0] ? "," : "";
    for (size_t i = 0; i < METRICS_DURATION_BUCKETS; i++)
        put(t, "%s_bucket{%s%sle=\"%g\"} %" PRIu64 "\n", name, l->text, sep,
            (double)metrics_duration_bounds_ns[i] / 1e9, h->cumulative[i]);
    put(t, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, l->text, sep, h->count);
    put(t, "%s_sum{%s} %.9g\n", name, l->text, h->sum_s);
    put(t, "%s_count{%s} %" PRIu64 "\n", name, l->text, h->count);
}

typedef struct series_snap {
    int32_t topic, ls;
    bool untracked;
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
    out->sent = atomic_load_explicit(&s->sent_records, memory_order_relaxed);
    out->consumed = atomic_load_explicit(&s->consumed, memory_order_relaxed);
}

static void snapshot_take(varlog_client_t *c, snapshot_t *snap)
{
    client_metrics_t *m = &c->cstats.metrics;
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

static void put_otel(text_t *t, const snapshot_t *s)
{
    labels_t l;
    const char *name = "messaging_client_operation_duration_seconds";
    family(t, name, "histogram",
           "Duration of messaging operation initiated by a producer or consumer client: append "
           "calls (send, with stats.latency) and entries read (receive: a response's arrival to "
           "the entry's hand-out, with subscribe.stage.timing).");
    for (size_t i = 0; i < s->n_series; i++) {
        if (s->series[i].send.count == 0)
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
        if (s->series[i].sent == 0)
            continue;
        series_labels(&l, &s->series[i], "send", true);
        sample_u64(t, name, &l, s->series[i].sent);
    }
    for (size_t i = 0; i < s->n_failures; i++) {
        failure_labels(&l, &s->failures[i]);
        sample_u64(t, name, &l, s->failures[i].records);
    }

    name = "messaging_client_consumed_messages_total";
    family(t, name, "counter", "Entries delivered to the application by subscriptions.");
    for (size_t i = 0; i < s->n_series; i++) {
        if (s->series[i].consumed == 0)
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
               "varlog_appender_append calls refused with QUEUE_FULL.", st->queue_full);
    put_single(t, "varlog_client_denials_total", "counter",
               "Log streams put on the client's deny list after a failure of their own.",
               cs->denials);
    put_single(t, "varlog_client_metadata_fetches_total", "counter",
               "GetMetadata calls (refreshes and lookups).", st->metadata_fetches);
    put_single(t, "varlog_client_reconnects_total", "counter",
               "Connections found ready again after being lost.", st->reconnects);
    put_single(t, "varlog_client_appenders", "gauge", "Pipelined appenders open.", st->appenders);
    put_single(t, "varlog_client_subscriptions", "gauge", "Subscriptions open.", st->subscriptions);
    put_single(t, "varlog_client_subscription_lag", "gauge",
               "Positions received but not yet delivered, summed over open subscriptions "
               "(docs/STATISTICS.md: subscribe_lag).",
               st->subscribe_lag);
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
    snapshot_t *snap = calloc(1, sizeof *snap);
    if (!snap)
        return errtext_set(VARLOG_ERR_NOMEM, "varlog_stats_prometheus: out of memory");
    varlog_client_stats_t cs;
    varlog_err_t err = varlog_stats_get(client, &snap->st);
    if (err == VARLOG_OK)
        err = varlog_client_stats(client, &cs);
    if (err != VARLOG_OK) {
        free(snap);
        return err;
    }
    snapshot_take(client, snap);
    text_t t = {.cap = 16384};
    t.buf = malloc(t.cap);
    t.failed = t.buf == NULL;
    put_otel(&t, snap);
    put_own(&t, snap, &cs);
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
