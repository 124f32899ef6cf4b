#ifndef VARLOG_CLIENT_INTERNAL_H
#define VARLOG_CLIENT_INTERNAL_H

/* The client object, shared by client.c (lifecycle), metadata.c (discovery and refresh) and
 * append.c (appends and their retries). Lock order: fetch_mu, then mu, then the
 * allowlist's; no lock is held while calling the network, the engine or the log sink. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "allowlist.h"
#include "conf_internal.h"
#include "log_internal.h"
#include "metadata.h"
#include "rpc_client.h"
#include "stats_internal.h"
#include "varlog/client.h"
#include "vq/batcher.h"
#include "vq/engine.h"

#define MR_PATH_CLUSTER_INFO "/varlog.mrpb.Management/GetClusterInfo"
#define MR_PATH_GET_METADATA "/varlog.mrpb.MetadataRepositoryService/GetMetadata"
#define SN_PATH_APPEND "/varlog.snpb.LogIO/Append"

struct client_counters {
    atomic_uint_fast64_t appends_ok, appends_failed, append_attempts, append_retries, lookups,
        metadata_fetches, metadata_updates, denials, resolve_passes, resolved_found,
        resolved_absent;
};

struct varlog_client {
    varlog_conf_t *conf; /* read-only after creation */
    log_sink_t log;
    rpc_client_t *rpc;
    char **seeds; /* metadata.addresses, split */
    size_t n_seeds;

    pthread_mutex_t mu;
    md_view_t *view;     /* current metadata; replaced whole */
    char *mr_address;    /* validated metadata member, NULL = discover again */
    bool closing;        /* set once by destroy; new calls fail with CLOSED */
    size_t active_calls; /* public calls in progress; destroy waits for 0 */
    size_t retry_tasks;  /* retry tasks the engine has not released; destroy waits for 0 */
    pthread_cond_t idle; /* active_calls or retry_tasks reached 0 */

    /* one GetMetadata in flight, shared by concurrent callers */
    pthread_mutex_t fetch_mu;
    pthread_cond_t fetch_done;
    bool fetching;
    uint64_t fetch_gen;
    int64_t fetch_started_ns; /* vq_now_ns when the call in flight (or the last one) began */
    varlog_err_t fetch_err;
    char fetch_errtext[256];

    allowlist_t allow;
    /* wire_now_ms before which no recheck starts (metadata.recheck.interval.ms) */
    atomic_int_fast64_t recheck_next_ms;

    vq_engine_t *engine; /* append retries */
    vq_batcher_t *batcher;
    vq_logger_t engine_logger;

    pthread_t refresher;
    bool refresher_started;
    pthread_cond_t refresher_wake; /* with mu */

    struct client_counters stats;
    client_stats_t cstats; /* varlog/stats.h: the snapshot's counters and the emit thread */

    /* What all the client's appenders hold (appender.client.queue.max.*; appender.c). */
    struct app_budget {
        uint64_t max_records, max_bytes; /* 0: no client-wide bound; read-only */
        /* Reserved by intake (compare-and-swap, with the appender's mu held) and given back
         * when a batch's callbacks returned: atomics, so that appenders on other threads do
         * not serialise on one lock per append. */
        atomic_uint_fast64_t records, bytes;
        /* Producers waiting for room: they sleep on room under mu, a leaf taken after an
         * appender's mu; waiters is written under mu and read by settlers without it. */
        pthread_mutex_t mu;
        pthread_cond_t room;
        atomic_size_t waiters;
    } budget;
    struct varlog_appender *appenders; /* open appenders (mu); destroy closes them */
    /* (mu) appender.threads > 0: the threads its appenders share, started as needed */
    struct app_exec **app_execs;
    size_t n_app_execs;
    struct varlog_subscription *subscriptions; /* open subscriptions (mu); destroy closes them */
    uint64_t subscriptions_opened;             /* (mu) ever: each one's id */
    /* Subscriptions whose consumer receives its own messages (subscribe.self.receive.max). */
    atomic_int self_receiving;
    /* subscribe.handler.threads >= 1: the shared threads (subscribe_shared.c), allocated by
     * the first handler-form subscription (mu), freed by destroy. */
    struct sub_shared *shared_subs;
};

/* Marks the calling thread, for its lifetime, as one of c's own: an appender's, a
 * subscription's, the statistics' or the metadata refresher's. Destroy refuses to run there,
 * since it would wait for that very thread. */
void client_thread_own(const varlog_client_t *c);
/* Whether the calling thread is one of c's own (client_thread_own). */
bool client_thread_is_own(const varlog_client_t *c);

/* Registers a public call; CLOSED once destroy began. Every successful enter is paired with
 * client_leave. */
varlog_err_t client_enter(varlog_client_t *c);
void client_leave(varlog_client_t *c);
bool client_closing(varlog_client_t *c);

/* A task the engine holds that uses the client (an append's or an appender's retry): begin
 * before submitting it, end once the engine released it (or refused it). Destroy waits until
 * none is left. */
void client_retry_task_begin(varlog_client_t *c);
void client_retry_task_end(varlog_client_t *c);

/* A retry's wait on the client's engine (the appender's batches, a subscription's stream):
 * after delay_ns, jittered over [d/2, d), a metadata lookup through the client's batcher
 * (fresh metadata, one call shared with concurrent retries), then after(arg) on an engine
 * worker, and release(arg) once the engine is done with it (after the deadline too). A
 * retry task (destroy waits for its release). Errors, after which neither callback runs:
 * CLOSED (the engine shut down: the client is closing), QUEUE_FULL (the engine's task limit),
 * NOMEM, INTERNAL; the caller writes the text (none is set). */
varlog_err_t client_submit_lookup_retry(varlog_client_t *c, int64_t delay_ns, void *arg,
                                        void (*after)(void *arg), void (*release)(void *arg));

/* A metadata lookup on the client's engine, now: through the batcher, so that it shares one
 * GetMetadata with concurrent lookups, and fresh (the call starts after this one was
 * submitted). Then after(arg, err) on an engine worker with the lookup's result (CLOSED when
 * the engine shut down first), and release(arg) once the engine is done with it. A retry
 * task, with client_submit_lookup_retry's errors. */
varlog_err_t client_submit_lookup(varlog_client_t *c, void *arg,
                                  void (*after)(void *arg, varlog_err_t lookup_err),
                                  void (*release)(void *arg));

/* The client's metadata looks out of date for appends (no appendable log stream in a topic;
 * a sealed or denied one passed over): starts a lookup on the engine unless one started
 * within metadata.recheck.interval.ms. Never blocks: cheap enough for every append. */
void client_recheck_async(varlog_client_t *c);

/* As client_recheck_async, but the lookup runs on the calling thread within deadline_ms
 * (wire_now_ms clock; < 0: metadata.call.timeout.ms bounds it). Returns true when it ran and
 * succeeded (the current metadata is then fresh), false when rate-limited or failed. */
bool client_recheck_wait(varlog_client_t *c, int64_t deadline_ms);

/* Remaining milliseconds until deadline_ms (< 0 = none → -1); 0 when passed. */
int64_t client_remaining_ms(int64_t deadline_ms);

/* Installs view if its applied index differs from the current one (takes the reference)
 * and renews the allowlist. */
void client_install_view(varlog_client_t *c, md_view_t *view);

/* append.c: whether topic_id (and log_stream_id unless 0) is in the metadata; an unknown id
 * gets one refresh within deadline_ms (-1 = metadata.call.timeout.ms) before it is refused
 * with UNKNOWN_TOPIC or UNKNOWN_LOG_STREAM (or the refresh's error). Sets the error text. */
varlog_err_t append_check_target(varlog_client_t *c, int32_t topic_id, int32_t log_stream_id,
                                 int64_t deadline_ms);
/* As append_check_target, with who (the operation) starting the error text. */
varlog_err_t client_check_target(varlog_client_t *c, const char *who, int32_t topic_id,
                                 int32_t log_stream_id, int64_t deadline_ms);

/* appender.c: closes every appender still open, as varlog_appender_close(.., 0) would, and
 * detaches them from the client (their handles then only serve varlog_appender_close). */
void appenders_close_all(varlog_client_t *c);
/* The threads appenders shared (appender.threads): stopped and joined once every appender
 * closed (appender_exec.c). */
void app_execs_stop(varlog_client_t *c);
/* appender.c: the client-wide bound's state, from the configuration (client creation), and
 * its end (after every appender closed). */
void app_budget_init(varlog_client_t *c);
void app_budget_fini(varlog_client_t *c);

/* subscribe.c: ends every subscription still open, as varlog_subscription_close would from
 * another thread, and detaches them from the client (their handles then only serve close
 * and stats). */
void subscriptions_close_all(varlog_client_t *c);

/* subscribe.c: joins the threads of subscriptions closed from their handlers that finished
 * shutting down, and drops them from the client's list. Never on a subscription's thread. */
void subscriptions_reap(varlog_client_t *c);

/* subscribe_shared.c: varlog_client_destroy, once every subscription closed, joins the
 * shared handler threads (subscribe.handler.threads) and frees them. */
void sub_shared_stop_all(varlog_client_t *c);

/* append.c: the limits one append call's records must keep, and the names the error texts
 * give them. */
typedef struct append_limits {
    const char *who; /* the function, for the error text */
    uint64_t max_records, max_bytes, record_max_bytes;
    const char *max_records_name, *max_bytes_name;
} append_limits_t;

/* Checks records[0..n) (n >= 1, records not NULL) against lim: every record non-empty and
 * within record_max_bytes, at most max_records of them and max_bytes in all. On OK
 * *total_bytes is their payload size; otherwise INVALID_ARG with a text naming the limit. */
varlog_err_t append_check_records(const append_limits_t *lim, const varlog_record_t *records,
                                  size_t n, uint64_t *total_bytes);

/* append.c: the retry policy of appends (append.retries, append.retry.backoff.ms, .max.ms,
 * jittered doubling) for a task with attempts_left attempts, each after a delay. */
vq_retry_t append_retry_policy(const varlog_client_t *c, unsigned attempts_left);

/* append.retries -1 where a call has no deadline (timeout -1, appender.delivery.timeout.ms 0):
 * the retries it gets, since it cannot wait for a deadline. */
#define APPEND_RETRIES_WITHOUT_DEADLINE 3

/* Attempts an append gets: append.retries + 1 where it is set; with the default (-1), no
 * count (UINT_MAX) for a call with a deadline, which waits until then. */
unsigned append_max_attempts(const varlog_conf_t *conf, bool has_deadline);

/* peek_trim.c: the committed end of many log streams at once, for the consumer lag
 * (stats_lag.c). Asks every replica of each (LogStreamReplicaMetadata, all calls of all log
 * streams at once on the fan-out's threads, within deadline_ms) and keeps, per log stream,
 * varlog_peek's last: the highest local high watermark of a replica running, sealing or
 * sealed. A log stream none of whose replicas answered so has ok false. Never fails as a
 * whole: an unknown log stream, an unreachable node, an expired deadline are each a false. */
typedef struct pt_tail {
    int32_t topic_id, log_stream_id; /* in */
    bool ok;                         /* out */
    uint64_t llsn, glsn;             /* out: 0 for an empty log stream */
} pt_tail_t;
void pt_tails(varlog_client_t *c, pt_tail_t *tails, size_t n, int64_t deadline_ms);

/* append.c: the retry engine's lookups and lifecycle. */
varlog_err_t append_engine_start(varlog_client_t *c);
void append_engine_stop(varlog_client_t *c);

#endif
