/* The merge of a subscription: one stream per log stream, their heads in a min-heap by
 * position, the wanted position handed out when a head holds it; failures, resubscription
 * on the engine and stall detection. Runs on the consumer's thread (see
 * subscribe_internal.h), except the notify hook (gRPC's I/O thread) and the retry task's
 * callbacks (engine workers). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snpb/log_io.pb-c.h"
#include "subscribe_internal.h"
#include "vq/task.h"

#define TRIMMED_REASON "logstream: trimmed"
/* Longest pause between looks at the metadata (new log streams) and for stalled streams. */
#define CHECK_INTERVAL_MAX_MS 250
/* Non-blocking polls in a row before the consumer looks at the clock (checks, deadline). */
#define QUICK_POLLS_MAX 64
/* blocked_since_ms of a merge that began to wait since the consumer last read the clock: the
 * wait is stamped at the next read, so that a head missing for a moment costs no clock read. */
#define BLOCKED_UNSTAMPED (-1)

void sub_fail(varlog_subscription_t *sub, varlog_err_t err, const char *fmt, ...)
{
    if (sub->result != VARLOG_OK)
        return;
    sub->result = err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sub->why, sizeof(sub->why), fmt, ap);
    va_end(ap);
    sub_outage_ended(sub);
}

/* Adds to a counter only the consumer writes. */
static inline void bump(atomic_uint_fast64_t *counter, uint64_t n)
{
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static const char *pos_name(const varlog_subscription_t *sub)
{
    return sub->order == SUB_BY_GLSN ? "GLSN" : "LLSN";
}

/* ---- news from the streams ----------------------------------------------------------------- */

/* Puts ls on the list of log streams the consumer must look at. mu held. */
static void queue_news_locked(varlog_subscription_t *sub, sub_ls_t *ls)
{
    if (!ls->queued) {
        ls->queued = true;
        ls->next = sub->news;
        sub->news = ls;
    }
}

/* Puts ls on the list of log streams the consumer looks at next. Takes mu. */
static void sub_news(varlog_subscription_t *sub, sub_ls_t *ls)
{
    pthread_mutex_lock(&sub->mu);
    queue_news_locked(sub, ls);
    pthread_mutex_unlock(&sub->mu);
}

/* The stream's notify hook, with the stream's lock held: a message or the stream's end is
 * ready. With a poller it runs inside the consumer's poll, which returns after it: no
 * wake-up to send. Without, it runs on gRPC's I/O thread and wakes a sleeping consumer (a
 * busy one only once wakeup_entries messages came: a wake-up is a futex call here and a
 * context switch there, several times the library's own work per entry). */
static void ls_notify(void *arg)
{
    sub_ls_t *ls = arg;
    varlog_subscription_t *sub = ls->sub;
    bump(&ls->received, 1); /* one writer: the poll's owner, or the I/O thread */
    pthread_mutex_lock(&sub->mu);
    queue_news_locked(sub, ls);
    bool wake = false;
    if (!sub->poller) {
        sub->news_count++;
        wake = sub->waiting && (!sub->batching || sub->news_count >= sub->wakeup_entries);
    }
    if (sub->shared) /* inside the shared thread's poll: it serves the subscription next */
        sub_shared_notified_locked(sub);
    pthread_mutex_unlock(&sub->mu);
    if (wake)
        pthread_cond_signal(&sub->wake);
}

static uint64_t resume_position(uint64_t wanted, const sub_ls_t *ls);

/* ---- resubscription ------------------------------------------------------------------------ */

typedef struct sub_retry {
    varlog_subscription_t *sub;
    sub_ls_t *ls;
} sub_retry_t;

/* The backoff passed: opens the new stream here, on the engine's worker, so that it starts
 * receiving even while an iterator's caller is away, and hands it to the consumer. A
 * stream that could not be opened is left to the consumer, which tries again and settles
 * the failure. */
static void retry_after(void *arg)
{
    sub_retry_t *r = arg;
    varlog_subscription_t *sub = r->sub;
    sub_ls_t *ls = r->ls;
    /* Counted while it opens and kicks: the poller must outlive both. */
    pthread_mutex_lock(&sub->mu);
    bool closing = sub->closing;
    if (!closing)
        sub->poller_users++;
    pthread_mutex_unlock(&sub->mu);
    if (closing)
        return;
    rpc_stream_t *rpc = NULL;
    uint64_t from = resume_position(atomic_load_explicit(&sub->n_next, memory_order_relaxed), ls);
    uint64_t end = sub_range_end(sub);
    char why[128];
    if (from < end && sub_open_call(sub, ls, from, end, false, &rpc, why, sizeof(why)) != VARLOG_OK)
        rpc = NULL;
    pthread_mutex_lock(&sub->mu);
    closing = sub->closing;
    if (!closing) {
        ls->pending_rpc = rpc;
        ls->pending_end = end;
        ls->reopen = true;
        queue_news_locked(sub, ls);
    }
    pthread_mutex_unlock(&sub->mu);
    /* Either before poller_users drops, while the poller is certainly there. */
    if (closing)
        rpc_stream_destroy(rpc);
    else
        sub_wake(sub);
    pthread_mutex_lock(&sub->mu);
    if (--sub->poller_users == 0)
        pthread_cond_broadcast(&sub->idle);
    pthread_mutex_unlock(&sub->mu);
}

static void retry_release(void *arg)
{
    sub_retry_t *r = arg;
    sub_unref(r->sub);
    free(r);
}

/* Asks the engine to reopen ls's stream after the backoff of its failures so far. */
static void schedule_reopen(varlog_subscription_t *sub, sub_ls_t *ls)
{
    varlog_client_t *c = sub->c;
    sub_retry_t *r = calloc(1, sizeof(*r));
    if (!r) {
        sub_fail(sub, VARLOG_ERR_NOMEM, "subscribe: no memory to resubscribe log stream %d",
                 ls->log_stream_id);
        return;
    }
    *r = (sub_retry_t){.sub = sub, .ls = ls};
    vq_retry_t policy = {.min_ns = c->conf->subscribe_retry_backoff_ms * 1000000,
                         .max_ns = c->conf->subscribe_retry_backoff_max_ms * 1000000,
                         .factor = 2.0};
    int64_t delay = sub_outage_delay_ns(
        sub, ls, vq_backoff_ns(&policy, ls->failures ? ls->failures - 1 : 0, NULL));
    sub_ref(sub);
    ls->retrying = true;
    varlog_err_t err = client_submit_lookup_retry(c, delay, r, retry_after, retry_release);
    if (err != VARLOG_OK) {
        ls->retrying = false;
        sub_unref(sub);
        free(r);
        if (err == VARLOG_ERR_CLOSED)
            sub_fail(sub, err, "subscribe: the client is closing");
        else
            sub_fail(sub, err, "subscribe: log stream %d could not be resubscribed: %s",
                     ls->log_stream_id, varlog_err_str(err));
    }
}

/* ---- one log stream's stream --------------------------------------------------------------- */

static void release_held(sub_ls_t *ls)
{
    if (ls->held) {
        grpc_byte_buffer_destroy(ls->held);
        ls->held = NULL;
    }
}

void sub_close_stream(sub_ls_t *ls)
{
    rpc_stream_destroy(ls->rpc);
    ls->rpc = NULL;
}

/* ls holds nothing more of the range it is asked for (end: its end), the window's or the
 * subscription's; only the latter is complete for the lag statistic. */
static void ls_finished(varlog_subscription_t *sub, sub_ls_t *ls, uint64_t end)
{
    ls->finished = true;
    if (end >= sub->end)
        atomic_store_explicit(&ls->pub_finished, true, memory_order_relaxed);
}

/* ls's stream failed with err (or could not be opened): the subscription fails when the
 * failure is final (a trimmed range, a request the node refuses, an outage past its bound:
 * subscribe_outage.c), otherwise the stream is opened again, on the next replica, after a
 * backoff. */
static void ls_failed(varlog_subscription_t *sub, sub_ls_t *ls, varlog_err_t err, const char *msg)
{
    const char *target = ls->target ? ls->target : "?";
    bool trimmed = strcmp(msg, TRIMMED_REASON) == 0 || strstr(msg, ": " TRIMMED_REASON) != NULL ||
                   (sub->order == SUB_BY_LLSN && err == VARLOG_ERR_RPC_OUT_OF_RANGE);
    if (err == VARLOG_ERR_CLOSED) {
        sub_fail(sub, err, "subscribe: the client is closing");
    } else if (trimmed) {
        sub_fail(sub, VARLOG_ERR_TRIMMED,
                 "subscribe to log stream %d of topic %d at %s from %s %" PRIu64
                 ": the range is trimmed (%s: %s)",
                 ls->log_stream_id, sub->topic_id, target, pos_name(sub), sub->wanted,
                 varlog_err_str(err), msg);
    } else if (err == VARLOG_ERR_RPC_OUT_OF_RANGE || err == VARLOG_ERR_RPC_INVALID_ARGUMENT) {
        sub_fail(sub, err,
                 "subscribe to log stream %d of topic %d at %s from %s %" PRIu64 ": %s%s%s",
                 ls->log_stream_id, sub->topic_id, target, pos_name(sub), sub->wanted,
                 varlog_err_str(err), msg[0] ? ": " : "", msg);
    } else if (!sub_outage_failed(sub, ls, err, target, msg)) {
        log_line(&sub->c->log, VARLOG_LOG_INFO, VARLOG_LOG_CTX_SUBSCRIBE,
                 "subscribe to log stream %d of topic %d at %s failed (%u in a row): %s%s%s; "
                 "resubscribing from %s %" PRIu64,
                 ls->log_stream_id, sub->topic_id, target, ls->failures, varlog_err_str(err),
                 msg[0] ? ": " : "", msg, pos_name(sub), sub->wanted);
        ls->replica++;
        pthread_mutex_lock(&sub->mu);
        sub->stats.resubscribes++;
        pthread_mutex_unlock(&sub->mu);
        schedule_reopen(sub, ls);
    }
}

/* The stream's end (err from a receive): finished, or a failure. */
static void stream_ended(varlog_subscription_t *sub, sub_ls_t *ls, varlog_err_t err)
{
    if (err == VARLOG_ERR_END) {
        ls_finished(sub, ls, sub_range_end(sub));
        sub_close_stream(ls);
        return;
    }
    char msg[256];
    if (err == VARLOG_ERR_DECODE) {
        snprintf(msg, sizeof(msg), "malformed message: %s", ls->decode_why);
    } else {
        const rpc_status_t *st = rpc_stream_status(ls->rpc);
        snprintf(msg, sizeof(msg), "%s", st ? rpc_status_reason(st) : "");
    }
    sub_close_stream(ls); /* msg was copied: the status goes with the stream */
    ls_failed(sub, ls, err, msg);
}

/* Starts a stream of ls for positions [from, end) on its current replica into *out. Runs on the
 * consumer, or on an engine worker while ls waits for a retry (the consumer then leaves ls
 * alone). On failure returns the error with its text in why. */
varlog_err_t sub_open_call(varlog_subscription_t *sub, sub_ls_t *ls, uint64_t from, uint64_t end,
                           bool ahead, rpc_stream_t **out, char *why, size_t why_size)
{
    varlog_client_t *c = sub->c;
    md_view_t *view = md_current(c);
    const md_log_stream_t *m = md_view_log_stream(view, sub->topic_id, ls->log_stream_id);
    if (!m || m->n_replicas == 0) {
        md_view_unref(view);
        snprintf(why, why_size, "%s",
                 m ? "no replica of the log stream has a known address"
                   : "the metadata no longer lists the log stream");
        return m ? VARLOG_ERR_RPC_UNAVAILABLE : VARLOG_ERR_UNKNOWN_LOG_STREAM;
    }
    char *target = strdup(m->replicas[ls->replica % m->n_replicas]);
    md_view_unref(view);
    if (!target) {
        snprintf(why, why_size, "out of memory");
        return VARLOG_ERR_NOMEM;
    }
    free(ls->target);
    ls->target = target;

    rpc_stream_opts_t o = {.kind = RPC_STREAM_SERVER,
                           .recv_window = (size_t)c->conf->subscribe_prefetch_entries,
                           .recv_window_bytes = (size_t)c->conf->subscribe_prefetch_bytes,
                           .timeout_ms = -1,
                           .notify = ahead ? NULL : ls_notify,
                           .notify_arg = ls,
                           .poller = sub->poller,
                           .stamp_arrivals = sub->timing};
    Varlog__Snpb__SubscribeRequest g = VARLOG__SNPB__SUBSCRIBE_REQUEST__INIT;
    Varlog__Snpb__SubscribeToRequest l = VARLOG__SNPB__SUBSCRIBE_TO_REQUEST__INIT;
    const ProtobufCMessage *req;
    const char *path;
    if (sub->order == SUB_BY_GLSN) {
        g.topic_id = sub->topic_id;
        g.log_stream_id = ls->log_stream_id;
        g.glsn_begin = from;
        g.glsn_end = end;
        req = &g.base;
        path = SN_PATH_SUBSCRIBE;
        o.response = &varlog__snpb__subscribe_response__descriptor;
    } else {
        l.topic_id = sub->topic_id;
        l.log_stream_id = ls->log_stream_id;
        l.llsn_begin = from;
        l.llsn_end = end;
        req = &l.base;
        path = SN_PATH_SUBSCRIBE_TO;
        o.response = &varlog__snpb__subscribe_to_response__descriptor;
    }
    varlog_err_t err = rpc_stream_open(c->rpc, ls->target, path, &o, req, out);
    if (err != VARLOG_OK) {
        *out = NULL;
        snprintf(why, why_size, "could not start the call");
    }
    return err;
}

/* The first position ls must read from: past what it delivered and what was merged. */
static uint64_t resume_position(uint64_t wanted, const sub_ls_t *ls)
{
    return ls->last_pos >= wanted ? ls->last_pos + 1 : wanted;
}

/* The consumer takes a stream of ls into use: the stall and outage checks count from here.
 * Only the consumer writes these (a retry's stream is stamped when the consumer adopts it,
 * a moment after its open: the periodic check reads them on the consumer's thread). */
static void sub_stamp_opened(sub_ls_t *ls)
{
    ls->opened_ms = ls->last_recv_ms = wire_now_ms();
}

void sub_take_ahead(varlog_subscription_t *sub, sub_ls_t *ls)
{
    ls->rpc = ls->next_rpc;
    ls->next_rpc = NULL;
    sub_stamp_opened(ls);
    rpc_stream_set_notify(ls->rpc, ls_notify, ls);
    sub_news(sub, ls); /* what it received before announced nothing */
}

/* Opens ls's stream on its current replica, from the first position not delivered yet. */
void sub_ls_open(varlog_subscription_t *sub, sub_ls_t *ls)
{
    uint64_t from = resume_position(sub->wanted, ls);
    uint64_t end = sub_range_end(sub);
    if (from >= end) {
        ls_finished(sub, ls, end);
        return;
    }
    char why[128];
    varlog_err_t err = sub_open_call(sub, ls, from, end, false, &ls->rpc, why, sizeof(why));
    if (err == VARLOG_OK)
        sub_stamp_opened(ls);
    else if (err == VARLOG_ERR_NOMEM)
        sub_fail(sub, err, "subscribe: out of memory");
    else
        ls_failed(sub, ls, err, why);
}

/* Takes ls's next entry as its head (into the heap), unless its buffer is empty for now or
 * its stream ended. Entries before the wanted position (repeated by a new stream) are
 * dropped. */
static void pull(varlog_subscription_t *sub, sub_ls_t *ls)
{
    while (!ls->has_head && ls->rpc && sub->result == VARLOG_OK) {
        grpc_byte_buffer *bb = NULL;
        varlog_err_t err = rpc_stream_recv_buffer_at(ls->rpc, 0, &bb, &ls->head_arrival_ns);
        if (err == VARLOG_ERR_TIMED_OUT)
            return;
        if (err != VARLOG_OK) {
            stream_ended(sub, ls, err);
            return;
        }
        size_t len = 0;
        const uint8_t *p = wire_flatten(bb, &ls->scratch, &len);
        varlog_err_t derr;
        if (!p) {
            snprintf(ls->decode_why, sizeof(ls->decode_why), "out of memory");
            derr = VARLOG_ERR_NOMEM;
        } else if (sub->order == SUB_BY_GLSN) {
            derr = codec_read_subscribe_response(p, len, &ls->head, ls->decode_why,
                                                 sizeof(ls->decode_why));
        } else {
            derr = codec_read_subscribe_to_response(p, len, &ls->head, ls->decode_why,
                                                    sizeof(ls->decode_why));
        }
        if (derr != VARLOG_OK) {
            grpc_byte_buffer_destroy(bb);
            rpc_stream_fail_decode(ls->rpc); /* the next receive reports DECODE */
            continue;
        }
        uint64_t pos = sub->order == SUB_BY_GLSN ? ls->head.meta.glsn : ls->head.meta.llsn;
        if (pos < sub->wanted || pos <= ls->last_pos) {
            grpc_byte_buffer_destroy(bb);
            bump(&sub->n_duplicates, 1);
            continue;
        }
        ls->held = bb;
        ls->has_head = true;
        ls->last_pos = pos;
        if (!ls->pub_known) { /* nothing delivered from it yet: it is behind its first head */
            ls->pub_known = true;
            atomic_store_explicit(&ls->pub_llsn, ls->head.meta.llsn, memory_order_relaxed);
        }
        if (pos > atomic_load_explicit(&sub->n_seen_max, memory_order_relaxed))
            atomic_store_explicit(&sub->n_seen_max, pos, memory_order_relaxed);
        if (ls->failures || ls->down_since_ms)
            sub_outage_progress(sub, ls);
        (void)tq_push(sub->heap, pos, (uintptr_t)ls); /* room for every log stream */
        if (sub->timing)
            ls->head_queued_ns = stats_now_ns();
    }
}

/* ---- the log streams of the subscription --------------------------------------------------- */

static sub_ls_t *find_ls(const varlog_subscription_t *sub, int32_t id)
{
    for (size_t i = 0; i < sub->n_ls; i++)
        if (sub->ls[i]->log_stream_id == id)
            return sub->ls[i];
    return NULL;
}

static varlog_err_t add_ls(varlog_subscription_t *sub, int32_t id)
{
    if (sub->n_ls == sub->cap_ls) {
        size_t cap = sub->cap_ls ? sub->cap_ls * 2 : 4;
        /* under mu: a scrape reads the array (stats_lag.c) */
        pthread_mutex_lock(&sub->mu);
        sub_ls_t **a = realloc(sub->ls, cap * sizeof(*a));
        if (a) {
            sub->ls = a;
            sub->cap_ls = cap;
        }
        pthread_mutex_unlock(&sub->mu);
        if (!a)
            return VARLOG_ERR_NOMEM;
    }
    if (tq_reserve(sub->heap, sub->n_ls + 1) != VARLOG_OK)
        return VARLOG_ERR_NOMEM;
    sub_ls_t *ls = calloc(1, sizeof(*ls));
    if (!ls)
        return VARLOG_ERR_NOMEM;
    ls->sub = sub;
    ls->log_stream_id = id;
    ls->series =
        metrics_series_use(&sub->c->cstats.metrics, sub->topic_id, id, METRICS_USE_RECEIVE);
    atomic_init(&ls->received, 0);
    atomic_init(&ls->pub_llsn, 0);
    atomic_init(&ls->pub_finished, false);
    ls->last_recv_ms = wire_now_ms();
    pthread_mutex_lock(&sub->mu);
    sub->ls[sub->n_ls++] = ls;
    sub->stats.log_streams = (uint32_t)sub->n_ls;
    pthread_mutex_unlock(&sub->mu);
    sub_ls_open(sub, ls);
    return VARLOG_OK;
}

varlog_err_t sub_add_log_streams(varlog_subscription_t *sub, const md_view_t *view)
{
    sub->view_index = view->applied_index;
    if (sub->order == SUB_BY_LLSN) {
        if (sub->n_ls)
            return VARLOG_OK;
        sub_window_begin(sub, 1);
        return add_ls(sub, sub->fixed_ls);
    }
    const md_topic_t *t = md_view_topic(view, sub->topic_id);
    bool joined = sub->n_ls > 0; /* not the start: the topic grew */
    if (atomic_load_explicit(&sub->win_end, memory_order_relaxed) == 0)
        sub_window_begin(sub, t ? t->n_log_streams : 0);
    for (size_t i = 0; t && i < t->n_log_streams; i++) {
        if (find_ls(sub, t->log_stream_ids[i]))
            continue;
        varlog_err_t err = add_ls(sub, t->log_stream_ids[i]);
        if (err != VARLOG_OK)
            return err;
        if (joined)
            log_line(&sub->c->log, VARLOG_LOG_INFO, VARLOG_LOG_CTX_SUBSCRIBE,
                     "subscription of topic %d reads log stream %d too", sub->topic_id,
                     t->log_stream_ids[i]);
    }
    return VARLOG_OK;
}

void sub_streams_done(varlog_subscription_t *sub)
{
    pthread_mutex_lock(&sub->mu);
    while (sub->poller_users > 0)
        pthread_cond_wait(&sub->idle, &sub->mu);
    pthread_mutex_unlock(&sub->mu);
    sub_release_streams(sub);
    if (sub->shared) { /* the shared thread's poller: their last completions run there */
        sub->poller = NULL;
        return;
    }
    /* The streams' last completions (their cancellation) run here; then the queue goes. */
    if (sub->poller) {
        rpc_poller_destroy(sub->poller);
        sub->poller = NULL;
        atomic_fetch_sub(&sub->c->self_receiving, 1);
    }
}

void sub_release_streams(varlog_subscription_t *sub)
{
    for (size_t i = 0; i < sub->n_ls; i++) {
        sub_ls_t *ls = sub->ls[i];
        pthread_mutex_lock(&sub->mu);
        rpc_stream_t *pending = ls->pending_rpc;
        ls->pending_rpc = NULL;
        pthread_mutex_unlock(&sub->mu);
        rpc_stream_destroy(pending);
        rpc_stream_destroy(ls->next_rpc);
        ls->next_rpc = NULL;
        sub_close_stream(ls);
        release_held(ls);
        ls->has_head = false;
    }
    sub->delivered = NULL;
    if (sub->heap)
        tq_reset(sub->heap);
}

/* ---- checks while waiting ------------------------------------------------------------------ */

/* Looks for log streams new to the topic, and in GLSN order for streams silent past
 * subscribe.stall.timeout.ms while the wanted GLSN must be theirs: another log stream holds
 * a later one, so the wanted one was committed. */
/* Whether every log stream the topic-wide subscription reads is sealed in view (none of
 * them takes appends: new entries can only come from a log stream added since). */
static bool all_read_sealed(const varlog_subscription_t *sub, const md_view_t *view)
{
    if (sub->order != SUB_BY_GLSN || sub->n_ls == 0)
        return false;
    for (size_t i = 0; i < sub->n_ls; i++) {
        const md_log_stream_t *l =
            md_view_log_stream(view, sub->topic_id, sub->ls[i]->log_stream_id);
        if (!l || !l->sealed)
            return false;
    }
    return true;
}

static void periodic_check(varlog_subscription_t *sub, int64_t now)
{
    md_view_t *view = md_current(sub->c);
    if (view->applied_index != sub->view_index && sub_add_log_streams(sub, view) != VARLOG_OK)
        sub_fail(sub, VARLOG_ERR_NOMEM, "subscribe: out of memory adding a log stream");
    /* Tailing a topic whose log streams are all sealed: appends go to a log stream added
     * since, which no gap announces (nothing arrives here). Fresh metadata shows it, within
     * metadata.recheck.interval.ms rather than the periodic refresh. */
    if (sub->wanted < sub->end && all_read_sealed(sub, view))
        client_recheck_async(sub->c);
    md_view_unref(view);
    sub_gap_probe(sub, now);
    for (size_t i = 0; i < sub->n_ls; i++) {
        sub_ls_t *ls = sub->ls[i];
        uint64_t received = atomic_load_explicit(&ls->received, memory_order_relaxed);
        if (received != ls->received_seen) {
            ls->received_seen = received;
            ls->last_recv_ms = now;
        }
    }
    for (size_t i = 0; i < sub->n_ls && sub->result == VARLOG_OK; i++)
        sub_outage_check(sub, sub->ls[i], now);
    int64_t stall = sub->c->conf->subscribe_stall_timeout_ms;
    tq_item_t min;
    if (sub->order != SUB_BY_GLSN || stall <= 0 || sub->blocked_since_ms <= 0 ||
        tq_peek_min(sub->heap, &min) != VARLOG_OK)
        return;
    for (size_t i = 0; i < sub->n_ls && sub->result == VARLOG_OK; i++) {
        sub_ls_t *ls = sub->ls[i];
        /* Silent since its last message or since the merge began waiting, whichever is
         * later: a stream idle for an hour before the wanted entry was committed is not
         * late yet. */
        int64_t last = ls->last_recv_ms;
        if (last < sub->blocked_since_ms)
            last = sub->blocked_since_ms;
        if (ls->has_head || !ls->rpc || now - last < stall)
            continue;
        pthread_mutex_lock(&sub->mu);
        sub->stats.stalls++;
        pthread_mutex_unlock(&sub->mu);
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "nothing received for %" PRId64 " ms (subscribe.stall.timeout.ms) while log "
                 "stream %d holds GLSN %" PRIu64 " after the wanted %" PRIu64,
                 now - last, ((sub_ls_t *)min.val)->log_stream_id, min.glsn, sub->wanted);
        sub_close_stream(ls);
        ls_failed(sub, ls, VARLOG_ERR_RPC_DEADLINE_EXCEEDED, msg);
    }
}

/* Whether no log stream can still deliver a position below the least head: every one holds
 * a head or finished. */
static bool heads_complete(const varlog_subscription_t *sub)
{
    for (size_t i = 0; i < sub->n_ls; i++)
        if (!sub->ls[i]->has_head && !sub->ls[i]->finished)
            return false;
    return true;
}

static bool all_finished(const varlog_subscription_t *sub)
{
    if (sub->n_ls == 0) /* a topic without log streams yet: wait for one */
        return false;
    for (size_t i = 0; i < sub->n_ls; i++)
        if (!sub->ls[i]->finished)
            return false;
    return true;
}

/* ---- the step ------------------------------------------------------------------------------ */

/* Takes the news list (and publishes the counters) under mu; CLOSED when closing. */
static varlog_err_t take_news(varlog_subscription_t *sub, sub_ls_t **work)
{
    pthread_mutex_lock(&sub->mu);
    if (sub->closing) {
        pthread_mutex_unlock(&sub->mu);
        return VARLOG_ERR_CLOSED;
    }
    sub_ls_t *list = NULL;
    sub->news_count = 0;
    for (sub_ls_t *ls = sub->news; ls; ls = ls->next) {
        ls->queued = false;
        ls->work_reopen = ls->reopen;
        ls->reopen = false;
        ls->work_rpc = ls->pending_rpc;
        ls->work_end = ls->pending_end;
        ls->pending_rpc = NULL;
        ls->work = list;
        list = ls;
    }
    sub->news = NULL;
    pthread_mutex_unlock(&sub->mu);
    *work = list;
    return VARLOG_OK;
}

int64_t sub_check_interval_ms(const varlog_subscription_t *sub)
{
    int64_t stall = sub->c->conf->subscribe_stall_timeout_ms;
    int64_t iv = stall > 0 && stall / 4 < CHECK_INTERVAL_MAX_MS ? stall / 4 : CHECK_INTERVAL_MAX_MS;
    return iv > 0 ? iv : 1;
}

static void finish(varlog_subscription_t *sub)
{
    if (sub->result == VARLOG_OK) {
        sub->result = VARLOG_ERR_END;
        sub_outage_ended(sub);
    }
    sub_release_streams(sub); /* a node may keep a stream open past the end: cancel */
}

varlog_err_t sub_step(varlog_subscription_t *sub, int64_t deadline_ms, varlog_entry_t *out)
{
    if (sub->delivered) {
        sub_ls_t *ls = sub->delivered;
        sub->delivered = NULL;
        release_held(ls);
        pull(sub, ls);
    }
    for (;;) {
        sub_ls_t *work = NULL;
        varlog_err_t err = take_news(sub, &work);
        if (err != VARLOG_OK)
            return err;
        if (sub->result == VARLOG_OK && sub->wanted >= sub->end)
            finish(sub);
        if (sub->result != VARLOG_OK) {
            sub_release_streams(sub);
            return sub->result;
        }
        for (sub_ls_t *ls = work; ls; ls = ls->work) {
            if (ls->work_reopen) {
                ls->retrying = false;
                /* A stream the retry opened for an earlier window asks for what the merge
                 * passed already. */
                if (ls->work_rpc && !ls->rpc && ls->work_end == sub_range_end(sub)) {
                    ls->rpc = ls->work_rpc;
                    sub_stamp_opened(ls);
                } else
                    rpc_stream_destroy(ls->work_rpc);
                ls->work_rpc = NULL;
                if (!ls->rpc && !ls->finished)
                    sub_ls_open(sub, ls);
            }
            pull(sub, ls);
        }

        tq_item_t min;
        while (sub->result == VARLOG_OK && tq_peek_min(sub->heap, &min) == VARLOG_OK) {
            sub_ls_t *ls = (sub_ls_t *)min.val;
            if (min.glsn < sub->wanted) { /* cannot happen: pull drops them; kept for safety */
                tq_pop_min(sub->heap, NULL);
                ls->has_head = false;
                release_held(ls);
                pull(sub, ls);
                continue;
            }
            if (min.glsn == sub->wanted) {
                tq_pop_min(sub->heap, NULL);
                ls->has_head = false;
                sub->delivered = ls;
                metrics_series_consumed(ls->series, 1);
                if (sub->timing) {
                    sub->d_taken_ns = stats_now_ns();
                    sub->d_arrival_ns = ls->head_arrival_ns;
                    sub->d_queued_ns = ls->head_queued_ns;
                    sub->d_series = ls->series;
                }
                out->meta = ls->head.meta;
                atomic_store_explicit(&ls->pub_llsn, ls->head.meta.llsn + 1, memory_order_relaxed);
                out->meta.topic_id = sub->topic_id;
                out->meta.log_stream_id = ls->log_stream_id;
                if (sub->order == SUB_BY_LLSN)
                    out->meta.glsn = 0; /* a node does not send it; nothing may rely on it */
                out->data = ls->head.data;
                out->len = ls->head.len;
                sub->wanted = min.glsn + 1;
                sub->gap_gen = 0; /* a lookup in flight no longer answers for a gap */
                sub->blocked_since_ms = 0;
                bump(&sub->n_entries, 1);
                sub->quick_polls = 0;
                sub->since_sleep++;
                bump(&sub->n_bytes, ls->head.len);
                atomic_store_explicit(&sub->n_next, sub->wanted, memory_order_relaxed);
                if (sub->wanted >= sub->win_ahead_at)
                    sub_window_ahead(sub);
                return VARLOG_OK;
            }
            /* The wanted position is in no head. It may still come from a log stream without
             * one; when every log stream has a head or finished, none of them holds it. In
             * LLSN order (one log stream) it is gone; in GLSN order another log stream may
             * hold it (gap_resolve). */
            if (!heads_complete(sub)) {
                if (sub->blocked_since_ms == 0) /* stamped at the next clock read */
                    sub->blocked_since_ms = BLOCKED_UNSTAMPED;
                break;
            }
            if (sub->order == SUB_BY_GLSN && sub_gap_resolve(sub, min.glsn) == SUB_GAP_WAIT)
                break;
            sub->wanted = min.glsn;
            atomic_store_explicit(&sub->n_next, sub->wanted, memory_order_relaxed);
        }
        if (sub->result != VARLOG_OK)
            continue;
        /* Every log stream read ended short of the end (of the window): in GLSN order, a
         * log stream not read yet may hold the rest. */
        uint64_t range_end = sub_range_end(sub);
        if (sub->wanted >= range_end ||
            (tq_size(sub->heap) == 0 && all_finished(sub) &&
             (sub->order != SUB_BY_GLSN || sub_gap_resolve(sub, range_end) == SUB_GAP_SKIP))) {
            if (range_end < sub->end)
                sub_window_pass(sub, range_end);
            else
                finish(sub);
            continue;
        }
        /* What already came (a stream arms its next receive as the last one completes, so
         * messages streaming in are there): taken without a clock read or a sleep. Bounded,
         * so that a stream of messages the merge cannot use yet still lets the checks and
         * the caller's deadline run. */
        /* Not on a shared thread: its poller is the other subscriptions' too, and the thread
         * polls it itself once it looked at each. */
        if (sub->poller && !sub->shared && sub->quick_polls < QUICK_POLLS_MAX) {
            sub->quick_polls++;
            if (rpc_poller_poll_ready(sub->poller) != RPC_POLL_TIMEOUT)
                continue;
        }
        sub->quick_polls = 0;
        /* A shared thread reads the clock for its subscriptions' checks itself and passes
         * it when one is due: a read each time a subscription ran dry would be one per few
         * entries there. */
        if (sub->shared && sub->sh_now_ms == 0 && sub->blocked_since_ms != BLOCKED_UNSTAMPED)
            return VARLOG_ERR_TIMED_OUT;
        int64_t now = sub->shared && sub->sh_now_ms ? sub->sh_now_ms : wire_now_ms();
        if (sub->blocked_since_ms == BLOCKED_UNSTAMPED)
            sub->blocked_since_ms = now;
        if (now >= sub->next_check_ms) {
            sub->next_check_ms = now + sub_check_interval_ms(sub);
            sub->checks++;
            periodic_check(sub, now);
            continue;
        }
        err = sub_wait_news(sub, deadline_ms, now);
        if (err != VARLOG_OK)
            return err;
    }
}
