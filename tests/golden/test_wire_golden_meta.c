/*
 * Golden bytes for Varlog's wire messages: varlogpb/mrpb metadata, ClusterInfo, google.rpc.Status
 * with ErrorDetail, and decode tolerance. How the expected bytes were derived, and the notation of
 * the comments, is explained at the top of golden_support.h.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "golden_support.h"
#include "errpb/errors.pb-c.h"
#include "google/protobuf/any.pb-c.h"
#include "google/rpc/status.pb-c.h"
#include "mrpb/management.pb-c.h"
#include "mrpb/metadata_repository.pb-c.h"
#include "snpb/log_io.pb-c.h"
#include "varlogpb/metadata.pb-c.h"
#include "wire.h"

/* ---- varlog.mrpb.GetMetadataResponse ------------------------------------------------------ */

static const char get_metadata_response_bytes[] =
    "\x0a\x51"                  /* 1 metadata: tag 1<<3|2, length 81 */
    "\x08\x07"                  /*   1 applied_index 7 */
    "\x12\x25"                  /*   2 storage_nodes[0]: length 37 */
    "\x0a\x12"                  /*     1 storage_node: length 18 */
    "\x08\x01"                  /*       1 storage_node_id 1 */
    "\x12\x0e"                  /*       2 address: length 14 */
    "127.0.0.1:9091"            /*         */
    "\x1a\x05"                  /*     3 paths[0]: length 5 (2 status RUNNING = 0: left out) */
    "/data"                     /*         */
    "\x22\x08"                  /*     4 create_time: tag 4<<3|2, length 8 */
    "\x08" TS_1700000000        /*       1 seconds 1700000000 */
    "\x10\x05"                  /*       2 nanos 5 */
    "\x1a\x1c"                  /*   3 log_streams[0]: length 28 */
    "\x08\x01"                  /*     1 topic_id 1 */
    "\x10\x02"                  /*     2 log_stream_id 2 */
    "\x18\x02"                  /*     3 status LS_STATUS_SEALED = 2 */
    "\x22\x14"                  /*     4 replicas[0]: length 20 */
    "\x08\x01"                  /*       1 storage_node_id 1 */
    "\x12\x05"                  /*       2 storage_node_path: length 5 */
    "/data"                     /*         */
    "\x1a\x09"                  /*       3 data_path: length 9 */
    "/data/ls2"                 /*         */
    "\x22\x08"                  /*   4 topics[0]: length 8 */
    "\x08\x01"                  /*     1 topic_id 1 (status RUNNING = 0: left out) */
    "\x1a\x04\x02\x03\xac\x02"; /*     3 log_streams packed: length 4, 2, 3, 300 */

static void test_get_metadata_response_encode(void **state)
{
    (void)state;
    Varlog__Varlogpb__StorageNode sn = VARLOG__VARLOGPB__STORAGE_NODE__INIT;
    sn.storage_node_id = 1;
    sn.address = "127.0.0.1:9091";
    char *paths[] = {"/data"};
    Google__Protobuf__Timestamp created = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
    created.seconds = 1700000000;
    created.nanos = 5;
    Varlog__Varlogpb__StorageNodeDescriptor snd = VARLOG__VARLOGPB__STORAGE_NODE_DESCRIPTOR__INIT;
    snd.storage_node = &sn;
    snd.status = VARLOG__VARLOGPB__STORAGE_NODE_STATUS__STORAGE_NODE_STATUS_RUNNING;
    snd.n_paths = 1;
    snd.paths = paths;
    snd.create_time = &created;
    Varlog__Varlogpb__StorageNodeDescriptor *snds[] = {&snd};

    Varlog__Varlogpb__ReplicaDescriptor rd = VARLOG__VARLOGPB__REPLICA_DESCRIPTOR__INIT;
    rd.storage_node_id = 1;
    rd.storage_node_path = "/data";
    rd.data_path = "/data/ls2";
    Varlog__Varlogpb__ReplicaDescriptor *rds[] = {&rd};
    Varlog__Varlogpb__LogStreamDescriptor lsd = VARLOG__VARLOGPB__LOG_STREAM_DESCRIPTOR__INIT;
    lsd.topic_id = 1;
    lsd.log_stream_id = 2;
    lsd.status = VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED;
    lsd.n_replicas = 1;
    lsd.replicas = rds;
    Varlog__Varlogpb__LogStreamDescriptor *lsds[] = {&lsd};

    int32_t topic_ls[] = {2, 3, 300};
    Varlog__Varlogpb__TopicDescriptor td = VARLOG__VARLOGPB__TOPIC_DESCRIPTOR__INIT;
    td.topic_id = 1;
    td.status = VARLOG__VARLOGPB__TOPIC_STATUS__TOPIC_STATUS_RUNNING;
    td.n_log_streams = 3;
    td.log_streams = topic_ls;
    Varlog__Varlogpb__TopicDescriptor *tds[] = {&td};

    Varlog__Varlogpb__MetadataDescriptor md = VARLOG__VARLOGPB__METADATA_DESCRIPTOR__INIT;
    md.applied_index = 7;
    md.n_storage_nodes = 1;
    md.storage_nodes = snds;
    md.n_log_streams = 1;
    md.log_streams = lsds;
    md.n_topics = 1;
    md.topics = tds;
    Varlog__Mrpb__GetMetadataResponse rsp = VARLOG__MRPB__GET_METADATA_RESPONSE__INIT;
    rsp.metadata = &md;
    assert_encodes_to(&rsp.base, (const uint8_t *)get_metadata_response_bytes,
                      LIT_LEN(get_metadata_response_bytes));
}

static void test_get_metadata_response_decode(void **state)
{
    (void)state;
    Varlog__Mrpb__GetMetadataResponse *rsp = (Varlog__Mrpb__GetMetadataResponse *)golden_decode(
        &varlog__mrpb__get_metadata_response__descriptor, get_metadata_response_bytes,
        LIT_LEN(get_metadata_response_bytes));
    const Varlog__Varlogpb__MetadataDescriptor *md = rsp->metadata;
    assert_non_null(md);
    assert_int_equal(md->applied_index, 7);

    assert_int_equal(md->n_storage_nodes, 1);
    const Varlog__Varlogpb__StorageNodeDescriptor *snd = md->storage_nodes[0];
    assert_non_null(snd->storage_node);
    assert_int_equal(snd->storage_node->storage_node_id, 1);
    assert_string_equal(snd->storage_node->address, "127.0.0.1:9091");
    assert_int_equal(snd->status,
                     VARLOG__VARLOGPB__STORAGE_NODE_STATUS__STORAGE_NODE_STATUS_RUNNING);
    assert_int_equal(snd->n_paths, 1);
    assert_string_equal(snd->paths[0], "/data");
    assert_non_null(snd->create_time);
    assert_int_equal(snd->create_time->seconds, 1700000000);
    assert_int_equal(snd->create_time->nanos, 5);

    assert_int_equal(md->n_log_streams, 1);
    const Varlog__Varlogpb__LogStreamDescriptor *lsd = md->log_streams[0];
    assert_int_equal(lsd->topic_id, 1);
    assert_int_equal(lsd->log_stream_id, 2);
    assert_int_equal(lsd->status, VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED);
    assert_int_equal(lsd->n_replicas, 1);
    assert_int_equal(lsd->replicas[0]->storage_node_id, 1);
    assert_string_equal(lsd->replicas[0]->storage_node_path, "/data");
    assert_string_equal(lsd->replicas[0]->data_path, "/data/ls2");

    assert_int_equal(md->n_topics, 1);
    const Varlog__Varlogpb__TopicDescriptor *td = md->topics[0];
    assert_int_equal(td->topic_id, 1);
    assert_int_equal(td->status, VARLOG__VARLOGPB__TOPIC_STATUS__TOPIC_STATUS_RUNNING);
    assert_int_equal(td->n_log_streams, 3);
    assert_int_equal(td->log_streams[0], 2);
    assert_int_equal(td->log_streams[1], 3);
    assert_int_equal(td->log_streams[2], 300);
    varlog__mrpb__get_metadata_response__free_unpacked(rsp, NULL);
}

/* ---- varlog.mrpb.GetClusterInfoResponse --------------------------------------------------- */

static const char get_cluster_info_response_bytes[] =
    "\x0a\x38"               /* 1 cluster_info: tag 1<<3|2, length 56 */
    "\x08\x01"               /*   1 cluster_id 1 */
    "\x10\x09"               /*   2 node_id 9 */
    "\x18\x09"               /*   3 leader 9 */
    "\x20\x01"               /*   4 replication_factor 1 */
    "\x2a\x2c"               /*   5 members, one map entry: tag 5<<3|2, length 44 */
    "\x08\x09"               /*     1 key 9 */
    "\x12\x28"               /*     2 value (Member): length 40 */
    "\x0a\x16"               /*       1 peer: length 22 */
    "http://127.0.0.1:10000" /*         */
    "\x12\x0e"               /*       2 endpoint: length 14 (learner false: left out) */
    "127.0.0.1:9092"         /*         */
    "\x30\x03";              /*   6 applied_index: tag 6<<3|0, 3 */

static void test_get_cluster_info_response_encode(void **state)
{
    (void)state;
    Varlog__Mrpb__ClusterInfo__Member member = VARLOG__MRPB__CLUSTER_INFO__MEMBER__INIT;
    member.peer = "http://127.0.0.1:10000";
    member.endpoint = "127.0.0.1:9092";
    member.learner = 0;
    Varlog__Mrpb__ClusterInfo__MembersEntry entry = VARLOG__MRPB__CLUSTER_INFO__MEMBERS_ENTRY__INIT;
    entry.key = 9;
    entry.value = &member;
    Varlog__Mrpb__ClusterInfo__MembersEntry *entries[] = {&entry};
    Varlog__Mrpb__ClusterInfo ci = VARLOG__MRPB__CLUSTER_INFO__INIT;
    ci.cluster_id = 1;
    ci.node_id = 9;
    ci.leader = 9;
    ci.replication_factor = 1;
    ci.n_members = 1;
    ci.members = entries;
    ci.applied_index = 3;
    Varlog__Mrpb__GetClusterInfoResponse rsp = VARLOG__MRPB__GET_CLUSTER_INFO_RESPONSE__INIT;
    rsp.cluster_info = &ci;
    assert_encodes_to(&rsp.base, (const uint8_t *)get_cluster_info_response_bytes,
                      LIT_LEN(get_cluster_info_response_bytes));
}

static void test_get_cluster_info_response_decode(void **state)
{
    (void)state;
    Varlog__Mrpb__GetClusterInfoResponse *rsp =
        (Varlog__Mrpb__GetClusterInfoResponse *)golden_decode(
            &varlog__mrpb__get_cluster_info_response__descriptor, get_cluster_info_response_bytes,
            LIT_LEN(get_cluster_info_response_bytes));
    const Varlog__Mrpb__ClusterInfo *ci = rsp->cluster_info;
    assert_non_null(ci);
    assert_int_equal(ci->cluster_id, 1);
    assert_int_equal(ci->node_id, 9);
    assert_int_equal(ci->leader, 9);
    assert_int_equal(ci->replication_factor, 1);
    assert_int_equal(ci->applied_index, 3);
    assert_int_equal(ci->n_members, 1);
    assert_int_equal(ci->members[0]->key, 9);
    const Varlog__Mrpb__ClusterInfo__Member *member = ci->members[0]->value;
    assert_non_null(member);
    assert_string_equal(member->peer, "http://127.0.0.1:10000");
    assert_string_equal(member->endpoint, "127.0.0.1:9092");
    assert_false(member->learner);
    varlog__mrpb__get_cluster_info_response__free_unpacked(rsp, NULL);
}

/* ---- google.rpc.Status with varlog.errpb.ErrorDetail -------------------------------------- */

/* What a Go storage node puts in grpc-status-details-bin for a Subscribe below the trim point:
 * code OutOfRange, and the error's unwrap chain as details, outermost first. */
static const char status_bytes[] = "\x08\x0b"                       /* 1 code 11 (OUT_OF_RANGE) */
                                   "\x12\x1e"                       /* 2 message: length 30 */
                                   "log stream: logstream: trimmed" /*   */
                                   "\x1a\x50" /* 3 details[0] (Any): length 80 */
                                   "\x0a\x2c" /*   1 type_url: length 44 */
                                   "type.googleapis.com/varlog.errpb.ErrorDetail" /*     */
                                   "\x12\x20" /*   2 value: length 32 */
                                   "\x0a\x1e" /*     1 error_string: length 30 */
                                   "log stream: logstream: trimmed" /*       */
                                   "\x1a\x44" /* 3 details[1] (Any): length 68 */
                                   "\x0a\x2c" /*   1 type_url: length 44 */
                                   "type.googleapis.com/varlog.errpb.ErrorDetail" /*     */
                                   "\x12\x14"            /*   2 value: length 20 */
                                   "\x0a\x12"            /*     1 error_string: length 18 */
                                   "logstream: trimmed"; /*       */

static const char *const status_details[] = {"log stream: logstream: trimmed",
                                             "logstream: trimmed"};

static void test_status_encode(void **state)
{
    (void)state;
    /* Any.value holds the encoded ErrorDetail, so it is packed on its own first. */
    Varlog__Errpb__ErrorDetail ed[2] = {VARLOG__ERRPB__ERROR_DETAIL__INIT,
                                        VARLOG__ERRPB__ERROR_DETAIL__INIT};
    uint8_t values[2][64];
    Google__Protobuf__Any any[2] = {GOOGLE__PROTOBUF__ANY__INIT, GOOGLE__PROTOBUF__ANY__INIT};
    Google__Protobuf__Any *any_ptrs[2] = {&any[0], &any[1]};
    for (int i = 0; i < 2; i++) {
        ed[i].error_string = (char *)status_details[i];
        assert_true(varlog__errpb__error_detail__get_packed_size(&ed[i]) <= sizeof(values[i]));
        any[i].type_url = "type.googleapis.com/varlog.errpb.ErrorDetail";
        any[i].value.data = values[i];
        any[i].value.len = varlog__errpb__error_detail__pack(&ed[i], values[i]);
    }
    Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;
    st.code = 11;
    st.message = "log stream: logstream: trimmed";
    st.n_details = 2;
    st.details = any_ptrs;
    assert_encodes_to(&st.base, (const uint8_t *)status_bytes, LIT_LEN(status_bytes));
}

static void test_status_decode(void **state)
{
    (void)state;
    Google__Rpc__Status *st = (Google__Rpc__Status *)golden_decode(
        &google__rpc__status__descriptor, status_bytes, LIT_LEN(status_bytes));
    assert_int_equal(st->code, 11);
    assert_string_equal(st->message, "log stream: logstream: trimmed");
    assert_int_equal(st->n_details, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_string_equal(st->details[i]->type_url,
                            "type.googleapis.com/varlog.errpb.ErrorDetail");
        Varlog__Errpb__ErrorDetail *ed = varlog__errpb__error_detail__unpack(
            NULL, st->details[i]->value.len, st->details[i]->value.data);
        assert_non_null(ed);
        assert_string_equal(ed->error_string, status_details[i]);
        varlog__errpb__error_detail__free_unpacked(ed, NULL);
    }
    google__rpc__status__free_unpacked(st, NULL);
}

/* The trailer the client and server transports build must be these same bytes. */
static void test_status_wire_helper_matches(void **state)
{
    (void)state;
    grpc_slice out;
    assert_true(wire_status_details_encode(
        GRPC_STATUS_OUT_OF_RANGE, "log stream: logstream: trimmed", status_details, 2, &out));
    assert_int_equal(GRPC_SLICE_LENGTH(out), LIT_LEN(status_bytes));
    assert_memory_equal(GRPC_SLICE_START_PTR(out), status_bytes, LIT_LEN(status_bytes));
    grpc_slice_unref(out);
}

/* ---- decode tolerance --------------------------------------------------------------------- */

/* An AppendRequest from a pre-v0.13 client still carries backups (field 4, now reserved), and
 * any peer may add fields of every wire type; a decoder must step over all of them. */
static void test_decode_skips_unknown_fields(void **state)
{
    (void)state;
    static const uint8_t bytes[] = {
        0x78, 0xac, 0x02,             /* 15 (unknown) varint 300: tag 15<<3|0 = 120 */
        0x08, 0x01,                   /* 1 topic_id 1 */
        0x22, 0x07,                   /* 4 backups[0] (removed): tag 4<<3|2, length 7 */
        0x08, 0x02,                   /*   1 storage_node_id 2 */
        0x12, 0x03, 0x68, 0x3a, 0x31, /*   2 address "h:1" */
        0x10, 0x02,                   /* 2 log_stream_id 2 */
        0x81, 0x01,                   /* 16 (unknown) 64-bit: tag 16<<3|1 = 129, two bytes */
        0x01, 0x02, 0x03, 0x04,       /*   eight bytes of value ... */
        0x05, 0x06, 0x07, 0x08,       /*   ... */
        0x1a, 0x01, 0x78,             /* 3 payload[0] "x" */
        0x8d, 0x01,                   /* 17 (unknown) 32-bit: tag 17<<3|5 = 141 */
        0xff, 0xff, 0xff, 0xff,       /*   four bytes of value */
    };
    Varlog__Snpb__AppendRequest *req = (Varlog__Snpb__AppendRequest *)golden_decode(
        &varlog__snpb__append_request__descriptor, bytes, sizeof(bytes));
    assert_int_equal(req->topic_id, 1);
    assert_int_equal(req->log_stream_id, 2);
    assert_int_equal(req->n_payload, 1);
    assert_bytes(req->payload[0], "x");
    /* protobuf-c keeps what it skipped (and would send it on if the message were re-packed);
     * the count shows each unknown field was recognised as one field. */
    assert_int_equal(req->base.n_unknown_fields, 4);
    varlog__snpb__append_request__free_unpacked(req, NULL);
}

/* Unknown fields inside a nested message must not disturb the fields around it. */
static void test_decode_skips_unknown_nested_fields(void **state)
{
    (void)state;
    static const uint8_t bytes[] = {
        0x0a, 0x0e,             /* 1 results[0]: length 14 */
        0x0a, 0x0a,             /*   1 meta: length 10 */
        0x08, 0x01,             /*     1 topic_id 1 */
        0x2a, 0x02, 0x6e, 0x6f, /*     5 (unknown) length-delimited "no" */
        0x10, 0x02,             /*     2 log_stream_id 2 */
        0x18, 0x07,             /*     3 glsn 7 */
        0x58, 0x01,             /*   11 (unknown) varint 1: tag 11<<3|0 = 88 */
        0x0a, 0x04,             /* 1 results[1]: length 4 */
        0x0a, 0x02,             /*   1 meta: length 2 */
        0x20, 0x03,             /*     4 llsn 3 */
    };
    Varlog__Snpb__AppendResponse *rsp = (Varlog__Snpb__AppendResponse *)golden_decode(
        &varlog__snpb__append_response__descriptor, bytes, sizeof(bytes));
    assert_int_equal(rsp->n_results, 2);
    assert_meta(rsp->results[0]->meta, 1, 2, 7, 0);
    assert_meta(rsp->results[1]->meta, 0, 0, 0, 3);
    varlog__snpb__append_response__free_unpacked(rsp, NULL);
}

/* Go marks many sub-messages non-nullable and always sends them, even empty, but proto3 says a
 * missing one means the same as an empty one. protobuf-c gives NULL for the first and a zeroed
 * message for the second, so C readers must treat NULL as zeros, as this accessor does. */
static const Varlog__Varlogpb__LogEntryMeta *meta_or_empty(const Varlog__Varlogpb__LogEntryMeta *m)
{
    static const Varlog__Varlogpb__LogEntryMeta empty = VARLOG__VARLOGPB__LOG_ENTRY_META__INIT;
    return m ? m : &empty;
}

static void test_decode_absent_submessage_as_empty(void **state)
{
    (void)state;
    static const uint8_t absent[] = {
        0x0a, 0x00, /* 1 results[0]: length 0 - no meta at all */
    };
    static const uint8_t present_empty[] = {
        0x0a, 0x02, /* 1 results[0]: length 2 */
        0x0a, 0x00, /*   1 meta: length 0, as Go sends a zero non-nullable message */
    };
    Varlog__Snpb__AppendResponse *a = (Varlog__Snpb__AppendResponse *)golden_decode(
        &varlog__snpb__append_response__descriptor, absent, sizeof(absent));
    Varlog__Snpb__AppendResponse *p = (Varlog__Snpb__AppendResponse *)golden_decode(
        &varlog__snpb__append_response__descriptor, present_empty, sizeof(present_empty));
    assert_int_equal(a->n_results, 1);
    assert_int_equal(p->n_results, 1);
    assert_null(a->results[0]->meta);
    assert_non_null(p->results[0]->meta);
    assert_meta(meta_or_empty(a->results[0]->meta), 0, 0, 0, 0);
    assert_meta(meta_or_empty(p->results[0]->meta), 0, 0, 0, 0);
    varlog__snpb__append_response__free_unpacked(a, NULL);
    varlog__snpb__append_response__free_unpacked(p, NULL);
}

/* Go emits TopicDescriptor.log_streams packed but its decoder, like every conformant one,
 * accepts unpacked elements and a mix of both, concatenated in order. */
static void assert_topic_log_streams(const uint8_t *bytes, size_t len)
{
    Varlog__Varlogpb__TopicDescriptor *td = (Varlog__Varlogpb__TopicDescriptor *)golden_decode(
        &varlog__varlogpb__topic_descriptor__descriptor, bytes, len);
    assert_int_equal(td->topic_id, 1);
    assert_int_equal(td->n_log_streams, 3);
    assert_int_equal(td->log_streams[0], 2);
    assert_int_equal(td->log_streams[1], 3);
    assert_int_equal(td->log_streams[2], 300);
    varlog__varlogpb__topic_descriptor__free_unpacked(td, NULL);
}

static void test_decode_unpacked_repeated_int32(void **state)
{
    (void)state;
    static const uint8_t packed[] = {
        0x08, 0x01,                         /* 1 topic_id 1 */
        0x1a, 0x04, 0x02, 0x03, 0xac, 0x02, /* 3 log_streams: tag 3<<3|2, length 4, 2 3 300 */
    };
    static const uint8_t unpacked[] = {
        0x08, 0x01,       /* 1 topic_id 1 */
        0x18, 0x02,       /* 3 log_streams: tag 3<<3|0, 2 */
        0x18, 0x03,       /* 3 log_streams: 3 */
        0x18, 0xac, 0x02, /* 3 log_streams: 300 */
    };
    static const uint8_t mixed[] = {
        0x08, 0x01,             /* 1 topic_id 1 */
        0x1a, 0x02, 0x02, 0x03, /* 3 log_streams packed: length 2, 2 3 */
        0x18, 0xac, 0x02,       /* 3 log_streams unpacked: 300 */
    };
    assert_topic_log_streams(packed, sizeof(packed));
    assert_topic_log_streams(unpacked, sizeof(unpacked));
    assert_topic_log_streams(mixed, sizeof(mixed));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_metadata_response_encode),
        cmocka_unit_test(test_get_metadata_response_decode),
        cmocka_unit_test(test_get_cluster_info_response_encode),
        cmocka_unit_test(test_get_cluster_info_response_decode),
        cmocka_unit_test(test_status_encode),
        cmocka_unit_test(test_status_decode),
        cmocka_unit_test(test_status_wire_helper_matches),
        cmocka_unit_test(test_decode_skips_unknown_fields),
        cmocka_unit_test(test_decode_skips_unknown_nested_fields),
        cmocka_unit_test(test_decode_absent_submessage_as_empty),
        cmocka_unit_test(test_decode_unpacked_repeated_int32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
