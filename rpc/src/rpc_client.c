#include "rpc_internal.h"

#include <stdlib.h>
#include <string.h>

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>

/* THE POLLING RULE. At every moment some thread of the client polls gRPC's poller, or will
 * within RPC_POLL_LAPSE_MS of an iterator's return to its caller, so that what reaches any
 * of its connections (a node's close, a GOAWAY) is read when it comes, whichever calls are
 * open and whether or not anyone consumes them. Unread, a close leaves the channel READY and
 * the next call goes on the dead connection (UNAVAILABLE, an append MAYBE_APPENDED).
 *
 * gRPC 1.51's poller on Linux is epoll1: one epoll set for every file descriptor of the
 * process, polled by whichever thread waits in any completion queue (which queue, and its
 * calls, do not matter). Each poll handles one event and then passes the polling role to
 * another thread waiting in a queue, if there is one: two threads of ours in there cost a
 * wake-up per event (issue 25). So one of ours should be in there, chosen so:
 *
 * - A poller's owner holds the polling role (rpc_poller_hold) from a poll that may wait, a
 *   consumer's rpc_poller_poll_ready, or the subscribe call (on behalf of the consumer),
 *   and keeps it while it runs the library's loop back to its poll (the callbacks and
 *   handlers it delivers included). A poll that does not wait takes nothing. The I/O thread
 *   parks while a holder exists and no call of its own queue runs (io_parks_locked); with a
 *   call of its own it polls whatever (its completions come nowhere else), and with no
 *   holder it polls for the whole client, idle or not.
 * - A holder that leaves gives the role up. The appender's thread releases it before it
 *   sleeps on its condition variable, the handler form's thread as it ends, a poller's
 *   destroy for good (rpc_poller_release: at once). An iterator's consumer lapses as
 *   varlog_subscription_next or the subscribe call returns to the application
 *   (rpc_poller_lapse): it keeps the role for RPC_POLL_LAPSE_MS and loses it unless it
 *   polls again by then; the parked I/O thread, on a timed wait while a lapse is younger
 *   than that, ends it and polls. A lapse, not a release, because the application calls
 *   next once per entry: a hand-over there cost the I/O thread some 400 wake-ups per 2000
 *   entries (test_subscribe_poll), a lapse at most two per RPC_POLL_LAPSE_MS.
 * - The last holder to release, and the first to lapse while the I/O thread waits untimed,
 *   wake it (a condition variable); an owner that takes the role while the I/O thread polls
 *   for nobody kicks it out of its queue to park (one completion).
 *
 * So the role changes hands when a holder starts or stops, never per event. Nothing polls
 * busily: an idle client, or one with an unread subscription or an idle appender, has its
 * I/O thread blocked in epoll_wait, woken only by what reaches the sockets. What the lapse
 * leaves open: a close that comes within RPC_POLL_LAPSE_MS after an iterator's last return
 * is read when the lapse ends, not at once, so a call started in that window can still meet
 * the dead connection; and a subscription handler or an appender callback that blocks keeps
 * a role it does not use until it returns. */
static bool io_parks_locked(const rpc_client_t *c)
{
    return c->io_calls == 0 && c->holders > 0;
}

void rpc_client_hold_polling(rpc_client_t *c)
{
    pthread_mutex_lock(&c->mu);
    /* The I/O thread is in its queue (or about to enter it) for nobody: out, to park. */
    if (c->holders++ == 0 && c->io_calls == 0 && !c->io_parked && !c->io_stop)
        rpc_kicker_kick(&c->kick);
    pthread_mutex_unlock(&c->mu);
}

void rpc_client_release_polling(rpc_client_t *c)
{
    pthread_mutex_lock(&c->mu);
    if (--c->holders == 0 && c->io_parked)
        pthread_cond_signal(&c->io_wake);
    pthread_mutex_unlock(&c->mu);
}

void rpc_client_lapse_noted(rpc_client_t *c)
{
    /* Usually the I/O thread is timing lapses already, or not parked: then nothing to do,
     * and no lock taken per return of next. io_untimed is set before the thread looks at
     * the holders and the lapse stored before it is read here (both sequentially
     * consistent): either the thread saw this lapse, or this sees the flag. */
    if (!atomic_load(&c->io_untimed))
        return;
    pthread_mutex_lock(&c->mu);
    if (c->io_parked && !c->io_timed)
        pthread_cond_signal(&c->io_wake); /* to start the lapse's clock */
    pthread_mutex_unlock(&c->mu);
}

void rpc_client_poller_add(rpc_client_t *c, rpc_poller_t *p)
{
    pthread_mutex_lock(&c->mu);
    p->next_of_client = c->pollers;
    c->pollers = p;
    pthread_mutex_unlock(&c->mu);
}

void rpc_client_poller_remove(rpc_client_t *c, rpc_poller_t *p)
{
    pthread_mutex_lock(&c->mu);
    for (rpc_poller_t **q = &c->pollers; *q; q = &(*q)->next_of_client) {
        if (*q == p) {
            *q = p->next_of_client;
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* Lapsed holders whose lapse ran out stop holding. Returns when to look again: the end of
 * the soonest lapse that began less than RPC_POLL_LAPSE_MS ago, whether its holder is still
 * away or came back (one that comes and goes lapses again soon: timing it on needs no signal
 * at its next lapse); INT64_MAX when there is none. Called with c->mu held, by the parked
 * I/O thread. */
static int64_t expire_lapses_locked(rpc_client_t *c)
{
    int64_t now = wire_now_ms(), next = INT64_MAX;
    for (rpc_poller_t *p = c->pollers; p; p = p->next_of_client) {
        int h = atomic_load(&p->hold);
        if (h == RPC_HOLD_NONE)
            continue;
        int64_t ends =
            atomic_load_explicit(&p->lapsed_ms, memory_order_relaxed) + RPC_POLL_LAPSE_MS;
        if (ends > now) {
            if (ends < next)
                next = ends;
        } else if (h == RPC_HOLD_LAPSED &&
                   atomic_compare_exchange_strong(&p->hold, &h, RPC_HOLD_NONE)) {
            c->holders--; /* its owner, back, takes the role anew */
        }
    }
    return next;
}

static void *io_thread_main(void *arg)
{
    rpc_client_t *c = arg;
    /* Named here too: the creator names it only once pthread_create returned. */
    pthread_setname_np(pthread_self(), "varlog-io");
    atomic_store(&c->io_tid, (long)syscall(SYS_gettid));
    for (;;) {
        /* THE POLLING RULE (above). A holder taking the role while it polls, or the last call
         * of its own queue ending on another thread while a holder exists, kicks the queue so
         * that it parks. */
        pthread_mutex_lock(&c->mu);
        while (io_parks_locked(c) && !c->io_stop) {
            atomic_store(&c->io_untimed, true); /* before it looks: rpc_client_lapse_noted */
            int64_t until = expire_lapses_locked(c);
            if (!io_parks_locked(c))
                break;
            c->io_parked = true;
            c->io_timed = until != INT64_MAX;
            if (!c->io_timed) {
                pthread_cond_wait(&c->io_wake, &c->mu);
            } else {
                atomic_store(&c->io_untimed, false);
                struct timespec ts;
                int64_t left = until - wire_now_ms();
                abs_deadline(&ts, left > 0 ? left : 0);
                pthread_cond_timedwait(&c->io_wake, &c->mu, &ts);
            }
        }
        c->io_parked = false;
        c->io_timed = false;
        atomic_store(&c->io_untimed, false);
        pthread_mutex_unlock(&c->mu);
        grpc_event ev =
            grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type == GRPC_OP_COMPLETE) {
            struct rpc_tag *tag = ev.tag;
            WIRE_TAG_ACQUIRE(tag);
            tag->fn(tag, ev.success != 0);
        }
    }
    return NULL;
}

static void channel_entry_free(struct rpc_channel_entry *e)
{
    grpc_channel_destroy(e->channel);
    free(e->target);
    free(e);
}

/* The channel arguments of one client: wire's client arguments followed by the reconnect
 * backoff (and the BDP probe's switch with fixed_windows), in memory the client owns (the keys
 * are static strings). */
static bool channel_args_init(grpc_channel_args *out, int64_t backoff_max_ms, bool fixed_windows)
{
    const grpc_channel_args *base = wire_channel_args(WIRE_ARGS_CLIENT);
    if (backoff_max_ms <= 0)
        backoff_max_ms = RPC_RECONNECT_BACKOFF_MAX_DEFAULT_MS;
    if (backoff_max_ms > INT32_MAX)
        backoff_max_ms = INT32_MAX;
    int64_t initial = RPC_RECONNECT_BACKOFF_INITIAL_MS < backoff_max_ms
                          ? RPC_RECONNECT_BACKOFF_INITIAL_MS
                          : backoff_max_ms;
    size_t n = base->num_args + 2 + (fixed_windows ? 1 : 0);
    grpc_arg *args = calloc(n, sizeof(*args));
    if (!args)
        return false;
    memcpy(args, base->args, base->num_args * sizeof(*args));
    args[base->num_args] = (grpc_arg){.type = GRPC_ARG_INTEGER,
                                      .key = (char *)GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                                      .value.integer = (int)initial};
    args[base->num_args + 1] = (grpc_arg){.type = GRPC_ARG_INTEGER,
                                          .key = (char *)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
                                          .value.integer = (int)backoff_max_ms};
    if (fixed_windows)
        args[base->num_args + 2] = (grpc_arg){
            .type = GRPC_ARG_INTEGER, .key = (char *)GRPC_ARG_HTTP2_BDP_PROBE, .value.integer = 0};
    out->num_args = n;
    out->args = args;
    return true;
}

varlog_err_t rpc_client_new(rpc_client_t **out)
{
    return rpc_client_new_opts(NULL, out);
}

varlog_err_t rpc_client_new_opts(const rpc_client_opts_t *opts, rpc_client_t **out)
{
    if (!out)
        return VARLOG_ERR_INVALID_ARG;
    *out = NULL;
    rpc_client_t *c = calloc(1, sizeof(*c));
    if (!c)
        return VARLOG_ERR_NOMEM;
    if (!channel_args_init(&c->channel_args, opts ? opts->reconnect_backoff_max_ms : 0,
                           opts && opts->fixed_windows)) {
        free(c);
        return VARLOG_ERR_NOMEM;
    }
    wire_grpc_ref();
    c->calls.next = c->calls.prev = &c->calls;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->calls_drained, NULL);
    wire_cond_init(&c->io_wake);
    c->cq = grpc_completion_queue_create_for_next(NULL);
    if (!c->cq)
        goto fail;
    bool kicker = rpc_kicker_init(&c->kick, c->cq);
    if (!kicker || pthread_create(&c->io_thread, NULL, io_thread_main, c) != 0) {
        if (kicker)
            rpc_kicker_destroy(&c->kick);
        wire_cq_destroy_idle(c->cq);
        goto fail;
    }
    pthread_setname_np(c->io_thread, "varlog-io");
    *out = c;
    return VARLOG_OK;
fail:
    pthread_cond_destroy(&c->io_wake);
    pthread_cond_destroy(&c->calls_drained);
    pthread_mutex_destroy(&c->mu);
    free(c->channel_args.args);
    free(c);
    wire_grpc_unref();
    return VARLOG_ERR_INTERNAL;
}

void rpc_client_shutdown(rpc_client_t *c)
{
    if (!c)
        return;
    /* Unary calls are cancelled under the lock (their links live on callers' stacks, so
     * they are valid only while linked); streams are referenced, then told outside the lock
     * because they take their own lock first. */
    pthread_mutex_lock(&c->mu);
    c->closing = true;
    size_t n_streams = 0;
    for (struct rpc_call_link *l = c->calls.next; l != &c->calls; l = l->next)
        n_streams += l->kind == RPC_LINK_STREAM;
    rpc_stream_t **streams = n_streams ? calloc(n_streams, sizeof(*streams)) : NULL;
    size_t taken = 0;
    for (struct rpc_call_link *l = c->calls.next; l != &c->calls; l = l->next) {
        if (l->kind == RPC_LINK_UNARY) {
            grpc_call_cancel(l->call, NULL);
        } else if (streams) {
            streams[taken] = rpc_stream_from_link(l);
            rpc_stream_ref(streams[taken++]);
        } else {
            /* No memory for the snapshot: cancelling still ends the call; the stream finishes
             * as soon as its reader drains it or releases it. */
            grpc_call_cancel(l->call, NULL);
        }
    }
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < taken; i++) {
        rpc_stream_client_closing(streams[i]);
        rpc_stream_unref(streams[i]);
    }
    free(streams);
}

void rpc_client_destroy(rpc_client_t *c)
{
    if (!c)
        return;
    rpc_client_shutdown(c);
    pthread_mutex_lock(&c->mu);
    while (c->n_calls > 0)
        pthread_cond_wait(&c->calls_drained, &c->mu);
    pthread_mutex_unlock(&c->mu);

    for (size_t i = 0; i < c->n_channels; i++)
        channel_entry_free(c->channels[i]);
    free(c->channels);
    free(c->channel_args.args);
    rpc_kicker_destroy(&c->kick);
    grpc_completion_queue_shutdown(c->cq);
    pthread_mutex_lock(&c->mu);
    c->io_stop = true; /* unparks it to drain the queue's end */
    pthread_cond_signal(&c->io_wake);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->io_thread, NULL);
    grpc_completion_queue_destroy(c->cq);
    pthread_cond_destroy(&c->io_wake);
    pthread_cond_destroy(&c->calls_drained);
    pthread_mutex_destroy(&c->mu);
    free(c);
    wire_grpc_unref();
}

size_t rpc_client_live_calls(rpc_client_t *c)
{
    pthread_mutex_lock(&c->mu);
    size_t n = c->n_calls;
    pthread_mutex_unlock(&c->mu);
    return n;
}

long rpc_client_io_tid(rpc_client_t *c)
{
    long tid;
    while ((tid = atomic_load(&c->io_tid)) == 0)
        sched_yield(); /* the thread publishes it first thing */
    return tid;
}

size_t rpc_client_polling_holders(rpc_client_t *c)
{
    pthread_mutex_lock(&c->mu);
    size_t n = c->holders;
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* Takes entry i out of the table (order is not kept). Called with c->mu held. */
static struct rpc_channel_entry *channel_remove_locked(rpc_client_t *c, size_t i)
{
    struct rpc_channel_entry *e = c->channels[i];
    c->channels[i] = c->channels[--c->n_channels];
    if (c->handed_out == e)
        c->handed_out = NULL;
    return e;
}

/* A look at e's state for rpc_client_reconnects. Called with c->mu held. */
static void channel_observe_locked(rpc_client_t *c, struct rpc_channel_entry *e)
{
    if (c->closing)
        return;
    if (grpc_channel_check_connectivity_state(e->channel, 0) == GRPC_CHANNEL_READY) {
        if (e->lost)
            c->reconnects++;
        e->lost = false;
        e->was_ready = true;
    } else if (e->was_ready) {
        e->was_ready = false;
        e->lost = true;
    }
}

uint64_t rpc_client_reconnects(rpc_client_t *c)
{
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_channels; i++)
        channel_observe_locked(c, c->channels[i]);
    uint64_t n = c->reconnects;
    pthread_mutex_unlock(&c->mu);
    return n;
}

bool rpc_client_target_ready(rpc_client_t *c, const char *target)
{
    if (!c || !target)
        return false;
    bool ready = false;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_channels && !c->closing; i++) {
        struct rpc_channel_entry *e = c->channels[i];
        if (strcmp(e->target, target) == 0) {
            channel_observe_locked(c, e);
            ready = e->was_ready;
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return ready;
}

grpc_channel *rpc_client_channel_locked(rpc_client_t *c, const char *target)
{
    c->handed_out = NULL;
    for (size_t i = 0; i < c->n_channels; i++) {
        if (strcmp(c->channels[i]->target, target) == 0) {
            channel_observe_locked(c, c->channels[i]);
            c->handed_out = c->channels[i];
            return c->channels[i]->channel;
        }
    }
    if (c->n_channels == c->cap_channels) {
        size_t cap = c->cap_channels ? c->cap_channels * 2 : 4;
        struct rpc_channel_entry **grown = realloc(c->channels, cap * sizeof(*grown));
        if (!grown)
            return NULL;
        c->channels = grown;
        c->cap_channels = cap;
    }
    struct rpc_channel_entry *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->target = strdup(target);
    if (!e->target) {
        free(e);
        return NULL;
    }
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    e->channel = grpc_channel_create(target, creds, &c->channel_args);
    grpc_channel_credentials_release(creds);
    if (!e->channel) {
        free(e->target);
        free(e);
        return NULL;
    }
    c->channels[c->n_channels++] = e;
    c->handed_out = e;
    return e->channel;
}

size_t rpc_client_retain_targets(rpc_client_t *c, const char *const *targets, size_t n,
                                 int64_t grace_ms)
{
    if (!c)
        return 0;
    int64_t now = wire_now_ms();
    struct rpc_channel_entry *gone = NULL; /* removed from the table, destroyed after */
    size_t n_gone = 0;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_channels;) {
        struct rpc_channel_entry *e = c->channels[i];
        bool listed = false;
        for (size_t k = 0; k < n && !listed; k++)
            listed = targets[k] && strcmp(targets[k], e->target) == 0;
        if (listed) {
            e->unlisted_since_ms = 0;
            e->doomed = false;
            /* Fresh metadata still names the node: whatever gRPC's backoff says, try it again
             * on the next call rather than failing fast until the timer fires. */
            if (!c->closing && grpc_channel_check_connectivity_state(e->channel, 0) ==
                                   GRPC_CHANNEL_TRANSIENT_FAILURE)
                grpc_channel_reset_connect_backoff(e->channel);
            i++;
            continue;
        }
        if (e->unlisted_since_ms == 0)
            e->unlisted_since_ms = now > 0 ? now : 1;
        if (now - e->unlisted_since_ms < grace_ms) {
            i++;
            continue;
        }
        if (e->n_calls > 0) {
            e->doomed = true; /* rpc_client_unlink destroys it after its last call */
            i++;
            continue;
        }
        e = channel_remove_locked(c, i); /* the last entry moved into slot i */
        e->next_gone = gone;
        gone = e;
        n_gone++;
    }
    pthread_mutex_unlock(&c->mu);
    /* Destroyed outside the lock: grpc_channel_destroy takes gRPC's own locks. */
    while (gone) {
        struct rpc_channel_entry *next = gone->next_gone;
        channel_entry_free(gone);
        gone = next;
    }
    return n_gone;
}

size_t rpc_client_channel_count(rpc_client_t *c)
{
    pthread_mutex_lock(&c->mu);
    size_t n = c->n_channels;
    pthread_mutex_unlock(&c->mu);
    return n;
}

varlog_err_t rpc_client_link_locked(rpc_client_t *c, struct rpc_call_link *link)
{
    if (c->closing)
        return VARLOG_ERR_CLOSED;
    link->next = &c->calls;
    link->prev = c->calls.prev;
    c->calls.prev->next = link;
    c->calls.prev = link;
    c->n_calls++;
    if (!link->polled && c->io_calls++ == 0 && c->io_parked)
        pthread_cond_signal(&c->io_wake); /* a call of its own: it polls (the polling rule) */
    link->chan = c->handed_out;
    c->handed_out = NULL;
    if (link->chan)
        link->chan->n_calls++;
    return VARLOG_OK;
}

/* One call fewer: the last wakes a destroy waiting for the list to drain. */
static void call_count_drop_locked(rpc_client_t *c)
{
    if (--c->n_calls == 0)
        pthread_cond_broadcast(&c->calls_drained);
}

void rpc_client_unlink(rpc_client_t *c, struct rpc_call_link *link)
{
    struct rpc_channel_entry *gone = NULL;
    pthread_mutex_lock(&c->mu);
    link->prev->next = link->next;
    link->next->prev = link->prev;
    link->next = link->prev = link;
    struct rpc_channel_entry *e = link->chan;
    link->chan = NULL;
    /* The polling rule: with a holder, the I/O thread parks once it comes back from its
     * queue after its last call; from another thread, that call's end must make it come
     * back (a kick is one completion, cheap and rare). With no holder it goes on polling. */
    if (!link->polled && --c->io_calls == 0 && c->holders > 0 &&
        !pthread_equal(pthread_self(), c->io_thread))
        rpc_kicker_kick(&c->kick);
    if (e && !e->doomed)
        channel_observe_locked(c, e);
    if (e && --e->n_calls == 0 && e->doomed) {
        for (size_t i = 0; i < c->n_channels; i++) {
            if (c->channels[i] == e) {
                gone = channel_remove_locked(c, i);
                break;
            }
        }
    }
    /* A channel dropped by a retain goes with its last call. It is destroyed before the call
     * stops counting, so that rpc_client_destroy, which waits for the count to drain, cannot
     * shut gRPC down under it. */
    if (!gone)
        call_count_drop_locked(c);
    pthread_mutex_unlock(&c->mu);
    if (gone) {
        channel_entry_free(gone);
        pthread_mutex_lock(&c->mu);
        call_count_drop_locked(c);
        pthread_mutex_unlock(&c->mu);
    }
}

/* ---- unary calls ------------------------------------------------------------------------ */

struct unary_call {
    struct rpc_tag tag;
    struct rpc_call_link link;
    rpc_client_t *client;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    bool batch_ok;
    grpc_metadata_array initial_md;
    grpc_metadata_array trailing_md;
    grpc_byte_buffer *response;
    grpc_status_code code;
    grpc_slice details;
};

static void unary_done(struct rpc_tag *tag, bool ok)
{
    struct unary_call *u = VARLOG_CONTAINER_OF(tag, struct unary_call, tag);
    /* Unlink first: after the caller wakes it unrefs the call, which destroy must no longer
     * be able to cancel. */
    rpc_client_unlink(u->client, &u->link);
    pthread_mutex_lock(&u->mu);
    u->batch_ok = ok;
    u->done = true;
    pthread_cond_signal(&u->cv);
    pthread_mutex_unlock(&u->mu);
}

/* Fills st from a finished call's status parts. */
static void status_fill(rpc_status_t *st, grpc_status_code code, grpc_slice details,
                        const grpc_metadata_array *trailing)
{
    rpc_status_clear(st);
    st->code = code;
    st->message = wire_slice_strdup(details);
    rpc_status_read_details(st, trailing);
}

varlog_err_t rpc_unary(rpc_client_t *c, const char *target, const char *method,
                       const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
                       int64_t timeout_ms, ProtobufCMessage **resp, rpc_status_t *status)
{
    if (!c || !target || !method || !req || !resp_desc || !resp)
        return VARLOG_ERR_INVALID_ARG;
    *resp = NULL;
    grpc_byte_buffer *request = wire_pack(req);
    if (!request)
        return VARLOG_ERR_NOMEM;

    struct unary_call u;
    memset(&u, 0, sizeof(u));
    u.tag.fn = unary_done;
    u.client = c;
    u.link.kind = RPC_LINK_UNARY;
    u.code = GRPC_STATUS_UNKNOWN;
    u.details = grpc_empty_slice();
    pthread_mutex_init(&u.mu, NULL);
    pthread_cond_init(&u.cv, NULL);
    grpc_metadata_array_init(&u.initial_md);
    grpc_metadata_array_init(&u.trailing_md);

    varlog_err_t err = VARLOG_OK;
    pthread_mutex_lock(&c->mu);
    grpc_channel *ch = c->closing ? NULL : rpc_client_channel_locked(c, target);
    if (!ch) {
        err = c->closing ? VARLOG_ERR_CLOSED : VARLOG_ERR_NOMEM;
        pthread_mutex_unlock(&c->mu);
        goto out;
    }
    grpc_slice method_slice = grpc_slice_from_copied_string(method);
    u.link.call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq, method_slice,
                                           NULL, wire_deadline(timeout_ms), NULL);
    grpc_slice_unref(method_slice);
    if (!u.link.call) {
        pthread_mutex_unlock(&c->mu);
        err = VARLOG_ERR_INTERNAL;
        goto out;
    }
    rpc_client_link_locked(c, &u.link);

    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = request;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &u.initial_md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &u.response;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &u.trailing_md;
    ops[5].data.recv_status_on_client.status = &u.code;
    ops[5].data.recv_status_on_client.status_details = &u.details;
    WIRE_TAG_RELEASE(&u.tag);
    grpc_call_error ce = grpc_call_start_batch(u.link.call, ops, 6, &u.tag, NULL);
    pthread_mutex_unlock(&c->mu);
    if (ce != GRPC_CALL_OK) {
        rpc_client_unlink(c, &u.link);
        grpc_call_unref(u.link.call);
        err = VARLOG_ERR_INTERNAL;
        goto out;
    }

    pthread_mutex_lock(&u.mu);
    while (!u.done)
        pthread_cond_wait(&u.cv, &u.mu);
    pthread_mutex_unlock(&u.mu);
    /* The trailing metadata belongs to the call: read it before the last reference goes. */
    rpc_status_t local;
    rpc_status_init(&local);
    rpc_status_t *st = status ? status : &local;
    status_fill(st, u.code, u.details, &u.trailing_md);
    grpc_call_unref(u.link.call);
    err = rpc_status_to_err(st);
    if (err == VARLOG_OK) {
        *resp = u.response ? wire_unpack(resp_desc, u.response) : NULL;
        if (!*resp)
            err = VARLOG_ERR_DECODE;
    }
    rpc_status_clear(&local);
out:
    if (u.response)
        grpc_byte_buffer_destroy(u.response);
    grpc_byte_buffer_destroy(request);
    grpc_slice_unref(u.details);
    grpc_metadata_array_destroy(&u.initial_md);
    grpc_metadata_array_destroy(&u.trailing_md);
    pthread_cond_destroy(&u.cv);
    pthread_mutex_destroy(&u.mu);
    return err;
}
