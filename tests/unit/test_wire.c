/* wire.c: messages to and from byte buffers, statuses with Varlog error details. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "transport_test.pb-c.h"
#include "wire.h"

typedef Libvarlog__Transporttest__Request request_t;

static int group_setup(void **state)
{
    (void)state;
    wire_grpc_ref();
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    wire_grpc_unref();
    return 0;
}

static void test_pack_unpack_round_trip(void **state)
{
    (void)state;
    request_t req = LIBVARLOG__TRANSPORTTEST__REQUEST__INIT;
    req.seq = 7;
    req.payload.data = (uint8_t *)"abc";
    req.payload.len = 3;
    grpc_byte_buffer *bb = wire_pack(&req.base);
    assert_non_null(bb);
    request_t *got = (request_t *)wire_unpack(&libvarlog__transporttest__request__descriptor, bb);
    assert_non_null(got);
    assert_int_equal(got->seq, 7);
    assert_memory_equal(got->payload.data, "abc", 3);
    libvarlog__transporttest__request__free_unpacked(got, NULL);
    grpc_byte_buffer_destroy(bb);
}

static void test_unpack_multi_slice_buffer(void **state)
{
    (void)state;
    /* Large messages arrive in several slices: the copying path must give the same result. */
    request_t req = LIBVARLOG__TRANSPORTTEST__REQUEST__INIT;
    req.seq = 99;
    req.fail_message = "split across slices";
    size_t n = libvarlog__transporttest__request__get_packed_size(&req);
    uint8_t buf[64];
    assert_true(n <= sizeof(buf));
    libvarlog__transporttest__request__pack(&req, buf);
    grpc_slice parts[2] = {grpc_slice_from_copied_buffer((const char *)buf, 5),
                           grpc_slice_from_copied_buffer((const char *)buf + 5, n - 5)};
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(parts, 2);
    grpc_slice_unref(parts[0]);
    grpc_slice_unref(parts[1]);
    request_t *got = (request_t *)wire_unpack(&libvarlog__transporttest__request__descriptor, bb);
    assert_non_null(got);
    assert_int_equal(got->seq, 99);
    assert_string_equal(got->fail_message, "split across slices");
    libvarlog__transporttest__request__free_unpacked(got, NULL);
    grpc_byte_buffer_destroy(bb);
}

static void test_unpack_malformed(void **state)
{
    (void)state;
    /* Field 2 (bytes) claims 100 bytes but the buffer ends after 2. */
    const char bad[] = {0x12, 0x64, 'a', 'b'};
    grpc_slice s = grpc_slice_from_copied_buffer(bad, sizeof(bad));
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    assert_null(wire_unpack(&libvarlog__transporttest__request__descriptor, bb));
    grpc_byte_buffer_destroy(bb);
}

/* A buffer the reader hands over only as empty slices (a compressed message that inflates to
 * nothing, found by tests/fuzz/fuzz_wire): "" of length 0, and with nothing allocated for
 * it. The copy loop added 0 to the scratch's NULL pointer, which UBSan reports. */
static void test_flatten_empty_slices(void **state)
{
    (void)state;
    grpc_slice empty[2] = {grpc_empty_slice(), grpc_empty_slice()};
    grpc_byte_buffer *bufs[2] = {
        grpc_raw_compressed_byte_buffer_create(empty, 1, GRPC_COMPRESS_GZIP),
        grpc_raw_byte_buffer_create(empty, 2),
    };
    for (size_t i = 0; i < 2; i++) {
        assert_non_null(bufs[i]);
        wire_scratch_t scratch = {0};
        size_t len = 1;
        const uint8_t *p = wire_flatten(bufs[i], &scratch, &len);
        if (p) /* gRPC may refuse to inflate zero bytes: then NULL, as for any bad input */
            assert_int_equal(len, 0);
        wire_scratch_free(&scratch);
        grpc_byte_buffer_destroy(bufs[i]);
    }
}

static void test_status_details_round_trip(void **state)
{
    (void)state;
    const char *details[] = {"log stream: logstream: trimmed", "logstream: trimmed"};
    grpc_slice value;
    assert_true(wire_status_details_encode(GRPC_STATUS_OUT_OF_RANGE,
                                           "log stream: logstream: trimmed", details, 2, &value));
    grpc_metadata md[2];
    memset(md, 0, sizeof(md));
    md[0].key = grpc_slice_from_static_string("other-bin");
    md[0].value = grpc_slice_from_static_string("zz");
    md[1].key = grpc_slice_from_static_string(WIRE_STATUS_DETAILS_KEY);
    md[1].value = value;
    grpc_metadata_array arr = {2, 2, md};
    rpc_status_t st;
    rpc_status_init(&st);
    assert_int_equal(rpc_status_set(&st, GRPC_STATUS_OUT_OF_RANGE, "m"), VARLOG_OK);
    rpc_status_read_details(&st, &arr);
    assert_int_equal(st.n_details, 2);
    assert_string_equal(st.details[0], details[0]);
    assert_string_equal(st.details[1], details[1]);
    assert_string_equal(rpc_status_reason(&st), "logstream: trimmed");
    assert_int_equal(rpc_status_to_err(&st), VARLOG_ERR_RPC_OUT_OF_RANGE);

    rpc_status_t copy;
    rpc_status_init(&copy);
    assert_int_equal(rpc_status_copy(&copy, &st), VARLOG_OK);
    assert_int_equal(copy.code, GRPC_STATUS_OUT_OF_RANGE);
    assert_string_equal(copy.message, "m");
    assert_int_equal(copy.n_details, 2);
    assert_string_equal(copy.details[1], "logstream: trimmed");
    rpc_status_clear(&copy);
    rpc_status_clear(&st);
    grpc_slice_unref(value);
}

static void test_status_garbage_details_are_ignored(void **state)
{
    (void)state;
    grpc_metadata md;
    memset(&md, 0, sizeof(md));
    md.key = grpc_slice_from_static_string(WIRE_STATUS_DETAILS_KEY);
    md.value = grpc_slice_from_static_string("\x1a\x7f"); /* truncated field 3 */
    grpc_metadata_array arr = {1, 1, &md};
    rpc_status_t st;
    rpc_status_init(&st);
    assert_int_equal(rpc_status_set(&st, GRPC_STATUS_UNKNOWN, "plain"), VARLOG_OK);
    rpc_status_read_details(&st, &arr);
    assert_int_equal(st.n_details, 0);
    assert_string_equal(rpc_status_reason(&st), "plain");
    assert_int_equal(rpc_status_to_err(&st), VARLOG_ERR_RPC_UNKNOWN);
    rpc_status_clear(&st);
}

static void test_status_ok_and_out_of_range_codes(void **state)
{
    (void)state;
    rpc_status_t st;
    rpc_status_init(&st);
    assert_int_equal(rpc_status_to_err(&st), VARLOG_OK);
    assert_string_equal(rpc_status_reason(&st), "");
    st.code = (grpc_status_code)77; /* not a gRPC code */
    assert_int_equal(rpc_status_to_err(&st), VARLOG_ERR_RPC_UNKNOWN);
    rpc_status_clear(&st);
}

static void test_deadline(void **state)
{
    (void)state;
    gpr_timespec inf = wire_deadline(-1);
    assert_int_equal(gpr_time_cmp(inf, gpr_inf_future(GPR_CLOCK_MONOTONIC)), 0);
    gpr_timespec soon = wire_deadline(100);
    gpr_timespec now = gpr_now(GPR_CLOCK_MONOTONIC);
    assert_true(gpr_time_cmp(soon, now) > 0);
    assert_true(gpr_time_cmp(soon, gpr_time_add(now, gpr_time_from_millis(200, GPR_TIMESPAN))) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_unpack_round_trip),
        cmocka_unit_test(test_unpack_multi_slice_buffer),
        cmocka_unit_test(test_unpack_malformed),
        cmocka_unit_test(test_flatten_empty_slices),
        cmocka_unit_test(test_status_details_round_trip),
        cmocka_unit_test(test_status_garbage_details_are_ignored),
        cmocka_unit_test(test_status_ok_and_out_of_range_codes),
        cmocka_unit_test(test_deadline),
    };
    return cmocka_run_group_tests_name("wire", tests, group_setup, group_teardown);
}
