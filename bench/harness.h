#ifndef VARLOG_BENCH_HARNESS_H
#define VARLOG_BENCH_HARNESS_H

/* A small Go testing.B shared by the benchmark programs, so that their lines compare with
 * Go's (benchstat) and every program takes the same flags:
 *
 *   PROG [-benchtime=D|Nx] [-count=N] [-bench=REGEX] [FILTER]
 *
 * -benchtime: D is a duration ("500ms", "2s", "1.5s", "100us"; a bare number is
 * milliseconds, as these programs always took it), Nx one round of exactly N iterations.
 * -count=N runs every benchmark N times in a row (for medians). -bench keeps the benchmarks
 * whose full name ("BenchmarkRingBoundary/count=4") matches the POSIX extended REGEX, FILTER
 * those whose full name contains it. -benchtime and -count also take their value as the next
 * argument.
 *
 * As Go's testing.B, a benchmark runs rounds of b->n iterations, predicting the next b->n
 * from the last round's time per op (20 % past the target, at most 100x the last, at most
 * 1e9), until a round lasts at least -benchtime; that round is reported as
 *
 *   BenchmarkName-NCPU  N  x ns/op  [x MB/s]  x B/op  x allocs/op  [x unit]...
 *
 * B/op and allocs/op count what the program's statically linked objects requested from
 * malloc, calloc and realloc while the timer ran (alloc_count.h): requested bytes, not Go's
 * size-class-rounded bytes. Extra metrics follow allocs/op, in the order reported. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BENCH_MAX_METRICS 8

typedef struct bench_b {
    long n;          /* iterations in this round */
    const void *arg; /* the benchmark's arg */
    void *ctx;       /* what the benchmark's setup returned (NULL without one) */

    /* The harness's own; use the functions below. */
    int64_t start_ns, elapsed_ns;
    uint64_t allocs0, bytes0, allocs, bytes;
    int64_t bytes_per_op;
    bool running, failed;
    size_t n_metrics;
    struct {
        double value;
        const char *unit;
    } metrics[BENCH_MAX_METRICS];
} bench_b_t;

typedef struct bench {
    const char *name; /* without the "Benchmark" prefix: "RingBoundary/count=4" */
    /* One round: b->n iterations. The timer runs when it is called and is stopped when it
     * returns. */
    void (*fn)(bench_b_t *b);
    const void *arg;
    /* Optional: called once per -count repetition before its first round (the warm-up
     * included), untimed; every round of that repetition gets the result as b->ctx. NULL
     * fails the benchmark. teardown (optional) gets it back after the last round. */
    void *(*setup)(const void *arg);
    void (*teardown)(void *ctx);
} bench_t;

typedef struct bench_opts {
    int64_t benchtime_ns; /* -benchtime when not given; 0: 1 s */
    /* > 0: before the measured rounds, unreported rounds from b->n = 1 until one lasts
     * min(warmup_ns, -benchtime) (with -benchtime=Nx: warmup_ns, or has N iterations), on
     * the same setup; prediction carries on from there. */
    int64_t warmup_ns;
    const char *pkg; /* non-NULL: goos/goarch/pkg/cpu lines before the first result */
    /* B/op and allocs/op as averages with decimals ("0.0123 allocs/op") rather than Go's
     * truncated integers, for benchmarks whose ops allocate less than once each. */
    bool precise_allocs;
} bench_opts_t;

/* Parses the flags, runs every benchmark selected, and returns the exit status: 0, 1 when a
 * benchmark failed, 2 on a bad command line (usage on stderr). */
int bench_main(int argc, char **argv, const bench_opts_t *o, const bench_t *benches, size_t n);

/* Go's b.ResetTimer: zero the elapsed time and the allocation counts (setup done). */
void b_reset_timer(bench_b_t *b);
/* Go's b.StopTimer / b.StartTimer: pause around work that is not measured. */
void b_stop_timer(bench_b_t *b);
void b_start_timer(bench_b_t *b);
/* Time measured so far in this round (Go's b.Elapsed). */
int64_t b_elapsed_ns(const bench_b_t *b);
/* Go's b.SetBytes: bytes processed by one op, for the MB/s column. */
void b_set_bytes(bench_b_t *b, int64_t bytes_per_op);
/* Go's b.ReportMetric: an extra column "value unit" for this round; unit is a literal. */
void b_report_metric(bench_b_t *b, double value, const char *unit);
/* Go's b.Errorf + b.FailNow (the caller returns): "FAIL: message" on stderr, once; the
 * benchmark stops and prints "--- FAIL: BenchmarkName". */
void b_failf(bench_b_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int64_t bench_now_ns(void);
/* CPU time (user + system, µs) and context switches (voluntary + involuntary) of the whole
 * process so far, every thread (getrusage RUSAGE_SELF). */
void bench_rusage(int64_t *cpu_us, int64_t *csw);

/* For a benchmark's own flags, taken out of argv before bench_main: whether argv[*i] is
 * "-name", "-name=value" or "-name value" (then *i moves past the value); *v gets the value
 * (NULL for a flag without one, or when it is missing). */
bool bench_flag(int argc, char **argv, int *i, const char *name, bool takes_value, const char **v);
/* v as an integer in [min, INT32_MAX] into *out; false, with "prog: -flag v: ..." on stderr,
 * otherwise. */
bool bench_parse_int(const char *prog, const char *flag, const char *v, long min, int32_t *out);

#endif
