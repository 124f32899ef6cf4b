/* The pipelined appender (varlog/appender.h) against the embedded server: each promise of the
 * header is tried here (order, bad input, backpressure, flush, close, calls from callbacks,
 * the client destroyed under open appenders). Faults are in test_appender_faults.c, the
 * allocation count in test_appender_alloc.c.
 *
 * Callbacks run on the appender's thread, where a cmocka assertion cannot stop the test: they
 * note what is wrong (atu_note_bad) and the test thread asserts that nothing was noted. */
#include <ctype.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "appender_test_util.h"
#include "client_fixture.h"
#include "test_support.h"
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

static void tracker_init(tracker_t *t, int32_t topic)
{
    memset(t, 0, sizeof(*t));
    atu_sync_init(&t->sync);
    t->topic = topic;
    for (size_t i = 0; i < 8; i++)
        for (size_t j = 0; j < 16; j++)
            t->last_seq[i][j] = -1;
    atu_bad_reset();
}

/* Waits until at least n callbacks ran; false at the timeout. */
static bool tracker_wait(tracker_t *t, long n, int64_t timeout_ms)
{
    return atu_wait_at_least(&t->sync, &t->callbacks, n, timeout_ms);
}

static long tracker_callbacks(tracker_t *t)
{
    pthread_mutex_lock(&t->sync.mu);
    long n = t->callbacks;
    pthread_mutex_unlock(&t->sync.mu);
    return n;
}

/* Checks what the header promises of every result, records it in the call, counts it. */
static void track(tracker_t *t, call_t *c, const varlog_append_result_t *r)
{
    if (atomic_load(&t->closed_returned))
        atu_note_bad("call %ld of producer %d: callback after close returned", c->seq, c->producer);
    int prev = atomic_fetch_add(&c->cbs, 1);
    if (prev != 0)
        atu_note_bad("call %ld of producer %d: callback number %d", c->seq, c->producer, prev + 1);
    if (r->n != c->n)
        atu_note_bad("call %ld: result n %zu, call had %zu records", c->seq, r->n, c->n);
    c->err = r->err;
    c->outcome = r->outcome;
    if (!r->errtext)
        atu_note_bad("call %ld: errtext NULL", c->seq);
    if (r->err == VARLOG_OK) {
        if (r->outcome != VARLOG_APPENDED)
            atu_note_bad("call %ld: OK with outcome %s", c->seq, varlog_outcome_name(r->outcome));
        if (!r->metas) {
            atu_note_bad("call %ld: OK without metas", c->seq);
        } else {
            c->first = r->metas[0];
            for (size_t i = 0; i < r->n; i++) {
                const varlog_entry_meta_t *m = &r->metas[i];
                if (m->topic_id != t->topic || m->log_stream_id != r->metas[0].log_stream_id ||
                    m->glsn != r->metas[0].glsn + i || m->llsn != r->metas[0].llsn + i ||
                    m->glsn == 0 || m->llsn == 0)
                    atu_note_bad("call %ld: meta %zu (topic %d ls %d glsn %llu llsn %llu) is not "
                                 "consecutive in one log stream",
                                 c->seq, i, m->topic_id, m->log_stream_id,
                                 (unsigned long long)m->glsn, (unsigned long long)m->llsn);
            }
            int32_t ls = r->metas[0].log_stream_id;
            if (c->producer >= 0 && c->producer < 8 && ls >= 0 && ls < 16) {
                if (t->last_seq[c->producer][ls] >= c->seq)
                    atu_note_bad("producer %d ls %d: callback of call %ld after call %ld",
                                 c->producer, ls, c->seq, t->last_seq[c->producer][ls]);
                t->last_seq[c->producer][ls] = c->seq;
            }
        }
        if (r->errtext && r->errtext[0])
            atu_note_bad("call %ld: OK with errtext \"%s\"", c->seq, r->errtext);
    } else {
        if (r->outcome == VARLOG_APPENDED)
            atu_note_bad("call %ld: error %s with outcome APPENDED", c->seq,
                         varlog_err_name(r->err));
        if (r->metas)
            atu_note_bad("call %ld: error %s with metas", c->seq, varlog_err_name(r->err));
        if (r->errtext && !r->errtext[0])
            atu_note_bad("call %ld: error %s without errtext", c->seq, varlog_err_name(r->err));
    }
    if (t->app && (t->max_records || t->max_bytes)) {
        varlog_appender_stats_t s;
        if (varlog_appender_stats(t->app, &s) != VARLOG_OK)
            atu_note_bad("stats failed inside a callback");
        else if ((t->max_records && s.pending_records > t->max_records) ||
                 (t->max_bytes && s.pending_bytes > t->max_bytes))
            atu_note_bad("pending %llu records / %llu bytes above the bounds %llu / %llu",
                         (unsigned long long)s.pending_records, (unsigned long long)s.pending_bytes,
                         (unsigned long long)t->max_records, (unsigned long long)t->max_bytes);
    }
    pthread_mutex_lock(&t->sync.mu);
    t->callbacks++;
    pthread_cond_broadcast(&t->sync.cv);
    pthread_mutex_unlock(&t->sync.mu);
}

/* opaque: a call_t whose tracker is g_tracker (one tracker per test). */
static tracker_t *g_tracker;

static void track_cb(const varlog_append_result_t *r, void *opaque)
{
    track(g_tracker, opaque, r);
}

/* A gate a callback can be held at until the test opens it. */
typedef struct gate {
    atu_sync_t sync;
    bool open;
    long entered;
} gate_t;

static void gate_init(gate_t *g)
{
    memset(g, 0, sizeof(*g));
    atu_sync_init(&g->sync);
}

/* In a callback: announces itself and waits (bounded, so that a broken appender cannot hang
 * the test for ever) until the gate opens. */
static void gate_pass(gate_t *g)
{
    pthread_mutex_lock(&g->sync.mu);
    g->entered++;
    pthread_cond_broadcast(&g->sync.cv);
    pthread_mutex_unlock(&g->sync.mu);
    if (!atu_wait_true(&g->sync, &g->open, 4 * cf_wait_bound_ms()))
        atu_note_bad("gate never opened");
}

static bool gate_wait_entered(gate_t *g, long n, int64_t timeout_ms)
{
    return atu_wait_at_least(&g->sync, &g->entered, n, timeout_ms);
}

static void gate_open(gate_t *g)
{
    atu_set_true(&g->sync, &g->open);
}

static gate_t *g_gate;

/* Holds the first callback at g_gate, then tracks as track_cb. */
static void gated_cb(const varlog_append_result_t *r, void *opaque)
{
    gate_pass(g_gate);
    track(g_tracker, opaque, r);
}

/* ---- helpers ---------------------------------------------------------------------------- */

/* Case-insensitive, and '_' matches ' ' ("log_stream_id" mentions "log stream"). */
static bool contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        for (; i < n && hay[i]; i++) {
            char a = (char)tolower((unsigned char)hay[i]),
                 b = (char)tolower((unsigned char)needle[i]);
            if (a == '_')
                a = ' ';
            if (b == '_')
                b = ' ';
            if (a != b)
                break;
        }
        if (i == n)
            return true;
    }
    return false;
}

/* varlog_last_error() names what is wrong: it contains one of the words. */
#define assert_error_mentions_any(a, b)                                                            \
    do {                                                                                           \
        const char *e_ = varlog_last_error();                                                      \
        if (!contains_ci(e_, (a)) && !contains_ci(e_, (b)))                                        \
            fail_msg("varlog_last_error() \"%s\" mentions neither \"%s\" nor \"%s\"", e_, (a),     \
                     (b));                                                                         \
    } while (0)
#define assert_error_mentions(needle) assert_error_mentions_any(needle, needle)

static varlog_appender_t *new_appender(client_fixture_t *f, int32_t topic, int32_t ls)
{
    varlog_appender_t *app = NULL;
    varlog_err_t rc = varlog_appender_new(f->client, topic, ls, &app);
    if (rc != VARLOG_OK)
        fail_msg("varlog_appender_new(%d, %d): %s: %s", topic, ls, varlog_err_name(rc),
                 varlog_last_error());
    assert_non_null(app);
    return app;
}

static varlog_appender_stats_t app_stats(varlog_appender_t *app)
{
    varlog_appender_stats_t s;
    assert_int_equal(varlog_appender_stats(app, &s), VARLOG_OK);
    return s;
}

/* Generous bound on a flush that has only to send what is queued. */
static int64_t flush_bound_ms(void)
{
    return 6 * cf_wait_bound_ms();
}

static void flush_ok(varlog_appender_t *app)
{
    size_t pending = 999;
    varlog_err_t rc = varlog_appender_flush(app, flush_bound_ms(), &pending);
    if (rc != VARLOG_OK)
        fail_msg("flush: %s, %zu pending", varlog_err_name(rc), pending);
    assert_int_equal(pending, 0);
}

/* ---- one test's server, client, tracker, gate and appender -------------------------------- */

typedef struct fixture {
    client_fixture_t f;
    tracker_t t;
    gate_t g;
    varlog_appender_t *app;
} fixture_t;

/* A server with one topic of log_streams, the client configured with the NULL-terminated
 * "name", "value" pairs, the tracker of topic 1 (g_tracker), the gate (g_gate), and app bound
 * to log stream bound_ls (0: topic mode). */
static void fx_start(fixture_t *x, int32_t log_streams, int32_t bound_ls, ...)
{
    va_list ap;
    va_start(ap, bound_ls);
    cf_start_adjusted(&x->f, 1, log_streams, atu_conf_adjust, &ap, NULL);
    va_end(ap);
    tracker_init(&x->t, 1);
    g_tracker = &x->t;
    gate_init(&x->g);
    g_gate = &x->g;
    x->app = new_appender(&x->f, 1, bound_ls);
}

/* Closes app if the test left it open (OK within 1 s), asserts that the callbacks saw nothing
 * wrong, and stops the rest. */
static void fx_stop(fixture_t *x)
{
    x->t.app = NULL;
    if (x->app)
        assert_int_equal(varlog_appender_close(&x->app, 1000), VARLOG_OK);
    atu_assert_nothing_bad();
    atu_sync_destroy(&x->g.sync);
    atu_sync_destroy(&x->t.sync);
    cf_stop(&x->f);
}

/* Calls of one record each, numbered 0..n-1 in append order. */
static void calls_init(call_t *calls, size_t n)
{
    memset(calls, 0, n * sizeof(*calls));
    for (size_t i = 0; i < n; i++) {
        calls[i].n = 1;
        calls[i].seq = (long)i;
    }
}

/* Appends a 16-byte record for each of calls[0..n) with timeout 0: each must be taken. */
static void append_each(varlog_appender_t *app, call_t *calls, size_t n)
{
    varlog_record_t one = cf_record("0123456789abcdef");
    for (size_t i = 0; i < n; i++)
        assert_int_equal(varlog_appender_append(app, &one, 1, 0, track_cb, &calls[i]), VARLOG_OK);
}

/* Each of calls[0..n) had one callback, which said err; a failed call not APPENDED. */
static void assert_settled(call_t *calls, size_t n, varlog_err_t err)
{
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(atomic_load(&calls[i].cbs), 1);
        assert_int_equal(calls[i].err, err);
        if (err != VARLOG_OK)
            assert_int_not_equal(calls[i].outcome, VARLOG_APPENDED);
    }
}

/* Appends a 16-byte record for calls[0], calls[1], ... with timeout 0 until one is refused;
 * returns how many were taken, *rc what ended it (OK when all n were taken). */
static int append_until_refused(varlog_appender_t *app, call_t *calls, int n, varlog_err_t *rc)
{
    varlog_record_t one = cf_record("0123456789abcdef");
    int taken = 0;
    *rc = VARLOG_OK;
    while (taken < n &&
           (*rc = varlog_appender_append(app, &one, 1, 0, track_cb, &calls[taken])) == VARLOG_OK)
        taken++;
    return taken;
}

/* close(timeout_ms), timed; from then on a callback is a violation. */
static varlog_err_t timed_close(fixture_t *x, int64_t timeout_ms, int64_t *took)
{
    int64_t t0 = test_now_ms();
    varlog_err_t rc = varlog_appender_close(&x->app, timeout_ms);
    *took = test_now_ms() - t0;
    atomic_store(&x->t.closed_returned, true);
    return rc;
}

/* Every stored entry of the log stream is a record of a call that got APPENDED at exactly
 * that position; the number of such entries is returned through the walk. */
typedef struct stored_check {
    call_t *calls;
    size_t n_calls;
    size_t seen;
} stored_check_t;

static void stored_visit(void *arg, const varlog_entry_meta_t *m, const void *data, size_t len)
{
    stored_check_t *sc = arg;
    sc->seen++;
    atu_payload_t p;
    if (!atu_stored_payload(m, data, len, sc->n_calls, &p))
        return;
    const call_t *c = &sc->calls[p.call];
    if (c->err != VARLOG_OK) {
        atu_note_bad("call %llu stored at glsn %llu but its callback said %s",
                     (unsigned long long)p.call, (unsigned long long)m->glsn,
                     varlog_err_name(c->err));
        return;
    }
    if (p.index >= c->n || c->first.log_stream_id != m->log_stream_id ||
        c->first.glsn + p.index != m->glsn || c->first.llsn + p.index != m->llsn)
        atu_note_bad("record %u of call %llu stored at ls %d glsn %llu llsn %llu, callback said "
                     "ls %d glsn %llu llsn %llu",
                     p.index, (unsigned long long)p.call, m->log_stream_id,
                     (unsigned long long)m->glsn, (unsigned long long)m->llsn,
                     c->first.log_stream_id, (unsigned long long)c->first.glsn + p.index,
                     (unsigned long long)c->first.llsn + p.index);
}

/* Checks every stored entry of log streams 1..max_ls against the calls; returns the count. */
static size_t check_stored(client_fixture_t *f, int32_t topic, int32_t max_ls, call_t *calls,
                           size_t n_calls)
{
    stored_check_t sc = {calls, n_calls, 0};
    for (int32_t ls = 1; ls <= max_ls; ls++)
        cf_stored_each(f->srv, topic, ls, stored_visit, &sc);
    return sc.seen;
}

/* ---- bad input ------------------------------------------------------------------------ */

static void test_new_refuses_bad_input(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 2, 1, NULL); /* topic 1: log stream 1; topic 2: log stream 2 */
    varlog_appender_t *app = NULL;

    assert_int_equal(varlog_appender_new(NULL, 1, 0, &app), VARLOG_ERR_INVALID_ARG);
    assert_null(app);
    assert_int_equal(varlog_appender_new(f.client, 1, 0, NULL), VARLOG_ERR_INVALID_ARG);
    assert_int_equal(varlog_appender_new(f.client, 0, 0, &app), VARLOG_ERR_INVALID_ARG);
    assert_error_mentions("topic");
    assert_null(app);
    assert_int_equal(varlog_appender_new(f.client, -3, 1, &app), VARLOG_ERR_INVALID_ARG);
    assert_error_mentions("topic");
    assert_int_equal(varlog_appender_new(f.client, 1, -1, &app), VARLOG_ERR_INVALID_ARG);
    assert_error_mentions("log stream");
    assert_null(app);

    /* Unknown ids: one refresh, then a refusal that names the id. */
    uint64_t fetches = cf_stats(f.client).metadata_fetches;
    assert_int_equal(varlog_appender_new(f.client, 77, 0, &app), VARLOG_ERR_UNKNOWN_TOPIC);
    assert_error_mentions("77");
    assert_null(app);
    assert_true(cf_stats(f.client).metadata_fetches > fetches);
    assert_int_equal(varlog_appender_new(f.client, 1, 55, &app), VARLOG_ERR_UNKNOWN_LOG_STREAM);
    assert_error_mentions("55");
    assert_null(app);
    /* Log stream 2 exists, but in topic 2. */
    assert_int_equal(varlog_appender_new(f.client, 1, 2, &app), VARLOG_ERR_UNKNOWN_LOG_STREAM);
    assert_null(app);

    /* An id the client learns only by the refresh is accepted. */
    int32_t ls = 0;
    assert_int_equal(varlog_server_add_log_stream(f.srv, 1, &ls), VARLOG_OK);
    app = new_appender(&f, 1, ls);
    assert_int_equal(varlog_appender_close(&app, 1000), VARLOG_OK);
    assert_null(app);

    /* Creating sends nothing. */
    uint64_t appends = varlog_server_call_count(f.srv, CF_PATH_APPEND);
    app = new_appender(&f, 1, 0);
    varlog_appender_t *app2 = new_appender(&f, 1, 1);
    assert_int_equal(varlog_server_call_count(f.srv, CF_PATH_APPEND), appends);
    assert_int_equal(app_stats(app).streams_opened, 0);
    assert_int_equal(varlog_appender_close(&app, 1000), VARLOG_OK);
    assert_int_equal(varlog_appender_close(&app2, 1000), VARLOG_OK);
    cf_stop(&f);
}

static void test_append_refuses_bad_input(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 1, 1, "append.record.max.bytes", "64", "appender.batch.max.records", "8",
             "appender.batch.max.bytes", "200", "appender.queue.max.records", "100", NULL);
    varlog_appender_t *app = x.app;
    call_t calls[2];
    calls_init(calls, 2);

    char big[65], ok60[60];
    memset(big, 'b', sizeof(big));
    memset(ok60, 'o', sizeof(ok60));
    varlog_record_t one = cf_record("x");
    varlog_record_t empty3[3] = {cf_record("a"), {"", 0}, cf_record("c")};
    varlog_record_t oversized[2] = {cf_record("a"), {big, sizeof(big)}};
    varlog_record_t nine[9];
    for (size_t i = 0; i < 9; i++)
        nine[i] = cf_record("r");
    varlog_record_t bytes240[4];
    for (size_t i = 0; i < 4; i++)
        bytes240[i] = (varlog_record_t){ok60, sizeof(ok60)};

    assert_int_equal(varlog_appender_append(NULL, &one, 1, 0, track_cb, &calls[0]),
                     VARLOG_ERR_INVALID_ARG);
    assert_int_equal(varlog_appender_append(app, NULL, 1, 0, track_cb, &calls[0]),
                     VARLOG_ERR_INVALID_ARG);
    assert_int_equal(varlog_appender_append(app, &one, 1, 0, NULL, &calls[0]),
                     VARLOG_ERR_INVALID_ARG);
    assert_error_mentions_any("callback", "cb");
    assert_int_equal(varlog_appender_append(app, &one, 0, 0, track_cb, &calls[0]),
                     VARLOG_ERR_INVALID_ARG);
    assert_int_equal(varlog_appender_append(app, empty3, 3, 0, track_cb, &calls[0]),
                     VARLOG_ERR_INVALID_ARG);
    assert_error_mentions("empty");
    assert_error_mentions("record 1");
    assert_int_equal(varlog_appender_append(app, oversized, 2, 0, track_cb, &calls[0]),
                     VARLOG_ERR_INVALID_ARG);
    assert_error_mentions("append.record.max.bytes");
    assert_int_equal(varlog_appender_append(app, nine, 9, 0, track_cb, &calls[0]),
                     VARLOG_ERR_INVALID_ARG);
    assert_error_mentions("appender.batch.max.records");
    assert_int_equal(varlog_appender_append(app, bytes240, 4, 0, track_cb, &calls[0]),
                     VARLOG_ERR_INVALID_ARG);
    assert_error_mentions("appender.batch.max.bytes");
    assert_int_equal(varlog_appender_append(app, &one, 1, -2, track_cb, &calls[0]),
                     VARLOG_ERR_INVALID_ARG);
    assert_error_mentions("timeout");

    /* None of them queued anything or will ever call back. */
    varlog_appender_stats_t s = app_stats(app);
    assert_int_equal(s.pending_calls, 0);
    assert_int_equal(s.queue_full, 0);

    /* The appender keeps working: exactly the limits are accepted. */
    calls[0].n = 8;
    assert_int_equal(varlog_appender_append(app, nine, 8, 0, track_cb, &calls[0]), VARLOG_OK);
    varlog_record_t bytes180[3] = {{ok60, 60}, {ok60, 60}, {ok60, 60}};
    calls[1].n = 3;
    assert_int_equal(varlog_appender_append(app, bytes180, 3, -1, track_cb, &calls[1]), VARLOG_OK);
    flush_ok(app);
    assert_int_equal(tracker_callbacks(&x.t), 2);
    assert_settled(calls, 2, VARLOG_OK);
    assert_int_equal(calls[1].first.glsn, calls[0].first.glsn + 8);
    assert_int_equal(varlog_appender_close(&x.app, 1000), VARLOG_OK);
    atu_assert_nothing_bad();
    /* Rejected calls never call back, not even at close. */
    assert_int_equal(tracker_callbacks(&x.t), 2);
    fx_stop(&x);
}

static void test_null_handles(void **state)
{
    (void)state;
    varlog_appender_stats_t s;
    size_t pending = 7;
    assert_int_equal(varlog_appender_stats(NULL, &s), VARLOG_ERR_INVALID_ARG);
    assert_int_equal(varlog_appender_flush(NULL, 0, &pending), VARLOG_ERR_INVALID_ARG);
    assert_int_equal(varlog_appender_close(NULL, 0), VARLOG_OK);
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_close(&app, 0), VARLOG_OK);

    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    app = new_appender(&f, 1, 1);
    assert_int_equal(varlog_appender_stats(app, NULL), VARLOG_ERR_INVALID_ARG);
    /* still_pending is optional. */
    assert_int_equal(varlog_appender_flush(app, 1000, NULL), VARLOG_OK);
    assert_int_equal(varlog_appender_close(&app, 1000), VARLOG_OK);
    assert_null(app);
    cf_stop(&f);
}

/* ---- basic behaviour --------------------------------------------------------------------- */

static void test_bound_basic(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 2, 2, NULL);
    varlog_appender_t *app = x.app;
    call_t calls[3];
    memset(calls, 0, sizeof(calls));
    size_t sizes[3] = {1, 3, 2};
    atu_payload_t p[3];
    varlog_record_t r[3];
    for (size_t i = 0; i < 3; i++) {
        calls[i].seq = (long)i;
        calls[i].n = sizes[i];
        atu_fill_records(p, r, sizes[i], 0, i);
        assert_int_equal(varlog_appender_append(app, r, sizes[i], 0, track_cb, &calls[i]),
                         VARLOG_OK);
        atu_scribble(p, sizes[i]);
    }
    flush_ok(app);
    assert_int_equal(tracker_callbacks(&x.t), 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(atomic_load(&calls[i].cbs), 1);
        assert_int_equal(calls[i].err, VARLOG_OK);
        assert_int_equal(calls[i].outcome, VARLOG_APPENDED);
        assert_int_equal(calls[i].first.log_stream_id, 2);
        if (i > 0) {
            assert_int_equal(calls[i].first.glsn, calls[i - 1].first.glsn + sizes[i - 1]);
            assert_int_equal(calls[i].first.llsn, calls[i - 1].first.llsn + sizes[i - 1]);
        }
    }
    assert_int_equal(calls[0].first.llsn, 1);
    assert_int_equal(check_stored(&x.f, 1, 2, calls, 3), 6);
    varlog_appender_stats_t s = app_stats(app);
    assert_int_equal(s.calls_appended, 3);
    assert_int_equal(s.calls_failed, 0);
    assert_int_equal(s.records_appended, 6);
    assert_true(s.batches_sent >= 1);
    assert_int_equal(s.batches_retried, 0);
    assert_true(s.streams_opened >= 1);
    assert_int_equal(s.pending_calls, 0);
    assert_int_equal(s.pending_records, 0);
    assert_int_equal(s.pending_bytes, 0);
    assert_int_equal(s.inflight_batches, 0);
    /* Bound: nothing went to log stream 1. */
    assert_int_equal(cf_stored_each(x.f.srv, 1, 1, NULL, NULL), 0);
    fx_stop(&x);
}

/* ---- order ------------------------------------------------------------------------------ */

#define PRODUCERS 4

typedef struct producer_run {
    varlog_appender_t *app;
    call_t *calls; /* producer p's calls are calls[p * per .. (p + 1) * per) */
    long per;
    int producer;
    /* When max_records is set: the stats after each append stay within these. */
    uint64_t max_records, max_bytes;
    int failures; /* appends that did not return OK */
    int over;     /* stats above the bounds seen by the producer */
} producer_run_t;

static void *producer(void *arg)
{
    producer_run_t *o = arg;
    atu_payload_t p[3];
    varlog_record_t r[3];
    for (long i = 0; i < o->per; i++) {
        uint64_t id = (uint64_t)(o->producer * o->per + i);
        call_t *c = &o->calls[id];
        c->producer = o->producer;
        c->seq = i;
        c->n = (size_t)(1 + (id % 3));
        atu_fill_records(p, r, c->n, o->producer, id);
        if (varlog_appender_append(o->app, r, c->n, -1, track_cb, c) != VARLOG_OK)
            o->failures++;
        atu_scribble(p, c->n);
        varlog_appender_stats_t s;
        if (o->max_records &&
            (varlog_appender_stats(o->app, &s) != VARLOG_OK || s.pending_records > o->max_records ||
             s.pending_bytes > o->max_bytes))
            o->over++;
    }
    return NULL;
}

/* n producers (at most PRODUCERS) append per calls each into calls[0 .. n * per) with timeout
 * -1; every append must be taken, and with max_records set the stats stay within the bounds. */
static void run_producers(varlog_appender_t *app, call_t *calls, long per, int n,
                          uint64_t max_records, uint64_t max_bytes)
{
    assert_true(n <= PRODUCERS);
    producer_run_t runs[PRODUCERS];
    pthread_t th[PRODUCERS];
    for (int p = 0; p < n; p++) {
        runs[p] = (producer_run_t){app, calls, per, p, max_records, max_bytes, 0, 0};
        assert_int_equal(pthread_create(&th[p], NULL, producer, &runs[p]), 0);
    }
    for (int p = 0; p < n; p++) {
        pthread_join(th[p], NULL);
        assert_int_equal(runs[p].failures, 0);
        assert_int_equal(runs[p].over, 0);
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void run_order(int32_t log_streams, int32_t bound_ls)
{
    fixture_t x;
    fx_start(&x, log_streams, bound_ls, NULL);
    long per = test_scale(100000, 50) / PRODUCERS;
    size_t total = (size_t)(per * PRODUCERS);
    call_t *calls = calloc(total, sizeof(*calls));
    assert_non_null(calls);
    run_producers(x.app, calls, per, PRODUCERS, 0, 0);
    flush_ok(x.app);
    assert_int_equal(tracker_callbacks(&x.t), (long)total);
    atu_assert_nothing_bad();

    /* Every callback APPENDED; per producer and log stream, positions increase in append
     * order; the GLSNs of the topic are dense. */
    size_t n_records = 0;
    for (size_t i = 0; i < total; i++) {
        if (atomic_load(&calls[i].cbs) != 1)
            fail_msg("call %zu: %d callbacks", i, atomic_load(&calls[i].cbs));
        if (calls[i].err != VARLOG_OK)
            fail_msg("call %zu: %s", i, varlog_err_name(calls[i].err));
        n_records += calls[i].n;
    }
    uint64_t *glsns = malloc(n_records * sizeof(*glsns));
    assert_non_null(glsns);
    size_t k = 0;
    long used[16] = {0};
    for (int p = 0; p < PRODUCERS; p++) {
        uint64_t last_glsn[16] = {0}, last_llsn[16] = {0};
        for (long i = 0; i < per; i++) {
            const call_t *c = &calls[p * per + i];
            int32_t ls = c->first.log_stream_id;
            assert_true(ls >= 1 && ls <= log_streams);
            if (bound_ls)
                assert_int_equal(ls, bound_ls);
            used[ls]++;
            if (c->first.glsn <= last_glsn[ls] || c->first.llsn <= last_llsn[ls])
                fail_msg("producer %d call %ld: ls %d glsn %llu llsn %llu after glsn %llu llsn "
                         "%llu",
                         p, i, ls, (unsigned long long)c->first.glsn,
                         (unsigned long long)c->first.llsn, (unsigned long long)last_glsn[ls],
                         (unsigned long long)last_llsn[ls]);
            last_glsn[ls] = c->first.glsn + c->n - 1;
            last_llsn[ls] = c->first.llsn + c->n - 1;
            for (size_t j = 0; j < c->n; j++)
                glsns[k++] = c->first.glsn + j;
        }
    }
    qsort(glsns, n_records, sizeof(*glsns), cmp_u64);
    for (size_t i = 1; i < n_records; i++)
        if (glsns[i] != glsns[i - 1] + 1)
            fail_msg("GLSNs not dense: %llu then %llu", (unsigned long long)glsns[i - 1],
                     (unsigned long long)glsns[i]);
    free(glsns);
    if (!bound_ls)
        for (int32_t ls = 1; ls <= log_streams; ls++)
            if (used[ls] == 0)
                fail_msg("topic mode never used log stream %d", ls);
    /* What the server stores is exactly what the callbacks reported. */
    assert_int_equal(check_stored(&x.f, 1, log_streams, calls, total), n_records);
    atu_assert_nothing_bad();
    varlog_appender_stats_t s = app_stats(x.app);
    assert_int_equal(s.calls_appended, total);
    assert_int_equal(s.records_appended, n_records);
    assert_int_equal(s.pending_calls, 0);
    fx_stop(&x);
    free(calls);
}

static void test_order_bound_4_producers(void **state)
{
    (void)state;
    run_order(1, 1);
}

static void test_order_topic_4_producers(void **state)
{
    (void)state;
    run_order(3, 0);
}

/* ---- backpressure ----------------------------------------------------------------------- */

/* After flush(0) sent a lingering batch: waits until its callback is held at the gate. */
static void wait_held(fixture_t *x)
{
    if (gate_wait_entered(&x->g, 1, cf_wait_bound_ms()))
        return;
    varlog_appender_stats_t d = app_stats(x->app);
    fail_msg("flush(0) did not send the lingering batch: %llu calls pending, %llu batches "
             "in flight, %llu sent, %llu streams opened, %ld callbacks",
             (unsigned long long)d.pending_calls, (unsigned long long)d.inflight_batches,
             (unsigned long long)d.batches_sent, (unsigned long long)d.streams_opened,
             tracker_callbacks(&x->t));
}

/* A callback held at a gate keeps its call pending: the queue fills and timeout 0 refuses at
 * once; a timeout waits about that long; -1 waits until the callback returns. */
static void test_queue_full_records(void **state)
{
    (void)state;
    fixture_t x;
    /* linger 60 s: batches leave only on flush, so the records bound (4) is what fills. */
    fx_start(&x, 1, 1, "appender.queue.max.records", "4", "appender.batch.max.records", "4",
             "appender.linger.ms", "60000", NULL);
    varlog_appender_t *app = x.app;
    call_t calls[8];
    calls_init(calls, 8);
    varlog_record_t one = cf_record("0123456789abcdef");

    assert_int_equal(varlog_appender_append(app, &one, 1, 0, gated_cb, &calls[0]), VARLOG_OK);
    size_t pending = 0;
    /* timeout 0 only starts the sending */
    varlog_err_t rc = varlog_appender_flush(app, 0, &pending);
    assert_true(rc == VARLOG_ERR_TIMED_OUT || rc == VARLOG_OK);
    wait_held(&x);
    /* call 0 sits in its callback and still counts */
    for (int i = 1; i < 4; i++)
        assert_int_equal(varlog_appender_append(app, &one, 1, 0, gated_cb, &calls[i]), VARLOG_OK);
    varlog_appender_stats_t s = app_stats(app);
    assert_int_equal(s.pending_calls, 4);
    assert_int_equal(s.pending_records, 4);
    assert_int_equal(s.pending_bytes, 64);

    int64_t t0 = test_now_ms();
    assert_int_equal(varlog_appender_append(app, &one, 1, 0, gated_cb, &calls[4]),
                     VARLOG_ERR_QUEUE_FULL);
    assert_true(test_now_ms() - t0 < 2000);
    assert_int_equal(app_stats(app).queue_full, 1);

    /* flush with a callback held: TIMED_OUT and the pending count, at once for timeout 0 */
    pending = 0;
    t0 = test_now_ms();
    assert_int_equal(varlog_appender_flush(app, 0, &pending), VARLOG_ERR_TIMED_OUT);
    assert_true(test_now_ms() - t0 < cf_wait_bound_ms());
    assert_int_equal(pending, 4);
    pending = 0;
    t0 = test_now_ms();
    assert_int_equal(varlog_appender_flush(app, 200, &pending), VARLOG_ERR_TIMED_OUT);
    int64_t waited = test_now_ms() - t0;
    assert_true(waited >= 190);
    assert_true(waited < 200 + cf_wait_bound_ms());
    assert_int_equal(pending, 4);

    t0 = test_now_ms();
    assert_int_equal(varlog_appender_append(app, &one, 1, 300, gated_cb, &calls[4]),
                     VARLOG_ERR_QUEUE_FULL);
    waited = test_now_ms() - t0;
    if (waited < 290 || waited > 300 + cf_wait_bound_ms())
        fail_msg("append with timeout 300 ms returned QUEUE_FULL after %lld ms", (long long)waited);
    assert_int_equal(app_stats(app).queue_full, 2);
    assert_int_equal(tracker_callbacks(&x.t), 0);

    /* Opening the gate makes room; a -1 append waits for it. */
    gate_open(&x.g);
    assert_int_equal(varlog_appender_append(app, &one, 1, -1, gated_cb, &calls[4]), VARLOG_OK);
    flush_ok(app);
    assert_int_equal(tracker_callbacks(&x.t), 5);
    assert_settled(calls, 5, VARLOG_OK);
    assert_int_equal(atomic_load(&calls[5].cbs), 0);
    fx_stop(&x);
}

static void test_queue_full_bytes(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 1, 1, "appender.queue.max.bytes", "100", "appender.batch.max.bytes", "100",
             "append.record.max.bytes", "100", "appender.linger.ms", "60000", NULL);
    varlog_appender_t *app = x.app;
    call_t calls[4];
    calls_init(calls, 4);
    char buf[30];
    memset(buf, 'y', sizeof(buf));
    varlog_record_t r30 = {buf, sizeof(buf)};
    assert_int_equal(varlog_appender_append(app, &r30, 1, 0, gated_cb, &calls[0]), VARLOG_OK);
    size_t pending = 0;
    (void)varlog_appender_flush(app, 0, &pending);
    wait_held(&x);
    assert_int_equal(varlog_appender_append(app, &r30, 1, 0, gated_cb, &calls[1]), VARLOG_OK);
    assert_int_equal(varlog_appender_append(app, &r30, 1, 0, gated_cb, &calls[2]), VARLOG_OK);
    assert_int_equal(app_stats(app).pending_bytes, 90);
    /* 90 + 30 > 100 */
    assert_int_equal(varlog_appender_append(app, &r30, 1, 0, gated_cb, &calls[3]),
                     VARLOG_ERR_QUEUE_FULL);
    /* ... but 10 bytes fit */
    varlog_record_t r10 = {buf, 10};
    assert_int_equal(varlog_appender_append(app, &r10, 1, 0, gated_cb, &calls[3]), VARLOG_OK);
    assert_int_equal(app_stats(app).pending_bytes, 100);
    gate_open(&x.g);
    flush_ok(app);
    assert_int_equal(tracker_callbacks(&x.t), 4);
    fx_stop(&x);
}

/* With the server stalled, the queue fills from the network side: QUEUE_FULL at once. */
static void test_queue_full_stalled_server(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 1, 1, "appender.queue.max.records", "16", "appender.batch.max.records", "2",
             "appender.linger.ms", "0", NULL);
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 60000), VARLOG_OK);
    call_t calls[32];
    calls_init(calls, 32);
    varlog_err_t rc;
    int64_t t0 = test_now_ms();
    int accepted = append_until_refused(x.app, calls, 32, &rc);
    assert_int_equal(rc, VARLOG_ERR_QUEUE_FULL);
    assert_true(test_now_ms() - t0 < cf_wait_bound_ms());
    assert_true(accepted >= 1 && accepted <= 16);
    varlog_appender_stats_t s = app_stats(x.app);
    assert_true(s.pending_records <= 16);
    assert_int_equal(s.pending_calls, (uint64_t)accepted);
    assert_int_equal(tracker_callbacks(&x.t), 0);
    int64_t took;
    assert_int_equal(timed_close(&x, 100, &took), VARLOG_ERR_TIMED_OUT);
    if (took > 100 + cf_wait_bound_ms())
        fail_msg("close(100) with a stalled server took %lld ms", (long long)took);
    assert_int_equal(tracker_callbacks(&x.t), accepted);
    assert_settled(calls, (size_t)accepted, VARLOG_ERR_CLOSED);
    fx_stop(&x);
}

/* Producers far ahead of the server: pending records and bytes never exceed the bounds. */
static void test_pending_within_bounds(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 2, 0, "appender.queue.max.records", "40", "appender.queue.max.bytes", "512",
             "appender.batch.max.records", "8", "appender.batch.max.bytes", "128",
             "appender.linger.ms", "1", NULL);
    x.t.app = x.app;
    x.t.max_records = 40;
    x.t.max_bytes = 512;
    long per = test_scale(5000, 20);
    call_t *calls = calloc((size_t)(2 * per), sizeof(*calls));
    assert_non_null(calls);
    run_producers(x.app, calls, per, 2, 40, 512);
    flush_ok(x.app);
    assert_int_equal(tracker_callbacks(&x.t), 2 * per);
    assert_settled(calls, (size_t)(2 * per), VARLOG_OK);
    fx_stop(&x);
    free(calls);
}

/* ---- flush ------------------------------------------------------------------------------ */

static void test_flush_ignores_linger(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 1, 1, "appender.linger.ms", "60000", NULL);
    varlog_appender_t *app = x.app;
    call_t calls[10];
    calls_init(calls, 10);
    append_each(app, calls, 10);
    /* linger holds the batch: nothing has been sent yet */
    assert_int_equal(tracker_callbacks(&x.t), 0);
    int64_t t0 = test_now_ms();
    flush_ok(app);
    int64_t took = test_now_ms() - t0;
    if (took > cf_wait_bound_ms())
        fail_msg("flush took %lld ms with linger 60 s", (long long)took);
    assert_int_equal(tracker_callbacks(&x.t), 10);
    for (int i = 0; i < 10; i++)
        assert_int_equal(calls[i].err, VARLOG_OK);
    assert_int_equal(app_stats(app).pending_calls, 0);
    /* Again, after the first flush. */
    call_t more;
    calls_init(&more, 1);
    more.seq = 10;
    append_each(app, &more, 1);
    flush_ok(app);
    assert_int_equal(atomic_load(&more.cbs), 1);
    assert_int_equal(more.first.glsn, calls[9].first.glsn + 1);
    /* close with nothing pending: OK */
    fx_stop(&x);
}

/* A stalled server: flush times out and reports what is pending; the calls go on and
 * complete once the server answers. */
static void test_flush_timeout_stalled_server(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 1, 1, "appender.linger.ms", "0", NULL);
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 1500), VARLOG_OK);
    varlog_appender_t *app = x.app;
    call_t calls[3];
    calls_init(calls, 3);
    append_each(app, calls, 3);
    size_t pending = 0;
    int64_t t0 = test_now_ms();
    assert_int_equal(varlog_appender_flush(app, 100, &pending), VARLOG_ERR_TIMED_OUT);
    int64_t took = test_now_ms() - t0;
    assert_true(took >= 95);
    assert_true(took < 100 + cf_wait_bound_ms());
    /* (a loaded machine may have run callbacks since flush returned) */
    assert_true(pending >= 1 && pending <= 3);
    assert_true(pending >= 3 - (size_t)tracker_callbacks(&x.t));
    /* The calls were not abandoned: they complete. */
    flush_ok(app);
    assert_settled(calls, 3, VARLOG_OK);
    fx_stop(&x);
}

/* ---- close ------------------------------------------------------------------------------ */

typedef struct closer {
    varlog_appender_t *app;
    int64_t timeout_ms;
    varlog_err_t rc;
    bool done;
    tracker_t *t;
} closer_t;

static void *close_thread(void *arg)
{
    closer_t *c = arg;
    c->rc = varlog_appender_close(&c->app, c->timeout_ms);
    atomic_store(&c->t->closed_returned, true);
    return NULL;
}

/* Close stops intake at once (even while it waits for callbacks), settles what was queued
 * before it, and returns only after the last callback. */
static void test_close_stops_intake(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 1, 1, "appender.linger.ms", "0", NULL);
    varlog_appender_t *app = x.app;
    x.app = NULL; /* the closing thread's */
    enum { N = 4096 };
    call_t *calls = malloc(N * sizeof(*calls));
    assert_non_null(calls);
    calls_init(calls, N);
    varlog_record_t one = cf_record("0123456789abcdef");
    assert_int_equal(varlog_appender_append(app, &one, 1, 0, gated_cb, &calls[0]), VARLOG_OK);
    assert_true(gate_wait_entered(&x.g, 1, cf_wait_bound_ms()));
    assert_int_equal(varlog_appender_append(app, &one, 1, 0, gated_cb, &calls[1]), VARLOG_OK);

    closer_t c = {app, -1, VARLOG_ERR_INTERNAL, false, &x.t};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, close_thread, &c), 0);
    /* Until close began, appends are taken; then CLOSED. The callback held at the gate keeps
     * close from returning, so app stays valid meanwhile. */
    int used = 2;
    varlog_err_t rc = VARLOG_OK, other = VARLOG_OK;
    int64_t t0 = test_now_ms();
    while (used < N && test_now_ms() - t0 < cf_wait_bound_ms()) {
        rc = varlog_appender_append(app, &one, 1, 0, gated_cb, &calls[used]);
        if (rc == VARLOG_ERR_CLOSED)
            break;
        if (rc == VARLOG_OK)
            used++;
        else
            other = rc;
        /* give the closing thread its turn */
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    char closed_text[256];
    snprintf(closed_text, sizeof(closed_text), "%s", varlog_last_error());
    /* Close waits for the held callback. */
    bool returned_early = atomic_load(&x.t.closed_returned);
    gate_open(&x.g);
    pthread_join(th, NULL);
    assert_int_equal(other, VARLOG_OK);
    assert_int_equal(rc, VARLOG_ERR_CLOSED);
    if (!contains_ci(closed_text, "clos"))
        fail_msg("CLOSED with varlog_last_error() \"%s\"", closed_text);
    assert_false(returned_early);
    assert_null(c.app);
    /* flush -1: every call queued before close was settled by the flush */
    assert_int_equal(c.rc, VARLOG_OK);
    assert_int_equal(tracker_callbacks(&x.t), used);
    assert_settled(calls, (size_t)used, VARLOG_OK);
    assert_int_equal(atomic_load(&calls[used].cbs), 0);
    fx_stop(&x);
    free(calls);
}

/* Leftovers: with linger 60 s and close(0), queued calls fail with CLOSED and NOT_APPENDED
 * through their callbacks before close returns; none runs after. */
static void test_close_fails_leftovers(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 1, 1, "appender.linger.ms", "60000", NULL);
    /* Nothing reaches the server in time: every request is held 60 s. */
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 60000), VARLOG_OK);
    call_t calls[5];
    calls_init(calls, 5);
    append_each(x.app, calls, 5);
    int64_t took;
    varlog_err_t rc = timed_close(&x, 0, &took);
    assert_int_equal(rc, VARLOG_ERR_TIMED_OUT);
    assert_null(x.app);
    if (took > cf_wait_bound_ms())
        fail_msg("close(0) took %lld ms", (long long)took);
    assert_int_equal(tracker_callbacks(&x.t), 5);
    /* queued (lingering) calls were certainly not sent, unless close(0)'s flush began sending
     * them: then MAYBE_APPENDED */
    assert_settled(calls, 5, VARLOG_ERR_CLOSED);
    /* No callback later: give a late one the chance to show. */
    assert_false(tracker_wait(&x.t, 6, 300));
    fx_stop(&x);
}

/* A stalled server (60 s): close(300) returns TIMED_OUT within its timeout plus a small
 * bound; in-flight calls end MAYBE_APPENDED, queued ones NOT_APPENDED, all CLOSED. */
static void test_close_stalled_server_bounded(void **state)
{
    (void)state;
    fixture_t x;
    /* Four slots (depth 2 in flight, one waiting, one open) of up to 2 records: from 4 to 8
     * calls fit, depending on how the thread groups them. */
    fx_start(&x, 1, 1, "appender.linger.ms", "0", "appender.batch.max.records", "2",
             "appender.pipeline.depth", "2", NULL);
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 60000), VARLOG_OK);
    call_t calls[9];
    calls_init(calls, 9);
    varlog_err_t arc;
    int accepted = append_until_refused(x.app, calls, 9, &arc);
    assert_true(arc == VARLOG_OK || arc == VARLOG_ERR_QUEUE_FULL);
    assert_true(accepted >= 4 && accepted <= 8);
    /* Let the pipeline fill: two requests reach the server. */
    cf_count_wait_t w = {x.f.srv, CF_PATH_APPEND, 0};
    assert_true(test_wait_until(cf_call_count_above, &w, cf_wait_bound_ms()));
    int64_t took;
    varlog_err_t rc = timed_close(&x, 300, &took);
    assert_int_equal(rc, VARLOG_ERR_TIMED_OUT);
    if (took < 290 || took > 300 + cf_wait_bound_ms())
        fail_msg("close(300) with a stalled server took %lld ms", (long long)took);
    assert_int_equal(tracker_callbacks(&x.t), accepted);
    assert_settled(calls, (size_t)accepted, VARLOG_ERR_CLOSED);
    int maybe = 0;
    for (int i = 0; i < accepted; i++)
        maybe += calls[i].outcome == VARLOG_MAYBE_APPENDED;
    /* At most depth (2) requests of up to 2 records were in flight. */
    assert_true(maybe >= 1 && maybe <= 4);
    /* The last calls sat in the waiting and the open slot: certainly not sent. */
    assert_int_equal(calls[accepted - 1].outcome, VARLOG_NOT_APPENDED);
    assert_int_equal(calls[accepted - 2].outcome, VARLOG_NOT_APPENDED);
    assert_false(tracker_wait(&x.t, accepted + 1, 300));
    fx_stop(&x);
}

/* ---- calls from inside callbacks --------------------------------------------------------- */

typedef struct reentry {
    varlog_appender_t *app;
    varlog_err_t flush_rc, close_rc, append_rc;
    call_t inner;
    bool ran;
} reentry_t;

static reentry_t *g_re;

static void reentrant_cb(const varlog_append_result_t *r, void *opaque)
{
    reentry_t *re = g_re;
    if (!re->ran) {
        re->ran = true;
        size_t pending = 0;
        re->flush_rc = varlog_appender_flush(re->app, 1000, &pending);
        varlog_appender_t *a = re->app;
        re->close_rc = varlog_appender_close(&a, 1000);
        if (a != re->app)
            atu_note_bad("close from a callback changed the handle");
        varlog_record_t one = cf_record("from-callback-16");
        re->inner.n = 1;
        re->inner.seq = 1;
        re->append_rc = varlog_appender_append(re->app, &one, 1, 0, track_cb, &re->inner);
    }
    track(g_tracker, opaque, r);
}

static void test_calls_from_callback(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 1, 1, NULL);
    reentry_t re;
    memset(&re, 0, sizeof(re));
    g_re = &re;
    re.app = x.app;
    call_t first;
    calls_init(&first, 1);
    varlog_record_t one = cf_record("0123456789abcdef");
    assert_int_equal(varlog_appender_append(re.app, &one, 1, 0, reentrant_cb, &first), VARLOG_OK);
    assert_true(tracker_wait(&x.t, 2, flush_bound_ms()));
    flush_ok(re.app);
    assert_true(re.ran);
    assert_int_equal(re.flush_rc, VARLOG_ERR_STATE);
    assert_int_equal(re.close_rc, VARLOG_ERR_STATE);
    assert_int_equal(re.append_rc, VARLOG_OK);
    assert_int_equal(first.err, VARLOG_OK);
    assert_int_equal(atomic_load(&re.inner.cbs), 1);
    assert_int_equal(re.inner.err, VARLOG_OK);
    assert_int_equal(re.inner.first.glsn, first.first.glsn + 1);
    /* The appender still works after the refused flush and close. */
    assert_int_equal(varlog_appender_close(&x.app, 1000), VARLOG_OK);
    assert_null(x.app);
    fx_stop(&x);
}

/* ---- the client destroyed under open appenders ------------------------------------------ */

static void test_client_destroyed_with_open_appenders(void **state)
{
    (void)state;
    fixture_t x;
    fx_start(&x, 2, 1, "appender.linger.ms", "0", NULL); /* x.app: bound to log stream 1 */
    varlog_appender_t *topic = new_appender(&x.f, 1, 0);
    /* A third one has nothing to settle. */
    varlog_appender_t *idle = new_appender(&x.f, 1, 2);
    assert_int_equal(varlog_server_delay(x.f.srv, CF_PATH_APPEND, 60000), VARLOG_OK);
    call_t calls[12];
    calls_init(calls, 12);
    append_each(x.app, calls, 6);
    append_each(topic, calls + 6, 6);
    int64_t t0 = test_now_ms();
    varlog_client_destroy(x.f.client);
    x.f.client = NULL;
    int64_t took = test_now_ms() - t0;
    if (took > cf_wait_bound_ms())
        fail_msg("client destroy with appenders in flight took %lld ms", (long long)took);
    /* Every call settled with CLOSED by the time destroy returned. */
    assert_int_equal(tracker_callbacks(&x.t), 12);
    assert_settled(calls, 12, VARLOG_ERR_CLOSED);
    /* The handles are valid for close only, which frees them (ASan / valgrind check). */
    (void)varlog_appender_close(&x.app, 0);
    (void)varlog_appender_close(&topic, 1000);
    (void)varlog_appender_close(&idle, -1);
    assert_null(x.app);
    assert_null(topic);
    assert_null(idle);
    assert_int_equal(tracker_callbacks(&x.t), 12);
    fx_stop(&x);
}

/* An optional argument runs only the tests whose names match it (cmocka's pattern). */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_refuses_bad_input),
        cmocka_unit_test(test_append_refuses_bad_input),
        cmocka_unit_test(test_null_handles),
        cmocka_unit_test(test_bound_basic),
        cmocka_unit_test(test_order_bound_4_producers),
        cmocka_unit_test(test_order_topic_4_producers),
        cmocka_unit_test(test_queue_full_records),
        cmocka_unit_test(test_queue_full_bytes),
        cmocka_unit_test(test_queue_full_stalled_server),
        cmocka_unit_test(test_pending_within_bounds),
        cmocka_unit_test(test_flush_ignores_linger),
        cmocka_unit_test(test_flush_timeout_stalled_server),
        cmocka_unit_test(test_close_stops_intake),
        cmocka_unit_test(test_close_fails_leftovers),
        cmocka_unit_test(test_close_stalled_server_bounded),
        cmocka_unit_test(test_calls_from_callback),
        cmocka_unit_test(test_client_destroyed_with_open_appenders),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
