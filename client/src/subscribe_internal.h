#ifndef VARLOG_SUBSCRIBE_INTERNAL_H
#define VARLOG_SUBSCRIBE_INTERNAL_H

/*
 * A subscription, shared by subscribe.c (the public calls, the handler thread, the
 * lifecycle) and subscribe_merge.c (the streams, the merge, failures and resubscription).
 *
 * One consumer at a time runs the merge (sub_step): the subscription's thread in the handler
 * form (or the shared thread it was given to, subscribe_shared.c), the caller of
 * varlog_subscription_next in the iterator form. Everything below marked
 * "consumer" is touched by it alone, without a lock. `mu` guards the rest: the list of log
 * streams with news (filled by the streams' notify hooks, which run inside the consumer's
 * poll of the subscription's poller and hold the stream's lock while they take mu, so mu is
 * never held while calling into a stream; and by retry tasks on the client's engine),
 * closing, and the counters read by varlog_subscription_stats.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "client_internal.h"
#include "log_io_codec.h"
#include "rpc_client.h"
#include "transmit_queue.h"
#include "varlog/subscribe.h"
#include "wire.h"

#define SN_PATH_SUBSCRIBE "/varlog.snpb.LogIO/Subscribe"
#define SN_PATH_SUBSCRIBE_TO "/varlog.snpb.LogIO/SubscribeTo"

typedef struct varlog_subscription varlog_subscription_t;

/* One log stream being read. */
typedef struct sub_ls {
    varlog_subscription_t *sub;
    int32_t log_stream_id;

    /* consumer */
    rpc_stream_t *rpc;      /* NULL while closed: finished, or waiting for a retry */
    rpc_stream_t *next_rpc; /* the next read window's, opened ahead (subscribe_window.c) */
    char *target;           /* address of the replica rpc reads from */
    size_t replica;         /* index among the log stream's replicas of the next open */
    grpc_byte_buffer *held; /* the message head (or the entry delivered last) points into */
    codec_entry_t head;     /* the next entry of this log stream, when has_head */
    bool has_head;          /* head is valid and in the merge's heap */
    bool finished;          /* the stream ended OK: it holds nothing more of the range */
    bool retrying;          /* a retry task will ask for a new stream */
    unsigned failures;      /* failures in a row without progress (subscribe_outage.c) */
    int64_t down_since_ms;  /* its outage began then (wire_now_ms; 0: not in an outage) */
    int64_t opened_ms;      /* consumer: rpc was opened (or, a retry's, taken) then */
    varlog_err_t last_err;  /* its latest failure, and its text: "at ADDR: ERR: reason" */
    char last_why[256];
    uint64_t last_pos; /* position of the last entry received (0 = none yet) */
    /* Consumer lag (stats_lag.c), stored by the consumer, read by a scrape: 1 + the LLSN
     * before the first entry of this log stream not delivered yet (0: not known yet;
     * pub_known: the consumer's own note that it stored one), and whether the range is
     * complete here. */
    atomic_uint_fast64_t pub_llsn;
    bool pub_known;
    atomic_bool pub_finished;
    metrics_series_t *series; /* its (topic, log stream) metrics, looked up once */
    /* subscribe.stage.timing: the head's arrival (the stream's stamp on gRPC's thread) and
     * when it went into the merge's queue (CLOCK_MONOTONIC ns). */
    int64_t head_arrival_ns, head_queued_ns;
    wire_scratch_t scratch; /* a message received in several slices, laid out flat */
    char decode_why[128];   /* why the last message could not be read */
    struct sub_ls *work;    /* the consumer's copy of the news list */
    bool work_reopen;       /* the consumer's copy of reopen */
    rpc_stream_t *work_rpc; /* the consumer's copy of pending_rpc */
    uint64_t work_end;      /* and of pending_end */

    /* The stall check's view of the stream's traffic: the notify hook counts what it saw,
     * and the periodic check, finding the count moved, stamps last_recv_ms (or the open
     * does): no clock read per message, the stamp as fine as the check's interval. */
    atomic_uint_fast64_t received; /* the notify hook's calls */
    uint64_t received_seen;        /* consumer: the count at the last check */
    int64_t last_recv_ms;          /* consumer only */

    /* mu */
    bool queued;               /* on the subscription's list of log streams with news */
    bool reopen;               /* the retry's backoff passed: use pending_rpc, or open a stream */
    rpc_stream_t *pending_rpc; /* opened by the retry task, for the consumer to take */
    uint64_t pending_end;      /* the end of the range pending_rpc asks for */
    struct sub_ls *next;       /* that list */
} sub_ls_t;

typedef enum { SUB_BY_GLSN, SUB_BY_LLSN } sub_order_t;

struct varlog_subscription {
    varlog_client_t *c;
    sub_order_t order;
    int32_t topic_id;
    int32_t fixed_ls; /* SUB_BY_LLSN: its log stream */
    uint64_t begin, end;
    /* The read window (subscribe.window.bytes > 0; subscribe_window.c): every stream asks
     * for the positions below win_end only, so that what the storage nodes send
     * ahead of a slow reader, and gRPC holds in its HTTP/2 windows, is at most the window's
     * entries and the next's; the next window's streams open once the merge reached
     * win_ahead_at, and take over when it passed win_end. 0: one range, [begin, end).
     * Written by the consumer; atomic for the retry tasks, which read it too. Consumer,
     * but win_end. */
    atomic_uint_fast64_t win_end;
    uint64_t win_ahead_at;                 /* UINT64_MAX: no next window to open ahead */
    uint64_t win_next_end;                 /* the next window's end, once it opened (0: not) */
    uint64_t win_entries_at, win_bytes_at; /* n_entries, n_bytes as the last began */
    bool has_handlers;
    varlog_subscribe_handlers_t handlers;
    atomic_int refs; /* the handle, the thread, each retry task */

    /* consumer */
    uint64_t wanted; /* the next position to deliver */
    sub_ls_t **ls;   /* by pointer: the notify hooks keep theirs while the array grows */
    size_t n_ls, cap_ls;
    tq_t *heap;            /* heads of the log streams that have one, by position */
    sub_ls_t *delivered;   /* the log stream of the entry handed out last */
    uint64_t view_index;   /* applied index of the metadata last scanned for log streams */
    int64_t next_check_ms; /* next look at the metadata and for stalled streams */
    unsigned quick_polls;  /* non-blocking polls in a row since an entry was handed out */
    /* Polls that slept (two clock reads each) and periodic checks (one): the only clock
     * reads of the consumer while stage timing is off. */
    uint64_t waits, checks;
    /* A gap: the wanted GLSN is in no head while every log stream holds one or finished. A
     * fresh metadata lookup tells whether a log stream the subscription does not read holds
     * it; gap_gen names the lookup asked for the current gap (0: none asked). */
    uint64_t gap_gen, gap_gens;
    int64_t gap_next_ask_ms; /* after a failed lookup: no new one before this */
    /* The wanted GLSN may be in a log stream the client's metadata does not show while the
     * log streams read keep their streams open (sub_gap_probe): the wanted GLSN the probe
     * watches, when it next asks for fresh metadata, and the pause after that. */
    bool probe_armed;
    uint64_t probe_wanted;
    int64_t probe_at_ms, probe_pause_ms;
    int64_t blocked_since_ms; /* the merge waits for a log stream without a head since (0: not;
                               * BLOCKED_UNSTAMPED: it does, the clock not read since) */
    varlog_err_t result;      /* VARLOG_OK while running; END or the failure, sticky */
    char why[512];            /* result's text */
    uint64_t rng;             /* jitter */
    int64_t retry_timeout_ms; /* subscribe.retry.timeout.ms: the client may be gone when
                               * varlog_subscription_health reads it */
    bool timing;              /* subscribe.stage.timing */
    varlog_subscribe_observer_cb *observer; /* varlog_conf_set_subscribe_observer (timing only) */
    void *observer_opaque;
    /* The entry handed out last (consumer, with timing): its stamps, taken_ns being the
     * merge's hand-out, and its log stream's series. */
    int64_t d_arrival_ns, d_queued_ns, d_taken_ns;
    metrics_series_t *d_series;
    /* Counters the consumer alone writes, read by varlog_subscription_stats: relaxed atomic
     * stores cost a plain store, so they are exact after every entry at no cost. */
    atomic_uint_fast64_t n_entries, n_bytes, n_duplicates, n_next;
    /* The highest position taken as a log stream's head: the lag statistic (varlog/stats.h). */
    atomic_uint_fast64_t n_seen_max;

    /* The subscription's streams complete here: the consumer polls it when it has nothing
     * to hand out, so gRPC reads the socket, the message is buffered and the notify hook
     * runs on the consumer's own thread, with no hand-off through gRPC's I/O thread. It
     * lives until every stream on it finished (sub_streams_done). NULL for a subscription
     * past the client's subscribe.self.receive.max: its streams complete on gRPC's I/O
     * thread, whose notify hooks wake the consumer sleeping on `wake`. */
    rpc_poller_t *poller;
    unsigned wakeup_entries; /* no poller: subscribe.wakeup.entries, at most the prefetch */
    int64_t wakeup_wait_us;  /* no poller: subscribe.wakeup.wait.us */
    uint64_t since_sleep;    /* no poller: entries delivered since the consumer last slept */

    pthread_mutex_t mu;
    pthread_cond_t wake;         /* no poller: news, a reopen, closing; the consumer waits on it */
    pthread_cond_t idle;         /* in_next or poller_users reached 0, or shutdown finished */
    bool waiting;                /* the consumer polls (or sleeps on wake) for news */
    bool kicked;                 /* ... and was kicked out of that poll already */
    bool batching;               /* no poller: it sleeps until wakeup_entries messages came */
    unsigned news_count;         /* no poller: hook calls since the consumer took the news */
    unsigned poller_users;       /* engine tasks opening a stream on poller or kicking it */
    sub_ls_t *news;              /* log streams with news (queued) */
    bool closing;                /* close or client destroy began */
    bool shut;                   /* streams released, thread joined: only the handle remains */
    bool shutting;               /* a thread is doing the shutdown */
    unsigned in_next;            /* varlog_subscription_next calls inside */
    bool detached;               /* closed from its own handler: the thread shuts it down itself */
    uint64_t gap_answered;       /* the gap lookup that answered last (its gap_gen) */
    varlog_err_t gap_answer_err; /* and its result */
    varlog_subscription_stats_t stats;
    /* What varlog_subscription_health reports, published by the consumer at each change. */
    uint32_t h_down;           /* log streams in an outage */
    int32_t h_ls;              /* the one in it longest */
    int64_t h_since_ms;        /* since then */
    int64_t h_end_ms;          /* the subscription ended then (0: running): down_ms stops */
    uint64_t h_outages;        /* times h_down left 0 */
    int64_t h_outage_began_ms; /* h_down left 0 then (the current outage) */
    uint64_t h_outage_ms;      /* length of the outages that ended (the client's statistics) */
    char h_last[256 + 32];     /* the latest failure, with its log stream */

    pthread_t thread;
    bool thread_started;
    bool thread_joined;         /* (mu) someone joined it */
    atomic_bool thread_exiting; /* closed from its handler, shut down: only the join is left */

    /* subscribe.handler.threads >= 1 (subscribe_shared.c): the thread it shares, set once
     * before its streams open; NULL for its own thread and for the iterator form. */
    struct sub_shared *shared;
    struct varlog_subscription *sh_next; /* (shared's mu) its ready list */
    bool sh_queued;                      /* (shared's mu) on that list */
    /* The thread serves it (set under shared's mu, after the thread's reference was taken;
     * read by the thread's notify hooks without it). */
    atomic_bool sh_attached;
    struct varlog_subscription *sh_local_next; /* the shared thread's: its own ready list */
    bool sh_local;                             /* the shared thread's: on that list */
    bool sh_known;                             /* the shared thread's: in its array */
    bool sh_ended; /* the shared thread's: END or the failure reported */
    /* The shared thread's clock read, passed to this subscription's next step (0: none, the
     * step reads none unless it must stamp a wait). */
    int64_t sh_now_ms;

    uint64_t id; /* the client's count of subscriptions when it was opened: the metrics' label */
    struct varlog_subscription *next_open; /* the client's list (client mu) */
    atomic_bool in_client; /* on that list; once false, close never touches the client */
};

/* subscribe_merge.c */

/* The next entry into *out, waiting until deadline_ms (wire_now_ms clock; < 0 = for ever):
 * OK, TIMED_OUT, CLOSED (closing), END or the failure (sticky, text in sub->why). Releases
 * the entry handed out by the previous call first. Consumer only. */
varlog_err_t sub_step(varlog_subscription_t *sub, int64_t deadline_ms, varlog_entry_t *out);

/* Adds the log streams of the topic the subscription does not read yet (all of them at the
 * start; one for SUB_BY_LLSN) and opens their streams. NOMEM. Consumer only. */
varlog_err_t sub_add_log_streams(varlog_subscription_t *sub, const md_view_t *view);

/* Releases every stream and held message. Consumer only, or once no consumer is left. */
void sub_release_streams(varlog_subscription_t *sub);

/* After closing was set and the last consumer left: waits for engine tasks still using the
 * poller (a retry opening a stream, a kick), releases every stream and drains and frees the
 * poller, so that no call of the subscription is left on the client. The consumer's own thread, or
 * any once it is gone. */
void sub_streams_done(varlog_subscription_t *sub);

/* How often the consumer looks at the metadata and for stalls while it waits (ms). */
int64_t sub_check_interval_ms(const varlog_subscription_t *sub);

/* The end of the range the streams ask for now: the window's, or the subscription's. The
 * consumer, or a retry task. */
static inline uint64_t sub_range_end(varlog_subscription_t *sub)
{
    uint64_t end = atomic_load_explicit(&sub->win_end, memory_order_relaxed);
    return end ? end : sub->end;
}

/* subscribe_window.c. A window spans subscribe.window.bytes over the mean size of the
 * entries read lately, at least 64 GLSNs per log stream, never past the subscription's
 * end. Consumer only. */

/* The first window, from the wanted position (n_log_streams: the topic's; 1 in LLSN order).
 * Nothing with subscribe.window.bytes 0. */
void sub_window_begin(varlog_subscription_t *sub, size_t n_log_streams);

/* The merge reached win_ahead_at: opens each log stream's stream of the next window. */
void sub_window_ahead(varlog_subscription_t *sub);

/* The merge passed the window (end: its end; no head is left): the next window's streams
 * take over (opened now where none was opened ahead). */
void sub_window_pass(varlog_subscription_t *sub, uint64_t end);

/* subscribe_merge.c, for subscribe_window.c */

/* Starts a stream of ls for positions [from, end) on its current replica into *out; on
 * failure returns the error with its text in why. A stream opened ahead (the next read
 * window's) has no notify hook: what it receives is not ls's news, nor traffic for the stall
 * check of ls's current stream, until sub_take_ahead takes it into use. */
varlog_err_t sub_open_call(varlog_subscription_t *sub, sub_ls_t *ls, uint64_t from, uint64_t end,
                           bool ahead, rpc_stream_t **out, char *why, size_t why_size);

/* ls's stream opened ahead (next_rpc) becomes its stream: the stall check counts from now,
 * its hook is set, and what it received before is announced. Consumer only. */
void sub_take_ahead(varlog_subscription_t *sub, sub_ls_t *ls);

/* Opens ls's stream on its current replica, from the first position not delivered yet to the
 * end of the range (the window's); a failure is ls's (retried, or the subscription's end). */
void sub_ls_open(varlog_subscription_t *sub, sub_ls_t *ls);

/* Cancels ls's stream, if open. */
void sub_close_stream(sub_ls_t *ls);

/* subscribe_wait.c */

/* Waits for news until deadline_ms or the next check (now: the clock read just before);
 * TIMED_OUT once deadline_ms passed. Consumer only. */
varlog_err_t sub_wait_news(varlog_subscription_t *sub, int64_t deadline_ms, int64_t now);

/* Makes a consumer that polls for news return from its poll, to see what another thread
 * changed under mu (closing, a reopened stream, a gap's answer). Without mu held; any thread. Kicks
 * at most once per poll (each kick costs gRPC an allocation), and never a poller already gone. */
void sub_wake(varlog_subscription_t *sub);

/* subscribe_gap.c */

typedef enum { SUB_GAP_WAIT, SUB_GAP_SKIP } sub_gap_verdict_t;

/* The wanted GLSN is in no head and every log stream the subscription reads holds a later
 * one (least_head the least) or finished: whether to wait (a metadata lookup is asked, or a
 * log stream not read yet was added) or to go on from least_head. Consumer only. */
sub_gap_verdict_t sub_gap_resolve(varlog_subscription_t *sub, uint64_t least_head);

/* From the periodic check while the merge waits: asks for fresh metadata (the client's
 * recheck) when the wanted GLSN may be in a log stream the subscription does not read while
 * those it reads keep their streams open; the check adds what it shows. Consumer only. */
void sub_gap_probe(varlog_subscription_t *sub, int64_t now);

/* Ends the subscription with err and a text, unless it ended already. Consumer only. */
void sub_fail(varlog_subscription_t *sub, varlog_err_t err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* subscribe_outage.c: outages of log streams, the bound on them, varlog_subscription_health */

/* ls's stream broke, or could not be opened, with err at target (msg: the reason, may be
 * ""): begins ls's outage unless it is in one, and ends the subscription (sub_fail) when the
 * outage outlasted subscribe.retry.timeout.ms or the failures subscribe.retries. Returns
 * whether it ended it; otherwise the caller reopens the stream. Consumer only. */
bool sub_outage_failed(varlog_subscription_t *sub, sub_ls_t *ls, varlog_err_t err,
                       const char *target, const char *msg);

/* ls received an entry it had not sent before: progress, its outage (if any) ends. */
void sub_outage_progress(varlog_subscription_t *sub, sub_ls_t *ls);

/* The periodic look at a log stream in an outage: its stream stayed open long enough on a
 * live connection (progress), or its range is complete, or the outage outlasted
 * subscribe.retry.timeout.ms and the last reopening had its chance (the subscription
 * ends). Consumer only. */
void sub_outage_check(varlog_subscription_t *sub, sub_ls_t *ls, int64_t now);

/* The backoff delay before ls's next reopening, cut to what is left of its outage's bound so
 * that the last attempt is made at the bound rather than before it. */
int64_t sub_outage_delay_ns(const varlog_subscription_t *sub, const sub_ls_t *ls, int64_t delay_ns);

/* The subscription ended (END or a failure): varlog_subscription_health's down_ms stops. */
void sub_outage_ended(varlog_subscription_t *sub);
/* The subscription's outages for the client's statistics: how many began, their length in
 * ms (the current one up to now), and the log streams down now (0 once it ended). Any
 * thread; takes sub->mu. */
void sub_outage_totals(varlog_subscription_t *sub, int64_t now, uint64_t *outages,
                       uint64_t *outage_ms, uint32_t *down);

/* subscribe_stages.c: stage timings (subscribe.stage.timing) */

/* The entry e that sub_step handed out last reached the application at handed_ns (the clock
 * read just before the handler's call or varlog_subscription_next's return); its handler
 * took handler_ns (-1: iterator form). Records the stages into the client's histograms and
 * e's series, then calls the observer. Consumer only, with sub->timing, no lock held. */
void sub_stages_note(varlog_subscription_t *sub, const varlog_entry_t *e, int64_t handed_ns,
                     int64_t handler_ns);

/* subscribe.c */
/* Hands e, which sub_step just returned, to the handler (timed, with sub->timing): on the
 * subscription's own thread or its shared one, no lock held. */
void sub_hand_entry(varlog_subscription_t *sub, const varlog_entry_t *e);
/* The handler form's end: on_end for END, on_error for a failure, nothing for CLOSED or
 * TIMED_OUT (a close; a shared thread's turn that found nothing). */
void sub_hand_end(varlog_subscription_t *sub, varlog_err_t err);
void sub_ref(varlog_subscription_t *sub);
void sub_unref(varlog_subscription_t *sub);
/* Takes sub off its client's list of open subscriptions (once). */
void sub_client_unlink(varlog_subscription_t *sub);

/* subscribe_shared.c: handler-form subscriptions sharing subscribe.handler.threads threads.
 * A shared thread owns one poller on which its subscriptions' streams are opened; it steps
 * a subscription (sub_step with a deadline already passed, so that it never waits inside
 * one) when the subscription is on its ready list (news from a stream, a retry, a gap's
 * answer, a close) or its periodic check is due, and sleeps only in its poller's poll. */
typedef struct sub_shared sub_shared_t;

/* Gives sub (not yet opened) to the shared thread serving the fewest subscriptions, starting
 * it (and its poller) if it is not running, and sets sub->shared and sub->poller. CLOSED
 * (client closing), NOMEM, INTERNAL (poller or thread). */
varlog_err_t sub_shared_assign(varlog_subscription_t *sub);

/* Its streams are open: the thread serves it from now on (takes a reference). */
void sub_shared_attach(varlog_subscription_t *sub);

/* The open failed before sub_shared_attach (its streams released already): the thread
 * forgets it. */
void sub_shared_abort(varlog_subscription_t *sub);

/* Puts sub on its thread's ready list and kicks the thread's poll unless the caller is that
 * thread. Any thread, no lock held. */
void sub_shared_wake(varlog_subscription_t *sub);

/* sub_shared_wake from one of sub's streams' notify hooks, sub->mu held. On the shared
 * thread itself (inside its poll, where nearly every notify runs) it takes no lock: the
 * thread keeps a ready list of its own. */
void sub_shared_notified_locked(varlog_subscription_t *sub);

/* Whether the calling thread is sub's shared thread (a handler of one of its subscriptions
 * runs). */
bool sub_shared_on_thread(const varlog_subscription_t *sub);

#endif
