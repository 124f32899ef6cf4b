#include "appender_test_util.h"

#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "test_support.h"

static pthread_mutex_t bad_mu = PTHREAD_MUTEX_INITIALIZER;
static int bad_count;
static char bad_first[512];

void atu_note_bad(const char *fmt, ...)
{
    pthread_mutex_lock(&bad_mu);
    if (bad_count++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(bad_first, sizeof(bad_first), fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&bad_mu);
}

int atu_bad_count(void)
{
    pthread_mutex_lock(&bad_mu);
    int n = bad_count;
    pthread_mutex_unlock(&bad_mu);
    return n;
}

void atu_bad_reset(void)
{
    pthread_mutex_lock(&bad_mu);
    bad_count = 0;
    bad_first[0] = '\0';
    pthread_mutex_unlock(&bad_mu);
}

void atu_assert_nothing_bad(void)
{
    pthread_mutex_lock(&bad_mu);
    int n = bad_count;
    char first[512];
    memcpy(first, bad_first, sizeof(first));
    bad_count = 0;
    bad_first[0] = '\0';
    pthread_mutex_unlock(&bad_mu);
    if (n)
        fail_msg("%d violation(s) seen by callbacks; first: %s", n, first);
}

void atu_fill_records(atu_payload_t *p, varlog_record_t *r, size_t n, int producer, uint64_t call)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (atu_payload_t){ATU_REC_MAGIC, (uint16_t)producer, (uint16_t)i, call};
        r[i] = (varlog_record_t){&p[i], ATU_REC_LEN};
    }
}

void atu_scribble(atu_payload_t *p, size_t n)
{
    memset(p, 0xee, n * sizeof(*p));
}

bool atu_stored_payload(const varlog_entry_meta_t *m, const void *data, size_t len,
                        uint64_t n_calls, atu_payload_t *out)
{
    if (len != ATU_REC_LEN) {
        atu_note_bad("stored entry glsn %llu has %zu bytes", (unsigned long long)m->glsn, len);
        return false;
    }
    memcpy(out, data, sizeof(*out));
    if (out->magic != ATU_REC_MAGIC || out->call >= n_calls) {
        atu_note_bad("stored entry glsn %llu is not a record of ours (scribbled copy?)",
                     (unsigned long long)m->glsn);
        return false;
    }
    return true;
}

void atu_sync_init(atu_sync_t *s)
{
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &a);
    pthread_condattr_destroy(&a);
}

void atu_sync_destroy(atu_sync_t *s)
{
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
}

bool atu_wait_at_least(atu_sync_t *s, const long *value, long n, int64_t timeout_ms)
{
    struct timespec dl = test_deadline_ms(timeout_ms);
    pthread_mutex_lock(&s->mu);
    while (*value < n && pthread_cond_timedwait(&s->cv, &s->mu, &dl) == 0)
        ;
    bool ok = *value >= n;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

bool atu_wait_true(atu_sync_t *s, const bool *flag, int64_t timeout_ms)
{
    struct timespec dl = test_deadline_ms(timeout_ms);
    pthread_mutex_lock(&s->mu);
    while (!*flag && pthread_cond_timedwait(&s->cv, &s->mu, &dl) == 0)
        ;
    bool ok = *flag;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

void atu_set_true(atu_sync_t *s, bool *flag)
{
    pthread_mutex_lock(&s->mu);
    *flag = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void atu_conf_set_va(varlog_conf_t *conf, va_list ap)
{
    char err[256];
    for (const char *name; (name = va_arg(ap, const char *)) != NULL;) {
        const char *value = va_arg(ap, const char *);
        if (varlog_conf_set(conf, name, value, err, sizeof(err)) != VARLOG_OK)
            fail_msg("%s=%s: %s", name, value, err);
    }
}

void atu_conf_adjust(varlog_conf_t *conf, void *arg)
{
    va_list *ap = arg;
    atu_conf_set_va(conf, *ap);
}
