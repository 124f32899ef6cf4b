/* bench_subscribe: one round of b.N entries (see bench_subscribe.h) through the library's
 * iterator or handlers, or GrpcFloor's call, with the round's metrics. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "varlog/subscribe.h"
#include "alloc_count.h"
#include "bench_subscribe.h"
#include "child_server.h"
#include "harness.h"

/* ---- rounds -------------------------------------------------------------------------- */

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

/* ---- SubscribeToEach ------------------------------------------------------------------ */

static void each_on_entry(const varlog_entry_t *entry, void *opaque)
{
    each_sub_t *s = opaque;
    /* Only this subscription's thread writes its counters until its on_end. */
    if (entry->meta.llsn != s->next || entry->meta.log_stream_id != s->log_stream)
        s->bad++;
    s->next = entry->meta.llsn + 1;
    s->count++;
    s->bytes += entry->len;
}

static void each_finish(each_sub_t *s, varlog_err_t err, const char *why)
{
    env_t *e = s->e;
    pthread_mutex_lock(&e->mu);
    s->done = true;
    s->err = err;
    snprintf(s->text, sizeof(s->text), "%s", why ? why : "");
    e->each_done++;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

static void each_on_end(void *opaque)
{
    each_finish(opaque, VARLOG_OK, NULL);
}

static void each_on_error(varlog_err_t err, const char *why, void *opaque)
{
    each_finish(opaque, err, why);
}

int each_shares(bench_b_t *b, env_t *e)
{
    size_t n = e->n_each;
    for (size_t i = 0; i < n; i++) {
        each_sub_t *s = &e->each[i];
        s->want = (uint64_t)b->n / n + (i < (uint64_t)b->n % n ? 1 : 0);
        s->next = s->first;
        s->count = s->bad = s->bytes = 0;
        s->done = false;
        s->err = VARLOG_OK;
        s->text[0] = '\0';
        if (s->want > s->have) {
            char t[192];
            snprintf(t, sizeof(t),
                     "log stream %d holds %llu entries from LLSN %llu, its share is %llu",
                     s->log_stream, (unsigned long long)s->have, (unsigned long long)s->first,
                     (unsigned long long)s->want);
            bfail(b, "SubscribeToEach", VARLOG_ERR_INVALID_ARG, t);
            return -1;
        }
    }
    return 0;
}

/* One round of SubscribeToEach: b->n entries over e->n_each subscriptions opened at once. */
static int64_t read_each(bench_b_t *b, env_t *e, varlog_subscription_stats_t *st)
{
    varlog_subscription_t *subs[MAX_EACH] = {0};
    size_t n = e->n_each, opened = 0;
    int64_t bytes = -1;
    e->each_done = 0;
    if (each_shares(b, e) != 0)
        return -1;
    for (; opened < n; opened++) {
        each_sub_t *s = &e->each[opened];
        if (s->want == 0) { /* b.N below the subscriptions: nothing to read */
            each_finish(s, VARLOG_OK, NULL);
            continue;
        }
        varlog_subscribe_handlers_t h = {.on_entry = each_on_entry,
                                         .on_end = each_on_end,
                                         .on_error = each_on_error,
                                         .opaque = s};
        varlog_err_t rc = varlog_subscribe_to(e->client, topic_id, s->log_stream, s->first,
                                              s->first + s->want, &h, &subs[opened]);
        if (rc != VARLOG_OK) {
            bfail(b, "varlog_subscribe_to", rc, varlog_last_error());
            goto out;
        }
    }
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (NEXT_TIMEOUT_MS + b->n / 10) / 1000;
    pthread_mutex_lock(&e->mu);
    int wrc = 0;
    while (e->each_done < n && wrc != ETIMEDOUT)
        wrc = pthread_cond_timedwait(&e->cv, &e->mu, &dl);
    size_t done = e->each_done;
    pthread_mutex_unlock(&e->mu);
    if (done < n) {
        bfail(b, "varlog_subscribe_to", VARLOG_ERR_TIMED_OUT, "not every subscription ended");
        goto out;
    }
    bytes = 0;
    for (size_t i = 0; i < n; i++) {
        each_sub_t *s = &e->each[i];
        if (s->err != VARLOG_OK) {
            bfail(b, "on_error", s->err, s->text);
            bytes = -1;
            goto out;
        }
        if (s->count != s->want || s->bad != 0) {
            char t[192];
            snprintf(t, sizeof(t),
                     "log stream %d: %llu entries delivered for %llu, %llu out of "
                     "sequence",
                     s->log_stream, (unsigned long long)s->count, (unsigned long long)s->want,
                     (unsigned long long)s->bad);
            bfail(b, "on_entry", VARLOG_ERR_INTERNAL, t);
            bytes = -1;
            goto out;
        }
        bytes += (int64_t)s->bytes;
    }
out:
    for (size_t i = 0; i < n; i++) {
        if (!subs[i])
            continue;
        varlog_subscription_stats_t one;
        if (varlog_subscription_stats(subs[i], &one) == VARLOG_OK)
            st->resubscribes += one.resubscribes;
        varlog_subscription_close(&subs[i]);
    }
    return bytes;
}

void sub_round(bench_b_t *b)
{
    env_t *e = b->ctx;
    b_stop_timer(b);
    bool each = e->c->form == F_SUBSCRIBE_TO_EACH || e->c->form == F_GRPC_FLOOR_EACH;
    if (!each && fill(b, e, (uint64_t)b->n) != 0)
        return;
    if ((e->c->form == F_GRPC_FLOOR || e->c->form == F_GRPC_FLOOR_EACH) && e->client)
        env_client_close(e);
    b_start_timer(b);
    int64_t srv0 = e->child > 0 ? child_server_cpu_us(e->child) : -1;
    int64_t cpu0, csw0, cpu1, csw1;
    bench_rusage(&cpu0, &csw0);
    b_reset_timer(b);
    uint64_t all0 = alloc_count_all_allocs();

    varlog_subscription_t *sub = NULL;
    varlog_subscription_stats_t st;
    memset(&st, 0, sizeof(st));
    int64_t bytes = e->c->form == F_GRPC_FLOOR          ? read_floor(b, e)
                    : e->c->form == F_GRPC_FLOOR_EACH   ? read_floor_each(b, e)
                    : e->c->form == F_SUBSCRIBE_HANDLER ? read_handler(b, e, &sub)
                    : e->c->form == F_SUBSCRIBE_TO_EACH ? read_each(b, e, &st)
                                                        : read_iter(b, e, &sub);
    if (sub)
        varlog_subscription_stats(sub, &st);
    varlog_subscription_close(&sub);

    uint64_t all1 = alloc_count_all_allocs();
    b_stop_timer(b);
    bench_rusage(&cpu1, &csw1);
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
    b_report_metric(b, (double)(csw1 - csw0) * 1000 / n, "ctxsw/1000entries");
}
