/* bench_append: the synchronous append path (varlog_append_to, varlog_append) against the
 * embedded server in the same process, printed as Go benchmark lines.
 *
 *   bench_append [-benchtime=MS|Ns|Nms|Nx] [-count=N] [FILTER]
 *
 * (-benchtime and -count also take their value as the next argument.) Each benchmark gets a
 * fresh server (1 topic, 2 log streams) and a fresh client, so that deny lists, stored
 * records and fault settings never carry over; opening them, and a warm-up of about 100 ms
 * on the same client, are not measured. Then, as Go's testing package does, rounds of b.N
 * calls run until one takes at least -benchtime (default 1 s); that round is reported. With
 * -benchtime=Nx one round of exactly N calls runs after the warm-up. -count=N repeats every
 * benchmark N times in a row (for medians, e.g. with benchstat). FILTER keeps the benchmarks
 * whose full name ("BenchmarkAppendTo/batch=1/size=100") contains it.
 *
 * Line format: name-GOMAXPROCS, iterations, ns/op, MB/s (payload bytes of one call, as Go's
 * b.SetBytes), B/op, allocs/op, and a trailing records/s metric (records stored per second:
 * batch x calls / elapsed). An op is one append call, whatever its batch.
 *
 * Allocations: malloc/calloc/realloc are wrapped at link time (-Wl,--wrap, as bench_pool)
 * and counted process-wide while the clock runs, so B/op and allocs/op include the
 * embedded server (the request handler, the in-memory store's copy of every record) and
 * every client thread, because they share this process. The wrap only rewrites references
 * made by objects linked statically into this executable: libvarlog's client, server, pool
 * and the generated protobuf-c code. Shared libraries call the real malloc directly, so
 * what libgrpc_unsecure, libgpr, absl and libprotobuf-c allocate (gRPC slices, byte
 * buffers, call and stream state, unpacked protobuf messages) is NOT counted; neither is
 * what glibc allocates for itself. B/op counts requested bytes (realloc: the new size). */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "varlog/client.h"
#include "varlog/conf.h"
#include "varlog/server.h"
#include "alloc_count.h"

/* ---- a small testing.B ------------------------------------------------------------- */

#define APPEND_TIMEOUT_MS 30000
#define MAX_BATCH 16
#define MAX_SIZE 4096
#define MAX_THREADS 16
#define FAULT_METHOD "/varlog.snpb.LogIO/Append"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

typedef struct bench {
    long n;
    int64_t start, elapsed;
    uint64_t allocs0, bytes0, allocs, bytes;
    bool running;
    bool failed;
} bench_t;

static void b_start(bench_t *b)
{
    if (b->running)
        return;
    b->allocs0 = alloc_count_allocs();
    b->bytes0 = alloc_count_bytes();
    b->start = now_ns();
    b->running = true;
}

static void b_stop(bench_t *b)
{
    if (!b->running)
        return;
    b->elapsed += now_ns() - b->start;
    b->allocs += alloc_count_allocs() - b->allocs0;
    b->bytes += alloc_count_bytes() - b->bytes0;
    b->running = false;
}

/* Setup done: restart the clock and the counters. */
static void b_reset(bench_t *b)
{
    b->running = false;
    b->elapsed = 0;
    b->allocs = b->bytes = 0;
    b_start(b);
}

static void b_fail(bench_t *b, const char *what, varlog_err_t rc, const char *text)
{
    if (!b->failed)
        fprintf(stderr, "FAIL: %s: %s (%s)%s%s\n", what, varlog_err_name(rc), varlog_err_str(rc),
                text && text[0] ? ": " : "", text ? text : "");
    b->failed = true;
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
    varlog_server_t *srv;
    varlog_client_t *client;
} env_t;

static uint8_t payload[MAX_SIZE];

static int env_open(env_t *e, const bcase_t *c)
{
    memset(e, 0, sizeof(*e));
    varlog_server_opts_t o = {.topics = 1, .log_streams_per_topic = 2, .max_bytes = 8ULL << 30};
    varlog_err_t rc = varlog_server_start(&o, &e->srv);
    if (rc != VARLOG_OK) {
        fprintf(stderr, "varlog_server_start: %s: %s\n", varlog_err_name(rc), varlog_last_error());
        return -1;
    }
    varlog_conf_t *conf = varlog_conf_new();
    char err[512];
    if (!conf) {
        fprintf(stderr, "varlog_conf_new: out of memory\n");
        goto fail;
    }
    const char *base[] = {"metadata.addresses",
                          varlog_server_address(e->srv),
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
    return 0;
fail:
    varlog_conf_destroy(conf);
    varlog_server_destroy(e->srv);
    e->srv = NULL;
    return -1;
}

static void env_close(env_t *e)
{
    varlog_client_destroy(e->client);
    varlog_server_destroy(e->srv);
    memset(e, 0, sizeof(*e));
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
        return varlog_append_to(e->client, 1, 1, recs, c->batch, APPEND_TIMEOUT_MS, metas, NULL);
    return varlog_append(e->client, 1, recs, c->batch, APPEND_TIMEOUT_MS, metas, NULL);
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
static void bench_round(bench_t *b, env_t *e, const bcase_t *c)
{
    varlog_client_stats_t s0, s1;
    varlog_client_stats(e->client, &s0);
    varlog_record_t recs[MAX_BATCH];
    varlog_entry_meta_t metas[MAX_BATCH];
    make_records(c, recs);
    b_reset(b);
    if (c->threads == 0) {
        for (long i = 0; i < b->n; i++) {
            if (c->refuse_first) {
                /* Arm one refusal per call: fail_next counts Append requests, so arming
                 * b->n of them at once would refuse the retries as well. Arming copies the
                 * message (a malloc), so the clock and the counters pause around it. */
                b_stop(b);
                varlog_err_t frc =
                    varlog_server_fail_next(e->srv, FAULT_METHOD, 14, "not primary replica", 1);
                b_start(b);
                if (frc != VARLOG_OK)
                    return b_fail(b, "varlog_server_fail_next", frc, varlog_last_error());
            }
            varlog_err_t rc = one_call(e, c, recs, metas);
            if (rc != VARLOG_OK)
                return b_fail(b, "append", rc, varlog_last_error());
        }
    } else {
        pthread_t th[MAX_THREADS];
        worker_t w[MAX_THREADS];
        atomic_long next = 0;
        int started = 0;
        for (int k = 0; k < c->threads; k++) {
            w[k] = (worker_t){.e = e, .c = c, .next = &next, .n = b->n, .rc = VARLOG_OK};
            if (pthread_create(&th[k], NULL, worker_main, &w[k]) != 0) {
                atomic_store(&next, b->n);
                b_fail(b, "pthread_create", VARLOG_ERR_INTERNAL, NULL);
                break;
            }
            started++;
        }
        for (int k = 0; k < started; k++)
            pthread_join(th[k], NULL);
        for (int k = 0; k < started; k++) {
            if (w[k].rc != VARLOG_OK)
                return b_fail(b, "append", w[k].rc, w[k].text);
        }
        if (b->failed)
            return;
    }
    b_stop(b);
    varlog_client_stats(e->client, &s1);
    uint64_t ok = s1.appends_ok - s0.appends_ok, retries = s1.append_retries - s0.append_retries;
    if (ok != (uint64_t)b->n)
        return b_fail(b, "appends_ok differs from b.N", VARLOG_ERR_INTERNAL, NULL);
    if (retries != (c->refuse_first ? (uint64_t)b->n : 0)) {
        char t[96];
        snprintf(t, sizeof(t), "%llu retries in %ld calls", (unsigned long long)retries, b->n);
        return b_fail(b, "unexpected retry count", VARLOG_ERR_INTERNAL, t);
    }
}

/* ---- runner ------------------------------------------------------------------------- */

static int64_t benchtime_ns = 1000000000LL;
static long benchtime_x; /* > 0: a fixed b.N */
static int count = 1;
static const char *filter;
static int ncpu;
static int failures;
static bool header_done;

/* As Go's testing.B.launch: aim 20 % past the target, grow at most 100x per round. */
static long predict_n(long last, int64_t elapsed, int64_t goal)
{
    double per = elapsed > 0 ? (double)elapsed / (double)last : 1.0;
    double want = 1.2 * (double)goal / per;
    long next = want > 1e9 ? 1000000000L : (long)want;
    if (next > 100 * last)
        next = 100 * last;
    if (next <= last)
        next = last + 1;
    return next;
}

/* Rounds of growing b.N until one lasts at least goal_ns. Returns the last round. */
static bench_t run_until(env_t *e, const bcase_t *c, long n, int64_t goal_ns)
{
    bench_t b;
    for (;;) {
        memset(&b, 0, sizeof(b));
        b.n = n;
        bench_round(&b, e, c);
        b_stop(&b);
        if (b.failed || b.elapsed >= goal_ns || n >= 1000000000L)
            return b;
        n = predict_n(n, b.elapsed, goal_ns);
    }
}

/* Go's prettyPrint: the number of decimals shrinks as the value grows. */
static void pretty(double x, const char *unit)
{
    double y = x < 0 ? -x : x;
    if (y == 0 || y >= 999.95)
        printf("\t%10.0f %s", x, unit);
    else if (y >= 99.995)
        printf("\t%12.1f %s", x, unit);
    else if (y >= 9.9995)
        printf("\t%13.2f %s", x, unit);
    else if (y >= 0.99995)
        printf("\t%14.3f %s", x, unit);
    else
        printf("\t%15.4f %s", x, unit);
}

static void print_header(void)
{
    if (header_done)
        return;
    header_done = true;
    char cpu[256] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof(line), f)) {
            if (strncmp(line, "model name", 10) == 0) {
                const char *v = strchr(line, ':');
                if (v) {
                    v++;
                    while (*v == ' ' || *v == '\t')
                        v++;
                    snprintf(cpu, sizeof(cpu), "%s", v);
                    cpu[strcspn(cpu, "\n")] = '\0';
                }
                break;
            }
        }
        fclose(f);
    }
    printf("goos: linux\n");
#if defined(__x86_64__)
    printf("goarch: amd64\n");
#elif defined(__aarch64__)
    printf("goarch: arm64\n");
#endif
    printf("pkg: libvarlog/bench\n");
    if (cpu[0])
        printf("cpu: %s\n", cpu);
}

static void run(const bcase_t *c)
{
    char full[160];
    snprintf(full, sizeof(full), "Benchmark%s", c->name);
    if (filter && !strstr(full, filter))
        return;
    print_header();
    for (int rep = 0; rep < count; rep++) {
        env_t e;
        if (env_open(&e, c) != 0) {
            printf("--- FAIL: %s\n", full);
            failures++;
            continue;
        }
        /* Warm-up (connections, allocator, branch predictors): about 100 ms, unreported. */
        int64_t warm = benchtime_ns < 100000000LL ? benchtime_ns : 100000000LL;
        bench_t b = run_until(&e, c, 1, warm);
        if (!b.failed) {
            if (benchtime_x > 0) {
                memset(&b, 0, sizeof(b));
                b.n = benchtime_x;
                bench_round(&b, &e, c);
                b_stop(&b);
            } else {
                b = run_until(&e, c, predict_n(b.n, b.elapsed, benchtime_ns), benchtime_ns);
            }
        }
        env_close(&e);
        if (b.failed) {
            printf("--- FAIL: %s\n", full);
            failures++;
            continue;
        }
        double secs = (double)b.elapsed / 1e9;
        double ns = (double)b.elapsed / (double)b.n;
        double bytes = (double)(c->batch * c->size) * (double)b.n;
        printf("%s-%d\t%8ld", full, ncpu, b.n);
        pretty(ns, "ns/op");
        printf("\t%7.2f MB/s", bytes / 1e6 / secs);
        printf("\t%8llu B/op\t%8llu allocs/op", (unsigned long long)(b.bytes / (uint64_t)b.n),
               (unsigned long long)(b.allocs / (uint64_t)b.n));
        pretty((double)c->batch * (double)b.n / secs, "records/s");
        printf("\n");
        fflush(stdout);
    }
}

/* "1500" and "1500ms" are milliseconds, "2s" seconds, "300x" a fixed b.N. */
static bool parse_benchtime(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0))
        return false;
    if (strcmp(end, "x") == 0) {
        if (v > 1e9)
            return false;
        benchtime_x = (long)v;
        return benchtime_x > 0;
    }
    if (strcmp(end, "") == 0 || strcmp(end, "ms") == 0)
        benchtime_ns = (int64_t)(v * 1e6);
    else if (strcmp(end, "s") == 0)
        benchtime_ns = (int64_t)(v * 1e9);
    else
        return false;
    benchtime_x = 0;
    return benchtime_ns > 0;
}

static int usage(const char *prog)
{
    fprintf(stderr, "usage: %s [-benchtime=MS|Nms|Ns|Nx] [-count=N] [FILTER]\n", prog);
    return 2;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strncmp(a, "-benchtime", 10) == 0 || strncmp(a, "-count", 6) == 0) {
            const char *eq = strchr(a, '=');
            if (eq)
                v = eq + 1;
            else if (i + 1 < argc)
                v = argv[++i];
            else
                return usage(argv[0]);
        }
        if (strncmp(a, "-benchtime", 10) == 0) {
            if (!parse_benchtime(v))
                return usage(argv[0]);
        } else if (strncmp(a, "-count", 6) == 0) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 1000)
                return usage(argv[0]);
            count = (int)n;
        } else if (a[0] == '-') {
            return usage(argv[0]);
        } else {
            filter = a;
        }
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    ncpu = cpus > 0 ? (int)cpus : 1;
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
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run(&cases[i]);
    return failures ? 1 : 0;
}
