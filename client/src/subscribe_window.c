/* The read window of a topic-wide subscription (subscribe.window.bytes): how many GLSNs its
 * streams ask the storage nodes for at a time (subscribe_internal.h, win_end).
 *
 * A storage node sends a Subscribe stream's entries as fast as the stream's HTTP/2 window
 * lets it, and gRPC core sizes that window from its estimate of the connection's
 * bandwidth-delay product, not from what the reader takes: a reader slower than the nodes
 * holds about a window per log stream (tens of MB on loopback). Asking each log stream for a
 * bounded GLSN range bounds that by the range's entries, whatever gRPC's windows; GLSNs are
 * the topic's, so the entries of a range of N GLSNs over every log stream are at most N. */
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

void sub_window_set(varlog_subscription_t *sub, size_t n_log_streams)
{
    int64_t budget = sub->c->conf->subscribe_window_bytes;
    if (sub->order != SUB_BY_GLSN || budget <= 0)
        return;
    uint64_t entries = atomic_load_explicit(&sub->n_entries, memory_order_relaxed);
    uint64_t bytes = atomic_load_explicit(&sub->n_bytes, memory_order_relaxed);
    /* The last window's entries tell the size best (a topic's entries change over time); a
     * window too short to tell leaves the mean of all read so far. */
    uint64_t recent = entries - sub->win_entries_at;
    uint64_t mean = WINDOW_GUESSED_ENTRY;
    if (recent >= WINDOW_SAMPLE_MIN)
        mean = (bytes - sub->win_bytes_at) / recent + WINDOW_ENTRY_OVERHEAD;
    else if (entries >= WINDOW_SAMPLE_MIN)
        mean = bytes / entries + WINDOW_ENTRY_OVERHEAD;
    sub->win_entries_at = entries;
    sub->win_bytes_at = bytes;
    uint64_t span = (uint64_t)budget / mean;
    uint64_t least = (n_log_streams ? n_log_streams : 1) * WINDOW_MIN_PER_LOG_STREAM;
    if (span < least)
        span = least;
    uint64_t end =
        sub->wanted >= sub->end || sub->end - sub->wanted <= span ? sub->end : sub->wanted + span;
    sub->win_end = end;
    sub->windows++;
    log_line(&sub->c->log, VARLOG_LOG_DEBUG, VARLOG_LOG_CTX_SUBSCRIBE,
             "subscription of topic %d asks for GLSNs %" PRIu64 "..%" PRIu64
             " (read window %" PRIu64 ", entries of %" PRIu64 " B)",
             sub->topic_id, sub->wanted, end - 1, sub->windows, mean);
    atomic_store_explicit(&sub->win_end_pub, end, memory_order_relaxed);
}
