/* bench_allowlist: Go's BenchmarkAllowlistPick (pkg/varlog/allowlist_test.go) on the client's
 * allow list: 100 topics x 100 log streams, deny TTL 1 s, picks cycling over the topics.
 * Also the same with every other log stream denied, and with 4 threads picking at once.
 *
 *   bench_allowlist [-benchtime=MS] [FILTER]
 *
 * Prints Go benchmark lines (ns/op, B/op, allocs/op; allocations counted by alloc_count.c). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc_count.h"
#include "allowlist.h"
#include "metadata.h"

#define TOPICS 100
#define LOG_STREAMS 100
#define THREADS 4

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A metadata view of TOPICS topics with LOG_STREAMS log streams each (ids 1.. across them). */
static md_view_t *make_view(void)
{
    md_view_t *v = calloc(1, sizeof(*v));
    v->n_topics = TOPICS;
    v->topics = calloc(TOPICS, sizeof(md_topic_t));
    for (int t = 0; t < TOPICS; t++) {
        v->topics[t].topic_id = t + 1;
        v->topics[t].n_log_streams = LOG_STREAMS;
        v->topics[t].log_stream_ids = calloc(LOG_STREAMS, sizeof(int32_t));
        for (int l = 0; l < LOG_STREAMS; l++)
            v->topics[t].log_stream_ids[l] = t * LOG_STREAMS + l + 1;
    }
    return v;
}

static void free_view(md_view_t *v)
{
    for (size_t t = 0; t < v->n_topics; t++)
        free(v->topics[t].log_stream_ids);
    free(v->topics);
    free(v);
}

typedef struct job {
    allowlist_t *al;
    long n;
    int offset;
    long failures;
} job_t;

static void *pick_loop(void *arg)
{
    job_t *j = arg;
    int64_t now_ms = now_ns() / 1000000;
    for (long i = 0; i < j->n; i++) {
        int32_t ls;
        if (allowlist_pick(j->al, (int32_t)((i + j->offset) % TOPICS) + 1, now_ms, &ls, NULL,
                           NULL) != VARLOG_OK)
            j->failures++;
    }
    return NULL;
}

/* Runs n picks on `threads` threads; returns the elapsed ns, or -1 on a failed pick. */
static int64_t round_of(allowlist_t *al, long n, int threads)
{
    job_t jobs[THREADS];
    pthread_t th[THREADS];
    int64_t t0 = now_ns();
    for (int k = 0; k < threads; k++) {
        jobs[k] = (job_t){.al = al, .n = n / threads, .offset = k * 7};
        if (threads == 1)
            pick_loop(&jobs[k]);
        else
            pthread_create(&th[k], NULL, pick_loop, &jobs[k]);
    }
    long failures = 0;
    for (int k = 0; k < threads; k++) {
        if (threads > 1)
            pthread_join(th[k], NULL);
        failures += jobs[k].failures;
    }
    int64_t elapsed = now_ns() - t0;
    return failures ? -1 : elapsed;
}

static int64_t benchtime_ns = 1000000000;

static void run(const char *name, const char *filter, bool deny_half, int threads)
{
    if (filter && !strstr(name, filter))
        return;
    allowlist_t al;
    allowlist_init(&al);
    md_view_t *v = make_view();
    allowlist_renew(&al, v);
    if (deny_half) {
        int64_t until = now_ns() / 1000000 + 3600 * 1000;
        for (int t = 0; t < TOPICS; t++)
            for (int l = 0; l < LOG_STREAMS; l += 2)
                allowlist_deny(&al, t + 1, v->topics[t].log_stream_ids[l], until);
    }
    long n = threads;
    int64_t elapsed = 0;
    uint64_t allocs = 0, bytes = 0;
    for (;;) {
        uint64_t a0 = alloc_count_allocs(), b0 = alloc_count_bytes();
        elapsed = round_of(&al, n, threads);
        allocs = alloc_count_allocs() - a0;
        bytes = alloc_count_bytes() - b0;
        if (elapsed < 0) {
            printf("--- FAIL: %s: a pick failed\n", name);
            break;
        }
        if (elapsed >= benchtime_ns || n >= 2000000000L)
            break;
        double per = (double)elapsed / (double)n;
        long next = per > 0 ? (long)(1.2 * (double)benchtime_ns / per) : n * 100;
        n = next > n * 100 ? n * 100 : (next <= n ? n + 1 : next);
    }
    if (elapsed >= 0)
        printf("%s-%ld\t%10ld\t%10.2f ns/op\t%8llu B/op\t%6llu allocs/op\n", name,
               sysconf(_SC_NPROCESSORS_ONLN), n, (double)elapsed / (double)n,
               (unsigned long long)(bytes / (uint64_t)n),
               (unsigned long long)(allocs / (uint64_t)n));
    allowlist_destroy(&al);
    free_view(v);
}

int main(int argc, char **argv)
{
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "-benchtime=", 11) == 0)
            benchtime_ns = atol(argv[i] + 11) * 1000000LL;
        else
            filter = argv[i];
    }
    run("BenchmarkAllowlistPick", filter, false, 1);
    run("BenchmarkAllowlistPick/halfDenied", filter, true, 1);
    run("BenchmarkAllowlistPick/threads=4", filter, false, THREADS);
    return 0;
}
