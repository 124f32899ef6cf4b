/* Every varlog_appender_append of a suite through varlog_appender_append_ref instead, when
 * VARLOG_TEST_APPEND_REF is set (the suites' "ref" variants), so that each promise the suite
 * checks (order, outcomes, faults, retries, read-back of ambiguous batches, close) is checked
 * with the records' bytes referenced rather than copied. Linked with
 * -Wl,--wrap=varlog_appender_append.
 *
 * Each call's records go to a buffer of their own, which release overwrites before it frees
 * it: bytes sent after their release would be stored overwritten, which the suites' checks of
 * what is stored see, and read after it are a use after free that ASan and valgrind report.
 * A release that does not come is a leak they report; one that comes twice is a double free;
 * one after cb, or with an error returned, is noted as wrong (atu_note_bad). */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "appender_internal.h"
#include "appender_test_util.h"
#include "varlog/appender.h"

varlog_err_t __real_varlog_appender_append(varlog_appender_t *app, const varlog_record_t *records,
                                           size_t n, int64_t timeout_ms, varlog_append_cb *cb,
                                           void *opaque);
varlog_err_t __wrap_varlog_appender_append(varlog_appender_t *app, const varlog_record_t *records,
                                           size_t n, int64_t timeout_ms, varlog_append_cb *cb,
                                           void *opaque);

typedef struct ref_call {
    varlog_append_cb *cb;
    void *opaque;
    atomic_bool called; /* cb ran: release must come after it */
    size_t bytes;
    uint8_t *data; /* the records' bytes, one after the other */
} ref_call_t;

static void ref_cb(const varlog_append_result_t *r, void *opaque)
{
    ref_call_t *rc = opaque;
    rc->cb(r, rc->opaque);
    atomic_store(&rc->called, true);
}

static void ref_release(void *opaque)
{
    ref_call_t *rc = opaque;
    if (!atomic_load(&rc->called))
        atu_note_bad("release of a call ran before its callback");
    memset(rc->data, 0xdd, rc->bytes);
    free(rc->data);
    free(rc);
}

varlog_err_t __wrap_varlog_appender_append(varlog_appender_t *app, const varlog_record_t *records,
                                           size_t n, int64_t timeout_ms, varlog_append_cb *cb,
                                           void *opaque)
{
    static int by_ref = -1;
    if (by_ref < 0) {
        by_ref = getenv("VARLOG_TEST_APPEND_REF") != NULL;
        if (by_ref)
            app_ref_min_bytes = 1; /* the suites' records are small: every one referenced */
    }
    /* Bad input goes through unchanged: the errors are the suite's to check. */
    if (!by_ref || !app || !records || !cb || n == 0 || n > 100000)
        return __real_varlog_appender_append(app, records, n, timeout_ms, cb, opaque);
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += records[i].len;
    ref_call_t *rc = calloc(1, sizeof(*rc));
    varlog_record_t *recs = malloc(n * sizeof(*recs));
    uint8_t *data = malloc(bytes ? bytes : 1);
    if (!rc || !recs || !data) {
        free(rc);
        free(recs);
        free(data);
        return __real_varlog_appender_append(app, records, n, timeout_ms, cb, opaque);
    }
    *rc = (ref_call_t){.cb = cb, .opaque = opaque, .bytes = bytes, .data = data};
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        recs[i] =
            (varlog_record_t){.data = records[i].data ? data + at : NULL, .len = records[i].len};
        if (records[i].data && records[i].len)
            memcpy(data + at, records[i].data, records[i].len);
        at += records[i].len;
    }
    varlog_err_t err =
        varlog_appender_append_ref(app, recs, n, timeout_ms, ref_release, ref_cb, rc);
    free(recs); /* read before the call returned */
    if (err != VARLOG_OK) {
        free(data); /* never referenced: no release comes */
        free(rc);
    }
    return err;
}
