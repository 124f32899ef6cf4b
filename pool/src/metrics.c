#include "vq/metrics.h"

void vq_metrics_init(vq_metrics_t *m)
{
    atomic_init(&m->submitted, 0);
    atomic_init(&m->success, 0);
    atomic_init(&m->failure, 0);
    atomic_init(&m->retries, 0);
    atomic_init(&m->late, 0);
    atomic_init(&m->busy, 0);
}

#define LOAD(field) atomic_load_explicit(&m->field, memory_order_relaxed)

uint64_t vq_metrics_submitted(const vq_metrics_t *m)
{
    return LOAD(submitted);
}

uint64_t vq_metrics_success(const vq_metrics_t *m)
{
    return LOAD(success);
}

uint64_t vq_metrics_failure(const vq_metrics_t *m)
{
    return LOAD(failure);
}

uint64_t vq_metrics_completed(const vq_metrics_t *m)
{
    return LOAD(success) + LOAD(failure);
}

uint64_t vq_metrics_retries(const vq_metrics_t *m)
{
    return LOAD(retries);
}

uint64_t vq_metrics_late(const vq_metrics_t *m)
{
    return LOAD(late);
}

int64_t vq_metrics_busy(const vq_metrics_t *m)
{
    return LOAD(busy);
}
