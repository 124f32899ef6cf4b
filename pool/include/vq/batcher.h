#ifndef VQ_BATCHER_H
#define VQ_BATCHER_H

/* Lookup batcher (outpost's batched retry lookups, write-up C). Callers submit keys, each
 * with an optional lower bound (a time, an LSN); pending keys are flushed together when
 * they reach `size` or when `wait_ns` has passed since the first of them. One batch lookup
 * call serves a flush and each caller gets its own result. A flush whose bounds span more
 * than `max_span` is split; a group of one, and a key without a bound, use the single-key
 * lookup. A failed batch call fails every member; each caller then retries on its own (for
 * example through its task's retry policy).
 *
 * No thread of its own: the caller that fills a batch, or the first to see its wait
 * expire, runs the lookup on its own thread while the other members wait. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vq/err.h"

#define VQ_BATCH_MAX 100u

typedef struct vq_batch_item {
    const void *key; /* caller's, passed through untouched */
    int64_t bound;   /* meaningful when has_bound */
    bool has_bound;
    void *result; /* caller's output buffer, filled by the lookup functions */
    int status;   /* this key's outcome; batch lookups set it per key */
    /* private to the batcher */
    bool done_;
    uint64_t gen_;
} vq_batch_item_t;

/* Single-key lookup: fill item->result, return the key's status (0 = found). */
typedef int (*vq_lookup_one_fn)(void *ctx, vq_batch_item_t *item);
/* Batch lookup over n >= 2 items sorted by bound: set each items[i]->status (it starts as
 * VQ_ERR_NOT_FOUND) and fill results, and return 0; any other return fails every member
 * with that code. */
typedef int (*vq_lookup_batch_fn)(void *ctx, vq_batch_item_t *const *items, size_t n);

typedef struct vq_batcher_opts {
    size_t size;      /* flush at this many keys; 0 = batching off; capped at VQ_BATCH_MAX */
    int64_t wait_ns;  /* flush this long after the first pending key (default 50 ms) */
    int64_t max_span; /* split when bounds differ by more (default 15 min in ns) */
    vq_lookup_one_fn lookup_one;     /* required */
    vq_lookup_batch_fn lookup_batch; /* required when size > 1 */
    void *ctx;                       /* passed to both; borrowed */
} vq_batcher_opts_t;

void vq_batcher_opts_init(vq_batcher_opts_t *o);

typedef struct vq_batcher vq_batcher_t;

/* Creates a batcher; *out is owned by the caller. Errors: VQ_ERR_INVALID (missing lookup
 * function, negative wait or span), VQ_ERR_NOMEM. */
vq_err_t vq_batcher_create(const vq_batcher_opts_t *o, vq_batcher_t **out);

/* Looks item->key up, blocking until its result is in: at most about wait_ns plus the
 * lookup's own time. item (caller-owned, usually on the stack) must stay valid until the
 * call returns. The lookup functions run on this thread or on another caller's. Returns
 * item->status: the lookup's code for this key, or the failed batch call's code. */
int vq_batcher_lookup(vq_batcher_t *b, vq_batch_item_t *item);

/* Flushes the pending keys now, on the calling thread. Returns VQ_OK. */
vq_err_t vq_batcher_flush(vq_batcher_t *b);

typedef struct vq_batcher_stats {
    uint64_t batch_calls;  /* lookup_batch calls */
    uint64_t single_calls; /* lookup_one calls */
    uint64_t size_flushes; /* flushes because a batch filled */
    uint64_t wait_flushes; /* flushes because the wait passed, or explicit flushes */
    uint64_t failed_batches;
} vq_batcher_stats_t;
void vq_batcher_stats(vq_batcher_t *b, vq_batcher_stats_t *out);

/* Frees b. Errors: VQ_ERR_BUSY if a lookup is still in progress (nothing freed). */
vq_err_t vq_batcher_destroy(vq_batcher_t *b);

#endif
