#ifndef VARLOG_APPENDER_INTERNAL_H
#define VARLOG_APPENDER_INTERNAL_H

/*
 * The pipelined appender's objects, shared by appender.c (the public calls: intake, flush,
 * close) and the appender's thread: appender_io.c (lanes, sends, answers), appender_fail.c
 * (failed streams, retries), appender_deadline.c (deadlines, unreachable log streams) and
 * appender_settle.c (the one path from an outcome to the callbacks, in call order); the batch
 * slots' memory (allocation, growth, trim) is appender_slots.c's.
 *
 * Ownership of a batch slot follows its state: FREE and OPEN and READY slots are the
 * appender's (under mu); a slot popped from the ready list belongs to the appender's thread
 * (in a lane's in-flight list, or its list of settled batches) or to a retry task (until it
 * puts the slot back on the ready list, under mu). Lanes belong to the thread, except the
 * fields marked (mu).
 *
 * Lock order: the client's locks, then the appender's mu, then the client's budget mu (the
 * client-wide bound's waiters: a leaf, never held while taking another lock); the objpool's
 * lock is a leaf. No
 * rpc_* or grpc_* function is called with mu held (rpc_poller_kick, whose locks are leaves, is
 * the exception): a stream's notify hook and a slot's release run under gRPC-side locks and
 * take mu.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/grpc.h>

#include "client_internal.h"
#include "varlog/appender.h"
#include "vq/objpool.h"

/* One append call, in its batch's slot: the slot's calls lie side by side, so the thread
 * that runs their callbacks reads what the producer wrote in order. */
typedef struct app_call {
    varlog_append_cb *cb;
    void *opaque;
    uint32_t first; /* index of its first record in the batch */
    uint32_t n;
    uint64_t t_ticks; /* ticks_now at the append call: the latency statistics */
    /* varlog_appender_append_ref: runs once the batch is free again (app_slot_free_locked),
     * when neither the thread nor gRPC reads the call's bytes any more. NULL: copied. */
    varlog_append_release_cb *release;
} app_call_t;

/* A record of varlog_appender_append_ref: its bytes stay where the caller has them, and the
 * batch's buffer has a gap of len bytes at off in their place (its tag and length before). */
typedef struct app_ref {
    const uint8_t *data;
    size_t off, len;
} app_ref_t;

typedef enum { SLOT_FREE, SLOT_OPEN, SLOT_READY, SLOT_OUT } slot_state_t;

/* A transmit-queue slot: one batch of records encoded as AppendRequest payload fields. */
typedef struct app_batch {
    struct app_batch *next; /* in the free, ready, in-flight or settled list */
    struct varlog_appender *app;
    slot_state_t state; /* (mu) */
    uint64_t seq;       /* opening order; flush waits by it, retries go back in it */
    uint8_t *buf;       /* in one region with calls and metas (slot_new) */
    size_t len, cap;
    uint32_t n_records;
    uint64_t bytes;    /* payload bytes */
    app_call_t *calls; /* appender batch.max.records: a call has at least one record */
    uint32_t n_calls;
    varlog_entry_meta_t *metas; /* appender batch.max.records */
    app_ref_t *refs;            /* appender batch.max.records; in buf's order */
    uint32_t n_refs;
    bool has_release;    /* a call of varlog_appender_append_ref: its release, once free */
    int64_t opened_ms;   /* linger counts from the first record */
    int64_t deadline_ms; /* appender.delivery.timeout.ms after that (INT64_MAX: none) */
    /* Set when the batch is first sent: the slice gRPC's messages share. The slot is free
     * again only once gRPC dropped its last reference (slot_released). */
    grpc_slice body;
    atomic_bool has_body; /* atomic: gRPC's refcount, which orders it, is invisible to TSan */
    bool settle_pending;  /* (mu) settled; waits for the body's release to become free */
    int64_t freed_ms;     /* (mu) when it last became free: idle slots are given back */
    size_t region_len;    /* its buffer, calls and metas: mapped when above APP_SLOT_MAP_MIN */
    bool dropped;         /* (mu) being given back: no longer one of the appender's slots */
    /* The thread's, while the batch is out. */
    int64_t sent_ms;
    unsigned attempts;
    bool maybe; /* an earlier attempt may have stored it */
    varlog_err_t err;
    varlog_outcome_t outcome;
    char errtext[400];
} app_batch_t;

typedef struct batch_list {
    app_batch_t *head, *tail;
    size_t n;
} batch_list_t;

/* Why the thread cancelled a lane's stream. */
typedef enum {
    APP_CANCEL_NONE,     /* it did not */
    APP_CANCEL_ATTEMPT,  /* its oldest request had no answer within append.attempt.timeout.ms */
    APP_CANCEL_DELIVERY, /* a batch on it reached its delivery deadline */
} app_cancel_t;

/* A lane's Append stream and what the thread learned of it. Set by lane_open and cleared as
 * a whole by app_lane_drop_stream, the only way a stream is dropped: nothing learned of one
 * stream is read as if it were about the next (a cancel's flag left behind once kept every
 * later stream of the lane from being checked for deadlines). */
typedef struct app_stream {
    rpc_stream_t *rpc;   /* NULL: no stream, and every field below is zero */
    size_t answered;     /* answers matched on it */
    app_cancel_t cancel; /* set once; the stream's end settles what is on it */
} app_stream_t;

/* One log stream and its Append stream. */
typedef struct app_lane {
    struct varlog_appender *app;
    int32_t ls;
    char *target; /* the primary the stream was opened to */
    app_stream_t st;
    batch_list_t inflight; /* sent on st, oldest first */
    /* Their delivery deadlines rise from head to tail, as they do unless a retried batch
     * went out after a newer one: the earliest is then the head's. The thread's. */
    bool inflight_sorted;
    unsigned failures; /* consecutive stream failures: the reopen backoff */
    int64_t reopen_ms; /* no new stream before this */
    bool gone;         /* topic mode: the log stream left the topic's metadata */
    /* (mu) retry or read-back tasks holding batches that must go first: the lane takes
     * nothing newer while any does */
    unsigned held;
    /* The last LLSN of the log stream known stored before what is in flight (answers; at a
     * stream's open, also the client's synchronous appends): where an ambiguous batch is
     * read back from. The thread's. */
    uint64_t last_llsn;
    atomic_bool readable; /* set by the stream's notify hook */
} app_lane_t;

/* Batches waiting for a retry: owned by one engine task until it puts them back. */
typedef struct app_retry {
    struct varlog_appender *app;
    app_lane_t *lane; /* held until the batches are back, in bound mode; always for resolve */
    bool resolve;     /* a read-back task (appender_resolve.c), not a backoff */
    char note[200];   /* (mu) a read-back's last pass: what it learnt, for the deadline's text */
    struct app_resolve *rs; /* a read-back's state, while r is on the list */
    batch_list_t batches;
    bool taken; /* (mu) closing took the batches back */
    struct app_retry *next;
} app_retry_t;

struct varlog_appender {
    varlog_client_t *c; /* NULL once the client's destroy closed the appender */
    int32_t topic_id;
    int32_t fixed_ls; /* 0 = topic mode */
    uint32_t batch_max_records;
    uint64_t batch_max_bytes;
    uint64_t record_max_bytes;
    int64_t linger_ms;
    /* Longest sleep in the poll while intake could let a batch out: linger, within 1-5 ms. */
    int64_t poll_slice_ms;
    size_t depth;
    uint64_t queue_max_records, queue_max_bytes;
    int64_t attempt_timeout_ms;
    int64_t delivery_timeout_ms; /* 0 = none */
    unsigned max_attempts;
    /* append.retries -1 with a delivery deadline: a refusal is waited out until the deadline
     * (no log stream appendable, a sealed one) rather than failed at once. */
    bool waits;
    bool retry_maybe;
    bool resolve; /* append.resolve.maybe.appended */
    bool timed;   /* stats.latency: calls carry their start time */
    size_t slot_cap;
    atomic_int refs; /* the handle, live bodies, retry tasks */

    pthread_mutex_t mu;
    pthread_cond_t space;   /* producers: queue room or a free slot */
    pthread_cond_t settled; /* flush and close: batches settled, thread done */
    bool closing;           /* intake stopped */
    bool stop;              /* the thread fails what is left and lets the appender go */
    bool thread_done;       /* the thread let it go: it runs nothing of it any more */
    /* Set by the thread when it last planned for this appender, found nothing to do, and may
     * sleep: a change it would not see by itself then wakes it (app_exec_notify_locked),
     * once per sleep. Cleared when it wakes, and by the first waker. */
    bool thread_idle;
    bool intake_noted; /* intake told the idle thread already (it never kicks a poll) */
    /* The thread that runs the appender (appender_exec.c): its own, or one the client's
     * appenders share (appender.threads). */
    struct app_exec *exec;
    bool own_exec; /* exec is its own (never a shared one, which may end before the appender) */
    rpc_poller_t *poller; /* the completion queue of exec, which its thread owns */
    /* Set by the thread as it goes idle: false when every lane's pipeline is full on a live
     * stream, so that a batch a producer opens or fills could not go out before an answer
     * (or a deadline the thread already waits for) wakes the thread anyway. */
    bool intake_wakes;
    size_t space_waiters; /* producers waiting on space */
    uint64_t flush_upto;  /* batches opened up to this seq go out without lingering */
    struct app_flush_waiter *flush_waiters; /* (mu) flushes and closes waiting, newest first */
    app_batch_t *open;
    batch_list_t ready;
    batch_list_t free_slots;
    app_batch_t **slots; /* every slot, for flush's scan and the final free */
    size_t n_slots;
    /* Slots added as records waited for one (app_slots_grow_locked), and the most it may
     * add. Slots beyond the initial ones go back once free for APP_SLOT_IDLE_MS
     * (app_slots_trim), so slots_grown falls too. */
    size_t slots_grown, slots_growing, slots_grow_max;
    /* wire_now_ms at which a free slot beyond the initial ones may have been idle long
     * enough (INT64_MAX: none); set under mu, read by the thread's round without it. */
    atomic_int_fast64_t trim_at_ms;
    uint64_t next_seq;
    uint64_t pending_calls, pending_records, pending_bytes;
    app_retry_t *retries;
    batch_list_t resolved; /* settled by a read-back task, for the thread to settle */
    /* Set (under mu) with each push to resolved: the thread's round looks at it without mu,
     * so that the common round, with nothing read back, takes no lock for it. */
    atomic_bool resolved_ready;
    size_t n_retries; /* retry tasks not yet released by the engine */
    bool in_client_list;
    struct varlog_appender *next_in_client; /* (client mu) */

    app_lane_t **lanes; /* the thread's; appended to, never shrunk */
    size_t n_lanes;
    uint64_t lanes_index;   /* metadata applied index the lanes were built from */
    size_t rr;              /* round-robin start of the lane pick */
    wire_scratch_t scratch; /* an answer laid out flat */

    /* The result objects callbacks receive: one is taken per run of callbacks, filled for
     * each call in turn and given back after the last callback. */
    vq_objpool_t *results;
    bool has_thread;               /* set before the handle is returned, never changed */
    bool joinable;                 /* (mu) its own thread, and nobody joined it yet */
    batch_list_t *outboxes;        /* the thread's: per lane, batches to send */
    varlog_appender_stats_t stats; /* (mu), gauges filled on read */
    atomic_uint_fast64_t inflight_batches;
    atomic_uint_fast64_t inflight_records, inflight_bytes; /* with inflight_batches */
    struct app_member *member; /* what its thread keeps of it between rounds */
};

/* ---- lists ---- */
void blist_push(batch_list_t *l, app_batch_t *b);
app_batch_t *blist_pop(batch_list_t *l);
/* Inserts every batch of src into dst by increasing seq (both lists sorted). */
void blist_merge(batch_list_t *dst, batch_list_t *src);

/* A flush (or close) waiting for the batches opened up to seq: the thread counts them down
 * as they settle and wakes the waiters once one reaches 0, so that a flush waiting for
 * thousands of batches wakes once, not once per settled batch with a scan of every slot. */
typedef struct app_flush_waiter {
    uint64_t seq;
    size_t batches; /* of them, not settled yet */
    struct app_flush_waiter *next;
} app_flush_waiter_t;

/* ---- appender.c ---- */
/* A batch opened as seq settled (its callbacks ran): counts it off every flush waiting for
 * it; true when one of them has nothing left to wait for. Called with mu held. */
bool app_flush_settled_locked(varlog_appender_t *app, uint64_t seq);
/* Wakes producers waiting for room once a good share of the queue is free (or nothing is
 * pending), not for every settled batch: a producer then queues many calls per wake-up
 * instead of one. Called with mu held. */
void app_wake_producers_locked(varlog_appender_t *app);
/* Wakes the thread if it sleeps, wherever it sleeps. Called with mu held. */
void app_wake_thread_locked(varlog_appender_t *app);
void app_ref(varlog_appender_t *app);
void app_unref(varlog_appender_t *app);
/* Batches taken out of the ready list (for a send, a retry), back on it in their order,
 * ahead of newer ones; batches is left empty. Called with mu held. */
void app_ready_return_locked(varlog_appender_t *app, batch_list_t *batches);
/* Adds a lane for log stream ls, with its transmit-queue slots (depth + 1). Called before
 * the thread starts, then only by the thread, without mu. NOMEM leaves the lanes as they
 * were. */
varlog_err_t app_add_lane(varlog_appender_t *app, int32_t ls);

/* ---- appender_slots.c: the batch slots ---- */
/* A slot whose batch settled, back to the free list; called with mu held. */
void app_slot_free_locked(varlog_appender_t *app, app_batch_t *b);
/* Adds n free slots (mu taken per slot, let go while each is allocated). NOMEM when memory
 * runs out; the slots added before stay the appender's. */
varlog_err_t app_add_slots(varlog_appender_t *app, size_t n);
/* Every slot is taken while the queue bounds have room: one more slot, unless the appender
 * grew by appender.queue.max.records / appender.batch.max.records slots already (the
 * slots a queue of full batches needs beyond the lanes' own). Slots beyond the initial ones
 * go back once idle (app_slots_trim). Called with mu held, which it lets go while it allocates;
 * true when a slot was added (by this call or a concurrent one: look again). */
bool app_slots_grow_locked(varlog_appender_t *app);
/* The appender is freed: every slot's memory, and the list of them. */
void app_slots_free(varlog_appender_t *app);
/* gRPC dropped its last reference to a batch's bytes. */
void app_body_released(void *batch);

/* Most slots an appender adds beyond its lanes' own as records wait (each reserves
 * appender.batch.max.bytes of address space). */
#define APP_SLOTS_GROW_MAX 4096

/* How long a slot beyond the initial ones stays free before it is given back: longer than
 * the pauses of a steady load (a flush, a producer between bursts a moment apart), so that
 * the steady state allocates nothing, short enough that a burst's memory goes back soon. */
#define APP_SLOT_IDLE_MS 1000

/* Slots whose region (buffer, calls, metas) is at least this big are mapped (mmap) rather
 * than malloc'd: munmap returns their pages to the system when they are given back, where a
 * large block freed to malloc may stay in its heap (glibc raises its mmap threshold to the
 * size of a freed mapped block, so later slots would come from the heap). */
#define APP_SLOT_MAP_MIN (128 * 1024)

/* varlog_appender_append_ref copies records below this size: each referenced record is two
 * more pieces of the request for gRPC and the kernel to gather (its tag and length, its
 * bytes), which cost more than the copy of a small record (an 8-log-stream topic, 100
 * records a request: 128 B records 0.36-0.40 us of client CPU each referenced, 0.21-0.26
 * copied; 4 KiB records 1.28-1.37 referenced, 1.29-1.48 copied). */
#define APP_REF_MIN_BYTES 1024
/* APP_REF_MIN_BYTES, which tests lower to reference records of every size. */
extern size_t app_ref_min_bytes;

/* The thread's round (app_run_settled): gives back the slots beyond the initial ones that
 * have been free for APP_SLOT_IDLE_MS, once trim_at_ms is due. Takes mu only then; frees
 * their memory without it. */
void app_slots_trim(varlog_appender_t *app, int64_t now_ms);

/* ---- appender_budget.c: the client-wide bound (appender.client.queue.max.*) ---- */
/* Whether n records of bytes fit beside what the client's appenders hold (always, when
 * nothing is held). A look, not a reservation. */
bool app_budget_fits(varlog_client_t *c, uint64_t n, uint64_t bytes);
/* Reserves n records of bytes; false when they do not fit. With the appender's mu held. */
bool app_budget_take(varlog_client_t *c, uint64_t n, uint64_t bytes);
/* What a settled batch held goes back; wakes producers waiting for it once a quarter of each
 * bound is free (or nothing is held). Any thread, any lock but the budget's mu held. */
void app_budget_release(varlog_client_t *c, uint64_t records, uint64_t bytes);
/* Sleeps until a settle of any of the client's appenders may have made room for n records of
 * bytes, until app closes, or until *until (NULL: no limit); false on the timeout. Called
 * with app's mu held, which it lets go while it sleeps and holds again on return. */
bool app_budget_wait_locked(varlog_appender_t *app, uint64_t n, uint64_t bytes,
                            const struct timespec *until);
/* app closes (closing just set, mu held): its producers waiting for the bound look again. */
void app_budget_wake_closing_locked(varlog_appender_t *app);

/* How long a stream being ended may take to report its sends and its status. */
#define APP_SEND_SETTLE_MS 1000

/* What the appender's thread keeps between rounds (its own; no lock). */
typedef struct app_thread_state {
    varlog_appender_t *app;
    /* Batches with their outcome, in call order (seq), whose callbacks have not run: those
     * behind an older batch of their log stream still on its way wait there for it
     * (appender_settle.c). */
    batch_list_t settled;
    int32_t *allowed; /* topic mode: allowed log streams, from the allowlist */
    size_t n_allowed, allowed_cap;
    int32_t fallback_ls;  /* when none is allowed: the denial that ends first */
    varlog_err_t no_lane; /* NO_LOG_STREAM / UNKNOWN_TOPIC when nothing can be picked */
    char no_lane_why[160];
    bool stopping;
    grpc_slice *pieces; /* send_pieces' scratch: a request with referenced records */
    size_t pieces_cap;
} app_thread_state_t;

/* One appender as its thread runs it, round after round. The thread's own. */
typedef struct app_member {
    app_thread_state_t ts;
    int64_t next_poll; /* topic mode: the next look for a new metadata version */
    bool work;         /* the last plan left work: the next round does not sleep */
} app_member_t;

/* The thread that runs appenders (appender_exec.c): with appender.threads 0 each appender
 * has one of its own, which ends with it; otherwise the client's appenders share
 * appender.threads of them, which end with the client. Each round it does every member's
 * work (sends, answers, callbacks), then plans each under its mu, then sleeps in its
 * poller's poll while completions of its streams are on their way (answers, ends and sends
 * wake it there, with no hand-off through gRPC's I/O thread), on wake otherwise.
 *
 * Lock order: an appender's mu, then mu here. The thread never takes an appender's mu with
 * mu held. */
typedef struct app_exec {
    varlog_client_t *c;
    rpc_poller_t *poller; /* owned by the thread; NULL once it destroyed it */
    pthread_t thread;
    bool dedicated; /* one appender's own: it exits as the appender leaves */
    bool started;   /* the thread runs (or ran) */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    /* (mu) Something an idle member's plan did not see changed: the thread does not sleep,
     * or wakes. Cleared as a round begins, before any plan. intake_news: the change was a
     * producer's record, which does not cut a poll short (the poll is sliced for it). */
    bool news, intake_news;
    bool sleeping, in_poll, kicked; /* (mu) where it sleeps; one kick per sleep */
    bool stop;                      /* (mu) shared: the client is being destroyed */
    varlog_appender_t **joining;    /* (mu) added, not yet taken by the thread */
    size_t n_joining, joining_cap;
    size_t load; /* (mu) appenders on it, joining included: the least loaded takes the next */
} app_exec_t;

/* ---- appender_resolve.c ---- */
/* Hands ambiguous batches (sent on lane's stream, in order, each failed MAYBE_APPENDED with
 * its text) to a read-back task, which holds the lane until it is done; batches is then
 * emptied. false: not started (closing, memory), the caller settles them as they are. */
bool app_resolve_submit(app_thread_state_t *ts, app_lane_t *lane, batch_list_t *batches);
/* The thread's round: settles what read-back tasks found or gave up on. Takes mu only when
 * there is something (resolved_ready). */
void app_take_resolved(app_thread_state_t *ts);
/* Takes r off the appender's list of retries out. Called with mu held. */
void app_retry_unlink_locked(varlog_appender_t *app, app_retry_t *r);
/* A read-back's batches taken back at the oldest one's deadline (r->taken just set): those
 * its passes found are settled APPENDED, those proved absent and not expired go to back (to
 * be sent again), the rest fail as their deadline or the older batch's ended the read-back.
 * With mu, on the appender's thread. */
void app_resolve_expire_locked(app_thread_state_t *ts, app_retry_t *r, int64_t now_ms,
                               batch_list_t *back);

/* ---- appender_settle.c ---- */
/* The only way a batch with its outcome (err, outcome, errtext set) reaches its callbacks:
 * into ts->settled, by call order. */
void app_settle(app_thread_state_t *ts, app_batch_t *b);
/* Runs the callbacks of the settled batches that no older batch of their log stream is still
 * waiting for, in call order, and gives their room back. Without mu. */
void app_run_settled(app_thread_state_t *ts);
/* The thread stops: every batch is settled; runs every callback left, in call order. */
void app_run_all_settled(app_thread_state_t *ts);
/* With mu: whether app_run_settled would run a callback now. */
bool app_settled_due_locked(const app_thread_state_t *ts);

/* ---- appender_exec.c ---- */
/* The thread for a new appender, which is then app->exec: a new one of its own
 * (appender.threads 0; the thread starts in app_exec_start), or the least loaded of the
 * client's shared ones (created as needed, started at once). Also sets app->poller. Errors:
 * NOMEM, INTERNAL (the completion queue or the thread). */
varlog_err_t app_exec_attach(varlog_appender_t *app);
/* Hands app to its thread (starting it if it is the appender's own). INTERNAL when the
 * thread could not start; the appender is then not on it. */
varlog_err_t app_exec_start(varlog_appender_t *app);
/* Tells app's thread, if it sleeps, that something changed: a kick of its poll unless
 * from_intake (intake never kicks: a kick is an allocation in gRPC, and the poll is sliced
 * while intake could let a batch out). Called with app's mu held, only while
 * app->thread_idle. */
void app_exec_notify_locked(varlog_appender_t *app, bool from_intake);
/* Whether the calling thread runs app's callbacks (its own thread, or the shared one). */
bool app_exec_current(const varlog_appender_t *app);
/* Joins app's own thread, which let the appender go; nothing for a shared one (it ends with
 * the client: app_execs_stop, client_internal.h). */
void app_exec_join_own(varlog_appender_t *app);
/* The appender is freed: its own thread's state goes with it (joined before, or never
 * started); a shared one forgets it if it never joined. */
void app_exec_free_own(varlog_appender_t *app);

/* ---- appender_io.c ---- */
/* Whether the allowlist lets batches go to lane now (bound mode: always). */
bool app_lane_allowed(const app_thread_state_t *ts, const app_lane_t *lane);
/* The work of a round for one appender: new lanes, read-backs, sends, answers, callbacks. */
void app_round_work(varlog_appender_t *app, int64_t now);
/* What a member's plan tells its thread. */
typedef struct app_plan {
    int64_t next;      /* when to look again at the latest (INT64_MAX: when woken) */
    bool work;         /* look again at once */
    bool expecting;    /* completions of its streams are on their way */
    bool intake_wakes; /* intake may wake the thread (its poll is sliced) */
    size_t streams;    /* its lanes' streams (the poller's live streams beyond: ended ones) */
} app_plan_t;
/* Deadlines of one appender, then its plan under its mu, marking it idle when it leaves no
 * work. false: it is stopping, and must be let go (app_round_leave). */
bool app_round_plan(varlog_appender_t *app, int64_t now, app_plan_t *plan);
/* Whether the appender waits for answers and none is there to read: its thread may go on
 * polling for them. */
bool app_answers_awaited(const varlog_appender_t *app);
/* Whether a lane of the appender has something to read. */
bool app_readable(const varlog_appender_t *app);
/* The appender is stopping: every stream cancelled, everything settled, its callbacks run;
 * then it is marked done and the thread's reference dropped: the caller no longer touches
 * it. */
void app_round_leave(varlog_appender_t *app);
/* The thread that runs app starts: it becomes the one that completes app->poller's streams. */
void app_thread_begins(rpc_poller_t *poller);
app_lane_t *app_lane_new(varlog_appender_t *app, int32_t ls);
void app_lane_free(app_lane_t *lane);
/* Forgets lane's stream and everything learned of it; returns the stream (NULL if none),
 * which the caller destroys once it no longer reads its status. */
rpc_stream_t *app_lane_drop_stream(app_lane_t *lane);

/* ---- appender_deadline.c ---- */
/* Whether b's delivery deadline (appender.delivery.timeout.ms after its first call) passed. */
bool app_batch_expired(const app_batch_t *b, int64_t now_ms);
/* Settles b with TIMED_OUT and a text naming the deadline, where the batch was (e.g. "while
 * the batch was in flight to log stream 1 of topic 1 at host:port") and, if given, its last
 * attempt's failure. */
void app_batch_fail_expired(app_batch_t *b, const char *what, const char *last);
/* With mu: fails the ready and open batches whose deadline passed into ts->settled; returns
 * the next deadline among those left (INT64_MAX: none). */
int64_t app_expire_waiting_locked(app_thread_state_t *ts, int64_t now_ms);
/* The earliest deadline among the batches in flight on lane (INT64_MAX: none). */
int64_t app_inflight_deadline(const app_lane_t *lane);
/* A batch for lane gave up because the log stream's node could not be reached: every batch
 * waiting to be sent there (bound mode), or waiting at all when no other log stream of the
 * topic can take it (topic mode), fails now with err and cause, rather than each going
 * through its own attempts. Without mu. */
void app_fail_behind_unreachable(app_thread_state_t *ts, app_lane_t *lane, varlog_err_t err,
                                 const char *cause);

/* ---- appender_fail.c ---- */
/* Settles b with err and an outcome from what is known (MAYBE_APPENDED once an attempt may
 * have stored it) and a text. */
void app_batch_fail(app_batch_t *b, varlog_err_t err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Settles or retries every batch still on lane's stream, then drops the stream; err and msg
 * are the stream's end (its final status, or a local failure). */
void app_lane_failed(app_thread_state_t *ts, app_lane_t *lane, varlog_err_t err, const char *msg);

#endif
