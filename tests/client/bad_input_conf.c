/* test_bad_input's rows of names, errors, the version, the configuration and opening a
 * client (bad_input_client.h). */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bad_input_client.h"

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

/* The oversized strings, filled on first use. */
static const char *long_str(char *buf, size_t size, char fill)
{
    if (!buf[0])
        memset(buf, fill, size - 1);
    return buf;
}
#define LONG_DIGITS long_str(long_digits, sizeof(long_digits), '9')
#define LONG_NAME long_str(long_name, sizeof(long_name), 'n')

CALL(conf_set_null_conf, varlog_conf_set(NULL, "append.retries", "1", NULL, 0))
CALL(conf_set_null_name, conf_set(NULL, "1"))
CALL(conf_set_null_value, conf_set("append.retries", NULL))
CALL(conf_set_unknown, conf_set("append.retriez", "1"))
CALL(conf_set_empty_name, conf_set("", "1"))
CALL(conf_set_long_name, conf_set(LONG_NAME, "1"))
CALL(conf_set_above, conf_set("append.retries", "101"))
CALL(conf_set_below, conf_set("append.retries", "-2"))
CALL(conf_set_overflow, conf_set("append.retries", "99999999999999999999"))
CALL(conf_set_long_value, conf_set("append.retries", LONG_DIGITS))
CALL(conf_set_long_bool, conf_set("append.retry.maybe.appended", LONG_DIGITS))
CALL(conf_set_long_addr, conf_set("metadata.addresses", LONG_DIGITS))
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
/* A NULL conf is ignored; a NULL observer removes one (no call without stage timing). */
ROW(conf_set_observer_null)
{
    (void)e;
    varlog_conf_set_subscribe_observer(NULL, NULL, NULL);
    varlog_conf_t *conf = varlog_conf_new();
    if (!conf)
        return bi_broken("varlog_conf_new gave NULL");
    varlog_conf_set_subscribe_observer(conf, NULL, NULL);
    varlog_conf_destroy(conf);
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

static const bi_row_t conf_rows[] = {
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
    R(varlog_conf_set, "above the range", INVAL, "out of range [-1, 100]", conf_set_above),
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
    R(varlog_conf_set_subscribe_observer, "NULL conf, NULL observer", OK, OK,
      conf_set_observer_null),
    R(varlog_conf_property_name, "SIZE_MAX", OK, OK, conf_property_past_end),
    R(varlog_conf_property_name, "just past the end", OK, OK, conf_property_end),
    R(varlog_client_new, "NULL conf pointer", INVAL, "must not be NULL", client_new_null_conf_ptr),
    R(varlog_client_new, "NULL *conf", INVAL, "must not be NULL", client_new_null_conf),
    R(varlog_client_new, "NULL out", INVAL, "must not be NULL", client_new_null_out),
    R(varlog_client_new, "metadata.addresses unset", INVAL, "metadata.addresses is not set",
      client_new_no_address),
    R(varlog_client_new, "backoff above its max", INVAL, "is greater than append.retry.backoff.max",
      client_new_cross_rule),
};
const bi_table_t bi_conf_rows = {conf_rows, sizeof(conf_rows) / sizeof(conf_rows[0])};

static const bi_row_t conf_open_rows[] = {
    R2(varlog_client_new, "nothing listens", VARLOG_ERR_RPC_UNAVAILABLE, VARLOG_ERR_TIMED_OUT,
       "127.0.0.1", client_new_dead),
    R(varlog_client_new, "another cluster id", VARLOG_ERR_STATE, "cluster id",
      client_new_wrong_cluster),
};
const bi_table_t bi_conf_open_rows = {conf_open_rows,
                                      sizeof(conf_open_rows) / sizeof(conf_open_rows[0])};
