/* bench_outage: how a dead cluster is reported to a pipelined producer (issue 19, point 1).
 *
 *   bench_outage [-bound] [-before MS] [-outage MS] [-set NAME=VALUE]...
 *
 * One embedded server (1 topic, 2 log streams; it is both the metadata repository and the
 * storage node) and one client with the default configuration plus the -set pairs. A
 * producer thread appends 100-byte records through one appender (topic-wide, or bound to log
 * stream 1 with -bound) as fast as it can, as examples/producer.c does (waiting up to 100 ms
 * at a time while the queue is full), for -before ms (default 1000). Then the server stops
 * and a plain TCP listener takes its port, accepting and closing every connection, so that
 * the client's connection attempts can be counted; the producer goes on appending for
 * -outage ms (default 10000).
 *
 * Prints, in key=value form:
 *   pending_at_stop       calls queued before the stop whose callback had not run yet
 *   last_pending_cb_ms    when the last of them had its callback, from the stop
 *   outage_calls          calls queued during the outage, and their callbacks per second
 *   connects_per_s        connection attempts per second of the outage, second by second,
 *                         and their median
 * and the outcomes of every call. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "varlog/appender.h"
#include "varlog/client.h"
#include "varlog/conf.h"
#include "varlog/server.h"

#define MAX_SETS 16
#define MAX_SECONDS 600

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct {
    varlog_appender_t *app;
    atomic_bool stop;
    atomic_long queued;           /* calls taken */
    atomic_long cut;              /* calls taken before the stop (-1 until then) */
    atomic_long pending_cbs_left; /* of those, callbacks still to come */
    atomic_llong stop_ms, last_pending_cb_ms;
    atomic_long outcomes[3]; /* APPENDED, NOT_APPENDED, MAYBE_APPENDED */
    atomic_long outage_cbs[MAX_SECONDS];
} g;

static void on_appended(const varlog_append_result_t *res, void *opaque)
{
    long seq = (long)(intptr_t)opaque;
    varlog_outcome_t o = res->err == VARLOG_OK ? VARLOG_APPENDED : res->outcome;
    atomic_fetch_add(&g.outcomes[o == VARLOG_APPENDED ? 0 : o == VARLOG_NOT_APPENDED ? 1 : 2], 1);
    long cut = atomic_load(&g.cut);
    int64_t t = now_ms();
    if (cut >= 0 && seq < cut) {
        atomic_store(&g.last_pending_cb_ms, t - atomic_load(&g.stop_ms));
        atomic_fetch_sub(&g.pending_cbs_left, 1);
    }
    int64_t stop = atomic_load(&g.stop_ms);
    if (stop > 0 && t >= stop) {
        int64_t s = (t - stop) / 1000;
        if (s < MAX_SECONDS)
            atomic_fetch_add(&g.outage_cbs[s], 1);
    }
}

static void *produce(void *arg)
{
    (void)arg;
    char payload[100];
    memset(payload, 'x', sizeof(payload));
    varlog_record_t rec = {.data = payload, .len = sizeof(payload)};
    while (!atomic_load(&g.stop)) {
        long seq = atomic_load(&g.queued);
        varlog_err_t rc =
            varlog_appender_append(g.app, &rec, 1, 100, on_appended, (void *)(intptr_t)seq);
        if (rc == VARLOG_OK)
            atomic_fetch_add(&g.queued, 1);
        else if (rc != VARLOG_ERR_QUEUE_FULL)
            break;
    }
    return NULL;
}

/* Listens on port (the stopped server's) and counts the connections accepted per second
 * from start_ms until until_ms. */
static void count_connects(int port, int64_t start_ms, int64_t until_ms, long *per_s, int n_s)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 128) != 0) {
        perror("bench_outage: listening on the server's port");
        exit(1);
    }
    for (int64_t t; (t = now_ms()) < until_ms;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(until_ms - t)) != 1)
            continue;
        int c = accept(fd, NULL, NULL);
        if (c < 0)
            continue;
        close(c);
        int64_t s = (now_ms() - start_ms) / 1000;
        if (s >= 0 && s < n_s)
            per_s[s]++;
    }
    close(fd);
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    bool bound = false;
    int64_t before_ms = 1000, outage_ms = 10000;
    const char *sets[MAX_SETS];
    int n_sets = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-bound") == 0) {
            bound = true;
        } else if (strcmp(argv[i], "-before") == 0 && i + 1 < argc) {
            before_ms = atoll(argv[++i]);
        } else if (strcmp(argv[i], "-outage") == 0 && i + 1 < argc) {
            outage_ms = atoll(argv[++i]);
        } else if (strcmp(argv[i], "-set") == 0 && i + 1 < argc && n_sets < MAX_SETS) {
            sets[n_sets++] = argv[++i];
        } else {
            fprintf(stderr, "usage: bench_outage [-bound] [-before MS] [-outage MS] "
                            "[-set NAME=VALUE]...\n");
            return 2;
        }
    }
    if (outage_ms < 1000 || outage_ms > MAX_SECONDS * 1000 || before_ms < 0) {
        fprintf(stderr, "bench_outage: -outage is 1000..%d ms, -before at least 0\n",
                MAX_SECONDS * 1000);
        return 2;
    }
    varlog_server_opts_t so = {.topics = 1, .log_streams_per_topic = 2};
    varlog_server_t *srv = NULL;
    if (varlog_server_start(&so, &srv) != VARLOG_OK) {
        fprintf(stderr, "bench_outage: server: %s\n", varlog_last_error());
        return 1;
    }
    int port = varlog_server_port(srv);
    char err[256];
    varlog_conf_t *conf = varlog_conf_new();
    if (varlog_conf_set(conf, "metadata.addresses", varlog_server_address(srv), err, sizeof(err)) !=
            VARLOG_OK ||
        varlog_conf_set(conf, "log.level", "crit", err, sizeof(err)) != VARLOG_OK) {
        fprintf(stderr, "bench_outage: %s\n", err);
        return 1;
    }
    for (int i = 0; i < n_sets; i++) {
        char name[128];
        const char *eq = strchr(sets[i], '=');
        if (!eq || (size_t)(eq - sets[i]) >= sizeof(name)) {
            fprintf(stderr, "bench_outage: -set %s is not NAME=VALUE\n", sets[i]);
            return 2;
        }
        memcpy(name, sets[i], (size_t)(eq - sets[i]));
        name[eq - sets[i]] = '\0';
        if (varlog_conf_set(conf, name, eq + 1, err, sizeof(err)) != VARLOG_OK) {
            fprintf(stderr, "bench_outage: %s\n", err);
            return 2;
        }
    }
    varlog_client_t *c = NULL;
    if (varlog_client_new(&conf, &c, err, sizeof(err)) != VARLOG_OK ||
        varlog_appender_new(c, 1, bound ? 1 : 0, &g.app) != VARLOG_OK) {
        fprintf(stderr, "bench_outage: %s%s\n", err, varlog_last_error());
        return 1;
    }
    atomic_store(&g.cut, -1);
    pthread_t th;
    pthread_create(&th, NULL, produce, NULL);
    struct timespec ts = {(time_t)(before_ms / 1000), (long)(before_ms % 1000) * 1000000};
    nanosleep(&ts, NULL); /* the scenario: the cluster dies this long into the run */

    varlog_appender_stats_t st;
    varlog_appender_stats(g.app, &st);
    int64_t stop = now_ms();
    long cut = atomic_load(&g.queued);
    atomic_store(&g.pending_cbs_left, (long)st.pending_calls);
    atomic_store(&g.stop_ms, stop);
    atomic_store(&g.cut, cut);
    varlog_server_stop(srv);
    long per_s[MAX_SECONDS] = {0};
    int n_s = (int)(outage_ms / 1000);
    count_connects(port, stop, stop + outage_ms, per_s, n_s);
    atomic_store(&g.stop, true);
    pthread_join(th, NULL);
    int64_t flush_start = now_ms();
    size_t left = 0;
    varlog_err_t frc = varlog_appender_flush(g.app, 120000, &left);
    int64_t flush_ms = now_ms() - flush_start;

    printf("mode=%s before_ms=%lld outage_ms=%lld\n", bound ? "bound" : "topic",
           (long long)before_ms, (long long)outage_ms);
    printf("pending_at_stop=%llu last_pending_cb_ms=%lld pending_cbs_missing=%ld\n",
           (unsigned long long)st.pending_calls, (long long)atomic_load(&g.last_pending_cb_ms),
           atomic_load(&g.pending_cbs_left) > 0 ? atomic_load(&g.pending_cbs_left) : 0);
    printf("outage_calls=%ld callbacks_per_s=", atomic_load(&g.queued) - cut);
    for (int s = 0; s < n_s; s++)
        printf("%s%ld", s ? "," : "", atomic_load(&g.outage_cbs[s]));
    printf("\nconnects_per_s=");
    for (int s = 0; s < n_s; s++)
        printf("%s%ld", s ? "," : "", per_s[s]);
    long sorted[MAX_SECONDS];
    memcpy(sorted, per_s, sizeof(long) * (size_t)n_s);
    qsort(sorted, (size_t)n_s, sizeof(long), cmp_long);
    printf(" median=%ld\n", sorted[n_s / 2]);
    printf("outcomes appended=%ld not_appended=%ld maybe_appended=%ld flush=%s flush_ms=%lld "
           "left=%zu\n",
           atomic_load(&g.outcomes[0]), atomic_load(&g.outcomes[1]), atomic_load(&g.outcomes[2]),
           varlog_err_name(frc), (long long)flush_ms, left);
    varlog_appender_close(&g.app, 5000);
    varlog_client_destroy(c);
    varlog_server_destroy(srv);
    return 0;
}
