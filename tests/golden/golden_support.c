/* Helpers shared by the golden-byte tests (see golden_support.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "golden_support.h"

void assert_encodes_to(const ProtobufCMessage *msg, const uint8_t *want, size_t want_len)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    assert_int_equal(n, want_len);
    uint8_t *buf = malloc(n ? n : 1);
    assert_non_null(buf);
    assert_int_equal(protobuf_c_message_pack(msg, buf), n);
    assert_memory_equal(buf, want, n);
    free(buf);
}

ProtobufCMessage *golden_decode(const ProtobufCMessageDescriptor *desc, const void *data,
                                size_t len)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, data);
    assert_non_null(m);
    return m;
}

void assert_bytes(ProtobufCBinaryData got, const char *want)
{
    size_t n = strlen(want);
    assert_int_equal(got.len, n);
    if (n)
        assert_memory_equal(got.data, want, n);
}

void assert_meta(const Varlog__Varlogpb__LogEntryMeta *m, int32_t topic, int32_t ls, uint64_t glsn,
                 uint64_t llsn)
{
    assert_non_null(m);
    assert_int_equal(m->topic_id, topic);
    assert_int_equal(m->log_stream_id, ls);
    assert_int_equal(m->glsn, glsn);
    assert_int_equal(m->llsn, llsn);
}
