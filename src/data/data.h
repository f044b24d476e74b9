/*
 * data.h — internal pieces of the datasets (src/data): the synthetic
 * generator (synthetic.c), the image files' readers (image_files.c), the
 * fields of the public sl_dataset that dataset.c builds from either, and
 * the layout of a token shard (tokens.c).
 */
#ifndef SL_DATA_H
#define SL_DATA_H

#include <stdint.h>

#include "sublinear.h"

/* ---- synthetic.c ---- */

typedef struct sl_synthetic sl_synthetic;

/* The generator of sl_dataset_synthetic (same arguments and errors; out
 * is checked by the caller). */
sl_status sl_synthetic_create(int num_classes, int channels, int height, int width,
                              uint64_t seed, sl_synthetic **out);
void sl_synthetic_free(sl_synthetic *s);
/* Samples index .. index + n - 1 of a split (arguments checked by the
 * caller, except the index range). */
sl_status sl_synthetic_batch(const sl_synthetic *s, sl_split split, int64_t index, int n,
                             float *x, int *labels);
/* Distinct sample indices of a split (2^62). */
int64_t sl_synthetic_samples(void);

/* ---- image_files.c ---- */

/* One split of images read from files. */
typedef struct sl_image_split {
    int64_t count;    /* images; 0 when the split has no files */
    uint8_t *pixels;  /* count x stored_channels x h x w, planar per image */
    uint8_t *labels;  /* count */
    int64_t *order;   /* training order (a seeded shuffle), NULL for test */
} sl_image_split;

/* Images from files, as stored, with the normalisation of their dataset. */
typedef struct sl_image_files {
    int stored_channels, h, w;
    sl_image_split split[2]; /* indexed by sl_split */
    float mean[3], std[3];
} sl_image_files;

/* Read a whole MNIST or CIFAR-10 directory into *f (zeroed first) and
 * shuffle its training split with seed. On failure the error is recorded,
 * *f is freed and zeroed. */
sl_status sl_image_files_mnist(const char *dir, uint64_t seed, sl_image_files *f);
sl_status sl_image_files_cifar10(const char *dir, uint64_t seed, sl_image_files *f);
void sl_image_files_free(sl_image_files *f);

/* ---- tokens.c: llm.c's token shard, read there and written by
 * text/token_shard_write.c ---- */

#define SL_SHARD_MAGIC 20240520
#define SL_SHARD_VERSION 1
#define SL_SHARD_HEADER_INTS 256
#define SL_SHARD_HEADER_BYTES (SL_SHARD_HEADER_INTS * 4)

#endif
