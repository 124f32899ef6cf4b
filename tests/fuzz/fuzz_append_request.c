/* The server's Append decoder (server/src/append_wire.c) over the wire cursor
 * (rpc/src/wire.c), against protobuf-c: append_request_scan promises to accept exactly what
 * protobuf-c 1.4's unpack accepts, with the same values, however the request is cut into
 * slices; append_request_copy then hands over exactly the payloads protobuf-c reads. Also the
 * other direction: the response the server writes by hand is byte for byte protobuf-c's,
 * and a request the client encodes (client/src/log_io_codec.c) is what the server reads.
 *
 * Input: a mode byte, a count of cuts and the cuts (slice lengths), then the request. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_slices.h"
#include "fuzz_util.h"
#include "log_io_codec.h"
#include "server_internal.h"
#include "snpb/log_io.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_request(const uint8_t *msg, size_t len, const uint8_t *cuts, size_t n_cuts)
{
    fuzz_slices_t sl;
    fuzz_slices_make(&sl, msg, len, cuts, n_cuts);
    wire_cursor_t c;
    wire_cursor_init(&c, sl.s, sl.n);
    FUZZ_CHECK(c.left == len);
    append_req_t req;
    bool ok = append_request_scan(c, &req);

    /* However the bytes are cut, the same verdict. */
    fuzz_slices_t one;
    fuzz_slices_make(&one, msg, len, NULL, 0);
    wire_cursor_t c1;
    wire_cursor_init(&c1, one.s, one.n);
    append_req_t req1;
    FUZZ_CHECK(append_request_scan(c1, &req1) == ok);
    FUZZ_CHECK(!ok || memcmp(&req, &req1, sizeof(req)) == 0);

    Varlog__Snpb__AppendRequest *pb = varlog__snpb__append_request__unpack(NULL, len, msg);
    FUZZ_CHECK(ok == (pb != NULL));
    if (ok) {
        FUZZ_CHECK(req.topic_id == pb->topic_id);
        FUZZ_CHECK(req.log_stream_id == pb->log_stream_id);
        FUZZ_CHECK(req.n_payload == pb->n_payload);
        uint64_t bytes = 0;
        for (size_t i = 0; i < pb->n_payload; i++)
            bytes += pb->payload[i].len;
        FUZZ_CHECK(req.bytes == bytes);
        /* Exact sizes: a copy past either is an ASan report. */
        uint8_t *dst = malloc(bytes ? bytes : 1);
        store_entry_t *slots = calloc(req.n_payload ? req.n_payload : 1, sizeof(*slots));
        FUZZ_CHECK(dst && slots);
        append_request_copy(c, bytes ? dst : NULL, slots);
        for (size_t i = 0; i < pb->n_payload; i++) {
            FUZZ_CHECK(slots[i].len == pb->payload[i].len);
            FUZZ_CHECK(slots[i].len == 0 ||
                       memcmp(slots[i].data, pb->payload[i].data, slots[i].len) == 0);
        }
        free(slots);
        free(dst);
        varlog__snpb__append_request__free_unpacked(pb, NULL);
    }
    fuzz_slices_free(&one);
    fuzz_slices_free(&sl);
}

/* append_response_encode against protobuf-c's pack of the same message. */
static void check_response(fuzz_input_t *in)
{
    int32_t topic = (int32_t)fuzz_u32(in), ls = (int32_t)fuzz_u32(in);
    uint64_t glsn0 = (uint64_t)fuzz_u32(in) << (fuzz_u8(in) % 33);
    uint64_t llsn0 = (uint64_t)fuzz_u32(in) << (fuzz_u8(in) % 33);
    size_t n = fuzz_u8(in) % 65;
    size_t cap = append_response_max(n);
    uint8_t *buf = malloc(cap ? cap : 1);
    FUZZ_CHECK(buf);
    size_t len = append_response_encode(buf, topic, ls, glsn0, llsn0, n);
    FUZZ_CHECK(len <= cap);

    Varlog__Varlogpb__LogEntryMeta *metas = calloc(n + 1, sizeof(*metas));
    Varlog__Snpb__AppendResult *results = calloc(n + 1, sizeof(*results));
    Varlog__Snpb__AppendResult **rp = calloc(n + 1, sizeof(*rp));
    FUZZ_CHECK(metas && results && rp);
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
    size_t want = varlog__snpb__append_response__get_packed_size(&resp);
    uint8_t *packed = malloc(want ? want : 1);
    FUZZ_CHECK(packed);
    varlog__snpb__append_response__pack(&resp, packed);
    FUZZ_CHECK(len == want && memcmp(buf, packed, len) == 0);
    free(packed);
    free(rp);
    free(results);
    free(metas);
    free(buf);
}

/* A request as the client writes it, read by the server. */
static void check_client_request(fuzz_input_t *in)
{
    int32_t topic = (int32_t)fuzz_u32(in), ls = (int32_t)fuzz_u32(in);
    if (topic < 1)
        topic = 1;
    if (ls < 1)
        ls = 1;
    size_t n = fuzz_u8(in) % 16 + 1;
    const uint8_t *pay[16];
    size_t lens[16], cap = CODEC_HEAD_MAX;
    for (size_t i = 0; i < n; i++) {
        pay[i] = fuzz_piece(in, &lens[i]);
        cap += lens[i] + CODEC_PAYLOAD_OVERHEAD_MAX;
    }
    uint8_t *buf = malloc(cap);
    FUZZ_CHECK(buf);
    size_t len = codec_put_head(buf, topic, ls);
    FUZZ_CHECK(len <= CODEC_HEAD_MAX);
    for (size_t i = 0; i < n; i++) {
        size_t k = codec_put_payload(buf + len, pay[i], lens[i]);
        FUZZ_CHECK(k == codec_payload_size(lens[i]) && k <= lens[i] + CODEC_PAYLOAD_OVERHEAD_MAX);
        len += k;
    }
    grpc_slice s = grpc_slice_new(buf, len, free);
    wire_cursor_t c;
    wire_cursor_init(&c, &s, 1);
    append_req_t req;
    FUZZ_CHECK(append_request_scan(c, &req));
    FUZZ_CHECK(req.topic_id == topic && req.log_stream_id == ls && req.n_payload == n);
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += lens[i];
    FUZZ_CHECK(req.bytes == bytes);
    uint8_t *dst = malloc(bytes ? bytes : 1);
    store_entry_t slots[16];
    FUZZ_CHECK(dst);
    append_request_copy(c, bytes ? dst : NULL, slots);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(slots[i].len == lens[i] &&
                   (lens[i] == 0 || memcmp(slots[i].data, pay[i], lens[i]) == 0));
    free(dst);
    grpc_slice_unref(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input_t in = {data, size};
    uint8_t mode = fuzz_u8(&in);
    if (mode == 0xff) {
        check_response(&in);
        return 0;
    }
    if (mode == 0xfe) {
        check_client_request(&in);
        return 0;
    }
    size_t n_cuts = mode % 16;
    if (n_cuts > in.left)
        n_cuts = in.left;
    const uint8_t *cuts = in.p;
    check_request(in.p + n_cuts, in.left - n_cuts, cuts, n_cuts);
    return 0;
}
