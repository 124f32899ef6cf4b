#ifndef VARLOG_CONF_INTERNAL_H
#define VARLOG_CONF_INTERNAL_H

/* The configuration's typed fields, which the client reads directly. conf.c's property table
 * maps each public property name onto one of these fields. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "varlog/conf.h"

struct varlog_conf {
    char *metadata_addresses; /* "host:port,host:port" as given; NULL until set */
    int64_t cluster_id;
    int64_t open_timeout_ms;
    int64_t metadata_call_timeout_ms;
    int64_t metadata_refresh_interval_ms; /* 0 = no periodic refresh */
    int64_t metadata_recheck_interval_ms; /* 0 = no rechecks */
    int64_t append_retries;
    int64_t append_retry_backoff_ms;
    int64_t append_retry_backoff_max_ms;
    bool append_retry_maybe_appended;
    bool append_resolve_maybe_appended;
    int64_t append_attempt_timeout_ms;
    int64_t append_deny_ttl_ms;
    int64_t append_record_max_bytes;
    int64_t append_batch_max_records;
    int64_t append_batch_max_bytes;
    int64_t appender_pipeline_depth;
    int64_t appender_linger_ms;
    int64_t appender_batch_max_records;
    int64_t appender_batch_max_bytes;
    int64_t appender_queue_max_records;
    int64_t appender_queue_max_bytes;
    int64_t appender_client_queue_max_records; /* 0 = no client-wide bound */
    int64_t appender_client_queue_max_bytes;   /* 0 = no client-wide bound */
    int64_t appender_delivery_timeout_ms;      /* 0 = no bound */
    int64_t appender_threads;                  /* 0 = a thread per appender */
    int64_t subscribe_prefetch_entries;
    int64_t subscribe_prefetch_bytes;   /* 0 = entries only */
    int64_t subscribe_window_bytes;     /* 0 = one range per stream */
    int64_t subscribe_retry_timeout_ms; /* -1 = for ever */
    int64_t subscribe_retries;          /* -1 = no bound in failures */
    int64_t subscribe_retry_backoff_ms;
    int64_t subscribe_retry_backoff_max_ms;
    int64_t subscribe_stall_timeout_ms; /* 0 = never */
    int64_t subscribe_self_receive_max; /* subscriptions per client with their own poller */
    int64_t subscribe_handler_threads;  /* 0 = a thread per handler subscription */
    int64_t subscribe_wakeup_entries;   /* past that: 1 = wake at every entry */
    int64_t subscribe_wakeup_wait_us;   /* past that: 0 = no batching of wake-ups */
    bool subscribe_stage_timing;        /* clock reads per entry for the stage timings */
    varlog_subscribe_observer_cb *subscribe_observer; /* NULL = none */
    void *subscribe_observer_opaque;
    int64_t retry_workers;
    int64_t lookup_batch_size; /* 0 = batching off */
    int64_t lookup_batch_wait_ms;
    int64_t reconnect_backoff_max_ms;
    int64_t channel_unlisted_grace_ms;
    bool absl_deadlock_detection; /* false: varlog_client_new turns it off, process-wide */
    bool grpc_bdp_probe;          /* false: 64 KiB HTTP/2 receive windows (rpc fixed_windows) */
    varlog_log_level_t log_level;
    unsigned debug_contexts; /* set of varlog_log_ctx_t bits */
    varlog_log_cb *log_cb;   /* NULL = stderr */
    void *log_opaque;
    int64_t stats_interval_ms;    /* 0 = no periodic emit */
    bool stats_latency;           /* the appenders time each call */
    int64_t stats_lag_timeout_ms; /* a scrape's bound to learn log streams' ends; 0 = no lag */
    varlog_stats_cb *stats_cb;    /* NULL = no periodic emit */
    void *stats_opaque;
};

/* Checks between properties, run by varlog_client_new. On failure sets the thread's error
 * text (naming the properties and the rule) and returns INVALID_ARG. */
varlog_err_t conf_validate(const varlog_conf_t *conf);

#endif
