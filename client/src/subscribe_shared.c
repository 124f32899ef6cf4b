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
/* Polls in a row that take what already came without waiting, before one that may sleep. */
#define QUICK_POLLS 64

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
    atomic_bool any_ready; /* ready != NULL, for a look without mu */
    /* the thread's */
    /* Its own ready list: what its streams' notify hooks put there inside its poll, what it
     * takes from `ready`, and what goes round again. */
    varlog_subscription_t *local, *local_tail;
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
    if (!atomic_load_explicit(&sub->sh_attached, memory_order_relaxed) || sub->sh_queued)
        return;
    sub->sh_queued = true;
    sub->sh_next = NULL;
    if (g->ready_tail)
        g->ready_tail->sh_next = sub;
    else
        g->ready = sub;
    g->ready_tail = sub;
    g->n_ready++;
    atomic_store_explicit(&g->any_ready, true, memory_order_relaxed);
    kick_locked(g);
}

/* The thread's own list: no lock. */
static void local_push(sub_shared_t *g, varlog_subscription_t *sub)
{
    if (sub->sh_local)
        return;
    sub->sh_local = true;
    sub->sh_local_next = NULL;
    if (g->local_tail)
        g->local_tail->sh_local_next = sub;
    else
        g->local = sub;
    g->local_tail = sub;
}

static varlog_subscription_t *local_pop(sub_shared_t *g)
{
    varlog_subscription_t *sub = g->local;
    if (!sub)
        return NULL;
    g->local = sub->sh_local_next;
    if (!g->local)
        g->local_tail = NULL;
    sub->sh_local = false;
    sub->sh_local_next = NULL;
    return sub;
}

static void local_remove(sub_shared_t *g, varlog_subscription_t *sub)
{
    if (!sub->sh_local)
        return;
    varlog_subscription_t *prev = NULL;
    for (varlog_subscription_t *s = g->local; s; prev = s, s = s->sh_local_next) {
        if (s != sub)
            continue;
        if (prev)
            prev->sh_local_next = s->sh_local_next;
        else
            g->local = s->sh_local_next;
        if (g->local_tail == s)
            g->local_tail = prev;
        break;
    }
    sub->sh_local = false;
    sub->sh_local_next = NULL;
}

/* Moves the ready list to the thread's own (mu held). */
static void take_ready_locked(sub_shared_t *g)
{
    for (varlog_subscription_t *sub = g->ready, *next; sub; sub = next) {
        next = sub->sh_next;
        sub->sh_queued = false;
        sub->sh_next = NULL;
        local_push(g, sub);
    }
    g->ready = g->ready_tail = NULL;
    g->n_ready = 0;
    atomic_store_explicit(&g->any_ready, false, memory_order_relaxed);
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
    if (g->n_ready == 0)
        atomic_store_explicit(&g->any_ready, false, memory_order_relaxed);
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

void sub_shared_notified_locked(varlog_subscription_t *sub)
{
    sub_shared_t *g = sub->shared;
    /* Attached: the thread holds a reference until it retires sub, on this very thread, which
     * takes it off the list. */
    if (tls_shared == g && atomic_load_explicit(&sub->sh_attached, memory_order_acquire)) {
        local_push(g, sub);
        return;
    }
    if (!sub->shut) { /* see sub_shared_wake */
        pthread_mutex_lock(&g->mu);
        ready_locked(g, sub);
        pthread_mutex_unlock(&g->mu);
    }
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
    local_remove(g, sub);
    pthread_mutex_lock(&g->mu);
    unready_locked(g, sub);
    atomic_store_explicit(&sub->sh_attached, false, memory_order_relaxed);
    g->n_subs--;
    pthread_mutex_unlock(&g->mu);
    pthread_mutex_lock(&sub->mu);
    sub->shut = true;
    pthread_cond_broadcast(&sub->idle);
    pthread_mutex_unlock(&sub->mu);
    sub_unref(sub); /* the thread's */
}

/* Hands out what sub has buffered (at most SERVE_BATCH entries), or its end; now_ms: the
 * clock for its periodic check when that is due, else 0. */
static void serve(sub_shared_t *g, varlog_subscription_t *sub, int64_t now_ms)
{
    if (!sub->sh_known) {
        if (g->n == g->cap) {
            size_t cap = g->cap ? g->cap * 2 : 16;
            varlog_subscription_t **a = realloc(g->subs, cap * sizeof(*a));
            if (!a) { /* served from the ready list alone until memory comes back */
                local_push(g, sub);
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
        sub->sh_now_ms = now_ms;
        varlog_err_t err = sub_step(sub, 0, &e);
        sub->sh_now_ms = now_ms = 0; /* a handler may take long: not for the next step */
        if (err == VARLOG_OK) {
            sub_hand_entry(sub, &e);
            continue;
        }
        if (err == VARLOG_ERR_TIMED_OUT) {
            /* Nothing buffered: it waits for the thread's next poll. */
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
    local_push(g, sub); /* more may be buffered: after the others */
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
            serve(g, sub, now);
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
    unsigned quick = 0;     /* polls in a row that did not wait */
    for (;;) {
        /* What is ready now, once each: one that stays ready goes round again after the
         * thread polled, so that gRPC's receives go on. Others' wakes (a close, a retry, a
         * gap's answer) need mu; what the thread's own poll brought does not. */
        if (atomic_load_explicit(&g->any_ready, memory_order_relaxed)) {
            pthread_mutex_lock(&g->mu);
            take_ready_locked(g);
            pthread_mutex_unlock(&g->mu);
        }
        size_t round = 0;
        for (const varlog_subscription_t *s = g->local; s; s = s->sh_local_next)
            round++;
        for (size_t i = 0; i < round; i++) {
            varlog_subscription_t *sub = local_pop(g);
            if (!sub)
                break;
            serve(g, sub, 0);
        }
        /* The checks of subscriptions with nothing to hand out: when the poll timed out at
         * next_due, or now and then while completions keep it from timing out. Not at every
         * poll: a read per wake-up would be a read per entry on a quiet topic. */
        if (due) {
            /* Read here, not assumed from next_due: the steps use it as their clock. */
            serve_due(g, wire_now_ms());
            due = false;
        } else if (++unclocked >= CLOCK_EVERY_POLLS) {
            unclocked = 0;
            int64_t now = wire_now_ms();
            if (now >= g->next_due)
                serve_due(g, now);
        }
        if (g->local)
            continue; /* a subscription had more than a turn's worth */
        /* What already came, taken without a clock read or a lock: completions stream in
         * while entries do. Bounded, so that the look under mu below (the thread's end,
         * wakes from others) and the sleeping poll's timeout still come. */
        if (quick < QUICK_POLLS && rpc_poller_poll_ready(poller) != RPC_POLL_TIMEOUT) {
            quick++;
            continue;
        }
        quick = 0;
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
    atomic_store_explicit(&sub->sh_attached, true, memory_order_release);
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
