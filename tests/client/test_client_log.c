/* The client's logging: levels, contexts, the debug property, the callback's thread rules
 * (it runs with no library lock held and may call back into the client). */
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

#include <cmocka.h>

#include "client_fixture.h"
#include "test_support.h"
#include "varlog/subscribe.h"

/* ---- recording callback
 * -------------------------------------------------------------------------- */

#define REC_LINES 256

typedef struct rec_line {
    varlog_log_level_t level;
    varlog_log_ctx_t ctx;
    char message[256];
} rec_line_t;

typedef struct log_rec {
    pthread_mutex_t mu;
    rec_line_t lines[REC_LINES];
    size_t n;         /* lines seen (may exceed REC_LINES: only the first are kept) */
    size_t malformed; /* NULL message or one ending in a newline */
    _Atomic(varlog_client_t *) client; /* published once the client is open */
    atomic_int client_calls;           /* callbacks that called into the published client */
    atomic_bool refresh_from_cb;       /* once: refresh from inside a metadata line */
    atomic_int nested_rc;              /* what that refresh returned */
} log_rec_t;

/* On the heap: a recorder holds REC_LINES lines. */
static log_rec_t *rec_new(void)
{
    log_rec_t *r = malloc(sizeof(*r));
    assert_non_null(r);
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    atomic_init(&r->client, NULL);
    atomic_init(&r->client_calls, 0);
    return r;
}

static void rec_free(log_rec_t *r)
{
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* A 1 x 1 server without a client: each test opens its client with its own recorder. */
static void server_only(client_fixture_t *f)
{
    memset(f, 0, sizeof(*f));
    varlog_server_opts_t o = {.topics = 1, .log_streams_per_topic = 1};
    assert_int_equal(varlog_server_start(&o, &f->srv), VARLOG_OK);
}

static void rec_cb(void *opaque, varlog_log_level_t level, varlog_log_ctx_t ctx,
                   const char *message)
{
    log_rec_t *r = opaque;
    /* The library must not hold its locks while calling back: these would deadlock. */
    varlog_client_t *c = atomic_load(&r->client);
    if (c) {
        varlog_client_stats_t s;
        (void)varlog_client_applied_index(c);
        (void)varlog_client_stats(c, &s);
        int32_t ids[8];
        size_t n = 0;
        (void)varlog_client_topics(c, ids, 8, &n);
        atomic_fetch_add(&r->client_calls, 1);
        if (ctx == VARLOG_LOG_CTX_METADATA && atomic_exchange(&r->refresh_from_cb, false))
            atomic_store(&r->nested_rc, varlog_client_refresh(c, 5000));
    }
    pthread_mutex_lock(&r->mu);
    size_t len = message ? strlen(message) : 0;
    if (!message || (len > 0 && message[len - 1] == '\n'))
        r->malformed++;
    if (r->n < REC_LINES) {
        rec_line_t *l = &r->lines[r->n];
        l->level = level;
        l->ctx = ctx;
        snprintf(l->message, sizeof(l->message), "%s", message ? message : "");
    }
    r->n++;
    pthread_mutex_unlock(&r->mu);
}

static size_t rec_count(log_rec_t *r)
{
    pthread_mutex_lock(&r->mu);
    size_t n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static void rec_dump(log_rec_t *r)
{
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n && i < REC_LINES; i++)
        print_message("  [%zu] %s [%s] %s\n", i, varlog_log_level_name(r->lines[i].level),
                      varlog_log_ctx_name(r->lines[i].ctx), r->lines[i].message);
    pthread_mutex_unlock(&r->mu);
}

/* Index of the first line from `from` on with this level, context and text; -1 if none. */
static long rec_find(log_rec_t *r, size_t from, varlog_log_level_t level, varlog_log_ctx_t ctx,
                     const char *text)
{
    long found = -1;
    pthread_mutex_lock(&r->mu);
    for (size_t i = from; i < r->n && i < REC_LINES && found < 0; i++) {
        const rec_line_t *l = &r->lines[i];
        if (l->level == level && l->ctx == ctx && strstr(l->message, text))
            found = (long)i;
    }
    pthread_mutex_unlock(&r->mu);
    return found;
}

/* Opens a client on f->srv logging to r, with the given pairs; publishes it to r. */
static void open_logged(client_fixture_t *f, log_rec_t *r, ...)
{
    va_list ap;
    va_start(ap, r);
    varlog_conf_t *conf = cf_conf_va(f, ap);
    va_end(ap);
    varlog_conf_set_log_cb(conf, rec_cb, r);
    char err[512];
    varlog_err_t rc = varlog_client_new(&conf, &f->client, err, sizeof(err));
    if (rc != VARLOG_OK)
        fail_msg("varlog_client_new: %s: %s", varlog_err_name(rc), err);
    atomic_store(&r->client, f->client);
}

/* Unpublishes the client, then destroys client and server. */
static void close_logged(client_fixture_t *f, log_rec_t *r)
{
    atomic_store(&r->client, NULL);
    cf_stop(f);
}

static void test_log_names(void **state)
{
    (void)state;
    assert_string_equal(varlog_log_level_name(VARLOG_LOG_EMERG), "EMERG");
    assert_string_equal(varlog_log_level_name(VARLOG_LOG_ERR), "ERR");
    assert_string_equal(varlog_log_level_name(VARLOG_LOG_WARNING), "WARNING");
    assert_string_equal(varlog_log_level_name(VARLOG_LOG_INFO), "INFO");
    assert_string_equal(varlog_log_level_name(VARLOG_LOG_DEBUG), "DEBUG");
    assert_string_equal(varlog_log_level_name((varlog_log_level_t)8), "?");
    assert_string_equal(varlog_log_level_name((varlog_log_level_t)-1), "?");
    assert_string_equal(varlog_log_ctx_name(VARLOG_LOG_CTX_CONF), "conf");
    assert_string_equal(varlog_log_ctx_name(VARLOG_LOG_CTX_RPC), "rpc");
    assert_string_equal(varlog_log_ctx_name(VARLOG_LOG_CTX_METADATA), "metadata");
    assert_string_equal(varlog_log_ctx_name(VARLOG_LOG_CTX_APPEND), "append");
    assert_string_equal(varlog_log_ctx_name(VARLOG_LOG_CTX_SUBSCRIBE), "subscribe");
    assert_string_equal(varlog_log_ctx_name(VARLOG_LOG_CTX_RETRY), "retry");
    assert_string_equal(
        varlog_log_ctx_name((varlog_log_ctx_t)(VARLOG_LOG_CTX_CONF | VARLOG_LOG_CTX_RPC)), "?");
    assert_string_equal(varlog_log_ctx_name((varlog_log_ctx_t)0), "?");
}

static void test_log_info_on_open(void **state)
{
    (void)state;
    log_rec_t *r = rec_new();
    client_fixture_t f;
    server_only(&f);
    open_logged(&f, r, "log.level", "info", NULL);
    long i = rec_find(r, 0, VARLOG_LOG_INFO, VARLOG_LOG_CTX_CONF, "client open");
    if (i < 0) {
        rec_dump(r);
        fail_msg("no INFO [conf] \"client open\" line");
    }
    assert_string_equal(varlog_log_level_name(r->lines[i].level), "INFO");
    assert_string_equal(varlog_log_ctx_name(r->lines[i].ctx), "conf");
    /* the line names where the metadata came from */
    assert_non_null(strstr(r->lines[i].message, varlog_server_address(f.srv)));
    /* info does not let DEBUG lines through */
    int32_t topic = 0;
    assert_int_equal(varlog_server_add_topic(f.srv, &topic), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(f.client, -1), VARLOG_OK);
    close_logged(&f, r);
    pthread_mutex_lock(&r->mu);
    for (size_t k = 0; k < r->n && k < REC_LINES; k++)
        assert_true(r->lines[k].level <= VARLOG_LOG_INFO);
    assert_int_equal(r->malformed, 0);
    pthread_mutex_unlock(&r->mu);
    rec_free(r);
}

static void test_log_debug_metadata_only(void **state)
{
    (void)state;
    log_rec_t *r = rec_new();
    client_fixture_t f;
    server_only(&f);
    open_logged(&f, r, "debug", "metadata", NULL);
    size_t after_open = rec_count(r);

    int32_t topic = 0;
    assert_int_equal(varlog_server_add_topic(f.srv, &topic), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(f.client, -1), VARLOG_OK);
    if (rec_find(r, after_open, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_METADATA, "applied index") < 0) {
        rec_dump(r);
        fail_msg("no DEBUG [metadata] line for the refresh");
    }
    /* the callback ran after the client was published, and could call into it */
    assert_true(atomic_load(&r->client_calls) > 0);
    close_logged(&f, r);

    pthread_mutex_lock(&r->mu);
    for (size_t k = 0; k < r->n && k < REC_LINES; k++) {
        if (r->lines[k].level == VARLOG_LOG_DEBUG && r->lines[k].ctx != VARLOG_LOG_CTX_METADATA)
            fail_msg("DEBUG line in context %s: %s", varlog_log_ctx_name(r->lines[k].ctx),
                     r->lines[k].message);
        /* log.level stays err for everything else */
        assert_true(r->lines[k].level <= VARLOG_LOG_ERR || r->lines[k].level == VARLOG_LOG_DEBUG);
    }
    assert_true(r->n <= REC_LINES);
    assert_int_equal(r->malformed, 0);
    pthread_mutex_unlock(&r->mu);
    rec_free(r);
}

static void test_log_quiet_at_err(void **state)
{
    (void)state;
    log_rec_t *r = rec_new();
    client_fixture_t f;
    server_only(&f);
    open_logged(&f, r, "log.level", "err", NULL);
    int32_t topic = 0;
    assert_int_equal(varlog_server_add_topic(f.srv, &topic), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(f.client, -1), VARLOG_OK);
    assert_int_equal(cf_stats(f.client).metadata_updates, 2);
    close_logged(&f, r);
    if (rec_count(r) != 0) {
        rec_dump(r);
        fail_msg("%zu lines logged at log.level=err by a successful open and refresh",
                 rec_count(r));
    }
    rec_free(r);
}

/* A failed open returns its error in errstr: it logs nothing above DEBUG (a program printing
 * errstr would show it twice), and at DEBUG, in context conf, through the callback of a
 * configuration that stays the caller's. */
static void test_log_failed_open(void **state)
{
    (void)state;
    log_rec_t *r = rec_new();
    client_fixture_t f;
    server_only(&f);
    varlog_conf_t *conf =
        cf_conf(&f, "cluster.id", "2", "log.level", "debug", "debug", "conf", NULL);
    varlog_conf_set_log_cb(conf, rec_cb, r);
    varlog_client_t *client = NULL;
    char err[512] = "";
    assert_int_equal(varlog_client_new(&conf, &client, err, sizeof(err)), VARLOG_ERR_STATE);
    assert_non_null(strstr(err, "cluster id"));
    assert_non_null(conf);
    if (rec_find(r, 0, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_CONF, "cluster id") < 0) {
        rec_dump(r);
        fail_msg("no DEBUG [conf] line for the failed open");
    }
    for (size_t i = 0; i < rec_count(r); i++)
        if (r->lines[i].level < VARLOG_LOG_DEBUG) {
            rec_dump(r);
            fail_msg("a failed open logged above DEBUG");
        }
    varlog_conf_destroy(conf);
    cf_stop(&f);
    rec_free(r);
}

/* With the default log.level, a healthy run (open, append, refresh, subscribe, close) logs
 * nothing: a library is silent unless something needs the operator (issue 20). */
static void test_log_default_is_quiet(void **state)
{
    (void)state;
    log_rec_t *r = rec_new();
    client_fixture_t f;
    server_only(&f);
    varlog_conf_t *conf = varlog_conf_new();
    char err[512];
    assert_int_equal(
        varlog_conf_set(conf, "metadata.addresses", varlog_server_address(f.srv), err, sizeof(err)),
        VARLOG_OK);
    varlog_conf_set_log_cb(conf, rec_cb, r);
    assert_int_equal(varlog_client_new(&conf, &f.client, err, sizeof(err)), VARLOG_OK);
    atomic_store(&r->client, f.client);
    varlog_record_t rec = cf_record("x");
    assert_int_equal(varlog_append(f.client, 1, &rec, 1, 5000, NULL, NULL), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(f.client, -1), VARLOG_OK);
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, 2, &sub), VARLOG_OK);
    varlog_entry_t e;
    assert_int_equal(varlog_subscription_next(sub, 5000, &e), VARLOG_OK);
    varlog_subscription_close(&sub);
    close_logged(&f, r);
    if (rec_count(r) != 0) {
        rec_dump(r);
        fail_msg("%zu lines logged by a healthy run at the default log.level", rec_count(r));
    }
    rec_free(r);
}

/* A metadata line is logged while a GetMetadata is in flight; the callback can still refresh
 * (it is not made to wait for its own thread's call) and the outer call's result and error
 * text are its own. */
static void test_log_cb_may_refresh(void **state)
{
    (void)state;
    log_rec_t *r = rec_new();
    atomic_init(&r->nested_rc, 1);
    client_fixture_t f;
    server_only(&f);
    open_logged(&f, r, "debug", "metadata", NULL);
    int32_t topic = 0;
    assert_int_equal(varlog_server_add_topic(f.srv, &topic), VARLOG_OK);
    atomic_store(&r->refresh_from_cb, true);
    assert_int_equal(varlog_client_refresh(f.client, -1), VARLOG_OK);
    assert_false(atomic_load(&r->refresh_from_cb));
    assert_int_equal(atomic_load(&r->nested_rc), VARLOG_OK);

    /* a failing refresh keeps its own reason although the callback made a successful call
     * (two failures: a failed member is asked once more through discovery) */
    assert_int_equal(varlog_server_add_topic(f.srv, &topic), VARLOG_OK);
    assert_int_equal(varlog_server_fail_next(f.srv, CF_PATH_METADATA, 14, "injected", 2),
                     VARLOG_OK);
    assert_int_equal(varlog_client_refresh(f.client, -1), VARLOG_ERR_RPC_UNAVAILABLE);
    assert_non_null(strstr(varlog_last_error(), "injected"));
    close_logged(&f, r);
    rec_free(r);
}

/* The periodic refresher blocked in a delayed GetMetadata: destroy cancels its call too, so
 * the delayed answer (which would change the view) is never applied. */
static void test_destroy_during_blocked_periodic_refresh(void **state)
{
    (void)state;
    log_rec_t *r = rec_new();
    client_fixture_t f;
    server_only(&f);
    open_logged(&f, r, "metadata.call.timeout.ms", "120000", "metadata.refresh.interval.ms", "50",
                "debug", "metadata", "log.level", "warning", NULL);
    atomic_store(&r->client, NULL); /* the callback may run during destroy below */
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_METADATA, 20000), VARLOG_OK);
    int32_t topic = 0;
    assert_int_equal(varlog_server_add_topic(f.srv, &topic), VARLOG_OK);
    uint64_t target = varlog_server_applied_index(f.srv);
    char applied[64];
    snprintf(applied, sizeof(applied), "-> %llu:", (unsigned long long)target);
    cf_count_wait_t w = {.srv = f.srv,
                         .method = CF_PATH_METADATA,
                         .above = varlog_server_call_count(f.srv, CF_PATH_METADATA)};
    /* a call that started after the topic was added: its answer would show the topic */
    assert_true(test_wait_until(cf_call_count_above, &w, cf_wait_bound_ms()));
    size_t before = rec_count(r);
    varlog_client_destroy(f.client);
    f.client = NULL;
    if (rec_find(r, before, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_METADATA, applied) >= 0) {
        rec_dump(r);
        fail_msg("destroy waited for the refresher's delayed GetMetadata instead of cancelling "
                 "it");
    }
    /* a call cancelled by closing is not reported as a failed refresh */
    pthread_mutex_lock(&r->mu);
    for (size_t k = before; k < r->n && k < REC_LINES; k++) {
        if (r->lines[k].level <= VARLOG_LOG_WARNING)
            fail_msg("logged while closing: %s [%s] %s", varlog_log_level_name(r->lines[k].level),
                     varlog_log_ctx_name(r->lines[k].ctx), r->lines[k].message);
    }
    pthread_mutex_unlock(&r->mu);
    cf_stop(&f);
    rec_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_names),
        cmocka_unit_test(test_log_info_on_open),
        cmocka_unit_test(test_log_debug_metadata_only),
        cmocka_unit_test(test_log_quiet_at_err),
        cmocka_unit_test(test_log_failed_open),
        cmocka_unit_test(test_log_default_is_quiet),
        cmocka_unit_test(test_log_cb_may_refresh),
        cmocka_unit_test(test_destroy_during_blocked_periodic_refresh),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
