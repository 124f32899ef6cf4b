#include "fuzz_slices.h"

#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

static grpc_slice own_slice(const uint8_t *p, size_t len)
{
    /* grpc_slice_from_copied_buffer keeps short slices inline, in the struct: a read past
     * their end would stay unseen. */
    uint8_t *copy = malloc(len ? len : 1);
    FUZZ_CHECK(copy);
    if (len)
        memcpy(copy, p, len);
    return grpc_slice_new(copy, len, free);
}

void fuzz_slices_make(fuzz_slices_t *out, const uint8_t *p, size_t len, const uint8_t *cuts,
                      size_t n_cuts)
{
    out->s = calloc(n_cuts + 1, sizeof(*out->s));
    FUZZ_CHECK(out->s);
    out->n = 0;
    size_t off = 0;
    for (size_t i = 0; i < n_cuts && off < len; i++) {
        size_t k = cuts[i] < len - off ? cuts[i] : len - off;
        out->s[out->n++] = own_slice(p + off, k);
        off += k;
    }
    if (off < len || out->n == 0)
        out->s[out->n++] = own_slice(p + off, len - off);
}

void fuzz_slices_free(fuzz_slices_t *sl)
{
    for (size_t i = 0; i < sl->n; i++)
        grpc_slice_unref(sl->s[i]);
    free(sl->s);
    *sl = (fuzz_slices_t){0};
}
