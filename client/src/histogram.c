/* The log-linear histogram of histogram.h.
 *
 * Bucket index of v with B = sub_bits: v itself when v < 2^B; otherwise, with e the index of
 * v's highest set bit and s = e - B, (s << B) + (v >> s). v >> s lies in [2^B, 2^(B+1)), so
 * the indexes of consecutive powers of two follow each other without a gap and the first
 * 2^(B+1) indexes are exact. The highest, for INT64_MAX, is (64 - B) * 2^B - 1. */
#include "histogram.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

__extension__ typedef unsigned __int128 vhist_u128;

static inline uint32_t bucket_of(int sub_bits, uint64_t v)
{
    if (v < ((uint64_t)1 << sub_bits))
        return (uint32_t)v;
    int e = 63 - __builtin_clzll(v);
    int s = e - sub_bits;
    return (uint32_t)(((uint64_t)s << sub_bits) + (v >> s));
}

/* The bucket's lowest value and its width. */
static inline void bucket_range(int sub_bits, uint32_t idx, uint64_t *lo, uint64_t *width)
{
    uint64_t hi_part = idx >> sub_bits;
    if (hi_part <= 1) { /* below 2^(B+1): one value per bucket */
        *lo = idx;
        *width = 1;
        return;
    }
    int s = (int)hi_part - 1;
    uint64_t m = idx - ((uint64_t)s << sub_bits);
    *lo = m << s;
    *width = (uint64_t)1 << s;
}

static void add_sum(vhist_t *h, vhist_u128 add)
{
    uint64_t lo = (uint64_t)add, hi = (uint64_t)(add >> 64);
    uint64_t old = atomic_fetch_add_explicit(&h->sum_lo, lo, memory_order_relaxed);
    if (old + lo < old) /* this add carried out of the low word: only its author sees it */
        hi++;
    if (hi)
        atomic_fetch_add_explicit(&h->sum_hi, hi, memory_order_relaxed);
}

static void lower_min(vhist_t *h, int64_t v)
{
    int64_t cur = atomic_load_explicit(&h->min, memory_order_relaxed);
    while (v < cur && !atomic_compare_exchange_weak_explicit(&h->min, &cur, v, memory_order_relaxed,
                                                             memory_order_relaxed)) {
    }
}

static void raise_max(vhist_t *h, int64_t v)
{
    int64_t cur = atomic_load_explicit(&h->max, memory_order_relaxed);
    while (v > cur && !atomic_compare_exchange_weak_explicit(&h->max, &cur, v, memory_order_relaxed,
                                                             memory_order_relaxed)) {
    }
}

static void clear_totals(vhist_t *h)
{
    atomic_store_explicit(&h->count, 0, memory_order_relaxed);
    atomic_store_explicit(&h->sum_lo, 0, memory_order_relaxed);
    atomic_store_explicit(&h->sum_hi, 0, memory_order_relaxed);
    atomic_store_explicit(&h->min, INT64_MAX, memory_order_relaxed);
    atomic_store_explicit(&h->max, -1, memory_order_relaxed);
}

int vhist_init(vhist_t *h, int sub_bits)
{
    if (!h)
        return -1;
    h->buckets = NULL;
    h->nbuckets = 0;
    h->sub_bits = 0;
    clear_totals(h);
    if (sub_bits == 0)
        sub_bits = VHIST_DEFAULT_SUB_BITS;
    if (sub_bits < VHIST_MIN_SUB_BITS || sub_bits > VHIST_MAX_SUB_BITS)
        return -1;
    uint32_t n = (uint32_t)(64 - sub_bits) << sub_bits;
    _Atomic uint64_t *b = calloc(n, sizeof *b);
    if (!b)
        return -1;
    for (uint32_t i = 0; i < n; i++)
        atomic_init(&b[i], 0);
    h->buckets = b;
    h->nbuckets = n;
    h->sub_bits = sub_bits;
    return 0;
}

void vhist_destroy(vhist_t *h)
{
    if (!h)
        return;
    free((void *)h->buckets);
    h->buckets = NULL;
    h->nbuckets = 0;
}

void vhist_record_n(vhist_t *h, int64_t value, uint64_t n)
{
    if (!h || !h->buckets || n == 0)
        return;
    if (value < 0)
        value = 0;
    atomic_fetch_add_explicit(&h->buckets[bucket_of(h->sub_bits, (uint64_t)value)], n,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, n, memory_order_relaxed);
    add_sum(h, (vhist_u128)(uint64_t)value * n);
    lower_min(h, value);
    raise_max(h, value);
}

void vhist_record(vhist_t *h, int64_t value)
{
    vhist_record_n(h, value, 1);
}

void vhist_run_begin(vhist_run_t *r, vhist_t *h)
{
    *r = (vhist_run_t){.h = h && h->buckets ? h : NULL, .min = INT64_MAX, .max = -1};
}

static void run_flush_bucket(vhist_run_t *r)
{
    if (r->in_bucket)
        atomic_fetch_add_explicit(&r->h->buckets[r->bucket], r->in_bucket, memory_order_relaxed);
    r->in_bucket = 0;
}

void vhist_run_add(vhist_run_t *r, int64_t value)
{
    if (!r->h)
        return;
    if (value < 0)
        value = 0;
    uint32_t b = bucket_of(r->h->sub_bits, (uint64_t)value);
    if (b != r->bucket || r->in_bucket == 0) {
        run_flush_bucket(r);
        r->bucket = b;
    }
    r->in_bucket++;
    r->count++;
    uint64_t lo = r->sum_lo + (uint64_t)value;
    r->sum_hi += lo < r->sum_lo;
    r->sum_lo = lo;
    if (value < r->min)
        r->min = value;
    if (value > r->max)
        r->max = value;
}

void vhist_run_end(vhist_run_t *r)
{
    if (!r->h || r->count == 0)
        return;
    run_flush_bucket(r);
    atomic_fetch_add_explicit(&r->h->count, r->count, memory_order_relaxed);
    add_sum(r->h, ((vhist_u128)r->sum_hi << 64) | r->sum_lo);
    lower_min(r->h, r->min);
    raise_max(r->h, r->max);
    r->count = 0;
}

int vhist_merge(vhist_t *dst, const vhist_t *src)
{
    if (!dst || !src || !dst->buckets || !src->buckets || dst->sub_bits != src->sub_bits)
        return -1;
    vhist_t *s = (vhist_t *)src; /* atomic loads take a non-const pointer before C17's fix */
    uint64_t total = 0;
    for (uint32_t i = 0; i < s->nbuckets; i++) {
        uint64_t c = atomic_load_explicit(&s->buckets[i], memory_order_relaxed);
        if (c) {
            atomic_fetch_add_explicit(&dst->buckets[i], c, memory_order_relaxed);
            total += c;
        }
    }
    if (total == 0)
        return 0;
    /* The buckets' total rather than src->count: the two can differ while src is recorded
     * into, and dst stays self-consistent. */
    atomic_fetch_add_explicit(&dst->count, total, memory_order_relaxed);
    uint64_t lo = atomic_load_explicit(&s->sum_lo, memory_order_relaxed);
    uint64_t hi = atomic_load_explicit(&s->sum_hi, memory_order_relaxed);
    add_sum(dst, ((vhist_u128)hi << 64) | lo);
    lower_min(dst, atomic_load_explicit(&s->min, memory_order_relaxed));
    raise_max(dst, atomic_load_explicit(&s->max, memory_order_relaxed));
    return 0;
}

void vhist_reset(vhist_t *h)
{
    if (!h || !h->buckets)
        return;
    for (uint32_t i = 0; i < h->nbuckets; i++)
        atomic_store_explicit(&h->buckets[i], 0, memory_order_relaxed);
    clear_totals(h);
}

uint64_t vhist_rank(double p, uint64_t n)
{
    if (n == 0)
        return 0;
    if (!(p > 0)) /* also NaN */
        return 1;
    if (p >= 100)
        return n;
    double r = p * (double)n / 100.0;
    uint64_t k = r >= (double)n ? n : (uint64_t)r;
    /* 99.9 is not exact in binary: 99.9 % of 1000 must be rank 999, not 1000, so a
     * fraction of rounding size (relative 1e-12, far above a double's few ulps) is none. */
    if ((double)k < r && r - (double)k > 1e-12 * r)
        k++;
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return k;
}

uint64_t vhist_count(const vhist_t *h)
{
    return h ? atomic_load_explicit(&((vhist_t *)h)->count, memory_order_relaxed) : 0;
}

int64_t vhist_min(const vhist_t *h)
{
    if (!vhist_count(h))
        return 0;
    return atomic_load_explicit(&((vhist_t *)h)->min, memory_order_relaxed);
}

int64_t vhist_max(const vhist_t *h)
{
    if (!vhist_count(h))
        return 0;
    int64_t m = atomic_load_explicit(&((vhist_t *)h)->max, memory_order_relaxed);
    return m < 0 ? 0 : m;
}

double vhist_mean(const vhist_t *h)
{
    uint64_t n = vhist_count(h);
    if (!n)
        return 0;
    vhist_t *m = (vhist_t *)h;
    uint64_t lo = atomic_load_explicit(&m->sum_lo, memory_order_relaxed);
    uint64_t hi = atomic_load_explicit(&m->sum_hi, memory_order_relaxed);
    return ((double)hi * 18446744073709551616.0 + (double)lo) / (double)n;
}

int64_t vhist_percentile(const vhist_t *h, double p)
{
    uint64_t n = vhist_count(h);
    if (!n || !h->buckets)
        return 0;
    int64_t mn = vhist_min(h), mx = vhist_max(h);
    uint64_t rank = vhist_rank(p, n);
    if (rank == 1)
        return mn;
    if (rank == n)
        return mx;
    uint64_t cum = 0;
    for (uint32_t i = 0; i < h->nbuckets; i++) {
        cum += atomic_load_explicit(&((vhist_t *)h)->buckets[i], memory_order_relaxed);
        if (cum >= rank) {
            uint64_t lo, width;
            bucket_range(h->sub_bits, i, &lo, &width);
            int64_t mid = (int64_t)(lo + (width - 1) / 2);
            if (mid < mn)
                mid = mn;
            if (mid > mx)
                mid = mx;
            return mid;
        }
    }
    return mx; /* fewer in the buckets than counted: records in flight */
}

double vhist_relative_error(const vhist_t *h)
{
    int b = h && h->sub_bits ? h->sub_bits : VHIST_DEFAULT_SUB_BITS;
    return 1.0 / (double)((uint64_t)1 << (b + 1));
}
