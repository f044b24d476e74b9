/*
 * fuzz_file.h — for fuzz targets of loaders that read a path: one
 * scratch file per process, rewritten with each input. The loaders read
 * files whole, so a file in the temporary directory costs a write and a
 * read per input, and they are exercised through their public entry
 * point, file checks included.
 */
#ifndef SL_FUZZ_FILE_H
#define SL_FUZZ_FILE_H

/* Needs POSIX.1-2008 (mkstemp, pwrite): the including file defines
 * _POSIX_C_SOURCE 200809L before its first #include. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

static char g_fuzz_path[4096];
static int g_fuzz_fd = -1;

static void fuzz_file_remove(void)
{
    if (g_fuzz_fd >= 0)
        unlink(g_fuzz_path);
}

/* The scratch file's path, holding data[0, size) (aborts when it cannot:
 * a fuzzer without its file tests nothing). */
static inline const char *fuzz_file_write(const uint8_t *data, size_t size)
{
    if (g_fuzz_fd < 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(g_fuzz_path, sizeof g_fuzz_path, "%s/sl_fuzz_XXXXXX", dir && *dir ? dir : "/tmp");
        g_fuzz_fd = mkstemp(g_fuzz_path);
        if (g_fuzz_fd < 0)
            abort();
        atexit(fuzz_file_remove);
    }
    if (ftruncate(g_fuzz_fd, 0) != 0)
        abort();
    size_t at = 0;
    while (at < size) {
        ssize_t n = pwrite(g_fuzz_fd, data + at, size - at, (off_t)at);
        if (n <= 0)
            abort();
        at += (size_t)n;
    }
    return g_fuzz_path;
}

#endif
