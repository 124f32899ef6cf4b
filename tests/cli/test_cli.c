/* varlog-cli, the built program, run as a user would against an embedded server this test
 * starts (--mr 127.0.0.1:PORT): what each command prints and its exit status. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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

/* Runs VARLOG_CLI_PROGRAM with argv (NULL-terminated, without argv[0]), feeding input (may be NULL:
 * stdin is empty), collecting stdout and stderr. Bounded: a run that takes more than 60 s is killed
 * and fails the test. */
static run_t run_cli_v(const char *input, const char *const *args)
{
    const char *argv[32];
    size_t argc = 0;
    argv[argc++] = "varlog-cli";
    for (size_t i = 0; args[i]; i++) {
        assert_true(argc < 31);
        argv[argc++] = args[i];
    }
    argv[argc] = NULL;
    run_opts_t o = {.input = input};
    return run_program(VARLOG_CLI_PROGRAM, argv, &o);
}

#define RUN_CLI(input, ...) run_cli_v((input), (const char *const[]){__VA_ARGS__, NULL})

typedef server_fixture_t fixture_t;

static int setup(void **state)
{
    return server_fixture_setup(state, 2, 2);
}

static int teardown(void **state)
{
    return server_fixture_teardown(state);
}

static void test_help(void **state)
{
    (void)state;
    run_t r = RUN_CLI(NULL, "--help");
    assert_int_equal(r.status, 0);
    const char *cmds[] = {"append", "subscribe", "subscribe-to", "peek",
                          "trim",   "topics",    "bench",        "demo"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        assert_non_null(strstr(r.out, cmds[i]));
        /* One layout for every command (issue 20): the usage line naming the command, its
         * continuation lines, then text and options indented by two spaces, no blank line,
         * nothing wider than 80 columns. */
        run_t c = RUN_CLI(NULL, cmds[i], "--help");
        char head[64];
        snprintf(head, sizeof head, "usage: varlog-cli [OPTIONS] %s ", cmds[i]);
        if (c.status != 0 || strncmp(c.out, head, strlen(head)) != 0 || strstr(c.out, "\n\n"))
            fail_msg("%s --help: status %d, layout:\n%s", cmds[i], c.status, c.out);
        for (const char *line = c.out; *line;) {
            const char *nl = strchr(line, '\n');
            size_t len = nl ? (size_t)(nl - line) : strlen(line);
            if (len > 80 || (line != c.out && strncmp(line, "  ", 2) != 0))
                fail_msg("%s --help: line '%.*s'", cmds[i], (int)len, line);
            line += len + (nl ? 1 : 0);
        }
        run_free(&c);
    }
    run_free(&r);
}

/* Each refusal: exit status 2, one line on stderr, nothing on stdout, no server needed. */
static void expect_usage_error(const char *const *args, const char *needle)
{
    run_t r = run_cli_v(NULL, args);
    if (r.status != 2 || count_lines(r.err) != 1 || r.out[0] != '\0' ||
        (needle && !strstr(r.err, needle)))
        fail_msg("args '%s ...': status %d, stderr '%s', stdout '%s'", args[0], r.status, r.err,
                 r.out);
    run_free(&r);
}

static void test_bad_arguments(void **state)
{
    fixture_t *f = *state;
    expect_usage_error((const char *const[]){NULL}, "no command");
    expect_usage_error((const char *const[]){"frobnicate", NULL}, "frobnicate");
    expect_usage_error((const char *const[]){"--bogus", "topics", NULL}, "--bogus");
    expect_usage_error((const char *const[]){"--mr", NULL}, "--mr");
    expect_usage_error((const char *const[]){"-X", "no.such.property=1", "topics", NULL},
                       "no.such.property");
    expect_usage_error((const char *const[]){"-X", "append.retries=1000", "topics", NULL},
                       "append.retries");
    expect_usage_error((const char *const[]){"-X", "novalue", "topics", NULL}, "novalue");
    expect_usage_error((const char *const[]){"--mr", f->addr, "append", "--bogus", NULL},
                       "--bogus");
    expect_usage_error((const char *const[]){"--mr", f->addr, "append", "--topic", "0", NULL},
                       "--topic");
    expect_usage_error((const char *const[]){"--mr", f->addr, "append", "--topic", NULL},
                       "--topic");
    expect_usage_error((const char *const[]){"--mr", f->addr, "subscribe", "--begin", "x1", NULL},
                       "x1");
    expect_usage_error(
        (const char *const[]){"--mr", f->addr, "subscribe", "--begin", "5", "--end", "5", NULL},
        "--begin");
    expect_usage_error((const char *const[]){"--mr", f->addr, "subscribe-to", NULL},
                       "--log-stream");
    expect_usage_error((const char *const[]){"--mr", f->addr, "trim", "--topic", "1", NULL},
                       "--until");
    /* trim deletes: it takes no default topic */
    expect_usage_error((const char *const[]){"--mr", f->addr, "trim", "--until", "5", NULL},
                       "--topic is required");
    expect_usage_error((const char *const[]){"--mr", f->addr, "peek", "extra", NULL}, "extra");
    expect_usage_error((const char *const[]){"--mr", f->addr, "topics", "-z", NULL}, "-z");
    /* Common options after the command are checked as before it. */
    expect_usage_error((const char *const[]){"topics", "--mr", NULL}, "--mr");
    expect_usage_error((const char *const[]){"topics", "-X", "novalue", NULL}, "novalue");
    expect_usage_error((const char *const[]){"topics", "--log-streams=x", NULL}, "x");
}

static void test_unreachable_cluster(void **state)
{
    (void)state;
    /* An address that certainly refuses: a server's port after the server went away. */
    varlog_server_t *gone = NULL;
    varlog_server_opts_t opts = {.topics = 1, .log_streams_per_topic = 1};
    assert_int_equal(varlog_server_start(&opts, &gone), VARLOG_OK);
    char addr[64];
    snprintf(addr, sizeof addr, "%s", varlog_server_address(gone));
    varlog_server_destroy(gone);

    const char *cmds[] = {"topics", "append", "subscribe", "peek"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        /* Past a second, one line says what it waits for and how long it may (issue 20);
         * then the failure, one line naming the address and the error. */
        char waiting[256];
        snprintf(waiting, sizeof waiting,
                 "waiting for the metadata repository at %s (connection refused); retrying for "
                 "up to 2000 ms",
                 addr);
        run_t r = RUN_CLI("x\n", "--mr", addr, "-X", "open.timeout.ms=2000", cmds[i]);
        const char *last = strrchr(r.err, '\n') ? memrchr(r.err, '\n', strlen(r.err) - 1) : NULL;
        if (r.status != 1 || !strstr(r.err, waiting) || count_lines(r.err) != 2 || !last ||
            !strstr(last, addr) || !strstr(last, "ERR_") || r.out[0])
            fail_msg("%s: status %d, stderr '%s'", cmds[i], r.status, r.err);
        run_free(&r);
        /* The same options after the command: the same cluster, not an embedded server. */
        r = RUN_CLI("x\n", cmds[i], "--mr", addr, "-Xopen.timeout.ms=2000");
        if (r.status != 1 || !strstr(r.err, waiting) || count_lines(r.err) != 2)
            fail_msg("%s --mr after: status %d, stderr '%s'", cmds[i], r.status, r.err);
        run_free(&r);
    }
}

/* Parses subscribe's lines ("GLSN LLSN LS DATA") into arrays; returns the count. */
static size_t parse_entries(const char *out, uint64_t *glsn, uint64_t *llsn, int *ls, char **data,
                            size_t cap)
{
    size_t n = 0;
    const char *p = out;
    while (*p && n < cap) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        int off = 0;
        unsigned long long g, l;
        assert_int_equal(sscanf(p, "%llu %llu %d %n", &g, &l, &ls[n], &off), 3);
        glsn[n] = g;
        llsn[n] = l;
        data[n] = strndup(p + off, (size_t)(nl - p - off));
        n++;
        p = nl + 1;
    }
    assert_true(*p == '\0');
    return n;
}

static void test_append_and_subscribe(void **state)
{
    fixture_t *f = *state;
    /* Stdin lines, one record each; empty lines skipped; through the pipelined appender
     * over both log streams of topic 2. */
    const char *input = "alpha\nbravo\n\ncharlie\ndelta\\x\necho\n";
    run_t r = RUN_CLI(input, "--mr", f->addr, "append", "--topic", "2");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "appended 5 records, GLSN 1..5"));
    run_free(&r);
    /* Generated, through varlog_append, in batches of 4. */
    r = RUN_CLI(NULL, "--mr", f->addr, "append", "--topic", "2", "--count", "20", "--size", "10",
                "--sync", "--batch", "4");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "appended 20 records, GLSN 6..25"));
    run_free(&r);

    r = RUN_CLI(NULL, "--mr", f->addr, "subscribe", "--topic", "2", "--count");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "25\n");
    run_free(&r);
    /* Topic 1 is empty: nothing to count. */
    r = RUN_CLI(NULL, "--mr", f->addr, "subscribe", "--topic", "1", "--count");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "0\n");
    run_free(&r);

    /* Every entry once, in GLSN order, with its data; the stdin records first. */
    r = RUN_CLI(NULL, "--mr", f->addr, "subscribe", "--topic", "2", "--end", "26");
    assert_int_equal(r.status, 0);
    uint64_t glsn[32], llsn[32];
    int ls[32];
    char *data[32];
    size_t n = parse_entries(r.out, glsn, llsn, ls, data, 32);
    assert_int_equal(n, 25);
    const char *want[] = {"alpha", "bravo", "charlie", "delta\\\\x", "echo"};
    uint64_t llsn_next[8] = {0};
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(glsn[i], i + 1);
        /* topic 2's log streams are 3 and 4; each one's LLSNs are dense from 1 */
        assert_true(ls[i] == 3 || ls[i] == 4);
        assert_int_equal(llsn[i], ++llsn_next[ls[i]]);
        if (i < 5)
            assert_string_equal(data[i], want[i]);
        else
            assert_int_equal(strlen(data[i]), 10);
        free(data[i]);
    }
    run_free(&r);

    /* --begin, --limit; then subscribe-to one log stream by LLSN. */
    r = RUN_CLI(NULL, "--mr", f->addr, "subscribe", "--topic", "2", "--begin", "3", "--limit", "2");
    assert_int_equal(r.status, 0);
    n = parse_entries(r.out, glsn, llsn, ls, data, 32);
    assert_int_equal(n, 2);
    assert_int_equal(glsn[0], 3);
    assert_string_equal(data[0], "charlie");
    assert_int_equal(glsn[1], 4);
    free(data[0]);
    free(data[1]);
    run_free(&r);

    char count3[32];
    snprintf(count3, sizeof count3, "%" PRIu64 "\n", llsn_next[3]);
    r = RUN_CLI(NULL, "--mr", f->addr, "subscribe-to", "--topic", "2", "--log-stream", "3",
                "--count");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, count3);
    run_free(&r);
    r = RUN_CLI(NULL, "--mr", f->addr, "subscribe-to", "--topic", "2", "--log-stream", "3", "--end",
                "3");
    assert_int_equal(r.status, 0);
    n = parse_entries(r.out, glsn, llsn, ls, data, 32);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(llsn[i], i + 1);
        assert_int_equal(ls[i], 3);
        free(data[i]);
    }
    run_free(&r);
}

static void test_peek_trim(void **state)
{
    fixture_t *f = *state;
    run_t r = RUN_CLI(NULL, "--mr", f->addr, "append", "--topic", "1", "--log-stream", "1",
                      "--count", "10", "--positions");
    assert_int_equal(r.status, 0);
    assert_int_equal(count_lines(r.out), 11); /* one per record and the summary */
    assert_non_null(strstr(r.out, "1 1 1\n"));
    assert_non_null(strstr(r.out, "10 10 1\n"));
    run_free(&r);

    r = RUN_CLI(NULL, "--mr", f->addr, "peek", "--topic", "1");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "topic=1 log_stream=1 first_glsn=1 first_llsn=1 last_glsn=10 "
                               "last_llsn=10 complete=true\n"
                               "topic=1 log_stream=2 first_glsn=0 first_llsn=0 last_glsn=0 "
                               "last_llsn=0 complete=true\n");
    run_free(&r);

    r = RUN_CLI(NULL, "--mr", f->addr, "trim", "--topic", "1", "--until", "4");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "trimmed topic 1 up to GLSN 4; its first entry is now GLSN 5\n");
    run_free(&r);

    r = RUN_CLI(NULL, "--mr", f->addr, "peek", "--topic", "1", "--log-stream", "1");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "topic=1 log_stream=1 first_glsn=5 first_llsn=5 last_glsn=10 "
                               "last_llsn=10 complete=true\n");
    run_free(&r);

    /* Reading the trimmed range fails, naming the error; past it, the rest is there. */
    r = RUN_CLI(NULL, "--mr", f->addr, "subscribe", "--topic", "1", "--count");
    if (r.status != 1 || !strstr(r.err, "ERR_TRIMMED") || count_lines_but_open_notice(r.err) != 1)
        fail_msg("status %d, want 1 and one line naming ERR_TRIMMED; stderr '%s'", r.status, r.err);
    run_free(&r);
    r = RUN_CLI(NULL, "--mr", f->addr, "subscribe", "--topic", "1", "--begin", "5", "--count");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "6\n");
    run_free(&r);
}

static void test_topics(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(varlog_server_seal(f->srv, 2, 4), VARLOG_OK);
    run_t r = RUN_CLI(NULL, "--mr", f->addr, "topics");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "topic 1\n"
                               "  log stream 1  appendable\n"
                               "  log stream 2  appendable\n"
                               "topic 2\n"
                               "  log stream 3  appendable\n"
                               "  log stream 4  not-appendable\n");
    run_free(&r);
    r = RUN_CLI(NULL, "--mr", f->addr, "topics", "--admin");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "topic 1  RUNNING\n"
                               "  log stream 1  RUNNING  replicas 1\n"
                               "  log stream 2  RUNNING  replicas 1\n"
                               "topic 2  RUNNING\n"
                               "  log stream 3  RUNNING  replicas 1\n"
                               "  log stream 4  SEALED  replicas 1\n");
    run_free(&r);
    assert_int_equal(varlog_server_unseal(f->srv, 2, 4), VARLOG_OK);
}

/* Without --mr: an embedded server in the program itself, announced on stderr. */
static void test_embedded(void **state)
{
    (void)state;
    run_t r = RUN_CLI(NULL, "--topics", "3", "--log-streams", "1", "topics");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.err, "embedded server"));
    assert_string_equal(r.out, "topic 1\n  log stream 1  appendable\n"
                               "topic 2\n  log stream 2  appendable\n"
                               "topic 3\n  log stream 3  appendable\n");
    run_free(&r);
    r = RUN_CLI(NULL, "-q", "append", "--count", "1000", "--batch", "10");
    assert_int_equal(r.status, 0);
    assert_quiet_but_open_notice(r.err);
    assert_string_equal(r.out, "appended 1000 records, GLSN 1..1000\n");
    run_free(&r);
    /* Common options after the command, whole names only: --topic stays append's own. */
    r = RUN_CLI(NULL, "topics", "--topics=2", "--log-streams", "2", "--quiet");
    assert_int_equal(r.status, 0);
    assert_quiet_but_open_notice(r.err);
    assert_string_equal(r.out, "topic 1\n  log stream 1  appendable\n  log stream 2  appendable\n"
                               "topic 2\n  log stream 3  appendable\n  log stream 4  appendable\n");
    run_free(&r);
    r = RUN_CLI(NULL, "append", "--topics", "2", "--topic", "2", "-q", "--count", "10");
    assert_int_equal(r.status, 0);
    assert_quiet_but_open_notice(r.err);
    assert_string_equal(r.out, "appended 10 records, GLSN 1..10\n");
    run_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
        cmocka_unit_test(test_unreachable_cluster),
        cmocka_unit_test_setup_teardown(test_append_and_subscribe, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peek_trim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topics, setup, teardown),
        cmocka_unit_test(test_embedded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
