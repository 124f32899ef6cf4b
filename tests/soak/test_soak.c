/* The fault soak (issue 19, section 3): minutes of appends through every append API while the
 * embedded server injects faults on a schedule, then exact accounting of what every call said
 * against what the log holds and what the readers were given.
 *
 *   VARLOG_SOAK_SECONDS  length of the fault schedule (default 180)
 *   VARLOG_SOAK_RATE     calls per second of each appender producer (default 1000)
 *   VARLOG_SOAK_SEED     the schedule's seed (default: from the clock; printed)
 *
 * One topic with two log streams (a third is added part way). Four producers:
 *   0: an appender bound to log stream 1,
 *   1: a topic-wide appender,
 *   2: an appender bound to log stream 2,
 *   3: varlog_append and varlog_append_to (every log stream in turn), one call at a time;
 * calls of 1-3 records, each record naming its call (soak_ledger.h). Readers throughout: a
 * topic-wide varlog_subscribe (GLSN order) and a varlog_subscribe_to of log stream 1 (LLSN
 * order), both from position 1 for ever. Faults: soak_faults.h.
 *
 * Afterwards (faults cleared, appenders flushed and closed): every call had exactly one
 * outcome (a refused append none); every APPENDED record is stored once at the position its
 * outcome gave, with its bytes; nothing of a NOT_APPENDED call is stored; a MAYBE_APPENDED
 * call is stored once whole or not at all (both counted); the store is dense (GLSN 1..tail);
 * both readers delivered exactly the stored sequence; a fresh subscription over [1, tail]
 * reads it again. A summary table goes to stdout whatever the result. */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "client_fixture.h"
#include "soak_faults.h"
#include "soak_ledger.h"
#include "soak_readers.h"
#include "test_support.h"
#include "varlog/appender.h"

#define TOPIC 1
#define LOG_STREAMS 2
#define DEFAULT_SECONDS 180
#define DEFAULT_RATE 1000
#define MIN_CALLS 100000     /* the default run must make at least this many */
#define SYNC_TIMEOUT_MS 2000 /* per synchronous call */
#define QUEUE_WAIT_MS 100    /* an appender append's wait for room */
#define SETTLE_MS 120000     /* flush after the schedule; readers catching up */
#define WATCHDOG_EXTRA_S 900 /* beyond the schedule, before the program gives up */

static const char *const api_names[SOAK_APIS] = {"appender, bound", "appender, topic-wide",
                                                 "varlog_append", "varlog_append_to"};

typedef struct producer {
    int id;
    soak_api_t api; /* BOUND, TOPIC, or SYNC for producer 3 (SYNC and SYNC_TO alternate) */
    varlog_appender_t *app;
    pthread_t th;
    long rate;
    uint64_t rng;
} producer_t;

static soak_ledger_t ledger;
static client_fixture_t fx;
static soak_faults_t faults;
static atomic_bool stopping;

static long env_long(const char *name, long def, long min)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < min) {
        fprintf(stderr, "soak: %s=%s is not a number >= %ld; using %ld\n", name, v, min, def);
        return def;
    }
    return x;
}

static uint64_t rand_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static void on_result(const varlog_append_result_t *r, void *opaque)
{
    soak_settle(&ledger, opaque, r->err, r->outcome, r->n, r->metas, r->errtext);
}

/* Pacing toward `rate` calls a second: a schedule for the load, not a wait for a condition. */
static void pace(int64_t t0_ms, long done, long rate)
{
    int64_t due = t0_ms + done * 1000 / rate;
    int64_t ahead = due - test_now_ms();
    if (ahead > 0) {
        struct timespec ts = {.tv_sec = (time_t)(ahead / 1000),
                              .tv_nsec = (long)(ahead % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void *produce_appender(producer_t *p)
{
    varlog_record_t recs[SOAK_MAX_BATCH];
    unsigned char buf[SOAK_MAX_BATCH * SOAK_REC_MAX];
    int64_t t0 = test_now_ms();
    for (long i = 0; !atomic_load(&stopping); i++) {
        size_t n = 1 + (size_t)(rand_next(&p->rng) % SOAK_MAX_BATCH);
        soak_call_t *c = soak_new_call(&ledger, p->id, p->api, n, recs, buf);
        varlog_err_t rc = varlog_appender_append(p->app, recs, n, QUEUE_WAIT_MS, on_result, c);
        if (rc != VARLOG_OK)
            soak_refused(c, rc);
        pace(t0, i + 1, p->rate);
    }
    return NULL;
}

static void *produce_sync(producer_t *p)
{
    varlog_record_t recs[SOAK_MAX_BATCH];
    unsigned char buf[SOAK_MAX_BATCH * SOAK_REC_MAX];
    varlog_entry_meta_t metas[SOAK_MAX_BATCH];
    for (long i = 0; !atomic_load(&stopping); i++) {
        size_t n = 1 + (size_t)(rand_next(&p->rng) % SOAK_MAX_BATCH);
        bool to = i % 2;
        soak_call_t *c =
            soak_new_call(&ledger, p->id, to ? SOAK_API_SYNC_TO : SOAK_API_SYNC, n, recs, buf);
        /* APPENDED is what a failure must overwrite: the header promises an outcome
         * whatever the result. */
        varlog_outcome_t outcome = VARLOG_APPENDED;
        varlog_err_t rc;
        if (to) {
            int32_t ls = (int32_t)(1 + (i / 2) % atomic_load(&faults.max_ls));
            rc = varlog_append_to(fx.client, TOPIC, ls, recs, n, SYNC_TIMEOUT_MS, metas, &outcome);
        } else {
            rc = varlog_append(fx.client, TOPIC, recs, n, SYNC_TIMEOUT_MS, metas, &outcome);
        }
        soak_settle(&ledger, c, rc, outcome, n, rc == VARLOG_OK ? metas : NULL,
                    rc == VARLOG_OK ? "" : varlog_last_error());
    }
    return NULL;
}

static void *produce(void *arg)
{
    producer_t *p = arg;
    return p->app ? produce_appender(p) : produce_sync(p);
}

static void on_watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "soak: the watchdog fired: the run took far longer than its "
                              "schedule (something hangs)\n";
    ssize_t w = write(2, msg, sizeof(msg) - 1);
    (void)w;
    _exit(3);
}

static void print_summary(long seconds, uint64_t seed, const soak_tally_t *t, soak_reader_t *rd,
                          uint64_t rd_n[2], uint64_t read_back, int64_t run_ms)
{
    varlog_client_stats_t cs;
    memset(&cs, 0, sizeof(cs));
    if (fx.client)
        varlog_client_stats(fx.client, &cs);
    printf("\nsoak: %ld s of faults (seed %" PRIu64 "), %.1f s in all, 4 producers\n", seconds,
           seed, (double)run_ms / 1000.0);
    printf("%-22s %9s %9s %9s %9s %9s %9s %9s\n", "calls by API", "calls", "APPENDED", "NOT_APP.",
           "MAYBE", "stored", "absent", "refused");
    soak_tally_t sum;
    memset(&sum, 0, sizeof(sum));
    for (int a = 0; a < SOAK_APIS; a++) {
        printf("%-22s %9ld %9ld %9ld %9ld %9ld %9ld %9ld\n", api_names[a], t[a].calls,
               t[a].appended, t[a].not_appended, t[a].maybe, t[a].maybe_stored, t[a].maybe_absent,
               t[a].refused);
        sum.calls += t[a].calls;
        sum.appended += t[a].appended;
        sum.not_appended += t[a].not_appended;
        sum.maybe += t[a].maybe;
        sum.maybe_stored += t[a].maybe_stored;
        sum.maybe_absent += t[a].maybe_absent;
        sum.refused += t[a].refused;
        sum.records_stored += t[a].records_stored;
    }
    printf("%-22s %9ld %9ld %9ld %9ld %9ld %9ld %9ld\n", "all", sum.calls, sum.appended,
           sum.not_appended, sum.maybe, sum.maybe_stored, sum.maybe_absent, sum.refused);
    printf("failures by code and outcome (calls, one text each):\n");
    soak_print_texts(&ledger);
    printf("faults: %ld Append streams dropped, %ld delay periods (%ld past 2 s), %ld requests "
           "refused "
           "\"not primary replica\", %ld refused \"sealed\", %ld seal/unseal, %ld reader "
           "streams dropped, %ld log stream added, %ld stop/restart (%.1f s down)%s\n",
           faults.append_drops, faults.delays, faults.long_delays, faults.not_primary,
           faults.sealed_refusals, faults.seals, faults.reader_drops, faults.added, faults.restarts,
           (double)faults.down_ms / 1000.0,
           faults.failed_calls ? " -- SOME FAULT CALLS FAILED" : "");
    printf("client: %" PRIu64 " sync attempts, %" PRIu64 " retries, %" PRIu64 " lookups, %" PRIu64
           " GetMetadata, %" PRIu64 " denials\n",
           cs.append_attempts, cs.append_retries, cs.lookups, cs.metadata_fetches, cs.denials);
    printf("log: %" PRIu64 " entries (GLSN 1..%" PRIu64 "), %" PRIu64
           " in log stream 1; %ld records of stored calls\n",
           ledger.tail, ledger.tail, ledger.ls1_n, sum.records_stored);
    for (int i = 0; i < 2; i++) {
        varlog_subscription_stats_t s = soak_reader_stats(&rd[i]);
        printf("reader %-26s %9" PRIu64 " entries, %" PRIu64 " resubscribes (%" PRIu64
               " stalls), %" PRIu64 " duplicates dropped\n",
               rd[i].name, rd_n[i], s.resubscribes, s.stalls, s.duplicates);
    }
    printf("read back [1, tail]:               %9" PRIu64 " entries\n", read_back);
    printf("violations: %ld%s%s\n", atomic_load(&ledger.bad),
           atomic_load(&ledger.bad) ? "; first: " : "", ledger.first_bad);
    if (sum.records_stored != (long)ledger.tail)
        printf("note: records of stored calls %ld != entries %" PRIu64 "\n", sum.records_stored,
               ledger.tail);
    fflush(stdout);
}

static void test_soak(void **state)
{
    (void)state;
    long seconds = env_long("VARLOG_SOAK_SECONDS", DEFAULT_SECONDS, 1);
    long rate = env_long("VARLOG_SOAK_RATE", DEFAULT_RATE, 1);
    uint64_t seed = (uint64_t)env_long("VARLOG_SOAK_SEED", 0, 0);
    if (!seed)
        seed = (uint64_t)time(NULL);
    signal(SIGALRM, on_watchdog);
    alarm((unsigned)(seconds + WATCHDOG_EXTRA_S));
    printf("soak: %ld s, %ld calls/s per appender producer, seed %" PRIu64
           " (VARLOG_SOAK_SECONDS, VARLOG_SOAK_RATE, VARLOG_SOAK_SEED)\n",
           seconds, rate, seed);
    fflush(stdout);

    soak_ledger_init(&ledger);
    /* Metadata refreshed every second so that seals, unseals and the new log stream show; a
     * subscription outlives a restart (subscribe.retry.timeout.ms: 60 s without progress). */
    cf_start(&fx, 1, LOG_STREAMS, "metadata.refresh.interval.ms", "1000", "log.level", "crit",
             NULL);
    soak_faults_init(&faults, fx.srv, TOPIC, LOG_STREAMS, seed);

    soak_reader_t rd[2];
    soak_reader_start(&rd[0], "subscribe (GLSN order)", &ledger, fx.client, TOPIC, 0);
    soak_reader_start(&rd[1], "subscribe_to 1 (LLSN)", &ledger, fx.client, TOPIC, 1);

    producer_t prod[SOAK_PRODUCERS];
    memset(prod, 0, sizeof(prod));
    const int32_t bind[SOAK_PRODUCERS] = {1, 0, 2, -1};
    for (int i = 0; i < SOAK_PRODUCERS; i++) {
        prod[i].id = i;
        prod[i].rate = rate;
        prod[i].rng = seed * 31 + (uint64_t)i + 1;
        if (bind[i] >= 0) {
            prod[i].api = bind[i] ? SOAK_API_BOUND : SOAK_API_TOPIC;
            assert_int_equal(varlog_appender_new(fx.client, TOPIC, bind[i], &prod[i].app),
                             VARLOG_OK);
        } else {
            prod[i].api = SOAK_API_SYNC;
        }
    }
    int64_t t0 = test_now_ms();
    for (int i = 0; i < SOAK_PRODUCERS; i++)
        assert_int_equal(pthread_create(&prod[i].th, NULL, produce, &prod[i]), 0);

    soak_faults_run(&faults, seconds * 1000);

    atomic_store(&stopping, true);
    for (int i = 0; i < SOAK_PRODUCERS; i++)
        pthread_join(prod[i].th, NULL);
    soak_faults_clear(&faults);
    /* Every queued call settles within appender.delivery.timeout.ms; flush waits for that. */
    for (int i = 0; i < SOAK_PRODUCERS; i++) {
        if (!prod[i].app)
            continue;
        size_t pending = 0;
        varlog_err_t rc = varlog_appender_flush(prod[i].app, SETTLE_MS, &pending);
        if (rc != VARLOG_OK)
            soak_note_bad(&ledger, "producer %d: flush: %s, %zu calls pending", i,
                          varlog_err_name(rc), pending);
        varlog_appender_close(&prod[i].app, 1000);
    }

    soak_read_store(&ledger, fx.srv, TOPIC, atomic_load(&faults.max_ls));
    soak_tally_t tally[SOAK_APIS];
    soak_check_calls(&ledger, tally);

    uint64_t rd_n[2];
    if (!soak_reader_wait(&rd[0], ledger.tail, SETTLE_MS))
        soak_note_bad(&ledger, "%s: %" PRIu64 " of %" PRIu64 " entries after %d s", rd[0].name,
                      soak_reader_n(&rd[0]), ledger.tail, SETTLE_MS / 1000);
    if (!soak_reader_wait(&rd[1], ledger.ls1_n, SETTLE_MS))
        soak_note_bad(&ledger, "%s: %" PRIu64 " of %" PRIu64 " entries after %d s", rd[1].name,
                      soak_reader_n(&rd[1]), ledger.ls1_n, SETTLE_MS / 1000);
    soak_reader_compare(&rd[0], ledger.by_glsn, ledger.tail);
    soak_reader_compare(&rd[1], ledger.ls1, ledger.ls1_n);
    rd_n[0] = soak_reader_n(&rd[0]);
    rd_n[1] = soak_reader_n(&rd[1]);
    uint64_t read_back = soak_read_back(&ledger, fx.client, TOPIC, SETTLE_MS);

    print_summary(seconds, seed, tally, rd, rd_n, read_back, test_now_ms() - t0);
    soak_reader_close(&rd[0]);
    soak_reader_close(&rd[1]);
    cf_stop(&fx);

    long with_outcome = 0;
    for (int a = 0; a < SOAK_APIS; a++)
        with_outcome += tally[a].calls - tally[a].refused;
    long bad = atomic_load(&ledger.bad);
    char first[sizeof(ledger.first_bad)];
    snprintf(first, sizeof(first), "%s", ledger.first_bad);
    soak_ledger_free(&ledger);
    alarm(0);
    if (bad)
        fail_msg("%ld violations; the first: %s", bad, first);
    assert_int_equal(faults.failed_calls, 0);
    if (seconds >= DEFAULT_SECONDS && with_outcome < MIN_CALLS)
        fail_msg("%ld calls with an outcome, fewer than %d", with_outcome, MIN_CALLS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_soak)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
