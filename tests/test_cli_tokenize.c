/*
 * test_cli_tokenize.c — `sublinear tokenize` writes llm.c's token shards:
 * the header [20240520, 1, tokens] in 256 int32, then uint16 tokens, each
 * file after <|endoftext|>, the last fraction of the tokens in val.bin
 * beside the training shard; bad arguments exit 2, bad files 1 (a FIFO
 * at once); a failed write keeps the previous shard and says why. With the
 * small vocabulary of tests/bpe_files.c (always) and on Hamlet with
 * GPT-2's files (when scripts/setup.sh fetched them; skipped visibly
 * otherwise), compared with the library's own encoding.
 */
#define _DEFAULT_SOURCE
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bpe_files.h"
#include "cli_run.h"
#include "harness.h"
#include "sublinear.h"

#define DATA_DIR SL_TEST_SOURCE_DIR "/../data"

/* Reads a shard; checks its header; returns its tokens (caller frees). */
static uint16_t *read_shard(const char *path, size_t *n)
{
    size_t size;
    uint8_t *b = (uint8_t *)cr_read(path, &size);
    ck_assert_msg(b != NULL, "no shard %s", path);
    ck_assert_uint_ge(size, 1024);
    int32_t header[256];
    for (int i = 0; i < 256; i++)
        header[i] = (int32_t)((uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
                              (uint32_t)b[4 * i + 3] << 24);
    ck_assert_int_eq(header[0], 20240520);
    ck_assert_int_eq(header[1], 1);
    for (int i = 3; i < 256; i++)
        ck_assert_int_eq(header[i], 0);
    *n = (size_t)header[2];
    ck_assert_uint_eq(size, 1024 + 2 * *n);
    uint16_t *tokens = malloc(2 * *n + 2);
    for (size_t i = 0; i < *n; i++)
        tokens[i] = (uint16_t)(b[1024 + 2 * i] | b[1024 + 2 * i + 1] << 8);
    free(b);
    return tokens;
}

START_TEST(test_cli_tokenize_writes_train_and_val_shards)
{
    char json[600], bpe[600];
    snprintf(json, sizeof json, "%s/small.json", cr_dir());
    snprintf(bpe, sizeof bpe, "%s/small.bpe", cr_dir());
    bf_write_small(json, bpe, "", "");
    char a[600], b[600];
    snprintf(a, sizeof a, "%s", cr_write("a.txt", "hello world", 11));
    snprintf(b, sizeof b, "%s", cr_write("b.txt", "aaa hello", 9));
    cr_result r = cr_run(SL_CLI_PATH, "tokenize --vocab %s --merges %s --out %s/train.bin --val-fraction 0.3 %s %s",
                         json, bpe, cr_dir(), a, b);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "11 tokens"));
    cr_free(&r);
    const uint16_t eot = 256 + BF_SMALL_MERGES;
    const uint16_t all[] = {eot, 258, 'o', 262, 'd', eot, 263, 'a', ' ', 258, 'o'};
    char path[700];
    size_t n;
    snprintf(path, sizeof path, "%s/train.bin", cr_dir());
    uint16_t *train = read_shard(path, &n);
    ck_assert_uint_eq(n, 8);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(train[i], all[i]);
    free(train);
    snprintf(path, sizeof path, "%s/val.bin", cr_dir());
    uint16_t *val = read_shard(path, &n);
    ck_assert_uint_eq(n, 3); /* floor(0.3 * 11) */
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(val[i], all[8 + i]);
    free(val);

    /* Without a fraction: one shard of everything. Values may follow '='
     * as in every command's options (the table of cli.h reads them all). */
    r = cr_run(SL_CLI_PATH, "tokenize --vocab=%s --merges %s --out=%s/all.bin %s %s", json, bpe, cr_dir(), a, b);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cr_free(&r);
    snprintf(path, sizeof path, "%s/all.bin", cr_dir());
    uint16_t *every = read_shard(path, &n);
    ck_assert_uint_eq(n, 11);
    ck_assert_int_eq(memcmp(every, all, sizeof all), 0);
    free(every);
}
END_TEST

START_TEST(test_cli_tokenize_refuses_bad_arguments_and_files)
{
    char json[600], bpe[600], text[600];
    snprintf(json, sizeof json, "%s/small.json", cr_dir());
    snprintf(bpe, sizeof bpe, "%s/small.bpe", cr_dir());
    bf_write_small(json, bpe, "", "");
    snprintf(text, sizeof text, "%s", cr_write("c.txt", "hello", 5));
    static const char *const usage[] = {
        "tokenize --merges %s --out %s/x.bin %s",                        /* no --vocab (json unused) */
        "tokenize --vocab %s --merges %s --out %s/x.bin",                 /* no input */
        "tokenize --vocab %s --merges %s --out %s/x.bin --val-fraction 1 %s",
        "tokenize --vocab %s --merges %s --out %s/x.bin --frobnicate %s",
        "tokenize --vocab %s --merges %s --out %s/val.bin --val-fraction 0.5 %s",
    };
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        cr_result r = i == 0 ? cr_run(SL_CLI_PATH, usage[i], bpe, cr_dir(), text)
                             : cr_run(SL_CLI_PATH, usage[i], json, bpe, cr_dir(), text);
        ck_assert_msg(r.status == 2, "case %zu: status %d: %s", i, r.status, r.err);
        ck_assert_ptr_nonnull(strstr(r.err, "usage: sublinear tokenize"));
        cr_free(&r);
    }
    cr_result r = cr_run(SL_CLI_PATH, "tokenize --vocab %s --merges %s --out %s/x.bin %s/missing.txt", json, bpe,
                         cr_dir(), cr_dir());
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "missing.txt"));
    cr_free(&r);
    r = cr_run(SL_CLI_PATH, "tokenize --vocab %s --merges %s --out %s/x.bin %s", bpe, bpe, cr_dir(), text);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "encoder.json"));
    cr_free(&r);
    r = cr_run(SL_CLI_PATH, "tokenize --help");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "20240520"));
    cr_free(&r);
}
END_TEST

/* A write that fails (a 4 KiB file size limit; SIGXFSZ ignored, so the
 * write gets EFBIG) keeps the previous shard, and the message gives the
 * reason. It used to write in place and remove the file. */
START_TEST(test_cli_tokenize_failed_write_keeps_the_previous_shard_and_says_why)
{
    char json[600], bpe[600], small[600], big[600], out[700];
    snprintf(json, sizeof json, "%s/small.json", cr_dir());
    snprintf(bpe, sizeof bpe, "%s/small.bpe", cr_dir());
    bf_write_small(json, bpe, "", "");
    snprintf(small, sizeof small, "%s", cr_write("small.txt", "hello world", 11));
    char text[20000];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = "ab c\n"[i % 5];
    snprintf(big, sizeof big, "%s", cr_write("big.txt", text, sizeof text));
    snprintf(out, sizeof out, "%s/keep.bin", cr_dir());
    cr_result r = cr_run(SL_CLI_PATH, "tokenize --vocab %s --merges %s --out %s %s", json, bpe, out, small);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cr_free(&r);
    size_t before_n, after_n;
    char *before = cr_read(out, &before_n);

    struct rlimit old, limit;
    ck_assert(getrlimit(RLIMIT_FSIZE, &old) == 0);
    limit = (struct rlimit){4096, old.rlim_max};
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert(setrlimit(RLIMIT_FSIZE, &limit) == 0);
    r = cr_run(SL_CLI_PATH, "tokenize --vocab %s --merges %s --out %s %s", json, bpe, out, big);
    ck_assert(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, was);
    ck_assert_msg(r.status == 1, "status %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, out) && strstr(r.err, strerror(EFBIG)) &&
                      strstr(r.err, "previous file there is unchanged"),
                  "%s", r.err);
    cr_free(&r);
    char *after = cr_read(out, &after_n);
    ck_assert_ptr_nonnull(after);
    ck_assert(after_n == before_n && memcmp(after, before, before_n) == 0);
    free(before);
    free(after);
}
END_TEST

/* A FIFO as --vocab, --merges or an input text is refused at once, not
 * waited on (timeout ends a run that blocks: status 124). */
START_TEST(test_cli_tokenize_refuses_a_fifo_without_blocking)
{
    char json[600], bpe[600], fifo[600], text[600];
    snprintf(json, sizeof json, "%s/small.json", cr_dir());
    snprintf(bpe, sizeof bpe, "%s/small.bpe", cr_dir());
    bf_write_small(json, bpe, "", "");
    snprintf(text, sizeof text, "%s", cr_write("f.txt", "hello", 5));
    snprintf(fifo, sizeof fifo, "%s/pipe", cr_dir());
    unlink(fifo);
    ck_assert(mkfifo(fifo, 0600) == 0);
    const char *vocab[3] = {fifo, json, json}, *merges[3] = {bpe, fifo, bpe}, *in[3] = {text, text, fifo};
    for (int i = 0; i < 3; i++) {
        cr_result r = cr_run("timeout", "20 '%s' tokenize --vocab %s --merges %s --out %s/f.bin %s",
                             SL_CLI_PATH, vocab[i], merges[i], cr_dir(), in[i]);
        ck_assert_msg(r.status == 1, "case %d: status %d: %s", i, r.status, r.err);
        ck_assert_msg(strstr(r.err, fifo) && strstr(r.err, "FIFO"), "case %d: %s", i, r.err);
        cr_free(&r);
    }
    unlink(fifo);
}
END_TEST

START_TEST(test_cli_tokenize_gpt2_shard_matches_the_library_on_hamlet)
{
    const char *json = DATA_DIR "/gpt2/encoder.json", *bpe = DATA_DIR "/gpt2/vocab.bpe",
               *play = DATA_DIR "/shakespeare/hamlet_gut.txt";
    if (access(json, R_OK) || access(bpe, R_OK) || access(play, R_OK)) {
        printf("SKIPPED test_cli_tokenize_gpt2_shard_matches_the_library_on_hamlet: no data under %s "
               "(run scripts/setup.sh)\n", DATA_DIR);
        return;
    }
    cr_result r = cr_run(SL_CLI_PATH, "tokenize --vocab %s --merges %s --out %s/h.bin --val-fraction 0.1 %s", json,
                         bpe, cr_dir(), play);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cr_free(&r);
    size_t size, n_train, n_val, n;
    char *text = cr_read(play, &size);
    sl_tokenizer *tok;
    ck_assert_int_eq(sl_tokenizer_load(json, bpe, &tok), SL_OK);
    int32_t *ids = malloc((size + 1) * sizeof *ids);
    ids[0] = 50256;
    ck_assert_int_eq(sl_tokenizer_encode(tok, text, size, ids + 1, size, &n), SL_OK);
    n++;
    char path[700];
    snprintf(path, sizeof path, "%s/h.bin", cr_dir());
    uint16_t *train = read_shard(path, &n_train);
    snprintf(path, sizeof path, "%s/val.bin", cr_dir());
    uint16_t *val = read_shard(path, &n_val);
    ck_assert_uint_eq(n_val, (size_t)(0.1 * (double)n));
    ck_assert_uint_eq(n_train + n_val, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(i < n_train ? train[i] : val[i - n_train], ids[i]);
    sl_tokenizer_free(tok);
    free(ids);
    free(text);
    free(train);
    free(val);
}
END_TEST

int main(void)
{
    cr_init();
    Suite *s = suite_create("cli_tokenize");
    TCase *tc = tcase_create("tokenize");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_cli_tokenize_writes_train_and_val_shards);
    tcase_add_test(tc, test_cli_tokenize_refuses_bad_arguments_and_files);
    tcase_add_test(tc, test_cli_tokenize_failed_write_keeps_the_previous_shard_and_says_why);
    tcase_add_test(tc, test_cli_tokenize_refuses_a_fifo_without_blocking);
    tcase_add_test(tc, test_cli_tokenize_gpt2_shard_matches_the_library_on_hamlet);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    cr_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
