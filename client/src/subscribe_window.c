/* The read window of a subscription (subscribe.window.bytes): how many positions (GLSNs of a
 * topic, LLSNs of one log stream) its streams ask the storage nodes for at a time
 * (subscribe_internal.h, win_end).
 *
 * A storage node sends a Subscribe stream's entries as fast as the stream's HTTP/2 window
 * lets it, and gRPC core sizes that window from its estimate of the connection's
 * bandwidth-delay product, not from what the reader takes: a reader slower than the nodes
 * holds about a window per log stream (tens of MB on loopback). Asking each log stream for a
 * bounded GLSN range bounds that by the range's entries, whatever gRPC's windows; GLSNs are
 * the topic's, so the entries of a range of N GLSNs over every log stream are at most N.
 * (A log stream read by LLSN has one stream, which a node ends right after the range's last
 * LLSN; its window bounds its one window in gRPC as well.)
 *
 * Each window costs a stream per log stream, and a new stream's first entry comes a round
 * trip and the node's start-up after its open (a few ms on loopback, measured): so the next
 * window's streams open once the merge is WINDOW_AHEAD_FRACTION from the end of the current
 * one, and the switch finds their entries there. What the nodes may send ahead is then the
 * rest of the window and the whole next one: 1.25 windows at most. A real node's stream may
 * stay open past its last entry of the range (when the range's last GLSN is another log
 * stream's, wire protocol 6.3): the switch cancels every stream of the window passed. */
#include <inttypes.h>

#include "subscribe_internal.h"

/* Per entry beside its payload, in gRPC's buffers: the message's tags and lengths, its GLSN
 * and LLSN, and the slice's share of its allocation. */
#define WINDOW_ENTRY_OVERHEAD 32
/* An entry's size assumed until enough were read to tell. */
#define WINDOW_GUESSED_ENTRY 4096
/* Entries read before their mean size is trusted. */
#define WINDOW_SAMPLE_MIN 64
/* Least GLSNs per log stream in a window: each window costs a stream per log stream, which
 * this many entries (on average) pay for. */
#define WINDOW_MIN_PER_LOG_STREAM 64
/* The next window's streams open this far (a fraction of the window) before its end. */
#define WINDOW_AHEAD_FRACTION 4

/* GLSNs in the next window, from the entries read lately (the last window's, which tell the
 * size best as a topic's entries change; the mean of all read so far while a window is too
 * short to tell). */
static uint64_t window_span(varlog_subscription_t *sub, size_t n_log_streams)
{
    uint64_t entries = atomic_load_explicit(&sub->n_entries, memory_order_relaxed);
    uint64_t bytes = atomic_load_explicit(&sub->n_bytes, memory_order_relaxed);
    uint64_t recent = entries - sub->win_entries_at;
    uint64_t mean = WINDOW_GUESSED_ENTRY;
    if (recent >= WINDOW_SAMPLE_MIN)
        mean = (bytes - sub->win_bytes_at) / recent + WINDOW_ENTRY_OVERHEAD;
    else if (entries >= WINDOW_SAMPLE_MIN)
        mean = bytes / entries + WINDOW_ENTRY_OVERHEAD;
    sub->win_entries_at = entries;
    sub->win_bytes_at = bytes;
    uint64_t span = (uint64_t)sub->c->conf->subscribe_window_bytes / mean;
    uint64_t least = (n_log_streams ? n_log_streams : 1) * WINDOW_MIN_PER_LOG_STREAM;
    return span < least ? least : span;
}

/* from + span, but never past the subscription's end. */
static uint64_t window_end(const varlog_subscription_t *sub, uint64_t from, uint64_t span)
{
    return from >= sub->end || sub->end - from <= span ? sub->end : from + span;
}

/* [from, end) is the window now. */
static void window_take(varlog_subscription_t *sub, uint64_t from, uint64_t end)
{
    uint64_t span = end - from;
    atomic_store_explicit(&sub->win_end, end, memory_order_relaxed);
    sub->win_ahead_at = end >= sub->end ? UINT64_MAX : end - span / WINDOW_AHEAD_FRACTION;
    pthread_mutex_lock(&sub->mu); /* the counters varlog_subscription_stats reads */
    uint64_t windows = ++sub->stats.windows;
    pthread_mutex_unlock(&sub->mu);
    log_line(&sub->c->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_SUBSCRIBE,
             "subscription of topic %d reads %s %" PRIu64 "..%" PRIu64 " (read window %" PRIu64 ")",
             sub->topic_id, sub->order == SUB_BY_GLSN ? "GLSNs" : "LLSNs", from, end - 1, windows);
}

void sub_window_begin(varlog_subscription_t *sub, size_t n_log_streams)
{
    if (sub->c->conf->subscribe_window_bytes <= 0)
        return;
    window_take(sub, sub->wanted, window_end(sub, sub->wanted, window_span(sub, n_log_streams)));
}

void sub_window_ahead(varlog_subscription_t *sub)
{
    sub->win_ahead_at = UINT64_MAX; /* once per window */
    uint64_t from = sub_range_end(sub);
    uint64_t end = window_end(sub, from, window_span(sub, sub->n_ls));
    sub->win_next_end = end;
    for (size_t i = 0; i < sub->n_ls; i++) {
        sub_ls_t *ls = sub->ls[i];
        char why[128];
        /* One that cannot open now is opened at the switch, whose failure is ls's; one
         * waiting for a retry is the retry's to open (on an engine worker: hands off). */
        if (!ls->next_rpc && !ls->retrying &&
            sub_open_call(sub, ls, from, end, true, &ls->next_rpc, why, sizeof(why)) != VARLOG_OK)
            ls->next_rpc = NULL;
    }
}

void sub_window_pass(varlog_subscription_t *sub, uint64_t end)
{
    if (tq_size(sub->heap) != 0) /* cannot happen: every head is below the window's end */
        return;
    if (sub->wanted < end) { /* the rest of the window is in no log stream */
        sub->wanted = end;
        atomic_store_explicit(&sub->n_next, sub->wanted, memory_order_relaxed);
    }
    uint64_t next_end = sub->win_next_end;
    if (next_end == 0)
        next_end = window_end(sub, end, window_span(sub, sub->n_ls));
    sub->win_next_end = 0;
    window_take(sub, end, next_end);
    for (size_t i = 0; i < sub->n_ls && sub->result == VARLOG_OK; i++) {
        sub_ls_t *ls = sub->ls[i];
        ls->finished = false;
        sub_close_stream(ls);
        if (ls->next_rpc) {
            sub_take_ahead(sub, ls);
        } else if (!ls->retrying) {
            sub_ls_open(sub, ls);
        }
    }
}
