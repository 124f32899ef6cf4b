#include "cluster_acct.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

uint64_t acct_hash(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

void acct_init(acct_t *a, const char *tag, long cap_per_producer, size_t rec_len)
{
    memset(a, 0, sizeof(*a));
    pthread_mutex_init(&a->mu, NULL);
    snprintf(a->tag, sizeof(a->tag), "%s", tag);
    a->rec_len = rec_len < 48 ? 48 : rec_len;
    a->cap = cap_per_producer;
    for (int p = 0; p < ACCT_MAX_PRODUCERS; p++)
        a->recs[p] = calloc((size_t)cap_per_producer, sizeof(acct_rec_t));
}

void acct_free(acct_t *a)
{
    for (int p = 0; p < ACCT_MAX_PRODUCERS; p++)
        free(a->recs[p]);
    pthread_mutex_destroy(&a->mu);
    memset(a, 0, sizeof(*a));
}

void acct_payload(const acct_t *a, int producer, long seq, char *buf)
{
    int n = snprintf(buf, a->rec_len, "%s-p%d-%ld-", a->tag, producer, seq);
    for (size_t i = (size_t)n; i < a->rec_len; i++)
        buf[i] = (char)('a' + (unsigned long)(producer * 31 + seq * 7 + (long)i) % 26);
}

static acct_rec_t *rec_of(acct_t *a, int producer, long seq)
{
    if (producer < 0 || producer >= ACCT_MAX_PRODUCERS || seq < 0 || seq >= a->cap ||
        a->recs[producer] == NULL)
        return NULL;
    return &a->recs[producer][seq];
}

void acct_sent(acct_t *a, int producer, long seq, size_t n)
{
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < n; i++) {
        acct_rec_t *r = rec_of(a, producer, seq + (long)i);
        if (r != NULL && r->state == ACCT_UNSENT) {
            r->state = ACCT_PENDING;
            a->counts[ACCT_PENDING]++;
        }
    }
    pthread_mutex_unlock(&a->mu);
}

void acct_outcome(acct_t *a, int producer, long seq, size_t n, varlog_err_t err,
                  varlog_outcome_t outcome, const varlog_entry_meta_t *metas)
{
    acct_state_t s = err == VARLOG_OK                   ? ACCT_APPENDED
                     : outcome == VARLOG_NOT_APPENDED   ? ACCT_NOT_APPENDED
                     : outcome == VARLOG_MAYBE_APPENDED ? ACCT_MAYBE
                                                        : ACCT_MAYBE;
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < n; i++) {
        acct_rec_t *r = rec_of(a, producer, seq + (long)i);
        if (r == NULL)
            continue;
        a->counts[r->state]--;
        r->state = (uint8_t)s;
        a->counts[s]++;
        if (s == ACCT_APPENDED && metas != NULL) {
            r->log_stream_id = metas[i].log_stream_id;
            r->glsn = metas[i].glsn;
            r->llsn = metas[i].llsn;
        }
    }
    pthread_mutex_unlock(&a->mu);
}

long acct_count(acct_t *a, acct_state_t s)
{
    pthread_mutex_lock(&a->mu);
    long n = a->counts[s];
    pthread_mutex_unlock(&a->mu);
    return n;
}

static void problem(acct_report_t *rep, const char *fmt, ...)
{
    if (rep->problems++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(rep->first_problem, sizeof(rep->first_problem), fmt, ap);
        va_end(ap);
    }
}

bool acct_topic_last_glsn(varlog_client_t *client, int32_t topic, uint64_t *last)
{
    if (varlog_client_refresh(client, 5000) != VARLOG_OK) {
        fprintf(stderr, "refresh before the read-back: %s\n", varlog_last_error());
        return false;
    }
    int32_t ids[64];
    size_t n = 0;
    if (varlog_client_log_streams(client, topic, ids, 64, &n) != VARLOG_OK)
        return false;
    uint64_t max = 0;
    for (size_t i = 0; i < n && i < 64; i++) {
        varlog_entry_meta_t first, lst;
        varlog_err_t rc = VARLOG_OK;
        /* A replica that just came back may answer late: a few tries. */
        for (int t = 0; t < 5; t++)
            if ((rc = varlog_peek(client, topic, ids[i], 10000, &first, &lst, NULL)) == VARLOG_OK)
                break;
        if (rc != VARLOG_OK) {
            fprintf(stderr, "peek of log stream %d: %s\n", ids[i], varlog_last_error());
            return false;
        }
        if (lst.glsn > max)
            max = lst.glsn;
    }
    *last = max;
    return true;
}

/* The record an entry names, if it is one of a's; *ours false for other writers. */
static acct_rec_t *parse_entry(acct_t *a, const varlog_entry_t *e, bool *ours, bool *intact)
{
    size_t tl = strlen(a->tag);
    *ours = e->len > tl + 2 && memcmp(e->data, a->tag, tl) == 0 &&
            ((const char *)e->data)[tl] == '-' && ((const char *)e->data)[tl + 1] == 'p';
    *intact = false;
    if (!*ours)
        return NULL;
    char head[64];
    size_t hl = e->len < sizeof(head) - 1 ? e->len : sizeof(head) - 1;
    memcpy(head, e->data, hl);
    head[hl] = '\0';
    int producer;
    long seq;
    if (sscanf(head + tl, "-p%d-%ld-", &producer, &seq) != 2)
        return NULL;
    acct_rec_t *r = rec_of(a, producer, seq);
    if (r == NULL)
        return NULL;
    char *want = malloc(a->rec_len);
    if (want == NULL)
        return r;
    acct_payload(a, producer, seq, want);
    *intact = e->len == a->rec_len && memcmp(want, e->data, a->rec_len) == 0;
    free(want);
    return r;
}

bool acct_verify(acct_t *a, varlog_client_t *client, int32_t topic, acct_report_t *rep,
                 acct_log_t *log)
{
    memset(rep, 0, sizeof(*rep));
    uint64_t last;
    if (!acct_topic_last_glsn(client, topic, &last)) {
        problem(rep, "could not find the topic's last GLSN: %s", varlog_last_error());
        return false;
    }
    acct_log_t tmp = {0};
    acct_log_t *lg = log != NULL ? log : &tmp;
    lg->first = 1;
    lg->n = last;
    lg->hash = calloc(last + 1, sizeof(uint64_t));
    pthread_mutex_lock(&a->mu);
    for (int p = 0; p < ACCT_MAX_PRODUCERS; p++)
        for (long s = 0; s < a->cap; s++)
            a->recs[p][s].seen = 0;
    pthread_mutex_unlock(&a->mu);

    if (last > 0) {
        varlog_subscription_t *sub = NULL;
        if (varlog_subscribe_iter(client, topic, 1, last + 1, &sub) != VARLOG_OK) {
            problem(rep, "subscribe for the read-back: %s", varlog_last_error());
            acct_log_free(&tmp);
            return false;
        }
        uint64_t expect = 1;
        int64_t deadline = test_now_ms() + 180000;
        varlog_entry_t e;
        varlog_err_t rc;
        while ((rc = varlog_subscription_next(sub, 10000, &e)) == VARLOG_OK ||
               (rc == VARLOG_ERR_TIMED_OUT && test_now_ms() < deadline)) {
            if (rc != VARLOG_OK)
                continue;
            rep->entries++;
            if (e.meta.glsn != expect)
                problem(rep, "read-back gave GLSN %llu where %llu was due",
                        (unsigned long long)e.meta.glsn, (unsigned long long)expect);
            expect = e.meta.glsn + 1;
            if (e.meta.glsn <= last)
                lg->hash[e.meta.glsn] = acct_hash(e.data, e.len);
            bool ours, intact;
            pthread_mutex_lock(&a->mu);
            acct_rec_t *r = parse_entry(a, &e, &ours, &intact);
            if (!ours) {
                rep->foreign++;
            } else if (r == NULL || !intact) {
                problem(rep, "GLSN %llu holds a corrupt record of ours (%zu bytes: %.40s)",
                        (unsigned long long)e.meta.glsn, e.len, (const char *)e.data);
            } else {
                r->seen++;
                if (r->state == ACCT_APPENDED &&
                    (r->glsn != e.meta.glsn || r->llsn != e.meta.llsn ||
                     r->log_stream_id != e.meta.log_stream_id))
                    problem(rep,
                            "record %.30s reported at GLSN %llu LLSN %llu of log stream %d, "
                            "read back at GLSN %llu LLSN %llu of log stream %d",
                            (const char *)e.data, (unsigned long long)r->glsn,
                            (unsigned long long)r->llsn, r->log_stream_id,
                            (unsigned long long)e.meta.glsn, (unsigned long long)e.meta.llsn,
                            e.meta.log_stream_id);
            }
            pthread_mutex_unlock(&a->mu);
        }
        if (rc != VARLOG_ERR_END)
            problem(rep, "read-back of GLSN 1..%llu ended with %s at %llu: %s",
                    (unsigned long long)last, varlog_err_name(rc), (unsigned long long)expect,
                    varlog_last_error());
        varlog_subscription_close(&sub);
    }
    rep->first_glsn = 1;
    rep->last_glsn = last;

    pthread_mutex_lock(&a->mu);
    for (int p = 0; p < ACCT_MAX_PRODUCERS; p++) {
        for (long s = 0; s < a->cap; s++) {
            acct_rec_t *r = &a->recs[p][s];
            switch (r->state) {
            case ACCT_APPENDED:
                rep->appended++;
                if (r->seen != 1)
                    problem(rep, "APPENDED record p%d-%ld (GLSN %llu) found %d times", p, s,
                            (unsigned long long)r->glsn, r->seen);
                break;
            case ACCT_NOT_APPENDED:
                rep->not_appended++;
                if (r->seen != 0)
                    problem(rep, "NOT_APPENDED record p%d-%ld found %d times", p, s, r->seen);
                break;
            case ACCT_MAYBE:
                rep->maybe++;
                rep->maybe_stored += r->seen;
                if (r->seen > 1)
                    problem(rep, "MAYBE_APPENDED record p%d-%ld found %d times", p, s, r->seen);
                break;
            case ACCT_PENDING:
                problem(rep, "record p%d-%ld never got its outcome", p, s);
                break;
            default:
                if (r->seen != 0)
                    problem(rep, "record p%d-%ld was never accepted but found %d times", p, s,
                            r->seen);
            }
        }
    }
    pthread_mutex_unlock(&a->mu);
    acct_log_free(&tmp);
    return rep->problems == 0;
}

void acct_log_free(acct_log_t *log)
{
    free(log->hash);
    memset(log, 0, sizeof(*log));
}

void acct_report_print(const char *what, const acct_report_t *rep)
{
    fprintf(stderr,
            "%s: read back GLSN 1..%llu (%ld entries, %ld of other writers): %ld APPENDED, "
            "%ld NOT_APPENDED, %ld MAYBE_APPENDED (%ld of them stored); %ld problem(s)%s%s\n",
            what, (unsigned long long)rep->last_glsn, rep->entries, rep->foreign, rep->appended,
            rep->not_appended, rep->maybe, rep->maybe_stored, rep->problems,
            rep->problems ? ", first: " : "", rep->first_problem);
}

/* ---- the tailing subscriber ------------------------------------------------------------------ */

static void sub_problem(acct_sub_t *s, const char *fmt, ...)
{
    if (s->problems++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->first_problem, sizeof(s->first_problem), fmt, ap);
        va_end(ap);
    }
}

static void *sub_main(void *arg)
{
    acct_sub_t *s = arg;
    varlog_entry_t e;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        bool stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop)
            break;
        varlog_err_t rc = varlog_subscription_next(s->sub, 200, &e);
        if (rc == VARLOG_ERR_TIMED_OUT)
            continue;
        pthread_mutex_lock(&s->mu);
        if (rc != VARLOG_OK) {
            s->end_err = rc;
            sub_problem(s, "subscription ended with %s at GLSN %llu: %s", varlog_err_name(rc),
                        (unsigned long long)s->next, varlog_last_error());
            pthread_mutex_unlock(&s->mu);
            break;
        }
        if (e.meta.glsn != s->next)
            sub_problem(s, "subscriber got GLSN %llu where %llu was due",
                        (unsigned long long)e.meta.glsn, (unsigned long long)s->next);
        if (e.meta.glsn >= s->begin && e.meta.glsn - s->begin < s->cap)
            s->hash[e.meta.glsn - s->begin] = acct_hash(e.data, e.len);
        if (e.meta.glsn >= s->next)
            s->next = e.meta.glsn + 1;
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_lock(&s->mu);
    s->done = true;
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

bool acct_sub_start(acct_sub_t *s, varlog_client_t *client, int32_t topic, uint64_t begin,
                    size_t cap)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    s->begin = s->next = begin;
    s->cap = cap;
    s->hash = calloc(cap, sizeof(uint64_t));
    if (varlog_subscribe_iter(client, topic, begin, VARLOG_GLSN_MAX, &s->sub) != VARLOG_OK)
        return false;
    return pthread_create(&s->thread, NULL, sub_main, s) == 0;
}

uint64_t acct_sub_next(acct_sub_t *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t n = s->next;
    pthread_mutex_unlock(&s->mu);
    return n;
}

typedef struct sub_wait {
    acct_sub_t *s;
    uint64_t last;
} sub_wait_t;

static bool sub_reached(void *arg)
{
    sub_wait_t *w = arg;
    pthread_mutex_lock(&w->s->mu);
    bool ok = w->s->next > w->last || w->s->done;
    pthread_mutex_unlock(&w->s->mu);
    return ok;
}

bool acct_sub_finish(acct_sub_t *s, const acct_log_t *log, uint64_t last, int64_t timeout_ms,
                     char *why, size_t cap)
{
    sub_wait_t w = {s, last};
    test_wait_until(sub_reached, &w, timeout_ms);
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    varlog_subscription_close(&s->sub);
    if (s->next <= last)
        sub_problem(s, "subscriber stopped at GLSN %llu, before the log's last %llu",
                    (unsigned long long)s->next, (unsigned long long)last);
    for (uint64_t g = s->begin; g <= last && g - s->begin < s->cap && g < s->next; g++) {
        if (log != NULL && g < log->first + log->n + 1 && log->hash != NULL &&
            log->hash[g] != s->hash[g - s->begin])
            sub_problem(s, "subscriber's entry at GLSN %llu differs from the read-back's",
                        (unsigned long long)g);
    }
    fprintf(stderr, "subscriber: GLSN %llu..%llu delivered, %ld problem(s)%s%s\n",
            (unsigned long long)s->begin, (unsigned long long)(s->next - 1), s->problems,
            s->problems ? ", first: " : "", s->first_problem);
    snprintf(why, cap, "%s", s->first_problem);
    return s->problems == 0;
}

void acct_sub_free(acct_sub_t *s)
{
    if (s->sub != NULL) {
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
        varlog_subscription_close(&s->sub);
    }
    free(s->hash);
    pthread_mutex_destroy(&s->mu);
    memset(s, 0, sizeof(*s));
}
