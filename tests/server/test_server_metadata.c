/* Discovery on the embedded server (GetClusterInfo, GetMetadata), topology changes and the
 * applied index, start options and the varlog-server program. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server_test_util.h"
#include "test_support.h"

static int setup(void **state)
{
    return fixture_setup(state, 2, 3); /* topic 1: LS 1-3; topic 2: LS 4-6 */
}

static int teardown(void **state)
{
    return fixture_teardown(state);
}

static Varlog__Mrpb__GetClusterInfoResponse *cluster_info_at(rpc_client_t *c, const char *addr)
{
    Varlog__Mrpb__GetClusterInfoRequest r = VARLOG__MRPB__GET_CLUSTER_INFO_REQUEST__INIT;
    r.cluster_id = 1;
    ProtobufCMessage *m = NULL;
    varlog_err_t err =
        rpc_unary(c, addr, M_PATH_CLUSTER_INFO, &r.base,
                  &varlog__mrpb__get_cluster_info_response__descriptor, T_TIMEOUT, &m, NULL);
    return err == VARLOG_OK ? (Varlog__Mrpb__GetClusterInfoResponse *)m : NULL;
}

/* What the Go client's mrconnector accepts: non-zero node id and leader, one voting member
 * with a peer URL and this server's endpoint, applied index >= 1. */
static void test_cluster_info(void **state)
{
    srv_fixture_t *f = *state;
    Varlog__Mrpb__GetClusterInfoResponse *r = cluster_info_at(f->client, f->addr);
    assert_non_null(r);
    const Varlog__Mrpb__ClusterInfo *ci = r->cluster_info;
    assert_non_null(ci);
    assert_int_equal(ci->cluster_id, 1);
    assert_true(ci->node_id != 0);
    assert_int_equal(ci->leader, ci->node_id);
    assert_int_equal(ci->replication_factor, 1);
    assert_true(ci->applied_index >= 1);
    assert_int_equal(ci->n_members, 1);
    assert_int_equal(ci->members[0]->key, ci->node_id);
    char peer[80];
    snprintf(peer, sizeof(peer), "http://%s", f->addr);
    assert_string_equal(ci->members[0]->value->peer, peer);
    assert_string_equal(ci->members[0]->value->endpoint, f->addr);
    assert_false(ci->members[0]->value->learner);
    free_msg(r);
}

static void assert_topology(const Varlog__Varlogpb__MetadataDescriptor *md, const char *addr)
{
    assert_int_equal(md->n_storage_nodes, 1);
    assert_int_equal(md->storage_nodes[0]->storage_node->storage_node_id, 1);
    assert_string_equal(md->storage_nodes[0]->storage_node->address, addr);
    assert_int_equal(md->storage_nodes[0]->n_paths, 1);
    for (size_t i = 0; i < md->n_log_streams; i++) {
        const Varlog__Varlogpb__LogStreamDescriptor *d = md->log_streams[i];
        if (i > 0)
            assert_true(md->log_streams[i - 1]->log_stream_id < d->log_stream_id);
        assert_int_equal(d->n_replicas, 1);
        assert_int_equal(d->replicas[0]->storage_node_id, 1);
        assert_true(strlen(d->replicas[0]->storage_node_path) > 0);
    }
}

/* Topics 1..T with N log streams each, numbered from 1 across topics, sorted by id. */
static void test_get_metadata(void **state)
{
    srv_fixture_t *f = *state;
    Varlog__Mrpb__GetMetadataResponse *r = NULL;
    assert_int_equal(get_metadata(f, &r), VARLOG_OK);
    const Varlog__Varlogpb__MetadataDescriptor *md = r->metadata;
    assert_non_null(md);
    assert_true(md->applied_index >= 1);
    assert_topology(md, f->addr);
    assert_int_equal(md->n_topics, 2);
    assert_int_equal(md->n_log_streams, 6);
    for (size_t t = 0; t < 2; t++) {
        assert_int_equal(md->topics[t]->topic_id, (int32_t)t + 1);
        assert_int_equal(md->topics[t]->n_log_streams, 3);
        for (size_t i = 0; i < 3; i++)
            assert_int_equal(md->topics[t]->log_streams[i], (int32_t)(3 * t + i + 1));
    }
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(md->log_streams[i]->log_stream_id, (int32_t)i + 1);
        assert_int_equal(md->log_streams[i]->topic_id, (int32_t)(i / 3) + 1);
        assert_int_equal(md->log_streams[i]->status,
                         VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING);
    }
    free_msg(r);
}

/* Every change bumps the applied index (Go clients adopt metadata only when it changed);
 * log streams stay sorted when an older topic gets a new one. */
static void test_topology_changes(void **state)
{
    srv_fixture_t *f = *state;
    uint64_t idx = varlog_server_applied_index(f->srv);
    int32_t topic = 0, ls = 0, ls2 = 0;
    assert_int_equal(varlog_server_add_topic(f->srv, &topic), VARLOG_OK);
    assert_int_equal(topic, 3);
    assert_true(varlog_server_applied_index(f->srv) > idx);
    idx = varlog_server_applied_index(f->srv);
    assert_int_equal(varlog_server_add_log_stream(f->srv, 1, &ls), VARLOG_OK);
    assert_int_equal(ls, 7);
    assert_int_equal(varlog_server_add_log_stream(f->srv, topic, &ls2), VARLOG_OK);
    assert_int_equal(ls2, 8);
    assert_true(varlog_server_applied_index(f->srv) > idx);
    assert_int_equal(varlog_server_add_log_stream(f->srv, 42, NULL), VARLOG_ERR_RPC_NOT_FOUND);
    idx = varlog_server_applied_index(f->srv);
    assert_int_equal(varlog_server_seal(f->srv, 2, 5), VARLOG_OK);
    assert_true(varlog_server_applied_index(f->srv) > idx);

    Varlog__Mrpb__GetMetadataResponse *r = NULL;
    assert_int_equal(get_metadata(f, &r), VARLOG_OK);
    const Varlog__Varlogpb__MetadataDescriptor *md = r->metadata;
    assert_int_equal(md->applied_index, varlog_server_applied_index(f->srv));
    assert_topology(md, f->addr);
    assert_int_equal(md->n_topics, 3);
    assert_int_equal(md->n_log_streams, 8);
    assert_int_equal(md->topics[0]->n_log_streams, 4);
    assert_int_equal(md->topics[0]->log_streams[3], 7);
    assert_int_equal(md->topics[2]->n_log_streams, 1);
    assert_int_equal(md->log_streams[4]->status,
                     VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED);
    assert_int_equal(md->log_streams[6]->topic_id, 1);
    free_msg(r);

    /* The new log streams take appends; the new topic numbers from GLSN 1. */
    uint64_t g;
    assert_int_equal(append_batches(f, topic, ls2, 1, 1, &g, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(g, 1);
    assert_int_equal(append_batches(f, 1, ls, 1, 1, &g, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(g, 1);
}

/* Start options: 127.0.0.1 only, a port in use is refused, empty clusters are allowed. */
static void test_start_options(void **state)
{
    srv_fixture_t *f = *state;
    varlog_server_t *s = NULL;
    varlog_server_opts_t o = {
        .listen_address = "0.0.0.0:0", .topics = 1, .log_streams_per_topic = 1};
    assert_int_equal(varlog_server_start(&o, &s), VARLOG_ERR_INVALID_ARG);
    o.listen_address = "127.0.0.1:x";
    assert_int_equal(varlog_server_start(&o, &s), VARLOG_ERR_INVALID_ARG);
    o.listen_address = NULL;
    o.topics = -1;
    assert_int_equal(varlog_server_start(&o, &s), VARLOG_ERR_INVALID_ARG);
    assert_int_equal(varlog_server_start(NULL, &s), VARLOG_ERR_INVALID_ARG);
    o.listen_address = f->addr;
    o.topics = 1;
    assert_int_equal(varlog_server_start(&o, &s), VARLOG_ERR_RPC_UNAVAILABLE);
    assert_null(s);

    o.listen_address = "127.0.0.1:0";
    o.topics = 0;
    int64_t t0 = test_now_ms();
    assert_int_equal(varlog_server_start(&o, &s), VARLOG_OK);
    int64_t t1 = test_now_ms();
    assert_true(varlog_server_port(s) > 0);
    Varlog__Mrpb__GetClusterInfoResponse *r = cluster_info_at(f->client, varlog_server_address(s));
    assert_non_null(r);
    assert_int_equal(r->cluster_info->applied_index, 1);
    free_msg(r);
    int64_t t2 = test_now_ms();
    varlog_server_destroy(s);
    int64_t t3 = test_now_ms();
    print_message("start %lld ms, destroy %lld ms\n", (long long)(t1 - t0), (long long)(t3 - t2));
    varlog_server_destroy(NULL);
    assert_int_equal(varlog_server_stop(NULL), VARLOG_ERR_INVALID_ARG);
}

/* varlog-server: prints its address, serves, exits 0 on SIGTERM. */
static void test_program(void **state)
{
    (void)state;
    int out[2];
    assert_int_equal(pipe(out), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        close(out[1]);
        execl(VARLOG_SERVER_PROGRAM, "varlog-server", "--listen", "127.0.0.1:0", "--topics", "2",
              "--log-streams", "3", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    char line[128];
    size_t len = 0;
    while (len < sizeof(line) - 1) {
        ssize_t k = read(out[0], line + len, 1);
        if (k <= 0 || line[len] == '\n')
            break;
        len++;
    }
    line[len] = '\0';
    close(out[0]);
    assert_true(strncmp(line, "127.0.0.1:", 10) == 0);

    srv_fixture_t f;
    memset(&f, 0, sizeof(f));
    assert_int_equal(rpc_client_new(&f.client), VARLOG_OK);
    f.addr = line;
    Varlog__Mrpb__GetMetadataResponse *r = NULL;
    assert_int_equal(get_metadata(&f, &r), VARLOG_OK);
    assert_int_equal(r->metadata->n_topics, 2);
    assert_int_equal(r->metadata->n_log_streams, 6);
    assert_int_equal(r->metadata->topics[1]->log_streams[0], 4);
    free_msg(r);
    uint64_t g;
    assert_int_equal(append_batches(&f, 2, 6, 1, 1, &g, NULL, NULL, NULL), VARLOG_OK);
    assert_int_equal(g, 1);
    rpc_client_destroy(f.client);

    assert_int_equal(kill(pid, SIGTERM), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cluster_info, setup, teardown),
        cmocka_unit_test_setup_teardown(test_get_metadata, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topology_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_options, setup, teardown),
        cmocka_unit_test(test_program),
    };
    if (getenv("TEST_FILTER"))
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
