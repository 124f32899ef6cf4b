#ifndef VARLOG_CLUSTER_RIDEOUT_H
#define VARLOG_CLUSTER_RIDEOUT_H

/* Issue 35's promise against a real cluster: a producer with no retry loop of its own rides
 * out a storage node failure. Producers append at a steady rate with the library's defaults
 * (appender.delivery.timeout.ms 30 s, append.retry.maybe.appended false) while the primary
 * storage node of the topic's first log stream fails and comes back; the cluster is meant to
 * run varlogadm --auto-unseal, so nothing but the cluster itself recovers the log streams.
 * Then, each a whole cmocka test body:
 *   - every call APPENDED (every other outcome is counted and printed with its text);
 *   - the whole topic read back from GLSN 1: each record once, at the GLSN/LLSN/log stream
 *     its callback (or varlog_append) reported, no NOT_APPENDED record stored;
 *   - a subscriber started before the fault delivered every GLSN, in order, without a gap;
 *   - a MAYBE_APPENDED left on a log stream seen SEALED during the fault fails the test (the
 *     library can prove presence or absence there); one left on a log stream never sealed
 *     is counted and printed, not failed (no proof exists);
 *   - one summary line: calls, APPENDED, NOT_APPENDED, MAYBE (on sealed log streams, stored
 *     by the read-back), what the library reports as resolved, the fault's timeline. */
#include <stdbool.h>

#include "cluster_proc.h"

typedef enum rideout_fault {
    RIDEOUT_KILL_RESTART, /* kill -9, restarted (same flags and volume) 5 s later */
    RIDEOUT_SIGSTOP,      /* SIGSTOP for append.attempt.timeout.ms + 5 s, then SIGCONT */
} rideout_fault_t;

/* A topic-wide appender and one bound to the first log stream, 300 calls/s each, one record
 * per call, through the fault. */
void scenario_rideout_appenders(cluster_t *c, rideout_fault_t fault);

/* threads threads calling varlog_append (topic-wide) with a 30 s timeout, one record per
 * call, through the fault: every call OK. */
void scenario_rideout_sync(cluster_t *c, rideout_fault_t fault, int threads);

#endif
