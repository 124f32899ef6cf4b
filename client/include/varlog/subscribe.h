#ifndef VARLOG_SUBSCRIBE_H
#define VARLOG_SUBSCRIBE_H

/*
 * Reading the log: a topic in global order (GLSN), one log stream in local order (LLSN),
 * the first and last entry of a log stream, and trimming a topic's prefix.
 *
 * varlog_subscribe opens one Subscribe stream per log stream of the topic (log streams added
 * to the topic later join when the client's metadata shows them; while the merge waits for a
 * GLSN that no log stream it reads has sent, it asks for fresh metadata itself, within
 * metadata.recheck.interval.ms, when a later entry proves that GLSN stored or the range (or
 * read window) is bounded: after a check interval (at most 250 ms), then at pauses doubling
 * up to a minute) and merges them: entries
 * come out in strictly increasing GLSN, each GLSN of [begin, end) exactly once, with no gap
 * (Varlog numbers a topic's entries densely; a GLSN no log stream holds, such as one below
 * the first entry, is passed over only once every log stream has shown an entry beyond it).
 * An end of VARLOG_GLSN_MAX tails the topic for ever.
 *
 * Two forms, the same semantics:
 *   - handlers: the subscription's own thread ("varlog-sub") calls on_entry for each entry,
 *     then exactly one of on_end (the range is complete) or on_error (a failure it cannot
 *     recover from), unless varlog_subscription_close came first;
 *   - iterator: the application calls varlog_subscription_next, which returns the next
 *     entry, TIMED_OUT, END, or the error, on the caller's thread.
 *
 * The consumer reads its own streams: the thread that waits for the next entry (varlog-sub,
 * or the caller of varlog_subscription_next) is the one that receives the messages from
 * gRPC, so that entries streaming in cost no hand-off between threads and no wake-up of
 * another thread, and an entry that arrives while the consumer waits is handed out at once
 * (nothing batches them). While the application holds the consumer (inside a handler, or
 * between calls of varlog_subscription_next) the subscription reads nothing: what the
 * storage node sends meanwhile waits in the connection, bounded by gRPC's flow control, and
 * is taken when the consumer comes back. This holds for the first subscribe.self.receive.max
 * (8) subscriptions open at once on a client; past them gRPC's I/O thread receives for the
 * others and wakes their consumers, once per subscribe.wakeup.entries messages while entries
 * stream in (adding at most subscribe.wakeup.wait.us of latency, 500 us), at every entry
 * otherwise: hundreds of consumers each waiting inside gRPC cost more than one thread
 * receiving for them all.
 *
 * Memory is bounded whatever the range: per log stream at most subscribe.prefetch.entries
 * entries and subscribe.prefetch.bytes bytes are buffered (plus the one being merged), which
 * is what a log stream can get ahead while the merge waits for another one. A consumer
 * slower than the writers stops the receives, and gRPC's flow control stops the storage
 * node once the stream's HTTP/2 window is full; gRPC holds up to that window per stream
 * besides, and sizes it from its estimate of the connection's bandwidth-delay product (tens
 * of MB per log stream for a slow reader of large entries). So a subscription asks each log
 * stream for a range of positions at a time (GLSNs of the topic; LLSNs for
 * varlog_subscribe_to), its read window, about subscribe.window.bytes of entries (32 MiB by
 * default), and opens the next window's streams once the merge is a quarter of a window
 * from the end: what the nodes send ahead of a slow consumer is at most the rest of one
 * window and the next, however many log streams the topic has (each window costs a stream
 * per log stream). The client property grpc.bdp.probe false keeps gRPC's windows at 64 KiB
 * besides, at more CPU per entry. Entries are read in place from the
 * received messages: nothing is copied and nothing is allocated per entry by the library
 * (gRPC allocates each message it receives; a window's streams, once per window).
 *
 * Failures: a log stream's stream that breaks (connection lost, node restarting, a
 * malformed message) is opened again, on the next replica, from the first GLSN not yet
 * delivered, after a jittered backoff (subscribe.retry.backoff.ms doubling up to
 * subscribe.retry.backoff.max.ms) taken on the client's engine with a metadata lookup; one
 * that stays silent for subscribe.stall.timeout.ms while another log stream shows the
 * wanted GLSN exists is treated as broken. Entries a new stream repeats are dropped.
 * How long it waits: the failure begins an outage of the log stream, which lasts until it
 * makes progress: an entry received that it had not sent before, or a stream that stayed
 * open for 1 s over a connection that is up while the subscription was not waiting for an
 * entry from it (the tail of an idle topic). A log stream in an outage for
 * subscribe.retry.timeout.ms (60 s by default, twice appender.delivery.timeout.ms; -1: for
 * ever) ends the subscription with its last error: the backoff is cut so that a last
 * reopening is made at the bound, and the subscription ends when that one fails or its
 * stream has had 1 s to show progress. So does failure number subscribe.retries + 1 in a
 * row when subscribe.retries is set (-1 by default: no count).
 * The text names the bound and the last failure (log stream, address, reason).
 * varlog_subscription_health tells whether the subscription is reconnecting.
 * A range that begins in a trimmed prefix ends it with VARLOG_ERR_TRIMMED; a node's
 * OutOfRange or InvalidArgument answer ends it at once. Sealed log streams are read normally
 * (their entries stay).
 * What ends a subscription, and where it is reported: on_end / END when the range is
 * complete; on_error / the error from varlog_subscription_next for a failure (TRIMMED,
 * RPC_* from the bound above, RPC_OUT_OF_RANGE, RPC_INVALID_ARGUMENT, DECODE, NOMEM,
 * UNKNOWN_LOG_STREAM, CLOSED when the client is closing); varlog_subscription_close
 * (nothing reported). Handler form: on the subscription's thread; iterator form: on the
 * caller of varlog_subscription_next.
 *
 * Stage timing (subscribe.stage.timing, false by default): each entry delivered is timed in
 * four stages, for the statistics (varlog_stats_t.subscribe_*, per client), the receive and
 * process durations per (topic, log stream) of varlog_stats_prometheus, and the observer of
 * varlog_conf_set_subscribe_observer. The clock (CLOCK_MONOTONIC) is read:
 *   a. on the consumer's thread as gRPC hands the entry's message over (the receive
 *      completes inside the consumer's poll), before it joins its log stream's receive
 *      buffer: time the message spent in the connection while the consumer was away is
 *      before a, not in any stage;
 *   b. on the consumer when the merge takes it from that buffer, decoded, into its queue of
 *      one head per log stream (the transmit queue, transmit_queue.h);
 *   c. when the merge hands it out: the least head is the wanted position;
 *   d. just before the handler is called (handler form), or just before
 *      varlog_subscription_next returns it (iterator form);
 *   e. when the handler returned (handler form).
 * enqueue = b - a (its wait behind the earlier entries of its log stream, and its decoding);
 * transmit_queue = c - b (its wait for the positions before it, from other log streams, and
 * for the handlers of earlier entries); dispatch = d - c; handler = e - d (handler form
 * only). With the property false none of these reads is made: the library reads no clock
 * per entry while entries stream in (a consumer that has to wait reads it once per wait).
 * Entries delivered are counted per (topic, log stream) either way.
 *
 * Threads and locks: handlers run one at a time on the subscription's thread, never on
 * gRPC's threads and never with a library lock held; they may call any function of the
 * library, including varlog_subscription_close on their own subscription.
 *
 * Shared threads (subscribe.handler.threads = N >= 1; 0, the default, is what is said above):
 * the client's handler-form subscriptions share N threads ("varlog-sub") instead of one each.
 * A subscription is given, when it opens, to the thread serving the fewest; a thread starts
 * with its first subscription and ends when its last one closed (it is joined by the next
 * subscription given to it, or by varlog_client_destroy). A thread receives the messages of
 * all its subscriptions' streams (one gRPC completion queue) and runs their handlers one at a
 * time. What changes, and only for handler-form subscriptions:
 *   - a handler that blocks, or takes long, delays every other subscription of its thread:
 *     nothing of theirs is received or delivered meanwhile (their entries wait in the
 *     connections, bounded by gRPC's flow control, as above; none is lost or reordered);
 *   - "the subscription's thread" below means the thread it shares: on_entry, on_end and
 *     on_error run there, varlog_subscription_health is updated there;
 *   - varlog_subscription_close called from a handler on that thread (of the same
 *     subscription or of another one the thread serves) marks the subscription and returns
 *     at once; no handler of it runs after the call returned (the thread shuts it down before
 *     it looks at it again). From any other thread, including a handler of a subscription on
 *     another shared thread, close waits until the thread shut the subscription down: no
 *     handler of it runs then or later. Two shared threads whose handlers close each other's
 *     subscriptions can deadlock, as two own threads can;
 *   - subscribe.self.receive.max does not count these subscriptions: each shared thread
 *     receives its own subscriptions' messages (subscribe.wakeup.* do not apply to them);
 *   - clock reads with stage timing off: still none per entry; a subscription reads the
 *     clock once each time it runs out of buffered entries, and the thread once per poll
 *     (its deadline is the next periodic check of its subscriptions), including polls that
 *     bring a completion with no entry.
 * What stays: each subscription's entries come in order, each once; its handlers never run
 * concurrently with each other, never on gRPC's threads, never with a library lock held;
 * exactly one of on_end / on_error unless closed first; a handler may call any function of
 * the library (varlog_client_destroy is refused, VARLOG_ERR_STATE, as on an own thread).
 * Iterator-form subscriptions are not affected by the property.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "varlog/client.h"
#include "varlog/error.h"
#include "varlog/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest GLSN / LLSN: as an end, "tail for ever". */
#define VARLOG_GLSN_MAX UINT64_MAX
#define VARLOG_LLSN_MAX UINT64_MAX

/* One entry of the log. data (len bytes, len may be 0) is owned by the library: valid until
 * the on_entry handler returns, or until the next varlog_subscription_next or
 * varlog_subscription_close on the subscription. meta.topic_id and meta.log_stream_id are
 * those of the stream it came from (the wire message does not carry them). */
typedef struct varlog_entry {
    varlog_entry_meta_t meta;
    const void *data;
    size_t len;
} varlog_entry_t;

typedef struct varlog_subscription varlog_subscription_t;

/* What a handler-form subscription calls, on its own thread (or on the thread it shares with
 * other subscriptions of the client when subscribe.handler.threads >= 1: see "Shared
 * threads" above). on_entry is required; on_end and on_error may be NULL. No handler runs
 * after varlog_subscription_close returned. A handler may close its own subscription (and,
 * on a shared thread, any other subscription of that thread, without waiting);
 * varlog_client_destroy is refused there (VARLOG_ERR_STATE: it would have to join this
 * thread). */
typedef struct varlog_subscribe_handlers {
    void (*on_entry)(const varlog_entry_t *entry, void *opaque);
    /* Every entry of the range was delivered. */
    void (*on_end)(void *opaque);
    /* The subscription failed: err and a text saying where and why (valid during the call).
     * No entry follows. */
    void (*on_error)(varlog_err_t err, const char *why, void *opaque);
    void *opaque;
} varlog_subscribe_handlers_t;

/*
 * Subscribes to topic_id's entries with GLSN in [begin_glsn, end_glsn) and calls handlers
 * (copied) on the subscription's thread. Checks the topic against the client's metadata
 * (refreshing it once, within metadata.call.timeout.ms, if the topic is unknown) and opens
 * the streams; does not wait for them. On success *out is owned by the caller, released
 * with varlog_subscription_close (varlog_client_destroy closes subscriptions still open and
 * leaves each handle valid for varlog_subscription_next, which returns CLOSED,
 * varlog_subscription_stats and varlog_subscription_close, which then frees it).
 * Errors: INVALID_ARG (NULL client, handlers, on_entry or out; topic_id < 1;
 * begin_glsn >= end_glsn), UNKNOWN_TOPIC, CLOSED (client closing), NOMEM, INTERNAL (thread,
 * or with subscribe.handler.threads >= 1 the shared thread or its completion queue could
 * not be started), or the metadata refresh's error. The text is in varlog_last_error().
 */
VARLOG_API varlog_err_t varlog_subscribe(varlog_client_t *client, int32_t topic_id,
                                         uint64_t begin_glsn, uint64_t end_glsn,
                                         const varlog_subscribe_handlers_t *handlers,
                                         varlog_subscription_t **out);

/* As varlog_subscribe, in the iterator form: no thread; entries come from
 * varlog_subscription_next. Errors as varlog_subscribe (handlers aside). */
VARLOG_API varlog_err_t varlog_subscribe_iter(varlog_client_t *client, int32_t topic_id,
                                              uint64_t begin_glsn, uint64_t end_glsn,
                                              varlog_subscription_t **out);

/*
 * Subscribes to log_stream_id of topic_id in local order: entries with LLSN in
 * [begin_llsn, end_llsn), from the log stream's first replica. The entries' GLSN is 0 (a
 * storage node scans by LLSN and does not send it); topic and log stream ids are filled in.
 * A broken stream is opened again from the next LLSN as varlog_subscribe does. A range
 * beginning in a trimmed prefix, or beyond the entries of a log stream that has none, ends
 * with VARLOG_ERR_TRIMMED (the node's OutOfRange). Handler form; arguments, blocking and
 * errors as varlog_subscribe, plus UNKNOWN_LOG_STREAM and INVALID_ARG for
 * log_stream_id < 1.
 */
VARLOG_API varlog_err_t varlog_subscribe_to(varlog_client_t *client, int32_t topic_id,
                                            int32_t log_stream_id, uint64_t begin_llsn,
                                            uint64_t end_llsn,
                                            const varlog_subscribe_handlers_t *handlers,
                                            varlog_subscription_t **out);

/* varlog_subscribe_to in the iterator form. */
VARLOG_API varlog_err_t varlog_subscribe_to_iter(varlog_client_t *client, int32_t topic_id,
                                                 int32_t log_stream_id, uint64_t begin_llsn,
                                                 uint64_t end_llsn, varlog_subscription_t **out);

/*
 * Iterator form: the next entry into *entry (its bytes valid until the next call of this or
 * varlog_subscription_close), waiting up to timeout_ms (-1 = for ever, 0 = only what is
 * buffered). Returns OK; TIMED_OUT (call again); END once the range is complete; or the
 * subscription's failure (TRIMMED, RPC_*, DECODE, NOMEM, UNKNOWN_LOG_STREAM: the last error
 * of a log stream without progress for subscribe.retry.timeout.ms; text in
 * varlog_last_error()), returned again by every later call; CLOSED when varlog_subscription_close
 * began on another thread. INVALID_ARG (NULL, timeout_ms below -1), STATE on a handler-form
 * subscription. One caller at a time; another thread may close the subscription meanwhile, which
 * wakes the caller.
 */
VARLOG_API varlog_err_t varlog_subscription_next(varlog_subscription_t *sub, int64_t timeout_ms,
                                                 varlog_entry_t *entry);

/* What a subscription has done so far. */
typedef struct varlog_subscription_stats {
    uint64_t entries;       /* entries delivered */
    uint64_t bytes;         /* their payload bytes */
    uint64_t next_position; /* the next GLSN (LLSN for varlog_subscribe_to) wanted */
    uint64_t resubscribes;  /* streams opened again after a failure or a stall */
    uint64_t stalls;        /* of those, streams found silent past subscribe.stall.timeout.ms */
    uint64_t duplicates;    /* entries dropped because a new stream repeated them */
    uint32_t log_streams;   /* log streams being read */
    uint64_t windows;       /* read windows asked for (subscribe.window.bytes; 0 without) */
} varlog_subscription_stats_t;

/* Copies the counters into *out. Does not block (a brief lock). Any thread while the handle
 * is valid. Errors: INVALID_ARG (NULL). */
VARLOG_API varlog_err_t varlog_subscription_stats(varlog_subscription_t *sub,
                                                  varlog_subscription_stats_t *out);

/* Whether a subscription is reconnecting, for an application to say so (varlog-cli
 * subscribe prints one line when an outage begins and one when it is over). A log stream is
 * in an outage from the failure of its stream until it makes progress (see "Failures"
 * above); the subscription is reconnecting while any of its log streams is. */
typedef struct varlog_subscription_health {
    bool reconnecting;         /* some log stream is in an outage */
    uint32_t log_streams_down; /* how many */
    int32_t log_stream_id;     /* the one in an outage longest; 0 when none */
    int64_t down_ms;           /* for how long (0 when none); stops growing once the
                                * subscription ended */
    int64_t timeout_ms;        /* subscribe.retry.timeout.ms: down_ms at which the
                                * subscription ends; -1 for ever */
    uint64_t outages;          /* times the subscription began reconnecting: a change tells
                                * a poller of an outage begun (and maybe over) since */
    char last_failure[288];    /* the latest failure of a stream: "log stream L at ADDR:
                                * what failed: reason" (varlog_err_str and the node's
                                * reason); "" before the first */
} varlog_subscription_health_t;

/* Copies the subscription's health into *out, as its consumer last saw it: the subscription's
 * thread (handler form) or the caller of varlog_subscription_next (iterator form, which
 * notices failures only while a call runs). Does not block (a brief lock). Any thread while
 * the handle is valid, also after the subscription ended or the client was destroyed.
 * Errors: INVALID_ARG (NULL). */
VARLOG_API varlog_err_t varlog_subscription_health(varlog_subscription_t *sub,
                                                   varlog_subscription_health_t *out);

/*
 * Ends the subscription, releases *sub and sets it to NULL; accepts NULL and *sub NULL.
 * Stops delivery and ends the streams. From a handler of this subscription it returns at once and
 * the handler's return ends delivery (no handler runs after it); the subscription's thread
 * then releases the streams and exits, and is joined by the client's next subscribe call or
 * its destroy (which waits for that handler to return); from any other thread it
 * waits until the handler running, if any, returned and the thread exited (so no handler
 * runs after close returns), and wakes a varlog_subscription_next waiting on another
 * thread, which returns CLOSED. Does not block on the network.
 * With subscribe.handler.threads >= 1 ("Shared threads" above): from a handler on the
 * thread the subscription shares, whichever subscription's handler it is, it returns at once
 * and no handler of the closed subscription runs after it; the shared thread releases the
 * streams and goes on serving its other subscriptions (it ends with its last one). From any
 * other thread it waits until the shared thread shut the subscription down: the handler of
 * it running, if any, returned and none will run; meanwhile handlers of the thread's other
 * subscriptions may run.
 */
VARLOG_API void varlog_subscription_close(varlog_subscription_t **sub);

/*
 * The first and last entries of log_stream_id of topic_id as its replicas report them
 * (LogStreamReplicaMetadata on every replica, concurrently, as Varlog's PeekLogStream):
 * first is the highest local low watermark, last the highest local high watermark, among
 * replicas that are running, sealing or sealed. An empty log stream gives zeros
 * (glsn = llsn = 0) in both. *complete (may be NULL) is true when some replica is running
 * or sealed; false when all answering replicas are sealing (the tail may not be final).
 * Blocks up to timeout_ms (-1 = metadata.call.timeout.ms). first and last are written on
 * OK only. Errors: INVALID_ARG (NULL first or last, ids < 1, timeout_ms 0 or below -1),
 * UNKNOWN_TOPIC,
 * UNKNOWN_LOG_STREAM, TIMED_OUT, CLOSED, and when no replica answered usefully the first
 * replica's error (RPC_*, DECODE, or STATE for a replica in another state); the text in
 * varlog_last_error() names every replica's failure.
 */
VARLOG_API varlog_err_t varlog_peek(varlog_client_t *client, int32_t topic_id,
                                    int32_t log_stream_id, int64_t timeout_ms,
                                    varlog_entry_meta_t *first, varlog_entry_meta_t *last,
                                    bool *complete);

/*
 * Deletes topic_id's entries with GLSN <= until_glsn: TrimDeprecated to every storage node
 * holding a replica of the topic's log streams, concurrently, as Varlog's Log.Trim. A node
 * trims every replica of the topic it holds and answers OK whatever happens to each (its
 * protocol reports no per-replica result), so OK means at least one node accepted the
 * request; deletion on the node is asynchronous. Subscriptions of a trimmed range then end
 * with VARLOG_ERR_TRIMMED. Blocks up to timeout_ms (-1 = metadata.call.timeout.ms).
 * What is trimmed: as in Varlog, a node trims no further than its high watermark and skips
 * sealed replicas, and refuses silently (still OK): an until_glsn past the topic's last
 * entry trims nothing at all, not the whole topic; a sealed log stream keeps its entries.
 * varlog_peek of each log stream, before and after, tells what was trimmed (varlog-cli
 * trim does so).
 * Errors: INVALID_ARG (topic_id < 1, until_glsn 0 or VARLOG_GLSN_MAX, timeout_ms 0 or below
 * -1), UNKNOWN_TOPIC,
 * NO_LOG_STREAM (here: no storage node holds a replica of the topic's log streams, so none
 * can take the trim), TIMED_OUT, CLOSED, or when every node failed the first node's error
 * (text in varlog_last_error()).
 */
VARLOG_API varlog_err_t varlog_trim(varlog_client_t *client, int32_t topic_id, uint64_t until_glsn,
                                    int64_t timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
