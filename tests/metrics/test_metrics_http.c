/* varlog-cli --metrics-listen (cli/metrics_http.c, issue 26): GET /metrics answers with the
 * client's metrics and the Prometheus text format's Content-Type while the command runs, on
 * each long-running command (append, subscribe, subscribe-to, bench, demo); other paths get
 * 404 and other methods 405; the port closes with the command; a bad address is refused with
 * one usage line (exit 2) before anything runs, and an address that cannot be bound fails the
 * command (exit 1) with one line. The programs run as a user runs them, against a server this
 * test starts (or their own embedded one). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>

#include <cmocka.h>

#include "metrics_test_util.h"
#include "test_support.h"
#include "varlog/server.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define SENT "messaging_client_sent_messages_total"

typedef struct fixture {
    varlog_server_t *srv;
    const char *addr;
    char dir[512];
    mproc_t procs[4];
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    varlog_server_opts_t opts = {.topics = 2, .log_streams_per_topic = 2};
    if (!f || varlog_server_start(&opts, &f->srv) != VARLOG_OK)
        return -1;
    f->addr = varlog_server_address(f->srv);
    metrics_workdir(f->dir, sizeof f->dir, "http");
    *state = f;
    return 0;
}

/* Every program a test started is stopped, also when the test failed; the scratch directory
 * stays when one was still running (a failure: its output is there). */
static int teardown(void **state)
{
    fixture_t *f = *state;
    mproc_stop_all(f->procs, sizeof f->procs / sizeof f->procs[0], f->dir);
    varlog_server_destroy(f->srv);
    free(f);
    return 0;
}

/* GET /metrics until cond's sum of name reaches want (bounded): the exposition then. */
static char *scrape_until(int port, const char *name, double want, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    int pause_ms = 5;
    for (;;) {
        http_reply_t r;
        if (http_request(port, "GET", "/metrics", 5000, &r) && r.status == 200 &&
            metrics_sum(r.body, name, NULL) >= want) {
            char *body = r.body;
            r.body = NULL;
            http_reply_free(&r);
            return body;
        }
        double got = r.status == 200 ? metrics_sum(r.body, name, NULL) : -1;
        http_reply_free(&r);
        if (test_now_ms() >= deadline)
            fail_msg("%s did not reach %g within %lld ms (last: %g)", name, want,
                     (long long)timeout_ms, got);
        /* no notification for a counter: look again shortly */
        usleep((useconds_t)pause_ms * 1000);
        pause_ms = pause_ms < 100 ? pause_ms * 2 : 100;
    }
}

static void expect_status(int port, const char *method, const char *target, int want)
{
    http_reply_t r;
    if (!http_request(port, method, target, 5000, &r))
        fail_msg("%s %s: no answer", method, target);
    if (r.status != want)
        fail_msg("%s %s: status %d, want %d; body '%s'", method, target, r.status, want, r.body);
    http_reply_free(&r);
}

/* Nothing answers on port any more. */
static void expect_closed(int port)
{
    http_reply_t r;
    if (http_request(port, "GET", "/metrics", 2000, &r))
        fail_msg("port %d still answers (%d) after the command ended", port, r.status);
}

static void test_metrics_404_405_and_closing(void **state)
{
    fixture_t *f = *state;
    mproc_t *p = &f->procs[0];
    const char *argv[] = {VARLOG_CLI_PROGRAM, "-q",          "--mr", f->addr, "append",
                          "--metrics-listen", "127.0.0.1:0", NULL};
    mproc_start(p, f->dir, "append", argv, MPROC_STDIN_PIPE);
    int port = mproc_metrics_port(p, 30000);
    for (int i = 0; i < 10; i++) {
        char line[32];
        int n = snprintf(line, sizeof line, "record %d\n", i);
        mproc_write(p, line, (size_t)n);
    }
    char *text = scrape_until(port, SENT, 10, 30000);
    assert_non_null(strstr(text, "# TYPE " SENT " counter\n"));
    free(text);

    http_reply_t r;
    assert_true(http_request(port, "GET", "/metrics", 5000, &r));
    assert_int_equal(r.status, 200);
    char ct[128];
    assert_true(http_header(&r, "Content-Type", ct, sizeof ct));
    assert_string_equal(ct, CONTENT_TYPE);
    http_reply_free(&r);
    /* HEAD: the headers alone */
    assert_true(http_request(port, "HEAD", "/metrics", 5000, &r));
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 0);
    assert_true(http_header(&r, "Content-Type", ct, sizeof ct));
    assert_string_equal(ct, CONTENT_TYPE);
    http_reply_free(&r);
    /* a query string is not part of the path */
    expect_status(port, "GET", "/metrics?name%5B%5D=x", 200);
    for (const char *const *t = (const char *const[]){"/", "/other", "/metrics/", "/metricsx",
                                                      "/metric", "/Metrics", NULL};
         *t; t++)
        expect_status(port, "GET", *t, 404);
    assert_true(http_request(port, "POST", "/metrics", 5000, &r));
    assert_int_equal(r.status, 405);
    char allow[64];
    assert_true(http_header(&r, "Allow", allow, sizeof allow));
    assert_string_equal(allow, "GET, HEAD");
    http_reply_free(&r);

    /* the end of input ends the command, and the port with it */
    mproc_close_stdin(p);
    int st = mproc_stop(p, 0, 30000);
    char *out = mproc_stdout(p);
    if (st != 0 || strncmp(out, "appended 10 records, GLSN ", 26) != 0) {
        mproc_dump(p);
        fail_msg("append: status %d, stdout '%s'", st, out);
    }
    free(out);
    expect_closed(port);
}

/* One command with --metrics-listen 127.0.0.1:0: serves while it runs, then SIGINT stops it
 * with one of the statuses in ok. */
static void serves_while_running(fixture_t *f, const char *name, const char *const *argv,
                                 const char *family, int ok1, int ok2)
{
    mproc_t *p = &f->procs[1];
    mproc_start(p, f->dir, name, argv, NULL);
    int port = mproc_metrics_port(p, 30000);
    http_reply_t r;
    if (!http_request(port, "GET", "/metrics", 10000, &r) || r.status != 200) {
        mproc_dump(p);
        fail_msg("%s: GET /metrics: status %d", name, r.status);
    }
    char ct[128];
    assert_true(http_header(&r, "Content-Type", ct, sizeof ct));
    assert_string_equal(ct, CONTENT_TYPE);
    if (!strstr(r.body, family))
        fail_msg("%s: '%s' missing from its exposition:\n%s", name, family, r.body);
    http_reply_free(&r);
    expect_status(port, "GET", "/nope", 404);
    int st = mproc_stop(p, SIGINT, 30000);
    if (st != ok1 && st != ok2) {
        mproc_dump(p);
        fail_msg("%s: exit status %d after SIGINT, want %d or %d", name, st, ok1, ok2);
    }
    expect_closed(port);
    printf("%s: served port %d, exit status %d\n", name, port, st);
}

static void test_every_long_running_command_serves(void **state)
{
    fixture_t *f = *state;
    /* a tail (Ctrl-C is how it ends: 0) */
    serves_while_running(f, "subscribe",
                         (const char *const[]){VARLOG_CLI_PROGRAM, "-q", "--mr", f->addr,
                                               "subscribe", "--topic", "2", "--metrics-listen",
                                               "127.0.0.1:0", NULL},
                         "# TYPE messaging_client_consumed_messages_total counter", 0, 0);
    serves_while_running(f, "subscribe-to",
                         (const char *const[]){VARLOG_CLI_PROGRAM, "-q", "--mr", f->addr,
                                               "subscribe-to", "--topic", "1", "--log-stream", "1",
                                               "--metrics-listen", "127.0.0.1:0", NULL},
                         "# TYPE messaging_client_consumed_messages_total counter", 0, 0);
    /* finite jobs cut short (130), or done before the signal (0); their own embedded server */
    serves_while_running(f, "bench",
                         (const char *const[]){VARLOG_CLI_PROGRAM, "-q", "bench", "--duration",
                                               "60", "--rate", "500", "--metrics-listen",
                                               "127.0.0.1:0", NULL},
                         "# TYPE messaging_client_operation_duration_seconds histogram", 130, 0);
    serves_while_running(f, "demo",
                         (const char *const[]){VARLOG_CLI_PROGRAM, "-q", "demo", "--records",
                                               "3000000", "--size", "24", "--metrics-listen",
                                               "127.0.0.1:0", NULL},
                         "# TYPE " SENT " counter", 130, 0);
}

/* Exit status 2, nothing on stdout, one line on stderr holding needle. */
static void expect_refused(fixture_t *f, const char *const *argv, const char *needle)
{
    char *out = NULL;
    int st = mproc_run(f->dir, "refused", argv, "", 30000, &out);
    int lines = 0;
    for (const char *c = out; *c; c++)
        lines += *c == '\n';
    if (st != 2 || lines != 1 || !strstr(out, needle))
        fail_msg("%s %s ... %s: status %d (want 2), output '%s' (want one line with '%s')", argv[0],
                 argv[2], argv[4] ? argv[4] : "", st, out, needle);
    free(out);
}

static void test_bad_address_refused(void **state)
{
    fixture_t *f = *state;
    static const char *const bad[] = {"127.0.0.1",
                                      ":9464",
                                      "127.0.0.1:",
                                      "127.0.0.1:x",
                                      "127.0.0.1:65536",
                                      "127.0.0.1:-1",
                                      "::1:9464",
                                      "[::1]9464",
                                      "",
                                      "[]:80",
                                      NULL};
    static const char *const cmds[][3] = {
        {"append", NULL, NULL}, {"subscribe", NULL, NULL}, {"subscribe-to", "--log-stream", "1"},
        {"bench", NULL, NULL},  {"demo", NULL, NULL},
    };
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
        for (const char *const *b = bad; *b; b++) {
            const char *argv[9] = {VARLOG_CLI_PROGRAM, "-q", cmds[c][0], "--metrics-listen", *b};
            size_t n = 5;
            if (cmds[c][1]) {
                argv[n++] = cmds[c][1];
                argv[n++] = cmds[c][2];
            }
            argv[n] = NULL;
            expect_refused(f, argv, "option --metrics-listen: ");
        }
        expect_refused(
            f,
            (const char *const[]){VARLOG_CLI_PROGRAM, "-q", cmds[c][0], "--metrics-listen", NULL},
            "'--metrics-listen' needs a value");
    }
}

/* A port another socket holds: the command fails with one line once its client is open,
 * before it appends anything. */
static void test_address_in_use_fails(void **state)
{
    fixture_t *f = *state;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, 1), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    char listen_at[64];
    snprintf(listen_at, sizeof listen_at, "127.0.0.1:%d", ntohs(sa.sin_port));
    char *out = NULL;
    const char *argv[] = {VARLOG_CLI_PROGRAM, "-q",      "--mr", f->addr, "append", "--count", "3",
                          "--metrics-listen", listen_at, NULL};
    int st = mproc_run(f->dir, "in-use", argv, "", 30000, &out);
    close(fd);
    char want[128];
    snprintf(want, sizeof want, "varlog-cli append: cannot serve metrics on %s: ", listen_at);
    int lines = 0;
    for (const char *c = out; *c; c++)
        lines += *c == '\n';
    if (st != 1 || lines != 1 || !strstr(out, want) || !strstr(out, "in use"))
        fail_msg("status %d (want 1), output '%s' (want one line: '%s... in use')", st, out, want);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_metrics_404_405_and_closing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_long_running_command_serves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_address_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_address_in_use_fails, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
