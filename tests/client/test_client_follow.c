/* The client follows the cluster as it changes (issue 18, point 2.2): a topic whose log
 * streams were all sealed, or which had none, is appended to again soon after the cluster
 * is writable, and an unsealed log stream is used again, without waiting for the periodic
 * metadata refresh (off in these tests) and without anyone calling varlog_client_refresh.
 * The lookups that make this happen are rate-limited (metadata.recheck.interval.ms): a topic
 * that stays unwritable does not flood the metadata repository. */
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

#define TIMEOUT 30000
#define RECHECK_MS "100"

/* Calls varlog_append until it succeeds or the bound passes; returns the last result and
 * the log stream that took the record. Every failure on the way must be NO_LOG_STREAM. */
static varlog_err_t append_until_ok(client_fixture_t *f, int32_t topic, int32_t *ls)
{
    varlog_record_t rec = cf_record("x");
    int64_t until = test_now_ms() + cf_wait_bound_ms();
    varlog_err_t rc;
    do {
        varlog_entry_meta_t m = {0};
        rc = varlog_append(f->client, topic, &rec, 1, TIMEOUT, &m, NULL);
        if (rc == VARLOG_OK) {
            *ls = m.log_stream_id;
            break;
        }
        if (rc != VARLOG_ERR_NO_LOG_STREAM)
            fail_msg("varlog_append: %s: %s", varlog_err_name(rc), varlog_last_error());
    } while (test_now_ms() < until);
    return rc;
}

/* Seals every log stream of topic 1 (1..n) and lets the client see it. */
static void seal_all_seen(client_fixture_t *f, int32_t n)
{
    for (int32_t ls = 1; ls <= n; ls++)
        assert_int_equal(varlog_server_seal(f->srv, 1, ls), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(f->client, TIMEOUT), VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    assert_int_equal(varlog_append(f->client, 1, &rec, 1, TIMEOUT, NULL, NULL),
                     VARLOG_ERR_NO_LOG_STREAM);
    assert_non_null(strstr(varlog_last_error(), "sealed"));
}

/* Every log stream of the topic sealed, then unsealed behind the client's back: appends
 * resume. */
static void test_append_resumes_after_unseal(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "metadata.recheck.interval.ms", RECHECK_MS, "append.retries", "3", NULL);
    seal_all_seen(&f, 1);
    assert_int_equal(varlog_server_unseal(f.srv, 1, 1), VARLOG_OK);
    int32_t ls = 0;
    assert_int_equal(append_until_ok(&f, 1, &ls), VARLOG_OK);
    assert_int_equal(ls, 1);
    cf_stop(&f);
}

/* As above, and an append_to on the unsealed log stream succeeds first: varlog_append takes
 * that success as news too. */
static void test_append_resumes_after_append_to(void **state)
{
    (void)state;
    client_fixture_t f;
    /* No rechecks of their own: only the append_to's success can tell. */
    cf_start(&f, 1, 1, "metadata.recheck.interval.ms", "0", "append.retries", "3", NULL);
    seal_all_seen(&f, 1);
    assert_int_equal(varlog_server_unseal(f.srv, 1, 1), VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    assert_int_equal(varlog_append_to(f.client, 1, 1, &rec, 1, TIMEOUT, NULL, NULL), VARLOG_OK);
    varlog_entry_meta_t m;
    assert_int_equal(varlog_append(f.client, 1, &rec, 1, TIMEOUT, &m, NULL), VARLOG_OK);
    assert_int_equal(m.log_stream_id, 1);
    cf_stop(&f);
}

/* A topic that had no log stream gets one: appends resume. */
static void test_append_resumes_after_log_stream_added(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "metadata.recheck.interval.ms", RECHECK_MS, "append.retries", "3", NULL);
    int32_t topic = 0;
    assert_int_equal(varlog_server_add_topic(f.srv, &topic), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(f.client, TIMEOUT), VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    assert_int_equal(varlog_append(f.client, topic, &rec, 1, TIMEOUT, NULL, NULL),
                     VARLOG_ERR_NO_LOG_STREAM);
    int32_t added = 0;
    assert_int_equal(varlog_server_add_log_stream(f.srv, topic, &added), VARLOG_OK);
    int32_t ls = 0;
    assert_int_equal(append_until_ok(&f, topic, &ls), VARLOG_OK);
    assert_int_equal(ls, added);
    cf_stop(&f);
}

/* One of two log streams sealed, then unsealed: appends use it again (round robin reaches
 * it) though the other one kept working all along. */
static void test_unsealed_log_stream_used_again(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, "metadata.recheck.interval.ms", RECHECK_MS, "append.retries", "3", NULL);
    assert_int_equal(varlog_server_seal(f.srv, 1, 2), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(f.client, TIMEOUT), VARLOG_OK);
    assert_int_equal(varlog_server_unseal(f.srv, 1, 2), VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    int64_t until = test_now_ms() + cf_wait_bound_ms();
    bool used2 = false;
    while (!used2 && test_now_ms() < until) {
        varlog_entry_meta_t m;
        assert_int_equal(varlog_append(f.client, 1, &rec, 1, TIMEOUT, &m, NULL), VARLOG_OK);
        used2 = m.log_stream_id == 2;
    }
    assert_true(used2);
    cf_stop(&f);
}

/* ---- the topic-wide appender ---------------------------------------------------------------- */

typedef struct outcomes {
    atomic_long ok, no_log_stream, other;
    atomic_int last_ls;
} outcomes_t;

static void on_appended(const varlog_append_result_t *res, void *opaque)
{
    outcomes_t *o = opaque;
    if (res->err == VARLOG_OK) {
        atomic_store(&o->last_ls, res->metas[0].log_stream_id);
        atomic_fetch_add(&o->ok, 1);
    } else if (res->err == VARLOG_ERR_NO_LOG_STREAM) {
        atomic_fetch_add(&o->no_log_stream, 1);
    } else {
        atomic_fetch_add(&o->other, 1);
    }
}

/* Appends one record at a time through app, each flushed, until one lands in log stream
 * want (0: any) or the bound passes; returns whether one did. */
static bool appender_until(varlog_appender_t *app, outcomes_t *o, int32_t want)
{
    varlog_record_t rec = cf_record("x");
    int64_t until = test_now_ms() + cf_wait_bound_ms();
    while (test_now_ms() < until) {
        long before = atomic_load(&o->ok);
        assert_int_equal(varlog_appender_append(app, &rec, 1, TIMEOUT, on_appended, o), VARLOG_OK);
        assert_int_equal(varlog_appender_flush(app, TIMEOUT, NULL), VARLOG_OK);
        if (atomic_load(&o->ok) > before && (want == 0 || atomic_load(&o->last_ls) == want))
            return true;
    }
    return false;
}

static void test_appender_resumes_after_unseal(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "metadata.recheck.interval.ms", RECHECK_MS, "append.retries", "3", NULL);
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(f.client, 1, 0, &app), VARLOG_OK);
    outcomes_t o = {0};
    assert_true(appender_until(app, &o, 1));
    seal_all_seen(&f, 1);
    varlog_record_t rec = cf_record("x");
    assert_int_equal(varlog_appender_append(app, &rec, 1, TIMEOUT, on_appended, &o), VARLOG_OK);
    assert_int_equal(varlog_appender_flush(app, TIMEOUT, NULL), VARLOG_OK);
    assert_int_equal(atomic_load(&o.no_log_stream), 1);
    assert_int_equal(varlog_server_unseal(f.srv, 1, 1), VARLOG_OK);
    assert_true(appender_until(app, &o, 1));
    assert_int_equal(atomic_load(&o.other), 0);
    assert_int_equal(varlog_appender_close(&app, TIMEOUT), VARLOG_OK);
    cf_stop(&f);
}

static void test_appender_uses_unsealed_log_stream(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, "metadata.recheck.interval.ms", RECHECK_MS, "append.retries", "3", NULL);
    assert_int_equal(varlog_server_seal(f.srv, 1, 2), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(f.client, TIMEOUT), VARLOG_OK);
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(f.client, 1, 0, &app), VARLOG_OK);
    outcomes_t o = {0};
    assert_true(appender_until(app, &o, 1));
    assert_int_equal(varlog_server_unseal(f.srv, 1, 2), VARLOG_OK);
    assert_true(appender_until(app, &o, 2));
    assert_int_equal(atomic_load(&o.other) + atomic_load(&o.no_log_stream), 0);
    assert_int_equal(varlog_appender_close(&app, TIMEOUT), VARLOG_OK);
    cf_stop(&f);
}

/* ---- rate limit ----------------------------------------------------------------------------- */

/* A topic that stays unwritable: appends in a tight loop for a while make at most one
 * GetMetadata per metadata.recheck.interval.ms (plus the one in flight at the start). */
static void test_rechecks_rate_limited(void **state)
{
    (void)state;
    client_fixture_t f;
    /* Slowed builds take up to a second for a GetMetadata on a loaded machine: the interval
     * must dwarf it for the calls between two lookups to show. */
    int64_t interval = test_under_valgrind() || test_under_tsan() ? 3000 : 200;
    char iv[32];
    snprintf(iv, sizeof(iv), "%lld", (long long)interval);
    cf_start(&f, 1, 1, "metadata.recheck.interval.ms", iv, "append.retries", "3", NULL);
    seal_all_seen(&f, 1);
    uint64_t before = varlog_server_call_count(f.srv, CF_PATH_METADATA);
    int64_t start = test_now_ms();
    varlog_record_t rec = cf_record("x");
    long calls = 0;
    while (test_now_ms() - start < 5 * interval) {
        assert_int_equal(varlog_append(f.client, 1, &rec, 1, TIMEOUT, NULL, NULL),
                         VARLOG_ERR_NO_LOG_STREAM);
        calls++;
    }
    int64_t elapsed = test_now_ms() - start;
    uint64_t fetches = varlog_server_call_count(f.srv, CF_PATH_METADATA) - before;
    print_message("    %ld calls in %lld ms made %llu GetMetadata calls\n", calls,
                  (long long)elapsed, (unsigned long long)fetches);
    assert_true(fetches >= 1);
    assert_true(fetches <= (uint64_t)(elapsed / interval + 2));
    assert_true(calls > (long)fetches * 10);
    cf_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_resumes_after_unseal),
        cmocka_unit_test(test_append_resumes_after_append_to),
        cmocka_unit_test(test_append_resumes_after_log_stream_added),
        cmocka_unit_test(test_unsealed_log_stream_used_again),
        cmocka_unit_test(test_appender_resumes_after_unseal),
        cmocka_unit_test(test_appender_uses_unsealed_log_stream),
        cmocka_unit_test(test_rechecks_rate_limited),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
