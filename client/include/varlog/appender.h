#ifndef VARLOG_APPENDER_H
#define VARLOG_APPENDER_H

/*
 * The pipelined appender: append calls that return as soon as their records are queued, and
 * a callback per call with the outcome. Records of many calls are packed into one
 * AppendRequest and several requests are in flight on one long-lived Append stream per log
 * stream, so one producer thread stores hundreds of thousands of records per second where
 * varlog_append, which waits a round trip per call, stores thousands.
 *
 * Two modes:
 *   - bound to one log stream (log_stream > 0), as Varlog's Go LogStreamAppender;
 *   - topic-wide (log_stream 0): one Append stream per appendable log stream of the topic;
 *     each batch goes to the log stream with the most room in its pipeline, avoiding log
 *     streams that are sealed or were denied after a failure (the deny list of varlog_append),
 *     and log streams added to the topic are used once the client's metadata shows them.
 *
 * Threads: each appender owns one thread ("varlog-appender") that packs and sends batches,
 * matches responses and runs every callback of the appender, one at a time, never with a
 * library lock held and never on gRPC's I/O thread. It also completes its own Append
 * streams (gRPC reads and writes their messages on it as it waits for answers), so an answer
 * is matched and the next batch sent without a hand-off between threads. Producer threads
 * only copy records into the transmit queue.
 *
 * Shared threads (client property appender.threads = N > 0; 0, the default, is the above):
 * the client's appenders share N such threads instead, each new appender going to the one
 * that runs the fewest; they start as appenders need them and end with
 * varlog_client_destroy (closing an appender does not end its thread). A thread does each
 * round for all its appenders at once (one wake-up, one wait on one completion queue), which
 * saves a thread and most wake-ups per appender where many appenders each carry a trickle.
 * Every promise of this header holds per appender as in the default mode, with "the
 * appender's thread" read as the thread it shares, and these differences: callbacks of all
 * the appenders of one thread run one at a time, so a callback that blocks delays every one
 * of them (their sends, answers, deadlines and callbacks: the delivery deadline is then
 * late by as long as it blocks); and a callback is "on its own appender's thread" for every
 * appender of its thread (below: QUEUE_FULL at once, STATE for flush and close).
 *
 * Transmit queue: batch slots, the initial ones allocated when the appender is created
 * (per log stream: appender.pipeline.depth in flight, one waiting, plus the batch being
 * filled), more as records wait (see Memory below), each with room for
 * appender.batch.max.records records and appender.batch.max.bytes bytes. Records are encoded into
 * the open slot as they arrive and the slot's bytes are what gRPC sends: no copy, and no allocation
 * per append while the load is steady (the result handed to callbacks comes from a small object
 * pool and goes back after them).
 *
 * Batching: a batch is closed when it is full (records or bytes), when appender.linger.ms
 * passed since its first record and no earlier batch is still waiting to be sent, or on
 * flush and close. While the pipelines are full, new records keep filling the open batch.
 *
 * Outcome and order. Every append call gets exactly one callback:
 *   - success: err VARLOG_OK, outcome APPENDED, metas[i] the position of record i;
 *   - failure: an error and an outcome, NOT_APPENDED (certainly not stored) or
 *     MAYBE_APPENDED (its request was sent and no answer came: it may be stored), with the
 *     same rules as varlog_append (docs/ARCHITECTURE.md, the outcome table).
 * The records of one call are stored together, in one log stream, with consecutive GLSNs
 * and LLSNs, or not at all. Calls made one after another (by one thread, or ordered by the
 * application) are stored in that order within a log stream and their callbacks run in that
 * order for the log stream, whatever their outcome: when a deadline, a failure or the close
 * settles several batches at once, an older batch (in flight, or waiting to be sent again)
 * has its callbacks before the younger ones waiting behind it. In topic mode a batch moved
 * to another log stream after a failure is stored after the batches already sent there, and
 * callbacks of different log streams interleave in the order their answers arrive.
 *
 * Failures: when an Append stream fails, every batch on it gets an outcome. Batches certainly
 * not stored are sent again after a jittered backoff (append.retry.backoff.ms and .max.ms, a
 * metadata lookup before each, shared with other retries through the client's lookup
 * batcher), in topic mode to another log stream. With append.retries -1 (the default) they
 * are sent again until their delivery deadline, however often they are refused: a bound
 * appender waits for its log stream to be unsealed, a topic-wide one for any log stream to
 * take appends, so a storage node's restart
 * or a seal and unseal within appender.delivery.timeout.ms costs no call; with a count, at
 * most that many times. Batches that may have been stored (sent, no answer) are read back
 * from the log first (append.resolve.maybe.appended, the default): found there, the call
 * succeeds with the positions they have; proved absent (the primary they were sent to
 * reports the log stream sealed without them), they are sent again like refused ones;
 * neither by their deadline, they fail MAYBE_APPENDED (TIMED_OUT). Meanwhile their log stream
 * takes no newer batch of this appender. With append.retry.maybe.appended true they are
 * sent again instead; with both off they fail MAYBE_APPENDED at once. A batch without an
 * answer for append.attempt.timeout.ms ends its stream as a hung node would (MAYBE_APPENDED,
 * the log stream is denied). A new stream is opened for the next batches.
 * docs/RELIABILITY.md ("Riding out a storage node's failure") says when absence is proved and
 * what was measured against real Varlog.
 *
 * Delivery deadline: every call has its callback within appender.delivery.timeout.ms (30 s)
 * of the append that queued it (measured from the first call of its batch), plus the time
 * the appender's thread takes to notice (milliseconds; a callback of this appender that
 * blocks delays it). A batch still waiting then, to be sent, to be sent again after a
 * backoff or for its answer, fails with TIMED_OUT (MAYBE_APPENDED if an attempt may have
 * stored it; a batch in flight is given up by ending its stream) and a text naming the
 * deadline, where the batch was and its last attempt's failure ("the stream was cancelled
 * at the delivery deadline" when that ended it). A deadline of the appender's own never
 * denies the log stream, and the other batches on a stream it ended are not counted as the
 * log stream's failures: each is sent again at once, within its own deadline, when it
 * certainly was not stored or append.retry.maybe.appended is true (and it has attempts
 * left), and otherwise fails with RPC_CANCELLED (MAYBE_APPENDED) and a text naming the
 * other batch's delivery deadline as the cause.
 *
 * An unreachable log stream (append.retries set to a count): when a batch has used its
 * attempts without reaching the node
 * (connection refused, no route), every batch waiting to be sent to that log stream fails
 * at once with the same code (RPC_UNAVAILABLE) and a text saying so (in topic mode: when no
 * other log stream of the topic can take them), instead of each going through its own
 * attempts. So a dead cluster is reported within about (append.retries + 1) attempts and
 * their backoffs (tens of ms to append.retry.backoff.max.ms each, plus gRPC's connection
 * attempts), and never later than appender.delivery.timeout.ms; new batches make one
 * connection attempt per log stream per backoff (at most append.retry.backoff.max.ms apart:
 * about one a second), not a spin.
 *
 * Memory: pending records and bytes (queued, in flight, or waiting for their callback) are
 * bounded per appender by appender.queue.max.records and appender.queue.max.bytes, and for all
 * the appenders of one client together by appender.client.queue.max.records and .max.bytes
 * (librdkafka bounds a producer instance so across its partitions). A record counts until its
 * call's callback has returned. The client-wide bounds default to the per-appender ones and are
 * never below them: an appender alone meets its own bound first and behaves as if there were no
 * other, while one appender per log stream holds in all what one topic-wide appender would, not
 * that many times over. When records wait while every slot is taken (the network or a callback
 * is slow) and those bounds still have room, the transmit queue grows, by one slot at a time,
 * up to appender.queue.max.records / appender.batch.max.records slots (at most 4096) beyond its
 * initial ones: enough for a queue of full batches. Each slot reserves appender.batch.max.bytes
 * of address space, touched as records fill it. Free slots are reused most recently freed
 * first, so a load that needs fewer slots keeps using the same ones; those beyond the initial
 * count that stay free for a second are given back (but for a quarter more than that second
 * used, so that a load moving between appenders does not give back and allocate slots again
 * every second), their pages returned to the system (varlog_appender_stats: batch_slots,
 * batch_slots_released): a burst's memory goes back after it, within about a second and a
 * half however quiet the appender stays, while a steady load allocates nothing. Only batches
 * sent before they were full (linger, flush) hold fewer records: a producer whose batches all
 * leave nearly empty can meet QUEUE_FULL with fewer records pending, and its error text then
 * says that the slots, not the bounds, ran out.
 */
#include <stddef.h>
#include <stdint.h>

#include "varlog/client.h"
#include "varlog/error.h"
#include "varlog/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct varlog_appender varlog_appender_t;

/* What a callback receives. Valid only during the callback: copy what must outlive it. */
typedef struct varlog_append_result {
    varlog_err_t err;         /* VARLOG_OK when the records were stored */
    varlog_outcome_t outcome; /* APPENDED, NOT_APPENDED or MAYBE_APPENDED */
    size_t n;                 /* records of the call */
    /* n positions on success, in record order; NULL on failure */
    const varlog_entry_meta_t *metas;
    /* on failure, what happened and where (log stream, node, attempt); "" on success */
    const char *errtext;
} varlog_append_result_t;

/* Runs on the appender's thread, once per append call, never with a library lock held. It
 * may call varlog_appender_append on any appender (on its own appender, or with
 * appender.threads on any appender of its thread, a full queue gives QUEUE_FULL at once
 * whatever the timeout: only the callback's return can make room; on any appender of the same
 * client so does a full client-wide bound, appender.client.queue.max.*, which the calls of
 * running callbacks hold until they return) and any client function; varlog_appender_flush
 * and varlog_appender_close on its own appender (or one of its thread) return
 * VARLOG_ERR_STATE, and varlog_client_destroy is refused the same way (see there). A slow
 * callback delays the callbacks after it (of every appender of its thread) and, once the
 * queue is full, the producers. */
typedef void varlog_append_cb(const varlog_append_result_t *result, void *opaque);

/*
 * Creates an appender for topic_id: bound to log_stream_id when it is > 0, topic-wide when it
 * is 0. Streams are opened on first use, so creating an appender sends nothing; an unknown
 * topic or log stream gets one metadata refresh before it is refused.
 *
 * Ownership: *out receives the appender, owned by the caller until varlog_appender_close.
 * client must outlive the appender's use; varlog_client_destroy with appenders open closes
 * them as varlog_appender_close(.., 0) would (their queued and in-flight calls get CLOSED
 * callbacks) and leaves each handle valid only for varlog_appender_close, which then frees it.
 * Blocks: for the refresh an unknown id needs (up to metadata.call.timeout.ms).
 * Errors: INVALID_ARG (NULL client or out, topic id below 1, negative log stream id),
 * UNKNOWN_TOPIC, UNKNOWN_LOG_STREAM, the RPC_* code of a refresh that failed, CLOSED (the
 * client is closing), NOMEM, INTERNAL (the thread, or its completion queue, could not be
 * started). With appender.threads, the appender joins the shared thread running the fewest
 * appenders, starting a new one while there are fewer than N.
 */
VARLOG_API varlog_err_t varlog_appender_new(varlog_client_t *client, int32_t topic_id,
                                            int32_t log_stream_id, varlog_appender_t **out);

/*
 * Queues records[0..n) as one append call; cb(result, opaque) runs once when its fate is
 * known. Returns without waiting for the network.
 *
 * Ownership: records and their bytes are copied before the call returns; the caller may
 * reuse them at once. cb is required; opaque is the caller's.
 * Blocks: while the queue is full (appender.queue.max.records or .max.bytes reached, the
 * client-wide appender.client.queue.max.records or .max.bytes reached by all the client's
 * appenders together, or every batch slot taken and the queue grown to its most slots: see
 * Memory above), up to timeout_ms: 0 = not at all, -1 = until there is room. A waiting call
 * is woken once a quarter of each bound is free again (or nothing is pending), not for each
 * settled batch: for the client-wide bound, by a settle of any appender of the client, or by
 * this appender's close. A timed wait takes whatever room there is when its timeout ends. On
 * one of the client's own threads (an appender's callback, a subscription's handler, a stats
 * callback) a full client-wide bound is never waited for: QUEUE_FULL at once. Growing the
 * queue allocates one slot, without the appender's lock.
 * Errors, after which cb is never called and nothing was queued: INVALID_ARG (NULL app,
 * records or cb, n 0, an empty record, a record above append.record.max.bytes, more than
 * appender.batch.max.records records or appender.batch.max.bytes bytes in one call,
 * timeout_ms below -1), QUEUE_FULL (no room within timeout_ms; its text names the bound
 * that was full, the appender's, the client's or the slots), CLOSED (the appender or its
 * client is closing).
 */
VARLOG_API varlog_err_t varlog_appender_append(varlog_appender_t *app,
                                               const varlog_record_t *records, size_t n,
                                               int64_t timeout_ms, varlog_append_cb *cb,
                                               void *opaque);

/* Flags of varlog_appender_append_ex. */
enum {
    /* A QUEUE_FULL this call returns is not counted as a refusal (queue_full): the caller
     * will call again for the same records, and counts only the refusal its own caller sees. */
    VARLOG_APPEND_REFUSAL_RETRIED = 1u << 0,
    /* A wait for room this call makes goes on from an earlier call's wait for the same
     * records: it is not counted again in queue_full_waits. */
    VARLOG_APPEND_WAIT_CONTINUED = 1u << 1,
};

/*
 * varlog_appender_append for a caller that waits for room in several calls, as a language
 * binding does to look for signals between them (python/src/appender.c): flags (a set of
 * VARLOG_APPEND_*) keep the statistics to what the application saw, one refusal per call it
 * got QUEUE_FULL for and one wait per call that waited. flags 0 is varlog_appender_append.
 * Ownership, blocking and callbacks as varlog_appender_append. Errors: those of
 * varlog_appender_append, and INVALID_ARG for an unknown flag.
 */
VARLOG_API varlog_err_t varlog_appender_append_ex(varlog_appender_t *app,
                                                  const varlog_record_t *records, size_t n,
                                                  int64_t timeout_ms, unsigned flags,
                                                  varlog_append_cb *cb, void *opaque);

/* Runs once per varlog_appender_append_ref call that returned OK, when nothing reads the
 * call's record bytes any more: see there. */
typedef void varlog_append_release_cb(void *opaque);

/*
 * varlog_appender_append without the copy: the records' bytes are sent from where they are,
 * as gRPC writes the request (librdkafka's produce without RD_KAFKA_MSG_F_COPY). For records
 * of kilobytes, where the copy into the transmit queue is most of a producer's cost. Records
 * under 1 KiB are copied all the same (each referenced record is two more pieces of the
 * request for gRPC and the kernel to gather, which costs more than their copy); release then
 * comes as for the others, and the caller need not know which were.
 *
 * Ownership: the records array is read before the call returns and may be reused at once;
 * the bytes each record points to stay the caller's, and must stay valid and unchanged until
 * release(opaque) runs. It runs exactly once for a call that returned OK, after cb, when the
 * call's batch settled and gRPC let go of its request: as the batch settles (on the
 * appender's thread, after the callbacks of the batches settled with it, with the appender's
 * lock held), or later if gRPC still held the request then (a stream ended while it was
 * writing the request, until the connection has written or dropped those bytes): on the
 * thread where gRPC drops its last reference, one of gRPC's own perhaps, possibly with
 * gRPC's locks held and the appender's. So release must only give the memory back or note
 * that it can be (free, a pool's put, an atomic flag): it must not block nor call any
 * function of this library. A call that returned an error references nothing and never gets
 * release. cb and opaque as varlog_appender_append; release is required (a function that does
 * nothing, for bytes that outlive the client).
 * Blocks, callbacks and errors: as varlog_appender_append; INVALID_ARG also for a NULL
 * release.
 */
VARLOG_API varlog_err_t varlog_appender_append_ref(varlog_appender_t *app,
                                                   const varlog_record_t *records, size_t n,
                                                   int64_t timeout_ms,
                                                   varlog_append_release_cb *release,
                                                   varlog_append_cb *cb, void *opaque);

/*
 * Sends what is queued without waiting for appender.linger.ms and waits until the callback of
 * every call queued before flush began has returned. still_pending (optional) receives the
 * number of append calls whose callback has not returned yet (0 on OK).
 * Blocks: up to timeout_ms (-1 = until done, 0 = only starts the sending and reports). The
 * caller sleeps until the last of those calls has settled (or the timeout): it is woken once,
 * not for every batch that settles meanwhile.
 * Errors: INVALID_ARG (NULL, timeout_ms below -1), TIMED_OUT (calls still pending at the timeout;
 * they go on), STATE (called from one of this appender's callbacks, which would wait for itself;
 * with appender.threads, from a callback of any appender of its thread).
 */
VARLOG_API varlog_err_t varlog_appender_flush(varlog_appender_t *app, int64_t timeout_ms,
                                              size_t *still_pending);

/*
 * Stops intake (later appends fail with CLOSED), flushes for up to timeout_ms, then ends the
 * appender's streams: calls still queued get CLOSED and NOT_APPENDED, calls in flight get
 * CLOSED and MAYBE_APPENDED, each through its callback. Then joins the appender's thread (a
 * shared one, appender.threads: waits until it let the appender go, in its next round) and
 * frees the appender; *app is set to NULL. No callback of this appender runs after close
 * returns.
 * Blocks: up to timeout_ms for the flush (-1, or any negative value, = until every call
 * settled, however long the retries take: close never refuses to close), then for as long as the
 * remaining callbacks take to run (on a shared thread, also the round it is in: the callbacks of
 * its other appenders); ending the streams does not wait for the network. Accepts NULL and *app
 * NULL. Errors: OK when every call queued before close was settled by the flush, TIMED_OUT when
 * some had to be failed with CLOSED, STATE (called from one of its own callbacks, or with
 * appender.threads from a callback of any appender of its thread: nothing is done).
 */
VARLOG_API varlog_err_t varlog_appender_close(varlog_appender_t **app, int64_t timeout_ms);

/* Counters and gauges of one appender. */
typedef struct varlog_appender_stats {
    uint64_t calls_appended;   /* callbacks with APPENDED */
    uint64_t calls_failed;     /* callbacks with an error */
    uint64_t records_appended; /* records stored */
    uint64_t batches_sent;     /* AppendRequests sent (retries included) */
    uint64_t batches_retried;  /* batches sent again after a failure */
    uint64_t streams_opened;   /* Append streams opened */
    uint64_t queue_full;       /* appends that returned QUEUE_FULL */
    uint64_t queue_full_waits; /* appends that waited for room (then queued or refused) */
    uint64_t pending_calls;    /* calls queued, in flight or in their callback */
    uint64_t pending_records;  /* their records */
    uint64_t pending_bytes;    /* their payload bytes */
    uint64_t inflight_batches; /* requests sent and not yet answered */
    /* Transmit-queue slots allocated now: the initial ones and those added as records
     * waited, which go back once free for a second (see Memory above). */
    uint64_t batch_slots;
    uint64_t batch_slots_released; /* slots beyond the initial ones given back */
} varlog_appender_stats_t;

/* Fills *out. Does not block beyond a brief internal lock. Errors: INVALID_ARG (NULL). */
VARLOG_API varlog_err_t varlog_appender_stats(varlog_appender_t *app, varlog_appender_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif
