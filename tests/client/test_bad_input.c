/* Bad input, table-driven (issue 19, section 5): every public function of the client's headers
 * (client, conf, appender, subscribe, stats, log, error, version) called with NULL, zero,
 * oversized, unknown and out-of-range arguments, and on handles that are closing or closed,
 * must answer what its header documents, with a last error that says what is wrong. The rows
 * run in four places, because what a call may answer depends on where it is made: the test's
 * thread with everything open, an appender's own callback, an appender's callback while the
 * client is being destroyed, and the test's thread once the client is gone (the handles that
 * outlive it). This file has the rows of the client's lists, appends and appenders, and the
 * tests; bad_input_conf.c and bad_input_read.c the others (bad_input_client.h). The admin
 * handle and the embedded server are test_bad_input_admin.c's. Leaks are the valgrind copy's
 * to find. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bad_input_client.h"
#include "test_support.h"

static char big[8192];
static const varlog_record_t rec1 = {.data = "x", .len = 1};

static void on_appended(const varlog_append_result_t *r, void *opaque)
{
    (void)r, (void)opaque;
}

/* n records of len bytes each (at most 16). */
static const varlog_record_t *records(size_t n, size_t len)
{
    static _Thread_local varlog_record_t r[16];
    for (size_t i = 0; i < n && i < 16; i++)
        r[i] = (varlog_record_t){.data = big, .len = len};
    return r;
}

/* ---- an open client ------------------------------------------------------------------------ */

ROW(client_destroy_null)
{
    (void)e;
    varlog_client_destroy(NULL);
    return VARLOG_OK;
}
CALL(refresh_null, varlog_client_refresh(NULL, 1000))
CALL(refresh_zero, varlog_client_refresh(e->f.client, 0))
CALL(refresh_below, varlog_client_refresh(e->f.client, -2))
CALL(refresh_huge, varlog_client_refresh(e->f.client, INT64_MAX))
CALL(applied_index_null,
     varlog_client_applied_index(NULL) == 0 ? VARLOG_OK : bi_broken("index of NULL not 0"))

typedef varlog_err_t list_fn(varlog_client_t *, int32_t, int32_t *, size_t, size_t *);

static varlog_err_t topics_as_list(varlog_client_t *c, int32_t topic, int32_t *ids, size_t cap,
                                   size_t *n)
{
    (void)topic;
    return varlog_client_topics(c, ids, cap, n);
}

/* A list call, which must leave *n alone on failure and write no id past cap. */
static varlog_err_t list(list_fn *fn, varlog_client_t *c, int32_t topic, bool with_ids, size_t cap,
                         bool with_n)
{
    int32_t ids[4] = {-7, -7, -7, -7};
    size_t n = 77;
    varlog_err_t rc = fn(c, topic, with_ids ? ids : NULL, cap, with_n ? &n : NULL);
    if (rc != VARLOG_OK && n != 77)
        return bi_broken("*n written on failure");
    for (size_t i = cap; with_ids && i < 4; i++)
        if (ids[i] != -7)
            return bi_broken("id %zu written past cap %zu", i, cap);
    if (rc == VARLOG_OK && n < cap)
        return bi_broken("*n %zu", n);
    return rc;
}

CALL(topics_null_client, list(topics_as_list, NULL, 0, true, 4, true))
CALL(topics_null_n, list(topics_as_list, e->f.client, 0, true, 4, false))
CALL(topics_null_ids, list(topics_as_list, e->f.client, 0, false, 1, true))
CALL(topics_cap_0, list(topics_as_list, e->f.client, 0, false, 0, true))
CALL(topics_cap_1, list(topics_as_list, e->f.client, 0, true, 1, true))
CALL(ls_null_client, list(varlog_client_log_streams, NULL, 1, true, 4, true))
CALL(ls_null_n, list(varlog_client_log_streams, e->f.client, 1, true, 4, false))
CALL(ls_null_ids, list(varlog_client_log_streams, e->f.client, 1, false, 2, true))
CALL(ls_cap_1, list(varlog_client_log_streams, e->f.client, 1, true, 1, true))
CALL(ls_unknown, list(varlog_client_log_streams, e->f.client, 99, true, 4, true))
CALL(ls_topic_0, list(varlog_client_log_streams, e->f.client, 0, true, 4, true))
CALL(ls_topic_neg, list(varlog_client_log_streams, e->f.client, INT32_MIN, true, 4, true))
CALL(ap_null_client, list(varlog_client_appendable_log_streams, NULL, 1, true, 4, true))
CALL(ap_null_n, list(varlog_client_appendable_log_streams, e->f.client, 1, true, 4, false))
CALL(ap_null_ids, list(varlog_client_appendable_log_streams, e->f.client, 1, false, 1, true))
CALL(ap_cap_1, list(varlog_client_appendable_log_streams, e->f.client, 1, true, 1, true))
CALL(ap_unknown, list(varlog_client_appendable_log_streams, e->f.client, 99, true, 4, true))

/* Whatever an append call answers, its outcome must say NOT_APPENDED when it refused the
 * call. */
static varlog_err_t outcome_matches(varlog_err_t rc, varlog_outcome_t outcome)
{
    varlog_outcome_t want = rc == VARLOG_OK ? VARLOG_APPENDED : VARLOG_NOT_APPENDED;
    return outcome == want ? rc : bi_broken("outcome %s", varlog_outcome_name(outcome));
}

static varlog_err_t append(varlog_client_t *c, int32_t topic, const varlog_record_t *r, size_t n,
                           int64_t timeout_ms)
{
    varlog_outcome_t outcome = (varlog_outcome_t)-1;
    varlog_entry_meta_t metas[16];
    varlog_err_t rc = varlog_append(c, topic, r, n, timeout_ms, metas, &outcome);
    return outcome_matches(rc, outcome);
}

static varlog_err_t append_to(varlog_client_t *c, int32_t topic, int32_t ls,
                              const varlog_record_t *r, size_t n, int64_t timeout_ms)
{
    varlog_outcome_t outcome = (varlog_outcome_t)-1;
    varlog_entry_meta_t metas[16];
    varlog_err_t rc = varlog_append_to(c, topic, ls, r, n, timeout_ms, metas, &outcome);
    return outcome_matches(rc, outcome);
}

static const varlog_record_t empty_rec = {.data = "x", .len = 0};
static const varlog_record_t null_rec = {.data = NULL, .len = 1};

CALL(append_null_client, append(NULL, 1, &rec1, 1, 1000))
CALL(append_topic_0, append(e->f.client, 0, &rec1, 1, 1000))
CALL(append_topic_neg, append(e->f.client, INT32_MIN, &rec1, 1, 1000))
CALL(append_null_records, append(e->f.client, 1, NULL, 1, 1000))
CALL(append_n_0, append(e->f.client, 1, &rec1, 0, 1000))
CALL(append_empty, append(e->f.client, 1, &empty_rec, 1, 1000))
CALL(append_null_data, append(e->f.client, 1, &null_rec, 1, 1000))
CALL(append_record_big, append(e->f.client, 1, records(1, REC_MAX + 1), 1, 1000))
CALL(append_record_huge, append(e->f.client, 1, records(1, SIZE_MAX), 1, 1000))
CALL(append_n_big,
     append(e->f.client, 1, records(CALL_MAX_RECORDS + 1, 1), CALL_MAX_RECORDS + 1, 1000))
CALL(append_n_huge, append(e->f.client, 1, records(1, 1), SIZE_MAX, 1000))
CALL(append_bytes_big, append(e->f.client, 1, records(5, 1000), 5, 1000))
CALL(append_timeout_0, append(e->f.client, 1, &rec1, 1, 0))
CALL(append_timeout_below, append(e->f.client, 1, &rec1, 1, -2))
CALL(append_timeout_min, append(e->f.client, 1, &rec1, 1, INT64_MIN))
CALL(append_unknown_topic, append(e->f.client, 99, &rec1, 1, 5000))
CALL(append_timeout_huge, append(e->f.client, 1, &rec1, 1, INT64_MAX))
CALL(append_full_call,
     append(e->f.client, 1, records(CALL_MAX_RECORDS, CALL_MAX_BYTES / 8), CALL_MAX_RECORDS, 5000))
CALL(append_to_ls_0, append_to(e->f.client, 1, 0, &rec1, 1, 1000))
CALL(append_to_ls_neg, append_to(e->f.client, 1, -1, &rec1, 1, 1000))
CALL(append_to_unknown_ls, append_to(e->f.client, 1, 99, &rec1, 1, 5000))
CALL(append_to_other_topic, append_to(e->f.client, 1, 3, &rec1, 1, 5000))
CALL(append_to_unknown_topic, append_to(e->f.client, 99, 1, &rec1, 1, 5000))
CALL(append_to_null_records, append_to(e->f.client, 1, 1, NULL, 1, 1000))
CALL(append_to_timeout_0, append_to(e->f.client, 1, 1, &rec1, 1, 0))
CALL(append_to_timeout_huge, append_to(e->f.client, 1, 1, &rec1, 1, INT64_MAX))

ROW(client_stats_null)
{
    varlog_client_stats_t st;
    varlog_err_t rc = varlog_client_stats(NULL, &st);
    return rc == varlog_client_stats(e->f.client, NULL) ? rc : bi_broken("NULL out answered apart");
}
ROW(stats_get_null)
{
    varlog_stats_t *st = malloc(sizeof(*st));
    varlog_err_t rc = varlog_stats_get(NULL, st);
    varlog_err_t rc2 = varlog_stats_get(e->f.client, NULL);
    free(st);
    return rc == rc2 ? rc : bi_broken("NULL out answered apart");
}
ROW(stats_json_null_client)
{
    (void)e;
    char *json = (char *)big;
    size_t len = 9;
    varlog_err_t rc = varlog_stats_json(NULL, &json, &len);
    return json == NULL && len == 0 ? rc : bi_broken("*json or *len not reset");
}
CALL(stats_json_null_json, varlog_stats_json(e->f.client, NULL, NULL))
ROW(stats_json_no_len)
{
    char *json = NULL;
    varlog_err_t rc = varlog_stats_json(e->f.client, &json, NULL);
    bool ok = json && json[0] == '{';
    varlog_stats_json_free(json);
    varlog_stats_json_free(NULL);
    return rc != VARLOG_OK || ok ? rc : bi_broken("not a JSON document");
}
ROW(stats_prometheus_null_client)
{
    (void)e;
    char *text = (char *)big;
    size_t len = 9;
    varlog_err_t rc = varlog_stats_prometheus(NULL, &text, &len);
    return text == NULL && len == 0 ? rc : bi_broken("*text or *len not reset");
}
CALL(stats_prometheus_null_text, varlog_stats_prometheus(e->f.client, NULL, NULL))
ROW(stats_prometheus_no_len)
{
    char *text = NULL;
    varlog_err_t rc = varlog_stats_prometheus(e->f.client, &text, NULL);
    bool ok = text && strncmp(text, "# HELP ", 7) == 0;
    varlog_stats_prometheus_free(text);
    varlog_stats_prometheus_free(NULL);
    return rc != VARLOG_OK || ok ? rc : bi_broken("not a Prometheus text document");
}

/* ---- appenders ----------------------------------------------------------------------------- */

/* varlog_appender_new, which must set *out to NULL on failure. */
static varlog_err_t appender_new(varlog_client_t *c, int32_t topic, int32_t ls, bool with_out)
{
    varlog_appender_t *app = (varlog_appender_t *)(uintptr_t)1;
    varlog_err_t rc = varlog_appender_new(c, topic, ls, with_out ? &app : NULL);
    if (rc == VARLOG_OK)
        return varlog_appender_close(&app, 1000);
    return !with_out || !app ? rc : bi_broken("*out not NULL after a failure");
}

CALL(appender_new_null_client, appender_new(NULL, 1, 0, true))
CALL(appender_new_null_out, appender_new(e->f.client, 1, 0, false))
CALL(appender_new_topic_0, appender_new(e->f.client, 0, 0, true))
CALL(appender_new_ls_neg, appender_new(e->f.client, 1, -1, true))
CALL(appender_new_unknown_topic, appender_new(e->f.client, 99, 0, true))
CALL(appender_new_unknown_ls, appender_new(e->f.client, 1, 99, true))
CALL(appender_new_other_topic, appender_new(e->f.client, 1, 3, true))

static varlog_err_t app_append(varlog_appender_t *app, const varlog_record_t *r, size_t n,
                               int64_t timeout_ms, varlog_append_cb *cb)
{
    return varlog_appender_append(app, r, n, timeout_ms, cb, NULL);
}

CALL(app_append_null_app, app_append(NULL, &rec1, 1, 0, on_appended))
CALL(app_append_ex_null_app,
     varlog_appender_append_ex(NULL, &rec1, 1, 0, VARLOG_APPEND_REFUSAL_RETRIED, on_appended, NULL))
CALL(app_append_ex_unknown_flag,
     varlog_appender_append_ex(e->app, &rec1, 1, 0, 1u << 7, on_appended, NULL))
CALL(app_append_ex_flags,
     varlog_appender_append_ex(e->app, &rec1, 1, 0,
                               VARLOG_APPEND_REFUSAL_RETRIED | VARLOG_APPEND_WAIT_CONTINUED,
                               on_appended, NULL))
/* rec1's bytes are static: a release that does nothing. */
static void release_nothing(void *opaque)
{
    (void)opaque;
}

CALL(app_append_ref_null_app,
     varlog_appender_append_ref(NULL, &rec1, 1, 0, release_nothing, on_appended, NULL))
CALL(app_append_ref_null_release,
     varlog_appender_append_ref(e->app, &rec1, 1, 0, NULL, on_appended, NULL))
CALL(app_append_ref_record_big, varlog_appender_append_ref(e->app, records(1, REC_MAX + 1), 1, 0,
                                                           release_nothing, on_appended, NULL))
CALL(app_append_ref_ok,
     varlog_appender_append_ref(e->app, &rec1, 1, 0, release_nothing, on_appended, NULL))
CALL(app_append_null_records, app_append(e->app, NULL, 1, 0, on_appended))
CALL(app_append_null_cb, app_append(e->app, &rec1, 1, 0, NULL))
CALL(app_append_n_0, app_append(e->app, &rec1, 0, 0, on_appended))
CALL(app_append_empty, app_append(e->app, &empty_rec, 1, 0, on_appended))
CALL(app_append_null_data, app_append(e->app, &null_rec, 1, 0, on_appended))
CALL(app_append_record_big, app_append(e->app, records(1, REC_MAX + 1), 1, 0, on_appended))
CALL(app_append_n_big,
     app_append(e->app, records(APP_MAX_RECORDS + 1, 1), APP_MAX_RECORDS + 1, 0, on_appended))
CALL(app_append_n_huge, app_append(e->app, &rec1, SIZE_MAX, 0, on_appended))
CALL(app_append_bytes_big, app_append(e->app, records(3, 1000), 3, 0, on_appended))
CALL(app_append_timeout_below, app_append(e->app, &rec1, 1, -2, on_appended))
CALL(app_append_timeout_huge, app_append(e->app, &rec1, 1, INT64_MAX, on_appended))

ROW(app_flush_null)
{
    (void)e;
    size_t left = 5;
    varlog_err_t rc = varlog_appender_flush(NULL, 1000, &left);
    return left == 0 ? rc : bi_broken("*still_pending %zu", left);
}
CALL(app_flush_below, varlog_appender_flush(e->app, -2, NULL))
CALL(app_flush_huge, varlog_appender_flush(e->app, INT64_MAX, NULL))
CALL(app_close_null, varlog_appender_close(NULL, 1000))
ROW(app_close_twice)
{
    varlog_appender_t *app = NULL;
    varlog_err_t rc = varlog_appender_new(e->f.client, 1, 1, &app);
    if (rc != VARLOG_OK)
        return rc;
    rc = varlog_appender_close(&app, 1000);
    if (rc != VARLOG_OK || app)
        return rc != VARLOG_OK ? rc : bi_broken("*app not NULL after close");
    return varlog_appender_close(&app, 1000);
}
ROW(app_stats_null)
{
    varlog_appender_stats_t st;
    varlog_err_t rc = varlog_appender_stats(NULL, &st);
    return rc == varlog_appender_stats(e->app, NULL) ? rc : bi_broken("NULL out answered apart");
}

static const bi_row_t pure_rows[] = {
    R(varlog_client_destroy, "NULL", OK, OK, client_destroy_null),
    R(varlog_client_refresh, "NULL", INVAL, "client is NULL", refresh_null),
    R(varlog_client_applied_index, "NULL", OK, OK, applied_index_null),
    R(varlog_client_topics, "NULL client", INVAL, "must not be NULL", topics_null_client),
    R(varlog_client_log_streams, "NULL client", INVAL, "must not be NULL", ls_null_client),
    R(varlog_client_appendable_log_streams, "NULL client", INVAL, "must not be NULL",
      ap_null_client),
    R(varlog_append, "NULL client", INVAL, "client is NULL", append_null_client),
    R(varlog_client_stats, "NULL client, NULL out", INVAL, "NULL", client_stats_null),
    R(varlog_stats_json, "NULL client", INVAL, "NULL argument", stats_json_null_client),
    R(varlog_stats_prometheus, "NULL client", INVAL, "NULL argument", stats_prometheus_null_client),
    R(varlog_appender_new, "NULL client", INVAL, "must not be NULL", appender_new_null_client),
    R(varlog_appender_append, "NULL appender", INVAL, "must not be NULL", app_append_null_app),
    R(varlog_appender_append_ex, "NULL appender", INVAL, "must not be NULL",
      app_append_ex_null_app),
    R(varlog_appender_append_ref, "NULL appender", INVAL, "must not be NULL",
      app_append_ref_null_app),
    R(varlog_appender_flush, "NULL", INVAL, "appender is NULL", app_flush_null),
    R(varlog_appender_close, "NULL and *app NULL", OK, OK, app_close_null),
};

static const bi_row_t open_rows[] = {
    R(varlog_client_refresh, "timeout 0", INVAL, "timeout_ms 0", refresh_zero),
    R(varlog_client_refresh, "timeout -2", INVAL, "timeout_ms -2", refresh_below),
    R(varlog_client_refresh, "timeout INT64_MAX", OK, OK, refresh_huge),
    R(varlog_client_topics, "NULL n", INVAL, "must not be NULL", topics_null_n),
    R(varlog_client_topics, "NULL ids, cap 1", INVAL, "nor ids when cap > 0", topics_null_ids),
    R(varlog_client_topics, "NULL ids, cap 0", OK, OK, topics_cap_0),
    R(varlog_client_topics, "cap below the count", OK, OK, topics_cap_1),
    R(varlog_client_log_streams, "NULL n", INVAL, "must not be NULL", ls_null_n),
    R(varlog_client_log_streams, "NULL ids, cap 2", INVAL, "nor ids when cap > 0", ls_null_ids),
    R(varlog_client_log_streams, "cap below the count", OK, OK, ls_cap_1),
    R(varlog_client_log_streams, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99", ls_unknown),
    R(varlog_client_log_streams, "topic 0", VARLOG_ERR_UNKNOWN_TOPIC, "topic 0", ls_topic_0),
    R(varlog_client_log_streams, "topic INT32_MIN", VARLOG_ERR_UNKNOWN_TOPIC, "topic -2147483648",
      ls_topic_neg),
    R(varlog_client_appendable_log_streams, "NULL n", INVAL, "must not be NULL", ap_null_n),
    R(varlog_client_appendable_log_streams, "NULL ids, cap 1", INVAL, "nor ids when cap > 0",
      ap_null_ids),
    R(varlog_client_appendable_log_streams, "cap below the count", OK, OK, ap_cap_1),
    R(varlog_client_appendable_log_streams, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99",
      ap_unknown),
    R(varlog_append, "topic 0", INVAL, "topic id 0", append_topic_0),
    R(varlog_append, "topic INT32_MIN", INVAL, "topic id -2147483648", append_topic_neg),
    R(varlog_append, "NULL records", INVAL, "records is NULL", append_null_records),
    R(varlog_append, "n 0", INVAL, "n is 0", append_n_0),
    R(varlog_append, "a record of 0 bytes", INVAL, "record 0 of 1 is empty", append_empty),
    R(varlog_append, "a record with NULL data", INVAL, "record 0 of 1 is empty", append_null_data),
    R(varlog_append, "record above append.record.max.bytes", INVAL, "above append.record.max.bytes",
      append_record_big),
    R(varlog_append, "record of SIZE_MAX bytes", INVAL, "above append.record.max.bytes",
      append_record_huge),
    R(varlog_append, "n above append.batch.max.records", INVAL, "exceed append.batch.max.records",
      append_n_big),
    R(varlog_append, "n SIZE_MAX", INVAL, "exceed append.batch.max.records", append_n_huge),
    R(varlog_append, "bytes above append.batch.max.bytes", INVAL, "exceed append.batch.max.bytes",
      append_bytes_big),
    R(varlog_append, "timeout 0", INVAL, "timeout_ms 0", append_timeout_0),
    R(varlog_append, "timeout -2", INVAL, "timeout_ms -2", append_timeout_below),
    R(varlog_append, "timeout INT64_MIN", INVAL, "timeout_ms", append_timeout_min),
    R(varlog_append, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99", append_unknown_topic),
    R(varlog_append, "timeout INT64_MAX", OK, OK, append_timeout_huge),
    R(varlog_append, "at both call bounds", OK, OK, append_full_call),
    R(varlog_append_to, "log stream 0", INVAL, "log stream id 0", append_to_ls_0),
    R(varlog_append_to, "log stream -1", INVAL, "log stream id -1", append_to_ls_neg),
    R(varlog_append_to, "unknown log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM, "no log stream 99",
      append_to_unknown_ls),
    R(varlog_append_to, "another topic's log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM,
      "no log stream 3", append_to_other_topic),
    R(varlog_append_to, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99",
      append_to_unknown_topic),
    R(varlog_append_to, "NULL records", INVAL, "records is NULL", append_to_null_records),
    R(varlog_append_to, "timeout 0", INVAL, "timeout_ms 0", append_to_timeout_0),
    R(varlog_append_to, "timeout INT64_MAX", OK, OK, append_to_timeout_huge),
    R(varlog_stats_get, "NULL client, NULL out", INVAL, "NULL argument", stats_get_null),
    R(varlog_stats_json, "NULL json", INVAL, "NULL argument", stats_json_null_json),
    R(varlog_stats_json, "NULL len", OK, OK, stats_json_no_len),
    R(varlog_stats_json_free, "NULL", OK, OK, stats_json_no_len),
    R(varlog_stats_prometheus, "NULL text", INVAL, "NULL argument", stats_prometheus_null_text),
    R(varlog_stats_prometheus, "NULL len", OK, OK, stats_prometheus_no_len),
    R(varlog_stats_prometheus_free, "NULL", OK, OK, stats_prometheus_no_len),
    R(varlog_appender_new, "NULL out", INVAL, "must not be NULL", appender_new_null_out),
    R(varlog_appender_new, "topic 0", INVAL, "topic id 0", appender_new_topic_0),
    R(varlog_appender_new, "log stream -1", INVAL, "log stream id -1", appender_new_ls_neg),
    R(varlog_appender_new, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99",
      appender_new_unknown_topic),
    R(varlog_appender_new, "unknown log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM, "no log stream 99",
      appender_new_unknown_ls),
    R(varlog_appender_new, "another topic's log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM,
      "no log stream 3", appender_new_other_topic),
    R(varlog_appender_append, "NULL records", INVAL, "must not be NULL", app_append_null_records),
    R(varlog_appender_append, "NULL cb", INVAL, "must not be NULL", app_append_null_cb),
    R(varlog_appender_append, "n 0", INVAL, "n is 0", app_append_n_0),
    R(varlog_appender_append, "a record of 0 bytes", INVAL, "record 0 of 1 is empty",
      app_append_empty),
    R(varlog_appender_append, "a record with NULL data", INVAL, "record 0 of 1 is empty",
      app_append_null_data),
    R(varlog_appender_append, "record above append.record.max.bytes", INVAL,
      "above append.record.max.bytes", app_append_record_big),
    R(varlog_appender_append, "n above appender.batch.max.records", INVAL,
      "exceed appender.batch.max.records", app_append_n_big),
    R(varlog_appender_append, "n SIZE_MAX", INVAL, "exceed appender.batch.max.records",
      app_append_n_huge),
    R(varlog_appender_append, "bytes above appender.batch.max.bytes", INVAL,
      "exceed appender.batch.max.bytes", app_append_bytes_big),
    R(varlog_appender_append, "timeout -2", INVAL, "timeout_ms -2", app_append_timeout_below),
    R(varlog_appender_append, "timeout INT64_MAX", OK, OK, app_append_timeout_huge),
    R(varlog_appender_append_ex, "unknown flag", INVAL, "unknown flags 0x80",
      app_append_ex_unknown_flag),
    R(varlog_appender_append_ex, "both flags", OK, OK, app_append_ex_flags),
    R(varlog_appender_append_ref, "NULL release", INVAL, "release must not be NULL",
      app_append_ref_null_release),
    R(varlog_appender_append_ref, "record above append.record.max.bytes", INVAL,
      "above append.record.max.bytes", app_append_ref_record_big),
    R(varlog_appender_append_ref, "static bytes, a release that does nothing", OK, OK,
      app_append_ref_ok),
    R(varlog_appender_flush, "timeout -2", INVAL, "timeout_ms -2", app_flush_below),
    R(varlog_appender_flush, "timeout INT64_MAX", OK, OK, app_flush_huge),
    R(varlog_appender_close, "twice", OK, OK, app_close_twice),
    R(varlog_appender_stats, "NULL appender, NULL out", INVAL, "NULL argument", app_stats_null),
};

/* ---- inside an appender's callback, and while the client is being destroyed ---------------- */

CALL(own_flush, varlog_appender_flush(e->self, 1000, NULL))
ROW(own_close)
{
    varlog_appender_t *app = e->self;
    varlog_err_t rc = varlog_appender_close(&app, 1000);
    return app == e->self ? rc : bi_broken("a refused close cleared the handle");
}
/* Only the callback's return can make room, so a full queue refuses at once whatever the
 * timeout: the call in its callback still counts, and APP_MAX_RECORDS more exceed the queue. */
CALL(own_append_full,
     app_append(e->self, records(APP_MAX_RECORDS, 1), APP_MAX_RECORDS, -1, on_appended))
CALL(own_append_closing, app_append(e->self, &rec1, 1, -1, on_appended))
ROW(own_destroy)
{
    varlog_client_destroy(e->f.client);
    if (!strstr(varlog_last_error(), "nothing was destroyed"))
        return VARLOG_OK; /* not refused: the runner reports it (had it destroyed, a crash) */
    return varlog_client_applied_index(e->f.client) > 0 ? VARLOG_ERR_STATE
                                                        : bi_broken("applied index 0 after");
}
CALL(closing_append, append(e->f.client, 1, &rec1, 1, 1000))
CALL(closing_append_to, append_to(e->f.client, 1, 1, &rec1, 1, 1000))
CALL(closing_appender_new, appender_new(e->f.client, 1, 0, true))
CALL(closing_refresh, varlog_client_refresh(e->f.client, 1000))
CALL(closing_topics, list(topics_as_list, e->f.client, 0, true, 4, true))
CALL(closing_ls, list(varlog_client_log_streams, e->f.client, 1, true, 4, true))
CALL(closing_ap, list(varlog_client_appendable_log_streams, e->f.client, 1, true, 4, true))
ROW(closing_client_stats)
{
    varlog_client_stats_t st;
    return varlog_client_stats(e->f.client, &st);
}

static const bi_row_t callback_rows[] = {
    R(varlog_appender_flush, "from its own callback", VARLOG_ERR_STATE, "own callback", own_flush),
    R(varlog_appender_close, "from its own callback", VARLOG_ERR_STATE, "own callback", own_close),
    R(varlog_appender_append, "own appender full, timeout -1", VARLOG_ERR_QUEUE_FULL, "queue full",
      own_append_full),
    R(varlog_client_destroy, "from an append callback", VARLOG_ERR_STATE, "own threads",
      own_destroy),
};

static const bi_row_t closing_rows[] = {
    R(varlog_append, "client closing", CLOSED, "closing", closing_append),
    R(varlog_append_to, "client closing", CLOSED, "closing", closing_append_to),
    R(varlog_appender_new, "client closing", CLOSED, "closing", closing_appender_new),
    R(varlog_appender_append, "its appender closing", CLOSED, "closing", own_append_closing),
    R(varlog_appender_flush, "closing, from its own callback", VARLOG_ERR_STATE, "own callback",
      own_flush),
    R(varlog_appender_close, "closing, from its own callback", VARLOG_ERR_STATE, "own callback",
      own_close),
    R(varlog_client_refresh, "client closing", CLOSED, "closing", closing_refresh),
    R(varlog_client_topics, "client closing", CLOSED, "closing", closing_topics),
    R(varlog_client_log_streams, "client closing", CLOSED, "closing", closing_ls),
    R(varlog_client_appendable_log_streams, "client closing", CLOSED, "closing", closing_ap),
    R(varlog_client_stats, "client closing", OK, OK, closing_client_stats),
    R(varlog_client_destroy, "closing, from an append callback", VARLOG_ERR_STATE, "own threads",
      own_destroy),
};

/* ---- handles that outlive their client ----------------------------------------------------- */

ROW(after_app_close)
{
    varlog_err_t rc = varlog_appender_close(&e->app, 1000);
    if (rc != VARLOG_OK || e->app)
        return e->app ? bi_broken("*app not NULL after close") : rc;
    return varlog_appender_close(&e->app, 1000);
}
CALL(after_closer_close, varlog_appender_close(&e->self, 0))

static const bi_row_t after_rows[] = {
    R(varlog_appender_close, "client destroyed, then twice", OK, OK, after_app_close),
    R(varlog_appender_close, "client destroyed with a call in flight", OK, OK, after_closer_close),
};

/* ---- the tests ----------------------------------------------------------------------------- */

static bi_env_t env; /* not on a test's stack: a failed test's teardown still reaches it */

static void env_start(bi_env_t *e)
{
    memset(e, 0, sizeof(*e));
    varlog_server_opts_t o = {.topics = 1, .log_streams_per_topic = 1};
    varlog_server_t *dead = NULL;
    assert_int_equal(varlog_server_start(&o, &dead), VARLOG_OK);
    snprintf(e->dead_address, sizeof(e->dead_address), "%s", varlog_server_address(dead));
    varlog_server_destroy(dead);

    char n[4][16];
    snprintf(n[0], sizeof(n[0]), "%d", REC_MAX);
    snprintf(n[1], sizeof(n[1]), "%d", CALL_MAX_RECORDS);
    snprintf(n[2], sizeof(n[2]), "%d", CALL_MAX_BYTES);
    snprintf(n[3], sizeof(n[3]), "%d", APP_MAX_RECORDS);
    char app_bytes[16];
    snprintf(app_bytes, sizeof(app_bytes), "%d", APP_MAX_BYTES);
    cf_start(&e->f, 2, 2, "log.level", "emerg", "append.record.max.bytes", n[0],
             "append.batch.max.records", n[1], "append.batch.max.bytes", n[2],
             "appender.batch.max.records", n[3], "appender.queue.max.records", n[3],
             "appender.batch.max.bytes", app_bytes, "appender.queue.max.bytes", n[2], NULL);
    assert_int_equal(varlog_appender_new(e->f.client, 1, 0, &e->app), VARLOG_OK);
    assert_int_equal(varlog_subscribe_iter(e->f.client, TOPIC_READ, 1, VARLOG_GLSN_MAX, &e->iter),
                     VARLOG_OK);
    assert_int_equal(
        varlog_subscribe(e->f.client, TOPIC_READ, 1, VARLOG_GLSN_MAX, &bi_handlers, &e->hsub),
        VARLOG_OK);
}

static int teardown(void **state)
{
    (void)state;
    varlog_appender_close(&env.app, 0);
    varlog_subscription_close(&env.iter);
    varlog_subscription_close(&env.hsub);
    cf_stop(&env.f);
    varlog_appender_close(&env.self, 0);
    return 0;
}

/* Runs the tables of one context on this thread; the count of rows that answered wrong. */
static int run_tables(const char *context, const bi_table_t *tables, size_t n, bi_env_t *e)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += bi_run(context, tables[i].rows, tables[i].n, e);
    return bad;
}

static void test_rows_without_handles(void **state)
{
    (void)state;
    const bi_table_t t[] = {bi_conf_rows, TABLE(pure_rows)};
    assert_int_equal(run_tables("no handle", t, 2, &env), 0);
}

static void test_rows_open_client(void **state)
{
    (void)state;
    env_start(&env);
    const bi_table_t t[] = {bi_conf_open_rows, TABLE(open_rows), bi_read_rows};
    assert_int_equal(run_tables("open", t, 3, &env), 0);
}

/* The tables of one callback context: run once, on the appender's thread. */
typedef struct cb_run {
    bi_env_t *e;
    const char *context;
    bi_table_t tables[2];
    size_t n;
    atomic_int bad, runs;
} cb_run_t;

static void rows_cb(const varlog_append_result_t *r, void *opaque)
{
    (void)r;
    cb_run_t *run = opaque;
    if (atomic_fetch_add(&run->runs, 1) == 0)
        atomic_store(&run->bad, run_tables(run->context, run->tables, run->n, run->e));
}

static void test_rows_in_callback(void **state)
{
    (void)state;
    env_start(&env);
    cb_run_t run = {.e = &env, .context = "callback", .tables = {TABLE(callback_rows)}, .n = 1};
    env.self = env.app;
    assert_int_equal(varlog_appender_append(env.app, &rec1, 1, 1000, rows_cb, &run), VARLOG_OK);
    assert_int_equal(varlog_appender_flush(env.app, cf_wait_bound_ms(), NULL), VARLOG_OK);
    env.self = NULL;
    assert_int_equal(atomic_load(&run.runs), 1);
    assert_int_equal(atomic_load(&run.bad), 0);
}

/* Destroy closes the appenders first and their pending calls get CLOSED callbacks, on their
 * threads, while the client is closing but not yet freed: the one moment a client call can
 * see CLOSED from a handle that is still valid. A call held by the server is pending then. */
static void test_rows_while_closing_and_after(void **state)
{
    (void)state;
    env_start(&env);
    cb_run_t run = {.e = &env,
                    .context = "closing",
                    .tables = {TABLE(closing_rows), bi_read_closing_rows},
                    .n = 2};
    assert_int_equal(varlog_appender_new(env.f.client, 1, 2, &env.self), VARLOG_OK);
    assert_int_equal(varlog_server_delay(env.f.srv, CF_PATH_APPEND, 600000), VARLOG_OK);
    assert_int_equal(varlog_appender_append(env.self, &rec1, 1, 1000, rows_cb, &run), VARLOG_OK);
    assert_int_equal(varlog_appender_flush(env.self, 0, NULL), VARLOG_ERR_TIMED_OUT);
    cf_count_wait_t w = {env.f.srv, CF_PATH_APPEND, 0};
    assert_true(test_wait_until(cf_call_count_above, &w, cf_wait_bound_ms()));
    varlog_client_destroy(env.f.client);
    env.f.client = NULL;
    assert_int_equal(atomic_load(&run.runs), 1);
    assert_int_equal(atomic_load(&run.bad), 0);
    const bi_table_t t[] = {bi_read_after_rows, TABLE(after_rows)};
    assert_int_equal(run_tables("after destroy", t, 2, &env), 0);
}

static void test_every_function_has_a_row(void **state)
{
    (void)state;
    char headers[32][512];
    size_t n_headers = bi_public_headers(VARLOG_SOURCE_DIR, false, headers, 32);
    assert_true(n_headers <= 32);
    const bi_table_t tables[] = {bi_conf_rows,        bi_conf_open_rows,    TABLE(pure_rows),
                                 TABLE(open_rows),    bi_read_rows,         TABLE(callback_rows),
                                 TABLE(closing_rows), bi_read_closing_rows, TABLE(after_rows),
                                 bi_read_after_rows};
    size_t n_tables = sizeof(tables) / sizeof(tables[0]), missing = 0, rows = 0;
    for (size_t i = 0; i < n_headers; i++)
        missing += bi_uncovered(headers[i], tables, n_tables);
    for (size_t t = 0; t < n_tables; t++)
        rows += tables[t].n;
    printf("bad input: %zu rows over %zu functions of the client's %zu headers\n", rows,
           bi_count_functions(tables, n_tables), n_headers);
    assert_int_equal(missing, 0);
}

/* The check above reads declarations however they are written: a blank before '(', a name
 * of 64 characters or more, the name on the line after its type; and not what a comment or
 * a #define holds. With no rows at all, each declaration is one missing. */
static void test_declarations_read(void **state)
{
    (void)state;
    char path[] = "/tmp/bad_input_decl_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fprintf(f,
            "#define VARLOG_API __attribute__((visibility(\"default\")))\n"
            "/* VARLOG_API int varlog_in_a_comment(void); */\n"
            "// VARLOG_API int varlog_in_a_line_comment(void);\n"
            "VARLOG_API int varlog_spaced (int a);\n"
            "VARLOG_API const char *\nvarlog_%s\n    (void);\n"
            "VARLOG_API void varlog_plain(void);\n",
            "a_name_that_is_longer_than_sixty_four_characters_as_a_header_may_hold");
    fclose(f);
    size_t missing = bi_uncovered(path, NULL, 0);
    unlink(path);
    assert_int_equal(missing, 3);
}

int main(void)
{
    bi_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_rows_without_handles, teardown),
        cmocka_unit_test_teardown(test_rows_open_client, teardown),
        cmocka_unit_test_teardown(test_rows_in_callback, teardown),
        cmocka_unit_test_teardown(test_rows_while_closing_and_after, teardown),
        cmocka_unit_test(test_every_function_has_a_row),
        cmocka_unit_test(test_declarations_read),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    bi_fini();
    return failed;
}
