/* Issue 35, part 4, against real Varlog: three storage nodes, replication factor 3, two log
 * streams, varlogadm --auto-unseal, and producers with no retry loop of their own and the
 * library's defaults. The primary storage node of the first log stream is killed (kill -9)
 * and restarted 5 s later, or stopped (SIGSTOP) for longer than append.attempt.timeout.ms
 * and continued, under a topic-wide and a bound appender at 300 calls/s each; and killed and
 * restarted under three threads of synchronous varlog_append (30 s timeout). Each asserts
 * that every call was APPENDED, that each record is in the log once at the position its
 * callback gave, that the subscriber running through the fault was gapless, and that no
 * MAYBE_APPENDED is left on a log stream that was sealed (cluster_rideout.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>

#include <cmocka.h>

#include "cluster_proc.h"
#include "cluster_rideout.h"

static cluster_t C;

static int group_setup(void **state)
{
    (void)state;
    if (cluster_unavailable() != NULL)
        return 0;
    cluster_opts_t o = {
        .name = "rideout", .sns = 3, .rf = 3, .mrs = 1, .log_streams = 2, .auto_unseal = true};
    return cluster_start(&C, &o) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    cluster_stop(&C);
    return 0;
}

static void test_rideout_kill_primary_appenders(void **state)
{
    (void)state;
    cluster_require();
    scenario_rideout_appenders(&C, RIDEOUT_KILL_RESTART);
}

static void test_rideout_sigstop_primary_appenders(void **state)
{
    (void)state;
    cluster_require();
    scenario_rideout_appenders(&C, RIDEOUT_SIGSTOP);
}

static void test_rideout_kill_primary_sync_append(void **state)
{
    (void)state;
    cluster_require();
    scenario_rideout_sync(&C, RIDEOUT_KILL_RESTART, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rideout_kill_primary_appenders),
        cmocka_unit_test(test_rideout_sigstop_primary_appenders),
        cmocka_unit_test(test_rideout_kill_primary_sync_append),
    };
    cluster_filter_from_env();
    return cluster_main_result(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
