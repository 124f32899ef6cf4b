/* The admin service varlog.admpb.ClusterManager of the embedded server (admin.c), called raw
 * through the client transport as varlogctl would call it, and gRPC-Go's texts for unknown
 * services and methods. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admpb/admin.pb-c.h"
#include "server_test_util.h"
#include "test_support.h"

#define ADM "/varlog.admpb.ClusterManager/"

static int setup(void **state)
{
    return fixture_setup(state, 1, 2); /* topic 1: LS 1, 2 */
}

static int teardown(void **state)
{
    return fixture_teardown(state);
}

/* One admin call: *resp (may be NULL) owned by the caller; st cleared by the caller. */
static varlog_err_t adm(srv_fixture_t *f, const char *method, const ProtobufCMessage *req,
                        const ProtobufCMessageDescriptor *resp_desc, void *resp, rpc_status_t *st)
{
    char path[128];
    snprintf(path, sizeof(path), ADM "%s", method);
    ProtobufCMessage *m = NULL;
    rpc_status_init(st);
    varlog_err_t err = rpc_unary(f->client, f->addr, path, req, resp_desc, T_TIMEOUT, &m, st);
    if (resp)
        *(ProtobufCMessage **)resp = m;
    else
        free_msg(m);
    return err;
}

/* Asserts that the call fails with code and exactly message. */
static void assert_adm_error(srv_fixture_t *f, const char *method, const ProtobufCMessage *req,
                             const ProtobufCMessageDescriptor *resp_desc, varlog_err_t code,
                             const char *message)
{
    rpc_status_t st;
    assert_int_equal(adm(f, method, req, resp_desc, NULL, &st), code);
    assert_non_null(st.message);
    assert_string_equal(st.message, message);
    rpc_status_clear(&st);
}

/* Asserts that the call fails with code and a message containing part. */
static void assert_adm_refused(srv_fixture_t *f, const char *method, const ProtobufCMessage *req,
                               const ProtobufCMessageDescriptor *resp_desc, const char *part)
{
    rpc_status_t st;
    assert_int_equal(adm(f, method, req, resp_desc, NULL, &st), VARLOG_ERR_RPC_FAILED_PRECONDITION);
    assert_non_null(st.message);
    if (!strstr(st.message, part))
        fail_msg("%s: \"%s\" lacks \"%s\"", method, st.message, part);
    rpc_status_clear(&st);
}

static const Varlog__Varlogpb__LogStreamDescriptor *
md_ls(const Varlog__Varlogpb__MetadataDescriptor *md, int32_t ls)
{
    for (size_t i = 0; i < md->n_log_streams; i++) {
        if (md->log_streams[i]->log_stream_id == ls)
            return md->log_streams[i];
    }
    return NULL;
}

static const Varlog__Varlogpb__TopicDescriptor *
md_topic(const Varlog__Varlogpb__MetadataDescriptor *md, int32_t topic)
{
    for (size_t i = 0; i < md->n_topics; i++) {
        if (md->topics[i]->topic_id == topic)
            return md->topics[i];
    }
    return NULL;
}

/* AddTopic picks the next id and bumps the applied index; ListTopics, GetTopic and
 * DescribeTopic show it, GetMetadata too. */
static void test_topics(void **state)
{
    srv_fixture_t *f = *state;
    rpc_status_t st;
    uint64_t idx = varlog_server_applied_index(f->srv);
    Varlog__Admpb__AddTopicRequest add = VARLOG__ADMPB__ADD_TOPIC_REQUEST__INIT;
    Varlog__Admpb__AddTopicResponse *ar = NULL;
    assert_int_equal(
        adm(f, "AddTopic", &add.base, &varlog__admpb__add_topic_response__descriptor, &ar, &st),
        VARLOG_OK);
    rpc_status_clear(&st);
    assert_non_null(ar->topic);
    assert_int_equal(ar->topic->topic_id, 2);
    assert_int_equal(ar->topic->n_log_streams, 0);
    free_msg(ar);
    assert_true(varlog_server_applied_index(f->srv) > idx);

    Varlog__Admpb__ListTopicsRequest lt = VARLOG__ADMPB__LIST_TOPICS_REQUEST__INIT;
    Varlog__Admpb__ListTopicsResponse *lr = NULL;
    assert_int_equal(
        adm(f, "ListTopics", &lt.base, &varlog__admpb__list_topics_response__descriptor, &lr, &st),
        VARLOG_OK);
    rpc_status_clear(&st);
    assert_int_equal(lr->n_topics, 2);
    assert_int_equal(lr->topics[0]->topic_id, 1);
    assert_int_equal(lr->topics[0]->n_log_streams, 2);
    assert_int_equal(lr->topics[0]->log_streams[0], 1);
    assert_int_equal(lr->topics[0]->log_streams[1], 2);
    assert_int_equal(lr->topics[1]->topic_id, 2);
    free_msg(lr);

    Varlog__Admpb__GetTopicRequest gt = VARLOG__ADMPB__GET_TOPIC_REQUEST__INIT;
    gt.topic_id = 2;
    Varlog__Admpb__GetTopicResponse *gr = NULL;
    assert_int_equal(
        adm(f, "GetTopic", &gt.base, &varlog__admpb__get_topic_response__descriptor, &gr, &st),
        VARLOG_OK);
    rpc_status_clear(&st);
    assert_int_equal(gr->topic->topic_id, 2);
    assert_int_equal(gr->topic->status, VARLOG__VARLOGPB__TOPIC_STATUS__TOPIC_STATUS_RUNNING);
    free_msg(gr);

    Varlog__Admpb__DescribeTopicRequest dt = VARLOG__ADMPB__DESCRIBE_TOPIC_REQUEST__INIT;
    dt.topic_id = 1;
    Varlog__Admpb__DescribeTopicResponse *dr = NULL;
    assert_int_equal(adm(f, "DescribeTopic", &dt.base,
                         &varlog__admpb__describe_topic_response__descriptor, &dr, &st),
                     VARLOG_OK);
    rpc_status_clear(&st);
    assert_int_equal(dr->topic->topic_id, 1);
    assert_int_equal(dr->n_log_streams, 2);
    assert_int_equal(dr->log_streams[1]->log_stream_id, 2);
    assert_int_equal(dr->log_streams[1]->n_replicas, 1);
    assert_int_equal(dr->log_streams[1]->replicas[0]->storage_node_id, 1);
    free_msg(dr);

    Varlog__Mrpb__GetMetadataResponse *md = NULL;
    assert_int_equal(get_metadata(f, &md), VARLOG_OK);
    assert_int_equal(md->metadata->n_topics, 2);
    assert_non_null(md_topic(md->metadata, 2));
    free_msg(md);
}

/* AddLogStream on node 1 (replicas empty or naming node 1): GetMetadata, GetLogStream and
 * ListLogStreams show it and appends to it land. */
static void test_add_log_stream(void **state)
{
    srv_fixture_t *f = *state;
    rpc_status_t st;
    uint64_t idx = varlog_server_applied_index(f->srv);
    Varlog__Admpb__AddLogStreamRequest r = VARLOG__ADMPB__ADD_LOG_STREAM_REQUEST__INIT;
    r.topic_id = 1;
    Varlog__Admpb__AddLogStreamResponse *resp = NULL;
    assert_int_equal(adm(f, "AddLogStream", &r.base,
                         &varlog__admpb__add_log_stream_response__descriptor, &resp, &st),
                     VARLOG_OK);
    rpc_status_clear(&st);
    assert_int_equal(resp->log_stream->log_stream_id, 3);
    assert_int_equal(resp->log_stream->topic_id, 1);
    assert_int_equal(resp->log_stream->status,
                     VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING);
    assert_int_equal(resp->log_stream->n_replicas, 1);
    assert_int_equal(resp->log_stream->replicas[0]->storage_node_id, 1);
    free_msg(resp);
    assert_true(varlog_server_applied_index(f->srv) > idx);

    /* One replica on node 1, as varlogctl may name it. */
    Varlog__Varlogpb__ReplicaDescriptor rd = VARLOG__VARLOGPB__REPLICA_DESCRIPTOR__INIT;
    rd.storage_node_id = 1;
    rd.storage_node_path = "/data";
    Varlog__Varlogpb__ReplicaDescriptor *rds[2] = {&rd, &rd};
    r.n_replicas = 1;
    r.replicas = rds;
    assert_int_equal(adm(f, "AddLogStream", &r.base,
                         &varlog__admpb__add_log_stream_response__descriptor, &resp, &st),
                     VARLOG_OK);
    rpc_status_clear(&st);
    assert_int_equal(resp->log_stream->log_stream_id, 4);
    free_msg(resp);

    Varlog__Mrpb__GetMetadataResponse *md = NULL;
    assert_int_equal(get_metadata(f, &md), VARLOG_OK);
    assert_non_null(md_ls(md->metadata, 3));
    assert_non_null(md_ls(md->metadata, 4));
    assert_int_equal(md_topic(md->metadata, 1)->n_log_streams, 4);
    free_msg(md);

    Varlog__Admpb__GetLogStreamRequest g = VARLOG__ADMPB__GET_LOG_STREAM_REQUEST__INIT;
    g.topic_id = 1;
    g.log_stream_id = 4;
    Varlog__Admpb__GetLogStreamResponse *gr = NULL;
    assert_int_equal(adm(f, "GetLogStream", &g.base,
                         &varlog__admpb__get_log_stream_response__descriptor, &gr, &st),
                     VARLOG_OK);
    rpc_status_clear(&st);
    assert_int_equal(gr->log_stream->log_stream_id, 4);
    free_msg(gr);

    Varlog__Admpb__ListLogStreamsRequest l = VARLOG__ADMPB__LIST_LOG_STREAMS_REQUEST__INIT;
    l.topic_id = 1;
    Varlog__Admpb__ListLogStreamsResponse *lr = NULL;
    assert_int_equal(adm(f, "ListLogStreams", &l.base,
                         &varlog__admpb__list_log_streams_response__descriptor, &lr, &st),
                     VARLOG_OK);
    rpc_status_clear(&st);
    assert_int_equal(lr->n_log_streams, 4);
    free_msg(lr);

    assert_int_equal(append_batches(f, 1, 3, 1, 2, NULL, NULL, NULL, NULL), VARLOG_OK);

    /* Replication factor 1 on node 1 only. */
    r.n_replicas = 2;
    assert_adm_refused(f, "AddLogStream", &r.base,
                       &varlog__admpb__add_log_stream_response__descriptor,
                       "invalid number of log stream replicas: 2");
    rd.storage_node_id = 2;
    r.n_replicas = 1;
    assert_adm_refused(f, "AddLogStream", &r.base,
                       &varlog__admpb__add_log_stream_response__descriptor,
                       "no such storage node 2");
    r.n_replicas = 0;
    r.topic_id = 9;
    assert_adm_error(f, "AddLogStream", &r.base,
                     &varlog__admpb__add_log_stream_response__descriptor, VARLOG_ERR_RPC_NOT_FOUND,
                     "add log stream: tpid 9: rpc error: code = NotFound desc = no such topic");
}

/* Seal: the response carries the replica (SEALED) and the last committed GLSN; appends fail
 * with FailedPrecondition "sealed"; GetMetadata shows SEALED; sealing again answers the
 * same. Unseal: appends land again. */
static void test_seal_unseal(void **state)
{
    srv_fixture_t *f = *state;
    rpc_status_t st;
    /* GLSNs 1-2 on LS 1, 3 on LS 2, 4 on LS 1: LS 1's last is 4. */
    assert_int_equal(append_batches(f, 1, 1, 1, 2, NULL, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(append_batches(f, 1, 2, 1, 1, NULL, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(append_batches(f, 1, 1, 1, 1, NULL, NULL, NULL, NULL), VARLOG_OK);
    uint64_t idx = varlog_server_applied_index(f->srv);

    Varlog__Admpb__SealRequest sr = VARLOG__ADMPB__SEAL_REQUEST__INIT;
    sr.topic_id = 1;
    sr.log_stream_id = 1;
    for (int round = 0; round < 2; round++) {
        Varlog__Admpb__SealResponse *resp = NULL;
        assert_int_equal(
            adm(f, "Seal", &sr.base, &varlog__admpb__seal_response__descriptor, &resp, &st),
            VARLOG_OK);
        rpc_status_clear(&st);
        assert_int_equal(resp->sealed_glsn, 4);
        assert_int_equal(resp->n_log_streams, 1);
        const Varlog__Snpb__LogStreamReplicaMetadataDescriptor *d = resp->log_streams[0];
        assert_int_equal(d->status, VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED);
        assert_int_equal(d->log_stream_replica->storage_node->storage_node_id, 1);
        assert_int_equal(d->log_stream_replica->topic_log_stream->log_stream_id, 1);
        assert_int_equal(d->local_high_watermark->llsn, 3);
        assert_int_equal(d->local_high_watermark->glsn, 4);
        assert_int_equal(d->global_high_watermark, 4);
        free_msg(resp);
        /* Sealing changes the metadata once. */
        if (round == 0)
            assert_true(varlog_server_applied_index(f->srv) > idx);
        else
            assert_int_equal(varlog_server_applied_index(f->srv), idx);
        idx = varlog_server_applied_index(f->srv);
    }

    size_t answered = 99;
    assert_int_equal(append_batches(f, 1, 1, 1, 1, NULL, NULL, &answered, &st),
                     VARLOG_ERR_RPC_FAILED_PRECONDITION);
    assert_int_equal(answered, 0);
    assert_string_equal(st.message, "sealed");
    rpc_status_clear(&st);
    assert_int_equal(append_batches(f, 1, 2, 1, 1, NULL, NULL, NULL, NULL), VARLOG_OK);

    Varlog__Mrpb__GetMetadataResponse *md = NULL;
    assert_int_equal(get_metadata(f, &md), VARLOG_OK);
    assert_int_equal(md_ls(md->metadata, 1)->status,
                     VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED);
    assert_int_equal(md_ls(md->metadata, 2)->status,
                     VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING);
    free_msg(md);

    Varlog__Admpb__UnsealRequest ur = VARLOG__ADMPB__UNSEAL_REQUEST__INIT;
    ur.topic_id = 1;
    ur.log_stream_id = 1;
    for (int round = 0; round < 2; round++) {
        Varlog__Admpb__UnsealResponse *resp = NULL;
        assert_int_equal(
            adm(f, "Unseal", &ur.base, &varlog__admpb__unseal_response__descriptor, &resp, &st),
            VARLOG_OK);
        rpc_status_clear(&st);
        assert_int_equal(resp->log_stream->log_stream_id, 1);
        assert_int_equal(resp->log_stream->status,
                         VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING);
        free_msg(resp);
        if (round == 0)
            assert_true(varlog_server_applied_index(f->srv) > idx);
        else
            assert_int_equal(varlog_server_applied_index(f->srv), idx);
        idx = varlog_server_applied_index(f->srv);
    }
    uint64_t glsn = 0;
    assert_int_equal(append_batches(f, 1, 1, 1, 1, &glsn, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(glsn, 6);
    assert_int_equal(get_metadata(f, &md), VARLOG_OK);
    assert_int_equal(md_ls(md->metadata, 1)->status,
                     VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING);
    free_msg(md);
}

/* Trim through the admin: a result per log stream of the topic; the trimmed range then gets
 * the trimmed error; beyond the high watermark and a sealed log stream are refused per log
 * stream. */
static void test_trim(void **state)
{
    srv_fixture_t *f = *state;
    rpc_status_t st;
    assert_int_equal(append_batches(f, 1, 1, 1, 3, NULL, NULL, NULL, NULL), VARLOG_OK); /* 1-3 */
    assert_int_equal(append_batches(f, 1, 2, 1, 2, NULL, NULL, NULL, NULL), VARLOG_OK); /* 4-5 */

    Varlog__Admpb__TrimRequest r = VARLOG__ADMPB__TRIM_REQUEST__INIT;
    r.topic_id = 1;
    r.last_glsn = 9;
    Varlog__Admpb__TrimResponse *resp = NULL;
    assert_int_equal(adm(f, "Trim", &r.base, &varlog__admpb__trim_response__descriptor, &resp, &st),
                     VARLOG_OK);
    rpc_status_clear(&st);
    assert_int_equal(resp->n_results, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(resp->results[i]->storage_node_id, 1);
        assert_int_equal(resp->results[i]->log_stream_id, (int32_t)i + 1);
        assert_string_equal(resp->results[i]->error,
                            "log stream: trim: 9 not appended, global high watermark 5");
    }
    free_msg(resp);

    assert_int_equal(varlog_server_seal(f->srv, 1, 2), VARLOG_OK);
    r.last_glsn = 2;
    assert_int_equal(adm(f, "Trim", &r.base, &varlog__admpb__trim_response__descriptor, &resp, &st),
                     VARLOG_OK);
    rpc_status_clear(&st);
    assert_int_equal(resp->n_results, 2);
    assert_int_equal(resp->results[0]->log_stream_id, 1);
    assert_string_equal(resp->results[0]->error, "");
    assert_int_equal(resp->results[1]->log_stream_id, 2);
    assert_string_equal(resp->results[1]->error, "sealed");
    free_msg(resp);

    rpc_stream_t *s = subscribe_open(f, false, 1, 1, 1, 4, 4);
    ProtobufCMessage *m = NULL;
    assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_ERR_RPC_OUT_OF_RANGE);
    const rpc_status_t *ss = rpc_stream_status(s);
    assert_string_equal(ss->message, "log stream: logstream: trimmed");
    rpc_stream_destroy(s);
    /* What is left is readable. */
    uint64_t g[4];
    size_t n = 0;
    s = subscribe_open(f, false, 1, 1, 3, 4, 4);
    assert_int_equal(subscribe_collect(s, 4, T_TIMEOUT, g, NULL, &n), VARLOG_ERR_END);
    assert_int_equal(n, 1);
    assert_int_equal(g[0], 3);
    rpc_stream_destroy(s);

    r.topic_id = 7;
    assert_adm_error(f, "Trim", &r.base, &varlog__admpb__trim_response__descriptor,
                     VARLOG_ERR_RPC_NOT_FOUND, "trim: no such topic 7");
}

/* Unknown topics and log streams: NotFound in the Go admin's words. */
static void test_not_found(void **state)
{
    srv_fixture_t *f = *state;
    Varlog__Admpb__GetTopicRequest gt = VARLOG__ADMPB__GET_TOPIC_REQUEST__INIT;
    gt.topic_id = 5;
    assert_adm_error(f, "GetTopic", &gt.base, &varlog__admpb__get_topic_response__descriptor,
                     VARLOG_ERR_RPC_NOT_FOUND,
                     "get topic 5: rpc error: code = NotFound desc = no such topic");
    Varlog__Admpb__DescribeTopicRequest dt = VARLOG__ADMPB__DESCRIBE_TOPIC_REQUEST__INIT;
    dt.topic_id = 5;
    assert_adm_error(f, "DescribeTopic", &dt.base,
                     &varlog__admpb__describe_topic_response__descriptor, VARLOG_ERR_RPC_NOT_FOUND,
                     "no such topic (topicID=5): not exist");
    Varlog__Admpb__GetLogStreamRequest gl = VARLOG__ADMPB__GET_LOG_STREAM_REQUEST__INIT;
    gl.topic_id = 5;
    gl.log_stream_id = 1;
    assert_adm_error(f, "GetLogStream", &gl.base,
                     &varlog__admpb__get_log_stream_response__descriptor, VARLOG_ERR_RPC_NOT_FOUND,
                     "get log stream: tpid 5: rpc error: code = NotFound desc = no such topic");
    gl.topic_id = 1;
    gl.log_stream_id = 9;
    assert_adm_error(f, "GetLogStream", &gl.base,
                     &varlog__admpb__get_log_stream_response__descriptor, VARLOG_ERR_RPC_NOT_FOUND,
                     "get log stream: no log stream in topic: lsid 9: rpc error: code = "
                     "NotFound desc = no such log stream");
    Varlog__Admpb__ListLogStreamsRequest ll = VARLOG__ADMPB__LIST_LOG_STREAMS_REQUEST__INIT;
    ll.topic_id = 5;
    assert_adm_error(f, "ListLogStreams", &ll.base,
                     &varlog__admpb__list_log_streams_response__descriptor,
                     VARLOG_ERR_RPC_NOT_FOUND,
                     "list log streams: tpid 5: rpc error: code = NotFound desc = no such topic");
    Varlog__Admpb__SealRequest sr = VARLOG__ADMPB__SEAL_REQUEST__INIT;
    sr.topic_id = 1;
    sr.log_stream_id = 9;
    assert_adm_error(f, "Seal", &sr.base, &varlog__admpb__seal_response__descriptor,
                     VARLOG_ERR_RPC_NOT_FOUND, "ls 9");
    /* As varlogadm v0.30: Unseal names the storage node's refusal of a log stream of another
     * topic, and an unknown log stream, as Unknown. */
    Varlog__Admpb__UnsealRequest ur = VARLOG__ADMPB__UNSEAL_REQUEST__INIT;
    ur.topic_id = 5;
    ur.log_stream_id = 1;
    assert_adm_error(f, "Unseal", &ur.base, &varlog__admpb__unseal_response__descriptor,
                     VARLOG_ERR_RPC_UNKNOWN, "snmcl: not exist");
    ur.topic_id = 1;
    ur.log_stream_id = 9;
    assert_adm_error(f, "Unseal", &ur.base, &varlog__admpb__unseal_response__descriptor,
                     VARLOG_ERR_RPC_UNKNOWN, "log stream: not exist");
    Varlog__Admpb__GetStorageNodeRequest gs = VARLOG__ADMPB__GET_STORAGE_NODE_REQUEST__INIT;
    gs.storage_node_id = 2;
    assert_adm_error(f, "GetStorageNode", &gs.base,
                     &varlog__admpb__get_storage_node_response__descriptor,
                     VARLOG_ERR_RPC_NOT_FOUND,
                     "get storage node 2: rpc error: code = NotFound desc = no such storage node");
    Varlog__Admpb__GetMetadataRepositoryNodeRequest gm =
        VARLOG__ADMPB__GET_METADATA_REPOSITORY_NODE_REQUEST__INIT;
    gm.node_id = 2;
    assert_adm_error(f, "GetMetadataRepositoryNode", &gm.base,
                     &varlog__admpb__get_metadata_repository_node_response__descriptor,
                     VARLOG_ERR_RPC_NOT_FOUND, "admin: no such mr");
}

/* UnregisterTopic takes the topic out of the metadata and the admin's answers and bumps the
 * applied index; its log streams keep their data. */
static void test_unregister_topic(void **state)
{
    srv_fixture_t *f = *state;
    rpc_status_t st;
    int32_t t2 = 0;
    assert_int_equal(varlog_server_add_topic(f->srv, &t2), VARLOG_OK);
    uint64_t idx = varlog_server_applied_index(f->srv);
    Varlog__Admpb__UnregisterTopicRequest r = VARLOG__ADMPB__UNREGISTER_TOPIC_REQUEST__INIT;
    r.topic_id = 1;
    assert_int_equal(adm(f, "UnregisterTopic", &r.base,
                         &varlog__admpb__unregister_topic_response__descriptor, NULL, &st),
                     VARLOG_OK);
    rpc_status_clear(&st);
    assert_true(varlog_server_applied_index(f->srv) > idx);
    Varlog__Mrpb__GetMetadataResponse *md = NULL;
    assert_int_equal(get_metadata(f, &md), VARLOG_OK);
    assert_int_equal(md->metadata->n_topics, 1);
    assert_int_equal(md->metadata->topics[0]->topic_id, t2);
    assert_int_equal(md->metadata->n_log_streams, 0);
    free_msg(md);
    Varlog__Admpb__GetTopicRequest gt = VARLOG__ADMPB__GET_TOPIC_REQUEST__INIT;
    gt.topic_id = 1;
    assert_adm_error(f, "GetTopic", &gt.base, &varlog__admpb__get_topic_response__descriptor,
                     VARLOG_ERR_RPC_NOT_FOUND,
                     "get topic 1: rpc error: code = NotFound desc = no such topic");
    assert_adm_error(f, "UnregisterTopic", &r.base,
                     &varlog__admpb__unregister_topic_response__descriptor,
                     VARLOG_ERR_RPC_NOT_FOUND,
                     "unregister topic: tpid 1: rpc error: code = NotFound desc = no such topic");
}

/* The one storage node and the one MR node, as discovery reports them. */
static void test_nodes(void **state)
{
    srv_fixture_t *f = *state;
    rpc_status_t st;
    assert_int_equal(append_batches(f, 1, 2, 1, 3, NULL, NULL, NULL, NULL), VARLOG_OK);
    Varlog__Admpb__GetStorageNodeRequest g = VARLOG__ADMPB__GET_STORAGE_NODE_REQUEST__INIT;
    g.storage_node_id = 1;
    Varlog__Admpb__GetStorageNodeResponse *gr = NULL;
    assert_int_equal(adm(f, "GetStorageNode", &g.base,
                         &varlog__admpb__get_storage_node_response__descriptor, &gr, &st),
                     VARLOG_OK);
    rpc_status_clear(&st);
    const Varlog__Admpb__StorageNodeMetadata *snm = gr->storage_node;
    const Varlog__Snpb__StorageNodeMetadataDescriptor *d = snm->storage_node;
    assert_int_equal(d->cluster_id, 1);
    assert_int_equal(d->storage_node->storage_node_id, 1);
    assert_string_equal(d->storage_node->address, f->addr);
    assert_int_equal(d->status, VARLOG__VARLOGPB__STORAGE_NODE_STATUS__STORAGE_NODE_STATUS_RUNNING);
    assert_int_equal(d->n_log_stream_replicas, 2);
    assert_int_equal(d->log_stream_replicas[1]->local_high_watermark->llsn, 3);
    assert_int_equal(d->n_storages, 1);
    assert_true(snm->create_time->seconds > 0);
    assert_int_equal(d->start_time->seconds, snm->create_time->seconds);
    free_msg(gr);

    Varlog__Admpb__ListStorageNodesRequest l = VARLOG__ADMPB__LIST_STORAGE_NODES_REQUEST__INIT;
    Varlog__Admpb__ListStorageNodesResponse *lr = NULL;
    assert_int_equal(adm(f, "ListStorageNodes", &l.base,
                         &varlog__admpb__list_storage_nodes_response__descriptor, &lr, &st),
                     VARLOG_OK);
    rpc_status_clear(&st);
    assert_int_equal(lr->n_storage_nodes, 1);
    assert_string_equal(lr->storage_nodes[0]->storage_node->storage_node->address, f->addr);
    free_msg(lr);

    /* Adding the node that is there is idempotent, as in Varlog. */
    Varlog__Varlogpb__StorageNode sn = VARLOG__VARLOGPB__STORAGE_NODE__INIT;
    sn.storage_node_id = 1;
    sn.address = (char *)f->addr;
    Varlog__Admpb__AddStorageNodeRequest as = VARLOG__ADMPB__ADD_STORAGE_NODE_REQUEST__INIT;
    as.storage_node = &sn;
    assert_int_equal(adm(f, "AddStorageNode", &as.base,
                         &varlog__admpb__add_storage_node_response__descriptor, NULL, &st),
                     VARLOG_OK);
    rpc_status_clear(&st);

    char peer[96];
    snprintf(peer, sizeof(peer), "http://%s", f->addr);
    Varlog__Admpb__GetMetadataRepositoryNodeRequest gm =
        VARLOG__ADMPB__GET_METADATA_REPOSITORY_NODE_REQUEST__INIT;
    gm.node_id = 1;
    Varlog__Admpb__GetMetadataRepositoryNodeResponse *gmr = NULL;
    assert_int_equal(adm(f, "GetMetadataRepositoryNode", &gm.base,
                         &varlog__admpb__get_metadata_repository_node_response__descriptor, &gmr,
                         &st),
                     VARLOG_OK);
    rpc_status_clear(&st);
    assert_int_equal(gmr->node->node_id, 1);
    assert_string_equal(gmr->node->rpc_addr, f->addr);
    assert_string_equal(gmr->node->raft_url, peer);
    assert_true(gmr->node->leader);
    assert_false(gmr->node->learner);
    free_msg(gmr);

    Varlog__Admpb__ListMetadataRepositoryNodesRequest lm =
        VARLOG__ADMPB__LIST_METADATA_REPOSITORY_NODES_REQUEST__INIT;
    Varlog__Admpb__ListMetadataRepositoryNodesResponse *lmr = NULL;
    assert_int_equal(adm(f, "ListMetadataRepositoryNodes", &lm.base,
                         &varlog__admpb__list_metadata_repository_nodes_response__descriptor, &lmr,
                         &st),
                     VARLOG_OK);
    rpc_status_clear(&st);
    assert_int_equal(lmr->n_nodes, 1);
    assert_string_equal(lmr->nodes[0]->rpc_addr, f->addr);
    free_msg(lmr);

    /* The same node id and peer as GetClusterInfo. */
    Varlog__Mrpb__GetClusterInfoRequest ci = VARLOG__MRPB__GET_CLUSTER_INFO_REQUEST__INIT;
    Varlog__Mrpb__GetClusterInfoResponse *cir = NULL;
    assert_int_equal(rpc_unary(f->client, f->addr, M_PATH_CLUSTER_INFO, &ci.base,
                               &varlog__mrpb__get_cluster_info_response__descriptor, T_TIMEOUT,
                               (ProtobufCMessage **)&cir, NULL),
                     VARLOG_OK);
    Google__Protobuf__Empty e = GOOGLE__PROTOBUF__EMPTY__INIT;
    Varlog__Admpb__GetMRMembersResponse *mm = NULL;
    assert_int_equal(adm(f, "GetMRMembers", &e.base,
                         &varlog__admpb__get_mrmembers_response__descriptor, &mm, &st),
                     VARLOG_OK);
    rpc_status_clear(&st);
    assert_int_equal(mm->leader, cir->cluster_info->leader);
    assert_int_equal(mm->replication_factor, 1);
    assert_int_equal(mm->n_members, 1);
    assert_int_equal(mm->members[0]->key, cir->cluster_info->node_id);
    assert_string_equal(mm->members[0]->value, cir->cluster_info->members[0]->value->peer);
    free_msg(mm);
    free_msg(cir);
}

/* What needs a second node is refused with FailedPrecondition saying so. */
static void test_refused(void **state)
{
    srv_fixture_t *f = *state;
    Varlog__Varlogpb__StorageNode sn = VARLOG__VARLOGPB__STORAGE_NODE__INIT;
    sn.storage_node_id = 2;
    sn.address = "127.0.0.1:1";
    Varlog__Admpb__AddStorageNodeRequest as = VARLOG__ADMPB__ADD_STORAGE_NODE_REQUEST__INIT;
    as.storage_node = &sn;
    assert_adm_refused(f, "AddStorageNode", &as.base,
                       &varlog__admpb__add_storage_node_response__descriptor, "one node");
    Varlog__Admpb__UnregisterStorageNodeRequest us =
        VARLOG__ADMPB__UNREGISTER_STORAGE_NODE_REQUEST__INIT;
    us.storage_node_id = 1;
    assert_adm_refused(f, "UnregisterStorageNode", &us.base,
                       &varlog__admpb__unregister_storage_node_response__descriptor,
                       "not idle replicas");
    Varlog__Admpb__UpdateLogStreamRequest ul = VARLOG__ADMPB__UPDATE_LOG_STREAM_REQUEST__INIT;
    ul.topic_id = 1;
    ul.log_stream_id = 1;
    assert_adm_refused(f, "UpdateLogStream", &ul.base,
                       &varlog__admpb__update_log_stream_response__descriptor, "one node");
    Varlog__Admpb__UnregisterLogStreamRequest unl =
        VARLOG__ADMPB__UNREGISTER_LOG_STREAM_REQUEST__INIT;
    unl.topic_id = 1;
    unl.log_stream_id = 1;
    assert_adm_refused(f, "UnregisterLogStream", &unl.base,
                       &varlog__admpb__unregister_log_stream_response__descriptor,
                       "cannot unregister");
    Varlog__Admpb__RemoveLogStreamReplicaRequest rr =
        VARLOG__ADMPB__REMOVE_LOG_STREAM_REPLICA_REQUEST__INIT;
    assert_adm_refused(f, "RemoveLogStreamReplica", &rr.base,
                       &varlog__admpb__remove_log_stream_replica_response__descriptor, "one node");
    Varlog__Admpb__SyncRequest sy = VARLOG__ADMPB__SYNC_REQUEST__INIT;
    assert_adm_refused(f, "Sync", &sy.base, &varlog__admpb__sync_response__descriptor, "one node");
    Varlog__Admpb__AddMetadataRepositoryNodeRequest am =
        VARLOG__ADMPB__ADD_METADATA_REPOSITORY_NODE_REQUEST__INIT;
    am.raft_url = "http://127.0.0.1:2";
    am.rpc_addr = "127.0.0.1:2";
    assert_adm_refused(f, "AddMetadataRepositoryNode", &am.base,
                       &varlog__admpb__add_metadata_repository_node_response__descriptor,
                       "only metadata repository node");
    Varlog__Admpb__AddMRPeerRequest ap = VARLOG__ADMPB__ADD_MRPEER_REQUEST__INIT;
    assert_adm_refused(f, "AddMRPeer", &ap.base, &varlog__admpb__add_mrpeer_response__descriptor,
                       "only metadata repository node");
    Varlog__Admpb__DeleteMetadataRepositoryNodeRequest dm =
        VARLOG__ADMPB__DELETE_METADATA_REPOSITORY_NODE_REQUEST__INIT;
    dm.node_id = 1;
    assert_adm_refused(f, "DeleteMetadataRepositoryNode", &dm.base,
                       &varlog__admpb__delete_metadata_repository_node_response__descriptor,
                       "only metadata repository node");
    Varlog__Admpb__RemoveMRPeerRequest rp = VARLOG__ADMPB__REMOVE_MRPEER_REQUEST__INIT;
    assert_adm_refused(f, "RemoveMRPeer", &rp.base,
                       &varlog__admpb__remove_mrpeer_response__descriptor,
                       "only metadata repository node");
}

/* gRPC-Go's texts for a path the server does not serve (the transport answered "unknown
 * method" to both before). */
static void test_unknown_service_and_method(void **state)
{
    srv_fixture_t *f = *state;
    Google__Protobuf__Empty e = GOOGLE__PROTOBUF__EMPTY__INIT;
    const struct {
        const char *path, *text;
    } cases[] = {
        {"/varlog.admpb.Foo/Bar", "unknown service varlog.admpb.Foo"},
        {"/varlog.snpb.LogIO/Bar", "unknown method Bar for service varlog.snpb.LogIO"},
        {"/varlog.admpb.ClusterManager/Nope",
         "unknown method Nope for service varlog.admpb.ClusterManager"},
        {"/varlog.snpb.Management/Trim", "unknown service varlog.snpb.Management"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rpc_status_t st;
        rpc_status_init(&st);
        ProtobufCMessage *m = NULL;
        assert_int_equal(rpc_unary(f->client, f->addr, cases[i].path, &e.base,
                                   &google__protobuf__empty__descriptor, T_TIMEOUT, &m, &st),
                         VARLOG_ERR_RPC_UNIMPLEMENTED);
        assert_string_equal(st.message, cases[i].text);
        rpc_status_clear(&st);
    }
}

/* Fault injection reaches the admin methods too. */
static void test_faults(void **state)
{
    srv_fixture_t *f = *state;
    assert_int_equal(varlog_server_fail_next(f->srv, ADM "ListTopics", 14, "injected", 1),
                     VARLOG_OK);
    Varlog__Admpb__ListTopicsRequest lt = VARLOG__ADMPB__LIST_TOPICS_REQUEST__INIT;
    assert_adm_error(f, "ListTopics", &lt.base, &varlog__admpb__list_topics_response__descriptor,
                     VARLOG_ERR_RPC_UNAVAILABLE, "injected");
    rpc_status_t st;
    assert_int_equal(
        adm(f, "ListTopics", &lt.base, &varlog__admpb__list_topics_response__descriptor, NULL, &st),
        VARLOG_OK);
    rpc_status_clear(&st);
    assert_int_equal(varlog_server_call_count(f->srv, ADM "ListTopics"), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_topics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_add_log_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seal_unseal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unregister_topic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_service_and_method, setup, teardown),
        cmocka_unit_test_setup_teardown(test_faults, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
