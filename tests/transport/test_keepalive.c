/* Go clients of Varlog ping every 10 s, also with no call open. A gRPC core server with
 * default settings answers such pings with GOAWAY "too_many_pings" and drops the connection.
 * This test pings an idle connection every second, faster than a Go client, and checks that
 * the libvarlog server keeps it while a server with gRPC's defaults does not (so the test
 * can tell the two apart). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "echo_service.h"
#include "wire.h"

#define IDLE_WATCH_MS 7000

/* A channel that pings every second without calls, as an impatient Go client would. */
static grpc_channel *pinging_channel(const char *target)
{
    grpc_arg args[] = {
        {GRPC_ARG_INTEGER, GRPC_ARG_KEEPALIVE_TIME_MS, {.integer = 1000}},
        {GRPC_ARG_INTEGER, GRPC_ARG_KEEPALIVE_TIMEOUT_MS, {.integer = 1500}},
        {GRPC_ARG_INTEGER, GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, {.integer = 1}},
        {GRPC_ARG_INTEGER, GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, {.integer = 0}},
        {GRPC_ARG_INTEGER,
         GRPC_ARG_HTTP2_MIN_SENT_PING_INTERVAL_WITHOUT_DATA_MS,
         {.integer = 1000}},
    };
    grpc_channel_args ca = {sizeof(args) / sizeof(args[0]), args};
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(target, creds, &ca);
    grpc_channel_credentials_release(creds);
    return ch;
}

/* Waits for the channel to leave `from` (bounded by ms); returns the state then. */
static grpc_connectivity_state wait_change(grpc_channel *ch, grpc_completion_queue *cq,
                                           grpc_connectivity_state from, int64_t ms)
{
    static int tag;
    grpc_channel_watch_connectivity_state(ch, from, wire_deadline(ms), cq, &tag);
    grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    return grpc_channel_check_connectivity_state(ch, 0);
}

/* Connects, then reports whether the connection stayed READY for IDLE_WATCH_MS of pings
 * with no call. */
static bool idle_connection_survives(const char *target)
{
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    grpc_channel *ch = pinging_channel(target);
    grpc_connectivity_state st = grpc_channel_check_connectivity_state(ch, 1);
    for (int i = 0; i < 50 && st != GRPC_CHANNEL_READY; i++)
        st = wait_change(ch, cq, st, 200);
    assert_int_equal(st, GRPC_CHANNEL_READY);
    st = wait_change(ch, cq, GRPC_CHANNEL_READY, IDLE_WATCH_MS);
    grpc_channel_destroy(ch);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
    return st == GRPC_CHANNEL_READY;
}

static void test_libvarlog_server_keeps_pinging_idle_client(void **state)
{
    (void)state;
    echo_service_t echo;
    assert_int_equal(echo_service_start(&echo, 0), VARLOG_OK);
    assert_true(idle_connection_survives(echo.address));
    echo_service_stop(&echo);
}

/* The control: a bare gRPC server with default keepalive enforcement. */
struct default_server {
    grpc_server *server;
    grpc_completion_queue *cq;
    pthread_t thread;
    char address[64];
};

static void *default_server_poll(void *arg)
{
    struct default_server *d = arg;
    while (grpc_completion_queue_next(d->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    return NULL;
}

static void test_default_grpc_server_drops_pinging_idle_client(void **state)
{
    (void)state;
    struct default_server d;
    static int shutdown_tag;
    d.server = grpc_server_create(NULL, NULL);
    d.cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(d.server, d.cq, NULL);
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    int port = grpc_server_add_http2_port(d.server, "127.0.0.1:0", creds);
    grpc_server_credentials_release(creds);
    assert_true(port > 0);
    snprintf(d.address, sizeof(d.address), "127.0.0.1:%d", port);
    grpc_server_start(d.server);
    pthread_create(&d.thread, NULL, default_server_poll, &d);

    assert_false(idle_connection_survives(d.address));

    grpc_server_shutdown_and_notify(d.server, d.cq, &shutdown_tag);
    grpc_server_cancel_all_calls(d.server);
    grpc_completion_queue_shutdown(d.cq);
    pthread_join(d.thread, NULL);
    grpc_server_destroy(d.server);
    grpc_completion_queue_destroy(d.cq);
}

static int group_setup(void **state)
{
    (void)state;
    wire_grpc_ref();
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    wire_grpc_unref();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_libvarlog_server_keeps_pinging_idle_client),
        cmocka_unit_test(test_default_grpc_server_drops_pinging_idle_client),
    };
    return cmocka_run_group_tests_name("keepalive", tests, group_setup, group_teardown);
}
