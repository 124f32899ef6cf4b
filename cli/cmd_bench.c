/* varlog-cli bench: append and/or subscribe throughput and append latency against ctx's
 * cluster. Producers share one topic-wide pipelined appender; each append call carries one
 * record and its send time (in the callback's opaque pointer: nothing is allocated per
 * record), and the callback, on the appender's one thread, records the latency into a
 * log-linear histogram (client/src/histogram.h). The subscribe phase reads a range of the
 * topic with the iterator form in GLSN order. A progress line goes to stderr every 500 ms
 * when stderr is a terminal; the summary goes to stdout, as text or one JSON object. */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "bench.h"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* --rate's pacing step: records due within the next step go out at once. */
#define RATE_STEP_NS 1000000

static void sleep_until_ns(int64_t t)
{
    struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0 && !cli_stop_requested) {
    }
}

/* The layout of every command's help (cli/cmd_*.c): usage lines, then two-space indented
 * text and options. */
static void print_usage(const cli_ctx_t *ctx)
{
    printf("usage: %s [OPTIONS] bench [--mode M] [--count N | --duration S]\n"
           "                  [--size B] [--producers N] [--rate R] [--batch N]\n"
           "                  [--linger MS] [--depth N] [--topic T] [--json]\n"
           "                  [--metrics-listen HOST:PORT]\n"
           "  Measures append and/or subscribe throughput and append latency. Producer\n"
           "  threads append generated records, one per call, through one topic-wide\n"
           "  pipelined appender; latency runs from the append call to its callback. The\n"
           "  subscribe phase reads the records back topic-wide in GLSN order (with --mode\n"
           "  subscribe alone: the topic's last --count records, appended first when the\n"
           "  topic holds fewer). Without --mr the embedded server's CPU counts as the\n"
           "  client's. A progress line goes to stderr when it is a terminal; the summary\n"
           "  goes to stdout.\n"
           "  --mode M         append, subscribe or both (default append)\n"
           "  --size B         bytes per record, 1..%d (default 100;\n"
           "                   " CLI_SIZE_SUFFIXES ")\n"
           "  --batch N        appender.batch.max.records: records per AppendRequest\n"
           "  --linger MS      appender.linger.ms: wait for a fuller batch\n"
           "  --depth N        appender.pipeline.depth: requests in flight per log stream\n"
           "  --producers N    producer threads, 1..%d (default 1)\n"
           "  --count N        records to append (" CLI_SIZE_SUFFIXES ")\n"
           "  --duration S     seconds to append for instead (default 10 when no --count)\n"
           "  --rate R         at most R records/s over all producers, paced in 1 ms steps\n"
           "                   (default: no limit)\n"
           "  --topic T        topic (default 1)\n"
           "  --json           print the summary as one JSON object\n" CLI_METRICS_HELP
           "  Exit status: 0 when every record was appended (and read back); 1 when some\n"
           "  failed or the cluster could not be used: stderr says what was done, and\n"
           "  stdout is empty, but for --json once the run began: the JSON summary then\n"
           "  counts the failures (\"ok\": false; append's \"failed\" and \"errors\" by\n"
           "  outcome and by error; subscribe's \"error\"); 2 bad arguments; 130\n"
           "  interrupted (Ctrl-C): the summary is marked interrupted (JSON\n"
           "  \"interrupted\": true) and covers what ran.\n",
           ctx->prog, MAX_RECORD, MAX_PRODUCERS);
}

static bool parse_double(const cli_ctx_t *ctx, const char *name, const char *text, double min,
                         double max, double *out)
{
    char *end = NULL;
    double v = strtod(text, &end);
    if (!text[0] || !end || *end || !(v >= min && v <= max)) {
        cli_usage_error(ctx, "%s: '%s' is not a number from %g to %g", name, text, min, max);
        return false;
    }
    *out = v;
    return true;
}

const struct option cli_bench_options[] = {
    {"mode", required_argument, NULL, 'm'},
    {"size", required_argument, NULL, 's'},
    {"batch", required_argument, NULL, 'b'},
    {"linger", required_argument, NULL, 'l'},
    {"depth", required_argument, NULL, 'd'},
    {"producers", required_argument, NULL, 'p'},
    {"duration", required_argument, NULL, 'D'},
    {"count", required_argument, NULL, 'n'},
    {"rate", required_argument, NULL, 'r'},
    {"topic", required_argument, NULL, 't'},
    {"json", no_argument, NULL, 'j'},
    {"metrics-listen", required_argument, NULL, CLI_OPT_METRICS_LISTEN},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int parse_args(cli_ctx_t *ctx, int argc, char **argv, bench_opts_t *o)
{
    int c;
    int64_t v;
    bool have_duration = false;
    cli_getopt_reset();
    while ((c = cli_getopt_long(argc, argv, ":m:s:b:l:d:p:D:n:r:t:jh", cli_bench_options)) != -1) {
        switch (c) {
        case 'm':
            if (strcmp(optarg, "append") == 0)
                o->mode = MODE_APPEND;
            else if (strcmp(optarg, "subscribe") == 0)
                o->mode = MODE_SUBSCRIBE;
            else if (strcmp(optarg, "both") == 0)
                o->mode = MODE_BOTH;
            else
                return cli_usage_error(ctx, "option --mode: '%s' is not append, subscribe or both",
                                       optarg);
            break;
        case 's':
            if (!cli_parse_i64(ctx, "--size", optarg, 1, MAX_RECORD, true, &v))
                return CLI_EXIT_USAGE;
            o->size = (size_t)v;
            break;
        case 'b':
            if (!cli_parse_i64(ctx, "--batch", optarg, 1, 1000000, true, &v))
                return CLI_EXIT_USAGE;
            o->batch = optarg;
            break;
        case 'l':
            if (!cli_parse_i64(ctx, "--linger", optarg, 0, 60000, false, &v))
                return CLI_EXIT_USAGE;
            o->linger = optarg;
            break;
        case 'd':
            if (!cli_parse_i64(ctx, "--depth", optarg, 1, 64, false, &v))
                return CLI_EXIT_USAGE;
            o->depth = optarg;
            break;
        case 'p':
            if (!cli_parse_i64(ctx, "--producers", optarg, 1, MAX_PRODUCERS, false, &v))
                return CLI_EXIT_USAGE;
            o->producers = (int)v;
            break;
        case 'D':
            if (!parse_double(ctx, "--duration", optarg, 0.001, 86400 * 365, &o->duration_s))
                return CLI_EXIT_USAGE;
            have_duration = true;
            break;
        case 'n':
            if (!cli_parse_i64(ctx, "--count", optarg, 1, INT64_MAX / 2, true, &v))
                return CLI_EXIT_USAGE;
            o->count = (uint64_t)v;
            break;
        case 'r':
            if (!parse_double(ctx, "--rate", optarg, 0.001, 1e12, &o->rate))
                return CLI_EXIT_USAGE;
            break;
        case 't':
            if (!cli_parse_i64(ctx, "--topic", optarg, 1, INT32_MAX, false, &v))
                return CLI_EXIT_USAGE;
            o->topic = (int32_t)v;
            break;
        case 'j':
            o->json = true;
            break;
        case CLI_OPT_METRICS_LISTEN:
            if (!cli_metrics_listen_option(ctx, optarg))
                return CLI_EXIT_USAGE;
            break;
        case 'h':
            print_usage(ctx);
            return -1;
        default:
            return cli_bad_option(ctx, c, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error(ctx, "unexpected argument '%s'", argv[optind]);
    if (have_duration && o->count)
        return cli_usage_error(ctx, "--duration and --count exclude each other");
    if (o->mode == MODE_SUBSCRIBE && have_duration)
        return cli_usage_error(ctx, "--mode subscribe reads --count records; --duration is for "
                                    "appending");
    if (o->mode == MODE_SUBSCRIBE && !o->count)
        o->count = 1000000;
    /* The embedded server keeps at most 1 GiB (payload, chunk slack and about 40 bytes per
     * entry) and trims its oldest entries beyond it, which a read-back would meet as TRIMMED:
     * refuse a count that cannot be read back rather than fail after appending it. */
    if (!ctx->mr && (o->mode & MODE_SUBSCRIBE) && o->count &&
        o->count > ((uint64_t)7 << 27) / (o->size + 64))
        return cli_usage_error(ctx,
                               "%" PRIu64 " records of %zu B do not fit in the embedded "
                               "server's 1 GiB to be read back (about %" PRIu64 " do)",
                               o->count, o->size, ((uint64_t)7 << 27) / (o->size + 64));
    return CLI_EXIT_OK;
}

static int set_prop(cli_ctx_t *ctx, const char *name, const char *value)
{
    char why[256];
    if (!value)
        return CLI_EXIT_OK;
    if (varlog_conf_set(ctx->conf, name, value, why, sizeof why) != VARLOG_OK)
        return cli_usage_error(ctx, "%s", why);
    return CLI_EXIT_OK;
}

static int64_t conf_int(const cli_ctx_t *ctx, const char *name)
{
    char buf[64];
    size_t n = sizeof buf;
    if (varlog_conf_get(ctx->conf, name, buf, &n) != VARLOG_OK)
        return -1;
    return strtoll(buf, NULL, 10);
}

/* ---- append ---- */

/* The run's state for the callback: the opaque pointer carries the send time, so the state
 * comes from here (one bench per process). */
static bench_append_t *g_bench;

static void note_failure(bench_append_t *b, const varlog_append_result_t *res)
{
    atomic_fetch_add_explicit(&b->failed, res->n, memory_order_relaxed);
    if ((unsigned)res->outcome < 3)
        b->failed_by_outcome[res->outcome] += res->n;
    size_t i = 0;
    while (i < b->nkinds && (b->kinds[i].outcome != res->outcome || b->kinds[i].err != res->err))
        i++;
    if (i == b->nkinds) {
        if (i == MAX_ERR_KINDS) {
            b->other_kinds += res->n;
            return;
        }
        b->kinds[b->nkinds++] = (err_kind_t){res->outcome, res->err, 0};
        if (i == 0)
            snprintf(b->first_errtext, sizeof b->first_errtext, "%s", res->errtext);
    }
    b->kinds[i].count += res->n;
}

static void on_appended(const varlog_append_result_t *res, void *opaque)
{
    bench_append_t *b = g_bench;
    vhist_record(&b->lat, now_ns() - (int64_t)(intptr_t)opaque);
    if (res->err != VARLOG_OK) {
        note_failure(b, res);
        return;
    }
    uint64_t g = res->metas[0].glsn, h = res->metas[res->n - 1].glsn;
    if (b->lo_glsn == 0 || g < b->lo_glsn)
        b->lo_glsn = g;
    if (h > b->hi_glsn)
        b->hi_glsn = h;
    atomic_fetch_add_explicit(&b->appended, res->n, memory_order_relaxed);
}

typedef struct producer {
    bench_append_t *b;
    int index;
    pthread_t thread;
} producer_t;

static void *produce(void *arg)
{
    producer_t *p = arg;
    bench_append_t *b = p->b;
    const bench_opts_t *o = b->o;
    uint8_t *buf = malloc(o->size);
    if (!buf) {
        atomic_store(&b->refused, VARLOG_ERR_NOMEM);
        goto out;
    }
    for (size_t i = 0; i < o->size; i++)
        buf[i] = (uint8_t)('a' + (i + (size_t)p->index) % 26);
    /* Each producer keeps its share of the rate on its own schedule. */
    double per_ns = o->rate > 0 ? 1e9 * (double)o->producers / o->rate : 0;
    int64_t t0 = now_ns();
    for (uint64_t i = 0; !cli_stop_requested; i++) {
        if (o->count) {
            if (atomic_fetch_add_explicit(&b->next_seq, 1, memory_order_relaxed) >= o->count)
                break;
        } else if (now_ns() >= b->t_end_ns) {
            break;
        }
        if (per_ns > 0) {
            /* Asleep only when a step or more ahead: a sleep costs the process more CPU than an
             * append (about 25 µs on a paravirtualised VM), and sleeping before every record
             * of a fast rate would charge that to the library's CPU per record. */
            int64_t due = t0 + (int64_t)(per_ns * (double)i);
            if (due - now_ns() >= RATE_STEP_NS)
                sleep_until_ns(due);
        }
        memcpy(buf, &i, o->size < sizeof i ? o->size : sizeof i); /* records differ */
        varlog_record_t rec = {.data = buf, .len = o->size};
        int64_t sent = now_ns();
        void *tag = (void *)(intptr_t)sent;
        varlog_err_t rc = varlog_appender_append(b->app, &rec, 1, 0, on_appended, tag);
        if (rc == VARLOG_ERR_QUEUE_FULL) {
            /* Counted, then waited for: the queue bound paces the producers. */
            atomic_fetch_add_explicit(&b->queue_full, 1, memory_order_relaxed);
            rc = varlog_appender_append(b->app, &rec, 1, -1, on_appended, tag);
        }
        if (rc != VARLOG_OK) {
            atomic_store(&b->refused, rc);
            break;
        }
        atomic_fetch_add_explicit(&b->sent, 1, memory_order_relaxed);
    }
out:
    free(buf);
    pthread_mutex_lock(&b->mu);
    atomic_fetch_add(&b->producers_done, 1);
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static uint64_t pending_records(varlog_appender_t *app)
{
    varlog_appender_stats_t st;
    if (varlog_appender_stats(app, &st) != VARLOG_OK)
        return 0;
    return st.pending_records;
}

/* Appends o->count records (or for o->duration_s) and waits for every callback. */
static int run_append(cli_ctx_t *ctx, varlog_client_t *client, const bench_opts_t *o,
                      uint64_t count, bench_append_t *b, phase_result_t *r)
{
    bench_opts_t oc = *o;
    oc.count = count;
    int status = CLI_EXIT_OK;
    varlog_err_t rc = varlog_appender_new(client, o->topic, 0, &b->app);
    if (rc != VARLOG_OK) {
        atomic_store(&b->refused, rc);
        return cli_fail(ctx, rc, "appender for topic %d", o->topic);
    }
    b->o = &oc;
    g_bench = b;
    producer_t prods[MAX_PRODUCERS];
    int started = 0;
    cli_progress_t pr;
    cli_progress_start(&pr);
    double cpu0 = cpu_seconds();
    int64_t t0 = now_ns();
    b->t_end_ns = t0 + (int64_t)(o->duration_s * 1e9);
    for (int i = 0; i < o->producers; i++) {
        prods[i] = (producer_t){.b = b, .index = i};
        if (pthread_create(&prods[i].thread, NULL, produce, &prods[i]) != 0) {
            fprintf(stderr, "%s %s: cannot start producer thread %d\n", ctx->prog, ctx->cmd, i);
            status = CLI_EXIT_FAIL;
            break;
        }
        started++;
    }
    pthread_mutex_lock(&b->mu);
    while (atomic_load(&b->producers_done) < started) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += 500000000;
        if (dl.tv_nsec >= 1000000000) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&b->cv, &b->mu, &dl);
        pthread_mutex_unlock(&b->mu);
        cli_progress_draw(&pr, "appended", atomic_load_explicit(&b->appended, memory_order_relaxed),
                          pending_records(b->app), o->size);
        pthread_mutex_lock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    for (int i = 0; i < started; i++)
        pthread_join(prods[i].thread, NULL);
    /* Every callback before the clock stops: confirmed records only. */
    size_t still = 0;
    int64_t flush_deadline = now_ns() + (int64_t)120 * 1000000000;
    while ((rc = varlog_appender_flush(b->app, 500, &still)) == VARLOG_ERR_TIMED_OUT &&
           now_ns() < flush_deadline) {
        cli_progress_draw(&pr, "appended", atomic_load_explicit(&b->appended, memory_order_relaxed),
                          pending_records(b->app), o->size);
    }
    r->elapsed_ns = now_ns() - t0;
    r->cpu_s = cpu_seconds() - cpu0;
    cli_progress_end(&pr);
    if (rc != VARLOG_OK && status == CLI_EXIT_OK)
        status = cli_fail(ctx, rc, "flush (%zu calls still pending after 120 s)", still);
    varlog_err_t refused = (varlog_err_t)atomic_load(&b->refused);
    if (refused != VARLOG_OK && status == CLI_EXIT_OK)
        status = cli_fail(ctx, refused, "append to topic %d", o->topic);
    varlog_appender_close(&b->app, 10000);
    g_bench = NULL;
    r->records = atomic_load(&b->appended);
    r->bytes = r->records * o->size;
    b->o = o;
    return status;
}

/* ---- subscribe ---- */

static int run_subscribe(cli_ctx_t *ctx, varlog_client_t *client, const bench_opts_t *o,
                         uint64_t lo, uint64_t hi, phase_result_t *r, varlog_err_t *err)
{
    cli_progress_t pr;
    cli_progress_start(&pr);
    double cpu0 = cpu_seconds();
    int64_t t0 = now_ns(), next_draw = t0 + 500000000;
    varlog_subscription_t *sub = NULL;
    varlog_err_t rc = varlog_subscribe_iter(client, o->topic, lo, hi + 1, &sub);
    *err = rc;
    if (rc != VARLOG_OK)
        return cli_fail(ctx, rc, "subscribe to topic %d, GLSN %" PRIu64 "..%" PRIu64, o->topic, lo,
                        hi);
    varlog_entry_t e;
    while (!cli_stop_requested) {
        rc = varlog_subscription_next(sub, 500, &e);
        if (rc == VARLOG_OK) {
            r->records++;
            r->bytes += e.len;
        } else if (rc != VARLOG_ERR_TIMED_OUT) {
            break;
        }
        if (pr.on && (rc == VARLOG_ERR_TIMED_OUT || (r->records & 1023) == 0) &&
            now_ns() >= next_draw) {
            cli_progress_draw(&pr, "read", r->records, hi - lo + 1 - r->records, o->size);
            next_draw = now_ns() + 500000000;
        }
    }
    r->elapsed_ns = now_ns() - t0;
    r->cpu_s = cpu_seconds() - cpu0;
    cli_progress_end(&pr);
    int status = CLI_EXIT_OK;
    *err = VARLOG_OK;
    if (rc == VARLOG_ERR_END) {
        /* the whole range */
    } else if (rc == VARLOG_OK || rc == VARLOG_ERR_TIMED_OUT) {
        status = CLI_EXIT_INTERRUPTED; /* a signal stopped it before the range's end */
    } else {
        *err = rc;
        status = cli_fail(ctx, rc, "subscribe to topic %d, GLSN %" PRIu64 "..%" PRIu64, o->topic,
                          lo, hi);
    }
    varlog_subscription_close(&sub);
    return status;
}

int cmd_bench(cli_ctx_t *ctx, int argc, char **argv)
{
    bench_opts_t o = {
        .mode = MODE_APPEND, .size = 100, .producers = 1, .duration_s = 10, .topic = 1};
    int status = parse_args(ctx, argc, argv, &o);
    if (status != CLI_EXIT_OK)
        return status < 0 ? CLI_EXIT_OK : status;
    if ((status = set_prop(ctx, "appender.batch.max.records", o.batch)) ||
        (status = set_prop(ctx, "appender.linger.ms", o.linger)) ||
        (status = set_prop(ctx, "appender.pipeline.depth", o.depth)))
        return status;
    int64_t batch = conf_int(ctx, "appender.batch.max.records");
    int64_t linger = conf_int(ctx, "appender.linger.ms");
    int64_t depth = conf_int(ctx, "appender.pipeline.depth");

    bench_append_t *b = calloc(1, sizeof *b);
    if (!b || vhist_init(&b->lat, 0) != 0) {
        free(b);
        fprintf(stderr, "%s %s: out of memory\n", ctx->prog, ctx->cmd);
        return CLI_EXIT_FAIL;
    }
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->o = &o;

    varlog_client_t *client = NULL;
    varlog_server_t *srv = NULL;
    cli_metrics_t *metrics = NULL;
    phase_result_t ar = {0}, sr = {0};
    varlog_err_t sub_err = VARLOG_OK;
    status = cli_open_client(ctx, &client, &srv);
    if (status == CLI_EXIT_OK)
        status = cli_metrics_start(ctx, client, &metrics);
    if (status != CLI_EXIT_OK)
        goto out;
    cli_catch_signals();

    uint64_t lo = 0, hi = 0;
    if (o.mode & MODE_APPEND) {
        status = run_append(ctx, client, &o, o.count, b, &ar);
        lo = b->lo_glsn;
        hi = b->hi_glsn;
        if (status == CLI_EXIT_OK && atomic_load(&b->failed) > 0)
            status = CLI_EXIT_FAIL;
    } else {
        /* The topic's last o.count records, appended first (not measured) if missing. */
        uint64_t tail = 0;
        if ((status = cli_topic_tail(ctx, client, o.topic, &tail)) != CLI_EXIT_OK)
            goto out;
        if (tail < o.count) {
            bench_append_t *pre = calloc(1, sizeof *pre);
            phase_result_t pr = {0};
            if (!pre || vhist_init(&pre->lat, 0) != 0) {
                free(pre);
                status = CLI_EXIT_FAIL;
                goto out;
            }
            pthread_mutex_init(&pre->mu, NULL);
            pthread_cond_init(&pre->cv, NULL);
            if (!ctx->quiet)
                fprintf(stderr, "%s %s: appending %" PRIu64 " records first (not measured)\n",
                        ctx->prog, ctx->cmd, o.count - tail);
            status = run_append(ctx, client, &o, o.count - tail, pre, &pr);
            if (status == CLI_EXIT_OK && atomic_load(&pre->failed) > 0)
                status = cli_fail(ctx, VARLOG_ERR_INTERNAL, "preloading: %" PRIu64 " failed",
                                  atomic_load(&pre->failed));
            vhist_destroy(&pre->lat);
            pthread_mutex_destroy(&pre->mu);
            pthread_cond_destroy(&pre->cv);
            free(pre);
            if (status != CLI_EXIT_OK)
                goto out;
            if ((status = cli_topic_tail(ctx, client, o.topic, &tail)) != CLI_EXIT_OK)
                goto out;
        }
        hi = tail;
        lo = tail >= o.count ? tail - o.count + 1 : 1;
    }
    bool sub_ran = false;
    if ((o.mode & MODE_SUBSCRIBE) && !cli_stop_requested) {
        if (hi >= lo && lo > 0) {
            sub_ran = true;
            int s = run_subscribe(ctx, client, &o, lo, hi, &sr, &sub_err);
            if (status == CLI_EXIT_OK || s == CLI_EXIT_FAIL)
                status = s;
        }
    }
    bench_summary_t sum = {.o = &o,
                           .b = b,
                           .ar = &ar,
                           .sr = &sr,
                           .sub_err = sub_err,
                           .sub_ran = sub_ran,
                           .interrupted = cli_stop_requested != 0,
                           .batch = batch,
                           .linger = linger,
                           .depth = depth};
    sum.ok = status == CLI_EXIT_OK || status == CLI_EXIT_INTERRUPTED;
    if (!sum.ok) {
        /* A failure: what was done on stderr. The text summary stays off stdout, where a
         * script could take it for a result; the JSON one says "ok": false and counts the
         * failures, so that a script can read what happened. */
        bench_print_failure(ctx, &sum);
        if (o.json && bench_print_json(ctx, &sum) != CLI_EXIT_OK)
            cli_fail(ctx, VARLOG_ERR_NOMEM, "building the JSON summary");
        goto out;
    }
    if (o.json) {
        if (bench_print_json(ctx, &sum) != CLI_EXIT_OK)
            status = cli_fail(ctx, VARLOG_ERR_NOMEM, "building the JSON summary");
    } else {
        bench_print_text(ctx, &sum);
    }
    if (sum.interrupted && status != CLI_EXIT_FAIL) {
        fprintf(stderr, "%s %s: interrupted: the summary covers what ran%s\n", ctx->prog, ctx->cmd,
                (o.mode & MODE_SUBSCRIBE) && !sub_ran ? " (the subscribe phase did not)" : "");
        status = CLI_EXIT_INTERRUPTED;
    }
out:
    cli_metrics_stop(&metrics);
    cli_close_client(client, srv);
    vhist_destroy(&b->lat);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    free(b);
    return status;
}
