/* The test-only Transport service (tests/proto/transport_test.proto) served by rpc_server
 * (rpc/include/rpc_server.h), shared by every transport test: handlers that answer, fail,
 * delay, pause and park calls as a request asks, and counters the tests assert on. */
#ifndef VARLOG_TESTS_TEST_SERVICE_H
#define VARLOG_TESTS_TEST_SERVICE_H

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
/* Extra paths served with the same messages, not in the .proto (a raw gRPC client reaches
 * them by name). */
#define PAUSED_BIDI SVC "PausedBidi"
#define WOKEN_STREAM SVC "WokenStream"

typedef Libvarlog__Transporttest__Request request_t;
typedef Libvarlog__Transporttest__Response response_t;
static const ProtobufCMessageDescriptor *const request_desc =
    &libvarlog__transporttest__request__descriptor;
static const ProtobufCMessageDescriptor *const response_desc =
    &libvarlog__transporttest__response__descriptor;

typedef struct svc_delayed svc_delayed_t;

struct svc {
    rpc_method_t methods[5]; /* must outlive the server, so it lives here */
    rpc_server_t *srv;       /* NULL once stopped (a test may stop it itself) */
    int port;
    char addr[64];                            /* "127.0.0.1:PORT" */
    atomic_int started, done, done_cancelled; /* on_start, on_done, on_done cancelled */
    atomic_int bidi_seen;                     /* requests received on bidi streams */
    atomic_size_t max_pending; /* largest pending_sends seen right after a stream's send */
    atomic_ullong produced;    /* messages produced by server streams */
    atomic_int credits;        /* WokenStream: messages it may produce */
    atomic_int target;         /* what a test's wait condition compares bidi_seen to */
    bool live;                 /* started and not yet stopped */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    rpc_server_call_t *parked; /* PausedBidi / WokenStream call, referenced */
    /* Unary answers delayed by Request.delay_ms are sent by this thread, as handlers that
     * wait for something else answer from a thread of their own. */
    pthread_t delayer;
    bool stopping;
    svc_delayed_t *delayed;
};

/* Starts the service on 127.0.0.1:port (0: any free port); fills s->port and s->addr. */
varlog_err_t svc_start(struct svc *s, int port);

/* Stops the delayer (answers not yet due are dropped) and the server (live calls are
 * cancelled), unless already stopped; checks that every started call saw on_done. */
void svc_stop(struct svc *s);

/* Takes the parked call out of s and releases the service's reference to it. */
void svc_unpark(struct svc *s);

#endif
