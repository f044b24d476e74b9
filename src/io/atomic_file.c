/*
 * atomic_file.c — writing a file so that a crash or an error never leaves
 * a half-written one (io stage): write a temporary file in the target's
 * directory (mkstemp), flush and fsync it, rename it over the target, and
 * fsync the directory so the rename itself is durable. Any failure removes
 * the temporary file and leaves a previous file at the target intact. A
 * writer holds an flock on its temporary file while it lives, so the
 * temporary files a killed writer left behind (".<name>.tmp.XXXXXX",
 * unlocked) are recognised and removed by the next save of the same
 * target.
 */
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors.h"

/* Tests only (sl_atomic_test_fail_after): bytes a file may receive before
 * a write fails; negative means never. */
static long long fail_after_bytes = -1;
static int fail_errno = EIO;

void sl_atomic_test_fail_after(long long bytes) { fail_after_bytes = bytes; }
void sl_atomic_test_fail_errno(int err) { fail_errno = err; }

static void release(sl_atomic_file *af)
{
    if (af->dir_fd >= 0)
        close(af->dir_fd);
    sl_free(af->path);
    sl_free(af->tmp);
    af->path = af->tmp = NULL;
    af->file = NULL;
    af->dir_fd = -1;
}

/* A name "." + base + ".tmp." + 6 characters: a temporary file of base. */
static int is_temp_of(const char *name, const char *base)
{
    size_t nb = strlen(base);
    return name[0] == '.' && strncmp(name + 1, base, nb) == 0 &&
           strncmp(name + 1 + nb, ".tmp.", 5) == 0 && strlen(name + 1 + nb + 5) == 6;
}

/* Removes the temporary files of `base` in the directory that no live
 * writer holds (its flock would be taken). Best effort: a directory that
 * cannot be listed keeps them. Returns how many it removed. */
static int remove_stale_temps(int dir_fd, const char *base)
{
    int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    int removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!is_temp_of(e->d_name, base))
            continue;
        int t = openat(dir_fd, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (t < 0)
            continue;
        struct stat sb;
        if (fstat(t, &sb) == 0 && S_ISREG(sb.st_mode) && flock(t, LOCK_EX | LOCK_NB) == 0)
            removed += unlinkat(dir_fd, e->d_name, 0) == 0;
        close(t);
    }
    closedir(d);
    return removed;
}

/* mkstemp, then the lock; a cleaner that removed the file between the two
 * (it saw it unlocked) makes us try again. */
static int create_locked_temp(sl_atomic_file *af)
{
    size_t n = strlen(af->tmp);
    for (int attempt = 0; attempt < 8; attempt++) {
        memcpy(af->tmp + n - 6, "XXXXXX", 6);
        int fd = mkstemp(af->tmp);
        if (fd < 0)
            return -1;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno != ENOLCK && errno != EINVAL &&
            errno != EOPNOTSUPP) {
            close(fd);
            unlink(af->tmp);
            continue;
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(af->tmp, &b) == 0 && a.st_ino == b.st_ino &&
            a.st_dev == b.st_dev)
            return fd;
        close(fd);
    }
    errno = EAGAIN;
    return -1;
}

sl_status sl_atomic_open(sl_atomic_file *af, const char *path, const char *fn)
{
    memset(af, 0, sizeof *af);
    af->dir_fd = -1;
    af->fn = fn;
    if (!path || !path[0])
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: path is NULL or empty", fn);
    size_t n = strlen(path);
    if (path[n - 1] == '/')
        return sl_set_error(SL_ERR_IO, "%s: '%s' names a directory, not a file", fn, path);
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    af->path = sl_strdup(path);
    af->tmp = sl_malloc(n + 16);
    if (!af->path || !af->tmp) {
        release(af);
        return sl_set_error(SL_ERR_NOMEM, "%s: out of memory", fn);
    }
    /* The directory stays open: the commit syncs it without allocating. */
    snprintf(af->tmp, n + 16, "%.*s", dir_len ? (int)dir_len : 1, dir_len ? path : ".");
    af->dir_fd = open(af->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (af->dir_fd < 0) {
        int err = errno;
        sl_status st = sl_set_error(SL_ERR_IO, "%s: cannot create a file in directory '%s' to save "
                                    "'%s': %s", fn, af->tmp, path, strerror(err));
        release(af);
        return st;
    }
    remove_stale_temps(af->dir_fd, path + dir_len);
    /* "<dir>/.<name>.tmp.XXXXXX": hidden, and on the target's file system
     * so that rename() is atomic. */
    snprintf(af->tmp, n + 16, "%.*s.%s.tmp.XXXXXX", (int)dir_len, path, path + dir_len);
    int fd = create_locked_temp(af);
    if (fd < 0) {
        int err = errno;
        sl_status st = sl_set_error(SL_ERR_IO, "%s: cannot create a file in directory '%.*s' to save "
                                    "'%s': %s", fn, dir_len ? (int)dir_len : 1,
                                    dir_len ? path : ".", path, strerror(err));
        release(af);
        return st;
    }
    /* mkstemp makes the file private (0600); a saved model is an ordinary
     * file: keep the mode of the file it replaces, else rw-r--r--. */
    struct stat old;
    af->had_previous = stat(path, &old) == 0;
    if (fchmod(fd, af->had_previous ? (old.st_mode & 07777) : 0644) != 0) {
        /* a file system without modes: the file keeps mkstemp's */
    }
    /* On a descriptor mkstemp opened for reading and writing, fdopen "wb"
     * fails only when the C library cannot allocate the stream; its errno
     * is then not always set (a stale ENOENT from the stat above was seen
     * instead), so the status and message say memory whatever errno is. */
    af->file = fdopen(fd, "wb");
    if (!af->file) {
        close(fd);
        unlink(af->tmp);
        release(af);
        return sl_set_error(SL_ERR_NOMEM, "%s: out of memory for the stream that writes '%s'", fn,
                            path);
    }
    return SL_OK;
}

/* The message of a failed write, flush, sync or close. */
static sl_status write_error(const sl_atomic_file *af, const char *step, int err, int injected)
{
    if ((err == ENOSPC || err == EDQUOT) && af->had_previous)
        return sl_set_error(SL_ERR_IO,
                            "%s: %s '%s' failed after %llu of %llu bytes%s: %s. A save writes a "
                            "whole second copy next to the previous file before replacing it, so "
                            "the disk needs room for both; the previous file is unchanged",
                            af->fn, step, af->path, (unsigned long long)af->written,
                            (unsigned long long)af->expected_bytes,
                            injected ? " (simulated failure)" : "", strerror(err));
    if (err == ENOSPC || err == EDQUOT)
        return sl_set_error(SL_ERR_IO,
                            "%s: %s '%s' failed after %llu of %llu bytes%s: %s; the disk needs "
                            "room for the whole file, and nothing is left at that path",
                            af->fn, step, af->path, (unsigned long long)af->written,
                            (unsigned long long)af->expected_bytes,
                            injected ? " (simulated failure)" : "", strerror(err));
    return sl_set_error(SL_ERR_IO, "%s: %s '%s' failed after %llu bytes%s: %s; %s", af->fn, step,
                        af->path, (unsigned long long)af->written,
                        injected ? " (simulated failure)" : "", strerror(err),
                        af->had_previous ? "the previous file there is unchanged"
                                         : "nothing is left at that path");
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
    errno = 0;
    size_t done = allowed ? fwrite(data, 1, allowed, af->file) : 0;
    af->written += done;
    if (done == allowed && !injected)
        return SL_OK;
    return write_error(af, "writing", injected ? fail_errno : errno ? errno : EIO, injected);
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
    int closed = fclose(f) == 0; /* also releases the lock, after the data is safe */
    af->file = NULL;
    if (ok && !closed) {
        step = "closing";
        err = errno;
        ok = 0;
    }
    if (!ok) {
        sl_status st = write_error(af, step, err, 0);
        unlink(af->tmp);
        release(af);
        return st;
    }
    if (rename(af->tmp, af->path) != 0) {
        err = errno;
        sl_status st = sl_set_error(SL_ERR_IO, "%s: renaming the temporary file over '%s' failed: "
                                    "%s; any previous file there is unchanged", af->fn, af->path,
                                    strerror(err));
        unlink(af->tmp);
        release(af);
        return st;
    }
    /* Makes the rename durable. Some file systems cannot fsync a
     * directory (EINVAL); the data itself is synced by then. */
    err = fsync(af->dir_fd) == 0 || errno == EINVAL ? 0 : errno;
    sl_status st = SL_OK;
    if (err)
        st = sl_set_error(SL_ERR_IO, "%s: '%s' is written, but syncing its directory failed: %s",
                          af->fn, af->path, strerror(err));
    release(af);
    return st;
}

void sl_atomic_abort(sl_atomic_file *af)
{
    if (af->file) {
        fclose(af->file);
        unlink(af->tmp);
    }
    release(af);
}
