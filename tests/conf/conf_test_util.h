#ifndef VARLOG_CONF_TEST_UTIL_H
#define VARLOG_CONF_TEST_UTIL_H

/* What the configuration's tests (test_conf.c, test_conf_validate.c) share: get and set
 * through the public API, asserting as cmocka does. */
#include "varlog/conf.h"

/* name's value, in a static buffer. */
const char *get(const varlog_conf_t *conf, const char *name);

/* Sets name=value, failing the test with the error text if it is refused. */
void set_ok(varlog_conf_t *conf, const char *name, const char *value);

/* Sets name=value expecting INVALID_ARG; returns the error text (static buffer), after
 * checking that errstr and varlog_last_error() agree. */
const char *set_fails(varlog_conf_t *conf, const char *name, const char *value);

void assert_contains(const char *text, const char *part);

#endif
