/* Subscriptions against the embedded server (issue 11), as varlog/subscribe.h promises them:
 * the merge over 1, 2 and 8 log streams while several threads append (every GLSN of the
 * range once, in order, with its payload and ids), begin/end bounds and END, tailing in both
 * forms, bounded memory for a consumer that stops reading, SubscribeTo, a log stream added
 * while tailing, sealed log streams, and bad input. Closing from every thread and the client
 * destroyed under open subscriptions are in test_subscribe_close.c; what the two share is
 * subscribe_fixture.h.
 *
 * Handlers run on the subscription's thread, where a cmocka assertion cannot stop the test:
 * they note what is wrong (atu_note_bad) and the test thread asserts that nothing was noted
 * (stu_verify does so first). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "appender_test_util.h"
#include "client_fixture.h"
#include "subscribe_fixture.h"
#include "subscribe_internal.h"
#include "subscribe_test_util.h"
#include "test_support.h"
#include "varlog/subscribe.h"

/* ---- helpers ------------------------------------------------------------------------------ */

/* The iterator reports END, again on later calls, also with timeout 0. */
static void assert_end_repeats(varlog_subscription_t *sub)
{
    varlog_entry_t e;
    varlog_err_t rc = varlog_subscription_next(sub, bound_ms(), &e);
    if (rc != VARLOG_ERR_END)
        fail_msg("next after the range: %s (glsn %llu), expected END: %s", varlog_err_name(rc),
                 rc == VARLOG_OK ? (unsigned long long)e.meta.glsn : 0ull, varlog_last_error());
    assert_int_equal(varlog_subscription_next(sub, bound_ms(), &e), VARLOG_ERR_END);
    assert_int_equal(varlog_subscription_next(sub, 0, &e), VARLOG_ERR_END);
}

/* ---- merge order ------------------------------------------------------------------------- */

#define MERGE_PRODUCERS 4

/* Four threads append batches of 1-3 records topic-wide (round robin over the log streams),
 * while a handler-form subscription opened before the first append reads the whole range;
 * then an iterator-form subscription reads it again from the store. */
static void merge_order(int32_t k)
{
    stu_producer_t p[MERGE_PRODUCERS];
    memset(p, 0, sizeof(p));
    long total = 0;
    for (int i = 0; i < MERGE_PRODUCERS; i++) {
        p[i].topic = 1;
        p[i].id = i + 1;
        p[i].calls = test_scale(100, 5);
        p[i].max_batch = 3;
        total += stu_producer_records(&p[i]);
    }
    t_start(1, k, total, NULL);
    subscribe_ok(1, 1, (uint64_t)total + 1, &T.sink, &T.sub);
    for (int i = 0; i < MERGE_PRODUCERS; i++) {
        p[i].client = T.f.client;
        p[i].log = &T.log;
        stu_producer_start(&p[i]);
    }
    for (int i = 0; i < MERGE_PRODUCERS; i++)
        stu_producer_join(&p[i]);
    assert_int_equal(T.log.records, total);
    assert_int_equal(T.log.max_glsn, (uint64_t)total);
    for (int32_t ls = 1; ls <= k; ls++)
        if (stu_log_count_ls(&T.log, ls) == 0)
            fail_msg("log stream %d got no append: the merge was not exercised", ls);

    assert_ended(&T.sink);
    stu_verify(&T.sink, &T.log, 1, 0, 1, total);
    varlog_subscription_stats_t st = stu_stats(T.sub);
    uint64_t bytes = 0;
    for (long g = 1; g <= total; g++)
        bytes += T.log.by_glsn[g].len;
    assert_int_equal(st.entries, (uint64_t)total);
    assert_int_equal(st.bytes, bytes);
    assert_int_equal(st.next_position, (uint64_t)total + 1);
    assert_int_equal(st.log_streams, (uint32_t)k);
    stu_close(&T.sink, &T.sub);

    subscribe_iter_ok(1, 1, (uint64_t)total + 1, &T.sub2);
    drain_ok(T.sub2, &T.sink2, total);
    assert_end_repeats(T.sub2);
    stu_verify(&T.sink2, &T.log, 1, 0, 1, total);
    st = stu_stats(T.sub2);
    assert_int_equal(st.entries, (uint64_t)total);
    assert_int_equal(st.log_streams, (uint32_t)k);
    t_finish();
}

static void test_merge_order_1(void **state)
{
    (void)state;
    merge_order(1);
}

static void test_merge_order_2(void **state)
{
    (void)state;
    merge_order(2);
}

static void test_merge_order_8(void **state)
{
    (void)state;
    merge_order(8);
}

/* ---- bounds ------------------------------------------------------------------------------ */

/* begin inclusive, end exclusive, on_end once, END repeated; a range ending beyond what is
 * committed waits for it and ends at end - 1. */
static void test_bounds(void **state)
{
    (void)state;
    t_start(1, 2, 100, NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, 60, 0, 1);

    subscribe_ok(1, 10, 20, &T.sink, &T.sub);
    assert_ended(&T.sink);
    stu_verify(&T.sink, &T.log, 1, 0, 10, 10);
    varlog_subscription_stats_t st = stu_stats(T.sub);
    assert_int_equal(st.entries, 10);
    assert_int_equal(st.next_position, 20);
    stu_close(&T.sink, &T.sub);
    assert_int_equal(T.sink.ends, 1);
    assert_int_equal(T.sink.n, 10);

    subscribe_iter_ok(1, 10, 20, &T.sub2);
    drain_ok(T.sub2, &T.sink2, 10);
    /* next returned the 10 entries: they were delivered, GLSN 20 is the next wanted */
    st = stu_stats(T.sub2);
    if (st.entries != 10 || st.next_position != 20)
        fail_msg("iterator stats after next returned GLSNs 10..19: entries %llu, next_position "
                 "%llu (expected 10 and 20)",
                 (unsigned long long)st.entries, (unsigned long long)st.next_position);
    assert_end_repeats(T.sub2);
    stu_verify(&T.sink2, &T.log, 1, 0, 10, 10);
    varlog_subscription_close(&T.sub2);

    /* the first and the last entry alone */
    uint64_t one[2] = {1, 60};
    for (int i = 0; i < 2; i++) {
        stu_sink_free(&T.sink2);
        stu_sink_init(&T.sink2, 4);
        subscribe_iter_ok(1, one[i], one[i] + 1, &T.sub2);
        drain_ok(T.sub2, &T.sink2, 1);
        assert_end_repeats(T.sub2);
        stu_verify(&T.sink2, &T.log, 1, 0, one[i], 1);
        varlog_subscription_close(&T.sub2);
    }

    /* [61, 63) while 60 entries exist: it waits, then takes 61 and 62 out of three more */
    stu_sink_free(&T.sink2);
    stu_sink_init(&T.sink2, 4);
    subscribe_iter_ok(1, 61, 63, &T.sub2);
    varlog_entry_t e;
    assert_int_equal(varlog_subscription_next(T.sub2, 0, &e), VARLOG_ERR_TIMED_OUT);
    int64_t t0 = test_now_ms();
    assert_int_equal(varlog_subscription_next(T.sub2, 100, &e), VARLOG_ERR_TIMED_OUT);
    int64_t waited = test_now_ms() - t0;
    if (waited < 90)
        fail_msg("next(100 ms) returned TIMED_OUT after %lld ms", (long long)waited);
    stu_append_n(T.f.client, &T.log, 1, 0, 3, 0, 2);
    drain_ok(T.sub2, &T.sink2, 2);
    assert_end_repeats(T.sub2);
    stu_verify(&T.sink2, &T.log, 1, 0, 61, 2);
    t_finish();
}

/* ---- tailing ------------------------------------------------------------------------------ */

typedef struct stats_want {
    varlog_subscription_t *sub;
    uint64_t entries, next_position;
} stats_want_t;

static bool stats_reached(void *arg)
{
    stats_want_t *w = arg;
    varlog_subscription_stats_t st;
    return varlog_subscription_stats(w->sub, &st) == VARLOG_OK && st.entries == w->entries &&
           st.next_position == w->next_position;
}

/* end = VARLOG_GLSN_MAX from the middle of what is stored while two threads keep
 * appending: every entry from begin on arrives once, in order; no on_end, no END. */
static void tail(bool iter)
{
    stu_producer_t p[2];
    memset(p, 0, sizeof(p));
    long total = 20;
    for (int i = 0; i < 2; i++) {
        p[i].topic = 1;
        p[i].id = i + 1;
        p[i].calls = test_scale(150, 10);
        p[i].max_batch = 2;
        total += stu_producer_records(&p[i]);
    }
    t_start(1, 2, total, NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, 20, 0, 9);
    varlog_subscription_t **sub = iter ? &T.sub2 : &T.sub;
    stu_sink_t *s = iter ? &T.sink2 : &T.sink;
    if (iter)
        subscribe_iter_ok(1, 11, VARLOG_GLSN_MAX, sub);
    else
        subscribe_ok(1, 11, VARLOG_GLSN_MAX, s, sub);
    for (int i = 0; i < 2; i++) {
        p[i].client = T.f.client;
        p[i].log = &T.log;
        stu_producer_start(&p[i]);
    }
    long want = total - 10;
    varlog_err_t rc = iter ? stu_drain(*sub, s, want, bound_ms())
                           : (stu_wait_n(s, want, bound_ms()) ? VARLOG_OK : VARLOG_ERR_TIMED_OUT);
    for (int i = 0; i < 2; i++)
        stu_producer_join(&p[i]);
    if (rc != VARLOG_OK)
        fail_msg("tailing: %s after %ld of %ld entries: %s", varlog_err_name(rc), stu_sink_n(s),
                 want, varlog_last_error());
    stu_verify(s, &T.log, 1, 0, 11, want);
    /* The iterator's caller is the consumer: once next returned the entry, it was delivered.
     * The handler form's counters may trail on_entry until it returned. */
    stats_want_t sw = {*sub, (uint64_t)want, (uint64_t)total + 1};
    if (!iter)
        (void)test_wait_until(stats_reached, &sw, bound_ms());
    varlog_subscription_stats_t st = stu_stats(*sub);
    if (st.entries != sw.entries || st.next_position != sw.next_position)
        fail_msg("stats after %ld entries up to GLSN %ld were delivered: entries %llu, "
                 "next_position %llu (expected %llu and %llu)",
                 want, total, (unsigned long long)st.entries, (unsigned long long)st.next_position,
                 (unsigned long long)sw.entries, (unsigned long long)sw.next_position);
    if (iter) {
        varlog_entry_t e;
        assert_int_equal(varlog_subscription_next(*sub, 0, &e), VARLOG_ERR_TIMED_OUT);
        assert_int_equal(varlog_subscription_next(*sub, 20, &e), VARLOG_ERR_TIMED_OUT);
    } else {
        pthread_mutex_lock(&s->sync.mu);
        long ends = s->ends, errors = s->errors;
        pthread_mutex_unlock(&s->sync.mu);
        assert_int_equal(ends, 0);
        assert_int_equal(errors, 0);
    }
    stu_close(s, sub);
    t_finish();
}

static void test_tail_handlers(void **state)
{
    (void)state;
    tail(false);
}

static void test_tail_iter(void **state)
{
    (void)state;
    tail(true);
}

/* ---- bounded memory --------------------------------------------------------------------- */

#define PREFETCH 8
#define BIG_LEN 1024

typedef struct buf_watch {
    varlog_subscription_t *sub;
    size_t limit;  /* most entries a log stream may hold */
    size_t max;    /* the most seen */
    size_t target; /* wait until some log stream holds this many */
} buf_watch_t;

static bool buffered_reached(void *arg)
{
    buf_watch_t *w = arg;
    size_t n = stu_buffered_max(w->sub, NULL);
    if (n > w->max)
        w->max = n;
    return n >= w->target;
}

/* Tailing with a consumer that stops after the first entry (the iterator not called, or
 * on_entry blocked) while 10 x the prefetch per log stream is appended: each log stream
 * holds at most the prefetch plus the entry being merged, the rest stays on the server
 * (the client received no more); once the consumer resumes, everything arrives in order.
 * The consumer reads its streams only while it waits for an entry (subscribe.h), so while it
 * stays away the client holds no more than the one receive each stream has armed.
 * by_bytes: the bound comes from subscribe.prefetch.bytes instead of .entries. */
static void bounded_away(bool iter, bool by_bytes)
{
    const int32_t k = 2;
    long more = 10L * PREFETCH * k;
    long total = 1 + more;
    char bytes[32];
    snprintf(bytes, sizeof(bytes), "%d", PREFETCH * BIG_LEN);
    if (by_bytes)
        t_start(1, k, total, "subscribe.prefetch.entries", "1000", "subscribe.prefetch.bytes",
                bytes, NULL);
    else
        t_start(1, k, total, "subscribe.prefetch.entries", "8", "subscribe.prefetch.bytes", "0",
                NULL);
    stu_sink_t *s = iter ? &T.sink2 : &T.sink;
    varlog_subscription_t **sub = iter ? &T.sub2 : &T.sub;
    if (iter) {
        subscribe_iter_ok(1, 1, VARLOG_GLSN_MAX, sub);
    } else {
        s->block_at = 1;
        subscribe_ok(1, 1, VARLOG_GLSN_MAX, s, sub);
    }
    stu_append_n(T.f.client, &T.log, 1, 0, 1, BIG_LEN, 1);
    if (iter)
        drain_ok(*sub, s, 1);
    else
        assert_true(atu_wait_true(&s->sync, &s->blocked, bound_ms()));
    /* the consumer is idle from here on */
    stu_append_n(T.f.client, &T.log, 1, 0, more, BIG_LEN, 2);
    for (int32_t ls = 1; ls <= k; ls++)
        assert_true(stu_log_count_ls(&T.log, ls) >= 9L * PREFETCH);

    /* Watch it for a while: nothing beyond the bound comes in while the consumer stays away. */
    buf_watch_t w = {*sub, PREFETCH + 1, 0, SIZE_MAX};
    int64_t until = test_now_ms() + 300;
    while (test_now_ms() < until)
        (void)test_wait_until(buffered_reached, &w, 20);
    size_t n_ls = 0;
    (void)stu_buffered_max(*sub, &n_ls);
    assert_int_equal(n_ls, (size_t)k);
    if (w.max > w.limit)
        fail_msg("a log stream held %zu entries with a prefetch of %d%s", w.max, PREFETCH,
                 by_bytes ? " entries' worth of bytes" : "");
    assert_int_equal(stu_sink_n(s), 1);
    print_message("    most entries held per log stream: %zu (prefetch %d, %ld appended)\n", w.max,
                  PREFETCH, total);

    if (iter) {
        drain_ok(*sub, s, total);
    } else {
        release_sink(s);
        if (!stu_wait_n(s, total, bound_ms()))
            fail_msg("after the consumer resumed: %ld of %ld entries", stu_sink_n(s), total);
    }
    stu_verify(s, &T.log, 1, 0, 1, total);
    stu_close(s, sub);
    t_finish();
}

#define HOLD_MS 3000 /* the failed log stream's backoff: the window fills meanwhile */
#define HOLD_ROUNDS 5

typedef struct held_wait {
    varlog_subscription_t *sub;
    uint64_t calls;  /* Subscribe calls before the subscription began */
    varlog_err_t rc; /* of the last next: VARLOG_OK or TIMED_OUT */
} held_wait_t;

/* Both initial Subscribe calls answered: one log stream failed (the consumer saw it: the
 * subscription reconnects) and the other one's stream delivers; or a third call came (the
 * failed one reopened already: the round starts again). The test thread is the consumer: it
 * takes what the merge gives (nothing past the failed log stream's first). */
static bool held_ready(void *arg)
{
    held_wait_t *w = arg;
    varlog_entry_t e;
    w->rc = varlog_subscription_next(w->sub, 20, &e);
    if (w->rc == VARLOG_OK)
        stu_sink_add(&T.sink2, &e);
    if ((w->rc != VARLOG_OK && w->rc != VARLOG_ERR_TIMED_OUT) ||
        varlog_server_call_count(T.f.srv, STU_PATH_SUBSCRIBE) > w->calls + 2)
        return true;
    varlog_subscription_health_t h;
    assert_int_equal(varlog_subscription_health(w->sub, &h), VARLOG_OK);
    return h.reconnecting && stu_buffered_max(w->sub, NULL) > 0;
}

/* The consumer polls while the merge waits for a log stream whose first Subscribe failed and
 * whose reopenings keep failing until the test has looked: the other log stream's messages
 * keep coming only until it holds its prefetch (plus the merge's head), however long the
 * consumer polls; when the first one is back, everything arrives in order. by_bytes: as
 * above. No time decides whether the failed log stream is still away when the test looks:
 * its reopenings fail from the moment the other one's stream delivers (a reopening that came
 * before, HOLD_MS/2 at the soonest, makes the round start again). */
static void bounded_polling(bool by_bytes)
{
    const int32_t k = 2;
    long total = 10L * PREFETCH * k;
    char bytes[32], hold[32];
    snprintf(bytes, sizeof(bytes), "%d", PREFETCH * BIG_LEN);
    snprintf(hold, sizeof(hold), "%d",
             test_under_valgrind() || test_under_tsan() ? 4 * HOLD_MS : HOLD_MS);
    if (by_bytes)
        t_start(1, k, total, "subscribe.prefetch.entries", "1000", "subscribe.prefetch.bytes",
                bytes, "subscribe.retry.backoff.ms", hold, "subscribe.retry.backoff.max.ms", hold,
                NULL);
    else
        t_start(1, k, total, "subscribe.prefetch.entries", "8", "subscribe.prefetch.bytes", "0",
                "subscribe.retry.backoff.ms", hold, "subscribe.retry.backoff.max.ms", hold, NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, total, BIG_LEN, 2);
    for (int32_t ls = 1; ls <= k; ls++)
        assert_true(stu_log_count_ls(&T.log, ls) >= 9L * PREFETCH);
    for (int round = 1;; round++) {
        uint64_t base = varlog_server_call_count(T.f.srv, STU_PATH_SUBSCRIBE);
        assert_int_equal(varlog_server_fail_next(T.f.srv, STU_PATH_SUBSCRIBE, 14, "held back", 1),
                         VARLOG_OK);
        subscribe_iter_ok(1, 1, VARLOG_GLSN_MAX, &T.sub2);
        held_wait_t w = {T.sub2, base, VARLOG_OK};
        if (!test_wait_until(held_ready, &w, bound_ms()) ||
            (w.rc != VARLOG_OK && w.rc != VARLOG_ERR_TIMED_OUT))
            fail_msg("no log stream failed while the other delivered within %lld ms (next: %s)",
                     (long long)bound_ms(), varlog_err_name(w.rc));
        /* from here every reopening of the failed log stream fails, until the test looked */
        assert_int_equal(
            varlog_server_fail_next(T.f.srv, STU_PATH_SUBSCRIBE, 14, "held back", 1000000),
            VARLOG_OK);
        uint64_t calls = varlog_server_call_count(T.f.srv, STU_PATH_SUBSCRIBE) - base;
        if (calls == 2)
            break;
        /* a reopening came first (the machine stalled for HOLD_MS/2): start again */
        print_message("    round %d: %llu Subscribe calls before the failure was held; again\n",
                      round, (unsigned long long)calls);
        if (round == HOLD_ROUNDS)
            fail_msg("%d rounds: the failed log stream was reopened each time before its "
                     "reopenings could be failed",
                     round);
        varlog_server_clear_faults(T.f.srv);
        stu_close(&T.sink2, &T.sub2);
        stu_sink_free(&T.sink2);
        stu_sink_init(&T.sink2, total);
    }
    /* Entries of the open log stream come until the merge needs one of the other. */
    varlog_entry_t e;
    varlog_err_t rc;
    while ((rc = varlog_subscription_next(T.sub2, 300, &e)) == VARLOG_OK)
        stu_sink_add(&T.sink2, &e);
    assert_int_equal(rc, VARLOG_ERR_TIMED_OUT);
    /* Two more waits of 300 ms each, then a look (the test thread is the consumer). */
    for (int i = 0; i < 2; i++)
        assert_int_equal(varlog_subscription_next(T.sub2, 300, &e), VARLOG_ERR_TIMED_OUT);
    size_t held = stu_buffered_max(T.sub2, NULL);
    varlog_subscription_health_t h;
    assert_int_equal(varlog_subscription_health(T.sub2, &h), VARLOG_OK);
    if (!h.reconnecting || h.log_streams_down != 1)
        fail_msg("the failed log stream is not away while its reopenings fail: reconnecting %d, "
                 "%u log streams down",
                 h.reconnecting, (unsigned)h.log_streams_down);
    print_message("    held by the open log stream while the consumer polled: %zu (prefetch %d, "
                  "%ld appended)\n",
                  held, PREFETCH, total);
    if (held > PREFETCH + 1 || held < PREFETCH)
        fail_msg("the open log stream holds %zu entries with a prefetch of %d%s, after 900 ms of "
                 "polling",
                 held, PREFETCH, by_bytes ? " entries' worth of bytes" : "");
    varlog_server_clear_faults(T.f.srv);
    drain_ok(T.sub2, &T.sink2, total);
    stu_verify(&T.sink2, &T.log, 1, 0, 1, total);
    stu_close(&T.sink2, &T.sub2);
    t_finish();
}

static void test_bounded_iter(void **state)
{
    (void)state;
    bounded_away(true, false);
}

static void test_bounded_handlers(void **state)
{
    (void)state;
    bounded_away(false, false);
}

static void test_bounded_bytes_iter(void **state)
{
    (void)state;
    bounded_away(true, true);
}

static void test_bounded_polling(void **state)
{
    (void)state;
    bounded_polling(false);
}

static void test_bounded_polling_bytes(void **state)
{
    (void)state;
    bounded_polling(true);
}

/* ---- SubscribeTo -------------------------------------------------------------------------- */

/* Log stream 2's entries in LLSN order with GLSN 0 and the ids filled in, while log stream 1
 * interleaves (so that LLSN and GLSN differ); both forms, END, and tailing by LLSN. */
static void test_subscribe_to_round_trip(void **state)
{
    (void)state;
    t_start(1, 2, 100, NULL);
    for (int i = 0; i < 30; i++) {
        stu_append_n(T.f.client, &T.log, 1, 1, 1, 0, 1);
        stu_append_n(T.f.client, &T.log, 1, 2, 1, 0, 2);
    }
    assert_int_equal(stu_log_glsn_of(&T.log, 2, 1), 2);

    T.sink.by_llsn = true;
    varlog_subscribe_handlers_t h = stu_handlers(&T.sink);
    varlog_err_t rc = varlog_subscribe_to(T.f.client, 1, 2, 1, 31, &h, &T.sub);
    if (rc != VARLOG_OK)
        fail_msg("varlog_subscribe_to: %s: %s", varlog_err_name(rc), varlog_last_error());
    assert_ended(&T.sink);
    stu_verify(&T.sink, &T.log, 1, 2, 1, 30);
    varlog_subscription_stats_t st = stu_stats(T.sub);
    assert_int_equal(st.entries, 30);
    assert_int_equal(st.next_position, 31);
    assert_int_equal(st.log_streams, 1);
    stu_close(&T.sink, &T.sub);

    T.sink2.by_llsn = true;
    rc = varlog_subscribe_to_iter(T.f.client, 1, 2, 5, 10, &T.sub2);
    if (rc != VARLOG_OK)
        fail_msg("varlog_subscribe_to_iter: %s: %s", varlog_err_name(rc), varlog_last_error());
    drain_ok(T.sub2, &T.sink2, 5);
    assert_end_repeats(T.sub2);
    stu_verify(&T.sink2, &T.log, 1, 2, 5, 5);
    varlog_subscription_close(&T.sub2);

    /* tailing log stream 1 from its next LLSN */
    stu_sink_free(&T.sink2);
    stu_sink_init(&T.sink2, 8);
    T.sink2.by_llsn = true;
    assert_int_equal(varlog_subscribe_to_iter(T.f.client, 1, 1, 31, VARLOG_LLSN_MAX, &T.sub2),
                     VARLOG_OK);
    varlog_entry_t e;
    assert_int_equal(varlog_subscription_next(T.sub2, 0, &e), VARLOG_ERR_TIMED_OUT);
    stu_append_n(T.f.client, &T.log, 1, 1, 3, 0, 3);
    drain_ok(T.sub2, &T.sink2, 3);
    stu_verify(&T.sink2, &T.log, 1, 1, 31, 3);
    assert_int_equal(varlog_subscription_next(T.sub2, 0, &e), VARLOG_ERR_TIMED_OUT);
    t_finish();
}

/* ---- topology ---------------------------------------------------------------------------- */

/* A log stream added to the topic while a subscription tails it joins once the client's
 * metadata shows it: its entries arrive in GLSN order with the others'. */
static void test_new_log_stream_joins(void **state)
{
    (void)state;
    t_start(1, 1, 100, NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, 5, 0, 1);
    subscribe_iter_ok(1, 1, VARLOG_GLSN_MAX, &T.sub2);
    drain_ok(T.sub2, &T.sink2, 5);
    int32_t ls = 0;
    assert_int_equal(varlog_server_add_log_stream(T.f.srv, 1, &ls), VARLOG_OK);
    assert_int_equal(ls, 2);
    assert_int_equal(varlog_client_refresh(T.f.client, -1), VARLOG_OK);
    for (int i = 0; i < 5; i++) {
        stu_append_n(T.f.client, &T.log, 1, 2, 1, 0, 2);
        stu_append_n(T.f.client, &T.log, 1, 1, 1, 0, 3);
    }
    drain_ok(T.sub2, &T.sink2, 15);
    stu_verify(&T.sink2, &T.log, 1, 0, 1, 15);
    assert_int_equal(stu_stats(T.sub2).log_streams, 2);
    t_finish();
}

/* Sealed log streams are read normally. */
static void test_sealed_read(void **state)
{
    (void)state;
    t_start(1, 2, 100, NULL);
    stu_append_n(T.f.client, &T.log, 1, 0, 40, 0, 1);
    assert_int_equal(varlog_server_seal(T.f.srv, 1, 1), VARLOG_OK);
    assert_int_equal(varlog_client_refresh(T.f.client, -1), VARLOG_OK);
    subscribe_ok(1, 1, 41, &T.sink, &T.sub);
    assert_ended(&T.sink);
    stu_verify(&T.sink, &T.log, 1, 0, 1, 40);
    t_finish();
}

/* ---- bad input ---------------------------------------------------------------------------- */

static void on_entry_nop(const varlog_entry_t *e, void *opaque)
{
    (void)e, (void)opaque;
}

static void test_bad_input(void **state)
{
    (void)state;
    t_start(2, 1, 10, NULL);
    varlog_client_t *c = T.f.client;
    varlog_subscribe_handlers_t h = {on_entry_nop, NULL, NULL, NULL};
    varlog_subscribe_handlers_t no_entry = {NULL, NULL, NULL, NULL};
    varlog_subscription_t *sub = NULL;

    stu_assert_err(varlog_subscribe(NULL, 1, 1, 2, &h, &sub), VARLOG_ERR_INVALID_ARG, NULL,
                   "NULL client");
    stu_assert_err(varlog_subscribe(c, 1, 1, 2, NULL, &sub), VARLOG_ERR_INVALID_ARG, NULL,
                   "NULL handlers");
    stu_assert_err(varlog_subscribe(c, 1, 1, 2, &no_entry, &sub), VARLOG_ERR_INVALID_ARG,
                   "on_entry", "NULL on_entry");
    stu_assert_err(varlog_subscribe(c, 1, 1, 2, &h, NULL), VARLOG_ERR_INVALID_ARG, NULL,
                   "NULL out");
    stu_assert_err(varlog_subscribe_iter(c, 1, 1, 2, NULL), VARLOG_ERR_INVALID_ARG, NULL,
                   "iter: NULL out");
    stu_assert_err(varlog_subscribe_iter(NULL, 1, 1, 2, &sub), VARLOG_ERR_INVALID_ARG, NULL,
                   "iter: NULL client");
    stu_assert_err(varlog_subscribe(c, 0, 1, 2, &h, &sub), VARLOG_ERR_INVALID_ARG, "topic",
                   "topic 0");
    stu_assert_err(varlog_subscribe_iter(c, -3, 1, 2, &sub), VARLOG_ERR_INVALID_ARG, "topic",
                   "topic -3");
    stu_assert_err(varlog_subscribe(c, 1, 5, 5, &h, &sub), VARLOG_ERR_INVALID_ARG, "begin",
                   "begin == end");
    stu_assert_err(varlog_subscribe_iter(c, 1, 6, 5, &sub), VARLOG_ERR_INVALID_ARG, "begin",
                   "begin > end");
    stu_assert_err(varlog_subscribe(c, 99, 1, 2, &h, &sub), VARLOG_ERR_UNKNOWN_TOPIC, "99",
                   "unknown topic");
    stu_assert_err(varlog_subscribe_iter(c, 99, 1, VARLOG_GLSN_MAX, &sub), VARLOG_ERR_UNKNOWN_TOPIC,
                   "99", "iter: unknown topic");

    /* SubscribeTo: log stream 2 belongs to topic 2 */
    stu_assert_err(varlog_subscribe_to(c, 1, 0, 1, 2, &h, &sub), VARLOG_ERR_INVALID_ARG,
                   "log stream", "log stream 0");
    stu_assert_err(varlog_subscribe_to(c, 1, 1, 1, 2, NULL, &sub), VARLOG_ERR_INVALID_ARG, NULL,
                   "subscribe_to: NULL handlers");
    stu_assert_err(varlog_subscribe_to(c, 1, 1, 1, 2, &no_entry, &sub), VARLOG_ERR_INVALID_ARG,
                   "on_entry", "subscribe_to: NULL on_entry");
    stu_assert_err(varlog_subscribe_to(c, 1, 1, 3, 3, &h, &sub), VARLOG_ERR_INVALID_ARG, "begin",
                   "subscribe_to: begin == end");
    stu_assert_err(varlog_subscribe_to(c, 1, 99, 1, 2, &h, &sub), VARLOG_ERR_UNKNOWN_LOG_STREAM,
                   "99", "subscribe_to: unknown log stream");
    stu_assert_err(varlog_subscribe_to_iter(c, 1, 2, 1, 2, &sub), VARLOG_ERR_UNKNOWN_LOG_STREAM,
                   NULL, "subscribe_to: another topic's log stream");
    stu_assert_err(varlog_subscribe_to_iter(c, 99, 1, 1, 2, &sub), VARLOG_ERR_UNKNOWN_TOPIC, "99",
                   "subscribe_to: unknown topic");
    stu_assert_err(varlog_subscribe_to_iter(c, 0, 1, 1, 2, &sub), VARLOG_ERR_INVALID_ARG, "topic",
                   "subscribe_to: topic 0");
    stu_assert_err(varlog_subscribe_to_iter(c, 1, 1, 1, 2, NULL), VARLOG_ERR_INVALID_ARG, NULL,
                   "subscribe_to_iter: NULL out");

    /* next, stats and close on what they do not serve */
    varlog_entry_t e;
    varlog_subscription_stats_t st;
    stu_assert_err(varlog_subscription_next(NULL, 0, &e), VARLOG_ERR_INVALID_ARG, NULL,
                   "next(NULL)");
    assert_int_equal(varlog_subscription_stats(NULL, &st), VARLOG_ERR_INVALID_ARG);
    varlog_subscription_close(NULL);
    sub = NULL;
    varlog_subscription_close(&sub);

    assert_int_equal(varlog_subscribe(c, 1, 1, VARLOG_GLSN_MAX, &h, &sub), VARLOG_OK);
    stu_assert_err(varlog_subscription_next(sub, 0, &e), VARLOG_ERR_STATE, NULL,
                   "next on a handler-form subscription");
    assert_int_equal(varlog_subscription_stats(sub, NULL), VARLOG_ERR_INVALID_ARG);
    varlog_subscription_close(&sub);
    assert_null(sub);

    assert_int_equal(varlog_subscribe_iter(c, 1, 1, VARLOG_GLSN_MAX, &sub), VARLOG_OK);
    stu_assert_err(varlog_subscription_next(sub, 0, NULL), VARLOG_ERR_INVALID_ARG, NULL,
                   "next with NULL entry");
    varlog_subscription_close(&sub);
    t_finish();
}

/* An optional argument runs only the tests whose names match it (cmocka's pattern). */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_merge_order_1, teardown),
        cmocka_unit_test_teardown(test_merge_order_2, teardown),
        cmocka_unit_test_teardown(test_merge_order_8, teardown),
        cmocka_unit_test_teardown(test_bounds, teardown),
        cmocka_unit_test_teardown(test_tail_handlers, teardown),
        cmocka_unit_test_teardown(test_tail_iter, teardown),
        cmocka_unit_test_teardown(test_bounded_iter, teardown),
        cmocka_unit_test_teardown(test_bounded_handlers, teardown),
        cmocka_unit_test_teardown(test_bounded_bytes_iter, teardown),
        cmocka_unit_test_teardown(test_bounded_polling, teardown),
        cmocka_unit_test_teardown(test_bounded_polling_bytes, teardown),
        cmocka_unit_test_teardown(test_subscribe_to_round_trip, teardown),
        cmocka_unit_test_teardown(test_new_log_stream_joins, teardown),
        cmocka_unit_test_teardown(test_sealed_read, teardown),
        cmocka_unit_test_teardown(test_bad_input, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
