#ifndef VARLOG_CLUSTER_WORK_H
#define VARLOG_CLUSTER_WORK_H

/* The load the cluster scenarios put on a cluster: clients opened on its MR addresses, and
 * producer threads appending paced, uniquely tagged records (cluster_acct.h) through a
 * pipelined appender, topic-wide or bound to one log stream, or through synchronous
 * varlog_append / varlog_append_to calls, noting every outcome (and each failure's text). */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster_acct.h"
#include "varlog/varlog.h"

/* A client of mr_addrs; extra is NULL or "name=value" strings ending with NULL. Fails the
 * test (cmocka) when it cannot be opened. */
varlog_client_t *work_client(const char *mr_addrs, const char *const *extra);

typedef struct call_ctx {
    struct producer *p;
    long seq;
    int64_t sent_ms;
    /* A failed call's outcome: err VARLOG_OK until then; errtext malloc'ed (the library's
     * text naming the log stream, node and attempt). */
    varlog_err_t err;
    varlog_outcome_t outcome;
    char *errtext;
} call_ctx_t;

typedef struct producer {
    acct_t *acct;
    int id;
    varlog_appender_t *app;
    pthread_t thread;
    int32_t log_stream_id; /* 0: topic-wide */
    int per_second;
    /* Synchronous mode (producer_start_sync): varlog_append(_to) with this timeout instead
     * of an appender. */
    varlog_client_t *client;
    int32_t topic;
    int64_t sync_timeout_ms;
    bool thread_live; /* started and not joined yet */
    call_ctx_t *ctx;  /* one per seq */
    pthread_mutex_t mu;
    bool stop;
    long next_seq;
    long appended, failed, refused;
    int64_t last_ok_ms;
    int64_t mark_ms;     /* calls sent at or after it count for first_ok_after_mark */
    int64_t first_ok_ms; /* 0 until a call sent after mark_ms was APPENDED */
    char last_err[256];
} producer_t;

/* Starts appending (one record per call) at about per_second calls/s. */
bool producer_start(producer_t *p, acct_t *a, int id, varlog_client_t *client, int32_t topic,
                    int32_t log_stream_id, int per_second);
/* The same load through varlog_append (log_stream_id 0) or varlog_append_to, each call
 * with timeout_ms: one call at a time, at most per_second calls/s (a call that blocked is
 * not made up for by a burst). */
bool producer_start_sync(producer_t *p, acct_t *a, int id, varlog_client_t *client, int32_t topic,
                         int32_t log_stream_id, int per_second, int64_t timeout_ms);
/* Stops appending, waits for the outcomes (flush within timeout_ms) and closes the
 * appender. */
void producer_stop(producer_t *p, int64_t timeout_ms);
void producer_free(producer_t *p);

/* Calls sent from now on count for producer_first_ok_after_mark. */
void producer_mark(producer_t *p);
/* Waits up to timeout_ms until a call sent after the mark was APPENDED; its time (ms on
 * the monotonic clock, 0 if none). */
int64_t producer_await_ok_after_mark(producer_t *p, int64_t timeout_ms);
long producer_appended(producer_t *p);
/* Waits up to timeout_ms until at least n calls were APPENDED. */
bool producer_await_appended(producer_t *p, long n, int64_t timeout_ms);
void producer_print(const producer_t *p, const char *name);

/* The log stream a failed call's text names ("... log stream N ..."), else the producer's
 * bound one, else 0 (unknown). */
int32_t producer_failure_log_stream(const producer_t *p, const call_ctx_t *c);
/* Prints every failed call of p (up to max_lines of them one per line, then how many more)
 * with its error, outcome, the time it was sent (seconds after since_ms) and its text, then
 * one line per distinct (error, outcome, log stream) with its count. After producer_stop. */
void producer_print_failures(const producer_t *p, const char *name, int64_t since_ms,
                             int max_lines);

#endif
