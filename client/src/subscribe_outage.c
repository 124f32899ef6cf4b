/* Outages of a subscription's log streams: when one begins (a stream breaks) and ends
 * (progress), the bound on how long one may last (subscribe.retry.timeout.ms, and the
 * optional subscribe.retries), and what varlog_subscription_health reports. The bound is a
 * time, as the appender's delivery timeout is: a count of failures lasts as long as the
 * backoff makes it (about 11 s by default), shorter than a storage node restart. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "errtext.h"
#include "subscribe_internal.h"

/* How long a stream must stay open on a live connection, while the subscription does not
 * wait for an entry from it, to count as progress. gRPC reports nothing when a server
 * stream's call is accepted (headers come with the first message), so a quiet stream is
 * judged by time; a refused connection fails a stream within milliseconds, and a node that
 * does not answer leaves the connection short of READY. */
#define HEALTHY_OPEN_MS 1000

static int64_t timeout_ms(const varlog_subscription_t *sub)
{
    return sub->retry_timeout_ms;
}

/* Publishes the log streams' outages for varlog_subscription_health. Consumer only. */
static void publish(varlog_subscription_t *sub, const sub_ls_t *failed)
{
    uint32_t down = 0;
    int32_t oldest = 0;
    int64_t since = 0;
    for (size_t i = 0; i < sub->n_ls; i++) {
        const sub_ls_t *ls = sub->ls[i];
        if (ls->down_since_ms == 0)
            continue;
        down++;
        if (oldest == 0 || ls->down_since_ms < since) {
            oldest = ls->log_stream_id;
            since = ls->down_since_ms;
        }
    }
    int64_t now = wire_now_ms();
    pthread_mutex_lock(&sub->mu);
    if (down > 0 && sub->h_down == 0) {
        sub->h_outages++;
        sub->h_outage_began_ms = since; /* its log stream's first failure */
    }
    if (down == 0 && sub->h_down > 0 && sub->h_end_ms == 0)
        sub->h_outage_ms += (uint64_t)(now - sub->h_outage_began_ms);
    sub->h_down = down;
    sub->h_ls = oldest;
    sub->h_since_ms = since;
    if (failed)
        snprintf(sub->h_last, sizeof(sub->h_last), "log stream %d %s", failed->log_stream_id,
                 failed->last_why);
    pthread_mutex_unlock(&sub->mu);
}

/* Ends the subscription with ls's last failure, naming the bound that ended it. */
static void give_up(varlog_subscription_t *sub, sub_ls_t *ls, int64_t now, bool by_count)
{
    if (by_count)
        sub_fail(sub, ls->last_err,
                 "subscribe to log stream %d of topic %d: %u failures in a row (subscribe.retries "
                 "%" PRId64 "); the last %s",
                 ls->log_stream_id, sub->topic_id, ls->failures, sub->c->conf->subscribe_retries,
                 ls->last_why);
    else
        sub_fail(sub, ls->last_err,
                 "subscribe to log stream %d of topic %d: no progress for %" PRId64
                 " ms (subscribe.retry.timeout.ms %" PRId64 "), %u failures; the last %s",
                 ls->log_stream_id, sub->topic_id, now - ls->down_since_ms, timeout_ms(sub),
                 ls->failures, ls->last_why);
}

bool sub_outage_failed(varlog_subscription_t *sub, sub_ls_t *ls, varlog_err_t err,
                       const char *target, const char *msg)
{
    int64_t now = wire_now_ms();
    ls->last_err = err;
    snprintf(ls->last_why, sizeof(ls->last_why), "at %s: %s%s%s", target, varlog_err_str(err),
             msg[0] ? ": " : "", msg);
    ls->failures++;
    if (ls->down_since_ms == 0) {
        ls->down_since_ms = now > 0 ? now : 1;
        log_line(&sub->c->log, VARLOG_LOG_NOTICE, VARLOG_LOG_CTX_SUBSCRIBE,
                 "subscription of topic %d: log stream %d reconnecting (%s)", sub->topic_id,
                 ls->log_stream_id, ls->last_why);
    }
    publish(sub, ls);
    int64_t retries = sub->c->conf->subscribe_retries;
    if (retries >= 0 && ls->failures > (uint64_t)retries) {
        give_up(sub, ls, now, true);
        return true;
    }
    if (timeout_ms(sub) >= 0 && now - ls->down_since_ms >= timeout_ms(sub)) {
        give_up(sub, ls, now, false);
        return true;
    }
    return false;
}

/* Ends ls's outage. */
static void recovered(varlog_subscription_t *sub, sub_ls_t *ls, const char *how)
{
    ls->failures = 0;
    if (ls->down_since_ms == 0)
        return;
    log_line(&sub->c->log, VARLOG_LOG_NOTICE, VARLOG_LOG_CTX_SUBSCRIBE,
             "subscription of topic %d: log stream %d is back after %" PRId64 " ms (%s)",
             sub->topic_id, ls->log_stream_id, wire_now_ms() - ls->down_since_ms, how);
    ls->down_since_ms = 0;
    publish(sub, NULL);
}

void sub_outage_progress(varlog_subscription_t *sub, sub_ls_t *ls)
{
    recovered(sub, ls, "an entry");
}

void sub_outage_check(varlog_subscription_t *sub, sub_ls_t *ls, int64_t now)
{
    if (ls->down_since_ms == 0)
        return;
    if (ls->finished) { /* reopened past the end: nothing of the range is left to wait for */
        recovered(sub, ls, "its range is complete");
        return;
    }
    bool open_long = ls->rpc && now - ls->opened_ms >= HEALTHY_OPEN_MS;
    /* The merge waits for the wanted position and this log stream has no head: it may be
     * the one holding it, so its quiet is no sign of health (the stall check judges it). */
    bool waited_on = sub->order == SUB_BY_GLSN && sub->blocked_since_ms != 0 && !ls->has_head;
    if (open_long && !waited_on && rpc_client_target_ready(sub->c->rpc, ls->target)) {
        recovered(sub, ls, "its stream stays open");
        return;
    }
    /* Past the bound, once the last reopening (made at the bound: sub_outage_delay_ns) had
     * its chance: it failed (then sub_outage_failed ended it), or its stream stayed open
     * without progress. */
    if (timeout_ms(sub) >= 0 && now - ls->down_since_ms >= timeout_ms(sub) &&
        (open_long || (!ls->rpc && !ls->retrying)))
        give_up(sub, ls, now, false);
}

int64_t sub_outage_delay_ns(const varlog_subscription_t *sub, const sub_ls_t *ls, int64_t delay_ns)
{
    int64_t limit = timeout_ms(sub);
    if (limit < 0 || ls->down_since_ms == 0)
        return delay_ns;
    int64_t left_ms = ls->down_since_ms + limit - wire_now_ms();
    if (left_ms <= 0)
        return 0;
    return delay_ns / 1000000 > left_ms ? left_ms * 1000000 : delay_ns;
}

void sub_outage_totals(varlog_subscription_t *sub, int64_t now, uint64_t *outages,
                       uint64_t *outage_ms, uint32_t *down)
{
    pthread_mutex_lock(&sub->mu);
    *outages = sub->h_outages;
    *outage_ms = sub->h_outage_ms;
    *down = 0;
    if (sub->h_down > 0 && sub->h_end_ms == 0) {
        *down = sub->h_down;
        if (now > sub->h_outage_began_ms)
            *outage_ms += (uint64_t)(now - sub->h_outage_began_ms);
    }
    pthread_mutex_unlock(&sub->mu);
}

void sub_outage_ended(varlog_subscription_t *sub)
{
    int64_t now = wire_now_ms();
    pthread_mutex_lock(&sub->mu);
    if (sub->h_end_ms == 0) {
        sub->h_end_ms = now > 0 ? now : 1;
        if (sub->h_down > 0) /* the outage ends with the subscription */
            sub->h_outage_ms += (uint64_t)(now - sub->h_outage_began_ms);
    }
    pthread_mutex_unlock(&sub->mu);
}

varlog_err_t varlog_subscription_health(varlog_subscription_t *sub,
                                        varlog_subscription_health_t *out)
{
    if (!sub || !out)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "subscription_health: %s is NULL",
                           !sub ? "sub" : "out");
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&sub->mu);
    out->reconnecting = sub->h_down > 0;
    out->log_streams_down = sub->h_down;
    out->log_stream_id = sub->h_ls;
    if (sub->h_down > 0) {
        int64_t until = sub->h_end_ms ? sub->h_end_ms : wire_now_ms();
        out->down_ms = until > sub->h_since_ms ? until - sub->h_since_ms : 0;
    }
    out->outages = sub->h_outages;
    snprintf(out->last_failure, sizeof(out->last_failure), "%s", sub->h_last);
    pthread_mutex_unlock(&sub->mu);
    out->timeout_ms = timeout_ms(sub);
    return VARLOG_OK;
}
