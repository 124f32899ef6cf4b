/* bench_subscribe: one benchmark's environment (see bench_subscribe.h): the server, the
 * library's client and, outside the clock, the log filled up to what a round reads. */
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
#include "bench_client.h"
#include "bench_subscribe.h"
#include "child_server.h"
#include "harness.h"

static int env_client_open(env_t *e);

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
int fill(bench_b_t *b, env_t *e, uint64_t want)
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
    floor_close(e);
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
void env_client_close(env_t *e)
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

void *env_setup(const void *arg)
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
    int32_t ids[MAX_LOG_STREAMS];
    size_t n = 0;
    varlog_err_t rc = varlog_client_log_streams(e->client, topic_id, ids, MAX_LOG_STREAMS, &n);
    if (rc != VARLOG_OK || n == 0) {
        fprintf(stderr, "topic %d: %s\n", topic_id,
                rc != VARLOG_OK ? varlog_last_error() : "it has no log stream");
        goto fail;
    }
    e->log_stream = cluster_address && mr_log_stream ? mr_log_stream : ids[0];
    if (c->form == F_GRPC_FLOOR) {
        char node[256];
        if (cluster_address &&
            bench_primary_of(e->client, topic_id, e->log_stream, node, sizeof(node)) != 0)
            goto fail;
        floor_open(e, cluster_address ? node : address);
    }
    if (n > MAX_LOG_STREAMS) {
        fprintf(stderr, "topic %d has %zu log streams; bench_subscribe takes at most %d\n",
                topic_id, n, MAX_LOG_STREAMS);
        goto fail;
    }
    if (c->form == F_SUBSCRIBE_TO_EACH || c->form == F_GRPC_FLOOR_EACH) {
        e->n_each = (size_t)each_subs < n ? (size_t)each_subs : n;
        for (size_t i = 0; i < e->n_each; i++) {
            each_sub_t *s = &e->each[i];
            varlog_entry_meta_t first, last;
            s->e = e;
            s->log_stream = ids[i];
            varlog_err_t prc =
                varlog_peek(e->client, topic_id, ids[i], PEEK_TIMEOUT_MS, &first, &last, NULL);
            if (prc != VARLOG_OK) {
                fprintf(stderr, "varlog_peek(topic %d, log stream %d): %s: %s\n", topic_id, ids[i],
                        varlog_err_name(prc), varlog_last_error());
                goto fail;
            }
            s->first = first.llsn ? first.llsn : 1;
            s->have = last.llsn >= s->first ? last.llsn - s->first + 1 : 0;
            char node[256];
            if (c->form == F_GRPC_FLOOR_EACH &&
                (bench_primary_of(e->client, topic_id, ids[i], node, sizeof(node)) != 0 ||
                 floor_each_open(e, i, node) != 0))
                goto fail;
        }
    } else if (cluster_address) {
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

void env_teardown(void *ctx)
{
    env_t *e = ctx;
    env_close(e);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}
