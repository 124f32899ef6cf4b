/* When the engine wakes idle workers, when one spins, and the dispatcher's wake tick.
 *
 * A submit wakes an idle worker at once only when no worker is active or spinning, and not
 * at all while the queued tasks are covered by spinners and workers already woken. With
 * one active or spinning (it comes back to the queue when done), more are woken by the
 * dispatcher on a tick instead of by every submit, since a futex wake per task costs more
 * than a short task: one more per tick while the active ones fall behind. Falling behind
 * means no completion since the last tick (handlers blocked: queued work must not wait for
 * them), or a growing queue of tasks long enough for another worker to add throughput.
 * Short tasks are bound by the engine lock, not by their handlers; more workers for them
 * only add lock hand-overs between CPUs and runnable threads competing with the producers
 * for the CPUs. */
#include "internal.h"

/* Spinning a few microseconds before sleeping lets a worker catch the next task without a
 * futex round trip (a request/response caller needs a few microseconds to submit again).
 * Bounded by time, not by iterations: a pause instruction lasts from 1 to over 100 cycles. */
#define SPIN_NS 10000LL
#define WAKE_TICK_NS 100000LL
/* Below this average a task is short (see above): a worker runs it in about the time the
 * lock takes to move between CPUs a few times. */
#define SHORT_TASK_NS 1000LL

static bool can_wake_locked(const struct vq_engine *e)
{
    return e->nidle > e->nwake && e->busy + e->nwake < e->workers && e->ring.count > e->nwake;
}

void vq_wake_worker_locked_(struct vq_engine *e)
{
    /* A spinning thread takes one queued task, so it covers one: only the tasks beyond what
     * the spinners and the workers already signalled will take need a wake. Suppressing
     * every wake while a thread spins left the rest of a burst behind the first task, for
     * as long as it ran. */
    unsigned spinning = (unsigned)atomic_load_explicit(&e->spinning, memory_order_relaxed);
    if (!can_wake_locked(e) || e->ring.count <= e->nwake + spinning)
        return;
    if (e->busy + e->nafter + spinning == 0) {
        e->nwake++;
        pthread_cond_signal(&e->work_cv);
    } else if (!e->ticking) {
        /* The spinner is about to be active: like an active worker, it leaves the rest to
         * the tick, which wakes another only while the active ones fall behind. */
        e->ticking = true;
        e->tick_at = 0; /* no rate known yet: the first tick only takes a baseline */
        pthread_cond_signal(&e->disp_cv);
    }
}

/* Only one thread spins, and only while the active engine threads leave a CPU beside its
 * own for whoever feeds the queue: spinning on a busy machine takes the CPU from the
 * producer it waits for. */
bool vq_spin_locked_(struct vq_engine *e)
{
    if (e->busy >= e->workers || e->busy + e->nafter + 1 >= e->ncpu ||
        atomic_load_explicit(&e->spinning, memory_order_relaxed) != 0)
        return false;
    atomic_fetch_add_explicit(&e->spinning, 1, memory_order_relaxed);
    pthread_mutex_unlock(&e->mu);
    int64_t until = vq_now_ns() + SPIN_NS;
    for (unsigned i = 1; atomic_load_explicit(&e->queued, memory_order_relaxed) == 0; i++) {
        vq_cpu_relax_();
        if (i % 16 == 0 && vq_now_ns() >= until)
            break;
    }
    pthread_mutex_lock(&e->mu);
    atomic_fetch_sub_explicit(&e->spinning, 1, memory_order_relaxed);
    return true;
}

/* Whether the active threads took less than SHORT_TASK_NS per task on average since the
 * last tick. */
static bool tasks_short_locked(const struct vq_engine *e, int64_t now)
{
    uint64_t done = e->progress - e->tick_progress;
    uint64_t busy_ns = (uint64_t)(now - e->tick_at) * (e->busy + e->nafter);
    return busy_ns > 0 && busy_ns < done * (uint64_t)SHORT_TASK_NS;
}

int64_t vq_wake_tick_locked_(struct vq_engine *e, int64_t now)
{
    if (!e->ticking)
        return INT64_MAX;
    if (!can_wake_locked(e)) {
        e->ticking = false;
        return INT64_MAX;
    }
    bool stuck = e->progress == e->tick_progress;
    bool growing = e->tick_at != 0 && e->ring.count > e->tick_queued && !tasks_short_locked(e, now);
    if (stuck || growing) {
        e->nwake++;
        pthread_cond_signal(&e->work_cv);
    }
    e->tick_progress = e->progress;
    e->tick_queued = e->ring.count;
    e->tick_at = now;
    return now + WAKE_TICK_NS;
}
