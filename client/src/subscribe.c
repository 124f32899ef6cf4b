/* Subscriptions: the public calls, the handler form's thread, and the lifecycle (close from
 * any thread or from a handler, the client's destroy). The merge is subscribe_merge.c. */
#include <stdlib.h>
#include <string.h>

#include "errtext.h"
#include "subscribe_internal.h"

void sub_ref(varlog_subscription_t *sub)
{
    atomic_fetch_add_explicit(&sub->refs, 1, memory_order_relaxed);
}

static void sub_free(varlog_subscription_t *sub)
{
    for (size_t i = 0; i < sub->n_ls; i++) {
        sub_ls_t *ls = sub->ls[i];
        free(ls->target);
        wire_scratch_free(&ls->scratch);
        free(ls);
    }
    free(sub->ls);
    tq_destroy(sub->heap);
    rpc_poller_destroy(sub->poller); /* NULL after sub_streams_done */
    pthread_mutex_destroy(&sub->mu);
    pthread_cond_destroy(&sub->wake);
    pthread_cond_destroy(&sub->idle);
    free(sub);
}

void sub_unref(varlog_subscription_t *sub)
{
    if (atomic_fetch_sub_explicit(&sub->refs, 1, memory_order_acq_rel) == 1)
        sub_free(sub);
}

/* ---- ending -------------------------------------------------------------------------------- */

/* Stops delivery for good: wakes the consumer, waits until no varlog_subscription_next is
 * inside and the thread exited, releases the streams. Idempotent; a second caller waits for
 * the first. Not from the subscription's own thread. */
static void sub_shutdown(varlog_subscription_t *sub)
{
    pthread_mutex_lock(&sub->mu);
    sub->closing = true;
    pthread_mutex_unlock(&sub->mu);
    sub_wake(sub); /* a consumer polling for news must see closing */
    pthread_mutex_lock(&sub->mu);
    if (sub->shared) {
        /* Its shared thread shuts it down (subscribe_shared.c): after that, none of its
         * handlers runs or will. */
        while (!sub->shut)
            pthread_cond_wait(&sub->idle, &sub->mu);
        pthread_mutex_unlock(&sub->mu);
        return;
    }
    if (sub->shut || sub->shutting) {
        while (!sub->shut)
            pthread_cond_wait(&sub->idle, &sub->mu);
        pthread_mutex_unlock(&sub->mu);
        return;
    }
    sub->shutting = true;
    while (sub->in_next > 0)
        pthread_cond_wait(&sub->idle, &sub->mu);
    bool join = sub->thread_started && !sub->thread_joined;
    sub->thread_joined = true;
    pthread_mutex_unlock(&sub->mu);
    if (join)
        pthread_join(sub->thread, NULL);
    sub_streams_done(sub);
    pthread_mutex_lock(&sub->mu);
    sub->shut = true;
    pthread_cond_broadcast(&sub->idle);
    pthread_mutex_unlock(&sub->mu);
}

/* Takes sub off its client's list (c->mu held); false when it was not there. */
static bool client_unlink_locked(varlog_client_t *c, varlog_subscription_t *sub)
{
    for (varlog_subscription_t **p = &c->subscriptions; *p; p = &(*p)->next_open) {
        if (*p == sub) {
            *p = sub->next_open;
            /* What it delivered stays in the client's statistics. */
            c->cstats.closed_sub_entries += atomic_load(&sub->n_entries);
            c->cstats.closed_sub_bytes += atomic_load(&sub->n_bytes);
            uint64_t outages, outage_ms;
            uint32_t down;
            sub_outage_totals(sub, wire_now_ms(), &outages, &outage_ms, &down);
            c->cstats.closed_sub_outages += outages;
            c->cstats.closed_sub_outage_ms += outage_ms;
            atomic_store(&sub->in_client, false);
            return true;
        }
    }
    atomic_store(&sub->in_client, false);
    return false;
}

void sub_client_unlink(varlog_subscription_t *sub)
{
    if (!atomic_load(&sub->in_client))
        return;
    varlog_client_t *c = sub->c;
    pthread_mutex_lock(&c->mu);
    client_unlink_locked(c, sub);
    pthread_mutex_unlock(&c->mu);
}

/* The thread of a subscription closed from its handler, once it shut the subscription down:
 * joined, and the thread's reference dropped, unless a shutdown joined it already. */
static void join_self_closed(varlog_subscription_t *sub)
{
    pthread_mutex_lock(&sub->mu);
    bool join = !sub->thread_joined;
    sub->thread_joined = true;
    pthread_mutex_unlock(&sub->mu);
    if (join) {
        pthread_join(sub->thread, NULL);
        sub_unref(sub); /* the thread's, which it leaves to its joiner */
    }
}

void subscriptions_reap(varlog_client_t *c)
{
    for (;;) {
        varlog_subscription_t *done = NULL;
        pthread_mutex_lock(&c->mu);
        for (varlog_subscription_t *s = c->subscriptions; s && !done; s = s->next_open)
            if (atomic_load(&s->thread_exiting))
                done = s;
        if (done)
            client_unlink_locked(c, done);
        pthread_mutex_unlock(&c->mu);
        if (!done)
            return;
        join_self_closed(done);
    }
}

void subscriptions_close_all(varlog_client_t *c)
{
    for (;;) {
        pthread_mutex_lock(&c->mu);
        varlog_subscription_t *sub = c->subscriptions;
        if (sub) {
            c->subscriptions = sub->next_open;
            atomic_store(&sub->in_client, false);
            sub_ref(sub);
        }
        pthread_mutex_unlock(&c->mu);
        if (!sub)
            return;
        sub_shutdown(sub);
        /* Closed from its handler: its thread shut it down (or is doing so) and waits to be
         * joined; destroy joins every thread before it frees the client. */
        pthread_mutex_lock(&sub->mu);
        bool self_closed = sub->detached && !sub->shared; /* a shared thread is not its own */
        pthread_mutex_unlock(&sub->mu);
        if (self_closed)
            join_self_closed(sub);
        sub_unref(sub);
    }
}

void varlog_subscription_close(varlog_subscription_t **subp)
{
    if (!subp || !*subp)
        return;
    varlog_subscription_t *sub = *subp;
    *subp = NULL;
    if (sub_shared_on_thread(sub)) {
        /* From a handler on its shared thread (its own or another subscription's): the
         * thread shuts it down when it next looks at it, before it runs any handler of it;
         * waiting here would wait for this very thread. */
        pthread_mutex_lock(&sub->mu);
        sub->closing = true;
        sub->detached = true;
        pthread_mutex_unlock(&sub->mu);
        sub_shared_wake(sub);
    } else if (sub->thread_started && pthread_equal(pthread_self(), sub->thread)) {
        /* From a handler: the thread sees closing when the handler returns and shuts the
         * subscription down itself. It stays on the client's list until it is joined (by
         * the next subscribe, or the client's destroy): a destroy meanwhile must wait for
         * the thread, which still uses the client. */
        pthread_mutex_lock(&sub->mu);
        sub->closing = true;
        sub->detached = true;
        pthread_mutex_unlock(&sub->mu);
    } else {
        /* Shut down while still on the client's list: a destroy meanwhile finds it and
         * waits for the shutdown, rather than freeing the client under its thread. */
        sub_shutdown(sub);
        sub_client_unlink(sub);
    }
    sub_unref(sub);
}

/* ---- the handler form's thread ------------------------------------------------------------- */

void sub_hand_entry(varlog_subscription_t *sub, const varlog_entry_t *e)
{
    const varlog_subscribe_handlers_t *h = &sub->handlers;
    if (!sub->timing) {
        h->on_entry(e, h->opaque);
        return;
    }
    int64_t handed = stats_now_ns();
    h->on_entry(e, h->opaque);
    sub_stages_note(sub, e, handed, stats_now_ns() - handed);
}

void sub_hand_end(varlog_subscription_t *sub, varlog_err_t err)
{
    const varlog_subscribe_handlers_t *h = &sub->handlers;
    if (err == VARLOG_ERR_END) {
        if (h->on_end)
            h->on_end(h->opaque);
    } else if (err != VARLOG_ERR_CLOSED && err != VARLOG_ERR_TIMED_OUT) {
        if (h->on_error)
            h->on_error(err, sub->why, h->opaque);
    }
}

static void *sub_thread(void *arg)
{
    varlog_subscription_t *sub = arg;
    pthread_setname_np(pthread_self(), "varlog-sub");
    client_thread_own(sub->c);
    varlog_entry_t e;
    varlog_err_t err;
    while ((err = sub_step(sub, -1, &e)) == VARLOG_OK)
        sub_hand_entry(sub, &e);
    sub_hand_end(sub, err);
    /* It polls no more: the client's polling role goes back (rpc_client.c, the polling rule);
     * the poller stays until sub_streams_done. */
    rpc_poller_release(sub->poller);
    /* Closed from a handler and not shut down by the client's destroy meanwhile: the thread
     * shuts it down, then waits to be joined (subscriptions_reap, or the client's destroy),
     * leaving its reference to the joiner. */
    pthread_mutex_lock(&sub->mu);
    bool self_cleanup = sub->detached && !sub->shutting;
    if (self_cleanup)
        sub->shutting = true;
    pthread_mutex_unlock(&sub->mu);
    if (self_cleanup) {
        sub_streams_done(sub);
        pthread_mutex_lock(&sub->mu);
        sub->shut = true;
        pthread_cond_broadcast(&sub->idle);
        pthread_mutex_unlock(&sub->mu);
        atomic_store(&sub->thread_exiting, true);
        return NULL;
    }
    sub_unref(sub);
    return NULL;
}

/* ---- opening ------------------------------------------------------------------------------- */

typedef struct sub_request {
    const char *who;
    sub_order_t order;
    int32_t topic_id, log_stream_id;
    uint64_t begin, end;
    const varlog_subscribe_handlers_t *handlers; /* NULL: iterator form */
} sub_request_t;

static varlog_err_t sub_open(varlog_client_t *c, const sub_request_t *rq,
                             varlog_subscription_t **out)
{
    varlog_err_t err = client_enter(c);
    if (err != VARLOG_OK)
        return errtext_set(err, "%s: the client is closing", rq->who);
    subscriptions_reap(c);
    err = client_check_target(c, rq->who, rq->topic_id, rq->log_stream_id, -1);
    if (err != VARLOG_OK) {
        client_leave(c);
        return err;
    }
    varlog_subscription_t *sub = calloc(1, sizeof(*sub));
    if (!sub || tq_create(4, &sub->heap) != VARLOG_OK) {
        free(sub);
        client_leave(c);
        return errtext_set(VARLOG_ERR_NOMEM, "%s: out of memory", rq->who);
    }
    sub->c = c;
    sub->order = rq->order;
    sub->topic_id = rq->topic_id;
    sub->fixed_ls = rq->log_stream_id;
    sub->begin = sub->wanted = rq->begin;
    atomic_init(&sub->n_entries, 0);
    atomic_init(&sub->n_bytes, 0);
    atomic_init(&sub->n_duplicates, 0);
    atomic_init(&sub->n_next, rq->begin);
    atomic_init(&sub->n_seen_max, 0);
    sub->end = rq->end;
    atomic_init(&sub->win_end, 0);
    sub->win_ahead_at = UINT64_MAX; /* no read window until sub_window_begin sets one */
    sub->has_handlers = rq->handlers != NULL;
    if (rq->handlers)
        sub->handlers = *rq->handlers;
    atomic_init(&sub->refs, 1);
    atomic_init(&sub->in_client, false);
    atomic_init(&sub->thread_exiting, false);
    pthread_mutex_init(&sub->mu, NULL);
    wire_cond_init(&sub->wake);
    wire_cond_init(&sub->idle);
    sub->rng = (uint64_t)(uintptr_t)sub ^ (uint64_t)wire_now_ms();
    int64_t wake = c->conf->subscribe_wakeup_entries;
    if (wake > c->conf->subscribe_prefetch_entries) /* a full window could never wake it */
        wake = c->conf->subscribe_prefetch_entries;
    sub->wakeup_entries = (unsigned)wake;
    sub->wakeup_wait_us = c->conf->subscribe_wakeup_wait_us;
    sub->retry_timeout_ms = c->conf->subscribe_retry_timeout_ms;
    sub->timing = c->conf->subscribe_stage_timing;
    sub->observer = c->conf->subscribe_observer;
    sub->observer_opaque = c->conf->subscribe_observer_opaque;

    bool shared = rq->handlers && c->conf->subscribe_handler_threads > 0;
    if (shared) {
        /* Its streams open on the poller of the shared thread it is given to. */
        err = sub_shared_assign(sub);
        if (err != VARLOG_OK) {
            sub_unref(sub);
            client_leave(c);
            return errtext_set(err, "%s of topic %d: %s", rq->who, rq->topic_id,
                               err == VARLOG_ERR_INTERNAL ? "could not start a shared thread"
                                                          : varlog_err_str(err));
        }
    } else if (atomic_fetch_add(&c->self_receiving, 1) >= c->conf->subscribe_self_receive_max ||
               rpc_poller_new(c->rpc, &sub->poller) != VARLOG_OK) {
        /* Its own poller while the client has fewer than subscribe.self.receive.max; without
         * one (the limit, or gRPC refused a queue) gRPC's I/O thread receives for it. */
        sub->poller = NULL;
        atomic_fetch_sub(&c->self_receiving, 1);
    }
    /* The consumer takes the client's polling role before the streams bring anything, so that
     * the I/O thread does not read their first messages beside it (rpc_client.c, the polling
     * rule): the handler form's thread polls from its start for as long as it runs; in the
     * iterator form the role lapses as this call returns, for the caller's first next. */
    if (sub->poller && !shared) /* a shared thread holds it from its start */
        rpc_poller_hold(sub->poller);
    md_view_t *view = md_current(c);
    err = sub_add_log_streams(sub, view);
    md_view_unref(view);
    if (err == VARLOG_OK && sub->result != VARLOG_OK && sub->result != VARLOG_ERR_END)
        err = sub->result; /* a stream could not even start (client closing, no memory) */
    if (err == VARLOG_OK && shared) {
        sub_shared_attach(sub);
    } else if (err == VARLOG_OK && rq->handlers) {
        sub_ref(sub); /* the thread's */
        if (pthread_create(&sub->thread, NULL, sub_thread, sub) == 0) {
            sub->thread_started = true;
        } else {
            atomic_fetch_sub(&sub->refs, 1);
            err = VARLOG_ERR_INTERNAL;
        }
    }
    if (err != VARLOG_OK) {
        pthread_mutex_lock(&sub->mu);
        sub->closing = true; /* a retry task still pending must not queue a reopen */
        pthread_mutex_unlock(&sub->mu);
        sub_streams_done(sub);
        if (shared)
            sub_shared_abort(sub);
        sub_unref(sub);
        client_leave(c);
        return errtext_set(err, "%s of topic %d: %s", rq->who, rq->topic_id,
                           err == VARLOG_ERR_INTERNAL ? "could not start its thread"
                                                      : varlog_err_str(err));
    }
    if (!rq->handlers)
        rpc_poller_lapse(sub->poller); /* before a close can come: the caller's from here */
    /* Linked after the thread started: the client's destroy joins what it finds. */
    pthread_mutex_lock(&c->mu);
    sub->id = ++c->subscriptions_opened;
    sub->next_open = c->subscriptions;
    c->subscriptions = sub;
    atomic_store(&sub->in_client, true);
    pthread_mutex_unlock(&c->mu);
    client_leave(c);
    *out = sub;
    return VARLOG_OK;
}

/* The checks every form shares; OK or INVALID_ARG with its text. */
static varlog_err_t check_args(const sub_request_t *rq, varlog_client_t *c,
                               varlog_subscription_t **out, bool handler_form)
{
    if (!c || !out)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: %s is NULL", rq->who,
                           !c ? "client" : "out");
    *out = NULL;
    if (handler_form && (!rq->handlers || !rq->handlers->on_entry))
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: %s is NULL", rq->who,
                           !rq->handlers ? "handlers" : "handlers->on_entry");
    if (rq->topic_id < 1)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: topic id %d is not a valid id (>= 1)",
                           rq->who, rq->topic_id);
    if (rq->order == SUB_BY_LLSN && rq->log_stream_id < 1)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: log stream id %d is not a valid id (>= 1)",
                           rq->who, rq->log_stream_id);
    if (rq->begin >= rq->end)
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "%s: empty range: begin %llu is not below end %llu", rq->who,
                           (unsigned long long)rq->begin, (unsigned long long)rq->end);
    return VARLOG_OK;
}

static varlog_err_t subscribe_common(varlog_client_t *c, const sub_request_t *rq,
                                     varlog_subscription_t **out, bool handler_form)
{
    varlog_err_t err = check_args(rq, c, out, handler_form);
    return err != VARLOG_OK ? err : sub_open(c, rq, out);
}

varlog_err_t varlog_subscribe(varlog_client_t *client, int32_t topic_id, uint64_t begin_glsn,
                              uint64_t end_glsn, const varlog_subscribe_handlers_t *handlers,
                              varlog_subscription_t **out)
{
    sub_request_t rq = {.who = "subscribe",
                        .order = SUB_BY_GLSN,
                        .topic_id = topic_id,
                        .begin = begin_glsn,
                        .end = end_glsn,
                        .handlers = handlers};
    return subscribe_common(client, &rq, out, true);
}

varlog_err_t varlog_subscribe_iter(varlog_client_t *client, int32_t topic_id, uint64_t begin_glsn,
                                   uint64_t end_glsn, varlog_subscription_t **out)
{
    sub_request_t rq = {.who = "subscribe",
                        .order = SUB_BY_GLSN,
                        .topic_id = topic_id,
                        .begin = begin_glsn,
                        .end = end_glsn};
    return subscribe_common(client, &rq, out, false);
}

varlog_err_t varlog_subscribe_to(varlog_client_t *client, int32_t topic_id, int32_t log_stream_id,
                                 uint64_t begin_llsn, uint64_t end_llsn,
                                 const varlog_subscribe_handlers_t *handlers,
                                 varlog_subscription_t **out)
{
    sub_request_t rq = {.who = "subscribe_to",
                        .order = SUB_BY_LLSN,
                        .topic_id = topic_id,
                        .log_stream_id = log_stream_id,
                        .begin = begin_llsn,
                        .end = end_llsn,
                        .handlers = handlers};
    return subscribe_common(client, &rq, out, true);
}

varlog_err_t varlog_subscribe_to_iter(varlog_client_t *client, int32_t topic_id,
                                      int32_t log_stream_id, uint64_t begin_llsn, uint64_t end_llsn,
                                      varlog_subscription_t **out)
{
    sub_request_t rq = {.who = "subscribe_to",
                        .order = SUB_BY_LLSN,
                        .topic_id = topic_id,
                        .log_stream_id = log_stream_id,
                        .begin = begin_llsn,
                        .end = end_llsn};
    return subscribe_common(client, &rq, out, false);
}

/* ---- the iterator form --------------------------------------------------------------------- */

varlog_err_t varlog_subscription_next(varlog_subscription_t *sub, int64_t timeout_ms,
                                      varlog_entry_t *entry)
{
    if (!sub || !entry)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "subscription_next: %s is NULL",
                           !sub ? "sub" : "entry");
    if (sub->has_handlers)
        return errtext_set(VARLOG_ERR_STATE,
                           "subscription_next: the subscription delivers to its handlers");
    if (timeout_ms < -1)
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "subscription_next: timeout_ms %lld (0 = only what is buffered, -1 = "
                           "for ever)",
                           (long long)timeout_ms);
    pthread_mutex_lock(&sub->mu);
    if (sub->closing) {
        pthread_mutex_unlock(&sub->mu);
        return errtext_set(VARLOG_ERR_CLOSED, "subscription_next: the subscription is closed");
    }
    sub->in_next++;
    pthread_mutex_unlock(&sub->mu);
    int64_t deadline = timeout_ms < 0 ? -1 : wire_deadline_ms(timeout_ms);
    varlog_err_t err = sub_step(sub, deadline, entry);
    /* Inside the call (in_next held): a close from another thread waits for the observer. */
    if (err == VARLOG_OK && sub->timing)
        sub_stages_note(sub, entry, stats_now_ns(), -1);
    /* The caller may not come back for a long time (an iterator left unread): a poll of this
     * call took the client's polling role, which lapses and goes back to the I/O thread unless
     * the next call polls soon (rpc_client.c, the polling rule). Still inside the call: the
     * poller cannot go meanwhile. */
    rpc_poller_lapse(sub->poller);
    pthread_mutex_lock(&sub->mu);
    if (--sub->in_next == 0)
        pthread_cond_broadcast(&sub->idle);
    pthread_mutex_unlock(&sub->mu);
    switch (err) {
    case VARLOG_OK:
        return err;
    case VARLOG_ERR_TIMED_OUT:
        return errtext_set(err, "subscription_next: no entry within %lld ms",
                           (long long)timeout_ms);
    case VARLOG_ERR_CLOSED:
        return errtext_set(err, "subscription_next: the subscription is closed");
    case VARLOG_ERR_END:
        return errtext_set(err, "subscription_next: the range is complete");
    default:
        return errtext_set(err, "%s", sub->why);
    }
}

varlog_err_t varlog_subscription_stats(varlog_subscription_t *sub, varlog_subscription_stats_t *out)
{
    if (!sub || !out)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "subscription_stats: %s is NULL",
                           !sub ? "sub" : "out");
    pthread_mutex_lock(&sub->mu);
    *out = sub->stats;
    pthread_mutex_unlock(&sub->mu);
    out->entries = atomic_load_explicit(&sub->n_entries, memory_order_relaxed);
    out->bytes = atomic_load_explicit(&sub->n_bytes, memory_order_relaxed);
    out->duplicates = atomic_load_explicit(&sub->n_duplicates, memory_order_relaxed);
    out->next_position = atomic_load_explicit(&sub->n_next, memory_order_relaxed);
    return VARLOG_OK;
}
