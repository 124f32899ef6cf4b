/* The deny list steers varlog_append away from failing log streams; it must never make a
 * topic unwritable once its log streams work again, and must not spend lookups and retries
 * where none can help. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "client_fixture.h"
#include "test_support.h"

#define TIMEOUT 30000

/* A short outage of the storage node denies every log stream of the topic for
 * append.deny.ttl.ms (10 minutes by default). With the node back, varlog_append must work
 * at once: it tries the log stream whose denial ends first, and its success ends the
 * denial. */
static void test_outage_does_not_block_the_topic(void **state)
{
    (void)state;
    client_fixture_t f;
    /* Retries enough to outlast the channel's reconnect delay after the restart. */
    cf_start(&f, 1, 2, "append.retry.backoff.ms", "1", "append.retry.backoff.max.ms", "200",
             "append.retries", "50", NULL);
    varlog_record_t rec = cf_record("x");
    assert_int_equal(varlog_server_stop(f.srv), VARLOG_OK);
    varlog_outcome_t outcome;
    /* Each log stream fails its first attempt and is denied (a varlog_append could run out of
     * time on a loaded machine before its retries reached the second one). */
    for (int32_t ls = 1; ls <= 2; ls++)
        assert_int_not_equal(varlog_append_to(f.client, 1, ls, &rec, 1, 2000, NULL, &outcome),
                             VARLOG_OK);
    assert_int_equal(cf_appendable(f.client, 1, NULL, 0), 0); /* both denied */
    assert_int_equal(varlog_server_restart(f.srv), VARLOG_OK);

    varlog_entry_meta_t m;
    assert_int_equal(varlog_append(f.client, 1, &rec, 1, TIMEOUT, &m, &outcome), VARLOG_OK);
    assert_int_equal(outcome, VARLOG_APPENDED);
    /* The success ended that log stream's denial. */
    int32_t ids[2];
    assert_int_equal(cf_appendable(f.client, 1, ids, 2), 1);
    assert_int_equal(ids[0], m.log_stream_id);
    cf_stop(&f);
}

/* A topic without log streams: NO_LOG_STREAM that says so, with no retry (it cannot create a
 * log stream) and one lookup in metadata.recheck.interval.ms (a log stream may have been
 * added since the metadata at hand): a second call right after makes none. */
static void test_topic_without_log_streams(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "append.retries", "3", NULL); /* counting: no wait for a log stream */
    int32_t topic = 0;
    assert_int_equal(varlog_server_add_topic(f.srv, &topic), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(f.client, TIMEOUT), VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    varlog_outcome_t outcome = VARLOG_APPENDED;
    assert_int_equal(varlog_append(f.client, topic, &rec, 1, TIMEOUT, NULL, &outcome),
                     VARLOG_ERR_NO_LOG_STREAM);
    assert_int_equal(outcome, VARLOG_NOT_APPENDED);
    assert_non_null(strstr(varlog_last_error(), "no log streams"));
    assert_int_equal(varlog_append(f.client, topic, &rec, 1, TIMEOUT, NULL, &outcome),
                     VARLOG_ERR_NO_LOG_STREAM);
    varlog_client_stats_t s = cf_stats(f.client);
    assert_int_equal(s.lookups, 1);
    assert_int_equal(s.append_retries, 0);
    cf_stop(&f);
}

/* Sealed log streams (as the metadata shows them) are left out of the pick: no attempt is
 * wasted on them, and nothing is denied. When every log stream is sealed, the append says
 * so without retrying. */
static void test_sealed_left_out(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, "append.retries", "3", NULL); /* counting: every one sealed fails */
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(f.client, TIMEOUT), VARLOG_OK);
    int32_t ids[2];
    assert_int_equal(cf_appendable(f.client, 1, ids, 2), 1);
    assert_int_equal(ids[0], 2);
    varlog_record_t rec = cf_record("x");
    for (int i = 0; i < 6; i++) {
        varlog_entry_meta_t m;
        assert_int_equal(varlog_append(f.client, 1, &rec, 1, TIMEOUT, &m, NULL), VARLOG_OK);
        assert_int_equal(m.log_stream_id, 2);
    }
    varlog_client_stats_t s = cf_stats(f.client);
    assert_int_equal(s.append_attempts, 6);
    assert_int_equal(s.denials, 0);

    assert_int_equal(varlog_server_seal(f.srv, 1, 2), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(f.client, TIMEOUT), VARLOG_OK);
    assert_int_equal(varlog_append(f.client, 1, &rec, 1, TIMEOUT, NULL, NULL),
                     VARLOG_ERR_NO_LOG_STREAM);
    assert_non_null(strstr(varlog_last_error(), "sealed"));
    assert_int_equal(cf_stats(f.client).append_retries, 0);
    cf_stop(&f);
}

/* A log stream denied after it refused as sealed is allowed again as soon as a new
 * metadata version shows it unsealed, long before its denial would expire. */
static void test_unseal_in_fresh_metadata_ends_denial(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, "append.retry.backoff.ms", "1", NULL);
    /* Sealed behind the client's back: the first pick, log stream 1, refuses and is denied. */
    assert_int_equal(varlog_server_seal(f.srv, 1, 1), VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    varlog_entry_meta_t m;
    assert_int_equal(varlog_append(f.client, 1, &rec, 1, TIMEOUT, &m, NULL), VARLOG_OK);
    assert_int_equal(m.log_stream_id, 2);
    assert_int_equal(cf_stats(f.client).denials, 1);
    assert_int_equal(cf_appendable(f.client, 1, NULL, 0), 1);

    assert_int_equal(varlog_server_unseal(f.srv, 1, 1), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(f.client, TIMEOUT), VARLOG_OK);
    int32_t ids[2];
    assert_int_equal(cf_appendable(f.client, 1, ids, 2), 2);
    bool used[3] = {false, false, false};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(varlog_append(f.client, 1, &rec, 1, TIMEOUT, &m, NULL), VARLOG_OK);
        used[m.log_stream_id] = true;
    }
    assert_true(used[1] && used[2]);
    cf_stop(&f);
}

/* append_to succeeding on a denied log stream ends its denial for varlog_append too. */
static void test_append_to_success_ends_denial(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, "append.retries", "0", NULL);
    assert_int_equal(varlog_server_fail_next(f.srv, CF_PATH_APPEND, 14, "not primary replica", 1),
                     VARLOG_OK);
    varlog_record_t rec = cf_record("x");
    assert_int_equal(varlog_append_to(f.client, 1, 1, &rec, 1, TIMEOUT, NULL, NULL),
                     VARLOG_ERR_RPC_UNAVAILABLE);
    assert_int_equal(cf_appendable(f.client, 1, NULL, 0), 1);
    assert_int_equal(varlog_append_to(f.client, 1, 1, &rec, 1, TIMEOUT, NULL, NULL), VARLOG_OK);
    assert_int_equal(cf_appendable(f.client, 1, NULL, 0), 2);
    cf_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outage_does_not_block_the_topic),
        cmocka_unit_test(test_topic_without_log_streams),
        cmocka_unit_test(test_sealed_left_out),
        cmocka_unit_test(test_unseal_in_fresh_metadata_ends_denial),
        cmocka_unit_test(test_append_to_success_ends_denial),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
