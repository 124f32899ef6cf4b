#ifndef VARLOG_TEST_SUPPORT_H
#define VARLOG_TEST_SUPPORT_H

/* Helpers for the cmocka tests: bounded waiting on conditions instead of sleeps, and
 * process introspection (thread count, resident memory). */
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* Milliseconds on the monotonic clock. */
int64_t test_now_ms(void);

/* The CLOCK_MONOTONIC time ms milliseconds from now: the deadline pthread_cond_timedwait
 * takes for a condition variable whose clock attribute is CLOCK_MONOTONIC. */
struct timespec test_deadline_ms(int64_t ms);

/* Polls cond(arg) with a short back-off until it is true or timeout_ms passes; returns the
 * last value of cond. For conditions that have no notification to wait on. */
bool test_wait_until(bool (*cond)(void *arg), void *arg, int64_t timeout_ms);

/* Number of threads of this process (from /proc/self/task). */
int test_thread_count(void);

/* Waits until this process has exactly n threads, for at most timeout_ms; returns the last
 * count. For a baseline taken right after another test's threads were joined (see
 * test_await_thread_count_named for why they may still be listed). */
int test_await_thread_count(int n, int64_t timeout_ms);

/* The threads of this process when no test thread runs: the main thread, and under TSan its
 * background thread, which TSan starts at the first pthread_create (this starts and joins
 * one thread first, so that the count does not change under a test's feet). */
int test_idle_thread_count(void);

/* Number of threads of this process whose name (/proc/self/task/N/comm) is name. */
int test_thread_count_named(const char *name);

/* Voluntary context switches (sleeps) so far of the threads named name, summed; 0 when
 * there is none. */
long test_thread_switches_named(const char *name);

/* Voluntary context switches so far of thread tid of this process (0 once it exited): for
 * one thread among several of the same name (a thread inherits its creator's name, and
 * gRPC starts some of its own from whichever thread first needs them). */
long test_thread_switches_tid(long tid);

/* Waits until exactly n threads are named name, for at most timeout_ms; returns the last
 * count. A thread stays listed in /proc for a moment after pthread_join returns (the kernel
 * wakes the joiner before it unlists the task), so a count taken right after a join, or at
 * the start of a test that follows one, must be awaited rather than read once. */
int test_await_thread_count_named(const char *name, int n, int64_t timeout_ms);

/* Whether the process's main thread is blocked (state S or D in /proc/self/task/PID/stat):
 * asleep in a wait, as a thread that called a blocking function and has not returned is.
 * Under valgrind a thread waiting for valgrind's own lock reads as blocked too. */
bool test_main_thread_blocked(void);

/* Resident set size of this process in KiB (from /proc/self/statm). */
long test_rss_kib(void);

/* True when the test runs under valgrind (CTest sets VARLOG_UNDER_VALGRIND for memcheck
 * copies); used to scale iteration counts, never to skip assertions. */
bool test_under_valgrind(void);

/* True when built with -fsanitize=thread, which slows gRPC's data path by orders of
 * magnitude; used to choose smaller messages, never to skip assertions. */
bool test_under_tsan(void);

/* True when built with -fsanitize=address, whose redzones and 256 MiB free quarantine
 * inflate resident memory (measured: 290 to 650 MiB where a plain build grows 120 MiB), so
 * resident-memory bounds mean nothing there. */
bool test_under_asan(void);

/* n scaled down for slow runs (valgrind or TSan, both of which slow gRPC by one to two
 * orders of magnitude): returns n, or max(n / div, 1) in a slow run. */
long test_scale(long n, long div);

#endif
