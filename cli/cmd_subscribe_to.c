/* varlog-cli subscribe-to: one log stream in LLSN order. */
#include <getopt.h>
#include <inttypes.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out, const cli_ctx_t *ctx)
{
    fprintf(out,
            "usage: %s [OPTIONS] subscribe-to [--topic T] --log-stream L [--begin LLSN]\n"
            "                  [--end LLSN|now] [--count] [--limit N] [--idle-timeout MS]\n"
            "  Reads log stream L of topic T with LLSN in [begin, end), in LLSN order, and\n"
            "  prints 'GLSN LLSN LS DATA' per entry (GLSN is 0: a storage node reading by LLSN\n"
            "  does not send it; bytes outside printable ASCII as \\xNN).\n"
            "  --topic T          topic id (default 1)\n"
            "  --log-stream L     log stream id (required)\n"
            "  --begin LLSN       first LLSN (default 1)\n"
            "  --end LLSN|now     end, exclusive: an LLSN, or 'now' for the log stream's current\n"
            "                     tail; default: tail for ever (Ctrl-C stops), with --count 'now'\n"
            "  --count            print only the number of entries read\n"
            "  --limit N          stop after N entries\n"
            "  --idle-timeout MS  stop once no entry came for MS milliseconds\n",
            ctx->prog);
}

int cmd_subscribe_to(cli_ctx_t *ctx, int argc, char **argv)
{
    enum { OPT_TOPIC = 256, OPT_LS, OPT_BEGIN, OPT_END, OPT_COUNT, OPT_LIMIT, OPT_IDLE };
    static const struct option longopts[] = {
        {"topic", required_argument, NULL, OPT_TOPIC},
        {"log-stream", required_argument, NULL, OPT_LS},
        {"begin", required_argument, NULL, OPT_BEGIN},
        {"end", required_argument, NULL, OPT_END},
        {"count", no_argument, NULL, OPT_COUNT},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"idle-timeout", required_argument, NULL, OPT_IDLE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int64_t topic = 1, ls = 0;
    uint64_t begin = 1, end = VARLOG_LLSN_MAX, limit = 0, idle = 0;
    bool end_given = false, end_now = false;
    cli_consume_opts_t copts = {0};
    cli_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        bool ok = true;
        switch (c) {
        case OPT_TOPIC:
            ok = cli_parse_i64(ctx, "--topic", optarg, 1, INT32_MAX, false, &topic);
            break;
        case OPT_LS:
            ok = cli_parse_i64(ctx, "--log-stream", optarg, 1, INT32_MAX, false, &ls);
            break;
        case OPT_BEGIN:
            ok = cli_parse_u64(ctx, "--begin", optarg, 1, VARLOG_LLSN_MAX - 1, &begin);
            break;
        case OPT_END:
            end_given = true;
            if (strcmp(optarg, "now") == 0)
                end_now = true;
            else
                ok = cli_parse_u64(ctx, "--end", optarg, 2, VARLOG_LLSN_MAX, &end);
            break;
        case OPT_COUNT:
            copts.count_only = true;
            break;
        case OPT_LIMIT:
            ok = cli_parse_u64(ctx, "--limit", optarg, 1, UINT64_MAX, &limit);
            break;
        case OPT_IDLE:
            ok = cli_parse_u64(ctx, "--idle-timeout", optarg, 1, UINT64_MAX / 2, &idle);
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
    if (ls == 0)
        return cli_usage_error(ctx, "--log-stream is required");
    if (!end_given && copts.count_only)
        end_now = true;
    if (!end_now && begin >= end)
        return cli_usage_error(ctx, "--begin %" PRIu64 " is not below --end %" PRIu64, begin, end);
    copts.limit = limit;
    copts.idle_timeout_ms = idle;

    varlog_client_t *client = NULL;
    varlog_server_t *srv = NULL;
    int rc = cli_open_client(ctx, &client, &srv);
    if (rc != CLI_EXIT_OK)
        return rc;
    cli_catch_signals();
    if (end_now) {
        varlog_entry_meta_t first, last;
        varlog_err_t err =
            varlog_peek(client, (int32_t)topic, (int32_t)ls, -1, &first, &last, NULL);
        if (err != VARLOG_OK)
            rc = cli_fail(ctx, err, "peeking log stream %" PRId64 " of topic %" PRId64, ls, topic);
        end = last.llsn + 1;
    }
    uint64_t n = 0;
    if (rc == CLI_EXIT_OK && begin < end) {
        varlog_subscription_t *sub = NULL;
        varlog_err_t err =
            varlog_subscribe_to_iter(client, (int32_t)topic, (int32_t)ls, begin, end, &sub);
        if (err != VARLOG_OK)
            rc = cli_fail(ctx, err, "subscribing to log stream %" PRId64 " of topic %" PRId64, ls,
                          topic);
        else
            rc = cli_consume(ctx, sub, &copts, &n);
        varlog_subscription_close(&sub);
    }
    if (rc == CLI_EXIT_OK && copts.count_only)
        printf("%" PRIu64 "\n", n);
    cli_close_client(client, srv);
    return rc;
}
