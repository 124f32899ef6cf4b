/*
 * The configuration: every property of the table is exercised from one per-name table of
 * test values, and the table is walked through varlog_conf_property_name, so a property added
 * without test values fails test_every_property_has_test_values instead of going untested.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf_internal.h"
#include "conf_table.h"
#include "conf_test_util.h"
#include "varlog/conf.h"
#include "varlog/error.h"

struct prop_case {
    const char *name;
    const char *def;      /* what get returns on a new configuration */
    const char *good;     /* a non-default value, in canonical form */
    const char *bad_type; /* not a value of the property's type */
    const char *below;    /* just under the range, NULL when the type has none */
    const char *above;    /* just over the range */
    const char *range;    /* the range as the error text shows it */
};

static const struct prop_case cases[] = {
    {"metadata.addresses", "", "mr-1:9092,[::1]:9093", "mr-1", "mr-1:0", "mr-1:65536",
     "[1, 65535]"},
    {"cluster.id", "1", "42", "one", "0", "2147483648", "[1, 2147483647]"},
    {"open.timeout.ms", "10000", "2500", "10s", "0", "3600001", "[1, 3600000]"},
    {"metadata.call.timeout.ms", "1000", "250", "1e3", "0", "600001", "[1, 600000]"},
    {"metadata.refresh.interval.ms", "60000", "0", "off", "-1", "86400001", "[0, 86400000]"},
    {"metadata.recheck.interval.ms", "1000", "0", "off", "-1", "600001", "[0, 600000]"},
    {"appender.threads", "0", "2", "two", "-1", "65", "[0, 64]"},
    {"appender.delivery.timeout.ms", "30000", "0", "30s", "-1", "86400001", "[0, 86400000]"},
    {"append.retries", "-1", "100", "abc", "-2", "101", "[-1, 100]"},
    {"append.retry.backoff.ms", "10", "1", "ten", "0", "60001", "[1, 60000]"},
    {"append.retry.backoff.max.ms", "1000", "600000", "1.5", "0", "600001", "[1, 600000]"},
    {"append.retry.maybe.appended", "false", "true", "maybe", NULL, NULL, NULL},
    {"append.resolve.maybe.appended", "true", "false", "maybe", NULL, NULL, NULL},
    {"append.attempt.timeout.ms", "10000", "1", "10s", "0", "3600001", "[1, 3600000]"},
    {"append.deny.ttl.ms", "600000", "0", "never", "-1", "86400001", "[0, 86400000]"},
    {"append.record.max.bytes", "4194304", "1024", "4MiB", "0", "1073741825", "[1, 1073741824]"},
    {"append.batch.max.records", "10000", "1000000", "many", "0", "1000001", "[1, 1000000]"},
    {"append.batch.max.bytes", "67108864", "2147483647", "64 M", "0", "2147483648",
     "[1, 2147483647]"},
    {"appender.pipeline.depth", "2", "64", "two", "0", "65", "[1, 64]"},
    {"appender.linger.ms", "5", "0", "5ms", "-1", "60001", "[0, 60000]"},
    {"appender.batch.max.records", "1000", "10000", "1k", "0", "1000001", "[1, 1000000]"},
    {"appender.batch.max.bytes", "1048576", "65536", "1MiB", "0", "2147483648", "[1, 2147483647]"},
    {"appender.queue.max.records", "100000", "2000000", "lots", "0", "2147483648",
     "[1, 2147483647]"},
    {"appender.queue.max.bytes", "67108864", "1073741824", "64T", "0", "9223372036854775808",
     "[1, 9223372036854775807]"},
    {"appender.client.queue.max.records", "100000", "0", "all", "-1", "2147483648",
     "[0, 2147483647]"},
    {"appender.client.queue.max.bytes", "67108864", "1073741824", "64T", "-1",
     "9223372036854775808", "[0, 9223372036854775807]"},
    {"subscribe.prefetch.entries", "256", "1", "many", "0", "1000001", "[1, 1000000]"},
    {"subscribe.prefetch.bytes", "4194304", "0", "4MiB", "-1", "9223372036854775808",
     "[0, 9223372036854775807]"},
    {"subscribe.window.bytes", "33554432", "0", "32MiB", "-1", "9223372036854775808",
     "[0, 9223372036854775807]"},
    {"subscribe.retry.timeout.ms", "60000", "-1", "1m", "-2", "86400001", "[-1, 86400000]"},
    {"subscribe.retries", "-1", "10", "ten", "-2", "1000001", "[-1, 1000000]"},
    {"subscribe.retry.backoff.ms", "50", "1", "50ms", "0", "60001", "[1, 60000]"},
    {"subscribe.retry.backoff.max.ms", "2000", "600000", "2s", "0", "600001", "[1, 600000]"},
    {"subscribe.stall.timeout.ms", "5000", "0", "5s", "-1", "3600001", "[0, 3600000]"},
    {"subscribe.self.receive.max", "8", "0", "eight", "-1", "1000001", "[0, 1000000]"},
    {"subscribe.handler.threads", "0", "4", "four", "-1", "65", "[0, 64]"},
    {"subscribe.wakeup.entries", "16", "1", "sixteen", "0", "1000001", "[1, 1000000]"},
    {"subscribe.wakeup.wait.us", "500", "0", "500us", "-1", "10000001", "[0, 10000000]"},
    {"subscribe.stage.timing", "false", "true", "sometimes", NULL, NULL, NULL},
    {"retry.workers", "8", "256", "eight", "0", "257", "[1, 256]"},
    {"lookup.batch.size", "8", "0", "8 keys", "-1", "101", "[0, 100]"},
    {"lookup.batch.wait.ms", "5", "60000", "5ms", "-1", "60001", "[0, 60000]"},
    {"reconnect.backoff.max.ms", "1000", "120000", "1s", "99", "120001", "[100, 120000]"},
    {"channel.unlisted.grace.ms", "60000", "0", "1m", "-1", "86400001", "[0, 86400000]"},
    {"grpc.absl.deadlock.detection", "false", "true", "sometimes", NULL, NULL, NULL},
    {"grpc.bdp.probe", "true", "false", "off-ish", NULL, NULL, NULL},
    {"stats.interval.ms", "0", "1000", "1s", "-1", "86400001", "[0, 86400000]"},
    {"stats.latency", "true", "false", "often", NULL, NULL, NULL},
    {"stats.lag.timeout.ms", "1000", "250", "1s", "-1", "600001", "[0, 600000]"},
    {"log.level", "warning", "debug", "verbose", NULL, NULL, NULL},
    {"debug", "", "rpc,retry", "network", NULL, NULL, NULL},
};
#define N_CASES (sizeof(cases) / sizeof(cases[0]))

static const struct prop_case *case_for(const char *name)
{
    for (size_t i = 0; i < N_CASES; i++) {
        if (strcmp(cases[i].name, name) == 0)
            return &cases[i];
    }
    return NULL;
}

static size_t property_count(void)
{
    size_t n = 0;
    while (varlog_conf_property_name(n))
        n++;
    return n;
}

/* ---- the table ------------------------------------------------------------------------- */

static void test_every_property_has_test_values(void **state)
{
    (void)state;
    size_t n = property_count();
    for (size_t i = 0; i < n; i++) {
        const char *name = varlog_conf_property_name(i);
        if (!case_for(name))
            fail_msg("property %s has no row in tests/conf/test_conf.c cases[]", name);
    }
    /* and no stale rows for properties that are gone */
    for (size_t i = 0; i < N_CASES; i++) {
        bool found = false;
        for (size_t j = 0; j < n; j++)
            found = found || strcmp(varlog_conf_property_name(j), cases[i].name) == 0;
        if (!found)
            fail_msg("cases[] has %s, which the table lacks", cases[i].name);
    }
    assert_int_equal(n, N_CASES);
}

static void test_property_name_iterates_the_table(void **state)
{
    (void)state;
    size_t n = property_count();
    assert_int_equal(n, conf_property_count());
    assert_null(varlog_conf_property_name(n));
    assert_null(varlog_conf_property_name(n + 1000));
    assert_null(conf_property(n));
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(varlog_conf_property_name(i), conf_property(i)->name);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(varlog_conf_property_name(i), varlog_conf_property_name(j));
    }
}

static void test_table_rows_are_complete(void **state)
{
    (void)state;
    for (size_t i = 0; i < conf_property_count(); i++) {
        const conf_property_t *p = conf_property(i);
        char range[256];
        assert_string_not_equal(conf_type_name(p->type), "?");
        assert_true(strlen(p->desc) > 10);
        assert_null(strchr(p->desc, '\n'));
        assert_non_null(p->unit);
        assert_true(strlen(conf_property_range(p, range, sizeof(range))) > 0);
        assert_string_equal(p->def, case_for(p->name)->def);
        if (p->type == CONF_TYPE_INT) {
            char want[64];
            snprintf(want, sizeof(want), "[%lld, %lld]", (long long)p->min, (long long)p->max);
            assert_string_equal(range, want);
            assert_string_equal(range, case_for(p->name)->range);
            assert_true(p->min <= p->max);
        }
        if (p->type == CONF_TYPE_ENUM || p->type == CONF_TYPE_CTXS)
            assert_non_null(p->symbols);
    }
    /* a short buffer is still a string */
    char tiny[4];
    assert_string_equal(conf_property_range(conf_property(0), tiny, sizeof(tiny)), "hos");
}

/* ---- per-property behaviour, for every row ----------------------------------------------- */

static void test_defaults(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    assert_non_null(conf);
    for (size_t i = 0; i < N_CASES; i++)
        assert_string_equal(get(conf, cases[i].name), cases[i].def);
    varlog_conf_destroy(conf);
}

/* A subscription rides out at least what the appender does: its CONFIGURATION.md row says
 * so, and a reader that gave up first could not read back what the writers delivered once
 * the node is back. */
static void test_subscribe_outlasts_appender(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    assert_non_null(conf);
    long long sub = atoll(get(conf, "subscribe.retry.timeout.ms"));
    long long app = atoll(get(conf, "appender.delivery.timeout.ms"));
    if (sub < app)
        fail_msg("subscribe.retry.timeout.ms %lld is shorter than appender.delivery.timeout.ms "
                 "%lld",
                 sub, app);
    varlog_conf_destroy(conf);
}

static void test_good_values_round_trip(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    for (size_t i = 0; i < N_CASES; i++) {
        assert_string_not_equal(cases[i].good, cases[i].def);
        set_ok(conf, cases[i].name, cases[i].good);
        assert_string_equal(get(conf, cases[i].name), cases[i].good);
        set_ok(conf, cases[i].name, cases[i].def);
        assert_string_equal(get(conf, cases[i].name), cases[i].def);
    }
    varlog_conf_destroy(conf);
}

static void test_range_bounds_are_accepted(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    for (size_t i = 0; i < conf_property_count(); i++) {
        const conf_property_t *p = conf_property(i);
        if (p->type != CONF_TYPE_INT)
            continue;
        char v[32];
        snprintf(v, sizeof(v), "%lld", (long long)p->min);
        set_ok(conf, p->name, v);
        assert_string_equal(get(conf, p->name), v);
        snprintf(v, sizeof(v), "%lld", (long long)p->max);
        set_ok(conf, p->name, v);
        assert_string_equal(get(conf, p->name), v);
    }
    varlog_conf_destroy(conf);
}

static void test_wrong_type_is_refused(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    for (size_t i = 0; i < N_CASES; i++) {
        const struct prop_case *c = &cases[i];
        set_ok(conf, c->name, c->good);
        const char *text = set_fails(conf, c->name, c->bad_type);
        char prefix[128];
        snprintf(prefix, sizeof(prefix), "%s: \"%s\"", c->name, c->bad_type);
        if (strncmp(text, prefix, strlen(prefix)) != 0)
            fail_msg("\"%s\" does not start with \"%s\"", text, prefix);
        assert_string_equal(get(conf, c->name), c->good);
    }
    varlog_conf_destroy(conf);
}

/* Sizes in bytes take k, m or g (x1024), the rule varlog-cli and varlog-server state, so that
 * `-X appender.batch.max.bytes=4m` works as `--max-bytes 4m` does (issue 20); other integers
 * take none, and a size past the range is refused as out of range, not wrapped. */
static void test_size_suffixes(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    set_ok(conf, "appender.batch.max.bytes", "4m");
    assert_string_equal(get(conf, "appender.batch.max.bytes"), "4194304");
    set_ok(conf, "appender.queue.max.bytes", "2G");
    assert_string_equal(get(conf, "appender.queue.max.bytes"), "2147483648");
    set_ok(conf, "subscribe.prefetch.bytes", "512k");
    assert_string_equal(get(conf, "subscribe.prefetch.bytes"), "524288");
    assert_contains(set_fails(conf, "appender.batch.max.bytes", "4g"), "out of range");
    assert_contains(set_fails(conf, "appender.queue.max.bytes", "9999999999g"), "out of range");
    assert_contains(set_fails(conf, "appender.batch.max.bytes", "k"), "k, m or g");
    assert_contains(set_fails(conf, "appender.batch.max.bytes", "4mm"), "not an integer");
    assert_contains(set_fails(conf, "appender.batch.max.records", "1k"), "not an integer");
    varlog_conf_destroy(conf);
}

static void test_out_of_range_is_refused(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    for (size_t i = 0; i < N_CASES; i++) {
        const struct prop_case *c = &cases[i];
        if (!c->below)
            continue;
        set_ok(conf, c->name, c->good);
        const char *bad[] = {c->below, c->above};
        for (size_t b = 0; b < 2; b++) {
            const char *text = set_fails(conf, c->name, bad[b]);
            assert_true(strncmp(text, c->name, strlen(c->name)) == 0);
            assert_contains(text, c->range);
            assert_contains(text, "out of range");
            assert_string_equal(get(conf, c->name), c->good); /* kept, not clamped */
        }
    }
    varlog_conf_destroy(conf);
}

static void test_typed_fields(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    assert_null(conf->metadata_addresses);
    assert_int_equal(conf->cluster_id, 1);
    assert_int_equal(conf->append_retries, -1);
    assert_false(conf->append_retry_maybe_appended);
    assert_int_equal(conf->log_level, VARLOG_LOG_WARNING);
    assert_int_equal(conf->debug_contexts, 0);
    assert_null(conf->log_cb);
    set_ok(conf, "append.batch.max.bytes", "2147483647");
    assert_int_equal(conf->append_batch_max_bytes, INT32_MAX);
    set_ok(conf, "lookup.batch.wait.ms", "0");
    assert_int_equal(conf->lookup_batch_wait_ms, 0);
    set_ok(conf, "append.retry.maybe.appended", "yes");
    assert_true(conf->append_retry_maybe_appended);
    set_ok(conf, "log.level", "warning");
    assert_int_equal(conf->log_level, VARLOG_LOG_WARNING);
    set_ok(conf, "debug", "append,subscribe");
    assert_int_equal(conf->debug_contexts, VARLOG_LOG_CTX_APPEND | VARLOG_LOG_CTX_SUBSCRIBE);
    set_ok(conf, "metadata.addresses", "a:1");
    assert_string_equal(conf->metadata_addresses, "a:1");
    varlog_conf_destroy(conf);
}

/* ---- value syntax ------------------------------------------------------------------------ */

static void test_exact_error_texts(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    assert_string_equal(set_fails(conf, "append.retries", "abc"),
                        "append.retries: \"abc\" is not an integer");
    assert_string_equal(set_fails(conf, "append.retries", "1000"),
                        "append.retries: 1000 is out of range [-1, 100]");
    assert_string_equal(set_fails(conf, "foo.bar", "1"), "unknown property \"foo.bar\"");
    assert_string_equal(set_fails(conf, "log.level", "loud"),
                        "log.level: \"loud\" is not one of emerg, alert, crit, err, warning, "
                        "notice, info, debug");
    assert_string_equal(set_fails(conf, "debug", "conf,net"),
                        "debug: \"net\" is not one of conf, rpc, metadata, append, subscribe, "
                        "retry, all");
    varlog_conf_destroy(conf);
}

static void test_integers_are_strict_decimal(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    static const char *not_int[] = {"",    " 1", "1 ",  "+1",    "0x10",    "12abc",
                                    "1.0", "-",  "--1", "1_000", "\xd9\xa1"};
    for (size_t i = 0; i < sizeof(not_int) / sizeof(not_int[0]); i++)
        assert_contains(set_fails(conf, "append.retries", not_int[i]), "is not an integer");
    /* too large for 64 bits: out of range, not "not an integer", and never wrapped */
    static const char *huge[] = {"99999999999999999999", "-99999999999999999999",
                                 "9223372036854775807",  "9223372036854775808",
                                 "-9223372036854775808", "18446744073709551619"};
    for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++)
        assert_contains(set_fails(conf, "append.retries", huge[i]), "out of range [-1, 100]");
    assert_string_equal(get(conf, "append.retries"), "-1");
    set_ok(conf, "append.retries", "007");
    assert_string_equal(get(conf, "append.retries"), "7");
    set_ok(conf, "append.retries", "-0");
    assert_string_equal(get(conf, "append.retries"), "0");
    varlog_conf_destroy(conf);
}

static void test_booleans(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    const char *name = "append.retry.maybe.appended";
    static const char *yes[] = {"true", "TRUE", "True", "1", "yes", "YES", "on", "On"};
    static const char *no[] = {"false", "FALSE", "0", "no", "No", "off", "OFF"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        set_ok(conf, name, "false");
        set_ok(conf, name, yes[i]);
        assert_string_equal(get(conf, name), "true");
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        set_ok(conf, name, "true");
        set_ok(conf, name, no[i]);
        assert_string_equal(get(conf, name), "false");
    }
    static const char *bad[] = {"", "2", "y", "n", "t", "truee", " true", "enabled"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_contains(set_fails(conf, name, bad[i]), "is not a boolean");
    assert_string_equal(get(conf, name), "false");
    varlog_conf_destroy(conf);
}

static void test_log_level(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    static const char *names[] = {"emerg",   "alert",  "crit", "err",
                                  "warning", "notice", "info", "debug"};
    for (int i = 0; i < 8; i++) {
        set_ok(conf, "log.level", names[i]);
        assert_int_equal(conf->log_level, i);
        assert_string_equal(get(conf, "log.level"), names[i]);
    }
    set_ok(conf, "log.level", "WARNING");
    assert_string_equal(get(conf, "log.level"), "warning");
    static const char *bad[] = {"", "warn", "error", "7", " info", "info,debug"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_contains(set_fails(conf, "log.level", bad[i]), "is not one of");
    assert_string_equal(get(conf, "log.level"), "warning");
    varlog_conf_destroy(conf);
}

static void test_debug_contexts(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    static const struct {
        const char *in, *out;
        unsigned bits;
    } ok[] = {
        {"conf", "conf", VARLOG_LOG_CTX_CONF},
        {"retry, conf", "conf,retry", VARLOG_LOG_CTX_CONF | VARLOG_LOG_CTX_RETRY},
        {"RPC,Metadata", "rpc,metadata", VARLOG_LOG_CTX_RPC | VARLOG_LOG_CTX_METADATA},
        {"append,append", "append", VARLOG_LOG_CTX_APPEND},
        {"all", "all", VARLOG_LOG_CTX_ALL},
        {"ALL,rpc", "all", VARLOG_LOG_CTX_ALL},
        {"conf,rpc,metadata,append,subscribe,retry", "all", VARLOG_LOG_CTX_ALL},
        {"subscribe", "subscribe", VARLOG_LOG_CTX_SUBSCRIBE},
        {"", "", 0},
        {"  ", "", 0},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        set_ok(conf, "debug", ok[i].in);
        assert_string_equal(get(conf, "debug"), ok[i].out);
        assert_int_equal(conf->debug_contexts, ok[i].bits);
    }
    set_ok(conf, "debug", "rpc");
    static const char *bad[] = {"conf,,rpc", "conf,", ",conf", "none", "conf rpc", "*"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *text = set_fails(conf, "debug", bad[i]);
        assert_true(strncmp(text, "debug: ", 7) == 0);
    }
    assert_string_equal(get(conf, "debug"), "rpc");
    varlog_conf_destroy(conf);
}

static void test_addresses(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    const char *name = "metadata.addresses";
    static const struct {
        const char *in, *out;
    } ok[] = {
        {"localhost:9092", "localhost:9092"},
        {"10.0.0.1:1,10.0.0.2:65535", "10.0.0.1:1,10.0.0.2:65535"},
        {" mr-1:9092 , mr-2:9092 ", "mr-1:9092,mr-2:9092"},
        {"[::1]:9092,[fe80::1%eth0]:80", "[::1]:9092,[fe80::1%eth0]:80"},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        set_ok(conf, name, ok[i].in);
        assert_string_equal(get(conf, name), ok[i].out);
    }
    set_ok(conf, name, "");
    assert_null(conf->metadata_addresses);
    assert_string_equal(get(conf, name), "");
    set_ok(conf, name, "keep:1");
    static const char *bad[] = {"host",     ":80",     "h:",      "h:abc",
                                "h:0",      "h:65536", "h:-1",    "::1:80",
                                "[::1]",    "[]:80",   "[::1:80", "::1]:80",
                                "a:1,,b:2", "a:1,",    ",a:1",    "a b:1",
                                "h: 80",    "h:80x",   "a:1;b:2", "h:99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *text = set_fails(conf, name, bad[i]);
        assert_true(strncmp(text, "metadata.addresses: ", 20) == 0);
    }
    assert_contains(set_fails(conf, name, "a:1,b:0"),
                    "\"b:0\" has port 0, out of range [1, 65535]");
    assert_string_equal(get(conf, name), "keep:1");
    varlog_conf_destroy(conf);
}

/* ---- error reporting --------------------------------------------------------------------- */

static void test_unknown_property(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    assert_string_equal(set_fails(conf, "foo.bar", "1"), "unknown property \"foo.bar\"");
    assert_string_equal(set_fails(conf, "", "1"), "unknown property \"\"");
    assert_string_equal(set_fails(conf, "Append.Retries", "1"),
                        "unknown property \"Append.Retries\"");
    char buf[16];
    size_t size = sizeof(buf);
    assert_int_equal(varlog_conf_get(conf, "foo.bar", buf, &size), VARLOG_ERR_INVALID_ARG);
    assert_string_equal(varlog_last_error(), "unknown property \"foo.bar\"");
    assert_int_equal(size, sizeof(buf));
    varlog_conf_destroy(conf);
}

static void test_errstr_truncation(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    const char *full = "append.retries: 1000 is out of range [-1, 100]";
    char buf[16];

    memset(buf, 'x', sizeof(buf));
    assert_int_equal(varlog_conf_set(conf, "append.retries", "1000", buf, 1),
                     VARLOG_ERR_INVALID_ARG);
    assert_int_equal(buf[0], '\0');
    assert_int_equal(buf[1], 'x');

    memset(buf, 'x', sizeof(buf));
    assert_int_equal(varlog_conf_set(conf, "append.retries", "1000", buf, 8),
                     VARLOG_ERR_INVALID_ARG);
    assert_int_equal(strlen(buf), 7);
    assert_memory_equal(buf, full, 7);
    assert_int_equal(buf[8], 'x');
    assert_string_equal(varlog_last_error(), full); /* the thread's copy is whole */

    memset(buf, 'x', sizeof(buf));
    assert_int_equal(varlog_conf_set(conf, "append.retries", "1000", buf, 0),
                     VARLOG_ERR_INVALID_ARG);
    assert_int_equal(buf[0], 'x');
    assert_int_equal(varlog_conf_set(conf, "append.retries", "1000", NULL, 64),
                     VARLOG_ERR_INVALID_ARG);
    assert_string_equal(varlog_last_error(), full);
    assert_string_equal(get(conf, "append.retries"), "-1");
    varlog_conf_destroy(conf);
}

static void test_last_error_follows_failures_only(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    char errstr[128];
    assert_int_equal(varlog_conf_set(conf, "retry.workers", "0", errstr, sizeof(errstr)),
                     VARLOG_ERR_INVALID_ARG);
    assert_string_equal(varlog_last_error(), errstr);
    assert_string_equal(errstr, "retry.workers: 0 is out of range [1, 256]");
    /* success clears errstr but leaves the thread's text alone */
    assert_int_equal(varlog_conf_set(conf, "retry.workers", "4", errstr, sizeof(errstr)),
                     VARLOG_OK);
    assert_string_equal(errstr, "");
    assert_string_equal(varlog_last_error(), "retry.workers: 0 is out of range [1, 256]");
    varlog_conf_destroy(conf);
}

static void test_get_sizes(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    size_t size = 0;
    assert_int_equal(varlog_conf_get(conf, "open.timeout.ms", NULL, &size), VARLOG_OK);
    assert_int_equal(size, sizeof("10000"));

    char buf[8];
    memset(buf, 'x', sizeof(buf));
    size = 5; /* one short */
    assert_int_equal(varlog_conf_get(conf, "open.timeout.ms", buf, &size), VARLOG_OK);
    assert_int_equal(size, 6);
    assert_int_equal(buf[0], 'x'); /* nothing written */

    size = 6;
    assert_int_equal(varlog_conf_get(conf, "open.timeout.ms", buf, &size), VARLOG_OK);
    assert_int_equal(size, 6);
    assert_string_equal(buf, "10000");

    size = 0;
    assert_int_equal(varlog_conf_get(conf, "metadata.addresses", NULL, &size), VARLOG_OK);
    assert_int_equal(size, 1);

    /* a value longer than any fixed buffer */
    char big[4096], out[4096];
    size_t len = 0;
    for (int i = 0; len < 3000; i++)
        len += (size_t)snprintf(big + len, sizeof(big) - len, "%shost-%d:%d", i ? "," : "", i,
                                1000 + i);
    set_ok(conf, "metadata.addresses", big);
    size = 0;
    assert_int_equal(varlog_conf_get(conf, "metadata.addresses", NULL, &size), VARLOG_OK);
    assert_int_equal(size, len + 1);
    assert_int_equal(varlog_conf_get(conf, "metadata.addresses", out, &size), VARLOG_OK);
    assert_string_equal(out, big);
    varlog_conf_destroy(conf);
}

static void test_null_arguments(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    char errstr[64], buf[16];
    size_t size = sizeof(buf);
    assert_int_equal(varlog_conf_set(NULL, "append.retries", "1", errstr, sizeof(errstr)),
                     VARLOG_ERR_INVALID_ARG);
    assert_string_equal(errstr, varlog_last_error());
    assert_contains(errstr, "conf");
    assert_int_equal(varlog_conf_set(conf, NULL, "1", errstr, sizeof(errstr)),
                     VARLOG_ERR_INVALID_ARG);
    assert_contains(errstr, "name");
    assert_int_equal(varlog_conf_set(conf, "append.retries", NULL, errstr, sizeof(errstr)),
                     VARLOG_ERR_INVALID_ARG);
    assert_contains(errstr, "value");
    assert_int_equal(varlog_conf_get(NULL, "append.retries", buf, &size), VARLOG_ERR_INVALID_ARG);
    assert_int_equal(varlog_conf_get(conf, NULL, buf, &size), VARLOG_ERR_INVALID_ARG);
    assert_int_equal(varlog_conf_get(conf, "append.retries", buf, NULL), VARLOG_ERR_INVALID_ARG);
    assert_null(varlog_conf_dup(NULL));
    varlog_conf_set_log_cb(NULL, NULL, NULL);
    varlog_conf_destroy(NULL);
    assert_int_equal(conf_validate(NULL), VARLOG_ERR_INVALID_ARG);
    assert_string_equal(get(conf, "append.retries"), "-1");
    varlog_conf_destroy(conf);
}

static void log_cb_a(void *opaque, varlog_log_level_t level, varlog_log_ctx_t ctx,
                     const char *message)
{
    (void)opaque;
    (void)level;
    (void)ctx;
    (void)message;
}

static void test_set_log_cb(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    int token;
    varlog_conf_set_log_cb(conf, log_cb_a, &token);
    assert_ptr_equal(conf->log_cb, log_cb_a);
    assert_ptr_equal(conf->log_opaque, &token);
    varlog_conf_set_log_cb(conf, NULL, NULL);
    assert_null(conf->log_cb);
    assert_null(conf->log_opaque);
    varlog_conf_destroy(conf);
}

static void stats_cb_a(const char *json, size_t len, void *opaque)
{
    (void)json;
    (void)len;
    (void)opaque;
}

static void test_set_stats_cb(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    int token;
    assert_null(conf->stats_cb);
    assert_int_equal(conf->stats_interval_ms, 0);
    varlog_conf_set_stats_cb(conf, stats_cb_a, &token);
    set_ok(conf, "stats.interval.ms", "250");
    varlog_conf_t *copy = varlog_conf_dup(conf);
    assert_ptr_equal(copy->stats_cb, stats_cb_a);
    assert_ptr_equal(copy->stats_opaque, &token);
    assert_int_equal(copy->stats_interval_ms, 250);
    varlog_conf_set_stats_cb(conf, NULL, NULL);
    assert_null(conf->stats_cb);
    assert_null(conf->stats_opaque);
    assert_ptr_equal(copy->stats_cb, stats_cb_a);
    varlog_conf_set_stats_cb(NULL, stats_cb_a, NULL);
    varlog_conf_destroy(copy);
    varlog_conf_destroy(conf);
}

static void test_dup_is_deep(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    int token;
    set_ok(conf, "metadata.addresses", "a:1,b:2");
    set_ok(conf, "append.retries", "7");
    set_ok(conf, "debug", "rpc");
    varlog_conf_set_log_cb(conf, log_cb_a, &token);

    varlog_conf_t *copy = varlog_conf_dup(conf);
    assert_non_null(copy);
    for (size_t i = 0; i < N_CASES; i++) {
        char orig[512];
        snprintf(orig, sizeof(orig), "%s", get(conf, cases[i].name));
        assert_string_equal(get(copy, cases[i].name), orig);
    }
    assert_ptr_equal(copy->log_cb, log_cb_a);
    assert_ptr_equal(copy->log_opaque, &token);
    assert_ptr_not_equal(copy->metadata_addresses, conf->metadata_addresses);

    for (size_t i = 0; i < N_CASES; i++)
        set_ok(copy, cases[i].name, cases[i].good);
    varlog_conf_set_log_cb(copy, NULL, NULL);
    assert_string_equal(get(conf, "metadata.addresses"), "a:1,b:2");
    assert_string_equal(get(conf, "append.retries"), "7");
    assert_string_equal(get(conf, "debug"), "rpc");
    assert_ptr_equal(conf->log_cb, log_cb_a);

    /* the copy outlives the original */
    varlog_conf_destroy(conf);
    assert_string_equal(get(copy, "metadata.addresses"), "mr-1:9092,[::1]:9093");
    varlog_conf_t *copy2 = varlog_conf_dup(copy);
    varlog_conf_destroy(copy);
    assert_string_equal(get(copy2, "metadata.addresses"), "mr-1:9092,[::1]:9093");
    varlog_conf_destroy(copy2);

    varlog_conf_t *unset = varlog_conf_new();
    varlog_conf_t *unset_copy = varlog_conf_dup(unset);
    assert_null(unset_copy->metadata_addresses);
    varlog_conf_destroy(unset);
    varlog_conf_destroy(unset_copy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_property_has_test_values),
        cmocka_unit_test(test_property_name_iterates_the_table),
        cmocka_unit_test(test_table_rows_are_complete),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_subscribe_outlasts_appender),
        cmocka_unit_test(test_good_values_round_trip),
        cmocka_unit_test(test_range_bounds_are_accepted),
        cmocka_unit_test(test_wrong_type_is_refused),
        cmocka_unit_test(test_out_of_range_is_refused),
        cmocka_unit_test(test_size_suffixes),
        cmocka_unit_test(test_typed_fields),
        cmocka_unit_test(test_exact_error_texts),
        cmocka_unit_test(test_integers_are_strict_decimal),
        cmocka_unit_test(test_booleans),
        cmocka_unit_test(test_log_level),
        cmocka_unit_test(test_debug_contexts),
        cmocka_unit_test(test_addresses),
        cmocka_unit_test(test_unknown_property),
        cmocka_unit_test(test_errstr_truncation),
        cmocka_unit_test(test_last_error_follows_failures_only),
        cmocka_unit_test(test_get_sizes),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_set_log_cb),
        cmocka_unit_test(test_set_stats_cb),
        cmocka_unit_test(test_dup_is_deep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
