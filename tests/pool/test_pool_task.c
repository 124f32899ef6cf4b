/* Tasks: retry logging through info_enabled, retries, timeouts and the result protocol
 * (shutdown, late completion, retry cancellation, repeated retries). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pool_test_util.h"
#include "test_support.h"
#include "vq/vq.h"

/* ---- a logger that counts ----------------------------------------------------------- */

enum hook_mode { HOOK_NONE, HOOK_YES, HOOK_NO, HOOK_SECOND_ONLY };

typedef struct tlog {
    atomic_int retry_lines, error_lines, fatal_lines, hook_calls;
    enum hook_mode mode;
    vq_logger_t l;
} tlog_t;

static void tlog_log(void *ctx, vq_log_level_t level, const char *fmt, va_list ap)
{
    (void)ap;
    tlog_t *t = ctx;
    if (level == VQ_LOG_INFO && strncmp(fmt, "retry", 5) == 0)
        atomic_fetch_add(&t->retry_lines, 1);
    else if (level == VQ_LOG_ERROR)
        atomic_fetch_add(&t->error_lines, 1);
    else if (level == VQ_LOG_FATAL)
        atomic_fetch_add(&t->fatal_lines, 1);
}

static bool tlog_enabled(void *ctx)
{
    tlog_t *t = ctx;
    int n = atomic_fetch_add(&t->hook_calls, 1);
    switch (t->mode) {
    case HOOK_YES:
        return true;
    case HOOK_SECOND_ONLY:
        return n == 1;
    default:
        return false;
    }
}

static void tlog_init(tlog_t *t, enum hook_mode mode)
{
    memset(t, 0, sizeof(*t));
    t->mode = mode;
    t->l.ctx = t;
    t->l.log = tlog_log;
    t->l.info_enabled = mode == HOOK_NONE ? NULL : tlog_enabled;
}

/* ---- jobs ------------------------------------------------------------------------- */

typedef struct job {
    atomic_int attempts;
    int fail_times; /* attempts that fail before one succeeds */
    int final;      /* what a gated or shutdown job returns */
    int result;
    tcount_t started, done, gate;
} job_t;

static void job_init(job_t *j, int fail_times)
{
    memset(j, 0, sizeof(*j));
    j->fail_times = fail_times;
    tc_init(&j->started);
    tc_init(&j->done);
    tc_init(&j->gate);
}

static void job_destroy(job_t *j)
{
    tc_destroy(&j->started);
    tc_destroy(&j->done);
    tc_destroy(&j->gate);
}

static int flaky(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    job_t *j = arg;
    int n = atomic_fetch_add(&j->attempts, 1);
    tc_add(&j->started, 1);
    return n < j->fail_times ? VQ_ERR_USER + n : VQ_OK;
}

/* Counts stubborn handlers that have returned; never destroyed, so a test can wait on it
 * (a happens-before edge) before freeing what such a handler used. */
static tcount_t stubborn_returned;

/* Ignores its context: returns only when the test hands it a token. */
static int stubborn(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    job_t *j = arg;
    atomic_fetch_add(&j->attempts, 1);
    tc_add(&j->started, 1);
    tc_take(&j->gate, 30000);
    int r = j->final;
    tc_add(&stubborn_returned, 1);
    return r;
}

/* Counts until_cancelled handlers that have returned, as stubborn_returned: a handler
 * abandoned at its deadline may still read its job after the engine was released. */
static tcount_t cancelled_returned;

/* Cooperative: waits until cancelled, then returns its preset outcome. */
static int until_cancelled(vq_ctx_t *ctx, void *arg)
{
    job_t *j = arg;
    atomic_fetch_add(&j->attempts, 1);
    tc_add(&j->started, 1);
    bool cancelled = vq_ctx_wait(ctx, 30000 * MS);
    int r = cancelled && vq_ctx_cancelled(ctx) ? j->final : VQ_ERR_USER + 99;
    tc_add(&cancelled_returned, 1);
    return r;
}

static void record(void *arg, int r)
{
    job_t *j = arg;
    j->result = r;
    tc_add(&j->done, 1);
}

static vq_engine_t *engine(unsigned workers, const vq_logger_t *l)
{
    vq_engine_opts_t o;
    vq_engine_opts_init(&o);
    o.workers = workers;
    o.logger = l;
    vq_engine_t *e = NULL;
    assert_int_equal(vq_engine_create(&o, &e), VQ_OK);
    assert_int_equal(vq_engine_start(e), VQ_OK);
    return e;
}

static bool threads_back(void *arg)
{
    return test_thread_count() <= *(int *)arg;
}

/* ---- RetryInfoEnabled ------------------------------------------------------------- */

static void run_retry_logging(enum hook_mode mode, int want_lines, int want_hooks)
{
    tlog_t t;
    tlog_init(&t, mode);
    vq_engine_t *e = engine(1, &t.l);
    job_t j;
    job_init(&j, 3);
    vq_task_spec_t s = {.handler = flaky, .arg = &j, .after = record};
    s.retry.count = 5;
    s.retry.delay_ns = 1;
    assert_int_equal(vq_engine_submit(e, &s), VQ_OK);
    assert_true(tc_wait_ge(&j.done, 1, 5000));
    assert_int_equal(j.result, VQ_OK);
    assert_int_equal(atomic_load(&j.attempts), 4);
    assert_int_equal(atomic_load(&t.retry_lines), want_lines);
    assert_int_equal(atomic_load(&t.hook_calls), want_hooks);
    assert_int_equal(vq_metrics_retries(vq_engine_metrics(e)), 3);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    job_destroy(&j);
}

static void test_retry_log_without_hook(void **state)
{
    (void)state;
    run_retry_logging(HOOK_NONE, 3, 0);
}

static void test_retry_log_hook_enabled(void **state)
{
    (void)state;
    run_retry_logging(HOOK_YES, 3, 3);
}

static void test_retry_log_hook_disabled(void **state)
{
    (void)state;
    run_retry_logging(HOOK_NO, 0, 3);
}

/* The hook says yes on exactly one of three checks: it is asked on every retry. */
static void test_retry_log_hook_checked_each_retry(void **state)
{
    (void)state;
    run_retry_logging(HOOK_SECOND_ONLY, 1, 3);
}

/* ---- ResultProtocolRepeatedRetries ------------------------------------------------ */

static void test_repeated_retries_success_on_last(void **state)
{
    (void)state;
    vq_engine_t *e = engine(1, vq_logger_discard());
    job_t j;
    job_init(&j, 10);
    vq_task_spec_t s = {.handler = flaky, .arg = &j, .after = record};
    s.retry.count = 10;
    s.retry.delay_ns = 1;
    assert_int_equal(vq_engine_submit(e, &s), VQ_OK);
    assert_true(tc_wait_ge(&j.done, 1, 5000));
    assert_int_equal(atomic_load(&j.attempts), 11);
    assert_int_equal(j.result, VQ_OK);
    assert_int_equal(vq_metrics_success(vq_engine_metrics(e)), 1);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    job_destroy(&j);
}

static void test_repeated_retries_all_fail_last_error(void **state)
{
    (void)state;
    vq_engine_t *e = engine(1, vq_logger_discard());
    job_t j;
    job_init(&j, 1000);
    vq_task_spec_t s = {.handler = flaky, .arg = &j, .after = record};
    s.retry.count = 10;
    s.retry.delay_ns = 1;
    assert_int_equal(vq_engine_submit(e, &s), VQ_OK);
    assert_true(tc_wait_ge(&j.done, 1, 5000));
    assert_int_equal(atomic_load(&j.attempts), 11);
    assert_int_equal(j.result, VQ_ERR_USER + 10); /* the 11th attempt's own error */
    const vq_metrics_t *m = vq_engine_metrics(e);
    assert_int_equal(vq_metrics_failure(m), 1);
    assert_int_equal(vq_metrics_retries(m), 10);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    job_destroy(&j);
}

/* ---- ResultProtocolRetryCancellation ---------------------------------------------- */

/* A 1 h retry delay inside a 10 ms deadline: the task ends at its deadline, no second try. */
static void test_retry_delay_cut_by_deadline(void **state)
{
    (void)state;
    vq_engine_t *e = engine(1, vq_logger_discard());
    job_t j;
    job_init(&j, 1000);
    vq_task_spec_t s = {.handler = flaky, .arg = &j, .after = record, .timeout_ns = 10 * MS};
    s.retry.count = 3;
    s.retry.delay_ns = 3600000 * MS;
    int64_t t0 = test_now_ms();
    assert_int_equal(vq_engine_submit(e, &s), VQ_OK);
    assert_true(tc_wait_ge(&j.done, 1, 5000));
    int64_t took = test_now_ms() - t0;
    assert_int_equal(j.result, VQ_ERR_TIMEOUT);
    assert_true(took >= 9 && took < 4000);
    assert_int_equal(atomic_load(&j.attempts), 1);
    assert_int_equal(vq_metrics_late(vq_engine_metrics(e)), 0);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    job_destroy(&j);
}

/* TestCancelRetryCount: release during a long retry delay cancels it at once; one attempt
 * was made, no success, and the result is that attempt's error, not a generic one. */
static void test_release_cancels_retry_delay(void **state)
{
    (void)state;
    vq_engine_t *e = engine(1, vq_logger_discard());
    job_t j;
    job_init(&j, 1000);
    vq_task_spec_t s = {.handler = flaky, .arg = &j, .after = record};
    s.retry.count = 3;
    s.retry.delay_ns = 20000 * MS;
    assert_int_equal(vq_engine_submit(e, &s), VQ_OK);
    assert_true(tc_wait_ge(&j.started, 1, 5000));
    int64_t t0 = test_now_ms();
    assert_int_equal(vq_engine_release(e), VQ_OK);
    assert_true(test_now_ms() - t0 < 10000);
    assert_int_equal(tc_get(&j.done), 1);
    assert_int_equal(atomic_load(&j.attempts), 1);
    assert_int_equal(j.result, VQ_ERR_USER + 0);
    job_destroy(&j);
}

/* TestHandleTimeout: a handler that honours its context but runs past its deadline. */
static void test_timeout_cooperative_handler(void **state)
{
    (void)state;
    vq_engine_t *e = engine(1, vq_logger_discard());
    job_t j;
    job_init(&j, 0);
    j.final = VQ_OK; /* returns "success" once cancelled: too late to count */
    vq_task_spec_t s = {
        .handler = until_cancelled, .arg = &j, .after = record, .timeout_ns = 100 * MS};
    long returned = tc_get(&cancelled_returned);
    assert_int_equal(vq_engine_submit(e, &s), VQ_OK);
    assert_true(tc_wait_ge(&j.done, 1, 5000));
    assert_int_equal(j.result, VQ_ERR_TIMEOUT);
    assert_int_equal(vq_metrics_failure(vq_engine_metrics(e)), 1);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    /* Abandoned at its deadline, the handler is not waited for by release; it reads j when
     * it wakes (a TSan run saw it read the next test's stack). */
    assert_true(tc_wait_ge(&cancelled_returned, returned + 1, 5000));
    job_destroy(&j);
}

/* ---- ResultProtocolShutdown ------------------------------------------------------- */

/* Handlers running at shutdown see cancellation; whatever they then return is their
 * outcome: success stays success, an error stays that error (its retries are cancelled),
 * a panic is reported as a panic. */
static void test_shutdown_keeps_outcomes(void **state)
{
    (void)state;
    tlog_t t;
    tlog_init(&t, HOOK_NO);
    vq_engine_t *e = engine(3, &t.l);
    job_t j[3];
    int finals[3] = {VQ_OK, VQ_ERR_USER + 1, VQ_ERR_PANIC};
    for (int i = 0; i < 3; i++) {
        job_init(&j[i], 0);
        j[i].final = finals[i];
        vq_task_spec_t s = {.handler = until_cancelled, .arg = &j[i], .after = record};
        s.retry.count = 5;
        s.retry.delay_ns = 1;
        assert_int_equal(vq_engine_submit(e, &s), VQ_OK);
    }
    for (int i = 0; i < 3; i++)
        assert_true(tc_wait_ge(&j[i].started, 1, 5000));
    vq_engine_shutdown(e);
    for (int i = 0; i < 3; i++) {
        assert_true(tc_wait_ge(&j[i].done, 1, 5000));
        assert_int_equal(j[i].result, finals[i]);
        assert_int_equal(atomic_load(&j[i].attempts), 1);
    }
    const vq_metrics_t *m = vq_engine_metrics(e);
    assert_int_equal(vq_metrics_success(m), 1);
    assert_int_equal(vq_metrics_failure(m), 2);
    assert_int_equal(atomic_load(&t.fatal_lines), 1);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    for (int i = 0; i < 3; i++)
        job_destroy(&j[i]);
}

/* ---- ResultProtocolLateCompletion ------------------------------------------------- */

static void run_late_completion(int late_result)
{
    /* Once earlier tests' joined threads have left /proc. */
    int base = test_await_thread_count(test_idle_thread_count(), 5000);
    vq_engine_t *e = engine(1, vq_logger_discard());
    job_t a, b;
    job_init(&a, 0);
    job_init(&b, 0);
    a.final = late_result;
    vq_task_spec_t sa = {.handler = stubborn, .arg = &a, .after = record, .timeout_ns = 50 * MS};
    vq_task_spec_t sb = {.handler = flaky, .arg = &b, .after = record};
    assert_int_equal(vq_engine_submit(e, &sa), VQ_OK);
    assert_int_equal(vq_engine_submit(e, &sb), VQ_OK);
    assert_true(tc_wait_ge(&a.done, 1, 5000));
    assert_int_equal(a.result, VQ_ERR_TIMEOUT);
    /* The only slot was freed at the deadline although the handler still blocks. */
    assert_true(tc_wait_ge(&b.done, 1, 5000));
    assert_int_equal(b.result, VQ_OK);
    vq_engine_threads_t tc;
    vq_engine_thread_counts(e, &tc);
    assert_int_equal(tc.abandoned, 1);
    assert_int_equal(tc.dispatchers, 1);

    long returned = tc_get(&stubborn_returned);
    tc_add(&a.gate, 1);
    assert_true(tc_wait_ge(&stubborn_returned, returned + 1, 5000));
    const vq_metrics_t *m = vq_engine_metrics(e);
    for (int64_t end = test_now_ms() + 5000; vq_metrics_late(m) < 1 && test_now_ms() < end;)
        sched_yield();
    assert_int_equal(vq_metrics_late(m), 1);
    assert_int_equal(a.result, VQ_ERR_TIMEOUT); /* the late result did not overwrite it */
    assert_int_equal(tc_get(&a.done), 1);
    assert_int_equal(vq_metrics_success(m), 1);
    assert_int_equal(vq_metrics_failure(m), 1);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    assert_true(test_wait_until(threads_back, &base, 5000));
    job_destroy(&a);
    job_destroy(&b);
}

static void test_late_completion_success(void **state)
{
    (void)state;
    run_late_completion(VQ_OK);
}

static void test_late_completion_panic(void **state)
{
    (void)state;
    run_late_completion(VQ_ERR_PANIC);
}

/* Release does not wait for a handler that ignores its deadline; that thread leaves on
 * its own once the handler returns, and frees what it still shares with the engine. */
static void test_release_leaves_stuck_handler(void **state)
{
    (void)state;
    /* Once earlier tests' joined threads have left /proc. */
    int base = test_await_thread_count(test_idle_thread_count(), 5000);
    vq_engine_t *e = engine(1, vq_logger_discard());
    job_t a;
    job_init(&a, 0);
    vq_task_spec_t sa = {.handler = stubborn, .arg = &a, .after = record, .timeout_ns = 20 * MS};
    assert_int_equal(vq_engine_submit(e, &sa), VQ_OK);
    assert_true(tc_wait_ge(&a.done, 1, 5000));
    int64_t t0 = test_now_ms();
    assert_int_equal(vq_engine_release(e), VQ_OK);
    assert_true(test_now_ms() - t0 < 5000);
    assert_int_equal(a.result, VQ_ERR_TIMEOUT);
    assert_false(threads_back(&base)); /* the stuck handler's thread is still there */
    long returned = tc_get(&stubborn_returned);
    tc_add(&a.gate, 1);
    assert_true(tc_wait_ge(&stubborn_returned, returned + 1, 5000));
    assert_true(test_wait_until(threads_back, &base, 5000));
    job_destroy(&a);
}

/* ---- the inline runner ------------------------------------------------------------ */

static void test_inline_retries(void **state)
{
    (void)state;
    tlog_t t;
    tlog_init(&t, HOOK_YES);
    vq_metrics_t m;
    vq_metrics_init(&m);
    job_t j;
    job_init(&j, 3);
    vq_task_spec_t s = {.handler = flaky, .arg = &j};
    s.retry.count = 3;
    s.retry.delay_ns = 1;
    assert_int_equal(vq_task_run_inline(&s, &t.l, &m), VQ_OK);
    assert_int_equal(atomic_load(&j.attempts), 4);
    assert_int_equal(vq_metrics_retries(&m), 3);
    assert_int_equal(atomic_load(&t.retry_lines), 3);
    vq_task_spec_t bad = {0};
    assert_int_equal(vq_task_run_inline(&bad, NULL, NULL), VQ_ERR_INVALID);
    job_destroy(&j);
}

static void test_inline_deadline_cuts_delay(void **state)
{
    (void)state;
    job_t j;
    job_init(&j, 1000);
    vq_task_spec_t s = {.handler = flaky, .arg = &j, .timeout_ns = 10 * MS};
    s.retry.count = 2;
    s.retry.delay_ns = 3600000 * MS;
    int64_t t0 = test_now_ms();
    assert_int_equal(vq_task_run_inline(&s, NULL, NULL), VQ_ERR_TIMEOUT);
    assert_true(test_now_ms() - t0 < 4000);
    assert_int_equal(atomic_load(&j.attempts), 1);
    job_destroy(&j);
}

/* Backoff with jitter drives real delays: min 1 ms, so three retries take at least 3 ms. */
static void test_inline_backoff_delays(void **state)
{
    (void)state;
    job_t j;
    job_init(&j, 3);
    vq_task_spec_t s = {.handler = flaky, .arg = &j};
    s.retry = (vq_retry_t){.count = 3, .min_ns = 1 * MS, .max_ns = 4 * MS, .jitter = true};
    int64_t t0 = vq_now_ns();
    assert_int_equal(vq_task_run_inline(&s, NULL, NULL), VQ_OK);
    assert_true(vq_now_ns() - t0 >= 3 * MS);
    job_destroy(&j);
}

/* ---- issue 8 point 7: retry delays wait on the dispatcher's timer heap -------------- */

/* Fails its first attempt, succeeds on the second; counts tasks between the two. */
typedef struct waver {
    atomic_int in_delay, peak, attempts, done;
    tcount_t finished;
} waver_t;

static int wave_handler(vq_ctx_t *ctx, void *arg)
{
    waver_t *w = arg;
    atomic_fetch_add(&w->attempts, 1);
    if (vq_ctx_attempt(ctx) == 0) {
        int v = atomic_fetch_add(&w->in_delay, 1) + 1;
        int p = atomic_load(&w->peak);
        while (v > p && !atomic_compare_exchange_weak(&w->peak, &p, v))
            ;
        return VQ_ERR_USER;
    }
    atomic_fetch_sub(&w->in_delay, 1);
    return VQ_OK;
}

static void wave_after(void *arg, int r)
{
    waver_t *w = arg;
    if (r == VQ_OK)
        atomic_fetch_add(&w->done, 1);
    tc_add(&w->finished, 1);
}

/* 32 tasks each needing one retry after a 1 s delay, on 8 workers: a task in its delay
 * holds no worker, so more than 8 are in their delay at once (all 32 here). Before the fix
 * each delay slept in a slot: never more than 8, and the tasks went through in waves. */
static void test_retry_delays_hold_no_worker(void **state)
{
    (void)state;
    vq_engine_t *e = engine(8, vq_logger_discard());
    static waver_t w;
    memset(&w, 0, sizeof(w));
    tc_init(&w.finished);
    vq_task_spec_t s = {.handler = wave_handler, .arg = &w, .after = wave_after};
    s.retry = (vq_retry_t){.count = 1, .delay_ns = 1000 * MS};
    for (int i = 0; i < 32; i++)
        assert_int_equal(vq_engine_submit(e, &s), VQ_OK);
    assert_true(tc_wait_ge(&w.finished, 32, 30000));
    assert_int_equal(atomic_load(&w.done), 32);
    assert_int_equal(atomic_load(&w.attempts), 64);
    assert_true(atomic_load(&w.peak) > 8);
    assert_int_equal(vq_metrics_retries(vq_engine_metrics(e)), 32);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    tc_destroy(&w.finished);
}

/* With one worker, a task waiting out a long retry delay leaves the worker free: a fresh
 * task runs meanwhile. Release then cancels the delay; the task ends with its last error. */
static void test_worker_free_during_retry_delay(void **state)
{
    (void)state;
    vq_engine_t *e = engine(1, vq_logger_discard());
    static job_t a, b;
    job_init(&a, 1000);
    job_init(&b, 0);
    vq_task_spec_t sa = {.handler = flaky, .arg = &a, .after = record};
    sa.retry = (vq_retry_t){.count = 3, .delay_ns = 30000 * MS};
    vq_task_spec_t sb = {.handler = flaky, .arg = &b, .after = record};
    assert_int_equal(vq_engine_submit(e, &sa), VQ_OK);
    assert_true(tc_wait_ge(&a.started, 1, 5000));
    assert_int_equal(vq_engine_submit(e, &sb), VQ_OK);
    assert_true(tc_wait_ge(&b.done, 1, 5000));
    assert_int_equal(b.result, VQ_OK);
    assert_int_equal(tc_get(&a.done), 0);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    assert_int_equal(tc_get(&a.done), 1);
    assert_int_equal(a.result, VQ_ERR_USER + 0);
    assert_int_equal(atomic_load(&a.attempts), 1);
    job_destroy(&a);
    job_destroy(&b);
}

/* ---- delay_first (issue 8 point 13: delays b0, b1, b2 when attempt 1 ran elsewhere) ---- */

typedef struct timed {
    int64_t start[8], end[8];
    atomic_int attempts;
    unsigned seen[8];
    int result;
    tcount_t done;
} timed_t;

static int timed_fail(vq_ctx_t *ctx, void *arg)
{
    timed_t *t = arg;
    int n = atomic_fetch_add(&t->attempts, 1);
    if (n < 8) {
        t->start[n] = vq_now_ns();
        t->seen[n] = vq_ctx_attempt(ctx);
        t->end[n] = vq_now_ns();
    }
    return VQ_ERR_USER + n;
}

static void timed_record(void *arg, int r)
{
    timed_t *t = arg;
    t->result = r;
    tc_add(&t->done, 1);
}

/* Backoff 20 ms doubling, no jitter, 2 retries: delays 20, 40 and 80 ms before attempts 0,
 * 1 and 2 (only lower bounds are checked; a loaded machine only makes them longer). */
static void check_delay_first_timing(const timed_t *t, int64_t t0)
{
    assert_int_equal(atomic_load(&t->attempts), 3);
    for (unsigned k = 0; k < 3; k++)
        assert_int_equal(t->seen[k], k);
    assert_true(t->start[0] - t0 >= 20 * MS);
    assert_true(t->start[1] - t->end[0] >= 40 * MS);
    assert_true(t->start[2] - t->end[1] >= 80 * MS);
}

static void test_delay_first_on_engine(void **state)
{
    (void)state;
    vq_engine_t *e = engine(1, vq_logger_discard());
    static timed_t t;
    memset(&t, 0, sizeof(t));
    tc_init(&t.done);
    vq_task_spec_t s = {.handler = timed_fail, .arg = &t, .after = timed_record};
    s.retry = (vq_retry_t){
        .count = 2, .min_ns = 20 * MS, .max_ns = 1000 * MS, .factor = 2, .delay_first = true};
    int64_t t0 = vq_now_ns();
    assert_int_equal(vq_engine_submit(e, &s), VQ_OK);
    assert_true(tc_wait_ge(&t.done, 1, 10000));
    check_delay_first_timing(&t, t0);
    assert_int_equal(t.result, VQ_ERR_USER + 2);
    assert_int_equal(vq_metrics_retries(vq_engine_metrics(e)), 3);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    tc_destroy(&t.done);
}

static void test_delay_first_inline(void **state)
{
    (void)state;
    timed_t t;
    memset(&t, 0, sizeof(t));
    vq_task_spec_t s = {.handler = timed_fail, .arg = &t};
    s.retry = (vq_retry_t){
        .count = 2, .min_ns = 20 * MS, .max_ns = 1000 * MS, .factor = 2, .delay_first = true};
    int64_t t0 = vq_now_ns();
    assert_int_equal(vq_task_run_inline(&s, NULL, NULL), VQ_ERR_USER + 2);
    check_delay_first_timing(&t, t0);
    /* The first delay counts against the deadline: it may end the task before attempt 0. */
    memset(&t, 0, sizeof(t));
    s.retry = (vq_retry_t){.count = 2, .delay_ns = 3600000 * MS, .delay_first = true};
    s.timeout_ns = 10 * MS;
    assert_int_equal(vq_task_run_inline(&s, NULL, NULL), VQ_ERR_TIMEOUT);
    assert_int_equal(atomic_load(&t.attempts), 0);
}

static atomic_int count_release;
static void counted_release(void *arg)
{
    (void)arg;
    atomic_fetch_add(&count_release, 1);
}

/* A delay_first task waits on the timer heap before attempt 0, holding no worker; its
 * deadline may end it there (VQ_ERR_TIMEOUT), and a shutdown completes it unrun
 * (VQ_ERR_SHUTDOWN), release callback included. */
static void test_delay_first_deadline_and_shutdown(void **state)
{
    (void)state;
    vq_engine_t *e = engine(1, vq_logger_discard());
    static timed_t late, never;
    static job_t other;
    memset(&late, 0, sizeof(late));
    memset(&never, 0, sizeof(never));
    tc_init(&late.done);
    tc_init(&never.done);
    job_init(&other, 0);
    atomic_store(&count_release, 0);
    vq_task_spec_t sl = {.handler = timed_fail,
                         .arg = &late,
                         .after = timed_record,
                         .release = counted_release,
                         .timeout_ns = 20 * MS};
    sl.retry = (vq_retry_t){.count = 1, .delay_ns = 3600000 * MS, .delay_first = true};
    vq_task_spec_t sn = {
        .handler = timed_fail, .arg = &never, .after = timed_record, .release = counted_release};
    sn.retry = (vq_retry_t){.count = 1, .delay_ns = 3600000 * MS, .delay_first = true};
    vq_task_spec_t so = {.handler = flaky, .arg = &other, .after = record};
    assert_int_equal(vq_engine_submit(e, &sl), VQ_OK);
    assert_int_equal(vq_engine_submit(e, &sn), VQ_OK);
    assert_int_equal(vq_engine_submit(e, &so), VQ_OK);
    assert_true(tc_wait_ge(&other.done, 1, 5000)); /* the worker was free */
    assert_true(tc_wait_ge(&late.done, 1, 5000));
    assert_int_equal(late.result, VQ_ERR_TIMEOUT);
    assert_int_equal(atomic_load(&late.attempts), 0);
    assert_int_equal(tc_get(&never.done), 0);
    assert_int_equal(vq_metrics_late(vq_engine_metrics(e)), 0);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    assert_int_equal(never.result, VQ_ERR_SHUTDOWN);
    assert_int_equal(atomic_load(&never.attempts), 0);
    assert_int_equal(atomic_load(&count_release), 2);
    tc_destroy(&late.done);
    tc_destroy(&never.done);
    job_destroy(&other);
}

/* A retry due while every slot is busy waits in the queue; if its deadline passes there, the
 * task ends with VQ_ERR_TIMEOUT without running again (not as a late answer). A retry
 * running in its slot (the old engine) never waited in the queue; the timer heap brings
 * this case. */
typedef struct expiring {
    atomic_int attempts;
    _Atomic int64_t deadline;
    tcount_t started;
} expiring_t;

static int expiring_fail(vq_ctx_t *ctx, void *arg)
{
    expiring_t *x = arg;
    atomic_store(&x->deadline, vq_ctx_deadline_ns(ctx));
    atomic_fetch_add(&x->attempts, 1);
    tc_add(&x->started, 1);
    return VQ_ERR_USER;
}

static void test_retry_expired_in_queue_does_not_run(void **state)
{
    (void)state;
    vq_engine_t *e = engine(1, vq_logger_discard());
    static expiring_t x;
    static job_t blocker;
    memset(&x, 0, sizeof(x));
    tc_init(&x.started);
    job_init(&blocker, 0);
    /* Retries every 1 ms (more than fit in its deadline) until the blocker takes the slot. */
    vq_task_spec_t sx = {.handler = expiring_fail, .arg = &x, .timeout_ns = 100 * MS};
    sx.retry = (vq_retry_t){.count = 1000, .delay_ns = 1 * MS};
    assert_int_equal(vq_engine_submit(e, &sx), VQ_OK);
    assert_true(tc_wait_ge(&x.started, 1, 5000));
    vq_task_spec_t sb = {.handler = stubborn, .arg = &blocker, .after = record};
    assert_int_equal(vq_engine_submit(e, &sb), VQ_OK);
    assert_true(tc_wait_ge(&blocker.started, 1, 5000));
    /* The only slot is held: wait out the first task's deadline (the condition is time). */
    int attempts = atomic_load(&x.attempts);
    for (int64_t end = test_now_ms() + 10000; vq_now_ns() <= atomic_load(&x.deadline);)
        assert_true(test_now_ms() < end);
    long returned = tc_get(&stubborn_returned);
    tc_add(&blocker.gate, 1);
    assert_true(tc_wait_ge(&stubborn_returned, returned + 1, 5000));
    assert_true(tc_wait_ge(&blocker.done, 1, 5000));
    const vq_metrics_t *m = vq_engine_metrics(e);
    for (int64_t end = test_now_ms() + 5000; vq_metrics_failure(m) < 1 && test_now_ms() < end;)
        sched_yield();
    assert_int_equal(vq_metrics_failure(m), 1);           /* the expired task */
    assert_int_equal(atomic_load(&x.attempts), attempts); /* none after the deadline */
    assert_int_equal(vq_metrics_late(m), 0);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    tc_destroy(&x.started);
    job_destroy(&blocker);
}

int main(void)
{
    tc_init(&stubborn_returned);
    tc_init(&cancelled_returned);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retry_log_without_hook),
        cmocka_unit_test(test_retry_log_hook_enabled),
        cmocka_unit_test(test_retry_log_hook_disabled),
        cmocka_unit_test(test_retry_log_hook_checked_each_retry),
        cmocka_unit_test(test_repeated_retries_success_on_last),
        cmocka_unit_test(test_repeated_retries_all_fail_last_error),
        cmocka_unit_test(test_retry_delay_cut_by_deadline),
        cmocka_unit_test(test_release_cancels_retry_delay),
        cmocka_unit_test(test_timeout_cooperative_handler),
        cmocka_unit_test(test_shutdown_keeps_outcomes),
        cmocka_unit_test(test_late_completion_success),
        cmocka_unit_test(test_late_completion_panic),
        cmocka_unit_test(test_release_leaves_stuck_handler),
        cmocka_unit_test(test_inline_retries),
        cmocka_unit_test(test_inline_deadline_cuts_delay),
        cmocka_unit_test(test_inline_backoff_delays),
        cmocka_unit_test(test_retry_delays_hold_no_worker),
        cmocka_unit_test(test_worker_free_during_retry_delay),
        cmocka_unit_test(test_delay_first_on_engine),
        cmocka_unit_test(test_delay_first_inline),
        cmocka_unit_test(test_delay_first_deadline_and_shutdown),
        cmocka_unit_test(test_retry_expired_in_queue_does_not_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
