/* Lifecycle of the embedded server: start, stop and restart on the same port keeping the
 * log, destroy; and the topology part of the public API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server_internal.h"

#define DEFAULT_MAX_BYTES (1ULL << 30)
#define LISTEN_HOST "127.0.0.1"

/* Accepts "127.0.0.1:PORT" only; the port goes to *port. */
static bool parse_listen(const char *addr, int *port)
{
    const char *prefix = LISTEN_HOST ":";
    size_t plen = strlen(prefix);
    if (strncmp(addr, prefix, plen) != 0 || addr[plen] == '\0')
        return false;
    long v = 0;
    for (const char *p = addr + plen; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (*p - '0');
        if (v > 65535)
            return false;
    }
    *port = (int)v;
    return true;
}

/* life_mu held. */
static varlog_err_t serve_locked(varlog_server_t *srv)
{
    varlog_err_t err = timer_start(&srv->timer);
    if (err != VARLOG_OK)
        return err;
    rpc_server_opts_t o = {srv->listen, srv->methods, M_COUNT};
    err = rpc_server_start(&o, &srv->rpc);
    if (err != VARLOG_OK) {
        timer_stop(&srv->timer);
        srv->rpc = NULL;
    }
    return err;
}

/* life_mu held. The timer goes first so that no delayed response is released into a call
 * the transport is tearing down; what it still held is answered UNAVAILABLE. */
static void halt_locked(varlog_server_t *srv)
{
    timer_stop(&srv->timer);
    rpc_server_stop(srv->rpc);
    srv->rpc = NULL;
}

varlog_err_t varlog_server_start(const varlog_server_opts_t *opts, varlog_server_t **out)
{
    if (!out)
        return VARLOG_ERR_INVALID_ARG;
    *out = NULL;
    if (!opts || opts->topics < 0 || opts->log_streams_per_topic < 0)
        return VARLOG_ERR_INVALID_ARG;
    if (opts->topics > VARLOG_SERVER_MAX_TOPICS ||
        (int64_t)opts->topics * opts->log_streams_per_topic > VARLOG_SERVER_MAX_LOG_STREAMS)
        return VARLOG_ERR_INVALID_ARG;
    const char *listen = opts->listen_address ? opts->listen_address : LISTEN_HOST ":0";
    int port = 0;
    if (strlen(listen) >= 64 || !parse_listen(listen, &port))
        return VARLOG_ERR_INVALID_ARG;
    varlog_server_t *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return VARLOG_ERR_NOMEM;
    varlog_err_t err = store_init(&srv->store, opts->topics, opts->log_streams_per_topic,
                                  opts->max_bytes ? opts->max_bytes : DEFAULT_MAX_BYTES);
    if (err != VARLOG_OK) {
        free(srv);
        return err;
    }
    srv->store.refuse_when_full = opts->refuse_when_full;
    srv->store.log_file = opts->log_file;
    faults_init(&srv->faults);
    timer_init(&srv->timer);
    pthread_mutex_init(&srv->life_mu, NULL);
    pthread_mutex_init(&srv->addr_mu, NULL);
    srv->start_unix = (int64_t)time(NULL);
    for (int i = 0; i < M_COUNT; i++) {
        srv->ctx[i].srv = srv;
        srv->ctx[i].index = i;
    }
    metadata_methods(srv, &srv->methods[M_CLUSTER_INFO], &srv->methods[M_METADATA]);
    log_io_methods(srv, &srv->methods[M_APPEND], &srv->methods[M_SUBSCRIBE],
                   &srv->methods[M_SUBSCRIBE_TO], &srv->methods[M_TRIM],
                   &srv->methods[M_REPLICA_MD]);
    admin_methods(srv, srv->methods);
    snprintf(srv->listen, sizeof(srv->listen), "%s", listen);
    pthread_mutex_lock(&srv->life_mu);
    err = serve_locked(srv);
    if (err == VARLOG_OK) {
        srv->port = rpc_server_port(srv->rpc);
        /* Restarts bind the same port, so clients keep their address. */
        snprintf(srv->listen, sizeof(srv->listen), LISTEN_HOST ":%d", srv->port);
        pthread_mutex_lock(&srv->addr_mu);
        snprintf(srv->address, sizeof(srv->address), LISTEN_HOST ":%d", srv->port);
        pthread_mutex_unlock(&srv->addr_mu);
    }
    pthread_mutex_unlock(&srv->life_mu);
    if (err != VARLOG_OK) {
        varlog_server_destroy(srv);
        return err;
    }
    *out = srv;
    return VARLOG_OK;
}

void server_address(struct varlog_server *srv, char *buf, size_t size)
{
    pthread_mutex_lock(&srv->addr_mu);
    snprintf(buf, size, "%s", srv->address);
    pthread_mutex_unlock(&srv->addr_mu);
}

const char *varlog_server_address(const varlog_server_t *srv)
{
    return srv ? srv->address : "";
}

int varlog_server_port(const varlog_server_t *srv)
{
    return srv ? srv->port : 0;
}

varlog_err_t varlog_server_stop(varlog_server_t *srv)
{
    if (!srv)
        return VARLOG_ERR_INVALID_ARG;
    pthread_mutex_lock(&srv->life_mu);
    bool running = srv->rpc != NULL;
    if (running)
        halt_locked(srv);
    pthread_mutex_unlock(&srv->life_mu);
    return running ? VARLOG_OK : VARLOG_ERR_STATE;
}

varlog_err_t varlog_server_restart(varlog_server_t *srv)
{
    if (!srv)
        return VARLOG_ERR_INVALID_ARG;
    pthread_mutex_lock(&srv->life_mu);
    if (srv->rpc)
        halt_locked(srv);
    varlog_err_t err = serve_locked(srv);
    pthread_mutex_unlock(&srv->life_mu);
    return err;
}

void varlog_server_destroy(varlog_server_t *srv)
{
    if (!srv)
        return;
    pthread_mutex_lock(&srv->life_mu);
    if (srv->rpc)
        halt_locked(srv);
    pthread_mutex_unlock(&srv->life_mu);
    pthread_mutex_destroy(&srv->life_mu);
    pthread_mutex_destroy(&srv->addr_mu);
    timer_destroy(&srv->timer);
    faults_destroy(&srv->faults);
    store_destroy(&srv->store);
    free(srv);
}

/* ---- topology -------------------------------------------------------------------------- */

varlog_err_t varlog_server_add_topic(varlog_server_t *srv, int32_t *topic_id)
{
    if (!srv)
        return VARLOG_ERR_INVALID_ARG;
    pthread_mutex_lock(&srv->store.mu);
    varlog_err_t err = store_add_topic_locked(&srv->store, topic_id);
    pthread_mutex_unlock(&srv->store.mu);
    return err;
}

varlog_err_t varlog_server_add_log_stream(varlog_server_t *srv, int32_t topic_id,
                                          int32_t *log_stream_id)
{
    if (!srv)
        return VARLOG_ERR_INVALID_ARG;
    pthread_mutex_lock(&srv->store.mu);
    varlog_err_t err = store_add_ls_locked(&srv->store, topic_id, log_stream_id);
    pthread_mutex_unlock(&srv->store.mu);
    return err;
}

static varlog_err_t set_sealed(varlog_server_t *srv, int32_t topic_id, int32_t ls_id, bool sealed)
{
    if (!srv)
        return VARLOG_ERR_INVALID_ARG;
    pthread_mutex_lock(&srv->store.mu);
    store_ls_t *ls = store_ls_locked(&srv->store, topic_id, ls_id);
    if (ls)
        store_set_sealed_locked(&srv->store, ls, sealed);
    pthread_mutex_unlock(&srv->store.mu);
    return ls ? VARLOG_OK : VARLOG_ERR_RPC_NOT_FOUND;
}

varlog_err_t varlog_server_seal(varlog_server_t *srv, int32_t topic_id, int32_t log_stream_id)
{
    return set_sealed(srv, topic_id, log_stream_id, true);
}

varlog_err_t varlog_server_unseal(varlog_server_t *srv, int32_t topic_id, int32_t log_stream_id)
{
    return set_sealed(srv, topic_id, log_stream_id, false);
}

uint64_t varlog_server_applied_index(varlog_server_t *srv)
{
    if (!srv)
        return 0;
    pthread_mutex_lock(&srv->store.mu);
    uint64_t v = srv->store.applied_index;
    pthread_mutex_unlock(&srv->store.mu);
    return v;
}

uint64_t varlog_server_stored_bytes(varlog_server_t *srv)
{
    if (!srv)
        return 0;
    pthread_mutex_lock(&srv->store.mu);
    uint64_t v = srv->store.bytes;
    pthread_mutex_unlock(&srv->store.mu);
    return v;
}

uint64_t varlog_server_resident_bytes(varlog_server_t *srv)
{
    if (!srv)
        return 0;
    pthread_mutex_lock(&srv->store.mu);
    uint64_t v = store_resident_bytes_locked(&srv->store);
    pthread_mutex_unlock(&srv->store.mu);
    return v;
}
