/* The client's statistics (varlog/stats.h, docs/STATISTICS.md) against the embedded server:
 * the pull struct after known appends (outcomes, bytes, per log stream, latency), failures by
 * outcome through fault injection, retries and lookups, reconnects across a server restart,
 * the appenders' gauges while the server holds answers back, subscribe entries and lag, and
 * the periodic JSON: its thread, its interval, its end before destroy returns, and its fields
 * against the table of docs/STATISTICS.md. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cJSON.h>
#include <cmocka.h>

#include "client_fixture.h"
#include "test_support.h"
#include "varlog/appender.h"
#include "varlog/stats.h"
#include "varlog/subscribe.h"

#define REC_LEN 100

static varlog_stats_t get_stats(varlog_client_t *c)
{
    varlog_stats_t st;
    assert_int_equal(varlog_stats_get(c, &st), VARLOG_OK);
    return st;
}

/* ---- appender calls and their callbacks ------------------------------------------------- */

typedef struct sink {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long done;
    long by_outcome[3];
    long records_by_ls[8]; /* log stream id -> records APPENDED */
} sink_t;

static void sink_init(sink_t *s)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
}

static void sink_destroy(sink_t *s)
{
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}

static void on_append(const varlog_append_result_t *r, void *opaque)
{
    sink_t *s = opaque;
    pthread_mutex_lock(&s->mu);
    s->done++;
    s->by_outcome[r->outcome]++;
    if (r->err == VARLOG_OK && r->metas[0].log_stream_id >= 0 && r->metas[0].log_stream_id < 8)
        s->records_by_ls[r->metas[0].log_stream_id] += (long)r->n;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void append_one(varlog_appender_t *app, sink_t *s, char fill)
{
    char buf[REC_LEN];
    memset(buf, fill, sizeof(buf));
    varlog_record_t r = {.data = buf, .len = sizeof(buf)};
    assert_int_equal(varlog_appender_append(app, &r, 1, -1, on_append, s), VARLOG_OK);
}

/* Waits until n callbacks ran. */
static void sink_wait(sink_t *s, long n)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += cf_wait_bound_ms() / 1000;
    pthread_mutex_lock(&s->mu);
    while (s->done < n && pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0) {
    }
    long done = s->done;
    pthread_mutex_unlock(&s->mu);
    assert_int_equal(done, n);
}

static const varlog_stats_log_stream_t *find_ls(const varlog_stats_t *st, int32_t topic, int32_t ls)
{
    for (uint32_t i = 0; i < st->n_log_streams; i++) {
        if (st->log_streams[i].topic_id == topic && st->log_streams[i].log_stream_id == ls)
            return &st->log_streams[i];
    }
    return NULL;
}

/* ---- the pull struct after known appends ------------------------------------------------- */

static void test_pull_after_appends(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    varlog_stats_t st = get_stats(f.client);
    assert_int_equal(st.appended_calls, 0);
    assert_int_equal(st.append_latency.count, 0);
    assert_int_equal(st.append_latency.max_us, 0);
    assert_int_equal(st.n_log_streams, 0);
    assert_int_equal(st.appenders, 0);
    assert_true(st.ts_ms > 1600000000000); /* epoch ms, not a monotonic clock */

    /* The appender's calls go to log stream 2, the synchronous ones below to 1. */
    const long n = test_scale(400, 4);
    sink_t s;
    sink_init(&s);
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(f.client, 1, 2, &app), VARLOG_OK);
    for (long i = 0; i < n; i++)
        append_one(app, &s, (char)('a' + i % 26));
    assert_int_equal(varlog_appender_flush(app, -1, NULL), VARLOG_OK);
    sink_wait(&s, n);

    /* Three synchronous calls of 2 records each to log stream 1. */
    char buf[REC_LEN] = {0};
    varlog_record_t two[2] = {{buf, sizeof(buf)}, {buf, sizeof(buf)}};
    for (int i = 0; i < 3; i++)
        assert_int_equal(varlog_append_to(f.client, 1, 1, two, 2, -1, NULL, NULL), VARLOG_OK);

    st = get_stats(f.client);
    assert_int_equal(st.appenders, 1);
    assert_int_equal(st.appended_calls, (uint64_t)n + 3);
    assert_int_equal(st.appended_records, (uint64_t)n + 6);
    assert_int_equal(st.appended_bytes, ((uint64_t)n + 6) * REC_LEN);
    assert_int_equal(st.not_appended_calls + st.maybe_appended_calls, 0);
    /* flush returned once every callback returned: nothing is held any more */
    assert_int_equal(st.pending_records, 0);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.inflight_records, 0);
    assert_int_equal(st.inflight_bytes, 0);

    assert_int_equal(st.n_log_streams, 2);
    const varlog_stats_log_stream_t *ls1 = find_ls(&st, 1, 1), *ls2 = find_ls(&st, 1, 2);
    assert_non_null(ls1);
    assert_non_null(ls2);
    pthread_mutex_lock(&s.mu);
    long cb1 = s.records_by_ls[1], cb2 = s.records_by_ls[2];
    pthread_mutex_unlock(&s.mu);
    assert_int_equal(cb1, 0);
    assert_int_equal(cb2, n);
    assert_int_equal(ls1->appended_records, (uint64_t)cb1 + 6);
    assert_int_equal(ls2->appended_records, (uint64_t)cb2);
    assert_int_equal(ls1->appended_bytes, ((uint64_t)cb1 + 6) * REC_LEN);
    assert_int_equal(ls2->appended_bytes, (uint64_t)cb2 * REC_LEN);
    assert_int_equal(st.log_streams_untracked_records, 0);

    /* Latency: the appender's calls only (the synchronous ones are not measured). */
    const varlog_stats_latency_t *l = &st.append_latency;
    assert_int_equal(l->count, (uint64_t)n);
    assert_true(l->p50_us > 0);
    assert_true(l->p50_us <= l->p90_us);
    assert_true(l->p90_us <= l->p99_us);
    assert_true(l->p99_us <= l->p999_us);
    assert_true(l->p999_us <= l->max_us);
    /* Each call waited at least for its batch's round trip: well under the test's bound. */
    assert_true(l->max_us < (uint64_t)cf_wait_bound_ms() * 1000);

    /* A closed appender's calls stay counted; its gauges go. */
    assert_int_equal(varlog_appender_close(&app, -1), VARLOG_OK);
    varlog_stats_t after = get_stats(f.client);
    assert_int_equal(after.appenders, 0);
    assert_int_equal(after.appended_records, st.appended_records);
    assert_int_equal(after.append_latency.count, l->count);
    assert_true(after.uptime_ms >= st.uptime_ms);

    assert_int_equal(varlog_stats_get(NULL, &st), VARLOG_ERR_INVALID_ARG);
    assert_int_equal(varlog_stats_get(f.client, NULL), VARLOG_ERR_INVALID_ARG);
    cf_stop(&f);
    sink_destroy(&s);
}

/* ---- gauges while answers are held back -------------------------------------------------- */

typedef struct gauge_wait {
    varlog_client_t *c;
} gauge_wait_t;

static bool inflight_seen(void *arg)
{
    gauge_wait_t *w = arg;
    varlog_stats_t st = get_stats(w->c);
    return st.inflight_records >= 3;
}

static void test_gauges_while_held(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "appender.linger.ms", "0", "appender.pipeline.depth", "8", NULL);
    sink_t s;
    sink_init(&s);
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(f.client, 1, 1, &app), VARLOG_OK);
    /* Long enough for the look below to see all three sent and unanswered, even slowed. */
    int64_t hold_ms = test_under_valgrind() ? 5000 : 1500;
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_APPEND, hold_ms), VARLOG_OK);
    for (int i = 0; i < 3; i++)
        append_one(app, &s, 'x');
    gauge_wait_t w = {f.client};
    assert_true(test_wait_until(inflight_seen, &w, cf_wait_bound_ms()));
    varlog_stats_t st = get_stats(f.client);
    assert_int_equal(st.appenders, 1);
    assert_int_equal(st.pending_records, 3);
    assert_int_equal(st.pending_bytes, 3 * REC_LEN);
    assert_int_equal(st.inflight_records, 3);
    assert_int_equal(st.inflight_bytes, 3 * REC_LEN);
    assert_int_equal(st.appended_calls, 0);
    varlog_server_clear_faults(f.srv);
    assert_int_equal(varlog_appender_flush(app, -1, NULL), VARLOG_OK);
    st = get_stats(f.client);
    assert_int_equal(st.pending_records, 0);
    assert_int_equal(st.inflight_records, 0);
    assert_int_equal(st.appended_calls, 3);
    assert_int_equal(varlog_appender_close(&app, -1), VARLOG_OK);
    cf_stop(&f);
    sink_destroy(&s);
}

/* ---- failures by outcome, retries, lookups ------------------------------------------------ */

static void test_failures_by_outcome(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "append.retries", "0", "append.resolve.maybe.appended", "false",
             "append.deny.ttl.ms", "0", "appender.linger.ms", "0", NULL);
    sink_t s;
    sink_init(&s);
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(f.client, 1, 1, &app), VARLOG_OK);
    long expect = 0;

    /* A refusal of the request as such: certainly not stored. */
    assert_int_equal(varlog_server_fail_next(f.srv, CF_PATH_APPEND, 3, "bad request", 1),
                     VARLOG_OK);
    append_one(app, &s, 'n');
    sink_wait(&s, ++expect);
    /* A failure after the request arrived: perhaps stored. */
    assert_int_equal(varlog_server_fail_next(f.srv, CF_PATH_APPEND, 13, "boom", 1), VARLOG_OK);
    append_one(app, &s, 'm');
    sink_wait(&s, ++expect);
    /* And one that works. */
    append_one(app, &s, 'o');
    sink_wait(&s, ++expect);
    pthread_mutex_lock(&s.mu);
    assert_int_equal(s.by_outcome[VARLOG_NOT_APPENDED], 1);
    assert_int_equal(s.by_outcome[VARLOG_MAYBE_APPENDED], 1);
    assert_int_equal(s.by_outcome[VARLOG_APPENDED], 1);
    pthread_mutex_unlock(&s.mu);

    /* varlog_append: an unknown log stream is NOT_APPENDED without a request. */
    char buf[REC_LEN] = {0};
    varlog_record_t r = {buf, sizeof(buf)};
    assert_int_equal(varlog_append_to(f.client, 1, 99, &r, 1, -1, NULL, NULL),
                     VARLOG_ERR_UNKNOWN_LOG_STREAM);
    /* and a MAYBE_APPENDED one of two records */
    varlog_record_t two[2] = {r, r};
    varlog_outcome_t outcome = VARLOG_APPENDED;
    assert_int_equal(varlog_server_fail_next(f.srv, CF_PATH_APPEND, 13, "boom", 1), VARLOG_OK);
    assert_int_not_equal(varlog_append_to(f.client, 1, 1, two, 2, -1, NULL, &outcome), VARLOG_OK);
    assert_int_equal(outcome, VARLOG_MAYBE_APPENDED);

    varlog_stats_t st = get_stats(f.client);
    assert_int_equal(st.not_appended_calls, 2);
    assert_int_equal(st.not_appended_records, 2);
    assert_int_equal(st.maybe_appended_calls, 2);
    assert_int_equal(st.maybe_appended_records, 3);
    assert_int_equal(st.appended_calls, 1);
    assert_int_equal(st.appended_records, 1);
    assert_int_equal(st.append_latency.count, 1); /* failures are not measured */
    const varlog_stats_log_stream_t *ls = find_ls(&st, 1, 1);
    assert_non_null(ls);
    assert_int_equal(ls->appended_records, 1); /* failed calls add nothing per log stream */
    assert_int_equal(st.retries, 0);

    assert_int_equal(varlog_appender_close(&app, -1), VARLOG_OK);
    cf_stop(&f);
    sink_destroy(&s);
}

static void test_queue_full_and_retries(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "appender.queue.max.records", "1", "appender.batch.max.records", "1",
             "append.batch.max.records", "1", "append.retries", "3", "append.retry.backoff.ms", "1",
             NULL);
    sink_t s;
    sink_init(&s);
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(f.client, 1, 1, &app), VARLOG_OK);
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_APPEND, 1000), VARLOG_OK);
    append_one(app, &s, 'q');
    char buf[REC_LEN] = {0};
    varlog_record_t r = {buf, sizeof(buf)};
    assert_int_equal(varlog_appender_append(app, &r, 1, 0, on_append, &s), VARLOG_ERR_QUEUE_FULL);
    varlog_server_clear_faults(f.srv);
    sink_wait(&s, 1);
    assert_int_equal(get_stats(f.client).queue_full, 1);

    /* A retriable refusal: the retry (after a lookup) stores the records. */
    assert_int_equal(varlog_server_fail_next(f.srv, CF_PATH_APPEND, 14, "not primary", 1),
                     VARLOG_OK);
    assert_int_equal(varlog_append_to(f.client, 1, 1, &r, 1, -1, NULL, NULL), VARLOG_OK);
    /* and one through the appender */
    assert_int_equal(varlog_server_fail_next(f.srv, CF_PATH_APPEND, 14, "not primary", 1),
                     VARLOG_OK);
    append_one(app, &s, 'r');
    sink_wait(&s, 2);
    varlog_stats_t st = get_stats(f.client);
    assert_int_equal(st.retries, 2);
    assert_true(st.lookups >= 2);
    assert_true(st.lookup_batch_calls + st.lookup_single_calls >= 1);
    assert_true(st.lookup_batch_calls + st.lookup_single_calls <= st.lookups);
    assert_true(st.metadata_fetches >= 2);
    assert_int_equal(st.appended_calls, 3);
    assert_int_equal(st.not_appended_calls + st.maybe_appended_calls, 0);
    assert_int_equal(varlog_appender_close(&app, -1), VARLOG_OK);
    cf_stop(&f);
    sink_destroy(&s);
}

/* ---- reconnects ---------------------------------------------------------------------------- */

typedef struct reconnect_wait {
    varlog_client_t *c;
} reconnect_wait_t;

static bool reconnected(void *arg)
{
    reconnect_wait_t *w = arg;
    return get_stats(w->c).reconnects >= 1;
}

static void test_reconnects(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "append.retries", "0", "reconnect.backoff.max.ms", "100", NULL);
    char buf[REC_LEN] = {0};
    varlog_record_t r = {buf, sizeof(buf)};
    assert_int_equal(varlog_append(f.client, 1, &r, 1, -1, NULL, NULL), VARLOG_OK);
    assert_int_equal(varlog_append(f.client, 1, &r, 1, -1, NULL, NULL), VARLOG_OK);
    assert_int_equal(get_stats(f.client).reconnects, 0);

    assert_int_equal(varlog_server_stop(f.srv), VARLOG_OK);
    assert_int_not_equal(varlog_append(f.client, 1, &r, 1, 2000, NULL, NULL), VARLOG_OK);
    assert_int_equal(get_stats(f.client).reconnects, 0); /* lost, not back */
    assert_int_equal(varlog_server_restart(f.srv), VARLOG_OK);
    varlog_err_t err = VARLOG_ERR_INTERNAL;
    int64_t until = test_now_ms() + cf_wait_bound_ms();
    while (err != VARLOG_OK && test_now_ms() < until)
        err = varlog_append(f.client, 1, &r, 1, 1000, NULL, NULL);
    assert_int_equal(err, VARLOG_OK);
    reconnect_wait_t w = {f.client};
    assert_true(test_wait_until(reconnected, &w, cf_wait_bound_ms()));
    assert_int_equal(get_stats(f.client).reconnects, 1);
    cf_stop(&f);
}

/* ---- subscriptions ------------------------------------------------------------------------ */

static void test_subscribe_entries_and_lag(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 2, NULL);
    const int calls = (int)test_scale(50, 5);
    char buf[REC_LEN] = {0};
    varlog_record_t two[2] = {{buf, sizeof(buf)}, {buf, sizeof(buf)}};
    for (int i = 0; i < calls; i++) /* round robin over the two log streams */
        assert_int_equal(varlog_append(f.client, 1, two, 2, -1, NULL, NULL), VARLOG_OK);
    const uint64_t n = (uint64_t)calls * 2;

    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, n + 1, &sub), VARLOG_OK);
    varlog_stats_t st = get_stats(f.client);
    assert_int_equal(st.subscriptions, 1);
    assert_int_equal(st.subscribe_entries, 0);
    uint64_t lag_max = 0;
    for (uint64_t i = 0; i < n; i++) {
        varlog_entry_t e;
        assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_OK);
        st = get_stats(f.client);
        assert_int_equal(st.subscribe_entries, i + 1);
        assert_true(st.subscribe_lag <= n - (i + 1));
        if (st.subscribe_lag > lag_max)
            lag_max = st.subscribe_lag;
    }
    /* While the other log stream's next entry waited behind the one delivered, the lag
     * showed it. */
    assert_true(lag_max >= 1);
    st = get_stats(f.client);
    assert_int_equal(st.subscribe_entries, n);
    assert_int_equal(st.subscribe_bytes, n * REC_LEN);
    assert_int_equal(st.subscribe_lag, 0); /* everything received was delivered */
    varlog_subscription_close(&sub);
    st = get_stats(f.client);
    assert_int_equal(st.subscriptions, 0);
    assert_int_equal(st.subscribe_entries, n); /* a closed subscription's entries stay */
    assert_int_equal(st.subscribe_bytes, n * REC_LEN);
    cf_stop(&f);
}

/* ---- the periodic JSON ---------------------------------------------------------------------- */

typedef struct emits {
    pthread_mutex_t mu;
    long count;
    long wrong_thread;
    long after_destroy; /* callbacks that began after destroy returned */
    atomic_bool destroyed;
    char *last; /* the last document */
} emits_t;

static void on_stats(const char *json, size_t len, void *opaque)
{
    emits_t *e = opaque;
    char name[32] = "";
    pthread_getname_np(pthread_self(), name, sizeof(name));
    bool destroyed = atomic_load(&e->destroyed);
    pthread_mutex_lock(&e->mu);
    e->count++;
    if (strcmp(name, "varlog-stats") != 0)
        e->wrong_thread++;
    if (destroyed)
        e->after_destroy++;
    free(e->last);
    e->last = strndup(json, len);
    pthread_mutex_unlock(&e->mu);
}

static void set_stats_cb(varlog_conf_t *conf, void *arg)
{
    varlog_conf_set_stats_cb(conf, on_stats, arg);
}

/* One documented field: its path ("a", "a.b", "a[].b") and type. */
typedef struct field {
    char path[96];
    char type[16];
} field_t;

typedef struct fields {
    field_t f[128];
    size_t n;
} fields_t;

static void fields_add(fields_t *fs, const char *path, const char *type)
{
    assert_true(fs->n < 128);
    snprintf(fs->f[fs->n].path, sizeof(fs->f[0].path), "%s", path);
    snprintf(fs->f[fs->n].type, sizeof(fs->f[0].type), "%s", type);
    fs->n++;
}

static const field_t *fields_find(const fields_t *fs, const char *path)
{
    for (size_t i = 0; i < fs->n; i++) {
        if (strcmp(fs->f[i].path, path) == 0)
            return &fs->f[i];
    }
    return NULL;
}

/* The rows between the schema markers of docs/STATISTICS.md: | `path` | type | ... */
static void read_doc_fields(fields_t *fs)
{
    const char *path = VARLOG_SOURCE_DIR "/docs/STATISTICS.md";
    FILE *fp = fopen(path, "r");
    if (!fp)
        fail_msg("cannot open %s", path);
    char line[1024];
    bool in = false;
    while (fgets(line, sizeof(line), fp)) {
        if (strstr(line, "<!-- schema:begin -->")) {
            in = true;
            continue;
        }
        if (strstr(line, "<!-- schema:end -->"))
            break;
        if (!in || strncmp(line, "| `", 3) != 0)
            continue;
        char name[96], type[16];
        if (sscanf(line, "| `%95[^`]` | %15[a-z] |", name, type) != 2)
            fail_msg("unreadable schema row: %s", line);
        assert_null(fields_find(fs, name)); /* documented once */
        fields_add(fs, name, type);
    }
    fclose(fp);
    assert_true(fs->n >= 10);
}

static const char *json_type(const cJSON *j)
{
    if (cJSON_IsNumber(j))
        return "integer";
    if (cJSON_IsObject(j))
        return "object";
    if (cJSON_IsArray(j))
        return "array";
    if (cJSON_IsString(j))
        return "string";
    return "other";
}

/* Every field of obj under prefix, arrays' elements as "name[]". */
static void collect_json(fields_t *fs, const cJSON *obj, const char *prefix)
{
    for (const cJSON *m = obj->child; m; m = m->next) {
        char path[96];
        snprintf(path, sizeof(path), "%s%s", prefix, m->string);
        if (cJSON_IsNumber(m) && m->valuedouble != (double)(int64_t)m->valuedouble)
            fail_msg("%s is not an integer", path);
        if (!fields_find(fs, path))
            fields_add(fs, path, json_type(m));
        char sub[100];
        if (cJSON_IsObject(m)) {
            snprintf(sub, sizeof(sub), "%s.", path);
            collect_json(fs, m, sub);
        } else if (cJSON_IsArray(m)) {
            snprintf(sub, sizeof(sub), "%s[].", path);
            for (const cJSON *el = m->child; el; el = el->next) {
                assert_true(cJSON_IsObject(el));
                collect_json(fs, el, sub);
            }
        }
    }
}

typedef struct doc_wait {
    emits_t *e;
    uint64_t records; /* appended_records the document must show */
    long count_above;
} doc_wait_t;

static bool doc_shows(void *arg)
{
    doc_wait_t *w = arg;
    pthread_mutex_lock(&w->e->mu);
    bool ok = false;
    if (w->e->count > w->count_above && w->e->last) {
        cJSON *j = cJSON_Parse(w->e->last);
        const cJSON *a = j ? cJSON_GetObjectItemCaseSensitive(j, "appended_records") : NULL;
        ok = a && cJSON_IsNumber(a) && (uint64_t)a->valuedouble == w->records;
        cJSON_Delete(j);
    }
    pthread_mutex_unlock(&w->e->mu);
    return ok;
}

static void test_periodic_json_matches_doc(void **state)
{
    (void)state;
    emits_t e = {.count = 0};
    pthread_mutex_init(&e.mu, NULL);
    atomic_init(&e.destroyed, false);
    /* Earlier tests' joined threads may still be listed for a moment. */
    assert_int_equal(test_await_thread_count_named("varlog-stats", 0, cf_wait_bound_ms()), 0);
    client_fixture_t f;
    cf_start_adjusted(&f, 1, 2, set_stats_cb, &e, "stats.interval.ms", "20", NULL);
    assert_int_equal(test_thread_count_named("varlog-stats"), 1);

    sink_t s;
    sink_init(&s);
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(f.client, 1, 0, &app), VARLOG_OK);
    for (int i = 0; i < 20; i++)
        append_one(app, &s, 'j');
    assert_int_equal(varlog_appender_flush(app, -1, NULL), VARLOG_OK);
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, 21, &sub), VARLOG_OK);

    /* A document taken after the appends and the subscribe: every field is there,
     * log_streams has elements. One emit may be under way, its snapshot taken before the
     * subscribe: the one after it is the first that must show the subscription. */
    pthread_mutex_lock(&e.mu);
    long emitted = e.count;
    pthread_mutex_unlock(&e.mu);
    doc_wait_t w = {.e = &e, .records = 20, .count_above = emitted + 1};
    assert_true(test_wait_until(doc_shows, &w, cf_wait_bound_ms()));
    fields_t doc = {.n = 0}, got = {.n = 0};
    read_doc_fields(&doc);
    pthread_mutex_lock(&e.mu);
    cJSON *j = cJSON_Parse(e.last);
    pthread_mutex_unlock(&e.mu);
    assert_non_null(j);
    assert_true(cJSON_IsObject(j));
    collect_json(&got, j, "");
    for (size_t i = 0; i < got.n; i++) {
        const field_t *d = fields_find(&doc, got.f[i].path);
        if (!d)
            fail_msg("the JSON has %s, which docs/STATISTICS.md does not document", got.f[i].path);
        if (strcmp(d->type, got.f[i].type) != 0)
            fail_msg("%s is %s in the JSON, %s in the doc", d->path, got.f[i].type, d->type);
    }
    for (size_t i = 0; i < doc.n; i++) {
        if (!fields_find(&got, doc.f[i].path))
            fail_msg("docs/STATISTICS.md documents %s, which the JSON lacks", doc.f[i].path);
    }
    /* The document says what the struct says. */
    const cJSON *lat = cJSON_GetObjectItemCaseSensitive(j, "append_latency_us");
    assert_int_equal((uint64_t)cJSON_GetObjectItemCaseSensitive(lat, "count")->valuedouble, 20);
    assert_true(cJSON_GetObjectItemCaseSensitive(lat, "p50")->valuedouble > 0);
    assert_true(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "log_streams")) >= 1);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "subscriptions")->valuedouble, 1);
    cJSON_Delete(j);

    /* The pull form of the same document. */
    char *json = NULL;
    size_t len = 0;
    assert_int_equal(varlog_stats_json(f.client, &json, &len), VARLOG_OK);
    assert_int_equal(strlen(json), len);
    cJSON *again = cJSON_Parse(json);
    assert_non_null(again);
    cJSON_Delete(again);
    varlog_stats_json_free(json);
    assert_int_equal(varlog_stats_json(NULL, &json, NULL), VARLOG_ERR_INVALID_ARG);

    /* It keeps coming at the interval, on its own thread. */
    pthread_mutex_lock(&e.mu);
    w.count_above = e.count + 2;
    pthread_mutex_unlock(&e.mu);
    assert_true(test_wait_until(doc_shows, &w, cf_wait_bound_ms()));

    varlog_subscription_close(&sub);
    assert_int_equal(varlog_appender_close(&app, -1), VARLOG_OK);
    varlog_client_destroy(f.client);
    f.client = NULL;
    atomic_store(&e.destroyed, true);
    /* Joined: no thread left, and no callback after destroy returned (several intervals). */
    assert_int_equal(test_await_thread_count_named("varlog-stats", 0, cf_wait_bound_ms()), 0);
    pthread_mutex_lock(&e.mu);
    long count = e.count;
    pthread_mutex_unlock(&e.mu);
    /* An absence has no event to wait for: 100 ms (several intervals) is the window in which
     * a stray callback would show. The join above already proved the thread gone. */
    struct timespec nap = {.tv_sec = 0, .tv_nsec = 100 * 1000000};
    nanosleep(&nap, NULL);
    pthread_mutex_lock(&e.mu);
    assert_int_equal(e.count, count);
    assert_int_equal(e.after_destroy, 0);
    assert_int_equal(e.wrong_thread, 0);
    assert_true(e.count >= 3);
    free(e.last);
    pthread_mutex_unlock(&e.mu);
    cf_stop(&f);
    sink_destroy(&s);
    pthread_mutex_destroy(&e.mu);
}

typedef struct stats_destroyer {
    _Atomic(varlog_client_t *) client; /* NULL until the test has it */
    pthread_mutex_t mu;
    bool tried;
    char text[256];
} stats_destroyer_t;

static void destroy_from_stats(const char *json, size_t len, void *opaque)
{
    (void)json;
    (void)len;
    stats_destroyer_t *d = opaque;
    varlog_client_t *c = atomic_load(&d->client);
    pthread_mutex_lock(&d->mu);
    bool tried = d->tried;
    pthread_mutex_unlock(&d->mu);
    if (!c || tried)
        return;
    varlog_client_destroy(c); /* refused: it would join this thread */
    pthread_mutex_lock(&d->mu);
    snprintf(d->text, sizeof d->text, "%s", varlog_last_error());
    d->tried = true;
    pthread_mutex_unlock(&d->mu);
}

static void set_destroy_cb(varlog_conf_t *conf, void *arg)
{
    varlog_conf_set_stats_cb(conf, destroy_from_stats, arg);
}

static bool destroy_tried(void *arg)
{
    stats_destroyer_t *d = arg;
    pthread_mutex_lock(&d->mu);
    bool tried = d->tried;
    pthread_mutex_unlock(&d->mu);
    return tried;
}

/* varlog_client_destroy from the stats callback would join the thread it runs on: refused
 * with STATE, and the client stays usable and is destroyed later as usual. */
static void test_destroy_from_stats_callback_refused(void **state)
{
    (void)state;
    stats_destroyer_t d = {.tried = false};
    atomic_init(&d.client, NULL);
    pthread_mutex_init(&d.mu, NULL);
    client_fixture_t f;
    cf_start_adjusted(&f, 1, 1, set_destroy_cb, &d, "stats.interval.ms", "10", NULL);
    atomic_store(&d.client, f.client);
    assert_true(test_wait_until(destroy_tried, &d, cf_wait_bound_ms()));
    if (!strstr(d.text, "own threads"))
        fail_msg("destroy from the stats callback: last error '%s'", d.text);
    char buf[REC_LEN] = {0};
    varlog_record_t r = {buf, sizeof(buf)};
    assert_int_equal(varlog_append(f.client, 1, &r, 1, -1, NULL, NULL), VARLOG_OK);
    cf_stop(&f);
    pthread_mutex_destroy(&d.mu);
}

static void test_no_thread_without_interval(void **state)
{
    (void)state;
    emits_t e = {.count = 0};
    pthread_mutex_init(&e.mu, NULL);
    atomic_init(&e.destroyed, false);
    /* Earlier tests' joined threads may still be listed for a moment. */
    int before = test_await_thread_count_named("varlog-stats", 0, cf_wait_bound_ms());
    client_fixture_t f;
    /* A callback but interval 0 (the default). */
    cf_start_adjusted(&f, 1, 1, set_stats_cb, &e, NULL);
    assert_int_equal(test_thread_count_named("varlog-stats"), before);
    char buf[REC_LEN] = {0};
    varlog_record_t r = {buf, sizeof(buf)};
    assert_int_equal(varlog_append(f.client, 1, &r, 1, -1, NULL, NULL), VARLOG_OK);
    assert_int_equal(get_stats(f.client).appended_calls, 1); /* the pull form works */
    cf_stop(&f);
    /* An interval but no callback. */
    cf_start(&f, 1, 1, "stats.interval.ms", "10", NULL);
    assert_int_equal(test_thread_count_named("varlog-stats"), before);
    cf_stop(&f);
    pthread_mutex_lock(&e.mu);
    assert_int_equal(e.count, 0);
    pthread_mutex_unlock(&e.mu);
    pthread_mutex_destroy(&e.mu);
}

static void test_latency_off(void **state)
{
    (void)state;
    client_fixture_t f;
    cf_start(&f, 1, 1, "stats.latency", "false", NULL);
    sink_t s;
    sink_init(&s);
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(f.client, 1, 1, &app), VARLOG_OK);
    for (int i = 0; i < 10; i++)
        append_one(app, &s, 'l');
    assert_int_equal(varlog_appender_flush(app, -1, NULL), VARLOG_OK);
    varlog_stats_t st = get_stats(f.client);
    assert_int_equal(st.appended_calls, 10); /* counted, not timed */
    assert_int_equal(st.append_latency.count, 0);
    assert_int_equal(st.append_latency.max_us, 0);
    assert_int_equal(varlog_appender_close(&app, -1), VARLOG_OK);
    cf_stop(&f);
    sink_destroy(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pull_after_appends),
        cmocka_unit_test(test_gauges_while_held),
        cmocka_unit_test(test_failures_by_outcome),
        cmocka_unit_test(test_queue_full_and_retries),
        cmocka_unit_test(test_reconnects),
        cmocka_unit_test(test_destroy_from_stats_callback_refused),
        cmocka_unit_test(test_subscribe_entries_and_lag),
        cmocka_unit_test(test_periodic_json_matches_doc),
        cmocka_unit_test(test_no_thread_without_interval),
        cmocka_unit_test(test_latency_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
