/*
 * test_safetensors_reference.c — our safetensors parser against the
 * reference implementation (the Python safetensors package, Rust and serde
 * inside). A generated corpus of valid and malformed files — strings with
 * NUL, control characters, escapes and invalid UTF-8; numbers that are not
 * integers, are too large or have leading zeros; duplicate keys; deep
 * nesting; every dtype; odd entry spellings; lying offsets and lengths; and
 * seeded byte mutations of valid files — is decided by both: accepted or
 * refused. They must agree on every file except where we refuse a name or
 * a "__metadata__" key that appears twice (the reference keeps the last
 * copy; we call the file ambiguous), which is counted and printed. Skips
 * visibly when the package is missing (scripts/setup.sh installs it into
 * .pyref/ at the top of the source tree).
 */
#define _DEFAULT_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "harness.h"

#define MAX_CASES 4096
#define PATH_LEN 1024

typedef struct corpus {
    char dir[PATH_LEN];
    int n;
    char tag[MAX_CASES][48];
} corpus;

static corpus *g_corpus;

static void add_bytes(corpus *c, const char *tag, const uint8_t *bytes, size_t n)
{
    ck_assert(c->n < MAX_CASES);
    char path[PATH_LEN + 32];
    snprintf(path, sizeof path, "%s/%05d.st", c->dir, c->n);
    FILE *f = fopen(path, "wb");
    ck_assert(f);
    ck_assert(fwrite(bytes, 1, n, f) == n);
    fclose(f);
    snprintf(c->tag[c->n], sizeof c->tag[0], "%s", tag);
    c->n++;
}

/* A file: the header length field `hlen_field` (or the true length when
 * ~0), the header text of hlen bytes, then `data` zero bytes. */
static void add_file(corpus *c, const char *tag, const char *header, size_t hlen, size_t data,
                     uint64_t hlen_field)
{
    size_t n = 8 + hlen + data;
    uint8_t *b = calloc(n, 1);
    ck_assert(b);
    uint64_t field = hlen_field == ~0ull ? hlen : hlen_field;
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(field >> (8 * i));
    memcpy(b + 8, header, hlen);
    add_bytes(c, tag, b, n);
    free(b);
}

static void add(corpus *c, const char *tag, const char *header, size_t data)
{
    add_file(c, tag, header, strlen(header), data, ~0ull);
}

/* One F32 tensor named by the JSON string body `name`, [2] at [0, 8),
 * with an extra member text (may be ""). */
static void add_one(corpus *c, const char *tag, const char *name, const char *extra)
{
    char h[512];
    snprintf(h, sizeof h,
             "{\"%s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]%s}}", name, extra);
    add(c, tag, h, 8);
}

/* An entry whose dtype, shape and offsets are JSON texts. */
static void add_entry(corpus *c, const char *tag, const char *dtype, const char *shape,
                      const char *offsets, size_t data)
{
    char h[512];
    snprintf(h, sizeof h, "{\"t\":{\"dtype\":%s,\"shape\":%s,\"data_offsets\":%s}}", dtype, shape,
             offsets);
    add(c, tag, h, data);
}

static void strings(corpus *c)
{
    add_one(c, "plain", "conv.weight", "");
    add_one(c, "nul-in-name", "conv.weight\\u0000evil", "");
    add_one(c, "nul-only-name", "\\u0000", "");
    add_one(c, "empty-name", "", "");
    add_one(c, "escapes", "a\\n\\t\\\"\\\\\\/\\b\\f\\r", "");
    add_one(c, "bmp-escape", "caf\\u00e9\\u20AC", "");
    add_one(c, "surrogate-pair", "\\ud83d\\ude00", "");
    add_one(c, "lone-lead", "x\\ud83d", "");
    add_one(c, "lone-lead-then-char", "x\\ud83dy", "");
    add_one(c, "lead-then-bmp", "\\ud83d\\u0041", "");
    add_one(c, "lone-trail", "\\ude00", "");
    add_one(c, "short-hex", "\\u12", "");
    add_one(c, "bad-hex", "\\u12g4", "");
    add_one(c, "bad-escape", "\\x41", "");
    add_one(c, "raw-tab", "a\tb", "");
    add_one(c, "raw-newline", "a\nb", "");
    add_one(c, "raw-0x01", "a\x01", "");
    add_one(c, "raw-0x1f", "a\x1f", "");
    add_one(c, "raw-del", "a\x7f", "");
    add_one(c, "utf8-2", "\xc3\xa9", "");
    add_one(c, "utf8-4", "\xf0\x9f\x98\x80", "");
    add_one(c, "bad-cont", "a\x80", "");
    add_one(c, "overlong", "\xc0\x80", "");
    add_one(c, "overlong-3", "\xe0\x80\xaf", "");
    add_one(c, "utf8-surrogate", "\xed\xa0\x80", "");
    add_one(c, "above-10ffff", "\xf4\x90\x80\x80", "");
    add_one(c, "f5", "\xf5\x80\x80\x80", "");
    add_one(c, "truncated-seq", "\xe2\x82", "");
    add_one(c, "ff", "\xff", "");
    add_one(c, "key-nul", "t", ",\"dtype\\u0000x\":\"F16\"");
    add_one(c, "unknown-field", "t", ",\"x\":[1,{\"y\":null},true,false,\"s\"]");
    add_one(c, "unknown-field-float", "t", ",\"x\":1.5e300");
    add_one(c, "unknown-field-inf", "t", ",\"x\":1e400");
    add_one(c, "unknown-field-tiny", "t", ",\"x\":1e-400");
    add_one(c, "unknown-field-zero-exp", "t", ",\"x\":0e999");
    add_one(c, "unknown-field-neg", "t", ",\"x\":-12");
    add_one(c, "unknown-field-long", "t",
            ",\"x\":123456789012345678901234567890123456789012345678901234567890");
    add_one(c, "unknown-field-lone-surrogate", "t", ",\"x\":\"\\ud800\"");
    add_one(c, "unknown-field-bad-utf8", "t", ",\"x\":\"\xc0\"");
    add_one(c, "unknown-field-raw-ctl", "t", ",\"x\":\"a\x02\"");
    add_one(c, "unknown-dup", "t", ",\"x\":1,\"x\":2");
    add_one(c, "dup-dtype", "t", ",\"dtype\":\"F32\"");
    add_one(c, "dup-shape", "t", ",\"shape\":[2]");
    add_one(c, "dup-offsets", "t", ",\"data_offsets\":[0,8]");
    add_one(c, "bad-literal", "t", ",\"x\":tru");
    add_one(c, "nan", "t", ",\"x\":NaN");
    add_one(c, "plus", "t", ",\"x\":+1");
    add_one(c, "dot", "t", ",\"x\":.5");
    add_one(c, "trailing-dot", "t", ",\"x\":1.");
    add_one(c, "exp-no-digits", "t", ",\"x\":1e");
    add_one(c, "hex", "t", ",\"x\":0x10");
    add_one(c, "leading-zero", "t", ",\"x\":01");
    add_one(c, "single-quote", "t", ",'x':1");
    add_one(c, "trailing-comma", "t", ",\"x\":[1,]");
    add_one(c, "comment", "t", "/* c */");
    add(c, "meta", "{\"__metadata__\":{\"format\":\"pt\"},\"t\":{\"dtype\":\"F32\",\"shape\":[2],"
                   "\"data_offsets\":[0,8]}}", 8);
    add(c, "meta-nul-value", "{\"__metadata__\":{\"format\":\"pt\\u0000junk\"}}", 0);
    add(c, "meta-nul-key", "{\"__metadata__\":{\"format\\u0000\":\"pt\"}}", 0);
    add(c, "meta-raw-tab", "{\"__metadata__\":{\"format\":\"p\tt\"}}", 0);
    add(c, "meta-bad-utf8", "{\"__metadata__\":{\"format\":\"\xe9\"}}", 0);
    add(c, "meta-null", "{\"__metadata__\":null}", 0);
    add(c, "meta-empty", "{\"__metadata__\":{}}", 0);
    add(c, "meta-number", "{\"__metadata__\":{\"k\":1}}", 0);
    add(c, "meta-nested", "{\"__metadata__\":{\"k\":{}}}", 0);
    add(c, "meta-array", "{\"__metadata__\":[]}", 0);
    add(c, "meta-string", "{\"__metadata__\":\"x\"}", 0);
    add(c, "meta-twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0);
    add(c, "meta-dup-key", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0);
    add(c, "meta-escaped-name", "{\"__metadata\\u005f_\":{}}", 0);
}

static void numbers(corpus *c)
{
    static const char *const dims[] = {"3.0", "3e0", "3E+0", "03", "-0", "-3", "0.0", "1e2",
                                       "\"3\"", "null", "true", "[3]", "9007199254740993",
                                       "18446744073709551615", "18446744073709551616", "3 "};
    char shape[64];
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        snprintf(shape, sizeof shape, "[%s,0]", dims[i]);
        add_entry(c, "shape-number", "\"F32\"", shape, "[0,0]", 0);
        add_entry(c, "offset-number", "\"F32\"", "[0]", shape, 0);
    }
    add_entry(c, "shape-2^53+1", "\"U8\"", "[9007199254740993]", "[0,9007199254740993]", 0);
    add_entry(c, "huge-zero", "\"F32\"", "[18446744073709551615,0]", "[0,0]", 0);
    add_entry(c, "overflow-before-zero", "\"F32\"", "[4294967296,4294967296,0]", "[0,0]", 0);
    add_entry(c, "zero-before-overflow", "\"F32\"", "[0,4294967296,4294967296]", "[0,0]", 0);
    add_entry(c, "bytes-overflow", "\"F64\"", "[4611686018427387904]", "[0,0]", 0);
    add_entry(c, "offsets-3", "\"F32\"", "[1]", "[0,4,4]", 4);
    add_entry(c, "offsets-1", "\"F32\"", "[1]", "[4]", 4);
    add_entry(c, "offsets-reversed", "\"F32\"", "[0]", "[4,0]", 4);
    add_entry(c, "offsets-past-end", "\"F32\"", "[1]", "[0,4]", 2);
    add_entry(c, "shape-object", "\"F32\"", "{}", "[0,0]", 0);
    add_entry(c, "scalar", "\"F32\"", "[]", "[0,4]", 4);
    add_entry(c, "empty", "\"F32\"", "[0]", "[0,0]", 0);
}

static void dtypes_and_forms(corpus *c)
{
    static const struct { const char *name; unsigned bits; } dt[] = {
        {"BOOL", 8}, {"F4", 4}, {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"U8", 8}, {"I8", 8},
        {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8},
        {"I16", 16}, {"U16", 16}, {"F16", 16}, {"BF16", 16}, {"I32", 32}, {"U32", 32},
        {"F32", 32}, {"C64", 64}, {"F64", 64}, {"I64", 64}, {"U64", 64}, {"F8_E4M3FN", 8},
        {"f32", 32}, {"F17", 32}, {"C128", 128}, {"Q4_0", 4}, {"", 8}};
    char d[64], s[32], o[64];
    for (size_t i = 0; i < sizeof dt / sizeof dt[0]; i++)
        for (int count = 0; count <= 5; count++) {
            unsigned long bytes = (unsigned long)count * dt[i].bits / 8;
            snprintf(d, sizeof d, "\"%s\"", dt[i].name);
            snprintf(s, sizeof s, "[%d]", count);
            snprintf(o, sizeof o, "[0,%lu]", bytes);
            add_entry(c, "dtype", d, s, o, bytes);
            snprintf(o, sizeof o, "[0,%lu]", bytes + 1);
            add_entry(c, "dtype-size+1", d, s, o, bytes + 1);
        }
    add_entry(c, "dtype-map", "{\"F32\":null}", "[1]", "[0,4]", 4);
    add_entry(c, "dtype-map-value", "{\"F32\":1}", "[1]", "[0,4]", 4);
    add_entry(c, "dtype-map-two", "{\"F32\":null,\"F16\":null}", "[1]", "[0,4]", 4);
    add_entry(c, "dtype-map-empty", "{}", "[1]", "[0,4]", 4);
    add_entry(c, "dtype-number", "17", "[1]", "[0,4]", 4);
    add_entry(c, "dtype-null", "null", "[1]", "[0,4]", 4);
    add_entry(c, "dtype-array", "[\"F32\"]", "[1]", "[0,4]", 4);
    add_entry(c, "dtype-nul", "\"F32\\u0000junk\"", "[1]", "[0,4]", 4);
    add_entry(c, "dtype-escaped", "\"F\\u0033\\u0032\"", "[1]", "[0,4]", 4);
    add(c, "entry-array", "{\"t\":[\"F32\",[1],[0,4]]}", 4);
    add(c, "entry-array-2", "{\"t\":[\"F32\",[1]]}", 4);
    add(c, "entry-array-4", "{\"t\":[\"F32\",[1],[0,4],1]}", 4);
    add(c, "entry-null", "{\"t\":null}", 0);
    add(c, "entry-string", "{\"t\":\"F32\"}", 0);
    add(c, "entry-missing-dtype", "{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    add(c, "entry-missing-shape", "{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4);
    add(c, "entry-missing-offsets", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4);
    add(c, "dup-name-same", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                            "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    add(c, "dup-name-two", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                           "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8);
    add(c, "two-empty-same-offset",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0);
    add(c, "unsorted", "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8);
    add(c, "gap", "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
                  "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 12);
    add(c, "overlap", "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 6);
    add(c, "extra-data", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 5);
}

static void structure(corpus *c)
{
    static const char *const texts[] = {
        "{}", " {}", "{} ", "\t\r\n{}\n", "{}\f", "{}\v", "{}\x00", "{}x", "[]", "\"s\"", "1",
        "null", "", " ", "{", "}", "{}{}", "\xef\xbb\xbf{}", "{\"a\"}", "{\"a\":}", "{,}",
        "{\"a\":1,}", "{\"a\"  :  1}", "{1:2}", "{\"t\":{}}"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        add_file(c, "structure", texts[i], i == 6 ? 3 : strlen(texts[i]), 0, ~0ull);
    add_file(c, "hlen-past-end", "{}", 2, 0, 3);
    add_file(c, "hlen-short", "{}  ", 4, 0, 1);
    add_file(c, "hlen-huge", "{}", 2, 0, 100000001);
    add_file(c, "hlen-max", "{}", 2, 0, ~0ull - 1);
    add_bytes(c, "short-file", (const uint8_t *)"\x02\x00\x00", 3);
    add_bytes(c, "empty-file", (const uint8_t *)"", 0);
    /* Nesting around serde_json's limit: root + entry + k arrays. */
    for (int depth = 120; depth <= 130; depth++) {
        char h[1024];
        int k = depth - 2, at = snprintf(h, sizeof h, "{\"t\":{\"dtype\":\"U8\",\"shape\":[],"
                                                      "\"data_offsets\":[0,1],\"x\":");
        for (int i = 0; i < k; i++)
            h[at++] = '[';
        for (int i = 0; i < k; i++)
            h[at++] = ']';
        at += snprintf(h + at, sizeof h - (size_t)at, "}}");
        add(c, "depth", h, 1);
        h[0] = '\0';
        at = snprintf(h, sizeof h, "{\"__metadata__\":{},\"y\":");
        for (int i = 0; i < depth - 1; i++)
            h[at++] = '[';
        for (int i = 0; i < depth - 1; i++)
            h[at++] = ']';
        snprintf(h + at, sizeof h - (size_t)at, "}");
        add(c, "depth-entry", h, 0);
    }
}

static uint64_t next_random(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Seeded single-byte changes of valid headers, to bytes that matter. */
static void mutations(corpus *c, int count)
{
    static const char base[] =
        "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F16\",\"shape\":[2,3],"
        "\"data_offsets\":[0,12]},\"b.w\":[\"BF16\",[1],[12,14]],\"c\":{\"dtype\":{\"I64\":null},"
        "\"shape\":[],\"data_offsets\":[14,22],\"x\":[1.5,null]}}   ";
    static const char repl[] = "{}[]\":,\\ 0123456789-+.eE\x00\x01\t\n\x7f\x80\xc3\xff"
                               "abcdfnrtuFIUB_x";
    uint64_t s = 0x9e3779b97f4a7c15ull;
    size_t n = sizeof base - 1;
    char h[sizeof base];
    for (int i = 0; i < count; i++) {
        memcpy(h, base, n);
        int edits = 1 + (int)(next_random(&s) % 2);
        for (int e = 0; e < edits; e++)
            h[next_random(&s) % n] = repl[next_random(&s) % (sizeof repl - 1)];
        add_file(c, "mutation", h, n, 22 + next_random(&s) % 2, ~0ull);
    }
}

/* The reference's verdicts, one per file in order; 0 when it cannot run. */
static int reference_verdicts(const corpus *c, char *ok, char (*msg)[160])
{
    char python[PATH_LEN], cmd[3 * PATH_LEN];
    const char *env = getenv("SL_REFERENCE_PYTHON");
    snprintf(python, sizeof python, "%s", env && *env ? env : SL_TEST_SOURCE_DIR "/../.pyref/bin/python3");
    if (access(python, X_OK) != 0) {
        printf("SKIPPED test_safetensors_reference: no reference python at %s "
               "(run scripts/setup.sh, or set SL_REFERENCE_PYTHON)\n", python);
        return 0;
    }
    snprintf(cmd, sizeof cmd, "'%s' '%s/safetensors_reference.py' '%s'", python,
             SL_TEST_SOURCE_DIR, c->dir);
    FILE *p = popen(cmd, "r");
    ck_assert(p);
    char line[512];
    int n = 0, have_version = 0;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        if (!have_version) {
            have_version = 1;
            printf("reference: %s\n", line);
            if (strncmp(line, "safetensors ", 12) != 0)
                break;
            continue;
        }
        ck_assert_int_lt(n, c->n);
        const char *v = strchr(line, ' ');
        ck_assert(v);
        ok[n] = strncmp(v + 1, "ok", 2) == 0;
        snprintf(msg[n], sizeof msg[0], "%s", ok[n] ? "" : v + 5);
        n++;
    }
    int rc = pclose(p);
    if (have_version && n == 0 && WEXITSTATUS(rc) == 3) {
        printf("SKIPPED test_safetensors_reference: %s cannot import safetensors\n", python);
        return 0;
    }
    ck_assert_msg(n == c->n, "the reference decided %d of %d files", n, c->n);
    return 1;
}

START_TEST(test_parser_agrees_with_the_reference)
{
    corpus *c = g_corpus;
    strings(c);
    numbers(c);
    dtypes_and_forms(c);
    structure(c);
    mutations(c, getenv("SL_TEST_QUICK") ? 1000 : 3000);
    char *ref_ok = calloc((size_t)c->n, 1);
    char(*ref_msg)[160] = calloc((size_t)c->n, sizeof *ref_msg);
    ck_assert(ref_ok && ref_msg);
    if (!reference_verdicts(c, ref_ok, ref_msg)) {
        free(ref_ok);
        free(ref_msg);
        return;
    }
    int agree = 0, justified = 0, disagree = 0, accepted = 0;
    for (int i = 0; i < c->n; i++) {
        char path[PATH_LEN + 32];
        snprintf(path, sizeof path, "%s/%05d.st", c->dir, i);
        FILE *f = fopen(path, "rb");
        ck_assert(f);
        uint8_t *buf = malloc(1 << 16);
        size_t n = fread(buf, 1, 1 << 16, f);
        fclose(f);
        sl_st_file st;
        sl_status s = sl_st_parse(buf, n, path, &st);
        ck_assert_msg(s == SL_OK || s == SL_ERR_FORMAT, "%s: %s", path, sl_last_error());
        int ours = s == SL_OK;
        const char *why = ours ? "" : sl_last_error();
        sl_st_release(&st);
        free(buf);
        accepted += ours;
        if (ours == ref_ok[i]) {
            agree++;
        } else if (!ours && (strstr(why, "appears twice in the header") ||
                             strstr(why, "\" twice"))) {
            justified++;
            printf("justified: %05d (%s): reference keeps the last copy; ours: %s\n", i,
                   c->tag[i], why);
        } else {
            disagree++;
            printf("DISAGREE: %05d (%s): reference %s%s; ours %s%s\n", i, c->tag[i],
                   ref_ok[i] ? "accepts" : "refuses: ", ref_msg[i],
                   ours ? "accepts" : "refuses: ", why);
        }
    }
    printf("%d files: %d agree (%d accepted by both), %d justified differences, %d "
           "disagreements\n", c->n, agree, accepted - justified, justified, disagree);
    ck_assert_int_eq(disagree, 0);
    ck_assert_int_le(justified, 12);
    free(ref_ok);
    free(ref_msg);
}
END_TEST

int main(void)
{
    g_corpus = calloc(1, sizeof *g_corpus);
    if (!g_corpus)
        return EXIT_FAILURE;
    snprintf(g_corpus->dir, sizeof g_corpus->dir, "/tmp/sl_st_reference_XXXXXX");
    if (!mkdtemp(g_corpus->dir)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("safetensors_reference");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_parser_agrees_with_the_reference);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    char cmd[PATH_LEN + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_corpus->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_corpus->dir);
    free(g_corpus);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
