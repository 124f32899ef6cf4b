/* varlog-cli trim: delete a topic's prefix. */
#include <getopt.h>
#include <inttypes.h>

#include "cli.h"

static void usage(FILE *out, const cli_ctx_t *ctx)
{
    fprintf(out,
            "usage: %s [OPTIONS] trim [--topic T] --until GLSN [--timeout MS]\n"
            "  Deletes topic T's entries with GLSN <= GLSN on every storage node holding its\n"
            "  log streams (deletion on the nodes is asynchronous); later reads of the trimmed\n"
            "  range fail with ERR_TRIMMED.\n"
            "  --topic T        topic id (default 1)\n"
            "  --until GLSN     last GLSN deleted (required)\n"
            "  --timeout MS     bound on the call (default metadata.call.timeout.ms)\n",
            ctx->prog);
}

int cmd_trim(cli_ctx_t *ctx, int argc, char **argv)
{
    enum { OPT_TOPIC = 256, OPT_UNTIL, OPT_TIMEOUT };
    static const struct option longopts[] = {
        {"topic", required_argument, NULL, OPT_TOPIC},
        {"until", required_argument, NULL, OPT_UNTIL},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int64_t topic = 1, timeout_ms = -1;
    uint64_t until = 0;
    cli_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
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
    if (until == 0)
        return cli_usage_error(ctx, "--until is required");

    varlog_client_t *client = NULL;
    varlog_server_t *srv = NULL;
    int rc = cli_open_client(ctx, &client, &srv);
    if (rc != CLI_EXIT_OK)
        return rc;
    varlog_err_t err = varlog_trim(client, (int32_t)topic, until, timeout_ms);
    if (err != VARLOG_OK)
        rc = cli_fail(ctx, err, "trimming topic %" PRId64 " up to GLSN %" PRIu64, topic, until);
    else
        printf("trimmed topic %" PRId64 " up to GLSN %" PRIu64 "\n", topic, until);
    cli_close_client(client, srv);
    return rc;
}
