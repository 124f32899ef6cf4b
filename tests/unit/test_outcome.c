/* append_classify against the table in docs/ARCHITECTURE.md ("Synchronous append", step 4):
 * for every final status, whether the server can have stored the records, whether the log
 * stream is denied and whether another attempt is made. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "outcome.h"

typedef struct row {
    varlog_err_t err;
    const char *msg;
    bool own_deadline;
    bool closing;
    varlog_err_t want_err;
    bool maybe_if_sent; /* ambiguous when the request was sent */
    bool deny, retriable;
} row_t;

static const row_t rows[] = {
    {VARLOG_ERR_RPC_INVALID_ARGUMENT, "no payload", true, false, VARLOG_ERR_RPC_INVALID_ARGUMENT,
     false, false, false},
    {VARLOG_ERR_RPC_ALREADY_EXISTS, "", true, false, VARLOG_ERR_RPC_ALREADY_EXISTS, false, false,
     false},
    {VARLOG_ERR_RPC_PERMISSION_DENIED, "", true, false, VARLOG_ERR_RPC_PERMISSION_DENIED, false,
     false, false},
    {VARLOG_ERR_RPC_OUT_OF_RANGE, "", true, false, VARLOG_ERR_RPC_OUT_OF_RANGE, false, false,
     false},
    {VARLOG_ERR_RPC_UNIMPLEMENTED, "", true, false, VARLOG_ERR_RPC_UNIMPLEMENTED, false, false,
     false},
    {VARLOG_ERR_RPC_UNAUTHENTICATED, "", true, false, VARLOG_ERR_RPC_UNAUTHENTICATED, false, false,
     false},
    {VARLOG_ERR_RPC_FAILED_PRECONDITION, "sealed", true, false, VARLOG_ERR_SEALED, false, true,
     true},
    {VARLOG_ERR_RPC_FAILED_PRECONDITION, "learning", true, false,
     VARLOG_ERR_RPC_FAILED_PRECONDITION, false, true, false},
    {VARLOG_ERR_RPC_NOT_FOUND, "no such log stream", true, false, VARLOG_ERR_RPC_NOT_FOUND, false,
     true, true},
    {VARLOG_ERR_RPC_RESOURCE_EXHAUSTED, "storage: byte limit reached", true, false,
     VARLOG_ERR_RPC_RESOURCE_EXHAUSTED, false, true, true},
    {VARLOG_ERR_RPC_UNAVAILABLE, "not primary replica", true, false, VARLOG_ERR_RPC_UNAVAILABLE,
     false, true, true},
    {VARLOG_ERR_RPC_UNAVAILABLE, "connection refused", true, false, VARLOG_ERR_RPC_UNAVAILABLE,
     true, true, true},
    {VARLOG_ERR_RPC_CANCELLED, "", true, false, VARLOG_ERR_RPC_CANCELLED, true, true, true},
    {VARLOG_ERR_RPC_CANCELLED, "", true, true, VARLOG_ERR_CLOSED, true, false, false},
    {VARLOG_ERR_CLOSED, "", true, true, VARLOG_ERR_CLOSED, true, false, false},
    {VARLOG_ERR_RPC_DEADLINE_EXCEEDED, "", true, false, VARLOG_ERR_TIMED_OUT, true, false, false},
    {VARLOG_ERR_RPC_DEADLINE_EXCEEDED, "", false, false, VARLOG_ERR_RPC_DEADLINE_EXCEEDED, true,
     true, true},
    {VARLOG_ERR_RPC_UNKNOWN, "closed", true, false, VARLOG_ERR_RPC_UNKNOWN, true, true, true},
    {VARLOG_ERR_RPC_INTERNAL, "", true, false, VARLOG_ERR_RPC_INTERNAL, true, true, true},
    {VARLOG_ERR_RPC_ABORTED, "", true, false, VARLOG_ERR_RPC_ABORTED, true, true, true},
    {VARLOG_ERR_RPC_DATA_LOSS, "", true, false, VARLOG_ERR_RPC_DATA_LOSS, true, true, true},
    {VARLOG_ERR_END, "", true, false, VARLOG_ERR_END, true, true, true},
};

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const row_t *r = &rows[i];
        for (int sent = 0; sent < 2; sent++) {
            append_verdict_t v = append_classify(r->err, r->msg, sent, r->closing, r->own_deadline);
            if (v.err != r->want_err || v.ambiguous != (sent && r->maybe_if_sent) ||
                v.deny != r->deny || v.retriable != r->retriable)
                fail_msg("row %zu (%s \"%s\", sent %d): got %s ambiguous %d deny %d retriable %d",
                         i, varlog_err_name(r->err), r->msg, sent, varlog_err_name(v.err),
                         v.ambiguous, v.deny, v.retriable);
        }
    }
}

/* An answer that could not be decoded came from a server that may have stored the records,
 * whatever the send side reported. */
static void test_decode_is_always_ambiguous(void **state)
{
    (void)state;
    append_verdict_t v = append_classify(VARLOG_ERR_DECODE, "", false, false, true);
    assert_true(v.ambiguous);
    assert_false(v.retriable);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_decode_is_always_ambiguous),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
