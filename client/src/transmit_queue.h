#ifndef VARLOG_TRANSMIT_QUEUE_H
#define VARLOG_TRANSMIT_QUEUE_H

/* The subscribe path's transmit queue: a 4-ary min-heap of (GLSN, payload) items in storage
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
 * Ties: items of equal GLSN come out in an unspecified order (a heap is not stable).
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

/* Visible so that push, peek and size inline into the merge loop; callers use the functions.
 * A 4-ary heap (the children of i are 4i+1 .. 4i+4) in one array of 16-byte items: half the
 * levels of a binary heap, a node's four children in 64 contiguous bytes, and a random key rises
 * past its parent 40 % of the time and past its grandparent 11 % (binary: 61 % and 32 %), so
 * push decides two levels without a branch and only about one push in nine takes the loop.
 * Both sifts move a hole and write the item once at its final place. */
enum { TQ_ARITY = 4 };

typedef struct tq {
    tq_item_t *a;
    size_t n, cap;
} tq_t;

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

/* Removes the item of least GLSN and stores it in *out (out may be NULL). END when q is
 * empty. */
varlog_err_t tq_pop_min(tq_t *q, tq_item_t *out);

/* Replaces the item of least GLSN by (glsn, val) in one sift, storing the old one in *out
 * (out may be NULL): a pop followed by a push, at about the cost of the pop alone. END
 * when q is empty (nothing replaced; use tq_push). */
varlog_err_t tq_replace_min(tq_t *q, uint64_t glsn, uintptr_t val, tq_item_t *out);

/* Not for callers: x < k ? a : b, as a conditional move. Where a branch is mispredicted half the
 * time (a random key against its ancestors) a cmov costs one cycle against about fifteen; gcc
 * turns the plain conditional expressions of tq_sift_up_ into branches, so x86-64 spells the
 * cmov out. */
static inline uint64_t tq_sel_lt_(uint64_t x, uint64_t k, uint64_t a, uint64_t b)
{
#if defined(__GNUC__) && defined(__x86_64__)
    __asm__("cmpq %[k], %[x]\n\tcmovbq %[a], %[b]"
            : [b] "+r"(b)
            : [x] "r"(x), [k] "r"(k), [a] "r"(a)
            : "cc");
    return b;
#else
    return x < k ? a : b;
#endif
}

/* Not for callers: the rise of x from the hole at i past the levels that tq_sift_up_ decides
 * without branches (about one push of a random key in nine). Writes x. */
void tq_sift_up_loop_(tq_item_t *a, size_t i, tq_item_t x);

/* Not for callers (push and the pops in transmit_queue.c): moves x up from the hole at i and
 * writes it at its place. The path to the root is sorted, so whether x rises past its parent
 * (p1) and its grandparent (p2) are two independent comparisons, and the two slots take their
 * new items by conditional moves: slot i gets p1's item if x rises past p1, else x; p1 keeps
 * its own unless x rises past it, and then gets p2's item if x rises past p2 too, else x. Only a
 * rise past p2 branches (to tq_sift_up_loop_). A push of a random key, measured in a loop with
 * its random number: 8.0-8.4 ns with the binary heap's three branch-free levels, 4.7-4.8 ns so
 * (2-core EPYC VM; docs/BENCHMARKS.md). */
static inline void tq_sift_up_(tq_item_t *a, size_t i, tq_item_t x)
{
    if (i >= 1 + TQ_ARITY) {
        size_t p1 = (i - 1) / TQ_ARITY, p2 = (p1 - 1) / TQ_ARITY;
        uint64_t k1 = a[p1].glsn, k2 = a[p2].glsn, xk = x.glsn;
        uintptr_t v1 = a[p1].val, v2 = a[p2].val;
        /* p1's new item if x rises past p1: p2's or x. Selected first, from the keys of x and
         * p2 only, so that p1's key, which the next pushes (p1's other children) load back,
         * is one cmov after its load, not two. */
        uint64_t tk = tq_sel_lt_(xk, k2, k2, xk), tv = tq_sel_lt_(xk, k2, v2, x.val);
        a[i].glsn = tq_sel_lt_(xk, k1, k1, xk);
        a[i].val = (uintptr_t)tq_sel_lt_(xk, k1, v1, x.val);
        a[p1].glsn = tq_sel_lt_(xk, k1, tk, k1);
        a[p1].val = (uintptr_t)tq_sel_lt_(xk, k1, tv, v1);
        if (__builtin_expect(xk < k2, 0))
            tq_sift_up_loop_(a, p2, x);
        return;
    }
    if (i > 0) { /* a child of the root: the same select over one level */
        uint64_t k0 = a[0].glsn, xk = x.glsn;
        uintptr_t v0 = a[0].val;
        a[i].glsn = tq_sel_lt_(xk, k0, k0, xk);
        a[i].val = (uintptr_t)tq_sel_lt_(xk, k0, v0, x.val);
        x.glsn = tq_sel_lt_(xk, k0, xk, k0);
        x.val = (uintptr_t)tq_sel_lt_(xk, k0, x.val, v0);
    }
    a[0] = x;
}

/* Adds an item: O(log n), on average O(1) for random keys. QUEUE_FULL when q holds its
 * capacity already (q unchanged). */
static inline varlog_err_t tq_push(tq_t *q, uint64_t glsn, uintptr_t val)
{
    if (q->n == q->cap)
        return VARLOG_ERR_QUEUE_FULL;
    tq_sift_up_(q->a, q->n++, (tq_item_t){.glsn = glsn, .val = val});
    return VARLOG_OK;
}

/* Stores the item of least GLSN in *out without removing it. END when q is empty;
 * INVALID_ARG when out is NULL. */
static inline varlog_err_t tq_peek_min(const tq_t *q, tq_item_t *out)
{
    if (!out)
        return VARLOG_ERR_INVALID_ARG;
    if (q->n == 0)
        return VARLOG_ERR_END;
    *out = q->a[0];
    return VARLOG_OK;
}

/* Items held, and items q can hold without tq_reserve. */
static inline size_t tq_size(const tq_t *q)
{
    return q->n;
}

size_t tq_capacity(const tq_t *q);

#endif
