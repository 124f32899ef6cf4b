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
        for (size_t j = 0; j < mt->n_log_streams; j++)
            topics[i].entries[j].log_stream_id = mt->log_stream_ids[j];
    }
    pthread_mutex_lock(&al->mu);
    for (size_t i = 0; i < view->n_topics; i++) {
        allow_topic_t *old = find_topic(al, topics[i].topic_id);
        if (!old)
            continue;
        topics[i].cursor = old->cursor;
        for (size_t j = 0; j < topics[i].n; j++) {
            allow_entry_t *e = find_entry(old, topics[i].entries[j].log_stream_id);
            if (e)
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

varlog_err_t allowlist_pick(allowlist_t *al, int32_t topic_id, int64_t now_ms, int32_t *out)
{
    pthread_mutex_lock(&al->mu);
    allow_topic_t *t = find_topic(al, topic_id);
    varlog_err_t err = t ? VARLOG_ERR_NO_LOG_STREAM : VARLOG_ERR_UNKNOWN_TOPIC;
    for (size_t k = 0; t && k < t->n; k++) {
        allow_entry_t *e = &t->entries[(t->cursor + k) % t->n];
        if (e->denied_until_ms > now_ms)
            continue;
        e->denied_until_ms = 0;
        *out = e->log_stream_id;
        t->cursor = (t->cursor + k + 1) % t->n;
        err = VARLOG_OK;
        break;
    }
    pthread_mutex_unlock(&al->mu);
    return err;
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
        if (t->entries[i].denied_until_ms > now_ms)
            continue;
        if (count < cap)
            ids[count] = t->entries[i].log_stream_id;
        count++;
    }
    pthread_mutex_unlock(&al->mu);
    *n = count;
    return t ? VARLOG_OK : VARLOG_ERR_UNKNOWN_TOPIC;
}
