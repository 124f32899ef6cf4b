/* Process-wide allocation counting (alloc_count.h, alloc_count_all_*): this object defines
 * malloc, calloc, realloc, free and the aligned allocators in the executable itself. The
 * dynamic linker binds every shared library's references to the executable's definitions
 * first, so what gRPC, absl, libprotobuf-c, libstdc++'s operator new and glibc's callers
 * allocate through the PLT is counted here, which the link-time --wrap of alloc_count.c
 * cannot see. Each call goes on to glibc's allocator through its exported __libc_* entry
 * points, so memory from either path may be freed by the other. The --wrap counters keep
 * working: their __real_malloc now resolves to the definition below, which counts the call
 * again in the process-wide counters only.
 *
 * Link it into a program only where that is wanted (bench_append): every allocation of the
 * process then pays one relaxed atomic add. Allocations glibc makes internally without the
 * PLT (its own stdio buffers, reallocarray's inner call) are not seen. */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc_count.h"

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t m);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);
void *__libc_memalign(size_t align, size_t n);
void *__libc_valloc(size_t n);
void *__libc_pvalloc(size_t n);

/* Exported from the executable (the build hides symbols by default), or the shared libraries
 * would not see them. */
#define INTERPOSE __attribute__((visibility("default")))
INTERPOSE void *malloc(size_t n);
INTERPOSE void *calloc(size_t n, size_t m);
INTERPOSE void *realloc(void *p, size_t n);
INTERPOSE void free(void *p);
INTERPOSE void *memalign(size_t align, size_t n);
INTERPOSE void *aligned_alloc(size_t align, size_t n);
INTERPOSE int posix_memalign(void **out, size_t align, size_t n);
INTERPOSE void *valloc(size_t n);
INTERPOSE void *pvalloc(size_t n);

static atomic_uint_fast64_t all_allocs, all_bytes;

static void count_all(size_t bytes)
{
    atomic_fetch_add_explicit(&all_allocs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&all_bytes, bytes, memory_order_relaxed);
}

void *malloc(size_t n)
{
    count_all(n);
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
    count_all(n * m);
    return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    count_all(n);
    return __libc_realloc(p, n);
}

void free(void *p)
{
    __libc_free(p);
}

void *memalign(size_t align, size_t n)
{
    count_all(n);
    return __libc_memalign(align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    count_all(n);
    return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    /* glibc's own checks: a power of two and a multiple of sizeof(void *). */
    if (align % sizeof(void *) != 0 || (align & (align - 1)) != 0 || align == 0)
        return EINVAL;
    count_all(n);
    void *p = __libc_memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *valloc(size_t n)
{
    count_all(n);
    return __libc_valloc(n);
}

void *pvalloc(size_t n)
{
    count_all(n);
    return __libc_pvalloc(n);
}

uint64_t alloc_count_all_allocs(void)
{
    return atomic_load_explicit(&all_allocs, memory_order_relaxed);
}

uint64_t alloc_count_all_bytes(void)
{
    return atomic_load_explicit(&all_bytes, memory_order_relaxed);
}
