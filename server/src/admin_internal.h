#ifndef VARLOG_SERVER_ADMIN_INTERNAL_H
#define VARLOG_SERVER_ADMIN_INTERNAL_H

/* What the admin service's files share: admin.c (the method table, the answers' helpers,
 * the descriptors), admin_topology.c (topics and log streams) and admin_nodes.c (the storage
 * node and the metadata-repository node). */
#include <stdbool.h>
#include <stdint.h>

#include "admpb/admin.pb-c.h"
#include "server_internal.h"

/* A Go zero time.Time, which Go servers send for timestamps they leave unset. */
#define GO_ZERO_TIME_SECONDS (-62135596800LL)

#define ONE_NODE "the embedded server is a cluster of one node"

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

/* Ends call with code and a formatted message. */
void adm_finish_status(rpc_server_call_t *call, grpc_status_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void adm_send_ok(rpc_server_call_t *call, const ProtobufCMessage *resp);
void adm_refuse_nomem(rpc_server_call_t *call);
store_topic_t *adm_topic_locked(store_t *st, int32_t topic_id);
store_ls_t *adm_ls_or_not_found_locked(store_t *st, rpc_server_call_t *call, const char *op,
                                       int32_t topic_id, int32_t ls_id);
bool adm_topic_or_not_found_locked(store_t *st, rpc_server_call_t *call, const char *op,
                                   int32_t topic_id, store_topic_t **out);
void adm_replica_init(Varlog__Varlogpb__ReplicaDescriptor *rd);
void adm_ls_desc_fill(Varlog__Varlogpb__LogStreamDescriptor *d, const store_ls_t *ls,
                      Varlog__Varlogpb__ReplicaDescriptor **rds);
void adm_topic_desc_fill(Varlog__Varlogpb__TopicDescriptor *d, const store_topic_t *t,
                         int32_t *ids);
void adm_replica_md_fill_locked(replica_md_t *r, const store_t *st, const store_topic_t *t,
                                const store_ls_t *ls);

extern char adm_storage_path[];

/* Handlers (server_unary_dispatch's unary_handler_t). */
void adm_get_storage_node(struct varlog_server *srv, rpc_server_call_t *call,
                          const ProtobufCMessage *msg);
void adm_list_storage_nodes(struct varlog_server *srv, rpc_server_call_t *call,
                            const ProtobufCMessage *msg);
void adm_add_storage_node(struct varlog_server *srv, rpc_server_call_t *call,
                          const ProtobufCMessage *msg);
void adm_unregister_storage_node(struct varlog_server *srv, rpc_server_call_t *call,
                                 const ProtobufCMessage *msg);
void adm_get_topic(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg);
void adm_describe_topic(struct varlog_server *srv, rpc_server_call_t *call,
                        const ProtobufCMessage *msg);
void adm_list_topics(struct varlog_server *srv, rpc_server_call_t *call,
                     const ProtobufCMessage *msg);
void adm_add_topic(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg);
void adm_unregister_topic(struct varlog_server *srv, rpc_server_call_t *call,
                          const ProtobufCMessage *msg);
void adm_get_log_stream(struct varlog_server *srv, rpc_server_call_t *call,
                        const ProtobufCMessage *msg);
void adm_list_log_streams(struct varlog_server *srv, rpc_server_call_t *call,
                          const ProtobufCMessage *msg);
void adm_add_log_stream(struct varlog_server *srv, rpc_server_call_t *call,
                        const ProtobufCMessage *msg);
void adm_update_log_stream(struct varlog_server *srv, rpc_server_call_t *call,
                           const ProtobufCMessage *msg);
void adm_unregister_log_stream(struct varlog_server *srv, rpc_server_call_t *call,
                               const ProtobufCMessage *msg);
void adm_remove_log_stream_replica(struct varlog_server *srv, rpc_server_call_t *call,
                                   const ProtobufCMessage *msg);
void adm_seal(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg);
void adm_unseal(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg);
void adm_sync_ls(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg);
void adm_trim(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg);
void adm_get_mr_node(struct varlog_server *srv, rpc_server_call_t *call,
                     const ProtobufCMessage *msg);
void adm_list_mr_nodes(struct varlog_server *srv, rpc_server_call_t *call,
                       const ProtobufCMessage *msg);
void adm_get_mr_members(struct varlog_server *srv, rpc_server_call_t *call,
                        const ProtobufCMessage *msg);
void adm_mr_membership(struct varlog_server *srv, rpc_server_call_t *call,
                       const ProtobufCMessage *msg);

#endif
