/* bench_transmit_queue: the subscribe path's transmit queue (client/src/transmit_queue.h)
 * against Varlog's BenchmarkTransmitQueue (BenchmarkAggregationBuffer since v0.29.0),
 * printed as Go benchmark lines.
 *
 *   bench_transmit_queue [-benchtime=D|Nx] [-count=N] [-bench=REGEX] [FILTER]  (harness.h)
 *
 * No arguments runs every benchmark once for about 200 ms each.
 *
 * NoAlloc/N, PreAlloc/N: Go's work per op: a fresh queue, then N pushes of random GLSNs
 * (Go: rand.Int31 from math/rand's global source; here a splitmix64 step, masked to 31
 * bits, inside the timed loop as Go's is). Go allocates the fresh queue, and grows it, in
 * every op: NoAlloc starts from an empty slice, PreAlloc from capacity N/2 (what its PR
 * added). Here a fresh queue is tq_reset, which keeps the storage, and push never grows it,
 * so the variants differ only before their first op: NoAlloc's queue is created empty and
 * grown by doubling (tq_reserve, as Go's append) when a push finds it full; PreAlloc's is
 * created at N/2 and grown once. In steady state both are the same code, at 0 allocs/op.
 * Locked/N adds what Go's Push also does: an uncontended mutex around every push.
 * Fresh/N is Go's pattern taken literally: tq_create(N) and tq_destroy in every op.
 *
 * PushDrain/N: N random pushes, then N pops. Merge/k=K: a k-way merge over the heads of K
 * log streams (tq_replace_min per entry) among which GLSNs 1..65536 are dealt at random;
 * one op = one entry delivered, so ns/op is ns per entry.
 *
 * Every row also reports cpu-ns/op, the thread's CPU time per op: ns/op is wall-clock time as
 * Go's, which on a machine shared with other work also counts the time the thread waited for a
 * core. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "harness.h"
#include "transmit_queue.h"

static uint64_t rng = 0x853c49e6748fea9bULL;

/* The state is a local of the timed loop, copied from and back to rng around it: a global
 * would be stored and reloaded at every step, since the queue's stores (of uint64_t) may alias
 * it, putting a store-to-load round trip into every push. */
static inline uint64_t splitmix(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* rand.Int31: a non-negative 31-bit number. */
static inline uint64_t rand_int31(uint64_t *state)
{
    return splitmix(state) >> 33;
}

/* This thread's CPU time: on a machine shared with other work the wall clock of a round also
 * counts the time the thread waited for a core, which CPU time does not. */
static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct push_arg {
    size_t size;
    size_t initial_cap; /* capacity created with (before the first op) */
    enum { PLAIN, LOCKED, FRESH } mode;
} push_arg_t;

static void *push_setup(const void *arg)
{
    const push_arg_t *a = arg;
    tq_t *q;
    return tq_create(a->initial_cap, &q) == VARLOG_OK ? q : NULL;
}

static void push_teardown(void *ctx)
{
    tq_destroy(ctx);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* A push that grows the storage on QUEUE_FULL, doubling as Go's append: NoAlloc and
 * PreAlloc take this path only in their first ops. */
static inline int push_growing(tq_t *q, uint64_t glsn)
{
    varlog_err_t rc = tq_push(q, glsn, 0);
    if (rc == VARLOG_ERR_QUEUE_FULL) {
        size_t cap = tq_capacity(q);
        if (tq_reserve(q, cap ? 2 * cap : 1) != VARLOG_OK)
            return -1;
        rc = tq_push(q, glsn, 0);
    }
    return rc == VARLOG_OK ? 0 : -1;
}

static void bench_push(bench_b_t *b)
{
    const push_arg_t *a = b->arg;
    tq_t *q = b->ctx;
    size_t size = a->size;
    uint64_t seed = rng;
    int64_t cpu0 = thread_cpu_ns();
    for (long i = 0; i < b->n; i++) {
        if (a->mode == FRESH) {
            if (tq_create(size, &q) != VARLOG_OK)
                return b_failf(b, "tq_create");
            for (size_t k = 0; k < size; k++)
                tq_push(q, rand_int31(&seed), 0);
            tq_destroy(q);
            continue;
        }
        tq_reset(q);
        if (a->mode == LOCKED) {
            for (size_t k = 0; k < size; k++) {
                pthread_mutex_lock(&mu);
                int rc = push_growing(q, rand_int31(&seed));
                pthread_mutex_unlock(&mu);
                if (rc != 0)
                    return b_failf(b, "push");
            }
        } else {
            for (size_t k = 0; k < size; k++)
                if (push_growing(q, rand_int31(&seed)) != 0)
                    return b_failf(b, "push");
        }
    }
    b_stop_timer(b);
    int64_t cpu = thread_cpu_ns() - cpu0;
    rng = seed;
    if (a->mode != FRESH && tq_size(q) != size)
        return b_failf(b, "size %zu, want %zu", tq_size(q), size);
    b_report_metric(b, (double)b_elapsed_ns(b) / ((double)b->n * (double)size), "ns/push");
    b_report_metric(b, (double)cpu / (double)b->n, "cpu-ns/op");
}

static void bench_push_drain(bench_b_t *b)
{
    const push_arg_t *a = b->arg;
    tq_t *q = b->ctx;
    size_t size = a->size;
    uint64_t sum = 0, seed = rng;
    int64_t cpu0 = thread_cpu_ns();
    for (long i = 0; i < b->n; i++) {
        tq_reset(q);
        for (size_t k = 0; k < size; k++)
            tq_push(q, rand_int31(&seed), k);
        uint64_t last = 0;
        tq_item_t it;
        while (tq_pop_min(q, &it) == VARLOG_OK) {
            if (it.glsn < last)
                return b_failf(b, "out of order: %llu after %llu", (unsigned long long)it.glsn,
                               (unsigned long long)last);
            last = it.glsn;
            sum += it.val;
        }
    }
    b_stop_timer(b);
    int64_t cpu = thread_cpu_ns() - cpu0;
    rng = seed;
    if (sum != (uint64_t)b->n * (size * (size - 1) / 2))
        return b_failf(b, "payload sum %llu", (unsigned long long)sum);
    b_report_metric(b, (double)b_elapsed_ns(b) / ((double)b->n * (double)size), "ns/item");
    b_report_metric(b, (double)cpu / (double)b->n, "cpu-ns/op");
}

/* ---- merge ------------------------------------------------------------------------- */

enum { MERGE_TOTAL = 65536 };

typedef struct merge_ctx {
    size_t k;
    tq_t *q;
    uint64_t *glsn;  /* the streams' entries, stream after stream */
    size_t *start;   /* stream s holds glsn[start[s] .. start[s + 1]) */
    size_t *pos;     /* the next entry of each stream */
    uint64_t wanted; /* the next GLSN the merge must deliver */
} merge_ctx_t;

static void merge_teardown(void *p)
{
    merge_ctx_t *m = p;
    if (!m)
        return;
    tq_destroy(m->q);
    free(m->glsn);
    free(m->start);
    free(m->pos);
    free(m);
}

static void *merge_setup(const void *arg)
{
    size_t k = *(const size_t *)arg;
    merge_ctx_t *m = calloc(1, sizeof(*m));
    uint32_t *owner = malloc(MERGE_TOTAL * sizeof(*owner));
    if (!m || !owner)
        goto fail;
    m->k = k;
    m->glsn = malloc(MERGE_TOTAL * sizeof(*m->glsn));
    m->start = calloc(k + 1, sizeof(*m->start));
    m->pos = calloc(k, sizeof(*m->pos));
    if (!m->glsn || !m->start || !m->pos || tq_create(k, &m->q) != VARLOG_OK)
        goto fail;
    /* Deal GLSNs 1..TOTAL to random streams, then lay the streams out one after another. */
    for (size_t g = 0; g < MERGE_TOTAL; g++) {
        owner[g] = (uint32_t)(splitmix(&rng) % k);
        m->start[owner[g] + 1]++;
    }
    for (size_t s = 0; s < k; s++)
        m->start[s + 1] += m->start[s];
    for (size_t s = 0; s < k; s++)
        m->pos[s] = m->start[s];
    for (size_t g = 0; g < MERGE_TOTAL; g++)
        m->glsn[m->pos[owner[g]]++] = g + 1;
    m->wanted = MERGE_TOTAL + 1; /* the first op starts a merge */
    free(owner);
    return m;
fail:
    free(owner);
    merge_teardown(m);
    return NULL;
}

/* Starts the merge over: every stream's head back in the queue. */
static void merge_restart(merge_ctx_t *m)
{
    tq_reset(m->q);
    for (size_t s = 0; s < m->k; s++) {
        m->pos[s] = m->start[s];
        if (m->pos[s] < m->start[s + 1])
            tq_push(m->q, m->glsn[m->pos[s]], s);
    }
    m->wanted = 1;
}

static void bench_merge(bench_b_t *b)
{
    merge_ctx_t *m = b->ctx;
    tq_t *q = m->q;
    int64_t cpu0 = thread_cpu_ns();
    for (long i = 0; i < b->n; i++) {
        tq_item_t it;
        if (tq_peek_min(q, &it) != VARLOG_OK) {
            if (m->wanted != MERGE_TOTAL + 1)
                return b_failf(b, "merge ended at %llu", (unsigned long long)m->wanted);
            merge_restart(m);
            if (tq_peek_min(q, &it) != VARLOG_OK)
                return b_failf(b, "no stream has an entry");
        }
        if (it.glsn != m->wanted)
            return b_failf(b, "delivered %llu, want %llu", (unsigned long long)it.glsn,
                           (unsigned long long)m->wanted);
        m->wanted++;
        size_t s = it.val;
        if (++m->pos[s] < m->start[s + 1])
            tq_replace_min(q, m->glsn[m->pos[s]], s, NULL);
        else
            tq_pop_min(q, NULL);
    }
    b_stop_timer(b);
    b_report_metric(b, (double)(thread_cpu_ns() - cpu0) / (double)b->n, "cpu-ns/op");
}

/* n / div, 0 for div 0 (clang warns of a division by a constant 0 even where not taken). */
#define SHARE_OF(n, div) ((div) ? (n) / ((div) ? (div) : 1) : 0)
#define PUSH_ROWS(name, mode, div)                                                                 \
    static const push_arg_t name##_128 = {128, SHARE_OF(128, div), mode},                          \
                            name##_1024 = {1024, SHARE_OF(1024, div), mode},                       \
                            name##_8192 = {8192, SHARE_OF(8192, div), mode}

PUSH_ROWS(noalloc, PLAIN, 0);
PUSH_ROWS(prealloc, PLAIN, 2);
PUSH_ROWS(locked, LOCKED, 2);
PUSH_ROWS(fresh, FRESH, 0);
PUSH_ROWS(drain, PLAIN, 1);
static const size_t k1 = 1, k4 = 4, k16 = 16, k64 = 64;

#define ROW(n, f, a, s, t)                                                                         \
    {                                                                                              \
        .name = n, .fn = f, .arg = &a, .setup = s, .teardown = t                                   \
    }
#define PUSH(n, f, a) ROW(n, f, a, push_setup, push_teardown)
#define MERGE(n, a) ROW(n, bench_merge, a, merge_setup, merge_teardown)

static const bench_t benches[] = {
    PUSH("TransmitQueue/NoAlloc/128", bench_push, noalloc_128),
    PUSH("TransmitQueue/NoAlloc/1024", bench_push, noalloc_1024),
    PUSH("TransmitQueue/NoAlloc/8192", bench_push, noalloc_8192),
    PUSH("TransmitQueue/PreAlloc/128", bench_push, prealloc_128),
    PUSH("TransmitQueue/PreAlloc/1024", bench_push, prealloc_1024),
    PUSH("TransmitQueue/PreAlloc/8192", bench_push, prealloc_8192),
    PUSH("TransmitQueue/Locked/128", bench_push, locked_128),
    PUSH("TransmitQueue/Locked/1024", bench_push, locked_1024),
    PUSH("TransmitQueue/Locked/8192", bench_push, locked_8192),
    PUSH("TransmitQueue/Fresh/128", bench_push, fresh_128),
    PUSH("TransmitQueue/Fresh/1024", bench_push, fresh_1024),
    PUSH("TransmitQueue/Fresh/8192", bench_push, fresh_8192),
    PUSH("TransmitQueue/PushDrain/128", bench_push_drain, drain_128),
    PUSH("TransmitQueue/PushDrain/1024", bench_push_drain, drain_1024),
    PUSH("TransmitQueue/PushDrain/8192", bench_push_drain, drain_8192),
    MERGE("TransmitQueue/Merge/k=1", k1),
    MERGE("TransmitQueue/Merge/k=4", k4),
    MERGE("TransmitQueue/Merge/k=16", k16),
    MERGE("TransmitQueue/Merge/k=64", k64),
};

int main(int argc, char **argv)
{
    static const bench_opts_t o = {.benchtime_ns = 200000000, .warmup_ns = 20000000};
    return bench_main(argc, argv, &o, benches, sizeof(benches) / sizeof(benches[0]));
}
