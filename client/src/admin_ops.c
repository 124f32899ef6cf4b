/* The admin operations (varlog/admin.h): each one request, one call through op_call
 * (admin.c), and its answer copied into the caller's fixed-size structs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin_internal.h"
#include "admpb/admin.pb-c.h"
#include "errtext.h"
#include "google/protobuf/empty.pb-c.h"
#include "log_internal.h"

/* ---- answers to results --------------------------------------------------------------------- */

static void topic_from(varlog_topic_info_t *out, const Varlog__Varlogpb__TopicDescriptor *t)
{
    *out = (varlog_topic_info_t){.topic_id = t->topic_id,
                                 .status = (varlog_topic_status_t)t->status,
                                 .n_log_streams = t->n_log_streams};
}

static void log_stream_from(varlog_log_stream_info_t *out,
                            const Varlog__Varlogpb__LogStreamDescriptor *l)
{
    memset(out, 0, sizeof(*out));
    out->topic_id = l->topic_id;
    out->log_stream_id = l->log_stream_id;
    out->status = (varlog_log_stream_status_t)l->status;
    out->n_replicas = l->n_replicas;
    for (size_t i = 0; i < l->n_replicas && i < VARLOG_ADMIN_MAX_REPLICAS; i++)
        out->replicas[i] = l->replicas[i]->storage_node_id;
}

/* Copies src into dst[VARLOG_ADMIN_ADDRESS_MAX]; false when it does not fit. */
static bool address_copy(char *dst, const char *src)
{
    size_t len = src ? strlen(src) : 0;
    if (len >= VARLOG_ADMIN_ADDRESS_MAX)
        return false;
    memcpy(dst, src ? src : "", len + 1);
    return true;
}

static bool storage_node_from(varlog_storage_node_info_t *out,
                              const Varlog__Admpb__StorageNodeMetadata *m)
{
    const Varlog__Snpb__StorageNodeMetadataDescriptor *d = m ? m->storage_node : NULL;
    if (!d || !d->storage_node)
        return false;
    memset(out, 0, sizeof(*out));
    out->storage_node_id = d->storage_node->storage_node_id;
    out->status = (varlog_storage_node_status_t)d->status;
    out->n_log_stream_replicas = d->n_log_stream_replicas;
    return address_copy(out->address, d->storage_node->address);
}

static bool mr_node_from(varlog_mr_node_info_t *out,
                         const Varlog__Varlogpb__MetadataRepositoryNode *n)
{
    memset(out, 0, sizeof(*out));
    out->node_id = n->node_id;
    out->leader = n->leader;
    out->learner = n->learner;
    return address_copy(out->raft_url, n->raft_url) && address_copy(out->rpc_addr, n->rpc_addr);
}

/* Orders of the lists (the wire gives map-derived lists in any order). */
static int cmp_topic(const void *x, const void *y)
{
    const Varlog__Varlogpb__TopicDescriptor *a = *(const void *const *)x,
                                            *b = *(const void *const *)y;
    return (a->topic_id > b->topic_id) - (a->topic_id < b->topic_id);
}

static int cmp_log_stream(const void *x, const void *y)
{
    const Varlog__Varlogpb__LogStreamDescriptor *a = *(const void *const *)x,
                                                *b = *(const void *const *)y;
    return (a->log_stream_id > b->log_stream_id) - (a->log_stream_id < b->log_stream_id);
}

static int32_t sn_id(const Varlog__Admpb__StorageNodeMetadata *m)
{
    return m->storage_node && m->storage_node->storage_node
               ? m->storage_node->storage_node->storage_node_id
               : 0;
}

static int cmp_storage_node(const void *x, const void *y)
{
    int32_t a = sn_id(*(const void *const *)x), b = sn_id(*(const void *const *)y);
    return (a > b) - (a < b);
}

static int cmp_mr_node(const void *x, const void *y)
{
    const Varlog__Varlogpb__MetadataRepositoryNode *a = *(const void *const *)x,
                                                   *b = *(const void *const *)y;
    return (a->node_id > b->node_id) - (a->node_id < b->node_id);
}

static int cmp_member(const void *x, const void *y)
{
    const Varlog__Admpb__GetMRMembersResponse__MembersEntry *a = *(const void *const *)x,
                                                            *b = *(const void *const *)y;
    return (a->key > b->key) - (a->key < b->key);
}

static void sort_ptrs(void *ptrs, size_t n, int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(ptrs, n, sizeof(void *), cmp);
}

/* ---- topics --------------------------------------------------------------------------------- */

varlog_err_t varlog_admin_add_topic(varlog_admin_t *a, int64_t timeout_ms, int32_t *topic_id)
{
    adm_op_t op = {0};
    ADM_OP_INIT(op, "add topic");
    if (a && !topic_id)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: topic_id must not be NULL", op.what);
    varlog_err_t err = adm_op_begin(&op, a, timeout_ms, NF_OTHER, 0);
    if (err != VARLOG_OK)
        return err;
    Varlog__Admpb__AddTopicRequest req = VARLOG__ADMPB__ADD_TOPIC_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    err = adm_op_call(&op, ADM_PATH("AddTopic"), &req.base,
                      &varlog__admpb__add_topic_response__descriptor, &m);
    if (err == VARLOG_OK) {
        const Varlog__Admpb__AddTopicResponse *r = (const Varlog__Admpb__AddTopicResponse *)m;
        if (!r->topic || r->topic->topic_id < 1)
            err = adm_op_bad_answer(&op, "the answer has no valid topic id");
        else
            *topic_id = r->topic->topic_id;
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    adm_op_end(&op);
    return err;
}

varlog_err_t varlog_admin_get_topic(varlog_admin_t *a, int32_t topic_id, int64_t timeout_ms,
                                    varlog_topic_info_t *out)
{
    adm_op_t op = {0};
    ADM_OP_INIT(op, "get topic %d", topic_id);
    varlog_err_t err = VARLOG_OK;
    if (a && (err = adm_check_id(op.what, "topic", topic_id)) != VARLOG_OK)
        return err;
    if (a && !out)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: out must not be NULL", op.what);
    if ((err = adm_op_begin(&op, a, timeout_ms, NF_TOPIC, topic_id)) != VARLOG_OK)
        return err;
    Varlog__Admpb__GetTopicRequest req = VARLOG__ADMPB__GET_TOPIC_REQUEST__INIT;
    req.topic_id = topic_id;
    ProtobufCMessage *m = NULL;
    err = adm_op_call(&op, ADM_PATH("GetTopic"), &req.base,
                      &varlog__admpb__get_topic_response__descriptor, &m);
    if (err == VARLOG_OK) {
        const Varlog__Admpb__GetTopicResponse *r = (const Varlog__Admpb__GetTopicResponse *)m;
        if (!r->topic || r->topic->topic_id != topic_id)
            err = adm_op_bad_answer(&op, "the answer does not describe the topic asked for");
        else
            topic_from(out, r->topic);
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    adm_op_end(&op);
    return err;
}

varlog_err_t varlog_admin_list_topics(varlog_admin_t *a, int64_t timeout_ms,
                                      varlog_topic_info_t *out, size_t cap, size_t *n_total)
{
    adm_op_t op = {0};
    ADM_OP_INIT(op, "list topics");
    varlog_err_t err = VARLOG_OK;
    if (a && (err = adm_check_list(op.what, out, cap, n_total)) != VARLOG_OK)
        return err;
    if ((err = adm_op_begin(&op, a, timeout_ms, NF_OTHER, 0)) != VARLOG_OK)
        return err;
    Varlog__Admpb__ListTopicsRequest req = VARLOG__ADMPB__LIST_TOPICS_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    err = adm_op_call(&op, ADM_PATH("ListTopics"), &req.base,
                      &varlog__admpb__list_topics_response__descriptor, &m);
    if (err == VARLOG_OK) {
        Varlog__Admpb__ListTopicsResponse *r = (Varlog__Admpb__ListTopicsResponse *)m;
        sort_ptrs(r->topics, r->n_topics, cmp_topic);
        for (size_t i = 0; i < r->n_topics && i < cap; i++)
            topic_from(&out[i], r->topics[i]);
        *n_total = r->n_topics;
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    adm_op_end(&op);
    return err;
}

varlog_err_t varlog_admin_unregister_topic(varlog_admin_t *a, int32_t topic_id, int64_t timeout_ms)
{
    adm_op_t op = {0};
    ADM_OP_INIT(op, "unregister topic %d", topic_id);
    varlog_err_t err = VARLOG_OK;
    if (a && (err = adm_check_id(op.what, "topic", topic_id)) != VARLOG_OK)
        return err;
    if ((err = adm_op_begin(&op, a, timeout_ms, NF_TOPIC, topic_id)) != VARLOG_OK)
        return err;
    Varlog__Admpb__UnregisterTopicRequest req = VARLOG__ADMPB__UNREGISTER_TOPIC_REQUEST__INIT;
    req.topic_id = topic_id;
    ProtobufCMessage *m = NULL;
    err = adm_op_call(&op, ADM_PATH("UnregisterTopic"), &req.base,
                      &varlog__admpb__unregister_topic_response__descriptor, &m);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    adm_op_end(&op);
    return err;
}

/* ---- log streams ---------------------------------------------------------------------------- */

varlog_err_t varlog_admin_add_log_stream(varlog_admin_t *a, int32_t topic_id, int64_t timeout_ms,
                                         varlog_log_stream_info_t *out)
{
    adm_op_t op = {0};
    ADM_OP_INIT(op, "add log stream to topic %d", topic_id);
    varlog_err_t err = VARLOG_OK;
    if (a && (err = adm_check_id(op.what, "topic", topic_id)) != VARLOG_OK)
        return err;
    if (a && !out)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: out must not be NULL", op.what);
    if ((err = adm_op_begin(&op, a, timeout_ms, NF_TOPIC, topic_id)) != VARLOG_OK)
        return err;
    Varlog__Admpb__AddLogStreamRequest req = VARLOG__ADMPB__ADD_LOG_STREAM_REQUEST__INIT;
    req.topic_id = topic_id;
    ProtobufCMessage *m = NULL;
    err = adm_op_call(&op, ADM_PATH("AddLogStream"), &req.base,
                      &varlog__admpb__add_log_stream_response__descriptor, &m);
    if (err == VARLOG_OK) {
        const Varlog__Admpb__AddLogStreamResponse *r =
            (const Varlog__Admpb__AddLogStreamResponse *)m;
        if (!r->log_stream || r->log_stream->log_stream_id < 1 ||
            r->log_stream->topic_id != topic_id)
            err = adm_op_bad_answer(&op, "the answer has no valid log stream of the topic");
        else
            log_stream_from(out, r->log_stream);
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    adm_op_end(&op);
    return err;
}

/* The checks of a call naming a log stream of a topic. */
static varlog_err_t check_ls_target(varlog_admin_t *a, const char *what, int32_t topic_id,
                                    int32_t log_stream_id)
{
    varlog_err_t err = VARLOG_OK;
    if (a && (err = adm_check_id(what, "topic", topic_id)) == VARLOG_OK)
        err = adm_check_id(what, "log stream", log_stream_id);
    return err;
}

varlog_err_t varlog_admin_get_log_stream(varlog_admin_t *a, int32_t topic_id, int32_t log_stream_id,
                                         int64_t timeout_ms, varlog_log_stream_info_t *out)
{
    adm_op_t op = {0};
    ADM_OP_INIT(op, "get log stream %d of topic %d", log_stream_id, topic_id);
    varlog_err_t err = check_ls_target(a, op.what, topic_id, log_stream_id);
    if (err != VARLOG_OK)
        return err;
    if (a && !out)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: out must not be NULL", op.what);
    if ((err = adm_op_begin(&op, a, timeout_ms, NF_LOG_STREAM, topic_id)) != VARLOG_OK)
        return err;
    Varlog__Admpb__GetLogStreamRequest req = VARLOG__ADMPB__GET_LOG_STREAM_REQUEST__INIT;
    req.topic_id = topic_id;
    req.log_stream_id = log_stream_id;
    ProtobufCMessage *m = NULL;
    err = adm_op_call(&op, ADM_PATH("GetLogStream"), &req.base,
                      &varlog__admpb__get_log_stream_response__descriptor, &m);
    if (err == VARLOG_OK) {
        const Varlog__Admpb__GetLogStreamResponse *r =
            (const Varlog__Admpb__GetLogStreamResponse *)m;
        if (!r->log_stream || r->log_stream->log_stream_id != log_stream_id ||
            r->log_stream->topic_id != topic_id)
            err = adm_op_bad_answer(&op, "the answer does not describe the log stream asked for");
        else
            log_stream_from(out, r->log_stream);
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    adm_op_end(&op);
    return err;
}

varlog_err_t varlog_admin_list_log_streams(varlog_admin_t *a, int32_t topic_id, int64_t timeout_ms,
                                           varlog_log_stream_info_t *out, size_t cap,
                                           size_t *n_total)
{
    adm_op_t op = {0};
    ADM_OP_INIT(op, "list log streams of topic %d", topic_id);
    varlog_err_t err = VARLOG_OK;
    if (a && (err = adm_check_id(op.what, "topic", topic_id)) != VARLOG_OK)
        return err;
    if (a && (err = adm_check_list(op.what, out, cap, n_total)) != VARLOG_OK)
        return err;
    if ((err = adm_op_begin(&op, a, timeout_ms, NF_TOPIC, topic_id)) != VARLOG_OK)
        return err;
    Varlog__Admpb__ListLogStreamsRequest req = VARLOG__ADMPB__LIST_LOG_STREAMS_REQUEST__INIT;
    req.topic_id = topic_id;
    ProtobufCMessage *m = NULL;
    err = adm_op_call(&op, ADM_PATH("ListLogStreams"), &req.base,
                      &varlog__admpb__list_log_streams_response__descriptor, &m);
    if (err == VARLOG_OK) {
        Varlog__Admpb__ListLogStreamsResponse *r = (Varlog__Admpb__ListLogStreamsResponse *)m;
        sort_ptrs(r->log_streams, r->n_log_streams, cmp_log_stream);
        for (size_t i = 0; i < r->n_log_streams && i < cap; i++)
            log_stream_from(&out[i], r->log_streams[i]);
        *n_total = r->n_log_streams;
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    adm_op_end(&op);
    return err;
}

/* Whether log stream ls_id is one of topic_id's, asked of the admin (GetTopic) within the
 * operation's deadline: OK, UNKNOWN_TOPIC, UNKNOWN_LOG_STREAM, or the call's failure.
 * varlogadm's Seal and Unseal do not check the pair themselves: Seal acts on log stream
 * ls_id of whichever topic has it. */
static varlog_err_t check_topic_holds(adm_op_t *op, int32_t topic_id, int32_t ls_id)
{
    nf_kind_t nf = op->nf;
    op->nf = NF_TOPIC;
    Varlog__Admpb__GetTopicRequest req = VARLOG__ADMPB__GET_TOPIC_REQUEST__INIT;
    req.topic_id = topic_id;
    ProtobufCMessage *m = NULL;
    varlog_err_t err = adm_op_call(op, ADM_PATH("GetTopic"), &req.base,
                                   &varlog__admpb__get_topic_response__descriptor, &m);
    op->nf = nf;
    if (err == VARLOG_OK) {
        const Varlog__Admpb__GetTopicResponse *r = (const Varlog__Admpb__GetTopicResponse *)m;
        bool holds = false;
        for (size_t i = 0; r->topic && i < r->topic->n_log_streams && !holds; i++)
            holds = r->topic->log_streams[i] == ls_id;
        if (!r->topic || r->topic->topic_id != topic_id)
            err = adm_op_bad_answer(op, "the answer does not describe the topic asked for");
        else if (!holds)
            err = errtext_set(VARLOG_ERR_UNKNOWN_LOG_STREAM,
                              "%s at %s: %s (topic %d has no log stream %d)", op->what,
                              op->a->address, varlog_err_name(VARLOG_ERR_UNKNOWN_LOG_STREAM),
                              topic_id, ls_id);
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    return err;
}

varlog_err_t varlog_admin_seal(varlog_admin_t *a, int32_t topic_id, int32_t log_stream_id,
                               int64_t timeout_ms, uint64_t *sealed_glsn)
{
    adm_op_t op = {0};
    ADM_OP_INIT(op, "seal log stream %d of topic %d", log_stream_id, topic_id);
    varlog_err_t err = check_ls_target(a, op.what, topic_id, log_stream_id);
    if (err != VARLOG_OK)
        return err;
    if ((err = adm_op_begin(&op, a, timeout_ms, NF_LOG_STREAM, topic_id)) != VARLOG_OK)
        return err;
    if ((err = check_topic_holds(&op, topic_id, log_stream_id)) != VARLOG_OK) {
        adm_op_end(&op);
        return err;
    }
    Varlog__Admpb__SealRequest req = VARLOG__ADMPB__SEAL_REQUEST__INIT;
    req.topic_id = topic_id;
    req.log_stream_id = log_stream_id;
    ProtobufCMessage *m = NULL;
    err = adm_op_call(&op, ADM_PATH("Seal"), &req.base, &varlog__admpb__seal_response__descriptor,
                      &m);
    if (err == VARLOG_OK && sealed_glsn)
        *sealed_glsn = ((const Varlog__Admpb__SealResponse *)m)->sealed_glsn;
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    adm_op_end(&op);
    return err;
}

varlog_err_t varlog_admin_unseal(varlog_admin_t *a, int32_t topic_id, int32_t log_stream_id,
                                 int64_t timeout_ms, varlog_log_stream_info_t *out)
{
    adm_op_t op = {0};
    ADM_OP_INIT(op, "unseal log stream %d of topic %d", log_stream_id, topic_id);
    varlog_err_t err = check_ls_target(a, op.what, topic_id, log_stream_id);
    if (err != VARLOG_OK)
        return err;
    if ((err = adm_op_begin(&op, a, timeout_ms, NF_LOG_STREAM, topic_id)) != VARLOG_OK)
        return err;
    if ((err = check_topic_holds(&op, topic_id, log_stream_id)) != VARLOG_OK) {
        adm_op_end(&op);
        return err;
    }
    Varlog__Admpb__UnsealRequest req = VARLOG__ADMPB__UNSEAL_REQUEST__INIT;
    req.topic_id = topic_id;
    req.log_stream_id = log_stream_id;
    ProtobufCMessage *m = NULL;
    err = adm_op_call(&op, ADM_PATH("Unseal"), &req.base,
                      &varlog__admpb__unseal_response__descriptor, &m);
    if (err == VARLOG_OK && out) {
        const Varlog__Admpb__UnsealResponse *r = (const Varlog__Admpb__UnsealResponse *)m;
        if (!r->log_stream || r->log_stream->log_stream_id != log_stream_id)
            err = adm_op_bad_answer(&op, "the log stream was unsealed, but the answer does not "
                                         "describe it");
        else
            log_stream_from(out, r->log_stream);
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    adm_op_end(&op);
    return err;
}

/* A replica's trim failure as an error: Varlog's "sealed" is recognised, anything else is a
 * remote failure of no known kind. */
static varlog_err_t trim_result_err(const char *text)
{
    return strstr(text, "sealed") ? VARLOG_ERR_SEALED : VARLOG_ERR_RPC_UNKNOWN;
}

varlog_err_t varlog_admin_trim(varlog_admin_t *a, int32_t topic_id, uint64_t last_glsn,
                               int64_t timeout_ms)
{
    adm_op_t op = {0};
    ADM_OP_INIT(op, "trim topic %d until GLSN %llu", topic_id, (unsigned long long)last_glsn);
    varlog_err_t err = VARLOG_OK;
    if (a && (err = adm_check_id(op.what, "topic", topic_id)) != VARLOG_OK)
        return err;
    if (a && (last_glsn == 0 || last_glsn == UINT64_MAX))
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "%s: last_glsn %llu (give the last GLSN to delete, from 1 to "
                           "UINT64_MAX - 1)",
                           op.what, (unsigned long long)last_glsn);
    if ((err = adm_op_begin(&op, a, timeout_ms, NF_TOPIC, topic_id)) != VARLOG_OK)
        return err;
    Varlog__Admpb__TrimRequest req = VARLOG__ADMPB__TRIM_REQUEST__INIT;
    req.topic_id = topic_id;
    req.last_glsn = last_glsn;
    ProtobufCMessage *m = NULL;
    err = adm_op_call(&op, ADM_PATH("Trim"), &req.base, &varlog__admpb__trim_response__descriptor,
                      &m);
    if (err == VARLOG_OK) {
        const Varlog__Admpb__TrimResponse *r = (const Varlog__Admpb__TrimResponse *)m;
        char why[512];
        size_t len = 0, failed = 0;
        why[0] = '\0';
        for (size_t i = 0; i < r->n_results; i++) {
            const Varlog__Admpb__TrimResult *t = r->results[i];
            if (!t->error || !t->error[0])
                continue;
            if (failed++ == 0)
                err = trim_result_err(t->error);
            if (len < sizeof(why) - 1) {
                int w =
                    snprintf(why + len, sizeof(why) - len, "%sstorage node %d, log stream %d: %s",
                             len ? "; " : "", t->storage_node_id, t->log_stream_id, t->error);
                len = w > 0 && len + (size_t)w < sizeof(why) ? len + (size_t)w : sizeof(why) - 1;
            }
        }
        if (failed > 0) {
            errtext_set(err, "%s at %s: %s: %zu of %zu replicas failed: %s", op.what, a->address,
                        varlog_err_name(err), failed, r->n_results, why);
            log_line(&a->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_RPC, "admin: %s",
                     varlog_last_error());
        }
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    adm_op_end(&op);
    return err;
}

/* ---- storage nodes and the metadata repository ---------------------------------------------- */

varlog_err_t varlog_admin_get_storage_node(varlog_admin_t *a, int32_t storage_node_id,
                                           int64_t timeout_ms, varlog_storage_node_info_t *out)
{
    adm_op_t op = {0};
    ADM_OP_INIT(op, "get storage node %d", storage_node_id);
    varlog_err_t err = VARLOG_OK;
    if (a && (err = adm_check_id(op.what, "storage node", storage_node_id)) != VARLOG_OK)
        return err;
    if (a && !out)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: out must not be NULL", op.what);
    if ((err = adm_op_begin(&op, a, timeout_ms, NF_OTHER, 0)) != VARLOG_OK)
        return err;
    Varlog__Admpb__GetStorageNodeRequest req = VARLOG__ADMPB__GET_STORAGE_NODE_REQUEST__INIT;
    req.storage_node_id = storage_node_id;
    ProtobufCMessage *m = NULL;
    err = adm_op_call(&op, ADM_PATH("GetStorageNode"), &req.base,
                      &varlog__admpb__get_storage_node_response__descriptor, &m);
    if (err == VARLOG_OK) {
        const Varlog__Admpb__GetStorageNodeResponse *r =
            (const Varlog__Admpb__GetStorageNodeResponse *)m;
        varlog_storage_node_info_t info;
        if (!storage_node_from(&info, r->storage_node) || info.storage_node_id != storage_node_id)
            err = adm_op_bad_answer(&op, "the answer does not describe the storage node asked for, "
                                         "or its address is too long");
        else
            *out = info;
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    adm_op_end(&op);
    return err;
}

varlog_err_t varlog_admin_list_storage_nodes(varlog_admin_t *a, int64_t timeout_ms,
                                             varlog_storage_node_info_t *out, size_t cap,
                                             size_t *n_total)
{
    adm_op_t op = {0};
    ADM_OP_INIT(op, "list storage nodes");
    varlog_err_t err = VARLOG_OK;
    if (a && (err = adm_check_list(op.what, out, cap, n_total)) != VARLOG_OK)
        return err;
    if ((err = adm_op_begin(&op, a, timeout_ms, NF_OTHER, 0)) != VARLOG_OK)
        return err;
    Varlog__Admpb__ListStorageNodesRequest req = VARLOG__ADMPB__LIST_STORAGE_NODES_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    err = adm_op_call(&op, ADM_PATH("ListStorageNodes"), &req.base,
                      &varlog__admpb__list_storage_nodes_response__descriptor, &m);
    if (err == VARLOG_OK) {
        Varlog__Admpb__ListStorageNodesResponse *r = (Varlog__Admpb__ListStorageNodesResponse *)m;
        sort_ptrs(r->storage_nodes, r->n_storage_nodes, cmp_storage_node);
        /* Checked whole before anything is written, so that a failure leaves out alone. */
        varlog_storage_node_info_t info;
        for (size_t i = 0; i < r->n_storage_nodes && err == VARLOG_OK; i++)
            if (!storage_node_from(&info, r->storage_nodes[i]))
                err = adm_op_bad_answer(&op, "a storage node without an id and address, or with "
                                             "an address too long");
        for (size_t i = 0; err == VARLOG_OK && i < r->n_storage_nodes && i < cap; i++)
            storage_node_from(&out[i], r->storage_nodes[i]);
        if (err == VARLOG_OK)
            *n_total = r->n_storage_nodes;
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    adm_op_end(&op);
    return err;
}

varlog_err_t varlog_admin_list_mr_nodes(varlog_admin_t *a, int64_t timeout_ms,
                                        varlog_mr_node_info_t *out, size_t cap, size_t *n_total)
{
    adm_op_t op = {0};
    ADM_OP_INIT(op, "list metadata repository nodes");
    varlog_err_t err = VARLOG_OK;
    if (a && (err = adm_check_list(op.what, out, cap, n_total)) != VARLOG_OK)
        return err;
    if ((err = adm_op_begin(&op, a, timeout_ms, NF_OTHER, 0)) != VARLOG_OK)
        return err;
    Varlog__Admpb__ListMetadataRepositoryNodesRequest req =
        VARLOG__ADMPB__LIST_METADATA_REPOSITORY_NODES_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    err = adm_op_call(&op, ADM_PATH("ListMetadataRepositoryNodes"), &req.base,
                      &varlog__admpb__list_metadata_repository_nodes_response__descriptor, &m);
    if (err == VARLOG_OK) {
        Varlog__Admpb__ListMetadataRepositoryNodesResponse *r =
            (Varlog__Admpb__ListMetadataRepositoryNodesResponse *)m;
        sort_ptrs(r->nodes, r->n_nodes, cmp_mr_node);
        varlog_mr_node_info_t *info = malloc(sizeof(*info));
        if (!info)
            err = errtext_set(VARLOG_ERR_NOMEM, "%s: out of memory", op.what);
        for (size_t i = 0; i < r->n_nodes && err == VARLOG_OK; i++)
            if (!mr_node_from(info, r->nodes[i]))
                err = adm_op_bad_answer(&op, "a node's raft URL or RPC address is too long");
        free(info);
        for (size_t i = 0; err == VARLOG_OK && i < r->n_nodes && i < cap; i++)
            mr_node_from(&out[i], r->nodes[i]);
        if (err == VARLOG_OK)
            *n_total = r->n_nodes;
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    adm_op_end(&op);
    return err;
}

varlog_err_t varlog_admin_get_mr_members(varlog_admin_t *a, int64_t timeout_ms, uint64_t *leader,
                                         int32_t *replication_factor, varlog_mr_member_t *out,
                                         size_t cap, size_t *n_total)
{
    adm_op_t op = {0};
    ADM_OP_INIT(op, "get metadata repository members");
    varlog_err_t err = VARLOG_OK;
    if (a && (err = adm_check_list(op.what, out, cap, n_total)) != VARLOG_OK)
        return err;
    if ((err = adm_op_begin(&op, a, timeout_ms, NF_OTHER, 0)) != VARLOG_OK)
        return err;
    Google__Protobuf__Empty req = GOOGLE__PROTOBUF__EMPTY__INIT;
    ProtobufCMessage *m = NULL;
    err = adm_op_call(&op, ADM_PATH("GetMRMembers"), &req.base,
                      &varlog__admpb__get_mrmembers_response__descriptor, &m);
    if (err == VARLOG_OK) {
        Varlog__Admpb__GetMRMembersResponse *r = (Varlog__Admpb__GetMRMembersResponse *)m;
        sort_ptrs(r->members, r->n_members, cmp_member);
        for (size_t i = 0; i < r->n_members && err == VARLOG_OK; i++)
            if (r->members[i]->value && strlen(r->members[i]->value) >= VARLOG_ADMIN_ADDRESS_MAX)
                err = adm_op_bad_answer(&op, "a member's address is too long");
        for (size_t i = 0; err == VARLOG_OK && i < r->n_members && i < cap; i++) {
            out[i].node_id = r->members[i]->key;
            address_copy(out[i].peer, r->members[i]->value);
        }
        if (err == VARLOG_OK) {
            *n_total = r->n_members;
            if (leader)
                *leader = r->leader;
            if (replication_factor)
                *replication_factor = r->replication_factor;
        }
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    adm_op_end(&op);
    return err;
}
