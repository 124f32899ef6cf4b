#ifndef VARLOG_APPENDER_TEST_UTIL_H
#define VARLOG_APPENDER_TEST_UTIL_H

/* What the appender's tests (test_appender*.c) share. Callbacks run on the appender's thread,
 * where a cmocka assertion cannot stop the test: they note what is wrong (atu_note_bad) and
 * the test thread asserts that nothing was noted. Records are 16 bytes that name their call,
 * so that what the server stored can be matched with what the callbacks reported. */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "varlog/client.h"
#include "varlog/conf.h"

/* ---- violations seen off the test thread ----------------------------------------------- */

/* Counts a violation and keeps the first one's text; any thread. */
void atu_note_bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* How many violations were noted since the last reset; any thread. */
int atu_bad_count(void);

/* Forgets what was noted (a test's start). */
void atu_bad_reset(void);

/* Fails the running cmocka test with the count and the first text if anything was noted
 * since the last reset or check; test thread only. */
void atu_assert_nothing_bad(void);

/* ---- records -------------------------------------------------------------------------------- */

#define ATU_REC_LEN 16
#define ATU_REC_MAGIC 0x5641524cu /* "VARL" */

typedef struct atu_payload {
    uint32_t magic;
    uint16_t producer;
    uint16_t index; /* record index within its call */
    uint64_t call;  /* index into the test's call table */
} atu_payload_t;
_Static_assert(sizeof(atu_payload_t) == ATU_REC_LEN, "payload is 16 bytes");

/* r[0..n) point at p[0..n), records 0..n-1 of call `call` of producer. */
void atu_fill_records(atu_payload_t *p, varlog_record_t *r, size_t n, int producer, uint64_t call);

/* After an append returned the records are the library's copy: overwrites ours. */
void atu_scribble(atu_payload_t *p, size_t n);

/* For a cf_stored_each walk: true with *out set when a stored entry is one of our records
 * with a call below n_calls; otherwise notes a violation and returns false. */
bool atu_stored_payload(const varlog_entry_meta_t *m, const void *data, size_t len,
                        uint64_t n_calls, atu_payload_t *out);

/* ---- a mutex and a CLOCK_MONOTONIC condition variable ---------------------------------------- */

typedef struct atu_sync {
    pthread_mutex_t mu;
    pthread_cond_t cv;
} atu_sync_t;

void atu_sync_init(atu_sync_t *s);
void atu_sync_destroy(atu_sync_t *s);

/* Wait, under s->mu and bounded by timeout_ms, until *value >= n (resp. *flag): whoever
 * changes the value does so under s->mu and broadcasts s->cv. Returns whether it got there;
 * takes and releases s->mu. */
bool atu_wait_at_least(atu_sync_t *s, const long *value, long n, int64_t timeout_ms);
bool atu_wait_true(atu_sync_t *s, const bool *flag, int64_t timeout_ms);

/* Sets *flag under s->mu and wakes the waiters. */
void atu_set_true(atu_sync_t *s, bool *flag);

/* ---- configuration ------------------------------------------------------------------------- */

/* Sets the "name", "value" pairs of ap (NULL-terminated); fails the running test on an error. */
void atu_conf_set_va(varlog_conf_t *conf, va_list ap);

/* For cf_start_adjusted: arg is a va_list * of pairs as atu_conf_set_va takes them, so that
 * a variadic helper can forward its own pairs. */
void atu_conf_adjust(varlog_conf_t *conf, void *arg);

#endif
