/* The in-memory log of the embedded server: see server_internal.h. Every function here runs
 * with store.mu held unless its name says otherwise. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "server_internal.h"

/* Chunks this large are mapped on their own, in multiples of a (transparent) huge page. */
#define HUGE_PAGE (2u << 20)
/* A chunk takes at most this share of the bound, so that trimming frees memory in steps
 * small against it, and the part of the log a step drops stays small. */
#define CHUNKS_PER_BOUND 16
/* ... but never less than this (a tiny bound for tests of a full node). */
#define CHUNK_CAP_MIN 256
/* A retention pass trims down to this share of the bound below it, so that passes (and
 * their log lines) come once per max_bytes / RETENTION_SLACK appended, not per append. */
#define RETENTION_SLACK 8
#define ENTRIES_MIN 16

static int64_t unix_now(void)
{
    return (int64_t)time(NULL);
}

static store_ls_t *ls_new(int32_t topic_id, int32_t ls_id)
{
    store_ls_t *ls = calloc(1, sizeof(*ls));
    if (!ls)
        return NULL;
    ls->topic_id = topic_id;
    ls->ls_id = ls_id;
    ls->next_llsn = 1;
    ls->created_unix = unix_now();
    return ls;
}

static void chunk_free(store_t *st, store_chunk_t *ch)
{
    st->resident_bytes -= ch->size;
    if (ch->mapped)
        munmap(ch, ch->size);
    else
        free(ch);
}

/* The size (header included) of the chunk chunk_new takes for bytes more payload bytes
 * after last (NULL: the first); false when it cannot be represented. */
static bool chunk_size_for(const store_t *st, const store_chunk_t *last, uint64_t bytes,
                           size_t *size_out)
{
    size_t cap = last ? last->cap : 0;
    cap = cap > st->chunk_cap_max / 2 ? st->chunk_cap_max : cap * 2;
    if (bytes > cap) {
        if (bytes > SIZE_MAX - sizeof(store_chunk_t) - HUGE_PAGE)
            return false;
        cap = (size_t)bytes;
    }
    size_t size = sizeof(store_chunk_t) + cap;
    if (size >= HUGE_PAGE)
        size = (size + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    *size_out = size;
    return true;
}

/* A chunk for at least bytes more payload bytes of ls, after last (NULL: the first). */
static store_chunk_t *chunk_new(store_t *st, const store_chunk_t *last, uint64_t bytes)
{
    size_t size = 0;
    if (!chunk_size_for(st, last, bytes, &size))
        return NULL;
    store_chunk_t *ch = NULL;
    bool mapped = size >= HUGE_PAGE;
    if (mapped) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        /* Best effort: without transparent huge pages it is an ordinary mapping. */
        (void)madvise(p, size, MADV_HUGEPAGE);
        ch = p;
    } else if (!(ch = malloc(size))) {
        return NULL;
    }
    ch->live = 0;
    ch->size = size;
    ch->cap = size - sizeof(*ch);
    ch->used = 0;
    ch->seq = st->version;
    ch->mapped = mapped;
    st->resident_bytes += size;
    return ch;
}

/* Drops e's hold on its chunk, freeing the chunk with its last entry unless it is still
 * ls's current one. */
static void entry_release_locked(store_t *st, store_ls_t *ls, store_entry_t *e)
{
    store_chunk_t *ch = e->chunk;
    e->chunk = NULL;
    e->data = NULL;
    if (ch && --ch->live == 0 && ch != ls->chunk)
        chunk_free(st, ch);
}

static void ls_free(store_t *st, store_ls_t *ls)
{
    for (size_t i = ls->head; i < ls->count; i++)
        entry_release_locked(st, ls, &ls->entries[i]);
    if (ls->chunk)
        chunk_free(st, ls->chunk);
    st->resident_bytes -= ls->cap * sizeof(*ls->entries);
    free(ls->entries);
    free(ls);
}

varlog_err_t store_add_topic_locked(store_t *st, int32_t *topic_id)
{
    int32_t id = st->n_topics ? st->topics[st->n_topics - 1]->id + 1 : 1;
    if (id <= 0 || st->n_topics >= VARLOG_SERVER_MAX_TOPICS)
        return VARLOG_ERR_INVALID_ARG;
    store_topic_t **topics = realloc(st->topics, (st->n_topics + 1) * sizeof(*topics));
    if (!topics)
        return VARLOG_ERR_NOMEM;
    st->topics = topics;
    store_topic_t *t = calloc(1, sizeof(*t));
    if (!t)
        return VARLOG_ERR_NOMEM;
    t->id = id;
    t->next_glsn = 1;
    st->topics[st->n_topics++] = t;
    st->applied_index++;
    if (topic_id)
        *topic_id = id;
    return VARLOG_OK;
}

varlog_err_t store_add_ls_locked(store_t *st, int32_t topic_id, int32_t *ls_id)
{
    store_topic_t *t = store_topic_locked(st, topic_id);
    if (!t)
        return VARLOG_ERR_RPC_NOT_FOUND;
    if (st->max_ls_id >= VARLOG_SERVER_MAX_LOG_STREAMS) /* ids are never reused */
        return VARLOG_ERR_INVALID_ARG;
    store_ls_t **lss = realloc(t->lss, (t->n_lss + 1) * sizeof(*lss));
    if (!lss)
        return VARLOG_ERR_NOMEM;
    t->lss = lss;
    store_ls_t *ls = ls_new(topic_id, st->max_ls_id + 1);
    if (!ls)
        return VARLOG_ERR_NOMEM;
    st->max_ls_id++;
    t->lss[t->n_lss++] = ls;
    st->applied_index++;
    if (ls_id)
        *ls_id = ls->ls_id;
    return VARLOG_OK;
}

varlog_err_t store_init(store_t *st, int32_t topics, int32_t ls_per_topic, uint64_t max_bytes)
{
    memset(st, 0, sizeof(*st));
    if (pthread_mutex_init(&st->mu, NULL) != 0)
        return VARLOG_ERR_INTERNAL;
    st->max_bytes = max_bytes;
    uint64_t chunk_max = max_bytes / CHUNKS_PER_BOUND;
    if (chunk_max > STORE_CHUNK_MAX)
        chunk_max = STORE_CHUNK_MAX;
    st->chunk_cap_max = chunk_max > sizeof(store_chunk_t) + CHUNK_CAP_MIN
                            ? (size_t)chunk_max - sizeof(store_chunk_t)
                            : CHUNK_CAP_MIN;
    varlog_err_t err = VARLOG_OK;
    for (int32_t i = 0; i < topics && err == VARLOG_OK; i++) {
        int32_t tid = 0;
        err = store_add_topic_locked(st, &tid);
        for (int32_t j = 0; j < ls_per_topic && err == VARLOG_OK; j++)
            err = store_add_ls_locked(st, tid, NULL);
    }
    /* A fresh cluster has applied its registrations; 1 is the floor Go clients accept. */
    if (st->applied_index == 0)
        st->applied_index = 1;
    if (err != VARLOG_OK)
        store_destroy(st);
    return err;
}

void store_destroy(store_t *st)
{
    for (size_t i = 0; i < st->n_topics; i++) {
        store_topic_t *t = st->topics[i];
        for (size_t j = 0; j < t->n_lss; j++)
            ls_free(st, t->lss[j]);
        free(t->lss);
        free(t);
    }
    free(st->topics);
    st->topics = NULL;
    st->n_topics = 0;
    pthread_mutex_destroy(&st->mu);
}

store_topic_t *store_topic_locked(store_t *st, int32_t topic_id)
{
    size_t lo = 0, hi = st->n_topics;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (st->topics[mid]->id < topic_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < st->n_topics && st->topics[lo]->id == topic_id ? st->topics[lo] : NULL;
}

store_ls_t *store_ls_locked(store_t *st, int32_t topic_id, int32_t ls_id)
{
    store_topic_t *t = store_topic_locked(st, topic_id);
    if (!t)
        return NULL;
    for (size_t i = 0; i < t->n_lss; i++) {
        if (t->lss[i]->ls_id == ls_id)
            return t->lss[i];
    }
    return NULL;
}

void store_set_sealed_locked(store_t *st, store_ls_t *ls, bool sealed)
{
    if (ls->sealed == sealed)
        return;
    ls->sealed = sealed;
    ls->seals += sealed;
    st->applied_index++;
}

/* A waiter is woken when its own log stream got entries, or, for a GLSN range, when the
 * topic's high watermark reached end - 1 (the range is then decided). */
static void wake_waiters_locked(store_t *st, store_topic_t *t, int32_t ls_id)
{
    uint64_t hwm = t->next_glsn - 1;
    for (sub_state_t *s = t->waiters; s;) {
        sub_state_t *next = s->wnext;
        if (s->ls_id == ls_id || (!s->by_llsn && hwm >= s->end - 1)) {
            store_unwait_locked(st, s);
            rpc_server_call_wake(s->call);
        }
        s = next;
    }
}

/* The entry capacity ls needs for n more entries (its trimmed prefix reclaimed first). */
static size_t entries_cap_for(const store_ls_t *ls, size_t n)
{
    size_t live = ls->count - ls->head;
    if (live + n <= ls->cap)
        return ls->cap;
    size_t cap = ls->cap ? ls->cap : ENTRIES_MIN;
    while (cap < live + n)
        cap *= 2;
    return cap;
}

/* ---- retention ------------------------------------------------------------------------ */

/* When an append would take resident_bytes past max_bytes, the oldest entries of the whole
 * store go first: the oldest payload chunk of any log stream (chunks remember when they were
 * taken) is dropped by trimming its topic up to the chunk's last GLSN, exactly as
 * TrimDeprecated would (sealed log streams included), which also drops that topic's older
 * entries of other log streams (within a topic, GLSN order is commit order). Chunk by chunk
 * until the batch fits with RETENTION_SLACK to spare, then one log line for the pass. */

typedef struct retention_pass {
    uint64_t entries, bytes; /* trimmed */
    size_t topics;           /* topics trimmed (counted once per change of topic) */
    int32_t last_topic;
    uint64_t last_glsn;
} retention_pass_t;

/* Deletes ls's entries with GLSN <= glsn and moves its trim point there. */
static void ls_trim_locked(store_t *st, store_ls_t *ls, uint64_t glsn, retention_pass_t *pass)
{
    ls->trim_glsn = glsn;
    while (ls->head < ls->count && ls->entries[ls->head].glsn <= glsn) {
        store_entry_t *e = &ls->entries[ls->head++];
        ls->bytes -= e->len;
        st->bytes -= e->len;
        ls->trimmed_last_glsn = e->glsn;
        if (pass) {
            pass->entries++;
            pass->bytes += e->len;
        }
        entry_release_locked(st, ls, e);
        ls->trimmed_any = true;
    }
    if (ls->head == ls->count) {
        ls->head = ls->count = 0;
    }
}

/* After a retention trim: an emptied log stream gives its current chunk back, and an entry
 * array at most a quarter full halves (to twice its live entries at least), so that memory
 * one log stream took in a burst goes back to the bound for the others. */
static void ls_shrink_locked(store_t *st, store_ls_t *ls)
{
    if (ls->head == ls->count && ls->chunk && ls->chunk->live == 0) {
        chunk_free(st, ls->chunk);
        ls->chunk = NULL;
    }
    size_t live = ls->count - ls->head;
    if (ls->cap <= ENTRIES_MIN || live * 4 > ls->cap)
        return;
    size_t cap = ls->cap;
    while (cap > ENTRIES_MIN && live * 4 <= cap)
        cap /= 2;
    memmove(ls->entries, ls->entries + ls->head, live * sizeof(*ls->entries));
    ls->count = live;
    ls->head = 0;
    store_entry_t *e = realloc(ls->entries, cap * sizeof(*e));
    if (!e)
        return; /* keeps the larger array */
    st->resident_bytes -= (ls->cap - cap) * sizeof(*e);
    ls->entries = e;
    ls->cap = cap;
}

/* One step: drops the oldest chunk's entries. False when nothing is left to trim. */
static bool retention_step_locked(store_t *st, retention_pass_t *pass)
{
    store_topic_t *best_t = NULL;
    store_ls_t *best = NULL;
    uint64_t best_seq = 0;
    for (size_t i = 0; i < st->n_topics; i++) {
        store_topic_t *t = st->topics[i];
        for (size_t j = 0; j < t->n_lss; j++) {
            store_ls_t *ls = t->lss[j];
            if (ls->head == ls->count) {
                /* Emptied by TrimDeprecated, which keeps the current chunk. */
                if (ls->chunk && ls->chunk->live == 0) {
                    ls_shrink_locked(st, ls);
                    return true;
                }
                continue;
            }
            /* Entries without payload before any chunk count as the oldest. */
            const store_chunk_t *ch = ls->entries[ls->head].chunk;
            uint64_t seq = ch ? ch->seq : 0;
            if (!best || seq < best_seq) {
                best_t = t;
                best = ls;
                best_seq = seq;
            }
        }
    }
    if (!best)
        return false;
    const store_chunk_t *ch = best->entries[best->head].chunk;
    size_t end = best->head;
    while (end < best->count && best->entries[end].chunk == ch)
        end++;
    uint64_t glsn = best->entries[end - 1].glsn;
    for (size_t j = 0; j < best_t->n_lss; j++) {
        store_ls_t *ls = best_t->lss[j];
        if (ls->trim_glsn < glsn) {
            ls_trim_locked(st, ls, glsn, pass);
            ls_shrink_locked(st, ls);
        }
    }
    if (pass->topics == 0 || pass->last_topic != best_t->id)
        pass->topics++;
    pass->last_topic = best_t->id;
    pass->last_glsn = glsn;
    return true;
}

/* What reserving n entries and bytes payload bytes for ls would add to and take from
 * resident_bytes; false when it cannot be represented. */
static bool reserve_cost_locked(const store_t *st, const store_ls_t *ls, size_t n, uint64_t bytes,
                                uint64_t *add, uint64_t *sub)
{
    size_t cap = entries_cap_for(ls, n);
    if (cap > SIZE_MAX / sizeof(store_entry_t))
        return false;
    *add = (cap - ls->cap) * sizeof(store_entry_t);
    *sub = 0;
    const store_chunk_t *ch = ls->chunk;
    if (bytes > 0 && (!ch || ch->cap - ch->used < bytes)) {
        size_t size = 0;
        if (!chunk_size_for(st, ch, bytes, &size))
            return false;
        *add += size;
        if (ch && ch->live == 0)
            *sub = ch->size;
    }
    return true;
}

/* Trims until the batch fits; false when it cannot fit even into an emptied store. */
static bool retention_make_room_locked(store_t *st, store_ls_t *ls, size_t n, uint64_t bytes)
{
    uint64_t add = 0, sub = 0;
    if (!reserve_cost_locked(st, ls, n, bytes, &add, &sub))
        return false;
    if (st->resident_bytes + add <= st->max_bytes + sub)
        return true;
    /* A batch too large for an empty store is refused without trimming anything for it. */
    size_t alone = 0;
    if (n > st->max_bytes / sizeof(store_entry_t) ||
        (bytes > 0 && !chunk_size_for(st, NULL, bytes, &alone)) ||
        alone + n * sizeof(store_entry_t) > st->max_bytes)
        return false;
    uint64_t resident0 = st->resident_bytes;
    uint64_t low = st->max_bytes - st->max_bytes / RETENTION_SLACK;
    retention_pass_t pass = {0, 0, 0, 0, 0};
    while (st->resident_bytes + add > low + sub && retention_step_locked(st, &pass)) {
        if (!reserve_cost_locked(st, ls, n, bytes, &add, &sub))
            return false;
    }
    st->retention_passes++;
    st->retention_entries += pass.entries;
    if (st->log_file) {
        fprintf(st->log_file,
                "varlog-server: retention: trimmed %" PRIu64 " entries (%" PRIu64
                " payload bytes) of %zu topic(s), topic %" PRId32 " up to GLSN %" PRIu64
                "; resident %" PRIu64 " -> %" PRIu64 " bytes, bound %" PRIu64 "\n",
                pass.entries, pass.bytes, pass.topics, pass.last_topic, pass.last_glsn, resident0,
                st->resident_bytes, st->max_bytes);
        fflush(st->log_file);
    }
    return st->resident_bytes + add <= st->max_bytes + sub;
}

/* ---- storing ---------------------------------------------------------------------------- */

store_entry_t *store_reserve_locked(store_t *st, store_ls_t *ls, size_t n, uint64_t bytes,
                                    uint8_t **dst, varlog_err_t *err)
{
    bool full = st->refuse_when_full ? bytes > st->max_bytes || st->bytes > st->max_bytes - bytes
                                     : !retention_make_room_locked(st, ls, n, bytes);
    if (full) {
        *err = VARLOG_ERR_RPC_RESOURCE_EXHAUSTED;
        return NULL;
    }
    if (ls->count + n > ls->cap) {
        /* Reclaim the trimmed prefix before growing. */
        if (ls->head > 0) {
            memmove(ls->entries, ls->entries + ls->head,
                    (ls->count - ls->head) * sizeof(*ls->entries));
            ls->count -= ls->head;
            ls->head = 0;
        }
        if (ls->count + n > ls->cap) {
            size_t cap = entries_cap_for(ls, n);
            store_entry_t *e = realloc(ls->entries, cap * sizeof(*e));
            if (!e) {
                *err = VARLOG_ERR_NOMEM;
                return NULL;
            }
            st->resident_bytes += (cap - ls->cap) * sizeof(*e);
            ls->entries = e;
            ls->cap = cap;
        }
    }
    store_chunk_t *ch = ls->chunk;
    if (bytes > 0 && (!ch || ch->cap - ch->used < bytes)) {
        store_chunk_t *fresh = chunk_new(st, ch, bytes);
        if (!fresh) {
            *err = VARLOG_ERR_NOMEM;
            return NULL;
        }
        /* The rest of the old chunk stays unused. */
        ls->chunk = fresh;
        if (ch && ch->live == 0)
            chunk_free(st, ch);
        ch = fresh;
    }
    *dst = ch ? ch->data + ch->used : NULL;
    *err = VARLOG_OK;
    return &ls->entries[ls->count];
}

void store_commit_locked(store_t *st, store_topic_t *t, store_ls_t *ls, size_t n, uint64_t bytes,
                         uint64_t *glsn0, uint64_t *llsn0)
{
    *glsn0 = t->next_glsn;
    *llsn0 = ls->next_llsn;
    store_entry_t *e = &ls->entries[ls->count];
    for (size_t i = 0; i < n; i++) {
        e[i].glsn = t->next_glsn++;
        e[i].llsn = ls->next_llsn++;
        e[i].chunk = ls->chunk;
    }
    if (ls->chunk) {
        ls->chunk->live += n;
        ls->chunk->used += (size_t)bytes;
    }
    ls->count += n;
    ls->bytes += bytes;
    st->bytes += bytes;
    st->version++;
    wake_waiters_locked(st, t, ls->ls_id);
}

uint64_t store_resident_bytes_locked(const store_t *st)
{
    return st->resident_bytes;
}

void store_trim_locked(store_t *st, store_topic_t *t, uint64_t glsn)
{
    /* A replica refuses a trim beyond its high watermark ("not appended") or while sealed;
     * the RPC ignores per-replica errors. */
    if (glsn == 0 || glsn > t->next_glsn - 1)
        return;
    for (size_t i = 0; i < t->n_lss; i++) {
        store_ls_t *ls = t->lss[i];
        if (ls->sealed || ls->trim_glsn >= glsn)
            continue;
        ls_trim_locked(st, ls, glsn, NULL);
    }
}

bool store_sub_trimmed_locked(const store_ls_t *ls, const sub_state_t *s)
{
    if (!ls->trimmed_any)
        return false;
    if (!s->by_llsn)
        return s->cursor <= ls->trimmed_last_glsn;
    uint64_t first = ls->head < ls->count ? ls->entries[ls->head].llsn : ls->next_llsn;
    return s->cursor < first;
}

size_t store_find_glsn_locked(const store_ls_t *ls, uint64_t g)
{
    size_t lo = ls->head, hi = ls->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ls->entries[mid].glsn < g)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

size_t store_find_llsn_locked(const store_ls_t *ls, uint64_t l)
{
    /* LLSNs are dense, so the position is computed rather than searched. */
    if (ls->head == ls->count)
        return ls->count;
    uint64_t first = ls->entries[ls->head].llsn;
    if (l <= first)
        return ls->head;
    uint64_t off = l - first;
    return off >= ls->count - ls->head ? ls->count : ls->head + (size_t)off;
}

void store_wait_locked(store_t *st, store_topic_t *t, sub_state_t *s)
{
    (void)st;
    if (s->waiting)
        return;
    s->waiting = true;
    s->wprev = NULL;
    s->wnext = t->waiters;
    if (t->waiters)
        t->waiters->wprev = s;
    t->waiters = s;
}

void store_unwait_locked(store_t *st, sub_state_t *s)
{
    if (!s->waiting)
        return;
    store_topic_t *t = store_topic_locked(st, s->topic_id);
    if (s->wprev)
        s->wprev->wnext = s->wnext;
    else if (t)
        t->waiters = s->wnext;
    if (s->wnext)
        s->wnext->wprev = s->wprev;
    s->wprev = s->wnext = NULL;
    s->waiting = false;
}
