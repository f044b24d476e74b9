/*
 * datasets.h — the image sources `sublinear train` reads: the library's
 * built-in synthetic dataset, MNIST in its IDX files and CIFAR-10 in its
 * binary version. File readers validate the whole file when they open it
 * (magic, counts, sizes, labels) and fail with a message that names the
 * file and the problem; nothing is read lazily.
 *
 * Every source yields 3-channel float images: MNIST's grey images are
 * repeated into 3 equal channels, because the model builders make networks
 * with 3 input channels and an RGB network then takes MNIST unchanged.
 * Pixels are scaled to [0, 1] and normalised with the dataset's usual mean
 * and standard deviation per channel.
 */
#ifndef SL_CLI_DATASETS_H
#define SL_CLI_DATASETS_H

#include <stddef.h>
#include <stdint.h>

#include "sublinear.h"

typedef struct cli_split {
    int64_t count;    /* images; 0 when the split has no files */
    uint8_t *pixels;  /* count x channels x h x w, planar per image */
    uint8_t *labels;  /* count */
    int64_t *order;   /* training order (a seeded shuffle), NULL for test */
} cli_split;

typedef struct cli_data {
    const char *name;       /* "synthetic", "mnist", "cifar10" */
    int classes;
    int channels, h, w;     /* of the stored images (MNIST: 1) */
    cli_split split[2];     /* indexed by sl_split */
    sl_dataset *synthetic;  /* the built-in dataset, else NULL */
    float mean[3], std[3];
} cli_data;

/* Opens a source. kind is "synthetic", "mnist" or "cifar10"; dir the
 * directory of the files (ignored for synthetic); classes and res apply to
 * synthetic only. On failure returns -1 with a message in err and leaves
 * *d empty (cli_data_free is still safe). */
int cli_data_open(const char *kind, const char *dir, int classes, int res, uint64_t seed,
                  cli_data *d, char *err, size_t err_size);

/* Whether a split has samples (synthetic: always). */
int cli_data_has(const cli_data *d, sl_split split);

/* Fills x (n x 3 x h x w floats) and labels (n) with samples index ..
 * index + n - 1 of a split; file splits wrap around (epochs). */
sl_status cli_data_batch(const cli_data *d, sl_split split, int64_t index, int n, float *x,
                         int *labels);

void cli_data_free(cli_data *d);

/* The readers, by file (also used by the tests through the command):
 * an IDX image file (magic 0x00000803: count, rows, cols, uint8 pixels)
 * and an IDX label file (magic 0x00000801), both big-endian; a CIFAR-10
 * binary batch (records of 1 label byte and 3072 pixel bytes), appended to
 * s. Return 0, or -1 with a message in err. */
int cli_read_idx_images(const char *path, cli_split *s, int *h, int *w, char *err, size_t n);
int cli_read_idx_labels(const char *path, cli_split *s, char *err, size_t n);
int cli_read_cifar_batch(const char *path, cli_split *s, char *err, size_t n);

#endif
