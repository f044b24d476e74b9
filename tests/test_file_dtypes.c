/*
 * test_file_dtypes.c — F16 and BF16 files, other dtypes, and names that
 * hold NUL. The conversions are checked against independent references:
 * the compiler's _Float16 for F16 (every one of the 65536 values widened,
 * and narrowing of every F16 value, every midpoint between neighbours and
 * the floats beside them), and exact arithmetic in double for BF16's
 * round-to-nearest-even. A network saved as BF16 or F16 loads back as the
 * rounded values, strictly; a value F16 cannot hold fails the save; a
 * tensor of a dtype that cannot load is an issue of that tensor only; and
 * a file whose names end in "\u0000evil" loads nothing into the network's
 * tensors of the shorter names.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "harness.h"

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t ref_f16(float x)
{
    _Float16 h = (_Float16)x;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}

START_TEST(test_f16_matches_the_compiler_everywhere)
{
    for (uint32_t u = 0; u < 65536; u++) {
        _Float16 h;
        uint16_t b = (uint16_t)u;
        memcpy(&h, &b, 2);
        float want = (float)h, got = sl_f16_to_f32(b);
        if (isnan(want))
            ck_assert_msg(isnan(got), "F16 %04x", u);
        else
            ck_assert_msg(fbits(got) == fbits(want), "F16 %04x: %a, want %a", u, got, want);
    }
    int checked = 0;
    /* Under SL_TEST_QUICK (the sanitizer run) every 8th value's neighbourhood. */
    uint32_t step = getenv("SL_TEST_QUICK") ? 8 : 1;
    for (uint32_t u = 0; u < 0x7C00; u += step) {
        float lo = sl_f16_to_f32((uint16_t)u), hi = sl_f16_to_f32((uint16_t)(u + 1));
        float mid = (float)(((double)lo + (double)hi) / 2); /* exact: 12 significant bits */
        const float xs[] = {lo, mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY),
                            nextafterf(lo, INFINITY)};
        for (int s = 0; s < 2; s++)
            for (size_t k = 0; k < sizeof xs / sizeof xs[0]; k++) {
                float x = s ? -xs[k] : xs[k];
                ck_assert_msg(sl_f32_to_f16(x) == ref_f16(x), "%a: %04x, want %04x", x,
                              sl_f32_to_f16(x), ref_f16(x));
                checked++;
            }
    }
    const float specials[] = {65504.0f, 65519.99f, 65520.0f, 1e9f, INFINITY, -INFINITY, 0.0f,
                              -0.0f, 1e-30f, 0x1p-25f, 0x1.000002p-25f, 0x1p-24f, 3e38f};
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++)
        ck_assert_msg(sl_f32_to_f16(specials[k]) == ref_f16(specials[k]), "%a", specials[k]);
    ck_assert(isnan(sl_f16_to_f32(sl_f32_to_f16(NAN))));
    printf("F16: 65536 widenings and %d roundings equal the compiler's\n", checked);
}
END_TEST

/* Round to nearest even in exact arithmetic: the two BF16 neighbours. */
static uint16_t ref_bf16(float x)
{
    uint32_t u = fbits(x);
    uint32_t lo = u & 0xFFFF0000u, hi = lo + 0x10000u;
    double dl = fabs((double)x - (double)bitsf(lo)), dh = fabs((double)bitsf(hi) - (double)x);
    if (dl < dh || (dl == dh && !((lo >> 16) & 1)))
        return (uint16_t)(lo >> 16);
    return (uint16_t)(hi >> 16);
}

START_TEST(test_bf16_rounds_to_nearest_even)
{
    uint64_t s = 88172645463325252ull;
    int n = 0, draws = getenv("SL_TEST_QUICK") ? 200000 : 2000000;
    for (int i = 0; i < draws; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t u = (uint32_t)s;
        if (i % 4 == 1)
            u = (u & 0xFFFF0000u) | 0x8000u; /* exact ties */
        float x = bitsf(u);
        if (isnan(x) || isinf(x) || (fbits(x) & 0x7FFFFFFFu) >= 0x7F7F8000u)
            continue; /* NaN, infinity and the top binade (rounds to infinity) below */
        ck_assert_msg(sl_f32_to_bf16(x) == ref_bf16(x), "%a: %04x, want %04x", x,
                      sl_f32_to_bf16(x), ref_bf16(x));
        ck_assert(fbits(sl_bf16_to_f32(sl_f32_to_bf16(x))) == (uint32_t)ref_bf16(x) << 16);
        n++;
    }
    ck_assert_int_eq(sl_f32_to_bf16(bitsf(0x7F7F8000u)), 0x7F80); /* the tie goes to infinity */
    ck_assert_int_eq(sl_f32_to_bf16(bitsf(0x7F7F7FFFu)), 0x7F7F);
    ck_assert(isnan(sl_bf16_to_f32(sl_f32_to_bf16(NAN))));
    printf("BF16: %d roundings equal exact round-to-nearest-even\n", n);
}
END_TEST

static sl_net *small_net(uint64_t seed, sl_context **ctx)
{
    *ctx = th_context(seed);
    sl_net *net;
    ck_assert(sl_sequential(*ctx, 3, &net) == SL_OK);
    ck_assert(sl_net_add(net, "conv", sl_conv2d(3, 4, 3, 1, 1)) == SL_OK);
    ck_assert(sl_net_add(net, "bn", sl_batchnorm2d(4)) == SL_OK);
    ck_assert(sl_net_add(net, "pool", sl_global_avgpool()) == SL_OK);
    ck_assert(sl_net_add(net, "flat", sl_flatten()) == SL_OK);
    ck_assert(sl_net_add(net, "fc", sl_linear(4, 3, 1)) == SL_OK);
    ck_assert(th_param_count(net) > 0);
    return net;
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* The file's bytes (at most cap of them) into buf; returns how many. */
static size_t file_bytes(const char *path, unsigned char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f, "%s", path);
    size_t n = fread(buf, 1, cap, f);
    ck_assert(feof(f));
    fclose(f);
    return n;
}

/* sl_save_model_with without options (NULL, or sl_save_defaults()) writes
 * the file sl_save_model writes; a dtype outside sl_file_dtype writes
 * nothing. */
START_TEST(test_save_options_default_to_f32)
{
    sl_context *ctx;
    sl_net *a = small_net(1, &ctx);
    char path[64];
    snprintf(path, sizeof path, "/tmp/sl_dtypes_opts_%d.safetensors", (int)getpid());
    static unsigned char plain[1 << 16], other[1 << 16];
    ck_assert(sl_save_model(a, path) == SL_OK);
    size_t n = file_bytes(path, plain, sizeof plain);
    ck_assert_int_eq(sl_save_defaults().dtype, SL_FILE_F32);
    sl_save_options defaults = sl_save_defaults();
    const sl_save_options *opts[2] = {NULL, &defaults};
    for (int k = 0; k < 2; k++) {
        unlink(path);
        ck_assert_msg(sl_save_model_with(a, path, opts[k]) == SL_OK, "%s", sl_last_error());
        ck_assert_uint_eq(file_bytes(path, other, sizeof other), n);
        ck_assert(memcmp(plain, other, n) == 0);
    }
    unlink(path);
    sl_save_options bad = {.dtype = (sl_file_dtype)7};
    th_assert_error(sl_save_model_with(a, path, &bad), SL_ERR_INVALID_ARG,
                    "sl_save_model_with: unknown file dtype 7");
    ck_assert(access(path, F_OK) != 0);
    sl_net_free(a);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_bf16_and_f16_models_load_the_rounded_values)
{
    sl_context *ca, *cb;
    sl_net *a = small_net(1, &ca), *b = small_net(2, &cb);
    char path[64];
    snprintf(path, sizeof path, "/tmp/sl_dtypes_%d.safetensors", (int)getpid());
    ck_assert(sl_save_model(a, path) == SL_OK);
    long f32_bytes = file_size(path);
    for (int k = 0; k < 2; k++) {
        sl_file_dtype dt = k ? SL_FILE_F16 : SL_FILE_BF16;
        sl_save_options so = {.dtype = dt};
        ck_assert_msg(sl_save_model_with(a, path, &so) == SL_OK, "%s", sl_last_error());
        sl_load_report rep;
        ck_assert_msg(sl_load_model(b, path, NULL, &rep) == SL_OK, "%s", sl_last_error());
        int n = th_param_count(a);
        long floats = 0;
        for (int i = 0; i < n; i++) {
            sl_param_info pi;
            ck_assert(sl_net_param(a, i, &pi) == SL_OK);
            floats += (long)pi.count;
        }
        /* Two bytes saved per value; the header grows by at most a byte a
         * dtype name ("BF16" for "F32") and its padding. */
        ck_assert_int_le(file_size(path), f32_bytes - 2 * floats + 2 * n + 8);
        ck_assert_int_eq(rep.loaded, n);
        for (int i = 0; i < n; i++) {
            sl_param_info pa, pb;
            ck_assert(sl_net_param(a, i, &pa) == SL_OK && sl_net_param(b, i, &pb) == SL_OK);
            for (size_t e = 0; e < pa.count; e++) {
                float want = k ? sl_f16_to_f32(ref_f16(pa.data[e]))
                               : sl_bf16_to_f32(ref_bf16(pa.data[e]));
                ck_assert_msg(fbits(pb.data[e]) == fbits(want), "%s[%zu]", pa.name, e);
            }
        }
    }
    /* A value F16 cannot hold: nothing is written. */
    sl_param_info p;
    ck_assert(sl_net_find_param(a, "fc.bias", &p) == SL_OK);
    p.data[1] = 70000.0f;
    unlink(path);
    sl_save_options f16 = {.dtype = SL_FILE_F16}, bf16 = {.dtype = SL_FILE_BF16};
    ck_assert_int_eq(sl_save_model_with(a, path, &f16), SL_ERR_INVALID_ARG);
    ck_assert_msg(strstr(sl_last_error(), "'fc.bias' holds 70000"), "%s", sl_last_error());
    ck_assert(access(path, F_OK) != 0);
    ck_assert(sl_save_model_with(a, path, &bf16) == SL_OK);
    unlink(path);
    sl_net_free(a);
    sl_net_free(b);
    sl_context_free(ca);
    sl_context_free(cb);
}
END_TEST

typedef struct issues {
    int n;
    char text[16][160];
} issues;

static void on_issue(void *user, const char *name, sl_load_issue issue, const char *detail)
{
    issues *l = user;
    if (l->n < 16)
        snprintf(l->text[l->n++], sizeof l->text[0], "%d %s: %s", (int)issue, name, detail);
}

/* The bytes of a model file of `net` with every occurrence of `from` in
 * the header replaced by `to` (the header length updated). */
static uint8_t *rewrite(sl_net *net, const char *from, const char *to, size_t *n)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/sl_rewrite_%d.safetensors", (int)getpid());
    ck_assert(sl_save_model(net, path) == SL_OK);
    FILE *f = fopen(path, "rb");
    ck_assert(f);
    static uint8_t in[1 << 16];
    size_t len = fread(in, 1, sizeof in, f);
    fclose(f);
    unlink(path);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | in[i];
    uint8_t *out = calloc(len * 2 + 4096, 1);
    size_t at = 8, fl = strlen(from), tl = strlen(to);
    for (size_t i = 8; i < 8 + hlen;) {
        if (i + fl <= 8 + hlen && memcmp(in + i, from, fl) == 0) {
            memcpy(out + at, to, tl);
            at += tl;
            i += fl;
        } else {
            out[at++] = in[i++];
        }
    }
    uint64_t nh = at - 8;
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(nh >> (8 * i));
    memcpy(out + at, in + 8 + hlen, len - 8 - hlen);
    *n = at + len - 8 - hlen;
    return out;
}

START_TEST(test_other_dtypes_are_issues_of_their_tensor)
{
    sl_context *ca, *cb;
    sl_net *a = small_net(1, &ca), *b = small_net(2, &cb);
    size_t n;
    /* fc.bias (3 floats, 12 bytes) as I32 keeps its byte range. */
    uint8_t *buf = rewrite(a, "\"fc.bias\":{\"dtype\":\"F32\"", "\"fc.bias\":{\"dtype\":\"I32\"", &n);
    issues l = {0};
    sl_load_options o = {1, on_issue, &l, 0};
    sl_load_report rep;
    ck_assert_int_eq(sl_load_model_memory(b, buf, n, &o, &rep), SL_ERR_FORMAT);
    ck_assert_msg(strstr(sl_last_error(), "dtype I32 in the file"), "%s", sl_last_error());
    o.strict = 0;
    l.n = 0;
    ck_assert(sl_load_model_memory(b, buf, n, &o, &rep) == SL_OK);
    ck_assert_int_eq(rep.mismatched, 1);
    ck_assert_int_eq(rep.loaded, th_param_count(b) - 1);
    free(buf);
    /* A tensor the network does not need, of a dtype it cannot take. */
    buf = rewrite(a, "\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[3]",
                  "\"extra.scale\":{\"dtype\":\"F8_E8M0\",\"shape\":[12]", &n);
    l.n = 0;
    ck_assert_msg(sl_load_model_memory(b, buf, n, &o, &rep) == SL_OK, "%s", sl_last_error());
    ck_assert_int_eq(rep.unexpected, 1);
    ck_assert_int_eq(rep.missing, 1); /* fc.bias */
    free(buf);
    sl_net_free(a);
    sl_net_free(b);
    sl_context_free(ca);
    sl_context_free(cb);
}
END_TEST

START_TEST(test_names_with_nul_are_other_names)
{
    sl_context *ca, *cb;
    sl_net *a = small_net(1, &ca), *b = small_net(2, &cb);
    size_t n;
    uint8_t *buf = rewrite(a, "\":{\"dtype\"", "\\u0000evil\":{\"dtype\"", &n);
    sl_param_info before;
    ck_assert(sl_net_find_param(b, "conv.weight", &before) == SL_OK);
    float first = before.data[0];
    ck_assert_int_eq(sl_load_model_memory(b, buf, n, NULL, NULL), SL_ERR_NOT_FOUND);
    issues l = {0};
    sl_load_options o = {0, on_issue, &l, 0};
    sl_load_report rep;
    ck_assert(sl_load_model_memory(b, buf, n, &o, &rep) == SL_OK);
    ck_assert_int_eq(rep.loaded, 0);
    ck_assert_int_eq(rep.missing, th_param_count(b));
    int shown = 0;
    for (int i = 0; i < l.n; i++)
        shown += strstr(l.text[i], "conv.weight\\u0000evil") != NULL;
    ck_assert_msg(shown == 1, "the name is not shown escaped: %s", l.text[0]);
    ck_assert(fbits(before.data[0]) == fbits(first));
    free(buf);
    sl_net_free(a);
    sl_net_free(b);
    sl_context_free(ca);
    sl_context_free(cb);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("file_dtypes");
    TCase *tc = tcase_create("file_dtypes");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_f16_matches_the_compiler_everywhere);
    tcase_add_test(tc, test_bf16_rounds_to_nearest_even);
    tcase_add_test(tc, test_save_options_default_to_f32);
    tcase_add_test(tc, test_bf16_and_f16_models_load_the_rounded_values);
    tcase_add_test(tc, test_other_dtypes_are_issues_of_their_tensor);
    tcase_add_test(tc, test_names_with_nul_are_other_names);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
