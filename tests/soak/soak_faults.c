#include "soak_faults.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "test_support.h"

#define PATH_APPEND "/varlog.snpb.LogIO/Append"
#define PATH_SUBSCRIBE "/varlog.snpb.LogIO/Subscribe"
#define PATH_SUBSCRIBE_TO "/varlog.snpb.LogIO/SubscribeTo"
#define GRPC_FAILED_PRECONDITION 9
#define GRPC_UNAVAILABLE 14

/* The first restart comes this far into the run, then one a minute; a run shorter than that
 * restarts once, half way. */
#define RESTART_FIRST_MS 45000
#define RESTART_EVERY_MS 60000

void soak_faults_init(soak_faults_t *f, varlog_server_t *srv, int32_t topic, int32_t log_streams,
                      uint64_t seed)
{
    memset(f, 0, sizeof(*f));
    f->srv = srv;
    f->topic = topic;
    f->rng = seed ? seed : 1;
    atomic_store(&f->max_ls, log_streams);
}

static uint64_t next_rand(soak_faults_t *f)
{
    /* xorshift64*: reproducible from the seed the test prints */
    f->rng ^= f->rng >> 12;
    f->rng ^= f->rng << 25;
    f->rng ^= f->rng >> 27;
    return f->rng * 2685821657736338717ull;
}

/* Uniform in [lo, hi]. */
static int64_t between(soak_faults_t *f, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(next_rand(f) % (uint64_t)(hi - lo + 1));
}

/* The schedule's own pacing: how long a fault lasts and the quiet after it. Nothing waits for
 * a condition here. */
static void pause_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void check(soak_faults_t *f, varlog_err_t rc, const char *what)
{
    if (rc != VARLOG_OK) {
        f->failed_calls++;
        fprintf(stderr, "soak: fault %s: %s\n", what, varlog_err_name(rc));
    }
}

static void restart(soak_faults_t *f)
{
    int64_t t0 = test_now_ms();
    check(f, varlog_server_stop(f->srv), "stop");
    pause_ms(between(f, 500, 2500));
    /* The port may be taken meanwhile by another process's connect: try again a few times
     * rather than end the run with the server down. */
    varlog_err_t rc = VARLOG_OK;
    for (int i = 0; i < 50 && (rc = varlog_server_restart(f->srv)) != VARLOG_OK; i++)
        pause_ms(100);
    check(f, rc, "restart");
    f->down_ms += test_now_ms() - t0;
    f->restarts++;
}

static void one_fault(soak_faults_t *f, long cycle)
{
    int32_t max_ls = atomic_load(&f->max_ls);
    switch (cycle % 6) {
    case 0:
        check(f,
              varlog_server_drop_stream_after(f->srv, PATH_APPEND, between(f, 0, 30),
                                              (int)between(f, 1, 4)),
              "drop Append");
        f->append_drops++;
        break;
    case 1:
        /* Every third delay outlasts a synchronous call's timeout: the call gives up
         * (MAYBE_APPENDED) on a request the server stores when the delay ends, the one way
         * here to a MAYBE that is stored; the appenders' queues fill meanwhile. */
        if ((cycle / 6) % 3 == 2) {
            check(f, varlog_server_delay(f->srv, PATH_APPEND, between(f, 2200, 3000)), "delay");
            pause_ms(between(f, 1000, 2000));
            f->long_delays++;
        } else {
            check(f, varlog_server_delay(f->srv, PATH_APPEND, between(f, 20, 300)), "delay");
            pause_ms(between(f, 300, 1500));
        }
        check(f, varlog_server_delay(f->srv, PATH_APPEND, 0), "undelay");
        f->delays++;
        break;
    case 2: {
        int n = (int)between(f, 1, 40);
        check(f,
              varlog_server_fail_next(f->srv, PATH_APPEND, GRPC_UNAVAILABLE, "not primary replica",
                                      n),
              "not primary");
        f->not_primary += n;
        break;
    }
    case 3: {
        int n = (int)between(f, 1, 40);
        check(f,
              varlog_server_fail_next(f->srv, PATH_APPEND, GRPC_FAILED_PRECONDITION, "sealed", n),
              "sealed refusal");
        f->sealed_refusals += n;
        break;
    }
    case 4: {
        int32_t ls = (int32_t)(1 + (cycle / 6) % max_ls);
        check(f, varlog_server_seal(f->srv, f->topic, ls), "seal");
        pause_ms(between(f, 200, 1500));
        check(f, varlog_server_unseal(f->srv, f->topic, ls), "unseal");
        f->seals++;
        break;
    }
    default:
        check(f, varlog_server_drop_stream_after(f->srv, PATH_SUBSCRIBE, between(f, 0, 2000), 1),
              "drop Subscribe");
        check(f, varlog_server_drop_stream_after(f->srv, PATH_SUBSCRIBE_TO, between(f, 0, 2000), 1),
              "drop SubscribeTo");
        f->reader_drops += 2;
    }
}

void soak_faults_run(soak_faults_t *f, int64_t duration_ms)
{
    int64_t t0 = test_now_ms();
    int64_t add_at = duration_ms * 3 / 10;
    int64_t restart_at = duration_ms > RESTART_FIRST_MS ? RESTART_FIRST_MS : duration_ms / 2;
    for (long cycle = 0;; cycle++) {
        int64_t elapsed = test_now_ms() - t0;
        if (elapsed >= duration_ms)
            break;
        if (!f->added && elapsed >= add_at) {
            int32_t id = 0;
            check(f, varlog_server_add_log_stream(f->srv, f->topic, &id), "add log stream");
            if (id > 0)
                atomic_store(&f->max_ls, id);
            f->added++;
        }
        if (elapsed >= restart_at) {
            restart(f);
            restart_at += RESTART_EVERY_MS;
        } else {
            one_fault(f, cycle);
        }
        pause_ms(between(f, 200, 1000));
    }
}

void soak_faults_clear(soak_faults_t *f)
{
    varlog_server_clear_faults(f->srv);
    int32_t max_ls = atomic_load(&f->max_ls);
    for (int32_t ls = 1; ls <= max_ls; ls++)
        check(f, varlog_server_unseal(f->srv, f->topic, ls), "unseal");
}
