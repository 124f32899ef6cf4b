/* The error table and the version functions. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "varlog/varlog.h"

static const varlog_err_t all_codes[] = {
    VARLOG_OK,
    VARLOG_ERR_INVALID_ARG,
    VARLOG_ERR_NOMEM,
    VARLOG_ERR_TIMED_OUT,
    VARLOG_ERR_CLOSED,
    VARLOG_ERR_QUEUE_FULL,
    VARLOG_ERR_INTERNAL,
    VARLOG_ERR_END,
    VARLOG_ERR_DECODE,
    VARLOG_ERR_ENCODE,
    VARLOG_ERR_STATE,
    VARLOG_ERR_RPC_CANCELLED,
    VARLOG_ERR_RPC_UNKNOWN,
    VARLOG_ERR_RPC_INVALID_ARGUMENT,
    VARLOG_ERR_RPC_DEADLINE_EXCEEDED,
    VARLOG_ERR_RPC_NOT_FOUND,
    VARLOG_ERR_RPC_ALREADY_EXISTS,
    VARLOG_ERR_RPC_PERMISSION_DENIED,
    VARLOG_ERR_RPC_RESOURCE_EXHAUSTED,
    VARLOG_ERR_RPC_FAILED_PRECONDITION,
    VARLOG_ERR_RPC_ABORTED,
    VARLOG_ERR_RPC_OUT_OF_RANGE,
    VARLOG_ERR_RPC_UNIMPLEMENTED,
    VARLOG_ERR_RPC_INTERNAL,
    VARLOG_ERR_RPC_UNAVAILABLE,
    VARLOG_ERR_RPC_DATA_LOSS,
    VARLOG_ERR_RPC_UNAUTHENTICATED,
    VARLOG_ERR_SEALED,
    VARLOG_ERR_TRIMMED,
};
#define N_CODES (sizeof(all_codes) / sizeof(all_codes[0]))

static void test_every_code_has_a_distinct_name_and_text(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CODES; i++) {
        const char *name = varlog_err_name(all_codes[i]);
        const char *text = varlog_err_str(all_codes[i]);
        assert_string_not_equal(name, "ERR_UNKNOWN_CODE");
        assert_string_not_equal(text, "unknown error");
        for (size_t j = 0; j < i; j++) {
            assert_string_not_equal(name, varlog_err_name(all_codes[j]));
            assert_string_not_equal(text, varlog_err_str(all_codes[j]));
        }
    }
}

static void test_unknown_code(void **state)
{
    (void)state;
    assert_string_equal(varlog_err_str((varlog_err_t)12345), "unknown error");
    assert_string_equal(varlog_err_name((varlog_err_t)-999), "ERR_UNKNOWN_CODE");
    assert_false(varlog_err_is_retriable((varlog_err_t)12345));
}

static void test_rpc_codes_follow_grpc_numbers(void **state)
{
    (void)state;
    /* The remote range mirrors grpc_status_code so a status maps by value. */
    assert_int_equal(VARLOG_ERR_RPC_CANCELLED, 1);
    assert_int_equal(VARLOG_ERR_RPC_DEADLINE_EXCEEDED, 4);
    assert_int_equal(VARLOG_ERR_RPC_FAILED_PRECONDITION, 9);
    assert_int_equal(VARLOG_ERR_RPC_OUT_OF_RANGE, 11);
    assert_int_equal(VARLOG_ERR_RPC_UNAVAILABLE, 14);
    assert_int_equal(VARLOG_ERR_RPC_UNAUTHENTICATED, 16);
}

static void test_retriable(void **state)
{
    (void)state;
    assert_true(varlog_err_is_retriable(VARLOG_ERR_RPC_UNAVAILABLE));
    assert_true(varlog_err_is_retriable(VARLOG_ERR_QUEUE_FULL));
    assert_true(varlog_err_is_retriable(VARLOG_ERR_TIMED_OUT));
    assert_false(varlog_err_is_retriable(VARLOG_OK));
    assert_false(varlog_err_is_retriable(VARLOG_ERR_INVALID_ARG));
    assert_false(varlog_err_is_retriable(VARLOG_ERR_RPC_INVALID_ARGUMENT));
    assert_false(varlog_err_is_retriable(VARLOG_ERR_TRIMMED));
}

static void test_version_matches_the_build(void **state)
{
    (void)state;
    assert_string_equal(varlog_version_str(), VARLOG_PROJECT_VERSION);
    assert_int_equal(varlog_version(), VARLOG_VERSION_NUM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_code_has_a_distinct_name_and_text),
        cmocka_unit_test(test_unknown_code),
        cmocka_unit_test(test_rpc_codes_follow_grpc_numbers),
        cmocka_unit_test(test_retriable),
        cmocka_unit_test(test_version_matches_the_build),
    };
    return cmocka_run_group_tests_name("error", tests, NULL, NULL);
}
