#ifndef VARLOG_BB_FIFO_H
#define VARLOG_BB_FIFO_H

/* A FIFO of gRPC byte buffers that grows by doubling: the queue behind a call's single
 * SEND_MESSAGE in flight, and the buffer of received messages. Not thread-safe: the owner
 * locks. Shared by the client and server transports. */
#include <stdbool.h>
#include <stddef.h>

#include <grpc/grpc.h>

typedef struct bb_fifo {
    grpc_byte_buffer **items;
    size_t head, count, cap;
} bb_fifo_t; /* zero-initialised = empty */

/* Appends bb (ownership passes to the FIFO). false on NOMEM (bb stays the caller's). */
bool bb_fifo_push(bb_fifo_t *f, grpc_byte_buffer *bb);
/* Makes room for n buffers without growing (an empty FIFO only), so that a bounded queue
 * allocates once, where it is created, rather than on the thread that fills it. false on
 * NOMEM (the FIFO then grows on demand as before). */
bool bb_fifo_reserve(bb_fifo_t *f, size_t n);
/* Removes and returns the oldest buffer (owned by the caller), or NULL when empty. */
grpc_byte_buffer *bb_fifo_pop(bb_fifo_t *f);
/* Destroys every buffer and the storage; the FIFO is empty and reusable afterwards. */
void bb_fifo_clear(bb_fifo_t *f);

/* The struct that embeds member, from a pointer to it (completion-queue tags are members). */
#define VARLOG_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#endif
