/*
 * Golden bytes for Varlog's wire messages: varlog.snpb messages (Append, Subscribe, SubscribeTo,
 * LogStreamReplicaMetadata). How the expected bytes were derived, and the notation of the comments,
 * is explained at the top of golden_support.h.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "golden_support.h"
#include "snpb/log_io.pb-c.h"
#include "snpb/metadata.pb-c.h"
#include "varlogpb/metadata.pb-c.h"

/* ---- varlog.snpb.AppendRequest ------------------------------------------------------------ */

static const uint8_t append_request_bytes[] = {
    0x08, 0x01,             /* 1 topic_id: tag 1<<3|0, varint 1 */
    0x10, 0x02,             /* 2 log_stream_id: tag 2<<3|0, varint 2 */
    0x1a, 0x02, 0x61, 0x62, /* 3 payload[0]: tag 3<<3|2, length 2, "ab" */
    0x1a, 0x00,             /* 3 payload[1]: same tag, length 0 - an empty element is still sent */
};

static void test_append_request_encode(void **state)
{
    (void)state;
    ProtobufCBinaryData payload[2] = {{2, (uint8_t *)"ab"}, {0, NULL}};
    Varlog__Snpb__AppendRequest req = VARLOG__SNPB__APPEND_REQUEST__INIT;
    req.topic_id = 1;
    req.log_stream_id = 2;
    req.n_payload = 2;
    req.payload = payload;
    assert_encodes_to(&req.base, append_request_bytes, sizeof(append_request_bytes));
}

static void test_append_request_decode(void **state)
{
    (void)state;
    Varlog__Snpb__AppendRequest *req = (Varlog__Snpb__AppendRequest *)golden_decode(
        &varlog__snpb__append_request__descriptor, append_request_bytes,
        sizeof(append_request_bytes));
    assert_int_equal(req->topic_id, 1);
    assert_int_equal(req->log_stream_id, 2);
    assert_int_equal(req->n_payload, 2);
    assert_bytes(req->payload[0], "ab");
    assert_bytes(req->payload[1], "");
    varlog__snpb__append_request__free_unpacked(req, NULL);
}

/* ---- varlog.snpb.AppendResponse ----------------------------------------------------------- */

static const uint8_t append_response_bytes[] = {
    0x0a, 0x0b,       /* 1 results[0]: tag 1<<3|2, length 11 */
    0x0a, 0x09,       /*   1 meta: tag 1<<3|2, length 9 */
    0x08, 0x01,       /*     1 topic_id 1 */
    0x10, 0x02,       /*     2 log_stream_id 2 */
    0x18, 0xac, 0x02, /*     3 glsn 300 = 0b10_0101100: low 7 bits 0x2c | 0x80, then 300>>7 = 2 */
    0x20, 0x01,       /*     4 llsn 1 */
    0x0a, 0x0b,       /* 1 results[1]: length 11 */
    0x0a, 0x09,       /*   1 meta: length 9 */
    0x08, 0x01,       /*     1 topic_id 1 */
    0x10, 0x02,       /*     2 log_stream_id 2 */
    0x18, 0xad, 0x02, /*     3 glsn 301: 0x2d | 0x80, 2 */
    0x20, 0x02,       /*     4 llsn 2 */
    /* 2 error is empty in both results (deprecated since v0.26), so it is left out. */
};

static void test_append_response_encode(void **state)
{
    (void)state;
    Varlog__Varlogpb__LogEntryMeta meta[2] = {VARLOG__VARLOGPB__LOG_ENTRY_META__INIT,
                                              VARLOG__VARLOGPB__LOG_ENTRY_META__INIT};
    Varlog__Snpb__AppendResult res[2] = {VARLOG__SNPB__APPEND_RESULT__INIT,
                                         VARLOG__SNPB__APPEND_RESULT__INIT};
    Varlog__Snpb__AppendResult *res_ptrs[2] = {&res[0], &res[1]};
    for (int i = 0; i < 2; i++) {
        meta[i].topic_id = 1;
        meta[i].log_stream_id = 2;
        meta[i].glsn = 300 + (uint64_t)i;
        meta[i].llsn = 1 + (uint64_t)i;
        res[i].meta = &meta[i];
    }
    Varlog__Snpb__AppendResponse rsp = VARLOG__SNPB__APPEND_RESPONSE__INIT;
    rsp.n_results = 2;
    rsp.results = res_ptrs;
    assert_encodes_to(&rsp.base, append_response_bytes, sizeof(append_response_bytes));
}

static void test_append_response_decode(void **state)
{
    (void)state;
    Varlog__Snpb__AppendResponse *rsp = (Varlog__Snpb__AppendResponse *)golden_decode(
        &varlog__snpb__append_response__descriptor, append_response_bytes,
        sizeof(append_response_bytes));
    assert_int_equal(rsp->n_results, 2);
    assert_meta(rsp->results[0]->meta, 1, 2, 300, 1);
    assert_string_equal(rsp->results[0]->error, "");
    assert_meta(rsp->results[1]->meta, 1, 2, 301, 2);
    assert_string_equal(rsp->results[1]->error, "");
    varlog__snpb__append_response__free_unpacked(rsp, NULL);
}

/* ---- varlog.snpb.SubscribeRequest --------------------------------------------------------- */

static const uint8_t subscribe_request_bytes[] = {
    0x08, 0x80, 0x01, /* 1 glsn_begin 128: low 7 bits 0 | 0x80, then 128>>7 = 1 */
    0x10,             /* 2 glsn_end: tag 2<<3|0 */
    0xff, 0xff, 0xff, /*   UINT64_MAX: 64 one bits = nine groups of 7 (0x7f | 0x80) ... */
    0xff, 0xff, 0xff, /*   ... */
    0xff, 0xff, 0xff, /*   ... */
    0x01,             /*   ... and the 64th bit alone: ten bytes, the longest varint */
    0x18, 0x03,       /* 3 topic_id 3 */
    0x20, 0x04,       /* 4 log_stream_id 4 */
};

static void test_subscribe_request_encode(void **state)
{
    (void)state;
    Varlog__Snpb__SubscribeRequest req = VARLOG__SNPB__SUBSCRIBE_REQUEST__INIT;
    req.glsn_begin = 128;
    req.glsn_end = UINT64_MAX;
    req.topic_id = 3;
    req.log_stream_id = 4;
    assert_encodes_to(&req.base, subscribe_request_bytes, sizeof(subscribe_request_bytes));
}

static void test_subscribe_request_decode(void **state)
{
    (void)state;
    Varlog__Snpb__SubscribeRequest *req = (Varlog__Snpb__SubscribeRequest *)golden_decode(
        &varlog__snpb__subscribe_request__descriptor, subscribe_request_bytes,
        sizeof(subscribe_request_bytes));
    assert_int_equal(req->glsn_begin, 128);
    assert_true(req->glsn_end == UINT64_MAX);
    assert_int_equal(req->topic_id, 3);
    assert_int_equal(req->log_stream_id, 4);
    varlog__snpb__subscribe_request__free_unpacked(req, NULL);
}

/* ---- varlog.snpb.SubscribeResponse -------------------------------------------------------- */

static const uint8_t subscribe_response_bytes[] = {
    0x08, 0x05,                         /* 1 glsn 5 */
    0x10, 0x03,                         /* 2 llsn 3 */
    0x1a, 0x05, 0x68, 0x65, 0x6c, 0x6c, /* 3 payload: tag 3<<3|2, length 5, "hell" ... */
    0x6f,                               /*   ... "o" */
};

static void test_subscribe_response_encode(void **state)
{
    (void)state;
    Varlog__Snpb__SubscribeResponse rsp = VARLOG__SNPB__SUBSCRIBE_RESPONSE__INIT;
    rsp.glsn = 5;
    rsp.llsn = 3;
    rsp.payload.data = (uint8_t *)"hello";
    rsp.payload.len = 5;
    assert_encodes_to(&rsp.base, subscribe_response_bytes, sizeof(subscribe_response_bytes));
}

static void test_subscribe_response_decode(void **state)
{
    (void)state;
    Varlog__Snpb__SubscribeResponse *rsp = (Varlog__Snpb__SubscribeResponse *)golden_decode(
        &varlog__snpb__subscribe_response__descriptor, subscribe_response_bytes,
        sizeof(subscribe_response_bytes));
    assert_int_equal(rsp->glsn, 5);
    assert_int_equal(rsp->llsn, 3);
    assert_bytes(rsp->payload, "hello");
    varlog__snpb__subscribe_response__free_unpacked(rsp, NULL);
}

/* ---- varlog.snpb.SubscribeToResponse ------------------------------------------------------ */

static const uint8_t subscribe_to_response_bytes[] = {
    0x0a, 0x0e,       /* 1 log_entry: tag 1<<3|2, length 14 */
    0x0a, 0x09,       /*   1 meta: length 9 */
    0x08, 0x01,       /*     1 topic_id 1 */
    0x10, 0x02,       /*     2 log_stream_id 2 */
    0x18, 0xac, 0x02, /*     3 glsn 300 */
    0x20, 0x01,       /*     4 llsn 1 */
    0x12, 0x01, 0x78, /*   2 data: tag 2<<3|2, length 1, "x" */
};

static void test_subscribe_to_response_encode(void **state)
{
    (void)state;
    Varlog__Varlogpb__LogEntryMeta meta = VARLOG__VARLOGPB__LOG_ENTRY_META__INIT;
    meta.topic_id = 1;
    meta.log_stream_id = 2;
    meta.glsn = 300;
    meta.llsn = 1;
    Varlog__Varlogpb__LogEntry entry = VARLOG__VARLOGPB__LOG_ENTRY__INIT;
    entry.meta = &meta;
    entry.data.data = (uint8_t *)"x";
    entry.data.len = 1;
    Varlog__Snpb__SubscribeToResponse rsp = VARLOG__SNPB__SUBSCRIBE_TO_RESPONSE__INIT;
    rsp.log_entry = &entry;
    assert_encodes_to(&rsp.base, subscribe_to_response_bytes, sizeof(subscribe_to_response_bytes));
}

static void test_subscribe_to_response_decode(void **state)
{
    (void)state;
    Varlog__Snpb__SubscribeToResponse *rsp = (Varlog__Snpb__SubscribeToResponse *)golden_decode(
        &varlog__snpb__subscribe_to_response__descriptor, subscribe_to_response_bytes,
        sizeof(subscribe_to_response_bytes));
    assert_non_null(rsp->log_entry);
    assert_meta(rsp->log_entry->meta, 1, 2, 300, 1);
    assert_bytes(rsp->log_entry->data, "x");
    varlog__snpb__subscribe_to_response__free_unpacked(rsp, NULL);
}

/* ---- varlog.snpb.LogStreamReplicaMetadataResponse ----------------------------------------- */

/* Go's zero time.Time, which Go servers send for an unset non-nullable timestamp, has seconds
 * -62135596800 = -0xe7791f700. As a uint64 that is 0xfffffff1886e0900 (invert, add 1), whose
 * little-endian bytes are 00 09 6e 88 f1 ff ff ff. Regrouped by 7 bits from the low end:
 * bits 0-6 = 0x00; 7-13 = 0x09 << 1 = 0x12; 14-20 = (0x6e & 0x1f) << 2 = 0x38;
 * 21-27 = 0x6e >> 5 | (0x88 & 0x0f) << 3 = 0x43; 28-34 = 0x88 >> 4 | (0xf1 & 0x07) << 4 = 0x18;
 * 35-41 = 0xf1 >> 3 | (0xff & 0x03) << 5 = 0x7e; 42-62 = three groups of 0x7f; bit 63 = 0x01.
 * A negative int64 therefore always takes the full ten bytes. */
#define TS_GO_ZERO "\x80\x92\xb8\xc3\x98\xfe\xff\xff\xff\x01"

static const char lsrm_response_bytes[] =
    "\x0a\x3f"           /* 1 log_stream_replica: tag 1<<3|2, length 63 */
    "\x0a\x0a"           /*   1 log_stream_replica: length 10 */
    "\x0a\x02"           /*     1 storage_node: length 2 (the SN leaves the address empty) */
    "\x08\x01"           /*       1 storage_node_id 1 */
    "\x12\x04"           /*     2 topic_log_stream: length 4 */
    "\x08\x01"           /*       1 topic_id 1 */
    "\x10\x02"           /*       2 log_stream_id 2 (status RUNNING = 0: left out) */
    "\x18\x04"           /*   3 version 4 */
    "\x20\x0a"           /*   4 global_high_watermark 10 */
    "\x2a\x04"           /*   5 local_low_watermark: tag 5<<3|2, length 4 */
    "\x08\x01"           /*     1 llsn 1 */
    "\x10\x01"           /*     2 glsn 1 */
    "\x32\x04"           /*   6 local_high_watermark: tag 6<<3|2, length 4 */
    "\x08\x05"           /*     1 llsn 5 */
    "\x10\x0a"           /*     2 glsn 10 */
    "\x3a\x09"           /*   7 path: tag 7<<3|2, length 9 */
    "/data/ls2"          /*     */
    "\x40\x80\x20"       /*   8 storage_size_bytes: tag 8<<3|0, 4096 = 32 * 128 + 0 */
    "\x4a\x06"           /*   9 created_time: tag 9<<3|2, length 6 */
    "\x08" TS_1700000000 /*     1 seconds 1700000000 (nanos 0: left out) */
    "\x52\x0b"           /*  10 updated_time: tag 10<<3|2, length 11 */
    "\x08" TS_GO_ZERO;   /*     1 seconds -62135596800 */

static void test_lsrm_response_encode(void **state)
{
    (void)state;
    Varlog__Varlogpb__StorageNode sn = VARLOG__VARLOGPB__STORAGE_NODE__INIT;
    sn.storage_node_id = 1;
    Varlog__Varlogpb__TopicLogStream tls = VARLOG__VARLOGPB__TOPIC_LOG_STREAM__INIT;
    tls.topic_id = 1;
    tls.log_stream_id = 2;
    Varlog__Varlogpb__LogStreamReplica replica = VARLOG__VARLOGPB__LOG_STREAM_REPLICA__INIT;
    replica.storage_node = &sn;
    replica.topic_log_stream = &tls;
    Varlog__Varlogpb__LogSequenceNumber low = VARLOG__VARLOGPB__LOG_SEQUENCE_NUMBER__INIT;
    low.llsn = 1;
    low.glsn = 1;
    Varlog__Varlogpb__LogSequenceNumber high = VARLOG__VARLOGPB__LOG_SEQUENCE_NUMBER__INIT;
    high.llsn = 5;
    high.glsn = 10;
    Google__Protobuf__Timestamp created = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
    created.seconds = 1700000000;
    Google__Protobuf__Timestamp updated = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
    updated.seconds = -62135596800;

    Varlog__Snpb__LogStreamReplicaMetadataDescriptor d =
        VARLOG__SNPB__LOG_STREAM_REPLICA_METADATA_DESCRIPTOR__INIT;
    d.log_stream_replica = &replica;
    d.status = VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING;
    d.version = 4;
    d.global_high_watermark = 10;
    d.local_low_watermark = &low;
    d.local_high_watermark = &high;
    d.path = "/data/ls2";
    d.storage_size_bytes = 4096;
    d.created_time = &created;
    d.updated_time = &updated;
    Varlog__Snpb__LogStreamReplicaMetadataResponse rsp =
        VARLOG__SNPB__LOG_STREAM_REPLICA_METADATA_RESPONSE__INIT;
    rsp.log_stream_replica = &d;
    assert_encodes_to(&rsp.base, (const uint8_t *)lsrm_response_bytes,
                      LIT_LEN(lsrm_response_bytes));
}

static void test_lsrm_response_decode(void **state)
{
    (void)state;
    Varlog__Snpb__LogStreamReplicaMetadataResponse *rsp =
        (Varlog__Snpb__LogStreamReplicaMetadataResponse *)golden_decode(
            &varlog__snpb__log_stream_replica_metadata_response__descriptor, lsrm_response_bytes,
            LIT_LEN(lsrm_response_bytes));
    const Varlog__Snpb__LogStreamReplicaMetadataDescriptor *d = rsp->log_stream_replica;
    assert_non_null(d);
    assert_non_null(d->log_stream_replica);
    assert_non_null(d->log_stream_replica->storage_node);
    assert_int_equal(d->log_stream_replica->storage_node->storage_node_id, 1);
    assert_string_equal(d->log_stream_replica->storage_node->address, "");
    assert_non_null(d->log_stream_replica->topic_log_stream);
    assert_int_equal(d->log_stream_replica->topic_log_stream->topic_id, 1);
    assert_int_equal(d->log_stream_replica->topic_log_stream->log_stream_id, 2);
    assert_int_equal(d->status, VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING);
    assert_int_equal(d->version, 4);
    assert_int_equal(d->global_high_watermark, 10);
    assert_non_null(d->local_low_watermark);
    assert_int_equal(d->local_low_watermark->llsn, 1);
    assert_int_equal(d->local_low_watermark->glsn, 1);
    assert_non_null(d->local_high_watermark);
    assert_int_equal(d->local_high_watermark->llsn, 5);
    assert_int_equal(d->local_high_watermark->glsn, 10);
    assert_string_equal(d->path, "/data/ls2");
    assert_int_equal(d->storage_size_bytes, 4096);
    assert_non_null(d->created_time);
    assert_true(d->created_time->seconds == 1700000000);
    assert_int_equal(d->created_time->nanos, 0);
    assert_non_null(d->updated_time);
    assert_true(d->updated_time->seconds == -62135596800);
    assert_int_equal(d->updated_time->nanos, 0);
    varlog__snpb__log_stream_replica_metadata_response__free_unpacked(rsp, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_request_encode),
        cmocka_unit_test(test_append_request_decode),
        cmocka_unit_test(test_append_response_encode),
        cmocka_unit_test(test_append_response_decode),
        cmocka_unit_test(test_subscribe_request_encode),
        cmocka_unit_test(test_subscribe_request_decode),
        cmocka_unit_test(test_subscribe_response_encode),
        cmocka_unit_test(test_subscribe_response_decode),
        cmocka_unit_test(test_subscribe_to_response_encode),
        cmocka_unit_test(test_subscribe_to_response_decode),
        cmocka_unit_test(test_lsrm_response_encode),
        cmocka_unit_test(test_lsrm_response_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
