/* The appender's settle path. Every batch that gets its outcome (an answer, a failed stream,
 * a deadline, the close) goes through app_settle into one list, kept in call order (by seq),
 * and callbacks run from its head, as far as no older batch of the same log stream is still
 * on its way to an outcome. So a round that settles batches from several places (a cancelled
 * stream's end read a round after the younger batches waiting behind it expired, a retry
 * task's batch taken back in the same pass as the ready list) still runs their callbacks in
 * call order (issue 34). Runs on the appender's thread. */
#include <stdint.h>

#include "appender_internal.h"
#include "ticks.h"
#include "wire.h"

void app_settle(app_thread_state_t *ts, app_batch_t *b)
{
    batch_list_t *l = &ts->settled;
    if (!l->tail || l->tail->seq <= b->seq) { /* the common case: settled in call order */
        blist_push(l, b);
        return;
    }
    app_batch_t **p = &l->head;
    while ((*p)->seq <= b->seq)
        p = &(*p)->next;
    b->next = *p;
    *p = b;
    l->n++;
}

static uint64_t min_seq(uint64_t m, const app_batch_t *b)
{
    return b && b->seq < m ? b->seq : m;
}

/* The oldest batch not settled yet whose outcome must come before younger ones' (UINT64_MAX:
 * none). Bound mode: every batch of the appender, wherever it is (in flight, in a lane's
 * outbox, in a retry task, ready, open): the log stream's calls have their callbacks in call
 * order, and the oldest is settled no later than its deadline, which comes no later than any
 * younger one's (deadlines follow the opening order). Topic mode: the batches in flight on a
 * stream the thread cancelled, whose end settles them in a moment; a batch waiting to be sent
 * belongs to no log stream yet, and one sent again after a failure is stored after those
 * already sent to its new log stream (varlog/appender.h). Called with mu (ready, open, the
 * retry tasks); the lanes and outboxes are the thread's. */
static uint64_t barrier_locked(const app_thread_state_t *ts)
{
    const varlog_appender_t *app = ts->app;
    uint64_t m = UINT64_MAX;
    for (size_t i = 0; i < app->n_lanes; i++) {
        const app_lane_t *lane = app->lanes[i];
        if (!app->fixed_ls && lane->st.cancel == APP_CANCEL_NONE)
            continue;
        for (const app_batch_t *b = lane->inflight.head; b; b = b->next)
            m = min_seq(m, b);
        if (app->fixed_ls)
            m = min_seq(m, app->outboxes[i].head);
    }
    if (!app->fixed_ls)
        return m;
    for (const app_retry_t *r = app->retries; r; r = r->next) {
        for (const app_batch_t *b = r->taken ? NULL : r->batches.head; b; b = b->next)
            m = min_seq(m, b);
    }
    m = min_seq(m, app->ready.head);
    m = min_seq(m, app->resolved.head); /* a read-back task's, for the thread to settle */
    if (app->open && app->open->n_records > 0)
        m = min_seq(m, app->open);
    return m;
}

bool app_settled_due_locked(const app_thread_state_t *ts)
{
    return ts->settled.head && ts->settled.head->seq < barrier_locked(ts);
}

/* Runs the callbacks of the batches of settled, in its order, then gives their room back.
 * Without mu. */
static void run_callbacks(varlog_appender_t *app, batch_list_t *settled)
{
    if (!settled->head)
        return;
    uint64_t ok_calls = 0, failed_calls = 0, records = 0;
    client_stats_t *st = &app->c->cstats;
    varlog_append_result_t *res = vq_objpool_get(app->results);
    varlog_append_result_t fallback; /* the pool could not allocate: still one callback each */
    if (!res)
        res = &fallback;
    for (app_batch_t *b = settled->head; b; b = b->next) {
        res->err = b->err;
        res->outcome = b->err == VARLOG_OK ? VARLOG_APPENDED : b->outcome;
        res->errtext = b->err == VARLOG_OK ? "" : b->errtext;
        res->metas = NULL;
        /* Statistics per batch, before its callbacks: one clock read, and the counters are
         * up to date by the time a callback looks at them. */
        metrics_hist_t *send_hist;
        if (b->err == VARLOG_OK) {
            metrics_series_t *ms = metrics_series_use(&st->metrics, app->topic_id,
                                                      b->metas[0].log_stream_id, METRICS_USE_SEND);
            atomic_fetch_add_explicit(&ms->sent_records, b->n_records, memory_order_relaxed);
            send_hist = &ms->send;
        } else {
            metrics_failure_t *mf = metrics_failure_get(&st->metrics, app->topic_id, b->err);
            atomic_fetch_add_explicit(&mf->records, b->n_records, memory_order_relaxed);
            send_hist = &mf->send;
        }
        if (app->timed) {
            /* One atomic add per run of calls in one bucket, not several per call: a
             * batch's calls, appended one after the other, fall in few buckets. */
            ticks_scale_t now = ticks_scale();
            vhist_run_t latency;
            metrics_hist_run_t send;
            vhist_run_begin(&latency, b->err == VARLOG_OK ? &st->latency : NULL);
            metrics_hist_run_begin(&send, send_hist);
            for (uint32_t i = 0; i < b->n_calls; i++) {
                int64_t ns = ticks_ns_since(&now, b->calls[i].t_ticks);
                vhist_run_add(&latency, ns);
                metrics_hist_run_add(&send, ns);
            }
            vhist_run_end(&latency);
            metrics_hist_run_end(&send);
        }
        if (b->err == VARLOG_OK)
            stats_add_log_stream(st, app->topic_id, b->metas[0].log_stream_id, b->n_records,
                                 b->bytes);
        stats_add_outcome(st, res->outcome, b->n_calls, b->n_records, b->bytes);
        for (uint32_t i = 0; i < b->n_calls; i++) {
            const app_call_t *call = &b->calls[i];
            res->n = call->n;
            if (b->err == VARLOG_OK) {
                res->metas = &b->metas[call->first];
                records += call->n;
            }
            call->cb(res, call->opaque);
        }
        if (b->err == VARLOG_OK)
            ok_calls += b->n_calls;
        else
            failed_calls += b->n_calls;
    }
    if (res != &fallback)
        vq_objpool_put(app->results, res);
    /* Drop our reference to the bytes first: if gRPC let go already, the release runs here
     * and the slot is freed below; if not, the release frees it later. */
    for (app_batch_t *b = settled->head; b; b = b->next) {
        if (atomic_load(&b->has_body))
            grpc_slice_unref(b->body);
    }
    pthread_mutex_lock(&app->mu);
    app_batch_t *b;
    bool flushed = false;
    uint64_t held_records = 0, held_bytes = 0;
    while ((b = blist_pop(settled))) {
        if (app->flush_waiters && app_flush_settled_locked(app, b->seq))
            flushed = true;
        app->pending_calls -= b->n_calls;
        app->pending_records -= b->n_records;
        app->pending_bytes -= b->bytes;
        held_records += b->n_records;
        held_bytes += b->bytes;
        if (atomic_load(&b->has_body)) {
            b->settle_pending = true;
        } else {
            app_slot_free_locked(app, b);
        }
    }
    app->stats.calls_appended += ok_calls;
    app->stats.calls_failed += failed_calls;
    app->stats.records_appended += records;
    /* Before a flush waiting for these calls is woken: once it returns, nothing of them
     * holds the client-wide bound either. Its mu is a leaf after this one. */
    app_budget_release(app->c, held_records, held_bytes);
    app_wake_producers_locked(app);
    if (flushed)
        pthread_cond_broadcast(&app->settled);
    pthread_mutex_unlock(&app->mu);
}

void app_run_settled(app_thread_state_t *ts)
{
    varlog_appender_t *app = ts->app;
    /* Every round passes here, at least every few hundred milliseconds even when idle: a
     * burst's slots go back after it however quiet the appender stays. */
    if (atomic_load_explicit(&app->trim_at_ms, memory_order_relaxed) != INT64_MAX)
        app_slots_trim(app, wire_now_ms());
    if (!ts->settled.head)
        return;
    pthread_mutex_lock(&app->mu);
    uint64_t barrier = barrier_locked(ts);
    pthread_mutex_unlock(&app->mu);
    batch_list_t due = {0};
    while (ts->settled.head && ts->settled.head->seq < barrier)
        blist_push(&due, blist_pop(&ts->settled));
    run_callbacks(app, &due);
}

void app_run_all_settled(app_thread_state_t *ts)
{
    run_callbacks(ts->app, &ts->settled);
}
