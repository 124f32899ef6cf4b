/* Completion queues polled by their consumer's thread (rpc_poller_t), and the kicker that wakes
 * a thread polling one. */
#include "rpc_internal.h"

#include <stdlib.h>

static void kick_done(struct rpc_tag *tag, bool ok)
{
    (void)tag;
    (void)ok;
}

bool rpc_kicker_init(struct rpc_kicker *k, grpc_completion_queue *cq)
{
    k->tag.fn = kick_done;
    pthread_mutex_init(&k->mu, NULL);
    k->channel = grpc_lame_client_channel_create("kick", GRPC_STATUS_UNAVAILABLE, "kick");
    if (!k->channel) {
        pthread_mutex_destroy(&k->mu);
        return false;
    }
    grpc_slice method = grpc_slice_from_static_string("/kick");
    k->call = grpc_channel_create_call(k->channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method, NULL,
                                       gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    if (!k->call) {
        grpc_channel_destroy(k->channel);
        pthread_mutex_destroy(&k->mu);
        return false;
    }
    return true;
}

void rpc_kicker_kick(struct rpc_kicker *k)
{
    pthread_mutex_lock(&k->mu);
    WIRE_TAG_RELEASE(&k->tag);
    /* An empty batch touches only the queue; it cannot fail on a call that exists. */
    grpc_call_start_batch(k->call, NULL, 0, &k->tag, NULL);
    pthread_mutex_unlock(&k->mu);
}

void rpc_kicker_destroy(struct rpc_kicker *k)
{
    grpc_call_unref(k->call);
    grpc_channel_destroy(k->channel);
    pthread_mutex_destroy(&k->mu);
}

varlog_err_t rpc_poller_new(rpc_client_t *c, rpc_poller_t **out)
{
    if (!out)
        return VARLOG_ERR_INVALID_ARG;
    *out = NULL;
    if (!c)
        return VARLOG_ERR_INVALID_ARG;
    rpc_poller_t *p = calloc(1, sizeof(*p));
    if (!p)
        return VARLOG_ERR_NOMEM;
    wire_grpc_ref();
    p->client = c;
    atomic_init(&p->live, 0);
    atomic_init(&p->has_owner, false);
    atomic_init(&p->hold, RPC_HOLD_NONE);
    atomic_init(&p->lapsed_ms, 0);
    p->cq = grpc_completion_queue_create_for_next(NULL);
    if (!p->cq || !rpc_kicker_init(&p->kick, p->cq)) {
        if (p->cq)
            wire_cq_destroy_idle(p->cq);
        free(p);
        wire_grpc_unref();
        return VARLOG_ERR_INTERNAL;
    }
    rpc_client_poller_add(c, p);
    *out = p;
    return VARLOG_OK;
}

void rpc_poller_own(rpc_poller_t *p)
{
    p->owner = pthread_self();
    atomic_store(&p->has_owner, true);
}

bool rpc_poller_owned(const rpc_poller_t *p)
{
    return atomic_load(&p->has_owner) && pthread_equal(p->owner, pthread_self());
}

void rpc_poller_hold(rpc_poller_t *p)
{
    int h = atomic_load_explicit(&p->hold, memory_order_relaxed);
    if (h == RPC_HOLD_HELD)
        return;
    /* Back within its lapse: it never stopped holding (unless the I/O thread just ended the
     * lapse, and the exchange fails). */
    if (h == RPC_HOLD_LAPSED && atomic_compare_exchange_strong(&p->hold, &h, RPC_HOLD_HELD))
        return;
    atomic_store(&p->hold, RPC_HOLD_HELD);
    rpc_client_hold_polling(p->client);
}

static void dispatch(grpc_event ev)
{
    struct rpc_tag *tag = ev.tag;
    WIRE_TAG_ACQUIRE(tag);
    tag->fn(tag, ev.success != 0);
}

/* One completion from p's queue until deadline, run. */
static rpc_poll_t poll_until(rpc_poller_t *p, gpr_timespec deadline)
{
    grpc_event ev = grpc_completion_queue_next(p->cq, deadline, NULL);
    if (ev.type != GRPC_OP_COMPLETE)
        return RPC_POLL_TIMEOUT;
    dispatch(ev);
    return ev.tag == &p->kick.tag ? RPC_POLL_KICKED : RPC_POLL_RAN;
}

rpc_poll_t rpc_poller_poll(rpc_poller_t *p, int64_t deadline_ms)
{
    int64_t left = -1; /* wire_deadline's "none" */
    if (deadline_ms != INT64_MAX) {
        left = deadline_ms - wire_now_ms();
        if (left < 0)
            left = 0;
    }
    /* One that may wait takes the polling role; one that does not only runs what is there. */
    if (left != 0)
        rpc_poller_hold(p);
    return poll_until(p, wire_deadline(left));
}

void rpc_poller_release(rpc_poller_t *p)
{
    if (!p)
        return;
    /* One of this and the I/O thread's end of a lapse takes it off the count. */
    if (atomic_exchange(&p->hold, RPC_HOLD_NONE) != RPC_HOLD_NONE)
        rpc_client_release_polling(p->client);
}

bool rpc_poller_holding(const rpc_poller_t *p)
{
    return atomic_load_explicit(&p->hold, memory_order_relaxed) != RPC_HOLD_NONE;
}

void rpc_poller_lapse(rpc_poller_t *p)
{
    if (!p || atomic_load_explicit(&p->hold, memory_order_relaxed) != RPC_HOLD_HELD)
        return;
    atomic_store_explicit(&p->lapsed_ms, wire_now_ms(), memory_order_relaxed);
    atomic_store(&p->hold, RPC_HOLD_LAPSED); /* before the look at io_untimed */
    rpc_client_lapse_noted(p->client);
}

rpc_poll_t rpc_poller_poll_ready(rpc_poller_t *p)
{
    rpc_poller_hold(p);
    return poll_until(p, gpr_inf_past(GPR_CLOCK_MONOTONIC));
}

void rpc_poller_kick(rpc_poller_t *p)
{
    rpc_kicker_kick(&p->kick);
}

size_t rpc_poller_live(rpc_poller_t *p)
{
    return atomic_load(&p->live);
}

void rpc_poller_destroy(rpc_poller_t *p)
{
    if (!p)
        return;
    /* Bounded polls: the last stream may finish on another thread (one that destroys or
     * closes it after its last completion ran here), which posts nothing to wake us. */
    while (atomic_load(&p->live) > 0)
        rpc_poller_poll(p, wire_now_ms() + 50);
    rpc_kicker_destroy(&p->kick);
    grpc_completion_queue_shutdown(p->cq);
    for (;;) {
        grpc_event ev =
            grpc_completion_queue_next(p->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type == GRPC_OP_COMPLETE)
            dispatch(ev); /* kicks nobody consumed */
    }
    grpc_completion_queue_destroy(p->cq);
    rpc_poller_release(p);
    rpc_client_poller_remove(p->client, p);
    free(p);
    wire_grpc_unref();
}
