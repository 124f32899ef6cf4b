/* The client's hand-written LogIO decoders (client/src/log_io_codec.c) against protobuf-c.
 * They read whatever a storage node sends, so beyond not crashing they must agree with
 * protobuf-c: a message protobuf-c accepts, packed again as a Varlog server would send it
 * (no unknown fields, each sub-message once), they must read with the same verdict and
 * values. On other input they may refuse more than protobuf-c (field number 0, as Go's
 * protobuf does), accept more (a known field of another wire type is skipped), and differ
 * where a sub-message repeats: they merge it as Go does, protobuf-c 1.4.1 keeps the last
 * one's fields only. A SubscribeResponse has no sub-message: there both must agree.
 *
 * Input: one selector byte (which decoder, and how many records an append waited for),
 * then the message. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "log_io_codec.h"
#include "snpb/log_io.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- AppendResponse ------------------------------------------------------------------------ */

static varlog_err_t append_want(const Varlog__Snpb__AppendResponse *pb)
{
    for (size_t i = 0; i < pb->n_results; i++) {
        const Varlog__Snpb__AppendResult *r = pb->results[i];
        if (r->error && r->error[0])
            return VARLOG_ERR_RPC_UNKNOWN;
        if (!r->meta)
            return VARLOG_ERR_DECODE;
    }
    return VARLOG_OK;
}

/* The codec's verdict on p for pb->n_results records; must_accept: p is canonical. */
static void append_compare(const uint8_t *p, size_t len, const Varlog__Snpb__AppendResponse *pb,
                           bool must_accept)
{
    char why[256];
    size_t n = pb->n_results;
    varlog_entry_meta_t *metas = calloc(n ? n : 1, sizeof(*metas));
    FUZZ_CHECK(metas);
    varlog_err_t err = codec_read_append_response(p, len, metas, n, why, sizeof(why));
    if (!must_accept) {
        free(metas);
        return;
    }
    FUZZ_CHECK(err == append_want(pb));
    for (size_t i = 0; err == VARLOG_OK && i < n; i++) {
        const Varlog__Varlogpb__LogEntryMeta *m = pb->results[i]->meta;
        FUZZ_CHECK(metas[i].topic_id == m->topic_id);
        FUZZ_CHECK(metas[i].log_stream_id == m->log_stream_id);
        FUZZ_CHECK(metas[i].glsn == m->glsn);
        FUZZ_CHECK(metas[i].llsn == m->llsn);
    }
    free(metas);
}

static void check_append(const uint8_t *p, size_t len, size_t n_hint)
{
    char why[256];
    /* An exact-size array, so that a write past n records is an ASan report. */
    varlog_entry_meta_t *metas = calloc(n_hint ? n_hint : 1, sizeof(*metas));
    FUZZ_CHECK(metas);
    (void)codec_read_append_response(p, len, metas, n_hint, why, sizeof(why));
    free(metas);

    Varlog__Snpb__AppendResponse *pb = varlog__snpb__append_response__unpack(NULL, len, p);
    if (!pb)
        return;
    append_compare(p, len, pb, false);
    size_t clen;
    uint8_t *canon = fuzz_pack_canonical(&pb->base, &clen);
    append_compare(canon, clen, pb, true);
    free(canon);
    varlog__snpb__append_response__free_unpacked(pb, NULL);
}

/* ---- subscribed entries -------------------------------------------------------------------- */

static void check_entry(const codec_entry_t *e, const uint8_t *p, size_t len,
                        const Varlog__Varlogpb__LogEntryMeta *m, uint64_t glsn, uint64_t llsn,
                        const ProtobufCBinaryData *b)
{
    /* The payload is read in place. */
    FUZZ_CHECK(e->len == 0 || (e->data >= p && e->data + e->len <= p + len));
    FUZZ_CHECK(e->meta.topic_id == (m ? m->topic_id : 0));
    FUZZ_CHECK(e->meta.log_stream_id == (m ? m->log_stream_id : 0));
    FUZZ_CHECK(e->meta.glsn == (m ? m->glsn : glsn));
    FUZZ_CHECK(e->meta.llsn == (m ? m->llsn : llsn));
    FUZZ_CHECK(e->len == b->len);
    FUZZ_CHECK(e->len == 0 || memcmp(e->data, b->data, e->len) == 0);
}

static void subscribe_compare(const uint8_t *p, size_t len,
                              const Varlog__Snpb__SubscribeResponse *pb, bool must_accept)
{
    char why[256];
    codec_entry_t e;
    varlog_err_t err = codec_read_subscribe_response(p, len, &e, why, sizeof(why));
    FUZZ_CHECK(err == VARLOG_OK || (err == VARLOG_ERR_DECODE && why[0]));
    if (must_accept)
        FUZZ_CHECK(err == VARLOG_OK);
    if (pb && err == VARLOG_OK)
        check_entry(&e, p, len, NULL, pb->glsn, pb->llsn, &pb->payload);
}

static void check_subscribe(const uint8_t *p, size_t len)
{
    Varlog__Snpb__SubscribeResponse *pb = varlog__snpb__subscribe_response__unpack(NULL, len, p);
    subscribe_compare(p, len, pb, false);
    if (!pb)
        return;
    size_t clen;
    uint8_t *canon = fuzz_pack_canonical(&pb->base, &clen);
    subscribe_compare(canon, clen, pb, true);
    free(canon);
    varlog__snpb__subscribe_response__free_unpacked(pb, NULL);
}

static void subscribe_to_compare(const uint8_t *p, size_t len,
                                 const Varlog__Snpb__SubscribeToResponse *pb, bool must_accept)
{
    char why[256];
    codec_entry_t e;
    varlog_err_t err = codec_read_subscribe_to_response(p, len, &e, why, sizeof(why));
    FUZZ_CHECK(err == VARLOG_OK || (err == VARLOG_ERR_DECODE && why[0]));
    if (!pb)
        return;
    if (!pb->log_entry) {
        FUZZ_CHECK(err == VARLOG_ERR_DECODE);
        return;
    }
    if (!must_accept)
        return;
    FUZZ_CHECK(err == VARLOG_OK);
    static const Varlog__Varlogpb__LogEntryMeta none = VARLOG__VARLOGPB__LOG_ENTRY_META__INIT;
    const Varlog__Varlogpb__LogEntryMeta *m = pb->log_entry->meta;
    check_entry(&e, p, len, m ? m : &none, 0, 0, &pb->log_entry->data);
}

static void check_subscribe_to(const uint8_t *p, size_t len)
{
    Varlog__Snpb__SubscribeToResponse *pb =
        varlog__snpb__subscribe_to_response__unpack(NULL, len, p);
    subscribe_to_compare(p, len, pb, false);
    if (!pb)
        return;
    size_t clen;
    uint8_t *canon = fuzz_pack_canonical(&pb->base, &clen);
    subscribe_to_compare(canon, clen, pb, true);
    free(canon);
    varlog__snpb__subscribe_to_response__free_unpacked(pb, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t sel = data[0];
    const uint8_t *p = data + 1;
    size_t len = size - 1;
    switch (sel % 3) {
    case 0:
        check_append(p, len, (size_t)(sel / 3) % 17);
        break;
    case 1:
        check_subscribe(p, len);
        break;
    default:
        check_subscribe_to(p, len);
        break;
    }
    return 0;
}
