/* The LogIO messages the client encodes and decodes by hand (client/src/log_io_codec.c),
 * checked against protobuf-c: what we write is what protobuf-c reads, and what protobuf-c
 * writes (plus unknown fields, reordered fields, malformed input) is what we read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "log_io_codec.h"
#include "snpb/log_io.pb-c.h"

static void test_request_is_what_protobuf_reads(void **state)
{
    (void)state;
    static const size_t lens[] = {1, 127, 128, 16383, 16384, 100000};
    enum { N = sizeof(lens) / sizeof(lens[0]) };
    size_t cap = CODEC_HEAD_MAX;
    for (size_t i = 0; i < N; i++)
        cap += lens[i] + CODEC_PAYLOAD_OVERHEAD_MAX;
    uint8_t *buf = malloc(cap);
    uint8_t *data = malloc(100000);
    assert_non_null(buf);
    assert_non_null(data);
    for (size_t i = 0; i < 100000; i++)
        data[i] = (uint8_t)(i * 7);
    int32_t ids[][2] = {{1, 1}, {127, 128}, {INT32_MAX, 300}};
    for (size_t k = 0; k < 3; k++) {
        size_t len = codec_put_head(buf, ids[k][0], ids[k][1]);
        assert_true(len <= CODEC_HEAD_MAX);
        for (size_t i = 0; i < N; i++) {
            size_t n = codec_put_payload(buf + len, data, lens[i]);
            assert_int_equal(n, codec_payload_size(lens[i]));
            assert_true(n <= lens[i] + CODEC_PAYLOAD_OVERHEAD_MAX);
            len += n;
        }
        Varlog__Snpb__AppendRequest *req = varlog__snpb__append_request__unpack(NULL, len, buf);
        assert_non_null(req);
        assert_int_equal(req->topic_id, ids[k][0]);
        assert_int_equal(req->log_stream_id, ids[k][1]);
        assert_int_equal(req->n_payload, N);
        for (size_t i = 0; i < N; i++) {
            assert_int_equal(req->payload[i].len, lens[i]);
            assert_memory_equal(req->payload[i].data, data, lens[i]);
        }
        /* And byte for byte what protobuf-c writes for the same message. */
        size_t want = varlog__snpb__append_request__get_packed_size(req);
        uint8_t *packed = malloc(want);
        assert_int_equal(varlog__snpb__append_request__pack(req, packed), want);
        assert_int_equal(want, len);
        assert_memory_equal(packed, buf, len);
        free(packed);
        varlog__snpb__append_request__free_unpacked(req, NULL);
    }
    free(buf);
    free(data);
}

/* An AppendResponse packed by protobuf-c: n results with increasing positions. */
static uint8_t *pack_response(size_t n, const char *error_at_last, size_t *len)
{
    Varlog__Varlogpb__LogEntryMeta *metas = calloc(n + 1, sizeof(*metas));
    Varlog__Snpb__AppendResult *results = calloc(n + 1, sizeof(*results));
    Varlog__Snpb__AppendResult **rp = calloc(n + 1, sizeof(*rp));
    for (size_t i = 0; i < n; i++) {
        varlog__varlogpb__log_entry_meta__init(&metas[i]);
        metas[i].topic_id = 7;
        metas[i].log_stream_id = 9;
        metas[i].glsn = 1000000000000ull + i;
        metas[i].llsn = 5 + i;
        varlog__snpb__append_result__init(&results[i]);
        results[i].meta = &metas[i];
        rp[i] = &results[i];
    }
    if (error_at_last && n > 0) {
        results[n - 1].meta = NULL;
        results[n - 1].error = (char *)error_at_last;
    }
    Varlog__Snpb__AppendResponse resp = VARLOG__SNPB__APPEND_RESPONSE__INIT;
    resp.n_results = n;
    resp.results = rp;
    *len = varlog__snpb__append_response__get_packed_size(&resp);
    uint8_t *buf = malloc(*len + 64);
    varlog__snpb__append_response__pack(&resp, buf);
    free(metas);
    free(results);
    free(rp);
    return buf;
}

static void test_response_as_protobuf_writes_it(void **state)
{
    (void)state;
    size_t sizes[] = {1, 2, 1000};
    for (size_t k = 0; k < 3; k++) {
        size_t n = sizes[k], len;
        uint8_t *buf = pack_response(n, NULL, &len);
        varlog_entry_meta_t *metas = calloc(n, sizeof(*metas));
        char why[128] = "";
        assert_int_equal(codec_read_append_response(buf, len, metas, n, why, sizeof(why)),
                         VARLOG_OK);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(metas[i].topic_id, 7);
            assert_int_equal(metas[i].log_stream_id, 9);
            assert_int_equal(metas[i].glsn, 1000000000000ull + i);
            assert_int_equal(metas[i].llsn, 5 + i);
        }
        /* A count that differs is refused, both ways. */
        assert_int_equal(codec_read_append_response(buf, len, metas, n + 1, why, sizeof(why)),
                         VARLOG_ERR_DECODE);
        assert_non_null(strstr(why, "results for"));
        if (n > 1)
            assert_int_equal(codec_read_append_response(buf, len, metas, n - 1, why, sizeof(why)),
                             VARLOG_ERR_DECODE);
        free(metas);
        free(buf);
    }
}

static void test_unknown_fields_and_field_order(void **state)
{
    (void)state;
    /* AppendResponse{ unknown varint 9, results{ unknown fixed64 7, meta{llsn 4, glsn 3,
     * unknown bytes 15, log_stream_id 2, topic_id 1} }, unknown fixed32 10 } */
    uint8_t meta[] = {0x20, 4, 0x18, 3, 0x7a, 2, 'h', 'i', 0x10, 2, 0x08, 1};
    uint8_t result[2 + sizeof(meta) + 9];
    size_t r = 0;
    result[r++] = 0x39; /* field 7, fixed64 */
    memset(result + r, 0xab, 8);
    r += 8;
    result[r++] = 0x0a;
    result[r++] = sizeof(meta);
    memcpy(result + r, meta, sizeof(meta));
    r += sizeof(meta);
    uint8_t msg[64];
    size_t m = 0;
    msg[m++] = 0x48; /* field 9 varint */
    msg[m++] = 0x96;
    msg[m++] = 0x01;
    msg[m++] = 0x0a;
    msg[m++] = (uint8_t)r;
    memcpy(msg + m, result, r);
    m += r;
    msg[m++] = 0x55; /* field 10 fixed32 */
    memset(msg + m, 1, 4);
    m += 4;
    varlog_entry_meta_t meta_out;
    char why[128];
    assert_int_equal(codec_read_append_response(msg, m, &meta_out, 1, why, sizeof(why)), VARLOG_OK);
    assert_int_equal(meta_out.topic_id, 1);
    assert_int_equal(meta_out.log_stream_id, 2);
    assert_int_equal(meta_out.glsn, 3);
    assert_int_equal(meta_out.llsn, 4);
    /* protobuf-c agrees. */
    Varlog__Snpb__AppendResponse *resp = varlog__snpb__append_response__unpack(NULL, m, msg);
    assert_non_null(resp);
    assert_int_equal(resp->n_results, 1);
    assert_int_equal(resp->results[0]->meta->glsn, 3);
    varlog__snpb__append_response__free_unpacked(resp, NULL);
}

static void test_error_string_and_missing_meta(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = pack_response(3, "storage: closed", &len);
    varlog_entry_meta_t metas[3];
    char why[128];
    assert_int_equal(codec_read_append_response(buf, len, metas, 3, why, sizeof(why)),
                     VARLOG_ERR_RPC_UNKNOWN);
    assert_string_equal(why, "record 2: storage: closed");
    free(buf);
    /* results{} with neither meta nor error */
    uint8_t empty[] = {0x0a, 0x00};
    assert_int_equal(codec_read_append_response(empty, sizeof(empty), metas, 1, why, sizeof(why)),
                     VARLOG_ERR_DECODE);
    assert_string_equal(why, "result 0 without metadata");
}

static void test_malformed_input_is_refused(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = pack_response(4, NULL, &len);
    varlog_entry_meta_t metas[4];
    char why[128];
    /* Every truncation is refused (none may read past the end, ASan checks). */
    for (size_t cut = 1; cut < len; cut++) {
        uint8_t *copy = malloc(cut);
        memcpy(copy, buf, cut);
        varlog_err_t err = codec_read_append_response(copy, cut, metas, 4, why, sizeof(why));
        assert_int_not_equal(err, VARLOG_OK);
        free(copy);
        /* protobuf-c agrees that it is not a 4-result response */
        Varlog__Snpb__AppendResponse *resp = varlog__snpb__append_response__unpack(NULL, cut, buf);
        assert_true(!resp || resp->n_results != 4);
        if (resp)
            varlog__snpb__append_response__free_unpacked(resp, NULL);
    }
    free(buf);
    uint8_t bad_varint[] = {0x0a, 0x0c, 0x0a, 0x0a, 0x08, 0xff, 0xff,
                            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(
        codec_read_append_response(bad_varint, sizeof(bad_varint), metas, 1, why, sizeof(why)),
        VARLOG_ERR_DECODE);
    uint8_t group[] = {0x0b, 0x0c}; /* field 1 as a start-group */
    assert_int_equal(codec_read_append_response(group, sizeof(group), metas, 1, why, sizeof(why)),
                     VARLOG_ERR_DECODE);
    uint8_t field0[] = {0x00, 0x01};
    assert_int_equal(codec_read_append_response(field0, sizeof(field0), metas, 1, why, sizeof(why)),
                     VARLOG_ERR_DECODE);
}

/* ---- SubscribeResponse / SubscribeToResponse ------------------------------------------- */

static uint8_t *pack_subscribe(uint64_t glsn, uint64_t llsn, const char *payload, size_t plen,
                               size_t *len)
{
    Varlog__Snpb__SubscribeResponse m = VARLOG__SNPB__SUBSCRIBE_RESPONSE__INIT;
    m.glsn = glsn;
    m.llsn = llsn;
    m.payload.data = (uint8_t *)payload;
    m.payload.len = plen;
    *len = varlog__snpb__subscribe_response__get_packed_size(&m);
    uint8_t *buf = malloc(*len + 1);
    varlog__snpb__subscribe_response__pack(&m, buf);
    return buf;
}

static uint8_t *pack_subscribe_to(const Varlog__Varlogpb__LogEntryMeta *meta, const char *data,
                                  size_t dlen, size_t *len)
{
    Varlog__Varlogpb__LogEntry e = VARLOG__VARLOGPB__LOG_ENTRY__INIT;
    e.meta = (Varlog__Varlogpb__LogEntryMeta *)meta;
    e.data.data = (uint8_t *)data;
    e.data.len = dlen;
    Varlog__Snpb__SubscribeToResponse m = VARLOG__SNPB__SUBSCRIBE_TO_RESPONSE__INIT;
    m.log_entry = &e;
    *len = varlog__snpb__subscribe_to_response__get_packed_size(&m);
    uint8_t *buf = malloc(*len + 1);
    varlog__snpb__subscribe_to_response__pack(&m, buf);
    return buf;
}

static void test_subscribe_response_in_place(void **state)
{
    (void)state;
    struct {
        uint64_t glsn, llsn;
        const char *payload;
    } cases[] = {{1, 1, "x"}, {300, 299, "hello"}, {UINT64_MAX, 1ull << 40, ""}, {0, 0, ""}};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        size_t len;
        size_t plen = strlen(cases[k].payload);
        uint8_t *buf = pack_subscribe(cases[k].glsn, cases[k].llsn, cases[k].payload, plen, &len);
        codec_entry_t e;
        char why[128];
        assert_int_equal(codec_read_subscribe_response(buf, len, &e, why, sizeof(why)), VARLOG_OK);
        assert_int_equal(e.meta.glsn, cases[k].glsn);
        assert_int_equal(e.meta.llsn, cases[k].llsn);
        assert_int_equal(e.meta.topic_id, 0);
        assert_int_equal(e.meta.log_stream_id, 0);
        assert_int_equal(e.len, plen);
        if (plen) {
            /* in place: the payload points into the message */
            assert_true(e.data >= buf && e.data + e.len <= buf + len);
            assert_memory_equal(e.data, cases[k].payload, plen);
        }
        free(buf);
    }
    /* unknown fields skipped, a repeated field: the last one counts (protobuf-c agrees) */
    uint8_t odd[] = {0x08, 0x05, 0x39, 1,    2,    3,    4,    5,    6,    7,   8,
                     0x1a, 0x01, 'a',  0x08, 0x07, 0x10, 0x03, 0x1a, 0x02, 'b', 'c'};
    codec_entry_t e;
    char why[128];
    assert_int_equal(codec_read_subscribe_response(odd, sizeof(odd), &e, why, sizeof(why)),
                     VARLOG_OK);
    Varlog__Snpb__SubscribeResponse *m =
        varlog__snpb__subscribe_response__unpack(NULL, sizeof(odd), odd);
    assert_non_null(m);
    assert_int_equal(e.meta.glsn, m->glsn);
    assert_int_equal(e.meta.llsn, m->llsn);
    assert_int_equal(e.len, m->payload.len);
    assert_memory_equal(e.data, m->payload.data, e.len);
    assert_int_equal(e.meta.glsn, 7);
    varlog__snpb__subscribe_response__free_unpacked(m, NULL);
}

static void test_subscribe_to_response_in_place(void **state)
{
    (void)state;
    /* what a real storage node sends: the LLSN and the data only */
    Varlog__Varlogpb__LogEntryMeta meta = VARLOG__VARLOGPB__LOG_ENTRY_META__INIT;
    meta.llsn = 42;
    size_t len;
    uint8_t *buf = pack_subscribe_to(&meta, "data", 4, &len);
    codec_entry_t e;
    char why[128];
    assert_int_equal(codec_read_subscribe_to_response(buf, len, &e, why, sizeof(why)), VARLOG_OK);
    assert_int_equal(e.meta.llsn, 42);
    assert_int_equal(e.meta.glsn, 0);
    assert_int_equal(e.meta.topic_id, 0);
    assert_int_equal(e.len, 4);
    assert_true(e.data >= buf && e.data + 4 <= buf + len);
    assert_memory_equal(e.data, "data", 4);
    free(buf);
    /* a full meta, as the wire reference describes it, is read as well */
    meta.topic_id = 3;
    meta.log_stream_id = 9;
    meta.glsn = 1000;
    buf = pack_subscribe_to(&meta, "", 0, &len);
    assert_int_equal(codec_read_subscribe_to_response(buf, len, &e, why, sizeof(why)), VARLOG_OK);
    assert_int_equal(e.meta.topic_id, 3);
    assert_int_equal(e.meta.log_stream_id, 9);
    assert_int_equal(e.meta.glsn, 1000);
    assert_int_equal(e.meta.llsn, 42);
    assert_int_equal(e.len, 0);
    free(buf);
    /* no log entry at all: refused */
    uint8_t empty[1];
    assert_int_equal(codec_read_subscribe_to_response(empty, 0, &e, why, sizeof(why)),
                     VARLOG_ERR_DECODE);
    assert_string_equal(why, "SubscribeToResponse without a log entry");
}

/* Every truncation of both messages: ours succeeds exactly when protobuf-c does, with the same
 * values (SubscribeTo also refuses a message without its log entry). */
static void test_subscribe_truncations_agree_with_protobuf(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = pack_subscribe(123456789, 77, "payload bytes", 13, &len);
    for (size_t cut = 0; cut <= len; cut++) {
        uint8_t *copy = malloc(cut + 1);
        memcpy(copy, buf, cut);
        codec_entry_t e;
        char why[128];
        varlog_err_t err = codec_read_subscribe_response(copy, cut, &e, why, sizeof(why));
        Varlog__Snpb__SubscribeResponse *m =
            varlog__snpb__subscribe_response__unpack(NULL, cut, copy);
        assert_int_equal(err == VARLOG_OK, m != NULL);
        if (m) {
            assert_int_equal(e.meta.glsn, m->glsn);
            assert_int_equal(e.meta.llsn, m->llsn);
            assert_int_equal(e.len, m->payload.len);
            varlog__snpb__subscribe_response__free_unpacked(m, NULL);
        }
        free(copy);
    }
    free(buf);
    Varlog__Varlogpb__LogEntryMeta meta = VARLOG__VARLOGPB__LOG_ENTRY_META__INIT;
    meta.llsn = 5;
    meta.glsn = 300;
    buf = pack_subscribe_to(&meta, "abc", 3, &len);
    for (size_t cut = 0; cut <= len; cut++) {
        uint8_t *copy = malloc(cut + 1);
        memcpy(copy, buf, cut);
        codec_entry_t e;
        char why[128];
        varlog_err_t err = codec_read_subscribe_to_response(copy, cut, &e, why, sizeof(why));
        Varlog__Snpb__SubscribeToResponse *m =
            varlog__snpb__subscribe_to_response__unpack(NULL, cut, copy);
        assert_int_equal(err == VARLOG_OK, m != NULL && m->log_entry != NULL);
        if (err == VARLOG_OK) {
            assert_int_equal(e.meta.llsn, m->log_entry->meta ? m->log_entry->meta->llsn : 0);
            assert_int_equal(e.len, m->log_entry->data.len);
        }
        if (m)
            varlog__snpb__subscribe_to_response__free_unpacked(m, NULL);
        free(copy);
    }
    free(buf);
}

/* codec_next_payload reads back what codec_put_payload wrote (empty and multi-byte-length
 * payloads among them), stops cleanly at the end, and refuses a foreign tag or a length
 * running past the end without moving. */
static void test_payloads_read_back(void **state)
{
    (void)state;
    static uint8_t big[300];
    memset(big, 'z', sizeof(big));
    const void *data[3] = {"abc", "", big};
    size_t lens[3] = {3, 0, sizeof(big)};
    uint8_t buf[400];
    size_t len = 0;
    for (size_t i = 0; i < 3; i++)
        len += codec_put_payload(buf + len, data[i], lens[i]);
    const uint8_t *p = buf, *end = buf + len, *d;
    size_t n;
    for (size_t i = 0; i < 3; i++) {
        assert_true(codec_next_payload(&p, end, &d, &n));
        assert_int_equal(n, lens[i]);
        assert_memory_equal(d, data[i], n);
    }
    assert_ptr_equal(p, end);
    assert_false(codec_next_payload(&p, end, &d, &n));
    /* a truncated last payload */
    p = buf;
    const uint8_t *cut = buf + len - 1;
    assert_true(codec_next_payload(&p, cut, &d, &n));
    assert_true(codec_next_payload(&p, cut, &d, &n));
    const uint8_t *before = p;
    assert_false(codec_next_payload(&p, cut, &d, &n));
    assert_ptr_equal(p, before);
    /* another field's tag */
    uint8_t other[] = {(1 << 3) | 0, 1};
    p = other;
    assert_false(codec_next_payload(&p, other + sizeof(other), &d, &n));
    assert_ptr_equal(p, other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_is_what_protobuf_reads),
        cmocka_unit_test(test_response_as_protobuf_writes_it),
        cmocka_unit_test(test_unknown_fields_and_field_order),
        cmocka_unit_test(test_error_string_and_missing_meta),
        cmocka_unit_test(test_malformed_input_is_refused),
        cmocka_unit_test(test_subscribe_response_in_place),
        cmocka_unit_test(test_subscribe_to_response_in_place),
        cmocka_unit_test(test_subscribe_truncations_agree_with_protobuf),
        cmocka_unit_test(test_payloads_read_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
