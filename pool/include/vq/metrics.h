#ifndef VQ_METRICS_H
#define VQ_METRICS_H

/* Engine counters. Each is a separate atomic, readable from any thread at any time without
 * a lock; a set of reads is not a snapshot (completed = success + failure may straddle an
 * update). Producers and workers write different cache lines. */
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct vq_metrics {
    alignas(64) _Atomic uint64_t submitted; /* accepted by the queue */
    alignas(64) _Atomic uint64_t success;
    _Atomic uint64_t failure; /* error, panic or timeout */
    _Atomic uint64_t retries; /* retry attempts started */
    _Atomic uint64_t late;    /* handlers that returned after their timeout was reported */
    _Atomic int64_t busy;     /* worker slots in use */
} vq_metrics_t;

/* Zeroes every counter. Not thread-safe with concurrent updates. */
void vq_metrics_init(vq_metrics_t *m);

/* Getters: relaxed atomic loads; never block; m must be valid. */
uint64_t vq_metrics_submitted(const vq_metrics_t *m);
uint64_t vq_metrics_success(const vq_metrics_t *m);
uint64_t vq_metrics_failure(const vq_metrics_t *m);
uint64_t vq_metrics_completed(const vq_metrics_t *m);
uint64_t vq_metrics_retries(const vq_metrics_t *m);
uint64_t vq_metrics_late(const vq_metrics_t *m);
int64_t vq_metrics_busy(const vq_metrics_t *m);

#endif
