/* The log callback as the library promises it (log.h): it runs outside library locks and
 * may call the library, also on a retry worker, also while the client closes; and a
 * callback that stalls a retry worker cannot make the library use what it freed. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "client_fixture.h"
#include "client_internal.h"
#include "test_support.h"

#define GRPC_UNAVAILABLE 14

/* ---- a callback that does something on retry workers only ------------------------------ */

typedef enum { ACT_NONE, ACT_BLOCK, ACT_APPEND, ACT_WAIT_OTHER } action_t;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t known[3]; /* test threads: the callback does nothing there */
    size_t n_known;
    action_t action;
    bool acting;     /* the callback is in its action */
    bool done;       /* the action finished */
    bool released;   /* ACT_BLOCK / ACT_WAIT_OTHER may return */
    bool destroying; /* the test is about to call varlog_client_destroy */
    varlog_client_t *client;
    varlog_err_t inner_err;
} cb = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void cb_reset(action_t action)
{
    pthread_mutex_lock(&cb.mu);
    cb.known[0] = pthread_self();
    cb.n_known = 1;
    cb.action = action;
    cb.acting = cb.done = cb.released = cb.destroying = false;
    cb.client = NULL;
    cb.inner_err = VARLOG_ERR_INTERNAL;
    pthread_mutex_unlock(&cb.mu);
}

static void cb_know_thread(pthread_t t)
{
    pthread_mutex_lock(&cb.mu);
    cb.known[cb.n_known++] = t;
    pthread_mutex_unlock(&cb.mu);
}

static void timed_wait(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&cb.cv, &cb.mu, &ts);
}

/* Waits (bounded) until flag is true; called and returns with cb.mu held. */
static bool wait_flag_locked(const bool *flag, int64_t bound_ms)
{
    int64_t until = test_now_ms() + bound_ms;
    while (!*flag && test_now_ms() < until)
        timed_wait(10);
    return *flag;
}

static void log_cb(void *opaque, varlog_log_level_t level, varlog_log_ctx_t ctx,
                   const char *message)
{
    (void)opaque;
    (void)ctx;
    (void)level;
    pthread_mutex_lock(&cb.mu);
    bool known = false;
    for (size_t i = 0; i < cb.n_known; i++)
        known |= pthread_equal(cb.known[i], pthread_self()) != 0;
    /* Act once, on the deny line logged by a retry worker. */
    bool act = !known && cb.action != ACT_NONE && !cb.acting && !cb.done &&
               strstr(message, "denied") != NULL;
    if (act)
        cb.acting = true;
    pthread_cond_broadcast(&cb.cv);
    action_t action = cb.action;
    varlog_client_t *client = cb.client;
    pthread_mutex_unlock(&cb.mu);
    if (!act)
        return;

    varlog_err_t inner = VARLOG_OK;
    if (action == ACT_APPEND) {
        /* Ship the log line to Varlog, as an application might: an append that itself needs
         * a retry, from the retry worker this callback occupies. */
        varlog_record_t rec = {.data = message, .len = strlen(message)};
        inner = varlog_append_to(client, 1, 1, &rec, 1, 20000, NULL, NULL);
    }
    pthread_mutex_lock(&cb.mu);
    if (action == ACT_BLOCK || action == ACT_WAIT_OTHER)
        (void)wait_flag_locked(&cb.released, 60000);
    cb.inner_err = inner;
    cb.done = true;
    pthread_cond_broadcast(&cb.cv);
    pthread_mutex_unlock(&cb.mu);
}

static void set_log_cb(varlog_conf_t *conf, void *arg)
{
    (void)arg;
    varlog_conf_set_log_cb(conf, log_cb, NULL);
}

/* The client the callback appends with. */
static void cb_set_client(varlog_client_t *client)
{
    pthread_mutex_lock(&cb.mu);
    cb.client = client;
    pthread_mutex_unlock(&cb.mu);
}

static bool abandoned_handlers(void *arg)
{
    client_fixture_t *f = arg;
    vq_engine_threads_t t;
    vq_engine_thread_counts(f->client->engine, &t);
    return t.abandoned > 0;
}

static bool cb_acting(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&cb.mu);
    bool acting = cb.acting;
    pthread_mutex_unlock(&cb.mu);
    return acting;
}

/* ---- tests -------------------------------------------------------------------------------- */

static bool destroy_blocked(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&cb.mu);
    bool destroying = cb.destroying;
    pthread_mutex_unlock(&cb.mu);
    return destroying && test_main_thread_blocked();
}

static void *release_when_destroy_waits(void *arg)
{
    (void)arg;
    /* The stalled handler is released once destroy has started and blocked in a wait (for
     * that handler, if destroy is right): an event, so that on any machine the release comes
     * while destroy waits, not before it began. Bounded: released anyway after the bound,
     * then the assertion below still holds but proves less. */
    (void)test_wait_until(destroy_blocked, NULL, cf_wait_bound_ms());
    pthread_mutex_lock(&cb.mu);
    cb.released = true;
    pthread_cond_broadcast(&cb.cv);
    pthread_mutex_unlock(&cb.mu);
    return NULL;
}

/* A log callback stalls a retry worker past the retry task's watchdog. The engine reports
 * the task timed out while its handler still runs: the op that handler uses must stay alive
 * (ASan: heap-use-after-free before), and destroy must wait for the handler before freeing
 * the client it uses. */
static void test_stalled_retry_handler_outlives_watchdog(void **state)
{
    (void)state;
    cb_reset(ACT_BLOCK);
    client_fixture_t f = {0};
    /* Watchdog = caller's time left + lookup wait + metadata call timeout + 1 s. */
    cf_start_adjusted(&f, 1, 2, set_log_cb, NULL, "log.level", "notice", "append.retry.backoff.ms",
                      "1", "metadata.call.timeout.ms", "100", "lookup.batch.wait.ms", "0", NULL);
    cb_set_client(f.client);
    /* First pick refuses (denied on this thread), the retry's pick refuses too: its deny
     * line is logged on the retry worker, where the callback blocks. */
    assert_int_equal(
        varlog_server_fail_next(f.srv, CF_PATH_APPEND, GRPC_UNAVAILABLE, "not primary replica", 2),
        VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    /* Long enough for the retry to reach its attempt on a slow run; the callback then holds
     * the handler past this deadline and past the watchdog's. */
    int64_t timeout = test_under_valgrind() ? 6000 : 1500;
    varlog_err_t err = varlog_append(f.client, 1, &rec, 1, timeout, NULL, NULL);
    assert_int_equal(err, VARLOG_ERR_TIMED_OUT);
    assert_true(test_wait_until(cb_acting, NULL, cf_wait_bound_ms()));
    assert_true(test_wait_until(abandoned_handlers, &f, cf_wait_bound_ms() * 2));

    pthread_t releaser;
    assert_int_equal(pthread_create(&releaser, NULL, release_when_destroy_waits, NULL), 0);
    pthread_mutex_lock(&cb.mu);
    cb.destroying = true;
    pthread_mutex_unlock(&cb.mu);
    varlog_client_destroy(f.client);
    f.client = NULL;
    pthread_mutex_lock(&cb.mu);
    bool returned = cb.done;
    pthread_mutex_unlock(&cb.mu);
    assert_true(returned); /* destroy waited for the stalled handler */
    pthread_join(releaser, NULL);
    cf_stop(&f);
}

/* retry.workers = 1, and the log callback on that worker appends (its own retry needed): the
 * append must not wait for the worker it occupies. */
static void test_append_from_callback_on_the_only_worker(void **state)
{
    (void)state;
    cb_reset(ACT_APPEND);
    client_fixture_t f = {0};
    cf_start_adjusted(&f, 1, 2, set_log_cb, NULL, "log.level", "notice", "retry.workers", "1",
                      "lookup.batch.size", "1", "append.retry.backoff.ms", "1", NULL);
    cb_set_client(f.client);
    /* Outer attempt, outer retry (deny line on the worker) and the inner first attempt. */
    assert_int_equal(
        varlog_server_fail_next(f.srv, CF_PATH_APPEND, GRPC_UNAVAILABLE, "not primary replica", 3),
        VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    assert_int_equal(varlog_append(f.client, 1, &rec, 1, 60000, NULL, NULL), VARLOG_OK);
    pthread_mutex_lock(&cb.mu);
    assert_true(wait_flag_locked(&cb.done, 60000));
    varlog_err_t inner = cb.inner_err;
    pthread_mutex_unlock(&cb.mu);
    assert_int_equal(inner, VARLOG_OK);
    cf_stop(&f);
}

struct other_append {
    varlog_client_t *client;
    varlog_err_t err;
    bool finished;
};

static void *other_append_main(void *arg)
{
    struct other_append *o = arg;
    cb_know_thread(pthread_self()); /* before it can log anything */
    varlog_record_t rec = cf_record("y");
    o->err = varlog_append_to(o->client, 1, 1, &rec, 1, 20000, NULL, NULL);
    pthread_mutex_lock(&cb.mu);
    o->finished = true;
    cb.released = true; /* the callback waits for this append */
    pthread_cond_broadcast(&cb.cv);
    pthread_mutex_unlock(&cb.mu);
    return NULL;
}

static void *outer_append_main(void *arg)
{
    varlog_client_t *client = arg;
    cb_know_thread(pthread_self()); /* before it can log anything */
    varlog_record_t rec = cf_record("x");
    (void)varlog_append(client, 1, &rec, 1, 60000, NULL, NULL);
    return NULL;
}

static bool retries_submitted(void *arg)
{
    client_fixture_t *f = arg;
    return atomic_load(&vq_engine_metrics(f->client->engine)->submitted) >= 2;
}

/* The only retry worker is held by a log callback that waits for another thread's append,
 * whose retry is queued behind it. Closing must end that queued retry (CLOSED) rather than
 * wait for it to run, so every call returns and destroy completes. */
static void test_destroy_ends_retries_that_cannot_start(void **state)
{
    (void)state;
    cb_reset(ACT_WAIT_OTHER);
    client_fixture_t f = {0};
    cf_start_adjusted(&f, 1, 2, set_log_cb, NULL, "log.level", "notice", "retry.workers", "1",
                      "lookup.batch.size", "1", "append.retry.backoff.ms", "1", NULL);
    cb_set_client(f.client);
    assert_int_equal(
        varlog_server_fail_next(f.srv, CF_PATH_APPEND, GRPC_UNAVAILABLE, "not primary replica", 3),
        VARLOG_OK);
    pthread_t outer, other;
    assert_int_equal(pthread_create(&outer, NULL, outer_append_main, f.client), 0);
    assert_true(test_wait_until(cb_acting, NULL, cf_wait_bound_ms()));
    struct other_append o = {.client = f.client};
    assert_int_equal(pthread_create(&other, NULL, other_append_main, &o), 0);
    assert_true(test_wait_until(retries_submitted, &f, cf_wait_bound_ms()));

    varlog_client_destroy(f.client);
    f.client = NULL;
    pthread_join(other, NULL);
    pthread_join(outer, NULL);
    assert_true(o.finished);
    assert_int_equal(o.err, VARLOG_ERR_CLOSED);
    cf_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stalled_retry_handler_outlives_watchdog),
        cmocka_unit_test(test_append_from_callback_on_the_only_worker),
        cmocka_unit_test(test_destroy_ends_retries_that_cannot_start),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
