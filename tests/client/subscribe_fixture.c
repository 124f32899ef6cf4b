#include "subscribe_fixture.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "appender_test_util.h"

t_t T;

void t_start(int32_t topics, int32_t log_streams, long cap, ...)
{
    memset(&T, 0, sizeof(T));
    va_list ap;
    va_start(ap, cap);
    cf_start_adjusted(&T.f, topics, log_streams, atu_conf_adjust, &ap, NULL);
    va_end(ap);
    stu_log_init(&T.log, (size_t)cap + 64);
    stu_sink_init(&T.sink, cap);
    stu_sink_init(&T.sink2, cap);
    atu_bad_reset();
    T.started = true;
}

void release_sink(stu_sink_t *s)
{
    atu_set_true(&s->sync, &s->release);
}

void t_finish(void)
{
    release_sink(&T.sink);
    release_sink(&T.sink2);
    varlog_subscription_close(&T.sub);
    varlog_subscription_close(&T.sub2);
    cf_stop(&T.f);
    stu_log_free(&T.log);
    stu_sink_free(&T.sink);
    stu_sink_free(&T.sink2);
    T.started = false;
}

int teardown(void **state)
{
    (void)state;
    if (T.started)
        t_finish();
    return 0;
}

int64_t bound_ms(void)
{
    return 3 * cf_wait_bound_ms();
}

void subscribe_ok(int32_t topic, uint64_t begin, uint64_t end, stu_sink_t *s,
                  varlog_subscription_t **sub)
{
    varlog_subscribe_handlers_t h = stu_handlers(s);
    varlog_err_t rc = varlog_subscribe(T.f.client, topic, begin, end, &h, sub);
    if (rc != VARLOG_OK)
        fail_msg("varlog_subscribe: %s: %s", varlog_err_name(rc), varlog_last_error());
    assert_non_null(*sub);
}

void subscribe_iter_ok(int32_t topic, uint64_t begin, uint64_t end, varlog_subscription_t **sub)
{
    varlog_err_t rc = varlog_subscribe_iter(T.f.client, topic, begin, end, sub);
    if (rc != VARLOG_OK)
        fail_msg("varlog_subscribe_iter: %s: %s", varlog_err_name(rc), varlog_last_error());
    assert_non_null(*sub);
}

void drain_ok(varlog_subscription_t *sub, stu_sink_t *s, long want)
{
    varlog_err_t rc = stu_drain(sub, s, want, bound_ms());
    if (rc != VARLOG_OK)
        fail_msg("next: %s after %ld of %ld entries: %s", varlog_err_name(rc), stu_sink_n(s), want,
                 varlog_last_error());
}

/* on_end came exactly once, on_error never, and nothing was noted by the handlers. */
void assert_ended(stu_sink_t *s)
{
    if (!stu_wait_done(s, bound_ms()))
        fail_msg("no on_end within %lld ms (%ld entries received)", (long long)bound_ms(),
                 stu_sink_n(s));
    pthread_mutex_lock(&s->sync.mu);
    long ends = s->ends, errors = s->errors;
    varlog_err_t err = s->err;
    char why[512];
    memcpy(why, s->why, sizeof(why));
    pthread_mutex_unlock(&s->sync.mu);
    if (errors)
        fail_msg("on_error %s: %s", varlog_err_name(err), why);
    assert_int_equal(ends, 1);
}

/* A second client of T's server, opened now: its metadata shows what T's client's does not
 * (a log stream added since). */
varlog_client_t *other_client(void)
{
    varlog_conf_t *conf = cf_conf(&T.f, NULL);
    varlog_client_t *other = NULL;
    char err[256];
    if (varlog_client_new(&conf, &other, err, sizeof(err)) != VARLOG_OK)
        fail_msg("second client: %s", err);
    return other;
}
