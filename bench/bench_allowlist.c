/* bench_allowlist: Go's BenchmarkAllowlistPick (pkg/varlog/allowlist_test.go) on the client's
 * allow list: 100 topics x 100 log streams, deny TTL 1 s, picks cycling over the topics.
 * Also the same with every other log stream denied, and with 4 threads picking at once.
 *
 *   bench_allowlist [-benchtime=D|Nx] [-count=N] [-bench=REGEX] [FILTER]   (see harness.h)
 *
 * Prints Go benchmark lines (ns/op, B/op, allocs/op). A round of b.N picks includes starting
 * and joining the threads, as Go's RunParallel does. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "allowlist.h"
#include "harness.h"
#include "metadata.h"

#define TOPICS 100
#define LOG_STREAMS 100
#define THREADS 4

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
    int64_t now_ms = bench_now_ns() / 1000000;
    for (long i = 0; i < j->n; i++) {
        int32_t ls;
        if (allowlist_pick(j->al, (int32_t)((i + j->offset) % TOPICS) + 1, now_ms, &ls, NULL, NULL,
                           NULL) != VARLOG_OK)
            j->failures++;
    }
    return NULL;
}

typedef struct pick_case {
    bool deny_half; /* every other log stream of every topic denied */
    int threads;
} pick_case_t;

typedef struct pick_env {
    allowlist_t al;
    md_view_t *v;
} pick_env_t;

static void *pick_setup(const void *arg)
{
    const pick_case_t *c = arg;
    pick_env_t *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    allowlist_init(&e->al);
    e->v = make_view();
    allowlist_renew(&e->al, e->v);
    if (c->deny_half) {
        int64_t until = bench_now_ns() / 1000000 + 3600 * 1000;
        for (int t = 0; t < TOPICS; t++)
            for (int l = 0; l < LOG_STREAMS; l += 2)
                allowlist_deny(&e->al, t + 1, e->v->topics[t].log_stream_ids[l], until);
    }
    return e;
}

static void pick_teardown(void *ctx)
{
    pick_env_t *e = ctx;
    allowlist_destroy(&e->al);
    free_view(e->v);
    free(e);
}

/* b->n picks shared out over the case's threads. */
static void bench_pick(bench_b_t *b)
{
    const pick_case_t *c = b->arg;
    pick_env_t *e = b->ctx;
    job_t jobs[THREADS];
    pthread_t th[THREADS];
    for (int k = 0; k < c->threads; k++) {
        jobs[k] = (job_t){
            .al = &e->al, .n = b->n / c->threads + (k < b->n % c->threads), .offset = k * 7};
        if (c->threads == 1)
            pick_loop(&jobs[k]);
        else
            pthread_create(&th[k], NULL, pick_loop, &jobs[k]);
    }
    long failures = 0;
    for (int k = 0; k < c->threads; k++) {
        if (c->threads > 1)
            pthread_join(th[k], NULL);
        failures += jobs[k].failures;
    }
    if (failures)
        b_failf(b, "%ld of %ld picks failed", failures, b->n);
}

static const pick_case_t one = {false, 1}, half = {true, 1}, four = {false, THREADS};

static const bench_t benches[] = {
    {.name = "AllowlistPick",
     .fn = bench_pick,
     .arg = &one,
     .setup = pick_setup,
     .teardown = pick_teardown},
    {.name = "AllowlistPick/halfDenied",
     .fn = bench_pick,
     .arg = &half,
     .setup = pick_setup,
     .teardown = pick_teardown},
    {.name = "AllowlistPick/threads=4",
     .fn = bench_pick,
     .arg = &four,
     .setup = pick_setup,
     .teardown = pick_teardown},
};

int main(int argc, char **argv)
{
    static const bench_opts_t o = {.benchtime_ns = 1000000000};
    return bench_main(argc, argv, &o, benches, sizeof(benches) / sizeof(benches[0]));
}
