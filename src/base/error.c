/*
 * error.c — the thread-local error message behind sl_last_error() and the
 * names of status codes (base stage).
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
