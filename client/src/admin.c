/* The admin handle (varlog/admin.h) and what every operation does with it: the checks, one
 * blocking unary ClusterManager call on the handle's own transport within the operation's
 * deadline, and the mapping of its status to an error and a text. The operations themselves
 * are in admin_ops.c.
 *
 * Lifecycle as the client's (client.c): calls register on entry, destroy marks the handle
 * closing, cancels the transport's calls and waits for the registered calls to leave before
 * freeing what they use. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin_internal.h"
#include "admpb/admin.pb-c.h"
#include "conf_internal.h"
#include "errtext.h"
#include "wire.h"

/* ---- names ---------------------------------------------------------------------------------- */

const char *varlog_topic_status_name(varlog_topic_status_t status)
{
    switch (status) {
    case VARLOG_TOPIC_RUNNING:
        return "RUNNING";
    case VARLOG_TOPIC_DELETED:
        return "DELETED";
    }
    return "?";
}

const char *varlog_log_stream_status_name(varlog_log_stream_status_t status)
{
    switch (status) {
    case VARLOG_LOG_STREAM_RUNNING:
        return "RUNNING";
    case VARLOG_LOG_STREAM_SEALING:
        return "SEALING";
    case VARLOG_LOG_STREAM_SEALED:
        return "SEALED";
    case VARLOG_LOG_STREAM_DELETED:
        return "DELETED";
    case VARLOG_LOG_STREAM_UNSEALING:
        return "UNSEALING";
    }
    return "?";
}

const char *varlog_storage_node_status_name(varlog_storage_node_status_t status)
{
    switch (status) {
    case VARLOG_STORAGE_NODE_RUNNING:
        return "RUNNING";
    case VARLOG_STORAGE_NODE_DELETED:
        return "DELETED";
    }
    return "?";
}

/* The public values are the wire's, so statuses are copied as numbers; these say so. */
_Static_assert((int)VARLOG_LOG_STREAM_SEALED ==
                       VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED &&
                   (int)VARLOG_LOG_STREAM_UNSEALING ==
                       VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_UNSEALING,
               "log stream status values are varlogpb's");
_Static_assert((int)VARLOG_TOPIC_DELETED == VARLOG__VARLOGPB__TOPIC_STATUS__TOPIC_STATUS_DELETED,
               "topic status values are varlogpb's");
_Static_assert((int)VARLOG_STORAGE_NODE_DELETED ==
                   VARLOG__VARLOGPB__STORAGE_NODE_STATUS__STORAGE_NODE_STATUS_DELETED,
               "storage node status values are varlogpb's");

/* ---- lifecycle ------------------------------------------------------------------------------ */

static varlog_err_t open_failed(varlog_err_t err, char *errstr, size_t errstr_size)
{
    errtext_copy(errstr, errstr_size);
    return err;
}

varlog_err_t varlog_admin_new(const char *address, const varlog_conf_t *conf, varlog_admin_t **out,
                              char *errstr, size_t errstr_size)
{
    if (out)
        *out = NULL;
    if (!address || !out)
        return open_failed(errtext_set(VARLOG_ERR_INVALID_ARG,
                                       "varlog_admin_new: address and out must not be NULL"),
                           errstr, errstr_size);
    if (!address[0] || strpbrk(address, " \t\r\n,"))
        return open_failed(errtext_set(VARLOG_ERR_INVALID_ARG,
                                       "varlog_admin_new: address \"%s\" (give one admin "
                                       "address, host:port; a real cluster's admin listens on "
                                       "varlogadm's --listen, default port 9090)",
                                       address),
                           errstr, errstr_size);
    varlog_conf_t *defaults = NULL;
    if (!conf) {
        conf = defaults = varlog_conf_new();
        if (!conf)
            return open_failed(errtext_set(VARLOG_ERR_NOMEM, "varlog_admin_new: out of memory"),
                               errstr, errstr_size);
    }
    varlog_admin_t *a = calloc(1, sizeof(*a));
    char *addr = strdup(address);
    if (!a || !addr) {
        free(a);
        free(addr);
        varlog_conf_destroy(defaults);
        return open_failed(errtext_set(VARLOG_ERR_NOMEM, "varlog_admin_new: out of memory"), errstr,
                           errstr_size);
    }
    a->address = addr;
    a->log = (log_sink_t){.level = conf->log_level,
                          .debug = conf->debug_contexts,
                          .cb = conf->log_cb,
                          .opaque = conf->log_opaque};
    rpc_client_opts_t opts = {.reconnect_backoff_max_ms = conf->reconnect_backoff_max_ms,
                              .fixed_windows = !conf->grpc_bdp_probe};
    varlog_conf_destroy(defaults);
    varlog_err_t err = rpc_client_new_opts(&opts, &a->rpc);
    if (err != VARLOG_OK) {
        free(a->address);
        free(a);
        return open_failed(errtext_set(err, "varlog_admin_new: could not start the gRPC client: %s",
                                       varlog_err_str(err)),
                           errstr, errstr_size);
    }
    pthread_mutex_init(&a->mu, NULL);
    wire_cond_init(&a->idle);
    log_line(&a->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_CONF, "admin handle for %s", a->address);
    *out = a;
    return VARLOG_OK;
}

void varlog_admin_destroy(varlog_admin_t *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->closing = true;
    pthread_mutex_unlock(&a->mu);
    /* Calls in progress return promptly once their RPCs are cancelled; wait for them to leave
     * before freeing the transport they use. */
    rpc_client_shutdown(a->rpc);
    pthread_mutex_lock(&a->mu);
    while (a->active > 0)
        pthread_cond_wait(&a->idle, &a->mu);
    pthread_mutex_unlock(&a->mu);
    rpc_client_destroy(a->rpc);
    pthread_cond_destroy(&a->idle);
    pthread_mutex_destroy(&a->mu);
    free(a->address);
    free(a);
}

const char *varlog_admin_address(const varlog_admin_t *a)
{
    return a ? a->address : "";
}
/* ---- one operation -------------------------------------------------------------------------- */

static int64_t remaining_ms(int64_t deadline_ms)
{
    int64_t left = deadline_ms - wire_now_ms();
    return left > 0 ? left : 0;
}

static varlog_err_t check_timeout(const char *what, int64_t timeout_ms)
{
    if (timeout_ms == 0 || timeout_ms < -1)
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "%s: timeout_ms %lld (give a positive timeout, or -1 for "
                           "VARLOG_ADMIN_TIMEOUT_DEFAULT_MS)",
                           what, (long long)timeout_ms);
    return VARLOG_OK;
}

varlog_err_t adm_check_id(const char *what, const char *name, int64_t id)
{
    if (id < 1)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: %s id %lld (ids start at 1)", what, name,
                           (long long)id);
    return VARLOG_OK;
}

varlog_err_t adm_check_list(const char *what, const void *out, size_t cap, const size_t *n_total)
{
    if (!n_total || (!out && cap > 0))
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "%s: n_total must not be NULL, nor out when cap > 0", what);
    return VARLOG_OK;
}

/* Starts an operation: checks the handle and the timeout (the caller checked the rest) and
 * registers the call. Every OK is paired with op_end. */
varlog_err_t adm_op_begin(adm_op_t *op, varlog_admin_t *a, int64_t timeout_ms, nf_kind_t nf,
                          int32_t topic_id)
{
    if (!a)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: admin handle is NULL", op->what);
    varlog_err_t err = check_timeout(op->what, timeout_ms);
    if (err != VARLOG_OK)
        return err;
    op->a = a;
    op->nf = nf;
    op->topic_id = topic_id;
    op->deadline_ms =
        wire_deadline_ms(timeout_ms < 0 ? VARLOG_ADMIN_TIMEOUT_DEFAULT_MS : timeout_ms);
    pthread_mutex_lock(&a->mu);
    bool closing = a->closing;
    if (!closing)
        a->active++;
    pthread_mutex_unlock(&a->mu);
    if (closing)
        return errtext_set(VARLOG_ERR_CLOSED, "%s: the admin handle is closing", op->what);
    return VARLOG_OK;
}

void adm_op_end(adm_op_t *op)
{
    varlog_admin_t *a = op->a;
    pthread_mutex_lock(&a->mu);
    if (--a->active == 0)
        pthread_cond_broadcast(&a->idle);
    pthread_mutex_unlock(&a->mu);
}

static bool op_closing(adm_op_t *op)
{
    pthread_mutex_lock(&op->a->mu);
    bool closing = op->a->closing;
    pthread_mutex_unlock(&op->a->mu);
    return closing;
}

/* One unary call within the operation's deadline; the raw result, *resp on OK. */
static varlog_err_t op_rpc(adm_op_t *op, const char *method, const ProtobufCMessage *req,
                           const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                           rpc_status_t *st)
{
    int64_t left = remaining_ms(op->deadline_ms);
    if (left == 0)
        return VARLOG_ERR_TIMED_OUT;
    varlog_err_t err =
        rpc_unary(op->a->rpc, op->a->address, method, req, resp_desc, left, resp, st);
    /* The call had what was left of the operation's deadline: its expiry is the caller's
     * timeout. A DEADLINE_EXCEEDED the server sends of its own (its call to the metadata
     * repository ran out) comes while time is left and stays what it is. */
    if (err == VARLOG_ERR_RPC_DEADLINE_EXCEEDED && remaining_ms(op->deadline_ms) <= 1)
        err = VARLOG_ERR_TIMED_OUT;
    if ((err == VARLOG_ERR_RPC_CANCELLED || err == VARLOG_ERR_CLOSED) && op_closing(op))
        err = VARLOG_ERR_CLOSED;
    return err;
}

/* A NotFound about a call naming a log stream of op->topic_id: whether the topic exists,
 * asked of the server itself; its text only when that answer does not tell. */
static varlog_err_t not_found_which(adm_op_t *op, const rpc_status_t *st)
{
    Varlog__Admpb__GetTopicRequest req = VARLOG__ADMPB__GET_TOPIC_REQUEST__INIT;
    req.topic_id = op->topic_id;
    ProtobufCMessage *resp = NULL;
    rpc_status_t probe;
    rpc_status_init(&probe);
    varlog_err_t err = op_rpc(op, ADM_PATH("GetTopic"), &req.base,
                              &varlog__admpb__get_topic_response__descriptor, &resp, &probe);
    rpc_status_clear(&probe);
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    if (err == VARLOG_OK)
        return VARLOG_ERR_UNKNOWN_LOG_STREAM;
    if (err == VARLOG_ERR_RPC_NOT_FOUND)
        return VARLOG_ERR_UNKNOWN_TOPIC;
    const char *msg = st->message ? st->message : "";
    return strstr(msg, "no such topic") ? VARLOG_ERR_UNKNOWN_TOPIC : VARLOG_ERR_UNKNOWN_LOG_STREAM;
}

/* The operation's call: OK with *resp (the caller frees it), or the mapped error with the
 * thread's error text set. */
varlog_err_t adm_op_call(adm_op_t *op, const char *method, const ProtobufCMessage *req,
                         const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp)
{
    *resp = NULL;
    rpc_status_t st;
    rpc_status_init(&st);
    varlog_err_t rpc_err = op_rpc(op, method, req, resp_desc, resp, &st);
    if (rpc_err == VARLOG_OK) {
        rpc_status_clear(&st);
        return VARLOG_OK;
    }
    varlog_err_t err = rpc_err;
    if (rpc_err == VARLOG_ERR_RPC_NOT_FOUND && op->nf == NF_TOPIC)
        err = VARLOG_ERR_UNKNOWN_TOPIC;
    else if (rpc_err == VARLOG_ERR_RPC_NOT_FOUND && op->nf == NF_LOG_STREAM)
        err = not_found_which(op, &st);
    const char *msg = st.message ? st.message : "";
    if (err == VARLOG_ERR_TIMED_OUT)
        errtext_set(err, "%s at %s: %s (no answer within the timeout)", op->what, op->a->address,
                    varlog_err_name(err));
    else if (err != rpc_err)
        errtext_set(err, "%s at %s: %s (%s: %s)", op->what, op->a->address, varlog_err_name(err),
                    varlog_err_name(rpc_err), msg);
    else
        errtext_set(err, "%s at %s: %s%s%s%s", op->what, op->a->address, varlog_err_name(err),
                    msg[0] ? " (" : "", msg, msg[0] ? ")" : "");
    rpc_status_clear(&st);
    log_line(&op->a->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_RPC, "admin: %s", varlog_last_error());
    return err;
}

/* An answer that lacks what the operation returns. */
varlog_err_t adm_op_bad_answer(adm_op_t *op, const char *why)
{
    varlog_err_t err = errtext_set(VARLOG_ERR_DECODE, "%s at %s: %s: %s", op->what, op->a->address,
                                   varlog_err_name(VARLOG_ERR_DECODE), why);
    log_line(&op->a->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_RPC, "admin: %s", varlog_last_error());
    return err;
}
