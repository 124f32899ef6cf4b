/* bench_append's Appender and AppenderPerLS rows: the pipelined appender (varlog/appender.h)
 * fed by producer threads, one record or -call records a call (bench_append.c says what the
 * rows measure and parses the flags they share). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "varlog/appender.h"
#include "varlog/client.h"
#include "varlog/server.h"
#include "alloc_count.h"
#include "bench_append.h"
#include "bench_client.h"
#include "child_server.h"
#include "harness.h"

#define FLUSH_TIMEOUT_MS 60000
#define CLOSE_TIMEOUT_MS 30000

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
void *penv_setup(const void *arg)
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

void penv_teardown(void *ctx)
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
void pipe_round(bench_b_t *b)
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
_Static_assert(N_OF(pipe_sizes) * N_OF(pipe_batches) * N_OF(pipe_depths) * N_OF(pipe_producers) <=
                   N_PIPE_CASES,
               "N_PIPE_CASES holds the whole grid");

void pipe_grid_size(size_t size)
{
    pipe_sizes[0] = size;
    n_pipe_sizes = 1;
}

void pipe_grid_producers(int producers)
{
    pipe_producers[0] = producers;
    n_pipe_producers = 1;
}

void pipe_payload_fill(void)
{
    /* Varied bytes, as records usually are; the same for every record. */
    for (size_t i = 0; i < sizeof(appender_payload); i++)
        appender_payload[i] = (uint8_t)(i * 2654435761u >> 24);
}

size_t pipe_cases_make(pcase_t *out)
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
