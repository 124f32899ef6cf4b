/* The pipelined appender's public calls (varlog/appender.h): creation, intake into the
 * transmit queue, flush, close, and the appender's place in its client's lifecycle. The
 * appender's thread is in appender_io.c, its batch slots' memory in appender_slots.c. */
#include <stdlib.h>
#include <string.h>

#include "log_io_codec.h"
#include "appender_internal.h"
#include "errtext.h"
#include "ticks.h"
#include "wire.h"

/* ---- lists --------------------------------------------------------------------------------- */

void blist_push(batch_list_t *l, app_batch_t *b)
{
    b->next = NULL;
    if (l->tail)
        l->tail->next = b;
    else
        l->head = b;
    l->tail = b;
    l->n++;
}

app_batch_t *blist_pop(batch_list_t *l)
{
    app_batch_t *b = l->head;
    if (!b)
        return NULL;
    l->head = b->next;
    if (!l->head)
        l->tail = NULL;
    l->n--;
    b->next = NULL;
    return b;
}

void blist_merge(batch_list_t *dst, batch_list_t *src)
{
    batch_list_t out = {0};
    while (dst->head || src->head) {
        batch_list_t *from = !src->head                         ? dst
                             : !dst->head                       ? src
                             : dst->head->seq <= src->head->seq ? dst
                                                                : src;
        blist_push(&out, blist_pop(from));
    }
    *dst = out;
}

void app_ready_return_locked(varlog_appender_t *app, batch_list_t *batches)
{
    for (app_batch_t *b = batches->head; b; b = b->next)
        b->state = SLOT_READY;
    blist_merge(&app->ready, batches);
}

/* ---- lifetime ------------------------------------------------------------------------------ */

void app_ref(varlog_appender_t *app)
{
    atomic_fetch_add_explicit(&app->refs, 1, memory_order_relaxed);
}

static void app_free(varlog_appender_t *app)
{
    for (size_t i = 0; i < app->n_lanes; i++)
        app_lane_free(app->lanes[i]);
    free(app->lanes);
    free(app->outboxes);
    app_slots_free(app);
    wire_scratch_free(&app->scratch);
    if (app->results)
        vq_objpool_destroy(app->results);
    app_exec_free_own(app);
    free(app->member);
    pthread_cond_destroy(&app->space);
    pthread_cond_destroy(&app->settled);
    pthread_mutex_destroy(&app->mu);
    free(app);
}

void app_unref(varlog_appender_t *app)
{
    if (atomic_fetch_sub_explicit(&app->refs, 1, memory_order_acq_rel) == 1)
        app_free(app);
}

void app_wake_producers_locked(varlog_appender_t *app)
{
    if (app->space_waiters == 0)
        return;
    /* A quarter of each bound: the queue of a producer that outruns the log refills in
     * bursts. Small queues (a quarter rounds to 0) wake for every bit of room as before; a
     * waiter whose call needs more than a quarter is woken again by every later settle, and
     * at the latest when nothing is pending. */
    bool records = app->pending_records + app->queue_max_records / 4 <= app->queue_max_records;
    bool bytes = app->pending_bytes + app->queue_max_bytes / 4 <= app->queue_max_bytes;
    size_t slot_slack = app->n_slots / 4 > 0 ? app->n_slots / 4 : 1;
    bool slots = app->free_slots.n >= slot_slack ||
                 app->slots_grown + app->slots_growing < app->slots_grow_max;
    if (app->pending_calls == 0 || (records && bytes && slots))
        pthread_cond_broadcast(&app->space);
}

varlog_err_t app_add_lane(varlog_appender_t *app, int32_t ls)
{
    app_lane_t *lane = app_lane_new(app, ls);
    app_lane_t **lanes = lane ? realloc(app->lanes, (app->n_lanes + 1) * sizeof(*lanes)) : NULL;
    if (lanes)
        app->lanes = lanes;
    batch_list_t *boxes =
        lanes ? realloc(app->outboxes, (app->n_lanes + 1) * sizeof(*boxes)) : NULL;
    if (boxes)
        app->outboxes = boxes;
    /* Its pipeline's depth in flight and one waiting. */
    if (!boxes || app_add_slots(app, app->depth + 1) != VARLOG_OK) {
        app_lane_free(lane);
        return VARLOG_ERR_NOMEM;
    }
    app->outboxes[app->n_lanes] = (batch_list_t){0};
    pthread_mutex_lock(&app->mu);
    app->lanes[app->n_lanes++] = lane;
    pthread_mutex_unlock(&app->mu);
    return VARLOG_OK;
}

static bool on_app_thread(const varlog_appender_t *app)
{
    return app->has_thread && app->exec && app_exec_current(app);
}

/* ---- creation ------------------------------------------------------------------------------ */

static varlog_err_t app_init(varlog_appender_t *app, varlog_client_t *c, int32_t topic_id,
                             int32_t log_stream_id)
{
    const varlog_conf_t *conf = c->conf;
    app->c = c;
    app->topic_id = topic_id;
    app->fixed_ls = log_stream_id;
    app->batch_max_records = (uint32_t)conf->appender_batch_max_records;
    app->batch_max_bytes = (uint64_t)conf->appender_batch_max_bytes;
    app->record_max_bytes = (uint64_t)conf->append_record_max_bytes;
    app->linger_ms = conf->appender_linger_ms;
    app->poll_slice_ms = app->linger_ms < 1 ? 1 : app->linger_ms > 5 ? 5 : app->linger_ms;
    app->depth = (size_t)conf->appender_pipeline_depth;
    app->queue_max_records = (uint64_t)conf->appender_queue_max_records;
    app->queue_max_bytes = (uint64_t)conf->appender_queue_max_bytes;
    app->attempt_timeout_ms = conf->append_attempt_timeout_ms;
    app->delivery_timeout_ms = conf->appender_delivery_timeout_ms;
    app->max_attempts = append_max_attempts(conf, app->delivery_timeout_ms > 0);
    app->waits = conf->append_retries < 0 && app->delivery_timeout_ms > 0;
    app->retry_maybe = conf->append_retry_maybe_appended;
    app->resolve = conf->append_resolve_maybe_appended;
    app->timed = conf->stats_latency;
    if (app->timed)
        ticks_init(); /* the first appender of the process waits TICKS_ANCHOR_MIN_NS */
    app->slot_cap =
        app->batch_max_bytes + (size_t)app->batch_max_records * CODEC_PAYLOAD_OVERHEAD_MAX;
    uint64_t full_batches =
        (app->queue_max_records + app->batch_max_records - 1) / app->batch_max_records;
    app->slots_grow_max =
        full_batches < APP_SLOTS_GROW_MAX ? (size_t)full_batches : APP_SLOTS_GROW_MAX;
    app->next_seq = 1;
    atomic_init(&app->trim_at_ms, INT64_MAX);
    atomic_init(&app->refs, 1);
    atomic_init(&app->inflight_batches, 0);
    atomic_init(&app->inflight_records, 0);
    atomic_init(&app->inflight_bytes, 0);
    /* Producers take mu once per append: under contention a short spin costs less than the
     * futex sleep and wake-up a plain mutex goes to at once. */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&app->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    wire_cond_init(&app->space);
    wire_cond_init(&app->settled);

    /* Lanes: the one log stream, or every log stream of the topic known now. */
    md_view_t *v = md_current(c);
    app->lanes_index = v->applied_index;
    const md_topic_t *t = md_view_topic(v, topic_id);
    size_t n = log_stream_id ? 1 : (t ? t->n_log_streams : 0);
    varlog_err_t err = VARLOG_OK;
    int32_t ls = 0;
    for (size_t i = 0; err == VARLOG_OK && i < n; i++) {
        ls = log_stream_id ? log_stream_id : t->log_stream_ids[i];
        err = app_add_lane(app, ls);
    }
    md_view_unref(v);
    if (err != VARLOG_OK)
        return errtext_set(
            err, "appender: out of memory for log stream %d (%zu batch slots of %zu bytes)", ls,
            app->depth + 1, app->slot_cap);
    /* The batch being filled; a topic without log streams yet gets a lane's worth too. */
    size_t extra = n ? 1 : app->depth + 2;
    if (app_add_slots(app, extra) != VARLOG_OK)
        return errtext_set(VARLOG_ERR_NOMEM,
                           "appender: out of memory for %zu batch slots of %zu bytes", extra,
                           app->slot_cap);
    app->member = calloc(1, sizeof(*app->member));
    if (!app->member)
        return errtext_set(VARLOG_ERR_NOMEM, "appender: out of memory for its thread's state");
    app->member->ts.app = app;
    if ((err = app_exec_attach(app)) != VARLOG_OK)
        return err;
    /* One result object per run of callbacks: a few cover the thread (and a spare). */
    if (vq_objpool_create(4, sizeof(varlog_append_result_t), 1, &app->results) != VQ_OK)
        return errtext_set(VARLOG_ERR_NOMEM, "appender: out of memory for the result pool");
    return VARLOG_OK;
}

/* The client's list of open appenders, which its destroy closes. */
static varlog_err_t client_add_appender(varlog_client_t *c, varlog_appender_t *app)
{
    pthread_mutex_lock(&c->mu);
    bool closing = c->closing;
    if (!closing) {
        app->next_in_client = c->appenders;
        c->appenders = app;
        app->in_client_list = true;
    }
    pthread_mutex_unlock(&c->mu);
    return closing ? errtext_set(VARLOG_ERR_CLOSED, "appender: the client is closing") : VARLOG_OK;
}

static void client_remove_appender(varlog_client_t *c, varlog_appender_t *app)
{
    pthread_mutex_lock(&c->mu);
    if (app->in_client_list) {
        for (varlog_appender_t **p = &c->appenders; *p; p = &(*p)->next_in_client) {
            if (*p == app) {
                *p = app->next_in_client;
                break;
            }
        }
        app->in_client_list = false;
    }
    pthread_mutex_unlock(&c->mu);
}

varlog_err_t varlog_appender_new(varlog_client_t *c, int32_t topic_id, int32_t log_stream_id,
                                 varlog_appender_t **out)
{
    if (out)
        *out = NULL;
    if (!c || !out)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "appender_new: client and out must not be NULL");
    if (topic_id < 1)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "appender_new: topic id %d (ids start at 1)",
                           topic_id);
    if (log_stream_id < 0)
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "appender_new: log stream id %d (ids start at 1; 0 = the whole topic)",
                           log_stream_id);
    varlog_err_t err = client_enter(c);
    if (err != VARLOG_OK)
        return err;
    err = append_check_target(c, topic_id, log_stream_id, -1);
    varlog_appender_t *app = err == VARLOG_OK ? calloc(1, sizeof(*app)) : NULL;
    if (err == VARLOG_OK && !app)
        err = errtext_set(VARLOG_ERR_NOMEM, "appender_new: out of memory");
    if (app && (err = app_init(app, c, topic_id, log_stream_id)) == VARLOG_OK &&
        (err = client_add_appender(c, app)) == VARLOG_OK) {
        app_ref(app); /* the thread's */
        app->has_thread = true;
        app->joinable = app->own_exec;
        if ((err = app_exec_start(app)) != VARLOG_OK) {
            app->has_thread = false;
            app->joinable = false;
            atomic_fetch_sub(&app->refs, 1);
            client_remove_appender(c, app);
        }
    }
    client_leave(c);
    if (err != VARLOG_OK) {
        if (app)
            app_unref(app);
        return err;
    }
    stats_producer_uses(c, topic_id, log_stream_id);
    log_line(&c->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_APPEND,
             "appender for topic %d, %s%d: %zu batch slots of %zu bytes", topic_id,
             log_stream_id ? "log stream " : "log streams: ",
             log_stream_id ? log_stream_id : (int)app->n_lanes, app->n_slots, app->slot_cap);
    *out = app;
    return VARLOG_OK;
}

void app_wake_thread_locked(varlog_appender_t *app)
{
    if (!app->thread_idle || app->thread_done)
        return; /* it looks at everything under mu before it sleeps again, or it let go */
    app->thread_idle = false; /* told once: its next plan sees whatever comes after */
    app_exec_notify_locked(app, false);
}

/* ---- intake -------------------------------------------------------------------------------- */

static varlog_err_t check_records(const varlog_appender_t *app, const varlog_record_t *records,
                                  size_t n, uint64_t *bytes)
{
    append_limits_t lim = {.who = "appender_append",
                           .max_records = app->batch_max_records,
                           .max_records_name = "appender.batch.max.records",
                           .max_bytes = app->batch_max_bytes,
                           .max_bytes_name = "appender.batch.max.bytes",
                           .record_max_bytes = app->record_max_bytes};
    return append_check_records(&lim, records, n, bytes);
}

static bool fits_open(const varlog_appender_t *app, size_t n, uint64_t bytes)
{
    const app_batch_t *b = app->open;
    return b && b->n_records + n <= app->batch_max_records &&
           b->bytes + bytes <= app->batch_max_bytes;
}

static bool batch_full(const varlog_appender_t *app, const app_batch_t *b)
{
    return b->n_records >= app->batch_max_records || b->bytes >= app->batch_max_bytes;
}

/* Hands the open batch to the thread. Called with mu held. */
static void seal_open_locked(varlog_appender_t *app)
{
    app_batch_t *b = app->open;
    app->open = NULL;
    b->state = SLOT_READY;
    blist_push(&app->ready, b);
}

/* Intake wakes the thread only when what changed could go out now: with every pipeline
 * full it waits for an answer (or a deadline no later than the new batch's), and then
 * plans what producers queued meanwhile. */
static void wake_thread_locked(varlog_appender_t *app)
{
    /* In its poll it comes back within a slice on its own (appender_io.c). */
    if (app->intake_wakes && app->thread_idle && !app->intake_noted) {
        app->intake_noted = true;
        app_exec_notify_locked(app, true);
    }
}

size_t app_ref_min_bytes = APP_REF_MIN_BYTES;

/* Writes records into b: copies, or (ref) their tags and lengths with a gap each for the
 * bytes, which stay where the caller has them; but a record below app_ref_min_bytes is
 * copied all the same, which costs less than one more piece of the request. Called with mu
 * held. */
static void put_records_locked(app_batch_t *b, const varlog_record_t *records, size_t n, bool ref)
{
    b->has_release |= ref;
    for (size_t i = 0; i < n; i++) {
        if (!ref || records[i].len < app_ref_min_bytes) {
            b->len += codec_put_payload(b->buf + b->len, records[i].data, records[i].len);
            continue;
        }
        b->len += codec_put_payload_head(b->buf + b->len, records[i].len);
        b->refs[b->n_refs++] =
            (app_ref_t){.data = records[i].data, .off = b->len, .len = records[i].len};
        b->len += records[i].len;
    }
}

static varlog_err_t intake(varlog_appender_t *app, const varlog_record_t *records, size_t n,
                           int64_t timeout_ms, unsigned flags, varlog_append_release_cb *release,
                           varlog_append_cb *cb, void *opaque);

varlog_err_t varlog_appender_append(varlog_appender_t *app, const varlog_record_t *records,
                                    size_t n, int64_t timeout_ms, varlog_append_cb *cb,
                                    void *opaque)
{
    return intake(app, records, n, timeout_ms, 0, NULL, cb, opaque);
}

varlog_err_t varlog_appender_append_ex(varlog_appender_t *app, const varlog_record_t *records,
                                       size_t n, int64_t timeout_ms, unsigned flags,
                                       varlog_append_cb *cb, void *opaque)
{
    return intake(app, records, n, timeout_ms, flags, NULL, cb, opaque);
}

varlog_err_t varlog_appender_append_ref(varlog_appender_t *app, const varlog_record_t *records,
                                        size_t n, int64_t timeout_ms,
                                        varlog_append_release_cb *release, varlog_append_cb *cb,
                                        void *opaque)
{
    if (!release)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "appender_append_ref: release must not be "
                                                   "NULL (a function that does nothing, for "
                                                   "bytes that outlive the client)");
    return intake(app, records, n, timeout_ms, 0, release, cb, opaque);
}

static varlog_err_t intake(varlog_appender_t *app, const varlog_record_t *records, size_t n,
                           int64_t timeout_ms, unsigned flags, varlog_append_release_cb *release,
                           varlog_append_cb *cb, void *opaque)
{
    if (!app || !records || !cb)
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "appender_append: appender, records and cb must not be NULL");
    if (n == 0)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "appender_append: no records (n is 0)");
    if (timeout_ms < -1)
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "appender_append: timeout_ms %lld (0 = do not wait, -1 = no limit)",
                           (long long)timeout_ms);
    if (flags & ~(unsigned)(VARLOG_APPEND_REFUSAL_RETRIED | VARLOG_APPEND_WAIT_CONTINUED))
        return errtext_set(VARLOG_ERR_INVALID_ARG, "appender_append: unknown flags 0x%x", flags);
    bool wait_counted = (flags & VARLOG_APPEND_WAIT_CONTINUED) != 0;
    uint64_t bytes = 0;
    varlog_err_t err = check_records(app, records, n, &bytes);
    if (err != VARLOG_OK)
        return err;
    struct timespec until;
    if (timeout_ms > 0)
        abs_deadline(&until, timeout_ms);
    /* The append latency's start, read before the lock so that the critical section stays as
     * it was; a wait for room counts as latency. A tick, not a clock read (ticks.h). */
    uint64_t t_ticks = app->timed ? ticks_now() : 0;
    pthread_mutex_lock(&app->mu);
    for (;;) {
        if (app->closing) {
            err = errtext_set(VARLOG_ERR_CLOSED, "appender_append: the appender is closing");
            break;
        }
        bool room =
            app->pending_calls == 0 || (app->pending_records + n <= app->queue_max_records &&
                                        app->pending_bytes + bytes <= app->queue_max_bytes);
        /* The client-wide bound: looked at once the appender's own has room. */
        bool shared = room && app_budget_fits(app->c, n, bytes);
        if (shared && (fits_open(app, n, bytes) || app->free_slots.head)) {
            if (app_budget_take(app->c, n, bytes))
                break;
            continue; /* another appender took the room first */
        }
        if (shared && app_slots_grow_locked(app))
            continue;
        /* On the appender's own thread only its return can make room: never wait there. On
         * any of the client's threads, neither for the client-wide bound: the callbacks of
         * its appenders hold their calls' room until they return. */
        bool never_wait = on_app_thread(app) || (!shared && room && client_thread_is_own(app->c));
        if (timeout_ms == 0 || never_wait) {
            if (!(flags & VARLOG_APPEND_REFUSAL_RETRIED)) {
                app->stats.queue_full++;
                atomic_fetch_add_explicit(&app->c->cstats.queue_full, 1, memory_order_relaxed);
            }
            if (!room)
                err =
                    errtext_set(VARLOG_ERR_QUEUE_FULL,
                                "appender_append: queue full (%llu calls, %llu records, %llu bytes "
                                "pending; appender.queue.max.records %llu, .max.bytes %llu)",
                                (unsigned long long)app->pending_calls,
                                (unsigned long long)app->pending_records,
                                (unsigned long long)app->pending_bytes,
                                (unsigned long long)app->queue_max_records,
                                (unsigned long long)app->queue_max_bytes);
            else if (!shared)
                err = errtext_set(
                    VARLOG_ERR_QUEUE_FULL,
                    "appender_append: the client's appenders are full (%llu records, %llu bytes "
                    "pending in all of them, %llu records in this one; "
                    "appender.client.queue.max.records %llu, .max.bytes %llu)",
                    (unsigned long long)atomic_load(&app->c->budget.records),
                    (unsigned long long)atomic_load(&app->c->budget.bytes),
                    (unsigned long long)app->pending_records,
                    (unsigned long long)app->c->budget.max_records,
                    (unsigned long long)app->c->budget.max_bytes);
            else
                err = errtext_set(VARLOG_ERR_QUEUE_FULL,
                                  "appender_append: every batch slot is taken (%zu slots, %zu "
                                  "of them added as records waited; %llu records in %llu calls "
                                  "pending: batches sent before they were full hold fewer "
                                  "records than appender.batch.max.records %llu)",
                                  app->n_slots, app->slots_grown,
                                  (unsigned long long)app->pending_records,
                                  (unsigned long long)app->pending_calls,
                                  (unsigned long long)app->batch_max_records);
            break;
        }
        if (!wait_counted) {
            wait_counted = true;
            app->stats.queue_full_waits++;
            atomic_fetch_add_explicit(&app->c->cstats.queue_full_waits, 1, memory_order_relaxed);
        }
        if (!shared && room) {
            if (!app_budget_wait_locked(app, n, bytes, timeout_ms < 0 ? NULL : &until))
                timeout_ms = 0; /* one more look, then QUEUE_FULL */
            continue;
        }
        app->space_waiters++;
        int rc = timeout_ms < 0 ? pthread_cond_wait(&app->space, &app->mu)
                                : pthread_cond_timedwait(&app->space, &app->mu, &until);
        app->space_waiters--;
        if (rc != 0)
            timeout_ms = 0; /* one more look, then QUEUE_FULL */
    }
    if (err != VARLOG_OK) {
        pthread_mutex_unlock(&app->mu);
        return err;
    }
    bool wake = false;
    if (!fits_open(app, n, bytes)) {
        if (app->open)
            seal_open_locked(app);
        app_batch_t *b = blist_pop(&app->free_slots);
        b->state = SLOT_OPEN;
        b->seq = app->next_seq++;
        b->opened_ms = wire_now_ms();
        b->deadline_ms =
            app->delivery_timeout_ms > 0 ? b->opened_ms + app->delivery_timeout_ms : INT64_MAX;
        app->open = b;
        wake = true; /* a new linger deadline, perhaps a sealed batch */
    }
    app_batch_t *b = app->open;
    b->calls[b->n_calls++] = (app_call_t){.cb = cb,
                                          .opaque = opaque,
                                          .first = b->n_records,
                                          .n = (uint32_t)n,
                                          .t_ticks = t_ticks,
                                          .release = release};
    put_records_locked(b, records, n, release != NULL);
    b->n_records += (uint32_t)n;
    b->bytes += bytes;
    app->pending_calls++;
    app->pending_records += n;
    app->pending_bytes += bytes;
    if (batch_full(app, b)) {
        seal_open_locked(app);
        wake = true;
    }
    if (wake)
        wake_thread_locked(app);
    pthread_mutex_unlock(&app->mu);
    return VARLOG_OK;
}

/* ---- flush and close ----------------------------------------------------------------------- */

/* Calls (or, with batches, batches) opened up to seq that have not settled. Called with mu
 * held. */
static size_t unsettled_locked(const varlog_appender_t *app, uint64_t seq, bool batches)
{
    size_t n = 0;
    for (size_t i = 0; i < app->n_slots; i++) {
        const app_batch_t *b = app->slots[i];
        if (b->state != SLOT_FREE && !b->settle_pending && b->seq <= seq)
            n += batches ? 1 : b->n_calls;
    }
    return n;
}

bool app_flush_settled_locked(varlog_appender_t *app, uint64_t seq)
{
    bool done = false;
    for (app_flush_waiter_t *w = app->flush_waiters; w; w = w->next) {
        if (seq <= w->seq && w->batches > 0 && --w->batches == 0)
            done = true;
    }
    return done;
}

/* Waits until every call queued so far settled, or the timeout. Called with mu held. The
 * batches are counted once here, then counted down by the thread as they settle (calls
 * added later to the open batch settle with it); the thread wakes this waiter when none is
 * left, or when it is done. */
static varlog_err_t flush_locked(varlog_appender_t *app, int64_t timeout_ms, size_t *left)
{
    uint64_t seq = app->next_seq - 1;
    struct timespec until;
    if (timeout_ms > 0)
        abs_deadline(&until, timeout_ms);
    if (seq > app->flush_upto)
        app->flush_upto = seq;
    /* Close flushes through here once intake stopped: the producers it stopped may wait for
     * the client-wide bound, on the client's condition rather than the appender's. */
    if (app->closing)
        app_budget_wake_closing_locked(app);
    app_wake_thread_locked(app);
    app_flush_waiter_t w = {.seq = seq, .batches = unsettled_locked(app, seq, true)};
    if (w.batches > 0 && timeout_ms != 0 && !app->thread_done) {
        w.next = app->flush_waiters;
        app->flush_waiters = &w;
        while (w.batches > 0 && !app->thread_done) {
            if (timeout_ms < 0)
                pthread_cond_wait(&app->settled, &app->mu);
            else if (pthread_cond_timedwait(&app->settled, &app->mu, &until) != 0)
                break;
        }
        app_flush_waiter_t **pp = &app->flush_waiters;
        while (*pp != &w)
            pp = &(*pp)->next;
        *pp = w.next;
    }
    size_t n = w.batches > 0 ? unsettled_locked(app, seq, false) : 0;
    if (left)
        *left = n;
    return n ? VARLOG_ERR_TIMED_OUT : VARLOG_OK;
}

varlog_err_t varlog_appender_flush(varlog_appender_t *app, int64_t timeout_ms,
                                   size_t *still_pending)
{
    if (still_pending)
        *still_pending = 0;
    if (!app)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "appender_flush: appender is NULL");
    if (timeout_ms < -1)
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "appender_flush: timeout_ms %lld (0 = do not wait, -1 = no limit)",
                           (long long)timeout_ms);
    if (on_app_thread(app))
        return errtext_set(VARLOG_ERR_STATE,
                           "appender_flush: called from the appender's own callback, it would "
                           "wait for itself");
    pthread_mutex_lock(&app->mu);
    size_t left = 0;
    varlog_err_t err = flush_locked(app, timeout_ms, &left);
    pthread_mutex_unlock(&app->mu);
    if (still_pending)
        *still_pending = left;
    if (err != VARLOG_OK)
        errtext_set(err, "appender_flush: %zu append calls still pending", left);
    return err;
}

/* Stops intake and the thread, which settles everything left (CLOSED), waits for it and
 * joins it (once, whoever gets there first: client destroy and close may both call this).
 * detach: the client is being destroyed, forget it. Returns the flush's result and, in
 * *client (optional), the client the appender still belongs to. */
static varlog_err_t app_shutdown(varlog_appender_t *app, int64_t timeout_ms, bool detach,
                                 varlog_client_t **client)
{
    pthread_mutex_lock(&app->mu);
    app->closing = true;
    pthread_cond_broadcast(&app->space);
    size_t left = 0;
    varlog_err_t err = app->stop ? VARLOG_OK : flush_locked(app, timeout_ms, &left);
    app->stop = true;
    app_wake_thread_locked(app);
    while (!app->thread_done)
        pthread_cond_wait(&app->settled, &app->mu);
    bool join = app->joinable;
    app->joinable = false;
    if (detach) {
        app->c = NULL;
        /* A shared thread ends with the client: the handle, valid for close alone, forgets it. */
        if (!app->own_exec)
            app->exec = NULL;
    }
    if (client)
        *client = app->c;
    pthread_mutex_unlock(&app->mu);
    if (join)
        app_exec_join_own(app);
    if (err != VARLOG_OK)
        errtext_set(err, "appender_close: %zu append calls were not settled in time (CLOSED)",
                    left);
    return err;
}

varlog_err_t varlog_appender_close(varlog_appender_t **appp, int64_t timeout_ms)
{
    if (!appp || !*appp)
        return VARLOG_OK;
    varlog_appender_t *app = *appp;
    if (on_app_thread(app))
        return errtext_set(VARLOG_ERR_STATE,
                           "appender_close: called from the appender's own callback, it would "
                           "wait for itself");
    varlog_client_t *c = NULL;
    varlog_err_t err = app_shutdown(app, timeout_ms, false, &c);
    if (c)
        client_remove_appender(c, app);
    *appp = NULL;
    app_unref(app);
    return err;
}

void appenders_close_all(varlog_client_t *c)
{
    for (;;) {
        pthread_mutex_lock(&c->mu);
        varlog_appender_t *app = c->appenders;
        if (app) {
            c->appenders = app->next_in_client;
            app->in_client_list = false;
            app_ref(app);
        }
        pthread_mutex_unlock(&c->mu);
        if (!app)
            return;
        app_shutdown(app, 0, true, NULL);
        app_unref(app);
    }
}

varlog_err_t varlog_appender_stats(varlog_appender_t *app, varlog_appender_stats_t *out)
{
    if (!app || !out)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "appender_stats: NULL argument");
    pthread_mutex_lock(&app->mu);
    *out = app->stats;
    out->pending_calls = app->pending_calls;
    out->pending_records = app->pending_records;
    out->pending_bytes = app->pending_bytes;
    out->batch_slots = app->n_slots;
    pthread_mutex_unlock(&app->mu);
    out->inflight_batches = atomic_load(&app->inflight_batches);
    return VARLOG_OK;
}
