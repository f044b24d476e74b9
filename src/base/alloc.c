/*
 * alloc.c — the library's one allocator (base stage). Every allocation of
 * the library goes through sl_malloc, sl_calloc, sl_realloc, sl_strdup or
 * sl_aligned_malloc, so that tests can make the N-th allocation fail
 * (sl_test_alloc_fail_at) and prove that every public call turns an
 * allocation failure into SL_ERR_NOMEM and leaves its objects as they were.
 * Backends' device memory (cudaMalloc) and third-party libraries' own
 * allocations (OpenBLAS, libgomp) do not pass through here.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* Written by tests only, between runs; read by every allocation. While
 * armed is 0 an allocation costs one load more than malloc. */
static int armed;
static long countdown; /* allocations left before the failing one */
static long counted;

void sl_test_alloc_fail_at(long n)
{
    armed = n != 0;
    countdown = n;
    counted = 0;
}

long sl_test_alloc_count(void) { return counted; }

/* 1 when this allocation is the one a test asked to fail. */
static int injected_failure(void)
{
    if (!armed)
        return 0;
    counted++;
    return countdown > 0 && --countdown == 0;
}

void *sl_malloc(size_t bytes)
{
    return injected_failure() ? NULL : malloc(bytes ? bytes : 1);
}

void *sl_calloc(size_t n, size_t size)
{
    return injected_failure() ? NULL : calloc(n ? n : 1, size ? size : 1);
}

void *sl_realloc(void *p, size_t bytes)
{
    return injected_failure() ? NULL : realloc(p, bytes ? bytes : 1);
}

void *sl_aligned_malloc(size_t bytes)
{
    size_t n = sl_align_up(bytes ? bytes : 1);
    return injected_failure() ? NULL : aligned_alloc(SL_ALIGN, n);
}

char *sl_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = sl_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void sl_free(void *p) { free(p); }
