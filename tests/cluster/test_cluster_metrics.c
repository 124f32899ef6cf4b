/* What an operator scrapes through a storage node's kill (issue 36, items 1-3), against a
 * real cluster: varlog-cli bench (append.retries 0, so that the kill fails records) and a
 * varlog-cli subscribe tail whose output waits behind a closed gate, both serving
 * --metrics-listen, scraped every 200 ms by this program as Prometheus would.
 *   - Every failure series (messaging_client_sent_messages_total{error_type}) that ever
 *     counts a failure was scraped at 0 first: PromQL's increase() counts its first burst.
 *     Their last values equal the failures bench reports per error.
 *   - The consumer lag rises while the subscriber's output is held, is given in seconds too,
 *     and falls to 0 once the output flows and the writer stopped.
 *   - The subscription's reconnect through the kill is counted
 *     (varlog_client_subscription_outages_total) and was seen as reconnecting.
 * One storage node, replication factor 1, two log streams, varlogadm --auto-unseal: the kill
 * certainly breaks the subscription's streams and fails appends. */
#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "cluster_proc.h"
#include "metrics_test_util.h"
#include "test_support.h"

static cluster_t C;

static int group_setup(void **state)
{
    (void)state;
    if (cluster_unavailable() != NULL)
        return 0;
    cluster_opts_t o = {
        .name = "metrics", .sns = 1, .rf = 1, .mrs = 1, .log_streams = 2, .auto_unseal = true};
    return cluster_start(&C, &o) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    cluster_stop(&C);
    return 0;
}

/* ---- what the scrapes saw ----------------------------------------------------------------- */

#define MAX_FAILURE_SERIES 64

typedef struct failure_series {
    char labels[400];
    double first, last;
} failure_series_t;

typedef struct observed {
    pthread_mutex_t mu;
    int writer_port, subscriber_port;
    atomic_bool stop;
    failure_series_t failures[MAX_FAILURE_SERIES];
    size_t n_failures;
    double writer_appended;  /* varlog_client_append_records_total{appended}, last */
    double writer_failed;    /* ... not_appended + maybe_appended, last */
    double lag_now, lag_max; /* varlog_client_subscription_lag_entries summed, last and most */
    bool lag_seen;           /* a lag series existed at some scrape */
    double lag_seconds_max;  /* varlog_client_subscription_lag_seconds, most */
    double outages;          /* varlog_client_subscription_outages_total, last */
    double reconnecting_max; /* varlog_client_subscription_reconnecting, most */
    unsigned writer_scrapes, subscriber_scrapes;
} observed_t;

static char *get_metrics(int port)
{
    http_reply_t r;
    if (!http_request(port, "GET", "/metrics", 5000, &r))
        return NULL;
    char *body = r.status == 200 ? strdup(r.body) : NULL;
    http_reply_free(&r);
    return body;
}

/* Each messaging_client_sent_messages_total series with error_type: its labels and value. */
static void note_failures(observed_t *o, const char *text)
{
    const char *name = "messaging_client_sent_messages_total{";
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        if (!end)
            break;
        if (strncmp(line, name, strlen(name)) == 0 &&
            memmem(line, (size_t)(end - line), "error_type=", 11)) {
            const char *close = memchr(line, '}', (size_t)(end - line));
            assert_non_null(close);
            char labels[400];
            snprintf(labels, sizeof labels, "%.*s", (int)(close - line), line);
            double v = strtod(close + 1, NULL);
            size_t i = 0;
            while (i < o->n_failures && strcmp(o->failures[i].labels, labels) != 0)
                i++;
            if (i == o->n_failures) {
                assert_true(i < MAX_FAILURE_SERIES);
                snprintf(o->failures[i].labels, sizeof o->failures[i].labels, "%s", labels);
                o->failures[i].first = v;
                o->n_failures++;
            }
            o->failures[i].last = v;
        }
        line = end + 1;
    }
}

static void *scraper(void *arg)
{
    observed_t *o = arg;
    static const char *const appended[] = {"varlog_outcome=\"appended\"", NULL};
    static const char *const not_appended[] = {"varlog_outcome=\"not_appended\"", NULL};
    static const char *const maybe[] = {"varlog_outcome=\"maybe_appended\"", NULL};
    while (!atomic_load(&o->stop)) {
        char *w = o->writer_port ? get_metrics(o->writer_port) : NULL;
        char *s = get_metrics(o->subscriber_port);
        pthread_mutex_lock(&o->mu);
        if (w) {
            note_failures(o, w);
            o->writer_appended = metrics_sum(w, "varlog_client_append_records_total", appended);
            o->writer_failed = metrics_sum(w, "varlog_client_append_records_total", not_appended) +
                               metrics_sum(w, "varlog_client_append_records_total", maybe);
            o->writer_scrapes++;
        }
        if (s) {
            o->lag_seen |= strstr(s, "varlog_client_subscription_lag_entries{") != NULL;
            o->lag_now = metrics_sum(s, "varlog_client_subscription_lag_entries", NULL);
            if (o->lag_now > o->lag_max)
                o->lag_max = o->lag_now;
            double secs = metrics_sum(s, "varlog_client_subscription_lag_seconds", NULL);
            if (secs > o->lag_seconds_max)
                o->lag_seconds_max = secs;
            o->outages = metrics_sum(s, "varlog_client_subscription_outages_total", NULL);
            double rc = metrics_sum(s, "varlog_client_subscription_reconnecting", NULL);
            if (rc > o->reconnecting_max)
                o->reconnecting_max = rc;
            o->subscriber_scrapes++;
        }
        pthread_mutex_unlock(&o->mu);
        free(w);
        free(s);
        usleep(200 * 1000);
    }
    return NULL;
}

typedef bool observed_cond(const observed_t *o);

/* Waits (bounded) until cond holds on what the scraper saw. */
static bool await(observed_t *o, observed_cond *cond, int64_t timeout_ms)
{
    for (int64_t t0 = test_now_ms();; usleep(100 * 1000)) {
        pthread_mutex_lock(&o->mu);
        bool ok = cond(o);
        pthread_mutex_unlock(&o->mu);
        if (ok)
            return true;
        if (test_now_ms() - t0 > timeout_ms)
            return false;
    }
}

static bool backlog_grew(const observed_t *o)
{
    return o->writer_appended > 3000 && o->lag_now > 2000 && o->lag_seconds_max > 0;
}

static bool caught_up(const observed_t *o)
{
    return o->lag_seen && o->lag_now == 0 && o->outages >= 1;
}

/* ---- the scenario --------------------------------------------------------------------------- */

/* The scenario's programs, scraper and subscriber output: globals, so that the teardown
 * stops them also after a failed assertion. */
static struct {
    char dir[512];
    mproc_t procs[2]; /* subscriber, writer */
    observed_t o;
    pthread_t scraper, drainer;
    bool scraping, draining;
    int fifo_fd; /* our end of the subscriber's stdout; -1 when closed */
    atomic_bool drain_stop;
} S = {.fifo_fd = -1};

/* The gate's open side: reads the subscriber's output and drops it. */
static void *drainer(void *arg)
{
    (void)arg;
    char buf[65536];
    while (!atomic_load(&S.drain_stop)) {
        ssize_t n = read(S.fifo_fd, buf, sizeof buf);
        if (n == 0)
            break; /* the subscriber is gone */
        if (n < 0)
            usleep(20 * 1000); /* empty (the read end is non-blocking) */
    }
    return NULL;
}

static int scenario_teardown(void **state)
{
    (void)state;
    mproc_kill(&S.procs[0]); /* first: nothing may wait on its output below */
    mproc_kill(&S.procs[1]);
    if (S.scraping) {
        atomic_store(&S.o.stop, true);
        pthread_join(S.scraper, NULL);
        S.scraping = false;
    }
    if (S.draining) {
        atomic_store(&S.drain_stop, true);
        pthread_join(S.drainer, NULL);
        S.draining = false;
    }
    if (S.fifo_fd >= 0)
        close(S.fifo_fd);
    S.fifo_fd = -1;
    if (S.dir[0])
        mproc_stop_all(S.procs, 2, S.dir);
    return 0;
}

static bool lag_low(const observed_t *o)
{
    return o->lag_seen && o->lag_now < 1000;
}

static bool reconnecting(const observed_t *o)
{
    return o->reconnecting_max >= 1 && o->writer_failed > 0;
}

static void test_metrics_through_a_kill(void **state)
{
    (void)state;
    cluster_require();
    metrics_workdir(S.dir, sizeof S.dir, "cluster_metrics");
    char topic[16], fifo[600];
    snprintf(topic, sizeof topic, "%d", C.topic_id);
    observed_t *o = &S.o;
    pthread_mutex_init(&o->mu, NULL);
    atomic_init(&o->stop, false);
    atomic_init(&S.drain_stop, false);

    /* The subscriber's stdout is a FIFO we read only once the gate opens: until then the
     * pipe fills, its consumer blocks in its handler, and the lag grows as the writer
     * appends. (mproc_start opens NAME.out for writing; a FIFO there stays one.) */
    snprintf(fifo, sizeof fifo, "%s/subscriber.out", S.dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    S.fifo_fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    assert_true(S.fifo_fd >= 0);
    const char *sub_argv[] = {VARLOG_CLI_PATH,    "--mr",        C.mr_addrs,
                              "subscribe",        "--topic",     topic,
                              "--metrics-listen", "127.0.0.1:0", NULL};
    mproc_start(&S.procs[0], S.dir, "subscriber", sub_argv, NULL);
    o->subscriber_port = mproc_metrics_port(&S.procs[0], 60000);

    const char *writer_argv[] = {VARLOG_CLI_PATH,    "--mr",  C.mr_addrs, "-X",
                                 "append.retries=0", "bench", "--topic",  topic,
                                 "--duration",       "60",    "--rate",   "2000",
                                 "--size",           "64",    "--json",   "--metrics-listen",
                                 "127.0.0.1:0",      NULL};
    mproc_start(&S.procs[1], S.dir, "writer", writer_argv, NULL);
    o->writer_port = mproc_metrics_port(&S.procs[1], 60000);
    assert_int_equal(pthread_create(&S.scraper, NULL, scraper, o), 0);
    S.scraping = true;

    /* 1. the output held: the lag grows, in entries and seconds */
    if (!await(o, backlog_grew, 60000))
        CLUSTER_FAIL(&C,
                     "the lag did not grow behind the held output: appended %g, lag %g, "
                     "lag seconds at most %g",
                     o->writer_appended, o->lag_now, o->lag_seconds_max);
    printf("output held: %g appended, lag %g entries, %g s at most\n", o->writer_appended,
           o->lag_now, o->lag_seconds_max);
    /* 2. the output flows: the lag falls while the writer goes on */
    assert_int_equal(pthread_create(&S.drainer, NULL, drainer, NULL), 0);
    S.draining = true;
    if (!await(o, lag_low, 60000))
        CLUSTER_FAIL(&C, "the lag did not fall once the output flowed: %g", o->lag_now);
    printf("output flowing: lag %g entries\n", o->lag_now);

    /* 3. the kill: appends fail (no retries), the subscription reconnects */
    if (cluster_cmd(&C, "kill-sn", "1", NULL, 0) != 0)
        CLUSTER_FAIL(&C, "kill-sn 1 failed");
    if (!await(o, reconnecting, 60000))
        CLUSTER_FAIL(&C,
                     "after the storage node's kill: %g records failed, reconnecting at "
                     "most %g",
                     o->writer_failed, o->reconnecting_max);
    if (cluster_cmd(&C, "restart-sn", "1", NULL, 0) != 0)
        CLUSTER_FAIL(&C, "restart-sn 1 failed");

    /* 4. the writer's end, and the subscriber caught up */
    int status = mproc_stop(&S.procs[1], 0, 120000);
    char *out = mproc_stdout(&S.procs[1]);
    if (!await(o, caught_up, 120000))
        CLUSTER_FAIL(&C, "the lag did not fall to 0 (%g) or no outage was counted (%g)", o->lag_now,
                     o->outages);
    atomic_store(&o->stop, true);
    assert_int_equal(pthread_join(S.scraper, NULL), 0);
    S.scraping = false;
    printf("%u writer and %u subscriber scrapes; lag at most %g entries, %g s; outages %g, "
           "reconnecting at most %g\n",
           o->writer_scrapes, o->subscriber_scrapes, o->lag_max, o->lag_seconds_max, o->outages,
           o->reconnecting_max);

    /* bench's own account of its failures, per error, against the last scrape */
    cJSON *j = cJSON_Parse(out);
    if (!j)
        fail_msg("bench printed no JSON (exit %d):\n%s", status, out);
    cJSON *by = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "append"), "errors"),
                                    "by_error");
    assert_non_null(by);
    double reported = 0;
    for (int i = 0; i < cJSON_GetArraySize(by); i++) {
        cJSON *k = cJSON_GetArrayItem(by, i);
        const char *err = cJSON_GetObjectItem(k, "error")->valuestring;
        reported += cJSON_GetObjectItem(k, "records")->valuedouble;
        /* records of one error under both outcomes are one series */
        double same = 0;
        for (int m = 0; m < cJSON_GetArraySize(by); m++)
            if (strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(by, m), "error")->valuestring, err) ==
                0)
                same += cJSON_GetObjectItem(cJSON_GetArrayItem(by, m), "records")->valuedouble;
        char want[64];
        snprintf(want, sizeof want, "error_type=\"%s\"", err);
        double last = 0;
        for (size_t f = 0; f < o->n_failures; f++)
            if (strstr(o->failures[f].labels, want))
                last += o->failures[f].last;
        printf("  %s %s: bench %g records, the last scrape %g\n",
               cJSON_GetObjectItem(k, "outcome")->valuestring, err,
               cJSON_GetObjectItem(k, "records")->valuedouble, last);
        if (last != same)
            fail_msg("%s: bench reports %g failed records, the last scrape %g", err, same, last);
    }
    assert_true(reported > 0);
    for (size_t f = 0; f < o->n_failures; f++)
        if (o->failures[f].last > 0 && o->failures[f].first != 0)
            fail_msg("%s appeared holding %g: increase() would miss it", o->failures[f].labels,
                     o->failures[f].first);
    assert_true(o->outages >= 1);
    cJSON_Delete(j);
    free(out);
    assert_int_equal(mproc_stop(&S.procs[0], SIGINT, 10000), 0); /* Ctrl-C ends a tail: 0 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_metrics_through_a_kill, scenario_teardown),
    };
    cluster_filter_from_env();
    return cluster_main_result(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
