/* See metrics_test_util.h. */
#include "metrics_test_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>

#include <cmocka.h>

#include "test_support.h"

static bool g_skipped;

void metrics_workdir(char *path, size_t cap, const char *test_name)
{
    mkdir(METRICS_WORKDIR, 0755);
    int n = snprintf(path, cap, "%s/%s-XXXXXX", METRICS_WORKDIR, test_name);
    assert_true(n > 0 && (size_t)n < cap);
    assert_non_null(mkdtemp(path));
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void metrics_workdir_remove(const char *dir)
{
    if (dir && dir[0])
        nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- programs ------------------------------------------------------------------------------ */

void mproc_start(mproc_t *p, const char *dir, const char *name, const char *const *argv,
                 const char *stdin_from)
{
    memset(p, 0, sizeof *p);
    p->in_fd = -1;
    p->pidfd = -1;
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->out_path, sizeof p->out_path, "%s/%s.out", dir, name);
    snprintf(p->err_path, sizeof p->err_path, "%s/%s.err", dir, name);
    const char *out = p->out_path, *err = p->err_path;
    int in_pipe[2] = {-1, -1};
    bool piped = stdin_from && strcmp(stdin_from, MPROC_STDIN_PIPE) == 0;
    if (piped)
        assert_int_equal(pipe2(in_pipe, O_CLOEXEC), 0);
    const char *in_path = piped || !stdin_from ? "/dev/null" : stdin_from;
    /* Opened before the fork: the child of a threaded process may only make async-signal-safe
     * calls, and a failure is the test's to report. */
    int in_fd = piped ? in_pipe[0] : open(in_path, O_RDONLY | O_CLOEXEC);
    int out_fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err_fd = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (in_fd < 0 || out_fd < 0 || err_fd < 0)
        fail_msg("%s: cannot open its stdin/stdout/stderr (%s, %s, %s): %s", argv[0], in_path, out,
                 err, strerror(errno));
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        if (dup2(in_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 ||
            dup2(err_fd, STDERR_FILENO) < 0)
            _exit(127);
        /* the signal dispositions a shell would give it */
        signal(SIGPIPE, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(in_fd);
    close(out_fd);
    close(err_fd);
    if (piped)
        p->in_fd = in_pipe[1];
    p->pid = pid;
    p->status = -1;
    p->pidfd = pidfd_open(pid, 0);
    assert_true(p->pidfd >= 0);
}

void mproc_write(mproc_t *p, const char *data, size_t len)
{
    assert_true(p->in_fd >= 0);
    while (len > 0) {
        ssize_t k = write(p->in_fd, data, len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            fail_msg("writing to %s's stdin: %s", p->name, strerror(errno));
        data += k;
        len -= (size_t)k;
    }
}

void mproc_close_stdin(mproc_t *p)
{
    if (p->in_fd >= 0)
        close(p->in_fd);
    p->in_fd = -1;
}

bool mproc_running(const mproc_t *p)
{
    return p->pid > 0;
}

static void reap(mproc_t *p)
{
    int st = 0;
    while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR) {
    }
    p->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    p->pid = 0;
    close(p->pidfd);
    p->pidfd = -1;
    mproc_close_stdin(p);
}

int mproc_stop(mproc_t *p, int sig, int64_t timeout_ms)
{
    if (p->pid <= 0)
        return p->status;
    if (sig)
        kill(p->pid, sig);
    struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};
    int64_t deadline = test_now_ms() + timeout_ms;
    int n;
    do {
        int64_t left = deadline - test_now_ms();
        n = poll(&pf, 1, (int)(left > 0 ? left : 0));
    } while (n < 0 && errno == EINTR);
    if (n <= 0)
        kill(p->pid, SIGKILL);
    reap(p);
    return n <= 0 ? -1 : p->status;
}

void mproc_kill(mproc_t *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGKILL);
        reap(p);
    }
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    assert_non_null(buf);
    if (f) {
        size_t k;
        while ((k = fread(buf + len, 1, cap - len - 1, f)) > 0) {
            len += k;
            if (cap - len < 2) {
                cap *= 2;
                buf = realloc(buf, cap);
                assert_non_null(buf);
            }
        }
        fclose(f);
    }
    buf[len] = '\0';
    return buf;
}

char *mproc_stdout(const mproc_t *p)
{
    return read_file(p->out_path);
}

char *mproc_stderr(const mproc_t *p)
{
    return read_file(p->err_path);
}

void mproc_dump(const mproc_t *p)
{
    char *paths[2] = {mproc_stderr(p), mproc_stdout(p)};
    const char *what[2] = {"stderr", "stdout"};
    for (int i = 0; i < 2; i++) {
        size_t len = strlen(paths[i]);
        const char *tail = len > 3000 ? paths[i] + len - 3000 : paths[i];
        fprintf(stderr, "---- %s's %s (last %zu bytes) ----\n%s\n", p->name, what[i], strlen(tail),
                tail);
        free(paths[i]);
    }
}

void mproc_stop_all(mproc_t *procs, size_t n, const char *dir)
{
    bool clean = true;
    for (size_t i = 0; i < n; i++) {
        if (mproc_running(&procs[i])) {
            clean = false;
            mproc_dump(&procs[i]);
            mproc_kill(&procs[i]);
        }
    }
    if (clean)
        metrics_workdir_remove(dir);
    else
        fprintf(stderr, "their output: %s\n", dir);
}

int mproc_metrics_port(mproc_t *p, int64_t timeout_ms)
{
    static const char NEEDLE[] = "serving metrics at http://127.0.0.1:";
    int64_t deadline = test_now_ms() + timeout_ms;
    int pause_ms = 5;
    for (;;) {
        char *err = mproc_stderr(p);
        const char *at = strstr(err, NEEDLE);
        int port = at ? atoi(at + sizeof NEEDLE - 1) : 0;
        if (port > 0 && strchr(at, '\n')) {
            free(err);
            return port;
        }
        free(err);
        /* No notification for a line in a file: look again shortly, but notice an exit at
         * once (the pidfd turns readable). */
        struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};
        if (test_now_ms() >= deadline || poll(&pf, 1, pause_ms) > 0) {
            mproc_dump(p);
            fail_msg("%s said no 'serving metrics at' line within %lld ms%s", p->name,
                     (long long)timeout_ms, pf.revents ? " (it exited)" : "");
        }
        pause_ms = pause_ms < 100 ? pause_ms * 2 : 100;
    }
}

int mproc_run(const char *dir, const char *name, const char *const *argv, const char *input,
              int64_t timeout_ms, char **output)
{
    char in_path[600];
    snprintf(in_path, sizeof in_path, "%s/%s.in", dir, name);
    FILE *f = fopen(in_path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(input, 1, strlen(input), f), strlen(input));
    assert_int_equal(fclose(f), 0);
    mproc_t p;
    mproc_start(&p, dir, name, argv, in_path);
    int st = mproc_stop(&p, 0, timeout_ms);
    if (st == -1) {
        mproc_dump(&p);
        fail_msg("%s did not end within %lld ms", argv[0], (long long)timeout_ms);
    }
    if (output) {
        char *o = mproc_stdout(&p), *e = mproc_stderr(&p);
        size_t lo = strlen(o), le = strlen(e);
        *output = malloc(lo + le + 1);
        assert_non_null(*output);
        memcpy(*output, o, lo);
        memcpy(*output + lo, e, le + 1);
        free(o);
        free(e);
    }
    return st;
}

/* ---- HTTP ---------------------------------------------------------------------------------- */

void http_reply_free(http_reply_t *r)
{
    free(r->headers);
    free(r->body);
    memset(r, 0, sizeof *r);
}

bool http_request(int port, const char *method, const char *target, int64_t timeout_ms,
                  http_reply_t *reply)
{
    memset(reply, 0, sizeof *reply);
    int64_t deadline = test_now_ms() + timeout_ms;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS) {
        close(fd);
        return false;
    }
    char req[4096];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\nUser-Agent: varlog-metrics-test\r\n"
                     "Accept: */*\r\nConnection: close\r\n\r\n",
                     method, target, port);
    assert_true(n > 0 && (size_t)n < sizeof req);
    size_t sent = 0, len = 0, cap = 65536;
    char *buf = malloc(cap);
    assert_non_null(buf);
    bool eof = false;
    while (!eof) {
        int64_t left = deadline - test_now_ms();
        if (left <= 0)
            break;
        struct pollfd pf = {.fd = fd, .events = sent < (size_t)n ? POLLOUT : POLLIN};
        int k = poll(&pf, 1, (int)left);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        if (sent < (size_t)n) {
            ssize_t w = send(fd, req + sent, (size_t)n - sent, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN && errno != EINTR)
                break; /* refused: nothing listens */
            if (w > 0)
                sent += (size_t)w;
            continue;
        }
        if (cap - len < 4096) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        ssize_t r = recv(fd, buf + len, cap - len - 1, 0);
        if (r > 0)
            len += (size_t)r;
        else if (r == 0)
            eof = true;
        else if (errno != EAGAIN && errno != EINTR)
            break;
    }
    close(fd);
    buf[len] = '\0';
    char *end = strstr(buf, "\r\n\r\n");
    int status = 0;
    if (!eof || !end || sscanf(buf, "HTTP/1.%*d %d", &status) != 1) {
        free(buf);
        return false;
    }
    size_t hlen = (size_t)(end - buf) + 2;
    reply->headers = strndup(buf, hlen);
    reply->body_len = len - hlen - 2;
    reply->body = malloc(reply->body_len + 1);
    assert_non_null(reply->headers);
    assert_non_null(reply->body);
    memcpy(reply->body, end + 4, reply->body_len);
    reply->body[reply->body_len] = '\0';
    reply->status = status;
    free(buf);
    return true;
}

bool http_header(const http_reply_t *r, const char *name, char *out, size_t cap)
{
    size_t nlen = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *eol = strstr(line, "\r\n");
        if (!eol)
            break;
        if (strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
            const char *v = line + nlen + 1;
            while (*v == ' ')
                v++;
            snprintf(out, cap, "%.*s", (int)(eol - v), v);
            return true;
        }
        line = eol + 2;
    }
    return false;
}

void metrics_url_escape(const char *s, char *out, size_t cap)
{
    static const char HEX[] = "0123456789ABCDEF";
    size_t o = 0;
    for (; *s && o + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = HEX[c >> 4];
            out[o++] = HEX[c & 15];
        }
    }
    assert_true(*s == '\0');
    out[o] = '\0';
}

/* ---- tools --------------------------------------------------------------------------------- */

const char *metrics_find_program(const char *env_name, const char *name, char *buf, size_t cap)
{
    const char *env = getenv(env_name);
    if (env && env[0])
        return access(env, X_OK) == 0 ? env : NULL;
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/bin:/bin";
    while (*path) {
        size_t len = strcspn(path, ":");
        snprintf(buf, cap, "%.*s/%s", (int)len, path, name);
        if (len > 0 && access(buf, X_OK) == 0)
            return buf;
        path += len + (path[len] == ':');
    }
    return NULL;
}

void metrics_skip_or_fail(const char *what)
{
    static bool said;
    const char *ci = getenv("CI");
    bool in_ci = ci && strcmp(ci, "true") == 0;
    if (!said)
        fprintf(stderr,
                "%s: %s; install Debian's prometheus package (scripts/install-deps.sh does) to "
                "run this test\n",
                in_ci ? "FAILED" : "skipped", what);
    said = true;
    if (in_ci)
        fail_msg("CI=true, where scripts/install-deps.sh installs it: failed, not skipped");
    g_skipped = true;
    skip();
}

int metrics_main_result(int cmocka_failures)
{
    return cmocka_failures == 0 && g_skipped ? 77 : cmocka_failures;
}

int metrics_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* Whether the label text of a series (between its braces) holds matcher as a whole label. */
static bool has_label(const char *labels, size_t len, const char *matcher)
{
    size_t mlen = strlen(matcher);
    for (size_t i = 0; i + mlen <= len; i++)
        if ((i == 0 || labels[i - 1] == ',') && strncmp(labels + i, matcher, mlen) == 0 &&
            (i + mlen == len || labels[i + mlen] == ','))
            return true;
    return false;
}

double metrics_sum(const char *exposition, const char *name, const char *const *matchers)
{
    size_t nlen = strlen(name);
    double sum = 0;
    for (const char *line = exposition; *line;) {
        const char *eol = strchr(line, '\n');
        size_t llen = eol ? (size_t)(eol - line) : strlen(line);
        if (line[0] != '#' && llen > nlen && strncmp(line, name, nlen) == 0 &&
            (line[nlen] == '{' || line[nlen] == ' ')) {
            const char *labels = line + nlen + 1, *close = labels;
            if (line[nlen] == '{')
                close = memchr(labels, '}', llen - nlen - 1);
            bool match = close != NULL;
            for (const char *const *m = matchers; match && m && *m; m++)
                match = has_label(labels, (size_t)(close - labels), *m);
            if (match)
                sum += strtod(line[nlen] == '{' ? close + 1 : line + nlen, NULL);
        }
        line += llen + (eol != NULL);
    }
    return sum;
}
