#include "child_server.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define START_WAIT_MS 10000
#define STOP_WAIT_MS 10000

/* The running child, for the exit and signal handlers. */
static volatile pid_t running = -1;
static int running_out = -1; /* the read end of its stdout, kept open so it never gets SIGPIPE */
static bool handlers_done;

static void on_signal(int sig)
{
    pid_t pid = running;
    if (pid > 0 && kill(pid, SIGKILL) == 0) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_exit_kill(void)
{
    child_server_stop(running);
}

static void install_handlers(void)
{
    if (handlers_done)
        return;
    handlers_done = true;
    atexit(on_exit_kill);
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads one line from fd within the deadline. */
static bool read_line(int fd, char *buf, size_t cap, int64_t deadline_ms)
{
    size_t len = 0;
    while (len + 1 < cap) {
        int64_t left = deadline_ms - now_ms();
        if (left <= 0)
            return false;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            return false;
        ssize_t got = read(fd, buf + len, 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return false;
        if (buf[len] == '\n') {
            buf[len] = '\0';
            return len > 0;
        }
        len++;
    }
    return false;
}

pid_t child_server_start(const char *bin, int32_t topics, int32_t log_streams, uint64_t max_bytes,
                         char *addr, size_t cap)
{
    return child_server_start_at(bin, "127.0.0.1:0", topics, log_streams, max_bytes, addr, cap);
}

pid_t child_server_start_at(const char *bin, const char *listen, int32_t topics,
                            int32_t log_streams, uint64_t max_bytes, char *addr, size_t cap)
{
    if (running > 0) {
        fprintf(stderr, "child_server_start: a server is running already\n");
        return -1;
    }
    install_handlers();
    char topics_s[16], ls_s[16], max_s[32];
    snprintf(topics_s, sizeof(topics_s), "%" PRId32, topics);
    snprintf(ls_s, sizeof(ls_s), "%" PRId32, log_streams);
    snprintf(max_s, sizeof(max_s), "%" PRIu64, max_bytes);
    /* max_bytes 0: the server's default bound (varlog-server refuses --max-bytes 0). */
    char *argv[] = {(char *)bin,     "--listen", (char *)listen, "--topics", topics_s,
                    "--log-streams", ls_s,       "--max-bytes",  max_s,      NULL};
    if (max_bytes == 0)
        argv[7] = NULL;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        fprintf(stderr, "child_server_start: pipe: %s\n", strerror(errno));
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "child_server_start: fork: %s\n", strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        /* Only async-signal-safe calls until exec: the parent has other threads. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127); /* the parent died before prctl took effect */
        if (dup2(p[1], STDOUT_FILENO) < 0)
            _exit(127);
        execv(bin, argv);
        static const char msg[] = "child_server_start: exec of the server failed\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)w;
        _exit(127);
    }
    close(p[1]);
    running = pid;
    running_out = p[0];
    if (!read_line(p[0], addr, cap, now_ms() + START_WAIT_MS)) {
        fprintf(stderr, "child_server_start: %s printed no address within %d ms\n", bin,
                START_WAIT_MS);
        child_server_stop(pid);
        return -1;
    }
    return pid;
}

void child_server_stop(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    int64_t deadline = now_ms() + STOP_WAIT_MS;
    bool reaped = false;
    while (!reaped && now_ms() < deadline) {
        pid_t w = waitpid(pid, NULL, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR)) {
            reaped = true;
            break;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (!reaped) {
        fprintf(stderr, "child_server_stop: pid %d ignored SIGTERM for %d ms: SIGKILL\n", (int)pid,
                STOP_WAIT_MS);
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (pid == running) {
        running = -1;
        if (running_out >= 0)
            close(running_out);
        running_out = -1;
    }
}

int64_t child_server_cpu_us(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t got = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[got] = '\0';
    /* Fields after the command name, which may hold spaces and ')': state is field 3,
     * utime 14 and stime 15. */
    const char *s = strrchr(buf, ')');
    if (!s)
        return -1;
    unsigned long long utime = 0, stime = 0;
    if (sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
        return -1;
    long tck = sysconf(_SC_CLK_TCK);
    if (tck <= 0)
        return -1;
    return (int64_t)((utime + stime) * 1000000ULL / (unsigned long long)tck);
}
