/* bench_append: the append paths, printed as Go benchmark lines.
 *
 *   bench_append [-mr HOST:PORT[,HOST:PORT...]] [-topic ID] [-logstream ID] [-inproc]
 *                [-server PATH] [-size BYTES] [-producers N] [-appenders per-ls]
 *                [-benchtime=D|Nx] [-count=N] [-bench=REGEX] [FILTER]
 *
 * (-benchtime, -count, -bench and FILTER: see harness.h. FILTER keeps the benchmarks whose
 * full name contains it, so "BenchmarkAppender/size=100/batch=1000/depth=2/producers=1" runs
 * one row and "Appender/size=100/" the 100-byte rows.)
 *
 * Two families of rows:
 *
 *   AppendTo/..., Append/..., AppendParallel/..., AppendRetry/...: the synchronous calls
 *   (varlog_append_to, varlog_append), an op being one call of `batch` records, against the
 *   embedded server in this process (or -mr).
 *
 *   Appender/size=S/batch=B/depth=D/producers=P (bench_append_pipe.c): the pipelined
 *   appender (varlog/appender.h) with appender.batch.max.records = B and
 *   appender.pipeline.depth = D. P producer threads share b.N single-record calls
 *   (varlog_appender_append with n 1 and timeout -1, a callback that counts; -call N: calls
 *   of N records each, named .../call=N, as Go's benchmark hands its appender whole batches
 *   of --batch-size); an op is one record. After the loop the round flushes, and the clock
 *   stops when the last callback has returned. By default these rows run against a
 *   varlog-server started as a child process (-server PATH, default the one built with this
 *   program), so that the benchmark process's CPU time is the client's alone; -inproc runs
 *   them against the embedded server in this process instead (then CPU and allocations
 *   include the server's).
 *
 * -mr: the metadata repository of a cluster to benchmark (a real Varlog cluster, or a
 * varlog-server started by hand) instead of the embedded or child server, for both
 * families; -topic (default 1) the topic to append to there; -logstream (default 1) the log
 * stream of the appender rows (0: a topic-wide appender), while AppendTo uses the topic's
 * first log stream. The AppendRetry benchmarks need the embedded server's fault injection and
 * are left out with -mr. Records appended to a cluster stay there.
 *
 * -call N (1 to 1000, at most the batch): records per varlog_appender_append call in the
 * Appender rows, instead of 1. -ref: the Appender rows append with varlog_appender_append_ref
 * (the records' bytes sent from where they are, no copy; a release that does nothing, as
 * for bytes that outlive the client), named .../ref. Every record is the same bytes, as Go's
 * benchmark sends one message: with -ref gRPC and the kernel read them from the cache where
 * the copy writes each record to memory of its own.
 *
 * -size BYTES: the Appender rows' record size (1 to 4096) instead of the grid's 100 and 1024,
 * so that a run writes the same bytes as another client's benchmark (bench/side-by-side.py
 * uses 128, Varlog's Go benchmark's --msg-size). -producers N (1 to 16): the rows' producer
 * threads instead of the grid's 1 and 4.
 *
 * -appenders per-ls (with -mr): the rows become AppenderPerLS/...: one client with one
 * appender bound to each log stream of -topic (what an application writing to chosen log
 * streams holds, and the shape of Varlog's Go benchmark with one --target per log stream),
 * instead of the one appender of -logstream. Each producer appends runs of `batch` records
 * to one appender, then moves to the next (producer k starts at appender k x L / P, for L
 * log streams and P producers), so every appender fills whole batches as Go's benchmark
 * hands them over. records/batch and ctxsw/request count the AppendRequests of all the
 * appenders. bench/scale.py compares both shapes with Go's benchmark.
 *
 * Each benchmark (and each -count repetition) gets a fresh server (embedded: 1 topic, 2 log
 * streams; child: 1 topic, 1 log stream, --max-bytes 8 GiB) and a fresh client (and
 * appender), so that deny lists, stored records and fault settings never carry over;
 * opening them, and a warm-up of about 100 ms on the same client, are not measured. Then, as
 * Go's testing package does, rounds of b.N ops run until one takes at least -benchtime
 * (default 1 s); that round is reported. With -benchtime=Nx one round of exactly N ops runs
 * after the warm-up. An Appender round of more calls than any before it is preceded by the
 * same calls and flush outside the clock, so that the batch slots a burst adds (a 1 MiB
 * reservation each) are not counted as per-record cost: the rows measure the steady state
 * (pipe_prime).
 *
 * Line format: name-GOMAXPROCS, iterations, ns/op, MB/s (payload bytes of one op, as Go's
 * b.SetBytes), B/op, allocs/op (averages with decimals), then extra metrics:
 *   records/s        records stored per second (batch x ops / elapsed);
 *   cpu-us/record    (Appender rows) user + system CPU time of this whole process
 *                    (getrusage RUSAGE_SELF, every thread: producers, the appender's thread,
 *                    gRPC's) over the round, per record;
 *   srv-cpu-us/record (Appender rows against a child server) the child's CPU time per record
 *                    (/proc/PID/stat, 10 ms ticks);
 *   all-allocs/op    every allocation of the process per op, gRPC's included (alloc_all.c);
 *   records/batch    (Appender rows) records per AppendRequest sent (appender stats);
 *   ctxsw/request    (Appender rows) voluntary + involuntary context switches of this whole
 *                    process (getrusage RUSAGE_SELF, every thread) over the round, per
 *                    AppendRequest sent: how many times the client's threads slept or were
 *                    preempted for each request.
 *
 * Allocations: B/op and allocs/op count what libvarlog's own code allocates (malloc, calloc
 * and realloc wrapped at link time, -Wl,--wrap, alloc_count.c): the client, the pool, the
 * generated protobuf-c code, and the embedded server when it runs in this process. They are
 * process-wide (every thread) while the clock runs. all-allocs/op adds what shared libraries
 * allocate (gRPC slices, byte buffers, call state, unpacked protobuf messages, absl,
 * libstdc++), seen by interposing malloc in the executable (alloc_all.c). B/op counts
 * requested bytes (realloc: the new size). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "varlog/appender.h"
#include "varlog/client.h"
#include "varlog/conf.h"
#include "varlog/server.h"
#include "alloc_count.h"
#include "bench_append.h"
#include "bench_client.h"
#include "harness.h"

#ifndef VARLOG_SERVER_PROGRAM
#define VARLOG_SERVER_PROGRAM "varlog-server"
#endif

#define APPEND_TIMEOUT_MS 30000
#define MAX_BATCH 16
#define MAX_THREADS 16
#define FAULT_METHOD "/varlog.snpb.LogIO/Append"

void append_fail(bench_b_t *b, const char *what, varlog_err_t rc, const char *text)
{
    b_failf(b, "%s: %s (%s)%s%s", what, varlog_err_name(rc), varlog_err_str(rc),
            text && text[0] ? ": " : "", text ? text : "");
}

/* ---- benchmark cases ----------------------------------------------------------------- */

typedef enum { M_APPEND_TO, M_APPEND } append_mode_t;

typedef struct bcase {
    const char *name;   /* without the "Benchmark" prefix */
    append_mode_t mode; /* varlog_append_to (topic 1, log stream 1) or varlog_append (topic 1) */
    int threads;        /* 0: the benchmark thread calls; else that many threads share the client */
    size_t batch;       /* records per call */
    size_t size;        /* bytes per record */
    bool refuse_first;  /* every call's first attempt is refused by fault injection */
    const char *conf[8]; /* extra property name, value pairs; NULL ends */
} bcase_t;

typedef struct env {
    varlog_server_t *srv; /* NULL with -mr */
    varlog_client_t *client;
    int32_t log_stream; /* AppendTo's: the topic's first log stream */
} env_t;

static uint8_t payload[MAX_SIZE];

const char *cluster_address;
int32_t topic_id = 1;
int32_t appender_log_stream = 1;
bool appender_inproc;
bool appenders_per_ls;
int32_t records_per_call = 1;
bool append_by_ref;
const char *server_program = VARLOG_SERVER_PROGRAM;

static int env_open(env_t *e, const bcase_t *c)
{
    if (!cluster_address) {
        varlog_server_opts_t o = {
            .topics = 1, .log_streams_per_topic = 2, .max_bytes = SERVER_MAX_BYTES};
        varlog_err_t rc = varlog_server_start(&o, &e->srv);
        if (rc != VARLOG_OK) {
            fprintf(stderr, "varlog_server_start: %s: %s\n", varlog_err_name(rc),
                    varlog_last_error());
            return -1;
        }
    }
    if (bench_client_open(e->srv ? varlog_server_address(e->srv) : cluster_address, c->conf,
                          &e->client) != 0)
        goto fail;
    size_t n = 0;
    varlog_err_t rc = varlog_client_log_streams(e->client, topic_id, &e->log_stream, 1, &n);
    if (rc != VARLOG_OK || n == 0) {
        fprintf(stderr, "topic %d: %s\n", topic_id,
                rc != VARLOG_OK ? varlog_last_error() : "it has no log stream");
        varlog_client_destroy(e->client);
        e->client = NULL;
        goto fail;
    }
    return 0;
fail:
    varlog_server_destroy(e->srv);
    e->srv = NULL;
    return -1;
}

/* The benchmark's setup: a fresh server and client per -count repetition. */
static void *env_setup(const void *arg)
{
    env_t *e = calloc(1, sizeof(*e));
    if (e && env_open(e, arg) != 0) {
        free(e);
        e = NULL;
    }
    return e;
}

static void env_teardown(void *ctx)
{
    env_t *e = ctx;
    varlog_client_destroy(e->client);
    varlog_server_destroy(e->srv);
    free(e);
}

static void make_records(const bcase_t *c, varlog_record_t *recs)
{
    for (size_t i = 0; i < c->batch; i++)
        recs[i] = (varlog_record_t){.data = payload, .len = c->size};
}

static varlog_err_t one_call(env_t *e, const bcase_t *c, const varlog_record_t *recs,
                             varlog_entry_meta_t *metas)
{
    if (c->mode == M_APPEND_TO)
        return varlog_append_to(e->client, topic_id, e->log_stream, recs, c->batch,
                                APPEND_TIMEOUT_MS, metas, NULL);
    return varlog_append(e->client, topic_id, recs, c->batch, APPEND_TIMEOUT_MS, metas, NULL);
}

/* One thread of a parallel benchmark: takes calls from a shared counter, as Go's
 * RunParallel hands out b.N. */
typedef struct worker {
    env_t *e;
    const bcase_t *c;
    atomic_long *next;
    long n;
    varlog_err_t rc;
    char text[384];
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    varlog_record_t recs[MAX_BATCH];
    varlog_entry_meta_t metas[MAX_BATCH];
    make_records(w->c, recs);
    while (atomic_fetch_add_explicit(w->next, 1, memory_order_relaxed) < w->n) {
        varlog_err_t rc = one_call(w->e, w->c, recs, metas);
        if (rc != VARLOG_OK) {
            w->rc = rc;
            snprintf(w->text, sizeof(w->text), "%s", varlog_last_error());
            atomic_store(w->next, w->n); /* the others stop too */
            break;
        }
    }
    return NULL;
}

/* One round of b->n calls. */
static void bench_round(bench_b_t *b)
{
    const bcase_t *c = b->arg;
    env_t *e = b->ctx;
    varlog_client_stats_t s0, s1;
    varlog_client_stats(e->client, &s0);
    varlog_record_t recs[MAX_BATCH];
    varlog_entry_meta_t metas[MAX_BATCH];
    make_records(c, recs);
    b_reset_timer(b);
    uint64_t all0 = alloc_count_all_allocs();
    if (c->threads == 0) {
        for (long i = 0; i < b->n; i++) {
            if (c->refuse_first) {
                /* Arm one refusal per call: fail_next counts Append requests, so arming
                 * b->n of them at once would refuse the retries as well. Arming copies the
                 * message (a malloc), so the clock and the counters pause around it. */
                b_stop_timer(b);
                varlog_err_t frc =
                    varlog_server_fail_next(e->srv, FAULT_METHOD, 14, "not primary replica", 1);
                b_start_timer(b);
                if (frc != VARLOG_OK)
                    return append_fail(b, "varlog_server_fail_next", frc, varlog_last_error());
            }
            varlog_err_t rc = one_call(e, c, recs, metas);
            if (rc != VARLOG_OK)
                return append_fail(b, "append", rc, varlog_last_error());
        }
    } else {
        pthread_t th[MAX_THREADS];
        worker_t w[MAX_THREADS];
        atomic_long next = 0;
        int started = 0;
        bool create_failed = false;
        for (int k = 0; k < c->threads; k++) {
            w[k] = (worker_t){.e = e, .c = c, .next = &next, .n = b->n, .rc = VARLOG_OK};
            if (pthread_create(&th[k], NULL, worker_main, &w[k]) != 0) {
                atomic_store(&next, b->n);
                create_failed = true;
                break;
            }
            started++;
        }
        for (int k = 0; k < started; k++)
            pthread_join(th[k], NULL);
        for (int k = 0; k < started; k++) {
            if (w[k].rc != VARLOG_OK)
                return append_fail(b, "append", w[k].rc, w[k].text);
        }
        if (create_failed)
            return append_fail(b, "pthread_create", VARLOG_ERR_INTERNAL, NULL);
    }
    uint64_t all1 = alloc_count_all_allocs();
    b_stop_timer(b);
    varlog_client_stats(e->client, &s1);
    uint64_t ok = s1.appends_ok - s0.appends_ok, retries = s1.append_retries - s0.append_retries;
    if (ok != (uint64_t)b->n)
        return append_fail(b, "appends_ok differs from b.N", VARLOG_ERR_INTERNAL, NULL);
    if (retries != (c->refuse_first ? (uint64_t)b->n : 0)) {
        char t[96];
        snprintf(t, sizeof(t), "%llu retries in %ld calls", (unsigned long long)retries, b->n);
        return append_fail(b, "unexpected retry count", VARLOG_ERR_INTERNAL, t);
    }
    double secs = (double)b_elapsed_ns(b) / 1e9;
    b_set_bytes(b, (int64_t)(c->batch * c->size));
    b_report_metric(b, secs > 0 ? (double)c->batch * (double)b->n / secs : 0, "records/s");
    /* With refusals armed between calls the server's copies of the fault are in it too. */
    if (!c->refuse_first)
        b_report_metric(b, (double)(all1 - all0) / (double)b->n, "all-allocs/op");
}

/* Takes this program's flags out of argv; the rest goes to the harness. Returns false on a
 * bad value. */
static bool take_own_flags(int *argc, char **argv)
{
    int32_t size = 0;
    const bench_target_flags_t target = {.inproc = &appender_inproc,
                                         .cluster_address = &cluster_address,
                                         .server_program = &server_program,
                                         .topic_id = &topic_id,
                                         .log_stream = &appender_log_stream,
                                         .size = &size,
                                         .logstream_min = 0,
                                         .size_max = MAX_SIZE};
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        bool ok = true;
        const char *v = NULL;
        if (bench_flag(*argc, argv, &i, "producers", true, &v)) {
            int32_t p = 0;
            if (!v || !bench_parse_int(argv[0], "producers", v, 1, &p) || p > MAX_PRODUCERS) {
                fprintf(stderr, "%s: -producers wants 1 to %d\n", argv[0], MAX_PRODUCERS);
                return false;
            }
            pipe_grid_producers(p);
        } else if (bench_flag(*argc, argv, &i, "appenders", true, &v)) {
            if (!v || (strcmp(v, "per-ls") != 0 && strcmp(v, "one") != 0)) {
                fprintf(stderr, "%s: -appenders wants per-ls or one\n", argv[0]);
                return false;
            }
            appenders_per_ls = strcmp(v, "per-ls") == 0;
        } else if (bench_flag(*argc, argv, &i, "call", true, &v)) {
            if (!v || !bench_parse_int(argv[0], "call", v, 1, &records_per_call) ||
                records_per_call > MAX_CALL) {
                fprintf(stderr, "%s: -call wants 1 to %d records\n", argv[0], MAX_CALL);
                return false;
            }
        } else if (bench_flag(*argc, argv, &i, "ref", false, &v)) {
            append_by_ref = true;
        } else if (!bench_target_flag(*argc, argv, &i, &target, &ok)) {
            argv[out++] = argv[i];
        } else if (!ok) {
            return false;
        }
    }
    if (appenders_per_ls && !cluster_address) {
        fprintf(stderr, "%s: -appenders per-ls needs -mr (a cluster's topic of many log streams)\n",
                argv[0]);
        return false;
    }
    if (size > 0)
        pipe_grid_size((size_t)size);
    argv[out] = NULL;
    *argc = out;
    return true;
}

int main(int argc, char **argv)
{
    if (!take_own_flags(&argc, argv))
        return 2;
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)('a' + i % 26);
    pipe_payload_fill();

    static const bcase_t cases[] = {
        {.name = "AppendTo/batch=1/size=100", .mode = M_APPEND_TO, .batch = 1, .size = 100},
        {.name = "AppendTo/batch=16/size=100", .mode = M_APPEND_TO, .batch = 16, .size = 100},
        {.name = "Append/batch=1/size=100", .mode = M_APPEND, .batch = 1, .size = 100},
        {.name = "AppendParallel/threads=4/batch=1/size=100",
         .mode = M_APPEND,
         .threads = 4,
         .batch = 1,
         .size = 100},
        /* varlog_append_to with every call's first attempt refused (UNAVAILABLE "not primary
         * replica": certainly not stored, so retried). A retried call costs the refused
         * attempt, the first backoff (drawn from [0.5, 1) ms for append.retry.backoff.ms = 1,
         * waited on the engine's timer queue), a metadata lookup that waits lookup.batch.wait.ms
         * (default 5 ms) for other retries to share its GetMetadata call, and the second attempt.
         */
        {.name = "AppendRetry/batch=1",
         .mode = M_APPEND_TO,
         .batch = 1,
         .size = 100,
         .refuse_first = true,
         .conf = {"append.retry.backoff.ms", "1", NULL}},
        /* The same without the lookup's batching wait: backoff + RPCs only. */
        {.name = "AppendRetry/batch=1/lookupwait=0",
         .mode = M_APPEND_TO,
         .batch = 1,
         .size = 100,
         .refuse_first = true,
         .conf = {"append.retry.backoff.ms", "1", "lookup.batch.wait.ms", "0", NULL}},
    };
    enum { N_CASES = sizeof(cases) / sizeof(cases[0]) };
    static pcase_t pcases[N_PIPE_CASES];
    size_t n_pcases = pipe_cases_make(pcases);
    static bench_t benches[N_CASES + N_PIPE_CASES];
    size_t n = 0;
    for (size_t i = 0; i < N_CASES; i++) {
        if (cluster_address && cases[i].refuse_first)
            continue; /* fault injection exists only in the embedded server */
        benches[n++] = (bench_t){.name = cases[i].name,
                                 .fn = bench_round,
                                 .arg = &cases[i],
                                 .setup = env_setup,
                                 .teardown = env_teardown};
    }
    for (size_t i = 0; i < n_pcases; i++)
        benches[n++] = (bench_t){.name = pcases[i].name,
                                 .fn = pipe_round,
                                 .arg = &pcases[i],
                                 .setup = penv_setup,
                                 .teardown = penv_teardown};
    if (cluster_address)
        fprintf(stderr,
                "bench_append: cluster at %s, topic %d, appender log stream %d (AppendRetry "
                "needs the embedded server's fault injection: left out)\n",
                cluster_address, topic_id, appender_log_stream);
    /* Connections, allocator and branch predictors warm up on the same client. */
    static const bench_opts_t o = {.benchtime_ns = 1000000000LL,
                                   .warmup_ns = 100000000LL,
                                   .pkg = "libvarlog/bench",
                                   .precise_allocs = true};
    return bench_main(argc, argv, &o, benches, n);
}
