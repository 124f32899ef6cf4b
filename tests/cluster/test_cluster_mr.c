/* Three metadata-repository nodes, one storage node: kill -9 of the first MR address
 * while appending and subscribing, and a new client opened while it is down. */
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
    cluster_opts_t o = {.name = "mr3", .sns = 1, .rf = 1, .mrs = 3, .log_streams = 1};
    return cluster_start(&C, &o) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    cluster_stop(&C);
    return 0;
}

static void test_kill_first_mr(void **state)
{
    (void)state;
    cluster_require();
    scenario_mr_failover(&C);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill_first_mr),
    };
    cluster_filter_from_env();
    return cluster_main_result(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
