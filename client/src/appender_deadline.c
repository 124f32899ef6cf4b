/* The pipelined appender's bounds in time: the delivery deadline of every batch
 * (appender.delivery.timeout.ms, from its first call to its callback), and the batches that
 * wait for a log stream found unreachable, failed together with the cause rather than one
 * group per retry cycle. Runs on the appender's thread. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "appender_internal.h"

bool app_batch_expired(const app_batch_t *b, int64_t now_ms)
{
    return now_ms >= b->deadline_ms;
}

void app_batch_fail_expired(app_batch_t *b, const char *what, const char *last)
{
    const varlog_appender_t *app = b->app;
    bool tried = last && last[0];
    bool where = what && what[0];
    app_batch_fail(b, VARLOG_ERR_TIMED_OUT,
                   "appender.delivery.timeout.ms (%" PRId64
                   " ms) passed%s%s after %u attempt%s%s%s",
                   app->delivery_timeout_ms, where ? " " : "", where ? what : "", b->attempts,
                   b->attempts == 1 ? "" : "s", tried ? "; the last: " : "", tried ? last : "");
}

/* The batch's text of its last failed attempt, before it is overwritten; for a batch never
 * sent because no log stream of the topic took appends, that. */
static void last_attempt(const app_thread_state_t *ts, const app_batch_t *b, char *out, size_t size)
{
    if (b->attempts > 0)
        snprintf(out, size, "%s", b->errtext);
    else if (!ts->app->fixed_ls && ts->no_lane != VARLOG_OK)
        snprintf(out, size, "append to topic %d: %s", ts->app->topic_id, ts->no_lane_why);
    else
        out[0] = '\0';
}

int64_t app_expire_waiting_locked(app_thread_state_t *ts, int64_t now_ms)
{
    varlog_appender_t *app = ts->app;
    /* The ready list is in opening order, and so in deadline order (a retried batch goes
     * back to its place by opening order). */
    app_batch_t *b;
    while ((b = app->ready.head) && app_batch_expired(b, now_ms)) {
        blist_pop(&app->ready);
        b->state = SLOT_OUT;
        char last[sizeof(b->errtext)];
        last_attempt(ts, b, last, sizeof(last));
        app_batch_fail_expired(b, "before the batch could be sent", last);
        app_settle(ts, b);
    }
    int64_t next = app->ready.head ? app->ready.head->deadline_ms : INT64_MAX;
    /* Batches waiting on the engine (a backoff, then a lookup that a dead metadata
     * repository can keep busy for a while) are taken back at their deadline, as close takes
     * them back; the task then finds them gone. */
    for (app_retry_t *r = app->retries; r; r = r->next) {
        if (r->taken || !r->batches.head)
            continue;
        int64_t due = INT64_MAX;
        for (const app_batch_t *x = r->batches.head; x; x = x->next)
            if (x->deadline_ms < due)
                due = x->deadline_ms;
        if (now_ms < due) {
            if (due < next)
                next = due;
            continue;
        }
        r->taken = true;
        if (r->lane)
            r->lane->held--;
        batch_list_t back = {0};
        if (r->resolve) { /* what its passes learnt decides, not only the deadline */
            app_resolve_expire_locked(ts, r, now_ms, &back);
            app_ready_return_locked(app, &back);
            continue;
        }
        while ((b = blist_pop(&r->batches))) {
            if (app_batch_expired(b, now_ms)) {
                b->state = SLOT_OUT;
                char last[sizeof(b->errtext)];
                last_attempt(ts, b, last, sizeof(last));
                if (r->resolve && r->note[0]) {
                    size_t len = strlen(last);
                    snprintf(last + len, sizeof(last) - len, "; read back: %s", r->note);
                }
                app_batch_fail_expired(b,
                                       r->resolve ? "while its fate was read back from the log"
                                                  : "while the batch waited to be sent again",
                                       last);
                app_settle(ts, b);
            } else {
                blist_push(&back, b);
            }
        }
        app_ready_return_locked(app, &back);
    }
    b = app->open;
    if (b && b->n_records > 0) {
        if (app_batch_expired(b, now_ms)) {
            app->open = NULL;
            b->state = SLOT_OUT;
            app_batch_fail_expired(b, "before the batch could be sent", NULL);
            app_settle(ts, b);
        } else if (b->deadline_ms < next) {
            next = b->deadline_ms;
        }
    }
    return next;
}

int64_t app_inflight_deadline(const app_lane_t *lane)
{
    if (lane->inflight_sorted)
        return lane->inflight.head ? lane->inflight.head->deadline_ms : INT64_MAX;
    int64_t due = INT64_MAX;
    for (const app_batch_t *b = lane->inflight.head; b; b = b->next)
        if (b->deadline_ms < due)
            due = b->deadline_ms;
    return due;
}

/* Whether another lane than down could take batches now or soon: topic mode only. */
static bool other_lane_usable(const app_thread_state_t *ts, const app_lane_t *down)
{
    const varlog_appender_t *app = ts->app;
    for (size_t i = 0; i < app->n_lanes; i++) {
        const app_lane_t *l = app->lanes[i];
        if (l != down && app_lane_allowed(ts, l) && (l->st.rpc || l->failures == 0))
            return true;
    }
    return false;
}

void app_fail_behind_unreachable(app_thread_state_t *ts, app_lane_t *lane, varlog_err_t err,
                                 const char *cause)
{
    varlog_appender_t *app = ts->app;
    if (!app->fixed_ls && other_lane_usable(ts, lane))
        return;
    batch_list_t behind = {0};
    /* The lane's own outbox (bound mode: the only one) holds batches picked for it. */
    for (size_t i = 0; i < app->n_lanes; i++)
        if (app->lanes[i] == lane || !app->fixed_ls)
            blist_merge(&behind, &app->outboxes[i]);
    pthread_mutex_lock(&app->mu);
    blist_merge(&behind, &app->ready);
    if (app->open && app->open->n_records > 0) {
        blist_push(&behind, app->open);
        app->open = NULL;
    }
    pthread_mutex_unlock(&app->mu);
    app_batch_t *b;
    while ((b = blist_pop(&behind))) {
        b->state = SLOT_OUT;
        app_batch_fail(b, err,
                       "not sent: log stream %d of topic %d is unreachable%s, and a batch ahead "
                       "of this one failed every attempt: %s",
                       lane->ls, app->topic_id,
                       app->fixed_ls ? "" : " (as is every other log stream of the topic)", cause);
        app_settle(ts, b);
    }
}
