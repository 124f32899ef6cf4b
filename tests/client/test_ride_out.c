/* Riding out a storage node's failure with no retry loop of the caller's (issue 35): a
 * refusal (every log stream sealed, a sealed bound log stream) is waited out until the call's
 * deadline, and an ambiguous append (sent, the stream dropped without its answer) is read
 * back from the log: found -> APPENDED at the GLSN it has; proved absent under a seal ->
 * sent again once unsealed; neither by the deadline -> MAYBE_APPENDED. The appender and the
 * synchronous calls alike, against the embedded server's seal, unseal and stream drops. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "client_fixture.h"
#include "test_support.h"
#include "varlog/appender.h"
#include "varlog/stats.h"

#define TIMEOUT 30000

/* ---- one call's outcome --------------------------------------------------------------- */

typedef struct result {
    atomic_int done;
    varlog_err_t err;
    varlog_outcome_t outcome;
    varlog_entry_meta_t meta;
    char text[600];
} result_t;

static void result_cb(const varlog_append_result_t *r, void *opaque)
{
    result_t *res = opaque;
    res->err = r->err;
    res->outcome = r->outcome;
    if (r->metas)
        res->meta = r->metas[0];
    snprintf(res->text, sizeof(res->text), "%s", r->errtext ? r->errtext : "");
    atomic_store(&res->done, 1);
}

static bool result_done(void *arg)
{
    return atomic_load(&((result_t *)arg)->done) != 0;
}

static void await_result(result_t *r, int64_t bound_ms)
{
    if (!test_wait_until(result_done, r, bound_ms))
        fail_msg("no callback within %lld ms", (long long)bound_ms);
}

/* ---- the client's counters -------------------------------------------------------------- */

typedef struct stat_wait {
    varlog_client_t *client;
    size_t offset; /* of a uint64_t field of varlog_client_stats_t */
    uint64_t above;
} stat_wait_t;

static bool stat_above(void *arg)
{
    stat_wait_t *w = arg;
    varlog_client_stats_t s = cf_stats(w->client);
    uint64_t v;
    memcpy(&v, (const char *)&s + w->offset, sizeof(v));
    return v > w->above;
}

#define AWAIT_STAT(client, field, n)                                                               \
    do {                                                                                           \
        stat_wait_t w_ = {(client), offsetof(varlog_client_stats_t, field), (n)};                  \
        if (!test_wait_until(stat_above, &w_, cf_wait_bound_ms()))                                 \
            fail_msg("client stat " #field " never went above %llu", (unsigned long long)(n));     \
    } while (0)

/* ---- what the server stored ------------------------------------------------------------ */

typedef struct copies {
    const char *payload;
    size_t n;
    varlog_entry_meta_t meta;
} copies_t;

static void count_copy(void *arg, const varlog_entry_meta_t *meta, const void *data, size_t len)
{
    copies_t *c = arg;
    if (len == strlen(c->payload) && memcmp(data, c->payload, len) == 0) {
        c->n++;
        c->meta = *meta;
    }
}

/* The record stored exactly once, at the position its result gave. */
static void assert_stored_once_at(client_fixture_t *f, int32_t ls, const char *payload,
                                  const varlog_entry_meta_t *at)
{
    copies_t c = {.payload = payload};
    cf_stored_each(f->srv, 1, ls, count_copy, &c);
    if (c.n != 1)
        fail_msg("\"%s\" stored %zu times, want once", payload, c.n);
    assert_int_equal(c.meta.glsn, at->glsn);
    assert_int_equal(c.meta.llsn, at->llsn);
    assert_int_equal(c.meta.log_stream_id, at->log_stream_id);
}

static size_t stored_copies(client_fixture_t *f, int32_t ls, const char *payload)
{
    copies_t c = {.payload = payload};
    cf_stored_each(f->srv, 1, ls, count_copy, &c);
    return c.n;
}

static void append_one(varlog_appender_t *app, const char *payload, result_t *r)
{
    varlog_record_t rec = cf_record(payload);
    assert_int_equal(varlog_appender_append(app, &rec, 1, -1, result_cb, r), VARLOG_OK);
}

/* Something stored first, so that the client knows a confirmed LLSN to read back from. */
static void warm_up(varlog_appender_t *app)
{
    result_t r = {0};
    append_one(app, "warm-up", &r);
    await_result(&r, cf_wait_bound_ms());
    assert_int_equal(r.err, VARLOG_OK);
}

/* ---- the appender ------------------------------------------------------------------------ */

/* The node stores the batch and drops the stream before its answer: the read-back finds it,
 * and the callback says APPENDED at the GLSN it has, once. */
static void test_appender_found_after_drop(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    varlog_appender_t *app;
    assert_int_equal(varlog_appender_new(f.client, 1, 1, &app), VARLOG_OK);
    /* The appender keeps its stream: the fault arms before the stream opens, for the
     * request after the warm-up's. */
    assert_int_equal(varlog_server_drop_stream_after_write(f.srv, CF_PATH_APPEND, 1, 1), VARLOG_OK);
    warm_up(app);
    result_t r = {0};
    append_one(app, "dropped-after-write", &r);
    await_result(&r, cf_wait_bound_ms());
    print_message("    %s %s at GLSN %llu: %s\n", varlog_err_name(r.err),
                  varlog_outcome_name(r.outcome), (unsigned long long)r.meta.glsn, r.text);
    assert_int_equal(r.err, VARLOG_OK);
    assert_int_equal(r.outcome, VARLOG_APPENDED);
    assert_stored_once_at(&f, 1, "dropped-after-write", &r.meta);
    varlog_client_stats_t s = cf_stats(f.client);
    assert_true(s.resolved_found >= 1);
    assert_int_equal(s.resolved_absent, 0);
    assert_int_equal(varlog_appender_close(&app, TIMEOUT), VARLOG_OK);
    cf_stop(&f);
}

/* The node drops the stream before storing: not found while the log stream runs (it could
 * still be committed), proved absent once the node reports it sealed, then sent again, which
 * waits for the unseal instead of failing SEALED; stored once. */
static void test_appender_absent_then_unseal(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    varlog_appender_t *app;
    assert_int_equal(varlog_appender_new(f.client, 1, 1, &app), VARLOG_OK);
    /* The appender keeps its stream: the fault arms before the stream opens, for the
     * request after the warm-up's. */
    assert_int_equal(varlog_server_drop_stream_after(f.srv, CF_PATH_APPEND, 1, 1), VARLOG_OK);
    warm_up(app);
    result_t r = {0};
    append_one(app, "dropped-unstored", &r);
    AWAIT_STAT(f.client, resolve_passes, 0); /* read back once, not found, not sealed */
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    AWAIT_STAT(f.client, resolved_absent, 0);
    assert_false(result_done(&r)); /* waiting for the unseal, not failed SEALED */
    assert_int_equal(varlog_server_unseal(f.srv, 1, 1), VARLOG_OK);
    await_result(&r, TIMEOUT);
    print_message("    %s %s: %s\n", varlog_err_name(r.err), varlog_outcome_name(r.outcome),
                  r.text);
    assert_int_equal(r.err, VARLOG_OK);
    assert_stored_once_at(&f, 1, "dropped-unstored", &r.meta);
    assert_int_equal(varlog_appender_close(&app, TIMEOUT), VARLOG_OK);
    cf_stop(&f);
}

/* Not found and never sealed: nothing proves either way, and at the delivery deadline the
 * callback says MAYBE_APPENDED with what the read-back learnt. */
static void test_appender_unknown_until_deadline(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "appender.delivery.timeout.ms", "1000", NULL);
    varlog_appender_t *app;
    assert_int_equal(varlog_appender_new(f.client, 1, 1, &app), VARLOG_OK);
    /* The appender keeps its stream: the fault arms before the stream opens, for the
     * request after the warm-up's. */
    assert_int_equal(varlog_server_drop_stream_after(f.srv, CF_PATH_APPEND, 1, 1), VARLOG_OK);
    warm_up(app);
    result_t r = {0};
    append_one(app, "dropped-unknown", &r);
    await_result(&r, 1000 + cf_wait_bound_ms());
    print_message("    %s %s: %s\n", varlog_err_name(r.err), varlog_outcome_name(r.outcome),
                  r.text);
    assert_int_equal(r.outcome, VARLOG_MAYBE_APPENDED);
    assert_non_null(strstr(r.text, "read back"));
    assert_int_equal(stored_copies(&f, 1, "dropped-unknown"), 0);
    assert_true(cf_stats(f.client).resolve_passes >= 1);
    assert_int_equal(varlog_appender_close(&app, TIMEOUT), VARLOG_OK);
    cf_stop(&f);
}

/* append.resolve.maybe.appended false: the ambiguous batch is reported at once, unread. */
static void test_appender_resolve_off(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "append.resolve.maybe.appended", "false", NULL);
    varlog_appender_t *app;
    assert_int_equal(varlog_appender_new(f.client, 1, 1, &app), VARLOG_OK);
    /* The appender keeps its stream: the fault arms before the stream opens, for the
     * request after the warm-up's. */
    assert_int_equal(varlog_server_drop_stream_after_write(f.srv, CF_PATH_APPEND, 1, 1), VARLOG_OK);
    warm_up(app);
    result_t r = {0};
    append_one(app, "unread", &r);
    await_result(&r, cf_wait_bound_ms());
    assert_int_equal(r.outcome, VARLOG_MAYBE_APPENDED);
    assert_int_equal(cf_stats(f.client).resolve_passes, 0);
    assert_int_equal(varlog_appender_close(&app, TIMEOUT), VARLOG_OK);
    cf_stop(&f);
}

/* Every log stream of the topic sealed: a topic-wide appender's calls wait (the metadata
 * looked up again meanwhile) and are stored once the cluster unseals one, instead of failing
 * NO_LOG_STREAM at once. */
static void test_topic_appender_waits_for_unseal(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, "metadata.recheck.interval.ms", "100", NULL);
    varlog_appender_t *app;
    assert_int_equal(varlog_appender_new(f.client, 1, 0, &app), VARLOG_OK);
    warm_up(app);
    for (int32_t ls = 1; ls <= 2; ls++)
        assert_int_equal(varlog_server_seal(f.srv, 1, ls), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(f.client, TIMEOUT), VARLOG_OK);
    enum { N = 10 };
    result_t r[N];
    memset(r, 0, sizeof(r));
    char payload[N][32];
    uint64_t before = varlog_server_call_count(f.srv, CF_PATH_METADATA);
    for (int i = 0; i < N; i++) {
        snprintf(payload[i], sizeof(payload[i]), "sealed-topic-%d", i);
        append_one(app, payload[i], &r[i]);
    }
    /* The appender asks for fresh metadata while its calls wait. */
    cf_count_wait_t cw = {f.srv, CF_PATH_METADATA, before};
    assert_true(test_wait_until(cf_call_count_above, &cw, cf_wait_bound_ms()));
    for (int i = 0; i < N; i++)
        if (result_done(&r[i]))
            fail_msg("call %d settled while every log stream was sealed: %s %s", i,
                     varlog_err_name(r[i].err), r[i].text);
    assert_int_equal(varlog_server_unseal(f.srv, 1, 2), VARLOG_OK);
    for (int i = 0; i < N; i++) {
        await_result(&r[i], TIMEOUT);
        if (r[i].err != VARLOG_OK)
            fail_msg("call %d: %s %s", i, varlog_err_name(r[i].err), r[i].text);
        assert_int_equal(r[i].meta.log_stream_id, 2);
        assert_stored_once_at(&f, 2, payload[i], &r[i].meta);
    }
    assert_int_equal(varlog_appender_close(&app, TIMEOUT), VARLOG_OK);
    cf_stop(&f);
}

typedef struct retries_wait {
    varlog_client_t *client;
    uint64_t want, seen;
} retries_wait_t;

static bool retries_reached(void *arg)
{
    retries_wait_t *w = arg;
    varlog_stats_t st;
    if (varlog_stats_get(w->client, &st) != VARLOG_OK)
        return false;
    w->seen = st.retries;
    return w->seen >= w->want;
}

/* The node stopped and started again (a restart on the same port): the calls queued while it
 * was away wait, retried with backoff, and are stored once it is back; a bound and a
 * topic-wide appender alike. */
static void stop_restart_with(int32_t bound_ls)
{
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    varlog_appender_t *app;
    assert_int_equal(varlog_appender_new(f.client, 1, bound_ls, &app), VARLOG_OK);
    warm_up(app);
    assert_int_equal(varlog_server_stop(f.srv), VARLOG_OK);
    enum { N = 20 };
    result_t r[N];
    memset(r, 0, sizeof(r));
    char payload[N][32];
    uint64_t retried = 0;
    for (int i = 0; i < N; i++) {
        snprintf(payload[i], sizeof(payload[i]), "while-stopped-%d", i);
        append_one(app, payload[i], &r[i]);
    }
    /* Wait until the appender has been refused and gone back for another try: the node's
     * absence is what is under test, not a time. (Each try waits for a metadata lookup too,
     * which the embedded server, repository and node in one, also refuses: seconds apart.) */
    retries_wait_t rw = {f.client, 1, 0};
    if (!test_wait_until(retries_reached, &rw, cf_wait_bound_ms()))
        fail_msg("the appender did not retry while the node was away");
    retried = rw.seen;
    for (int i = 0; i < N; i++)
        if (result_done(&r[i]))
            fail_msg("call %d settled while the node was away: %s %s", i, varlog_err_name(r[i].err),
                     r[i].text);
    assert_int_equal(varlog_server_restart(f.srv), VARLOG_OK);
    for (int i = 0; i < N; i++) {
        await_result(&r[i], TIMEOUT);
        if (r[i].err != VARLOG_OK)
            fail_msg("call %d: %s %s", i, varlog_err_name(r[i].err), r[i].text);
        assert_stored_once_at(&f, r[i].meta.log_stream_id, payload[i], &r[i].meta);
    }
    print_message("    %d calls stored once after the restart, %llu retries while away\n", N,
                  (unsigned long long)retried);
    assert_int_equal(varlog_appender_close(&app, TIMEOUT), VARLOG_OK);
    cf_stop(&f);
}

static void test_bound_appender_rides_out_a_restart(void **state)
{
    (void)state;
    stop_restart_with(1);
}

static void test_topic_appender_rides_out_a_restart(void **state)
{
    (void)state;
    stop_restart_with(0);
}

/* ---- the synchronous calls --------------------------------------------------------------- */

typedef struct sync_call {
    client_fixture_t *f;
    int32_t ls; /* 0: topic-wide */
    const char *payload;
    varlog_err_t err;
    varlog_outcome_t outcome;
    varlog_entry_meta_t meta;
    char text[600];
    atomic_int done;
} sync_call_t;

static void *sync_append(void *arg)
{
    sync_call_t *s = arg;
    varlog_record_t rec = cf_record(s->payload);
    s->err = s->ls
                 ? varlog_append_to(s->f->client, 1, s->ls, &rec, 1, TIMEOUT, &s->meta, &s->outcome)
                 : varlog_append(s->f->client, 1, &rec, 1, TIMEOUT, &s->meta, &s->outcome);
    snprintf(s->text, sizeof(s->text), "%s", s->err ? varlog_last_error() : "");
    atomic_store(&s->done, 1);
    return NULL;
}

static bool sync_done(void *arg)
{
    return atomic_load(&((sync_call_t *)arg)->done) != 0;
}

static void sync_warm_up(client_fixture_t *f)
{
    varlog_record_t rec = cf_record("sync-warm-up");
    assert_int_equal(varlog_append_to(f->client, 1, 1, &rec, 1, TIMEOUT, NULL, NULL), VARLOG_OK);
}

static void test_sync_found_after_drop(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    sync_warm_up(&f);
    assert_int_equal(varlog_server_drop_stream_after_write(f.srv, CF_PATH_APPEND, 0, 1), VARLOG_OK);
    sync_call_t s = {.f = &f, .ls = 1, .payload = "sync-dropped-after-write"};
    sync_append(&s);
    print_message("    %s %s at GLSN %llu: %s\n", varlog_err_name(s.err),
                  varlog_outcome_name(s.outcome), (unsigned long long)s.meta.glsn, s.text);
    assert_int_equal(s.err, VARLOG_OK);
    assert_int_equal(s.outcome, VARLOG_APPENDED);
    assert_stored_once_at(&f, 1, s.payload, &s.meta);
    assert_true(cf_stats(f.client).resolved_found >= 1);
    cf_stop(&f);
}

static void test_sync_absent_then_unseal(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    sync_warm_up(&f);
    assert_int_equal(varlog_server_drop_stream_after(f.srv, CF_PATH_APPEND, 0, 1), VARLOG_OK);
    sync_call_t s = {.f = &f, .ls = 1, .payload = "sync-dropped-unstored"};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, sync_append, &s), 0);
    AWAIT_STAT(f.client, resolve_passes, 0);
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    AWAIT_STAT(f.client, resolved_absent, 0);
    assert_false(sync_done(&s));
    assert_int_equal(varlog_server_unseal(f.srv, 1, 1), VARLOG_OK);
    pthread_join(th, NULL);
    print_message("    %s %s: %s\n", varlog_err_name(s.err), varlog_outcome_name(s.outcome),
                  s.text);
    assert_int_equal(s.err, VARLOG_OK);
    assert_stored_once_at(&f, 1, s.payload, &s.meta);
    cf_stop(&f);
}

/* Every log stream sealed: varlog_append waits for an unseal within its timeout. */
static void test_sync_topic_waits_for_unseal(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, "metadata.recheck.interval.ms", "100", NULL);
    for (int32_t ls = 1; ls <= 2; ls++)
        assert_int_equal(varlog_server_seal(f.srv, 1, ls), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(f.client, TIMEOUT), VARLOG_OK);
    sync_call_t s = {.f = &f, .ls = 0, .payload = "sync-sealed-topic"};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, sync_append, &s), 0);
    AWAIT_STAT(f.client, append_retries, 0); /* it came back for another look */
    assert_false(sync_done(&s));
    assert_int_equal(varlog_server_unseal(f.srv, 1, 1), VARLOG_OK);
    pthread_join(th, NULL);
    if (s.err != VARLOG_OK)
        fail_msg("%s %s", varlog_err_name(s.err), s.text);
    assert_int_equal(s.meta.log_stream_id, 1);
    assert_stored_once_at(&f, 1, s.payload, &s.meta);
    cf_stop(&f);
}

/* With a short timeout the wait ends NOT_APPENDED, with the last cause. */
static void test_sync_sealed_fails_at_deadline_with_cause(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    varlog_record_t rec = cf_record("never");
    varlog_outcome_t outcome = VARLOG_APPENDED;
    int64_t t0 = test_now_ms();
    varlog_err_t err = varlog_append_to(f.client, 1, 1, &rec, 1, 500, NULL, &outcome);
    int64_t took = test_now_ms() - t0;
    print_message("    %s after %lld ms: %s\n", varlog_err_name(err), (long long)took,
                  varlog_last_error());
    assert_int_equal(err, VARLOG_ERR_TIMED_OUT);
    assert_int_equal(outcome, VARLOG_NOT_APPENDED);
    assert_true(took >= 500);
    assert_non_null(strstr(varlog_last_error(), "sealed"));
    cf_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_appender_found_after_drop),
        cmocka_unit_test(test_appender_absent_then_unseal),
        cmocka_unit_test(test_appender_unknown_until_deadline),
        cmocka_unit_test(test_appender_resolve_off),
        cmocka_unit_test(test_topic_appender_waits_for_unseal),
        cmocka_unit_test(test_bound_appender_rides_out_a_restart),
        cmocka_unit_test(test_topic_appender_rides_out_a_restart),
        cmocka_unit_test(test_sync_found_after_drop),
        cmocka_unit_test(test_sync_absent_then_unseal),
        cmocka_unit_test(test_sync_topic_waits_for_unseal),
        cmocka_unit_test(test_sync_sealed_fails_at_deadline_with_cause),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
