/* append_resolve (client/src/append_resolve.h) against the embedded server: batches found,
 * absent under a seal, unknown without one or when their bytes sit twice in the window, the
 * window's start (after_llsn, a trimmed prefix) and cap, several batches and the send order,
 * the ambiguous append the server's drop-after-write fault makes, GLSNs read back on a topic
 * whose log streams interleave, and the deadline. Also the server's side of it: the replica
 * status and watermarks through seal and unseal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "append_resolve.h"
#include "client_fixture.h"
#include "client_internal.h"
#include "log_io_codec.h"
#include "snpb/log_io.pb-c.h"
#include "test_support.h"
#include "varlog/subscribe.h"
#include "wire.h"

#define TIMEOUT 30000
#define PATH_RMD "/varlog.snpb.LogIO/LogStreamReplicaMetadata"
#define PATH_SUBSCRIBE "/varlog.snpb.LogIO/Subscribe"
#define PATH_SUBSCRIBE_TO "/varlog.snpb.LogIO/SubscribeTo"
#define MAX_RECS 16

/* One batch's records as the appender keeps them: codec_put_payload encodings. */
typedef struct batch {
    uint8_t enc[1024];
    varlog_entry_meta_t metas[MAX_RECS];
    resolve_batch_t b;
} batch_t;

static void batch_init(batch_t *t, const char *const *recs, size_t n)
{
    assert_true(n <= MAX_RECS);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(len + strlen(recs[i]) + CODEC_PAYLOAD_OVERHEAD_MAX <= sizeof(t->enc));
        len += codec_put_payload(t->enc + len, recs[i], strlen(recs[i]));
    }
    memset(t->metas, 0x77, sizeof(t->metas));
    t->b = (resolve_batch_t){.payloads = t->enc,
                             .len = len,
                             .n_records = (uint32_t)n,
                             .metas = t->metas,
                             .verdict = RESOLVE_FOUND}; /* the pass must overwrite it */
}

static void batch1(batch_t *t, const char *rec)
{
    batch_init(t, &rec, 1);
}

/* Appends recs as one batch to log stream ls of topic 1; metas get their positions. */
static void append_strs(client_fixture_t *f, int32_t ls, const char *const *recs, size_t n,
                        varlog_entry_meta_t *metas)
{
    varlog_record_t r[MAX_RECS];
    assert_true(n <= MAX_RECS);
    for (size_t i = 0; i < n; i++)
        r[i] = cf_record(recs[i]);
    varlog_err_t err = varlog_append_to(f->client, 1, ls, r, n, TIMEOUT, metas, NULL);
    if (err != VARLOG_OK)
        fail_msg("append: %s: %s", varlog_err_name(err), varlog_last_error());
}

static varlog_entry_meta_t append1(client_fixture_t *f, int32_t ls, const char *rec)
{
    varlog_entry_meta_t m;
    append_strs(f, ls, &rec, 1, &m);
    return m;
}

/* One pass over batches[0..n) of log stream ls of topic 1; why printed for the record. */
static varlog_err_t resolve(client_fixture_t *f, int32_t ls, uint64_t after, batch_t **batches,
                            size_t n, uint64_t window_max, char *why, size_t cap)
{
    resolve_batch_t bs[8];
    assert_true(n <= 8);
    for (size_t i = 0; i < n; i++)
        bs[i] = batches[i]->b;
    resolve_req_t req = {.topic_id = 1,
                         .log_stream_id = ls,
                         .after_llsn = after,
                         .deadline_ms = wire_deadline_ms(TIMEOUT),
                         .batches = bs,
                         .n = n,
                         .window_max = window_max};
    varlog_err_t err = append_resolve(f->client, &req, why, cap);
    for (size_t i = 0; i < n; i++)
        batches[i]->b.verdict = bs[i].verdict;
    print_message("resolve: %s: %s\n", varlog_err_name(err), why);
    return err;
}

static void assert_verdict(const batch_t *t, resolve_verdict_t v)
{
    static const char *const names[] = {"UNKNOWN", "FOUND", "ABSENT"};
    if (t->b.verdict != v)
        fail_msg("verdict %s, expected %s", names[t->b.verdict], names[v]);
}

static void assert_metas(const batch_t *t, const varlog_entry_meta_t *want)
{
    for (uint32_t i = 0; i < t->b.n_records; i++) {
        assert_int_equal(t->metas[i].topic_id, want[i].topic_id);
        assert_int_equal(t->metas[i].log_stream_id, want[i].log_stream_id);
        assert_int_equal(t->metas[i].glsn, want[i].glsn);
        assert_int_equal(t->metas[i].llsn, want[i].llsn);
    }
}

static void assert_has(const char *text, const char *what)
{
    if (!strstr(text, what))
        fail_msg("\"%s\" does not say \"%s\"", text, what);
}

/* ---- the server's side ----------------------------------------------------------------------- */

/* LogStreamReplicaMetadata of log stream ls of topic 1 through the client's transport. */
static void replica_md(client_fixture_t *f, int32_t ls, int *status, uint64_t lo[2], uint64_t hi[2])
{
    Varlog__Snpb__LogStreamReplicaMetadataRequest req =
        VARLOG__SNPB__LOG_STREAM_REPLICA_METADATA_REQUEST__INIT;
    req.topic_id = 1;
    req.log_stream_id = ls;
    ProtobufCMessage *resp = NULL;
    assert_int_equal(rpc_unary(f->client->rpc, varlog_server_address(f->srv), PATH_RMD, &req.base,
                               &varlog__snpb__log_stream_replica_metadata_response__descriptor,
                               TIMEOUT, &resp, NULL),
                     VARLOG_OK);
    const Varlog__Snpb__LogStreamReplicaMetadataDescriptor *d =
        ((Varlog__Snpb__LogStreamReplicaMetadataResponse *)resp)->log_stream_replica;
    assert_non_null(d);
    *status = (int)d->status;
    lo[0] = d->local_low_watermark->llsn;
    lo[1] = d->local_low_watermark->glsn;
    hi[0] = d->local_high_watermark->llsn;
    hi[1] = d->local_high_watermark->glsn;
    protobuf_c_message_free_unpacked(resp, NULL);
}

/* Status SEALED after seal, RUNNING after unseal, watermarks {llsn, glsn} of the first and
 * last entries throughout, on a topic whose two log streams interleave. */
static void test_server_replica_status(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    int st;
    uint64_t lo[2], hi[2];
    replica_md(&f, 1, &st, lo, hi);
    assert_int_equal(st, VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING);
    assert_true(lo[0] == 0 && lo[1] == 0 && hi[0] == 0 && hi[1] == 0);
    varlog_entry_meta_t a = append1(&f, 1, "a"), b = append1(&f, 2, "b"), c = append1(&f, 1, "c");
    (void)b;
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    replica_md(&f, 1, &st, lo, hi);
    assert_int_equal(st, VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED);
    assert_true(lo[0] == a.llsn && lo[1] == a.glsn);
    assert_true(hi[0] == c.llsn && hi[1] == c.glsn);
    assert_int_equal(hi[1], 3); /* b took GLSN 2 on the other log stream */
    assert_int_equal(varlog_server_unseal(f.srv, 1, 1), VARLOG_OK);
    replica_md(&f, 1, &st, lo, hi);
    assert_int_equal(st, VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING);
    assert_true(hi[0] == c.llsn && hi[1] == c.glsn);
    cf_stop(&f);
}

/* ---- verdicts -------------------------------------------------------------------------------- */

/* The bytes of an append, resolved after it: FOUND at the GLSNs and LLSNs the append
 * reported. On a topic of one log stream the watermarks pin the GLSN: no Subscribe probe. */
static void test_found(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    varlog_entry_meta_t x = append1(&f, 1, "x");
    static const char *const recs[] = {"a", "bb"};
    varlog_entry_meta_t want[2];
    append_strs(&f, 1, recs, 2, want);
    append1(&f, 1, "after");
    batch_t t, *ts[] = {&t};
    batch_init(&t, recs, 2);
    uint64_t probes = varlog_server_call_count(f.srv, PATH_SUBSCRIBE);
    char why[512];
    assert_int_equal(resolve(&f, 1, x.llsn, ts, 1, 0, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&t, RESOLVE_FOUND);
    assert_metas(&t, want);
    assert_int_equal(varlog_server_call_count(f.srv, PATH_SUBSCRIBE), probes);
    assert_has(why, "runs at LLSN 4");
    assert_has(why, "found at LLSNs 2..3");
    cf_stop(&f);
}

/* On a topic of three log streams appended in turn, GLSNs of one log stream have gaps: the
 * resolver's Subscribe probes find them, for a batch in the middle of a longer log. */
static void test_found_glsn_interleaved(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 3, NULL);
    char rec[32];
    varlog_entry_meta_t want = {0};
    for (int i = 0; i < 60; i++) {
        snprintf(rec, sizeof(rec), "r%d", i);
        varlog_entry_meta_t m = append1(&f, 1 + (i * 7 % 3 == 0 ? 0 : i % 2 + 1), rec);
        if (i == 33)
            want = m;
    }
    assert_int_equal(want.log_stream_id, 1);
    batch_t t, *ts[] = {&t};
    batch1(&t, "r33");
    uint64_t probes = varlog_server_call_count(f.srv, PATH_SUBSCRIBE);
    char why[512];
    assert_int_equal(resolve(&f, 1, 0, ts, 1, 0, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&t, RESOLVE_FOUND);
    assert_metas(&t, &want);
    assert_true(varlog_server_call_count(f.srv, PATH_SUBSCRIBE) > probes);
    cf_stop(&f);
}

/* Sealed, and the bytes never appended: ABSENT. The same while running: UNKNOWN (the batch
 * may still be committed). */
static void test_absent_sealed_unknown_running(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    varlog_entry_meta_t x = append1(&f, 1, "x");
    append1(&f, 1, "y");
    batch_t t, *ts[] = {&t};
    batch1(&t, "never");
    char why[512];
    assert_int_equal(resolve(&f, 1, x.llsn, ts, 1, 0, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&t, RESOLVE_UNKNOWN);
    assert_has(why, "not among them");
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    assert_int_equal(resolve(&f, 1, x.llsn, ts, 1, 0, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&t, RESOLVE_ABSENT);
    assert_has(why, "log stream 1 of topic 1 is sealed at LLSN 2 on ");
    assert_has(why, "read LLSNs 2..2");
    /* The window is empty when nothing came after the last LLSN known: absent too. */
    assert_int_equal(resolve(&f, 1, 2, ts, 1, 0, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&t, RESOLVE_ABSENT);
    assert_has(why, "nothing to read");
    /* A replica behind the LLSN the client knew stored proves nothing. */
    assert_int_equal(resolve(&f, 1, 3, ts, 1, 0, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&t, RESOLVE_UNKNOWN);
    cf_stop(&f);
}

/* The same bytes twice in the window (another writer's copy): UNKNOWN even when sealed;
 * after_llsn past the first copy leaves one: FOUND at the second. */
static void test_duplicates_and_after(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    static const char *const recs[] = {"d", "d"};
    varlog_entry_meta_t first[2], second[2];
    append_strs(&f, 1, recs, 2, first);
    append_strs(&f, 1, recs, 2, second);
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    batch_t t, *ts[] = {&t};
    batch_init(&t, recs, 2);
    char why[512];
    /* "d" four times: the batch "d","d" sits at three places. */
    assert_int_equal(resolve(&f, 1, 0, ts, 1, 0, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&t, RESOLVE_UNKNOWN);
    assert_has(why, "more than one place");
    assert_int_equal(resolve(&f, 1, first[1].llsn, ts, 1, 0, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&t, RESOLVE_FOUND);
    assert_metas(&t, second);
    cf_stop(&f);
}

/* Two batches sent in turn, the first stored, the second not, then sealed: FOUND, ABSENT.
 * Asked the other way round, a batch found after one that is absent breaks the send order:
 * UNKNOWN. */
static void test_several_batches(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    varlog_entry_meta_t x = append1(&f, 1, "x");
    static const char *const a_recs[] = {"a1", "a2"};
    varlog_entry_meta_t want[2];
    append_strs(&f, 1, a_recs, 2, want);
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    batch_t a, b;
    batch_init(&a, a_recs, 2);
    batch1(&b, "b1");
    batch_t *ab[] = {&a, &b}, *ba[] = {&b, &a};
    char why[512];
    assert_int_equal(resolve(&f, 1, x.llsn, ab, 2, 0, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&a, RESOLVE_FOUND);
    assert_verdict(&b, RESOLVE_ABSENT);
    assert_metas(&a, want);
    assert_int_equal(resolve(&f, 1, x.llsn, ba, 2, 0, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&b, RESOLVE_ABSENT);
    assert_verdict(&a, RESOLVE_UNKNOWN);
    cf_stop(&f);
}

/* Two batches found out of their send order: either copy may be foreign, both UNKNOWN. */
static void test_found_out_of_order(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    append1(&f, 1, "second");
    append1(&f, 1, "first");
    batch_t a, b, *ab[] = {&a, &b};
    batch1(&a, "first");
    batch1(&b, "second");
    char why[512];
    assert_int_equal(resolve(&f, 1, 0, ab, 2, 0, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&a, RESOLVE_UNKNOWN);
    assert_verdict(&b, RESOLVE_UNKNOWN);
    cf_stop(&f);
}

/* The server stores the request and drops the stream before its answer: the append reports
 * MAYBE_APPENDED, and the resolver finds the records where the server stored them. */
static void test_drop_after_write(void **state)
{
    (void)state;
    client_fixture_t f;
    /* The library's own read-back off: the test reads back by hand. */
    cf_start(&f, 1, 1, "append.retries", "0", "append.resolve.maybe.appended", "false", NULL);
    varlog_entry_meta_t x = append1(&f, 1, "x");
    assert_int_equal(varlog_server_drop_stream_after_write(f.srv, CF_PATH_APPEND, 0, 1), VARLOG_OK);
    static const char *const recs[] = {"lost-answer-1", "lost-answer-2"};
    varlog_record_t r[2] = {cf_record(recs[0]), cf_record(recs[1])};
    varlog_entry_meta_t metas[2];
    varlog_outcome_t outcome = VARLOG_APPENDED;
    varlog_err_t err = varlog_append_to(f.client, 1, 1, r, 2, TIMEOUT, metas, &outcome);
    assert_int_equal(err, VARLOG_ERR_RPC_UNAVAILABLE);
    assert_int_equal(outcome, VARLOG_MAYBE_APPENDED);
    assert_has(varlog_last_error(), "fault injection: stream dropped");
    /* Stored: LLSNs 2 and 3, GLSNs 2 and 3 (one log stream). */
    varlog_entry_meta_t want[2] = {{1, 1, 2, 2}, {1, 1, 3, 3}};
    batch_t t, *ts[] = {&t};
    batch_init(&t, recs, 2);
    char why[512];
    assert_int_equal(resolve(&f, 1, x.llsn, ts, 1, 0, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&t, RESOLVE_FOUND);
    assert_metas(&t, want);
    /* The fault was one stream's: the next append is answered, after the stored batch. */
    varlog_entry_meta_t y = append1(&f, 1, "y");
    assert_int_equal(y.llsn, 4);
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    assert_int_equal(resolve(&f, 1, x.llsn, ts, 1, 0, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&t, RESOLVE_FOUND);
    assert_metas(&t, want);
    cf_stop(&f);
}

/* A window past its cap is read from its end: a batch there is found, one before it is
 * not, and absence is not proved though sealed. With the whole window it is. */
static void test_window_cap(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    char rec[16];
    for (int i = 1; i <= 10; i++) {
        snprintf(rec, sizeof(rec), "w%d", i);
        append1(&f, 1, rec);
    }
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    batch_t early, late, never;
    batch1(&early, "w3");
    batch1(&late, "w9");
    batch1(&never, "never");
    batch_t *ts[] = {&early, &late, &never};
    char why[512];
    assert_int_equal(resolve(&f, 1, 0, ts, 3, 4, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&early, RESOLVE_UNKNOWN);
    assert_verdict(&late, RESOLVE_FOUND);
    assert_verdict(&never, RESOLVE_UNKNOWN);
    assert_has(why, "read LLSNs 7..10");
    assert_has(why, "cap");
    assert_int_equal(late.metas[0].llsn, 9);
    batch_t *nv[] = {&never};
    assert_int_equal(resolve(&f, 1, 0, nv, 1, 10, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&never, RESOLVE_ABSENT);
    assert_has(why, "read LLSNs 1..10");
    cf_stop(&f);
}

/* A trimmed prefix: from an unknown start (after_llsn 0) absence is not proved, as the
 * trimmed entries may have held the batch; from an after_llsn the trim did not reach, it
 * is. */
static void test_trimmed_start(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    varlog_entry_meta_t a = append1(&f, 1, "t1");
    append1(&f, 1, "t2");
    append1(&f, 1, "t3");
    assert_int_equal(varlog_trim(f.client, 1, a.glsn, TIMEOUT), VARLOG_OK);
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    batch_t t, *ts[] = {&t};
    batch1(&t, "never");
    char why[512];
    assert_int_equal(resolve(&f, 1, 0, ts, 1, 0, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&t, RESOLVE_UNKNOWN);
    assert_has(why, "trimmed");
    assert_int_equal(resolve(&f, 1, a.llsn, ts, 1, 0, why, sizeof(why)), VARLOG_OK);
    assert_verdict(&t, RESOLVE_ABSENT);
    cf_stop(&f);
}

/* ---- failures -------------------------------------------------------------------------------- */

/* A replica slower than the deadline, in its metadata or in its window's read: TIMED_OUT at
 * the deadline, not at the server's delay, every verdict UNKNOWN. */
static void test_deadline(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    append1(&f, 1, "x"); /* the channel is connected: what follows measures the wait */
    assert_int_equal(varlog_server_delay(f.srv, PATH_RMD, 120000), VARLOG_OK);
    batch_t t;
    batch1(&t, "x");
    int64_t bound = test_under_valgrind() ? 2000 : 400, slack = cf_wait_bound_ms();
    resolve_req_t req = {.topic_id = 1,
                         .log_stream_id = 1,
                         .deadline_ms = wire_deadline_ms(bound),
                         .batches = &t.b,
                         .n = 1};
    char why[512];
    int64_t t0 = test_now_ms();
    assert_int_equal(append_resolve(f.client, &req, why, sizeof(why)), VARLOG_ERR_TIMED_OUT);
    int64_t took = test_now_ms() - t0;
    print_message("took %lld ms: %s\n", (long long)took, why);
    /* Below: the server enforces the deadline too (grpc-timeout), a little early at times. */
    assert_true(took >= bound / 2);
    assert_true(took < bound + slack);
    assert_verdict(&t, RESOLVE_UNKNOWN);
    assert_has(why, "TIMED_OUT");
    varlog_server_clear_faults(f.srv);
    /* The same when the window's read is what hangs. */
    assert_int_equal(varlog_server_delay(f.srv, PATH_SUBSCRIBE_TO, 120000), VARLOG_OK);
    req.deadline_ms = wire_deadline_ms(bound);
    t0 = test_now_ms();
    assert_int_equal(append_resolve(f.client, &req, why, sizeof(why)), VARLOG_ERR_TIMED_OUT);
    took = test_now_ms() - t0;
    print_message("took %lld ms: %s\n", (long long)took, why);
    assert_true(took >= bound / 2);
    assert_true(took < bound + slack);
    assert_verdict(&t, RESOLVE_UNKNOWN);
    assert_has(why, "SubscribeTo");
    varlog_server_clear_faults(f.srv);
    cf_stop(&f);
}

/* Errors: a log stream the metadata does not list, a batch whose encodings do not hold its
 * records, a closing client's CLOSED. The caller's last error is left alone. */
static void test_errors(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    batch_t t, *ts[] = {&t};
    batch1(&t, "x");
    char why[512];
    assert_int_equal(resolve(&f, 9, 0, ts, 1, 0, why, sizeof(why)), VARLOG_ERR_UNKNOWN_LOG_STREAM);
    assert_verdict(&t, RESOLVE_UNKNOWN);
    assert_has(why, "not in the metadata");
    t.b.n_records = 2;
    assert_int_equal(resolve(&f, 1, 0, ts, 1, 0, why, sizeof(why)), VARLOG_ERR_INVALID_ARG);
    t.b.len--;
    t.b.n_records = 1;
    assert_int_equal(resolve(&f, 1, 0, ts, 1, 0, why, sizeof(why)), VARLOG_ERR_INVALID_ARG);
    t.b.len++;
    assert_int_equal(varlog_append_to(f.client, 0, 1, NULL, 0, TIMEOUT, NULL, NULL),
                     VARLOG_ERR_INVALID_ARG);
    char before[256];
    snprintf(before, sizeof(before), "%s", varlog_last_error());
    assert_int_equal(varlog_server_fail_next(f.srv, PATH_RMD, 14, "node away", 1), VARLOG_OK);
    assert_int_equal(resolve(&f, 1, 0, ts, 1, 0, why, sizeof(why)), VARLOG_ERR_RPC_UNAVAILABLE);
    assert_has(why, "node away");
    assert_string_equal(varlog_last_error(), before);
    /* Closing: the pass is refused as a public call would be. */
    pthread_mutex_lock(&f.client->mu);
    f.client->closing = true;
    pthread_mutex_unlock(&f.client->mu);
    assert_int_equal(resolve(&f, 1, 0, ts, 1, 0, why, sizeof(why)), VARLOG_ERR_CLOSED);
    pthread_mutex_lock(&f.client->mu);
    f.client->closing = false;
    pthread_mutex_unlock(&f.client->mu);
    cf_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_replica_status),
        cmocka_unit_test(test_found),
        cmocka_unit_test(test_found_glsn_interleaved),
        cmocka_unit_test(test_absent_sealed_unknown_running),
        cmocka_unit_test(test_duplicates_and_after),
        cmocka_unit_test(test_several_batches),
        cmocka_unit_test(test_found_out_of_order),
        cmocka_unit_test(test_drop_after_write),
        cmocka_unit_test(test_window_cap),
        cmocka_unit_test(test_trimmed_start),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
