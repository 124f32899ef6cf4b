#include "transmit_queue.h"

#include <stdlib.h>

varlog_err_t tq_create(size_t capacity, tq_t **out)
{
    if (!out)
        return VARLOG_ERR_INVALID_ARG;
    *out = NULL;
    tq_t *q = calloc(1, sizeof(*q));
    if (!q)
        return VARLOG_ERR_NOMEM;
    varlog_err_t rc = tq_reserve(q, capacity);
    if (rc != VARLOG_OK) {
        free(q);
        return rc;
    }
    *out = q;
    return VARLOG_OK;
}

void tq_destroy(tq_t *q)
{
    if (!q)
        return;
    free(q->a);
    free(q);
}

varlog_err_t tq_reserve(tq_t *q, size_t capacity)
{
    if (!q)
        return VARLOG_ERR_INVALID_ARG;
    if (capacity <= q->cap)
        return VARLOG_OK;
    if (capacity > SIZE_MAX / sizeof(tq_item_t))
        return VARLOG_ERR_NOMEM;
    tq_item_t *a = realloc(q->a, capacity * sizeof(tq_item_t));
    if (!a)
        return VARLOG_ERR_NOMEM;
    q->a = a;
    q->cap = capacity;
    return VARLOG_OK;
}

void tq_reset(tq_t *q)
{
    q->n = 0;
}

size_t tq_capacity(const tq_t *q)
{
    return q->cap;
}

void tq_sift_up_loop_(tq_item_t *a, size_t i, tq_item_t x)
{
    while (i > 0) {
        size_t p = (i - 1) / TQ_ARITY;
        if (a[p].glsn <= x.glsn)
            break;
        a[i] = a[p];
        i = p;
    }
    a[i] = x;
}

/* Places x in the hole at the root of a[0..n): Floyd's bottom-up variant. The hole first
 * descends to a leaf along the least children, then x rises from there. A popped heap's last
 * item, and a merged stream's next head, usually belong near the bottom, so this saves the
 * comparison of x at every level, and its branch, which would be mispredicted once per call. The
 * least of four children is taken by a tournament of conditional moves: no branch but the loop's,
 * whose count depends on n only. */
static void sift_root(tq_item_t *a, size_t n, tq_item_t x)
{
    size_t i = 0, c;
    while ((c = TQ_ARITY * i + 1) + 3 < n) {
        uint64_t k0 = a[c].glsn, k1 = a[c + 1].glsn, k2 = a[c + 2].glsn, k3 = a[c + 3].glsn;
        uint64_t m01 = tq_sel_lt_(k1, k0, k1, k0), m23 = tq_sel_lt_(k3, k2, k3, k2);
        size_t j01 = c + (k1 < k0), j23 = c + 2 + (k3 < k2);
        size_t j = (size_t)tq_sel_lt_(m23, m01, j23, j01);
        a[i] = a[j];
        i = j;
    }
    if (c < n) { /* one to three children, the last ones */
        size_t j = c;
        for (size_t d = c + 1; d < n; d++)
            j = (size_t)tq_sel_lt_(a[d].glsn, a[j].glsn, d, j);
        a[i] = a[j];
        i = j;
    }
    tq_sift_up_(a, i, x);
}

varlog_err_t tq_pop_min(tq_t *q, tq_item_t *out)
{
    if (q->n == 0)
        return VARLOG_ERR_END;
    if (out)
        *out = q->a[0];
    size_t n = --q->n;
    if (n > 0)
        sift_root(q->a, n, q->a[n]);
    return VARLOG_OK;
}

varlog_err_t tq_replace_min(tq_t *q, uint64_t glsn, uintptr_t val, tq_item_t *out)
{
    if (q->n == 0)
        return VARLOG_ERR_END;
    if (out)
        *out = q->a[0];
    sift_root(q->a, q->n, (tq_item_t){.glsn = glsn, .val = val});
    return VARLOG_OK;
}
