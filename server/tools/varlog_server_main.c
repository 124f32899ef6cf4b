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
 * start it with port 0 and read where it listens.
 *
 * Arguments are refused as varlog-cli refuses them: one line on stderr naming the option
 * and the value, exit status 2. Numbers follow varlog-cli's rule too (cli/common.c):
 * suffixes k, m, g multiply by 1024. tests/cli/test_cli_server.c holds both to it. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpc/support/log.h>

#include "options.h"
#include "varlog/server.h"

#define PROG "varlog-server"

/* The defaults, stated by --help. The topic shape is varlog-cli's embedded server's, so
 * that a program tried against one behaves the same against the other; the port is the
 * metadata repository's usual one. */
#define DEFAULT_LISTEN "127.0.0.1:9092"
#define DEFAULT_TOPICS 1
#define DEFAULT_LOG_STREAMS 2
#define MAX_COUNT 1000000 /* topics, log streams per topic: as varlog-cli's --topics */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " [--listen 127.0.0.1:PORT] [--topics T] [--log-streams N]\n"
            "                     [--max-bytes B] [--refuse-when-full]\n"
            "  Serves a one-node Varlog cluster (metadata repository, storage node 1 and the\n"
            "  admin service on one port; cluster 1) with topics 1..T of N log streams each\n"
            "  (numbered from 1 across topics), the log in memory, until SIGTERM or SIGINT.\n"
            "  Prints the address it serves (127.0.0.1:PORT) on stdout once it serves.\n"
            "  --listen ADDR        127.0.0.1:PORT, the only host served; PORT 0 picks a free\n"
            "                       port (default " DEFAULT_LISTEN ")\n"
            "  --topics T           topics 1..T (default %d)\n"
            "  --log-streams N      log streams per topic (default %d)\n"
            "  --max-bytes B        bound on the log's memory, suffix k, m or g: x1024 (default\n"
            "                       1g); past it the oldest entries are trimmed (one line on\n"
            "                       stderr per pass)\n"
            "  --refuse-when-full   refuse appends past B instead (ResourceExhausted)\n"
            "  gRPC's own log lines are off; set GRPC_VERBOSITY (e.g. DEBUG) to see them.\n"
            "  Exit status: 0 after SIGTERM or SIGINT, 1 when it cannot serve, 2 bad arguments.\n",
            DEFAULT_TOPICS, DEFAULT_LOG_STREAMS);
}

static int bad_argument(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad_argument(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(PROG ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

/* A whole number in [min, max], suffixes k, m, g (x1024) when allow_suffix; on failure one
 * line in varlog-cli's words and false. */
static bool parse_number(const char *name, const char *text, int64_t min, int64_t max,
                         bool allow_suffix, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    bool ok = end && end != text && (text[0] == '-' || (text[0] >= '0' && text[0] <= '9'));
    int shift = 0;
    if (ok && allow_suffix && *end) {
        const char *sfx = strchr("kKmMgG", *end);
        if (sfx && end[1] == '\0') {
            shift = (int)(sfx - "kKmMgG") / 2 * 10 + 10;
            end++;
        }
    }
    if (!ok || *end) {
        bad_argument("%s: '%s' is not a whole number%s", name, text,
                     allow_suffix ? " (suffix k, m or g: x1024)" : "");
        return false;
    }
    bool too_big = errno == ERANGE && v > 0;
    if (!too_big && shift && v > (LLONG_MAX >> shift))
        too_big = true;
    if (!too_big && errno != ERANGE)
        v = v * (1LL << shift);
    if (too_big || v > max) {
        bad_argument("%s: %s is too large (at most %" PRId64 ")", name, text, max);
        return false;
    }
    if (errno == ERANGE || v < min) {
        bad_argument("%s: %s is too small (at least %" PRId64 ")", name, text, min);
        return false;
    }
    *out = v;
    return true;
}

/* varlog_server_start refuses any address but 127.0.0.1:PORT with INVALID_ARG alone; say
 * which part is wrong before it is asked. */
static bool check_listen(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    if (!colon) {
        bad_argument("--listen: '%s' is not HOST:PORT", addr);
        return false;
    }
    size_t hlen = (size_t)(colon - addr);
    if (hlen != strlen("127.0.0.1") || strncmp(addr, "127.0.0.1", hlen) != 0) {
        bad_argument("--listen: '%s': only 127.0.0.1:PORT is served (the server is for tests and "
                     "local tools, never a network)",
                     addr);
        return false;
    }
    const char *p = colon + 1;
    bool digits = *p != '\0';
    for (const char *q = p; *q; q++)
        digits = digits && *q >= '0' && *q <= '9';
    if (!digits) {
        bad_argument("--listen: '%s': port '%s' is not a number", addr, p);
        return false;
    }
    if (strlen(p) > 5 || atoi(p) > 65535) {
        bad_argument("--listen: '%s': port %s is out of range (0..65535; 0 picks a free port)",
                     addr, p);
        return false;
    }
    return true;
}

/* Why 127.0.0.1:port could not be bound, in the kernel's words: varlog_server_start only
 * says RPC_UNAVAILABLE, and gRPC's own line about it is silenced. Binding a socket of our
 * own (closed at once) asks the same question. */
static const char *bind_failure(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return strerror(errno);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* as gRPC binds */
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    int e = errno;
    close(fd);
    if (rc == 0)
        return "the port could not be bound (it is free now: try again)";
    if (e == EADDRINUSE)
        return "address already in use (another process listens there; --listen "
               "127.0.0.1:0 picks a free port)";
    return strerror(e);
}

/* gRPC core writes its own error lines (E1202 ... chttp2_server.cc ...) to stderr, which
 * would stand beside or instead of ours. Dropped, unless the user asked for them with
 * GRPC_VERBOSITY. */
static void drop_grpc_log(gpr_log_func_args *args)
{
    (void)args;
}

int main(int argc, char **argv)
{
    varlog_server_opts_t opts = {.listen_address = DEFAULT_LISTEN,
                                 .topics = DEFAULT_TOPICS,
                                 .log_streams_per_topic = DEFAULT_LOG_STREAMS,
                                 .log_file = stderr};
    enum { OPT_LISTEN = 256, OPT_TOPICS, OPT_LOG_STREAMS, OPT_MAX_BYTES, OPT_REFUSE };
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"topics", required_argument, NULL, OPT_TOPICS},
        {"log-streams", required_argument, NULL, OPT_LOG_STREAMS},
        {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
        {"refuse-when-full", no_argument, NULL, OPT_REFUSE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0; /* our own one-line messages */
    int c;
    int64_t n = 0;
    while ((c = cli_getopt_long(argc, argv, ":h", longopts)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return 0;
        case OPT_REFUSE:
            opts.refuse_when_full = true;
            break;
        case OPT_LISTEN:
            if (!check_listen(optarg))
                return 2;
            opts.listen_address = optarg;
            break;
        case OPT_TOPICS:
            if (!parse_number("--topics", optarg, 0, MAX_COUNT, false, &n))
                return 2;
            opts.topics = (int32_t)n;
            break;
        case OPT_LOG_STREAMS:
            if (!parse_number("--log-streams", optarg, 0, MAX_COUNT, false, &n))
                return 2;
            opts.log_streams_per_topic = (int32_t)n;
            break;
        case OPT_MAX_BYTES:
            if (!parse_number("--max-bytes", optarg, 1, INT64_MAX, true, &n))
                return 2;
            opts.max_bytes = (uint64_t)n;
            break;
        case ':':
            return bad_argument("option '%s' needs a value (see --help)", argv[optind - 1]);
        default: {
            const char *text = cli_getopt_refused();
            if (!text && optopt && optopt < 256)
                return bad_argument("unknown option '-%c' (see --help)", optopt);
            if (!text)
                text = argv[optind - 1];
            char hint[256];
            if (cli_option_hint(longopts, text, hint, sizeof hint)[0])
                return bad_argument("unknown option '%s': options are written whole%s", text, hint);
            return bad_argument("unknown option '%s' (see --help)", text);
        }
        }
    }
    if (optind < argc)
        return bad_argument("unexpected argument '%s' (see --help)", argv[optind]);
    if ((int64_t)opts.topics * opts.log_streams_per_topic > VARLOG_SERVER_MAX_LOG_STREAMS)
        return bad_argument("--topics %d x --log-streams %d is more than %d log streams",
                            (int)opts.topics, (int)opts.log_streams_per_topic,
                            VARLOG_SERVER_MAX_LOG_STREAMS);

    const char *verbosity = getenv("GRPC_VERBOSITY");
    if (!verbosity || !verbosity[0])
        gpr_set_log_function(drop_grpc_log);

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
        const char *why = varlog_err_str(err);
        if (err == VARLOG_ERR_RPC_UNAVAILABLE)
            why = bind_failure(atoi(strrchr(opts.listen_address, ':') + 1));
        fprintf(stderr, PROG ": cannot serve on %s: %s\n", opts.listen_address, why);
        return 1;
    }
    printf("%s\n", varlog_server_address(srv));
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    varlog_server_destroy(srv);
    return 0;
}
