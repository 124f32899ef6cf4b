#ifndef VARLOG_BENCH_ALLOC_COUNT_H
#define VARLOG_BENCH_ALLOC_COUNT_H

/* Allocation counting for the benchmark programs: malloc, calloc and realloc are wrapped at
 * link time (-Wl,--wrap=..., see bench/CMakeLists.txt). Only references from objects linked
 * statically into the program go through the wrappers; shared libraries (gRPC, protobuf-c,
 * glibc itself) call the real functions and are not counted. */
#include <stdint.h>

/* Allocations and requested bytes (realloc: the new size) since the program started. */
uint64_t alloc_count_allocs(void);
uint64_t alloc_count_bytes(void);

/* Every allocation of the process, shared libraries included, since it started: defined by
 * alloc_all.c (which interposes malloc and its kin in the executable), so only in programs
 * linked with it. */
uint64_t alloc_count_all_allocs(void);
uint64_t alloc_count_all_bytes(void);

#endif
