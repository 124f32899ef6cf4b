/* bench_recovery: how long varlog_append_to keeps failing after a storage node that was down
 * comes back (issue 8, point 10).
 *
 *   bench_recovery [-outage MS]... [-rounds N] [-set NAME=VALUE]...
 *
 * One embedded server (1 topic, 1 log stream: it is both the metadata repository and the
 * storage node) and one client opened with the default configuration plus the -set pairs.
 * Each round: append once (the channel is connected), varlog_server_stop, keep appending as
 * an application would (one varlog_append_to with a 500 ms timeout every 50 ms, each
 * failing) for the outage, varlog_server_restart (same port, same data), then append again
 * every 10 ms until one succeeds. Recovery is the time from the end of the restart to the
 * return of the first successful append. Outages default to 1000 and 10000 ms; rounds
 * (default 3) repeat each outage on the same client, so that gRPC's reconnect backoff starts
 * wherever the previous round left it, as it would in a long-lived process.
 *
 * One line per round:
 *   outage_ms=10000 round=1 props=<the -set pairs or "defaults"> recovery_ms=123
 * failed_after_restart=4 and per outage a summary line with the median recovery. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "varlog/client.h"
#include "varlog/conf.h"
#include "varlog/server.h"

#define MAX_OUTAGES 16
#define MAX_SETS 16
#define MAX_ROUNDS 32
#define OUTAGE_APPEND_TIMEOUT_MS 500
#define OUTAGE_APPEND_EVERY_MS 50
#define RECOVERY_APPEND_TIMEOUT_MS 2000
#define RECOVERY_APPEND_EVERY_MS 10
#define RECOVERY_GIVE_UP_MS 300000

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static varlog_err_t append_one(varlog_client_t *c, int64_t timeout_ms)
{
    static const char payload[] = "bench_recovery";
    varlog_record_t rec = {.data = payload, .len = sizeof(payload) - 1};
    varlog_entry_meta_t meta;
    varlog_outcome_t outcome;
    return varlog_append_to(c, 1, 1, &rec, 1, timeout_ms, &meta, &outcome);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [-outage MS]... [-rounds N] [-set NAME=VALUE]...\n", argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    int64_t outages[MAX_OUTAGES];
    size_t n_outages = 0;
    const char *sets[MAX_SETS];
    size_t n_sets = 0;
    int rounds = 3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-outage") == 0 && i + 1 < argc && n_outages < MAX_OUTAGES)
            outages[n_outages++] = atoll(argv[++i]);
        else if (strcmp(argv[i], "-rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "-set") == 0 && i + 1 < argc && n_sets < MAX_SETS)
            sets[n_sets++] = argv[++i];
        else
            usage(argv[0]);
    }
    if (rounds < 1 || rounds > MAX_ROUNDS)
        usage(argv[0]);
    if (n_outages == 0) {
        outages[n_outages++] = 1000;
        outages[n_outages++] = 10000;
    }
    char props[512] = "";
    for (size_t i = 0; i < n_sets; i++)
        snprintf(props + strlen(props), sizeof(props) - strlen(props), "%s%s", i ? "," : "",
                 sets[i]);

    varlog_server_opts_t o = {.topics = 1, .log_streams_per_topic = 1};
    varlog_server_t *srv = NULL;
    if (varlog_server_start(&o, &srv) != VARLOG_OK) {
        fprintf(stderr, "server: %s\n", varlog_last_error());
        return 1;
    }
    char err[512];
    varlog_conf_t *conf = varlog_conf_new();
    if (!conf || varlog_conf_set(conf, "metadata.addresses", varlog_server_address(srv), err,
                                 sizeof(err)) != VARLOG_OK)
        return 1;
    varlog_conf_set(conf, "log.level", "crit", err, sizeof(err));
    for (size_t i = 0; i < n_sets; i++) {
        char name[128];
        const char *eq = strchr(sets[i], '=');
        if (!eq || (size_t)(eq - sets[i]) >= sizeof(name))
            usage(argv[0]);
        memcpy(name, sets[i], (size_t)(eq - sets[i]));
        name[eq - sets[i]] = '\0';
        if (varlog_conf_set(conf, name, eq + 1, err, sizeof(err)) != VARLOG_OK) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
    }
    varlog_client_t *c = NULL;
    if (varlog_client_new(&conf, &c, err, sizeof(err)) != VARLOG_OK) {
        fprintf(stderr, "open: %s\n", err);
        return 1;
    }
    int rc = 0;
    for (size_t k = 0; k < n_outages && rc == 0; k++) {
        int64_t rec[MAX_ROUNDS];
        for (int r = 0; r < rounds; r++) {
            int64_t t0 = now_ms();
            while (append_one(c, RECOVERY_APPEND_TIMEOUT_MS) != VARLOG_OK) {
                if (now_ms() - t0 > RECOVERY_GIVE_UP_MS) {
                    fprintf(stderr, "no append before the outage: %s\n", varlog_last_error());
                    return 1;
                }
                sleep_ms(RECOVERY_APPEND_EVERY_MS);
            }
            varlog_server_stop(srv);
            int64_t end = now_ms() + outages[k];
            long failed_during = 0;
            while (now_ms() < end) {
                if (append_one(c, OUTAGE_APPEND_TIMEOUT_MS) != VARLOG_OK)
                    failed_during++;
                int64_t left = end - now_ms();
                sleep_ms(left < OUTAGE_APPEND_EVERY_MS ? (left > 0 ? left : 0)
                                                       : OUTAGE_APPEND_EVERY_MS);
            }
            if (varlog_server_restart(srv) != VARLOG_OK) {
                fprintf(stderr, "restart: %s\n", varlog_last_error());
                rc = 1;
                break;
            }
            int64_t back = now_ms();
            long failed_after = 0;
            char last[256] = "";
            while (append_one(c, RECOVERY_APPEND_TIMEOUT_MS) != VARLOG_OK) {
                failed_after++;
                snprintf(last, sizeof(last), "%s", varlog_last_error());
                if (now_ms() - back > RECOVERY_GIVE_UP_MS) {
                    fprintf(stderr, "no recovery within %d ms: %s\n", RECOVERY_GIVE_UP_MS, last);
                    rc = 1;
                    break;
                }
                sleep_ms(RECOVERY_APPEND_EVERY_MS);
            }
            rec[r] = now_ms() - back;
            printf("outage_ms=%lld round=%d props=%s recovery_ms=%lld failed_during=%ld "
                   "failed_after_restart=%ld%s%s\n",
                   (long long)outages[k], r + 1, n_sets ? props : "defaults", (long long)rec[r],
                   failed_during, failed_after, last[0] ? " last_error=" : "", last);
            fflush(stdout);
            if (rc)
                break;
        }
        if (rc == 0) {
            qsort(rec, (size_t)rounds, sizeof(rec[0]), cmp_i64);
            printf("summary outage_ms=%lld props=%s rounds=%d median_recovery_ms=%lld "
                   "max_recovery_ms=%lld\n",
                   (long long)outages[k], n_sets ? props : "defaults", rounds,
                   (long long)rec[rounds / 2], (long long)rec[rounds - 1]);
            fflush(stdout);
        }
    }
    varlog_client_destroy(c);
    varlog_server_destroy(srv);
    return rc;
}
