/*
 * image_files.c — small MNIST (IDX) and CIFAR-10 (binary) files written
 * under the scratch directory, for the dataset tests of the library
 * (test_datasets) and of the command (test_cli_data). Each image shows its
 * class, so a test can tell that images and labels stay paired.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli_run.h"
#include "image_files.h"

enum { CIFAR_RECORD = 3073 };

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* An IDX image file of count 28x28 images, class i % 10 drawn as a bright
 * bar whose position is the class; `cut` bytes removed from the end. */
void write_idx_images(const char *name, uint32_t magic, int count, size_t cut)
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

void write_idx_labels(const char *name, int count, int bad_label)
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

void write_mnist(const char *dir, int train, int test)
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

/* count records, label i % 10, class k a bright square at row 3k. */
void write_cifar(const char *name, int count, size_t cut, int bad_label)
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
