/* Resource bounds (issue 19, section 5): what the library holds stays within what its
 * configuration and headers promise, and goes away when the handles holding it close.
 *   - an appender's pending bytes and records never pass appender.queue.max.bytes / .records,
 *     with producers hammering it while the server stalls its answers;
 *   - resident memory comes back to its baseline once a heavy append and subscribe round is
 *     closed (the server is a child process, so that its log is not counted);
 *   - a thousand appenders and a thousand subscriptions opened and closed on one client leave
 *     no thread and no file descriptor behind.
 * Counts are scaled down under valgrind and TSan (test_scale). */
#include <dirent.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "child_server.h"
#include "client_fixture.h"
#include "test_support.h"
#include "varlog/varlog.h"

/* ---- (a) the queue bounds under producers and a stalled server ---------------------------- */

#define QUEUE_MAX_BYTES 65536
#define QUEUE_MAX_RECORDS 400
#define RECORD_MAX 1000
#define PRODUCERS 4

typedef struct bounds {
    varlog_appender_t *app;
    varlog_client_t *client;
    atomic_bool stop;
    atomic_long appended, refused, callbacks, failed_cbs, other_errors;
    atomic_uint_fast64_t max_bytes, max_records; /* as seen by any sampler */
    atomic_long over;                            /* samples above a bound */
} bounds_t;

static void note_max(atomic_uint_fast64_t *max, uint64_t v)
{
    uint_fast64_t cur = atomic_load(max);
    while (v > cur && !atomic_compare_exchange_weak(max, &cur, v))
        ;
}

/* One look at the appender's and the client's gauges, from whichever thread. */
static void sample(bounds_t *b)
{
    varlog_appender_stats_t st;
    if (varlog_appender_stats(b->app, &st) != VARLOG_OK) {
        atomic_fetch_add(&b->over, 1);
        return;
    }
    note_max(&b->max_bytes, st.pending_bytes);
    note_max(&b->max_records, st.pending_records);
    if (st.pending_bytes > QUEUE_MAX_BYTES || st.pending_records > QUEUE_MAX_RECORDS)
        atomic_fetch_add(&b->over, 1);
}

static void bounds_cb(const varlog_append_result_t *r, void *opaque)
{
    bounds_t *b = opaque;
    atomic_fetch_add(&b->callbacks, 1);
    if (r->err != VARLOG_OK)
        atomic_fetch_add(&b->failed_cbs, 1);
    sample(b); /* the call in its callback still counts: the bound must hold here too */
}

static void *producer_main(void *arg)
{
    bounds_t *b = arg;
    static const char payload[RECORD_MAX] = {0};
    for (unsigned i = 0; !atomic_load(&b->stop); i++) {
        /* Sizes that do not divide the bound, calls of one to three records, and timeouts
         * that refuse at once or wait a little for room. */
        size_t n = 1 + i % 3, len = 64 + (i * 389) % (RECORD_MAX / 3 - 64);
        varlog_record_t r[3];
        for (size_t k = 0; k < n; k++)
            r[k] = (varlog_record_t){.data = payload, .len = len};
        varlog_err_t rc = varlog_appender_append(b->app, r, n, i % 2 ? 0 : 5, bounds_cb, b);
        if (rc == VARLOG_OK)
            atomic_fetch_add(&b->appended, 1);
        else if (rc == VARLOG_ERR_QUEUE_FULL)
            atomic_fetch_add(&b->refused, 1);
        else
            atomic_fetch_add(&b->other_errors, 1);
    }
    return NULL;
}

static void test_queue_bounds_under_stalled_server(void **state)
{
    (void)state;
    char bytes[16], records[16];
    snprintf(bytes, sizeof(bytes), "%d", QUEUE_MAX_BYTES);
    snprintf(records, sizeof(records), "%d", QUEUE_MAX_RECORDS);
    client_fixture_t f;
    cf_start(&f, 1, 2, "appender.queue.max.bytes", bytes, "appender.queue.max.records", records,
             "appender.batch.max.bytes", "8192", "appender.batch.max.records", "100", NULL);
    bounds_t b = {.client = f.client};
    assert_int_equal(varlog_appender_new(f.client, 1, 0, &b.app), VARLOG_OK);
    /* Every AppendRequest is answered 50 ms after it was read: the pipelines fill at once
     * and the queue behind them is what the producers run into. */
    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_APPEND, 50), VARLOG_OK);

    pthread_t th[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, producer_main, &b), 0);
    /* Sampling, not synchronisation: the gauges are read as often as the loop goes, for a
     * fixed time in which the queue fills and drains many times over. */
    int64_t until = test_now_ms() + 1500;
    uint64_t client_max = 0;
    long samples = 0;
    while (test_now_ms() < until) {
        sample(&b);
        varlog_stats_t st;
        assert_int_equal(varlog_stats_get(f.client, &st), VARLOG_OK);
        if (st.pending_bytes > client_max)
            client_max = st.pending_bytes;
        samples++;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&b.stop, true);
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(th[i], NULL);

    assert_int_equal(varlog_server_delay(f.srv, CF_PATH_APPEND, 0), VARLOG_OK);
    assert_int_equal(varlog_appender_flush(b.app, cf_wait_bound_ms() * 3, NULL), VARLOG_OK);
    varlog_appender_stats_t end;
    assert_int_equal(varlog_appender_stats(b.app, &end), VARLOG_OK);
    printf("queue bounds: %ld calls queued, %ld refused QUEUE_FULL, %ld samples; most pending "
           "%llu bytes (bound %d) and %llu records (bound %d); client-wide %llu bytes\n",
           atomic_load(&b.appended), atomic_load(&b.refused), samples,
           (unsigned long long)atomic_load(&b.max_bytes), QUEUE_MAX_BYTES,
           (unsigned long long)atomic_load(&b.max_records), QUEUE_MAX_RECORDS,
           (unsigned long long)client_max);
    assert_int_equal(varlog_appender_close(&b.app, 1000), VARLOG_OK);
    cf_stop(&f);

    assert_int_equal(atomic_load(&b.over), 0);
    assert_true(client_max <= QUEUE_MAX_BYTES);
    assert_int_equal(atomic_load(&b.other_errors), 0);
    assert_int_equal(atomic_load(&b.failed_cbs), 0);
    assert_int_equal(atomic_load(&b.callbacks), atomic_load(&b.appended));
    assert_int_equal(end.pending_bytes, 0);
    assert_int_equal(end.pending_records, 0);
    /* Proof that the bound was met rather than never approached: producers were refused,
     * and what was pending came within one call (at most 3 records of RECORD_MAX / 3) of
     * one of the bounds. */
    assert_true(atomic_load(&b.refused) > 0);
    assert_true(atomic_load(&b.max_bytes) > QUEUE_MAX_BYTES - RECORD_MAX ||
                atomic_load(&b.max_records) > QUEUE_MAX_RECORDS - 3);
}

/* ---- (b) resident memory after a heavy round ------------------------------------------------ */

#define REC_LEN 100

typedef struct server_child {
    pid_t pid;
    char addr[64];
} server_child_t;

static server_child_t child = {.pid = -1};

static varlog_client_t *open_client(const char *addr)
{
    varlog_conf_t *conf = varlog_conf_new();
    assert_non_null(conf);
    assert_int_equal(varlog_conf_set(conf, "metadata.addresses", addr, NULL, 0), VARLOG_OK);
    assert_int_equal(varlog_conf_set(conf, "log.level", "err", NULL, 0), VARLOG_OK);
    varlog_client_t *c = NULL;
    char err[512];
    if (varlog_client_new(&conf, &c, err, sizeof(err)) != VARLOG_OK)
        fail_msg("varlog_client_new: %s", err);
    return c;
}

static atomic_long round_cbs, round_failed;

static void round_cb(const varlog_append_result_t *r, void *opaque)
{
    (void)opaque;
    if (r->err != VARLOG_OK)
        atomic_fetch_add(&round_failed, 1);
    atomic_fetch_add(&round_cbs, 1);
}

/* Appends n records of REC_LEN bytes through an appender, in calls of 10, while a
 * subscription opened first reads the topic from GLSN `from`; returns when it read them
 * all. Everything it opened is closed again. *peak receives the RSS at its height. */
static void heavy_round(varlog_client_t *c, long n, uint64_t from, long *peak)
{
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(c, 1, from, VARLOG_GLSN_MAX, &sub), VARLOG_OK);
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(c, 1, 0, &app), VARLOG_OK);
    char payload[REC_LEN];
    memset(payload, 'r', sizeof(payload));
    varlog_record_t r[10];
    for (int k = 0; k < 10; k++)
        r[k] = (varlog_record_t){.data = payload, .len = sizeof(payload)};
    atomic_store(&round_cbs, 0);
    for (long i = 0; i < n; i += 10)
        assert_int_equal(varlog_appender_append(app, r, 10, -1, round_cb, NULL), VARLOG_OK);
    assert_int_equal(varlog_appender_flush(app, cf_wait_bound_ms() * 6, NULL), VARLOG_OK);
    assert_int_equal(atomic_load(&round_cbs), n / 10);
    long after_append = test_rss_kib();
    varlog_entry_t e;
    for (long got = 0; got < n; got++) {
        varlog_err_t rc = varlog_subscription_next(sub, cf_wait_bound_ms(), &e);
        if (rc != VARLOG_OK)
            fail_msg("entry %ld of %ld: %s: %s", got, n, varlog_err_name(rc), varlog_last_error());
        assert_int_equal(e.len, REC_LEN);
    }
    long after_read = test_rss_kib();
    *peak = after_append > after_read ? after_append : after_read;
    assert_int_equal(varlog_appender_close(&app, 1000), VARLOG_OK);
    varlog_subscription_close(&sub);
    assert_int_equal(atomic_load(&round_failed), 0);
}

/* Set when the memory check could not judge (its CTest entry then reports Skipped). */
static bool memory_unjudged;

static void test_memory_returns_after_close(void **state)
{
    (void)state;
    child.pid =
        child_server_start(VARLOG_SERVER_PROGRAM, 1, 2, 1ull << 30, child.addr, sizeof(child.addr));
    assert_true(child.pid > 0);
    long cold = test_rss_kib();

    /* A small round first: gRPC's and the library's one-time state (the gRPC core, its
     * thread pools, the allocator's arenas) is there from then on and is not the round's. */
    long warm_n = 1000, n = test_scale(300000, 30), peak = 0;
    varlog_client_t *c = open_client(child.addr);
    heavy_round(c, warm_n, 1, &peak);
    varlog_client_destroy(c);
    malloc_trim(0);
    long warm = test_rss_kib();

    c = open_client(child.addr);
    heavy_round(c, n, (uint64_t)warm_n + 1, &peak);
    varlog_client_destroy(c);
    long closed = test_rss_kib();
    malloc_trim(0); /* what stays after this is held, not cached by the allocator */
    long trimmed = test_rss_kib();
    child_server_stop(child.pid);
    child.pid = -1;

    long data_kib = n * REC_LEN / 1024;
    printf("RSS (KiB): cold %ld, warm baseline %ld, peak %ld during %ld records (%ld KiB of "
           "payload), %ld after closing (+%ld), %ld after malloc_trim (+%ld)\n",
           cold, warm, peak, n, data_kib, closed, closed - warm, trimmed, trimmed - warm);
    if (test_under_asan() || test_under_valgrind() || test_under_tsan()) {
        /* ASan's redzones and quarantine, TSan's shadow memory and its own allocator, and
         * valgrind's allocator decide resident memory there (test_support.h): the figures
         * are printed, not judged. */
        printf("RSS bound not checked under %s: skipped\n", test_under_asan()   ? "ASan"
                                                            : test_under_tsan() ? "TSan"
                                                                                : "valgrind");
        memory_unjudged = true;
        skip();
    }
    assert_true(peak > warm); /* the round did hold memory, so a return to baseline means it */
    /* Generous: the allocator may keep what it freed (closed), but not much once trimmed. */
    assert_true(closed - warm <= 64 * 1024);
    assert_true(trimmed - warm <= 8 * 1024);
}

/* ---- (c) a thousand handles, no thread or descriptor left ----------------------------------- */

static int fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own */
}

typedef struct fd_goal {
    int want, last;
} fd_goal_t;

static bool fds_back(void *arg)
{
    fd_goal_t *g = arg;
    g->last = fd_count();
    return g->last <= g->want;
}

/* The process's threads by name. gRPC core's own threads (its executors, timers, event
 * engine) are gRPC's to start and keep: its executor grows under load and keeps what it
 * grew until gRPC shuts down. Every other thread (the library's, named or not, and the
 * test's) is counted against the baseline. */
typedef struct census {
    int n;
    struct {
        char name[20];
        int count;
    } by[64];
    int grpc; /* threads of gRPC core, not compared */
} census_t;

/* Threads of a pool that grows with load and keeps what it grew, up to its own bound: gRPC
 * core's, and the client's retry engine's workers (retry.workers, 8 by default; asserted
 * apart). A slow build (UBSan's Debug) had the engine at 9 more threads after the round. */
static bool grpc_thread(const char *name)
{
    static const char *const names[] = {"default-executo", "resolver-execut", "grpc_global_tim",
                                        "event_engine",    "timer_manager",   "grpc_",
                                        "vq-worker"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strncmp(name, names[i], strlen(names[i])) == 0)
            return true;
    return false;
}

static void take_census(census_t *c)
{
    memset(c, 0, sizeof(*c));
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[20] = "";
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* exited meanwhile */
        if (fgets(comm, sizeof(comm), f))
            comm[strcspn(comm, "\n")] = '\0';
        fclose(f);
        if (grpc_thread(comm)) {
            c->grpc++;
            continue;
        }
        int i = 0;
        while (i < c->n && strcmp(c->by[i].name, comm) != 0)
            i++;
        if (i == c->n && c->n < 64)
            snprintf(c->by[c->n++].name, sizeof(c->by[0].name), "%s", comm);
        if (i < 64)
            c->by[i].count++;
    }
    if (d)
        closedir(d);
}

/* The first name whose count differs between a and b, or NULL. */
static const char *census_differs(const census_t *a, const census_t *b)
{
    for (int pass = 0; pass < 2; pass++) {
        const census_t *x = pass ? b : a, *y = pass ? a : b;
        for (int i = 0; i < x->n; i++) {
            int other = 0;
            for (int j = 0; j < y->n; j++)
                if (strcmp(x->by[i].name, y->by[j].name) == 0)
                    other = y->by[j].count;
            if (other != x->by[i].count)
                return x->by[i].name;
        }
    }
    return NULL;
}

static int census_count(const census_t *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->by[i].name, name) == 0)
            return c->by[i].count;
    return 0;
}

/* The baseline: what was closed before it is no longer listed (test_support.h: a joined
 * thread stays listed for a moment), and the census has not changed for CENSUS_STEADY_MS, so
 * that a thread caught between its creation and its naming (it bears its creator's name
 * until named; under TSan that window was once caught by two censuses 50 us apart) is not
 * taken for a thread of its creator's kind. */
enum { CENSUS_STEADY_MS = 50 };

typedef struct census_settle {
    census_t prev, last;
    bool have_prev;
    int64_t steady_since_ms;
} census_settle_t;

static bool census_settled(void *arg)
{
    census_settle_t *s = arg;
    take_census(&s->last);
    int64_t now = test_now_ms();
    if (!s->have_prev || census_differs(&s->prev, &s->last) != NULL)
        s->steady_since_ms = now;
    s->prev = s->last;
    s->have_prev = true;
    return now - s->steady_since_ms >= CENSUS_STEADY_MS &&
           census_count(&s->last, "varlog-appender") == 0 &&
           census_count(&s->last, "varlog-sub") == 0;
}

static void census_print(const char *when, const census_t *c)
{
    printf("threads %s:", when);
    for (int i = 0; i < c->n; i++)
        printf(" %s x%d", c->by[i].name, c->by[i].count);
    printf(" (and %d of gRPC core's)\n", c->grpc);
}

typedef struct census_goal {
    const census_t *want;
    census_t last;
} census_goal_t;

static bool census_back(void *arg)
{
    census_goal_t *g = arg;
    take_census(&g->last);
    return census_differs(g->want, &g->last) == NULL;
}

static atomic_long many_cbs, many_failed, many_entries;
static atomic_flag many_first_failure = ATOMIC_FLAG_INIT;
static char many_failure[600]; /* the first failed call's error, written once */

static void many_cb(const varlog_append_result_t *r, void *opaque)
{
    (void)opaque;
    if (r->err == VARLOG_OK) {
        atomic_fetch_add(&many_cbs, 1);
        return;
    }
    if (!atomic_flag_test_and_set(&many_first_failure))
        snprintf(many_failure, sizeof(many_failure), "%s (%s): %s", varlog_err_name(r->err),
                 varlog_outcome_name(r->outcome), r->errtext);
    atomic_fetch_add(&many_failed, 1);
}

static void many_entry(const varlog_entry_t *entry, void *opaque)
{
    (void)entry, (void)opaque;
    atomic_fetch_add(&many_entries, 1);
}

static bool entries_reached(void *arg)
{
    return atomic_load(&many_entries) >= *(long *)arg;
}

static void test_thousand_handles_leave_nothing(void **state)
{
    (void)state;
    client_fixture_t f;
    /* What is measured is what the handles leave, not latency: while the appends wait, the
     * embedded server streams every record to every subscription (n * n / 2 entries), and
     * beside two CPU hogs under ASan 6% of the appends had no answer within the default 10 s
     * attempt timeout. */
    cf_start(&f, 1, 2, "append.attempt.timeout.ms", "60000", "appender.delivery.timeout.ms",
             "120000", NULL);
    varlog_record_t r = cf_record("entry");
    for (int i = 0; i < 10; i++)
        assert_int_equal(varlog_append(f.client, 1, &r, 1, 5000, NULL, NULL), VARLOG_OK);
    /* Warm: one of each, so that what gRPC opens once (its pollers, the connection to the
     * storage node) is in the baseline. */
    varlog_appender_t *app = NULL;
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_appender_new(f.client, 1, 0, &app), VARLOG_OK);
    assert_int_equal(varlog_appender_append(app, &r, 1, -1, many_cb, NULL), VARLOG_OK);
    assert_int_equal(varlog_appender_close(&app, cf_wait_bound_ms()), VARLOG_OK);
    assert_int_equal(varlog_subscribe_iter(f.client, 1, 1, VARLOG_GLSN_MAX, &sub), VARLOG_OK);
    varlog_entry_t e;
    assert_int_equal(varlog_subscription_next(sub, cf_wait_bound_ms(), &e), VARLOG_OK);
    varlog_subscription_close(&sub);
    census_settle_t settle = {.have_prev = false};
    if (!test_wait_until(census_settled, &settle, cf_wait_bound_ms())) {
        census_print("at the baseline", &settle.last);
        fail_msg("the threads did not settle before the round");
    }
    census_t before = settle.last;
    int threads0 = test_thread_count(), fds0 = fd_count();

    /* Under TSan, 100 of each left the embedded server in this process deaf to new calls for
     * longer than any timeout (even a new client's discovery), while 1,000 of each pass in
     * the plain and ASan builds: not understood yet (gRPC core's own limits under TSan's
     * memory use is a guess); 20 of each still shows the handles leave nothing behind. */
    long n = test_under_tsan() ? 20 : test_scale(1000, 10);
    varlog_appender_t **apps = calloc((size_t)n, sizeof(*apps));
    varlog_subscription_t **subs = calloc((size_t)n, sizeof(*subs));
    assert_non_null(apps);
    assert_non_null(subs);
    /* All open at once, every appender with a call and every subscription reading. */
    atomic_store(&many_cbs, 0);
    atomic_store(&many_entries, 0);
    varlog_subscribe_handlers_t h = {.on_entry = many_entry};
    for (long i = 0; i < n; i++) {
        assert_int_equal(varlog_appender_new(f.client, 1, (int32_t)(i % 3), &apps[i]), VARLOG_OK);
        assert_int_equal(varlog_appender_append(apps[i], &r, 1, -1, many_cb, NULL), VARLOG_OK);
        varlog_err_t rc = i % 2 ? varlog_subscribe(f.client, 1, 1, VARLOG_GLSN_MAX, &h, &subs[i])
                                : varlog_subscribe_iter(f.client, 1, 1, VARLOG_GLSN_MAX, &subs[i]);
        if (rc != VARLOG_OK)
            fail_msg("subscription %ld of %ld: %s: %s", i, n, varlog_err_name(rc),
                     varlog_last_error());
    }
    long want_entries = n / 2 * 10; /* the handler-form half, 10 entries each at least */
    assert_true(test_wait_until(entries_reached, &want_entries, cf_wait_bound_ms() * 3));
    int threads_open = test_thread_count(), fds_open = fd_count();
    for (long i = 0; i < n; i++) {
        assert_int_equal(varlog_appender_close(&apps[i], cf_wait_bound_ms()), VARLOG_OK);
        varlog_subscription_close(&subs[i]);
    }
    if (atomic_load(&many_cbs) != n)
        fail_msg("%ld of %ld appends stored, %ld failed; the first: %s", atomic_load(&many_cbs), n,
                 atomic_load(&many_failed), many_failure);

    /* One after the other: open, use, close, a thousand times. */
    for (long i = 0; i < n; i++) {
        assert_int_equal(varlog_appender_new(f.client, 1, 0, &app), VARLOG_OK);
        assert_int_equal(varlog_subscribe(f.client, 1, 1, 11, &h, &sub), VARLOG_OK);
        assert_int_equal(varlog_appender_close(&app, 0), VARLOG_OK);
        varlog_subscription_close(&sub);
    }

    /* Threads stay listed for a moment after their join (test_support.h): awaited. */
    census_goal_t cg = {.want = &before};
    test_wait_until(census_back, &cg, cf_wait_bound_ms());
    int threads1 = test_thread_count();
    fd_goal_t g = {.want = fds0};
    test_wait_until(fds_back, &g, cf_wait_bound_ms());
    const char *differs = census_differs(&before, &cg.last);
    printf("%ld appenders and %ld subscriptions: threads %d before, %d while open, %d after "
           "(gRPC core's own: %d before, %d after); file descriptors %d before, %d while "
           "open, %d after\n",
           n, n, threads0, threads_open, threads1, before.grpc, cg.last.grpc, fds0, fds_open,
           g.last);
    if (differs) {
        census_print("before", &before);
        census_print("after", &cg.last);
        fail_msg("threads named \"%s\" are not as many as before", differs);
    }
    assert_int_equal(test_thread_count_named("varlog-appender"), 0);
    assert_int_equal(test_thread_count_named("varlog-sub"), 0);
    /* the retry engine's workers stay within retry.workers, and the blocked-callback spares
     * the dispatcher may add (one per worker at most) */
    assert_true(test_thread_count_named("vq-worker") <= 2 * 8);
    assert_true(g.last <= fds0);
    /* and the client is whole */
    varlog_err_t rc = varlog_append(f.client, 1, &r, 1, 5000, NULL, NULL);
    if (rc != VARLOG_OK)
        fail_msg("an append after the handles closed: %s: %s", varlog_err_name(rc),
                 varlog_last_error());
    free(apps);
    free(subs);
    cf_stop(&f);
}

static int teardown(void **state)
{
    (void)state;
    child_server_stop(child.pid);
    child.pid = -1;
    return 0;
}

/* test_resource_bounds [--skip PATTERN | PATTERN]: the tests (not) matching PATTERN; CTest
 * runs the memory check apart. Exits 77 when the memory check ran alone and was skipped. */
int main(int argc, char **argv)
{
    bool memory_only = false;
    if (argc == 3 && strcmp(argv[1], "--skip") == 0) {
        cmocka_set_skip_filter(argv[2]);
    } else if (argc == 2) {
        cmocka_set_test_filter(argv[1]);
        memory_only = strcmp(argv[1], "test_memory_returns_after_close") == 0;
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [--skip PATTERN | PATTERN]\n", argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_bounds_under_stalled_server),
        cmocka_unit_test_teardown(test_memory_returns_after_close, teardown),
        cmocka_unit_test(test_thousand_handles_leave_nothing),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return failed == 0 && memory_only && memory_unjudged ? 77 : failed;
}
