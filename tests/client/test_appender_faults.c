/* The pipelined appender under faults of the embedded server: stream drops, injected
 * failures, delays, sealing, new log streams, a stop and restart. Whatever happens, every
 * append call gets exactly one callback, and what the callbacks said agrees with what the
 * server stored (read back from its store, white-box through cf_stored_each):
 *   - an APPENDED call's records are stored at the positions its callback reported;
 *   - a NOT_APPENDED call's records are not stored (ever: checked after the server stopped);
 *   - with append.retry.maybe.appended false nothing is stored twice, and a MAYBE_APPENDED
 *     call is stored once or not at all, all of its records or none.
 *
 * Callbacks run on the appender's thread, where a cmocka assertion cannot stop the test: they
 * note what is wrong (atu_note_bad) and the test thread asserts that nothing was noted. */
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

/* ---- calls ---------------------------------------------------------------------------------- */

typedef struct call {
    atomic_int cbs;
    long seq;
    size_t n;
    varlog_err_t err;
    varlog_outcome_t outcome;
    varlog_entry_meta_t first;
    int64_t appended_ms; /* when append returned */
    /* filled by the store walk */
    size_t copies[3]; /* stored copies of records 0..n-1 (n <= 3) */
    bool copy_at_reported;
} call_t;

typedef struct run {
    client_fixture_t f;
    int32_t topic;
    varlog_appender_t *app;
    call_t *calls;
    long total;
    long from, to;        /* the producer's next run: calls [from, to) */
    long pause_at;        /* the producer waits there until released; -1: never */
    bool paused, release; /* under sync.mu */
    atomic_long appended; /* calls the producer queued */
    int append_failures;
    varlog_err_t first_failure;
    char first_failure_text[256];
    pthread_t th;
    bool th_running; /* started and not joined */
    atu_sync_t sync; /* guards paused, release and what follows */
    long callbacks;
    long ok, not_appended, maybe;
    long failed;          /* not_appended + maybe */
    long last_ok_seq[16]; /* bound-mode order check, per log stream */
    bool check_order;
} run_t;

static run_t *g_run;
/* Not on a test's stack: the teardown of a failed test still reaches it. */
static run_t run_storage;

static void cb(const varlog_append_result_t *r, void *opaque)
{
    run_t *x = g_run;
    call_t *c = opaque;
    /* an appender a failed test left behind (the teardown closes it) */
    if (!x || c < x->calls || c >= x->calls + x->total)
        return;
    int prev = atomic_fetch_add(&c->cbs, 1);
    if (prev)
        atu_note_bad("call %ld: callback number %d", c->seq, prev + 1);
    if (r->n != c->n)
        atu_note_bad("call %ld: n %zu, expected %zu", c->seq, r->n, c->n);
    c->err = r->err;
    c->outcome = r->outcome;
    if (r->err == VARLOG_OK) {
        if (r->outcome != VARLOG_APPENDED || !r->metas) {
            atu_note_bad("call %ld: OK with outcome %s, metas %p", c->seq,
                         varlog_outcome_name(r->outcome), (const void *)r->metas);
        } else {
            c->first = r->metas[0];
            for (size_t i = 0; i < r->n; i++)
                if (r->metas[i].topic_id != x->topic ||
                    r->metas[i].log_stream_id != r->metas[0].log_stream_id ||
                    r->metas[i].glsn != r->metas[0].glsn + i ||
                    r->metas[i].llsn != r->metas[0].llsn + i)
                    atu_note_bad("call %ld: metas not consecutive in one log stream", c->seq);
        }
    } else {
        if (r->outcome == VARLOG_APPENDED || r->metas)
            atu_note_bad("call %ld: error %s with outcome %s, metas %p", c->seq,
                         varlog_err_name(r->err), varlog_outcome_name(r->outcome),
                         (const void *)r->metas);
        if (!r->errtext || !r->errtext[0])
            atu_note_bad("call %ld: error %s without errtext", c->seq, varlog_err_name(r->err));
    }
    pthread_mutex_lock(&x->sync.mu);
    if (r->err == VARLOG_OK) {
        x->ok++;
        int32_t ls = r->metas ? r->metas[0].log_stream_id : 0;
        if (x->check_order && ls > 0 && ls < 16) {
            if (x->last_ok_seq[ls] >= c->seq)
                atu_note_bad("ls %d: callback of call %ld after call %ld", ls, c->seq,
                             x->last_ok_seq[ls]);
            x->last_ok_seq[ls] = c->seq;
        }
    } else if (r->outcome == VARLOG_NOT_APPENDED) {
        x->not_appended++;
        x->failed++;
    } else {
        x->maybe++;
        x->failed++;
    }
    x->callbacks++;
    pthread_cond_broadcast(&x->sync.cv);
    pthread_mutex_unlock(&x->sync.mu);
}

static bool wait_callbacks(run_t *x, long n, int64_t timeout_ms)
{
    return atu_wait_at_least(&x->sync, &x->callbacks, n, timeout_ms);
}

static void run_start(run_t *x, int32_t log_streams, int32_t bound_ls, long total, ...)
{
    memset(x, 0, sizeof(*x));
    va_list ap;
    va_start(ap, total);
    /* Outcomes as the faults leave them, counted exactly: no read-back of the ambiguous
     * ones (test_ride_out.c has that), which would hold them until their deadline. */
    cf_start_adjusted(&x->f, 1, log_streams, atu_conf_adjust, &ap, "append.resolve.maybe.appended",
                      "false", NULL);
    va_end(ap);
    x->topic = 1;
    atu_sync_init(&x->sync);
    for (int i = 0; i < 16; i++)
        x->last_ok_seq[i] = -1;
    x->check_order = bound_ls > 0;
    x->total = total;
    x->from = 0;
    x->to = total;
    x->pause_at = -1;
    x->calls = calloc((size_t)total, sizeof(*x->calls));
    assert_non_null(x->calls);
    g_run = x;
    varlog_err_t rc = varlog_appender_new(x->f.client, 1, bound_ls, &x->app);
    if (rc != VARLOG_OK)
        fail_msg("varlog_appender_new: %s: %s", varlog_err_name(rc), varlog_last_error());
}

static void *producer(void *arg)
{
    run_t *x = arg;
    atu_payload_t p[3];
    varlog_record_t r[3];
    for (long i = x->from; i < x->to; i++) {
        if (i == x->pause_at) {
            atu_set_true(&x->sync, &x->paused);
            (void)atu_wait_true(&x->sync, &x->release, 8 * cf_wait_bound_ms());
        }
        call_t *c = &x->calls[i];
        c->seq = i;
        c->n = (size_t)(1 + (i % 3));
        atu_fill_records(p, r, c->n, 0, (uint64_t)i);
        varlog_err_t rc = varlog_appender_append(x->app, r, c->n, -1, cb, c);
        if (rc != VARLOG_OK) {
            if (x->append_failures++ == 0) {
                x->first_failure = rc;
                snprintf(x->first_failure_text, sizeof(x->first_failure_text), "%s",
                         varlog_last_error());
            }
            /* no callback will come: count it as seen so that waits end */
            atomic_store(&c->cbs, -1000);
        }
        c->appended_ms = test_now_ms();
        atu_scribble(p, 3);
        atomic_store(&x->appended, i + 1);
    }
    return NULL;
}

typedef struct stored_walk {
    run_t *x;
    size_t entries;
} stored_walk_t;

static void stored_visit(void *arg, const varlog_entry_meta_t *m, const void *data, size_t len)
{
    stored_walk_t *w = arg;
    w->entries++;
    atu_payload_t p;
    if (!atu_stored_payload(m, data, len, (uint64_t)w->x->total, &p))
        return;
    call_t *c = &w->x->calls[p.call];
    /* n <= 3, so that the index fits copies[] */
    if (p.index >= c->n) {
        atu_note_bad("entry glsn %llu: record %u of a call of %zu", (unsigned long long)m->glsn,
                     p.index, c->n);
        return;
    }
    c->copies[p.index]++;
    if (c->err == VARLOG_OK && c->first.log_stream_id == m->log_stream_id &&
        c->first.glsn + p.index == m->glsn && c->first.llsn + p.index == m->llsn)
        c->copy_at_reported = true;
}

typedef struct verdict {
    long ok, not_appended, maybe, maybe_stored;
    size_t stored_records, ok_records;
    long per_ls[16]; /* APPENDED calls per log stream */
} verdict_t;

/* Producer done: flush must settle everything; then the appender closes, the server stops
 * (nothing it still holds can be stored later) and the store is compared with the calls. */
static verdict_t run_finish(run_t *x, pthread_t th, int32_t log_streams, bool maybe_retry)
{
    assert_true(pthread_equal(th, x->th));
    pthread_join(th, NULL);
    x->th_running = false;
    if (x->append_failures)
        fail_msg("%d appends failed, the first with %s: %s", x->append_failures,
                 varlog_err_name(x->first_failure), x->first_failure_text);
    varlog_server_clear_faults(x->f.srv);
    size_t pending = 999;
    varlog_err_t rc = varlog_appender_flush(x->app, 12 * cf_wait_bound_ms(), &pending);
    if (rc != VARLOG_OK)
        fail_msg("flush: %s with %zu calls pending (%ld callbacks of %ld)", varlog_err_name(rc),
                 pending, x->callbacks, x->total);
    assert_int_equal(varlog_appender_close(&x->app, 1000), VARLOG_OK);
    assert_int_equal(varlog_server_stop(x->f.srv), VARLOG_OK);

    verdict_t v;
    memset(&v, 0, sizeof(v));
    /* what the callbacks noted explains a wrong count best */
    if (x->callbacks != x->total)
        atu_assert_nothing_bad();
    for (long i = 0; i < x->total; i++)
        if (atomic_load(&x->calls[i].cbs) != 1)
            fail_msg("call %ld: %d callbacks", i, atomic_load(&x->calls[i].cbs));
    assert_int_equal(x->callbacks, x->total);
    stored_walk_t w = {x, 0};
    for (int32_t ls = 1; ls <= log_streams; ls++)
        cf_stored_each(x->f.srv, x->topic, ls, stored_visit, &w);
    v.stored_records = w.entries;
    for (long i = 0; i < x->total; i++) {
        call_t *c = &x->calls[i];
        size_t c0 = c->copies[0];
        for (size_t j = 1; j < c->n; j++)
            if (c->copies[j] != c0)
                atu_note_bad("call %ld: records stored %zu and %zu times (not atomic)", i, c0,
                             c->copies[j]);
        if (c->err == VARLOG_OK) {
            v.ok++;
            v.ok_records += c->n;
            if (c->first.log_stream_id > 0 && c->first.log_stream_id < 16)
                v.per_ls[c->first.log_stream_id]++;
            if (!c->copy_at_reported)
                atu_note_bad("call %ld: APPENDED at ls %d glsn %llu, not stored there", i,
                             c->first.log_stream_id, (unsigned long long)c->first.glsn);
            if (!maybe_retry && c0 != 1)
                atu_note_bad("call %ld: APPENDED and stored %zu times", i, c0);
        } else if (c->outcome == VARLOG_NOT_APPENDED) {
            v.not_appended++;
            if (c0 != 0)
                atu_note_bad("call %ld: %s NOT_APPENDED but stored %zu times", i,
                             varlog_err_name(c->err), c0);
        } else {
            v.maybe++;
            if (c0)
                v.maybe_stored++;
            if (!maybe_retry && c0 > 1)
                atu_note_bad("call %ld: MAYBE_APPENDED and stored %zu times", i, c0);
        }
    }
    assert_true(v.ok_records <= v.stored_records);
    /* distinct GLSNs among APPENDED calls: copy_at_reported and the per-call copy counts
     * (each stored entry has one GLSN) already imply it when nothing is stored twice */
    atu_assert_nothing_bad();
    print_message("    %ld calls: %ld APPENDED, %ld NOT_APPENDED, %ld MAYBE_APPENDED (%ld of "
                  "them stored); %zu records stored, %zu reported APPENDED\n",
                  x->total, v.ok, v.not_appended, v.maybe, v.maybe_stored, v.stored_records,
                  v.ok_records);
    return v;
}

static void run_free(run_t *x)
{
    cf_stop(&x->f);
    free(x->calls);
    atu_sync_destroy(&x->sync);
    g_run = NULL;
}

static void wait_paused(run_t *x)
{
    assert_true(atu_wait_true(&x->sync, &x->paused, 4 * cf_wait_bound_ms()));
}

static void release(run_t *x)
{
    atu_set_true(&x->sync, &x->release);
}

/* Waits (bounded) until a call failed; false when none did in time. */
static bool wait_failure(run_t *x, int64_t timeout_ms)
{
    return atu_wait_at_least(&x->sync, &x->failed, 1, timeout_ms);
}

static pthread_t start_producer(run_t *x)
{
    assert_int_equal(pthread_create(&x->th, NULL, producer, x), 0);
    x->th_running = true;
    return x->th;
}

/* After a failed test: closes what it left (the client's destroy ends the producer's
 * appends with CLOSED), so that the next test starts clean. */
static int teardown(void **state)
{
    (void)state;
    run_t *x = g_run;
    if (!x)
        return 0;
    release(x);
    varlog_client_destroy(x->f.client);
    x->f.client = NULL;
    if (x->th_running)
        pthread_join(x->th, NULL);
    if (x->app)
        (void)varlog_appender_close(&x->app, 0);
    run_free(x);
    return 0;
}

/* The bound on waiting for a share of the calls to settle while a fault is on; a test goes
 * on when it passes (the verdict then tells what happened). */
static int64_t phase_ms(void)
{
    return 2 * cf_wait_bound_ms();
}

static long calls_for_run(void)
{
    return test_scale(3000, 10);
}

/* ---- stream drops -------------------------------------------------------------------------- */

/* Every Append stream is dropped after 3 answers for a while: the request after them is
 * neither stored nor answered (MAYBE_APPENDED without retry), the calls behind it are sent
 * again on a new stream. */
static void test_stream_drops_bound(void **state)
{
    (void)state;
    run_t *x = &run_storage;
    long total = calls_for_run();
    run_start(x, 1, 1, total, "appender.linger.ms", "0", "appender.batch.max.records", "4",
              "append.retry.backoff.ms", "1", "append.retry.backoff.max.ms", "50", "append.retries",
              "20", NULL);
    /* A drop applies to streams opened after it is set: the first 10 streams each end after
     * 3 answers. */
    assert_int_equal(varlog_server_drop_stream_after(x->f.srv, CF_PATH_APPEND, 3, 10), VARLOG_OK);
    pthread_t th = start_producer(x);
    assert_true(wait_callbacks(x, total / 2, phase_ms()));
    /* the appender reopened its stream after each drop */
    assert_true(varlog_server_call_count(x->f.srv, CF_PATH_APPEND) > 10);
    verdict_t v = run_finish(x, th, 1, false);
    assert_true(v.ok > 0);
    /* the drops reached some requests in flight */
    assert_true(v.maybe > 0);
    run_free(x);
}

/* The same in topic mode with append.retry.maybe.appended: every call ends APPENDED (some
 * perhaps stored twice, which the property allows), NOT_APPENDED never stored. */
static void test_stream_drops_topic_retry_maybe(void **state)
{
    (void)state;
    run_t *x = &run_storage;
    long total = calls_for_run();
    run_start(x, 2, 0, total, "appender.linger.ms", "0", "appender.batch.max.records", "4",
              "append.retry.backoff.ms", "1", "append.retry.backoff.max.ms", "50", "append.retries",
              "50", "append.retry.maybe.appended", "true", "append.deny.ttl.ms", "100", NULL);
    assert_int_equal(varlog_server_drop_stream_after(x->f.srv, CF_PATH_APPEND, 5, 12), VARLOG_OK);
    pthread_t th = start_producer(x);
    assert_true(wait_callbacks(x, total / 2, phase_ms()));
    assert_true(varlog_server_call_count(x->f.srv, CF_PATH_APPEND) > 12);
    verdict_t v = run_finish(x, th, 2, true);
    assert_int_equal(v.ok, total);
    run_free(x);
}

/* ---- injected failures --------------------------------------------------------------------- */

/* Once a fifth, two fifths and three fifths of the calls settled: the next `times` requests
 * fail with UNAVAILABLE, FAILED_PRECONDITION "sealed" and RESOURCE_EXHAUSTED in turn. */
static void inject_failures(run_t *x, long total, int times)
{
    static const struct {
        int code;
        const char *msg;
    } faults[] = {
        {14, "injected: unavailable"}, {9, "sealed"}, {8, "injected: resource exhausted"}};
    for (int i = 0; i < 3; i++) {
        assert_true(wait_callbacks(x, total * (i + 1) / 5, phase_ms()));
        assert_int_equal(
            varlog_server_fail_next(x->f.srv, CF_PATH_APPEND, faults[i].code, faults[i].msg, times),
            VARLOG_OK);
    }
}

/* UNAVAILABLE, FAILED_PRECONDITION "sealed" and RESOURCE_EXHAUSTED end the stream: the
 * calls certainly not stored are retried, nothing is lost or doubled. */
static void test_injected_failures_bound(void **state)
{
    (void)state;
    run_t *x = &run_storage;
    long total = calls_for_run();
    run_start(x, 1, 1, total, "appender.linger.ms", "0", "appender.batch.max.records", "4",
              "append.retry.backoff.ms", "1", "append.retry.backoff.max.ms", "50", "append.retries",
              "20", "append.deny.ttl.ms", "100", NULL);
    pthread_t th = start_producer(x);
    inject_failures(x, total, 3);
    verdict_t v = run_finish(x, th, 1, false);
    /* "sealed" and RESOURCE_EXHAUSTED are refusals before writing: retried, so only the
     * UNAVAILABLE failures (ambiguous when sent) may have cost calls */
    assert_true(v.ok + v.maybe + v.not_appended == total);
    assert_true(v.ok >= total - 3 * 4 * 3);
    run_free(x);
}

/* With retries of ambiguous failures allowed, injected failures cost no call. */
static void test_injected_failures_topic_all_appended(void **state)
{
    (void)state;
    run_t *x = &run_storage;
    long total = calls_for_run();
    run_start(x, 2, 0, total, "appender.linger.ms", "0", "appender.batch.max.records", "4",
              "append.retry.backoff.ms", "1", "append.retry.backoff.max.ms", "50", "append.retries",
              "30", "append.retry.maybe.appended", "true", "append.deny.ttl.ms", "100", NULL);
    pthread_t th = start_producer(x);
    inject_failures(x, total, 4);
    verdict_t v = run_finish(x, th, 2, true);
    assert_int_equal(v.ok, total);
    run_free(x);
}

/* ---- delays ------------------------------------------------------------------------------- */

/* Slow answers (below append.attempt.timeout.ms) change nothing but speed: all APPENDED,
 * each stored once, in order. */
static void test_response_delays(void **state)
{
    (void)state;
    run_t *x = &run_storage;
    long total = test_scale(600, 5);
    run_start(x, 1, 1, total, "appender.linger.ms", "0", "appender.batch.max.records", "8",
              "append.attempt.timeout.ms", "60000", NULL);
    assert_int_equal(varlog_server_delay(x->f.srv, CF_PATH_APPEND, 20), VARLOG_OK);
    pthread_t th = start_producer(x);
    assert_true(wait_callbacks(x, total / 2, 6 * phase_ms()));
    assert_int_equal(varlog_server_delay(x->f.srv, CF_PATH_APPEND, 0), VARLOG_OK);
    verdict_t v = run_finish(x, th, 1, false);
    assert_int_equal(v.ok, total);
    assert_int_equal(v.stored_records, v.ok_records);
    run_free(x);
}

/* Answers later than append.attempt.timeout.ms: the batch ends as on a hung node
 * (MAYBE_APPENDED without retry); the server stores it late, which MAYBE allows. */
static void test_delays_beyond_attempt_timeout(void **state)
{
    (void)state;
    run_t *x = &run_storage;
    long total = test_scale(300, 3);
    run_start(x, 1, 1, total, "appender.linger.ms", "0", "appender.batch.max.records", "8",
              "append.attempt.timeout.ms", "300", "append.retry.backoff.ms", "1",
              "append.retry.backoff.max.ms", "20", NULL);
    /* Slow from the start: on a loaded machine the producer could otherwise be done before
     * a delay set later reached any batch (seen with a load average of 13). */
    assert_int_equal(varlog_server_delay(x->f.srv, CF_PATH_APPEND, 700), VARLOG_OK);
    pthread_t th = start_producer(x);
    /* a batch times out */
    assert_true(wait_failure(x, 6 * phase_ms()));
    assert_int_equal(varlog_server_delay(x->f.srv, CF_PATH_APPEND, 0), VARLOG_OK);
    verdict_t v = run_finish(x, th, 1, false);
    assert_true(v.maybe > 0);
    assert_true(v.ok > 0);
    run_free(x);
}

/* ---- sealing ------------------------------------------------------------------------------- */

/* Bound to a log stream that gets sealed: later calls fail (NOT_APPENDED: the server refuses
 * before writing), each exactly once; unsealed, appends work again. */
static void test_seal_bound(void **state)
{
    (void)state;
    run_t *x = &run_storage;
    long total = calls_for_run();
    run_start(x, 1, 1, total, "appender.linger.ms", "0", "appender.batch.max.records", "4",
              "append.retry.backoff.ms", "1", "append.retry.backoff.max.ms", "20", "append.retries",
              "2", "appender.queue.max.records", "64", NULL);
    x->pause_at = total / 2;
    pthread_t th = start_producer(x);
    assert_true(wait_callbacks(x, total / 4, phase_ms()));
    assert_int_equal(varlog_server_seal(x->f.srv, 1, 1), VARLOG_OK);
    assert_true(wait_failure(x, phase_ms()));
    /* The first half settled, then unsealed: the second half must be stored. */
    wait_paused(x);
    assert_int_equal(varlog_appender_flush(x->app, 12 * cf_wait_bound_ms(), NULL), VARLOG_OK);
    assert_int_equal(varlog_server_unseal(x->f.srv, 1, 1), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(x->f.client, -1), VARLOG_OK);
    release(x);
    verdict_t v = run_finish(x, th, 1, false);
    assert_true(v.not_appended > 0);
    assert_int_equal(v.maybe, 0); /* a seal refuses before writing */
    assert_int_equal(v.stored_records, v.ok_records);
    for (long i = 0; i < total; i++)
        if (x->calls[i].err != VARLOG_OK && x->calls[i].err != VARLOG_ERR_SEALED)
            fail_msg("call %ld failed with %s, expected SEALED", i,
                     varlog_err_name(x->calls[i].err));
    for (long i = total / 2; i < total; i++)
        if (x->calls[i].err != VARLOG_OK)
            fail_msg("call %ld, made after the unseal and a refresh, failed with %s", i,
                     varlog_err_name(x->calls[i].err));
    run_free(x);
}

/* Topic mode, one of two log streams sealed: no call is lost (refused batches move to the
 * other log stream), and every call made after the seal lands on the other one. */
static void test_topic_skips_sealed(void **state)
{
    (void)state;
    run_t *x = &run_storage;
    long total = calls_for_run();
    run_start(x, 2, 0, total, "appender.linger.ms", "0", "appender.batch.max.records", "4",
              "append.retry.backoff.ms", "1", "append.retry.backoff.max.ms", "20", NULL);
    pthread_t th = start_producer(x);
    assert_true(wait_callbacks(x, total / 4, phase_ms()));
    assert_int_equal(varlog_server_seal(x->f.srv, 1, 1), VARLOG_OK);
    long sealed_at = atomic_load(&x->appended); /* calls queued from here on: after the seal */
    verdict_t v = run_finish(x, th, 2, false);
    assert_int_equal(v.ok, total);
    assert_true(v.per_ls[1] > 0);
    assert_true(v.per_ls[2] > 0);
    for (long i = sealed_at + 1; i < total; i++)
        if (x->calls[i].first.log_stream_id != 2)
            fail_msg("call %ld, made after the seal, landed on log stream %d", i,
                     x->calls[i].first.log_stream_id);
    run_free(x);
}

/* Topic mode: a log stream added to the topic is used once the client's metadata shows it. */
static void test_topic_uses_new_log_stream(void **state)
{
    (void)state;
    run_t *x = &run_storage;
    long total = test_scale(400, 4);
    run_start(x, 1, 0, total, "appender.linger.ms", "0", "appender.batch.max.records", "3", NULL);
    /* slow answers keep the first log stream's pipeline full, so that the new one has more
     * room */
    assert_int_equal(varlog_server_delay(x->f.srv, CF_PATH_APPEND, 10), VARLOG_OK);
    /* A first call, while the topic has one log stream: the appender's stream is open. */
    x->to = 1;
    pthread_t th = start_producer(x);
    pthread_join(th, NULL);
    x->th_running = false;
    assert_int_equal(varlog_appender_flush(x->app, cf_wait_bound_ms(), NULL), VARLOG_OK);
    assert_int_equal(x->calls[0].first.log_stream_id, 1);
    int32_t ls = 0;
    assert_int_equal(varlog_server_add_log_stream(x->f.srv, 1, &ls), VARLOG_OK);
    assert_int_equal(ls, 2);
    assert_int_equal(varlog_client_refresh(x->f.client, -1), VARLOG_OK);
    x->from = 1;
    x->to = total;
    th = start_producer(x);
    verdict_t v = run_finish(x, th, 2, false);
    assert_int_equal(v.ok, total);
    if (v.per_ls[2] == 0)
        fail_msg("the new log stream 2 was never used (%ld calls, %ld on log stream 1)", total,
                 v.per_ls[1]);
    run_free(x);
}

/* ---- server stop and restart ---------------------------------------------------------------- */

static void restart_mid_run(int32_t log_streams, int32_t bound_ls)
{
    run_t *x = &run_storage;
    long total = calls_for_run();
    /* retries enough to outlast the channel's reconnect delay after the restart */
    run_start(x, log_streams, bound_ls, total, "appender.linger.ms", "1",
              "appender.batch.max.records", "8", "append.retry.backoff.ms", "5",
              "append.retry.backoff.max.ms", "200", "append.retries", "50",
              "appender.queue.max.records", "200", "append.deny.ttl.ms", "100", NULL);
    pthread_t th = start_producer(x);
    assert_true(wait_callbacks(x, total / 3, phase_ms()));
    assert_int_equal(varlog_server_stop(x->f.srv), VARLOG_OK);
    /* let the outage be felt: something fails or retries run for a while (bounded) */
    (void)wait_failure(x, 1000);
    assert_int_equal(varlog_server_restart(x->f.srv), VARLOG_OK);
    verdict_t v = run_finish(x, th, log_streams, false);
    assert_true(v.ok > 0);
    /* appends work after the restart: the last call got through */
    assert_int_equal(x->calls[total - 1].err, VARLOG_OK);
    run_free(x);
}

static void test_restart_bound(void **state)
{
    (void)state;
    restart_mid_run(1, 1);
}

static void test_restart_topic(void **state)
{
    (void)state;
    restart_mid_run(2, 0);
}

/* An optional argument runs only the tests whose names match it (cmocka's pattern). */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_stream_drops_bound, teardown),
        cmocka_unit_test_teardown(test_stream_drops_topic_retry_maybe, teardown),
        cmocka_unit_test_teardown(test_injected_failures_bound, teardown),
        cmocka_unit_test_teardown(test_injected_failures_topic_all_appended, teardown),
        cmocka_unit_test_teardown(test_response_delays, teardown),
        cmocka_unit_test_teardown(test_delays_beyond_attempt_timeout, teardown),
        cmocka_unit_test_teardown(test_seal_bound, teardown),
        cmocka_unit_test_teardown(test_topic_skips_sealed, teardown),
        cmocka_unit_test_teardown(test_topic_uses_new_log_stream, teardown),
        cmocka_unit_test_teardown(test_restart_bound, teardown),
        cmocka_unit_test_teardown(test_restart_topic, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
