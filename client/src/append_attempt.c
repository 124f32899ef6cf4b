/* One attempt of a synchronous append: pick a log stream, send the records to its primary,
 * read the answer or classify the failure, and tell the allowlist what the log stream did.
 * Apart from append.c, which decides when to attempt again and waits for the result, because
 * an attempt is the same network exchange whether the caller's thread or the retry task
 * makes it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "append_internal.h"
#include "log_io_codec.h"
#include "snpb/log_io.pb-c.h"
#include "wire.h"

bool append_op_waits(const append_op_t *op)
{
    return op->c->conf->append_retries < 0 && op->deadline_ms >= 0;
}

static void attempt_fail(attempt_result_t *r, varlog_err_t err, bool retriable, const char *fmt,
                         ...) __attribute__((format(printf, 4, 5)));

static void attempt_fail(attempt_result_t *r, varlog_err_t err, bool retriable, const char *fmt,
                         ...)
{
    r->v = (append_verdict_t){.err = err, .retriable = retriable};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->text, sizeof(r->text), fmt, ap);
    va_end(ap);
}

static void fill_metas(append_op_t *op, const Varlog__Snpb__AppendResponse *resp,
                       attempt_result_t *r)
{
    if (resp->n_results != op->n) {
        attempt_fail(r, VARLOG_ERR_DECODE, false, "%zu results for %zu records", resp->n_results,
                     op->n);
        r->v.ambiguous = true;
        return;
    }
    for (size_t i = 0; i < op->n; i++) {
        const Varlog__Snpb__AppendResult *res = resp->results[i];
        if (res && res->error && res->error[0]) {
            /* Servers before v0.26 reported a failed suffix of the batch this way. */
            attempt_fail(r, VARLOG_ERR_RPC_UNKNOWN, false, "record %zu: %s", i, res->error);
            r->v.ambiguous = true;
            return;
        }
        if (!res || !res->meta) {
            attempt_fail(r, VARLOG_ERR_DECODE, false, "result %zu without metadata", i);
            r->v.ambiguous = true;
            return;
        }
        op->metas[i].topic_id = res->meta->topic_id;
        op->metas[i].log_stream_id = res->meta->log_stream_id;
        op->metas[i].glsn = res->meta->glsn;
        op->metas[i].llsn = res->meta->llsn;
    }
}

/* Marks the attempt in flight, unless the op is over (its result is final or the caller
 * left): then nothing may be sent, or a record could be stored after the caller was told it
 * was not. The caller's wait reads the mark under the same lock, so either it sees the mark
 * and reports MAYBE_APPENDED, or this attempt sees the op over and does not send. Returns
 * the attempt's absolute deadline, or 0 when it must not send. */
static int64_t begin_send(append_op_t *op, attempt_result_t *r, bool *own_deadline)
{
    int64_t bound = wire_now_ms() + op->c->conf->append_attempt_timeout_ms;
    pthread_mutex_lock(&op->mu);
    int64_t deadline = 0;
    if (op->done || op->abandoned) {
        r->ran = false;
    } else if (client_remaining_ms(op->deadline_ms) == 0) {
        attempt_fail(r, VARLOG_ERR_TIMED_OUT, false, "no time left for attempt %u", op->attempts);
    } else {
        op->attempt_inflight = true;
        *own_deadline = op->deadline_ms >= 0 && op->deadline_ms <= bound;
        deadline = *own_deadline ? op->deadline_ms : bound;
    }
    pthread_mutex_unlock(&op->mu);
    return deadline;
}

void append_attempt(append_op_t *op, attempt_result_t *r)
{
    varlog_client_t *c = op->c;
    memset(r, 0, sizeof(*r));
    r->ran = true;
    pthread_mutex_lock(&op->mu);
    bool over = op->done || op->abandoned;
    unsigned nth = over ? op->attempts : ++op->attempts;
    pthread_mutex_unlock(&op->mu);
    if (over) {
        r->ran = false;
        return;
    }
    atomic_fetch_add(&c->stats.append_attempts, 1);

    md_view_t *v = md_current(c);
    int32_t ls = op->fixed_log_stream;
    if (!ls) {
        const char *why = "";
        bool passed_over = false;
        varlog_err_t err =
            allowlist_pick(&c->allow, op->topic_id, wire_now_ms(), &ls, NULL, &passed_over, &why);
        if (err == VARLOG_ERR_NO_LOG_STREAM && client_recheck_wait(c, op->deadline_ms)) {
            /* The metadata at hand may predate an unseal or a new log stream. */
            md_view_unref(v);
            v = md_current(c);
            err = allowlist_pick(&c->allow, op->topic_id, wire_now_ms(), &ls, NULL, NULL, &why);
        } else if (err == VARLOG_OK && passed_over) {
            client_recheck_async(c); /* a sealed or denied log stream may be fit again */
        }
        if (err != VARLOG_OK) {
            /* No log stream to try, even in metadata fresher than
             * metadata.recheck.interval.ms. Waiting (the default), the call waits for an
             * unseal or a new log stream until its deadline, the metadata looked up again
             * before each retry; counting retries, a retry could not make one appear sooner
             * than the caller's next call would see it. */
            attempt_fail(r, err, err == VARLOG_ERR_NO_LOG_STREAM && append_op_waits(op),
                         "append to topic %d: %s", op->topic_id, why);
            goto out;
        }
    }
    r->ls = ls;
    const md_log_stream_t *l = md_view_log_stream(v, op->topic_id, ls);
    if (!l) {
        attempt_fail(r, VARLOG_ERR_UNKNOWN_LOG_STREAM, !op->fixed_log_stream,
                     "log stream %d of topic %d is not in the metadata", ls, op->topic_id);
        goto out;
    }
    if (op->fixed_log_stream && l->sealed && nth > 1) {
        /* Fresh metadata confirms it: the same log stream refuses until it is unsealed, which
         * a waiting call waits for (the metadata is looked up again before each retry). */
        attempt_fail(r, VARLOG_ERR_SEALED, append_op_waits(op),
                     "log stream %d of topic %d is sealed", ls, op->topic_id);
        goto out;
    }
    if (!l->primary) {
        attempt_fail(r, VARLOG_ERR_RPC_UNAVAILABLE, true,
                     "log stream %d of topic %d: its primary has no known address", ls,
                     op->topic_id);
        r->v.deny = true;
        goto out;
    }
    bool own_deadline = false;
    r->after = allowlist_confirmed(&c->allow, op->topic_id, ls);
    snprintf(r->target, sizeof(r->target), "%s", l->primary);
    int64_t deadline = begin_send(op, r, &own_deadline);
    if (!deadline)
        goto out;
    rpc_stream_opts_t so = {.kind = RPC_STREAM_BIDI,
                            .response = &varlog__snpb__append_response__descriptor,
                            .recv_window = 1,
                            .timeout_ms = -1,
                            .deadline_ms = deadline};
    rpc_stream_t *s = NULL;
    varlog_err_t err = rpc_stream_open(c->rpc, l->primary, SN_PATH_APPEND, &so, NULL, &s);
    ProtobufCMessage *m = NULL;
    if (err == VARLOG_OK) {
        uint8_t head[CODEC_HEAD_MAX];
        size_t head_len = codec_put_head(head, op->topic_id, ls);
        varlog_err_t send_err = rpc_stream_send_shared(s, head, head_len, op->body);
        if (send_err == VARLOG_OK)
            send_err = rpc_stream_close_send(s);
        /* A send refused on our side (memory) leaves a call the server still waits on. */
        bool local = send_err == VARLOG_ERR_NOMEM || send_err == VARLOG_ERR_INVALID_ARG;
        if (local)
            rpc_stream_cancel(s);
        /* One request, one response, then cancel: what Go's per-call Append does. The
         * receive also waits for the call's final status, which is what explains a send
         * that failed (the transport only knows the connection broke). */
        varlog_err_t recv_err = rpc_stream_recv(s, -1, &m);
        err = recv_err == VARLOG_OK || !local ? recv_err : send_err;
    }
    if (err == VARLOG_OK) {
        fill_metas(op, (const Varlog__Snpb__AppendResponse *)m, r);
        protobuf_c_message_free_unpacked(m, NULL);
    } else {
        const rpc_status_t *st = s ? rpc_stream_status(s) : NULL;
        const char *msg = st && st->message ? st->message : "";
        bool sent = s && rpc_stream_sent(s, 5000) > 0;
        r->v = append_classify(err, msg, sent, client_closing(c), own_deadline);
        if (r->v.err == VARLOG_ERR_TIMED_OUT)
            own_deadline = true;
        /* The attempt's own bound passed, not the call's; any other failure is itself. */
        bool attempt_bound = err == VARLOG_ERR_RPC_DEADLINE_EXCEEDED && !own_deadline;
        snprintf(r->text, sizeof(r->text),
                 "append of %zu records to log stream %d of topic %d at %s (attempt %u): %s%s%s%s",
                 op->n, ls, op->topic_id, l->primary, nth, varlog_err_str(err), msg[0] ? ": " : "",
                 msg, attempt_bound ? " (no answer within append.attempt.timeout.ms)" : "");
    }
    rpc_stream_destroy(s);
out:
    pthread_mutex_lock(&op->mu);
    op->attempt_inflight = false;
    if (!op->done && r->ran) {
        /* A finished op's result is final: a late attempt changes nothing the caller reads. */
        op->maybe |= r->v.err != VARLOG_OK && r->v.ambiguous;
        if (r->v.err != VARLOG_OK) {
            op->err = r->v.err;
            snprintf(op->errtext, sizeof(op->errtext), "%s", r->text);
        }
    }
    pthread_mutex_unlock(&op->mu);
    int64_t ttl = c->conf->append_deny_ttl_ms;
    if (r->ran && r->v.err == VARLOG_OK && r->ls) {
        allowlist_confirm(&c->allow, op->topic_id, r->ls, op->metas[op->n - 1].llsn);
        const md_log_stream_t *done = md_view_log_stream(v, op->topic_id, r->ls);
        if (done && done->sealed)
            client_recheck_async(c); /* the metadata at hand says sealed: it is out of date */
    } else if (r->ran && r->v.err != VARLOG_OK && r->v.deny && ttl > 0 &&
               allowlist_deny(&c->allow, op->topic_id, ls, wire_now_ms() + ttl)) {
        atomic_fetch_add(&c->stats.denials, 1);
        log_line(&c->log, VARLOG_LOG_NOTICE, VARLOG_LOG_CTX_APPEND,
                 "log stream %d of topic %d denied for %lld ms: %s", ls, op->topic_id,
                 (long long)ttl, r->text);
    }
    md_view_unref(v);
}
