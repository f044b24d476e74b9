/*
 * error.c — the thread-local error message behind sl_last_error(), and
 * allocation helpers that turn a failed malloc into a readable error.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static _Thread_local char last_error[1024] = "no error";

sl_status sl_fail(sl_status status, const char *fmt, ...)
{
    char buf[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap); /* buf may embed last_error */
    va_end(ap);
    memcpy(last_error, buf, sizeof buf);
    return status;
}

const char *sl_last_error(void) { return last_error; }
const char *sl_error_message(void) { return last_error; }

const char *sl_status_name(sl_status status)
{
    switch (status) {
    case SL_OK: return "SL_OK";
    case SL_ERR_INVALID_ARG: return "SL_ERR_INVALID_ARG";
    case SL_ERR_SHAPE: return "SL_ERR_SHAPE";
    case SL_ERR_NOMEM: return "SL_ERR_NOMEM";
    case SL_ERR_IO: return "SL_ERR_IO";
    case SL_ERR_FORMAT: return "SL_ERR_FORMAT";
    case SL_ERR_NOT_FOUND: return "SL_ERR_NOT_FOUND";
    case SL_ERR_BUDGET: return "SL_ERR_BUDGET";
    case SL_ERR_STATE: return "SL_ERR_STATE";
    case SL_ERR_BACKEND: return "SL_ERR_BACKEND";
    case SL_ERR_UNSUPPORTED: return "SL_ERR_UNSUPPORTED";
    }
    return "SL_ERR_UNKNOWN";
}

void *sl_alloc(size_t bytes, const char *what)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        sl_fail(SL_ERR_NOMEM, "out of memory allocating %zu bytes for %s", bytes, what);
    return p;
}

void *sl_zalloc(size_t bytes, const char *what)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p)
        sl_fail(SL_ERR_NOMEM, "out of memory allocating %zu bytes for %s", bytes, what);
    return p;
}

void *sl_aligned_zalloc(size_t bytes, const char *what)
{
    size_t n = sl_align_up(bytes ? bytes : 1);
    void *p = aligned_alloc(SL_ALIGN, n);
    if (!p) {
        sl_fail(SL_ERR_NOMEM, "out of memory allocating %zu bytes for %s", bytes, what);
        return NULL;
    }
    memset(p, 0, n);
    return p;
}

void sl_aligned_free(void *p) { free(p); }

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
