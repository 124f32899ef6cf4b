/* The client's lifecycle (open, close) and its read-only queries. */
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "errtext.h"
#include "rpc_client.h"
#include "wire.h"

const char *varlog_outcome_name(varlog_outcome_t outcome)
{
    switch (outcome) {
    case VARLOG_APPENDED:
        return "APPENDED";
    case VARLOG_NOT_APPENDED:
        return "NOT_APPENDED";
    case VARLOG_MAYBE_APPENDED:
        return "MAYBE_APPENDED";
    }
    return "?";
}

varlog_err_t client_enter(varlog_client_t *c)
{
    pthread_mutex_lock(&c->mu);
    bool closing = c->closing;
    if (!closing)
        c->active_calls++;
    pthread_mutex_unlock(&c->mu);
    return closing ? errtext_set(VARLOG_ERR_CLOSED, "the client is closing") : VARLOG_OK;
}

void client_leave(varlog_client_t *c)
{
    pthread_mutex_lock(&c->mu);
    if (--c->active_calls == 0)
        pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->mu);
}

void client_retry_task_begin(varlog_client_t *c)
{
    pthread_mutex_lock(&c->mu);
    c->retry_tasks++;
    pthread_mutex_unlock(&c->mu);
}

void client_retry_task_end(varlog_client_t *c)
{
    pthread_mutex_lock(&c->mu);
    if (--c->retry_tasks == 0)
        pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->mu);
}

typedef struct lookup_retry {
    varlog_client_t *c;
    void *arg;
    void (*after)(void *arg);
    void (*after_err)(void *arg, varlog_err_t lookup_err);
    void (*release)(void *arg);
    varlog_err_t err; /* the lookup's; CLOSED until the handler ran */
} lookup_retry_t;

static int lookup_retry_handler(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    lookup_retry_t *r = arg;
    atomic_fetch_add(&r->c->stats.lookups, 1);
    vq_batch_item_t item = {.key = r, .bound = vq_now_ns(), .has_bound = true};
    r->err = (varlog_err_t)vq_batcher_lookup(r->c->batcher, &item);
    return 0;
}

static void lookup_retry_after(void *arg, int result)
{
    (void)result; /* a failed lookup still lets the retry go: it fails on its own then */
    lookup_retry_t *r = arg;
    if (r->after_err)
        r->after_err(r->arg, r->err);
    else
        r->after(r->arg);
}

static void lookup_retry_release(void *arg)
{
    lookup_retry_t *r = arg;
    varlog_client_t *c = r->c;
    r->release(r->arg);
    free(r);
    client_retry_task_end(c);
}

static varlog_err_t submit_lookup(varlog_client_t *c, int64_t delay_ns, lookup_retry_t proto)
{
    lookup_retry_t *r = malloc(sizeof(*r));
    if (!r)
        return VARLOG_ERR_NOMEM;
    *r = proto;
    r->c = c;
    r->err = VARLOG_ERR_CLOSED;
    vq_task_spec_t spec = {
        .handler = lookup_retry_handler,
        .arg = r,
        .after = lookup_retry_after,
        .release = lookup_retry_release,
        .timeout_ns =
            delay_ns +
            (c->conf->lookup_batch_wait_ms + c->conf->metadata_call_timeout_ms + 1000) * 1000000,
        .retry = {.min_ns = delay_ns,
                  .max_ns = delay_ns,
                  .factor = 2.0,
                  .jitter = true,
                  .delay_first = true},
    };
    client_retry_task_begin(c);
    vq_err_t err = vq_engine_submit(c->engine, &spec);
    if (err == VQ_OK)
        return VARLOG_OK;
    client_retry_task_end(c);
    free(r);
    return err == VQ_ERR_SHUTDOWN ? VARLOG_ERR_CLOSED
           : err == VQ_ERR_FULL   ? VARLOG_ERR_QUEUE_FULL
           : err == VQ_ERR_NOMEM  ? VARLOG_ERR_NOMEM
                                  : VARLOG_ERR_INTERNAL;
}

varlog_err_t client_submit_lookup_retry(varlog_client_t *c, int64_t delay_ns, void *arg,
                                        void (*after)(void *arg), void (*release)(void *arg))
{
    return submit_lookup(c, delay_ns,
                         (lookup_retry_t){.arg = arg, .after = after, .release = release});
}

varlog_err_t client_submit_lookup(varlog_client_t *c, void *arg,
                                  void (*after)(void *arg, varlog_err_t lookup_err),
                                  void (*release)(void *arg))
{
    return submit_lookup(c, 0,
                         (lookup_retry_t){.arg = arg, .after_err = after, .release = release});
}

/* Claims the next recheck; false while the last one is too recent. */
static bool recheck_claim(varlog_client_t *c)
{
    int64_t interval = c->conf->metadata_recheck_interval_ms;
    if (interval <= 0)
        return false;
    int64_t now = wire_now_ms();
    int_fast64_t next = atomic_load_explicit(&c->recheck_next_ms, memory_order_relaxed);
    return now >= next &&
           atomic_compare_exchange_strong(&c->recheck_next_ms, &next, now + interval);
}

static void recheck_done(void *arg, varlog_err_t lookup_err)
{
    (void)arg, (void)lookup_err; /* a failed lookup leaves the metadata at hand in place */
}

static void recheck_release(void *arg)
{
    (void)arg;
}

void client_recheck_async(varlog_client_t *c)
{
    if (recheck_claim(c) && !client_closing(c))
        (void)client_submit_lookup(c, NULL, recheck_done, recheck_release);
}

bool client_recheck_wait(varlog_client_t *c, int64_t deadline_ms)
{
    if (!recheck_claim(c))
        return false;
    atomic_fetch_add(&c->stats.lookups, 1);
    /* Fresh, as the engine's lookups are: a GetMetadata already in flight may predate the
     * unseal this call hopes to see. */
    return md_fetch_after(c, client_remaining_ms(deadline_ms), vq_now_ns()) == VARLOG_OK;
}

bool client_closing(varlog_client_t *c)
{
    pthread_mutex_lock(&c->mu);
    bool closing = c->closing;
    pthread_mutex_unlock(&c->mu);
    return closing;
}

int64_t client_remaining_ms(int64_t deadline_ms)
{
    if (deadline_ms < 0)
        return -1;
    int64_t left = deadline_ms - wire_now_ms();
    return left > 0 ? left : 0;
}

void client_install_view(varlog_client_t *c, md_view_t *view)
{
    pthread_mutex_lock(&c->mu);
    md_view_t *old = c->view;
    bool changed = !old || old->applied_index != view->applied_index;
    if (changed)
        c->view = view;
    pthread_mutex_unlock(&c->mu);
    if (!changed) {
        md_view_unref(view);
        return;
    }
    /* Renewals race only with other renewals, which carry views at least as new; a stale
     * allowlist for a moment only means a pick that the next attempt corrects. */
    varlog_err_t err = allowlist_renew(&c->allow, view);
    atomic_fetch_add(&c->stats.metadata_updates, 1);
    log_line(&c->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_METADATA,
             "metadata applied index %llu -> %llu: %zu topics, %zu log streams%s",
             (unsigned long long)(old ? old->applied_index : 0),
             (unsigned long long)view->applied_index, view->n_topics, view->n_log_streams,
             err == VARLOG_OK ? "" : " (allow list not renewed: out of memory)");
    md_view_unref(old);
}

/* Splits "a:1, b:2" into owned strings. */
static varlog_err_t split_seeds(varlog_client_t *c, const char *list)
{
    size_t cap = 1;
    for (const char *p = list; *p; p++)
        cap += *p == ',';
    c->seeds = calloc(cap, sizeof(char *));
    if (!c->seeds)
        return errtext_set(VARLOG_ERR_NOMEM, "out of memory");
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *end = p;
        while (*end && *end != ',' && *end != ' ')
            end++;
        if (end > p) {
            c->seeds[c->n_seeds] = strndup(p, (size_t)(end - p));
            if (!c->seeds[c->n_seeds])
                return errtext_set(VARLOG_ERR_NOMEM, "out of memory");
            c->n_seeds++;
        }
        p = end;
    }
    if (c->n_seeds == 0)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "metadata.addresses: no address given");
    return VARLOG_OK;
}

static void client_free(varlog_client_t *c)
{
    append_engine_stop(c);
    rpc_client_destroy(c->rpc);
    md_view_unref(c->view);
    allowlist_destroy(&c->allow);
    for (size_t i = 0; i < c->n_seeds; i++)
        free(c->seeds[i]);
    free(c->seeds);
    free(c->mr_address);
    pthread_cond_destroy(&c->refresher_wake);
    pthread_cond_destroy(&c->fetch_done);
    pthread_cond_destroy(&c->idle);
    pthread_mutex_destroy(&c->fetch_mu);
    pthread_mutex_destroy(&c->mu);
    app_budget_fini(c);
    stats_fini(&c->cstats);
    free(c);
}

varlog_err_t varlog_client_new(varlog_conf_t **conf, varlog_client_t **out, char *errstr,
                               size_t errstr_size)
{
    varlog_err_t err;
    if (out)
        *out = NULL;
    if (!conf || !*conf || !out) {
        err = errtext_set(VARLOG_ERR_INVALID_ARG,
                          "varlog_client_new: conf, *conf and out must not be NULL");
        errtext_copy(errstr, errstr_size);
        return err;
    }
    err = conf_validate(*conf);
    if (err != VARLOG_OK) {
        errtext_copy(errstr, errstr_size);
        return err;
    }
    varlog_client_t *c = calloc(1, sizeof(*c));
    if (!c) {
        err = errtext_set(VARLOG_ERR_NOMEM, "out of memory");
        errtext_copy(errstr, errstr_size);
        return err;
    }
    atomic_init(&c->self_receiving, 0);
    c->conf = *conf;
    c->log.level = c->conf->log_level;
    c->log.debug = c->conf->debug_contexts;
    c->log.cb = c->conf->log_cb;
    c->log.opaque = c->conf->log_opaque;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->fetch_mu, NULL);
    wire_cond_init(&c->idle);
    wire_cond_init(&c->fetch_done);
    wire_cond_init(&c->refresher_wake);
    allowlist_init(&c->allow);
    app_budget_init(c);

    if (!c->conf->absl_deadlock_detection && !wire_absl_deadlock_detection_off())
        log_line(&c->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_RPC,
                 "grpc.absl.deadlock.detection: abseil's setter was not found; left as it is");
    int64_t deadline = wire_now_ms() + c->conf->open_timeout_ms;
    err = stats_init(&c->cstats, c->conf)
              ? VARLOG_OK
              : errtext_set(VARLOG_ERR_NOMEM, "out of memory for the statistics");
    if (err == VARLOG_OK)
        err = split_seeds(c, c->conf->metadata_addresses ? c->conf->metadata_addresses : "");
    rpc_client_opts_t rpc_opts = {.reconnect_backoff_max_ms = c->conf->reconnect_backoff_max_ms,
                                  .fixed_windows = !c->conf->grpc_bdp_probe};
    if (err == VARLOG_OK && (err = rpc_client_new_opts(&rpc_opts, &c->rpc)) != VARLOG_OK)
        errtext_set(err, "could not start the gRPC client: %s", varlog_err_str(err));
    if (err == VARLOG_OK)
        err = md_open(c, deadline);
    if (err == VARLOG_OK)
        err = append_engine_start(c);
    if (err == VARLOG_OK)
        err = md_refresher_start(c);
    if (err == VARLOG_OK)
        err = stats_start(c);
    if (err != VARLOG_OK) {
        char why[512];
        errtext_copy(why, sizeof(why));
        /* Returned in errstr and varlog_last_error: logged above DEBUG it would be said twice
         * by a program that prints errstr. */
        log_line(&c->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_CONF, "client not opened: %s", why);
        c->conf = NULL; /* stays the caller's */
        pthread_mutex_lock(&c->mu);
        c->closing = true;
        pthread_mutex_unlock(&c->mu);
        md_refresher_stop(c);
        client_free(c);
        errtext_set(err, "%s", why);
        errtext_copy(errstr, errstr_size);
        return err;
    }
    *conf = NULL;
    log_line(&c->log, VARLOG_LOG_INFO, VARLOG_LOG_CTX_CONF,
             "client open: metadata at %s, applied index %llu", c->mr_address ? c->mr_address : "?",
             (unsigned long long)varlog_client_applied_index(c));
    *out = c;
    return VARLOG_OK;
}

/* The client whose thread this is, if any (see client_thread_own). */
static _Thread_local const varlog_client_t *tls_own_client;

void client_thread_own(const varlog_client_t *c)
{
    tls_own_client = c;
}

bool client_thread_is_own(const varlog_client_t *c)
{
    return tls_own_client == c;
}

void varlog_client_destroy(varlog_client_t *c)
{
    if (!c)
        return;
    if (tls_own_client == c) {
        /* Joining this thread from itself would fail or hang, and freeing the client under
         * it would crash once the callback returned: refuse, loudly, and keep the client. */
        errtext_set(VARLOG_ERR_STATE,
                    "varlog_client_destroy: called on one of the client's own threads (from "
                    "an append callback, a subscription handler or a stats callback), which "
                    "it would have to join: nothing was destroyed");
        log_line(&c->log, VARLOG_LOG_CRIT, VARLOG_LOG_CTX_CONF, "%s", varlog_last_error());
        return;
    }
    pthread_mutex_lock(&c->mu);
    c->closing = true;
    pthread_mutex_unlock(&c->mu);
    /* The statistics' thread reads every part below: it goes first, and no stats callback
     * runs once destroy returns. */
    stats_stop(c);
    /* Appenders first: their threads use the transport, the metadata and the engine. */
    appenders_close_all(c);
    app_execs_stop(c); /* the threads they shared (appender.threads) */
    subscriptions_close_all(c);
    sub_shared_stop_all(c); /* after their subscriptions: the threads end with the last one */
    /* Cancel the network calls and the retry delays so that every call in progress on another
     * thread returns promptly, then wait for them to leave before freeing what they use. The
     * refresher is joined only after its call was cancelled: joining it first would wait for
     * its GetMetadata for up to metadata.call.timeout.ms. */
    rpc_client_shutdown(c->rpc);
    md_refresher_stop(c);
    if (c->engine)
        vq_engine_shutdown(c->engine);
    pthread_mutex_lock(&c->mu);
    while (c->active_calls > 0)
        pthread_cond_wait(&c->idle, &c->mu);
    pthread_mutex_unlock(&c->mu);
    varlog_conf_t *conf = c->conf;
    client_free(c);
    varlog_conf_destroy(conf);
}

varlog_err_t varlog_client_refresh(varlog_client_t *c, int64_t timeout_ms)
{
    if (!c)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "varlog_client_refresh: client is NULL");
    if (timeout_ms == 0 || timeout_ms < -1)
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "varlog_client_refresh: timeout_ms %lld (give a positive timeout, or -1 "
                           "for metadata.call.timeout.ms)",
                           (long long)timeout_ms);
    varlog_err_t err = client_enter(c);
    if (err != VARLOG_OK)
        return err;
    err = md_fetch(c, timeout_ms);
    client_leave(c);
    return err;
}

uint64_t varlog_client_applied_index(varlog_client_t *c)
{
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    uint64_t index = c->view ? c->view->applied_index : 0;
    pthread_mutex_unlock(&c->mu);
    return index;
}

static varlog_err_t check_list_args(const char *fn, varlog_client_t *c, const int32_t *ids,
                                    size_t cap, const size_t *n)
{
    if (!c || !n || (!ids && cap > 0))
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "%s: client and n must not be NULL, nor ids "
                           "when cap > 0",
                           fn);
    return client_enter(c);
}

varlog_err_t varlog_client_topics(varlog_client_t *c, int32_t *ids, size_t cap, size_t *n)
{
    varlog_err_t err = check_list_args(__func__, c, ids, cap, n);
    if (err != VARLOG_OK)
        return err;
    md_view_t *v = md_current(c);
    for (size_t i = 0; i < v->n_topics && i < cap; i++)
        ids[i] = v->topics[i].topic_id;
    *n = v->n_topics;
    md_view_unref(v);
    client_leave(c);
    return VARLOG_OK;
}

varlog_err_t varlog_client_log_streams(varlog_client_t *c, int32_t topic_id, int32_t *ids,
                                       size_t cap, size_t *n)
{
    varlog_err_t err = check_list_args(__func__, c, ids, cap, n);
    if (err != VARLOG_OK)
        return err;
    md_view_t *v = md_current(c);
    const md_topic_t *t = md_view_topic(v, topic_id);
    if (t) {
        for (size_t i = 0; i < t->n_log_streams && i < cap; i++)
            ids[i] = t->log_stream_ids[i];
        *n = t->n_log_streams;
    } else {
        err = errtext_set(VARLOG_ERR_UNKNOWN_TOPIC,
                          "topic %d is not in the metadata (applied "
                          "index %llu)",
                          topic_id, (unsigned long long)v->applied_index);
    }
    md_view_unref(v);
    client_leave(c);
    return err;
}

varlog_err_t varlog_client_appendable_log_streams(varlog_client_t *c, int32_t topic_id,
                                                  int32_t *ids, size_t cap, size_t *n)
{
    varlog_err_t err = check_list_args(__func__, c, ids, cap, n);
    if (err != VARLOG_OK)
        return err;
    err = allowlist_list(&c->allow, topic_id, wire_now_ms(), ids, cap, n);
    if (err != VARLOG_OK)
        errtext_set(err, "topic %d is not in the metadata", topic_id);
    client_leave(c);
    return err;
}

varlog_err_t varlog_client_stats(varlog_client_t *c, varlog_client_stats_t *out)
{
    if (!c || !out)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "varlog_client_stats: NULL argument");
    out->appends_ok = atomic_load(&c->stats.appends_ok);
    out->appends_failed = atomic_load(&c->stats.appends_failed);
    out->append_attempts = atomic_load(&c->stats.append_attempts);
    out->append_retries = atomic_load(&c->stats.append_retries);
    out->resolve_passes = atomic_load(&c->stats.resolve_passes);
    out->resolved_found = atomic_load(&c->stats.resolved_found);
    out->resolved_absent = atomic_load(&c->stats.resolved_absent);
    out->lookups = atomic_load(&c->stats.lookups);
    out->metadata_fetches = atomic_load(&c->stats.metadata_fetches);
    out->metadata_updates = atomic_load(&c->stats.metadata_updates);
    out->denials = atomic_load(&c->stats.denials);
    return VARLOG_OK;
}
