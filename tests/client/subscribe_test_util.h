#ifndef VARLOG_SUBSCRIBE_TEST_UTIL_H
#define VARLOG_SUBSCRIBE_TEST_UTIL_H

/* What the subscription tests (test_subscribe*.c) share:
 *   - a log of what was appended, by GLSN (log stream, LLSN, length, payload hash), filled by
 *     producer threads calling varlog_append / varlog_append_to;
 *   - a sink that both forms deliver into (on_entry, or a loop over varlog_subscription_next),
 *     keeping each entry's position and payload hash, and counting on_end / on_error and
 *     handlers that ran after close returned;
 *   - the check that a sink holds exactly the positions [begin, begin + n) once each, in
 *     order, with the payloads that were appended there;
 *   - white-box looks inside a subscription (subscribe_internal.h) for what the public API
 *     cannot show: how many entries it buffers per log stream, whether next sleeps. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "appender_test_util.h"
#include "varlog/client.h"
#include "varlog/server.h"
#include "varlog/subscribe.h"

#define STU_PATH_SUBSCRIBE "/varlog.snpb.LogIO/Subscribe"
#define STU_PATH_SUBSCRIBE_TO "/varlog.snpb.LogIO/SubscribeTo"
#define STU_PATH_TRIM "/varlog.snpb.LogIO/TrimDeprecated"

/* FNV-1a of len bytes. */
uint64_t stu_hash(const void *data, size_t len);

/* ---- the appended log ------------------------------------------------------------------ */

typedef struct stu_rec {
    bool set;
    int32_t ls;
    uint64_t llsn;
    size_t len;
    uint64_t hash;
} stu_rec_t;

typedef struct stu_log {
    pthread_mutex_t mu;
    stu_rec_t *by_glsn; /* [0, cap) */
    size_t cap;
    uint64_t max_glsn; /* largest GLSN recorded */
    long records;      /* records recorded */
} stu_log_t;

void stu_log_init(stu_log_t *l, size_t max_glsn);
void stu_log_free(stu_log_t *l);
/* Records one appended record (notes a violation if the GLSN was recorded already). */
void stu_log_put(stu_log_t *l, const varlog_entry_meta_t *m, const void *data, size_t len);
/* Records stored in log stream ls. */
long stu_log_count_ls(stu_log_t *l, int32_t ls);
/* The GLSN of (ls, llsn), 0 when not recorded. */
uint64_t stu_log_glsn_of(stu_log_t *l, int32_t ls, uint64_t llsn);

/* ---- producers --------------------------------------------------------------------------- */

typedef struct stu_producer {
    varlog_client_t *client;
    int32_t topic;
    int32_t ls;     /* 0: varlog_append (round robin over the topic), else varlog_append_to */
    int id;         /* makes the payloads of producers differ */
    long calls;     /* append calls, of 1 + (i % max_batch) records each */
    int max_batch;  /* 1..8; 0 = 3 */
    size_t rec_len; /* 0: lengths vary between 1 and 64 bytes */
    stu_log_t *log;
    /* results */
    long records;
    int failures;
    varlog_err_t first_err;
    char first_text[256];
    pthread_t th;
} stu_producer_t;

/* Records the calls of p would append (known before they run). */
long stu_producer_records(const stu_producer_t *p);
/* Runs p on this thread / on a new thread; stu_producer_join joins and fails the test if an
 * append failed. */
void stu_produce(stu_producer_t *p);
void stu_producer_start(stu_producer_t *p);
void stu_producer_join(stu_producer_t *p);

/* Appends n records of len bytes (0: varied) to topic (ls 0: round robin) on this thread. */
void stu_append_n(varlog_client_t *client, stu_log_t *log, int32_t topic, int32_t ls, long n,
                  size_t len, int id);

/* ---- the sink ---------------------------------------------------------------------------- */

typedef struct stu_got {
    int32_t topic, ls;
    uint64_t glsn, llsn;
    size_t len;
    uint64_t hash;
} stu_got_t;

typedef struct stu_sink {
    atu_sync_t sync; /* guards what follows unless marked atomic */
    stu_got_t *got;
    long cap;
    long n;            /* entries received */
    long ends, errors; /* on_end / on_error calls */
    varlog_err_t err;  /* on_error's */
    char why[512];     /* on_error's text */
    bool by_llsn;      /* order checked on LLSN (SubscribeTo) */
    bool done;         /* ends + errors > 0 */
    long block_at;     /* on_entry blocks when n reaches it until release (-1: never) */
    bool blocked, release;
    long close_at;              /* on_entry closes sub when n reaches it (-1: never) */
    bool close_in_end;          /* on_end closes sub */
    bool block_after_close;     /* after closing sub at close_at, on_entry blocks until release */
    varlog_subscription_t *sub; /* for close_at / close_in_end; set under sync.mu */
    bool self_closed;           /* the handler's close returned */
    atomic_bool closed;         /* set by the test once varlog_subscription_close returned */
    atomic_long after_close;    /* handler calls that began after that */
    atomic_long in_handler;     /* handlers running now */
} stu_sink_t;

void stu_sink_init(stu_sink_t *s, long cap);
void stu_sink_free(stu_sink_t *s);
/* Handlers delivering into the sink (opaque = the sink). */
varlog_subscribe_handlers_t stu_handlers(stu_sink_t *s);
/* Adds an entry as on_entry does (for the iterator form). */
void stu_sink_add(stu_sink_t *s, const varlog_entry_t *e);
/* Waits (bounded) until the sink holds n entries / saw on_end or on_error. */
bool stu_wait_n(stu_sink_t *s, long n, int64_t timeout_ms);
bool stu_wait_done(stu_sink_t *s, int64_t timeout_ms);
long stu_sink_n(stu_sink_t *s);
/* Closes *sub from the test thread and marks the sink closed once close returned. */
void stu_close(stu_sink_t *s, varlog_subscription_t **sub);

/* Iterator form: calls next until the sink holds want entries, it returns something other
 * than OK / TIMED_OUT, or timeout_ms passes; returns the last result (OK once want reached). */
varlog_err_t stu_drain(varlog_subscription_t *sub, stu_sink_t *s, long want, int64_t timeout_ms);

/* Fails the test unless the sink holds exactly positions [begin, begin + n) of topic in
 * order, each as appended (by GLSN; by LLSN of ls when the sink is by_llsn, GLSN then 0). */
void stu_verify(stu_sink_t *s, stu_log_t *log, int32_t topic, int32_t ls, uint64_t begin, long n);

/* The subscription's counters (fails the test if they cannot be read). */
varlog_subscription_stats_t stu_stats(varlog_subscription_t *sub);

/* Asserts err and a non-empty varlog_last_error() that contains want (NULL: anything). */
void stu_assert_err(varlog_err_t got, varlog_err_t want, const char *want_text, const char *what);

/* ---- server side ------------------------------------------------------------------------- */

/* TrimDeprecated straight to the server (varlog_trim is tested elsewhere). */
void stu_trim_raw(varlog_server_t *srv, int32_t topic, uint64_t glsn);

/* ---- white-box ----------------------------------------------------------------------------- */

/* Per log stream of sub, the entries it holds: received and waiting in the stream plus the
 * merge's head; *n_ls receives the log streams. The consumer must be idle (the test thread
 * in the iterator form, or a handler blocked in on_entry). Returns the largest. */
size_t stu_buffered_max(varlog_subscription_t *sub, size_t *n_ls);

/* One varlog_subscription_next call, for a thread of its own (stu_next_call_main): the
 * caller fills sub and timeout_ms, and reads rc and e once the thread was joined. */
typedef struct stu_next_call {
    varlog_subscription_t *sub;
    int64_t timeout_ms;
    varlog_err_t rc;
    varlog_entry_t e;
} stu_next_call_t;

void *stu_next_call_main(void *call);

/* True while a varlog_subscription_next call sleeps waiting for news. */
bool stu_next_sleeping(varlog_subscription_t *sub);

#endif
