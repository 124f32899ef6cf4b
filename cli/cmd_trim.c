/* varlog-cli trim: delete a topic's prefix. */
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out, const cli_ctx_t *ctx)
{
    fprintf(out,
            "usage: %s [OPTIONS] trim --topic T --until GLSN [--timeout MS]\n"
            "  Deletes topic T's entries with GLSN <= GLSN on every storage node holding\n"
            "  its log streams (deletion on the nodes is asynchronous); later reads of the\n"
            "  trimmed range fail with ERR_TRIMMED. As in Varlog, a storage node trims no\n"
            "  further than the entries it holds, and not a sealed log stream: a GLSN past\n"
            "  the topic's last entry trims nothing (the command then fails and names the\n"
            "  last entry).\n"
            "  Prints 'trimmed topic T up to GLSN G; its first entry is now GLSN F' (F 0:\n"
            "  none left), or 'nothing to trim ...' when nothing up to GLSN is left. Exit\n"
            "  status 1 when entries up to GLSN remain (a GLSN past the last entry, a sealed\n"
            "  log stream).\n"
            "  Before it deletes anything it says on stderr which topic of which cluster\n"
            "  it trims and up to where.\n"
            "  --topic T        topic id (required: a command that deletes takes no default)\n"
            "  --until GLSN     last GLSN deleted (required)\n"
            "  --timeout MS     bound on opening the client and on each call (default\n"
            "                   open.timeout.ms, then metadata.call.timeout.ms)\n",
            ctx->prog);
}

/* What a topic holds, from varlog_peek of each log stream. */
typedef struct span {
    uint64_t first, last; /* lowest first and highest last GLSN; 0 when empty */
    uint64_t kept;        /* log streams holding an entry at or below the trim point */
    int32_t kept_ls;      /* the first such, and its first GLSN */
    uint64_t kept_from;
} span_t;

static int topic_span(cli_ctx_t *ctx, varlog_client_t *client, int32_t topic, int64_t timeout_ms,
                      uint64_t until, span_t *sp)
{
    memset(sp, 0, sizeof *sp);
    size_t n = 0;
    varlog_err_t err = varlog_client_log_streams(client, topic, NULL, 0, &n);
    int32_t *ids = n ? calloc(n, sizeof *ids) : NULL;
    if (err == VARLOG_OK && n && !ids)
        err = VARLOG_ERR_NOMEM;
    if (err == VARLOG_OK && n)
        err = varlog_client_log_streams(client, topic, ids, n, &n);
    if (err != VARLOG_OK) {
        free(ids);
        return cli_fail(ctx, err, "listing the log streams of topic %" PRId32, topic);
    }
    for (size_t i = 0; i < n; i++) {
        varlog_entry_meta_t first, last;
        err = varlog_peek(client, topic, ids[i], timeout_ms, &first, &last, NULL);
        if (err != VARLOG_OK) {
            int32_t id = ids[i];
            free(ids);
            return cli_fail(ctx, err, "peeking log stream %" PRId32 " of topic %" PRId32, id,
                            topic);
        }
        if (last.glsn == 0 || first.glsn == 0)
            continue;
        if (sp->first == 0 || first.glsn < sp->first)
            sp->first = first.glsn;
        if (last.glsn > sp->last)
            sp->last = last.glsn;
        if (first.glsn <= until && sp->kept++ == 0) {
            sp->kept_ls = ids[i];
            sp->kept_from = first.glsn;
        }
    }
    free(ids);
    return CLI_EXIT_OK;
}

/* Nothing was trimmed though the command asked for it: one line on stderr, exit status 1. */
static int nothing_trimmed(const cli_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int nothing_trimmed(const cli_ctx_t *ctx, const char *fmt, ...)
{
    fprintf(stderr, "%s %s: nothing trimmed: ", ctx->prog, ctx->cmd);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_EXIT_FAIL;
}

enum { OPT_TOPIC = 256, OPT_UNTIL, OPT_TIMEOUT };
const struct option cli_trim_options[] = {
    {"topic", required_argument, NULL, OPT_TOPIC},
    {"until", required_argument, NULL, OPT_UNTIL},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int cmd_trim(cli_ctx_t *ctx, int argc, char **argv)
{
    int64_t topic = 0, timeout_ms = -1;
    uint64_t until = 0;
    cli_getopt_reset();
    int c;
    while ((c = cli_getopt_long(argc, argv, ":h", cli_trim_options)) != -1) {
        bool ok = true;
        switch (c) {
        case OPT_TOPIC:
            ok = cli_parse_i64(ctx, "--topic", optarg, 1, INT32_MAX, false, &topic);
            break;
        case OPT_UNTIL:
            ok = cli_parse_u64(ctx, "--until", optarg, 1, VARLOG_GLSN_MAX - 1, &until);
            break;
        case OPT_TIMEOUT:
            ok = cli_parse_i64(ctx, "--timeout", optarg, 1, INT64_MAX, false, &timeout_ms);
            break;
        case 'h':
            usage(stdout, ctx);
            return CLI_EXIT_OK;
        default:
            return cli_bad_option(ctx, c, argv);
        }
        if (!ok)
            return CLI_EXIT_USAGE;
    }
    if (optind < argc)
        return cli_usage_error(ctx, "unexpected argument '%s' (see --help)", argv[optind]);
    if (topic == 0)
        return cli_usage_error(ctx, "--topic is required (trim deletes entries: say which topic)");
    if (until == 0)
        return cli_usage_error(ctx, "--until is required");

    ctx->open_timeout_ms = timeout_ms;
    varlog_client_t *client = NULL;
    varlog_server_t *srv = NULL;
    int rc = cli_open_client(ctx, &client, &srv);
    if (rc != CLI_EXIT_OK)
        return rc;
    /* varlog_trim's OK only says a node took the request: what the topic holds before and
     * after says what was trimmed. */
    span_t before, after;
    rc = topic_span(ctx, client, (int32_t)topic, timeout_ms, until, &before);
    if (rc != CLI_EXIT_OK)
        goto out;
    if (before.last == 0) {
        rc = nothing_trimmed(ctx, "topic %" PRId64 " has no entries", topic);
        goto out;
    }
    if (until > before.last) {
        rc =
            nothing_trimmed(ctx,
                            "GLSN %" PRIu64 " is past topic %" PRId64 "'s last entry, GLSN %" PRIu64
                            " (a storage node trims no further than the entries it holds; --until "
                            "%" PRIu64 " trims them all)",
                            until, topic, before.last, before.last);
        goto out;
    }
    if (before.kept == 0) {
        printf("nothing to trim: topic %" PRId64 " holds no entry up to GLSN %" PRIu64
               "; its first entry is GLSN %" PRIu64 "\n",
               topic, until, before.first);
        goto out;
    }
    /* Said before acting, so that a wrong topic or cluster is seen in the log of the run
     * that deleted it. */
    fprintf(stderr, "%s %s: trimming topic %" PRId64 " up to GLSN %" PRIu64 " at %s\n", ctx->prog,
            ctx->cmd, topic, until, ctx->mr ? ctx->mr : "the embedded server");
    varlog_err_t err = varlog_trim(client, (int32_t)topic, until, timeout_ms);
    if (err != VARLOG_OK) {
        rc = cli_fail(ctx, err, "trimming topic %" PRId64 " up to GLSN %" PRIu64, topic, until);
        goto out;
    }
    rc = topic_span(ctx, client, (int32_t)topic, timeout_ms, until, &after);
    if (rc != CLI_EXIT_OK)
        goto out;
    if (after.kept > 0) {
        fprintf(stderr,
                "%s %s: topic %" PRId64 " still holds entries up to GLSN %" PRIu64
                " after the trim (log stream %" PRId32 " from GLSN %" PRIu64
                "): a sealed log stream is not trimmed, and a node may delete later\n",
                ctx->prog, ctx->cmd, topic, until, after.kept_ls, after.kept_from);
        rc = CLI_EXIT_FAIL;
        goto out;
    }
    printf("trimmed topic %" PRId64 " up to GLSN %" PRIu64 "; its first entry is now GLSN %" PRIu64
           "\n",
           topic, until, after.first);
out:
    cli_close_client(client, srv);
    return rc;
}
