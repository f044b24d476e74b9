/*
 * libc_faults.c — the C library's allocator and snprintf, replaced in the
 * test program by versions that can fail on request (libc_faults.h). The
 * program's own definitions take precedence over the C library's for
 * every caller, the C library's internal calls included (glibc supports
 * replacing malloc so); when not failing they forward to glibc's own
 * implementation (__libc_malloc and friends, exported for this purpose),
 * so memory from either side may be freed by the other.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "libc_faults.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LF_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define LF_SANITIZED 1
#endif
#endif

static int malloc_armed, snprintf_fails;
static long malloc_countdown, malloc_counted;

void lf_fail_malloc_at(long n)
{
    malloc_armed = n != 0;
    malloc_countdown = n;
    malloc_counted = 0;
}

long lf_malloc_count(void) { return malloc_counted; }

void lf_fail_snprintf(int on) { snprintf_fails = on; }

#ifdef LF_SANITIZED

int lf_available(void) { return 0; }

#else

int lf_available(void) { return 1; }

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

/* 1 when this call is the one to fail. errno is left alone on purpose. */
static int fails_now(void)
{
    if (!malloc_armed)
        return 0;
    malloc_counted++;
    return malloc_countdown > 0 && --malloc_countdown == 0;
}

void *malloc(size_t n) { return fails_now() ? NULL : __libc_malloc(n); }

void *calloc(size_t n, size_t size) { return fails_now() ? NULL : __libc_calloc(n, size); }

void *realloc(void *p, size_t n) { return fails_now() ? NULL : __libc_realloc(p, n); }

int snprintf(char *buf, size_t n, const char *fmt, ...)
{
    if (snprintf_fails)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return len;
}

#endif
