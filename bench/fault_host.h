#ifndef VARLOG_BENCH_FAULT_HOST_H
#define VARLOG_BENCH_FAULT_HOST_H

/* The embedded server in a child process that the benchmark drives over a pipe, for
 * benchmarks that need both the server's fault injection and call counts (varlog/server.h)
 * and the server's CPU time apart from the client's: varlog-server as a program
 * (child_server.h) has no fault API, and an embedded server in the benchmark's own process
 * shares its CPU time and gRPC's threads with the client.
 *
 * fault_host_fork must run first in main, before anything starts gRPC or a thread: the child
 * is a plain fork of the program and must not inherit gRPC's state. The child waits for
 * commands, one line each, answered with one line; it dies with the benchmark
 * (PR_SET_PDEATHSIG) and exits when the pipe closes. Calls from several threads are
 * serialised. */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Forks the host; returns false after a message on stderr. */
bool fault_host_fork(void);

/* The child's pid (for /proc), -1 before fault_host_fork. */
pid_t fault_host_pid(void);

/* Starts a server (1..topics topics, log_streams each, max_bytes 0 = its default) in the
 * child and copies its address ("127.0.0.1:PORT") to addr. */
bool fault_host_start(int32_t topics, int32_t log_streams, char *addr, size_t cap);

/* varlog_server_fail_next in the child (message without newlines). */
bool fault_host_fail_next(const char *method, int code, const char *message, int n);

/* varlog_server_call_count / varlog_server_request_count in the child; 0 on failure. */
uint64_t fault_host_call_count(const char *method);
uint64_t fault_host_request_count(const char *method);

/* User + system CPU time the child (every thread) used so far, in microseconds, from its own
 * getrusage (microsecond resolution, unlike /proc's clock ticks); -1 on failure. */
int64_t fault_host_cpu_us(void);

/* Destroys the child's server (the child stays for the next start). */
bool fault_host_stop(void);

/* Closes the pipe and reaps the child. */
void fault_host_exit(void);

#endif
