/* Retention (issue 12): with a small max_bytes the embedded server keeps accepting appends
 * for many times its bound, its resident bytes stay within the bound after every append, a
 * subscriber behind the trim point gets the trimmed error a real node sends (new or already
 * streaming) and can resume from the new start, the oldest entries go first across topics,
 * and refuse_when_full keeps the old refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server_test_util.h"
#include "test_support.h"
#include "varlog/client.h"
#include "varlog/subscribe.h"

#define BOUND (64u * 1024)
#define TIMEOUT 30000

/* A server with retention (or refusal) at BOUND, its log lines in a memory stream. */
typedef struct ret_fixture {
    srv_fixture_t f;
    FILE *log;
    char *log_text;
    size_t log_len;
} ret_fixture_t;

static void ret_start(ret_fixture_t *r, int32_t topics, int32_t ls, bool refuse)
{
    memset(r, 0, sizeof(*r));
    r->log = open_memstream(&r->log_text, &r->log_len);
    assert_non_null(r->log);
    varlog_server_opts_t o = {.topics = topics,
                              .log_streams_per_topic = ls,
                              .max_bytes = BOUND,
                              .refuse_when_full = refuse,
                              .log_file = r->log};
    assert_int_equal(varlog_server_start(&o, &r->f.srv), VARLOG_OK);
    r->f.addr = varlog_server_address(r->f.srv);
    assert_int_equal(rpc_client_new(&r->f.client), VARLOG_OK);
}

static void ret_stop(ret_fixture_t *r)
{
    fixture_stop(&r->f);
    fclose(r->log);
    free(r->log_text);
}

/* Lines the server logged so far. */
static size_t log_lines(ret_fixture_t *r)
{
    fflush(r->log);
    size_t n = 0;
    for (size_t i = 0; i < r->log_len; i++)
        n += r->log_text[i] == '\n';
    return n;
}

static uint64_t passes(ret_fixture_t *r)
{
    store_t *st = &r->f.srv->store;
    pthread_mutex_lock(&st->mu);
    uint64_t v = st->retention_passes;
    pthread_mutex_unlock(&st->mu);
    return v;
}

/* Payload i of size bytes: its number in the first 8 bytes, then a filler. */
static void fill_payload(uint8_t *p, size_t size, uint64_t i)
{
    memset(p, 'a' + (int)(i % 26), size);
    memcpy(p, &i, size < sizeof(i) ? size : sizeof(i));
}

/* One Append stream with one request of n payloads of size bytes, numbered from first. OK
 * with the first GLSN in *glsn0, or the stream's error with its status in *st. */
static varlog_err_t append_sized(srv_fixture_t *f, int32_t topic, int32_t ls, size_t n, size_t size,
                                 uint64_t first, uint64_t *glsn0, rpc_status_t *st)
{
    Varlog__Snpb__AppendRequest r = VARLOG__SNPB__APPEND_REQUEST__INIT;
    r.topic_id = topic;
    r.log_stream_id = ls;
    r.n_payload = n;
    r.payload = calloc(n, sizeof(*r.payload));
    uint8_t *buf = malloc(n * size);
    assert_non_null(r.payload);
    assert_non_null(buf);
    for (size_t i = 0; i < n; i++) {
        fill_payload(buf + i * size, size, first + i);
        r.payload[i].data = buf + i * size;
        r.payload[i].len = size;
    }
    rpc_stream_opts_t o = {.kind = RPC_STREAM_BIDI,
                           .response = &varlog__snpb__append_response__descriptor,
                           .recv_window = 4,
                           .timeout_ms = T_TIMEOUT};
    rpc_stream_t *s = NULL;
    assert_int_equal(rpc_stream_open(f->client, f->addr, M_PATH_APPEND, &o, NULL, &s), VARLOG_OK);
    rpc_stream_send(s, &r.base);
    rpc_stream_close_send(s);
    free(buf);
    free(r.payload);
    ProtobufCMessage *m = NULL;
    varlog_err_t err = rpc_stream_recv(s, T_TIMEOUT, &m);
    if (err == VARLOG_OK) {
        const Varlog__Snpb__AppendResponse *resp = (const Varlog__Snpb__AppendResponse *)m;
        assert_int_equal(resp->n_results, n);
        if (glsn0)
            *glsn0 = resp->results[0]->meta->glsn;
        free_msg(m);
        assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_ERR_END);
    } else if (st && rpc_stream_status(s)) {
        rpc_status_copy(st, rpc_stream_status(s));
    }
    rpc_stream_destroy(s);
    return err;
}

/* Appends batches of `per` records of size bytes, round robin over log streams 1..n_ls of
 * topic 1, until `total` payload bytes went in; each append must succeed and leave the
 * server's resident bytes within the bound. Returns the last GLSN. */
static uint64_t append_past_bound(ret_fixture_t *r, int32_t n_ls, size_t per, size_t size,
                                  uint64_t total)
{
    uint64_t sent = 0, i = 0, last = 0;
    for (size_t k = 0; sent < total; k++) {
        rpc_status_t st;
        rpc_status_init(&st);
        int32_t ls = 1 + (int32_t)(k % (size_t)n_ls);
        uint64_t glsn0 = 0;
        varlog_err_t err = append_sized(&r->f, 1, ls, per, size, i, &glsn0, &st);
        if (err != VARLOG_OK)
            fail_msg("append %zu after %llu bytes: %s: %s", k, (unsigned long long)sent,
                     varlog_err_name(err), st.message ? st.message : "");
        rpc_status_clear(&st);
        uint64_t resident = varlog_server_resident_bytes(r->f.srv);
        if (resident > BOUND)
            fail_msg("append %zu: resident %llu > bound %u", k, (unsigned long long)resident,
                     BOUND);
        assert_true(varlog_server_stored_bytes(r->f.srv) <= resident);
        sent += per * size;
        i += per;
        last = glsn0 + per - 1;
    }
    return last;
}

/* The local low watermark of ls (LogStreamReplicaMetadata): its first kept entry. */
static void low_watermark(srv_fixture_t *f, int32_t topic, int32_t ls, uint64_t *glsn,
                          uint64_t *llsn)
{
    Varlog__Snpb__LogStreamReplicaMetadataResponse *md = NULL;
    assert_int_equal(replica_md(f, topic, ls, &md, NULL), VARLOG_OK);
    *glsn = md->log_stream_replica->local_low_watermark->glsn;
    *llsn = md->log_stream_replica->local_low_watermark->llsn;
    free_msg(md);
}

/* Subscribe (or SubscribeTo) of [begin, end): the first receive must fail with the trimmed
 * status, as a real node sends it (§6.3-6.4, 6.7). */
static void expect_trimmed_raw(srv_fixture_t *f, bool by_llsn, int32_t ls, uint64_t begin)
{
    rpc_stream_t *s = subscribe_open(f, by_llsn, 1, ls, begin, UINT64_MAX, 4);
    ProtobufCMessage *m = NULL;
    assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_ERR_RPC_OUT_OF_RANGE);
    const rpc_status_t *st = rpc_stream_status(s);
    assert_non_null(st);
    assert_int_equal(st->code, GRPC_STATUS_OUT_OF_RANGE);
    assert_string_equal(st->message, "log stream: logstream: trimmed");
    assert_int_equal(st->n_details, 2);
    assert_string_equal(st->details[0], "log stream: logstream: trimmed");
    assert_string_equal(st->details[1], "logstream: trimmed");
    rpc_stream_destroy(s);
}

/* Far past the bound (100x, 20x under valgrind or TSan) with records of size bytes: no
 * append fails, the resident bytes stay within the bound after each, a pass trims many
 * entries and logs one line, and what is kept is a whole suffix of the topic. */
static void keeps_accepting(size_t size, size_t per)
{
    ret_fixture_t r;
    ret_start(&r, 1, 2, false);
    uint64_t total = (uint64_t)BOUND * (uint64_t)test_scale(100, 5);
    uint64_t last = append_past_bound(&r, 2, per, size, total);
    uint64_t n_passes = passes(&r);
    assert_true(n_passes > 0);
    /* One line per pass, each pass trimming down to 7/8 of the bound: a pass comes once per
     * BOUND / 8 resident bytes appended at most (payloads and their overhead, which is less
     * than the payload itself even for 100-byte records), so well below once per entry. */
    assert_int_equal(log_lines(&r), n_passes);
    assert_true(n_passes <= 2 * total / (BOUND / 8) + 2);
    uint64_t entries = last;
    pthread_mutex_lock(&r.f.srv->store.mu);
    uint64_t trimmed = r.f.srv->store.retention_entries;
    pthread_mutex_unlock(&r.f.srv->store.mu);
    assert_true(trimmed < entries);
    assert_true(n_passes < trimmed);
    assert_non_null(strstr(r.log_text, "varlog-server: retention: trimmed "));

    /* The kept entries are GLSNs (first, last] of the topic: every log stream starts after
     * the same trim point. */
    uint64_t g1, l1, g2, l2;
    low_watermark(&r.f, 1, 1, &g1, &l1);
    low_watermark(&r.f, 1, 2, &g2, &l2);
    uint64_t first = g1 < g2 ? g1 : g2;
    assert_true(first > 1);
    assert_int_equal(varlog_server_stored_bytes(r.f.srv), (last - first + 1) * size);
    ret_stop(&r);
}

static void test_keeps_accepting_100_byte_records(void **state)
{
    (void)state;
    keeps_accepting(100, 32);
}

static void test_keeps_accepting_4_kib_records(void **state)
{
    (void)state;
    keeps_accepting(4096, 2);
}

/* A batch too large for an empty store is refused, and nothing is trimmed for it. */
static void test_batch_larger_than_bound_refused_without_trimming(void **state)
{
    (void)state;
    ret_fixture_t r;
    ret_start(&r, 1, 1, false);
    uint64_t g = 0;
    assert_int_equal(append_sized(&r.f, 1, 1, 4, 100, 0, &g, NULL), VARLOG_OK);
    rpc_status_t st;
    rpc_status_init(&st);
    assert_int_equal(append_sized(&r.f, 1, 1, 1, BOUND, 4, NULL, &st),
                     VARLOG_ERR_RPC_RESOURCE_EXHAUSTED);
    assert_string_equal(st.message, "storage: byte limit reached");
    rpc_status_clear(&st);
    assert_int_equal(varlog_server_stored_bytes(r.f.srv), 400);
    assert_int_equal(passes(&r), 0);
    assert_int_equal(append_sized(&r.f, 1, 1, 1, 100, 4, &g, NULL), VARLOG_OK);
    assert_int_equal(g, 5);
    ret_stop(&r);
}

/* A subscriber that falls behind: reading from GLSN (or LLSN) 1 after the trim fails with
 * the trimmed status, raw and through libvarlog (VARLOG_ERR_TRIMMED); varlog_peek and the
 * replica metadata give the new start, and a subscription from there reads every kept
 * entry up to the end. */
static void test_behind_subscriber_trimmed_then_resumes(void **state)
{
    (void)state;
    ret_fixture_t r;
    ret_start(&r, 1, 1, false);
    uint64_t last = append_past_bound(&r, 1, 8, 1000, (uint64_t)BOUND * 4);
    uint64_t lwm_g = 0, lwm_l = 0;
    low_watermark(&r.f, 1, 1, &lwm_g, &lwm_l);
    assert_true(lwm_g > 1);
    assert_int_equal(lwm_g, lwm_l); /* one log stream: GLSN = LLSN */

    expect_trimmed_raw(&r.f, false, 1, 1);
    expect_trimmed_raw(&r.f, false, 1, lwm_g - 1);
    expect_trimmed_raw(&r.f, true, 1, 1);

    varlog_conf_t *conf = varlog_conf_new();
    assert_non_null(conf);
    char err[256];
    assert_int_equal(varlog_conf_set(conf, "metadata.addresses", r.f.addr, err, sizeof(err)),
                     VARLOG_OK);
    assert_int_equal(varlog_conf_set(conf, "log.level", "err", err, sizeof(err)), VARLOG_OK);
    varlog_client_t *c = NULL;
    assert_int_equal(varlog_client_new(&conf, &c, err, sizeof(err)), VARLOG_OK);

    varlog_subscription_t *sub = NULL;
    varlog_entry_t e;
    assert_int_equal(varlog_subscribe_iter(c, 1, 1, last + 1, &sub), VARLOG_OK);
    assert_int_equal(varlog_subscription_next(sub, TIMEOUT, &e), VARLOG_ERR_TRIMMED);
    varlog_subscription_close(&sub);

    varlog_entry_meta_t first, tail;
    bool complete = false;
    assert_int_equal(varlog_peek(c, 1, 1, TIMEOUT, &first, &tail, &complete), VARLOG_OK);
    assert_int_equal(first.glsn, lwm_g);
    assert_int_equal(tail.glsn, last);

    /* Resume from the new start: every kept entry, in order, with its own payload. */
    assert_int_equal(varlog_subscribe_iter(c, 1, first.glsn, last + 1, &sub), VARLOG_OK);
    uint64_t want = first.glsn;
    varlog_err_t rc;
    while ((rc = varlog_subscription_next(sub, TIMEOUT, &e)) == VARLOG_OK) {
        assert_int_equal(e.meta.glsn, want);
        assert_int_equal(e.len, 1000);
        uint64_t num = 0;
        memcpy(&num, e.data, sizeof(num));
        assert_int_equal(num, want - 1); /* payloads are numbered from 0 */
        want++;
    }
    assert_int_equal(rc, VARLOG_ERR_END);
    assert_int_equal(want, last + 1);
    varlog_subscription_close(&sub);
    varlog_client_destroy(c);
    ret_stop(&r);
}

/* Whether some subscriber's next entries were trimmed, or none is left (it ended on its
 * own: the trim passed it while it was sending). White-box. */
static bool some_subscriber_behind(ret_fixture_t *r)
{
    store_t *st = &r->f.srv->store;
    pthread_mutex_lock(&st->mu);
    bool behind = st->subs == NULL;
    for (sub_state_t *s = st->subs; s && !behind; s = s->snext)
        behind = store_sub_trimmed_locked(store_ls_locked(st, s->topic_id, s->ls_id), s);
    pthread_mutex_unlock(&st->mu);
    return behind;
}

/* A subscriber already streaming that falls behind (it does not read while the log grows
 * far past the bound) gets the entries it was sent, contiguous, and then the trimmed
 * status, never a gap that a topic-wide reader would wait on for ever. */
static void test_streaming_subscriber_falls_behind(void **state)
{
    (void)state;
    ret_fixture_t r;
    ret_start(&r, 1, 1, false);
    rpc_stream_t *s = subscribe_open(&r.f, false, 1, 1, 1, UINT64_MAX, 1);
    assert_int_equal(append_sized(&r.f, 1, 1, 1, 1000, 0, NULL, NULL), VARLOG_OK);
    ProtobufCMessage *m = NULL;
    assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_OK);
    assert_int_equal(((Varlog__Snpb__SubscribeResponse *)m)->glsn, 1);
    free_msg(m);
    /* The transports hold megabytes (HTTP/2 windows): append until the server's side of
     * the stream is behind the trim point, a bound's worth at a time. */
    for (int round = 0; !some_subscriber_behind(&r); round++) {
        assert_true(round < 1000);
        append_past_bound(&r, 1, 8, 1000, BOUND);
    }
    uint64_t want = 2;
    varlog_err_t err;
    while ((err = rpc_stream_recv(s, T_TIMEOUT, &m)) == VARLOG_OK) {
        assert_int_equal(((Varlog__Snpb__SubscribeResponse *)m)->glsn, want);
        want++;
        free_msg(m);
    }
    assert_int_equal(err, VARLOG_ERR_RPC_OUT_OF_RANGE);
    const rpc_status_t *st = rpc_stream_status(s);
    assert_string_equal(st->message, "log stream: logstream: trimmed");
    assert_int_equal(st->n_details, 2);
    uint64_t lwm_g = 0, lwm_l = 0;
    low_watermark(&r.f, 1, 1, &lwm_g, &lwm_l);
    assert_true(want < lwm_g); /* it was behind */
    rpc_stream_destroy(s);
    ret_stop(&r);
}

/* Oldest first across topics: topic 1 filled first loses its entries before topic 2's,
 * which were appended later, and topic 2 keeps its first entry while topic 1 is trimmed. */
static void test_oldest_first_across_topics(void **state)
{
    (void)state;
    ret_fixture_t r;
    ret_start(&r, 2, 1, false);
    /* Topic 1 (log stream 1): about half the bound. */
    uint64_t i = 0;
    while (varlog_server_resident_bytes(r.f.srv) < BOUND / 2) {
        assert_int_equal(append_sized(&r.f, 1, 1, 4, 500, i, NULL, NULL), VARLOG_OK);
        i += 4;
    }
    /* Topic 2 (log stream 2) until topic 1 has lost entries. */
    uint64_t g1 = 0, l1 = 0, g2 = 0, l2 = 0;
    for (uint64_t k = 0; g1 <= 1; k += 4) {
        assert_int_equal(append_sized(&r.f, 2, 2, 4, 500, k, NULL, NULL), VARLOG_OK);
        assert_true(varlog_server_resident_bytes(r.f.srv) <= BOUND);
        low_watermark(&r.f, 1, 1, &g1, &l1);
        assert_true(k < 4 * BOUND / 500); /* topic 1 goes within a bound's worth */
    }
    low_watermark(&r.f, 2, 2, &g2, &l2);
    assert_int_equal(g2, 1);
    assert_int_equal(l2, 1);
    ret_stop(&r);
}

/* refuse_when_full keeps the old behaviour: past the bound (payload bytes) appends fail
 * with RESOURCE_EXHAUSTED "storage: byte limit reached", nothing is trimmed. */
static void test_refuse_when_full(void **state)
{
    (void)state;
    ret_fixture_t r;
    ret_start(&r, 1, 1, true);
    uint64_t stored = 0, i = 0;
    varlog_err_t err;
    rpc_status_t st;
    rpc_status_init(&st);
    while ((err = append_sized(&r.f, 1, 1, 4, 1000, i, NULL, &st)) == VARLOG_OK) {
        stored += 4000;
        i += 4;
        assert_true(stored <= BOUND);
    }
    assert_int_equal(err, VARLOG_ERR_RPC_RESOURCE_EXHAUSTED);
    assert_int_equal(st.code, GRPC_STATUS_RESOURCE_EXHAUSTED);
    assert_string_equal(st.message, "storage: byte limit reached");
    rpc_status_clear(&st);
    assert_true(stored + 4000 > BOUND);
    assert_int_equal(varlog_server_stored_bytes(r.f.srv), stored);
    uint64_t g = 0, l = 0;
    low_watermark(&r.f, 1, 1, &g, &l);
    assert_int_equal(g, 1);
    assert_int_equal(passes(&r), 0);
    assert_int_equal(log_lines(&r), 0);
    ret_stop(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keeps_accepting_100_byte_records),
        cmocka_unit_test(test_keeps_accepting_4_kib_records),
        cmocka_unit_test(test_batch_larger_than_bound_refused_without_trimming),
        cmocka_unit_test(test_behind_subscriber_trimmed_then_resumes),
        cmocka_unit_test(test_streaming_subscriber_falls_behind),
        cmocka_unit_test(test_oldest_first_across_topics),
        cmocka_unit_test(test_refuse_when_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
