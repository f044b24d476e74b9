/*
 * image_files.h — MNIST and CIFAR-10 files for the tests (image_files.c).
 * Names are relative to the scratch directory of cli_run.h.
 */
#ifndef SL_TEST_IMAGE_FILES_H
#define SL_TEST_IMAGE_FILES_H

#include <stddef.h>
#include <stdint.h>

/* An IDX image file of count 28x28 images: image i shows class i % 10 as
 * a bright bar of 2 columns at x = 4 + 2 * (i % 10), rows 4-23; `cut`
 * bytes removed from the end. */
void write_idx_images(const char *name, uint32_t magic, int count, size_t cut);
/* An IDX label file: label i % 10 for item i; bad_label puts 11 halfway. */
void write_idx_labels(const char *name, int count, int bad_label);
/* A directory with train (and with test > 0, t10k) image and label files. */
void write_mnist(const char *dir, int train, int test);
/* A CIFAR-10 batch of count records: label i % 10, pixels 200 in all
 * channels on rows 3k .. 3k + 2 (k the class), columns 8-23, else 0;
 * `cut` bytes removed from the end; bad_label puts 57 halfway. */
void write_cifar(const char *name, int count, size_t cut, int bad_label);

#endif
