/* The running engine: the threads that run tasks and what they do with e->mu held. Workers
 * run attempts on slots, park retries on the timer heap and run completions; the
 * dispatcher supervises the threads, runs the timer heap and is the deadline watchdog.
 * Apart from engine.c (lifecycle and the public calls) because this is the hot, lock-heavy
 * part, read and changed on its own; when to wake, spin and tick is in wake.c. Locking: see
 * struct vq_engine in internal.h. */
#include <stdlib.h>

#include "internal.h"
#include "vq/engine.h"

/* How long a blocked after-callback may hold up queued work before the dispatcher adds a
 * thread: long enough that ordinary short callbacks never cause one. */
#define SPAWN_GRACE_NS 2000000LL
/* How long, after shutdown, every slot may be held with tasks queued and none completing
 * before those tasks are completed unrun: the handlers may be waiting for them. Far above
 * any scheduling stall of a loaded machine, so a slow but progressing drain still runs
 * everything. */
#define STALL_GRACE_NS 100000000LL
/* Pause between attempts to create a thread after one failed. */
#define SPAWN_RETRY_NS 10000000LL

static _Thread_local vq_engine_t *tls_engine;

/* For release, which must not wait for the thread it runs on. */
bool vq_engine_on_own_thread_(const vq_engine_t *e)
{
    return tls_engine == e;
}

/* ---- helpers, all with e->mu held -------------------------------------------------- */

void vq_job_free_locked_(vq_engine_t *e, vq_job_t *j)
{
    if (e->nfree < e->free_max) {
        j->u.next = e->free_jobs;
        e->free_jobs = j;
        e->nfree++;
    } else {
        free(j);
    }
}

/* A job's arg and release callback, taken before its record is recycled: release runs
 * after the lock is dropped. */
typedef struct release_call {
    vq_release_fn fn;
    void *arg;
} release_call_t;

static release_call_t job_unref_locked(vq_engine_t *e, vq_job_t *j)
{
    release_call_t rc = {NULL, NULL};
    if (--j->refs == 0) {
        rc.fn = j->spec.release;
        rc.arg = j->spec.arg;
        vq_job_free_locked_(e, j);
    }
    return rc;
}

/* Runs a release callback with the lock dropped (user code never runs under it). */
static void release_unlocked(vq_engine_t *e, release_call_t rc)
{
    if (rc.fn) {
        pthread_mutex_unlock(&e->mu);
        rc.fn(rc.arg);
        pthread_mutex_lock(&e->mu);
    }
}

static void busy_add_locked(vq_engine_t *e, int d)
{
    e->busy = (unsigned)((int)e->busy + d);
    atomic_store_explicit(&e->metrics.busy, (int64_t)e->busy, memory_order_relaxed);
}

void vq_count_locked_(vq_engine_t *e, int r)
{
    vq_bump_locked_(r == VQ_OK ? &e->metrics.success : &e->metrics.failure);
}

/* Queued work is startable but every thread sits in an after-callback: tell the
 * dispatcher, which adds a thread if no callback completes within the grace period. */
void vq_check_shortage_locked_(vq_engine_t *e)
{
    if (!e->shortage && e->nidle == 0 && e->nafter > 0 && e->ring.count > 0 &&
        e->busy < e->workers) {
        e->shortage = true;
        e->shortage_since = vq_now_ns();
        e->shortage_mark = e->progress;
        pthread_cond_signal(&e->disp_cv);
    }
}

static void note_quiet_locked(vq_engine_t *e)
{
    if (e->release_waiting && e->ring.count == 0 && e->busy == 0 && e->nafter == 0 &&
        !e->after_head && e->ntimers == 0)
        pthread_cond_broadcast(&e->idle_cv);
}

bool vq_pop_locked_(vq_engine_t *e, vq_job_t **out)
{
    void *p;
    if (vq_ring_pop(&e->ring, &p) != VQ_OK)
        return false;
    *out = p;
    atomic_store_explicit(&e->queued, e->ring.count, memory_order_relaxed);
    if (e->producers_waiting)
        pthread_cond_signal(&e->space_cv);
    return true;
}

/* Queues j's completion (result already in j->result) for a thread outside the slots. */
static void push_after_locked(vq_engine_t *e, vq_job_t *j)
{
    j->u.next = NULL;
    if (e->after_tail)
        e->after_tail->u.next = j;
    else
        e->after_head = j;
    e->after_tail = j;
    if (e->nidle > e->nwake) {
        e->nwake++;
        pthread_cond_signal(&e->work_cv);
    }
}

/* The timer heap: a binary min-heap of jobs by due time, owned by the dispatcher (workers
 * only add to it). Its array keeps its peak size, so steady retries allocate nothing. */
bool vq_timer_push_locked_(vq_engine_t *e, vq_job_t *j, int64_t due)
{
    if (e->ntimers == e->timers_cap) {
        size_t cap = e->timers_cap ? e->timers_cap * 2 : 16;
        vq_timer_t *t = realloc(e->timers, cap * sizeof(*t));
        if (!t)
            return false;
        e->timers = t;
        e->timers_cap = cap;
    }
    size_t i = e->ntimers++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (e->timers[parent].due <= due)
            break;
        e->timers[i] = e->timers[parent];
        i = parent;
    }
    e->timers[i] = (vq_timer_t){due, j};
    if (due < e->disp_wake_at) {
        e->disp_wake_at = INT64_MIN; /* signalled: it recomputes on waking */
        pthread_cond_signal(&e->disp_cv);
    }
    return true;
}

static vq_job_t *timer_pop_locked(vq_engine_t *e)
{
    vq_job_t *top = e->timers[0].job;
    size_t n = --e->ntimers;
    vq_timer_t last = e->timers[n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && e->timers[c + 1].due < e->timers[c].due)
            c++;
        if (last.due <= e->timers[c].due)
            break;
        e->timers[i] = e->timers[c];
        i = c;
    }
    if (n)
        e->timers[i] = last;
    return top;
}

/* Due delays re-enter the ring; one whose deadline came first ends with VQ_ERR_TIMEOUT.
 * Returns when the next delay is due. */
static int64_t run_timers_locked(vq_engine_t *e, int64_t now)
{
    while (e->ntimers && e->timers[0].due <= now) {
        vq_job_t *j = timer_pop_locked(e);
        if (now >= vq_job_deadline_(j)) {
            j->result = VQ_ERR_TIMEOUT;
            push_after_locked(e, j);
            if (e->producers_waiting)
                pthread_cond_signal(&e->space_cv);
        } else if (vq_ring_push(&e->ring, j) != VQ_OK) {
            push_after_locked(e, j); /* no room to grow: it ends with its last error */
        } else {
            atomic_store_explicit(&e->queued, e->ring.count, memory_order_relaxed);
            vq_wake_worker_locked_(e);
        }
    }
    return e->ntimers ? e->timers[0].due : INT64_MAX;
}

/* Shutdown: pending delays end now, each task with its last attempt's result (the one it
 * would have had without retries), or VQ_ERR_SHUTDOWN if it never ran. */
void vq_cancel_timers_locked_(vq_engine_t *e)
{
    while (e->ntimers)
        push_after_locked(e, timer_pop_locked(e));
}

/* ---- completion, without the lock (counted before, with it) ---------------------- */

static void log_result(vq_engine_t *e, int r)
{
    if (r == VQ_ERR_PANIC)
        vq_log(e->logger, VQ_LOG_FATAL, "panic: task handler reported a fault");
    else if (r != VQ_OK)
        vq_log(e->logger, VQ_LOG_ERROR, "runtime error: %s (%d)", vq_err_str(r), r);
}

void vq_complete_(vq_engine_t *e, vq_job_t *j, int r)
{
    log_result(e, r);
    if (j->spec.after)
        j->spec.after(j->spec.arg, r);
}

/* ---- workers ----------------------------------------------------------------------- */

/* Whether a failed attempt gets another one, and the delay before it (computed without the
 * lock, from the spec and the worker's own generator). */
static bool wants_retry(const vq_retry_t *retry, unsigned attempt, int r, vq_worker_t *w,
                        int64_t *delay)
{
    if (r == VQ_ERR_PANIC || attempt >= retry->count)
        return false;
    *delay = vq_retry_delay_(retry, attempt + 1, &w->rng);
    return true;
}

/* Parks j for its retry delay on the timer heap, or straight back in the ring when the
 * delay is already over. A delay reaching past the deadline is cut to it, where the task
 * ends with VQ_ERR_TIMEOUT without running again. Returns false if there was no memory
 * (j then ends with r). */
static bool park_locked(vq_engine_t *e, vq_job_t *j, int r, int64_t ended, int64_t delay)
{
    j->result = r;
    j->attempt++;
    j->u.delay = delay;
    int64_t deadline = vq_job_deadline_(j);
    int64_t due = delay > INT64_MAX - ended ? INT64_MAX : ended + delay;
    if (due >= deadline)
        return vq_timer_push_locked_(e, j, deadline);
    if (due <= vq_now_ns()) {
        if (vq_ring_push(&e->ring, j) != VQ_OK)
            return false;
        atomic_store_explicit(&e->queued, e->ring.count, memory_order_relaxed);
        return true;
    }
    return vq_timer_push_locked_(e, j, due);
}

/* Runs attempts on w's slot: j's, then the next queued job's while there is one, which saves
 * a lock round trip per task under load. A failed attempt with retries left goes to the
 * timer heap and frees the slot for other work, unless its delay is over already (a few
 * nanoseconds): then the slot runs the next attempt at once, without the lock, as a sleep
 * in the slot would have. Entered and left with e->mu held. Returns false when the thread
 * was orphaned by release and must exit at once. */
static bool run_slot(vq_engine_t *e, vq_worker_t *w, vq_job_t *j)
{
    for (;;) {
        int64_t now = vq_now_ns();
        bool started = vq_job_deadline_started_(j);
        if (!started)
            vq_job_start_deadline_(j, now);
        w->job = j;
        w->running = true;
        w->deadline = vq_job_deadline_(j);
        if (w->deadline < e->disp_wake_at) {
            e->disp_wake_at = INT64_MIN; /* signalled: it recomputes on waking */
            pthread_cond_signal(&e->disp_cv);
        }
        /* Read under the lock: once the handler runs, a watchdog report may reuse j->u. */
        unsigned attempt = j->attempt;
        int64_t delay = j->u.delay;
        pthread_mutex_unlock(&e->mu);

        int r = VQ_ERR_TIMEOUT;
        int64_t ended = now;
        bool retry = false;
        /* A retry that waited in the queue past the deadline does not run again. */
        if (!started || now < w->deadline) {
            for (;;) {
                if (delay)
                    vq_note_retry_(e->logger, &e->metrics, j->spec.retry.count - attempt, delay);
                w->ctx = (vq_ctx_t){.deadline = w->deadline, .attempt = attempt, .engine = e};
                r = j->spec.handler(&w->ctx, j->spec.arg);
                ended = vq_now_ns();
                if (ended >= w->deadline) {
                    /* Whatever it says, an answer after the deadline is late: the task's
                     * result is the timeout, as if the caller had stopped waiting. */
                    atomic_fetch_add_explicit(&e->metrics.late, 1, memory_order_relaxed);
                    r = VQ_ERR_TIMEOUT;
                    break;
                }
                if (r == VQ_OK || !(retry = wants_retry(&j->spec.retry, attempt, r, w, &delay)))
                    break;
                now = vq_now_ns();
                if (delay > now - ended || now >= w->deadline || vq_engine_stopping_(e))
                    break;
                attempt++; /* delay over already: next attempt here, no lock */
                retry = false;
            }
        }

        /* Whoever takes the lock first reports: here, or the watchdog at the deadline. */
        pthread_mutex_lock(&e->mu);
        w->running = false;
        w->job = NULL;
        if (w->zombie) {
            /* The watchdog already reported VQ_ERR_TIMEOUT and freed the slot; the result
             * is discarded (counted late above if it came after the deadline). */
            e->nzombies--;
            w->zombie = false;
            release_unlocked(e, job_unref_locked(e, j));
            if (w->orphan)
                return false;
            e->nthreads++;
            return true;
        }
        e->progress++;
        j->attempt = attempt;
        /* A shutdown cancels the retry, not the outcome already known. */
        if (retry && !vq_engine_stopping_(e) && park_locked(e, j, r, ended, delay)) {
            if (e->busy <= e->workers && !e->after_head && vq_pop_locked_(e, &j))
                continue;
            busy_add_locked(e, -1);
            return true;
        }
        vq_count_locked_(e, r);
        if (j->spec.after) {
            /* The callback runs outside the slot, so it may wait for other tasks. */
            busy_add_locked(e, -1);
            e->nafter++;
            vq_wake_worker_locked_(e);
            vq_check_shortage_locked_(e);
            pthread_mutex_unlock(&e->mu);
            vq_complete_(e, j, r);
            if (j->spec.release)
                j->spec.release(j->spec.arg);
            pthread_mutex_lock(&e->mu);
            e->nafter--;
            e->progress++;
            vq_job_free_locked_(e, j);
            note_quiet_locked(e);
            return true;
        }
        if (r != VQ_OK || j->spec.release) {
            release_call_t rc = {j->spec.release, j->spec.arg};
            vq_job_free_locked_(e, j);
            pthread_mutex_unlock(&e->mu);
            if (r != VQ_OK)
                log_result(e, r);
            if (rc.fn)
                rc.fn(rc.arg);
            pthread_mutex_lock(&e->mu);
        } else {
            vq_job_free_locked_(e, j);
        }
        if (e->busy <= e->workers && !e->after_head && vq_pop_locked_(e, &j))
            continue;
        busy_add_locked(e, -1);
        note_quiet_locked(e);
        return true;
    }
}

void vq_unlink_worker_locked_(vq_engine_t *e, vq_worker_t *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        e->threads = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->next = w->prev = NULL;
}

static void *worker_main(void *arg)
{
    vq_worker_t *w = arg;
    vq_engine_t *e = w->e;
    tls_engine = e;
    w->rng = (uint64_t)vq_now_ns() ^ (uint64_t)(uintptr_t)w;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        if (e->after_head) {
            vq_job_t *j = e->after_head;
            e->after_head = j->u.next;
            if (!e->after_head)
                e->after_tail = NULL;
            e->nafter++;
            vq_count_locked_(e, j->result);
            pthread_mutex_unlock(&e->mu);
            vq_complete_(e, j, j->result);
            pthread_mutex_lock(&e->mu);
            release_unlocked(e, job_unref_locked(e, j)); /* still counted in nafter */
            e->nafter--;
            e->progress++;
            note_quiet_locked(e);
            continue;
        }
        vq_job_t *j;
        if (e->busy < e->workers && vq_pop_locked_(e, &j)) {
            busy_add_locked(e, 1);
            if (!run_slot(e, w, j)) {
                pthread_mutex_unlock(&e->mu);
                free(w);
                vq_engine_unref_(e);
                return NULL;
            }
            continue;
        }
        if (e->exiting)
            break;
        if (e->nthreads > e->workers) {
            /* Retire: nobody joins a thread that leaves while the engine lives. */
            vq_unlink_worker_locked_(e, w);
            e->nthreads--;
            pthread_detach(pthread_self());
            pthread_mutex_unlock(&e->mu);
            free(w);
            return NULL;
        }
        if (vq_spin_locked_(e) &&
            ((e->ring.count > 0 && e->busy < e->workers) || e->after_head || e->exiting))
            continue;
        e->nidle++;
        pthread_cond_wait(&e->work_cv, &e->mu);
        e->nidle--;
        if (e->nwake)
            e->nwake--;
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* ---- dispatcher ------------------------------------------------------------------- */

/* Creates a worker thread with the lock held, so the thread cannot run (or retire) before
 * its handle is stored. Returns NULL or what went wrong, for the caller to log once it has
 * dropped the lock (the logger is a user callback). */
static const char *spawn_locked(vq_engine_t *e)
{
    vq_worker_t *w = calloc(1, sizeof(*w));
    if (!w)
        return "queue: cannot allocate a worker";
    w->e = e;
    if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
        free(w);
        return "queue: cannot create a worker thread";
    }
    /* Named here rather than by the thread: until it first runs, a new thread bears its
     * creator's name, so a worker that a loaded machine had not yet scheduled was listed as a
     * second "vq-dispatcher" by a census of the process's threads (test_resource_bounds). */
    pthread_setname_np(w->th, "vq-worker");
    w->next = e->threads;
    if (w->next)
        w->next->prev = w;
    e->threads = w;
    e->nthreads++;
    return NULL;
}

/* Reports a job still running at its deadline as timed out and frees its slot; the thread
 * stays with the handler until it returns. */
static void abandon_locked(vq_engine_t *e, vq_worker_t *w)
{
    vq_job_t *j = w->job;
    j->result = VQ_ERR_TIMEOUT;
    j->refs = 2;
    push_after_locked(e, j);
    w->running = false;
    w->zombie = true;
    e->nthreads--;
    e->nzombies++;
    busy_add_locked(e, -1);
    vq_wake_worker_locked_(e);
}

/* After shutdown, tasks still queued while every slot is held and nothing completes for
 * STALL_GRACE_NS are completed unrun: the handlers holding the slots may be waiting for
 * them, and nothing else would ever free a slot. Returns when to look again. */
static int64_t check_stall_locked(vq_engine_t *e, int64_t now)
{
    if (!vq_engine_stopping_(e) || e->ring.count == 0 || e->busy < e->workers) {
        e->stalled = false;
        return INT64_MAX;
    }
    if (!e->stalled || e->progress != e->stalled_mark) {
        e->stalled = true;
        e->stalled_since = now;
        e->stalled_mark = e->progress;
    } else if (now - e->stalled_since >= STALL_GRACE_NS) {
        vq_job_t *j;
        while (vq_pop_locked_(e, &j)) {
            j->result = VQ_ERR_SHUTDOWN;
            push_after_locked(e, j);
        }
        e->stalled = false;
        return INT64_MAX;
    }
    return e->stalled_since + STALL_GRACE_NS;
}

void *vq_dispatcher_main_(void *arg)
{
    vq_engine_t *e = arg;
    tls_engine = e;
    pthread_mutex_lock(&e->mu);
    while (!e->exiting) {
        e->disp_wake_at = INT64_MIN; /* awake: workers need not signal new deadlines */
        int64_t now = vq_now_ns();
        int64_t next = run_timers_locked(e, now);
        const char *problem = NULL;
        /* The watchdog first: abandoning a handler takes a thread out of the pool, which
         * the spawn step below replaces at once. */
        for (vq_worker_t *w = e->threads; w; w = w->next) {
            if (!w->running)
                continue;
            if (w->deadline <= now)
                abandon_locked(e, w);
            else if (w->deadline < next)
                next = w->deadline;
        }
        int64_t stall = check_stall_locked(e, now);
        if (stall < next)
            next = stall;
        /* Completions of abandoned jobs need a thread even when paused at 0 workers. */
        bool spawn_ok = now >= e->spawn_retry_at;
        while (spawn_ok && (e->nthreads < e->workers || (e->after_head && e->nthreads == 0))) {
            if ((problem = spawn_locked(e)) != NULL) {
                e->spawn_retry_at = now + SPAWN_RETRY_NS;
                spawn_ok = false;
            }
        }
        int64_t tick = vq_wake_tick_locked_(e, now);
        if (tick < next)
            next = tick;
        /* Completions waiting while every thread is busy (in handlers or callbacks) get a
         * thread of their own after the grace, like startable work does. */
        if (!e->shortage && e->nidle == 0 && e->after_head) {
            e->shortage = true;
            e->shortage_since = now;
            e->shortage_mark = e->progress;
        }
        if (e->shortage) {
            bool still =
                e->nidle == 0 && ((e->ring.count > 0 && e->busy < e->workers) || e->after_head);
            if (!still) {
                e->shortage = false;
            } else if (e->progress != e->shortage_mark) {
                e->shortage_since = now;
                e->shortage_mark = e->progress;
            } else if (now - e->shortage_since >= SPAWN_GRACE_NS && spawn_ok) {
                /* The extra thread retires again once idle. */
                if ((problem = spawn_locked(e)) != NULL)
                    e->spawn_retry_at = now + SPAWN_RETRY_NS;
                e->shortage = false;
            }
            if (e->shortage && e->shortage_since + SPAWN_GRACE_NS < next)
                next = e->shortage_since + SPAWN_GRACE_NS;
        }
        if (e->spawn_retry_at > now && e->spawn_retry_at < next)
            next = e->spawn_retry_at;
        if (problem) {
            /* Logged with the lock dropped; disp_wake_at stays "awake" meanwhile, so no
             * signal is expected, and the loop recomputes everything afterwards. */
            pthread_mutex_unlock(&e->mu);
            vq_log(e->logger, VQ_LOG_ERROR, "%s", problem);
            pthread_mutex_lock(&e->mu);
            continue;
        }
        e->disp_wake_at = next;
        if (next == INT64_MAX) {
            pthread_cond_wait(&e->disp_cv, &e->mu);
        } else {
            struct timespec ts = vq_ts_(next);
            pthread_cond_timedwait(&e->disp_cv, &e->mu, &ts);
        }
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}
