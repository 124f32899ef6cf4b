/* Engine lifecycle: repeated start and producers blocked on a full queue, submit after
 * shutdown, the queue limit and minimum capacity, and release running or completing what is
 * queued. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pool_engine_fixture.h"
#include "test_support.h"

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
    /* Once earlier tests' joined threads have left /proc. */
    int base = test_await_thread_count(test_idle_thread_count(), 5000);
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
    /* No thread per task. The producer, joined above, may still be listed for a moment
     * (ASan's make test saw 5 for 4 once): wait for it to leave. */
    assert_int_equal(test_await_thread_count(base + 3, 5000), base + 3);

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

int main(void)
{
    engine_fixture_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repeated_start_and_blocked_producer),
        cmocka_unit_test(test_submit_after_shutdown),
        cmocka_unit_test(test_max_capacity_unstarted),
        cmocka_unit_test(test_release_runs_queued_work),
        cmocka_unit_test(test_min_capacity_engine_completes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
