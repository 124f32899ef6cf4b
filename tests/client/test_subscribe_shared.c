/* Handler-form subscriptions sharing threads (subscribe.handler.threads, issue 37): with one
 * shared thread, many subscriptions of one client each get every entry once and in order,
 * the process gains one varlog-sub thread rather than one per subscription, a handler that
 * blocks holds the others back without losing or reordering their entries, a close from a
 * handler (of its own or of another subscription of the thread) returns at once and no
 * handler of a closed subscription runs after its close returned, closes from several
 * threads race entries streaming in, and a subscription rides out dropped streams as a
 * subscription with its own thread does.
 *
 * Handlers run on the shared thread, where a cmocka assertion cannot stop the test: they
 * note what is wrong (atu_note_bad) and the test thread asserts nothing was noted. */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "appender_test_util.h"
#include "client_fixture.h"
#include "subscribe_test_util.h"
#include "test_support.h"
#include "varlog/subscribe.h"

/* At least 16 subscriptions on one client (the "many handles"). */
#define SUBS 20
#define TOPIC 1

typedef struct t {
    client_fixture_t f;
    stu_log_t log;
    stu_sink_t sink[SUBS];
    varlog_subscription_t *sub[SUBS];
    bool started;
} t_t;

/* Not on a test's stack: the teardown of a failed test still reaches it. */
static t_t T;

static void t_start(long cap, const char *threads)
{
    memset(&T, 0, sizeof(T));
    cf_start(&T.f, 1, 2, "subscribe.handler.threads", threads, NULL);
    stu_log_init(&T.log, (size_t)cap + 64);
    for (int i = 0; i < SUBS; i++)
        stu_sink_init(&T.sink[i], cap);
    atu_bad_reset();
    T.started = true;
}

static void t_finish(void)
{
    for (int i = 0; i < SUBS; i++)
        atu_set_true(&T.sink[i].sync, &T.sink[i].release);
    /* The client's destroy closes what is still open (and joins the shared thread); the
     * handles then only serve close. */
    cf_stop(&T.f);
    for (int i = 0; i < SUBS; i++)
        varlog_subscription_close(&T.sub[i]);
    stu_log_free(&T.log);
    for (int i = 0; i < SUBS; i++)
        stu_sink_free(&T.sink[i]);
    T.started = false;
}

static int teardown(void **state)
{
    (void)state;
    if (T.started)
        t_finish();
    return 0;
}

static int64_t bound_ms(void)
{
    return 3 * cf_wait_bound_ms();
}

/* Threads of this process named name. */
static int threads_named(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (de->d_name[0] == '.')
            continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* it ended meanwhile */
        if (fgets(comm, sizeof(comm), f))
            comm[strcspn(comm, "\n")] = '\0';
        fclose(f);
        n += strcmp(comm, name) == 0;
    }
    closedir(d);
    return n;
}

static bool no_varlog_sub(void *arg)
{
    (void)arg;
    return threads_named("varlog-sub") == 0;
}

static void subscribe_ok(int i, uint64_t begin, uint64_t end, const varlog_subscribe_handlers_t *h)
{
    varlog_err_t rc = varlog_subscribe(T.f.client, TOPIC, begin, end, h, &T.sub[i]);
    if (rc != VARLOG_OK)
        fail_msg("varlog_subscribe %d: %s: %s", i, varlog_err_name(rc), varlog_last_error());
}

static void subscribe_all(uint64_t end)
{
    for (int i = 0; i < SUBS; i++) {
        varlog_subscribe_handlers_t h = stu_handlers(&T.sink[i]);
        subscribe_ok(i, 1, end, &h);
    }
}

static void wait_all(long n)
{
    for (int i = 0; i < SUBS; i++)
        if (!stu_wait_n(&T.sink[i], n, bound_ms()) || !stu_wait_done(&T.sink[i], bound_ms()))
            fail_msg("subscription %d: %ld of %ld entries, done %d", i, stu_sink_n(&T.sink[i]), n,
                     T.sink[i].done);
}

/* ---- every entry once, in order; one thread --------------------------------------------- */

static void test_many_in_order(void **state)
{
    (void)state;
    const long n = 600;
    t_start(n, "1");
    int before = threads_named("varlog-sub");
    subscribe_all((uint64_t)n + 1);
    /* Tailing: the entries come while the subscriptions wait, from both log streams. The
     * threads are counted midway, while every subscription runs (a subscription's own
     * thread ends with its range). */
    stu_append_n(T.f.client, &T.log, TOPIC, 0, n / 2, 0, 1);
    for (int i = 0; i < SUBS; i++)
        assert_true(stu_wait_n(&T.sink[i], n / 2, bound_ms()));
    int during = threads_named("varlog-sub");
    stu_append_n(T.f.client, &T.log, TOPIC, 0, n / 2, 0, 11);
    wait_all(n);
    for (int i = 0; i < SUBS; i++) {
        stu_verify(&T.sink[i], &T.log, TOPIC, 0, 1, n);
        assert_int_equal(T.sink[i].ends, 1);
        assert_int_equal(T.sink[i].errors, 0);
    }
    print_message("    varlog-sub threads: %d before, %d with %d subscriptions open\n", before,
                  during, SUBS);
    assert_true(during - before <= 1);
    for (int i = 0; i < SUBS; i++)
        stu_close(&T.sink[i], &T.sub[i]);
    /* Its last subscription closed: the shared thread ends. */
    assert_true(test_wait_until(no_varlog_sub, NULL, bound_ms()));
    /* A new subscription starts one again. */
    varlog_subscribe_handlers_t h = stu_handlers(&T.sink[0]);
    stu_sink_free(&T.sink[0]);
    stu_sink_init(&T.sink[0], n);
    subscribe_ok(0, 1, (uint64_t)n + 1, &h);
    assert_true(stu_wait_done(&T.sink[0], bound_ms()));
    stu_verify(&T.sink[0], &T.log, TOPIC, 0, 1, n);
    assert_int_equal(threads_named("varlog-sub"), 1);
    t_finish();
}

/* Two threads: the subscriptions spread over both, never more. */
static void test_two_threads(void **state)
{
    (void)state;
    const long n = 200;
    t_start(n, "2");
    subscribe_all((uint64_t)n + 1);
    stu_append_n(T.f.client, &T.log, TOPIC, 0, n / 2, 0, 2);
    for (int i = 0; i < SUBS; i++)
        assert_true(stu_wait_n(&T.sink[i], n / 2, bound_ms()));
    int during = threads_named("varlog-sub");
    stu_append_n(T.f.client, &T.log, TOPIC, 0, n / 2, 0, 12);
    wait_all(n);
    for (int i = 0; i < SUBS; i++)
        stu_verify(&T.sink[i], &T.log, TOPIC, 0, 1, n);
    assert_int_equal(during, 2);
    t_finish();
}

/* ---- a handler that blocks ----------------------------------------------------------------- */

static void test_blocked_handler(void **state)
{
    (void)state;
    const long n = 400;
    t_start(n, "1");
    T.sink[3].block_at = 10;
    subscribe_all((uint64_t)n + 1);
    stu_append_n(T.f.client, &T.log, TOPIC, 0, n / 2, 0, 3);
    assert_true(atu_wait_true(&T.sink[3].sync, &T.sink[3].blocked, bound_ms()));
    /* More while the thread is held: the storage node's messages wait in the connections. */
    stu_append_n(T.f.client, &T.log, TOPIC, 0, n / 2, 0, 4);
    long held[SUBS];
    for (int i = 0; i < SUBS; i++)
        held[i] = stu_sink_n(&T.sink[i]);
    assert_int_equal(held[3], 10);
    atu_set_true(&T.sink[3].sync, &T.sink[3].release);
    wait_all(n);
    for (int i = 0; i < SUBS; i++) {
        stu_verify(&T.sink[i], &T.log, TOPIC, 0, 1, n);
        assert_int_equal(T.sink[i].ends, 1);
    }
    t_finish();
}

/* ---- closes from handlers ------------------------------------------------------------------ */

/* A handler that closes another subscription of the thread at its entry `at`. */
typedef struct closer {
    stu_sink_t *sink; /* its own entries */
    long at;
    varlog_subscription_t *victim;
    stu_sink_t *victim_sink;
    bool closed; /* the close returned (sink->sync.mu) */
} closer_t;

static closer_t C;

static void closer_on_entry(const varlog_entry_t *e, void *opaque)
{
    closer_t *c = opaque;
    stu_handlers(c->sink).on_entry(e, c->sink);
    if (stu_sink_n(c->sink) != c->at)
        return;
    varlog_subscription_close(&c->victim);
    if (c->victim)
        atu_note_bad("close from another subscription's handler left the handle set");
    /* From here no handler of the victim may begin. */
    atomic_store(&c->victim_sink->closed, true);
    if (atomic_load(&c->victim_sink->in_handler) != 0)
        atu_note_bad("the victim's handler runs while the close returned");
    atu_set_true(&c->sink->sync, &c->closed);
}

static void closer_on_end(void *opaque)
{
    closer_t *c = opaque;
    stu_handlers(c->sink).on_end(c->sink);
}

static void test_close_from_handlers(void **state)
{
    (void)state;
    const long n = 300;
    t_start(n, "1");
    /* 0 closes itself at its 5th entry; 1 closes 2 at its 7th; 4 closes itself in on_end. */
    T.sink[0].close_at = 5;
    T.sink[4].close_in_end = true;
    C = (closer_t){.sink = &T.sink[1], .at = 7, .victim_sink = &T.sink[2]};
    for (int i = 0; i < SUBS; i++) {
        varlog_subscribe_handlers_t h = stu_handlers(&T.sink[i]);
        if (i == 1)
            h = (varlog_subscribe_handlers_t){closer_on_entry, closer_on_end, NULL, &C};
        subscribe_ok(i, 1, (uint64_t)n + 1, &h);
    }
    /* The handlers own those handles now (set before any entry exists). */
    T.sink[0].sub = T.sub[0];
    T.sink[4].sub = T.sub[4];
    C.victim = T.sub[2];
    T.sub[0] = T.sub[2] = T.sub[4] = NULL;
    stu_append_n(T.f.client, &T.log, TOPIC, 0, n, 0, 5);
    assert_true(atu_wait_true(&T.sink[0].sync, &T.sink[0].self_closed, bound_ms()));
    assert_true(atu_wait_true(&T.sink[1].sync, &C.closed, bound_ms()));
    assert_true(atu_wait_true(&T.sink[4].sync, &T.sink[4].self_closed, bound_ms()));
    for (int i = 0; i < SUBS; i++) {
        if (i == 0 || i == 2)
            continue;
        assert_true(stu_wait_done(&T.sink[i], bound_ms()));
        stu_verify(&T.sink[i], &T.log, TOPIC, 0, 1, n);
    }
    stu_verify(&T.sink[0], &T.log, TOPIC, 0, 1, 5);
    assert_int_equal(stu_sink_n(&T.sink[0]), 5);
    long victim = stu_sink_n(&T.sink[2]);
    stu_verify(&T.sink[2], &T.log, TOPIC, 0, 1, victim);
    assert_int_equal(atomic_load(&T.sink[2].after_close), 0);
    /* The self-closed ones are gone from the client: a new subscribe still works, and the
     * thread goes on. */
    stu_sink_t extra;
    stu_sink_init(&extra, n);
    varlog_subscribe_handlers_t h = stu_handlers(&extra);
    varlog_subscription_t *s = NULL;
    assert_int_equal(varlog_subscribe(T.f.client, TOPIC, 1, (uint64_t)n + 1, &h, &s), VARLOG_OK);
    assert_true(stu_wait_done(&extra, bound_ms()));
    stu_verify(&extra, &T.log, TOPIC, 0, 1, n);
    stu_close(&extra, &s);
    stu_sink_free(&extra);
    atu_assert_nothing_bad();
    t_finish();
}

/* ---- closes from several threads while entries stream ------------------------------------- */

#define CLOSERS 4

typedef struct close_job {
    int first; /* closes subscriptions first, first + CLOSERS, ... */
} close_job_t;

static void *close_main(void *arg)
{
    close_job_t *j = arg;
    for (int i = j->first; i < SUBS; i += CLOSERS) {
        stu_sink_t *s = &T.sink[i];
        /* Mid-stream: after some entries came. */
        if (!stu_wait_n(s, 1 + i * 3, bound_ms()))
            atu_note_bad("subscription %d: no entry before its close", i);
        varlog_subscription_close(&T.sub[i]);
        atomic_store(&s->closed, true);
        if (atomic_load(&s->in_handler) != 0)
            atu_note_bad("subscription %d: a handler runs after its close returned", i);
    }
    return NULL;
}

static void test_close_concurrently(void **state)
{
    (void)state;
    const long n = 3000;
    t_start(n, "1");
    subscribe_all(VARLOG_GLSN_MAX);
    stu_producer_t p = {
        .client = T.f.client, .topic = TOPIC, .id = 6, .calls = 1000, .log = &T.log};
    assert_true(stu_producer_records(&p) <= n);
    stu_producer_start(&p);
    pthread_t th[CLOSERS];
    close_job_t jobs[CLOSERS];
    for (int k = 0; k < CLOSERS; k++) {
        jobs[k].first = k;
        assert_int_equal(pthread_create(&th[k], NULL, close_main, &jobs[k]), 0);
    }
    for (int k = 0; k < CLOSERS; k++)
        pthread_join(th[k], NULL);
    stu_producer_join(&p);
    for (int i = 0; i < SUBS; i++) {
        assert_null(T.sub[i]);
        stu_verify(&T.sink[i], &T.log, TOPIC, 0, 1, stu_sink_n(&T.sink[i]));
        assert_int_equal(atomic_load(&T.sink[i].after_close), 0);
    }
    assert_true(test_wait_until(no_varlog_sub, NULL, bound_ms()));
    t_finish();
}

/* ---- a storage fault ------------------------------------------------------------------------ */

static void test_dropped_streams_reconnect(void **state)
{
    (void)state;
    const long n = 400;
    t_start(n, "1");
    /* The next 6 Subscribe streams break after 30 entries, and 4 opens after them fail. */
    assert_int_equal(varlog_server_drop_stream_after(T.f.srv, STU_PATH_SUBSCRIBE, 30, 6),
                     VARLOG_OK);
    subscribe_all((uint64_t)n + 1);
    stu_append_n(T.f.client, &T.log, TOPIC, 0, n / 2, 0, 7);
    assert_int_equal(
        varlog_server_fail_next(T.f.srv, STU_PATH_SUBSCRIBE, 14, "injected unavailable", 4),
        VARLOG_OK);
    stu_append_n(T.f.client, &T.log, TOPIC, 0, n / 2, 0, 8);
    wait_all(n);
    uint64_t resubscribes = 0;
    for (int i = 0; i < SUBS; i++) {
        stu_verify(&T.sink[i], &T.log, TOPIC, 0, 1, n);
        assert_int_equal(T.sink[i].errors, 0);
        resubscribes += stu_stats(T.sub[i]).resubscribes;
    }
    print_message("    resubscribes: %llu\n", (unsigned long long)resubscribes);
    assert_true(resubscribes >= 6);
    t_finish();
}

static bool all_resubscribed(void *arg)
{
    (void)arg;
    for (int i = 0; i < SUBS; i++) {
        varlog_subscription_stats_t st;
        if (varlog_subscription_stats(T.sub[i], &st) != VARLOG_OK || st.resubscribes == 0)
            return false;
    }
    return true;
}

/* The server stops under 20 tailing subscriptions and comes back: every stream of every
 * subscription broke at once, and each one reconnects and delivers every entry once. */
static void test_restart(void **state)
{
    (void)state;
    const long before = 100, after = 100;
    memset(&T, 0, sizeof(T));
    cf_start(&T.f, 1, 2, "subscribe.handler.threads", "1", "subscribe.retry.backoff.ms", "5",
             "subscribe.retry.backoff.max.ms", "100", "append.retries", "50",
             "append.retry.backoff.ms", "5", "append.retry.backoff.max.ms", "100", NULL);
    stu_log_init(&T.log, (size_t)(before + after) + 64);
    for (int i = 0; i < SUBS; i++)
        stu_sink_init(&T.sink[i], before + after);
    atu_bad_reset();
    T.started = true;
    subscribe_all(VARLOG_GLSN_MAX);
    stu_append_n(T.f.client, &T.log, TOPIC, 0, before, 0, 9);
    for (int i = 0; i < SUBS; i++)
        assert_true(stu_wait_n(&T.sink[i], before, bound_ms()));
    assert_int_equal(varlog_server_stop(T.f.srv), VARLOG_OK);
    /* The outage is felt by every subscription before the server comes back. */
    assert_true(test_wait_until(all_resubscribed, NULL, bound_ms()));
    assert_int_equal(varlog_server_restart(T.f.srv), VARLOG_OK);
    stu_append_n(T.f.client, &T.log, TOPIC, 0, after, 0, 10);
    for (int i = 0; i < SUBS; i++) {
        if (!stu_wait_n(&T.sink[i], before + after, bound_ms()))
            fail_msg("subscription %d: %ld of %ld entries after the restart", i,
                     stu_sink_n(&T.sink[i]), before + after);
        stu_verify(&T.sink[i], &T.log, TOPIC, 0, 1, before + after);
        assert_int_equal(T.sink[i].ends + T.sink[i].errors, 0);
    }
    t_finish();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_many_in_order, teardown),
        cmocka_unit_test_teardown(test_two_threads, teardown),
        cmocka_unit_test_teardown(test_blocked_handler, teardown),
        cmocka_unit_test_teardown(test_close_from_handlers, teardown),
        cmocka_unit_test_teardown(test_close_concurrently, teardown),
        cmocka_unit_test_teardown(test_dropped_streams_reconnect, teardown),
        cmocka_unit_test_teardown(test_restart, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
