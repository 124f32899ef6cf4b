/* The admin service's topics and log streams: listing, adding, sealing, unsealing and
 * trimming them in the server's store (admin.c has the service's table and what the
 * handlers share). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin_internal.h"

/* ---- topics ---------------------------------------------------------------------------- */

void adm_get_topic(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg)
{
    const Varlog__Admpb__GetTopicRequest *r = (const Varlog__Admpb__GetTopicRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = adm_topic_locked(st, r->topic_id);
    int32_t *ids = t ? calloc(t->n_lss ? t->n_lss : 1, sizeof(*ids)) : NULL;
    if (!t) {
        adm_finish_status(call, GRPC_STATUS_NOT_FOUND,
                          "get topic %" PRId32 ": rpc error: code = NotFound desc = no such topic",
                          r->topic_id);
    } else if (!ids) {
        adm_refuse_nomem(call);
    } else {
        Varlog__Varlogpb__TopicDescriptor td;
        adm_topic_desc_fill(&td, t, ids);
        Varlog__Admpb__GetTopicResponse resp = VARLOG__ADMPB__GET_TOPIC_RESPONSE__INIT;
        resp.topic = &td;
        adm_send_ok(call, &resp.base);
    }
    pthread_mutex_unlock(&st->mu);
    free(ids);
}

/* Deprecated upstream but still what varlogctl's topic describe calls. Go answers an
 * unknown topic with UNAVAILABLE (its ErrNotExist wrapped with ToStatusErrorWithCode); here
 * it is NOT_FOUND with Go's text, so that no client takes it for a transient failure. */
void adm_describe_topic(struct varlog_server *srv, rpc_server_call_t *call,
                        const ProtobufCMessage *msg)
{
    const Varlog__Admpb__DescribeTopicRequest *r = (const Varlog__Admpb__DescribeTopicRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = adm_topic_locked(st, r->topic_id);
    if (!t) {
        pthread_mutex_unlock(&st->mu);
        adm_finish_status(call, GRPC_STATUS_NOT_FOUND,
                          "no such topic (topicID=%" PRId32 "): not exist", r->topic_id);
        return;
    }
    size_t n = t->n_lss;
    int32_t *ids = calloc(n ? n : 1, sizeof(*ids));
    Varlog__Varlogpb__LogStreamDescriptor *lsds = calloc(n ? n : 1, sizeof(*lsds));
    Varlog__Varlogpb__LogStreamDescriptor **lsdp = calloc(n ? n : 1, sizeof(*lsdp));
    if (!ids || !lsds || !lsdp) {
        adm_refuse_nomem(call);
    } else {
        Varlog__Varlogpb__ReplicaDescriptor rd;
        adm_replica_init(&rd);
        Varlog__Varlogpb__ReplicaDescriptor *rds[1] = {&rd};
        Varlog__Varlogpb__TopicDescriptor td;
        adm_topic_desc_fill(&td, t, ids);
        for (size_t i = 0; i < n; i++) {
            adm_ls_desc_fill(&lsds[i], t->lss[i], rds);
            lsdp[i] = &lsds[i];
        }
        Varlog__Admpb__DescribeTopicResponse resp = VARLOG__ADMPB__DESCRIBE_TOPIC_RESPONSE__INIT;
        resp.topic = &td;
        resp.n_log_streams = n;
        resp.log_streams = lsdp;
        adm_send_ok(call, &resp.base);
    }
    pthread_mutex_unlock(&st->mu);
    free(ids);
    free(lsds);
    free(lsdp);
}

void adm_list_topics(struct varlog_server *srv, rpc_server_call_t *call,
                     const ProtobufCMessage *msg)
{
    (void)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    size_t n_ls = 0, n = st->n_topics;
    for (size_t i = 0; i < n; i++)
        n_ls += st->topics[i]->n_lss;
    int32_t *ids = calloc(n_ls ? n_ls : 1, sizeof(*ids));
    Varlog__Varlogpb__TopicDescriptor *tds = calloc(n ? n : 1, sizeof(*tds));
    Varlog__Varlogpb__TopicDescriptor **tdp = calloc(n ? n : 1, sizeof(*tdp));
    if (!ids || !tds || !tdp) {
        adm_refuse_nomem(call);
    } else {
        size_t k = 0, m = 0;
        for (size_t i = 0; i < n; i++) {
            store_topic_t *t = st->topics[i];
            if (t->unregistered)
                continue;
            adm_topic_desc_fill(&tds[m], t, &ids[k]);
            k += t->n_lss;
            tdp[m] = &tds[m];
            m++;
        }
        Varlog__Admpb__ListTopicsResponse resp = VARLOG__ADMPB__LIST_TOPICS_RESPONSE__INIT;
        resp.n_topics = m;
        resp.topics = tdp;
        adm_send_ok(call, &resp.base);
    }
    pthread_mutex_unlock(&st->mu);
    free(ids);
    free(tds);
    free(tdp);
}

void adm_add_topic(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg)
{
    (void)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    int32_t id = 0;
    varlog_err_t err = store_add_topic_locked(st, &id); /* bumps the applied index */
    pthread_mutex_unlock(&st->mu);
    if (err == VARLOG_ERR_NOMEM) {
        adm_refuse_nomem(call);
        return;
    }
    if (err != VARLOG_OK) {
        rpc_server_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "add topic: no topic id left",
                               NULL, 0);
        return;
    }
    Varlog__Varlogpb__TopicDescriptor td = VARLOG__VARLOGPB__TOPIC_DESCRIPTOR__INIT;
    td.topic_id = id;
    td.status = VARLOG__VARLOGPB__TOPIC_STATUS__TOPIC_STATUS_RUNNING;
    Varlog__Admpb__AddTopicResponse resp = VARLOG__ADMPB__ADD_TOPIC_RESPONSE__INIT;
    resp.topic = &td;
    adm_send_ok(call, &resp.base);
}

/* The topic leaves the metadata; its log streams stay in the store (see store_topic_t). */
void adm_unregister_topic(struct varlog_server *srv, rpc_server_call_t *call,
                          const ProtobufCMessage *msg)
{
    const Varlog__Admpb__UnregisterTopicRequest *r =
        (const Varlog__Admpb__UnregisterTopicRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = NULL;
    if (adm_topic_or_not_found_locked(st, call, "unregister topic", r->topic_id, &t)) {
        t->unregistered = true;
        st->applied_index++;
        Varlog__Admpb__UnregisterTopicResponse resp =
            VARLOG__ADMPB__UNREGISTER_TOPIC_RESPONSE__INIT;
        adm_send_ok(call, &resp.base);
    }
    pthread_mutex_unlock(&st->mu);
}

/* ---- log streams ----------------------------------------------------------------------- */

void adm_get_log_stream(struct varlog_server *srv, rpc_server_call_t *call,
                        const ProtobufCMessage *msg)
{
    const Varlog__Admpb__GetLogStreamRequest *r = (const Varlog__Admpb__GetLogStreamRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    store_ls_t *ls =
        adm_ls_or_not_found_locked(st, call, "get log stream", r->topic_id, r->log_stream_id);
    if (ls) {
        Varlog__Varlogpb__ReplicaDescriptor rd;
        adm_replica_init(&rd);
        Varlog__Varlogpb__ReplicaDescriptor *rds[1] = {&rd};
        Varlog__Varlogpb__LogStreamDescriptor d;
        adm_ls_desc_fill(&d, ls, rds);
        Varlog__Admpb__GetLogStreamResponse resp = VARLOG__ADMPB__GET_LOG_STREAM_RESPONSE__INIT;
        resp.log_stream = &d;
        adm_send_ok(call, &resp.base);
    }
    pthread_mutex_unlock(&st->mu);
}

void adm_list_log_streams(struct varlog_server *srv, rpc_server_call_t *call,
                          const ProtobufCMessage *msg)
{
    const Varlog__Admpb__ListLogStreamsRequest *r =
        (const Varlog__Admpb__ListLogStreamsRequest *)msg;
    store_t *st = &srv->store;
    Varlog__Varlogpb__LogStreamDescriptor *lsds = NULL, **lsdp = NULL;
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = NULL;
    if (!adm_topic_or_not_found_locked(st, call, "list log streams", r->topic_id, &t))
        goto out;
    size_t n = t->n_lss;
    lsds = calloc(n ? n : 1, sizeof(*lsds));
    lsdp = calloc(n ? n : 1, sizeof(*lsdp));
    if (!lsds || !lsdp) {
        adm_refuse_nomem(call);
        goto out;
    }
    Varlog__Varlogpb__ReplicaDescriptor rd;
    adm_replica_init(&rd);
    Varlog__Varlogpb__ReplicaDescriptor *rds[1] = {&rd};
    for (size_t i = 0; i < n; i++) {
        adm_ls_desc_fill(&lsds[i], t->lss[i], rds);
        lsdp[i] = &lsds[i];
    }
    Varlog__Admpb__ListLogStreamsResponse resp = VARLOG__ADMPB__LIST_LOG_STREAMS_RESPONSE__INIT;
    resp.n_log_streams = n;
    resp.log_streams = lsdp;
    adm_send_ok(call, &resp.base);
out:
    pthread_mutex_unlock(&st->mu);
    free(lsds);
    free(lsdp);
}

/* On the one storage node: the replicas given must be none (the server places it) or one
 * on node 1. A real admin seals and unseals a new log stream before answering; it answers
 * RUNNING, as here. */
void adm_add_log_stream(struct varlog_server *srv, rpc_server_call_t *call,
                        const ProtobufCMessage *msg)
{
    const Varlog__Admpb__AddLogStreamRequest *r = (const Varlog__Admpb__AddLogStreamRequest *)msg;
    if (r->n_replicas > 1) {
        adm_finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                          "invalid number of log stream replicas: %zu: " ONE_NODE
                          ", replication factor 1",
                          r->n_replicas);
        return;
    }
    if (r->n_replicas == 1 &&
        (!r->replicas[0] || r->replicas[0]->storage_node_id != STORAGE_NODE_ID)) {
        adm_finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                          "add log stream: no such storage node %" PRId32 ": " ONE_NODE
                          ", storage node %d",
                          r->replicas[0] ? r->replicas[0]->storage_node_id : 0, STORAGE_NODE_ID);
        return;
    }
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = NULL;
    if (!adm_topic_or_not_found_locked(st, call, "add log stream", r->topic_id, &t)) {
        pthread_mutex_unlock(&st->mu);
        return;
    }
    int32_t id = 0;
    varlog_err_t err = store_add_ls_locked(st, r->topic_id, &id); /* bumps the applied index */
    if (err == VARLOG_OK) {
        Varlog__Varlogpb__ReplicaDescriptor rd;
        adm_replica_init(&rd);
        Varlog__Varlogpb__ReplicaDescriptor *rds[1] = {&rd};
        Varlog__Varlogpb__LogStreamDescriptor d;
        adm_ls_desc_fill(&d, store_ls_locked(st, r->topic_id, id), rds);
        Varlog__Admpb__AddLogStreamResponse resp = VARLOG__ADMPB__ADD_LOG_STREAM_RESPONSE__INIT;
        resp.log_stream = &d;
        adm_send_ok(call, &resp.base);
    } else if (err == VARLOG_ERR_NOMEM) {
        adm_refuse_nomem(call);
    } else {
        /* Varlog's admin answers RESOURCE_EXHAUSTED at its log stream limit. */
        rpc_server_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                               "add log stream: no log stream id left", NULL, 0);
    }
    pthread_mutex_unlock(&st->mu);
}

void adm_update_log_stream(struct varlog_server *srv, rpc_server_call_t *call,
                           const ProtobufCMessage *msg)
{
    const Varlog__Admpb__UpdateLogStreamRequest *r =
        (const Varlog__Admpb__UpdateLogStreamRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    if (adm_ls_or_not_found_locked(st, call, "update log stream", r->topic_id, r->log_stream_id))
        adm_finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                          "update log stream: " ONE_NODE
                          ": a replica has no other storage node to move to");
    pthread_mutex_unlock(&st->mu);
}

void adm_unregister_log_stream(struct varlog_server *srv, rpc_server_call_t *call,
                               const ProtobufCMessage *msg)
{
    const Varlog__Admpb__UnregisterLogStreamRequest *r =
        (const Varlog__Admpb__UnregisterLogStreamRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    if (adm_ls_or_not_found_locked(st, call, "unregister log stream", r->topic_id,
                                   r->log_stream_id))
        adm_finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                          "unregister log stream: the embedded server keeps every log stream for "
                          "its lifetime: it cannot unregister one");
    pthread_mutex_unlock(&st->mu);
}

void adm_remove_log_stream_replica(struct varlog_server *srv, rpc_server_call_t *call,
                                   const ProtobufCMessage *msg)
{
    (void)srv;
    (void)msg;
    adm_finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                      "remove log stream replica: " ONE_NODE
                      ": each log stream has its only replica on storage node %d",
                      STORAGE_NODE_ID);
}

/* The log stream ls_id of whichever topic has it (log stream ids are unique in a cluster);
 * *topic receives that topic. */
static store_ls_t *ls_of_any_topic_locked(store_t *st, int32_t ls_id, store_topic_t **topic)
{
    for (size_t i = 0; i < st->n_topics; i++) {
        store_ls_t *ls = store_ls_locked(st, st->topics[i]->id, ls_id);
        if (ls) {
            *topic = st->topics[i];
            return ls;
        }
    }
    return NULL;
}

/* Answers as a real cluster: the replica's metadata (now SEALED) and the log stream's last
 * committed GLSN (0 while it holds no entry). Sealing a sealed log stream answers the same
 * again (the metadata repository's and the storage node's seal are both idempotent). As
 * varlogadm v0.30 does, the topic id is not looked at: log stream N of whichever topic has
 * it is sealed, and an unknown one is NotFound "ls N". */
void adm_seal(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg)
{
    const Varlog__Admpb__SealRequest *r = (const Varlog__Admpb__SealRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    store_topic_t *topic = NULL;
    store_ls_t *ls = ls_of_any_topic_locked(st, r->log_stream_id, &topic);
    if (!ls)
        adm_finish_status(call, GRPC_STATUS_NOT_FOUND, "ls %" PRId32, r->log_stream_id);
    if (ls) {
        store_set_sealed_locked(st, ls, true);
        replica_md_t rmd;
        adm_replica_md_fill_locked(&rmd, st, topic, ls);
        Varlog__Snpb__LogStreamReplicaMetadataDescriptor *rmds[1] = {&rmd.d};
        Varlog__Admpb__SealResponse resp = VARLOG__ADMPB__SEAL_RESPONSE__INIT;
        resp.n_log_streams = 1;
        resp.log_streams = rmds;
        resp.sealed_glsn = rmd.hwm.glsn;
        adm_send_ok(call, &resp.base);
    }
    pthread_mutex_unlock(&st->mu);
}

/* Unsealing a running log stream answers it as it is. Failures in varlogadm v0.30's words:
 * an unknown log stream is Unknown "log stream: not exist"; a log stream of another topic
 * than the one named is refused by its storage node, Unknown "snmcl: not exist". */
void adm_unseal(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg)
{
    const Varlog__Admpb__UnsealRequest *r = (const Varlog__Admpb__UnsealRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    store_topic_t *topic = NULL;
    store_ls_t *ls = ls_of_any_topic_locked(st, r->log_stream_id, &topic);
    if (!ls) {
        adm_finish_status(call, GRPC_STATUS_UNKNOWN, "log stream: not exist");
    } else if (topic->id != r->topic_id) {
        adm_finish_status(call, GRPC_STATUS_UNKNOWN, "snmcl: not exist");
        ls = NULL;
    }
    if (ls) {
        store_set_sealed_locked(st, ls, false);
        Varlog__Varlogpb__ReplicaDescriptor rd;
        adm_replica_init(&rd);
        Varlog__Varlogpb__ReplicaDescriptor *rds[1] = {&rd};
        Varlog__Varlogpb__LogStreamDescriptor d;
        adm_ls_desc_fill(&d, ls, rds);
        Varlog__Admpb__UnsealResponse resp = VARLOG__ADMPB__UNSEAL_RESPONSE__INIT;
        resp.log_stream = &d;
        adm_send_ok(call, &resp.base);
    }
    pthread_mutex_unlock(&st->mu);
}

void adm_sync_ls(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg)
{
    (void)srv;
    (void)msg;
    adm_finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                      "sync: " ONE_NODE ": each log stream has one replica, nothing to sync from");
}

/* The trim TrimDeprecated does (store_trim_locked), with a result per log stream of the topic
 * in a storage node's words: a sealed replica refuses ("sealed"), a GLSN beyond the topic's
 * high watermark is refused by every replica; anything else succeeds (trimming less than
 * already trimmed is a no-op). */
void adm_trim(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg)
{
    const Varlog__Admpb__TrimRequest *r = (const Varlog__Admpb__TrimRequest *)msg;
    store_t *st = &srv->store;
    Varlog__Admpb__TrimResult *res = NULL, **resp_p = NULL;
    char *texts = NULL;
    enum { TEXT = 96 };
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = adm_topic_locked(st, r->topic_id);
    if (!t) {
        adm_finish_status(call, GRPC_STATUS_NOT_FOUND, "trim: no such topic %" PRId32, r->topic_id);
        goto out;
    }
    size_t n = t->n_lss;
    res = calloc(n ? n : 1, sizeof(*res));
    resp_p = calloc(n ? n : 1, sizeof(*resp_p));
    texts = calloc(n ? n : 1, TEXT);
    if (!res || !resp_p || !texts) {
        adm_refuse_nomem(call);
        goto out;
    }
    uint64_t hwm = t->next_glsn - 1;
    for (size_t i = 0; i < n; i++) {
        const store_ls_t *ls = t->lss[i];
        char *text = &texts[i * TEXT];
        if (r->last_glsn == 0)
            ; /* nothing at or below GLSN 0: already trimmed */
        else if (ls->sealed)
            snprintf(text, TEXT, "sealed");
        else if (r->last_glsn > hwm)
            snprintf(text, TEXT,
                     "log stream: trim: %" PRIu64 " not appended, global high watermark %" PRIu64,
                     r->last_glsn, hwm);
        varlog__admpb__trim_result__init(&res[i]);
        res[i].storage_node_id = STORAGE_NODE_ID;
        res[i].log_stream_id = ls->ls_id;
        res[i].error = text;
        resp_p[i] = &res[i];
    }
    store_trim_locked(st, t, r->last_glsn);
    Varlog__Admpb__TrimResponse resp = VARLOG__ADMPB__TRIM_RESPONSE__INIT;
    resp.n_results = n;
    resp.results = resp_p;
    adm_send_ok(call, &resp.base);
out:
    pthread_mutex_unlock(&st->mu);
    free(res);
    free(resp_p);
    free(texts);
}
