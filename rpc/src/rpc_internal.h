#ifndef VARLOG_RPC_INTERNAL_H
#define VARLOG_RPC_INTERNAL_H

/* Pieces shared by rpc_client.c (client object, I/O thread, unary calls) and rpc_stream.c. */
#include <pthread.h>
#include <stdatomic.h>

#include <grpc/grpc.h>

#include "bb_fifo.h"
#include "rpc_client.h"

/* What the I/O thread receives as a completion-queue tag: it just calls fn. */
struct rpc_tag {
    void (*fn)(struct rpc_tag *tag, bool ok);
};

typedef enum { RPC_LINK_UNARY, RPC_LINK_STREAM } rpc_link_kind_t;

struct rpc_channel_entry;

/* Entry of the client's list of live calls, so destroy can cancel them. A unary call's link
 * lives on its caller's stack; a stream's link is part of the stream. */
struct rpc_call_link {
    struct rpc_call_link *prev, *next;
    rpc_link_kind_t kind;
    grpc_call *call;
    /* The channel the call runs on, set by rpc_client_link_locked: while any call is linked
     * to it a channel is never destroyed (a dropped one waits for its last call). */
    struct rpc_channel_entry *chan;
    /* On a caller's rpc_poller rather than the client's queue: its owner completes it (the
     * I/O thread's queue does not count it; rpc_client.c, the polling rule). */
    bool polled;
};

/* One cached channel. Heap-allocated so that links can point at it while the table grows. */
struct rpc_channel_entry {
    char *target;
    grpc_channel *channel;
    size_t n_calls;            /* linked calls running on it */
    int64_t unlisted_since_ms; /* wire_now_ms when first found missing from a retain; 0 = listed */
    bool doomed;               /* dropped by a retain while calls ran: destroyed with the last */
    bool was_ready, lost;      /* rpc_client_reconnects: seen READY; then seen not READY */
    struct rpc_channel_entry *next_gone; /* rpc_client_retain_targets' list of entries to free */
};

/* Wakes whoever polls a completion queue: an empty batch on a call that never starts an
 * operation (on a lame channel, which never connects) posts its tag at once, and gRPC's C API
 * has no alarm. Kicks of several threads are serialised by mu (batches on one call must
 * be). */
struct rpc_kicker {
    pthread_mutex_t mu;
    grpc_channel *channel;
    grpc_call *call;
    struct rpc_tag tag; /* does nothing when dispatched */
};

/* NOMEM-free apart from gRPC's own objects: false when gRPC refused one. */
bool rpc_kicker_init(struct rpc_kicker *k, grpc_completion_queue *cq);
/* One more tag on the queue. Any thread; does not block beyond the queue's lock. */
void rpc_kicker_kick(struct rpc_kicker *k);
/* Before the queue's shutdown: kicks still queued are drained with it. */
void rpc_kicker_destroy(struct rpc_kicker *k);

/* A completion queue polled by its owner thread (rpc_client.h). */
struct rpc_poller {
    grpc_completion_queue *cq;
    struct rpc_kicker kick;
    rpc_client_t *client;              /* whose polling role its owner holds */
    struct rpc_poller *next_of_client; /* rpc_client.pollers (the client's mu) */
    pthread_t owner;
    atomic_bool has_owner;
    atomic_int hold;                /* rpc_hold_t: its part in the polling rule */
    atomic_int_least64_t lapsed_ms; /* wire_now_ms of its last lapse */
    atomic_size_t live;             /* streams opened on it and not finished */
};

/* A poller's part in its client's polling rule (rpc_client.c). */
typedef enum {
    RPC_HOLD_NONE,   /* its owner does not hold the polling role */
    RPC_HOLD_HELD,   /* it does: it polls, or runs the library's loop back to its poll */
    RPC_HOLD_LAPSED, /* it left at lapsed_ms, and holds until RPC_POLL_LAPSE_MS later */
} rpc_hold_t;

/* The polling rule's book-keeping (rpc_client.c): a poller's owner takes the role (kicking
 * the I/O thread out of its queue), gives it up, or lapses (waking the I/O thread to time
 * the lapse); a client lists its pollers, whose lapses its I/O thread times. */
void rpc_client_hold_polling(rpc_client_t *c);
void rpc_client_release_polling(rpc_client_t *c);
void rpc_client_lapse_noted(rpc_client_t *c);
void rpc_client_poller_add(rpc_client_t *c, rpc_poller_t *p);
void rpc_client_poller_remove(rpc_client_t *c, rpc_poller_t *p);

/* Whether the calling thread owns p (it then polls instead of waiting for its streams). */
bool rpc_poller_owned(const rpc_poller_t *p);

struct rpc_client {
    grpc_completion_queue *cq;
    pthread_t io_thread;
    struct rpc_kicker kick; /* wakes the I/O thread to park */

    pthread_mutex_t mu; /* guards everything below; never held while taking a stream's lock */
    pthread_cond_t calls_drained;
    bool closing;
    struct rpc_call_link calls; /* sentinel of a circular list */
    size_t n_calls;
    struct rpc_channel_entry **channels;
    size_t n_channels, cap_channels;
    /* The entry rpc_client_channel_locked returned last, which the rpc_client_link_locked
     * that follows it in the same critical section attaches to its call. */
    struct rpc_channel_entry *handed_out;
    grpc_channel_args channel_args; /* wire's client arguments + the reconnect backoff */
    uint64_t reconnects;            /* rpc_client_reconnects */
    /* The polling rule (rpc_client.c): calls on cq; pollers' owners holding the polling role
     * (held or lapsed); this client's pollers. The I/O thread parks while holders > 0 and
     * io_calls == 0, on a timed wait (io_timed) while a holder is lapsed. */
    size_t io_calls;
    size_t holders;
    rpc_poller_t *pollers;
    bool io_parked, io_timed, io_stop;
    atomic_bool io_untimed; /* parked, or about to be, without timing a lapse */
    atomic_long io_tid;     /* rpc_client_io_tid */
    pthread_cond_t io_wake;
};

/* The cached channel to target, created on first use. Called with c->mu held. NULL on NOMEM.
 * The caller links the call it creates on it with rpc_client_link_locked before releasing
 * c->mu, which ties the call to the channel. */
grpc_channel *rpc_client_channel_locked(rpc_client_t *c, const char *target);

/* Links a call (to the channel of the preceding rpc_client_channel_locked); CLOSED when the
 * client is closing. Called with c->mu held. */
varlog_err_t rpc_client_link_locked(rpc_client_t *c, struct rpc_call_link *link);

/* Unlinks a finished call and wakes a destroy waiting for the list to drain. */
void rpc_client_unlink(rpc_client_t *c, struct rpc_call_link *link);

/* Stream hooks used by rpc_client_destroy (rpc_stream.c). */
void rpc_stream_ref(rpc_stream_t *s);
void rpc_stream_unref(rpc_stream_t *s);
/* The client is going away: cancel, stop waiting for unread messages, finish if possible. */
void rpc_stream_client_closing(rpc_stream_t *s);
rpc_stream_t *rpc_stream_from_link(struct rpc_call_link *link);

#endif
