/* The storage node's LogIO service: Append, Subscribe, SubscribeTo, TrimDeprecated and
 * LogStreamReplicaMetadata, with the semantics and error encodings of sections 6.2-6.7 of
 * the wire reference. Handlers run on the transport thread and never block; delayed work
 * runs on the timer thread through the same thread-safe functions. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>

#include "google/protobuf/empty.pb-c.h"
#include "server_internal.h"
#include "snpb/log_io.pb-c.h"
#include "wire.h"

/* Requests answered but not yet sent before the server stops reading an Append stream,
 * like the Go server's default append pipeline. */
#define APPEND_PIPELINE 8
/* A subscriber hands at most this many messages (or bytes, but at least one message) to the
 * transport per turn: the bound on what one slow subscriber holds in this process. */
#define SUB_BATCH_MSGS 8
#define SUB_BATCH_BYTES (256 * 1024)

#define TRIMMED_MESSAGE "log stream: logstream: trimmed"
#define DROP_MESSAGE "fault injection: stream dropped"

/* The Go server formats errors that were already gRPC statuses inside its handler. */
static void finish_go_status(rpc_server_call_t *call, grpc_status_code code, const char *name,
                             const char *desc)
{
    char msg[256];
    snprintf(msg, sizeof(msg), "rpc error: code = %s desc = %s", name, desc);
    rpc_server_call_finish(call, code, msg, NULL, 0);
}

/* Subscribe setup errors carry their text as an ErrorDetail too (ToStatusErrorWithCode). */
static void finish_with_detail(rpc_server_call_t *call, grpc_status_code code, const char *msg)
{
    const char *details[1] = {msg};
    rpc_server_call_finish(call, code, msg, details, 1);
}

static void finish_trimmed(rpc_server_call_t *call)
{
    const char *details[2] = {TRIMMED_MESSAGE, "logstream: trimmed"};
    rpc_server_call_finish(call, GRPC_STATUS_OUT_OF_RANGE, TRIMMED_MESSAGE, details, 2);
}

/* ---- Append ---------------------------------------------------------------------------- */

struct append_state {
    atomic_int refs; /* the call's (until on_done) + one per delayed request */
    struct varlog_server *srv;
    rpc_server_call_t *call;
    /* Touched by one thread at a time: reading stops while a delayed request is out. */
    bool fixed;
    int32_t topic_id, ls_id;
    int64_t drop_after;
    bool drop_after_write; /* the request at the drop is stored before the stream ends */
    uint64_t answered;
    atomic_bool over;    /* we ended the stream */
    atomic_bool delayed; /* a delayed request is on the timer */
};

static void append_unref(struct append_state *a)
{
    if (atomic_fetch_sub(&a->refs, 1) == 1)
        free(a);
}

/* Ends an Append stream whose batch was refused before anything of it was stored. */
static void append_refuse(rpc_server_call_t *call, varlog_err_t err)
{
    switch (err) {
    case VARLOG_ERR_RPC_NOT_FOUND:
        finish_go_status(call, GRPC_STATUS_NOT_FOUND, "NotFound", "no such log stream");
        break;
    case VARLOG_ERR_SEALED:
        rpc_server_call_finish(call, GRPC_STATUS_FAILED_PRECONDITION, "sealed", NULL, 0);
        break;
    case VARLOG_ERR_RPC_RESOURCE_EXHAUSTED:
        rpc_server_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "storage: byte limit reached",
                               NULL, 0);
        break;
    default:
        rpc_server_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL, 0);
        break;
    }
}

/* Not a delayed request: no seal can have come between its read and its processing. */
#define SEALS_NONE UINT64_MAX
#define SEALS_SEALED (UINT64_MAX - 1)

/* Stores the batch of a request that append_request_scan accepted (req; body reads its
 * bytes) and queues its response. seals_at_read: the log stream's seals when a delayed request was
 * read (SEALS_SEALED: it was sealed then). A node refuses a request it reads while sealed, and a
 * seal that came while it held one drops it as Varlog's drops the entries in its pipeline that it
 * had not committed (internal/storagenode/logstream/executor.go, resetInternalState): either way
 * refused as sealed even if the log stream was unsealed since, never stored after the
 * unseal. */
static void append_process(struct append_state *a, const append_req_t *req, wire_cursor_t body,
                           uint64_t seals_at_read)
{
    rpc_server_call_t *call = a->call;
    char desc[96];
    bool drop = a->drop_after >= 0 && a->answered >= (uint64_t)a->drop_after;
    if (drop && !a->drop_after_write) {
        atomic_store(&a->over, true);
        rpc_server_call_finish(call, GRPC_STATUS_UNAVAILABLE, DROP_MESSAGE, NULL, 0);
        return;
    }
    if (!a->fixed) {
        if (req->topic_id <= 0 || req->log_stream_id <= 0) {
            if (req->topic_id <= 0)
                snprintf(desc, sizeof(desc), "invalid topic %" PRId32, req->topic_id);
            else
                snprintf(desc, sizeof(desc), "invalid log stream %" PRId32, req->log_stream_id);
            atomic_store(&a->over, true);
            finish_go_status(call, GRPC_STATUS_INVALID_ARGUMENT, "InvalidArgument", desc);
            return;
        }
        a->fixed = true;
        a->topic_id = req->topic_id;
        a->ls_id = req->log_stream_id;
    } else if (req->topic_id != a->topic_id || req->log_stream_id != a->ls_id) {
        atomic_store(&a->over, true);
        finish_go_status(call, GRPC_STATUS_INVALID_ARGUMENT, "InvalidArgument",
                         "unmatched topic or logstream");
        return;
    }
    if (req->n_payload == 0) {
        atomic_store(&a->over, true);
        finish_go_status(call, GRPC_STATUS_INVALID_ARGUMENT, "InvalidArgument", "no payload");
        return;
    }
    /* Everything that can fail is done before the batch is stored, so that every error
     * status means "nothing of this batch was stored" (the client retries on it). The
     * response's slice comes from gRPC's allocator, which aborts rather than fail. */
    size_t n = req->n_payload;
    grpc_slice resp = grpc_slice_malloc(append_response_max(n));
    store_t *st = &a->srv->store;
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = store_topic_locked(st, a->topic_id);
    store_ls_t *ls = store_ls_locked(st, a->topic_id, a->ls_id);
    varlog_err_t err = VARLOG_OK;
    uint64_t glsn0 = 0, llsn0 = 0;
    store_entry_t *slots = NULL;
    uint8_t *dst = NULL;
    if (!ls)
        err = VARLOG_ERR_RPC_NOT_FOUND;
    else if (ls->sealed || (seals_at_read != SEALS_NONE && ls->seals != seals_at_read))
        err = VARLOG_ERR_SEALED;
    else
        slots = store_reserve_locked(st, ls, n, req->bytes, &dst, &err);
    if (slots) {
        append_request_copy(body, dst, slots);
        store_commit_locked(st, t, ls, n, req->bytes, &glsn0, &llsn0);
    }
    pthread_mutex_unlock(&st->mu);
    if (err != VARLOG_OK) {
        grpc_slice_unref(resp);
        atomic_store(&a->over, true);
        append_refuse(call, err);
        return;
    }
    if (drop) {
        /* Stored, and the answer lost with the connection: the ambiguous case. */
        grpc_slice_unref(resp);
        atomic_store(&a->over, true);
        rpc_server_call_finish(call, GRPC_STATUS_UNAVAILABLE, DROP_MESSAGE, NULL, 0);
        return;
    }
    size_t len =
        append_response_encode(GRPC_SLICE_START_PTR(resp), a->topic_id, a->ls_id, glsn0, llsn0, n);
    GRPC_SLICE_SET_LENGTH(resp, len);
    varlog_err_t serr = rpc_server_call_send_slice(call, resp);
    grpc_slice_unref(resp);
    if (serr == VARLOG_ERR_NOMEM) {
        /* Stored but unanswered: a status the client cannot take for a refusal (it reads
         * INTERNAL as maybe appended), and the stream ends so that no later response is
         * matched to this request. */
        atomic_store(&a->over, true);
        rpc_server_call_finish(call, GRPC_STATUS_INTERNAL,
                               "stored, but the response could not be sent", NULL, 0);
    }
    a->answered++;
}

struct append_delayed {
    timer_item_t item;
    struct append_state *a;
    append_req_t req;
    grpc_slice bytes; /* the request, copied out of the transport's buffer */
    uint64_t seals;   /* its log stream's when it was read: append_process */
};

static void append_delayed_free(struct append_delayed *d)
{
    rpc_server_call_t *call = d->a->call;
    /* The call's reference keeps gRPC initialised until here. */
    grpc_slice_unref(d->bytes);
    append_unref(d->a);
    rpc_server_call_unref(call);
    free(d);
}

static void append_fire(timer_item_t *it)
{
    struct append_delayed *d = (struct append_delayed *)it;
    struct append_state *a = d->a;
    wire_cursor_t body;
    wire_cursor_init(&body, &d->bytes, 1);
    append_process(a, &d->req, body, d->seals);
    atomic_store(&a->delayed, false);
    /* Reading resumes on the server thread (append_writable), which also handles the next
     * request: resuming from here raced with it, and a stream could get a second request
     * delayed behind the first while the first was being answered. */
    if (!atomic_load(&a->over))
        rpc_server_call_wake(a->call);
    append_delayed_free(d);
}

static void append_drop(timer_item_t *it)
{
    struct append_delayed *d = (struct append_delayed *)it;
    rpc_server_call_finish(d->a->call, GRPC_STATUS_UNAVAILABLE, "server stopping", NULL, 0);
    append_delayed_free(d);
}

static void append_start(rpc_server_call_t *call, const ProtobufCMessage *req, void *arg)
{
    (void)req;
    struct method_ctx *ctx = arg;
    faults_count(&ctx->srv->faults, M_APPEND, true, false);
    struct append_state *a = calloc(1, sizeof(*a));
    if (!a) {
        rpc_server_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL, 0);
        return;
    }
    atomic_init(&a->refs, 1);
    atomic_init(&a->over, false);
    atomic_init(&a->delayed, false);
    a->srv = ctx->srv;
    a->call = call;
    a->drop_after = faults_take_drop(&ctx->srv->faults, M_APPEND, &a->drop_after_write);
    rpc_server_call_set_user(call, a);
}

/* The request's bytes in one slice (a copy), for a buffer the cursor cannot read in place
 * (compressed) and for a request kept for later; false when they cannot be read. */
static bool request_bytes(grpc_byte_buffer *bb, grpc_slice *out)
{
    grpc_byte_buffer_reader reader;
    if (!grpc_byte_buffer_reader_init(&reader, bb))
        return false;
    *out = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    return true;
}

/* A malformed request ends the stream as the transport ends one that protobuf-c cannot
 * decode, before anything else looks at it. */
static void append_undecodable(struct append_state *a, rpc_server_call_t *call)
{
    if (a)
        atomic_store(&a->over, true);
    rpc_server_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "cannot decode request", NULL, 0);
}

static void append_message(rpc_server_call_t *call, const ProtobufCMessage *msg, void *arg)
{
    struct method_ctx *ctx = arg;
    struct append_state *a = rpc_server_call_user(call);
    grpc_byte_buffer *bb = ((const rpc_raw_request_t *)msg)->bb;
    grpc_slice copy = grpc_empty_slice();
    wire_cursor_t body;
    append_req_t req;
    if (!wire_cursor_init_bb(&body, bb)) {
        if (!request_bytes(bb, &copy)) {
            append_undecodable(a, call);
            return;
        }
        wire_cursor_init(&body, &copy, 1);
    }
    if (!append_request_scan(body, &req)) {
        grpc_slice_unref(copy);
        append_undecodable(a, call);
        return;
    }
    if (!a || atomic_load(&a->over)) {
        grpc_slice_unref(copy);
        return;
    }
    faults_t *f = &ctx->srv->faults;
    faults_count(f, M_APPEND, false, true);
    fault_status_t fs;
    if (faults_take_failure(f, M_APPEND, &fs)) {
        grpc_slice_unref(copy);
        atomic_store(&a->over, true);
        fault_finish(call, &fs);
        fault_status_clear(&fs);
        return;
    }
    int64_t delay = faults_delay(f, M_APPEND);
    if (delay > 0) {
        grpc_slice_unref(copy);
        struct append_delayed *d = calloc(1, sizeof(*d));
        if (!d || !request_bytes(bb, &d->bytes)) {
            free(d);
            atomic_store(&a->over, true);
            rpc_server_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL, 0);
            return;
        }
        d->item.due_ms = wire_deadline_ms(delay);
        d->item.fire = append_fire;
        d->item.drop = append_drop;
        d->a = a;
        d->req = req;
        store_t *st = &ctx->srv->store;
        pthread_mutex_lock(&st->mu);
        const store_ls_t *ls = store_ls_locked(st, req.topic_id, req.log_stream_id);
        d->seals = !ls ? 0 : ls->sealed ? SEALS_SEALED : ls->seals;
        pthread_mutex_unlock(&st->mu);
        atomic_fetch_add(&a->refs, 1);
        rpc_server_call_ref(call);
        /* Responses stay in request order: the next request is read only after this one
         * was answered. */
        atomic_store(&a->delayed, true);
        rpc_server_call_pause_recv(call, true);
        timer_schedule(&ctx->srv->timer, &d->item);
        return;
    }
    append_process(a, &req, body, SEALS_NONE);
    grpc_slice_unref(copy);
    if (!atomic_load(&a->over) && rpc_server_call_pending_sends(call) >= APPEND_PIPELINE)
        rpc_server_call_pause_recv(call, true);
}

static void append_writable(rpc_server_call_t *call, void *arg)
{
    (void)arg;
    struct append_state *a = rpc_server_call_user(call);
    if (a && !atomic_load(&a->delayed) && !atomic_load(&a->over))
        rpc_server_call_pause_recv(call, false);
}

static void append_done(rpc_server_call_t *call, bool cancelled, void *arg)
{
    (void)cancelled;
    (void)arg;
    struct append_state *a = rpc_server_call_user(call);
    rpc_server_call_set_user(call, NULL);
    if (a)
        append_unref(a);
}

/* ---- Subscribe / SubscribeTo ----------------------------------------------------------- */

struct sub_wake {
    timer_item_t item;
    rpc_server_call_t *call;
};

static void sub_wake_fire(timer_item_t *it)
{
    struct sub_wake *w = (struct sub_wake *)it;
    rpc_server_call_wake(w->call);
    rpc_server_call_unref(w->call);
    free(w);
}

static void sub_wake_drop(timer_item_t *it)
{
    struct sub_wake *w = (struct sub_wake *)it;
    rpc_server_call_unref(w->call);
    free(w);
}

/* Validates the request with the store locked; finishes the call and returns false on an
 * error. */
static bool sub_validate_locked(store_t *st, sub_state_t *s)
{
    char msg[128];
    rpc_server_call_t *call = s->call;
    if (s->topic_id <= 0) {
        snprintf(msg, sizeof(msg), "invalid topic %" PRId32, s->topic_id);
        finish_with_detail(call, GRPC_STATUS_INVALID_ARGUMENT, msg);
        return false;
    }
    if (s->ls_id <= 0) {
        snprintf(msg, sizeof(msg), "invalid log stream %" PRId32, s->ls_id);
        finish_with_detail(call, GRPC_STATUS_INVALID_ARGUMENT, msg);
        return false;
    }
    if (s->begin >= s->end) {
        snprintf(msg, sizeof(msg), "invalid range: begin %" PRIu64 " >= end %" PRIu64, s->begin,
                 s->end);
        finish_with_detail(call, GRPC_STATUS_INVALID_ARGUMENT, msg);
        return false;
    }
    store_ls_t *ls = store_ls_locked(st, s->topic_id, s->ls_id);
    if (!ls) {
        finish_with_detail(call, GRPC_STATUS_NOT_FOUND, "no such log stream");
        return false;
    }
    if (!s->by_llsn) {
        if (ls->trim_glsn > 0 && s->begin <= ls->trim_glsn) {
            finish_trimmed(call);
            return false;
        }
        return true;
    }
    bool empty = ls->head == ls->count;
    uint64_t first = empty ? ls->next_llsn : ls->entries[ls->head].llsn;
    if ((ls->trimmed_any && s->begin < first) || (empty && s->end <= ls->next_llsn)) {
        finish_trimmed(call);
        return false;
    }
    return true;
}

static void sub_start(rpc_server_call_t *call, const ProtobufCMessage *msg, void *arg)
{
    struct method_ctx *ctx = arg;
    struct varlog_server *srv = ctx->srv;
    int m = ctx->index;
    faults_count(&srv->faults, m, true, true);
    fault_status_t fs;
    if (faults_take_failure(&srv->faults, m, &fs)) {
        fault_finish(call, &fs);
        fault_status_clear(&fs);
        return;
    }
    sub_state_t *s = calloc(1, sizeof(*s));
    if (!s) {
        rpc_server_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL, 0);
        return;
    }
    s->srv = srv;
    s->call = call;
    if (m == M_SUBSCRIBE) {
        const Varlog__Snpb__SubscribeRequest *r = (const Varlog__Snpb__SubscribeRequest *)msg;
        s->topic_id = r->topic_id;
        s->ls_id = r->log_stream_id;
        s->begin = r->glsn_begin;
        s->end = r->glsn_end;
    } else {
        const Varlog__Snpb__SubscribeToRequest *r = (const Varlog__Snpb__SubscribeToRequest *)msg;
        s->by_llsn = true;
        s->topic_id = r->topic_id;
        s->ls_id = r->log_stream_id;
        s->begin = r->llsn_begin;
        s->end = r->llsn_end;
    }
    s->cursor = s->begin;
    s->scan_fresh = true;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    bool ok = sub_validate_locked(st, s);
    if (ok) {
        s->snext = st->subs;
        if (st->subs)
            st->subs->sprev = s;
        st->subs = s;
        st->n_subs++;
        s->started = true;
    }
    pthread_mutex_unlock(&st->mu);
    if (!ok) {
        free(s);
        return;
    }
    s->drop_after = faults_take_drop(&srv->faults, m, NULL);
    int64_t delay = faults_delay(&srv->faults, m);
    rpc_server_call_set_user(call, s);
    if (delay > 0) {
        s->not_before_ms = wire_deadline_ms(delay);
        struct sub_wake *w = calloc(1, sizeof(*w));
        if (w) {
            w->item.due_ms = s->not_before_ms;
            w->item.fire = sub_wake_fire;
            w->item.drop = sub_wake_drop;
            w->call = call;
            rpc_server_call_ref(call);
            timer_schedule(&srv->timer, &w->item);
        } else {
            s->not_before_ms = 0; /* better early than never */
        }
    }
}

static void sub_send_locked(sub_state_t *s, const store_entry_t *e)
{
    ProtobufCBinaryData data = {e->len, e->data};
    if (!s->by_llsn) {
        Varlog__Snpb__SubscribeResponse r = VARLOG__SNPB__SUBSCRIBE_RESPONSE__INIT;
        r.glsn = e->glsn;
        r.llsn = e->llsn;
        r.payload = data;
        rpc_server_call_send(s->call, &r.base);
        s->cursor = e->glsn + 1;
    } else {
        /* A real storage node scans SubscribeTo by LLSN and sets only the LLSN (and the data):
         * topic, log stream and GLSN stay 0 on the wire (checked against a v0.30 node, issue
         * 11), so a client must not come to rely on them here either. */
        Varlog__Varlogpb__LogEntryMeta meta = VARLOG__VARLOGPB__LOG_ENTRY_META__INIT;
        meta.llsn = e->llsn;
        Varlog__Varlogpb__LogEntry le = VARLOG__VARLOGPB__LOG_ENTRY__INIT;
        le.meta = &meta;
        le.data = data;
        Varlog__Snpb__SubscribeToResponse r = VARLOG__SNPB__SUBSCRIBE_TO_RESPONSE__INIT;
        r.log_entry = &le;
        rpc_server_call_send(s->call, &r.base);
        s->cursor = e->llsn + 1;
    }
    s->sent++;
}

/* The next entry of the range at or after the cursor, or NULL. */
static const store_entry_t *sub_next_locked(const sub_state_t *s, const store_ls_t *ls)
{
    size_t i =
        s->by_llsn ? store_find_llsn_locked(ls, s->cursor) : store_find_glsn_locked(ls, s->cursor);
    if (i >= ls->count)
        return NULL;
    const store_entry_t *e = &ls->entries[i];
    return s->by_llsn ? (e->llsn < s->end ? e : NULL) : (e->glsn < s->scan_end ? e : NULL);
}

/* A GLSN stream scans as a real node does (Varlog v0.30, logstream/subscribe.go): the range
 * ends at once when it lies below the replica's first entry, or is committed and lies past
 * its last; otherwise each scan, once the range is committed, stops at the replica's last
 * entry, and the stream ends when a scan's last entry is the scan's end - 1 (see sub_writable).
 * A client can see the consequence, so the server keeps it: a replica holding entries past the
 * range but not its end - 1, or whose entries in range were all sent before the range was
 * committed, keeps the stream open until the client cancels it (wire protocol 6.3). Called
 * before a call scans; returns whether the stream ends without a scan. */
static bool sub_glsn_scan_begin_locked(const store_topic_t *t, const store_ls_t *ls, sub_state_t *s)
{
    if (!s->scan_fresh)
        return false;
    bool empty = ls->head == ls->count;
    uint64_t first = empty ? 0 : ls->entries[ls->head].glsn;
    uint64_t last = empty ? 0 : ls->entries[ls->count - 1].glsn;
    uint64_t committed = t->next_glsn - 1;
    if (s->scan_end == 0) { /* the first scan: the checks a node makes when asked */
        s->scan_end = s->end;
        if (!empty && (s->end <= first || (s->begin > last && s->end <= committed + 1)))
            return true;
    }
    s->scan_fresh = false;
    s->scan_last = 0;
    if (last < s->scan_end && s->scan_end <= committed + 1)
        s->scan_end = last + 1;
    return false;
}

static void sub_writable(rpc_server_call_t *call, void *arg)
{
    (void)arg;
    sub_state_t *s = rpc_server_call_user(call);
    if (!s || (s->not_before_ms && wire_now_ms() < s->not_before_ms))
        return;
    store_t *st = &s->srv->store;
    grpc_status_code end_code = GRPC_STATUS_OK;
    const char *end_msg = NULL;
    bool end = false;
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = store_topic_locked(st, s->topic_id);
    store_ls_t *ls = store_ls_locked(st, s->topic_id, s->ls_id);
    size_t n = 0, bytes = 0;
    const store_entry_t *e = NULL;
    bool trimmed = store_sub_trimmed_locked(ls, s);
    if (!trimmed && !s->by_llsn && sub_glsn_scan_begin_locked(t, ls, s))
        end = true;
    for (; !trimmed && !end;) {
        if (s->drop_after >= 0 && s->sent >= (uint64_t)s->drop_after) {
            end = true;
            end_code = GRPC_STATUS_UNAVAILABLE;
            end_msg = DROP_MESSAGE;
            break;
        }
        e = sub_next_locked(s, ls);
        if (!e || n >= SUB_BATCH_MSGS || bytes >= SUB_BATCH_BYTES)
            break;
        sub_send_locked(s, e);
        s->scan_last = e->glsn;
        n++;
        bytes += e->len;
    }
    if (!end && !e && !trimmed) {
        /* Nothing more in range now: the scan is over. Ended when the end was reached
         * (LLSNs are dense) or, by GLSN, when the scan's last entry was its end - 1 (0 == 0
         * too: an empty replica's scan of a committed range ends at 1). */
        end = s->by_llsn ? s->cursor >= s->end : s->scan_last == s->scan_end - 1;
        s->scan_fresh = true;
        if (!end && n == 0)
            store_wait_locked(st, t, s);
    }
    pthread_mutex_unlock(&st->mu);
    /* Entries it was still to be sent were trimmed (it fell behind retention or a trim):
     * skipping them would leave a gap a topic-wide reader waits on forever. */
    if (trimmed)
        finish_trimmed(call);
    else if (end)
        rpc_server_call_finish(call, end_code, end_msg, NULL, 0);
}

static void sub_done(rpc_server_call_t *call, bool cancelled, void *arg)
{
    (void)cancelled;
    (void)arg;
    sub_state_t *s = rpc_server_call_user(call);
    if (!s)
        return;
    rpc_server_call_set_user(call, NULL);
    store_t *st = &s->srv->store;
    pthread_mutex_lock(&st->mu);
    store_unwait_locked(st, s);
    if (s->sprev)
        s->sprev->snext = s->snext;
    else
        st->subs = s->snext;
    if (s->snext)
        s->snext->sprev = s->sprev;
    st->n_subs--;
    pthread_mutex_unlock(&st->mu);
    free(s);
}

void server_stats(struct varlog_server *srv, server_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    for (sub_state_t *s = st->subs; s; s = s->snext) {
        out->subscribers++;
        if (s->waiting)
            out->waiting++;
        out->queued_sends += rpc_server_call_pending_sends(s->call);
    }
    pthread_mutex_unlock(&st->mu);
}

/* ---- TrimDeprecated, LogStreamReplicaMetadata ------------------------------------------ */

static void trim(struct varlog_server *srv, rpc_server_call_t *call, const ProtobufCMessage *msg)
{
    const Varlog__Snpb__TrimDeprecatedRequest *r = (const Varlog__Snpb__TrimDeprecatedRequest *)msg;
    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = store_topic_locked(st, r->topic_id);
    if (t)
        store_trim_locked(st, t, r->glsn);
    pthread_mutex_unlock(&st->mu);
    /* Per-replica refusals are ignored: the RPC always answers Empty. */
    Google__Protobuf__Empty empty = GOOGLE__PROTOBUF__EMPTY__INIT;
    rpc_server_call_send(call, &empty.base);
    rpc_server_call_finish(call, GRPC_STATUS_OK, NULL, NULL, 0);
}

/* A Go zero time.Time, which Go servers send for timestamps they leave unset. */
#define GO_ZERO_TIME_SECONDS (-62135596800LL)

static void replica_md(struct varlog_server *srv, rpc_server_call_t *call,
                       const ProtobufCMessage *msg)
{
    const Varlog__Snpb__LogStreamReplicaMetadataRequest *r =
        (const Varlog__Snpb__LogStreamReplicaMetadataRequest *)msg;
    char text[96];
    if (r->topic_id <= 0 || r->log_stream_id <= 0) {
        if (r->topic_id <= 0)
            snprintf(text, sizeof(text), "invalid topic %" PRId32, r->topic_id);
        else
            snprintf(text, sizeof(text), "invalid log stream %" PRId32, r->log_stream_id);
        rpc_server_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, text, NULL, 0);
        return;
    }
    Varlog__Varlogpb__StorageNode sn = VARLOG__VARLOGPB__STORAGE_NODE__INIT;
    sn.storage_node_id = 1;
    Varlog__Varlogpb__TopicLogStream tls = VARLOG__VARLOGPB__TOPIC_LOG_STREAM__INIT;
    tls.topic_id = r->topic_id;
    tls.log_stream_id = r->log_stream_id;
    Varlog__Varlogpb__LogStreamReplica rep = VARLOG__VARLOGPB__LOG_STREAM_REPLICA__INIT;
    rep.storage_node = &sn;
    rep.topic_log_stream = &tls;
    Varlog__Varlogpb__LogSequenceNumber lwm = VARLOG__VARLOGPB__LOG_SEQUENCE_NUMBER__INIT;
    Varlog__Varlogpb__LogSequenceNumber hwm = VARLOG__VARLOGPB__LOG_SEQUENCE_NUMBER__INIT;
    Google__Protobuf__Timestamp created = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
    Google__Protobuf__Timestamp updated = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
    updated.seconds = GO_ZERO_TIME_SECONDS;
    char path[] = "/data";
    Varlog__Snpb__LogStreamReplicaMetadataDescriptor d =
        VARLOG__SNPB__LOG_STREAM_REPLICA_METADATA_DESCRIPTOR__INIT;
    d.log_stream_replica = &rep;
    d.local_low_watermark = &lwm;
    d.local_high_watermark = &hwm;
    d.created_time = &created;
    d.updated_time = &updated;
    d.path = path;

    store_t *st = &srv->store;
    pthread_mutex_lock(&st->mu);
    store_topic_t *t = store_topic_locked(st, r->topic_id);
    store_ls_t *ls = store_ls_locked(st, r->topic_id, r->log_stream_id);
    if (ls) {
        d.status = ls->sealed ? VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED
                              : VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING;
        d.version = st->version;
        d.global_high_watermark = t->next_glsn - 1;
        if (ls->head < ls->count) {
            lwm.llsn = ls->entries[ls->head].llsn;
            lwm.glsn = ls->entries[ls->head].glsn;
            hwm.llsn = ls->entries[ls->count - 1].llsn;
            hwm.glsn = ls->entries[ls->count - 1].glsn;
        }
        d.storage_size_bytes = ls->bytes;
        created.seconds = ls->created_unix;
    }
    pthread_mutex_unlock(&st->mu);
    if (!ls) {
        rpc_server_call_finish(call, GRPC_STATUS_NOT_FOUND, "no such log stream", NULL, 0);
        return;
    }
    Varlog__Snpb__LogStreamReplicaMetadataResponse resp =
        VARLOG__SNPB__LOG_STREAM_REPLICA_METADATA_RESPONSE__INIT;
    resp.log_stream_replica = &d;
    rpc_server_call_send(call, &resp.base);
    rpc_server_call_finish(call, GRPC_STATUS_OK, NULL, NULL, 0);
}

static void trim_start(rpc_server_call_t *call, const ProtobufCMessage *req, void *arg)
{
    struct method_ctx *ctx = arg;
    server_unary_dispatch(ctx->srv, ctx->index, call, req, trim);
}

static void replica_md_start(rpc_server_call_t *call, const ProtobufCMessage *req, void *arg)
{
    struct method_ctx *ctx = arg;
    server_unary_dispatch(ctx->srv, ctx->index, call, req, replica_md);
}

void log_io_methods(struct varlog_server *srv, rpc_method_t *append, rpc_method_t *subscribe,
                    rpc_method_t *subscribe_to, rpc_method_t *trim_m, rpc_method_t *replica)
{
    *append = (rpc_method_t){server_method_paths[M_APPEND],
                             RPC_METHOD_BIDI,
                             &rpc_raw_request_descriptor,
                             append_start,
                             append_message,
                             NULL,
                             append_writable,
                             append_done,
                             &srv->ctx[M_APPEND]};
    *subscribe = (rpc_method_t){server_method_paths[M_SUBSCRIBE],
                                RPC_METHOD_SERVER_STREAM,
                                &varlog__snpb__subscribe_request__descriptor,
                                sub_start,
                                NULL,
                                NULL,
                                sub_writable,
                                sub_done,
                                &srv->ctx[M_SUBSCRIBE]};
    *subscribe_to = (rpc_method_t){server_method_paths[M_SUBSCRIBE_TO],
                                   RPC_METHOD_SERVER_STREAM,
                                   &varlog__snpb__subscribe_to_request__descriptor,
                                   sub_start,
                                   NULL,
                                   NULL,
                                   sub_writable,
                                   sub_done,
                                   &srv->ctx[M_SUBSCRIBE_TO]};
    *trim_m = (rpc_method_t){server_method_paths[M_TRIM],
                             RPC_METHOD_UNARY,
                             &varlog__snpb__trim_deprecated_request__descriptor,
                             trim_start,
                             NULL,
                             NULL,
                             NULL,
                             NULL,
                             &srv->ctx[M_TRIM]};
    *replica = (rpc_method_t){server_method_paths[M_REPLICA_MD],
                              RPC_METHOD_UNARY,
                              &varlog__snpb__log_stream_replica_metadata_request__descriptor,
                              replica_md_start,
                              NULL,
                              NULL,
                              NULL,
                              NULL,
                              &srv->ctx[M_REPLICA_MD]};
}
