#ifndef VARLOG_APPEND_RESOLVE_H
#define VARLOG_APPEND_RESOLVE_H

/*
 * The fate of an ambiguous append (MAYBE_APPENDED: a batch sent to a log stream's primary
 * whose stream broke without an answer), decided by reading the log stream back.
 *
 * What makes absence provable: once a replica reports LS_STATUS_SEALED
 * (LogStreamReplicaMetadata), its committed log ends at its local high watermark and nothing
 * sent before the seal is committed after it. So a batch whose records are not among the
 * LLSNs after the last one the client knew stored, up to that sealed end, never will be.
 * Without a seal, not finding a batch proves nothing: it may still be committed.
 *
 * Internal; called only on a fault (the appender and the synchronous append, with a backoff
 * between passes until the batch's deadline). Nothing here runs on the healthy path.
 */
#include <stddef.h>
#include <stdint.h>

#include "varlog/client.h"
#include "varlog/error.h"

typedef enum { RESOLVE_UNKNOWN = 0, RESOLVE_FOUND, RESOLVE_ABSENT } resolve_verdict_t;

/* varlogpb.LogStreamStatus LS_STATUS_RUNNING, as resolve_req_t.sent_to_status gives it. */
#define RESOLVE_STATUS_RUNNING 0

typedef struct resolve_batch {
    /* AppendRequest field-3 encodings of the batch's records, as sent (codec_put_payload
     * output, concatenated). Borrowed for the pass. */
    const uint8_t *payloads;
    size_t len;
    uint32_t n_records;
    /* Out on FOUND: n_records entries (topic, log stream, GLSN, LLSN). The caller's array;
     * left alone on any other verdict. */
    varlog_entry_meta_t *metas;
    resolve_verdict_t verdict; /* out */
} resolve_batch_t;

/* Entries one pass reads at most. A window past it is read from its end (the last this many
 * entries, where a batch sent last lies), and absence is then not proved: the part not read
 * may hold it. 65536 small entries are a few MB over the wire, a fraction of a second on a
 * LAN, which one pass on a fault path may spend; a window that large means the client's
 * last confirmed LLSN is far behind, or unknown on a long log. */
#define RESOLVE_WINDOW_MAX 65536

typedef struct resolve_req {
    int32_t topic_id, log_stream_id;
    /* The last LLSN of this log stream the client had confirmed stored before the batches
     * were sent; 0 = none known (the window then starts at the replica's low watermark, and
     * absence needs a replica that trimmed nothing). */
    uint64_t after_llsn;
    int64_t deadline_ms;      /* wire_now_ms() clock: no call of the pass outlives it */
    resolve_batch_t *batches; /* in the order they were sent on one stream */
    size_t n;
    /* Entries read at most in this pass; 0 = RESOLVE_WINDOW_MAX (tests make it small). */
    uint64_t window_max;
    /* The address of the primary the batches were sent to: only its seal proves absence
     * (NULL: any replica's, for callers that cannot know). Borrowed for the pass. */
    const char *sent_to;
    /* Out, whatever the pass returns: whether some replica answered SEALED or SEALING, and
     * the status sent_to answered (-1: it did not, or sent_to is NULL). A caller that saw a
     * seal in an earlier pass and now finds sent_to RUNNING knows the seal came and went
     * without sent_to seen sealed: no later pass can prove absence until the next seal. */
    bool saw_seal;
    int sent_to_status;
} resolve_req_t;

/*
 * One pass, blocking on the calling thread (a worker, never the appender's thread nor
 * gRPC's): asks every replica of the log stream (current metadata view) for its
 * LogStreamReplicaMetadata at once, then reads one replica's entries after after_llsn
 * (SubscribeTo over LLSNs, streamed: memory stays proportional to the batches, not to the
 * window) and compares them with the batches' records byte for byte. The replica read is a
 * SEALED one if any answered, else a RUNNING one, else a SEALING one (which can find but
 * never prove absence); within a status the one with the highest local high watermark; a
 * failed read falls back to the next.
 *
 * Verdicts, batch by batch:
 *  - FOUND: its records at consecutive LLSNs, in order, at exactly one place in the window;
 *    metas filled (GLSNs from Subscribe probes by GLSN: a storage node's SubscribeTo
 *    carries LLSNs only). A batch seen at two places (another writer's identical bytes) is
 *    UNKNOWN, and so is one whose GLSN could not be read in this pass.
 *  - ABSENT: not in the window, the replica read is SEALED and the window covered every LLSN
 *    from after_llsn + 1 (or 1 when unknown) to its high watermark: none trimmed, none past
 *    window_max.
 *  - UNKNOWN otherwise.
 * Order rules, as one stream's batches are stored in the order they were sent: a batch
 * found after an earlier batch that is ABSENT, or found at LLSNs not above an earlier found
 * batch's, is another writer's copy as far as this pass can tell, and becomes UNKNOWN (the
 * earlier found batch too in the second case: either copy may be the foreign one).
 *
 * why (optional, why_len bytes) gets one line saying what was learnt, e.g. "log stream 1 of
 * topic 1 is sealed at LLSN 120 on 127.0.0.1:9001: read LLSNs 101..120: batch 0 absent".
 * The calling thread's varlog_last_error() is left as it was.
 *
 * Returns VARLOG_OK when a replica answered and its window was read (verdicts filled; with
 * only a SEALING replica read, FOUND or UNKNOWN). Otherwise, with every verdict UNKNOWN:
 * INVALID_ARG (NULL client or request, a batch whose encodings do not hold n_records
 * payloads), UNKNOWN_LOG_STREAM (not in the metadata), RPC_UNAVAILABLE (no replica with an
 * address), the last replica's error when none could be asked or read (RPC_* codes,
 * DECODE), TIMED_OUT when the deadline passed first, CLOSED when the client is closing,
 * NOMEM.
 */
varlog_err_t append_resolve(varlog_client_t *c, resolve_req_t *req, char *why, size_t why_len);

/* After a pass: whether no later pass can prove absence until the next seal. seal_seen says
 * whether an earlier pass of the same batches saw a replica SEALED or SEALING; this one saw
 * none, and sent_to answered RUNNING: the seal came and went without the primary seen
 * sealed (a resumed primary sealed and unsealed between two passes). */
bool append_resolve_proof_gone(const resolve_req_t *req, bool seal_seen);

#endif
