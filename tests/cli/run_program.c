/* See run_program.h. */
#include "run_program.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>

#include <cmocka.h>

#include "test_support.h"

extern char **environ;

static void append_bytes(char **buf, size_t *len, const char *data, size_t n)
{
    char *nb = realloc(*buf, *len + n + 1);
    assert_non_null(nb);
    memcpy(nb + *len, data, n);
    *len += n;
    nb[*len] = '\0';
    *buf = nb;
}

int count_lines(const char *s)
{
    int n = 0;
    for (const char *p = s; *p; p++)
        if (*p == '\n')
            n++;
    if (*s && s[strlen(s) - 1] != '\n')
        n++;
    return n;
}

int count_lines_but_open_notice(const char *s)
{
    int n = 0;
    for (const char *line = s; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        if (!strstr(buf, ": waiting for the metadata repository at "))
            n++;
        line += len + (end ? 1 : 0);
    }
    return n;
}

void assert_quiet_but_open_notice(const char *err)
{
    if (count_lines_but_open_notice(err) != 0)
        fail_msg("stderr '%s', want nothing (but the open notice)", err);
}

void run_result_free(run_result_t *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

/* A pseudo-terminal pair for stderr: the master end for us, the slave's path. */
static int open_pty(char *slave, size_t cap)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    assert_true(m >= 0);
    assert_int_equal(grantpt(m), 0);
    assert_int_equal(unlockpt(m), 0);
    assert_int_equal(ptsname_r(m, slave, cap), 0);
    return m;
}

run_result_t run_program(const char *path, const char *const *args, const run_opts_t *opts)
{
    static const run_opts_t none = {0};
    if (!opts)
        opts = &none;
    int in[2], out[2], err[2] = {-1, -1};
    char slave[128];
    assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    if (opts->stderr_tty) {
        err[0] = open_pty(slave, sizeof slave);
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, slave, O_RDWR | O_NOCTTY, 0);
    } else {
        assert_int_equal(pipe2(err, O_CLOEXEC), 0);
        posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
    }
    char **env = environ;
    char **own_env = NULL;
    if (opts->env) {
        size_t n = 0;
        while (environ[n])
            n++;
        own_env = calloc(n + 2, sizeof *own_env);
        assert_non_null(own_env);
        memcpy(own_env, environ, n * sizeof *own_env);
        own_env[n] = (char *)opts->env;
        env = own_env;
    }
    int64_t t0 = test_now_ms();
    pid_t pid;
    int rc = posix_spawn(&pid, path, &fa, NULL, (char *const *)args, env);
    posix_spawn_file_actions_destroy(&fa);
    free(own_env);
    assert_int_equal(rc, 0);
    close(in[0]);
    close(out[1]);
    if (err[1] >= 0)
        close(err[1]);

    run_result_t r = {.status = -1};
    size_t lens[2] = {0, 0};
    char **bufs[2] = {&r.out, &r.err};
    append_bytes(&r.out, &lens[0], "", 0);
    append_bytes(&r.err, &lens[1], "", 0);
    size_t in_off = 0, in_len = opts->input ? strlen(opts->input) : 0;
    int in_fd = in[1];
    if (in_len == 0) {
        close(in_fd);
        in_fd = -1;
    } else {
        fcntl(in_fd, F_SETFL, O_NONBLOCK);
    }
    int64_t deadline = t0 + (opts->timeout_ms > 0 ? opts->timeout_ms : 60000);
    int64_t interrupt_at =
        opts->interrupt_after_ms > 0 && !opts->interrupt_when ? t0 + opts->interrupt_after_ms : -1;
    bool interrupted = false;
    bool open_[2] = {true, true};
    int fds[2] = {out[0], err[0]};
    while (open_[0] || open_[1]) {
        int64_t now = test_now_ms();
        if (now >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            fail_msg("%s %s did not end within %lld ms; stderr: %s", args[0],
                     args[1] ? args[1] : "", (long long)(deadline - t0), r.err);
        }
        if (opts->notice_when && opts->noticed && !atomic_load(opts->noticed) &&
            (strstr(r.err, opts->notice_when) || strstr(r.out, opts->notice_when)))
            atomic_store(opts->noticed, true);
        if (interrupt_at < 0 && !interrupted && opts->interrupt_when &&
            (strstr(r.err, opts->interrupt_when) || strstr(r.out, opts->interrupt_when)))
            interrupt_at = now + opts->interrupt_after_ms;
        if (interrupt_at >= 0 && !interrupted && now >= interrupt_at) {
            kill(pid, SIGINT);
            interrupted = true;
        }
        int64_t wait = deadline - now;
        if (!interrupted && (interrupt_at >= 0 || opts->interrupt_when))
            wait = interrupt_at >= 0 && interrupt_at - now < 50 ? interrupt_at - now : 50;
        struct pollfd p[3] = {{.fd = open_[0] ? fds[0] : -1, .events = POLLIN},
                              {.fd = open_[1] ? fds[1] : -1, .events = POLLIN},
                              {.fd = in_fd, .events = POLLOUT}};
        int n = poll(p, 3, (int)(wait > 0 ? wait : 0));
        if (n < 0 && errno == EINTR)
            continue;
        assert_true(n >= 0);
        char buf[4096];
        for (int i = 0; i < 2; i++) {
            if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t k = read(fds[i], buf, sizeof buf);
            if (k > 0)
                append_bytes(bufs[i], &lens[i], buf, (size_t)k);
            else if (k == 0 || errno != EINTR)
                open_[i] = false; /* a pty's master reads EIO once the slave is closed */
        }
        if (in_fd >= 0 && (p[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t k = write(in_fd, opts->input + in_off, in_len - in_off);
            if (k > 0)
                in_off += (size_t)k;
            if (k < 0 && errno != EAGAIN && errno != EINTR)
                in_off = in_len; /* the program stopped reading */
            if (in_off == in_len) {
                close(in_fd);
                in_fd = -1;
            }
        }
    }
    if (in_fd >= 0)
        close(in_fd);
    close(out[0]);
    close(err[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    r.elapsed_ms = test_now_ms() - t0;
    if (WIFEXITED(status))
        r.status = WEXITSTATUS(status);
    return r;
}
