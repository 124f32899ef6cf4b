#ifndef VARLOG_ALLOWLIST_H
#define VARLOG_ALLOWLIST_H

/*
 * Which log streams varlog_append may pick: the unsealed log streams of a topic in the
 * current metadata, minus the ones denied after a failure. Picks go round robin. A denial
 * ends when its time passes (checked when picking: no timer thread), when an append to the
 * log stream succeeds, or when a new metadata version shows the log stream unsealed with a
 * known primary (the node came back, the log stream was unsealed). When every unsealed log
 * stream is denied, the one whose denial ends first is picked rather than none: a denial
 * steers appends away from a failing log stream, it must not make a topic unwritable.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metadata.h"

typedef struct allow_entry {
    int32_t log_stream_id;
    bool sealed;             /* in the metadata the list was built from */
    bool healthy;            /* unsealed, with a known primary, in that metadata */
    int64_t denied_until_ms; /* 0 = allowed */
    /* The highest LLSN a synchronous append of this client was told it stored here: where
     * reading back an ambiguous append starts (append_resolve.h). Kept across renewals. */
    uint64_t confirmed_llsn;
} allow_entry_t;

typedef struct allow_topic {
    int32_t topic_id;
    size_t n;
    allow_entry_t *entries; /* by increasing log stream id */
    size_t cursor;          /* round-robin position */
    size_t n_sealed;        /* entries with sealed set */
} allow_topic_t;

typedef struct allowlist {
    pthread_mutex_t mu;
    size_t n_topics;
    allow_topic_t *topics; /* by increasing topic id */
} allowlist_t;

void allowlist_init(allowlist_t *al);
void allowlist_destroy(allowlist_t *al);

/* Rebuilds from view (a new metadata version), keeping the deny marks of log streams still
 * present unless view shows them unsealed with a primary. NOMEM leaves the previous lists in
 * place. */
varlog_err_t allowlist_renew(allowlist_t *al, const md_view_t *view);

/* The next allowed, unsealed log stream of topic after the previous pick; when all unsealed
 * ones are denied at now_ms, the one whose denial ends first. *denied (optional) tells
 * whether the pick was denied. *passed_over (optional) tells whether a log stream of the topic
 * is sealed, or was denied when the pick looked at it: fresh metadata may show it fit again.
 * Errors: UNKNOWN_TOPIC, NO_LOG_STREAM (the topic has no log stream, or every one is sealed;
 * *why, optional, says which). */
varlog_err_t allowlist_pick(allowlist_t *al, int32_t topic_id, int64_t now_ms, int32_t *out,
                            bool *denied, bool *passed_over, const char **why);

/* Whether some log stream of topic is sealed or denied at now_ms (false for an unknown
 * topic). */
bool allowlist_passes_over(allowlist_t *al, int32_t topic_id, int64_t now_ms);

/* An append to the log stream succeeded: ends its denial, and a seal the metadata it came
 * from showed is over (the next metadata version confirms it). Unknown ids are ignored. */
void allowlist_allow(allowlist_t *al, int32_t topic_id, int32_t log_stream_id);

/* As allowlist_allow, after an append stored records here up to llsn: also raises the log
 * stream's confirmed LLSN. */
void allowlist_confirm(allowlist_t *al, int32_t topic_id, int32_t log_stream_id, uint64_t llsn);

/* The log stream's confirmed LLSN (0: none known). */
uint64_t allowlist_confirmed(allowlist_t *al, int32_t topic_id, int32_t log_stream_id);

/* Denies a log stream until until_ms; unknown ids are ignored. Returns true when it was
 * allowed before (a new denial). */
bool allowlist_deny(allowlist_t *al, int32_t topic_id, int32_t log_stream_id, int64_t until_ms);

/* Allowed (undenied, unsealed) log streams of topic at now_ms: up to cap into ids, the total into
 * *n. Errors: UNKNOWN_TOPIC. */
varlog_err_t allowlist_list(allowlist_t *al, int32_t topic_id, int64_t now_ms, int32_t *ids,
                            size_t cap, size_t *n);

#endif
