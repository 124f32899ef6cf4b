/* bench_retry_burst: thousands of appends refused at once, and what their retries' metadata
 * lookups cost the server with the client's lookup batching off and on (issue 19, section
 * 3.2), measured as outpost measured its batched retry lookups
 * (the shared reference notes, queue-engine.md section 4.2: lookup queries, the server's CPU
 * during the burst as median, p90 and max cores, and every event delivered).
 *
 *   bench_retry_burst [-calls N] [-threads T] [-topics N] [-log-streams L] [-wait MS]
 *                     [-workers W] [-count N]
 *
 * The embedded server runs in a child process (fault_host.h), so that its CPU time is its
 * own and its fault injection and call counts stay at hand. Per row: a fresh server (N topics,
 * default 1, of L log streams each, default 2: the size of the metadata every lookup fetches) and a
 * fresh client (retry.workers W, default 64, so that a batch of 50 can fill; lookup.batch.size 0,
 * 10 or 50; lookup.batch.wait.ms MS, default 5, the property's default;
 * metadata.refresh.interval.ms 0, so that every GetMetadata the server sees during the burst is a
 * lookup; the rest default: append.retries 3, backoff 10 ms doubling). One append per log stream
 * connects the channels first, and 500 refreshes one after another give the server's CPU per
 * GetMetadata on that metadata (not measured). Then the next N AppendRequests (default 4096) are
 * armed to fail, either UNAVAILABLE "not primary replica" or FAILED_PRECONDITION "sealed" (both
 * refusals made before storing: NOT_APPENDED, retried after a lookup), and T threads (default 256)
 * released together make N calls between them, one 32-byte record each: even threads varlog_append
 * (topic-wide, a refused log stream is denied and the retry goes to another), odd threads
 * varlog_append_to (log stream 1 + thread % L, retried there).
 *
 * Measured over the burst (from the release to the last call's return): GetMetadata calls the
 * server saw (varlog_server_call_count), its CPU time (the child's getrusage, every thread)
 * and the same sampled every 50 ms as cores (median, p90, max), this process's CPU time, the
 * client's retries and lookups (varlog_client_stats), and every call's outcome; the table's
 * "on lookups" is GetMetadata calls times the calibrated CPU per call. Afterwards
 * the log is read back with varlog_peek: the entries stored must equal the records of the
 * APPENDED calls (plus the warm-up), or the row fails.
 *
 * Output: a Go benchmark line per row, an op being one call of the burst:
 *   BenchmarkRetryBurst/refusal=not-primary/batch=off-2  4096  N ns/op  x GetMetadata/op
 *     x lookups/op  x retries/op  x srv-cpu-us/op  x cpu-us/op  x appended/op
 *     x srv-cpu-us/GetMetadata
 * then a table of every row. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "fault_host.h"
#include "varlog/client.h"
#include "varlog/conf.h"
#include "varlog/subscribe.h"

#define PATH_APPEND "/varlog.snpb.LogIO/Append"
#define PATH_METADATA "/varlog.mrpb.MetadataRepositoryService/GetMetadata"
#define SAMPLE_MS 50
#define MAX_SAMPLES 4096
#define MAX_ROWS 64
#define CALL_TIMEOUT_MS 10000
#define CALIBRATION_CALLS 500

typedef struct refusal {
    const char *name;
    int code;
    const char *message;
} refusal_t;

static const refusal_t refusals[] = {{"not-primary", 14, "not primary replica"},
                                     {"sealed", 9, "sealed"}};
static const int batch_sizes[] = {0, 10, 50};

typedef struct opts {
    long calls, threads, topics, log_streams, wait_ms, workers, count;
} opts_t;

typedef struct row {
    const char *refusal;
    int batch;
    long calls, appended, not_appended, maybe;
    long sealed, unavailable, timed_out, no_log_stream, other;
    uint64_t retries, lookups, getmetadata, append_requests, stored;
    int64_t wall_us, srv_cpu_us, cli_cpu_us;
    double getmetadata_us; /* the server's CPU per GetMetadata, calibrated before the burst */
    double cores_median, cores_p90, cores_max;
    bool failed;
} row_t;

/* ---- the burst ----------------------------------------------------------------------------- */

typedef struct burst {
    varlog_client_t *client;
    const opts_t *o;
    atomic_long next_call;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool go;
    row_t *row; /* outcome counts, under mu */
} burst_t;

typedef struct worker {
    burst_t *b;
    long id;
    pthread_t th;
} worker_t;

static void count_outcome(burst_t *b, varlog_err_t rc, varlog_outcome_t outcome)
{
    row_t *r = b->row;
    pthread_mutex_lock(&b->mu);
    if (rc == VARLOG_OK)
        r->appended++;
    else if (outcome == VARLOG_MAYBE_APPENDED)
        r->maybe++;
    else
        r->not_appended++;
    if (rc == VARLOG_ERR_SEALED)
        r->sealed++;
    else if (rc == VARLOG_ERR_RPC_UNAVAILABLE)
        r->unavailable++;
    else if (rc == VARLOG_ERR_TIMED_OUT)
        r->timed_out++;
    else if (rc == VARLOG_ERR_NO_LOG_STREAM)
        r->no_log_stream++;
    else if (rc != VARLOG_OK)
        r->other++;
    pthread_mutex_unlock(&b->mu);
}

static void *burst_thread(void *arg)
{
    worker_t *w = arg;
    burst_t *b = w->b;
    pthread_mutex_lock(&b->mu);
    while (!b->go)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    char payload[32];
    memset(payload, 'r', sizeof(payload));
    varlog_record_t rec = {payload, sizeof(payload)};
    while (atomic_fetch_add(&b->next_call, 1) < b->o->calls) {
        varlog_entry_meta_t meta;
        varlog_outcome_t outcome = VARLOG_NOT_APPENDED;
        varlog_err_t rc;
        if (w->id % 2)
            rc = varlog_append_to(b->client, 1, (int32_t)(1 + w->id % b->o->log_streams), &rec, 1,
                                  CALL_TIMEOUT_MS, &meta, &outcome);
        else
            rc = varlog_append(b->client, 1, &rec, 1, CALL_TIMEOUT_MS, &meta, &outcome);
        count_outcome(b, rc, outcome);
    }
    return NULL;
}

/* ---- the server's CPU, sampled ------------------------------------------------------------- */

typedef struct sampler {
    pthread_t th;
    atomic_bool stop;
    double cores[MAX_SAMPLES];
    size_t n;
} sampler_t;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void *sampler_thread(void *arg)
{
    sampler_t *s = arg;
    int64_t t = now_us(), cpu = fault_host_cpu_us();
    while (!atomic_load(&s->stop) && s->n < MAX_SAMPLES) {
        /* The sampling period itself, not a wait for a condition. */
        struct timespec ts = {0, SAMPLE_MS * 1000000L};
        nanosleep(&ts, NULL);
        int64_t t2 = now_us(), cpu2 = fault_host_cpu_us();
        if (cpu2 >= 0 && cpu >= 0 && t2 > t)
            s->cores[s->n++] = (double)(cpu2 - cpu) / (double)(t2 - t);
        t = t2;
        cpu = cpu2;
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void sampler_summary(sampler_t *s, row_t *r)
{
    if (!s->n)
        return;
    qsort(s->cores, s->n, sizeof(double), cmp_double);
    r->cores_median = s->cores[s->n / 2];
    r->cores_p90 = s->cores[(s->n * 9) / 10 < s->n ? (s->n * 9) / 10 : s->n - 1];
    r->cores_max = s->cores[s->n - 1];
}

/* ---- one row ----------------------------------------------------------------------------------
 */

static int64_t self_cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec +
           (int64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
}

static bool set(varlog_conf_t *conf, const char *name, const char *fmt, long v)
{
    char value[64], err[256];
    snprintf(value, sizeof(value), fmt, v);
    if (varlog_conf_set(conf, name, value, err, sizeof(err)) != VARLOG_OK) {
        fprintf(stderr, "bench_retry_burst: %s=%s: %s\n", name, value, err);
        return false;
    }
    return true;
}

static varlog_client_t *open_client(const char *addr, const opts_t *o, int batch)
{
    varlog_conf_t *conf = varlog_conf_new();
    char err[256];
    if (!conf || varlog_conf_set(conf, "metadata.addresses", addr, err, sizeof(err)) != VARLOG_OK ||
        varlog_conf_set(conf, "log.level", "crit", err, sizeof(err)) != VARLOG_OK ||
        !set(conf, "metadata.refresh.interval.ms", "%ld", 0) ||
        !set(conf, "retry.workers", "%ld", o->workers) ||
        !set(conf, "lookup.batch.size", "%ld", batch) ||
        !set(conf, "lookup.batch.wait.ms", "%ld", o->wait_ms)) {
        varlog_conf_destroy(conf);
        return NULL;
    }
    varlog_client_t *c = NULL;
    if (varlog_client_new(&conf, &c, err, sizeof(err)) != VARLOG_OK) {
        fprintf(stderr, "bench_retry_burst: client: %s\n", err);
        varlog_conf_destroy(conf);
        return NULL;
    }
    return c;
}

/* Entries stored in the topic: the last LLSN of each log stream (nothing is trimmed). */
static bool stored_entries(varlog_client_t *c, long log_streams, uint64_t *n)
{
    *n = 0;
    for (int32_t ls = 1; ls <= log_streams; ls++) {
        varlog_entry_meta_t first, last;
        if (varlog_peek(c, 1, ls, -1, &first, &last, NULL) != VARLOG_OK) {
            fprintf(stderr, "bench_retry_burst: peek %d: %s\n", ls, varlog_last_error());
            return false;
        }
        *n += last.llsn;
    }
    return true;
}

static bool run_row(const opts_t *o, const refusal_t *ref, int batch, row_t *r)
{
    memset(r, 0, sizeof(*r));
    r->refusal = ref->name;
    r->batch = batch;
    r->calls = o->calls;
    char addr[128];
    if (!fault_host_start((int32_t)o->topics, (int32_t)o->log_streams, addr, sizeof(addr)))
        return false;
    varlog_client_t *c = open_client(addr, o, batch);
    if (!c)
        return false;
    /* Connect to the node (and warm the metadata) before the clock starts. */
    static const char warm[] = "warm-up";
    varlog_record_t rec = {warm, sizeof(warm) - 1};
    for (int32_t ls = 1; ls <= o->log_streams; ls++)
        if (varlog_append_to(c, 1, ls, &rec, 1, CALL_TIMEOUT_MS, NULL, NULL) != VARLOG_OK) {
            fprintf(stderr, "bench_retry_burst: warm-up: %s\n", varlog_last_error());
            varlog_client_destroy(c);
            return false;
        }
    /* What one lookup costs the server: GetMetadata calls one after another (each its own
     * call: none overlaps another to share it), CPU per call. */
    uint64_t cal_md0 = fault_host_call_count(PATH_METADATA);
    int64_t cal_cpu0 = fault_host_cpu_us();
    for (int i = 0; i < CALIBRATION_CALLS; i++)
        varlog_client_refresh(c, -1);
    uint64_t cal_n = fault_host_call_count(PATH_METADATA) - cal_md0;
    if (cal_n)
        r->getmetadata_us = (double)(fault_host_cpu_us() - cal_cpu0) / (double)cal_n;

    burst_t b = {.client = c, .o = o, .row = r};
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    worker_t *w = calloc((size_t)o->threads, sizeof(*w));
    for (long i = 0; i < o->threads; i++) {
        w[i] = (worker_t){.b = &b, .id = i};
        pthread_create(&w[i].th, NULL, burst_thread, &w[i]);
    }
    varlog_client_stats_t s0, s1;
    varlog_client_stats(c, &s0);
    uint64_t md0 = fault_host_call_count(PATH_METADATA);
    uint64_t ap0 = fault_host_request_count(PATH_APPEND);
    int64_t srv0 = fault_host_cpu_us();
    fault_host_fail_next(PATH_APPEND, ref->code, ref->message, (int)o->calls);
    sampler_t *smp = calloc(1, sizeof(*smp));
    pthread_create(&smp->th, NULL, sampler_thread, smp);
    int64_t cli0 = self_cpu_us(), t0 = now_us();
    pthread_mutex_lock(&b.mu);
    b.go = true;
    pthread_cond_broadcast(&b.cv);
    pthread_mutex_unlock(&b.mu);
    for (long i = 0; i < o->threads; i++)
        pthread_join(w[i].th, NULL);
    r->wall_us = now_us() - t0;
    r->cli_cpu_us = self_cpu_us() - cli0;
    atomic_store(&smp->stop, true);
    pthread_join(smp->th, NULL);
    r->srv_cpu_us = fault_host_cpu_us() - srv0;
    r->getmetadata = fault_host_call_count(PATH_METADATA) - md0;
    r->append_requests = fault_host_request_count(PATH_APPEND) - ap0;
    varlog_client_stats(c, &s1);
    r->retries = s1.append_retries - s0.append_retries;
    r->lookups = s1.lookups - s0.lookups;
    sampler_summary(smp, r);
    free(smp);
    free(w);

    /* Every APPENDED call stored once, nothing else (the warm-up aside). */
    uint64_t stored = 0;
    if (!stored_entries(c, o->log_streams, &stored))
        r->failed = true;
    r->stored = stored - (uint64_t)o->log_streams;
    if (r->maybe == 0 && r->stored != (uint64_t)r->appended) {
        fprintf(stderr, "bench_retry_burst: %" PRIu64 " entries stored for %ld APPENDED calls\n",
                r->stored, r->appended);
        r->failed = true;
    }
    if (r->appended + r->not_appended + r->maybe != r->calls)
        r->failed = true;
    varlog_client_destroy(c);
    fault_host_stop();
    pthread_cond_destroy(&b.cv);
    pthread_mutex_destroy(&b.mu);
    return true;
}

static void print_line(const row_t *r)
{
    char batch[16];
    snprintf(batch, sizeof(batch), r->batch ? "%d" : "off", r->batch);
    double n = (double)r->calls;
    printf("BenchmarkRetryBurst/refusal=%s/batch=%s-%ld\t%8ld\t%12.0f ns/op\t%8.4f GetMetadata/op"
           "\t%8.4f lookups/op\t%8.4f retries/op\t%8.2f srv-cpu-us/op\t%8.2f cpu-us/op"
           "\t%6.4f appended/op\t%8.2f srv-cpu-us/GetMetadata\n",
           r->refusal, batch, sysconf(_SC_NPROCESSORS_ONLN), r->calls,
           (double)r->wall_us * 1000.0 / n, (double)r->getmetadata / n, (double)r->lookups / n,
           (double)r->retries / n, (double)r->srv_cpu_us / n, (double)r->cli_cpu_us / n,
           (double)r->appended / n, r->getmetadata_us);
    if (r->failed)
        printf("--- FAIL: BenchmarkRetryBurst/refusal=%s/batch=%s\n", r->refusal, batch);
    fflush(stdout);
}

static void print_table(const row_t *rows, size_t n)
{
    printf("\n| refusal | lookup.batch.size | calls | APPENDED | NOT_APPENDED | MAYBE | stored |"
           " retries | lookups | GetMetadata | burst ms | server CPU ms | of it on lookups (est.) |"
           " server cores median / p90 / max | client CPU ms |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; i++) {
        const row_t *r = &rows[i];
        char batch[16];
        snprintf(batch, sizeof(batch), r->batch ? "%d" : "off", r->batch);
        printf("| %s | %s | %ld | %ld | %ld", r->refusal, batch, r->calls, r->appended,
               r->not_appended);
        if (r->not_appended)
            printf(" (%ld SEALED, %ld UNAVAILABLE, %ld TIMED_OUT, %ld NO_LOG_STREAM, %ld other)",
                   r->sealed, r->unavailable, r->timed_out, r->no_log_stream, r->other);
        printf(" | %ld | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %" PRIu64
               " | %.0f | %.0f | %.1f | %.2f / %.2f / %.2f | %.0f |%s\n",
               r->maybe, r->stored, r->retries, r->lookups, r->getmetadata,
               (double)r->wall_us / 1000.0, (double)r->srv_cpu_us / 1000.0,
               (double)r->getmetadata * r->getmetadata_us / 1000.0, r->cores_median, r->cores_p90,
               r->cores_max, (double)r->cli_cpu_us / 1000.0, r->failed ? " FAILED" : "");
    }
}

static bool flag_long(int argc, char **argv, int *i, const char *name, long min, long max,
                      long *out)
{
    if (strcmp(argv[*i], name) != 0)
        return false;
    if (*i + 1 >= argc) {
        fprintf(stderr, "bench_retry_burst: %s needs a value\n", name);
        exit(2);
    }
    char *end;
    long v = strtol(argv[++*i], &end, 10);
    if (*end || v < min || v > max) {
        fprintf(stderr, "bench_retry_burst: %s %s: not in [%ld, %ld]\n", name, argv[*i], min, max);
        exit(2);
    }
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    /* Before anything starts gRPC or a thread. */
    if (!fault_host_fork())
        return 1;
    opts_t o = {.calls = 4096,
                .threads = 256,
                .topics = 1,
                .log_streams = 2,
                .wait_ms = 5,
                .workers = 64,
                .count = 1};
    for (int i = 1; i < argc; i++) {
        if (flag_long(argc, argv, &i, "-calls", 1, 1000000, &o.calls) ||
            flag_long(argc, argv, &i, "-threads", 1, 4096, &o.threads) ||
            flag_long(argc, argv, &i, "-topics", 1, 10000, &o.topics) ||
            flag_long(argc, argv, &i, "-log-streams", 1, 1000, &o.log_streams) ||
            flag_long(argc, argv, &i, "-wait", 0, 60000, &o.wait_ms) ||
            flag_long(argc, argv, &i, "-workers", 1, 256, &o.workers) ||
            flag_long(argc, argv, &i, "-count", 1, 10, &o.count))
            continue;
        fprintf(stderr, "usage: bench_retry_burst [-calls N] [-threads T] [-topics N] "
                        "[-log-streams L] [-wait MS] "
                        "[-workers W] [-count N]\n");
        fault_host_exit();
        return 2;
    }
    printf("goos: linux\npkg: libvarlog/bench\n# %ld calls from %ld threads, %ld topics of %ld log "
           "streams, retry.workers %ld, lookup.batch.wait.ms %ld\n",
           o.calls, o.threads, o.topics, o.log_streams, o.workers, o.wait_ms);
    row_t rows[MAX_ROWS];
    size_t n = 0;
    int status = 0;
    for (long rep = 0; rep < o.count; rep++)
        for (size_t f = 0; f < sizeof(refusals) / sizeof(refusals[0]); f++)
            for (size_t k = 0; k < sizeof(batch_sizes) / sizeof(batch_sizes[0]); k++) {
                if (batch_sizes[k] > o.workers)
                    continue; /* the client refuses a batch larger than its workers */
                if (n == MAX_ROWS || !run_row(&o, &refusals[f], batch_sizes[k], &rows[n])) {
                    status = 1;
                    continue;
                }
                print_line(&rows[n]);
                if (rows[n].failed)
                    status = 1;
                n++;
            }
    print_table(rows, n);
    fault_host_exit();
    return status;
}
