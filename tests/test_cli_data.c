/*
 * test_cli_data.c — `sublinear train` on MNIST (IDX) and CIFAR-10 (binary)
 * files: tiny synthetic files of each format, written here, train with
 * exit status 0; missing, truncated, foreign, gzip-compressed and
 * mislabelled files stop the run with exit status 1 and a message naming
 * the file and the problem, and print nothing on stdout.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "harness.h"

#ifndef SL_CLI_PATH
#error "SL_CLI_PATH must name the sublinear executable"
#endif

#define TINY_TRAIN "train --model resnet20 --batch 4 --steps 3 --eval 8 --threads 2"

/* ---- MNIST and CIFAR-10 files ---------------------------------------- */

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* An IDX image file of count 28x28 images, class i % 10 drawn as a bright
 * bar whose position is the class; `cut` bytes removed from the end. */
static void write_idx_images(const char *name, uint32_t magic, int count, size_t cut)
{
    size_t n = 16 + (size_t)count * 28 * 28;
    uint8_t *d = calloc(n, 1);
    ck_assert(d);
    put_be32(d, magic);
    put_be32(d + 4, (uint32_t)count);
    put_be32(d + 8, 28);
    put_be32(d + 12, 28);
    for (int i = 0; i < count; i++)
        for (int y = 4; y < 24; y++)
            for (int x = 0; x < 2; x++)
                d[16 + (size_t)i * 784 + y * 28 + 4 + 2 * (i % 10) + x] = 255;
    cr_write(name, d, n - cut);
    free(d);
}

static void write_idx_labels(const char *name, int count, int bad_label)
{
    uint8_t *d = calloc(8 + (size_t)count, 1);
    ck_assert(d);
    put_be32(d, 0x00000801);
    put_be32(d + 4, (uint32_t)count);
    for (int i = 0; i < count; i++)
        d[8 + i] = (uint8_t)(i % 10);
    if (bad_label)
        d[8 + count / 2] = 11;
    cr_write(name, d, 8 + (size_t)count);
    free(d);
}

static void write_mnist(const char *dir, int train, int test)
{
    char a[128], b[128];
    snprintf(a, sizeof a, "%s/train-images-idx3-ubyte", dir);
    snprintf(b, sizeof b, "%s/train-labels-idx1-ubyte", dir);
    write_idx_images(a, 0x00000803, train, 0);
    write_idx_labels(b, train, 0);
    if (test) {
        snprintf(a, sizeof a, "%s/t10k-images-idx3-ubyte", dir);
        snprintf(b, sizeof b, "%s/t10k-labels-idx1-ubyte", dir);
        write_idx_images(a, 0x00000803, test, 0);
        write_idx_labels(b, test, 0);
    }
}

/* Runs train on a dataset directory under the scratch directory. */
static cr_result train_on(const char *kind, const char *dir, const char *extra)
{
    return cr_run(SL_CLI_PATH, "%s --dataset %s --data '%s/%s' %s", TINY_TRAIN, kind, cr_dir(),
                  dir, extra);
}

static void expect_data_error(const char *kind, const char *dir, const char *message)
{
    cr_result r = train_on(kind, dir, "--json");
    ck_assert_msg(r.status == 1, "%s in %s: status %d, stderr:\n%s", kind, dir, r.status, r.err);
    ck_assert_msg(strstr(r.err, message), "%s in %s: no '%s' in:\n%s", kind, dir, message, r.err);
    ck_assert_msg(r.out[0] == '\0', "stdout:\n%s", r.out);
    cr_free(&r);
}

START_TEST(test_cli_train_reads_mnist_idx_files)
{
    write_mnist("mnist", 40, 12);
    cr_result r = train_on("mnist", "mnist", "--json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    ck_assert_str_eq(cJSON_GetObjectItem(j, "dataset")->valuestring, "mnist");
    ck_assert(cr_num(j, "res") == 28 && cr_num(j, "classes") == 10);
    ck_assert(cr_num(j, "eval_samples") == 8);
    cJSON_Delete(j);
    cr_free(&r);
    /* Without the t10k files training works, accuracy is not measured. */
    write_mnist("mnist_train_only", 40, 0);
    r = train_on("mnist", "mnist_train_only", "--json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    j = cr_json(&r);
    ck_assert(cr_is_null(j, "test_accuracy"));
    cJSON_Delete(j);
    cr_free(&r);
}
END_TEST

START_TEST(test_cli_train_rejects_broken_mnist_files)
{
    expect_data_error("mnist", "no_such_dir", "not found");
    write_idx_images("mnist_nolabels/train-images-idx3-ubyte", 0x803, 20, 0);
    expect_data_error("mnist", "mnist_nolabels", "train-labels-idx1-ubyte not found");

    write_mnist("mnist_cut", 20, 0);
    write_idx_images("mnist_cut/train-images-idx3-ubyte", 0x803, 20, 100);
    expect_data_error("mnist", "mnist_cut", "truncated");

    write_mnist("mnist_long", 20, 0);
    write_idx_labels("mnist_long/train-labels-idx1-ubyte", 20, 0);
    write_idx_images("mnist_long/train-images-idx3-ubyte", 0x803, 19, 0);
    expect_data_error("mnist", "mnist_long", "20 labels for the 19 images");

    write_mnist("mnist_magic", 20, 0);
    write_idx_images("mnist_magic/train-images-idx3-ubyte", 0x801, 20, 0);
    expect_data_error("mnist", "mnist_magic", "magic 0x00000801");

    write_mnist("mnist_label", 20, 0);
    write_idx_labels("mnist_label/train-labels-idx1-ubyte", 20, 1);
    expect_data_error("mnist", "mnist_label", "not a class 0-9");

    write_mnist("mnist_gz", 20, 0);
    cr_write("mnist_gz/train-images-idx3-ubyte", "\x1f\x8b\x08\x00rest", 8);
    expect_data_error("mnist", "mnist_gz", "gzip");

    write_mnist("mnist_header", 20, 0);
    cr_write("mnist_header/train-images-idx3-ubyte", "\x00\x00\x08\x03\x00", 5);
    expect_data_error("mnist", "mnist_header", "shorter than the 16-byte IDX header");

    write_mnist("mnist_test_cut", 20, 10);
    write_idx_images("mnist_test_cut/t10k-images-idx3-ubyte", 0x803, 10, 1);
    expect_data_error("mnist", "mnist_test_cut", "t10k-images-idx3-ubyte is truncated");
}
END_TEST

enum { CIFAR_RECORD = 3073 };

/* count records, label i % 10, class k a bright square at row 3k. */
static void write_cifar(const char *name, int count, size_t cut, int bad_label)
{
    size_t n = (size_t)count * CIFAR_RECORD;
    uint8_t *d = calloc(n, 1);
    ck_assert(d);
    for (int i = 0; i < count; i++) {
        uint8_t *rec = d + (size_t)i * CIFAR_RECORD;
        rec[0] = (uint8_t)(i % 10);
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < 3; y++)
                for (int x = 8; x < 24; x++)
                    rec[1 + c * 1024 + (3 * (i % 10) + y) * 32 + x] = 200;
    }
    if (bad_label)
        d[(size_t)(count / 2) * CIFAR_RECORD] = 57;
    cr_write(name, d, n - cut);
    free(d);
}

START_TEST(test_cli_train_reads_cifar10_batches)
{
    write_cifar("cifar/data_batch_1.bin", 20, 0, 0);
    write_cifar("cifar/data_batch_2.bin", 10, 0, 0);
    write_cifar("cifar/test_batch.bin", 10, 0, 0);
    cr_result r = train_on("cifar10", "cifar", "--json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    ck_assert_str_eq(cJSON_GetObjectItem(j, "dataset")->valuestring, "cifar10");
    ck_assert(cr_num(j, "res") == 32 && cr_num(j, "eval_samples") == 8);
    cJSON_Delete(j);
    cr_free(&r);
    r = train_on("cifar10", "cifar", "--quiet --eval 100");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "on 10 samples"), "%s", r.out); /* capped at the test set */
    cr_free(&r);
}
END_TEST

START_TEST(test_cli_train_rejects_broken_cifar10_files)
{
    expect_data_error("cifar10", "no_such_dir", "no data_batch_1.bin");
    write_cifar("cifar_cut/data_batch_1.bin", 5, 7, 0);
    expect_data_error("cifar10", "cifar_cut", "not a whole number of 3073-byte");
    write_cifar("cifar_label/data_batch_1.bin", 6, 0, 1);
    expect_data_error("cifar10", "cifar_label", "label 57");
    cr_write("cifar_empty/data_batch_1.bin", "", 0);
    expect_data_error("cifar10", "cifar_empty", "0 bytes");
    write_cifar("cifar_test/data_batch_1.bin", 6, 0, 0);
    write_cifar("cifar_test/test_batch.bin", 6, 1, 0);
    expect_data_error("cifar10", "cifar_test", "test_batch.bin");
}
END_TEST

int main(void)
{
    cr_init();
    Suite *s = suite_create("cli_data");
    TCase *tc = tcase_create("cli_data");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_cli_train_reads_mnist_idx_files);
    tcase_add_test(tc, test_cli_train_rejects_broken_mnist_files);
    tcase_add_test(tc, test_cli_train_reads_cifar10_batches);
    tcase_add_test(tc, test_cli_train_rejects_broken_cifar10_files);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    cr_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
