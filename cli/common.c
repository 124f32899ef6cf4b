/* varlog-cli: what every command uses (opening the client, errors, number parsing). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

volatile sig_atomic_t cli_stop_requested;

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
    const char *arg = optind > 0 ? argv[optind - 1] : "?";
    if (c == ':')
        return cli_usage_error(ctx, "option '%s' needs a value (see --help)", arg);
    if (optopt && optopt < 256 && !(arg[0] == '-' && arg[1] == '-'))
        return cli_usage_error(ctx, "unknown option '-%c' (see --help)", optopt);
    return cli_usage_error(ctx, "unknown option '%s' (see --help)", arg);
}

bool cli_parse_i64(const cli_ctx_t *ctx, const char *name, const char *text, int64_t min,
                   int64_t max, bool allow_suffix, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    bool ok = !errno && end && end != text;
    if (ok && allow_suffix && *end) {
        int shift = 0;
        switch (*end) {
        case 'k':
        case 'K':
            shift = 10;
            break;
        case 'm':
        case 'M':
            shift = 20;
            break;
        case 'g':
        case 'G':
            shift = 30;
            break;
        default:
            ok = false;
        }
        if (ok && (v > (LLONG_MAX >> shift) || v < (LLONG_MIN >> shift)))
            ok = false;
        if (ok) {
            v = v * (1LL << shift);
            end++;
        }
    }
    if (!ok || *end || v < min || v > max) {
        cli_usage_error(ctx, "%s: '%s' is not a number in [%" PRId64 ", %" PRId64 "]", name, text,
                        min, max);
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
    if (errno || !end || end == text || *end || text[0] == '-' || v < min || v > max) {
        cli_usage_error(ctx, "%s: '%s' is not a number in [%" PRIu64 ", %" PRIu64 "]", name, text,
                        min, max);
        return false;
    }
    *out = v;
    return true;
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
                    "%s: no --mr given: using an embedded server at %s (%d topics, %d log "
                    "streams each; its log is gone when the command ends)\n",
                    ctx->prog, addr, (int)ctx->embedded_topics, (int)ctx->embedded_log_streams);
    }
    varlog_conf_t *conf = varlog_conf_dup(ctx->conf);
    if (!conf) {
        varlog_server_destroy(srv);
        return cli_fail(ctx, VARLOG_ERR_NOMEM, "copying the configuration");
    }
    char errstr[512];
    varlog_err_t err = varlog_conf_set(conf, "metadata.addresses", addr, errstr, sizeof errstr);
    if (err != VARLOG_OK) {
        varlog_conf_destroy(conf);
        varlog_server_destroy(srv);
        prefix(ctx);
        fprintf(stderr, "bad --mr '%s': %s\n", addr, errstr);
        return CLI_EXIT_USAGE;
    }
    err = varlog_client_new(&conf, out, errstr, sizeof errstr);
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
