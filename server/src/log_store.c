/* The in-memory log of the embedded server: see server_internal.h. Every function here runs
 * with store.mu held unless its name says otherwise. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "server_internal.h"

/* Chunks this large are mapped on their own, in multiples of a (transparent) huge page. */
#define HUGE_PAGE (2u << 20)

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

/* A chunk for at least bytes more payload bytes of ls, after last (NULL: the first). */
static store_chunk_t *chunk_new(store_t *st, const store_chunk_t *last, uint64_t bytes)
{
    size_t cap = last ? last->cap : 0;
    cap = cap > STORE_CHUNK_MAX / 2 ? STORE_CHUNK_MAX - sizeof(store_chunk_t) : cap * 2;
    if (bytes > cap) {
        if (bytes > SIZE_MAX - sizeof(store_chunk_t) - HUGE_PAGE)
            return NULL;
        cap = (size_t)bytes;
    }
    size_t size = sizeof(store_chunk_t) + cap;
    store_chunk_t *ch = NULL;
    bool mapped = size >= HUGE_PAGE;
    if (mapped) {
        size = (size + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
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
    if (id <= 0)
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
    if (st->max_ls_id == INT32_MAX)
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

store_entry_t *store_reserve_locked(store_t *st, store_ls_t *ls, size_t n, uint64_t bytes,
                                    uint8_t **dst, varlog_err_t *err)
{
    if (bytes > st->max_bytes || st->bytes > st->max_bytes - bytes) {
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
            size_t cap = ls->cap ? ls->cap : 16;
            while (cap < ls->count + n)
                cap *= 2;
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
        ls->trim_glsn = glsn;
        while (ls->head < ls->count && ls->entries[ls->head].glsn <= glsn) {
            store_entry_t *e = &ls->entries[ls->head++];
            ls->bytes -= e->len;
            st->bytes -= e->len;
            entry_release_locked(st, ls, e);
            ls->trimmed_any = true;
        }
        if (ls->head == ls->count) {
            ls->head = ls->count = 0;
        }
    }
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
