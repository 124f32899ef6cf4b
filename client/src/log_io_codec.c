#include "log_io_codec.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

size_t codec_put_head(uint8_t *p, int32_t topic_id, int32_t log_stream_id)
{
    size_t off = 0;
    p[off++] = (1 << 3) | 0;
    off += wire_varint_put(p + off, (uint64_t)(int64_t)topic_id);
    p[off++] = (2 << 3) | 0;
    off += wire_varint_put(p + off, (uint64_t)(int64_t)log_stream_id);
    return off;
}

size_t codec_put_payload_head(uint8_t *p, size_t len)
{
    p[0] = (3 << 3) | 2;
    return 1 + wire_varint_put(p + 1, len);
}

size_t codec_put_payload(uint8_t *p, const void *data, size_t len)
{
    size_t off = codec_put_payload_head(p, len);
    memcpy(p + off, data, len);
    return off + len;
}

/* ---- reading ------------------------------------------------------------------------------ */

typedef struct reader {
    const uint8_t *p, *end;
} reader_t;

static inline bool get_varint(reader_t *r, uint64_t *v)
{
    if (r->p < r->end && *r->p < 0x80) { /* keys, ids and lengths: one byte */
        *v = *r->p++;
        return true;
    }
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end)
            return false;
        uint8_t b = *r->p++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* The next field's number and wire type; false at the end or on a malformed key. */
static bool get_key(reader_t *r, uint32_t *field, unsigned *wire, bool *ok)
{
    *ok = true;
    if (r->p >= r->end)
        return false;
    uint64_t key;
    if (!get_varint(r, &key) || (key >> 3) == 0 || (key >> 3) > UINT32_MAX) {
        *ok = false;
        return false;
    }
    *field = (uint32_t)(key >> 3);
    *wire = (unsigned)(key & 7);
    return true;
}

/* A length-delimited field's body, as a sub-reader. */
static bool get_bytes(reader_t *r, reader_t *sub)
{
    uint64_t len;
    if (!get_varint(r, &len) || len > (uint64_t)(r->end - r->p))
        return false;
    sub->p = r->p;
    sub->end = r->p + len;
    r->p += len;
    return true;
}

static bool skip(reader_t *r, unsigned wire)
{
    uint64_t v;
    reader_t sub;
    switch (wire) {
    case 0:
        return get_varint(r, &v);
    case 1:
        if (r->end - r->p < 8)
            return false;
        r->p += 8;
        return true;
    case 2:
        return get_bytes(r, &sub);
    case 5:
        if (r->end - r->p < 4)
            return false;
        r->p += 4;
        return true;
    default: /* groups are not used by Varlog's messages */
        return false;
    }
}

static bool read_meta(reader_t *r, varlog_entry_meta_t *m)
{
    uint32_t field;
    unsigned wire;
    bool ok;
    while (get_key(r, &field, &wire, &ok)) {
        uint64_t v;
        if (field >= 1 && field <= 4 && wire == 0) {
            if (!get_varint(r, &v))
                return false;
            if (field == 1)
                m->topic_id = (int32_t)v;
            else if (field == 2)
                m->log_stream_id = (int32_t)v;
            else if (field == 3)
                m->glsn = v;
            else
                m->llsn = v;
        } else if (!skip(r, wire)) {
            return false;
        }
    }
    return ok;
}

/* A varint of p[0..end); NULL when it runs past end or past 64 bits. */
static inline const uint8_t *varint_at(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; p < end && shift < 64; shift += 7) {
        uint8_t b = *p++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            *v = x;
            return p;
        }
    }
    return NULL;
}

/* The layout every Varlog server sends (Go's and protobuf-c's encoders agree): a result
 * (AppendResponse field 1) of under 128 bytes holding one meta field, itself holding the four
 * ids in field order, each set. Decodes it in one pass, keys compared as bytes; returns the
 * end of the result, or NULL when it had any other shape (the general way reads it then). */
static inline const uint8_t *read_result_fast(const uint8_t *p, const uint8_t *end,
                                              varlog_entry_meta_t *m)
{
    if (end - p < 4 || p[0] != 0x0a || p[1] >= 0x80 || p[2] != 0x0a || p[3] + 2 != p[1] ||
        end - p < 2 + p[1])
        return NULL;
    const uint8_t *q = p + 4, *stop = p + 2 + p[1];
    uint64_t topic, ls, glsn, llsn;
    if (q >= stop || *q != 0x08 || !(q = varint_at(q + 1, stop, &topic)) || q >= stop ||
        *q != 0x10 || !(q = varint_at(q + 1, stop, &ls)) || q >= stop || *q != 0x18 ||
        !(q = varint_at(q + 1, stop, &glsn)) || q >= stop || *q != 0x20 ||
        !(q = varint_at(q + 1, stop, &llsn)) || q != stop)
        return NULL;
    m->topic_id = (int32_t)topic;
    m->log_stream_id = (int32_t)ls;
    m->glsn = glsn;
    m->llsn = llsn;
    return stop;
}

typedef enum { RESULT_OK, RESULT_MALFORMED, RESULT_NO_META, RESULT_ERROR } result_t;

static result_t read_result(reader_t *r, varlog_entry_meta_t *m, reader_t *error)
{
    uint32_t field;
    unsigned wire;
    bool ok, has_meta = false;
    error->p = error->end = NULL;
    while (get_key(r, &field, &wire, &ok)) {
        reader_t sub;
        if ((field == 1 || field == 2) && wire == 2) {
            if (!get_bytes(r, &sub))
                return RESULT_MALFORMED;
            if (field == 1) {
                /* A repeated occurrence merges into the first, as protobuf does. */
                if (!has_meta)
                    memset(m, 0, sizeof(*m));
                has_meta = true;
                if (!read_meta(&sub, m))
                    return RESULT_MALFORMED;
            } else {
                *error = sub;
            }
        } else if (!skip(r, wire)) {
            return RESULT_MALFORMED;
        }
    }
    if (!ok)
        return RESULT_MALFORMED;
    if (error->p != error->end)
        return RESULT_ERROR;
    return has_meta ? RESULT_OK : RESULT_NO_META;
}

varlog_err_t codec_read_append_response(const uint8_t *p, size_t len, varlog_entry_meta_t *metas,
                                        size_t n, char *why, size_t why_size)
{
    reader_t r = {p, p + len};
    size_t i = 0;
    uint32_t field;
    unsigned wire;
    bool ok;
    for (;;) {
        varlog_entry_meta_t scratch;
        varlog_entry_meta_t *m = i < n ? &metas[i] : &scratch;
        const uint8_t *next = read_result_fast(r.p, r.end, m);
        if (next) {
            r.p = next;
            i++;
            continue;
        }
        if (!get_key(&r, &field, &wire, &ok))
            break;
        if (field != 1 || wire != 2) {
            if (!skip(&r, wire)) {
                ok = false;
                break;
            }
            continue;
        }
        reader_t sub, error;
        if (!get_bytes(&r, &sub)) {
            ok = false;
            break;
        }
        result_t res = read_result(&sub, m, &error);
        if (res == RESULT_MALFORMED) {
            ok = false;
            break;
        }
        if (i < n && res == RESULT_ERROR) {
            snprintf(why, why_size, "record %zu: %.*s", i, (int)(error.end - error.p),
                     (const char *)error.p);
            return VARLOG_ERR_RPC_UNKNOWN;
        }
        if (i < n && res == RESULT_NO_META) {
            snprintf(why, why_size, "result %zu without metadata", i);
            return VARLOG_ERR_DECODE;
        }
        i++;
    }
    if (!ok || r.p != r.end) {
        snprintf(why, why_size, "malformed AppendResponse (%zu bytes)", len);
        return VARLOG_ERR_DECODE;
    }
    if (i != n) {
        snprintf(why, why_size, "%zu results for %zu records", i, n);
        return VARLOG_ERR_DECODE;
    }
    return VARLOG_OK;
}

bool codec_next_payload(const uint8_t **p, const uint8_t *end, const uint8_t **data, size_t *len)
{
    const uint8_t *q = *p;
    uint64_t n;
    if (q >= end || *q != ((3 << 3) | 2) || !(q = varint_at(q + 1, end, &n)) ||
        n > (uint64_t)(end - q))
        return false;
    *data = q;
    *len = (size_t)n;
    *p = q + n;
    return true;
}

/* ---- subscribed entries ------------------------------------------------------------------- */

varlog_err_t codec_read_subscribe_response(const uint8_t *p, size_t len, codec_entry_t *out,
                                           char *why, size_t why_size)
{
    memset(out, 0, sizeof(*out));
    reader_t r = {p, p + len};
    uint32_t field;
    unsigned wire;
    bool ok;
    while (get_key(&r, &field, &wire, &ok)) {
        uint64_t v;
        reader_t sub;
        if ((field == 1 || field == 2) && wire == 0) {
            if (!get_varint(&r, &v)) {
                ok = false;
                break;
            }
            if (field == 1)
                out->meta.glsn = v;
            else
                out->meta.llsn = v;
        } else if (field == 3 && wire == 2) {
            if (!get_bytes(&r, &sub)) {
                ok = false;
                break;
            }
            out->data = sub.p;
            out->len = (size_t)(sub.end - sub.p);
        } else if (!skip(&r, wire)) {
            ok = false;
            break;
        }
    }
    if (!ok) {
        snprintf(why, why_size, "malformed SubscribeResponse (%zu bytes)", len);
        return VARLOG_ERR_DECODE;
    }
    return VARLOG_OK;
}

/* LogEntry {meta = 1, data = 2}; a repeated meta merges into the first, as protobuf does. */
static bool read_log_entry(reader_t *r, codec_entry_t *out)
{
    uint32_t field;
    unsigned wire;
    bool ok;
    while (get_key(r, &field, &wire, &ok)) {
        reader_t sub;
        if ((field == 1 || field == 2) && wire == 2) {
            if (!get_bytes(r, &sub))
                return false;
            if (field == 1) {
                if (!read_meta(&sub, &out->meta))
                    return false;
            } else {
                out->data = sub.p;
                out->len = (size_t)(sub.end - sub.p);
            }
        } else if (!skip(r, wire)) {
            return false;
        }
    }
    return ok;
}

varlog_err_t codec_read_subscribe_to_response(const uint8_t *p, size_t len, codec_entry_t *out,
                                              char *why, size_t why_size)
{
    memset(out, 0, sizeof(*out));
    reader_t r = {p, p + len};
    uint32_t field;
    unsigned wire;
    bool ok, has_entry = false;
    while (get_key(&r, &field, &wire, &ok)) {
        reader_t sub;
        if (field == 1 && wire == 2) {
            if (!get_bytes(&r, &sub) || !read_log_entry(&sub, out)) {
                ok = false;
                break;
            }
            has_entry = true;
        } else if (!skip(&r, wire)) {
            ok = false;
            break;
        }
    }
    if (!ok) {
        snprintf(why, why_size, "malformed SubscribeToResponse (%zu bytes)", len);
        return VARLOG_ERR_DECODE;
    }
    if (!has_entry) {
        snprintf(why, why_size, "SubscribeToResponse without a log entry");
        return VARLOG_ERR_DECODE;
    }
    return VARLOG_OK;
}
