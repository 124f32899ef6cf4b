/* varlog-cli --metrics-listen HOST:PORT: GET /metrics serves the command's client's metrics in
 * the Prometheus text format (varlog_stats_prometheus) while the command runs. The HTTP side is
 * libmicrohttpd's, on one thread of its own: the library opens no port, and an HTTP parser is
 * not something to write again here. */
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "cli.h"
#include "varlog/stats.h"

#define METRICS_PATH "/metrics"
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct cli_metrics {
    struct MHD_Daemon *daemon;
    varlog_client_t *client;
    /* While MHD_start_daemon runs, its error messages land here, for the one line a failed
     * start prints; later ones (a client that hung up mid-request) are dropped: a scrape
     * failing is Prometheus's to report, not a line in the command's output. */
    atomic_bool started;
    char start_error[256];
};

/* "HOST:PORT" or "[V6]:PORT" into host and port; false when it is not of that shape or the
 * port is not a number of 0..65535. */
static bool split_listen(const char *text, char *host, size_t host_cap, char *port, size_t port_cap)
{
    const char *colon = strrchr(text, ':');
    if (!colon || colon == text)
        return false;
    const char *h = text;
    size_t hlen = (size_t)(colon - text);
    if (h[0] == '[') {
        if (hlen < 3 || h[hlen - 1] != ']')
            return false;
        h++;
        hlen -= 2;
    } else if (memchr(h, ':', hlen)) {
        return false; /* an IPv6 address without brackets: its port cannot be told apart */
    }
    const char *p = colon + 1;
    size_t plen = strlen(p);
    if (hlen >= host_cap || plen == 0 || plen > 5 || plen >= port_cap ||
        strspn(p, "0123456789") != plen || atol(p) > 65535)
        return false;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    memcpy(port, p, plen + 1);
    return true;
}

/* The address to listen on; prints the usage line and returns false when there is none. */
static bool resolve_listen(const cli_ctx_t *ctx, const char *text, struct sockaddr_storage *out,
                           socklen_t *out_len)
{
    char host[256], port[8];
    if (!split_listen(text, host, sizeof host, port, sizeof port)) {
        cli_usage_error(ctx,
                        "option --metrics-listen: '%s' is not HOST:PORT (e.g. 127.0.0.1:9464; "
                        "port 0 picks a free one)",
                        text);
        return false;
    }
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai != 0) {
        cli_usage_error(ctx, "option --metrics-listen: cannot resolve '%s': %s", host,
                        gai_strerror(gai));
        return false;
    }
    memcpy(out, ai->ai_addr, ai->ai_addrlen);
    *out_len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return true;
}

bool cli_metrics_listen_option(cli_ctx_t *ctx, const char *text)
{
    struct sockaddr_storage sa;
    socklen_t len;
    if (!resolve_listen(ctx, text, &sa, &len))
        return false;
    ctx->metrics_listen = text;
    return true;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    cli_metrics_t *m = cls;
    if (atomic_load(&m->started))
        return;
    vsnprintf(m->start_error, sizeof m->start_error, fmt, ap);
    size_t n = strlen(m->start_error);
    while (n > 0 && (m->start_error[n - 1] == '\n' || m->start_error[n - 1] == '.'))
        m->start_error[--n] = '\0';
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned int status,
                                  const char *text, const char *allow)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static void free_exposition(void *text)
{
    varlog_stats_prometheus_free(text);
}

/* On libmicrohttpd's thread, one request at a time. Answers at the first call, with the
 * headers: a GET has no body to wait for, and anything else is refused whole. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)req_cls;
    cli_metrics_t *m = cls;
    if (strcmp(url, METRICS_PATH) != 0)
        return reply_text(conn, MHD_HTTP_NOT_FOUND,
                          "not found: the metrics are at " METRICS_PATH "\n", NULL);
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n", "GET, HEAD");
    char *text = NULL;
    size_t len = 0;
    varlog_err_t err = varlog_stats_prometheus(m->client, &text, &len);
    if (err != VARLOG_OK) {
        char why[600];
        snprintf(why, sizeof why, "varlog_stats_prometheus: %s: %s\n", varlog_err_name(err),
                 varlog_last_error());
        return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, why, NULL);
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer_with_free_callback(len, text, free_exposition);
    if (!r) {
        varlog_stats_prometheus_free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, METRICS_CONTENT_TYPE);
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

int cli_metrics_start(const cli_ctx_t *ctx, varlog_client_t *client, cli_metrics_t **out)
{
    *out = NULL;
    if (!ctx->metrics_listen)
        return CLI_EXIT_OK;
    struct sockaddr_storage sa;
    socklen_t sa_len;
    if (!resolve_listen(ctx, ctx->metrics_listen, &sa, &sa_len))
        return CLI_EXIT_USAGE;
    cli_metrics_t *m = calloc(1, sizeof *m);
    if (!m)
        return cli_fail(ctx, VARLOG_ERR_NOMEM, "serving metrics");
    m->client = client;
    unsigned int flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    if (sa.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    /* MHD_OPTION_SOCK_ADDR binds that address only; the port argument then only names the
     * port in libmicrohttpd's messages. A few connections and a timeout: a scraper needs one,
     * and a stuck peer must not hold a slot for ever. */
    uint16_t port_no = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                                      : ((struct sockaddr_in *)&sa)->sin_port);
    m->daemon = MHD_start_daemon(flags, port_no, NULL, NULL, on_request, m, MHD_OPTION_SOCK_ADDR,
                                 (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT,
                                 (unsigned int)16, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)10,
                                 MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, m, MHD_OPTION_END);
    if (!m->daemon) {
        fprintf(stderr, "%s %s: cannot serve metrics on %s: %s\n", ctx->prog, ctx->cmd,
                ctx->metrics_listen,
                m->start_error[0] ? m->start_error : "libmicrohttpd could not start");
        free(m);
        return CLI_EXIT_FAIL;
    }
    atomic_store(&m->started, true);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_BIND_PORT);
    char host[256], port[8];
    split_listen(ctx->metrics_listen, host, sizeof host, port, sizeof port);
    /* Always said, -q or not: with port 0 it is the only way to learn the port. */
    fprintf(stderr, "%s %s: serving metrics at http://%s%s%s:%u" METRICS_PATH "\n", ctx->prog,
            ctx->cmd, sa.ss_family == AF_INET6 ? "[" : "", host,
            sa.ss_family == AF_INET6 ? "]" : "", info ? (unsigned)info->port : 0u);
    fflush(stderr);
    *out = m;
    return CLI_EXIT_OK;
}

void cli_metrics_stop(cli_metrics_t **m)
{
    if (!m || !*m)
        return;
    MHD_stop_daemon((*m)->daemon);
    free(*m);
    *m = NULL;
}
