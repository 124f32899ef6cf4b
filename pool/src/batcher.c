/* Lookup batcher. Callers park on one condition variable; the caller that fills a batch,
 * or the first to see its wait expire, takes the pending keys and runs the lookups on its
 * own thread, so the batcher needs no thread of its own. */
#include "vq/batcher.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define DEFAULT_WAIT_NS 50000000LL
#define DEFAULT_SPAN_NS (15LL * 60 * 1000000000LL)

struct vq_batcher {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    vq_batcher_opts_t o;
    uint64_t gen;     /* bumped when the pending batch is taken */
    int64_t first_at; /* when the first pending key arrived */
    size_t npending;
    unsigned inflight;
    vq_batcher_stats_t stats;
    vq_batch_item_t *pending[VQ_BATCH_MAX];
};

void vq_batcher_opts_init(vq_batcher_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->wait_ns = DEFAULT_WAIT_NS;
    o->max_span = DEFAULT_SPAN_NS;
}

vq_err_t vq_batcher_create(const vq_batcher_opts_t *o, vq_batcher_t **out)
{
    if (!o || !out || !o->lookup_one || o->wait_ns < 0 || o->max_span < 0 ||
        (o->size > 1 && !o->lookup_batch))
        return VQ_ERR_INVALID;
    vq_batcher_t *b = calloc(1, sizeof(*b));
    if (!b)
        return VQ_ERR_NOMEM;
    b->o = *o;
    if (b->o.size > VQ_BATCH_MAX)
        b->o.size = VQ_BATCH_MAX;
    pthread_mutex_init(&b->mu, NULL);
    vq_cond_init_(&b->cv);
    *out = b;
    return VQ_OK;
}

static void sort_by_bound(vq_batch_item_t **v, size_t n)
{
    for (size_t i = 1; i < n; i++) { /* n <= 100: insertion sort, stable, no allocation */
        vq_batch_item_t *x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1]->bound > x->bound; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

static void lookup_group(vq_batcher_t *b, vq_batch_item_t **g, size_t n, vq_batcher_stats_t *st)
{
    if (n == 1) {
        st->single_calls++;
        g[0]->status = b->o.lookup_one(b->o.ctx, g[0]);
        return;
    }
    for (size_t i = 0; i < n; i++)
        g[i]->status = VQ_ERR_NOT_FOUND;
    st->batch_calls++;
    int rc = b->o.lookup_batch(b->o.ctx, g, n);
    if (rc != VQ_OK) {
        st->failed_batches++;
        for (size_t i = 0; i < n; i++)
            g[i]->status = rc;
    }
}

/* Takes the pending batch (lock held on entry and exit) and serves it without the lock. */
static void flush_locked(vq_batcher_t *b, bool by_size)
{
    vq_batch_item_t *v[VQ_BATCH_MAX];
    size_t n = b->npending;
    if (!n)
        return;
    memcpy(v, b->pending, n * sizeof(v[0]));
    b->npending = 0;
    b->gen++;
    pthread_mutex_unlock(&b->mu);

    vq_batcher_stats_t st = {0};
    sort_by_bound(v, n);
    /* A group ends where a bound lies more than max_span past the group's oldest, so one
     * old key does not widen the range scanned for the others. */
    size_t start = 0;
    for (size_t i = 1; i <= n; i++) {
        if (i == n || (uint64_t)v[i]->bound - (uint64_t)v[start]->bound > (uint64_t)b->o.max_span) {
            lookup_group(b, v + start, i - start, &st);
            start = i;
        }
    }

    pthread_mutex_lock(&b->mu);
    for (size_t i = 0; i < n; i++)
        v[i]->done_ = true;
    b->stats.batch_calls += st.batch_calls;
    b->stats.single_calls += st.single_calls;
    b->stats.failed_batches += st.failed_batches;
    if (by_size)
        b->stats.size_flushes++;
    else
        b->stats.wait_flushes++;
    pthread_cond_broadcast(&b->cv);
}

int vq_batcher_lookup(vq_batcher_t *b, vq_batch_item_t *it)
{
    it->done_ = false;
    if (b->o.size == 0 || !it->has_bound) {
        /* Batching off, or an old-style key without a bound: the single path. */
        pthread_mutex_lock(&b->mu);
        b->stats.single_calls++;
        pthread_mutex_unlock(&b->mu);
        it->status = b->o.lookup_one(b->o.ctx, it);
        return it->status;
    }
    pthread_mutex_lock(&b->mu);
    b->inflight++;
    if (b->npending == 0)
        b->first_at = vq_now_ns();
    it->gen_ = b->gen;
    b->pending[b->npending++] = it;
    if (b->npending >= b->o.size)
        flush_locked(b, true);
    while (!it->done_) {
        if (it->gen_ == b->gen) { /* still pending: this caller may be the one to flush */
            int64_t due = b->first_at + b->o.wait_ns;
            if (vq_now_ns() >= due) {
                flush_locked(b, false);
                continue;
            }
            struct timespec ts = vq_ts_(due);
            pthread_cond_timedwait(&b->cv, &b->mu, &ts);
        } else {
            pthread_cond_wait(&b->cv, &b->mu);
        }
    }
    b->inflight--;
    pthread_mutex_unlock(&b->mu);
    return it->status;
}

vq_err_t vq_batcher_flush(vq_batcher_t *b)
{
    pthread_mutex_lock(&b->mu);
    flush_locked(b, false);
    pthread_mutex_unlock(&b->mu);
    return VQ_OK;
}

void vq_batcher_stats(vq_batcher_t *b, vq_batcher_stats_t *out)
{
    pthread_mutex_lock(&b->mu);
    *out = b->stats;
    pthread_mutex_unlock(&b->mu);
}

vq_err_t vq_batcher_destroy(vq_batcher_t *b)
{
    if (!b)
        return VQ_OK;
    pthread_mutex_lock(&b->mu);
    unsigned busy = b->inflight;
    pthread_mutex_unlock(&b->mu);
    if (busy)
        return VQ_ERR_BUSY;
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
    return VQ_OK;
}
