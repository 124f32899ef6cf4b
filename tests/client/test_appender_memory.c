/* What the pipelined appenders of one client hold (issue 37): the client-wide bound
 * (appender.client.queue.max.records and .bytes) refuses and waits across appenders as an
 * appender's own bound does, wakes its waiters without losing one, never waits in a callback,
 * and the transmit-queue slots a burst added go back once idle, with nothing accepted lost.
 * White-box where the API cannot show a state: the number of producers waiting for the
 * client-wide bound and what it holds (client_internal.h), and app_budget_wait_locked wrapped
 * at link time to hold a producer between its look at the bound and its sleep. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "appender_fixture.h"
#include "appender_internal.h"
#include "test_support.h"

static bool budget_waiting(void *arg)
{
    varlog_client_t *c = arg;
    return atomic_load(&c->budget.waiters) > 0;
}

static uint64_t budget_records(varlog_client_t *c)
{
    return atomic_load(&c->budget.records);
}

typedef struct waiter {
    varlog_appender_t *app;
    call_t *call;
    int64_t timeout_ms;
    varlog_err_t rc;
    char text[512];
} waiter_t;

static void *waiter_main(void *arg)
{
    waiter_t *w = arg;
    varlog_record_t one = cf_record("0123456789abcdef");
    w->rc = varlog_appender_append(w->app, &one, 1, w->timeout_ms, gated_cb, w->call);
    snprintf(w->text, sizeof(w->text), "%s", varlog_last_error());
    return NULL;
}

/* Appenders A (x->app) and B (returned) of one client, each bounded as the client to max
 * records, in batches of 4 that wait for their linger; A takes the whole client-wide bound in
 * max calls of one record (calls[0..max), of n), its first callback held at the gate. */
static varlog_appender_t *start_a_holding_bound(fixture_t *x, int max, call_t *calls, size_t n)
{
    char bound[16];
    snprintf(bound, sizeof(bound), "%d", max);
    fx_start(x, 2, 1, "appender.queue.max.records", bound, "appender.client.queue.max.records",
             bound, "appender.batch.max.records", "4", "appender.linger.ms", "60000", NULL);
    varlog_appender_t *b = new_appender(&x->f, 1, 2);
    calls_init(calls, n);
    varlog_record_t one = cf_record("0123456789abcdef");
    for (int i = 0; i < max; i++)
        assert_int_equal(varlog_appender_append(x->app, &one, 1, 0, gated_cb, &calls[i]),
                         VARLOG_OK);
    assert_true(gate_wait_entered(&x->g, 1, cf_wait_bound_ms()));
    return b;
}

/* Appender A takes the whole client-wide bound (8 records in two full batches, its first
 * callback held at the gate), which its own bound (8) allows: appender B, with nothing of
 * its own pending, is refused at once with timeout 0, naming the client-wide bound, and
 * with timeout -1 waits until A's batches settle, then queues. */
static void test_client_bound_across_appenders(void **state)
{
    (void)state;
    fixture_t x;
    call_t calls[10];
    varlog_appender_t *b = start_a_holding_bound(&x, 8, calls, 10), *a = x.app;
    varlog_record_t one = cf_record("0123456789abcdef");
    assert_int_equal(budget_records(x.f.client), 8);

    assert_int_equal(varlog_appender_append(b, &one, 1, 0, gated_cb, &calls[8]),
                     VARLOG_ERR_QUEUE_FULL);
    if (!strstr(varlog_last_error(), "appender.client.queue.max.records 8"))
        fail_msg("QUEUE_FULL of the client-wide bound said \"%s\"", varlog_last_error());
    varlog_appender_stats_t s = app_stats(b);
    assert_int_equal(s.queue_full, 1);
    assert_int_equal(s.queue_full_waits, 0);
    assert_int_equal(s.pending_records, 0);
    varlog_stats_t cs;
    assert_int_equal(varlog_stats_get(x.f.client, &cs), VARLOG_OK);
    assert_int_equal(cs.queue_full, 1);

    waiter_t w = {.app = b, .call = &calls[9], .timeout_ms = -1, .rc = VARLOG_ERR_INTERNAL};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, waiter_main, &w), 0);
    assert_true(test_wait_until(budget_waiting, x.f.client, cf_wait_bound_ms()));
    assert_int_equal(atomic_load(&calls[9].cbs), 0);
    gate_open(&x.g); /* A's batches settle: the bound is free again */
    pthread_join(th, NULL);
    if (w.rc != VARLOG_OK)
        fail_msg("B's waiting append: %s: %s", varlog_err_name(w.rc), w.text);
    s = app_stats(b);
    assert_int_equal(s.queue_full, 1);
    assert_int_equal(s.queue_full_waits, 1);
    assert_int_equal(app_stats(a).queue_full, 0);
    flush_ok(a);
    flush_ok(b);
    assert_int_equal(tracker_callbacks(&x.t), 9);
    assert_settled(calls, 8, VARLOG_OK);
    assert_int_equal(atomic_load(&calls[8].cbs), 0);
    assert_int_equal(atomic_load(&calls[9].cbs), 1);
    assert_int_equal(calls[9].err, VARLOG_OK);
    assert_int_equal(budget_records(x.f.client), 0);
    assert_int_equal(varlog_appender_close(&b, 1000), VARLOG_OK);
    fx_stop(&x);
}

/* The bytes bound, with a timed wait that ends in QUEUE_FULL: about its timeout, not at once
 * and not for ever. */
static void test_client_bound_bytes_timeout(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 2, 1, "appender.queue.max.bytes", "64", "appender.client.queue.max.bytes", "64",
             "appender.batch.max.bytes", "32", "append.record.max.bytes", "32",
             "appender.linger.ms", "60000", NULL);
    varlog_appender_t *a = x.app, *b = new_appender(&x.f, 1, 2);
    call_t calls[6];
    calls_init(calls, 6);
    varlog_record_t one = cf_record("0123456789abcdef"); /* 16 bytes */
    for (int i = 0; i < 4; i++)
        assert_int_equal(varlog_appender_append(a, &one, 1, 0, gated_cb, &calls[i]), VARLOG_OK);
    assert_true(gate_wait_entered(&x.g, 1, cf_wait_bound_ms()));
    int64_t t0 = test_now_ms();
    assert_int_equal(varlog_appender_append(b, &one, 1, 300, gated_cb, &calls[4]),
                     VARLOG_ERR_QUEUE_FULL);
    int64_t waited = test_now_ms() - t0;
    if (waited < 290 || waited > 300 + cf_wait_bound_ms())
        fail_msg("append with timeout 300 ms returned QUEUE_FULL after %lld ms", (long long)waited);
    assert_non_null(strstr(varlog_last_error(), "appender.client.queue.max.records"));
    varlog_appender_stats_t s = app_stats(b);
    assert_int_equal(s.queue_full, 1);
    assert_int_equal(s.queue_full_waits, 1);
    gate_open(&x.g);
    flush_ok(a);
    assert_int_equal(varlog_appender_append(b, &one, 1, 0, gated_cb, &calls[4]), VARLOG_OK);
    flush_ok(b);
    assert_int_equal(tracker_callbacks(&x.t), 5);
    assert_settled(calls, 5, VARLOG_OK);
    assert_int_equal(varlog_appender_close(&b, 1000), VARLOG_OK);
    fx_stop(&x);
}

/* ---- the wake-up that comes before the sleep --------------------------------------------- */

/* app_budget_wait_locked, wrapped at link time: armed, it lets the room come between the
 * producer's look at the bound (which found none) and its sleep, the window a wake-up is
 * lost in unless the wait looks again under the lock the waker takes. */
bool __real_app_budget_wait_locked(varlog_appender_t *app, uint64_t n, uint64_t bytes,
                                   const struct timespec *until);
bool __wrap_app_budget_wait_locked(varlog_appender_t *app, uint64_t n, uint64_t bytes,
                                   const struct timespec *until);

static atomic_bool g_hold_wait;
static gate_t *g_hold_gate;
static atomic_bool g_hold_done;

static bool budget_empty(void *arg)
{
    return budget_records(arg) == 0;
}

bool __wrap_app_budget_wait_locked(varlog_appender_t *app, uint64_t n, uint64_t bytes,
                                   const struct timespec *until)
{
    if (atomic_exchange(&g_hold_wait, false)) {
        gate_open(g_hold_gate);
        /* with this appender's mu held: the other appender settles without it */
        atomic_store(&g_hold_done, test_wait_until(budget_empty, app->c, cf_wait_bound_ms()));
    }
    return __real_app_budget_wait_locked(app, n, bytes, until);
}

static bool waiter_returned(void *arg)
{
    return atomic_load((atomic_bool *)arg);
}

typedef struct flagged_waiter {
    waiter_t w;
    atomic_bool returned;
} flagged_waiter_t;

static void *flagged_waiter_main(void *arg)
{
    flagged_waiter_t *f = arg;
    waiter_main(&f->w);
    atomic_store(&f->returned, true);
    return NULL;
}

/* A fills the client-wide bound; B's append finds no room, and A's batches settle (every
 * record of the bound given back, its wake-up sent) after B looked and before B sleeps: B
 * must still queue, not sleep for ever. */
static void test_client_bound_wakeup_before_sleep(void **state)
{
    (void)state;
    fixture_t x;
    call_t calls[9];
    varlog_appender_t *b = start_a_holding_bound(&x, 8, calls, 9);
    g_hold_gate = &x.g;
    atomic_store(&g_hold_done, false);
    atomic_store(&g_hold_wait, true);
    flagged_waiter_t f = {
        .w = {.app = b, .call = &calls[8], .timeout_ms = -1, .rc = VARLOG_ERR_INTERNAL}};
    atomic_init(&f.returned, false);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, flagged_waiter_main, &f), 0);
    bool returned = test_wait_until(waiter_returned, &f.returned, 2 * cf_wait_bound_ms());
    assert_false(atomic_load(&g_hold_wait)); /* the wrapper ran */
    assert_true(atomic_load(&g_hold_done));  /* A settled inside the window */
    if (!returned) {
        (void)varlog_appender_close(&b, 0); /* wakes it (CLOSED), so that the test ends */
        pthread_join(th, NULL);
        fail_msg("B's append slept through the wake-up of A's settle (then: %s)",
                 varlog_err_name(f.w.rc));
    }
    pthread_join(th, NULL);
    if (f.w.rc != VARLOG_OK)
        fail_msg("B's append: %s: %s", varlog_err_name(f.w.rc), f.w.text);
    assert_int_equal(app_stats(b).queue_full_waits, 1);
    flush_ok(b);
    assert_int_equal(tracker_callbacks(&x.t), 9);
    assert_settled(calls, 9, VARLOG_OK);
    assert_int_equal(varlog_appender_close(&b, 1000), VARLOG_OK);
    fx_stop(&x);
}

/* ---- a callback's append ---------------------------------------------------------------- */

typedef struct from_cb {
    varlog_appender_t *other;
    call_t *call;
    call_t *own_call;
    int64_t timeout_ms;
    varlog_err_t rc;
    int64_t took_ms;
    char text[512];
    atomic_bool done;
} from_cb_t;

static from_cb_t g_from;

/* The first callback of A, with every record of A pending (its own included): appends to B
 * with a long timeout. */
static void appending_cb(const varlog_append_result_t *r, void *opaque)
{
    from_cb_t *f = &g_from;
    if (!atomic_load(&f->done)) {
        varlog_record_t one = cf_record("0123456789abcdef");
        int64_t t0 = test_now_ms();
        f->rc = varlog_appender_append(f->other, &one, 1, f->timeout_ms, track_cb, f->call);
        f->took_ms = test_now_ms() - t0;
        snprintf(f->text, sizeof(f->text), "%s", varlog_last_error());
        atomic_store(&f->done, true);
    }
    track_cb(r, opaque);
}

static bool from_cb_done(void *arg)
{
    return atomic_load(&((from_cb_t *)arg)->done);
}

/* In a callback of A, the client-wide bound is full of A's calls, which only the callback's
 * return can give back: an append to B gets QUEUE_FULL at once whatever its timeout, where
 * a wait would last the whole timeout (and with -1, for ever). */
static void test_client_bound_callback_never_waits(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 2, 1, "appender.queue.max.records", "4", "appender.client.queue.max.records", "4",
             "appender.batch.max.records", "4", "appender.linger.ms", "60000", NULL);
    varlog_appender_t *a = x.app, *b = new_appender(&x.f, 1, 2);
    call_t calls[5];
    calls_init(calls, 5);
    memset(&g_from, 0, sizeof(g_from));
    g_from.other = b;
    g_from.call = &calls[4];
    g_from.timeout_ms = 4 * cf_wait_bound_ms();
    g_from.rc = VARLOG_ERR_INTERNAL;
    varlog_record_t one = cf_record("0123456789abcdef");
    for (int i = 0; i < 4; i++)
        assert_int_equal(varlog_appender_append(a, &one, 1, 0, appending_cb, &calls[i]), VARLOG_OK);
    assert_true(test_wait_until(from_cb_done, &g_from, 5 * cf_wait_bound_ms()));
    if (g_from.rc != VARLOG_ERR_QUEUE_FULL || g_from.took_ms > cf_wait_bound_ms() / 2)
        fail_msg("an append from A's callback to B with the client-wide bound full of A's calls: "
                 "%s after %lld ms (%s)",
                 varlog_err_name(g_from.rc), (long long)g_from.took_ms, g_from.text);
    assert_non_null(strstr(g_from.text, "appender.client.queue.max.records 4"));
    flush_ok(a);
    assert_int_equal(app_stats(b).queue_full, 1);
    assert_int_equal(app_stats(b).queue_full_waits, 0);
    assert_settled(calls, 4, VARLOG_OK);
    assert_int_equal(atomic_load(&calls[4].cbs), 0);
    assert_int_equal(varlog_appender_close(&b, 1000), VARLOG_OK);
    fx_stop(&x);
}

/* ---- many producers, several appenders, a small bound ------------------------------------- */

enum { APPS = 4, PRODUCERS = 8 };

typedef struct racer {
    varlog_appender_t **apps;
    call_t *calls;
    long per;
    int producer;
    uint64_t over; /* the client's appenders held more than the bound */
    long failures;
    atomic_bool *done;
} racer_t;

static void *racer_main(void *arg)
{
    racer_t *r = arg;
    char data[24];
    for (long i = 0; i < r->per; i++) {
        call_t *c = &r->calls[i];
        c->producer = r->producer;
        c->seq = i;
        /* one to four records of 24 bytes: waiters need different room */
        c->n = 1 + (size_t)((i + r->producer) % 4);
        varlog_record_t recs[4];
        memset(data, 'a' + r->producer, sizeof(data));
        for (size_t k = 0; k < c->n; k++)
            recs[k] = (varlog_record_t){data, sizeof(data)};
        /* each producer visits every appender in turn; a record's log stream keeps its
         * producer's calls in order there */
        varlog_appender_t *app = r->apps[(size_t)(i / 8 + r->producer) % APPS];
        varlog_err_t rc = varlog_appender_append(app, recs, c->n, -1, track_cb, c);
        if (rc != VARLOG_OK) {
            r->failures++;
            atomic_fetch_add(&c->cbs, 1); /* no callback will come: counted as settled */
        }
    }
    atomic_store(r->done, true);
    return NULL;
}

static bool all_done(void *arg)
{
    atomic_bool *done = arg;
    for (int p = 0; p < PRODUCERS; p++)
        if (!atomic_load(&done[p]))
            return false;
    return true;
}

/* Eight producers on four appenders, each appender's own bound as large as the client-wide
 * one (12 records, 200 bytes), linger 0: every append with timeout -1 is taken, whatever
 * the interleaving of settles and waits (a lost wake-up leaves a producer asleep, which the
 * bounded wait reports), and every accepted call has its one callback, APPENDED. */
static void test_client_bound_no_lost_wakeup(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, APPS, 1, "appender.queue.max.records", "12", "appender.queue.max.bytes", "200",
             "appender.client.queue.max.records", "12", "appender.client.queue.max.bytes", "200",
             "appender.batch.max.records", "4", "appender.batch.max.bytes", "100",
             "appender.linger.ms", "0", NULL);
    varlog_appender_t *apps[APPS] = {x.app};
    for (int i = 1; i < APPS; i++)
        apps[i] = new_appender(&x.f, 1, i + 1);
    long per = test_scale(3000, 30);
    call_t *calls = calloc((size_t)(PRODUCERS * per), sizeof(*calls));
    assert_non_null(calls);
    atomic_bool done[PRODUCERS];
    racer_t runs[PRODUCERS];
    pthread_t th[PRODUCERS];
    for (int p = 0; p < PRODUCERS; p++) {
        atomic_init(&done[p], false);
        runs[p] = (racer_t){apps, calls + p * per, per, p, 0, 0, &done[p]};
        assert_int_equal(pthread_create(&th[p], NULL, racer_main, &runs[p]), 0);
    }
    /* Progress is not a matter of speed: while any producer is still appending, something is
     * pending and settles. A wait far beyond the run's length means one slept through its
     * wake-up. */
    int64_t bound = 60000 + (test_under_valgrind() ? 240000 : 0);
    for (int64_t t0 = test_now_ms(); !all_done(done);) {
        if (test_now_ms() - t0 > bound) {
            fail_msg("producers still waiting after %lld ms: %zu waiting for the client-wide "
                     "bound, which holds %llu records",
                     (long long)bound, (size_t)atomic_load(&x.f.client->budget.waiters),
                     (unsigned long long)budget_records(x.f.client));
        }
        (void)test_wait_until(all_done, done, 1000);
    }
    for (int p = 0; p < PRODUCERS; p++) {
        pthread_join(th[p], NULL);
        assert_int_equal(runs[p].failures, 0);
    }
    for (int i = 0; i < APPS; i++)
        flush_ok(apps[i]);
    uint64_t waits = 0;
    for (int i = 0; i < APPS; i++)
        waits += app_stats(apps[i]).queue_full_waits;
    print_message("    %d producers x %ld calls on %d appenders: %llu waits for room\n", PRODUCERS,
                  per, APPS, (unsigned long long)waits);
    assert_int_equal(tracker_callbacks(&x.t), PRODUCERS * per);
    assert_settled(calls, (size_t)(PRODUCERS * per), VARLOG_OK);
    assert_int_equal(budget_records(x.f.client), 0);
    assert_int_equal(atomic_load(&x.f.client->budget.bytes), 0);
    for (int i = 1; i < APPS; i++)
        assert_int_equal(varlog_appender_close(&apps[i], 1000), VARLOG_OK);
    fx_stop(&x);
    free(calls);
}

/* Two producers on two appenders, each call as large as the client-wide bound, taking turns:
 * each call is made while the other producer's is pending, and the other makes its next only
 * once this one was taken, so each wait ends by exactly one settle's wake-up. One that slips
 * between a producer's look at the bound and its sleep leaves both waiting for good (the
 * bounded wait reports it). */
static struct {
    atu_sync_t sync;
    long turn; /* call i of producer p is made at turn 2 i + p */
} g_pong;

static void *pong_main(void *arg)
{
    racer_t *r = arg;
    varlog_record_t recs[4];
    for (size_t k = 0; k < 4; k++)
        recs[k] = cf_record("0123456789abcdef");
    for (long i = 0; i < r->per; i++) {
        if (!atu_wait_at_least(&g_pong.sync, &g_pong.turn, 2 * i + r->producer, 120000)) {
            r->failures++;
            break;
        }
        call_t *c = &r->calls[i];
        c->producer = r->producer;
        c->seq = i;
        c->n = 4;
        if (varlog_appender_append(r->apps[r->producer], recs, 4, -1, track_cb, c) != VARLOG_OK) {
            r->failures++;
            atomic_fetch_add(&c->cbs, 1);
        }
        pthread_mutex_lock(&g_pong.sync.mu);
        g_pong.turn++;
        pthread_cond_broadcast(&g_pong.sync.cv);
        pthread_mutex_unlock(&g_pong.sync.mu);
    }
    atomic_store(r->done, true);
    return NULL;
}

static bool pair_done(void *arg)
{
    atomic_bool *done = arg;
    return atomic_load(&done[0]) && atomic_load(&done[1]);
}

static void test_client_bound_ping_pong(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 2, 1, "appender.queue.max.records", "4", "appender.client.queue.max.records", "4",
             "appender.batch.max.records", "4", "appender.linger.ms", "0", NULL);
    varlog_appender_t *apps[2] = {x.app, new_appender(&x.f, 1, 2)};
    long per = test_scale(2000, 20);
    call_t *calls = calloc((size_t)(2 * per), sizeof(*calls));
    assert_non_null(calls);
    atu_sync_init(&g_pong.sync);
    g_pong.turn = 0;
    atomic_bool done[2];
    racer_t runs[2];
    pthread_t th[2];
    for (int p = 0; p < 2; p++) {
        atomic_init(&done[p], false);
        runs[p] = (racer_t){apps, calls + p * per, per, p, 0, 0, &done[p]};
        assert_int_equal(pthread_create(&th[p], NULL, pong_main, &runs[p]), 0);
    }
    int64_t bound = 60000 + (test_under_valgrind() ? 240000 : 0);
    for (int64_t t0 = test_now_ms(); !pair_done(done);) {
        if (test_now_ms() - t0 > bound)
            fail_msg("a producer still waiting after %lld ms: %zu waiting for the client-wide "
                     "bound, which holds %llu records",
                     (long long)bound, (size_t)atomic_load(&x.f.client->budget.waiters),
                     (unsigned long long)budget_records(x.f.client));
        (void)test_wait_until(pair_done, done, 1000);
    }
    for (int p = 0; p < 2; p++) {
        pthread_join(th[p], NULL);
        assert_int_equal(runs[p].failures, 0);
    }
    atu_sync_destroy(&g_pong.sync);
    flush_ok(apps[0]);
    flush_ok(apps[1]);
    uint64_t waits = app_stats(apps[0]).queue_full_waits + app_stats(apps[1]).queue_full_waits;
    print_message("    2 x %ld calls taking turns: %llu waits for room\n", per,
                  (unsigned long long)waits);
    assert_int_equal(tracker_callbacks(&x.t), 2 * per);
    assert_settled(calls, (size_t)(2 * per), VARLOG_OK);
    assert_int_equal(budget_records(x.f.client), 0);
    assert_int_equal(varlog_appender_close(&apps[1], 1000), VARLOG_OK);
    fx_stop(&x);
    free(calls);
}

/* A producer waiting for the client-wide bound on an appender that closes gets CLOSED: close
 * wakes it, though what it waits for is the client's and not the appender's. */
static void test_client_bound_waiter_woken_by_close(void **state)
{
    (void)state;
    fixture_t x;
    call_t calls[5];
    varlog_appender_t *b = start_a_holding_bound(&x, 4, calls, 5), *a = x.app;
    flagged_waiter_t f = {
        .w = {.app = b, .call = &calls[4], .timeout_ms = -1, .rc = VARLOG_ERR_INTERNAL}};
    atomic_init(&f.returned, false);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, flagged_waiter_main, &f), 0);
    assert_true(test_wait_until(budget_waiting, x.f.client, cf_wait_bound_ms()));
    /* B has nothing pending: its close returns at once, the waiter with CLOSED, while A's
     * calls still hold the bound. B is freed only once the waiter left it. */
    varlog_appender_t *held = b;
    app_ref(held); /* the waiter's: close must not free B under it */
    assert_int_equal(varlog_appender_close(&b, 1000), VARLOG_OK);
    bool woken = test_wait_until(waiter_returned, &f.returned, cf_wait_bound_ms());
    gate_open(&x.g); /* A settles: a waiter close did not wake returns now */
    pthread_join(th, NULL);
    app_unref(held);
    if (!woken)
        fail_msg("a producer waiting for the client-wide bound on an appender that closed was "
                 "not woken by the close (then: %s)",
                 varlog_err_name(f.w.rc));
    assert_int_equal(f.w.rc, VARLOG_ERR_CLOSED);
    assert_int_equal(atomic_load(&calls[4].cbs), 0);
    gate_open(&x.g);
    flush_ok(a);
    assert_settled(calls, 4, VARLOG_OK);
    fx_stop(&x);
}

/* ---- slots given back ------------------------------------------------------------------- */

static bool slots_back_to(void *arg)
{
    varlog_appender_t *app = ((void **)arg)[0];
    uint64_t want = *(uint64_t *)((void **)arg)[1];
    return app_stats(app).batch_slots <= want;
}

/* A burst with the callbacks held grows the transmit queue far beyond its initial slots; once
 * it settled, the added slots stay through a short pause (the steady state allocates
 * nothing), then go back within about APP_SLOT_IDLE_MS plus a round of the appender's
 * thread. A second burst grows it again, and every call of both has its callback,
 * APPENDED. */
static void test_grown_slots_released(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 1, 1, "appender.queue.max.records", "1000", "appender.batch.max.records", "10",
             "appender.linger.ms", "60000", NULL);
    varlog_appender_t *app = x.app;
    uint64_t initial = app_stats(app).batch_slots;
    enum { N = 500 };
    call_t *calls = calloc(2 * N, sizeof(*calls));
    assert_non_null(calls);
    calls_init(calls, 2 * N);
    varlog_record_t one = cf_record("0123456789abcdef");
    for (int round = 0; round < 2; round++) {
        call_t *c = calls + round * N;
        if (round == 1) {
            pthread_mutex_lock(&x.g.sync.mu);
            x.g.open = false;
            x.g.entered = 0;
            pthread_mutex_unlock(&x.g.sync.mu);
        }
        for (int i = 0; i < N; i++)
            assert_int_equal(varlog_appender_append(app, &one, 1, 0, gated_cb, &c[i]), VARLOG_OK);
        assert_true(gate_wait_entered(&x.g, 1, cf_wait_bound_ms()));
        varlog_appender_stats_t s = app_stats(app);
        if (s.batch_slots < N / 10)
            fail_msg("round %d: %llu slots for %d batches of 10 held (%llu initial)", round,
                     (unsigned long long)s.batch_slots, N / 10, (unsigned long long)initial);
        uint64_t released = s.batch_slots_released;
        uint64_t grown = s.batch_slots;
        int64_t t0 = test_now_ms();
        gate_open(&x.g);
        flush_ok(app);
        /* not at once (unless the settling itself took about the idle time: valgrind) */
        if (test_now_ms() - t0 < 500)
            assert_int_equal(app_stats(app).batch_slots, grown);
        void *arg[2] = {app, &initial};
        if (!test_wait_until(slots_back_to, arg, 1000 + cf_wait_bound_ms()))
            fail_msg("round %d: %llu slots %lld ms after the burst settled (%llu initial)", round,
                     (unsigned long long)app_stats(app).batch_slots,
                     (long long)(test_now_ms() - t0), (unsigned long long)initial);
        s = app_stats(app);
        assert_int_equal(s.batch_slots, initial);
        assert_int_equal(s.batch_slots_released - released, grown - initial);
        assert_int_equal(tracker_callbacks(&x.t), (round + 1) * N);
    }
    assert_settled(calls, 2 * N, VARLOG_OK);
    fx_stop(&x);
    free(calls);
}

/* An optional argument runs only the tests whose names match it (cmocka's pattern). */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_bound_across_appenders),
        cmocka_unit_test(test_client_bound_bytes_timeout),
        cmocka_unit_test(test_client_bound_callback_never_waits),
        cmocka_unit_test(test_client_bound_wakeup_before_sleep),
        cmocka_unit_test(test_client_bound_no_lost_wakeup),
        cmocka_unit_test(test_client_bound_ping_pong),
        cmocka_unit_test(test_client_bound_waiter_woken_by_close),
        cmocka_unit_test(test_grown_slots_released),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
