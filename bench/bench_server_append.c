/* bench_server_append: long-lived /varlog.snpb.LogIO/Append bidi streams driven by bare
 * gRPC-core calls, AppendRequests of BATCH records of SIZE bytes, DEPTH requests in flight
 * per stream, printed as Go benchmark lines. Two families of rows:
 *
 *   ServerAppend/batch=B/size=S/depth=D: the server's cost of Append (issue 10);
 *   AppendFloor/size=S/batch=B/depth=D: the client's floor (issue 25): what gRPC core and
 *       the kernel cost a client for the same requests as bench_append's Appender rows, with
 *       no library around them; the least any client built on gRPC core can spend.
 *
 *   bench_server_append [-server PATH | -inproc | -mr HOST:PORT[,...]] [-topic ID]
 *                       [-logstream ID] [-size BYTES] [-rate R] [-hold MIB] [-benchtime=D|Nx]
 *                       [-count=N] [-bench=REGEX] [FILTER]   (see harness.h)
 *
 * By default each benchmark (and each -count repetition) starts a fresh varlog-server as a
 * child process (PATH, default the one built beside this program), so that the server's CPU
 * is its own: it is read from /proc/PID/stat (utime + stime, all threads) before and after
 * the measured round and reported per record as srv-ns/rec. -inproc runs the embedded server
 * in this process instead; srv-ns/rec is then left out (the process's CPU, client and server,
 * is in cli-ns/rec). -mr: a cluster's metadata repository (a real Varlog cluster): the
 * stream goes to the primary storage node of -topic's (default 1) log stream -logstream
 * (default 1), found through the library's metadata (outside the clock); records appended
 * there stay there. -size: the AppendFloor rows' record size (1 to 4096; default 100;
 * bench/side-by-side.py uses 128). -rate R: the AppendFloor rows send R requests per second
 * (named .../rate=R), the thread waiting in its completion queue between them, as a client
 * paced by its producers would: the floor under a trickle (side-by-side.py's trickle row).
 * -hold MIB: the AppendFloor rows (named .../hold=MIBMiB) copy each request into the next
 * place of a ring of MIB MiB and send it from there, the place given back when the request
 * is answered (a send waits for the next place): the floor of a client that copies its
 * records' bytes and keeps them for a retry until the answer, as the appender does in its
 * queue (bench/scale.py's "held" floor, with appender.queue.max.bytes's 64 MiB). The ring
 * bounds the requests in flight, as the appender's queue bound does.
 *
 * -logstream 0 (only with -mr): every log stream of the topic, the floor under bench_append's
 * topic-wide appender (its -logstream 0), which spreads its batches over the K log streams,
 * each to that log stream's primary over an Append stream of its own with up to its depth of
 * requests in flight. So here: one Append stream per log stream, to its primary (one channel
 * per storage-node address, as the library keeps one per address), all on one completion
 * queue polled by the one thread; each stream has at most DEPTH requests unanswered, and a
 * round's requests go to the streams in turn (the first after the last one used that has
 * room). Every row is then named .../ls=K (before any /rate=R), so that it is never read as
 * the one-stream row of the same shape. The log streams are listed once at start (to name
 * the rows), their primaries at each repetition. Without it, the same code runs with K = 1.
 *
 * The client is bare gRPC-core calls, not the library's client: each stream's request is
 * encoded once (fields 1 and 2, its log stream, then BATCH payloads) and every send on it
 * shares that slice, in a byte buffer of its own as a send requires; one thread sends, polls
 * the completion queue (grpc_completion_queue_next reads the sockets on the calling thread:
 * no I/O thread, no hand-off) and checks each response by hand (BATCH results; against our
 * own server the first one's GLSN and LLSN the ones expected, against a cluster an LLSN past
 * the previous response's on the same stream) rather than decoding it with protobuf-c. No
 * producer thread, no batching, no callback, no statistics: what is left per request is gRPC
 * core's, the kernel's and the wait's.
 *
 * An op is one AppendRequest. Metrics: records/s (records answered per second of the
 * round), srv-ns/rec (server CPU per record, child server only), cli-ns/rec (ServerAppend)
 * or cpu-us/record (AppendFloor: the names bench_append uses) this process's CPU per record
 * (getrusage), ctxsw/request (voluntary + involuntary context switches of this process per
 * request). MB/s counts payload bytes. B/op and allocs/op count this program's own
 * allocations (alloc_count.h): with the child server or -mr that is the benchmark client
 * alone. */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "bench_client.h"
#include "child_server.h"
#include "harness.h"
#include "varlog/server.h"
#include "wire.h"

#ifndef VARLOG_SERVER_PROGRAM
#define VARLOG_SERVER_PROGRAM "varlog-server"
#endif

#define APPEND_PATH "/varlog.snpb.LogIO/Append"
#define WAIT_MS 30000
/* Enough for the longest rounds at a few million records/s; the stored log is never read. */
#define SERVER_MAX_BYTES (64ULL << 30)

#define MAX_SIZE 4096

typedef struct bcase {
    char name[96]; /* without the "Benchmark" prefix */
    size_t batch;  /* records per AppendRequest */
    size_t size;   /* bytes per record */
    int depth;     /* requests in flight per stream */
    bool floor;    /* an AppendFloor row: reported as the client's cost */
} bcase_t;

static const char *server_program = VARLOG_SERVER_PROGRAM;
static bool inproc;
static const char *cluster_address;             /* -mr */
static int32_t topic_id = 1, log_stream_id = 1; /* log_stream_id 0: all of the topic's */
static int32_t *topic_ls;                       /* with -logstream 0: their ids, from main */
static size_t n_topic_ls;
static size_t floor_size = 100;
static int32_t floor_rate; /* -rate: AppendFloor requests per second, 0 = as fast as it can */
static size_t floor_hold;  /* -hold: bytes of the ring AppendFloor copies requests into, 0 = none */

/* A completion's tag is its stream's address plus one of these (see stream_t). */
enum { T_START, T_STATUS, T_SEND, T_RECV };
#define T_KINDS ((uintptr_t)3)

/* One Append stream: to one log stream, on its own call. */
typedef struct stream {
    int32_t log_stream_id;
    char addr[64];
    grpc_channel *ch; /* the env's, shared with the other streams to addr */
    grpc_call *call;
    grpc_metadata_array initial, trailing;
    grpc_status_code code;
    grpc_slice details;
    grpc_slice request; /* the whole encoded AppendRequest, shared by every send */
    /* -hold: the ring places of its unanswered requests, oldest first (answers come in
     * order on a stream); depth of them at most. */
    size_t *held, held_first;
    grpc_byte_buffer *send_bb, *recv_bb;
    bool send_busy, recv_busy;
    long unanswered; /* requests sent and not answered: at most the case's depth */
    /* Our own server: the first GLSN and LLSN of the next response, exactly. A cluster's
     * GLSNs interleave with other log streams' and its LLSNs continue from what is stored:
     * the first LLSN must be at least next_llsn (0: not known yet). */
    uint64_t next_glsn, next_llsn;
} stream_t;
/* The tag's kind sits in the low bits a stream's address leaves clear. */
_Static_assert(_Alignof(stream_t) > T_KINDS, "stream_t too loosely aligned for its tags");

typedef struct env {
    const bcase_t *c;
    pid_t pid;                 /* the child server; -1 without one */
    varlog_server_t *srv;      /* the embedded server with -inproc */
    grpc_completion_queue *cq; /* every stream's */
    stream_t *s;               /* k streams */
    grpc_channel **ch;         /* n_ch, one per distinct address */
    size_t k, n_ch, last;      /* last: the stream the last request went to */
    bool exact;                /* our own server: GLSNs and LLSNs known in advance */
    /* -hold: floor_hold bytes in places of one request each, taken in turn and given back
     * when their request is answered; a send waits for the next place to be free. */
    uint8_t *ring;
    bool *place_busy;
    size_t places, place_next;
} env_t;

/* ---- the request and the response ------------------------------------------------------- */

/* AppendRequest{topic_id, ls, payload x batch}. */
static grpc_slice encode_request(const bcase_t *c, int32_t ls)
{
    size_t per = 1 + wire_varint_len(c->size) + c->size;
    size_t head = 2 + wire_varint_len((uint64_t)topic_id) + wire_varint_len((uint64_t)ls);
    grpc_slice s = grpc_slice_malloc(head + per * c->batch);
    uint8_t *p = GRPC_SLICE_START_PTR(s);
    size_t off = 0;
    p[off++] = 1 << 3;
    off += wire_varint_put(p + off, (uint64_t)topic_id);
    p[off++] = 2 << 3;
    off += wire_varint_put(p + off, (uint64_t)ls);
    for (size_t i = 0; i < c->batch; i++) {
        p[off++] = (3 << 3) | 2;
        off += wire_varint_put(p + off, c->size);
        memset(p + off, 'a' + (int)(i % 26), c->size);
        off += c->size;
    }
    return s;
}

static bool get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

/* A length-delimited field number want at *p: its body in [*body, *body + *len). */
static bool get_field(const uint8_t **p, const uint8_t *end, unsigned want, const uint8_t **body,
                      uint64_t *len)
{
    uint64_t tag = 0;
    if (!get_varint(p, end, &tag) || tag != ((want << 3) | 2) || !get_varint(p, end, len) ||
        *len > (uint64_t)(end - *p))
        return false;
    *body = *p;
    *p += *len;
    return true;
}

/* AppendResponse: batch results whose first meta has the GLSN and LLSN expected (fields 3
 * and 4 of LogEntryMeta; see stream_t). The other results are counted, not read. */
static bool check_response(const env_t *e, stream_t *s, const uint8_t *p, size_t len)
{
    const uint8_t *end = p + len, *res = NULL, *meta = NULL;
    uint64_t rlen = 0, mlen = 0, n = 0, glsn = 0, llsn = 0;
    while (p < end) {
        if (!get_field(&p, end, 1, &res, &rlen))
            return false;
        if (n++ == 0) {
            const uint8_t *q = res;
            if (!get_field(&q, res + rlen, 1, &meta, &mlen))
                return false;
            const uint8_t *m = meta, *mend = meta + mlen;
            while (m < mend) {
                uint64_t tag = 0, v = 0;
                if (!get_varint(&m, mend, &tag) || (tag & 7) != 0 || !get_varint(&m, mend, &v))
                    return false;
                if (tag >> 3 == 3)
                    glsn = v;
                else if (tag >> 3 == 4)
                    llsn = v;
            }
        }
    }
    if (n != e->c->batch)
        return false;
    if (e->exact ? glsn != s->next_glsn || llsn != s->next_llsn : llsn == 0 || llsn < s->next_llsn)
        return false;
    s->next_glsn = glsn + n;
    s->next_llsn = llsn + n;
    return true;
}

/* ---- the streams ------------------------------------------------------------------------ */

static void *tag_of(stream_t *s, uintptr_t kind)
{
    return (void *)((uintptr_t)s | kind);
}

static bool start_batch(stream_t *s, const grpc_op *ops, size_t n, uintptr_t kind)
{
    return grpc_call_start_batch(s->call, ops, n, tag_of(s, kind), NULL) == GRPC_CALL_OK;
}

static bool arm_recv(stream_t *s)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &s->recv_bb;
    s->recv_busy = start_batch(s, &op, 1, T_RECV);
    return s->recv_busy;
}

/* With -hold the request is first copied into the ring's next place and sent from there:
 * the copy a client that takes its records' bytes makes, into memory it keeps until the
 * answer (for a retry) and that a queue's worth of requests wrote before. */
static bool send_one(env_t *e, stream_t *s)
{
    if (e->ring) {
        size_t len = GRPC_SLICE_LENGTH(s->request), place = e->place_next;
        uint8_t *at = e->ring + place * len;
        memcpy(at, GRPC_SLICE_START_PTR(s->request), len);
        e->place_busy[place] = true;
        e->place_next = (place + 1) % e->places;
        s->held[(s->held_first + (size_t)s->unanswered) % (size_t)e->c->depth] = place;
        grpc_slice held = grpc_slice_from_static_buffer(at, len);
        s->send_bb = grpc_raw_byte_buffer_create(&held, 1);
    } else {
        s->send_bb = grpc_raw_byte_buffer_create(&s->request, 1);
    }
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = s->send_bb;
    s->send_busy = start_batch(s, &op, 1, T_SEND);
    if (s->send_busy)
        s->unanswered++;
    return s->send_busy;
}

/* The channel to s's address: a new one, or the one an earlier stream opened to it. */
static void stream_channel(env_t *e, stream_t *s)
{
    for (stream_t *t = e->s; t < s; t++) {
        if (strcmp(t->addr, s->addr) == 0) {
            s->ch = t->ch;
            return;
        }
    }
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    s->ch = e->ch[e->n_ch++] =
        grpc_channel_create(s->addr, creds, wire_channel_args(WIRE_ARGS_CLIENT));
    grpc_channel_credentials_release(creds);
}

static bool stream_open(env_t *e, stream_t *s)
{
    s->next_glsn = e->exact ? 1 : 0;
    s->next_llsn = s->next_glsn;
    stream_channel(e, s);
    s->call = grpc_channel_create_call(s->ch, NULL, GRPC_PROPAGATE_DEFAULTS, e->cq,
                                       grpc_slice_from_static_string(APPEND_PATH), NULL,
                                       gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    if (!s->call)
        return false;
    grpc_op ops[2];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY;
    ops[1].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[1].data.recv_initial_metadata.recv_initial_metadata = &s->initial;
    grpc_op st;
    memset(&st, 0, sizeof(st));
    st.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    st.data.recv_status_on_client.trailing_metadata = &s->trailing;
    st.data.recv_status_on_client.status = &s->code;
    st.data.recv_status_on_client.status_details = &s->details;
    return start_batch(s, ops, 2, T_START) && start_batch(s, &st, 1, T_STATUS) && arm_recv(s);
}

/* The stream the next request goes to: the first after the last one used that may take one
 * (no send of its own in progress, fewer than depth unanswered); NULL when none may. */
static stream_t *stream_with_room(env_t *e)
{
    for (size_t j = 1; j <= e->k; j++) {
        stream_t *s = &e->s[(e->last + j) % e->k];
        if (!s->send_busy && s->unanswered < e->c->depth)
            return e->ring && e->place_busy[e->place_next] ? NULL : s;
    }
    return NULL;
}

/* A response on s, in bb: checked, and s's next receive armed. */
static bool take_response(bench_b_t *b, env_t *e, stream_t *s, grpc_byte_buffer *bb, long answered,
                          long n)
{
    if (!bb) {
        b_failf(b, "the stream to log stream %d ended after %ld of %ld responses", s->log_stream_id,
                answered, n);
        return false;
    }
    grpc_byte_buffer_reader r;
    grpc_byte_buffer_reader_init(&r, bb);
    grpc_slice all = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    grpc_byte_buffer_destroy(bb);
    bool ok = check_response(e, s, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all));
    grpc_slice_unref(all);
    if (!ok) {
        b_failf(b, "response %ld (log stream %d) is not %zu results from LLSN %llu", answered,
                s->log_stream_id, e->c->batch, (unsigned long long)s->next_llsn);
        return false;
    }
    s->unanswered--;
    if (e->ring) {
        e->place_busy[s->held[s->held_first]] = false;
        s->held_first = (s->held_first + 1) % (size_t)e->c->depth;
    }
    if (!arm_recv(s)) {
        b_failf(b, "receive refused");
        return false;
    }
    return true;
}

/* Sends n requests over the streams, at most depth unanswered on each at a time, and takes
 * their n responses. */
static bool run_requests(env_t *e, bench_b_t *b, long n)
{
    long sent = 0, answered = 0;
    /* Paced (-rate): request i is due at t0 + i / rate; until then the thread waits in its
     * queue, as a client whose requests come at that rate would. */
    double per_ns = e->c->floor && floor_rate > 0 ? 1e9 / floor_rate : 0;
    int64_t t0 = bench_now_ns(), waited_ns = 0;
    while (answered < n) {
        int64_t due_in = 0;
        stream_t *s;
        /* Every request that is due and has a stream to go to, before the next wait. */
        while (sent < n && (s = stream_with_room(e)) != NULL) {
            due_in = per_ns > 0 ? t0 + (int64_t)(per_ns * (double)sent) - bench_now_ns() : 0;
            if (due_in > 0)
                break;
            if (!send_one(e, s)) {
                b_failf(b, "send refused");
                return false;
            }
            e->last = (size_t)(s - e->s);
            sent++;
        }
        gpr_timespec deadline = due_in > 0 ? gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                                          gpr_time_from_nanos(due_in, GPR_TIMESPAN))
                                           : wire_deadline(WAIT_MS);
        grpc_event ev = grpc_completion_queue_next(e->cq, deadline, NULL);
        if (ev.type == GRPC_QUEUE_TIMEOUT && due_in > 0 && waited_ns < WAIT_MS * 1000000LL) {
            waited_ns += due_in;
            continue;
        }
        waited_ns = 0;
        if (ev.type != GRPC_OP_COMPLETE) {
            b_failf(b, "no completion within %d ms (%ld of %ld answered)", WAIT_MS, answered, n);
            return false;
        }
        s = (stream_t *)((uintptr_t)ev.tag & ~T_KINDS);
        switch ((uintptr_t)ev.tag & T_KINDS) {
        case T_SEND:
            grpc_byte_buffer_destroy(s->send_bb);
            s->send_bb = NULL;
            s->send_busy = false;
            if (!ev.success) {
                b_failf(b, "send failed");
                return false;
            }
            break;
        case T_RECV: {
            s->recv_busy = false;
            grpc_byte_buffer *bb = s->recv_bb;
            s->recv_bb = NULL;
            if (!take_response(b, e, s, bb, answered, n))
                return false;
            answered++;
            break;
        }
        case T_STATUS:
            b_failf(b, "the stream to log stream %d ended with status %d", s->log_stream_id,
                    (int)s->code);
            return false;
        default:
            break;
        }
    }
    return true;
}

/* Every call cancelled, what they had started completed (their buffers freed), then the
 * calls, the queue and the channels released. */
static void streams_close(env_t *e)
{
    if (!e->cq)
        return;
    for (size_t i = 0; i < e->k; i++)
        if (e->s[i].call)
            grpc_call_cancel(e->s[i].call, NULL);
    grpc_completion_queue_shutdown(e->cq);
    for (;;) {
        grpc_event ev =
            grpc_completion_queue_next(e->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        stream_t *s = (stream_t *)((uintptr_t)ev.tag & ~T_KINDS);
        grpc_byte_buffer **bb = NULL;
        if (((uintptr_t)ev.tag & T_KINDS) == T_SEND)
            bb = &s->send_bb;
        else if (((uintptr_t)ev.tag & T_KINDS) == T_RECV)
            bb = &s->recv_bb;
        if (bb && *bb) {
            grpc_byte_buffer_destroy(*bb);
            *bb = NULL;
        }
    }
    for (size_t i = 0; i < e->k; i++)
        if (e->s[i].call)
            grpc_call_unref(e->s[i].call);
    grpc_completion_queue_destroy(e->cq);
    for (size_t i = 0; i < e->n_ch; i++)
        grpc_channel_destroy(e->ch[i]);
    e->cq = NULL;
}

/* ---- the benchmark ---------------------------------------------------------------------- */

static void env_teardown(void *ctx)
{
    env_t *e = ctx;
    streams_close(e);
    for (size_t i = 0; e->s && i < e->k; i++) {
        stream_t *s = &e->s[i];
        grpc_metadata_array_destroy(&s->initial);
        grpc_metadata_array_destroy(&s->trailing);
        grpc_slice_unref(s->details);
        grpc_slice_unref(s->request);
        free(s->held);
    }
    free(e->s);
    free(e->ch);
    free(e->ring);
    free(e->place_busy);
    child_server_stop(e->pid);
    varlog_server_destroy(e->srv);
    wire_grpc_unref();
    free(e);
}

/* -mr: the address of the primary storage node of each stream's log stream, from the
 * library's metadata; 0, or -1 after a message on stderr. */
static int cluster_targets(env_t *e)
{
    varlog_client_t *client = NULL;
    if (bench_client_open(cluster_address, NULL, &client) != 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < e->k && rc == 0; i++)
        rc = bench_primary_of(client, topic_id, e->s[i].log_stream_id, e->s[i].addr,
                              sizeof(e->s[i].addr));
    if (rc != 0)
        fprintf(stderr, "(the cluster at %s)\n", cluster_address);
    varlog_client_destroy(client);
    return rc;
}

/* -hold: the ring and its places (every stream's request has the same length), its pages
 * touched before the clock starts (an appender's queue is as warm after its first round);
 * 0, or -1 after a message on stderr. */
static int hold_open(env_t *e)
{
    size_t len = GRPC_SLICE_LENGTH(e->s[0].request);
    e->places = floor_hold / len;
    if (e->places == 0) {
        fprintf(stderr, "-hold: %zu bytes cannot hold one request of %zu\n", floor_hold, len);
        return -1;
    }
    e->ring = malloc(e->places * len);
    e->place_busy = calloc(e->places, sizeof(*e->place_busy));
    for (size_t i = 0; i < e->k; i++) {
        e->s[i].held = calloc((size_t)e->c->depth, sizeof(*e->s[i].held));
        if (!e->s[i].held)
            break;
    }
    if (!e->ring || !e->place_busy || !e->s[e->k - 1].held) {
        fprintf(stderr, "-hold %zu: out of memory\n", floor_hold);
        return -1;
    }
    memset(e->ring, 0, e->places * len);
    return 0;
}

/* The streams' log streams and requests, their servers' addresses (a fresh server, or with
 * -mr the cluster's storage nodes), then the streams; 0, or -1 after a message on stderr. */
static int env_open(env_t *e)
{
    e->k = log_stream_id == 0 ? n_topic_ls : 1;
    e->s = calloc(e->k, sizeof(*e->s));
    e->ch = calloc(e->k, sizeof(*e->ch));
    if (!e->s || !e->ch)
        return -1;
    for (size_t i = 0; i < e->k; i++) {
        stream_t *s = &e->s[i];
        s->log_stream_id = log_stream_id == 0 ? topic_ls[i] : log_stream_id;
        grpc_metadata_array_init(&s->initial);
        grpc_metadata_array_init(&s->trailing);
        s->details = grpc_empty_slice();
        s->code = GRPC_STATUS_UNKNOWN;
        s->request = encode_request(e->c, s->log_stream_id);
    }
    e->last = e->k - 1; /* the first request goes to the first stream */
    e->exact = !cluster_address;
    if (e->c->floor && floor_hold > 0 && hold_open(e) != 0)
        return -1;
    if (cluster_address) {
        if (cluster_targets(e) != 0)
            return -1;
    } else if (inproc) {
        varlog_server_opts_t o = {.listen_address = "127.0.0.1:0",
                                  .topics = 1,
                                  .log_streams_per_topic = 1,
                                  .max_bytes = SERVER_MAX_BYTES};
        if (varlog_server_start(&o, &e->srv) != VARLOG_OK) {
            fprintf(stderr, "varlog_server_start failed\n");
            return -1;
        }
        snprintf(e->s[0].addr, sizeof(e->s[0].addr), "%s", varlog_server_address(e->srv));
    } else if ((e->pid = child_server_start(server_program, 1, 1, SERVER_MAX_BYTES, e->s[0].addr,
                                            sizeof(e->s[0].addr))) < 0) {
        return -1;
    }
    e->cq = grpc_completion_queue_create_for_next(NULL);
    for (size_t i = 0; i < e->k; i++) {
        if (!stream_open(e, &e->s[i])) {
            fprintf(stderr, "cannot open the Append stream to %s (log stream %d)\n", e->s[i].addr,
                    e->s[i].log_stream_id);
            return -1;
        }
    }
    return 0;
}

/* A fresh server (or, with -mr, the cluster's storage nodes) and streams per -count
 * repetition, so that stored records never carry over. */
static void *env_setup(const void *arg)
{
    env_t *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->c = arg;
    e->pid = -1;
    wire_grpc_ref();
    if (env_open(e) != 0) {
        env_teardown(e);
        return NULL;
    }
    return e;
}

static void bench_server_append(bench_b_t *b)
{
    env_t *e = b->ctx;
    const bcase_t *c = e->c;
    b_set_bytes(b, (int64_t)(c->batch * c->size));
    int64_t srv0 = e->pid > 0 ? child_server_cpu_us(e->pid) : -1, cli0, csw0, cli1, csw1;
    bench_rusage(&cli0, &csw0);
    int64_t t0 = bench_now_ns();
    if (!run_requests(e, b, b->n))
        return;
    int64_t t1 = bench_now_ns();
    int64_t srv1 = e->pid > 0 ? child_server_cpu_us(e->pid) : -1;
    bench_rusage(&cli1, &csw1);
    double records = (double)b->n * (double)c->batch;
    b_report_metric(b, records * 1e9 / (double)(t1 - t0), "records/s");
    if (srv0 >= 0 && srv1 >= 0)
        b_report_metric(b, (double)(srv1 - srv0) * 1e3 / records, "srv-ns/rec");
    if (c->floor)
        b_report_metric(b, (double)(cli1 - cli0) / records, "cpu-us/record");
    else
        b_report_metric(b, (double)(cli1 - cli0) * 1e3 / records, "cli-ns/rec");
    b_report_metric(b, (double)(csw1 - csw0) / (double)b->n, "ctxsw/request");
}

/* ServerAppend rows, then AppendFloor rows in the shapes of bench/side-by-side.py's
 * (batch, pipeline) pairs at -size bytes, and (10,2): its trickle's (2,000 records/s with
 * the appender's 5 ms linger and depth 2 make requests of about 10 records; with -rate 200,
 * the same requests at the same pace). */
static const bcase_t server_cases[] = {
    {"ServerAppend/batch=1/size=100/depth=8", 1, 100, 8, false},
    {"ServerAppend/batch=100/size=100/depth=8", 100, 100, 8, false},
    {"ServerAppend/batch=1000/size=100/depth=2", 1000, 100, 2, false},
    {"ServerAppend/batch=1000/size=100/depth=8", 1000, 100, 8, false},
};
static const struct {
    int batch, depth;
} floor_shapes[] = {{1, 1}, {100, 1}, {100, 8}, {1000, 8}, {10, 2}};
#define N_SERVER_CASES (sizeof(server_cases) / sizeof(server_cases[0]))
#define N_FLOOR_CASES (sizeof(floor_shapes) / sizeof(floor_shapes[0]))

/* Takes this program's flags out of argv; the rest goes to the harness. Returns false on a
 * bad value. */
static bool take_own_flags(int *argc, char **argv)
{
    int32_t size = 0;
    const bench_target_flags_t target = {.inproc = &inproc,
                                         .cluster_address = &cluster_address,
                                         .server_program = &server_program,
                                         .topic_id = &topic_id,
                                         .log_stream = &log_stream_id,
                                         .size = &size,
                                         .logstream_min = 0,
                                         .size_max = MAX_SIZE};
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *v = NULL;
        bool ok = true;
        if (bench_target_flag(*argc, argv, &i, &target, &ok)) {
            if (!ok)
                return false;
        } else if (bench_flag(*argc, argv, &i, "hold", true, &v)) {
            int32_t mib = 0;
            if (!v || !bench_parse_int(argv[0], "hold", v, 1, &mib)) {
                if (!v)
                    fprintf(stderr, "%s: -hold needs a value (MiB)\n", argv[0]);
                return false;
            }
            floor_hold = (size_t)mib << 20;
        } else if (bench_flag(*argc, argv, &i, "rate", true, &v)) {
            if (!v || !bench_parse_int(argv[0], "rate", v, 1, &floor_rate)) {
                if (!v)
                    fprintf(stderr, "%s: -rate needs a value\n", argv[0]);
                return false;
            }
        } else {
            argv[out++] = argv[i];
        }
    }
    if (log_stream_id == 0 && !cluster_address) {
        fprintf(stderr, "%s: -logstream 0 (every log stream of the topic) needs -mr\n", argv[0]);
        return false;
    }
    if (size > 0)
        floor_size = (size_t)size;
    argv[out] = NULL;
    *argc = out;
    return true;
}

/* -logstream 0: the ids of the topic's log streams into topic_ls, once, to name the rows and
 * to open their streams; false after a message on stderr. */
static bool list_topic(void)
{
    varlog_client_t *client = NULL;
    if (bench_client_open(cluster_address, NULL, &client) != 0)
        return false;
    size_t n = 0;
    varlog_err_t rc = varlog_client_log_streams(client, topic_id, NULL, 0, &n);
    if (rc == VARLOG_OK && n > 0) {
        topic_ls = calloc(n, sizeof(*topic_ls));
        rc = topic_ls ? varlog_client_log_streams(client, topic_id, topic_ls, n, &n_topic_ls)
                      : VARLOG_ERR_NOMEM;
        if (n_topic_ls > n) /* more since the count: the first n */
            n_topic_ls = n;
    }
    varlog_client_destroy(client);
    if (rc != VARLOG_OK || n_topic_ls == 0) {
        fprintf(stderr, "the log streams of topic %d at %s: %s\n", topic_id, cluster_address,
                rc != VARLOG_OK ? varlog_err_name(rc) : "none");
        return false;
    }
    return true;
}

/* Appends tail to name (truncated at cap). */
static void name_add(char *name, size_t cap, const char *tail)
{
    size_t len = strlen(name);
    snprintf(name + len, cap - len, "%s", tail);
}

int main(int argc, char **argv)
{
    if (!take_own_flags(&argc, argv))
        return 2;
    if (log_stream_id == 0 && !list_topic())
        return 1;
    signal(SIGPIPE, SIG_IGN);
    char ls_tag[32] = "", rate_tag[32] = "", hold_tag[32] = "";
    if (log_stream_id == 0)
        snprintf(ls_tag, sizeof(ls_tag), "/ls=%zu", n_topic_ls);
    if (floor_hold > 0)
        snprintf(hold_tag, sizeof(hold_tag), "/hold=%zuMiB", floor_hold >> 20);
    if (floor_rate > 0)
        snprintf(rate_tag, sizeof(rate_tag), "/rate=%d", floor_rate);
    static bcase_t cases[N_SERVER_CASES + N_FLOOR_CASES];
    static bench_t benches[N_SERVER_CASES + N_FLOOR_CASES];
    size_t n = 0;
    for (size_t i = 0; i < N_SERVER_CASES; i++) {
        cases[n] = server_cases[i];
        name_add(cases[n++].name, sizeof(cases[0].name), ls_tag);
    }
    for (size_t i = 0; i < N_FLOOR_CASES; i++) {
        bcase_t *c = &cases[n++];
        *c = (bcase_t){.batch = (size_t)floor_shapes[i].batch,
                       .size = floor_size,
                       .depth = floor_shapes[i].depth,
                       .floor = true};
        snprintf(c->name, sizeof(c->name), "AppendFloor/size=%zu/batch=%d/depth=%d", c->size,
                 floor_shapes[i].batch, c->depth);
        name_add(c->name, sizeof(c->name), ls_tag);
        name_add(c->name, sizeof(c->name), hold_tag);
        name_add(c->name, sizeof(c->name), rate_tag);
    }
    for (size_t i = 0; i < n; i++)
        benches[i] =
            (bench_t){cases[i].name, bench_server_append, &cases[i], env_setup, env_teardown};
    bench_opts_t o = {.warmup_ns = 200000000, .pkg = "libvarlog/server"};
    int rc = bench_main(argc, argv, &o, benches, n);
    free(topic_ls);
    return rc;
}
