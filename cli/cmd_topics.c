/* varlog-cli topics: topics and their log streams, from the client's metadata view or from
 * the admin service. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>

#include "cli.h"

static void usage(FILE *out, const cli_ctx_t *ctx)
{
    fprintf(out,
            "usage: %s [OPTIONS] topics [--admin[=HOST:PORT]] [--timeout MS]\n"
            "  Lists topics and their log streams, one per line:\n"
            "    topic T\n"
            "      log stream L  appendable|not-appendable\n"
            "  from the client's view of the metadata (not-appendable: sealed, or denied\n"
            "  after a failure). With --admin, from the admin service instead, with each\n"
            "  one's status and replicas (storage node ids, the primary first):\n"
            "    topic T  STATUS\n"
            "      log stream L  STATUS  replicas N[,N...]\n"
            "  --admin[=ADDR]   ask the admin at ADDR (default: the first --mr address, which\n"
            "                   varlog-server serves as admin too, a Varlog cluster does not:\n"
            "                   name its admin, varlogadm's address; or the embedded server)\n"
            "  --timeout MS     bound on opening the client and on each admin call (default\n"
            "                   open.timeout.ms, then 10000)\n",
            ctx->prog);
}

/* ids of the topic's log streams from the client's view, allocated; NULL with *n 0 when
 * none. */
static varlog_err_t list_ids(varlog_client_t *client, int32_t topic, bool appendable, int32_t **ids,
                             size_t *n)
{
    *ids = NULL;
    size_t want = 0;
    varlog_err_t err = appendable
                           ? varlog_client_appendable_log_streams(client, topic, NULL, 0, &want)
                       : topic ? varlog_client_log_streams(client, topic, NULL, 0, &want)
                               : varlog_client_topics(client, NULL, 0, &want);
    if (err != VARLOG_OK || want == 0) {
        *n = 0;
        return err;
    }
    *ids = calloc(want, sizeof **ids);
    if (!*ids)
        return VARLOG_ERR_NOMEM;
    err = appendable ? varlog_client_appendable_log_streams(client, topic, *ids, want, n)
          : topic    ? varlog_client_log_streams(client, topic, *ids, want, n)
                     : varlog_client_topics(client, *ids, want, n);
    if (*n > want)
        *n = want;
    return err;
}

static bool contains(const int32_t *ids, size_t n, int32_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

static int client_view(cli_ctx_t *ctx, varlog_client_t *client)
{
    int32_t *topics = NULL;
    size_t nt = 0;
    varlog_err_t err = list_ids(client, 0, false, &topics, &nt);
    if (err != VARLOG_OK)
        return cli_fail(ctx, err, "listing topics");
    int rc = CLI_EXIT_OK;
    for (size_t t = 0; t < nt && rc == CLI_EXIT_OK; t++) {
        int32_t *ls = NULL, *app = NULL;
        size_t nls = 0, napp = 0;
        err = list_ids(client, topics[t], false, &ls, &nls);
        if (err == VARLOG_OK)
            err = list_ids(client, topics[t], true, &app, &napp);
        if (err != VARLOG_OK) {
            rc = cli_fail(ctx, err, "listing the log streams of topic %" PRId32, topics[t]);
        } else {
            printf("topic %" PRId32 "\n", topics[t]);
            for (size_t i = 0; i < nls; i++)
                printf("  log stream %" PRId32 "  %s\n", ls[i],
                       contains(app, napp, ls[i]) ? "appendable" : "not-appendable");
        }
        free(ls);
        free(app);
    }
    free(topics);
    return rc;
}

/* defaulted: the address was not given to --admin (the first --mr address). */
static int admin_view(cli_ctx_t *ctx, varlog_admin_t *admin, int64_t timeout_ms, bool defaulted)
{
    size_t nt = 0;
    varlog_err_t err = varlog_admin_list_topics(admin, timeout_ms, NULL, 0, &nt);
    varlog_topic_info_t *topics = nt ? calloc(nt, sizeof *topics) : NULL;
    if (err == VARLOG_OK && nt && !topics)
        err = VARLOG_ERR_NOMEM;
    if (err == VARLOG_OK && nt) {
        size_t cap = nt;
        err = varlog_admin_list_topics(admin, timeout_ms, topics, cap, &nt);
        if (nt > cap)
            nt = cap; /* a topic added meanwhile: listed next time */
    }
    if (err == VARLOG_ERR_RPC_UNIMPLEMENTED) {
        /* A real cluster's metadata repository (the first --mr address) answers the admin
         * service with UNIMPLEMENTED: say what that means and what to do. */
        free(topics);
        fprintf(stderr,
                "%s %s: %s is not an admin server (it does not serve "
                "varlog.admpb.ClusterManager: ERR_RPC_UNIMPLEMENTED)%s; name the cluster's admin "
                "with --admin=HOST:PORT (varlogadm's --listen address)\n",
                ctx->prog, ctx->cmd, varlog_admin_address(admin),
                defaulted ? "; --admin without an address asks the first --mr address, which "
                            "only varlog-server serves as admin too"
                          : "");
        return CLI_EXIT_FAIL;
    }
    if (err != VARLOG_OK) {
        free(topics);
        return cli_fail(ctx, err, "listing topics at %s", varlog_admin_address(admin));
    }
    int rc = CLI_EXIT_OK;
    for (size_t t = 0; t < nt && rc == CLI_EXIT_OK; t++) {
        int32_t tid = topics[t].topic_id;
        size_t nls = 0;
        err = varlog_admin_list_log_streams(admin, tid, timeout_ms, NULL, 0, &nls);
        varlog_log_stream_info_t *ls = nls ? calloc(nls, sizeof *ls) : NULL;
        if (err == VARLOG_OK && nls && !ls)
            err = VARLOG_ERR_NOMEM;
        if (err == VARLOG_OK && nls) {
            size_t cap = nls;
            err = varlog_admin_list_log_streams(admin, tid, timeout_ms, ls, cap, &nls);
            if (nls > cap)
                nls = cap;
        }
        if (err != VARLOG_OK) {
            rc = cli_fail(ctx, err, "listing the log streams of topic %" PRId32, tid);
        } else {
            printf("topic %" PRId32 "  %s\n", tid, varlog_topic_status_name(topics[t].status));
            for (size_t i = 0; i < nls; i++) {
                printf("  log stream %" PRId32 "  %s  replicas ", ls[i].log_stream_id,
                       varlog_log_stream_status_name(ls[i].status));
                size_t nr = ls[i].n_replicas < VARLOG_ADMIN_MAX_REPLICAS
                                ? ls[i].n_replicas
                                : VARLOG_ADMIN_MAX_REPLICAS;
                for (size_t r = 0; r < nr; r++)
                    printf("%s%" PRId32, r ? "," : "", ls[i].replicas[r]);
                if (nr == 0)
                    printf("-");
                printf("\n");
            }
        }
        free(ls);
    }
    free(topics);
    return rc;
}

enum { OPT_ADMIN = 256, OPT_TIMEOUT };
const struct option cli_topics_options[] = {
    {"admin", optional_argument, NULL, OPT_ADMIN},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int cmd_topics(cli_ctx_t *ctx, int argc, char **argv)
{
    bool use_admin = false;
    const char *admin_addr = NULL;
    int64_t timeout_ms = -1;
    cli_getopt_reset();
    int c;
    while ((c = cli_getopt_long(argc, argv, ":h", cli_topics_options)) != -1) {
        switch (c) {
        case OPT_ADMIN:
            use_admin = true;
            admin_addr = optarg;
            break;
        case OPT_TIMEOUT:
            if (!cli_parse_i64(ctx, "--timeout", optarg, 1, INT64_MAX, false, &timeout_ms))
                return CLI_EXIT_USAGE;
            break;
        case 'h':
            usage(stdout, ctx);
            return CLI_EXIT_OK;
        default:
            return cli_bad_option(ctx, c, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error(ctx, "unexpected argument '%s' (see --help)", argv[optind]);

    ctx->open_timeout_ms = timeout_ms;
    varlog_client_t *client = NULL;
    varlog_server_t *srv = NULL;
    int rc = CLI_EXIT_OK;
    if (use_admin) {
        /* The admin needs no client; only the embedded server, when there is no --mr. */
        if (!ctx->mr && !admin_addr) {
            rc = cli_open_client(ctx, &client, &srv);
            if (rc != CLI_EXIT_OK)
                return rc;
        }
        varlog_admin_t *admin = NULL;
        rc = cli_open_admin(ctx, admin_addr, srv, &admin);
        if (rc == CLI_EXIT_OK)
            rc = admin_view(ctx, admin, timeout_ms, !admin_addr && ctx->mr);
        varlog_admin_destroy(admin);
    } else {
        rc = cli_open_client(ctx, &client, &srv);
        if (rc != CLI_EXIT_OK)
            return rc;
        rc = client_view(ctx, client);
    }
    cli_close_client(client, srv);
    return rc;
}
