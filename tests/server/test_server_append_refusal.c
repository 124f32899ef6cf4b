/* An Append the embedded server refuses stores nothing of its batch: a batch is stored whole
 * or not at all, and every refusal (byte limit, no memory) is decided before anything of it
 * is stored, so that a client may take the status for "not appended" (issue 8, point 2).
 * Nothing stored is shown three ways: the stored bytes, the next batch's GLSN and LLSN, and a
 * subscription over the range.
 *
 * The binary is linked with -Wl,--wrap=malloc so that one allocation of the server's Append
 * handler can be made to fail (fail_next_malloc). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "server_test_util.h"

/* ---- allocation failure ---------------------------------------------------------------- */

void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size);

static atomic_size_t fail_size;

/* The next malloc of exactly size bytes on the server's thread returns NULL, once. */
static void fail_next_malloc(size_t size)
{
    atomic_store(&fail_size, size);
}

void *__wrap_malloc(size_t size)
{
    size_t want = atomic_load(&fail_size);
    char name[16] = "";
    if (want != 0 && size == want && pthread_getname_np(pthread_self(), name, sizeof(name)) == 0 &&
        strcmp(name, "varlog-server") == 0 && atomic_compare_exchange_strong(&fail_size, &want, 0))
        return NULL;
    return __real_malloc(size);
}

/* ---- helpers --------------------------------------------------------------------------- */

/* Subscribes to [1, end) of (1, 1), which must end with OK after exactly n entries with GLSN
 * and LLSN 1..n; returns the payload of the last one (caller frees). */
static char *expect_log(srv_fixture_t *f, uint64_t n)
{
    rpc_stream_t *s = subscribe_open(f, false, 1, 1, 1, n + 1, 16);
    char *last = NULL;
    for (uint64_t i = 1; i <= n; i++) {
        ProtobufCMessage *m = NULL;
        assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_OK);
        const Varlog__Snpb__SubscribeResponse *r = (const Varlog__Snpb__SubscribeResponse *)m;
        assert_int_equal(r->glsn, i);
        assert_int_equal(r->llsn, i);
        if (i == n) {
            last = calloc(1, r->payload.len + 1);
            assert_non_null(last);
            memcpy(last, r->payload.data, r->payload.len);
        }
        free_msg(m);
    }
    ProtobufCMessage *m = NULL;
    assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_ERR_END);
    rpc_stream_destroy(s);
    return last;
}

/* The replica's local high watermark and the topic's global one are both n. */
static void expect_watermarks(srv_fixture_t *f, uint64_t n)
{
    Varlog__Snpb__LogStreamReplicaMetadataResponse *md = NULL;
    assert_int_equal(replica_md(f, 1, 1, &md, NULL), VARLOG_OK);
    assert_int_equal(md->log_stream_replica->global_high_watermark, n);
    assert_int_equal(md->log_stream_replica->local_high_watermark->llsn, n);
    assert_int_equal(md->log_stream_replica->local_high_watermark->glsn, n);
    free_msg(md);
}

/* The next batch of one payload gets GLSN and LLSN n + 1: the refused batch took none. */
static void expect_next(srv_fixture_t *f, uint64_t n)
{
    uint64_t g = 0, l = 0;
    assert_int_equal(append_batches(f, 1, 1, 1, 1, &g, &l, NULL, NULL), VARLOG_OK);
    assert_int_equal(g, n + 1);
    assert_int_equal(l, n + 1);
}

/* ---- tests ----------------------------------------------------------------------------- */

/* A full node (refuse_when_full). The byte limit is checked for the whole batch: with 30 of
 * 40 bytes used, a batch of four 3-byte payloads is refused although its first three would
 * fit, and none of them is stored. The error text is the server's own (a real node has no
 * byte limit). */
static void test_byte_limit_refuses_whole_batch(void **state)
{
    (void)state;
    srv_fixture_t f;
    fixture_start_full(&f, 1, 1, 40);
    assert_int_equal(append_batches(&f, 1, 1, 1, 10, NULL, NULL, NULL, NULL), VARLOG_OK); /* 30B */
    rpc_status_t st;
    rpc_status_init(&st);
    size_t answered = 99;
    assert_int_equal(append_batches(&f, 1, 1, 1, 4, NULL, NULL, &answered, &st),
                     VARLOG_ERR_RPC_RESOURCE_EXHAUSTED);
    assert_int_equal(answered, 0);
    assert_int_equal(st.code, GRPC_STATUS_RESOURCE_EXHAUSTED);
    assert_string_equal(st.message, "storage: byte limit reached");
    rpc_status_clear(&st);

    assert_int_equal(varlog_server_stored_bytes(f.srv), 30);
    expect_watermarks(&f, 10);
    char *last = expect_log(&f, 10);
    assert_string_equal(last, "p-9");
    free(last);
    /* 3 more bytes still fit: the room the refused batch would have taken is free. */
    expect_next(&f, 10);
    assert_int_equal(varlog_server_stored_bytes(f.srv), 33);
    last = expect_log(&f, 11);
    assert_string_equal(last, "p-0");
    free(last);
    fixture_stop(&f);
}

/* Pipelined on one stream: the batch before the refused one is stored and answered, the
 * refused one and the one after it are not stored. */
static void test_byte_limit_mid_stream(void **state)
{
    (void)state;
    srv_fixture_t f;
    fixture_start_full(&f, 1, 1, 21);
    size_t answered = 99;
    uint64_t g[3] = {0, 0, 0};
    rpc_status_t st;
    rpc_status_init(&st);
    /* Three requests of 3 x 3 bytes: 9, 18, then 27 > 21; 3 more bytes still fit after. */
    assert_int_equal(append_batches(&f, 1, 1, 3, 3, g, NULL, &answered, &st),
                     VARLOG_ERR_RPC_RESOURCE_EXHAUSTED);
    assert_int_equal(answered, 2);
    assert_int_equal(g[0], 1);
    assert_int_equal(g[1], 4);
    assert_string_equal(st.message, "storage: byte limit reached");
    rpc_status_clear(&st);
    assert_int_equal(varlog_server_stored_bytes(f.srv), 18);
    expect_watermarks(&f, 6);
    char *last = expect_log(&f, 6);
    assert_string_equal(last, "p-2");
    free(last);
    expect_next(&f, 6);
    fixture_stop(&f);
}

/* When the server cannot allocate what it needs to answer a batch, it refuses the batch
 * before storing it (RESOURCE_EXHAUSTED "out of memory" means not appended). Before the
 * fix it stored the batch first and then answered the same status, so a client retrying on
 * it duplicated the records. */
static void test_no_memory_refuses_before_storing(void **state)
{
    (void)state;
    srv_fixture_t f;
    fixture_start(&f, 1, 1, 0);
    assert_int_equal(append_batches(&f, 1, 1, 1, 2, NULL, NULL, NULL, NULL), VARLOG_OK);
    rpc_status_t st;
    rpc_status_init(&st);
    size_t answered = 99;
    /* The chunk that holds the payloads of a batch of 7 x 3 bytes; nothing else on the
     * server's thread asks for that size. */
    fail_next_malloc(sizeof(store_chunk_t) + 7 * 3);
    assert_int_equal(append_batches(&f, 1, 1, 1, 7, NULL, NULL, &answered, &st),
                     VARLOG_ERR_RPC_RESOURCE_EXHAUSTED);
    assert_int_equal(atomic_load(&fail_size), 0); /* the failure was injected */
    assert_int_equal(answered, 0);
    assert_string_equal(st.message, "out of memory");
    rpc_status_clear(&st);

    assert_int_equal(varlog_server_stored_bytes(f.srv), 6);
    expect_watermarks(&f, 2);
    char *last = expect_log(&f, 2);
    assert_string_equal(last, "p-1");
    free(last);
    expect_next(&f, 2);
    fixture_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_byte_limit_refuses_whole_batch),
        cmocka_unit_test(test_byte_limit_mid_stream),
        cmocka_unit_test(test_no_memory_refuses_before_storing),
    };
    if (getenv("TEST_FILTER"))
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
