/* The Append messages the appender encodes and decodes by hand (client/src/append_codec.c),
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

#include "append_codec.h"
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_is_what_protobuf_reads),
        cmocka_unit_test(test_response_as_protobuf_writes_it),
        cmocka_unit_test(test_unknown_fields_and_field_order),
        cmocka_unit_test(test_error_string_and_missing_meta),
        cmocka_unit_test(test_malformed_input_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
