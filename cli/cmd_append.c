/* varlog-cli append: records from stdin (one per line) or generated, through the pipelined
 * appender (default) or varlog_append (--sync). */
#include <getopt.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out, const cli_ctx_t *ctx)
{
    fprintf(out,
            "usage: %s [OPTIONS] append [--topic T] [--log-stream L | --spread]\n"
            "                  [--count N [--size B]] [--batch N] [--sync] [--timeout MS]\n"
            "                  [--positions] [--metrics-listen HOST:PORT]\n"
            "  Appends each line of stdin as one record (without its newline; empty lines are\n"
            "  skipped), or, with --count, N generated records of B bytes (default 100).\n"
            "  Order: the records go to one log stream of the topic (the first appendable\n"
            "  one, or --log-stream L), so the log holds them in the input's order, with\n"
            "  increasing GLSNs. --spread lets the client pick a log stream per batch:\n"
            "  faster, and a sealed log stream is passed over, but batches of different log\n"
            "  streams interleave in the log in the order they commit, not the input's.\n"
            "  --topic T        topic id (default 1)\n"
            "  --log-stream L   append to log stream L\n"
            "  --spread         spread batches over the topic's log streams (see Order)\n"
            "  --count N        generate N records instead of reading stdin\n"
            "                   (" CLI_SIZE_SUFFIXES ")\n"
            "  --size B         generated record size in bytes (default 100;\n"
            "                   " CLI_SIZE_SUFFIXES ")\n"
            "  --batch N        records per append call (default 1)\n"
            "  --sync           varlog_append, one call at a time, instead of the pipelined\n"
            "                   appender\n"
            "  --timeout MS     bound on opening the client, and on each call (sync) or on\n"
            "                   the final flush (default: open.timeout.ms, then none)\n"
            "  --positions      print 'GLSN LLSN LS' for every record appended\n" CLI_METRICS_HELP
            "  Prints 'appended N records, GLSN A..B' (the lowest and highest GLSN) on\n"
            "  stdout. Exit status 1 when any record failed: what was appended and the first\n"
            "  failure go to stderr, nothing to stdout but --positions lines; 130 when\n"
            "  interrupted (Ctrl-C): the summary ends with '(interrupted)'.\n"
            "  Record size limits: append.record.max.bytes (4 MiB) with --sync, and\n"
            "  appender.batch.max.bytes (1 MiB) through the appender (-X raises them).\n",
            ctx->prog);
}

typedef struct append_state {
    const cli_ctx_t *ctx;
    bool positions;
    /* records with an outcome, for the progress line, which main reads while the
     * appender's thread counts */
    _Atomic uint64_t settled;
    uint64_t appended;
    uint64_t failed;
    uint64_t maybe;
    uint64_t glsn_min;
    uint64_t glsn_max;
    varlog_err_t first_err;
    char first_errtext[512];
} append_state_t;

static void note_metas(append_state_t *st, const varlog_entry_meta_t *metas, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (st->glsn_min == 0 || metas[i].glsn < st->glsn_min)
            st->glsn_min = metas[i].glsn;
        if (metas[i].glsn > st->glsn_max)
            st->glsn_max = metas[i].glsn;
        if (st->positions)
            printf("%" PRIu64 " %" PRIu64 " %" PRId32 "\n", metas[i].glsn, metas[i].llsn,
                   metas[i].log_stream_id);
    }
    st->appended += n;
}

static void note_failure(append_state_t *st, varlog_err_t err, varlog_outcome_t outcome, size_t n,
                         const char *text)
{
    if (st->failed + st->maybe == 0) {
        st->first_err = err;
        snprintf(st->first_errtext, sizeof st->first_errtext, "%s", text ? text : "");
    }
    if (outcome == VARLOG_MAYBE_APPENDED)
        st->maybe += n;
    else
        st->failed += n;
}

/* On the appender's thread, one call at a time: st needs no lock, and main reads it only
 * after close joined that thread. */
static void on_appended(const varlog_append_result_t *r, void *opaque)
{
    append_state_t *st = opaque;
    if (r->err == VARLOG_OK)
        note_metas(st, r->metas, r->n);
    else
        note_failure(st, r->err, r->outcome, r->n, r->errtext);
    atomic_fetch_add_explicit(&st->settled, r->n, memory_order_relaxed);
}

/* The source of records: stdin lines or generated payloads. */
typedef struct source {
    bool generate;
    uint64_t count; /* generated: how many */
    uint64_t made;
    size_t size;
    char *gen_buf;
    char *line;
    size_t line_cap;
} source_t;

/* The next record into *rec (borrowed until the next call); false at the end. */
static bool source_next(source_t *src, varlog_record_t *rec)
{
    if (src->generate) {
        if (src->made == src->count)
            return false;
        /* A sequence number at the front lets a reader tell the records apart. */
        char num[24];
        int len = snprintf(num, sizeof num, "%" PRIu64 " ", src->made);
        memcpy(src->gen_buf, num, src->size < (size_t)len ? src->size : (size_t)len);
        src->made++;
        rec->data = src->gen_buf;
        rec->len = src->size;
        return true;
    }
    for (;;) {
        ssize_t n = getline(&src->line, &src->line_cap, stdin);
        if (n < 0)
            return false;
        if (n > 0 && src->line[n - 1] == '\n')
            n--;
        if (n > 0 && src->line[n - 1] == '\r')
            n--;
        if (n == 0)
            continue;
        rec->data = src->line;
        rec->len = (size_t)n;
        return true;
    }
}

/* Copies up to max records from src into recs, whose bytes live in arena (one slot of
 * slot_size bytes per record; stdin lines longer than a slot are copied to their own
 * allocation in owned[]). */
typedef struct batch {
    varlog_record_t *recs;
    char **owned;
    size_t n;
} batch_t;

static void batch_clear(batch_t *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->owned[i]);
        b->owned[i] = NULL;
    }
    b->n = 0;
}

static bool batch_fill(batch_t *b, source_t *src, size_t max, bool *oom)
{
    batch_clear(b);
    varlog_record_t rec;
    while (b->n < max && source_next(src, &rec)) {
        char *copy = malloc(rec.len);
        if (!copy) {
            *oom = true;
            return false;
        }
        memcpy(copy, rec.data, rec.len);
        b->owned[b->n] = copy;
        b->recs[b->n].data = copy;
        b->recs[b->n].len = rec.len;
        b->n++;
    }
    return b->n > 0;
}

static int run_sync(cli_ctx_t *ctx, varlog_client_t *client, int32_t topic, int32_t ls, batch_t *b,
                    source_t *src, size_t batch_max, int64_t timeout_ms, append_state_t *st)
{
    varlog_entry_meta_t *metas = calloc(batch_max, sizeof *metas);
    if (!metas)
        return cli_fail(ctx, VARLOG_ERR_NOMEM, "allocating %zu metas", batch_max);
    bool oom = false;
    cli_progress_t pr;
    cli_progress_start(&pr);
    while (!cli_stop_requested && batch_fill(b, src, batch_max, &oom)) {
        if (cli_progress_due(&pr))
            cli_progress_draw(&pr, "appended", st->appended, 0, b->recs[0].len);
        varlog_outcome_t outcome = VARLOG_NOT_APPENDED;
        varlog_err_t err =
            ls > 0 ? varlog_append_to(client, topic, ls, b->recs, b->n, timeout_ms, metas, &outcome)
                   : varlog_append(client, topic, b->recs, b->n, timeout_ms, metas, &outcome);
        if (err == VARLOG_OK) {
            note_metas(st, metas, b->n);
        } else {
            note_failure(st, err, outcome, b->n, varlog_last_error());
            break; /* the next call would most likely fail the same way */
        }
    }
    cli_progress_end(&pr);
    free(metas);
    return oom ? cli_fail(ctx, VARLOG_ERR_NOMEM, "reading records") : CLI_EXIT_OK;
}

static int run_pipelined(cli_ctx_t *ctx, varlog_client_t *client, int32_t topic, int32_t ls,
                         batch_t *b, source_t *src, size_t batch_max, int64_t timeout_ms,
                         append_state_t *st)
{
    varlog_appender_t *app = NULL;
    varlog_err_t err = varlog_appender_new(client, topic, ls, &app);
    if (err != VARLOG_OK)
        return cli_fail(ctx, err, "opening an appender for topic %" PRId32, topic);
    bool oom = false;
    int rc = CLI_EXIT_OK;
    uint64_t queued = 0;
    cli_progress_t pr;
    cli_progress_start(&pr);
    while (!cli_stop_requested && batch_fill(b, src, batch_max, &oom)) {
        if (cli_progress_due(&pr)) {
            uint64_t settled = atomic_load_explicit(&st->settled, memory_order_relaxed);
            cli_progress_draw(&pr, "appended", settled, queued - settled, b->recs[0].len);
        }
        err = varlog_appender_append(app, b->recs, b->n, -1, on_appended, st);
        if (err != VARLOG_OK) {
            rc = cli_fail(ctx, err, "queueing %zu %s", b->n,
                          cli_plural((long long)b->n, "record", "records"));
            break;
        }
        queued += b->n;
    }
    cli_progress_end(&pr);
    if (oom && rc == CLI_EXIT_OK)
        rc = cli_fail(ctx, VARLOG_ERR_NOMEM, "reading records");
    err = varlog_appender_close(&app, timeout_ms);
    if (err != VARLOG_OK && rc == CLI_EXIT_OK)
        rc = cli_fail(ctx, err, "flushing the appender");
    return rc;
}

/* The log stream that keeps the input's order: the first the client finds appendable. */
static int pick_log_stream(cli_ctx_t *ctx, varlog_client_t *client, int32_t topic, int64_t *ls)
{
    int32_t ids[1];
    size_t n = 0;
    varlog_err_t err = varlog_client_appendable_log_streams(client, topic, ids, 1, &n);
    if (err != VARLOG_OK)
        return cli_fail(ctx, err, "finding an appendable log stream of topic %" PRId32, topic);
    if (n == 0)
        return cli_fail(ctx, VARLOG_ERR_NO_LOG_STREAM,
                        "topic %" PRId32 " has no appendable log stream", topic);
    *ls = ids[0];
    return CLI_EXIT_OK;
}

enum {
    OPT_TOPIC = 256,
    OPT_LS,
    OPT_COUNT,
    OPT_SIZE,
    OPT_BATCH,
    OPT_SYNC,
    OPT_TIMEOUT,
    OPT_POSITIONS,
    OPT_SPREAD
};
const struct option cli_append_options[] = {
    {"topic", required_argument, NULL, OPT_TOPIC},
    {"log-stream", required_argument, NULL, OPT_LS},
    {"count", required_argument, NULL, OPT_COUNT},
    {"size", required_argument, NULL, OPT_SIZE},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"sync", no_argument, NULL, OPT_SYNC},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"positions", no_argument, NULL, OPT_POSITIONS},
    {"spread", no_argument, NULL, OPT_SPREAD},
    {"metrics-listen", required_argument, NULL, CLI_OPT_METRICS_LISTEN},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int cmd_append(cli_ctx_t *ctx, int argc, char **argv)
{
    int64_t topic = 1, ls = 0, count = -1, size = 100, batch_max = 1, timeout_ms = -1;
    bool sync = false, positions = false, size_given = false, spread = false;
    cli_getopt_reset();
    int c;
    while ((c = cli_getopt_long(argc, argv, ":h", cli_append_options)) != -1) {
        bool ok = true;
        switch (c) {
        case OPT_TOPIC:
            ok = cli_parse_i64(ctx, "--topic", optarg, 1, INT32_MAX, false, &topic);
            break;
        case OPT_LS:
            ok = cli_parse_i64(ctx, "--log-stream", optarg, 1, INT32_MAX, false, &ls);
            break;
        case OPT_COUNT:
            ok = cli_parse_i64(ctx, "--count", optarg, 1, INT64_MAX, true, &count);
            break;
        case OPT_SIZE:
            ok = cli_parse_i64(ctx, "--size", optarg, 1, 1 << 30, true, &size);
            size_given = true;
            break;
        case OPT_BATCH:
            ok = cli_parse_i64(ctx, "--batch", optarg, 1, 1000000, false, &batch_max);
            break;
        case OPT_SYNC:
            sync = true;
            break;
        case OPT_TIMEOUT:
            ok = cli_parse_i64(ctx, "--timeout", optarg, 1, INT64_MAX, false, &timeout_ms);
            break;
        case OPT_POSITIONS:
            positions = true;
            break;
        case OPT_SPREAD:
            spread = true;
            break;
        case CLI_OPT_METRICS_LISTEN:
            ok = cli_metrics_listen_option(ctx, optarg);
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
    if (size_given && count < 0)
        return cli_usage_error(ctx, "--size needs --count");
    if (spread && ls > 0)
        return cli_usage_error(ctx, "--spread and --log-stream exclude each other");

    source_t src = {
        .generate = count >= 0, .count = (uint64_t)(count < 0 ? 0 : count), .size = (size_t)size};
    batch_t b = {.recs = calloc((size_t)batch_max, sizeof *b.recs),
                 .owned = calloc((size_t)batch_max, sizeof *b.owned)};
    if (src.generate) {
        src.gen_buf = malloc(src.size);
        if (src.gen_buf)
            memset(src.gen_buf, 'x', src.size);
    }
    append_state_t st = {.ctx = ctx, .positions = positions};
    int rc = CLI_EXIT_OK;
    varlog_client_t *client = NULL;
    varlog_server_t *srv = NULL;
    cli_metrics_t *metrics = NULL;
    if (!b.recs || !b.owned || (src.generate && !src.gen_buf)) {
        rc = cli_fail(ctx, VARLOG_ERR_NOMEM, "allocating buffers");
        goto out;
    }
    ctx->open_timeout_ms = timeout_ms;
    rc = cli_open_client(ctx, &client, &srv);
    if (rc == CLI_EXIT_OK)
        rc = cli_metrics_start(ctx, client, &metrics);
    if (rc != CLI_EXIT_OK)
        goto out;
    if (ls == 0 && !spread) {
        rc = pick_log_stream(ctx, client, (int32_t)topic, &ls);
        if (rc != CLI_EXIT_OK)
            goto out;
    }
    cli_catch_signals();
    if (sync)
        rc = run_sync(ctx, client, (int32_t)topic, (int32_t)ls, &b, &src, (size_t)batch_max,
                      timeout_ms, &st);
    else
        rc = run_pipelined(ctx, client, (int32_t)topic, (int32_t)ls, &b, &src, (size_t)batch_max,
                           timeout_ms, &st);
    /* The summary: stdout only when every record read was appended (a result); after a
     * failure the same facts go to stderr with the error, so that nothing on stdout passes
     * for a result; an interrupted run says so and exits CLI_EXIT_INTERRUPTED. */
    char summary[160];
    if (st.appended == 1)
        snprintf(summary, sizeof summary, "appended 1 record, GLSN %" PRIu64, st.glsn_min);
    else if (st.appended > 0)
        snprintf(summary, sizeof summary,
                 "appended %" PRIu64 " records, GLSN %" PRIu64 "..%" PRIu64, st.appended,
                 st.glsn_min, st.glsn_max);
    else
        snprintf(summary, sizeof summary, "appended 0 records");
    if (st.failed + st.maybe > 0) {
        fprintf(stderr,
                "%s %s: %s; %" PRIu64 " not appended, %" PRIu64
                " maybe appended; first failure: %s: %s\n",
                ctx->prog, ctx->cmd, summary, st.failed, st.maybe, varlog_err_name(st.first_err),
                st.first_errtext);
        rc = CLI_EXIT_FAIL;
    } else if (rc != CLI_EXIT_OK && st.appended > 0) {
        fprintf(stderr, "%s %s: %s before the failure above\n", ctx->prog, ctx->cmd, summary);
    } else if (rc != CLI_EXIT_OK) {
        /* the failure's line said it all: nothing was appended */
    } else if (cli_stop_requested) {
        printf("%s (interrupted)\n", summary);
        fprintf(stderr, "%s %s: interrupted: %s; the rest of the input was not appended\n",
                ctx->prog, ctx->cmd, summary);
        rc = CLI_EXIT_INTERRUPTED;
    } else {
        printf("%s\n", summary);
    }
    fflush(stdout);
out:
    cli_metrics_stop(&metrics);
    cli_close_client(client, srv);
    batch_clear(&b);
    free(b.recs);
    free(b.owned);
    free(src.gen_buf);
    free(src.line);
    return rc;
}
