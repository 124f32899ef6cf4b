/* A real storage node at the wire, through the transport the client uses (rpc_client): where
 * it ends Subscribe streams of GLSN ranges, and where it keeps them open (wire protocol 6.3).
 * The cases are tests/server/subscribe_range_cases.c, which test_server_log_io runs against
 * the embedded server: the server is faithful where a client can see it. One storage node,
 * one MR, two log streams. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>

#include <cmocka.h>

#include "cluster_proc.h"
#include "server_test_util.h"
#include "subscribe_range_cases.h"

static cluster_t C;
static bool started;

static int group_setup(void **state)
{
    (void)state;
    if (cluster_unavailable() != NULL)
        return 0;
    cluster_opts_t o = {.name = "wire", .sns = 1, .rf = 1, .mrs = 1, .log_streams = 2};
    started = cluster_start(&C, &o);
    return started ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    cluster_stop(&C);
    return 0;
}

static void test_range_ends(void **state)
{
    (void)state;
    cluster_require();
    assert_true(C.n_log_streams >= 2);
    srv_fixture_t f = {.addr = C.sn_addr[0]};
    assert_int_equal(rpc_client_new(&f.client), VARLOG_OK);
    subscribe_range_cases_run(&f, C.topic_id, C.log_streams[0], C.log_streams[1]);
    rpc_client_destroy(f.client);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_range_ends),
    };
    cluster_filter_from_env();
    return cluster_main_result(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
