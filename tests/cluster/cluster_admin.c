#include "cluster_admin.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster_json.h"
#include "cluster_work.h"
#include "test_support.h"
#include "varlog/admin.h"

static char out[1 << 18];

/* Runs `varlogctl ARGS --admin ADDR` (ARGS split at spaces) into out; its exit status. */
static int ctl(const cluster_t *c, const char *fmt, ...)
{
    char args[512], vctl[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    cluster_tool(c, "varlogctl", vctl, sizeof(vctl));
    const char *argv[24];
    size_t n = 0;
    argv[n++] = vctl;
    for (char *s = args, *tok; (tok = strtok_r(s, " ", &s)) != NULL && n < 20;)
        argv[n++] = tok;
    argv[n++] = "--admin";
    argv[n++] = c->admin_addr;
    argv[n] = NULL;
    return cluster_run(argv, NULL, 90000, out, sizeof(out));
}

static void ctl_ok(const cluster_t *c, const char *args)
{
    int rc = ctl(c, "%s", args);
    if (rc != 0)
        fail_msg("varlogctl %s: exit %d: %s", args, rc, out);
}

static varlog_admin_t *admin_open(const cluster_t *c)
{
    varlog_admin_t *adm = NULL;
    char err[256];
    if (varlog_admin_new(c->admin_addr, NULL, &adm, err, sizeof(err)) != VARLOG_OK)
        fail_msg("varlog_admin_new(%s): %s", c->admin_addr, err);
    return adm;
}

#define ADM_OK(call)                                                                               \
    do {                                                                                           \
        varlog_err_t rc_ = (call);                                                                 \
        if (rc_ != VARLOG_OK)                                                                      \
            fail_msg("%s: %s: %s", #call, varlog_err_name(rc_), varlog_last_error());              \
    } while (0)

static void check_log_stream(const cluster_t *c, const varlog_log_stream_info_t *ls)
{
    char args[128];
    snprintf(args, sizeof(args), "logstream describe --tpid %d --lsid %d", ls->topic_id,
             ls->log_stream_id);
    ctl_ok(c, args);
    long long ids[VARLOG_ADMIN_MAX_REPLICAS], lsid[2];
    assert_int_equal(json_ints(out, "logStreamId", lsid, 2), 1);
    assert_int_equal(lsid[0], ls->log_stream_id);
    size_t n = json_ints(out, "storageNodeId", ids, VARLOG_ADMIN_MAX_REPLICAS);
    assert_int_equal(n, ls->n_replicas);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ids[i], ls->replicas[i]);
}

void admin_check_reads(const cluster_t *c)
{
    varlog_admin_t *adm = admin_open(c);

    /* Topics. */
    varlog_topic_info_t topics[16];
    size_t nt = 0;
    ADM_OK(varlog_admin_list_topics(adm, -1, topics, 16, &nt));
    ctl_ok(c, "topic describe");
    long long ids[64];
    size_t n = json_ints(out, "topicId", ids, 64);
    assert_int_equal(n, nt);
    for (size_t i = 0; i < n; i++) {
        bool found = false;
        for (size_t j = 0; j < nt; j++)
            found = found || topics[j].topic_id == ids[i];
        if (!found)
            fail_msg("varlogctl lists topic %lld, the admin API does not", ids[i]);
    }
    varlog_topic_info_t t;
    ADM_OK(varlog_admin_get_topic(adm, c->topic_id, -1, &t));
    assert_int_equal(t.topic_id, c->topic_id);
    assert_int_equal(t.status, VARLOG_TOPIC_RUNNING);
    assert_int_equal(t.n_log_streams, c->n_log_streams);

    /* Log streams: ids and replicas, the list and each one. */
    varlog_log_stream_info_t lss[CLUSTER_MAX_LS];
    size_t nl = 0;
    ADM_OK(varlog_admin_list_log_streams(adm, c->topic_id, -1, lss, CLUSTER_MAX_LS, &nl));
    assert_int_equal(nl, c->n_log_streams);
    char args[128];
    snprintf(args, sizeof(args), "logstream describe --tpid %d", c->topic_id);
    ctl_ok(c, args);
    n = json_ints(out, "logStreamId", ids, 64);
    assert_int_equal(n, nl);
    for (size_t i = 0; i < nl; i++) {
        assert_int_equal(lss[i].log_stream_id, c->log_streams[i]);
        assert_int_equal(lss[i].topic_id, c->topic_id);
        varlog_log_stream_info_t one;
        ADM_OK(varlog_admin_get_log_stream(adm, c->topic_id, lss[i].log_stream_id, -1, &one));
        assert_int_equal(one.n_replicas, lss[i].n_replicas);
        check_log_stream(c, &one);
    }

    /* Storage nodes: id, address, replicas hosted. */
    varlog_storage_node_info_t sns[CLUSTER_MAX_NODES];
    size_t ns = 0;
    ADM_OK(varlog_admin_list_storage_nodes(adm, -1, sns, CLUSTER_MAX_NODES, &ns));
    assert_int_equal(ns, (size_t)c->n_sns);
    for (size_t i = 0; i < ns; i++) {
        varlog_storage_node_info_t one;
        ADM_OK(varlog_admin_get_storage_node(adm, sns[i].storage_node_id, -1, &one));
        snprintf(args, sizeof(args), "storagenode describe --snid %d", one.storage_node_id);
        ctl_ok(c, args);
        char addr[2][128];
        assert_int_equal(json_strs(out, "address", addr, 2), 1);
        assert_string_equal(addr[0], one.address);
        assert_string_equal(one.address, sns[i].address);
        assert_int_equal(json_ints(out, "logStreamId", ids, 64), one.n_log_stream_replicas);
    }

    /* The metadata repository. */
    varlog_mr_node_info_t mrs[CLUSTER_MAX_NODES];
    size_t nm = 0;
    ADM_OK(varlog_admin_list_mr_nodes(adm, -1, mrs, CLUSTER_MAX_NODES, &nm));
    assert_int_equal(nm, (size_t)c->n_mrs);
    ctl_ok(c, "mr describe");
    long long node_ids[CLUSTER_MAX_NODES];
    char rpc[CLUSTER_MAX_NODES][128], raft[CLUSTER_MAX_NODES][128];
    int leader[CLUSTER_MAX_NODES];
    assert_int_equal(json_ints(out, "nodeId", node_ids, CLUSTER_MAX_NODES), nm);
    json_strs(out, "rpcAddr", rpc, CLUSTER_MAX_NODES);
    json_strs(out, "raftURL", raft, CLUSTER_MAX_NODES);
    json_bools(out, "leader", leader, CLUSTER_MAX_NODES);
    uint64_t ctl_leader = 0;
    for (size_t i = 0; i < nm; i++) {
        size_t j = 0;
        while (j < nm && (uint64_t)node_ids[j] != mrs[i].node_id)
            j++;
        if (j == nm)
            fail_msg("MR node %llu of the admin API is not in varlogctl's list",
                     (unsigned long long)mrs[i].node_id);
        assert_string_equal(mrs[i].rpc_addr, rpc[j]);
        assert_string_equal(mrs[i].raft_url, raft[j]);
        assert_int_equal(mrs[i].leader, leader[j] == 1);
        if (leader[j] == 1)
            ctl_leader = (uint64_t)node_ids[j];
    }
    uint64_t lead = 0;
    int32_t rf = 0;
    varlog_mr_member_t members[CLUSTER_MAX_NODES];
    size_t nmem = 0;
    ADM_OK(varlog_admin_get_mr_members(adm, -1, &lead, &rf, members, CLUSTER_MAX_NODES, &nmem));
    assert_int_equal(nmem, nm);
    assert_int_equal(lead, ctl_leader);
    for (size_t i = 0; i < nmem; i++) {
        bool found = false;
        for (size_t j = 0; j < nm; j++)
            found = found || strcmp(members[i].peer, raft[j]) == 0;
        if (!found)
            fail_msg("MR member %s is not among varlogctl's raft URLs", members[i].peer);
    }
    fprintf(stderr,
            "admin API and varlogctl agree: %zu topic(s), %zu log stream(s), %zu SN, "
            "%zu MR, replication factor %d\n",
            nt, nl, ns, nm, rf);
    varlog_admin_destroy(adm);
}

typedef struct first_probe {
    varlog_client_t *client;
    int32_t topic, ls;
    uint64_t above;
} first_probe_t;

/* A log stream's description, polled until it is no longer SEALING (or the call fails). */
typedef struct ls_state {
    varlog_admin_t *adm;
    int32_t topic, ls;
    varlog_err_t rc;
    varlog_log_stream_info_t now;
} ls_state_t;

static bool ls_not_sealing(void *arg)
{
    ls_state_t *st = arg;
    st->rc = varlog_admin_get_log_stream(st->adm, st->topic, st->ls, -1, &st->now);
    return st->rc != VARLOG_OK || st->now.status != VARLOG_LOG_STREAM_SEALING;
}

static bool first_above(void *arg)
{
    first_probe_t *p = arg;
    varlog_entry_meta_t first, last;
    return varlog_peek(p->client, p->topic, p->ls, 10000, &first, &last, NULL) == VARLOG_OK &&
           first.glsn > p->above;
}

void admin_check_changes(const cluster_t *c)
{
    varlog_admin_t *adm = admin_open(c);
    int32_t t2;
    ADM_OK(varlog_admin_add_topic(adm, 60000, &t2));
    char args[160];
    snprintf(args, sizeof(args), "topic describe --tpid %d", t2);
    ctl_ok(c, args);
    long long ids[16];
    assert_int_equal(json_ints(out, "topicId", ids, 16), 1);
    assert_int_equal(ids[0], t2);

    varlog_log_stream_info_t ls;
    int64_t t0 = test_now_ms();
    ADM_OK(varlog_admin_add_log_stream(adm, t2, 90000, &ls));
    fprintf(stderr, "varlog_admin_add_log_stream: log stream %d of topic %d in %.1f s\n",
            ls.log_stream_id, t2, (double)(test_now_ms() - t0) / 1000.0);
    assert_int_equal(ls.topic_id, t2);
    assert_int_equal(ls.status, VARLOG_LOG_STREAM_RUNNING);
    check_log_stream(c, &ls);

    /* Records in it, for seal's GLSN and for trim. */
    varlog_client_t *client = work_client(c->mr_addrs, NULL);
    varlog_entry_meta_t m[4];
    for (int i = 0; i < 4; i++) {
        varlog_record_t rec = {.data = "admin-check", .len = 11};
        ADM_OK(varlog_append_to(client, t2, ls.log_stream_id, &rec, 1, 10000, &m[i], NULL));
    }

    /* Seal: the right pair seals; a wrong topic or log stream is refused and seals nothing. */
    varlog_err_t rc = varlog_admin_seal(adm, t2 + 1000, ls.log_stream_id, 30000, NULL);
    fprintf(stderr, "seal with a wrong topic: %s (%s)\n", varlog_err_name(rc), varlog_last_error());
    assert_int_equal(rc, VARLOG_ERR_UNKNOWN_TOPIC);
    varlog_log_stream_info_t now;
    ADM_OK(varlog_admin_get_log_stream(adm, t2, ls.log_stream_id, -1, &now));
    assert_int_equal(now.status, VARLOG_LOG_STREAM_RUNNING);
    assert_int_equal(varlog_admin_seal(adm, t2, 9999, 30000, NULL), VARLOG_ERR_UNKNOWN_LOG_STREAM);
    uint64_t sealed = 0;
    ADM_OK(varlog_admin_seal(adm, t2, ls.log_stream_id, 30000, &sealed));
    assert_int_equal(sealed, m[3].glsn);
    /* varlogadm may still describe it SEALING for a moment after Seal answered (seen once):
     * awaited, bounded, and it must end SEALED. */
    ls_state_t st = {.adm = adm, .topic = t2, .ls = ls.log_stream_id};
    test_wait_until(ls_not_sealing, &st, 10000);
    assert_int_equal(st.rc, VARLOG_OK);
    assert_int_equal(st.now.status, VARLOG_LOG_STREAM_SEALED);
    snprintf(args, sizeof(args), "logstream seal --tpid %d --lsid %d", t2, ls.log_stream_id);
    ctl_ok(c, args);
    long long sg[2];
    assert_int_equal(json_ints(out, "sealedGLSN", sg, 2), 1);
    assert_int_equal(sg[0], sealed);

    rc = varlog_admin_unseal(adm, t2 + 1000, ls.log_stream_id, 30000, NULL);
    fprintf(stderr, "unseal with a wrong topic: %s (%s)\n", varlog_err_name(rc),
            varlog_last_error());
    assert_int_equal(rc, VARLOG_ERR_UNKNOWN_TOPIC);
    ADM_OK(varlog_admin_get_log_stream(adm, t2, ls.log_stream_id, -1, &now));
    assert_int_equal(now.status, VARLOG_LOG_STREAM_SEALED);
    varlog_log_stream_info_t after;
    ADM_OK(varlog_admin_unseal(adm, t2, ls.log_stream_id, 30000, &after));
    assert_int_equal(after.log_stream_id, ls.log_stream_id);
    ADM_OK(varlog_admin_get_log_stream(adm, t2, ls.log_stream_id, -1, &now));
    assert_int_equal(now.status, VARLOG_LOG_STREAM_RUNNING);

    /* Trim through the admin: the first two records go. */
    ADM_OK(varlog_admin_trim(adm, t2, m[1].glsn, 30000));
    first_probe_t fp = {client, t2, ls.log_stream_id, m[1].glsn};
    if (!test_wait_until(first_above, &fp, 30000))
        fail_msg("after varlog_admin_trim up to GLSN %llu peek still shows it",
                 (unsigned long long)m[1].glsn);

    /* Unregister: the admin and varlogctl no longer describe it as running. */
    ADM_OK(varlog_admin_unregister_topic(adm, t2, 60000));
    varlog_topic_info_t gone;
    rc = varlog_admin_get_topic(adm, t2, -1, &gone);
    int ctl_rc = ctl(c, "topic describe --tpid %d", t2);
    fprintf(stderr, "after unregister: get_topic %s; varlogctl exit %d: %.200s\n",
            varlog_err_name(rc), ctl_rc, out);
    assert_true(rc == VARLOG_ERR_UNKNOWN_TOPIC ||
                (rc == VARLOG_OK && gone.status == VARLOG_TOPIC_DELETED));
    assert_int_equal(rc == VARLOG_OK, ctl_rc == 0);
    varlog_client_destroy(client);
    varlog_admin_destroy(adm);
}
