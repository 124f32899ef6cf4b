#ifndef VARLOG_FAKE_RPC_SERVER_H
#define VARLOG_FAKE_RPC_SERVER_H

/* rpc_server.h without gRPC (fake_rpc_server.c): the server's handlers run on the caller's
 * thread, called directly by a harness, and what they send is checked and dropped. */
#include <stdbool.h>
#include <stddef.h>

#include "rpc_server.h"

struct rpc_server_call {
    const rpc_method_t *method;
    void *user;
    bool finished;
    bool woken; /* rpc_server_call_wake since the harness last looked */
    size_t sent;
    int refs;
};

/* The method table of the last rpc_server_start. */
const rpc_method_t *fake_rpc_methods(size_t *n);

#endif
