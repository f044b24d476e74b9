/*
 * bpe_files.c — a small vocabulary in GPT-2's file format for the
 * tokenizer tests (test_tokenizer, test_cli_tokenize): the 256 bytes with
 * id = byte, eight merges, then "<|endoftext|>".
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "bpe_files.h"

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* GPT-2's character for byte b, as UTF-8 into out; returns its length. */
static int byte_char(int b, char *out)
{
    int cp = b, extra = 0;
    for (int x = 0; x < 256; x++) {
        int printable = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
        if (!printable && x == b)
            cp = 256 + extra;
        extra += !printable;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* The merges of the small vocabulary, in order; token 256 + i is merge i.
 * "Ġ" is GPT-2's character for the space. */
static const char *const g_small_merges[] = {"h e", "l l", "he ll", "Ġ w", "Ġw o", "r l", "Ġwo rl", "a a"};

void bf_write_small(const char *json_path, const char *bpe_path, const char *json_extra,
                    const char *bpe_extra)
{
    static char json[16384];
    size_t at = 0;
    at += (size_t)snprintf(json + at, sizeof json - at, "{");
    for (int b = 0; b < 256; b++) {
        char c[2];
        int n = byte_char(b, c);
        json[at++] = '"';
        if (c[0] == '"' || c[0] == '\\')
            json[at++] = '\\';
        memcpy(json + at, c, (size_t)n);
        at += (size_t)n;
        at += (size_t)snprintf(json + at, sizeof json - at, "\": %d, ", b);
    }
    for (int i = 0; i < BF_SMALL_MERGES; i++) {
        char merged[16];
        size_t k = 0;
        for (const char *s = g_small_merges[i]; *s; s++)
            if (*s != ' ')
                merged[k++] = *s;
        merged[k] = '\0';
        at += (size_t)snprintf(json + at, sizeof json - at, "\"%s\": %d, ", merged, 256 + i);
    }
    at += (size_t)snprintf(json + at, sizeof json - at, "\"<|endoftext|>\": %d%s}", 256 + BF_SMALL_MERGES,
                           json_extra);
    write_file(json_path, json, at);
    char bpe[1024];
    at = (size_t)snprintf(bpe, sizeof bpe, "#version: 0.2\n");
    for (int i = 0; i < BF_SMALL_MERGES; i++)
        at += (size_t)snprintf(bpe + at, sizeof bpe - at, "%s\n", g_small_merges[i]);
    at += (size_t)snprintf(bpe + at, sizeof bpe - at, "%s", bpe_extra);
    write_file(bpe_path, bpe, at);
}

