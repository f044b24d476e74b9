/*
 * helpers.c — small helpers every stage uses (base stage): allocations
 * that turn a failed malloc into a readable error, dotted names, the
 * thread count a context resolves to, and a monotonic clock.
 */
#define _POSIX_C_SOURCE 199309L
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"

void *sl_alloc(size_t bytes, const char *what)
{
    void *p = sl_malloc(bytes);
    if (!p)
        sl_set_error(SL_ERR_NOMEM, "out of memory allocating %zu bytes for %s", bytes, what);
    return p;
}

void *sl_zalloc(size_t bytes, const char *what)
{
    void *p = sl_calloc(1, bytes);
    if (!p)
        sl_set_error(SL_ERR_NOMEM, "out of memory allocating %zu bytes for %s", bytes, what);
    return p;
}

void *sl_aligned_zalloc(size_t bytes, const char *what)
{
    size_t n = sl_align_up(bytes ? bytes : 1);
    void *p = sl_aligned_malloc(n);
    if (!p) {
        sl_set_error(SL_ERR_NOMEM, "out of memory allocating %zu bytes for %s", bytes, what);
        return NULL;
    }
    memset(p, 0, n);
    return p;
}

void sl_aligned_free(void *p) { free(p); }

const char *sl_shape_str(sl_shape s, char *buf)
{
    if (s.layout == SL_LAYOUT_NCHW || !sl_layout_matters(s))
        snprintf(buf, SL_SHAPE_STR, "%dx%dx%dx%d", s.n, s.c, s.h, s.w);
    else if (s.layout == SL_LAYOUT_NHWC && s.w == 1)
        snprintf(buf, SL_SHAPE_STR, "%dx%dx%d (B x T x C)", s.n, s.h, s.c);
    else if (s.layout == SL_LAYOUT_NHWC)
        snprintf(buf, SL_SHAPE_STR, "%dx%dx%dx%d (NHWC)", s.n, s.h, s.w, s.c);
    else
        snprintf(buf, SL_SHAPE_STR, "%dx%dx%dx%d (layout %d)", s.n, s.c, s.h, s.w, (int)s.layout);
    return buf;
}

void sl_join_name(char *dst, size_t n, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (n == 0)
        return;
    if (la > n - 1)
        la = n - 1;
    memmove(dst, a, la);
    size_t used = la;
    if (used < n - 1)
        dst[used++] = '.';
    if (lb > n - 1 - used)
        lb = n - 1 - used;
    memcpy(dst + used, b, lb);
    dst[used + lb] = '\0';
}

int sl_threads_resolve(int threads)
{
    if (threads > 0)
        return threads;
    int n = omp_get_num_procs();
    return n > 0 ? n : 1;
}

int sl_context_threads(const sl_context *ctx) { return sl_threads_resolve(ctx ? ctx->threads : 0); }

double sl_now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
