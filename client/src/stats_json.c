/* The statistics snapshot as JSON (the periodic emit and varlog_stats_json). The field names
 * and their meaning are docs/STATISTICS.md's table, which tests/client/test_stats.c compares
 * with what this writes: a field added here without a row there fails that test. */
#include <inttypes.h>
#include <stdio.h>

#include <cJSON.h>

#include "stats_internal.h"

/* Integers go in as raw text: cJSON's numbers are doubles, exact only up to 2^53. */
static bool put_u64(cJSON *obj, const char *name, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%" PRIu64, v);
    return cJSON_AddRawToObject(obj, name, buf) != NULL;
}

static bool put_i64(cJSON *obj, const char *name, int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    return cJSON_AddRawToObject(obj, name, buf) != NULL;
}

static bool put_latency(cJSON *root, const varlog_stats_latency_t *l)
{
    cJSON *o = cJSON_AddObjectToObject(root, "append_latency_us");
    return o && put_u64(o, "count", l->count) && put_u64(o, "p50", l->p50_us) &&
           put_u64(o, "p90", l->p90_us) && put_u64(o, "p99", l->p99_us) &&
           put_u64(o, "p99_9", l->p999_us) && put_u64(o, "max", l->max_us);
}

static bool put_stage(cJSON *root, const char *name, const varlog_stats_stage_t *l)
{
    cJSON *o = cJSON_AddObjectToObject(root, name);
    return o && put_u64(o, "count", l->count) && put_u64(o, "p50", l->p50_ns) &&
           put_u64(o, "p90", l->p90_ns) && put_u64(o, "p99", l->p99_ns) &&
           put_u64(o, "p99_9", l->p999_ns) && put_u64(o, "max", l->max_ns);
}

static bool put_log_streams(cJSON *root, const varlog_stats_t *st)
{
    cJSON *arr = cJSON_AddArrayToObject(root, "log_streams");
    if (!arr)
        return false;
    for (uint32_t i = 0; i < st->n_log_streams && i < VARLOG_STATS_LOG_STREAMS_MAX; i++) {
        const varlog_stats_log_stream_t *ls = &st->log_streams[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o))
            return false;
        if (!put_i64(o, "topic_id", ls->topic_id) ||
            !put_i64(o, "log_stream_id", ls->log_stream_id) ||
            !put_u64(o, "appended_records", ls->appended_records) ||
            !put_u64(o, "appended_bytes", ls->appended_bytes))
            return false;
    }
    return true;
}

static bool fill(cJSON *r, const varlog_stats_t *st)
{
    return put_i64(r, "ts_ms", st->ts_ms) && put_i64(r, "uptime_ms", st->uptime_ms) &&
           put_u64(r, "appenders", st->appenders) &&
           put_u64(r, "pending_records", st->pending_records) &&
           put_u64(r, "pending_bytes", st->pending_bytes) &&
           put_u64(r, "inflight_records", st->inflight_records) &&
           put_u64(r, "inflight_bytes", st->inflight_bytes) &&
           put_u64(r, "appended_calls", st->appended_calls) &&
           put_u64(r, "appended_records", st->appended_records) &&
           put_u64(r, "appended_bytes", st->appended_bytes) &&
           put_u64(r, "not_appended_calls", st->not_appended_calls) &&
           put_u64(r, "not_appended_records", st->not_appended_records) &&
           put_u64(r, "maybe_appended_calls", st->maybe_appended_calls) &&
           put_u64(r, "maybe_appended_records", st->maybe_appended_records) &&
           put_u64(r, "retries", st->retries) && put_u64(r, "queue_full", st->queue_full) &&
           put_u64(r, "queue_full_waits", st->queue_full_waits) &&
           put_u64(r, "resolve_passes", st->resolve_passes) &&
           put_u64(r, "resolved_found", st->resolved_found) &&
           put_u64(r, "resolved_absent", st->resolved_absent) &&
           put_u64(r, "lookups", st->lookups) &&
           put_u64(r, "lookup_batch_calls", st->lookup_batch_calls) &&
           put_u64(r, "lookup_single_calls", st->lookup_single_calls) &&
           put_u64(r, "metadata_fetches", st->metadata_fetches) &&
           put_u64(r, "reconnects", st->reconnects) && put_latency(r, &st->append_latency) &&
           put_u64(r, "subscriptions", st->subscriptions) &&
           put_u64(r, "subscribe_entries", st->subscribe_entries) &&
           put_u64(r, "subscribe_bytes", st->subscribe_bytes) &&
           put_u64(r, "subscribe_lag", st->subscribe_lag) &&
           put_u64(r, "subscribe_outages", st->subscribe_outages) &&
           put_u64(r, "subscribe_outage_ms", st->subscribe_outage_ms) &&
           put_u64(r, "subscribe_log_streams_down", st->subscribe_log_streams_down) &&
           put_stage(r, "subscribe_enqueue_ns", &st->subscribe_enqueue) &&
           put_stage(r, "subscribe_transmit_queue_ns", &st->subscribe_transmit_queue) &&
           put_stage(r, "subscribe_dispatch_ns", &st->subscribe_dispatch) &&
           put_stage(r, "subscribe_handler_ns", &st->subscribe_handler) && put_log_streams(r, st) &&
           put_u64(r, "log_streams_untracked_records", st->log_streams_untracked_records) &&
           put_u64(r, "log_streams_untracked_bytes", st->log_streams_untracked_bytes);
}

char *stats_to_json(const varlog_stats_t *st, size_t *len)
{
    cJSON *root = cJSON_CreateObject();
    char *out = root && fill(root, st) ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (out && len) {
        size_t n = 0;
        while (out[n])
            n++;
        *len = n;
    }
    return out;
}

void stats_json_free(char *json)
{
    cJSON_free(json);
}
