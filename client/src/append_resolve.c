/* append_resolve: the fate of an ambiguous append, read back from a replica (contract in
 * append_resolve.h).
 *
 * One pass: LogStreamReplicaMetadata on every replica at once (as varlog_peek), the window
 * of the chosen replica streamed through SubscribeTo into one matcher per batch, then a
 * GLSN for each batch found. Matching is Knuth-Morris-Pratt over records instead of bytes:
 * a batch of n records is a pattern of n payloads, its prefix function is computed once by
 * comparing the batch's own payloads, and each entry of the window then costs O(1)
 * comparisons per batch amortised, with nothing of the window kept. */
#include "append_resolve.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "errtext.h"
#include "log_io_codec.h"
#include "snpb/log_io.pb-c.h"
#include "wire.h"

#define RS_PATH_REPLICA_MD "/varlog.snpb.LogIO/LogStreamReplicaMetadata"
#define RS_PATH_SUBSCRIBE "/varlog.snpb.LogIO/Subscribe"
#define RS_PATH_SUBSCRIBE_TO "/varlog.snpb.LogIO/SubscribeTo"

/* Replication factors are small; more replicas than this are asked by fewer threads. */
#define RS_PARALLEL_MAX 8
/* What the window's stream buffers before HTTP/2 flow control holds the node back: the
 * matcher keeps up with any node, so a small window costs nothing. */
#define RS_RECV_WINDOW 64
#define RS_RECV_WINDOW_BYTES (1u << 20)
/* Subscribe probes to find one batch's GLSN: each at least halves the GLSNs it may have, so
 * 64 settle any range. */
#define RS_PROBES_MAX 64

typedef struct {
    const uint8_t *p;
    size_t len;
} rs_rec_t;

/* One batch's matcher. */
typedef struct {
    rs_rec_t *rec;  /* its payloads */
    uint32_t *fail; /* prefix function: fail[i] = longest proper border of rec[0..i] */
    uint32_t n, state;
    uint32_t matches;
    uint64_t llsn; /* first record's LLSN of the first match */
} rs_match_t;

typedef struct {
    const char *target;
    varlog_err_t err;
    rpc_status_t st;
    ProtobufCMessage *resp;
    int status; /* LogStreamStatus */
    uint64_t lo_llsn, lo_glsn, hi_llsn, hi_glsn;
    bool may_prove; /* the replica the batches were sent to (or any, when that is unknown) */
} rs_replica_t;

typedef struct {
    varlog_client_t *c;
    const ProtobufCMessage *req;
    int64_t deadline_ms;
    rs_replica_t *r;
    size_t n;
    atomic_size_t next;
} rs_fanout_t;

static bool rec_eq(const rs_rec_t *a, const uint8_t *p, size_t len)
{
    return a->len == len && (len == 0 || memcmp(a->p, p, len) == 0);
}

static varlog_err_t timed(varlog_client_t *c, varlog_err_t err, int64_t deadline_ms)
{
    if (client_closing(c))
        return VARLOG_ERR_CLOSED;
    /* Every call gets what is left of the pass: its expiry is the pass's deadline. */
    if (err == VARLOG_ERR_RPC_DEADLINE_EXCEEDED ||
        (err != VARLOG_OK && client_remaining_ms(deadline_ms) == 0))
        return VARLOG_ERR_TIMED_OUT;
    return err;
}

/* ---- the metadata fan-out ------------------------------------------------------------------ */

static void *md_worker(void *arg)
{
    rs_fanout_t *f = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&f->next, 1);
        if (i >= f->n)
            break;
        rs_replica_t *r = &f->r[i];
        int64_t left = client_remaining_ms(f->deadline_ms);
        if (client_closing(f->c))
            r->err = VARLOG_ERR_CLOSED;
        else if (left == 0)
            r->err = VARLOG_ERR_TIMED_OUT;
        else
            r->err =
                timed(f->c,
                      rpc_unary(f->c->rpc, r->target, RS_PATH_REPLICA_MD, f->req,
                                &varlog__snpb__log_stream_replica_metadata_response__descriptor,
                                left, &r->resp, &r->st),
                      f->deadline_ms);
    }
    return NULL;
}

/* Asks every replica at once: one dead node costs the deadline once, not once each. */
static void md_fanout(rs_fanout_t *f)
{
    atomic_init(&f->next, 0);
    pthread_t th[RS_PARALLEL_MAX - 1];
    size_t want = f->n < RS_PARALLEL_MAX ? f->n : RS_PARALLEL_MAX, started = 0;
    for (size_t i = 1; i < want; i++) {
        if (pthread_create(&th[started], NULL, md_worker, f) != 0)
            break;
        pthread_setname_np(th[started], "varlog-fanout");
        started++;
    }
    md_worker(f);
    for (size_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
}

/* Reads an answer's status and watermarks; false (err set) when it has no descriptor. */
static bool replica_read(rs_replica_t *r)
{
    if (r->err != VARLOG_OK)
        return false;
    const Varlog__Snpb__LogStreamReplicaMetadataDescriptor *d =
        ((const Varlog__Snpb__LogStreamReplicaMetadataResponse *)r->resp)->log_stream_replica;
    if (!d) {
        r->err = VARLOG_ERR_DECODE;
        return false;
    }
    r->status = (int)d->status;
    if (d->local_low_watermark) {
        r->lo_llsn = d->local_low_watermark->llsn;
        r->lo_glsn = d->local_low_watermark->glsn;
    }
    if (d->local_high_watermark) {
        r->hi_llsn = d->local_high_watermark->llsn;
        r->hi_glsn = d->local_high_watermark->glsn;
    }
    return true;
}

/* Preference among answers: SEALED on the primary the batches were sent to (proves
 * absence), RUNNING or SEALED elsewhere, SEALING (may lag: finds only); -1 for a status no
 * read should rely on. Only the primary that was sent to proves: Varlog has no epoch, and
 * a request that primary reads after an unseal is stored like a new one, so a backup's seal
 * says nothing of bytes still on their way to it (docs/RELIABILITY.md). */
static int replica_rank(const rs_replica_t *r)
{
    switch (r->status) {
    case VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED:
        return r->may_prove ? 0 : 1;
    case VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_RUNNING:
        return 1;
    case VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALING:
        return 2;
    default:
        return -1;
    }
}

static bool replica_before(const rs_replica_t *a, const rs_replica_t *b)
{
    int ra = replica_rank(a), rb = replica_rank(b);
    return ra != rb ? ra < rb : a->hi_llsn > b->hi_llsn;
}

/* ---- matchers ------------------------------------------------------------------------------ */

static bool match_init(rs_match_t *m, const resolve_batch_t *b)
{
    memset(m, 0, sizeof(*m));
    if (b->n_records == 0 || !b->payloads)
        return false;
    m->n = b->n_records;
    m->rec = calloc(m->n, sizeof(*m->rec));
    m->fail = calloc(m->n, sizeof(*m->fail));
    if (!m->rec || !m->fail)
        return false;
    const uint8_t *p = b->payloads, *end = b->payloads + b->len;
    for (uint32_t i = 0; i < m->n; i++)
        if (!codec_next_payload(&p, end, &m->rec[i].p, &m->rec[i].len))
            return false;
    if (p != end)
        return false;
    for (uint32_t i = 1, k = 0; i < m->n; i++) {
        while (k > 0 && !rec_eq(&m->rec[k], m->rec[i].p, m->rec[i].len))
            k = m->fail[k - 1];
        if (rec_eq(&m->rec[k], m->rec[i].p, m->rec[i].len))
            k++;
        m->fail[i] = k;
    }
    return true;
}

static void match_free(rs_match_t *m)
{
    free(m->rec);
    free(m->fail);
}

/* Feeds the entry at llsn. Overlapping occurrences count: a batch of identical records in a
 * run longer than the batch sits at more than one place. */
static void match_feed(rs_match_t *m, uint64_t llsn, const uint8_t *p, size_t len)
{
    if (m->matches > 1)
        return; /* ambiguous already: nothing more to learn */
    while (m->state > 0 && !rec_eq(&m->rec[m->state], p, len))
        m->state = m->fail[m->state - 1];
    if (rec_eq(&m->rec[m->state], p, len))
        m->state++;
    if (m->state == m->n) {
        if (m->matches++ == 0)
            m->llsn = llsn - (m->n - 1);
        m->state = m->fail[m->n - 1];
    }
}

/* ---- the pass ------------------------------------------------------------------------------ */

typedef struct {
    varlog_client_t *c;
    resolve_req_t *req;
    rs_match_t *m;
    wire_scratch_t scratch;
    char err_why[160]; /* what the last failed read or probe said */
} rs_pass_t;

/* Reads LLSNs [from, to] of target into the matchers; *got counts the entries, which come
 * in order without gaps (anything else fails the read). */
static varlog_err_t read_window(rs_pass_t *ps, const char *target, uint64_t from, uint64_t to,
                                uint64_t *got)
{
    resolve_req_t *req = ps->req;
    Varlog__Snpb__SubscribeToRequest sr = VARLOG__SNPB__SUBSCRIBE_TO_REQUEST__INIT;
    sr.topic_id = req->topic_id;
    sr.log_stream_id = req->log_stream_id;
    sr.llsn_begin = from;
    sr.llsn_end = to + 1; /* exclusive: the stream ends with OK right after `to` */
    rpc_stream_opts_t o = {.kind = RPC_STREAM_SERVER,
                           .response = &varlog__snpb__subscribe_to_response__descriptor,
                           .recv_window = RS_RECV_WINDOW,
                           .recv_window_bytes = RS_RECV_WINDOW_BYTES,
                           .timeout_ms = -1,
                           .deadline_ms = req->deadline_ms};
    rpc_stream_t *s = NULL;
    varlog_err_t err = rpc_stream_open(ps->c->rpc, target, RS_PATH_SUBSCRIBE_TO, &o, &sr.base, &s);
    if (err != VARLOG_OK) {
        snprintf(ps->err_why, sizeof(ps->err_why), "%s: SubscribeTo not started: %s", target,
                 varlog_err_name(err));
        return err;
    }
    *got = 0;
    for (;;) {
        grpc_byte_buffer *bb = NULL;
        int64_t left = client_remaining_ms(req->deadline_ms);
        err = left == 0 ? VARLOG_ERR_TIMED_OUT : rpc_stream_recv_buffer(s, left, &bb);
        if (err == VARLOG_ERR_END) {
            err = VARLOG_OK;
            break;
        }
        if (err != VARLOG_OK) {
            const rpc_status_t *st = rpc_stream_status(s);
            snprintf(ps->err_why, sizeof(ps->err_why),
                     "%s: SubscribeTo of LLSNs %llu..%llu: %s%s%s", target,
                     (unsigned long long)from, (unsigned long long)to, varlog_err_name(err),
                     st && st->message && st->message[0] ? ": " : "",
                     st && st->message ? st->message : "");
            err = timed(ps->c, err, req->deadline_ms);
            break;
        }
        size_t len = 0;
        const uint8_t *p = wire_flatten(bb, &ps->scratch, &len);
        codec_entry_t e;
        char dwhy[96];
        err =
            p ? codec_read_subscribe_to_response(p, len, &e, dwhy, sizeof(dwhy)) : VARLOG_ERR_NOMEM;
        if (err == VARLOG_OK && e.meta.llsn != from + *got) {
            snprintf(dwhy, sizeof(dwhy), "LLSN %llu where %llu was due",
                     (unsigned long long)e.meta.llsn, (unsigned long long)(from + *got));
            err = VARLOG_ERR_DECODE;
        }
        if (err != VARLOG_OK) {
            grpc_byte_buffer_destroy(bb);
            snprintf(ps->err_why, sizeof(ps->err_why), "%s: SubscribeTo: %s", target,
                     err == VARLOG_ERR_NOMEM ? "out of memory" : dwhy);
            break;
        }
        for (size_t i = 0; i < req->n; i++)
            match_feed(&ps->m[i], e.meta.llsn, e.data, e.len);
        grpc_byte_buffer_destroy(bb);
        ++*got;
    }
    rpc_stream_destroy(s);
    return err;
}

/* One Subscribe probe from GLSN `from` (up to the high watermark, an entry of this log
 * stream, so the stream ends by itself): the first entry at or after it. */
static varlog_err_t probe(rs_pass_t *ps, const rs_replica_t *r, uint64_t from, uint64_t *glsn,
                          uint64_t *llsn)
{
    resolve_req_t *req = ps->req;
    Varlog__Snpb__SubscribeRequest sr = VARLOG__SNPB__SUBSCRIBE_REQUEST__INIT;
    sr.topic_id = req->topic_id;
    sr.log_stream_id = req->log_stream_id;
    sr.glsn_begin = from;
    sr.glsn_end = r->hi_glsn + 1;
    rpc_stream_opts_t o = {.kind = RPC_STREAM_SERVER,
                           .response = &varlog__snpb__subscribe_response__descriptor,
                           .recv_window = 1,
                           .timeout_ms = -1,
                           .deadline_ms = req->deadline_ms};
    rpc_stream_t *s = NULL;
    varlog_err_t err = rpc_stream_open(ps->c->rpc, r->target, RS_PATH_SUBSCRIBE, &o, &sr.base, &s);
    if (err != VARLOG_OK)
        return err;
    grpc_byte_buffer *bb = NULL;
    int64_t left = client_remaining_ms(req->deadline_ms);
    err = left == 0 ? VARLOG_ERR_TIMED_OUT : rpc_stream_recv_buffer(s, left, &bb);
    if (err == VARLOG_OK) {
        size_t len = 0;
        const uint8_t *p = wire_flatten(bb, &ps->scratch, &len);
        codec_entry_t e;
        char dwhy[96];
        err = p ? codec_read_subscribe_response(p, len, &e, dwhy, sizeof(dwhy)) : VARLOG_ERR_NOMEM;
        *glsn = e.meta.glsn;
        *llsn = e.meta.llsn;
        grpc_byte_buffer_destroy(bb);
    } else if (err == VARLOG_ERR_END) {
        err = VARLOG_ERR_DECODE; /* the high watermark's entry at least was due */
    }
    rpc_stream_destroy(s);
    return timed(ps->c, err, req->deadline_ms);
}

/* The GLSN of LLSN llsn on replica r. GLSNs grow with LLSNs by at least one, so the
 * watermarks bound it; a topic of one log stream (dense GLSNs) pins it without a call.
 * Otherwise bisection by Subscribe probes: each answer is an entry (g, l), and g - (l - llsn)
 * or g + (llsn - l) bounds it again. */
static varlog_err_t glsn_of(rs_pass_t *ps, const rs_replica_t *r, uint64_t llsn, uint64_t *out)
{
    if (llsn < r->lo_llsn || llsn > r->hi_llsn || r->lo_glsn == 0)
        return VARLOG_ERR_STATE;
    uint64_t lo = r->lo_glsn + (llsn - r->lo_llsn), hi = r->hi_glsn - (r->hi_llsn - llsn);
    for (int i = 0; i < RS_PROBES_MAX && lo < hi; i++) {
        uint64_t mid = lo + (hi - lo) / 2, g = 0, l = 0;
        varlog_err_t err = probe(ps, r, mid, &g, &l);
        if (err != VARLOG_OK)
            return err;
        if (g < mid)
            return VARLOG_ERR_DECODE;
        if (l == llsn) {
            *out = g;
            return VARLOG_OK;
        }
        if (l < llsn) {
            lo = g + (llsn - l) > lo ? g + (llsn - l) : lo;
        } else {
            /* The first entry at or after mid lies past llsn: llsn's GLSN is below mid. */
            uint64_t bound = g - (l - llsn) < mid - 1 ? g - (l - llsn) : mid - 1;
            hi = bound < hi ? bound : hi;
        }
    }
    if (lo != hi)
        return lo > hi ? VARLOG_ERR_DECODE : VARLOG_ERR_TIMED_OUT;
    *out = lo;
    return VARLOG_OK;
}

/* Appends to buf (size cap, running length *len) without overflowing it. */
static void text_add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void text_add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (!buf || cap == 0 || *len >= cap - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (w > 0)
        *len = *len + (size_t)w < cap - 1 ? *len + (size_t)w : cap - 1;
}

static const char *status_word(int status)
{
    switch (status) {
    case VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED:
        return "is sealed";
    case VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALING:
        return "is sealing";
    default:
        return "runs";
    }
}

/* What the window of replica r is: LLSNs [*from, *to] to read (from > to: none) and whether
 * reading all of it would prove absence; note says why not. */
static bool plan_window(const resolve_req_t *req, const rs_replica_t *r, uint64_t *from,
                        uint64_t *to, const char **note)
{
    uint64_t cap = req->window_max ? req->window_max : RESOLVE_WINDOW_MAX;
    uint64_t start = req->after_llsn + 1;
    bool covers = true;
    *note = NULL;
    *to = r->hi_llsn;
    if (r->hi_llsn == 0) {
        /* New or trimmed whole: whatever was stored may have been trimmed. */
        *from = 1;
        *to = 0;
        *note = "the replica holds no entry";
        return false;
    }
    if (req->after_llsn > r->hi_llsn) {
        *from = 1;
        *to = 0;
        *note = "the replica ends before the last LLSN known stored";
        return false;
    }
    if (r->lo_llsn > start) {
        start = r->lo_llsn;
        covers = false;
        *note = "LLSNs before the low watermark were trimmed";
    }
    if (start <= r->hi_llsn && r->hi_llsn - start >= cap) {
        start = r->hi_llsn - cap + 1;
        covers = false;
        *note = "window past its cap: only its end read";
    }
    *from = start;
    return covers;
}

/* The verdicts from the matchers, then the order rules (append_resolve.h). */
static void decide(rs_pass_t *ps, bool absence_proved)
{
    resolve_req_t *req = ps->req;
    for (size_t i = 0; i < req->n; i++) {
        const rs_match_t *m = &ps->m[i];
        req->batches[i].verdict = m->matches == 1                     ? RESOLVE_FOUND
                                  : m->matches == 0 && absence_proved ? RESOLVE_ABSENT
                                                                      : RESOLVE_UNKNOWN;
    }
    bool absent_before = false;
    for (size_t j = 0; j < req->n; j++) {
        resolve_batch_t *b = &req->batches[j];
        if (b->verdict == RESOLVE_ABSENT)
            absent_before = true;
        if (b->verdict != RESOLVE_FOUND)
            continue;
        if (absent_before) {
            b->verdict = RESOLVE_UNKNOWN;
            continue;
        }
        for (size_t i = 0; i < j; i++) {
            if (req->batches[i].verdict == RESOLVE_FOUND &&
                ps->m[i].llsn + ps->m[i].n > ps->m[j].llsn) {
                req->batches[i].verdict = RESOLVE_UNKNOWN;
                b->verdict = RESOLVE_UNKNOWN;
            }
        }
    }
}

/* GLSNs of the batches found; one that cannot be read in this pass becomes UNKNOWN. Returns
 * TIMED_OUT or CLOSED when the pass must end. */
static varlog_err_t fill_metas(rs_pass_t *ps, const rs_replica_t *r)
{
    resolve_req_t *req = ps->req;
    for (size_t i = 0; i < req->n; i++) {
        resolve_batch_t *b = &req->batches[i];
        if (b->verdict != RESOLVE_FOUND)
            continue;
        uint64_t glsn0 = 0;
        varlog_err_t err = glsn_of(ps, r, ps->m[i].llsn, &glsn0);
        if (err != VARLOG_OK) {
            b->verdict = RESOLVE_UNKNOWN;
            snprintf(ps->err_why, sizeof(ps->err_why), "GLSN of LLSN %llu on %s: %s",
                     (unsigned long long)ps->m[i].llsn, r->target, varlog_err_name(err));
            if (err == VARLOG_ERR_TIMED_OUT || err == VARLOG_ERR_CLOSED)
                return err;
            continue;
        }
        /* A batch is committed as a unit (v0.26+): consecutive GLSNs and LLSNs. */
        for (uint32_t k = 0; k < b->n_records; k++)
            b->metas[k] = (varlog_entry_meta_t){.topic_id = req->topic_id,
                                                .log_stream_id = req->log_stream_id,
                                                .glsn = glsn0 + k,
                                                .llsn = ps->m[i].llsn + k};
    }
    return VARLOG_OK;
}

static void describe(const rs_pass_t *ps, const rs_replica_t *r, uint64_t from, uint64_t to,
                     uint64_t got, const char *note, char *why, size_t why_len)
{
    const resolve_req_t *req = ps->req;
    size_t len = 0;
    text_add(why, why_len, &len,
             "log stream %d of topic %d %s at LLSN %llu on %s: ", req->log_stream_id, req->topic_id,
             status_word(r->status), (unsigned long long)r->hi_llsn, r->target);
    if (from > to)
        text_add(why, why_len, &len, "nothing to read");
    else
        text_add(why, why_len, &len, "read LLSNs %llu..%llu", (unsigned long long)from,
                 (unsigned long long)(from + got - 1));
    if (note)
        text_add(why, why_len, &len, " (%s)", note);
    for (size_t i = 0; i < req->n; i++) {
        const rs_match_t *m = &ps->m[i];
        const char *v = req->batches[i].verdict == RESOLVE_FOUND ? "found" : NULL;
        text_add(why, why_len, &len, "%s batch %zu ", i ? ";" : ":", i);
        if (v)
            text_add(why, why_len, &len, "found at LLSNs %llu..%llu", (unsigned long long)m->llsn,
                     (unsigned long long)(m->llsn + m->n - 1));
        else if (req->batches[i].verdict == RESOLVE_ABSENT)
            text_add(why, why_len, &len, "absent");
        else if (m->matches > 1)
            text_add(why, why_len, &len, "unknown: at more than one place");
        else if (m->matches == 1)
            text_add(why, why_len, &len,
                     "unknown: found at LLSN %llu, against the send order "
                     "or the GLSN read",
                     (unsigned long long)m->llsn);
        else
            text_add(why, why_len, &len, "unknown: not among them");
    }
}

varlog_err_t append_resolve(varlog_client_t *c, resolve_req_t *req, char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = '\0';
    if (!c || !req || (req->n && !req->batches))
        return VARLOG_ERR_INVALID_ARG;
    req->saw_seal = false;
    req->sent_to_status = -1;
    for (size_t i = 0; i < req->n; i++)
        req->batches[i].verdict = RESOLVE_UNKNOWN;
    errtext_guard_begin();
    varlog_err_t err = client_enter(c);
    if (err != VARLOG_OK) {
        errtext_guard_end(true);
        if (why && why_len)
            snprintf(why, why_len, "the client is closing");
        return err;
    }
    rs_pass_t ps = {.c = c, .req = req};
    rs_replica_t *reps = NULL;
    size_t n_reps = 0;
    md_view_t *v = NULL;
    ps.m = calloc(req->n ? req->n : 1, sizeof(*ps.m));
    if (!ps.m) {
        err = VARLOG_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < req->n; i++) {
        if (!match_init(&ps.m[i], &req->batches[i])) {
            bool nomem = !ps.m[i].rec || !ps.m[i].fail;
            err = nomem && req->batches[i].n_records ? VARLOG_ERR_NOMEM : VARLOG_ERR_INVALID_ARG;
            snprintf(ps.err_why, sizeof(ps.err_why),
                     "batch %zu: its encodings do not hold %u payloads", i,
                     req->batches[i].n_records);
            goto out;
        }
    }
    v = md_current(c);
    const md_log_stream_t *l = md_view_log_stream(v, req->topic_id, req->log_stream_id);
    if (!l || l->n_replicas == 0) {
        err = l ? VARLOG_ERR_RPC_UNAVAILABLE : VARLOG_ERR_UNKNOWN_LOG_STREAM;
        snprintf(ps.err_why, sizeof(ps.err_why), "%s",
                 l ? "no replica has a known address" : "not in the metadata");
        goto out;
    }
    n_reps = l->n_replicas;
    reps = calloc(n_reps, sizeof(*reps));
    if (!reps) {
        err = VARLOG_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n_reps; i++) {
        reps[i].target = l->replicas[i];
        reps[i].may_prove = !req->sent_to || strcmp(req->sent_to, l->replicas[i]) == 0;
        rpc_status_init(&reps[i].st);
    }
    Varlog__Snpb__LogStreamReplicaMetadataRequest mr =
        VARLOG__SNPB__LOG_STREAM_REPLICA_METADATA_REQUEST__INIT;
    mr.topic_id = req->topic_id;
    mr.log_stream_id = req->log_stream_id;
    /* The replicas' metadata within metadata.call.timeout.ms, not the whole pass: a replica
     * that hangs (a SIGSTOPped backup) must not keep the pass from reading the others while
     * the primary's seal lasts, seconds at most. */
    int64_t md_deadline = wire_now_ms() + c->conf->metadata_call_timeout_ms;
    if (md_deadline > req->deadline_ms)
        md_deadline = req->deadline_ms;
    rs_fanout_t f = {.c = c, .req = &mr.base, .deadline_ms = md_deadline, .r = reps, .n = n_reps};
    md_fanout(&f);
    req->saw_seal = false;
    req->sent_to_status = -1;
    for (size_t i = 0; i < n_reps; i++) {
        if (reps[i].err != VARLOG_OK || !reps[i].resp)
            continue;
        const Varlog__Snpb__LogStreamReplicaMetadataDescriptor *d =
            ((const Varlog__Snpb__LogStreamReplicaMetadataResponse *)reps[i].resp)
                ->log_stream_replica;
        if (!d)
            continue;
        req->saw_seal |= d->status == VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED ||
                         d->status == VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALING;
        if (req->sent_to && reps[i].may_prove)
            req->sent_to_status = (int)d->status;
    }

    /* Candidates in preference order (a handful: insertion sort). */
    size_t order[RS_PARALLEL_MAX * 4], n_cand = 0;
    err = VARLOG_ERR_RPC_UNAVAILABLE;
    for (size_t i = 0; i < n_reps && n_cand < sizeof(order) / sizeof(order[0]); i++) {
        if (!replica_read(&reps[i])) {
            err = reps[i].err;
            snprintf(ps.err_why, sizeof(ps.err_why), "%s: LogStreamReplicaMetadata: %s%s%s",
                     reps[i].target, varlog_err_name(reps[i].err),
                     reps[i].st.message && reps[i].st.message[0] ? ": " : "",
                     reps[i].st.message ? reps[i].st.message : "");
            continue;
        }
        if (replica_rank(&reps[i]) < 0)
            continue;
        size_t k = n_cand++;
        for (; k > 0 && replica_before(&reps[i], &reps[order[k - 1]]); k--)
            order[k] = order[k - 1];
        order[k] = i;
    }
    for (size_t k = 0; k < n_cand; k++) {
        const rs_replica_t *r = &reps[order[k]];
        uint64_t from, to, got = 0;
        const char *note;
        bool covers = plan_window(req, r, &from, &to, &note);
        err = from <= to ? read_window(&ps, r->target, from, to, &got) : VARLOG_OK;
        if (err == VARLOG_OK && from <= to && got != to - from + 1) {
            covers = false;
            note = "the read ended early";
        }
        if (err == VARLOG_OK) {
            decide(&ps, covers && r->may_prove &&
                            r->status == VARLOG__VARLOGPB__LOG_STREAM_STATUS__LS_STATUS_SEALED);
            err = fill_metas(&ps, r);
            if (err != VARLOG_OK) {
                for (size_t i = 0; i < req->n; i++)
                    req->batches[i].verdict = RESOLVE_UNKNOWN;
                break;
            }
            describe(&ps, r, from, to, got, note, why, why_len);
            goto out;
        }
        if (err == VARLOG_ERR_TIMED_OUT || err == VARLOG_ERR_CLOSED || err == VARLOG_ERR_NOMEM)
            break;
        for (size_t i = 0; i < req->n; i++) {
            ps.m[i].state = ps.m[i].matches = 0; /* the next replica's window starts afresh */
        }
    }
    if (n_cand == 0 && err == VARLOG_ERR_RPC_UNAVAILABLE && ps.err_why[0] == '\0')
        snprintf(ps.err_why, sizeof(ps.err_why), "no replica answered RUNNING, SEALING or SEALED");
    err = timed(c, err, req->deadline_ms);
out:
    if (err != VARLOG_OK && why && why_len)
        snprintf(why, why_len, "log stream %d of topic %d: %s: %s", req->log_stream_id,
                 req->topic_id, varlog_err_name(err), ps.err_why);
    for (size_t i = 0; ps.m && i < req->n; i++)
        match_free(&ps.m[i]);
    free(ps.m);
    for (size_t i = 0; i < n_reps; i++) {
        if (reps[i].resp)
            protobuf_c_message_free_unpacked(reps[i].resp, NULL);
        rpc_status_clear(&reps[i].st);
    }
    free(reps);
    md_view_unref(v);
    wire_scratch_free(&ps.scratch);
    errtext_guard_end(true);
    client_leave(c);
    return err;
}

bool append_resolve_proof_gone(const resolve_req_t *req, bool seal_seen)
{
    return seal_seen && !req->saw_seal && req->sent_to_status == RESOLVE_STATUS_RUNNING;
}
