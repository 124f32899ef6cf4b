/*
 * Golden bytes for Varlog's wire messages.
 *
 * Every expected byte string below was derived by hand from the protobuf encoding rules, not
 * captured from an encoder, so a wrong field number, type or packing in proto/ shows up here
 * even when protoc-c agrees with itself. Notation in the comments: "N name" is field number N;
 * a tag is (N << 3 | wire type), wire type 0 = varint, 1 = 64-bit, 2 = length-delimited,
 * 5 = 32-bit; proto3 leaves out scalars equal to zero and empty strings/bytes, which is why
 * some fields set to their defaults have no line.
 *
 * Short vectors are uint8_t arrays. Vectors that carry long ASCII strings are string literals
 * with the tags and lengths as \x escapes and the text as text, one field per line: the text
 * needs no derivation and stays readable; each escape ends its literal so that it cannot
 * swallow a following hex digit.
 */
#ifndef VARLOG_TESTS_GOLDEN_SUPPORT_H
#define VARLOG_TESTS_GOLDEN_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "varlogpb/metadata.pb-c.h"

/* Length of a string-literal vector without its terminating NUL. */
#define LIT_LEN(lit) (sizeof(lit) - 1)

/* 1700000000 as a varint, 7 bits at a time from the low end: 1700000000 = 13281250 * 128 + 0,
 * 13281250 = 103759 * 128 + 98 (0x62), 103759 = 810 * 128 + 79 (0x4f), 810 = 6 * 128 + 42
 * (0x2a), then 6. Every group but the last gets 0x80. */
#define TS_1700000000 "\x80\xe2\xcf\xaa\x06"

/* Asserts that msg encodes to exactly the want_len bytes at want. */
void assert_encodes_to(const ProtobufCMessage *msg, const uint8_t *want, size_t want_len);

/* Decodes len bytes at data as a desc message (asserting success); free with its free_unpacked. */
ProtobufCMessage *golden_decode(const ProtobufCMessageDescriptor *desc, const void *data,
                                size_t len);

/* Asserts that got holds exactly the bytes of the string want. */
void assert_bytes(ProtobufCBinaryData got, const char *want);

/* Asserts that m is present and has these topic, log stream, GLSN and LLSN. */
void assert_meta(const Varlog__Varlogpb__LogEntryMeta *m, int32_t topic, int32_t ls, uint64_t glsn,
                 uint64_t llsn);

#endif
