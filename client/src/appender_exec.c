/* The threads that run pipelined appenders: an appender's own (appender.threads 0), or one
 * of the few a client's appenders share. Either way one loop runs them: every member's work,
 * then every member's plan, then one sleep for them all, in the completion queue their
 * streams share or on a condition variable. See appender_internal.h, struct app_exec. */
#include <stdlib.h>

#include "appender_internal.h"
#include "errtext.h"
#include "wire.h"

#define THREAD_NAME "varlog-appender"

static void exec_free(app_exec_t *ex)
{
    rpc_poller_destroy(ex->poller); /* NULL once its thread ran: it destroys its own */
    pthread_cond_destroy(&ex->wake);
    pthread_mutex_destroy(&ex->mu);
    free(ex->joining);
    free(ex);
}

static app_exec_t *exec_new(varlog_client_t *c, bool dedicated)
{
    app_exec_t *ex = calloc(1, sizeof(*ex));
    if (!ex)
        return NULL;
    ex->c = c;
    ex->dedicated = dedicated;
    pthread_mutex_init(&ex->mu, NULL);
    wire_cond_init(&ex->wake);
    if (rpc_poller_new(c->rpc, &ex->poller) != VARLOG_OK) {
        exec_free(ex);
        return NULL;
    }
    return ex;
}

/* With ex->mu: the sleeping thread wakes (a kick for its poll, unless from intake). */
static void exec_wake_locked(app_exec_t *ex, bool from_intake)
{
    if (from_intake)
        ex->intake_news = true;
    else
        ex->news = true;
    if (!ex->sleeping)
        return;
    if (!ex->in_poll) {
        pthread_cond_signal(&ex->wake);
    } else if (!from_intake && !ex->kicked) {
        ex->kicked = true;
        rpc_poller_kick(ex->poller);
    }
}

void app_exec_notify_locked(varlog_appender_t *app, bool from_intake)
{
    app_exec_t *ex = app->exec;
    pthread_mutex_lock(&ex->mu);
    exec_wake_locked(ex, from_intake);
    pthread_mutex_unlock(&ex->mu);
}

bool app_exec_current(const varlog_appender_t *app)
{
    return app->exec->started && pthread_equal(pthread_self(), app->exec->thread);
}

/* Whether the thread may go on polling: no member has an answer to read and one waits for
 * answers. */
static bool answers_awaited(varlog_appender_t *const *apps, size_t n)
{
    bool awaited = false;
    for (size_t i = 0; i < n; i++) {
        if (app_readable(apps[i]))
            return false;
        awaited = awaited || app_answers_awaited(apps[i]);
    }
    return awaited;
}

/* Members that joined since the last round, into the thread's array; false when it could
 * not grow (they stay joining, and the next round tries again). */
static bool take_joining(app_exec_t *ex, varlog_appender_t ***apps, size_t *n, size_t *cap)
{
    if (ex->n_joining == 0)
        return true;
    if (*n + ex->n_joining > *cap) {
        size_t want = (*n + ex->n_joining) * 2;
        varlog_appender_t **p = realloc(*apps, want * sizeof(*p));
        if (!p)
            return false;
        *apps = p;
        *cap = want;
    }
    for (size_t i = 0; i < ex->n_joining; i++)
        (*apps)[(*n)++] = ex->joining[i];
    ex->n_joining = 0;
    return true;
}

static void *exec_main(void *arg)
{
    app_exec_t *ex = arg;
    pthread_setname_np(pthread_self(), THREAD_NAME);
    client_thread_own(ex->c);
    rpc_poller_own(ex->poller);
    app_thread_begins(ex->poller);
    varlog_appender_t **apps = NULL;
    size_t n = 0, cap = 0;
    bool drain = false;
    for (;;) {
        /* After a sleep on wake: completions that came meanwhile (a stream's end, a send's)
         * are run before anything is sent on the streams. */
        if (drain)
            while (rpc_poller_poll(ex->poller, 0) != RPC_POLL_TIMEOUT)
                ;
        pthread_mutex_lock(&ex->mu);
        /* What comes after this is seen by a plan, or sets them again. */
        ex->news = false;
        ex->intake_news = false;
        bool grown = take_joining(ex, &apps, &n, &cap);
        bool stop = n == 0 && ex->n_joining == 0 && (ex->dedicated || ex->stop);
        pthread_mutex_unlock(&ex->mu);
        if (stop)
            break;

        int64_t now = wire_now_ms();
        for (size_t i = 0; i < n; i++)
            app_round_work(apps[i], now);
        int64_t round_began = now;
        now = wire_now_ms();
        /* A round that kept this thread busy (a slow callback, a stall): what reached its
         * streams meanwhile is queued on its poller, which only it runs, and is learnt before
         * the deadlines are checked, so that the check reads an answer or an end already there
         * before it cancels, as it did when the I/O thread buffered them. Not in every round:
         * a poll that finds nothing costs a request at depth 1 a millisecond or more. */
        if (now - round_began >= 2)
            while (rpc_poller_poll(ex->poller, 0) != RPC_POLL_TIMEOUT)
                ;
        int64_t next = grown ? INT64_MAX : now + 10;
        int64_t slice = INT64_MAX;
        bool work = false, expecting = false;
        size_t streams = 0;
        for (size_t i = 0; i < n;) {
            app_plan_t plan;
            if (!app_round_plan(apps[i], now, &plan)) {
                app_round_leave(apps[i]); /* it may be freed now */
                apps[i] = apps[--n];
                pthread_mutex_lock(&ex->mu);
                ex->load--;
                pthread_mutex_unlock(&ex->mu);
                work = true; /* its callbacks took time: look again before sleeping */
                continue;
            }
            work = work || plan.work;
            expecting = expecting || plan.expecting;
            streams += plan.streams;
            if (plan.next < next)
                next = plan.next;
            if (plan.intake_wakes && apps[i]->poll_slice_ms < slice)
                slice = apps[i]->poll_slice_ms;
            i++;
        }
        /* Streams beyond the members' own: ones they let go of, whose ends are on the way. */
        expecting = expecting || rpc_poller_live(ex->poller) > streams;
        drain = false;
        pthread_mutex_lock(&ex->mu);
        /* Intake's news keeps it from a sleep on wake only: a poll is sliced while intake could
         * let a batch out, and a round for each record a producer queues meanwhile would cost
         * more than the slice's wait (bench_append, topic-wide, k = 8: 10 % more CPU per
         * record when intake's news cut every poll short). */
        if (work || next <= now || ex->news || (ex->intake_news && !expecting) ||
            ex->n_joining > 0 || (ex->stop && n == 0)) {
            pthread_mutex_unlock(&ex->mu);
            continue;
        }
        ex->sleeping = true;
        if (expecting) {
            /* Answers, ends and sends of the streams complete in here, on this thread.
             * Intake does not kick the poll (a kick is an allocation in gRPC, and an append
             * allocates nothing): while it could let a batch out, the poll returns within a
             * slice no longer than the linger, so that a batch opened meanwhile is not late
             * and a full one waits at most that long (or until the next answer, usually
             * sooner). */
            int64_t until = next;
            if (slice != INT64_MAX && now + slice < until)
                until = now + slice;
            ex->in_poll = true;
            ex->kicked = false;
            pthread_mutex_unlock(&ex->mu);
            /* A completion that leaves nothing to read (a send's, a released stream's) needs
             * no round of the loop while answers are still on their way. */
            while (rpc_poller_poll(ex->poller, until) == RPC_POLL_RAN && answers_awaited(apps, n))
                ;
            pthread_mutex_lock(&ex->mu);
            ex->in_poll = false;
            ex->sleeping = false;
            pthread_mutex_unlock(&ex->mu);
        } else if (rpc_poller_holding(ex->poller)) {
            /* It would sleep on wake, for as long as no record comes, holding the client's
             * polling role from a poll of an earlier round: it gives the role back first
             * (rpc_client.c, the polling rule); the next round sleeps, unless something came.
             * Only when it goes to sleep: releasing whenever nothing was on its way cost a
             * hand-over per append at depth 1 (bench_append, 20-26 -> 41-72
             * cpu-us/record). */
            ex->sleeping = false;
            pthread_mutex_unlock(&ex->mu);
            rpc_poller_release(ex->poller);
        } else {
            if (next == INT64_MAX) {
                pthread_cond_wait(&ex->wake, &ex->mu);
            } else {
                struct timespec until;
                abs_deadline(&until, next - now);
                pthread_cond_timedwait(&ex->wake, &ex->mu, &until);
            }
            ex->sleeping = false;
            pthread_mutex_unlock(&ex->mu);
            drain = rpc_poller_live(ex->poller) > 0;
        }
        /* Awake: a waker tells a member's thread again only after its next plan. */
        for (size_t i = 0; i < n; i++) {
            pthread_mutex_lock(&apps[i]->mu);
            apps[i]->thread_idle = false;
            pthread_mutex_unlock(&apps[i]->mu);
        }
    }
    free(apps);
    /* Every stream of its members was cancelled and released: their last completions come
     * promptly. */
    rpc_poller_destroy(ex->poller);
    pthread_mutex_lock(&ex->mu);
    ex->poller = NULL;
    pthread_mutex_unlock(&ex->mu);
    return NULL;
}

/* With ex->mu: room for one more joining member. */
static bool reserve_joining_locked(app_exec_t *ex)
{
    if (ex->n_joining < ex->joining_cap)
        return true;
    size_t want = ex->joining_cap ? ex->joining_cap * 2 : 4;
    varlog_appender_t **p = realloc(ex->joining, want * sizeof(*p));
    if (!p)
        return false;
    ex->joining = p;
    ex->joining_cap = want;
    return true;
}

static varlog_err_t exec_start_thread(app_exec_t *ex)
{
    if (pthread_create(&ex->thread, NULL, exec_main, ex) != 0)
        return VARLOG_ERR_INTERNAL;
    /* Named before the appender is returned (the thread names itself too late for a look
     * right after): what a process's thread list shows is then exact. */
    pthread_setname_np(ex->thread, THREAD_NAME);
    ex->started = true;
    return VARLOG_OK;
}

/* The least loaded of the client's shared threads, a new one while there are fewer than
 * appender.threads and each has an appender already. With c->mu. */
static varlog_err_t pick_shared_locked(varlog_client_t *c, app_exec_t **out)
{
    size_t max = (size_t)c->conf->appender_threads;
    app_exec_t *best = NULL;
    size_t best_load = SIZE_MAX;
    for (size_t i = 0; i < c->n_app_execs; i++) {
        app_exec_t *ex = c->app_execs[i];
        pthread_mutex_lock(&ex->mu);
        size_t load = ex->load;
        pthread_mutex_unlock(&ex->mu);
        if (load < best_load) {
            best = ex;
            best_load = load;
        }
    }
    if (best && (best_load == 0 || c->n_app_execs >= max)) {
        *out = best;
        return VARLOG_OK;
    }
    app_exec_t **grown = realloc(c->app_execs, (c->n_app_execs + 1) * sizeof(*grown));
    if (!grown)
        return errtext_set(VARLOG_ERR_NOMEM, "appender: out of memory for a shared thread");
    c->app_execs = grown;
    app_exec_t *ex = exec_new(c, false);
    if (!ex)
        return errtext_set(VARLOG_ERR_INTERNAL,
                           "appender: could not create a completion queue for a shared thread");
    if (exec_start_thread(ex) != VARLOG_OK) {
        exec_free(ex);
        return errtext_set(VARLOG_ERR_INTERNAL, "appender: could not start a shared thread");
    }
    c->app_execs[c->n_app_execs++] = ex;
    *out = ex;
    return VARLOG_OK;
}

varlog_err_t app_exec_attach(varlog_appender_t *app)
{
    varlog_client_t *c = app->c;
    app_exec_t *ex = NULL;
    if (c->conf->appender_threads == 0) {
        ex = exec_new(c, true);
        if (!ex)
            return errtext_set(VARLOG_ERR_INTERNAL,
                               "appender: could not create a completion queue");
    } else {
        pthread_mutex_lock(&c->mu);
        varlog_err_t err = c->closing
                               ? errtext_set(VARLOG_ERR_CLOSED, "appender: the client is closing")
                               : pick_shared_locked(c, &ex);
        if (err == VARLOG_OK) {
            pthread_mutex_lock(&ex->mu);
            ex->load++; /* counted now, so that appenders created together spread out */
            pthread_mutex_unlock(&ex->mu);
        }
        pthread_mutex_unlock(&c->mu);
        if (err != VARLOG_OK)
            return err;
    }
    app->exec = ex;
    app->own_exec = ex->dedicated;
    app->poller = ex->poller;
    return VARLOG_OK;
}

varlog_err_t app_exec_start(varlog_appender_t *app)
{
    app_exec_t *ex = app->exec;
    pthread_mutex_lock(&ex->mu);
    bool room = reserve_joining_locked(ex);
    if (room) {
        ex->joining[ex->n_joining++] = app;
        exec_wake_locked(ex, false);
    }
    pthread_mutex_unlock(&ex->mu);
    if (!room)
        return errtext_set(VARLOG_ERR_NOMEM, "appender_new: out of memory");
    if (!ex->dedicated || exec_start_thread(ex) == VARLOG_OK)
        return VARLOG_OK;
    ex->n_joining = 0; /* no thread saw it */
    return errtext_set(VARLOG_ERR_INTERNAL, "appender_new: could not start its thread");
}

void app_exec_join_own(varlog_appender_t *app)
{
    if (app->own_exec)
        pthread_join(app->exec->thread, NULL);
}

void app_exec_free_own(varlog_appender_t *app)
{
    app_exec_t *ex = app->exec;
    if (!ex)
        return;
    /* A shared thread may be gone: the last reference (a retry task's, a batch body's) can
     * outlive the client's destroy. Only the appender's own flag is read. */
    if (app->own_exec) {
        exec_free(ex);
    } else if (!app->has_thread) {
        /* Counted when it was picked; it never joined. */
        pthread_mutex_lock(&ex->mu);
        ex->load--;
        pthread_mutex_unlock(&ex->mu);
    }
}

void app_execs_stop(varlog_client_t *c)
{
    pthread_mutex_lock(&c->mu);
    app_exec_t **execs = c->app_execs;
    size_t n = c->n_app_execs;
    c->app_execs = NULL;
    c->n_app_execs = 0;
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < n; i++) {
        app_exec_t *ex = execs[i];
        pthread_mutex_lock(&ex->mu);
        ex->stop = true;
        exec_wake_locked(ex, false);
        pthread_mutex_unlock(&ex->mu);
        pthread_join(ex->thread, NULL);
        exec_free(ex);
    }
    free(execs);
}
