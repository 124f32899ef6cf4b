/* The appender's latency statistics (varlog/stats.h's append_latency, docs/STATISTICS.md)
 * measure from the append call to its batch's answer on CLOCK_MONOTONIC's scale, whether the
 * calls are stamped with the time-stamp counter or the clock (client/src/ticks.h): with the
 * server holding every Append answer back, each call's latency is at least the hold and at
 * most the wall time the test saw around the calls. A counter scaled wrongly (ticks taken as
 * ns) reads several times the wall time and fails the upper bound. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "client_fixture.h"
#include "test_support.h"
#include "ticks.h"
#include "varlog/appender.h"
#include "varlog/stats.h"

#define CALLS 5

/* Callbacks run on the appender's thread, where a cmocka assertion cannot stop the test:
 * they count, and the test thread asserts every call was APPENDED. */
static atomic_int answered, appended;

static void on_append(const varlog_append_result_t *r, void *opaque)
{
    (void)opaque;
    if (r->err == VARLOG_OK)
        atomic_fetch_add(&appended, 1);
    atomic_fetch_add(&answered, 1);
}

static void latency_spans_the_hold(bool counter)
{
    client_fixture_t f;
    cf_start(&f, 1, 1, "appender.linger.ms", "0", "appender.pipeline.depth", "8", NULL);
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(f.client, 1, 1, &app), VARLOG_OK);
    bool on = ticks_use_counter(counter); /* before the first stamp */
    if (counter && !on)
        printf("no invariant time-stamp counter here: the clock's ticks are tested twice\n");
    int64_t hold_ms = test_under_valgrind() ? 1000 : 200;
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_APPEND, hold_ms), VARLOG_OK);
    atomic_store(&answered, 0);
    atomic_store(&appended, 0);
    char buf[64];
    memset(buf, 'l', sizeof(buf));
    varlog_record_t r = {.data = buf, .len = sizeof(buf)};

    uint64_t before = ticks_clock_ns();
    for (int i = 0; i < CALLS; i++)
        assert_int_equal(varlog_appender_append(app, &r, 1, -1, on_append, NULL), VARLOG_OK);
    assert_int_equal(varlog_appender_flush(app, -1, NULL), VARLOG_OK);
    uint64_t after = ticks_clock_ns();
    assert_int_equal(atomic_load(&answered), CALLS);
    assert_int_equal(atomic_load(&appended), CALLS);

    varlog_stats_t st;
    assert_int_equal(varlog_stats_get(f.client, &st), VARLOG_OK);
    const varlog_stats_latency_t *l = &st.append_latency;
    assert_int_equal(l->count, CALLS);
    /* Percentiles lie within 0.4 % of a recorded value (the histogram's bound); max is exact. */
    uint64_t hold_us = (uint64_t)hold_ms * 1000;
    if (l->p50_us < hold_us - hold_us / 200)
        fail_msg("counter %d: p50 %llu us, below the server's hold of %llu us", on,
                 (unsigned long long)l->p50_us, (unsigned long long)hold_us);
    uint64_t wall_us = (after - before) / 1000 + 1;
    if (l->max_us > wall_us)
        fail_msg("counter %d: max %llu us, above the %llu us the calls took", on,
                 (unsigned long long)l->max_us, (unsigned long long)wall_us);
    varlog_server_clear_faults(f.srv);
    assert_int_equal(varlog_appender_close(&app, -1), VARLOG_OK);
    cf_stop(&f);
    ticks_use_counter(true);
}

static void test_counter_stamps(void **state)
{
    (void)state;
    latency_spans_the_hold(true);
}

static void test_clock_stamps(void **state)
{
    (void)state;
    latency_spans_the_hold(false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_stamps),
        cmocka_unit_test(test_clock_stamps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
