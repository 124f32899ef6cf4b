#ifndef VQ_RING_H
#define VQ_RING_H

/* A bounded FIFO of opaque pointers backed by a circular array.
 *
 * It grows by doubling when full and shrinks by half only once it is at most a quarter
 * full, so a count oscillating around a power of two never reallocates twice per step.
 * An optional minimum capacity is allocated up front and never released, which makes a
 * steady burst/drain cycle allocation-free.
 *
 * Not thread-safe: the engine serialises every call under its own lock, and one lock
 * per task is cheaper than a ring lock plus an engine lock. Callers sharing a ring between
 * threads must do the same. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vq/err.h"

#define VQ_RING_DEFAULT_MIN 2u

typedef struct vq_ring {
    void **slots;
    size_t cap;   /* length of slots */
    size_t head;  /* index of the oldest item */
    size_t count; /* items stored */
    size_t limit; /* most items accepted; 0 = unbounded */
    size_t min_cap;
    bool closed;
    uint64_t resizes; /* reallocations so far, grow and shrink */
} vq_ring_t;

/* Initialises *r with queue limit `limit` (0 = unbounded) and minimum capacity
 * `min_capacity` (0 = VQ_RING_DEFAULT_MIN). The minimum is kept as given (no rounding to a
 * power of two), raised to 2 when below, and lowered to `limit` when above it; that many
 * slots are allocated now and kept until vq_ring_destroy. Does not block.
 * Errors: VQ_ERR_INVALID (r NULL), VQ_ERR_NOMEM (r left unusable; no destroy needed). */
vq_err_t vq_ring_init(vq_ring_t *r, size_t limit, size_t min_capacity);

/* Frees the slot array. Items still queued are not touched: they belong to the caller. */
void vq_ring_destroy(vq_ring_t *r);

/* Appends item (borrowed: the ring stores the pointer only) at the tail. Does not block.
 * Errors: VQ_ERR_INVALID (item NULL), VQ_ERR_SHUTDOWN (closed), VQ_ERR_FULL (limit
 * reached; nothing dropped), VQ_ERR_NOMEM (growth failed; ring unchanged). */
vq_err_t vq_ring_push(vq_ring_t *r, void *item);

/* Removes the oldest item into *out and clears its slot, so the ring holds no stale
 * reference. May shrink the array (a failed shrink is ignored). Does not block.
 * Errors: VQ_ERR_EMPTY (open and empty), VQ_ERR_CLOSED (closed and drained). */
vq_err_t vq_ring_pop(vq_ring_t *r, void **out);

/* Stops intake; queued items can still be popped. Idempotent. */
void vq_ring_close(vq_ring_t *r);

static inline size_t vq_ring_len(const vq_ring_t *r)
{
    return r->count;
}

static inline size_t vq_ring_capacity(const vq_ring_t *r)
{
    return r->cap;
}

/* Raw slot i (0 <= i < capacity) for tests that check cleared references; NULL otherwise. */
void *vq_ring_slot(const vq_ring_t *r, size_t i);

#endif
