/* A client that was idle while its node restarted serves the next call on a new connection.
 *
 * A node's close is read only by a thread polling gRPC's poller; unread, it stays in the
 * socket, the channel still looks READY, and the next call is sent on the old connection and
 * fails with UNAVAILABLE ("Broken pipe") and, for an append, MAYBE_APPENDED, though the node
 * never saw it. rpc_client.c's polling rule keeps some thread of the client polling whichever
 * calls are open: the I/O thread with no call at all, or while an appender sleeps, or while
 * an iterator subscription is open and nobody reads it (its streams live on its own poller,
 * which only its reader polls). Before the rule the I/O thread parked while only such calls
 * ran, and one non-blocking look before each call read most closes, not all: the append
 * beside an unread iterator failed about 1 restart in 70.
 *
 * The server is a child process (varlog-server), stopped and started again on the same
 * port, so that no thread of this process polls while it is down: with an embedded server
 * its own thread might read the close by chance. append.retries is 0, so that a call sent
 * on the old connection is not hidden by a retry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include <cmocka.h>

#include "appender_test_util.h"
#include "child_server.h"
#include "client_internal.h"
#include "test_support.h"
#include "varlog/appender.h"
#include "varlog/client.h"
#include "varlog/subscribe.h"

#define WAIT_MS 30000
/* Restarts beside a subscription: before the polling rule about 1 in 70 failed, so that a
 * run of 100 failed most times (a restart costs some 20 ms here, 0.3 s under valgrind). */
#define RESTARTS_BESIDE 100

typedef struct env {
    pid_t server;
    char addr[64];
    varlog_client_t *client;
} env_t;

static env_t g_env = {.server = -1};

static int setup(void **state)
{
    env_t *e = &g_env;
    e->server = child_server_start(VARLOG_SERVER_PROGRAM, 1, 1, 0, e->addr, sizeof(e->addr));
    if (e->server <= 0)
        return -1;
    varlog_conf_t *conf = varlog_conf_new();
    char err[256];
    const char *pairs[] = {
        "metadata.addresses", e->addr, "metadata.refresh.interval.ms", "0", "append.retries", "0",
        "log.level",          "err"};
    for (size_t i = 0; conf && i < sizeof(pairs) / sizeof(pairs[0]); i += 2)
        if (varlog_conf_set(conf, pairs[i], pairs[i + 1], err, sizeof(err)) != VARLOG_OK) {
            fprintf(stderr, "%s: %s\n", pairs[i], err);
            varlog_conf_destroy(conf);
            return -1;
        }
    if (!conf || varlog_client_new(&conf, &e->client, err, sizeof(err)) != VARLOG_OK) {
        fprintf(stderr, "varlog_client_new: %s\n", err);
        varlog_conf_destroy(conf);
        return -1;
    }
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env_t *e = *state;
    varlog_client_destroy(e->client);
    e->client = NULL;
    child_server_stop(e->server);
    e->server = -1;
    return 0;
}

/* The node goes away and comes back on the same address while the client is idle. */
static void restart_node(env_t *e)
{
    child_server_stop(e->server); /* reaped: its sockets are closed */
    char again[64];
    e->server =
        child_server_start_at(VARLOG_SERVER_PROGRAM, e->addr, 1, 1, 0, again, sizeof(again));
    assert_true(e->server > 0);
    assert_string_equal(again, e->addr);
}

static void append_one(env_t *e, const char *what)
{
    varlog_record_t r = {"idle", 4};
    varlog_outcome_t outcome = VARLOG_NOT_APPENDED;
    varlog_err_t rc = varlog_append(e->client, 1, &r, 1, WAIT_MS, NULL, &outcome);
    if (rc != VARLOG_OK)
        fail_msg("%s: %s (%s), outcome %s", what, varlog_err_name(rc), varlog_last_error(),
                 varlog_outcome_name(outcome));
}

static bool close_read(void *arg)
{
    env_t *e = arg;
    return !rpc_client_target_ready(e->client->rpc, e->addr);
}

/* The client has no call open: its I/O thread reads the node's close (awaited: that is the
 * event; unread, the channel would stay READY), and the next call goes on a new connection.
 * Not assumed to happen while the node restarts: under valgrind, beside two busy loops on
 * one CPU, the append came first about 1 run in 10. */
static void test_sync_append_after_restart(void **state)
{
    env_t *e = *state;
    append_one(e, "before the restart");
    for (int i = 0; i < 5; i++) {
        restart_node(e);
        if (!test_wait_until(close_read, e, WAIT_MS))
            fail_msg("restart %d: the node's close was not read within %d ms", i + 1, WAIT_MS);
        append_one(e, "first append after the restart");
    }
}

typedef struct result {
    atu_sync_t sync;
    bool done;
    varlog_err_t err;
    varlog_outcome_t outcome;
} result_t;

static void on_result(const varlog_append_result_t *r, void *opaque)
{
    result_t *res = opaque;
    res->err = r->err; /* read once atu_wait_true saw done, under the same mutex */
    res->outcome = r->outcome;
    atu_set_true(&res->sync, &res->done);
}

static void appender_one(varlog_appender_t *app, const char *what)
{
    result_t res = {.err = VARLOG_ERR_INTERNAL};
    atu_sync_init(&res.sync);
    varlog_record_t r = {"idle", 4};
    assert_int_equal(varlog_appender_append(app, &r, 1, -1, on_result, &res), VARLOG_OK);
    assert_true(atu_wait_true(&res.sync, &res.done, WAIT_MS));
    atu_sync_destroy(&res.sync);
    if (res.err != VARLOG_OK)
        fail_msg("%s: %s, outcome %s", what, varlog_err_name(res.err),
                 varlog_outcome_name(res.outcome));
}

/* The appender keeps its stream open while idle: its end is read before the next send. */
static void test_appender_after_restart(void **state)
{
    env_t *e = *state;
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(e->client, 1, 0, &app), VARLOG_OK);
    appender_one(app, "before the restart");
    for (int i = 0; i < 5; i++) {
        restart_node(e);
        appender_one(app, "first append after the restart");
    }
    assert_int_equal(varlog_appender_close(&app, WAIT_MS), VARLOG_OK);
}

static void restarts_then_append(env_t *e, const char *what)
{
    long n = test_scale(RESTARTS_BESIDE, 5);
    for (long i = 0; i < n; i++) {
        restart_node(e);
        char why[160];
        snprintf(why, sizeof(why), "first append after restart %ld of %ld, %s", i + 1, n, what);
        append_one(e, why);
    }
}

static bool io_thread_polls(void *arg)
{
    return rpc_client_polling_holders(arg) == 0;
}

/* An iterator subscription open and never read: its streams, on its own poller, are nobody's
 * to complete, and the I/O thread must still read the node's closes. */
static void test_sync_append_beside_unread_iterator(void **state)
{
    env_t *e = *state;
    append_one(e, "before the subscription");
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(e->client, 1, 1, VARLOG_GLSN_MAX, &sub), VARLOG_OK);
    /* Opening it took the polling role for its first reader, for a lapse: awaited. */
    assert_true(test_wait_until(io_thread_polls, e->client->rpc, WAIT_MS));
    restarts_then_append(e, "beside an iterator never read");
    varlog_subscription_close(&sub);
}

/* An iterator read once, then left: its reader took the polling role as it polled (the I/O
 * thread parked) and lapsed as next returned; once the lapse ran out the I/O thread polls
 * again (awaited: that is the event), and reads every close from then on. */
static void test_sync_append_after_iterator_left(void **state)
{
    env_t *e = *state;
    append_one(e, "before the subscription");
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(e->client, 1, 1, VARLOG_GLSN_MAX, &sub), VARLOG_OK);
    varlog_entry_t entry;
    assert_int_equal(varlog_subscription_next(sub, WAIT_MS, &entry), VARLOG_OK);
    assert_int_equal(entry.meta.glsn, 1);
    assert_true(test_wait_until(io_thread_polls, e->client->rpc, WAIT_MS));
    restarts_then_append(e, "beside an iterator read once and left");
    varlog_subscription_close(&sub);
}

/* An appender whose last answer came and which now sleeps for records: its stream to the node
 * stays open on its poller, and its thread lapses out of the polling role as it sleeps; once
 * the lapse ran out the I/O thread reads the node's closes for the synchronous appends. */
static void test_sync_append_beside_idle_appender(void **state)
{
    env_t *e = *state;
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(e->client, 1, 0, &app), VARLOG_OK);
    appender_one(app, "the appender's first append");
    assert_true(test_wait_until(io_thread_polls, e->client->rpc, WAIT_MS));
    restarts_then_append(e, "beside an idle appender");
    assert_int_equal(varlog_appender_close(&app, WAIT_MS), VARLOG_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sync_append_after_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_appender_after_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_append_beside_unread_iterator, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_append_after_iterator_left, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_append_beside_idle_appender, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
