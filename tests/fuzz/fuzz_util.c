#include "fuzz_util.h"

#include <stdbool.h>
#include <string.h>

/* The message fields of m that are set: a oneof member only while its case is chosen. */
typedef void (*visit_fn)(ProtobufCMessage *m, void *arg);

static void walk(ProtobufCMessage *m, visit_fn fn, void *arg)
{
    if (!m)
        return;
    fn(m, arg);
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        char *base = (char *)m;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            if (*(const uint32_t *)(const void *)(base + f->quantifier_offset) != f->id)
                continue;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(const void *)(base + f->quantifier_offset);
            ProtobufCMessage **sub = *(ProtobufCMessage ***)(void *)(base + f->offset);
            for (size_t k = 0; k < n; k++)
                walk(sub[k], fn, arg);
        } else {
            walk(*(ProtobufCMessage **)(void *)(base + f->offset), fn, arg);
        }
    }
}

typedef struct saved {
    unsigned *counts;
    size_t n, cap;
    bool restore;
} saved_t;

static void toggle(ProtobufCMessage *m, void *arg)
{
    saved_t *s = arg;
    if (s->restore) {
        m->n_unknown_fields = s->counts[s->n++];
        return;
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->counts = realloc(s->counts, s->cap * sizeof(*s->counts));
        FUZZ_CHECK(s->counts);
    }
    s->counts[s->n++] = m->n_unknown_fields;
    m->n_unknown_fields = 0;
}

uint8_t *fuzz_pack_canonical(ProtobufCMessage *msg, size_t *len)
{
    saved_t s = {0};
    walk(msg, toggle, &s);
    *len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(*len ? *len : 1);
    FUZZ_CHECK(buf);
    FUZZ_CHECK(protobuf_c_message_pack(msg, buf) == *len);
    /* Back as they were, so that free_unpacked frees them. */
    s.n = 0;
    s.restore = true;
    walk(msg, toggle, &s);
    free(s.counts);
    return buf;
}

uint8_t fuzz_u8(fuzz_input_t *in)
{
    if (in->left == 0)
        return 0;
    in->left--;
    return *in->p++;
}

uint16_t fuzz_u16(fuzz_input_t *in)
{
    uint16_t lo = fuzz_u8(in);
    return (uint16_t)(lo | fuzz_u8(in) << 8);
}

uint32_t fuzz_u32(fuzz_input_t *in)
{
    uint32_t lo = fuzz_u16(in);
    return lo | (uint32_t)fuzz_u16(in) << 16;
}

const uint8_t *fuzz_piece(fuzz_input_t *in, size_t *len)
{
    size_t want = fuzz_u16(in);
    *len = want < in->left ? want : in->left;
    const uint8_t *p = in->p;
    in->p += *len;
    in->left -= *len;
    return p;
}
