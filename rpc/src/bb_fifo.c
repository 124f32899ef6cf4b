#include "bb_fifo.h"

#include <stdlib.h>
#include <string.h>

bool bb_fifo_push(bb_fifo_t *f, grpc_byte_buffer *bb)
{
    if (f->count == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        grpc_byte_buffer **items = malloc(cap * sizeof(*items));
        if (!items)
            return false;
        for (size_t i = 0; i < f->count; i++)
            items[i] = f->items[(f->head + i) % f->cap];
        free(f->items);
        f->items = items;
        f->head = 0;
        f->cap = cap;
    }
    f->items[(f->head + f->count) % f->cap] = bb;
    f->count++;
    return true;
}

bool bb_fifo_reserve(bb_fifo_t *f, size_t n)
{
    if (f->count != 0 || n <= f->cap)
        return f->count == 0;
    grpc_byte_buffer **items = malloc(n * sizeof(*items));
    if (!items)
        return false;
    free(f->items);
    f->items = items;
    f->head = 0;
    f->cap = n;
    return true;
}

grpc_byte_buffer *bb_fifo_pop(bb_fifo_t *f)
{
    if (f->count == 0)
        return NULL;
    grpc_byte_buffer *bb = f->items[f->head];
    f->items[f->head] = NULL;
    f->head = (f->head + 1) % f->cap;
    f->count--;
    return bb;
}

void bb_fifo_clear(bb_fifo_t *f)
{
    grpc_byte_buffer *bb;
    while ((bb = bb_fifo_pop(f)) != NULL)
        grpc_byte_buffer_destroy(bb);
    free(f->items);
    memset(f, 0, sizeof(*f));
}
