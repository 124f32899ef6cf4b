/* varlog_appender_append_ref (varlog/appender.h): records' bytes sent from where the caller has
 * them. What is stored is exactly what was referenced, beside copied records in the same
 * batches; release runs once per call, after its callback, and not before gRPC let go of the
 * request: rpc_stream_send_slices is wrapped at link time to keep a reference to every piece
 * of the requests it sends, which holds the releases back past the callbacks, the flush and
 * the close, until the test drops them. The suites of the appender run through it too
 * (append_ref_wrap.c, their "ref" variants). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <grpc/slice.h>

#include "appender_internal.h"
#include "appender_test_util.h"
#include "client_fixture.h"
#include "rpc_client.h"
#include "test_support.h"
#include "varlog/appender.h"

/* ---- gRPC's references, held on demand -------------------------------------------------- */

varlog_err_t __real_rpc_stream_send_slices(rpc_stream_t *s, const grpc_slice *slices, size_t n);
varlog_err_t __wrap_rpc_stream_send_slices(rpc_stream_t *s, const grpc_slice *slices, size_t n);

static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static bool hold_refs;
static grpc_slice held[4096];
static size_t n_held;

varlog_err_t __wrap_rpc_stream_send_slices(rpc_stream_t *s, const grpc_slice *slices, size_t n)
{
    pthread_mutex_lock(&held_mu);
    for (size_t i = 0; hold_refs && i < n && n_held < sizeof(held) / sizeof(held[0]); i++)
        held[n_held++] = grpc_slice_ref(slices[i]);
    pthread_mutex_unlock(&held_mu);
    return __real_rpc_stream_send_slices(s, slices, n);
}

static size_t drop_held(void)
{
    pthread_mutex_lock(&held_mu);
    size_t n = n_held;
    for (size_t i = 0; i < n_held; i++)
        grpc_slice_unref(held[i]);
    n_held = 0;
    hold_refs = false;
    pthread_mutex_unlock(&held_mu);
    return n;
}

/* ---- calls -------------------------------------------------------------------------------- */

#define MAX_CALLS 64
#define MAX_RECS 4

typedef struct ref_call {
    atomic_int cbs, releases;
    atomic_bool released_before_cb;
    varlog_err_t err;
    varlog_entry_meta_t first;
    size_t n;
    size_t len[MAX_RECS];
    uint8_t *data[MAX_RECS]; /* referenced (or copied) records, freed by the test */
    pthread_t release_thread;
} ref_call_t;

static ref_call_t calls[MAX_CALLS];
static atomic_long callbacks, releases;

static void on_result(const varlog_append_result_t *r, void *opaque)
{
    ref_call_t *c = opaque;
    c->err = r->err;
    if (r->err == VARLOG_OK)
        c->first = r->metas[0];
    atomic_fetch_add(&c->cbs, 1);
    atomic_fetch_add(&callbacks, 1);
}

static void on_release(void *opaque)
{
    ref_call_t *c = opaque;
    if (atomic_load(&c->cbs) == 0)
        atomic_store(&c->released_before_cb, true);
    c->release_thread = pthread_self();
    atomic_fetch_add(&c->releases, 1);
    atomic_fetch_add(&releases, 1);
}

/* Record j of call i: a size that crosses pages and frames now and then, and bytes that name
 * the call and the record. */
static size_t rec_len(size_t i, size_t j)
{
    static const size_t lens[] = {1, 7, 300, 4096, 5000, 17000, 64};
    return lens[(i * 3 + j) % (sizeof(lens) / sizeof(lens[0]))];
}

/* big: every record at least APP_REF_MIN_BYTES, all of them referenced. */
static void fill_call(ref_call_t *c, size_t i, size_t n, bool big)
{
    memset(c, 0, sizeof(*c));
    c->n = n;
    for (size_t j = 0; j < n; j++) {
        c->len[j] = rec_len(i, j) + (big ? APP_REF_MIN_BYTES : 0);
        c->data[j] = malloc(c->len[j]);
        assert_non_null(c->data[j]);
        for (size_t k = 0; k < c->len[j]; k++)
            c->data[j][k] = (uint8_t)(i * 31 + j * 7 + k);
    }
}

static varlog_err_t append_call(varlog_appender_t *app, size_t i, bool by_ref)
{
    ref_call_t *c = &calls[i];
    varlog_record_t recs[MAX_RECS];
    for (size_t j = 0; j < c->n; j++)
        recs[j] = (varlog_record_t){.data = c->data[j], .len = c->len[j]};
    return by_ref ? varlog_appender_append_ref(app, recs, c->n, -1, on_release, on_result, c)
                  : varlog_appender_append(app, recs, c->n, -1, on_result, c);
}

static void free_calls(size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < calls[i].n; j++)
            free(calls[i].data[j]);
}

typedef struct stored {
    size_t n_calls, seen, bad;
} stored_t;

/* Every stored entry is record j of a call at the position its callback said, with its bytes. */
static void stored_visit(void *arg, const varlog_entry_meta_t *m, const void *data, size_t len)
{
    stored_t *st = arg;
    st->seen++;
    for (size_t i = 0; i < st->n_calls; i++) {
        const ref_call_t *c = &calls[i];
        if (c->err != VARLOG_OK || c->first.log_stream_id != m->log_stream_id ||
            m->glsn < c->first.glsn || m->glsn >= c->first.glsn + c->n)
            continue;
        size_t j = (size_t)(m->glsn - c->first.glsn);
        if (len != c->len[j] || memcmp(data, c->data[j], len) != 0) {
            atu_note_bad("glsn %llu: %zu bytes stored, record %zu of call %zu has %zu (or "
                         "other bytes)",
                         (unsigned long long)m->glsn, len, j, i, c->len[j]);
            st->bad++;
        }
        return;
    }
    atu_note_bad("glsn %llu stored, no call has it", (unsigned long long)m->glsn);
    st->bad++;
}

static bool releases_reach(void *arg)
{
    return atomic_load(&releases) >= *(long *)arg;
}

/* Counters at zero, a server of one topic with log_streams, a client with the pair name=value
 * and an appender for log stream ls (0: topic-wide). */
static varlog_appender_t *start(client_fixture_t *f, int32_t log_streams, int32_t ls,
                                const char *name, const char *value)
{
    atomic_store(&callbacks, 0);
    atomic_store(&releases, 0);
    cf_start(f, 1, log_streams, name, value, NULL);
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(f->client, 1, ls, &app), VARLOG_OK);
    return app;
}

/* Walks log streams 1..log_streams (stored_visit) and returns what it saw. */
static stored_t check_stored(client_fixture_t *f, int32_t log_streams, size_t n_calls)
{
    stored_t st = {.n_calls = n_calls};
    for (int32_t ls = 1; ls <= log_streams; ls++)
        cf_stored_each(f->srv, 1, ls, stored_visit, &st);
    return st;
}

/* ---- tests -------------------------------------------------------------------------------- */

/* Referenced and copied calls, interleaved in the same batches of a topic-wide appender over
 * two log streams, with records referenced and records copied for their size in the same
 * calls: every record stored once, with its bytes, where its callback said; one release per
 * call of varlog_appender_append_ref, after its callback; none for the others. */
static void test_ref_stored_as_referenced(void **state)
{
    (void)state;
    client_fixture_t f;
    varlog_appender_t *app = start(&f, 2, 0, "appender.batch.max.records", "16");
    long by_ref = 0;
    for (size_t i = 0; i < MAX_CALLS; i++) {
        fill_call(&calls[i], i, 1 + i % MAX_RECS, false);
        bool ref = i % 3 != 1;
        by_ref += ref;
        assert_int_equal(append_call(app, i, ref), VARLOG_OK);
    }
    assert_int_equal(varlog_appender_flush(app, cf_wait_bound_ms(), NULL), VARLOG_OK);
    assert_true(test_wait_until(releases_reach, &by_ref, cf_wait_bound_ms()));
    assert_int_equal(varlog_appender_close(&app, cf_wait_bound_ms()), VARLOG_OK);
    assert_int_equal(atomic_load(&callbacks), MAX_CALLS);
    assert_int_equal(atomic_load(&releases), by_ref);
    for (size_t i = 0; i < MAX_CALLS; i++) {
        assert_int_equal(calls[i].err, VARLOG_OK);
        assert_int_equal(atomic_load(&calls[i].cbs), 1);
        assert_int_equal(atomic_load(&calls[i].releases), i % 3 != 1 ? 1 : 0);
        assert_false(atomic_load(&calls[i].released_before_cb));
    }
    stored_t st = check_stored(&f, 2, MAX_CALLS);
    size_t records = 0;
    for (size_t i = 0; i < MAX_CALLS; i++)
        records += calls[i].n;
    assert_int_equal(st.seen, records);
    assert_int_equal(st.bad, 0);
    atu_assert_nothing_bad();
    cf_stop(&f);
    free_calls(MAX_CALLS);
}

/* While gRPC holds a reference to any piece of a request, its calls' releases wait: past
 * their callbacks, the flush and the close; they run when it lets go, on the thread that
 * drops the last reference. */
static void test_ref_release_waits_for_grpc(void **state)
{
    (void)state;
    client_fixture_t f;
    varlog_appender_t *app = start(&f, 1, 1, "appender.batch.max.records", "8");
    pthread_mutex_lock(&held_mu);
    hold_refs = true;
    pthread_mutex_unlock(&held_mu);
    enum { N = 20 };
    for (size_t i = 0; i < N; i++) {
        fill_call(&calls[i], i, 1 + i % 2, true);
        assert_int_equal(append_call(app, i, true), VARLOG_OK);
    }
    assert_int_equal(varlog_appender_flush(app, cf_wait_bound_ms(), NULL), VARLOG_OK);
    assert_int_equal(atomic_load(&callbacks), N);
    assert_int_equal(atomic_load(&releases), 0);
    assert_int_equal(varlog_appender_close(&app, cf_wait_bound_ms()), VARLOG_OK);
    assert_int_equal(atomic_load(&releases), 0);
    assert_true(drop_held() > 0);
    assert_int_equal(atomic_load(&releases), N); /* the last reference was ours */
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(atomic_load(&calls[i].releases), 1);
        assert_false(atomic_load(&calls[i].released_before_cb));
        assert_true(pthread_equal(calls[i].release_thread, pthread_self()));
    }
    assert_int_equal(check_stored(&f, 1, N).bad, 0);
    atu_assert_nothing_bad();
    cf_stop(&f);
    free_calls(N);
}

/* A NULL release is refused, naming it; a refused call gets neither callback nor release. */
static void test_ref_bad_input(void **state)
{
    (void)state;
    client_fixture_t f;
    varlog_appender_t *app = start(&f, 1, 1, "append.record.max.bytes", "64");
    uint8_t big[65] = {0};
    varlog_record_t r = {.data = big, .len = 8};
    assert_int_equal(varlog_appender_append_ref(app, &r, 1, -1, NULL, on_result, &calls[0]),
                     VARLOG_ERR_INVALID_ARG);
    assert_non_null(strstr(varlog_last_error(), "release"));
    r.len = sizeof(big);
    assert_int_equal(varlog_appender_append_ref(app, &r, 1, -1, on_release, on_result, &calls[0]),
                     VARLOG_ERR_INVALID_ARG);
    assert_int_equal(varlog_appender_append_ref(NULL, &r, 1, -1, on_release, on_result, &calls[0]),
                     VARLOG_ERR_INVALID_ARG);
    assert_int_equal(varlog_appender_close(&app, cf_wait_bound_ms()), VARLOG_OK);
    assert_int_equal(atomic_load(&callbacks), 0);
    assert_int_equal(atomic_load(&releases), 0);
    cf_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_stored_as_referenced),
        cmocka_unit_test(test_ref_release_waits_for_grpc),
        cmocka_unit_test(test_ref_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
