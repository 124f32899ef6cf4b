#ifndef VARLOG_TRANSMIT_QUEUE_H
#define VARLOG_TRANSMIT_QUEUE_H

/* The subscribe path's transmit queue: a binary min-heap of (GLSN, payload) items in storage
 * allocated once, so that a subscription orders entries without allocating per entry.
 *
 * Varlog's Go client pushes every buffered entry into one container/heap (reference 6.3);
 * a subscription here instead merges its k log streams, each of which delivers entries in
 * increasing GLSN, by keeping one item per log stream, its head (payload: the stream's
 * index). The merge then costs one sift per entry:
 *
 *     tq_reset(q);
 *     for each stream s with a head h: tq_push(q, h.glsn, s);
 *     while (tq_peek_min(q, &it) == VARLOG_OK) {
 *         deliver the head of stream it.val;
 *         if (stream it.val has a next entry n) tq_replace_min(q, n.glsn, it.val, NULL);
 *         else tq_pop_min(q, NULL);   (or wait for it: the head must be known before
 *                                      anything above it can be delivered)
 *     }
 *
 * Ties: items of equal GLSN come out in an unspecified order (a binary heap is not stable).
 * Callers needing an order among equal GLSNs (a duplicate from a replaced stream) must not
 * rely on the queue for it.
 *
 * Not thread-safe: one thread at a time per queue (the caller's lock, if any). No call
 * blocks. Only tq_create and tq_reserve allocate; push never grows the storage. */
#include <stddef.h>
#include <stdint.h>

#include "varlog/error.h"

typedef struct tq_item {
    uint64_t glsn;
    uintptr_t val; /* the caller's: a stream index or a pointer */
} tq_item_t;

typedef struct tq tq_t;

/* A queue holding up to capacity items (0 is allowed: every push is refused until
 * tq_reserve). *out is owned by the caller, freed with tq_destroy. INVALID_ARG when out is
 * NULL, NOMEM when the storage cannot be allocated (or its size overflows). */
varlog_err_t tq_create(size_t capacity, tq_t **out);

/* Frees q and its storage; NULL is ignored. */
void tq_destroy(tq_t *q);

/* Grows the storage to hold at least capacity items, keeping the items (one realloc; no-op
 * when it already does). The only way the queue grows: a separate call, so that push never
 * allocates behind the caller's back. NOMEM leaves q unchanged; INVALID_ARG for NULL. */
varlog_err_t tq_reserve(tq_t *q, size_t capacity);

/* Empties q and keeps its storage: a fresh queue without allocating. */
void tq_reset(tq_t *q);

/* Adds an item: O(log n), on average O(1) for random keys. QUEUE_FULL when q holds its
 * capacity already (q unchanged). */
varlog_err_t tq_push(tq_t *q, uint64_t glsn, uintptr_t val);

/* Removes the item of least GLSN and stores it in *out (out may be NULL). END when q is
 * empty. */
varlog_err_t tq_pop_min(tq_t *q, tq_item_t *out);

/* Stores the item of least GLSN in *out without removing it. END when q is empty;
 * INVALID_ARG when out is NULL. */
varlog_err_t tq_peek_min(const tq_t *q, tq_item_t *out);

/* Replaces the item of least GLSN by (glsn, val) in one sift, storing the old one in *out
 * (out may be NULL): a pop followed by a push, at about the cost of the pop alone. END
 * when q is empty (nothing replaced; use tq_push). */
varlog_err_t tq_replace_min(tq_t *q, uint64_t glsn, uintptr_t val, tq_item_t *out);

/* Items held, and items q can hold without tq_reserve. */
size_t tq_size(const tq_t *q);
size_t tq_capacity(const tq_t *q);

#endif
