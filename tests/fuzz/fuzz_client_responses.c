/* The client's consumers of the protobuf-c messages it receives: GetClusterInfo
 * (discovery), GetMetadata (md_view_build and the installed view), the replicas'
 * LogStreamReplicaMetadata (peek), Trim, and every admin response. rpc_unary is replaced at
 * link time (--wrap) by answers taken from the input, each unpacked by protobuf-c as the
 * transport would: the messages are well formed but their contents adversarial (missing
 * sub-messages, absurd ids and counts, duplicates, empty strings).
 *
 * Input: steps, each an operation byte, an answer count and the answers (a piece each: a
 * status byte, then the response's bytes). When the answers run out a call fails CLOSED,
 * which ends discovery at once instead of retrying until a deadline. */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "fuzz_util.h"
#include "metadata.h"
#include "mrpb/management.pb-c.h"
#include "mrpb/metadata_repository.pb-c.h"
#include "rpc_client.h"
#include "varlog/admin.h"
#include "varlog/client.h"
#include "varlog/log.h"
#include "varlog/subscribe.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

varlog_err_t __wrap_rpc_unary(rpc_client_t *c, const char *target, const char *method,
                              const ProtobufCMessage *req,
                              const ProtobufCMessageDescriptor *resp_desc, int64_t timeout_ms,
                              ProtobufCMessage **resp, rpc_status_t *status);

/* ---- the answers ----------------------------------------------------------------------- */

#define MAX_ANSWERS 16

typedef struct answer {
    const uint8_t *p;
    size_t len;
} answer_t;

static struct {
    pthread_mutex_t mu; /* peek asks the replicas from threads of its own */
    answer_t a[MAX_ANSWERS];
    size_t n, next;
} answers = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void answers_set(const answer_t *a, size_t n)
{
    pthread_mutex_lock(&answers.mu);
    if (n)
        memcpy(answers.a, a, n * sizeof(*a));
    answers.n = n;
    answers.next = 0;
    pthread_mutex_unlock(&answers.mu);
}

varlog_err_t __wrap_rpc_unary(rpc_client_t *c, const char *target, const char *method,
                              const ProtobufCMessage *req,
                              const ProtobufCMessageDescriptor *resp_desc, int64_t timeout_ms,
                              ProtobufCMessage **resp, rpc_status_t *status)
{
    (void)c;
    (void)target;
    (void)method;
    (void)req;
    (void)timeout_ms;
    *resp = NULL;
    pthread_mutex_lock(&answers.mu);
    answer_t a = {NULL, 0};
    bool have = answers.next < answers.n;
    if (have)
        a = answers.a[answers.next++];
    pthread_mutex_unlock(&answers.mu);
    if (!have) {
        if (status)
            (void)rpc_status_set(status, GRPC_STATUS_CANCELLED, "no more answers");
        return VARLOG_ERR_CLOSED;
    }
    uint8_t code = a.len ? a.p[0] % 24 : 0;
    if (code >= 1 && code <= GRPC_STATUS_UNAUTHENTICATED) {
        /* A failed call: its status message is the rest of the answer. */
        char msg[64];
        size_t k = a.len - 1 < sizeof(msg) - 1 ? a.len - 1 : sizeof(msg) - 1;
        memcpy(msg, a.p + 1, k);
        msg[k] = '\0';
        if (status)
            (void)rpc_status_set(status, (grpc_status_code)code, msg);
        return (varlog_err_t)code;
    }
    if (status)
        (void)rpc_status_set(status, GRPC_STATUS_OK, NULL);
    *resp =
        protobuf_c_message_unpack(resp_desc, NULL, a.len ? a.len - 1 : 0, a.len ? a.p + 1 : a.p);
    return *resp ? VARLOG_OK : VARLOG_ERR_DECODE;
}

/* ---- a client and an admin handle, made once --------------------------------------------- */

static varlog_client_t *client;
static varlog_admin_t *admin;
/* Packed answers (with the OK status byte) that make a client: two ClusterInfos (the seed,
 * then the member) and one GetMetadata of topic 1 with log stream 1 on storage node 1. */
static uint8_t *canned_ci, *canned_md;
static size_t canned_ci_len, canned_md_len;

static uint8_t *pack_answer(const ProtobufCMessage *m, size_t *len)
{
    *len = 1 + protobuf_c_message_get_packed_size(m);
    uint8_t *p = malloc(*len);
    FUZZ_CHECK(p);
    p[0] = 0;
    protobuf_c_message_pack(m, p + 1);
    return p;
}

static void make_canned(void)
{
    Varlog__Mrpb__ClusterInfo__Member mem = VARLOG__MRPB__CLUSTER_INFO__MEMBER__INIT;
    mem.peer = "http://mr:2";
    mem.endpoint = "mr:1";
    Varlog__Mrpb__ClusterInfo__MembersEntry me = VARLOG__MRPB__CLUSTER_INFO__MEMBERS_ENTRY__INIT;
    me.key = 1;
    me.value = &mem;
    Varlog__Mrpb__ClusterInfo__MembersEntry *mes[] = {&me};
    Varlog__Mrpb__ClusterInfo ci = VARLOG__MRPB__CLUSTER_INFO__INIT;
    ci.cluster_id = 1;
    ci.node_id = 1;
    ci.leader = 1;
    ci.replication_factor = 1;
    ci.n_members = 1;
    ci.members = mes;
    Varlog__Mrpb__GetClusterInfoResponse cir = VARLOG__MRPB__GET_CLUSTER_INFO_RESPONSE__INIT;
    cir.cluster_info = &ci;
    canned_ci = pack_answer(&cir.base, &canned_ci_len);

    Varlog__Varlogpb__StorageNode sn = VARLOG__VARLOGPB__STORAGE_NODE__INIT;
    sn.storage_node_id = 1;
    sn.address = "sn:1";
    Varlog__Varlogpb__StorageNodeDescriptor snd = VARLOG__VARLOGPB__STORAGE_NODE_DESCRIPTOR__INIT;
    snd.storage_node = &sn;
    Varlog__Varlogpb__StorageNodeDescriptor *snds[] = {&snd};
    Varlog__Varlogpb__ReplicaDescriptor rd = VARLOG__VARLOGPB__REPLICA_DESCRIPTOR__INIT;
    rd.storage_node_id = 1;
    Varlog__Varlogpb__ReplicaDescriptor *rds[] = {&rd};
    Varlog__Varlogpb__LogStreamDescriptor lsd = VARLOG__VARLOGPB__LOG_STREAM_DESCRIPTOR__INIT;
    lsd.topic_id = 1;
    lsd.log_stream_id = 1;
    lsd.n_replicas = 1;
    lsd.replicas = rds;
    Varlog__Varlogpb__LogStreamDescriptor *lsds[] = {&lsd};
    int32_t ls_ids[] = {1};
    Varlog__Varlogpb__TopicDescriptor td = VARLOG__VARLOGPB__TOPIC_DESCRIPTOR__INIT;
    td.topic_id = 1;
    td.n_log_streams = 1;
    td.log_streams = ls_ids;
    Varlog__Varlogpb__TopicDescriptor *tds[] = {&td};
    Varlog__Varlogpb__MetadataDescriptor md = VARLOG__VARLOGPB__METADATA_DESCRIPTOR__INIT;
    md.applied_index = 1;
    md.n_storage_nodes = 1;
    md.storage_nodes = snds;
    md.n_log_streams = 1;
    md.log_streams = lsds;
    md.n_topics = 1;
    md.topics = tds;
    Varlog__Mrpb__GetMetadataResponse mdr = VARLOG__MRPB__GET_METADATA_RESPONSE__INIT;
    mdr.metadata = &md;
    canned_md = pack_answer(&mdr.base, &canned_md_len);
}

/* The client warns about what it is fed; at thousands of inputs a second that is noise. */
static void quiet(void *opaque, varlog_log_level_t level, varlog_log_ctx_t ctx, const char *msg)
{
    (void)opaque;
    (void)level;
    (void)ctx;
    (void)msg;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    make_canned();
    answer_t open[] = {
        {canned_ci, canned_ci_len}, {canned_ci, canned_ci_len}, {canned_md, canned_md_len}};
    answers_set(open, 3);
    varlog_conf_t *conf = varlog_conf_new();
    FUZZ_CHECK(conf);
    /* No refresher thread: every call to rpc_unary comes from the input's steps. */
    FUZZ_CHECK(varlog_conf_set(conf, "metadata.addresses", "seed:1", NULL, 0) == VARLOG_OK);
    FUZZ_CHECK(varlog_conf_set(conf, "metadata.refresh.interval.ms", "0", NULL, 0) == VARLOG_OK);
    varlog_conf_set_log_cb(conf, quiet, NULL);
    char errstr[256];
    varlog_err_t err = varlog_client_new(&conf, &client, errstr, sizeof(errstr));
    if (err != VARLOG_OK)
        fprintf(stderr, "varlog_client_new: %s\n", errstr);
    FUZZ_CHECK(err == VARLOG_OK);
    varlog_conf_destroy(conf);
    FUZZ_CHECK(varlog_admin_new("adm:1", NULL, &admin, errstr, sizeof(errstr)) == VARLOG_OK);
    return 0;
}

/* Every step starts from the canned view with a known member, so that an input replays
 * alone as it ran in the fuzzing loop. */
static void reset_client(void)
{
    pthread_mutex_lock(&client->mu);
    bool known = client->mr_address != NULL;
    pthread_mutex_unlock(&client->mu);
    answer_t a[] = {
        {canned_ci, canned_ci_len}, {canned_ci, canned_ci_len}, {canned_md, canned_md_len}};
    if (known)
        answers_set(a + 2, 1);
    else
        answers_set(a, 3);
    FUZZ_CHECK(md_fetch(client, 10000) == VARLOG_OK);
}

/* ---- what the client makes of them --------------------------------------------------------- */

/* A view is consistent whatever the metadata said: sorted, every replica address one of
 * the view's nodes, the primary the first replica when it resolved, lookups find it all. */
static void check_view(const md_view_t *v)
{
    for (size_t i = 0; i < v->n_log_streams; i++) {
        const md_log_stream_t *ls = &v->log_streams[i];
        for (size_t r = 0; r < ls->n_replicas; r++) {
            bool found = false;
            for (size_t k = 0; k < v->n_nodes && !found; k++)
                found = ls->replicas[r] == v->node_addresses[k];
            FUZZ_CHECK(found);
        }
        FUZZ_CHECK(!ls->primary || (ls->n_replicas > 0 && ls->replicas[0] == ls->primary));
        const md_log_stream_t *got = md_view_log_stream(v, ls->topic_id, ls->log_stream_id);
        FUZZ_CHECK(got && got->topic_id == ls->topic_id && got->log_stream_id == ls->log_stream_id);
        if (i > 0) {
            const md_log_stream_t *prev = &v->log_streams[i - 1];
            FUZZ_CHECK(
                prev->log_stream_id < ls->log_stream_id ||
                (prev->log_stream_id == ls->log_stream_id && prev->topic_id <= ls->topic_id));
        }
    }
    for (size_t i = 0; i < v->n_topics; i++) {
        const md_topic_t *t = &v->topics[i];
        FUZZ_CHECK(i == 0 || v->topics[i - 1].topic_id <= t->topic_id);
        const md_topic_t *got = md_view_topic(v, t->topic_id);
        FUZZ_CHECK(got && got->topic_id == t->topic_id);
        for (size_t k = 1; k < t->n_log_streams; k++)
            FUZZ_CHECK(t->log_stream_ids[k - 1] <= t->log_stream_ids[k]);
    }
}

static void build_view(const answer_t *a, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        Varlog__Mrpb__GetMetadataResponse *r = varlog__mrpb__get_metadata_response__unpack(
            NULL, a[i].len ? a[i].len - 1 : 0, a[i].len ? a[i].p + 1 : a[i].p);
        if (!r)
            continue;
        if (r->metadata) {
            md_view_t *v = md_view_build(&r->metadata->base);
            FUZZ_CHECK(v);
            check_view(v);
            md_view_unref(v);
        }
        varlog__mrpb__get_metadata_response__free_unpacked(r, NULL);
    }
}

/* The public readers of the installed view. */
static void read_view(void)
{
    int32_t ids[8];
    size_t n = 0;
    (void)varlog_client_topics(client, ids, 8, &n);
    size_t nt = n < 8 ? n : 8;
    for (size_t i = 0; i < nt; i++) {
        int32_t ls[8];
        size_t m = 0;
        (void)varlog_client_log_streams(client, ids[i], ls, 8, &m);
        (void)varlog_client_appendable_log_streams(client, ids[i], ls, 8, &m);
    }
    md_view_t *v = md_current(client);
    check_view(v);
    md_view_unref(v);
}

/* A log stream of the installed view, or topic 1's log stream 1. */
static void pick_log_stream(uint8_t k, int32_t *topic, int32_t *ls)
{
    md_view_t *v = md_current(client);
    *topic = 1;
    *ls = 1;
    if (v->n_log_streams) {
        *topic = v->log_streams[k % v->n_log_streams].topic_id;
        *ls = v->log_streams[k % v->n_log_streams].log_stream_id;
    }
    md_view_unref(v);
}

static void admin_step(uint8_t op, fuzz_input_t *in)
{
    int32_t id = (int32_t)(fuzz_u8(in) % 4);
    int32_t id2 = (int32_t)(fuzz_u8(in) % 4);
    size_t cap = fuzz_u8(in) % 5;
    const int64_t t = 5;
    size_t total = 0;
    int32_t topic = 0;
    uint64_t u = 0, leader = 0;
    int32_t rf = 0;
    varlog_topic_info_t ti;
    varlog_log_stream_info_t li;
    varlog_storage_node_info_t si;
    /* Exact-size output arrays: a write past cap is an ASan report. */
    varlog_topic_info_t *tis = cap ? calloc(cap, sizeof(*tis)) : NULL;
    varlog_log_stream_info_t *lis = cap ? calloc(cap, sizeof(*lis)) : NULL;
    varlog_storage_node_info_t *sis = cap ? calloc(cap, sizeof(*sis)) : NULL;
    varlog_mr_node_info_t *mis = cap ? calloc(cap, sizeof(*mis)) : NULL;
    varlog_mr_member_t *mms = cap ? calloc(cap, sizeof(*mms)) : NULL;
    switch (op % 15) {
    case 0:
        (void)varlog_admin_add_topic(admin, t, &topic);
        break;
    case 1:
        (void)varlog_admin_get_topic(admin, id, t, &ti);
        break;
    case 2:
        (void)varlog_admin_list_topics(admin, t, tis, cap, &total);
        break;
    case 3:
        (void)varlog_admin_unregister_topic(admin, id, t);
        break;
    case 4:
        (void)varlog_admin_add_log_stream(admin, id, t, &li);
        break;
    case 5:
        (void)varlog_admin_get_log_stream(admin, id, id2, t, &li);
        break;
    case 6:
        (void)varlog_admin_list_log_streams(admin, id, t, lis, cap, &total);
        break;
    case 7:
        (void)varlog_admin_seal(admin, id, id2, t, &u);
        break;
    case 8:
        (void)varlog_admin_unseal(admin, id, id2, t, &li);
        break;
    case 9:
        (void)varlog_admin_trim(admin, id, (uint64_t)id2, t);
        break;
    case 10:
        (void)varlog_admin_get_storage_node(admin, id, t, &si);
        break;
    case 11:
        (void)varlog_admin_list_storage_nodes(admin, t, sis, cap, &total);
        break;
    case 12:
        (void)varlog_admin_list_mr_nodes(admin, t, mis, cap, &total);
        break;
    default:
        (void)varlog_admin_get_mr_members(admin, t, &leader, &rf, mms, cap, &total);
        break;
    }
    free(tis);
    free(lis);
    free(sis);
    free(mis);
    free(mms);
}

static void step(uint8_t op, const answer_t *a, size_t n, fuzz_input_t *in)
{
    varlog_entry_meta_t first, last;
    bool complete;
    int32_t topic, ls;
    switch (op % 7) {
    case 0: /* the view alone, straight from md_view_build */
        build_view(a, n);
        break;
    case 1: /* a refresh that installs what it gets */
        answers_set(a, n);
        (void)md_fetch(client, 5);
        read_view();
        break;
    case 2: /* discovery from scratch, within a few milliseconds */
        pthread_mutex_lock(&client->mu);
        free(client->mr_address);
        client->mr_address = NULL;
        pthread_mutex_unlock(&client->mu);
        answers_set(a, n);
        (void)md_discover(client, wire_now_ms() + 3, "the fuzzer's bound", 3);
        break;
    case 3: /* peek at a log stream of a view the input installed */
        answers_set(a, n > 0 ? 1 : 0);
        (void)md_fetch(client, 5);
        pick_log_stream(fuzz_u8(in), &topic, &ls);
        answers_set(a + (n > 0), n > 0 ? n - 1 : 0);
        (void)varlog_peek(client, topic, ls, 5, &first, &last, &complete);
        break;
    case 4: /* peek on the canned view */
        answers_set(a, n);
        (void)varlog_peek(client, 1, 1, 5, &first, &last, &complete);
        break;
    case 5: /* trim of a topic of a view the input installed */
        answers_set(a, n > 0 ? 1 : 0);
        (void)md_fetch(client, 5);
        pick_log_stream(fuzz_u8(in), &topic, &ls);
        answers_set(a + (n > 0), n > 0 ? n - 1 : 0);
        (void)varlog_trim(client, topic, fuzz_u32(in), 5);
        break;
    default:
        answers_set(a, n);
        admin_step(fuzz_u8(in), in);
        break;
    }
    answers_set(NULL, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input_t in = {data, size};
    for (int steps = 0; in.left > 0 && steps < 4; steps++) {
        reset_client();
        uint8_t op = fuzz_u8(&in);
        size_t n = fuzz_u8(&in) % (MAX_ANSWERS + 1);
        answer_t a[MAX_ANSWERS];
        for (size_t i = 0; i < n; i++)
            a[i].p = fuzz_piece(&in, &a[i].len);
        step(op, a, n, &in);
    }
    return 0;
}
