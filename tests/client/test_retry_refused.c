/* When the client's engine refuses a retry (it shut down as the client closes, or its task
 * limit is reached), the appender's callback says so, with a code and a text of the same
 * moment: CLOSED and "the client is closing", not CLOSED with the text of the stream failure
 * that asked for the retry (issue 19, point 2.2); a subscription that cannot schedule its
 * resubscription fails with the engine's reason. The refusal is made at will by wrapping
 * vq_engine_submit at link time (-Wl,--wrap). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "client_fixture.h"
#include "test_support.h"
#include "varlog/appender.h"
#include "varlog/subscribe.h"
#include "vq/engine.h"

#define TIMEOUT 30000
#define GRPC_UNAVAILABLE 14

/* ---- the wrapped engine ----------------------------------------------------------------- */

static atomic_int refuse_with; /* a vq_err_t to refuse every submit with; 0: pass through */
static atomic_int refused;

vq_err_t __real_vq_engine_submit(vq_engine_t *e, const vq_task_spec_t *spec);
vq_err_t __wrap_vq_engine_submit(vq_engine_t *e, const vq_task_spec_t *spec);

vq_err_t __wrap_vq_engine_submit(vq_engine_t *e, const vq_task_spec_t *spec)
{
    int err = atomic_load(&refuse_with);
    if (err != 0) {
        atomic_fetch_add(&refused, 1);
        return (vq_err_t)err;
    }
    return __real_vq_engine_submit(e, spec);
}

static int reset(void **state)
{
    (void)state;
    atomic_store(&refuse_with, 0);
    atomic_store(&refused, 0);
    return 0;
}

/* ---- the appender ------------------------------------------------------------------------- */

typedef struct result {
    atomic_int calls;
    varlog_err_t err;
    varlog_outcome_t outcome;
    char text[512];
} result_t;

static void on_appended(const varlog_append_result_t *res, void *opaque)
{
    result_t *r = opaque;
    r->err = res->err;
    r->outcome = res->outcome;
    snprintf(r->text, sizeof(r->text), "%s", res->errtext ? res->errtext : "");
    atomic_fetch_add(&r->calls, 1);
}

/* One batch whose stream fails (retriable), with the engine refusing its retry with
 * refusal: the callback's code and text both give expect_err's reason, and the stream's
 * failure as the last attempt. */
static void refused_retry(int refusal, varlog_err_t expect_err, const char *expect_text)
{
    client_fixture_t f;
    cf_start(&f, 1, 1, "append.retries", "3", NULL);
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(f.client, 1, 1, &app), VARLOG_OK);
    assert_int_equal(
        varlog_server_fail_next(f.srv, CF_PATH_APPEND, GRPC_UNAVAILABLE, "not primary replica", 1),
        VARLOG_OK);
    atomic_store(&refuse_with, refusal);
    result_t r = {0};
    varlog_record_t rec = cf_record("x");
    assert_int_equal(varlog_appender_append(app, &rec, 1, TIMEOUT, on_appended, &r), VARLOG_OK);
    assert_int_equal(varlog_appender_flush(app, TIMEOUT, NULL), VARLOG_OK);
    atomic_store(&refuse_with, 0);
    assert_int_equal(atomic_load(&r.calls), 1);
    assert_true(atomic_load(&refused) >= 1);
    print_message("    %s: %s\n", varlog_err_name(r.err), r.text);
    assert_int_equal(r.err, expect_err);
    assert_int_equal(r.outcome, VARLOG_NOT_APPENDED);
    if (!strstr(r.text, expect_text))
        fail_msg("the text does not say '%s': %s", expect_text, r.text);
    assert_non_null(strstr(r.text, "not primary replica")); /* the last attempt */
    assert_int_equal(varlog_appender_close(&app, TIMEOUT), VARLOG_OK);
    cf_stop(&f);
}

static void test_appender_retry_refused_closing(void **state)
{
    (void)state;
    refused_retry(VQ_ERR_SHUTDOWN, VARLOG_ERR_CLOSED, "the client is closing");
}

static void test_appender_retry_refused_full(void **state)
{
    (void)state;
    refused_retry(VQ_ERR_FULL, VARLOG_ERR_QUEUE_FULL, "retry engine is at its task limit");
}

/* ---- a subscription ------------------------------------------------------------------------ */

/* A subscription's stream fails and its resubscription cannot be scheduled for want of
 * memory: the subscription fails with NOMEM, and says so. */
static void test_resubscribe_refused(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    varlog_record_t rec = cf_record("x");
    assert_int_equal(varlog_append(f.client, 1, &rec, 1, TIMEOUT, NULL, NULL), VARLOG_OK);
    assert_int_equal(varlog_server_fail_next(f.srv, "/varlog.snpb.LogIO/Subscribe",
                                             GRPC_UNAVAILABLE, "stream lost", 1),
                     VARLOG_OK);
    atomic_store(&refuse_with, VQ_ERR_NOMEM);
    varlog_subscription_t *sub = NULL;
    varlog_err_t rc = varlog_subscribe_iter(f.client, 1, 1, VARLOG_GLSN_MAX, &sub);
    if (rc == VARLOG_OK) {
        varlog_entry_t e;
        rc = varlog_subscription_next(sub, TIMEOUT, &e);
    }
    atomic_store(&refuse_with, 0);
    print_message("    %s: %s\n", varlog_err_name(rc), varlog_last_error());
    assert_int_equal(rc, VARLOG_ERR_NOMEM);
    assert_non_null(strstr(varlog_last_error(), "resubscribed"));
    varlog_subscription_close(&sub);
    cf_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_appender_retry_refused_closing, reset),
        cmocka_unit_test_setup(test_appender_retry_refused_full, reset),
        cmocka_unit_test_setup(test_resubscribe_refused, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
