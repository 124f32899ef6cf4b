#ifndef VARLOG_TEST_SERVER_FIXTURE_H
#define VARLOG_TEST_SERVER_FIXTURE_H

/* The embedded server the CLI tests run varlog-cli against, as a cmocka group fixture: one
 * server per test program, stopped by the teardown also when a test failed. */
#include "varlog/server.h"

typedef struct server_fixture {
    varlog_server_t *srv;
    const char *addr; /* the server's host:port, for --mr */
} server_fixture_t;

/* Starts a server with topics × log_streams and stores a server_fixture_t in *state.
 * Returns 0, or -1 (cmocka then fails the group) when it cannot start. */
int server_fixture_setup(void **state, int topics, int log_streams);

/* Stops the server and frees the fixture. Returns 0. */
int server_fixture_teardown(void **state);

#endif
