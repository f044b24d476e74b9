/*
 * file.c — reading a file whole (base stage): the one reader of the
 * loaders (model and snapshot files, io), the image datasets (data) and the
 * tokenizer's vocabulary (text).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"

sl_status sl_read_whole_file(const char *path, const char *fn, uint8_t **data, size_t *bytes)
{
    if (!path)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: path is NULL", fn);
    FILE *f = fopen(path, "rb");
    if (!f)
        return sl_set_error(SL_ERR_IO, "%s: cannot open '%s': %s", fn, path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return sl_set_error(SL_ERR_IO, "%s: '%s' is not a regular file", fn, path);
    }
    size_t n = (size_t)sb.st_size;
    uint8_t *buf = sl_malloc(n + 1); /* + a NUL, for text files */
    if (!buf) {
        fclose(f);
        return sl_set_error(SL_ERR_NOMEM, "%s: out of memory reading '%s' (%zu bytes)", fn, path, n);
    }
    size_t got = fread(buf, 1, n, f);
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (got != n) {
        free(buf);
        if (err)
            return sl_set_error(SL_ERR_IO, "%s: reading '%s' failed: %s", fn, path, strerror(err));
        return sl_set_error(SL_ERR_IO, "%s: '%s' shrank while being read", fn, path);
    }
    buf[n] = '\0';
    *data = buf;
    *bytes = n;
    return SL_OK;
}
