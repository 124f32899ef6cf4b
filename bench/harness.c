#include "harness.h"

#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "alloc_count.h"

#define MAX_ITERS 1000000000L
#define DEFAULT_BENCHTIME_NS 1000000000LL

int64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void bench_rusage(int64_t *cpu_us, int64_t *csw)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *cpu_us = ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec +
              ru.ru_stime.tv_usec;
    *csw = (int64_t)ru.ru_nvcsw + ru.ru_nivcsw;
}

void b_start_timer(bench_b_t *b)
{
    if (b->running)
        return;
    b->allocs0 = alloc_count_allocs();
    b->bytes0 = alloc_count_bytes();
    b->start_ns = bench_now_ns();
    b->running = true;
}

void b_stop_timer(bench_b_t *b)
{
    if (!b->running)
        return;
    b->elapsed_ns += bench_now_ns() - b->start_ns;
    b->allocs += alloc_count_allocs() - b->allocs0;
    b->bytes += alloc_count_bytes() - b->bytes0;
    b->running = false;
}

void b_reset_timer(bench_b_t *b)
{
    b->running = false;
    b->elapsed_ns = 0;
    b->allocs = b->bytes = 0;
    b_start_timer(b);
}

int64_t b_elapsed_ns(const bench_b_t *b)
{
    return b->elapsed_ns + (b->running ? bench_now_ns() - b->start_ns : 0);
}

void b_set_bytes(bench_b_t *b, int64_t bytes_per_op)
{
    b->bytes_per_op = bytes_per_op;
}

void b_report_metric(bench_b_t *b, double value, const char *unit)
{
    for (size_t i = 0; i < b->n_metrics; i++) {
        if (strcmp(b->metrics[i].unit, unit) == 0) {
            b->metrics[i].value = value;
            return;
        }
    }
    if (b->n_metrics < BENCH_MAX_METRICS) {
        b->metrics[b->n_metrics].value = value;
        b->metrics[b->n_metrics].unit = unit;
        b->n_metrics++;
    }
}

void b_failf(bench_b_t *b, const char *fmt, ...)
{
    if (!b->failed) {
        va_list ap;
        va_start(ap, fmt);
        fputs("FAIL: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    b->failed = true;
}

/* ---- running ------------------------------------------------------------------------ */

typedef struct runner {
    const bench_opts_t *o;
    int64_t benchtime_ns;
    long benchtime_x; /* > 0: one round of exactly that many */
    int count;
    const char *filter;
    regex_t re;
    bool have_re;
    int ncpu;
    bool header_done;
    int failures;
} runner_t;

/* Go's predictN: aim 20 % past the goal from the last round's time per op, grow at most
 * 100x per round, run at least one more than last time, never more than 1e9. (Go stopped
 * rounding b.N up to 1, 2, 3, 5, 10... long ago; neither do we.) */
static long predict_n(int64_t goal_ns, long prev_iters, int64_t prev_ns, long last)
{
    if (prev_ns <= 0)
        prev_ns = 1;
    /* In floating point: goal x iterations overflows int64 for long -benchtime values. */
    double n = (double)goal_ns * (double)prev_iters / (double)prev_ns;
    n += n / 5;
    if (n > 100.0 * (double)last)
        n = 100.0 * (double)last;
    if (n < (double)last + 1)
        n = (double)last + 1;
    if (n > (double)MAX_ITERS)
        n = (double)MAX_ITERS;
    return (long)n;
}

static void run_round(bench_b_t *b, const bench_t *bm, void *ctx, long n)
{
    memset(b, 0, sizeof(*b));
    b->n = n;
    b->arg = bm->arg;
    b->ctx = ctx;
    b_start_timer(b);
    bm->fn(b);
    b_stop_timer(b);
}

/* Rounds from n iterations on until one lasts goal_ns; b holds the last. */
/* Rounds from n iterations until one lasts goal_ns or has max_n iterations. */
static void run_until(bench_b_t *b, const bench_t *bm, void *ctx, long n, int64_t goal_ns,
                      long max_n)
{
    for (;;) {
        run_round(b, bm, ctx, n);
        if (b->failed || b->elapsed_ns >= goal_ns || n >= max_n)
            return;
        n = predict_n(goal_ns, b->n, b->elapsed_ns, n);
        if (n > max_n)
            n = max_n;
    }
}

/* Go's prettyPrint: ten places before the decimal point, four significant digits below. */
static void pretty(double x, const char *unit)
{
    double y = x < 0 ? -x : x;
    if (y == 0 || y >= 999.95)
        printf("\t%10.0f %s", x, unit);
    else if (y >= 99.995)
        printf("\t%12.1f %s", x, unit);
    else if (y >= 9.9995)
        printf("\t%13.2f %s", x, unit);
    else if (y >= 0.99995)
        printf("\t%14.3f %s", x, unit);
    else if (y >= 0.099995)
        printf("\t%15.4f %s", x, unit);
    else if (y >= 0.0099995)
        printf("\t%16.5f %s", x, unit);
    else if (y >= 0.00099995)
        printf("\t%17.6f %s", x, unit);
    else
        printf("\t%18.7f %s", x, unit);
}

static void print_header(runner_t *r)
{
    if (r->header_done || !r->o->pkg)
        return;
    r->header_done = true;
    char cpu[256] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof(line), f)) {
            if (strncmp(line, "model name", 10) == 0) {
                const char *v = strchr(line, ':');
                if (v) {
                    v++;
                    while (*v == ' ' || *v == '\t')
                        v++;
                    snprintf(cpu, sizeof(cpu), "%s", v);
                    cpu[strcspn(cpu, "\n")] = '\0';
                }
                break;
            }
        }
        fclose(f);
    }
    printf("goos: linux\n");
#if defined(__x86_64__)
    printf("goarch: amd64\n");
#elif defined(__aarch64__)
    printf("goarch: arm64\n");
#endif
    printf("pkg: %s\n", r->o->pkg);
    if (cpu[0])
        printf("cpu: %s\n", cpu);
}

static void print_result(const runner_t *r, const char *full, const bench_b_t *b)
{
    double secs = (double)b->elapsed_ns / 1e9;
    printf("%s-%d\t%8ld", full, r->ncpu, b->n);
    pretty((double)b->elapsed_ns / (double)b->n, "ns/op");
    if (b->bytes_per_op > 0 && secs > 0)
        printf("\t%7.2f MB/s", (double)b->bytes_per_op * (double)b->n / 1e6 / secs);
    if (r->o->precise_allocs) {
        pretty((double)b->bytes / (double)b->n, "B/op");
        pretty((double)b->allocs / (double)b->n, "allocs/op");
    } else {
        printf("\t%8llu B/op\t%8llu allocs/op", (unsigned long long)(b->bytes / (uint64_t)b->n),
               (unsigned long long)(b->allocs / (uint64_t)b->n));
    }
    for (size_t i = 0; i < b->n_metrics; i++)
        pretty(b->metrics[i].value, b->metrics[i].unit);
    printf("\n");
    fflush(stdout);
}

static void run_once(runner_t *r, const bench_t *bm, const char *full)
{
    bench_b_t b;
    memset(&b, 0, sizeof(b));
    void *ctx = NULL;
    if (bm->setup && !(ctx = bm->setup(bm->arg))) {
        printf("--- FAIL: %s\n", full);
        fflush(stdout);
        r->failures++;
        return;
    }
    long n = 1;
    if (r->o->warmup_ns > 0) {
        int64_t warm = r->o->warmup_ns;
        if (r->benchtime_x == 0 && r->benchtime_ns < warm)
            warm = r->benchtime_ns;
        /* With -benchtime=Nx no warm-up round is larger than the measured one: a benchmark
         * of a log holding N entries (bench_subscribe -nofill) reads no more than N. */
        run_until(&b, bm, ctx, 1, warm, r->benchtime_x > 0 ? r->benchtime_x : MAX_ITERS);
        n = predict_n(r->benchtime_ns, b.n, b.elapsed_ns, b.n);
    }
    if (!b.failed) {
        if (r->benchtime_x > 0)
            run_round(&b, bm, ctx, r->benchtime_x);
        else
            run_until(&b, bm, ctx, n, r->benchtime_ns, MAX_ITERS);
    }
    if (bm->teardown)
        bm->teardown(ctx);
    if (b.failed) {
        printf("--- FAIL: %s\n", full);
        fflush(stdout);
        r->failures++;
        return;
    }
    print_result(r, full, &b);
}

/* ---- flags -------------------------------------------------------------------------- */

/* "1500" and "1500ms" are milliseconds, "2s" seconds, "300x" a fixed b->n. */
static bool parse_benchtime(runner_t *r, const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0))
        return false;
    if (strcmp(end, "x") == 0) {
        if (v > (double)MAX_ITERS || v != (double)(long)v)
            return false;
        r->benchtime_x = (long)v;
        return true;
    }
    static const struct {
        const char *unit;
        double ns;
    } units[] = {{"", 1e6},   {"ns", 1},  {"us", 1e3}, {"\xc2\xb5s", 1e3},
                 {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].unit) == 0) {
            double ns = v * units[i].ns;
            if (ns < 1 || ns > 9e18)
                return false;
            r->benchtime_ns = (int64_t)ns;
            r->benchtime_x = 0;
            return true;
        }
    }
    return false;
}

static int usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-benchtime=D|Nx] [-count=N] [-bench=REGEX] [FILTER]\n"
            "  -benchtime  run each benchmark for duration D (500ms, 2s; a bare number is ms)\n"
            "              or exactly N iterations (Nx)\n"
            "  -count      run each benchmark N times\n"
            "  -bench      run the benchmarks whose full name matches REGEX\n"
            "  FILTER      run the benchmarks whose full name contains FILTER\n",
            prog);
    return 2;
}

/* "-name=value" or "-name value": the value, or NULL when a is not that flag. */
static const char *flag_value(int argc, char **argv, int *i, const char *name, bool *missing)
{
    const char *a = argv[*i] + 1;
    size_t len = strlen(name);
    if (strncmp(a, name, len) != 0)
        return NULL;
    if (a[len] == '=')
        return a + len + 1;
    if (a[len] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

static int parse_flags(runner_t *r, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        bool missing = false;
        if (a[0] != '-') {
            r->filter = a;
        } else if ((v = flag_value(argc, argv, &i, "benchtime", &missing))) {
            if (!parse_benchtime(r, v))
                return usage(argv[0]);
        } else if ((v = flag_value(argc, argv, &i, "count", &missing))) {
            char *end;
            long c = strtol(v, &end, 10);
            if (end == v || *end || c < 1 || c > 1000)
                return usage(argv[0]);
            r->count = (int)c;
        } else if ((v = flag_value(argc, argv, &i, "bench", &missing))) {
            if (r->have_re)
                regfree(&r->re);
            r->have_re = false;
            if (regcomp(&r->re, v, REG_EXTENDED | REG_NOSUB) != 0) {
                fprintf(stderr, "%s: bad -bench regular expression: %s\n", argv[0], v);
                return 2;
            }
            r->have_re = true;
        } else {
            return usage(argv[0]);
        }
        if (missing)
            return usage(argv[0]);
    }
    return 0;
}

int bench_main(int argc, char **argv, const bench_opts_t *o, const bench_t *benches, size_t n)
{
    runner_t r = {.o = o, .count = 1};
    r.benchtime_ns = o->benchtime_ns > 0 ? o->benchtime_ns : DEFAULT_BENCHTIME_NS;
    int rc = parse_flags(&r, argc, argv);
    if (rc != 0) {
        if (r.have_re)
            regfree(&r.re);
        return rc;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    r.ncpu = cpus > 0 ? (int)cpus : 1;
    for (size_t i = 0; i < n; i++) {
        char full[256];
        snprintf(full, sizeof(full), "Benchmark%s", benches[i].name);
        if (r.filter && !strstr(full, r.filter))
            continue;
        if (r.have_re && regexec(&r.re, full, 0, NULL, 0) != 0)
            continue;
        print_header(&r);
        for (int k = 0; k < r.count; k++)
            run_once(&r, &benches[i], full);
    }
    if (r.have_re)
        regfree(&r.re);
    return r.failures ? 1 : 0;
}

bool bench_flag(int argc, char **argv, int *i, const char *name, bool takes_value, const char **v)
{
    const char *a = argv[*i];
    size_t len = strlen(name);
    if (a[0] != '-' || strncmp(a + 1, name, len) != 0 || (a[len + 1] && a[len + 1] != '='))
        return false;
    *v = NULL;
    if (!takes_value)
        return a[len + 1] == '\0';
    if (a[len + 1] == '=')
        *v = a + len + 2;
    else if (*i + 1 < argc)
        *v = argv[++*i];
    return true;
}

bool bench_parse_int(const char *prog, const char *flag, const char *v, long min, int32_t *out)
{
    char *end;
    long t = strtol(v, &end, 10);
    if (end == v || *end || t < min || t > INT32_MAX) {
        fprintf(stderr, "%s: -%s %s: an integer >= %ld\n", prog, flag, v, min);
        return false;
    }
    *out = (int32_t)t;
    return true;
}
