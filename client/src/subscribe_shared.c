/* Handler-form subscriptions sharing threads (subscribe.handler.threads >= 1): each shared
 * thread ("varlog-sub") owns one poller on which its subscriptions' streams are opened, and
 * serves them one at a time. Why: a thread per subscription of 100 entries/s cost 64
 * threads and a context switch per entry each (bench_handles); one thread polling one
 * queue for all of them wakes once for what arrived together.
 *
 * The thread never waits inside a subscription: it steps one (sub_step) with a deadline
 * already passed, so the step hands out what is buffered, runs the periodic check when it
 * is due, and returns TIMED_OUT instead of polling. It sleeps only in its poller's poll,
 * woken by a completion (the notify hooks run inside that poll and put their subscription on
 * the ready list) or by a kick (retry tasks, gap answers, closes, from other threads).
 *
 * Close: a subscription is shut down (streams released, retired from the thread) by the
 * thread alone, when it finds `closing`; a close from one of its handlers only marks it and
 * returns, a close from any other thread waits for `shut`. So no handler of a subscription
 * runs once its close returned, and a handler may close any subscription of its thread. */
#include <stdlib.h>

#include "errtext.h"
#include "subscribe_internal.h"

/* Entries handed out from one subscription in a row before the thread looks at the others:
 * a subscription that always has some must not starve the rest, nor gRPC's receives. */
#define SERVE_BATCH 64
/* Polls after which the thread reads the clock for the periodic checks even though no poll
 * timed out (completions kept coming). */
#define CLOCK_EVERY_POLLS 64

struct sub_shared {
    varlog_client_t *c;
    pthread_mutex_t mu;
    /* mu */
    rpc_poller_t *poller; /* while a thread runs */
    pthread_t thread;
    bool started;    /* a thread was created and not joined yet */
    bool exited;     /* it left its loop (its last subscription retired): join before a new one */
    bool stop;       /* the client's destroy: no new subscription */
    bool waiting;    /* it polls for news ... */
    bool kicked;     /* ... and was kicked out of that poll already */
    unsigned n_subs; /* given to it and not retired */
    varlog_subscription_t *ready, *ready_tail;
    size_t n_ready;
    /* the thread's */
    varlog_subscription_t **subs;
    size_t n, cap;
    int64_t next_due; /* the earliest periodic check of its subscriptions (INT64_MAX: none) */
};

/* The shared thread the calling thread is, if any. */
static _Thread_local sub_shared_t *tls_shared;

static size_t n_threads(const varlog_client_t *c)
{
    return (size_t)c->conf->subscribe_handler_threads;
}

/* Kicks the thread out of its poll, once per poll; never from the thread itself (it is not
 * in its poll, and sees the ready list before its next one). mu held: the poller cannot go
 * meanwhile (the thread destroys it only after it left its loop, which it does under mu). */
static void kick_locked(sub_shared_t *g)
{
    if (g->waiting && !g->kicked && tls_shared != g) {
        g->kicked = true;
        rpc_poller_kick(g->poller);
    }
}

static void ready_locked(sub_shared_t *g, varlog_subscription_t *sub)
{
    if (!sub->sh_attached || sub->sh_queued)
        return;
    sub->sh_queued = true;
    sub->sh_next = NULL;
    if (g->ready_tail)
        g->ready_tail->sh_next = sub;
    else
        g->ready = sub;
    g->ready_tail = sub;
    g->n_ready++;
    kick_locked(g);
}

static varlog_subscription_t *pop_ready_locked(sub_shared_t *g)
{
    varlog_subscription_t *sub = g->ready;
    if (!sub)
        return NULL;
    g->ready = sub->sh_next;
    if (!g->ready)
        g->ready_tail = NULL;
    g->n_ready--;
    sub->sh_queued = false;
    sub->sh_next = NULL;
    return sub;
}

static void unready_locked(sub_shared_t *g, varlog_subscription_t *sub)
{
    if (!sub->sh_queued)
        return;
    varlog_subscription_t *prev = NULL;
    for (varlog_subscription_t *s = g->ready; s; prev = s, s = s->sh_next) {
        if (s != sub)
            continue;
        if (prev)
            prev->sh_next = s->sh_next;
        else
            g->ready = s->sh_next;
        if (g->ready_tail == s)
            g->ready_tail = prev;
        break;
    }
    g->n_ready--;
    sub->sh_queued = false;
    sub->sh_next = NULL;
}

void sub_shared_wake(varlog_subscription_t *sub)
{
    /* Under sub->mu (the order: a stream's lock, sub->mu, the thread's mu): once the thread
     * retired the subscription (shut), the client's destroy may free the thread's slot while
     * the handle lives on, and a late wake (a close of the handle, a gap lookup's answer)
     * must not touch it. */
    sub_shared_t *g = sub->shared;
    pthread_mutex_lock(&sub->mu);
    if (!sub->shut) {
        pthread_mutex_lock(&g->mu);
        ready_locked(g, sub);
        pthread_mutex_unlock(&g->mu);
    }
    pthread_mutex_unlock(&sub->mu);
}

bool sub_shared_on_thread(const varlog_subscription_t *sub)
{
    return sub->shared && tls_shared == sub->shared;
}

/* ---- the thread ---------------------------------------------------------------------------- */

static bool closing(varlog_subscription_t *sub)
{
    pthread_mutex_lock(&sub->mu);
    bool c = sub->closing;
    pthread_mutex_unlock(&sub->mu);
    return c;
}

/* sub was closed: releases its streams (their last completions run in later polls), takes it
 * off the thread and wakes its closer. */
static void retire(sub_shared_t *g, varlog_subscription_t *sub)
{
    sub_streams_done(sub);
    pthread_mutex_lock(&sub->mu);
    bool detached = sub->detached;
    pthread_mutex_unlock(&sub->mu);
    if (detached) /* closed from a handler: nobody else takes it off the client's list */
        sub_client_unlink(sub);
    for (size_t i = 0; i < g->n; i++) {
        if (g->subs[i] == sub) {
            g->subs[i] = g->subs[--g->n];
            break;
        }
    }
    pthread_mutex_lock(&g->mu);
    unready_locked(g, sub);
    sub->sh_attached = false;
    g->n_subs--;
    pthread_mutex_unlock(&g->mu);
    pthread_mutex_lock(&sub->mu);
    sub->shut = true;
    pthread_cond_broadcast(&sub->idle);
    pthread_mutex_unlock(&sub->mu);
    sub_unref(sub); /* the thread's */
}

/* Hands out what sub has buffered (at most SERVE_BATCH entries), or its end. */
static void serve(sub_shared_t *g, varlog_subscription_t *sub)
{
    if (!sub->sh_known) {
        if (g->n == g->cap) {
            size_t cap = g->cap ? g->cap * 2 : 16;
            varlog_subscription_t **a = realloc(g->subs, cap * sizeof(*a));
            if (!a) { /* served from the ready list alone until memory comes back */
                sub_shared_wake(sub);
                return;
            }
            g->subs = a;
            g->cap = cap;
        }
        g->subs[g->n++] = sub;
        sub->sh_known = true;
    }
    if (sub->sh_ended) {
        if (closing(sub))
            retire(g, sub);
        return;
    }
    varlog_entry_t e;
    for (int i = 0; i < SERVE_BATCH; i++) {
        varlog_err_t err = sub_step(sub, 0, &e);
        if (err == VARLOG_OK) {
            sub_hand_entry(sub, &e);
            continue;
        }
        if (err == VARLOG_ERR_TIMED_OUT) {
            /* Nothing buffered: it waits for the thread's next poll, which the step's clock
             * read is for (the own thread reads it once per wait too). */
            sub->waits++;
            if (sub->next_check_ms < g->next_due)
                g->next_due = sub->next_check_ms;
            return;
        }
        if (err == VARLOG_ERR_CLOSED) {
            retire(g, sub);
            return;
        }
        sub->sh_ended = true;
        sub_hand_end(sub, err);
        if (closing(sub)) /* from that very handler */
            retire(g, sub);
        return;
    }
    sub_shared_wake(sub); /* more may be buffered: after the others */
}

/* Serves the subscriptions whose periodic check is due (new log streams, stalls, outages),
 * and sets when the next one is. */
static void serve_due(sub_shared_t *g, int64_t now)
{
    /* Backwards: a retire moves the last one, already seen, into the slot. */
    for (size_t i = g->n; i-- > 0;) {
        if (i >= g->n)
            continue;
        varlog_subscription_t *sub = g->subs[i];
        if (!sub->sh_ended && sub->next_check_ms <= now)
            serve(g, sub);
    }
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < g->n; i++)
        if (!g->subs[i]->sh_ended && g->subs[i]->next_check_ms < next)
            next = g->subs[i]->next_check_ms;
    g->next_due = next;
}

static void *shared_thread(void *arg)
{
    sub_shared_t *g = arg;
    pthread_setname_np(pthread_self(), "varlog-sub");
    client_thread_own(g->c);
    tls_shared = g;
    pthread_mutex_lock(&g->mu);
    rpc_poller_t *poller = g->poller;
    pthread_mutex_unlock(&g->mu);
    rpc_poller_own(poller);
    g->next_due = INT64_MAX;
    bool due = false;       /* next_due passed (the poll timed out): no clock read needed */
    unsigned unclocked = 0; /* polls since the thread last read the clock */
    for (;;) {
        /* What is ready now, once each: one that stays ready goes round again after the
         * thread polled, so that gRPC's receives go on. */
        pthread_mutex_lock(&g->mu);
        size_t round = g->n_ready;
        pthread_mutex_unlock(&g->mu);
        for (size_t i = 0; i < round; i++) {
            pthread_mutex_lock(&g->mu);
            varlog_subscription_t *sub = pop_ready_locked(g);
            pthread_mutex_unlock(&g->mu);
            if (!sub)
                break;
            serve(g, sub);
        }
        /* The checks of subscriptions with nothing to hand out: when the poll timed out at
         * next_due, or now and then while completions keep it from timing out. Not at every
         * poll: a read per wake-up would be a read per entry on a quiet topic. */
        if (due) {
            serve_due(g, g->next_due);
            due = false;
        } else if (++unclocked >= CLOCK_EVERY_POLLS) {
            unclocked = 0;
            int64_t now = wire_now_ms();
            if (now >= g->next_due)
                serve_due(g, now);
        }
        pthread_mutex_lock(&g->mu);
        if (g->n_subs == 0) {
            /* Its last subscription closed: the thread ends; the next subscription given to
             * this slot, or the client's destroy, joins it. */
            g->exited = true;
            g->poller = NULL;
            pthread_mutex_unlock(&g->mu);
            break;
        }
        bool poll = g->ready == NULL;
        if (poll) {
            g->waiting = true;
            g->kicked = false;
        }
        pthread_mutex_unlock(&g->mu);
        if (!poll)
            continue;
        /* The thread holds the client's polling role for as long as it runs (taken on its
         * behalf when it was started), as a subscription's own thread does; it sleeps
         * nowhere but here, so it never has to release it. */
        due = rpc_poller_poll(poller, g->next_due) == RPC_POLL_TIMEOUT;
        pthread_mutex_lock(&g->mu);
        g->waiting = false;
        pthread_mutex_unlock(&g->mu);
    }
    /* The streams of its subscriptions were released at their retire: their last
     * completions run here; the role goes back to the I/O thread. */
    rpc_poller_destroy(poller);
    return NULL;
}

/* ---- giving subscriptions to threads ------------------------------------------------------ */

/* Joins g's thread if it ended. g->mu held: the thread takes no lock once it ended. */
static void join_exited_locked(sub_shared_t *g)
{
    if (g->started && g->exited) {
        pthread_join(g->thread, NULL);
        g->started = false;
        g->exited = false;
    }
}

varlog_err_t sub_shared_assign(varlog_subscription_t *sub)
{
    varlog_client_t *c = sub->c;
    size_t n = n_threads(c);
    pthread_mutex_lock(&c->mu);
    if (!c->shared_subs) {
        sub_shared_t *a = calloc(n, sizeof(*a));
        if (!a) {
            pthread_mutex_unlock(&c->mu);
            return VARLOG_ERR_NOMEM;
        }
        for (size_t i = 0; i < n; i++) {
            a[i].c = c;
            pthread_mutex_init(&a[i].mu, NULL);
        }
        c->shared_subs = a;
    }
    /* The least loaded, counted under c->mu so that concurrent subscribes spread. */
    sub_shared_t *g = NULL;
    unsigned least = 0;
    for (size_t i = 0; i < n; i++) {
        sub_shared_t *s = &c->shared_subs[i];
        pthread_mutex_lock(&s->mu);
        unsigned load = s->n_subs;
        pthread_mutex_unlock(&s->mu);
        if (!g || load < least) {
            g = s;
            least = load;
        }
    }
    pthread_mutex_lock(&g->mu);
    g->n_subs++; /* from here the thread does not end */
    pthread_mutex_unlock(&g->mu);
    pthread_mutex_unlock(&c->mu);

    varlog_err_t err = VARLOG_OK;
    pthread_mutex_lock(&g->mu);
    join_exited_locked(g);
    if (g->stop) {
        err = VARLOG_ERR_CLOSED;
    } else if (!g->started) {
        err = rpc_poller_new(c->rpc, &g->poller);
        if (err == VARLOG_OK) {
            /* On the thread's behalf, before any stream brings anything (the polling rule):
             * it polls from its start for as long as it runs. */
            rpc_poller_hold(g->poller);
            if (pthread_create(&g->thread, NULL, shared_thread, g) == 0) {
                g->started = true;
            } else {
                rpc_poller_destroy(g->poller); /* no stream yet: returns at once */
                g->poller = NULL;
                err = VARLOG_ERR_INTERNAL;
            }
        }
    }
    if (err != VARLOG_OK) {
        g->n_subs--;
    } else {
        sub->shared = g;
        sub->poller = g->poller;
    }
    pthread_mutex_unlock(&g->mu);
    return err;
}

void sub_shared_attach(varlog_subscription_t *sub)
{
    sub_shared_t *g = sub->shared;
    sub_ref(sub); /* the thread's, dropped at its retire */
    pthread_mutex_lock(&g->mu);
    sub->sh_attached = true;
    ready_locked(g, sub); /* the news its streams brought meanwhile */
    pthread_mutex_unlock(&g->mu);
}

void sub_shared_abort(varlog_subscription_t *sub)
{
    sub_shared_t *g = sub->shared;
    pthread_mutex_lock(&g->mu);
    g->n_subs--;
    if (g->n_subs == 0) /* it may end: it must see so */
        kick_locked(g);
    pthread_mutex_unlock(&g->mu);
}

void sub_shared_stop_all(varlog_client_t *c)
{
    pthread_mutex_lock(&c->mu);
    sub_shared_t *a = c->shared_subs;
    c->shared_subs = NULL;
    pthread_mutex_unlock(&c->mu);
    if (!a)
        return;
    for (size_t i = 0; i < n_threads(c); i++) {
        sub_shared_t *g = &a[i];
        pthread_mutex_lock(&g->mu);
        g->stop = true;
        kick_locked(g);
        bool join = g->started;
        g->started = false;
        pthread_mutex_unlock(&g->mu);
        /* Every subscription closed: a running thread ends at its next look. */
        if (join)
            pthread_join(g->thread, NULL);
        free(g->subs);
        pthread_mutex_destroy(&g->mu);
    }
    free(a);
}
