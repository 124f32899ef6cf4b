/* Cluster discovery, the metadata view and its refresh (wire reference 6.1 and the Go
 * client's metadataRefresher, minus its flaws: the background call has a deadline, and a
 * failed call makes the next one discover a member again). */
#include "metadata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "errtext.h"
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
    free(v->log_streams);
    for (size_t i = 0; i < v->n_nodes; i++)
        free(v->node_addresses[i]);
    free(v->node_addresses);
    free(v);
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
        /* replicas[0] is the primary: the only replica that accepts appends. */
        if (d->n_replicas > 0 && d->replicas[0]) {
            for (size_t k = 0; k < v->n_nodes; k++) {
                if (node_ids[k] == d->replicas[0]->storage_node_id) {
                    ls->primary = v->node_addresses[k];
                    break;
                }
            }
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

/* GetClusterInfo on one address; *out is a valid ClusterInfo's response on OK. */
static varlog_err_t cluster_info(varlog_client_t *c, const char *address, int64_t deadline_ms,
                                 Varlog__Mrpb__GetClusterInfoResponse **out)
{
    int64_t timeout = c->conf->metadata_call_timeout_ms;
    int64_t left = client_remaining_ms(deadline_ms);
    bool cut = left >= 0 && left < timeout; /* the caller's deadline bounds this call */
    if (cut)
        timeout = left;
    if (timeout == 0)
        return errtext_set(VARLOG_ERR_TIMED_OUT, "discovery: out of time before asking %s",
                           address);
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

/* One pass over the seeds and then the best answer's members. */
static varlog_err_t discover_once(varlog_client_t *c, int64_t deadline_ms, char **member)
{
    Varlog__Mrpb__GetClusterInfoResponse *best = NULL;
    varlog_err_t err = VARLOG_ERR_RPC_UNAVAILABLE;
    char why[256] = "";
    for (size_t i = 0; i < c->n_seeds; i++) {
        Varlog__Mrpb__GetClusterInfoResponse *r = NULL;
        varlog_err_t e = cluster_info(c, c->seeds[i], deadline_ms, &r);
        if (e != VARLOG_OK) {
            err = e;
            errtext_copy(why, sizeof(why));
            if (e == VARLOG_ERR_STATE || e == VARLOG_ERR_CLOSED)
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
        varlog_err_t e = cluster_info(c, m->endpoint, deadline_ms, &r);
        if (e != VARLOG_OK) {
            err = e;
            errtext_copy(why, sizeof(why));
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

varlog_err_t md_discover(varlog_client_t *c, int64_t deadline_ms)
{
    /* As the Go connector: up to 10 passes, 100 ms apart, within the deadline. */
    varlog_err_t err = VARLOG_ERR_RPC_UNAVAILABLE;
    for (int pass = 0; pass < 10; pass++) {
        if (client_closing(c))
            return errtext_set(VARLOG_ERR_CLOSED, "client closed during discovery");
        char *member = NULL;
        err = discover_once(c, deadline_ms, &member);
        if (err == VARLOG_OK) {
            pthread_mutex_lock(&c->mu);
            char *old = c->mr_address;
            c->mr_address = member;
            pthread_mutex_unlock(&c->mu);
            free(old);
            log_line(&c->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_METADATA,
                     "metadata repository member %s", member);
            return VARLOG_OK;
        }
        if (err == VARLOG_ERR_STATE || err == VARLOG_ERR_CLOSED)
            return err;
        int64_t left = client_remaining_ms(deadline_ms);
        if (left == 0)
            break;
        char why[256];
        errtext_copy(why, sizeof(why));
        log_line(&c->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_METADATA, "discovery pass %d failed: %s",
                 pass + 1, why);
        int64_t nap = left < 0 || left > 100 ? 100 : left;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = nap * 1000000L};
        nanosleep(&ts, NULL);
        errtext_set(err, "%s", why);
    }
    return err;
}

/* ---- GetMetadata --------------------------------------------------------------------------- */

static varlog_err_t fetch_once(varlog_client_t *c, int64_t timeout_ms)
{
    int64_t deadline = wire_now_ms() + timeout_ms;
    pthread_mutex_lock(&c->mu);
    char *address = c->mr_address ? strdup(c->mr_address) : NULL;
    pthread_mutex_unlock(&c->mu);
    if (!address) {
        varlog_err_t err = md_discover(c, deadline);
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
    Varlog__Mrpb__GetMetadataRequest req = VARLOG__MRPB__GET_METADATA_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    rpc_status_t st;
    rpc_status_init(&st);
    atomic_fetch_add(&c->stats.metadata_fetches, 1);
    varlog_err_t err =
        rpc_unary(c->rpc, address, MR_PATH_GET_METADATA, &req.base,
                  &varlog__mrpb__get_metadata_response__descriptor, left, &resp, &st);
    if (err == VARLOG_ERR_RPC_DEADLINE_EXCEEDED) /* its deadline is the caller's */
        err = VARLOG_ERR_TIMED_OUT;
    if (err == VARLOG_ERR_RPC_CANCELLED && client_closing(c))
        err = VARLOG_ERR_CLOSED;
    if (err != VARLOG_OK) {
        errtext_set(err, "GetMetadata at %s: %s%s%s", address, varlog_err_str(err),
                    st.message ? ": " : "", st.message ? st.message : "");
        rpc_status_clear(&st);
        /* As the Go client: forget the member so that the next call discovers again. */
        pthread_mutex_lock(&c->mu);
        if (c->mr_address && strcmp(c->mr_address, address) == 0) {
            free(c->mr_address);
            c->mr_address = NULL;
        }
        pthread_mutex_unlock(&c->mu);
        free(address);
        return err;
    }
    rpc_status_clear(&st);
    Varlog__Mrpb__GetMetadataResponse *r = (void *)resp;
    md_view_t *view = NULL;
    if (!r->metadata)
        err = errtext_set(VARLOG_ERR_DECODE, "GetMetadata at %s: answer without metadata", address);
    else if (!(view = md_view_build(&r->metadata->base)))
        err = errtext_set(VARLOG_ERR_NOMEM, "out of memory building the metadata view");
    protobuf_c_message_free_unpacked(resp, NULL);
    free(address);
    if (view)
        client_install_view(c, view);
    return err;
}

varlog_err_t md_fetch(varlog_client_t *c, int64_t timeout_ms)
{
    if (timeout_ms < 0)
        timeout_ms = c->conf->metadata_call_timeout_ms;
    pthread_mutex_lock(&c->fetch_mu);
    if (c->fetching) {
        /* Join the call in flight instead of starting another. */
        uint64_t gen = c->fetch_gen;
        int64_t deadline = wire_now_ms() + timeout_ms;
        struct timespec ts;
        abs_deadline(&ts, timeout_ms);
        while (c->fetching && c->fetch_gen == gen && wire_now_ms() < deadline)
            pthread_cond_timedwait(&c->fetch_done, &c->fetch_mu, &ts);
        bool finished = c->fetch_gen != gen; /* read under fetch_mu: the leader writes it */
        varlog_err_t err = finished ? c->fetch_err : VARLOG_ERR_TIMED_OUT;
        char text[sizeof(c->fetch_errtext)];
        memcpy(text, c->fetch_errtext, sizeof(text));
        pthread_mutex_unlock(&c->fetch_mu);
        if (!finished)
            return errtext_set(err, "GetMetadata: no answer within %lld ms", (long long)timeout_ms);
        return err == VARLOG_OK ? VARLOG_OK : errtext_set(err, "%s", text);
    }
    c->fetching = true;
    pthread_mutex_unlock(&c->fetch_mu);

    log_deferred_t lines;
    log_defer_begin(&lines);
    varlog_err_t err = fetch_once(c, timeout_ms);

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

/* ---- periodic refresh ------------------------------------------------------------------- */

static void *refresher_main(void *arg)
{
    varlog_client_t *c = arg;
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
    if (!c->refresher_started)
        return;
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->refresher_wake);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->refresher, NULL);
    c->refresher_started = false;
}
