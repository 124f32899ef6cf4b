/* The exposition varlog-cli serves on --metrics-listen passes `promtool check metrics`
 * (Prometheus's own parser and linter, Debian's prometheus package): exit status 0 and not
 * one complaint, for an appender's client (send: operation duration per log stream, sent
 * messages) and for a tailing subscriber's with stage timing on (receive, consumed messages,
 * the stage histograms). Skipped, saying how to enable it, where promtool is missing; under
 * CI=true that fails instead. */
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>

#include <cmocka.h>

#include "metrics_test_util.h"
#include "test_support.h"
#include "varlog/server.h"

#define RECORDS 200

typedef struct fixture {
    varlog_server_t *srv;
    const char *addr;
    const char *promtool;
    char promtool_buf[512];
    char dir[512];
    mproc_t procs[2];
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    varlog_server_opts_t opts = {.topics = 1, .log_streams_per_topic = 2};
    if (!f || varlog_server_start(&opts, &f->srv) != VARLOG_OK)
        return -1;
    f->addr = varlog_server_address(f->srv);
    f->promtool =
        metrics_find_program("PROMTOOL", "promtool", f->promtool_buf, sizeof f->promtool_buf);
    metrics_workdir(f->dir, sizeof f->dir, "promtool");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    mproc_stop_all(f->procs, sizeof f->procs / sizeof f->procs[0], f->dir);
    varlog_server_destroy(f->srv);
    free(f);
    return 0;
}

/* GET /metrics until the sum of name's series with labels matchers (as metrics_sum takes
 * them) reaches want (bounded): that exposition. */
static char *scrape_until(int port, const char *name, const char *const *matchers, double want)
{
    int64_t deadline = test_now_ms() + 30000;
    int pause_ms = 5;
    for (;;) {
        http_reply_t r;
        bool ok = http_request(port, "GET", "/metrics", 5000, &r) && r.status == 200;
        if (ok && metrics_sum(r.body, name, matchers) >= want) {
            char *body = r.body;
            r.body = NULL;
            http_reply_free(&r);
            return body;
        }
        double got = ok ? metrics_sum(r.body, name, matchers) : -1;
        http_reply_free(&r);
        if (test_now_ms() >= deadline)
            fail_msg("%s did not reach %g within 30 s (last: %g)", name, want, got);
        usleep((useconds_t)pause_ms * 1000); /* no notification for a counter */
        pause_ms = pause_ms < 100 ? pause_ms * 2 : 100;
    }
}

/* promtool check metrics on text: exit status 0 and no output at all (a lint complaint is a
 * line with status 0 in some versions, so the output is held to be empty too). */
static void expect_promtool_clean(fixture_t *f, const char *what, const char *text)
{
    const char *argv[] = {f->promtool, "check", "metrics", NULL};
    char *out = NULL;
    int st = mproc_run(f->dir, what, argv, text, 60000, &out);
    int families = 0, samples = 0;
    for (const char *l = text; *l;) {
        if (strncmp(l, "# TYPE ", 7) == 0)
            families++;
        else if (*l != '#')
            samples++;
        const char *nl = strchr(l, '\n');
        l = nl ? nl + 1 : l + strlen(l);
    }
    printf("promtool check metrics, %s: %zu bytes, %d families, %d samples: exit status %d, "
           "output '%s'\n",
           what, strlen(text), families, samples, st, out);
    if (st != 0 || out[0] != '\0')
        fail_msg("promtool check metrics on %s's exposition: exit status %d, output:\n%s\n"
                 "(the exposition: %s/%s.in)",
                 what, st, out, f->dir, what);
    free(out);
}

static void require_promtool(const fixture_t *f)
{
    if (!f->promtool)
        metrics_skip_or_fail("promtool not found (PATH, or $PROMTOOL)");
}

static void test_appender_exposition_passes_promtool(void **state)
{
    fixture_t *f = *state;
    require_promtool(f);
    mproc_t *p = &f->procs[0];
    /* --spread: both log streams, so that the families hold several series */
    const char *argv[] = {VARLOG_CLI_PROGRAM, "-q",          "--mr", f->addr, "append", "--spread",
                          "--metrics-listen", "127.0.0.1:0", NULL};
    mproc_start(p, f->dir, "append", argv, MPROC_STDIN_PIPE);
    int port = mproc_metrics_port(p, 30000);
    for (int i = 0; i < RECORDS; i++) {
        char line[64];
        int n = snprintf(line, sizeof line, "record %d\n", i);
        mproc_write(p, line, (size_t)n);
    }
    char *text = scrape_until(port, "messaging_client_sent_messages_total", NULL, RECORDS);
    assert_non_null(strstr(text, "messaging_client_operation_duration_seconds_bucket{"));
    expect_promtool_clean(f, "append", text);
    free(text);
    mproc_close_stdin(p);
    int st = mproc_stop(p, 0, 30000);
    if (st != 0) {
        mproc_dump(p);
        fail_msg("append: exit status %d", st);
    }
}

static void test_subscriber_exposition_passes_promtool(void **state)
{
    fixture_t *f = *state;
    require_promtool(f);
    /* what the subscriber reads: RECORDS records, appended first */
    char *out = NULL;
    char count[16];
    snprintf(count, sizeof count, "%d", RECORDS);
    const char *app[] = {VARLOG_CLI_PROGRAM, "-q",      "--mr", f->addr, "append",
                         "--spread",         "--count", count,  NULL};
    int st = mproc_run(f->dir, "preload", app, "", 60000, &out);
    if (st != 0)
        fail_msg("append --count %d: exit status %d: %s", RECORDS, st, out);
    free(out);
    mproc_t *p = &f->procs[1];
    const char *argv[] = {VARLOG_CLI_PROGRAM,
                          "-q",
                          "-X",
                          "subscribe.stage.timing=true",
                          "--mr",
                          f->addr,
                          "subscribe",
                          "--count",
                          "--end",
                          "1000000",
                          "--metrics-listen",
                          "127.0.0.1:0",
                          NULL};
    mproc_start(p, f->dir, "subscribe", argv, NULL);
    int port = mproc_metrics_port(p, 30000);
    /* the receive side's families hold series, not only their HELP and TYPE lines; both
     * awaited, as they are recorded one after the other */
    const char *const receive[] = {"messaging_operation_name=\"receive\"", NULL};
    free(scrape_until(port, "messaging_client_operation_duration_seconds_count", receive, RECORDS));
    char *text = scrape_until(port, "messaging_client_consumed_messages_total", receive, RECORDS);
    assert_true(metrics_sum(text, "messaging_client_consumed_messages_total", receive) == RECORDS);
    assert_true(metrics_sum(text, "messaging_client_operation_duration_seconds_count", receive) ==
                RECORDS);
    assert_true(metrics_sum(text, "varlog_client_subscribe_stage_duration_seconds_count", NULL) >
                0);
    expect_promtool_clean(f, "subscribe", text);
    free(text);
    st = mproc_stop(p, SIGINT, 30000);
    if (st != 130) { /* a range cut short by Ctrl-C */
        mproc_dump(p);
        fail_msg("subscribe: exit status %d after SIGINT, want 130", st);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_appender_exposition_passes_promtool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_subscriber_exposition_passes_promtool, setup,
                                        teardown),
    };
    return metrics_main_result(cmocka_run_group_tests(tests, NULL, NULL));
}
