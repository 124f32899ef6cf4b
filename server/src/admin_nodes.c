/* The admin service's storage node and metadata-repository node: the server's one node of
 * each (admin.c has the service's table and what the handlers share). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin_internal.h"

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
    sd.path = adm_storage_path;
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
        adm_refuse_nomem(call);
        goto out;
    }
    /* Every replica the node holds, those of unregistered topics too, as a real node. */
    size_t k = 0;
    for (size_t i = 0; i < st->n_topics; i++) {
        for (size_t j = 0; j < st->topics[i]->n_lss; j++, k++) {
            adm_replica_md_fill_locked(&rmds[k], st, st->topics[i], st->topics[i]->lss[j]);
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
        adm_send_ok(call, &r.base);
    } else if (wrap == SN_LIST) {
        Varlog__Admpb__ListStorageNodesResponse r =
            VARLOG__ADMPB__LIST_STORAGE_NODES_RESPONSE__INIT;
        r.n_storage_nodes = 1;
        r.storage_nodes = snms;
        adm_send_ok(call, &r.base);
    } else {
        Varlog__Admpb__AddStorageNodeResponse r = VARLOG__ADMPB__ADD_STORAGE_NODE_RESPONSE__INIT;
        r.storage_node = &snm;
        adm_send_ok(call, &r.base);
    }
    pthread_mutex_unlock(&st->mu);
out:
    free(rmds);
    free(rp);
}

void adm_get_storage_node(struct varlog_server *srv, rpc_server_call_t *call,
                          const ProtobufCMessage *msg)
{
    const Varlog__Admpb__GetStorageNodeRequest *r =
        (const Varlog__Admpb__GetStorageNodeRequest *)msg;
    if (r->storage_node_id != STORAGE_NODE_ID) {
        adm_finish_status(call, GRPC_STATUS_NOT_FOUND,
                          "get storage node %" PRId32
                          ": rpc error: code = NotFound desc = no such storage node",
                          r->storage_node_id);
        return;
    }
    send_storage_node(srv, call, SN_GET);
}

void adm_list_storage_nodes(struct varlog_server *srv, rpc_server_call_t *call,
                            const ProtobufCMessage *msg)
{
    (void)msg;
    send_storage_node(srv, call, SN_LIST);
}

/* Idempotent as in Varlog: adding the node already there (same id and address) answers it. */
void adm_add_storage_node(struct varlog_server *srv, rpc_server_call_t *call,
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
    adm_finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                      "add storage node: " ONE_NODE
                      " (storage node %d at %s): it cannot add another",
                      STORAGE_NODE_ID, address);
}

void adm_unregister_storage_node(struct varlog_server *srv, rpc_server_call_t *call,
                                 const ProtobufCMessage *msg)
{
    const Varlog__Admpb__UnregisterStorageNodeRequest *r =
        (const Varlog__Admpb__UnregisterStorageNodeRequest *)msg;
    if (r->storage_node_id != STORAGE_NODE_ID) {
        /* Varlog answers OK for a node that is not registered. */
        Varlog__Admpb__UnregisterStorageNodeResponse resp =
            VARLOG__ADMPB__UNREGISTER_STORAGE_NODE_RESPONSE__INIT;
        adm_send_ok(call, &resp.base);
        return;
    }
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    bool replicas = false;
    for (size_t i = 0; i < st->n_topics && !replicas; i++)
        replicas = st->topics[i]->n_lss > 0;
    pthread_mutex_unlock(&st->mu);
    if (replicas)
        adm_finish_status(
            call, GRPC_STATUS_FAILED_PRECONDITION,
            "unregister storage node: rpc error: code = FailedPrecondition desc = not "
            "idle replicas");
    else
        adm_finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                          "unregister storage node: " ONE_NODE
                          ": its storage node %d cannot be unregistered",
                          STORAGE_NODE_ID);
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

void adm_get_mr_node(struct varlog_server *srv, rpc_server_call_t *call,
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
    adm_send_ok(call, &resp.base);
}

void adm_list_mr_nodes(struct varlog_server *srv, rpc_server_call_t *call,
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
    adm_send_ok(call, &resp.base);
}

/* Varlog's admin maps each member to its peer (Raft) URL, not to its RPC endpoint. */
void adm_get_mr_members(struct varlog_server *srv, rpc_server_call_t *call,
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
    adm_send_ok(call, &resp.base);
}

void adm_mr_membership(struct varlog_server *srv, rpc_server_call_t *call,
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
    adm_finish_status(call, GRPC_STATUS_FAILED_PRECONDITION,
                      "%s: " ONE_NODE
                      ": it is its only metadata repository node (%d) and takes no peers",
                      op, MR_NODE_ID);
}
