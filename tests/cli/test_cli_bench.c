/* varlog-cli bench, the built program, against the embedded server it starts itself (no
 * --mr): the --json summary parsed with cJSON (every record appended, no error, the
 * latency percentiles ordered and counted, the appender settings given on the command line
 * in effect, the subscribe phase reading back every record), the text summary, no progress
 * line when stderr is not a terminal, --help, and bad arguments (exit status 2, one line).
 * Against a server this test starts (--mr), with records made to fail by its fault
 * injection: the --json summary is still printed, counting the failures, and the exit
 * status is 1. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "run_program.h"
#include "server_fixture.h"
#include "test_support.h"
#include "varlog/server.h"

/* What one run of the program gave: run_program.h's result (status, stdout, stderr). */
typedef run_result_t run_t;

static void run_free(run_t *r)
{
    run_result_free(r);
}

/* Runs the program with args (NULL-terminated, without argv[0]), stdin empty, collecting
 * stdout and stderr; killed, failing the test, after 120 s. */
static run_t run_cli_v(const char *const *args)
{
    const char *argv[32];
    size_t argc = 0;
    argv[argc++] = "varlog-cli";
    for (size_t i = 0; args[i]; i++) {
        assert_true(argc < 31);
        argv[argc++] = args[i];
    }
    argv[argc] = NULL;
    run_opts_t o = {.timeout_ms = 120000};
    return run_program(VARLOG_CLI_PROGRAM, argv, &o);
}

#define RUN_CLI(...) run_cli_v((const char *const[]){__VA_ARGS__, NULL})

static double num(const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!cJSON_IsNumber(v))
        fail_msg("JSON field '%s' missing or not a number", name);
    return v->valuedouble;
}

static const cJSON *obj(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsObject(v))
        fail_msg("JSON field '%s' missing or not an object", name);
    return v;
}

static cJSON *parse_summary_status(const run_t *r, int status)
{
    if (r->status != status)
        fail_msg("exit status %d (want %d), stdout: '%s', stderr: %s", r->status, status, r->out,
                 r->err);
    cJSON *root = cJSON_Parse(r->out);
    if (!root)
        fail_msg("stdout is not JSON: %s", r->out);
    /* one object, one line */
    assert_non_null(strchr(r->out, '\n'));
    assert_int_equal(strchr(r->out, '\n')[1], '\0');
    return root;
}

static cJSON *parse_summary(const run_t *r)
{
    cJSON *root = parse_summary_status(r, 0);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "ok")));
    return root;
}

static void check_append(const cJSON *root, double count, double size)
{
    assert_true(num(root, "record_size") == size);
    const cJSON *a = obj(root, "append");
    assert_true(num(a, "sent") == count);
    assert_true(num(a, "appended") == count);
    assert_true(num(a, "failed") == 0);
    assert_true(num(a, "bytes") == count * size);
    assert_true(num(a, "elapsed_s") > 0);
    assert_true(num(a, "records_per_s") > 0);
    assert_true(num(a, "mb_per_s") > 0);
    assert_true(num(a, "queue_full") >= 0);
    assert_true(num(a, "cpu_us_per_record") > 0);
    const cJSON *e = obj(a, "errors");
    assert_true(num(e, "NOT_APPENDED") == 0);
    assert_true(num(e, "MAYBE_APPENDED") == 0);
    const cJSON *kinds = cJSON_GetObjectItemCaseSensitive(e, "by_error");
    assert_true(cJSON_IsArray(kinds));
    assert_int_equal(cJSON_GetArraySize(kinds), 0);
    const cJSON *l = obj(a, "latency_us");
    /* every call's callback timed once, percentiles in order */
    assert_true(num(l, "count") == count);
    assert_true(num(l, "min") > 0);
    assert_true(num(l, "min") <= num(l, "p50"));
    assert_true(num(l, "p50") <= num(l, "p90"));
    assert_true(num(l, "p90") <= num(l, "p99"));
    assert_true(num(l, "p99") <= num(l, "p99_9"));
    assert_true(num(l, "p99_9") <= num(l, "max"));
    assert_true(num(l, "mean") >= num(l, "min") && num(l, "mean") <= num(l, "max"));
    assert_true(num(l, "relative_error") > 0 && num(l, "relative_error") < 0.02);
}

static void test_bench_json(void **state)
{
    (void)state;
    run_t r = RUN_CLI("bench", "--count", "20000", "--json");
    cJSON *root = parse_summary(&r);
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(root, "mode");
    assert_true(cJSON_IsString(mode));
    assert_string_equal(mode->valuestring, "append");
    const cJSON *cluster = cJSON_GetObjectItemCaseSensitive(root, "cluster");
    assert_true(cJSON_IsString(cluster));
    assert_string_equal(cluster->valuestring, "embedded");
    assert_true(num(root, "producers") == 1);
    check_append(root, 20000, 100);
    assert_null(cJSON_GetObjectItemCaseSensitive(root, "subscribe"));
    /* stderr is a pipe: no progress line, only the embedded server's notice */
    assert_null(strchr(r.err, '\r'));
    assert_non_null(strstr(r.err, "embedded"));
    cJSON_Delete(root);
    run_free(&r);
}

/* --batch, --linger and --depth reach the appender's configuration; both phases; several
 * producers sharing one count. */
static void test_bench_both(void **state)
{
    (void)state;
    run_t r = RUN_CLI("-q", "bench", "--mode", "both", "--count", "5000", "--size", "64", "--batch",
                      "100", "--linger", "1", "--depth", "4", "--producers", "3", "--json");
    cJSON *root = parse_summary(&r);
    assert_true(num(root, "batch_max_records") == 100);
    assert_true(num(root, "linger_ms") == 1);
    assert_true(num(root, "pipeline_depth") == 4);
    assert_true(num(root, "producers") == 3);
    check_append(root, 5000, 64);
    const cJSON *s = obj(root, "subscribe");
    assert_true(num(s, "entries") == 5000);
    assert_true(num(s, "bytes") == 5000 * 64);
    assert_true(num(s, "entries_per_s") > 0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(s, "error")));
    assert_string_equal(r.err, ""); /* -q: not even the notice */
    cJSON_Delete(root);
    run_free(&r);
}

/* subscribe alone on an empty topic appends what it will read first. */
static void test_bench_subscribe_only(void **state)
{
    (void)state;
    run_t r = RUN_CLI("-q", "bench", "--mode", "subscribe", "--count", "3000", "--json");
    cJSON *root = parse_summary(&r);
    assert_null(cJSON_GetObjectItemCaseSensitive(root, "append"));
    assert_true(num(obj(root, "subscribe"), "entries") == 3000);
    cJSON_Delete(root);
    run_free(&r);
}

static void test_bench_text(void **state)
{
    (void)state;
    run_t r = RUN_CLI("-q", "bench", "--count", "2000", "--rate", "20000");
    if (r.status != 0)
        fail_msg("exit status %d, stderr: %s", r.status, r.err);
    const char *want[] = {"2000 of 2000 records appended",
                          "records/s",
                          "MB/s",
                          "errors:    0 (NOT_APPENDED 0, MAYBE_APPENDED 0)",
                          "queue full",
                          "us per record",
                          "p50",
                          "p90",
                          "p99",
                          "p99.9",
                          "max",
                          "rate limit"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(r.out, want[i]))
            fail_msg("'%s' missing from: %s", want[i], r.out);
    /* The limit holds: 2000 records at 20000/s cannot take less than 0.1 s, less the 1 ms
     * pacing step (printed to 2 decimals). */
    const char *in = strstr(r.out, "records appended in ");
    assert_non_null(in);
    double secs = strtod(in + strlen("records appended in "), NULL);
    if (secs < 0.095)
        fail_msg("2000 records at 20000/s took %.3f s: %s", secs, r.out);
    run_free(&r);
}

/* The server the failure tests run against: 1 topic of 2 log streams, no fault set. */
static int setup_server(void **state)
{
    return server_fixture_setup(state, 1, 2);
}

/* A failed run's JSON: "ok": false, every accepted call settled, and each failure counted
 * once by outcome and by error (all of them NOT_APPENDED with error err here). Returns the
 * records that failed. */
static double check_failed_run(const run_t *r, const cJSON *root, const char *err)
{
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(root, "ok")));
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(root, "interrupted")));
    const cJSON *a = obj(root, "append");
    double sent = num(a, "sent"), appended = num(a, "appended"), failed = num(a, "failed");
    if (!(failed > 0) || sent != appended + failed || num(a, "unsettled") != 0)
        fail_msg("sent %g, appended %g, failed %g, unsettled %g: %s", sent, appended, failed,
                 num(a, "unsettled"), r->out);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(a, "refused")));
    const cJSON *e = obj(a, "errors");
    assert_true(num(e, "NOT_APPENDED") == failed);
    assert_true(num(e, "MAYBE_APPENDED") == 0);
    assert_true(num(e, "other") == 0);
    const cJSON *kinds = cJSON_GetObjectItemCaseSensitive(e, "by_error");
    assert_true(cJSON_IsArray(kinds));
    assert_int_equal(cJSON_GetArraySize(kinds), 1);
    const cJSON *k = cJSON_GetArrayItem(kinds, 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(k, "outcome")->valuestring,
                        "NOT_APPENDED");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(k, "error")->valuestring, err);
    assert_true(num(k, "records") == failed);
    const cJSON *first = cJSON_GetObjectItemCaseSensitive(e, "first");
    assert_true(cJSON_IsString(first) && first->valuestring[0]);
    /* every call's latency taken, the failed ones too */
    assert_true(num(obj(a, "latency_us"), "count") == sent);
    /* stderr still says what was done */
    if (!strstr(r->err, "failed; ") || !strstr(r->err, err))
        fail_msg("stderr does not say what failed: %s", r->err);
    return failed;
}

/* Every record fails: both log streams sealed, the topic has no appendable one, one attempt
 * each (append.retries=0: by default that is retried until appender.delivery.timeout.ms). */
static void test_bench_json_all_failed(void **state)
{
    server_fixture_t *f = *state;
    assert_int_equal(varlog_server_seal(f->srv, 1, 1), VARLOG_OK);
    assert_int_equal(varlog_server_seal(f->srv, 1, 2), VARLOG_OK);
    run_t r =
        RUN_CLI("--mr", f->addr, "-X", "append.retries=0", "bench", "--count", "500", "--json");
    cJSON *root = parse_summary_status(&r, 1);
    assert_true(check_failed_run(&r, root, "ERR_NO_LOG_STREAM") == 500);
    assert_true(num(obj(root, "append"), "appended") == 0);
    cJSON_Delete(root);
    run_free(&r);
    /* the text form keeps stdout empty on failure: nothing a script could take for a result */
    r = RUN_CLI("--mr", f->addr, "-X", "append.retries=0", "bench", "--count", "500");
    assert_int_equal(r.status, 1);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "500 failed"));
    run_free(&r);
}

/* Some records fail, the rest are appended: one AppendRequest refused as sealed. */
static void test_bench_json_some_failed(void **state)
{
    server_fixture_t *f = *state;
    assert_int_equal(varlog_server_fail_next(f->srv, "/varlog.snpb.LogIO/Append", 9, "sealed", 1),
                     VARLOG_OK);
    run_t r =
        RUN_CLI("--mr", f->addr, "-X", "append.retries=0", "bench", "--count", "5000", "--json");
    cJSON *root = parse_summary_status(&r, 1);
    double failed = check_failed_run(&r, root, "ERR_SEALED");
    assert_true(failed < 5000);
    assert_true(num(obj(root, "append"), "appended") == 5000 - failed);
    assert_true(varlog_server_request_count(f->srv, "/varlog.snpb.LogIO/Append") > 1);
    cJSON_Delete(root);
    run_free(&r);
}

static void test_bench_help(void **state)
{
    (void)state;
    run_t r = RUN_CLI("bench", "--help");
    assert_int_equal(r.status, 0);
    const char *opts[] = {"--mode",     "--size",  "--batch", "--linger", "--depth", "--producers",
                          "--duration", "--count", "--rate",  "--topic",  "--json"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (!strstr(r.out, opts[i]))
            fail_msg("'%s' missing from the help: %s", opts[i], r.out);
    assert_string_equal(r.err, "");
    run_free(&r);
}

static void expect_usage(const char *const *args, const char *needle)
{
    run_t r = run_cli_v(args);
    assert_int_equal(r.status, 2);
    assert_string_equal(r.out, "");
    /* one line, saying what */
    char *nl = strchr(r.err, '\n');
    assert_non_null(nl);
    assert_int_equal(nl[1], '\0');
    if (!strstr(r.err, needle))
        fail_msg("'%s' missing from: %s", needle, r.err);
    run_free(&r);
}

static void test_bench_bad_arguments(void **state)
{
    (void)state;
    expect_usage((const char *const[]){"bench", "--mode", "fast", NULL}, "--mode");
    expect_usage((const char *const[]){"bench", "--count", "5", "--duration", "1", NULL},
                 "exclude");
    expect_usage((const char *const[]){"bench", "--size", "0", NULL}, "--size");
    expect_usage((const char *const[]){"bench", "--batch", "x", NULL}, "--batch");
    expect_usage((const char *const[]){"bench", "--depth", "65", NULL}, "--depth");
    expect_usage((const char *const[]){"bench", "--rate", "-1", NULL}, "--rate");
    expect_usage((const char *const[]){"bench", "--producers", NULL}, "--producers");
    expect_usage((const char *const[]){"bench", "--nope", NULL}, "--nope");
    expect_usage((const char *const[]){"bench", "extra", NULL}, "extra");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bench_json),
        cmocka_unit_test(test_bench_both),
        cmocka_unit_test(test_bench_subscribe_only),
        cmocka_unit_test(test_bench_text),
        cmocka_unit_test(test_bench_help),
        cmocka_unit_test(test_bench_bad_arguments),
        cmocka_unit_test_setup_teardown(test_bench_json_all_failed, setup_server,
                                        server_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_bench_json_some_failed, setup_server,
                                        server_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
