#ifndef VARLOG_CLUSTER_ACCT_H
#define VARLOG_CLUSTER_ACCT_H

/* What every cluster scenario checks against a read-back of the log. Each record carries
 * "<tag>-p<producer>-<seq>-" and padding derived from those, so an entry read back names
 * the append call that wrote it and its bytes can be recomputed. After the run:
 *   - every APPENDED record is in the log exactly once, at the GLSN/LLSN/log stream its
 *     callback reported, with its bytes;
 *   - no NOT_APPENDED record is stored; a MAYBE_APPENDED one at most once (counted);
 *   - every accepted call got its outcome;
 *   - a subscriber (acct_sub_t) delivered each GLSN of its range once, in order, without a
 *     gap, with the bytes the read-back holds there.
 * Entries of other writers (other tags, varlog-cli demo, varlogcli) are counted and left
 * alone, so scenarios can share a topic. */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "varlog/varlog.h"

#define ACCT_MAX_PRODUCERS 8

typedef enum acct_state {
    ACCT_UNSENT = 0, /* seq not used, or refused up front (QUEUE_FULL): must not be stored */
    ACCT_PENDING,    /* accepted, no outcome yet */
    ACCT_APPENDED,
    ACCT_NOT_APPENDED,
    ACCT_MAYBE,
} acct_state_t;

typedef struct acct_rec {
    uint8_t state;
    uint8_t seen; /* times found in the read-back */
    int32_t log_stream_id;
    uint64_t glsn, llsn;
} acct_rec_t;

typedef struct acct {
    pthread_mutex_t mu;
    char tag[24];
    size_t rec_len;
    long cap; /* seqs per producer */
    acct_rec_t *recs[ACCT_MAX_PRODUCERS];
    long counts[5]; /* by acct_state_t */
} acct_t;

typedef struct acct_report {
    long appended, not_appended, maybe, maybe_stored, foreign, entries;
    uint64_t first_glsn, last_glsn; /* of the read-back */
    long problems;
    char first_problem[512];
} acct_report_t;

/* tag must be unique within the topic's life (e.g. the scenario's name and the pid). */
void acct_init(acct_t *a, const char *tag, long cap_per_producer, size_t rec_len);
void acct_free(acct_t *a);

/* Fills buf (a->rec_len bytes) with the payload of (producer, seq). */
void acct_payload(const acct_t *a, int producer, long seq, char *buf);

/* The call of records seq .. seq+n-1 was accepted (its callback is due). */
void acct_sent(acct_t *a, int producer, long seq, size_t n);
/* Its outcome: metas[i] for record seq+i on APPENDED. */
void acct_outcome(acct_t *a, int producer, long seq, size_t n, varlog_err_t err,
                  varlog_outcome_t outcome, const varlog_entry_meta_t *metas);
long acct_count(acct_t *a, acct_state_t s);

/* A read-back: every entry of the topic with GLSN in [1, last], where last is the highest
 * a peek of the topic's log streams shows (refreshing the client's metadata first). */
typedef struct acct_log {
    uint64_t first, n; /* GLSNs first .. first+n-1 */
    uint64_t *hash;    /* payload hash per GLSN */
} acct_log_t;

/* Reads the topic back and checks a's records against it; rep says what was found. The
 * log (optional) keeps the hashes for acct_sub_verify. False when the read failed or a
 * check did not hold (rep->first_problem says which). */
bool acct_verify(acct_t *a, varlog_client_t *client, int32_t topic, acct_report_t *rep,
                 acct_log_t *log);
void acct_log_free(acct_log_t *log);
void acct_report_print(const char *what, const acct_report_t *rep);

/* The highest GLSN of the topic, by peeking every log stream; 0 when empty. */
bool acct_topic_last_glsn(varlog_client_t *client, int32_t topic, uint64_t *last);

/* A tailing subscriber on its own thread (iterator form), checking order on the fly. */
typedef struct acct_sub {
    varlog_subscription_t *sub;
    pthread_t thread;
    pthread_mutex_t mu;
    uint64_t begin, next; /* next GLSN expected */
    uint64_t *hash;       /* per GLSN from begin */
    size_t cap;
    long problems;
    char first_problem[512];
    varlog_err_t end_err;
    bool stop, done;
} acct_sub_t;

bool acct_sub_start(acct_sub_t *s, varlog_client_t *client, int32_t topic, uint64_t begin,
                    size_t cap);
/* Waits until it delivered every GLSN up to last (bounded), stops it, and checks what it
 * delivered against the read-back. */
bool acct_sub_finish(acct_sub_t *s, const acct_log_t *log, uint64_t last, int64_t timeout_ms,
                     char *why, size_t cap);
uint64_t acct_sub_next(acct_sub_t *s);
void acct_sub_free(acct_sub_t *s);

uint64_t acct_hash(const void *data, size_t len);

#endif
