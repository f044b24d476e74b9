/*
 * test_token_shards.c — llm.c's token shards (sl_token_shard_*): batches
 * of ids and next-token targets cut as llm.c's loader cuts them, wrapping
 * around, and the errors of foreign, truncated or short files.
 */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static char path[64];

/* Writes a shard of `count` tokens (token i = (i * 37 + 5) % 50257) whose
 * header says `claimed` tokens and has the given magic. */
static void write_shard(size_t count, int32_t magic, int32_t claimed)
{
    snprintf(path, sizeof path, "/tmp/sl_shard_XXXXXX");
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    ck_assert(f);
    int32_t header[256] = {magic, 1, claimed};
    ck_assert(fwrite(header, sizeof header, 1, f) == 1);
    for (size_t i = 0; i < count; i++) {
        uint16_t t = (uint16_t)((i * 37 + 5) % 50257);
        ck_assert(fwrite(&t, 2, 1, f) == 1);
    }
    ck_assert(fclose(f) == 0);
}

static int32_t token_at(size_t i) { return (int32_t)((i * 37 + 5) % 50257); }

START_TEST(test_batches)
{
    write_shard(1000, 20240520, 1000);
    sl_token_shard *s;
    ck_assert_msg(sl_token_shard_open(path, &s) == SL_OK, "%s", sl_last_error());
    unlink(path);
    ck_assert_uint_eq(sl_token_shard_count(s), 1000);
    ck_assert_int_eq(sl_token_shard_batches(s, 4, 50), 4); /* 999 / 200 */
    int32_t ids[200], targets[200];
    for (int64_t k = 0; k < 9; k++) {
        ck_assert(sl_token_shard_batch(s, k, 4, 50, ids, targets) == SL_OK);
        size_t start = (size_t)(k % 4) * 200;
        for (int i = 0; i < 200; i++) {
            ck_assert_int_eq(ids[i], token_at(start + i));
            ck_assert_int_eq(targets[i], token_at(start + i + 1));
        }
    }
    th_assert_error(sl_token_shard_batch(s, 0, 10, 100, ids, targets), SL_ERR_SHAPE, "1001");
    th_assert_error(sl_token_shard_batch(s, -1, 4, 50, ids, targets), SL_ERR_INVALID_ARG, "index");
    sl_token_shard_free(s);
}
END_TEST

START_TEST(test_bad_files)
{
    sl_token_shard *s = NULL;
    write_shard(10, 20240521, 10);
    th_assert_error(sl_token_shard_open(path, &s), SL_ERR_FORMAT, "not a token shard");
    unlink(path);
    write_shard(10, 20240520, 11);
    th_assert_error(sl_token_shard_open(path, &s), SL_ERR_FORMAT, "truncated");
    unlink(path);
    write_shard(0, 20240520, 0);
    ck_assert(truncate(path, 100) == 0);
    th_assert_error(sl_token_shard_open(path, &s), SL_ERR_FORMAT, "header");
    unlink(path);
    th_assert_error(sl_token_shard_open("/nonexistent/shard.bin", &s), SL_ERR_IO, "shard.bin");
    ck_assert_ptr_null(s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("token_shards");
    TCase *t = tcase_create("token_shards");
    tcase_add_test(t, test_batches);
    tcase_add_test(t, test_bad_files);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return th_run_suite(suite()) ? EXIT_FAILURE : EXIT_SUCCESS; }
