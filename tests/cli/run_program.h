#ifndef VARLOG_TEST_RUN_PROGRAM_H
#define VARLOG_TEST_RUN_PROGRAM_H

/* Runs a built program (varlog-cli, varlog-server) as a user would and collects what it
 * printed: for the tests of what a new user sees (test_cli_ux.c, test_server_tool.c). */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct run_opts {
    const char *input;          /* stdin's bytes; NULL: empty */
    bool stderr_tty;            /* stderr on a pseudo-terminal instead of a pipe */
    int64_t interrupt_after_ms; /* > 0: SIGINT after this long */
    /* with interrupt_after_ms: SIGINT only once stdout or stderr holds this text (the
     * program got that far), and then after interrupt_after_ms more */
    const char *interrupt_when;
    int64_t timeout_ms; /* killed, failing the test, after this long; 0: 60 s */
    const char *env;    /* "NAME=VALUE" added to the environment, or NULL */
    /* With noticed: *noticed becomes true (from run_program's thread) once stdout or stderr
     * holds this text, for another thread that waits for the program to get that far. */
    const char *notice_when;
    atomic_bool *noticed;
} run_opts_t;

typedef struct run_result {
    int status;         /* exit status; -1 when killed by a signal */
    char *out;          /* stdout, NUL-terminated */
    char *err;          /* stderr (the terminal's output with stderr_tty) */
    int64_t elapsed_ms; /* from start to exit */
} run_result_t;

/* args: NULL-terminated, args[0] is argv[0]. */
run_result_t run_program(const char *path, const char *const *args, const run_opts_t *opts);
void run_result_free(run_result_t *r);

/* Lines in s (a last line without '\n' counts). */
int count_lines(const char *s);

/* As count_lines, leaving out varlog-cli's notice that opening the client took longer than a
 * second ("waiting for the metadata repository at ..."; CLI_OPEN_NOTICE_MS in cli/cli.h): a
 * loaded machine takes that long against a server that is up (test_peek_trim saw it at load
 * 26), so a test counting what a command says of its own result does not count it. */
int count_lines_but_open_notice(const char *s);

/* Fails the test unless err is empty but for that notice. */
void assert_quiet_but_open_notice(const char *err);

#endif
