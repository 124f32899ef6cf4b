/* The pipelined appender's thread: it closes lingering batches, hands them to lanes (one
 * Append stream per log stream), sends them, matches answers in order, settles failed
 * streams, sends retries to the engine, and runs every callback. See appender_internal.h
 * for who owns what. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>

#include "log_io_codec.h"
#include "appender_internal.h"
#include "snpb/log_io.pb-c.h"
#include "wire.h"

/* Topic mode: how often the thread looks for a new metadata version while idle. */
#define METADATA_POLL_MS 200

/* ---- lanes --------------------------------------------------------------------------------- */

app_lane_t *app_lane_new(varlog_appender_t *app, int32_t ls)
{
    app_lane_t *lane = calloc(1, sizeof(*lane));
    if (!lane)
        return NULL;
    lane->app = app;
    lane->ls = ls;
    atomic_init(&lane->readable, false);
    return lane;
}

rpc_stream_t *app_lane_drop_stream(app_lane_t *lane)
{
    rpc_stream_t *s = lane->st.rpc;
    lane->st = (app_stream_t){0};
    return s;
}

void app_lane_free(app_lane_t *lane)
{
    if (!lane)
        return;
    free(lane->target);
    free(lane);
}

/* The completion queue this thread runs (NULL on threads that run no appender). */
static _Thread_local const rpc_poller_t *tl_poller;

void app_thread_begins(rpc_poller_t *poller)
{
    tl_poller = poller;
}

/* The stream's notify hook, under the stream's lock: on the appender's thread as its poll
 * runs the stream's completions (it looks at the flag when the poll returns), or on a thread
 * that ended the stream (the client closing), which must wake it. */
static void lane_notify(void *arg)
{
    app_lane_t *lane = arg;
    varlog_appender_t *app = lane->app;
    atomic_store(&lane->readable, true);
    if (tl_poller == app->poller)
        return; /* the thread looks at every lane's flag as its poll returns */
    pthread_mutex_lock(&app->mu);
    app_wake_thread_locked(app);
    pthread_mutex_unlock(&app->mu);
}

static size_t lane_load(const app_lane_t *lane, const batch_list_t *outbox)
{
    return lane->inflight.n + outbox->n;
}

/* ---- sending ------------------------------------------------------------------------------- */

/* Opens lane's stream to the log stream's primary in the current metadata. */
static varlog_err_t lane_open(app_thread_state_t *ts, app_lane_t *lane, char *why, size_t why_size)
{
    varlog_appender_t *app = ts->app;
    varlog_client_t *c = app->c;
    md_view_t *v = md_current(c);
    const md_log_stream_t *l = md_view_log_stream(v, app->topic_id, lane->ls);
    varlog_err_t err = VARLOG_OK;
    if (!l) {
        err = VARLOG_ERR_UNKNOWN_LOG_STREAM;
        snprintf(why, why_size, "log stream %d of topic %d is not in the metadata", lane->ls,
                 app->topic_id);
    } else if (!l->primary) {
        err = VARLOG_ERR_RPC_UNAVAILABLE;
        snprintf(why, why_size, "log stream %d of topic %d: its primary has no known address",
                 lane->ls, app->topic_id);
    } else if (!lane->target || strcmp(lane->target, l->primary) != 0) {
        free(lane->target);
        lane->target = strdup(l->primary);
        if (!lane->target) {
            err = VARLOG_ERR_NOMEM;
            snprintf(why, why_size, "out of memory");
        }
    }
    md_view_unref(v);
    if (err != VARLOG_OK)
        return err;
    rpc_stream_opts_t so = {.kind = RPC_STREAM_BIDI,
                            .response = &varlog__snpb__append_response__descriptor,
                            .recv_window = app->depth + 1,
                            .timeout_ms = -1,
                            .notify = lane_notify,
                            .notify_arg = lane,
                            .poller = app->poller};
    rpc_stream_t *s = NULL;
    err = rpc_stream_open(c->rpc, lane->target, SN_PATH_APPEND, &so, NULL, &s);
    if (err != VARLOG_OK) {
        snprintf(why, why_size, "could not open an Append stream to %s", lane->target);
        return err;
    }
    lane->st = (app_stream_t){.rpc = s};
    /* What the client's other appends stored there bounds where ours can be from below. */
    uint64_t confirmed = allowlist_confirmed(&c->allow, app->topic_id, lane->ls);
    if (confirmed > lane->last_llsn)
        lane->last_llsn = confirmed;
    pthread_mutex_lock(&app->mu);
    app->stats.streams_opened++;
    pthread_mutex_unlock(&app->mu);
    return VARLOG_OK;
}

static void lane_drain(app_thread_state_t *ts, app_lane_t *lane, int64_t timeout_ms);

/* The request of a batch with referenced records (varlog_appender_append_ref): the head,
 * then the buffer's stretches between its gaps and each record's bytes from where the
 * caller has them. Every piece but the inlined head shares the body's reference count, so
 * gRPC's last reference to any of them is the body's release, after which nothing reads the
 * caller's bytes (app_slot_free_locked runs the calls' release then). */
static varlog_err_t send_pieces(app_thread_state_t *ts, rpc_stream_t *rpc, const uint8_t *head,
                                size_t head_len, const app_batch_t *b)
{
    size_t need = 2 * (size_t)b->n_refs + 2;
    if (need > ts->pieces_cap) {
        grpc_slice *p = realloc(ts->pieces, need * sizeof(*p));
        if (!p)
            return VARLOG_ERR_NOMEM;
        ts->pieces = p;
        ts->pieces_cap = need;
    }
    grpc_slice *p = ts->pieces;
    size_t n = 0, at = 0;
    p[n++] = grpc_slice_from_copied_buffer((const char *)head, head_len);
    for (uint32_t i = 0; i < b->n_refs; i++) {
        const app_ref_t *r = &b->refs[i];
        if (r->off > at)
            p[n++] = grpc_slice_sub_no_ref(b->body, at, r->off);
        grpc_slice bytes = b->body; /* its reference count, the caller's bytes */
        bytes.data.refcounted.bytes = (uint8_t *)(uintptr_t)r->data;
        bytes.data.refcounted.length = r->len;
        p[n++] = bytes;
        at = r->off + r->len;
    }
    if (b->len > at)
        p[n++] = grpc_slice_sub_no_ref(b->body, at, b->len);
    varlog_err_t err = rpc_stream_send_slices(rpc, p, n);
    grpc_slice_unref(p[0]);
    return err;
}

static void lane_send(app_thread_state_t *ts, app_lane_t *lane, batch_list_t *outbox)
{
    varlog_appender_t *app = ts->app;
    if (!outbox->head)
        return;
    /* The stream may have ended since the round's plan gave the lane this outbox (in the
     * drain after a sleep on wake, in a poll behind a slow round): learn that before riding
     * on it. An end that costs batches holds the lane for their retry, or makes it back off:
     * the outbox then goes back to the ready list, behind those batches, for the next plan. */
    if (lane->st.rpc && atomic_load(&lane->readable)) {
        lane_drain(ts, lane, 0);
        if (!lane->st.rpc) {
            pthread_mutex_lock(&app->mu);
            app_ready_return_locked(app, outbox);
            pthread_mutex_unlock(&app->mu);
            return;
        }
    }
    char why[200];
    varlog_err_t err = lane->st.rpc ? VARLOG_OK : lane_open(ts, lane, why, sizeof(why));
    uint8_t head[CODEC_HEAD_MAX];
    size_t head_len = codec_put_head(head, app->topic_id, lane->ls);
    int64_t now = wire_now_ms();
    size_t n = 0;
    bool broken = false;
    app_batch_t *b;
    uint64_t n_records = 0, n_bytes = 0;
    while ((b = blist_pop(outbox))) {
        b->attempts++;
        b->sent_ms = now;
        if (!lane->inflight.tail)
            lane->inflight_sorted = true;
        else if (b->deadline_ms < lane->inflight.tail->deadline_ms)
            lane->inflight_sorted = false;
        blist_push(&lane->inflight, b);
        n++;
        n_records += b->n_records;
        n_bytes += b->bytes;
        if (err != VARLOG_OK || broken)
            continue;
        if (!atomic_load(&b->has_body)) {
            app_ref(app);
            b->body = grpc_slice_new_with_user_data(b->buf, b->len, app_body_released, b);
            atomic_store(&b->has_body, true);
        }
        varlog_err_t sent = b->n_refs
                                ? send_pieces(ts, lane->st.rpc, head, head_len, b)
                                : rpc_stream_send_shared(lane->st.rpc, head, head_len, b->body);
        if (sent != VARLOG_OK)
            broken = true; /* the stream failed: its end settles this batch and the rest */
    }
    atomic_fetch_add(&app->inflight_batches, n);
    atomic_fetch_add_explicit(&app->inflight_records, n_records, memory_order_relaxed);
    atomic_fetch_add_explicit(&app->inflight_bytes, n_bytes, memory_order_relaxed);
    if (err != VARLOG_OK) {
        /* No stream: nothing was sent, and the batches go through the same verdicts as a
         * failed stream's. */
        if (err == VARLOG_ERR_UNKNOWN_LOG_STREAM && !app->fixed_ls)
            lane->gone = true;
        app_lane_failed(ts, lane, err, why);
        return;
    }
    pthread_mutex_lock(&app->mu);
    app->stats.batches_sent += n;
    pthread_mutex_unlock(&app->mu);
    if (broken)
        rpc_stream_cancel(lane->st.rpc);
}

/* ---- answers ------------------------------------------------------------------------------- */

/* Matches every answer waiting on lane's stream with its batch, and settles the stream if it
 * ended. */
static void lane_drain(app_thread_state_t *ts, app_lane_t *lane, int64_t timeout_ms)
{
    varlog_appender_t *app = ts->app;
    atomic_store(&lane->readable, false);
    while (lane->st.rpc) {
        grpc_byte_buffer *bb = NULL;
        varlog_err_t err = rpc_stream_recv_buffer(lane->st.rpc, timeout_ms, &bb);
        if (err == VARLOG_ERR_TIMED_OUT && ts->stopping)
            err = VARLOG_ERR_CLOSED; /* a cancelled stream that does not end: give up on it */
        if (err == VARLOG_ERR_TIMED_OUT)
            return;
        if (err != VARLOG_OK) {
            const rpc_status_t *st = rpc_stream_status(lane->st.rpc);
            const char *msg = st && st->message ? st->message : "";
            if (err == VARLOG_ERR_END)
                msg = "the stream ended before every request was answered";
            if (lane->inflight.head || ts->stopping) {
                app_lane_failed(ts, lane, err, msg);
            } else {
                /* Nothing was riding on it: the next batch opens a new stream, and only a
                 * failure that costs a batch counts against the log stream. A cancel of
                 * ours whose batches were all answered before its end ends here too. */
                rpc_stream_destroy(app_lane_drop_stream(lane));
            }
            return;
        }
        app_batch_t *b = blist_pop(&lane->inflight);
        if (!b) {
            grpc_byte_buffer_destroy(bb);
            rpc_stream_fail_decode(lane->st.rpc); /* an answer to nothing: the pairing is lost */
            continue;
        }
        atomic_fetch_sub(&app->inflight_batches, 1);
        atomic_fetch_sub_explicit(&app->inflight_records, b->n_records, memory_order_relaxed);
        atomic_fetch_sub_explicit(&app->inflight_bytes, b->bytes, memory_order_relaxed);
        size_t len = 0;
        const uint8_t *p = wire_flatten(bb, &app->scratch, &len);
        char why[160] = "out of memory for an answer";
        varlog_err_t derr =
            p ? codec_read_append_response(p, len, b->metas, b->n_records, why, sizeof(why))
              : VARLOG_ERR_NOMEM;
        grpc_byte_buffer_destroy(bb);
        lane->st.answered++;
        if (derr == VARLOG_OK) {
            b->err = VARLOG_OK;
            b->outcome = VARLOG_APPENDED;
            if (b->metas[b->n_records - 1].llsn > lane->last_llsn)
                lane->last_llsn = b->metas[b->n_records - 1].llsn;
            if (lane->failures) {
                lane->failures = 0;
                allowlist_allow(&app->c->allow, app->topic_id, lane->ls);
            }
        } else {
            /* The node answered: the batch is stored or, with an answer we cannot read, may
             * be. Later answers can no longer be trusted to pair with their requests. */
            b->maybe = true;
            app_batch_fail(b, derr,
                           "append of %" PRIu32 " records to log stream %d of topic %d at %s: %s",
                           b->n_records, lane->ls, app->topic_id, lane->target, why);
            rpc_stream_fail_decode(lane->st.rpc);
        }
        app_settle(ts, b);
    }
}

/* Cancels the stream of a lane whose oldest request waited too long (its end is then
 * settled as a hung node's) or one of whose batches reached its delivery deadline. Returns
 * the next time to look (INT64_MAX = none). */
static int64_t lane_check_timeout(app_thread_state_t *ts, app_lane_t *lane, int64_t now,
                                  int64_t *decided_ms)
{
    const app_batch_t *head = lane->inflight.head;
    if (!head || !lane->st.rpc || lane->st.cancel != APP_CANCEL_NONE)
        return INT64_MAX;
    /* Answers are waiting: read them first, they may be what the deadline waits for. */
    if (atomic_load(&lane->readable))
        return now;
    int64_t due = head->sent_ms + ts->app->attempt_timeout_ms;
    int64_t expiry = app_inflight_deadline(lane);
    /* The time of the decision: the look may have taken a while. Read once per plan, not
     * per lane: at full speed over 8 log streams, a read per lane and round was a tenth of
     * the thread's own work. */
    if (*decided_ms == 0)
        *decided_ms = wire_now_ms();
    now = *decided_ms;
    if (now < due && now < expiry)
        return due < expiry ? due : expiry;
    /* An answer may still come before the cancel's end: the end then finds fewer batches,
     * or none, on the stream, and the flag goes with the stream either way. */
    lane->st.cancel = now >= due ? APP_CANCEL_ATTEMPT : APP_CANCEL_DELIVERY;
    rpc_stream_cancel(lane->st.rpc);
    return INT64_MAX;
}

/* ---- metadata ------------------------------------------------------------------------------ */

/* Whether any call waits for its callback: metadata looked up for the appender's sake is
 * wanted only then. Takes mu. */
static bool app_pending(varlog_appender_t *app)
{
    pthread_mutex_lock(&app->mu);
    bool pending = app->pending_calls > 0;
    pthread_mutex_unlock(&app->mu);
    return pending;
}

/* Topic mode: lanes for log streams that joined the topic, and the allowed set. Without mu. */
static void refresh_lanes(app_thread_state_t *ts)
{
    varlog_appender_t *app = ts->app;
    varlog_client_t *c = app->c;
    md_view_t *v = md_current(c);
    bool complete = true;
    if (v->applied_index != app->lanes_index && !app->fixed_ls) {
        const md_topic_t *t = md_view_topic(v, app->topic_id);
        for (size_t i = 0; t && i < t->n_log_streams; i++) {
            int32_t ls = t->log_stream_ids[i];
            bool known = false;
            for (size_t j = 0; j < app->n_lanes && !known; j++)
                known = app->lanes[j]->ls == ls;
            if (known)
                continue;
            if (app_add_lane(app, ls) != VARLOG_OK) {
                complete = false; /* out of memory: the next round tries again */
                break;
            }
            log_line(&c->log, VARLOG_LOG_INFO, VARLOG_LOG_CTX_APPEND,
                     "appender of topic %d: log stream %d joined", app->topic_id, ls);
        }
        for (size_t j = 0; j < app->n_lanes; j++)
            app->lanes[j]->gone = !md_view_log_stream(v, app->topic_id, app->lanes[j]->ls);
    }
    if (complete)
        app->lanes_index = v->applied_index;
    const md_log_stream_t *fixed =
        app->fixed_ls ? md_view_log_stream(v, app->topic_id, app->fixed_ls) : NULL;
    bool fixed_sealed = fixed && fixed->sealed;
    md_view_unref(v);
    if (app->fixed_ls) {
        /* Its batches are refused until fresh metadata says unsealed: asked for while any
         * wait, not while the appender idles. */
        if (fixed_sealed && app_pending(app))
            client_recheck_async(c);
        return;
    }
    if (ts->allowed_cap < app->n_lanes) {
        int32_t *p = realloc(ts->allowed, app->n_lanes * sizeof(*p));
        if (p) {
            ts->allowed = p;
            ts->allowed_cap = app->n_lanes;
        }
    }
    size_t n = 0;
    ts->no_lane =
        allowlist_list(&c->allow, app->topic_id, wire_now_ms(), ts->allowed, ts->allowed_cap, &n);
    ts->n_allowed = n < ts->allowed_cap ? n : ts->allowed_cap;
    ts->fallback_ls = 0;
    if (ts->no_lane == VARLOG_OK && n == 0) {
        const char *why = "";
        ts->no_lane = allowlist_pick(&c->allow, app->topic_id, wire_now_ms(), &ts->fallback_ls,
                                     NULL, NULL, &why);
        snprintf(ts->no_lane_why, sizeof(ts->no_lane_why), "%s", why);
    } else if (ts->no_lane != VARLOG_OK) {
        snprintf(ts->no_lane_why, sizeof(ts->no_lane_why), "topic %d is not in the metadata",
                 app->topic_id);
    }
    /* Nothing to send to, or log streams passed over: fresh metadata may show them fit (an
     * unseal, a log stream added) long before the periodic refresh would. */
    if ((ts->no_lane != VARLOG_OK ||
         allowlist_passes_over(&c->allow, app->topic_id, wire_now_ms())) &&
        app_pending(app))
        client_recheck_async(c);
}

bool app_lane_allowed(const app_thread_state_t *ts, const app_lane_t *lane)
{
    if (ts->app->fixed_ls)
        return true;
    if (lane->gone)
        return false;
    if (ts->n_allowed == 0)
        return lane->ls == ts->fallback_ls;
    for (size_t i = 0; i < ts->n_allowed; i++) {
        if (ts->allowed[i] == lane->ls)
            return true;
    }
    return false;
}

/* The lane for the next batch: allowed, not held, not backing off, with room in its
 * pipeline, the least loaded (round robin among equals). -1 when none. Called with mu. */
static ptrdiff_t pick_lane_locked(app_thread_state_t *ts, int64_t now)
{
    varlog_appender_t *app = ts->app;
    ptrdiff_t best = -1;
    size_t best_load = SIZE_MAX;
    for (size_t k = 0; k < app->n_lanes; k++) {
        size_t i = (app->rr + k) % app->n_lanes;
        const app_lane_t *lane = app->lanes[i];
        size_t load = lane_load(lane, &app->outboxes[i]);
        /* A stream we cancelled ends in a moment: a batch sent on it would only fail. */
        if (lane->held || load >= app->depth || (!lane->st.rpc && now < lane->reopen_ms) ||
            (lane->st.rpc && lane->st.cancel != APP_CANCEL_NONE) || !app_lane_allowed(ts, lane))
            continue;
        if (load < best_load) {
            best = (ptrdiff_t)i;
            best_load = load;
        }
    }
    if (best >= 0)
        app->rr = (size_t)best + 1;
    return best;
}

/* ---- the loop ------------------------------------------------------------------------------ */

/* Whether every lane's pipeline is full on a live stream the thread has not cancelled: only
 * an answer, the stream's end (both notify the thread) or a timeout the thread computed
 * (the oldest batch's attempt or delivery deadline, which comes no later than that of any
 * batch opened after it) can then let a batch out. Called by the idle-going thread, with
 * mu, after its last lane_send of the round (outboxes empty). */
static bool pipelines_full_locked(const varlog_appender_t *app)
{
    if (app->n_lanes == 0)
        return false;
    for (size_t i = 0; i < app->n_lanes; i++) {
        const app_lane_t *lane = app->lanes[i];
        if (!lane->st.rpc || lane->st.cancel != APP_CANCEL_NONE ||
            lane_load(lane, &app->outboxes[i]) < app->depth)
            return false;
    }
    return true;
}

/* Whether completions of the appender's streams are on their way: answers to batches in
 * flight, sends gRPC has not completed. The thread then sleeps in its poller's poll (also
 * while the poller has streams beyond its members' lanes': ends of streams they let go of);
 * otherwise nothing would come there but a stream's unexpected end, noticed when it next
 * wakes (on wake, for intake or a deadline), and it sleeps on wake, where intake can wake it
 * without gRPC. *streams: the lanes' streams. Without mu (it asks the streams). */
static bool streams_expecting(const varlog_appender_t *app, size_t *streams)
{
    size_t held = 0;
    bool expecting = false;
    for (size_t i = 0; i < app->n_lanes; i++) {
        const app_lane_t *lane = app->lanes[i];
        if (!lane->st.rpc)
            continue;
        held++;
        if (!expecting)
            expecting = lane->inflight.n > 0 || rpc_stream_pending_sends(lane->st.rpc) > 0;
    }
    *streams = held;
    return expecting;
}

bool app_answers_awaited(const varlog_appender_t *app)
{
    bool awaited = false;
    for (size_t i = 0; i < app->n_lanes; i++) {
        const app_lane_t *lane = app->lanes[i];
        if (atomic_load(&lane->readable))
            return false;
        awaited = awaited || (lane->st.rpc && lane->inflight.n > 0);
    }
    return awaited;
}

bool app_readable(const varlog_appender_t *app)
{
    for (size_t i = 0; i < app->n_lanes; i++) {
        if (atomic_load(&app->lanes[i]->readable))
            return true;
    }
    return false;
}

/* With mu held: closes the open batch when it is due and could go out, hands ready batches
 * to lanes, and says when to look again (INT64_MAX = only when woken). */
static int64_t plan_locked(app_thread_state_t *ts, int64_t now, bool *work)
{
    varlog_appender_t *app = ts->app;
    int64_t next = INT64_MAX;
    app_batch_t *open = app->open;
    if (open && open->n_records > 0) {
        int64_t due =
            open->seq <= app->flush_upto || app->closing ? now : open->opened_ms + app->linger_ms;
        if (now >= due && !app->ready.head) {
            app->open = NULL;
            open->state = SLOT_READY;
            blist_push(&app->ready, open);
        } else if (due > now && due < next) {
            next = due;
        }
    }
    int64_t expiry = app_expire_waiting_locked(ts, now);
    if (app_settled_due_locked(ts))
        *work = true; /* callbacks of expired batches to run */
    if (expiry < next)
        next = expiry;
    if (app->fixed_ls && app->lanes[0]->held)
        return next;
    /* Waiting, no appendable log stream is waited out: the batches stay ready, in order,
     * until new metadata shows one (the lanes' refresh asks for it) or their deadline. */
    bool wait_for_lane = app->waits && ts->no_lane == VARLOG_ERR_NO_LOG_STREAM;
    if (!app->fixed_ls && ts->no_lane != VARLOG_OK && app->ready.head && !wait_for_lane) {
        /* No log stream to send to: nothing will change that but new metadata. */
        app_batch_t *b;
        while ((b = blist_pop(&app->ready))) {
            b->state = SLOT_OUT;
            app_batch_fail(b, ts->no_lane, "append to topic %d: %s", app->topic_id,
                           ts->no_lane_why);
            app_settle(ts, b);
        }
        *work = true;
        return next;
    }
    while (app->ready.head) {
        ptrdiff_t i = pick_lane_locked(ts, now);
        if (i < 0)
            break;
        app_batch_t *b = blist_pop(&app->ready);
        b->state = SLOT_OUT;
        blist_push(&app->outboxes[i], b);
        *work = true;
    }
    if (app->ready.head) {
        /* Waiting for a lane: a backoff may end before anything wakes us. */
        for (size_t i = 0; i < app->n_lanes; i++) {
            const app_lane_t *lane = app->lanes[i];
            if (!lane->st.rpc && lane->reopen_ms > now && lane->reopen_ms < next)
                next = lane->reopen_ms;
        }
    }
    return next;
}

/* Bound mode: a batch coming back from a retry to a log stream the fresh metadata shows
 * sealed fails with SEALED rather than going out again. Without mu. */
static void fail_sealed_retries(app_thread_state_t *ts)
{
    varlog_appender_t *app = ts->app;
    if (!app->fixed_ls || app->waits) /* waiting: the node's refusal backs off until unsealed */
        return;
    bool returning = false;
    for (const app_batch_t *b = app->outboxes[0].head; b && !returning; b = b->next)
        returning = b->attempts > 0;
    if (!returning)
        return;
    md_view_t *v = md_current(app->c);
    const md_log_stream_t *l = md_view_log_stream(v, app->topic_id, app->fixed_ls);
    bool sealed = l && l->sealed;
    md_view_unref(v);
    if (!sealed)
        return;
    batch_list_t *box = &app->outboxes[0];
    batch_list_t keep = {0};
    app_batch_t *b;
    while ((b = blist_pop(box))) {
        if (b->attempts == 0) {
            blist_push(&keep, b);
            continue;
        }
        app_batch_fail(b, VARLOG_ERR_SEALED, "log stream %d of topic %d is sealed", app->fixed_ls,
                       app->topic_id);
        app_settle(ts, b);
    }
    *box = keep;
}

/* The appender is stopping: cancel every stream, settle what was answered, fail the rest
 * with CLOSED. */
static void stop_all(app_thread_state_t *ts)
{
    varlog_appender_t *app = ts->app;
    ts->stopping = true;
    batch_list_t left = {0};
    for (size_t i = 0; i < app->n_lanes; i++) {
        app_lane_t *lane = app->lanes[i];
        blist_merge(&left, &app->outboxes[i]);
        if (!lane->st.rpc)
            continue;
        /* Answers that arrived before the cancel still count; the stream's end then settles
         * the rest as CLOSED (MAYBE_APPENDED for what was sent). */
        rpc_stream_cancel(lane->st.rpc);
        lane_drain(ts, lane, APP_SEND_SETTLE_MS);
    }
    pthread_mutex_lock(&app->mu);
    for (app_retry_t *r = app->retries; r; r = r->next) {
        if (!r->taken) {
            r->taken = true;
            blist_merge(&left, &r->batches);
        }
    }
    blist_merge(&left, &app->ready);
    if (app->open && app->open->n_records > 0) {
        app->open->state = SLOT_READY;
        blist_push(&left, app->open);
        app->open = NULL;
    }
    pthread_mutex_unlock(&app->mu);
    /* Every task's batches are taken now: what read-back tasks settled before keeps its
     * outcome. */
    app_take_resolved(ts);
    app_batch_t *b;
    while ((b = blist_pop(&left))) {
        b->state = SLOT_OUT;
        app_batch_fail(b, VARLOG_ERR_CLOSED, "the appender closed before the batch %s",
                       b->attempts ? "could be sent again" : "was sent");
        app_settle(ts, b);
    }
    app_run_all_settled(ts);
}

void app_round_work(varlog_appender_t *app, int64_t now)
{
    app_member_t *m = app->member;
    app_thread_state_t *ts = &m->ts;
    if (now >= m->next_poll || m->work) {
        refresh_lanes(ts);
        m->next_poll = now + METADATA_POLL_MS;
    }
    app_take_resolved(ts);
    fail_sealed_retries(ts);
    for (size_t i = 0; i < app->n_lanes; i++)
        lane_send(ts, app->lanes[i], &app->outboxes[i]);
    for (size_t i = 0; i < app->n_lanes; i++) {
        if (atomic_load(&app->lanes[i]->readable))
            lane_drain(ts, app->lanes[i], 0);
    }
    app_run_settled(ts);
}

bool app_round_plan(varlog_appender_t *app, int64_t now, app_plan_t *plan)
{
    app_member_t *m = app->member;
    app_thread_state_t *ts = &m->ts;
    int64_t next = m->next_poll, decided = 0;
    for (size_t i = 0; i < app->n_lanes; i++) {
        int64_t due = lane_check_timeout(ts, app->lanes[i], now, &decided);
        if (due < next)
            next = due;
    }
    plan->expecting = streams_expecting(app, &plan->streams);
    pthread_mutex_lock(&app->mu);
    if (app->stop) {
        pthread_mutex_unlock(&app->mu);
        return false;
    }
    bool work = false;
    int64_t due = plan_locked(ts, now, &work);
    if (due < next)
        next = due;
    for (size_t i = 0; i < app->n_lanes && !work; i++)
        work = atomic_load(&app->lanes[i]->readable);
    m->work = work;
    plan->work = work;
    plan->next = next;
    plan->intake_wakes = false;
    if (!work && next > now) {
        /* From here a change this plan did not see wakes the thread (app_exec.c). */
        app->intake_wakes = !pipelines_full_locked(app);
        plan->intake_wakes = app->intake_wakes;
        app->thread_idle = true;
        app->intake_noted = false;
    }
    pthread_mutex_unlock(&app->mu);
    return true;
}

void app_round_leave(varlog_appender_t *app)
{
    app_thread_state_t *ts = &app->member->ts;
    stop_all(ts);
    free(ts->allowed);
    ts->allowed = NULL;
    free(ts->pieces);
    ts->pieces = NULL;
    pthread_mutex_lock(&app->mu);
    app->thread_done = true;
    pthread_cond_broadcast(&app->settled);
    pthread_cond_broadcast(&app->space);
    pthread_mutex_unlock(&app->mu);
    app_unref(app); /* the thread's */
}
