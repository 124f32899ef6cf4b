#ifndef VARLOG_TEST_METRICS_UTIL_H
#define VARLOG_TEST_METRICS_UTIL_H

/*
 * What the tests of varlog-cli's --metrics-listen share (tests/metrics): programs run in the
 * background with their output in files of a scratch directory, a plain HTTP/1.0 client (no
 * curl, no HTTP library: what a scraper sends, and nothing the code under test shares), and
 * the Prometheus tools found on PATH, with the one-line skip where they are missing, which
 * fails instead under CI=true.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A program started by mproc_start: stdout and stderr go to DIR/NAME.out and DIR/NAME.err;
 * stdin is a pipe of ours when asked for, /dev/null otherwise. */
typedef struct mproc {
    pid_t pid;  /* 0 once reaped */
    int pidfd;  /* readable once the program exited */
    int in_fd;  /* our end of its stdin, -1 when closed or not piped */
    int status; /* exit status once reaped; -1 when killed by a signal */
    char name[64];
    char out_path[512], err_path[512];
} mproc_t;

/* A scratch directory under the build tree (METRICS_WORKDIR), created; the path is static
 * storage of the caller's (cap bytes). */
void metrics_workdir(char *path, size_t cap, const char *test_name);

/* Removes dir and what it holds (rm -rf). */
void metrics_workdir_remove(const char *dir);

/* stdin_from for a pipe of ours (mproc_write, mproc_close_stdin). */
#define MPROC_STDIN_PIPE "|"

/* Starts argv[0] with argv; its stdin: /dev/null for stdin_from NULL, a pipe of ours for
 * MPROC_STDIN_PIPE, else the file stdin_from. The program gets SIGKILL should this process
 * die first (a test killed at its timeout leaves nothing running). */
void mproc_start(mproc_t *p, const char *dir, const char *name, const char *const *argv,
                 const char *stdin_from);

/* Runs argv to its end (bounded by timeout_ms, then killed and the test failed) with input
 * as its stdin (written to DIR/NAME.in); returns its exit status, *output (optional,
 * malloc'ed) its stdout and stderr, in that order. */
int mproc_run(const char *dir, const char *name, const char *const *argv, const char *input,
              int64_t timeout_ms, char **output);

/* Writes all of data to the program's stdin (fails the test when it cannot). */
void mproc_write(mproc_t *p, const char *data, size_t len);

/* Closes the program's stdin: its end of input. */
void mproc_close_stdin(mproc_t *p);

/* Waits up to timeout_ms for the program to exit (on its own, or after sig when sig != 0,
 * sent first); SIGKILL once that passed. Returns its exit status, -1 when a signal ended it
 * (our SIGKILL included); 0 is never returned for a killed program. Reaps it. */
int mproc_stop(mproc_t *p, int sig, int64_t timeout_ms);

/* Whether it is still running (not reaped). */
bool mproc_running(const mproc_t *p);

/* SIGKILL and reap when still running: the teardown's net. */
void mproc_kill(mproc_t *p);

/* What the program wrote to stdout / stderr so far, malloc'ed and NUL-terminated. */
char *mproc_stdout(const mproc_t *p);
char *mproc_stderr(const mproc_t *p);

/* Waits up to timeout_ms for varlog-cli's `serving metrics at http://127.0.0.1:PORT/metrics`
 * line on the program's stderr and returns PORT; fails the test (with its stderr) otherwise,
 * also when it exited first. */
int mproc_metrics_port(mproc_t *p, int64_t timeout_ms);

/* Prints the last bytes of the program's stderr and stdout on stderr (for a failure). */
void mproc_dump(const mproc_t *p);

/* A test's teardown: kills every program of procs[0..n) still running, after printing what
 * it wrote (the test failed while it ran), then removes dir when none was running, else
 * says on stderr where their output stays. */
void mproc_stop_all(mproc_t *procs, size_t n, const char *dir);

/* An HTTP answer. */
typedef struct http_reply {
    int status;    /* 0 when no answer was read (refused, timed out, not HTTP) */
    char *headers; /* the header lines, as received */
    char *body;    /* NUL-terminated */
    size_t body_len;
} http_reply_t;

/* One request to 127.0.0.1:port over HTTP/1.0 (the server closes after the answer), bounded by
 * timeout_ms. target is the request target as sent (escape it: metrics_url_escape). Returns
 * false, with reply->status 0, when no whole answer came. */
bool http_request(int port, const char *method, const char *target, int64_t timeout_ms,
                  http_reply_t *reply);
void http_reply_free(http_reply_t *r);

/* The value of header name (case-insensitive) into out; false when absent. */
bool http_header(const http_reply_t *r, const char *name, char *out, size_t cap);

/* s percent-encoded for a query string into out. */
void metrics_url_escape(const char *s, char *out, size_t cap);

/* The program's full path: the environment variable env_name when set, else name's first
 * executable on PATH; NULL when neither. */
const char *metrics_find_program(const char *env_name, const char *name, char *buf, size_t cap);

/* The missing tool's one line: prints `what`, and how to get it, on stderr; then, under
 * CI=true (where scripts/install-deps.sh installed it), fails the test, otherwise skips it
 * (cmocka skip(): the program's exit status becomes 77, CTest's skip code for the test). */
void metrics_skip_or_fail(const char *what);

/* The exit status for main: 77 when every test that ran was skipped and none failed. */
int metrics_main_result(int cmocka_failures);

/* A free TCP port of 127.0.0.1 now (bound, read, closed: another program may take it
 * before the caller binds it, which is unlikely within the test's few seconds). */
int metrics_free_port(void);

/* The sum of the sample values of name's series in a Prometheus text exposition whose labels
 * contain every "label=\"value\"" of matchers (NULL-terminated; NULL for none). */
double metrics_sum(const char *exposition, const char *name, const char *const *matchers);

#endif
