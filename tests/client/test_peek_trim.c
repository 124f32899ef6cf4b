/* varlog_peek and varlog_trim against the embedded server: empty and written log streams,
 * trim round trips, failing and slow nodes, bad input, and (with a hand-made metadata view
 * over two servers) several replicas and several storage nodes answering at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "client_fixture.h"
#include "client_internal.h"
#include "metadata.h"
#include "snpb/log_io.pb-c.h"
#include "test_support.h"
#include "varlog/subscribe.h"
#include "varlogpb/metadata.pb-c.h"

#define TIMEOUT 30000
#define PATH_RMD "/varlog.snpb.LogIO/LogStreamReplicaMetadata"
#define PATH_TRIM "/varlog.snpb.LogIO/TrimDeprecated"
#define PATH_SUBSCRIBE "/varlog.snpb.LogIO/Subscribe"

static const varlog_entry_meta_t SENTINEL = {
    .topic_id = 77, .log_stream_id = 77, .glsn = 77, .llsn = 77};

static void assert_meta(varlog_entry_meta_t m, int32_t topic, int32_t ls, uint64_t glsn,
                        uint64_t llsn)
{
    assert_int_equal(m.topic_id, topic);
    assert_int_equal(m.log_stream_id, ls);
    assert_int_equal(m.glsn, glsn);
    assert_int_equal(m.llsn, llsn);
}

static void assert_untouched(varlog_entry_meta_t m)
{
    assert_memory_equal(&m, &SENTINEL, sizeof(m));
}

static void assert_text_has(const char *what)
{
    const char *text = varlog_last_error();
    if (!strstr(text, what))
        fail_msg("last error \"%s\" does not name \"%s\"", text, what);
}

/* Appends n records to log stream ls of topic; metas get their numbers. */
static void append_n(varlog_client_t *c, int32_t topic, int32_t ls, size_t n,
                     varlog_entry_meta_t *metas)
{
    varlog_record_t recs[8];
    assert_true(n <= 8);
    for (size_t i = 0; i < n; i++)
        recs[i] = cf_record("payload");
    assert_int_equal(varlog_append_to(c, topic, ls, recs, n, TIMEOUT, metas, NULL), VARLOG_OK);
}

static void peek_ok(varlog_client_t *c, int32_t topic, int32_t ls, varlog_entry_meta_t *first,
                    varlog_entry_meta_t *last)
{
    bool complete = false;
    varlog_err_t err = varlog_peek(c, topic, ls, TIMEOUT, first, last, &complete);
    if (err != VARLOG_OK)
        fail_msg("peek %d/%d: %s: %s", topic, ls, varlog_err_name(err), varlog_last_error());
    assert_true(complete);
}

/* A raw Subscribe of [begin, end) on ls through the client's transport: the first receive's
 * result, and the reason of the stream's status when it failed. */
static varlog_err_t raw_subscribe(client_fixture_t *f, int32_t topic, int32_t ls, uint64_t begin,
                                  uint64_t end, char *reason, size_t cap)
{
    rpc_stream_opts_t o = {.kind = RPC_STREAM_SERVER,
                           .response = &varlog__snpb__subscribe_response__descriptor,
                           .recv_window = 4,
                           .timeout_ms = TIMEOUT};
    Varlog__Snpb__SubscribeRequest r = VARLOG__SNPB__SUBSCRIBE_REQUEST__INIT;
    r.topic_id = topic;
    r.log_stream_id = ls;
    r.glsn_begin = begin;
    r.glsn_end = end;
    rpc_stream_t *s = NULL;
    assert_int_equal(rpc_stream_open(f->client->rpc, varlog_server_address(f->srv), PATH_SUBSCRIBE,
                                     &o, &r.base, &s),
                     VARLOG_OK);
    ProtobufCMessage *m = NULL;
    varlog_err_t err = rpc_stream_recv(s, TIMEOUT, &m);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    reason[0] = '\0';
    const rpc_status_t *st = rpc_stream_status(s);
    if (err != VARLOG_OK && st)
        snprintf(reason, cap, "%s", rpc_status_reason(st));
    rpc_stream_destroy(s);
    return err;
}

/* ---- one server ---------------------------------------------------------------------------- */

/* An empty log stream: zeros, complete, one call to its one replica. */
static void test_peek_empty(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    uint64_t calls = varlog_server_call_count(f.srv, PATH_RMD);
    varlog_entry_meta_t first = SENTINEL, last = SENTINEL;
    peek_ok(f.client, 1, 2, &first, &last);
    assert_meta(first, 1, 2, 0, 0);
    assert_meta(last, 1, 2, 0, 0);
    assert_int_equal(varlog_server_call_count(f.srv, PATH_RMD), calls + 1);
    /* complete is optional; -1 is metadata.call.timeout.ms */
    first = last = SENTINEL;
    assert_int_equal(varlog_peek(f.client, 1, 1, -1, &first, &last, NULL), VARLOG_OK);
    assert_meta(first, 1, 1, 0, 0);
    assert_meta(last, 1, 1, 0, 0);
    cf_stop(&f);
}

/* After appends: the first and last entries are those varlog_append_to reported. */
static void test_peek_after_appends(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    varlog_entry_meta_t a[3], b[2], c[2];
    append_n(f.client, 1, 1, 3, a);
    append_n(f.client, 1, 2, 2, b);
    append_n(f.client, 1, 1, 2, c);
    varlog_entry_meta_t first, last;
    peek_ok(f.client, 1, 1, &first, &last);
    assert_meta(first, 1, 1, a[0].glsn, a[0].llsn);
    assert_meta(last, 1, 1, c[1].glsn, c[1].llsn);
    assert_int_equal(last.llsn, 5);
    peek_ok(f.client, 1, 2, &first, &last);
    assert_meta(first, 1, 2, b[0].glsn, b[0].llsn);
    assert_meta(last, 1, 2, b[1].glsn, b[1].llsn);

    /* a sealed log stream is read normally and its tail is final */
    assert_int_equal(varlog_server_seal(f.srv, 1, 2), VARLOG_OK);
    peek_ok(f.client, 1, 2, &first, &last);
    assert_meta(last, 1, 2, b[1].glsn, b[1].llsn);
    cf_stop(&f);
}

/* Trim: one call per storage node whatever the number of log streams; the first entries move
 * past until_glsn in every log stream of the topic; a Subscribe of the trimmed range fails
 * with the node's "trimmed"; a range after it still reads. */
static void test_trim_round_trip(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    varlog_entry_meta_t a[3], b[2], c[1];
    append_n(f.client, 1, 1, 3, a); /* GLSN 1-3 */
    append_n(f.client, 1, 2, 2, b); /* GLSN 4-5 */
    append_n(f.client, 1, 1, 1, c); /* GLSN 6 */
    assert_int_equal(c[0].glsn, 6);
    char reason[128];
    assert_int_equal(raw_subscribe(&f, 1, 1, 1, 7, reason, sizeof(reason)), VARLOG_OK);

    uint64_t calls = varlog_server_call_count(f.srv, PATH_TRIM);
    assert_int_equal(varlog_trim(f.client, 1, 4, TIMEOUT), VARLOG_OK);
    assert_int_equal(varlog_server_call_count(f.srv, PATH_TRIM), calls + 1);

    varlog_entry_meta_t first, last;
    peek_ok(f.client, 1, 1, &first, &last);
    assert_meta(first, 1, 1, c[0].glsn, c[0].llsn);
    assert_meta(last, 1, 1, c[0].glsn, c[0].llsn);
    peek_ok(f.client, 1, 2, &first, &last);
    assert_meta(first, 1, 2, b[1].glsn, b[1].llsn);
    assert_meta(last, 1, 2, b[1].glsn, b[1].llsn);

    uint64_t subs = varlog_server_call_count(f.srv, PATH_SUBSCRIBE);
    varlog_err_t err = raw_subscribe(&f, 1, 1, 1, 7, reason, sizeof(reason));
    assert_int_equal(err, VARLOG_ERR_RPC_OUT_OF_RANGE);
    assert_string_equal(reason, "logstream: trimmed");
    assert_int_equal(varlog_server_call_count(f.srv, PATH_SUBSCRIBE), subs + 1);
    assert_int_equal(raw_subscribe(&f, 1, 1, 5, 7, reason, sizeof(reason)), VARLOG_OK);

    /* -1 is metadata.call.timeout.ms; trimming again below the mark changes nothing */
    assert_int_equal(varlog_trim(f.client, 1, 2, -1), VARLOG_OK);
    peek_ok(f.client, 1, 1, &first, &last);
    assert_meta(first, 1, 1, c[0].glsn, c[0].llsn);
    cf_stop(&f);
}

/* A node that fails: trim reports its error, with the node and the topic in the text, and
 * nothing was deleted; the same for peek on a replica that fails. */
static void test_failing_node(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    const char *addr = varlog_server_address(f.srv);
    varlog_entry_meta_t a[3];
    append_n(f.client, 1, 1, 3, a);

    assert_int_equal(varlog_server_fail_next(f.srv, PATH_TRIM, 14, "node is down", 1), VARLOG_OK);
    assert_int_equal(varlog_trim(f.client, 1, 2, TIMEOUT), VARLOG_ERR_RPC_UNAVAILABLE);
    assert_text_has("trim");
    assert_text_has("topic 1");
    assert_text_has(addr);
    assert_text_has("node is down");
    varlog_entry_meta_t first, last;
    peek_ok(f.client, 1, 1, &first, &last);
    assert_meta(first, 1, 1, a[0].glsn, a[0].llsn);

    assert_int_equal(varlog_server_fail_next(f.srv, PATH_RMD, 5, "no such log stream", 1),
                     VARLOG_OK);
    first = last = SENTINEL;
    bool complete = true;
    assert_int_equal(varlog_peek(f.client, 1, 1, TIMEOUT, &first, &last, &complete),
                     VARLOG_ERR_RPC_NOT_FOUND);
    assert_untouched(first);
    assert_untouched(last);
    assert_true(complete);
    assert_text_has("peek");
    assert_text_has("log stream 1 of topic 1");
    assert_text_has(addr);
    assert_text_has("ERR_RPC_NOT_FOUND");
    assert_text_has("no such log stream");

    /* the faults were one call each */
    assert_int_equal(varlog_trim(f.client, 1, 2, TIMEOUT), VARLOG_OK);
    peek_ok(f.client, 1, 1, &first, &last);
    assert_meta(first, 1, 1, a[2].glsn, a[2].llsn);
    cf_stop(&f);
}

static void test_bad_input(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    varlog_entry_meta_t first = SENTINEL, last = SENTINEL;
    uint64_t rmd = varlog_server_call_count(f.srv, PATH_RMD);
    uint64_t trims = varlog_server_call_count(f.srv, PATH_TRIM);

    assert_int_equal(varlog_peek(NULL, 1, 1, TIMEOUT, &first, &last, NULL), VARLOG_ERR_INVALID_ARG);
    assert_text_has("client is NULL");
    assert_int_equal(varlog_peek(f.client, 1, 1, TIMEOUT, NULL, &last, NULL),
                     VARLOG_ERR_INVALID_ARG);
    assert_text_has("first is NULL");
    assert_int_equal(varlog_peek(f.client, 1, 1, TIMEOUT, &first, NULL, NULL),
                     VARLOG_ERR_INVALID_ARG);
    assert_text_has("last is NULL");
    assert_int_equal(varlog_peek(f.client, 0, 1, TIMEOUT, &first, &last, NULL),
                     VARLOG_ERR_INVALID_ARG);
    assert_text_has("topic id 0");
    assert_int_equal(varlog_peek(f.client, 1, -3, TIMEOUT, &first, &last, NULL),
                     VARLOG_ERR_INVALID_ARG);
    assert_text_has("log stream id -3");
    assert_int_equal(varlog_peek(f.client, 9, 1, TIMEOUT, &first, &last, NULL),
                     VARLOG_ERR_UNKNOWN_TOPIC);
    assert_text_has("peek: topic 9 is not in the metadata");
    assert_int_equal(varlog_peek(f.client, 1, 9, TIMEOUT, &first, &last, NULL),
                     VARLOG_ERR_UNKNOWN_LOG_STREAM);
    assert_text_has("peek: topic 1 has no log stream 9");
    assert_untouched(first);
    assert_untouched(last);

    assert_int_equal(varlog_trim(NULL, 1, 1, TIMEOUT), VARLOG_ERR_INVALID_ARG);
    assert_text_has("client is NULL");
    assert_int_equal(varlog_trim(f.client, 0, 1, TIMEOUT), VARLOG_ERR_INVALID_ARG);
    assert_text_has("topic id 0");
    assert_int_equal(varlog_trim(f.client, 1, 0, TIMEOUT), VARLOG_ERR_INVALID_ARG);
    assert_text_has("until_glsn 0");
    assert_int_equal(varlog_trim(f.client, 1, VARLOG_GLSN_MAX, TIMEOUT), VARLOG_ERR_INVALID_ARG);
    assert_text_has("until_glsn 18446744073709551615");
    assert_int_equal(varlog_trim(f.client, 9, 1, TIMEOUT), VARLOG_ERR_UNKNOWN_TOPIC);
    assert_text_has("trim: topic 9 is not in the metadata");

    /* nothing reached a storage node */
    assert_int_equal(varlog_server_call_count(f.srv, PATH_RMD), rmd);
    assert_int_equal(varlog_server_call_count(f.srv, PATH_TRIM), trims);

    /* a topic added after the client opened is found by the refresh; without log streams no
     * node holds it */
    int32_t topic = 0;
    assert_int_equal(varlog_server_add_topic(f.srv, &topic), VARLOG_OK);
    assert_int_equal(varlog_trim(f.client, topic, 1, TIMEOUT), VARLOG_ERR_NO_LOG_STREAM);
    char want[64];
    snprintf(want, sizeof(want), "no storage node holds a replica of topic %d", topic);
    assert_text_has(want);
    assert_int_equal(varlog_server_call_count(f.srv, PATH_TRIM), trims);
    cf_stop(&f);
}

/* A replica that does not answer: TIMED_OUT once the caller's timeout (or, for -1,
 * metadata.call.timeout.ms) passed, not earlier and not much later; the same for trim. */
static void test_delayed_replica_times_out(void **state)
{
    (void)state;
    client_fixture_t f;
    int64_t call_timeout = test_under_valgrind() ? 4000 : 1000;
    char call_timeout_s[16];
    snprintf(call_timeout_s, sizeof(call_timeout_s), "%lld", (long long)call_timeout);
    cf_start(&f, 1, 1, "metadata.call.timeout.ms", call_timeout_s, NULL);
    const char *addr = varlog_server_address(f.srv);
    varlog_entry_meta_t first = SENTINEL, last = SENTINEL;
    /* the channel is connected: what follows measures the wait, not the connection */
    peek_ok(f.client, 1, 1, &first, &last);
    first = last = SENTINEL;
    assert_int_equal(varlog_server_delay(f.srv, PATH_RMD, 120000), VARLOG_OK);
    assert_int_equal(varlog_server_delay(f.srv, PATH_TRIM, 120000), VARLOG_OK);
    int64_t slack = cf_wait_bound_ms();
    /* The lower bounds leave room below each timeout: the server enforces the deadline as
     * well, from the grpc-timeout header and gRPC core's clock reading cached per poll, which
     * on a slow run (valgrind) lags, so its expiry can come tens of ms before the client's. */

    int64_t t0 = test_now_ms();
    assert_int_equal(varlog_peek(f.client, 1, 1, 300, &first, &last, NULL), VARLOG_ERR_TIMED_OUT);
    int64_t took = test_now_ms() - t0;
    assert_true(took >= 150);
    assert_true(took < 300 + slack);
    assert_untouched(first);
    assert_untouched(last);
    assert_text_has("ERR_TIMED_OUT");
    assert_text_has(addr);

    t0 = test_now_ms();
    assert_int_equal(varlog_peek(f.client, 1, 1, -1, &first, &last, NULL), VARLOG_ERR_TIMED_OUT);
    took = test_now_ms() - t0;
    if (took < call_timeout * 3 / 4 || took >= call_timeout + slack)
        fail_msg("peek with metadata.call.timeout.ms %lld took %lld ms: %s",
                 (long long)call_timeout, (long long)took, varlog_last_error());

    t0 = test_now_ms();
    assert_int_equal(varlog_trim(f.client, 1, 1, 300), VARLOG_ERR_TIMED_OUT);
    took = test_now_ms() - t0;
    assert_true(took >= 150);
    assert_true(took < 300 + slack);
    assert_text_has("trim: topic 1");

    /* 0 and below -1 are refused, as by varlog_append, and no call is made */
    uint64_t calls = varlog_server_call_count(f.srv, PATH_RMD);
    assert_int_equal(varlog_peek(f.client, 1, 1, 0, &first, &last, NULL), VARLOG_ERR_INVALID_ARG);
    assert_text_has("timeout_ms 0");
    assert_int_equal(varlog_trim(f.client, 1, 1, -2), VARLOG_ERR_INVALID_ARG);
    assert_text_has("timeout_ms -2");
    assert_int_equal(varlog_server_call_count(f.srv, PATH_RMD), calls);
    cf_stop(&f);
}

/* ---- a hand-made view over two servers -------------------------------------------------- */

/* Metadata whose storage nodes 1 and 2 are the two servers (node 9 has no address): topic 1
 * holds log stream 1 with replicas on nodes 1, 9 and 2, and log stream 2 on node 2 only. */
static md_view_t *two_node_view(const char *addr1, const char *addr2)
{
    Varlog__Varlogpb__StorageNode sn[2] = {VARLOG__VARLOGPB__STORAGE_NODE__INIT,
                                           VARLOG__VARLOGPB__STORAGE_NODE__INIT};
    Varlog__Varlogpb__StorageNodeDescriptor snd[2] = {
        VARLOG__VARLOGPB__STORAGE_NODE_DESCRIPTOR__INIT,
        VARLOG__VARLOGPB__STORAGE_NODE_DESCRIPTOR__INIT};
    Varlog__Varlogpb__StorageNodeDescriptor *snp[2] = {&snd[0], &snd[1]};
    sn[0].storage_node_id = 1;
    sn[0].address = (char *)addr1;
    sn[1].storage_node_id = 2;
    sn[1].address = (char *)addr2;
    snd[0].storage_node = &sn[0];
    snd[1].storage_node = &sn[1];

    Varlog__Varlogpb__ReplicaDescriptor rd[3] = {VARLOG__VARLOGPB__REPLICA_DESCRIPTOR__INIT,
                                                 VARLOG__VARLOGPB__REPLICA_DESCRIPTOR__INIT,
                                                 VARLOG__VARLOGPB__REPLICA_DESCRIPTOR__INIT};
    rd[0].storage_node_id = 1;
    rd[1].storage_node_id = 9;
    rd[2].storage_node_id = 2;
    Varlog__Varlogpb__ReplicaDescriptor *ls1_reps[3] = {&rd[0], &rd[1], &rd[2]};
    Varlog__Varlogpb__ReplicaDescriptor *ls2_reps[1] = {&rd[2]};
    Varlog__Varlogpb__LogStreamDescriptor lsd[2] = {VARLOG__VARLOGPB__LOG_STREAM_DESCRIPTOR__INIT,
                                                    VARLOG__VARLOGPB__LOG_STREAM_DESCRIPTOR__INIT};
    lsd[0].topic_id = 1;
    lsd[0].log_stream_id = 1;
    lsd[0].n_replicas = 3;
    lsd[0].replicas = ls1_reps;
    lsd[1].topic_id = 1;
    lsd[1].log_stream_id = 2;
    lsd[1].n_replicas = 1;
    lsd[1].replicas = ls2_reps;
    Varlog__Varlogpb__LogStreamDescriptor *lsp[2] = {&lsd[0], &lsd[1]};

    int32_t ids[2] = {1, 2};
    Varlog__Varlogpb__TopicDescriptor td = VARLOG__VARLOGPB__TOPIC_DESCRIPTOR__INIT;
    td.topic_id = 1;
    td.n_log_streams = 2;
    td.log_streams = ids;
    Varlog__Varlogpb__TopicDescriptor *tdp[1] = {&td};

    Varlog__Varlogpb__MetadataDescriptor md = VARLOG__VARLOGPB__METADATA_DESCRIPTOR__INIT;
    md.applied_index = 1000000;
    md.n_storage_nodes = 2;
    md.storage_nodes = snp;
    md.n_log_streams = 2;
    md.log_streams = lsp;
    md.n_topics = 1;
    md.topics = tdp;
    md_view_t *v = md_view_build(&md.base);
    assert_non_null(v);
    return v;
}

/* A view keeps every replica's address that resolves, in the metadata's order. */
static void test_view_keeps_replicas(void **state)
{
    (void)state;
    md_view_t *v = two_node_view("127.0.0.1:1", "127.0.0.1:2");
    const md_log_stream_t *l = md_view_log_stream(v, 1, 1);
    assert_non_null(l);
    assert_int_equal(l->n_replicas, 2);
    assert_string_equal(l->replicas[0], "127.0.0.1:1");
    assert_string_equal(l->replicas[1], "127.0.0.1:2");
    assert_ptr_equal(l->primary, l->replicas[0]);
    l = md_view_log_stream(v, 1, 2);
    assert_non_null(l);
    assert_int_equal(l->n_replicas, 1);
    assert_string_equal(l->primary, "127.0.0.1:2");
    md_view_unref(v);

    /* and so does the view a client builds from the server's metadata */
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    v = md_current(f.client);
    l = md_view_log_stream(v, 1, 1);
    assert_non_null(l);
    assert_int_equal(l->n_replicas, 1);
    assert_string_equal(l->replicas[0], varlog_server_address(f.srv));
    md_view_unref(v);
    cf_stop(&f);
}

/* Two servers act as two replicas of log stream 1 (and server 2 holds log stream 2). */
typedef struct two {
    client_fixture_t f1, f2;
    const char *addr1, *addr2;
} two_t;

static void two_start(two_t *t)
{
    cf_start(&t->f1, 1, 2, NULL);
    cf_start(&t->f2, 1, 2, NULL);
    t->addr1 = varlog_server_address(t->f1.srv);
    t->addr2 = varlog_server_address(t->f2.srv);
    /* refresh.interval.ms is 0 and no id below is unknown: nothing replaces this view */
    client_install_view(t->f1.client, two_node_view(t->addr1, t->addr2));
}

static void two_stop(two_t *t)
{
    cf_stop(&t->f1);
    cf_stop(&t->f2);
}

/* Peek asks every replica: first is the highest low watermark, last the highest high
 * watermark, whichever replica reports them; one failing replica does not fail it, all
 * failing gives the first replica's error with every replica's failure in the text. */
static void test_peek_several_replicas(void **state)
{
    (void)state;
    two_t t;
    two_start(&t);
    /* replica 1 (server 1, written through the hand-made view's primary): LLSN 1-5;
     * replica 2 (server 2, through its own client, which knows no other node): LLSN 1-4,
     * trimmed through LLSN 2 */
    varlog_client_t *c1 = t.f1.client;
    varlog_entry_meta_t m1[5], m2[4];
    append_n(c1, 1, 1, 5, m1);
    append_n(t.f2.client, 1, 1, 4, m2);
    assert_int_equal(varlog_trim(t.f2.client, 1, m2[1].glsn, TIMEOUT), VARLOG_OK);
    uint64_t rmd1 = varlog_server_call_count(t.f1.srv, PATH_RMD);
    uint64_t rmd2 = varlog_server_call_count(t.f2.srv, PATH_RMD);

    varlog_entry_meta_t first = SENTINEL, last = SENTINEL;
    peek_ok(c1, 1, 1, &first, &last);
    assert_meta(first, 1, 1, m2[2].glsn, m2[2].llsn); /* replica 2's */
    assert_meta(last, 1, 1, m1[4].glsn, m1[4].llsn);  /* replica 1's */
    assert_int_equal(varlog_server_call_count(t.f1.srv, PATH_RMD), rmd1 + 1);
    assert_int_equal(varlog_server_call_count(t.f2.srv, PATH_RMD), rmd2 + 1);

    /* replica 1 fails: replica 2 alone answers */
    assert_int_equal(varlog_server_fail_next(t.f1.srv, PATH_RMD, 5, "gone", 1), VARLOG_OK);
    peek_ok(c1, 1, 1, &first, &last);
    assert_meta(first, 1, 1, m2[2].glsn, m2[2].llsn);
    assert_meta(last, 1, 1, m2[3].glsn, m2[3].llsn);

    /* both fail: replica 1's error, both named */
    assert_int_equal(varlog_server_fail_next(t.f1.srv, PATH_RMD, 5, "gone one", 1), VARLOG_OK);
    assert_int_equal(varlog_server_fail_next(t.f2.srv, PATH_RMD, 14, "gone two", 1), VARLOG_OK);
    first = last = SENTINEL;
    assert_int_equal(varlog_peek(c1, 1, 1, TIMEOUT, &first, &last, NULL), VARLOG_ERR_RPC_NOT_FOUND);
    assert_untouched(first);
    assert_text_has(t.addr1);
    assert_text_has("gone one");
    assert_text_has(t.addr2);
    assert_text_has("gone two");

    /* a replica that does not answer costs the deadline once: the others run meanwhile and
     * their answer stands (asked one after the other, replica 2 would get no time) */
    assert_int_equal(varlog_server_delay(t.f1.srv, PATH_RMD, 120000), VARLOG_OK);
    int64_t budget = test_under_valgrind() ? 15000 : 3000;
    assert_int_equal(varlog_peek(c1, 1, 1, budget, &first, &last, NULL), VARLOG_OK);
    assert_meta(first, 1, 1, m2[2].glsn, m2[2].llsn);
    assert_meta(last, 1, 1, m2[3].glsn, m2[3].llsn);
    two_stop(&t);
}

/* Trim goes once to each distinct node holding a replica of the topic; one node accepting
 * is enough; all failing gives the first node's error. */
static void test_trim_several_nodes(void **state)
{
    (void)state;
    two_t t;
    two_start(&t);
    varlog_entry_meta_t m[3];
    append_n(t.f1.client, 1, 1, 3, m);
    append_n(t.f2.client, 1, 2, 3, m);
    varlog_client_t *c1 = t.f1.client;
    uint64_t tr1 = varlog_server_call_count(t.f1.srv, PATH_TRIM);
    uint64_t tr2 = varlog_server_call_count(t.f2.srv, PATH_TRIM);
    assert_int_equal(varlog_trim(c1, 1, 1, TIMEOUT), VARLOG_OK);
    assert_int_equal(varlog_server_call_count(t.f1.srv, PATH_TRIM), tr1 + 1);
    assert_int_equal(varlog_server_call_count(t.f2.srv, PATH_TRIM), tr2 + 1);
    varlog_entry_meta_t first, last;
    peek_ok(t.f2.client, 1, 2, &first, &last); /* f2 sees server 2 alone */
    assert_int_equal(first.glsn, 2);

    assert_int_equal(varlog_server_fail_next(t.f1.srv, PATH_TRIM, 14, "down one", 1), VARLOG_OK);
    assert_int_equal(varlog_trim(c1, 1, 2, TIMEOUT), VARLOG_OK);
    peek_ok(t.f2.client, 1, 2, &first, &last);
    assert_int_equal(first.glsn, 3);

    assert_int_equal(varlog_server_fail_next(t.f1.srv, PATH_TRIM, 14, "down one", 1), VARLOG_OK);
    assert_int_equal(varlog_server_fail_next(t.f2.srv, PATH_TRIM, 9, "down two", 1), VARLOG_OK);
    assert_int_equal(varlog_trim(c1, 1, 3, TIMEOUT), VARLOG_ERR_RPC_UNAVAILABLE);
    assert_text_has(t.addr1);
    assert_text_has("down one");
    assert_text_has(t.addr2);
    assert_text_has("down two");
    assert_int_equal(varlog_server_call_count(t.f1.srv, PATH_TRIM), tr1 + 3);
    assert_int_equal(varlog_server_call_count(t.f2.srv, PATH_TRIM), tr2 + 3);
    two_stop(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peek_empty),
        cmocka_unit_test(test_peek_after_appends),
        cmocka_unit_test(test_trim_round_trip),
        cmocka_unit_test(test_failing_node),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_delayed_replica_times_out),
        cmocka_unit_test(test_view_keeps_replicas),
        cmocka_unit_test(test_peek_several_replicas),
        cmocka_unit_test(test_trim_several_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
