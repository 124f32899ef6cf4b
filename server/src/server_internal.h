#ifndef VARLOG_SERVER_INTERNAL_H
#define VARLOG_SERVER_INTERNAL_H

/*
 * Internals of the embedded server, shared by its files:
 *   log_store.c  the in-memory log: topics, log streams, entries, trim, the byte bound
 *                (retention or refusal), and the list of subscribe calls waiting for a commit;
 *   metadata.c   GetClusterInfo / GetMetadata;
 *   log_io.c     Append, Subscribe, SubscribeTo, TrimDeprecated, LogStreamReplicaMetadata;
 *   admin.c      the admin service (varlog.admpb.ClusterManager);
 *   faults.c     per-method failures, delays, drops, counters; the timer thread;
 *   server.c     lifecycle (start, stop, restart on the same port) and the public API.
 *
 * Locks, in the only order they are ever taken:
 *   store.mu  ->  a call's lock inside rpc_server_call_* (rpc_server never runs our code
 *                 with a call's lock held, so the reverse order cannot happen)
 *   faults.mu and timer.mu are leaves: nothing else is taken while they are held, except
 *   that the timer runs an item's fire function with no lock held.
 * Waking a waiting subscriber is done under store.mu; its on_done unlinks it under store.mu,
 * so a call in a waiter list is always alive.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "rpc_server.h"
#include "varlog/server.h"
#include "wire.h"

/* ---- method table ---------------------------------------------------------------------- */

enum {
    M_CLUSTER_INFO,
    M_METADATA,
    M_APPEND,
    M_SUBSCRIBE,
    M_SUBSCRIBE_TO,
    M_TRIM,
    M_REPLICA_MD,
    /* varlog.admpb.ClusterManager (admin.c), in the proto's order; M_ADM_FIRST.. are
     * contiguous. */
    M_ADM_GET_STORAGE_NODE,
    M_ADM_LIST_STORAGE_NODES,
    M_ADM_ADD_STORAGE_NODE,
    M_ADM_UNREGISTER_STORAGE_NODE,
    M_ADM_GET_TOPIC,
    M_ADM_DESCRIBE_TOPIC,
    M_ADM_LIST_TOPICS,
    M_ADM_ADD_TOPIC,
    M_ADM_UNREGISTER_TOPIC,
    M_ADM_GET_LOG_STREAM,
    M_ADM_LIST_LOG_STREAMS,
    M_ADM_ADD_LOG_STREAM,
    M_ADM_UPDATE_LOG_STREAM,
    M_ADM_UNREGISTER_LOG_STREAM,
    M_ADM_REMOVE_LOG_STREAM_REPLICA,
    M_ADM_SEAL,
    M_ADM_UNSEAL,
    M_ADM_SYNC,
    M_ADM_TRIM,
    M_ADM_GET_MR_NODE,
    M_ADM_LIST_MR_NODES,
    M_ADM_GET_MR_MEMBERS,
    M_ADM_ADD_MR_NODE,
    M_ADM_ADD_MR_PEER,
    M_ADM_DELETE_MR_NODE,
    M_ADM_REMOVE_MR_PEER,
    M_COUNT
};
#define M_ADM_FIRST M_ADM_GET_STORAGE_NODE

extern const char *const server_method_paths[M_COUNT];
/* Index of a method path, or -1. */
int server_method_index(const char *path);

/* ---- log store ------------------------------------------------------------------------- */

/* Payload memory of one log stream: batches are copied back to back into its current chunk
 * and a new chunk is taken when one is full, each twice the size of the last (or the batch's
 * size when larger) up to STORE_CHUNK_MAX; chunks of 2 MiB and more are mapped as huge
 * pages. So a batch costs no allocation of its own, and a log stream growing at 100 MB/s
 * takes one page fault per 2 MiB instead of one per 4 KiB (faults are what the store's
 * time went to). Entries point into a chunk; it is freed once every entry pointing into it
 * was trimmed and it is no longer its log stream's current one, so trimming a prefix of the
 * log frees the chunks that prefix used up. */
#define STORE_CHUNK_MAX (4u << 20)
typedef struct store_chunk {
    size_t live;  /* entries pointing into data (store.mu) */
    size_t size;  /* bytes allocated, this header included */
    size_t cap;   /* bytes of data */
    size_t used;  /* ... handed out */
    uint64_t seq; /* store.version when it was taken: retention trims the oldest first */
    bool mapped;  /* mmap'd, not malloc'd */
    uint8_t data[];
} store_chunk_t;

typedef struct store_entry {
    uint64_t glsn, llsn;
    size_t len;
    uint8_t *data; /* inside chunk->data */
    store_chunk_t *chunk;
} store_entry_t;

typedef struct store_ls {
    int32_t topic_id, ls_id;
    bool sealed;
    /* Seals so far (store_set_sealed_locked): a request read before a seal and still in the
     * node when it came is dropped by it, even once unsealed (log_io.c, append_fire). */
    uint64_t seals;
    store_entry_t *entries; /* live entries are entries[head .. count) */
    size_t head, count, cap;
    uint64_t next_llsn;
    uint64_t trim_glsn; /* entries with GLSN <= trim_glsn were trimmed: the global low WM - 1 */
    bool trimmed_any;   /* some entry was deleted by trim */
    uint64_t trimmed_last_glsn; /* GLSN of the last entry deleted by trim, 0 = none */
    uint64_t bytes;
    int64_t created_unix;
    store_chunk_t *chunk; /* current payload chunk; NULL before the first payload byte */
} store_ls_t;

typedef struct sub_state sub_state_t;

typedef struct store_topic {
    int32_t id;
    /* Unregistered by the admin service: gone from the metadata (and from every admin
     * answer), while its log streams keep serving reads and appends, as a real storage
     * node keeps its replicas of an unregistered topic until they are collected. */
    bool unregistered;
    uint64_t next_glsn;
    store_ls_t **lss;
    size_t n_lss;
    sub_state_t *waiters; /* subscribe calls waiting for a commit in this topic */
} store_topic_t;

typedef struct store {
    pthread_mutex_t mu;
    store_topic_t **topics; /* sorted by id */
    size_t n_topics;
    int32_t max_ls_id;
    uint64_t bytes, max_bytes; /* payload bytes stored, and the bound */
    /* The log's resident size: every chunk still allocated (headers and payloads, trimmed
     * entries' payloads included until their chunk goes) and the entry arrays' capacity;
     * the allocator's own overhead aside. Retention keeps it at or below max_bytes. */
    uint64_t resident_bytes;
    /* Full: false = retention (trim the oldest entries until a batch fits in resident_bytes
     * <= max_bytes), true = refusal (payload bytes beyond max_bytes: RESOURCE_EXHAUSTED). */
    bool refuse_when_full;
    size_t chunk_cap_max; /* data bytes of a chunk, at most: a small bound gets small chunks */
    FILE *log_file;       /* one line per retention pass; NULL = none */
    uint64_t retention_passes, retention_entries; /* for tests and the log */
    uint64_t applied_index;
    uint64_t version;  /* commit version: one per committed batch */
    sub_state_t *subs; /* every live subscribe call, for statistics */
    size_t n_subs;
} store_t;

/* Per Subscribe / SubscribeTo call. Touched by the server thread, and under store.mu for
 * the waiter and subscriber links. */
struct sub_state {
    struct varlog_server *srv;
    rpc_server_call_t *call;
    bool by_llsn;
    int32_t topic_id, ls_id;
    uint64_t begin, end, cursor;
    /* A GLSN stream scans as a real node does (log_io.c, sub_glsn_scan_begin_locked): the
     * end of its scans (0 before the first; end, or the replica's last entry + 1 once the
     * range is committed), the GLSN last sent in the current scan (0 = none), and whether
     * the next call begins a new scan. */
    uint64_t scan_end, scan_last;
    bool scan_fresh;
    int64_t not_before_ms; /* injected delay */
    int64_t drop_after;    /* messages before an injected drop; < 0 = none */
    uint64_t sent;
    bool started;
    bool waiting;
    sub_state_t *wprev, *wnext; /* topic waiters */
    sub_state_t *sprev, *snext; /* store.subs */
};

/* Retention by default; set st->refuse_when_full and st->log_file after init. */
varlog_err_t store_init(store_t *st, int32_t topics, int32_t ls_per_topic, uint64_t max_bytes);
void store_destroy(store_t *st);
/* With st->mu held. */
store_topic_t *store_topic_locked(store_t *st, int32_t topic_id);
store_ls_t *store_ls_locked(store_t *st, int32_t topic_id, int32_t ls_id);
/* Seals or unseals ls; a change moves the applied index and a seal counts in ls->seals. */
void store_set_sealed_locked(store_t *st, store_ls_t *ls, bool sealed);
varlog_err_t store_add_topic_locked(store_t *st, int32_t *topic_id);
varlog_err_t store_add_ls_locked(store_t *st, int32_t topic_id, int32_t *ls_id);
/* Storing a batch, in two steps so that the caller can copy the payloads straight from the
 * received request into the store, and so that everything that can fail comes before
 * anything is stored (a batch is stored whole or not at all):
 *   store_reserve_locked  applies the bound: with retention, trims the oldest entries of the
 *                       store until the batch fits (resident_bytes with it <= max_bytes);
 *                       with refusal, checks the payload bytes. Then makes room for n more
 *                       entries of ls and for bytes more payload bytes; returns the n slots
 *                       (after the live entries) for the caller to fill in len and data, and
 *                       in *dst where to copy the bytes (data inside [*dst, *dst + bytes)).
 *                       NULL with *err RPC_RESOURCE_EXHAUSTED (refused when full, or a batch
 *                       that cannot fit even into an empty store) or NOMEM. Nothing of the
 *                       batch is stored yet (retention may have trimmed).
 *   store_commit_locked  stores the n reserved entries, of bytes bytes copied to *dst (the
 *                       caller checked sealing): numbers them and wakes waiters. Cannot fail.
 *                       Returns the first GLSN and LLSN. Must follow the reserve under the
 *                       same hold of store.mu. */
store_entry_t *store_reserve_locked(store_t *st, store_ls_t *ls, size_t n, uint64_t bytes,
                                    uint8_t **dst, varlog_err_t *err);
void store_commit_locked(store_t *st, store_topic_t *t, store_ls_t *ls, size_t n, uint64_t bytes,
                         uint64_t *glsn0, uint64_t *llsn0);
/* st->resident_bytes. */
uint64_t store_resident_bytes_locked(const store_t *st);
/* Trims every unsealed log stream of the topic up to glsn (inclusive) when glsn does not
 * exceed the topic's high watermark. */
void store_trim_locked(store_t *st, store_topic_t *t, uint64_t glsn);
/* Whether a started subscriber fell behind a trim: an entry of ls it was still to be sent
 * was deleted. */
bool store_sub_trimmed_locked(const store_ls_t *ls, const sub_state_t *s);
/* Index of the first live entry with glsn >= g (or llsn >= l), count when none. */
size_t store_find_glsn_locked(const store_ls_t *ls, uint64_t g);
size_t store_find_llsn_locked(const store_ls_t *ls, uint64_t l);
void store_wait_locked(store_t *st, store_topic_t *t, sub_state_t *s);
void store_unwait_locked(store_t *st, sub_state_t *s);

/* ---- Append's codec (log_io.c) ----------------------------------------------------------- */

/* What append_request_scan found in an AppendRequest. */
typedef struct append_req {
    int32_t topic_id, log_stream_id; /* 0 when absent */
    size_t n_payload;
    uint64_t bytes; /* of all payloads */
} append_req_t;

/* Reads an encoded AppendRequest (topic_id = 1, log_stream_id = 2, repeated bytes payload =
 * 3) without copying it. Accepts exactly what protobuf-c's (1.4) unpack accepts, with the
 * same values (unknown fields skipped, the last topic_id or log_stream_id winning, an int32
 * the low 32 bits of its varint); returns false for what it refuses (truncated data, bad
 * keys or lengths, groups, a known field of another wire type). */
bool append_request_scan(wire_cursor_t c, append_req_t *out);
/* Copies the payloads of a request the scan accepted back to back into dst (room for
 * out->bytes) and sets slots[i].len and .data (n_payload slots). */
void append_request_copy(wire_cursor_t c, uint8_t *dst, store_entry_t *slots);
/* Encodes AppendResponse{results = n x AppendResult{meta = LogEntryMeta{topic_id, ls_id,
 * glsn0 + i, llsn0 + i}}} into buf (room for append_response_max(n) bytes) byte for byte
 * as protobuf-c packs it; returns the length. */
size_t append_response_max(size_t n);
size_t append_response_encode(uint8_t *buf, int32_t topic_id, int32_t ls_id, uint64_t glsn0,
                              uint64_t llsn0, size_t n);

/* ---- faults and the timer ------------------------------------------------------------- */

typedef struct fault_status {
    int code;
    char *message;
    char **details;
    size_t n_details;
} fault_status_t;

typedef struct fault_method {
    uint64_t calls, requests;
    int fail_n;
    fault_status_t fail;
    int64_t delay_ms;
    int64_t drop_after;    /* < 0: none */
    int drop_n;            /* streams left to drop; < 0: all */
    bool drop_after_write; /* Append: the request at the drop is stored, then unanswered */
} fault_method_t;

typedef struct faults {
    pthread_mutex_t mu;
    fault_method_t m[M_COUNT];
} faults_t;

void faults_init(faults_t *f);
void faults_destroy(faults_t *f);
void faults_clear(faults_t *f);
void faults_count(faults_t *f, int m, bool new_call, bool request);
/* Takes one injected failure if one is due; *out is then owned by the caller
 * (fault_status_clear). */
bool faults_take_failure(faults_t *f, int m, fault_status_t *out);
void fault_status_clear(fault_status_t *s);
int64_t faults_delay(faults_t *f, int m);
/* For a new stream: messages before the drop, or -1; *after_write (optional) says whether
 * the request at the drop is stored first (varlog_server_drop_stream_after_write). */
int64_t faults_take_drop(faults_t *f, int m, bool *after_write);
/* Ends call with an injected status. */
void fault_finish(rpc_server_call_t *call, const fault_status_t *s);

typedef struct timer_item timer_item_t;
struct timer_item {
    timer_item_t *next;
    int64_t due_ms;
    /* fire runs on the timer thread with no lock held; drop runs instead when the timer
     * stops first. Both free the item. */
    void (*fire)(timer_item_t *it);
    void (*drop)(timer_item_t *it);
};

typedef struct server_timer {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool running, stopping;
    timer_item_t *items;
} server_timer_t;

/* The lock and condition live from init to destroy, the thread from start to stop, so that
 * timer_schedule is safe at any time in between. */
void timer_init(server_timer_t *t);
void timer_destroy(server_timer_t *t);
varlog_err_t timer_start(server_timer_t *t);
/* Joins the thread; items not yet due are dropped. */
void timer_stop(server_timer_t *t);
/* Schedules it; when the timer is not running it is dropped at once. */
void timer_schedule(server_timer_t *t, timer_item_t *it);

/* ---- the server ------------------------------------------------------------------------ */

struct method_ctx {
    struct varlog_server *srv;
    int index;
};

struct varlog_server {
    /* "127.0.0.1:PORT", known only once the listener is bound, which is after handlers may
     * already run: written and read under addr_mu (a leaf lock), via server_address(). */
    pthread_mutex_t addr_mu;
    char address[64];
    char listen[64];
    int port;
    store_t store;
    faults_t faults;
    server_timer_t timer;
    struct method_ctx ctx[M_COUNT];
    rpc_method_t methods[M_COUNT];
    pthread_mutex_t life_mu; /* serialises start/stop/restart/destroy */
    rpc_server_t *rpc;       /* NULL while stopped */
    int64_t start_unix;
};

/* The one node's identity, the same in discovery (metadata.c) and the admin service
 * (admin.c). MR_NODE_ID: any non-zero id (the Go client rejects 0 as "no leader"). */
#define MR_NODE_ID 1
#define CLUSTER_ID 1
#define STORAGE_NODE_ID 1
#define STORAGE_PATH "/data"

/* Fills the method table (metadata.c, log_io.c and admin.c provide the handlers). */
void metadata_methods(struct varlog_server *srv, rpc_method_t *cluster_info,
                      rpc_method_t *get_metadata);
void log_io_methods(struct varlog_server *srv, rpc_method_t *append, rpc_method_t *subscribe,
                    rpc_method_t *subscribe_to, rpc_method_t *trim, rpc_method_t *replica_md);
/* methods[M_ADM_FIRST .. M_COUNT): varlog.admpb.ClusterManager. */
void admin_methods(struct varlog_server *srv, rpc_method_t *methods);

/* Shared by the unary handlers: counts the call, answers an injected failure, or runs
 * handle now or, with an injected delay, later on the timer thread (with a copy of the
 * request). handle must be safe on any thread. */
typedef void (*unary_handler_t)(struct varlog_server *srv, rpc_server_call_t *call,
                                const ProtobufCMessage *req);
void server_unary_dispatch(struct varlog_server *srv, int m, rpc_server_call_t *call,
                           const ProtobufCMessage *req, unary_handler_t handle);

/* A deep copy of msg (protobuf_c_message_free_unpacked); NULL on NOMEM. */
ProtobufCMessage *server_msg_dup(const ProtobufCMessage *msg);

/* Statistics for tests. */
typedef struct server_stats {
    size_t subscribers;  /* live Subscribe / SubscribeTo calls */
    size_t waiting;      /* ... of which wait for a commit */
    size_t queued_sends; /* messages queued in the transport for them, in flight included */
} server_stats_t;
void server_stats(struct varlog_server *srv, server_stats_t *out);

/* Copies the server's address ("" until the listener is bound) into buf. Any thread. */
void server_address(struct varlog_server *srv, char *buf, size_t size);

#endif
