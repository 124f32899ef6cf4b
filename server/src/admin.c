/* The admin service, varlog.admpb.ClusterManager (wire reference sections 4.3 and 7.1), on
 * the server's one port: what varlogctl, Go's varlog.Admin and varlog/admin.h call. The
 * server is a whole cluster of one node, so the admin answers for the one storage node (id
 * 1) and the one metadata-repository node (the node discovery reports); what needs a second
 * node (adding a storage node or an MR peer, moving or removing replicas, sync) is refused
 * with FAILED_PRECONDITION and a message saying why.
 *
 * Texts follow Varlog v0.30's admin server where it has them: its NotFound errors are gRPC
 * statuses wrapped by a prefix, so their message is the prefix and the formatted inner
 * status ("get topic 5: rpc error: code = NotFound desc = no such topic"). Every change of
 * the topology or of a seal bumps the applied index, so clients see it at their next
 * GetMetadata. Handlers answer under store.mu, which the lock order allows (store.mu, then
 * a call's lock). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admpb/admin.pb-c.h"
#include "server_internal.h"

/* A Go zero time.Time, which Go servers send for timestamps they leave unset. */
#define GO_ZERO_TIME_SECONDS (-62135596800LL)

#define ONE_NODE "the embedded server is a cluster of one node"

static void finish_status(rpc_server_call_t *call, grpc_status_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void finish_status(rpc_server_call_t *call, grpc_status_code code, const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    rpc_server_call_finish(call, code, msg, NULL, 0);
}

static void send_ok(rpc_server_call_t *call, const ProtobufCMessage *resp)
{
    if (rpc_server_call_send(call, resp) == VARLOG_ERR_NOMEM) {
        rpc_server_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL, 0);
        return;
    }
    rpc_server_call_finish(call, GRPC_STATUS_OK, NULL, NULL, 0);
}

static void refuse_nomem(rpc_server_call_t *call)
{
    rpc_server_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL, 0);
}

/* A topic the metadata shows: unregistered ones stay in the store for their readers. */
static store_topic_t *topic_locked(store_t *st, int32_t topic_id)
{
    store_topic_t *t = store_topic_locked(st, topic_id);
    return t && !t->unregistered ? t : NULL;
}

/* The log stream (topic_id, ls_id) of a registered topic, or NULL after finishing the call
 * with NotFound as the Go admin's getLogStream words it, prefixed by op. */
static store_ls_t *ls_or_not_found_locked(store_t *st, rpc_server_call_t *call, const char *op,
                                          int32_t topic_id, int32_t ls_id)
{
    if (!topic_locked(st, topic_id)) {
        finish_status(call, GRPC_STATUS_NOT_FOUND,
                      "%s: tpid %" PRId32 ": rpc error: code = NotFound desc = no such topic", op,
                      topic_id);
        return NULL;
    }
    store_ls_t *ls = store_ls_locked(st, topic_id, ls_id);
    if (!ls)
        finish_status(call, GRPC_STATUS_NOT_FOUND,
                      "%s: no log stream in topic: lsid %" PRId32
                      ": rpc error: code = NotFound desc = no such log stream",
                      op, ls_id);
    return ls;
}

static bool topic_or_not_found_locked(store_t *st, rpc_server_call_t *call, const char *op,
                                      int32_t topic_id, store_topic_t **out)
{
    *out = topic_locked(st, topic_id);
    if (!*out)
        finish_status(call, GRPC_STATUS_NOT_FOUND,
                      "%s: tpid %" PRId32 ": rpc error: code = NotFound desc = no such topic", op,
                      topic_id);
    return *out != NULL;
}

/* ---- descriptors ----------------------------------------------------------------------- */

static char storage_path[] = STORAGE_PATH;

/* The one replica every log stream has, as GetMetadata lists it. */
static void replica_init(Varlog__Varlogpb__ReplicaDescriptor *rd)
{
    varlog__varlogpb__replica_descriptor__init(rd);
    rd->storage_node_id = STORAGE_NODE_ID;
    rd->storage_node_path = storage_path;
    rd->data_path = storage_path;
}

/* rds: the one-element replica list, shared by every descriptor of a response. */
static void ls_desc_fill(Varlog__Varlogpb__LogStreamDescriptor *d, const store_ls_t *ls,
                         Varlog__Varlogpb__ReplicaDescriptor **rds)
{
    varlog__varlogpb__log_stream_descriptor__init(d);
    d->topic_id = ls->topic_id;
    d->log_stream_id = ls->ls_id;
    d->status = ls->sealed ? VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED
                           : VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING;
    d->n_replicas = 1;
    d->replicas = rds;
}

/* ids: room for t->n_lss. */
static void topic_desc_fill(Varlog__Varlogpb__TopicDescriptor *d, const store_topic_t *t,
                            int32_t *ids)
{
    varlog__varlogpb__topic_descriptor__init(d);
    d->topic_id = t->id;
    d->status = VARLOG__VARLOGPB__TOPIC_STATUS__TOPIC_STATUS_RUNNING;
    for (size_t i = 0; i < t->n_lss; i++)
        ids[i] = t->lss[i]->ls_id;
    d->n_log_streams = t->n_lss;
    d->log_streams = ids;
}

/* A replica's metadata as the storage node reports it (LogStreamReplicaMetadata, in
 * log_io.c): the node's id without its address, the watermarks, the size. */
typedef struct replica_md {
    Varlog__Snpb__LogStreamReplicaMetadataDescriptor d;
    Varlog__Varlogpb__LogStreamReplica rep;
    Varlog__Varlogpb__StorageNode sn;
    Varlog__Varlogpb__TopicLogStream tls;
    Varlog__Varlogpb__LogSequenceNumber lwm, hwm;
    Google__Protobuf__Timestamp created, updated;
} replica_md_t;

static void replica_md_fill_locked(replica_md_t *r, const store_t *st, const store_topic_t *t,
                                   const store_ls_t *ls)
{
    varlog__varlogpb__storage_node__init(&r->sn);
    r->sn.storage_node_id = STORAGE_NODE_ID;
    varlog__varlogpb__topic_log_stream__init(&r->tls);
    r->tls.topic_id = ls->topic_id;
    r->tls.log_stream_id = ls->ls_id;
    varlog__varlogpb__log_stream_replica__init(&r->rep);
    r->rep.storage_node = &r->sn;
    r->rep.topic_log_stream = &r->tls;
    varlog__varlogpb__log_sequence_number__init(&r->lwm);
    varlog__varlogpb__log_sequence_number__init(&r->hwm);
    if (ls->head < ls->count) {
        r->lwm.llsn = ls->entries[ls->head].llsn;
        r->lwm.glsn = ls->entries[ls->head].glsn;
        r->hwm.llsn = ls->entries[ls->count - 1].llsn;
        r->hwm.glsn = ls->entries[ls->count - 1].glsn;
    }
    google__protobuf__timestamp__init(&r->created);
    r->created.seconds = ls->created_unix;
    google__protobuf__timestamp__init(&r->updated);
    r->updated.seconds = GO_ZERO_TIME_SECONDS;
    Varlog__Snpb__LogStreamReplicaMetadataDescriptor *d = &r->d;
    varlog__snpb__log_stream_replica_metadata_descriptor__init(d);
    d->log_stream_replica = &r->rep;
    d->status = ls->sealed ? VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED
                           : VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING;
    d->version = st->version;
    d->global_high_watermark = t->next_glsn - 1;
    d->local_low_watermark = &r->lwm;
    d->local_high_watermark = &r->hwm;
    d->path = storage_path;
    d->storage_size_bytes = ls->bytes;
    d->created_time = &r->created;
    d->updated_time = &r->updated;
}

/* ---- storage nodes --------------------------------------------------------------------- */

/* Sends StorageNodeMetadata of the one node wrapped by wrap (GetStorageNodeResponse,
 * ListStorageNodesResponse or AddStorageNodeResponse). */
enum sn_wrap { SN_GET, SN_LIST, SN_ADD };

static void send_storage_node(struct varlog_server *srv, rpc_server_call_t *call, enum sn_wrap wrap)
{
    char address[64];
    server_address(srv, address, sizeof(address));
    Varlog__Varlogpb__StorageNode sn = VARLOG__VARLOGPB__STORAGE_NODE__INIT;
    sn.storage_node_id = STORAGE_NODE_ID;
    sn.address = address;
    Google__Protobuf__Timestamp start = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
    start.seconds = srv->start_unix;
    /* The admin watches its nodes; this node answering is this node alive. */
    Google__Protobuf__Timestamp heartbeat = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
    heartbeat.seconds = (int64_t)time(NULL);
    Varlog__Varlogpb__StorageDescriptor sd = VARLOG__VARLOGPB__STORAGE_DESCRIPTOR__INIT;
    sd.path = storage_path;
    Varlog__Varlogpb__StorageDescriptor *sds[1] = {&sd};
    Varlog__Snpb__StorageNodeMetadataDescriptor snmd =
        VARLOG__SNPB__STORAGE_NODE_METADATA_DESCRIPTOR__INIT;
    snmd.cluster_id = CLUSTER_ID;
    snmd.storage_node = &sn;
    snmd.n_storages = 1;
    snmd.storages = sds;
    snmd.status = VARLOG__VARLOGPB__STORAGE_NODE_STATUS__STORAGE_NODE_STATUS_RUNNING;
    snmd.start_time = &start;
    Varlog__Admpb__StorageNodeMetadata snm = VARLOG__ADMPB__STORAGE_NODE_METADATA__INIT;
    snm.storage_node = &snmd;
    snm.create_time = &start;
    snm.last_heartbeat_time = &heartbeat;

    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    size_t n = 0;
    for (size_t i = 0; i < st->n_topics; i++)
        n += st->topics[i]->n_lss;
    replica_md_t *rmds = calloc(n ? n : 1, sizeof(*rmds));
    Varlog__Snpb__LogStreamReplicaMetadataDescriptor **rp = calloc(n ? n : 1, sizeof(*rp));
    if (!rmds || !rp) {
        pthread_mutex_unlock(&st->mu);
        refuse_nomem(call);
        goto out;
    }
    /* Every replica the node holds, those of unregistered topics too, as a real node. */
    size_t k = 0;
    for (size_t i = 0; i < st->n_topics; i++) {
        for (size_t j = 0; j < st->topics[i]->n_lss; j++, k++) {
            replica_md_fill_locked(&rmds[k], st, st->topics[i], st->topics[i]->lss[j]);
            rp[k] = &rmds[k].d;
        }
    }
    snmd.n_log_stream_replicas = n;
    snmd.log_stream_replicas = rp;
    sd.used = st->bytes;
    sd.total = st->max_bytes;
    Varlog__Admpb__StorageNodeMetadata *snms[1] = {&snm};
    if (wrap == SN_GET) {
        Varlog__Admpb__GetStorageNodeResponse r = VARLOG__ADMPB__GET_STORAGE_NODE_RESPONSE__INIT;
        r.storage_node = &snm;
        send_ok(call, &r.base);
    } else if (wrap == SN_LIST) {
        Varlog__Admpb__ListStorageNodesResponse r =
            VARLOG__ADMPB__LIST_STORAGE_NODES_RESPONSE__INIT;
        r.n_storage_nodes = 1;
        r.storage_nodes = snms;
        send_ok(call, &r.base);
    } else {
        Varlog__Admpb__AddStorageNodeResponse r = VARLOG__ADMPB__ADD_STORAGE_NODE_RESPONSE__INIT;
        r.storage_node = &snm;
        send_ok(call, &r.base);
    }
    pthread_mutex_unlock(&st->mu);
out:
    free(rmds);
    free(rp);
}

static void get_storage_node(struct varlog_server *srv, rpc_server_call_t *call,
                             const ProtobufCMessage *msg)
{
    const Varlog__Admpb__GetStorageNodeRequest *r =
        (const Varlog__Admpb__GetStorageNodeRequest *)msg;
    if (r->storage_node_id != STORAGE_NODE_ID) {
        finish_status(call, GRPC_STATUS_NOT_FOUND,
                      "get storage node %" PRId32
                      ": rpc error: code = NotFound desc = no such storage node",
                      r->storage_node_id);
        return;
    }
    send_storage_node(srv, call, SN_GET);
}

static void list_storage_nodes(struct varlog_server *srv, rpc_server_call_t *call,
                               const ProtobufCMessage *msg)
{
    (void)msg;
    send_storage_node(srv, call, SN_LIST);
}

/* Idempotent as in Varlog: adding the node already there (same id and address) answers it. */
static void add_storage_node(struct varlog_server *srv, rpc_server_call_t *call,
                             const ProtobufCMessage *msg)
{
    const Varlog__Admpb__AddStorageNodeRequest *r =
        (const Varlog__Admpb__AddStorageNodeRequest *)msg;
    char address[64];
    server_address(srv, address, sizeof(address));
    const Varlog__Varlogpb__StorageNode *sn = r->storage_node;
    if (sn && sn->storage_node_id == STORAGE_NODE_ID && sn->address &&
        strcmp(sn->address, address) == 0) {
        send_storage_node(srv, call, SN_ADD);
        return;
    }
    finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                  "add storage node: " ONE_NODE " (storage node %d at %s): it cannot add another",
                  STORAGE_NODE_ID, address);
}

static void unregister_storage_node(struct varlog_server *srv, rpc_server_call_t *call,
                                    const ProtobufCMessage *msg)
{
    const Varlog__Admpb__UnregisterStorageNodeRequest *r =
        (const Varlog__Admpb__UnregisterStorageNodeRequest *)msg;
    if (r->storage_node_id != STORAGE_NODE_ID) {
        /* Varlog answers OK for a node that is not registered. */
        Varlog__Admpb__UnregisterStorageNodeResponse resp =
            VARLOG__ADMPB__UNREGISTER_STORAGE_NODE_RESPONSE__INIT;
        send_ok(call, &resp.base);
        return;
    }
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    bool replicas = false;
    for (size_t i = 0; i < st->n_topics && !replicas; i++)
        replicas = st->topics[i]->n_lss > 0;
    pthread_mutex_unlock(&st->mu);
    if (replicas)
        finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                      "unregister storage node: rpc error: code = FailedPrecondition desc = not "
                      "idle replicas");
    else
        finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                      "unregister storage node: " ONE_NODE
                      ": its storage node %d cannot be unregistered",
                      STORAGE_NODE_ID);
}

/* ---- topics ---------------------------------------------------------------------------- */

static void get_topic(struct varlog_server *srv, rpc_server_call_t *call,
                      const ProtobufCMessage *msg)
{
    const Varlog__Admpb__GetTopicRequest *r = (const Varlog__Admpb__GetTopicRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = topic_locked(st, r->topic_id);
    int32_t *ids = t ? calloc(t->n_lss ? t->n_lss : 1, sizeof(*ids)) : NULL;
    if (!t) {
        finish_status(call, GRPC_STATUS_NOT_FOUND,
                      "get topic %" PRId32 ": rpc error: code = NotFound desc = no such topic",
                      r->topic_id);
    } else if (!ids) {
        refuse_nomem(call);
    } else {
        Varlog__Varlogpb__TopicDescriptor td;
        topic_desc_fill(&td, t, ids);
        Varlog__Admpb__GetTopicResponse resp = VARLOG__ADMPB__GET_TOPIC_RESPONSE__INIT;
        resp.topic = &td;
        send_ok(call, &resp.base);
    }
    pthread_mutex_unlock(&st->mu);
    free(ids);
}

/* Deprecated upstream but still what varlogctl's topic describe calls. Go answers an
 * unknown topic with UNAVAILABLE (its ErrNotExist wrapped with ToStatusErrorWithCode); here
 * it is NOT_FOUND with Go's text, so that no client takes it for a transient failure. */
static void describe_topic(struct varlog_server *srv, rpc_server_call_t *call,
                           const ProtobufCMessage *msg)
{
    const Varlog__Admpb__DescribeTopicRequest *r = (const Varlog__Admpb__DescribeTopicRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = topic_locked(st, r->topic_id);
    if (!t) {
        pthread_mutex_unlock(&st->mu);
        finish_status(call, GRPC_STATUS_NOT_FOUND, "no such topic (topicID=%" PRId32 "): not exist",
                      r->topic_id);
        return;
    }
    size_t n = t->n_lss;
    int32_t *ids = calloc(n ? n : 1, sizeof(*ids));
    Varlog__Varlogpb__LogStreamDescriptor *lsds = calloc(n ? n : 1, sizeof(*lsds));
    Varlog__Varlogpb__LogStreamDescriptor **lsdp = calloc(n ? n : 1, sizeof(*lsdp));
    if (!ids || !lsds || !lsdp) {
        refuse_nomem(call);
    } else {
        Varlog__Varlogpb__ReplicaDescriptor rd;
        replica_init(&rd);
        Varlog__Varlogpb__ReplicaDescriptor *rds[1] = {&rd};
        Varlog__Varlogpb__TopicDescriptor td;
        topic_desc_fill(&td, t, ids);
        for (size_t i = 0; i < n; i++) {
            ls_desc_fill(&lsds[i], t->lss[i], rds);
            lsdp[i] = &lsds[i];
        }
        Varlog__Admpb__DescribeTopicResponse resp = VARLOG__ADMPB__DESCRIBE_TOPIC_RESPONSE__INIT;
        resp.topic = &td;
        resp.n_log_streams = n;
        resp.log_streams = lsdp;
        send_ok(call, &resp.base);
    }
    pthread_mutex_unlock(&st->mu);
    free(ids);
    free(lsds);
    free(lsdp);
}

static void list_topics(struct varlog_server *srv, rpc_server_call_t *call,
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
        refuse_nomem(call);
    } else {
        size_t k = 0, m = 0;
        for (size_t i = 0; i < n; i++) {
            store_topic_t *t = st->topics[i];
            if (t->unregistered)
                continue;
            topic_desc_fill(&tds[m], t, &ids[k]);
            k += t->n_lss;
            tdp[m] = &tds[m];
            m++;
        }
        Varlog__Admpb__ListTopicsResponse resp = VARLOG__ADMPB__LIST_TOPICS_RESPONSE__INIT;
        resp.n_topics = m;
        resp.topics = tdp;
        send_ok(call, &resp.base);
    }
    pthread_mutex_unlock(&st->mu);
    free(ids);
    free(tds);
    free(tdp);
}

static void add_topic(struct varlog_server *srv, rpc_server_call_t *call,
                      const ProtobufCMessage *msg)
{
    (void)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    int32_t id = 0;
    varlog_err_t err = store_add_topic_locked(st, &id); /* bumps the applied index */
    pthread_mutex_unlock(&st->mu);
    if (err == VARLOG_ERR_NOMEM) {
        refuse_nomem(call);
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
    send_ok(call, &resp.base);
}

/* The topic leaves the metadata; its log streams stay in the store (see store_topic_t). */
static void unregister_topic(struct varlog_server *srv, rpc_server_call_t *call,
                             const ProtobufCMessage *msg)
{
    const Varlog__Admpb__UnregisterTopicRequest *r =
        (const Varlog__Admpb__UnregisterTopicRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = NULL;
    if (topic_or_not_found_locked(st, call, "unregister topic", r->topic_id, &t)) {
        t->unregistered = true;
        st->applied_index++;
        Varlog__Admpb__UnregisterTopicResponse resp =
            VARLOG__ADMPB__UNREGISTER_TOPIC_RESPONSE__INIT;
        send_ok(call, &resp.base);
    }
    pthread_mutex_unlock(&st->mu);
}

/* ---- log streams ----------------------------------------------------------------------- */

static void get_log_stream(struct varlog_server *srv, rpc_server_call_t *call,
                           const ProtobufCMessage *msg)
{
    const Varlog__Admpb__GetLogStreamRequest *r = (const Varlog__Admpb__GetLogStreamRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    store_ls_t *ls =
        ls_or_not_found_locked(st, call, "get log stream", r->topic_id, r->log_stream_id);
    if (ls) {
        Varlog__Varlogpb__ReplicaDescriptor rd;
        replica_init(&rd);
        Varlog__Varlogpb__ReplicaDescriptor *rds[1] = {&rd};
        Varlog__Varlogpb__LogStreamDescriptor d;
        ls_desc_fill(&d, ls, rds);
        Varlog__Admpb__GetLogStreamResponse resp = VARLOG__ADMPB__GET_LOG_STREAM_RESPONSE__INIT;
        resp.log_stream = &d;
        send_ok(call, &resp.base);
    }
    pthread_mutex_unlock(&st->mu);
}

static void list_log_streams(struct varlog_server *srv, rpc_server_call_t *call,
                             const ProtobufCMessage *msg)
{
    const Varlog__Admpb__ListLogStreamsRequest *r =
        (const Varlog__Admpb__ListLogStreamsRequest *)msg;
    store_t *st = &srv->store;
    Varlog__Varlogpb__LogStreamDescriptor *lsds = NULL, **lsdp = NULL;
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = NULL;
    if (!topic_or_not_found_locked(st, call, "list log streams", r->topic_id, &t))
        goto out;
    size_t n = t->n_lss;
    lsds = calloc(n ? n : 1, sizeof(*lsds));
    lsdp = calloc(n ? n : 1, sizeof(*lsdp));
    if (!lsds || !lsdp) {
        refuse_nomem(call);
        goto out;
    }
    Varlog__Varlogpb__ReplicaDescriptor rd;
    replica_init(&rd);
    Varlog__Varlogpb__ReplicaDescriptor *rds[1] = {&rd};
    for (size_t i = 0; i < n; i++) {
        ls_desc_fill(&lsds[i], t->lss[i], rds);
        lsdp[i] = &lsds[i];
    }
    Varlog__Admpb__ListLogStreamsResponse resp = VARLOG__ADMPB__LIST_LOG_STREAMS_RESPONSE__INIT;
    resp.n_log_streams = n;
    resp.log_streams = lsdp;
    send_ok(call, &resp.base);
out:
    pthread_mutex_unlock(&st->mu);
    free(lsds);
    free(lsdp);
}

/* On the one storage node: the replicas given must be none (the server places it) or one
 * on node 1. A real admin seals and unseals a new log stream before answering; it answers
 * RUNNING, as here. */
static void add_log_stream(struct varlog_server *srv, rpc_server_call_t *call,
                           const ProtobufCMessage *msg)
{
    const Varlog__Admpb__AddLogStreamRequest *r = (const Varlog__Admpb__AddLogStreamRequest *)msg;
    if (r->n_replicas > 1) {
        finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                      "invalid number of log stream replicas: %zu: " ONE_NODE
                      ", replication factor 1",
                      r->n_replicas);
        return;
    }
    if (r->n_replicas == 1 &&
        (!r->replicas[0] || r->replicas[0]->storage_node_id != STORAGE_NODE_ID)) {
        finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                      "add log stream: no such storage node %" PRId32 ": " ONE_NODE
                      ", storage node %d",
                      r->replicas[0] ? r->replicas[0]->storage_node_id : 0, STORAGE_NODE_ID);
        return;
    }
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = NULL;
    if (!topic_or_not_found_locked(st, call, "add log stream", r->topic_id, &t)) {
        pthread_mutex_unlock(&st->mu);
        return;
    }
    int32_t id = 0;
    varlog_err_t err = store_add_ls_locked(st, r->topic_id, &id); /* bumps the applied index */
    if (err == VARLOG_OK) {
        Varlog__Varlogpb__ReplicaDescriptor rd;
        replica_init(&rd);
        Varlog__Varlogpb__ReplicaDescriptor *rds[1] = {&rd};
        Varlog__Varlogpb__LogStreamDescriptor d;
        ls_desc_fill(&d, store_ls_locked(st, r->topic_id, id), rds);
        Varlog__Admpb__AddLogStreamResponse resp = VARLOG__ADMPB__ADD_LOG_STREAM_RESPONSE__INIT;
        resp.log_stream = &d;
        send_ok(call, &resp.base);
    } else if (err == VARLOG_ERR_NOMEM) {
        refuse_nomem(call);
    } else {
        /* Varlog's admin answers RESOURCE_EXHAUSTED at its log stream limit. */
        rpc_server_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                               "add log stream: no log stream id left", NULL, 0);
    }
    pthread_mutex_unlock(&st->mu);
}

static void update_log_stream(struct varlog_server *srv, rpc_server_call_t *call,
                              const ProtobufCMessage *msg)
{
    const Varlog__Admpb__UpdateLogStreamRequest *r =
        (const Varlog__Admpb__UpdateLogStreamRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    if (ls_or_not_found_locked(st, call, "update log stream", r->topic_id, r->log_stream_id))
        finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                      "update log stream: " ONE_NODE
                      ": a replica has no other storage node to move to");
    pthread_mutex_unlock(&st->mu);
}

static void unregister_log_stream(struct varlog_server *srv, rpc_server_call_t *call,
                                  const ProtobufCMessage *msg)
{
    const Varlog__Admpb__UnregisterLogStreamRequest *r =
        (const Varlog__Admpb__UnregisterLogStreamRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    if (ls_or_not_found_locked(st, call, "unregister log stream", r->topic_id, r->log_stream_id))
        finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                      "unregister log stream: the embedded server keeps every log stream for "
                      "its lifetime: it cannot unregister one");
    pthread_mutex_unlock(&st->mu);
}

static void remove_log_stream_replica(struct varlog_server *srv, rpc_server_call_t *call,
                                      const ProtobufCMessage *msg)
{
    (void)srv;
    (void)msg;
    finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                  "remove log stream replica: " ONE_NODE
                  ": each log stream has its only replica on storage node %d",
                  STORAGE_NODE_ID);
}

/* Answers as a real cluster: the replica's metadata (now SEALED) and the log stream's last
 * committed GLSN (0 while it holds no entry). Sealing a sealed log stream answers the same
 * again (the metadata repository's and the storage node's seal are both idempotent). */
static void seal(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg)
{
    const Varlog__Admpb__SealRequest *r = (const Varlog__Admpb__SealRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    store_ls_t *ls = ls_or_not_found_locked(st, call, "seal", r->topic_id, r->log_stream_id);
    if (ls) {
        if (!ls->sealed) {
            ls->sealed = true;
            st->applied_index++;
        }
        replica_md_t rmd;
        replica_md_fill_locked(&rmd, st, store_topic_locked(st, r->topic_id), ls);
        Varlog__Snpb__LogStreamReplicaMetadataDescriptor *rmds[1] = {&rmd.d};
        Varlog__Admpb__SealResponse resp = VARLOG__ADMPB__SEAL_RESPONSE__INIT;
        resp.n_log_streams = 1;
        resp.log_streams = rmds;
        resp.sealed_glsn = rmd.hwm.glsn;
        send_ok(call, &resp.base);
    }
    pthread_mutex_unlock(&st->mu);
}

/* Unsealing a running log stream answers it as it is. */
static void unseal(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg)
{
    const Varlog__Admpb__UnsealRequest *r = (const Varlog__Admpb__UnsealRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    store_ls_t *ls = ls_or_not_found_locked(st, call, "unseal", r->topic_id, r->log_stream_id);
    if (ls) {
        if (ls->sealed) {
            ls->sealed = false;
            st->applied_index++;
        }
        Varlog__Varlogpb__ReplicaDescriptor rd;
        replica_init(&rd);
        Varlog__Varlogpb__ReplicaDescriptor *rds[1] = {&rd};
        Varlog__Varlogpb__LogStreamDescriptor d;
        ls_desc_fill(&d, ls, rds);
        Varlog__Admpb__UnsealResponse resp = VARLOG__ADMPB__UNSEAL_RESPONSE__INIT;
        resp.log_stream = &d;
        send_ok(call, &resp.base);
    }
    pthread_mutex_unlock(&st->mu);
}

static void sync_ls(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg)
{
    (void)srv;
    (void)msg;
    finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                  "sync: " ONE_NODE ": each log stream has one replica, nothing to sync from");
}

/* The trim TrimDeprecated does (store_trim_locked), with a result per log stream of the topic
 * in a storage node's words: a sealed replica refuses ("sealed"), a GLSN beyond the topic's
 * high watermark is refused by every replica; anything else succeeds (trimming less than
 * already trimmed is a no-op). */
static void trim(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg)
{
    const Varlog__Admpb__TrimRequest *r = (const Varlog__Admpb__TrimRequest *)msg;
    store_t *st = &srv->store;
    Varlog__Admpb__TrimResult *res = NULL, **resp_p = NULL;
    char *texts = NULL;
    enum { TEXT = 96 };
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = topic_locked(st, r->topic_id);
    if (!t) {
        finish_status(call, GRPC_STATUS_NOT_FOUND, "trim: no such topic %" PRId32, r->topic_id);
        goto out;
    }
    size_t n = t->n_lss;
    res = calloc(n ? n : 1, sizeof(*res));
    resp_p = calloc(n ? n : 1, sizeof(*resp_p));
    texts = calloc(n ? n : 1, TEXT);
    if (!res || !resp_p || !texts) {
        refuse_nomem(call);
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
    send_ok(call, &resp.base);
out:
    pthread_mutex_unlock(&st->mu);
    free(res);
    free(resp_p);
    free(texts);
}

/* ---- metadata repository --------------------------------------------------------------- */

/* The node discovery (GetClusterInfo) reports: endpoint = this address, peer its URL. */
static void mr_node_init(struct varlog_server *srv, Varlog__Varlogpb__MetadataRepositoryNode *n,
                         char *address, size_t asize, char *peer, size_t psize)
{
    server_address(srv, address, asize);
    snprintf(peer, psize, "http://%s", address);
    varlog__varlogpb__metadata_repository_node__init(n);
    n->node_id = MR_NODE_ID;
    n->raft_url = peer;
    n->rpc_addr = address;
    n->leader = true;
    n->learner = false;
}

static void get_mr_node(struct varlog_server *srv, rpc_server_call_t *call,
                        const ProtobufCMessage *msg)
{
    const Varlog__Admpb__GetMetadataRepositoryNodeRequest *r =
        (const Varlog__Admpb__GetMetadataRepositoryNodeRequest *)msg;
    if (r->node_id != MR_NODE_ID) {
        /* Go answers an unknown node with a plain error (UNKNOWN); NOT_FOUND says it. */
        rpc_server_call_finish(call, GRPC_STATUS_NOT_FOUND, "admin: no such mr", NULL, 0);
        return;
    }
    char address[64], peer[80];
    Varlog__Varlogpb__MetadataRepositoryNode node;
    mr_node_init(srv, &node, address, sizeof(address), peer, sizeof(peer));
    Varlog__Admpb__GetMetadataRepositoryNodeResponse resp =
        VARLOG__ADMPB__GET_METADATA_REPOSITORY_NODE_RESPONSE__INIT;
    resp.node = &node;
    send_ok(call, &resp.base);
}

static void list_mr_nodes(struct varlog_server *srv, rpc_server_call_t *call,
                          const ProtobufCMessage *msg)
{
    (void)msg;
    char address[64], peer[80];
    Varlog__Varlogpb__MetadataRepositoryNode node;
    mr_node_init(srv, &node, address, sizeof(address), peer, sizeof(peer));
    Varlog__Varlogpb__MetadataRepositoryNode *nodes[1] = {&node};
    Varlog__Admpb__ListMetadataRepositoryNodesResponse resp =
        VARLOG__ADMPB__LIST_METADATA_REPOSITORY_NODES_RESPONSE__INIT;
    resp.n_nodes = 1;
    resp.nodes = nodes;
    send_ok(call, &resp.base);
}

/* Varlog's admin maps each member to its peer (Raft) URL, not to its RPC endpoint. */
static void get_mr_members(struct varlog_server *srv, rpc_server_call_t *call,
                           const ProtobufCMessage *msg)
{
    (void)msg;
    char address[64], peer[80];
    Varlog__Varlogpb__MetadataRepositoryNode node;
    mr_node_init(srv, &node, address, sizeof(address), peer, sizeof(peer));
    Varlog__Admpb__GetMRMembersResponse__MembersEntry e =
        VARLOG__ADMPB__GET_MRMEMBERS_RESPONSE__MEMBERS_ENTRY__INIT;
    e.key = MR_NODE_ID;
    e.value = peer;
    Varlog__Admpb__GetMRMembersResponse__MembersEntry *es[1] = {&e};
    Varlog__Admpb__GetMRMembersResponse resp = VARLOG__ADMPB__GET_MRMEMBERS_RESPONSE__INIT;
    resp.leader = MR_NODE_ID;
    resp.replication_factor = 1;
    resp.n_members = 1;
    resp.members = es;
    send_ok(call, &resp.base);
}

static void mr_membership(struct varlog_server *srv, rpc_server_call_t *call,
                          const ProtobufCMessage *msg)
{
    (void)srv;
    const char *op = "change metadata repository membership";
    if (msg->descriptor == &varlog__admpb__add_metadata_repository_node_request__descriptor)
        op = "add metadata repository node";
    else if (msg->descriptor == &varlog__admpb__add_mrpeer_request__descriptor)
        op = "add mr peer";
    else if (msg->descriptor == &varlog__admpb__delete_metadata_repository_node_request__descriptor)
        op = "delete metadata repository node";
    else if (msg->descriptor == &varlog__admpb__remove_mrpeer_request__descriptor)
        op = "remove mr peer";
    finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                  "%s: " ONE_NODE
                  ": it is its only metadata repository node (%d) and takes no peers",
                  op, MR_NODE_ID);
}

/* ---- the method table ------------------------------------------------------------------ */

static const struct adm_method {
    const ProtobufCMessageDescriptor *request;
    unary_handler_t handle;
} adm_methods[M_COUNT - M_ADM_FIRST] = {
#define A(m) [(m)-M_ADM_FIRST]
    A(M_ADM_GET_STORAGE_NODE) = {&varlog__admpb__get_storage_node_request__descriptor,
                                 get_storage_node},
    A(M_ADM_LIST_STORAGE_NODES) = {&varlog__admpb__list_storage_nodes_request__descriptor,
                                   list_storage_nodes},
    A(M_ADM_ADD_STORAGE_NODE) = {&varlog__admpb__add_storage_node_request__descriptor,
                                 add_storage_node},
    A(M_ADM_UNREGISTER_STORAGE_NODE) = {&varlog__admpb__unregister_storage_node_request__descriptor,
                                        unregister_storage_node},
    A(M_ADM_GET_TOPIC) = {&varlog__admpb__get_topic_request__descriptor, get_topic},
    A(M_ADM_DESCRIBE_TOPIC) = {&varlog__admpb__describe_topic_request__descriptor, describe_topic},
    A(M_ADM_LIST_TOPICS) = {&varlog__admpb__list_topics_request__descriptor, list_topics},
    A(M_ADM_ADD_TOPIC) = {&varlog__admpb__add_topic_request__descriptor, add_topic},
    A(M_ADM_UNREGISTER_TOPIC) = {&varlog__admpb__unregister_topic_request__descriptor,
                                 unregister_topic},
    A(M_ADM_GET_LOG_STREAM) = {&varlog__admpb__get_log_stream_request__descriptor, get_log_stream},
    A(M_ADM_LIST_LOG_STREAMS) = {&varlog__admpb__list_log_streams_request__descriptor,
                                 list_log_streams},
    A(M_ADM_ADD_LOG_STREAM) = {&varlog__admpb__add_log_stream_request__descriptor, add_log_stream},
    A(M_ADM_UPDATE_LOG_STREAM) = {&varlog__admpb__update_log_stream_request__descriptor,
                                  update_log_stream},
    A(M_ADM_UNREGISTER_LOG_STREAM) = {&varlog__admpb__unregister_log_stream_request__descriptor,
                                      unregister_log_stream},
    A(M_ADM_REMOVE_LOG_STREAM_REPLICA) =
        {&varlog__admpb__remove_log_stream_replica_request__descriptor, remove_log_stream_replica},
    A(M_ADM_SEAL) = {&varlog__admpb__seal_request__descriptor, seal},
    A(M_ADM_UNSEAL) = {&varlog__admpb__unseal_request__descriptor, unseal},
    A(M_ADM_SYNC) = {&varlog__admpb__sync_request__descriptor, sync_ls},
    A(M_ADM_TRIM) = {&varlog__admpb__trim_request__descriptor, trim},
    A(M_ADM_GET_MR_NODE) = {&varlog__admpb__get_metadata_repository_node_request__descriptor,
                            get_mr_node},
    A(M_ADM_LIST_MR_NODES) = {&varlog__admpb__list_metadata_repository_nodes_request__descriptor,
                              list_mr_nodes},
    A(M_ADM_GET_MR_MEMBERS) = {&google__protobuf__empty__descriptor, get_mr_members},
    A(M_ADM_ADD_MR_NODE) = {&varlog__admpb__add_metadata_repository_node_request__descriptor,
                            mr_membership},
    A(M_ADM_ADD_MR_PEER) = {&varlog__admpb__add_mrpeer_request__descriptor, mr_membership},
    A(M_ADM_DELETE_MR_NODE) = {&varlog__admpb__delete_metadata_repository_node_request__descriptor,
                               mr_membership},
    A(M_ADM_REMOVE_MR_PEER) = {&varlog__admpb__remove_mrpeer_request__descriptor, mr_membership},
#undef A
};

static void adm_start(rpc_server_call_t *call, const ProtobufCMessage *req, void *arg)
{
    struct method_ctx *ctx = arg;
    server_unary_dispatch(ctx->srv, ctx->index, call, req,
                          adm_methods[ctx->index - M_ADM_FIRST].handle);
}

void admin_methods(struct varlog_server *srv, rpc_method_t *methods)
{
    for (int i = M_ADM_FIRST; i < M_COUNT; i++)
        methods[i] = (rpc_method_t){server_method_paths[i],
                                    RPC_METHOD_UNARY,
                                    adm_methods[i - M_ADM_FIRST].request,
                                    adm_start,
                                    NULL,
                                    NULL,
                                    NULL,
                                    NULL,
                                    &srv->ctx[i]};
}
