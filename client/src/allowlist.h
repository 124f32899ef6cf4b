#ifndef VARLOG_ALLOWLIST_H
#define VARLOG_ALLOWLIST_H

/*
 * Which log streams varlog_append may pick: every log stream of a topic in the current
 * metadata, minus the ones denied after a failure until their deny time passes. Picks go
 * round robin. Deny marks survive metadata renewals (as in the Go client) and expire by
 * time only, checked when picking: no timer thread.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "metadata.h"

typedef struct allow_entry {
    int32_t log_stream_id;
    int64_t denied_until_ms; /* 0 = allowed */
} allow_entry_t;

typedef struct allow_topic {
    int32_t topic_id;
    size_t n;
    allow_entry_t *entries; /* by increasing log stream id */
    size_t cursor;          /* round-robin position */
} allow_topic_t;

typedef struct allowlist {
    pthread_mutex_t mu;
    size_t n_topics;
    allow_topic_t *topics; /* by increasing topic id */
} allowlist_t;

void allowlist_init(allowlist_t *al);
void allowlist_destroy(allowlist_t *al);

/* Rebuilds from view, keeping the deny marks of log streams still present. NOMEM leaves the
 * previous lists in place. */
varlog_err_t allowlist_renew(allowlist_t *al, const md_view_t *view);

/* The next allowed log stream of topic after the previous pick. Errors: UNKNOWN_TOPIC,
 * NO_LOG_STREAM (the topic has none, or all are denied at now_ms). */
varlog_err_t allowlist_pick(allowlist_t *al, int32_t topic_id, int64_t now_ms, int32_t *out);

/* Denies a log stream until until_ms; unknown ids are ignored. Returns true when it was
 * allowed before (a new denial). */
bool allowlist_deny(allowlist_t *al, int32_t topic_id, int32_t log_stream_id, int64_t until_ms);

/* Allowed log streams of topic at now_ms: up to cap into ids, the total into *n.
 * Errors: UNKNOWN_TOPIC. */
varlog_err_t allowlist_list(allowlist_t *al, int32_t topic_id, int64_t now_ms, int32_t *ids,
                            size_t cap, size_t *n);

#endif
