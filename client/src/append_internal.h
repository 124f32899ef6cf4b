#ifndef VARLOG_APPEND_INTERNAL_H
#define VARLOG_APPEND_INTERNAL_H

/* A synchronous append call's state (append.c: the call, its retries on the engine), shared
 * with one attempt at it (append_attempt.c), which both the caller's thread and the retry
 * task make. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/slice.h>

#include "client_internal.h"
#include "outcome.h"

/* One append call, shared by the caller and its retry task: reference counted, because a
 * caller that reaches its deadline returns while the task finishes on its own. */
typedef struct append_op {
    atomic_int refs;
    varlog_client_t *c;
    int32_t topic_id;
    int32_t fixed_log_stream; /* 0 = pick one per attempt */
    size_t n;
    grpc_slice body;     /* the records, encoded once as AppendRequest's payload fields and
                          * shared by every attempt's message */
    int64_t deadline_ms; /* -1 = none */
    uint64_t rng;        /* retry jitter, touched by the retry task only */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* The result below is final once done is set: nothing changes it afterwards. */
    bool done;
    bool abandoned;        /* the caller left at its deadline */
    bool maybe;            /* some attempt may have stored the records */
    bool attempt_inflight; /* an attempt may be sending or have sent its request */
    unsigned attempts;
    /* An attempt whose fate is unknown, to be read back from the log before anything else
     * (append.resolve.maybe.appended): its log stream and the LLSN the window starts after.
     * The retry task's. */
    bool unresolved;
    int32_t unresolved_ls;
    uint64_t unresolved_after;
    char unresolved_to[128];
    bool seal_seen; /* a read-back pass saw a replica SEALED or SEALING */
    varlog_err_t err;
    char errtext[384];
    varlog_entry_meta_t metas[]; /* n, filled by the attempt that succeeded */
} append_op_t;

/* What one attempt taught us. */
typedef struct attempt_result {
    append_verdict_t v;
    bool ran;         /* false: the op was over before this attempt could send */
    int32_t ls;       /* the log stream tried; 0 before one was picked */
    uint64_t after;   /* the log stream's confirmed LLSN before the request was sent */
    char target[128]; /* the primary it was sent to */
    char text[384];   /* the failure, for the op's error text */
} attempt_result_t;

/* ---- append_attempt.c ---- */
/* Sends the op's records to one log stream's primary (the op's own, or one picked from the
 * allowlist) and waits for its answer; r says what it taught (r->ran false: the op was over
 * before this attempt could send). Records the failure in the op unless the op is done, and
 * confirms or denies the log stream in the allowlist. Blocks; takes op->mu, never while
 * calling the network. */
void append_attempt(append_op_t *op, attempt_result_t *r);

/* Whether the op waits out a refusal until its deadline rather than counting attempts: the
 * default (append.retries -1) with a timeout. */
bool append_op_waits(const append_op_t *op);

#endif
