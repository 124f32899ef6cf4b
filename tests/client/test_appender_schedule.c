/* The appender's lane life under a randomized schedule (issue 24): appends, answers, slow
 * answers, injected refusals and stream drops, hung nodes, slow callbacks, delivery and
 * attempt deadlines, retries, flushes and closes, drawn from a seeded generator against the
 * embedded server, in episodes that each draw their own configuration. After every step:
 *   - every call gets exactly one callback (the fixture's tracker), and none later than its
 *     delivery deadline plus SLACK (see slack_ms), nor after the close of its appender;
 *   - no log stream is denied while the node has done nothing to deserve it (a clean phase:
 *     no injected fault, answers at once or slower than the delivery deadline, always within
 *     the attempt timeout), once the effects of the last fault had time to pass;
 *   - a lane whose stream is gone carries no flag from it (checked on the appender's own
 *     thread at every round: app_expire_waiting_locked is wrapped at link time);
 *   - every error names its real cause: a code the node was made to send, the appender's own
 *     delivery deadline, a hung node's attempt timeout, or the close;
 *   - no record is stored twice (unless append.retry.maybe.appended), an APPENDED call's
 *     records are stored once at the position its callback gave, a NOT_APPENDED call's not
 *     at all (issue 35: seals, unseals and drops after the write are drawn too, and
 *     append.retries -1, which waits refusals out, and the read-back of ambiguous batches);
 *   - in bound mode, callbacks run in call order, whatever their outcome (issue 34: a
 *     deadline that settled an older batch in flight or in a retry and younger waiting ones
 *     ran the younger ones' callbacks first). In topic mode a batch sent again after a
 *     failure may go after younger ones (appender.h); the tracker checks there the order of
 *     the calls stored in each log stream.
 *
 * VARLOG_SCHEDULE_SEED=<n> replays a schedule (the same steps and configurations; the
 * interleaving with the network is the machine's); VARLOG_SCHEDULE_SECONDS sets how long it
 * runs (default: about 3 s, one longer episode in valgrind and TSan builds);
 * VARLOG_SCHEDULE_VERBOSE=1 prints every step and callback; VARLOG_SCHEDULE_EPISODE=<e>
 * starts at episode e of the seed's schedule. The seed is printed at the start and with any
 * failure. */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "appender_fixture.h"
#include "appender_internal.h"
#include "test_support.h"
#include "wire.h"

/* ---- the generator ------------------------------------------------------------------------ */

static uint64_t g_seed;
static int g_episode, g_step;

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int64_t rng_below(uint64_t *s, int64_t n)
{
    return n > 0 ? (int64_t)(rng_next(s) % (uint64_t)n) : 0;
}

static bool rng_pct(uint64_t *s, int pct)
{
    return rng_below(s, 100) < pct;
}

/* Fails the test with what to replay. */
#define SCHED_FAIL(...)                                                                            \
    do {                                                                                           \
        print_error("replay: VARLOG_SCHEDULE_SEED=%" PRIu64 " (episode %d, step %d)\n", g_seed,    \
                    g_episode, g_step);                                                            \
        fail_msg(__VA_ARGS__);                                                                     \
    } while (0)

/* ---- what the appender's thread sees: no flag outlives its stream ------------------------ */

static atomic_long g_rounds; /* rounds checked */

int64_t __real_app_expire_waiting_locked(app_thread_state_t *ts, int64_t now_ms);
int64_t __wrap_app_expire_waiting_locked(app_thread_state_t *ts, int64_t now_ms);

int64_t __wrap_app_expire_waiting_locked(app_thread_state_t *ts, int64_t now_ms)
{
    const varlog_appender_t *app = ts->app;
    for (size_t i = 0; i < app->n_lanes; i++) {
        const app_lane_t *l = app->lanes[i];
        if (!l->st.rpc && (l->st.cancel != APP_CANCEL_NONE || l->st.answered != 0))
            atu_note_bad("lane of log stream %d: no stream, but cancel %d and %zu answers "
                         "left from the last",
                         l->ls, (int)l->st.cancel, l->st.answered);
    }
    atomic_fetch_add(&g_rounds, 1);
    return __real_app_expire_waiting_locked(ts, now_ms);
}

/* ---- a deadline check held until its batches are answered ---------------------------------
 * The window of issue 24's first defect: every batch on a stream answered after the thread
 * last drained it and its deadline passing before the thread checks, so that the cancel's
 * end finds nothing riding on the stream. It opens by itself only under load; when the
 * schedule asks, a check that finds a lane's deadline near is held until that deadline (and
 * a few ms more for the answers), at most hold_ms, which the callbacks' slack covers. */

static _Atomic(int64_t) g_hold_ms; /* 0: checks run freely */
static atomic_long g_holds, g_windows;

int64_t __real_app_inflight_deadline(const app_lane_t *lane);
int64_t __wrap_app_inflight_deadline(const app_lane_t *lane);

/* On the appender's thread, which completes its own streams in its poller's poll: what
 * reached the stream while the check is held gets in only when it polls, here, as its own
 * wait would (test_appender_lane's poll_in). */
static bool all_answered(const app_lane_t *lane)
{
    while (rpc_poller_poll(lane->app->poller, 0) != RPC_POLL_TIMEOUT)
        ;
    return rpc_stream_buffered(lane->st.rpc) >= lane->inflight.n;
}

int64_t __wrap_app_inflight_deadline(const app_lane_t *lane)
{
    int64_t expiry = __real_app_inflight_deadline(lane);
    int64_t hold = atomic_load(&g_hold_ms);
    if (hold <= 0)
        return expiry;
    int64_t due = lane->inflight.head->sent_ms + lane->app->attempt_timeout_ms;
    if (expiry < due)
        due = expiry;
    int64_t now = wire_now_ms();
    if (due - now > hold)
        return expiry;
    atomic_fetch_add(&g_holds, 1);
    /* The time under test is the deadline: the check waits for the clock to pass it (in 1 ms
     * steps, polling the answers in), then at most 5 ms more for answers already on their
     * way. */
    while ((now = wire_now_ms()) < due || (!all_answered(lane) && now < due + 5))
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    if (all_answered(lane))
        atomic_fetch_add(&g_windows, 1);
    return expiry;
}

/* ---- one episode -------------------------------------------------------------------------- */

enum { MAX_CALLS = 4096 };

typedef struct episode episode_t;

typedef struct scall {
    call_t c; /* first: track's */
    episode_t *ep;
    int64_t appended_ms;
    int gen;             /* the appender it went to (a close opens the next) */
    int64_t slow_ms;     /* the callback takes this long */
    bool queued;         /* the append returned OK: one callback is owed */
    char payload[2][48]; /* unique per call and record: the log is checked for copies */
    atomic_llong at_ms;
} scall_t;

struct episode {
    fixture_t x;
    uint64_t rng;
    /* the configuration */
    bool topic;
    int32_t n_ls;
    int64_t delivery, attempt;
    int retries, depth, batch_max, linger;
    bool retry_maybe;
    int64_t clean_delay; /* answers slower than this are a fault of the node */
    int64_t hold_ms;     /* how long a deadline check may be held */
    int64_t slack;
    /* what the node was made to do this episode (callbacks read them) */
    atomic_uint injected; /* bit c: grpc code c sent by fail_next */
    atomic_bool dropped, hung;
    bool sealed; /* a log stream is sealed now (step_clean unseals) */
    /* the machine's stalls (stall_watch) */
    pthread_t watcher;
    atomic_bool watch_stop;
    atomic_llong stalled_at;
    atomic_long stalls;
    /* the close in progress (gen) and the last one that returned */
    atomic_int closing_gen, closed_gen;
    int gen;
    bool slow_pending; /* at most one slow callback owed at a time */
    /* the clean phase: since when, and the denials once its settling time passed */
    bool clean;
    int64_t clean_since;
    bool baseline_taken;
    uint64_t denials_base;
    scall_t *calls;
    size_t n_calls;
    atomic_long last_cb; /* bound mode: the call of the last callback (-1: none yet) */
    long steps, appends, faults, closes;
};

/* How late a callback may be, beyond its delivery deadline: the thread's time to notice (a
 * round, a stream's end: milliseconds, but a loaded CI machine stalls for hundreds), one
 * slow callback ahead of it (at most delivery / 4, one owed at a time) and a held check.
 * Slowed builds take a second or more for what takes milliseconds. */
static int64_t slack_ms(const episode_t *ep)
{
    return (test_under_valgrind() || test_under_tsan() ? 3000 : 1000) + ep->delivery / 4 +
           ep->hold_ms;
}

/* ---- the machine's stalls ------------------------------------------------------------------
 * The embedded server shares the process and the cores: on a loaded machine (a CI run beside
 * other builds) a node that was told to answer at once can miss an attempt timeout because it
 * did not run. A watcher notes when a 5 ms sleep overran by more than STALL_MS; the verdicts
 * that hold the node to its timing (an attempt timeout with no hang injected, a denial in a
 * clean phase) are suspended for an attempt timeout plus the slack after each. The other
 * checks hold however loaded the machine is. */
#define STALL_MS 25

static void sleep_ms(int64_t ms);

static void *stall_watch(void *arg)
{
    episode_t *ep = arg;
    int64_t limit = STALL_MS * (test_under_valgrind() || test_under_tsan() ? 10 : 1);
    while (!atomic_load(&ep->watch_stop)) {
        int64_t t = test_now_ms();
        sleep_ms(5); /* the measure itself: how far past 5 ms this sleep returns */
        int64_t now = test_now_ms();
        if (now - t - 5 > limit) {
            atomic_store(&ep->stalled_at, now);
            atomic_fetch_add(&ep->stalls, 1);
        }
    }
    return NULL;
}

static bool machine_stalled(episode_t *ep, int64_t now)
{
    return atomic_load(&ep->stalls) > 0 &&
           now - atomic_load(&ep->stalled_at) < ep->attempt + ep->slack;
}

static bool has(const char *text, const char *what)
{
    return strstr(text, what) != NULL;
}

static bool injected(episode_t *ep, int code)
{
    return (atomic_load(&ep->injected) >> code) & 1u;
}

/* The cause a failed call names must be one the schedule produced. */
static void check_cause(scall_t *sc, const varlog_append_result_t *r)
{
    episode_t *ep = sc->ep;
    const char *t = r->errtext ? r->errtext : "";
    long id = sc->c.seq;
    if (has(t, "  "))
        atu_note_bad("call %ld: a blank in its text: %s", id, t);
    if (has(t, "rpc cancelled") && !injected(ep, 1))
        atu_note_bad("call %ld: %s, \"rpc cancelled\" with no cancel sent by the node: %s", id,
                     varlog_err_name(r->err), t);
    /* Only the thread's own cancel of a hung stream ends with CANCELLED (or is settled by the
     * close that came before its end); a stream the node ended (an injected refusal, a drop)
     * named as a hang is a flag outliving its stream. */
    if (has(t, "(no answer within append.attempt.timeout.ms)") &&
        !has(t, "CANCELLED (no answer within") &&
        !has(t, "the appender closed before the batch was answered (no answer within"))
        atu_note_bad("call %ld: a failure of the node's own named as a hang: %s", id, t);
    switch (r->err) {
    case VARLOG_ERR_TIMED_OUT:
        if (!has(t, "appender.delivery.timeout.ms"))
            atu_note_bad("call %ld: TIMED_OUT without its deadline: %s", id, t);
        break;
    case VARLOG_ERR_RPC_DEADLINE_EXCEEDED:
        if (!atomic_load(&ep->hung) && !injected(ep, 4) && !machine_stalled(ep, test_now_ms()))
            atu_note_bad("call %ld: DEADLINE_EXCEEDED, the node neither hung nor sent it: %s", id,
                         t);
        break;
    case VARLOG_ERR_RPC_CANCELLED:
        if (!(injected(ep, 1) && has(t, "schedule fault")) &&
            !has(t, "cancelled by the appender when another batch on the stream reached "
                    "appender.delivery.timeout.ms"))
            atu_note_bad("call %ld: CANCELLED by nobody named: %s", id, t);
        break;
    case VARLOG_ERR_CLOSED:
        if (atomic_load(&ep->closing_gen) != sc->gen)
            atu_note_bad("call %ld: CLOSED while its appender was not closing: %s", id, t);
        break;
    case VARLOG_ERR_RPC_UNAVAILABLE:
        if (!injected(ep, 14) && !atomic_load(&ep->dropped))
            atu_note_bad("call %ld: UNAVAILABLE, the node neither dropped nor sent it: %s", id, t);
        break;
    case VARLOG_ERR_NO_LOG_STREAM: /* topic mode, counting retries: every one sealed */
    case VARLOG_ERR_SEALED:
        if (!injected(ep, 9))
            atu_note_bad("call %ld: SEALED, never sent by the node: %s", id, t);
        break;
    default:
        if ((int)r->err <= 0 || (int)r->err > 16 || !injected(ep, (int)r->err))
            atu_note_bad("call %ld: %s, not a cause of this schedule: %s", id,
                         varlog_err_name(r->err), t);
        else if (!has(t, "schedule fault"))
            atu_note_bad("call %ld: %s without the node's message: %s", id, varlog_err_name(r->err),
                         t);
    }
}

/* VARLOG_SCHEDULE_VERBOSE=1: every step and callback, to read a replayed schedule by. */
static bool g_verbose;

static void sched_cb(const varlog_append_result_t *r, void *opaque)
{
    scall_t *sc = opaque;
    episode_t *ep = sc->ep;
    int64_t now = test_now_ms();
    if (g_verbose)
        print_message("      +%lld call %ld: %s %s%s%s\n", (long long)(now - sc->appended_ms),
                      sc->c.seq, varlog_err_name(r->err), varlog_outcome_name(r->outcome),
                      r->err != VARLOG_OK ? ": " : "", r->err != VARLOG_OK ? r->errtext : "");
    atomic_store(&sc->at_ms, now);
    if (now - sc->appended_ms > ep->delivery + ep->slack)
        atu_note_bad("call %ld: callback %lld ms after its append (delivery timeout %lld ms, "
                     "slack %lld ms)",
                     sc->c.seq, (long long)(now - sc->appended_ms), (long long)ep->delivery,
                     (long long)ep->slack);
    if (atomic_load(&ep->closed_gen) >= sc->gen)
        atu_note_bad("call %ld: callback after its appender's close returned", sc->c.seq);
    /* Calls are numbered in append order, across the appenders of the episode (each one's
     * callbacks all ran when its close returned). */
    long before = atomic_exchange(&ep->last_cb, sc->c.seq);
    if (!ep->topic && before > sc->c.seq)
        atu_note_bad("call %ld: %s callback after call %ld's: out of call order", sc->c.seq,
                     varlog_err_name(r->err), before);
    if (r->err != VARLOG_OK)
        check_cause(sc, r);
    /* A callback that takes a while, as appender.h allows: the time it takes is part of the
     * schedule (it delays the thread's noticing of deadlines, which the slack covers). */
    if (sc->slow_ms > 0)
        nanosleep(&(struct timespec){.tv_sec = sc->slow_ms / 1000,
                                     .tv_nsec = (sc->slow_ms % 1000) * 1000000},
                  NULL);
    track(g_tracker, &sc->c, r);
}

static void sleep_ms(int64_t ms)
{
    if (ms > 0)
        nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000}, NULL);
}

/* ---- the steps ---------------------------------------------------------------------------- */

static void step_append(episode_t *ep)
{
    int k = 1 + (int)rng_below(&ep->rng, 3);
    for (int i = 0; i < k && ep->n_calls < MAX_CALLS; i++) {
        scall_t *sc = &ep->calls[ep->n_calls];
        size_t n = 1 + (size_t)rng_below(&ep->rng, ep->batch_max < 2 ? 1 : 2);
        sc->c.seq = (long)ep->n_calls;
        sc->c.n = n;
        /* The tracker's order per log stream, in bound mode: in topic mode a batch sent
         * again after a failure is stored after those already sent there (appender.h), which
         * may be on the same log stream. */
        sc->c.producer = ep->topic ? -1 : 0;
        sc->ep = ep;
        sc->gen = ep->gen;
        if (!ep->slow_pending && rng_pct(&ep->rng, 10)) {
            sc->slow_ms = 1 + rng_below(&ep->rng, ep->delivery / 4);
            ep->slow_pending = true;
        }
        snprintf(sc->payload[0], sizeof(sc->payload[0]), "s%016llx-%zu-0",
                 (unsigned long long)g_seed, ep->n_calls);
        snprintf(sc->payload[1], sizeof(sc->payload[1]), "s%016llx-%zu-1",
                 (unsigned long long)g_seed, ep->n_calls);
        varlog_record_t recs[2] = {cf_record(sc->payload[0]), cf_record(sc->payload[1])};
        sc->appended_ms = test_now_ms();
        varlog_err_t rc = varlog_appender_append(ep->x.app, recs, n, 0, sched_cb, sc);
        ep->n_calls++;
        if (rc == VARLOG_OK) {
            sc->queued = true;
            ep->appends++;
        } else if (rc != VARLOG_ERR_QUEUE_FULL || !varlog_last_error()[0]) {
            SCHED_FAIL("append: %s: %s", varlog_err_name(rc), varlog_last_error());
        } else if (sc->slow_ms) {
            ep->slow_pending = false;
        }
    }
}

/* The node misbehaves: deny what you like from now until the next clean phase settles. */
static void step_fault(episode_t *ep)
{
    ep->clean = false;
    ep->faults++;
    varlog_server_t *srv = ep->x.f.srv;
    switch (rng_below(&ep->rng, 5)) {
    case 3: /* a seal: refusals "sealed" until step_clean unseals */
        atomic_fetch_or(&ep->injected, 1u << 9);
        ep->sealed = true;
        assert_int_equal(varlog_server_seal(srv, 1, 1 + (int32_t)rng_below(&ep->rng, ep->n_ls)),
                         VARLOG_OK);
        break;
    case 4: /* the request stored, its answer lost: the read-back finds it */
        atomic_store(&ep->dropped, true);
        assert_int_equal(
            varlog_server_drop_stream_after_write(srv, CF_PATH_APPEND, rng_below(&ep->rng, 3), 1),
            VARLOG_OK);
        break;
    case 0: {
        static const int codes[] = {1, 4, 8, 9, 13, 14};
        int code = codes[rng_below(&ep->rng, 6)];
        atomic_fetch_or(&ep->injected, 1u << code);
        const char *msg = code == 9 ? "schedule fault: log stream sealed" : "schedule fault";
        assert_int_equal(varlog_server_fail_next(srv, CF_PATH_APPEND, code, msg,
                                                 1 + (int)rng_below(&ep->rng, 2)),
                         VARLOG_OK);
        break;
    }
    case 1:
        atomic_store(&ep->dropped, true);
        assert_int_equal(
            varlog_server_drop_stream_after(srv, CF_PATH_APPEND, rng_below(&ep->rng, 3), 1),
            VARLOG_OK);
        break;
    default: /* a node that takes longer than the attempt timeout */
        atomic_store(&ep->hung, true);
        assert_int_equal(varlog_server_delay(srv, CF_PATH_APPEND, ep->attempt + ep->delivery),
                         VARLOG_OK);
    }
}

/* The node behaves, if slowly: answers within the attempt timeout (even with the pipeline's
 * requests ahead), perhaps after the delivery deadline. */
static void step_clean(episode_t *ep)
{
    varlog_server_clear_faults(ep->x.f.srv);
    for (int32_t ls = 1; ep->sealed && ls <= ep->n_ls; ls++)
        assert_int_equal(varlog_server_unseal(ep->x.f.srv, 1, ls), VARLOG_OK);
    ep->sealed = false;
    int64_t pick = rng_below(&ep->rng, 3);
    /* Fast answers; slow ones (perhaps past the delivery deadline); or answers that come
     * just before the delivery deadline, where a held check finds them waiting. */
    int64_t delay = pick == 0   ? rng_below(&ep->rng, 5)
                    : pick == 1 ? ep->clean_delay
                                : ep->delivery - ep->hold_ms / 2;
    if (delay > ep->clean_delay)
        delay = ep->clean_delay;
    atomic_store(&g_hold_ms, rng_pct(&ep->rng, 50) ? ep->hold_ms : 0);
    assert_int_equal(varlog_server_delay(ep->x.f.srv, CF_PATH_APPEND, delay), VARLOG_OK);
    if (!ep->clean) {
        ep->clean = true;
        ep->clean_since = test_now_ms();
        ep->baseline_taken = false;
    }
}

static void step_flush(episode_t *ep)
{
    size_t left = 0;
    varlog_err_t rc = varlog_appender_flush(ep->x.app, rng_below(&ep->rng, ep->delivery), &left);
    if (rc != VARLOG_OK && rc != VARLOG_ERR_TIMED_OUT)
        SCHED_FAIL("flush: %s: %s", varlog_err_name(rc), varlog_last_error());
}

/* Every call of an appender has its callback by the time its close returns. */
static void step_close(episode_t *ep)
{
    ep->closes++;
    atomic_store(&ep->closing_gen, ep->gen);
    varlog_err_t rc = varlog_appender_close(&ep->x.app, rng_below(&ep->rng, ep->delivery / 2));
    atomic_store(&ep->closed_gen, ep->gen);
    if (rc != VARLOG_OK && rc != VARLOG_ERR_TIMED_OUT)
        SCHED_FAIL("close: %s: %s", varlog_err_name(rc), varlog_last_error());
    for (size_t i = 0; i < ep->n_calls; i++) {
        scall_t *sc = &ep->calls[i];
        if (sc->queued && sc->gen == ep->gen && atomic_load(&sc->c.cbs) != 1)
            SCHED_FAIL("call %zu: %d callbacks when its appender's close returned", i,
                       atomic_load(&sc->c.cbs));
    }
    ep->slow_pending = false;
    ep->gen++;
    ep->x.app = new_appender(&ep->x.f, 1, ep->topic ? 0 : 1);
}

/* ---- the checks after every step ---------------------------------------------------------- */

static void check_step(episode_t *ep)
{
    if (atu_bad_count() > 0) { /* seen by a callback or the appender's thread */
        print_error("replay: VARLOG_SCHEDULE_SEED=%" PRIu64 " (episode %d, step %d)\n", g_seed,
                    g_episode, g_step);
        atu_assert_nothing_bad();
    }
    int64_t now = test_now_ms();
    bool slow_left = false;
    for (size_t i = 0; i < ep->n_calls; i++) {
        scall_t *sc = &ep->calls[i];
        if (!sc->queued)
            continue;
        int cbs = atomic_load(&sc->c.cbs);
        if (cbs == 0 && now - sc->appended_ms > ep->delivery + ep->slack)
            SCHED_FAIL("call %zu: no callback %lld ms after its append (delivery timeout %lld "
                       "ms, slack %lld ms)",
                       i, (long long)(now - sc->appended_ms), (long long)ep->delivery,
                       (long long)ep->slack);
        slow_left |= cbs == 0 && sc->slow_ms > 0;
    }
    ep->slow_pending = slow_left;
    /* A clean phase's denials: none once the last fault's effects passed (a hung request's
     * attempt timeout, the delivery deadlines of what the faults touched). A stall of the
     * machine counts as a fault: the node may have missed its timing through no fault of
     * the library's. */
    if (ep->clean && machine_stalled(ep, now)) {
        ep->clean_since = now;
        ep->baseline_taken = false;
    }
    if (ep->clean && now - ep->clean_since > ep->attempt + ep->delivery + ep->slack) {
        uint64_t denials = cf_stats(ep->x.f.client).denials;
        if (!ep->baseline_taken) {
            ep->baseline_taken = true;
            ep->denials_base = denials;
        } else if (denials != ep->denials_base) {
            SCHED_FAIL("%llu denials in a clean phase (since %lld ms): the node did nothing",
                       (unsigned long long)(denials - ep->denials_base),
                       (long long)(now - ep->clean_since));
        }
    }
}

/* The log against the outcomes, once every call settled: copies per record. */
typedef struct log_count {
    episode_t *ep;
    uint32_t *copies;           /* per call and record: [call * 2 + record] */
    varlog_entry_meta_t *first; /* per call: where its first record is */
} log_count_t;

static void count_entry(void *arg, const varlog_entry_meta_t *meta, const void *data, size_t len)
{
    log_count_t *lc = arg;
    char buf[48];
    if (len == 0 || len >= sizeof(buf))
        return;
    memcpy(buf, data, len);
    buf[len] = '\0';
    unsigned long long seed;
    size_t call;
    int rec;
    if (sscanf(buf, "s%16llx-%zu-%d", &seed, &call, &rec) != 3 || seed != g_seed ||
        call >= lc->ep->n_calls || rec < 0 || rec > 1)
        return;
    if (lc->copies[call * 2 + (size_t)rec]++ == 0 && rec == 0)
        lc->first[call] = *meta;
}

static void check_log(episode_t *ep)
{
    log_count_t lc = {.ep = ep,
                      .copies = calloc(ep->n_calls * 2 + 1, sizeof(uint32_t)),
                      .first = calloc(ep->n_calls + 1, sizeof(varlog_entry_meta_t))};
    assert_non_null(lc.copies);
    assert_non_null(lc.first);
    for (int32_t ls = 1; ls <= ep->n_ls; ls++)
        cf_stored_each(ep->x.f.srv, 1, ls, count_entry, &lc);
    for (size_t i = 0; i < ep->n_calls; i++) {
        const scall_t *sc = &ep->calls[i];
        if (!sc->queued)
            continue;
        for (size_t r = 0; r < sc->c.n; r++) {
            uint32_t n = lc.copies[i * 2 + r];
            if (n > 1 && !ep->retry_maybe)
                SCHED_FAIL("call %zu: record %zu stored %u times", i, r, n);
            if (sc->c.err == VARLOG_OK && n == 0)
                SCHED_FAIL("call %zu: APPENDED, record %zu not in the log", i, r);
            if (sc->c.err != VARLOG_OK && sc->c.outcome == VARLOG_NOT_APPENDED && n > 0)
                SCHED_FAIL("call %zu: NOT_APPENDED (%s), record %zu stored", i,
                           varlog_err_name(sc->c.err), r);
        }
        if (sc->c.err == VARLOG_OK && lc.copies[i * 2] == 1 &&
            (lc.first[i].glsn != sc->c.first.glsn || lc.first[i].llsn != sc->c.first.llsn))
            SCHED_FAIL("call %zu: APPENDED at GLSN %llu, stored at GLSN %llu", i,
                       (unsigned long long)sc->c.first.glsn, (unsigned long long)lc.first[i].glsn);
    }
    free(lc.copies);
    free(lc.first);
}

/* ---- the episodes ------------------------------------------------------------------------- */

static bool call_settled(void *arg)
{
    return atomic_load(&((scall_t *)arg)->c.cbs) > 0;
}

static int64_t time_unit(void)
{
    return test_under_valgrind() || test_under_tsan() ? 10 : 1;
}

static void episode_run(uint64_t seed, int64_t budget_ms)
{
    episode_t *ep = calloc(1, sizeof(*ep));
    assert_non_null(ep);
    ep->calls = calloc(MAX_CALLS, sizeof(*ep->calls));
    assert_non_null(ep->calls);
    ep->rng = seed;
    atomic_init(&ep->last_cb, -1);
    int64_t tu = time_unit();
    ep->topic = rng_pct(&ep->rng, 50);
    ep->n_ls = ep->topic ? 1 + (int32_t)rng_below(&ep->rng, 2) : 1;
    ep->depth = 1 + (int)rng_below(&ep->rng, 3);
    /* A clean node answers a pipeline's requests within the attempt timeout by a margin no
     * stall of a loaded machine is expected to eat (hundreds of ms): a false attempt timeout
     * would name a hung node that was not. */
    /* Slowed builds draw only the first kind: the second's longer deadlines would make one
     * episode there take a minute (the plain and ASan runs draw both). */
    if (tu > 1 || rng_pct(&ep->rng, 50)) {
        /* The delivery deadline first: slow answers outlast it, never the attempt timeout. */
        ep->delivery = (150 + rng_below(&ep->rng, 150)) * tu;
        ep->attempt = 5 * ep->delivery;
        ep->clean_delay = ep->delivery + ep->delivery / 3;
    } else {
        /* The attempt timeout first: a hung node is found before the delivery deadline. A
         * clean node answers the head of a full pipeline within half of it. */
        ep->attempt = (800 + rng_below(&ep->rng, 100)) * tu;
        ep->delivery = ep->attempt + ep->attempt / 2;
        ep->clean_delay = ep->attempt / (2 * (ep->depth + 1));
    }
    ep->retries = (int)rng_below(&ep->rng, 5) - 1; /* -1: refusals waited out to the deadline */
    ep->retry_maybe = rng_pct(&ep->rng, 50);
    ep->batch_max = 1 + (int)rng_below(&ep->rng, 4);
    ep->linger = (int)rng_below(&ep->rng, 6);
    ep->hold_ms = 100 * tu;
    ep->slack = slack_ms(ep);
    char dt[24], at[24], rt[24], dp[24], bm[24], lg[24];
    snprintf(dt, sizeof(dt), "%lld", (long long)ep->delivery);
    snprintf(at, sizeof(at), "%lld", (long long)ep->attempt);
    snprintf(rt, sizeof(rt), "%d", ep->retries);
    snprintf(dp, sizeof(dp), "%d", ep->depth);
    snprintf(bm, sizeof(bm), "%d", ep->batch_max);
    snprintf(lg, sizeof(lg), "%d", ep->linger);
    print_message("    episode %d: %s, %d log stream%s, delivery %s ms, attempt %s ms, retries "
                  "%s%s, depth %s, batch %s records, linger %s ms\n",
                  g_episode, ep->topic ? "topic mode" : "bound", ep->n_ls, ep->n_ls > 1 ? "s" : "",
                  dt, at, rt, ep->retry_maybe ? " (maybe too)" : "", dp, bm, lg);
    fx_start(&ep->x, ep->n_ls, ep->topic ? 0 : 1, "appender.delivery.timeout.ms", dt,
             "append.attempt.timeout.ms", at, "append.retries", rt, "append.retry.maybe.appended",
             ep->retry_maybe ? "true" : "false", "appender.pipeline.depth", dp,
             "appender.batch.max.records", bm, "appender.linger.ms", lg, NULL);
    assert_int_equal(pthread_create(&ep->watcher, NULL, stall_watch, ep), 0);
    ep->gen = 1;
    long holds0 = atomic_load(&g_holds), windows0 = atomic_load(&g_windows);
    step_clean(ep);
    /* One call answered first: the connection is up before any deadline counts (its setup
     * took longer than an attempt timeout once, on a loaded machine). */
    scall_t *warm = &ep->calls[ep->n_calls];
    step_append(ep);
    if (!test_wait_until(call_settled, warm, cf_wait_bound_ms()))
        SCHED_FAIL("the first call had no callback within %lld ms", (long long)cf_wait_bound_ms());
    /* Enough steps for a couple of deadlines, however long they are. */
    if (budget_ms < 2 * ep->delivery)
        budget_ms = 2 * ep->delivery;
    int64_t end = test_now_ms() + budget_ms;
    for (g_step = 0; test_now_ms() < end && ep->n_calls < MAX_CALLS - 4; g_step++) {
        int64_t pick = rng_below(&ep->rng, 100);
        if (g_verbose)
            print_message("    step %d: %lld (calls %zu)\n", g_step, (long long)pick, ep->n_calls);
        if (pick < 40)
            step_append(ep);
        else if (pick < 55) /* pacing the schedule: deadlines pass while nothing happens */
            sleep_ms(rng_below(&ep->rng, ep->delivery));
        else if (pick < 67)
            step_fault(ep);
        else if (pick < 87)
            step_clean(ep);
        else if (pick < 95)
            step_flush(ep);
        else
            step_close(ep);
        ep->steps++;
        check_step(ep);
    }
    /* The end: a clean node, the last calls settled by their deadlines, then a close. */
    step_clean(ep);
    atomic_store(&g_hold_ms, 0);
    /* Waits for the event (the tracker counts every callback of the episode, one per call
     * queued), bounded by the last deadline plus the slack; check_step then fails a call
     * that had none by its deadline. */
    int64_t settle_end = test_now_ms() + ep->delivery + ep->slack;
    atu_wait_at_least(&ep->x.t.sync, &ep->x.t.callbacks, ep->appends, settle_end - test_now_ms());
    check_step(ep);
    step_close(ep);
    long ok = 0, failed = 0;
    for (size_t i = 0; i < ep->n_calls; i++) {
        ok += ep->calls[i].queued && ep->calls[i].c.err == VARLOG_OK;
        failed += ep->calls[i].queued && ep->calls[i].c.err != VARLOG_OK;
    }
    print_message("    episode %d: %ld steps, %ld calls (%ld appended, %ld failed), %ld faults, "
                  "%ld closes, %llu denials; %ld checks held, %ld found every batch answered; "
                  "%ld stalls of the machine\n",
                  g_episode, ep->steps, ep->appends, ok, failed, ep->faults, ep->closes,
                  (unsigned long long)cf_stats(ep->x.f.client).denials,
                  atomic_load(&g_holds) - holds0, atomic_load(&g_windows) - windows0,
                  atomic_load(&ep->stalls));
    check_step(ep);
    check_log(ep);
    atomic_store(&ep->watch_stop, true);
    pthread_join(ep->watcher, NULL);
    fx_stop(&ep->x);
    free(ep->calls);
    free(ep);
}

static void test_lane_life_schedule(void **state)
{
    (void)state;
    const char *env = getenv("VARLOG_SCHEDULE_SEED");
    if (env && env[0]) {
        g_seed = strtoull(env, NULL, 0);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        g_seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
    }
    const char *verbose = getenv("VARLOG_SCHEDULE_VERBOSE");
    g_verbose = verbose && verbose[0] == '1';
    const char *secs = getenv("VARLOG_SCHEDULE_SECONDS");
    int64_t total_ms = secs && secs[0] ? (int64_t)(atof(secs) * 1000) : 3000;
    /* An episode: about 8 delivery timeouts of steps; slowed builds run one, longer. */
    int64_t episode_ms = time_unit() > 1 ? 6000 : 1200;
    if (time_unit() > 1 && !(secs && secs[0]))
        total_ms = episode_ms;
    print_message("    VARLOG_SCHEDULE_SEED=%" PRIu64 ", %lld ms\n", g_seed, (long long)total_ms);
    uint64_t master = g_seed;
    int64_t end = test_now_ms() + total_ms;
    long rounds0 = atomic_load(&g_rounds);
    g_episode = 0;
    /* VARLOG_SCHEDULE_EPISODE=<e>: starts the seed's schedule at episode e (a failure's). */
    const char *from = getenv("VARLOG_SCHEDULE_EPISODE");
    for (long skip = from && from[0] ? atol(from) : 0; skip > 0; skip--, g_episode++)
        (void)rng_next(&master);
    do {
        int64_t left = end - test_now_ms();
        episode_run(rng_next(&master), left < episode_ms ? left : episode_ms);
        g_episode++;
    } while (test_now_ms() < end);
    /* The lane check ran, on the appender's thread, round after round. */
    assert_true(atomic_load(&g_rounds) - rounds0 > 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lane_life_schedule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
