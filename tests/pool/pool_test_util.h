#ifndef POOL_TEST_UTIL_H
#define POOL_TEST_UTIL_H

/* Counters the tests wait on with a bound, instead of sleeping. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

typedef struct tcount {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long value;
} tcount_t;

static inline void tc_init(tcount_t *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &a);
    pthread_condattr_destroy(&a);
    pthread_mutex_init(&c->mu, NULL);
    c->value = 0;
}

static inline void tc_destroy(tcount_t *c)
{
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
}

static inline long tc_add(tcount_t *c, long d)
{
    pthread_mutex_lock(&c->mu);
    long v = (c->value += d);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return v;
}

static inline long tc_get(tcount_t *c)
{
    pthread_mutex_lock(&c->mu);
    long v = c->value;
    pthread_mutex_unlock(&c->mu);
    return v;
}

static inline struct timespec tc_deadline(int64_t timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(timeout_ms / 1000);
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Waits until value >= v or timeout_ms passes; returns whether it got there. */
static inline bool tc_wait_ge(tcount_t *c, long v, int64_t timeout_ms)
{
    struct timespec ts = tc_deadline(timeout_ms);
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    while (c->value < v && rc == 0)
        rc = pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    bool ok = c->value >= v;
    pthread_mutex_unlock(&c->mu);
    return ok;
}

/* A token bucket: a gated handler takes one token (waiting up to timeout_ms); the test hands
 * tokens out to let handlers finish one at a time. */
static inline bool tc_take(tcount_t *c, int64_t timeout_ms)
{
    struct timespec ts = tc_deadline(timeout_ms);
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    while (c->value < 1 && rc == 0)
        rc = pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    bool ok = c->value >= 1;
    if (ok)
        c->value--;
    pthread_mutex_unlock(&c->mu);
    return ok;
}

#define MS 1000000LL

#endif
