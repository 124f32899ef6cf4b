/* A hung storage node under a subscription, and reopening a broken stream without the
 * application's help (varlog/subscribe.h, "Failures": a stream silent
 * for subscribe.stall.timeout.ms while another log stream shows the wanted GLSN exists is
 * treated as broken).
 *
 * A hung node is made at link time: rpc_stream_open is wrapped so that the first Subscribe
 * stream of one log stream goes to a second server whose Subscribe responses are delayed for
 * a minute. It accepts the call and sends nothing, as a node that hangs does, while the
 * other log stream's stream, on the real server, delivers the GLSNs after the wanted one. */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "client_fixture.h"
#include "rpc_client.h"
#include "snpb/log_io.pb-c.h"
#include "test_support.h"
#include "varlog/subscribe.h"

#define PATH_SUBSCRIBE "/varlog.snpb.LogIO/Subscribe"

static struct {
    pthread_mutex_t mu;
    const char *hung_address; /* where redirected streams go */
    int32_t ls;               /* whose streams are redirected */
    int left;                 /* how many more */
    int redirected;
} w = {.mu = PTHREAD_MUTEX_INITIALIZER};

varlog_err_t __real_rpc_stream_open(rpc_client_t *c, const char *target, const char *method,
                                    const rpc_stream_opts_t *opts, const ProtobufCMessage *request,
                                    rpc_stream_t **out);
varlog_err_t __wrap_rpc_stream_open(rpc_client_t *c, const char *target, const char *method,
                                    const rpc_stream_opts_t *opts, const ProtobufCMessage *request,
                                    rpc_stream_t **out);

varlog_err_t __wrap_rpc_stream_open(rpc_client_t *c, const char *target, const char *method,
                                    const rpc_stream_opts_t *opts, const ProtobufCMessage *request,
                                    rpc_stream_t **out)
{
    pthread_mutex_lock(&w.mu);
    if (w.left > 0 && strcmp(method, PATH_SUBSCRIBE) == 0 &&
        ((const Varlog__Snpb__SubscribeRequest *)request)->log_stream_id == w.ls) {
        w.left--;
        w.redirected++;
        target = w.hung_address;
    }
    pthread_mutex_unlock(&w.mu);
    return __real_rpc_stream_open(c, target, method, opts, request, out);
}

static void redirect(const char *address, int32_t ls, int n)
{
    pthread_mutex_lock(&w.mu);
    w.hung_address = address;
    w.ls = ls;
    w.left = n;
    w.redirected = 0;
    pthread_mutex_unlock(&w.mu);
}

static int redirected(void)
{
    pthread_mutex_lock(&w.mu);
    int n = w.redirected;
    pthread_mutex_unlock(&w.mu);
    return n;
}

/* Appends one record to log stream ls and returns its GLSN. */
static uint64_t append_one(varlog_client_t *c, int32_t ls, const char *text)
{
    varlog_record_t r = cf_record(text);
    varlog_entry_meta_t m;
    assert_int_equal(varlog_append_to(c, 1, ls, &r, 1, 10000, &m, NULL), VARLOG_OK);
    return m.glsn;
}

static varlog_server_t *hung_server(void)
{
    varlog_server_opts_t o = {.topics = 1, .log_streams_per_topic = 2};
    varlog_server_t *hung = NULL;
    assert_int_equal(varlog_server_start(&o, &hung), VARLOG_OK);
    assert_int_equal(varlog_server_delay(hung, PATH_SUBSCRIBE, 60000), VARLOG_OK);
    return hung;
}

/* Log stream 1 holds GLSN 1 and its stream hangs; log stream 2 holds 2..4 and delivers them
 * at once. The merge must wait for 1, see the stall, reopen log stream 1 and deliver 1..4 in
 * order, each once. */
static void test_stalled_stream_is_reopened(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, "subscribe.stall.timeout.ms", "300", NULL);
    varlog_server_t *hung = hung_server();
    assert_int_equal(append_one(f.client, 1, "one"), 1);
    for (uint64_t g = 2; g <= 4; g++)
        assert_int_equal(append_one(f.client, 2, "later"), g);

    redirect(varlog_server_address(hung), 1, 1);
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, 5, &sub), VARLOG_OK);
    varlog_entry_t e;
    for (uint64_t g = 1; g <= 4; g++) {
        assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_OK);
        assert_int_equal(e.meta.glsn, g);
        assert_int_equal(e.meta.log_stream_id, g == 1 ? 1 : 2);
    }
    assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_ERR_END);
    assert_int_equal(redirected(), 1);
    varlog_subscription_stats_t st;
    assert_int_equal(varlog_subscription_stats(sub, &st), VARLOG_OK);
    assert_int_equal(st.stalls, 1);
    assert_int_equal(st.resubscribes, 1);
    assert_int_equal(st.entries, 4);
    assert_int_equal(st.duplicates, 0);
    varlog_subscription_close(&sub);
    /* The hung node got the stream, and the real one the reopened stream. */
    assert_int_equal(varlog_server_call_count(hung, PATH_SUBSCRIBE), 1);
    varlog_server_destroy(hung);
    cf_stop(&f);
}

/* With subscribe.stall.timeout.ms 0 nothing is taken for stalled: the same hung stream holds
 * the subscription until the caller gives up, and no stream is reopened. */
static void test_stall_detection_off(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, "subscribe.stall.timeout.ms", "0", NULL);
    varlog_server_t *hung = hung_server();
    append_one(f.client, 1, "one");
    append_one(f.client, 2, "two");
    redirect(varlog_server_address(hung), 1, 1);
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, 3, &sub), VARLOG_OK);
    varlog_entry_t e;
    assert_int_equal(varlog_subscription_next(sub, 1000, &e), VARLOG_ERR_TIMED_OUT);
    varlog_subscription_stats_t st;
    assert_int_equal(varlog_subscription_stats(sub, &st), VARLOG_OK);
    assert_int_equal(st.stalls, 0);
    assert_int_equal(st.resubscribes, 0);
    assert_int_equal(st.entries, 0);
    varlog_subscription_close(&sub);
    varlog_server_destroy(hung);
    cf_stop(&f);
}

/* A tail whose log streams are all idle has no evidence that anything is missing: it waits
 * without reopening anything, however long the idle time, and then delivers what comes. */
static void test_idle_tail_is_not_a_stall(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, "subscribe.stall.timeout.ms", "100", NULL);
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, VARLOG_GLSN_MAX, &sub), VARLOG_OK);
    varlog_entry_t e;
    assert_int_equal(varlog_subscription_next(sub, 600, &e), VARLOG_ERR_TIMED_OUT);
    assert_int_equal(append_one(f.client, 2, "a"), 1);
    assert_int_equal(append_one(f.client, 1, "b"), 2);
    for (uint64_t g = 1; g <= 2; g++) {
        assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_OK);
        assert_int_equal(e.meta.glsn, g);
    }
    varlog_subscription_stats_t st;
    assert_int_equal(varlog_subscription_stats(sub, &st), VARLOG_OK);
    assert_int_equal(st.stalls, 0);
    assert_int_equal(st.resubscribes, 0);
    assert_int_equal(varlog_server_call_count(f.srv, PATH_SUBSCRIBE), 2);
    varlog_subscription_close(&sub);
    cf_stop(&f);
}

/* A log stream in an outage whose new stream hangs on a live connection while the merge
 * waits for it (log stream 2 already gave a later GLSN) makes no progress by staying open
 * (varlog/subscribe.h, "How long it waits"): with stall detection off, the outage that its
 * first stream's failure began goes on past the second a quiet stream needs elsewhere, and
 * subscribe.retry.timeout.ms ends the subscription with that failure. */
static void test_hung_stream_is_no_progress(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, "subscribe.stall.timeout.ms", "0", "subscribe.retry.timeout.ms", "2000",
             "subscribe.retry.backoff.ms", "1", "subscribe.retry.backoff.max.ms", "5", NULL);
    varlog_server_t *hung = hung_server();
    assert_int_equal(varlog_server_fail_next(hung, PATH_SUBSCRIBE, 14, "injected unavailable", 1),
                     VARLOG_OK);
    append_one(f.client, 1, "one");
    append_one(f.client, 2, "two");
    redirect(varlog_server_address(hung), 1, 2); /* the first fails, the second hangs */
    varlog_subscription_t *sub = NULL;
    int64_t t0 = test_now_ms();
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, 3, &sub), VARLOG_OK);
    varlog_entry_t e;
    varlog_err_t rc = VARLOG_ERR_TIMED_OUT;
    int64_t deadline = t0 + 2000 + cf_wait_bound_ms();
    while (rc == VARLOG_ERR_TIMED_OUT && test_now_ms() < deadline)
        rc = varlog_subscription_next(sub, 100, &e);
    int64_t took = test_now_ms() - t0;
    if (rc != VARLOG_ERR_RPC_UNAVAILABLE)
        fail_msg("%s after %lld ms (%s): the hung stream was taken for progress",
                 varlog_err_name(rc), (long long)took, varlog_last_error());
    if (!strstr(varlog_last_error(), "subscribe.retry.timeout.ms 2000") ||
        !strstr(varlog_last_error(), "injected unavailable"))
        fail_msg("the failure \"%s\" does not name the bound and the last failure",
                 varlog_last_error());
    assert_true(took >= 2000);
    assert_int_equal(redirected(), 2);
    assert_int_equal(varlog_server_call_count(hung, PATH_SUBSCRIBE), 2);
    varlog_subscription_close(&sub);
    varlog_server_destroy(hung);
    cf_stop(&f);
}

typedef struct sub_calls {
    varlog_server_t *srv;
    uint64_t want;
} sub_calls_t;

static bool subscribe_calls_reached(void *arg)
{
    sub_calls_t *w2 = arg;
    return varlog_server_call_count(w2->srv, PATH_SUBSCRIBE) >= w2->want;
}

/* An iterator's broken stream is opened again after its backoff even while nobody calls
 * varlog_subscription_next (the retry task opens it on the engine), so the entries are
 * buffered by the time the application comes back. */
static void test_iterator_reopens_unpolled(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "subscribe.retry.backoff.ms", "50", "subscribe.retry.backoff.max.ms", "50",
             NULL);
    for (int i = 0; i < 10; i++)
        append_one(f.client, 1, "r");
    assert_int_equal(varlog_server_drop_stream_after(f.srv, PATH_SUBSCRIBE, 3, 1), VARLOG_OK);
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, VARLOG_GLSN_MAX, &sub), VARLOG_OK);
    varlog_entry_t e;
    uint64_t got = 0;
    varlog_subscription_stats_t st = {0};
    /* Poll until the break was seen (the retry is scheduled then), then stop polling. */
    int64_t until = test_now_ms() + cf_wait_bound_ms();
    while (st.resubscribes == 0 && test_now_ms() < until) {
        varlog_err_t rc = varlog_subscription_next(sub, 0, &e);
        if (rc == VARLOG_OK)
            assert_int_equal(e.meta.glsn, ++got);
        else
            assert_int_equal(rc, VARLOG_ERR_TIMED_OUT);
        assert_int_equal(varlog_subscription_stats(sub, &st), VARLOG_OK);
    }
    assert_int_equal(st.resubscribes, 1);
    assert_int_equal(got, 3);
    sub_calls_t w2 = {.srv = f.srv, .want = 2};
    assert_true(test_wait_until(subscribe_calls_reached, &w2, cf_wait_bound_ms()));
    for (uint64_t g = 4; g <= 10; g++) {
        assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_OK);
        assert_int_equal(e.meta.glsn, g);
    }
    assert_int_equal(varlog_server_call_count(f.srv, PATH_SUBSCRIBE), 2);
    varlog_subscription_close(&sub);
    cf_stop(&f);
}

/* Appends to log stream 1 every 50 ms, at most TRICKLE_MAX entries, until told to stop: fewer
 * than the next read window's 128 GLSNs, so that its stream receives until the end. */
#define TRICKLE_MAX 120

typedef struct trickle {
    varlog_client_t *client;
    atomic_bool stop;
    atomic_int appended;
} trickle_t;

static void *trickle_main(void *arg)
{
    trickle_t *t = arg;
    while (!atomic_load(&t->stop) && atomic_load(&t->appended) < TRICKLE_MAX) {
        append_one(t->client, 1, "next");
        atomic_fetch_add(&t->appended, 1);
        struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return NULL;
}

/* Read windows of 64 GLSNs per log stream (128 here): log stream 1 holds GLSN 100, near the
 * first window's end, and its stream of that window hangs; log stream 2 holds the rest of
 * the window. Past GLSN 97 the next window's streams open, and log stream 1's (on the real
 * server) receives a trickle of new entries from GLSN 129 on. That traffic is not the hung
 * stream's: the stall is found while the trickle goes on (TRICKLE_MAX entries, 6 s). When it
 * counted as the hung stream's, the stall was found only once the next window's stream
 * stopped receiving: here after the trickle (135 entries in, with 200 of them). */
static void test_stall_beside_the_next_windows_stream(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, "subscribe.stall.timeout.ms", "300", "subscribe.window.bytes", "1", NULL);
    varlog_server_t *hung = hung_server();
    for (uint64_t g = 1; g <= 99; g++)
        assert_int_equal(append_one(f.client, 2, "before"), g);
    assert_int_equal(append_one(f.client, 1, "wanted"), 100);
    for (uint64_t g = 101; g <= 128; g++)
        assert_int_equal(append_one(f.client, 2, "after"), g);

    redirect(varlog_server_address(hung), 1, 1);
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, VARLOG_GLSN_MAX, &sub), VARLOG_OK);
    varlog_entry_t e;
    for (uint64_t g = 1; g <= 99; g++) {
        assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_OK);
        assert_int_equal(e.meta.glsn, g);
    }
    trickle_t t = {.client = f.client};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, trickle_main, &t), 0);
    varlog_err_t rc = varlog_subscription_next(sub, 30000, &e);
    int appended = atomic_load(&t.appended);
    atomic_store(&t.stop, true);
    pthread_join(th, NULL);
    if (rc != VARLOG_OK)
        fail_msg("GLSN 100: %s after %d entries of the trickle", varlog_err_name(rc), appended);
    assert_int_equal(e.meta.glsn, 100);
    if (appended >= TRICKLE_MAX)
        fail_msg("GLSN 100 came only after the trickle ended (%d entries)", appended);
    assert_int_equal(redirected(), 1);
    varlog_subscription_stats_t st;
    assert_int_equal(varlog_subscription_stats(sub, &st), VARLOG_OK);
    assert_int_equal(st.stalls, 1);
    assert_true(st.windows >= 1);
    varlog_subscription_close(&sub);
    varlog_server_destroy(hung);
    cf_stop(&f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stalled_stream_is_reopened),
        cmocka_unit_test(test_stall_detection_off),
        cmocka_unit_test(test_idle_tail_is_not_a_stall),
        cmocka_unit_test(test_hung_stream_is_no_progress),
        cmocka_unit_test(test_iterator_reopens_unpolled),
        cmocka_unit_test(test_stall_beside_the_next_windows_stream),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
