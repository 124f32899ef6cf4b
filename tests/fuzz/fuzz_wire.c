/* rpc/src/wire.c, the transport's readers of received bytes: the cursor that reads a
 * message in place across slices (against a model over the flat bytes), wire_flatten and
 * wire_unpack over plain and gzip-compressed byte buffers (against protobuf-c over the flat
 * bytes), and the grpc-status-details-bin trailer (google.rpc.Status with Varlog's
 * ErrorDetail) that every failed call carries.
 *
 * Input: a mode byte, then per mode: cuts and cursor operations; cuts and a message; or a
 * trailer value. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>

#include "errpb/errors.pb-c.h"
#include "fuzz_slices.h"
#include "fuzz_util.h"
#include "google/rpc/status.pb-c.h"
#include "mrpb/metadata_repository.pb-c.h"
#include "wire.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    wire_grpc_ref();
    return 0;
}

/* The model's varint: at most max_bytes bytes, bits past 64 dropped. */
static bool model_varint(const uint8_t *p, size_t left, unsigned max_bytes, uint64_t *v,
                         size_t *used)
{
    uint64_t r = 0;
    for (unsigned i = 0; i < max_bytes && i < left; i++) {
        if (7 * i < 64)
            r |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = r;
            *used = i + 1;
            return true;
        }
    }
    return false;
}

/* Operations on a cursor over the message cut into slices, each checked against the flat
 * bytes. A failed varint leaves the cursor somewhere inside it: the run stops there. */
static void check_cursor(fuzz_input_t *in)
{
    size_t n_cuts = fuzz_u8(in) % 16;
    uint8_t cuts[16];
    for (size_t i = 0; i < n_cuts; i++)
        cuts[i] = fuzz_u8(in);
    size_t n_ops = fuzz_u8(in) % 32;
    uint8_t ops[32][3];
    for (size_t i = 0; i < n_ops; i++)
        for (size_t k = 0; k < 3; k++)
            ops[i][k] = fuzz_u8(in);
    const uint8_t *msg = in->p;
    size_t len = in->left;
    fuzz_slices_t sl;
    fuzz_slices_make(&sl, msg, len, cuts, n_cuts);
    wire_cursor_t c;
    wire_cursor_init(&c, sl.s, sl.n);
    size_t off = 0;
    for (size_t i = 0; i < n_ops; i++) {
        FUZZ_CHECK(c.left == len - off);
        uint8_t op = ops[i][0];
        size_t n = (size_t)ops[i][1] | (size_t)ops[i][2] << 8;
        if (op % 3 == 0) {
            unsigned max_bytes = 1 + (op / 3) % 10;
            uint64_t v = 0, want = 0;
            size_t used = 0;
            bool ok = wire_cursor_varint(&c, max_bytes, &v);
            FUZZ_CHECK(ok == model_varint(msg + off, len - off, max_bytes, &want, &used));
            if (!ok)
                break;
            FUZZ_CHECK(v == want);
            off += used;
        } else if (op % 3 == 1) {
            bool ok = wire_cursor_skip(&c, n);
            FUZZ_CHECK(ok == (n <= len - off));
            if (ok)
                off += n;
        } else {
            uint8_t *dst = malloc(n ? n : 1);
            FUZZ_CHECK(dst);
            bool ok = wire_cursor_copy(&c, dst, n);
            FUZZ_CHECK(ok == (n <= len - off));
            if (ok) {
                FUZZ_CHECK(n == 0 || memcmp(dst, msg + off, n) == 0);
                off += n;
            }
            free(dst);
        }
    }
    fuzz_slices_free(&sl);
}

/* wire_flatten and wire_unpack (a GetMetadataResponse: the largest message the client
 * decodes with protobuf-c) over a byte buffer of the message cut into slices; gzip: the
 * bytes are a compressed message, which gRPC inflates while the buffer is read. */
static void check_buffer(fuzz_input_t *in, bool gzip)
{
    size_t n_cuts = fuzz_u8(in) % 8;
    uint8_t cuts[8];
    for (size_t i = 0; i < n_cuts; i++)
        cuts[i] = fuzz_u8(in);
    const uint8_t *msg = in->p;
    size_t len = in->left;
    fuzz_slices_t sl;
    fuzz_slices_make(&sl, msg, len, cuts, n_cuts);
    grpc_byte_buffer *bb =
        gzip ? grpc_raw_compressed_byte_buffer_create(sl.s, sl.n, GRPC_COMPRESS_GZIP)
             : grpc_raw_byte_buffer_create(sl.s, sl.n);
    FUZZ_CHECK(bb);
    wire_scratch_t scratch = {0};
    size_t flat_len = 0;
    const uint8_t *flat = wire_flatten(bb, &scratch, &flat_len);
    if (!gzip) {
        FUZZ_CHECK(flat && flat_len == len && (len == 0 || memcmp(flat, msg, len) == 0));
        wire_cursor_t c;
        FUZZ_CHECK(wire_cursor_init_bb(&c, bb) && c.left == len);
    }
    const ProtobufCMessageDescriptor *d = &varlog__mrpb__get_metadata_response__descriptor;
    ProtobufCMessage *m = wire_unpack(d, bb);
    if (flat) {
        ProtobufCMessage *want = protobuf_c_message_unpack(d, NULL, flat_len, flat);
        FUZZ_CHECK((m != NULL) == (want != NULL));
        if (want)
            protobuf_c_message_free_unpacked(want, NULL);
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    wire_scratch_free(&scratch);
    grpc_byte_buffer_destroy(bb);
    fuzz_slices_free(&sl);
}

/* What rpc_status_read_details should find: the error strings of the details that are
 * Varlog ErrorDetails. */
static size_t expected_details(const uint8_t *p, size_t len, char ***out)
{
    *out = NULL;
    Google__Rpc__Status *s = google__rpc__status__unpack(NULL, len, p);
    if (!s)
        return 0;
    char **strs = calloc(s->n_details + 1, sizeof(char *));
    FUZZ_CHECK(strs);
    size_t n = 0;
    for (size_t i = 0; i < s->n_details; i++) {
        const Google__Protobuf__Any *any = s->details[i];
        if (!any->type_url || strcmp(any->type_url, WIRE_ERROR_DETAIL_TYPE_URL) != 0)
            continue;
        Varlog__Errpb__ErrorDetail *d =
            varlog__errpb__error_detail__unpack(NULL, any->value.len, any->value.data);
        if (!d)
            continue;
        strs[n] = strdup(d->error_string ? d->error_string : "");
        FUZZ_CHECK(strs[n]);
        n++;
        varlog__errpb__error_detail__free_unpacked(d, NULL);
    }
    google__rpc__status__free_unpacked(s, NULL);
    *out = strs;
    return n;
}

static void check_status_details(fuzz_input_t *in)
{
    const uint8_t *value = in->p;
    size_t len = in->left;
    grpc_metadata md[2];
    memset(md, 0, sizeof(md));
    md[0].key = grpc_slice_from_static_string("grpc-message");
    md[0].value = grpc_slice_from_static_string("x");
    md[1].key = grpc_slice_from_static_string(WIRE_STATUS_DETAILS_KEY);
    uint8_t *copy = malloc(len ? len : 1);
    FUZZ_CHECK(copy);
    if (len)
        memcpy(copy, value, len);
    md[1].value = grpc_slice_new(copy, len, free);
    grpc_metadata_array arr = {.count = 2, .capacity = 2, .metadata = md};

    rpc_status_t st;
    rpc_status_init(&st);
    FUZZ_CHECK(rpc_status_set(&st, GRPC_STATUS_UNAVAILABLE, "m") == VARLOG_OK);
    rpc_status_read_details(&st, &arr);
    char **want = NULL;
    size_t n = expected_details(value, len, &want);
    FUZZ_CHECK(st.n_details == n);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(strcmp(st.details[i], want[i]) == 0);
    const char *reason = rpc_status_reason(&st);
    FUZZ_CHECK(strcmp(reason, n ? want[n - 1] : "m") == 0);
    rpc_status_t cp;
    rpc_status_init(&cp);
    FUZZ_CHECK(rpc_status_copy(&cp, &st) == VARLOG_OK && cp.n_details == n);
    FUZZ_CHECK(rpc_status_to_err(&cp) == VARLOG_ERR_RPC_UNAVAILABLE);
    rpc_status_clear(&cp);
    rpc_status_clear(&st);
    for (size_t i = 0; i < n; i++)
        free(want[i]);
    free(want);
    grpc_slice_unref(md[1].value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input_t in = {data, size};
    switch (fuzz_u8(&in) % 4) {
    case 0:
        check_cursor(&in);
        break;
    case 1:
        check_buffer(&in, false);
        break;
    case 2:
        check_buffer(&in, true);
        break;
    default:
        check_status_details(&in);
        break;
    }
    return 0;
}
