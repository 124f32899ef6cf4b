/* The test service of test_rpc_server: libvarlog.transporttest.Transport served by
 * rpc_server (server/src/rpc_server.h), with handlers that answer, fail, pause and park calls
 * as a request asks. */
#ifndef VARLOG_TESTS_RPC_TEST_SERVICE_H
#define VARLOG_TESTS_RPC_TEST_SERVICE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "rpc_server.h"
#include "transport_test.pb-c.h"

#define SVC "/libvarlog.transporttest.Transport/"
#define UNARY SVC "Unary"
#define BIDI SVC "Bidi"
#define SERVER_STREAM SVC "ServerStream"
/* Extra paths served only by this test, with the same messages. */
#define PAUSED_BIDI SVC "PausedBidi"
#define WOKEN_STREAM SVC "WokenStream"

typedef Libvarlog__Transporttest__Request request_t;
typedef Libvarlog__Transporttest__Response response_t;
static const ProtobufCMessageDescriptor *const request_desc =
    &libvarlog__transporttest__request__descriptor;
static const ProtobufCMessageDescriptor *const response_desc =
    &libvarlog__transporttest__response__descriptor;

#define MAX_DELAYERS 16

struct svc {
    rpc_method_t methods[5];
    rpc_server_t *srv;
    int port;
    char addr[64];
    atomic_int started, done, done_cancelled, bidi_seen;
    atomic_size_t max_pending; /* largest pending_sends seen right after a stream's send */
    atomic_ullong produced;    /* messages produced by server streams */
    atomic_int credits;        /* WokenStream: messages it may produce */
    atomic_int target;         /* what bidi_seen_at_least waits for */
    bool live;                 /* started and not yet stopped */

    pthread_mutex_t mu;
    rpc_server_call_t *parked; /* PausedBidi / WokenStream call, referenced */
    pthread_t delayers[MAX_DELAYERS];
    int n_delayers;
};

/* Starts the service on 127.0.0.1:port (0: any free port); fills s->port and s->addr. */
varlog_err_t svc_start(struct svc *s, int port);

/* Stops the server (if a test did not already) and joins the answering threads. */
void svc_stop(struct svc *s);

/* Takes the parked call out of s and releases the service's reference to it. */
void svc_unpark(struct svc *s);

#endif
