/* Consumer lag for varlog_stats_prometheus: per open subscription and log stream, the entries
 * committed after the last one it delivered, and how long the oldest of them has waited.
 *
 * The subscription knows what it delivered (each log stream's LLSN, stored by its consumer
 * as it hands an entry out); the log stream's committed end is only known by asking its
 * replicas, so a scrape asks them (pt_tails), bounded by stats.lag.timeout.ms, and nothing is
 * asked while nobody scrapes. Entries carry no time, so the seconds come from what the scrapes
 * saw: each log stream keeps a few (time, committed end) samples, and the oldest entry not
 * delivered has been committed at least since the first sample that showed the end past it.
 * That is a lower bound, exact to a scrape's interval while the samples reach back far
 * enough; the oldest sample is never dropped, so the bound keeps growing for a consumer that
 * does not move. */
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "stats_internal.h"
#include "subscribe_internal.h"
#include "wire.h"

/* What a scrape copies of one (subscription, log stream), under the locks. */
typedef struct lag_pos {
    uint64_t sub_id;
    int32_t topic, ls;
    bool by_llsn;         /* varlog_subscribe_to: begin and end are LLSNs */
    uint64_t begin, end;  /* the subscription's range */
    uint64_t base_plus_1; /* ls->pub_llsn */
    bool finished;        /* the range is complete in this log stream */
    size_t tail;          /* index of its log stream in the scrape's tails */
} lag_pos_t;

void stats_lag_init(stats_lag_t *l)
{
    memset(l, 0, sizeof(*l));
    pthread_mutex_init(&l->mu, NULL);
}

void stats_lag_fini(stats_lag_t *l)
{
    free(l->tails);
    l->tails = NULL;
    l->n = l->cap = 0;
    pthread_mutex_destroy(&l->mu);
}

/* Copies every open subscription's positions (c->mu, then each one's mu: the log stream
 * array grows under it). false when out of memory. */
static bool collect_positions(varlog_client_t *c, lag_pos_t **out, size_t *n_out)
{
    lag_pos_t *pos = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    pthread_mutex_lock(&c->mu);
    for (varlog_subscription_t *sub = c->subscriptions; sub && ok; sub = sub->next_open) {
        pthread_mutex_lock(&sub->mu);
        for (size_t i = 0; i < sub->n_ls; i++) {
            if (n == cap) {
                size_t grown_cap = cap ? cap * 2 : 16;
                lag_pos_t *grown = realloc(pos, grown_cap * sizeof(*grown));
                if (!grown) {
                    ok = false;
                    break;
                }
                pos = grown;
                cap = grown_cap;
            }
            const sub_ls_t *ls = sub->ls[i];
            pos[n++] = (lag_pos_t){
                .sub_id = sub->id,
                .topic = sub->topic_id,
                .ls = ls->log_stream_id,
                .by_llsn = sub->order == SUB_BY_LLSN,
                .begin = sub->begin,
                .end = sub->end,
                .base_plus_1 = atomic_load_explicit(&ls->pub_llsn, memory_order_relaxed),
                .finished = atomic_load_explicit(&ls->pub_finished, memory_order_relaxed)};
        }
        pthread_mutex_unlock(&sub->mu);
    }
    pthread_mutex_unlock(&c->mu);
    if (!ok) {
        free(pos);
        return false;
    }
    *out = pos;
    *n_out = n;
    return true;
}

/* The distinct log streams of pos, each pos pointing at its own. */
static pt_tail_t *distinct_tails(lag_pos_t *pos, size_t n, size_t *n_tails)
{
    pt_tail_t *tails = calloc(n ? n : 1, sizeof(*tails));
    if (!tails)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < k && !(tails[j].topic_id == pos[i].topic && tails[j].log_stream_id == pos[i].ls))
            j++;
        if (j == k)
            tails[k++] = (pt_tail_t){.topic_id = pos[i].topic, .log_stream_id = pos[i].ls};
        pos[i].tail = j;
    }
    *n_tails = k;
    return tails;
}

static stats_lag_tail_t *find_tail(stats_lag_t *l, int32_t topic, int32_t ls)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->tails[i].topic == topic && l->tails[i].ls == ls)
            return &l->tails[i];
    return NULL;
}

/* Adds a sample of t's committed end, when it moved. A full history loses the sample whose
 * neighbours are closest in time (never the oldest nor the newest): the history thins out
 * evenly instead of forgetting how long ago it began. */
static void add_sample(stats_lag_tail_t *t, int64_t now_ms, uint64_t llsn)
{
    if (t->n > 0 && llsn <= t->s[t->n - 1].llsn)
        return; /* unmoved, or an older answer of a concurrent scrape */
    if (t->n == STATS_LAG_SAMPLES) {
        size_t drop = 1;
        for (size_t i = 2; i + 1 < t->n; i++)
            if (t->s[i + 1].ms - t->s[i - 1].ms < t->s[drop + 1].ms - t->s[drop - 1].ms)
                drop = i;
        memmove(&t->s[drop], &t->s[drop + 1], (t->n - drop - 1) * sizeof(t->s[0]));
        t->n--;
    }
    t->s[t->n++] = (stats_lag_sample_t){.ms = now_ms, .llsn = llsn};
}

/* Records this scrape's answers and forgets log streams no subscription reads any more. */
static void update_history(stats_lag_t *l, const pt_tail_t *tails, size_t n, int64_t now_ms)
{
    l->scrapes++;
    for (size_t i = 0; i < n; i++) {
        stats_lag_tail_t *t = find_tail(l, tails[i].topic_id, tails[i].log_stream_id);
        if (!t) {
            if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 16;
                stats_lag_tail_t *grown = realloc(l->tails, cap * sizeof(*grown));
                if (!grown)
                    continue; /* no seconds for it this time */
                l->tails = grown;
                l->cap = cap;
            }
            t = &l->tails[l->n++];
            *t = (stats_lag_tail_t){.topic = tails[i].topic_id, .ls = tails[i].log_stream_id};
        }
        t->scrape = l->scrapes;
        if (tails[i].ok)
            add_sample(t, now_ms, tails[i].llsn);
    }
    size_t kept = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->tails[i].scrape == l->scrapes)
            l->tails[kept++] = l->tails[i];
    l->n = kept;
}

/* How long the entry after base has been committed, as far as the samples tell. */
static double waited_s(const stats_lag_tail_t *t, uint64_t base, int64_t now_ms)
{
    for (size_t i = 0; t && i < t->n; i++)
        if (t->s[i].llsn > base)
            return now_ms > t->s[i].ms ? (double)(now_ms - t->s[i].ms) / 1000.0 : 0.0;
    return 0.0;
}

/* The entries of one position behind end; false when it cannot be known yet. */
static bool entries_behind(const lag_pos_t *p, const pt_tail_t *tail, uint64_t *entries,
                           uint64_t *base)
{
    if (p->finished) {
        *entries = 0;
        *base = tail->llsn;
        return true;
    }
    uint64_t end = tail->llsn;
    if (p->by_llsn && p->end > 0 && end >= p->end)
        end = p->end - 1; /* the range stops before */
    if (p->base_plus_1 > 0) {
        *base = p->base_plus_1 - 1;
    } else if (p->by_llsn) {
        *base = p->begin > 0 ? p->begin - 1 : 0; /* it reads from begin on */
    } else if (tail->glsn < p->begin) {
        *base = tail->llsn; /* nothing of the range is committed here yet */
    } else {
        return false; /* which LLSN the range begins at is not known before its first entry */
    }
    *entries = end > *base ? end - *base : 0;
    return true;
}

varlog_err_t stats_lag_collect(varlog_client_t *c, stats_lag_row_t **rows, size_t *n_rows)
{
    *rows = NULL;
    *n_rows = 0;
    int64_t timeout_ms = c->conf->stats_lag_timeout_ms;
    if (timeout_ms <= 0)
        return VARLOG_OK;
    lag_pos_t *pos;
    size_t n_pos;
    if (!collect_positions(c, &pos, &n_pos))
        return VARLOG_ERR_NOMEM;
    if (n_pos == 0) {
        free(pos);
        return VARLOG_OK;
    }
    size_t n_tails = 0;
    pt_tail_t *tails = distinct_tails(pos, n_pos, &n_tails);
    stats_lag_row_t *out = tails ? calloc(n_pos, sizeof(*out)) : NULL;
    if (!out) {
        free(tails);
        free(pos);
        return VARLOG_ERR_NOMEM;
    }
    pt_tails(c, tails, n_tails, wire_deadline_ms(timeout_ms));
    int64_t now = wire_now_ms();
    stats_lag_t *l = &c->cstats.lag;
    pthread_mutex_lock(&l->mu);
    update_history(l, tails, n_tails, now);
    size_t n = 0;
    for (size_t i = 0; i < n_pos; i++) {
        const pt_tail_t *tail = &tails[pos[i].tail];
        uint64_t entries, base;
        if (!tail->ok || !entries_behind(&pos[i], tail, &entries, &base))
            continue;
        out[n++] = (stats_lag_row_t){
            .sub_id = pos[i].sub_id,
            .topic = pos[i].topic,
            .ls = pos[i].ls,
            .entries = entries,
            .seconds = entries ? waited_s(find_tail(l, pos[i].topic, pos[i].ls), base, now) : 0.0};
    }
    pthread_mutex_unlock(&l->mu);
    free(tails);
    free(pos);
    *rows = out;
    *n_rows = n;
    return VARLOG_OK;
}
