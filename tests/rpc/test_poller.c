/* Streams completed on their consumer's thread (rpc_poller_t, rpc/include/rpc_client.h)
 * against the server transport's test-only Transport service: the completions run inside
 * the owner's poll and nowhere else, a kick wakes a poll, a stream released with batches
 * outstanding finishes in the poller's destroy, and the polling rule (rpc_client.c): the
 * client's I/O thread stays parked while a poller's owner holds the polling role (issue
 * 25), and polls, reading a server's close at once, when the owner lapsed or released it.
 *
 * gRPC's backup poller (a timer that polls a channel every 5 s when nothing else does) is
 * turned off in main, so that a close no thread of the client reads stays unread and a
 * broken rule fails here every time rather than sometimes. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rpc_client.h"
#include "test_service.h"
#include "test_support.h"
#include "transport_test.pb-c.h"
#include "wire.h"

struct fixture {
    struct svc svc;
    rpc_client_t *client;
    rpc_poller_t *poller;
    /* the notify hook's view */
    atomic_int notified, notified_elsewhere;
    pthread_t owner;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(svc_start(&f->svc, 0), VARLOG_OK);
    assert_int_equal(rpc_client_new(&f->client), VARLOG_OK);
    assert_int_equal(rpc_poller_new(f->client, &f->poller), VARLOG_OK);
    rpc_poller_own(f->poller);
    f->owner = pthread_self();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    /* Ends the streams a failed test left behind, so that the poller's destroy returns. */
    rpc_client_shutdown(f->client);
    rpc_poller_destroy(f->poller);
    rpc_client_destroy(f->client);
    svc_stop(&f->svc);
    free(f);
    return 0;
}

static void on_notify(void *arg)
{
    struct fixture *f = arg;
    atomic_fetch_add(&f->notified, 1);
    if (!pthread_equal(pthread_self(), f->owner))
        atomic_fetch_add(&f->notified_elsewhere, 1);
}

static rpc_stream_opts_t poller_opts(struct fixture *f)
{
    rpc_stream_opts_t o;
    memset(&o, 0, sizeof(o));
    o.kind = RPC_STREAM_BIDI;
    o.response = response_desc;
    o.recv_window = 64;
    o.timeout_ms = -1;
    o.notify = on_notify;
    o.notify_arg = f;
    o.poller = f->poller;
    return o;
}

static void send_seq(rpc_stream_t *s, uint64_t seq)
{
    request_t req = LIBVARLOG__TRANSPORTTEST__REQUEST__INIT;
    req.seq = seq;
    assert_int_equal(rpc_stream_send(s, &req.base), VARLOG_OK);
}

static bool seen_all(void *arg)
{
    struct svc *svc = arg;
    return atomic_load(&svc->bidi_seen) >= atomic_load(&svc->target);
}

static bool svc_calls_done(void *arg)
{
    struct svc *svc = arg;
    return atomic_load(&svc->done) == atomic_load(&svc->started);
}

/* The server has answered every request, yet nothing reached the stream before its owner
 * polled; then the owner's timed receive polls, and every completion (the notify hook
 * included) ran on the owner's thread. */
static void test_completed_only_by_the_owner(void **state)
{
    struct fixture *f = *state;
    rpc_stream_opts_t o = poller_opts(f);
    rpc_stream_t *s = NULL;
    assert_int_equal(rpc_stream_open(f->client, f->svc.addr, BIDI, &o, NULL, &s), VARLOG_OK);
    assert_int_equal(rpc_poller_live(f->poller), 1);
    /* One round trip first: the connection comes up only as the owner polls. */
    send_seq(s, 1);
    ProtobufCMessage *m = NULL;
    assert_int_equal(rpc_stream_recv(s, 10000, &m), VARLOG_OK);
    protobuf_c_message_free_unpacked(m, NULL);
    /* Its send's completion may still wait in the queue: run it (rpc_stream_sent polls), so
     * that the next send starts at once rather than from that completion. */
    assert_int_equal(rpc_stream_sent(s, 10000), 1);
    int notified = atomic_load(&f->notified);
    assert_true(notified >= 1);
    const uint64_t n = 20;
    atomic_store(&f->svc.target, 2);
    for (uint64_t i = 2; i <= n + 1; i++)
        send_seq(s, i);
    /* On a live connection the first send's write goes out from this thread as it starts
     * (the next ones start from its completion, in a poll); the server answers it, and the
     * answer does not reach the stream, nor the hook run, until the owner polls. What is
     * under test is an absence over a time, which no event can show: 100 ms of watching, a
     * hundred times the answer's round trip here. A slow machine makes the watch weaker, not
     * the test wrong: nothing may arrive however long it lasts. */
    assert_true(test_wait_until(seen_all, &f->svc, 10000));
    nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
    assert_int_equal(rpc_stream_buffered(s), 0);
    assert_int_equal(atomic_load(&f->notified), notified);
    for (uint64_t i = 2; i <= n + 1; i++) {
        m = NULL;
        assert_int_equal(rpc_stream_recv(s, 10000, &m), VARLOG_OK);
        assert_int_equal(((response_t *)m)->seq, i);
        protobuf_c_message_free_unpacked(m, NULL);
    }
    assert_true(atomic_load(&f->notified) > notified);
    assert_int_equal(atomic_load(&f->notified_elsewhere), 0);
    assert_int_equal(rpc_stream_close_send(s), VARLOG_OK);
    assert_int_equal(rpc_stream_recv(s, 10000, &m), VARLOG_ERR_END);
    assert_int_equal(rpc_stream_sent(s, 1000), n + 1);
    rpc_stream_destroy(s);
    assert_int_equal(rpc_poller_live(f->poller), 0);
    assert_int_equal(rpc_client_live_calls(f->client), 0);
}

static void *kicker_main(void *arg)
{
    rpc_poller_kick(arg);
    return NULL;
}

/* A kick from another thread ends a poll that would otherwise wait 10 s; a poll with
 * nothing to do returns false at its deadline. */
static void test_kick_ends_a_poll(void **state)
{
    struct fixture *f = *state;
    int64_t t0 = test_now_ms();
    assert_false(rpc_poller_poll(f->poller, t0 + 50));
    assert_true(test_now_ms() - t0 >= 49);
    pthread_t th;
    t0 = test_now_ms();
    assert_int_equal(pthread_create(&th, NULL, kicker_main, f->poller), 0);
    assert_true(rpc_poller_poll(f->poller, t0 + 10000));
    int64_t took = test_now_ms() - t0;
    pthread_join(th, NULL);
    print_message("    kicked poll returned after %lld ms\n", (long long)took);
    assert_true(took < 5000);
}

/* Streams released with their batches outstanding (a receive, a send, the status) finish
 * as their owner polls; the poller's destroy polls until they did, and the client then has
 * no call left. Valgrind's copy of this test checks that nothing leaks. */
static void test_released_streams_finish_in_destroy(void **state)
{
    struct fixture *f = *state;
    rpc_stream_opts_t o = poller_opts(f);
    rpc_stream_t *s[3];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rpc_stream_open(f->client, f->svc.addr, BIDI, &o, NULL, &s[i]), VARLOG_OK);
        send_seq(s[i], 1);
        send_seq(s[i], 2);
    }
    ProtobufCMessage *m = NULL;
    assert_int_equal(rpc_stream_recv(s[0], 10000, &m), VARLOG_OK); /* one is live */
    protobuf_c_message_free_unpacked(m, NULL);
    for (int i = 0; i < 3; i++)
        rpc_stream_destroy(s[i]);
    assert_true(rpc_poller_live(f->poller) > 0); /* nobody polled since */
    assert_true(rpc_client_live_calls(f->client) > 0);
    rpc_poller_destroy(f->poller);
    f->poller = NULL;
    assert_int_equal(rpc_client_live_calls(f->client), 0);
    assert_true(test_wait_until(svc_calls_done, &f->svc, 10000));
}

/* Round trips one at a time on a poller's stream: its owner polled and holds the polling
 * role, so the client's I/O thread, with no call of its own, stays parked instead of polling
 * beside it and taking a wake-up per event (when it never parked: 351 in 200 round trips). */
static void test_io_thread_parked_while_only_pollers_run(void **state)
{
    struct fixture *f = *state;
    rpc_stream_opts_t o = poller_opts(f);
    rpc_stream_t *s = NULL;
    assert_int_equal(rpc_stream_open(f->client, f->svc.addr, BIDI, &o, NULL, &s), VARLOG_OK);
    send_seq(s, 1); /* the connection is up before counting */
    ProtobufCMessage *m = NULL;
    assert_int_equal(rpc_stream_recv(s, 10000, &m), VARLOG_OK);
    protobuf_c_message_free_unpacked(m, NULL);
    long before = test_thread_switches_tid(rpc_client_io_tid(f->client));
    const uint64_t n = (uint64_t)test_scale(200, 10);
    for (uint64_t i = 2; i <= n + 1; i++) {
        send_seq(s, i);
        assert_int_equal(rpc_stream_recv(s, 10000, &m), VARLOG_OK);
        assert_int_equal(((response_t *)m)->seq, i);
        protobuf_c_message_free_unpacked(m, NULL);
    }
    long woke = test_thread_switches_tid(rpc_client_io_tid(f->client)) - before;
    print_message("    varlog-io woke %ld times in %llu round trips\n", woke,
                  (unsigned long long)n);
    assert_true(woke <= 5);
    rpc_stream_destroy(s);
}

static bool svc_gone_for_client(void *arg)
{
    struct fixture *f = arg;
    return !rpc_client_target_ready(f->client, f->svc.addr);
}

static bool io_thread_polls(void *arg)
{
    return rpc_client_polling_holders(arg) == 0;
}

/* One round trip on a poller's stream: its owner polled, so it holds the polling role. */
static rpc_stream_t *open_and_hold(struct fixture *f)
{
    rpc_stream_opts_t o = poller_opts(f);
    rpc_stream_t *s = NULL;
    assert_int_equal(rpc_stream_open(f->client, f->svc.addr, BIDI, &o, NULL, &s), VARLOG_OK);
    send_seq(s, 1);
    ProtobufCMessage *m = NULL;
    assert_int_equal(rpc_stream_recv(s, 10000, &m), VARLOG_OK);
    protobuf_c_message_free_unpacked(m, NULL);
    assert_int_equal(rpc_client_polling_holders(f->client), 1);
    return s;
}

/* The server stops while the stream is open and its owner does not poll: the I/O thread,
 * polling in the owner's place, reads the close (the channel leaves READY). With the backup
 * poller off nothing else would: a parked I/O thread never sees it. */
static void server_close_read(struct fixture *f)
{
    assert_true(rpc_client_target_ready(f->client, f->svc.addr));
    svc_stop(&f->svc);
    int64_t within_ms = test_under_valgrind() || test_under_tsan() ? 10000 : 3000;
    if (!test_wait_until(svc_gone_for_client, f, within_ms))
        fail_msg("the server's close was not read within %lld ms while the poller's owner "
                 "was away",
                 (long long)within_ms);
    assert_int_equal(svc_start(&f->svc, 0), VARLOG_OK); /* for the teardown */
}

/* An owner that releases the role (the appender's thread before it sleeps on its condition
 * variable): the I/O thread polls at once. */
static void test_close_read_after_owner_released(void **state)
{
    struct fixture *f = *state;
    rpc_stream_t *s = open_and_hold(f);
    rpc_poller_release(f->poller);
    assert_int_equal(rpc_client_polling_holders(f->client), 0);
    server_close_read(f);
    rpc_stream_destroy(s);
}

/* An owner that lapses (an iterator's reader returning from next): it holds the role for
 * RPC_POLL_LAPSE_MS, a time under test (50 ms: checked from below exactly, from above with
 * slack for a loaded machine), then the I/O thread takes over and reads the close. */
static void test_close_read_after_owner_lapsed(void **state)
{
    struct fixture *f = *state;
    rpc_stream_t *s = open_and_hold(f);
    int64_t t0 = test_now_ms();
    rpc_poller_lapse(f->poller);
    assert_int_equal(rpc_client_polling_holders(f->client), 1); /* still held */
    int64_t slack_ms = test_under_valgrind() || test_under_tsan() ? 10000 : 2000;
    assert_true(test_wait_until(io_thread_polls, f->client, RPC_POLL_LAPSE_MS + slack_ms));
    int64_t took = test_now_ms() - t0;
    print_message("    the lapse ended after %lld ms (RPC_POLL_LAPSE_MS %d)\n", (long long)took,
                  RPC_POLL_LAPSE_MS);
    assert_true(took >= RPC_POLL_LAPSE_MS);
    server_close_read(f);
    rpc_stream_destroy(s);
}

/* A lapsed owner that polls again within its lapse keeps the role without a kick or a
 * hand-over: the I/O thread stays parked through round trips with lapses between them. */
static void test_lapse_and_return_keeps_io_parked(void **state)
{
    struct fixture *f = *state;
    rpc_stream_t *s = open_and_hold(f);
    long before = test_thread_switches_tid(rpc_client_io_tid(f->client));
    int64_t t0 = test_now_ms();
    const uint64_t n = (uint64_t)test_scale(200, 10);
    ProtobufCMessage *m = NULL;
    for (uint64_t i = 2; i <= n + 1; i++) {
        send_seq(s, i);
        assert_int_equal(rpc_stream_recv(s, 10000, &m), VARLOG_OK);
        protobuf_c_message_free_unpacked(m, NULL);
        rpc_poller_lapse(f->poller);
    }
    int64_t periods = (test_now_ms() - t0) / RPC_POLL_LAPSE_MS + 1;
    long woke = test_thread_switches_tid(rpc_client_io_tid(f->client)) - before;
    print_message("    varlog-io woke %ld times in %llu round trips with a lapse after each, "
                  "%lld lapse periods\n",
                  woke, (unsigned long long)n, (long long)periods);
    /* Not per round trip: the lapse's clock starts once and runs out only if the owner stays
     * away; at most two wake-ups per lapse period the loop took (its own time, measured). */
    assert_true(woke <= 5 + 2 * periods);
    rpc_stream_destroy(s);
}

/* A stream opened without a notify hook runs none; one set later (rpc_stream_set_notify)
 * runs for the completions after it, and clearing it stops it again (a subscription's next
 * read window's stream, announced only once taken into use). */
static void test_notify_set_later(void **state)
{
    struct fixture *f = *state;
    rpc_stream_opts_t o = poller_opts(f);
    o.notify = NULL;
    o.notify_arg = NULL;
    rpc_stream_t *s = NULL;
    assert_int_equal(rpc_stream_open(f->client, f->svc.addr, BIDI, &o, NULL, &s), VARLOG_OK);
    ProtobufCMessage *m = NULL;
    send_seq(s, 1);
    assert_int_equal(rpc_stream_recv(s, 10000, &m), VARLOG_OK);
    protobuf_c_message_free_unpacked(m, NULL);
    assert_int_equal(atomic_load(&f->notified), 0);
    rpc_stream_set_notify(s, on_notify, f);
    send_seq(s, 2);
    assert_int_equal(rpc_stream_recv(s, 10000, &m), VARLOG_OK);
    protobuf_c_message_free_unpacked(m, NULL);
    int notified = atomic_load(&f->notified);
    assert_true(notified >= 1);
    rpc_stream_set_notify(s, NULL, NULL);
    send_seq(s, 3);
    assert_int_equal(rpc_stream_recv(s, 10000, &m), VARLOG_OK);
    protobuf_c_message_free_unpacked(m, NULL);
    assert_int_equal(atomic_load(&f->notified), notified);
    rpc_stream_destroy(s);
}

int main(void)
{
    /* Before gRPC starts (rpc_client_new, in the set-up): see the file's comment. */
    setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "0", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_completed_only_by_the_owner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kick_ends_a_poll, setup, teardown),
        cmocka_unit_test_setup_teardown(test_notify_set_later, setup, teardown),
        cmocka_unit_test_setup_teardown(test_released_streams_finish_in_destroy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_io_thread_parked_while_only_pollers_run, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_close_read_after_owner_released, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_read_after_owner_lapsed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lapse_and_return_keeps_io_parked, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
