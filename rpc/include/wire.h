#ifndef VARLOG_WIRE_H
#define VARLOG_WIRE_H

/*
 * Helpers shared by the client and server transports: protobuf-c messages to and from gRPC
 * byte buffers, gRPC statuses with Varlog's error details (google.rpc.Status carried in the
 * grpc-status-details-bin trailer), deadlines and channel arguments.
 * Internal: never included by a public header.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <time.h>

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>

#include "varlog/error.h"

/* gRPC core is not instrumented, so ThreadSanitizer cannot see that a completion-queue tag
 * handed to grpc_call_start_batch by one thread is the same one another thread gets from
 * grpc_completion_queue_next, with everything written before it. These mark that edge:
 * release before starting a batch, acquire after the queue returns its tag. No-ops unless
 * built with -fsanitize=thread. */
#if defined(__SANITIZE_THREAD__)
#define WIRE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WIRE_TSAN 1
#endif
#endif
#ifdef WIRE_TSAN
#include <sanitizer/tsan_interface.h>
#define WIRE_TAG_RELEASE(tag) __tsan_release(tag)
#define WIRE_TAG_ACQUIRE(tag) __tsan_acquire(tag)
#else
#define WIRE_TAG_RELEASE(tag) ((void)(tag))
#define WIRE_TAG_ACQUIRE(tag) ((void)(tag))
#endif

/* The trailer that carries a serialized google.rpc.Status. */
#define WIRE_STATUS_DETAILS_KEY "grpc-status-details-bin"
/* Any.type_url of Varlog's error details. */
#define WIRE_ERROR_DETAIL_TYPE_URL "type.googleapis.com/varlog.errpb.ErrorDetail"

/* Packs msg into a new byte buffer (owned by the caller; gRPC takes it with SEND_MESSAGE).
 * NULL when memory runs out. */
grpc_byte_buffer *wire_pack(const ProtobufCMessage *msg);

/* Decodes bb (not consumed) as desc; the result is freed with protobuf_c_message_free_unpacked.
 * NULL when bb is not a valid encoding of desc. Single-slice buffers are decoded in place. */
ProtobufCMessage *wire_unpack(const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb);

/* A buffer reused to put received messages in one piece. */
typedef struct wire_scratch {
    uint8_t *p;
    size_t cap;
} wire_scratch_t;

/* bb's bytes in one piece, their length in *len: in place when bb is one uncompressed slice
 * (the usual case), else copied into scratch, which grows to the largest message seen and
 * is reused. Valid while bb lives and until scratch's next use. NULL when memory runs out. */
const uint8_t *wire_flatten(grpc_byte_buffer *bb, wire_scratch_t *scratch, size_t *len);
void wire_scratch_free(wire_scratch_t *scratch);

/* Reading a received message in place: a cursor over the slices of a byte buffer, so that a
 * message that arrived in several slices is decoded without the copy that
 * grpc_byte_buffer_reader_readall makes. The cursor borrows the slices: they must outlive it.
 * A cursor is a plain value; copy it to read the same bytes twice. */
typedef struct wire_cursor {
    const grpc_slice *slices;
    size_t n_slices, next;  /* next: the slice after the current one */
    const uint8_t *p, *end; /* unread bytes of the current slice */
    size_t left;            /* unread bytes in all */
} wire_cursor_t;

/* Over the n slices (borrowed). */
void wire_cursor_init(wire_cursor_t *c, const grpc_slice *slices, size_t n);
/* Over bb's own slices when they hold the message as it is (an uncompressed raw buffer) and
 * true; false otherwise (*c is then empty): read such a buffer through a copy
 * (grpc_byte_buffer_reader_readall) and wire_cursor_init. */
bool wire_cursor_init_bb(wire_cursor_t *c, grpc_byte_buffer *bb);
/* Reads a varint of at most max_bytes bytes (1..10) into *v (bits past 64 dropped). False,
 * with the cursor somewhere inside it, when no byte ends it within max_bytes or the data. */
bool wire_cursor_varint(wire_cursor_t *c, unsigned max_bytes, uint64_t *v);
/* Skips, or copies to dst, the next n bytes; false (nothing consumed) when fewer are left. */
bool wire_cursor_skip(wire_cursor_t *c, size_t n);
bool wire_cursor_copy(wire_cursor_t *c, void *dst, size_t n);

/* Protobuf base-128 varints, for encoders that write a message by hand: the length of v's
 * encoding (1..10), and the encoding itself at p (which needs that much room); returns the
 * bytes written. Negative int32/int64 fields are encoded as (uint64_t)(int64_t)v. */
static inline size_t wire_varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline size_t wire_varint_put(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* The outcome of a finished call, as the client sees it. All strings are owned by the struct. */
typedef struct rpc_status {
    grpc_status_code code;
    char *message;  /* status message; "" when none; NULL only before a status arrived */
    char **details; /* ErrorDetail.error_string of each detail, outermost first */
    size_t n_details;
} rpc_status_t;

void rpc_status_init(rpc_status_t *st);
void rpc_status_clear(rpc_status_t *st);
/* Replaces st with code and a copy of message (NULL = ""), no details. NOMEM on failure. */
varlog_err_t rpc_status_set(rpc_status_t *st, grpc_status_code code, const char *message);
/* Deep copy; dst must be initialised (its old contents are cleared). */
varlog_err_t rpc_status_copy(rpc_status_t *dst, const rpc_status_t *src);
/* Reads details from the trailing metadata (grpc-status-details-bin) into st. Details that
 * cannot be decoded are ignored: the code and message still stand. */
void rpc_status_read_details(rpc_status_t *st, const grpc_metadata_array *trailing);
/* The innermost detail (last element), which Varlog's Go client matches against its
 * registered errors; falls back to the message; "" when neither exists. */
const char *rpc_status_reason(const rpc_status_t *st);
/* VARLOG_OK for GRPC_STATUS_OK, else the VARLOG_ERR_RPC_* value of the same number. */
varlog_err_t rpc_status_to_err(const rpc_status_t *st);

/* Serializes google.rpc.Status{code, message, details = ErrorDetail(details[i])...} for the
 * grpc-status-details-bin trailer. The slice is owned by the caller. Returns false on NOMEM. */
bool wire_status_details_encode(grpc_status_code code, const char *message,
                                const char *const *details, size_t n_details, grpc_slice *out);

/* A NUL-terminated malloc'd copy of the slice's bytes (owned by the caller); NULL on NOMEM. */
char *wire_slice_strdup(grpc_slice slice);

/* Absolute deadline timeout_ms from now on the monotonic clock; timeout_ms < 0 = infinite. */
gpr_timespec wire_deadline(int64_t timeout_ms);
/* Milliseconds on the monotonic clock, for bookkeeping. */
int64_t wire_now_ms(void);
/* wire_now_ms() + timeout_ms (timeout_ms >= 0), INT64_MAX where the sum would overflow: a
 * timeout of INT64_MAX ms is a deadline that never comes, not one that wrapped into the past. */
int64_t wire_deadline_ms(int64_t timeout_ms);

/* Condition variables of the client and server wait on the monotonic clock, so that their
 * timeouts survive wall-clock steps: initialise them with wire_cond_init and compute the
 * absolute time for pthread_cond_timedwait with abs_deadline (timeout_ms >= 0 from now). */
void wire_cond_init(pthread_cond_t *cv);
void abs_deadline(struct timespec *ts, int64_t timeout_ms);
/* The same in microseconds (timeout_us >= 0). */
void abs_deadline_us(struct timespec *ts, int64_t timeout_us);

/* Channel arguments used by both sides: no message size limits (Varlog allows 2 GiB), Go
 * style keepalive. Points at static storage; the caller must not free it. */
typedef enum { WIRE_ARGS_CLIENT, WIRE_ARGS_SERVER } wire_args_side_t;
const grpc_channel_args *wire_channel_args(wire_args_side_t side);

/* Shuts down a completion queue on which no call and no operation is pending any more, waits
 * until it reports the shutdown (dropping what is still queued: kicks nobody took) and
 * destroys it. For queues that never served, or whose owner left without draining them. */
void wire_cq_destroy_idle(grpc_completion_queue *cq);

/* gRPC is reference counted: every object that uses it calls these once. */
void wire_grpc_ref(void);
void wire_grpc_unref(void);

/* Turns off abseil's mutex deadlock detection for the whole process, once; later calls do
 * nothing. Why: Debian builds abseil without NDEBUG, which leaves the detection on, so every
 * absl::Mutex that gRPC core takes updates a lock graph; that was 8-12 % of a client's CPU per
 * message (bench_subscribe, callgrind on GrpcFloor). abseil is C++: its setter is found by
 * its mangled names (Debian's inline namespace, and the plain one). Returns false when no
 * such function is in the process (another abseil build), which changes nothing. */
bool wire_absl_deadlock_detection_off(void);

#endif
