/*
 * dataset.c — the public dataset object (src/data): the built-in synthetic
 * set (synthetic.c), MNIST and CIFAR-10 read from their files
 * (image_files.c), one batch call for all three.
 *
 * Stage: data, outside the pipeline; it feeds sl_net_train_step, the `sublinear`
 * command, the tests, benches and examples. File sets give 3-channel
 * float images by default (MNIST's grey images repeated into 3 equal
 * channels, so RGB networks take them unchanged), pixels scaled to [0, 1]
 * and normalised with the dataset's usual mean and standard deviation.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "data/data.h"

struct sl_dataset {
    sl_dataset_info info;
    sl_synthetic *synthetic; /* the built-in set, else NULL */
    sl_image_files files;    /* the file sets */
};

sl_status sl_dataset_synthetic(int num_classes, int channels, int height, int width,
                               uint64_t seed, sl_dataset **out)
{
    if (!out)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_dataset_synthetic: out is NULL");
    sl_dataset *ds = sl_zalloc(sizeof *ds, "synthetic dataset");
    if (!ds)
        return SL_ERR_NOMEM;
    sl_status st = sl_synthetic_create(num_classes, channels, height, width, seed, &ds->synthetic);
    if (st != SL_OK) {
        sl_free(ds);
        return st;
    }
    ds->info = (sl_dataset_info){"synthetic", num_classes, channels, height, width,
                                 {sl_synthetic_samples(), sl_synthetic_samples()}};
    *out = ds;
    return SL_OK;
}

typedef sl_status (*files_reader)(const char *dir, uint64_t seed, sl_image_files *f);

static sl_status open_files(const char *fn, const char *name, files_reader read, const char *dir,
                            int channels, uint64_t seed, sl_dataset **out)
{
    if (!out || !dir)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: %s is NULL", fn, !out ? "out" : "dir");
    if (channels != 3 && (channels != 1 || strcmp(name, "mnist") != 0))
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: channels must be %s, got %d", fn,
                            strcmp(name, "mnist") == 0 ? "1 or 3" : "3", channels);
    sl_dataset *ds = sl_zalloc(sizeof *ds, "dataset");
    if (!ds)
        return SL_ERR_NOMEM;
    sl_status st = read(dir, seed, &ds->files);
    if (st != SL_OK) {
        sl_free(ds);
        return st;
    }
    const sl_image_files *f = &ds->files;
    ds->info = (sl_dataset_info){name, 10, channels, f->h, f->w,
                                 {f->split[SL_SPLIT_TRAIN].count, f->split[SL_SPLIT_TEST].count}};
    *out = ds;
    return SL_OK;
}

sl_status sl_dataset_mnist(const char *dir, int channels, uint64_t seed, sl_dataset **out)
{
    return open_files("sl_dataset_mnist", "mnist", sl_image_files_mnist, dir, channels, seed, out);
}

sl_status sl_dataset_cifar10(const char *dir, uint64_t seed, sl_dataset **out)
{
    return open_files("sl_dataset_cifar10", "cifar10", sl_image_files_cifar10, dir, 3, seed, out);
}

void sl_dataset_free(sl_dataset *ds)
{
    if (!ds)
        return;
    sl_synthetic_free(ds->synthetic);
    sl_image_files_free(&ds->files);
    sl_free(ds);
}

sl_status sl_dataset_get_info(const sl_dataset *ds, sl_dataset_info *out)
{
    if (!ds || !out)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_dataset_get_info: %s is NULL",
                            !ds ? "dataset" : "out");
    *out = ds->info;
    return SL_OK;
}

/* Samples of a file set: stored bytes normalised per channel. */
static void files_batch(const sl_dataset *ds, sl_split split, int64_t index, int n, float *x,
                        int *labels)
{
    const sl_image_files *f = &ds->files;
    const sl_image_split *s = &f->split[split];
    int channels = ds->info.channels;
    size_t plane = (size_t)f->h * f->w;
    float scale[3], shift[3];
    for (int c = 0; c < 3; c++) {
        scale[c] = 1.0f / (255.0f * f->std[c]);
        shift[c] = -f->mean[c] / f->std[c];
    }
    for (int b = 0; b < n; b++) {
        int64_t i = (index + b) % s->count;
        if (s->order)
            i = s->order[i];
        const uint8_t *img = s->pixels + (size_t)i * f->stored_channels * plane;
        float *out = x + (size_t)b * channels * plane;
        for (int c = 0; c < channels; c++) {
            const uint8_t *src = img + (f->stored_channels == 1 ? 0 : (size_t)c * plane);
            for (size_t p = 0; p < plane; p++)
                out[(size_t)c * plane + p] = (float)src[p] * scale[c] + shift[c];
        }
        labels[b] = s->labels[i];
    }
}

sl_status sl_dataset_batch(const sl_dataset *ds, sl_split split, int64_t index, int n,
                           float *x, int *labels)
{
    if (!ds)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_dataset_batch: dataset is NULL");
    if (!x || !labels)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_dataset_batch: %s is NULL",
                            !x ? "x" : "labels");
    if (split != SL_SPLIT_TRAIN && split != SL_SPLIT_TEST)
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "sl_dataset_batch: split must be SL_SPLIT_TRAIN or SL_SPLIT_TEST, "
                            "got %d", (int)split);
    if (n <= 0)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_dataset_batch: n must be >= 1, got %d", n);
    if (ds->synthetic)
        return sl_synthetic_batch(ds->synthetic, split, index, n, x, labels);
    if (index < 0)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_dataset_batch: index must be >= 0, got %lld",
                            (long long)index);
    if (ds->info.samples[split] == 0)
        return sl_set_error(SL_ERR_NOT_FOUND, "sl_dataset_batch: this %s set has no %s split "
                            "(its files were not found)", ds->info.name,
                            split == SL_SPLIT_TEST ? "test" : "training");
    files_batch(ds, split, index, n, x, labels);
    return SL_OK;
}
