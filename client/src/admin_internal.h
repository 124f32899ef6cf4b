#ifndef VARLOG_ADMIN_INTERNAL_H
#define VARLOG_ADMIN_INTERNAL_H

/* The admin handle and one operation's machinery (admin.c), shared with the operations
 * themselves (admin_ops.c). */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <protobuf-c/protobuf-c.h>

#include "log_internal.h"
#include "rpc_client.h"
#include "varlog/admin.h"

#define ADM_PATH(m) "/varlog.admpb.ClusterManager/" m

struct varlog_admin {
    char *address;
    log_sink_t log;
    rpc_client_t *rpc;

    pthread_mutex_t mu;
    pthread_cond_t idle; /* active reached 0 */
    bool closing;
    size_t active; /* calls in progress */
};

/* What a NotFound answer is about. */
typedef enum { NF_OTHER, NF_TOPIC, NF_LOG_STREAM } nf_kind_t;

typedef struct adm_op {
    varlog_admin_t *a;
    char what[128]; /* "seal log stream 2 of topic 1", for the error texts */
    int64_t deadline_ms;
    nf_kind_t nf;
    int32_t topic_id;
} adm_op_t;

/* Names the operation for its error texts ("seal log stream 2 of topic 1"). */
#define ADM_OP_INIT(op, ...) snprintf((op).what, sizeof((op).what), __VA_ARGS__)

/* INVALID_ARG with a text naming what (the operation) unless the id is at least 1. */
varlog_err_t adm_check_id(const char *what, const char *name, int64_t id);
/* INVALID_ARG unless n_total is given, and out when cap > 0. */
varlog_err_t adm_check_list(const char *what, const void *out, size_t cap, const size_t *n_total);

/* Starts an operation: checks the handle and the timeout (the caller checked the rest) and
 * registers the call. nf says what a NotFound answer is about; topic_id is the topic a
 * NF_LOG_STREAM probe asks for. Every OK is paired with op_end. */
varlog_err_t adm_op_begin(adm_op_t *op, varlog_admin_t *a, int64_t timeout_ms, nf_kind_t nf,
                          int32_t topic_id);
void adm_op_end(adm_op_t *op);

/* The operation's call: OK with *resp (the caller frees it), or the mapped error with the
 * thread's error text set and a debug line logged. */
varlog_err_t adm_op_call(adm_op_t *op, const char *method, const ProtobufCMessage *req,
                         const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp);

/* DECODE for an answer that lacks what the operation returns, why in the text. */
varlog_err_t adm_op_bad_answer(adm_op_t *op, const char *why);

#endif
