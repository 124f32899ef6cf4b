/* No heap allocation per entry read (varlog/subscribe.h: "Entries are read in place from the
 * received messages: nothing is copied and nothing is allocated per entry by the library
 * (gRPC allocates each message it receives)").
 *
 * The server runs as a child process (varlog-server), so every allocation this process makes
 * is the client's. The log is filled beforehand with 100-byte entries (varlog_append, batches
 * of 100, so that over 3 log streams the merge changes stream every 100 GLSNs); then, after a
 * warm-up of some thousands of entries, each entry of the measured stretch is read with the
 * allocations of the consumer's thread counted:
 *   - iterator form (varlog_subscribe_iter over 1 and 3 log streams,
 *     varlog_subscribe_to_iter): inside each varlog_subscription_next;
 *   - handler form (varlog_subscribe over 3 log streams, varlog_subscribe_to): on the
 *     subscription's thread between one on_entry's return and the next one's call, where the
 *     merge releases the entry delivered last, pulls the next message and picks the least
 *     head.
 *
 * The consumer's thread re-arms a stream's receive (rpc_stream_recv_buffer starts a
 * GRPC_OP_RECV_MESSAGE batch once the stream's prefetch window has room) and destroys the
 * received messages, and gRPC may allocate in both. So the test links with
 * -Wl,--wrap=malloc,calloc,realloc in every build type (alloc_hook.h): the wraps see exactly
 * the static objects' calls (libvarlog's client, rpc, pool and codec code; gRPC and
 * protobuf-c are shared libraries), and those must not grow with the entries read, on the
 * consumer's thread and process-wide: none per entry, only what a log stream's buffers take
 * the first time they grow (ONCE_PER_LS_*). The subscription must be in a steady state
 * (no stream opened again, no entry repeated; so the measured stretch lies inside one read
 * window, whose end opens a stream per log stream: allocations per window, not per entry). Every
 * allocation of the process (interposed malloc; not under ASan, TSan or valgrind) is reported too
 * and held to a bound per entry (ALL_PER_ENTRY_MAX): what gRPC costs to receive a message, below
 * what decoding it with protobuf-c would add.
 *
 * Under valgrind, the wraps still count: the assertions on libvarlog's allocations hold
 * there too, over fewer entries. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include <cmocka.h>

#include "alloc_hook.h"
#include "child_env.h"
#include "test_support.h"
#include "varlog/client.h"
#include "varlog/subscribe.h"

#define ENTRY_LEN 100
#define FILL_BATCH 100

/* Process-wide allocations per entry allowed. Measured 1.01 to 1.04 in a plain build, all
 * gRPC's: one gpr_malloc per message received, the grpc_byte_buffer that
 * FilterStackCall::BatchControl::ProcessDataAfterMetadata hands to the receive
 * (grpc_raw_compressed_byte_buffer_create); then the slices of the TCP reads
 * (MemoryAllocator::MakeSlice, one per some hundred messages) and absl::Status copies on the
 * heap (as few). 2.5 allows a machine so loaded that every message came in a read of its
 * own, and fails a client that decoded each message with protobuf-c (an unpack allocates
 * the message and its payload: 3 per entry or more in all). */
#define ALL_PER_ENTRY_MAX 2.5

/* ---- the server and the client ------------------------------------------------------------- */

typedef struct env {
    child_env_t c;
    int32_t ls[8]; /* the topic's log streams */
    size_t n_ls;
    uint64_t first_glsn; /* of the entries filled */
} env_t;

/* One environment per test, stopped by the teardown also when the test failed half-way (the
 * next test could not start its child server otherwise). */
static env_t g_env = {.c.server = -1};

static void env_start(env_t *e, int32_t log_streams)
{
    memset(e, 0, sizeof(*e));
    /* A read window (subscribe.window.bytes) opens a stream per log stream when the merge
     * passes it: a first window of 2^30 / 4096 GLSNs holds the whole test. */
    child_env_start(&e->c, log_streams, "subscribe.window.bytes", "1073741824", NULL);
    assert_int_equal(varlog_client_log_streams(e->c.client, 1, e->ls, 8, &e->n_ls), VARLOG_OK);
    assert_int_equal(e->n_ls, (size_t)log_streams);
}

static int teardown(void **state)
{
    (void)state;
    child_env_stop(&g_env.c);
    return 0;
}

/* Entry k of the log (k = 0, 1, ...) holds k in its first bytes, the rest a fixed pattern. */
static void entry_bytes(uint8_t *p, uint64_t k)
{
    memset(p, 'a' + (int)(k % 26), ENTRY_LEN);
    memcpy(p, &k, sizeof(k));
}

static uint64_t entry_index(const varlog_entry_t *e)
{
    uint64_t k;
    memcpy(&k, e->data, sizeof(k));
    return k;
}

/* Appends n entries to the topic in batches of FILL_BATCH, round robin over its log streams;
 * each call waits for its answer, so entry k gets GLSN first_glsn + k. */
static void fill(env_t *e, long n)
{
    static uint8_t data[FILL_BATCH][ENTRY_LEN];
    varlog_record_t recs[FILL_BATCH];
    varlog_entry_meta_t metas[FILL_BATCH];
    for (long k = 0; k < n; k += FILL_BATCH) {
        size_t m = (size_t)(n - k < FILL_BATCH ? n - k : FILL_BATCH);
        for (size_t i = 0; i < m; i++) {
            entry_bytes(data[i], (uint64_t)k + i);
            recs[i] = (varlog_record_t){data[i], ENTRY_LEN};
        }
        varlog_err_t rc = varlog_append(e->c.client, 1, recs, m, 60000, metas, NULL);
        if (rc != VARLOG_OK)
            fail_msg("append of entries %ld..: %s: %s", k, varlog_err_name(rc),
                     varlog_last_error());
        if (k == 0)
            e->first_glsn = metas[0].glsn;
        assert_int_equal(metas[0].glsn, e->first_glsn + (uint64_t)k);
        assert_int_equal(metas[m - 1].glsn, e->first_glsn + (uint64_t)k + m - 1);
    }
}

/* ---- what is measured ------------------------------------------------------------------------ */

typedef struct plan {
    long warm;     /* entries read before measuring */
    long measured; /* entries measured */
    long total;    /* entries in the range: the end is not inside the measured stretch */
} plan_t;

static plan_t make_plan(void)
{
    plan_t p = {.warm = test_scale(5000, 10), .measured = test_scale(20000, 20)};
    p.total = p.warm + p.measured + 500;
    return p;
}

typedef struct counts {
    uint64_t ours;         /* libvarlog's allocations on the consumer's thread */
    uint64_t ours_steps;   /* steps (next calls, gaps between handlers) that allocated */
    uint64_t thread_all;   /* every allocation on the consumer's thread (gRPC's too) */
    uint64_t process_ours; /* libvarlog's allocations on every thread */
    uint64_t process_all;  /* every allocation of the process */
} counts_t;

/* What libvarlog may allocate once per log stream, whatever the number of entries read:
 * on the consumer's thread, the stream's scratch (wire_flatten lays a message received in
 * several slices out flat there, grown the first time one arrives: once for entries of this
 * size, as the 256 bytes it starts with hold one); on gRPC's thread, the stream's status text
 * when its part of the range was sent, and its queue of received messages growing by
 * doubling from 8 slots to the prefetch window's 256 (6 allocations). A stretch may hold
 * these first times when messages first split or the queue first fills late, on a slow run
 * (seen under TSan: the scratch's). Far below the entries measured, so an allocation per
 * entry still fails. */
#define ONCE_PER_LS_CONSUMER 1
#define ONCE_PER_LS_ANY_THREAD 8

static void report_and_check(const char *what, const plan_t *p, int32_t log_streams,
                             const counts_t *c)
{
    double n = (double)p->measured;
    bool whole = alloc_hook_whole_process();
    char all[160] = "gRPC's are not seen (ASan, TSan, valgrind)";
    if (whole)
        snprintf(all, sizeof(all),
                 "every allocation (gRPC's too) on the consumer's thread %.3f per entry, "
                 "process-wide %.3f per entry",
                 (double)c->thread_all / n, (double)c->process_all / n);
    print_message("    [%s] %s, %ld entries of %d B after %ld: libvarlog's on the consumer's "
                  "thread %llu (in %llu steps), on every thread %llu; %s\n",
                  alloc_hook_mode(), what, p->measured, ENTRY_LEN, p->warm,
                  (unsigned long long)c->ours, (unsigned long long)c->ours_steps,
                  (unsigned long long)c->process_ours, all);
    uint64_t once = (uint64_t)log_streams * ONCE_PER_LS_CONSUMER;
    if (c->ours > once) {
        (void)alloc_hook_trace_print("the first allocation of libvarlog on the consumer's thread:");
        fail_msg("%s: libvarlog allocated %llu times on the consumer's thread in %llu of %ld "
                 "entries after warm-up, expected at most %llu (once per log stream)",
                 what, (unsigned long long)c->ours, (unsigned long long)c->ours_steps, p->measured,
                 (unsigned long long)once);
    }
    once = (uint64_t)log_streams * ONCE_PER_LS_ANY_THREAD;
    if (c->process_ours > once)
        fail_msg("%s: libvarlog allocated %llu times on all threads in %ld entries after "
                 "warm-up, expected at most %llu (once per log stream)",
                 what, (unsigned long long)c->process_ours, p->measured, (unsigned long long)once);
    if (whole && (double)c->process_all / n > ALL_PER_ENTRY_MAX)
        fail_msg("%s: %.3f allocations per entry process-wide, expected <= %.1f", what,
                 (double)c->process_all / n, ALL_PER_ENTRY_MAX);
}

/* A steady state: no stream was opened again (ls_open allocates), for a failure or a read
 * window, nor repeated entries. */
static void check_steady(varlog_subscription_t *sub)
{
    varlog_subscription_stats_t st;
    assert_int_equal(varlog_subscription_stats(sub, &st), VARLOG_OK);
    assert_int_equal(st.resubscribes, 0);
    assert_int_equal(st.duplicates, 0);
    assert_int_equal(st.windows, 1); /* no stream opened for a next window either */
}

/* Checks that the counting sees this thread's calls, of both kinds. */
static void check_hook(void)
{
    assert_true(alloc_hook_sees_ours());
    alloc_hook_trace_reset();
    uint64_t ours = alloc_hook_thread(ALLOC_HOOK_OURS), all = alloc_hook_thread(ALLOC_HOOK_ALL);
    void *volatile probe = malloc(16);
    free(probe);
    assert_int_equal(alloc_hook_thread(ALLOC_HOOK_OURS), ours + 1);
    assert_int_equal(alloc_hook_thread(ALLOC_HOOK_ALL), all + 1);
}

/* The position an entry must have: GLSN in a Subscribe, LLSN in a SubscribeTo (a log stream
 * of a one-log-stream topic, whose LLSNs are its GLSNs). */
static uint64_t position(const varlog_entry_t *e, bool by_llsn)
{
    return by_llsn ? e->meta.llsn : e->meta.glsn;
}

/* ---- the iterator form ----------------------------------------------------------------------- */

static void run_iter(int32_t log_streams, bool subscribe_to)
{
    env_t *e = &g_env;
    plan_t p = make_plan();
    check_hook();
    env_start(e, log_streams);
    fill(e, p.total);
    uint64_t first = subscribe_to ? 1 : e->first_glsn;
    varlog_subscription_t *sub = NULL;
    varlog_err_t rc = subscribe_to ? varlog_subscribe_to_iter(e->c.client, 1, e->ls[0], first,
                                                              first + (uint64_t)p.total, &sub)
                                   : varlog_subscribe_iter(e->c.client, 1, first,
                                                           first + (uint64_t)p.total, &sub);
    if (rc != VARLOG_OK)
        fail_msg("subscribe: %s: %s", varlog_err_name(rc), varlog_last_error());

    counts_t c = {0};
    uint64_t process_ours0 = 0, process_all0 = 0;
    varlog_entry_t ent;
    for (long k = 0; k < p.warm + p.measured; k++) {
        bool measured = k >= p.warm;
        if (k == p.warm) {
            process_ours0 = alloc_hook_total(ALLOC_HOOK_OURS);
            process_all0 = alloc_hook_total(ALLOC_HOOK_ALL);
        }
        uint64_t ours0 = alloc_hook_thread(ALLOC_HOOK_OURS);
        uint64_t all0 = alloc_hook_thread(ALLOC_HOOK_ALL);
        alloc_hook_capture(measured, ALLOC_HOOK_OURS);
        rc = varlog_subscription_next(sub, 60000, &ent);
        alloc_hook_capture(false, ALLOC_HOOK_OURS);
        uint64_t d = alloc_hook_thread(ALLOC_HOOK_OURS) - ours0;
        if (measured) {
            c.ours += d;
            c.ours_steps += d > 0;
            c.thread_all += alloc_hook_thread(ALLOC_HOOK_ALL) - all0;
        }
        if (rc != VARLOG_OK)
            fail_msg("next at entry %ld: %s: %s", k, varlog_err_name(rc), varlog_last_error());
        if (position(&ent, subscribe_to) != first + (uint64_t)k || ent.len != ENTRY_LEN ||
            entry_index(&ent) != (uint64_t)k)
            fail_msg("entry %ld: position %llu, %zu bytes, holding entry %llu", k,
                     (unsigned long long)position(&ent, subscribe_to), ent.len,
                     (unsigned long long)entry_index(&ent));
    }
    c.process_ours = alloc_hook_total(ALLOC_HOOK_OURS) - process_ours0;
    c.process_all = alloc_hook_total(ALLOC_HOOK_ALL) - process_all0;

    long rest = 0;
    while ((rc = varlog_subscription_next(sub, 60000, &ent)) == VARLOG_OK)
        rest++;
    assert_int_equal(rc, VARLOG_ERR_END);
    assert_int_equal(rest, p.total - p.warm - p.measured);
    check_steady(sub);
    varlog_subscription_close(&sub);

    char what[96];
    snprintf(what, sizeof(what), "%s, %d log stream%s",
             subscribe_to ? "varlog_subscribe_to_iter" : "varlog_subscribe_iter", log_streams,
             log_streams > 1 ? "s" : "");
    report_and_check(what, &p, log_streams, &c);
    child_env_stop(&e->c);
}

static void test_iter_1_log_stream(void **state)
{
    (void)state;
    run_iter(1, false);
}

static void test_iter_3_log_streams(void **state)
{
    (void)state;
    run_iter(3, false);
}

static void test_subscribe_to_iter(void **state)
{
    (void)state;
    run_iter(1, true);
}

/* ---- the handler form ------------------------------------------------------------------------ */

typedef struct hsink {
    plan_t plan;
    uint64_t first;
    bool by_llsn;
    /* the subscription's thread alone, read by the test after on_end or on_error */
    long seen;
    uint64_t ours_at_return, all_at_return;
    counts_t c;
    uint64_t process_ours0, process_all0;
    long bad;
    char bad_text[160];
    /* mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    varlog_err_t err;
    char why[256];
} hsink_t;

/* Counts what the subscription's thread allocated since the previous on_entry returned: the
 * step that delivered this entry. */
static void on_entry(const varlog_entry_t *ent, void *opaque)
{
    uint64_t ours = alloc_hook_thread(ALLOC_HOOK_OURS), all = alloc_hook_thread(ALLOC_HOOK_ALL);
    alloc_hook_capture(false, ALLOC_HOOK_OURS);
    hsink_t *h = opaque;
    const plan_t *p = &h->plan;
    long k = h->seen++;
    if (k == p->warm) {
        h->process_ours0 = alloc_hook_total(ALLOC_HOOK_OURS);
        h->process_all0 = alloc_hook_total(ALLOC_HOOK_ALL);
    } else if (k == p->warm + p->measured) {
        h->c.process_ours = alloc_hook_total(ALLOC_HOOK_OURS) - h->process_ours0;
        h->c.process_all = alloc_hook_total(ALLOC_HOOK_ALL) - h->process_all0;
    }
    /* The step before entry warm is not measured: the process counts began inside it. */
    if (k > p->warm && k <= p->warm + p->measured) {
        uint64_t d = ours - h->ours_at_return;
        h->c.ours += d;
        h->c.ours_steps += d > 0;
        h->c.thread_all += all - h->all_at_return;
    }
    if ((position(ent, h->by_llsn) != h->first + (uint64_t)k || ent->len != ENTRY_LEN ||
         entry_index(ent) != (uint64_t)k) &&
        h->bad++ == 0)
        snprintf(h->bad_text, sizeof(h->bad_text),
                 "entry %ld: position %llu, %zu bytes, holding entry %llu", k,
                 (unsigned long long)position(ent, h->by_llsn), ent->len,
                 (unsigned long long)entry_index(ent));
    h->ours_at_return = alloc_hook_thread(ALLOC_HOOK_OURS);
    h->all_at_return = alloc_hook_thread(ALLOC_HOOK_ALL);
    alloc_hook_capture(k >= p->warm && k < p->warm + p->measured, ALLOC_HOOK_OURS);
}

static void finish(hsink_t *h, varlog_err_t err, const char *why)
{
    pthread_mutex_lock(&h->mu);
    h->done = true;
    h->err = err;
    snprintf(h->why, sizeof(h->why), "%s", why);
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void on_end(void *opaque)
{
    alloc_hook_capture(false, ALLOC_HOOK_OURS);
    finish(opaque, VARLOG_ERR_END, "");
}

static void on_error(varlog_err_t err, const char *why, void *opaque)
{
    alloc_hook_capture(false, ALLOC_HOOK_OURS);
    finish(opaque, err, why);
}

static void run_handler(int32_t log_streams, bool subscribe_to)
{
    env_t *e = &g_env;
    check_hook();
    static hsink_t h;
    memset(&h, 0, sizeof(h));
    h.plan = make_plan();
    h.by_llsn = subscribe_to;
    pthread_mutex_init(&h.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h.cv, &ca);
    pthread_condattr_destroy(&ca);
    env_start(e, log_streams);
    fill(e, h.plan.total);
    h.first = subscribe_to ? 1 : e->first_glsn;
    uint64_t end = h.first + (uint64_t)h.plan.total;
    varlog_subscribe_handlers_t handlers = {
        .on_entry = on_entry, .on_end = on_end, .on_error = on_error, .opaque = &h};
    varlog_subscription_t *sub = NULL;
    varlog_err_t rc =
        subscribe_to ? varlog_subscribe_to(e->c.client, 1, e->ls[0], h.first, end, &handlers, &sub)
                     : varlog_subscribe(e->c.client, 1, h.first, end, &handlers, &sub);
    if (rc != VARLOG_OK)
        fail_msg("subscribe: %s: %s", varlog_err_name(rc), varlog_last_error());
    struct timespec dl = test_deadline_ms(120000);
    pthread_mutex_lock(&h.mu);
    while (!h.done && pthread_cond_timedwait(&h.cv, &h.mu, &dl) == 0)
        ;
    bool done = h.done;
    pthread_mutex_unlock(&h.mu);
    if (done)
        check_steady(sub);
    varlog_subscription_close(&sub); /* no handler runs after it: h is ours again */
    if (!done)
        fail_msg("no on_end within 120 s; %ld entries delivered", h.seen);
    if (h.err != VARLOG_ERR_END)
        fail_msg("on_error after %ld entries: %s: %s", h.seen, varlog_err_name(h.err), h.why);
    if (h.bad)
        fail_msg("%ld entries out of place; the first: %s", h.bad, h.bad_text);
    assert_int_equal(h.seen, h.plan.total);

    char what[96];
    snprintf(what, sizeof(what), "%s (handler), %d log stream%s",
             subscribe_to ? "varlog_subscribe_to" : "varlog_subscribe", log_streams,
             log_streams > 1 ? "s" : "");
    report_and_check(what, &h.plan, log_streams, &h.c);
    child_env_stop(&e->c);
    pthread_cond_destroy(&h.cv);
    pthread_mutex_destroy(&h.mu);
}

static void test_handler_3_log_streams(void **state)
{
    (void)state;
    run_handler(3, false);
}

static void test_subscribe_to_handler(void **state)
{
    (void)state;
    run_handler(1, true);
}

/* An optional argument runs only the tests whose names match it (cmocka's pattern). */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_iter_1_log_stream, teardown),
        cmocka_unit_test_teardown(test_iter_3_log_streams, teardown),
        cmocka_unit_test_teardown(test_subscribe_to_iter, teardown),
        cmocka_unit_test_teardown(test_handler_3_log_streams, teardown),
        cmocka_unit_test_teardown(test_subscribe_to_handler, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
