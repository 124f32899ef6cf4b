#include "test_support.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec test_deadline_ms(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = ts.tv_nsec + ms % 1000 * 1000000;
    ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    return ts;
}

bool test_wait_until(bool (*cond)(void *arg), void *arg, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    long pause_us = 50;
    for (;;) {
        if (cond(arg))
            return true;
        if (test_now_ms() >= deadline)
            return cond(arg);
        /* how often cond is looked at (50 us doubling to 10 ms), not how long anything takes */
        struct timespec ts = {0, pause_us * 1000};
        nanosleep(&ts, NULL);
        if (pause_us < 10000)
            pause_us *= 2;
    }
}

int test_thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.')
            n++;
    }
    closedir(d);
    return n;
}

/* Whether thread tid of this process (a /proc/self/task entry) is named name; false once it
 * exited. */
static bool task_named(const char *tid, const char *name)
{
    char path[300], comm[64] = "";
    snprintf(path, sizeof(path), "/proc/self/task/%s/comm", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false; /* the thread exited meanwhile */
    bool read = fgets(comm, sizeof(comm), f) != NULL;
    fclose(f);
    comm[strcspn(comm, "\n")] = '\0';
    return read && strcmp(comm, name) == 0;
}

/* Voluntary context switches of thread tid so far (0 once it exited). */
static long task_switches(const char *tid)
{
    char path[300], line[200];
    snprintf(path, sizeof(path), "/proc/self/task/%s/status", tid);
    FILE *f = fopen(path, "r");
    long n = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

/* Sums over the threads named name: 1 each, or their switches. -1 when /proc is unreadable. */
static long sum_over_named(const char *name, bool switches)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' && task_named(e->d_name, name))
            n += switches ? task_switches(e->d_name) : 1;
    closedir(d);
    return n;
}

bool test_main_thread_blocked(void)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/self/task/%ld/stat", (long)getpid());
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool read = fgets(line, sizeof(line), f) != NULL;
    fclose(f);
    const char *end = read ? strrchr(line, ')') : NULL; /* the name may hold spaces and ')' */
    return end && (end[2] == 'S' || end[2] == 'D');
}

int test_thread_count_named(const char *name)
{
    return (int)sum_over_named(name, false);
}

long test_thread_switches_tid(long tid)
{
    char name[32];
    snprintf(name, sizeof(name), "%ld", tid);
    return task_switches(name);
}

long test_thread_switches_named(const char *name)
{
    long n = sum_over_named(name, true);
    return n < 0 ? 0 : n;
}

struct thread_count_goal {
    const char *name; /* NULL: every thread */
    int want, last;
};

static bool thread_count_reached(void *arg)
{
    struct thread_count_goal *c = arg;
    c->last = c->name ? test_thread_count_named(c->name) : test_thread_count();
    return c->last == c->want;
}

int test_await_thread_count(int n, int64_t timeout_ms)
{
    struct thread_count_goal c = {.name = NULL, .want = n, .last = -1};
    test_wait_until(thread_count_reached, &c, timeout_ms);
    return c.last;
}

static void *no_op_thread(void *arg)
{
    return arg;
}

int test_idle_thread_count(void)
{
    static atomic_bool started;
    pthread_t th;
    if (!atomic_exchange(&started, true) && pthread_create(&th, NULL, no_op_thread, NULL) == 0)
        pthread_join(th, NULL);
    return test_under_tsan() ? 2 : 1;
}

int test_await_thread_count_named(const char *name, int n, int64_t timeout_ms)
{
    struct thread_count_goal c = {.name = name, .want = n, .last = -1};
    test_wait_until(thread_count_reached, &c, timeout_ms);
    return c.last;
}

long test_rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    long size = 0, resident = 0;
    int got = fscanf(f, "%ld %ld", &size, &resident);
    fclose(f);
    if (got != 2)
        return -1;
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

bool test_under_valgrind(void)
{
    const char *v = getenv("VARLOG_UNDER_VALGRIND");
    return v && v[0] == '1';
}

bool test_under_tsan(void)
{
#if defined(__SANITIZE_THREAD__)
    return true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    return true;
#else
    return false;
#endif
#else
    return false;
#endif
}

bool test_under_asan(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return true;
#else
    return false;
#endif
#else
    return false;
#endif
}

long test_scale(long n, long div)
{
    if (!test_under_valgrind() && !test_under_tsan())
        return n;
    long m = n / div;
    return m > 0 ? m : 1;
}
