/* varlog-cli demo: the main job end to end. Producers append generated records through one
 * topic-wide pipelined appender, then one topic-wide subscription reads them back in GLSN
 * order and every record is checked: read exactly once, at the position its callback
 * reported, with its bytes intact, GLSNs strictly increasing without a gap, and each
 * producer's records in order within each log stream (what the appender promises: in topic
 * mode consecutive calls may go to different log streams, whose GLSNs interleave as the
 * cluster commits them). Prints throughput and append latency; exit status 1 when a check
 * fails. */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* Every record starts with this header, then filler bytes derived from it. */
enum { HDR_BYTES = 24, MAX_LOG_STREAMS = 256, MAX_PRODUCERS = 256 };
static const uint32_t DEMO_MAGIC = 0x4d444c56u; /* "VLDM" */

typedef struct demo_run demo_run_t;

/* One per record: what its producer wrote before the append, what its callback learnt.
 * Only the appender's thread writes after the append, and flush orders that before the
 * main thread reads. */
typedef struct demo_slot {
    demo_run_t *run;
    int64_t t_ns;  /* send time; the latency (ns) once the callback ran */
    uint64_t glsn; /* 0 until appended */
} demo_slot_t;

struct demo_run {
    int32_t topic;
    uint32_t run_id; /* tells this run's records from older ones in the same topic */
    size_t size;
    uint64_t records;
    int producers;
    varlog_appender_t *app;
    demo_slot_t *slots; /* records slots; producer p owns [first(p), first(p + 1)) */
    /* written by the appender's thread only */
    uint64_t failed[3]; /* by outcome */
    varlog_err_t first_err;
    char first_errtext[256];
};

typedef struct demo_producer {
    demo_run_t *run;
    uint32_t index;
    uint64_t first, count;
    varlog_err_t err; /* of an append call that refused the record */
    pthread_t thread;
} demo_producer_t;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, sizeof v);
}
static void put_u64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, sizeof v);
}
static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint8_t filler(uint32_t producer, uint64_t seq, size_t i)
{
    return (uint8_t)(seq * 31u + producer * 7u + i);
}

static void fill_record(uint8_t *buf, size_t size, uint32_t run_id, uint32_t producer, uint64_t seq)
{
    put_u32(buf, DEMO_MAGIC);
    put_u32(buf + 4, run_id);
    put_u32(buf + 8, producer);
    put_u32(buf + 12, 0);
    put_u64(buf + 16, seq);
    for (size_t i = HDR_BYTES; i < size; i++)
        buf[i] = filler(producer, seq, i);
}

static void on_appended(const varlog_append_result_t *res, void *opaque)
{
    demo_slot_t *slot = opaque;
    int64_t now = now_ns();
    slot->t_ns = now - slot->t_ns;
    if (res->err == VARLOG_OK) {
        slot->glsn = res->metas[0].glsn;
        return;
    }
    demo_run_t *run = slot->run;
    if ((unsigned)res->outcome < 3)
        run->failed[res->outcome]++;
    if (run->first_err == VARLOG_OK) {
        run->first_err = res->err;
        snprintf(run->first_errtext, sizeof run->first_errtext, "%s (%s)", res->errtext,
                 varlog_outcome_name(res->outcome));
    }
}

static void *produce(void *arg)
{
    demo_producer_t *p = arg;
    demo_run_t *run = p->run;
    uint8_t buf[65536];
    for (uint64_t seq = 0; seq < p->count; seq++) {
        fill_record(buf, run->size, run->run_id, p->index, seq);
        demo_slot_t *slot = &run->slots[p->first + seq];
        slot->run = run;
        slot->t_ns = now_ns();
        varlog_record_t rec = {.data = buf, .len = run->size};
        /* -1: wait for room, so the queue bound paces the producers instead of failing them */
        varlog_err_t rc = varlog_appender_append(run->app, &rec, 1, -1, on_appended, slot);
        if (rc != VARLOG_OK) {
            p->err = rc;
            break;
        }
        if (cli_stop_requested)
            break;
    }
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted[0..n). */
static int64_t percentile(const int64_t *sorted, size_t n, double p)
{
    if (n == 0)
        return 0;
    double r = p / 100.0 * (double)n;
    size_t rank = (size_t)r;
    if ((double)rank < r)
        rank++;
    if (rank < 1)
        rank = 1;
    return sorted[(rank > n ? n : rank) - 1];
}

static double secs(int64_t ns)
{
    return (double)ns / 1e9;
}

static void print_usage(const cli_ctx_t *ctx)
{
    printf("usage: %s [OPTIONS] demo [--records N] [--size B] [--producers P]\n"
           "                  [--topic T] [--metrics-listen HOST:PORT]\n"
           "  Appends N generated records of B bytes from P producer threads through one\n"
           "  topic-wide pipelined appender, reads them back topic-wide in GLSN order and\n"
           "  checks that each record arrived exactly once, intact, at the GLSN its callback\n"
           "  reported, with GLSNs strictly increasing without a gap and each producer's\n"
           "  records in order within each log stream. Prints append and subscribe\n"
           "  throughput and append latency (from the append call to its callback).\n"
           "  --records N      records to append (default 1000000; " CLI_SIZE_SUFFIXES ")\n"
           "  --size B         bytes per record, %d..65536 (default 100;\n"
           "                   " CLI_SIZE_SUFFIXES ")\n"
           "  --producers P    producer threads, 1..%d (default 4)\n"
           "  --topic T        topic to use (default 1)\n" CLI_METRICS_HELP
           "  Exit status: 0 when every check passed, 1 when one failed or the cluster could\n"
           "  not be used, 2 bad arguments, 130 interrupted (Ctrl-C).\n",
           ctx->prog, HDR_BYTES, MAX_PRODUCERS);
}

typedef struct demo_check {
    uint64_t ours, foreign, bad_payload, wrong_position, out_of_order, not_increasing, gaps;
    uint64_t maybe_stored; /* records whose callback said MAYBE_APPENDED, found stored */
    uint64_t entries, bytes;
    int64_t elapsed_ns;
    varlog_err_t err;
} demo_check_t;

/* Reads [lo, hi] back and checks every entry against the slots. */
static void read_back(cli_ctx_t *ctx, varlog_client_t *client, demo_run_t *run, uint64_t lo,
                      uint64_t hi, uint8_t *seen, demo_check_t *ck)
{
    uint64_t first_of[MAX_PRODUCERS + 1];
    uint64_t per = run->records / (uint64_t)run->producers;
    uint64_t extra = run->records % (uint64_t)run->producers;
    for (int p = 0; p <= run->producers; p++)
        first_of[p] = (uint64_t)p * per + ((uint64_t)p < extra ? (uint64_t)p : extra);
    /* next expected-at-least sequence per (producer, log stream) */
    int32_t ls_ids[MAX_LOG_STREAMS];
    size_t nls = 0;
    uint64_t *next_seq = calloc((size_t)run->producers * MAX_LOG_STREAMS, sizeof *next_seq);
    if (!next_seq) {
        ck->err = VARLOG_ERR_NOMEM;
        return;
    }

    int64_t t0 = now_ns();
    varlog_subscription_t *sub = NULL;
    varlog_err_t rc = varlog_subscribe_iter(client, run->topic, lo, hi + 1, &sub);
    if (rc != VARLOG_OK) {
        ck->err = rc;
        free(next_seq);
        (void)cli_fail(ctx, rc, "subscribe to topic %d", run->topic);
        return;
    }
    uint64_t prev = 0;
    varlog_entry_t e;
    while (!cli_stop_requested) {
        rc = varlog_subscription_next(sub, 1000, &e);
        if (rc == VARLOG_ERR_TIMED_OUT)
            continue;
        if (rc != VARLOG_OK)
            break;
        if (prev != 0 && e.meta.glsn <= prev)
            ck->not_increasing++;
        else if (prev != 0 && e.meta.glsn != prev + 1)
            ck->gaps++;
        prev = e.meta.glsn;
        ck->entries++;
        ck->bytes += e.len;
        const uint8_t *d = e.data;
        if (e.len < HDR_BYTES || get_u32(d) != DEMO_MAGIC || get_u32(d + 4) != run->run_id) {
            ck->foreign++;
            continue;
        }
        uint32_t producer = get_u32(d + 8);
        uint64_t seq = get_u64(d + 16);
        if (producer >= (uint32_t)run->producers ||
            seq >= first_of[producer + 1] - first_of[producer] || e.len != run->size) {
            ck->bad_payload++;
            continue;
        }
        bool intact = true;
        for (size_t i = HDR_BYTES; i < e.len; i++)
            if (d[i] != filler(producer, seq, i)) {
                intact = false;
                break;
            }
        if (!intact) {
            ck->bad_payload++;
            continue;
        }
        uint64_t idx = first_of[producer] + seq;
        if (run->slots[idx].glsn == 0 && !seen[idx]) {
            /* a failed call: stored after all, as MAYBE_APPENDED allows */
            seen[idx] = 1;
            ck->maybe_stored++;
            continue;
        }
        /* a duplicate lands at a GLSN its callback did not report */
        if (seen[idx] || run->slots[idx].glsn != e.meta.glsn) {
            ck->wrong_position++;
            continue;
        }
        seen[idx] = 1;
        ck->ours++;
        size_t li = 0;
        while (li < nls && ls_ids[li] != e.meta.log_stream_id)
            li++;
        if (li == nls) {
            if (nls == MAX_LOG_STREAMS) {
                ck->out_of_order++; /* cannot tell: counted as a failure, not guessed */
                continue;
            }
            ls_ids[nls++] = e.meta.log_stream_id;
        }
        uint64_t *want = &next_seq[(size_t)producer * MAX_LOG_STREAMS + li];
        if (seq < *want)
            ck->out_of_order++;
        *want = seq + 1;
    }
    ck->elapsed_ns = now_ns() - t0;
    if (rc != VARLOG_ERR_END) {
        ck->err = rc == VARLOG_OK ? VARLOG_ERR_CLOSED : rc;
        if (rc != VARLOG_OK)
            (void)cli_fail(ctx, rc, "subscribe to topic %d, GLSN %" PRIu64 "..%" PRIu64, run->topic,
                           lo, hi);
    } else if (prev != hi) {
        ck->gaps++;
    }
    varlog_subscription_close(&sub);
    free(next_seq);
}

const struct option cli_demo_options[] = {
    {"records", required_argument, NULL, 'n'},
    {"size", required_argument, NULL, 's'},
    {"producers", required_argument, NULL, 'p'},
    {"topic", required_argument, NULL, 't'},
    {"metrics-listen", required_argument, NULL, CLI_OPT_METRICS_LISTEN},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int parse_args(cli_ctx_t *ctx, int argc, char **argv, demo_run_t *run)
{
    int c;
    int64_t v;
    while ((c = cli_getopt_long(argc, argv, ":n:s:p:t:h", cli_demo_options)) != -1) {
        switch (c) {
        case 'n':
            if (!cli_parse_i64(ctx, "--records", optarg, 1, 100000000, true, &v))
                return CLI_EXIT_USAGE;
            run->records = (uint64_t)v;
            break;
        case 's':
            if (!cli_parse_i64(ctx, "--size", optarg, HDR_BYTES, 65536, true, &v))
                return CLI_EXIT_USAGE;
            run->size = (size_t)v;
            break;
        case 'p':
            if (!cli_parse_i64(ctx, "--producers", optarg, 1, MAX_PRODUCERS, false, &v))
                return CLI_EXIT_USAGE;
            run->producers = (int)v;
            break;
        case 't':
            if (!cli_parse_i64(ctx, "--topic", optarg, 1, INT32_MAX, false, &v))
                return CLI_EXIT_USAGE;
            run->topic = (int32_t)v;
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
    if ((uint64_t)run->producers > run->records)
        return cli_usage_error(ctx, "--producers %d is more than --records %" PRIu64,
                               run->producers, run->records);
    /* The embedded server keeps at most 1 GiB (payload, chunk slack and 40 bytes of metadata
     * per entry, in arrays that grow by doubling) and trims the oldest entries beyond it,
     * which the read-back would see as TRIMMED: refuse what may not fit, with a margin,
     * rather than fail after the appends. */
    if (!ctx->mr && run->records * (run->size + 128) > (uint64_t)7 << 27)
        return cli_usage_error(ctx,
                               "%" PRIu64 " records of %zu B do not fit in the embedded "
                               "server's 1 GiB (about %" PRIu64 " do)",
                               run->records, run->size, ((uint64_t)7 << 27) / (run->size + 128));
    return CLI_EXIT_OK;
}

/* Runs the producers and waits until every callback ran. Returns the append phase's time. */
static int append_all(cli_ctx_t *ctx, demo_run_t *run, int64_t *elapsed_ns)
{
    demo_producer_t prods[MAX_PRODUCERS];
    uint64_t per = run->records / (uint64_t)run->producers;
    uint64_t extra = run->records % (uint64_t)run->producers;
    uint64_t first = 0;
    int started = 0, status = CLI_EXIT_OK;
    int64_t t0 = now_ns();
    for (int p = 0; p < run->producers; p++) {
        uint64_t count = per + ((uint64_t)p < extra ? 1 : 0);
        prods[p] =
            (demo_producer_t){.run = run, .index = (uint32_t)p, .first = first, .count = count};
        first += count;
        if (pthread_create(&prods[p].thread, NULL, produce, &prods[p]) != 0) {
            fprintf(stderr, "%s %s: cannot start producer thread %d\n", ctx->prog, ctx->cmd, p);
            status = CLI_EXIT_FAIL;
            break;
        }
        started++;
    }
    for (int p = 0; p < started; p++) {
        pthread_join(prods[p].thread, NULL);
        if (prods[p].err != VARLOG_OK && status == CLI_EXIT_OK)
            status = cli_fail(ctx, prods[p].err, "append by producer %d", p);
    }
    size_t pending = 0;
    varlog_err_t rc = varlog_appender_flush(run->app, 60000, &pending);
    *elapsed_ns = now_ns() - t0;
    if (rc != VARLOG_OK && status == CLI_EXIT_OK)
        status = cli_fail(ctx, rc, "flush (%zu calls still pending after 60 s)", pending);
    return status;
}

static int report(const demo_run_t *run, int64_t append_ns, const demo_check_t *ck)
{
    size_t n = 0;
    int64_t *lat = malloc((size_t)run->records * sizeof *lat);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint64_t i = 0; i < run->records; i++) {
        const demo_slot_t *s = &run->slots[i];
        if (s->glsn == 0)
            continue;
        if (lat)
            lat[n] = s->t_ns;
        n++;
        lo = s->glsn < lo ? s->glsn : lo;
        hi = s->glsn > hi ? s->glsn : hi;
    }
    double mb = (double)n * (double)run->size / 1e6;
    printf("append:    %" PRIu64 " records of %zu B in %.2f s: %.0f records/s, %.1f MB/s "
           "(%d producers, one topic-wide appender)\n",
           (uint64_t)n, run->size, secs(append_ns), (double)n / secs(append_ns),
           mb / secs(append_ns), run->producers);
    if (lat && n > 0) {
        qsort(lat, n, sizeof *lat, cmp_i64);
        printf("latency:   p50 %.2f ms, p99 %.2f ms, max %.2f ms (append call to its callback)\n",
               (double)percentile(lat, n, 50) / 1e6, (double)percentile(lat, n, 99) / 1e6,
               (double)lat[n - 1] / 1e6);
    }
    free(lat);
    uint64_t failed = run->failed[0] + run->failed[1] + run->failed[2];
    if (failed)
        printf("failed:    %" PRIu64 " NOT_APPENDED, %" PRIu64 " MAYBE_APPENDED; first: %s: %s\n",
               run->failed[VARLOG_NOT_APPENDED], run->failed[VARLOG_MAYBE_APPENDED],
               varlog_err_name(run->first_err), run->first_errtext);
    if (ck->elapsed_ns > 0)
        printf("subscribe: %" PRIu64 " entries in %.2f s: %.0f entries/s, %.1f MB/s "
               "(GLSN %" PRIu64 "..%" PRIu64 ", topic-wide)\n",
               ck->entries, secs(ck->elapsed_ns), (double)ck->entries / secs(ck->elapsed_ns),
               (double)ck->bytes / 1e6 / secs(ck->elapsed_ns), lo, hi);
    if (ck->maybe_stored)
        printf("note:      %" PRIu64 " of the MAYBE_APPENDED records were stored after all\n",
               ck->maybe_stored);
    if (ck->foreign)
        printf("note:      %" PRIu64 " entries in the range were written by others\n", ck->foreign);
    uint64_t missing = run->records - ck->ours - ck->maybe_stored;
    bool ok = failed == 0 && ck->err == VARLOG_OK && missing == 0 && ck->bad_payload == 0 &&
              ck->wrong_position == 0 && ck->out_of_order == 0 && ck->not_increasing == 0 &&
              ck->gaps == 0;
    if (ok) {
        printf("check:     OK: every record read back exactly once, intact, at the GLSN its "
               "callback reported; GLSNs strictly increasing without a gap; each producer's "
               "records in order within each log stream\n");
        return CLI_EXIT_OK;
    }
    printf("check:     FAILED: %" PRIu64 " missing, %" PRIu64 " corrupt, %" PRIu64
           " duplicated or at another GLSN than reported, %" PRIu64
           " out of producer order, %" PRIu64 " GLSNs not increasing, %" PRIu64 " gaps%s\n",
           missing, ck->bad_payload, ck->wrong_position, ck->out_of_order, ck->not_increasing,
           ck->gaps, ck->err != VARLOG_OK ? ", read-back ended early" : "");
    return CLI_EXIT_FAIL;
}

int cmd_demo(cli_ctx_t *ctx, int argc, char **argv)
{
    demo_run_t run = {.topic = 1, .size = 100, .records = 1000000, .producers = 4};
    int status = parse_args(ctx, argc, argv, &run);
    if (status != CLI_EXIT_OK)
        return status < 0 ? CLI_EXIT_OK : status;
    run.run_id = (uint32_t)now_ns() ^ ((uint32_t)getpid() << 16);

    run.slots = calloc(run.records, sizeof *run.slots);
    uint8_t *seen = calloc(run.records, 1);
    if (!run.slots || !seen) {
        free(run.slots);
        free(seen);
        fprintf(stderr, "%s %s: out of memory for %" PRIu64 " records\n", ctx->prog, ctx->cmd,
                run.records);
        return CLI_EXIT_FAIL;
    }
    cli_catch_signals();
    varlog_client_t *client = NULL;
    varlog_server_t *srv = NULL;
    cli_metrics_t *metrics = NULL;
    status = cli_open_client(ctx, &client, &srv);
    if (status != CLI_EXIT_OK) {
        free(run.slots);
        free(seen);
        return status;
    }
    if ((status = cli_metrics_start(ctx, client, &metrics)) != CLI_EXIT_OK)
        goto out;
    size_t nls = 0;
    (void)varlog_client_log_streams(client, run.topic, NULL, 0, &nls);
    printf("demo:      %" PRIu64 " records of %zu B from %d producers to topic %d (%zu log "
           "streams) at %s\n",
           run.records, run.size, run.producers, run.topic, nls,
           srv ? varlog_server_address(srv) : ctx->mr);
    fflush(stdout);

    varlog_err_t rc = varlog_appender_new(client, run.topic, 0, &run.app);
    if (rc != VARLOG_OK) {
        status = cli_fail(ctx, rc, "appender for topic %d", run.topic);
        goto out;
    }
    int64_t append_ns = 0;
    status = append_all(ctx, &run, &append_ns);
    /* close settles whatever flush left pending, so every slot is final before it is read */
    (void)varlog_appender_close(&run.app, 0);

    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint64_t i = 0; i < run.records; i++) {
        uint64_t g = run.slots[i].glsn;
        if (g != 0) {
            lo = g < lo ? g : lo;
            hi = g > hi ? g : hi;
        }
    }
    demo_check_t ck = {.err = VARLOG_OK};
    if (hi > 0 && !cli_stop_requested)
        read_back(ctx, client, &run, lo, hi, seen, &ck);
    else if (hi == 0)
        ck.err = VARLOG_ERR_STATE;
    if (cli_stop_requested) {
        /* No check ran to its end: a FAILED line about missing records would be about the
         * interruption, not about the library. */
        fprintf(stderr, "%s %s: interrupted before the check completed\n", ctx->prog, ctx->cmd);
        status = CLI_EXIT_INTERRUPTED;
        goto out;
    }
    int checked = report(&run, append_ns, &ck);
    if (status == CLI_EXIT_OK)
        status = checked;
out:
    cli_metrics_stop(&metrics);
    cli_close_client(client, srv);
    free(run.slots);
    free(seen);
    return status;
}
