#ifndef VARLOG_CLIENT_FIXTURE_H
#define VARLOG_CLIENT_FIXTURE_H

/* An embedded server plus a libvarlog client opened against it, for the client's tests. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "varlog/client.h"
#include "varlog/server.h"

#define CF_PATH_APPEND "/varlog.snpb.LogIO/Append"
#define CF_PATH_CLUSTER_INFO "/varlog.mrpb.Management/GetClusterInfo"
#define CF_PATH_METADATA "/varlog.mrpb.MetadataRepositoryService/GetMetadata"

typedef struct client_fixture {
    varlog_server_t *srv;
    varlog_client_t *client;
} client_fixture_t;

/* Starts a server with topics x log_streams and opens a client with metadata.addresses set
 * to it, metadata.refresh.interval.ms 0 (no background calls that would disturb call
 * counts) and log.level err, then the given "name", "value" pairs (NULL-terminated list).
 * Fails the running cmocka test on any error. */
void cf_start(client_fixture_t *f, int32_t topics, int32_t log_streams, ...);

/* As cf_start, with adjust(conf, arg) called on the configuration before the client opens
 * (for what pairs cannot say, such as a log callback). */
void cf_start_adjusted(client_fixture_t *f, int32_t topics, int32_t log_streams,
                       void (*adjust)(varlog_conf_t *conf, void *arg), void *arg, ...);

/* A configuration for the fixture's server with the same defaults and pairs as cf_start. */
varlog_conf_t *cf_conf(client_fixture_t *f, ...);
varlog_conf_t *cf_conf_va(client_fixture_t *f, va_list ap);

/* Sets the pairs of the environment's VARLOG_TEST_CONF ("name=value;name=value") on conf:
 * how CTest runs a suite again under another setting (appender.threads, for the appender's
 * suites on a shared thread). cf_conf applies them before the test's own pairs. */
void cf_conf_from_env(varlog_conf_t *conf);

/* Destroys the client (if still open) and the server. */
void cf_stop(client_fixture_t *f);

/* One record from a string (without its NUL). */
varlog_record_t cf_record(const char *s);

/* The client's counters (fails the test if they cannot be read). */
varlog_client_stats_t cf_stats(varlog_client_t *client);

/* varlog_client_appendable_log_streams of topic: up to cap ids, returns the total count. */
size_t cf_appendable(varlog_client_t *client, int32_t topic, int32_t *ids, size_t cap);

/* White-box (server_internal.h): calls fn(arg, &meta, data, len) for every entry the server
 * stores in log stream ls of topic, in LLSN order, under the server's store lock (fn must not
 * call the server); returns the count (0 for an unknown topic or log stream). */
typedef void cf_stored_fn(void *arg, const varlog_entry_meta_t *meta, const void *data, size_t len);
size_t cf_stored_each(varlog_server_t *srv, int32_t topic, int32_t ls, cf_stored_fn *fn, void *arg);

/* Bound on waits for conditions that normally hold within milliseconds. */
int64_t cf_wait_bound_ms(void);

/* For test_wait_until: the server's call count of method exceeds `above`. */
typedef struct cf_count_wait {
    varlog_server_t *srv;
    const char *method;
    uint64_t above;
} cf_count_wait_t;
bool cf_call_count_above(void *arg);

#endif
