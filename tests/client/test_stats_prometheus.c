/* varlog_stats_prometheus (varlog/stats.h, issue 26): the text exposition after known appends
 * and failures, checked line by line as a scraper reads it: every sample's family has HELP and
 * TYPE first; OpenTelemetry's names and attributes (messaging_system, the topic as
 * messaging_destination_name, the log stream as messaging_destination_partition_id, the node
 * as server_address/server_port, error_type only on failures); histograms cumulative with +Inf
 * equal to _count; counters that never go back between scrapes; label values escaped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client_fixture.h"
#include "metrics.h"
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

/* Every line is a comment or `name{labels} value`, every sample's family (the name without
 * _bucket/_sum/_count for histograms) was declared by HELP and TYPE before it, and each
 * histogram series' buckets grow and end with +Inf equal to its _count. */
static void check_structure(const char *text)
{
    char declared[64][96];
    size_t n_declared = 0;
    uint64_t last_bucket = 0;
    char bucket_series[1100] = "";
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
        char *close = strrchr(buf, '}');
        if (!brace || !close || close[1] != ' ')
            fail_msg("not `name{labels} value`: '%s'", buf);
        *brace = '\0';
        bool known = false;
        for (size_t i = 0; i < n_declared && !known; i++) {
            size_t dl = strlen(declared[i]);
            known = strcmp(buf, declared[i]) == 0 ||
                    (strncmp(buf, declared[i], dl) == 0 &&
                     (!strcmp(buf + dl, "_bucket") || !strcmp(buf + dl, "_sum") ||
                      !strcmp(buf + dl, "_count")));
        }
        if (!known)
            fail_msg("sample of undeclared family '%s'", buf);
        char *value_end;
        double v = strtod(close + 2, &value_end);
        if (*value_end != '\0' || v < 0)
            fail_msg("bad value in '%s}'", close + 2);
        const char *le = strstr(brace + 1, "le=\"");
        if (le && strstr(buf, "_bucket")) {
            char series[1100];
            snprintf(series, sizeof series, "%s{%.*s", buf, (int)(le - (brace + 1)), brace + 1);
            if (strcmp(series, bucket_series) != 0) {
                snprintf(bucket_series, sizeof bucket_series, "%s", series);
                last_bucket = 0;
            }
            assert_true((uint64_t)v >= last_bucket); /* cumulative */
            last_bucket = (uint64_t)v;
        } else if (strstr(buf, "_count") && bucket_series[0]) {
            assert_int_equal((uint64_t)v, last_bucket); /* +Inf, the last bucket, == _count */
        }
    }
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
        cmocka_unit_test(test_label_values_escaped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
