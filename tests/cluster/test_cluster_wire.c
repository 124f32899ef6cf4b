/* A real storage node at the wire, through the transport the client uses (rpc_client): where
 * it ends Subscribe streams of GLSN ranges, and where it keeps them open (wire protocol 6.3).
 * The cases are tests/server/subscribe_range_cases.c, which test_server_log_io runs against
 * the embedded server: the server is faithful where a client can see it. Then the client
 * over such a stream: a gap behind it, in a log stream added since (test_subscribe_gaps has
 * the same against the embedded server). One storage node, one MR, two log streams. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "cluster_proc.h"
#include "server_test_util.h"
#include "subscribe_range_cases.h"
#include "varlog/client.h"
#include "varlog/subscribe.h"

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

static varlog_client_t *client_of_cluster(void)
{
    varlog_conf_t *conf = varlog_conf_new();
    assert_non_null(conf);
    char err[256];
    const char *pairs[] = {"metadata.addresses", C.mr_addrs, "metadata.refresh.interval.ms", "0",
                           "log.level",          "err"};
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i += 2)
        if (varlog_conf_set(conf, pairs[i], pairs[i + 1], err, sizeof(err)) != VARLOG_OK)
            fail_msg("%s: %s", pairs[i], err);
    varlog_client_t *c = NULL;
    if (varlog_client_new(&conf, &c, err, sizeof(err)) != VARLOG_OK)
        fail_msg("varlog_client_new: %s", err);
    return c;
}

static uint64_t append_to(varlog_client_t *c, int32_t ls, size_t n)
{
    varlog_record_t recs[2] = {{.data = "gap", .len = 3}, {.data = "gap", .len = 3}};
    varlog_entry_meta_t metas[2];
    assert_true(n <= 2);
    varlog_err_t rc = varlog_append_to(c, C.topic_id, ls, recs, n, 30000, metas, NULL);
    if (rc != VARLOG_OK)
        fail_msg("append to log stream %d: %s: %s", ls, varlog_err_name(rc), varlog_last_error());
    return metas[0].glsn;
}

/* The reader's client (periodic refresh off) knows log streams a and b; c is added after.
 * a holds g1 and g4, c g2 and g3, b nothing in [g1, g4): the node ends b's stream at once and
 * keeps a's open after g1 (it holds g4, not g3). The subscription must find c without anyone
 * refreshing its client, and read g1..g3. */
static void test_gap_behind_an_open_stream(void **state)
{
    (void)state;
    cluster_require();
    varlog_client_t *reader = client_of_cluster();
    char id[64];
    if (cluster_cmd(&C, "add-ls", NULL, id, sizeof(id)) != 0)
        fail_msg("varlogctl logstream add failed");
    int32_t added = (int32_t)strtol(id, NULL, 10);
    assert_true(added > 0);
    varlog_client_t *writer = client_of_cluster();
    int32_t a = C.log_streams[0];
    uint64_t g1 = append_to(writer, a, 1);
    uint64_t g2 = append_to(writer, added, 2);
    uint64_t g4 = append_to(writer, a, 1);
    assert_int_equal(g2, g1 + 1);
    assert_int_equal(g4, g1 + 3);
    varlog_client_destroy(writer);

    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(reader, C.topic_id, g1, g4, &sub), VARLOG_OK);
    varlog_entry_t e;
    for (uint64_t g = g1; g < g4; g++) {
        varlog_err_t rc = varlog_subscription_next(sub, 30000, &e);
        if (rc != VARLOG_OK)
            fail_msg("GLSN %llu: %s: %s", (unsigned long long)g, varlog_err_name(rc),
                     varlog_last_error());
        assert_int_equal(e.meta.glsn, g);
        assert_int_equal(e.meta.log_stream_id, g == g1 ? a : added);
    }
    assert_int_equal(varlog_subscription_next(sub, 30000, &e), VARLOG_ERR_END);
    varlog_subscription_stats_t st;
    assert_int_equal(varlog_subscription_stats(sub, &st), VARLOG_OK);
    fprintf(stderr, "a gap behind an open stream: read through log stream %d, added since\n",
            added);
    assert_int_equal(st.log_streams, 3);
    varlog_subscription_close(&sub);
    varlog_client_destroy(reader);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_range_ends),
        cmocka_unit_test(test_gap_behind_an_open_stream),
    };
    cluster_filter_from_env();
    return cluster_main_result(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
