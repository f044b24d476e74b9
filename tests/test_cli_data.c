/*
 * test_cli_data.c — `sublinear train` on MNIST (IDX) and CIFAR-10 (binary)
 * files: tiny files of each format (image_files.c) train with exit status
 * 0; a file the library refuses (test_datasets checks every kind) stops
 * the run with exit status 1 and the library's message, naming the file
 * and the problem, and prints nothing on stdout.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "harness.h"
#include "image_files.h"

#ifndef SL_CLI_PATH
#error "SL_CLI_PATH must name the sublinear executable"
#endif

#define TINY_TRAIN "train --model resnet20 --batch 4 --steps 3 --eval 8 --threads 2"

/* ---- MNIST and CIFAR-10 files ---------------------------------------- */

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
    /* Every broken file is refused by the library (test_datasets); the
     * command stops with its message and exit status 1. */
    expect_data_error("mnist", "no_such_dir", "not found");
    write_mnist("mnist_cut", 20, 0);
    write_idx_images("mnist_cut/train-images-idx3-ubyte", 0x803, 20, 100);
    expect_data_error("mnist", "mnist_cut", "truncated");
}
END_TEST

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
    write_cifar("cifar_label/data_batch_1.bin", 6, 0, 1);
    expect_data_error("cifar10", "cifar_label", "label 57");
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
