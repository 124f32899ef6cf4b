#include "soak_readers.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_support.h"

/* Runs on the subscription's thread. */
static void on_entry(const varlog_entry_t *e, void *opaque)
{
    soak_reader_t *r = opaque;
    uint64_t pos = r->ls ? e->meta.llsn : e->meta.glsn;
    pthread_mutex_lock(&r->mu);
    if (pos != r->n + 1)
        soak_note_bad(r->l, "%s: position %" PRIu64 " after %" PRIu64, r->name, pos, r->n);
    if (r->ls && e->meta.log_stream_id != r->ls)
        soak_note_bad(r->l, "%s: an entry of log stream %d", r->name, e->meta.log_stream_id);
    if (r->n == r->cap) {
        uint64_t cap = r->cap ? r->cap * 2 : 65536;
        soak_pos_t *got = realloc(r->got, cap * sizeof(*got));
        if (!got) {
            pthread_mutex_unlock(&r->mu);
            fprintf(stderr, "soak: out of memory for %s\n", r->name);
            abort();
        }
        r->got = got;
        r->cap = cap;
    }
    r->got[r->n++] = (soak_pos_t){e->meta.log_stream_id, e->meta.llsn,
                                  soak_hash(e->meta.log_stream_id, e->data, e->len)};
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void on_end(void *opaque)
{
    soak_reader_t *r = opaque;
    /* A subscription to the end of time has no end: that it ended is the violation. */
    soak_note_bad(r->l, "%s: on_end of an endless range", r->name);
    pthread_mutex_lock(&r->mu);
    r->ended = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void on_error(varlog_err_t err, const char *why, void *opaque)
{
    soak_reader_t *r = opaque;
    soak_note_bad(r->l, "%s: on_error %s: %s", r->name, varlog_err_name(err), why);
    pthread_mutex_lock(&r->mu);
    r->ended = true;
    r->err = err;
    snprintf(r->why, sizeof(r->why), "%s", why);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

void soak_reader_start(soak_reader_t *r, const char *name, soak_ledger_t *l,
                       varlog_client_t *client, int32_t topic, int32_t ls)
{
    memset(r, 0, sizeof(*r));
    r->name = name;
    r->l = l;
    r->ls = ls;
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &a);
    pthread_condattr_destroy(&a);
    varlog_subscribe_handlers_t h = {on_entry, on_end, on_error, r};
    varlog_err_t rc = ls ? varlog_subscribe_to(client, topic, ls, 1, VARLOG_LLSN_MAX, &h, &r->sub)
                         : varlog_subscribe(client, topic, 1, VARLOG_GLSN_MAX, &h, &r->sub);
    if (rc != VARLOG_OK)
        fail_msg("%s: subscribe: %s: %s", name, varlog_err_name(rc), varlog_last_error());
}

bool soak_reader_wait(soak_reader_t *r, uint64_t n, int64_t timeout_ms)
{
    struct timespec dl = test_deadline_ms(timeout_ms);
    pthread_mutex_lock(&r->mu);
    while (r->n < n && !r->ended)
        if (pthread_cond_timedwait(&r->cv, &r->mu, &dl) != 0)
            break;
    bool got = r->n >= n;
    pthread_mutex_unlock(&r->mu);
    return got;
}

uint64_t soak_reader_n(soak_reader_t *r)
{
    pthread_mutex_lock(&r->mu);
    uint64_t n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

varlog_subscription_stats_t soak_reader_stats(soak_reader_t *r)
{
    varlog_subscription_stats_t s;
    memset(&s, 0, sizeof(s));
    if (r->sub)
        varlog_subscription_stats(r->sub, &s);
    return s;
}

void soak_reader_compare(soak_reader_t *r, const soak_pos_t *want, uint64_t n)
{
    pthread_mutex_lock(&r->mu);
    if (r->n != n)
        soak_note_bad(r->l, "%s: %" PRIu64 " entries where the store holds %" PRIu64, r->name, r->n,
                      n);
    uint64_t upto = r->n < n ? r->n : n;
    for (uint64_t i = 0; i < upto; i++) {
        const soak_pos_t *g = &r->got[i], *w = &want[i];
        if (g->ls != w->ls || g->llsn != w->llsn || g->hash != w->hash) {
            soak_note_bad(r->l,
                          "%s: position %" PRIu64 " gave (log stream %d, LLSN %" PRIu64
                          ") where the store holds (%d, %" PRIu64 ")%s",
                          r->name, i + 1, g->ls, g->llsn, w->ls, w->llsn,
                          g->hash != w->hash ? ", other bytes" : "");
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
}

void soak_reader_close(soak_reader_t *r)
{
    varlog_subscription_close(&r->sub);
    free(r->got);
    r->got = NULL;
    r->n = r->cap = 0;
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
}

uint64_t soak_read_back(soak_ledger_t *l, varlog_client_t *client, int32_t topic,
                        int64_t timeout_ms)
{
    varlog_subscription_t *sub = NULL;
    varlog_err_t rc = varlog_subscribe_iter(client, topic, 1, l->tail + 1, &sub);
    if (rc != VARLOG_OK) {
        soak_note_bad(l, "read-back: subscribe: %s: %s", varlog_err_name(rc), varlog_last_error());
        return 0;
    }
    int64_t deadline = test_now_ms() + timeout_ms;
    uint64_t n = 0;
    varlog_entry_t e;
    while ((rc = varlog_subscription_next(sub, 1000, &e)) == VARLOG_OK ||
           rc == VARLOG_ERR_TIMED_OUT) {
        if (test_now_ms() > deadline)
            break;
        if (rc != VARLOG_OK)
            continue;
        n++;
        const soak_pos_t *w =
            e.meta.glsn >= 1 && e.meta.glsn <= l->tail ? &l->by_glsn[e.meta.glsn - 1] : NULL;
        if (e.meta.glsn != n || !w || w->ls != e.meta.log_stream_id || w->llsn != e.meta.llsn ||
            w->hash != soak_hash(e.meta.log_stream_id, e.data, e.len)) {
            soak_note_bad(l,
                          "read-back: entry %" PRIu64 " is GLSN %" PRIu64
                          " (log stream %d, LLSN %" PRIu64 "), not what the store holds there",
                          n, e.meta.glsn, e.meta.log_stream_id, e.meta.llsn);
            break;
        }
    }
    if (rc != VARLOG_ERR_END)
        soak_note_bad(l, "read-back: ended with %s after %" PRIu64 " of %" PRIu64 " entries: %s",
                      varlog_err_name(rc), n, l->tail, varlog_last_error());
    else if (n != l->tail)
        soak_note_bad(l, "read-back: END after %" PRIu64 " of %" PRIu64 " entries", n, l->tail);
    varlog_subscription_close(&sub);
    return n;
}
