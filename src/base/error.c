/*
 * error.c — the thread-local error message behind sl_last_error() and the
 * names of status codes, and how a message quotes bytes from a file:
 * UTF-8 checked, anything unprintable escaped (base stage).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

static _Thread_local char last_error[1024] = "no error";
static _Thread_local sl_status last_status = SL_OK;

static sl_status record(sl_status status, const char *fmt, va_list ap)
{
    char buf[sizeof last_error];
    vsnprintf(buf, sizeof buf, fmt, ap); /* buf may embed last_error */
    memcpy(last_error, buf, sizeof buf);
    last_status = status;
    return status;
}

sl_status sl_set_error(sl_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(status, fmt, ap);
    va_end(ap);
    return status;
}

sl_status sl_error_status(void) { return last_status; }

const char *sl_last_error(void) { return last_error; }

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

size_t sl_utf8_char(const uint8_t *s, size_t n, uint32_t *cp_out)
{
    if (n == 0)
        return 0;
    uint8_t c = s[0];
    size_t k;
    uint32_t cp, min;
    if (c < 0x80)
        k = 0, cp = c, min = 0;
    else if ((c & 0xE0) == 0xC0)
        k = 1, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
        k = 2, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
        k = 3, cp = c & 0x07, min = 0x10000;
    else
        return 0; /* a continuation byte, or 0xF8..0xFF */
    if (n <= k)
        return 0;
    for (size_t j = 1; j <= k; j++) {
        if ((s[j] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[j] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    if (cp_out)
        *cp_out = cp;
    return k + 1;
}

void sl_printable(char *buf, size_t size, const void *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const uint8_t *p = s;
    size_t at = 0;
    if (!size)
        return;
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        size_t len = sl_utf8_char(p + i, n - i, &cp);
        char tmp[8];
        size_t k = 0;
        if (len == 0) { /* not UTF-8: the byte as \xHH */
            tmp[0] = '\\', tmp[1] = 'x', tmp[2] = hex[p[i] >> 4], tmp[3] = hex[p[i] & 15];
            k = 4, len = 1;
        } else if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) { /* C0 and C1 controls, DEL */
            memcpy(tmp, "\\u00", 4);
            tmp[4] = hex[cp >> 4], tmp[5] = hex[cp & 15];
            k = 6;
        } else if (cp == '\\') {
            tmp[0] = tmp[1] = '\\';
            k = 2;
        } else {
            memcpy(tmp, p + i, len);
            k = len;
        }
        if (at + k + 4 > size) { /* room for "..." and the NUL */
            snprintf(buf + at, size - at, "%s", size - at > 3 ? "..." : "");
            return;
        }
        memcpy(buf + at, tmp, k);
        at += k;
        i += len;
    }
    buf[at] = '\0';
}
