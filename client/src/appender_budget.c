/* The client-wide bound on what all of a client's pipelined appenders hold
 * (appender.client.queue.max.records and .bytes; varlog/appender.h, "Memory"): reserved at
 * intake (appender.c), given back once a batch's callbacks returned (appender_settle.c), and
 * the producers that wait for it. Apart from the intake so that a test can hold a producer
 * between its look at the bound and its sleep (--wrap=app_budget_wait_locked). */
#include <stdlib.h>

#include "appender_internal.h"
#include "wire.h"

void app_budget_init(varlog_client_t *c)
{
    const varlog_conf_t *conf = c->conf;
    struct app_budget *bg = &c->budget;
    /* Never below one appender's own bound: an appender alone meets that first, as it did
     * before there was a client-wide one. */
    uint64_t r = (uint64_t)conf->appender_client_queue_max_records;
    uint64_t b = (uint64_t)conf->appender_client_queue_max_bytes;
    if (r > 0 && r < (uint64_t)conf->appender_queue_max_records)
        r = (uint64_t)conf->appender_queue_max_records;
    if (b > 0 && b < (uint64_t)conf->appender_queue_max_bytes)
        b = (uint64_t)conf->appender_queue_max_bytes;
    bg->max_records = r;
    bg->max_bytes = b;
    atomic_init(&bg->records, 0);
    atomic_init(&bg->bytes, 0);
    atomic_init(&bg->waiters, 0);
    pthread_mutex_init(&bg->mu, NULL);
    wire_cond_init(&bg->room);
}

void app_budget_fini(varlog_client_t *c)
{
    pthread_cond_destroy(&c->budget.room);
    pthread_mutex_destroy(&c->budget.mu);
}

static bool budget_bounded(const struct app_budget *bg)
{
    return bg->max_records > 0 || bg->max_bytes > 0;
}

/* Whether add more fit beside cur under max (0: no bound). Whatever the size, a call fits
 * when nothing is held, as with an appender's own bounds. */
static bool budget_room(uint64_t cur, uint64_t add, uint64_t max)
{
    return max == 0 || cur == 0 || cur + add <= max;
}

bool app_budget_fits(varlog_client_t *c, uint64_t n, uint64_t bytes)
{
    struct app_budget *bg = &c->budget;
    return !budget_bounded(bg) || (budget_room(atomic_load(&bg->records), n, bg->max_records) &&
                                   budget_room(atomic_load(&bg->bytes), bytes, bg->max_bytes));
}

static bool budget_take_one(atomic_uint_fast64_t *v, uint64_t add, uint64_t max)
{
    uint64_t cur = atomic_load_explicit(v, memory_order_relaxed);
    do {
        if (!budget_room(cur, add, max))
            return false;
    } while (!atomic_compare_exchange_weak(v, &cur, cur + add));
    return true;
}

/* Reserves n records of bytes of the client-wide bound; false when they do not fit. Other
 * appenders reserve concurrently, under their own mu: hence the compare-and-swap. */
bool app_budget_take(varlog_client_t *c, uint64_t n, uint64_t bytes)
{
    struct app_budget *bg = &c->budget;
    if (!budget_bounded(bg))
        return true;
    if (!budget_take_one(&bg->records, n, bg->max_records))
        return false;
    if (budget_take_one(&bg->bytes, bytes, bg->max_bytes))
        return true;
    app_budget_release(c, n, 0);
    return false;
}

void app_budget_release(varlog_client_t *c, uint64_t records, uint64_t bytes)
{
    struct app_budget *bg = &c->budget;
    if (!budget_bounded(bg) || (records == 0 && bytes == 0))
        return;
    uint64_t r = atomic_fetch_sub(&bg->records, records) - records;
    uint64_t b = atomic_fetch_sub(&bg->bytes, bytes) - bytes;
    /* Sequentially consistent, after the subtractions: a waiter counts itself (under mu)
     * before it looks at the counters, so either it sees this room or this sees it and
     * broadcasts under mu, which it holds until it sleeps. */
    if (atomic_load(&bg->waiters) == 0)
        return;
    /* A quarter of each bound, as app_wake_producers_locked and for the same reason. */
    bool wake = r == 0 || ((bg->max_records == 0 || r + bg->max_records / 4 <= bg->max_records) &&
                           (bg->max_bytes == 0 || b + bg->max_bytes / 4 <= bg->max_bytes));
    if (!wake)
        return;
    pthread_mutex_lock(&bg->mu);
    pthread_cond_broadcast(&bg->room);
    pthread_mutex_unlock(&bg->mu);
}

/* Sleeps until a settle of any of the client's appenders may have made room for n records of
 * bytes, until app closes, or until *until (NULL: no limit); false on the timeout. Called
 * with app's mu held, which it lets go while it sleeps. The closing flag is set under app's
 * mu, and this holds the budget's mu before it lets app's go: a close's wake-up (flush_locked)
 * cannot slip in between its look and its sleep. */
bool app_budget_wait_locked(varlog_appender_t *app, uint64_t n, uint64_t bytes,
                            const struct timespec *until)
{
    struct app_budget *bg = &app->c->budget;
    pthread_mutex_lock(&bg->mu);
    atomic_fetch_add(&bg->waiters, 1);
    int rc = 0;
    if (!app_budget_fits(app->c, n, bytes)) {
        pthread_mutex_unlock(&app->mu);
        rc = until ? pthread_cond_timedwait(&bg->room, &bg->mu, until)
                   : pthread_cond_wait(&bg->room, &bg->mu);
        atomic_fetch_sub(&bg->waiters, 1);
        pthread_mutex_unlock(&bg->mu);
        pthread_mutex_lock(&app->mu);
    } else {
        atomic_fetch_sub(&bg->waiters, 1);
        pthread_mutex_unlock(&bg->mu);
    }
    return rc == 0;
}

/* The appender closes: producers waiting for the client-wide bound look at it again. Called
 * with mu held, after closing was set. */
void app_budget_wake_closing_locked(varlog_appender_t *app)
{
    if (!app->c || atomic_load(&app->c->budget.waiters) == 0)
        return;
    pthread_mutex_lock(&app->c->budget.mu);
    pthread_cond_broadcast(&app->c->budget.room);
    pthread_mutex_unlock(&app->c->budget.mu);
}
