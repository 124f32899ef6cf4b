/* Synchronous Append / AppendTo: the first attempt on the caller's thread, retries as one
 * task on the client's pool engine, each retry preceded by a metadata lookup that concurrent
 * retries share through the pool batcher. Each call reports whether its records were
 * stored, certainly not stored, or perhaps stored. One attempt itself (pick, send, answer) is
 * append_attempt.c's. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "append_internal.h"
#include "append_resolve.h"
#include "log_io_codec.h"
#include "client_internal.h"
#include "errtext.h"
#include "outcome.h"
#include "wire.h"

/* ---- encoding ------------------------------------------------------------------------------ */

/* AppendRequest field 3 (repeated bytes payload) for every record, into one reference-counted
 * slice that every attempt's message shares. */
static grpc_slice encode_payloads(const varlog_record_t *records, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += codec_payload_size(records[i].len);
    grpc_slice body = grpc_slice_malloc(total);
    uint8_t *buf = GRPC_SLICE_START_PTR(body);
    size_t off = 0;
    for (size_t i = 0; i < n; i++)
        off += codec_put_payload(buf + off, records[i].data, records[i].len);
    return body;
}

/* ---- the op ---------------------------------------------------------------------------- */

static void op_ref(append_op_t *op)
{
    atomic_fetch_add_explicit(&op->refs, 1, memory_order_relaxed);
}

static void op_unref(append_op_t *op)
{
    if (atomic_fetch_sub_explicit(&op->refs, 1, memory_order_acq_rel) != 1)
        return;
    pthread_cond_destroy(&op->cv);
    pthread_mutex_destroy(&op->mu);
    grpc_slice_unref(op->body);
    free(op);
}

/* Settles the op's result once; later calls change nothing. text NULL keeps the op's text.
 * Called with op->mu held. */
static void op_finish_locked(append_op_t *op, varlog_err_t err, const char *text)
{
    if (op->done)
        return;
    op->done = true;
    op->err = err;
    /* Ended by a deadline, the watchdog or closing while an attempt was out. */
    if (err != VARLOG_OK)
        op->maybe |= op->attempt_inflight;
    if (text && text != op->errtext)
        snprintf(op->errtext, sizeof(op->errtext), "%s", text);
    pthread_cond_broadcast(&op->cv);
}

static void op_finish(append_op_t *op, varlog_err_t err, const char *text)
{
    pthread_mutex_lock(&op->mu);
    op_finish_locked(op, err, text);
    pthread_mutex_unlock(&op->mu);
}

/* ---- retries on the engine --------------------------------------------------------------- */

unsigned append_max_attempts(const varlog_conf_t *conf, bool has_deadline)
{
    if (conf->append_retries >= 0)
        return (unsigned)conf->append_retries + 1;
    return has_deadline ? UINT_MAX : APPEND_RETRIES_WITHOUT_DEADLINE + 1;
}

static bool should_retry(append_op_t *op, const attempt_result_t *r)
{
    varlog_client_t *c = op->c;
    if (!r->ran || !r->v.retriable || client_closing(c) ||
        client_remaining_ms(op->deadline_ms) == 0)
        return false;
    if (r->v.ambiguous && !c->conf->append_retry_maybe_appended) {
        /* Not sent again; read back from the log first when it can be (the retry task's
         * first step), and sent again only once proved absent. */
        if (!c->conf->append_resolve_maybe_appended || !r->ls)
            return false;
        pthread_mutex_lock(&op->mu);
        bool open = !op->done;
        op->unresolved = open;
        op->unresolved_ls = r->ls;
        op->unresolved_after = r->after;
        snprintf(op->unresolved_to, sizeof(op->unresolved_to), "%s", r->target);
        pthread_mutex_unlock(&op->mu);
        return open;
    }
    pthread_mutex_lock(&op->mu);
    bool budget = !op->done && op->attempts < append_max_attempts(c->conf, op->deadline_ms >= 0);
    pthread_mutex_unlock(&op->mu);
    return budget;
}

/* Ends the op with an attempt's failure that is not retried. A refusal the op waits out
 * (append.retries -1 with a timeout) that came back once the deadline had passed ends it
 * TIMED_OUT with the refusal in the text, as a wait that ran out does: what the caller gets
 * must not depend on whether the last attempt returned just before its deadline or just
 * after (varlog_append's contract: SEALED or NO_LOG_STREAM only where append.retries is set
 * or there is no deadline). */
/* The text of an op that ran out of time: its attempts, and the last one's failure when
 * there is one (last NULL: none). op->mu held. */
static void timed_out_text_locked(const append_op_t *op, const char *last, char *buf, size_t cap)
{
    if (op->attempts > 0 && last)
        snprintf(buf, cap,
                 "append to topic %d: no result within the call's timeout after %u attempt%s; "
                 "the last: %.250s",
                 op->topic_id, op->attempts, op->attempts == 1 ? "" : "s", last);
    else
        snprintf(buf, cap,
                 "append to topic %d: no result within the call's timeout after %u attempts",
                 op->topic_id, op->attempts);
}

static void op_finish_failed(append_op_t *op, const attempt_result_t *r)
{
    if (!r->v.retriable || r->v.ambiguous || !append_op_waits(op) || client_closing(op->c) ||
        client_remaining_ms(op->deadline_ms) != 0) {
        op_finish(op, r->v.err, r->text);
        return;
    }
    char text[sizeof(op->errtext)];
    pthread_mutex_lock(&op->mu);
    timed_out_text_locked(op, r->text, text, sizeof(text));
    op_finish_locked(op, VARLOG_ERR_TIMED_OUT, text);
    pthread_mutex_unlock(&op->mu);
}

/* The attempts left after the caller's own: each waits a jittered backoff first (b0 before
 * the first retry, b1 before the second, ...), on the engine's timer queue rather than in a
 * worker. */
vq_retry_t append_retry_policy(const varlog_client_t *c, unsigned attempts_left)
{
    vq_retry_t p = {.count = attempts_left - 1,
                    .min_ns = c->conf->append_retry_backoff_ms * 1000000,
                    .max_ns = c->conf->append_retry_backoff_max_ms * 1000000,
                    .factor = 2.0,
                    .jitter = true,
                    .delay_first = true};
    return p;
}

/* The client whose retry handler or engine logger this thread is running, if any: an append
 * made from a log callback there must not wait for a worker it occupies itself. */
static _Thread_local const varlog_client_t *tls_engine_client;

/* One pass of reading back the attempt whose fate is unknown. Returns true when the op is
 * settled (found) or may go on to a new attempt (proved absent); false to look again after
 * a backoff. */
static bool resolve_pass(append_op_t *op)
{
    varlog_client_t *c = op->c;
    const uint8_t *payloads = GRPC_SLICE_START_PTR(op->body);
    varlog_entry_meta_t *metas = calloc(op->n, sizeof(*metas));
    if (!metas)
        return false;
    resolve_batch_t b = {.payloads = payloads,
                         .len = GRPC_SLICE_LENGTH(op->body),
                         .n_records = (uint32_t)op->n,
                         .metas = metas};
    /* A call without a deadline reads back within one attempt's bound. */
    int64_t bound = wire_now_ms() + c->conf->append_attempt_timeout_ms;
    resolve_req_t req = {
        .topic_id = op->topic_id,
        .log_stream_id = op->unresolved_ls,
        .after_llsn = op->unresolved_after,
        .deadline_ms = op->deadline_ms >= 0 && op->deadline_ms < bound ? op->deadline_ms : bound,
        .batches = &b,
        .n = 1,
        .sent_to = op->unresolved_to};
    char why[256] = "";
    varlog_err_t err = append_resolve(c, &req, why, sizeof(why));
    atomic_fetch_add(&c->stats.resolve_passes, 1);
    bool settled = false;
    pthread_mutex_lock(&op->mu);
    if (err == VARLOG_OK && b.verdict == RESOLVE_FOUND && !op->done) {
        memcpy(op->metas, metas, op->n * sizeof(*metas));
        op->maybe = false;
        op->unresolved = false;
        op_finish_locked(op, VARLOG_OK, NULL);
        atomic_fetch_add(&c->stats.resolved_found, 1);
        settled = true;
    } else if (err == VARLOG_OK && b.verdict == RESOLVE_ABSENT) {
        /* Every earlier ambiguous attempt was proved absent before this one was made. */
        op->maybe = false;
        op->unresolved = false;
        atomic_fetch_add(&c->stats.resolved_absent, 1);
        settled = true;
    } else if (!op->done) {
        size_t len = strlen(op->errtext);
        /* A seal came and went without the primary seen sealed: no later pass can prove
         * absence (appender_resolve.c, the same rule), so the call ends MAYBE now. */
        bool futile = append_resolve_proof_gone(&req, op->seal_seen);
        if (futile)
            snprintf(why, sizeof(why),
                     "log stream %d of topic %d was sealed and unsealed while its primary was "
                     "not seen sealed: nothing proves the records absent, and they are not in "
                     "the log",
                     op->unresolved_ls, op->topic_id);
        if (futile || !strstr(op->errtext, "; read back: "))
            snprintf(op->errtext + len, sizeof(op->errtext) - len, "; read back: %s",
                     why[0] ? why : varlog_err_str(err));
        op->seal_seen |= req.saw_seal;
        if (futile) {
            op->unresolved = false;
            op_finish_locked(op, op->err, NULL);
            settled = true;
        }
    }
    pthread_mutex_unlock(&op->mu);
    free(metas);
    return settled;
}

static int retry_handler(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    append_op_t *op = arg;
    varlog_client_t *c = op->c;
    pthread_mutex_lock(&op->mu);
    bool over = op->done || op->abandoned;
    pthread_mutex_unlock(&op->mu);
    if (over)
        return 0;
    if (client_closing(c)) {
        op_finish(op, VARLOG_ERR_CLOSED, "the client closed before the retry");
        return 0;
    }
    if (client_remaining_ms(op->deadline_ms) == 0) {
        op_finish(op, VARLOG_ERR_TIMED_OUT, NULL);
        return 0;
    }
    pthread_mutex_lock(&op->mu);
    bool unresolved = op->unresolved;
    pthread_mutex_unlock(&op->mu);
    if (unresolved) {
        if (!resolve_pass(op))
            return VQ_ERR_USER; /* not known yet: look again after a backoff */
        pthread_mutex_lock(&op->mu);
        bool found = op->done;
        pthread_mutex_unlock(&op->mu);
        if (found)
            return 0;
    }
    const varlog_client_t *outer = tls_engine_client;
    tls_engine_client = c;
    atomic_fetch_add(&c->stats.lookups, 1);
    vq_batch_item_t item = {.key = op, .bound = vq_now_ns(), .has_bound = true};
    int lookup = vq_batcher_lookup(c->batcher, &item);
    if (lookup != 0 && log_enabled(&c->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_RETRY))
        log_line(&c->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_RETRY,
                 "lookup before retrying topic %d failed (%s); retrying with the metadata at hand",
                 op->topic_id, varlog_err_str((varlog_err_t)lookup));
    atomic_fetch_add(&c->stats.append_retries, 1);
    attempt_result_t r;
    append_attempt(op, &r);
    tls_engine_client = outer;
    if (!r.ran)
        return 0;
    if (r.v.err == VARLOG_OK) {
        op_finish(op, VARLOG_OK, NULL);
        return 0;
    }
    if (should_retry(op, &r))
        return VQ_ERR_USER;
    op_finish_failed(op, &r);
    return 0;
}

/* The task's result once the retries are over (or cut short): the engine's after-callback,
 * and the end of an inline run. */
static void retry_settle(void *arg, int result)
{
    append_op_t *op = arg;
    if (result == VQ_ERR_SHUTDOWN)
        op_finish(op, VARLOG_ERR_CLOSED, "the client closed before the retry ran");
    else if (result == VQ_ERR_TIMEOUT)
        op_finish(op, VARLOG_ERR_TIMED_OUT, "the retry did not finish in time");
    else {
        /* Retries ran out (or shutdown cut a delay short): the last attempt's failure. */
        pthread_mutex_lock(&op->mu);
        varlog_err_t err = op->err != VARLOG_OK ? op->err : VARLOG_ERR_INTERNAL;
        pthread_mutex_unlock(&op->mu);
        op_finish(op, err, NULL);
    }
}

/* The engine is done with the op: its handler (even one abandoned by the watchdog) and its
 * after-callback have returned. The client may be freed right after the count drops. */
static void retry_release(void *arg)
{
    append_op_t *op = arg;
    varlog_client_t *c = op->c;
    op_unref(op);
    client_retry_task_end(c);
}

static vq_task_spec_t retry_spec(append_op_t *op)
{
    varlog_client_t *c = op->c;
    /* The handler decides when to stop (should_retry, the deadline): reading an ambiguous
     * attempt back takes passes that are not attempts. */
    unsigned left_attempts = UINT_MAX;
    int64_t grace_ms = c->conf->lookup_batch_wait_ms + c->conf->metadata_call_timeout_ms + 1000;
    int64_t left = client_remaining_ms(op->deadline_ms);
    vq_task_spec_t spec = {.handler = retry_handler,
                           .arg = op,
                           .after = retry_settle,
                           .release = retry_release,
                           /* The handler honours the call's deadline itself; the engine's
                            * watchdog is only a backstop beyond it. */
                           .timeout_ns = left < 0 ? (int64_t)1 << 61 : (left + grace_ms) * 1000000,
                           .retry = append_retry_policy(c, left_attempts)};
    return spec;
}

/* Hands the remaining attempts to the engine. Returns false if it refused (the caller then
 * keeps the first attempt's result). */
static bool submit_retry(append_op_t *op)
{
    varlog_client_t *c = op->c;
    vq_task_spec_t spec = retry_spec(op);
    op_ref(op);
    client_retry_task_begin(c);
    vq_err_t err = vq_engine_submit(c->engine, &spec);
    if (err != VQ_OK) {
        client_retry_task_end(c);
        atomic_fetch_sub(&op->refs, 1);
        log_line(&c->log, VARLOG_LOG_WARNING, VARLOG_LOG_CTX_RETRY,
                 "retry of an append to topic %d not queued: %s", op->topic_id, vq_err_str(err));
        return false;
    }
    return true;
}

/* Runs the remaining attempts on the calling thread: for an append made on one of the
 * client's own engine threads (a log callback there), which queued behind itself could
 * wait for ever (with retry.workers = 1 it would). */
static void retry_inline(append_op_t *op)
{
    vq_task_spec_t spec = retry_spec(op);
    spec.after = NULL;
    spec.release = NULL;
    retry_settle(op, vq_task_run_inline(&spec, &op->c->engine_logger, NULL));
}

/* Waits for the retry task's result or the caller's deadline. */
static void await_result(append_op_t *op)
{
    pthread_mutex_lock(&op->mu);
    struct timespec ts;
    if (op->deadline_ms >= 0)
        abs_deadline(&ts, client_remaining_ms(op->deadline_ms));
    while (!op->done) {
        if (op->deadline_ms < 0) {
            pthread_cond_wait(&op->cv, &op->mu);
        } else if (pthread_cond_timedwait(&op->cv, &op->mu, &ts) != 0 &&
                   client_remaining_ms(op->deadline_ms) == 0) {
            break;
        }
    }
    if (!op->done) {
        op->abandoned = true;
        char text[sizeof(op->errtext)];
        timed_out_text_locked(op, op->err != VARLOG_OK ? op->errtext : NULL, text, sizeof(text));
        op_finish_locked(op, VARLOG_ERR_TIMED_OUT, text);
    }
    pthread_mutex_unlock(&op->mu);
}

/* ---- the public calls ---------------------------------------------------------------------- */

static varlog_err_t check_input(varlog_client_t *c, int32_t topic_id,
                                const varlog_record_t *records, size_t n, int64_t timeout_ms)
{
    if (!c)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "append: client is NULL");
    if (topic_id < 1)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "append: topic id %d (ids start at 1)",
                           topic_id);

    if (!records)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "append: records is NULL");
    if (n == 0)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "append: no records (n is 0)");
    if (timeout_ms == 0 || timeout_ms < -1)
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "append: timeout_ms %lld (give a positive timeout, or -1 for none)",
                           (long long)timeout_ms);
    const varlog_conf_t *conf = c->conf;
    append_limits_t lim = {.who = "append",
                           .max_records = (uint64_t)conf->append_batch_max_records,
                           .max_records_name = "append.batch.max.records",
                           .max_bytes = (uint64_t)conf->append_batch_max_bytes,
                           .max_bytes_name = "append.batch.max.bytes",
                           .record_max_bytes = (uint64_t)conf->append_record_max_bytes};
    uint64_t total;
    return append_check_records(&lim, records, n, &total);
}

varlog_err_t append_check_records(const append_limits_t *lim, const varlog_record_t *records,
                                  size_t n, uint64_t *total_bytes)
{
    if (n > lim->max_records)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: %zu records exceed %s (%llu)", lim->who, n,
                           lim->max_records_name, (unsigned long long)lim->max_records);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!records[i].data || records[i].len == 0)
            return errtext_set(VARLOG_ERR_INVALID_ARG,
                               "%s: record %zu of %zu is empty (records need at least one byte)",
                               lim->who, i, n);
        if (records[i].len > lim->record_max_bytes)
            return errtext_set(VARLOG_ERR_INVALID_ARG,
                               "%s: record %zu is %zu bytes, above append.record.max.bytes (%llu)",
                               lim->who, i, records[i].len,
                               (unsigned long long)lim->record_max_bytes);
        total += records[i].len;
    }
    if (total > lim->max_bytes)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: %llu bytes exceed %s (%llu)", lim->who,
                           (unsigned long long)total, lim->max_bytes_name,
                           (unsigned long long)lim->max_bytes);
    *total_bytes = total;
    return VARLOG_OK;
}

/* Unknown ids get one on-demand refresh before the call gives up on them. */
varlog_err_t append_check_target(varlog_client_t *c, int32_t topic_id, int32_t log_stream_id,
                                 int64_t deadline_ms)
{
    return client_check_target(c, "append", topic_id, log_stream_id, deadline_ms);
}

varlog_err_t client_check_target(varlog_client_t *c, const char *who, int32_t topic_id,
                                 int32_t log_stream_id, int64_t deadline_ms)
{
    for (int round = 0;; round++) {
        md_view_t *v = md_current(c);
        bool topic_known = md_view_topic(v, topic_id) != NULL;
        bool ls_known = !log_stream_id || md_view_log_stream(v, topic_id, log_stream_id);
        uint64_t index = v->applied_index;
        md_view_unref(v);
        if (topic_known && ls_known)
            return VARLOG_OK;
        if (round > 0) {
            if (!topic_known)
                return errtext_set(VARLOG_ERR_UNKNOWN_TOPIC,
                                   "%s: topic %d is not in the metadata (applied index %llu)", who,
                                   topic_id, (unsigned long long)index);
            return errtext_set(VARLOG_ERR_UNKNOWN_LOG_STREAM,
                               "%s: topic %d has no log stream %d (applied index %llu)", who,
                               topic_id, log_stream_id, (unsigned long long)index);
        }
        int64_t left = client_remaining_ms(deadline_ms);
        int64_t timeout = c->conf->metadata_call_timeout_ms;
        if (left >= 0 && left < timeout)
            timeout = left ? left : 1;
        varlog_err_t err = md_fetch(c, timeout);
        if (err != VARLOG_OK) {
            /* The metadata could not be checked: that failure is the answer, not "unknown". */
            char why[256];
            errtext_copy(why, sizeof(why));
            return errtext_set(err,
                               "%s: %s %d of topic %d is not in the metadata at hand and "
                               "the lookup failed: %s",
                               who, topic_known ? "log stream" : "topic",
                               topic_known ? log_stream_id : topic_id, topic_id, why);
        }
    }
}

static append_op_t *op_new(varlog_client_t *c, int32_t topic_id, int32_t log_stream_id,
                           const varlog_record_t *records, size_t n, int64_t deadline)
{
    append_op_t *op = calloc(1, sizeof(*op) + n * sizeof(varlog_entry_meta_t));
    if (!op)
        return NULL;
    op->body = encode_payloads(records, n);
    atomic_init(&op->refs, 1);
    op->c = c;
    op->topic_id = topic_id;
    op->fixed_log_stream = log_stream_id;
    op->n = n;
    op->deadline_ms = deadline;
    op->rng = (uint64_t)wire_now_ms() * 0x9E3779B97F4A7C15ull | 1;
    pthread_mutex_init(&op->mu, NULL);
    wire_cond_init(&op->cv);
    return op;
}

static varlog_err_t append_common(varlog_client_t *c, int32_t topic_id, int32_t log_stream_id,
                                  const varlog_record_t *records, size_t n, int64_t timeout_ms,
                                  varlog_entry_meta_t *metas, varlog_outcome_t *outcome)
{
    if (outcome)
        *outcome = VARLOG_NOT_APPENDED;
    int64_t deadline = timeout_ms < 0 ? -1 : wire_deadline_ms(timeout_ms);
    varlog_err_t err = check_input(c, topic_id, records, n, timeout_ms);
    if (err != VARLOG_OK)
        return err;
    if ((err = client_enter(c)) != VARLOG_OK)
        return err;
    /* The send's duration (messaging.client.operation.duration): a clock read is nothing
     * beside a round trip, so a synchronous call is always timed. */
    int64_t t0 = stats_now_ns();
    err = append_check_target(c, topic_id, log_stream_id, deadline);
    if (err != VARLOG_OK) {
        atomic_fetch_add(&c->stats.appends_failed, 1);
        stats_add_outcome(&c->cstats, VARLOG_NOT_APPENDED, 1, n, 0);
        metrics_note_append(&c->cstats.metrics, topic_id, 0, err, n, stats_now_ns() - t0);
        client_leave(c);
        return err;
    }
    stats_producer_uses(c, topic_id, log_stream_id);
    append_op_t *op = op_new(c, topic_id, log_stream_id, records, n, deadline);
    if (!op) {
        client_leave(c);
        return errtext_set(VARLOG_ERR_NOMEM, "append: out of memory for %zu records", n);
    }
    /* Failed attempts before a success must not replace the caller's last error. */
    errtext_guard_begin();

    attempt_result_t r;
    append_attempt(op, &r);
    if (r.v.err != VARLOG_OK && should_retry(op, &r)) {
        if (tls_engine_client == c)
            retry_inline(op);
        else if (submit_retry(op))
            await_result(op);
    }
    if (r.v.err == VARLOG_OK)
        op_finish(op, VARLOG_OK, NULL);
    else
        op_finish_failed(op, &r);

    pthread_mutex_lock(&op->mu);
    err = op->err;
    bool maybe = op->maybe;
    if (err == VARLOG_OK && metas)
        memcpy(metas, op->metas, n * sizeof(varlog_entry_meta_t));
    int32_t stored_ls = err == VARLOG_OK ? op->metas[0].log_stream_id : 0;
    if (err != VARLOG_OK)
        errtext_set(err, "%s", op->errtext);
    pthread_mutex_unlock(&op->mu);
    if (outcome)
        *outcome = err == VARLOG_OK ? VARLOG_APPENDED
                                    : (maybe ? VARLOG_MAYBE_APPENDED : VARLOG_NOT_APPENDED);
    atomic_fetch_add(err == VARLOG_OK ? &c->stats.appends_ok : &c->stats.appends_failed, 1);
    uint64_t bytes = 0;
    for (size_t i = 0; err == VARLOG_OK && i < n; i++)
        bytes += records[i].len;
    stats_add_outcome(&c->cstats,
                      err == VARLOG_OK ? VARLOG_APPENDED
                                       : (maybe ? VARLOG_MAYBE_APPENDED : VARLOG_NOT_APPENDED),
                      1, n, bytes);
    if (err == VARLOG_OK)
        stats_add_log_stream(&c->cstats, topic_id, stored_ls, n, bytes);
    metrics_note_append(&c->cstats.metrics, topic_id, stored_ls, err, n, stats_now_ns() - t0);
    op_unref(op);
    errtext_guard_end(err == VARLOG_OK);
    client_leave(c);
    return err;
}

varlog_err_t varlog_append(varlog_client_t *c, int32_t topic_id, const varlog_record_t *records,
                           size_t n, int64_t timeout_ms, varlog_entry_meta_t *metas,
                           varlog_outcome_t *outcome)
{
    return append_common(c, topic_id, 0, records, n, timeout_ms, metas, outcome);
}

varlog_err_t varlog_append_to(varlog_client_t *c, int32_t topic_id, int32_t log_stream_id,
                              const varlog_record_t *records, size_t n, int64_t timeout_ms,
                              varlog_entry_meta_t *metas, varlog_outcome_t *outcome)
{
    if (log_stream_id < 1) {
        if (outcome)
            *outcome = VARLOG_NOT_APPENDED;
        return errtext_set(VARLOG_ERR_INVALID_ARG, "append_to: log stream id %d (ids start at 1)",
                           log_stream_id);
    }
    return append_common(c, topic_id, log_stream_id, records, n, timeout_ms, metas, outcome);
}

/* ---- the engine and the lookup batcher ----------------------------------------------------- */

/* The lookups retries and gaps ask for carry the time they were asked (their bound): the
 * answer must come from a GetMetadata that began after it. */
static int lookup_one(void *ctx, vq_batch_item_t *item)
{
    return md_fetch_after(ctx, -1, item->has_bound ? item->bound : 0);
}

/* Every key needs the same thing, fresh metadata: one GetMetadata serves the whole batch,
 * one that began after the latest of their bounds (the items come sorted by bound). */
static int lookup_batch(void *ctx, vq_batch_item_t *const *items, size_t n)
{
    const vq_batch_item_t *last = items[n - 1];
    varlog_err_t err = md_fetch_after(ctx, -1, last->has_bound ? last->bound : 0);
    for (size_t i = 0; err == VARLOG_OK && i < n; i++)
        items[i]->status = 0;
    return err;
}

static void engine_log(void *ctx, vq_log_level_t level, const char *fmt, va_list ap)
{
    varlog_client_t *c = ctx;
    /* A task's failed result (ERROR) reaches its caller through the task's own callback (an
     * append's outcome, a subscription's error, a lookup's verdict): logged at DEBUG, not
     * said twice. A handler's panic (FATAL) reaches no one else. */
    varlog_log_level_t l = level == VQ_LOG_FATAL ? VARLOG_LOG_CRIT : VARLOG_LOG_DEBUG;
    if (!log_enabled(&c->log, l, VARLOG_LOG_CTX_RETRY))
        return;
    char line[512];
    vsnprintf(line, sizeof(line), fmt, ap);
    const varlog_client_t *outer = tls_engine_client;
    tls_engine_client = c;
    log_line(&c->log, l, VARLOG_LOG_CTX_RETRY, "%s", line);
    tls_engine_client = outer;
}

static bool engine_info_enabled(void *ctx)
{
    varlog_client_t *c = ctx;
    return log_enabled(&c->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_RETRY);
}

varlog_err_t append_engine_start(varlog_client_t *c)
{
    c->engine_logger.ctx = c;
    c->engine_logger.log = engine_log;
    c->engine_logger.info_enabled = engine_info_enabled;
    vq_batcher_opts_t bo;
    vq_batcher_opts_init(&bo);
    bo.size = (size_t)c->conf->lookup_batch_size;
    bo.wait_ns = c->conf->lookup_batch_wait_ms * 1000000;
    bo.lookup_one = lookup_one;
    bo.lookup_batch = lookup_batch;
    bo.ctx = c;
    vq_engine_opts_t eo;
    vq_engine_opts_init(&eo);
    eo.workers = (unsigned)c->conf->retry_workers;
    eo.logger = &c->engine_logger;
    if (vq_batcher_create(&bo, &c->batcher) != VQ_OK || vq_engine_create(&eo, &c->engine) != VQ_OK)
        return errtext_set(VARLOG_ERR_NOMEM, "could not create the retry engine");
    if (vq_engine_start(c->engine) != VQ_OK)
        return errtext_set(VARLOG_ERR_INTERNAL, "could not start the retry engine's threads");
    return VARLOG_OK;
}

void append_engine_stop(varlog_client_t *c)
{
    if (c->engine)
        vq_engine_release(c->engine);
    c->engine = NULL;
    /* A handler abandoned by the watchdog may still run after the release, using the op and
     * the client: wait until the engine released every op. */
    pthread_mutex_lock(&c->mu);
    while (c->retry_tasks > 0)
        pthread_cond_wait(&c->idle, &c->mu);
    pthread_mutex_unlock(&c->mu);
    if (c->batcher)
        vq_batcher_destroy(c->batcher);
    c->batcher = NULL;
}
