#ifndef VARLOG_FUZZ_SLICES_H
#define VARLOG_FUZZ_SLICES_H

/* A message cut into gRPC slices as the transport may hand it over. Each slice has a buffer
 * of its own, of its exact size, so that reading past a slice is an ASan report. */
#include <stddef.h>
#include <stdint.h>

#include <grpc/slice.h>

typedef struct fuzz_slices {
    grpc_slice *s;
    size_t n;
} fuzz_slices_t;

/* Cuts p[0..len) at lengths taken in turn from cuts[0..n_cuts) (0 = an empty slice; after
 * the last one the rest is one slice). */
void fuzz_slices_make(fuzz_slices_t *out, const uint8_t *p, size_t len, const uint8_t *cuts,
                      size_t n_cuts);
void fuzz_slices_free(fuzz_slices_t *sl);

#endif
