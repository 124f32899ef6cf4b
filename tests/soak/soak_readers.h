#ifndef VARLOG_SOAK_READERS_H
#define VARLOG_SOAK_READERS_H

/* The soak's readers: subscriptions that run while the faults do and keep what they were
 * given, so that it can be compared with what the server stores afterwards.
 *
 * A reader is a handler-form subscription (varlog_subscribe over the topic in GLSN order, or
 * varlog_subscribe_to over one log stream in LLSN order) from position 1 to the end of time.
 * Its on_entry checks the position is the next one (gapless, no repeat) and keeps the entry's
 * log stream, LLSN and payload hash; the test thread waits for a count and compares. */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "soak_ledger.h"
#include "varlog/subscribe.h"

typedef struct soak_reader {
    const char *name;
    soak_ledger_t *l; /* where violations are noted */
    int32_t ls;       /* 0: topic-wide by GLSN; > 0: that log stream by LLSN */
    varlog_subscription_t *sub;
    pthread_mutex_t mu; /* what follows */
    pthread_cond_t cv;  /* n grew, or the subscription ended */
    soak_pos_t *got;    /* [0, n): position i + 1 */
    uint64_t n, cap;
    bool ended; /* on_end or on_error ran */
    varlog_err_t err;
    char why[256];
} soak_reader_t;

/* Subscribes (topic-wide when ls is 0, else to log stream ls) from position 1 for ever.
 * Fails the running test when the subscribe call fails. */
void soak_reader_start(soak_reader_t *r, const char *name, soak_ledger_t *l,
                       varlog_client_t *client, int32_t topic, int32_t ls);

/* Waits, up to timeout_ms, until the reader holds n entries or ended; returns whether it
 * holds n. */
bool soak_reader_wait(soak_reader_t *r, uint64_t n, int64_t timeout_ms);

/* Entries held so far. */
uint64_t soak_reader_n(soak_reader_t *r);

/* The subscription's counters (zeros once closed). */
varlog_subscription_stats_t soak_reader_stats(soak_reader_t *r);

/* Notes a violation unless the reader holds exactly want[0, n) (log stream, LLSN, hash). */
void soak_reader_compare(soak_reader_t *r, const soak_pos_t *want, uint64_t n);

/* Closes the subscription (no handler runs after) and frees what the reader holds. */
void soak_reader_close(soak_reader_t *r);

/* A fresh iterator subscription over GLSNs [1, tail + 1) of topic, each entry compared with
 * the store's by_glsn as it comes; it must end with END within timeout_ms. Returns the
 * entries read. */
uint64_t soak_read_back(soak_ledger_t *l, varlog_client_t *client, int32_t topic,
                        int64_t timeout_ms);

#endif
