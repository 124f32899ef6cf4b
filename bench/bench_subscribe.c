/* bench_subscribe: reading the log (varlog/subscribe.h), printed as Go benchmark lines.
 *
 *   bench_subscribe [-mr HOST:PORT[,HOST:PORT...]] [-topic ID] [-logstream ID] [-inproc]
 *                   [-server PATH] [-fillbatch N] [-nofill] [-subs S] [-conf NAME=VALUE]...
 *                   [-benchtime=D|Nx] [-count=N] [-bench=REGEX] [FILTER]
 *
 * (-benchtime, -count, -bench and FILTER: see harness.h.)
 *
 * Rows, all of 100-byte entries; an op is one entry delivered to the application:
 *
 *   SubscribeTo/iter/ls=1      varlog_subscribe_to_iter on the topic's one log stream (LLSN
 *                              order: no merge);
 *   Subscribe/iter/ls=K        varlog_subscribe_iter on a topic of K = 1, 2, 4 log streams
 *                              (GLSN order: the merge over K streams);
 *   Subscribe/handler/ls=2     varlog_subscribe with an on_entry handler on the
 *                              subscription's thread, the benchmark thread waiting for on_end;
 *   SubscribeToEach/handler/ls=S  (-mr only) S = -subs (default 8, at most the topic's log
 *                              streams) varlog_subscribe_to handler subscriptions in one
 *                              client, one per log stream of the topic's first S, each on its
 *                              own thread; a round of b.N entries gives the first b.N % S of
 *                              them one entry more than b.N / S, each reading from its log
 *                              stream's first LLSN (varlog_peek). No fill: a log stream
 *                              holding fewer entries than its share fails the row (store
 *                              them first, as bench/scale.py does).
 *   GrpcFloorEach/ls=S         (-mr only) not the library: SubscribeToEach's S streams, the
 *                              same SubscribeTo requests and shares, on bare gRPC-core calls
 *                              to each log stream's primary, one completion queue that the
 *                              benchmark thread polls, one RECV_MESSAGE per entry (counted,
 *                              not decoded; the status must be OK after the last). The floor
 *                              under any gRPC-core client reading S log streams in one process.
 *
 * A round of b.N opens a subscription of [first, first + b.N), takes b.N entries (checking
 * that each has the next GLSN, or LLSN for SubscribeTo, and 100 bytes), waits for the end
 * of the range (END from varlog_subscription_next, on_end), and closes it: opening and the
 * first round trip are inside the clock, spread over b.N entries. Every round reads the log
 * from its beginning again.
 *
 * The log is filled outside the clock: before a round that wants more entries than the log
 * holds, a pipelined appender (appender.batch.max.records = -fillbatch, default 1000;
 * topic-wide for ls > 1, so runs of about that many consecutive GLSNs sit in one log stream,
 * as a batch-appending writer leaves them) appends the shortfall and is flushed. Then the
 * clock is reset.
 *
 * Servers: by default a varlog-server child process per benchmark and -count repetition (1
 * topic of K log streams, --max-bytes 8 GiB; -server PATH, default the one built with this
 * program), so that this process's CPU time is the client's alone. -inproc runs the embedded
 * server in this process instead (CPU and allocations then include the server's).
 *
 * -mr: the metadata repository of a Varlog cluster instead. Rows: SubscribeTo/iter on log
 * stream -logstream (default the topic's first), and Subscribe/iter and Subscribe/handler
 * topic-wide over all of -topic's (default 1) log streams, named ls=K after the count found;
 * when the topic has one log stream, GrpcFloor too, on the log stream's primary storage
 * node (from the library's metadata), so that the topic-wide read has its floor beside it.
 * The log's first entries come from varlog_peek (GLSN: the lowest first entry of the
 * topic's log streams; LLSN: the log stream's). The cluster must hold enough entries from
 * there for the rounds (about 1.2 x the entries/s figure with the default -benchtime=1s,
 * more for longer ones), or the benchmark appends the shortfall first (100-byte records
 * that stay in the cluster); -nofill makes a shortfall fail the row instead. Entries that
 * others wrote are read as they are: the length check is left out and MB/s assumes 100
 * bytes; B/entry reports the real average.
 *
 * -conf NAME=VALUE: a client property for every row (subscribe.prefetch.entries, ...);
 * repeatable.
 *
 * Line format: name-GOMAXPROCS, iterations, ns/op, MB/s (100 bytes an entry), B/op and
 * allocs/op (libvarlog's own allocations, malloc wrapped at link time: alloc_count.c), then
 *   entries/s        entries delivered per second;
 *   cpu-us/entry     user + system CPU of this whole process (getrusage RUSAGE_SELF: the
 *                    benchmark thread, the subscription's thread, gRPC's threads) over the
 *                    round, per entry;
 *   srv-cpu-us/entry the child server's CPU per entry (/proc/PID/stat, 10 ms ticks);
 *   all-allocs/op    every allocation of the process per entry, gRPC's included
 *                    (alloc_all.c);
 *   resubscribes     streams opened again in the round (subscription stats; 0 when sane);
 *   B/entry          (-mr) the average payload bytes of an entry read;
 *   ctxsw/1000entries voluntary + involuntary context switches of this whole process
 *                    (getrusage RUSAGE_SELF) over the round, per 1000 entries. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>

#include "varlog/client.h"
#include "bench_client.h"
#include "bench_subscribe.h"
#include "harness.h"

#ifndef VARLOG_SERVER_PROGRAM
#define VARLOG_SERVER_PROGRAM "varlog-server"
#endif

/* -mr, -topic, -logstream, -inproc, -server, -fillbatch, -nofill, -conf. */
const char *cluster_address;
int32_t topic_id = 1;
int32_t mr_log_stream; /* 0: the topic's first */
bool inproc;
const char *server_program = VARLOG_SERVER_PROGRAM;
int fill_batch = 1000;
bool no_fill;
int each_subs = 8;
const char *extra_conf[2 * MAX_CONF + 1];
size_t n_extra_conf;
static char extra_conf_buf[MAX_CONF][256];
/* -chanarg NAME=INT: integer channel arguments added to GrpcFloor's channel. */
grpc_arg chan_args[MAX_CONF];
size_t n_chan_args;
static char chan_arg_buf[MAX_CONF][128];

uint8_t payload[ENTRY_SIZE];

void bfail(bench_b_t *b, const char *what, varlog_err_t rc, const char *text)
{
    b_failf(b, "%s: %s (%s)%s%s", what, varlog_err_name(rc), varlog_err_str(rc),
            text && text[0] ? ": " : "", text ? text : "");
}

/* "NAME=VALUE" into the extra client properties. */
static bool add_conf(const char *prog, const char *v)
{
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || n_extra_conf / 2 >= MAX_CONF || strlen(v) >= 256) {
        fprintf(stderr, "%s: -conf %s: NAME=VALUE (at most %d)\n", prog, v, MAX_CONF);
        return false;
    }
    char *buf = extra_conf_buf[n_extra_conf / 2];
    memcpy(buf, v, strlen(v) + 1);
    buf[eq - v] = '\0';
    extra_conf[n_extra_conf++] = buf;
    extra_conf[n_extra_conf++] = buf + (eq - v) + 1;
    extra_conf[n_extra_conf] = NULL;
    return true;
}

/* "NAME=INT" into GrpcFloor's channel arguments. */
static bool add_chan_arg(const char *prog, const char *v)
{
    const char *eq = strchr(v, '=');
    char *end;
    if (!eq || eq == v || n_chan_args >= MAX_CONF || strlen(v) >= 128) {
        fprintf(stderr, "%s: -chanarg %s: NAME=INT (at most %d)\n", prog, v, MAX_CONF);
        return false;
    }
    long t = strtol(eq + 1, &end, 10);
    if (end == eq + 1 || *end || t < INT32_MIN || t > INT32_MAX) {
        fprintf(stderr, "%s: -chanarg %s: the value is not an int\n", prog, v);
        return false;
    }
    char *buf = chan_arg_buf[n_chan_args];
    memcpy(buf, v, (size_t)(eq - v));
    buf[eq - v] = '\0';
    chan_args[n_chan_args++] =
        (grpc_arg){.type = GRPC_ARG_INTEGER, .key = buf, .value.integer = (int)t};
    return true;
}

static bool take_own_flags(int *argc, char **argv)
{
    const bench_target_flags_t target = {.inproc = &inproc,
                                         .cluster_address = &cluster_address,
                                         .server_program = &server_program,
                                         .topic_id = &topic_id,
                                         .log_stream = &mr_log_stream,
                                         .logstream_min = 0};
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *v = NULL;
        bool ok = true;
        int32_t t = 0;
        if (bench_target_flag(*argc, argv, &i, &target, &ok)) {
            if (!ok)
                return false;
            continue;
        }
        if (bench_flag(*argc, argv, &i, "nofill", false, &v)) {
            no_fill = true;
            continue;
        }
        if (bench_flag(*argc, argv, &i, "fillbatch", true, &v)) {
            ok = v && bench_parse_int(argv[0], "fillbatch", v, 1, &t);
            fill_batch = t;
        } else if (bench_flag(*argc, argv, &i, "subs", true, &v)) {
            ok = v && bench_parse_int(argv[0], "subs", v, 1, &t) && t <= MAX_EACH;
            each_subs = t;
        } else if (bench_flag(*argc, argv, &i, "conf", true, &v)) {
            ok = v && add_conf(argv[0], v);
        } else if (bench_flag(*argc, argv, &i, "chanarg", true, &v)) {
            ok = v && add_chan_arg(argv[0], v);
        } else {
            argv[out++] = argv[i];
            continue;
        }
        if (!ok) {
            if (!v)
                fprintf(stderr, "%s: %s needs a value\n", argv[0], argv[i]);
            return false;
        }
    }
    argv[out] = NULL;
    *argc = out;
    return true;
}

/* With -mr, the number of log streams of the topic, for the rows' names. */
static int32_t mr_log_streams(void)
{
    varlog_client_t *client = NULL;
    if (bench_client_open(cluster_address, extra_conf, &client) != 0)
        return -1;
    static int32_t ids[MAX_LOG_STREAMS];
    size_t n = 0;
    varlog_err_t rc = varlog_client_log_streams(client, topic_id, ids, MAX_LOG_STREAMS, &n);
    if (rc != VARLOG_OK || n == 0)
        fprintf(stderr, "topic %d: %s\n", topic_id,
                rc != VARLOG_OK ? varlog_last_error() : "it has no log stream");
    varlog_client_destroy(client);
    return rc == VARLOG_OK && n > 0 ? (int32_t)n : -1;
}

int main(int argc, char **argv)
{
    if (!take_own_flags(&argc, argv))
        return 2;
    /* Varied bytes, as records usually are; the same for every record. */
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)(i * 2654435761u >> 24);

    static scase_t cases[8];
    size_t n = 0;
    if (cluster_address) {
        int32_t k = mr_log_streams();
        if (k < 0)
            return 1;
        cases[n++] = (scase_t){.form = F_SUBSCRIBE_TO_ITER, .log_streams = 1};
        cases[n++] = (scase_t){.form = F_SUBSCRIBE_ITER, .log_streams = k};
        cases[n++] = (scase_t){.form = F_SUBSCRIBE_HANDLER, .log_streams = k};
        /* One Subscribe call reads a topic-wide range only when one log stream holds it. */
        if (k == 1)
            cases[n++] = (scase_t){.form = F_GRPC_FLOOR, .log_streams = 1};
        cases[n++] =
            (scase_t){.form = F_SUBSCRIBE_TO_EACH, .log_streams = k < each_subs ? k : each_subs};
        cases[n++] =
            (scase_t){.form = F_GRPC_FLOOR_EACH, .log_streams = k < each_subs ? k : each_subs};
        fprintf(stderr, "bench_subscribe: cluster at %s, topic %d (%d log streams)\n",
                cluster_address, topic_id, k);
    } else {
        cases[n++] = (scase_t){.form = F_SUBSCRIBE_TO_ITER, .log_streams = 1};
        cases[n++] = (scase_t){.form = F_SUBSCRIBE_ITER, .log_streams = 1};
        cases[n++] = (scase_t){.form = F_SUBSCRIBE_ITER, .log_streams = 2};
        cases[n++] = (scase_t){.form = F_SUBSCRIBE_ITER, .log_streams = 4};
        cases[n++] = (scase_t){.form = F_SUBSCRIBE_HANDLER, .log_streams = 2};
        cases[n++] = (scase_t){.form = F_GRPC_FLOOR, .log_streams = 1};
    }
    static bench_t benches[8];
    for (size_t i = 0; i < n; i++) {
        scase_t *c = &cases[i];
        static const char *const forms[] = {"SubscribeTo/iter",        "Subscribe/iter",
                                            "Subscribe/handler",       "GrpcFloor",
                                            "SubscribeToEach/handler", "GrpcFloorEach"};
        snprintf(c->name, sizeof(c->name), "%s/ls=%d/size=%d", forms[c->form], c->log_streams,
                 ENTRY_SIZE);
        benches[i] = (bench_t){.name = c->name,
                               .fn = sub_round,
                               .arg = c,
                               .setup = env_setup,
                               .teardown = env_teardown};
    }
    static const bench_opts_t o = {.benchtime_ns = 1000000000LL,
                                   .warmup_ns = 100000000LL,
                                   .pkg = "libvarlog/bench",
                                   .precise_allocs = true};
    return bench_main(argc, argv, &o, benches, n);
}
