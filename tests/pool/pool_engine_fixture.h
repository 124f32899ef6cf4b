#ifndef POOL_ENGINE_FIXTURE_H
#define POOL_ENGINE_FIXTURE_H

/* What the engine's tests (test_pool_workers.c, test_pool_callbacks.c, test_pool_lifecycle.c)
 * share: an engine made for one test, and jobs run by one handler that counts how many run at
 * once and which ran, and that a test can hold (GATED, STUCK) until it hands out tokens.
 * Every test program's main() calls engine_fixture_init() before its first test. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool_test_util.h"
#include "vq/vq.h"

/* Shared by the gated jobs of one test. */
typedef struct scene {
    tcount_t started, done, tokens;
    atomic_int running, peak, peak_busy;
    atomic_int ids[64];
    vq_engine_t *e;
} scene_t;

typedef struct sjob {
    scene_t *s;
    int id;
    int mode; /* see handler */
    atomic_int attempts;
    int result;
    tcount_t finished;
} sjob_t;

/* Never destroyed: waiting on it orders a stuck handler's last accesses before teardown. */
extern tcount_t stuck_returned;

enum { GATED, ERRS, PANICS, FAILS_ONCE, STUCK, PLAIN, BRIEF };

/* Initialises stuck_returned. (Baselines of the thread count come from
 * test_idle_thread_count, which allows for ThreadSanitizer's own thread.) */
void engine_fixture_init(void);

void scene_init(scene_t *s);
void scene_destroy(scene_t *s);
void sjob_init(sjob_t *j, scene_t *s, int id, int mode);

/* The jobs' handler and after-callback (arg: the sjob_t), and a spec with both. */
int handler(vq_ctx_t *ctx, void *arg);
void after(void *arg, int r);
vq_task_spec_t spec_of(sjob_t *j);

/* A handler that succeeds at once, arg unused. */
int ok_handler(vq_ctx_t *ctx, void *arg);

/* An engine of workers workers and a queue limit (0: none) that discards its log lines;
 * started when start is set. Fails the test otherwise. */
vq_engine_t *make(unsigned workers, size_t limit, bool start);

/* Whether the engine's busy metric reaches n within 5 s. */
bool busy_is(vq_engine_t *e, int64_t n);

/* For test_wait_until: whether the process is back to at most *(int *)arg threads. */
bool threads_back(void *arg);

#endif
