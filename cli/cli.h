#ifndef VARLOG_CLI_H
#define VARLOG_CLI_H

/*
 * varlog-cli: what main.c and the commands (one file each, cli/cmd_<name>.c) share.
 *
 * A command is `int cmd_<name>(cli_ctx_t *ctx, int argc, char **argv)` and returns the
 * process's exit status: 0 success, 1 failure (the cluster could not be reached, an
 * operation failed, a check failed), 2 bad arguments. argv[0] is the command's name and
 * argv[1..argc) its own arguments; the common options (--mr, -X, --topics, --log-streams,
 * -q), before or after the command name, were consumed by main. A command parses its options with
 * getopt_long after cli_getopt_reset, and reports what it refuses through cli_bad_option or
 * cli_usage_error: one line on stderr, exit status 2. `--help`/`-h` prints the command's
 * usage on stdout and returns 0.
 *
 * Errors are printed as one line, `varlog-cli CMD: what failed: why`, on stderr; results go
 * to stdout.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "varlog/admin.h"
#include "varlog/appender.h"
#include "varlog/client.h"
#include "varlog/conf.h"
#include "varlog/error.h"
#include "varlog/server.h"
#include "varlog/subscribe.h"

#include "options.h"

/* Exit statuses. On CLI_EXIT_FAIL stdout carries nothing a script could take for a result
 * (what was done before the failure goes to stderr with the error); CLI_EXIT_INTERRUPTED
 * (SIGINT or SIGTERM cut a finite job short: 128 + SIGINT, as a shell reports a Ctrl-C) marks
 * what stdout holds as partial, and stderr says so. A tail without end stopped by Ctrl-C is
 * no interruption: that is how it ends. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2
#define CLI_EXIT_INTERRUPTED 130

/* How every help states the suffixes of a number that takes them (cli_parse_i64 with
 * allow_suffix; varlog-server's --max-bytes says the same). */
#define CLI_SIZE_SUFFIXES "suffix k, m or g: x1024"

/* Period of the live progress lines on a terminal (subscribe --count, bench). */
#define CLI_PROGRESS_MS 500

/* How long varlog_client_new may take before the client says what it is waiting for. */
#define CLI_OPEN_NOTICE_MS 1000

#define CLI_GIVEN_PROPERTIES_MAX 64

typedef struct cli_ctx {
    const char *prog; /* "varlog-cli" (argv[0]'s base name) */
    const char *cmd;  /* the command's name, set by main before dispatch */
    /* The cluster's metadata repository addresses ("host:port[,host:port]"), as given to
     * --mr; NULL: the command runs against an embedded server started in-process. */
    const char *mr;
    /* Every -X key=value applied, in order; metadata.addresses is set from mr by
     * cli_open_client. Owned by main; cli_open_client opens its client from a copy. */
    varlog_conf_t *conf;
    /* The embedded server's shape when mr is NULL (--topics, --log-streams): topics 1..T,
     * N log streams each. */
    int32_t embedded_topics;
    int32_t embedded_log_streams;
    /* The -X arguments applied ("key=value", argv's own strings), for cli_property_given: a
     * command that picks its own default for a property (a tail's subscribe bound) leaves
     * the user's alone, even when it equals the library's default. */
    const char *given_properties[CLI_GIVEN_PROPERTIES_MAX];
    size_t n_given_properties;
    /* The last of --topics / --log-streams given, or NULL: refused with --mr, where it
     * would do nothing (and was once taken for a command's --topic). */
    const char *embedded_shape_option;
    bool quiet; /* -q: no "using an embedded server" notice */
    /* > 0: the command's --timeout, which also bounds opening the client (open.timeout.ms) */
    int64_t open_timeout_ms;
    /* The command's --metrics-listen HOST:PORT, checked by cli_metrics_listen_option; NULL:
     * no metrics served. */
    const char *metrics_listen;
} cli_ctx_t;

/* Set by SIGINT/SIGTERM once cli_catch_signals was called: long-running commands (a tailing
 * subscribe, bench) poll it, stop cleanly and exit as usual. A second signal kills. A
 * lock-free atomic, not a volatile sig_atomic_t: the handler may run on any thread while
 * bench's and demo's producer threads read it (TSan saw that race). */
extern atomic_int cli_stop_requested;
void cli_catch_signals(void);

/*
 * Opens a client for ctx. With ctx->mr NULL, first starts the embedded server in-process
 * (ctx->embedded_topics topics of ctx->embedded_log_streams log streams, on a free port of
 * 127.0.0.1), says so on stderr (unless ctx->quiet) and gives its address to the client;
 * *srv_out receives it (NULL with --mr). The client is opened from a copy of ctx->conf.
 * Returns CLI_EXIT_OK, or CLI_EXIT_FAIL after printing one line that names the address and
 * the error (nothing is left open then). Release with cli_close_client.
 * The library keeps retrying the metadata repository within open.timeout.ms (10 s; the
 * command's --timeout when ctx->open_timeout_ms is set): past CLI_OPEN_NOTICE_MS a line on
 * stderr says what it waits for (what a TCP connection to the first address says) and how
 * long it may wait (only where open.timeout.ms is longer than CLI_OPEN_NOTICE_MS).
 */
int cli_open_client(cli_ctx_t *ctx, varlog_client_t **out, varlog_server_t **srv_out);

/* Destroys the client, then the embedded server if any. Accepts NULLs. */
void cli_close_client(varlog_client_t *client, varlog_server_t *srv);

/*
 * Opens an admin handle: for ctx->mr the first address of the list (varlog-server and a
 * one-process cluster serve the admin service on that port; a real cluster's admin has an
 * address of its own, given by the command's --admin option as admin_addr), or the embedded
 * server's address when srv is given. Returns CLI_EXIT_OK or CLI_EXIT_FAIL after one line.
 */
int cli_open_admin(cli_ctx_t *ctx, const char *admin_addr, varlog_server_t *srv,
                   varlog_admin_t **out);

/* Whether -X set property name (past CLI_GIVEN_PROPERTIES_MAX -X options: also when its value
 * differs from the library's default). */
bool cli_property_given(const cli_ctx_t *ctx, const char *name);

/* Prints `PROG CMD: <message>` and a newline on stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const cli_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints `PROG CMD: <message>: ERR_NAME: last error text` on stderr; returns CLI_EXIT_FAIL. */
int cli_fail(const cli_ctx_t *ctx, varlog_err_t err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Resets getopt for a command's own parsing (glibc: optind = 0) and silences getopt's own
 * messages: use an optstring starting with ':' and hand '?' and ':' to cli_bad_option. */
void cli_getopt_reset(void);

/* The one-line error for getopt_long's '?' (unknown option) or ':' (missing value); returns
 * CLI_EXIT_USAGE. */
int cli_bad_option(const cli_ctx_t *ctx, int c, char **argv);

/* Parses a whole decimal number within [min, max]; suffixes k, m, g (x1024^n) when
 * allow_suffix. On failure prints `option NAME: 'TEXT' is not ...` (one line) and returns
 * false. */
bool cli_parse_i64(const cli_ctx_t *ctx, const char *name, const char *text, int64_t min,
                   int64_t max, bool allow_suffix, int64_t *out);
bool cli_parse_u64(const cli_ctx_t *ctx, const char *name, const char *text, uint64_t min,
                   uint64_t max, uint64_t *out);

/* A live progress line on stderr, only when stderr is a terminal, so that logs and pipes
 * stay clean: `  1.5 s  WHAT N  R rec/s  M MB/s  pending P`. */
typedef struct cli_progress {
    bool on, drawn;
    int64_t t0, last_t; /* CLOCK_MONOTONIC ns */
    uint64_t last_n;
} cli_progress_t;
void cli_progress_start(cli_progress_t *pr);
/* Whether CLI_PROGRESS_MS passed since the last line (false when the line is off). */
bool cli_progress_due(const cli_progress_t *pr);
void cli_progress_draw(cli_progress_t *pr, const char *what, uint64_t n, uint64_t pending,
                       size_t size);
/* Clears the line, so that what follows starts on a clean line. */
void cli_progress_end(cli_progress_t *pr);

/* one or many by n: "1 topic", "2 topics" */
const char *cli_plural(long long n, const char *one, const char *many);

/* How cli_consume reads a subscription. */
typedef struct cli_consume_opts {
    bool count_only;          /* print nothing per entry */
    uint64_t limit;           /* stop after this many entries; 0 = no limit */
    uint64_t idle_timeout_ms; /* stop once nothing came for this long; 0 = never */
} cli_consume_opts_t;

/*
 * Reads an iterator-form subscription until its end, opts' limit or idle timeout, or
 * cli_stop_requested, printing `GLSN LLSN LS DATA` per entry on stdout (DATA with bytes
 * outside printable ASCII, and '\', escaped as \xNN and \\) unless count_only. *entries
 * receives the number read. Returns CLI_EXIT_OK, or CLI_EXIT_FAIL after one line naming the
 * subscription's error. The caller closes sub.
 */
int cli_consume(cli_ctx_t *ctx, varlog_subscription_t *sub, const cli_consume_opts_t *opts,
                uint64_t *entries);

/* The highest GLSN the topic's log streams hold now (varlog_peek of each; 0 when empty).
 * Returns CLI_EXIT_OK or CLI_EXIT_FAIL after one line. */
int cli_topic_tail(cli_ctx_t *ctx, varlog_client_t *client, int32_t topic, uint64_t *last_glsn);

/* A command: its name, its function, its own long options (matched whole: options.h) and
 * its line in `varlog-cli --help`. */
typedef struct cli_command {
    const char *name;
    int (*run)(cli_ctx_t *ctx, int argc, char **argv);
    const struct option *options;
    const char *summary;
} cli_command_t;

/* Every command, in the order `varlog-cli --help` lists them (commands.c). */
extern const cli_command_t cli_commands[];
extern const size_t cli_command_count;

/* The command named name, or NULL. */
const cli_command_t *cli_command_find(const char *name);

/* The common options (main.c's parse), which come before the command's name or after it. */
enum { CLI_OPT_MR = 256, CLI_OPT_TOPICS, CLI_OPT_LOG_STREAMS };
extern const struct option cli_common_options[];

/* The commands' own options, one table each (their files). */
extern const struct option cli_append_options[];
extern const struct option cli_subscribe_options[];
extern const struct option cli_subscribe_to_options[];
extern const struct option cli_peek_options[];
extern const struct option cli_trim_options[];
extern const struct option cli_topics_options[];
extern const struct option cli_bench_options[];
extern const struct option cli_demo_options[];

/*
 * --metrics-listen HOST:PORT (cli/metrics_http.c), an option of the long-running commands
 * (append, subscribe, subscribe-to, bench, demo): GET /metrics answers with the client's
 * metrics in the Prometheus text format 0.0.4 (varlog_stats_prometheus), served by
 * libmicrohttpd on a thread of its own, bound to that address only; other paths get 404,
 * other methods 405. Its row in a command's table, {"metrics-listen", required_argument,
 * NULL, CLI_OPT_METRICS_LISTEN}, and its help lines:
 */
enum { CLI_OPT_METRICS_LISTEN = 1000 };
#define CLI_METRICS_HELP                                                                           \
    "  --metrics-listen HOST:PORT\n"                                                               \
    "                   serve the client's metrics at http://HOST:PORT/metrics\n"                  \
    "                   while the command runs (Prometheus text format; port 0:\n"                 \
    "                   a free port, printed on stderr; docs/STATISTICS.md lists\n"                \
    "                   the metrics)\n"

/* Checks the option's value (HOST:PORT or [V6]:PORT, the host resolvable, the port 0..65535)
 * and keeps it in ctx->metrics_listen; false after the one-line usage error. */
bool cli_metrics_listen_option(cli_ctx_t *ctx, const char *text);

typedef struct cli_metrics cli_metrics_t;

/* With ctx->metrics_listen set, serves client's metrics on it (after the client is open) and
 * says on stderr where (`PROG CMD: serving metrics at http://HOST:PORT/metrics`, the port
 * bound when 0 was asked for); *out NULL otherwise. Returns CLI_EXIT_OK, or CLI_EXIT_FAIL
 * after one line saying why the address could not be served (in use, not local). */
int cli_metrics_start(const cli_ctx_t *ctx, varlog_client_t *client, cli_metrics_t **out);

/* Stops serving: returns once the server's thread ended, a request in progress answered;
 * call it before the client is destroyed. Accepts NULL and *m NULL; clears *m. */
void cli_metrics_stop(cli_metrics_t **m);

/* The commands. */
int cmd_append(cli_ctx_t *ctx, int argc, char **argv);
int cmd_subscribe(cli_ctx_t *ctx, int argc, char **argv);
int cmd_subscribe_to(cli_ctx_t *ctx, int argc, char **argv);
int cmd_peek(cli_ctx_t *ctx, int argc, char **argv);
int cmd_trim(cli_ctx_t *ctx, int argc, char **argv);
int cmd_topics(cli_ctx_t *ctx, int argc, char **argv);
int cmd_bench(cli_ctx_t *ctx, int argc, char **argv);
int cmd_demo(cli_ctx_t *ctx, int argc, char **argv);

#endif
