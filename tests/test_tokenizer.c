/*
 * test_tokenizer.c — GPT-2's byte-level BPE (src/text) against tiktoken,
 * on GPT-2's own files: over a megabyte of Shakespeare and generated
 * Unicode text (accents, combining marks, CJK, emoji, digits of several
 * scripts, runs of every kind of white space, contractions) must encode to
 * exactly tiktoken's ids; any bytes (random, invalid UTF-8) decode back to
 * themselves. A small vocabulary written here checks the merge order, the
 * buffer rules, allocation failures and the refusal of bad files without
 * the data. The GPT-2 files and texts come from scripts/setup.sh (data/ at
 * the top of the tree) and tiktoken from .pyref/; the tests that need them
 * skip visibly when they are missing.
 */
#define _DEFAULT_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "bpe_files.h"
#include "cli_run.h"
#include "harness.h"
#include "sublinear.h"

#define DATA_DIR SL_TEST_SOURCE_DIR "/../data"
#define ENCODER_JSON DATA_DIR "/gpt2/encoder.json"
#define VOCAB_BPE DATA_DIR "/gpt2/vocab.bpe"

/* A path in the scratch directory (cli_run.h); four live at once. */
static char *path_in_dir(const char *name)
{
    static char path[4][512];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", cr_dir(), name);
    return p;
}

static int have_gpt2_files(const char *test)
{
    if (access(ENCODER_JSON, R_OK) == 0 && access(VOCAB_BPE, R_OK) == 0)
        return 1;
    printf("SKIPPED %s: no GPT-2 files under %s (run scripts/setup.sh)\n", test, DATA_DIR);
    return 0;
}

/* ---- a small vocabulary (tests/bpe_files.c) ------------------------- */

static void write_small(const char *json_extra, const char *bpe_extra)
{
    bf_write_small(path_in_dir("small.json"), path_in_dir("small.bpe"), json_extra, bpe_extra);
}

static sl_tokenizer *load_small(void)
{
    write_small("", "");
    sl_tokenizer *tok = NULL;
    sl_status st = sl_tokenizer_load(path_in_dir("small.json"), path_in_dir("small.bpe"), &tok);
    ck_assert_msg(st == SL_OK, "%s", sl_last_error());
    return tok;
}

START_TEST(test_tokenizer_small_vocabulary_merges_lowest_first)
{
    sl_tokenizer *tok = load_small();
    ck_assert_int_eq(sl_tokenizer_vocab_size(tok), 257 + BF_SMALL_MERGES);
    int32_t ids[32];
    size_t n = 0;
    /* "hello" -> "hell" (he + ll) "o"; " world" -> " worl" "d"; "aaa" -> "aa" "a". */
    ck_assert_int_eq(sl_tokenizer_encode(tok, "hello world aaa", 15, ids, 32, &n), SL_OK);
    int32_t want[] = {258, 'o', 262, 'd', ' ', 263, 'a'}; /* here byte b has id b */
    ck_assert_uint_eq(n, 7);
    for (int i = 0; i < 7; i++)
        ck_assert_int_eq(ids[i], want[i]);
    int32_t eot;
    ck_assert_int_eq(sl_tokenizer_token_id(tok, "<|endoftext|>", 13, &eot), SL_OK);
    ck_assert_int_eq(eot, 256 + BF_SMALL_MERGES);
    ck_assert_int_eq(sl_tokenizer_token_id(tok, "hex", 3, &eot), SL_ERR_NOT_FOUND);
    sl_tokenizer_free(tok);
}
END_TEST

START_TEST(test_tokenizer_buffers_too_small_are_refused_with_the_size_needed)
{
    sl_tokenizer *tok = load_small();
    size_t n = 0;
    ck_assert_int_eq(sl_tokenizer_encode(tok, "hello world", 11, NULL, 0, &n), SL_OK);
    ck_assert_uint_eq(n, 4);
    int32_t ids[4] = {-1, -1, -1, -1};
    ck_assert_int_eq(sl_tokenizer_encode(tok, "hello world", 11, ids, 2, &n), SL_ERR_INVALID_ARG);
    ck_assert_uint_eq(n, 4);
    ck_assert_ptr_nonnull(strstr(sl_last_error(), "4 tokens"));
    ck_assert_int_eq(ids[0], 258);
    ck_assert_int_eq(ids[2], -1);
    ck_assert_int_eq(sl_tokenizer_encode(tok, "hello world", 11, ids, 4, &n), SL_OK);
    char out[16];
    size_t bytes = 0;
    ck_assert_int_eq(sl_tokenizer_decode(tok, ids, 4, NULL, 0, &bytes), SL_OK);
    ck_assert_uint_eq(bytes, 11);
    ck_assert_int_eq(sl_tokenizer_decode(tok, ids, 4, out, 5, &bytes), SL_ERR_INVALID_ARG);
    ck_assert_int_eq(memcmp(out, "hello", 5), 0);
    ck_assert_int_eq(sl_tokenizer_decode(tok, ids, 4, out, sizeof out, &bytes), SL_OK);
    ck_assert_int_eq(memcmp(out, "hello world", 11), 0);
    int32_t bad = sl_tokenizer_vocab_size(tok);
    ck_assert_int_eq(sl_tokenizer_decode(tok, &bad, 1, out, sizeof out, &bytes), SL_ERR_INVALID_ARG);
    ck_assert_int_eq(sl_tokenizer_encode(tok, "", 0, ids, 4, &n), SL_OK);
    ck_assert_uint_eq(n, 0);
    sl_tokenizer_free(tok);
}
END_TEST

static void expect_refused(const char *json_extra, const char *bpe_extra, sl_status want, const char *says)
{
    write_small(json_extra, bpe_extra);
    sl_tokenizer *tok = (sl_tokenizer *)1;
    sl_status st = sl_tokenizer_load(path_in_dir("small.json"), path_in_dir("small.bpe"), &tok);
    ck_assert_msg(st == want, "%s / %s: got %s (%s)", json_extra, bpe_extra, sl_status_name(st),
                  sl_last_error());
    ck_assert_ptr_null(tok);
    ck_assert_msg(strstr(sl_last_error(), says), "message \"%s\" lacks \"%s\"", sl_last_error(), says);
}

START_TEST(test_tokenizer_bad_files_are_refused_with_messages)
{
    expect_refused(", \"x\": 3", "", SL_ERR_FORMAT, "given twice");
    expect_refused(", \"xy\": 900", "", SL_ERR_FORMAT, "no id in 0..");
    expect_refused(", \"\\u0001\": 265", "", SL_ERR_FORMAT, "byte-to-character form");
    expect_refused(", \"x\": \"7\"", "", SL_ERR_FORMAT, "no id");
    expect_refused("", "q r\n", SL_ERR_FORMAT, "merged token is not in encoder.json");
    expect_refused("", "q\n", SL_ERR_FORMAT, "line 10: not two tokens");
    expect_refused("", "h e\n", SL_ERR_FORMAT, "given twice");
    expect_refused("", "\nh e\n", SL_ERR_FORMAT, "empty line");
    expect_refused("", "Ġwo r", SL_ERR_FORMAT, "truncated");
    /* Truncated or foreign encoder.json. */
    write_small("", "");
    size_t n;
    char *json = cr_read(path_in_dir("small.json"), &n);
    sl_tokenizer *tok = NULL;
    cr_write("cut.json", json, n / 2);
    ck_assert_int_eq(sl_tokenizer_load(path_in_dir("cut.json"), path_in_dir("small.bpe"), &tok), SL_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(sl_last_error(), "cut.json"));
    cr_write("list.json", "[1, 2]", 6);
    ck_assert_int_eq(sl_tokenizer_load(path_in_dir("list.json"), path_in_dir("small.bpe"), &tok), SL_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(sl_last_error(), "not a JSON object"));
    ck_assert_int_eq(sl_tokenizer_load(path_in_dir("small.bpe"), path_in_dir("small.json"), &tok), SL_ERR_FORMAT);
    ck_assert_int_eq(sl_tokenizer_load(path_in_dir("small.json"), path_in_dir("small.json"), &tok), SL_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(sl_last_error(), "#version"));
    ck_assert_int_eq(sl_tokenizer_load(path_in_dir("none.json"), path_in_dir("small.bpe"), &tok), SL_ERR_IO);
    ck_assert_ptr_nonnull(strstr(sl_last_error(), "none.json"));
    ck_assert_int_eq(sl_tokenizer_load(path_in_dir("small.json"), cr_dir(), &tok), SL_ERR_IO);
    ck_assert_ptr_null(tok);
    free(json);
}
END_TEST

/* encoder.json must be valid UTF-8 in every string: an overlong "!" (it
 * used to load as "!"), a raw 0xFF, a surrogate, a truncated sequence. */
START_TEST(test_tokenizer_invalid_utf8_in_encoder_json_is_refused)
{
    write_small("", "");
    size_t n;
    char *json = cr_read(path_in_dir("small.json"), &n);
    ck_assert_ptr_nonnull(json);
    char *bang = strstr(json, "\"!\": 33,");
    ck_assert_ptr_nonnull(bang);
    size_t head = (size_t)(bang - json) + 1; /* after the opening quote */
    static const char *const bad[] = {"\xc0\xa1", "\xff", "\xed\xa0\x80", "\xe2\x82", "\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *edited = malloc(n + 8);
        ck_assert_ptr_nonnull(edited);
        size_t k = strlen(bad[i]);
        memcpy(edited, json, head);
        memcpy(edited + head, bad[i], k);
        memcpy(edited + head + k, json + head + 1, n - head - 1); /* drops the "!" */
        cr_write("bad_utf8.json", edited, n - 1 + k);
        free(edited);
        sl_tokenizer *tok = (sl_tokenizer *)1;
        sl_status st = sl_tokenizer_load(path_in_dir("bad_utf8.json"), path_in_dir("small.bpe"), &tok);
        ck_assert_msg(st == SL_ERR_FORMAT, "case %zu: %s (%s)", i, sl_status_name(st), sl_last_error());
        ck_assert_ptr_null(tok);
        ck_assert_msg(strstr(sl_last_error(), "invalid UTF-8") && strstr(sl_last_error(), "bad_utf8.json"),
                      "case %zu: %s", i, sl_last_error());
        char at[32];
        snprintf(at, sizeof at, "at byte %zu", head);
        ck_assert_msg(strstr(sl_last_error(), at), "case %zu: %s lacks %s", i, sl_last_error(), at);
    }
    free(json);
}
END_TEST

/* A token echoed in a message is escaped: controls (C1 too) as \u00XX, a
 * backslash doubled, valid UTF-8 kept. */
START_TEST(test_tokenizer_messages_escape_the_tokens_they_quote)
{
    expect_refused(", \"\\u0085\\\\\xc3\xa9\": 265", "", SL_ERR_FORMAT, "byte-to-character form");
    ck_assert_msg(strstr(sl_last_error(), "\"\\u0085\\\\\xc3\xa9\""), "%s", sl_last_error());
}
END_TEST

START_TEST(test_tokenizer_load_and_encode_survive_every_allocation_failure)
{
    write_small("", "");
    int failures = 0;
    for (long k = 1;; k++) {
        sl_tokenizer *tok = NULL;
        sl_test_alloc_fail_at(k);
        sl_status st = sl_tokenizer_load(path_in_dir("small.json"), path_in_dir("small.bpe"), &tok);
        size_t n = 0;
        int32_t ids[64];
        if (st == SL_OK)
            st = sl_tokenizer_encode(tok, "hello world, hello \xff\xfe world", 26, ids, 64, &n);
        long count = sl_test_alloc_count();
        sl_test_alloc_fail_at(0);
        sl_tokenizer_free(tok);
        if (st == SL_OK) {
            ck_assert_int_ge(k, count + 1);
            break;
        }
        ck_assert_msg(st == SL_ERR_NOMEM, "allocation %ld: %s", k, sl_last_error());
        failures++;
    }
    ck_assert_int_gt(failures, 5);
}
END_TEST

/* ---- GPT-2's files -------------------------------------------------- */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

static uint64_t next_random(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* Fragments of the generated Unicode text: every class the pattern tells
 * apart, in several scripts. */
static const char *const g_fragments[] = {
    "caf\u00e9", "na\u00efve", "Se\u00f1or", "\u00c5ngstr\u00f6m", "e\u0301t\u0301e\u0301", "a\u0308\u0304",
    "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0", "\u4e2d\u6587\u5b57", "\ud55c\uad6d\uc5b4", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "\u05e2\u05d1\u05e8\u05d9\u05ea", "\u0440\u0443\u0441\u0441\u043a\u0438\u0439", "\u03b5\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
    "\u0939\u093f\u0928\u094d\u0926\u0940", "\U0001F389", "\U0001F468\u200D\U0001F469\u200D\U0001F467", "\U0001F44D\U0001F3FD",
    "\u2764\uFE0F", "12345", "3.14159", "\u0663\u0664\u0665", "\uff11\uff12\uff13", "\u00bd\u2153", "\u2160\u2161",
    "   ", "\t\t", "\n", "\n\n\n", "\r\n", " \u00a0 ", "\u3000", "\u2028", "\xc2\x85", "\u200b", "\x0b", "\x0c",
    "'s", "'ll", "'VE", "'re", "'d", "'m", "'t", "\u2019s", "don't", "--", "...", "?!", "(x)", "#$%&", "<|endoftext|>",
    "\u00ab\u00bb", "\u2014", "\u20ac100", "@home", "a_b", "\\path", "x\u00adx", " ", " ", " ", "the", "The", "word",
};

static int is_text(const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    return n > 8 && strcmp(e->d_name + n - 8, "_gut.txt") == 0;
}

/* Writes the test corpus: Shakespeare's texts, up to `shakespeare` bytes,
 * then `unicode` bytes of generated text. Returns its size (0 when the
 * texts are missing). */
static size_t write_corpus(const char *path, size_t shakespeare, size_t unicode)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    size_t total = 0;
    struct dirent **names = NULL;
    int count = scandir(DATA_DIR "/shakespeare", &names, is_text, alphasort);
    for (int i = 0; i < count; i++) {
        char name[1024];
        snprintf(name, sizeof name, DATA_DIR "/shakespeare/%s", names[i]->d_name);
        size_t n;
        char *text = total < shakespeare ? cr_read(name, &n) : NULL;
        if (text) {
            if (n > shakespeare - total)
                n = shakespeare - total;
            ck_assert_uint_eq(fwrite(text, 1, n, f), n);
            total += n;
            free(text);
        }
        free(names[i]);
    }
    free(names);
    if (total == 0) {
        fclose(f);
        return 0;
    }
    size_t nfrag = sizeof g_fragments / sizeof g_fragments[0];
    for (size_t made = 0; made < unicode;) {
        const char *frag = g_fragments[next_random() % nfrag];
        size_t n = strlen(frag);
        ck_assert_uint_eq(fwrite(frag, 1, n, f), n);
        made += n;
        total += n;
    }
    fclose(f);
    return total;
}

static sl_tokenizer *load_gpt2(void)
{
    sl_tokenizer *tok = NULL;
    sl_status st = sl_tokenizer_load(ENCODER_JSON, VOCAB_BPE, &tok);
    ck_assert_msg(st == SL_OK, "%s", sl_last_error());
    ck_assert_int_eq(sl_tokenizer_vocab_size(tok), 50257);
    return tok;
}

START_TEST(test_tokenizer_gpt2_matches_tiktoken_on_a_megabyte_of_text)
{
    if (!have_gpt2_files("test_tokenizer_gpt2_matches_tiktoken_on_a_megabyte_of_text"))
        return;
    const char *env = getenv("SL_REFERENCE_PYTHON");
    char python[512];
    snprintf(python, sizeof python, "%s", env && *env ? env : SL_TEST_SOURCE_DIR "/../.pyref/bin/python3");
    if (access(python, X_OK) != 0) {
        printf("SKIPPED tiktoken comparison: no reference python at %s (run scripts/setup.sh)\n", python);
        return;
    }
    const char *corpus = path_in_dir("corpus.txt");
    size_t size = write_corpus(corpus, 1100000, 400000);
    if (size == 0) {
        printf("SKIPPED tiktoken comparison: no Shakespeare texts under %s (run scripts/setup.sh)\n", DATA_DIR);
        return;
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' '%s/tokenizer_reference.py' '%s' '%s' '%s' '%s'", python,
             SL_TEST_SOURCE_DIR, ENCODER_JSON, VOCAB_BPE, corpus, path_in_dir("corpus.ids"));
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 3) {
        printf("SKIPPED tiktoken comparison: %s cannot import tiktoken (run scripts/setup.sh)\n", python);
        return;
    }
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%s failed", cmd);
    size_t ref_bytes, n;
    int32_t *ref = (int32_t *)cr_read(path_in_dir("corpus.ids"), &ref_bytes);
    char *text = cr_read(corpus, &n);
    ck_assert(ref && text);
    size_t ref_n = ref_bytes / 4, got_n = 0;
    int32_t *got = malloc(n * sizeof *got);
    sl_tokenizer *tok = load_gpt2();
    ck_assert_int_eq(sl_tokenizer_encode(tok, text, n, got, n, &got_n), SL_OK);
    size_t first = 0;
    while (first < got_n && first < ref_n && got[first] == ref[first])
        first++;
    ck_assert_msg(first == ref_n && got_n == ref_n, "%zu ids, tiktoken %zu; first difference at %zu (%d vs %d)",
                  got_n, ref_n, first, first < got_n ? got[first] : -1, first < ref_n ? ref[first] : -1);
    printf("test_tokenizer: %zu bytes -> %zu ids, equal to tiktoken's\n", n, got_n);
    char *back = malloc(n);
    size_t back_n = 0;
    ck_assert_int_eq(sl_tokenizer_decode(tok, got, got_n, back, n, &back_n), SL_OK);
    ck_assert(back_n == n && memcmp(back, text, n) == 0);
    sl_tokenizer_free(tok);
    free(back);
    free(got);
    free(ref);
    free(text);
}
END_TEST

static void check_round_trip(const sl_tokenizer *tok, const uint8_t *bytes, size_t n)
{
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    char *back = malloc(n + 1);
    size_t count = 0, back_n = 0;
    ck_assert_int_eq(sl_tokenizer_encode(tok, bytes, n, ids, n, &count), SL_OK);
    ck_assert_uint_le(count, n);
    ck_assert_int_eq(sl_tokenizer_decode(tok, ids, count, back, n, &back_n), SL_OK);
    ck_assert_uint_eq(back_n, n);
    ck_assert(memcmp(back, bytes, n) == 0);
    free(ids);
    free(back);
}

START_TEST(test_tokenizer_gpt2_decode_of_encode_is_identity_on_any_bytes)
{
    if (!have_gpt2_files("test_tokenizer_gpt2_decode_of_encode_is_identity_on_any_bytes"))
        return;
    sl_tokenizer *tok = load_gpt2();
    uint8_t *b = malloc(1 << 20);
    for (int round = 0; round < 200; round++) {
        size_t n = next_random() % 4096;
        int alphabet = round % 4 == 0 ? 256 : round % 4 == 1 ? 4 : 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = next_random();
            if (alphabet)
                b[i] = alphabet == 4 ? (uint8_t)"a \xc3\xe2"[r % 4] : (uint8_t)r;
            else /* UTF-8 pieces cut anywhere, with stray continuation bytes */
                b[i] = (uint8_t)"\xe6\x97\xa5\xf0\x9f\x8e\x89 \x80\xbfx\n\t1'"[r % 15];
        }
        check_round_trip(tok, b, n);
    }
    /* Long pieces: a megabyte of one letter, of random bytes, of spaces. */
    memset(b, 'a', 1 << 20);
    check_round_trip(tok, b, 1 << 20);
    for (size_t i = 0; i < (1 << 20); i++)
        b[i] = (uint8_t)next_random();
    check_round_trip(tok, b, 1 << 20);
    memset(b, ' ', 1 << 18);
    check_round_trip(tok, b, 1 << 18);
    int32_t id;
    ck_assert_int_eq(sl_tokenizer_token_id(tok, "<|endoftext|>", 13, &id), SL_OK);
    ck_assert_int_eq(id, 50256);
    size_t n;
    int32_t ids[8];
    ck_assert_int_eq(sl_tokenizer_encode(tok, "Hello world", 11, ids, 8, &n), SL_OK);
    ck_assert(n == 2 && ids[0] == 15496 && ids[1] == 995);
    sl_tokenizer_free(tok);
    free(b);
}
END_TEST

int main(void)
{
    cr_init();
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("bpe");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_tokenizer_small_vocabulary_merges_lowest_first);
    tcase_add_test(tc, test_tokenizer_buffers_too_small_are_refused_with_the_size_needed);
    tcase_add_test(tc, test_tokenizer_bad_files_are_refused_with_messages);
    tcase_add_test(tc, test_tokenizer_invalid_utf8_in_encoder_json_is_refused);
    tcase_add_test(tc, test_tokenizer_messages_escape_the_tokens_they_quote);
    tcase_add_test(tc, test_tokenizer_load_and_encode_survive_every_allocation_failure);
    tcase_add_test(tc, test_tokenizer_gpt2_matches_tiktoken_on_a_megabyte_of_text);
    tcase_add_test(tc, test_tokenizer_gpt2_decode_of_encode_is_identity_on_any_bytes);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    cr_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
