/* The consumer lag and the subscription outages of the client's metrics (issue 36, items 2
 * and 3): varlog_client_subscription_lag_entries is the entries committed after the last one
 * delivered, per subscription and log stream, rising with a backlog and falling to 0 as it is
 * read; _seconds is bounded by what the scrapes saw; a range's end caps it; a replica that does
 * not answer costs a scrape stats.lag.timeout.ms and no more; 0 turns it off. Outages of a
 * subscription are counted, timed while they last and kept after it closed. A scrape racing
 * subscriptions that open and close reads nothing freed (ASan, TSan). */
#include <setjmp.h>
#include <pthread.h>
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
#include "varlog/stats.h"
#include "varlog/subscribe.h"

#define PATH_REPLICA_MD "/varlog.snpb.LogIO/LogStreamReplicaMetadata"

static char *scrape(varlog_client_t *c)
{
    char *text = NULL;
    assert_int_equal(varlog_stats_prometheus(c, &text, NULL), VARLOG_OK);
    assert_non_null(text);
    return text;
}

/* The value of `family{...labels}` whose labels are exactly those of subscription sub, topic 1
 * and log stream ls; -1 when the scrape has no such series. */
static double lag_value(const char *text, const char *family, uint64_t sub, int32_t ls)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix,
             "%s{messaging_system=\"varlog\",varlog_subscription=\"%llu\","
             "messaging_destination_name=\"1\",messaging_destination_partition_id=\"%d\"} ",
             family, (unsigned long long)sub, ls);
    const char *p = strstr(text, prefix);
    return p ? strtod(p + strlen(prefix), NULL) : -1;
}

static double own_value(const char *text, const char *family)
{
    char prefix[160];
    snprintf(prefix, sizeof prefix, "\n%s{messaging_system=\"varlog\"} ", family);
    const char *p = strstr(text, prefix);
    return p ? strtod(p + strlen(prefix), NULL) : -1;
}

static void append_n(client_fixture_t *f, int32_t ls, int n)
{
    varlog_record_t recs[50];
    for (int i = 0; i < 50; i++)
        recs[i] = cf_record("lagging");
    for (int done = 0; done < n;) {
        int k = n - done < 50 ? n - done : 50;
        assert_int_equal(varlog_append_to(f->client, 1, ls, recs, (size_t)k, 10000, NULL, NULL),
                         VARLOG_OK);
        done += k;
    }
}

/* What the test's consumer took, per log stream (index 1 and 2). */
typedef struct taken {
    uint64_t llsn[3];
    uint64_t n[3];
} taken_t;

static void take(varlog_subscription_t *sub, taken_t *t, int n)
{
    for (int i = 0; i < n; i++) {
        varlog_entry_t e;
        assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_OK);
        assert_true(e.meta.log_stream_id >= 1 && e.meta.log_stream_id <= 2);
        t->llsn[e.meta.log_stream_id] = e.meta.llsn;
        t->n[e.meta.log_stream_id]++;
    }
}

typedef struct both_wait {
    varlog_client_t *c;
    uint64_t sub;
} both_wait_t;

/* Both log streams have a lag series (a topic-wide subscription's log stream has one once
 * its first entry arrived). */
static bool both_series(void *arg)
{
    both_wait_t *w = arg;
    char *text = scrape(w->c);
    bool ok = lag_value(text, "varlog_client_subscription_lag_entries", w->sub, 1) >= 0 &&
              lag_value(text, "varlog_client_subscription_lag_entries", w->sub, 2) >= 0;
    varlog_stats_prometheus_free(text);
    return ok;
}

/* An iterator's streams are read inside next() only: takes what has arrived (next with
 * timeout 0, noted in t) until both log streams' first entries are in. */
static void take_until_both(varlog_subscription_t *sub, taken_t *t, both_wait_t *w)
{
    for (int64_t t0 = test_now_ms(); !both_series(w);) {
        varlog_entry_t e;
        varlog_err_t err = varlog_subscription_next(sub, 0, &e);
        if (err == VARLOG_OK) {
            t->llsn[e.meta.log_stream_id] = e.meta.llsn;
            t->n[e.meta.log_stream_id]++;
        } else {
            assert_int_equal(err, VARLOG_ERR_TIMED_OUT);
        }
        assert_true(test_now_ms() - t0 < cf_wait_bound_ms());
    }
}

static void assert_lag(const char *text, uint64_t sub, const uint64_t appended[3], const taken_t *t)
{
    for (int32_t ls = 1; ls <= 2; ls++) {
        double got = lag_value(text, "varlog_client_subscription_lag_entries", sub, ls);
        double want = (double)(appended[ls] - t->llsn[ls]);
        if (got != want)
            fail_msg("log stream %d: lag %g, want %g (appended %llu, delivered up to LLSN "
                     "%llu)\n%s",
                     ls, got, want, (unsigned long long)appended[ls],
                     (unsigned long long)t->llsn[ls], text);
    }
}

static void test_lag_follows_the_consumer(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    uint64_t appended[3] = {0, 200, 100};
    append_n(&f, 1, 200);
    append_n(&f, 2, 100);

    char *text = scrape(f.client); /* no subscription: the families, no series, no call */
    assert_non_null(strstr(text, "# TYPE varlog_client_subscription_lag_entries gauge\n"));
    assert_non_null(strstr(text, "# TYPE varlog_client_subscription_lag_seconds gauge\n"));
    assert_null(strstr(text, "varlog_client_subscription_lag_entries{"));
    varlog_stats_prometheus_free(text);

    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, VARLOG_GLSN_MAX, &sub), VARLOG_OK);
    taken_t t = {{0}, {0}};
    take(sub, &t, 50);
    both_wait_t w = {f.client, 1};
    take_until_both(sub, &t, &w);

    /* exact: entries committed after the last delivered, per log stream */
    int64_t before1 = test_now_ms();
    text = scrape(f.client);
    int64_t after1 = test_now_ms();
    assert_lag(text, 1, appended, &t);
    varlog_stats_prometheus_free(text);

    /* a backlog grows it; the seconds count from the first scrape that saw it */
    append_n(&f, 1, 30);
    appended[1] += 30;
    while (test_now_ms() - after1 < 120)
        (void)0; /* only time is wanted: the seconds below are a lower bound of it */
    int64_t before2 = test_now_ms();
    text = scrape(f.client);
    int64_t after2 = test_now_ms();
    assert_lag(text, 1, appended, &t);
    for (int32_t ls = 1; ls <= 2; ls++) {
        double s = lag_value(text, "varlog_client_subscription_lag_seconds", 1, ls);
        /* the oldest entry not delivered was seen committed in scrape 1 or before */
        if (s < (double)(before2 - after1) / 1000.0 - 0.002 ||
            s > (double)(after2 - before1 + 5000) / 1000.0)
            fail_msg("log stream %d: lag seconds %g, scrapes %lld ms apart\n%s", ls, s,
                     (long long)(before2 - after1), text);
    }
    varlog_stats_prometheus_free(text);

    /* read everything: 0 and 0 */
    take(sub, &t, (int)(appended[1] + appended[2] - t.n[1] - t.n[2]));
    assert_true(t.n[1] == appended[1] && t.n[2] == appended[2]);
    text = scrape(f.client);
    assert_lag(text, 1, appended, &t);
    for (int32_t ls = 1; ls <= 2; ls++)
        assert_true(lag_value(text, "varlog_client_subscription_lag_seconds", 1, ls) == 0);
    varlog_stats_prometheus_free(text);

    /* a second subscription is labelled 2; a closed one's series are gone */
    varlog_subscription_t *second = NULL;
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, VARLOG_GLSN_MAX, &second), VARLOG_OK);
    varlog_subscription_close(&sub);
    taken_t t2 = {{0}, {0}};
    take(second, &t2, 1);
    w.sub = 2;
    take_until_both(second, &t2, &w);
    text = scrape(f.client);
    assert_true(lag_value(text, "varlog_client_subscription_lag_entries", 1, 1) < 0);
    assert_lag(text, 2, appended, &t2);
    varlog_stats_prometheus_free(text);
    varlog_subscription_close(&second);
    cf_stop(&f);
}

/* varlog_subscribe_to over an LLSN range: the lag counts the range only, before any entry
 * arrived (its first LLSN is known), and is 0 once the range is complete. */
static void test_lag_of_a_range(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    append_n(&f, 1, 200);
    varlog_subscription_t *sub = NULL;
    /* LLSNs 51..100 */
    assert_int_equal(varlog_subscribe_to_iter(f.client, 1, 1, 51, 101, &sub), VARLOG_OK);
    char *text = scrape(f.client);
    double lag = lag_value(text, "varlog_client_subscription_lag_entries", 1, 1);
    if (lag != 50)
        fail_msg("lag %g of a 50-entry range not read\n%s", lag, text);
    varlog_stats_prometheus_free(text);
    for (int i = 0; i < 20; i++) {
        varlog_entry_t e;
        assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_OK);
    }
    text = scrape(f.client);
    assert_true(lag_value(text, "varlog_client_subscription_lag_entries", 1, 1) == 30);
    varlog_stats_prometheus_free(text);
    varlog_entry_t e;
    for (int i = 0; i < 30; i++)
        assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_OK);
    assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_ERR_END);
    text = scrape(f.client);
    assert_true(lag_value(text, "varlog_client_subscription_lag_entries", 1, 1) == 0);
    varlog_stats_prometheus_free(text);
    varlog_subscription_close(&sub);
    cf_stop(&f);
}

/* Replicas that do not answer cost a scrape stats.lag.timeout.ms, not their delay; the log
 * stream has no lag series then. stats.lag.timeout.ms 0: no call, no series. */
static void test_lag_bounded_and_off(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "stats.lag.timeout.ms", "200", NULL);
    append_n(&f, 1, 10);
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_to_iter(f.client, 1, 1, 1, VARLOG_LLSN_MAX, &sub), VARLOG_OK);
    char *text = scrape(f.client);
    assert_true(lag_value(text, "varlog_client_subscription_lag_entries", 1, 1) == 10);
    varlog_stats_prometheus_free(text);

    enum { HELD_MS = 20000 };
    assert_int_equal(varlog_server_delay(f.srv, PATH_REPLICA_MD, HELD_MS), VARLOG_OK);
    int64_t t0 = test_now_ms();
    text = scrape(f.client);
    int64_t took = test_now_ms() - t0;
    if (took >= HELD_MS)
        fail_msg("a scrape waited %lld ms for replicas held %d ms (stats.lag.timeout.ms 200)",
                 (long long)took, HELD_MS);
    assert_true(lag_value(text, "varlog_client_subscription_lag_entries", 1, 1) < 0);
    assert_non_null(strstr(text, "# TYPE varlog_client_subscription_lag_entries gauge\n"));
    varlog_stats_prometheus_free(text);
    assert_int_equal(varlog_server_delay(f.srv, PATH_REPLICA_MD, 0), VARLOG_OK);
    varlog_subscription_close(&sub);
    cf_stop(&f);

    cf_start(&f, 1, 1, "stats.lag.timeout.ms", "0", NULL);
    append_n(&f, 1, 10);
    assert_int_equal(varlog_subscribe_to_iter(f.client, 1, 1, 1, VARLOG_LLSN_MAX, &sub), VARLOG_OK);
    uint64_t calls_before = varlog_server_call_count(f.srv, PATH_REPLICA_MD);
    text = scrape(f.client);
    assert_null(strstr(text, "varlog_client_subscription_lag_entries{"));
    varlog_stats_prometheus_free(text);
    assert_true(varlog_server_call_count(f.srv, PATH_REPLICA_MD) == calls_before);
    varlog_subscription_close(&sub);
    cf_stop(&f);
}

/* ---- outages ------------------------------------------------------------------------------- */

typedef struct stats_wait {
    varlog_client_t *c;
    uint64_t outages;
    uint32_t down;
    uint64_t ms_above;
} stats_wait_t;

static bool outage_state(void *arg)
{
    stats_wait_t *w = arg;
    varlog_stats_t st;
    assert_int_equal(varlog_stats_get(w->c, &st), VARLOG_OK);
    return st.subscribe_outages == w->outages && st.subscribe_log_streams_down == w->down &&
           st.subscribe_outage_ms > w->ms_above;
}

static void test_outages_counted(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    append_n(&f, 1, 1);
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, VARLOG_GLSN_MAX, &sub), VARLOG_OK);
    varlog_entry_t e;
    assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_OK);
    varlog_stats_t st;
    assert_int_equal(varlog_stats_get(f.client, &st), VARLOG_OK);
    assert_true(st.subscribe_outages == 0 && st.subscribe_outage_ms == 0 &&
                st.subscribe_log_streams_down == 0);

    /* the node goes: one outage, its log stream down, its time growing while it lasts; the
     * consumer notices inside next() */
    assert_int_equal(varlog_server_stop(f.srv), VARLOG_OK);
    assert_int_equal(varlog_subscription_next(sub, 300, &e), VARLOG_ERR_TIMED_OUT);
    stats_wait_t w = {.c = f.client, .outages = 1, .down = 1, .ms_above = 0};
    while (!outage_state(&w))
        if (varlog_subscription_next(sub, 100, &e) != VARLOG_ERR_TIMED_OUT)
            fail_msg("the subscription ended or delivered while its node was down");
    assert_int_equal(varlog_stats_get(f.client, &st), VARLOG_OK);
    w.ms_above = st.subscribe_outage_ms;
    assert_true(test_wait_until(outage_state, &w, cf_wait_bound_ms()));
    char *text = scrape(f.client);
    assert_true(own_value(text, "varlog_client_subscription_outages_total") == 1);
    assert_true(own_value(text, "varlog_client_subscription_reconnecting") == 1);
    assert_true(own_value(text, "varlog_client_subscription_outage_seconds_total") > 0);
    varlog_stats_prometheus_free(text);

    /* back: the outage ends with the first entry; its time stops growing */
    assert_int_equal(varlog_server_restart(f.srv), VARLOG_OK);
    append_n(&f, 1, 1);
    assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_OK);
    assert_int_equal(varlog_stats_get(f.client, &st), VARLOG_OK);
    assert_true(st.subscribe_outages == 1 && st.subscribe_log_streams_down == 0);
    uint64_t total = st.subscribe_outage_ms;
    assert_true(total >= w.ms_above);
    varlog_subscription_health_t h;
    assert_int_equal(varlog_subscription_health(sub, &h), VARLOG_OK);
    assert_true(h.outages == 1 && !h.reconnecting);

    /* closed: still counted, not a millisecond more */
    varlog_subscription_close(&sub);
    assert_int_equal(varlog_stats_get(f.client, &st), VARLOG_OK);
    assert_true(st.subscribe_outages == 1 && st.subscribe_outage_ms == total &&
                st.subscribe_log_streams_down == 0);
    cf_stop(&f);
}

/* ---- a scrape against subscriptions opening and closing ---------------------------------- */

typedef struct racer {
    varlog_client_t *c;
    atomic_bool stop;
    unsigned scrapes;
} racer_t;

static void *scraper(void *arg)
{
    racer_t *r = arg;
    while (!atomic_load(&r->stop)) {
        char *text = NULL;
        if (varlog_stats_prometheus(r->c, &text, NULL) != VARLOG_OK)
            return (void *)1;
        varlog_stats_prometheus_free(text);
        r->scrapes++;
    }
    return NULL;
}

static void test_scrape_races_subscriptions(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    append_n(&f, 1, 20);
    append_n(&f, 2, 20);
    racer_t r = {.c = f.client};
    atomic_init(&r.stop, false);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, scraper, &r), 0);
    long rounds = test_scale(60, 10);
    for (long i = 0; i < rounds; i++) {
        varlog_subscription_t *sub = NULL;
        assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, VARLOG_GLSN_MAX, &sub), VARLOG_OK);
        varlog_entry_t e;
        for (long k = 0; k < i % 5; k++)
            assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_OK);
        varlog_subscription_close(&sub);
    }
    atomic_store(&r.stop, true);
    void *ret = NULL;
    assert_int_equal(pthread_join(th, &ret), 0);
    assert_null(ret);
    assert_true(r.scrapes > 0);
    cf_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lag_follows_the_consumer),   cmocka_unit_test(test_lag_of_a_range),
        cmocka_unit_test(test_lag_bounded_and_off),        cmocka_unit_test(test_outages_counted),
        cmocka_unit_test(test_scrape_races_subscriptions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
