#ifndef VARLOG_HISTOGRAM_H
#define VARLOG_HISTOGRAM_H

/* A log-linear histogram of non-negative int64 values (latencies in nanoseconds), in the
 * manner of HdrHistogram: every power of two [2^e, 2^(e+1)) is cut into 2^sub_bits buckets of
 * equal width, and values below 2^sub_bits have a bucket each (recorded exactly). All buckets
 * are allocated once by vhist_init: (64 - sub_bits) * 2^sub_bits counters, 57 KiB with the
 * default sub_bits of 7, covering 0 .. INT64_MAX.
 *
 * Error bound. A bucket holding values >= 2^sub_bits is at most 1/2^sub_bits of its lower
 * bound wide; vhist_percentile reports the bucket's middle, clamped to [min, max], so the
 * value it returns differs from the exact nearest-rank percentile x by at most
 * x / 2^(sub_bits + 1): 0.39 % with the default, 1.6 % with sub_bits 5. Values below
 * 2^sub_bits are exact, and so are min, max, count and mean (the sum is kept in 128 bits).
 *
 * Percentiles are nearest-rank: percentile p of n values is the value of rank
 * vhist_rank(p, n) (1-based) in sorted order; p 0 gives min, p 100 gives max.
 *
 * Threads: vhist_record may be called from any number of threads at once (relaxed atomic
 * counters, no lock, no allocation, O(1)). Reads (percentile, count, min, max, mean, merge
 * from it) may run while others record: each counter read is whole, but a read concurrent
 * with records sees some of them and not others (count and the buckets may disagree by the
 * records in flight). vhist_init, vhist_destroy, vhist_reset and merging into a histogram
 * must not run concurrently with any other call on that same histogram. */
#include <stdatomic.h>
#include <stdint.h>

enum {
    VHIST_DEFAULT_SUB_BITS = 7,
    VHIST_MIN_SUB_BITS = 1,
    VHIST_MAX_SUB_BITS = 12,
};

typedef struct vhist {
    int sub_bits;
    uint32_t nbuckets;
    _Atomic uint64_t *buckets;
    _Atomic uint64_t count;
    _Atomic uint64_t sum_lo, sum_hi; /* the sum in 128 bits: INT64_MAX twice must not wrap */
    _Atomic int64_t min, max;        /* INT64_MAX / -1 while empty */
} vhist_t;

/* Allocates the buckets of h (owned by h, freed by vhist_destroy); sub_bits 0 means
 * VHIST_DEFAULT_SUB_BITS. Returns 0, or -1 when h is NULL, sub_bits is outside
 * [VHIST_MIN_SUB_BITS, VHIST_MAX_SUB_BITS], or the allocation fails (h is then left empty and
 * vhist_destroy on it is harmless). */
int vhist_init(vhist_t *h, int sub_bits);

/* Frees the buckets; NULL, or a histogram whose init failed, is ignored. */
void vhist_destroy(vhist_t *h);

/* Records value once (n times for _n). A negative value (a clock stepping back) is recorded
 * as 0. O(1), no allocation, never blocks. */
void vhist_record(vhist_t *h, int64_t value);
void vhist_record_n(vhist_t *h, int64_t value, uint64_t n);

/* Values one thread records in a row (a batch's calls, say), folded so that each run of
 * values in one bucket costs one atomic add, and the count, sum, min and max one update for
 * the whole run: the histogram ends up exactly as if each value had been recorded with
 * vhist_record, once vhist_run_end returned (a read meanwhile sees none of the run's values
 * not yet flushed). On the recording thread's stack; no allocation. */
typedef struct vhist_run {
    vhist_t *h;
    uint32_t bucket;    /* of the values not flushed yet */
    uint64_t in_bucket; /* how many (0: none) */
    uint64_t count;
    uint64_t sum_lo, sum_hi;
    int64_t min, max;
} vhist_run_t;

void vhist_run_begin(vhist_run_t *r, vhist_t *h);
/* As vhist_record (a negative value counts as 0). */
void vhist_run_add(vhist_run_t *r, int64_t value);
void vhist_run_end(vhist_run_t *r);

/* Adds every value of src to dst, as if each had been recorded into dst. Returns 0, or -1
 * (dst unchanged) when the two have different sub_bits or either is NULL. */
int vhist_merge(vhist_t *dst, const vhist_t *src);

/* Forgets every value; the buckets stay allocated. */
void vhist_reset(vhist_t *h);

/* The nearest-rank percentile p (0..100; clamped) within the error bound above; 0 when
 * empty. O(number of buckets). */
int64_t vhist_percentile(const vhist_t *h, double p);

/* The 1-based rank vhist_percentile(p) looks for among n values: ceil(p / 100 * n), at least
 * 1 and at most n (0 when n is 0); a fraction within 1e-12 relative of a whole rank (99.9's
 * rounding in binary) counts as that rank. Exposed so that callers computing exact percentiles
 * (tests) use the same definition. */
uint64_t vhist_rank(double p, uint64_t n);

uint64_t vhist_count(const vhist_t *h);
int64_t vhist_min(const vhist_t *h); /* 0 when empty */
int64_t vhist_max(const vhist_t *h); /* 0 when empty */
double vhist_mean(const vhist_t *h); /* 0 when empty */

/* The bound on |reported - exact| / exact for values >= 2^sub_bits: 1 / 2^(sub_bits + 1). */
double vhist_relative_error(const vhist_t *h);

#endif
