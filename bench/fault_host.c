#include "fault_host.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "varlog/server.h"

static pid_t host_pid = -1;
static FILE *to_host, *from_host;
static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- the child --------------------------------------------------------------------------- */

static void reply(FILE *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    fputc('\n', out);
    fflush(out);
}

static void host_command(char *line, varlog_server_t **srv, FILE *out)
{
    char method[256], message[256];
    int a = 0, b = 0, n = 0;
    line[strcspn(line, "\n")] = '\0';
    if (sscanf(line, "start %d %d", &a, &b) == 2) {
        varlog_server_destroy(*srv);
        *srv = NULL;
        varlog_server_opts_t o = {.topics = a, .log_streams_per_topic = b};
        varlog_err_t rc = varlog_server_start(&o, srv);
        if (rc != VARLOG_OK)
            reply(out, "err %s", varlog_err_name(rc));
        else
            reply(out, "ok %s", varlog_server_address(*srv));
    } else if (sscanf(line, "fail %255s %d %d %255[^\n]", method, &a, &n, message) == 4) {
        varlog_err_t rc = varlog_server_fail_next(*srv, method, a, message, n);
        if (rc != VARLOG_OK)
            reply(out, "err %s", varlog_err_name(rc));
        else
            reply(out, "ok");
    } else if (sscanf(line, "count %255s", method) == 1) {
        reply(out, "ok %" PRIu64, varlog_server_call_count(*srv, method));
    } else if (sscanf(line, "requests %255s", method) == 1) {
        reply(out, "ok %" PRIu64, varlog_server_request_count(*srv, method));
    } else if (strcmp(line, "cpu") == 0) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        int64_t us = (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec +
                     (int64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
        reply(out, "ok %" PRId64, us);
    } else if (strcmp(line, "stop") == 0) {
        varlog_server_destroy(*srv);
        *srv = NULL;
        reply(out, "ok");
    } else {
        reply(out, "err unknown command");
    }
}

static void host_main(int in_fd, int out_fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
        _exit(0); /* the benchmark died before prctl took effect */
    FILE *in = fdopen(in_fd, "r"), *out = fdopen(out_fd, "w");
    if (!in || !out)
        _exit(1);
    varlog_server_t *srv = NULL;
    char line[1024];
    while (fgets(line, sizeof(line), in))
        host_command(line, &srv, out);
    varlog_server_destroy(srv);
    _exit(0);
}

/* ---- the benchmark's side ---------------------------------------------------------------- */

bool fault_host_fork(void)
{
    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0) {
        perror("fault_host: pipe");
        return false;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fault_host: fork");
        return false;
    }
    if (pid == 0) {
        close(down[1]);
        close(up[0]);
        host_main(down[0], up[1]);
    }
    close(down[0]);
    close(up[1]);
    to_host = fdopen(down[1], "w");
    from_host = fdopen(up[0], "r");
    host_pid = pid;
    return to_host && from_host;
}

pid_t fault_host_pid(void)
{
    return host_pid;
}

/* One command, one answer line (into answer); false unless it begins with "ok". */
static bool ask(char *answer, size_t cap, const char *fmt, ...)
{
    if (!to_host)
        return false;
    pthread_mutex_lock(&host_mu);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(to_host, fmt, ap);
    va_end(ap);
    fputc('\n', to_host);
    fflush(to_host);
    bool got = fgets(answer, (int)cap, from_host) != NULL;
    pthread_mutex_unlock(&host_mu);
    if (!got) {
        fprintf(stderr, "fault_host: the child did not answer\n");
        return false;
    }
    answer[strcspn(answer, "\n")] = '\0';
    if (strncmp(answer, "ok", 2) != 0) {
        fprintf(stderr, "fault_host: %s\n", answer);
        return false;
    }
    return true;
}

bool fault_host_start(int32_t topics, int32_t log_streams, char *addr, size_t cap)
{
    char a[256];
    if (!ask(a, sizeof(a), "start %d %d", (int)topics, (int)log_streams))
        return false;
    snprintf(addr, cap, "%s", a + 3);
    return true;
}

bool fault_host_fail_next(const char *method, int code, const char *message, int n)
{
    char a[256];
    return ask(a, sizeof(a), "fail %s %d %d %s", method, code, n, message);
}

static uint64_t ask_number(const char *what, const char *method)
{
    char a[256];
    if (!ask(a, sizeof(a), "%s %s", what, method))
        return 0;
    return strtoull(a + 3, NULL, 10);
}

uint64_t fault_host_call_count(const char *method)
{
    return ask_number("count", method);
}

uint64_t fault_host_request_count(const char *method)
{
    return ask_number("requests", method);
}

int64_t fault_host_cpu_us(void)
{
    char a[256];
    if (!ask(a, sizeof(a), "cpu"))
        return -1;
    return strtoll(a + 3, NULL, 10);
}

bool fault_host_stop(void)
{
    char a[256];
    return ask(a, sizeof(a), "stop");
}

void fault_host_exit(void)
{
    if (to_host)
        fclose(to_host);
    if (from_host)
        fclose(from_host);
    to_host = from_host = NULL;
    if (host_pid > 0)
        waitpid(host_pid, NULL, 0);
    host_pid = -1;
}
