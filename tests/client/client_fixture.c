#include "client_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server_internal.h"
#include "test_support.h"

varlog_conf_t *cf_conf_va(client_fixture_t *f, va_list ap)
{
    varlog_conf_t *conf = varlog_conf_new();
    assert_non_null(conf);
    char err[256];
    assert_int_equal(varlog_conf_set(conf, "metadata.addresses", varlog_server_address(f->srv), err,
                                     sizeof(err)),
                     VARLOG_OK);
    assert_int_equal(varlog_conf_set(conf, "metadata.refresh.interval.ms", "0", err, sizeof(err)),
                     VARLOG_OK);
    assert_int_equal(varlog_conf_set(conf, "log.level", "err", err, sizeof(err)), VARLOG_OK);
    /* Sanitizers and valgrind slow everything down; keep timeouts generous there. */
    assert_int_equal(varlog_conf_set(conf, "metadata.call.timeout.ms", "10000", err, sizeof(err)),
                     VARLOG_OK);
    /* The same tests in the shared handler-thread mode (tests/client/CMakeLists.txt
     * registers the subscribe tests again with it); the test's own pairs still win. */
    const char *shared = getenv("VARLOG_TEST_HANDLER_THREADS");
    if (shared && *shared)
        assert_int_equal(
            varlog_conf_set(conf, "subscribe.handler.threads", shared, err, sizeof(err)),
            VARLOG_OK);
    for (;;) {
        const char *name = va_arg(ap, const char *);
        if (!name)
            break;
        const char *value = va_arg(ap, const char *);
        if (varlog_conf_set(conf, name, value, err, sizeof(err)) != VARLOG_OK)
            fail_msg("%s=%s: %s", name, value, err);
    }
    return conf;
}

varlog_conf_t *cf_conf(client_fixture_t *f, ...)
{
    va_list ap;
    va_start(ap, f);
    varlog_conf_t *conf = cf_conf_va(f, ap);
    va_end(ap);
    return conf;
}

static void start_va(client_fixture_t *f, int32_t topics, int32_t log_streams,
                     void (*adjust)(varlog_conf_t *, void *), void *arg, va_list ap)
{
    memset(f, 0, sizeof(*f));
    varlog_server_opts_t o = {.topics = topics, .log_streams_per_topic = log_streams};
    assert_int_equal(varlog_server_start(&o, &f->srv), VARLOG_OK);
    varlog_conf_t *conf = cf_conf_va(f, ap);
    if (adjust)
        adjust(conf, arg);
    char err[512];
    varlog_err_t rc = varlog_client_new(&conf, &f->client, err, sizeof(err));
    if (rc != VARLOG_OK)
        fail_msg("varlog_client_new: %s: %s", varlog_err_name(rc), err);
    assert_null(conf);
}

void cf_start(client_fixture_t *f, int32_t topics, int32_t log_streams, ...)
{
    va_list ap;
    va_start(ap, log_streams);
    start_va(f, topics, log_streams, NULL, NULL, ap);
    va_end(ap);
}

void cf_start_adjusted(client_fixture_t *f, int32_t topics, int32_t log_streams,
                       void (*adjust)(varlog_conf_t *conf, void *arg), void *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    start_va(f, topics, log_streams, adjust, arg, ap);
    va_end(ap);
}

void cf_stop(client_fixture_t *f)
{
    varlog_client_destroy(f->client);
    f->client = NULL;
    varlog_server_destroy(f->srv);
    f->srv = NULL;
}

varlog_record_t cf_record(const char *s)
{
    varlog_record_t r = {.data = s, .len = strlen(s)};
    return r;
}

int64_t cf_wait_bound_ms(void)
{
    return test_under_valgrind() ? 30000 : 10000;
}

bool cf_call_count_above(void *arg)
{
    cf_count_wait_t *w = arg;
    return varlog_server_call_count(w->srv, w->method) > w->above;
}

varlog_client_stats_t cf_stats(varlog_client_t *client)
{
    varlog_client_stats_t s;
    assert_int_equal(varlog_client_stats(client, &s), VARLOG_OK);
    return s;
}

size_t cf_appendable(varlog_client_t *client, int32_t topic, int32_t *ids, size_t cap)
{
    size_t n = 0;
    assert_int_equal(varlog_client_appendable_log_streams(client, topic, ids, cap, &n), VARLOG_OK);
    return n;
}

size_t cf_stored_each(varlog_server_t *srv, int32_t topic, int32_t ls, cf_stored_fn *fn, void *arg)
{
    size_t n = 0;
    pthread_mutex_lock(&srv->store.mu);
    store_ls_t *l = store_ls_locked(&srv->store, topic, ls);
    for (size_t i = l ? l->head : 0; l && i < l->count; i++, n++) {
        const store_entry_t *e = &l->entries[i];
        varlog_entry_meta_t m = {topic, ls, e->glsn, e->llsn};
        if (fn)
            fn(arg, &m, e->data, e->len);
    }
    pthread_mutex_unlock(&srv->store.mu);
    return n;
}
