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
 *   Appender/size=S/batch=B/depth=D/producers=P: the pipelined appender (varlog/appender.h)
 *   with appender.batch.max.records = B and appender.pipeline.depth = D. P producer threads
 *   share b.N single-record calls (varlog_appender_append with n 1 and timeout -1, a callback
 *   that counts; -call N: calls of N records each, named .../call=N, as Go's benchmark hands
 *   its appender whole batches of --batch-size); an op is one record. After the loop the round
 * flushes, and the clock stops when the last callback has returned. By default these rows run
 * against a varlog-server started as a child process (-server PATH, default the one built with this
 * program), so that the benchmark process's CPU time is the client's alone; -inproc runs them
 * against the embedded server in this process instead (then CPU and allocations include the
 *   server's).
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
#include "bench_client.h"
#include "child_server.h"
#include "harness.h"

#ifndef VARLOG_SERVER_PROGRAM
#define VARLOG_SERVER_PROGRAM "varlog-server"
#endif

#define APPEND_TIMEOUT_MS 30000
#define MAX_BATCH 16
#define MAX_SIZE 4096
#define MAX_THREADS 16
#define FAULT_METHOD "/varlog.snpb.LogIO/Append"

static void append_fail(bench_b_t *b, const char *what, varlog_err_t rc, const char *text)
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

/* -mr, -topic, -logstream, -inproc, -server. cluster_address NULL: our own server. */
static const char *cluster_address;
static int32_t topic_id = 1;
static int32_t appender_log_stream = 1;
static bool appender_inproc;
/* -appenders per-ls: one bound appender per log stream of the topic (AppenderPerLS rows). */
static bool appenders_per_ls;
/* -call N: records per varlog_appender_append call in the Appender rows (1: one record a
 * call); N = the batch hands whole batches over, as Go's benchmark does (AppendBatch). */
#define MAX_CALL 1000
static int32_t records_per_call = 1;
/* -ref: varlog_appender_append_ref instead of varlog_appender_append. */
static bool append_by_ref;
static const char *server_program = VARLOG_SERVER_PROGRAM;

#define SERVER_MAX_BYTES (8ULL << 30)

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

/* ---- pipelined appender rows --------------------------------------------------------- */

#define MAX_PRODUCERS 16
#define FLUSH_TIMEOUT_MS 60000
#define CLOSE_TIMEOUT_MS 30000

typedef struct pcase {
    char name[96];
    size_t size;   /* bytes per record */
    int batch;     /* appender.batch.max.records */
    int depth;     /* appender.pipeline.depth */
    int producers; /* threads sharing b.N */
} pcase_t;

#define MAX_APPENDERS 1024

typedef struct penv {
    varlog_server_t *srv; /* -inproc */
    pid_t child;          /* the varlog-server child, or -1 */
    varlog_client_t *client;
    varlog_appender_t **apps; /* one, or (-appenders per-ls) one per log stream */
    size_t n_apps;
    /* Written by the appender's thread only (its callbacks run one at a time), read by the
     * benchmark thread after a flush: relaxed loads and stores, no read-modify-write; with
     * several appenders (their threads call back concurrently) relaxed fetch-adds. */
    atomic_uint_fast64_t records_done, calls_failed;
    long primed;            /* the largest round run unmeasured first (pipe_round) */
    varlog_err_t first_err; /* of the first failed callback, with its text */
    varlog_outcome_t first_outcome;
    char first_text[384];
} penv_t;

static uint8_t appender_payload[MAX_SIZE];

static void on_appended(const varlog_append_result_t *r, void *opaque)
{
    penv_t *e = opaque;
    if (e->n_apps > 1) {
        if (r->err == VARLOG_OK) {
            atomic_fetch_add_explicit(&e->records_done, r->n, memory_order_relaxed);
        } else if (atomic_fetch_add_explicit(&e->calls_failed, 1, memory_order_relaxed) == 0) {
            e->first_err = r->err; /* read after every appender was flushed */
            e->first_outcome = r->outcome;
            snprintf(e->first_text, sizeof(e->first_text), "%s", r->errtext ? r->errtext : "");
        }
        return;
    }
    if (r->err != VARLOG_OK) {
        uint_fast64_t f = atomic_load_explicit(&e->calls_failed, memory_order_relaxed);
        if (f == 0) {
            e->first_err = r->err;
            e->first_outcome = r->outcome;
            snprintf(e->first_text, sizeof(e->first_text), "%s", r->errtext ? r->errtext : "");
        }
        atomic_store_explicit(&e->calls_failed, f + 1, memory_order_relaxed);
        return;
    }
    uint_fast64_t d = atomic_load_explicit(&e->records_done, memory_order_relaxed);
    atomic_store_explicit(&e->records_done, d + r->n, memory_order_relaxed);
}

static void penv_close(penv_t *e)
{
    for (size_t i = 0; i < e->n_apps; i++) {
        if (!e->apps[i])
            continue;
        varlog_err_t rc = varlog_appender_close(&e->apps[i], CLOSE_TIMEOUT_MS);
        if (rc != VARLOG_OK)
            fprintf(stderr, "varlog_appender_close: %s\n", varlog_err_name(rc));
    }
    free(e->apps);
    e->apps = NULL;
    e->n_apps = 0;
    varlog_client_destroy(e->client);
    e->client = NULL;
    varlog_server_destroy(e->srv);
    e->srv = NULL;
    child_server_stop(e->child);
    e->child = -1;
}

/* Setup of one -count repetition: a fresh server (child, in-process, or the -mr cluster's),
 * client and appender. */
static void *penv_setup(const void *arg)
{
    const pcase_t *c = arg;
    penv_t *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->child = -1;
    char child_addr[64];
    const char *address = cluster_address;
    if (!address && appender_inproc) {
        varlog_server_opts_t o = {
            .topics = 1, .log_streams_per_topic = 1, .max_bytes = SERVER_MAX_BYTES};
        varlog_err_t rc = varlog_server_start(&o, &e->srv);
        if (rc != VARLOG_OK) {
            fprintf(stderr, "varlog_server_start: %s: %s\n", varlog_err_name(rc),
                    varlog_last_error());
            goto fail;
        }
        address = varlog_server_address(e->srv);
    } else if (!address) {
        e->child = child_server_start(server_program, 1, 1, SERVER_MAX_BYTES, child_addr,
                                      sizeof(child_addr));
        if (e->child < 0)
            goto fail;
        address = child_addr;
    }
    char batch_s[16], depth_s[16];
    snprintf(batch_s, sizeof(batch_s), "%d", c->batch);
    snprintf(depth_s, sizeof(depth_s), "%d", c->depth);
    const char *extra[] = {"appender.batch.max.records", batch_s, "appender.pipeline.depth",
                           depth_s, NULL};
    if (bench_client_open(address, extra, &e->client) != 0)
        goto fail;
    static int32_t ids[MAX_APPENDERS];
    size_t n = 1;
    ids[0] = appender_log_stream;
    if (appenders_per_ls) {
        varlog_err_t rc = varlog_client_log_streams(e->client, topic_id, ids, MAX_APPENDERS, &n);
        if (rc != VARLOG_OK || n == 0 || n > MAX_APPENDERS) {
            fprintf(stderr, "topic %d: %s\n", topic_id,
                    rc != VARLOG_OK ? varlog_last_error()
                    : n == 0        ? "it has no log stream"
                                    : "more log streams than -appenders per-ls takes (1024)");
            goto fail;
        }
    }
    e->apps = calloc(n, sizeof(*e->apps));
    if (!e->apps)
        goto fail;
    e->n_apps = n;
    for (size_t i = 0; i < n; i++) {
        varlog_err_t rc = varlog_appender_new(e->client, topic_id, ids[i], &e->apps[i]);
        if (rc != VARLOG_OK) {
            fprintf(stderr, "varlog_appender_new(topic %d, log stream %d): %s: %s\n", topic_id,
                    ids[i], varlog_err_name(rc), varlog_last_error());
            goto fail;
        }
    }
    return e;
fail:
    penv_close(e);
    free(e);
    return NULL;
}

static void penv_teardown(void *ctx)
{
    penv_close(ctx);
    free(ctx);
}

typedef struct producer {
    penv_t *e;
    const pcase_t *c;
    long n;
    size_t first_app; /* the appender of its first run of records */
    varlog_err_t rc;
    char text[384];
} producer_t;

/* -ref: every record is appender_payload, which outlives the client. */
static void release_nothing(void *opaque)
{
    (void)opaque;
}

static void *producer_main(void *arg)
{
    producer_t *p = arg;
    varlog_record_t recs[MAX_CALL]; /* the same record, -call times */
    for (size_t i = 0; i < (size_t)records_per_call; i++)
        recs[i] = (varlog_record_t){.data = appender_payload, .len = p->c->size};
    size_t a = p->first_app % p->e->n_apps;
    long run = 0, per = records_per_call;
    for (long i = 0; i < p->n;) {
        if (p->e->n_apps > 1 && run == p->c->batch) {
            a = (a + 1) % p->e->n_apps;
            run = 0;
        }
        long k = per;
        if (k > p->n - i)
            k = p->n - i;
        if (p->e->n_apps > 1 && k > p->c->batch - run)
            k = p->c->batch - run; /* a call never spans two appenders' runs */
        i += k;
        run += k;
        varlog_err_t rc =
            append_by_ref
                ? varlog_appender_append_ref(p->e->apps[a], recs, (size_t)k, -1, release_nothing,
                                             on_appended, p->e)
                : varlog_appender_append(p->e->apps[a], recs, (size_t)k, -1, on_appended, p->e);
        if (rc != VARLOG_OK) {
            p->rc = rc;
            snprintf(p->text, sizeof(p->text), "%s", varlog_last_error());
            break;
        }
    }
    return NULL;
}

/* Flushes every appender; the first failure, with *pending of that appender. */
static varlog_err_t flush_all(penv_t *e, size_t *pending)
{
    for (size_t i = 0; i < e->n_apps; i++) {
        varlog_err_t rc = varlog_appender_flush(e->apps[i], FLUSH_TIMEOUT_MS, pending);
        if (rc != VARLOG_OK)
            return rc;
    }
    return VARLOG_OK;
}

/* The appenders' counters summed (those bench_append reports). */
static bool stats_all(penv_t *e, varlog_appender_stats_t *sum)
{
    memset(sum, 0, sizeof(*sum));
    for (size_t i = 0; i < e->n_apps; i++) {
        varlog_appender_stats_t s;
        if (varlog_appender_stats(e->apps[i], &s) != VARLOG_OK)
            return false;
        sum->batches_sent += s.batches_sent;
    }
    return true;
}

/* The measured state is the steady one. An appender keeps the batch slots a burst made it
 * add (each reserves appender.batch.max.bytes of address space: a malloc, an mmap at the
 * default 1 MiB, and page faults) until it closes, so a long-running producer pays for them
 * once. A round larger than any before would add them inside the clock: against a node that
 * answers in milliseconds, a slot for nearly every record at batch 1 (985 KB and 4.7
 * allocations per record at (1,1) on a real node). So when b->n is a new high, the same
 * calls and flush run once outside the clock first. */
static bool pipe_prime(bench_b_t *b, const pcase_t *c, penv_t *e)
{
    if (b->n <= e->primed)
        return true;
    e->primed = b->n;
    producer_t p = {.e = e, .c = c, .n = b->n, .rc = VARLOG_OK};
    producer_main(&p);
    if (p.rc != VARLOG_OK) {
        append_fail(b, "varlog_appender_append (priming)", p.rc, p.text);
        return false;
    }
    varlog_err_t rc = flush_all(e, NULL);
    if (rc != VARLOG_OK) {
        append_fail(b, "varlog_appender_flush (priming)", rc, varlog_last_error());
        return false;
    }
    return true;
}

/* One round: b->n single-record calls split evenly over the producers, then a flush. */
static void pipe_round(bench_b_t *b)
{
    const pcase_t *c = b->arg;
    penv_t *e = b->ctx;
    if (!pipe_prime(b, c, e))
        return;
    varlog_appender_stats_t s0, s1;
    if (!stats_all(e, &s0))
        return append_fail(b, "varlog_appender_stats", VARLOG_ERR_INTERNAL, NULL);
    uint64_t done0 = atomic_load(&e->records_done);
    int64_t srv0 = e->child > 0 ? child_server_cpu_us(e->child) : -1;
    int64_t cpu0, csw0, cpu1, csw1;
    bench_rusage(&cpu0, &csw0);
    b_reset_timer(b);
    uint64_t all0 = alloc_count_all_allocs();

    producer_t p[MAX_PRODUCERS];
    pthread_t th[MAX_PRODUCERS];
    int started = 0;
    for (int k = 0; k < c->producers; k++) {
        long share = b->n / c->producers + (k < b->n % c->producers ? 1 : 0);
        p[k] = (producer_t){.e = e,
                            .c = c,
                            .n = share,
                            .first_app = (size_t)k * e->n_apps / (size_t)c->producers,
                            .rc = VARLOG_OK};
    }
    if (c->producers == 1) {
        producer_main(&p[0]);
        started = 1;
    } else {
        for (; started < c->producers; started++) {
            if (pthread_create(&th[started], NULL, producer_main, &p[started]) != 0)
                break;
        }
        for (int k = 0; k < started; k++)
            pthread_join(th[k], NULL);
    }
    size_t pending = 0;
    varlog_err_t frc = flush_all(e, &pending);

    uint64_t all1 = alloc_count_all_allocs();
    b_stop_timer(b);
    bench_rusage(&cpu1, &csw1);
    int64_t srv1 = e->child > 0 ? child_server_cpu_us(e->child) : -1;
    stats_all(e, &s1);

    if (started < c->producers)
        return append_fail(b, "pthread_create", VARLOG_ERR_INTERNAL, NULL);
    for (int k = 0; k < started; k++) {
        if (p[k].rc != VARLOG_OK)
            return append_fail(b, "varlog_appender_append", p[k].rc, p[k].text);
    }
    if (frc != VARLOG_OK) {
        char t[96];
        snprintf(t, sizeof(t), "%zu calls pending after %d ms", pending, FLUSH_TIMEOUT_MS);
        return append_fail(b, "varlog_appender_flush", frc, t);
    }
    if (atomic_load(&e->calls_failed) != 0)
        return append_fail(b, varlog_outcome_name(e->first_outcome), e->first_err, e->first_text);
    uint64_t done = atomic_load(&e->records_done) - done0;
    if (done != (uint64_t)b->n) {
        char t[96];
        snprintf(t, sizeof(t), "%llu records stored in %ld calls", (unsigned long long)done, b->n);
        return append_fail(b, "callbacks differ from b.N", VARLOG_ERR_INTERNAL, t);
    }

    double secs = (double)b_elapsed_ns(b) / 1e9, n = (double)b->n;
    b_set_bytes(b, (int64_t)c->size);
    b_report_metric(b, secs > 0 ? n / secs : 0, "records/s");
    b_report_metric(b, (double)(cpu1 - cpu0) / n, "cpu-us/record");
    if (srv0 >= 0 && srv1 >= 0)
        b_report_metric(b, (double)(srv1 - srv0) / n, "srv-cpu-us/record");
    b_report_metric(b, (double)(all1 - all0) / n, "all-allocs/op");
    uint64_t batches = s1.batches_sent - s0.batches_sent;
    if (batches > 0) {
        b_report_metric(b, n / (double)batches, "records/batch");
        b_report_metric(b, (double)(csw1 - csw0) / (double)batches, "ctxsw/request");
    }
}

/* The grid of Appender rows: every size x batch x depth x producers. -size replaces the
 * sizes with its one. */
static size_t pipe_sizes[] = {100, 1024};
static size_t n_pipe_sizes = sizeof(pipe_sizes) / sizeof(pipe_sizes[0]);
static const int pipe_batches[] = {1, 100, 1000};
static const int pipe_depths[] = {1, 2, 8};
static int pipe_producers[] = {1, 4};
static size_t n_pipe_producers = sizeof(pipe_producers) / sizeof(pipe_producers[0]);
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define N_PIPE_CASES                                                                               \
    (N_OF(pipe_sizes) * N_OF(pipe_batches) * N_OF(pipe_depths) * N_OF(pipe_producers))

static size_t make_pipe_cases(pcase_t *out)
{
    size_t n = 0;
    for (size_t si = 0; si < n_pipe_sizes; si++)
        for (size_t bi = 0; bi < N_OF(pipe_batches); bi++)
            for (size_t di = 0; di < N_OF(pipe_depths); di++)
                for (size_t pi = 0; pi < n_pipe_producers; pi++) {
                    pcase_t *c = &out[n++];
                    *c = (pcase_t){.size = pipe_sizes[si],
                                   .batch = pipe_batches[bi],
                                   .depth = pipe_depths[di],
                                   .producers = pipe_producers[pi]};
                    int len = snprintf(c->name, sizeof(c->name),
                                       "%s/size=%zu/batch=%d/depth=%d/producers=%d",
                                       appenders_per_ls ? "AppenderPerLS" : "Appender", c->size,
                                       c->batch, c->depth, c->producers);
                    if (records_per_call > 1 && len > 0 && (size_t)len < sizeof(c->name))
                        len += snprintf(c->name + len, sizeof(c->name) - (size_t)len, "/call=%d",
                                        records_per_call);
                    if (append_by_ref && len > 0 && (size_t)len < sizeof(c->name))
                        snprintf(c->name + len, sizeof(c->name) - (size_t)len, "/ref");
                }
    return n;
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
            pipe_producers[0] = p;
            n_pipe_producers = 1;
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
    if (size > 0) {
        pipe_sizes[0] = (size_t)size;
        n_pipe_sizes = 1;
    }
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
    /* Varied bytes, as records usually are; the same for every record. */
    for (size_t i = 0; i < sizeof(appender_payload); i++)
        appender_payload[i] = (uint8_t)(i * 2654435761u >> 24);

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
    size_t n_pcases = make_pipe_cases(pcases);
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
