/* The appender's batch slots, the memory of its transmit queue: each slot's region, the free
 * stack, growth while records wait and the trim that gives idle slots back (issue 37). Apart
 * from appender.c, whose intake only takes a free slot or asks for one more, so that how slot
 * memory comes and goes (mapped regions, a stack that keeps idle slots at its bottom, the
 * trim's arithmetic) reads in one place. */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "appender_internal.h"
#include "wire.h"

/* Free slots are a stack: intake takes the one freed last, so a load that needs fewer slots
 * than there are keeps using the same few, and the others stay free long enough to be given
 * back (app_slots_trim), where a queue would cycle through all of them. */
static void free_push_locked(varlog_appender_t *app, app_batch_t *b)
{
    batch_list_t *l = &app->free_slots;
    b->next = l->head;
    l->head = b;
    if (!l->tail)
        l->tail = b;
    l->n++;
}

void app_slot_free_locked(varlog_appender_t *app, app_batch_t *b)
{
    /* Settled, and gRPC let go of the body: nothing reads the referenced bytes any more. */
    for (uint32_t i = 0; b->has_release && i < b->n_calls; i++) {
        if (b->calls[i].release)
            b->calls[i].release(b->calls[i].opaque);
    }
    b->n_refs = 0;
    b->has_release = false;
    b->state = SLOT_FREE;
    b->settle_pending = false;
    b->len = 0;
    b->n_records = 0;
    b->bytes = 0;
    b->n_calls = 0;
    b->attempts = 0;
    b->maybe = false;
    b->err = VARLOG_OK;
    b->errtext[0] = '\0';
    b->freed_ms = wire_now_ms();
    free_push_locked(app, b);
    if (app->slots_grown > 0 &&
        atomic_load_explicit(&app->trim_at_ms, memory_order_relaxed) == INT64_MAX)
        atomic_store_explicit(&app->trim_at_ms, b->freed_ms + APP_SLOT_IDLE_MS,
                              memory_order_relaxed);
    app_wake_producers_locked(app);
}

void app_body_released(void *arg)
{
    app_batch_t *b = arg;
    varlog_appender_t *app = b->app;
    pthread_mutex_lock(&app->mu);
    atomic_store(&b->has_body, false);
    if (b->settle_pending)
        app_slot_free_locked(app, b);
    pthread_mutex_unlock(&app->mu);
    app_unref(app);
}

/* A new slot, not yet the appender's; NULL when memory runs out. Without mu. Its calls,
 * metas, refs and buffer share one region: address space only, pages are touched as records fill
 * them, and giving the slot back returns them all (APP_SLOT_MAP_MIN). */
static app_batch_t *slot_new(varlog_appender_t *app)
{
    size_t calls_len = app->batch_max_records * sizeof(app_call_t);
    size_t metas_len = app->batch_max_records * sizeof(varlog_entry_meta_t);
    size_t refs_len = app->batch_max_records * sizeof(app_ref_t);
    size_t len = calls_len + metas_len + refs_len + app->slot_cap;
    app_batch_t *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    uint8_t *region;
    if (len >= APP_SLOT_MAP_MIN) {
        region = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (region == MAP_FAILED)
            region = NULL;
    } else {
        region = calloc(1, len);
    }
    if (!region) {
        free(b);
        return NULL;
    }
    b->app = app;
    b->region_len = len;
    b->calls = (app_call_t *)(void *)region;
    b->metas = (varlog_entry_meta_t *)(void *)(region + calls_len);
    b->refs = (app_ref_t *)(void *)(region + calls_len + metas_len);
    b->buf = region + calls_len + metas_len + refs_len;
    b->cap = app->slot_cap;
    return b;
}

static void slot_delete(app_batch_t *b)
{
    if (b->region_len >= APP_SLOT_MAP_MIN)
        munmap(b->calls, b->region_len);
    else
        free(b->calls);
    free(b);
}

/* Makes b one of the appender's free slots; false when the slot list cannot grow. With mu. */
static bool slot_adopt_locked(varlog_appender_t *app, app_batch_t *b)
{
    app_batch_t **slots = realloc(app->slots, (app->n_slots + 1) * sizeof(*slots));
    if (!slots)
        return false;
    app->slots = slots;
    app->slots[app->n_slots++] = b;
    app_slot_free_locked(app, b);
    return true;
}

varlog_err_t app_add_slots(varlog_appender_t *app, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        app_batch_t *b = slot_new(app);
        pthread_mutex_lock(&app->mu);
        bool adopted = b && slot_adopt_locked(app, b);
        pthread_mutex_unlock(&app->mu);
        if (!adopted) {
            if (b)
                slot_delete(b);
            return VARLOG_ERR_NOMEM;
        }
    }
    return VARLOG_OK;
}

bool app_slots_grow_locked(varlog_appender_t *app)
{
    if (app->slots_grown + app->slots_growing >= app->slots_grow_max)
        return false;
    app->slots_growing++;
    pthread_mutex_unlock(&app->mu);
    app_batch_t *b = slot_new(app);
    pthread_mutex_lock(&app->mu);
    app->slots_growing--;
    if (!b || !slot_adopt_locked(app, b)) {
        if (b)
            slot_delete(b);
        return false;
    }
    app->slots_grown++;
    return true;
}

/* When the next free slot beyond the initial ones may be idle enough: the bottom of the
 * free stack is the one free the longest. Not sooner than a quarter of the idle time from
 * now, so that a stack emptied and refilled now and then costs a walk of it at most that
 * often. Called with mu held. */
static void trim_schedule_locked(varlog_appender_t *app, int64_t now_ms)
{
    int64_t at = INT64_MAX;
    if (app->slots_grown > 0 && app->free_slots.tail) {
        at = app->free_slots.tail->freed_ms + APP_SLOT_IDLE_MS;
        if (at < now_ms + APP_SLOT_IDLE_MS / 4)
            at = now_ms + APP_SLOT_IDLE_MS / 4;
    }
    atomic_store_explicit(&app->trim_at_ms, at, memory_order_relaxed);
}

void app_slots_trim(varlog_appender_t *app, int64_t now_ms)
{
    if (atomic_load_explicit(&app->trim_at_ms, memory_order_relaxed) > now_ms)
        return;
    batch_list_t gone = {0};
    pthread_mutex_lock(&app->mu);
    /* The stack is ordered by freed_ms, newest on top: the idle slots are its bottom. */
    int64_t cutoff = now_ms - APP_SLOT_IDLE_MS;
    size_t busy = 0;
    app_batch_t **p = &app->free_slots.head, *last = NULL;
    while (*p && (*p)->freed_ms > cutoff) {
        last = *p;
        p = &(*p)->next;
        busy++;
    }
    size_t idle = app->free_slots.n - busy;
    /* Slots taken in the last APP_SLOT_IDLE_MS, and a quarter more: a load that moves
     * between appenders (producers taking turns on the appenders of log streams) peaks a
     * little above its last second now and then, and would otherwise give back and allocate
     * slots again every second. */
    size_t used = app->n_slots - idle, keep = used + used / 4;
    size_t drop = app->n_slots > keep ? app->n_slots - keep : 0;
    if (drop > idle)
        drop = idle;
    if (drop > app->slots_grown)
        drop = app->slots_grown;
    for (size_t skip = idle - drop; skip > 0; skip--) {
        last = *p;
        p = &(*p)->next;
    }
    if (drop > 0) {
        gone.head = *p;
        gone.tail = app->free_slots.tail;
        gone.n = drop;
        *p = NULL;
        app->free_slots.tail = last;
        app->free_slots.n -= drop;
        for (app_batch_t *b = gone.head; b; b = b->next)
            b->dropped = true;
        size_t kept = 0;
        for (size_t i = 0; i < app->n_slots; i++) {
            if (!app->slots[i]->dropped)
                app->slots[kept++] = app->slots[i];
        }
        app->n_slots = kept;
        app->slots_grown -= drop;
        app->stats.batch_slots_released += drop;
    }
    trim_schedule_locked(app, now_ms);
    pthread_mutex_unlock(&app->mu);
    app_batch_t *b;
    while ((b = blist_pop(&gone)))
        slot_delete(b);
}

void app_slots_free(varlog_appender_t *app)
{
    for (size_t i = 0; i < app->n_slots; i++)
        slot_delete(app->slots[i]);
    free(app->slots);
}
