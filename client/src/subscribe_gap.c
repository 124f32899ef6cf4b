/* Gaps in a topic-wide subscription: a GLSN that no log stream it reads holds, resolved by a
 * fresh metadata lookup through the client's batcher, and the probe for one that streams kept
 * open hide (subscribe_internal.h). */
#include <inttypes.h>
#include <stdlib.h>

#include "subscribe_internal.h"

typedef struct sub_gap_lookup {
    varlog_subscription_t *sub;
    uint64_t gen;
} sub_gap_lookup_t;

static void gap_lookup_after(void *arg, varlog_err_t lookup_err)
{
    sub_gap_lookup_t *g = arg;
    varlog_subscription_t *sub = g->sub;
    pthread_mutex_lock(&sub->mu);
    sub->gap_answered = g->gen;
    sub->gap_answer_err = lookup_err;
    pthread_mutex_unlock(&sub->mu);
    sub_wake(sub);
}

static void gap_lookup_release(void *arg)
{
    sub_gap_lookup_t *g = arg;
    sub_unref(g->sub);
    free(g);
}

/* The wanted GLSN is in no head and every log stream the subscription reads holds a later
 * one or finished. A topic's GLSNs are dense, so it is in a log stream the subscription does
 * not read yet (added after it started; the client's metadata may not show it), or gone
 * (trimmed, or below the first entry). Only metadata fetched after the gap was seen tells:
 * until it answers, wait; when it shows log streams not read yet, read them and wait for
 * their heads; when it shows none, the GLSNs up to the least head are in no log stream. A
 * failed lookup is asked again after subscribe.retry.backoff.ms. Consumer only. */
sub_gap_verdict_t sub_gap_resolve(varlog_subscription_t *sub, uint64_t least_head)
{
    if (sub->wanted == 0) /* no entry has GLSN 0 */
        return SUB_GAP_SKIP;
    pthread_mutex_lock(&sub->mu);
    bool answered = sub->gap_gen != 0 && sub->gap_answered == sub->gap_gen;
    varlog_err_t lookup_err = sub->gap_answer_err;
    pthread_mutex_unlock(&sub->mu);
    int64_t now = wire_now_ms();
    if (sub->gap_gen == 0) {
        if (now < sub->gap_next_ask_ms)
            return SUB_GAP_WAIT;
        sub_gap_lookup_t *g = malloc(sizeof(*g));
        if (!g) {
            sub->gap_next_ask_ms = now + sub_check_interval_ms(sub);
            return SUB_GAP_WAIT;
        }
        *g = (sub_gap_lookup_t){.sub = sub, .gen = ++sub->gap_gens};
        sub_ref(sub);
        if (client_submit_lookup(sub->c, g, gap_lookup_after, gap_lookup_release) != VARLOG_OK) {
            sub_unref(sub);
            free(g);
            sub->gap_next_ask_ms = now + sub_check_interval_ms(sub);
            return SUB_GAP_WAIT;
        }
        sub->gap_gen = g->gen;
        return SUB_GAP_WAIT;
    }
    if (!answered)
        return SUB_GAP_WAIT;
    sub->gap_gen = 0;
    if (lookup_err != VARLOG_OK) {
        log_line(&sub->c->log, VARLOG_LOG_INFO, VARLOG_LOG_CTX_SUBSCRIBE,
                 "subscription of topic %d waits for GLSN %" PRIu64
                 ": the metadata lookup that would tell where it is failed (%s); asking again",
                 sub->topic_id, sub->wanted, varlog_err_str(lookup_err));
        sub->gap_next_ask_ms = now + sub->c->conf->subscribe_retry_backoff_ms;
        return SUB_GAP_WAIT;
    }
    size_t before = sub->n_ls;
    md_view_t *view = md_current(sub->c);
    varlog_err_t err = sub_add_log_streams(sub, view);
    md_view_unref(view);
    if (err != VARLOG_OK) {
        sub_fail(sub, err, "subscribe: out of memory adding a log stream");
        return SUB_GAP_WAIT;
    }
    if (sub->n_ls != before)
        return SUB_GAP_WAIT;
    log_line(&sub->c->log, VARLOG_LOG_NOTICE, VARLOG_LOG_CTX_SUBSCRIBE,
             "subscription of topic %d: GLSNs %" PRIu64 "..%" PRIu64
             " are in no log stream of the topic (trimmed, or below its first entry); going on "
             "from GLSN %" PRIu64,
             sub->topic_id, sub->wanted, least_head - 1, least_head);
    return SUB_GAP_SKIP;
}

/* Longest pause between two probes of one wanted GLSN: the periodic metadata refresh's
 * default period. */
#define PROBE_PAUSE_MAX_MS 60000

/* A gap that sub_gap_resolve never sees: the wanted GLSN is in no head, and a log stream
 * read keeps its stream open without sending. A real node does so when it holds entries past
 * the range but not the range's end - 1, or sent its entries in range before the range was
 * committed (wire protocol 6.3): so a GLSN held by a log stream the client's metadata does
 * not show (added since) would be waited for until the next periodic refresh, or for ever
 * with the refresh off. Fresh metadata is asked for (within metadata.recheck.interval.ms of
 * the client's other rechecks) when the merge still waits for the same GLSN a pause later:
 * a check interval when a later head proves the GLSN committed; without a head it may not be
 * written yet (a tail read in windows waits so at each window's end), and the pause then
 * doubles from one probe to the next up to a minute, also across wanted GLSNs, so that a
 * slow tail asks rarely. An unbounded range without a head is a tail: never asked for. */
void sub_gap_probe(varlog_subscription_t *sub, int64_t now)
{
    uint64_t range_end = sub_range_end(sub);
    bool proven = tq_size(sub->heap) > 0;
    if (sub->order != SUB_BY_GLSN || sub->wanted >= range_end ||
        (!proven && range_end == VARLOG_GLSN_MAX)) {
        sub->probe_armed = false;
        return;
    }
    int64_t first = sub_check_interval_ms(sub);
    if (!sub->probe_armed || sub->probe_wanted != sub->wanted) {
        sub->probe_armed = true;
        sub->probe_wanted = sub->wanted;
        if (proven || sub->probe_pause_ms < first)
            sub->probe_pause_ms = first;
        sub->probe_at_ms = now + sub->probe_pause_ms;
        return;
    }
    if (now < sub->probe_at_ms)
        return;
    client_recheck_async(sub->c);
    sub->probe_pause_ms =
        sub->probe_pause_ms < PROBE_PAUSE_MAX_MS / 2 ? sub->probe_pause_ms * 2 : PROBE_PAUSE_MAX_MS;
    sub->probe_at_ms = now + sub->probe_pause_ms;
}
