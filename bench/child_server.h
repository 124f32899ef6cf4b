#ifndef VARLOG_BENCH_CHILD_SERVER_H
#define VARLOG_BENCH_CHILD_SERVER_H

/* A varlog-server program run as a child process of a benchmark, so that the benchmark
 * process's CPU time (getrusage) is the client's alone and the server's is read apart.
 *
 * At most one child at a time per process. The child dies with the benchmark whatever way
 * the benchmark ends: child_server_stop, an atexit handler, SIGINT/SIGTERM/SIGHUP handlers
 * (kill it, then die of the signal as before), and PR_SET_PDEATHSIG (SIGKILL to the child
 * when the thread that started it is gone: a crash or SIGKILL of the benchmark). Start it
 * from the main thread, which lives as long as the program. */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Starts `bin --listen 127.0.0.1:0 --topics T --log-streams N --max-bytes B` (without
 * --max-bytes when B is 0: the server's default) and waits (up to
 * 10 s) for the address it prints, copied to addr (cap bytes). Returns the child's pid, or -1
 * after a message on stderr (the child, if any, reaped). */
pid_t child_server_start(const char *bin, int32_t topics, int32_t log_streams, uint64_t max_bytes,
                         char *addr, size_t cap);

/* As child_server_start, listening on listen (127.0.0.1:PORT): a server started again
 * where a stopped one served. */
pid_t child_server_start_at(const char *bin, const char *listen, int32_t topics,
                            int32_t log_streams, uint64_t max_bytes, char *addr, size_t cap);

/* SIGTERM, up to 10 s for it to exit, then SIGKILL; reaps it. Accepts -1. */
void child_server_stop(pid_t pid);

/* CPU time (user + system, every thread) the child used so far, in microseconds, from
 * /proc/PID/stat (clock-tick resolution, 10 ms on most kernels); -1 when unreadable. */
int64_t child_server_cpu_us(pid_t pid);

#endif
