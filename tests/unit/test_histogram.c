/* vhist (client/src/histogram.h) against exact nearest-rank percentiles of known data sets,
 * computed by sorting: every reported percentile within the documented bound
 * |reported - exact| <= exact / 2^(sub_bits + 1), for several sub_bits; min, max, count and
 * mean exact; merge equal to recording both; the empty histogram; concurrent recorders. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "histogram.h"
#include "metrics.h"
#include "test_support.h"

static const double pcts[] = {0,  0.1, 1,  5,    10,   25,    33.3,   50,
                              66, 75,  90, 99.0, 99.9, 99.99, 99.999, 100};

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{ /* splitmix64: reproducible data without libc's rand */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_unit(void)
{
    return (double)(rng() >> 11) / 9007199254740992.0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Records v[0..n) into a histogram of sub_bits and checks everything against the sorted
 * data. */
static void check_data(int64_t *v, size_t n, int sub_bits, const char *what)
{
    vhist_t h;
    assert_int_equal(vhist_init(&h, sub_bits), 0);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        vhist_record(&h, v[i]);
        sum += (double)v[i];
    }
    qsort(v, n, sizeof *v, cmp_i64);
    assert_int_equal(vhist_count(&h), n);
    assert_int_equal(vhist_min(&h), v[0]);
    assert_int_equal(vhist_max(&h), v[n - 1]);
    double mean = vhist_mean(&h);
    assert_true(fabs(mean - sum / (double)n) <= 1e-9 * fabs(sum / (double)n) + 1e-9);
    int b = sub_bits ? sub_bits : VHIST_DEFAULT_SUB_BITS;
    assert_true(vhist_relative_error(&h) == 1.0 / (double)(1u << (b + 1)));
    for (size_t k = 0; k < sizeof pcts / sizeof pcts[0]; k++) {
        int64_t exact = v[vhist_rank(pcts[k], n) - 1];
        int64_t got = vhist_percentile(&h, pcts[k]);
        uint64_t diff = got > exact ? (uint64_t)(got - exact) : (uint64_t)(exact - got);
        uint64_t bound = (uint64_t)exact >> (b + 1);
        if (diff > bound)
            fail_msg("%s, sub_bits %d: p%g = %lld, exact %lld (bound %llu)", what, b, pcts[k],
                     (long long)got, (long long)exact, (unsigned long long)bound);
        /* Never outside the data: the bucket's middle is clamped to [min, max]. */
        assert_true(got >= v[0] && got <= v[n - 1]);
    }
    vhist_destroy(&h);
}

typedef void (*gen_fn)(int64_t *v, size_t n);

static void gen_uniform(int64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (int64_t)(rng() % 1000000000ull);
}

static void gen_exponential(int64_t *v, size_t n)
{ /* mean 50 us: a latency's long tail */
    for (size_t i = 0; i < n; i++)
        v[i] = (int64_t)(-log(1.0 - rng_unit()) * 50000.0);
}

static void gen_constant(int64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = 123457;
}

static void gen_two_spikes(int64_t *v, size_t n)
{ /* 90 % at 100 us, 10 % at 1 s */
    for (size_t i = 0; i < n; i++)
        v[i] = (rng() % 10 == 0) ? 1000000000 : 100000;
}

static void gen_zero(int64_t *v, size_t n)
{
    memset(v, 0, n * sizeof *v);
}

static void gen_huge(int64_t *v, size_t n)
{ /* the top of the range, where a sum would wrap */
    for (size_t i = 0; i < n; i++)
        v[i] = INT64_MAX - (int64_t)(rng() % ((uint64_t)1 << 62));
    v[0] = INT64_MAX;
}

static void gen_small(int64_t *v, size_t n)
{ /* below 2^sub_bits: exact */
    for (size_t i = 0; i < n; i++)
        v[i] = (int64_t)(rng() % 100);
}

static void gen_wide(int64_t *v, size_t n)
{ /* every magnitude from 1 to 2^62 */
    for (size_t i = 0; i < n; i++)
        v[i] = (int64_t)(rng() >> (1 + rng() % 63));
}

static void run_gen(gen_fn gen, const char *what)
{
    static const int bits[] = {0, 3, 5, 7, 10};
    size_t sizes[] = {1, 2, 7, 1000, (size_t)test_scale(100000, 10)};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (size_t b = 0; b < sizeof bits / sizeof bits[0]; b++) {
            int64_t *v = malloc(sizes[s] * sizeof *v);
            assert_non_null(v);
            gen(v, sizes[s]);
            check_data(v, sizes[s], bits[b], what);
            free(v);
        }
    }
}

static void test_uniform(void **state)
{
    (void)state;
    run_gen(gen_uniform, "uniform");
}

static void test_exponential(void **state)
{
    (void)state;
    run_gen(gen_exponential, "exponential");
}

static void test_constant(void **state)
{
    (void)state;
    run_gen(gen_constant, "constant");
}

static void test_two_spikes(void **state)
{
    (void)state;
    run_gen(gen_two_spikes, "two spikes");
}

static void test_zero(void **state)
{
    (void)state;
    run_gen(gen_zero, "zero");
    vhist_t h;
    assert_int_equal(vhist_init(&h, 0), 0);
    vhist_record(&h, 0);
    assert_int_equal(vhist_percentile(&h, 50), 0);
    assert_int_equal(vhist_max(&h), 0);
    vhist_destroy(&h);
}

static void test_huge(void **state)
{
    (void)state;
    run_gen(gen_huge, "huge");
}

static void test_small_exact(void **state)
{
    (void)state;
    run_gen(gen_small, "small");
}

static void test_wide(void **state)
{
    (void)state;
    run_gen(gen_wide, "wide");
}

/* The exact bound is reached, not just respected loosely: a bucket's far end with the
 * default sub_bits is off by its half width, which must still be within the bound. */
static void test_bucket_edges(void **state)
{
    (void)state;
    for (int e = 8; e < 63; e++) {
        int64_t edges[] = {(int64_t)1 << e, (int64_t)(((uint64_t)1 << e) - 1),
                           (int64_t)(((uint64_t)1 << e) + ((uint64_t)1 << (e - 7)) - 1)};
        for (size_t i = 0; i < 3; i++) {
            int64_t v[1] = {edges[i]};
            check_data(v, 1, 0, "edge");
            int64_t w[3] = {0, edges[i], INT64_MAX};
            check_data(w, 3, 0, "edge middle");
        }
    }
}

static void test_negative_is_zero(void **state)
{
    (void)state;
    vhist_t h;
    assert_int_equal(vhist_init(&h, 0), 0);
    vhist_record(&h, -5);
    assert_int_equal(vhist_count(&h), 1);
    assert_int_equal(vhist_min(&h), 0);
    assert_int_equal(vhist_percentile(&h, 50), 0);
    vhist_destroy(&h);
}

static void test_empty(void **state)
{
    (void)state;
    vhist_t h, g;
    assert_int_equal(vhist_init(&h, 0), 0);
    assert_int_equal(vhist_init(&g, 0), 0);
    assert_int_equal(vhist_count(&h), 0);
    assert_int_equal(vhist_min(&h), 0);
    assert_int_equal(vhist_max(&h), 0);
    assert_true(vhist_mean(&h) == 0);
    for (size_t k = 0; k < sizeof pcts / sizeof pcts[0]; k++)
        assert_int_equal(vhist_percentile(&h, pcts[k]), 0);
    assert_int_equal(vhist_merge(&h, &g), 0);
    assert_int_equal(vhist_count(&h), 0);
    assert_int_equal(vhist_max(&h), 0);
    /* reset returns a used histogram to this state */
    vhist_record(&g, 1000);
    vhist_record(&g, 7);
    vhist_reset(&g);
    assert_int_equal(vhist_count(&g), 0);
    assert_int_equal(vhist_min(&g), 0);
    assert_int_equal(vhist_max(&g), 0);
    assert_int_equal(vhist_percentile(&g, 99), 0);
    vhist_record(&g, 42);
    assert_int_equal(vhist_min(&g), 42);
    assert_int_equal(vhist_percentile(&g, 1), 42);
    assert_int_equal(vhist_rank(50, 0), 0);
    vhist_destroy(&h);
    vhist_destroy(&g);
    vhist_destroy(NULL);
    vhist_destroy(&g); /* twice is harmless */
}

static void test_bad_init(void **state)
{
    (void)state;
    vhist_t h;
    assert_int_equal(vhist_init(NULL, 0), -1);
    assert_int_equal(vhist_init(&h, VHIST_MAX_SUB_BITS + 1), -1);
    vhist_destroy(&h); /* a failed init leaves h destroyable */
    assert_int_equal(vhist_init(&h, -1), -1);
    vhist_record(&h, 5); /* ignored */
    assert_int_equal(vhist_count(&h), 0);
    vhist_t a, b;
    assert_int_equal(vhist_init(&a, 5), 0);
    assert_int_equal(vhist_init(&b, 7), 0);
    vhist_record(&b, 5);
    assert_int_equal(vhist_merge(&a, &b), -1);
    assert_int_equal(vhist_count(&a), 0);
    assert_int_equal(vhist_merge(&a, NULL), -1);
    vhist_destroy(&a);
    vhist_destroy(&b);
}

static void test_rank(void **state)
{
    (void)state;
    assert_int_equal(vhist_rank(0, 10), 1);
    assert_int_equal(vhist_rank(10, 10), 1);
    assert_int_equal(vhist_rank(10.0001, 10), 2);
    assert_int_equal(vhist_rank(50, 10), 5);
    assert_int_equal(vhist_rank(99.9, 1000), 999);
    assert_int_equal(vhist_rank(100, 10), 10);
    assert_int_equal(vhist_rank(250, 10), 10);
    assert_int_equal(vhist_rank(-3, 10), 1);
    assert_int_equal(vhist_rank(NAN, 10), 1);
}

/* merge(a, b) holds the same buckets and totals as one histogram that recorded both. */
static void test_merge_equals_both(void **state)
{
    (void)state;
    size_t n = (size_t)test_scale(50000, 10);
    vhist_t a, b, both;
    assert_int_equal(vhist_init(&a, 0), 0);
    assert_int_equal(vhist_init(&b, 0), 0);
    assert_int_equal(vhist_init(&both, 0), 0);
    int64_t *va = malloc(n * sizeof *va), *vb = malloc(n * sizeof *vb);
    assert_non_null(va);
    assert_non_null(vb);
    gen_exponential(va, n);
    gen_two_spikes(vb, n);
    vb[0] = INT64_MAX; /* the sum's carry crosses the merge */
    vb[1] = INT64_MAX;
    for (size_t i = 0; i < n; i++) {
        vhist_record(&a, va[i]);
        vhist_record(&both, va[i]);
        vhist_record(&b, vb[i]);
        vhist_record(&both, vb[i]);
    }
    assert_int_equal(vhist_merge(&a, &b), 0);
    assert_int_equal(vhist_count(&a), vhist_count(&both));
    assert_int_equal(vhist_min(&a), vhist_min(&both));
    assert_int_equal(vhist_max(&a), vhist_max(&both));
    assert_true(vhist_mean(&a) == vhist_mean(&both));
    for (uint32_t i = 0; i < a.nbuckets; i++)
        assert_int_equal(a.buckets[i], both.buckets[i]);
    for (size_t k = 0; k < sizeof pcts / sizeof pcts[0]; k++)
        assert_int_equal(vhist_percentile(&a, pcts[k]), vhist_percentile(&both, pcts[k]));
    /* and against the exact data of both */
    int64_t *all = malloc(2 * n * sizeof *all);
    assert_non_null(all);
    memcpy(all, va, n * sizeof *va);
    memcpy(all + n, vb, n * sizeof *vb);
    check_data(all, 2 * n, 0, "merged");
    /* b is unchanged by being merged from */
    assert_int_equal(vhist_count(&b), n);
    free(all);
    free(va);
    free(vb);
    vhist_destroy(&a);
    vhist_destroy(&b);
    vhist_destroy(&both);
}

/* record_n(v, k) is k records of v. */
static void test_record_n(void **state)
{
    (void)state;
    vhist_t a, b;
    assert_int_equal(vhist_init(&a, 0), 0);
    assert_int_equal(vhist_init(&b, 0), 0);
    vhist_record_n(&a, 5000, 1000);
    vhist_record_n(&a, INT64_MAX, 3); /* product past 64 bits */
    vhist_record_n(&a, 1, 0);         /* nothing */
    for (int i = 0; i < 1000; i++)
        vhist_record(&b, 5000);
    for (int i = 0; i < 3; i++)
        vhist_record(&b, INT64_MAX);
    assert_int_equal(vhist_count(&a), 1003);
    assert_int_equal(vhist_min(&a), 5000);
    assert_true(vhist_mean(&a) == vhist_mean(&b));
    assert_true(vhist_mean(&a) > 2.7e16); /* 3 * 2^63 / 1003: the sum did not wrap */
    vhist_destroy(&a);
    vhist_destroy(&b);
}

/* Equal in every counter: buckets, count, sum, min, max. */
static void assert_same(vhist_t *a, vhist_t *b)
{
    assert_int_equal(a->nbuckets, b->nbuckets);
    for (uint32_t i = 0; i < a->nbuckets; i++)
        if (atomic_load(&a->buckets[i]) != atomic_load(&b->buckets[i]))
            fail_msg("bucket %u: %llu against %llu", i, (unsigned long long)a->buckets[i],
                     (unsigned long long)b->buckets[i]);
    assert_int_equal(atomic_load(&a->count), atomic_load(&b->count));
    assert_int_equal(atomic_load(&a->sum_lo), atomic_load(&b->sum_lo));
    assert_int_equal(atomic_load(&a->sum_hi), atomic_load(&b->sum_hi));
    assert_int_equal(atomic_load(&a->min), atomic_load(&b->min));
    assert_int_equal(atomic_load(&a->max), atomic_load(&b->max));
}

/* A run leaves the histogram exactly as recording each value would: runs of one bucket,
 * values changing bucket at every step, negatives, sums past 64 bits, an empty run, and a
 * run into a histogram that already holds values. */
static void test_run_equals_records(void **state)
{
    (void)state;
    for (int shape = 0; shape < 5; shape++) {
        vhist_t a, b;
        assert_int_equal(vhist_init(&a, 0), 0);
        assert_int_equal(vhist_init(&b, 0), 0);
        vhist_record(&a, 777);
        vhist_record(&b, 777);
        vhist_run_t r;
        vhist_run_begin(&r, &a);
        for (int i = 0; i < 3000; i++) {
            int64_t v = shape == 0   ? 5000 + i / 100                      /* long runs */
                        : shape == 1 ? (int64_t)(rng() % 100000000ull)     /* a new bucket each */
                        : shape == 2 ? (int64_t)(rng() % 2000) - 1000      /* negatives */
                        : shape == 3 ? INT64_MAX - (int64_t)(rng() % 1000) /* sum carries */
                                     : 300000 - i;                         /* decreasing */
            vhist_run_add(&r, v);
            vhist_record(&b, v);
        }
        vhist_run_end(&r);
        assert_same(&a, &b);
        vhist_run_begin(&r, &a); /* empty: nothing changes */
        vhist_run_end(&r);
        assert_same(&a, &b);
        vhist_destroy(&a);
        vhist_destroy(&b);
    }
    vhist_run_t none; /* a run into no histogram records nothing and does not crash */
    vhist_run_begin(&none, NULL);
    vhist_run_add(&none, 5);
    vhist_run_end(&none);
}

/* The exposition histogram's run, likewise: every bucket, the count and the sum. */
static void test_metrics_run_equals_records(void **state)
{
    (void)state;
    static metrics_hist_t a, b; /* zero: empty */
    metrics_hist_init(&a, &metrics_bounds_send);
    metrics_hist_init(&b, &metrics_bounds_send);
    metrics_hist_record(&a, 42);
    metrics_hist_record(&b, 42);
    metrics_hist_run_t r;
    metrics_hist_run_begin(&r, &a);
    for (int i = 0; i < 5000; i++) {
        int64_t v = i % 3 ? (int64_t)(rng() % 20000000000ull) - 1000 : 2000000 - i * 300;
        metrics_hist_run_add(&r, v);
        metrics_hist_record(&b, v);
    }
    metrics_hist_run_end(&r);
    metrics_hist_run_begin(&r, &a);
    metrics_hist_run_end(&r);
    for (size_t i = 0; i <= metrics_bounds_send.n; i++)
        assert_int_equal(atomic_load(&a.buckets[i]), atomic_load(&b.buckets[i]));
    assert_int_equal(atomic_load(&a.count), atomic_load(&b.count));
    assert_int_equal(atomic_load(&a.sum_ns), atomic_load(&b.sum_ns));
}

enum { THREADS = 4 };

typedef struct rec_arg {
    vhist_t *h;
    long n;
    int64_t base;
} rec_arg_t;

static void *recorder(void *p)
{
    rec_arg_t *a = p;
    for (long i = 0; i < a->n; i++)
        vhist_record(a->h, a->base + i % 1000);
    return NULL;
}

/* Concurrent recorders lose nothing (the header promises any number of writers). */
static void test_concurrent_record(void **state)
{
    (void)state;
    vhist_t h;
    assert_int_equal(vhist_init(&h, 0), 0);
    long n = test_scale(200000, 20);
    pthread_t t[THREADS];
    rec_arg_t args[THREADS];
    for (int i = 0; i < THREADS; i++) {
        args[i] = (rec_arg_t){&h, n, (int64_t)i * 1000000};
        assert_int_equal(pthread_create(&t[i], NULL, recorder, &args[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(vhist_count(&h), (uint64_t)(n * THREADS));
    assert_int_equal(vhist_min(&h), 0);
    assert_int_equal(vhist_max(&h), (THREADS - 1) * 1000000 + (n < 1000 ? n - 1 : 999));
    uint64_t total = 0;
    for (uint32_t i = 0; i < h.nbuckets; i++)
        total += h.buckets[i];
    assert_int_equal(total, (uint64_t)(n * THREADS));
    vhist_destroy(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform),
        cmocka_unit_test(test_exponential),
        cmocka_unit_test(test_constant),
        cmocka_unit_test(test_two_spikes),
        cmocka_unit_test(test_zero),
        cmocka_unit_test(test_huge),
        cmocka_unit_test(test_small_exact),
        cmocka_unit_test(test_wide),
        cmocka_unit_test(test_bucket_edges),
        cmocka_unit_test(test_negative_is_zero),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_bad_init),
        cmocka_unit_test(test_rank),
        cmocka_unit_test(test_merge_equals_both),
        cmocka_unit_test(test_record_n),
        cmocka_unit_test(test_run_equals_records),
        cmocka_unit_test(test_metrics_run_equals_records),
        cmocka_unit_test(test_concurrent_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
