/* varlog-server, the built program, as a new user meets it (issue 20): a refused argument
 * is one line naming the option and the value (exit 2), as varlog-cli does; --listen says
 * why an address is refused; a port in use is said in our words, without gRPC's own log
 * line; --help states every default, and the defaults are varlog-cli's embedded server's;
 * sizes take varlog-cli's suffixes (k, m, g: x1024), stated the same in every help. */
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>

#include <cmocka.h>

#include "run_program.h"

#define SERVER(...)                                                                                \
    run_program(VARLOG_SERVER_PROGRAM, (const char *const[]){"varlog-server", __VA_ARGS__, NULL},  \
                NULL)
#define CLI(...)                                                                                   \
    run_program(VARLOG_CLI_PROGRAM, (const char *const[]){"varlog-cli", __VA_ARGS__, NULL}, NULL)

/* The words every size option's help uses for the suffixes. */
#define SUFFIX_RULE "suffix k, m or g: x1024"

static void expect_refusal(const char *const *args, const char *needle1, const char *needle2)
{
    run_result_t r = run_program(VARLOG_SERVER_PROGRAM, args, NULL);
    if (r.status != 2 || count_lines(r.err) != 1 || r.out[0] || !strstr(r.err, needle1) ||
        (needle2 && !strstr(r.err, needle2)) || strstr(r.err, "usage:"))
        fail_msg("varlog-server %s %s: status %d, stderr '%s', stdout '%s'", args[1],
                 args[2] ? args[2] : "", r.status, r.err, r.out);
    run_result_free(&r);
}

static void test_bad_arguments(void **state)
{
    (void)state;
#define REFUSED(n1, n2, ...)                                                                       \
    expect_refusal((const char *const[]){"varlog-server", __VA_ARGS__, NULL}, n1, n2)
    REFUSED("--topics", "'abc'", "--topics", "abc");
    REFUSED("--topics", "-1", "--topics", "-1");
    REFUSED("--log-streams", "'2x'", "--log-streams", "2x");
    REFUSED("--max-bytes", "'1q'", "--max-bytes", "1q");
    REFUSED("--bogus", NULL, "--bogus");
    REFUSED("--listen", "needs a value", "--listen");
    REFUSED("'extra'", NULL, "--topics", "1", "extra");
    /* --listen: why, not just INVALID_ARG */
    REFUSED("0.0.0.0:0", "only 127.0.0.1:PORT", "--listen", "0.0.0.0:0");
    REFUSED("localhost:0", "only 127.0.0.1:PORT", "--listen", "localhost:0");
    REFUSED("99999", "out of range", "--listen", "127.0.0.1:99999");
    REFUSED("'x'", "not a number", "--listen", "127.0.0.1:x");
#undef REFUSED
}

/* A port someone else holds: our words, and none of gRPC's lines; with GRPC_VERBOSITY set
 * gRPC's own line comes back (the switch the help names works). */
static void test_port_in_use(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, 1), 0);
    socklen_t len = sizeof sa;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ntohs(sa.sin_port));

    run_result_t r = SERVER("--listen", addr);
    if (r.status != 1 || count_lines(r.err) != 1 || !strstr(r.err, addr) ||
        !strstr(r.err, "address already in use") || strstr(r.err, "chttp2") || r.out[0])
        fail_msg("status %d, stderr '%s'", r.status, r.err);
    run_result_free(&r);

    run_opts_t verbose = {.env = "GRPC_VERBOSITY=ERROR"};
    r = run_program(VARLOG_SERVER_PROGRAM,
                    (const char *const[]){"varlog-server", "--listen", addr, NULL}, &verbose);
    assert_int_equal(r.status, 1);
    if (count_lines(r.err) < 2 || !strstr(r.err, "address already in use"))
        fail_msg("with GRPC_VERBOSITY=ERROR, stderr '%s'", r.err);
    run_result_free(&r);
    close(fd);
}

/* The server test_defaults started: stopped by teardown, also when the test fails. */
static pid_t g_server;

/* Starts varlog-server with args (args[0] is argv[0]) and returns its pid, its address in
 * addr; its stderr (retention lines) is dropped, so that it cannot hold the test's open. */
static pid_t start_server(const char *const *args, char *addr, size_t cap)
{
    int out[2];
    assert_int_equal(pipe(out), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    extern char **environ;
    assert_int_equal(
        posix_spawn(&pid, VARLOG_SERVER_PROGRAM, &fa, NULL, (char *const *)args, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    FILE *f = fdopen(out[0], "r");
    assert_non_null(f);
    assert_non_null(fgets(addr, (int)cap, f));
    fclose(f);
    addr[strcspn(addr, "\n")] = '\0';
    assert_non_null(strstr(addr, "127.0.0.1:"));
    return pid;
}

static int stop_server(pid_t pid)
{
    g_server = 0;
    kill(pid, SIGTERM);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* --help states every default; varlog-server and varlog-cli's embedded server have the same
 * shape by default (1 topic of 2 log streams). */
static void test_defaults(void **state)
{
    (void)state;
    run_result_t r = SERVER("--help");
    assert_int_equal(r.status, 0);
    const char *want[] = {"default 127.0.0.1:9092", "--topics T           topics 1..T (default 1)",
                          "log streams per topic (default 2)",
                          "(default\n                       1g)", SUFFIX_RULE};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(r.out, want[i]))
            fail_msg("'%s' missing from varlog-server --help:\n%s", want[i], r.out);
    run_result_free(&r);
    r = CLI("--help");
    assert_non_null(strstr(r.out, "embedded server: topics 1..T (default 1)"));
    assert_non_null(strstr(r.out, "embedded server: N log streams per topic (default 2)"));
    run_result_free(&r);

    char addr[64];
    pid_t pid = start_server((const char *const[]){"varlog-server", "--listen", "127.0.0.1:0",
                                                   "--max-bytes", "1m", NULL},
                             addr, sizeof addr);
    g_server = pid;
    run_result_t remote = CLI("--mr", addr, "topics");
    run_result_t embedded = CLI("-q", "topics");
    assert_int_equal(remote.status, 0);
    assert_int_equal(embedded.status, 0);
    assert_string_equal(remote.out, "topic 1\n  log stream 1  appendable\n"
                                    "  log stream 2  appendable\n");
    assert_string_equal(remote.out, embedded.out);
    run_result_free(&remote);
    run_result_free(&embedded);
    /* --max-bytes 1m took: 1 MiB holds fewer than 20000 records of 100 B, and retention
     * trims the oldest (the first GLSN left is past 1) */
    r = CLI("--mr", addr, "append", "--count", "20000", "--batch", "100");
    assert_int_equal(r.status, 0);
    run_result_free(&r);
    r = CLI("--mr", addr, "peek", "--log-stream", "1");
    assert_int_equal(r.status, 0);
    /* All 20000 went to log stream 1 (append's first appendable one); what is left of them
     * fits 1 MiB and starts past GLSN 1. */
    unsigned long long first = 0, first_llsn = 0, last = 0, last_llsn = 0;
    if (sscanf(r.out,
               "topic=1 log_stream=1 first_glsn=%llu first_llsn=%llu last_glsn=%llu "
               "last_llsn=%llu",
               &first, &first_llsn, &last, &last_llsn) != 4)
        fail_msg("peek printed no line for log stream 1:\n%s", r.out);
    if (first <= 1 || last != 20000 || (last_llsn - first_llsn + 1) * 100 > 1024 * 1024)
        fail_msg("--max-bytes 1m: log stream 1 holds GLSN %llu..%llu (LLSN %llu..%llu), want a "
                 "first GLSN past 1, the last 20000 and at most 1 MiB of 100-byte records",
                 first, last, first_llsn, last_llsn);
    run_result_free(&r);
    assert_int_equal(stop_server(pid), 0);
}

static int teardown_server(void **state)
{
    (void)state;
    if (g_server > 0)
        stop_server(g_server);
    return 0;
}

/* One rule for sizes: every help that takes a size says it in the same words, and 1k means
 * 1024 everywhere. */
static void test_size_suffixes(void **state)
{
    (void)state;
    const char *cmds[] = {"append", "bench", "demo"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        run_result_t r = CLI(cmds[i], "--help");
        if (r.status != 0 || !strstr(r.out, SUFFIX_RULE))
            fail_msg("varlog-cli %s --help lacks '%s':\n%s", cmds[i], SUFFIX_RULE, r.out);
        run_result_free(&r);
    }
    /* --size 1k: the record stored is 1024 bytes, read back from a server of its own
     * (subscribe prints 'GLSN LLSN LS DATA', the generated data printable) */
    char addr[64];
    pid_t pid = start_server(
        (const char *const[]){"varlog-server", "--listen", "127.0.0.1:0", NULL}, addr, sizeof addr);
    g_server = pid;
    run_result_t r = CLI("--mr", addr, "append", "--count", "1", "--size", "1k", "--positions");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "1 1 1\nappended 1 record, GLSN 1\n");
    run_result_free(&r);
    r = CLI("--mr", addr, "subscribe", "--end", "now");
    assert_int_equal(r.status, 0);
    const char *prefix = "1 1 1 ";
    size_t out_len = strlen(r.out);
    size_t data_len = out_len > strlen(prefix) ? out_len - strlen(prefix) - 1 : 0;
    if (strncmp(r.out, prefix, strlen(prefix)) != 0 ||
        strchr(r.out, '\n') != r.out + strlen(r.out) - 1 || data_len != 1024)
        fail_msg("--size 1k: read back %zu bytes, want one record of 1024:\n%.200s", data_len,
                 r.out);
    run_result_free(&r);
    assert_int_equal(stop_server(pid), 0);
    r = CLI("-q", "append", "--count", "2", "--size", "1q");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, SUFFIX_RULE));
    run_result_free(&r);
    /* 1k records of 1 KiB: 1024 records */
    r = CLI("-q", "append", "--count", "1k", "--size", "1k", "--batch", "64");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "appended 1024 records, GLSN 1..1024\n");
    run_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_port_in_use),
        cmocka_unit_test_teardown(test_defaults, teardown_server),
        cmocka_unit_test_teardown(test_size_suffixes, teardown_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
