#ifndef VARLOG_CLUSTER_PROC_H
#define VARLOG_CLUSTER_PROC_H

/* A real Varlog cluster for a test program, run through scripts/varlog-cluster.sh: finding
 * the binaries (or the one-line reason why the tests are skipped), starting the cluster,
 * fault injection through the script's subcommands, and stopping it from the teardown, at
 * exit and on SIGTERM/SIGINT/SIGHUP. A SIGKILL of the test is covered by the script's
 * supervisor, which watches this process (--owner-pid). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CLUSTER_MAX_NODES 8
#define CLUSTER_MAX_LS 32

typedef struct cluster_opts {
    const char *name; /* data and logs in <build>/tests/cluster/<name> */
    int sns, rf, mrs, log_streams;
    bool auto_unseal;
} cluster_opts_t;

typedef struct cluster {
    char dir[512];
    char bin[512];
    char mr_addrs[512];
    char admin_addr[64];
    int32_t topic_id;
    int32_t log_streams[CLUSTER_MAX_LS];
    size_t n_log_streams;
    int n_sns, n_mrs;
    char sn_addr[CLUSTER_MAX_NODES][64];
    pid_t sn_pid[CLUSTER_MAX_NODES]; /* index k-1 for storage node k; 0 when down */
    char mr_addr[CLUSTER_MAX_NODES][64];
    pid_t mr_pid[CLUSTER_MAX_NODES];
    bool running;
} cluster_t;

/* NULL when a cluster can be started; otherwise why not, one line saying how to enable
 * the tests. */
const char *cluster_unavailable(void);

/* The test's main: runs the cmocka group, and returns 77 (CTest's SKIP_RETURN_CODE) when
 * the binaries are missing and nothing failed, so CTest reports the program as skipped. */
int cluster_main_result(int cmocka_failures);

/* Applies $CLUSTER_TEST_FILTER (a cmocka test name pattern, e.g. "test_add*") so that one
 * scenario can be rerun alone; call before running the group. */
void cluster_filter_from_env(void);

/* First thing of each test: skip() with the reason (printed once per program) when no
 * cluster can be started. */
void cluster_require(void);

/* Starts a cluster (takes ~25 s, plus ~10 s per log stream); false with the logs' tails
 * printed on failure. */
bool cluster_start(cluster_t *c, const cluster_opts_t *o);

/* Stops it (SIGTERM, SIGKILL after a bound, data removed; logs stay). Idempotent. */
void cluster_stop(cluster_t *c);

/* Runs `varlog-cluster.sh cmd --dir DIR [arg]`, reloads cluster.env; stdout (trimmed) into
 * out when given. Returns the exit status (0 = success). */
int cluster_cmd(cluster_t *c, const char *cmd, const char *arg, char *out, size_t cap);

/* As cluster_cmd, with an option after arg (e.g. "--no-wait"); arg must not be NULL then. */
int cluster_cmd_opt(cluster_t *c, const char *cmd, const char *arg, const char *opt, char *out,
                    size_t cap);

/* Prints the tail of every process's log to stderr: for failures. */
void cluster_show_logs(cluster_t *c);

/* Fails the test (cmocka fail_msg) after showing the logs' tails. */
#define CLUSTER_FAIL(c, ...)                                                                       \
    do {                                                                                           \
        cluster_show_logs(c);                                                                      \
        fail_msg(__VA_ARGS__);                                                                     \
    } while (0)

/* Runs argv (argv[0] a path) with stdin from in (may be NULL: /dev/null), capturing
 * stdout and stderr into out (NUL-terminated, truncated to cap), killing it after
 * timeout_ms. Returns its exit status, 128+signal when killed, -1 when it could not run. */
int cluster_run(const char *const argv[], const char *in, int64_t timeout_ms, char *out,
                size_t cap);

/* Path of a binary of the cluster's bin directory (varlogctl, varlogcli) into buf. */
const char *cluster_tool(const cluster_t *c, const char *name, char *buf, size_t cap);

#endif
