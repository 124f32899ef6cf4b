/* grpc.absl.deadlock.detection: a client opened with the default (false) turns abseil's mutex
 * deadlock detection off, once for the process; one opened with true leaves it alone. Which
 * clients ask is seen by wrapping wire_absl_deadlock_detection_off at link time
 * (-Wl,--wrap); that the setter is found in the process is the real function's answer with
 * Debian's abseil, which the project builds against. */
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
#include "varlog/conf.h"
#include "wire.h"

static atomic_int asked;
static atomic_bool found;

bool __real_wire_absl_deadlock_detection_off(void);
bool __wrap_wire_absl_deadlock_detection_off(void);

bool __wrap_wire_absl_deadlock_detection_off(void)
{
    atomic_fetch_add(&asked, 1);
    bool off = __real_wire_absl_deadlock_detection_off();
    atomic_store(&found, off);
    return off;
}

static void test_default_turns_it_off(void **state)
{
    (void)state;
    atomic_store(&asked, 0);
    client_fixture_t f;
    cf_start(&f, 1, 1, NULL);
    assert_int_equal(atomic_load(&asked), 1);
    /* Debian's abseil (libabsl-dev) has the setter under its inline namespace. */
    assert_true(atomic_load(&found));
    cf_stop(&f);
}

static void test_true_leaves_it_alone(void **state)
{
    (void)state;
    atomic_store(&asked, 0);
    client_fixture_t f;
    cf_start(&f, 1, 1, "grpc.absl.deadlock.detection", "true", NULL);
    assert_int_equal(atomic_load(&asked), 0);
    cf_stop(&f);
}

static void test_once_for_the_process(void **state)
{
    (void)state;
    /* Every client asks; the setter runs once, and the answer stays. */
    assert_true(__real_wire_absl_deadlock_detection_off());
    assert_true(__real_wire_absl_deadlock_detection_off());
}

static void test_bad_value(void **state)
{
    (void)state;
    varlog_conf_t *conf = varlog_conf_new();
    char err[256];
    assert_int_not_equal(
        varlog_conf_set(conf, "grpc.absl.deadlock.detection", "sometimes", err, sizeof(err)),
        VARLOG_OK);
    assert_non_null(strstr(err, "grpc.absl.deadlock.detection"));
    varlog_conf_destroy(conf);
}

/* An optional argument runs only the tests whose names match it (cmocka's pattern). */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_turns_it_off),
        cmocka_unit_test(test_true_leaves_it_alone),
        cmocka_unit_test(test_once_for_the_process),
        cmocka_unit_test(test_bad_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
