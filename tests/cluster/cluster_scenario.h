#ifndef VARLOG_CLUSTER_SCENARIO_H
#define VARLOG_CLUSTER_SCENARIO_H

/* Scenarios more than one cluster test program runs, each a whole cmocka test body:
 * failures are cmocka failures, with the cluster's log tails shown. */
#include <stdbool.h>
#include <stdint.h>

#include "cluster_proc.h"
#include "varlog/admin.h"

/* A tag unique within the topic's life (what, then this process's id) for acct_init: a
 * cluster lives for one test program. */
void scenario_tag(char *buf, size_t cap, const char *what);

/* Waits up to timeout_ms until every log stream of the topic is RUNNING, unsealing the
 * sealed ones through the admin API when unseal is true; why gets the admin's last refusal. */
bool scenario_await_running(cluster_t *c, varlog_admin_t *adm, bool unseal, int64_t timeout_ms,
                            char *why, size_t cap);

/* A topic-wide appender and a tailing subscriber for ~n records; accounting and the
 * subscriber checked against the read-back. */
void scenario_round_trip(cluster_t *c, const char *tag, long n);

/* varlog-cli demo --mr ADDR with a small --records; its exit status must be 0. */
void scenario_cli_demo(cluster_t *c, long records);

/* An appender bound to the first log stream, a topic-wide appender and a tailing
 * subscriber, through kill -9 of each storage node in victims (storage node ids; 0 is the
 * bound log stream's backup, -1 its primary, as the admin lists them when the round
 * starts), each restarted with the same volume and the log streams unsealed, through the
 * admin API or, with auto_unseal, by varlogadm. After each unseal is visible, both
 * appenders must store a record appended after it within 5 s (printed). */
void scenario_sn_failover(cluster_t *c, const int *victims, int n_victims, bool auto_unseal);

/* A log stream added (varlogctl logstream add) while appending and subscribing: the
 * subscriber started before must deliver every GLSN, the new log stream's included. */
void scenario_add_log_stream(cluster_t *c);

/* With three MR nodes: kill -9 of the first of metadata.addresses while appending and
 * subscribing; a new client opened, appending and refreshing while it is down; then it is
 * restarted. */
void scenario_mr_failover(cluster_t *c);

#endif
