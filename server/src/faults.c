/* Fault injection (per-method failures, delays, stream drops, counters) and the timer thread
 * that releases delayed responses. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server_internal.h"
#include "wire.h"

const char *const server_method_paths[M_COUNT] = {
    [M_CLUSTER_INFO] = "/varlog.mrpb.Management/GetClusterInfo",
    [M_METADATA] = "/varlog.mrpb.MetadataRepositoryService/GetMetadata",
    [M_APPEND] = "/varlog.snpb.LogIO/Append",
    [M_SUBSCRIBE] = "/varlog.snpb.LogIO/Subscribe",
    [M_SUBSCRIBE_TO] = "/varlog.snpb.LogIO/SubscribeTo",
    [M_TRIM] = "/varlog.snpb.LogIO/TrimDeprecated",
    [M_REPLICA_MD] = "/varlog.snpb.LogIO/LogStreamReplicaMetadata",
    [M_ADM_GET_STORAGE_NODE] = "/varlog.admpb.ClusterManager/GetStorageNode",
    [M_ADM_LIST_STORAGE_NODES] = "/varlog.admpb.ClusterManager/ListStorageNodes",
    [M_ADM_ADD_STORAGE_NODE] = "/varlog.admpb.ClusterManager/AddStorageNode",
    [M_ADM_UNREGISTER_STORAGE_NODE] = "/varlog.admpb.ClusterManager/UnregisterStorageNode",
    [M_ADM_GET_TOPIC] = "/varlog.admpb.ClusterManager/GetTopic",
    [M_ADM_DESCRIBE_TOPIC] = "/varlog.admpb.ClusterManager/DescribeTopic",
    [M_ADM_LIST_TOPICS] = "/varlog.admpb.ClusterManager/ListTopics",
    [M_ADM_ADD_TOPIC] = "/varlog.admpb.ClusterManager/AddTopic",
    [M_ADM_UNREGISTER_TOPIC] = "/varlog.admpb.ClusterManager/UnregisterTopic",
    [M_ADM_GET_LOG_STREAM] = "/varlog.admpb.ClusterManager/GetLogStream",
    [M_ADM_LIST_LOG_STREAMS] = "/varlog.admpb.ClusterManager/ListLogStreams",
    [M_ADM_ADD_LOG_STREAM] = "/varlog.admpb.ClusterManager/AddLogStream",
    [M_ADM_UPDATE_LOG_STREAM] = "/varlog.admpb.ClusterManager/UpdateLogStream",
    [M_ADM_UNREGISTER_LOG_STREAM] = "/varlog.admpb.ClusterManager/UnregisterLogStream",
    [M_ADM_REMOVE_LOG_STREAM_REPLICA] = "/varlog.admpb.ClusterManager/RemoveLogStreamReplica",
    [M_ADM_SEAL] = "/varlog.admpb.ClusterManager/Seal",
    [M_ADM_UNSEAL] = "/varlog.admpb.ClusterManager/Unseal",
    [M_ADM_SYNC] = "/varlog.admpb.ClusterManager/Sync",
    [M_ADM_TRIM] = "/varlog.admpb.ClusterManager/Trim",
    [M_ADM_GET_MR_NODE] = "/varlog.admpb.ClusterManager/GetMetadataRepositoryNode",
    [M_ADM_LIST_MR_NODES] = "/varlog.admpb.ClusterManager/ListMetadataRepositoryNodes",
    [M_ADM_GET_MR_MEMBERS] = "/varlog.admpb.ClusterManager/GetMRMembers",
    [M_ADM_ADD_MR_NODE] = "/varlog.admpb.ClusterManager/AddMetadataRepositoryNode",
    [M_ADM_ADD_MR_PEER] = "/varlog.admpb.ClusterManager/AddMRPeer",
    [M_ADM_DELETE_MR_NODE] = "/varlog.admpb.ClusterManager/DeleteMetadataRepositoryNode",
    [M_ADM_REMOVE_MR_PEER] = "/varlog.admpb.ClusterManager/RemoveMRPeer",
};

int server_method_index(const char *path)
{
    if (!path)
        return -1;
    for (int i = 0; i < M_COUNT; i++) {
        if (strcmp(path, server_method_paths[i]) == 0)
            return i;
    }
    return -1;
}

ProtobufCMessage *server_msg_dup(const ProtobufCMessage *msg)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return NULL;
    protobuf_c_message_pack(msg, buf);
    ProtobufCMessage *copy = protobuf_c_message_unpack(msg->descriptor, NULL, len, buf);
    free(buf);
    return copy;
}

/* ---- faults -------------------------------------------------------------------------- */

void fault_status_clear(fault_status_t *s)
{
    free(s->message);
    for (size_t i = 0; i < s->n_details; i++)
        free(s->details[i]);
    free(s->details);
    memset(s, 0, sizeof(*s));
}

static bool fault_status_copy(fault_status_t *dst, int code, const char *message,
                              const char *const *details, size_t n_details)
{
    memset(dst, 0, sizeof(*dst));
    dst->code = code;
    dst->message = strdup(message ? message : "");
    if (!dst->message)
        return false;
    if (n_details) {
        dst->details = calloc(n_details, sizeof(char *));
        if (!dst->details) {
            fault_status_clear(dst);
            return false;
        }
        for (size_t i = 0; i < n_details; i++) {
            dst->details[i] = strdup(details[i] ? details[i] : "");
            dst->n_details = i + 1;
            if (!dst->details[i]) {
                fault_status_clear(dst);
                return false;
            }
        }
    }
    return true;
}

void faults_init(faults_t *f)
{
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->mu, NULL);
    for (int i = 0; i < M_COUNT; i++)
        f->m[i].drop_after = -1;
}

static void clear_locked(faults_t *f)
{
    for (int i = 0; i < M_COUNT; i++) {
        fault_method_t *m = &f->m[i];
        fault_status_clear(&m->fail);
        m->fail_n = 0;
        m->delay_ms = 0;
        m->drop_after = -1;
        m->drop_n = 0;
        m->drop_after_write = false;
    }
}

void faults_clear(faults_t *f)
{
    pthread_mutex_lock(&f->mu);
    clear_locked(f);
    pthread_mutex_unlock(&f->mu);
}

void faults_destroy(faults_t *f)
{
    clear_locked(f);
    pthread_mutex_destroy(&f->mu);
}

void faults_count(faults_t *f, int m, bool new_call, bool request)
{
    pthread_mutex_lock(&f->mu);
    if (new_call)
        f->m[m].calls++;
    if (request)
        f->m[m].requests++;
    pthread_mutex_unlock(&f->mu);
}

bool faults_take_failure(faults_t *f, int m, fault_status_t *out)
{
    bool take = false;
    pthread_mutex_lock(&f->mu);
    fault_method_t *fm = &f->m[m];
    if (fm->fail_n > 0) {
        /* On NOMEM the failure is not consumed and the call proceeds normally. */
        take = fault_status_copy(out, fm->fail.code, fm->fail.message,
                                 (const char *const *)fm->fail.details, fm->fail.n_details);
        if (take && --fm->fail_n == 0)
            fault_status_clear(&fm->fail);
    }
    pthread_mutex_unlock(&f->mu);
    return take;
}

int64_t faults_delay(faults_t *f, int m)
{
    pthread_mutex_lock(&f->mu);
    int64_t ms = f->m[m].delay_ms;
    pthread_mutex_unlock(&f->mu);
    return ms;
}

int64_t faults_take_drop(faults_t *f, int m, bool *after_write)
{
    int64_t k = -1;
    pthread_mutex_lock(&f->mu);
    fault_method_t *fm = &f->m[m];
    if (after_write)
        *after_write = false;
    if (fm->drop_after >= 0 && fm->drop_n != 0) {
        k = fm->drop_after;
        if (after_write)
            *after_write = fm->drop_after_write;
        if (fm->drop_n > 0 && --fm->drop_n == 0)
            fm->drop_after = -1;
    }
    pthread_mutex_unlock(&f->mu);
    return k;
}

void fault_finish(rpc_server_call_t *call, const fault_status_t *s)
{
    rpc_server_call_finish(call, (grpc_status_code)s->code, s->message,
                           (const char *const *)s->details, s->n_details);
}

/* Public fault API ------------------------------------------------------------------------ */

varlog_err_t varlog_server_fail_next_details(varlog_server_t *srv, const char *method, int code,
                                             const char *message, const char *const *details,
                                             size_t n_details, int n)
{
    int m = server_method_index(method);
    if (!srv || m < 0 || code < 1 || code > 16 || n < 0 || (n_details && !details))
        return VARLOG_ERR_INVALID_ARG;
    fault_status_t st;
    if (n > 0 && !fault_status_copy(&st, code, message, details, n_details))
        return VARLOG_ERR_NOMEM;
    pthread_mutex_lock(&srv->faults.mu);
    fault_method_t *fm = &srv->faults.m[m];
    fault_status_clear(&fm->fail);
    fm->fail_n = n;
    if (n > 0)
        fm->fail = st;
    pthread_mutex_unlock(&srv->faults.mu);
    return VARLOG_OK;
}

varlog_err_t varlog_server_fail_next(varlog_server_t *srv, const char *method, int code,
                                     const char *message, int n)
{
    return varlog_server_fail_next_details(srv, method, code, message, NULL, 0, n);
}

varlog_err_t varlog_server_delay(varlog_server_t *srv, const char *method, int64_t ms)
{
    int m = server_method_index(method);
    if (!srv || m < 0 || ms < 0)
        return VARLOG_ERR_INVALID_ARG;
    pthread_mutex_lock(&srv->faults.mu);
    srv->faults.m[m].delay_ms = ms;
    pthread_mutex_unlock(&srv->faults.mu);
    return VARLOG_OK;
}

static varlog_err_t set_drop(varlog_server_t *srv, int m, int64_t k, int n, bool after_write)
{
    pthread_mutex_lock(&srv->faults.mu);
    srv->faults.m[m].drop_after = k < 0 ? -1 : k;
    srv->faults.m[m].drop_n = k < 0 ? 0 : n;
    srv->faults.m[m].drop_after_write = k >= 0 && after_write;
    pthread_mutex_unlock(&srv->faults.mu);
    return VARLOG_OK;
}

varlog_err_t varlog_server_drop_stream_after(varlog_server_t *srv, const char *method, int64_t k,
                                             int n)
{
    int m = server_method_index(method);
    if (!srv || (m != M_APPEND && m != M_SUBSCRIBE && m != M_SUBSCRIBE_TO))
        return VARLOG_ERR_INVALID_ARG;
    return set_drop(srv, m, k, n, false);
}

varlog_err_t varlog_server_drop_stream_after_write(varlog_server_t *srv, const char *method,
                                                   int64_t k, int n)
{
    /* Only an Append has a write that can outlive its answer. */
    if (!srv || server_method_index(method) != M_APPEND)
        return VARLOG_ERR_INVALID_ARG;
    return set_drop(srv, M_APPEND, k, n, true);
}

static uint64_t count_of(varlog_server_t *srv, const char *method, bool requests)
{
    int m = server_method_index(method);
    if (!srv || m < 0)
        return 0;
    pthread_mutex_lock(&srv->faults.mu);
    uint64_t v = requests ? srv->faults.m[m].requests : srv->faults.m[m].calls;
    pthread_mutex_unlock(&srv->faults.mu);
    return v;
}

uint64_t varlog_server_call_count(varlog_server_t *srv, const char *method)
{
    return count_of(srv, method, false);
}

uint64_t varlog_server_request_count(varlog_server_t *srv, const char *method)
{
    return count_of(srv, method, true);
}

void varlog_server_clear_faults(varlog_server_t *srv)
{
    if (srv)
        faults_clear(&srv->faults);
}

/* ---- timer ----------------------------------------------------------------------------- */

static void *timer_main(void *arg)
{
    server_timer_t *t = arg;
    pthread_mutex_lock(&t->mu);
    while (!t->stopping) {
        int64_t now = wire_now_ms(), next_due = now + 1000;
        timer_item_t *due = NULL, **tail = &due;
        for (timer_item_t **pp = &t->items; *pp;) {
            timer_item_t *it = *pp;
            if (it->due_ms <= now) {
                *pp = it->next;
                it->next = NULL;
                *tail = it;
                tail = &it->next;
            } else {
                if (it->due_ms < next_due)
                    next_due = it->due_ms;
                pp = &it->next;
            }
        }
        if (due) {
            /* Fire outside the lock: fire functions call into the store and the transport. */
            pthread_mutex_unlock(&t->mu);
            while (due) {
                timer_item_t *it = due;
                due = it->next;
                it->fire(it);
            }
            pthread_mutex_lock(&t->mu);
            continue;
        }
        struct timespec ts;
        abs_deadline(&ts, next_due - now);
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

void timer_init(server_timer_t *t)
{
    memset(t, 0, sizeof(*t));
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
}

void timer_destroy(server_timer_t *t)
{
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
}

varlog_err_t timer_start(server_timer_t *t)
{
    pthread_mutex_lock(&t->mu);
    t->stopping = false;
    pthread_mutex_unlock(&t->mu);
    if (pthread_create(&t->thread, NULL, timer_main, t) != 0)
        return VARLOG_ERR_INTERNAL;
    pthread_setname_np(t->thread, "varlog-srv-tmr");
    pthread_mutex_lock(&t->mu);
    t->running = true;
    pthread_mutex_unlock(&t->mu);
    return VARLOG_OK;
}

void timer_stop(server_timer_t *t)
{
    pthread_mutex_lock(&t->mu);
    bool running = t->running;
    t->stopping = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    if (!running)
        return;
    pthread_join(t->thread, NULL);
    pthread_mutex_lock(&t->mu);
    t->running = false;
    timer_item_t *items = t->items;
    t->items = NULL;
    pthread_mutex_unlock(&t->mu);
    while (items) {
        timer_item_t *it = items;
        items = it->next;
        it->drop(it);
    }
}

void timer_schedule(server_timer_t *t, timer_item_t *it)
{
    pthread_mutex_lock(&t->mu);
    bool accepted = t->running && !t->stopping;
    if (accepted) {
        /* At the tail: items due at the same scan fire in the order they were scheduled (a
         * stream's delayed responses must not overtake each other). */
        timer_item_t **pp = &t->items;
        while (*pp)
            pp = &(*pp)->next;
        it->next = NULL;
        *pp = it;
        pthread_cond_signal(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
    if (!accepted)
        it->drop(it);
}

/* ---- unary dispatch -------------------------------------------------------------------- */

struct unary_delayed {
    timer_item_t item;
    struct varlog_server *srv;
    rpc_server_call_t *call;
    ProtobufCMessage *req;
    unary_handler_t handle;
};

static void unary_fire(timer_item_t *it)
{
    struct unary_delayed *d = (struct unary_delayed *)it;
    d->handle(d->srv, d->call, d->req);
    protobuf_c_message_free_unpacked(d->req, NULL);
    rpc_server_call_unref(d->call);
    free(d);
}

static void unary_drop(timer_item_t *it)
{
    struct unary_delayed *d = (struct unary_delayed *)it;
    rpc_server_call_finish(d->call, GRPC_STATUS_UNAVAILABLE, "server stopping", NULL, 0);
    protobuf_c_message_free_unpacked(d->req, NULL);
    rpc_server_call_unref(d->call);
    free(d);
}

void server_unary_dispatch(struct varlog_server *srv, int m, rpc_server_call_t *call,
                           const ProtobufCMessage *req, unary_handler_t handle)
{
    faults_count(&srv->faults, m, true, true);
    fault_status_t fs;
    if (faults_take_failure(&srv->faults, m, &fs)) {
        fault_finish(call, &fs);
        fault_status_clear(&fs);
        return;
    }
    int64_t delay = faults_delay(&srv->faults, m);
    if (delay > 0) {
        struct unary_delayed *d = calloc(1, sizeof(*d));
        ProtobufCMessage *copy = d ? server_msg_dup(req) : NULL;
        if (!copy) {
            free(d);
            rpc_server_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL, 0);
            return;
        }
        d->item.due_ms = wire_deadline_ms(delay);
        d->item.fire = unary_fire;
        d->item.drop = unary_drop;
        d->srv = srv;
        d->call = call;
        d->req = copy;
        d->handle = handle;
        rpc_server_call_ref(call);
        timer_schedule(&srv->timer, &d->item);
        return;
    }
    handle(srv, call, req);
}
