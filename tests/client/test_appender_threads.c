/* Appenders on shared threads (appender.threads, issue 37): what appender.h promises of that
 * mode beyond what the appender's suites check again in it (their _shared copies): how many
 * threads run, that a callback which blocks holds back only what shares its thread and loses
 * nothing, that a callback cannot wait for an appender of its own thread, and that appenders
 * opening and closing from many threads while others append settle every call once. */
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
#include "client_fixture.h"
#include "test_support.h"
#include "varlog/appender.h"

#define THREAD_NAME "varlog-appender"

static void append_calls(varlog_appender_t *app, call_t *calls, size_t n, int producer)
{
    varlog_record_t one = cf_record("0123456789abcdef");
    for (size_t i = 0; i < n; i++) {
        calls[i].producer = producer;
        assert_int_equal(varlog_appender_append(app, &one, 1, -1, track_cb, &calls[i]), VARLOG_OK);
    }
}

/* appender.threads 2: five appenders run on two threads, which outlive the appenders' close
 * and end with the client. */
static void test_appenders_share_threads(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 4, 1, "appender.threads", "2", NULL);
    varlog_appender_t *more[4];
    for (int i = 0; i < 4; i++)
        more[i] = new_appender(&x.f, 1, i < 3 ? i + 2 : 0);
    assert_int_equal(test_thread_count_named(THREAD_NAME), 2);
    /* Each of them works on its thread. */
    call_t calls[5][20];
    for (int i = 0; i < 5; i++) {
        calls_init(calls[i], 20);
        append_calls(i == 0 ? x.app : more[i - 1], calls[i], 20, i);
    }
    flush_ok(x.app);
    for (int i = 0; i < 4; i++)
        flush_ok(more[i]);
    for (int i = 0; i < 5; i++)
        assert_settled(calls[i], 20, VARLOG_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(varlog_appender_close(&more[i], 1000), VARLOG_OK);
    assert_int_equal(varlog_appender_close(&x.app, 1000), VARLOG_OK);
    assert_int_equal(test_thread_count_named(THREAD_NAME), 2);
    /* A new appender goes to one of them. */
    x.app = new_appender(&x.f, 1, 1);
    assert_int_equal(test_thread_count_named(THREAD_NAME), 2);
    fx_stop(&x);
    assert_int_equal(test_await_thread_count_named(THREAD_NAME, 0, cf_wait_bound_ms()), 0);
}

/* One shared thread: a callback of one appender held at a gate holds back the other
 * appender's callbacks (the price the mode states), and once it returns every call of both
 * settles, once, in order, stored. */
static void test_blocking_callback_holds_back_its_thread_only(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 2, 1, "appender.threads", "1", "appender.linger.ms", "0", NULL);
    varlog_appender_t *other = new_appender(&x.f, 1, 2);
    call_t held[1], later[50];
    calls_init(held, 1);
    calls_init(later, 50);
    varlog_record_t one = cf_record("held");
    assert_int_equal(varlog_appender_append(x.app, &one, 1, -1, gated_cb, &held[0]), VARLOG_OK);
    assert_true(gate_wait_entered(&x.g, 1, cf_wait_bound_ms()));
    append_calls(other, later, 50, 1);
    /* The thread is in the held callback: the other appender's calls wait, queued, for the
     * thread that sends them and runs their callbacks. */
    assert_int_equal(tracker_callbacks(&x.t), 0);
    varlog_appender_stats_t st = app_stats(other);
    assert_int_equal(st.pending_calls, 50);
    gate_open(&x.g);
    flush_ok(other);
    flush_ok(x.app);
    assert_settled(held, 1, VARLOG_OK);
    assert_settled(later, 50, VARLOG_OK);
    assert_int_equal(varlog_appender_close(&other, 1000), VARLOG_OK);
    fx_stop(&x);
}

/* What a callback calls on another appender of its thread. */
typedef struct cross {
    varlog_appender_t *target;
    varlog_err_t fill_rc, full_rc, flush_rc, close_rc;
    int64_t full_took_ms;
    atomic_int filled_cbs;
    atomic_bool done;
} cross_t;

static void count_cb(const varlog_append_result_t *r, void *opaque)
{
    (void)r;
    atomic_fetch_add(&((cross_t *)opaque)->filled_cbs, 1);
}

static void cross_cb(const varlog_append_result_t *r, void *opaque)
{
    (void)r;
    cross_t *c = opaque;
    varlog_record_t one = cf_record("x");
    /* The target's queue holds one record: this one fills it, and it cannot go out while
     * this callback holds the thread. */
    c->fill_rc = varlog_appender_append(c->target, &one, 1, 0, count_cb, c);
    /* A wait for room could only end by this thread's return: refused at once. */
    int64_t t0 = test_now_ms();
    c->full_rc = varlog_appender_append(c->target, &one, 1, 5000, count_cb, c);
    c->full_took_ms = test_now_ms() - t0;
    c->flush_rc = varlog_appender_flush(c->target, 1000, NULL);
    varlog_appender_t *t = c->target;
    c->close_rc = varlog_appender_close(&t, 1000);
    atomic_store(&c->done, true);
}

static bool cross_done(void *arg)
{
    return atomic_load(&((cross_t *)arg)->done);
}

/* A callback may not wait for room in an appender of its own thread, nor flush or close one:
 * each would wait for the thread it runs on. QUEUE_FULL at once, STATE, STATE; the appender
 * then works as before. */
static void test_callback_cannot_wait_for_its_thread(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 2, 1, "appender.threads", "1", "appender.queue.max.records", "1",
             "appender.batch.max.records", "1", NULL);
    cross_t c = {.target = new_appender(&x.f, 1, 2)};
    varlog_record_t one = cf_record("trigger");
    assert_int_equal(varlog_appender_append(x.app, &one, 1, -1, cross_cb, &c), VARLOG_OK);
    assert_true(test_wait_until(cross_done, &c, cf_wait_bound_ms()));
    assert_int_equal(c.fill_rc, VARLOG_OK);
    assert_int_equal(c.full_rc, VARLOG_ERR_QUEUE_FULL);
    if (c.full_took_ms > 1000)
        fail_msg("the refused append waited %lld ms", (long long)c.full_took_ms);
    assert_int_equal(c.flush_rc, VARLOG_ERR_STATE);
    assert_int_equal(c.close_rc, VARLOG_ERR_STATE);
    /* From here, on the test's thread, both work: the filling record settles. */
    assert_int_equal(varlog_appender_flush(c.target, flush_bound_ms(), NULL), VARLOG_OK);
    assert_int_equal(atomic_load(&c.filled_cbs), 1);
    assert_int_equal(varlog_appender_close(&c.target, 1000), VARLOG_OK);
    fx_stop(&x);
}

/* ---- appenders opened and closed from many threads while others append ------------------ */

#define CHURN_THREADS 4
#define CHURN_ROUNDS 6
#define CHURN_CALLS 40

typedef struct churn {
    client_fixture_t *f;
    int producer;
    call_t calls[CHURN_ROUNDS][CHURN_CALLS];
} churn_t;

static void *churn_main(void *arg)
{
    churn_t *ch = arg;
    varlog_record_t one = cf_record("churn");
    for (int round = 0; round < CHURN_ROUNDS; round++) {
        varlog_appender_t *app = NULL;
        /* Bound to log streams 1-4 in turn, or topic-wide. */
        int32_t ls = (ch->producer + round) % 5;
        if (varlog_appender_new(ch->f->client, 1, ls, &app) != VARLOG_OK) {
            atu_note_bad("appender_new: %s", varlog_last_error());
            return NULL;
        }
        for (int i = 0; i < CHURN_CALLS; i++) {
            call_t *c = &ch->calls[round][i];
            if (varlog_appender_append(app, &one, 1, -1, track_cb, c) != VARLOG_OK)
                atu_note_bad("append: %s", varlog_last_error());
        }
        /* Half close at once (their calls settle CLOSED or APPENDED), half flush first. */
        varlog_err_t rc = varlog_appender_close(&app, round % 2 ? 0 : 10000);
        if (round % 2 == 0 && rc != VARLOG_OK)
            atu_note_bad("close after a flush: %s", varlog_last_error());
    }
    return NULL;
}

static void test_churn_on_shared_threads(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 4, 0, "appender.threads", "2", "appender.linger.ms", "1", NULL);
    static churn_t ch[CHURN_THREADS];
    pthread_t th[CHURN_THREADS];
    for (int t = 0; t < CHURN_THREADS; t++) {
        ch[t].f = &x.f;
        ch[t].producer = t + 1;
        for (int r = 0; r < CHURN_ROUNDS; r++) {
            calls_init(ch[t].calls[r], CHURN_CALLS);
            /* One thread's rounds follow each other: its calls are in order per log stream. */
            for (int i = 0; i < CHURN_CALLS; i++) {
                ch[t].calls[r][i].producer = t + 1;
                ch[t].calls[r][i].seq = (long)(r * CHURN_CALLS + i);
            }
        }
        assert_int_equal(pthread_create(&th[t], NULL, churn_main, &ch[t]), 0);
    }
    /* Meanwhile the fixture's topic-wide appender keeps appending. */
    call_t steady[200];
    calls_init(steady, 200);
    append_calls(x.app, steady, 200, 0);
    for (int t = 0; t < CHURN_THREADS; t++)
        assert_int_equal(pthread_join(th[t], NULL), 0);
    flush_ok(x.app);
    assert_settled(steady, 200, VARLOG_OK);
    long total = 200;
    for (int t = 0; t < CHURN_THREADS; t++) {
        for (int r = 0; r < CHURN_ROUNDS; r++) {
            for (int i = 0; i < CHURN_CALLS; i++) {
                call_t *c = &ch[t].calls[r][i];
                if (atomic_load(&c->cbs) != 1)
                    fail_msg("thread %d round %d call %d: %d callbacks", t, r, i,
                             atomic_load(&c->cbs));
                if (r % 2 == 0 && c->err != VARLOG_OK)
                    fail_msg("thread %d round %d call %d: %s after a flush", t, r, i,
                             varlog_err_name(c->err));
            }
            total += CHURN_CALLS;
        }
    }
    assert_int_equal(tracker_callbacks(&x.t), total);
    assert_int_equal(test_thread_count_named(THREAD_NAME), 2);
    fx_stop(&x);
}

/* An optional argument runs only the tests whose names match it (cmocka's pattern). */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_appenders_share_threads),
        cmocka_unit_test(test_blocking_callback_holds_back_its_thread_only),
        cmocka_unit_test(test_callback_cannot_wait_for_its_thread),
        cmocka_unit_test(test_churn_on_shared_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
