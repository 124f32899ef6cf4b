/*
 * The configuration's cross-property checks (conf_validate): pairs of properties whose
 * values are each in range but together cannot work, refused with a text naming them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "conf_internal.h"
#include "conf_test_util.h"
#include "varlog/conf.h"
#include "varlog/error.h"

static varlog_conf_t *valid_conf(void)
{
    varlog_conf_t *conf = varlog_conf_new();
    set_ok(conf, "metadata.addresses", "mr:9092");
    assert_int_equal(conf_validate(conf), VARLOG_OK);
    return conf;
}

static void assert_invalid(const varlog_conf_t *conf, const char *prop_a, const char *prop_b)
{
    assert_int_equal(conf_validate(conf), VARLOG_ERR_INVALID_ARG);
    assert_contains(varlog_last_error(), prop_a);
    if (prop_b)
        assert_contains(varlog_last_error(), prop_b);
}

static void test_validate_needs_addresses(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    assert_invalid(conf, "metadata.addresses", NULL);
    set_ok(conf, "metadata.addresses", "mr:9092");
    assert_int_equal(conf_validate(conf), VARLOG_OK);
    set_ok(conf, "metadata.addresses", " ");
    assert_invalid(conf, "metadata.addresses", NULL);
    varlog_conf_destroy(conf);
}

static void test_validate_backoff(void **state)
{
    (void)state;
    varlog_conf_t *conf = valid_conf();
    set_ok(conf, "append.retry.backoff.ms", "500");
    set_ok(conf, "append.retry.backoff.max.ms", "499");
    assert_invalid(conf, "append.retry.backoff.max.ms (499)", "append.retry.backoff.ms (500)");
    set_ok(conf, "append.retry.backoff.max.ms", "500");
    assert_int_equal(conf_validate(conf), VARLOG_OK);
    varlog_conf_destroy(conf);
}

static void test_validate_lookup_batch(void **state)
{
    (void)state;
    varlog_conf_t *conf = valid_conf();
    set_ok(conf, "retry.workers", "4");
    set_ok(conf, "lookup.batch.size", "5");
    assert_invalid(conf, "lookup.batch.size (5)", "retry.workers (4)");
    set_ok(conf, "lookup.batch.size", "4");
    assert_int_equal(conf_validate(conf), VARLOG_OK);
    set_ok(conf, "retry.workers", "1");
    set_ok(conf, "lookup.batch.size", "0");
    assert_int_equal(conf_validate(conf), VARLOG_OK);
    varlog_conf_destroy(conf);
}

static void test_validate_record_vs_batch(void **state)
{
    (void)state;
    varlog_conf_t *conf = valid_conf();
    set_ok(conf, "append.batch.max.bytes", "1048576");
    set_ok(conf, "append.record.max.bytes", "1048577");
    assert_invalid(conf, "append.record.max.bytes (1048577)", "append.batch.max.bytes (1048576)");
    set_ok(conf, "append.record.max.bytes", "1048576");
    assert_int_equal(conf_validate(conf), VARLOG_OK);
    varlog_conf_destroy(conf);
}

static void test_validate_appender_limits(void **state)
{
    (void)state;
    varlog_conf_t *conf = valid_conf();
    set_ok(conf, "append.batch.max.records", "500");
    assert_invalid(conf, "appender.batch.max.records (1000)", "append.batch.max.records (500)");
    set_ok(conf, "appender.batch.max.records", "500");
    assert_int_equal(conf_validate(conf), VARLOG_OK);
    set_ok(conf, "appender.queue.max.records", "499");
    assert_invalid(conf, "appender.batch.max.records (500)", "appender.queue.max.records (499)");
    set_ok(conf, "appender.queue.max.records", "500");
    set_ok(conf, "appender.batch.max.bytes", "67108865");
    assert_invalid(conf, "appender.batch.max.bytes (67108865)",
                   "append.batch.max.bytes (67108864)");
    set_ok(conf, "appender.batch.max.bytes", "65536");
    set_ok(conf, "appender.queue.max.bytes", "65535");
    assert_invalid(conf, "appender.batch.max.bytes (65536)", "appender.queue.max.bytes (65535)");
    set_ok(conf, "appender.queue.max.bytes", "65536");
    assert_int_equal(conf_validate(conf), VARLOG_OK);
    varlog_conf_destroy(conf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validate_needs_addresses),
        cmocka_unit_test(test_validate_backoff),
        cmocka_unit_test(test_validate_lookup_batch),
        cmocka_unit_test(test_validate_record_vs_batch),
        cmocka_unit_test(test_validate_appender_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
