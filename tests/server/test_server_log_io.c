/* The embedded server's LogIO service through the client transport: append/subscribe round
 * trips, ordering across log streams, tailing, SubscribeTo, trim, sealing, bad requests,
 * the byte limit, and many concurrent subscribers with bounded memory. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server_test_util.h"
#include "subscribe_range_cases.h"
#include "test_support.h"

static int setup(void **state)
{
    return fixture_setup(state, 2, 2); /* topic 1: LS 1, 2; topic 2: LS 3, 4 */
}

static int teardown(void **state)
{
    return fixture_teardown(state);
}

/* Pipelined batches on one stream get one response each, in order, with consecutive GLSN
 * and LLSN; a subscription of the committed range returns them and ends with OK. */
static void test_append_subscribe_round_trip(void **state)
{
    srv_fixture_t *f = *state;
    uint64_t g[4], l[4];
    assert_int_equal(append_batches(f, 1, 1, 4, 3, g, l, NULL, NULL), VARLOG_OK);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(g[i], 1 + 3 * (uint64_t)i);
        assert_int_equal(l[i], 1 + 3 * (uint64_t)i);
    }
    rpc_stream_t *s = subscribe_open(f, false, 1, 1, 1, 13, 4);
    uint64_t gs[16], ls[16];
    size_t n = 0;
    assert_int_equal(subscribe_collect(s, 16, T_TIMEOUT, gs, ls, &n), VARLOG_ERR_END);
    assert_int_equal(n, 12);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(gs[i], i + 1);
        assert_int_equal(ls[i], i + 1);
    }
    rpc_stream_destroy(s);

    /* The payloads come back as sent. */
    s = subscribe_open(f, false, 1, 1, 2, 3, 1);
    ProtobufCMessage *m = NULL;
    assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_OK);
    const Varlog__Snpb__SubscribeResponse *r = (const Varlog__Snpb__SubscribeResponse *)m;
    assert_int_equal(r->payload.len, 3);
    assert_memory_equal(r->payload.data, "p-1", 3);
    free_msg(m);
    assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_ERR_END);
    rpc_stream_destroy(s);
}

/* GLSNs are dense across the topic, LLSNs per log stream; merging the two log streams'
 * subscriptions by GLSN gives 1..N. Topic 2 numbers on its own. */
static void test_ordering_across_two_log_streams(void **state)
{
    srv_fixture_t *f = *state;
    const size_t rounds = 10;
    for (size_t i = 0; i < rounds; i++) {
        uint64_t g1, l1, g2, l2;
        assert_int_equal(append_batches(f, 1, 1, 1, 2, &g1, &l1, NULL, NULL), VARLOG_OK);
        assert_int_equal(append_batches(f, 1, 2, 1, 1, &g2, &l2, NULL, NULL), VARLOG_OK);
        assert_int_equal(g1, 3 * i + 1);
        assert_int_equal(g2, 3 * i + 3);
        assert_int_equal(l1, 2 * i + 1);
        assert_int_equal(l2, i + 1);
    }
    uint64_t g3;
    assert_int_equal(append_batches(f, 2, 3, 1, 1, &g3, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(g3, 1);

    uint64_t end = 3 * rounds + 1;
    uint64_t a[64], b[64], al[64], bl[64];
    size_t na = 0, nb = 0;
    rpc_stream_t *s1 = subscribe_open(f, false, 1, 1, 1, end, 64);
    rpc_stream_t *s2 = subscribe_open(f, false, 1, 2, 1, end, 64);
    assert_int_equal(subscribe_collect(s1, 64, T_TIMEOUT, a, al, &na), VARLOG_ERR_END);
    assert_int_equal(subscribe_collect(s2, 64, T_TIMEOUT, b, bl, &nb), VARLOG_ERR_END);
    assert_int_equal(na, 2 * rounds);
    assert_int_equal(nb, rounds);
    size_t i = 0, j = 0;
    for (uint64_t want = 1; want < end; want++) {
        if (i < na && a[i] == want) {
            assert_int_equal(al[i], i + 1);
            i++;
        } else {
            assert_true(j < nb);
            assert_int_equal(b[j], want);
            assert_int_equal(bl[j], j + 1);
            j++;
        }
    }
    rpc_stream_destroy(s1);
    rpc_stream_destroy(s2);
}

/* A subscription whose end is not committed yet tails: it receives new entries as they are
 * appended. A bounded one whose entries in range were all sent before the range was committed
 * stays open once another log stream took the rest of it, as on a real node: only the reader
 * ends it (subscribe_range_cases.c has the other ends of a range). */
static void test_tailing(void **state)
{
    srv_fixture_t *f = *state;
    rpc_stream_t *tail = subscribe_open(f, false, 1, 1, 1, UINT64_MAX, 8);
    rpc_stream_t *bounded = subscribe_open(f, false, 1, 1, 1, 5, 8);
    ProtobufCMessage *m = NULL;
    assert_int_equal(rpc_stream_recv(tail, 100, &m), VARLOG_ERR_TIMED_OUT);

    assert_int_equal(append_batches(f, 1, 1, 1, 2, NULL, NULL, NULL, NULL), VARLOG_OK); /* 1,2 */
    uint64_t g[8];
    size_t n = 0;
    assert_int_equal(subscribe_collect(tail, 2, T_TIMEOUT, g, NULL, &n), VARLOG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(g[1], 2);
    assert_int_equal(subscribe_collect(bounded, 2, T_TIMEOUT, g, NULL, &n), VARLOG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(rpc_stream_recv(bounded, 100, &m), VARLOG_ERR_TIMED_OUT);

    /* GLSN 3..4 go to LS 2: the range is committed, and the bounded LS 1 stream waits on. */
    assert_int_equal(append_batches(f, 1, 2, 1, 2, NULL, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(rpc_stream_recv(bounded, 300, &m), VARLOG_ERR_TIMED_OUT);
    assert_int_equal(rpc_stream_recv(tail, 100, &m), VARLOG_ERR_TIMED_OUT);

    assert_int_equal(append_batches(f, 1, 1, 3, 1, NULL, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(subscribe_collect(tail, 3, T_TIMEOUT, g, NULL, &n), VARLOG_OK);
    assert_int_equal(n, 3);
    assert_int_equal(g[0], 5);
    assert_int_equal(g[2], 7);
    rpc_stream_destroy(tail);
    rpc_stream_destroy(bounded);
}

/* Where a GLSN range's stream ends, as on a real node (the same cases run against one in
 * test_cluster_wire). */
static void test_range_ends(void **state)
{
    subscribe_range_cases_run(*state, 1, 1, 2);
}

/* SubscribeTo: an LLSN range of LogEntry messages carrying only the LLSN and the data, as a
 * real storage node sends them (topic, log stream and GLSN are 0); ends after end - 1, tails
 * otherwise. */
static void test_subscribe_to(void **state)
{
    srv_fixture_t *f = *state;
    assert_int_equal(append_batches(f, 1, 2, 1, 1, NULL, NULL, NULL, NULL), VARLOG_OK); /* g1 */
    assert_int_equal(append_batches(f, 1, 1, 1, 5, NULL, NULL, NULL, NULL), VARLOG_OK); /* g2-6 */
    rpc_stream_t *s = subscribe_open(f, true, 1, 1, 2, 5, 8);
    ProtobufCMessage *m = NULL;
    assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_OK);
    const Varlog__Snpb__SubscribeToResponse *r = (const Varlog__Snpb__SubscribeToResponse *)m;
    assert_int_equal(r->log_entry->meta->topic_id, 0);
    assert_int_equal(r->log_entry->meta->log_stream_id, 0);
    assert_int_equal(r->log_entry->meta->llsn, 2);
    assert_int_equal(r->log_entry->meta->glsn, 0);
    assert_int_equal(r->log_entry->data.len, 3);
    assert_memory_equal(r->log_entry->data.data, "p-1", 3);
    free_msg(m);
    uint64_t g[8], l[8];
    size_t n = 0;
    assert_int_equal(subscribe_collect(s, 8, T_TIMEOUT, g, l, &n), VARLOG_ERR_END);
    assert_int_equal(n, 2);
    assert_int_equal(l[1], 4);
    rpc_stream_destroy(s);

    s = subscribe_open(f, true, 1, 1, 5, 8, 8);
    assert_int_equal(subscribe_collect(s, 1, T_TIMEOUT, g, l, &n), VARLOG_OK);
    assert_int_equal(l[0], 5);
    assert_int_equal(rpc_stream_recv(s, 100, &m), VARLOG_ERR_TIMED_OUT);
    assert_int_equal(append_batches(f, 1, 1, 1, 2, NULL, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(subscribe_collect(s, 8, T_TIMEOUT, g, l, &n), VARLOG_ERR_END);
    assert_int_equal(n, 2);
    assert_int_equal(l[1], 7);
    assert_int_equal(g[1], 0);
    rpc_stream_destroy(s);
}

static void assert_trimmed(rpc_stream_t *s)
{
    ProtobufCMessage *m = NULL;
    assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_ERR_RPC_OUT_OF_RANGE);
    const rpc_status_t *st = rpc_stream_status(s);
    assert_non_null(st);
    assert_string_equal(st->message, "log stream: logstream: trimmed");
    assert_int_equal(st->n_details, 2);
    assert_string_equal(st->details[0], "log stream: logstream: trimmed");
    assert_string_equal(st->details[1], "logstream: trimmed");
    assert_string_equal(rpc_status_reason(st), "logstream: trimmed");
    rpc_stream_destroy(s);
}

/* Trim deletes a GLSN prefix of every log stream of the topic; reads below it answer
 * OutOfRange with Varlog's detail chain; the watermarks and stored bytes follow. */
static void test_trim(void **state)
{
    srv_fixture_t *f = *state;
    assert_int_equal(append_batches(f, 1, 1, 1, 4, NULL, NULL, NULL, NULL), VARLOG_OK); /* 1-4 */
    assert_int_equal(append_batches(f, 1, 2, 1, 4, NULL, NULL, NULL, NULL), VARLOG_OK); /* 5-8 */
    uint64_t before = varlog_server_stored_bytes(f->srv);
    assert_int_equal(before, 8 * 3);
    assert_int_equal(trim_call(f, 1, 6), VARLOG_OK);
    assert_int_equal(varlog_server_stored_bytes(f->srv), 2 * 3);
    /* Beyond the high watermark, unknown topic: refused per replica, still OK. */
    assert_int_equal(trim_call(f, 1, 100), VARLOG_OK);
    assert_int_equal(trim_call(f, 9, 1), VARLOG_OK);

    assert_trimmed(subscribe_open(f, false, 1, 1, 1, 5, 4));
    assert_trimmed(subscribe_open(f, false, 1, 2, 6, 9, 4));
    assert_trimmed(subscribe_open(f, true, 1, 2, 1, 5, 4));
    /* LS 1 lost every entry: an LLSN range ending at its next LLSN is out of range too. */
    assert_trimmed(subscribe_open(f, true, 1, 1, 4, 5, 4));

    rpc_stream_t *s = subscribe_open(f, false, 1, 2, 7, 9, 4);
    uint64_t g[4], l[4];
    size_t n = 0;
    assert_int_equal(subscribe_collect(s, 4, T_TIMEOUT, g, l, &n), VARLOG_ERR_END);
    assert_int_equal(n, 2);
    assert_int_equal(g[0], 7);
    assert_int_equal(l[0], 3);
    rpc_stream_destroy(s);

    Varlog__Snpb__LogStreamReplicaMetadataResponse *md = NULL;
    assert_int_equal(replica_md(f, 1, 2, &md, NULL), VARLOG_OK);
    const Varlog__Snpb__LogStreamReplicaMetadataDescriptor *d = md->log_stream_replica;
    assert_int_equal(d->local_low_watermark->llsn, 3);
    assert_int_equal(d->local_low_watermark->glsn, 7);
    assert_int_equal(d->local_high_watermark->llsn, 4);
    assert_int_equal(d->local_high_watermark->glsn, 8);
    assert_int_equal(d->global_high_watermark, 8);
    free_msg(md);
    assert_int_equal(replica_md(f, 1, 1, &md, NULL), VARLOG_OK);
    d = md->log_stream_replica;
    assert_int_equal(d->local_low_watermark->llsn, 0);
    assert_int_equal(d->local_high_watermark->glsn, 0);
    free_msg(md);

    /* Numbering continues after the trim. */
    uint64_t g9, l5;
    assert_int_equal(append_batches(f, 1, 1, 1, 1, &g9, &l5, NULL, NULL), VARLOG_OK);
    assert_int_equal(g9, 9);
    assert_int_equal(l5, 5);
}

/* A sealed log stream refuses appends with FailedPrecondition "sealed" and stays readable;
 * unsealing lets appends continue where they stopped. */
static void test_sealed(void **state)
{
    srv_fixture_t *f = *state;
    assert_int_equal(append_batches(f, 1, 1, 1, 2, NULL, NULL, NULL, NULL), VARLOG_OK);
    uint64_t idx = varlog_server_applied_index(f->srv);
    assert_int_equal(varlog_server_seal(f->srv, 1, 1), VARLOG_OK);
    assert_true(varlog_server_applied_index(f->srv) > idx);
    rpc_status_t st;
    rpc_status_init(&st);
    size_t answered = 99;
    assert_int_equal(append_batches(f, 1, 1, 2, 1, NULL, NULL, &answered, &st),
                     VARLOG_ERR_RPC_FAILED_PRECONDITION);
    assert_int_equal(answered, 0);
    assert_string_equal(st.message, "sealed");
    assert_int_equal(st.n_details, 0);
    rpc_status_clear(&st);
    /* Other log streams are not affected. */
    assert_int_equal(append_batches(f, 1, 2, 1, 1, NULL, NULL, NULL, NULL), VARLOG_OK);

    Varlog__Snpb__LogStreamReplicaMetadataResponse *md = NULL;
    assert_int_equal(replica_md(f, 1, 1, &md, NULL), VARLOG_OK);
    assert_int_equal(md->log_stream_replica->status,
                     VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED);
    free_msg(md);
    rpc_stream_t *s = subscribe_open(f, false, 1, 1, 1, 3, 4);
    size_t n = 0;
    assert_int_equal(subscribe_collect(s, 4, T_TIMEOUT, NULL, NULL, &n), VARLOG_ERR_END);
    assert_int_equal(n, 2);
    rpc_stream_destroy(s);

    assert_int_equal(varlog_server_unseal(f->srv, 1, 1), VARLOG_OK);
    uint64_t g, l;
    assert_int_equal(append_batches(f, 1, 1, 1, 1, &g, &l, NULL, NULL), VARLOG_OK);
    assert_int_equal(g, 4);
    assert_int_equal(l, 3);
    assert_int_equal(varlog_server_seal(f->srv, 1, 99), VARLOG_ERR_RPC_NOT_FOUND);
}

static void expect_append_error(srv_fixture_t *f, const Varlog__Snpb__AppendRequest *const *reqs,
                                size_t n, size_t answered_want, varlog_err_t code,
                                const char *message)
{
    rpc_stream_opts_t o = {.kind = RPC_STREAM_BIDI,
                           .response = &varlog__snpb__append_response__descriptor,
                           .recv_window = 16,
                           .timeout_ms = T_TIMEOUT,
                           .wait_for_ready = false,
                           .notify = NULL,
                           .notify_arg = NULL,
                           .deadline_ms = 0};
    rpc_stream_t *s = NULL;
    assert_int_equal(rpc_stream_open(f->client, f->addr, M_PATH_APPEND, &o, NULL, &s), VARLOG_OK);
    for (size_t i = 0; i < n; i++)
        rpc_stream_send(s, &reqs[i]->base);
    size_t answered = 0;
    ProtobufCMessage *m = NULL;
    varlog_err_t err;
    while ((err = rpc_stream_recv(s, T_TIMEOUT, &m)) == VARLOG_OK) {
        answered++;
        free_msg(m);
    }
    assert_int_equal(err, code);
    assert_int_equal(answered, answered_want);
    assert_string_equal(rpc_stream_status(s)->message, message);
    rpc_stream_destroy(s);
}

/* Bad requests are answered with the status a Go storage node sends; on Append the requests
 * before the failing one are still answered. */
static void test_bad_requests(void **state)
{
    srv_fixture_t *f = *state;
    Varlog__Snpb__AppendRequest *good = append_request(1, 1, 1, "g");
    Varlog__Snpb__AppendRequest *empty = append_request(1, 1, 0, "e");
    Varlog__Snpb__AppendRequest *other = append_request(1, 2, 1, "o");
    Varlog__Snpb__AppendRequest *unknown = append_request(1, 3, 1, "u");
    Varlog__Snpb__AppendRequest *no_topic = append_request(7, 1, 1, "t");
    Varlog__Snpb__AppendRequest *zero = append_request(0, 1, 1, "z");
    Varlog__Snpb__AppendRequest *zero_ls = append_request(1, 0, 1, "z");

    const Varlog__Snpb__AppendRequest *r1[] = {good, good, empty, good};
    expect_append_error(f, r1, 4, 2, VARLOG_ERR_RPC_INVALID_ARGUMENT,
                        "rpc error: code = InvalidArgument desc = no payload");
    const Varlog__Snpb__AppendRequest *r2[] = {good, other};
    expect_append_error(f, r2, 2, 1, VARLOG_ERR_RPC_INVALID_ARGUMENT,
                        "rpc error: code = InvalidArgument desc = unmatched topic or logstream");
    /* LS 3 exists, but in topic 2: the pair decides. */
    const Varlog__Snpb__AppendRequest *r3[] = {unknown};
    expect_append_error(f, r3, 1, 0, VARLOG_ERR_RPC_NOT_FOUND,
                        "rpc error: code = NotFound desc = no such log stream");
    const Varlog__Snpb__AppendRequest *r4[] = {no_topic};
    expect_append_error(f, r4, 1, 0, VARLOG_ERR_RPC_NOT_FOUND,
                        "rpc error: code = NotFound desc = no such log stream");
    const Varlog__Snpb__AppendRequest *r5[] = {zero};
    expect_append_error(f, r5, 1, 0, VARLOG_ERR_RPC_INVALID_ARGUMENT,
                        "rpc error: code = InvalidArgument desc = invalid topic 0");
    const Varlog__Snpb__AppendRequest *r6[] = {zero_ls};
    expect_append_error(f, r6, 1, 0, VARLOG_ERR_RPC_INVALID_ARGUMENT,
                        "rpc error: code = InvalidArgument desc = invalid log stream 0");
    append_request_free(good);
    append_request_free(empty);
    append_request_free(other);
    append_request_free(unknown);
    append_request_free(no_topic);
    append_request_free(zero);
    append_request_free(zero_ls);
    /* Failed requests stored nothing: 3 good ones were answered. */
    uint64_t g;
    assert_int_equal(append_batches(f, 1, 1, 1, 1, &g, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(g, 4);

    ProtobufCMessage *m = NULL;
    rpc_stream_t *s = subscribe_open(f, false, 1, 1, 5, 5, 4);
    assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_ERR_RPC_INVALID_ARGUMENT);
    assert_int_equal(rpc_stream_status(s)->n_details, 1);
    rpc_stream_destroy(s);
    s = subscribe_open(f, false, 1, 1, 9, 3, 4);
    assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_ERR_RPC_INVALID_ARGUMENT);
    rpc_stream_destroy(s);
    s = subscribe_open(f, true, 1, 1, 3, 3, 4);
    assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_ERR_RPC_INVALID_ARGUMENT);
    rpc_stream_destroy(s);
    s = subscribe_open(f, false, 1, 4, 1, 3, 4);
    assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_ERR_RPC_NOT_FOUND);
    assert_string_equal(rpc_stream_status(s)->message, "no such log stream");
    rpc_stream_destroy(s);
    s = subscribe_open(f, true, 5, 1, 1, 3, 4);
    assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_ERR_RPC_NOT_FOUND);
    rpc_stream_destroy(s);
    s = subscribe_open(f, false, 0, 1, 1, 3, 4);
    assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_ERR_RPC_INVALID_ARGUMENT);
    rpc_stream_destroy(s);

    Varlog__Snpb__LogStreamReplicaMetadataResponse *md = NULL;
    rpc_status_t st;
    rpc_status_init(&st);
    assert_int_equal(replica_md(f, 2, 1, &md, &st), VARLOG_ERR_RPC_NOT_FOUND);
    assert_string_equal(st.message, "no such log stream");
    assert_int_equal(replica_md(f, 1, -1, &md, &st), VARLOG_ERR_RPC_INVALID_ARGUMENT);
    rpc_status_clear(&st);
}

/* A full node (refuse_when_full): an append beyond the byte limit fails with
 * RESOURCE_EXHAUSTED and stores nothing; trimming makes room again. */
static void test_byte_limit(void **state)
{
    (void)state;
    srv_fixture_t f;
    fixture_start_full(&f, 1, 1, 40);
    assert_int_equal(append_batches(&f, 1, 1, 1, 10, NULL, NULL, NULL, NULL), VARLOG_OK); /* 30B */
    rpc_status_t st;
    rpc_status_init(&st);
    assert_int_equal(append_batches(&f, 1, 1, 1, 4, NULL, NULL, NULL, &st),
                     VARLOG_ERR_RPC_RESOURCE_EXHAUSTED);
    assert_string_equal(st.message, "storage: byte limit reached");
    rpc_status_clear(&st);
    assert_int_equal(varlog_server_stored_bytes(f.srv), 30);
    assert_int_equal(trim_call(&f, 1, 5), VARLOG_OK);
    uint64_t g;
    assert_int_equal(append_batches(&f, 1, 1, 1, 4, &g, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(g, 11);
    fixture_stop(&f);
}

/* A replica's metadata: status, watermarks, versions and every sub-message present. */
static void test_replica_metadata(void **state)
{
    srv_fixture_t *f = *state;
    Varlog__Snpb__LogStreamReplicaMetadataResponse *md = NULL;
    assert_int_equal(replica_md(f, 2, 4, &md, NULL), VARLOG_OK);
    const Varlog__Snpb__LogStreamReplicaMetadataDescriptor *d = md->log_stream_replica;
    assert_non_null(d);
    assert_non_null(d->log_stream_replica);
    assert_non_null(d->log_stream_replica->storage_node);
    assert_int_equal(d->log_stream_replica->storage_node->storage_node_id, 1);
    assert_int_equal(d->log_stream_replica->topic_log_stream->topic_id, 2);
    assert_int_equal(d->log_stream_replica->topic_log_stream->log_stream_id, 4);
    assert_int_equal(d->status, VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING);
    assert_non_null(d->local_low_watermark);
    assert_non_null(d->local_high_watermark);
    assert_non_null(d->created_time);
    assert_non_null(d->updated_time);
    assert_int_equal(d->local_high_watermark->llsn, 0);
    free_msg(md);

    assert_int_equal(append_batches(f, 2, 3, 1, 2, NULL, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(append_batches(f, 2, 4, 2, 3, NULL, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(replica_md(f, 2, 4, &md, NULL), VARLOG_OK);
    d = md->log_stream_replica;
    assert_int_equal(d->global_high_watermark, 8);
    assert_int_equal(d->local_low_watermark->llsn, 1);
    assert_int_equal(d->local_low_watermark->glsn, 3);
    assert_int_equal(d->local_high_watermark->llsn, 6);
    assert_int_equal(d->local_high_watermark->glsn, 8);
    assert_int_equal(d->storage_size_bytes, 18);
    assert_true(d->version >= 3);
    free_msg(md);
}

struct many {
    srv_fixture_t *f;
    size_t n;
};

static bool all_subscribed(void *arg)
{
    struct many *m = arg;
    server_stats_t st;
    server_stats(m->f->srv, &st);
    return st.subscribers == m->n && st.waiting == m->n;
}

static bool none_subscribed(void *arg)
{
    struct many *m = arg;
    server_stats_t st;
    server_stats(m->f->srv, &st);
    return st.subscribers == 0;
}

/* 1,000, scaled down under valgrind and ThreadSanitizer, which slow gRPC down tenfold. */
static size_t many_count(void)
{
    return test_under_tsan() ? 100 : (size_t)test_scale(1000, 10);
}

/* Appends entries payloads of size bytes to (1, 1) on stream a (opened here if NULL). */
static rpc_stream_t *append_big(srv_fixture_t *f, rpc_stream_t *a, size_t entries, size_t size)
{
    if (!a) {
        /* No deadline for the whole call: a caller keeps the stream across a long phase
         * (opening and reading the many subscribers took over 10 s under TSan on a loaded
         * machine, and the call then ended DEADLINE_EXCEEDED); each receive is bounded. */
        rpc_stream_opts_t o = {.kind = RPC_STREAM_BIDI,
                               .response = &varlog__snpb__append_response__descriptor,
                               .recv_window = 4,
                               .timeout_ms = -1,
                               .wait_for_ready = false,
                               .notify = NULL,
                               .notify_arg = NULL,
                               .deadline_ms = 0};
        assert_int_equal(rpc_stream_open(f->client, f->addr, M_PATH_APPEND, &o, NULL, &a),
                         VARLOG_OK);
    }
    Varlog__Snpb__AppendRequest r = VARLOG__SNPB__APPEND_REQUEST__INIT;
    r.topic_id = 1;
    r.log_stream_id = 1;
    uint8_t *big = calloc(entries, size);
    ProtobufCBinaryData *p = calloc(entries, sizeof(*p));
    assert_non_null(big);
    assert_non_null(p);
    for (size_t i = 0; i < entries; i++) {
        p[i].data = big + i * size;
        p[i].len = size;
    }
    r.n_payload = entries;
    r.payload = p;
    assert_int_equal(rpc_stream_send(a, &r.base), VARLOG_OK);
    ProtobufCMessage *m = NULL;
    assert_int_equal(rpc_stream_recv(a, T_TIMEOUT, &m), VARLOG_OK);
    free_msg(m);
    free(big);
    free(p);
    return a;
}

/* 1,000 concurrent tailing subscribers: each reads the log, waits in the server without
 * holding anything queued, and is woken by the next commit. */
static void test_many_tailing_subscribers(void **state)
{
    srv_fixture_t *f = *state;
    const size_t n = many_count(), entries = 8;
    rpc_stream_t *a = append_big(f, NULL, entries, 1024);
    int64_t t0 = test_now_ms();
    rpc_stream_t **subs = calloc(n, sizeof(*subs));
    assert_non_null(subs);
    for (size_t i = 0; i < n; i++)
        subs[i] = subscribe_open(f, false, 1, 1, 1, UINT64_MAX, 2);
    for (size_t i = 0; i < n; i++) {
        size_t got = 0;
        assert_int_equal(subscribe_collect(subs[i], entries, T_TIMEOUT, NULL, NULL, &got),
                         VARLOG_OK);
        assert_int_equal(got, entries);
    }
    struct many mm = {f, n};
    assert_true(test_wait_until(all_subscribed, &mm, T_TIMEOUT));
    server_stats_t st;
    server_stats(f->srv, &st);
    assert_int_equal(st.queued_sends, 0);

    append_big(f, a, 1, 16);
    for (size_t i = 0; i < n; i++) {
        uint64_t g = 0;
        size_t got = 0;
        assert_int_equal(subscribe_collect(subs[i], 1, T_TIMEOUT, &g, NULL, &got), VARLOG_OK);
        assert_int_equal(g, entries + 1);
    }
    print_message("%zu tailing subscribers: opened, read, woken in %lld ms\n", n,
                  (long long)(test_now_ms() - t0));
    for (size_t i = 0; i < n; i++)
        rpc_stream_destroy(subs[i]);
    free(subs);
    assert_true(test_wait_until(none_subscribed, &mm, 3 * T_TIMEOUT));
    rpc_stream_destroy(a);
}

struct stalled {
    rpc_stream_t **subs;
    size_t n;
};

static bool all_delivered_one(void *arg)
{
    struct stalled *s = arg;
    for (size_t i = 0; i < s->n; i++) {
        if (rpc_stream_buffered(s->subs[i]) == 0)
            return false;
    }
    return true;
}

/* 1,000 subscribers of a 1 MiB log that do not read: the server produces lazily, so each
 * holds at most one batch in the server while HTTP/2 flow control stalls it, and memory
 * stays far below the 1 GiB that buffering every range would take. */
static void test_many_stalled_subscribers_bounded_memory(void **state)
{
    srv_fixture_t *f = *state;
    const size_t n = many_count(), entries = test_under_tsan() ? 32 : 256, size = 4096;
    rpc_stream_destroy(append_big(f, NULL, entries, size));
    long rss0 = test_rss_kib();
    struct stalled sl = {calloc(n, sizeof(rpc_stream_t *)), n};
    assert_non_null(sl.subs);
    for (size_t i = 0; i < n; i++)
        sl.subs[i] = subscribe_open(f, false, 1, 1, 1, UINT64_MAX, 1);
    assert_true(test_wait_until(all_delivered_one, &sl, 30000));
    /* Sample while stalled: the bound must hold throughout, not at one instant. The 300 ms
     * is how long we watch (every 20 ms), not a wait for anything: the stall lasts until
     * the subscribers are read, so any window shows the same bound. */
    size_t max_queued = 0;
    long max_rss = 0;
    int64_t until = test_now_ms() + 300;
    do {
        server_stats_t st;
        server_stats(f->srv, &st);
        assert_int_equal(st.subscribers, n);
        if (st.queued_sends > max_queued)
            max_queued = st.queued_sends;
        long rss = test_rss_kib();
        if (rss > max_rss)
            max_rss = rss;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    } while (test_now_ms() < until);
    long growth = max_rss - rss0;
    print_message("%zu stalled subscribers of %zu KiB each: RSS growth %ld KiB (%ld KiB per "
                  "subscriber), at most %zu messages queued in the server\n",
                  n, entries * size / 1024, growth, growth / (long)n, max_queued);
    assert_true(max_queued <= n * 8);
    /* Buffering every range would take 1 GiB of payload alone. Lazy production takes what
     * gRPC holds for stalled streams on both ends, which grows with how fast the transfer
     * ran before the stall (its flow-control windows follow the measured bandwidth): 73 MiB
     * at nice 19 beside busy loops, 230-380 MiB on a quiet 2-core VM, where the old bound of
     * 256 MiB failed 7 runs in a row after passing earlier the same day. Half of the eager
     * total still tells lazy from eager at any speed. Under valgrind, TSan and ASan resident
     * memory measures their allocators, not ours; the queue bound above holds everywhere. */
    if (!test_under_valgrind() && !test_under_tsan() && !test_under_asan())
        assert_true(growth < (long)(n * entries * size / 1024 / 2));

    /* They still work: one of them reads its whole range (1 MiB, which under TSan and a
     * loaded CI machine took over 10 s per receive once). */
    size_t got = 0;
    int64_t per_recv_ms = test_under_tsan() ? 6 * T_TIMEOUT : T_TIMEOUT;
    assert_int_equal(subscribe_collect(sl.subs[0], entries, per_recv_ms, NULL, NULL, &got),
                     VARLOG_OK);
    assert_int_equal(got, entries);
    for (size_t i = 0; i < n; i++)
        rpc_stream_destroy(sl.subs[i]);
    free(sl.subs);
    struct many mm = {f, n};
    assert_true(test_wait_until(none_subscribed, &mm, 3 * T_TIMEOUT));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_append_subscribe_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ordering_across_two_log_streams, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tailing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_range_ends, setup, teardown),
        cmocka_unit_test_setup_teardown(test_subscribe_to, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sealed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
        cmocka_unit_test(test_byte_limit),
        cmocka_unit_test_setup_teardown(test_replica_metadata, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_tailing_subscribers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_stalled_subscribers_bounded_memory, setup,
                                        teardown),
    };
    if (getenv("TEST_FILTER"))
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
