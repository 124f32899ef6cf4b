/* The appender's failures: a stream's end settles or retries every batch still on it, and
 * retries wait on the client's engine (a backoff, a lookup) before going back to the ready
 * list. Runs on the appender's thread, except the engine's callbacks. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "appender_internal.h"
#include "outcome.h"
#include "wire.h"

void app_batch_fail(app_batch_t *b, varlog_err_t err, const char *fmt, ...)
{
    b->err = err;
    b->outcome = b->maybe ? VARLOG_MAYBE_APPENDED : VARLOG_NOT_APPENDED;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->errtext, sizeof(b->errtext), fmt, ap);
    va_end(ap);
}

/* ---- retries ------------------------------------------------------------------------------- */

void app_retry_unlink_locked(varlog_appender_t *app, app_retry_t *r)
{
    for (app_retry_t **p = &app->retries; *p; p = &(*p)->next) {
        if (*p == r) {
            *p = r->next;
            return;
        }
    }
}

/* Puts the batches back in front of newer ones, whatever the task's result: the thread
 * fails them if the appender is stopping. */
static void retry_after(void *arg)
{
    app_retry_t *r = arg;
    varlog_appender_t *app = r->app;
    pthread_mutex_lock(&app->mu);
    if (!r->taken) {
        r->taken = true;
        app_ready_return_locked(app, &r->batches);
        if (r->lane)
            r->lane->held--;
    }
    app_retry_unlink_locked(app, r);
    app_wake_thread_locked(app);
    pthread_mutex_unlock(&app->mu);
}

static void retry_release(void *arg)
{
    app_retry_t *r = arg;
    varlog_appender_t *app = r->app;
    free(r);
    app_unref(app);
}

/* A lane's pause after its n-th consecutive failure (n >= 1): the n-th delay of the appends'
 * retry policy, before jitter. */
static int64_t backoff_ns(const varlog_appender_t *app, unsigned failures)
{
    vq_retry_t policy = append_retry_policy(app->c, 1);
    return vq_backoff_ns(&policy, failures ? failures - 1 : 0, NULL);
}

/* Hands batches to the engine: a backoff, a lookup, then back to the ready list. In bound
 * mode the lane waits for them so that they keep their place before newer batches. Errors
 * (the caller settles the batches): client_submit_lookup_retry's, CLOSED when the client is
 * closing. */
static varlog_err_t retry_submit(varlog_appender_t *app, app_lane_t *lane, batch_list_t *batches)
{
    varlog_client_t *c = app->c;
    app_retry_t *r = calloc(1, sizeof(*r));
    if (!r)
        return VARLOG_ERR_NOMEM;
    r->app = app;
    r->lane = app->fixed_ls ? lane : NULL;
    r->batches = *batches;
    int64_t delay = backoff_ns(app, lane->failures);
    /* Back in time to be failed at the deadline rather than after the whole backoff. */
    int64_t now = wire_now_ms();
    for (const app_batch_t *b = batches->head; b; b = b->next) {
        if (b->deadline_ms == INT64_MAX) /* no delivery bound */
            continue;
        int64_t left_ns = b->deadline_ms > now ? (b->deadline_ms - now) * 1000000 : 0;
        if (left_ns < delay)
            delay = left_ns;
    }
    app_ref(app);
    pthread_mutex_lock(&app->mu);
    r->next = app->retries;
    app->retries = r;
    if (r->lane)
        lane->held++;
    app->stats.batches_retried += batches->n;
    pthread_mutex_unlock(&app->mu);
    size_t n_batches = batches->n;
    varlog_err_t err = client_submit_lookup_retry(c, delay, r, retry_after, retry_release);
    if (err == VARLOG_OK) {
        atomic_fetch_add_explicit(&c->cstats.retries, n_batches, memory_order_relaxed);
        *batches = (batch_list_t){0};
        return VARLOG_OK;
    }
    pthread_mutex_lock(&app->mu);
    app_retry_unlink_locked(app, r);
    if (r->lane)
        lane->held--;
    app->stats.batches_retried -= batches->n;
    pthread_mutex_unlock(&app->mu);
    free(r);
    atomic_fetch_sub(&app->refs, 1);
    return err;
}

/* ---- a stream's end ------------------------------------------------------------------------ */

/* A batch on a stream the thread cancelled because a batch on it reached its delivery
 * deadline: the client ended the attempt, not the node, so nothing here implicates the log
 * stream. The batch whose deadline passed fails TIMED_OUT; one whose deadline has not goes
 * back to the ready list (in front of newer ones, by its order) while it may be sent again,
 * and otherwise fails with a text naming the deadline that ended its stream. */
static void settle_cancelled_at_deadline(app_thread_state_t *ts, app_lane_t *lane, app_batch_t *b,
                                         bool maybe_sent, int64_t now, const char *where,
                                         batch_list_t *again, batch_list_t *resolve)
{
    varlog_appender_t *app = ts->app;
    b->maybe |= maybe_sent;
    if (app_batch_expired(b, now)) {
        app_batch_fail_expired(b, where, "the stream was cancelled at the delivery deadline");
        app_settle(ts, b);
        return;
    }
    char head[160];
    snprintf(head, sizeof(head),
             "append of %" PRIu32 " records to log stream %d of topic %d at %s (attempt %u)",
             b->n_records, lane->ls, app->topic_id, lane->target ? lane->target : "?", b->attempts);
    const char *why = "cancelled by the appender when another batch on the stream reached "
                      "appender.delivery.timeout.ms";
    bool retry_ok = !b->maybe || app->retry_maybe;
    if (b->attempts < app->max_attempts && retry_ok) {
        snprintf(b->errtext, sizeof(b->errtext), "%s: %s", head, why);
        b->err = VARLOG_ERR_RPC_CANCELLED;
        blist_push(again, b);
        return;
    }
    app_batch_fail(b, VARLOG_ERR_RPC_CANCELLED,
                   "%s: %s (this batch had %" PRId64 " ms left); not sent again: %s", head, why,
                   b->deadline_ms - now,
                   retry_ok ? "its append.retries are used up"
                            : "it may be stored (append.retry.maybe.appended is false)");
    if (!retry_ok && app->resolve)
        blist_push(resolve, b); /* read back from the log within its deadline */
    else
        app_settle(ts, b);
}

/* Batches the node did not refuse, back to the ready list without a backoff. */
static void requeue(varlog_appender_t *app, batch_list_t *again)
{
    if (!again->head)
        return;
    size_t n = again->n;
    pthread_mutex_lock(&app->mu);
    app_ready_return_locked(app, again);
    app->stats.batches_retried += n;
    pthread_mutex_unlock(&app->mu);
    atomic_fetch_add_explicit(&app->c->cstats.retries, n, memory_order_relaxed);
}

/* Settles or retries every batch still on lane's stream, then drops the stream. err and
 * msg are the stream's end (its final status, or a local failure). */
void app_lane_failed(app_thread_state_t *ts, app_lane_t *lane, varlog_err_t err, const char *msg)
{
    varlog_appender_t *app = ts->app;
    varlog_client_t *c = app->c;
    bool closing = ts->stopping;
    size_t sent = lane->st.rpc ? rpc_stream_sent(lane->st.rpc, APP_SEND_SETTLE_MS) : 0;
    bool timed_out = lane->st.cancel == APP_CANCEL_ATTEMPT;
    if (timed_out && !closing)
        err = VARLOG_ERR_RPC_DEADLINE_EXCEEDED;
    /* Our own cancel at a delivery deadline ended the stream (a failure of its own that ended
     * it first is judged as any other). */
    bool at_deadline =
        lane->st.cancel == APP_CANCEL_DELIVERY && err == VARLOG_ERR_RPC_CANCELLED && !closing;
    /* The close's own cancel (or its giving up on a stream that would not end), not the
     * transport's: say so rather than "rpc cancelled". */
    bool closed_by_us = closing && (err == VARLOG_ERR_RPC_CANCELLED || err == VARLOG_ERR_CLOSED);
    int64_t now = wire_now_ms();
    char where[160];
    snprintf(where, sizeof(where),
             "while the batch was in flight to log stream %d of topic %d at %s", lane->ls,
             app->topic_id, lane->target ? lane->target : "?");
    /* Nothing reached the node and a batch has no attempt left: the log stream is
     * unreachable. Every batch on the stream then gives up with it, so that none older is
     * retried while a newer one fails (callbacks keep call order per log stream), and those
     * waiting to be sent fail with it below. */
    bool unreachable = false;
    for (const app_batch_t *x = lane->inflight.head; x && !closing; x = x->next)
        unreachable |= err == VARLOG_ERR_RPC_UNAVAILABLE && sent <= lane->st.answered &&
                       x->attempts >= app->max_attempts;
    batch_list_t retry = {0}, again = {0}, resolve = {0};
    bool deny = false;
    size_t i = 0;
    uint64_t left_records = 0, left_bytes = 0;
    char cause[sizeof(((app_batch_t *)0)->errtext)] = "";
    app_batch_t *b;
    while ((b = blist_pop(&lane->inflight))) {
        left_records += b->n_records;
        left_bytes += b->bytes;
        bool maybe_sent = lane->st.answered + i++ < sent;
        if (at_deadline) {
            settle_cancelled_at_deadline(ts, lane, b, maybe_sent, now, where, &again, &resolve);
            continue;
        }
        append_verdict_t v = append_classify(err, msg, maybe_sent, closing, false);
        b->maybe |= v.ambiguous;
        deny |= v.deny;
        char text[sizeof(b->errtext)];
        snprintf(text, sizeof(text),
                 "append of %" PRIu32 " records to log stream %d of topic %d at %s (attempt %u): "
                 "%s%s%s%s",
                 b->n_records, lane->ls, app->topic_id, lane->target ? lane->target : "?",
                 b->attempts,
                 closed_by_us ? "the appender closed before the batch was answered"
                              : varlog_err_str(err),
                 msg[0] && !closed_by_us ? ": " : "", closed_by_us ? "" : msg,
                 timed_out ? " (no answer within append.attempt.timeout.ms)" : "");
        if (!closing && app_batch_expired(b, now)) {
            app_batch_fail_expired(b, where, text);
            app_settle(ts, b);
        } else if (!closing && !unreachable && v.retriable && b->attempts < app->max_attempts &&
                   (!b->maybe || app->retry_maybe)) {
            snprintf(b->errtext, sizeof(b->errtext), "%s", text);
            b->err = v.err;
            blist_push(&retry, b);
        } else if (!closing && b->maybe && app->resolve) {
            /* Its fate is read back from the log before its callback (appender_resolve.c). */
            app_batch_fail(b, v.err, "%s", text);
            blist_push(&resolve, b);
        } else {
            if (unreachable && !cause[0])
                snprintf(cause, sizeof(cause), "%s", text);
            app_batch_fail(b, v.err, "%s", text);
            app_settle(ts, b);
        }
    }
    atomic_fetch_sub(&app->inflight_batches, i);
    atomic_fetch_sub_explicit(&app->inflight_records, left_records, memory_order_relaxed);
    atomic_fetch_sub_explicit(&app->inflight_bytes, left_bytes, memory_order_relaxed);
    /* Read-back first: it holds the lane before anything returns to the ready list. Not
     * started (closing, memory): the batches keep MAYBE_APPENDED, as without it. */
    if (resolve.head && !app_resolve_submit(ts, lane, &resolve))
        while ((b = blist_pop(&resolve)))
            app_settle(ts, b);
    /* Destroyed last: msg may be the stream's status text. */
    rpc_stream_t *ended = app_lane_drop_stream(lane);
    requeue(app, &again);
    if (!at_deadline) { /* our own cancel is no failure of the log stream's: no backoff */
        lane->failures++;
        lane->reopen_ms = wire_now_ms() + backoff_ns(app, lane->failures) / 1000000;
    }
    int64_t ttl = c->conf->append_deny_ttl_ms;
    if (deny && !closing && ttl > 0 &&
        allowlist_deny(&c->allow, app->topic_id, lane->ls, wire_now_ms() + ttl)) {
        atomic_fetch_add(&c->stats.denials, 1);
        log_line(&c->log, VARLOG_LOG_NOTICE, VARLOG_LOG_CTX_APPEND,
                 "log stream %d of topic %d denied for %lld ms: appender stream failed: %s%s%s",
                 lane->ls, app->topic_id, (long long)ttl, varlog_err_str(err), msg[0] ? ": " : "",
                 msg);
    }
    if (unreachable)
        app_fail_behind_unreachable(ts, lane, err, cause);
    varlog_err_t rerr = retry.head ? retry_submit(app, lane, &retry) : VARLOG_OK;
    while ((b = blist_pop(&retry))) {
        /* The code and the text of one moment: why the batch is not sent again, after the
         * attempt that failed. */
        char last[sizeof(b->errtext)];
        snprintf(last, sizeof(last), "%s", b->errtext);
        app_batch_fail(b, rerr, "%s: the batch was not sent again; its last attempt: %s",
                       rerr == VARLOG_ERR_CLOSED       ? "the client is closing"
                       : rerr == VARLOG_ERR_QUEUE_FULL ? "the client's retry engine is at its "
                                                         "task limit"
                                                       : varlog_err_str(rerr),
                       last);
        app_settle(ts, b);
    }
    rpc_stream_destroy(ended);
}
