/* Engine faults forced through link-time wrapping (-Wl,--wrap=pthread_create): a worker
 * thread that cannot be created is logged with the engine lock dropped, so a logger that
 * calls back into the engine does not deadlock, and the engine recovers once threads can
 * be created again. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pool_test_util.h"
#include "test_support.h"
#include "vq/vq.h"

static atomic_bool fail_create;
static atomic_int refused;

int __real_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    if (atomic_load(&fail_create)) {
        atomic_fetch_add(&refused, 1);
        return EAGAIN;
    }
    return __real_pthread_create(t, a, fn, arg);
}

/* A logger that calls the engine, as a log callback shipping lines through the library
 * would. Static: a failing run leaves the dispatcher blocked on it. */
typedef struct relog {
    _Atomic(vq_engine_t *) e;
    atomic_int errors, calls_done;
    tcount_t seen;
    vq_logger_t l;
} relog_t;

static void relog_log(void *ctx, vq_log_level_t level, const char *fmt, va_list ap)
{
    (void)fmt;
    (void)ap;
    relog_t *r = ctx;
    vq_engine_t *e = atomic_load(&r->e);
    if (level != VQ_LOG_ERROR || !e)
        return;
    atomic_fetch_add(&r->errors, 1);
    vq_engine_threads_t tc;
    vq_engine_thread_counts(e, &tc); /* takes the engine lock: deadlocked before the fix */
    (void)vq_engine_workers(e);
    atomic_fetch_add(&r->calls_done, 1);
    tc_add(&r->seen, 1);
}

static int ok_handler(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    tc_add(arg, 1);
    return VQ_OK;
}

static void test_spawn_failure_logged_outside_lock(void **state)
{
    (void)state;
    static relog_t r;
    static tcount_t ran;
    memset(&r, 0, sizeof(r));
    tc_init(&r.seen);
    tc_init(&ran);
    r.l.ctx = &r;
    r.l.log = relog_log;
    vq_engine_opts_t o;
    vq_engine_opts_init(&o);
    o.workers = 0; /* the dispatcher starts; the workers come later, when creation fails */
    o.logger = &r.l;
    vq_engine_t *e;
    assert_int_equal(vq_engine_create(&o, &e), VQ_OK);
    atomic_store(&r.e, e);
    assert_int_equal(vq_engine_start(e), VQ_OK);
    atomic_store(&fail_create, true);
    assert_int_equal(vq_engine_set_workers(e, 1), VQ_OK);
    assert_true(tc_wait_ge(&r.seen, 1, 5000));
    assert_true(atomic_load(&r.calls_done) >= 1);
    assert_true(atomic_load(&refused) >= 1);
    /* Creation works again: the dispatcher retries and the queued task runs. */
    vq_task_spec_t t = {.handler = ok_handler, .arg = &ran};
    assert_int_equal(vq_engine_submit(e, &t), VQ_OK);
    atomic_store(&fail_create, false);
    assert_true(tc_wait_ge(&ran, 1, 5000));
    atomic_store(&r.e, NULL);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    tc_destroy(&r.seen);
    tc_destroy(&ran);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spawn_failure_logged_outside_lock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
