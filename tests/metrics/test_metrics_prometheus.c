/* A real Prometheus scrapes varlog-cli (issue 26; CTest label prometheus, `make
 * test-prometheus`): Debian's prometheus, on 127.0.0.1 at a free port with a scratch data
 * directory and a scrape interval of 1 s, scrapes `varlog-cli append --metrics-listen
 * 127.0.0.1:0` while records arrive on its stdin for about 3 s. The CLI keeps serving (its
 * stdin still open) until Prometheus has scraped the full count; then its stdin closes, it
 * prints its own count and exits. What Prometheus's HTTP API answers must equal that count:
 * messaging_client_sent_messages_total, the operation-duration histogram's _count and +Inf
 * bucket (one append call per record), varlog_client_append_records_total{outcome appended};
 * the buckets cumulative; the counters never reset in the scrapes Prometheus kept, which
 * include one taken before the appends ended. Prometheus and the CLI are stopped on every way
 * out; their output is printed when the test fails. Skipped with one line where prometheus is
 * missing; under CI=true that fails. Bounded: well within 60 s. */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "metrics_test_util.h"
#include "test_support.h"

#define CHUNKS 30
#define PER_CHUNK 100
#define RECORDS (CHUNKS * PER_CHUNK)
#define JOB "{job=\"varlog-cli\"}"
#define SEND_JOB "{job=\"varlog-cli\",messaging_operation_name=\"send\"}"

typedef struct fixture {
    const char *prometheus;
    char prometheus_buf[512];
    char dir[512];
    int prom_port;
    mproc_t cli, prom;
    bool failed_dump; /* teardown prints the programs' output */
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->prometheus = metrics_find_program("PROMETHEUS", "prometheus", f->prometheus_buf,
                                         sizeof f->prometheus_buf);
    metrics_workdir(f->dir, sizeof f->dir, "prometheus");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    bool clean = !mproc_running(&f->cli) && !mproc_running(&f->prom);
    if (!clean) {
        if (f->cli.pid)
            mproc_dump(&f->cli);
        if (f->prom.pid)
            mproc_dump(&f->prom);
    }
    mproc_kill(&f->cli);
    mproc_kill(&f->prom);
    if (clean)
        metrics_workdir_remove(f->dir);
    else
        fprintf(stderr, "their output and Prometheus's data: %s\n", f->dir);
    free(f);
    return 0;
}

/* /api/v1/query for expr: the parsed answer's data.result array (owned by *root), or NULL
 * when Prometheus did not answer success. */
static cJSON *query(fixture_t *f, const char *expr, cJSON **root)
{
    char esc[2048], target[2200];
    metrics_url_escape(expr, esc, sizeof esc);
    snprintf(target, sizeof target, "/api/v1/query?query=%s", esc);
    http_reply_t r;
    *root = NULL;
    if (!http_request(f->prom_port, "GET", target, 10000, &r) || r.status != 200) {
        fprintf(stderr, "query %s: status %d: %s\n", expr, r.status, r.body ? r.body : "");
        http_reply_free(&r);
        return NULL;
    }
    *root = cJSON_Parse(r.body);
    http_reply_free(&r);
    cJSON *status = cJSON_GetObjectItem(*root, "status");
    cJSON *data = cJSON_GetObjectItem(*root, "data");
    if (!cJSON_IsString(status) || strcmp(status->valuestring, "success") != 0 || !data)
        return NULL;
    return cJSON_GetObjectItem(data, "result");
}

/* The value of a one-element vector answer: NAN when the vector is empty (no series yet). */
static double query_value(fixture_t *f, const char *expr)
{
    cJSON *root;
    cJSON *result = query(f, expr, &root);
    double v = NAN;
    if (result && cJSON_GetArraySize(result) == 1) {
        cJSON *value = cJSON_GetObjectItem(cJSON_GetArrayItem(result, 0), "value");
        cJSON *text = cJSON_GetArrayItem(value, 1);
        if (cJSON_IsString(text))
            v = strtod(text->valuestring, NULL);
    } else if (!result) {
        cJSON_Delete(root);
        fail_msg("Prometheus did not answer the query %s", expr);
    }
    cJSON_Delete(root);
    return v;
}

/* Waits (bounded) until every expr of exprs[0..n) has the value want. */
static void await_values(fixture_t *f, const char *const *exprs, size_t n, double want,
                         int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        size_t i = 0;
        double got = NAN;
        while (i < n && (got = query_value(f, exprs[i])) == want)
            i++;
        if (i == n)
            return;
        if (test_now_ms() >= deadline)
            fail_msg("Prometheus: %s is %g, not %g, after %lld ms", exprs[i], got, want,
                     (long long)timeout_ms);
        usleep(200000); /* a scrape a second: nothing to be notified of */
    }
}

static void write_config(fixture_t *f, int cli_port, char *path, size_t cap)
{
    snprintf(path, cap, "%s/prometheus.yml", f->dir);
    FILE *c = fopen(path, "w");
    assert_non_null(c);
    fprintf(c,
            "global:\n"
            "  scrape_interval: 1s\n"
            "  scrape_timeout: 1s\n"
            "  evaluation_interval: 1s\n"
            "scrape_configs:\n"
            "  - job_name: varlog-cli\n"
            "    static_configs:\n"
            "      - targets: ['127.0.0.1:%d']\n",
            cli_port);
    assert_int_equal(fclose(c), 0);
}

static void test_prometheus_scrapes_cli(void **state)
{
    fixture_t *f = *state;
    if (!f->prometheus)
        metrics_skip_or_fail("prometheus not found (PATH, or $PROMETHEUS)");
    int64_t t0 = test_now_ms();

    /* --spread: both log streams of the embedded server, so that the sums span series */
    const char *cli[] = {VARLOG_CLI_PROGRAM, "-q",          "append", "--spread",
                         "--metrics-listen", "127.0.0.1:0", NULL};
    mproc_start(&f->cli, f->dir, "varlog-cli", cli, MPROC_STDIN_PIPE);
    int cli_port = mproc_metrics_port(&f->cli, 20000);

    char config[600], flag_config[700], flag_data[700], flag_listen[64];
    write_config(f, cli_port, config, sizeof config);
    f->prom_port = metrics_free_port();
    snprintf(flag_config, sizeof flag_config, "--config.file=%s", config);
    snprintf(flag_data, sizeof flag_data, "--storage.tsdb.path=%s/data", f->dir);
    snprintf(flag_listen, sizeof flag_listen, "--web.listen-address=127.0.0.1:%d", f->prom_port);
    const char *prom[] = {f->prometheus, flag_config, flag_data, flag_listen, NULL};
    mproc_start(&f->prom, f->dir, "prometheus", prom, NULL);

    /* Ready (its TSDB open), then the target up: one scrape before the first record. */
    int64_t deadline = test_now_ms() + 20000;
    for (;;) {
        http_reply_t r;
        bool ready = http_request(f->prom_port, "GET", "/-/ready", 2000, &r) && r.status == 200;
        http_reply_free(&r);
        if (ready)
            break;
        if (!mproc_running(&f->prom) || test_now_ms() >= deadline) {
            mproc_dump(&f->prom);
            fail_msg("Prometheus on 127.0.0.1:%d not ready within 20 s", f->prom_port);
        }
        usleep(100000); /* it has no way to tell us */
    }
    await_values(f, (const char *const[]){"up" JOB}, 1, 1, 10000);
    printf("Prometheus ready and scraping 127.0.0.1:%d after %lld ms\n", cli_port,
           (long long)(test_now_ms() - t0));

    /* about 3 s of appends: three scrapes or so while they run */
    char chunk[PER_CHUNK * 32];
    for (int c = 0; c < CHUNKS; c++) {
        size_t len = 0;
        for (int i = 0; i < PER_CHUNK; i++)
            len +=
                (size_t)snprintf(chunk + len, sizeof chunk - len, "record %d\n", c * PER_CHUNK + i);
        mproc_write(&f->cli, chunk, len);
        usleep(100000); /* pacing the input, not waiting for anything */
    }

    /* The CLI serves on until a scrape after its last append is in Prometheus. */
    const char *full[] = {
        "sum(messaging_client_sent_messages_total" JOB ")",
        "sum(messaging_client_operation_duration_seconds_count" SEND_JOB ")",
        ("sum(messaging_client_operation_duration_seconds_bucket{job=\"varlog-cli\","
         "messaging_operation_name=\"send\",le=\"+Inf\"})"),
        "sum(varlog_client_append_records_total{job=\"varlog-cli\",varlog_outcome=\"appended\"})",
    };
    await_values(f, full, sizeof full / sizeof full[0], RECORDS, 20000);
    printf("Prometheus has the full count %d after %lld ms\n", RECORDS,
           (long long)(test_now_ms() - t0));

    /* scraped while it ran (a smaller value kept), and no counter ever went back */
    double first =
        query_value(f, "sum(min_over_time(messaging_client_sent_messages_total" JOB "[5m]))");
    double resets =
        query_value(f, "sum(resets(messaging_client_sent_messages_total" JOB
                       "[5m])) + sum(resets(varlog_client_append_records_total" JOB "[5m]))");
    double scrapes = query_value(f, "count_over_time(up" JOB "[5m])");
    printf("Prometheus: %g scrapes; the first sent_messages samples summed to %g; %g resets\n",
           scrapes, first, resets);
    assert_true(first < RECORDS);
    assert_true(resets == 0);
    assert_true(scrapes >= 3);

    /* the histogram's buckets, summed over its series: cumulative, +Inf the count */
    cJSON *root;
    cJSON *result = query(
        f, "sum by (le) (messaging_client_operation_duration_seconds_bucket" SEND_JOB ")", &root);
    assert_non_null(result);
    int n = cJSON_GetArraySize(result);
    assert_int_equal(n, 20); /* the send instrument's 19 boundaries (metrics.c) and +Inf */
    double les[20], counts[20];
    for (int i = 0; i < n; i++) {
        cJSON *item = cJSON_GetArrayItem(result, i);
        const char *le =
            cJSON_GetObjectItem(cJSON_GetObjectItem(item, "metric"), "le")->valuestring;
        les[i] = strcmp(le, "+Inf") == 0 ? INFINITY : strtod(le, NULL);
        counts[i] =
            strtod(cJSON_GetArrayItem(cJSON_GetObjectItem(item, "value"), 1)->valuestring, NULL);
    }
    cJSON_Delete(root);
    for (int i = 1; i < n; i++) /* by le */
        for (int j = i; j > 0 && les[j] < les[j - 1]; j--) {
            double t = les[j];
            les[j] = les[j - 1];
            les[j - 1] = t;
            t = counts[j];
            counts[j] = counts[j - 1];
            counts[j - 1] = t;
        }
    for (int i = 1; i < n; i++)
        if (counts[i] < counts[i - 1])
            fail_msg("bucket le=%g holds %g, fewer than le=%g's %g", les[i], counts[i], les[i - 1],
                     counts[i - 1]);
    assert_true(isinf(les[n - 1]));
    assert_true(counts[n - 1] == RECORDS);

    /* Its input ends: the CLI prints its own count and exits; Prometheus's must equal it. */
    mproc_close_stdin(&f->cli);
    int st = mproc_stop(&f->cli, 0, 20000);
    char *out = mproc_stdout(&f->cli);
    unsigned long printed = 0;
    if (st != 0 || sscanf(out, "appended %lu records, GLSN", &printed) != 1) {
        mproc_dump(&f->cli);
        fail_msg("varlog-cli append: exit status %d, stdout '%s'", st, out);
    }
    free(out);
    printf("varlog-cli printed: appended %lu records; Prometheus: sent %g, operation count %g\n",
           printed, query_value(f, full[0]), query_value(f, full[1]));
    assert_int_equal(printed, RECORDS);
    for (size_t i = 0; i < sizeof full / sizeof full[0]; i++)
        if (query_value(f, full[i]) != (double)printed)
            fail_msg("Prometheus: %s is %g; varlog-cli printed %lu", full[i],
                     query_value(f, full[i]), printed);

    st = mproc_stop(&f->prom, SIGTERM, 15000);
    if (st != 0) {
        mproc_dump(&f->prom);
        fail_msg("Prometheus: exit status %d after SIGTERM", st);
    }
    printf("done in %lld ms\n", (long long)(test_now_ms() - t0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_prometheus_scrapes_cli, setup, teardown),
    };
    return metrics_main_result(cmocka_run_group_tests(tests, NULL, NULL));
}
