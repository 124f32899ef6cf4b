#ifndef VARLOG_CLI_BENCH_H
#define VARLOG_CLI_BENCH_H

/* varlog-cli bench: what the run (cmd_bench.c) and its summary (bench_report.c) share. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "histogram.h"

enum { MAX_PRODUCERS = 256, MAX_ERR_KINDS = 16, MAX_RECORD = 1 << 20 };

typedef enum bench_mode { MODE_APPEND = 1, MODE_SUBSCRIBE = 2, MODE_BOTH = 3 } bench_mode_t;

typedef struct bench_opts {
    bench_mode_t mode;
    size_t size;
    int producers;
    uint64_t count;    /* 0: run for duration_s */
    double duration_s; /* used when count is 0 */
    double rate;       /* records/s over all producers; 0 = unlimited */
    int32_t topic;
    bool json;
    const char *batch, *linger, *depth; /* as given; NULL = the configuration's */
} bench_opts_t;

/* Failures by (outcome, error), as the callbacks saw them. */
typedef struct err_kind {
    varlog_outcome_t outcome;
    varlog_err_t err;
    uint64_t count;
} err_kind_t;

typedef struct bench_append {
    const bench_opts_t *o;
    varlog_appender_t *app;
    vhist_t lat;
    int64_t t_end_ns;          /* duration mode */
    _Atomic uint64_t next_seq; /* count mode: records claimed by producers */
    _Atomic uint64_t sent;     /* append calls accepted */
    _Atomic uint64_t queue_full;
    _Atomic int producers_done;
    /* written by the appender's thread (callbacks); read after flush, or relaxed for
     * progress */
    _Atomic uint64_t appended;
    _Atomic uint64_t failed;
    uint64_t failed_by_outcome[3];
    err_kind_t kinds[MAX_ERR_KINDS];
    size_t nkinds;
    uint64_t other_kinds; /* failures beyond MAX_ERR_KINDS distinct pairs */
    uint64_t lo_glsn, hi_glsn;
    char first_errtext[256];
    /* the run's own failures: a refused append call, or the appender's creation (a
     * varlog_err_t) */
    _Atomic int refused;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} bench_append_t;

typedef struct phase_result {
    uint64_t records, bytes;
    int64_t elapsed_ns;
    double cpu_s;
} phase_result_t;

/* Everything the summary reports. */
typedef struct bench_summary {
    const bench_opts_t *o;
    const bench_append_t *b;
    const phase_result_t *ar, *sr; /* append and subscribe phases */
    varlog_err_t sub_err;          /* how the subscribe phase ended */
    bool sub_ran;                  /* the subscribe phase ran (not skipped by an interruption) */
    bool interrupted;              /* SIGINT or SIGTERM cut the run short */
    bool ok;                       /* no record failed, nothing else failed */
    int64_t batch, linger, depth;  /* the appender's settings in effect */
} bench_summary_t;

/* The summary on stdout, as text or as one JSON object (CLI_EXIT_FAIL when it could not be
 * built). The text only for a run that did not fail; the JSON also for one that failed once
 * it began ("ok": false, the failures counted). An interrupted run says so in both forms. */
void bench_print_text(const cli_ctx_t *ctx, const bench_summary_t *s);
int bench_print_json(const cli_ctx_t *ctx, const bench_summary_t *s);

/* A failed run: what it did and why, on stderr (beside the JSON summary with --json). */
void bench_print_failure(const cli_ctx_t *ctx, const bench_summary_t *s);

#endif
