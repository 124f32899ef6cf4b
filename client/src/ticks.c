#include "ticks.h"

#include <pthread.h>

#if TICKS_HAVE_TSC
#include <cpuid.h>
#endif

atomic_bool ticks_tsc;

static bool counter_invariant; /* what ticks_init found */
static uint64_t anchor_ticks, anchor_ns;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The counter and the clock read together: the counter before and after the clock, taken
 * half-way; tried again (5 times at most, the closest kept) while the reads are more than
 * PAIR_GAP_MAX counts apart, as when the thread was preempted between them. */
enum { PAIR_GAP_MAX = 2000 }; /* 1 µs at 2 GHz; the three reads take about 50 ns */

static void read_pair(uint64_t *ticks, uint64_t *ns)
{
#if TICKS_HAVE_TSC
    uint64_t best_gap = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t before = __rdtsc(), clock = ticks_clock_ns(), after = __rdtsc();
        if (after - before < best_gap) {
            best_gap = after - before;
            *ticks = before + (after - before) / 2;
            *ns = clock;
        }
        if (best_gap <= PAIR_GAP_MAX)
            break;
    }
#else
    *ns = *ticks = ticks_clock_ns();
#endif
}

static bool cpu_counter_invariant(void)
{
#if TICKS_HAVE_TSC
    unsigned eax, ebx, ecx, edx;
    if (__get_cpuid(0x80000000, &eax, &ebx, &ecx, &edx) == 0 || eax < 0x80000007)
        return false;
    if (__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) == 0)
        return false;
    return (edx >> 8) & 1;
#else
    return false;
#endif
}

static void init_once(void)
{
    counter_invariant = cpu_counter_invariant();
    atomic_store(&ticks_tsc, counter_invariant);
    if (!counter_invariant)
        return;
    read_pair(&anchor_ticks, &anchor_ns);
    /* The scale's error is the pair's jitter over the time since the anchor: no scale is
     * taken before this much has passed. */
    struct timespec nap = {.tv_sec = 0, .tv_nsec = TICKS_ANCHOR_MIN_NS};
    while (ticks_clock_ns() - anchor_ns < TICKS_ANCHOR_MIN_NS)
        nanosleep(&nap, NULL);
}

void ticks_init(void)
{
    pthread_once(&once, init_once);
}

ticks_scale_t ticks_scale(void)
{
    if (!atomic_load_explicit(&ticks_tsc, memory_order_relaxed))
        return (ticks_scale_t){.now = ticks_clock_ns(), .ns_per_tick = 1.0};
    uint64_t now_ticks, now_ns;
    read_pair(&now_ticks, &now_ns);
    ticks_scale_t s = {.now = now_ticks, .ns_per_tick = 1.0};
    if (now_ticks > anchor_ticks && now_ns > anchor_ns)
        s.ns_per_tick = (double)(now_ns - anchor_ns) / (double)(now_ticks - anchor_ticks);
    return s;
}

bool ticks_use_counter(bool on)
{
    ticks_init();
    atomic_store(&ticks_tsc, on && counter_invariant);
    return on && counter_invariant;
}
