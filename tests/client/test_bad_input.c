/* Bad input, table-driven (issue 19, section 5): every public function of the client's headers
 * (client, conf, appender, subscribe, stats, log, error, version) called with NULL, zero,
 * oversized, unknown and out-of-range arguments, and on handles that are closing or closed,
 * must answer what its header documents, with a last error that says what is wrong. The rows
 * run in four places, because what a call may answer depends on where it is made: the test's
 * thread with everything open, an appender's own callback, an appender's callback while the
 * client is being destroyed, and the test's thread once the client is gone (the handles that
 * outlive it). The admin handle and the embedded server are test_bad_input_admin.c's. Leaks
 * are the valgrind copy's to find. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bad_input.h"
#include "client_fixture.h"
#include "test_support.h"
#include "varlog/varlog.h"

/* Limits small enough that rows can pass them with a few bytes (the cross-property rules of
 * conf.c hold: each batch bound within its call and queue bounds). */
#define REC_MAX 1024        /* append.record.max.bytes */
#define CALL_MAX_RECORDS 8  /* append.batch.max.records */
#define CALL_MAX_BYTES 4096 /* append.batch.max.bytes */
#define APP_MAX_RECORDS 4   /* appender.batch.max.records = appender.queue.max.records */
#define APP_MAX_BYTES 2048  /* appender.batch.max.bytes */
#define TOPIC_READ 2        /* the subscriptions' topic: nothing is appended to it */

struct bi_env {
    client_fixture_t f;
    varlog_appender_t *app;      /* topic 1, topic-wide */
    varlog_appender_t *self;     /* the appender whose callback runs the rows */
    varlog_subscription_t *iter; /* TOPIC_READ, iterator form */
    varlog_subscription_t *hsub; /* TOPIC_READ, handler form */
    char dead_address[64];       /* where nothing listens */
};

static char big[8192];
static const varlog_record_t rec1 = {.data = "x", .len = 1};

static void on_entry(const varlog_entry_t *entry, void *opaque)
{
    (void)entry, (void)opaque;
}

static void on_appended(const varlog_append_result_t *r, void *opaque)
{
    (void)r, (void)opaque;
}

static const varlog_subscribe_handlers_t handlers = {.on_entry = on_entry};
static const varlog_subscribe_handlers_t no_on_entry = {.on_entry = NULL};

#define ROW(name) static varlog_err_t name(bi_env_t *e)
#define CALL(name, expr)                                                                           \
    ROW(name)                                                                                      \
    {                                                                                              \
        (void)e;                                                                                   \
        return (expr);                                                                             \
    }

/* n records of len bytes each (at most 16). */
static const varlog_record_t *records(size_t n, size_t len)
{
    static _Thread_local varlog_record_t r[16];
    for (size_t i = 0; i < n && i < 16; i++)
        r[i] = (varlog_record_t){.data = big, .len = len};
    return r;
}

/* ---- names, errors, version: no handle ----------------------------------------------------- */

CALL(err_str_unknown,
     bi_expect_str("varlog_err_str(12345)", varlog_err_str((varlog_err_t)12345), "unknown error"))
CALL(err_name_unknown,
     varlog_err_name((varlog_err_t)-12345) ? VARLOG_OK : bi_broken("varlog_err_name gave NULL"))
CALL(err_retriable_unknown, varlog_err_is_retriable((varlog_err_t)12345)
                                ? bi_broken("an unknown code is retriable")
                                : VARLOG_OK)
CALL(outcome_unknown, bi_expect_str("outcome 99", varlog_outcome_name((varlog_outcome_t)99), "?"))
CALL(level_unknown, bi_expect_str("level -1", varlog_log_level_name((varlog_log_level_t)-1), "?"))
CALL(ctx_two_bits,
     bi_expect_str("ctx conf|rpc", varlog_log_ctx_name(VARLOG_LOG_CTX_CONF | VARLOG_LOG_CTX_RPC),
                   "?"))
CALL(ctx_zero, bi_expect_str("ctx 0", varlog_log_ctx_name((varlog_log_ctx_t)0), "?"))
CALL(ctx_past_last,
     bi_expect_str("ctx 1 << 6", varlog_log_ctx_name((varlog_log_ctx_t)(1 << 6)), "?"))
CALL(version_num,
     varlog_version() == VARLOG_VERSION_NUM
         ? VARLOG_OK
         : bi_broken("varlog_version %x, header %x", varlog_version(), VARLOG_VERSION_NUM))
ROW(version_str)
{
    (void)e;
    char want[32];
    snprintf(want, sizeof(want), "%d.%d.%d", VARLOG_VERSION_MAJOR, VARLOG_VERSION_MINOR,
             VARLOG_VERSION_PATCH);
    return bi_expect_str("varlog_version_str", varlog_version_str(), want);
}

static void *read_last_error(void *arg)
{
    *(const char **)arg = varlog_last_error();
    return NULL;
}

ROW(last_error_fresh_thread)
{
    (void)e;
    const char *text = NULL;
    pthread_t th;
    if (pthread_create(&th, NULL, read_last_error, &text) != 0)
        return bi_broken("no thread");
    pthread_join(th, NULL);
    return text && text[0] == '\0' ? VARLOG_OK : bi_broken("a new thread's last error is not \"\"");
}

/* ---- configuration ------------------------------------------------------------------------- */

/* varlog_conf_set on a fresh configuration, which must keep its value on failure and give
 * errstr the same text as the last error. */
static varlog_err_t conf_set(const char *name, const char *value)
{
    varlog_conf_t *conf = varlog_conf_new();
    if (!conf)
        return bi_broken("varlog_conf_new gave NULL");
    char before[64] = "", after[64] = "", errstr[256] = "untouched";
    size_t size = sizeof(before);
    bool known = name && varlog_conf_get(conf, name, before, &size) == VARLOG_OK;
    varlog_err_t rc = varlog_conf_set(conf, name, value, errstr, sizeof(errstr));
    size = sizeof(after);
    if (known)
        varlog_conf_get(conf, name, after, &size);
    varlog_conf_destroy(conf);
    /* errstr holds what fits of the last error */
    if (rc != VARLOG_OK && strncmp(errstr, varlog_last_error(), strlen(errstr)) != 0)
        return bi_broken("errstr \"%.40s...\" is not the last error", errstr);
    if (rc != VARLOG_OK && strcmp(before, after) != 0)
        return bi_broken("a refused value changed %s from %s to %s", name, before, after);
    return rc;
}

static char long_digits[65536], long_name[4096];

CALL(conf_set_null_conf, varlog_conf_set(NULL, "append.retries", "1", NULL, 0))
CALL(conf_set_null_name, conf_set(NULL, "1"))
CALL(conf_set_null_value, conf_set("append.retries", NULL))
CALL(conf_set_unknown, conf_set("append.retriez", "1"))
CALL(conf_set_empty_name, conf_set("", "1"))
CALL(conf_set_long_name, conf_set(long_name, "1"))
CALL(conf_set_above, conf_set("append.retries", "101"))
CALL(conf_set_below, conf_set("append.retries", "-1"))
CALL(conf_set_overflow, conf_set("append.retries", "99999999999999999999"))
CALL(conf_set_long_value, conf_set("append.retries", long_digits))
CALL(conf_set_long_bool, conf_set("append.retry.maybe.appended", long_digits))
CALL(conf_set_long_addr, conf_set("metadata.addresses", long_digits))
CALL(conf_set_not_int, conf_set("append.retries", "3x"))
CALL(conf_set_empty_int, conf_set("append.retries", ""))
CALL(conf_set_bool, conf_set("append.retry.maybe.appended", "perhaps"))
CALL(conf_set_enum, conf_set("log.level", "loud"))
CALL(conf_set_ctx_empty, conf_set("debug", "conf,,rpc"))
CALL(conf_set_ctx_unknown, conf_set("debug", "conf,disk"))
CALL(conf_set_addr_no_port, conf_set("metadata.addresses", "host"))
CALL(conf_set_addr_port_0, conf_set("metadata.addresses", "host:0"))
CALL(conf_set_addr_port_big, conf_set("metadata.addresses", "host:65536"))
CALL(conf_set_addr_empty_elem, conf_set("metadata.addresses", "a:1,,b:2"))
CALL(conf_set_addr_v6, conf_set("metadata.addresses", "::1:80"))
ROW(conf_set_errstr_sizes)
{
    (void)e;
    varlog_conf_t *conf = varlog_conf_new();
    char one[1] = {'x'}, none[4] = "abc";
    varlog_err_t rc = varlog_conf_set(conf, "append.retries", "x", NULL, 100);
    varlog_err_t rc1 = varlog_conf_set(conf, "append.retries", "x", one, sizeof(one));
    varlog_err_t rc0 = varlog_conf_set(conf, "append.retries", "x", none, 0);
    varlog_conf_destroy(conf);
    if (one[0] != '\0' || strcmp(none, "abc") != 0)
        return bi_broken("errstr of size 1 not \"\" or of size 0 written");
    return rc == rc1 && rc == rc0 ? rc : bi_broken("the answer depends on errstr");
}

ROW(conf_get_case)
{
    (void)e;
    varlog_conf_t *conf = varlog_conf_new();
    char value[64] = "", buf[4] = "abc";
    size_t size = 0, full = sizeof(value), small = 2;
    varlog_err_t rc = varlog_conf_get(conf, "log.level", NULL, &size);
    if (rc == VARLOG_OK)
        rc = varlog_conf_get(conf, "log.level", buf, &small);
    if (rc == VARLOG_OK)
        rc = varlog_conf_get(conf, "log.level", value, &full);
    varlog_conf_destroy(conf);
    if (rc != VARLOG_OK)
        return rc;
    if (size != strlen(value) + 1 || small != size || full != size || strcmp(buf, "abc") != 0)
        return bi_broken("sizes %zu/%zu/%zu for \"%s\", or a short buffer written", size, small,
                         full, value);
    return VARLOG_OK;
}

static varlog_err_t conf_get(bool with_conf, const char *name, bool with_size)
{
    varlog_conf_t *conf = with_conf ? varlog_conf_new() : NULL;
    size_t size = 8;
    char buf[8];
    varlog_err_t rc = varlog_conf_get(conf, name, buf, with_size ? &size : NULL);
    varlog_conf_destroy(conf);
    return rc;
}

CALL(conf_get_null_conf, conf_get(false, "log.level", true))
CALL(conf_get_null_name, conf_get(true, NULL, true))
CALL(conf_get_null_size, conf_get(true, "log.level", false))
CALL(conf_get_unknown, conf_get(true, "log.levels", true))
CALL(conf_dup_null, varlog_conf_dup(NULL) ? bi_broken("dup of NULL gave a copy") : VARLOG_OK)
ROW(conf_new_dup_destroy)
{
    (void)e;
    varlog_conf_t *conf = varlog_conf_new(), *copy = varlog_conf_dup(conf);
    bool ok = conf && copy;
    varlog_conf_destroy(copy);
    varlog_conf_destroy(conf);
    varlog_conf_destroy(NULL);
    return ok ? VARLOG_OK : bi_broken("new or dup gave NULL");
}
ROW(conf_set_cbs_null)
{
    (void)e;
    varlog_conf_set_log_cb(NULL, NULL, NULL);
    varlog_conf_set_stats_cb(NULL, NULL, NULL);
    return VARLOG_OK;
}
CALL(conf_property_past_end,
     varlog_conf_property_name(SIZE_MAX) ? bi_broken("a name past the table") : VARLOG_OK)
ROW(conf_property_end)
{
    (void)e;
    size_t n = 0;
    while (varlog_conf_property_name(n))
        n++;
    return n > 10 && !varlog_conf_property_name(n + 1) ? VARLOG_OK : bi_broken("%zu properties", n);
}

/* ---- opening a client ---------------------------------------------------------------------- */

/* varlog_client_new, which on failure must leave *conf to the caller, set *out to NULL and
 * give errstr the last error. Takes conf (NULL: a NULL *conf). */
static varlog_err_t client_new(varlog_conf_t *conf, bool with_out)
{
    varlog_conf_t *keep = conf;
    varlog_client_t *client = (varlog_client_t *)(uintptr_t)1;
    char errstr[512] = "";
    varlog_err_t rc = varlog_client_new(&conf, with_out ? &client : NULL, errstr, sizeof(errstr));
    if (rc == VARLOG_OK) {
        varlog_client_destroy(client);
        return rc;
    }
    varlog_conf_destroy(conf);
    if (conf != keep)
        return bi_broken("a failed open took *conf");
    if (with_out && client)
        return bi_broken("*out not NULL after a failed open");
    if (strcmp(errstr, varlog_last_error()) != 0)
        return bi_broken("errstr \"%s\" is not the last error", errstr);
    return rc;
}

static varlog_conf_t *conf_with(const char *name, const char *value, ...)
{
    varlog_conf_t *conf = varlog_conf_new();
    va_list ap;
    va_start(ap, value);
    for (; name; name = va_arg(ap, const char *), value = name ? va_arg(ap, const char *) : NULL)
        varlog_conf_set(conf, name, value, NULL, 0);
    va_end(ap);
    return conf;
}

CALL(client_new_null_conf_ptr, varlog_client_new(NULL, NULL, NULL, 0))
CALL(client_new_null_conf, client_new(NULL, true))
CALL(client_new_null_out, client_new(conf_with("metadata.addresses", "h:1", NULL), false))
CALL(client_new_no_address, client_new(varlog_conf_new(), true))
CALL(client_new_cross_rule,
     client_new(conf_with("metadata.addresses", "h:1", "append.retry.backoff.ms", "100",
                          "append.retry.backoff.max.ms", "50", NULL),
                true))
CALL(client_new_dead, client_new(conf_with("metadata.addresses", e->dead_address, "open.timeout.ms",
                                           "2000", "log.level", "emerg", NULL),
                                 true))
CALL(client_new_wrong_cluster,
     client_new(conf_with("metadata.addresses", varlog_server_address(e->f.srv), "cluster.id", "2",
                          "log.level", "emerg", NULL),
                true))

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

/* ---- subscriptions ------------------------------------------------------------------------- */

typedef enum { SUB, SUB_ITER, SUB_TO, SUB_TO_ITER } sub_form_t;

/* A subscribe call of any form (ls is for the _to forms), which on a failure with a client and
 * out given must leave *out NULL; one that succeeds is closed at once. */
static varlog_err_t subscribe(sub_form_t form, varlog_client_t *c, int32_t topic, int32_t ls,
                              uint64_t begin, uint64_t end, const varlog_subscribe_handlers_t *h,
                              bool with_out)
{
    varlog_subscription_t *sub = (varlog_subscription_t *)(uintptr_t)1;
    varlog_subscription_t **out = with_out ? &sub : NULL;
    varlog_err_t rc = form == SUB        ? varlog_subscribe(c, topic, begin, end, h, out)
                      : form == SUB_ITER ? varlog_subscribe_iter(c, topic, begin, end, out)
                      : form == SUB_TO   ? varlog_subscribe_to(c, topic, ls, begin, end, h, out)
                                         : varlog_subscribe_to_iter(c, topic, ls, begin, end, out);
    if (rc == VARLOG_OK) {
        varlog_subscription_close(&sub);
        return sub ? bi_broken("*sub not NULL after close") : rc;
    }
    return !c || !with_out || !sub ? rc : bi_broken("*out not NULL after a failure");
}

#define GLSN VARLOG_GLSN_MAX
CALL(sub_null_client, subscribe(SUB, NULL, 1, 0, 1, GLSN, &handlers, true))
CALL(sub_null_out, subscribe(SUB, e->f.client, 1, 0, 1, GLSN, &handlers, false))
CALL(sub_null_handlers, subscribe(SUB, e->f.client, 1, 0, 1, GLSN, NULL, true))
CALL(sub_null_on_entry, subscribe(SUB, e->f.client, 1, 0, 1, GLSN, &no_on_entry, true))
CALL(sub_topic_0, subscribe(SUB, e->f.client, 0, 0, 1, GLSN, &handlers, true))
CALL(sub_empty_range, subscribe(SUB, e->f.client, 1, 0, 5, 5, &handlers, true))
CALL(sub_reversed_range, subscribe(SUB, e->f.client, 1, 0, GLSN, 0, &handlers, true))
CALL(sub_unknown_topic, subscribe(SUB, e->f.client, 99, 0, 1, GLSN, &handlers, true))
CALL(sub_begin_0, subscribe(SUB, e->f.client, 1, 0, 0, 1, &handlers, true))
CALL(subi_null_client, subscribe(SUB_ITER, NULL, 1, 0, 1, GLSN, NULL, true))
CALL(subi_null_out, subscribe(SUB_ITER, e->f.client, 1, 0, 1, GLSN, NULL, false))
CALL(subi_topic_neg, subscribe(SUB_ITER, e->f.client, -1, 0, 1, GLSN, NULL, true))
CALL(subi_empty_range, subscribe(SUB_ITER, e->f.client, 1, 0, 0, 0, NULL, true))
CALL(subi_unknown_topic, subscribe(SUB_ITER, e->f.client, 99, 0, 1, GLSN, NULL, true))
CALL(subto_null_handlers, subscribe(SUB_TO, e->f.client, 1, 1, 1, GLSN, NULL, true))
CALL(subto_ls_0, subscribe(SUB_TO, e->f.client, 1, 0, 1, GLSN, &handlers, true))
CALL(subto_ls_neg, subscribe(SUB_TO, e->f.client, 1, INT32_MIN, 1, GLSN, &handlers, true))
CALL(subto_unknown_ls, subscribe(SUB_TO, e->f.client, 1, 99, 1, GLSN, &handlers, true))
CALL(subto_other_topic, subscribe(SUB_TO, e->f.client, 1, 3, 1, GLSN, &handlers, true))
CALL(subto_empty_range, subscribe(SUB_TO, e->f.client, 1, 1, 9, 3, &handlers, true))
CALL(subtoi_null_out, subscribe(SUB_TO_ITER, e->f.client, 1, 1, 1, GLSN, NULL, false))
CALL(subtoi_ls_0, subscribe(SUB_TO_ITER, e->f.client, 1, 0, 1, GLSN, NULL, true))
CALL(subtoi_unknown_ls, subscribe(SUB_TO_ITER, e->f.client, 1, 99, 1, GLSN, NULL, true))
CALL(subtoi_unknown_topic, subscribe(SUB_TO_ITER, e->f.client, 99, 1, 1, GLSN, NULL, true))

ROW(next_null_sub)
{
    (void)e;
    varlog_entry_t entry;
    return varlog_subscription_next(NULL, 0, &entry);
}
CALL(next_null_entry, varlog_subscription_next(e->iter, 0, NULL))
ROW(next_handler_form)
{
    varlog_entry_t entry;
    return varlog_subscription_next(e->hsub, 0, &entry);
}
ROW(next_nothing_yet)
{
    varlog_entry_t entry;
    return varlog_subscription_next(e->iter, 0, &entry);
}
ROW(next_below)
{
    varlog_entry_t entry;
    return varlog_subscription_next(e->iter, -2, &entry);
}
ROW(sub_stats_null)
{
    varlog_subscription_stats_t st;
    varlog_err_t rc = varlog_subscription_stats(NULL, &st);
    return rc == varlog_subscription_stats(e->iter, NULL) ? rc
                                                          : bi_broken("NULL out answered apart");
}
ROW(sub_close_null)
{
    (void)e;
    varlog_subscription_t *sub = NULL;
    varlog_subscription_close(NULL);
    varlog_subscription_close(&sub);
    return VARLOG_OK;
}
ROW(sub_close_twice)
{
    varlog_subscription_t *sub = NULL;
    varlog_err_t rc = varlog_subscribe_iter(e->f.client, TOPIC_READ, 1, GLSN, &sub);
    if (rc != VARLOG_OK)
        return rc;
    varlog_subscription_close(&sub);
    if (sub)
        return bi_broken("*sub not NULL after close");
    varlog_subscription_close(&sub);
    return VARLOG_OK;
}

/* ---- peek and trim ------------------------------------------------------------------------- */

static varlog_err_t peek(varlog_client_t *c, int32_t topic, int32_t ls, int64_t timeout_ms,
                         bool with_first, bool with_last)
{
    varlog_entry_meta_t first = {.glsn = 77}, last = {.glsn = 77};
    varlog_err_t rc = varlog_peek(c, topic, ls, timeout_ms, with_first ? &first : NULL,
                                  with_last ? &last : NULL, NULL);
    if (rc != VARLOG_OK && (first.glsn != 77 || last.glsn != 77))
        return bi_broken("first or last written on failure");
    return rc;
}

CALL(peek_null_client, peek(NULL, 1, 1, 1000, true, true))
CALL(peek_null_first, peek(e->f.client, 1, 1, 1000, false, true))
CALL(peek_null_last, peek(e->f.client, 1, 1, 1000, true, false))
CALL(peek_topic_0, peek(e->f.client, 0, 1, 1000, true, true))
CALL(peek_ls_0, peek(e->f.client, 1, 0, 1000, true, true))
CALL(peek_timeout_0, peek(e->f.client, 1, 1, 0, true, true))
CALL(peek_timeout_below, peek(e->f.client, 1, 1, -2, true, true))
CALL(peek_unknown_topic, peek(e->f.client, 99, 1, 5000, true, true))
CALL(peek_unknown_ls, peek(e->f.client, 1, 99, 5000, true, true))
CALL(peek_other_topic, peek(e->f.client, 1, 3, 5000, true, true))
CALL(peek_timeout_huge, peek(e->f.client, 1, 1, INT64_MAX, true, true))
CALL(trim_null_client, varlog_trim(NULL, 1, 1, 1000))
CALL(trim_topic_0, varlog_trim(e->f.client, 0, 1, 1000))
CALL(trim_until_0, varlog_trim(e->f.client, 1, 0, 1000))
CALL(trim_until_max, varlog_trim(e->f.client, 1, VARLOG_GLSN_MAX, 1000))
CALL(trim_timeout_0, varlog_trim(e->f.client, 1, 1, 0))
CALL(trim_timeout_below, varlog_trim(e->f.client, 1, 1, -2))
CALL(trim_unknown_topic, varlog_trim(e->f.client, 99, 1, 5000))
CALL(trim_timeout_huge, varlog_trim(e->f.client, 1, 1, INT64_MAX))

#define R(fn, input, want, text, call)                                                             \
    {                                                                                              \
#fn, input, want, 0, text, call                                                            \
    }
#define R2(fn, input, want, alt, text, call)                                                       \
    {                                                                                              \
#fn, input, want, alt, text, call                                                          \
    }
#define OK VARLOG_OK
#define INVAL VARLOG_ERR_INVALID_ARG

static const bi_row_t pure_rows[] = {
    R(varlog_err_str, "unknown code", OK, OK, err_str_unknown),
    R(varlog_err_name, "unknown code", OK, OK, err_name_unknown),
    R(varlog_err_is_retriable, "unknown code", OK, OK, err_retriable_unknown),
    R(varlog_last_error, "a thread that never failed", OK, OK, last_error_fresh_thread),
    R(varlog_outcome_name, "99", OK, OK, outcome_unknown),
    R(varlog_log_level_name, "-1", OK, OK, level_unknown),
    R(varlog_log_ctx_name, "two bits", OK, OK, ctx_two_bits),
    R(varlog_log_ctx_name, "0", OK, OK, ctx_zero),
    R(varlog_log_ctx_name, "past the last", OK, OK, ctx_past_last),
    R(varlog_version, "against the header", OK, OK, version_num),
    R(varlog_version_str, "against the header", OK, OK, version_str),
    R(varlog_conf_set, "NULL conf", INVAL, "conf is NULL", conf_set_null_conf),
    R(varlog_conf_set, "NULL name", INVAL, "name is NULL", conf_set_null_name),
    R(varlog_conf_set, "NULL value", INVAL, "value is NULL", conf_set_null_value),
    R(varlog_conf_set, "unknown name", INVAL, "unknown property", conf_set_unknown),
    R(varlog_conf_set, "empty name", INVAL, "unknown property", conf_set_empty_name),
    R(varlog_conf_set, "4 KiB name", INVAL, "unknown property", conf_set_long_name),
    R(varlog_conf_set, "above the range", INVAL, "out of range [0, 100]", conf_set_above),
    R(varlog_conf_set, "below the range", INVAL, "out of range", conf_set_below),
    R(varlog_conf_set, "beyond int64", INVAL, "out of range", conf_set_overflow),
    R(varlog_conf_set, "64 KiB of digits", INVAL, "out of range", conf_set_long_value),
    R(varlog_conf_set, "64 KiB boolean", INVAL, "not a boolean", conf_set_long_bool),
    R(varlog_conf_set, "64 KiB address", INVAL, "not host:port", conf_set_long_addr),
    R(varlog_conf_set, "not an integer", INVAL, "not an integer", conf_set_not_int),
    R(varlog_conf_set, "empty integer", INVAL, "not an integer", conf_set_empty_int),
    R(varlog_conf_set, "not a boolean", INVAL, "not a boolean", conf_set_bool),
    R(varlog_conf_set, "unknown level", INVAL, "is not one of", conf_set_enum),
    R(varlog_conf_set, "empty context", INVAL, "empty element", conf_set_ctx_empty),
    R(varlog_conf_set, "unknown context", INVAL, "\"disk\" is not one of", conf_set_ctx_unknown),
    R(varlog_conf_set, "address without port", INVAL, "not host:port", conf_set_addr_no_port),
    R(varlog_conf_set, "port 0", INVAL, "out of range [1, 65535]", conf_set_addr_port_0),
    R(varlog_conf_set, "port 65536", INVAL, "out of range [1, 65535]", conf_set_addr_port_big),
    R(varlog_conf_set, "empty address", INVAL, "empty element", conf_set_addr_empty_elem),
    R(varlog_conf_set, "IPv6 without brackets", INVAL, "brackets", conf_set_addr_v6),
    R(varlog_conf_set, "errstr NULL, size 1, size 0", INVAL, "not an integer",
      conf_set_errstr_sizes),
    R(varlog_conf_get, "NULL or short buffer", OK, OK, conf_get_case),
    R(varlog_conf_get, "NULL conf", INVAL, "conf is NULL", conf_get_null_conf),
    R(varlog_conf_get, "NULL name", INVAL, "name is NULL", conf_get_null_name),
    R(varlog_conf_get, "NULL size", INVAL, "size is NULL", conf_get_null_size),
    R(varlog_conf_get, "unknown name", INVAL, "unknown property", conf_get_unknown),
    R(varlog_conf_dup, "NULL", OK, OK, conf_dup_null),
    R(varlog_conf_new, "new, dup, destroy, destroy NULL", OK, OK, conf_new_dup_destroy),
    R(varlog_conf_dup, "new, dup, destroy, destroy NULL", OK, OK, conf_new_dup_destroy),
    R(varlog_conf_destroy, "NULL", OK, OK, conf_new_dup_destroy),
    R(varlog_conf_set_log_cb, "NULL conf", OK, OK, conf_set_cbs_null),
    R(varlog_conf_set_stats_cb, "NULL conf", OK, OK, conf_set_cbs_null),
    R(varlog_conf_property_name, "SIZE_MAX", OK, OK, conf_property_past_end),
    R(varlog_conf_property_name, "just past the end", OK, OK, conf_property_end),
    R(varlog_client_new, "NULL conf pointer", INVAL, "must not be NULL", client_new_null_conf_ptr),
    R(varlog_client_new, "NULL *conf", INVAL, "must not be NULL", client_new_null_conf),
    R(varlog_client_new, "NULL out", INVAL, "must not be NULL", client_new_null_out),
    R(varlog_client_new, "metadata.addresses unset", INVAL, "metadata.addresses is not set",
      client_new_no_address),
    R(varlog_client_new, "backoff above its max", INVAL, "is greater than append.retry.backoff.max",
      client_new_cross_rule),
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
    R(varlog_appender_new, "NULL client", INVAL, "must not be NULL", appender_new_null_client),
    R(varlog_appender_append, "NULL appender", INVAL, "must not be NULL", app_append_null_app),
    R(varlog_appender_flush, "NULL", INVAL, "appender is NULL", app_flush_null),
    R(varlog_appender_close, "NULL and *app NULL", OK, OK, app_close_null),
    R(varlog_subscribe, "NULL client", INVAL, "client is NULL", sub_null_client),
    R(varlog_subscribe_iter, "NULL client", INVAL, "client is NULL", subi_null_client),
    R(varlog_subscription_next, "NULL", INVAL, "sub is NULL", next_null_sub),
    R(varlog_subscription_close, "NULL and *sub NULL", OK, OK, sub_close_null),
    R(varlog_peek, "NULL client", INVAL, "client is NULL", peek_null_client),
    R(varlog_trim, "NULL client", INVAL, "client is NULL", trim_null_client),
};

static const bi_row_t open_rows[] = {
    R2(varlog_client_new, "nothing listens", VARLOG_ERR_RPC_UNAVAILABLE, VARLOG_ERR_TIMED_OUT,
       "127.0.0.1", client_new_dead),
    R(varlog_client_new, "another cluster id", VARLOG_ERR_STATE, "cluster id",
      client_new_wrong_cluster),
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
    R(varlog_appender_flush, "timeout -2", INVAL, "timeout_ms -2", app_flush_below),
    R(varlog_appender_flush, "timeout INT64_MAX", OK, OK, app_flush_huge),
    R(varlog_appender_close, "twice", OK, OK, app_close_twice),
    R(varlog_appender_stats, "NULL appender, NULL out", INVAL, "NULL argument", app_stats_null),
    R(varlog_subscribe, "NULL out", INVAL, "out is NULL", sub_null_out),
    R(varlog_subscribe, "NULL handlers", INVAL, "handlers is NULL", sub_null_handlers),
    R(varlog_subscribe, "NULL on_entry", INVAL, "on_entry is NULL", sub_null_on_entry),
    R(varlog_subscribe, "topic 0", INVAL, "topic id 0", sub_topic_0),
    R(varlog_subscribe, "begin = end", INVAL, "empty range", sub_empty_range),
    R(varlog_subscribe, "begin > end", INVAL, "empty range", sub_reversed_range),
    R(varlog_subscribe, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99", sub_unknown_topic),
    R(varlog_subscribe, "[0, 1)", OK, OK, sub_begin_0),
    R(varlog_subscribe_iter, "NULL out", INVAL, "out is NULL", subi_null_out),
    R(varlog_subscribe_iter, "topic -1", INVAL, "topic id -1", subi_topic_neg),
    R(varlog_subscribe_iter, "[0, 0)", INVAL, "empty range", subi_empty_range),
    R(varlog_subscribe_iter, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99",
      subi_unknown_topic),
    R(varlog_subscribe_to, "NULL handlers", INVAL, "handlers is NULL", subto_null_handlers),
    R(varlog_subscribe_to, "log stream 0", INVAL, "log stream id 0", subto_ls_0),
    R(varlog_subscribe_to, "log stream INT32_MIN", INVAL, "log stream id -2147483648",
      subto_ls_neg),
    R(varlog_subscribe_to, "unknown log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM, "no log stream 99",
      subto_unknown_ls),
    R(varlog_subscribe_to, "another topic's log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM,
      "no log stream 3", subto_other_topic),
    R(varlog_subscribe_to, "begin > end", INVAL, "empty range", subto_empty_range),
    R(varlog_subscribe_to_iter, "NULL out", INVAL, "out is NULL", subtoi_null_out),
    R(varlog_subscribe_to_iter, "log stream 0", INVAL, "log stream id 0", subtoi_ls_0),
    R(varlog_subscribe_to_iter, "unknown log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM,
      "no log stream 99", subtoi_unknown_ls),
    R(varlog_subscribe_to_iter, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99",
      subtoi_unknown_topic),
    R(varlog_subscription_next, "NULL entry", INVAL, "entry is NULL", next_null_entry),
    R(varlog_subscription_next, "a handler-form subscription", VARLOG_ERR_STATE, "handlers",
      next_handler_form),
    R(varlog_subscription_next, "timeout 0, nothing buffered", VARLOG_ERR_TIMED_OUT,
      "no entry within 0 ms", next_nothing_yet),
    R(varlog_subscription_next, "timeout -2", INVAL, "timeout_ms -2", next_below),
    R(varlog_subscription_stats, "NULL sub, NULL out", INVAL, "is NULL", sub_stats_null),
    R(varlog_subscription_close, "twice", OK, OK, sub_close_twice),
    R(varlog_peek, "NULL first", INVAL, "first is NULL", peek_null_first),
    R(varlog_peek, "NULL last", INVAL, "last is NULL", peek_null_last),
    R(varlog_peek, "topic 0", INVAL, "topic id 0", peek_topic_0),
    R(varlog_peek, "log stream 0", INVAL, "log stream id 0", peek_ls_0),
    R(varlog_peek, "timeout 0", INVAL, "timeout_ms 0", peek_timeout_0),
    R(varlog_peek, "timeout -2", INVAL, "timeout_ms -2", peek_timeout_below),
    R(varlog_peek, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99", peek_unknown_topic),
    R(varlog_peek, "unknown log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM, "no log stream 99",
      peek_unknown_ls),
    R(varlog_peek, "another topic's log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM, "no log stream 3",
      peek_other_topic),
    R(varlog_peek, "timeout INT64_MAX", OK, OK, peek_timeout_huge),
    R(varlog_trim, "topic 0", INVAL, "topic id 0", trim_topic_0),
    R(varlog_trim, "until 0", INVAL, "until_glsn 0", trim_until_0),
    R(varlog_trim, "until VARLOG_GLSN_MAX", INVAL, "until_glsn 18446744073709551615",
      trim_until_max),
    R(varlog_trim, "timeout 0", INVAL, "timeout_ms 0", trim_timeout_0),
    R(varlog_trim, "timeout -2", INVAL, "timeout_ms -2", trim_timeout_below),
    R(varlog_trim, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99", trim_unknown_topic),
    R(varlog_trim, "timeout INT64_MAX", OK, OK, trim_timeout_huge),
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
CALL(closing_sub, subscribe(SUB, e->f.client, 1, 0, 1, GLSN, &handlers, true))
CALL(closing_subi, subscribe(SUB_ITER, e->f.client, 1, 0, 1, GLSN, NULL, true))
CALL(closing_subto, subscribe(SUB_TO, e->f.client, 1, 1, 1, GLSN, &handlers, true))
CALL(closing_subtoi, subscribe(SUB_TO_ITER, e->f.client, 1, 1, 1, GLSN, NULL, true))
CALL(closing_peek, peek(e->f.client, 1, 1, 1000, true, true))
CALL(closing_trim, varlog_trim(e->f.client, 1, 1, 1000))
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

#define CLOSED VARLOG_ERR_CLOSED
static const bi_row_t closing_rows[] = {
    R(varlog_append, "client closing", CLOSED, "closing", closing_append),
    R(varlog_append_to, "client closing", CLOSED, "closing", closing_append_to),
    R(varlog_appender_new, "client closing", CLOSED, "closing", closing_appender_new),
    R(varlog_appender_append, "its appender closing", CLOSED, "closing", own_append_closing),
    R(varlog_appender_flush, "closing, from its own callback", VARLOG_ERR_STATE, "own callback",
      own_flush),
    R(varlog_appender_close, "closing, from its own callback", VARLOG_ERR_STATE, "own callback",
      own_close),
    R(varlog_subscribe, "client closing", CLOSED, "closing", closing_sub),
    R(varlog_subscribe_iter, "client closing", CLOSED, "closing", closing_subi),
    R(varlog_subscribe_to, "client closing", CLOSED, "closing", closing_subto),
    R(varlog_subscribe_to_iter, "client closing", CLOSED, "closing", closing_subtoi),
    R(varlog_peek, "client closing", CLOSED, "closing", closing_peek),
    R(varlog_trim, "client closing", CLOSED, "closing", closing_trim),
    R(varlog_client_refresh, "client closing", CLOSED, "closing", closing_refresh),
    R(varlog_client_topics, "client closing", CLOSED, "closing", closing_topics),
    R(varlog_client_log_streams, "client closing", CLOSED, "closing", closing_ls),
    R(varlog_client_appendable_log_streams, "client closing", CLOSED, "closing", closing_ap),
    R(varlog_client_stats, "client closing", OK, OK, closing_client_stats),
    R(varlog_client_destroy, "closing, from an append callback", VARLOG_ERR_STATE, "own threads",
      own_destroy),
};

/* ---- handles that outlive their client ----------------------------------------------------- */

CALL(after_next_iter, next_nothing_yet(e))
CALL(after_next_handler, next_handler_form(e))
ROW(after_sub_stats)
{
    varlog_subscription_stats_t st;
    return varlog_subscription_stats(e->iter, &st);
}
/* Frees what the client's destroy left (the valgrind copy sees a leak otherwise), twice. */
ROW(after_sub_close)
{
    varlog_subscription_close(&e->iter);
    varlog_subscription_close(&e->hsub);
    varlog_subscription_close(&e->iter);
    return e->iter || e->hsub ? bi_broken("*sub not NULL after close") : VARLOG_OK;
}
ROW(after_app_close)
{
    varlog_err_t rc = varlog_appender_close(&e->app, 1000);
    if (rc != VARLOG_OK || e->app)
        return e->app ? bi_broken("*app not NULL after close") : rc;
    return varlog_appender_close(&e->app, 1000);
}
CALL(after_closer_close, varlog_appender_close(&e->self, 0))

static const bi_row_t after_rows[] = {
    R(varlog_subscription_next, "client destroyed", CLOSED, "closed", after_next_iter),
    R(varlog_subscription_next, "client destroyed, handler form", VARLOG_ERR_STATE, "handlers",
      after_next_handler),
    R(varlog_subscription_stats, "client destroyed", OK, OK, after_sub_stats),
    R(varlog_subscription_close, "client destroyed, then twice", OK, OK, after_sub_close),
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
    assert_int_equal(varlog_subscribe_iter(e->f.client, TOPIC_READ, 1, GLSN, &e->iter), VARLOG_OK);
    assert_int_equal(varlog_subscribe(e->f.client, TOPIC_READ, 1, GLSN, &handlers, &e->hsub),
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

static void test_rows_without_handles(void **state)
{
    (void)state;
    assert_int_equal(bi_run("no handle", pure_rows, sizeof(pure_rows) / sizeof(pure_rows[0]), &env),
                     0);
}

static void test_rows_open_client(void **state)
{
    (void)state;
    env_start(&env);
    assert_int_equal(bi_run("open", open_rows, sizeof(open_rows) / sizeof(open_rows[0]), &env), 0);
}

/* The rows of one callback context: run once, on the appender's thread. */
typedef struct cb_run {
    bi_env_t *e;
    const char *context;
    const bi_row_t *rows;
    size_t n;
    atomic_int bad, runs;
} cb_run_t;

static void rows_cb(const varlog_append_result_t *r, void *opaque)
{
    (void)r;
    cb_run_t *run = opaque;
    if (atomic_fetch_add(&run->runs, 1) == 0)
        atomic_store(&run->bad, bi_run(run->context, run->rows, run->n, run->e));
}

static void test_rows_in_callback(void **state)
{
    (void)state;
    env_start(&env);
    cb_run_t run = {.e = &env,
                    .context = "callback",
                    .rows = callback_rows,
                    .n = sizeof(callback_rows) / sizeof(callback_rows[0])};
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
                    .rows = closing_rows,
                    .n = sizeof(closing_rows) / sizeof(closing_rows[0])};
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
    assert_int_equal(
        bi_run("after destroy", after_rows, sizeof(after_rows) / sizeof(after_rows[0]), &env), 0);
}

#define TABLE(t)                                                                                   \
    {                                                                                              \
        t, sizeof(t) / sizeof(t[0])                                                                \
    }
static const bi_table_t tables[] = {TABLE(pure_rows), TABLE(open_rows), TABLE(callback_rows),
                                    TABLE(closing_rows), TABLE(after_rows)};

static void test_every_function_has_a_row(void **state)
{
    (void)state;
    static const char *const headers[] = {"client.h", "conf.h",  "appender.h", "subscribe.h",
                                          "stats.h",  "error.h", "log.h",      "version.h"};
    size_t n_tables = sizeof(tables) / sizeof(tables[0]), missing = 0, rows = 0;
    for (size_t i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/client/include/varlog/%s", VARLOG_SOURCE_DIR, headers[i]);
        missing += bi_uncovered(path, tables, n_tables);
    }
    for (size_t t = 0; t < n_tables; t++)
        rows += tables[t].n;
    printf("bad input: %zu rows over %zu functions of the client's headers\n", rows,
           bi_count_functions(tables, n_tables));
    assert_int_equal(missing, 0);
}

int main(void)
{
    memset(long_digits, '9', sizeof(long_digits) - 1);
    memset(long_name, 'n', sizeof(long_name) - 1);
    bi_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_rows_without_handles, teardown),
        cmocka_unit_test_teardown(test_rows_open_client, teardown),
        cmocka_unit_test_teardown(test_rows_in_callback, teardown),
        cmocka_unit_test_teardown(test_rows_while_closing_and_after, teardown),
        cmocka_unit_test(test_every_function_has_a_row),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    bi_fini();
    return failed;
}
