/* The engine's lifecycle and public calls: options, create and start, submit, the worker
 * count, shutdown and release, metrics. The threads that run tasks (workers, dispatcher,
 * timer heap) are in engine_run.c; when to wake, spin and tick is in wake.c. Locking: see
 * struct vq_engine in internal.h. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "vq/engine.h"

#define DEFAULT_TIMEOUT_NS (60LL * 60 * 1000000000LL)

bool vq_engine_stopping_(const vq_engine_t *e)
{
    return atomic_load_explicit(&e->stopping, memory_order_acquire);
}

enum vq_wait_result vq_engine_sleep_(vq_engine_t *e, int64_t until, int64_t deadline)
{
    int64_t end = until < deadline ? until : deadline;
    int64_t now = vq_now_ns();
    if (now < end && !vq_engine_stopping_(e)) {
        pthread_mutex_lock(&e->mu);
        while (!vq_engine_stopping_(e) && (now = vq_now_ns()) < end) {
            struct timespec ts = vq_ts_(end);
            pthread_cond_timedwait(&e->stop_cv, &e->mu, &ts);
        }
        pthread_mutex_unlock(&e->mu);
    }
    if (vq_engine_stopping_(e))
        return VQ_WAIT_STOPPED;
    return now >= deadline ? VQ_WAIT_DEADLINE : VQ_WAIT_ELAPSED;
}

/* ---- lifecycle -------------------------------------------------------------------- */

static unsigned online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

void vq_engine_opts_init(vq_engine_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->workers = online_cpus();
}

static void engine_destroy(vq_engine_t *e)
{
    while (e->free_jobs) {
        vq_job_t *j = e->free_jobs;
        e->free_jobs = j->u.next;
        free(j);
    }
    free(e->timers);
    vq_ring_destroy(&e->ring);
    pthread_cond_destroy(&e->work_cv);
    pthread_cond_destroy(&e->space_cv);
    pthread_cond_destroy(&e->stop_cv);
    pthread_cond_destroy(&e->disp_cv);
    pthread_cond_destroy(&e->idle_cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

void vq_engine_unref_(vq_engine_t *e)
{
    if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1)
        engine_destroy(e);
}

vq_err_t vq_engine_create(const vq_engine_opts_t *o, vq_engine_t **out)
{
    if (!o || !out || o->default_timeout_ns < 0)
        return VQ_ERR_INVALID;
    /* The metrics counters sit on their own cache lines (alignas(64)), which calloc's 16-byte
     * alignment would violate. aligned_alloc needs a size that is a multiple of the alignment. */
    size_t size = (sizeof(vq_engine_t) + _Alignof(vq_engine_t) - 1) / _Alignof(vq_engine_t) *
                  _Alignof(vq_engine_t);
    vq_engine_t *e = aligned_alloc(_Alignof(vq_engine_t), size);
    if (!e)
        return VQ_ERR_NOMEM;
    memset(e, 0, size);
    /* The limit is the engine's (ring plus timers, checked by submit): tasks coming back from
     * a retry delay were accepted already and must always find room in the ring. */
    size_t min =
        o->queue_limit && o->min_capacity > o->queue_limit ? o->queue_limit : o->min_capacity;
    if (vq_ring_init(&e->ring, 0, min) != VQ_OK) {
        free(e);
        return VQ_ERR_NOMEM;
    }
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    /* Adaptive: the lock is held for a few stores, so a short spin beats sleeping. */
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&e->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    vq_cond_init_(&e->work_cv);
    vq_cond_init_(&e->space_cv);
    vq_cond_init_(&e->stop_cv);
    vq_cond_init_(&e->disp_cv);
    vq_cond_init_(&e->idle_cv);
    vq_metrics_init(&e->metrics);
    e->logger = o->logger ? o->logger : vq_logger_stderr();
    e->default_timeout = o->default_timeout_ns ? o->default_timeout_ns : DEFAULT_TIMEOUT_NS;
    e->free_max = o->task_cache ? o->task_cache : (e->ring.min_cap > 1024 ? e->ring.min_cap : 1024);
    e->workers = o->workers;
    e->limit = o->queue_limit;
    e->rng = (uint64_t)vq_now_ns() ^ (uint64_t)(uintptr_t)e;
    e->ncpu = online_cpus();
    e->disp_wake_at = INT64_MAX;
    atomic_init(&e->stopping, false);
    atomic_init(&e->refs, 1);
    atomic_init(&e->spinning, 0);
    atomic_init(&e->queued, 0);
    *out = e;
    return VQ_OK;
}

vq_err_t vq_engine_start(vq_engine_t *e)
{
    if (!e)
        return VQ_ERR_INVALID;
    vq_err_t rc = VQ_OK;
    pthread_mutex_lock(&e->mu);
    if (vq_engine_stopping_(e))
        rc = VQ_ERR_SHUTDOWN;
    else if (!e->started) {
        if (pthread_create(&e->disp, NULL, vq_dispatcher_main_, e) == 0) {
            /* By its creator, as the workers are (spawn_locked): a thread not yet run would
             * bear the caller's name. */
            pthread_setname_np(e->disp, "vq-dispatcher");
            e->started = true;
        } else {
            rc = VQ_ERR_THREAD;
        }
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

static bool spec_ok(const vq_task_spec_t *s)
{
    return s && s->handler && s->timeout_ns >= 0 && s->retry.delay_ns >= 0;
}

static vq_err_t submit_locked(vq_engine_t *e, const vq_task_spec_t *spec)
{
    if (vq_engine_stopping_(e))
        return VQ_ERR_SHUTDOWN;
    if (e->limit && e->ring.count + e->ntimers >= e->limit)
        return VQ_ERR_FULL;
    vq_job_t *j = e->free_jobs;
    if (j) {
        e->free_jobs = j->u.next;
        e->nfree--;
    } else if (!(j = malloc(sizeof(*j)))) {
        return VQ_ERR_NOMEM;
    }
    j->spec = *spec;
    if (!j->spec.timeout_ns)
        j->spec.timeout_ns = e->default_timeout;
    j->refs = 1;
    j->result = VQ_OK;
    j->u.delay = 0; /* no retry line for attempt 0 */
    j->attempt = 0;
    vq_err_t rc;
    if (spec->retry.delay_first) {
        /* The first delay is part of the task: its deadline starts now. */
        int64_t now = vq_now_ns();
        vq_job_start_deadline_(j, now);
        int64_t d = vq_retry_delay_(&j->spec.retry, 0, &e->rng);
        j->u.delay = d;
        j->result = VQ_ERR_SHUTDOWN; /* the outcome if a shutdown cancels the delay */
        int64_t due = d >= vq_job_deadline_(j) - now ? vq_job_deadline_(j) : now + d;
        rc = vq_timer_push_locked_(e, j, due) ? VQ_OK : VQ_ERR_NOMEM;
    } else {
        rc = vq_ring_push(&e->ring, j);
    }
    if (rc != VQ_OK) {
        vq_job_free_locked_(e, j);
        return rc;
    }
    vq_bump_locked_(&e->metrics.submitted);
    if (spec->retry.delay_first)
        return VQ_OK;
    atomic_store_explicit(&e->queued, e->ring.count, memory_order_relaxed);
    vq_wake_worker_locked_(e);
    if (e->nidle == 0)
        vq_check_shortage_locked_(e);
    return VQ_OK;
}

vq_err_t vq_engine_submit(vq_engine_t *e, const vq_task_spec_t *spec)
{
    if (!e || !spec_ok(spec))
        return VQ_ERR_INVALID;
    pthread_mutex_lock(&e->mu);
    vq_err_t rc = submit_locked(e, spec);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

vq_err_t vq_engine_submit_wait(vq_engine_t *e, const vq_task_spec_t *spec, int64_t timeout_ns)
{
    if (!e || !spec_ok(spec))
        return VQ_ERR_INVALID;
    int64_t now = vq_now_ns();
    int64_t deadline =
        timeout_ns < 0 || timeout_ns > INT64_MAX - now ? INT64_MAX : now + timeout_ns;
    pthread_mutex_lock(&e->mu);
    vq_err_t rc;
    while ((rc = submit_locked(e, spec)) == VQ_ERR_FULL) {
        if (vq_now_ns() >= deadline) {
            rc = VQ_ERR_TIMEOUT;
            break;
        }
        e->producers_waiting++;
        if (deadline == INT64_MAX) {
            pthread_cond_wait(&e->space_cv, &e->mu);
        } else {
            struct timespec ts = vq_ts_(deadline);
            pthread_cond_timedwait(&e->space_cv, &e->mu, &ts);
        }
        e->producers_waiting--;
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

vq_err_t vq_engine_set_workers(vq_engine_t *e, unsigned n)
{
    if (!e)
        return VQ_ERR_INVALID;
    pthread_mutex_lock(&e->mu);
    e->workers = n;
    pthread_cond_broadcast(&e->work_cv);
    pthread_cond_signal(&e->disp_cv);
    if (e->release_waiting)
        pthread_cond_broadcast(&e->idle_cv);
    pthread_mutex_unlock(&e->mu);
    return VQ_OK;
}

unsigned vq_engine_workers(const vq_engine_t *e)
{
    vq_engine_t *m = (vq_engine_t *)e; /* the lock is not part of the logical state */
    pthread_mutex_lock(&m->mu);
    unsigned n = e->workers;
    pthread_mutex_unlock(&m->mu);
    return n;
}

void vq_engine_shutdown(vq_engine_t *e)
{
    if (!e)
        return;
    unsigned busy = 0;
    pthread_mutex_lock(&e->mu);
    if (!vq_engine_stopping_(e)) {
        atomic_store_explicit(&e->stopping, true, memory_order_release);
        vq_ring_close(&e->ring);
        busy = e->busy;
        vq_cancel_timers_locked_(e);
        pthread_cond_broadcast(&e->space_cv);
        pthread_cond_broadcast(&e->stop_cv);
        pthread_cond_broadcast(&e->work_cv);
        pthread_cond_signal(&e->disp_cv);
    }
    pthread_mutex_unlock(&e->mu);
    /* After unlocking: the logger is a user callback, free to call the engine. */
    if (busy)
        vq_log(e->logger, VQ_LOG_INFO, "shutdown: %u busy workers", busy);
}

/* With no slot to run them (or no thread at all: never started), queued jobs and pending
 * completions are completed on the calling thread, so release stays bounded. */
static void fail_queued_locked(vq_engine_t *e)
{
    vq_job_t *head = NULL, *tail = NULL, *j;
    if (!e->started) {
        head = e->after_head;
        tail = e->after_tail;
        e->after_head = e->after_tail = NULL;
        for (j = head; j; j = j->u.next)
            vq_count_locked_(e, j->result);
    }
    while (vq_pop_locked_(e, &j)) {
        j->u.next = NULL;
        j->result = VQ_ERR_SHUTDOWN;
        if (tail)
            tail->u.next = j;
        else
            head = j;
        tail = j;
        vq_count_locked_(e, VQ_ERR_SHUTDOWN);
    }
    e->nafter++;
    pthread_mutex_unlock(&e->mu);
    for (j = head; j; j = j->u.next) {
        vq_complete_(e, j, j->result);
        if (j->spec.release)
            j->spec.release(j->spec.arg);
    }
    pthread_mutex_lock(&e->mu);
    e->nafter--;
    while (head) {
        j = head;
        head = j->u.next;
        vq_job_free_locked_(e, j);
    }
}

vq_err_t vq_engine_release(vq_engine_t *e)
{
    if (!e)
        return VQ_ERR_INVALID;
    if (vq_engine_on_own_thread_(e))
        return VQ_ERR_BUSY;
    vq_engine_shutdown(e);
    pthread_mutex_lock(&e->mu);
    e->release_waiting = true;
    for (;;) {
        if (((!e->started || e->workers == 0) && e->ring.count > 0) ||
            (!e->started && e->after_head)) {
            fail_queued_locked(e);
            continue;
        }
        if (e->ring.count == 0 && e->busy == 0 && e->nafter == 0 && !e->after_head &&
            e->ntimers == 0)
            break;
        pthread_cond_wait(&e->idle_cv, &e->mu);
    }
    e->exiting = true;
    pthread_cond_broadcast(&e->work_cv);
    pthread_cond_signal(&e->disp_cv);
    pthread_mutex_unlock(&e->mu);
    if (e->started)
        pthread_join(e->disp, NULL);

    pthread_mutex_lock(&e->mu);
    vq_worker_t *join = NULL;
    while (e->threads) {
        vq_worker_t *w = e->threads;
        vq_unlink_worker_locked_(e, w);
        if (w->zombie) {
            /* Waiting for a handler that ignores its deadline could take for ever: it
             * exits on its own and the last one out frees the engine. */
            w->orphan = true;
            pthread_detach(w->th);
            atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
        } else {
            w->next = join;
            join = w;
        }
    }
    pthread_mutex_unlock(&e->mu);
    while (join) {
        vq_worker_t *w = join;
        join = w->next;
        pthread_join(w->th, NULL);
        free(w);
    }
    vq_engine_unref_(e);
    return VQ_OK;
}

const vq_metrics_t *vq_engine_metrics(const vq_engine_t *e)
{
    return &e->metrics;
}

void vq_engine_thread_counts(vq_engine_t *e, vq_engine_threads_t *out)
{
    pthread_mutex_lock(&e->mu);
    out->dispatchers = e->started && !e->exiting ? 1u : 0u;
    out->workers = e->nthreads;
    out->abandoned = e->nzombies;
    pthread_mutex_unlock(&e->mu);
}
