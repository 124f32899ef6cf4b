#ifndef VARLOG_CLUSTER_ADMIN_H
#define VARLOG_CLUSTER_ADMIN_H

/* The admin API (varlog/admin.h) against varlogadm, each answer compared with varlogctl's
 * JSON. Failures are cmocka failures. */
#include "cluster_proc.h"

/* Every read: topics, log streams, storage nodes, MR nodes and members. */
void admin_check_reads(const cluster_t *c);

/* Every change, on a topic of its own: add topic, add log stream, seal and unseal (also
 * with a wrong topic: UNKNOWN_TOPIC, nothing sealed), trim, unregister. Takes ~15 s. */
void admin_check_changes(const cluster_t *c);

#endif
