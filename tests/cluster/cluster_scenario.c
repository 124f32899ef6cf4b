#include "cluster_scenario.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster_acct.h"
#include "cluster_work.h"
#include "test_support.h"
#include "varlog/admin.h"

void scenario_tag(char *buf, size_t cap, const char *what)
{
    snprintf(buf, cap, "%s%ld", what, (long)getpid() % 100000);
}

/* Stops the producers, then checks the accounting and the subscriber against the log. */
static void settle_and_verify(cluster_t *c, varlog_client_t *client, acct_t *a, producer_t *ps,
                              int np, acct_sub_t *sub, const char *what)
{
    for (int i = 0; i < np; i++) {
        producer_stop(&ps[i], 60000);
        char name[64];
        snprintf(name, sizeof(name), "%s: producer %d (log stream %d)", what, i,
                 ps[i].log_stream_id);
        producer_print(&ps[i], name);
    }
    acct_report_t rep;
    acct_log_t log;
    bool ok = acct_verify(a, client, c->topic_id, &rep, &log);
    acct_report_print(what, &rep);
    char why[512] = "";
    bool sub_ok = sub == NULL || acct_sub_finish(sub, &log, rep.last_glsn, 60000, why, sizeof(why));
    acct_log_free(&log);
    if (!ok)
        CLUSTER_FAIL(c, "%s: accounting: %s", what, rep.first_problem);
    if (!sub_ok)
        CLUSTER_FAIL(c, "%s: subscriber: %s", what, why);
}

void scenario_round_trip(cluster_t *c, const char *what, long n)
{
    varlog_client_t *client = work_client(c->mr_addrs, NULL);
    uint64_t last;
    assert_true(acct_topic_last_glsn(client, c->topic_id, &last));
    /* Static: after a failure (cmocka's longjmp) the threads still running keep valid
     * memory until the process exits. */
    static acct_t a;
    char tag[24];
    scenario_tag(tag, sizeof(tag), "rt");
    acct_init(&a, tag, n * 4, 64);
    static acct_sub_t sub;
    assert_true(acct_sub_start(&sub, client, c->topic_id, last + 1, (size_t)n * 8));
    static producer_t p;
    assert_true(producer_start(&p, &a, 0, client, c->topic_id, 0, 1000));
    /* Appends go to every log stream; the subscriber merges them. */
    if (!producer_await_appended(&p, n, 60000))
        CLUSTER_FAIL(c, "%s: the topic-wide appender stored %ld of %ld records: %s", what,
                     producer_appended(&p), n, p.last_err);
    settle_and_verify(c, client, &a, &p, 1, &sub, what);
    assert_int_equal(p.failed + p.refused, 0);
    acct_sub_free(&sub);
    producer_free(&p);
    acct_free(&a);
    varlog_client_destroy(client);
}

void scenario_cli_demo(cluster_t *c, long records)
{
    char n[32], topic[16];
    snprintf(n, sizeof(n), "%ld", records);
    snprintf(topic, sizeof(topic), "%d", c->topic_id);
    const char *argv[] = {VARLOG_CLI_PATH, "--mr", c->mr_addrs, "demo", "--records", n,
                          "--producers",   "2",    "--topic",   topic,  NULL};
    static char out[1 << 16];
    int64_t t0 = test_now_ms();
    int rc = cluster_run(argv, NULL, 120000, out, sizeof(out));
    fprintf(stderr, "varlog-cli demo: exit %d in %.1f s\n%s\n", rc,
            (double)(test_now_ms() - t0) / 1000.0, out);
    if (rc != 0)
        CLUSTER_FAIL(c, "varlog-cli demo against the cluster exited with %d", rc);
}

/* ---- storage node failover ---------------------------------------------------------------- */

typedef struct ls_watch {
    cluster_t *c;
    varlog_admin_t *adm;
    int32_t ls;
    varlog_log_stream_status_t want;
    bool unseal; /* unseal the sealed ones through the admin API while waiting */
    char last_err[256];
} ls_watch_t;

static bool ls_has_status(void *arg)
{
    ls_watch_t *w = arg;
    varlog_log_stream_info_t ls;
    return varlog_admin_get_log_stream(w->adm, w->c->topic_id, w->ls, 5000, &ls) == VARLOG_OK &&
           ls.status == w->want;
}

/* True once every log stream of the topic is RUNNING (unsealing the sealed ones first when
 * asked: the admin refuses until the restarted replica caught up). */
static bool all_running(void *arg)
{
    ls_watch_t *w = arg;
    bool all = true;
    for (size_t i = 0; i < w->c->n_log_streams; i++) {
        int32_t id = w->c->log_streams[i];
        varlog_log_stream_info_t ls;
        if (varlog_admin_get_log_stream(w->adm, w->c->topic_id, id, 5000, &ls) != VARLOG_OK) {
            all = false;
            continue;
        }
        if (ls.status == VARLOG_LOG_STREAM_RUNNING)
            continue;
        all = false;
        if (!w->unseal || ls.status != VARLOG_LOG_STREAM_SEALED)
            continue;
        if (varlog_admin_unseal(w->adm, w->c->topic_id, id, 10000, NULL) == VARLOG_OK)
            continue;
        snprintf(w->last_err, sizeof(w->last_err), "%s", varlog_last_error());
        /* A restarted replica comes back SEALING ("unseal: invalid state"): sealing the
         * log stream again makes the admin bring it up to date and sealed, as varlogctl
         * logstream seal does, after which the unseal is accepted. */
        varlog_admin_seal(w->adm, w->c->topic_id, id, 30000, NULL);
    }
    return all;
}

bool scenario_await_running(cluster_t *c, varlog_admin_t *adm, bool unseal, int64_t timeout_ms,
                            char *why, size_t cap)
{
    ls_watch_t w = {.c = c, .adm = adm, .unseal = unseal};
    bool ok = test_wait_until(all_running, &w, timeout_ms);
    if (why != NULL && cap > 0)
        snprintf(why, cap, "%s", w.last_err);
    return ok;
}

static double secs(int64_t from, int64_t to)
{
    return (double)(to - from) / 1000.0;
}

static void failover_round(cluster_t *c, varlog_admin_t *adm, producer_t *ps, int victim,
                           bool auto_unseal, int round)
{
    int32_t ls1 = c->log_streams[0];
    varlog_log_stream_info_t info;
    if (varlog_admin_get_log_stream(adm, c->topic_id, ls1, 10000, &info) != VARLOG_OK)
        CLUSTER_FAIL(c, "get_log_stream %d: %s", ls1, varlog_last_error());
    const char *role = "storage node";
    if (victim <= 0) {
        role = victim == 0 ? "backup" : "primary";
        assert_true(info.n_replicas >= (victim == 0 ? 2u : 1u));
        victim = info.replicas[victim == 0 ? 1 : 0];
    }
    char k[16];
    snprintf(k, sizeof(k), "%d", victim);
    int64_t t_kill = test_now_ms();
    if (cluster_cmd(c, "kill-sn", k, NULL, 0) != 0)
        CLUSTER_FAIL(c, "kill-sn %d failed", victim);

    ls_watch_t w = {.c = c, .adm = adm, .ls = ls1, .want = VARLOG_LOG_STREAM_SEALED};
    if (!test_wait_until(ls_has_status, &w, 60000))
        CLUSTER_FAIL(c, "log stream %d not sealed 60 s after kill -9 of storage node %d", ls1,
                     victim);
    int64_t t_sealed = test_now_ms();
    /* --no-wait: this round times the unseal itself and, without --auto-unseal, unseals
     * through the admin API (restart-sn would otherwise wait for the unseal, or do it with
     * varlogctl). */
    if (cluster_cmd_opt(c, "restart-sn", k, "--no-wait", NULL, 0) != 0)
        CLUSTER_FAIL(c, "restart-sn %d failed", victim);
    int64_t t_restarted = test_now_ms();
    w.unseal = !auto_unseal;
    if (!test_wait_until(all_running, &w, 120000))
        CLUSTER_FAIL(c, "log streams not running 120 s after storage node %d restarted (%s): %s",
                     victim, auto_unseal ? "varlogadm --auto-unseal" : "varlog_admin_unseal",
                     w.last_err);
    int64_t t_visible = test_now_ms();
    for (int i = 0; i < 2; i++)
        producer_mark(&ps[i]);
    int64_t ok_bound = producer_await_ok_after_mark(&ps[0], 30000);
    int64_t ok_topic = producer_await_ok_after_mark(&ps[1], 30000);
    fprintf(stderr,
            "round %d: kill -9 of storage node %d (%s of log stream %d); sealed after %.1f s; "
            "restarted; unsealed (%s) %.1f s after the restart; appending resumed %lld ms "
            "(bound appender) and %lld ms (topic-wide) after the unseal was visible\n",
            round, victim, role, ls1, secs(t_kill, t_sealed),
            auto_unseal ? "by varlogadm --auto-unseal" : "through varlog_admin_unseal",
            secs(t_restarted, t_visible), ok_bound ? (long long)(ok_bound - t_visible) : -1LL,
            ok_topic ? (long long)(ok_topic - t_visible) : -1LL);
    if (ok_bound == 0 || ok_bound - t_visible > 5000)
        CLUSTER_FAIL(c,
                     "round %d: the appender bound to log stream %d did not resume within 5 s "
                     "of the unseal (last failure: %s)",
                     round, ls1, ps[0].last_err);
    if (ok_topic == 0 || ok_topic - t_visible > 5000)
        CLUSTER_FAIL(c,
                     "round %d: the topic-wide appender did not resume within 5 s of the "
                     "unseal (last failure: %s)",
                     round, ps[1].last_err);
}

void scenario_sn_failover(cluster_t *c, const int *victims, int n_victims, bool auto_unseal)
{
    varlog_client_t *client = work_client(c->mr_addrs, NULL);
    varlog_admin_t *adm = NULL;
    char err[256];
    if (varlog_admin_new(c->admin_addr, NULL, &adm, err, sizeof(err)) != VARLOG_OK)
        fail_msg("varlog_admin_new: %s", err);
    uint64_t last;
    assert_true(acct_topic_last_glsn(client, c->topic_id, &last));
    static acct_t a; /* static: see scenario_round_trip */
    char tag[24];
    scenario_tag(tag, sizeof(tag), auto_unseal ? "au" : "fo");
    acct_init(&a, tag, 60000, 64);
    static acct_sub_t sub;
    assert_true(acct_sub_start(&sub, client, c->topic_id, last + 1, 400000));
    static producer_t ps[2];
    assert_true(producer_start(&ps[0], &a, 0, client, c->topic_id, c->log_streams[0], 200));
    assert_true(producer_start(&ps[1], &a, 1, client, c->topic_id, 0, 200));
    for (int i = 0; i < 2; i++)
        if (!producer_await_appended(&ps[i], 100, 30000))
            CLUSTER_FAIL(c, "producer %d stored too little before the faults: %s", i,
                         ps[i].last_err);
    for (int r = 0; r < n_victims; r++)
        failover_round(c, adm, ps, victims[r], auto_unseal, r + 1);
    /* Some load after the last round, then the checks. */
    long base = producer_appended(&ps[1]);
    producer_await_appended(&ps[1], base + 100, 10000);
    settle_and_verify(c, client, &a, ps, 2, &sub, auto_unseal ? "auto-unseal" : "failover");
    acct_sub_free(&sub);
    for (int i = 0; i < 2; i++)
        producer_free(&ps[i]);
    acct_free(&a);
    varlog_admin_destroy(adm);
    varlog_client_destroy(client);
}

/* ---- a log stream added while appending and subscribing ---------------------------------- */

void scenario_add_log_stream(cluster_t *c)
{
    varlog_client_t *client = work_client(c->mr_addrs, NULL);
    uint64_t last;
    assert_true(acct_topic_last_glsn(client, c->topic_id, &last));
    static acct_t a; /* static: see scenario_round_trip */
    char tag[24];
    scenario_tag(tag, sizeof(tag), "al");
    acct_init(&a, tag, 40000, 64);
    static acct_sub_t sub;
    assert_true(acct_sub_start(&sub, client, c->topic_id, last + 1, 400000));
    static producer_t ps[2];
    assert_true(producer_start(&ps[0], &a, 0, client, c->topic_id, 0, 300));
    if (!producer_await_appended(&ps[0], 200, 30000))
        CLUSTER_FAIL(c, "the topic-wide appender stored too little: %s", ps[0].last_err);
    char id[64];
    int64_t t0 = test_now_ms();
    if (cluster_cmd(c, "add-ls", NULL, id, sizeof(id)) != 0)
        CLUSTER_FAIL(c, "varlogctl logstream add failed%s", "");
    int32_t new_ls = (int32_t)strtol(id, NULL, 10);
    fprintf(stderr, "log stream %d added in %.1f s while appending and subscribing\n", new_ls,
            secs(t0, test_now_ms()));
    assert_true(new_ls > 0);
    assert_int_equal(varlog_client_refresh(client, 10000), VARLOG_OK);
    /* Records certainly in the new log stream: an appender bound to it. */
    assert_true(producer_start(&ps[1], &a, 1, client, c->topic_id, new_ls, 200));
    if (!producer_await_appended(&ps[1], 200, 30000))
        CLUSTER_FAIL(c, "the appender bound to the new log stream %d stored too little: %s", new_ls,
                     ps[1].last_err);
    long base = producer_appended(&ps[0]);
    producer_await_appended(&ps[0], base + 200, 30000);
    settle_and_verify(c, client, &a, ps, 2, &sub, "add log stream");
    long in_new = 0;
    for (int p = 0; p < 2; p++)
        for (long s = 0; s < a.cap; s++)
            in_new += a.recs[p][s].state == ACCT_APPENDED && a.recs[p][s].log_stream_id == new_ls;
    fprintf(stderr, "%ld records stored in the new log stream %d\n", in_new, new_ls);
    assert_true(in_new > 0);
    acct_sub_free(&sub);
    for (int i = 0; i < 2; i++)
        producer_free(&ps[i]);
    acct_free(&a);
    varlog_client_destroy(client);
}

/* ---- the metadata repository's first node killed ------------------------------------------ */

void scenario_mr_failover(cluster_t *c)
{
    varlog_client_t *client = work_client(c->mr_addrs, NULL);
    uint64_t last;
    assert_true(acct_topic_last_glsn(client, c->topic_id, &last));
    static acct_t a; /* static: see scenario_round_trip */
    char tag[24];
    scenario_tag(tag, sizeof(tag), "mr");
    acct_init(&a, tag, 40000, 64);
    static acct_sub_t sub;
    assert_true(acct_sub_start(&sub, client, c->topic_id, last + 1, 400000));
    static producer_t ps[1];
    assert_true(producer_start(&ps[0], &a, 0, client, c->topic_id, 0, 300));
    if (!producer_await_appended(&ps[0], 200, 30000))
        CLUSTER_FAIL(c, "the topic-wide appender stored too little: %s", ps[0].last_err);

    /* The first of metadata.addresses, which every client asks first. */
    int64_t t_kill = test_now_ms();
    if (cluster_cmd(c, "kill-mr", "1", NULL, 0) != 0)
        CLUSTER_FAIL(c, "kill-mr 1 failed%s", "");
    long base = producer_appended(&ps[0]);
    if (!producer_await_appended(&ps[0], base + 300, 60000))
        CLUSTER_FAIL(c, "appending stalled after kill -9 of MR %s: %s", c->mr_addr[0],
                     ps[0].last_err);
    fprintf(stderr, "kill -9 of MR 1 (%s): 300 more records stored %.1f s after it\n",
            c->mr_addr[0], secs(t_kill, test_now_ms()));

    /* A new client while the first address is down, appending and refreshing. */
    int64_t t0 = test_now_ms();
    varlog_client_t *second = work_client(c->mr_addrs, NULL);
    int64_t opened = test_now_ms() - t0;
    fprintf(stderr, "a new client opened in %lld ms with MR 1 (%s) down\n", (long long)opened,
            c->mr_addr[0]);
    char buf[64];
    for (long s = 0; s < 50; s++) {
        acct_payload(&a, 1, s, buf);
        varlog_record_t rec = {.data = buf, .len = a.rec_len};
        varlog_entry_meta_t m;
        varlog_outcome_t oc = VARLOG_NOT_APPENDED;
        acct_sent(&a, 1, s, 1);
        varlog_err_t rc = varlog_append(second, c->topic_id, &rec, 1, 10000, &m, &oc);
        acct_outcome(&a, 1, s, 1, rc, oc, &m);
        if (rc != VARLOG_OK)
            CLUSTER_FAIL(c, "append through the new client with MR 1 down: %s",
                         varlog_last_error());
    }
    /* One refresh must do: the client has two live seeds besides the dead one. The next
     * tries only say, on failure, whether it ever recovers. */
    int64_t t_ref = test_now_ms();
    if (varlog_client_refresh(client, 10000) != VARLOG_OK) {
        char first_err[512];
        snprintf(first_err, sizeof(first_err), "%s", varlog_last_error());
        int64_t took = test_now_ms() - t_ref;
        int later_ok = 0;
        for (int i = 0; i < 5; i++)
            later_ok += varlog_client_refresh(client, 10000) == VARLOG_OK;
        CLUSTER_FAIL(c,
                     "varlog_client_refresh of the first client with MR 1 down failed after "
                     "%lld ms (%d of 5 later refreshes succeeded): %s",
                     (long long)took, later_ok, first_err);
    }
    varlog_client_destroy(second);

    if (cluster_cmd(c, "restart-mr", "1", NULL, 0) != 0)
        CLUSTER_FAIL(c, "restart-mr 1 failed%s", "");
    base = producer_appended(&ps[0]);
    producer_await_appended(&ps[0], base + 100, 30000);
    settle_and_verify(c, client, &a, ps, 1, &sub, "MR failover");
    acct_sub_free(&sub);
    producer_free(&ps[0]);
    acct_free(&a);
    varlog_client_destroy(client);
}
