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

#include "admin_internal.h"

void adm_finish_status(rpc_server_call_t *call, grpc_status_code code, const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    rpc_server_call_finish(call, code, msg, NULL, 0);
}

void adm_send_ok(rpc_server_call_t *call, const ProtobufCMessage *resp)
{
    if (rpc_server_call_send(call, resp) == VARLOG_ERR_NOMEM) {
        rpc_server_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL, 0);
        return;
    }
    rpc_server_call_finish(call, GRPC_STATUS_OK, NULL, NULL, 0);
}

void adm_refuse_nomem(rpc_server_call_t *call)
{
    rpc_server_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL, 0);
}

/* A topic the metadata shows: unregistered ones stay in the store for their readers. */
store_topic_t *adm_topic_locked(store_t *st, int32_t topic_id)
{
    store_topic_t *t = store_topic_locked(st, topic_id);
    return t && !t->unregistered ? t : NULL;
}

/* The log stream (topic_id, ls_id) of a registered topic, or NULL after finishing the call
 * with NotFound as the Go admin's getLogStream words it, prefixed by op. */
store_ls_t *adm_ls_or_not_found_locked(store_t *st, rpc_server_call_t *call, const char *op,
                                       int32_t topic_id, int32_t ls_id)
{
    if (!adm_topic_locked(st, topic_id)) {
        adm_finish_status(call, GRPC_STATUS_NOT_FOUND,
                          "%s: tpid %" PRId32 ": rpc error: code = NotFound desc = no such topic",
                          op, topic_id);
        return NULL;
    }
    store_ls_t *ls = store_ls_locked(st, topic_id, ls_id);
    if (!ls)
        adm_finish_status(call, GRPC_STATUS_NOT_FOUND,
                          "%s: no log stream in topic: lsid %" PRId32
                          ": rpc error: code = NotFound desc = no such log stream",
                          op, ls_id);
    return ls;
}

bool adm_topic_or_not_found_locked(store_t *st, rpc_server_call_t *call, const char *op,
                                   int32_t topic_id, store_topic_t **out)
{
    *out = adm_topic_locked(st, topic_id);
    if (!*out)
        adm_finish_status(call, GRPC_STATUS_NOT_FOUND,
                          "%s: tpid %" PRId32 ": rpc error: code = NotFound desc = no such topic",
                          op, topic_id);
    return *out != NULL;
}

/* ---- descriptors ----------------------------------------------------------------------- */

char adm_storage_path[] = STORAGE_PATH;

/* The one replica every log stream has, as GetMetadata lists it. */
void adm_replica_init(Varlog__Varlogpb__ReplicaDescriptor *rd)
{
    varlog__varlogpb__replica_descriptor__init(rd);
    rd->storage_node_id = STORAGE_NODE_ID;
    rd->storage_node_path = adm_storage_path;
    rd->data_path = adm_storage_path;
}

/* rds: the one-element replica list, shared by every descriptor of a response. */
void adm_ls_desc_fill(Varlog__Varlogpb__LogStreamDescriptor *d, const store_ls_t *ls,
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
void adm_topic_desc_fill(Varlog__Varlogpb__TopicDescriptor *d, const store_topic_t *t, int32_t *ids)
{
    varlog__varlogpb__topic_descriptor__init(d);
    d->topic_id = t->id;
    d->status = VARLOG__VARLOGPB__TOPIC_STATUS__TOPIC_STATUS_RUNNING;
    for (size_t i = 0; i < t->n_lss; i++)
        ids[i] = t->lss[i]->ls_id;
    d->n_log_streams = t->n_lss;
    d->log_streams = ids;
}

void adm_replica_md_fill_locked(replica_md_t *r, const store_t *st, const store_topic_t *t,
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
    d->path = adm_storage_path;
    d->storage_size_bytes = ls->bytes;
    d->created_time = &r->created;
    d->updated_time = &r->updated;
}

/* ---- the method table ------------------------------------------------------------------ */

static const struct adm_method {
    const ProtobufCMessageDescriptor *request;
    unary_handler_t handle;
} adm_methods[M_COUNT - M_ADM_FIRST] = {
#define A(m) [(m)-M_ADM_FIRST]
    A(M_ADM_GET_STORAGE_NODE) = {&varlog__admpb__get_storage_node_request__descriptor,
                                 adm_get_storage_node},
    A(M_ADM_LIST_STORAGE_NODES) = {&varlog__admpb__list_storage_nodes_request__descriptor,
                                   adm_list_storage_nodes},
    A(M_ADM_ADD_STORAGE_NODE) = {&varlog__admpb__add_storage_node_request__descriptor,
                                 adm_add_storage_node},
    A(M_ADM_UNREGISTER_STORAGE_NODE) = {&varlog__admpb__unregister_storage_node_request__descriptor,
                                        adm_unregister_storage_node},
    A(M_ADM_GET_TOPIC) = {&varlog__admpb__get_topic_request__descriptor, adm_get_topic},
    A(M_ADM_DESCRIBE_TOPIC) = {&varlog__admpb__describe_topic_request__descriptor,
                               adm_describe_topic},
    A(M_ADM_LIST_TOPICS) = {&varlog__admpb__list_topics_request__descriptor, adm_list_topics},
    A(M_ADM_ADD_TOPIC) = {&varlog__admpb__add_topic_request__descriptor, adm_add_topic},
    A(M_ADM_UNREGISTER_TOPIC) = {&varlog__admpb__unregister_topic_request__descriptor,
                                 adm_unregister_topic},
    A(M_ADM_GET_LOG_STREAM) = {&varlog__admpb__get_log_stream_request__descriptor,
                               adm_get_log_stream},
    A(M_ADM_LIST_LOG_STREAMS) = {&varlog__admpb__list_log_streams_request__descriptor,
                                 adm_list_log_streams},
    A(M_ADM_ADD_LOG_STREAM) = {&varlog__admpb__add_log_stream_request__descriptor,
                               adm_add_log_stream},
    A(M_ADM_UPDATE_LOG_STREAM) = {&varlog__admpb__update_log_stream_request__descriptor,
                                  adm_update_log_stream},
    A(M_ADM_UNREGISTER_LOG_STREAM) = {&varlog__admpb__unregister_log_stream_request__descriptor,
                                      adm_unregister_log_stream},
    A(M_ADM_REMOVE_LOG_STREAM_REPLICA) =
        {&varlog__admpb__remove_log_stream_replica_request__descriptor,
         adm_remove_log_stream_replica},
    A(M_ADM_SEAL) = {&varlog__admpb__seal_request__descriptor, adm_seal},
    A(M_ADM_UNSEAL) = {&varlog__admpb__unseal_request__descriptor, adm_unseal},
    A(M_ADM_SYNC) = {&varlog__admpb__sync_request__descriptor, adm_sync_ls},
    A(M_ADM_TRIM) = {&varlog__admpb__trim_request__descriptor, adm_trim},
    A(M_ADM_GET_MR_NODE) = {&varlog__admpb__get_metadata_repository_node_request__descriptor,
                            adm_get_mr_node},
    A(M_ADM_LIST_MR_NODES) = {&varlog__admpb__list_metadata_repository_nodes_request__descriptor,
                              adm_list_mr_nodes},
    A(M_ADM_GET_MR_MEMBERS) = {&google__protobuf__empty__descriptor, adm_get_mr_members},
    A(M_ADM_ADD_MR_NODE) = {&varlog__admpb__add_metadata_repository_node_request__descriptor,
                            adm_mr_membership},
    A(M_ADM_ADD_MR_PEER) = {&varlog__admpb__add_mrpeer_request__descriptor, adm_mr_membership},
    A(M_ADM_DELETE_MR_NODE) = {&varlog__admpb__delete_metadata_repository_node_request__descriptor,
                               adm_mr_membership},
    A(M_ADM_REMOVE_MR_PEER) = {&varlog__admpb__remove_mrpeer_request__descriptor,
                               adm_mr_membership},
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
