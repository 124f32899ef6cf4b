/* varlog-cli subscribe (a topic in GLSN order) and subscribe-to (one log stream in LLSN
 * order): one set of options and one reading loop. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* What both helps say of outages (the library's subscribe.retry.timeout.ms, issue 23). */
#define RECONNECT_HELP                                                                             \
    "  While a storage node is down or restarts, the subscription keeps reconnecting,\n"           \
    "  with one line on stderr when it starts and one when it is back. A tail (no\n"               \
    "  --end, no --count) waits for ever; a range gives up after 60 s without\n"                   \
    "  progress. -X subscribe.retry.timeout.ms=MS sets that bound for either\n"                    \
    "  (-1: for ever).\n"

static void usage(FILE *out, const cli_ctx_t *ctx)
{
    fprintf(out,
            "usage: %s [OPTIONS] subscribe [--topic T] [--begin GLSN]\n"
            "                  [--end GLSN|now] [--count] [--limit N] [--idle-timeout MS]\n"
            "                  [--metrics-listen HOST:PORT]\n"
            "  Reads topic T's entries with GLSN in [begin, end), in GLSN order, and prints\n"
            "  'GLSN LLSN LS DATA' per entry (bytes outside printable ASCII as \\xNN).\n"
            "  --topic T          topic id (default 1)\n"
            "  --begin GLSN       first GLSN (default 1)\n"
            "  --end GLSN|now     end, exclusive: a GLSN, or 'now' for the topic's current\n"
            "                     tail; default: tail for ever (Ctrl-C stops), with --count\n"
            "                     'now'\n"
            "  --count            print only the number of entries read (with a progress\n"
            "                     line on stderr when it is a terminal)\n"
            "  --limit N          stop after N entries\n"
            "  --idle-timeout MS  stop once no entry came for MS milliseconds\n" CLI_METRICS_HELP
                RECONNECT_HELP
            "  Exit status 130 when Ctrl-C cuts a range (--end, --count) or --limit short\n"
            "  (stderr says after how many entries; --count prints no count); 0 when it stops\n"
            "  a tail without end.\n",
            ctx->prog);
}

static void usage_to(FILE *out, const cli_ctx_t *ctx)
{
    fprintf(out,
            "usage: %s [OPTIONS] subscribe-to [--topic T] --log-stream L\n"
            "                  [--begin LLSN] [--end LLSN|now] [--count] [--limit N]\n"
            "                  [--idle-timeout MS] [--metrics-listen HOST:PORT]\n"
            "  Reads log stream L of topic T with LLSN in [begin, end), in LLSN order, and\n"
            "  prints 'GLSN LLSN LS DATA' per entry (GLSN is 0: a storage node reading by\n"
            "  LLSN does not send it; bytes outside printable ASCII as \\xNN).\n"
            "  --topic T          topic id (default 1)\n"
            "  --log-stream L     log stream id (required)\n"
            "  --begin LLSN       first LLSN (default 1)\n"
            "  --end LLSN|now     end, exclusive: an LLSN, or 'now' for the log stream's\n"
            "                     current tail; default: tail for ever (Ctrl-C stops), with\n"
            "                     --count 'now'\n"
            "  --count            print only the number of entries read (with a progress\n"
            "                     line on stderr when it is a terminal)\n"
            "  --limit N          stop after N entries\n"
            "  --idle-timeout MS  stop once no entry came for MS milliseconds\n" CLI_METRICS_HELP
                RECONNECT_HELP
            "  Exit status 130 when Ctrl-C cuts a range (--end, --count) or --limit short\n"
            "  (stderr says after how many entries; --count prints no count); 0 when it stops\n"
            "  a tail without end.\n",
            ctx->prog);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void print_entry(const varlog_entry_t *e)
{
    printf("%" PRIu64 " %" PRIu64 " %" PRId32 " ", e->meta.glsn, e->meta.llsn,
           e->meta.log_stream_id);
    const unsigned char *p = e->data;
    for (size_t i = 0; i < e->len; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
            putchar(p[i]);
        else if (p[i] == '\\')
            fputs("\\\\", stdout);
        else
            printf("\\x%02x", p[i]);
    }
    putchar('\n');
}

/* The count's live line on stderr, only when stderr is a terminal: --count prints nothing
 * until the end, which on millions of entries is a minute of silence. */
typedef struct progress {
    bool on, drawn;
    uint64_t t0, last_t, last_n;
} progress_t;

static void progress_draw(progress_t *pr, uint64_t n, uint64_t now)
{
    if (!pr->on || now - pr->last_t < CLI_PROGRESS_MS)
        return;
    double dt = (double)(now - pr->last_t) / 1e3;
    fprintf(stderr, "\r\033[K%6.1f s  read %" PRIu64 " entries  %.0f entries/s",
            (double)(now - pr->t0) / 1e3, n, (double)(n - pr->last_n) / dt);
    fflush(stderr);
    pr->last_t = now;
    pr->last_n = n;
    pr->drawn = true;
}

/* One stderr line when the subscription starts reconnecting and one when it is back, from
 * varlog_subscription_health looked at every RECONNECT_LOOK_MS (a tail that rides out a
 * node restart says so rather than going silent). An outage begun and over between two
 * looks is not worth a line. */
#define RECONNECT_LOOK_MS 200

typedef struct reconnect_note {
    bool down;          /* "reconnecting" printed, "back" not yet */
    uint64_t outages;   /* the subscription's count when it was printed */
    uint64_t since;     /* now_ms() when the outage began */
    uint64_t last_look; /* now_ms() */
} reconnect_note_t;

static void reconnect_note(const cli_ctx_t *ctx, varlog_subscription_t *sub, reconnect_note_t *rn,
                           progress_t *pr, uint64_t n, uint64_t now)
{
    if (now - rn->last_look < RECONNECT_LOOK_MS)
        return;
    rn->last_look = now;
    varlog_subscription_health_t h;
    if (varlog_subscription_health(sub, &h) != VARLOG_OK)
        return;
    bool over = rn->down && (!h.reconnecting || h.outages != rn->outages);
    bool began = h.reconnecting && (!rn->down || over);
    if (!over && !began)
        return;
    if (pr->drawn)
        fputs("\r\033[K", stderr);
    pr->drawn = false;
    if (over)
        fprintf(stderr, "%s %s: back after %.1f s, reading again\n", ctx->prog, ctx->cmd,
                (double)(now - rn->since) / 1e3);
    rn->down = false;
    if (began) {
        char bound[64];
        if (h.timeout_ms < 0)
            snprintf(bound, sizeof bound, "waiting for ever; Ctrl-C stops");
        else
            snprintf(bound, sizeof bound, "giving up after %" PRId64 " ms without progress",
                     h.timeout_ms);
        fprintf(stderr, "%s %s: reconnecting after %" PRIu64 " %s: %s (%s)\n", ctx->prog, ctx->cmd,
                n, cli_plural((long long)n, "entry", "entries"), h.last_failure, bound);
        rn->down = true;
        rn->outages = h.outages;
        rn->since = now - (uint64_t)(h.down_ms > 0 ? h.down_ms : 0);
    }
}

int cli_consume(cli_ctx_t *ctx, varlog_subscription_t *sub, const cli_consume_opts_t *opts,
                uint64_t *entries)
{
    reconnect_note_t rn = {0};
    uint64_t n = 0;
    uint64_t last_entry_ms = now_ms();
    progress_t pr = {.on = opts->count_only && isatty(STDERR_FILENO) == 1,
                     .t0 = last_entry_ms,
                     .last_t = last_entry_ms};
    int rc = CLI_EXIT_OK;
    for (;;) {
        if (cli_stop_requested)
            break;
        if (opts->limit > 0 && n >= opts->limit)
            break;
        varlog_entry_t e;
        /* Short waits: a signal, the idle timeout and a tail are noticed promptly. */
        varlog_err_t err = varlog_subscription_next(sub, 200, &e);
        if (err == VARLOG_OK) {
            n++;
            last_entry_ms = now_ms();
            reconnect_note(ctx, sub, &rn, &pr, n, last_entry_ms);
            if (!opts->count_only)
                print_entry(&e);
            else if ((n & 1023) == 0)
                progress_draw(&pr, n, last_entry_ms);
            continue;
        }
        if (err == VARLOG_ERR_END)
            break;
        if (err == VARLOG_ERR_TIMED_OUT) {
            uint64_t now = now_ms();
            reconnect_note(ctx, sub, &rn, &pr, n, now);
            progress_draw(&pr, n, now);
            if (opts->idle_timeout_ms > 0 && now - last_entry_ms >= opts->idle_timeout_ms)
                break;
            if (!opts->count_only)
                fflush(stdout); /* a tail shows what came before it waits */
            continue;
        }
        if (pr.drawn)
            fputs("\r\033[K", stderr);
        pr.drawn = false;
        rc = cli_fail(ctx, err, "after %" PRIu64 " entries", n);
        break;
    }
    if (pr.drawn)
        fputs("\r\033[K", stderr);
    fflush(stdout);
    *entries = n;
    return rc;
}

int cli_topic_tail(cli_ctx_t *ctx, varlog_client_t *client, int32_t topic, uint64_t *last_glsn)
{
    int32_t ids[256];
    size_t n = 0;
    varlog_err_t err = varlog_client_log_streams(client, topic, ids, 256, &n);
    if (err != VARLOG_OK)
        return cli_fail(ctx, err, "listing the log streams of topic %" PRId32, topic);
    int32_t *all = ids;
    if (n > 256) {
        all = calloc(n, sizeof *all);
        if (!all)
            return cli_fail(ctx, VARLOG_ERR_NOMEM, "listing log streams");
        size_t again = 0;
        err = varlog_client_log_streams(client, topic, all, n, &again);
        if (err != VARLOG_OK) {
            free(all);
            return cli_fail(ctx, err, "listing the log streams of topic %" PRId32, topic);
        }
        n = again < n ? again : n;
    }
    uint64_t tail = 0;
    int rc = CLI_EXIT_OK;
    for (size_t i = 0; i < n; i++) {
        varlog_entry_meta_t first, last;
        err = varlog_peek(client, topic, all[i], -1, &first, &last, NULL);
        if (err != VARLOG_OK) {
            rc = cli_fail(ctx, err, "peeking log stream %" PRId32 " of topic %" PRId32, all[i],
                          topic);
            break;
        }
        if (last.glsn > tail)
            tail = last.glsn;
    }
    if (all != ids)
        free(all);
    *last_glsn = tail;
    return rc;
}

enum { OPT_TOPIC = 256, OPT_LS, OPT_BEGIN, OPT_END, OPT_COUNT, OPT_LIMIT, OPT_IDLE };
const struct option cli_subscribe_options[] = {
    {"topic", required_argument, NULL, OPT_TOPIC},
    {"begin", required_argument, NULL, OPT_BEGIN},
    {"end", required_argument, NULL, OPT_END},
    {"count", no_argument, NULL, OPT_COUNT},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"idle-timeout", required_argument, NULL, OPT_IDLE},
    {"metrics-listen", required_argument, NULL, CLI_OPT_METRICS_LISTEN},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};
const struct option cli_subscribe_to_options[] = {
    {"topic", required_argument, NULL, OPT_TOPIC},
    {"log-stream", required_argument, NULL, OPT_LS},
    {"begin", required_argument, NULL, OPT_BEGIN},
    {"end", required_argument, NULL, OPT_END},
    {"count", no_argument, NULL, OPT_COUNT},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"idle-timeout", required_argument, NULL, OPT_IDLE},
    {"metrics-listen", required_argument, NULL, CLI_OPT_METRICS_LISTEN},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* subscribe (topic-wide, GLSN order) and subscribe-to (one log stream, LLSN order): the same
 * options, but subscribe-to's --log-stream, and the same reading loop. */
static int read_command(cli_ctx_t *ctx, int argc, char **argv, bool by_llsn)
{
    const uint64_t max_pos = by_llsn ? VARLOG_LLSN_MAX : VARLOG_GLSN_MAX;
    int64_t topic = 1, ls = 0;
    uint64_t begin = 1, end = max_pos, limit = 0, idle = 0;
    bool end_given = false, end_now = false;
    cli_consume_opts_t copts = {0};
    cli_getopt_reset();
    int c;
    while ((c = cli_getopt_long(argc, argv, ":h",
                                by_llsn ? cli_subscribe_to_options : cli_subscribe_options)) !=
           -1) {
        bool ok = true;
        switch (c) {
        case OPT_TOPIC:
            ok = cli_parse_i64(ctx, "--topic", optarg, 1, INT32_MAX, false, &topic);
            break;
        case OPT_LS:
            ok = cli_parse_i64(ctx, "--log-stream", optarg, 1, INT32_MAX, false, &ls);
            break;
        case OPT_BEGIN:
            ok = cli_parse_u64(ctx, "--begin", optarg, 1, max_pos - 1, &begin);
            break;
        case OPT_END:
            end_given = true;
            if (strcmp(optarg, "now") == 0)
                end_now = true;
            else
                ok = cli_parse_u64(ctx, "--end", optarg, 2, max_pos, &end);
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
        case CLI_OPT_METRICS_LISTEN:
            ok = cli_metrics_listen_option(ctx, optarg);
            break;
        case 'h':
            if (by_llsn)
                usage_to(stdout, ctx);
            else
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
    if (by_llsn && ls == 0)
        return cli_usage_error(ctx, "--log-stream is required");
    if (!end_given && copts.count_only)
        end_now = true;
    if (!end_now && begin >= end)
        return cli_usage_error(ctx, "--begin %" PRIu64 " is not below --end %" PRIu64, begin, end);
    copts.limit = limit;
    copts.idle_timeout_ms = idle;

    /* A tail has no end to give up on: it rides out any outage, unless -X set a bound. */
    if (!end_given && !end_now && !cli_property_given(ctx, "subscribe.retry.timeout.ms"))
        varlog_conf_set(ctx->conf, "subscribe.retry.timeout.ms", "-1", NULL, 0);

    varlog_client_t *client = NULL;
    varlog_server_t *srv = NULL;
    cli_metrics_t *metrics = NULL;
    int rc = cli_open_client(ctx, &client, &srv);
    if (rc != CLI_EXIT_OK)
        return rc;
    rc = cli_metrics_start(ctx, client, &metrics);
    cli_catch_signals();
    if (rc == CLI_EXIT_OK && end_now && by_llsn) {
        varlog_entry_meta_t first, last;
        varlog_err_t err =
            varlog_peek(client, (int32_t)topic, (int32_t)ls, -1, &first, &last, NULL);
        if (err != VARLOG_OK)
            rc = cli_fail(ctx, err, "peeking log stream %" PRId64 " of topic %" PRId64, ls, topic);
        else
            end = last.llsn + 1;
    } else if (rc == CLI_EXIT_OK && end_now) {
        uint64_t last = 0;
        rc = cli_topic_tail(ctx, client, (int32_t)topic, &last);
        end = last + 1;
    }
    uint64_t n = 0;
    if (rc == CLI_EXIT_OK && begin < end) {
        varlog_subscription_t *sub = NULL;
        varlog_err_t err =
            by_llsn
                ? varlog_subscribe_to_iter(client, (int32_t)topic, (int32_t)ls, begin, end, &sub)
                : varlog_subscribe_iter(client, (int32_t)topic, begin, end, &sub);
        if (err != VARLOG_OK && by_llsn)
            rc = cli_fail(ctx, err, "subscribing to log stream %" PRId64 " of topic %" PRId64, ls,
                          topic);
        else if (err != VARLOG_OK)
            rc = cli_fail(ctx, err, "subscribing to topic %" PRId64, topic);
        else
            rc = cli_consume(ctx, sub, &copts, &n);
        varlog_subscription_close(&sub);
    }
    /* Cut short by a signal: a tail without end or limit ends that way; a range or a
     * limit did not finish, and the count of a part must not pass for the range's. */
    if (rc == CLI_EXIT_OK && cli_stop_requested && (end_given || end_now || limit > 0)) {
        fprintf(stderr, "%s %s: interrupted after %" PRIu64 " %s%s\n", ctx->prog, ctx->cmd, n,
                cli_plural((long long)n, "entry", "entries"),
                copts.count_only ? " (no count printed: the range was not read to its end)"
                                 : " (the range was not read to its end)");
        rc = CLI_EXIT_INTERRUPTED;
    }
    if (rc == CLI_EXIT_OK && copts.count_only)
        printf("%" PRIu64 "\n", n);
    cli_metrics_stop(&metrics);
    cli_close_client(client, srv);
    return rc;
}

int cmd_subscribe(cli_ctx_t *ctx, int argc, char **argv)
{
    return read_command(ctx, argc, argv, false);
}

int cmd_subscribe_to(cli_ctx_t *ctx, int argc, char **argv)
{
    return read_command(ctx, argc, argv, true);
}
