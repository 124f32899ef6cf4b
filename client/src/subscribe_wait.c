/* A subscription's consumer waiting for news: in its poller's poll (the streams complete
 * there), or, past subscribe.self.receive.max, asleep on `wake` until gRPC's I/O thread
 * wakes it; and the wake-ups other threads send it (subscribe_internal.h). */
#include <time.h>

#include "subscribe_internal.h"
#include "wire.h"

/* Whether the consumer polls for news and was not kicked out of that poll yet; it then
 * counts as kicked. mu held. */
static bool wake_locked(varlog_subscription_t *sub)
{
    if (!sub->waiting || sub->kicked)
        return false;
    sub->kicked = true;
    return true;
}

void sub_wake(varlog_subscription_t *sub)
{
    if (sub->shared) {
        sub_shared_wake(sub);
        return;
    }
    pthread_mutex_lock(&sub->mu);
    bool kick = wake_locked(sub);
    if (kick && !sub->poller) {
        pthread_cond_signal(&sub->wake);
        kick = false;
    }
    if (kick)
        sub->poller_users++; /* a close waits for the kick before the poller goes */
    pthread_mutex_unlock(&sub->mu);
    if (!kick)
        return;
    rpc_poller_kick(sub->poller);
    pthread_mutex_lock(&sub->mu);
    if (--sub->poller_users == 0)
        pthread_cond_broadcast(&sub->idle);
    pthread_mutex_unlock(&sub->mu);
}

/* No poller: sleeps on wake until until (mu held, waiting set). A busy subscription
 * (subscribe.wakeup.entries delivered since the last sleep) asks the hook to wake it only
 * once that many messages arrived, for at most subscribe.wakeup.wait.us. */
static void sleep_on_wake_locked(varlog_subscription_t *sub, int64_t until, int64_t now)
{
    int64_t wait_us = (until - now) * 1000;
    bool batching = sub->wakeup_wait_us > 0 && sub->wakeup_entries > 1 &&
                    sub->since_sleep >= sub->wakeup_entries;
    if (batching && wait_us > sub->wakeup_wait_us)
        wait_us = sub->wakeup_wait_us;
    sub->since_sleep = 0;
    struct timespec ts;
    abs_deadline_us(&ts, wait_us);
    sub->batching = batching;
    sub->waits++;
    pthread_cond_timedwait(&sub->wake, &sub->mu, &ts);
    sub->batching = false;
    sub->waiting = false;
}

/* Waits for news until deadline_ms or the next check; TIMED_OUT once deadline_ms passed.
 * The wait is a poll of the subscription's poller: gRPC reads the streams' messages on this
 * thread, and their notify hooks put them on the news list here, so that entries streaming
 * in cost no wake-up of another thread and no hand-off (a message already received comes
 * back from the poll without a system call). Retry tasks, gap lookups and a close kick the
 * poll. Without a poller it sleeps on wake instead (sleep_on_wake_locked). */
varlog_err_t sub_wait_news(varlog_subscription_t *sub, int64_t deadline_ms, int64_t now)
{
    if (deadline_ms >= 0 && now >= deadline_ms)
        return VARLOG_ERR_TIMED_OUT;
    int64_t until = sub->next_check_ms;
    if (deadline_ms >= 0 && deadline_ms < until)
        until = deadline_ms;
    pthread_mutex_lock(&sub->mu);
    bool gap_answered = sub->gap_gen != 0 && sub->gap_answered == sub->gap_gen;
    bool poll = !sub->news && !sub->closing && !gap_answered && until > now;
    if (poll) {
        sub->waiting = true;
        sub->kicked = false;
    }
    if (poll && !sub->poller) {
        sleep_on_wake_locked(sub, until, now);
        poll = false;
    }
    pthread_mutex_unlock(&sub->mu);
    if (!poll)
        return VARLOG_OK;
    /* The iterator's caller may change between calls: whoever consumes now polls. */
    rpc_poller_own(sub->poller);
    sub->waits++;
    rpc_poller_poll(sub->poller, until);
    pthread_mutex_lock(&sub->mu);
    sub->waiting = false;
    pthread_mutex_unlock(&sub->mu);
    return VARLOG_OK;
}
