/* Three storage nodes, replication factor 3, one MR, two log streams: the round trip and
 * varlog-cli demo on replicated log streams, kill -9 of a backup then of a primary storage
 * node while appending (bound and topic-wide) and subscribing, each restarted and the log
 * streams unsealed through the admin API, and a log stream added while appending and
 * subscribing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>

#include <cmocka.h>

#include "cluster_proc.h"
#include "cluster_scenario.h"

static cluster_t C;

static int group_setup(void **state)
{
    (void)state;
    if (cluster_unavailable() != NULL)
        return 0;
    cluster_opts_t o = {.name = "failover", .sns = 3, .rf = 3, .mrs = 1, .log_streams = 2};
    return cluster_start(&C, &o) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    cluster_stop(&C);
    return 0;
}

static void test_round_trip_rf3(void **state)
{
    (void)state;
    cluster_require();
    scenario_round_trip(&C, "round trip (3 SN, RF 3)", 2000);
}

static void test_cli_demo_rf3(void **state)
{
    (void)state;
    cluster_require();
    scenario_cli_demo(&C, 20000);
}

static void test_kill_backup_then_primary(void **state)
{
    (void)state;
    cluster_require();
    const int victims[] = {0 /* backup */, -1 /* primary */};
    scenario_sn_failover(&C, victims, 2, false);
}

static void test_add_log_stream(void **state)
{
    (void)state;
    cluster_require();
    scenario_add_log_stream(&C);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_rf3),
        cmocka_unit_test(test_cli_demo_rf3),
        cmocka_unit_test(test_kill_backup_then_primary),
        cmocka_unit_test(test_add_log_stream),
    };
    cluster_filter_from_env();
    return cluster_main_result(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
