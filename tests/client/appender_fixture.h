#ifndef VARLOG_APPENDER_FIXTURE_H
#define VARLOG_APPENDER_FIXTURE_H

/* What test_appender.c and test_appender_close.c share: one test's embedded server, client
 * and appender, and a tracker that checks every callback against what varlog/appender.h
 * promises of a result. Unlike appender_test_util.h it needs the server (client_fixture.h),
 * which is why it is apart: test_appender_alloc links that one with its server in a child.
 *
 * Callbacks run on the appender's thread, where a cmocka assertion cannot stop the test: they
 * note what is wrong (atu_note_bad) and the test thread asserts that nothing was noted. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "appender_test_util.h"
#include "client_fixture.h"
#include "varlog/appender.h"

/* ---- one append call and its callback ---------------------------------------------------- */

typedef struct call {
    atomic_int cbs; /* callbacks run for this call */
    int producer;
    long seq; /* the producer's append order */
    size_t n;
    varlog_err_t err;
    varlog_outcome_t outcome;
    varlog_entry_meta_t first; /* metas[0] on success */
} call_t;

typedef struct tracker {
    atu_sync_t sync;
    long callbacks; /* total, under sync.mu */
    int32_t topic;
    /* Callbacks of one producer's calls to one log stream run in append order. */
    long last_seq[8][16];
    /* Optional: checked against varlog_appender_stats inside each callback. */
    varlog_appender_t *app;
    uint64_t max_records, max_bytes;
    atomic_bool closed_returned; /* set by the test once close returned */
} tracker_t;

long tracker_callbacks(tracker_t *t);

/* Checks what the header promises of every result, records it in the call, counts it. */
void track(tracker_t *t, call_t *c, const varlog_append_result_t *r);

/* opaque: a call_t whose tracker is g_tracker (one tracker per test). */
extern tracker_t *g_tracker;
void track_cb(const varlog_append_result_t *r, void *opaque);

/* A gate a callback can be held at until the test opens it. */
typedef struct gate {
    atu_sync_t sync;
    bool open;
    long entered;
} gate_t;

bool gate_wait_entered(gate_t *g, long n, int64_t timeout_ms);
void gate_open(gate_t *g);

/* Holds the first callback at the fixture's gate, then tracks as track_cb. */
void gated_cb(const varlog_append_result_t *r, void *opaque);

/* ---- helpers ---------------------------------------------------------------------------- */

/* Case-insensitive, and '_' matches ' ' ("log_stream_id" mentions "log stream"). */
bool contains_ci(const char *hay, const char *needle);

varlog_appender_t *new_appender(client_fixture_t *f, int32_t topic, int32_t ls);
varlog_appender_stats_t app_stats(varlog_appender_t *app);

/* Generous bound on a flush that has only to send what is queued. */
int64_t flush_bound_ms(void);
void flush_ok(varlog_appender_t *app);

/* ---- one test's server, client, tracker, gate and appender -------------------------------- */

typedef struct fixture {
    client_fixture_t f;
    tracker_t t;
    gate_t g;
    varlog_appender_t *app;
} fixture_t;

/* A server with one topic of log_streams, the client configured with the NULL-terminated
 * "name", "value" pairs, the tracker of topic 1 (g_tracker), the gate (gated_cb's), and app
 * bound to log stream bound_ls (0: topic mode). */
void fx_start(fixture_t *x, int32_t log_streams, int32_t bound_ls, ...);

/* Closes app if the test left it open (OK within 1 s), asserts that the callbacks saw nothing
 * wrong, and stops the rest. */
void fx_stop(fixture_t *x);

/* Calls of one record each, numbered 0..n-1 in append order. */
void calls_init(call_t *calls, size_t n);

/* Each of calls[0..n) had one callback, which said err; a failed call not APPENDED. */
void assert_settled(call_t *calls, size_t n, varlog_err_t err);

/* Appends a 16-byte record for calls[0], calls[1], ... with timeout 0 until one is refused;
 * returns how many were taken, *rc what ended it (OK when all n were taken). */
int append_until_refused(varlog_appender_t *app, call_t *calls, int n, varlog_err_t *rc);

/* close(timeout_ms), timed; from then on a callback is a violation. */
varlog_err_t timed_close(fixture_t *x, int64_t timeout_ms, int64_t *took);

#endif
