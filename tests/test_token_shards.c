/*
 * test_token_shards.c — llm.c's token shards (sl_token_shard_*): batches
 * of ids and next-token targets cut as llm.c's loader cuts them, wrapping
 * around, the errors of foreign, truncated or short files, ids outside a
 * vocabulary found by file and offset, atomic writes, and a FIFO refused.
 */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
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
    ck_assert_int_eq(sl_token_shard_batch_count(s, 4, 50), 4); /* 999 / 200 */
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

/* Every id below the vocabulary, or the first one that is not, by file
 * and offset: found when the shard is opened, not when a batch meets it. */
START_TEST(test_check_vocab_names_the_file_and_the_offset)
{
    write_shard(1000, 20240520, 1000); /* ids up to 50256 */
    sl_token_shard *s;
    ck_assert_msg(sl_token_shard_open(path, &s) == SL_OK, "%s", sl_last_error());
    ck_assert_int_eq(sl_token_shard_check_vocab(s, 50257), SL_OK);
    /* token 2 is (2 * 37 + 5) = 79: the first id >= 50 */
    th_assert_error(sl_token_shard_check_vocab(s, 50), SL_ERR_FORMAT, "id 79 at token 2 (byte 1028");
    ck_assert_ptr_nonnull(strstr(sl_last_error(), path));
    ck_assert_ptr_nonnull(strstr(sl_last_error(), "vocabulary of 50"));
    th_assert_error(sl_token_shard_check_vocab(s, 0), SL_ERR_INVALID_ARG, "vocab");
    th_assert_error(sl_token_shard_check_vocab(NULL, 10), SL_ERR_INVALID_ARG, "NULL");
    sl_token_shard_free(s);
    unlink(path);
}
END_TEST

/* A shard written by sl_token_shard_write reads back; a write that fails
 * (here: the file size limit) says why and leaves the previous shard. */
START_TEST(test_write_reads_back_and_a_failed_write_keeps_the_previous_shard)
{
    char dir[] = "/tmp/sl_shardw_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char out[96];
    snprintf(out, sizeof out, "%s/train.bin", dir);
    uint16_t tokens[3000];
    for (int i = 0; i < 3000; i++)
        tokens[i] = (uint16_t)(i * 7919);
    ck_assert_msg(sl_token_shard_write(out, tokens, 100) == SL_OK, "%s", sl_last_error());
    sl_token_shard *s;
    ck_assert_msg(sl_token_shard_open(out, &s) == SL_OK, "%s", sl_last_error());
    ck_assert_uint_eq(sl_token_shard_count(s), 100);
    int32_t ids[99], targets[99];
    ck_assert(sl_token_shard_batch(s, 0, 1, 99, ids, targets) == SL_OK);
    for (int i = 0; i < 99; i++)
        ck_assert_int_eq(ids[i], tokens[i]);
    sl_token_shard_free(s);

    /* A larger shard over it, under a 2 KiB file size limit: EFBIG. */
    struct rlimit old;
    ck_assert(getrlimit(RLIMIT_FSIZE, &old) == 0);
    struct rlimit small = {2048, old.rlim_max};
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert(setrlimit(RLIMIT_FSIZE, &small) == 0);
    sl_status st = sl_token_shard_write(out, tokens, 3000);
    ck_assert(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, was);
    th_assert_error(st, SL_ERR_IO, strerror(EFBIG));
    ck_assert_ptr_nonnull(strstr(sl_last_error(), "previous file there is unchanged"));
    ck_assert_msg(sl_token_shard_open(out, &s) == SL_OK, "%s", sl_last_error());
    ck_assert_uint_eq(sl_token_shard_count(s), 100);
    sl_token_shard_free(s);
    th_assert_error(sl_token_shard_write(NULL, tokens, 1), SL_ERR_INVALID_ARG, "NULL");
    th_assert_error(sl_token_shard_write(out, tokens, (size_t)INT32_MAX + 1), SL_ERR_INVALID_ARG,
                    "2^31");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A FIFO is refused at once: opening it to read would wait for a writer. */
START_TEST(test_a_fifo_is_refused_without_blocking)
{
    char fifo[] = "/tmp/sl_fifo_XXXXXX";
    int fd = mkstemp(fifo);
    ck_assert(fd >= 0);
    close(fd);
    unlink(fifo);
    ck_assert(mkfifo(fifo, 0600) == 0);
    sl_token_shard *s = NULL;
    alarm(20); /* a hang fails the test instead of stalling the suite */
    th_assert_error(sl_token_shard_open(fifo, &s), SL_ERR_IO, "FIFO");
    alarm(0);
    ck_assert_ptr_null(s);
    unlink(fifo);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("token_shards");
    TCase *t = tcase_create("token_shards");
    tcase_add_test(t, test_batches);
    tcase_add_test(t, test_bad_files);
    tcase_add_test(t, test_check_vocab_names_the_file_and_the_offset);
    tcase_add_test(t, test_write_reads_back_and_a_failed_write_keeps_the_previous_shard);
    tcase_add_test(t, test_a_fifo_is_refused_without_blocking);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return th_run_suite(suite()) ? EXIT_FAILURE : EXIT_SUCCESS; }
