#include "alloc_count.h"

#include <stdatomic.h>
#include <stddef.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);

static atomic_uint_fast64_t n_allocs, n_bytes;

static void count(size_t bytes)
{
    atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_bytes, bytes, memory_order_relaxed);
}

void *__wrap_malloc(size_t n)
{
    count(n);
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
    count(n * m);
    return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
    count(n);
    return __real_realloc(p, n);
}

void __wrap_free(void *p)
{
    __real_free(p);
}

uint64_t alloc_count_allocs(void)
{
    return atomic_load_explicit(&n_allocs, memory_order_relaxed);
}

uint64_t alloc_count_bytes(void)
{
    return atomic_load_explicit(&n_bytes, memory_order_relaxed);
}
