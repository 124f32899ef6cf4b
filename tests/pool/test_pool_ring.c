/* Ring (min capacity, FIFO under wraparound, limits, hysteresis), backoff and object pool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "pool_test_util.h"
#include "test_support.h"
#include "vq/vq.h"

static uintptr_t item(size_t i)
{
    return (uintptr_t)(i + 1); /* never NULL */
}

static void push_n(vq_ring_t *r, size_t from, size_t n)
{
    for (size_t i = from; i < from + n; i++)
        assert_int_equal(vq_ring_push(r, (void *)item(i)), VQ_OK);
}

static void pop_expect(vq_ring_t *r, size_t from, size_t n)
{
    for (size_t i = from; i < from + n; i++) {
        void *p = NULL;
        assert_int_equal(vq_ring_pop(r, &p), VQ_OK);
        assert_int_equal((uintptr_t)p, item(i));
    }
}

static void assert_all_slots_null(const vq_ring_t *r)
{
    for (size_t i = 0; i < vq_ring_capacity(r); i++)
        assert_null(vq_ring_slot(r, i));
}

/* Scenario RingMinCapacity 1: fill-to-N / drain cycles keep exactly N slots, FIFO order, and
 * leave every dequeued slot cleared. */
static void test_min_capacity_cycles(void **state)
{
    (void)state;
    vq_ring_t r;
    assert_int_equal(vq_ring_init(&r, 0, 64), VQ_OK);
    for (size_t cycle = 0; cycle < 10; cycle++) {
        push_n(&r, cycle * 64, 64);
        assert_int_equal(vq_ring_capacity(&r), 64);
        pop_expect(&r, cycle * 64, 64);
        assert_int_equal(vq_ring_capacity(&r), 64);
        assert_all_slots_null(&r);
    }
    assert_int_equal(r.resizes, 0);
    vq_ring_destroy(&r);
}

/* Scenario 2: partial drain then refill wraps the tail; FIFO still holds. */
static void test_fifo_under_wraparound(void **state)
{
    (void)state;
    vq_ring_t r;
    assert_int_equal(vq_ring_init(&r, 0, 8), VQ_OK);
    size_t next_in = 0, next_out = 0;
    for (int round = 0; round < 50; round++) {
        push_n(&r, next_in, 6);
        next_in += 6;
        pop_expect(&r, next_out, 4);
        next_out += 4;
        if (vq_ring_len(&r) >= 6) {
            pop_expect(&r, next_out, vq_ring_len(&r));
            next_out = next_in;
        }
    }
    pop_expect(&r, next_out, next_in - next_out);
    void *p;
    assert_int_equal(vq_ring_pop(&r, &p), VQ_ERR_EMPTY);
    assert_int_equal(vq_ring_capacity(&r), 8);
    assert_all_slots_null(&r);
    vq_ring_destroy(&r);
}

/* Scenario 3: non-power-of-two minimums are kept as given. */
static void test_min_capacity_not_power_of_two(void **state)
{
    (void)state;
    size_t mins[] = {3, 1000};
    for (size_t k = 0; k < 2; k++) {
        vq_ring_t r;
        assert_int_equal(vq_ring_init(&r, 0, mins[k]), VQ_OK);
        assert_int_equal(vq_ring_capacity(&r), mins[k]);
        for (int cycle = 0; cycle < 3; cycle++) {
            push_n(&r, 0, mins[k]);
            assert_int_equal(vq_ring_capacity(&r), mins[k]);
            pop_expect(&r, 0, mins[k]);
        }
        /* Beyond the minimum it grows, and shrinks back to exactly the minimum. */
        push_n(&r, 0, mins[k] * 3);
        assert_true(vq_ring_capacity(&r) >= mins[k] * 3);
        pop_expect(&r, 0, mins[k] * 3);
        assert_int_equal(vq_ring_capacity(&r), mins[k]);
        assert_all_slots_null(&r);
        vq_ring_destroy(&r);
    }
}

/* Scenario 4: a minimum above the queue limit is capped at the limit. */
static void test_min_capacity_capped_at_limit(void **state)
{
    (void)state;
    vq_ring_t r;
    assert_int_equal(vq_ring_init(&r, 10, 1000), VQ_OK);
    assert_int_equal(vq_ring_capacity(&r), 10);
    push_n(&r, 0, 10);
    assert_int_equal(vq_ring_push(&r, (void *)item(99)), VQ_ERR_FULL);
    assert_int_equal(vq_ring_capacity(&r), 10);
    vq_ring_destroy(&r);
}

/* Scenario 5: a minimum below the default is clamped to 2. */
static void test_min_capacity_clamped_to_default(void **state)
{
    (void)state;
    vq_ring_t r;
    assert_int_equal(vq_ring_init(&r, 0, 1), VQ_OK);
    assert_int_equal(vq_ring_capacity(&r), 2);
    vq_ring_destroy(&r);
    assert_int_equal(vq_ring_init(&r, 0, 0), VQ_OK);
    assert_int_equal(vq_ring_capacity(&r), 2);
    vq_ring_destroy(&r);
}

/* Scenario 6 and TestMaxCapacity: full is a distinct error and drops nothing; a shut-down
 * ring refuses intake, still drains, then reports closed. */
static void test_full_and_shutdown(void **state)
{
    (void)state;
    vq_ring_t r;
    assert_int_equal(vq_ring_init(&r, 2, 0), VQ_OK);
    push_n(&r, 0, 2);
    assert_int_equal(vq_ring_push(&r, (void *)item(2)), VQ_ERR_FULL);
    assert_int_equal(vq_ring_len(&r), 2);
    vq_ring_close(&r);
    assert_int_equal(vq_ring_push(&r, (void *)item(3)), VQ_ERR_SHUTDOWN);
    pop_expect(&r, 0, 2);
    void *p;
    assert_int_equal(vq_ring_pop(&r, &p), VQ_ERR_CLOSED);
    assert_int_equal(vq_ring_push(&r, NULL), VQ_ERR_INVALID);
    vq_ring_destroy(&r);
}

/* Growth doubles, stops at a non-power-of-two limit, and a full drain returns to the
 * minimum. */
static void test_grow_and_shrink(void **state)
{
    (void)state;
    vq_ring_t r;
    assert_int_equal(vq_ring_init(&r, 0, 0), VQ_OK);
    push_n(&r, 0, 1024);
    assert_int_equal(vq_ring_capacity(&r), 1024);
    assert_int_equal(r.resizes, 9); /* 4, 8, ..., 1024 */
    pop_expect(&r, 0, 1024);
    assert_int_equal(vq_ring_capacity(&r), 2);
    assert_int_equal(r.resizes, 18);
    vq_ring_destroy(&r);

    assert_int_equal(vq_ring_init(&r, 5, 0), VQ_OK);
    push_n(&r, 0, 5);
    assert_int_equal(vq_ring_capacity(&r), 5);
    assert_int_equal(vq_ring_push(&r, (void *)item(5)), VQ_ERR_FULL);
    pop_expect(&r, 0, 5);
    vq_ring_destroy(&r);
}

/* Hysteresis: a count held at a power-of-two boundary (one push, one pop per step) never
 * reallocates, where shrink-at-half would reallocate twice per step. */
static void test_no_ping_pong_at_boundary(void **state)
{
    (void)state;
    size_t sizes[] = {4, 1024};
    for (size_t k = 0; k < 2; k++) {
        vq_ring_t r;
        assert_int_equal(vq_ring_init(&r, 0, 0), VQ_OK);
        push_n(&r, 0, sizes[k]);
        assert_int_equal(vq_ring_capacity(&r), sizes[k]);
        uint64_t before = r.resizes;
        size_t in = sizes[k], out = 0;
        for (int step = 0; step < 1000; step++) {
            push_n(&r, in++, 1);
            pop_expect(&r, out++, 1);
        }
        assert_true(r.resizes - before <= 1); /* the first push may grow once */
        pop_expect(&r, out, vq_ring_len(&r));
        vq_ring_destroy(&r);
    }
}

static void test_err_str(void **state)
{
    (void)state;
    assert_string_equal(vq_err_str(VQ_ERR_FULL), "maximum size limit reached");
    assert_string_equal(vq_err_str(VQ_ERR_TIMEOUT), "deadline exceeded");
    assert_string_equal(vq_err_str(VQ_ERR_USER + 3), "handler error");
    assert_string_equal(vq_err_str(-7), "unknown error");
}

/* Backoff: min * factor^k, capped, defaults for zero fields. */
static void test_backoff_exponential_and_cap(void **state)
{
    (void)state;
    vq_retry_t r = {.min_ns = 10, .max_ns = 1000, .factor = 2};
    assert_int_equal(vq_backoff_ns(&r, 0, NULL), 10);
    assert_int_equal(vq_backoff_ns(&r, 1, NULL), 20);
    assert_int_equal(vq_backoff_ns(&r, 3, NULL), 80);
    assert_int_equal(vq_backoff_ns(&r, 7, NULL), 1000);
    assert_int_equal(vq_backoff_ns(&r, 4000, NULL), 1000);
    vq_retry_t d = {0};
    assert_int_equal(vq_backoff_ns(&d, 0, NULL), 100 * MS);
    assert_int_equal(vq_backoff_ns(&d, 1, NULL), 200 * MS);
    assert_int_equal(vq_backoff_ns(&d, 30, NULL), 10000 * MS);
    vq_retry_t inv = {.min_ns = 500, .max_ns = 100};
    assert_int_equal(vq_backoff_ns(&inv, 3, NULL), 100);
}

/* Jitter is really applied: delays are spread over [d/2, d) with d = min * factor^k (the
 * rule changed from Go's [min, d), which left the first delay without jitter). */
static void test_backoff_jitter_applied(void **state)
{
    (void)state;
    vq_retry_t r = {.min_ns = 1000, .max_ns = 1000000, .factor = 2, .jitter = true};
    uint64_t rng = 12345;
    int64_t lo = INT64_MAX, hi = 0;
    for (int i = 0; i < 1000; i++) {
        int64_t d = vq_backoff_ns(&r, 4, &rng); /* without jitter: 16000 */
        assert_true(d >= 8000 && d < 16000);
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    assert_true(lo < 9000);
    assert_true(hi > 15000);
    /* Capped delays are spread below the cap too. */
    for (int i = 0; i < 100; i++) {
        int64_t d = vq_backoff_ns(&r, 40, &rng);
        assert_true(d >= 500000 && d < 1000000);
    }
}

/* Issue 8 point 13: the first delay (d == min) is jittered too, and every draw advances the
 * caller's generator, so two callers that failed together do not retry together. Before
 * the fix attempt 0 always gave exactly min and left rng untouched. */
static void test_backoff_first_delay_jittered(void **state)
{
    (void)state;
    vq_retry_t r = {.min_ns = 1000000, .max_ns = 100000000, .factor = 2, .jitter = true};
    uint64_t rng = 777;
    int64_t lo = INT64_MAX, hi = 0;
    for (int i = 0; i < 200; i++) {
        uint64_t before = rng;
        int64_t d = vq_backoff_ns(&r, 0, &rng);
        assert_true(rng != before);
        assert_true(d >= 500000 && d < 1000000);
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    assert_true(hi - lo > 250000);
    /* Tiny delays stay positive. */
    vq_retry_t tiny = {.min_ns = 1, .max_ns = 2, .jitter = true};
    for (int i = 0; i < 100; i++)
        assert_true(vq_backoff_ns(&tiny, 0, &rng) >= 1);
    /* Without rng there is nothing to draw from: the plain delay. */
    assert_int_equal(vq_backoff_ns(&r, 0, NULL), 1000000);
}

static void test_objpool_hits_misses_drops(void **state)
{
    (void)state;
    vq_objpool_t *p;
    assert_int_equal(vq_objpool_create(2, 64, 1, &p), VQ_OK);
    void *a = vq_objpool_get(p); /* prefilled: hit */
    void *b = vq_objpool_get(p); /* miss */
    void *c = vq_objpool_get(p); /* miss */
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    vq_objpool_put(p, a);
    vq_objpool_put(p, b);
    vq_objpool_put(p, c); /* no room: dropped */
    vq_objpool_stats_t st;
    vq_objpool_stats(p, &st);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 2);
    assert_int_equal(st.drops, 1);
    assert_int_equal(st.cached, 2);
    assert_ptr_equal(vq_objpool_get(p), b); /* last in, first out */
    vq_objpool_put(p, b);
    vq_objpool_destroy(p);
    assert_int_equal(vq_objpool_create(0, 8, 0, &p), VQ_ERR_INVALID);
}

typedef struct {
    vq_objpool_t *p;
    int n;
} pool_arg_t;

static void *objpool_thread(void *arg)
{
    pool_arg_t *a = arg;
    for (int i = 0; i < a->n; i++) {
        long *o = vq_objpool_get(a->p);
        *o = i;
        vq_objpool_put(a->p, o);
    }
    return NULL;
}

/* Four threads hammer one pool: the counters add up and no object is lost or shared. */
static void test_objpool_threads(void **state)
{
    (void)state;
    vq_objpool_t *p;
    assert_int_equal(vq_objpool_create(8, sizeof(long), 4, &p), VQ_OK);
    pool_arg_t a = {p, (int)test_scale(20000, 20)};
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, objpool_thread, &a), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    vq_objpool_stats_t st;
    vq_objpool_stats(p, &st);
    assert_int_equal(st.hits + st.misses, 4 * (uint64_t)a.n);
    assert_int_equal(st.misses, st.drops + st.cached - 4);
    assert_true(st.cached <= 8);
    vq_objpool_destroy(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_min_capacity_cycles),
        cmocka_unit_test(test_fifo_under_wraparound),
        cmocka_unit_test(test_min_capacity_not_power_of_two),
        cmocka_unit_test(test_min_capacity_capped_at_limit),
        cmocka_unit_test(test_min_capacity_clamped_to_default),
        cmocka_unit_test(test_full_and_shutdown),
        cmocka_unit_test(test_grow_and_shrink),
        cmocka_unit_test(test_no_ping_pong_at_boundary),
        cmocka_unit_test(test_err_str),
        cmocka_unit_test(test_backoff_exponential_and_cap),
        cmocka_unit_test(test_backoff_jitter_applied),
        cmocka_unit_test(test_backoff_first_delay_jittered),
        cmocka_unit_test(test_objpool_hits_misses_drops),
        cmocka_unit_test(test_objpool_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
