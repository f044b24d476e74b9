/*
 * test_datasets.c — the library's datasets (src/data) through the public
 * API: MNIST and CIFAR-10 read from small files written here
 * (image_files.c) give the stored images normalised as documented, each
 * with its own label, the training split in a seeded permutation and the
 * test split in file order, wrapping around after an epoch; every broken
 * file (missing, truncated, too long, foreign, gzip-compressed,
 * mislabelled) is refused with its status and a message naming the file,
 * and a failed open leaves the caller's pointer as it was.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "harness.h"
#include "image_files.h"
#include "sublinear.h"

/* A directory under the scratch directory (static storage). */
static const char *dir_of(const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", cr_dir(), name);
    return path;
}

/* The class an MNIST test image shows: the column of its bar (see
 * image_files.h), read from channel c of sample b. */
static int mnist_class_shown(const float *x, int b, int channels, int c)
{
    const float *img = x + ((size_t)b * channels + (size_t)c) * 28 * 28;
    int found = -1;
    for (int k = 0; k < 10; k++)
        if (img[10 * 28 + 4 + 2 * k] > 0.0f) {
            ck_assert_msg(found < 0, "sample %d shows two classes", b);
            found = k;
        }
    return found;
}

static sl_dataset *open_mnist(const char *name, int channels, uint64_t seed)
{
    sl_dataset *ds = NULL;
    sl_status st = sl_dataset_mnist(dir_of(name), channels, seed, &ds);
    ck_assert_msg(st == SL_OK, "%s", sl_last_error());
    return ds;
}

START_TEST(test_mnist_gives_normalised_images_with_their_labels)
{
    write_mnist("mnist", 20, 10);
    sl_dataset *ds = open_mnist("mnist", 3, 5);
    sl_dataset_info info;
    ck_assert_int_eq(sl_dataset_get_info(ds, &info), SL_OK);
    ck_assert_str_eq(info.name, "mnist");
    ck_assert_int_eq(info.classes, 10);
    ck_assert(info.channels == 3 && info.height == 28 && info.width == 28);
    ck_assert(info.samples[SL_SPLIT_TRAIN] == 20 && info.samples[SL_SPLIT_TEST] == 10);

    float x[20 * 3 * 28 * 28];
    int labels[20];
    ck_assert_int_eq(sl_dataset_batch(ds, SL_SPLIT_TRAIN, 0, 20, x, labels), SL_OK);
    /* Pixel values: (p / 255 - mean) / std with MNIST's constants. */
    double bright = (1.0 - 0.1307) / 0.3081, dark = -0.1307 / 0.3081;
    int count[10] = {0};
    for (int b = 0; b < 20; b++) {
        ck_assert_int_eq(mnist_class_shown(x, b, 3, 0), labels[b]);
        count[labels[b]]++;
        const float *img = x + (size_t)b * 3 * 784;
        for (int c = 1; c < 3; c++) /* grey repeated into equal channels */
            ck_assert_mem_eq(img, img + (size_t)c * 784, 784 * sizeof(float));
        for (int p = 0; p < 784; p++)
            ck_assert_msg(fabs(img[p] - bright) < 1e-5 || fabs(img[p] - dark) < 1e-5,
                          "pixel %d of sample %d is %g", p, b, (double)img[p]);
    }
    for (int k = 0; k < 10; k++) /* one epoch is a permutation: each image once */
        ck_assert_int_eq(count[k], 2);

    /* The test split comes in file order, with one grey channel if asked. */
    sl_dataset *grey = open_mnist("mnist", 1, 5);
    ck_assert_int_eq(sl_dataset_get_info(grey, &info), SL_OK);
    ck_assert_int_eq(info.channels, 1);
    ck_assert_int_eq(sl_dataset_batch(grey, SL_SPLIT_TEST, 0, 10, x, labels), SL_OK);
    for (int b = 0; b < 10; b++) {
        ck_assert_int_eq(labels[b], b);
        ck_assert_int_eq(mnist_class_shown(x, b, 1, 0), b);
    }
    sl_dataset_free(grey);
    sl_dataset_free(ds);
}
END_TEST

START_TEST(test_training_order_is_seeded_and_wraps_around)
{
    write_mnist("mnist_order", 20, 0);
    sl_dataset *a = open_mnist("mnist_order", 1, 1), *b = open_mnist("mnist_order", 1, 1);
    sl_dataset *c = open_mnist("mnist_order", 1, 2);
    static float x[40 * 784], y[40 * 784];
    int la[40], lb[40], lc[40];
    ck_assert_int_eq(sl_dataset_batch(a, SL_SPLIT_TRAIN, 0, 40, x, la), SL_OK);
    ck_assert_int_eq(sl_dataset_batch(b, SL_SPLIT_TRAIN, 0, 40, y, lb), SL_OK);
    ck_assert_mem_eq(x, y, sizeof x);
    ck_assert_mem_eq(la, lb, sizeof la);
    /* Index 20 + i is sample i again: the second epoch repeats the first. */
    ck_assert_mem_eq(x, x + 20 * 784, 20 * 784 * sizeof(float));
    /* Batches at any index agree with one long batch. */
    ck_assert_int_eq(sl_dataset_batch(b, SL_SPLIT_TRAIN, 7, 3, y, lb), SL_OK);
    ck_assert_mem_eq(x + 7 * 784, y, 3 * 784 * sizeof(float));
    /* Another seed, another order of the same images. */
    ck_assert_int_eq(sl_dataset_batch(c, SL_SPLIT_TRAIN, 0, 20, y, lc), SL_OK);
    ck_assert(memcmp(la, lc, 20 * sizeof(int)) != 0);
    /* No test files: no test split. */
    sl_dataset_info info;
    ck_assert_int_eq(sl_dataset_get_info(a, &info), SL_OK);
    ck_assert(info.samples[SL_SPLIT_TEST] == 0);
    th_assert_error(sl_dataset_batch(a, SL_SPLIT_TEST, 0, 1, x, la), SL_ERR_NOT_FOUND,
                    "no test split");
    th_assert_error(sl_dataset_batch(a, SL_SPLIT_TRAIN, -1, 1, x, la), SL_ERR_INVALID_ARG,
                    "index must be >= 0");
    sl_dataset_free(a);
    sl_dataset_free(b);
    sl_dataset_free(c);
}
END_TEST

/* Opening dir as kind ("mnist" or "cifar10") fails with want and a
 * message holding fragment; *out keeps the caller's value. */
static void expect_error(const char *kind, const char *dir, sl_status want, const char *fragment)
{
    sl_dataset *sentinel = (sl_dataset *)&sentinel, *ds = sentinel;
    sl_status st = strcmp(kind, "mnist") == 0 ? sl_dataset_mnist(dir_of(dir), 3, 0, &ds)
                                              : sl_dataset_cifar10(dir_of(dir), 0, &ds);
    th_assert_error(st, want, fragment);
    ck_assert_ptr_eq(ds, sentinel);
}

START_TEST(test_broken_mnist_files_are_refused)
{
    expect_error("mnist", "no_such_dir", SL_ERR_NOT_FOUND, "no such directory");
    write_idx_images("mnist_nolabels/train-images-idx3-ubyte", 0x803, 20, 0);
    expect_error("mnist", "mnist_nolabels", SL_ERR_NOT_FOUND, "train-labels-idx1-ubyte not found");

    write_mnist("mnist_cut", 20, 0);
    write_idx_images("mnist_cut/train-images-idx3-ubyte", 0x803, 20, 100);
    expect_error("mnist", "mnist_cut", SL_ERR_FORMAT, "train-images-idx3-ubyte is truncated");

    write_mnist("mnist_long", 20, 0);
    write_idx_images("mnist_long/train-images-idx3-ubyte", 0x803, 19, 0);
    expect_error("mnist", "mnist_long", SL_ERR_FORMAT, "20 labels for the 19 images");

    write_mnist("mnist_magic", 20, 0);
    write_idx_images("mnist_magic/train-images-idx3-ubyte", 0x801, 20, 0);
    expect_error("mnist", "mnist_magic", SL_ERR_FORMAT, "magic 0x00000801");

    write_mnist("mnist_label", 20, 0);
    write_idx_labels("mnist_label/train-labels-idx1-ubyte", 20, 1);
    expect_error("mnist", "mnist_label", SL_ERR_FORMAT, "not a class 0-9");

    write_mnist("mnist_gz", 20, 0);
    cr_write("mnist_gz/train-images-idx3-ubyte", "\x1f\x8b\x08\x00rest", 8);
    expect_error("mnist", "mnist_gz", SL_ERR_FORMAT, "gzip");

    write_mnist("mnist_header", 20, 0);
    cr_write("mnist_header/train-images-idx3-ubyte", "\x00\x00\x08\x03\x00", 5);
    expect_error("mnist", "mnist_header", SL_ERR_FORMAT, "shorter than the 16-byte IDX header");

    write_mnist("mnist_test_cut", 20, 10);
    write_idx_images("mnist_test_cut/t10k-images-idx3-ubyte", 0x803, 10, 1);
    expect_error("mnist", "mnist_test_cut", SL_ERR_FORMAT, "t10k-images-idx3-ubyte is truncated");

    write_mnist("mnist_ok", 20, 0);
    sl_dataset *ds = NULL;
    th_assert_error(sl_dataset_mnist(dir_of("mnist_ok"), 2, 0, &ds), SL_ERR_INVALID_ARG,
                    "channels must be 1 or 3");
    th_assert_error(sl_dataset_mnist(NULL, 3, 0, &ds), SL_ERR_INVALID_ARG, "dir is NULL");
    ck_assert_ptr_null(ds);
}
END_TEST

START_TEST(test_cifar10_gives_normalised_images_with_their_labels)
{
    write_cifar("cifar/cifar-10-batches-bin/data_batch_1.bin", 20, 0, 0);
    write_cifar("cifar/cifar-10-batches-bin/data_batch_2.bin", 10, 0, 0);
    write_cifar("cifar/cifar-10-batches-bin/test_batch.bin", 10, 0, 0);
    sl_dataset *ds = NULL;
    ck_assert_msg(sl_dataset_cifar10(dir_of("cifar"), 3, &ds) == SL_OK, "%s", sl_last_error());
    sl_dataset_info info;
    ck_assert_int_eq(sl_dataset_get_info(ds, &info), SL_OK);
    ck_assert_str_eq(info.name, "cifar10");
    ck_assert(info.channels == 3 && info.height == 32 && info.width == 32);
    ck_assert(info.samples[SL_SPLIT_TRAIN] == 30 && info.samples[SL_SPLIT_TEST] == 10);
    static float x[10 * 3 * 1024];
    int labels[10];
    ck_assert_int_eq(sl_dataset_batch(ds, SL_SPLIT_TEST, 0, 10, x, labels), SL_OK);
    static const double mean[3] = {0.4914, 0.4822, 0.4465}, std[3] = {0.2470, 0.2435, 0.2616};
    for (int b = 0; b < 10; b++) {
        ck_assert_int_eq(labels[b], b); /* file order */
        for (int c = 0; c < 3; c++) {
            const float *plane = x + ((size_t)b * 3 + (size_t)c) * 1024;
            double on = (200.0 / 255.0 - mean[c]) / std[c], off = -mean[c] / std[c];
            for (int y = 0; y < 32; y++) {
                int lit = y / 3 == b && y < 30;
                ck_assert_msg(fabs(plane[y * 32 + 16] - (lit ? on : off)) < 1e-5,
                              "sample %d channel %d row %d: %g", b, c, y,
                              (double)plane[y * 32 + 16]);
            }
        }
    }
    sl_dataset_free(ds);
}
END_TEST

START_TEST(test_broken_cifar10_files_are_refused)
{
    expect_error("cifar10", "no_such_dir", SL_ERR_NOT_FOUND, "no data_batch_1.bin");
    write_cifar("cifar_cut/data_batch_1.bin", 5, 7, 0);
    expect_error("cifar10", "cifar_cut", SL_ERR_FORMAT, "not a whole number of 3073-byte");
    write_cifar("cifar_label/data_batch_1.bin", 6, 0, 1);
    expect_error("cifar10", "cifar_label", SL_ERR_FORMAT, "label 57");
    cr_write("cifar_empty/data_batch_1.bin", "", 0);
    expect_error("cifar10", "cifar_empty", SL_ERR_FORMAT, "0 bytes");
    write_cifar("cifar_test/data_batch_1.bin", 6, 0, 0);
    write_cifar("cifar_test/test_batch.bin", 6, 1, 0);
    expect_error("cifar10", "cifar_test", SL_ERR_FORMAT, "test_batch.bin");
}
END_TEST

START_TEST(test_synthetic_set_reports_its_shape)
{
    sl_dataset *ds = NULL;
    ck_assert_int_eq(sl_dataset_synthetic(7, 2, 9, 11, 3, &ds), SL_OK);
    sl_dataset_info info;
    ck_assert_int_eq(sl_dataset_get_info(ds, &info), SL_OK);
    ck_assert_str_eq(info.name, "synthetic");
    ck_assert(info.classes == 7 && info.channels == 2 && info.height == 9 && info.width == 11);
    ck_assert(info.samples[SL_SPLIT_TRAIN] == (int64_t)1 << 62);
    th_assert_error(sl_dataset_get_info(NULL, &info), SL_ERR_INVALID_ARG, "dataset is NULL");
    sl_dataset_free(ds);
    sl_dataset_free(NULL);
}
END_TEST

int main(void)
{
    cr_init();
    Suite *s = suite_create("datasets");
    TCase *tc = tcase_create("datasets");
    tcase_add_test(tc, test_mnist_gives_normalised_images_with_their_labels);
    tcase_add_test(tc, test_training_order_is_seeded_and_wraps_around);
    tcase_add_test(tc, test_broken_mnist_files_are_refused);
    tcase_add_test(tc, test_cifar10_gives_normalised_images_with_their_labels);
    tcase_add_test(tc, test_broken_cifar10_files_are_refused);
    tcase_add_test(tc, test_synthetic_set_reports_its_shape);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    cr_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
