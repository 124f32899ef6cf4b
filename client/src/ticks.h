#ifndef VARLOG_TICKS_H
#define VARLOG_TICKS_H

/*
 * The appender's per-call timestamp, cheaper than a clock read (issue 25).
 *
 * Every append call is stamped for the latency statistics. clock_gettime(CLOCK_MONOTONIC)
 * costs 25-45 ns on a KVM guest (kvm-clock: a seqlock around the time-stamp counter and a
 * scaling); the counter alone (rdtsc) costs about 12. Where the CPU says its counter is
 * invariant (constant rate, running in every power state: CPUID 0x80000007 EDX bit 8, the
 * same test the kernel makes before it trusts the TSC), a tick is one count of it; elsewhere
 * (another architecture, a hypervisor that hides the bit) a tick is one nanosecond of
 * CLOCK_MONOTONIC, read as before.
 *
 * Ticks are turned into nanoseconds per batch, not per call: ticks_scale reads the counter
 * and the clock together and divides the ns elapsed since an anchor pair (taken once per
 * process by ticks_init) by the ticks elapsed. The scale is thus CLOCK_MONOTONIC's own rate
 * averaged since the anchor, so a latency means what it meant with a clock read per call:
 * nanoseconds of CLOCK_MONOTONIC from the call to its callback's batch. Its error is the
 * anchor's read jitter (tens of ns) over the time since the anchor, at least
 * TICKS_ANCHOR_MIN_NS (ticks_init waits that long): below 0.05 % of each latency at the
 * first batch, and shrinking from there, well inside the histogram's 0.39 % buckets.
 *
 * Counters of different CPUs agree where the counter is invariant and synchronised (the
 * kernel checks that at boot); a stamp read on one CPU and a "now" read on another could
 * still differ by a few counts, so a difference below zero is taken as zero.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define TICKS_HAVE_TSC 1
#else
#define TICKS_HAVE_TSC 0
#endif

enum { TICKS_ANCHOR_MIN_NS = 200000 };

/* true once ticks_init found an invariant counter; false: ticks are CLOCK_MONOTONIC ns.
 * Atomic only for ticks_use_counter (tests); a relaxed load is a plain one. */
extern atomic_bool ticks_tsc;

/* Takes the anchor pair, once per process (pthread_once); the first call waits
 * TICKS_ANCHOR_MIN_NS, the others return at once. Call it before the first ticks_now. */
void ticks_init(void);

static inline uint64_t ticks_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Now, in ticks. Any thread, no lock. */
static inline uint64_t ticks_now(void)
{
#if TICKS_HAVE_TSC
    if (atomic_load_explicit(&ticks_tsc, memory_order_relaxed))
        return __rdtsc();
#endif
    return ticks_clock_ns();
}

/* How ticks stamped earlier turn into ns at one moment: read once per batch. */
typedef struct ticks_scale {
    uint64_t now;       /* ticks at the moment */
    double ns_per_tick; /* 1 when ticks are ns */
} ticks_scale_t;

ticks_scale_t ticks_scale(void);

/* ns from the stamp then to s's moment; 0 when then is later (another CPU's counter a few
 * counts ahead). */
static inline int64_t ticks_ns_since(const ticks_scale_t *s, uint64_t then)
{
    if (then >= s->now)
        return 0;
    return (int64_t)((double)(s->now - then) * s->ns_per_tick);
}

/* For tests: take ticks from CLOCK_MONOTONIC (false) or from the counter (true, where
 * ticks_init found it invariant); returns whether ticks come from the counter afterwards.
 * Only while no stamp is outstanding. */
bool ticks_use_counter(bool on);

#endif
