/* varlog_peek and varlog_trim: one unary call to each of a log stream's replicas, or to each
 * storage node holding a replica of a topic, combined as Varlog's PeekLogStream and Log.Trim
 * do.
 *
 * Concurrency: the calls of one operation run at once, as Go runs them, on at most
 * PT_PARALLEL_MAX threads: the caller's thread and short-lived helpers ("varlog-fanout"), each
 * taking the next target until none is left. All share the operation's absolute deadline, so
 * a replica that does not answer costs the deadline once, not once per replica. With one
 * target (a single replica) no thread is started. A helper that cannot be started only means
 * fewer of them: the caller's thread takes what is left. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "errtext.h"
#include "google/protobuf/empty.pb-c.h"
#include "snpb/log_io.pb-c.h"
#include "varlog/subscribe.h"
#include "wire.h"

#define SN_PATH_REPLICA_MD "/varlog.snpb.LogIO/LogStreamReplicaMetadata"
#define SN_PATH_TRIM "/varlog.snpb.LogIO/TrimDeprecated"

/* Replication factors are small (3 is usual), but a topic may span many storage nodes: trim
 * must not start a thread per node. */
#define PT_PARALLEL_MAX 8

/* What Go's Trim ignores from a node (verrors.ErrUndecidable). */
#define PT_UNDECIDABLE "logstream: undecidable"

/* ---- the fan-out ---------------------------------------------------------------------------- */

typedef struct pt_call {
    const char *target;
    const ProtobufCMessage *req; /* NULL: the fan-out's */
    varlog_err_t err;
    rpc_status_t st;
    ProtobufCMessage *resp; /* on OK */
} pt_call_t;

typedef struct pt_fanout {
    varlog_client_t *c;
    const char *method;
    const ProtobufCMessage *req; /* the same request to every target */
    const ProtobufCMessageDescriptor *resp_desc;
    int64_t deadline_ms; /* wire_now_ms clock */
    pt_call_t *calls;
    size_t n;
    atomic_size_t next;
} pt_fanout_t;

static void *fanout_worker(void *arg)
{
    pt_fanout_t *f = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&f->next, 1);
        if (i >= f->n)
            break;
        pt_call_t *call = &f->calls[i];
        int64_t left = client_remaining_ms(f->deadline_ms);
        if (client_closing(f->c)) {
            call->err = VARLOG_ERR_CLOSED;
        } else if (left == 0) {
            call->err = VARLOG_ERR_TIMED_OUT;
        } else {
            call->err =
                rpc_unary(f->c->rpc, call->target, f->method, call->req ? call->req : f->req,
                          f->resp_desc, left, &call->resp, &call->st);
            /* Every call is given what is left of the operation's deadline, so its expiry is
             * the caller's timeout, not the node's failure. */
            if (call->err == VARLOG_ERR_RPC_DEADLINE_EXCEEDED)
                call->err = VARLOG_ERR_TIMED_OUT;
        }
    }
    return NULL;
}

/* Runs every call of f and returns when all ended (each is bounded by f->deadline_ms). */
static void fanout_run(pt_fanout_t *f)
{
    atomic_init(&f->next, 0);
    pthread_t th[PT_PARALLEL_MAX - 1];
    size_t want = f->n < PT_PARALLEL_MAX ? f->n : PT_PARALLEL_MAX;
    size_t started = 0;
    for (size_t i = 1; i < want; i++) {
        if (pthread_create(&th[started], NULL, fanout_worker, f) != 0)
            break;
        pthread_setname_np(th[started], "varlog-fanout");
        started++;
    }
    fanout_worker(f);
    for (size_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
}

static pt_call_t *calls_new(size_t n)
{
    pt_call_t *calls = calloc(n, sizeof(*calls));
    if (calls)
        for (size_t i = 0; i < n; i++)
            rpc_status_init(&calls[i].st);
    return calls;
}

static void calls_free(pt_call_t *calls, size_t n)
{
    if (!calls)
        return;
    for (size_t i = 0; i < n; i++) {
        if (calls[i].resp)
            protobuf_c_message_free_unpacked(calls[i].resp, NULL);
        rpc_status_clear(&calls[i].st);
    }
    free(calls);
}

/* Appends to buf (a running text of size cap at *len) without overflowing it. */
static void text_add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void text_add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len >= cap - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (w > 0)
        *len = *len + (size_t)w < cap - 1 ? *len + (size_t)w : cap - 1;
}

/* "<address>: <ERR> (<status message>)" for one failed call; why overrides the status text. */
static void text_add_call(char *buf, size_t cap, size_t *len, const pt_call_t *call,
                          const char *why)
{
    const char *msg = why ? why : call->st.message && call->st.message[0] ? call->st.message : "";
    text_add(buf, cap, len, "%s%s: %s%s%s%s", *len ? "; " : "", call->target,
             varlog_err_name(call->err), msg[0] ? " (" : "", msg, msg[0] ? ")" : "");
}

/* The error of an operation none of whose calls gave a usable answer: the client closing or
 * the caller's deadline explain every failure that followed them; otherwise the first
 * target's error, as Go reports it. */
static varlog_err_t fanout_error(varlog_client_t *c, const pt_call_t *calls, size_t n,
                                 int64_t deadline_ms)
{
    bool timed_out = false;
    for (size_t i = 0; i < n; i++) {
        if (calls[i].err == VARLOG_ERR_CLOSED)
            return VARLOG_ERR_CLOSED;
        timed_out |= calls[i].err == VARLOG_ERR_TIMED_OUT;
    }
    if (client_closing(c))
        return VARLOG_ERR_CLOSED;
    if (timed_out && client_remaining_ms(deadline_ms) == 0)
        return VARLOG_ERR_TIMED_OUT;
    return calls[0].err;
}

/* ---- common checks ------------------------------------------------------------------------ */

static int64_t op_deadline(const varlog_client_t *c, int64_t timeout_ms)
{
    return wire_deadline_ms(timeout_ms < 0 ? c->conf->metadata_call_timeout_ms : timeout_ms);
}

/* ---- peek ------------------------------------------------------------------------------------ */

static const char *ls_status_name(Varlog__Varlogpb__LogStreamStatus s)
{
    switch (s) {
    case VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING:
        return "RUNNING";
    case VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALING:
        return "SEALING";
    case VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED:
        return "SEALED";
    case VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_DELETED:
        return "DELETED";
    case VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_UNSEALING:
        return "UNSEALING";
    default:
        return "unknown";
    }
}

/* Folds the answers into first/last as PeekLogStream does; returns whether any replica
 * answered usefully. A call whose answer is unusable gets its error (DECODE, STATE) here. */
static bool peek_combine(pt_call_t *calls, size_t n, varlog_entry_meta_t *first,
                         varlog_entry_meta_t *last, bool *complete, char *why, size_t why_cap)
{
    bool useful = false;
    size_t len = 0;
    why[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        pt_call_t *call = &calls[i];
        if (call->err != VARLOG_OK) {
            text_add_call(why, why_cap, &len, call, NULL);
            continue;
        }
        const Varlog__Snpb__LogStreamReplicaMetadataResponse *r =
            (const Varlog__Snpb__LogStreamReplicaMetadataResponse *)call->resp;
        const Varlog__Snpb__LogStreamReplicaMetadataDescriptor *d = r->log_stream_replica;
        if (!d) {
            call->err = VARLOG_ERR_DECODE;
            text_add_call(why, why_cap, &len, call, "answer without a replica descriptor");
            continue;
        }
        char state[48];
        switch (d->status) {
        case VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING:
        case VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED:
            *complete = true;
            /* fall through */
        case VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALING:
            useful = true;
            break;
        default:
            call->err = VARLOG_ERR_STATE;
            snprintf(state, sizeof(state), "replica status %s (%d)", ls_status_name(d->status),
                     (int)d->status);
            text_add_call(why, why_cap, &len, call, state);
            continue;
        }
        const Varlog__Varlogpb__LogSequenceNumber *lo = d->local_low_watermark;
        const Varlog__Varlogpb__LogSequenceNumber *hi = d->local_high_watermark;
        if (lo && lo->llsn > first->llsn) {
            first->llsn = lo->llsn;
            first->glsn = lo->glsn;
        }
        if (hi && hi->llsn > last->llsn) {
            last->llsn = hi->llsn;
            last->glsn = hi->glsn;
        }
    }
    return useful;
}

varlog_err_t varlog_peek(varlog_client_t *c, int32_t topic_id, int32_t log_stream_id,
                         int64_t timeout_ms, varlog_entry_meta_t *first, varlog_entry_meta_t *last,
                         bool *complete)
{
    if (!c)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "peek: client is NULL");
    if (!first || !last)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "peek: %s is NULL", !first ? "first" : "last");
    if (topic_id < 1)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "peek: topic id %d (ids start at 1)", topic_id);
    if (log_stream_id < 1)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "peek: log stream id %d (ids start at 1)",
                           log_stream_id);
    if (timeout_ms == 0 || timeout_ms < -1)
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "peek: timeout_ms %lld (give a positive timeout, or -1 for "
                           "metadata.call.timeout.ms)",
                           (long long)timeout_ms);
    varlog_err_t err = client_enter(c);
    if (err != VARLOG_OK)
        return err;
    int64_t deadline = op_deadline(c, timeout_ms);
    errtext_guard_begin();
    err = client_check_target(c, "peek", topic_id, log_stream_id, deadline);
    if (err != VARLOG_OK)
        goto out;

    md_view_t *v = md_current(c);
    const md_log_stream_t *l = md_view_log_stream(v, topic_id, log_stream_id);
    if (!l) {
        /* The check saw it; a newer view dropped it since. */
        err = errtext_set(VARLOG_ERR_UNKNOWN_LOG_STREAM,
                          "peek: topic %d has no log stream %d (applied index %llu)", topic_id,
                          log_stream_id, (unsigned long long)v->applied_index);
        md_view_unref(v);
        goto out;
    }
    if (l->n_replicas == 0) {
        err = errtext_set(VARLOG_ERR_RPC_UNAVAILABLE,
                          "peek: log stream %d of topic %d: no replica has a known address",
                          log_stream_id, topic_id);
        md_view_unref(v);
        goto out;
    }
    pt_call_t *calls = calls_new(l->n_replicas);
    if (!calls) {
        err = errtext_set(VARLOG_ERR_NOMEM, "peek: out of memory");
        md_view_unref(v);
        goto out;
    }
    for (size_t i = 0; i < l->n_replicas; i++)
        calls[i].target = l->replicas[i];
    Varlog__Snpb__LogStreamReplicaMetadataRequest req =
        VARLOG__SNPB__LOG_STREAM_REPLICA_METADATA_REQUEST__INIT;
    req.topic_id = topic_id;
    req.log_stream_id = log_stream_id;
    pt_fanout_t f = {.c = c,
                     .method = SN_PATH_REPLICA_MD,
                     .req = &req.base,
                     .resp_desc = &varlog__snpb__log_stream_replica_metadata_response__descriptor,
                     .deadline_ms = deadline,
                     .calls = calls,
                     .n = l->n_replicas};
    fanout_run(&f);

    varlog_entry_meta_t lo = {.topic_id = topic_id, .log_stream_id = log_stream_id};
    varlog_entry_meta_t hi = lo;
    bool done = false;
    char why[512];
    if (peek_combine(calls, f.n, &lo, &hi, &done, why, sizeof(why))) {
        *first = lo;
        *last = hi;
        if (complete)
            *complete = done;
    } else {
        err = fanout_error(c, calls, f.n, deadline);
        errtext_set(err, "peek: log stream %d of topic %d: no replica answered usefully: %s",
                    log_stream_id, topic_id, why);
    }
    calls_free(calls, f.n);
    md_view_unref(v);
out:
    errtext_guard_end(err == VARLOG_OK);
    client_leave(c);
    return err;
}

void pt_tails(varlog_client_t *c, pt_tail_t *tails, size_t n, int64_t deadline_ms)
{
    for (size_t i = 0; i < n; i++)
        tails[i].ok = false;
    md_view_t *v = md_current(c);
    size_t n_calls = 0;
    for (size_t i = 0; v && i < n; i++) {
        const md_log_stream_t *l = md_view_log_stream(v, tails[i].topic_id, tails[i].log_stream_id);
        n_calls += l ? l->n_replicas : 0;
    }
    Varlog__Snpb__LogStreamReplicaMetadataRequest *reqs = calloc(n ? n : 1, sizeof(*reqs));
    size_t *first = calloc(n + 1, sizeof(*first)); /* tails[i]'s calls: [first[i], first[i+1]) */
    pt_call_t *calls = n_calls ? calls_new(n_calls) : NULL;
    if (!reqs || !first || (n_calls && !calls)) {
        free(reqs);
        free(first);
        calls_free(calls, n_calls);
        md_view_unref(v);
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        first[i] = k;
        const md_log_stream_t *l =
            v ? md_view_log_stream(v, tails[i].topic_id, tails[i].log_stream_id) : NULL;
        varlog__snpb__log_stream_replica_metadata_request__init(&reqs[i]);
        reqs[i].topic_id = tails[i].topic_id;
        reqs[i].log_stream_id = tails[i].log_stream_id;
        for (size_t r = 0; l && r < l->n_replicas; r++) {
            calls[k].target = l->replicas[r];
            calls[k++].req = &reqs[i].base;
        }
    }
    first[n] = k;
    /* One fan-out for every log stream's replicas, sharing the deadline: a node that does
     * not answer costs it once. */
    pt_fanout_t f = {.c = c,
                     .method = SN_PATH_REPLICA_MD,
                     .resp_desc = &varlog__snpb__log_stream_replica_metadata_response__descriptor,
                     .deadline_ms = deadline_ms,
                     .calls = calls,
                     .n = n_calls};
    if (n_calls)
        fanout_run(&f);
    for (size_t i = 0; i < n; i++) {
        size_t m = first[i + 1] - first[i];
        if (m == 0)
            continue;
        varlog_entry_meta_t lo = {0}, hi = {0};
        bool complete = false;
        char why[256];
        if (peek_combine(calls + first[i], m, &lo, &hi, &complete, why, sizeof(why))) {
            tails[i].ok = true;
            tails[i].llsn = hi.llsn;
            tails[i].glsn = hi.glsn;
        }
    }
    calls_free(calls, n_calls);
    free(first);
    free(reqs);
    md_view_unref(v);
}

/* ---- trim ------------------------------------------------------------------------------------ */

/* The distinct storage nodes holding a replica of topic t's log streams, into *out (pointing
 * into v) and their count into *n. Returns false when memory ran out. */
static bool topic_nodes(const md_view_t *v, const md_topic_t *t, const char ***out, size_t *n_out)
{
    size_t cap = 0;
    for (size_t i = 0; i < t->n_log_streams; i++) {
        const md_log_stream_t *l = md_view_log_stream(v, t->topic_id, t->log_stream_ids[i]);
        cap += l ? l->n_replicas : 0;
    }
    *out = NULL;
    *n_out = 0;
    if (cap == 0)
        return true;
    const char **nodes = malloc(cap * sizeof(*nodes));
    if (!nodes)
        return false;
    size_t n = 0;
    for (size_t i = 0; i < t->n_log_streams; i++) {
        const md_log_stream_t *l = md_view_log_stream(v, t->topic_id, t->log_stream_ids[i]);
        for (size_t r = 0; l && r < l->n_replicas; r++) {
            bool seen = false;
            for (size_t k = 0; k < n && !seen; k++)
                seen = strcmp(nodes[k], l->replicas[r]) == 0;
            if (!seen)
                nodes[n++] = l->replicas[r];
        }
    }
    *out = nodes;
    *n_out = n;
    return true;
}

varlog_err_t varlog_trim(varlog_client_t *c, int32_t topic_id, uint64_t until_glsn,
                         int64_t timeout_ms)
{
    if (!c)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "trim: client is NULL");
    if (topic_id < 1)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "trim: topic id %d (ids start at 1)", topic_id);
    if (until_glsn == 0 || until_glsn == VARLOG_GLSN_MAX)
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "trim: until_glsn %llu (give the last GLSN to delete, from 1 to "
                           "VARLOG_GLSN_MAX - 1)",
                           (unsigned long long)until_glsn);
    if (timeout_ms == 0 || timeout_ms < -1)
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "trim: timeout_ms %lld (give a positive timeout, or -1 for "
                           "metadata.call.timeout.ms)",
                           (long long)timeout_ms);
    varlog_err_t err = client_enter(c);
    if (err != VARLOG_OK)
        return err;
    int64_t deadline = op_deadline(c, timeout_ms);
    errtext_guard_begin();
    err = client_check_target(c, "trim", topic_id, 0, deadline);
    if (err != VARLOG_OK)
        goto out;

    md_view_t *v = md_current(c);
    const md_topic_t *t = md_view_topic(v, topic_id);
    const char **nodes = NULL;
    size_t n = 0;
    bool nodes_ok = !t || topic_nodes(v, t, &nodes, &n);
    if (!t) {
        err = errtext_set(VARLOG_ERR_UNKNOWN_TOPIC,
                          "trim: topic %d is not in the metadata (applied index %llu)", topic_id,
                          (unsigned long long)v->applied_index);
    } else if (!nodes_ok) {
        err = errtext_set(VARLOG_ERR_NOMEM, "trim: out of memory");
    } else if (n == 0) {
        err = errtext_set(VARLOG_ERR_NO_LOG_STREAM,
                          "trim: no storage node holds a replica of topic %d (%zu log streams, "
                          "applied index %llu)",
                          topic_id, t->n_log_streams, (unsigned long long)v->applied_index);
    }
    pt_call_t *calls = err == VARLOG_OK ? calls_new(n) : NULL;
    if (err == VARLOG_OK && !calls)
        err = errtext_set(VARLOG_ERR_NOMEM, "trim: out of memory");
    if (err != VARLOG_OK) {
        free(nodes);
        md_view_unref(v);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        calls[i].target = nodes[i];
    free(nodes);
    Varlog__Snpb__TrimDeprecatedRequest req = VARLOG__SNPB__TRIM_DEPRECATED_REQUEST__INIT;
    req.topic_id = topic_id;
    req.glsn = until_glsn;
    pt_fanout_t f = {.c = c,
                     .method = SN_PATH_TRIM,
                     .req = &req.base,
                     .resp_desc = &google__protobuf__empty__descriptor,
                     .deadline_ms = deadline,
                     .calls = calls,
                     .n = n};
    fanout_run(&f);

    bool accepted = false;
    char why[512];
    size_t len = 0;
    why[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (calls[i].err == VARLOG_OK ||
            (calls[i].st.message && !strcmp(rpc_status_reason(&calls[i].st), PT_UNDECIDABLE)))
            accepted = true;
        else
            text_add_call(why, sizeof(why), &len, &calls[i], NULL);
    }
    if (!accepted) {
        err = fanout_error(c, calls, n, deadline);
        errtext_set(err, "trim: topic %d until GLSN %llu: no storage node accepted it: %s",
                    topic_id, (unsigned long long)until_glsn, why);
    }
    calls_free(calls, n);
    md_view_unref(v);
out:
    errtext_guard_end(err == VARLOG_OK);
    client_leave(c);
    return err;
}
