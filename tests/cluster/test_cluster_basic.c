/* One storage node, one MR, two log streams: the round trip (appender and subscriber),
 * varlog-cli demo, Varlog's own Go client (varlogcli) reading what this library wrote and
 * the other way round, the admin API against varlogadm compared with varlogctl, and
 * subscribe_to, peek and trim against a real storage node (trim last: it deletes). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster_acct.h"
#include "cluster_admin.h"
#include "cluster_proc.h"
#include "cluster_scenario.h"
#include "cluster_work.h"
#include "test_support.h"
#include "varlog/admin.h"
#include "varlog/varlog.h"

static cluster_t C;
static bool started;

static int group_setup(void **state)
{
    (void)state;
    if (cluster_unavailable() != NULL)
        return 0;
    cluster_opts_t o = {.name = "basic", .sns = 1, .rf = 1, .mrs = 1, .log_streams = 2};
    started = cluster_start(&C, &o);
    return started ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    cluster_stop(&C);
    return 0;
}

static void tag_for(char *buf, size_t cap, const char *what)
{
    snprintf(buf, cap, "%s%ld", what, (long)getpid() % 100000);
}

/* ---- scenario 1: round trip, and varlog-cli demo ------------------------------------------- */

static void test_round_trip(void **state)
{
    (void)state;
    cluster_require();
    scenario_round_trip(&C, "round trip (1 SN)", 2000);
}

static void test_cli_demo(void **state)
{
    (void)state;
    cluster_require();
    scenario_cli_demo(&C, 20000);
}

/* ---- scenario 2: Varlog's Go client and this library read each other's records ----------- */

/* varlogcli subscribe logs "Subscribe: <data> ({LogEntryMeta:{TopicID:.. LogStreamID:..
 * GLSN:g LLSN:l} Data:[b b b]})" per entry, on stderr. */
static bool find_in_varlogcli(const char *out, const char *payload, size_t len, uint64_t *glsn,
                              uint64_t *llsn)
{
    char needle[160];
    snprintf(needle, sizeof(needle), "Subscribe: %.*s (", (int)len, payload);
    const char *p = strstr(out, needle);
    if (p == NULL)
        return false;
    if (strstr(p + 1, needle) != NULL)
        return false; /* twice */
    const char *g = strstr(p, "GLSN:"), *l = strstr(p, "LLSN:"), *d = strstr(p, "Data:[");
    if (g == NULL || l == NULL || d == NULL)
        return false;
    *glsn = strtoull(g + 5, NULL, 10);
    *llsn = strtoull(l + 5, NULL, 10);
    /* The bytes, as decimal numbers. */
    const char *q = d + 6;
    for (size_t i = 0; i < len; i++) {
        char *end;
        unsigned long b = strtoul(q, &end, 10);
        if (end == q || b != (unsigned char)payload[i])
            return false;
        q = end;
    }
    return *q == ']';
}

static void test_varlogcli_reads_c(void **state)
{
    (void)state;
    cluster_require();
    varlog_client_t *client = work_client(C.mr_addrs, NULL);
    acct_t a;
    char tag[24];
    tag_for(tag, sizeof(tag), "go");
    enum { N = 40 };
    acct_init(&a, tag, N, 56);
    char buf[56];
    varlog_entry_meta_t metas[N];
    for (long i = 0; i < N; i++) {
        acct_payload(&a, 0, i, buf);
        varlog_record_t rec = {.data = buf, .len = sizeof(buf)};
        varlog_outcome_t oc;
        acct_sent(&a, 0, i, 1);
        varlog_err_t rc;
        /* Alternate topic-wide and bound appends: both paths' positions are checked. */
        if (i % 2 == 0)
            rc = varlog_append(client, C.topic_id, &rec, 1, 10000, &metas[i], &oc);
        else
            rc = varlog_append_to(client, C.topic_id, C.log_streams[1], &rec, 1, 10000, &metas[i],
                                  &oc);
        acct_outcome(&a, 0, i, 1, rc, oc, &metas[i]);
        if (rc != VARLOG_OK)
            CLUSTER_FAIL(&C, "append: %s", varlog_last_error());
    }
    char vcli[600];
    cluster_tool(&C, "varlogcli", vcli, sizeof(vcli));
    char topic[16];
    snprintf(topic, sizeof(topic), "%d", C.topic_id);
    /* It never ends by itself: run it for a bounded time and read what it printed. */
    const char *argv[] = {vcli, "subscribe", "--mr", C.mr_addrs, "--tpid", topic, NULL};
    static char out[8 << 20];
    int rc = cluster_run(argv, NULL, 8000, out, sizeof(out));
    fprintf(stderr, "varlogcli subscribe ran 8 s (exit %d, %zu bytes of output)\n", rc,
            strlen(out));
    for (long i = 0; i < N; i++) {
        acct_payload(&a, 0, i, buf);
        uint64_t g, l;
        if (!find_in_varlogcli(out, buf, sizeof(buf), &g, &l)) {
            fprintf(stderr, "%.2000s\n", out);
            fail_msg("varlogcli did not print record %ld (%.20s) exactly once, intact", i, buf);
        }
        if (g != metas[i].glsn || l != metas[i].llsn)
            fail_msg("record %ld: varlogcli read GLSN %llu LLSN %llu, our callback said %llu/%llu",
                     i, (unsigned long long)g, (unsigned long long)l,
                     (unsigned long long)metas[i].glsn, (unsigned long long)metas[i].llsn);
    }
    fprintf(stderr, "varlogcli read all %d records at the GLSN/LLSN this library reported\n", N);
    acct_free(&a);
    varlog_client_destroy(client);
}

static void test_c_reads_varlogcli(void **state)
{
    (void)state;
    cluster_require();
    enum { N = 30 };
    char lines[N * 48] = "", line[48];
    for (int i = 0; i < N; i++) {
        snprintf(line, sizeof(line), "vcli%ld-line-%03d\n", (long)getpid() % 100000, i);
        strcat(lines, line);
    }
    char vcli[600], topic[16];
    cluster_tool(&C, "varlogcli", vcli, sizeof(vcli));
    snprintf(topic, sizeof(topic), "%d", C.topic_id);
    const char *argv[] = {vcli, "append", "--mr", C.mr_addrs, "--tpid", topic, NULL};
    char out[8192];
    int rc = cluster_run(argv, lines, 60000, out, sizeof(out));
    if (rc != 0)
        CLUSTER_FAIL(&C, "varlogcli append failed: %s", out);

    varlog_client_t *client = work_client(C.mr_addrs, NULL);
    uint64_t last;
    assert_true(acct_topic_last_glsn(client, C.topic_id, &last));
    varlog_subscription_t *sub;
    assert_int_equal(varlog_subscribe_iter(client, C.topic_id, 1, last + 1, &sub), VARLOG_OK);
    int seen[N] = {0};
    varlog_entry_t e;
    varlog_err_t r;
    uint64_t expect = 1;
    while ((r = varlog_subscription_next(sub, 20000, &e)) == VARLOG_OK) {
        assert_int_equal(e.meta.glsn, expect);
        expect++;
        for (int i = 0; i < N; i++) {
            snprintf(line, sizeof(line), "vcli%ld-line-%03d", (long)getpid() % 100000, i);
            if (e.len == strlen(line) && memcmp(e.data, line, e.len) == 0)
                seen[i]++;
        }
    }
    assert_int_equal(r, VARLOG_ERR_END);
    varlog_subscription_close(&sub);
    for (int i = 0; i < N; i++)
        if (seen[i] != 1)
            fail_msg("line %d of varlogcli append read back %d times", i, seen[i]);
    fprintf(stderr, "this library read all %d lines varlogcli appended, once each\n", N);
    varlog_client_destroy(client);
}

/* ---- scenario 5b: read windows against a real storage node ------------------------------- */

/* Reads [first, first + n) of the topic from sub: every GLSN once, in order, each the record
 * "tag-K" appended K-th. */
static void read_tagged(varlog_subscription_t *sub, uint64_t first, long n, const char *tag)
{
    char want[64];
    for (long k = 0; k < n; k++) {
        varlog_entry_t e;
        varlog_err_t r = varlog_subscription_next(sub, 20000, &e);
        if (r != VARLOG_OK)
            fail_msg("entry %ld of %ld: %s: %s", k, n, varlog_err_name(r), varlog_last_error());
        assert_int_equal(e.meta.glsn, first + (uint64_t)k);
        int len = snprintf(want, sizeof(want), "%s-%ld", tag, k);
        if (e.len != (size_t)len || memcmp(e.data, want, e.len) != 0)
            fail_msg("GLSN %llu holds %.*s, not %s", (unsigned long long)e.meta.glsn, (int)e.len,
                     (const char *)e.data, want);
    }
}

/* A topic-wide read in read windows of their least size (subscribe.window.bytes 1: 64 GLSNs
 * per log stream, 128 here), over 1000 records written in runs of 25 per log stream: a
 * real node keeps a window's stream open past its last entry when the window's last GLSN
 * is the other log stream's (wire protocol 6.3), so each switch must cancel the window's
 * streams and take the next's. A bounded read to END, then a tail read of the same
 * records. */
static void test_read_windows(void **state)
{
    (void)state;
    cluster_require();
    enum { CALLS = 40, PER_CALL = 25 };
    const long n = CALLS * PER_CALL;
    char tag[32];
    tag_for(tag, sizeof(tag), "win");
    const char *extra[] = {"subscribe.window.bytes=1", NULL};
    varlog_client_t *client = work_client(C.mr_addrs, extra);
    static char text[CALLS * PER_CALL][40];
    uint64_t first = 0;
    for (int c = 0; c < CALLS; c++) {
        varlog_record_t recs[PER_CALL];
        varlog_entry_meta_t metas[PER_CALL];
        for (int i = 0; i < PER_CALL; i++) {
            long k = (long)c * PER_CALL + i;
            int len = snprintf(text[k], sizeof(text[k]), "%s-%ld", tag, k);
            recs[i] = (varlog_record_t){text[k], (size_t)len};
        }
        varlog_err_t r = varlog_append(client, C.topic_id, recs, PER_CALL, 20000, metas, NULL);
        if (r != VARLOG_OK)
            fail_msg("append %d: %s: %s", c, varlog_err_name(r), varlog_last_error());
        if (c == 0)
            first = metas[0].glsn;
        assert_int_equal(metas[0].glsn, first + (uint64_t)c * PER_CALL);
    }
    varlog_subscription_t *sub;
    assert_int_equal(varlog_subscribe_iter(client, C.topic_id, first, first + (uint64_t)n, &sub),
                     VARLOG_OK);
    read_tagged(sub, first, n, tag);
    varlog_entry_t e;
    assert_int_equal(varlog_subscription_next(sub, 20000, &e), VARLOG_ERR_END);
    varlog_subscription_close(&sub);
    assert_int_equal(varlog_subscribe_iter(client, C.topic_id, first, VARLOG_GLSN_MAX, &sub),
                     VARLOG_OK);
    read_tagged(sub, first, n, tag);
    varlog_subscription_close(&sub);
    fprintf(stderr, "read %ld records twice in windows of 128 GLSNs, each once and in order\n", n);
    varlog_client_destroy(client);
}

/* ---- scenario 6: the admin API against varlogadm, compared with varlogctl ---------------- */

static void test_admin_reads(void **state)
{
    (void)state;
    cluster_require();
    admin_check_reads(&C);
}

static void test_admin_changes(void **state)
{
    (void)state;
    cluster_require();
    admin_check_changes(&C);
}

/* ---- scenario 6: subscribe_to, peek and trim against a real storage node ------------------ */

typedef struct trim_probe {
    varlog_client_t *client;
    int32_t topic, ls;
    uint64_t until;
    varlog_entry_meta_t first;
} trim_probe_t;

static bool trimmed(void *arg)
{
    trim_probe_t *p = arg;
    varlog_entry_meta_t last;
    return varlog_peek(p->client, p->topic, p->ls, 10000, &p->first, &last, NULL) == VARLOG_OK &&
           p->first.glsn > p->until;
}

static void test_subscribe_to_peek_trim(void **state)
{
    (void)state;
    cluster_require();
    varlog_client_t *client = work_client(C.mr_addrs, NULL);
    int32_t ls = C.log_streams[0];
    /* A few records of our own in the log stream, so that it is not empty. */
    acct_t a;
    char tag[24], buf[64];
    tag_for(tag, sizeof(tag), "pk");
    acct_init(&a, tag, 10, 64);
    varlog_entry_meta_t m[10];
    for (long i = 0; i < 10; i++) {
        acct_payload(&a, 0, i, buf);
        varlog_record_t rec = {.data = buf, .len = sizeof(buf)};
        assert_int_equal(varlog_append_to(client, C.topic_id, ls, &rec, 1, 10000, &m[i], NULL),
                         VARLOG_OK);
    }
    varlog_entry_meta_t first, last;
    bool complete;
    assert_int_equal(varlog_peek(client, C.topic_id, ls, 10000, &first, &last, &complete),
                     VARLOG_OK);
    fprintf(stderr, "peek of log stream %d: first GLSN %llu LLSN %llu, last GLSN %llu LLSN %llu\n",
            ls, (unsigned long long)first.glsn, (unsigned long long)first.llsn,
            (unsigned long long)last.glsn, (unsigned long long)last.llsn);
    assert_true(complete);
    assert_int_equal(last.glsn, m[9].glsn);
    assert_int_equal(last.llsn, m[9].llsn);
    assert_int_equal(first.llsn, 1);

    /* By LLSN: exactly the log stream's entries, in order, ours at the LLSNs reported. */
    varlog_subscription_t *sub;
    assert_int_equal(varlog_subscribe_to_iter(client, C.topic_id, ls, 1, last.llsn + 1, &sub),
                     VARLOG_OK);
    varlog_entry_t e;
    varlog_err_t r;
    uint64_t expect = 1;
    long ours = 0;
    while ((r = varlog_subscription_next(sub, 20000, &e)) == VARLOG_OK) {
        assert_int_equal(e.meta.llsn, expect);
        assert_int_equal(e.meta.log_stream_id, ls);
        expect++;
        for (long i = 0; i < 10; i++)
            if (e.meta.llsn == m[i].llsn) {
                acct_payload(&a, 0, i, buf);
                assert_int_equal(e.len, sizeof(buf));
                assert_memory_equal(e.data, buf, sizeof(buf));
                ours++;
            }
    }
    assert_int_equal(r, VARLOG_ERR_END);
    assert_int_equal(ours, 10);
    varlog_subscription_close(&sub);

    /* Trim up to our fifth record: a subscription from 1 ends TRIMMED, peek moves on. */
    uint64_t until = m[4].glsn;
    assert_int_equal(varlog_trim(client, C.topic_id, until, 10000), VARLOG_OK);
    /* Deletion on the node is asynchronous: await its effect. */
    trim_probe_t pr = {client, C.topic_id, ls, until, {0}};
    if (!test_wait_until(trimmed, &pr, 30000))
        fail_msg("peek still shows first GLSN %llu after trimming up to %llu",
                 (unsigned long long)pr.first.glsn, (unsigned long long)until);
    first = pr.first;
    fprintf(stderr, "after trim up to GLSN %llu: first GLSN %llu LLSN %llu\n",
            (unsigned long long)until, (unsigned long long)first.glsn,
            (unsigned long long)first.llsn);
    assert_int_equal(first.glsn, m[5].glsn);
    assert_int_equal(varlog_subscribe_iter(client, C.topic_id, 1, last.glsn + 1, &sub), VARLOG_OK);
    r = varlog_subscription_next(sub, 20000, &e);
    assert_int_equal(r, VARLOG_ERR_TRIMMED);
    varlog_subscription_close(&sub);
    acct_free(&a);
    varlog_client_destroy(client);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),        cmocka_unit_test(test_varlogcli_reads_c),
        cmocka_unit_test(test_c_reads_varlogcli), cmocka_unit_test(test_read_windows),
        cmocka_unit_test(test_admin_reads),       cmocka_unit_test(test_admin_changes),
        cmocka_unit_test(test_cli_demo),          cmocka_unit_test(test_subscribe_to_peek_trim),
    };
    cluster_filter_from_env();
    return cluster_main_result(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
