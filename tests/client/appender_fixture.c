#include "appender_fixture.h"

#include <ctype.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "test_support.h"

/* ---- one append call and its callback ---------------------------------------------------- */

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

long tracker_callbacks(tracker_t *t)
{
    pthread_mutex_lock(&t->sync.mu);
    long n = t->callbacks;
    pthread_mutex_unlock(&t->sync.mu);
    return n;
}

void track(tracker_t *t, call_t *c, const varlog_append_result_t *r)
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

tracker_t *g_tracker;

void track_cb(const varlog_append_result_t *r, void *opaque)
{
    track(g_tracker, opaque, r);
}

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

bool gate_wait_entered(gate_t *g, long n, int64_t timeout_ms)
{
    return atu_wait_at_least(&g->sync, &g->entered, n, timeout_ms);
}

void gate_open(gate_t *g)
{
    atu_set_true(&g->sync, &g->open);
}

static gate_t *g_gate;

void gated_cb(const varlog_append_result_t *r, void *opaque)
{
    gate_pass(g_gate);
    track(g_tracker, opaque, r);
}

/* ---- helpers ---------------------------------------------------------------------------- */

bool contains_ci(const char *hay, const char *needle)
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

varlog_appender_t *new_appender(client_fixture_t *f, int32_t topic, int32_t ls)
{
    varlog_appender_t *app = NULL;
    varlog_err_t rc = varlog_appender_new(f->client, topic, ls, &app);
    if (rc != VARLOG_OK)
        fail_msg("varlog_appender_new(%d, %d): %s: %s", topic, ls, varlog_err_name(rc),
                 varlog_last_error());
    assert_non_null(app);
    return app;
}

varlog_appender_stats_t app_stats(varlog_appender_t *app)
{
    varlog_appender_stats_t s;
    assert_int_equal(varlog_appender_stats(app, &s), VARLOG_OK);
    return s;
}

int64_t flush_bound_ms(void)
{
    return 6 * cf_wait_bound_ms();
}

void flush_ok(varlog_appender_t *app)
{
    size_t pending = 999;
    varlog_err_t rc = varlog_appender_flush(app, flush_bound_ms(), &pending);
    if (rc != VARLOG_OK)
        fail_msg("flush: %s, %zu pending", varlog_err_name(rc), pending);
    assert_int_equal(pending, 0);
}

/* ---- one test's server, client, tracker, gate and appender -------------------------------- */

void fx_start(fixture_t *x, int32_t log_streams, int32_t bound_ls, ...)
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

void fx_stop(fixture_t *x)
{
    x->t.app = NULL;
    if (x->app)
        assert_int_equal(varlog_appender_close(&x->app, 1000), VARLOG_OK);
    atu_assert_nothing_bad();
    atu_sync_destroy(&x->g.sync);
    atu_sync_destroy(&x->t.sync);
    cf_stop(&x->f);
}

void calls_init(call_t *calls, size_t n)
{
    memset(calls, 0, n * sizeof(*calls));
    for (size_t i = 0; i < n; i++) {
        calls[i].n = 1;
        calls[i].seq = (long)i;
    }
}

void assert_settled(call_t *calls, size_t n, varlog_err_t err)
{
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(atomic_load(&calls[i].cbs), 1);
        assert_int_equal(calls[i].err, err);
        if (err != VARLOG_OK)
            assert_int_not_equal(calls[i].outcome, VARLOG_APPENDED);
    }
}

int append_until_refused(varlog_appender_t *app, call_t *calls, int n, varlog_err_t *rc)
{
    varlog_record_t one = cf_record("0123456789abcdef");
    int taken = 0;
    *rc = VARLOG_OK;
    while (taken < n &&
           (*rc = varlog_appender_append(app, &one, 1, 0, track_cb, &calls[taken])) == VARLOG_OK)
        taken++;
    return taken;
}

varlog_err_t timed_close(fixture_t *x, int64_t timeout_ms, int64_t *took)
{
    int64_t t0 = test_now_ms();
    varlog_err_t rc = varlog_appender_close(&x->app, timeout_ms);
    *took = test_now_ms() - t0;
    atomic_store(&x->t.closed_returned, true);
    return rc;
}
