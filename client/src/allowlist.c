#include "allowlist.h"

#include <stdlib.h>
#include <string.h>

void allowlist_init(allowlist_t *al)
{
    memset(al, 0, sizeof(*al));
    pthread_mutex_init(&al->mu, NULL);
}

static void free_topics(allow_topic_t *topics, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(topics[i].entries);
    free(topics);
}

void allowlist_destroy(allowlist_t *al)
{
    free_topics(al->topics, al->n_topics);
    al->topics = NULL;
    al->n_topics = 0;
    pthread_mutex_destroy(&al->mu);
}

static allow_topic_t *find_topic(allowlist_t *al, int32_t topic_id)
{
    size_t lo = 0, hi = al->n_topics;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (al->topics[mid].topic_id < topic_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < al->n_topics && al->topics[lo].topic_id == topic_id ? &al->topics[lo] : NULL;
}

static allow_entry_t *find_entry(allow_topic_t *t, int32_t log_stream_id)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->entries[mid].log_stream_id < log_stream_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->n && t->entries[lo].log_stream_id == log_stream_id ? &t->entries[lo] : NULL;
}

varlog_err_t allowlist_renew(allowlist_t *al, const md_view_t *view)
{
    allow_topic_t *topics = calloc(view->n_topics ? view->n_topics : 1, sizeof(*topics));
    if (!topics)
        return VARLOG_ERR_NOMEM;
    for (size_t i = 0; i < view->n_topics; i++) {
        const md_topic_t *mt = &view->topics[i];
        topics[i].topic_id = mt->topic_id;
        topics[i].n = mt->n_log_streams;
        topics[i].entries =
            calloc(mt->n_log_streams ? mt->n_log_streams : 1, sizeof(allow_entry_t));
        if (!topics[i].entries) {
            free_topics(topics, i);
            return VARLOG_ERR_NOMEM;
        }
        for (size_t j = 0; j < mt->n_log_streams; j++) {
            const md_log_stream_t *ls =
                md_view_log_stream(view, mt->topic_id, mt->log_stream_ids[j]);
            topics[i].entries[j].log_stream_id = mt->log_stream_ids[j];
            topics[i].entries[j].sealed = ls && ls->sealed;
            topics[i].n_sealed += ls && ls->sealed;
            topics[i].entries[j].healthy = ls && !ls->sealed && ls->primary;
        }
    }
    pthread_mutex_lock(&al->mu);
    for (size_t i = 0; i < view->n_topics; i++) {
        allow_topic_t *old = find_topic(al, topics[i].topic_id);
        if (!old)
            continue;
        topics[i].cursor = old->cursor;
        for (size_t j = 0; j < topics[i].n; j++) {
            allow_entry_t *e = find_entry(old, topics[i].entries[j].log_stream_id);
            /* A new metadata version showing the log stream fit to append ends its denial:
             * the operator unsealed it, or its node is listed again. */
            if (e)
                topics[i].entries[j].confirmed_llsn = e->confirmed_llsn;
            if (e && !topics[i].entries[j].healthy)
                topics[i].entries[j].denied_until_ms = e->denied_until_ms;
        }
    }
    allow_topic_t *old_topics = al->topics;
    size_t old_n = al->n_topics;
    al->topics = topics;
    al->n_topics = view->n_topics;
    pthread_mutex_unlock(&al->mu);
    free_topics(old_topics, old_n);
    return VARLOG_OK;
}

varlog_err_t allowlist_pick(allowlist_t *al, int32_t topic_id, int64_t now_ms, int32_t *out,
                            bool *denied, bool *passed_over, const char **why)
{
    pthread_mutex_lock(&al->mu);
    allow_topic_t *t = find_topic(al, topic_id);
    varlog_err_t err = t ? VARLOG_ERR_NO_LOG_STREAM : VARLOG_ERR_UNKNOWN_TOPIC;
    size_t earliest = SIZE_MAX; /* the unsealed entry whose denial ends first */
    size_t pick = SIZE_MAX;
    bool saw_denied = false;
    for (size_t k = 0; t && k < t->n; k++) {
        size_t idx = (t->cursor + k) % t->n;
        allow_entry_t *e = &t->entries[idx];
        if (e->sealed)
            continue;
        if (e->denied_until_ms > now_ms) {
            saw_denied = true;
            if (earliest == SIZE_MAX || e->denied_until_ms < t->entries[earliest].denied_until_ms)
                earliest = idx;
            continue;
        }
        e->denied_until_ms = 0;
        pick = idx;
        break;
    }
    bool was_denied = pick == SIZE_MAX && earliest != SIZE_MAX;
    if (was_denied)
        pick = earliest;
    if (pick != SIZE_MAX) {
        *out = t->entries[pick].log_stream_id;
        t->cursor = (pick + 1) % t->n;
        err = VARLOG_OK;
    }
    if (denied)
        *denied = was_denied;
    if (passed_over)
        *passed_over = t && (t->n_sealed > 0 || saw_denied);
    if (why)
        *why = !t          ? "not in the metadata"
               : t->n == 0 ? "the topic has no log streams"
                           : "every log stream is sealed";
    pthread_mutex_unlock(&al->mu);
    return err;
}

void allowlist_confirm(allowlist_t *al, int32_t topic_id, int32_t log_stream_id, uint64_t llsn)
{
    pthread_mutex_lock(&al->mu);
    allow_topic_t *t = find_topic(al, topic_id);
    allow_entry_t *e = t ? find_entry(t, log_stream_id) : NULL;
    if (e) {
        e->denied_until_ms = 0;
        if (e->sealed) {
            e->sealed = false;
            t->n_sealed--;
        }
        if (llsn > e->confirmed_llsn)
            e->confirmed_llsn = llsn;
    }
    pthread_mutex_unlock(&al->mu);
}

void allowlist_allow(allowlist_t *al, int32_t topic_id, int32_t log_stream_id)
{
    allowlist_confirm(al, topic_id, log_stream_id, 0); /* LLSN 0 raises nothing */
}

uint64_t allowlist_confirmed(allowlist_t *al, int32_t topic_id, int32_t log_stream_id)
{
    pthread_mutex_lock(&al->mu);
    allow_topic_t *t = find_topic(al, topic_id);
    allow_entry_t *e = t ? find_entry(t, log_stream_id) : NULL;
    uint64_t llsn = e ? e->confirmed_llsn : 0;
    pthread_mutex_unlock(&al->mu);
    return llsn;
}

bool allowlist_passes_over(allowlist_t *al, int32_t topic_id, int64_t now_ms)
{
    pthread_mutex_lock(&al->mu);
    allow_topic_t *t = find_topic(al, topic_id);
    bool over = t && t->n_sealed > 0;
    for (size_t i = 0; t && !over && i < t->n; i++)
        over = t->entries[i].denied_until_ms > now_ms;
    pthread_mutex_unlock(&al->mu);
    return over;
}

bool allowlist_deny(allowlist_t *al, int32_t topic_id, int32_t log_stream_id, int64_t until_ms)
{
    bool fresh = false;
    pthread_mutex_lock(&al->mu);
    allow_topic_t *t = find_topic(al, topic_id);
    allow_entry_t *e = t ? find_entry(t, log_stream_id) : NULL;
    if (e) {
        fresh = e->denied_until_ms == 0;
        if (until_ms > e->denied_until_ms)
            e->denied_until_ms = until_ms;
    }
    pthread_mutex_unlock(&al->mu);
    return fresh;
}

varlog_err_t allowlist_list(allowlist_t *al, int32_t topic_id, int64_t now_ms, int32_t *ids,
                            size_t cap, size_t *n)
{
    pthread_mutex_lock(&al->mu);
    allow_topic_t *t = find_topic(al, topic_id);
    size_t count = 0;
    for (size_t i = 0; t && i < t->n; i++) {
        if (t->entries[i].denied_until_ms > now_ms || t->entries[i].sealed)
            continue;
        if (count < cap)
            ids[count] = t->entries[i].log_stream_id;
        count++;
    }
    pthread_mutex_unlock(&al->mu);
    if (!t)
        return VARLOG_ERR_UNKNOWN_TOPIC; /* *n left alone, as the other list calls do */
    *n = count;
    return VARLOG_OK;
}
