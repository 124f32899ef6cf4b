/* The appender's ambiguous batches (sent, the stream broke without their answer) read back
 * from the log before their callbacks (append.resolve.maybe.appended): a task on the client's
 * engine makes passes of append_resolve, with a backoff between them, until every batch is
 * found (APPENDED at the GLSNs it has), proved absent (back to the ready list, sent again
 * like a refused batch) or its deadline passes (MAYBE_APPENDED, as without reading back).
 *
 * The task holds the lane meanwhile, in both modes: nothing newer goes to that log stream
 * before the older batches' fate is known, so the window read back holds nothing of ours
 * sent later, and callbacks keep call order per log stream. It sits in the appender's list
 * of retries, so that the deadline check and the close take its batches back as they take a
 * retry's; it works on copies of the batches' records, never on the slots, which are the
 * appender's again once taken back. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "append_resolve.h"
#include "appender_internal.h"
#include "wire.h"

/* The longest wait between two passes: a pass is a metadata call to each replica and a read
 * of the entries since the last confirmed one, cheap beside the lane it keeps waiting. */
#define RESOLVE_PASS_GAP_MS 200

typedef struct app_resolve {
    app_retry_t *r;
    varlog_client_t *c;
    int32_t topic_id, ls;
    char *sent_to;
    uint64_t after_llsn;
    int64_t deadline_ms; /* the earliest of the batches' deadlines (wire_now_ms clock) */
    int64_t pass_ms;     /* bound on one pass: append.attempt.timeout.ms */
    size_t n;
    resolve_batch_t *rb;         /* per batch: a copy of its records, this pass's verdict */
    resolve_verdict_t *final;    /* per batch: what the passes so far decided */
    varlog_entry_meta_t **metas; /* per batch: this pass's metas, then the found ones */
    varlog_entry_meta_t **found;
    char why[256];  /* the last pass's account */
    bool seal_seen; /* some pass saw a replica SEALED or SEALING */
} app_resolve_t;

static void resolve_free(app_resolve_t *rs)
{
    for (size_t i = 0; i < rs->n; i++) {
        free((void *)rs->rb[i].payloads);
        free(rs->metas[i]);
        free(rs->found[i]);
    }
    free(rs->rb);
    free(rs->final);
    free(rs->metas);
    free(rs->found);
    free(rs->sent_to);
    free(rs);
}

static bool all_decided(const app_resolve_t *rs)
{
    for (size_t i = 0; i < rs->n; i++)
        if (rs->final[i] == RESOLVE_UNKNOWN)
            return false;
    return true;
}

/* One pass; true when nothing is left to learn (every batch decided, or no time left, or the
 * batches were taken back). */
static int resolve_handler(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    app_resolve_t *rs = arg;
    varlog_appender_t *app = rs->r->app;
    pthread_mutex_lock(&app->mu);
    bool taken = rs->r->taken;
    pthread_mutex_unlock(&app->mu);
    int64_t now = wire_now_ms();
    if (taken || client_closing(rs->c) || now >= rs->deadline_ms)
        return 0;
    int64_t bound = now + rs->pass_ms;
    resolve_req_t req = {.topic_id = rs->topic_id,
                         .log_stream_id = rs->ls,
                         .after_llsn = rs->after_llsn,
                         .deadline_ms = bound < rs->deadline_ms ? bound : rs->deadline_ms,
                         .batches = rs->rb,
                         .n = rs->n,
                         .sent_to = rs->sent_to};
    for (size_t i = 0; i < rs->n; i++) {
        rs->rb[i].metas = rs->metas[i];
        rs->rb[i].verdict = RESOLVE_UNKNOWN;
    }
    varlog_err_t err = append_resolve(rs->c, &req, rs->why, sizeof(rs->why));
    atomic_fetch_add(&rs->c->stats.resolve_passes, 1);
    /* Under mu: the deadline check reads what the passes decided (app_resolve_expire_locked). */
    pthread_mutex_lock(&app->mu);
    for (size_t i = 0; err == VARLOG_OK && i < rs->n; i++) {
        if (rs->final[i] == RESOLVE_FOUND)
            continue; /* found once is found: a later pass may only fail to read it again */
        if (rs->rb[i].verdict == RESOLVE_FOUND) {
            rs->final[i] = RESOLVE_FOUND;
            memcpy(rs->found[i], rs->metas[i], rs->rb[i].n_records * sizeof(varlog_entry_meta_t));
        } else if (rs->rb[i].verdict == RESOLVE_ABSENT) {
            rs->final[i] = RESOLVE_ABSENT;
        }
    }
    snprintf(rs->r->note, sizeof(rs->r->note), "%.199s", rs->why);
    pthread_mutex_unlock(&app->mu);
    if (all_decided(rs) || wire_now_ms() >= rs->deadline_ms)
        return 0;
    /* A seal came and went and the primary was not seen sealed (a resumed primary sealed
     * and unsealed between two passes): no pass can prove absence until the next seal.
     * The batches end MAYBE_APPENDED now rather than at their deadline, and their lane takes
     * appends again. */
    bool futile = append_resolve_proof_gone(&req, rs->seal_seen);
    rs->seal_seen |= req.saw_seal;
    if (futile) {
        pthread_mutex_lock(&app->mu);
        snprintf(rs->why, sizeof(rs->why),
                 "log stream %d of topic %d was sealed and unsealed while its primary %s was "
                 "not seen sealed: nothing proves the batch absent, and it is not in the log",
                 rs->ls, rs->topic_id, rs->sent_to ? rs->sent_to : "?");
        snprintf(rs->r->note, sizeof(rs->r->note), "%.199s", rs->why);
        pthread_mutex_unlock(&app->mu);
        return 0;
    }
    return VQ_ERR_USER; /* look again after a backoff: a seal, a replica back */
}

/* A batch the passes found: its callback says APPENDED, at the positions read back. */
static void take_found(const app_resolve_t *rs, size_t i, app_batch_t *b)
{
    memcpy(b->metas, rs->found[i], b->n_records * sizeof(varlog_entry_meta_t));
    b->err = VARLOG_OK;
    b->outcome = VARLOG_APPENDED;
    b->maybe = false;
}

/* The passes are over: found batches are settled by the thread, absent ones go back to the
 * ready list, the rest keep MAYBE_APPENDED with what the passes learnt. */
static void resolve_after(void *arg, int result)
{
    (void)result;
    app_resolve_t *rs = arg;
    app_retry_t *r = rs->r;
    varlog_appender_t *app = r->app;
    uint64_t found = 0, absent = 0;
    pthread_mutex_lock(&app->mu);
    if (!r->taken) {
        r->taken = true;
        batch_list_t back = {0};
        app_batch_t *b;
        for (size_t i = 0; (b = blist_pop(&r->batches)); i++) {
            if (rs->final[i] == RESOLVE_FOUND) {
                take_found(rs, i, b);
                blist_push(&app->resolved, b);
                found++;
            } else if (rs->final[i] == RESOLVE_ABSENT) {
                b->maybe = false; /* certainly not stored: sent again like a refused batch */
                blist_push(&back, b);
                absent++;
            } else {
                size_t len = strlen(b->errtext);
                snprintf(b->errtext + len, sizeof(b->errtext) - len, "; read back: %s",
                         rs->why[0] ? rs->why : "no pass could read the log stream");
                blist_push(&app->resolved, b);
            }
        }
        if (app->resolved.head)
            atomic_store(&app->resolved_ready, true);
        app->stats.batches_retried += back.n;
        app_ready_return_locked(app, &back);
        r->lane->held--;
    }
    app_retry_unlink_locked(app, r);
    app_wake_thread_locked(app);
    pthread_mutex_unlock(&app->mu);
    atomic_fetch_add(&rs->c->stats.resolved_found, found);
    atomic_fetch_add(&rs->c->stats.resolved_absent, absent);
}

static void resolve_release(void *arg)
{
    app_resolve_t *rs = arg;
    varlog_appender_t *app = rs->r->app;
    varlog_client_t *c = rs->c;
    free(rs->r);
    resolve_free(rs);
    app_unref(app);
    client_retry_task_end(c);
}

/* The task's state: copies of what a pass reads, so that nothing of the slots is touched
 * once the thread may take them back. NULL when out of memory. */
static app_resolve_t *resolve_new(varlog_appender_t *app, app_lane_t *lane,
                                  const batch_list_t *batches)
{
    app_resolve_t *rs = calloc(1, sizeof(*rs));
    size_t n = batches->n;
    if (!rs)
        return NULL;
    rs->n = n;
    rs->rb = calloc(n, sizeof(*rs->rb));
    rs->final = calloc(n, sizeof(*rs->final));
    rs->metas = calloc(n, sizeof(*rs->metas));
    rs->found = calloc(n, sizeof(*rs->found));
    rs->sent_to = lane->target ? strdup(lane->target) : NULL;
    bool ok = rs->rb && rs->final && rs->metas && rs->found && (rs->sent_to || !lane->target);
    rs->n = ok ? n : 0;
    int64_t now = wire_now_ms();
    rs->deadline_ms = INT64_MAX;
    size_t i = 0;
    for (const app_batch_t *b = batches->head; ok && b; b = b->next, i++) {
        uint8_t *copy = malloc(b->len ? b->len : 1);
        rs->metas[i] = calloc(b->n_records, sizeof(varlog_entry_meta_t));
        rs->found[i] = calloc(b->n_records, sizeof(varlog_entry_meta_t));
        rs->rb[i] = (resolve_batch_t){.payloads = copy, .len = b->len, .n_records = b->n_records};
        ok = copy && rs->metas[i] && rs->found[i];
        if (copy) {
            /* The request as sent: referenced records' bytes in their gaps. The batch is
             * not settled, so they are still the caller's to keep. */
            memcpy(copy, b->buf, b->len);
            for (uint32_t r = 0; r < b->n_refs; r++)
                memcpy(copy + b->refs[r].off, b->refs[r].data, b->refs[r].len);
        }
        if (b->deadline_ms < rs->deadline_ms)
            rs->deadline_ms = b->deadline_ms;
    }
    if (!ok) {
        rs->n = rs->rb && rs->metas && rs->found ? n : 0;
        resolve_free(rs);
        return NULL;
    }
    rs->c = app->c;
    rs->topic_id = app->topic_id;
    rs->ls = lane->ls;
    rs->after_llsn = lane->last_llsn;
    rs->pass_ms = app->attempt_timeout_ms;
    if (rs->deadline_ms == INT64_MAX) /* no delivery bound: one attempt's worth of reading */
        rs->deadline_ms = now + app->attempt_timeout_ms;
    return rs;
}

bool app_resolve_submit(app_thread_state_t *ts, app_lane_t *lane, batch_list_t *batches)
{
    varlog_appender_t *app = ts->app;
    varlog_client_t *c = app->c;
    if (client_closing(c))
        return false;
    app_retry_t *r = calloc(1, sizeof(*r));
    app_resolve_t *rs = r ? resolve_new(app, lane, batches) : NULL;
    if (!rs) {
        free(r);
        return false;
    }
    rs->r = r;
    r->rs = rs;
    r->app = app;
    r->lane = lane;
    r->resolve = true;
    r->batches = *batches;
    int64_t left_ms = rs->deadline_ms - wire_now_ms();
    vq_task_spec_t spec = {
        .handler = resolve_handler,
        .arg = rs,
        .after = resolve_after,
        .release = resolve_release,
        /* The handler stops at the deadline itself; the watchdog is a backstop beyond a
         * pass's bound. */
        .timeout_ns = ((left_ms > 0 ? left_ms : 0) + rs->pass_ms + 1000) * 1000000,
        /* The first pass at once (a batch stored before the stream broke is there now);
         * the next ones wait for the cluster to change: a seal, a replica back. */
        .retry = {.count = UINT_MAX - 1,
                  /* 50 ms doubling to RESOLVE_PASS_GAP_MS: a resumed primary may be
                   * sealed and unsealed within a second, and only its seal proves absence. */
                  .min_ns = 50 * 1000000,
                  .max_ns = RESOLVE_PASS_GAP_MS * 1000000,
                  .factor = 2.0,
                  .jitter = true},
    };
    app_ref(app);
    pthread_mutex_lock(&app->mu);
    r->next = app->retries;
    app->retries = r;
    lane->held++;
    pthread_mutex_unlock(&app->mu);
    client_retry_task_begin(c);
    if (vq_engine_submit(c->engine, &spec) == VQ_OK) {
        *batches = (batch_list_t){0};
        return true;
    }
    client_retry_task_end(c);
    pthread_mutex_lock(&app->mu);
    app_retry_unlink_locked(app, r);
    lane->held--;
    pthread_mutex_unlock(&app->mu);
    free(r);
    resolve_free(rs);
    atomic_fetch_sub(&app->refs, 1);
    return false;
}

void app_resolve_expire_locked(app_thread_state_t *ts, app_retry_t *r, int64_t now_ms,
                               batch_list_t *back)
{
    app_resolve_t *rs = r->rs;
    app_batch_t *b;
    for (size_t i = 0; (b = blist_pop(&r->batches)); i++) {
        b->state = SLOT_OUT;
        resolve_verdict_t v = i < rs->n ? rs->final[i] : RESOLVE_UNKNOWN;
        if (v == RESOLVE_FOUND) {
            take_found(rs, i, b);
            atomic_fetch_add(&rs->c->stats.resolved_found, 1);
            app_settle(ts, b);
            continue;
        }
        if (v == RESOLVE_ABSENT) {
            b->maybe = false;
            atomic_fetch_add(&rs->c->stats.resolved_absent, 1);
        }
        char last[sizeof(b->errtext)];
        snprintf(last, sizeof(last), "%s", b->errtext);
        if (r->note[0]) {
            size_t len = strlen(last);
            snprintf(last + len, sizeof(last) - len, "; read back: %s", r->note);
        }
        if (app_batch_expired(b, now_ms)) {
            app_batch_fail_expired(b, "while its fate was read back from the log", last);
            app_settle(ts, b);
        } else if (v == RESOLVE_ABSENT) {
            blist_push(back, b); /* certainly not stored, with time left: sent again */
        } else {
            /* Its own deadline is still ahead, but the read-back ended with an older batch's:
             * nothing more is learnt of it, and sending it again could store it twice. */
            app_batch_fail(b, b->err,
                           "%s; not read back further: an older batch of its stream reached "
                           "appender.delivery.timeout.ms",
                           last);
            app_settle(ts, b);
        }
    }
}

void app_take_resolved(app_thread_state_t *ts)
{
    varlog_appender_t *app = ts->app;
    if (!atomic_load(&app->resolved_ready))
        return;
    pthread_mutex_lock(&app->mu);
    batch_list_t done = app->resolved;
    app->resolved = (batch_list_t){0};
    atomic_store(&app->resolved_ready, false);
    pthread_mutex_unlock(&app->mu);
    app_batch_t *b;
    while ((b = blist_pop(&done))) {
        b->state = SLOT_OUT;
        app_settle(ts, b);
    }
}
