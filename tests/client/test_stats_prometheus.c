/* varlog_stats_prometheus (varlog/stats.h, issue 26): the text exposition after known appends
 * and failures, checked line by line as a scraper reads it: every sample's family has HELP and
 * TYPE first; OpenTelemetry's names and attributes (messaging_system, the topic as
 * messaging_destination_name, the log stream as messaging_destination_partition_id, the node
 * as server_address/server_port, error_type only on failures); histograms with growing bounds
 * and cumulative counts, ending with an explicit le="+Inf" bucket equal to _count; counters
 * that never go back between scrapes; label values escaped, also a storage node address with
 * ", \ and a newline through varlog_stats_prometheus itself. */
#include <setjmp.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client_fixture.h"
#include "metadata.h"
#include "metrics.h"
#include "test_support.h"
#include "varlog/appender.h"
#include "varlog/stats.h"

static char *scrape(varlog_client_t *c)
{
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(varlog_stats_prometheus(c, &text, &len), VARLOG_OK);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    return text;
}

/* The value of the sample whose name and labels start with `prefix` ("name{labels"), or -1. */
static double sample(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        if (!end)
            break;
        if (line[0] != '#' && strncmp(line, prefix, n) == 0) {
            const char *sp = memchr(line, ' ', (size_t)(end - line));
            assert_non_null(sp);
            return strtod(sp + 1, NULL);
        }
        line = end + 1;
    }
    return -1;
}

/* One label of a sample: `name="value"` with value as the Prometheus text format escapes it
 * (only \\, \" and \n; a raw newline ends the line, a raw quote the value). Returns the
 * character after it, value unescaped into `value`, or fails the test. */
static const char *parse_label(const char *p, const char *line, char *name, size_t name_cap,
                               char *value, size_t value_cap)
{
    size_t n = 0;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
           (n > 0 && *p >= '0' && *p <= '9')) {
        assert_true(n + 1 < name_cap);
        name[n++] = *p++;
    }
    name[n] = '\0';
    if (n == 0 || p[0] != '=' || p[1] != '"')
        fail_msg("not `name=\"value\"` at '%s' in '%s'", p, line);
    p += 2;
    size_t v = 0;
    for (; *p != '"'; p++) {
        if (!*p)
            fail_msg("label %s's value has no closing quote in '%s'", name, line);
        char c = *p;
        if (c == '\\') {
            p++;
            if (*p == 'n')
                c = '\n';
            else if (*p == '\\' || *p == '"')
                c = *p;
            else
                fail_msg("label %s: '\\%c' is no escape of the text format in '%s'", name,
                         *p ? *p : '0', line);
        }
        assert_true(v + 1 < value_cap);
        value[v++] = c;
    }
    value[v] = '\0';
    return p + 1;
}

/* A histogram series being read: its `name{labels` without le, the last bound and count. */
typedef struct bucket_run {
    char series[1100];
    double le;     /* the last bucket's bound; INFINITY after +Inf */
    uint64_t last; /* the last bucket's count */
    bool inf;      /* the +Inf bucket was seen */
} bucket_run_t;

/* Every line is a comment or `name{labels} value`, every sample's family (the name without
 * _bucket/_sum/_count for histograms) was declared by HELP and TYPE before it, every label
 * value is escaped as the text format says, and each histogram series' buckets have growing
 * bounds and counts and end with an explicit le="+Inf" bucket equal to its _count. */
static void check_structure(const char *text)
{
    char declared[64][96];
    size_t n_declared = 0;
    bucket_run_t run = {.series = ""};
    size_t histograms = 0;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        assert_non_null(end);
        size_t len = (size_t)(end - line);
        char buf[1024];
        assert_true(len < sizeof buf);
        memcpy(buf, line, len);
        buf[len] = '\0';
        line = end + 1;
        if (strncmp(buf, "# HELP ", 7) == 0)
            continue;
        if (strncmp(buf, "# TYPE ", 7) == 0) {
            assert_true(n_declared < 64);
            sscanf(buf + 7, "%95s", declared[n_declared++]);
            continue;
        }
        char *brace = strchr(buf, '{');
        if (!brace)
            fail_msg("not `name{labels} value`: '%s'", buf);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(brace - buf), buf);
        /* the labels, each value unescaped; `le` apart */
        const char *p = brace + 1;
        const char *le_at = NULL;
        char le[512] = "";
        while (*p != '}') {
            const char *at = p;
            char lname[64], lvalue[512];
            p = parse_label(p, buf, lname, sizeof lname, lvalue, sizeof lvalue);
            if (strcmp(lname, "le") == 0) {
                le_at = at;
                snprintf(le, sizeof le, "%s", lvalue);
            }
            if (*p == ',')
                p++;
            else if (*p != '}')
                fail_msg("labels do not end with '}' at '%s' in '%s'", p, buf);
        }
        if (p[1] != ' ')
            fail_msg("not `name{labels} value`: '%s'", buf);
        bool known = false;
        for (size_t i = 0; i < n_declared && !known; i++) {
            size_t dl = strlen(declared[i]);
            known = strcmp(name, declared[i]) == 0 ||
                    (strncmp(name, declared[i], dl) == 0 &&
                     (!strcmp(name + dl, "_bucket") || !strcmp(name + dl, "_sum") ||
                      !strcmp(name + dl, "_count")));
        }
        if (!known)
            fail_msg("sample of undeclared family '%s'", name);
        char *value_end;
        double v = strtod(p + 2, &value_end);
        if (*value_end != '\0' || v < 0)
            fail_msg("bad value in '%s'", buf);
        size_t nlen = strlen(name);
        bool is_bucket = nlen > 7 && strcmp(name + nlen - 7, "_bucket") == 0;
        bool is_count = nlen > 6 && strcmp(name + nlen - 6, "_count") == 0;
        if (is_bucket) {
            if (!le_at)
                fail_msg("bucket without le: '%s'", buf);
            /* the series: the family and its labels before le (le comes last) */
            char series[1100];
            snprintf(series, sizeof series, "%.*s{%.*s", (int)(nlen - 7), name,
                     (int)(le_at - (brace + 1)), brace + 1);
            if (strcmp(series, run.series) != 0) {
                if (run.series[0] && !run.inf)
                    fail_msg("histogram series '%s' ends without an le=\"+Inf\" bucket",
                             run.series);
                snprintf(run.series, sizeof run.series, "%s", series);
                run.le = -INFINITY;
                run.last = 0;
                run.inf = false;
            }
            if (run.inf)
                fail_msg("a bucket after le=\"+Inf\": '%s'", buf);
            double bound = strcmp(le, "+Inf") == 0 ? INFINITY : strtod(le, &value_end);
            if (bound != INFINITY && (*value_end != '\0' || !le[0]))
                fail_msg("le=\"%s\" is not a number: '%s'", le, buf);
            if (!(bound > run.le))
                fail_msg("bucket bounds do not grow: le=\"%s\" after %g in '%s'", le, run.le, buf);
            if ((uint64_t)v < run.last) /* cumulative */
                fail_msg("bucket counts go back: %llu after %llu in '%s'", (unsigned long long)v,
                         (unsigned long long)run.last, buf);
            run.le = bound;
            run.last = (uint64_t)v;
            run.inf = bound == INFINITY;
        } else if (is_count && run.series[0]) {
            /* `name_count{labels}` closes the series `name{labels,` read above */
            char series[1100];
            snprintf(series, sizeof series, "%.*s{%.*s%s", (int)(nlen - 6), name,
                     (int)(p - (brace + 1)), brace + 1, p > brace + 1 ? "," : "");
            if (strcmp(series, run.series) != 0)
                fail_msg("'%s' follows the buckets of another series '%s'", buf, run.series);
            if (!run.inf)
                fail_msg("histogram series '%s' has no le=\"+Inf\" bucket before its _count",
                         run.series);
            if ((uint64_t)v != run.last)
                fail_msg("'%s': _count %llu, le=\"+Inf\" bucket %llu", buf, (unsigned long long)v,
                         (unsigned long long)run.last);
            run.series[0] = '\0';
            histograms++;
        }
    }
    if (run.series[0])
        fail_msg("histogram series '%s' has buckets but no _count", run.series);
    assert_true(histograms > 0);
}

static void on_append(const varlog_append_result_t *r, void *opaque)
{
    (void)r;
    (void)opaque;
}

/* Known appends: 3 calls of 4 records through varlog_append_to log stream 1 and 5 calls of
 * 2 through an appender bound to log stream 2; one call to an unknown log stream fails. */
static void test_exposition_after_appends(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    varlog_record_t recs[4] = {cf_record("a"), cf_record("b"), cf_record("c"), cf_record("d")};
    varlog_entry_meta_t metas[4];
    for (int i = 0; i < 3; i++)
        assert_int_equal(varlog_append_to(f.client, 1, 1, recs, 4, 5000, metas, NULL), VARLOG_OK);
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(f.client, 1, 2, &app), VARLOG_OK);
    for (int i = 0; i < 5; i++)
        assert_int_equal(varlog_appender_append(app, recs, 2, -1, on_append, NULL), VARLOG_OK);
    assert_int_equal(varlog_appender_flush(app, 10000, NULL), VARLOG_OK);
    assert_int_not_equal(varlog_append_to(f.client, 1, 77, recs, 1, 5000, metas, NULL), VARLOG_OK);

    char *text = scrape(f.client);
    check_structure(text);
    int port = varlog_server_port(f.srv);
    char prefix[512];
    snprintf(prefix, sizeof prefix,
             "messaging_client_sent_messages_total{messaging_system=\"varlog\","
             "messaging_operation_name=\"send\",messaging_operation_type=\"send\","
             "messaging_destination_name=\"1\",messaging_destination_partition_id=\"1\","
             "server_address=\"127.0.0.1\",server_port=\"%d\"}",
             port);
    assert_true(sample(text, prefix) == 12);
    snprintf(prefix, sizeof prefix,
             "messaging_client_operation_duration_seconds_count{messaging_system=\"varlog\","
             "messaging_operation_name=\"send\",messaging_operation_type=\"send\","
             "messaging_destination_name=\"1\",messaging_destination_partition_id=\"1\",");
    assert_true(sample(text, prefix) == 3);
    snprintf(prefix, sizeof prefix,
             "messaging_client_sent_messages_total{messaging_system=\"varlog\","
             "messaging_operation_name=\"send\",messaging_operation_type=\"send\","
             "messaging_destination_name=\"1\",messaging_destination_partition_id=\"2\",");
    assert_true(sample(text, prefix) == 10);
    snprintf(prefix, sizeof prefix,
             "messaging_client_operation_duration_seconds_count{messaging_system=\"varlog\","
             "messaging_operation_name=\"send\",messaging_operation_type=\"send\","
             "messaging_destination_name=\"1\",messaging_destination_partition_id=\"2\",");
    assert_true(sample(text, prefix) == 5);
    /* the failure: error_type, no partition */
    const char *failed = "messaging_client_sent_messages_total{messaging_system=\"varlog\","
                         "messaging_operation_name=\"send\",messaging_operation_type=\"send\","
                         "messaging_destination_name=\"1\",error_type=\"ERR_UNKNOWN_LOG_STREAM\"}";
    if (sample(text, failed) != 1)
        fail_msg("no failed sample '%s' in:\n%s", failed, text);
    assert_true(sample(text, "varlog_client_append_calls_total{messaging_system=\"varlog\","
                             "varlog_outcome=\"appended\"}") == 8);
    /* error_type only where the operation failed */
    for (const char *p = text; (p = strstr(p, "error_type=")); p++) {
        const char *line = p;
        while (line > text && line[-1] != '\n')
            line--;
        assert_true(strncmp(line, "messaging_client_", 17) == 0);
    }

    /* Counters never go back: more appends, then every sample of the first scrape is at most
     * the same sample of the second. */
    for (int i = 0; i < 4; i++)
        assert_int_equal(varlog_appender_append(app, recs, 1, -1, on_append, NULL), VARLOG_OK);
    assert_int_equal(varlog_appender_close(&app, 10000), VARLOG_OK);
    char *later = scrape(f.client);
    check_structure(later);
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        const char *sp = end ? memrchr(line, ' ', (size_t)(end - line)) : NULL;
        if (line[0] != '#' && sp && strncmp(line, "varlog_client_pending", 21) != 0 &&
            strncmp(line, "varlog_client_inflight", 22) != 0 &&
            strncmp(line, "varlog_client_appenders", 23) != 0 &&
            strncmp(line, "varlog_client_subscri", 21) != 0) {
            char key[600];
            snprintf(key, sizeof key, "%.*s ", (int)(sp - line), line);
            double before = strtod(sp + 1, NULL);
            double after = sample(later, key);
            if (after < before)
                fail_msg("'%s' went back from %g to %g", key, before, after);
        }
        line = end ? end + 1 : line + strlen(line);
    }
    varlog_stats_prometheus_free(text);
    varlog_stats_prometheus_free(later);
    cf_stop(&f);
}

/* Every family of a scrape is a row of docs/STATISTICS.md's metrics table with the same type,
 * and every row is a family of the scrape: a metric added to the code without its row, or a
 * row of a metric that is gone, fails. */
static void test_families_match_the_doc(void **state)
{
    (void)state;
    char rows[64][128];
    size_t n_rows = 0;
    FILE *fp = fopen(VARLOG_SOURCE_DIR "/docs/STATISTICS.md", "r");
    assert_non_null(fp);
    char line[2048];
    bool in = false;
    while (fgets(line, sizeof line, fp)) {
        if (strstr(line, "<!-- metrics:begin -->"))
            in = true;
        if (strstr(line, "<!-- metrics:end -->"))
            break;
        char name[96], type[16];
        if (in && sscanf(line, "| `%95[^`]` | %15[a-z] |", name, type) == 2) {
            char row[128];
            snprintf(row, sizeof row, "%s %s", name, type);
            bool seen = false;
            for (size_t i = 0; i < n_rows && !seen; i++)
                seen = strcmp(rows[i], row) == 0;
            if (!seen && n_rows < 64)
                snprintf(rows[n_rows++], sizeof rows[0], "%s", row);
        }
    }
    fclose(fp);
    assert_true(n_rows > 10);

    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    char *text = scrape(f.client);
    size_t n_families = 0;
    for (const char *p = text; (p = strstr(p, "# TYPE ")); p += 7) {
        char family[128];
        char name[96], type[16];
        assert_int_equal(sscanf(p + 7, "%95s %15s", name, type), 2);
        snprintf(family, sizeof family, "%s %s", name, type);
        bool documented = false;
        for (size_t i = 0; i < n_rows && !documented; i++)
            documented = strcmp(rows[i], family) == 0;
        if (!documented)
            fail_msg("family '%s' has no row in docs/STATISTICS.md's metrics table", family);
        n_families++;
    }
    if (n_families != n_rows)
        fail_msg("%zu families scraped, %zu rows documented", n_families, n_rows);
    varlog_stats_prometheus_free(text);
    cf_stop(&f);
}

/* A storage node address with a quote, a backslash and a newline in its host, as the
 * metadata could give it: md_view_log_stream is wrapped (-Wl,--wrap) so that, on the test's
 * thread while `odd_primary` is set, the log stream's primary is ODD_HOST:ODD_PORT. Every
 * other caller (the client's own threads) sees the real metadata. */
#define ODD_HOST "node\"7\\b\nx"
#define ODD_PORT "7000"
static _Thread_local bool odd_primary;

const md_log_stream_t *__real_md_view_log_stream(const md_view_t *v, int32_t topic_id,
                                                 int32_t log_stream_id);
const md_log_stream_t *__wrap_md_view_log_stream(const md_view_t *v, int32_t topic_id,
                                                 int32_t log_stream_id);
const md_log_stream_t *__wrap_md_view_log_stream(const md_view_t *v, int32_t topic_id,
                                                 int32_t log_stream_id)
{
    const md_log_stream_t *ls = __real_md_view_log_stream(v, topic_id, log_stream_id);
    static _Thread_local md_log_stream_t odd;
    if (!odd_primary || !ls)
        return ls;
    odd = *ls;
    odd.primary = ODD_HOST ":" ODD_PORT;
    return &odd;
}

/* The value of label `name` in the first sample line starting with `prefix`, unescaped; NULL
 * when there is no such line or label. */
static char *label_of(const char *text, const char *prefix, const char *name, char *out, size_t cap)
{
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        if (!end)
            break;
        if (strncmp(line, prefix, strlen(prefix)) == 0) {
            char buf[1024];
            snprintf(buf, sizeof buf, "%.*s", (int)(end - line), line);
            const char *p = strchr(buf, '{') + 1;
            while (*p && *p != '}') {
                char lname[64];
                p = parse_label(p, buf, lname, sizeof lname, out, cap);
                if (strcmp(lname, name) == 0)
                    return out;
                if (*p == ',')
                    p++;
            }
        }
        line = end + 1;
    }
    return NULL;
}

/* A label value with ", \ and a newline goes through varlog_stats_prometheus escaped as the
 * text format says (\", \\, \n): the line stays one line, the value reads back as it was. */
static void test_odd_label_value_escaped(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    varlog_record_t rec = cf_record("a");
    varlog_entry_meta_t meta;
    for (int i = 0; i < 2; i++)
        assert_int_equal(varlog_append_to(f.client, 1, 1, &rec, 1, 5000, &meta, NULL), VARLOG_OK);
    odd_primary = true;
    char *text = scrape(f.client);
    odd_primary = false;
    check_structure(text);
    const char *want = "messaging_client_sent_messages_total{messaging_system=\"varlog\","
                       "messaging_operation_name=\"send\",messaging_operation_type=\"send\","
                       "messaging_destination_name=\"1\",messaging_destination_partition_id=\"1\","
                       "server_address=\"node\\\"7\\\\b\\nx\",server_port=\"" ODD_PORT "\"} 2\n";
    if (!strstr(text, want))
        fail_msg("no line '%s' in:\n%s", want, text);
    char value[256];
    const char *got = label_of(text, "messaging_client_operation_duration_seconds_count{",
                               "server_address", value, sizeof value);
    if (!got || strcmp(got, ODD_HOST) != 0)
        fail_msg("server_address reads back as '%s', not '%s'", got ? got : "(none)", ODD_HOST);
    varlog_stats_prometheus_free(text);
    cf_stop(&f);
}

typedef struct failed_cb {
    atomic_int calls;
    atomic_int err;
} failed_cb_t;

static void on_failed(const varlog_append_result_t *r, void *opaque)
{
    failed_cb_t *f = opaque;
    atomic_store(&f->err, (int)r->err);
    atomic_fetch_add(&f->calls, 1);
}

static bool one_callback(void *arg)
{
    return atomic_load(&((failed_cb_t *)arg)->calls) == 1;
}

/* A counter that appears holding its first burst is not counted by increase(): a producer's
 * topic has its failure counters at 0 for every error of metrics_append_errors, and its log
 * stream's success counter and send histogram at 0, from the appender's creation; the first
 * failure then moves the series that was there. */
static void test_zero_before_the_first(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, "append.retries", "0", "append.resolve.maybe.appended", "false", NULL);
    char *text = scrape(f.client);
    assert_null(strstr(text, "error_type=")); /* no producer yet */
    assert_null(strstr(text, "messaging_client_sent_messages_total{"));
    varlog_stats_prometheus_free(text);

    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(f.client, 1, 1, &app), VARLOG_OK);
    text = scrape(f.client);
    check_structure(text);
    char prefix[512];
    for (size_t i = 0; i < METRICS_APPEND_ERRORS; i++) {
        snprintf(prefix, sizeof prefix,
                 "messaging_client_sent_messages_total{messaging_system=\"varlog\","
                 "messaging_operation_name=\"send\",messaging_operation_type=\"send\","
                 "messaging_destination_name=\"1\",error_type=\"%s\"}",
                 varlog_err_name(metrics_append_errors[i]));
        if (sample(text, prefix) != 0)
            fail_msg("no '%s' at 0 after the appender's creation:\n%s", prefix, text);
    }
    const char *sent = "messaging_client_sent_messages_total{messaging_system=\"varlog\","
                       "messaging_operation_name=\"send\",messaging_operation_type=\"send\","
                       "messaging_destination_name=\"1\",messaging_destination_partition_id=\"1\",";
    assert_true(sample(text, sent) == 0);
    const char *count = "messaging_client_operation_duration_seconds_count{messaging_system="
                        "\"varlog\",messaging_operation_name=\"send\",messaging_operation_type="
                        "\"send\",messaging_destination_name=\"1\","
                        "messaging_destination_partition_id=\"1\",";
    assert_true(sample(text, count) == 0);
    varlog_stats_prometheus_free(text);

    /* the first failure: the series at 0 moves, no second one appears */
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    failed_cb_t cb;
    atomic_init(&cb.calls, 0);
    atomic_init(&cb.err, 0);
    varlog_record_t recs[3] = {cf_record("a"), cf_record("b"), cf_record("c")};
    assert_int_equal(varlog_appender_append(app, recs, 3, -1, on_failed, &cb), VARLOG_OK);
    assert_true(test_wait_until(one_callback, &cb, cf_wait_bound_ms()));
    assert_int_equal(atomic_load(&cb.err), VARLOG_ERR_SEALED);
    text = scrape(f.client);
    check_structure(text);
    const char *sealed = "messaging_client_sent_messages_total{messaging_system=\"varlog\","
                         "messaging_operation_name=\"send\",messaging_operation_type=\"send\","
                         "messaging_destination_name=\"1\",error_type=\"ERR_SEALED\"}";
    assert_true(sample(text, sealed) == 3);
    size_t lines = 0;
    for (const char *p = text; (p = strstr(p, sealed)); p++)
        lines++;
    assert_int_equal(lines, 1);
    varlog_stats_prometheus_free(text);
    assert_int_equal(varlog_appender_close(&app, 10000), VARLOG_OK);
    cf_stop(&f);
}

/* Each instrument's buckets fit what it measures: a send's start at 100 us, a subscribe
 * stage's at 10 ns (a 30 ns dispatch lands in le="5e-08", not in the advised 5 ms). */
static void test_buckets_per_instrument(void **state)
{
    (void)state;
    static metrics_hist_t stage;
    metrics_hist_init(&stage, &metrics_bounds_stage);
    metrics_hist_record(&stage, 30);
    assert_int_equal(atomic_load(&stage.buckets[2]), 1); /* (25 ns, 50 ns] */
    for (size_t i = 1; i < metrics_bounds_send.n; i++)
        assert_true(metrics_bounds_send.ns[i] > metrics_bounds_send.ns[i - 1]);
    for (size_t i = 1; i < metrics_bounds_delivery.n; i++)
        assert_true(metrics_bounds_delivery.ns[i] > metrics_bounds_delivery.ns[i - 1]);
    for (size_t i = 1; i < metrics_bounds_stage.n; i++)
        assert_true(metrics_bounds_stage.ns[i] > metrics_bounds_stage.ns[i - 1]);

    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    varlog_record_t rec = cf_record("x");
    assert_int_equal(varlog_append_to(f.client, 1, 1, &rec, 1, 5000, NULL, NULL), VARLOG_OK);
    char *text = scrape(f.client);
    check_structure(text);
    assert_non_null(strstr(text, "varlog_client_subscribe_stage_duration_seconds_bucket{"
                                 "messaging_system=\"varlog\",varlog_stage=\"dispatch\","
                                 "le=\"1e-08\"} 0\n"));
    const char *send = "messaging_client_operation_duration_seconds_bucket{messaging_system="
                       "\"varlog\",messaging_operation_name=\"send\",messaging_operation_type="
                       "\"send\",messaging_destination_name=\"1\","
                       "messaging_destination_partition_id=\"1\",";
    const char *first = strstr(text, send);
    assert_non_null(first);
    assert_non_null(strstr(first, "le=\"0.0001\"}"));
    assert_true(strstr(first, "le=\"0.0001\"}") < strstr(first, "le=\"0.005\"}"));
    varlog_stats_prometheus_free(text);
    cf_stop(&f);
}

static void test_label_values_escaped(void **state)
{
    (void)state;
    char out[64];
    assert_true(metrics_escape_label_value("a\"b\\c\nd", out, sizeof out));
    assert_string_equal(out, "a\\\"b\\\\c\\nd");
    assert_true(metrics_escape_label_value("", out, sizeof out));
    assert_string_equal(out, "");
    /* too long: refused whole, never cut in the middle of an escape */
    assert_false(metrics_escape_label_value("\"\"\"\"", out, 8));
    assert_string_equal(out, "");
    assert_true(metrics_escape_label_value("\"\"\"", out, 7));
    assert_string_equal(out, "\\\"\\\"\\\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exposition_after_appends),
        cmocka_unit_test(test_families_match_the_doc),
        cmocka_unit_test(test_zero_before_the_first),
        cmocka_unit_test(test_buckets_per_instrument),
        cmocka_unit_test(test_label_values_escaped),
        cmocka_unit_test(test_odd_label_value_escaped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
