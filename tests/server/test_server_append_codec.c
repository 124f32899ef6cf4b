/* The Append handler's own codec and the store's batch chunks (issue 10):
 *   - append_response_encode writes the bytes protobuf-c's pack writes for the same
 *     AppendResponse, across varint lengths and zero values;
 *   - append_request_scan accepts exactly the AppendRequests protobuf-c's unpack accepts, with
 *     the same topic, log stream and payloads, whatever the slices the bytes arrive in:
 *     packed requests, unknown fields of every wire type, repeated ids, wrong wire types,
 *     groups, bad keys and lengths, every truncation and single-byte mutations;
 *   - a log stream's payloads live in chunks, which trim frees with the last entry of them,
 *     and the resident byte count follows;
 *   - through the server: payloads arriving in many slices are stored byte for byte, and an
 *     undecodable request ends the stream as the transport's decoding did. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server_internal.h"
#include "server_test_util.h"
#include "snpb/log_io.pb-c.h"

/* ---- the response ---------------------------------------------------------------------- */

static void expect_response_as_protobuf_c(int32_t topic, int32_t ls, uint64_t glsn0, uint64_t llsn0,
                                          size_t n)
{
    Varlog__Varlogpb__LogEntryMeta *metas = calloc(n, sizeof(*metas));
    Varlog__Snpb__AppendResult *results = calloc(n, sizeof(*results));
    Varlog__Snpb__AppendResult **rp = calloc(n, sizeof(*rp));
    assert_true(metas && results && rp);
    for (size_t i = 0; i < n; i++) {
        varlog__varlogpb__log_entry_meta__init(&metas[i]);
        metas[i].topic_id = topic;
        metas[i].log_stream_id = ls;
        metas[i].glsn = glsn0 + i;
        metas[i].llsn = llsn0 + i;
        varlog__snpb__append_result__init(&results[i]);
        results[i].meta = &metas[i];
        rp[i] = &results[i];
    }
    Varlog__Snpb__AppendResponse resp = VARLOG__SNPB__APPEND_RESPONSE__INIT;
    resp.n_results = n;
    resp.results = rp;
    size_t want_len = varlog__snpb__append_response__get_packed_size(&resp);
    uint8_t *want = malloc(want_len + 1);
    uint8_t *got = malloc(append_response_max(n) + 1);
    assert_true(want && got);
    assert_int_equal(varlog__snpb__append_response__pack(&resp, want), want_len);
    size_t got_len = append_response_encode(got, topic, ls, glsn0, llsn0, n);
    assert_true(got_len <= append_response_max(n));
    assert_int_equal(got_len, want_len);
    assert_memory_equal(got, want, want_len);
    free(got);
    free(want);
    free(rp);
    free(results);
    free(metas);
}

static void test_response_matches_protobuf_c(void **state)
{
    (void)state;
    expect_response_as_protobuf_c(1, 1, 1, 1, 1);
    expect_response_as_protobuf_c(1, 1, 1, 1, 1000);
    /* Varint lengths change inside the batch: 127 -> 128, 16383 -> 16384. */
    expect_response_as_protobuf_c(127, 128, 120, 16380, 10);
    expect_response_as_protobuf_c(INT32_MAX, 16384, (1ULL << 35) - 2, (1ULL << 56) - 1, 3);
    expect_response_as_protobuf_c(2, 3, UINT64_MAX - 1, UINT64_MAX - 2, 2);
    /* The widest results (10-byte negative ids and numbers), and zero values, which proto3
     * leaves out: not what the server sends, but the encoder is protobuf-c's either way. */
    expect_response_as_protobuf_c(-1, INT32_MIN, UINT64_MAX - 2, UINT64_MAX - 2, 3);
    expect_response_as_protobuf_c(0, 0, 0, 0, 2);
    expect_response_as_protobuf_c(5, 0, 0, 7, 1);
}

/* ---- the request ----------------------------------------------------------------------- */

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
} buf_t;

static void put(buf_t *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void put_varint(buf_t *b, uint64_t v)
{
    uint8_t tmp[10];
    put(b, tmp, wire_varint_put(tmp, v));
}

static void put_key(buf_t *b, uint64_t field, unsigned wt)
{
    put_varint(b, field << 3 | wt);
}

static void put_bytes(buf_t *b, uint64_t field, const char *s)
{
    put_key(b, field, 2);
    put_varint(b, strlen(s));
    put(b, s, strlen(s));
}

/* Decodes data with append_request_scan over the slices that cut it at cuts[0..n_cuts)
 * (increasing offsets) and checks the outcome against protobuf-c's unpack of the same bytes. */
static void expect_scan_with_cuts(const uint8_t *data, size_t len, const size_t *cuts,
                                  size_t n_cuts, const Varlog__Snpb__AppendRequest *want)
{
    grpc_slice slices[64];
    size_t n = 0, from = 0;
    assert_true(n_cuts < 63);
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t to = i < n_cuts ? cuts[i] : len;
        slices[n++] = grpc_slice_from_copied_buffer((const char *)data + from, to - from);
        from = to;
    }
    wire_cursor_t c;
    wire_cursor_init(&c, slices, n);
    append_req_t got;
    bool ok = append_request_scan(c, &got);
    if (!want) {
        if (ok)
            fail_msg("accepted a request protobuf-c refuses (%zu bytes, %zu slices)", len, n);
    } else {
        if (!ok)
            fail_msg("refused a request protobuf-c accepts (%zu bytes, %zu slices)", len, n);
        assert_int_equal(got.topic_id, want->topic_id);
        assert_int_equal(got.log_stream_id, want->log_stream_id);
        assert_int_equal(got.n_payload, want->n_payload);
        uint64_t bytes = 0;
        for (size_t i = 0; i < want->n_payload; i++)
            bytes += want->payload[i].len;
        assert_int_equal(got.bytes, bytes);
        uint8_t *dst = malloc(got.bytes + 1);
        store_entry_t *slots = calloc(got.n_payload + 1, sizeof(*slots));
        assert_true(dst && slots);
        append_request_copy(c, dst, slots);
        uint8_t *at = dst;
        for (size_t i = 0; i < want->n_payload; i++) {
            assert_int_equal(slots[i].len, want->payload[i].len);
            assert_ptr_equal(slots[i].data, at);
            if (slots[i].len)
                assert_memory_equal(slots[i].data, want->payload[i].data, slots[i].len);
            at += slots[i].len;
        }
        free(slots);
        free(dst);
    }
    for (size_t i = 0; i < n; i++)
        grpc_slice_unref(slices[i]);
}

/* As protobuf-c decides, in one slice, in every two-slice cut, and byte by byte. */
static void expect_scan(const uint8_t *data, size_t len)
{
    Varlog__Snpb__AppendRequest *want = varlog__snpb__append_request__unpack(NULL, len, data);
    expect_scan_with_cuts(data, len, NULL, 0, want);
    for (size_t cut = 0; cut <= len; cut++)
        expect_scan_with_cuts(data, len, &cut, 1, want);
    if (len > 0 && len < 60) {
        size_t cuts[64];
        for (size_t i = 0; i + 1 < len; i++)
            cuts[i] = i + 1;
        expect_scan_with_cuts(data, len, cuts, len - 1, want);
    }
    if (want)
        varlog__snpb__append_request__free_unpacked(want, NULL);
}

/* Every prefix of data too. */
static void expect_scan_prefixes(const uint8_t *data, size_t len)
{
    for (size_t n = 0; n <= len; n++)
        expect_scan(data, n);
}

static void expect_scan_buf(buf_t *b)
{
    expect_scan(b->p, b->len);
    free(b->p);
    memset(b, 0, sizeof(*b));
}

static void test_request_packed_by_protobuf_c(void **state)
{
    (void)state;
    static char big[20000];
    memset(big, 'x', sizeof(big));
    struct {
        int32_t topic, ls;
        size_t n, size;
    } cases[] = {
        {1, 1, 1, 100}, {1, 2, 3, 0},     {7, 9, 1000, 100},
        {0, 0, 2, 5},   {-1, -5, 1, 1},   {INT32_MAX, INT32_MIN, 2, 127},
        {3, 4, 2, 128}, {3, 4, 1, 16384},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        ProtobufCBinaryData *p = calloc(cases[k].n, sizeof(*p));
        assert_non_null(p);
        for (size_t i = 0; i < cases[k].n; i++) {
            p[i].data = (uint8_t *)big;
            p[i].len = cases[k].size;
        }
        Varlog__Snpb__AppendRequest r = VARLOG__SNPB__APPEND_REQUEST__INIT;
        r.topic_id = cases[k].topic;
        r.log_stream_id = cases[k].ls;
        r.n_payload = cases[k].n;
        r.payload = p;
        size_t len = varlog__snpb__append_request__get_packed_size(&r);
        uint8_t *data = malloc(len + 1);
        assert_non_null(data);
        varlog__snpb__append_request__pack(&r, data);
        if (len < 400)
            expect_scan_prefixes(data, len);
        else
            expect_scan_with_cuts(data, len, (size_t[]){1, 2, 3, 104, 105, 2000, len - 1}, 7, &r);
        free(data);
        free(p);
    }
}

static void test_request_unknown_fields_and_repeats(void **state)
{
    (void)state;
    buf_t b = {0};
    /* Fields in any order; every wire type of an unknown field is skipped; the last topic
     * and log stream win; old clients' backups (4) are skipped. */
    put_bytes(&b, 3, "first");
    put_key(&b, 1, 0);
    put_varint(&b, 5);
    put_bytes(&b, 4, "storage node");
    put_key(&b, 5, 0);
    put_varint(&b, UINT64_MAX);
    put_key(&b, 6, 1);
    put(&b, "12345678", 8);
    put_key(&b, 7, 5);
    put(&b, "1234", 4);
    put_key(&b, 536870911, 2); /* the largest field number */
    put_varint(&b, 0);
    put_key(&b, 2, 0);
    put_varint(&b, 9);
    put_bytes(&b, 3, "");
    put_key(&b, 1, 0);
    put_varint(&b, 6);
    put_bytes(&b, 3, "third");
    expect_scan_prefixes(b.p, b.len);
    free(b.p);
    memset(&b, 0, sizeof(b));

    /* A key in 5 bytes (redundant zero groups), an id in 10 (a negative int32) and an id
     * whose varint exceeds 32 bits (the low 32 are kept). */
    uint8_t long_key[] = {0x88, 0x80, 0x80, 0x80, 0x00, 0x01, 0x1a, 0x01, 'a'};
    expect_scan(long_key, sizeof(long_key));
    put_key(&b, 1, 0);
    put_varint(&b, (uint64_t)(int64_t)-7);
    put_key(&b, 2, 0);
    put_varint(&b, (1ULL << 40) + 3);
    put_bytes(&b, 3, "p");
    expect_scan_buf(&b);
    /* No fields at all, and only ids: valid messages without payloads. */
    expect_scan((const uint8_t *)"", 0);
    put_key(&b, 1, 0);
    put_varint(&b, 1);
    expect_scan_buf(&b);
}

static void test_request_malformed(void **state)
{
    (void)state;
    buf_t b = {0};
    /* Known fields with another wire type. */
    put_bytes(&b, 1, "x");
    expect_scan_buf(&b);
    put_key(&b, 2, 5);
    put(&b, "1234", 4);
    expect_scan_buf(&b);
    put_key(&b, 2, 1);
    put(&b, "12345678", 8);
    expect_scan_buf(&b);
    put_key(&b, 3, 0);
    put_varint(&b, 3);
    expect_scan_buf(&b);
    put_key(&b, 3, 5);
    put(&b, "1234", 4);
    expect_scan_buf(&b);
    /* Groups and the unused wire types, known and unknown fields. */
    for (unsigned wt = 3; wt <= 7; wt++) {
        if (wt == 5)
            continue;
        put_bytes(&b, 3, "ok");
        put_key(&b, 9, wt);
        put_varint(&b, 0);
        expect_scan_buf(&b);
        put_key(&b, 3, wt);
        put_varint(&b, 0);
        expect_scan_buf(&b);
    }
    /* A key of 6 bytes, a varint of 11, a length of 6, a length past the end. */
    uint8_t key6[] = {0x88, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01};
    expect_scan(key6, sizeof(key6));
    uint8_t varint11[] = {0x08, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
    expect_scan(varint11, sizeof(varint11));
    uint8_t varint10[] = {0x08, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
    expect_scan(varint10, sizeof(varint10));
    uint8_t len6[] = {0x1a, 0x81, 0x80, 0x80, 0x80, 0x80, 0x00, 'a'};
    expect_scan(len6, sizeof(len6));
    uint8_t len5[] = {0x1a, 0x81, 0x80, 0x80, 0x80, 0x00, 'a'};
    expect_scan(len5, sizeof(len5));
    uint8_t past_end[] = {0x1a, 0x05, 'a', 'b', 'c', 'd'};
    expect_scan(past_end, sizeof(past_end));
    uint8_t fixed_short[] = {0x39, '1', '2', '3'};
    expect_scan(fixed_short, sizeof(fixed_short));
    /* Lengths past 32 bits are not cut to 32. */
    uint8_t len33[] = {0x1a, 0x81, 0x80, 0x80, 0x80, 0x10, 'a'};
    expect_scan(len33, sizeof(len33));
    uint8_t len32[] = {0x1a, 0xfc, 0xff, 0xff, 0xff, 0x0f, 'a'};
    expect_scan(len32, sizeof(len32));
    /* Field 0: a one-byte key is refused, a longer one is an unknown field. */
    uint8_t field0[] = {0x08, 0x01, 0x00, 0x01};
    expect_scan(field0, sizeof(field0));
    uint8_t field0_len[] = {0x02, 0x00};
    expect_scan(field0_len, sizeof(field0_len));
    uint8_t field0_long[] = {0x80, 0x00, 0x01, 0x08, 0x01};
    expect_scan(field0_long, sizeof(field0_long));
}

/* Every byte of a small request with every kind of field, replaced by a few values. */
static void test_request_mutations(void **state)
{
    (void)state;
    buf_t b = {0};
    put_key(&b, 1, 0);
    put_varint(&b, 300);
    put_key(&b, 2, 0);
    put_varint(&b, 2);
    put_bytes(&b, 3, "abc");
    put_key(&b, 6, 1);
    put(&b, "12345678", 8);
    put_bytes(&b, 3, "");
    put_key(&b, 7, 5);
    put(&b, "1234", 4);
    put_bytes(&b, 4, "zz");
    put_bytes(&b, 3, "de");
    static const uint8_t values[] = {0x00, 0x01, 0x02, 0x05, 0x08, 0x0a,
                                     0x0b, 0x1a, 0x1b, 0x7f, 0x80, 0xff};
    uint8_t *m = malloc(b.len);
    assert_non_null(m);
    for (size_t i = 0; i < b.len; i++) {
        for (size_t v = 0; v < sizeof(values); v++) {
            memcpy(m, b.p, b.len);
            m[i] = values[v];
            expect_scan(m, b.len);
        }
    }
    free(m);
    free(b.p);
}

/* ---- the store's chunks ---------------------------------------------------------------- */

/* Stores one batch of n payloads of size bytes in (1, 1) as log_io does. */
static void store_batch(store_t *st, size_t n, size_t size)
{
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = store_topic_locked(st, 1);
    store_ls_t *ls = store_ls_locked(st, 1, 1);
    varlog_err_t err = VARLOG_ERR_INTERNAL;
    uint8_t *dst = NULL;
    store_entry_t *slots = store_reserve_locked(st, ls, n, n * size, &dst, &err);
    assert_non_null(slots);
    assert_int_equal(err, VARLOG_OK);
    for (size_t i = 0; i < n; i++) {
        slots[i].len = size;
        slots[i].data = dst + i * size;
        memset(slots[i].data, 'a' + (int)(ls->count + i), size);
    }
    uint64_t g = 0, l = 0;
    store_commit_locked(st, t, ls, n, n * size, &g, &l);
    pthread_mutex_unlock(&st->mu);
}

static void test_store_chunks_freed_by_trim(void **state)
{
    (void)state;
    store_t st;
    assert_int_equal(store_init(&st, 1, 1, 64 << 20), VARLOG_OK);
    /* Chunks of 30, 60 (taken by the second batch, 30 bytes left) and 120 bytes: a batch
     * goes where it fits, a new chunk is twice the last or the batch's size. */
    store_batch(&st, 3, 10); /* GLSN 1-3: chunk A (30) */
    store_batch(&st, 3, 10); /* 4-6: chunk B (60) */
    store_batch(&st, 2, 10); /* 7-8: chunk B */
    store_batch(&st, 5, 20); /* 9-13: chunk C (120) */
    pthread_mutex_lock(&st.mu);
    store_topic_t *t = store_topic_locked(&st, 1);
    store_ls_t *ls = store_ls_locked(&st, 1, 1);
    const size_t h = sizeof(store_chunk_t);
    const uint64_t arrays = ls->cap * sizeof(store_entry_t);
    assert_int_equal(st.bytes, 180);
    assert_int_equal(store_resident_bytes_locked(&st), arrays + (h + 30) + (h + 60) + (h + 120));
    assert_ptr_equal(ls->entries[0].chunk, ls->entries[2].chunk);
    assert_ptr_not_equal(ls->entries[2].chunk, ls->entries[3].chunk);
    assert_ptr_equal(ls->entries[3].chunk, ls->entries[7].chunk);
    assert_ptr_equal(ls->entries[8].chunk, ls->chunk);
    assert_int_equal(ls->entries[3].chunk->live, 5);
    assert_memory_equal(ls->entries[4].data, "eeeeeeeeee", 10);
    assert_ptr_equal(ls->entries[7].data, ls->entries[6].data + 10);

    /* The first batch and one entry of the second: chunk A goes, B stays for its four live
     * entries (their payloads still readable). */
    store_trim_locked(&st, t, 4);
    assert_int_equal(st.bytes, 140);
    assert_int_equal(store_resident_bytes_locked(&st), arrays + (h + 60) + (h + 120));
    assert_int_equal(ls->entries[ls->head].glsn, 5);
    assert_int_equal(ls->entries[ls->head].chunk->live, 4);
    assert_memory_equal(ls->entries[ls->head].data, "eeeeeeeeee", 10);
    store_trim_locked(&st, t, 8);
    assert_int_equal(st.bytes, 100);
    assert_int_equal(store_resident_bytes_locked(&st), arrays + (h + 120));
    /* The current chunk stays when all its entries are trimmed: the next batch fills it. */
    store_trim_locked(&st, t, 13);
    assert_int_equal(st.bytes, 0);
    assert_int_equal(store_resident_bytes_locked(&st), arrays + (h + 120));
    pthread_mutex_unlock(&st.mu);
    store_batch(&st, 1, 20);
    pthread_mutex_lock(&st.mu);
    assert_int_equal(store_resident_bytes_locked(&st), arrays + (h + 120));
    assert_int_equal(ls->chunk->used, 120);
    /* A batch that does not fit takes a new chunk; the old one, with no live entry left
     * after a trim, goes. */
    store_trim_locked(&st, t, 14);
    pthread_mutex_unlock(&st.mu);
    store_batch(&st, 1, 100);
    pthread_mutex_lock(&st.mu);
    assert_int_equal(store_resident_bytes_locked(&st), arrays + (h + 240));

    /* A full node's byte limit counts payload bytes; a refused reservation stores nothing. */
    st.refuse_when_full = true;
    varlog_err_t err = VARLOG_OK;
    uint8_t *dst = NULL;
    assert_null(store_reserve_locked(&st, ls, 1, (64 << 20) - 99, &dst, &err));
    assert_int_equal(err, VARLOG_ERR_RPC_RESOURCE_EXHAUSTED);
    assert_int_equal(st.bytes, 100);
    pthread_mutex_unlock(&st.mu);

    /* Large batches: chunks of 2 MiB and more are mappings of whole huge pages. */
    store_batch(&st, 3, 1 << 20);
    pthread_mutex_lock(&st.mu);
    assert_true(ls->chunk->mapped);
    assert_int_equal(ls->chunk->size % (2u << 20), 0);
    assert_true(ls->chunk->cap >= 3u << 20);
    pthread_mutex_unlock(&st.mu);
    /* What is left is freed with the store (valgrind's copy of this test checks). */
    store_destroy(&st);
}

/* ---- through the server ---------------------------------------------------------------- */

/* An Append stream sending the encoded requests bodies[0..n) (each taken), half-closed;
 * collects the responses' first GLSNs and the stream's status. */
static varlog_err_t append_raw(srv_fixture_t *f, grpc_slice *bodies, size_t n, uint64_t *first,
                               size_t *answered, rpc_status_t *st)
{
    rpc_stream_opts_t o = {.kind = RPC_STREAM_BIDI,
                           .response = &varlog__snpb__append_response__descriptor,
                           .recv_window = 64,
                           .timeout_ms = T_TIMEOUT,
                           .wait_for_ready = false,
                           .notify = NULL,
                           .notify_arg = NULL,
                           .deadline_ms = 0};
    rpc_stream_t *s = NULL;
    assert_int_equal(rpc_stream_open(f->client, f->addr, M_PATH_APPEND, &o, NULL, &s), VARLOG_OK);
    /* A request after one the server refuses can find the stream already ended (its status
     * came back first): that send fails with the stream's end, which the receive below then
     * reports too. */
    varlog_err_t send_err = VARLOG_OK;
    for (size_t i = 0; i < n; i++) {
        if (send_err == VARLOG_OK)
            send_err = rpc_stream_send_shared(s, NULL, 0, bodies[i]);
        grpc_slice_unref(bodies[i]);
    }
    rpc_stream_close_send(s);
    varlog_err_t err;
    *answered = 0;
    for (;;) {
        ProtobufCMessage *m = NULL;
        err = rpc_stream_recv(s, T_TIMEOUT, &m);
        if (err != VARLOG_OK)
            break;
        const Varlog__Snpb__AppendResponse *r = (const Varlog__Snpb__AppendResponse *)m;
        assert_true(r->n_results > 0);
        first[(*answered)++] = r->results[0]->meta->glsn;
        free_msg(m);
    }
    if (send_err != VARLOG_OK)
        assert_int_equal(send_err, err);
    if (rpc_stream_status(s))
        rpc_status_copy(st, rpc_stream_status(s));
    rpc_stream_destroy(s);
    return err;
}

static grpc_slice slice_of(const buf_t *b)
{
    return grpc_slice_from_copied_buffer((const char *)b->p, b->len);
}

/* Requests of 1000 distinct 100-byte payloads, which gRPC hands over in several slices,
 * with unknown fields between them: every payload comes back from Subscribe byte for byte,
 * so the copy across slice boundaries is exact. */
static void test_server_stores_payloads_exactly(void **state)
{
    (void)state;
    srv_fixture_t f;
    fixture_start(&f, 1, 1, 0);
    enum { REQS = 3, PER = 1000, SIZE = 100 };
    grpc_slice bodies[REQS];
    char payload[SIZE + 1];
    for (size_t r = 0; r < REQS; r++) {
        buf_t b = {0};
        put_key(&b, 1, 0);
        put_varint(&b, 1);
        put_key(&b, 2, 0);
        put_varint(&b, 1);
        for (size_t i = 0; i < PER; i++) {
            snprintf(payload, sizeof(payload), "%0100zu", r * PER + i);
            put_bytes(&b, 3, payload);
            if (i % 97 == 0)
                put_bytes(&b, 4, "unknown");
        }
        bodies[r] = slice_of(&b);
        free(b.p);
    }
    uint64_t first[REQS];
    size_t answered = 0;
    rpc_status_t st;
    rpc_status_init(&st);
    assert_int_equal(append_raw(&f, bodies, REQS, first, &answered, &st), VARLOG_ERR_END);
    assert_int_equal(answered, REQS);
    for (size_t r = 0; r < REQS; r++)
        assert_int_equal(first[r], 1 + r * PER);
    rpc_status_clear(&st);
    assert_int_equal(varlog_server_stored_bytes(f.srv), REQS * PER * SIZE);

    rpc_stream_t *s = subscribe_open(&f, false, 1, 1, 1, REQS * PER + 1, 64);
    for (size_t i = 0; i < REQS * PER; i++) {
        ProtobufCMessage *m = NULL;
        assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_OK);
        const Varlog__Snpb__SubscribeResponse *r = (const Varlog__Snpb__SubscribeResponse *)m;
        assert_int_equal(r->glsn, i + 1);
        snprintf(payload, sizeof(payload), "%0100zu", i);
        assert_int_equal(r->payload.len, SIZE);
        assert_memory_equal(r->payload.data, payload, SIZE);
        free_msg(m);
    }
    ProtobufCMessage *m = NULL;
    assert_int_equal(rpc_stream_recv(s, T_TIMEOUT, &m), VARLOG_ERR_END);
    rpc_stream_destroy(s);
    fixture_stop(&f);
}

/* A request protobuf-c cannot decode ends the stream with INVALID_ARGUMENT "cannot decode
 * request" after the earlier responses, and stores nothing of it, as when the transport
 * decoded it. */
static void test_server_refuses_undecodable(void **state)
{
    (void)state;
    srv_fixture_t f;
    fixture_start(&f, 1, 1, 0);
    buf_t good = {0}, bad = {0};
    put_key(&good, 1, 0);
    put_varint(&good, 1);
    put_key(&good, 2, 0);
    put_varint(&good, 1);
    put_bytes(&good, 3, "abc");
    put(&bad, good.p, good.len);
    put_key(&bad, 2, 2); /* log_stream_id as bytes */
    put_varint(&bad, 1);
    put(&bad, "x", 1);
    grpc_slice bodies[3] = {slice_of(&good), slice_of(&bad), slice_of(&good)};
    uint64_t first[3];
    size_t answered = 0;
    rpc_status_t st;
    rpc_status_init(&st);
    assert_int_equal(append_raw(&f, bodies, 3, first, &answered, &st),
                     VARLOG_ERR_RPC_INVALID_ARGUMENT);
    assert_int_equal(answered, 1);
    assert_int_equal(st.code, GRPC_STATUS_INVALID_ARGUMENT);
    assert_string_equal(st.message, "cannot decode request");
    rpc_status_clear(&st);
    assert_int_equal(varlog_server_stored_bytes(f.srv), 3);
    /* Counted as a stream, but the undecodable request not as a request. */
    assert_int_equal(varlog_server_request_count(f.srv, M_PATH_APPEND), 1);
    free(good.p);
    free(bad.p);
    fixture_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_response_matches_protobuf_c),
        cmocka_unit_test(test_request_packed_by_protobuf_c),
        cmocka_unit_test(test_request_unknown_fields_and_repeats),
        cmocka_unit_test(test_request_malformed),
        cmocka_unit_test(test_request_mutations),
        cmocka_unit_test(test_store_chunks_freed_by_trim),
        cmocka_unit_test(test_server_stores_payloads_exactly),
        cmocka_unit_test(test_server_refuses_undecodable),
    };
    if (getenv("TEST_FILTER"))
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    grpc_init();
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    grpc_shutdown();
    return rc;
}
