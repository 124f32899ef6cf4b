/* bench_subscribe: reading the log (varlog/subscribe.h), printed as Go benchmark lines.
 *
 *   bench_subscribe [-mr HOST:PORT[,HOST:PORT...]] [-topic ID] [-logstream ID] [-inproc]
 *                   [-server PATH] [-fillbatch N] [-nofill] [-conf NAME=VALUE]...
 *                   [-benchtime=D|Nx] [-count=N] [-bench=REGEX] [FILTER]
 *
 * (-benchtime, -count, -bench and FILTER: see harness.h.)
 *
 * Rows, all of 100-byte entries; an op is one entry delivered to the application:
 *
 *   SubscribeTo/iter/ls=1      varlog_subscribe_to_iter on the topic's one log stream (LLSN
 *                              order: no merge);
 *   Subscribe/iter/ls=K        varlog_subscribe_iter on a topic of K = 1, 2, 4 log streams
 *                              (GLSN order: the merge over K streams);
 *   Subscribe/handler/ls=2     varlog_subscribe with an on_entry handler on the
 *                              subscription's thread, the benchmark thread waiting for on_end.
 *
 * A round of b.N opens a subscription of [first, first + b.N), takes b.N entries (checking
 * that each has the next GLSN, or LLSN for SubscribeTo, and 100 bytes), waits for the end
 * of the range (END from varlog_subscription_next, on_end), and closes it: opening and the
 * first round trip are inside the clock, spread over b.N entries. Every round reads the log
 * from its beginning again.
 *
 * The log is filled outside the clock: before a round that wants more entries than the log
 * holds, a pipelined appender (appender.batch.max.records = -fillbatch, default 1000;
 * topic-wide for ls > 1, so runs of about that many consecutive GLSNs sit in one log stream,
 * as a batch-appending writer leaves them) appends the shortfall and is flushed. Then the
 * clock is reset.
 *
 * Servers: by default a varlog-server child process per benchmark and -count repetition (1
 * topic of K log streams, --max-bytes 8 GiB; -server PATH, default the one built with this
 * program), so that this process's CPU time is the client's alone. -inproc runs the embedded
 * server in this process instead (CPU and allocations then include the server's).
 *
 * -mr: the metadata repository of a Varlog cluster instead. Rows: SubscribeTo/iter on log
 * stream -logstream (default the topic's first), and Subscribe/iter and Subscribe/handler
 * topic-wide over all of -topic's (default 1) log streams, named ls=K after the count found.
 * The log's first entries come from varlog_peek (GLSN: the lowest first entry of the
 * topic's log streams; LLSN: the log stream's). The cluster must hold enough entries from
 * there for the rounds (about 1.2 x the entries/s figure with the default -benchtime=1s,
 * more for longer ones), or the benchmark appends the shortfall first (100-byte records
 * that stay in the cluster); -nofill makes a shortfall fail the row instead. Entries that
 * others wrote are read as they are: the length check is left out and MB/s assumes 100
 * bytes; B/entry reports the real average.
 *
 * -conf NAME=VALUE: a client property for every row (subscribe.prefetch.entries, ...);
 * repeatable.
 *
 * Line format: name-GOMAXPROCS, iterations, ns/op, MB/s (100 bytes an entry), B/op and
 * allocs/op (libvarlog's own allocations, malloc wrapped at link time: alloc_count.c), then
 *   entries/s        entries delivered per second;
 *   cpu-us/entry     user + system CPU of this whole process (getrusage RUSAGE_SELF: the
 *                    benchmark thread, the subscription's thread, gRPC's threads) over the
 *                    round, per entry;
 *   srv-cpu-us/entry the child server's CPU per entry (/proc/PID/stat, 10 ms ticks);
 *   all-allocs/op    every allocation of the process per entry, gRPC's included
 *                    (alloc_all.c);
 *   resubscribes     streams opened again in the round (subscription stats; 0 when sane);
 *   B/entry          (-mr) the average payload bytes of an entry read. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "varlog/appender.h"
#include "varlog/client.h"
#include "varlog/conf.h"
#include "varlog/server.h"
#include "varlog/subscribe.h"
#include "alloc_count.h"
#include "bench_client.h"
#include "child_server.h"
#include "harness.h"
#include "wire.h"

#ifndef VARLOG_SERVER_PROGRAM
#define VARLOG_SERVER_PROGRAM "varlog-server"
#endif

#define ENTRY_SIZE 100
#define SERVER_MAX_BYTES (8ULL << 30)
#define NEXT_TIMEOUT_MS 30000
#define FILL_CALL 100 /* records per fill append call */
#define FLUSH_TIMEOUT_MS 120000
#define CLOSE_TIMEOUT_MS 30000
#define PEEK_TIMEOUT_MS 10000
#define MAX_LOG_STREAMS 64
#define MAX_CONF 16

typedef enum { F_SUBSCRIBE_TO_ITER, F_SUBSCRIBE_ITER, F_SUBSCRIBE_HANDLER, F_GRPC_FLOOR } form_t;

typedef struct scase {
    char name[64];
    form_t form;
    int32_t log_streams; /* of the child's or embedded server's topic; with -mr, found */
} scase_t;

/* -mr, -topic, -logstream, -inproc, -server, -fillbatch, -nofill, -conf. */
static const char *cluster_address;
static int32_t topic_id = 1;
static int32_t mr_log_stream; /* 0: the topic's first */
static bool inproc;
static const char *server_program = VARLOG_SERVER_PROGRAM;
static int fill_batch = 1000;
static bool no_fill;
static const char *extra_conf[2 * MAX_CONF + 1];
static size_t n_extra_conf;
static char extra_conf_buf[MAX_CONF][256];
/* -chanarg NAME=INT: integer channel arguments added to GrpcFloor's channel. */
static grpc_arg chan_args[MAX_CONF];
static size_t n_chan_args;
static char chan_arg_buf[MAX_CONF][128];

static uint8_t payload[ENTRY_SIZE];

typedef struct env {
    const scase_t *c;
    varlog_server_t *srv; /* -inproc */
    pid_t child;          /* the varlog-server child, or -1 */
    varlog_client_t *client;
    char address[256]; /* the server's (metadata and storage node) */
    grpc_channel *ch;  /* GrpcFloor's own channel and queue */
    grpc_completion_queue *cq;
    varlog_appender_t *app; /* the filler, opened when first needed */
    int32_t log_stream;     /* SubscribeTo's */
    uint64_t first;         /* the first GLSN (LLSN for SubscribeTo) of the log */
    uint64_t have;          /* entries held from first on, without a gap */

    /* Written by the appender's thread (one callback at a time), read after a flush. */
    atomic_uint_fast64_t max_glsn, max_llsn, fill_failed;
    varlog_err_t fill_err;
    char fill_text[256];

    /* Handler form: the subscription's thread writes, the benchmark thread waits. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t h_next;    /* the GLSN wanted next */
    uint64_t h_count;   /* entries delivered */
    uint64_t h_bad;     /* entries out of sequence or of the wrong size */
    uint64_t h_bytes;   /* payload bytes delivered */
    bool h_done;        /* on_end or on_error ran */
    varlog_err_t h_err; /* VARLOG_OK after on_end */
    char h_text[256];
} env_t;

static void bfail(bench_b_t *b, const char *what, varlog_err_t rc, const char *text)
{
    b_failf(b, "%s: %s (%s)%s%s", what, varlog_err_name(rc), varlog_err_str(rc),
            text && text[0] ? ": " : "", text ? text : "");
}

static int env_client_open(env_t *e);
static void env_client_close(env_t *e);

/* ---- filling the log ----------------------------------------------------------------- */

static void on_filled(const varlog_append_result_t *r, void *opaque)
{
    env_t *e = opaque;
    if (r->err != VARLOG_OK) {
        uint_fast64_t f = atomic_load_explicit(&e->fill_failed, memory_order_relaxed);
        if (f == 0) {
            e->fill_err = r->err;
            snprintf(e->fill_text, sizeof(e->fill_text), "%s", r->errtext ? r->errtext : "");
        }
        atomic_store_explicit(&e->fill_failed, f + 1, memory_order_relaxed);
        return;
    }
    uint64_t g = 0, l = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (r->metas[i].glsn > g)
            g = r->metas[i].glsn;
        if (r->metas[i].llsn > l)
            l = r->metas[i].llsn;
    }
    if (g > atomic_load_explicit(&e->max_glsn, memory_order_relaxed))
        atomic_store_explicit(&e->max_glsn, g, memory_order_relaxed);
    if (l > atomic_load_explicit(&e->max_llsn, memory_order_relaxed))
        atomic_store_explicit(&e->max_llsn, l, memory_order_relaxed);
}

/* Appends enough records for e->have >= want. Untimed (the caller stops the clock). */
static int fill(bench_b_t *b, env_t *e, uint64_t want)
{
    if (e->have >= want)
        return 0;
    if (no_fill) {
        char t[160];
        snprintf(t, sizeof(t), "the log holds %llu entries from %llu, the round wants %llu",
                 (unsigned long long)e->have, (unsigned long long)e->first,
                 (unsigned long long)want);
        bfail(b, "-nofill", VARLOG_ERR_INVALID_ARG, t);
        return -1;
    }
    bool to = e->c->form == F_SUBSCRIBE_TO_ITER;
    if (!e->client && env_client_open(e) != 0) {
        bfail(b, "varlog_client_new", VARLOG_ERR_INTERNAL, NULL);
        return -1;
    }
    if (!e->app) {
        /* SubscribeTo reads one log stream: fill that one. Otherwise topic-wide, as a
         * writer spreading batches over the log streams would. */
        int32_t ls = to ? e->log_stream : (e->c->log_streams == 1 ? e->log_stream : 0);
        varlog_err_t rc = varlog_appender_new(e->client, topic_id, ls, &e->app);
        if (rc != VARLOG_OK) {
            bfail(b, "varlog_appender_new", rc, varlog_last_error());
            return -1;
        }
    }
    varlog_record_t recs[FILL_CALL];
    for (size_t i = 0; i < FILL_CALL; i++)
        recs[i] = (varlog_record_t){.data = payload, .len = ENTRY_SIZE};
    uint64_t short_by = want - e->have;
    for (uint64_t done = 0; done < short_by; done += FILL_CALL) {
        varlog_err_t rc = varlog_appender_append(e->app, recs, FILL_CALL, -1, on_filled, e);
        if (rc != VARLOG_OK) {
            bfail(b, "varlog_appender_append", rc, varlog_last_error());
            return -1;
        }
    }
    size_t pending = 0;
    varlog_err_t rc = varlog_appender_flush(e->app, FLUSH_TIMEOUT_MS, &pending);
    if (rc != VARLOG_OK) {
        bfail(b, "varlog_appender_flush", rc, varlog_last_error());
        return -1;
    }
    if (atomic_load(&e->fill_failed) != 0) {
        bfail(b, "fill", e->fill_err, e->fill_text);
        return -1;
    }
    uint64_t last = to ? atomic_load(&e->max_llsn) : atomic_load(&e->max_glsn);
    e->have = last >= e->first ? last - e->first + 1 : 0;
    if (e->have < want) {
        char t[128];
        snprintf(t, sizeof(t), "the log holds %llu entries after the fill, %llu wanted",
                 (unsigned long long)e->have, (unsigned long long)want);
        bfail(b, "fill", VARLOG_ERR_INTERNAL, t);
        return -1;
    }
    return 0;
}

/* ---- setup --------------------------------------------------------------------------- */

static void env_close(env_t *e)
{
    if (e->ch) {
        grpc_channel_destroy(e->ch);
        grpc_completion_queue_shutdown(e->cq);
        while (grpc_completion_queue_next(e->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(e->cq);
        e->ch = NULL;
        wire_grpc_unref();
    }
    env_client_close(e);
    varlog_server_destroy(e->srv);
    e->srv = NULL;
    child_server_stop(e->child);
    e->child = -1;
}

/* The library's client, with the filler's properties and -conf's. */
static int env_client_open(env_t *e)
{
    char batch_s[16];
    snprintf(batch_s, sizeof(batch_s), "%d", fill_batch);
    const char *conf[4 + 2 * MAX_CONF + 1] = {"appender.batch.max.records", batch_s,
                                              "appender.pipeline.depth", "4"};
    for (size_t i = 0; i < n_extra_conf; i++)
        conf[4 + i] = extra_conf[i];
    return bench_client_open(e->address, conf, &e->client);
}

/* GrpcFloor closes the library's client while it measures: its I/O thread would otherwise
 * poll gRPC's shared epoll set too and hand the floor's messages over from another thread. */
static void env_client_close(env_t *e)
{
    if (e->app) {
        varlog_err_t rc = varlog_appender_close(&e->app, CLOSE_TIMEOUT_MS);
        if (rc != VARLOG_OK)
            fprintf(stderr, "varlog_appender_close: %s\n", varlog_err_name(rc));
    }
    varlog_client_destroy(e->client);
    e->client = NULL;
}

/* With -mr: where the log begins, and how much of it there is, from varlog_peek. */
static int mr_find_log(env_t *e, const int32_t *ids, size_t n)
{
    varlog_entry_meta_t first, last;
    if (e->c->form == F_SUBSCRIBE_TO_ITER) {
        varlog_err_t rc =
            varlog_peek(e->client, topic_id, e->log_stream, PEEK_TIMEOUT_MS, &first, &last, NULL);
        if (rc != VARLOG_OK) {
            fprintf(stderr, "varlog_peek(topic %d, log stream %d): %s: %s\n", topic_id,
                    e->log_stream, varlog_err_name(rc), varlog_last_error());
            return -1;
        }
        e->first = first.llsn ? first.llsn : 1;
        e->have = last.llsn >= e->first ? last.llsn - e->first + 1 : 0;
        atomic_store(&e->max_llsn, last.llsn);
        return 0;
    }
    uint64_t lo = 0, hi = 0;
    for (size_t i = 0; i < n; i++) {
        varlog_err_t rc =
            varlog_peek(e->client, topic_id, ids[i], PEEK_TIMEOUT_MS, &first, &last, NULL);
        if (rc != VARLOG_OK) {
            fprintf(stderr, "varlog_peek(topic %d, log stream %d): %s: %s\n", topic_id, ids[i],
                    varlog_err_name(rc), varlog_last_error());
            return -1;
        }
        if (first.glsn && (lo == 0 || first.glsn < lo))
            lo = first.glsn;
        if (last.glsn > hi)
            hi = last.glsn;
    }
    e->first = lo ? lo : 1;
    e->have = hi >= e->first ? hi - e->first + 1 : 0;
    atomic_store(&e->max_glsn, hi);
    return 0;
}

static void *env_setup(const void *arg)
{
    const scase_t *c = arg;
    env_t *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->c = c;
    e->child = -1;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    char child_addr[64];
    const char *address = cluster_address;
    if (!address && inproc) {
        varlog_server_opts_t o = {
            .topics = 1, .log_streams_per_topic = c->log_streams, .max_bytes = SERVER_MAX_BYTES};
        varlog_err_t rc = varlog_server_start(&o, &e->srv);
        if (rc != VARLOG_OK) {
            fprintf(stderr, "varlog_server_start: %s: %s\n", varlog_err_name(rc),
                    varlog_last_error());
            goto fail;
        }
        address = varlog_server_address(e->srv);
    } else if (!address) {
        e->child = child_server_start(server_program, 1, c->log_streams, SERVER_MAX_BYTES,
                                      child_addr, sizeof(child_addr));
        if (e->child < 0)
            goto fail;
        address = child_addr;
    }
    snprintf(e->address, sizeof(e->address), "%s", address);
    if (env_client_open(e) != 0)
        goto fail;
    if (c->form == F_GRPC_FLOOR) {
        wire_grpc_ref();
        const grpc_channel_args *base = wire_channel_args(WIRE_ARGS_CLIENT);
        grpc_arg args[32];
        size_t na = 0;
        for (size_t i = 0; i < base->num_args && na < 32; i++)
            args[na++] = base->args[i];
        for (size_t i = 0; i < n_chan_args && na < 32; i++)
            args[na++] = chan_args[i];
        grpc_channel_args ca = {.num_args = na, .args = args};
        grpc_channel_credentials *creds = grpc_insecure_credentials_create();
        e->ch = grpc_channel_create(address, creds, &ca);
        grpc_channel_credentials_release(creds);
        e->cq = grpc_completion_queue_create_for_next(NULL);
    }
    int32_t ids[MAX_LOG_STREAMS];
    size_t n = 0;
    varlog_err_t rc = varlog_client_log_streams(e->client, topic_id, ids, MAX_LOG_STREAMS, &n);
    if (rc != VARLOG_OK || n == 0) {
        fprintf(stderr, "topic %d: %s\n", topic_id,
                rc != VARLOG_OK ? varlog_last_error() : "it has no log stream");
        goto fail;
    }
    e->log_stream = cluster_address && mr_log_stream ? mr_log_stream : ids[0];
    if (cluster_address) {
        if (mr_find_log(e, ids, n) != 0)
            goto fail;
    } else {
        e->first = 1; /* a fresh server numbers from 1 */
    }
    return e;
fail:
    env_close(e);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
    return NULL;
}

static void env_teardown(void *ctx)
{
    env_t *e = ctx;
    env_close(e);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/* ---- rounds -------------------------------------------------------------------------- */

static int64_t rusage_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec +
           ru.ru_stime.tv_usec;
}

static void on_entry(const varlog_entry_t *entry, void *opaque)
{
    env_t *e = opaque;
    /* Only this thread writes the counters until on_end; the benchmark thread reads them
     * after h_done, under the mutex. */
    if (entry->meta.glsn != e->h_next || (!cluster_address && entry->len != ENTRY_SIZE))
        e->h_bad++;
    e->h_next = entry->meta.glsn + 1;
    e->h_count++;
    e->h_bytes += entry->len;
}

static void on_end(void *opaque)
{
    env_t *e = opaque;
    pthread_mutex_lock(&e->mu);
    e->h_done = true;
    e->h_err = VARLOG_OK;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

static void on_error(varlog_err_t err, const char *why, void *opaque)
{
    env_t *e = opaque;
    pthread_mutex_lock(&e->mu);
    e->h_done = true;
    e->h_err = err;
    snprintf(e->h_text, sizeof(e->h_text), "%s", why ? why : "");
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* Waits for on_end or on_error. Returns false on a timeout. */
static bool wait_handlers(env_t *e, int64_t timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (timeout_ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&e->mu);
    int rc = 0;
    while (!e->h_done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&e->cv, &e->mu, &dl);
    bool done = e->h_done;
    pthread_mutex_unlock(&e->mu);
    return done;
}

/* One round: b->n entries. Returns the payload bytes read, or -1 after b_failf. */
static int64_t read_iter(bench_b_t *b, env_t *e, varlog_subscription_t **sub)
{
    bool to = e->c->form == F_SUBSCRIBE_TO_ITER;
    uint64_t begin = e->first, end = e->first + (uint64_t)b->n;
    varlog_err_t rc =
        to ? varlog_subscribe_to_iter(e->client, topic_id, e->log_stream, begin, end, sub)
           : varlog_subscribe_iter(e->client, topic_id, begin, end, sub);
    if (rc != VARLOG_OK) {
        bfail(b, to ? "varlog_subscribe_to_iter" : "varlog_subscribe_iter", rc,
              varlog_last_error());
        return -1;
    }
    int64_t bytes = 0;
    varlog_entry_t ent;
    for (uint64_t want = begin; want < end; want++) {
        rc = varlog_subscription_next(*sub, NEXT_TIMEOUT_MS, &ent);
        if (rc != VARLOG_OK) {
            char t[384];
            snprintf(t, sizeof(t), "entry %llu of [%llu, %llu): %s", (unsigned long long)want,
                     (unsigned long long)begin, (unsigned long long)end, varlog_last_error());
            bfail(b, "varlog_subscription_next", rc, t);
            return -1;
        }
        uint64_t pos = to ? ent.meta.llsn : ent.meta.glsn;
        if (pos != want || (!cluster_address && ent.len != ENTRY_SIZE)) {
            char t[160];
            snprintf(t, sizeof(t), "wanted %s %llu (%d bytes), got %llu (%zu bytes)",
                     to ? "LLSN" : "GLSN", (unsigned long long)want, ENTRY_SIZE,
                     (unsigned long long)pos, ent.len);
            bfail(b, "out of sequence", VARLOG_ERR_INTERNAL, t);
            return -1;
        }
        bytes += (int64_t)ent.len;
    }
    rc = varlog_subscription_next(*sub, NEXT_TIMEOUT_MS, &ent);
    if (rc != VARLOG_ERR_END) {
        bfail(b, "varlog_subscription_next after the range (END wanted)", rc,
              rc == VARLOG_OK ? "an entry" : varlog_last_error());
        return -1;
    }
    return bytes;
}

static int64_t read_handler(bench_b_t *b, env_t *e, varlog_subscription_t **sub)
{
    uint64_t begin = e->first, end = e->first + (uint64_t)b->n;
    e->h_next = begin;
    e->h_count = e->h_bad = e->h_bytes = 0;
    e->h_done = false;
    e->h_err = VARLOG_OK;
    e->h_text[0] = '\0';
    varlog_subscribe_handlers_t h = {
        .on_entry = on_entry, .on_end = on_end, .on_error = on_error, .opaque = e};
    varlog_err_t rc = varlog_subscribe(e->client, topic_id, begin, end, &h, sub);
    if (rc != VARLOG_OK) {
        bfail(b, "varlog_subscribe", rc, varlog_last_error());
        return -1;
    }
    /* A generous bound: a round is about -benchtime long. */
    if (!wait_handlers(e, NEXT_TIMEOUT_MS + b->n / 10)) {
        bfail(b, "varlog_subscribe", VARLOG_ERR_TIMED_OUT, "no on_end nor on_error");
        return -1;
    }
    if (e->h_err != VARLOG_OK) {
        bfail(b, "on_error", e->h_err, e->h_text);
        return -1;
    }
    if (e->h_count != (uint64_t)b->n || e->h_bad != 0) {
        char t[160];
        snprintf(t, sizeof(t), "%llu entries delivered for %ld, %llu out of sequence",
                 (unsigned long long)e->h_count, b->n, (unsigned long long)e->h_bad);
        bfail(b, "on_entry", VARLOG_ERR_INTERNAL, t);
        return -1;
    }
    return (int64_t)e->h_bytes;
}

/* GrpcFloor: the same Subscribe as the library's, on a bare gRPC-core call whose
 * completion queue the benchmark thread polls itself (grpc_completion_queue_next reads the
 * socket on the calling thread: no I/O thread, no hand-off), one RECV_MESSAGE per entry, the
 * GLSN read from the message's first bytes. What is left per entry is gRPC core's and the
 * kernel's own cost of a message: the floor under any client built on gRPC core. */
enum { T_START = 1, T_STATUS, T_RECV };

static bool floor_batch(grpc_call *call, const grpc_op *ops, size_t n, intptr_t tag)
{
    return grpc_call_start_batch(call, ops, n, (void *)tag, NULL) == GRPC_CALL_OK;
}

/* Waits for tag; other completions are noted in *done (bit per tag). */
static bool floor_wait(env_t *e, intptr_t tag, unsigned *done, bool *ok)
{
    while (!(*done & (1u << tag))) {
        grpc_event ev = grpc_completion_queue_next(e->cq, wire_deadline(NEXT_TIMEOUT_MS), NULL);
        if (ev.type != GRPC_OP_COMPLETE)
            return false;
        *done |= 1u << (intptr_t)ev.tag;
        if ((intptr_t)ev.tag == tag)
            *ok = ev.success != 0;
    }
    *done &= ~(1u << tag);
    return true;
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* The GLSN of a SubscribeResponse (field 1 first, as Go and protobuf-c write it); 0 when
 * the message does not start with it. */
static uint64_t floor_glsn(grpc_byte_buffer *bb)
{
    grpc_byte_buffer_reader r;
    grpc_slice *sl;
    uint8_t head[11];
    size_t got = 0;
    if (!grpc_byte_buffer_reader_init(&r, bb))
        return 0;
    /* A message's bytes may be split anywhere, even inside the first varint. */
    while (got < sizeof(head) && grpc_byte_buffer_reader_peek(&r, &sl)) {
        size_t take = GRPC_SLICE_LENGTH(*sl);
        if (take > sizeof(head) - got)
            take = sizeof(head) - got;
        memcpy(head + got, GRPC_SLICE_START_PTR(*sl), take);
        got += take;
    }
    grpc_byte_buffer_reader_destroy(&r);
    uint64_t v = 0;
    if (got < 2 || head[0] != 0x08)
        return 0;
    for (size_t i = 1, shift = 0; i < got && shift < 64; i++, shift += 7) {
        v |= (uint64_t)(head[i] & 0x7f) << shift;
        if (!(head[i] & 0x80))
            break;
    }
    return v;
}

static int64_t read_floor(bench_b_t *b, env_t *e)
{
    uint64_t begin = e->first, end = e->first + (uint64_t)b->n;
    uint8_t req[64];
    size_t len = 0;
    req[len++] = 0x08;
    len += put_varint(req + len, begin);
    req[len++] = 0x10;
    len += put_varint(req + len, end);
    req[len++] = 0x18;
    len += put_varint(req + len, (uint64_t)topic_id);
    req[len++] = 0x20;
    len += put_varint(req + len, (uint64_t)e->log_stream);
    grpc_slice rs = grpc_slice_from_copied_buffer((const char *)req, len);
    grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&rs, 1);
    grpc_slice_unref(rs);
    grpc_call *call =
        grpc_channel_create_call(e->ch, NULL, GRPC_PROPAGATE_DEFAULTS, e->cq,
                                 grpc_slice_from_static_string("/varlog.snpb.LogIO/Subscribe"),
                                 NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    grpc_metadata_array initial, trailing;
    grpc_metadata_array_init(&initial);
    grpc_metadata_array_init(&trailing);
    grpc_status_code code = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[4], st;
    memset(ops, 0, sizeof(ops));
    memset(&st, 0, sizeof(st));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial;
    st.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    st.data.recv_status_on_client.trailing_metadata = &trailing;
    st.data.recv_status_on_client.status = &code;
    st.data.recv_status_on_client.status_details = &details;
    int64_t bytes = -1;
    unsigned done = 0;
    bool ok = false, started = call && floor_batch(call, ops, 4, T_START) &&
                               floor_batch(call, &st, 1, T_STATUS);
    if (!started) {
        bfail(b, "grpc_call_start_batch", VARLOG_ERR_INTERNAL, "Subscribe");
        goto out;
    }
    bytes = 0;
    for (uint64_t want = begin; want < end; want++) {
        grpc_byte_buffer *bb = NULL;
        grpc_op rop;
        memset(&rop, 0, sizeof(rop));
        rop.op = GRPC_OP_RECV_MESSAGE;
        rop.data.recv_message.recv_message = &bb;
        if (!floor_batch(call, &rop, 1, T_RECV) || !floor_wait(e, T_RECV, &done, &ok) || !bb) {
            char t[96];
            snprintf(t, sizeof(t), "no message for GLSN %llu", (unsigned long long)want);
            bfail(b, "GrpcFloor", VARLOG_ERR_RPC_UNAVAILABLE, t);
            bytes = -1;
            goto out;
        }
        uint64_t g = floor_glsn(bb);
        bytes += (int64_t)grpc_byte_buffer_length(bb);
        grpc_byte_buffer_destroy(bb);
        if (g != want) {
            char t[96];
            snprintf(t, sizeof(t), "wanted GLSN %llu, got %llu", (unsigned long long)want,
                     (unsigned long long)g);
            bfail(b, "GrpcFloor", VARLOG_ERR_INTERNAL, t);
            bytes = -1;
            goto out;
        }
    }
    if (!floor_wait(e, T_STATUS, &done, &ok) || code != GRPC_STATUS_OK) {
        bfail(b, "GrpcFloor: the stream's status", VARLOG_ERR_RPC_UNKNOWN, "not OK");
        bytes = -1;
    }
out:
    if (call) {
        grpc_call_cancel(call, NULL);
        /* Drain what is still in flight before the call and its arrays go. */
        if (started) {
            if (!(done & (1u << T_START)))
                floor_wait(e, T_START, &done, &ok);
            if (bytes < 0 && !(done & (1u << T_STATUS)))
                floor_wait(e, T_STATUS, &done, &ok);
        }
        grpc_call_unref(call);
    }
    grpc_byte_buffer_destroy(send);
    grpc_metadata_array_destroy(&initial);
    grpc_metadata_array_destroy(&trailing);
    grpc_slice_unref(details);
    return bytes;
}

static void sub_round(bench_b_t *b)
{
    env_t *e = b->ctx;
    b_stop_timer(b);
    if (fill(b, e, (uint64_t)b->n) != 0)
        return;
    if (e->c->form == F_GRPC_FLOOR && e->client)
        env_client_close(e);
    b_start_timer(b);
    int64_t srv0 = e->child > 0 ? child_server_cpu_us(e->child) : -1;
    int64_t cpu0 = rusage_us();
    b_reset_timer(b);
    uint64_t all0 = alloc_count_all_allocs();

    varlog_subscription_t *sub = NULL;
    int64_t bytes = e->c->form == F_GRPC_FLOOR          ? read_floor(b, e)
                    : e->c->form == F_SUBSCRIBE_HANDLER ? read_handler(b, e, &sub)
                                                        : read_iter(b, e, &sub);
    varlog_subscription_stats_t st;
    memset(&st, 0, sizeof(st));
    if (sub)
        varlog_subscription_stats(sub, &st);
    varlog_subscription_close(&sub);

    uint64_t all1 = alloc_count_all_allocs();
    b_stop_timer(b);
    int64_t cpu1 = rusage_us();
    int64_t srv1 = e->child > 0 ? child_server_cpu_us(e->child) : -1;
    if (bytes < 0)
        return;

    double secs = (double)b_elapsed_ns(b) / 1e9, n = (double)b->n;
    b_set_bytes(b, ENTRY_SIZE);
    b_report_metric(b, secs > 0 ? n / secs : 0, "entries/s");
    b_report_metric(b, (double)(cpu1 - cpu0) / n, "cpu-us/entry");
    if (srv0 >= 0 && srv1 >= 0)
        b_report_metric(b, (double)(srv1 - srv0) / n, "srv-cpu-us/entry");
    b_report_metric(b, (double)(all1 - all0) / n, "all-allocs/op");
    b_report_metric(b, (double)st.resubscribes, "resubscribes");
    if (cluster_address)
        b_report_metric(b, (double)bytes / n, "B/entry");
}

/* "NAME=VALUE" into the extra client properties. */
static bool add_conf(const char *prog, const char *v)
{
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || n_extra_conf / 2 >= MAX_CONF || strlen(v) >= 256) {
        fprintf(stderr, "%s: -conf %s: NAME=VALUE (at most %d)\n", prog, v, MAX_CONF);
        return false;
    }
    char *buf = extra_conf_buf[n_extra_conf / 2];
    memcpy(buf, v, strlen(v) + 1);
    buf[eq - v] = '\0';
    extra_conf[n_extra_conf++] = buf;
    extra_conf[n_extra_conf++] = buf + (eq - v) + 1;
    extra_conf[n_extra_conf] = NULL;
    return true;
}

/* "NAME=INT" into GrpcFloor's channel arguments. */
static bool add_chan_arg(const char *prog, const char *v)
{
    const char *eq = strchr(v, '=');
    char *end;
    if (!eq || eq == v || n_chan_args >= MAX_CONF || strlen(v) >= 128) {
        fprintf(stderr, "%s: -chanarg %s: NAME=INT (at most %d)\n", prog, v, MAX_CONF);
        return false;
    }
    long t = strtol(eq + 1, &end, 10);
    if (end == eq + 1 || *end || t < INT32_MIN || t > INT32_MAX) {
        fprintf(stderr, "%s: -chanarg %s: the value is not an int\n", prog, v);
        return false;
    }
    char *buf = chan_arg_buf[n_chan_args];
    memcpy(buf, v, (size_t)(eq - v));
    buf[eq - v] = '\0';
    chan_args[n_chan_args++] =
        (grpc_arg){.type = GRPC_ARG_INTEGER, .key = buf, .value.integer = (int)t};
    return true;
}

static bool take_own_flags(int *argc, char **argv)
{
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *v = NULL;
        bool ok = true;
        int32_t t = 0;
        if (bench_flag(*argc, argv, &i, "inproc", false, &v)) {
            inproc = true;
            continue;
        }
        if (bench_flag(*argc, argv, &i, "nofill", false, &v)) {
            no_fill = true;
            continue;
        }
        if (bench_flag(*argc, argv, &i, "mr", true, &v)) {
            if ((ok = v && v[0]))
                cluster_address = v;
        } else if (bench_flag(*argc, argv, &i, "server", true, &v)) {
            if ((ok = v && v[0]))
                server_program = v;
        } else if (bench_flag(*argc, argv, &i, "topic", true, &v)) {
            ok = v && bench_parse_int(argv[0], "topic", v, 1, &topic_id);
        } else if (bench_flag(*argc, argv, &i, "logstream", true, &v)) {
            ok = v && bench_parse_int(argv[0], "logstream", v, 0, &mr_log_stream);
        } else if (bench_flag(*argc, argv, &i, "fillbatch", true, &v)) {
            ok = v && bench_parse_int(argv[0], "fillbatch", v, 1, &t);
            fill_batch = t;
        } else if (bench_flag(*argc, argv, &i, "conf", true, &v)) {
            ok = v && add_conf(argv[0], v);
        } else if (bench_flag(*argc, argv, &i, "chanarg", true, &v)) {
            ok = v && add_chan_arg(argv[0], v);
        } else {
            argv[out++] = argv[i];
            continue;
        }
        if (!ok) {
            if (!v)
                fprintf(stderr, "%s: %s needs a value\n", argv[0], argv[i]);
            return false;
        }
    }
    argv[out] = NULL;
    *argc = out;
    return true;
}

/* With -mr, the number of log streams of the topic, for the rows' names. */
static int32_t mr_log_streams(void)
{
    varlog_client_t *client = NULL;
    if (bench_client_open(cluster_address, extra_conf, &client) != 0)
        return -1;
    int32_t ids[MAX_LOG_STREAMS];
    size_t n = 0;
    varlog_err_t rc = varlog_client_log_streams(client, topic_id, ids, MAX_LOG_STREAMS, &n);
    if (rc != VARLOG_OK || n == 0)
        fprintf(stderr, "topic %d: %s\n", topic_id,
                rc != VARLOG_OK ? varlog_last_error() : "it has no log stream");
    varlog_client_destroy(client);
    return rc == VARLOG_OK && n > 0 ? (int32_t)n : -1;
}

int main(int argc, char **argv)
{
    if (!take_own_flags(&argc, argv))
        return 2;
    /* Varied bytes, as records usually are; the same for every record. */
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)(i * 2654435761u >> 24);

    static scase_t cases[8];
    size_t n = 0;
    if (cluster_address) {
        int32_t k = mr_log_streams();
        if (k < 0)
            return 1;
        cases[n++] = (scase_t){.form = F_SUBSCRIBE_TO_ITER, .log_streams = 1};
        cases[n++] = (scase_t){.form = F_SUBSCRIBE_ITER, .log_streams = k};
        cases[n++] = (scase_t){.form = F_SUBSCRIBE_HANDLER, .log_streams = k};
        fprintf(stderr, "bench_subscribe: cluster at %s, topic %d (%d log streams)\n",
                cluster_address, topic_id, k);
    } else {
        cases[n++] = (scase_t){.form = F_SUBSCRIBE_TO_ITER, .log_streams = 1};
        cases[n++] = (scase_t){.form = F_SUBSCRIBE_ITER, .log_streams = 1};
        cases[n++] = (scase_t){.form = F_SUBSCRIBE_ITER, .log_streams = 2};
        cases[n++] = (scase_t){.form = F_SUBSCRIBE_ITER, .log_streams = 4};
        cases[n++] = (scase_t){.form = F_SUBSCRIBE_HANDLER, .log_streams = 2};
        cases[n++] = (scase_t){.form = F_GRPC_FLOOR, .log_streams = 1};
    }
    static bench_t benches[8];
    for (size_t i = 0; i < n; i++) {
        scase_t *c = &cases[i];
        static const char *const forms[] = {"SubscribeTo/iter", "Subscribe/iter",
                                            "Subscribe/handler", "GrpcFloor"};
        snprintf(c->name, sizeof(c->name), "%s/ls=%d/size=%d", forms[c->form], c->log_streams,
                 ENTRY_SIZE);
        benches[i] = (bench_t){.name = c->name,
                               .fn = sub_round,
                               .arg = c,
                               .setup = env_setup,
                               .teardown = env_teardown};
    }
    static const bench_opts_t o = {.benchtime_ns = 1000000000LL,
                                   .warmup_ns = 100000000LL,
                                   .pkg = "libvarlog/bench",
                                   .precise_allocs = true};
    return bench_main(argc, argv, &o, benches, n);
}
