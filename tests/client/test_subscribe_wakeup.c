/* Batched wake-ups of a subscription's consumer (subscribe.wakeup.entries and
 * subscribe.wakeup.wait.us in CONFIGURATION.md) for subscriptions past the client's
 * subscribe.self.receive.max, whose messages gRPC's I/O thread receives (0 here, so every
 * subscription is one): only a busy subscription waits for a batch of messages, never longer
 * than the wait, close does not wait it out, and one that is not busy is woken at every
 * entry.
 *
 * A consumer is made busy deterministically: the entries are appended first, the test waits
 * until the subscription holds them all (white-box, subscribe_test_util.h), and then takes
 * them without the consumer ever sleeping. That it then sleeps asking for a batch is seen
 * inside the subscription (waiting and batching set), as is a trickle's consumer asking to be
 * woken at the first entry: no test depends on how fast the machine is. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "client_fixture.h"
#include "subscribe_internal.h"
#include "subscribe_test_util.h"
#include "test_support.h"
#include "varlog/subscribe.h"

#define WAIT_US "3000000" /* subscribe.wakeup.wait.us: 3 s */
#define WAIT_MS 3000
#define BURST 64

static void append_n(varlog_client_t *c, int n)
{
    varlog_record_t r[BURST];
    for (int i = 0; i < n; i++)
        r[i] = cf_record("entry");
    assert_int_equal(varlog_append(c, 1, r, (size_t)n, 10000, NULL, NULL), VARLOG_OK);
}

/* Takes n entries, expecting them in order from *glsn. */
static void take(varlog_subscription_t *sub, uint64_t *glsn, int n, int64_t timeout_ms)
{
    varlog_entry_t e;
    for (int i = 0; i < n; i++) {
        varlog_err_t rc = varlog_subscription_next(sub, timeout_ms, &e);
        if (rc != VARLOG_OK)
            fail_msg("entry %llu: %s: %s", (unsigned long long)*glsn, varlog_err_name(rc),
                     varlog_last_error());
        assert_int_equal(e.meta.glsn, *glsn);
        (*glsn)++;
    }
}

static bool holds_burst(void *arg)
{
    return stu_buffered_max(arg, NULL) >= BURST;
}

/* The same, the first entry being in a handler (delivered, so no longer held). */
static bool holds_burst_but_one(void *arg)
{
    return stu_buffered_max(arg, NULL) >= BURST - 1;
}

static bool next_sleeping(void *arg)
{
    return stu_next_sleeping(arg);
}

/* The consumer sleeps asking for a batch. */
static bool batching(void *arg)
{
    varlog_subscription_t *sub = arg;
    pthread_mutex_lock(&sub->mu);
    bool b = sub->waiting && sub->batching;
    pthread_mutex_unlock(&sub->mu);
    return b;
}

/* An iterator subscription whose consumer has just taken BURST entries without sleeping. */
static varlog_subscription_t *busy_iterator(client_fixture_t *f, uint64_t *glsn)
{
    append_n(f->client, BURST);
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(f->client, 1, 1, VARLOG_GLSN_MAX, &sub), VARLOG_OK);
    assert_true(test_wait_until(holds_burst, sub, cf_wait_bound_ms()));
    take(sub, glsn, BURST, 0); /* all buffered: no wait */
    return sub;
}

/* Starts varlog_subscription_next on a thread, waits until asleep(sub) holds, checks whether
 * the consumer batches (want_batching), then appends one entry: the call must return it, at
 * *glsn (advanced). */
static void next_takes_one(client_fixture_t *f, varlog_subscription_t *sub, uint64_t *glsn,
                           bool (*asleep)(void *), bool want_batching)
{
    stu_next_call_t n = {.sub = sub, .timeout_ms = WAIT_MS + cf_wait_bound_ms()};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stu_next_call_main, &n), 0);
    assert_true(test_wait_until(asleep, sub, cf_wait_bound_ms()));
    assert_int_equal(batching(sub), want_batching);
    append_n(f->client, 1);
    pthread_join(th, NULL);
    assert_int_equal(n.rc, VARLOG_OK);
    assert_int_equal(n.e.meta.glsn, (*glsn)++);
}

/* After a burst the consumer asks for a batch; a single entry still comes, once the wait
 * ends. Entries that then trickle in one at a time wake it each. */
static void test_busy_batches_trickle_does_not(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "subscribe.wakeup.entries", "16", "subscribe.wakeup.wait.us", WAIT_US,
             "subscribe.self.receive.max", "0", NULL);
    uint64_t glsn = 1;
    varlog_subscription_t *sub = busy_iterator(&f, &glsn);
    next_takes_one(&f, sub, &glsn, batching, true);
    /* Not busy any more: each wait now asks to be woken at the first entry. */
    for (int i = 0; i < 3; i++)
        next_takes_one(&f, sub, &glsn, next_sleeping, false);
    varlog_subscription_close(&sub);
    cf_stop(&f);
}

/* A batch of 16 asked for, 3 come: they are delivered when the wait ends, not held back. */
static void test_short_batch_arrives_after_the_wait(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, "subscribe.wakeup.entries", "16", "subscribe.wakeup.wait.us", "200000",
             "subscribe.self.receive.max", "0", NULL);
    uint64_t glsn = 1;
    varlog_subscription_t *sub = busy_iterator(&f, &glsn);
    append_n(f.client, 3);
    take(sub, &glsn, 3, cf_wait_bound_ms());
    varlog_entry_t e;
    assert_int_equal(varlog_subscription_next(sub, 0, &e), VARLOG_ERR_TIMED_OUT);
    varlog_subscription_close(&sub);
    cf_stop(&f);
}

/* With subscribe.wakeup.entries 1 a busy consumer is woken at the next entry. */
static void test_batching_off(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "subscribe.wakeup.entries", "1", "subscribe.wakeup.wait.us", WAIT_US,
             "subscribe.self.receive.max", "0", NULL);
    uint64_t glsn = 1;
    varlog_subscription_t *sub = busy_iterator(&f, &glsn);
    next_takes_one(&f, sub, &glsn, next_sleeping, false);
    varlog_subscription_close(&sub);
    cf_stop(&f);
}

/* Close ends a handler-form subscription whose consumer sleeps asking for a batch. (How fast
 * is not asserted: the consumer's periodic checks, every 250 ms at most, bound any wait.) */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
    atomic_int entered, seen;
} gate_t;

static bool handler_entered(void *arg)
{
    return atomic_load(&((gate_t *)arg)->entered) > 0;
}

static void on_entry(const varlog_entry_t *e, void *opaque)
{
    (void)e;
    gate_t *g = opaque;
    atomic_fetch_add(&g->entered, 1);
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    atomic_fetch_add(&g->seen, 1);
}

static void test_close_wakes_a_batching_consumer(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "subscribe.wakeup.entries", "16", "subscribe.wakeup.wait.us", WAIT_US,
             "subscribe.self.receive.max", "0", NULL);
    append_n(f.client, BURST);
    gate_t g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    varlog_subscribe_handlers_t h = {.on_entry = on_entry, .opaque = &g};
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe(f.client, 1, 1, VARLOG_GLSN_MAX, &h, &sub), VARLOG_OK);
    /* The first entry's handler holds the thread until the rest are buffered (looked at
     * only once the thread is held: the consumer's fields are its own while it runs). */
    assert_true(test_wait_until(handler_entered, &g, cf_wait_bound_ms()));
    assert_true(test_wait_until(holds_burst_but_one, sub, cf_wait_bound_ms()));
    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    assert_true(test_wait_until(batching, sub, cf_wait_bound_ms()));
    assert_int_equal(atomic_load(&g.seen), BURST);
    varlog_subscription_close(&sub);
    assert_null(sub);
    cf_stop(&f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busy_batches_trickle_does_not),
        cmocka_unit_test(test_short_batch_arrives_after_the_wait),
        cmocka_unit_test(test_batching_off),
        cmocka_unit_test(test_close_wakes_a_batching_consumer),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
