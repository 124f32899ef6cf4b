#include "subscribe_range_cases.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>

#include <cmocka.h>

/* How long a stream expected to stay open is watched for an end it should not get. */
#define OPEN_WATCH_MS 500

/* Appends one entry to ls; returns its GLSN (and its LLSN in *llsn when given). */
static uint64_t append_one(srv_fixture_t *f, int32_t topic, int32_t ls, uint64_t *llsn)
{
    uint64_t glsn = 0;
    assert_int_equal(append_batches(f, topic, ls, 1, 1, &glsn, llsn, NULL, NULL), VARLOG_OK);
    return glsn;
}

/* Reads what a Subscribe (by_llsn: SubscribeTo) stream of [begin, end) sends: exactly the
 * positions want[0..n_want), then the end when `ends`, or nothing more within OPEN_WATCH_MS.
 * Returns the stream when it stays open (the caller destroys it), NULL when it ended. */
static rpc_stream_t *expect_positions(srv_fixture_t *f, bool by_llsn, int32_t topic, int32_t ls,
                                      uint64_t begin, uint64_t end, const uint64_t *want,
                                      size_t n_want, bool ends)
{
    rpc_stream_t *s = subscribe_open(f, by_llsn, topic, ls, begin, end, 8);
    uint64_t glsns[8], llsns[8];
    const uint64_t *got = by_llsn ? llsns : glsns;
    size_t n = 0;
    assert_true(n_want < 8);
    varlog_err_t err = subscribe_collect(s, n_want, T_TIMEOUT, glsns, llsns, &n);
    if (n != n_want || (n_want > 0 && err != VARLOG_OK))
        fail_msg("log stream %d, [%llu, %llu): %zu entries before %s, %zu expected", ls,
                 (unsigned long long)begin, (unsigned long long)end, n, varlog_err_str(err),
                 n_want);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(got[i], want[i]);
    ProtobufCMessage *m = NULL;
    err = rpc_stream_recv(s, ends ? T_TIMEOUT : OPEN_WATCH_MS, &m);
    if (err == VARLOG_OK) {
        free_msg(m);
        fail_msg("log stream %d, [%llu, %llu): an entry more than the %zu expected", ls,
                 (unsigned long long)begin, (unsigned long long)end, n_want);
    }
    if (ends) {
        if (err != VARLOG_ERR_END)
            fail_msg("log stream %d, [%llu, %llu): %s where the stream should end", ls,
                     (unsigned long long)begin, (unsigned long long)end, varlog_err_str(err));
        rpc_stream_destroy(s);
        return NULL;
    }
    if (err != VARLOG_ERR_TIMED_OUT)
        fail_msg("log stream %d, [%llu, %llu): %s where the stream should stay open", ls,
                 (unsigned long long)begin, (unsigned long long)end, varlog_err_str(err));
    return s;
}

static rpc_stream_t *expect_range(srv_fixture_t *f, int32_t topic, int32_t ls, uint64_t begin,
                                  uint64_t end, const uint64_t *want, size_t n_want, bool ends)
{
    return expect_positions(f, false, topic, ls, begin, end, want, n_want, ends);
}

static void rpc_destroy_open(rpc_stream_t *s)
{
    assert_non_null(s);
    rpc_stream_destroy(s);
}

void subscribe_range_cases_run(srv_fixture_t *f, int32_t topic, int32_t a, int32_t b)
{
    /* a holds g1 and g4, b holds g2 and g3 (GLSNs are dense: one append after another). */
    uint64_t la[2];
    uint64_t g1 = append_one(f, topic, a, &la[0]);
    uint64_t g2 = append_one(f, topic, b, NULL);
    uint64_t g3 = append_one(f, topic, b, NULL);
    uint64_t g4 = append_one(f, topic, a, &la[1]);
    assert_int_equal(la[1], la[0] + 1);
    assert_int_equal(g2, g1 + 1);
    assert_int_equal(g3, g1 + 2);
    assert_int_equal(g4, g1 + 3);
    const uint64_t a_all[] = {g1, g4}, b_all[] = {g2, g3};

    /* end - 1 is the log stream's own: it ends once that entry is sent. */
    expect_range(f, topic, a, g1, g4 + 1, a_all, 2, true);
    /* Committed, and the log stream's last entry below end: it ends after that entry. */
    expect_range(f, topic, b, g1, g4 + 1, b_all, 2, true);
    /* Below the log stream's first entry, or committed and past its last: ends at once. */
    expect_range(f, topic, b, g1, g2, NULL, 0, true);
    expect_range(f, topic, b, g4, g4 + 1, NULL, 0, true);
    /* The log stream holds an entry past the range, not its end - 1 (g3 is b's): open after
     * its last entry in range until the reader cancels. */
    rpc_destroy_open(expect_range(f, topic, a, g1, g4, a_all, 1, false));

    /* A range not committed yet: both streams wait. Then b gets the rest of it: its stream
     * ends with end - 1; a's, whose entry in range was sent before the range was committed,
     * stays open (its next scan stops at its last entry, finds nothing, and waits). */
    rpc_stream_t *sa = expect_range(f, topic, a, g4, g4 + 3, &g4, 1, false);
    rpc_stream_t *sb = expect_range(f, topic, b, g4, g4 + 3, NULL, 0, false);
    uint64_t g5 = append_one(f, topic, b, NULL);
    uint64_t g6 = append_one(f, topic, b, NULL);
    assert_int_equal(g6, g4 + 2);
    uint64_t got[4];
    size_t n = 0;
    assert_int_equal(subscribe_collect(sb, 3, T_TIMEOUT, got, NULL, &n), VARLOG_ERR_END);
    assert_int_equal(n, 2);
    assert_int_equal(got[0], g5);
    assert_int_equal(got[1], g6);
    ProtobufCMessage *m = NULL;
    assert_int_equal(rpc_stream_recv(sa, OPEN_WATCH_MS, &m), VARLOG_ERR_TIMED_OUT);
    rpc_stream_destroy(sa);
    rpc_stream_destroy(sb);

    /* SubscribeTo: LLSNs are dense, so a range ends once its end - 1 was sent, and one past
     * the log stream's last entry waits for it. */
    expect_positions(f, true, topic, a, la[0], la[1] + 1, la, 2, true);
    expect_positions(f, true, topic, a, la[0], la[0] + 1, la, 1, true);
    rpc_destroy_open(expect_positions(f, true, topic, a, la[1], la[1] + 2, &la[1], 1, false));
    rpc_destroy_open(expect_positions(f, true, topic, a, la[1] + 1, la[1] + 2, NULL, 0, false));
}
