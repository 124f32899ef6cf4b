/* varlog-cli peek: the first and last entries of log streams. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>

#include "cli.h"

static void usage(FILE *out, const cli_ctx_t *ctx)
{
    fprintf(out,
            "usage: %s [OPTIONS] peek [--topic T] [--log-stream L] [--timeout MS]\n"
            "  Prints, for log stream L of topic T (default: every log stream of the topic),\n"
            "  one line: 'topic=T log_stream=L first_glsn=G first_llsn=N last_glsn=G\n"
            "  last_llsn=N complete=true|false' (zeros for an empty log stream; complete is\n"
            "  false while every replica is sealing).\n"
            "  --topic T        topic id (default 1)\n"
            "  --log-stream L   one log stream only\n"
            "  --timeout MS     bound on opening the client and on each peek (default\n"
            "                   open.timeout.ms, then metadata.call.timeout.ms)\n",
            ctx->prog);
}

enum { OPT_TOPIC = 256, OPT_LS, OPT_TIMEOUT };
const struct option cli_peek_options[] = {
    {"topic", required_argument, NULL, OPT_TOPIC},
    {"log-stream", required_argument, NULL, OPT_LS},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int cmd_peek(cli_ctx_t *ctx, int argc, char **argv)
{
    int64_t topic = 1, ls = 0, timeout_ms = -1;
    cli_getopt_reset();
    int c;
    while ((c = cli_getopt_long(argc, argv, ":h", cli_peek_options)) != -1) {
        bool ok = true;
        switch (c) {
        case OPT_TOPIC:
            ok = cli_parse_i64(ctx, "--topic", optarg, 1, INT32_MAX, false, &topic);
            break;
        case OPT_LS:
            ok = cli_parse_i64(ctx, "--log-stream", optarg, 1, INT32_MAX, false, &ls);
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

    ctx->open_timeout_ms = timeout_ms;
    varlog_client_t *client = NULL;
    varlog_server_t *srv = NULL;
    int rc = cli_open_client(ctx, &client, &srv);
    if (rc != CLI_EXIT_OK)
        return rc;
    int32_t one = (int32_t)ls;
    int32_t *ids = &one;
    size_t n = 1;
    if (ls == 0) {
        varlog_err_t err = varlog_client_log_streams(client, (int32_t)topic, NULL, 0, &n);
        ids = n ? calloc(n, sizeof *ids) : NULL;
        if (err == VARLOG_OK && n && !ids)
            err = VARLOG_ERR_NOMEM;
        if (err == VARLOG_OK && n)
            err = varlog_client_log_streams(client, (int32_t)topic, ids, n, &n);
        if (err != VARLOG_OK)
            rc = cli_fail(ctx, err, "listing the log streams of topic %" PRId64, topic);
    }
    for (size_t i = 0; rc == CLI_EXIT_OK && i < n; i++) {
        varlog_entry_meta_t first, last;
        bool complete = false;
        varlog_err_t err =
            varlog_peek(client, (int32_t)topic, ids[i], timeout_ms, &first, &last, &complete);
        if (err != VARLOG_OK) {
            rc = cli_fail(ctx, err, "peeking log stream %" PRId32 " of topic %" PRId64, ids[i],
                          topic);
            break;
        }
        printf("topic=%" PRId64 " log_stream=%" PRId32 " first_glsn=%" PRIu64 " first_llsn=%" PRIu64
               " last_glsn=%" PRIu64 " last_llsn=%" PRIu64 " complete=%s\n",
               topic, ids[i], first.glsn, first.llsn, last.glsn, last.llsn,
               complete ? "true" : "false");
    }
    if (ids != &one)
        free(ids);
    cli_close_client(client, srv);
    return rc;
}
