#ifndef VARLOG_BENCH_CLIENT_H
#define VARLOG_BENCH_CLIENT_H

/* What the network benchmarks (bench_append, bench_subscribe, bench_server_append) share:
 * their client and the flags that say what to run against. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "varlog/varlog.h"

/* A client of the metadata repository at address with the benchmarks' base properties (no
 * periodic refresh, log level err), then the name, value pairs of extra (NULL-terminated;
 * NULL for none), then those of the -X flags. 0 with *out open, or -1 after a message on
 * stderr. */
int bench_client_open(const char *address, const char *const *extra, varlog_client_t **out);

/* The -X pairs as a benchmark name's tail ("/name=value" each; "" without any), into out
 * (cap bytes, truncated). */
void bench_conf_tag(char *out, size_t cap);

/* Into out (cap bytes): the address of the primary storage node of topic's log_stream in
 * client's metadata. 0, or -1 after a message on stderr naming what is missing. */
int bench_primary_of(varlog_client_t *client, int32_t topic, int32_t log_stream, char *out,
                     size_t cap);

/* Where a benchmark's flags go: -inproc, -mr HOST:PORT[,...], -server PATH, -topic ID,
 * -logstream ID (at least logstream_min) and, where size is not NULL, -size BYTES (1 to
 * size_max). The program's own defaults stay where a flag is not given. -X name=value (any
 * number, up to 32) sets a client property on every client bench_client_open opens. */
typedef struct bench_target_flags {
    bool *inproc;
    const char **cluster_address, **server_program;
    int32_t *topic_id, *log_stream, *size;
    long logstream_min;
    int32_t size_max;
} bench_target_flags_t;

/* Whether argv[*i] is one of those flags (then *i has moved past its value). *ok is false,
 * after a message on stderr, when its value is missing or bad. */
bool bench_target_flag(int argc, char **argv, int *i, const bench_target_flags_t *f, bool *ok);

#endif
