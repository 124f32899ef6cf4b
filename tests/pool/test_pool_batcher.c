/* Lookup batcher: flush on size, flush on wait, split on span, single-key fallbacks,
 * failure fan-out with per-member retries, per-caller results, size 0 = off. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pool_test_util.h"
#include "test_support.h"
#include "vq/vq.h"

typedef struct store {
    atomic_int batch_calls, single_calls, fail_batches; /* fail this many batch calls */
    atomic_int last_batch_size;
    long missing_key; /* reported as not found */
} store_t;

static int lookup_one(void *ctx, vq_batch_item_t *it)
{
    store_t *s = ctx;
    atomic_fetch_add(&s->single_calls, 1);
    long k = *(const long *)it->key;
    if (k == s->missing_key)
        return VQ_ERR_NOT_FOUND;
    *(long *)it->result = k * 10;
    return VQ_OK;
}

static int lookup_batch(void *ctx, vq_batch_item_t *const *items, size_t n)
{
    store_t *s = ctx;
    atomic_fetch_add(&s->batch_calls, 1);
    atomic_store(&s->last_batch_size, (int)n);
    if (atomic_fetch_sub(&s->fail_batches, 1) > 0)
        return VQ_ERR_USER + 7;
    for (size_t i = 1; i < n; i++)
        assert_true(items[i - 1]->bound <= items[i]->bound);
    for (size_t i = 0; i < n; i++) {
        long k = *(const long *)items[i]->key;
        if (k == s->missing_key)
            continue; /* left as VQ_ERR_NOT_FOUND */
        *(long *)items[i]->result = k * 10;
        items[i]->status = VQ_OK;
    }
    return VQ_OK;
}

typedef struct caller {
    vq_batcher_t *b;
    pthread_barrier_t *go;
    long key, out;
    int64_t bound;
    bool has_bound;
    int status;
} caller_t;

static void *call(void *arg)
{
    caller_t *c = arg;
    if (c->go)
        pthread_barrier_wait(c->go);
    vq_batch_item_t it = {
        .key = &c->key, .bound = c->bound, .has_bound = c->has_bound, .result = &c->out};
    c->status = vq_batcher_lookup(c->b, &it);
    return NULL;
}

static vq_batcher_t *make(store_t *s, size_t size, int64_t wait_ns, int64_t span)
{
    memset(s, 0, sizeof(*s));
    atomic_store(&s->fail_batches, 0);
    s->missing_key = -1;
    vq_batcher_opts_t o;
    vq_batcher_opts_init(&o);
    o.size = size;
    if (wait_ns >= 0)
        o.wait_ns = wait_ns;
    if (span >= 0)
        o.max_span = span;
    o.lookup_one = lookup_one;
    o.lookup_batch = lookup_batch;
    o.ctx = s;
    vq_batcher_t *b = NULL;
    assert_int_equal(vq_batcher_create(&o, &b), VQ_OK);
    return b;
}

/* Runs n callers at once (released together by a barrier) and joins them. */
static void run_callers(caller_t *c, int n)
{
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)n);
    pthread_t th[16];
    for (int i = 0; i < n; i++) {
        c[i].go = &go;
        assert_int_equal(pthread_create(&th[i], NULL, call, &c[i]), 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);
}

/* A full batch flushes at once, long before its 30 s wait, in one call. */
static void test_flush_on_size(void **state)
{
    (void)state;
    store_t s;
    vq_batcher_t *b = make(&s, 4, 30000 * MS, -1);
    caller_t c[4];
    for (int i = 0; i < 4; i++)
        c[i] = (caller_t){.b = b, .key = i + 1, .bound = 100 + i, .has_bound = true};
    int64_t t0 = test_now_ms();
    run_callers(c, 4);
    assert_true(test_now_ms() - t0 < 10000);
    assert_int_equal(atomic_load(&s.batch_calls), 1);
    assert_int_equal(atomic_load(&s.last_batch_size), 4);
    assert_int_equal(atomic_load(&s.single_calls), 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(c[i].status, VQ_OK);
        assert_int_equal(c[i].out, (i + 1) * 10); /* each caller gets its own result */
    }
    vq_batcher_stats_t st;
    vq_batcher_stats(b, &st);
    assert_int_equal(st.size_flushes, 1);
    assert_int_equal(st.wait_flushes, 0);
    assert_int_equal(vq_batcher_destroy(b), VQ_OK);
}

/* Fewer keys than the size flush when the wait has passed since the first key. */
static void test_flush_on_wait(void **state)
{
    (void)state;
    store_t s;
    vq_batcher_t *b = make(&s, 100, 300 * MS, -1);
    caller_t c[3];
    for (int i = 0; i < 3; i++)
        c[i] = (caller_t){.b = b, .key = i + 1, .bound = 5, .has_bound = true};
    int64_t t0 = test_now_ms();
    run_callers(c, 3);
    int64_t took = test_now_ms() - t0;
    assert_true(took >= 299 && took < 10000);
    assert_int_equal(atomic_load(&s.batch_calls), 1);
    assert_int_equal(atomic_load(&s.last_batch_size), 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(c[i].out, (i + 1) * 10);
    vq_batcher_stats_t st;
    vq_batcher_stats(b, &st);
    assert_int_equal(st.wait_flushes, 1);
    assert_int_equal(st.size_flushes, 0);
    assert_int_equal(vq_batcher_destroy(b), VQ_OK);
}

/* Bounds further apart than the span go to separate calls; a group of one goes single. */
static void test_split_on_span(void **state)
{
    (void)state;
    store_t s;
    vq_batcher_t *b = make(&s, 4, 30000 * MS, 100);
    int64_t bounds[4] = {1040, 0, 1000, 50}; /* groups {0, 50} and {1000, 1040} */
    caller_t c[4];
    for (int i = 0; i < 4; i++)
        c[i] = (caller_t){.b = b, .key = i + 1, .bound = bounds[i], .has_bound = true};
    run_callers(c, 4);
    assert_int_equal(atomic_load(&s.batch_calls), 2);
    assert_int_equal(atomic_load(&s.single_calls), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(c[i].out, (i + 1) * 10);
    assert_int_equal(vq_batcher_destroy(b), VQ_OK);

    b = make(&s, 4, 30000 * MS, 100);
    int64_t bounds2[4] = {0, 10, 5000, 20}; /* {0, 10, 20} batch, {5000} single */
    for (int i = 0; i < 4; i++)
        c[i] = (caller_t){.b = b, .key = i + 1, .bound = bounds2[i], .has_bound = true};
    run_callers(c, 4);
    assert_int_equal(atomic_load(&s.batch_calls), 1);
    assert_int_equal(atomic_load(&s.last_batch_size), 3);
    assert_int_equal(atomic_load(&s.single_calls), 1);
    for (int i = 0; i < 4; i++)
        assert_int_equal(c[i].out, (i + 1) * 10);
    assert_int_equal(vq_batcher_destroy(b), VQ_OK);
}

/* A batch of one, and a key without a bound, use the single-key lookup. */
static void test_single_key_paths(void **state)
{
    (void)state;
    store_t s;
    vq_batcher_t *b = make(&s, 10, 20 * MS, -1);
    caller_t one = {.b = b, .key = 7, .bound = 1, .has_bound = true};
    call(&one);
    assert_int_equal(one.status, VQ_OK);
    assert_int_equal(one.out, 70);
    assert_int_equal(atomic_load(&s.single_calls), 1);
    caller_t unbound = {.b = b, .key = 8};
    call(&unbound);
    assert_int_equal(unbound.out, 80);
    assert_int_equal(atomic_load(&s.single_calls), 2);
    assert_int_equal(atomic_load(&s.batch_calls), 0);
    assert_int_equal(vq_batcher_destroy(b), VQ_OK);
}

/* Size 0 turns batching off: every key goes single, at once. */
static void test_size_zero_is_off(void **state)
{
    (void)state;
    store_t s;
    vq_batcher_t *b = make(&s, 0, 30000 * MS, -1);
    caller_t c[4];
    for (int i = 0; i < 4; i++)
        c[i] = (caller_t){.b = b, .key = i + 1, .bound = 1, .has_bound = true};
    int64_t t0 = test_now_ms();
    run_callers(c, 4);
    assert_true(test_now_ms() - t0 < 10000);
    assert_int_equal(atomic_load(&s.single_calls), 4);
    assert_int_equal(atomic_load(&s.batch_calls), 0);
    assert_int_equal(vq_batcher_destroy(b), VQ_OK);
}

/* Per-key outcomes: a key the store lacks fails alone. */
static void test_missing_key_fails_alone(void **state)
{
    (void)state;
    store_t s;
    vq_batcher_t *b = make(&s, 4, 30000 * MS, -1);
    s.missing_key = 3;
    caller_t c[4];
    for (int i = 0; i < 4; i++)
        c[i] = (caller_t){.b = b, .key = i + 1, .bound = 1, .has_bound = true};
    run_callers(c, 4);
    for (int i = 0; i < 4; i++) {
        if (c[i].key == 3)
            assert_int_equal(c[i].status, VQ_ERR_NOT_FOUND);
        else
            assert_int_equal(c[i].status, VQ_OK);
    }
    assert_int_equal(vq_batcher_destroy(b), VQ_OK);
}

/* A failed batch fails every member; each member, running as an engine task, retries on
 * its own through its retry policy and then succeeds. */
typedef struct member {
    vq_batcher_t *b;
    long key, out;
    atomic_int attempts;
    int first_status, result;
    tcount_t *done;
} member_t;

static int member_task(vq_ctx_t *ctx, void *arg)
{
    (void)ctx;
    member_t *m = arg;
    int n = atomic_fetch_add(&m->attempts, 1);
    vq_batch_item_t it = {.key = &m->key, .bound = 1, .has_bound = true, .result = &m->out};
    int st = vq_batcher_lookup(m->b, &it);
    if (n == 0)
        m->first_status = st;
    return st;
}

static void member_after(void *arg, int r)
{
    member_t *m = arg;
    m->result = r;
    tc_add(m->done, 1);
}

static void test_failed_batch_fans_out_and_retries(void **state)
{
    (void)state;
    store_t s;
    /* A wait long enough that all four meet even when threads start slowly (valgrind). */
    vq_batcher_t *b = make(&s, 4, 5000 * MS, -1);
    atomic_store(&s.fail_batches, 1);
    vq_engine_opts_t o;
    vq_engine_opts_init(&o);
    o.workers = 4;
    o.logger = vq_logger_discard();
    vq_engine_t *e;
    assert_int_equal(vq_engine_create(&o, &e), VQ_OK);
    tcount_t done;
    tc_init(&done);
    member_t m[4];
    for (int i = 0; i < 4; i++) {
        memset(&m[i], 0, sizeof(m[i]));
        m[i].b = b;
        m[i].key = i + 1;
        m[i].done = &done;
        vq_task_spec_t t = {.handler = member_task, .arg = &m[i], .after = member_after};
        t.retry.count = 3;
        t.retry.delay_ns = 1 * MS;
        assert_int_equal(vq_engine_submit(e, &t), VQ_OK);
    }
    assert_int_equal(vq_engine_start(e), VQ_OK); /* all four meet in the first batch */
    assert_true(tc_wait_ge(&done, 4, 10000));
    for (int i = 0; i < 4; i++) {
        assert_int_equal(m[i].first_status, VQ_ERR_USER + 7);
        assert_int_equal(m[i].result, VQ_OK);
        assert_int_equal(atomic_load(&m[i].attempts), 2);
        assert_int_equal(m[i].out, (i + 1) * 10);
    }
    vq_batcher_stats_t st;
    vq_batcher_stats(b, &st);
    assert_int_equal(st.failed_batches, 1);
    assert_int_equal(vq_metrics_retries(vq_engine_metrics(e)), 4);
    assert_int_equal(vq_engine_release(e), VQ_OK);
    assert_int_equal(vq_batcher_destroy(b), VQ_OK);
    tc_destroy(&done);
}

static void test_size_capped_and_bad_options(void **state)
{
    (void)state;
    store_t s;
    vq_batcher_t *b = make(&s, 1000, 20 * MS, -1);
    caller_t c = {.b = b, .key = 1, .bound = 1, .has_bound = true};
    call(&c);
    assert_int_equal(c.out, 10);
    assert_int_equal(vq_batcher_destroy(b), VQ_OK);
    vq_batcher_opts_t o;
    vq_batcher_opts_init(&o);
    assert_int_equal(o.wait_ns, 50 * MS);
    vq_batcher_t *x;
    assert_int_equal(vq_batcher_create(&o, &x), VQ_ERR_INVALID); /* no lookup */
    o.lookup_one = lookup_one;
    o.size = 10;
    assert_int_equal(vq_batcher_create(&o, &x), VQ_ERR_INVALID); /* batch lookup needed */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flush_on_size),
        cmocka_unit_test(test_flush_on_wait),
        cmocka_unit_test(test_split_on_span),
        cmocka_unit_test(test_single_key_paths),
        cmocka_unit_test(test_size_zero_is_off),
        cmocka_unit_test(test_missing_key_fails_alone),
        cmocka_unit_test(test_failed_batch_fans_out_and_retries),
        cmocka_unit_test(test_size_capped_and_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
