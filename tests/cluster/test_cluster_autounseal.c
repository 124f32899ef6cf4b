/* Three storage nodes, replication factor 3, varlogadm --auto-unseal: kill -9 of the
 * primary storage node while appending and subscribing, restart, and the log streams
 * unsealed by varlogadm itself; appending must resume within 5 s of that being visible. */
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
    cluster_opts_t o = {
        .name = "autounseal", .sns = 3, .rf = 3, .mrs = 1, .log_streams = 2, .auto_unseal = true};
    return cluster_start(&C, &o) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    cluster_stop(&C);
    return 0;
}

static void test_kill_primary_auto_unseal(void **state)
{
    (void)state;
    cluster_require();
    const int victims[] = {-1 /* primary */};
    scenario_sn_failover(&C, victims, 1, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill_primary_auto_unseal),
    };
    cluster_filter_from_env();
    return cluster_main_result(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
