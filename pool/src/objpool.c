#include "vq/objpool.h"

#include <pthread.h>
#include <stdlib.h>

struct vq_objpool {
    pthread_mutex_t mu;
    size_t obj_size, capacity, count;
    uint64_t hits, misses, drops;
    void *items[]; /* a stack: the most recently returned object is the warmest */
};

vq_err_t vq_objpool_create(size_t capacity, size_t obj_size, size_t prefill, vq_objpool_t **out)
{
    if (!capacity || !obj_size || !out || capacity > (SIZE_MAX - sizeof(vq_objpool_t)) / 8)
        return VQ_ERR_INVALID;
    vq_objpool_t *p = calloc(1, sizeof(*p) + capacity * sizeof(void *));
    if (!p)
        return VQ_ERR_NOMEM;
    pthread_mutex_init(&p->mu, NULL);
    p->obj_size = obj_size;
    p->capacity = capacity;
    if (prefill > capacity)
        prefill = capacity;
    for (; p->count < prefill; p->count++) {
        if (!(p->items[p->count] = malloc(obj_size))) {
            vq_objpool_destroy(p);
            return VQ_ERR_NOMEM;
        }
    }
    *out = p;
    return VQ_OK;
}

void *vq_objpool_get(vq_objpool_t *p)
{
    pthread_mutex_lock(&p->mu);
    if (p->count) {
        void *o = p->items[--p->count];
        p->items[p->count] = NULL;
        p->hits++;
        pthread_mutex_unlock(&p->mu);
        return o;
    }
    p->misses++;
    pthread_mutex_unlock(&p->mu);
    return malloc(p->obj_size); /* outside the lock: a miss must not stall the hits */
}

void vq_objpool_put(vq_objpool_t *p, void *obj)
{
    if (!obj)
        return;
    pthread_mutex_lock(&p->mu);
    if (p->count < p->capacity) {
        p->items[p->count++] = obj;
        pthread_mutex_unlock(&p->mu);
        return;
    }
    p->drops++;
    pthread_mutex_unlock(&p->mu);
    free(obj);
}

void vq_objpool_stats(vq_objpool_t *p, vq_objpool_stats_t *out)
{
    pthread_mutex_lock(&p->mu);
    out->hits = p->hits;
    out->misses = p->misses;
    out->drops = p->drops;
    out->cached = p->count;
    pthread_mutex_unlock(&p->mu);
}

void vq_objpool_destroy(vq_objpool_t *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->count; i++)
        free(p->items[i]);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
