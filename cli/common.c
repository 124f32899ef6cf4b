/* varlog-cli: what every command uses (opening the client, errors, number parsing). */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

atomic_int cli_stop_requested;

static void on_signal(int sig)
{
    cli_stop_requested = 1;
    /* A second Ctrl-C kills, in case the clean stop hangs. */
    signal(sig, SIG_DFL);
}

void cli_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void prefix(const cli_ctx_t *ctx)
{
    if (ctx->cmd)
        fprintf(stderr, "%s %s: ", ctx->prog, ctx->cmd);
    else
        fprintf(stderr, "%s: ", ctx->prog);
}

int cli_usage_error(const cli_ctx_t *ctx, const char *fmt, ...)
{
    prefix(ctx);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_EXIT_USAGE;
}

int cli_fail(const cli_ctx_t *ctx, varlog_err_t err, const char *fmt, ...)
{
    /* Read before anything else calls the library and replaces it. */
    const char *why = varlog_last_error();
    prefix(ctx);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, ": %s", varlog_err_name(err));
    if (why && why[0])
        fprintf(stderr, ": %s", why);
    else
        fprintf(stderr, " (%s)", varlog_err_str(err));
    fputc('\n', stderr);
    return CLI_EXIT_FAIL;
}

void cli_getopt_reset(void)
{
    optind = 0; /* glibc: re-initialise, so that a second parse starts afresh */
    opterr = 0;
}

int cli_bad_option(const cli_ctx_t *ctx, int c, char **argv)
{
    const char *refused = cli_getopt_refused();
    const char *arg = refused ? refused : optind > 0 ? argv[optind - 1] : "?";
    if (c == ':')
        return cli_usage_error(ctx, "option '%s' needs a value (see --help)", arg);
    bool is_long = arg[0] == '-' && arg[1] == '-';
    if (!refused && optopt && optopt < 256 && !is_long)
        return cli_usage_error(ctx, "unknown option '-%c' (see --help)", optopt);
    const cli_command_t *cmd = ctx->cmd ? cli_command_find(ctx->cmd) : NULL;
    char hint[256] = "";
    if (is_long && cmd)
        cli_option_hint(cmd->options, arg, hint, sizeof hint);
    if (is_long && !hint[0])
        cli_option_hint(cli_common_options, arg, hint, sizeof hint);
    if (hint[0])
        return cli_usage_error(ctx, "unknown option '%s': options are written whole%s", arg, hint);
    return cli_usage_error(ctx, "unknown option '%s' (see --help)", arg);
}

/* The one-line refusal of a number, in the words varlog-server uses too. */
static bool bad_number(const cli_ctx_t *ctx, const char *name, const char *text, bool suffix)
{
    cli_usage_error(ctx, "%s: '%s' is not a whole number%s", name, text,
                    suffix ? " (" CLI_SIZE_SUFFIXES ")" : "");
    return false;
}

bool cli_parse_i64(const cli_ctx_t *ctx, const char *name, const char *text, int64_t min,
                   int64_t max, bool allow_suffix, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (!end || end == text || !(text[0] == '-' || (text[0] >= '0' && text[0] <= '9')))
        return bad_number(ctx, name, text, allow_suffix);
    int shift = 0;
    if (allow_suffix && *end) {
        static const char SUFFIXES[] = "kKmMgG";
        const char *sfx = strchr(SUFFIXES, *end);
        if (sfx && end[1] == '\0') {
            shift = (int)(sfx - SUFFIXES) / 2 * 10 + 10; /* k 10, m 20, g 30 */
            end++;
        }
    }
    if (*end)
        return bad_number(ctx, name, text, allow_suffix);
    bool too_big = (errno == ERANGE && v > 0) || (shift && v > (LLONG_MAX >> shift));
    bool too_small = (errno == ERANGE && v < 0) || (shift && v < (LLONG_MIN >> shift));
    if (!too_big && !too_small)
        v = v * (1LL << shift);
    if (too_big || v > max) {
        cli_usage_error(ctx, "%s: %s is too large (at most %" PRId64 ")", name, text, max);
        return false;
    }
    if (too_small || v < min) {
        cli_usage_error(ctx, "%s: %s is too small (at least %" PRId64 ")", name, text, min);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_u64(const cli_ctx_t *ctx, const char *name, const char *text, uint64_t min,
                   uint64_t max, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (!end || end == text || *end || text[0] < '0' || text[0] > '9')
        return bad_number(ctx, name, text, false);
    if (errno == ERANGE || v > max) {
        cli_usage_error(ctx, "%s: %s is too large (at most %" PRIu64 ")", name, text, max);
        return false;
    }
    if (v < min) {
        cli_usage_error(ctx, "%s: %s is too small (at least %" PRIu64 ")", name, text, min);
        return false;
    }
    *out = v;
    return true;
}

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void cli_progress_start(cli_progress_t *pr)
{
    pr->on = isatty(STDERR_FILENO) == 1;
    pr->t0 = pr->last_t = monotonic_ns();
    pr->last_n = 0;
    pr->drawn = false;
}

bool cli_progress_due(const cli_progress_t *pr)
{
    return pr->on && monotonic_ns() - pr->last_t >= (int64_t)CLI_PROGRESS_MS * 1000000;
}

void cli_progress_draw(cli_progress_t *pr, const char *what, uint64_t n, uint64_t pending,
                       size_t size)
{
    if (!pr->on)
        return;
    int64_t t = monotonic_ns();
    double dt = (double)(t - pr->last_t) / 1e9;
    double rate = dt > 0 ? (double)(n - pr->last_n) / dt : 0;
    fprintf(stderr, "\r\033[K%6.1f s  %s %" PRIu64 "  %.0f rec/s  %.2f MB/s  pending %" PRIu64,
            (double)(t - pr->t0) / 1e9, what, n, rate, rate * (double)size / 1e6, pending);
    fflush(stderr);
    pr->last_t = t;
    pr->last_n = n;
    pr->drawn = true;
}

void cli_progress_end(cli_progress_t *pr)
{
    if (pr->on && pr->drawn)
        fputs("\r\033[K", stderr);
    pr->drawn = false;
}

bool cli_property_given(const cli_ctx_t *ctx, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < ctx->n_given_properties; i++)
        if (strncmp(ctx->given_properties[i], name, len) == 0 &&
            ctx->given_properties[i][len] == '=')
            return true;
    if (ctx->n_given_properties < CLI_GIVEN_PROPERTIES_MAX)
        return false;
    /* More -X options than recorded: fall back to comparing with the default. */
    varlog_conf_t *fresh = varlog_conf_new();
    char a[64], b[64];
    size_t na = sizeof a, nb = sizeof b;
    bool changed = fresh && varlog_conf_get(ctx->conf, name, a, &na) == VARLOG_OK &&
                   varlog_conf_get(fresh, name, b, &nb) == VARLOG_OK && strcmp(a, b) != 0;
    varlog_conf_destroy(fresh);
    return changed;
}

const char *cli_plural(long long n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

/* What a TCP connection to the first address of list says within 500 ms: the notice's
 * "why" while varlog_client_new keeps retrying, which it does not tell until it gives up. */
static const char *probe_address(const char *list, char *buf, size_t cap)
{
    char host[256];
    size_t len = strcspn(list, ",");
    if (len >= sizeof host)
        return "no answer yet";
    memcpy(host, list, len);
    host[len] = '\0';
    char *colon = strrchr(host, ':');
    if (!colon)
        return "no answer yet";
    *colon = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host, colon + 1, &hints, &ai);
    if (gai != 0) {
        snprintf(buf, cap, "cannot resolve '%.200s': %.200s", host, gai_strerror(gai));
        return buf;
    }
    const char *why = "no answer yet";
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
        int e = rc == 0 ? 0 : errno;
        if (e == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            if (poll(&p, 1, 500) == 1) {
                socklen_t el = sizeof e;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
            } else {
                e = ETIMEDOUT;
            }
        }
        if (e == 0)
            why = "it accepts connections but has not answered as a metadata repository";
        else if (e == ETIMEDOUT)
            why = "no answer to a TCP connection within 500 ms";
        else {
            snprintf(buf, cap, "%s", strerror(e));
            buf[0] = (char)tolower((unsigned char)buf[0]);
            why = buf;
        }
        close(fd);
    }
    freeaddrinfo(ai);
    return why;
}

/* Says on stderr what varlog_client_new waits for once it took a second: it keeps retrying
 * within open.timeout.ms (an MR restarting must not fail an open), which would otherwise be
 * up to 10 s of silence. */
typedef struct open_watch {
    const cli_ctx_t *ctx;
    const char *addr;
    int64_t timeout_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
} open_watch_t;

static void *watch_open(void *arg)
{
    open_watch_t *w = arg;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += CLI_OPEN_NOTICE_MS / 1000;
    pthread_mutex_lock(&w->mu);
    while (!w->done && pthread_cond_timedwait(&w->cv, &w->mu, &dl) == 0) {
    }
    bool done = w->done;
    pthread_mutex_unlock(&w->mu);
    if (done)
        return NULL;
    char buf[512];
    const char *why = probe_address(w->addr, buf, sizeof buf);
    pthread_mutex_lock(&w->mu);
    if (!w->done) {
        prefix(w->ctx);
        fprintf(stderr,
                "waiting for the metadata repository at %s (%s); retrying for up to %" PRId64
                " ms (open.timeout.ms%s; Ctrl-C stops)\n",
                w->addr, why, w->timeout_ms,
                w->ctx->open_timeout_ms > 0 ? ", from --timeout" : "; --timeout MS or -X sets it");
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int cli_open_client(cli_ctx_t *ctx, varlog_client_t **out, varlog_server_t **srv_out)
{
    *out = NULL;
    *srv_out = NULL;
    varlog_server_t *srv = NULL;
    const char *addr = ctx->mr;
    if (!addr) {
        varlog_server_opts_t opts = {
            .topics = ctx->embedded_topics,
            .log_streams_per_topic = ctx->embedded_log_streams,
        };
        varlog_err_t err = varlog_server_start(&opts, &srv);
        if (err != VARLOG_OK)
            return cli_fail(ctx, err, "starting the embedded server");
        addr = varlog_server_address(srv);
        if (!ctx->quiet)
            fprintf(stderr,
                    "%s: no --mr given: using an embedded server at %s (%d %s, %d %s each; its "
                    "log is gone when the command ends)\n",
                    ctx->prog, addr, (int)ctx->embedded_topics,
                    cli_plural(ctx->embedded_topics, "topic", "topics"),
                    (int)ctx->embedded_log_streams,
                    cli_plural(ctx->embedded_log_streams, "log stream", "log streams"));
    }
    varlog_conf_t *conf = varlog_conf_dup(ctx->conf);
    if (!conf) {
        varlog_server_destroy(srv);
        return cli_fail(ctx, VARLOG_ERR_NOMEM, "copying the configuration");
    }
    char errstr[512];
    varlog_err_t err = varlog_conf_set(conf, "metadata.addresses", addr, errstr, sizeof errstr);
    if (err == VARLOG_OK && ctx->open_timeout_ms > 0) {
        char ms[32];
        snprintf(ms, sizeof ms, "%" PRId64,
                 ctx->open_timeout_ms < 3600000 ? ctx->open_timeout_ms : 3600000);
        err = varlog_conf_set(conf, "open.timeout.ms", ms, errstr, sizeof errstr);
    }
    if (err != VARLOG_OK) {
        varlog_conf_destroy(conf);
        varlog_server_destroy(srv);
        prefix(ctx);
        fprintf(stderr, "bad --mr '%s': %s\n", addr, errstr);
        return CLI_EXIT_USAGE;
    }
    char tbuf[32];
    size_t tlen = sizeof tbuf;
    open_watch_t w = {.ctx = ctx, .addr = addr, .timeout_ms = 10000};
    if (varlog_conf_get(conf, "open.timeout.ms", tbuf, &tlen) == VARLOG_OK)
        w.timeout_ms = strtoll(tbuf, NULL, 10);
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    pthread_t watcher;
    /* An open bounded below the notice's delay ends with its failure line first: a notice
     * then would only depend on how slowly the machine ran the watcher. */
    bool watching = !srv && w.timeout_ms > CLI_OPEN_NOTICE_MS &&
                    pthread_create(&watcher, NULL, watch_open, &w) == 0;
    err = varlog_client_new(&conf, out, errstr, sizeof errstr);
    pthread_mutex_lock(&w.mu);
    w.done = true;
    pthread_cond_signal(&w.cv);
    pthread_mutex_unlock(&w.mu);
    if (watching)
        pthread_join(watcher, NULL);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    if (err != VARLOG_OK) {
        varlog_conf_destroy(conf);
        varlog_server_destroy(srv);
        *out = NULL;
        prefix(ctx);
        fprintf(stderr, "cannot reach the cluster at %s: %s: %s\n", addr, varlog_err_name(err),
                errstr[0] ? errstr : varlog_err_str(err));
        return CLI_EXIT_FAIL;
    }
    *srv_out = srv;
    return CLI_EXIT_OK;
}

void cli_close_client(varlog_client_t *client, varlog_server_t *srv)
{
    varlog_client_destroy(client);
    varlog_server_destroy(srv);
}

int cli_open_admin(cli_ctx_t *ctx, const char *admin_addr, varlog_server_t *srv,
                   varlog_admin_t **out)
{
    *out = NULL;
    char first[VARLOG_ADMIN_ADDRESS_MAX];
    const char *addr = admin_addr;
    if (!addr && srv)
        addr = varlog_server_address(srv);
    if (!addr && ctx->mr) {
        size_t len = strcspn(ctx->mr, ",");
        while (len > 0 && ctx->mr[len - 1] == ' ')
            len--;
        const char *p = ctx->mr;
        while (*p == ' ' && len > 0) {
            p++;
            len--;
        }
        if (len >= sizeof first)
            len = sizeof first - 1;
        memcpy(first, p, len);
        first[len] = '\0';
        addr = first;
    }
    if (!addr)
        return cli_usage_error(ctx, "no admin address");
    char errstr[512];
    varlog_err_t err = varlog_admin_new(addr, ctx->conf, out, errstr, sizeof errstr);
    if (err != VARLOG_OK) {
        prefix(ctx);
        fprintf(stderr, "admin at %s: %s: %s\n", addr, varlog_err_name(err), errstr);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}
