/* Cluster discovery, the metadata view and its refresh (wire reference 6.1 and the Go
 * client's metadataRefresher, minus its flaws: the background call has a deadline, and a
 * failed call makes the next one discover a member again). */
#include "metadata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "errtext.h"
#include "rpc_client.h"
#include "vq/task.h"
#include "mrpb/management.pb-c.h"
#include "mrpb/metadata_repository.pb-c.h"
#include "varlogpb/metadata.pb-c.h"
#include "wire.h"

/* ---- the view ---------------------------------------------------------------------------- */

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_topic(const void *a, const void *b)
{
    return cmp_i32(&((const md_topic_t *)a)->topic_id, &((const md_topic_t *)b)->topic_id);
}

static int cmp_ls(const void *a, const void *b)
{
    const md_log_stream_t *x = a, *y = b;
    int c = cmp_i32(&x->log_stream_id, &y->log_stream_id);
    return c ? c : cmp_i32(&x->topic_id, &y->topic_id);
}

static void view_free(md_view_t *v)
{
    for (size_t i = 0; i < v->n_topics; i++)
        free(v->topics[i].log_stream_ids);
    free(v->topics);
    for (size_t i = 0; i < v->n_log_streams; i++)
        free(v->log_streams[i].replicas);
    free(v->log_streams);
    for (size_t i = 0; i < v->n_nodes; i++)
        free(v->node_addresses[i]);
    free(v->node_addresses);
    free(v);
}

/* The address of storage node id among the view's nodes (node_ids parallel to them). */
static const char *node_address(const md_view_t *v, const int32_t *node_ids, int32_t id)
{
    for (size_t k = 0; k < v->n_nodes; k++)
        if (node_ids[k] == id)
            return v->node_addresses[k];
    return NULL;
}

md_view_t *md_view_build(const ProtobufCMessage *msg)
{
    const Varlog__Varlogpb__MetadataDescriptor *md = (const void *)msg;
    md_view_t *v = calloc(1, sizeof(*v));
    if (!v)
        return NULL;
    atomic_init(&v->refs, 1);
    v->applied_index = md->applied_index;
    v->node_addresses = calloc(md->n_storage_nodes + 1, sizeof(char *));
    v->topics = calloc(md->n_topics + 1, sizeof(md_topic_t));
    v->log_streams = calloc(md->n_log_streams + 1, sizeof(md_log_stream_t));
    if (!v->node_addresses || !v->topics || !v->log_streams)
        goto fail;
    int32_t *node_ids = calloc(md->n_storage_nodes + 1, sizeof(int32_t));
    if (!node_ids)
        goto fail;
    for (size_t i = 0; i < md->n_storage_nodes; i++) {
        const Varlog__Varlogpb__StorageNodeDescriptor *d = md->storage_nodes[i];
        if (!d || !d->storage_node || !d->storage_node->address || !d->storage_node->address[0])
            continue;
        char *addr = strdup(d->storage_node->address);
        if (!addr) {
            free(node_ids);
            goto fail;
        }
        node_ids[v->n_nodes] = d->storage_node->storage_node_id;
        v->node_addresses[v->n_nodes++] = addr;
    }
    for (size_t i = 0; i < md->n_log_streams; i++) {
        const Varlog__Varlogpb__LogStreamDescriptor *d = md->log_streams[i];
        if (!d)
            continue;
        md_log_stream_t *ls = &v->log_streams[v->n_log_streams++];
        ls->topic_id = d->topic_id;
        ls->log_stream_id = d->log_stream_id;
        ls->sealed = d->status == VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED ||
                     d->status == VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALING;
        ls->replicas = calloc(d->n_replicas + 1, sizeof(char *));
        if (!ls->replicas) {
            free(node_ids);
            goto fail;
        }
        for (size_t r = 0; r < d->n_replicas; r++) {
            const char *addr =
                d->replicas[r] ? node_address(v, node_ids, d->replicas[r]->storage_node_id) : NULL;
            /* replicas[0] is the primary: the only replica that accepts appends. */
            if (r == 0)
                ls->primary = addr;
            if (addr)
                ls->replicas[ls->n_replicas++] = addr;
        }
    }
    free(node_ids);
    qsort(v->log_streams, v->n_log_streams, sizeof(md_log_stream_t), cmp_ls);
    for (size_t i = 0; i < md->n_topics; i++) {
        const Varlog__Varlogpb__TopicDescriptor *d = md->topics[i];
        if (!d)
            continue;
        md_topic_t *t = &v->topics[v->n_topics++];
        t->topic_id = d->topic_id;
        t->log_stream_ids = calloc(d->n_log_streams + 1, sizeof(int32_t));
        if (!t->log_stream_ids)
            goto fail;
        if (d->n_log_streams > 0) /* protobuf-c leaves an empty repeated field NULL */
            memcpy(t->log_stream_ids, d->log_streams, d->n_log_streams * sizeof(int32_t));
        t->n_log_streams = d->n_log_streams;
        qsort(t->log_stream_ids, t->n_log_streams, sizeof(int32_t), cmp_i32);
    }
    qsort(v->topics, v->n_topics, sizeof(md_topic_t), cmp_topic);
    return v;
fail:
    view_free(v);
    return NULL;
}

md_view_t *md_view_ref(md_view_t *v)
{
    atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    return v;
}

void md_view_unref(md_view_t *v)
{
    if (v && atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) == 1)
        view_free(v);
}

const md_topic_t *md_view_topic(const md_view_t *v, int32_t topic_id)
{
    md_topic_t key = {.topic_id = topic_id};
    return bsearch(&key, v->topics, v->n_topics, sizeof(md_topic_t), cmp_topic);
}

const md_log_stream_t *md_view_log_stream(const md_view_t *v, int32_t topic_id,
                                          int32_t log_stream_id)
{
    md_log_stream_t key = {.topic_id = topic_id, .log_stream_id = log_stream_id};
    return bsearch(&key, v->log_streams, v->n_log_streams, sizeof(md_log_stream_t), cmp_ls);
}

md_view_t *md_current(varlog_client_t *c)
{
    pthread_mutex_lock(&c->mu);
    md_view_t *v = c->view ? md_view_ref(c->view) : NULL;
    pthread_mutex_unlock(&c->mu);
    return v;
}

/* ---- discovery ---------------------------------------------------------------------------- */

/* The Go client's acceptance rule for a ClusterInfo (mrconnector). */
static bool cluster_info_valid(const Varlog__Mrpb__ClusterInfo *ci)
{
    if (!ci || ci->node_id == 0 || ci->leader == 0)
        return false;
    for (size_t i = 0; i < ci->n_members; i++) {
        const Varlog__Mrpb__ClusterInfo__Member *m = ci->members[i] ? ci->members[i]->value : NULL;
        if (m && !m->learner && m->peer && m->peer[0] && m->endpoint && m->endpoint[0])
            return true;
    }
    return false;
}

static size_t endpoint_count(const Varlog__Mrpb__ClusterInfo *ci)
{
    size_t n = 0;
    for (size_t i = 0; i < ci->n_members; i++) {
        const Varlog__Mrpb__ClusterInfo__Member *m = ci->members[i] ? ci->members[i]->value : NULL;
        n += m && m->endpoint && m->endpoint[0];
    }
    return n;
}

/* The gRPC service of GetClusterInfo: an address that answers it with UNIMPLEMENTED is no
 * metadata repository (a storage node's or varlogadm's, typically), and never will be. */
#define MR_SERVICE "varlog.mrpb.Management"

/* GetClusterInfo on one address; *out is a valid ClusterInfo's response on OK. *asked tells
 * whether a call was made (false: no time was left to make one). On RPC_UNIMPLEMENTED,
 * status receives the server's own text (e.g. "unknown service varlog.mrpb.Management"). */
static varlog_err_t cluster_info(varlog_client_t *c, const char *address, int64_t deadline_ms,
                                 Varlog__Mrpb__GetClusterInfoResponse **out, bool *asked,
                                 char *status, size_t status_size)
{
    *asked = false;
    int64_t timeout = c->conf->metadata_call_timeout_ms;
    int64_t left = client_remaining_ms(deadline_ms);
    bool cut = left >= 0 && left < timeout; /* the caller's deadline bounds this call */
    if (cut)
        timeout = left;
    if (timeout == 0)
        return errtext_set(VARLOG_ERR_TIMED_OUT, "discovery: out of time before asking %s",
                           address);
    *asked = true;
    Varlog__Mrpb__GetClusterInfoRequest req = VARLOG__MRPB__GET_CLUSTER_INFO_REQUEST__INIT;
    req.cluster_id = (int32_t)c->conf->cluster_id;
    ProtobufCMessage *resp = NULL;
    rpc_status_t st;
    rpc_status_init(&st);
    varlog_err_t err =
        rpc_unary(c->rpc, address, MR_PATH_CLUSTER_INFO, &req.base,
                  &varlog__mrpb__get_cluster_info_response__descriptor, timeout, &resp, &st);
    if (err == VARLOG_ERR_RPC_DEADLINE_EXCEEDED && cut)
        err = VARLOG_ERR_TIMED_OUT;
    if (err == VARLOG_ERR_RPC_CANCELLED && client_closing(c))
        err = VARLOG_ERR_CLOSED;
    if (err == VARLOG_ERR_RPC_UNIMPLEMENTED) {
        snprintf(status, status_size, "%s", st.message ? st.message : "");
        errtext_set(err,
                    "%s does not serve the metadata repository (" MR_SERVICE
                    "): %s%s%s; is it a storage node or varlogadm address?",
                    address, varlog_err_name(err), st.message ? ": " : "",
                    st.message ? st.message : "");
        rpc_status_clear(&st);
        return err;
    }
    if (err != VARLOG_OK) {
        errtext_set(err, "GetClusterInfo at %s: %s%s%s", address, varlog_err_str(err),
                    st.message ? ": " : "", st.message ? st.message : "");
        rpc_status_clear(&st);
        return err;
    }
    rpc_status_clear(&st);
    Varlog__Mrpb__GetClusterInfoResponse *r = (void *)resp;
    if (!cluster_info_valid(r->cluster_info)) {
        protobuf_c_message_free_unpacked(resp, NULL);
        return errtext_set(VARLOG_ERR_RPC_UNAVAILABLE,
                           "GetClusterInfo at %s: no leader or no usable member in the answer",
                           address);
    }
    if (r->cluster_info->cluster_id != (int32_t)c->conf->cluster_id) {
        int32_t got = r->cluster_info->cluster_id;
        protobuf_c_message_free_unpacked(resp, NULL);
        return errtext_set(VARLOG_ERR_STATE,
                           "GetClusterInfo at %s: cluster id %d, cluster.id is %lld", address, got,
                           (long long)c->conf->cluster_id);
    }
    *out = r;
    return VARLOG_OK;
}

/* The last failure of a call actually made, which is what a caller wants to read when
 * discovery runs out of time (not "out of time before asking"). */
typedef struct discover_failure {
    varlog_err_t err; /* VARLOG_OK while no call failed */
    char text[256];
    /* The text of a seed that answered UNIMPLEMENTED, worth saying even when another seed's
     * failure comes last; and whether, in the last pass, every seed did. */
    char unserved[224];
    bool all_unserved;
} discover_failure_t;

static void failure_note(discover_failure_t *f, varlog_err_t err)
{
    /* A call cut short by the caller's own deadline is no cause: keep a real one seen before. */
    if (err == VARLOG_ERR_TIMED_OUT && f->err != VARLOG_OK && f->err != VARLOG_ERR_TIMED_OUT)
        return;
    f->err = err;
    errtext_copy(f->text, sizeof(f->text));
}

/* One pass over the seeds and then the best answer's members. */
static varlog_err_t discover_once(varlog_client_t *c, int64_t deadline_ms, char **member,
                                  discover_failure_t *last)
{
    Varlog__Mrpb__GetClusterInfoResponse *best = NULL;
    varlog_err_t err = VARLOG_ERR_RPC_UNAVAILABLE;
    char why[256] = "";
    size_t unserved = 0;
    char unserved_list[320] = "";
    size_t list_len = 0;
    last->all_unserved = false;
    for (size_t i = 0; i < c->n_seeds; i++) {
        Varlog__Mrpb__GetClusterInfoResponse *r = NULL;
        bool asked;
        char status[128] = "";
        varlog_err_t e =
            cluster_info(c, c->seeds[i], deadline_ms, &r, &asked, status, sizeof(status));
        if (e != VARLOG_OK) {
            err = e;
            errtext_copy(why, sizeof(why));
            if (asked)
                failure_note(last, e);
            if (e == VARLOG_ERR_RPC_UNIMPLEMENTED) {
                unserved++;
                errtext_copy(last->unserved, sizeof(last->unserved));
                if (list_len < sizeof(unserved_list)) {
                    int k = snprintf(unserved_list + list_len, sizeof(unserved_list) - list_len,
                                     "%s%s (%s)", unserved > 1 ? ", " : "", c->seeds[i], status);
                    list_len += k > 0 ? (size_t)k : 0;
                }
            }
            if (e == VARLOG_ERR_STATE || e == VARLOG_ERR_CLOSED || !asked)
                break;
            continue;
        }
        const Varlog__Mrpb__ClusterInfo *a = r->cluster_info;
        const Varlog__Mrpb__ClusterInfo *b = best ? best->cluster_info : NULL;
        if (!b || a->applied_index > b->applied_index ||
            (a->applied_index == b->applied_index && endpoint_count(a) > endpoint_count(b))) {
            if (best)
                protobuf_c_message_free_unpacked(&best->base, NULL);
            best = r;
        } else {
            protobuf_c_message_free_unpacked(&r->base, NULL);
        }
    }
    if (!best && unserved > 0 && unserved == c->n_seeds) {
        /* No seed serves the repository's service, and none will: retrying until
         * open.timeout.ms cannot help. A seed that is merely down may yet come up, so this
         * takes every seed answering so. */
        last->all_unserved = true;
        if (c->n_seeds == 1)
            return errtext_set(err, "%s", why);
        return errtext_set(VARLOG_ERR_RPC_UNIMPLEMENTED,
                           "none of metadata.addresses serves the metadata repository (" MR_SERVICE
                           "), each answered %s: %s; are they storage node or varlogadm "
                           "addresses?",
                           varlog_err_name(VARLOG_ERR_RPC_UNIMPLEMENTED), unserved_list);
    }
    if (!best)
        return errtext_set(err, "%s", why);
    err = VARLOG_ERR_RPC_UNAVAILABLE;
    snprintf(why, sizeof(why), "no member of the cluster answered");
    const Varlog__Mrpb__ClusterInfo *ci = best->cluster_info;
    for (size_t i = 0; i < ci->n_members && !*member; i++) {
        const Varlog__Mrpb__ClusterInfo__Member *m = ci->members[i] ? ci->members[i]->value : NULL;
        if (!m || !m->endpoint || !m->endpoint[0])
            continue;
        Varlog__Mrpb__GetClusterInfoResponse *r = NULL;
        bool asked;
        char status[128];
        varlog_err_t e =
            cluster_info(c, m->endpoint, deadline_ms, &r, &asked, status, sizeof(status));
        if (e != VARLOG_OK) {
            err = e;
            errtext_copy(why, sizeof(why));
            if (asked)
                failure_note(last, e);
            if (e == VARLOG_ERR_CLOSED || !asked)
                break;
            continue;
        }
        protobuf_c_message_free_unpacked(&r->base, NULL);
        *member = strdup(m->endpoint);
        if (!*member) {
            err = VARLOG_ERR_NOMEM;
            snprintf(why, sizeof(why), "out of memory");
        }
    }
    protobuf_c_message_free_unpacked(&best->base, NULL);
    return *member ? VARLOG_OK : errtext_set(err, "%s", why);
}

/* Sleeps up to ms, returning early (false) when the client starts closing. */
static bool nap_unless_closing(varlog_client_t *c, int64_t ms)
{
    int64_t until = wire_now_ms() + ms;
    pthread_mutex_lock(&c->mu);
    while (!c->closing) {
        int64_t left = until - wire_now_ms();
        if (left <= 0)
            break;
        struct timespec ts;
        abs_deadline(&ts, left);
        /* varlog_client_destroy broadcasts refresher_wake after setting closing. */
        pthread_cond_timedwait(&c->refresher_wake, &c->mu, &ts);
    }
    bool closing = c->closing;
    pthread_mutex_unlock(&c->mu);
    return !closing;
}

/* A delay in [d/2, d] (full jitter would allow 0, which a pass that failed at once would turn
 * into a busy loop). */
static int64_t jittered(uint64_t *rng, int64_t d)
{
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    int64_t half = d / 2;
    return half + (int64_t)(*rng % (uint64_t)(d - half + 1));
}

varlog_err_t md_discover(varlog_client_t *c, int64_t deadline_ms, const char *bound,
                         int64_t bound_ms)
{
    /* Unlike the Go connector (10 passes 100 ms apart, whatever the caller allows), passes go
     * on until the deadline, so that a repository that restarts within open.timeout.ms (or
     * the caller's timeout) is found; the pause doubles from MD_DISCOVER_BACKOFF_MIN_MS to
     * MD_DISCOVER_BACKOFF_MAX_MS, jittered, so that many clients do not ask in step. */
    int64_t start = wire_now_ms();
    uint64_t rng = (uint64_t)start * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)&start;
    if (rng == 0)
        rng = 1;
    int64_t backoff = MD_DISCOVER_BACKOFF_MIN_MS;
    discover_failure_t last = {.err = VARLOG_OK, .unserved = ""};
    varlog_err_t err = VARLOG_ERR_RPC_UNAVAILABLE;
    for (int pass = 1;; pass++) {
        if (client_closing(c))
            return errtext_set(VARLOG_ERR_CLOSED, "client closed during discovery");
        char *member = NULL;
        err = discover_once(c, deadline_ms, &member, &last);
        if (err == VARLOG_OK) {
            pthread_mutex_lock(&c->mu);
            char *old = c->mr_address;
            c->mr_address = member;
            pthread_mutex_unlock(&c->mu);
            free(old);
            log_line(&c->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_METADATA,
                     "metadata repository member %s (discovery pass %d)", member, pass);
            return VARLOG_OK;
        }
        if (err == VARLOG_ERR_STATE || err == VARLOG_ERR_CLOSED || err == VARLOG_ERR_NOMEM ||
            last.all_unserved)
            return err;
        int64_t left = client_remaining_ms(deadline_ms);
        if (left == 0)
            break;
        char why[256];
        errtext_copy(why, sizeof(why));
        log_line(&c->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_METADATA, "discovery pass %d failed: %s",
                 pass, why);
        int64_t nap = jittered(&rng, backoff);
        if (left > 0 && nap > left)
            nap = left;
        if (!nap_unless_closing(c, nap))
            return errtext_set(VARLOG_ERR_CLOSED, "client closed during discovery");
        backoff =
            backoff * 2 > MD_DISCOVER_BACKOFF_MAX_MS ? MD_DISCOVER_BACKOFF_MAX_MS : backoff * 2;
    }
    if (last.err == VARLOG_OK)
        return errtext_set(VARLOG_ERR_TIMED_OUT,
                           "discovery: no answer within %s %lld ms: no time to ask any address",
                           bound, (long long)bound_ms);
    if (last.unserved[0] && last.err != VARLOG_ERR_RPC_UNIMPLEMENTED)
        return errtext_set(last.err,
                           "discovery: no answer within %s %lld ms; last failure: %s; also, %s",
                           bound, (long long)bound_ms, last.text, last.unserved);
    return errtext_set(last.err, "discovery: no answer within %s %lld ms; last failure: %s", bound,
                       (long long)bound_ms, last.text);
}

/* ---- GetMetadata --------------------------------------------------------------------------- */

/* Failures that say something about the member asked (it is unreachable, slower than
 * metadata.call.timeout.ms, or answered wrongly), after which the next call discovers a
 * member again, as the Go client does after any failure. The caller's own deadline, the
 * client closing, a cancelled call and local failures (memory) say nothing about it:
 * forgetting the member then would only cost a needless discovery. */
static bool member_at_fault(varlog_err_t err)
{
    switch (err) {
    case VARLOG_OK:
    case VARLOG_ERR_TIMED_OUT:
    case VARLOG_ERR_CLOSED:
    case VARLOG_ERR_RPC_CANCELLED:
    case VARLOG_ERR_NOMEM:
    case VARLOG_ERR_INTERNAL:
    case VARLOG_ERR_INVALID_ARG:
        return false;
    default:
        return true;
    }
}

static varlog_err_t fetch_once(varlog_client_t *c, int64_t timeout_ms)
{
    int64_t deadline = wire_deadline_ms(timeout_ms);
    pthread_mutex_lock(&c->mu);
    char *address = c->mr_address ? strdup(c->mr_address) : NULL;
    pthread_mutex_unlock(&c->mu);
    if (!address) {
        varlog_err_t err = md_discover(c, deadline, "the metadata call's timeout", timeout_ms);
        if (err != VARLOG_OK)
            return err;
        pthread_mutex_lock(&c->mu);
        address = c->mr_address ? strdup(c->mr_address) : NULL;
        pthread_mutex_unlock(&c->mu);
        if (!address)
            return errtext_set(VARLOG_ERR_NOMEM, "out of memory");
    }
    int64_t left = client_remaining_ms(deadline);
    if (left == 0) {
        free(address);
        return errtext_set(VARLOG_ERR_TIMED_OUT, "GetMetadata: out of time after discovery");
    }
    /* Each call is bounded by metadata.call.timeout.ms, as documented; only when the caller's
     * deadline is the nearer one is a deadline the caller's own (TIMED_OUT) rather than the
     * member's slowness. */
    int64_t call_timeout = c->conf->metadata_call_timeout_ms;
    bool cut = left < call_timeout;
    if (cut)
        call_timeout = left;
    Varlog__Mrpb__GetMetadataRequest req = VARLOG__MRPB__GET_METADATA_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    rpc_status_t st;
    rpc_status_init(&st);
    atomic_fetch_add(&c->stats.metadata_fetches, 1);
    varlog_err_t err =
        rpc_unary(c->rpc, address, MR_PATH_GET_METADATA, &req.base,
                  &varlog__mrpb__get_metadata_response__descriptor, call_timeout, &resp, &st);
    if (err == VARLOG_ERR_RPC_DEADLINE_EXCEEDED && cut)
        err = VARLOG_ERR_TIMED_OUT;
    if (err == VARLOG_ERR_RPC_CANCELLED && client_closing(c))
        err = VARLOG_ERR_CLOSED;
    md_view_t *view = NULL;
    if (err != VARLOG_OK) {
        errtext_set(err, "GetMetadata at %s: %s%s%s", address, varlog_err_str(err),
                    st.message ? ": " : "", st.message ? st.message : "");
    } else {
        Varlog__Mrpb__GetMetadataResponse *r = (void *)resp;
        if (!r->metadata)
            err = errtext_set(VARLOG_ERR_DECODE, "GetMetadata at %s: answer without metadata",
                              address);
        else if (!(view = md_view_build(&r->metadata->base)))
            err = errtext_set(VARLOG_ERR_NOMEM, "out of memory building the metadata view");
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    rpc_status_clear(&st);
    if (member_at_fault(err)) {
        pthread_mutex_lock(&c->mu);
        if (c->mr_address && strcmp(c->mr_address, address) == 0) {
            free(c->mr_address);
            c->mr_address = NULL;
        }
        pthread_mutex_unlock(&c->mu);
    }
    free(address);
    if (view) {
        client_install_view(c, view);
        md_retain_channels(c);
    }
    return err;
}

varlog_err_t md_fetch(varlog_client_t *c, int64_t timeout_ms)
{
    return md_fetch_after(c, timeout_ms, 0);
}

varlog_err_t md_fetch_after(varlog_client_t *c, int64_t timeout_ms, int64_t not_before_ns)
{
    if (timeout_ms < 0)
        timeout_ms = c->conf->metadata_call_timeout_ms;
    int64_t deadline = wire_deadline_ms(timeout_ms);
    pthread_mutex_lock(&c->fetch_mu);
    while (c->fetching) {
        /* Join the call in flight instead of starting another, unless it is too old for
         * the caller: then wait for it to end and ask anew (or join a newer one). */
        bool stale = c->fetch_started_ns < not_before_ns;
        uint64_t gen = c->fetch_gen;
        struct timespec ts;
        abs_deadline(&ts, client_remaining_ms(deadline));
        while (c->fetching && c->fetch_gen == gen && wire_now_ms() < deadline)
            pthread_cond_timedwait(&c->fetch_done, &c->fetch_mu, &ts);
        if (c->fetch_gen == gen) { /* read under fetch_mu: the leader writes it */
            pthread_mutex_unlock(&c->fetch_mu);
            return errtext_set(VARLOG_ERR_TIMED_OUT, "GetMetadata: no answer within %lld ms",
                               (long long)timeout_ms);
        }
        varlog_err_t err = c->fetch_err;
        /* A call that ended on its leader's deadline (TIMED_OUT is only ever the caller's)
         * says nothing about the answer: a joiner with time left asks again, itself or by
         * joining whoever asks first. Other results are shared. */
        if (stale && client_remaining_ms(deadline) > 0)
            continue;
        if (err != VARLOG_ERR_TIMED_OUT || client_remaining_ms(deadline) == 0) {
            char text[sizeof(c->fetch_errtext)];
            memcpy(text, c->fetch_errtext, sizeof(text));
            pthread_mutex_unlock(&c->fetch_mu);
            return err == VARLOG_OK ? VARLOG_OK : errtext_set(err, "%s", text);
        }
    }
    c->fetching = true;
    c->fetch_started_ns = vq_now_ns();
    pthread_mutex_unlock(&c->fetch_mu);

    log_deferred_t lines;
    log_defer_begin(&lines);
    varlog_err_t err = fetch_once(c, client_remaining_ms(deadline));
    /* The member failed and was forgotten: another metadata repository node may answer
     * within the caller's time (discovery asks every seed). A killed first address of a
     * 3-node repository otherwise failed the refresh at once (issue 18, real cluster). */
    if (member_at_fault(err) && client_remaining_ms(deadline) > 0 && !client_closing(c)) {
        char first[256];
        errtext_copy(first, sizeof(first));
        varlog_err_t again = fetch_once(c, client_remaining_ms(deadline));
        if (again == VARLOG_OK) {
            err = again;
        } else if (again != VARLOG_ERR_TIMED_OUT) {
            char second[256];
            errtext_copy(second, sizeof(second));
            err = errtext_set(again, "%s; before that: %s", second, first);
        } else {
            errtext_set(err, "%s", first); /* no time left: the member's failure is the news */
        }
    }

    pthread_mutex_lock(&c->fetch_mu);
    c->fetching = false;
    c->fetch_gen++;
    c->fetch_err = err;
    if (err != VARLOG_OK)
        errtext_copy(c->fetch_errtext, sizeof(c->fetch_errtext));
    pthread_cond_broadcast(&c->fetch_done);
    pthread_mutex_unlock(&c->fetch_mu);
    log_defer_end(&c->log, &lines);
    return err;
}

varlog_err_t md_open(varlog_client_t *c, int64_t deadline_ms)
{
    /* Discovery, then GetMetadata from the member found; a GetMetadata that fails because of
     * the member (it went away between the two calls) sends the loop back to discovery after
     * a pause, until open.timeout.ms. */
    uint64_t rng = (uint64_t)wire_now_ms() * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)&rng;
    if (rng == 0)
        rng = 1;
    int64_t backoff = MD_DISCOVER_BACKOFF_MIN_MS;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        bool known = c->mr_address != NULL;
        pthread_mutex_unlock(&c->mu);
        if (!known) {
            varlog_err_t err =
                md_discover(c, deadline_ms, "open.timeout.ms", c->conf->open_timeout_ms);
            if (err != VARLOG_OK)
                return err;
        }
        int64_t left = client_remaining_ms(deadline_ms);
        varlog_err_t err = md_fetch(c, left ? left : 1);
        left = client_remaining_ms(deadline_ms);
        if (err == VARLOG_OK || !member_at_fault(err) || left == 0)
            return err;
        char why[256];
        errtext_copy(why, sizeof(why));
        log_line(&c->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_METADATA, "open: %s; discovering again",
                 why);
        int64_t nap = jittered(&rng, backoff);
        nap_unless_closing(c, nap < left ? nap : left);
        backoff =
            backoff * 2 > MD_DISCOVER_BACKOFF_MAX_MS ? MD_DISCOVER_BACKOFF_MAX_MS : backoff * 2;
        errtext_set(err, "%s", why);
    }
}

/* ---- channels ----------------------------------------------------------------------------- */

void md_retain_channels(varlog_client_t *c)
{
    md_view_t *v = md_current(c);
    if (!v)
        return;
    size_t cap = v->n_nodes + c->n_seeds + 1;
    const char **targets = calloc(cap, sizeof(*targets));
    if (!targets) { /* keeping every channel a little longer is harmless */
        md_view_unref(v);
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < v->n_nodes; i++)
        targets[n++] = v->node_addresses[i];
    for (size_t i = 0; i < c->n_seeds; i++)
        targets[n++] = c->seeds[i];
    pthread_mutex_lock(&c->mu);
    char *member = c->mr_address ? strdup(c->mr_address) : NULL;
    pthread_mutex_unlock(&c->mu);
    if (member)
        targets[n++] = member;
    size_t dropped =
        rpc_client_retain_targets(c->rpc, targets, n, c->conf->channel_unlisted_grace_ms);
    if (dropped)
        log_line(&c->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_RPC,
                 "closed %zu connection(s) to addresses no longer in the metadata", dropped);
    free(member);
    free(targets);
    md_view_unref(v);
}

/* ---- periodic refresh ------------------------------------------------------------------- */

static void *refresher_main(void *arg)
{
    varlog_client_t *c = arg;
    /* Named here too: the creator's naming may come after this thread's first log line. */
    pthread_setname_np(pthread_self(), "varlog-meta");
    client_thread_own(c);
    int64_t interval = c->conf->metadata_refresh_interval_ms;
    pthread_mutex_lock(&c->mu);
    while (!c->closing) {
        struct timespec ts;
        abs_deadline(&ts, interval);
        pthread_cond_timedwait(&c->refresher_wake, &c->mu, &ts);
        if (c->closing)
            break;
        pthread_mutex_unlock(&c->mu);
        varlog_err_t err = md_fetch(c, -1);
        /* A call cancelled by varlog_client_destroy is no failure worth a warning. */
        if (err != VARLOG_OK && err != VARLOG_ERR_CLOSED && !client_closing(c)) {
            char why[256];
            errtext_copy(why, sizeof(why));
            log_line(&c->log, VARLOG_LOG_WARNING, VARLOG_LOG_CTX_METADATA,
                     "periodic metadata refresh failed: %s", why);
        }
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

varlog_err_t md_refresher_start(varlog_client_t *c)
{
    if (c->conf->metadata_refresh_interval_ms <= 0)
        return VARLOG_OK;
    if (pthread_create(&c->refresher, NULL, refresher_main, c) != 0)
        return errtext_set(VARLOG_ERR_INTERNAL, "could not start the metadata refresh thread");
    pthread_setname_np(c->refresher, "varlog-meta");
    c->refresher_started = true;
    return VARLOG_OK;
}

void md_refresher_stop(varlog_client_t *c)
{
    /* Also wakes discovery pauses (nap_unless_closing) on callers' threads, refresher or not. */
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->refresher_wake);
    pthread_mutex_unlock(&c->mu);
    if (!c->refresher_started)
        return;
    pthread_join(c->refresher, NULL);
    c->refresher_started = false;
}
