/* bench_append: the synchronous append path (varlog_append_to, varlog_append) against the
 * embedded server in the same process, or against any Varlog cluster, printed as Go
 * benchmark lines.
 *
 *   bench_append [-mr HOST:PORT[,HOST:PORT...]] [-topic ID]
 *                [-benchtime=D|Nx] [-count=N] [-bench=REGEX] [FILTER]   (see harness.h)
 *
 * -mr: the metadata repository of a cluster to benchmark (a real Varlog cluster or a
 * varlog-server in another process, which is how to measure the client's own CPU) instead of
 * the embedded server; -topic (default 1) the topic to append to there, whose first log
 * stream AppendTo uses. The AppendRetry benchmarks need the embedded server's fault
 * injection and are left out with -mr. Records appended to a cluster stay there.
 *
 * Each benchmark (and each -count repetition) gets a fresh server (1 topic, 2 log streams)
 * and a fresh client, so that deny lists, stored records and fault settings never carry
 * over; opening them, and a warm-up of about 100 ms on the same client, are not measured.
 * Then, as Go's testing package does, rounds of b.N calls run until one takes at least
 * -benchtime (default 1 s); that round is reported. With -benchtime=Nx one round of exactly
 * N calls runs after the warm-up. FILTER keeps the benchmarks whose full name
 * ("BenchmarkAppendTo/batch=1/size=100") contains it.
 *
 * Line format: name-GOMAXPROCS, iterations, ns/op, MB/s (payload bytes of one call, as Go's
 * b.SetBytes), B/op, allocs/op, and a trailing records/s metric (records stored per second:
 * batch x calls / elapsed). An op is one append call, whatever its batch.
 *
 * Allocations: malloc/calloc/realloc are wrapped at link time (-Wl,--wrap, alloc_count.c)
 * and counted process-wide while the clock runs, so B/op and allocs/op include the
 * embedded server (the request handler, the in-memory store's copy of every record) and
 * every client thread, because they share this process. The wrap only rewrites references
 * made by objects linked statically into this executable: libvarlog's client, server, pool
 * and the generated protobuf-c code. Shared libraries call the real malloc directly, so
 * what libgrpc_unsecure, libgpr, absl and libprotobuf-c allocate (gRPC slices, byte
 * buffers, call and stream state, unpacked protobuf messages) is NOT counted; neither is
 * what glibc allocates for itself. B/op counts requested bytes (realloc: the new size). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "varlog/client.h"
#include "varlog/conf.h"
#include "varlog/server.h"
#include "harness.h"

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

/* -mr and -topic: NULL = the embedded server. */
static const char *cluster_address;
static int32_t topic_id = 1;

static int env_open(env_t *e, const bcase_t *c)
{
    varlog_err_t rc;
    if (!cluster_address) {
        varlog_server_opts_t o = {.topics = 1, .log_streams_per_topic = 2, .max_bytes = 8ULL << 30};
        rc = varlog_server_start(&o, &e->srv);
        if (rc != VARLOG_OK) {
            fprintf(stderr, "varlog_server_start: %s: %s\n", varlog_err_name(rc),
                    varlog_last_error());
            return -1;
        }
    }
    varlog_conf_t *conf = varlog_conf_new();
    char err[512];
    if (!conf) {
        fprintf(stderr, "varlog_conf_new: out of memory\n");
        goto fail;
    }
    const char *base[] = {"metadata.addresses",
                          e->srv ? varlog_server_address(e->srv) : cluster_address,
                          "metadata.refresh.interval.ms",
                          "0",
                          "log.level",
                          "err",
                          NULL};
    for (size_t i = 0; base[i]; i += 2) {
        if (varlog_conf_set(conf, base[i], base[i + 1], err, sizeof(err)) != VARLOG_OK) {
            fprintf(stderr, "conf: %s\n", err);
            goto fail;
        }
    }
    for (size_t i = 0; c->conf[i]; i += 2) {
        if (varlog_conf_set(conf, c->conf[i], c->conf[i + 1], err, sizeof(err)) != VARLOG_OK) {
            fprintf(stderr, "conf: %s\n", err);
            goto fail;
        }
    }
    rc = varlog_client_new(&conf, &e->client, err, sizeof(err));
    if (rc != VARLOG_OK) {
        fprintf(stderr, "varlog_client_new: %s: %s\n", varlog_err_name(rc), err);
        goto fail;
    }
    size_t n = 0;
    rc = varlog_client_log_streams(e->client, topic_id, &e->log_stream, 1, &n);
    if (rc != VARLOG_OK || n == 0) {
        fprintf(stderr, "topic %d: %s\n", topic_id,
                rc != VARLOG_OK ? varlog_last_error() : "it has no log stream");
        varlog_client_destroy(e->client);
        e->client = NULL;
        conf = NULL;
        goto fail;
    }
    return 0;
fail:
    varlog_conf_destroy(conf);
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
}

/* Takes -mr and -topic (also as -flag=value) out of argv; the rest goes to the harness.
 * Returns false on a bad value. */
static bool take_cluster_flags(int *argc, char **argv)
{
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        bool mr = strncmp(a, "-mr", 3) == 0 && (a[3] == 0 || a[3] == '=');
        bool topic = strncmp(a, "-topic", 6) == 0 && (a[6] == 0 || a[6] == '=');
        if (!mr && !topic) {
            argv[out++] = argv[i];
            continue;
        }
        const char *eq = strchr(a, '=');
        if (eq)
            v = eq + 1;
        else if (i + 1 < *argc)
            v = argv[++i];
        if (!v || !v[0]) {
            fprintf(stderr, "%s: %s needs a value\n", argv[0], mr ? "-mr" : "-topic");
            return false;
        }
        if (mr) {
            cluster_address = v;
        } else {
            char *end;
            long t = strtol(v, &end, 10);
            if (*end || t < 1 || t > INT32_MAX) {
                fprintf(stderr, "%s: -topic %s: a topic id is an integer >= 1\n", argv[0], v);
                return false;
            }
            topic_id = (int32_t)t;
        }
    }
    argv[out] = NULL;
    *argc = out;
    return true;
}

int main(int argc, char **argv)
{
    if (!take_cluster_flags(&argc, argv))
        return 2;
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)('a' + i % 26);

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
    bench_t benches[N_CASES];
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
    if (cluster_address)
        fprintf(stderr,
                "bench_append: cluster at %s, topic %d (AppendRetry needs the embedded "
                "server's fault injection: left out)\n",
                cluster_address, topic_id);
    /* Connections, allocator and branch predictors warm up on the same client. */
    static const bench_opts_t o = {
        .benchtime_ns = 1000000000LL, .warmup_ns = 100000000LL, .pkg = "libvarlog/bench"};
    return bench_main(argc, argv, &o, benches, n);
}
