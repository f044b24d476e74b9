/*
 * file.c — reading a file whole (base stage): the one reader of the
 * loaders (model and snapshot files, io), the image datasets and token
 * shards (data), the tokenizer's vocabulary (text) and config.json
 * (models).
 *
 * It opens with O_NONBLOCK and looks at the file type before reading: a
 * FIFO, socket or terminal named by mistake would otherwise block forever
 * (in open for a FIFO without a writer, in read for the others). It uses
 * open and read, not stdio: a FILE is allocated by the C library, whose
 * failure would bypass the library's allocator and leave errno unset
 * ("cannot open: Success"); here the one allocation is sl_malloc's.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

static const char *file_kind(mode_t mode)
{
    return S_ISDIR(mode)    ? "a directory"
           : S_ISFIFO(mode) ? "a FIFO (named pipe)"
           : S_ISSOCK(mode) ? "a socket"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
                            : "of another kind";
}

static sl_status open_regular_file(const char *path, const char *fn, int *fd_out, size_t *bytes)
{
    if (!path)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: path is NULL", fn);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return sl_set_error(SL_ERR_IO, "%s: cannot open '%s': %s", fn, path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        return sl_set_error(SL_ERR_IO, "%s: cannot look at '%s': %s", fn, path, strerror(err));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return sl_set_error(SL_ERR_IO, "%s: '%s' is not a regular file (it is %s); only a regular "
                            "file is read", fn, path, file_kind(sb.st_mode));
    }
    /* A regular file never blocks; clear the flag all the same so that
     * reads behave as on any descriptor. */
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    *fd_out = fd;
    *bytes = (size_t)sb.st_size;
    return SL_OK;
}

sl_status sl_read_whole_file(const char *path, const char *fn, uint8_t **data, size_t *bytes)
{
    int fd = -1;
    size_t n = 0;
    sl_status st = open_regular_file(path, fn, &fd, &n);
    if (st != SL_OK)
        return st;
    uint8_t *buf = sl_malloc(n + 1); /* + a NUL, for text files */
    if (!buf) {
        close(fd);
        return sl_set_error(SL_ERR_NOMEM, "%s: out of memory reading '%s' (%zu bytes)", fn, path, n);
    }
    size_t got = 0;
    int err = 0;
    while (got < n) {
        ssize_t k = read(fd, buf + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            err = k < 0 ? errno : 0;
            break;
        }
        got += (size_t)k;
    }
    close(fd);
    if (got != n) {
        sl_free(buf);
        if (err)
            return sl_set_error(SL_ERR_IO, "%s: reading '%s' failed: %s", fn, path, strerror(err));
        return sl_set_error(SL_ERR_IO, "%s: '%s' shrank while being read", fn, path);
    }
    buf[n] = '\0';
    *data = buf;
    *bytes = n;
    return SL_OK;
}
