#include "subscribe_test_util.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "google/protobuf/empty.pb-c.h"
#include "rpc_client.h"
#include "snpb/log_io.pb-c.h"
#include "subscribe_internal.h"
#include "test_support.h"

uint64_t stu_hash(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* ---- the appended log ------------------------------------------------------------------ */

void stu_log_init(stu_log_t *l, size_t max_glsn)
{
    memset(l, 0, sizeof(*l));
    pthread_mutex_init(&l->mu, NULL);
    l->cap = max_glsn + 1;
    l->by_glsn = calloc(l->cap, sizeof(*l->by_glsn));
    assert_non_null(l->by_glsn);
}

void stu_log_free(stu_log_t *l)
{
    free(l->by_glsn);
    pthread_mutex_destroy(&l->mu);
    memset(l, 0, sizeof(*l));
}

void stu_log_put(stu_log_t *l, const varlog_entry_meta_t *m, const void *data, size_t len)
{
    pthread_mutex_lock(&l->mu);
    if (m->glsn == 0 || m->glsn >= l->cap) {
        atu_note_bad("appended glsn %" PRIu64 " outside the log's table (%zu)", m->glsn, l->cap);
    } else if (l->by_glsn[m->glsn].set) {
        atu_note_bad("glsn %" PRIu64 " reported by two appends", m->glsn);
    } else {
        l->by_glsn[m->glsn] =
            (stu_rec_t){true, m->log_stream_id, m->llsn, len, stu_hash(data, len)};
        if (m->glsn > l->max_glsn)
            l->max_glsn = m->glsn;
        l->records++;
    }
    pthread_mutex_unlock(&l->mu);
}

long stu_log_count_ls(stu_log_t *l, int32_t ls)
{
    long n = 0;
    pthread_mutex_lock(&l->mu);
    for (size_t g = 1; g < l->cap; g++)
        if (l->by_glsn[g].set && l->by_glsn[g].ls == ls)
            n++;
    pthread_mutex_unlock(&l->mu);
    return n;
}

uint64_t stu_log_glsn_of(stu_log_t *l, int32_t ls, uint64_t llsn)
{
    uint64_t found = 0;
    pthread_mutex_lock(&l->mu);
    for (size_t g = 1; g < l->cap && !found; g++)
        if (l->by_glsn[g].set && l->by_glsn[g].ls == ls && l->by_glsn[g].llsn == llsn)
            found = g;
    pthread_mutex_unlock(&l->mu);
    return found;
}

/* ---- producers --------------------------------------------------------------------------- */

#define STU_MAX_BATCH 8
#define STU_MAX_LEN 4096

static int batch_of(const stu_producer_t *p)
{
    return p->max_batch > 0 ? p->max_batch : 3;
}

long stu_producer_records(const stu_producer_t *p)
{
    long n = 0;
    for (long i = 0; i < p->calls; i++)
        n += 1 + i % batch_of(p);
    return n;
}

/* Payload bytes that differ between producers, calls and records. */
static size_t fill_payload(unsigned char *buf, int id, long call, size_t idx, size_t fixed)
{
    uint64_t x = stu_hash(&call, sizeof(call)) ^ ((uint64_t)id << 48) ^ (idx << 40);
    size_t len = fixed ? fixed : 1 + (size_t)(x % 64);
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    return len;
}

void stu_produce(stu_producer_t *p)
{
    int mb = batch_of(p);
    assert_true(mb <= STU_MAX_BATCH);
    assert_true(p->rec_len <= STU_MAX_LEN);
    static _Thread_local unsigned char bufs[STU_MAX_BATCH][STU_MAX_LEN];
    varlog_record_t r[STU_MAX_BATCH];
    varlog_entry_meta_t metas[STU_MAX_BATCH];
    for (long i = 0; i < p->calls; i++) {
        size_t n = (size_t)(1 + i % mb);
        for (size_t j = 0; j < n; j++) {
            size_t len = fill_payload(bufs[j], p->id, i, j, p->rec_len);
            r[j] = (varlog_record_t){bufs[j], len};
        }
        varlog_err_t rc = p->ls
                              ? varlog_append_to(p->client, p->topic, p->ls, r, n, -1, metas, NULL)
                              : varlog_append(p->client, p->topic, r, n, -1, metas, NULL);
        if (rc != VARLOG_OK) {
            if (p->failures++ == 0) {
                p->first_err = rc;
                snprintf(p->first_text, sizeof(p->first_text), "%s", varlog_last_error());
            }
            continue;
        }
        for (size_t j = 0; j < n; j++)
            stu_log_put(p->log, &metas[j], r[j].data, r[j].len);
        p->records += (long)n;
    }
}

static void *producer_main(void *arg)
{
    stu_produce(arg);
    return NULL;
}

void stu_producer_start(stu_producer_t *p)
{
    assert_int_equal(pthread_create(&p->th, NULL, producer_main, p), 0);
}

void stu_producer_join(stu_producer_t *p)
{
    pthread_join(p->th, NULL);
    if (p->failures)
        fail_msg("producer %d: %d appends failed, the first with %s: %s", p->id, p->failures,
                 varlog_err_name(p->first_err), p->first_text);
}

void stu_append_n(varlog_client_t *client, stu_log_t *log, int32_t topic, int32_t ls, long n,
                  size_t len, int id)
{
    stu_producer_t p = {.client = client,
                        .topic = topic,
                        .ls = ls,
                        .id = id,
                        .calls = n,
                        .max_batch = 1,
                        .rec_len = len,
                        .log = log};
    stu_produce(&p);
    if (p.failures)
        fail_msg("%d appends failed, the first with %s: %s", p.failures,
                 varlog_err_name(p.first_err), p.first_text);
}

/* ---- the sink ---------------------------------------------------------------------------- */

void stu_sink_init(stu_sink_t *s, long cap)
{
    memset(s, 0, sizeof(*s));
    atu_sync_init(&s->sync);
    s->cap = cap;
    s->got = calloc((size_t)cap, sizeof(*s->got));
    assert_non_null(s->got);
    s->block_at = -1;
    s->close_at = -1;
    atomic_init(&s->closed, false);
    atomic_init(&s->after_close, 0);
    atomic_init(&s->in_handler, 0);
}

void stu_sink_free(stu_sink_t *s)
{
    free(s->got);
    atu_sync_destroy(&s->sync);
    memset(s, 0, sizeof(*s));
}

static void handler_begin(stu_sink_t *s, const char *which)
{
    if (atomic_load(&s->closed)) {
        atomic_fetch_add(&s->after_close, 1);
        atu_note_bad("%s ran after varlog_subscription_close returned", which);
    }
    if (atomic_fetch_add(&s->in_handler, 1) != 0)
        atu_note_bad("%s ran while another handler ran", which);
}

static void handler_end(stu_sink_t *s)
{
    atomic_fetch_sub(&s->in_handler, 1);
}

/* Called with s->sync.mu held. */
static void add_locked(stu_sink_t *s, const varlog_entry_t *e)
{
    if (s->done)
        atu_note_bad("entry %" PRIu64 "/%" PRIu64 " after on_end/on_error", e->meta.glsn,
                     e->meta.llsn);
    if (s->n >= s->cap) {
        atu_note_bad("more entries than the %ld expected (glsn %" PRIu64 ")", s->cap, e->meta.glsn);
        return;
    }
    if (e->len && !e->data)
        atu_note_bad("entry glsn %" PRIu64 ": %zu bytes at NULL", e->meta.glsn, e->len);
    stu_got_t *g = &s->got[s->n];
    *g = (stu_got_t){e->meta.topic_id, e->meta.log_stream_id,
                     e->meta.glsn,     e->meta.llsn,
                     e->len,           e->len ? stu_hash(e->data, e->len) : stu_hash("", 0)};
    if (s->n > 0) {
        const stu_got_t *prev = &s->got[s->n - 1];
        if (s->by_llsn ? g->llsn != prev->llsn + 1 : g->glsn != prev->glsn + 1)
            atu_note_bad("entry %ld: position %" PRIu64 " after %" PRIu64, s->n,
                         s->by_llsn ? g->llsn : g->glsn, s->by_llsn ? prev->llsn : prev->glsn);
    }
    s->n++;
    pthread_cond_broadcast(&s->sync.cv);
}

void stu_sink_add(stu_sink_t *s, const varlog_entry_t *e)
{
    pthread_mutex_lock(&s->sync.mu);
    add_locked(s, e);
    pthread_mutex_unlock(&s->sync.mu);
}

static void self_close(stu_sink_t *s)
{
    pthread_mutex_lock(&s->sync.mu);
    varlog_subscription_t *sub = s->sub;
    pthread_mutex_unlock(&s->sync.mu);
    if (!sub) {
        atu_note_bad("a handler was to close a subscription it was not given");
        return;
    }
    varlog_subscription_close(&sub);
    if (sub)
        atu_note_bad("close from a handler left the handle set");
    pthread_mutex_lock(&s->sync.mu);
    s->sub = NULL;
    s->self_closed = true;
    pthread_cond_broadcast(&s->sync.cv);
    pthread_mutex_unlock(&s->sync.mu);
}

static void on_entry(const varlog_entry_t *e, void *opaque)
{
    stu_sink_t *s = opaque;
    handler_begin(s, "on_entry");
    pthread_mutex_lock(&s->sync.mu);
    if (s->self_closed)
        atu_note_bad("on_entry after the handler's own close");
    add_locked(s, e);
    bool close_now = s->close_at >= 0 && s->n == s->close_at;
    if (s->block_at >= 0 && s->n == s->block_at) {
        s->blocked = true;
        pthread_cond_broadcast(&s->sync.cv);
        while (!s->release)
            pthread_cond_wait(&s->sync.cv, &s->sync.mu);
    }
    pthread_mutex_unlock(&s->sync.mu);
    if (close_now) {
        self_close(s);
        pthread_mutex_lock(&s->sync.mu);
        if (s->block_after_close) {
            s->blocked = true;
            pthread_cond_broadcast(&s->sync.cv);
            while (!s->release)
                pthread_cond_wait(&s->sync.cv, &s->sync.mu);
        }
        pthread_mutex_unlock(&s->sync.mu);
    }
    handler_end(s);
}

static void on_end(void *opaque)
{
    stu_sink_t *s = opaque;
    handler_begin(s, "on_end");
    pthread_mutex_lock(&s->sync.mu);
    if (s->self_closed)
        atu_note_bad("on_end after the handler's own close");
    s->ends++;
    if (s->done)
        atu_note_bad("on_end after on_end/on_error (%ld ends, %ld errors)", s->ends, s->errors);
    s->done = true;
    bool close_now = s->close_in_end;
    pthread_cond_broadcast(&s->sync.cv);
    pthread_mutex_unlock(&s->sync.mu);
    if (close_now)
        self_close(s);
    handler_end(s);
}

static void on_error(varlog_err_t err, const char *why, void *opaque)
{
    stu_sink_t *s = opaque;
    handler_begin(s, "on_error");
    pthread_mutex_lock(&s->sync.mu);
    if (s->self_closed)
        atu_note_bad("on_error after the handler's own close");
    s->errors++;
    if (s->done)
        atu_note_bad("on_error %s after on_end/on_error", varlog_err_name(err));
    s->done = true;
    if (s->errors == 1) {
        s->err = err;
        snprintf(s->why, sizeof(s->why), "%s", why ? why : "(null)");
    }
    pthread_cond_broadcast(&s->sync.cv);
    pthread_mutex_unlock(&s->sync.mu);
    handler_end(s);
}

varlog_subscribe_handlers_t stu_handlers(stu_sink_t *s)
{
    return (varlog_subscribe_handlers_t){on_entry, on_end, on_error, s};
}

bool stu_wait_n(stu_sink_t *s, long n, int64_t timeout_ms)
{
    return atu_wait_at_least(&s->sync, &s->n, n, timeout_ms);
}

bool stu_wait_done(stu_sink_t *s, int64_t timeout_ms)
{
    return atu_wait_true(&s->sync, &s->done, timeout_ms);
}

long stu_sink_n(stu_sink_t *s)
{
    pthread_mutex_lock(&s->sync.mu);
    long n = s->n;
    pthread_mutex_unlock(&s->sync.mu);
    return n;
}

void stu_close(stu_sink_t *s, varlog_subscription_t **sub)
{
    varlog_subscription_close(sub);
    assert_null(*sub);
    atomic_store(&s->closed, true);
    /* no handler may be running either */
    assert_int_equal(atomic_load(&s->in_handler), 0);
}

varlog_err_t stu_drain(varlog_subscription_t *sub, stu_sink_t *s, long want, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    while (stu_sink_n(s) < want) {
        int64_t left = deadline - test_now_ms();
        if (left <= 0)
            return VARLOG_ERR_TIMED_OUT;
        varlog_entry_t e;
        memset(&e, 0, sizeof(e));
        varlog_err_t rc = varlog_subscription_next(sub, left < 200 ? left : 200, &e);
        if (rc == VARLOG_ERR_TIMED_OUT)
            continue;
        if (rc != VARLOG_OK)
            return rc;
        stu_sink_add(s, &e);
    }
    return VARLOG_OK;
}

void stu_verify(stu_sink_t *s, stu_log_t *log, int32_t topic, int32_t ls, uint64_t begin, long n)
{
    atu_assert_nothing_bad();
    pthread_mutex_lock(&s->sync.mu);
    long got_n = s->n;
    pthread_mutex_unlock(&s->sync.mu);
    for (long i = 0; i < got_n && i < n; i++) {
        const stu_got_t *g = &s->got[i];
        uint64_t want_pos = begin + (uint64_t)i;
        uint64_t glsn = g->glsn;
        if (s->by_llsn) {
            if (g->llsn != want_pos)
                fail_msg("entry %ld: llsn %" PRIu64 ", expected %" PRIu64, i, g->llsn, want_pos);
            if (g->glsn != 0)
                fail_msg("SubscribeTo entry %ld: glsn %" PRIu64 ", documented as 0", i, g->glsn);
            if (g->ls != ls)
                fail_msg("SubscribeTo entry %ld: log stream %d, expected %d", i, g->ls, ls);
            glsn = stu_log_glsn_of(log, ls, g->llsn);
            if (!glsn)
                fail_msg("entry %ld: llsn %" PRIu64 " of log stream %d was never appended", i,
                         g->llsn, ls);
        } else if (glsn != want_pos) {
            fail_msg("entry %ld: glsn %" PRIu64 ", expected %" PRIu64 " (range begins at %" PRIu64
                     ", %ld entries received)",
                     i, glsn, want_pos, begin, got_n);
        }
        if (g->topic != topic)
            fail_msg("entry %ld (glsn %" PRIu64 "): topic %d, expected %d", i, glsn, g->topic,
                     topic);
        pthread_mutex_lock(&log->mu);
        stu_rec_t r = glsn < log->cap ? log->by_glsn[glsn] : (stu_rec_t){0};
        pthread_mutex_unlock(&log->mu);
        if (!r.set)
            fail_msg("entry %ld: glsn %" PRIu64 " was never appended", i, glsn);
        if (g->ls != r.ls || g->llsn != r.llsn)
            fail_msg("entry %ld (glsn %" PRIu64 "): log stream %d llsn %" PRIu64
                     ", appended at log stream %d llsn %" PRIu64,
                     i, glsn, g->ls, g->llsn, r.ls, r.llsn);
        if (g->len != r.len || g->hash != r.hash)
            fail_msg("entry %ld (glsn %" PRIu64 "): payload of %zu bytes differs from the %zu "
                     "appended",
                     i, glsn, g->len, r.len);
    }
    if (got_n != n)
        fail_msg("%ld entries received, expected %ld (from %" PRIu64 ")", got_n, n, begin);
}

varlog_subscription_stats_t stu_stats(varlog_subscription_t *sub)
{
    varlog_subscription_stats_t st;
    memset(&st, 0, sizeof(st));
    assert_int_equal(varlog_subscription_stats(sub, &st), VARLOG_OK);
    return st;
}

void stu_assert_err(varlog_err_t got, varlog_err_t want, const char *want_text, const char *what)
{
    const char *text = varlog_last_error();
    if (got != want)
        fail_msg("%s: %s, expected %s (text: %s)", what, varlog_err_name(got),
                 varlog_err_name(want), text ? text : "(null)");
    if (!text || !text[0])
        fail_msg("%s: %s without a varlog_last_error() text", what, varlog_err_name(got));
    if (want_text && !strstr(text, want_text))
        fail_msg("%s: the text \"%s\" does not mention \"%s\"", what, text, want_text);
}

/* ---- server side ------------------------------------------------------------------------- */

void stu_trim_raw(varlog_server_t *srv, int32_t topic, uint64_t glsn)
{
    rpc_client_t *c = NULL;
    assert_int_equal(rpc_client_new(&c), VARLOG_OK);
    Varlog__Snpb__TrimDeprecatedRequest r = VARLOG__SNPB__TRIM_DEPRECATED_REQUEST__INIT;
    r.topic_id = topic;
    r.glsn = glsn;
    ProtobufCMessage *m = NULL;
    varlog_err_t rc = rpc_unary(c, varlog_server_address(srv), STU_PATH_TRIM, &r.base,
                                &google__protobuf__empty__descriptor, 10000, &m, NULL);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    rpc_client_destroy(c);
    assert_int_equal(rc, VARLOG_OK);
}

/* ---- white-box ----------------------------------------------------------------------------- */

size_t stu_buffered_max(varlog_subscription_t *sub, size_t *n_ls)
{
    size_t max = 0;
    for (size_t i = 0; i < sub->n_ls; i++) {
        sub_ls_t *l = sub->ls[i];
        size_t n = (l->rpc ? rpc_stream_buffered(l->rpc) : 0) + (l->has_head ? 1 : 0);
        if (n > max)
            max = n;
    }
    if (n_ls)
        *n_ls = sub->n_ls;
    return max;
}

void *stu_next_call_main(void *call)
{
    stu_next_call_t *n = call;
    n->rc = varlog_subscription_next(n->sub, n->timeout_ms, &n->e);
    return NULL;
}

bool stu_next_sleeping(varlog_subscription_t *sub)
{
    pthread_mutex_lock(&sub->mu);
    bool w = sub->waiting && sub->in_next > 0;
    pthread_mutex_unlock(&sub->mu);
    return w;
}
