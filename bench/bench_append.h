/* What bench_append's two families of rows share: the flags bench_append.c parses, and the
 * Appender rows of bench_append_pipe.c that its main registers. */
#ifndef BENCH_APPEND_H
#define BENCH_APPEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "varlog/error.h"
#include "harness.h"

#define MAX_SIZE 4096 /* -size's largest record */
#define MAX_CALL 1000 /* -call's most records a call */
#define MAX_PRODUCERS 16
#define SERVER_MAX_BYTES (8ULL << 30) /* what a server of the rows' own may store */

/* -mr, -topic, -logstream, -inproc, -server. cluster_address NULL: our own server. */
extern const char *cluster_address;
extern int32_t topic_id;
extern int32_t appender_log_stream;
extern bool appender_inproc;
extern const char *server_program;
/* -appenders per-ls: one bound appender per log stream of the topic (AppenderPerLS rows). */
extern bool appenders_per_ls;
/* -call N: records per varlog_appender_append call in the Appender rows (1: one record a
 * call); N = the batch hands whole batches over, as Go's benchmark does (AppendBatch). */
extern int32_t records_per_call;
/* -ref: varlog_appender_append_ref instead of varlog_appender_append. */
extern bool append_by_ref;

/* Fails the round b with what failed, the error and its text (NULL or "": none). */
void append_fail(bench_b_t *b, const char *what, varlog_err_t rc, const char *text);

/* ---- the Appender rows (bench_append_pipe.c) ---- */

typedef struct pcase {
    char name[96];
    size_t size;   /* bytes per record */
    int batch;     /* appender.batch.max.records */
    int depth;     /* appender.pipeline.depth */
    int producers; /* threads sharing b.N */
} pcase_t;

/* Most rows of the grid: sizes x batches x depths x producers. */
#define N_PIPE_CASES (2 * 3 * 3 * 2)

/* The grid's one record size (-size) and producer count (-producers) instead of its own. */
void pipe_grid_size(size_t size);
void pipe_grid_producers(int producers);
/* Writes the records' bytes; before the first row. */
void pipe_payload_fill(void);
/* The grid's rows into out (N_PIPE_CASES at most), named after the flags; how many. */
size_t pipe_cases_make(pcase_t *out);

/* The harness's setup, round and teardown of an Appender row (arg: its pcase_t). */
void *penv_setup(const void *arg);
void pipe_round(bench_b_t *b);
void penv_teardown(void *ctx);

#endif
