/* bench_handles: many handles at a trickle in one client, against the same load through one
 * topic-wide appender and one topic-wide subscription (issue 37, "many handles").
 *
 *   bench_handles [-mr HOST:PORT[,...]] [-topic ID] [-server PATH] [-shape bound|topic]
 *                 [-handles H] [-rate R] [-size BYTES] [-warmup S] [-seconds S]
 *                 [-X name=value ...]
 *
 * shape bound (default): one client holding H appenders, appender i bound to log stream
 * i mod L of the topic's L log streams, and H handler subscriptions (varlog_subscribe_to,
 * on their own threads), subscription j tailing log stream j mod L from its end (varlog_peek)
 * for ever. One pacer thread (this program's main thread) appends one record of -size bytes
 * to every appender each 1/R s, so each appender carries R records/s (default 100) and the
 * client H x R. Each subscription delivers what its log stream receives: R records/s when
 * L = H (a topic of H log streams); H / L times that when fewer log streams carry them.
 *
 * shape topic: the same records (H calls of one record each 1/R s) through one topic-wide
 * appender, and one topic-wide subscription (varlog_subscribe) tailing the topic from its
 * end: the same total load on two handles.
 *
 * -X name=value sets a client property, and the benchmark's name then says so
 * (/name=value): -X appender.threads=N and -X subscribe.handler.threads=N put the handles
 * on N shared threads of each kind.
 *
 * Every appender uses the client's defaults (linger, batch, depth). After -warmup seconds
 * (default 2) the process's user + system CPU, voluntary + involuntary context switches,
 * records appended and entries delivered are taken over -seconds (default 10), and its
 * threads counted (/proc/self/task) halfway through. Then the pacing stops, the appenders
 * are flushed, and the subscriptions must deliver every record appended (to their log
 * streams) within 30 s, or the run fails.
 *
 * Without -mr a varlog-server child process (-server PATH, default the one built with this
 * program) serves a topic of H log streams, so the client's CPU is its own.
 *
 * One Go benchmark line (medians.py reads it):
 *   BenchmarkHandles/shape=S/handles=H/rate=R/size=B-NCPU  N  ns/op  x records/s
 *     x entries/s  x cpu-us/s  x cpu-us/record  x ctxsw/s  x threads  x maxrss-MB
 * N: records appended in the window; ns/op: the window over N; cpu-us/s: CPU per second of
 * the window (1,000,000 = one core); cpu-us/record: CPU over records appended in the window
 * (the subscriptions' deliveries included); maxrss-MB: the process's peak resident set. */
#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "varlog/appender.h"
#include "varlog/client.h"
#include "varlog/subscribe.h"
#include "bench_client.h"
#include "child_server.h"
#include "harness.h"

#ifndef VARLOG_SERVER_PROGRAM
#define VARLOG_SERVER_PROGRAM "varlog-server"
#endif

#define MAX_HANDLES 1024
#define MAX_SIZE 65536
#define PEEK_TIMEOUT_MS 10000
#define FLUSH_TIMEOUT_MS 60000
#define CLOSE_TIMEOUT_MS 30000
#define CATCH_UP_MS 30000

/* -mr, -topic, -server, -size; -shape, -handles, -rate, -warmup, -seconds. */
static const char *cluster_address;
static const char *server_program = VARLOG_SERVER_PROGRAM;
static int32_t topic_id = 1, unused_log_stream, size = 128;
static bool unused_inproc, shape_topic;
static int32_t handles = 64, rate = 100, warmup_s = 2, seconds = 10;

static uint8_t payload[MAX_SIZE];

/* What one subscription delivered; only its thread writes (relaxed), others read. */
typedef struct sub_ctx {
    int32_t log_stream; /* 0: topic-wide */
    atomic_uint_fast64_t entries;
    atomic_bool failed;
    char why[256];
} sub_ctx_t;

/* Appended records per log stream index (bound) or in all (topic: index 0). */
static atomic_uint_fast64_t *appended;
static atomic_uint_fast64_t calls_failed;
static char first_failure[384];

static void on_appended(const varlog_append_result_t *r, void *opaque)
{
    atomic_uint_fast64_t *count = opaque;
    if (r->err != VARLOG_OK) {
        if (atomic_fetch_add(&calls_failed, 1) == 0)
            snprintf(first_failure, sizeof(first_failure), "%s: %s", varlog_err_name(r->err),
                     r->errtext ? r->errtext : "");
        return;
    }
    atomic_fetch_add_explicit(count, r->n, memory_order_relaxed);
}

static void on_entry(const varlog_entry_t *entry, void *opaque)
{
    sub_ctx_t *s = opaque;
    (void)entry;
    uint_fast64_t n = atomic_load_explicit(&s->entries, memory_order_relaxed);
    atomic_store_explicit(&s->entries, n + 1, memory_order_relaxed);
}

static void on_error(varlog_err_t err, const char *why, void *opaque)
{
    sub_ctx_t *s = opaque;
    snprintf(s->why, sizeof(s->why), "%s: %s", varlog_err_name(err), why ? why : "");
    atomic_store(&s->failed, true);
}

static int count_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void add_ns(struct timespec *t, int64_t ns)
{
    t->tv_nsec += ns % 1000000000;
    t->tv_sec += ns / 1000000000 + t->tv_nsec / 1000000000;
    t->tv_nsec %= 1000000000;
}

static uint64_t sum(atomic_uint_fast64_t *a, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += atomic_load(&a[i]);
    return s;
}

static bool take_flags(int argc, char **argv)
{
    const bench_target_flags_t target = {.inproc = &unused_inproc,
                                         .cluster_address = &cluster_address,
                                         .server_program = &server_program,
                                         .topic_id = &topic_id,
                                         .log_stream = &unused_log_stream,
                                         .size = &size,
                                         .logstream_min = 0,
                                         .size_max = MAX_SIZE};
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        bool ok = true;
        if (bench_target_flag(argc, argv, &i, &target, &ok)) {
            if (!ok)
                return false;
        } else if (bench_flag(argc, argv, &i, "shape", true, &v)) {
            if (!v || (strcmp(v, "bound") != 0 && strcmp(v, "topic") != 0)) {
                fprintf(stderr, "%s: -shape wants bound or topic\n", argv[0]);
                return false;
            }
            shape_topic = strcmp(v, "topic") == 0;
        } else if (bench_flag(argc, argv, &i, "handles", true, &v)) {
            if (!v || !bench_parse_int(argv[0], "handles", v, 1, &handles) ||
                handles > MAX_HANDLES) {
                fprintf(stderr, "%s: -handles wants 1 to %d\n", argv[0], MAX_HANDLES);
                return false;
            }
        } else if (bench_flag(argc, argv, &i, "rate", true, &v)) {
            if (!v || !bench_parse_int(argv[0], "rate", v, 1, &rate) || rate > 100000)
                return false;
        } else if (bench_flag(argc, argv, &i, "warmup", true, &v)) {
            if (!v || !bench_parse_int(argv[0], "warmup", v, 0, &warmup_s))
                return false;
        } else if (bench_flag(argc, argv, &i, "seconds", true, &v)) {
            if (!v || !bench_parse_int(argv[0], "seconds", v, 1, &seconds))
                return false;
        } else {
            fprintf(stderr,
                    "usage: %s [-mr HOST:PORT[,...]] [-topic ID] [-server PATH] "
                    "[-shape bound|topic] [-handles H] [-rate R] [-size BYTES] [-warmup S] "
                    "[-seconds S] [-X name=value ...]\n",
                    argv[0]);
            return false;
        }
    }
    return true;
}

int main(int argc, char **argv)
{
    if (!take_flags(argc, argv))
        return 2;
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)(i * 2654435761u >> 24);

    int rc = 1;
    pid_t child = -1;
    char child_addr[64];
    const char *address = cluster_address;
    varlog_client_t *client = NULL;
    static int32_t ids[MAX_HANDLES];
    static varlog_appender_t *apps[MAX_HANDLES];
    static varlog_subscription_t *subs[MAX_HANDLES];
    static sub_ctx_t ctx[MAX_HANDLES];
    size_t n_ls = 0, n_apps = shape_topic ? 1 : (size_t)handles;
    size_t n_subs = n_apps;

    if (!address) {
        child = child_server_start(server_program, 1, handles, 0, child_addr, sizeof(child_addr));
        if (child < 0)
            return 1;
        address = child_addr;
    }
    if (bench_client_open(address, NULL, &client) != 0)
        goto out;
    varlog_err_t err = varlog_client_log_streams(client, topic_id, ids, MAX_HANDLES, &n_ls);
    if (err != VARLOG_OK || n_ls == 0 || n_ls > MAX_HANDLES) {
        fprintf(stderr, "topic %d: %s\n", topic_id,
                err != VARLOG_OK ? varlog_last_error() : "no log stream, or more than 1024");
        goto out;
    }
    appended = calloc(n_ls, sizeof(*appended));
    if (!appended)
        goto out;

    /* The subscriptions first, from each log stream's end (or the topic's), so that they
     * see every record appended afterwards. */
    uint64_t topic_end = 0;
    for (size_t i = 0; i < n_ls; i++) {
        varlog_entry_meta_t first, last;
        err = varlog_peek(client, topic_id, ids[i], PEEK_TIMEOUT_MS, &first, &last, NULL);
        if (err != VARLOG_OK) {
            fprintf(stderr, "varlog_peek(log stream %d): %s\n", ids[i], varlog_last_error());
            goto out;
        }
        if (last.glsn > topic_end)
            topic_end = last.glsn;
        for (size_t j = i; !shape_topic && j < n_subs; j += n_ls) {
            ctx[j].log_stream = ids[i];
            varlog_subscribe_handlers_t h = {
                .on_entry = on_entry, .on_error = on_error, .opaque = &ctx[j]};
            err = varlog_subscribe_to(client, topic_id, ids[i], last.llsn + 1, VARLOG_LLSN_MAX, &h,
                                      &subs[j]);
            if (err != VARLOG_OK) {
                fprintf(stderr, "varlog_subscribe_to(log stream %d): %s\n", ids[i],
                        varlog_last_error());
                goto out;
            }
        }
    }
    if (shape_topic) {
        varlog_subscribe_handlers_t h = {.on_entry = on_entry, .on_error = on_error, .opaque = ctx};
        err = varlog_subscribe(client, topic_id, topic_end + 1, VARLOG_GLSN_MAX, &h, &subs[0]);
        if (err != VARLOG_OK) {
            fprintf(stderr, "varlog_subscribe: %s\n", varlog_last_error());
            goto out;
        }
    }
    for (size_t i = 0; i < n_apps; i++) {
        int32_t ls = shape_topic ? 0 : ids[i % n_ls];
        err = varlog_appender_new(client, topic_id, ls, &apps[i]);
        if (err != VARLOG_OK) {
            fprintf(stderr, "varlog_appender_new(log stream %d): %s\n", ls, varlog_last_error());
            goto out;
        }
    }

    /* The pacer: every 1/rate s, one record to every appender (bound), or handles records
     * to the one appender (topic). */
    const varlog_record_t rec = {.data = payload, .len = (size_t)size};
    const int64_t period_ns = 1000000000LL / rate;
    const int64_t ticks_warm = (int64_t)warmup_s * rate,
                  ticks_all = ticks_warm + (int64_t)seconds * rate;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    int64_t t0 = 0, t1 = 0, cpu0 = 0, csw0 = 0, cpu1 = 0, csw1 = 0;
    uint64_t app0 = 0, ent0 = 0, app1 = 0, ent1 = 0;
    int threads = -1;
    for (int64_t tick = 0; tick <= ticks_all; tick++) {
        if (tick == ticks_warm) {
            t0 = bench_now_ns();
            bench_rusage(&cpu0, &csw0);
            app0 = sum(appended, n_ls);
            ent0 = 0;
            for (size_t j = 0; j < n_subs; j++)
                ent0 += atomic_load(&ctx[j].entries);
        }
        if (tick == ticks_warm + (ticks_all - ticks_warm) / 2)
            threads = count_threads();
        if (tick == ticks_all) {
            t1 = bench_now_ns();
            bench_rusage(&cpu1, &csw1);
            app1 = sum(appended, n_ls);
            ent1 = 0;
            for (size_t j = 0; j < n_subs; j++)
                ent1 += atomic_load(&ctx[j].entries);
            break;
        }
        for (int32_t h = 0; h < handles; h++) {
            size_t a = shape_topic ? 0 : (size_t)h;
            atomic_uint_fast64_t *count = &appended[shape_topic ? 0 : (size_t)h % n_ls];
            err = varlog_appender_append(apps[a], &rec, 1, -1, on_appended, count);
            if (err != VARLOG_OK) {
                fprintf(stderr, "varlog_appender_append: %s\n", varlog_last_error());
                goto out;
            }
        }
        add_ns(&next, period_ns);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
            ;
    }

    /* Every record appended must reach its subscriptions. */
    for (size_t i = 0; i < n_apps; i++) {
        err = varlog_appender_flush(apps[i], FLUSH_TIMEOUT_MS, NULL);
        if (err != VARLOG_OK) {
            fprintf(stderr, "varlog_appender_flush: %s\n", varlog_last_error());
            goto out;
        }
    }
    if (atomic_load(&calls_failed)) {
        fprintf(stderr, "%llu append calls failed; first: %s\n",
                (unsigned long long)atomic_load(&calls_failed), first_failure);
        goto out;
    }
    int64_t deadline = bench_now_ns() + CATCH_UP_MS * 1000000LL;
    size_t behind = n_subs;
    uint64_t want = 0, got = 0;
    while (behind) {
        behind = 0;
        for (size_t j = 0; j < n_subs; j++) {
            if (atomic_load(&ctx[j].failed)) {
                fprintf(stderr, "subscription %zu (log stream %d) failed: %s\n", j,
                        ctx[j].log_stream, ctx[j].why);
                goto out;
            }
            want = shape_topic ? atomic_load(&appended[0]) : atomic_load(&appended[j % n_ls]);
            got = atomic_load(&ctx[j].entries);
            behind += got < want;
            if (got > want) {
                fprintf(stderr, "subscription %zu (log stream %d): %llu entries for %llu records\n",
                        j, ctx[j].log_stream, (unsigned long long)got, (unsigned long long)want);
                goto out;
            }
        }
        if (behind && bench_now_ns() > deadline) {
            fprintf(stderr, "%zu subscriptions short of the records appended after %d ms\n", behind,
                    CATCH_UP_MS);
            goto out;
        }
        if (behind)
            usleep(10000);
    }

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double secs = (double)(t1 - t0) / 1e9, recs = (double)(app1 - app0);
    char conf_tag[256];
    bench_conf_tag(conf_tag, sizeof(conf_tag));
    printf("BenchmarkHandles/shape=%s/handles=%d/rate=%d/size=%d%s-%ld\t%llu\t%.0f ns/op"
           "\t%.1f records/s\t%.1f entries/s\t%.0f cpu-us/s\t%.3f cpu-us/record\t%.1f ctxsw/s"
           "\t%d threads\t%.1f maxrss-MB\n",
           shape_topic ? "topic" : "bound", handles, rate, size, conf_tag,
           sysconf(_SC_NPROCESSORS_ONLN), (unsigned long long)(app1 - app0),
           recs > 0 ? (double)(t1 - t0) / recs : 0, recs / secs, (double)(ent1 - ent0) / secs,
           (double)(cpu1 - cpu0) / secs, recs > 0 ? (double)(cpu1 - cpu0) / recs : 0,
           (double)(csw1 - csw0) / secs, threads, (double)ru.ru_maxrss / 1024.0);
    fflush(stdout);
    rc = 0;
out:
    for (size_t j = 0; j < n_subs; j++)
        varlog_subscription_close(&subs[j]);
    for (size_t i = 0; i < n_apps; i++) {
        if (apps[i] && varlog_appender_close(&apps[i], CLOSE_TIMEOUT_MS) != VARLOG_OK)
            fprintf(stderr, "varlog_appender_close: %s\n", varlog_last_error());
    }
    varlog_client_destroy(client);
    child_server_stop(child);
    free(appended);
    return rc;
}
