/*
 * image_files.c — MNIST (IDX) and CIFAR-10 (binary) readers behind
 * sl_dataset_mnist and sl_dataset_cifar10 (src/data; dataset.c makes the
 * public object). Files are read whole and checked before anything is
 * kept: a wrong magic number, a count the file is too short or too long
 * for, a label out of range or a gzip file that was not unpacked each get
 * a message naming the file.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "data/data.h"

enum {
    IDX_IMAGES_MAGIC = 0x00000803,
    IDX_LABELS_MAGIC = 0x00000801,
    CIFAR_PIXELS = 3 * 32 * 32,
    CIFAR_RECORD = 1 + CIFAR_PIXELS,
    DATA_CLASSES = 10,
};

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads a whole regular file (sl_read_whole_file) and refuses a gzip one.
 * Returns 0, or -1 with a message. */
static int read_whole(const char *path, uint8_t **data, size_t *size)
{
    *data = NULL;
    if (sl_read_whole_file(path, "dataset", data, size) != SL_OK)
        return -1;
    if (*size >= 2 && (*data)[0] == 0x1f && (*data)[1] == 0x8b) {
        sl_set_error(SL_ERR_FORMAT, "%s is gzip-compressed: unpack it first (gunzip)", path);
        sl_free(*data);
        *data = NULL;
        return -1;
    }
    return 0;
}

/* Checks an IDX header; returns the item count or -1 with a message. */
static int64_t idx_header(const char *path, const uint8_t *d, size_t size, uint32_t magic,
                          size_t header)
{
    if (size < header) {
        sl_set_error(SL_ERR_FORMAT, "%s is truncated: %zu bytes, shorter than the %zu-byte IDX header", path,
                 size, header);
        return -1;
    }
    uint32_t m = be32(d);
    if (m != magic) {
        sl_set_error(SL_ERR_FORMAT, "%s is not an IDX %s file: magic 0x%08x, expected 0x%08x%s", path,
                 magic == IDX_IMAGES_MAGIC ? "image" : "label", (unsigned)m, (unsigned)magic,
                 m == IDX_IMAGES_MAGIC   ? " (this is an image file)"
                 : m == IDX_LABELS_MAGIC ? " (this is a label file)"
                                         : "");
        return -1;
    }
    int64_t count = be32(d + 4);
    if (count == 0) {
        sl_set_error(SL_ERR_FORMAT, "%s holds no items", path);
        return -1;
    }
    return count;
}

/* The items after an IDX header of `header` bytes, kept in place as
 * *items (count of them); with count <= 0 (a refused file) the file's
 * bytes are freed and -1 returned. */
static int keep_items(uint8_t *d, size_t size, size_t header, int64_t count, uint8_t **items,
                      int64_t *n)
{
    if (count <= 0) {
        sl_free(d);
        return -1;
    }
    memmove(d, d + header, size - header);
    *items = d;
    *n = count;
    return 0;
}

static int read_idx_images(const char *path, sl_image_split *s, int *h, int *w)
{
    uint8_t *d;
    size_t size;
    if (read_whole(path, &d, &size) != 0)
        return -1;
    int64_t count = idx_header(path, d, size, IDX_IMAGES_MAGIC, 16);
    uint32_t rows = count > 0 ? be32(d + 8) : 0, cols = count > 0 ? be32(d + 12) : 0;
    uint64_t want = 16 + (uint64_t)count * rows * cols;
    if (count > 0 && (rows < 8 || rows > 4096 || cols != rows)) {
        sl_set_error(SL_ERR_FORMAT, "%s: images of %ux%u; square images of 8x8 to 4096x4096 are supported",
                 path, (unsigned)rows, (unsigned)cols);
        count = -1;
    } else if (count > 0 && want != size) {
        sl_set_error(SL_ERR_FORMAT, "%s is %s: the header promises %lld images of %ux%u (%llu bytes), the "
                 "file has %zu bytes", path, size < want ? "truncated" : "too long",
                 (long long)count, (unsigned)rows, (unsigned)cols, (unsigned long long)want, size);
        count = -1;
    }
    if (keep_items(d, size, 16, count, &s->pixels, &s->count) != 0)
        return -1;
    *h = (int)rows;
    *w = (int)cols;
    return 0;
}

static int read_idx_labels(const char *path, sl_image_split *s)
{
    uint8_t *d;
    size_t size;
    if (read_whole(path, &d, &size) != 0)
        return -1;
    int64_t count = idx_header(path, d, size, IDX_LABELS_MAGIC, 8);
    if (count > 0 && (uint64_t)count + 8 != size) {
        sl_set_error(SL_ERR_FORMAT, "%s is %s: the header promises %lld labels, the file has %zu bytes of "
                 "labels", path, size < (uint64_t)count + 8 ? "truncated" : "too long",
                 (long long)count, size - 8);
        count = -1;
    }
    for (int64_t i = 0; count > 0 && i < count; i++)
        if (d[8 + i] >= DATA_CLASSES) {
            sl_set_error(SL_ERR_FORMAT, "%s: label %u of item %lld is not a class 0-9", path, d[8 + i],
                     (long long)i);
            count = -1;
        }
    return keep_items(d, size, 8, count, &s->labels, &s->count);
}

static int read_cifar_batch(const char *path, sl_image_split *s)
{
    uint8_t *d;
    size_t size;
    if (read_whole(path, &d, &size) != 0)
        return -1;
    int64_t records = (int64_t)(size / CIFAR_RECORD);
    int ok = 0;
    if (size == 0 || size % CIFAR_RECORD != 0)
        sl_set_error(SL_ERR_FORMAT, "%s: %zu bytes is not a whole number of %d-byte CIFAR-10 records "
                 "(truncated, or not the binary version of CIFAR-10)", path, size, CIFAR_RECORD);
    else
        ok = 1;
    for (int64_t i = 0; ok && i < records; i++)
        if (d[i * CIFAR_RECORD] >= DATA_CLASSES) {
            sl_set_error(SL_ERR_FORMAT, "%s: record %lld has label %u: not a CIFAR-10 batch (CIFAR-100's "
                     "records carry two label bytes)", path, (long long)i, d[i * CIFAR_RECORD]);
            ok = 0;
        }
    uint8_t *px = ok ? sl_realloc(s->pixels, (size_t)(s->count + records) * CIFAR_PIXELS) : NULL;
    if (px)
        s->pixels = px;
    uint8_t *lb = px ? sl_realloc(s->labels, (size_t)(s->count + records)) : NULL;
    if (lb)
        s->labels = lb;
    if (ok && (!px || !lb)) {
        sl_set_error(SL_ERR_NOMEM, "out of memory reading %s", path);
        ok = 0;
    }
    for (int64_t i = 0; ok && i < records; i++) {
        const uint8_t *rec = d + i * CIFAR_RECORD;
        s->labels[s->count + i] = rec[0];
        memcpy(s->pixels + (size_t)(s->count + i) * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS);
    }
    if (ok)
        s->count += records;
    sl_free(d);
    return ok ? 0 : -1;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The first of names that exists in dir, written to path; -1 if none. */
static int find_file(const char *dir, const char *const *names, char *path, size_t size)
{
    for (; *names; names++) {
        snprintf(path, size, "%s/%s", dir, *names);
        if (exists(path))
            return 0;
    }
    return -1;
}

static int open_mnist_split(const char *dir, int test, sl_image_files *d)
{
    static const char *const train_images[] = {"train-images-idx3-ubyte", "train-images.idx3-ubyte", NULL};
    static const char *const train_labels[] = {"train-labels-idx1-ubyte", "train-labels.idx1-ubyte", NULL};
    static const char *const test_images[] = {"t10k-images-idx3-ubyte", "t10k-images.idx3-ubyte", NULL};
    static const char *const test_labels[] = {"t10k-labels-idx1-ubyte", "t10k-labels.idx1-ubyte", NULL};
    char ipath[4096], lpath[4096];
    int have_i = find_file(dir, test ? test_images : train_images, ipath, sizeof ipath) == 0;
    int have_l = find_file(dir, test ? test_labels : train_labels, lpath, sizeof lpath) == 0;
    if (test && !have_i && !have_l)
        return 0; /* no test split: training still works */
    if (!have_i || !have_l) {
        const char *missing = !have_i ? (test ? test_images[0] : train_images[0])
                                      : (test ? test_labels[0] : train_labels[0]);
        sl_set_error(SL_ERR_NOT_FOUND, "MNIST: %s/%s not found%s (the uncompressed IDX files are needed: "
                 "train-images-idx3-ubyte, train-labels-idx1-ubyte, optionally t10k-*)", dir,
                 missing, exists(dir) ? "" : " (no such directory)");
        return -1;
    }
    sl_image_split *s = &d->split[test ? SL_SPLIT_TEST : SL_SPLIT_TRAIN];
    sl_image_split labels = {0};
    int h, w;
    if (read_idx_images(ipath, s, &h, &w) != 0 ||
        read_idx_labels(lpath, &labels) != 0)
        return -1;
    s->labels = labels.labels;
    if (labels.count != s->count) {
        sl_set_error(SL_ERR_FORMAT, "MNIST: %s has %lld labels for the %lld images of %s", lpath,
                 (long long)labels.count, (long long)s->count, ipath);
        return -1;
    }
    if (test && (h != d->h || w != d->w)) {
        sl_set_error(SL_ERR_FORMAT, "MNIST: %s holds %dx%d images, the training images are %dx%d", ipath, h,
                 w, d->h, d->w);
        return -1;
    }
    d->h = h;
    d->w = w;
    return 0;
}

static int open_mnist(const char *dir, sl_image_files *d)
{
    d->stored_channels = 1;
    for (int c = 0; c < 3; c++) {
        d->mean[c] = 0.1307f;
        d->std[c] = 0.3081f;
    }
    return open_mnist_split(dir, 0, d) || open_mnist_split(dir, 1, d) ? -1 : 0;
}

static int open_cifar10(const char *dir_arg, sl_image_files *d)
{
    static const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, std[3] = {0.2470f, 0.2435f, 0.2616f};
    char dir[4096], path[4200];
    /* Accept the directory of the archive as well as the one it unpacks to. */
    snprintf(dir, sizeof dir, "%s/cifar-10-batches-bin", dir_arg);
    if (!exists(dir))
        snprintf(dir, sizeof dir, "%s", dir_arg);
    d->stored_channels = 3;
    d->h = d->w = 32;
    memcpy(d->mean, mean, sizeof mean);
    memcpy(d->std, std, sizeof std);
    for (int b = 1; b <= 5; b++) {
        snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, b);
        if (exists(path) && read_cifar_batch(path, &d->split[SL_SPLIT_TRAIN]) != 0)
            return -1;
    }
    if (d->split[SL_SPLIT_TRAIN].count == 0) {
        sl_set_error(SL_ERR_NOT_FOUND, "CIFAR-10: no data_batch_1.bin .. data_batch_5.bin in %s%s (the binary "
                 "version, cifar-10-binary.tar.gz, unpacked)", dir_arg,
                 exists(dir_arg) ? "" : " (no such directory)");
        return -1;
    }
    snprintf(path, sizeof path, "%s/test_batch.bin", dir);
    if (exists(path) && read_cifar_batch(path, &d->split[SL_SPLIT_TEST]) != 0)
        return -1;
    return 0;
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A seeded Fisher-Yates shuffle of the training split. */
static int shuffle(sl_image_split *s, uint64_t seed)
{
    s->order = sl_malloc((size_t)s->count * sizeof *s->order);
    if (!s->order) {
        sl_set_error(SL_ERR_NOMEM, "out of memory shuffling %lld images", (long long)s->count);
        return -1;
    }
    for (int64_t i = 0; i < s->count; i++)
        s->order[i] = i;
    uint64_t state = seed;
    for (int64_t i = s->count - 1; i > 0; i--) {
        int64_t j = (int64_t)(splitmix64(&state) % (uint64_t)(i + 1));
        int64_t t = s->order[i];
        s->order[i] = s->order[j];
        s->order[j] = t;
    }
    return 0;
}

void sl_image_files_free(sl_image_files *f)
{
    for (int i = 0; i < 2; i++) {
        sl_free(f->split[i].pixels);
        sl_free(f->split[i].labels);
        sl_free(f->split[i].order);
    }
    memset(f, 0, sizeof *f);
}

static sl_status finish(int rc, uint64_t seed, sl_image_files *f)
{
    if (!rc)
        rc = shuffle(&f->split[SL_SPLIT_TRAIN], seed);
    if (!rc)
        return SL_OK;
    sl_status st = sl_error_status();
    sl_image_files_free(f);
    return st != SL_OK ? st : SL_ERR_FORMAT;
}

sl_status sl_image_files_mnist(const char *dir, uint64_t seed, sl_image_files *f)
{
    memset(f, 0, sizeof *f);
    return finish(open_mnist(dir, f), seed, f);
}

sl_status sl_image_files_cifar10(const char *dir, uint64_t seed, sl_image_files *f)
{
    memset(f, 0, sizeof *f);
    return finish(open_cifar10(dir, f), seed, f);
}
