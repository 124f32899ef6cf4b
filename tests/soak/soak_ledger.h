#ifndef VARLOG_SOAK_LEDGER_H
#define VARLOG_SOAK_LEDGER_H

/* The soak's ledger: one entry per append call, what the call said about its records, and
 * what the server holds afterwards.
 *
 * Records carry their identity: a 16-byte header (magic, producer, record index, records of
 * the call, the call's sequence number within its producer) and 0-47 bytes derived from it,
 * so that a stored entry names the call it came from and its bytes can be checked without
 * keeping them. Calls live in chunks that never move, so a call's address is the opaque of
 * its callback for as long as the ledger lives.
 *
 * Callbacks and producer threads report into the ledger (soak_settle); everything else runs
 * on the test thread once every producer is joined and every appender closed. Violations
 * seen off the test thread are noted (soak_note_bad) and asserted on the test thread. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "varlog/client.h"
#include "varlog/server.h"

#define SOAK_PRODUCERS 4
#define SOAK_MAX_BATCH 3 /* records per call: 1..SOAK_MAX_BATCH */
#define SOAK_REC_MAX 64  /* bytes of the longest record */
#define SOAK_MAGIC 0x534f414bu

/* How a call was made. */
typedef enum soak_api {
    SOAK_API_BOUND,  /* varlog_appender_append on an appender bound to a log stream */
    SOAK_API_TOPIC,  /* varlog_appender_append on a topic-wide appender */
    SOAK_API_SYNC,   /* varlog_append */
    SOAK_API_SYNC_TO /* varlog_append_to */
} soak_api_t;
#define SOAK_APIS 4

typedef struct soak_call {
    atomic_uchar outcomes; /* outcomes reported: callbacks, or the sync call's return */
    uint8_t api;           /* soak_api_t */
    uint8_t n;             /* records */
    uint8_t outcome;       /* varlog_outcome_t of the (first) outcome */
    uint8_t refused;       /* the append returned an error: nothing queued, no callback due */
    uint8_t stored[SOAK_MAX_BATCH]; /* copies of each record the server holds */
    int16_t err;                    /* varlog_err_t of the outcome (or of the refusal) */
    int32_t ls;                     /* APPENDED: the reported log stream */
    uint64_t glsn, llsn;            /* APPENDED: the first record's reported position */
} soak_call_t;

/* One stored entry, by GLSN or by LLSN. */
typedef struct soak_pos {
    int32_t ls;
    uint64_t llsn;
    uint64_t hash; /* soak_hash of the payload */
} soak_pos_t;

typedef struct soak_ledger {
    pthread_mutex_t mu; /* chunk tables, the notes and the texts */
    soak_call_t **chunks[SOAK_PRODUCERS];
    size_t n_chunks[SOAK_PRODUCERS];
    atomic_ulong calls[SOAK_PRODUCERS]; /* calls made by each producer */
    atomic_long bad;                    /* violations noted */
    char first_bad[512];
    /* a sample failure text per (err, outcome), for the summary */
    struct {
        int16_t err;
        uint8_t outcome;
        long count;
        char text[200];
    } texts[32];
    size_t n_texts;
    /* filled by soak_read_store */
    soak_pos_t *by_glsn; /* [0, tail): GLSN g at g - 1 */
    uint64_t tail;       /* entries stored = the last GLSN */
    soak_pos_t *ls1;     /* log stream 1 by LLSN: LLSN l at l - 1 */
    uint64_t ls1_n;
    uint64_t foreign; /* stored entries that no call made */
} soak_ledger_t;

void soak_ledger_init(soak_ledger_t *l);
void soak_ledger_free(soak_ledger_t *l);

/* FNV-1a of a payload mixed with its log stream, as the readers compare entries. */
uint64_t soak_hash(int32_t ls, const void *data, size_t len);

/* A new call of producer p with n records made through api: fills recs (and their bytes in
 * buf, SOAK_MAX_BATCH * SOAK_REC_MAX bytes) and returns the call (stable address). Only
 * producer p's thread calls this for p. */
soak_call_t *soak_new_call(soak_ledger_t *l, int p, soak_api_t api, size_t n, varlog_record_t *recs,
                           unsigned char *buf);

/* The call's outcome: from a callback (metas of a success) or a sync call's return. Notes a
 * violation for a second outcome, a success without consecutive positions in one log stream,
 * or a failure without text or with APPENDED. Any thread. */
void soak_settle(soak_ledger_t *l, soak_call_t *c, varlog_err_t err, varlog_outcome_t outcome,
                 size_t n, const varlog_entry_meta_t *metas, const char *errtext);

/* The append refused the call (nothing queued, no callback due). */
void soak_refused(soak_call_t *c, varlog_err_t err);

/* Counts a violation and keeps the first text; any thread. */
void soak_note_bad(soak_ledger_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Walks every entry the server stores for topic's log streams 1..max_ls (white-box,
 * cf_stored_each): checks each names a call and carries its bytes, counts the copies of each
 * record, matches an APPENDED call's reported position, and fills by_glsn (checked dense:
 * every GLSN 1..tail once) and ls1. Test thread, producers stopped. */
void soak_read_store(soak_ledger_t *l, varlog_server_t *srv, int32_t topic, int32_t max_ls);

/* Per API: calls, outcomes, refusals, and MAYBE calls found stored and absent. */
typedef struct soak_tally {
    long calls, appended, not_appended, maybe, maybe_stored, maybe_absent, refused;
    long records_stored;
} soak_tally_t;

/* Checks every call against what the store holds (after soak_read_store): exactly one
 * outcome for every call not refused, none for a refused one; every APPENDED record stored
 * once at its position; nothing of a NOT_APPENDED or refused call stored; a MAYBE call
 * stored once whole or not at all. Notes violations; fills tally[SOAK_APIS]. */
void soak_check_calls(soak_ledger_t *l, soak_tally_t *tally);

/* Prints the sample failure texts, one line each. */
void soak_print_texts(soak_ledger_t *l);

#endif
