#include "cluster_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_support.h"

/* The clusters this process started, for the exit and signal paths. */
#define MAX_CLUSTERS 4
static cluster_t *g_clusters[MAX_CLUSTERS];
/* The stop command of each, built while starting it: the signal path only forks and execs. */
static char *g_stop_argv[MAX_CLUSTERS][5];
static char g_stop_dir[MAX_CLUSTERS][512];
static bool g_hooks_installed;
static bool g_reason_printed;
static bool g_skipped;

static bool executable(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return access(path, X_OK) == 0;
}

const char *cluster_unavailable(void)
{
    static char why[1024];
    const char *bin = getenv("VARLOG_BIN");
    if (bin != NULL && bin[0] != '\0') {
        if (executable(bin, "varlogsn") && executable(bin, "varlogmr") &&
            executable(bin, "varlogadm") && executable(bin, "varlogctl"))
            return NULL;
        snprintf(why, sizeof(why),
                 "cluster tests skipped: VARLOG_BIN=%s holds no Varlog v0.30 binaries "
                 "(varlogmr, varlogsn, varlogadm, varlogctl); point it at a Varlog bin directory",
                 bin);
        return why;
    }
    if (executable(VARLOG_SOURCE_DIR "/../shared/varlog", "unpack"))
        return NULL;
    snprintf(why, sizeof(why),
             "cluster tests skipped: no Varlog binaries; to run them set VARLOG_BIN=DIR (a Varlog "
             "v0.30 bin directory) or provide ../shared/varlog next to the repository");
    return why;
}

/* CI=true: the machine is meant to run the cluster tests (.ci/run starts them only where
 * ../shared/varlog is), so binaries that cannot be found are a failure there, not a skip that
 * CTest and make test-cluster would report as a success. */
static bool under_ci(void)
{
    const char *ci = getenv("CI");
    return ci != NULL && strcmp(ci, "true") == 0;
}

void cluster_require(void)
{
    const char *why = cluster_unavailable();
    if (why == NULL)
        return;
    if (under_ci())
        fail_msg("%s (CI=true: failed, not skipped)", why);
    g_skipped = true;
    if (!g_reason_printed) {
        g_reason_printed = true;
        fprintf(stderr, "%s\n", why);
    }
    skip();
}

void cluster_filter_from_env(void)
{
    const char *f = getenv("CLUSTER_TEST_FILTER");
    if (f != NULL && f[0] != '\0')
        cmocka_set_test_filter(f);
}

int cluster_main_result(int cmocka_failures)
{
    if (cmocka_failures == 0 && g_skipped)
        return under_ci() ? 1 : 77;
    return cmocka_failures;
}

/* ---- running programs -------------------------------------------------------------------- */

static void close_inherited_fds(void)
{
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536)
        max = 65536;
    for (int fd = 3; fd < max; fd++)
        close(fd);
}

int cluster_run(const char *const argv[], const char *in, int64_t timeout_ms, char *out, size_t cap)
{
    int outp[2], inp[2] = {-1, -1};
    if (pipe2(outp, O_CLOEXEC) != 0)
        return -1;
    if (in != NULL && pipe2(inp, O_CLOEXEC) != 0) {
        close(outp[0]);
        close(outp[1]);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        dup2(in != NULL ? inp[0] : devnull, 0);
        dup2(outp[1], 1);
        dup2(outp[1], 2);
        close_inherited_fds();
        execv(argv[0], (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(outp[1]);
    if (in != NULL) {
        close(inp[0]);
        /* Inputs are small (a pipe buffer holds them): write all, then EOF. */
        size_t len = strlen(in), off = 0;
        while (off < len) {
            ssize_t w = write(inp[1], in + off, len - off);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
        close(inp[1]);
    }
    size_t used = 0;
    char sink[4096];
    int64_t deadline = test_now_ms() + timeout_ms;
    bool killed = false;
    for (;;) {
        int64_t left = deadline - test_now_ms();
        if (left <= 0 && !killed) {
            kill(pid, SIGKILL);
            killed = true;
            left = 5000;
        }
        struct pollfd p = {.fd = outp[0], .events = POLLIN};
        int r = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        char *dst = sink;
        size_t room = sizeof(sink);
        if (out != NULL && used + 1 < cap) {
            dst = out + used;
            room = cap - 1 - used;
        }
        ssize_t n = read(outp[0], dst, room);
        if (n <= 0)
            break;
        if (dst != sink)
            used += (size_t)n;
    }
    close(outp[0]);
    if (out != NULL && cap > 0)
        out[used] = '\0';
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

/* ---- the exit and signal paths ------------------------------------------------------------- */

static void stop_from_signal_path(int i)
{
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, 0);
        execv(g_stop_argv[i][0], g_stop_argv[i]);
        _exit(127);
    }
    if (pid > 0) {
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    }
}

static void on_fatal_signal(int sig)
{
    for (int i = 0; i < MAX_CLUSTERS; i++)
        if (g_clusters[i] != NULL)
            stop_from_signal_path(i);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void stop_all_at_exit(void)
{
    for (int i = 0; i < MAX_CLUSTERS; i++)
        if (g_clusters[i] != NULL)
            cluster_stop(g_clusters[i]);
}

static void install_hooks(void)
{
    if (g_hooks_installed)
        return;
    g_hooks_installed = true;
    atexit(stop_all_at_exit);
    struct sigaction sa = {.sa_handler = on_fatal_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

static int slot_of(const cluster_t *c)
{
    for (int i = 0; i < MAX_CLUSTERS; i++)
        if (g_clusters[i] == c)
            return i;
    return -1;
}

/* ---- cluster.env ------------------------------------------------------------------------------
 */

/* KEY='value' lines, the value's quotes stripped ('\'' inside stands for one quote). */
static bool env_get(const char *text, const char *key, char *val, size_t cap)
{
    size_t klen = strlen(key);
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *nl = strchr(line, '\n');
        if (strncmp(line, key, klen) == 0 && line[klen] == '=') {
            const char *p = line + klen + 1, *end = nl != NULL ? nl : line + strlen(line);
            size_t n = 0;
            bool quoted = false;
            while (p < end && n + 1 < cap) {
                if (*p == '\'') {
                    if (quoted && strncmp(p, "'\\''", 4) == 0) {
                        val[n++] = '\'';
                        p += 4;
                        continue;
                    }
                    quoted = !quoted;
                    p++;
                    continue;
                }
                val[n++] = *p++;
            }
            val[n] = '\0';
            return true;
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
    if (cap > 0)
        val[0] = '\0';
    return false;
}

static long env_long(const char *text, const char *fmt, int k)
{
    char key[64], val[64];
    snprintf(key, sizeof(key), fmt, k);
    env_get(text, key, val, sizeof(val));
    return strtol(val, NULL, 10);
}

static bool load_env(cluster_t *c)
{
    char path[600], text[16384];
    snprintf(path, sizeof(path), "%s/cluster.env", c->dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    char val[512];
    env_get(text, "VARLOG_BIN", c->bin, sizeof(c->bin));
    env_get(text, "VARLOG_MR_ADDRS", c->mr_addrs, sizeof(c->mr_addrs));
    env_get(text, "VARLOG_ADMIN_ADDR", c->admin_addr, sizeof(c->admin_addr));
    c->topic_id = (int32_t)env_long(text, "VARLOG_TOPIC_ID", 0);
    env_get(text, "VARLOG_LOG_STREAMS", val, sizeof(val));
    c->n_log_streams = 0;
    for (char *s = val, *tok; (tok = strtok_r(s, ",", &s)) != NULL;)
        if (c->n_log_streams < CLUSTER_MAX_LS)
            c->log_streams[c->n_log_streams++] = (int32_t)strtol(tok, NULL, 10);
    c->n_sns = (int)env_long(text, "VARLOG_SN_COUNT", 0);
    c->n_mrs = (int)env_long(text, "VARLOG_MR_COUNT", 0);
    for (int k = 1; k <= c->n_sns && k <= CLUSTER_MAX_NODES; k++) {
        char key[64];
        snprintf(key, sizeof(key), "VARLOG_SN_%d_ADDR", k);
        env_get(text, key, c->sn_addr[k - 1], sizeof(c->sn_addr[0]));
        c->sn_pid[k - 1] = (pid_t)env_long(text, "VARLOG_SN_%d_PID", k);
    }
    for (int k = 1; k <= c->n_mrs && k <= CLUSTER_MAX_NODES; k++) {
        char key[64];
        snprintf(key, sizeof(key), "VARLOG_MR_%d_ADDR", k);
        env_get(text, key, c->mr_addr[k - 1], sizeof(c->mr_addr[0]));
        c->mr_pid[k - 1] = (pid_t)env_long(text, "VARLOG_MR_%d_PID", k);
    }
    return env_long(text, "VARLOG_READY", 0) == 1;
}

/* ---- the script -------------------------------------------------------------------------------
 */

static int script(cluster_t *c, const char *const extra[], char *out, size_t cap,
                  int64_t timeout_ms)
{
    const char *argv[32];
    size_t n = 0;
    argv[n++] = VARLOG_CLUSTER_SCRIPT;
    for (size_t i = 0; extra[i] != NULL && n < 28; i++)
        argv[n++] = extra[i];
    argv[n++] = "--dir";
    argv[n++] = c->dir;
    argv[n] = NULL;
    char *buf = out;
    char local[8192];
    if (buf == NULL) {
        buf = local;
        cap = sizeof(local);
    }
    int rc = cluster_run(argv, NULL, timeout_ms, buf, cap);
    if (rc != 0)
        fprintf(stderr, "varlog-cluster.sh %s failed (%d):\n%s\n", extra[0], rc, buf);
    return rc;
}

bool cluster_start(cluster_t *c, const cluster_opts_t *o)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->dir, sizeof(c->dir), "%s/%s", VARLOG_CLUSTER_WORKDIR, o->name);
    install_hooks();
    int slot = -1;
    for (int i = 0; i < MAX_CLUSTERS && slot < 0; i++)
        if (g_clusters[i] == NULL)
            slot = i;
    if (slot < 0)
        return false;
    snprintf(g_stop_dir[slot], sizeof(g_stop_dir[slot]), "%s", c->dir);
    g_stop_argv[slot][0] = (char *)VARLOG_CLUSTER_SCRIPT;
    g_stop_argv[slot][1] = (char *)"stop";
    g_stop_argv[slot][2] = (char *)"--dir";
    g_stop_argv[slot][3] = g_stop_dir[slot];
    g_stop_argv[slot][4] = NULL;
    g_clusters[slot] = c;

    char sns[16], rf[16], mrs[16], lss[16], owner[32];
    snprintf(sns, sizeof(sns), "%d", o->sns);
    snprintf(rf, sizeof(rf), "%d", o->rf);
    snprintf(mrs, sizeof(mrs), "%d", o->mrs > 0 ? o->mrs : 1);
    snprintf(lss, sizeof(lss), "%d", o->log_streams);
    snprintf(owner, sizeof(owner), "%ld", (long)getpid());
    const char *args[] = {"start",
                          "--sns",
                          sns,
                          "--rf",
                          rf,
                          "--mrs",
                          mrs,
                          "--log-streams",
                          lss,
                          "--owner-pid",
                          owner,
                          "--unpack-dir",
                          VARLOG_UNPACK_DIR,
                          o->auto_unseal ? "--auto-unseal" : NULL,
                          NULL};
    int64_t t0 = test_now_ms();
    c->running = true; /* from here on, stop has something to do even if start fails */
    char out[16384];
    if (script(c, args, out, sizeof(out), 300000) != 0 || !load_env(c)) {
        cluster_show_logs(c);
        cluster_stop(c);
        return false;
    }
    fprintf(stderr, "cluster %s: %d MR, %d SN (RF %d), log streams %zu, started in %.1f s\n",
            o->name, c->n_mrs, c->n_sns, o->rf, c->n_log_streams,
            (double)(test_now_ms() - t0) / 1000.0);
    return true;
}

void cluster_stop(cluster_t *c)
{
    int slot = slot_of(c);
    if (c->running) {
        const char *args[] = {"stop", NULL};
        script(c, args, NULL, 0, 60000);
        c->running = false;
    }
    if (slot >= 0)
        g_clusters[slot] = NULL;
}

int cluster_cmd(cluster_t *c, const char *cmd, const char *arg, char *out, size_t cap)
{
    return cluster_cmd_opt(c, cmd, arg, NULL, out, cap);
}

int cluster_cmd_opt(cluster_t *c, const char *cmd, const char *arg, const char *opt, char *out,
                    size_t cap)
{
    const char *args[] = {cmd, arg, opt, NULL};
    char buf[16384];
    int rc = script(c, args, buf, sizeof(buf), 180000);
    load_env(c);
    if (out != NULL && cap > 0) {
        /* The script's own lines go to stderr, which shares the pipe; the answer (an id)
         * is the last line. */
        size_t len = strlen(buf);
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
            buf[--len] = '\0';
        const char *last = strrchr(buf, '\n');
        snprintf(out, cap, "%s", last != NULL ? last + 1 : buf);
    }
    return rc;
}

void cluster_show_logs(cluster_t *c)
{
    const char *args[] = {VARLOG_CLUSTER_SCRIPT, "logs", "--dir", c->dir, "--lines", "40", NULL};
    char *buf = malloc(1 << 20);
    if (buf == NULL)
        return;
    cluster_run(args, NULL, 30000, buf, 1 << 20);
    fprintf(stderr, "%s\n", buf);
    free(buf);
}

const char *cluster_tool(const cluster_t *c, const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", c->bin, name);
    return buf;
}
