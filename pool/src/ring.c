#include "vq/ring.h"

#include <stdlib.h>
#include <string.h>

vq_err_t vq_ring_init(vq_ring_t *r, size_t limit, size_t min_capacity)
{
    if (!r)
        return VQ_ERR_INVALID;
    memset(r, 0, sizeof(*r));
    size_t min = min_capacity ? min_capacity : VQ_RING_DEFAULT_MIN;
    if (min < VQ_RING_DEFAULT_MIN)
        min = VQ_RING_DEFAULT_MIN;
    if (limit && min > limit)
        min = limit; /* slots beyond the limit could never be used */
    r->slots = calloc(min, sizeof(void *));
    if (!r->slots)
        return VQ_ERR_NOMEM;
    r->cap = min;
    r->limit = limit;
    r->min_cap = min;
    return VQ_OK;
}

void vq_ring_destroy(vq_ring_t *r)
{
    if (!r)
        return;
    free(r->slots);
    r->slots = NULL;
    r->cap = r->count = r->head = 0;
}

/* Copies the items in FIFO order to the front of a new array, so head restarts at 0. */
static bool ring_resize(vq_ring_t *r, size_t cap)
{
    void **s = calloc(cap, sizeof(void *));
    if (!s)
        return false;
    size_t first = r->cap - r->head;
    if (first > r->count)
        first = r->count;
    memcpy(s, r->slots + r->head, first * sizeof(void *));
    memcpy(s + first, r->slots, (r->count - first) * sizeof(void *));
    free(r->slots);
    r->slots = s;
    r->cap = cap;
    r->head = 0;
    r->resizes++;
    return true;
}

vq_err_t vq_ring_push(vq_ring_t *r, void *item)
{
    if (!item)
        return VQ_ERR_INVALID;
    if (r->closed)
        return VQ_ERR_SHUTDOWN;
    if (r->limit && r->count >= r->limit)
        return VQ_ERR_FULL;
    if (r->count == r->cap) {
        size_t cap = r->cap * 2;
        if (r->limit && cap > r->limit)
            cap = r->limit;
        if (!ring_resize(r, cap))
            return VQ_ERR_NOMEM;
    }
    size_t tail = r->head + r->count;
    if (tail >= r->cap)
        tail -= r->cap;
    r->slots[tail] = item;
    r->count++;
    return VQ_OK;
}

vq_err_t vq_ring_pop(vq_ring_t *r, void **out)
{
    if (r->count == 0)
        return r->closed ? VQ_ERR_CLOSED : VQ_ERR_EMPTY;
    *out = r->slots[r->head];
    r->slots[r->head] = NULL;
    if (++r->head == r->cap)
        r->head = 0;
    r->count--;
    /* Shrink only at a quarter, to half: the result is half full, so the next growth needs
     * the count to double first and a count hovering at a boundary never reallocates. */
    if (r->cap > r->min_cap && r->count <= r->cap / 4) {
        size_t cap = r->cap / 2;
        if (cap < r->min_cap)
            cap = r->min_cap;
        if (cap < r->cap)
            (void)ring_resize(r, cap); /* keeping the larger array is harmless */
    }
    return VQ_OK;
}

void vq_ring_close(vq_ring_t *r)
{
    r->closed = true;
}

void *vq_ring_slot(const vq_ring_t *r, size_t i)
{
    return i < r->cap ? r->slots[i] : NULL;
}
