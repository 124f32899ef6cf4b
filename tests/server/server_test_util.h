#ifndef VARLOG_SERVER_TEST_UTIL_H
#define VARLOG_SERVER_TEST_UTIL_H

/* Helpers for the embedded server's tests: the client transport (rpc_client) as the client,
 * one helper per Varlog call shape. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mrpb/management.pb-c.h"
#include "mrpb/metadata_repository.pb-c.h"
#include "rpc_client.h"
#include "server_internal.h"
#include "snpb/log_io.pb-c.h"
#include "varlog/server.h"

#define M_PATH_APPEND "/varlog.snpb.LogIO/Append"
#define M_PATH_SUBSCRIBE "/varlog.snpb.LogIO/Subscribe"
#define M_PATH_SUBSCRIBE_TO "/varlog.snpb.LogIO/SubscribeTo"
#define M_PATH_TRIM "/varlog.snpb.LogIO/TrimDeprecated"
#define M_PATH_REPLICA_MD "/varlog.snpb.LogIO/LogStreamReplicaMetadata"
#define M_PATH_CLUSTER_INFO "/varlog.mrpb.Management/GetClusterInfo"
#define M_PATH_METADATA "/varlog.mrpb.MetadataRepositoryService/GetMetadata"

#define T_TIMEOUT 10000

typedef struct srv_fixture {
    varlog_server_t *srv;
    rpc_client_t *client;
    const char *addr;
} srv_fixture_t;

/* Starts a server (topics, log streams per topic, byte limit 0 = default) and a client. */
void fixture_start(srv_fixture_t *f, int32_t topics, int32_t ls, uint64_t max_bytes);
/* The same for a full node: appends past max_bytes payload bytes are refused
 * (refuse_when_full) instead of trimming the oldest entries. */
void fixture_start_full(srv_fixture_t *f, int32_t topics, int32_t ls, uint64_t max_bytes);
void fixture_stop(srv_fixture_t *f);
/* cmocka setup/teardown halves: a heap fixture with a server of topics x ls log streams in
 * *state, and its release. */
int fixture_setup(void **state, int32_t topics, int32_t ls);
int fixture_teardown(void **state);

void free_msg(void *m);

/* An AppendRequest with n payloads "p<i>" (or the given ones); free with request_free. */
Varlog__Snpb__AppendRequest *append_request(int32_t topic, int32_t ls, size_t n, const char *tag);
void append_request_free(Varlog__Snpb__AppendRequest *r);

/* One Append stream: sends n_reqs requests of `per` payloads each, half-closes, receives
 * the responses. first_glsn[i] / first_llsn[i] (may be NULL) get each response's first
 * numbers. Returns OK, or the stream's error after *answered responses (status copied into
 * st when given). */
varlog_err_t append_batches(srv_fixture_t *f, int32_t topic, int32_t ls, size_t n_reqs, size_t per,
                            uint64_t *first_glsn, uint64_t *first_llsn, size_t *answered,
                            rpc_status_t *st);

/* Opens a Subscribe (by_llsn = SubscribeTo) stream. */
rpc_stream_t *subscribe_open(srv_fixture_t *f, bool by_llsn, int32_t topic, int32_t ls,
                             uint64_t begin, uint64_t end, size_t window);

/* Receives entries until the stream ends or max entries arrived; glsns/llsns get them.
 * Returns the terminal result (END, an RPC error) or TIMED_OUT/OK when stopped early. */
varlog_err_t subscribe_collect(rpc_stream_t *s, size_t max, int64_t timeout_ms, uint64_t *glsns,
                               uint64_t *llsns, size_t *n);

/* Unary helpers; *resp owned by the caller. */
varlog_err_t replica_md(srv_fixture_t *f, int32_t topic, int32_t ls,
                        Varlog__Snpb__LogStreamReplicaMetadataResponse **resp, rpc_status_t *st);
varlog_err_t trim_call(srv_fixture_t *f, int32_t topic, uint64_t glsn);
varlog_err_t get_metadata(srv_fixture_t *f, Varlog__Mrpb__GetMetadataResponse **resp);

#endif
