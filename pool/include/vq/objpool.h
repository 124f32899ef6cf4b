#ifndef VQ_OBJPOOL_H
#define VQ_OBJPOOL_H

/* A fixed-capacity free list of equally sized objects for hot paths (pooled append
 * results). Get takes a cached object when there is one (a hit) and allocates otherwise (a
 * miss); put caches the object when there is room and frees it otherwise (a drop).
 * Thread-safe: one short mutex section per call. Objects are not cleared between uses. */
#include <stddef.h>
#include <stdint.h>

#include "vq/err.h"

typedef struct vq_objpool vq_objpool_t;

/* Creates a pool caching up to capacity objects of obj_size bytes, with prefill of them
 * allocated now (clamped to capacity). *out is owned by the caller.
 * Errors: VQ_ERR_INVALID (capacity or obj_size 0, out NULL), VQ_ERR_NOMEM. */
vq_err_t vq_objpool_create(size_t capacity, size_t obj_size, size_t prefill, vq_objpool_t **out);

/* An object of obj_size bytes owned by the caller until put back; NULL only when a miss
 * cannot allocate. Does not block beyond the mutex. */
void *vq_objpool_get(vq_objpool_t *p);

/* Returns obj (from vq_objpool_get of this pool; NULL is ignored) to the pool. */
void vq_objpool_put(vq_objpool_t *p, void *obj);

typedef struct vq_objpool_stats {
    uint64_t hits, misses, drops;
    size_t cached;
} vq_objpool_stats_t;
void vq_objpool_stats(vq_objpool_t *p, vq_objpool_stats_t *out);

/* Frees the cached objects and the pool. Objects still held by callers are theirs to
 * free(). Not thread-safe with other calls on p. */
void vq_objpool_destroy(vq_objpool_t *p);

#endif
