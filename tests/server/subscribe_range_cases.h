#ifndef VARLOG_SUBSCRIBE_RANGE_CASES_H
#define VARLOG_SUBSCRIBE_RANGE_CASES_H

/* How a storage node ends (or keeps open) Subscribe streams of GLSN ranges (wire protocol
 * 6.3), asserted at the wire. The same cases run against the embedded server
 * (test_server_log_io) and a real Varlog node (test_cluster_wire): what a client can see of a
 * range's end must be the node's. */
#include <stdint.h>

#include "server_test_util.h"

/* Appends one entry at a time to log streams a and b of topic through f (its client and
 * address only: f->srv may be NULL), and checks ranges over them. Nothing else may append to
 * the topic meanwhile. Takes a few seconds: a stream that stays open is given 500 ms to end. */
void subscribe_range_cases_run(srv_fixture_t *f, int32_t topic, int32_t a, int32_t b);

#endif
