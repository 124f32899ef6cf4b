#include "child_env.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "child_server.h"

static void set_pair(varlog_conf_t *conf, const char *key, const char *value)
{
    char err[256];
    if (varlog_conf_set(conf, key, value, err, sizeof(err)) != VARLOG_OK)
        fail_msg("%s: %s", key, err);
}

void child_env_start(child_env_t *e, int32_t log_streams, ...)
{
    memset(e, 0, sizeof(*e));
    e->server =
        child_server_start(VARLOG_SERVER_PROGRAM, 1, log_streams, 0, e->addr, sizeof(e->addr));
    assert_true(e->server > 0);
    varlog_conf_t *conf = varlog_conf_new();
    assert_non_null(conf);
    set_pair(conf, "metadata.addresses", e->addr);
    set_pair(conf, "metadata.refresh.interval.ms", "0");
    set_pair(conf, "log.level", "err");
    set_pair(conf, "metadata.call.timeout.ms", "10000");
    va_list ap;
    va_start(ap, log_streams);
    for (const char *key; (key = va_arg(ap, const char *)) != NULL;)
        set_pair(conf, key, va_arg(ap, const char *));
    va_end(ap);
    char err[256];
    varlog_err_t rc = varlog_client_new(&conf, &e->client, err, sizeof(err));
    if (rc != VARLOG_OK)
        fail_msg("varlog_client_new: %s: %s", varlog_err_name(rc), err);
}

void child_env_stop(child_env_t *e)
{
    varlog_client_destroy(e->client);
    e->client = NULL;
    if (e->server > 0)
        child_server_stop(e->server);
    e->server = -1;
}
