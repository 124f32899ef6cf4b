/* The metadata repository methods the client uses for discovery: GetClusterInfo and
 * GetMetadata, describing this one node (section 8, items 1 and 2 of the wire reference). */
#include <stdio.h>
#include <stdlib.h>

#include "mrpb/management.pb-c.h"
#include "mrpb/metadata_repository.pb-c.h"
#include "server_internal.h"

static void cluster_info(struct varlog_server *srv, rpc_server_call_t *call,
                         const ProtobufCMessage *req)
{
    (void)req;
    char address[64], peer[80];
    server_address(srv, address, sizeof(address));
    snprintf(peer, sizeof(peer), "http://%s", address);
    Varlog__Mrpb__ClusterInfo__Member member = VARLOG__MRPB__CLUSTER_INFO__MEMBER__INIT;
    member.peer = peer;
    member.endpoint = address;
    Varlog__Mrpb__ClusterInfo__MembersEntry entry = VARLOG__MRPB__CLUSTER_INFO__MEMBERS_ENTRY__INIT;
    entry.key = MR_NODE_ID;
    entry.value = &member;
    Varlog__Mrpb__ClusterInfo__MembersEntry *entries[1] = {&entry};
    Varlog__Mrpb__ClusterInfo info = VARLOG__MRPB__CLUSTER_INFO__INIT;
    info.cluster_id = CLUSTER_ID;
    info.node_id = MR_NODE_ID;
    info.leader = MR_NODE_ID;
    info.replication_factor = 1;
    info.n_members = 1;
    info.members = entries;
    pthread_mutex_lock(&srv->store.mu);
    info.applied_index = srv->store.applied_index;
    pthread_mutex_unlock(&srv->store.mu);
    Varlog__Mrpb__GetClusterInfoResponse resp = VARLOG__MRPB__GET_CLUSTER_INFO_RESPONSE__INIT;
    resp.cluster_info = &info;
    rpc_server_call_send(call, &resp.base);
    rpc_server_call_finish(call, GRPC_STATUS_OK, NULL, NULL, 0);
}

static char replica_path[] = STORAGE_PATH;

/* Builds and sends the metadata with the store locked: every part points into locals or
 * the store, so nothing needs freeing one by one. */
static void get_metadata(struct varlog_server *srv, rpc_server_call_t *call,
                         const ProtobufCMessage *req)
{
    (void)req;
    char address[64];
    server_address(srv, address, sizeof(address));
    Varlog__Varlogpb__StorageNode sn = VARLOG__VARLOGPB__STORAGE_NODE__INIT;
    sn.storage_node_id = STORAGE_NODE_ID;
    sn.address = address;
    Google__Protobuf__Timestamp created = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
    created.seconds = srv->start_unix;
    char *paths[1] = {replica_path};
    Varlog__Varlogpb__StorageNodeDescriptor snd = VARLOG__VARLOGPB__STORAGE_NODE_DESCRIPTOR__INIT;
    snd.storage_node = &sn;
    snd.status = VARLOG__VARLOGPB__STORAGE_NODE_STATUS__STORAGE_NODE_STATUS_RUNNING;
    snd.n_paths = 1;
    snd.paths = paths;
    snd.create_time = &created;
    Varlog__Varlogpb__StorageNodeDescriptor *snds[1] = {&snd};

    Varlog__Varlogpb__ReplicaDescriptor rd = VARLOG__VARLOGPB__REPLICA_DESCRIPTOR__INIT;
    rd.storage_node_id = STORAGE_NODE_ID;
    rd.storage_node_path = replica_path;
    rd.data_path = replica_path;
    Varlog__Varlogpb__ReplicaDescriptor *rds[1] = {&rd};

    Varlog__Varlogpb__MetadataDescriptor md = VARLOG__VARLOGPB__METADATA_DESCRIPTOR__INIT;
    md.n_storage_nodes = 1;
    md.storage_nodes = snds;

    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    size_t n_ls = 0;
    for (size_t i = 0; i < st->n_topics; i++) {
        /* An unregistered topic leaves the metadata; its log streams stay in the store. */
        if (!st->topics[i]->unregistered)
            n_ls += st->topics[i]->n_lss;
    }
    Varlog__Varlogpb__LogStreamDescriptor *lsds = calloc(n_ls ? n_ls : 1, sizeof(*lsds));
    Varlog__Varlogpb__LogStreamDescriptor **lsdp = calloc(n_ls ? n_ls : 1, sizeof(*lsdp));
    Varlog__Varlogpb__TopicDescriptor *tds = calloc(st->n_topics ? st->n_topics : 1, sizeof(*tds));
    Varlog__Varlogpb__TopicDescriptor **tdp = calloc(st->n_topics ? st->n_topics : 1, sizeof(*tdp));
    int32_t *ids = calloc(n_ls ? n_ls : 1, sizeof(*ids));
    if (!lsds || !lsdp || !tds || !tdp || !ids) {
        pthread_mutex_unlock(&st->mu);
        rpc_server_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL, 0);
        goto out;
    }
    /* Log stream ids grow with creation, topic by topic only at start; a later add to an
     * older topic breaks that order, so place each descriptor by rank (ids are unique). */
    size_t k = 0, n_td = 0;
    for (size_t i = 0; i < st->n_topics; i++) {
        store_topic_t *t = st->topics[i];
        if (t->unregistered)
            continue;
        varlog__varlogpb__topic_descriptor__init(&tds[i]);
        tds[i].topic_id = t->id;
        tds[i].status = VARLOG__VARLOGPB__TOPIC_STATUS__TOPIC_STATUS_RUNNING;
        tds[i].n_log_streams = t->n_lss;
        tds[i].log_streams = &ids[k];
        tdp[n_td++] = &tds[i];
        for (size_t j = 0; j < t->n_lss; j++) {
            store_ls_t *ls = t->lss[j];
            ids[k] = ls->ls_id;
            Varlog__Varlogpb__LogStreamDescriptor *d = &lsds[k];
            varlog__varlogpb__log_stream_descriptor__init(d);
            d->topic_id = t->id;
            d->log_stream_id = ls->ls_id;
            d->status = ls->sealed ? VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED
                                   : VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING;
            d->n_replicas = 1;
            d->replicas = rds;
            k++;
        }
    }
    /* Sorted by log stream id: the Go client binary-searches this list. Insertion sort on
     * an almost sorted array. */
    for (size_t i = 0; i < n_ls; i++) {
        Varlog__Varlogpb__LogStreamDescriptor *d = &lsds[i];
        size_t j = i;
        while (j > 0 && lsdp[j - 1]->log_stream_id > d->log_stream_id) {
            lsdp[j] = lsdp[j - 1];
            j--;
        }
        lsdp[j] = d;
    }
    md.applied_index = st->applied_index;
    md.n_log_streams = n_ls;
    md.log_streams = lsdp;
    md.n_topics = n_td;
    md.topics = tdp;
    Varlog__Mrpb__GetMetadataResponse resp = VARLOG__MRPB__GET_METADATA_RESPONSE__INIT;
    resp.metadata = &md;
    rpc_server_call_send(call, &resp.base);
    pthread_mutex_unlock(&st->mu);
    rpc_server_call_finish(call, GRPC_STATUS_OK, NULL, NULL, 0);
out:
    free(lsds);
    free(lsdp);
    free(tds);
    free(tdp);
    free(ids);
}

static void cluster_info_start(rpc_server_call_t *call, const ProtobufCMessage *req, void *arg)
{
    struct method_ctx *ctx = arg;
    server_unary_dispatch(ctx->srv, ctx->index, call, req, cluster_info);
}

static void get_metadata_start(rpc_server_call_t *call, const ProtobufCMessage *req, void *arg)
{
    struct method_ctx *ctx = arg;
    server_unary_dispatch(ctx->srv, ctx->index, call, req, get_metadata);
}

void metadata_methods(struct varlog_server *srv, rpc_method_t *ci, rpc_method_t *gm)
{
    *ci = (rpc_method_t){server_method_paths[M_CLUSTER_INFO],
                         RPC_METHOD_UNARY,
                         &varlog__mrpb__get_cluster_info_request__descriptor,
                         cluster_info_start,
                         NULL,
                         NULL,
                         NULL,
                         NULL,
                         &srv->ctx[M_CLUSTER_INFO]};
    *gm = (rpc_method_t){server_method_paths[M_METADATA],
                         RPC_METHOD_UNARY,
                         &varlog__mrpb__get_metadata_request__descriptor,
                         get_metadata_start,
                         NULL,
                         NULL,
                         NULL,
                         NULL,
                         &srv->ctx[M_METADATA]};
}
