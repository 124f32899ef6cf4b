/* Closing subscriptions (varlog/subscribe.h) against the embedded server, from every thread
 * at the worst moments: from the test thread during a delivery, from another thread while a
 * handler blocks, from inside on_entry and on_end, while another thread waits in next; and
 * the client destroyed under open subscriptions (and refused from a handler). What a subscription
 * reads is in test_subscribe.c; what the two share is subscribe_fixture.h.
 *
 * Handlers run on the subscription's thread, where a cmocka assertion cannot stop the test:
 * they note what is wrong (atu_note_bad) and the test thread asserts that nothing was noted
 * (stu_verify does so first). */
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

#include "appender_test_util.h"
#include "client_fixture.h"
#include "subscribe_fixture.h"
#include "subscribe_test_util.h"
#include "test_support.h"
#include "varlog/subscribe.h"

/* ---- close --------------------------------------------------------------------------------- */

/* Closing from the test thread at different moments of a delivery: when close returns, no
 * handler runs or will run, and the subscription's thread is gone. */
static void test_close_during_delivery(void **state)
{
    (void)state;
    long n = test_scale(3000, 10);
    t_start(1, 2, n, NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, n, 0, 1);
    long at[] = {0, 1, n / 10, n / 2};
    for (size_t r = 0; r < sizeof(at) / sizeof(at[0]); r++) {
        stu_sink_free(&T.sink);
        stu_sink_init(&T.sink, n);
        subscribe_ok(1, 1, (uint64_t)n + 1, &T.sink, &T.sub);
        if (at[r] > 0)
            assert_true(stu_wait_n(&T.sink, at[r], bound_ms()));
        stu_close(&T.sink, &T.sub);
        assert_int_equal(test_await_thread_count_named("varlog-sub", 0, bound_ms()), 0);
        long got = stu_sink_n(&T.sink);
        /* keep the process busy a moment so that a stray handler would show */
        stu_sink_t probe;
        stu_sink_init(&probe, n);
        varlog_subscription_t *p = NULL;
        subscribe_iter_ok(1, 1, (uint64_t)n + 1, &p);
        assert_int_equal(stu_drain(p, &probe, n, bound_ms()), VARLOG_OK);
        varlog_subscription_close(&p);
        stu_sink_free(&probe);
        assert_int_equal(stu_sink_n(&T.sink), got);
        assert_int_equal(atomic_load(&T.sink.after_close), 0);
        atu_assert_nothing_bad();
        print_message("    closed after %ld of %ld entries\n", got, n);
    }
    t_finish();
}

typedef struct closer {
    varlog_subscription_t **sub;
    stu_sink_t *sink;
    atu_sync_t sync;
    bool returned;
    int64_t took_ms;
} closer_t;

static void *closer_main(void *arg)
{
    closer_t *c = arg;
    int64_t t0 = test_now_ms();
    varlog_subscription_close(c->sub);
    int64_t took = test_now_ms() - t0;
    atomic_store(&c->sink->closed, true);
    pthread_mutex_lock(&c->sync.mu);
    c->took_ms = took;
    c->returned = true;
    pthread_cond_broadcast(&c->sync.cv);
    pthread_mutex_unlock(&c->sync.mu);
    return NULL;
}

/* Close from another thread while on_entry is blocked: close waits for the handler to
 * return (it has not returned while the handler blocks), and no handler runs after. */
static void test_close_waits_for_handler(void **state)
{
    (void)state;
    t_start(1, 2, 100, NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, 50, 0, 1);
    T.sink.block_at = 5;
    subscribe_ok(1, 1, 51, &T.sink, &T.sub);
    assert_true(atu_wait_true(&T.sink.sync, &T.sink.blocked, bound_ms()));
    closer_t c = {.sub = &T.sub, .sink = &T.sink};
    atu_sync_init(&c.sync);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, closer_main, &c), 0);
    /* close must not return while the handler is inside on_entry */
    bool early = atu_wait_true(&c.sync, &c.returned, 300);
    release_sink(&T.sink);
    bool done = atu_wait_true(&c.sync, &c.returned, bound_ms());
    pthread_join(th, NULL);
    atu_sync_destroy(&c.sync);
    if (early)
        fail_msg("close returned while on_entry was still running");
    assert_true(done);
    assert_null(T.sub);
    assert_int_equal(atomic_load(&T.sink.in_handler), 0);
    assert_int_equal(test_await_thread_count_named("varlog-sub", 0, bound_ms()), 0);
    assert_int_equal(stu_sink_n(&T.sink), 5);
    assert_int_equal(T.sink.ends + T.sink.errors, 0);
    atu_assert_nothing_bad();
    t_finish();
}

static bool no_sub_thread(void *arg)
{
    (void)arg;
    return test_thread_count_named("varlog-sub") == 0;
}

/* varlog_subscription_close from inside on_entry (the 5th entry of a tail) returns, and no
 * handler runs after that one returned; from inside on_end too. */
static void test_close_from_handler(void **state)
{
    (void)state;
    t_start(1, 2, 100, NULL);
    T.sink.close_at = 5;
    varlog_subscription_t *sub = NULL;
    subscribe_ok(1, 1, VARLOG_GLSN_MAX, &T.sink, &sub);
    /* the handle belongs to the handler from here on */
    pthread_mutex_lock(&T.sink.sync.mu);
    T.sink.sub = sub;
    pthread_mutex_unlock(&T.sink.sync.mu);
    stu_append_n(T.f.client, &T.log, 1, 0, 50, 0, 1);
    if (!atu_wait_true(&T.sink.sync, &T.sink.self_closed, bound_ms()))
        fail_msg("close from on_entry did not return (%ld entries)", stu_sink_n(&T.sink));
    if (!test_wait_until(no_sub_thread, NULL, bound_ms()))
        fail_msg("the subscription's thread still runs after closing from its handler");
    assert_int_equal(stu_sink_n(&T.sink), 5);
    assert_int_equal(T.sink.ends + T.sink.errors, 0);
    atu_assert_nothing_bad();

    /* from on_end: the range is completed only once the handler holds the handle */
    T.sink2.close_in_end = true;
    sub = NULL;
    subscribe_ok(1, 51, 61, &T.sink2, &sub);
    pthread_mutex_lock(&T.sink2.sync.mu);
    T.sink2.sub = sub;
    pthread_mutex_unlock(&T.sink2.sync.mu);
    stu_append_n(T.f.client, &T.log, 1, 0, 10, 0, 2);
    if (!atu_wait_true(&T.sink2.sync, &T.sink2.self_closed, bound_ms()))
        fail_msg("close from on_end did not return (%ld entries, %ld ends)", stu_sink_n(&T.sink2),
                 T.sink2.ends);
    assert_true(test_wait_until(no_sub_thread, NULL, bound_ms()));
    assert_int_equal(T.sink2.ends, 1);
    stu_verify(&T.sink2, &T.log, 1, 0, 51, 10);
    t_finish();
}

typedef struct nexter {
    varlog_subscription_t *sub;
    atu_sync_t sync;
    bool returned;
    varlog_err_t rc;
} nexter_t;

static void *nexter_main(void *arg)
{
    nexter_t *x = arg;
    varlog_entry_t e;
    varlog_err_t rc = varlog_subscription_next(x->sub, -1, &e);
    pthread_mutex_lock(&x->sync.mu);
    x->rc = rc;
    x->returned = true;
    pthread_cond_broadcast(&x->sync.cv);
    pthread_mutex_unlock(&x->sync.mu);
    return NULL;
}

static bool next_sleeping(void *arg)
{
    return stu_next_sleeping(arg);
}

/* Close while another thread waits in varlog_subscription_next(-1) on an idle topic: the
 * waiter returns CLOSED, and close returns promptly. */
static void test_close_wakes_next(void **state)
{
    (void)state;
    t_start(1, 2, 10, NULL);
    subscribe_iter_ok(1, 1, VARLOG_GLSN_MAX, &T.sub2);
    nexter_t x = {.sub = T.sub2};
    atu_sync_init(&x.sync);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, nexter_main, &x), 0);
    bool sleeping = test_wait_until(next_sleeping, T.sub2, bound_ms());
    /* closed from a third thread, so that a close that never returns fails the test */
    closer_t c = {.sub = &T.sub2, .sink = &T.sink2};
    atu_sync_init(&c.sync);
    pthread_t cth;
    assert_int_equal(pthread_create(&cth, NULL, closer_main, &c), 0);
    if (!atu_wait_true(&c.sync, &c.returned, bound_ms()))
        fail_msg("close still runs after %lld ms while next waits (next returned: %d)",
                 (long long)bound_ms(), (int)x.returned);
    pthread_join(cth, NULL);
    atu_sync_destroy(&c.sync);
    bool returned = atu_wait_true(&x.sync, &x.returned, bound_ms());
    if (returned)
        pthread_join(th, NULL);
    else
        fail_msg("next still waits %lld ms after close returned", (long long)bound_ms());
    atu_sync_destroy(&x.sync);
    assert_true(sleeping);
    assert_null(T.sub2);
    if (x.rc != VARLOG_ERR_CLOSED)
        fail_msg("the waiting next returned %s, expected CLOSED", varlog_err_name(x.rc));
    print_message("    close took %lld ms\n", (long long)c.took_ms);
    if (c.took_ms > cf_wait_bound_ms())
        fail_msg("close took %lld ms", (long long)c.took_ms);
    t_finish();
}

/* varlog_client_destroy with subscriptions open (one delivering through handlers while it
 * runs, one iterator): no handler runs after destroy returned, the subscriptions' threads
 * are gone, and the handles still serve varlog_subscription_close (which frees them). */
static void test_destroy_with_open_subscriptions(void **state)
{
    (void)state;
    long n = test_scale(2000, 10);
    t_start(1, 2, n, NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, n, 0, 1);
    subscribe_ok(1, 1, VARLOG_GLSN_MAX, &T.sink, &T.sub);
    subscribe_iter_ok(1, 1, VARLOG_GLSN_MAX, &T.sub2);
    drain_ok(T.sub2, &T.sink2, 10);
    assert_true(stu_wait_n(&T.sink, 10, bound_ms()));
    varlog_client_destroy(T.f.client);
    T.f.client = NULL;
    atomic_store(&T.sink.closed, true);
    assert_int_equal(test_await_thread_count_named("varlog-sub", 0, bound_ms()), 0);
    assert_int_equal(atomic_load(&T.sink.in_handler), 0);
    varlog_subscription_close(&T.sub);
    varlog_subscription_close(&T.sub2);
    assert_null(T.sub);
    assert_null(T.sub2);
    assert_int_equal(atomic_load(&T.sink.after_close), 0);
    atu_assert_nothing_bad();
    t_finish();
}

typedef struct destroyer {
    varlog_client_t *client;
    stu_sink_t *sink;
    atu_sync_t sync;
    bool returned;
} destroyer_t;

static void *destroyer_main(void *arg)
{
    destroyer_t *d = arg;
    varlog_client_destroy(d->client);
    atomic_store(&d->sink->closed, true);
    atu_set_true(&d->sync, &d->returned);
    return NULL;
}

/* Destroys T's client on another thread while T.sink's handler is blocked: destroy must not
 * return while it blocks (what names the handler's state in the failure), and must return
 * once it is released. */
static void destroy_while_blocked(const char *while_what)
{
    destroyer_t d = {.client = T.f.client, .sink = &T.sink};
    T.f.client = NULL;
    atu_sync_init(&d.sync);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, destroyer_main, &d), 0);
    bool early = atu_wait_true(&d.sync, &d.returned, 300);
    release_sink(&T.sink);
    bool done = atu_wait_true(&d.sync, &d.returned, bound_ms());
    if (done)
        pthread_join(th, NULL);
    atu_sync_destroy(&d.sync);
    if (early)
        fail_msg("varlog_client_destroy returned while %s", while_what);
    if (!done)
        fail_msg("varlog_client_destroy still runs %lld ms after the handler returned",
                 (long long)bound_ms());
}

/* varlog_client_destroy while on_entry is blocked: it closes the subscription as close
 * does, so it returns only once the handler returned, and no handler runs after. */
static void test_destroy_waits_for_handler(void **state)
{
    (void)state;
    t_start(1, 2, 100, NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, 50, 0, 1);
    T.sink.block_at = 5;
    subscribe_ok(1, 1, VARLOG_GLSN_MAX, &T.sink, &T.sub);
    assert_true(atu_wait_true(&T.sink.sync, &T.sink.blocked, bound_ms()));
    destroy_while_blocked("on_entry was still running");
    assert_int_equal(test_await_thread_count_named("varlog-sub", 0, bound_ms()), 0);
    assert_int_equal(atomic_load(&T.sink.in_handler), 0);
    assert_int_equal(stu_sink_n(&T.sink), 5);
    varlog_subscription_close(&T.sub);
    assert_null(T.sub);
    atu_assert_nothing_bad();
    t_finish();
}

/* Issue 19, point 2.1: a handler closes its own subscription, then, while it still runs, the
 * application destroys the client. Destroy joins the subscription's thread (client.h): it
 * returns only once the handler returned, and the thread never touches the freed client (it
 * did: destroy returned at once, and the thread then read the client; valgrind: invalid read
 * in ls_failed). */
static void test_destroy_after_close_from_handler(void **state)
{
    (void)state;
    t_start(1, 2, 100, NULL);
    T.sink.close_at = 5;
    T.sink.block_after_close = true;
    varlog_subscription_t *sub = NULL;
    subscribe_ok(1, 1, VARLOG_GLSN_MAX, &T.sink, &sub);
    pthread_mutex_lock(&T.sink.sync.mu);
    T.sink.sub = sub;
    pthread_mutex_unlock(&T.sink.sync.mu);
    stu_append_n(T.f.client, &T.log, 1, 0, 50, 0, 1);
    assert_true(atu_wait_true(&T.sink.sync, &T.sink.blocked, bound_ms()));
    assert_true(T.sink.self_closed);
    destroy_while_blocked("the self-closed handler still ran");
    assert_int_equal(test_await_thread_count_named("varlog-sub", 0, bound_ms()), 0);
    assert_int_equal(atomic_load(&T.sink.in_handler), 0);
    assert_int_equal(stu_sink_n(&T.sink), 5);
    atu_assert_nothing_bad();
    t_finish();
}

/* Joins of subscription threads, seen through pthread_join and pthread_setname_np wrapped at
 * link time (CMakeLists.txt): a thread is a subscription's once it is named "varlog-sub", by
 * whichever thread names it. An exited thread that nobody joined leaves /proc/self/task all
 * the same, so only the join itself shows that the library joined it. */
int __real_pthread_join(pthread_t th, void **ret);
int __real_pthread_setname_np(pthread_t th, const char *name);
int __wrap_pthread_join(pthread_t th, void **ret);
int __wrap_pthread_setname_np(pthread_t th, const char *name);

#define SUB_THREADS_MAX 256
static pthread_mutex_t sub_threads_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t sub_threads[SUB_THREADS_MAX];
static int n_sub_threads;
static long sub_joins;

int __wrap_pthread_setname_np(pthread_t th, const char *name)
{
    if (strcmp(name, "varlog-sub") == 0) {
        pthread_mutex_lock(&sub_threads_mu);
        bool known = false;
        for (int i = 0; i < n_sub_threads && !known; i++)
            known = pthread_equal(sub_threads[i], th);
        if (!known && n_sub_threads < SUB_THREADS_MAX)
            sub_threads[n_sub_threads++] = th;
        pthread_mutex_unlock(&sub_threads_mu);
    }
    return __real_pthread_setname_np(th, name);
}

int __wrap_pthread_join(pthread_t th, void **ret)
{
    int rc = __real_pthread_join(th, ret);
    if (rc == 0) {
        /* Forgotten once joined: a later thread may be given the same pthread_t. */
        pthread_mutex_lock(&sub_threads_mu);
        for (int i = 0; i < n_sub_threads; i++)
            if (pthread_equal(sub_threads[i], th)) {
                sub_threads[i] = sub_threads[--n_sub_threads];
                sub_joins++;
                break;
            }
        pthread_mutex_unlock(&sub_threads_mu);
    }
    return rc;
}

static long sub_joins_now(void)
{
    pthread_mutex_lock(&sub_threads_mu);
    long n = sub_joins;
    pthread_mutex_unlock(&sub_threads_mu);
    return n;
}

/* Subscriptions closed from their handlers are joined without a client destroy too: their
 * threads do not pile up while the client lives. Each round's subscribe joins the thread of
 * the round before, whose handler closed it and which has exited (awaited below). */
static void test_close_from_handler_many(void **state)
{
    (void)state;
    t_start(1, 1, 100, NULL);
    long joins0 = sub_joins_now();
    for (int i = 0; i < 20; i++) {
        stu_sink_t s;
        stu_sink_init(&s, 8);
        s.close_at = 1;
        varlog_subscription_t *sub = NULL;
        subscribe_ok(1, (uint64_t)i + 1, VARLOG_GLSN_MAX, &s, &sub);
        long joined = sub_joins_now() - joins0;
        if (joined < i)
            fail_msg("round %d: %ld of the %d subscriptions closed from their handlers were "
                     "joined while the client lives",
                     i, joined, i);
        pthread_mutex_lock(&s.sync.mu);
        s.sub = sub;
        pthread_mutex_unlock(&s.sync.mu);
        stu_append_n(T.f.client, &T.log, 1, 0, 1, 0, 1); /* GLSN i + 1, its first entry */
        if (!atu_wait_true(&s.sync, &s.self_closed, bound_ms()))
            fail_msg("close from on_entry did not return (round %d)", i);
        assert_true(test_wait_until(no_sub_thread, NULL, bound_ms()));
        stu_sink_free(&s);
    }
    atu_assert_nothing_bad();
    t_finish();
}

typedef struct self_destroyer {
    varlog_client_t *client;
    atu_sync_t sync;
    long entries;
    bool destroy_returned;
    char text[256];
} self_destroyer_t;

static void destroy_on_first_entry(const varlog_entry_t *e, void *opaque)
{
    (void)e;
    self_destroyer_t *d = opaque;
    if (d->entries == 0) {
        varlog_client_destroy(d->client);
        pthread_mutex_lock(&d->sync.mu);
        snprintf(d->text, sizeof d->text, "%s", varlog_last_error());
        d->destroy_returned = true;
        pthread_mutex_unlock(&d->sync.mu);
    }
    pthread_mutex_lock(&d->sync.mu);
    d->entries++;
    pthread_cond_broadcast(&d->sync.cv);
    pthread_mutex_unlock(&d->sync.mu);
}

/* varlog_client_destroy from a handler would join the thread it runs on: it is refused
 * (STATE, the client kept), the subscription goes on delivering, and the client is destroyed
 * from the test thread afterwards as usual. */
static void test_destroy_from_handler_refused(void **state)
{
    (void)state;
    t_start(1, 2, 100, NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, 20, 0, 1);
    self_destroyer_t d = {.client = T.f.client};
    atu_sync_init(&d.sync);
    varlog_subscribe_handlers_t h = {.on_entry = destroy_on_first_entry, .opaque = &d};
    assert_int_equal(varlog_subscribe(T.f.client, 1, 1, 21, &h, &T.sub), VARLOG_OK);
    if (!atu_wait_at_least(&d.sync, &d.entries, 20, bound_ms()))
        fail_msg("after a destroy from the handler: %ld of 20 entries", d.entries);
    assert_true(d.destroy_returned);
    if (!strstr(d.text, "own threads"))
        fail_msg("destroy from a handler: last error '%s'", d.text);
    /* The client still serves calls. */
    stu_append_n(T.f.client, &T.log, 1, 0, 1, 0, 2);
    varlog_subscription_close(&T.sub);
    atu_sync_destroy(&d.sync);
    atu_assert_nothing_bad();
    t_finish();
}

/* An optional argument runs only the tests whose names match it (cmocka's pattern). */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_close_during_delivery, teardown),
        cmocka_unit_test_teardown(test_close_waits_for_handler, teardown),
        cmocka_unit_test_teardown(test_close_from_handler, teardown),
        cmocka_unit_test_teardown(test_close_wakes_next, teardown),
        cmocka_unit_test_teardown(test_destroy_with_open_subscriptions, teardown),
        cmocka_unit_test_teardown(test_destroy_waits_for_handler, teardown),
        cmocka_unit_test_teardown(test_destroy_after_close_from_handler, teardown),
        cmocka_unit_test_teardown(test_close_from_handler_many, teardown),
        cmocka_unit_test_teardown(test_destroy_from_handler_refused, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
