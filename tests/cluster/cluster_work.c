#include "cluster_work.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "test_support.h"

varlog_client_t *work_client(const char *mr_addrs, const char *const *extra)
{
    varlog_conf_t *conf = varlog_conf_new();
    char err[512];
    assert_non_null(conf);
    if (varlog_conf_set(conf, "metadata.addresses", mr_addrs, err, sizeof(err)) != VARLOG_OK)
        fail_msg("metadata.addresses: %s", err);
    /* A real cluster on 2 shared cores commits in tens to hundreds of ms. */
    varlog_conf_set(conf, "open.timeout.ms", "30000", err, sizeof(err));
    varlog_conf_set(conf, "log.level", "warning", err, sizeof(err));
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
        char name[128];
        const char *eq = strchr(extra[i], '=');
        assert_non_null(eq);
        snprintf(name, sizeof(name), "%.*s", (int)(eq - extra[i]), extra[i]);
        if (varlog_conf_set(conf, name, eq + 1, err, sizeof(err)) != VARLOG_OK)
            fail_msg("%s: %s", extra[i], err);
    }
    varlog_client_t *client = NULL;
    if (varlog_client_new(&conf, &client, err, sizeof(err)) != VARLOG_OK) {
        varlog_conf_destroy(conf);
        fail_msg("varlog_client_new(%s): %s", mr_addrs, err);
    }
    return client;
}

/* One call's outcome, from the appender's callback or after varlog_append returned. */
static void note_outcome(call_ctx_t *c, varlog_err_t err, varlog_outcome_t outcome, size_t n,
                         const varlog_entry_meta_t *metas, const char *errtext)
{
    producer_t *p = c->p;
    acct_outcome(p->acct, p->id, c->seq, n, err, outcome, metas);
    int64_t now = test_now_ms();
    pthread_mutex_lock(&p->mu);
    if (err == VARLOG_OK) {
        p->appended++;
        p->last_ok_ms = now;
        if (p->mark_ms != 0 && c->sent_ms >= p->mark_ms && p->first_ok_ms == 0)
            p->first_ok_ms = now;
    } else {
        p->failed++;
        c->err = err;
        c->outcome = outcome;
        free(c->errtext);
        c->errtext = strdup(errtext != NULL ? errtext : "");
        snprintf(p->last_err, sizeof(p->last_err), "%s %s: %s", varlog_err_name(err),
                 varlog_outcome_name(outcome), errtext != NULL ? errtext : "");
    }
    pthread_mutex_unlock(&p->mu);
}

static void on_appended(const varlog_append_result_t *res, void *opaque)
{
    note_outcome(opaque, res->err, res->outcome, res->n, res->metas, res->errtext);
}

/* varlog_append(_to) of one record, its outcome noted. */
static void append_sync(producer_t *p, call_ctx_t *c, const varlog_record_t *rec)
{
    varlog_entry_meta_t m;
    varlog_outcome_t oc = VARLOG_NOT_APPENDED;
    varlog_err_t rc = p->log_stream_id > 0
                          ? varlog_append_to(p->client, p->topic, p->log_stream_id, rec, 1,
                                             p->sync_timeout_ms, &m, &oc)
                          : varlog_append(p->client, p->topic, rec, 1, p->sync_timeout_ms, &m, &oc);
    note_outcome(c, rc, rc == VARLOG_OK ? VARLOG_APPENDED : oc, 1, &m,
                 rc == VARLOG_OK ? "" : varlog_last_error());
}

static void *producer_main(void *arg)
{
    producer_t *p = arg;
    char *buf = malloc(p->acct->rec_len);
    int64_t period_us = 1000000 / (p->per_second > 0 ? p->per_second : 1);
    int64_t start = test_now_ms();
    long n = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        bool stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop || p->next_seq >= p->acct->cap)
            break;
        long seq = p->next_seq;
        acct_payload(p->acct, p->id, seq, buf);
        varlog_record_t rec = {.data = buf, .len = p->acct->rec_len};
        call_ctx_t *c = &p->ctx[seq];
        c->p = p;
        c->seq = seq;
        c->sent_ms = test_now_ms();
        /* Counted before the call: the callback may run before append returns. */
        acct_sent(p->acct, p->id, seq, 1);
        if (p->app == NULL) {
            int64_t t0 = test_now_ms();
            append_sync(p, c, &rec);
            p->next_seq++;
            /* Pacing, one call at a time: what a blocked call took is not made up for. */
            int64_t left_us = period_us - (test_now_ms() - t0) * 1000;
            if (left_us > 0) {
                struct timespec ts = {left_us / 1000000, (left_us % 1000000) * 1000};
                nanosleep(&ts, NULL);
            }
            continue;
        }
        varlog_err_t rc = varlog_appender_append(p->app, &rec, 1, 100, on_appended, c);
        p->next_seq++;
        if (rc != VARLOG_OK) {
            /* Refused up front: no callback; the record must not be stored. */
            acct_outcome(p->acct, p->id, seq, 1, rc, VARLOG_NOT_APPENDED, NULL);
            pthread_mutex_lock(&p->mu);
            p->refused++;
            c->err = rc;
            c->outcome = VARLOG_NOT_APPENDED;
            c->errtext = strdup(varlog_last_error());
            snprintf(p->last_err, sizeof(p->last_err), "refused: %s %s", varlog_err_name(rc),
                     c->errtext != NULL ? c->errtext : "");
            pthread_mutex_unlock(&p->mu);
        }
        /* Pacing of the load, not synchronisation. */
        n++;
        int64_t due_us = n * period_us - (test_now_ms() - start) * 1000;
        if (due_us > 0) {
            struct timespec ts = {due_us / 1000000, (due_us % 1000000) * 1000};
            nanosleep(&ts, NULL);
        }
    }
    free(buf);
    return NULL;
}

bool producer_start(producer_t *p, acct_t *a, int id, varlog_client_t *client, int32_t topic,
                    int32_t log_stream_id, int per_second)
{
    memset(p, 0, sizeof(*p));
    pthread_mutex_init(&p->mu, NULL);
    p->acct = a;
    p->id = id;
    p->log_stream_id = log_stream_id;
    p->per_second = per_second;
    p->ctx = calloc((size_t)a->cap, sizeof(call_ctx_t));
    if (varlog_appender_new(client, topic, log_stream_id, &p->app) != VARLOG_OK) {
        fprintf(stderr, "appender for log stream %d: %s\n", log_stream_id, varlog_last_error());
        return false;
    }
    p->thread_live = pthread_create(&p->thread, NULL, producer_main, p) == 0;
    return p->thread_live;
}

bool producer_start_sync(producer_t *p, acct_t *a, int id, varlog_client_t *client, int32_t topic,
                         int32_t log_stream_id, int per_second, int64_t timeout_ms)
{
    memset(p, 0, sizeof(*p));
    pthread_mutex_init(&p->mu, NULL);
    p->acct = a;
    p->id = id;
    p->log_stream_id = log_stream_id;
    p->per_second = per_second;
    p->client = client;
    p->topic = topic;
    p->sync_timeout_ms = timeout_ms;
    p->ctx = calloc((size_t)a->cap, sizeof(call_ctx_t));
    p->thread_live = pthread_create(&p->thread, NULL, producer_main, p) == 0;
    return p->thread_live;
}

/* For a synchronous producer the join waits for its call in progress (up to its timeout). */
void producer_stop(producer_t *p, int64_t timeout_ms)
{
    if (!p->thread_live)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    p->thread_live = false;
    if (p->app != NULL)
        varlog_appender_close(&p->app, timeout_ms);
}

void producer_free(producer_t *p)
{
    producer_stop(p, 5000);
    if (p->ctx != NULL)
        for (long s = 0; s < p->next_seq; s++)
            free(p->ctx[s].errtext);
    free(p->ctx);
    p->ctx = NULL;
}

void producer_mark(producer_t *p)
{
    pthread_mutex_lock(&p->mu);
    p->mark_ms = test_now_ms();
    p->first_ok_ms = 0;
    pthread_mutex_unlock(&p->mu);
}

static bool ok_after_mark(void *arg)
{
    producer_t *p = arg;
    pthread_mutex_lock(&p->mu);
    bool ok = p->first_ok_ms != 0;
    pthread_mutex_unlock(&p->mu);
    return ok;
}

int64_t producer_await_ok_after_mark(producer_t *p, int64_t timeout_ms)
{
    test_wait_until(ok_after_mark, p, timeout_ms);
    pthread_mutex_lock(&p->mu);
    int64_t t = p->first_ok_ms;
    pthread_mutex_unlock(&p->mu);
    return t;
}

long producer_appended(producer_t *p)
{
    pthread_mutex_lock(&p->mu);
    long n = p->appended;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void producer_print(const producer_t *p, const char *name)
{
    fprintf(stderr, "%s: %ld calls, %ld APPENDED, %ld failed, %ld refused%s%s\n", name, p->next_seq,
            p->appended, p->failed, p->refused, p->failed ? "; last failure: " : "",
            p->failed ? p->last_err : "");
}

typedef struct appended_probe {
    producer_t *p;
    long n;
} appended_probe_t;

static bool appended_enough(void *arg)
{
    appended_probe_t *a = arg;
    return producer_appended(a->p) >= a->n;
}

bool producer_await_appended(producer_t *p, long n, int64_t timeout_ms)
{
    appended_probe_t a = {p, n};
    return test_wait_until(appended_enough, &a, timeout_ms);
}

int32_t producer_failure_log_stream(const producer_t *p, const call_ctx_t *c)
{
    const char *t = c->errtext;
    for (const char *at = t != NULL ? strstr(t, "log stream ") : NULL; at != NULL;
         at = strstr(at + 1, "log stream ")) {
        long id = strtol(at + strlen("log stream "), NULL, 10);
        if (id > 0)
            return (int32_t)id;
    }
    return p->log_stream_id;
}

#define FAILURE_KINDS 32

void producer_print_failures(const producer_t *p, const char *name, int64_t since_ms, int max_lines)
{
    struct {
        varlog_err_t err;
        varlog_outcome_t outcome;
        int32_t ls;
        long n;
        const char *example;
    } kinds[FAILURE_KINDS];
    int n_kinds = 0, printed = 0;
    long failed = 0;
    for (long s = 0; s < p->next_seq; s++) {
        const call_ctx_t *c = &p->ctx[s];
        if (c->err == VARLOG_OK)
            continue;
        failed++;
        int32_t ls = producer_failure_log_stream(p, c);
        if (printed < max_lines) {
            printed++;
            fprintf(stderr, "  %s: call %ld sent at +%.3f s: %s %s (log stream %d): %s\n", name, s,
                    (double)(c->sent_ms - since_ms) / 1000.0, varlog_err_name(c->err),
                    varlog_outcome_name(c->outcome), ls, c->errtext != NULL ? c->errtext : "");
        }
        int k = 0;
        while (k < n_kinds &&
               !(kinds[k].err == c->err && kinds[k].outcome == c->outcome && kinds[k].ls == ls))
            k++;
        if (k == n_kinds && n_kinds < FAILURE_KINDS) {
            kinds[k].err = c->err;
            kinds[k].outcome = c->outcome;
            kinds[k].ls = ls;
            kinds[k].n = 0;
            kinds[k].example = c->errtext != NULL ? c->errtext : "";
            n_kinds++;
        }
        if (k < n_kinds)
            kinds[k].n++;
    }
    if (failed > printed)
        fprintf(stderr, "  %s: %ld more failed calls not listed one by one\n", name,
                failed - printed);
    for (int k = 0; k < n_kinds; k++)
        fprintf(stderr, "  %s: %ld x %s %s (log stream %d), e.g.: %s\n", name, kinds[k].n,
                varlog_err_name(kinds[k].err), varlog_outcome_name(kinds[k].outcome), kinds[k].ls,
                kinds[k].example);
}
