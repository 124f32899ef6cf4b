/* Metadata calls and connections across slow calls, outages and address changes (issue 8,
 * points 8, 10, 11, 12): a refresh that joins a shared GetMetadata is bounded by its own
 * deadline, not the first caller's; a timed-out refresh keeps the metadata member; opening
 * waits for a repository that restarts within open.timeout.ms and reports the last real
 * failure otherwise; channels to addresses the metadata no longer lists are closed, never
 * under a running call; channels carry the configured reconnect backoff. */
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
#include <time.h>

#include <cmocka.h>

#include "client_fixture.h"
#include "client_internal.h"
#include "mrpb/metadata_repository.pb-c.h"
#include "rpc_internal.h"
#include "test_support.h"
#include "vq/task.h"

/* ---- helpers ------------------------------------------------------------------------------ */

typedef struct refresher_arg {
    varlog_client_t *client;
    int64_t timeout_ms;
    varlog_err_t rc;
    int64_t took_ms;
    char text[512];
} refresher_arg_t;

static void *refresh_main(void *arg)
{
    refresher_arg_t *a = arg;
    int64_t t0 = test_now_ms();
    a->rc = varlog_client_refresh(a->client, a->timeout_ms);
    a->took_ms = test_now_ms() - t0;
    snprintf(a->text, sizeof(a->text), "%s", a->rc == VARLOG_OK ? "" : varlog_last_error());
    return NULL;
}

/* Slow-run scale: valgrind and the sanitizers stretch every call. */
static int64_t scaled_ms(int64_t ms)
{
    return test_under_valgrind() || test_under_tsan() ? ms * 4 : ms;
}

/* ---- point 8: a joiner is not bound by the first caller's deadline ------------------------ */

static void test_joiner_outlives_leader_deadline(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    int32_t topic = 0;
    assert_int_equal(varlog_server_add_topic(f.srv, &topic), VARLOG_OK);
    /* The leader gives up long before the server answers; the joiner joins while the
     * leader's call is held and has time for a call of its own. */
    int64_t leader_ms = scaled_ms(500);
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_METADATA, 3 * leader_ms), VARLOG_OK);
    uint64_t calls0 = varlog_server_call_count(f.srv, CF_PATH_METADATA);
    cf_count_wait_t w = {.srv = f.srv, .method = CF_PATH_METADATA, .above = calls0};
    refresher_arg_t leader = {.client = f.client, .timeout_ms = leader_ms};
    refresher_arg_t joiner = {.client = f.client, .timeout_ms = 3 * cf_wait_bound_ms()};
    pthread_t th[2];
    assert_int_equal(pthread_create(&th[0], NULL, refresh_main, &leader), 0);
    assert_true(test_wait_until(cf_call_count_above, &w, cf_wait_bound_ms()));
    assert_int_equal(pthread_create(&th[1], NULL, refresh_main, &joiner), 0);
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    assert_int_equal(leader.rc, VARLOG_ERR_TIMED_OUT);
    if (joiner.rc != VARLOG_OK)
        fail_msg("joiner (timeout %lld ms) returned %s after %lld ms: %s",
                 (long long)joiner.timeout_ms, varlog_err_name(joiner.rc),
                 (long long)joiner.took_ms, joiner.text);
    /* the joiner needed a call of its own: the leader's ended without an answer for it */
    assert_int_equal(varlog_server_call_count(f.srv, CF_PATH_METADATA), calls0 + 2);
    assert_int_equal(varlog_client_applied_index(f.client), varlog_server_applied_index(f.srv));
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_METADATA, 0), VARLOG_OK);
    cf_stop(&f);
}

/* A lookup that must see metadata newer than a moment (a retry after a refusal, a
 * subscription's gap) does not join a GetMetadata that began before it: that answer may
 * predate the seal or the new log stream it reacts to (found in the fault soak). It waits
 * that call out and makes its own. Plain refreshes still share the call in flight. */
static void test_fresh_lookup_does_not_join_an_older_call(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    int64_t delay = scaled_ms(300);
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_METADATA, delay), VARLOG_OK);
    uint64_t calls0 = varlog_server_call_count(f.srv, CF_PATH_METADATA);
    cf_count_wait_t w = {.srv = f.srv, .method = CF_PATH_METADATA, .above = calls0};
    refresher_arg_t older = {.client = f.client, .timeout_ms = 3 * cf_wait_bound_ms()};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, refresh_main, &older), 0);
    assert_true(test_wait_until(cf_call_count_above, &w, cf_wait_bound_ms()));
    int32_t topic = 0;
    assert_int_equal(varlog_server_add_topic(f.srv, &topic), VARLOG_OK); /* after it began */
    assert_int_equal(md_fetch_after(f.client, 3 * cf_wait_bound_ms(), vq_now_ns()), VARLOG_OK);
    pthread_join(th, NULL);
    assert_int_equal(older.rc, VARLOG_OK);
    assert_int_equal(varlog_server_call_count(f.srv, CF_PATH_METADATA), calls0 + 2);
    assert_int_equal(varlog_client_applied_index(f.client), varlog_server_applied_index(f.srv));
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_METADATA, 0), VARLOG_OK);
    cf_stop(&f);
}

/* ---- point 8: the caller's own timeout does not forget the metadata member --------------- */

static void test_timed_out_refresh_keeps_member(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    int64_t timeout = scaled_ms(200);
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_METADATA, 5 * timeout), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(f.client, timeout), VARLOG_ERR_TIMED_OUT);
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_METADATA, 0), VARLOG_OK);

    uint64_t infos = varlog_server_call_count(f.srv, CF_PATH_CLUSTER_INFO);
    assert_int_equal(varlog_client_refresh(f.client, -1), VARLOG_OK);
    /* no rediscovery: the timeout was the caller's, not the member's fault */
    assert_int_equal(varlog_server_call_count(f.srv, CF_PATH_CLUSTER_INFO), infos);
    cf_stop(&f);
}

/* A member slower than metadata.call.timeout.ms is at fault: the call ends at that bound
 * even when the caller allows more, and the next call discovers a member again. */
static void test_slow_member_is_forgotten(void **state)
{
    (void)state;
    client_fixture_t f;
    int64_t call_ms = scaled_ms(1000);
    char call_timeout[32];
    snprintf(call_timeout, sizeof(call_timeout), "%lld", (long long)call_ms);
    cf_start(&f, 1, 1, "metadata.call.timeout.ms", call_timeout, NULL);
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_METADATA, 4 * call_ms), VARLOG_OK);
    int64_t t0 = test_now_ms();
    varlog_err_t rc = varlog_client_refresh(f.client, 20 * call_ms);
    int64_t took = test_now_ms() - t0;
    if (rc != VARLOG_ERR_RPC_DEADLINE_EXCEEDED)
        fail_msg("refresh returned %s after %lld ms: %s", varlog_err_name(rc), (long long)took,
                 varlog_last_error());
    /* metadata.call.timeout.ms is the promise: the call ends at it, not much before (gRPC's
     * clock is cached per poll, as in test_transport's deadlines) nor anywhere near the
     * server's answer at 4 times it. */
    assert_true(took >= call_ms / 2);
    assert_true(took < 4 * call_ms);
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_METADATA, 0), VARLOG_OK);

    uint64_t infos = varlog_server_call_count(f.srv, CF_PATH_CLUSTER_INFO);
    assert_int_equal(varlog_client_refresh(f.client, -1), VARLOG_OK);
    assert_true(varlog_server_call_count(f.srv, CF_PATH_CLUSTER_INFO) > infos);
    cf_stop(&f);
}

/* ---- point 12: opening outlasts a repository restart; the error names the real cause ---- */

typedef struct restarter {
    varlog_server_t *srv;
    int64_t after_ms;
    varlog_err_t rc;
} restarter_t;

static void *restart_main(void *arg)
{
    restarter_t *r = arg;
    /* The scenario itself is a repository that is down for a while, not a synchronisation:
     * the outage's length is what the open must outlast (checked from below by the test). */
    struct timespec ts = {.tv_sec = (time_t)(r->after_ms / 1000),
                          .tv_nsec = (long)(r->after_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    r->rc = varlog_server_restart(r->srv);
    return NULL;
}

static void test_open_waits_for_restarting_repository(void **state)
{
    (void)state;
    client_fixture_t f;
    memset(&f, 0, sizeof(f));
    varlog_server_opts_t o = {.topics = 1, .log_streams_per_topic = 1};
    assert_int_equal(varlog_server_start(&o, &f.srv), VARLOG_OK);
    assert_int_equal(varlog_server_stop(f.srv), VARLOG_OK);
    varlog_conf_t *conf = cf_conf(&f, "open.timeout.ms", "20000", NULL);
    restarter_t r = {.srv = f.srv, .after_ms = 1500, .rc = VARLOG_ERR_INTERNAL};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, restart_main, &r), 0);
    char err[512] = "";
    int64_t t0 = test_now_ms();
    varlog_err_t rc = varlog_client_new(&conf, &f.client, err, sizeof(err));
    int64_t took = test_now_ms() - t0;
    pthread_join(th, NULL);
    assert_int_equal(r.rc, VARLOG_OK);
    if (rc != VARLOG_OK)
        fail_msg("open with open.timeout.ms 20000 gave up after %lld ms: %s: %s", (long long)took,
                 varlog_err_name(rc), err);
    assert_null(conf);
    assert_true(took >= 1500);
    assert_int_equal(varlog_client_applied_index(f.client), varlog_server_applied_index(f.srv));
    cf_stop(&f);
}

static void test_open_reports_last_failure(void **state)
{
    (void)state;
    client_fixture_t f;
    memset(&f, 0, sizeof(f));
    varlog_server_opts_t o = {.topics = 1, .log_streams_per_topic = 1};
    assert_int_equal(varlog_server_start(&o, &f.srv), VARLOG_OK);
    char *address = strdup(varlog_server_address(f.srv));
    assert_non_null(address);
    /* Long enough for a first call even on a loaded machine under a sanitizer. */
    int64_t open_ms = scaled_ms(500);
    char open_timeout[32];
    snprintf(open_timeout, sizeof(open_timeout), "%lld", (long long)open_ms);
    varlog_conf_t *conf = cf_conf(&f, "open.timeout.ms", open_timeout, NULL);
    varlog_server_destroy(f.srv); /* nothing listens on the address any more */
    f.srv = NULL;

    varlog_client_t *client = NULL;
    char err[512] = "";
    int64_t t0 = test_now_ms();
    varlog_err_t rc = varlog_client_new(&conf, &client, err, sizeof(err));
    int64_t took = test_now_ms() - t0;
    assert_null(client);
    assert_non_null(conf);
    if (rc != VARLOG_ERR_RPC_UNAVAILABLE)
        fail_msg("open returned %s after %lld ms: %s", varlog_err_name(rc), (long long)took, err);
    char want[160], bound[80];
    snprintf(want, sizeof(want), "last failure: GetClusterInfo at %s: ", address);
    snprintf(bound, sizeof(bound), "no answer within open.timeout.ms %lld ms", (long long)open_ms);
    if (!strstr(err, bound) || !strstr(err, want))
        fail_msg("error text lacks \"%s\" or \"%s\": %s", bound, want, err);
    /* it kept asking until the timeout rather than giving up early */
    assert_true(took >= open_ms - 50);
    assert_string_equal(varlog_last_error(), err);
    varlog_conf_destroy(conf);
    free(address);
}

/* ---- point 11: channels to addresses no longer listed are closed ------------------------- */

/* A unary call to target, whatever its outcome: it leaves a cached channel behind. */
static void call_once(rpc_client_t *rpc, const char *target, int64_t timeout_ms)
{
    Varlog__Mrpb__GetMetadataRequest req = VARLOG__MRPB__GET_METADATA_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    varlog_err_t rc =
        rpc_unary(rpc, target, CF_PATH_METADATA, &req.base,
                  &varlog__mrpb__get_metadata_response__descriptor, timeout_ms, &resp, NULL);
    if (rc == VARLOG_OK)
        protobuf_c_message_free_unpacked(resp, NULL);
}

typedef struct retain_wait {
    rpc_client_t *rpc;
    const char *const *targets;
    size_t n;
    int64_t grace_ms;
} retain_wait_t;

static bool retain_drops_one(void *arg)
{
    retain_wait_t *w = arg;
    return rpc_client_retain_targets(w->rpc, w->targets, w->n, w->grace_ms) == 1;
}

static void test_retain_drops_unlisted_channels(void **state)
{
    (void)state;
    rpc_client_t *rpc = NULL;
    assert_int_equal(rpc_client_new(&rpc), VARLOG_OK);
    /* nothing listens on these ports: the calls fail, the channels stay cached */
    const char *addrs[] = {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"};
    for (size_t i = 0; i < 3; i++)
        call_once(rpc, addrs[i], 2000);
    call_once(rpc, addrs[0], 2000); /* same address, same channel */
    assert_int_equal(rpc_client_channel_count(rpc), 3);

    /* everything listed: nothing dropped */
    assert_int_equal(rpc_client_retain_targets(rpc, addrs, 3, 0), 0);
    assert_int_equal(rpc_client_channel_count(rpc), 3);

    /* the metadata now lists only the second one: the others wait out the grace */
    const char *now_listed[] = {addrs[1]};
    assert_int_equal(rpc_client_retain_targets(rpc, now_listed, 1, 3600000), 0);
    assert_int_equal(rpc_client_channel_count(rpc), 3);

    /* listed again before the grace ran out: its clock starts over */
    const char *back[] = {addrs[1], addrs[2]};
    assert_int_equal(rpc_client_retain_targets(rpc, back, 2, 3600000), 0);
    assert_int_equal(rpc_client_channel_count(rpc), 3);

    /* grace 100 ms: addrs[0] (missing since the first retain) goes once 100 ms have passed */
    retain_wait_t w = {.rpc = rpc, .targets = back, .n = 2, .grace_ms = 100};
    assert_true(test_wait_until(retain_drops_one, &w, cf_wait_bound_ms()));
    assert_int_equal(rpc_client_channel_count(rpc), 2);

    /* grace 0: whatever is missing goes at once */
    assert_int_equal(rpc_client_retain_targets(rpc, now_listed, 1, 0), 1);
    assert_int_equal(rpc_client_channel_count(rpc), 1);
    assert_int_equal(rpc_client_retain_targets(rpc, NULL, 0, 0), 1);
    assert_int_equal(rpc_client_channel_count(rpc), 0);

    /* a dropped address used again gets a new channel */
    call_once(rpc, addrs[0], 2000);
    assert_int_equal(rpc_client_channel_count(rpc), 1);
    rpc_client_destroy(rpc);
}

typedef struct held_call {
    rpc_client_t *rpc;
    const char *target;
    varlog_err_t rc;
} held_call_t;

static void *held_call_main(void *arg)
{
    held_call_t *h = arg;
    Varlog__Mrpb__GetMetadataRequest req = VARLOG__MRPB__GET_METADATA_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    h->rc = rpc_unary(h->rpc, h->target, CF_PATH_METADATA, &req.base,
                      &varlog__mrpb__get_metadata_response__descriptor, 3 * cf_wait_bound_ms(),
                      &resp, NULL);
    if (h->rc == VARLOG_OK)
        protobuf_c_message_free_unpacked(resp, NULL);
    return NULL;
}

static void test_retain_never_closes_under_a_call(void **state)
{
    (void)state;
    varlog_server_t *srv = NULL;
    varlog_server_opts_t o = {.topics = 1, .log_streams_per_topic = 1};
    assert_int_equal(varlog_server_start(&o, &srv), VARLOG_OK);
    assert_int_equal(varlog_server_delay(srv, CF_PATH_METADATA, scaled_ms(500)), VARLOG_OK);
    rpc_client_t *rpc = NULL;
    assert_int_equal(rpc_client_new(&rpc), VARLOG_OK);
    held_call_t h = {.rpc = rpc, .target = varlog_server_address(srv), .rc = VARLOG_ERR_INTERNAL};
    cf_count_wait_t w = {.srv = srv, .method = CF_PATH_METADATA, .above = 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, held_call_main, &h), 0);
    if (!test_wait_until(cf_call_count_above, &w, cf_wait_bound_ms())) {
        pthread_join(th, NULL);
        fail_msg("the call never reached the server: %s", varlog_err_name(h.rc));
    }

    /* the address is gone from the metadata while the call runs: the channel stays */
    assert_int_equal(rpc_client_retain_targets(rpc, NULL, 0, 0), 0);
    assert_int_equal(rpc_client_channel_count(rpc), 1);
    pthread_join(th, NULL);
    if (h.rc != VARLOG_OK)
        fail_msg("the call on a dropped channel ended with %s", varlog_err_name(h.rc));
    /* and goes with the call's end */
    assert_int_equal(rpc_client_channel_count(rpc), 0);
    rpc_client_destroy(rpc);
    varlog_server_destroy(srv);
}

/* Through the client: every successful GetMetadata retains the view's nodes, the seeds and
 * the member, and closes the rest. */
static void test_refresh_closes_unlisted_channels(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "channel.unlisted.grace.ms", "0", NULL);
    rpc_client_t *rpc = f.client->rpc;
    assert_int_equal(rpc_client_channel_count(rpc), 1); /* the server is MR and node */
    call_once(rpc, "127.0.0.1:1", 2000);                /* a node that left the cluster */
    assert_int_equal(rpc_client_channel_count(rpc), 2);
    assert_int_equal(varlog_client_refresh(f.client, -1), VARLOG_OK);
    assert_int_equal(rpc_client_channel_count(rpc), 1);
    /* the one kept still works */
    varlog_record_t rec = cf_record("after");
    varlog_entry_meta_t meta;
    varlog_outcome_t outcome;
    assert_int_equal(varlog_append_to(f.client, 1, 1, &rec, 1, -1, &meta, &outcome), VARLOG_OK);
    assert_int_equal(rpc_client_channel_count(rpc), 1);
    cf_stop(&f);
}

/* ---- point 10: channels carry the configured reconnect backoff --------------------------- */

static int64_t channel_arg(rpc_client_t *rpc, const char *key)
{
    for (size_t i = 0; i < rpc->channel_args.num_args; i++) {
        if (strcmp(rpc->channel_args.args[i].key, key) == 0)
            return rpc->channel_args.args[i].value.integer;
    }
    return -1;
}

static void test_reconnect_backoff_is_configured(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    assert_int_equal(channel_arg(f.client->rpc, GRPC_ARG_MAX_RECONNECT_BACKOFF_MS), 1000);
    assert_int_equal(channel_arg(f.client->rpc, GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS), 100);
    /* wire's arguments are still there */
    assert_int_equal(channel_arg(f.client->rpc, GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS), 1);
    varlog_client_destroy(f.client);
    f.client = NULL;

    varlog_conf_t *conf = cf_conf(&f, "reconnect.backoff.max.ms", "5000", NULL);
    char err[512];
    assert_int_equal(varlog_client_new(&conf, &f.client, err, sizeof(err)), VARLOG_OK);
    assert_int_equal(channel_arg(f.client->rpc, GRPC_ARG_MAX_RECONNECT_BACKOFF_MS), 5000);
    cf_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_joiner_outlives_leader_deadline),
        cmocka_unit_test(test_fresh_lookup_does_not_join_an_older_call),
        cmocka_unit_test(test_timed_out_refresh_keeps_member),
        cmocka_unit_test(test_slow_member_is_forgotten),
        cmocka_unit_test(test_open_waits_for_restarting_repository),
        cmocka_unit_test(test_open_reports_last_failure),
        cmocka_unit_test(test_retain_drops_unlisted_channels),
        cmocka_unit_test(test_retain_never_closes_under_a_call),
        cmocka_unit_test(test_refresh_closes_unlisted_channels),
        cmocka_unit_test(test_reconnect_backoff_is_configured),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
