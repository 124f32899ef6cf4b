/* metrics_http: appends to a topic and serves the client's metrics to Prometheus.
 *
 *     metrics_http METADATA_ADDRESSES [PORT [SECONDS]]
 *
 * e.g. `metrics_http 127.0.0.1:9092 9464` against varlog-server, then
 * `curl -s 127.0.0.1:9464/metrics`, or a Prometheus scrape job with the target
 * 127.0.0.1:9464. Appends one record to topic 1 every 10 ms and serves GET /metrics on
 * 127.0.0.1:PORT (default 9464, the port OpenTelemetry's Prometheus exporter uses; 0 picks a
 * free one) until SECONDS passed (default 0: until Ctrl-C). Prints where it serves, and at the
 * end how many records were stored. Exit status 0 when every record was stored, 1 otherwise.
 *
 * Build: cc metrics_http.c $(pkg-config --cflags --libs libvarlog libmicrohttpd)
 *
 * What it shows: the library opens no port; the application serves varlog_stats_prometheus's
 * text itself, here with libmicrohttpd (Debian: libmicrohttpd-dev) on its own thread, with
 * the Prometheus text format's Content-Type; the call may come from any thread while the
 * client is in use; the HTTP server stops before the client is destroyed, as nothing may
 * call varlog_stats_prometheus once varlog_client_destroy begins. docs/STATISTICS.md lists
 * the metrics. */
/* clock_gettime and nanosleep under -std=c11 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <microhttpd.h>
#include <varlog/varlog.h>

/* Set by SIGINT/SIGTERM, which may arrive on any of the process's threads (libmicrohttpd's,
 * the client's): an atomic, lock-free, so a handler may set it. */
static atomic_bool stop;

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&stop, true);
}

static void free_text(void *text)
{
    varlog_stats_prometheus_free(text);
}

/* On libmicrohttpd's thread: one document per request, from the client's counters now. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)req_cls;
    varlog_client_t *client = cls;
    static char not_found[] = "not found: the metrics are at /metrics\n";
    if (strcmp(url, "/metrics") != 0 || strcmp(method, "GET") != 0) {
        struct MHD_Response *r =
            MHD_create_response_from_buffer(strlen(not_found), not_found, MHD_RESPMEM_PERSISTENT);
        enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_NOT_FOUND, r);
        MHD_destroy_response(r);
        return ret;
    }
    char *text;
    size_t len;
    if (varlog_stats_prometheus(client, &text, &len) != VARLOG_OK)
        return MHD_NO; /* out of memory: the connection is closed, the scrape fails */
    /* the document is ours: libmicrohttpd frees it through free_text once it is sent */
    struct MHD_Response *r =
        MHD_create_response_from_buffer_with_free_callback(len, text, free_text);
    if (!r) {
        varlog_stats_prometheus_free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* Counted by the appender's thread, read by main after close. */
static atomic_long stored, failed;

static void on_appended(const varlog_append_result_t *res, void *opaque)
{
    (void)opaque;
    if (res->err == VARLOG_OK)
        atomic_fetch_add(&stored, (long)res->n);
    else
        atomic_fetch_add(&failed, (long)res->n);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: metrics_http METADATA_ADDRESSES [PORT [SECONDS]]\n");
        return 2;
    }
    long port = argc > 2 ? atol(argv[2]) : 9464;
    long seconds = argc > 3 ? atol(argv[3]) : 0;
    if (port < 0 || port > 65535 || seconds < 0) {
        fprintf(stderr, "metrics_http: PORT is 0..65535 and SECONDS not negative\n");
        return 2;
    }

    char err[256] = "out of memory";
    varlog_conf_t *conf = varlog_conf_new();
    varlog_client_t *client;
    if (!conf || varlog_conf_set(conf, "metadata.addresses", argv[1], err, sizeof err) ||
        varlog_client_new(&conf, &client, err, sizeof err)) {
        fprintf(stderr, "metrics_http: %s\n", err);
        varlog_conf_destroy(conf); /* the client took it only on success */
        return 1;
    }

    /* loopback only: metrics tell how the application runs, which is nobody else's business
     * unless it says so (bind another address to serve a remote Prometheus) */
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *http =
        MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, (uint16_t)port, NULL, NULL, on_request,
                         client, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_END);
    if (!http) {
        fprintf(stderr, "metrics_http: cannot listen on 127.0.0.1:%ld (in use?)\n", port);
        varlog_client_destroy(client);
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(http, MHD_DAEMON_INFO_BIND_PORT);
    printf("metrics_http: serving metrics at http://127.0.0.1:%u/metrics\n",
           info ? (unsigned)info->port : (unsigned)port);
    fflush(stdout);

    varlog_appender_t *app;
    varlog_err_t rc = varlog_appender_new(client, 1, 0 /* topic-wide */, &app);
    if (rc != VARLOG_OK) {
        fprintf(stderr, "metrics_http: appender: %s: %s\n", varlog_err_name(rc),
                varlog_last_error());
        MHD_stop_daemon(http);
        varlog_client_destroy(client);
        return 1;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    struct timespec t0, now, tick = {0, 10 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long queued = 0;
    while (!atomic_load(&stop)) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (seconds > 0 && now.tv_sec - t0.tv_sec >= seconds)
            break;
        char text[64];
        int len = snprintf(text, sizeof text, "record %ld", queued);
        varlog_record_t rec = {.data = text, .len = (size_t)len};
        rc = varlog_appender_append(app, &rec, 1, 1000, on_appended, NULL);
        if (rc != VARLOG_OK) {
            fprintf(stderr, "metrics_http: append: %s: %s\n", varlog_err_name(rc),
                    varlog_last_error());
            break;
        }
        queued++;
        nanosleep(&tick, NULL);
    }

    varlog_appender_close(&app, 5000); /* every callback has run when it returns */
    MHD_stop_daemon(http);             /* no request in progress once it returns ... */
    varlog_client_destroy(client);     /* ... so the client may go */
    printf("metrics_http: %ld records stored, %ld failed, of %ld queued\n", atomic_load(&stored),
           atomic_load(&failed), queued);
    return rc == VARLOG_OK && atomic_load(&stored) == queued ? 0 : 1;
}
