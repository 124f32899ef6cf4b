/* The engine tests' fixture: see pool_engine_fixture.h. */
#include "pool_engine_fixture.h"

#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "test_support.h"

void scene_init(scene_t *s)
{
    memset(s, 0, sizeof(*s));
    tc_init(&s->started);
    tc_init(&s->done);
    tc_init(&s->tokens);
}

void scene_destroy(scene_t *s)
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

tcount_t stuck_returned;

void engine_fixture_init(void)
{
    tc_init(&stuck_returned);
}

int handler(vq_ctx_t *ctx, void *arg)
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

void after(void *arg, int r)
{
    sjob_t *j = arg;
    j->result = r;
    tc_add(&j->finished, 1);
    tc_add(&j->s->done, 1);
}

void sjob_init(sjob_t *j, scene_t *s, int id, int mode)
{
    memset(j, 0, sizeof(*j));
    j->s = s;
    j->id = id;
    j->mode = mode;
    tc_init(&j->finished);
}

vq_task_spec_t spec_of(sjob_t *j)
{
    vq_task_spec_t t = {.handler = handler, .arg = j, .after = after};
    return t;
}

vq_engine_t *make(unsigned workers, size_t limit, bool start)
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

bool busy_is(vq_engine_t *e, int64_t n)
{
    for (int64_t end = test_now_ms() + 5000; test_now_ms() < end; sched_yield())
        if (vq_metrics_busy(vq_engine_metrics(e)) == n)
            return true;
    return false;
}

bool threads_back(void *arg)
{
    return test_thread_count() <= *(int *)arg;
}

int ok_handler(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
    return VQ_OK;
}
