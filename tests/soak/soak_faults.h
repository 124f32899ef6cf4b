#ifndef VARLOG_SOAK_FAULTS_H
#define VARLOG_SOAK_FAULTS_H

/* The soak's fault schedule on the embedded server, run on the test thread: a cycle of
 * faults with random parameters (seeded, so a run can be repeated), each followed by a quiet
 * gap, plus one log stream added part way and a full stop and restart every minute:
 *
 *   - Append streams dropped after k answers (request k + 1 neither stored nor answered);
 *   - Append answers delayed, for a while (every third time past a synchronous call's
 *     timeout);
 *   - the next n AppendRequests refused UNAVAILABLE "not primary replica" or
 *     FAILED_PRECONDITION "sealed" (refusals made before storing);
 *   - a log stream sealed, then unsealed;
 *   - the readers' Subscribe and SubscribeTo streams dropped after k entries;
 *   - the server stopped (live calls end, delayed answers go out UNAVAILABLE) and restarted
 *     on the same port with the same log. */
#include <stdatomic.h>
#include <stdint.h>

#include "varlog/server.h"

typedef struct soak_faults {
    varlog_server_t *srv;
    int32_t topic;
    uint64_t rng;
    atomic_int max_ls; /* log streams of the topic: 1..max_ls */
    /* what was injected */
    long append_drops;    /* Append streams armed to drop */
    long delays;          /* delay periods */
    long long_delays;     /* of those, answers delayed past a synchronous call's timeout */
    long not_primary;     /* AppendRequests armed to be refused "not primary replica" */
    long sealed_refusals; /* ... refused "sealed" */
    long seals;           /* seal-then-unseal periods */
    long reader_drops;    /* Subscribe / SubscribeTo streams armed to drop */
    long added;           /* log streams added */
    long restarts;        /* stop-then-restart */
    int64_t down_ms;      /* time stopped, all restarts together */
    long failed_calls;    /* fault API calls that failed (should be 0) */
} soak_faults_t;

void soak_faults_init(soak_faults_t *f, varlog_server_t *srv, int32_t topic, int32_t log_streams,
                      uint64_t seed);

/* Runs the schedule for duration_ms, returning once it is over (a fault in progress ends
 * first: a delay cleared, a log stream unsealed, the server restarted). */
void soak_faults_run(soak_faults_t *f, int64_t duration_ms);

/* Clears every fault setting and unseals every log stream, for the check that follows the
 * run (the schedule never leaves the server stopped: a failed restart counts in
 * failed_calls). */
void soak_faults_clear(soak_faults_t *f);

#endif
