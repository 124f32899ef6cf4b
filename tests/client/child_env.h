#ifndef VARLOG_CHILD_ENV_H
#define VARLOG_CHILD_ENV_H

/* A child varlog-server (bench/child_server.h) and one client of it: for the tests that
 * measure the client alone in their process (its allocations, its heap), the server's in
 * another. Linked by varlog_test_child_server (cmake/VarlogTesting.cmake). */
#include <stdint.h>
#include <sys/types.h>

#include "varlog/client.h"

typedef struct child_env {
    pid_t server; /* -1 (or 0) when none */
    char addr[64];
    varlog_client_t *client;
} child_env_t;

/* Starts a server of one topic of log_streams log streams and a client of it with
 * metadata.refresh.interval.ms 0, log.level err and metadata.call.timeout.ms 10000, then the
 * pairs given (key, value, ..., NULL). Fails the test when either does not start. */
void child_env_start(child_env_t *e, int32_t log_streams, ...);

/* Destroys the client and stops the server; what was not started is skipped, so a teardown
 * may call it after a test that failed half-way. */
void child_env_stop(child_env_t *e);

#endif
