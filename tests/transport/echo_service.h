#ifndef VARLOG_TEST_ECHO_SERVICE_H
#define VARLOG_TEST_ECHO_SERVICE_H

/* The test-only Transport service (tests/proto/transport_test.proto) served by rpc_server,
 * with counters the transport tests assert on. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "rpc_server.h"

typedef struct echo_delayed echo_delayed_t;

typedef struct echo_service {
    rpc_method_t methods[3]; /* must outlive the server, so it lives here */
    rpc_server_t *server;
    int port;
    char address[64];           /* "127.0.0.1:PORT" */
    atomic_int calls_started;   /* on_start calls */
    atomic_int calls_done;      /* on_done calls */
    atomic_int calls_cancelled; /* on_done with cancelled = true */
    atomic_int bidi_messages;   /* requests received on bidi streams */
    atomic_size_t max_pending;  /* largest send FIFO seen by a server stream's producer */
    atomic_ullong stream_sent;  /* messages produced by server streams */

    /* Unary answers delayed by Request.delay_ms are sent by this thread. */
    pthread_t delayer;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping;
    echo_delayed_t *delayed;
} echo_service_t;

/* Serves on 127.0.0.1:port (0 = any free port). Returns VARLOG_OK or the start error. */
varlog_err_t echo_service_start(echo_service_t *e, int port);
/* Stops the server (live calls are cancelled) and the delayer thread. */
void echo_service_stop(echo_service_t *e);

#endif
