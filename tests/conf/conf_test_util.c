#include "conf_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "varlog/error.h"

/* name's value, in a static buffer. */
const char *get(const varlog_conf_t *conf, const char *name)
{
    static char buf[512];
    size_t size = sizeof(buf);
    assert_int_equal(varlog_conf_get(conf, name, buf, &size), VARLOG_OK);
    assert_int_equal(size, strlen(buf) + 1);
    return buf;
}

void set_ok(varlog_conf_t *conf, const char *name, const char *value)
{
    char errstr[256] = "untouched";
    varlog_err_t err = varlog_conf_set(conf, name, value, errstr, sizeof(errstr));
    if (err != VARLOG_OK)
        fail_msg("set %s=\"%s\": %s", name, value, errstr);
    assert_string_equal(errstr, "");
}

/* Sets name=value expecting INVALID_ARG; returns the error text (static buffer), after
 * checking that errstr and varlog_last_error() agree. */
const char *set_fails(varlog_conf_t *conf, const char *name, const char *value)
{
    static char errstr[512];
    errstr[0] = '\0';
    varlog_err_t err = varlog_conf_set(conf, name, value, errstr, sizeof(errstr));
    if (err != VARLOG_ERR_INVALID_ARG)
        fail_msg("set %s=\"%s\" gave %s", name, value, varlog_err_name(err));
    assert_true(errstr[0] != '\0');
    assert_string_equal(errstr, varlog_last_error());
    return errstr;
}

void assert_contains(const char *text, const char *part)
{
    if (!strstr(text, part))
        fail_msg("\"%s\" does not contain \"%s\"", text, part);
}
