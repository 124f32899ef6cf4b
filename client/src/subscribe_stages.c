/* Stage timings of the subscribe path (subscribe.stage.timing): an entry's stamps, taken by
 * the stream (arrival, gRPC's I/O thread), the merge (into its queue, out of it) and the
 * consumer (hand-out to the application, the handler's return), become the four stage
 * durations of metrics.h, recorded per client and per (topic, log stream), and the
 * observer's call. */
#include "subscribe_internal.h"

void sub_stages_note(varlog_subscription_t *sub, const varlog_entry_t *e, int64_t handed_ns,
                     int64_t handler_ns)
{
    client_stats_t *cs = &sub->c->cstats;
    int64_t d[METRICS_STAGES] = {
        [METRICS_STAGE_ENQUEUE] = sub->d_queued_ns - sub->d_arrival_ns,
        [METRICS_STAGE_TRANSMIT_QUEUE] = sub->d_taken_ns - sub->d_queued_ns,
        [METRICS_STAGE_DISPATCH] = handed_ns - sub->d_taken_ns,
        [METRICS_STAGE_HANDLER] = handler_ns,
    };
    /* The iterator form has no handler: nothing of the caller's time is taken for one. */
    size_t n = handler_ns >= 0 ? METRICS_STAGES : METRICS_STAGE_HANDLER;
    for (size_t i = 0; i < n; i++) {
        vhist_record(&cs->stage[i], d[i]);
        metrics_hist_record(&cs->metrics.stage[i], d[i]);
    }
    metrics_hist_record(&sub->d_series->receive, handed_ns - sub->d_arrival_ns);
    if (handler_ns >= 0)
        metrics_hist_record(&sub->d_series->process, handler_ns);
    if (!sub->observer)
        return;
    varlog_subscribe_stages_t st = {
        .topic_id = e->meta.topic_id,
        .log_stream_id = e->meta.log_stream_id,
        .glsn = e->meta.glsn,
        .llsn = e->meta.llsn,
        .enqueue_ns = d[METRICS_STAGE_ENQUEUE],
        .transmit_queue_ns = d[METRICS_STAGE_TRANSMIT_QUEUE],
        .dispatch_ns = d[METRICS_STAGE_DISPATCH],
        .handler_ns = handler_ns,
    };
    sub->observer(&st, sub->observer_opaque);
}
