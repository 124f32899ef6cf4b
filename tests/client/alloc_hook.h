#ifndef VARLOG_ALLOC_HOOK_H
#define VARLOG_ALLOC_HOOK_H

/* Counting a test program's heap allocations (malloc, calloc, realloc and the aligned
 * allocators), per thread and process-wide, for the tests that hold the library to "no
 * allocation per ..." (test_appender_alloc, test_subscribe_alloc). Add alloc_hook.c to the
 * test's sources; no other set-up.
 *
 * Two counts, each per thread and for the whole process:
 *   - all: every allocation the hook can see. In plain and UBSan builds alloc_hook.c
 *     defines malloc & co. in the executable (exported, so that the shared libraries bind to
 *     them: gRPC, absl, protobuf-c, libstdc++ are counted), each going on to glibc's __libc_*
 *     entry points. ASan and TSan own malloc, and valgrind replaces every malloc it finds
 *     (the executable's too), so there it is the static objects' calls only (as `ours`, or
 *     nothing without the wraps), and alloc_hook_whole_process() is false.
 *   - ours: the calls made by the static objects linked into the executable (libvarlog,
 *     pool, rpc, the test itself; not the shared libraries), seen when the target is linked
 *     with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc and alloc_hook.c compiled with
 *     ALLOC_HOOK_WRAP; alloc_hook_sees_ours() says so. Without it, ours stays 0.
 * A call counted in ours is counted in all too.
 *
 * A backtrace of the first allocation of a chosen kind made on a thread while it is armed
 * (alloc_hook_capture) is kept for the failure message. */
#include <stdbool.h>
#include <stdint.h>

typedef enum alloc_hook_kind { ALLOC_HOOK_ALL, ALLOC_HOOK_OURS } alloc_hook_kind_t;

/* How the counts are taken, for the tests' messages ("interposed malloc (whole process)",
 * with " + link-time wrap (static objects)" when ours is counted; "link-time wrap (static
 * objects only)" under ASan and TSan; under valgrind, the wraps or nothing). */
const char *alloc_hook_mode(void);

/* Whether `all` is the whole process's allocations (not under ASan, TSan or valgrind). */
bool alloc_hook_whole_process(void);

/* Whether `ours` is counted (the target is linked with the wraps). */
bool alloc_hook_sees_ours(void);

/* Whether anything is counted: false only under valgrind without the wraps. */
bool alloc_hook_counting(void);

/* The counts so far: the calling thread's and the process's. */
uint64_t alloc_hook_thread(alloc_hook_kind_t kind);
uint64_t alloc_hook_total(alloc_hook_kind_t kind);

/* Arms (on) or disarms the calling thread's capture: while armed, its first allocation of
 * `kind` records a backtrace, unless one is recorded already (by any thread). Cheap enough
 * to call around every measured call. */
void alloc_hook_capture(bool on, alloc_hook_kind_t kind);

/* Forgets the recorded backtrace. Also loads backtrace's unwinder (which allocates on first
 * use), so that a capture later does not allocate inside a measured call. */
void alloc_hook_trace_reset(void);

/* Prints the recorded backtrace to stderr under the line `title`; false when none. */
bool alloc_hook_trace_print(const char *title);

#endif
