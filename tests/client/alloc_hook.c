/* Allocation counting for the tests (alloc_hook.h). Every hook below reaches the allocator
 * the program would have used anyway: glibc's __libc_* entry points (valgrind replaces
 * those, so its allocator under memcheck), or under ASan and TSan theirs through
 * __real_malloc; memory from either path may be freed by the other. */
#include "alloc_hook.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define INTERPOSED 0
#else
#define INTERPOSED 1
#endif
/* Without the interposition the wraps are the only count, so those builds always have them
 * (a target that lacks the link options then fails to link rather than count nothing). */
#if defined(ALLOC_HOOK_WRAP) || !INTERPOSED
#define WRAPPED 1
#else
#define WRAPPED 0
#endif

#define TRACE_DEPTH 24

/* Whether the definitions below are what malloc reaches: valgrind replaces every malloc it
 * finds, the executable's too, so under memcheck only the wraps count. Set by probe() before
 * main. */
static bool interposed;

static atomic_uint_fast64_t totals[2];
static _Thread_local uint64_t mine[2];

static _Thread_local bool armed;
static _Thread_local alloc_hook_kind_t armed_kind;
static void *trace[TRACE_DEPTH];
static atomic_int trace_n; /* released once trace is written */

static inline void count(alloc_hook_kind_t kind)
{
    mine[kind]++;
    atomic_fetch_add_explicit(&totals[kind], 1, memory_order_relaxed);
    if (armed && armed_kind == kind && atomic_load_explicit(&trace_n, memory_order_relaxed) == 0) {
        armed = false; /* backtrace may allocate: not recorded again */
        int n = backtrace(trace, TRACE_DEPTH);
        atomic_store_explicit(&trace_n, n, memory_order_release);
    }
}

/* ---- the whole process: malloc & co. defined in the executable ------------------------------ */

#if INTERPOSED
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t m);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);
void *__libc_memalign(size_t align, size_t n);

/* Exported from the executable (the build hides symbols by default), so that the shared
 * libraries bind to them. */
#define EXPORTED __attribute__((visibility("default")))
EXPORTED void *malloc(size_t n);
EXPORTED void *calloc(size_t n, size_t m);
EXPORTED void *realloc(void *p, size_t n);
EXPORTED void free(void *p);
EXPORTED void *memalign(size_t align, size_t n);
EXPORTED void *aligned_alloc(size_t align, size_t n);
EXPORTED int posix_memalign(void **out, size_t align, size_t n);

void *malloc(size_t n)
{
    count(ALLOC_HOOK_ALL);
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
    count(ALLOC_HOOK_ALL);
    return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    count(ALLOC_HOOK_ALL);
    return __libc_realloc(p, n);
}

void free(void *p)
{
    __libc_free(p);
}

void *memalign(size_t align, size_t n)
{
    count(ALLOC_HOOK_ALL);
    return __libc_memalign(align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    count(ALLOC_HOOK_ALL);
    return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (align == 0 || align % sizeof(void *) != 0 || (align & (align - 1)) != 0)
        return 22; /* EINVAL */
    count(ALLOC_HOOK_ALL);
    void *p = __libc_memalign(align, n);
    if (!p)
        return 12; /* ENOMEM */
    *out = p;
    return 0;
}
#endif

/* ---- the static objects: -Wl,--wrap ---------------------------------------------------------- */

#if WRAPPED
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);

/* Interposed, __real_malloc is the definition above, which counts the call in all; otherwise
 * (ASan, TSan, valgrind) it is counted in all here. */
static inline void count_ours(void)
{
    count(ALLOC_HOOK_OURS);
    if (!interposed)
        count(ALLOC_HOOK_ALL);
}

void *__wrap_malloc(size_t n)
{
    count_ours();
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
    count_ours();
    return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
    count_ours();
    return __real_realloc(p, n);
}
#endif

/* ---- the API ------------------------------------------------------------------------------- */

/* Calls malloc through a pointer, so that neither inlining nor a direct call can reach the
 * definition above where valgrind put its own. */
__attribute__((constructor)) static void probe(void)
{
#if INTERPOSED
    void *(*volatile m)(size_t) = malloc;
    uint64_t before = mine[ALLOC_HOOK_ALL];
    void *p = m(1);
    free(p);
    interposed = mine[ALLOC_HOOK_ALL] != before;
    mine[ALLOC_HOOK_ALL] = before;
    atomic_fetch_sub_explicit(&totals[ALLOC_HOOK_ALL], interposed ? 1 : 0, memory_order_relaxed);
#endif
}

const char *alloc_hook_mode(void)
{
    if (interposed)
        return WRAPPED ? "interposed malloc (whole process) + link-time wrap (static objects)"
                       : "interposed malloc (whole process)";
    if (INTERPOSED) /* valgrind's malloc */
        return WRAPPED ? "link-time wrap (static objects only: valgrind replaces malloc)"
                       : "nothing counted: valgrind replaces malloc";
    return "link-time wrap (static objects only)";
}

bool alloc_hook_whole_process(void)
{
    return interposed;
}

bool alloc_hook_sees_ours(void)
{
    return WRAPPED;
}

bool alloc_hook_counting(void)
{
    return interposed || WRAPPED;
}

uint64_t alloc_hook_thread(alloc_hook_kind_t kind)
{
    return mine[kind];
}

uint64_t alloc_hook_total(alloc_hook_kind_t kind)
{
    return atomic_load_explicit(&totals[kind], memory_order_relaxed);
}

void alloc_hook_capture(bool on, alloc_hook_kind_t kind)
{
    armed_kind = kind;
    armed = on;
}

void alloc_hook_trace_reset(void)
{
    void *warm[2];
    (void)backtrace(warm, 2);
    atomic_store_explicit(&trace_n, 0, memory_order_relaxed);
}

bool alloc_hook_trace_print(const char *title)
{
    int n = atomic_load_explicit(&trace_n, memory_order_acquire);
    if (n <= 0)
        return false;
    fprintf(stderr, "%s\n", title);
    backtrace_symbols_fd(trace, n, 2);
    /* The executable's own functions are hidden, so backtrace_symbols names none of them:
     * the command that does, with return addresses moved back into their calls. */
    Dl_info self;
    char exe[512];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len <= 0 || !dladdr((void *)alloc_hook_trace_print, &self))
        return true;
    exe[len] = '\0';
    fprintf(stderr, "addr2line -f -i -e %s", exe);
    for (int i = 0; i < n; i++) {
        Dl_info d;
        if (dladdr(trace[i], &d) && d.dli_fbase == self.dli_fbase)
            fprintf(stderr, " %#lx",
                    (unsigned long)((uintptr_t)trace[i] - (uintptr_t)self.dli_fbase - 1));
    }
    fprintf(stderr, "\n");
    return true;
}
