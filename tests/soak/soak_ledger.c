#include "soak_ledger.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_fixture.h"

#define CHUNK_BITS 16
#define CHUNK_CALLS ((size_t)1 << CHUNK_BITS)
#define HDR_LEN 16

/* A record's identity, at the start of its payload. */
typedef struct soak_hdr {
    uint32_t magic;
    uint16_t producer;
    uint8_t index; /* record index within its call */
    uint8_t n;     /* records of the call */
    uint64_t seq;  /* the call within its producer */
} soak_hdr_t;
_Static_assert(sizeof(soak_hdr_t) == HDR_LEN, "the header is 16 bytes");

void soak_ledger_init(soak_ledger_t *l)
{
    memset(l, 0, sizeof(*l));
    pthread_mutex_init(&l->mu, NULL);
}

void soak_ledger_free(soak_ledger_t *l)
{
    for (int p = 0; p < SOAK_PRODUCERS; p++) {
        for (size_t i = 0; i < l->n_chunks[p]; i++)
            free(l->chunks[p][i]);
        free(l->chunks[p]);
    }
    free(l->by_glsn);
    free(l->ls1);
    pthread_mutex_destroy(&l->mu);
}

uint64_t soak_hash(int32_t ls, const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(uint32_t)ls;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Record idx of call (p, seq) of n records into out; returns its length (16..63). The bytes
 * after the header vary with the record so that a record stored with another's tail, or
 * truncated, does not pass for it. */
static size_t record_bytes(unsigned char *out, int p, uint64_t seq, unsigned idx, unsigned n)
{
    soak_hdr_t h = {SOAK_MAGIC, (uint16_t)p, (uint8_t)idx, (uint8_t)n, seq};
    memcpy(out, &h, HDR_LEN);
    uint64_t m = mix64(((uint64_t)p << 56) ^ (seq << 4) ^ idx);
    size_t extra = (size_t)(m % (SOAK_REC_MAX - HDR_LEN));
    for (size_t j = 0; j < extra; j++)
        out[HDR_LEN + j] = (unsigned char)((m >> ((j % 8) * 8)) ^ (j * 29));
    return HDR_LEN + extra;
}

void soak_note_bad(soak_ledger_t *l, const char *fmt, ...)
{
    if (atomic_fetch_add(&l->bad, 1) == 0) {
        va_list ap;
        va_start(ap, fmt);
        pthread_mutex_lock(&l->mu);
        vsnprintf(l->first_bad, sizeof(l->first_bad), fmt, ap);
        pthread_mutex_unlock(&l->mu);
        va_end(ap);
    }
}

static soak_call_t *call_at(soak_ledger_t *l, int p, uint64_t seq)
{
    size_t chunk = (size_t)(seq >> CHUNK_BITS);
    if (chunk >= l->n_chunks[p])
        return NULL;
    return &l->chunks[p][chunk][seq & (CHUNK_CALLS - 1)];
}

soak_call_t *soak_new_call(soak_ledger_t *l, int p, soak_api_t api, size_t n, varlog_record_t *recs,
                           unsigned char *buf)
{
    uint64_t seq = atomic_load(&l->calls[p]);
    size_t chunk = (size_t)(seq >> CHUNK_BITS);
    pthread_mutex_lock(&l->mu);
    if (chunk >= l->n_chunks[p]) {
        /* A new chunk of zeroed calls; the table of chunks may move, the chunks never do. */
        soak_call_t **t = realloc(l->chunks[p], (chunk + 1) * sizeof(*t));
        soak_call_t *calls = calloc(CHUNK_CALLS, sizeof(*calls));
        if (!t || !calls) {
            pthread_mutex_unlock(&l->mu);
            fprintf(stderr, "soak: out of memory for the ledger\n");
            abort();
        }
        t[chunk] = calls;
        l->chunks[p] = t;
        l->n_chunks[p] = chunk + 1;
    }
    soak_call_t *c = &l->chunks[p][chunk][seq & (CHUNK_CALLS - 1)];
    pthread_mutex_unlock(&l->mu);
    c->api = (uint8_t)api;
    c->n = (uint8_t)n;
    for (size_t i = 0; i < n; i++) {
        unsigned char *out = buf + i * SOAK_REC_MAX;
        recs[i].data = out;
        recs[i].len = record_bytes(out, p, seq, (unsigned)i, (unsigned)n);
    }
    atomic_store(&l->calls[p], seq + 1);
    return c;
}

static void keep_text(soak_ledger_t *l, varlog_err_t err, varlog_outcome_t outcome,
                      const char *text)
{
    pthread_mutex_lock(&l->mu);
    size_t i = 0;
    while (i < l->n_texts && (l->texts[i].err != err || l->texts[i].outcome != outcome))
        i++;
    if (i == l->n_texts && i < sizeof(l->texts) / sizeof(l->texts[0])) {
        l->texts[i].err = (int16_t)err;
        l->texts[i].outcome = (uint8_t)outcome;
        snprintf(l->texts[i].text, sizeof(l->texts[i].text), "%s", text ? text : "");
        l->n_texts++;
    }
    if (i < l->n_texts)
        l->texts[i].count++;
    pthread_mutex_unlock(&l->mu);
}

void soak_settle(soak_ledger_t *l, soak_call_t *c, varlog_err_t err, varlog_outcome_t outcome,
                 size_t n, const varlog_entry_meta_t *metas, const char *errtext)
{
    unsigned prev = atomic_fetch_add(&c->outcomes, 1);
    if (prev) {
        soak_note_bad(l, "a call got outcome number %u (%s, %s)", prev + 1, varlog_err_name(err),
                      varlog_outcome_name(outcome));
        return;
    }
    c->err = (int16_t)err;
    c->outcome = (uint8_t)outcome;
    if (n != c->n)
        soak_note_bad(l, "an outcome for %zu records of a call of %u", n, c->n);
    if (err == VARLOG_OK) {
        if (outcome != VARLOG_APPENDED || !metas) {
            soak_note_bad(l, "OK with outcome %s", varlog_outcome_name(outcome));
            return;
        }
        for (size_t i = 1; i < n; i++)
            if (metas[i].log_stream_id != metas[0].log_stream_id ||
                metas[i].glsn != metas[0].glsn + i || metas[i].llsn != metas[0].llsn + i)
                soak_note_bad(l, "the positions of one call are not consecutive in one log stream");
        c->ls = metas[0].log_stream_id;
        c->glsn = metas[0].glsn;
        c->llsn = metas[0].llsn;
        return;
    }
    if (outcome == VARLOG_APPENDED)
        soak_note_bad(l, "error %s with outcome APPENDED", varlog_err_name(err));
    if (!errtext || !errtext[0])
        soak_note_bad(l, "error %s without a text", varlog_err_name(err));
    keep_text(l, err, outcome, errtext);
}

void soak_refused(soak_call_t *c, varlog_err_t err)
{
    c->refused = 1;
    c->err = (int16_t)err;
}

/* ---- reading the store back -------------------------------------------------------------- */

typedef struct walk {
    soak_ledger_t *l;
    int32_t ls;
    uint64_t next_llsn;
} walk_t;

static void walk_entry(void *arg, const varlog_entry_meta_t *m, const void *data, size_t len)
{
    walk_t *w = arg;
    soak_ledger_t *l = w->l;
    uint64_t h = soak_hash(m->log_stream_id, data, len);
    if (m->llsn != w->next_llsn)
        soak_note_bad(l, "log stream %d: LLSN %" PRIu64 " where %" PRIu64 " was due", w->ls,
                      m->llsn, w->next_llsn);
    w->next_llsn = m->llsn + 1;
    if (m->glsn == 0 || m->glsn > l->tail) {
        soak_note_bad(l, "stored GLSN %" PRIu64 " outside [1, %" PRIu64 "]", m->glsn, l->tail);
    } else if (l->by_glsn[m->glsn - 1].ls) {
        soak_note_bad(l, "GLSN %" PRIu64 " stored twice", m->glsn);
    } else {
        l->by_glsn[m->glsn - 1] = (soak_pos_t){m->log_stream_id, m->llsn, h};
    }
    if (w->ls == 1 && m->llsn >= 1 && m->llsn <= l->ls1_n)
        l->ls1[m->llsn - 1] = (soak_pos_t){1, m->llsn, h};

    soak_hdr_t hdr = {0};
    soak_call_t *c = NULL;
    if (len >= HDR_LEN) {
        memcpy(&hdr, data, HDR_LEN);
        if (hdr.magic == SOAK_MAGIC && hdr.producer < SOAK_PRODUCERS &&
            hdr.seq < atomic_load(&l->calls[hdr.producer]))
            c = call_at(l, hdr.producer, hdr.seq);
    }
    if (!c || hdr.index >= c->n || hdr.n != c->n) {
        l->foreign++;
        soak_note_bad(l, "GLSN %" PRIu64 ": %zu bytes that no call appended", m->glsn, len);
        return;
    }
    unsigned char want[SOAK_REC_MAX];
    size_t want_len = record_bytes(want, hdr.producer, hdr.seq, hdr.index, hdr.n);
    if (len != want_len || memcmp(data, want, len) != 0)
        soak_note_bad(
            l, "GLSN %" PRIu64 ": the bytes of producer %u call %" PRIu64 " record %u differ",
            m->glsn, hdr.producer, hdr.seq, hdr.index);
    if (c->stored[hdr.index] < UINT8_MAX)
        c->stored[hdr.index]++;
    if (atomic_load(&c->outcomes) && c->outcome == VARLOG_APPENDED &&
        (c->ls != m->log_stream_id || c->glsn + hdr.index != m->glsn ||
         c->llsn + hdr.index != m->llsn))
        soak_note_bad(l,
                      "producer %u call %" PRIu64 " record %u: stored at (%d, %" PRIu64 ", %" PRIu64
                      "), reported (%d, %" PRIu64 ", %" PRIu64 ")",
                      hdr.producer, hdr.seq, hdr.index, m->log_stream_id, m->glsn, m->llsn, c->ls,
                      c->glsn + hdr.index, c->llsn + hdr.index);
}

void soak_read_store(soak_ledger_t *l, varlog_server_t *srv, int32_t topic, int32_t max_ls)
{
    uint64_t total = 0;
    for (int32_t ls = 1; ls <= max_ls; ls++)
        total += cf_stored_each(srv, topic, ls, NULL, NULL);
    l->tail = total;
    l->ls1_n = cf_stored_each(srv, topic, 1, NULL, NULL);
    l->by_glsn = calloc(total ? total : 1, sizeof(*l->by_glsn));
    l->ls1 = calloc(l->ls1_n ? l->ls1_n : 1, sizeof(*l->ls1));
    if (!l->by_glsn || !l->ls1) {
        fprintf(stderr, "soak: out of memory for the store's table\n");
        abort();
    }
    for (int32_t ls = 1; ls <= max_ls; ls++) {
        walk_t w = {l, ls, 1};
        cf_stored_each(srv, topic, ls, walk_entry, &w);
    }
    /* Varlog numbers a topic's entries densely: with nothing trimmed, the log streams
     * together hold every GLSN from 1 to the count, each once. */
    for (uint64_t g = 0; g < total; g++)
        if (!l->by_glsn[g].ls) {
            soak_note_bad(l, "GLSN %" PRIu64 " is stored in no log stream (tail %" PRIu64 ")",
                          g + 1, total);
            break;
        }
}

void soak_check_calls(soak_ledger_t *l, soak_tally_t *tally)
{
    memset(tally, 0, SOAK_APIS * sizeof(*tally));
    for (int p = 0; p < SOAK_PRODUCERS; p++) {
        uint64_t n_calls = atomic_load(&l->calls[p]);
        for (uint64_t seq = 0; seq < n_calls; seq++) {
            soak_call_t *c = call_at(l, p, seq);
            soak_tally_t *t = &tally[c->api < SOAK_APIS ? c->api : 0];
            unsigned outcomes = atomic_load(&c->outcomes);
            unsigned copies0 = 0, copies1 = 0, other = 0;
            for (unsigned i = 0; i < c->n; i++) {
                if (c->stored[i] == 0)
                    copies0++;
                else if (c->stored[i] == 1)
                    copies1++;
                else
                    other++;
            }
            t->calls++;
            if (c->refused) {
                t->refused++;
                if (outcomes)
                    soak_note_bad(l, "producer %d call %" PRIu64 ": refused (%s), then %u outcomes",
                                  p, seq, varlog_err_name(c->err), outcomes);
                if (copies0 != c->n)
                    soak_note_bad(l, "producer %d call %" PRIu64 ": refused (%s) but stored", p,
                                  seq, varlog_err_name(c->err));
                continue;
            }
            if (outcomes != 1) {
                soak_note_bad(l, "producer %d call %" PRIu64 " (api %u): %u outcomes", p, seq,
                              c->api, outcomes);
                continue;
            }
            switch (c->outcome) {
            case VARLOG_APPENDED:
                t->appended++;
                t->records_stored += c->n;
                if (copies1 != c->n)
                    soak_note_bad(l,
                                  "producer %d call %" PRIu64 ": APPENDED, records stored "
                                  "0/1/more times: %u/%u/%u",
                                  p, seq, copies0, copies1, other);
                break;
            case VARLOG_NOT_APPENDED:
                t->not_appended++;
                if (copies0 != c->n)
                    soak_note_bad(l, "producer %d call %" PRIu64 ": NOT_APPENDED (%s) but stored",
                                  p, seq, varlog_err_name(c->err));
                break;
            default:
                t->maybe++;
                if (copies0 == c->n) {
                    t->maybe_absent++;
                } else if (copies1 == c->n) {
                    t->maybe_stored++;
                    t->records_stored += c->n;
                } else {
                    soak_note_bad(l,
                                  "producer %d call %" PRIu64 ": MAYBE_APPENDED (%s), records "
                                  "stored 0/1/more times: %u/%u/%u",
                                  p, seq, varlog_err_name(c->err), copies0, copies1, other);
                }
            }
        }
    }
}

void soak_print_texts(soak_ledger_t *l)
{
    pthread_mutex_lock(&l->mu);
    for (size_t i = 0; i < l->n_texts; i++)
        printf("  %-22s %-14s %8ld  e.g. %s\n", varlog_err_name(l->texts[i].err),
               varlog_outcome_name(l->texts[i].outcome), l->texts[i].count, l->texts[i].text);
    pthread_mutex_unlock(&l->mu);
}
