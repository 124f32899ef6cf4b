/* The appender's per-call timestamp (client/src/ticks.h): an interval stamped in ticks and
 * turned into ns by ticks_scale equals the same interval read on CLOCK_MONOTONIC, from the
 * counter and from the clock; a stamp later than the scale's moment is 0 ns. Where the CPU
 * has no invariant counter only the clock's half runs (the test says so on stdout). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <time.h>

#include "test_support.h"
#include "ticks.h"

/* The histogram's own error bound is 0.39 %: the conversion must stay well inside it. */
#define TOLERANCE 0.002

/* The interval under test: the clock readings around it, not its length, are compared. */
static void nap_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* An interval of at least ms, stamped in ticks and read on the clock around it: the ticks'
 * ns lie between the clock's inner and outer readings, give or take TOLERANCE. */
static void check_interval(int ms)
{
    uint64_t clock_before = ticks_clock_ns();
    uint64_t stamp = ticks_now();
    uint64_t clock_inner = ticks_clock_ns();
    nap_ms(ms);
    uint64_t clock_inner_end = ticks_clock_ns();
    ticks_scale_t s = ticks_scale();
    uint64_t clock_after = ticks_clock_ns();
    double ns = (double)ticks_ns_since(&s, stamp);
    double inner = (double)(clock_inner_end - clock_inner);
    double outer = (double)(clock_after - clock_before);
    if (ns < inner * (1 - TOLERANCE) || ns > outer * (1 + TOLERANCE))
        fail_msg("%d ms: ticks say %.0f ns, the clock %.0f..%.0f ns (counter %s)", ms, ns, inner,
                 outer, atomic_load(&ticks_tsc) ? "on" : "off");
}

static void test_counter_matches_clock(void **state)
{
    (void)state;
    ticks_init();
    if (!ticks_use_counter(true)) {
        printf("no invariant time-stamp counter here: ticks are the clock's ns\n");
        return;
    }
    for (int ms = 4; ms <= 64; ms *= 4)
        check_interval(ms);
    /* Nanoseconds per tick: a counter of 0.1 to 10 GHz. */
    ticks_scale_t s = ticks_scale();
    assert_true(s.ns_per_tick > 0.1 && s.ns_per_tick < 10);
}

static void test_clock_fallback(void **state)
{
    (void)state;
    ticks_init();
    assert_false(ticks_use_counter(false));
    for (int ms = 4; ms <= 64; ms *= 4)
        check_interval(ms);
    ticks_scale_t s = ticks_scale();
    assert_true(s.ns_per_tick == 1.0);
    uint64_t a = ticks_now(), clock = ticks_clock_ns(), b = ticks_now();
    assert_true(a <= clock && clock <= b); /* ticks are the clock itself */
    ticks_use_counter(true);
}

static void test_later_stamp_is_zero(void **state)
{
    (void)state;
    ticks_init();
    ticks_scale_t s = ticks_scale();
    assert_int_equal(ticks_ns_since(&s, s.now), 0);
    assert_int_equal(ticks_ns_since(&s, s.now + 1000), 0);
    assert_true(ticks_ns_since(&s, s.now - 1000000) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_matches_clock),
        cmocka_unit_test(test_clock_fallback),
        cmocka_unit_test(test_later_stamp_is_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
