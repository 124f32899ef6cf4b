/* Options as written, never abbreviated (issue 23): getopt_long took `--topic 2` before the
 * command for the global `--topics 2`, and `trim` deleted from topic 1. Every long option of
 * every varlog-cli command, of the common set and of varlog-server is refused when given as
 * a prefix of its name; a command's option before the command is refused with where it
 * belongs; --topics/--log-streams with --mr are refused; trim takes no default topic and says
 * what it trims before it deletes; append keeps the input's order. The option tables are the
 * programs' own (cli/commands.c), so a new option is covered without touching this test. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>

#include <cmocka.h>

#include "cli.h"
#include "run_program.h"
#include "server_fixture.h"
#include "varlog/server.h"

#define ARGS(...) ((const char *const[]){"varlog-cli", __VA_ARGS__, NULL})
#define CLI(...) run_program(VARLOG_CLI_PROGRAM, ARGS(__VA_ARGS__), NULL)

typedef server_fixture_t fixture_t;

static int setup(void **state)
{
    return server_fixture_setup(state, 2, 2);
}

static int teardown(void **state)
{
    return server_fixture_teardown(state);
}

/* A refusal: exit status 2, nothing on stdout, every needle on stderr. */
static void expect_refused(const run_result_t *r, const char *what, ...)
{
    if (r->status != 2 || r->out[0] != '\0')
        fail_msg("%s: status %d (want 2), stdout '%s', stderr '%s'", what, r->status, r->out,
                 r->err);
    va_list ap;
    va_start(ap, what);
    for (const char *n; (n = va_arg(ap, const char *));)
        if (!strstr(r->err, n))
            fail_msg("%s: '%s' missing from stderr '%s'", what, n, r->err);
    va_end(ap);
    if (count_lines(r->err) != 1)
        fail_msg("%s: want one line on stderr, got '%s'", what, r->err);
}

/* Whether name is a whole option of opts (a prefix of one option may be another's name). */
static bool is_whole_name(const struct option *opts, const char *name, size_t len)
{
    for (const struct option *o = opts; o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return true;
    return false;
}

/* Runs `PROGRAM [before...] --PREFIX[=1] [after...]` for every proper prefix of every option
 * of opts and expects each refused as unknown. Returns the number of runs. */
static int refuse_prefixes(const char *program, const char *prog_name, const char *before,
                           const struct option *opts, const struct option *also_whole)
{
    int runs = 0;
    for (const struct option *o = opts; o->name; o++) {
        size_t len = strlen(o->name);
        for (size_t k = 1; k < len; k++) {
            if (is_whole_name(opts, o->name, k) ||
                (also_whole && is_whole_name(also_whole, o->name, k)))
                continue;
            char opt[64], want[96];
            snprintf(opt, sizeof opt, "--%.*s%s", (int)k, o->name,
                     o->has_arg == no_argument ? "" : "=1");
            snprintf(want, sizeof want, "unknown option '%s'", opt);
            const char *args[] = {prog_name, before, opt, NULL};
            if (!before) {
                args[1] = opt;
                args[2] = NULL;
            }
            run_result_t r = run_program(program, args, NULL);
            char what[160];
            snprintf(what, sizeof what, "%s %s %s", prog_name, before ? before : "", opt);
            expect_refused(&r, what, want, NULL);
            run_result_free(&r);
            runs++;
        }
    }
    return runs;
}

/* Every option of every command, given after the command as a prefix of its name. The
 * commands parse before they open anything, so no run reaches a cluster. */
static void test_command_options_are_matched_whole(void **state)
{
    (void)state;
    int runs = 0;
    for (size_t i = 0; i < cli_command_count; i++)
        runs += refuse_prefixes(VARLOG_CLI_PROGRAM, "varlog-cli", cli_commands[i].name,
                                cli_commands[i].options, cli_common_options);
    /* the common options, before any command */
    runs += refuse_prefixes(VARLOG_CLI_PROGRAM, "varlog-cli", NULL, cli_common_options, NULL);
    assert_true(runs > 100); /* the tables were read */
}

/* varlog-server's options, from its --help (its table is its main's own). */
static void test_server_options_are_matched_whole(void **state)
{
    (void)state;
    run_result_t help = run_program(VARLOG_SERVER_PROGRAM,
                                    (const char *const[]){"varlog-server", "--help", NULL}, NULL);
    assert_int_equal(help.status, 0);
    struct option opts[17] = {{0}};
    char names[16][32];
    size_t n = 0;
    for (const char *p = help.out; (p = strstr(p, "--")) && n < 16; p += 2) {
        size_t len = strspn(p + 2, "abcdefghijklmnopqrstuvwxyz-");
        if (len < 2 || len >= sizeof names[0] || is_whole_name(opts, p + 2, len))
            continue;
        memcpy(names[n], p + 2, len);
        names[n][len] = '\0';
        opts[n] = (struct option){names[n], required_argument, NULL, 0};
        opts[++n] = (struct option){0};
    }
    run_result_free(&help);
    assert_true(n >= 5); /* listen, topics, log-streams, max-bytes, refuse-when-full, help */
    assert_true(refuse_prefixes(VARLOG_SERVER_PROGRAM, "varlog-server", NULL, opts, NULL) > 20);
}

/* The run: `--topic 2` before trim was taken for --topics, and topic 1 was trimmed.
 * Now refused, saying where --topic goes, and topic 1 is whole afterwards. */
static void test_command_option_before_command(void **state)
{
    fixture_t *f = *state;
    run_result_t r = CLI("--mr", f->addr, "append", "--topic", "1", "--count", "10");
    assert_int_equal(r.status, 0);
    run_result_free(&r);

    r = CLI("--mr", f->addr, "--topic", "2", "trim", "--until", "5");
    expect_refused(&r, "--topic before trim", "'--topic' is an option of the trim command",
                   "after the command name", NULL);
    run_result_free(&r);
    r = CLI("--mr", f->addr, "--top", "2", "peek");
    expect_refused(&r, "--top before peek", "unknown option '--top'", "--topic", NULL);
    run_result_free(&r);
    r = CLI("--mr", f->addr, "--topic=2", "subscribe", "--end", "now");
    expect_refused(&r, "--topic=2 before subscribe", "is an option of the subscribe command", NULL);
    run_result_free(&r);

    /* nothing was trimmed from topic 1 */
    r = CLI("--mr", f->addr, "subscribe", "--topic", "1", "--end", "now", "--count");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "10\n");
    run_result_free(&r);
}

/* --topics and --log-streams shape the embedded server: with --mr they would do nothing. */
static void test_embedded_shape_refused_with_mr(void **state)
{
    fixture_t *f = *state;
    run_result_t r = CLI("--mr", f->addr, "peek", "--topics", "2");
    expect_refused(&r, "peek --topics with --mr", "--topics", "no effect with --mr", NULL);
    run_result_free(&r);
    r = CLI("--topics", "2", "--mr", f->addr, "peek");
    expect_refused(&r, "--topics before --mr", "--topics", "no effect with --mr", NULL);
    run_result_free(&r);
    r = CLI("--log-streams", "1", "peek", "--mr", f->addr);
    expect_refused(&r, "--log-streams with --mr", "--log-streams", "no effect with --mr", NULL);
    run_result_free(&r);
    /* without --mr they shape the program's own server, before or after the command */
    r = CLI("-q", "topics", "--topics", "2", "--log-streams", "1");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "topic 1\n  log stream 1  appendable\n"
                               "topic 2\n  log stream 2  appendable\n");
    run_result_free(&r);
}

/* trim deletes: it takes no default topic, and says what it trims before it acts. */
static void test_trim_names_its_topic_first(void **state)
{
    fixture_t *f = *state;
    run_result_t r = CLI("--mr", f->addr, "trim", "--until", "5");
    expect_refused(&r, "trim without --topic", "--topic is required", NULL);
    run_result_free(&r);

    r = CLI("--mr", f->addr, "append", "--topic", "2", "--count", "8");
    assert_int_equal(r.status, 0);
    run_result_free(&r);
    r = CLI("--mr", f->addr, "trim", "--topic", "2", "--until", "3");
    assert_int_equal(r.status, 0);
    char want[200];
    snprintf(want, sizeof want, "varlog-cli trim: trimming topic 2 up to GLSN 3 at %s\n", f->addr);
    if (strncmp(r.err, want, strlen(want)) != 0)
        fail_msg("stderr '%s' does not start with '%s'", r.err, want);
    assert_non_null(strstr(r.out, "trimmed topic 2 up to GLSN 3"));
    run_result_free(&r);
}

/* Lines of stdin are stored in their order: increasing GLSNs, one log stream, though the
 * topic has two. With the node's answers delayed, a topic-wide appender would spread the
 * batches over both (the lane with most room), as it does against a real cluster, where the
 * log then held the file's lines out of order; --spread asks for that. */
static void test_append_keeps_input_order(void **state)
{
    fixture_t *f = *state;
    enum { LINES = 3000 };
    char *input = malloc(LINES * 16);
    assert_non_null(input);
    size_t used = 0;
    for (int i = 0; i < LINES; i++)
        used += (size_t)snprintf(input + used, 16, "line-%04d\n", i);
    assert_int_equal(varlog_server_delay(f->srv, "/varlog.snpb.LogIO/Append", 5), VARLOG_OK);
    run_opts_t o = {.input = input};
    run_result_t r = run_program(
        VARLOG_CLI_PROGRAM, ARGS("--mr", f->addr, "append", "--topic", "2", "--positions"), &o);
    assert_int_equal(r.status, 0);
    /* --positions: `GLSN LLSN LS` in callback order, then the summary */
    unsigned long long first_glsn = 0;
    long ls0 = -1;
    const char *p = r.out;
    for (int i = 0; i < LINES; i++) {
        unsigned long long glsn, llsn;
        long ls;
        int n = 0;
        if (sscanf(p, "%llu %llu %ld\n%n", &glsn, &llsn, &ls, &n) != 3)
            fail_msg("line %d of stdout unreadable: '%.40s'", i, p);
        p += n;
        if (i == 0) {
            first_glsn = glsn;
            ls0 = ls;
        }
        if (glsn != first_glsn + (unsigned long long)i || llsn != (unsigned long long)i + 1 ||
            ls != ls0)
            fail_msg("input line %d stored at GLSN %llu LLSN %llu log stream %ld (first: GLSN "
                     "%llu, log stream %ld)",
                     i, glsn, llsn, ls, first_glsn, ls0);
    }
    run_result_free(&r);

    r = run_program(VARLOG_CLI_PROGRAM,
                    ARGS("--mr", f->addr, "append", "--spread", "--log-stream", "1"), &o);
    expect_refused(&r, "--spread with --log-stream", "--spread", NULL);
    run_result_free(&r);
    r = run_program(VARLOG_CLI_PROGRAM,
                    ARGS("--mr", f->addr, "append", "--topic", "2", "--spread", "--batch", "7"),
                    &o);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "appended 3000 records, GLSN "));
    run_result_free(&r);
    free(input);
}

/* The messages a new user read wrong. */
static void test_append_messages(void **state)
{
    fixture_t *f = *state;
    run_result_t r = CLI("--mr", f->addr, "append", "--count", "-5");
    expect_refused(&r, "--count -5", "--count: -5 is too small (at least 1)", NULL);
    run_result_free(&r);
    r = CLI("--mr", f->addr, "append", "--count", "0");
    expect_refused(&r, "--count 0", "--count: 0 is too small (at least 1)", NULL);
    run_result_free(&r);
    r = CLI("--mr", f->addr, "append", "--topic", "1", "--count", "1");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "appended 1 record, GLSN "));
    assert_null(strstr(r.out, ".."));
    run_result_free(&r);
    /* A progress line on a terminal, as bench and subscribe --count draw: the run is
     * interrupted once it shows (a slowed build takes long to append 50m). */
    run_opts_t o = {.stderr_tty = true, .interrupt_after_ms = 1, .interrupt_when = " s  appended "};
    r = run_program(VARLOG_CLI_PROGRAM,
                    ARGS("--mr", f->addr, "append", "--topic", "1", "--count", "50m", "--size",
                         "10", "--batch", "100"),
                    &o);
    if (r.status != 130 || !strstr(r.err, " s  appended "))
        fail_msg("status %d, no progress line on the terminal: '%s'", r.status, r.err);
    run_result_free(&r);
}

/* A -X that gives a property its default value still counts as given (the tail's bound of
 * subscribe.retry.timeout.ms=60000 is the user's, not the tail's for ever). */
static void test_given_properties(void **state)
{
    (void)state;
    cli_ctx_t ctx = {.conf = varlog_conf_new()};
    assert_non_null(ctx.conf);
    ctx.given_properties[ctx.n_given_properties++] = "subscribe.retry.timeout.ms=60000";
    assert_true(cli_property_given(&ctx, "subscribe.retry.timeout.ms"));
    assert_false(cli_property_given(&ctx, "subscribe.retry.timeout"));
    assert_false(cli_property_given(&ctx, "subscribe.retries"));
    varlog_conf_destroy(ctx.conf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_given_properties),
        cmocka_unit_test(test_command_options_are_matched_whole),
        cmocka_unit_test(test_server_options_are_matched_whole),
        cmocka_unit_test_setup_teardown(test_command_option_before_command, setup, teardown),
        cmocka_unit_test_setup_teardown(test_embedded_shape_refused_with_mr, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trim_names_its_topic_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_keeps_input_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_messages, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
