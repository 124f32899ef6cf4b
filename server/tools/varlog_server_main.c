/* varlog-server: serves the embedded single-node Varlog server until SIGTERM or SIGINT.
 *
 *   varlog-server [--listen 127.0.0.1:PORT] [--topics T] [--log-streams N] [--max-bytes B]
 *                 [--refuse-when-full]
 *
 * --max-bytes bounds the log's resident memory (default 1 GiB): past it the oldest entries
 * are trimmed, one line on stderr per retention pass; with --refuse-when-full appends are
 * refused instead once the payload bytes reach it (a full node, for tests).
 *
 * Prints the bound address ("127.0.0.1:PORT") on stdout once it serves, so a script can
 * start it with port 0 and read where it listens. */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "varlog/server.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: varlog-server [--listen 127.0.0.1:PORT] [--topics T] "
                 "[--log-streams N] [--max-bytes B] [--refuse-when-full]\n"
                 "  serves cluster 1 with storage node 1, topics 1..T and N log streams per\n"
                 "  topic (numbered from 1 across topics) until SIGTERM or SIGINT\n"
                 "  --max-bytes B        bound on the log's memory (default 1 GiB); past it the\n"
                 "                       oldest entries are trimmed (logged on stderr)\n"
                 "  --refuse-when-full   refuse appends past B instead (ResourceExhausted)\n");
}

static bool parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || !end || *end || end == s || v < min || v > max)
        return false;
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    varlog_server_opts_t opts = {.listen_address = "127.0.0.1:9092",
                                 .topics = 1,
                                 .log_streams_per_topic = 1,
                                 .log_file = stderr};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t n = 0;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--refuse-when-full") == 0) {
            opts.refuse_when_full = true;
            continue;
        } else if (strcmp(a, "--listen") == 0 && v) {
            opts.listen_address = v;
        } else if (strcmp(a, "--topics") == 0 && v && parse_i64(v, 0, INT32_MAX, &n)) {
            opts.topics = (int32_t)n;
        } else if (strcmp(a, "--log-streams") == 0 && v && parse_i64(v, 0, INT32_MAX, &n)) {
            opts.log_streams_per_topic = (int32_t)n;
        } else if (strcmp(a, "--max-bytes") == 0 && v && parse_i64(v, 0, INT64_MAX, &n)) {
            opts.max_bytes = (uint64_t)n;
        } else {
            usage(stderr);
            return 2;
        }
        i++;
    }

    /* glibc gives a thread arena's free top back to the kernel once it passes 128 KiB, so
     * the buffers of every received Append request were freed with madvise and faulted in
     * again for the next one: about 870 instead of 400 ns of server CPU per record at 1000
     * records of 100 B per request (bench_server_append). A server keeps what it used;
     * blocks up to 32 MiB stay in the arenas too instead of a mapping each. */
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);

    /* Blocked before any thread starts, so every thread inherits the mask and the signals
     * wait for sigwait below. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    varlog_server_t *srv = NULL;
    varlog_err_t err = varlog_server_start(&opts, &srv);
    if (err != VARLOG_OK) {
        fprintf(stderr, "varlog-server: cannot serve on %s: %s\n", opts.listen_address,
                varlog_err_str(err));
        return 1;
    }
    printf("%s\n", varlog_server_address(srv));
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    varlog_server_destroy(srv);
    return 0;
}
