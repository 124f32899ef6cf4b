#ifndef VARLOG_SUBSCRIBE_FIXTURE_H
#define VARLOG_SUBSCRIBE_FIXTURE_H

/* What test_subscribe.c and test_subscribe_close.c share: one test's embedded server,
 * client, appended log and two sinks with their subscriptions (T), and the calls that fail
 * the test when a subscription cannot be opened or read. Apart from subscribe_test_util.h
 * because it needs the server fixture (client_fixture.h) and holds one test's state, which
 * the other subscription tests keep in their own shape.
 *
 * Handlers run on the subscription's thread, where a cmocka assertion cannot stop the test:
 * they note what is wrong (atu_note_bad) and the test thread asserts that nothing was noted
 * (stu_verify does so first). */
#include <stdbool.h>
#include <stdint.h>

#include "client_fixture.h"
#include "subscribe_test_util.h"
#include "varlog/subscribe.h"

/* ---- per-test state -------------------------------------------------------------------- */

typedef struct t {
    client_fixture_t f;
    stu_log_t log;
    stu_sink_t sink, sink2;
    varlog_subscription_t *sub, *sub2;
    bool started;
} t_t;

/* Not on a test's stack: the teardown of a failed test still reaches it. */
extern t_t T;

/* A server with topics x log_streams, a client with the given pairs, a log for cap GLSNs
 * and two sinks of cap entries. */
void t_start(int32_t topics, int32_t log_streams, long cap, ...);

void release_sink(stu_sink_t *s);
void t_finish(void);

/* Every test's cmocka teardown: finishes what a failed test left started. */
int teardown(void **state);

int64_t bound_ms(void);

void subscribe_ok(int32_t topic, uint64_t begin, uint64_t end, stu_sink_t *s,
                  varlog_subscription_t **sub);
void subscribe_iter_ok(int32_t topic, uint64_t begin, uint64_t end, varlog_subscription_t **sub);
void drain_ok(varlog_subscription_t *sub, stu_sink_t *s, long want);

/* on_end came exactly once, on_error never, and nothing was noted by the handlers. */
void assert_ended(stu_sink_t *s);

/* A second client of T's server, opened now: its metadata shows what T's client's does not
 * (a log stream added since). The caller destroys it. */
varlog_client_t *other_client(void);

#endif
