/* The Append RPC's messages by hand on the server side (declared in server_internal.h):
 * an AppendRequest read in place from the received slices, an AppendResponse written straight
 * into the slice that is sent. tests/server/test_server_append_codec.c checks both against
 * protobuf-c. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "server_internal.h"
#include "wire.h"

/* protobuf-c's unpack allocates every payload of an AppendRequest separately and its pack of
 * an AppendResponse wants 3 objects per record: at 1000 records per request that was most
 * of the server's time per record. These read the request in place from the received
 * slices and write the response straight into the slice that is sent. */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* A field's key as protobuf-c (1.4) reads it: at most 5 bytes, the field number truncated
 * to 32 bits; a one-byte key of field 0 is refused (a longer one is an unknown field). */
static bool next_key(wire_cursor_t *c, uint32_t *field, unsigned *wt)
{
    uint64_t key = 0;
    size_t left = c->left;
    if (!wire_cursor_varint(c, 5, &key) || (key < 8 && left - c->left == 1))
        return false;
    *field = (uint32_t)(key >> 3);
    *wt = (unsigned)(key & 7);
    return true;
}

/* A length prefix as protobuf-c reads it: at most 5 bytes; the data must follow in full. */
static bool next_len(wire_cursor_t *c, size_t *len)
{
    uint64_t v = 0;
    if (!wire_cursor_varint(c, 5, &v) || v > c->left)
        return false;
    *len = (size_t)v;
    return true;
}

/* The common field, a payload (key 0x1a) with a length of one or two bytes, when it lies
 * whole in the current slice: its header length and payload length, else 0. */
static inline size_t payload_in_slice(const wire_cursor_t *c, size_t *len)
{
    const uint8_t *p = c->p;
    size_t avail = (size_t)(c->end - p);
    size_t hdr = 0;
    if (avail >= 2 && p[0] == ((3 << 3) | WT_LEN)) {
        if (!(p[1] & 0x80)) {
            *len = p[1];
            hdr = 2;
        } else if (avail >= 3 && !(p[2] & 0x80)) {
            *len = (size_t)(p[1] & 0x7f) | (size_t)p[2] << 7;
            hdr = 3;
        }
    }
    return hdr && *len <= avail - hdr ? hdr : 0;
}

bool append_request_scan(wire_cursor_t c, append_req_t *out)
{
    memset(out, 0, sizeof(*out));
    while (c.left > 0) {
        size_t len = 0, hdr = payload_in_slice(&c, &len);
        if (hdr) {
            c.p += hdr + len;
            c.left -= hdr + len;
            out->n_payload++;
            out->bytes += len;
            continue;
        }
        uint32_t field = 0;
        unsigned wt = 0;
        uint64_t v = 0;
        if (!next_key(&c, &field, &wt))
            return false;
        switch (wt) {
        case WT_VARINT:
            /* A known field of another wire type fails protobuf-c's unpack. */
            if (field == 3 || !wire_cursor_varint(&c, 10, &v))
                return false;
            /* Later occurrences win; an int32 keeps the low 32 bits. */
            if (field == 1)
                out->topic_id = (int32_t)(uint32_t)v;
            else if (field == 2)
                out->log_stream_id = (int32_t)(uint32_t)v;
            break;
        case WT_I64:
        case WT_I32:
            if ((field >= 1 && field <= 3) || !wire_cursor_skip(&c, wt == WT_I64 ? 8 : 4))
                return false;
            break;
        case WT_LEN:
            if (field == 1 || field == 2 || !next_len(&c, &len) || !wire_cursor_skip(&c, len))
                return false;
            if (field == 3) {
                out->n_payload++;
                out->bytes += len;
            }
            break;
        default: /* groups (3, 4) and 6, 7: protobuf-c refuses them */
            return false;
        }
    }
    return true;
}

void append_request_copy(wire_cursor_t c, uint8_t *dst, store_entry_t *slots)
{
    size_t i = 0;
    while (c.left > 0) {
        size_t len = 0, hdr = payload_in_slice(&c, &len);
        if (hdr) {
            slots[i].len = len;
            slots[i].data = dst;
            if (len > 0) {
                memcpy(dst, c.p + hdr, len);
                dst += len;
            }
            c.p += hdr + len;
            c.left -= hdr + len;
            i++;
            continue;
        }
        uint32_t field = 0;
        unsigned wt = 0;
        uint64_t v = 0;
        /* The scan accepted every step of this walk. */
        (void)next_key(&c, &field, &wt);
        if (wt == WT_VARINT) {
            (void)wire_cursor_varint(&c, 10, &v);
        } else if (wt != WT_LEN) {
            (void)wire_cursor_skip(&c, wt == WT_I64 ? 8 : 4);
        } else {
            (void)next_len(&c, &len);
            if (field != 3) {
                (void)wire_cursor_skip(&c, len);
                continue;
            }
            slots[i].len = len;
            slots[i].data = dst; /* NULL for a batch of empty payloads only */
            if (len > 0) {
                (void)wire_cursor_copy(&c, dst, len);
                dst += len;
            }
            i++;
        }
    }
}

/* One AppendResult is at most 2 + 2 + 4 keys + 2 x 10 (negative int32s) + 2 x 10 bytes. */
#define APPEND_RESULT_MAX 48

size_t append_response_max(size_t n)
{
    return n * APPEND_RESULT_MAX;
}

/* A proto3 scalar field with implicit presence, as protobuf-c packs it: left out when 0. */
static size_t put_u64_field(uint8_t *p, uint8_t key, uint64_t v)
{
    if (v == 0)
        return 0;
    p[0] = key;
    return 1 + wire_varint_put(p + 1, v);
}

size_t append_response_encode(uint8_t *buf, int32_t topic_id, int32_t ls_id, uint64_t glsn0,
                              uint64_t llsn0, size_t n)
{
    /* LogEntryMeta fields 1 and 2 are the same in every result. */
    uint8_t ids[22];
    size_t ids_len = put_u64_field(ids, 1 << 3, (uint64_t)(int64_t)topic_id);
    ids_len += put_u64_field(ids + ids_len, 2 << 3, (uint64_t)(int64_t)ls_id);
    uint8_t *p = buf;
    for (size_t i = 0; i < n; i++) {
        uint64_t glsn = glsn0 + i, llsn = llsn0 + i;
        size_t meta_len = ids_len + (glsn ? 1 + wire_varint_len(glsn) : 0) +
                          (llsn ? 1 + wire_varint_len(llsn) : 0);
        /* Both lengths stay below 128, so each takes one byte. */
        *p++ = (1 << 3) | WT_LEN; /* AppendResponse.results */
        *p++ = (uint8_t)(2 + meta_len);
        *p++ = (1 << 3) | WT_LEN; /* AppendResult.meta; error "" is left out */
        *p++ = (uint8_t)meta_len;
        memcpy(p, ids, ids_len);
        p += ids_len;
        p += put_u64_field(p, 3 << 3, glsn);
        p += put_u64_field(p, 4 << 3, llsn);
    }
    return (size_t)(p - buf);
}
