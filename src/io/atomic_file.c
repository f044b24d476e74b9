/*
 * atomic_file.c — writing a file so that a crash or an error never leaves
 * a half-written one: write a temporary file in the target's directory
 * (mkstemp), flush and fsync it, rename it over the target, and fsync the
 * directory so the rename itself is durable. Any failure removes the
 * temporary file and leaves a previous file at the target intact. Also
 * reads a file whole, for the loaders' staging.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors.h"

/* Tests only (sl_atomic_test_fail_after): bytes a file may receive before
 * a write fails; negative means never. */
static long long fail_after_bytes = -1;

void sl_atomic_test_fail_after(long long bytes) { fail_after_bytes = bytes; }

/* The directory part of path ("." when it has none). */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    size_t n = (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = '\0';
    }
    return d;
}

static void release(sl_atomic_file *af)
{
    free(af->path);
    free(af->tmp);
    af->path = af->tmp = NULL;
    af->file = NULL;
}

sl_status sl_atomic_open(sl_atomic_file *af, const char *path, const char *fn)
{
    memset(af, 0, sizeof *af);
    af->fn = fn;
    if (!path || !path[0])
        return sl_fail(SL_ERR_INVALID_ARG, "%s: path is NULL or empty", fn);
    size_t n = strlen(path);
    if (path[n - 1] == '/')
        return sl_fail(SL_ERR_IO, "%s: '%s' names a directory, not a file", fn, path);
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    af->path = strdup(path);
    af->tmp = malloc(n + 16);
    if (!af->path || !af->tmp) {
        release(af);
        return sl_fail(SL_ERR_NOMEM, "%s: out of memory", fn);
    }
    /* "<dir>/.<name>.tmp.XXXXXX": hidden, and on the target's file system
     * so that rename() is atomic. */
    snprintf(af->tmp, n + 16, "%.*s.%s.tmp.XXXXXX", (int)dir_len, path, path + dir_len);
    int fd = mkstemp(af->tmp);
    if (fd < 0) {
        int err = errno;
        char *dir = dir_of(path);
        sl_status st = sl_fail(SL_ERR_IO, "%s: cannot create a file in directory '%s' to save '%s': %s",
                               fn, dir ? dir : "?", path, strerror(err));
        free(dir);
        release(af);
        return st;
    }
    /* mkstemp makes the file private (0600); a saved model is an ordinary
     * file: keep the mode of the file it replaces, else rw-r--r--. */
    struct stat old;
    fchmod(fd, stat(path, &old) == 0 ? (old.st_mode & 07777) : 0644);
    af->file = fdopen(fd, "wb");
    if (!af->file) {
        int err = errno;
        close(fd);
        unlink(af->tmp);
        release(af);
        return sl_fail(SL_ERR_IO, "%s: cannot open a stream for '%s': %s", fn, path, strerror(err));
    }
    return SL_OK;
}

sl_status sl_atomic_write(sl_atomic_file *af, const void *data, size_t bytes)
{
    size_t allowed = bytes;
    int injected = 0;
    if (fail_after_bytes >= 0 && af->written + bytes > (uint64_t)fail_after_bytes) {
        allowed = af->written >= (uint64_t)fail_after_bytes
                      ? 0 : (size_t)((uint64_t)fail_after_bytes - af->written);
        injected = 1;
    }
    size_t done = allowed ? fwrite(data, 1, allowed, af->file) : 0;
    af->written += done;
    if (done == allowed && !injected)
        return SL_OK;
    int err = injected ? EIO : errno;
    sl_status st = sl_fail(SL_ERR_IO, "%s: writing '%s' failed after %llu bytes%s: %s; %s", af->fn,
                           af->path, (unsigned long long)af->written,
                           injected ? " (simulated failure)" : "", strerror(err),
                           "any previous file there is unchanged");
    return st;
}

/* Makes the rename durable. Some file systems cannot fsync a directory
 * (EINVAL); the data itself is synced by then. */
static int sync_dir(const char *path)
{
    char *dir = dir_of(path);
    if (!dir)
        return ENOMEM;
    int fd = open(dir, O_RDONLY);
    free(dir);
    if (fd < 0)
        return errno;
    int err = fsync(fd) == 0 || errno == EINVAL ? 0 : errno;
    close(fd);
    return err;
}

sl_status sl_atomic_commit(sl_atomic_file *af)
{
    FILE *f = af->file;
    const char *step = "flushing";
    int ok = fflush(f) == 0;
    if (ok) {
        step = "syncing";
        ok = fsync(fileno(f)) == 0;
    }
    int err = ok ? 0 : errno;
    int closed = fclose(f) == 0;
    af->file = NULL;
    if (ok && !closed) {
        step = "closing";
        err = errno;
        ok = 0;
    }
    if (ok) {
        step = "renaming the temporary file over";
        ok = rename(af->tmp, af->path) == 0;
        err = ok ? 0 : errno;
    }
    if (!ok) {
        sl_status st = sl_fail(SL_ERR_IO, "%s: %s '%s' failed: %s; any previous file there is "
                               "unchanged", af->fn, step, af->path, strerror(err));
        unlink(af->tmp);
        release(af);
        return st;
    }
    err = sync_dir(af->path);
    sl_status st = SL_OK;
    if (err)
        st = sl_fail(SL_ERR_IO, "%s: '%s' is written, but syncing its directory failed: %s",
                     af->fn, af->path, strerror(err));
    release(af);
    return st;
}

void sl_atomic_abort(sl_atomic_file *af)
{
    if (af->file)
        fclose(af->file);
    if (af->tmp)
        unlink(af->tmp);
    release(af);
}

sl_status sl_read_whole_file(const char *path, const char *fn, uint8_t **data, size_t *bytes)
{
    if (!path)
        return sl_fail(SL_ERR_INVALID_ARG, "%s: path is NULL", fn);
    FILE *f = fopen(path, "rb");
    if (!f)
        return sl_fail(SL_ERR_IO, "%s: cannot open '%s': %s", fn, path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return sl_fail(SL_ERR_IO, "%s: '%s' is not a regular file", fn, path);
    }
    size_t n = (size_t)sb.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return sl_fail(SL_ERR_NOMEM, "%s: out of memory reading '%s' (%zu bytes)", fn, path, n);
    }
    size_t got = fread(buf, 1, n, f);
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (got != n) {
        free(buf);
        if (err)
            return sl_fail(SL_ERR_IO, "%s: reading '%s' failed: %s", fn, path, strerror(err));
        return sl_fail(SL_ERR_IO, "%s: '%s' shrank while being read", fn, path);
    }
    *data = buf;
    *bytes = n;
    return SL_OK;
}
