/* varlog-cli subscribe through a storage node outage (issue 23): a tail waits for ever and
 * prints one line on stderr when it starts reconnecting and one when it is back; -X
 * subscribe.retry.timeout.ms bounds it (then the error names the bound); a range keeps the
 * library's bound; --help says so. Against an embedded server this test starts (--mr ADDR)
 * and breaks: stopped and restarted, its Subscribe calls failed until the faults are
 * cleared. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>

#include <cmocka.h>

#include "run_program.h"
#include "test_support.h"
#include "varlog/client.h"
#include "varlog/conf.h"
#include "varlog/server.h"

#define ARGS(...) ((const char *const[]){"varlog-cli", __VA_ARGS__, NULL})
#define CLI(...) run_program(VARLOG_CLI_PROGRAM, ARGS(__VA_ARGS__), NULL)
#define CLI_OPTS(opts, ...) run_program(VARLOG_CLI_PROGRAM, ARGS(__VA_ARGS__), (opts))

#define PATH_SUBSCRIBE "/varlog.snpb.LogIO/Subscribe"
#define GRPC_UNAVAILABLE 14
#define INJECTED "injected unavailable"
#define WAIT_MS 30000

typedef struct fixture {
    varlog_server_t *srv;
    const char *addr;
    varlog_client_t *client; /* appends the entries the CLI reads */
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    varlog_server_opts_t opts = {.topics = 1, .log_streams_per_topic = 1};
    if (!f || varlog_server_start(&opts, &f->srv) != VARLOG_OK)
        return -1;
    f->addr = varlog_server_address(f->srv);
    varlog_conf_t *conf = varlog_conf_new();
    char errstr[256];
    if (!conf ||
        varlog_conf_set(conf, "metadata.addresses", f->addr, errstr, sizeof errstr) != VARLOG_OK ||
        varlog_conf_set(conf, "append.retries", "50", errstr, sizeof errstr) != VARLOG_OK ||
        varlog_client_new(&conf, &f->client, errstr, sizeof errstr) != VARLOG_OK) {
        varlog_conf_destroy(conf);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    varlog_client_destroy(f->client);
    varlog_server_destroy(f->srv);
    free(f);
    return 0;
}

static varlog_err_t append_n(fixture_t *f, int n)
{
    for (int i = 0; i < n; i++) {
        char data[32];
        int len = snprintf(data, sizeof data, "entry-%d", i);
        varlog_record_t rec = {.data = data, .len = (size_t)len};
        varlog_err_t err = varlog_append(f->client, 1, &rec, 1, 10000, NULL, NULL);
        if (err != VARLOG_OK)
            return err;
    }
    return VARLOG_OK;
}

static int count_of(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void expect_in(const char *what, const char *text, const char *needle)
{
    if (!strstr(text, needle))
        fail_msg("'%s' missing from %s '%s'", needle, what, text);
}

/* ---- the outage, from another thread while the CLI runs ----------------------------------- */

/* Failing Subscribe calls the outage lasts after the restart: more than a count bound of the
 * old library's size allowed (subscribe.retries 10: the break and 10 failed reopenings), so a
 * count put back in the library ends the tail inside the outage and fails the test, however
 * fast the machine. The CLI's backoff is capped at OUTAGE_BACKOFF_MAX_MS (-X) so that these
 * calls take about a second, not the default cap's 15 s or more. */
#define OUTAGE_CALLS 25
#define OUTAGE_BACKOFF_MAX_MS "100"

typedef struct outage {
    fixture_t *f;
    pthread_t thread;
    atomic_bool reconnecting; /* the CLI printed its "reconnecting after" line */
    atomic_bool cli_ended;    /* run_program returned */
    atomic_bool failed;
    char why[256];
} outage_t;

typedef struct calls_wait {
    outage_t *o;
    uint64_t calls;
    bool need_line; /* also the CLI's "reconnecting after" line */
} calls_wait_t;

static bool calls_reached(void *arg)
{
    calls_wait_t *w = arg;
    if (atomic_load(&w->o->cli_ended))
        return true;
    return varlog_server_call_count(w->o->f->srv, PATH_SUBSCRIBE) >= w->calls &&
           (!w->need_line || atomic_load(&w->o->reconnecting));
}

/* Waits (bounded) until the CLI made `calls` Subscribe calls (and, with need_line, printed
 * that it reconnects); false when it did not or the CLI ended first. */
static bool await_calls(outage_t *o, uint64_t calls, bool need_line)
{
    calls_wait_t w = {o, calls, need_line};
    return test_wait_until(calls_reached, &w, WAIT_MS) && !atomic_load(&o->cli_ended);
}

/* Once the CLI tails: the node restarts, and its Subscribe calls keep failing until the CLI
 * made OUTAGE_CALLS of them and said it is reconnecting (the events, not a time: the CLI
 * looks at the subscription's health every 200 ms, however long that takes here); then it
 * serves again and 3 more entries are appended. */
static void *outage_run(void *arg)
{
    outage_t *o = arg;
    fixture_t *f = o->f;
    const char *step = "waiting for the CLI's first Subscribe";
    uint64_t base = 0;
    if (await_calls(o, 1, false)) {
        step = "stopping or restarting the server";
        base = varlog_server_call_count(f->srv, PATH_SUBSCRIBE);
        if (varlog_server_fail_next(f->srv, PATH_SUBSCRIBE, GRPC_UNAVAILABLE, INJECTED, 1000000) ==
                VARLOG_OK &&
            varlog_server_stop(f->srv) == VARLOG_OK && varlog_server_restart(f->srv) == VARLOG_OK) {
            step = "waiting for the CLI's failing Subscribe calls and its reconnecting line";
            if (await_calls(o, base + OUTAGE_CALLS, true)) {
                varlog_server_clear_faults(f->srv);
                step = "appending after the outage";
                if (append_n(f, 3) == VARLOG_OK)
                    return NULL;
            }
        }
    }
    uint64_t calls = varlog_server_call_count(f->srv, PATH_SUBSCRIBE) - base;
    snprintf(o->why, sizeof o->why, "%s (%s; %llu Subscribe calls since the restart, %d wanted)",
             step, atomic_load(&o->cli_ended) ? "the CLI ended" : "timed out",
             (unsigned long long)calls, OUTAGE_CALLS);
    atomic_store(&o->failed, true);
    return NULL;
}

/* A tail (no --end) through a restart and OUTAGE_CALLS failing calls: every entry, once, one
 * line when it starts reconnecting (saying it waits for ever and what failed, where) and one
 * when it is back; Ctrl-C then ends it with status 0. */
static void test_tail_through_outage(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(append_n(f, 3), VARLOG_OK);
    outage_t o = {.f = f};
    atomic_init(&o.reconnecting, false);
    atomic_init(&o.cli_ended, false);
    atomic_init(&o.failed, false);
    assert_int_equal(pthread_create(&o.thread, NULL, outage_run, &o), 0);
    run_opts_t opts = {.interrupt_when = "back after",
                       .interrupt_after_ms = 1,
                       .timeout_ms = 2 * WAIT_MS,
                       .notice_when = "reconnecting after",
                       .noticed = &o.reconnecting};
    run_result_t r = CLI_OPTS(&opts, "--mr", f->addr, "-X",
                              "subscribe.retry.backoff.max.ms=" OUTAGE_BACKOFF_MAX_MS, "subscribe",
                              "--topic", "1");
    atomic_store(&o.cli_ended, true);
    pthread_join(o.thread, NULL);
    if (atomic_load(&o.failed))
        fail_msg("the outage's thread failed %s; status %d, stderr '%s'", o.why, r.status, r.err);
    print_message("    stderr: %s", r.err);
    if (r.status != 0)
        fail_msg("status %d, stderr '%s'", r.status, r.err);
    if (count_of(r.err, "reconnecting after") != 1 || count_of(r.err, "back after") != 1)
        fail_msg("want one reconnecting and one back line, stderr '%s'", r.err);
    expect_in("stderr", r.err, "varlog-cli subscribe: reconnecting after ");
    expect_in("stderr", r.err, "log stream 1 at 127.0.0.1:");
    expect_in("stderr", r.err, "(waiting for ever; Ctrl-C stops)");
    expect_in("stderr", r.err, "varlog-cli subscribe: back after ");
    assert_true(strstr(r.err, "reconnecting after") < strstr(r.err, "back after"));
    const char *want = "1 1 1 entry-0\n2 2 1 entry-1\n3 3 1 entry-2\n"
                       "4 4 1 entry-0\n5 5 1 entry-1\n6 6 1 entry-2\n";
    if (strcmp(r.out, want) != 0)
        fail_msg("stdout '%s', want every entry once: '%s'", r.out, want);
    run_result_t again = CLI("--mr", f->addr, "subscribe", "--topic", "1", "--count");
    if (again.status != 0 || strcmp(again.out, "6\n") != 0)
        fail_msg("count after the outage: status %d, '%s'", again.status, again.out);
    run_result_free(&again);
    run_result_free(&r);
}

/* -X subscribe.retry.timeout.ms bounds a tail too: it ends with status 1 and the error names
 * the bound and the last failure. */
static void test_tail_bounded_by_conf(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(
        varlog_server_fail_next(f->srv, PATH_SUBSCRIBE, GRPC_UNAVAILABLE, INJECTED, 1000000),
        VARLOG_OK);
    run_result_t r =
        CLI("--mr", f->addr, "-X", "subscribe.retry.timeout.ms=300", "subscribe", "--topic", "1");
    if (r.status != 1 || r.out[0])
        fail_msg("status %d, stdout '%s', stderr '%s'", r.status, r.out, r.err);
    expect_in("stderr", r.err, "subscribe.retry.timeout.ms 300");
    expect_in("stderr", r.err, INJECTED);
    expect_in("stderr", r.err, "at 127.0.0.1:");
    run_result_free(&r);
}

/* A range (--end) keeps the library's bound: its reconnecting line says it gives up after
 * 60000 ms without progress. */
static void test_range_keeps_library_bound(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(
        varlog_server_fail_next(f->srv, PATH_SUBSCRIBE, GRPC_UNAVAILABLE, INJECTED, 1000000),
        VARLOG_OK);
    run_opts_t opts = {
        .interrupt_when = "reconnecting after", .interrupt_after_ms = 1, .timeout_ms = WAIT_MS};
    run_result_t r = CLI_OPTS(&opts, "--mr", f->addr, "subscribe", "--topic", "1", "--end", "100");
    if (r.status != 130)
        fail_msg("status %d, stderr '%s'", r.status, r.err);
    expect_in("stderr", r.err, "(giving up after 60000 ms without progress)");
    expect_in("stderr", r.err, INJECTED);
    run_result_free(&r);
}

static void test_help_says_so(void **state)
{
    (void)state;
    run_result_t r = CLI("subscribe", "--help");
    assert_int_equal(r.status, 0);
    expect_in("help", r.out, "A tail (no\n  --end, no --count) waits for ever");
    expect_in("help", r.out, "one line on stderr when it starts and one when it is back");
    expect_in("help", r.out, "-X subscribe.retry.timeout.ms=MS");
    run_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tail_through_outage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tail_bounded_by_conf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_range_keeps_library_bound, setup, teardown),
        cmocka_unit_test(test_help_says_so),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
