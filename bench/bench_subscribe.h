#ifndef VARLOG_BENCH_SUBSCRIBE_H
#define VARLOG_BENCH_SUBSCRIBE_H

/* What the parts of bench_subscribe share (what it measures and its flags: bench_subscribe.c):
 *
 *   bench_subscribe.c         the command line, the rows, main;
 *   bench_subscribe_env.c     one benchmark's server (child, embedded or -mr), client, and the
 *                             log filled outside the clock;
 *   bench_subscribe_rounds.c  one round of b.N entries through the library (iterator or
 *                             handlers) and the metrics of a round;
 *   bench_subscribe_floor.c   GrpcFloor and GrpcFloorEach: the same Subscribe (SubscribeTo)
 *                             on bare gRPC-core calls. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <grpc/grpc.h>

#include "varlog/appender.h"
#include "varlog/client.h"
#include "varlog/server.h"
#include "varlog/subscribe.h"
#include "harness.h"

#define ENTRY_SIZE 100
#define SERVER_MAX_BYTES (8ULL << 30)
#define NEXT_TIMEOUT_MS 30000
#define FILL_CALL 100 /* records per fill append call */
#define FLUSH_TIMEOUT_MS 120000
#define CLOSE_TIMEOUT_MS 30000
#define PEEK_TIMEOUT_MS 10000
#define MAX_LOG_STREAMS 1024 /* of a -mr topic; more fail the setup */
#define MAX_EACH 64          /* SubscribeToEach's subscriptions */
#define MAX_CONF 16

typedef enum {
    F_SUBSCRIBE_TO_ITER,
    F_SUBSCRIBE_ITER,
    F_SUBSCRIBE_HANDLER,
    F_GRPC_FLOOR,
    F_SUBSCRIBE_TO_EACH,
    F_GRPC_FLOOR_EACH
} form_t;

typedef struct scase {
    char name[64];
    form_t form;
    int32_t log_streams; /* of the child's or embedded server's topic; with -mr, found */
} scase_t;

/* The command line's values (bench_subscribe.c), set before the first benchmark runs:
 * -mr, -topic, -logstream, -inproc, -server, -fillbatch, -nofill, -conf. */
extern const char *cluster_address;
extern int32_t topic_id;
extern int32_t mr_log_stream; /* 0: the topic's first */
extern bool inproc;
extern const char *server_program;
extern int fill_batch;
extern bool no_fill;
extern int each_subs; /* -subs: SubscribeToEach's subscriptions (at most the log streams) */
extern const char *extra_conf[2 * MAX_CONF + 1];
extern size_t n_extra_conf;
/* -chanarg NAME=INT: integer channel arguments added to GrpcFloor's channel. */
extern grpc_arg chan_args[MAX_CONF];
extern size_t n_chan_args;

/* The record every fill appends: ENTRY_SIZE varied bytes, set by main. */
extern uint8_t payload[ENTRY_SIZE];

struct env;

/* One subscription of SubscribeToEach (its log stream's entries, on its own thread), or one
 * bare call of GrpcFloorEach. */
typedef struct each_sub {
    struct env *e;
    int32_t log_stream;
    grpc_channel *ch;     /* GrpcFloorEach: the channel to the log stream's primary */
    uint64_t first, have; /* LLSNs held from first on (varlog_peek) */
    uint64_t next, want;  /* the LLSN wanted next; entries this round reads */
    uint64_t count, bad, bytes;
    bool done; /* on_end or on_error ran (under e->mu) */
    varlog_err_t err;
    char text[256];
} each_sub_t;

typedef struct env {
    const scase_t *c;
    varlog_server_t *srv; /* -inproc */
    pid_t child;          /* the varlog-server child, or -1 */
    varlog_client_t *client;
    char address[256]; /* the server's (metadata and storage node) */
    grpc_channel *ch;  /* GrpcFloor's own channel and queue */
    grpc_completion_queue *cq;
    varlog_appender_t *app; /* the filler, opened when first needed */
    int32_t log_stream;     /* SubscribeTo's */
    uint64_t first;         /* the first GLSN (LLSN for SubscribeTo) of the log */
    uint64_t have;          /* entries held from first on, without a gap */

    /* Written by the appender's thread (one callback at a time), read after a flush. */
    atomic_uint_fast64_t max_glsn, max_llsn, fill_failed;
    varlog_err_t fill_err;
    char fill_text[256];

    /* Handler form: the subscription's thread writes, the benchmark thread waits. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t h_next;    /* the GLSN wanted next */
    uint64_t h_count;   /* entries delivered */
    uint64_t h_bad;     /* entries out of sequence or of the wrong size */
    uint64_t h_bytes;   /* payload bytes delivered */
    bool h_done;        /* on_end or on_error ran */
    varlog_err_t h_err; /* VARLOG_OK after on_end */
    char h_text[256];

    /* SubscribeToEach: one subscription per log stream of the first n_each. */
    each_sub_t each[MAX_EACH];
    size_t n_each, each_done;
    /* GrpcFloorEach: a channel per storage node (each[i].ch points at one of them). */
    grpc_channel *each_ch[MAX_EACH];
    char each_addr[MAX_EACH][128];
    size_t n_each_ch;
} env_t;

/* b_failf with what failed, the error's name and text, and text when there is one. */
void bfail(bench_b_t *b, const char *what, varlog_err_t rc, const char *text);

/* The harness's setup and teardown of one benchmark (arg: its scase_t). */
void *env_setup(const void *arg);
void env_teardown(void *ctx);
/* Appends enough records for e->have >= want. Untimed (the caller stops the clock). */
int fill(bench_b_t *b, env_t *e, uint64_t want);
/* Closes the filler and the library's client; fill opens them again when needed. GrpcFloor
 * closes them while it measures: see bench_subscribe_env.c. */
void env_client_close(env_t *e);

/* GrpcFloor's own channel (with -chanarg's arguments) and completion queue, to address;
 * floor_close closes GrpcFloorEach's channels too, and accepts an env without any. */
void floor_open(env_t *e, const char *address);
void floor_close(env_t *e);
/* One GrpcFloor round: b->n entries. Returns the bytes of the messages read, or -1 after
 * b_failf. */
int64_t read_floor(bench_b_t *b, env_t *e);
/* GrpcFloorEach's channel to address for e->each[i] (one per address, shared), opening the
 * completion queue with the first. 0, or -1 after a message on stderr. */
int floor_each_open(env_t *e, size_t i, const char *address);
/* One GrpcFloorEach round: b->n entries over e->n_each bare SubscribeTo calls, shared as
 * SubscribeToEach shares them. Returns the bytes read, or -1 after b_failf. */
int64_t read_floor_each(bench_b_t *b, env_t *e);

/* Gives each of e->n_each log streams its share of b->n entries from its first LLSN; -1
 * after b_failf when one holds fewer than its share. */
int each_shares(bench_b_t *b, env_t *e);

/* The harness's round of every row. */
void sub_round(bench_b_t *b);

#endif
