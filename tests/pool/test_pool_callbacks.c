/* Engine callbacks: after-callbacks that wait for the next task or hold a latch, release
 * refused from a callback, the release callback once per task and after its handler, and
 * shutdown that completes queued tasks and lets a logger call back into the engine. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pool_engine_fixture.h"
#include "test_support.h"

/* AfterFnCanWaitForNextTask: with one worker, an after-callback submits a job and waits
 * for it; the callback holds no slot, so the job runs. */
typedef struct chain {
    vq_engine_t *e;
    tcount_t second_after, callbacks;
    bool waited_ok;
    int submit_rc;
} chain_t;

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

/* ---- issue 8 point 4: the release callback ------------------------------------------- */

/* A handler abandoned at its deadline: the after-callback reports the timeout while the
 * handler still runs; release must wait for the handler. Static: a failing run leaves the
 * handler blocked on it after the test has returned. */
typedef struct life {
    tcount_t entered, gate, after_done, released;
    atomic_bool handler_returned, after_ran;
    atomic_bool handler_returned_at_after, handler_returned_at_release, after_ran_at_release;
    atomic_int after_result, release_calls;
} life_t;

static int life_stuck(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    life_t *l = arg;
    tc_add(&l->entered, 1);
    tc_take(&l->gate, 30000);
    atomic_store(&l->handler_returned, true);
    return VQ_OK;
}

static void life_after(void *arg, int r)
{
    life_t *l = arg;
    atomic_store(&l->after_result, r);
    atomic_store(&l->handler_returned_at_after, atomic_load(&l->handler_returned));
    atomic_store(&l->after_ran, true);
    tc_add(&l->after_done, 1);
}

static void life_release(void *arg)
{
    life_t *l = arg;
    atomic_store(&l->handler_returned_at_release, atomic_load(&l->handler_returned));
    atomic_store(&l->after_ran_at_release, atomic_load(&l->after_ran));
    atomic_fetch_add(&l->release_calls, 1);
    tc_add(&l->released, 1);
}

static void test_release_waits_for_abandoned_handler(void **state)
{
    (void)state;
    static life_t l;
    memset(&l, 0, sizeof(l));
    tc_init(&l.entered);
    tc_init(&l.gate);
    tc_init(&l.after_done);
    tc_init(&l.released);
    vq_engine_t *e = make(1, 0, true);
    vq_task_spec_t t = {.handler = life_stuck,
                        .arg = &l,
                        .after = life_after,
                        .release = life_release,
                        .timeout_ns = 50 * MS};
    assert_int_equal(vq_engine_submit(e, &t), VQ_OK);
    assert_true(tc_wait_ge(&l.after_done, 1, 5000));
    assert_int_equal(atomic_load(&l.after_result), VQ_ERR_TIMEOUT);
    /* What the old client relied on: the after-callback ran while the handler still used
     * arg. The release must not come yet. */
    assert_false(atomic_load(&l.handler_returned_at_after));
    assert_false(tc_wait_ge(&l.released, 1, 100)); /* an observation window, not a sync */
    tc_add(&l.gate, 1);
    assert_true(tc_wait_ge(&l.released, 1, 5000));
    assert_true(atomic_load(&l.handler_returned_at_release));
    assert_true(atomic_load(&l.after_ran_at_release));
    assert_int_equal(vq_engine_release(e), VQ_OK);
    assert_int_equal(atomic_load(&l.release_calls), 1);
    tc_destroy(&l.entered);
    tc_destroy(&l.gate);
    tc_destroy(&l.after_done);
    tc_destroy(&l.released);
}

/* Exactly one release per accepted task, after its after-callback, on every path: success
 * and failure with and without an after-callback, a retry, a cancelled retry delay, tasks
 * completed unrun by release; none for a refused submit. */
typedef struct once {
    atomic_int after_calls, release_calls, attempts;
    atomic_bool after_before_release;
    int fail_times;
} once_t;

static int once_handler(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    once_t *o = arg;
    return atomic_fetch_add(&o->attempts, 1) < o->fail_times ? VQ_ERR_USER : VQ_OK;
}

static void once_after(void *arg, int r)
{
    (void)r;
    once_t *o = arg;
    atomic_fetch_add(&o->after_calls, 1);
}

static void once_release(void *arg)
{
    once_t *o = arg;
    atomic_store(&o->after_before_release, atomic_load(&o->after_calls) == 1);
    atomic_fetch_add(&o->release_calls, 1);
}

static void test_release_called_once_on_every_path(void **state)
{
    (void)state;
    enum { N = 7 };
    once_t o[N];
    memset(o, 0, sizeof(o));
    vq_engine_t *e = make(2, 0, true);
    vq_task_spec_t t[N];
    for (int i = 0; i < N; i++)
        t[i] = (vq_task_spec_t){.handler = once_handler, .arg = &o[i], .release = once_release};
    t[1].after = once_after; /* success with after */
    o[2].fail_times = 100;   /* failure, no after */
    o[3].fail_times = 100;   /* failure with after */
    t[3].after = once_after;
    o[4].fail_times = 1; /* one retry, then success */
    t[4].after = once_after;
    t[4].retry = (vq_retry_t){.count = 1, .delay_ns = 1 * MS};
    o[5].fail_times = 100; /* left in a long retry delay */
    t[5].after = once_after;
    t[5].retry = (vq_retry_t){.count = 1, .delay_ns = 3600000 * MS};
    for (int i = 0; i < 6; i++)
        assert_int_equal(vq_engine_submit(e, &t[i]), VQ_OK);
    for (int64_t end = test_now_ms() + 5000; test_now_ms() < end; sched_yield()) {
        bool all = atomic_load(&o[5].attempts) == 1;
        for (int i = 0; i < 5; i++)
            all = all && atomic_load(&o[i].release_calls) == 1;
        if (all)
            break;
    }
    assert_int_equal(atomic_load(&o[4].attempts), 2);
    assert_int_equal(atomic_load(&o[5].release_calls), 0); /* still in its delay */
    /* A paused engine at release completes its queued task unrun on this thread. */
    assert_int_equal(vq_engine_set_workers(e, 0), VQ_OK);
    assert_true(busy_is(e, 0));
    t[6].after = once_after;
    assert_int_equal(vq_engine_submit(e, &t[6]), VQ_OK);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    for (int i = 0; i < N; i++) {
        assert_int_equal(atomic_load(&o[i].release_calls), 1);
        if (t[i].after)
            assert_true(atomic_load(&o[i].after_before_release));
    }
    assert_int_equal(atomic_load(&o[6].attempts), 0);
    /* A refused submit leaves arg with the caller. */
    once_t refused;
    memset(&refused, 0, sizeof(refused));
    vq_engine_t *f = make(1, 1, false);
    vq_task_spec_t r = {.handler = once_handler, .arg = &refused, .release = once_release};
    assert_int_equal(vq_engine_submit(f, &r), VQ_OK);
    assert_int_equal(vq_engine_submit(f, &r), VQ_ERR_FULL);
    assert_int_equal(vq_engine_release(f), VQ_OK);
    assert_int_equal(atomic_load(&refused.release_calls), 1); /* the accepted one only */
}

/* ---- issue 8 point 5: shutdown and callbacks ----------------------------------------- */

/* One worker; its handler waits for the after-callback of a task queued behind it. Shutdown
 * must complete the queued task unrun with VQ_ERR_SHUTDOWN, on a thread of its own, so the
 * handler returns and release finishes. Before the fix release blocked until the handler
 * gave up. Static: a failing run leaves the handler waiting on it. */
typedef struct stall {
    vq_engine_t *e;
    tcount_t a_started, b_after, a_released, b_released, shut;
    atomic_bool a_waited, b_ran;
    atomic_int b_result;
} stall_t;

static int stall_a(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    stall_t *s = arg;
    tc_add(&s->a_started, 1);
    atomic_store(&s->a_waited, tc_wait_ge(&s->b_after, 1, 30000));
    return VQ_OK;
}

static int stall_b(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    stall_t *s = arg;
    atomic_store(&s->b_ran, true);
    return VQ_OK;
}

static void stall_b_after(void *arg, int r)
{
    stall_t *s = arg;
    atomic_store(&s->b_result, r);
    tc_add(&s->b_after, 1);
}

static void stall_a_release(void *arg)
{
    tc_add(&((stall_t *)arg)->a_released, 1);
}

static void stall_b_release(void *arg)
{
    tc_add(&((stall_t *)arg)->b_released, 1);
}

static void *shutdown_thread(void *arg)
{
    stall_t *s = arg;
    vq_engine_shutdown(s->e);
    tc_add(&s->shut, 1);
    return NULL;
}

static void test_shutdown_completes_tasks_no_slot_can_start(void **state)
{
    (void)state;
    static stall_t s;
    memset(&s, 0, sizeof(s));
    tc_init(&s.a_started);
    tc_init(&s.b_after);
    tc_init(&s.a_released);
    tc_init(&s.b_released);
    tc_init(&s.shut);
    s.e = make(1, 0, true);
    vq_task_spec_t a = {.handler = stall_a, .arg = &s, .release = stall_a_release};
    vq_task_spec_t b = {
        .handler = stall_b, .arg = &s, .after = stall_b_after, .release = stall_b_release};
    assert_int_equal(vq_engine_submit(s.e, &a), VQ_OK);
    assert_true(tc_wait_ge(&s.a_started, 1, 5000));
    assert_int_equal(vq_engine_submit(s.e, &b), VQ_OK);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, shutdown_thread, &s), 0);
    assert_true(tc_wait_ge(&s.b_after, 1, 10000));
    assert_int_equal(atomic_load(&s.b_result), VQ_ERR_SHUTDOWN);
    assert_false(atomic_load(&s.b_ran));
    assert_true(tc_wait_ge(&s.a_released, 1, 10000));
    assert_true(tc_wait_ge(&s.b_released, 1, 10000));
    assert_true(atomic_load(&s.a_waited));
    assert_true(tc_wait_ge(&s.shut, 1, 5000));
    pthread_join(th, NULL);
    int64_t t0 = test_now_ms();
    assert_int_equal(vq_engine_release(s.e), VQ_OK);
    assert_true(test_now_ms() - t0 < 10000);
    tc_destroy(&s.a_started);
    tc_destroy(&s.b_after);
    tc_destroy(&s.a_released);
    tc_destroy(&s.b_released);
    tc_destroy(&s.shut);
}

/* A logger that calls back into the engine, as a log callback shipping lines through the
 * library would. Before the fix shutdown logged its "busy workers" line with the engine
 * lock held, and this logger deadlocked on it. Static: see above. */
typedef struct reentrant_log {
    vq_engine_t *e;
    atomic_int lines, submit_rc, calls_done;
    vq_logger_t l;
} reentrant_log_t;

static void reentrant_log(void *ctx, vq_log_level_t level, const char *fmt, va_list ap)
{
    (void)level;
    (void)fmt;
    (void)ap;
    reentrant_log_t *r = ctx;
    atomic_fetch_add(&r->lines, 1);
    vq_engine_t *e = r->e;
    if (!e)
        return;
    vq_engine_threads_t tc;
    vq_engine_thread_counts(e, &tc);
    vq_task_spec_t t = {.handler = ok_handler};
    atomic_store(&r->submit_rc, vq_engine_submit(e, &t));
    (void)vq_engine_workers(e);
    atomic_fetch_add(&r->calls_done, 1);
}

static void test_logger_may_call_engine_during_shutdown(void **state)
{
    (void)state;
    static reentrant_log_t r;
    static scene_t sc;
    static sjob_t j;
    static stall_t s;
    memset(&r, 0, sizeof(r));
    r.l.ctx = &r;
    r.l.log = reentrant_log;
    scene_init(&sc);
    sjob_init(&j, &sc, 0, GATED);
    vq_engine_opts_t o;
    vq_engine_opts_init(&o);
    o.workers = 1;
    o.logger = &r.l;
    vq_engine_t *e;
    assert_int_equal(vq_engine_create(&o, &e), VQ_OK);
    r.e = e;
    assert_int_equal(vq_engine_start(e), VQ_OK);
    vq_task_spec_t t = spec_of(&j);
    assert_int_equal(vq_engine_submit(e, &t), VQ_OK);
    assert_true(tc_wait_ge(&sc.started, 1, 5000));
    /* Shutdown with a busy worker logs a line; on another thread, bounded. */
    memset(&s, 0, sizeof(s));
    tc_init(&s.shut);
    s.e = e;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, shutdown_thread, &s), 0);
    assert_true(tc_wait_ge(&s.shut, 1, 5000));
    pthread_join(th, NULL);
    assert_true(atomic_load(&r.calls_done) >= 1);
    assert_int_equal(atomic_load(&r.submit_rc), VQ_ERR_SHUTDOWN);
    tc_add(&sc.tokens, 1);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    assert_int_equal(j.result, VQ_OK);
    tc_destroy(&s.shut);
    tc_destroy(&j.finished);
    scene_destroy(&sc);
}

int main(void)
{
    engine_fixture_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_after_can_wait_for_next_task),
        cmocka_unit_test(test_release_waits_for_after),
        cmocka_unit_test(test_release_from_callback_refused),
        cmocka_unit_test(test_release_waits_for_abandoned_handler),
        cmocka_unit_test(test_release_called_once_on_every_path),
        cmocka_unit_test(test_shutdown_completes_tasks_no_slot_can_start),
        cmocka_unit_test(test_logger_may_call_engine_during_shutdown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
