/* bench_exact: an exactness check of the benchmarks' write and read paths at volume (issue
 * 37): -bytes of payload written through every log stream of a topic, then read back, every
 * record checked.
 *
 *   bench_exact [-mr HOST:PORT[,...]] [-topic ID] [-server PATH] [-bytes N[k|m|g]] [-size B]
 *               [-shape per-ls|topic] [-producers P] [-batch N] [-depth D] [-read
 * topic|per-ls|both]
 *
 * Write: P producer threads (default 4) take records numbered 0..N-1 (N = -bytes / -size,
 * default 1g of 4096-byte records) a run of -batch (default 100) at a time and append them
 * one record per call; shape per-ls (default) sends run k to the appender bound to log stream
 * k mod L of the topic's L log streams (one client, L appenders), shape topic to one
 * topic-wide appender. appender.batch.max.records = -batch, appender.pipeline.depth = -depth
 * (default 8). Each record carries a header (a magic, this run's random id, its number, its
 * producer) and bytes derived from the run id and its number; each callback records where
 * the record was stored (log stream, LLSN, GLSN). Any failed call fails the check.
 *
 * Read (-read, default topic): topic-wide, one varlog_subscribe_iter over [the lowest GLSN
 * written, the highest + 1): every entry must be one of this run's records (header and every
 * byte), seen once, at the position its callback reported, GLSNs dense, and within each log
 * stream LLSNs increasing by one and each producer's records in the order it appended them.
 * per-ls: one varlog_subscribe_to_iter per log stream over the LLSNs written there, the same
 * checks (no GLSN: SubscribeTo does not carry it). At the end every record was seen exactly
 * once in each read.
 *
 * Without -mr a varlog-server child (-server PATH) serves 1 topic of 32 log streams.
 *
 * Prints key=value lines: the write (records, MB, seconds, MB/s), each read (entries,
 * seconds, MB/s), and "exact=OK" or "exact=FAILED: <the first problem>" (exit 1). */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "varlog/appender.h"
#include "varlog/client.h"
#include "varlog/subscribe.h"
#include "bench_client.h"
#include "child_server.h"
#include "harness.h"

#ifndef VARLOG_SERVER_PROGRAM
#define VARLOG_SERVER_PROGRAM "varlog-server"
#endif

#define MAGIC 0x5443415845474c56ULL /* "VLGEXACT" */
#define HEADER 32                   /* magic, run, number, producer: 4 x 8 bytes */
#define MAX_SIZE 65536
#define MAX_PRODUCERS 64
#define MAX_LS 1024
#define FLUSH_TIMEOUT_MS 300000
#define CLOSE_TIMEOUT_MS 30000
#define NEXT_TIMEOUT_MS 30000
#define PROBLEMS_SHOWN 5

static const char *cluster_address;
static const char *server_program = VARLOG_SERVER_PROGRAM;
static int32_t topic_id = 1, unused_ls, size = 4096, producers = 4, batch = 100, depth = 8;
static bool unused_inproc, shape_topic, read_topic = true, read_per_ls;
static uint64_t total_bytes = 1ULL << 30;

typedef struct where {
    int32_t ls; /* 0 until the callback */
    uint64_t llsn, glsn;
} where_t;

static uint64_t run_id, n_records;
static where_t *where; /* per record, written by its callback */
static uint8_t *seen;  /* per record, by the reader */
static varlog_appender_t *apps[MAX_LS];
static size_t n_apps;
static atomic_uint_fast64_t next_run, failed_calls, problems;
static char first_problem[512];
static pthread_mutex_t problem_mu = PTHREAD_MUTEX_INITIALIZER;

static void problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void problem(const char *fmt, ...)
{
    va_list ap;
    char buf[512];
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    uint64_t n = atomic_fetch_add(&problems, 1);
    pthread_mutex_lock(&problem_mu);
    if (n == 0)
        snprintf(first_problem, sizeof(first_problem), "%s", buf);
    if (n < PROBLEMS_SHOWN)
        fprintf(stderr, "bench_exact: %s\n", buf);
    pthread_mutex_unlock(&problem_mu);
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

/* Record number i of this run, by producer p, into buf (size bytes). */
static void make_record(uint8_t *buf, uint64_t i, uint64_t p)
{
    const uint64_t h[4] = {MAGIC, run_id, i, p};
    memcpy(buf, h, HEADER);
    uint64_t s = mix(run_id ^ mix(i));
    for (int32_t off = HEADER; off < size; off += 8) {
        s = mix(s + 0x9e3779b97f4a7c15ULL);
        size_t n = (size_t)(size - off) < 8 ? (size_t)(size - off) : 8;
        memcpy(buf + off, &s, n);
    }
}

static double now_s(void)
{
    return (double)bench_now_ns() / 1e9;
}

/* ---- write --------------------------------------------------------------------------- */

static void on_appended(const varlog_append_result_t *r, void *opaque)
{
    uint64_t i = (uint64_t)(uintptr_t)opaque;
    if (r->err != VARLOG_OK) {
        if (atomic_fetch_add(&failed_calls, 1) == 0)
            problem("append of record %llu: %s (%s): %s", (unsigned long long)i,
                    varlog_err_name(r->err), varlog_outcome_name(r->outcome),
                    r->errtext ? r->errtext : "");
        return;
    }
    where[i] = (where_t){
        .ls = r->metas[0].log_stream_id, .llsn = r->metas[0].llsn, .glsn = r->metas[0].glsn};
}

static void *producer_main(void *arg)
{
    uint64_t p = (uint64_t)(uintptr_t)arg;
    uint8_t *buf = malloc((size_t)size);
    if (!buf) {
        problem("producer %llu: out of memory", (unsigned long long)p);
        return NULL;
    }
    for (;;) {
        uint64_t run = atomic_fetch_add(&next_run, 1);
        uint64_t first = run * (uint64_t)batch;
        if (first >= n_records || atomic_load(&problems))
            break;
        varlog_appender_t *app = apps[run % n_apps];
        for (uint64_t i = first; i < first + (uint64_t)batch && i < n_records; i++) {
            make_record(buf, i, p);
            const varlog_record_t rec = {.data = buf, .len = (size_t)size};
            varlog_err_t rc =
                varlog_appender_append(app, &rec, 1, -1, on_appended, (void *)(uintptr_t)i);
            if (rc != VARLOG_OK) {
                problem("varlog_appender_append (record %llu): %s: %s", (unsigned long long)i,
                        varlog_err_name(rc), varlog_last_error());
                free(buf);
                return NULL;
            }
        }
    }
    free(buf);
    return NULL;
}

/* ---- read ---------------------------------------------------------------------------- */

typedef struct ls_state {
    int32_t id;
    uint64_t last_llsn;              /* of the entry read last, 0 before the first */
    uint64_t last_of[MAX_PRODUCERS]; /* each producer's record read last, + 1 */
} ls_state_t;

static ls_state_t *ls_state;
static size_t n_ls;
static int32_t ls_ids[MAX_LS];

static ls_state_t *state_of(int32_t ls)
{
    for (size_t i = 0; i < n_ls; i++) {
        if (ls_state[i].id == ls)
            return &ls_state[i];
    }
    return NULL;
}

/* Checks one entry read; returns false once too many problems were found. */
static bool check_entry(const varlog_entry_t *e, bool with_glsn, uint8_t *expect)
{
    uint64_t h[4];
    if (e->len != (size_t)size || e->len < HEADER) {
        problem("entry at GLSN %llu (log stream %d, LLSN %llu): %zu bytes, not %d",
                (unsigned long long)e->meta.glsn, e->meta.log_stream_id,
                (unsigned long long)e->meta.llsn, e->len, size);
        return atomic_load(&problems) < PROBLEMS_SHOWN;
    }
    memcpy(h, e->data, HEADER);
    uint64_t i = h[2], p = h[3];
    if (h[0] != MAGIC || h[1] != run_id || i >= n_records || p >= (uint64_t)producers) {
        problem("entry at GLSN %llu (log stream %d, LLSN %llu) is not a record of this run",
                (unsigned long long)e->meta.glsn, e->meta.log_stream_id,
                (unsigned long long)e->meta.llsn);
        return atomic_load(&problems) < PROBLEMS_SHOWN;
    }
    make_record(expect, i, p);
    if (memcmp(expect, e->data, (size_t)size) != 0)
        problem("record %llu: its bytes differ from those written", (unsigned long long)i);
    if (seen[i]++)
        problem("record %llu read again (log stream %d, LLSN %llu)", (unsigned long long)i,
                e->meta.log_stream_id, (unsigned long long)e->meta.llsn);
    const where_t *w = &where[i];
    if (w->ls != e->meta.log_stream_id || w->llsn != e->meta.llsn ||
        (with_glsn && w->glsn != e->meta.glsn))
        problem("record %llu read at log stream %d LLSN %llu GLSN %llu; its callback said %d %llu "
                "%llu",
                (unsigned long long)i, e->meta.log_stream_id, (unsigned long long)e->meta.llsn,
                (unsigned long long)e->meta.glsn, w->ls, (unsigned long long)w->llsn,
                (unsigned long long)w->glsn);
    ls_state_t *s = state_of(e->meta.log_stream_id);
    if (!s) {
        problem("entry from log stream %d, not one of the topic's", e->meta.log_stream_id);
    } else {
        if (s->last_llsn && e->meta.llsn != s->last_llsn + 1)
            problem("log stream %d: LLSN %llu after %llu", s->id, (unsigned long long)e->meta.llsn,
                    (unsigned long long)s->last_llsn);
        s->last_llsn = e->meta.llsn;
        if (s->last_of[p] && i < s->last_of[p])
            problem("log stream %d: producer %llu's record %llu after its record %llu", s->id,
                    (unsigned long long)p, (unsigned long long)i,
                    (unsigned long long)(s->last_of[p] - 1));
        s->last_of[p] = i + 1;
    }
    return atomic_load(&problems) < PROBLEMS_SHOWN;
}

static void reset_read(void)
{
    memset(seen, 0, n_records);
    for (size_t i = 0; i < n_ls; i++) {
        int32_t id = ls_state[i].id;
        memset(&ls_state[i], 0, sizeof(ls_state[i]));
        ls_state[i].id = id;
    }
}

/* Reads sub to END; returns the entries read, or -1 after a problem. */
static int64_t drain(varlog_subscription_t *sub, bool with_glsn, uint64_t *next_glsn,
                     uint8_t *expect)
{
    int64_t n = 0;
    varlog_entry_t e;
    for (;;) {
        varlog_err_t rc = varlog_subscription_next(sub, NEXT_TIMEOUT_MS, &e);
        if (rc == VARLOG_ERR_END)
            return n;
        if (rc != VARLOG_OK) {
            problem("varlog_subscription_next after %lld entries: %s: %s", (long long)n,
                    varlog_err_name(rc), varlog_last_error());
            return -1;
        }
        if (with_glsn) {
            if (e.meta.glsn != *next_glsn)
                problem("GLSN %llu read where %llu was next", (unsigned long long)e.meta.glsn,
                        (unsigned long long)*next_glsn);
            *next_glsn = e.meta.glsn + 1;
        }
        n++;
        if (!check_entry(&e, with_glsn, expect))
            return -1;
    }
}

static bool all_seen(const char *how)
{
    for (uint64_t i = 0; i < n_records; i++) {
        if (!seen[i]) {
            uint64_t missing = 0;
            for (uint64_t j = i; j < n_records; j++)
                missing += !seen[j];
            problem("%s read: %llu records never read, the first number %llu (log stream %d, "
                    "LLSN %llu, GLSN %llu)",
                    how, (unsigned long long)missing, (unsigned long long)i, where[i].ls,
                    (unsigned long long)where[i].llsn, (unsigned long long)where[i].glsn);
            return false;
        }
    }
    return true;
}

static bool read_topic_wide(varlog_client_t *client, uint8_t *expect)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint64_t i = 0; i < n_records; i++) {
        lo = where[i].glsn < lo ? where[i].glsn : lo;
        hi = where[i].glsn > hi ? where[i].glsn : hi;
    }
    reset_read();
    double t0 = now_s();
    varlog_subscription_t *sub = NULL;
    varlog_err_t rc = varlog_subscribe_iter(client, topic_id, lo, hi + 1, &sub);
    if (rc != VARLOG_OK) {
        problem("varlog_subscribe_iter: %s: %s", varlog_err_name(rc), varlog_last_error());
        return false;
    }
    uint64_t next = lo;
    int64_t n = drain(sub, true, &next, expect);
    varlog_subscription_close(&sub);
    double secs = now_s() - t0;
    if (n < 0)
        return false;
    printf("read=topic entries=%lld glsn_first=%llu glsn_last=%llu seconds=%.2f MB_per_s=%.1f\n",
           (long long)n, (unsigned long long)lo, (unsigned long long)hi, secs,
           (double)n * size / 1e6 / secs);
    fflush(stdout);
    return all_seen("topic-wide");
}

static bool read_each_ls(varlog_client_t *client, uint8_t *expect)
{
    reset_read();
    double t0 = now_s();
    int64_t total = 0;
    for (size_t k = 0; k < n_ls; k++) {
        uint64_t lo = UINT64_MAX, hi = 0;
        for (uint64_t i = 0; i < n_records; i++) {
            if (where[i].ls != ls_ids[k])
                continue;
            lo = where[i].llsn < lo ? where[i].llsn : lo;
            hi = where[i].llsn > hi ? where[i].llsn : hi;
        }
        if (hi == 0)
            continue; /* nothing of this run there */
        varlog_subscription_t *sub = NULL;
        varlog_err_t rc = varlog_subscribe_to_iter(client, topic_id, ls_ids[k], lo, hi + 1, &sub);
        if (rc != VARLOG_OK) {
            problem("varlog_subscribe_to_iter(log stream %d): %s: %s", ls_ids[k],
                    varlog_err_name(rc), varlog_last_error());
            return false;
        }
        int64_t n = drain(sub, false, NULL, expect);
        varlog_subscription_close(&sub);
        if (n < 0)
            return false;
        total += n;
    }
    double secs = now_s() - t0;
    printf("read=per-ls entries=%lld log_streams=%zu seconds=%.2f MB_per_s=%.1f\n",
           (long long)total, n_ls, secs, (double)total * size / 1e6 / secs);
    fflush(stdout);
    return all_seen("per-log-stream");
}

/* ---- flags, main --------------------------------------------------------------------- */

static bool parse_bytes(const char *v, uint64_t *out)
{
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    uint64_t mul = *end == 'k'   ? 1ULL << 10
                   : *end == 'm' ? 1ULL << 20
                   : *end == 'g' ? 1ULL << 30
                                 : 1;
    if (end == v || (mul > 1 && end[1]) || (mul == 1 && *end) || n == 0)
        return false;
    *out = n * mul;
    return true;
}

static bool take_flags(int argc, char **argv)
{
    const bench_target_flags_t target = {.inproc = &unused_inproc,
                                         .cluster_address = &cluster_address,
                                         .server_program = &server_program,
                                         .topic_id = &topic_id,
                                         .log_stream = &unused_ls,
                                         .size = &size,
                                         .logstream_min = 0,
                                         .size_max = MAX_SIZE};
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        bool ok = true;
        if (bench_target_flag(argc, argv, &i, &target, &ok)) {
            if (!ok)
                return false;
        } else if (bench_flag(argc, argv, &i, "bytes", true, &v)) {
            if (!v || !parse_bytes(v, &total_bytes)) {
                fprintf(stderr, "%s: -bytes wants N, Nk, Nm or Ng\n", argv[0]);
                return false;
            }
        } else if (bench_flag(argc, argv, &i, "shape", true, &v)) {
            if (!v || (strcmp(v, "per-ls") != 0 && strcmp(v, "topic") != 0)) {
                fprintf(stderr, "%s: -shape wants per-ls or topic\n", argv[0]);
                return false;
            }
            shape_topic = strcmp(v, "topic") == 0;
        } else if (bench_flag(argc, argv, &i, "read", true, &v)) {
            if (!v || (strcmp(v, "topic") && strcmp(v, "per-ls") && strcmp(v, "both"))) {
                fprintf(stderr, "%s: -read wants topic, per-ls or both\n", argv[0]);
                return false;
            }
            read_topic = strcmp(v, "per-ls") != 0;
            read_per_ls = strcmp(v, "topic") != 0;
        } else if (bench_flag(argc, argv, &i, "producers", true, &v)) {
            if (!v || !bench_parse_int(argv[0], "producers", v, 1, &producers) ||
                producers > MAX_PRODUCERS)
                return false;
        } else if (bench_flag(argc, argv, &i, "batch", true, &v)) {
            if (!v || !bench_parse_int(argv[0], "batch", v, 1, &batch))
                return false;
        } else if (bench_flag(argc, argv, &i, "depth", true, &v)) {
            if (!v || !bench_parse_int(argv[0], "depth", v, 1, &depth))
                return false;
        } else {
            fprintf(stderr,
                    "usage: %s [-mr HOST:PORT[,...]] [-topic ID] [-server PATH] [-bytes N[k|m|g]] "
                    "[-size B] [-shape per-ls|topic] [-producers P] [-batch N] [-depth D] "
                    "[-read topic|per-ls|both]\n",
                    argv[0]);
            return false;
        }
    }
    if (size < HEADER) {
        fprintf(stderr, "%s: -size must be at least %d (the header)\n", argv[0], HEADER);
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    if (!take_flags(argc, argv))
        return 2;
    int rc = 1;
    pid_t child = -1;
    char child_addr[64];
    const char *address = cluster_address;
    varlog_client_t *client = NULL;
    uint8_t *expect = malloc((size_t)size);
    n_records = total_bytes / (uint64_t)size;
    where = calloc(n_records, sizeof(*where));
    seen = calloc(n_records, 1);
    if (!expect || !where || !seen || n_records == 0) {
        fprintf(stderr, "bench_exact: out of memory (or -bytes below -size)\n");
        goto out;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    run_id = mix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid());

    if (!address) {
        child =
            child_server_start(server_program, 1, 32, 4ULL << 30, child_addr, sizeof(child_addr));
        if (child < 0)
            goto out;
        address = child_addr;
    }
    char batch_s[16], depth_s[16], bytes_s[24];
    snprintf(batch_s, sizeof(batch_s), "%d", batch);
    snprintf(depth_s, sizeof(depth_s), "%d", depth);
    uint64_t batch_bytes = (uint64_t)batch * (uint64_t)(size + 64);
    snprintf(bytes_s, sizeof(bytes_s), "%llu",
             (unsigned long long)(batch_bytes > (1ULL << 20) ? batch_bytes : 1ULL << 20));
    const char *conf[] = {"appender.batch.max.records",
                          batch_s,
                          "appender.pipeline.depth",
                          depth_s,
                          "appender.batch.max.bytes",
                          bytes_s,
                          NULL};
    if (bench_client_open(address, conf, &client) != 0)
        goto out;
    varlog_err_t err = varlog_client_log_streams(client, topic_id, ls_ids, MAX_LS, &n_ls);
    if (err != VARLOG_OK || n_ls == 0 || n_ls > MAX_LS) {
        fprintf(stderr, "topic %d: %s\n", topic_id,
                err != VARLOG_OK ? varlog_last_error() : "no log stream, or more than 1024");
        goto out;
    }
    ls_state = calloc(n_ls, sizeof(*ls_state));
    if (!ls_state)
        goto out;
    for (size_t i = 0; i < n_ls; i++)
        ls_state[i].id = ls_ids[i];
    n_apps = shape_topic ? 1 : n_ls;
    for (size_t i = 0; i < n_apps; i++) {
        err = varlog_appender_new(client, topic_id, shape_topic ? 0 : ls_ids[i], &apps[i]);
        if (err != VARLOG_OK) {
            fprintf(stderr, "varlog_appender_new: %s\n", varlog_last_error());
            goto out;
        }
    }
    printf("run_id=%016llx topic=%d log_streams=%zu shape=%s records=%llu size=%d producers=%d "
           "batch=%d depth=%d\n",
           (unsigned long long)run_id, topic_id, n_ls, shape_topic ? "topic" : "per-ls",
           (unsigned long long)n_records, size, producers, batch, depth);
    fflush(stdout);

    double t0 = now_s();
    pthread_t th[MAX_PRODUCERS];
    int started = 0;
    for (; started < producers; started++) {
        if (pthread_create(&th[started], NULL, producer_main, (void *)(uintptr_t)started) != 0)
            break;
    }
    for (int k = 0; k < started; k++)
        pthread_join(th[k], NULL);
    for (size_t i = 0; i < n_apps; i++) {
        size_t pending = 0;
        err = varlog_appender_flush(apps[i], FLUSH_TIMEOUT_MS, &pending);
        if (err != VARLOG_OK)
            problem("varlog_appender_flush: %s (%zu calls pending)", varlog_err_name(err), pending);
    }
    double wsecs = now_s() - t0;
    if (started < producers)
        problem("pthread_create failed");
    printf("write records=%llu MB=%.1f seconds=%.2f MB_per_s=%.1f failed_calls=%llu\n",
           (unsigned long long)n_records, (double)n_records * size / 1e6, wsecs,
           (double)n_records * size / 1e6 / wsecs, (unsigned long long)atomic_load(&failed_calls));
    fflush(stdout);
    for (uint64_t i = 0; !atomic_load(&problems) && i < n_records; i++) {
        if (where[i].ls == 0)
            problem("record %llu: no successful callback", (unsigned long long)i);
    }
    if (!atomic_load(&problems) && read_topic)
        read_topic_wide(client, expect);
    if (!atomic_load(&problems) && read_per_ls)
        read_each_ls(client, expect);
    rc = atomic_load(&problems) ? 1 : 0;
    printf("exact=%s%s\n", rc ? "FAILED: " : "OK", rc ? first_problem : "");
out:
    for (size_t i = 0; i < n_apps; i++) {
        if (apps[i] && varlog_appender_close(&apps[i], CLOSE_TIMEOUT_MS) != VARLOG_OK)
            fprintf(stderr, "varlog_appender_close: %s\n", varlog_last_error());
    }
    varlog_client_destroy(client);
    child_server_stop(child);
    free(expect);
    free(where);
    free(seen);
    free(ls_state);
    return rc;
}
