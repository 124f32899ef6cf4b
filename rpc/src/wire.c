#include "wire.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/support/alloc.h>

#include "errpb/errors.pb-c.h"
#include "google/rpc/status.pb-c.h"

grpc_byte_buffer *wire_pack(const ProtobufCMessage *msg)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    grpc_slice s = grpc_slice_malloc(n);
    protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(s));
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

ProtobufCMessage *wire_unpack(const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb)
{
    grpc_byte_buffer_reader reader;
    if (!grpc_byte_buffer_reader_init(&reader, bb))
        return NULL;
    ProtobufCMessage *msg;
    grpc_slice *first;
    if (bb->type == GRPC_BB_RAW && bb->data.raw.compression == GRPC_COMPRESS_NONE &&
        bb->data.raw.slice_buffer.count == 1 && grpc_byte_buffer_reader_peek(&reader, &first)) {
        /* One slice: decode in place, no copy. */
        msg = protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(*first),
                                        GRPC_SLICE_START_PTR(*first));
    } else {
        grpc_slice all = grpc_byte_buffer_reader_readall(&reader);
        msg = protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(all),
                                        GRPC_SLICE_START_PTR(all));
        grpc_slice_unref(all);
    }
    grpc_byte_buffer_reader_destroy(&reader);
    return msg;
}

const uint8_t *wire_flatten(grpc_byte_buffer *bb, wire_scratch_t *scratch, size_t *len)
{
    if (bb->type == GRPC_BB_RAW && bb->data.raw.compression == GRPC_COMPRESS_NONE &&
        bb->data.raw.slice_buffer.count == 1) {
        /* By address: a small slice keeps its bytes inline, in the struct itself. */
        const grpc_slice *s = &bb->data.raw.slice_buffer.slices[0];
        *len = GRPC_SLICE_LENGTH(*s);
        return GRPC_SLICE_START_PTR(*s);
    }
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, bb))
        return NULL;
    size_t off = 0;
    grpc_slice s;
    bool ok = true;
    while (grpc_byte_buffer_reader_next(&r, &s)) {
        size_t l = GRPC_SLICE_LENGTH(s);
        if (ok && off + l > scratch->cap) {
            /* Grown by doubling: a decompressed buffer's length is known only as it is read. */
            size_t cap = scratch->cap ? scratch->cap : 256;
            while (cap < off + l)
                cap *= 2;
            uint8_t *p = realloc(scratch->p, cap);
            if (p) {
                scratch->p = p;
                scratch->cap = cap;
            } else {
                ok = false;
            }
        }
        /* An empty slice may come before anything was allocated: scratch->p is still NULL,
         * and NULL + 0 is undefined (the fuzzer's first finding). */
        if (ok && l > 0)
            memcpy(scratch->p + off, GRPC_SLICE_START_PTR(s), l);
        off += l;
        grpc_slice_unref(s);
    }
    grpc_byte_buffer_reader_destroy(&r);
    *len = off;
    return ok ? (off ? scratch->p : (const uint8_t *)"") : NULL;
}

void wire_scratch_free(wire_scratch_t *scratch)
{
    free(scratch->p);
    *scratch = (wire_scratch_t){0};
}

/* Enters the next non-empty slice; false at the end of the data. */
static bool cursor_advance(wire_cursor_t *c)
{
    while (c->p == c->end) {
        if (c->next >= c->n_slices)
            return false;
        const grpc_slice *s = &c->slices[c->next++];
        c->p = GRPC_SLICE_START_PTR(*s);
        c->end = c->p + GRPC_SLICE_LENGTH(*s);
    }
    return true;
}

void wire_cursor_init(wire_cursor_t *c, const grpc_slice *slices, size_t n)
{
    memset(c, 0, sizeof(*c));
    c->slices = slices;
    c->n_slices = n;
    for (size_t i = 0; i < n; i++)
        c->left += GRPC_SLICE_LENGTH(slices[i]);
}

bool wire_cursor_init_bb(wire_cursor_t *c, grpc_byte_buffer *bb)
{
    if (!bb || bb->type != GRPC_BB_RAW || bb->data.raw.compression != GRPC_COMPRESS_NONE) {
        wire_cursor_init(c, NULL, 0);
        return false;
    }
    wire_cursor_init(c, bb->data.raw.slice_buffer.slices, bb->data.raw.slice_buffer.count);
    return true;
}

bool wire_cursor_varint(wire_cursor_t *c, unsigned max_bytes, uint64_t *v)
{
    uint64_t r = 0;
    unsigned shift = 0;
    /* Most varints lie inside the current slice: read them without looking for the next. */
    if ((size_t)(c->end - c->p) >= max_bytes) {
        for (unsigned i = 0; i < max_bytes; i++, shift += 7) {
            uint8_t b = c->p[i];
            if (shift < 64)
                r |= (uint64_t)(b & 0x7f) << shift;
            if (!(b & 0x80)) {
                c->p += i + 1;
                c->left -= i + 1;
                *v = r;
                return true;
            }
        }
        return false;
    }
    for (unsigned i = 0; i < max_bytes; i++, shift += 7) {
        if (!cursor_advance(c))
            return false;
        uint8_t b = *c->p++;
        c->left--;
        if (shift < 64)
            r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

static bool cursor_take(wire_cursor_t *c, uint8_t *dst, size_t n)
{
    if (n > c->left)
        return false;
    c->left -= n;
    while (n > 0) {
        cursor_advance(c);
        size_t k = (size_t)(c->end - c->p);
        if (k > n)
            k = n;
        if (dst) {
            memcpy(dst, c->p, k);
            dst += k;
        }
        c->p += k;
        n -= k;
    }
    return true;
}

bool wire_cursor_skip(wire_cursor_t *c, size_t n)
{
    return cursor_take(c, NULL, n);
}

bool wire_cursor_copy(wire_cursor_t *c, void *dst, size_t n)
{
    return cursor_take(c, dst, n);
}

void rpc_status_init(rpc_status_t *st)
{
    memset(st, 0, sizeof(*st));
    st->code = GRPC_STATUS_OK;
}

static void free_details(rpc_status_t *st)
{
    for (size_t i = 0; i < st->n_details; i++)
        free(st->details[i]);
    free(st->details);
    st->details = NULL;
    st->n_details = 0;
}

void rpc_status_clear(rpc_status_t *st)
{
    free(st->message);
    free_details(st);
    rpc_status_init(st);
}

varlog_err_t rpc_status_set(rpc_status_t *st, grpc_status_code code, const char *message)
{
    char *copy = strdup(message ? message : "");
    if (!copy)
        return VARLOG_ERR_NOMEM;
    rpc_status_clear(st);
    st->code = code;
    st->message = copy;
    return VARLOG_OK;
}

varlog_err_t rpc_status_copy(rpc_status_t *dst, const rpc_status_t *src)
{
    if (dst == src)
        return VARLOG_OK;
    rpc_status_clear(dst);
    dst->code = src->code;
    if (src->message && !(dst->message = strdup(src->message)))
        goto nomem;
    if (src->n_details) {
        dst->details = calloc(src->n_details, sizeof(char *));
        if (!dst->details)
            goto nomem;
        for (size_t i = 0; i < src->n_details; i++) {
            if (!(dst->details[i] = strdup(src->details[i])))
                goto nomem;
            dst->n_details = i + 1;
        }
    }
    return VARLOG_OK;
nomem:
    rpc_status_clear(dst);
    dst->code = src->code;
    return VARLOG_ERR_NOMEM;
}

static void read_details_value(rpc_status_t *st, grpc_slice value)
{
    Google__Rpc__Status *s =
        google__rpc__status__unpack(NULL, GRPC_SLICE_LENGTH(value), GRPC_SLICE_START_PTR(value));
    if (!s)
        return;
    char **out = s->n_details ? calloc(s->n_details, sizeof(char *)) : NULL;
    size_t n = 0;
    for (size_t i = 0; out && i < s->n_details; i++) {
        const Google__Protobuf__Any *any = s->details[i];
        if (!any->type_url || strcmp(any->type_url, WIRE_ERROR_DETAIL_TYPE_URL) != 0)
            continue;
        Varlog__Errpb__ErrorDetail *d =
            varlog__errpb__error_detail__unpack(NULL, any->value.len, any->value.data);
        if (!d)
            continue;
        out[n] = strdup(d->error_string ? d->error_string : "");
        varlog__errpb__error_detail__free_unpacked(d, NULL);
        if (!out[n])
            break;
        n++;
    }
    google__rpc__status__free_unpacked(s, NULL);
    free_details(st);
    if (n == 0) {
        free(out);
        return;
    }
    st->details = out;
    st->n_details = n;
}

void rpc_status_read_details(rpc_status_t *st, const grpc_metadata_array *trailing)
{
    for (size_t i = 0; i < trailing->count; i++) {
        if (grpc_slice_str_cmp(trailing->metadata[i].key, WIRE_STATUS_DETAILS_KEY) == 0) {
            read_details_value(st, trailing->metadata[i].value);
            return;
        }
    }
}

const char *rpc_status_reason(const rpc_status_t *st)
{
    if (st->n_details)
        return st->details[st->n_details - 1];
    return st->message ? st->message : "";
}

varlog_err_t rpc_status_to_err(const rpc_status_t *st)
{
    if (st->code == GRPC_STATUS_OK)
        return VARLOG_OK;
    if (st->code > 0 && st->code <= GRPC_STATUS_UNAUTHENTICATED)
        return (varlog_err_t)st->code;
    return VARLOG_ERR_RPC_UNKNOWN;
}

bool wire_status_details_encode(grpc_status_code code, const char *message,
                                const char *const *details, size_t n_details, grpc_slice *out)
{
    bool ok = false;
    Varlog__Errpb__ErrorDetail *ed = calloc(n_details ? n_details : 1, sizeof(*ed));
    Google__Protobuf__Any *anys = calloc(n_details ? n_details : 1, sizeof(*anys));
    Google__Protobuf__Any **any_ptrs = calloc(n_details ? n_details : 1, sizeof(*any_ptrs));
    uint8_t **values = calloc(n_details ? n_details : 1, sizeof(*values));
    if (!ed || !anys || !any_ptrs || !values)
        goto out;
    for (size_t i = 0; i < n_details; i++) {
        varlog__errpb__error_detail__init(&ed[i]);
        ed[i].error_string = (char *)details[i];
        size_t len = varlog__errpb__error_detail__get_packed_size(&ed[i]);
        values[i] = malloc(len ? len : 1);
        if (!values[i])
            goto out;
        varlog__errpb__error_detail__pack(&ed[i], values[i]);
        google__protobuf__any__init(&anys[i]);
        anys[i].type_url = (char *)WIRE_ERROR_DETAIL_TYPE_URL;
        anys[i].value.data = values[i];
        anys[i].value.len = len;
        any_ptrs[i] = &anys[i];
    }
    Google__Rpc__Status status = GOOGLE__RPC__STATUS__INIT;
    status.code = (int32_t)code;
    status.message = (char *)(message ? message : "");
    status.n_details = n_details;
    status.details = any_ptrs;
    size_t len = google__rpc__status__get_packed_size(&status);
    *out = grpc_slice_malloc(len);
    google__rpc__status__pack(&status, GRPC_SLICE_START_PTR(*out));
    ok = true;
out:
    if (values) {
        for (size_t i = 0; i < n_details; i++)
            free(values[i]);
    }
    free(values);
    free(any_ptrs);
    free(anys);
    free(ed);
    return ok;
}

char *wire_slice_strdup(grpc_slice slice)
{
    size_t n = GRPC_SLICE_LENGTH(slice);
    char *str = malloc(n + 1);
    if (str) {
        memcpy(str, GRPC_SLICE_START_PTR(slice), n);
        str[n] = '\0';
    }
    return str;
}

gpr_timespec wire_deadline(int64_t timeout_ms)
{
    if (timeout_ms < 0)
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                        gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
}

int64_t wire_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t wire_deadline_ms(int64_t timeout_ms)
{
    int64_t now = wire_now_ms();
    return timeout_ms > INT64_MAX - now ? INT64_MAX : now + timeout_ms;
}

/* Keepalive: the client pings every 10 s (also without calls), as Varlog's Go client does, and
 * waits up to 20 s for the ack (gRPC's and Go's default timeout) rather than the Go client's
 * 1.5 s: an ack queued behind a large write or a starved peer arrives late, and a short timeout
 * tore down healthy connections with every stream on them (UNAVAILABLE). gRPC also uses this
 * timeout as the socket's TCP_USER_TIMEOUT. The server tolerates pings at that rate and
 * without calls instead of answering GOAWAY "too_many_pings". */
static grpc_arg client_args[] = {
    {GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = -1}},
    {GRPC_ARG_INTEGER, GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, {.integer = -1}},
    {GRPC_ARG_INTEGER, GRPC_ARG_KEEPALIVE_TIME_MS, {.integer = 10000}},
    {GRPC_ARG_INTEGER, GRPC_ARG_KEEPALIVE_TIMEOUT_MS, {.integer = 20000}},
    {GRPC_ARG_INTEGER, GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, {.integer = 1}},
    {GRPC_ARG_INTEGER, GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, {.integer = 0}},
    /* gRPC's default would hold pings on an idle connection back to one per 5 minutes. */
    {GRPC_ARG_INTEGER, GRPC_ARG_HTTP2_MIN_SENT_PING_INTERVAL_WITHOUT_DATA_MS, {.integer = 10000}},
};
static grpc_arg server_args[] = {
    {GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = -1}},
    {GRPC_ARG_INTEGER, GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, {.integer = -1}},
    {GRPC_ARG_INTEGER, GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, {.integer = 1}},
    {GRPC_ARG_INTEGER, GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, {.integer = 1000}},
    {GRPC_ARG_INTEGER, GRPC_ARG_HTTP2_MAX_PING_STRIKES, {.integer = 0}},
    {GRPC_ARG_INTEGER, GRPC_ARG_ALLOW_REUSEPORT, {.integer = 0}},
};
static const grpc_channel_args client_channel_args = {sizeof(client_args) / sizeof(client_args[0]),
                                                      client_args};
static const grpc_channel_args server_channel_args = {sizeof(server_args) / sizeof(server_args[0]),
                                                      server_args};

const grpc_channel_args *wire_channel_args(wire_args_side_t side)
{
    return side == WIRE_ARGS_CLIENT ? &client_channel_args : &server_channel_args;
}

void wire_grpc_ref(void)
{
    grpc_init();
}

void wire_grpc_unref(void)
{
    grpc_shutdown();
}

static bool absl_detection_off;

static void absl_detection_off_once(void)
{
    /* absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle), whose first value,
     * kIgnore, is 0. */
    static const char *const names[] = {
        "_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE",
        "_ZN4absl29SetMutexDeadlockDetectionModeENS_15OnDeadlockCycleE",
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        void *sym = dlsym(RTLD_DEFAULT, names[i]);
        if (!sym)
            continue;
        void (*set_mode)(int);
        memcpy(&set_mode, &sym, sizeof(set_mode)); /* ISO C has no object-to-function cast */
        set_mode(0);
        absl_detection_off = true;
        return;
    }
}

bool wire_absl_deadlock_detection_off(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, absl_detection_off_once);
    return absl_detection_off;
}

void wire_cq_destroy_idle(grpc_completion_queue *cq)
{
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
}

void wire_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
}

/* Now on the monotonic clock plus sec and nsec (< 1 s): split by the caller, so that no unit
 * conversion overflows (flush's INT64_MAX ms is a deadline that never comes). */
static void abs_after(struct timespec *ts, int64_t sec, long nsec)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += (time_t)sec;
    ts->tv_nsec += nsec;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

void abs_deadline(struct timespec *ts, int64_t timeout_ms)
{
    abs_after(ts, timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L);
}

void abs_deadline_us(struct timespec *ts, int64_t timeout_us)
{
    abs_after(ts, timeout_us / 1000000, (long)(timeout_us % 1000000) * 1000L);
}
