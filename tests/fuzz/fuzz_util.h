#ifndef VARLOG_FUZZ_UTIL_H
#define VARLOG_FUZZ_UTIL_H

/* What the harnesses share. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <protobuf-c/protobuf-c.h>

/* A failed expectation stops the run with a crash libFuzzer records; assert would vanish
 * under NDEBUG. */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* msg packed by protobuf-c without the unknown fields it kept from its input (at every
 * depth), so that the bytes are what a Varlog server could send: protobuf-c keeps fields that
 * Go's protobuf refuses to read (field number 0 in a key longer than one byte), and the
 * hand-written decoders refuse them too. malloc'd; *len its length. */
uint8_t *fuzz_pack_canonical(ProtobufCMessage *msg, size_t *len);

/* Input taken apart piece by piece; every getter returns 0 / an empty piece once the input
 * is used up, so that any input is a valid program. */
typedef struct fuzz_input {
    const uint8_t *p;
    size_t left;
} fuzz_input_t;

uint8_t fuzz_u8(fuzz_input_t *in);
uint16_t fuzz_u16(fuzz_input_t *in);
uint32_t fuzz_u32(fuzz_input_t *in);
/* A piece of a 16-bit length (little endian) and that many bytes, fewer at the end. */
const uint8_t *fuzz_piece(fuzz_input_t *in, size_t *len);

#endif
