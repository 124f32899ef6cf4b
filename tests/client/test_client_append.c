/* varlog_append / varlog_append_to against the embedded server: round trips, log stream
 * selection, retries, batched lookups, outcomes, deadlines, bad input and closing. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client_fixture.h"
#include "test_support.h"

#define TIMEOUT 30000

/* -Wl,--wrap=pthread_cond_timedwait (the client's own waits; gRPC's are its library's): while
 * late_thread_on, a timed wait of late_thread that timed out returns only after the next
 * signal of its condition, as if its thread woke late (test_wait_for_unseal_times_out). */
int __real_pthread_cond_timedwait(pthread_cond_t *cv, pthread_mutex_t *mu,
                                  const struct timespec *abstime);
int __wrap_pthread_cond_timedwait(pthread_cond_t *cv, pthread_mutex_t *mu,
                                  const struct timespec *abstime);

static pthread_t late_thread;
static atomic_bool late_thread_on;

int __wrap_pthread_cond_timedwait(pthread_cond_t *cv, pthread_mutex_t *mu,
                                  const struct timespec *abstime)
{
    int rc = __real_pthread_cond_timedwait(cv, mu, abstime);
    if (rc == ETIMEDOUT && atomic_load(&late_thread_on) &&
        pthread_equal(pthread_self(), late_thread)) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 20;
        (void)__real_pthread_cond_timedwait(cv, mu, &until);
    }
    return rc;
}

static void test_append_round_trip(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    varlog_record_t recs[3] = {cf_record("a"), cf_record("bb"), cf_record("ccc")};
    varlog_entry_meta_t metas[3];
    varlog_outcome_t outcome = VARLOG_MAYBE_APPENDED;
    assert_int_equal(varlog_append(f.client, 1, recs, 3, TIMEOUT, metas, &outcome), VARLOG_OK);
    assert_int_equal(outcome, VARLOG_APPENDED);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(metas[i].topic_id, 1);
        assert_int_equal(metas[i].log_stream_id, metas[0].log_stream_id);
        assert_int_equal(metas[i].glsn, metas[0].glsn + i);
        assert_int_equal(metas[i].llsn, metas[0].llsn + i);
    }
    assert_int_equal(metas[0].glsn, 1);
    assert_int_equal(metas[0].llsn, 1);

    /* append_to the other log stream: its own LLSNs, the topic's next GLSNs */
    int32_t other = metas[0].log_stream_id == 1 ? 2 : 1;
    assert_int_equal(varlog_append_to(f.client, 1, other, recs, 2, TIMEOUT, metas, &outcome),
                     VARLOG_OK);
    assert_int_equal(outcome, VARLOG_APPENDED);
    assert_int_equal(metas[0].log_stream_id, other);
    assert_int_equal(metas[0].glsn, 4);
    assert_int_equal(metas[1].glsn, 5);
    assert_int_equal(metas[0].llsn, 1);
    /* metas and outcome are optional */
    assert_int_equal(varlog_append_to(f.client, 1, other, recs, 1, TIMEOUT, NULL, NULL), VARLOG_OK);
    varlog_client_stats_t s = cf_stats(f.client);
    assert_int_equal(s.appends_ok, 3);
    assert_int_equal(s.append_attempts, 3);
    assert_int_equal(s.append_retries, 0);
    cf_stop(&f);
}

/* Round robin over the allow list: consecutive appends alternate between the log streams. */
static void test_append_round_robin(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 3, NULL);
    varlog_record_t rec = cf_record("x");
    int32_t seen[6];
    for (int i = 0; i < 6; i++) {
        varlog_entry_meta_t m;
        assert_int_equal(varlog_append(f.client, 1, &rec, 1, TIMEOUT, &m, NULL), VARLOG_OK);
        seen[i] = m.log_stream_id;
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(seen[i], seen[i + 3]);
    assert_int_not_equal(seen[0], seen[1]);
    assert_int_not_equal(seen[1], seen[2]);
    assert_int_not_equal(seen[0], seen[2]);
    cf_stop(&f);
}

/* A sealed log stream is denied after its first refusal and the append lands elsewhere. */
static void test_sealed_log_stream_goes_elsewhere(void **state)
{
    (void)state;
    client_fixture_t f;
    /* Counting retries (append.retries set), as before the default waited for an unseal. */
    cf_start(&f, 1, 2, "append.retry.backoff.ms", "1", "append.retries", "3", NULL);
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    for (int i = 0; i < 4; i++) {
        varlog_entry_meta_t m;
        varlog_outcome_t outcome;
        assert_int_equal(varlog_append(f.client, 1, &rec, 1, TIMEOUT, &m, &outcome), VARLOG_OK);
        assert_int_equal(outcome, VARLOG_APPENDED);
        assert_int_equal(m.log_stream_id, 2);
    }
    int32_t ids[4];
    assert_int_equal(cf_appendable(f.client, 1, ids, 4), 1);
    assert_int_equal(ids[0], 2);
    varlog_client_stats_t s = cf_stats(f.client);
    assert_int_equal(s.denials, 1);
    assert_true(s.append_retries <= 1);

    /* append_to the sealed one: refused once the refreshed metadata confirms the seal */
    varlog_outcome_t outcome = VARLOG_APPENDED;
    assert_int_equal(varlog_append_to(f.client, 1, 1, &rec, 1, TIMEOUT, NULL, &outcome),
                     VARLOG_ERR_SEALED);
    assert_int_equal(outcome, VARLOG_NOT_APPENDED);
    assert_non_null(strstr(varlog_last_error(), "sealed"));

    /* every log stream sealed: the topic has nothing left to pick */
    assert_int_equal(varlog_server_seal(f.srv, 1, 2), VARLOG_OK);
    assert_int_not_equal(varlog_append(f.client, 1, &rec, 1, TIMEOUT, NULL, &outcome), VARLOG_OK);
    assert_int_equal(outcome, VARLOG_NOT_APPENDED);
    assert_int_equal(cf_appendable(f.client, 1, ids, 4), 0);
    assert_int_equal(varlog_append(f.client, 1, &rec, 1, TIMEOUT, NULL, &outcome),
                     VARLOG_ERR_NO_LOG_STREAM);
    cf_stop(&f);
}

/* A definite refusal is retried on the engine and succeeds. */
static void test_retry_after_refusal(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "append.retry.backoff.ms", "1", NULL);
    assert_int_equal(varlog_server_fail_next(f.srv, CF_PATH_APPEND, 14, "not primary replica", 2),
                     VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    varlog_entry_meta_t m;
    varlog_outcome_t outcome;
    assert_int_equal(varlog_append_to(f.client, 1, 1, &rec, 1, TIMEOUT, &m, &outcome), VARLOG_OK);
    assert_int_equal(outcome, VARLOG_APPENDED);
    assert_int_equal(m.glsn, 1);
    varlog_client_stats_t s = cf_stats(f.client);
    assert_int_equal(s.append_attempts, 3);
    assert_int_equal(s.append_retries, 2);
    assert_int_equal(s.lookups, 2);
    cf_stop(&f);
}

/* The retry budget bounds the attempts; the last error and NOT_APPENDED come back. */
static void test_retries_exhausted(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "append.retries", "2", "append.retry.backoff.ms", "1", NULL);
    assert_int_equal(
        varlog_server_fail_next(f.srv, CF_PATH_APPEND, 8, "storage: byte limit reached", 10),
        VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    varlog_outcome_t outcome;
    assert_int_equal(varlog_append_to(f.client, 1, 1, &rec, 1, TIMEOUT, NULL, &outcome),
                     VARLOG_ERR_RPC_RESOURCE_EXHAUSTED);
    assert_int_equal(outcome, VARLOG_NOT_APPENDED);
    assert_non_null(strstr(varlog_last_error(), "byte limit"));
    assert_int_equal(cf_stats(f.client).append_attempts, 3);
    assert_int_equal(varlog_server_request_count(f.srv, CF_PATH_APPEND), 3);
    cf_stop(&f);
}

/* A stream that breaks after the request went out: the records may be stored. By default
 * that is reported and not retried; with append.retry.maybe.appended the call retries. */
static void test_ambiguous_failure(void **state)
{
    (void)state;
    client_fixture_t f;
    /* Reported as the node left it: not read back (test_ride_out.c reads it back). */
    cf_start(&f, 1, 1, "append.retry.backoff.ms", "1", "append.resolve.maybe.appended", "false",
             NULL);
    assert_int_equal(varlog_server_drop_stream_after(f.srv, CF_PATH_APPEND, 0, 1), VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    varlog_outcome_t outcome;
    assert_int_equal(varlog_append_to(f.client, 1, 1, &rec, 1, TIMEOUT, NULL, &outcome),
                     VARLOG_ERR_RPC_UNAVAILABLE);
    assert_int_equal(outcome, VARLOG_MAYBE_APPENDED);
    assert_int_equal(cf_stats(f.client).append_retries, 0);
    cf_stop(&f);

    cf_start(&f, 1, 1, "append.retry.backoff.ms", "1", "append.retry.maybe.appended", "true", NULL);
    assert_int_equal(varlog_server_drop_stream_after(f.srv, CF_PATH_APPEND, 0, 1), VARLOG_OK);
    varlog_entry_meta_t m;
    assert_int_equal(varlog_append_to(f.client, 1, 1, &rec, 1, TIMEOUT, &m, &outcome), VARLOG_OK);
    assert_int_equal(outcome, VARLOG_APPENDED);
    assert_int_equal(cf_stats(f.client).append_retries, 1);
    cf_stop(&f);
}

/* The call's timeout is honoured while the server sits on the request; the records may
 * have been stored, and the caller's own timeout does not deny the log stream. */
static void test_deadline_respected(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_APPEND, 60000), VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    varlog_outcome_t outcome;
    int64_t t0 = test_now_ms();
    /* (Long enough that the request surely left, even under valgrind: a request still unsent
     * at the deadline would rightly be NOT_APPENDED.) */
    assert_int_equal(varlog_append_to(f.client, 1, 1, &rec, 1, 1500, NULL, &outcome),
                     VARLOG_ERR_TIMED_OUT);
    assert_true(test_now_ms() - t0 >= 1490);
    assert_int_equal(outcome, VARLOG_MAYBE_APPENDED);
    assert_int_equal(varlog_append(f.client, 1, &rec, 1, 1500, NULL, &outcome),
                     VARLOG_ERR_TIMED_OUT);
    assert_int_equal(outcome, VARLOG_MAYBE_APPENDED);
    int32_t ids[2];
    assert_int_equal(cf_appendable(f.client, 1, ids, 2), 2);
    assert_int_equal(cf_stats(f.client).denials, 0);
    assert_int_equal(cf_stats(f.client).append_retries, 0);
    cf_stop(&f);
}

struct appendable_wait {
    client_fixture_t *f;
    size_t want;
};

static bool appendable_count_is(void *arg)
{
    struct appendable_wait *w = arg;
    size_t n = 0;
    return varlog_client_appendable_log_streams(w->f->client, 1, NULL, 0, &n) == VARLOG_OK &&
           n == w->want;
}

/* A denial lasts append.deny.ttl.ms: afterwards the log stream is picked again; with a TTL
 * of 0 a failing log stream is never denied. */
static void test_deny_expires(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, "append.deny.ttl.ms", "300", "append.retry.backoff.ms", "1", NULL);
    /* Refused by the first log stream picked (a replica that is not primary): denied. */
    assert_int_equal(varlog_server_fail_next(f.srv, CF_PATH_APPEND, 14, "not primary replica", 1),
                     VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    assert_int_equal(varlog_append(f.client, 1, &rec, 1, TIMEOUT, NULL, NULL), VARLOG_OK);
    assert_int_equal(cf_stats(f.client).denials, 1);
    struct appendable_wait w = {.f = &f, .want = 2};
    assert_true(test_wait_until(appendable_count_is, &w, cf_wait_bound_ms()));
    bool used[3] = {false, false, false};
    for (int i = 0; i < 4; i++) {
        varlog_entry_meta_t m;
        assert_int_equal(varlog_append(f.client, 1, &rec, 1, TIMEOUT, &m, NULL), VARLOG_OK);
        used[m.log_stream_id] = true;
    }
    assert_true(used[1] && used[2]);
    cf_stop(&f);

    cf_start(&f, 1, 2, "append.deny.ttl.ms", "0", "append.retry.backoff.ms", "1", NULL);
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(varlog_append(f.client, 1, &rec, 1, TIMEOUT, NULL, NULL), VARLOG_OK);
    assert_int_equal(cf_stats(f.client).denials, 0);
    /* Not denied, but left out all the same once the retry's lookup showed it sealed. */
    w.want = 1;
    assert_true(appendable_count_is(&w));
    cf_stop(&f);
}

/* Retries stop at the call's deadline even with budget left: a log stream that refuses
 * every request, a large retry count and a short timeout. Nothing was stored, and the
 * outcome never claims it was. */
static void test_deadline_bounds_retries(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "append.retries", "100", "append.retry.backoff.ms", "50",
             "append.retry.backoff.max.ms", "100", NULL);
    assert_int_equal(
        varlog_server_fail_next(f.srv, CF_PATH_APPEND, 14, "not primary replica", 1000000),
        VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    varlog_outcome_t outcome = VARLOG_APPENDED;
    int64_t t0 = test_now_ms();
    varlog_err_t err = varlog_append_to(f.client, 1, 1, &rec, 1, 2000, NULL, &outcome);
    assert_true(test_now_ms() - t0 >= 1990);
    /* The last refusal came back before the deadline: certainly not stored. Or the deadline
     * struck while an attempt was out: the client cannot know, and says so. */
    if (err == VARLOG_ERR_RPC_UNAVAILABLE)
        assert_int_equal(outcome, VARLOG_NOT_APPENDED);
    else if (err == VARLOG_ERR_TIMED_OUT)
        assert_int_not_equal(outcome, VARLOG_APPENDED);
    else
        fail_msg("%s: %s", varlog_err_name(err), varlog_last_error());
    varlog_client_stats_t s = cf_stats(f.client);
    assert_true(s.append_retries >= 1);
    assert_true(s.append_retries < 100);
    assert_int_equal(varlog_server_stored_bytes(f.srv), 0);
    cf_stop(&f);
}

/* A sealed log stream is waited out until the call's timeout (append.retries -1): the call
 * fails TIMED_OUT with the refusal in its text, NOT_APPENDED, also when its last attempt
 * returns after the deadline and before the caller wakes. Here the retry's metadata lookup
 * (5 s) outlasts the deadline (3 s), and the caller's wake is held until the retry finished. */
static void test_wait_for_unseal_times_out(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "append.retry.backoff.ms", "1", "metadata.call.timeout.ms", "20000", NULL);
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    /* Within metadata.call.timeout.ms, past the call's timeout, which leaves the first attempt
     * (refused by the node) time enough even under valgrind. */
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_METADATA, 5000), VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    varlog_outcome_t outcome;
    late_thread = pthread_self();
    atomic_store(&late_thread_on, true);
    varlog_err_t err = varlog_append_to(f.client, 1, 1, &rec, 1, 3000, NULL, &outcome);
    atomic_store(&late_thread_on, false);
    if (err != VARLOG_ERR_TIMED_OUT)
        fail_msg("%s: %s", varlog_err_str(err), varlog_last_error());
    assert_non_null(strstr(varlog_last_error(), "sealed"));
    assert_int_equal(outcome, VARLOG_NOT_APPENDED);
    varlog_server_clear_faults(f.srv);
    cf_stop(&f);
}

struct sealed_worker {
    client_fixture_t *f;
    varlog_err_t err;
    varlog_outcome_t outcome;
};

static void *append_to_sealed(void *arg)
{
    struct sealed_worker *w = arg;
    varlog_record_t rec = cf_record("x");
    w->err = varlog_append_to(w->f->client, 1, 1, &rec, 1, TIMEOUT, NULL, &w->outcome);
    return NULL;
}

/* N concurrent appends that all fail need one lookup each before their retry; the batcher
 * folds them into N / lookup.batch.size GetMetadata calls. (The batch wait is long, so only
 * full batches flush: the count does not depend on the machine's speed.) */
static void test_concurrent_failures_share_lookups(void **state)
{
    (void)state;
    enum { N = 16, BATCH = 8 };
    client_fixture_t f;
    cf_start(&f, 1, 2, "lookup.batch.size", "8", "retry.workers", "8", "lookup.batch.wait.ms",
             "60000", "append.retry.backoff.ms", "1", "append.retries", "3", NULL);
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    uint64_t before = varlog_server_call_count(f.srv, CF_PATH_METADATA);
    struct sealed_worker w[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        w[i].f = &f;
        assert_int_equal(pthread_create(&th[i], NULL, append_to_sealed, &w[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].err, VARLOG_ERR_SEALED);
        assert_int_equal(w[i].outcome, VARLOG_NOT_APPENDED);
    }
    uint64_t lookups_rpc = varlog_server_call_count(f.srv, CF_PATH_METADATA) - before;
    varlog_client_stats_t s = cf_stats(f.client);
    assert_int_equal(s.lookups, N);
    assert_true(lookups_rpc >= 1);
    assert_true(lookups_rpc <= N / BATCH);
    cf_stop(&f);
}

static void test_bad_input(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "append.record.max.bytes", "8", "append.batch.max.records", "3",
             "append.batch.max.bytes", "10", "appender.batch.max.records", "3",
             "appender.batch.max.bytes", "10", NULL);
    varlog_record_t ok = cf_record("x");
    varlog_record_t empty = {.data = "", .len = 0};
    varlog_record_t null_data = {.data = NULL, .len = 3};
    varlog_record_t big = cf_record("123456789");
    varlog_record_t four[4] = {ok, ok, ok, ok};
    varlog_record_t heavy[2] = {cf_record("12345678"), cf_record("123")};
    varlog_record_t mixed[3] = {ok, ok, empty};
    struct {
        varlog_client_t *client;
        int32_t topic, ls; /* ls 0 = varlog_append */
        const varlog_record_t *recs;
        size_t n;
        int64_t timeout;
        varlog_err_t want;
        const char *says;
    } cases[] = {
        {NULL, 1, 0, &ok, 1, TIMEOUT, VARLOG_ERR_INVALID_ARG, "client"},
        {f.client, 1, 0, NULL, 1, TIMEOUT, VARLOG_ERR_INVALID_ARG, "records"},
        {f.client, 1, 0, &ok, 0, TIMEOUT, VARLOG_ERR_INVALID_ARG, "no records"},
        {f.client, 1, 0, &empty, 1, TIMEOUT, VARLOG_ERR_INVALID_ARG, "empty"},
        {f.client, 1, 0, mixed, 3, TIMEOUT, VARLOG_ERR_INVALID_ARG, "record 2 of 3 is empty"},
        {f.client, 1, 0, &null_data, 1, TIMEOUT, VARLOG_ERR_INVALID_ARG, "empty"},
        {f.client, 1, 0, &big, 1, TIMEOUT, VARLOG_ERR_INVALID_ARG, "append.record.max.bytes"},
        {f.client, 1, 0, four, 4, TIMEOUT, VARLOG_ERR_INVALID_ARG, "append.batch.max.records"},
        {f.client, 1, 0, heavy, 2, TIMEOUT, VARLOG_ERR_INVALID_ARG, "append.batch.max.bytes"},
        {f.client, 1, 0, &ok, 1, 0, VARLOG_ERR_INVALID_ARG, "timeout"},
        {f.client, 1, 0, &ok, 1, -2, VARLOG_ERR_INVALID_ARG, "timeout"},
        {f.client, 99, 0, &ok, 1, TIMEOUT, VARLOG_ERR_UNKNOWN_TOPIC, "topic 99"},
        {f.client, 0, 0, &ok, 1, TIMEOUT, VARLOG_ERR_INVALID_ARG, "topic id 0"},
        {f.client, 1, 99, &ok, 1, TIMEOUT, VARLOG_ERR_UNKNOWN_LOG_STREAM, "log stream 99"},
        {f.client, 99, 1, &ok, 1, TIMEOUT, VARLOG_ERR_UNKNOWN_TOPIC, "topic 99"},
        {f.client, 1, -1, &ok, 1, TIMEOUT, VARLOG_ERR_INVALID_ARG, "log stream id -1"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        varlog_outcome_t outcome = VARLOG_APPENDED;
        varlog_err_t err =
            cases[i].ls
                ? varlog_append_to(cases[i].client, cases[i].topic, cases[i].ls, cases[i].recs,
                                   cases[i].n, cases[i].timeout, NULL, &outcome)
                : varlog_append(cases[i].client, cases[i].topic, cases[i].recs, cases[i].n,
                                cases[i].timeout, NULL, &outcome);
        if (err != cases[i].want || !strstr(varlog_last_error(), cases[i].says))
            fail_msg("case %zu: %s \"%s\", want %s and \"%s\"", i, varlog_err_name(err),
                     varlog_last_error(), varlog_err_name(cases[i].want), cases[i].says);
        assert_int_equal(outcome, VARLOG_NOT_APPENDED);
    }
    /* Nothing reached the server, and the client still works. */
    assert_int_equal(varlog_server_request_count(f.srv, CF_PATH_APPEND), 0);
    varlog_entry_meta_t m;
    assert_int_equal(varlog_append(f.client, 1, heavy + 1, 1, TIMEOUT, &m, NULL), VARLOG_OK);
    assert_int_equal(m.glsn, 1);
    cf_stop(&f);
}

/* A topic created after the client opened is found by an on-demand refresh. */
static void test_append_to_new_topic(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    int32_t topic = 0, ls = 0;
    assert_int_equal(varlog_server_add_topic(f.srv, &topic), VARLOG_OK);
    assert_int_equal(varlog_server_add_log_stream(f.srv, topic, &ls), VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    varlog_entry_meta_t m;
    assert_int_equal(varlog_append(f.client, topic, &rec, 1, TIMEOUT, &m, NULL), VARLOG_OK);
    assert_int_equal(m.topic_id, topic);
    assert_int_equal(m.log_stream_id, ls);
    cf_stop(&f);
}

struct close_worker {
    client_fixture_t *f;
    int32_t ls;
    int returns;
    varlog_err_t err;
    varlog_outcome_t outcome;
};

static void *append_forever(void *arg)
{
    struct close_worker *w = arg;
    varlog_record_t rec = cf_record("x");
    w->err = varlog_append_to(w->f->client, 1, w->ls, &rec, 1, -1, NULL, &w->outcome);
    w->returns++;
    return NULL;
}

struct read_count {
    varlog_server_t *srv;
    uint64_t want;
};

static bool requests_read(void *arg)
{
    struct read_count *rc = arg;
    return varlog_server_request_count(rc->srv, CF_PATH_APPEND) >= rc->want;
}

/* Closing while appends wait on the server: every call returns exactly once, as CLOSED with
 * MAYBE_APPENDED (their requests were sent), and destroy does not hang. */
static void test_close_with_appends_in_flight(void **state)
{
    (void)state;
    enum { N = 6 };
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_APPEND, 60000), VARLOG_OK);
    struct close_worker w[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        w[i] = (struct close_worker){.f = &f, .ls = 1 + i % 2};
        assert_int_equal(pthread_create(&th[i], NULL, append_forever, &w[i]), 0);
    }
    /* Every request read by the server (each call has its own stream). */
    struct read_count rc = {.srv = f.srv, .want = N};
    assert_true(test_wait_until(requests_read, &rc, 20000));
    varlog_client_destroy(f.client);
    f.client = NULL;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].returns, 1);
        assert_int_equal(w[i].err, VARLOG_ERR_CLOSED);
        assert_int_equal(w[i].outcome, VARLOG_MAYBE_APPENDED);
    }
    cf_stop(&f);
}

struct load_worker {
    client_fixture_t *f;
    uint64_t glsns[50];
    int failures;
};

static void *append_many(void *arg)
{
    struct load_worker *w = arg;
    varlog_record_t rec = cf_record("payload");
    for (int i = 0; i < 50; i++) {
        varlog_entry_meta_t m;
        if (varlog_append(w->f->client, 1, &rec, 1, TIMEOUT, &m, NULL) != VARLOG_OK)
            w->failures++;
        else
            w->glsns[i] = m.glsn;
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* One client shared by threads: every append lands once, GLSNs are 1..N without gaps. */
static void test_shared_client(void **state)
{
    (void)state;
    enum { T = 4 };
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    struct load_worker w[T];
    pthread_t th[T];
    for (int i = 0; i < T; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].f = &f;
        assert_int_equal(pthread_create(&th[i], NULL, append_many, &w[i]), 0);
    }
    uint64_t all[T * 50];
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].failures, 0);
        memcpy(all + i * 50, w[i].glsns, sizeof(w[i].glsns));
    }
    qsort(all, T * 50, sizeof(uint64_t), cmp_u64);
    for (int i = 0; i < T * 50; i++)
        assert_int_equal(all[i], (uint64_t)i + 1);
    cf_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_round_trip),
        cmocka_unit_test(test_append_round_robin),
        cmocka_unit_test(test_sealed_log_stream_goes_elsewhere),
        cmocka_unit_test(test_retry_after_refusal),
        cmocka_unit_test(test_retries_exhausted),
        cmocka_unit_test(test_ambiguous_failure),
        cmocka_unit_test(test_deadline_respected),
        cmocka_unit_test(test_deny_expires),
        cmocka_unit_test(test_deadline_bounds_retries),
        cmocka_unit_test(test_concurrent_failures_share_lookups),
        cmocka_unit_test(test_wait_for_unseal_times_out),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_append_to_new_topic),
        cmocka_unit_test(test_close_with_appends_in_flight),
        cmocka_unit_test(test_shared_client),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
