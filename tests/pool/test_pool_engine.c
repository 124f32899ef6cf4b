/* Engine: resize/pause/drain, reusable worker outcomes, after-callbacks, release, repeated
 * start with blocked producers, slot accounting and thread reuse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pool_test_util.h"
#include "test_support.h"
#include "vq/vq.h"

/* Shared by the gated jobs of one test. */
typedef struct scene {
    tcount_t started, done, tokens;
    atomic_int running, peak, peak_busy;
    atomic_int ids[64];
    vq_engine_t *e;
} scene_t;

typedef struct sjob {
    scene_t *s;
    int id;
    int mode; /* see handler */
    atomic_int attempts;
    int result;
    tcount_t finished;
} sjob_t;

static void scene_init(scene_t *s)
{
    memset(s, 0, sizeof(*s));
    tc_init(&s->started);
    tc_init(&s->done);
    tc_init(&s->tokens);
}

static void scene_destroy(scene_t *s)
{
    tc_destroy(&s->started);
    tc_destroy(&s->done);
    tc_destroy(&s->tokens);
}

static void bump_peak(atomic_int *peak, int v)
{
    int p = atomic_load(peak);
    while (v > p && !atomic_compare_exchange_weak(peak, &p, v))
        ;
}

/* Never destroyed: waiting on it orders a stuck handler's last accesses before teardown. */
static tcount_t stuck_returned;

enum { GATED, ERRS, PANICS, FAILS_ONCE, STUCK, PLAIN, BRIEF };

static int handler(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    sjob_t *j = arg;
    scene_t *s = j->s;
    int n = atomic_fetch_add(&j->attempts, 1);
    bump_peak(&s->peak, atomic_fetch_add(&s->running, 1) + 1);
    if (s->e)
        bump_peak(&s->peak_busy, (int)vq_metrics_busy(vq_engine_metrics(s->e)));
    tc_add(&s->started, 1);
    int r = VQ_OK;
    switch (j->mode) {
    case GATED:
    case STUCK:
        tc_take(&s->tokens, 30000);
        break;
    case ERRS:
        r = VQ_ERR_USER + 1;
        break;
    case PANICS:
        r = VQ_ERR_PANIC;
        break;
    case FAILS_ONCE:
        r = n == 0 ? VQ_ERR_USER + 2 : VQ_OK;
        break;
    case BRIEF:
        for (int i = 0; i < 3; i++)
            sched_yield();
        break;
    default:
        break;
    }
    atomic_fetch_sub(&s->running, 1);
    if (j->id >= 0 && j->id < 64)
        atomic_fetch_add(&s->ids[j->id], 1);
    if (j->mode == STUCK)
        tc_add(&stuck_returned, 1); /* last touch: the test may free the scene after it */
    return r;
}

static void after(void *arg, int r)
{
    sjob_t *j = arg;
    j->result = r;
    tc_add(&j->finished, 1);
    tc_add(&j->s->done, 1);
}

static void sjob_init(sjob_t *j, scene_t *s, int id, int mode)
{
    memset(j, 0, sizeof(*j));
    j->s = s;
    j->id = id;
    j->mode = mode;
    tc_init(&j->finished);
}

static vq_task_spec_t spec_of(sjob_t *j)
{
    vq_task_spec_t t = {.handler = handler, .arg = j, .after = after};
    return t;
}

static vq_engine_t *make(unsigned workers, size_t limit, bool start)
{
    vq_engine_opts_t o;
    vq_engine_opts_init(&o);
    o.workers = workers;
    o.queue_limit = limit;
    o.logger = vq_logger_discard();
    vq_engine_t *e = NULL;
    assert_int_equal(vq_engine_create(&o, &e), VQ_OK);
    if (start)
        assert_int_equal(vq_engine_start(e), VQ_OK);
    return e;
}

static bool busy_is(vq_engine_t *e, int64_t n)
{
    for (int64_t end = test_now_ms() + 5000; test_now_ms() < end; sched_yield())
        if (vq_metrics_busy(vq_engine_metrics(e)) == n)
            return true;
    return false;
}

static bool threads_back(void *arg)
{
    return test_thread_count() <= *(int *)arg;
}

/* QueueResizePauseAndDrain: 16 gated jobs through worker counts 2 -> 4 -> 1 -> 0 -> 2. */
static void test_resize_pause_and_drain(void **state)
{
    (void)state;
    scene_t s;
    scene_init(&s);
    vq_engine_t *e = make(2, 0, true);
    s.e = e;
    sjob_t j[16];
    for (int i = 0; i < 16; i++) {
        sjob_init(&j[i], &s, i, GATED);
        vq_task_spec_t t = spec_of(&j[i]);
        assert_int_equal(vq_engine_submit(e, &t), VQ_OK);
    }
    assert_true(tc_wait_ge(&s.started, 2, 5000));
    assert_true(busy_is(e, 2));
    assert_int_equal(atomic_load(&s.running), 2);

    assert_int_equal(vq_engine_set_workers(e, 4), VQ_OK);
    assert_true(tc_wait_ge(&s.started, 4, 5000));
    assert_true(busy_is(e, 4));
    assert_int_equal(atomic_load(&s.running), 4);
    assert_int_equal(atomic_load(&s.peak), 4);

    /* At 1: the four running finish, and only one new job may start. */
    assert_int_equal(vq_engine_set_workers(e, 1), VQ_OK);
    tc_add(&s.tokens, 4);
    assert_true(tc_wait_ge(&s.done, 4, 5000));
    assert_true(tc_wait_ge(&s.started, 5, 5000));
    assert_true(busy_is(e, 1));
    assert_int_equal(tc_get(&s.started), 5);

    /* At 0: the running job finishes and nothing else starts. */
    assert_int_equal(vq_engine_set_workers(e, 0), VQ_OK);
    tc_add(&s.tokens, 1);
    assert_true(tc_wait_ge(&s.done, 5, 5000));
    assert_true(busy_is(e, 0));
    assert_false(tc_wait_ge(&s.started, 6, 100)); /* an observation window, not a sync */

    assert_int_equal(vq_engine_set_workers(e, 2), VQ_OK);
    tc_add(&s.tokens, 11);
    assert_true(tc_wait_ge(&s.done, 16, 5000));
    for (int i = 0; i < 16; i++)
        assert_int_equal(atomic_load(&s.ids[i]), 1);
    assert_int_equal(vq_metrics_success(vq_engine_metrics(e)), 16);
    assert_true(atomic_load(&s.peak) <= 4);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    for (int i = 0; i < 16; i++)
        tc_destroy(&j[i].finished);
    scene_destroy(&s);
}

/* ReusableWorkerOutcomes: error, panic, fail-then-succeed, a handler that ignores its
 * timeout, then a plain success, all on one worker. */
static void test_reusable_worker_outcomes(void **state)
{
    (void)state;
    int base = test_thread_count();
    scene_t s;
    scene_init(&s);
    vq_engine_t *e = make(1, 0, true);
    int modes[5] = {ERRS, PANICS, FAILS_ONCE, STUCK, PLAIN};
    sjob_t j[5];
    for (int i = 0; i < 5; i++) {
        sjob_init(&j[i], &s, i, modes[i]);
        vq_task_spec_t t = spec_of(&j[i]);
        if (modes[i] == FAILS_ONCE) {
            t.retry.count = 1;
            t.retry.delay_ns = 1;
        }
        if (modes[i] == STUCK)
            t.timeout_ns = 50 * MS;
        assert_int_equal(vq_engine_submit(e, &t), VQ_OK);
    }
    assert_true(tc_wait_ge(&j[4].finished, 1, 5000));
    assert_true(tc_wait_ge(&s.done, 5, 5000));
    assert_int_equal(j[0].result, VQ_ERR_USER + 1);
    assert_int_equal(j[1].result, VQ_ERR_PANIC);
    assert_int_equal(j[2].result, VQ_OK);
    assert_int_equal(atomic_load(&j[2].attempts), 2);
    assert_int_equal(j[3].result, VQ_ERR_TIMEOUT);
    assert_int_equal(j[4].result, VQ_OK);
    const vq_metrics_t *m = vq_engine_metrics(e);
    assert_int_equal(vq_metrics_success(m), 2);
    assert_int_equal(vq_metrics_failure(m), 3);
    int64_t t0 = test_now_ms();
    assert_int_equal(vq_engine_release(e), VQ_OK); /* does not wait for the stuck one */
    assert_true(test_now_ms() - t0 < 5000);
    tc_add(&s.tokens, 1);
    assert_true(tc_wait_ge(&stuck_returned, 1, 5000));
    assert_true(test_wait_until(threads_back, &base, 5000));
    for (int i = 0; i < 5; i++)
        tc_destroy(&j[i].finished);
    scene_destroy(&s);
}

/* AfterFnCanWaitForNextTask: with one worker, an after-callback submits a job and waits
 * for it; the callback holds no slot, so the job runs. */
typedef struct chain {
    vq_engine_t *e;
    tcount_t second_after, callbacks;
    bool waited_ok;
    int submit_rc;
} chain_t;

static int ok_handler(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
    return VQ_OK;
}

static void chain_after_second(void *arg, int r)
{
    chain_t *c = arg;
    (void)r;
    tc_add(&c->second_after, 1);
    tc_add(&c->callbacks, 1);
}

static void chain_after_first(void *arg, int r)
{
    chain_t *c = arg;
    (void)r;
    vq_task_spec_t t = {.handler = ok_handler, .arg = c, .after = chain_after_second};
    c->submit_rc = vq_engine_submit(c->e, &t);
    c->waited_ok = tc_wait_ge(&c->second_after, 1, 10000);
    tc_add(&c->callbacks, 1);
}

static void test_after_can_wait_for_next_task(void **state)
{
    (void)state;
    chain_t c;
    memset(&c, 0, sizeof(c));
    tc_init(&c.second_after);
    tc_init(&c.callbacks);
    c.e = make(1, 0, true);
    vq_task_spec_t t = {.handler = ok_handler, .arg = &c, .after = chain_after_first};
    assert_int_equal(vq_engine_submit(c.e, &t), VQ_OK);
    assert_true(tc_wait_ge(&c.callbacks, 2, 10000));
    assert_int_equal(c.submit_rc, VQ_OK);
    assert_true(c.waited_ok);
    assert_int_equal(vq_metrics_success(vq_engine_metrics(c.e)), 2);
    assert_int_equal(vq_engine_release(c.e), VQ_OK);
    tc_destroy(&c.second_after);
    tc_destroy(&c.callbacks);
}

/* ReleaseWaitsForAfterFn: release from another thread stays blocked while a callback holds
 * a latch, and returns only after the callback has finished. */
typedef struct latch_after {
    vq_engine_t *e;
    tcount_t entered, latch, released;
    atomic_bool after_finished, finished_at_release;
    int release_rc;
} latch_after_t;

static void latched_after(void *arg, int r)
{
    latch_after_t *l = arg;
    (void)r;
    tc_add(&l->entered, 1);
    tc_take(&l->latch, 30000);
    atomic_store(&l->after_finished, true);
}

static void *releaser(void *arg)
{
    latch_after_t *l = arg;
    l->release_rc = vq_engine_release(l->e);
    atomic_store(&l->finished_at_release, atomic_load(&l->after_finished));
    tc_add(&l->released, 1);
    return NULL;
}

static void test_release_waits_for_after(void **state)
{
    (void)state;
    latch_after_t l;
    memset(&l, 0, sizeof(l));
    tc_init(&l.entered);
    tc_init(&l.latch);
    tc_init(&l.released);
    l.e = make(1, 0, true);
    vq_task_spec_t t = {.handler = ok_handler, .arg = &l, .after = latched_after};
    assert_int_equal(vq_engine_submit(l.e, &t), VQ_OK);
    assert_true(tc_wait_ge(&l.entered, 1, 5000));
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, releaser, &l), 0);
    assert_false(tc_wait_ge(&l.released, 1, 200)); /* still held by the callback */
    tc_add(&l.latch, 1);
    assert_true(tc_wait_ge(&l.released, 1, 5000));
    pthread_join(th, NULL);
    assert_int_equal(l.release_rc, VQ_OK);
    assert_true(atomic_load(&l.finished_at_release));
    tc_destroy(&l.entered);
    tc_destroy(&l.latch);
    tc_destroy(&l.released);
}

/* BlockingBackendAndRepeatedStart, mapped onto the ring: start twice gives one dispatcher;
 * a producer blocked on a full queue feeds 64 tasks through; shutdown wakes a blocked
 * producer with VQ_ERR_SHUTDOWN and release completes what is left. */
typedef struct producer {
    vq_engine_t *e;
    scene_t *s;
    sjob_t *jobs;
    int n;
    int rc;
    tcount_t finished;
} producer_t;

static void *produce(void *arg)
{
    producer_t *p = arg;
    p->rc = VQ_OK;
    for (int i = 0; i < p->n && p->rc == VQ_OK; i++) {
        vq_task_spec_t t = spec_of(&p->jobs[i]);
        p->rc = vq_engine_submit_wait(p->e, &t, -1);
    }
    tc_add(&p->finished, 1);
    return NULL;
}

static void test_repeated_start_and_blocked_producer(void **state)
{
    (void)state;
    int base = test_thread_count();
    scene_t s;
    scene_init(&s);
    vq_engine_t *e = make(2, 4, false);
    assert_int_equal(vq_engine_start(e), VQ_OK);
    assert_int_equal(vq_engine_start(e), VQ_OK);
    vq_engine_threads_t tc;
    for (int64_t end = test_now_ms() + 5000; test_now_ms() < end; sched_yield()) {
        vq_engine_thread_counts(e, &tc);
        if (tc.workers == 2)
            break;
    }
    assert_int_equal(tc.dispatchers, 1);
    assert_int_equal(tc.workers, 2);
    assert_int_equal(test_thread_count(), base + 3); /* one dispatcher, two workers */

    static sjob_t jobs[64];
    for (int i = 0; i < 64; i++)
        sjob_init(&jobs[i], &s, i, PLAIN);
    producer_t p = {.e = e, .s = &s, .jobs = jobs, .n = 64};
    tc_init(&p.finished);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, produce, &p), 0);
    assert_true(tc_wait_ge(&p.finished, 1, 5000));
    pthread_join(th, NULL);
    assert_int_equal(p.rc, VQ_OK);
    assert_true(tc_wait_ge(&s.done, 64, 5000));
    assert_int_equal(vq_metrics_success(vq_engine_metrics(e)), 64);
    assert_int_equal(test_thread_count(), base + 3); /* no thread per task */

    /* Paused and full: the next producer blocks until shutdown wakes it. */
    assert_int_equal(vq_engine_set_workers(e, 0), VQ_OK);
    static sjob_t more[5];
    for (int i = 0; i < 5; i++)
        sjob_init(&more[i], &s, -1, PLAIN);
    for (int i = 0; i < 4; i++) {
        vq_task_spec_t t = spec_of(&more[i]);
        assert_int_equal(vq_engine_submit(e, &t), VQ_OK);
    }
    vq_task_spec_t t = spec_of(&more[4]);
    assert_int_equal(vq_engine_submit(e, &t), VQ_ERR_FULL);
    producer_t q = {.e = e, .s = &s, .jobs = &more[4], .n = 1};
    tc_init(&q.finished);
    assert_int_equal(pthread_create(&th, NULL, produce, &q), 0);
    assert_false(tc_wait_ge(&q.finished, 1, 100));
    vq_engine_shutdown(e);
    assert_true(tc_wait_ge(&q.finished, 1, 5000));
    pthread_join(th, NULL);
    assert_int_equal(q.rc, VQ_ERR_SHUTDOWN);
    assert_int_equal(vq_engine_start(e), VQ_ERR_SHUTDOWN);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(more[i].result, VQ_ERR_SHUTDOWN); /* paused: completed unrun */
    assert_true(test_wait_until(threads_back, &base, 5000));
    for (int i = 0; i < 64; i++)
        tc_destroy(&jobs[i].finished);
    for (int i = 0; i < 5; i++)
        tc_destroy(&more[i].finished);
    tc_destroy(&p.finished);
    tc_destroy(&q.finished);
    scene_destroy(&s);
}

/* PR #165's TestBusyWorkersNeverExceedsWorkerCount, sampled inside every handler. */
static void test_busy_never_exceeds_workers(void **state)
{
    (void)state;
    scene_t s;
    scene_init(&s);
    vq_engine_t *e = make(4, 0, true);
    s.e = e;
    int n = (int)test_scale(400, 4);
    sjob_t *j = calloc((size_t)n, sizeof(*j));
    for (int i = 0; i < n; i++) {
        sjob_init(&j[i], &s, -1, BRIEF);
        vq_task_spec_t t = spec_of(&j[i]);
        assert_int_equal(vq_engine_submit(e, &t), VQ_OK);
    }
    assert_true(tc_wait_ge(&s.done, n, 10000));
    assert_true(atomic_load(&s.peak) <= 4);
    assert_true(atomic_load(&s.peak_busy) <= 4);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    for (int i = 0; i < n; i++)
        tc_destroy(&j[i].finished);
    free(j);
    scene_destroy(&s);
}

/* TestIncreaseWorkerCount: busy goes 5 -> 10. */
static void test_increase_worker_count(void **state)
{
    (void)state;
    scene_t s;
    scene_init(&s);
    vq_engine_t *e = make(5, 0, true);
    sjob_t j[20];
    for (int i = 0; i < 20; i++) {
        sjob_init(&j[i], &s, i, GATED);
        vq_task_spec_t t = spec_of(&j[i]);
        assert_int_equal(vq_engine_submit(e, &t), VQ_OK);
    }
    assert_true(tc_wait_ge(&s.started, 5, 5000));
    assert_true(busy_is(e, 5));
    assert_int_equal(vq_engine_set_workers(e, 10), VQ_OK);
    assert_int_equal(vq_engine_workers(e), 10);
    assert_true(tc_wait_ge(&s.started, 10, 5000));
    assert_true(busy_is(e, 10));
    tc_add(&s.tokens, 20);
    assert_true(tc_wait_ge(&s.done, 20, 5000));
    assert_int_equal(vq_engine_release(e), VQ_OK);
    for (int i = 0; i < 20; i++)
        tc_destroy(&j[i].finished);
    scene_destroy(&s);
}

/* TestDecreaseWorkerCount: busy goes 5 -> 3 -> 2 as running jobs finish; nothing new
 * starts while busy is above the count. */
static void test_decrease_worker_count(void **state)
{
    (void)state;
    scene_t s;
    scene_init(&s);
    vq_engine_t *e = make(5, 0, true);
    sjob_t j[10];
    for (int i = 0; i < 10; i++) {
        sjob_init(&j[i], &s, i, GATED);
        vq_task_spec_t t = spec_of(&j[i]);
        assert_int_equal(vq_engine_submit(e, &t), VQ_OK);
    }
    assert_true(tc_wait_ge(&s.started, 5, 5000));
    assert_int_equal(vq_engine_set_workers(e, 3), VQ_OK);
    tc_add(&s.tokens, 2);
    assert_true(tc_wait_ge(&s.done, 2, 5000));
    assert_true(busy_is(e, 3));
    assert_int_equal(vq_engine_set_workers(e, 2), VQ_OK);
    tc_add(&s.tokens, 1);
    assert_true(tc_wait_ge(&s.done, 3, 5000));
    assert_true(busy_is(e, 2));
    assert_int_equal(tc_get(&s.started), 5);
    tc_add(&s.tokens, 7);
    assert_true(tc_wait_ge(&s.done, 10, 5000));
    assert_true(atomic_load(&s.peak) <= 5);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    for (int i = 0; i < 10; i++)
        tc_destroy(&j[i].finished);
    scene_destroy(&s);
}

/* TestEnqueueJobAfterShutdown. */
static void test_submit_after_shutdown(void **state)
{
    (void)state;
    vq_engine_t *e = make(1, 0, true);
    vq_engine_shutdown(e);
    vq_engine_shutdown(e);
    vq_task_spec_t t = {.handler = ok_handler};
    assert_int_equal(vq_engine_submit(e, &t), VQ_ERR_SHUTDOWN);
    assert_int_equal(vq_engine_submit_wait(e, &t, -1), VQ_ERR_SHUTDOWN);
    assert_int_equal(vq_metrics_submitted(vq_engine_metrics(e)), 0);
    assert_int_equal(vq_engine_release(e), VQ_OK);
}

/* TestMaxCapacity through the engine; release of a never-started engine completes the
 * queued tasks unrun; bad specs are refused. */
static void test_max_capacity_unstarted(void **state)
{
    (void)state;
    scene_t s;
    scene_init(&s);
    vq_engine_t *e = make(1, 2, false);
    sjob_t j[3];
    for (int i = 0; i < 3; i++)
        sjob_init(&j[i], &s, i, PLAIN);
    vq_task_spec_t t0 = spec_of(&j[0]), t1 = spec_of(&j[1]), t2 = spec_of(&j[2]);
    assert_int_equal(vq_engine_submit(e, &t0), VQ_OK);
    assert_int_equal(vq_engine_submit(e, &t1), VQ_OK);
    assert_int_equal(vq_engine_submit(e, &t2), VQ_ERR_FULL);
    assert_int_equal(vq_engine_submit_wait(e, &t2, 10 * MS), VQ_ERR_TIMEOUT);
    vq_task_spec_t bad = {.handler = NULL};
    assert_int_equal(vq_engine_submit(e, &bad), VQ_ERR_INVALID);
    vq_task_spec_t neg = {.handler = ok_handler, .timeout_ns = -1};
    assert_int_equal(vq_engine_submit(e, &neg), VQ_ERR_INVALID);
    assert_int_equal(vq_metrics_submitted(vq_engine_metrics(e)), 2);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    assert_int_equal(j[0].result, VQ_ERR_SHUTDOWN);
    assert_int_equal(j[1].result, VQ_ERR_SHUTDOWN);
    assert_int_equal(tc_get(&s.started), 0);
    for (int i = 0; i < 3; i++)
        tc_destroy(&j[i].finished);
    scene_destroy(&s);
}

/* TestHandleAllJobBeforeShutdown: release runs what is queued before it returns. */
static void test_release_runs_queued_work(void **state)
{
    (void)state;
    scene_t s;
    scene_init(&s);
    vq_engine_t *e = make(1, 0, true);
    sjob_t j[10];
    for (int i = 0; i < 10; i++) {
        sjob_init(&j[i], &s, i, PLAIN);
        vq_task_spec_t t = spec_of(&j[i]);
        assert_int_equal(vq_engine_submit(e, &t), VQ_OK);
    }
    assert_int_equal(vq_engine_release(e), VQ_OK);
    assert_int_equal(tc_get(&s.done), 10);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(j[i].result, VQ_OK);
        tc_destroy(&j[i].finished);
    }
    scene_destroy(&s);
}

/* RingMinCapacity 7: an engine built with a minimum capacity completes a task. */
static void test_min_capacity_engine_completes(void **state)
{
    (void)state;
    vq_engine_opts_t o;
    vq_engine_opts_init(&o);
    o.workers = 2;
    o.min_capacity = 1000;
    o.logger = vq_logger_discard();
    vq_engine_t *e;
    assert_int_equal(vq_engine_create(&o, &e), VQ_OK);
    assert_int_equal(vq_engine_start(e), VQ_OK);
    scene_t s;
    scene_init(&s);
    sjob_t j;
    sjob_init(&j, &s, 0, PLAIN);
    vq_task_spec_t t = spec_of(&j);
    assert_int_equal(vq_engine_submit(e, &t), VQ_OK);
    assert_true(tc_wait_ge(&j.finished, 1, 5000));
    assert_int_equal(j.result, VQ_OK);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    tc_destroy(&j.finished);
    scene_destroy(&s);
}

/* Many tasks, no thread per task: the thread count stays at dispatcher + workers. */
static void test_threads_are_reused(void **state)
{
    (void)state;
    int base = test_thread_count();
    scene_t s;
    scene_init(&s);
    vq_engine_t *e = make(4, 0, true);
    int n = (int)test_scale(20000, 40);
    sjob_t j;
    sjob_init(&j, &s, -1, PLAIN);
    vq_task_spec_t t = {.handler = handler, .arg = &j};
    int peak = 0;
    for (int i = 0; i < n; i++) {
        assert_int_equal(vq_engine_submit(e, &t), VQ_OK);
        if (i % 1000 == 0) {
            int c = test_thread_count();
            peak = c > peak ? c : peak;
        }
    }
    assert_true(tc_wait_ge(&s.started, n, 20000));
    assert_true(peak <= base + 5);
    assert_true(test_thread_count() <= base + 5);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    tc_destroy(&j.finished);
    scene_destroy(&s);
}

/* Release from the engine's own thread would wait for itself: refused. */
typedef struct self_release {
    vq_engine_t *e;
    atomic_int rc;
    tcount_t done;
} self_release_t;

static void release_self(void *arg, int r)
{
    self_release_t *x = arg;
    (void)r;
    atomic_store(&x->rc, vq_engine_release(x->e));
    tc_add(&x->done, 1);
}

static void test_release_from_callback_refused(void **state)
{
    (void)state;
    self_release_t x;
    memset(&x, 0, sizeof(x));
    tc_init(&x.done);
    x.e = make(1, 0, true);
    vq_task_spec_t t = {.handler = ok_handler, .arg = &x, .after = release_self};
    assert_int_equal(vq_engine_submit(x.e, &t), VQ_OK);
    assert_true(tc_wait_ge(&x.done, 1, 5000));
    assert_int_equal(atomic_load(&x.rc), VQ_ERR_BUSY);
    assert_int_equal(vq_engine_release(x.e), VQ_OK);
    tc_destroy(&x.done);
}

int main(void)
{
    tc_init(&stuck_returned);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resize_pause_and_drain),
        cmocka_unit_test(test_reusable_worker_outcomes),
        cmocka_unit_test(test_after_can_wait_for_next_task),
        cmocka_unit_test(test_release_waits_for_after),
        cmocka_unit_test(test_repeated_start_and_blocked_producer),
        cmocka_unit_test(test_busy_never_exceeds_workers),
        cmocka_unit_test(test_increase_worker_count),
        cmocka_unit_test(test_decrease_worker_count),
        cmocka_unit_test(test_submit_after_shutdown),
        cmocka_unit_test(test_max_capacity_unstarted),
        cmocka_unit_test(test_release_runs_queued_work),
        cmocka_unit_test(test_min_capacity_engine_completes),
        cmocka_unit_test(test_threads_are_reused),
        cmocka_unit_test(test_release_from_callback_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
