/* Go clients of Varlog ping every 10 s, also with no call open. A gRPC core server with
 * default settings answers such pings with GOAWAY "too_many_pings" and drops the connection.
 * This test pings an idle connection every second, faster than a Go client, and checks that
 * the libvarlog server keeps it while a server with gRPC's defaults does not (so the test
 * can tell the two apart).
 *
 * The other side: the libvarlog client must not drop a healthy connection whose ping ack
 * comes late (a starved or busy peer; issue 8, point 15). A proxy holds the server's bytes
 * back for a while and a stream must survive it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "rpc_client.h"
#include "test_service.h"
#include "transport_test.pb-c.h"
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
    struct svc echo;
    assert_int_equal(svc_start(&echo, 0), VARLOG_OK);
    assert_true(idle_connection_survives(echo.addr));
    svc_stop(&echo);
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

/* ---- a TCP proxy that can hold the server's bytes back ---------------------------------- */

typedef struct stall_proxy {
    int listen_fd;
    int upstream_port;
    char address[64];
    pthread_t thread;
    atomic_bool hold; /* stop forwarding server -> client (bytes wait in the kernel) */
    atomic_bool stop;
    atomic_int accepted; /* client connections accepted */
} stall_proxy_t;

static bool write_all(int fd, const char *buf, ssize_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, (size_t)n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        buf += w;
        n -= w;
    }
    return true;
}

/* Forwards one connection both ways until either side closes or the proxy stops. */
static void proxy_pump(stall_proxy_t *p, int cfd, int sfd)
{
    char buf[16384];
    while (!atomic_load(&p->stop)) {
        bool hold = atomic_load(&p->hold);
        struct pollfd fds[2] = {{cfd, POLLIN, 0}, {sfd, hold ? 0 : POLLIN, 0}};
        if (poll(fds, 2, 20) <= 0)
            continue;
        for (int i = 0; i < 2; i++) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(fds[i].fd, buf, sizeof(buf));
            if (n <= 0 || !write_all(i == 0 ? sfd : cfd, buf, n))
                return;
        }
    }
}

static void *proxy_main(void *arg)
{
    stall_proxy_t *p = arg;
    while (!atomic_load(&p->stop)) {
        struct pollfd lp = {p->listen_fd, POLLIN, 0};
        if (poll(&lp, 1, 20) <= 0)
            continue;
        int cfd = accept(p->listen_fd, NULL, NULL);
        if (cfd < 0)
            continue;
        atomic_fetch_add(&p->accepted, 1);
        int sfd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in up = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)p->upstream_port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (sfd >= 0 && connect(sfd, (struct sockaddr *)&up, sizeof(up)) == 0)
            proxy_pump(p, cfd, sfd);
        if (sfd >= 0)
            close(sfd);
        close(cfd);
    }
    return NULL;
}

static void proxy_start(stall_proxy_t *p, int upstream_port)
{
    memset(p, 0, sizeof(*p));
    p->upstream_port = upstream_port;
    p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(p->listen_fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_int_equal(bind(p->listen_fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(p->listen_fd, 4), 0);
    assert_int_equal(getsockname(p->listen_fd, (struct sockaddr *)&a, &len), 0);
    snprintf(p->address, sizeof(p->address), "127.0.0.1:%d", ntohs(a.sin_port));
    assert_int_equal(pthread_create(&p->thread, NULL, proxy_main, p), 0);
}

static void proxy_stop(stall_proxy_t *p)
{
    atomic_store(&p->stop, true);
    pthread_join(p->thread, NULL);
    close(p->listen_fd);
}

#define BIDI_PATH "/libvarlog.transporttest.Transport/Bidi"
/* The client's keepalive interval (wire.c) and how long the proxy withholds the ack of the
 * ping after it: longer than Varlog's Go client waits (1.5 s), well within gRPC's and Go's
 * default of 20 s. */
#define CLIENT_KEEPALIVE_MS 10000
#define ACK_LATE_MS 4000

static void echo_once(rpc_stream_t *s, uint64_t seq)
{
    Libvarlog__Transporttest__Request req = LIBVARLOG__TRANSPORTTEST__REQUEST__INIT;
    req.seq = seq;
    assert_int_equal(rpc_stream_send(s, &req.base), VARLOG_OK);
    ProtobufCMessage *m = NULL;
    varlog_err_t err = rpc_stream_recv(s, 10000, &m);
    if (err != VARLOG_OK && rpc_stream_status(s))
        print_error("stream ended: %d %s\n", (int)rpc_stream_status(s)->code,
                    rpc_stream_status(s)->message);
    assert_int_equal(err, VARLOG_OK);
    assert_int_equal(((Libvarlog__Transporttest__Response *)m)->seq, seq);
    protobuf_c_message_free_unpacked(m, NULL);
}

/* A stream whose connection answers nothing for the keepalive interval plus ACK_LATE_MS: the
 * client's keepalive ping is acknowledged ACK_LATE_MS late. With a 1.5 s ack timeout the
 * client closed the connection and the stream ended UNAVAILABLE (what the test suite saw
 * under load); the connection must survive and the stream go on. */
static void test_client_keeps_connection_when_ping_ack_is_late(void **state)
{
    (void)state;
    struct svc echo;
    assert_int_equal(svc_start(&echo, 0), VARLOG_OK);
    stall_proxy_t proxy;
    proxy_start(&proxy, echo.port);
    rpc_client_t *client = NULL;
    assert_int_equal(rpc_client_new(&client), VARLOG_OK);
    rpc_stream_opts_t o;
    memset(&o, 0, sizeof(o));
    o.kind = RPC_STREAM_BIDI;
    o.response = &libvarlog__transporttest__response__descriptor;
    o.recv_window = 4;
    o.timeout_ms = -1;
    rpc_stream_t *s = NULL;
    assert_int_equal(rpc_stream_open(client, proxy.address, BIDI_PATH, &o, NULL, &s), VARLOG_OK);
    echo_once(s, 1);

    /* The stall is the fault being injected, not a wait for a condition: its length is the
     * thing under test (the keepalive interval plus the ack's lateness must not cost the
     * connection), so it is a time on purpose. */
    atomic_store(&proxy.hold, true);
    int64_t stall_ms = CLIENT_KEEPALIVE_MS + ACK_LATE_MS;
    struct timespec ts = {(time_t)(stall_ms / 1000), (long)(stall_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    atomic_store(&proxy.hold, false);

    echo_once(s, 2);
    assert_int_equal(atomic_load(&proxy.accepted), 1); /* the same connection throughout */
    rpc_stream_destroy(s);
    rpc_client_destroy(client);
    proxy_stop(&proxy);
    svc_stop(&echo);
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
        cmocka_unit_test(test_client_keeps_connection_when_ping_ack_is_late),
    };
    return cmocka_run_group_tests_name("keepalive", tests, group_setup, group_teardown);
}
