/* What a topic-wide reader that stops reading leaves in gRPC (CONFIGURATION.md,
 * subscribe.window.bytes and grpc.bdp.probe), two ways:
 *   - with a read window (subscribe.window.bytes, here 4 MiB) and gRPC's BDP probe on (the
 *     defaults but for the window's size), the storage node sends at most the window's
 *     entries ahead of the reader: the client's heap holds about WINDOW_BYTES, however wide
 *     gRPC's windows grew;
 *   - without a read window (0) and with the probe off, every stream's HTTP/2 window stays
 *     at 64 KiB, so the heap holds at most the subscription's own buffers
 *     (subscribe.prefetch.*, per log stream) and a window per stream.
 *
 * The server is varlog-server run as a child process, so the heap measured is the client's.
 * The log is filled with 4 KiB entries over 4 log streams; a topic-wide iterator reads a
 * quarter of them as fast as it can (a steady flow, in which gRPC's probe, when on, widens
 * the windows), then stops calling next: gRPC's I/O thread goes on polling for it and reads
 * what the node sends until the windows are full. The heap in use (mallinfo2) is sampled
 * until it stops growing; what it grew by since before the subscription must stay within
 * the bound (WINDOW_BYTES + READ_CHUNKS, or PREFETCH_PER_LS + WINDOW_PER_LS per log stream; plus
 * SLACK). The rest is then read, every entry once and in order. Measured: without a read window and
 * with the probe on (run by hand) the stall held 27-28 MB, about all that the node had left to send
 * (24 MiB), over both bounds (18 and 11 MB).
 *
 * The heap is malloc's: not measured under ASan, TSan or valgrind, which own malloc (the
 * reads and their checks still run there). */
#include <malloc.h>
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

#include "child_env.h"
#include "test_support.h"
#include "varlog/client.h"
#include "varlog/subscribe.h"

#define LOG_STREAMS 4
#define ENTRY_LEN 4096
#define FILL_BATCH 64

/* subscribe.prefetch.entries (256, the default) entries of ENTRY_LEN bytes, below
 * subscribe.prefetch.bytes's 4 MiB: what the subscription itself buffers per log stream. */
#define PREFETCH_PER_LS ((size_t)256 * (ENTRY_LEN + 64))
/* gRPC's window without the probe (64 KiB) and the slices it reads into beyond it. */
#define WINDOW_PER_LS ((size_t)256 * 1024)
/* The client's other memory that may grow while it waits (its stats, gRPC's connection
 * buffers and read chunks). */
#define SLACK ((size_t)6 * 1024 * 1024)
/* subscribe.window.bytes of the first test. */
#define WINDOW_BYTES ((size_t)4 * 1024 * 1024)
/* Beside a read window's entries, the read buffers gRPC received them into: a message held
 * keeps the chunk it was read into, and a reader that shares its CPU with the server (one
 * CPU, busy loops) gets larger chunks. The first test's growth, 20 runs each: 4.5-6.7 MB
 * alone, 4.5-11.8 (once 12.3) pinned to one CPU, 4.8-12.7 beside 2 busy loops. */
#define READ_CHUNKS ((size_t)8 * 1024 * 1024)

typedef struct env {
    child_env_t c;
    uint64_t first_glsn;
} env_t;

static env_t g_env = {.c.server = -1};

/* subscribe.prefetch.entries of the next env_start (the default but in the window tests). */
static const char *g_prefetch = "256";

static void env_start(env_t *e, const char *bdp_probe, const char *window_bytes)
{
    memset(e, 0, sizeof(*e));
    child_env_start(&e->c, LOG_STREAMS, "grpc.bdp.probe", bdp_probe, "subscribe.window.bytes",
                    window_bytes, "subscribe.prefetch.entries", g_prefetch, NULL);
}

static int teardown(void **state)
{
    (void)state;
    g_prefetch = "256";
    child_env_stop(&g_env.c);
    return 0;
}

/* Entry k holds k in its first bytes. Appends entries k .. k + m - 1 (m at most
 * FILL_BATCH) in one call; returns the GLSN of the first. */
static uint64_t append_batch(env_t *e, long k, size_t m)
{
    static uint8_t data[FILL_BATCH][ENTRY_LEN];
    varlog_record_t recs[FILL_BATCH];
    varlog_entry_meta_t metas[FILL_BATCH];
    for (size_t i = 0; i < m; i++) {
        uint64_t idx = (uint64_t)k + i;
        memcpy(data[i], &idx, sizeof(idx));
        recs[i] = (varlog_record_t){data[i], ENTRY_LEN};
    }
    varlog_err_t rc = varlog_append(e->c.client, 1, recs, m, 60000, metas, NULL);
    if (rc != VARLOG_OK)
        fail_msg("append of entries %ld..: %s: %s", k, varlog_err_name(rc), varlog_last_error());
    return metas[0].glsn;
}

/* Appends n entries, FILL_BATCH a call; entry k gets GLSN first_glsn + k. */
static void fill(env_t *e, long n)
{
    for (long k = 0; k < n; k += FILL_BATCH) {
        uint64_t glsn = append_batch(e, k, (size_t)(n - k < FILL_BATCH ? n - k : FILL_BATCH));
        if (k == 0)
            e->first_glsn = glsn;
        assert_int_equal(glsn, e->first_glsn + (uint64_t)k);
    }
}

/* A topic-wide iterator of [begin, end). */
static varlog_subscription_t *open_iter(uint64_t begin, uint64_t end)
{
    varlog_subscription_t *sub = NULL;
    varlog_err_t rc = varlog_subscribe_iter(g_env.c.client, 1, begin, end, &sub);
    if (rc != VARLOG_OK)
        fail_msg("varlog_subscribe_iter: %s: %s", varlog_err_name(rc), varlog_last_error());
    return sub;
}

/* The read windows sub asked for so far. */
static uint64_t windows_of(varlog_subscription_t *sub)
{
    varlog_subscription_stats_t st;
    assert_int_equal(varlog_subscription_stats(sub, &st), VARLOG_OK);
    return st.windows;
}

/* The reader looks away for 5 ms. */
static void pause_reading(void)
{
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* The range of sub is complete. */
static void expect_end(varlog_subscription_t *sub)
{
    varlog_entry_t entry;
    assert_int_equal(varlog_subscription_next(sub, 30000, &entry), VARLOG_ERR_END);
}

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static bool heap_measured(void)
{
    return !test_under_valgrind() && !test_under_asan() && !test_under_tsan();
}

/* Reads entries [from, to) of the log, each the one expected. */
static void read_range(varlog_subscription_t *sub, const env_t *e, long from, long to)
{
    for (long k = from; k < to; k++) {
        varlog_entry_t entry;
        varlog_err_t rc = varlog_subscription_next(sub, 30000, &entry);
        if (rc != VARLOG_OK)
            fail_msg("entry %ld: %s: %s", k, varlog_err_name(rc), varlog_last_error());
        assert_int_equal(entry.meta.glsn, e->first_glsn + (uint64_t)k);
        uint64_t idx;
        assert_true(entry.len == ENTRY_LEN);
        memcpy(&idx, entry.data, sizeof(idx));
        assert_int_equal(idx, (uint64_t)k);
    }
}

/* The heap's growth once it stopped growing: sampled every 50 ms until it grew by less than
 * 64 KiB over the last second, for at most 15 s. */
static size_t settled_growth(size_t base)
{
    size_t last = heap_in_use(), peak = last;
    int64_t still_since = test_now_ms(), give_up = still_since + 15000;
    while (test_now_ms() < give_up) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        size_t now = heap_in_use();
        if (now > peak)
            peak = now;
        if (now > last + 64 * 1024) {
            last = now;
            still_since = test_now_ms();
        } else if (test_now_ms() - still_since >= 1000) {
            break;
        }
    }
    return peak > base ? peak - base : 0;
}

/* Opens a topic-wide iterator over n entries, reads a quarter, stops reading until the heap
 * settles and fails with what if it grew past bound; then reads the rest. */
static void stall_and_measure(long n, size_t bound, const char *what)
{
    malloc_trim(0);
    size_t base = heap_in_use();
    varlog_subscription_t *sub = open_iter(g_env.first_glsn, g_env.first_glsn + (uint64_t)n);
    read_range(sub, &g_env, 0, n / 4);
    size_t grew = settled_growth(base);
    print_message("stalled after %ld of %ld entries of %d B over %d log streams: the heap grew "
                  "by %zu KiB (bound %zu KiB)%s\n",
                  n / 4, n, ENTRY_LEN, LOG_STREAMS, grew / 1024, bound / 1024,
                  heap_measured() ? "" : " (not measured: ASan, TSan or valgrind own malloc)");
    if (heap_measured() && grew > bound)
        fail_msg("a stalled reader's heap grew by %zu KiB, above %zu KiB: %s", grew / 1024,
                 bound / 1024, what);
    read_range(sub, &g_env, n / 4, n);
    varlog_subscription_close(&sub);
}

static void test_stalled_reader_holds_its_read_window(void **state)
{
    (void)state;
    long n = test_scale(8192, 8); /* 32 MiB of entries; 4 MiB under valgrind */
    env_start(&g_env, "true", "4194304");
    fill(&g_env, n);
    stall_and_measure(n, WINDOW_BYTES + SLACK + READ_CHUNKS,
                      "the node sent past the read window, or the client asked for more");
}

static void test_stalled_reader_holds_a_window_per_stream(void **state)
{
    (void)state;
    long n = test_scale(8192, 8);
    env_start(&g_env, "false", "0");
    fill(&g_env, n);
    stall_and_measure(n, LOG_STREAMS * (PREFETCH_PER_LS + WINDOW_PER_LS) + SLACK,
                      "gRPC's windows grew though grpc.bdp.probe is false");
}

/* Read windows of their least size (subscribe.window.bytes 1: 64 GLSNs per log stream) and
 * buffers of 8 entries per stream, the reader pausing every 32 entries: the next window's
 * streams, opened ahead, fill their buffers while nobody reads, and the switches take them
 * over. Every entry once, in order, across 16 windows, and END after the last. (A switch
 * that waited for news of a stream taken over, announced before it, is caught by
 * test_subscribe_faults_in_small_windows, test_drops_while_tailing: it waited for ever.) */
static void test_windows_switch_after_a_pause(void **state)
{
    (void)state;
    long n = 16 * LOG_STREAMS * 64;
    g_prefetch = "8"; /* a stream opened ahead fills its buffer, and then brings no news */
    env_start(&g_env, "true", "1");
    fill(&g_env, n);
    varlog_subscription_t *sub = open_iter(g_env.first_glsn, g_env.first_glsn + (uint64_t)n);
    for (long k = 0; k < n; k += 32) {
        read_range(sub, &g_env, k, k + 32);
        pause_reading();
    }
    expect_end(sub);
    assert_true(windows_of(sub) >= 16); /* 256 GLSNs each */
    varlog_subscription_close(&sub);
}

/* A tail read in least-size windows (256 GLSNs over the 4 log streams) while batches of 16
 * records are appended, read after every 4 batches: batches straddle windows' ends, so a
 * log stream's last entries of a window and its first of the next come together, on the
 * window's stream and on the one opened ahead; every entry once, in order. */
static void test_tail_across_windows(void **state)
{
    (void)state;
    enum { BATCH = 16 };
    long n = 8 * LOG_STREAMS * 64;
    g_prefetch = "8"; /* a stream opened ahead fills its buffer, and then brings no news */
    env_start(&g_env, "true", "1");
    g_env.first_glsn = 1; /* a fresh log */
    varlog_subscription_t *sub = open_iter(1, VARLOG_GLSN_MAX);
    for (long k = 0; k < n; k += BATCH) {
        assert_int_equal(append_batch(&g_env, k, BATCH), 1 + (uint64_t)k);
        if ((k + BATCH) % (4 * BATCH) == 0)
            read_range(sub, &g_env, k + BATCH - 4 * BATCH, k + BATCH);
    }
    assert_true(windows_of(sub) >= 8); /* 256 GLSNs each */
    varlog_subscription_close(&sub);
}

/* varlog_subscribe_to in least-size windows (64 LLSNs), buffers of 8 entries, the reader
 * pausing every 32 entries: a node ends each window's stream right after its last LLSN, and
 * the next window's, opened ahead, takes over. Every entry of the log stream once, in
 * LLSN order, and END after the last. */
static void test_subscribe_to_windows(void **state)
{
    (void)state;
    long n = 16 * LOG_STREAMS * 64;
    g_prefetch = "8";
    env_start(&g_env, "true", "1");
    fill(&g_env, n);
    varlog_entry_meta_t first, last;
    bool complete = false;
    assert_int_equal(varlog_peek(g_env.c.client, 1, 1, 10000, &first, &last, &complete), VARLOG_OK);
    assert_true(last.llsn >= 4 * 64); /* batches of 64 over 4 log streams: several windows */
    varlog_subscription_t *sub = NULL;
    varlog_err_t rc = varlog_subscribe_to_iter(g_env.c.client, 1, 1, 1, last.llsn + 1, &sub);
    if (rc != VARLOG_OK)
        fail_msg("varlog_subscribe_to_iter: %s: %s", varlog_err_name(rc), varlog_last_error());
    uint64_t prev_idx = 0;
    for (uint64_t llsn = 1; llsn <= last.llsn; llsn++) {
        varlog_entry_t entry;
        rc = varlog_subscription_next(sub, 30000, &entry);
        if (rc != VARLOG_OK)
            fail_msg("LLSN %llu: %s: %s", (unsigned long long)llsn, varlog_err_name(rc),
                     varlog_last_error());
        assert_int_equal(entry.meta.llsn, llsn);
        uint64_t idx;
        assert_true(entry.len == ENTRY_LEN);
        memcpy(&idx, entry.data, sizeof(idx));
        assert_true(llsn == 1 || idx > prev_idx); /* the log stream's records in their order */
        prev_idx = idx;
        if (llsn % 32 == 0)
            pause_reading();
    }
    expect_end(sub);
    assert_true(windows_of(sub) >= last.llsn / 64); /* 64 LLSNs each */
    varlog_subscription_close(&sub);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_stalled_reader_holds_its_read_window, teardown),
        cmocka_unit_test_teardown(test_stalled_reader_holds_a_window_per_stream, teardown),
        cmocka_unit_test_teardown(test_windows_switch_after_a_pause, teardown),
        cmocka_unit_test_teardown(test_tail_across_windows, teardown),
        cmocka_unit_test_teardown(test_subscribe_to_windows, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
