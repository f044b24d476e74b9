/*
 * test_transformer_layers.c — GPT-2's layers (LayerNorm, Conv1D, the tanh
 * GELU, the token + position embedding): their gradients against central
 * finite differences, alone and composed; their outputs and every
 * gradient against PyTorch in float64 (tests/transformer_reference.py) on
 * the same float32 weights and data, within bounds derived from float32
 * rounding; bit-identical results with one and two threads, and with and
 * without checkpointing (re-forwards); their initialisation and their
 * shape errors.
 *
 * The PyTorch comparison: for each element of a result the script gives
 * torch's value and a magnitude M (the sum of the absolute terms a float32
 * evaluation rounds, see the script), and the check is |ours - ref| <=
 * ulps * 2^-24 * M with ulps the number of roundings the computation makes
 * (for a sum of k float32 terms, k). Without a python3 that imports torch
 * (/usr/bin/python3, or $SL_TEST_PYTHON) those tests are skipped, visibly.
 */
#define _XOPEN_SOURCE 700

#include <check.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "layers/graph.h"
#include "layers/layer.h"

#define EPS 4e-3f
#define RTOL 1e-2
#define ATOL 1e-3
#define LN_EPS 1e-5f
#define PATH_LEN 1024

#ifndef SL_TEST_SOURCE_DIR
#define SL_TEST_SOURCE_DIR "."
#endif

static char g_root[PATH_LEN];   /* temporary directory of this run, "" without torch */
static char g_python[PATH_LEN]; /* the interpreter with torch */

/* ------------------------------------------------------------------ */
/* Networks and data                                                   */
/* ------------------------------------------------------------------ */

static sl_context *context_of(int threads, uint64_t seed)
{
    sl_context_options o = sl_context_defaults();
    o.threads = threads;
    o.seed = seed;
    sl_context *ctx = NULL;
    ck_assert_msg(sl_context_create(&o, &ctx) == SL_OK, "%s", sl_last_error());
    return ctx;
}

static sl_net *one_layer(sl_context *ctx, int in_c, const char *name, sl_layer *layer)
{
    sl_net *net = NULL;
    ck_assert_msg(sl_sequential(ctx, in_c, &net) == SL_OK, "%s", sl_last_error());
    ck_assert_msg(sl_net_add(net, name, layer) == SL_OK, "%s", sl_last_error());
    return net;
}

/* Replaces parameter i with base + scale * N(0, 1) (LayerNorm's ones and
 * zeros, the small GPT-2 inits: values a check sees more of). */
static void randomise_param(sl_net *net, int i, float base, float scale, uint64_t seed)
{
    sl_param_info pi;
    ck_assert(sl_net_param(net, i, &pi) == SL_OK);
    float *v = malloc(pi.count * sizeof(float));
    ck_assert(v);
    th_fill_normal(v, pi.count, seed, scale);
    for (size_t k = 0; k < pi.count; k++)
        v[k] += base;
    ck_assert(sl_net_param_write(net, i, v) == SL_OK);
    free(v);
}

/* n token ids in [0, vocab), every one a few times (the embedding's
 * input, given through the _tokens runs). */
static int32_t *token_ids(size_t n, int vocab, uint64_t seed)
{
    int32_t *x = malloc(n * sizeof *x);
    ck_assert(x);
    for (size_t i = 0; i < n; i++)
        x[i] = (int32_t)(sl_random_uniform(seed, 0x1d5, i) * (float)vocab) % vocab;
    return x;
}

static size_t count_of(sl_shape s) { return (size_t)s.n * s.c * s.h * s.w; }

/* ------------------------------------------------------------------ */
/* Finite differences                                                  */
/* ------------------------------------------------------------------ */

static void gradcheck(sl_net *net, const float *x, sl_shape in, int check_input)
{
    th_gradcheck_result r;
    th_gradcheck(net, x, in, check_input, 24, EPS, RTOL, ATOL, &r);
    ck_assert_msg(r.skipped_kinks == 0, "%d of %d coordinates not smooth: %s", r.skipped_kinks,
                  r.candidates, r.worst);
    ck_assert_msg(r.checked > 0, "nothing checked");
    ck_assert_msg(r.worst_error <= 1.0, "worst %s (error %.3g of tolerance)", r.worst,
                  r.worst_error);
}

static float *normal_input(sl_shape in, uint64_t seed, float scale, float shift)
{
    size_t n = count_of(in);
    float *x = malloc(n * sizeof(float));
    ck_assert(x);
    th_fill_normal(x, n, seed, scale);
    for (size_t i = 0; i < n; i++)
        x[i] += shift;
    return x;
}

START_TEST(test_layernorm_gradients_match_finite_differences)
{
    sl_context *ctx = th_context(1);
    sl_net *net = one_layer(ctx, 12, "ln", sl_layernorm(12, LN_EPS));
    randomise_param(net, 0, 1.0f, 0.3f, 11);
    randomise_param(net, 1, 0.0f, 0.3f, 12);
    sl_shape in = sl_shape_seq(2, 5, 12);
    float *x = normal_input(in, 13, 1.0f, 0.5f);
    gradcheck(net, x, in, 1);
    free(x);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_conv1d_gradients_match_finite_differences_on_tokens_and_vectors)
{
    sl_context *ctx = th_context(1);
    sl_shape shapes[2] = {sl_shape_seq(2, 4, 7), sl_shape_nchw(5, 7, 1, 1)};
    for (int k = 0; k < 2; k++) {
        sl_net *net = one_layer(ctx, 7, "c_fc", sl_conv1d(7, 9));
        randomise_param(net, 0, 0.0f, 0.4f, 21);
        randomise_param(net, 1, 0.0f, 0.4f, 22);
        sl_shape out;
        ck_assert(sl_net_output_shape(net, shapes[k], &out) == SL_OK);
        ck_assert_int_eq(out.n, shapes[k].n);
        ck_assert_int_eq(out.c, 9);
        ck_assert_int_eq(out.h, shapes[k].h);
        ck_assert_int_eq(out.w, 1);
        float *x = normal_input(shapes[k], 23, 1.0f, 0.0f);
        gradcheck(net, x, shapes[k], 1);
        free(x);
        sl_net_free(net);
    }
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_gelu_gradients_match_finite_differences)
{
    sl_context *ctx = th_context(1);
    sl_net *net = one_layer(ctx, 6, "act", sl_gelu());
    sl_shape in = sl_shape_seq(2, 4, 6);
    float *x = normal_input(in, 31, 2.0f, 0.0f);
    gradcheck(net, x, in, 1);
    free(x);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_embedding_parameter_gradients_match_finite_differences)
{
    sl_context *ctx = th_context(1);
    sl_net *net = one_layer(ctx, 1, "transformer", sl_embedding(7, 6, 5));
    sl_shape in = sl_shape_seq(3, 4, 1);
    int32_t *ids = token_ids(count_of(in), 7, 41);
    th_gradcheck_result r;
    th_gradcheck_tokens(net, ids, in, 24, EPS, RTOL, ATOL, &r);
    ck_assert_msg(r.skipped_kinks == 0 && r.checked > 0 && r.worst_error <= 1.0,
                  "%d kinks, %d checked, worst %s (error %.3g of tolerance)", r.skipped_kinks,
                  r.checked, r.worst, r.worst_error);
    free(ids);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_layernorm_conv1d_gelu_conv1d_gradients_match_finite_differences)
{
    sl_context *ctx = th_context(1);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 8, &net) == SL_OK);
    ck_assert(sl_net_add(net, "ln_2", sl_layernorm(8, LN_EPS)) == SL_OK);
    ck_assert(sl_net_add(net, "c_fc", sl_conv1d(8, 16)) == SL_OK);
    ck_assert(sl_net_add(net, "act", sl_gelu()) == SL_OK);
    ck_assert(sl_net_add(net, "c_proj", sl_conv1d(16, 8)) == SL_OK);
    randomise_param(net, 0, 1.0f, 0.2f, 51);
    randomise_param(net, 1, 0.0f, 0.2f, 52);
    for (int i = 2; i < 6; i++)
        randomise_param(net, i, 0.0f, 0.3f, 53 + (uint64_t)i);
    sl_shape in = sl_shape_seq(2, 3, 8);
    float *x = normal_input(in, 59, 1.0f, 0.2f);
    gradcheck(net, x, in, 1);
    free(x);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* ------------------------------------------------------------------ */
/* PyTorch float64                                                     */
/* ------------------------------------------------------------------ */

static void path_join(char *dst, const char *a, const char *b)
{
    int n = snprintf(dst, PATH_LEN, "%s/%s", a, b);
    ck_assert_msg(n > 0 && n < PATH_LEN, "path too long: %s/%s", a, b);
}

static void write_file(const char *dir, const char *name, const void *data, size_t bytes)
{
    char path[PATH_LEN];
    path_join(path, dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert(fwrite(data, 1, bytes, f) == bytes);
    ck_assert(fclose(f) == 0);
}

static double *read_doubles(const char *dir, const char *name, size_t count)
{
    char path[PATH_LEN];
    path_join(path, dir, name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "the reference did not write %s", path);
    double *v = malloc(count * sizeof(double) + 1);
    ck_assert(v);
    size_t got = fread(v, sizeof(double), count + 1, f);
    fclose(f);
    ck_assert_msg(got == count, "%s holds %zu values, expected %zu", path, got, count);
    return v;
}

/* One layer's case: the layer alone in a network named `name`, random
 * parameters, input x and output gradient dy written beside its manifest;
 * our output, dx and parameter gradients kept for the comparison. */
typedef struct ref_case {
    char dir[PATH_LEN];
    sl_net *net;
    int n_params;
    size_t n_out, n_in;
    float *out, *dx;
    float *grad[SL_MAX_PARAMS];
    size_t grad_count[SL_MAX_PARAMS];
} ref_case;

/* x: the input's floats, or (ids not NULL) token ids, written alike (4
 * bytes a value) for the script */
static void ref_prepare(ref_case *c, const char *name, const char *manifest, const float *x,
                        const int32_t *ids, sl_shape in, int want_dx)
{
    path_join(c->dir, g_root, name);
    ck_assert_msg(mkdir(c->dir, 0700) == 0, "mkdir %s failed", c->dir);
    write_file(c->dir, "case.txt", manifest, strlen(manifest));
    c->n_params = th_param_count(c->net);
    for (int i = 0; i < c->n_params; i++) {
        sl_param_info pi;
        ck_assert(sl_net_param(c->net, i, &pi) == SL_OK);
        char file[32];
        snprintf(file, sizeof file, "param%d.bin", i);
        write_file(c->dir, file, pi.data, pi.count * sizeof(float));
    }
    sl_shape out;
    ck_assert(sl_net_output_shape(c->net, in, &out) == SL_OK);
    c->n_in = count_of(in);
    c->n_out = count_of(out);
    float *dy = normal_input(out, 0xd7, 1.0f, 0.0f);
    c->out = malloc(c->n_out * sizeof(float));
    c->dx = want_dx ? malloc(c->n_in * sizeof(float)) : NULL;
    ck_assert(c->out && (c->dx || !want_dx));
    ck_assert_msg(th_forward_backward(c->net, x, ids, in, dy, c->out, c->dx) == SL_OK, "%s",
                  sl_last_error());
    for (int i = 0; i < c->n_params; i++) {
        sl_param_info pi;
        ck_assert(sl_net_param(c->net, i, &pi) == SL_OK);
        c->grad_count[i] = pi.count;
        c->grad[i] = malloc(pi.count * sizeof(float));
        ck_assert(c->grad[i]);
        ck_assert(sl_net_param_read_grad(c->net, i, c->grad[i]) == SL_OK);
    }
    write_file(c->dir, "x.bin", ids ? (const void *)ids : (const void *)x, c->n_in * 4);
    write_file(c->dir, "dy.bin", dy, c->n_out * sizeof(float));
    free(dy);
}

/* One run of the script over every case written (an interpreter start
 * with torch takes seconds). */
static void run_reference(void)
{
    char cmd[3 * PATH_LEN + 32];
    snprintf(cmd, sizeof cmd, "'%s' '%s/transformer_reference.py' '%s' 2>&1", g_python,
             SL_TEST_SOURCE_DIR, g_root);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
}

/* |ours - ref| <= ulps * 2^-24 * M for each element of result `key`. */
static void ref_compare(const ref_case *c, const char *key, const float *ours, size_t count,
                        double ulps)
{
    char name[64];
    snprintf(name, sizeof name, "ref.%s.bin", key);
    double *ref = read_doubles(c->dir, name, count);
    snprintf(name, sizeof name, "mag.%s.bin", key);
    double *mag = read_doubles(c->dir, name, count);
    double unit = ulps * ldexp(1.0, -24), worst = 0.0, ref_max = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        /* a zero bound (an unused embedding row) allows no error at all */
        double e = fabs((double)ours[i] - ref[i]);
        double r = e == 0.0 ? 0.0 : e / (unit * mag[i]);
        ref_max = fmax(ref_max, fabs(ref[i]));
        if (r > worst || r != r) {
            worst = r;
            at = i;
        }
    }
    printf("%s %s: worst error %.3g of its bound\n", strrchr(c->dir, '/') + 1, key, worst);
    ck_assert_msg(ref_max > 0.0, "%s: the reference is all zeros", key);
    ck_assert_msg(worst <= 1.0,
                  "%s[%zu]: ours %.9g, torch %.9g: error %.3g above %g ulps of %.3g", key, at,
                  (double)ours[at], ref[at], fabs((double)ours[at] - ref[at]), ulps, mag[at]);
    free(ref);
    free(mag);
}

static void ref_free(ref_case *c)
{
    free(c->out);
    free(c->dx);
    for (int i = 0; i < c->n_params; i++)
        free(c->grad[i]);
    sl_net_free(c->net);
}

static int have_torch(void)
{
    if (g_root[0])
        return 1;
    printf("SKIPPED: python3-torch not importable (%s)\n", g_python);
    return 0;
}

START_TEST(test_layers_match_torch_float64)
{
    if (!have_torch())
        return;
    sl_context *ctx = th_context(2);

    ref_case ln = {.net = one_layer(ctx, 24, "ln", sl_layernorm(24, LN_EPS))};
    randomise_param(ln.net, 0, 1.0f, 0.3f, 61);
    randomise_param(ln.net, 1, 0.0f, 0.3f, 62);
    sl_shape ln_in = sl_shape_seq(2, 5, 24);
    float *ln_x = normal_input(ln_in, 63, 2.0f, 0.7f);
    char manifest[128];
    snprintf(manifest, sizeof manifest, "layernorm 24 %.9g 10\n", (double)LN_EPS);
    ref_prepare(&ln, "layernorm", manifest, ln_x, NULL, ln_in, 1);

    ref_case cv = {.net = one_layer(ctx, 16, "c_attn", sl_conv1d(16, 12))};
    randomise_param(cv.net, 1, 0.0f, 0.5f, 71); /* the bias starts at zero */
    sl_shape cv_in = sl_shape_seq(3, 5, 16);
    float *cv_x = normal_input(cv_in, 72, 1.0f, 0.0f);
    ref_prepare(&cv, "conv1d", "conv1d 16 12 15\n", cv_x, NULL, cv_in, 1);

    ref_case ge = {.net = one_layer(ctx, 10, "act", sl_gelu())};
    sl_shape ge_in = sl_shape_seq(2, 6, 10);
    float *ge_x = normal_input(ge_in, 81, 2.5f, 0.0f);
    ref_prepare(&ge, "gelu", "gelu 120\n", ge_x, NULL, ge_in, 1);

    ref_case em = {.net = one_layer(ctx, 1, "transformer", sl_embedding(9, 8, 6))};
    sl_param_info pi;
    ck_assert(sl_net_param(em.net, 0, &pi) == SL_OK);
    ck_assert_str_eq(pi.name, "transformer.wte.weight");
    ck_assert(sl_net_param(em.net, 1, &pi) == SL_OK);
    ck_assert_str_eq(pi.name, "transformer.wpe.weight");
    sl_shape em_in = sl_shape_seq(4, 7, 1);
    int32_t *em_ids = token_ids(count_of(em_in), 9, 91);
    ref_prepare(&em, "embedding", "embedding 9 8 6 4 7\n", NULL, em_ids, em_in, 0);

    run_reference();

    /* LayerNorm out: mean, x - mean, rstd, xhat, * weight, + bias; dx:
     * xhat's and the row means' roundings, three products and two
     * differences; dweight: xhat's roundings in each term, then one to
     * float; dbias: a double sum rounded once */
    ref_compare(&ln, "out", ln.out, ln.n_out, 8);
    ref_compare(&ln, "dx", ln.dx, ln.n_in, 16);
    ref_compare(&ln, "grad0", ln.grad[0], ln.grad_count[0], 8);
    ref_compare(&ln, "grad1", ln.grad[1], ln.grad_count[1], 2);
    /* Conv1D: a float32 sum of k products rounds k times (+1: the bias,
     * or the zeroed gradient it is added to) */
    ref_compare(&cv, "out", cv.out, cv.n_out, 16 + 2);
    ref_compare(&cv, "dx", cv.dx, cv.n_in, 12 + 1);
    ref_compare(&cv, "grad0", cv.grad[0], cv.grad_count[0], 15 + 1);
    ref_compare(&cv, "grad1", cv.grad[1], cv.grad_count[1], 2);
    /* GELU: tanhf (2 ulps) and the cube's roundings carried through, see
     * the script's magnitudes */
    ref_compare(&ge, "out", ge.out, ge.n_out, 8);
    ref_compare(&ge, "dx", ge.dx, ge.n_in, 16);
    /* embedding out: one add; wte: a float sum over the (up to 28)
     * tokens of an id; wpe: over the 4 sequences */
    ref_compare(&em, "out", em.out, em.n_out, 1);
    ref_compare(&em, "grad0", em.grad[0], em.grad_count[0], 28);
    ref_compare(&em, "grad1", em.grad[1], em.grad_count[1], 4);

    free(ln_x);
    free(cv_x);
    free(ge_x);
    free(em_ids);
    ref_free(&ln);
    ref_free(&cv);
    ref_free(&ge);
    ref_free(&em);
    sl_context_free(ctx);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Threads, initialisation, errors                                     */
/* ------------------------------------------------------------------ */

/* embedding -> LayerNorm -> GELU, big enough (4 x 64 tokens of 160
 * channels: three column blocks) that every kernel splits over the team;
 * returns its output and every gradient, concatenated. (Conv1D is left
 * out: its GEMM tiles depend on the team size, see cpu_gemm.c, so its bits
 * are fixed for a given thread count only.) */
static float *token_stack_run(int threads, size_t *len)
{
    enum { B = 4, T = 64, C = 160, VOCAB = 50 };
    sl_context *ctx = context_of(threads, 7);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 1, &net) == SL_OK);
    ck_assert(sl_net_add(net, "transformer", sl_embedding(VOCAB, T, C)) == SL_OK);
    ck_assert(sl_net_add(net, "ln_2", sl_layernorm(C, LN_EPS)) == SL_OK);
    ck_assert(sl_net_add(net, "act", sl_gelu()) == SL_OK);
    int np = th_param_count(net);
    sl_shape in = sl_shape_seq(B, T, 1), out = sl_shape_seq(B, T, C);
    size_t total = count_of(out);
    for (int i = 0; i < np; i++) {
        sl_param_info pi;
        ck_assert(sl_net_param(net, i, &pi) == SL_OK);
        total += pi.count;
    }
    float *all = malloc(total * sizeof(float));
    int32_t *ids = token_ids(count_of(in), VOCAB, 101);
    float *dy = normal_input(out, 102, 1.0f, 0.0f);
    ck_assert(all);
    ck_assert_msg(sl_net_forward_backward_tokens(net, ids, B, T, dy, all) == SL_OK, "%s",
                  sl_last_error());
    size_t at = count_of(out);
    for (int i = 0; i < np; i++) {
        sl_param_info pi;
        ck_assert(sl_net_param(net, i, &pi) == SL_OK);
        ck_assert(sl_net_param_read_grad(net, i, all + at) == SL_OK);
        at += pi.count;
    }
    free(ids);
    free(dy);
    sl_net_free(net);
    sl_context_free(ctx);
    *len = total;
    return all;
}

START_TEST(test_embedding_layernorm_gelu_bit_identical_on_one_and_two_threads)
{
    size_t n1, n2;
    float *one = token_stack_run(1, &n1);
    float *two = token_stack_run(2, &n2);
    ck_assert_uint_eq(n1, n2);
    size_t differ = 0;
    for (size_t i = 0; i < n1; i++)
        differ += memcmp(&one[i], &two[i], sizeof(float)) != 0;
    ck_assert_msg(differ == 0, "%zu of %zu values differ between 1 and 2 threads", differ, n1);
    free(one);
    free(two);
}
END_TEST

/* Two GPT-2 MLP blocks after the embedding (ln -> c_fc -> gelu -> c_proj,
 * no residual) under `schedule`; its output, and every parameter with its
 * gradient into params. */
static float *mlp_stack_run(sl_schedule schedule, th_params *params)
{
    enum { B = 2, T = 8, C = 16, VOCAB = 20 };
    sl_context *ctx = th_context(3);
    sl_net *net = NULL;
    ck_assert(sl_sublinear(ctx, 1, schedule, &net) == SL_OK);
    ck_assert(sl_net_add(net, "transformer", sl_embedding(VOCAB, T, C)) == SL_OK);
    for (int h = 0; h < 2; h++) {
        char name[32];
        snprintf(name, sizeof name, "h.%d.ln_2", h);
        ck_assert(sl_net_add(net, name, sl_layernorm(C, LN_EPS)) == SL_OK);
        snprintf(name, sizeof name, "h.%d.mlp.c_fc", h);
        ck_assert(sl_net_add(net, name, sl_conv1d(C, 4 * C)) == SL_OK);
        snprintf(name, sizeof name, "h.%d.mlp.act", h);
        ck_assert(sl_net_add(net, name, sl_gelu()) == SL_OK);
        snprintf(name, sizeof name, "h.%d.mlp.c_proj", h);
        ck_assert(sl_net_add(net, name, sl_conv1d(4 * C, C)) == SL_OK);
    }
    sl_shape in = sl_shape_seq(B, T, 1), out = sl_shape_seq(B, T, C);
    int32_t *ids = token_ids(count_of(in), VOCAB, 111);
    float *dy = normal_input(out, 112, 1.0f, 0.0f);
    float *y = malloc(count_of(out) * sizeof(float));
    ck_assert(y);
    ck_assert_msg(sl_net_forward_backward_tokens(net, ids, B, T, dy, y) == SL_OK, "%s",
                  sl_last_error());
    if (schedule.kind != SL_SCHEDULE_KIND_NONE)
        ck_assert_msg(th_most_forwards(net) >= 2, "the schedule recomputed nothing");
    th_params_capture(net, params);
    free(ids);
    free(dy);
    sl_net_free(net);
    sl_context_free(ctx);
    return y;
}

START_TEST(test_checkpointed_mlp_stack_bit_identical_to_plain)
{
    th_params plain, ckpt;
    float *y_plain = mlp_stack_run(SL_SCHEDULE_NONE, &plain);
    float *y_ckpt = mlp_stack_run(SL_SCHEDULE_SQRT, &ckpt);
    ck_assert(memcmp(y_plain, y_ckpt, 2 * 8 * 16 * sizeof(float)) == 0);
    th_params_assert_identical(&plain, &ckpt, "sqrt checkpointing against none");
    th_params_free(&plain);
    th_params_free(&ckpt);
    free(y_plain);
    free(y_ckpt);
}
END_TEST

/* The sample standard deviation of parameter i. */
static double param_std(sl_net *net, int i, double *mean)
{
    sl_param_info pi;
    ck_assert(sl_net_param(net, i, &pi) == SL_OK);
    double s = 0.0, q = 0.0;
    for (size_t k = 0; k < pi.count; k++) {
        s += pi.data[k];
        q += (double)pi.data[k] * pi.data[k];
    }
    *mean = s / (double)pi.count;
    return sqrt(q / (double)pi.count - *mean * *mean);
}

START_TEST(test_gpt2_inits_are_normal_with_their_std)
{
    sl_context *ctx = th_context(5);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 1, &net) == SL_OK);
    ck_assert(sl_net_add(net, "transformer", sl_embedding(100, 64, 64)) == SL_OK);
    ck_assert(sl_net_add(net, "ln", sl_layernorm(64, LN_EPS)) == SL_OK);
    ck_assert(sl_net_add(net, "c_fc", sl_conv1d(64, 128)) == SL_OK);
    sl_layer *proj = sl_conv1d(128, 64);
    ck_assert_int_eq(sl_conv1d_set_init_std(proj, 0.005f), 0);
    ck_assert(sl_net_add(net, "c_proj", proj) == SL_OK);
    /* wte, wpe, c_fc.weight at 0.02; c_proj.weight at 0.005; 4096+ draws
     * each: the sample std lies within 5% (over 3 standard errors) */
    int normal[4] = {0, 1, 4, 6};
    double want[4] = {0.02, 0.02, 0.02, 0.005};
    for (int k = 0; k < 4; k++) {
        double mean, sd = param_std(net, normal[k], &mean);
        ck_assert_msg(fabs(sd / want[k] - 1.0) < 0.05, "param %d: std %g, want %g", normal[k],
                      sd, want[k]);
        ck_assert_msg(fabs(mean) < 0.05 * want[k], "param %d: mean %g", normal[k], mean);
    }
    /* LayerNorm's ones and zeros, the Conv1D biases zero */
    int constant[4] = {2, 3, 5, 7};
    double value[4] = {1.0, 0.0, 0.0, 0.0};
    for (int k = 0; k < 4; k++) {
        double mean, sd = param_std(net, constant[k], &mean);
        ck_assert(sd == 0.0 && mean == value[k]);
    }
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_conv1d_set_init_std_refuses_other_layers_and_bad_std)
{
    sl_layer *relu = sl_relu();
    ck_assert_int_eq(sl_conv1d_set_init_std(relu, 0.01f), -1);
    ck_assert_ptr_nonnull(strstr(sl_last_error(), "not a Conv1D layer"));
    sl_layer_free(relu);
    sl_layer *c = sl_conv1d(4, 4);
    ck_assert_int_eq(sl_conv1d_set_init_std(c, 0.0f), -1);
    ck_assert_ptr_nonnull(strstr(sl_last_error(), "positive and finite"));
    ck_assert_int_eq(sl_conv1d_set_init_std(c, NAN), -1);
    sl_layer_free(c);
}
END_TEST

START_TEST(test_transformer_layers_name_their_shape_errors)
{
    sl_context *ctx = th_context(1);
    sl_net *net = one_layer(ctx, 1, "transformer", sl_embedding(10, 8, 4));
    sl_shape out;
    th_assert_error(sl_net_output_shape(net, sl_shape_seq(2, 9, 1), &out), SL_ERR_SHAPE,
                    "9 tokens is longer than the context of 8");
    th_assert_error(sl_net_output_shape(net, sl_shape_nchw(2, 1, 8, 2), &out), SL_ERR_SHAPE,
                    "takes token ids [B, T]");
    ck_assert(sl_net_output_shape(net, sl_shape_seq(2, 8, 1), &out) == SL_OK);
    ck_assert(out.n == 2 && out.c == 4 && out.h == 8 && out.w == 1);
    sl_net_free(net);

    net = NULL;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    th_assert_error(sl_net_add(net, "transformer", sl_embedding(10, 8, 4)), SL_ERR_SHAPE,
                    "one channel of token ids");
    sl_net_free(net);

    /* channels are checked as layers are added */
    net = one_layer(ctx, 6, "c_fc", sl_conv1d(6, 5));
    th_assert_error(sl_net_add(net, "ln", sl_layernorm(6, LN_EPS)), SL_ERR_SHAPE,
                    "LayerNorm 'ln' expects 6 input channels but receives 5");
    th_assert_error(sl_net_add(net, "c_proj", sl_conv1d(6, 2)), SL_ERR_SHAPE,
                    "Conv1D 'c_proj' expects 6 input channels but receives 5");
    sl_net_free(net);
    ck_assert_ptr_null(sl_layernorm(4, 0.0f));
    ck_assert_ptr_null(sl_conv1d(0, 4));
    ck_assert_ptr_null(sl_embedding(10, 0, 4));
    sl_context_free(ctx);
}
END_TEST

/* A shape says how its values lie: the layers that read rows of channels
 * (LayerNorm, Conv1D, attention) refuse an NCHW tensor where the layout
 * matters (more than one channel at more than one position), the layers
 * that read NCHW planes (convolutions, Linear's flattening) refuse an NHWC
 * one, the layers that make sequences say so in their output's shape, and
 * the DOT graph prints them as B x T x C. */
START_TEST(test_layouts_are_checked)
{
    sl_context *ctx = th_context(1);
    sl_shape out;
    sl_net *net = one_layer(ctx, 12, "ln", sl_layernorm(12, LN_EPS));
    th_assert_error(sl_net_output_shape(net, sl_shape_nchw(2, 12, 5, 1), &out), SL_ERR_SHAPE,
                    "LayerNorm 'ln' reads rows of channels (a sequence [B, T, C], NHWC), but its "
                    "input is NCHW 2x12x5x1; give a sequence's shape as sl_shape_seq(B, T, C)");
    ck_assert_msg(sl_net_output_shape(net, sl_shape_seq(2, 5, 12), &out) == SL_OK, "%s",
                  sl_last_error());
    ck_assert(out.layout == SL_LAYOUT_NHWC && out.n == 2 && out.c == 12 && out.h == 5 && out.w == 1);
    /* one position per row: NCHW and NHWC are the same memory */
    ck_assert_msg(sl_net_output_shape(net, sl_shape_nchw(6, 12, 1, 1), &out) == SL_OK, "%s",
                  sl_last_error());
    sl_shape bad = sl_shape_seq(2, 5, 12);
    bad.layout = (sl_layout)3;
    th_assert_error(sl_net_output_shape(net, bad, &out), SL_ERR_SHAPE, "has layout 3");
    sl_net_free(net);

    net = one_layer(ctx, 24, "attn", sl_causal_attention(8, 2, 0.0f, 1));
    th_assert_error(sl_net_output_shape(net, sl_shape_nchw(2, 24, 5, 1), &out), SL_ERR_SHAPE,
                    "CausalAttention 'attn' reads rows of channels");
    ck_assert(sl_net_output_shape(net, sl_shape_seq(2, 5, 24), &out) == SL_OK);
    ck_assert(out.layout == SL_LAYOUT_NHWC && out.c == 8 && out.h == 5);
    sl_net_free(net);

    /* tokens -> embedding -> Conv1D: a sequence; a convolution or Linear
     * after it reads NCHW planes and refuses it */
    for (int k = 0; k < 3; k++) {
        net = one_layer(ctx, 1, "wte", sl_embedding(10, 8, 4));
        ck_assert(sl_net_add(net, "c_fc", sl_conv1d(4, 6)) == SL_OK);
        if (k == 0) {
            ck_assert(sl_net_output_shape(net, sl_shape_seq(2, 8, 1), &out) == SL_OK);
            ck_assert(out.layout == SL_LAYOUT_NHWC && out.n == 2 && out.c == 6 && out.h == 8);
            char dir[] = "/tmp/sl_layout_XXXXXX", path[256], line[512];
            ck_assert(mkdtemp(dir));
            snprintf(path, sizeof path, "%s/net.dot", dir);
            ck_assert(sl_net_write_dot(net, sl_shape_seq(2, 8, 1), SL_MODE_TRAIN, path) == SL_OK);
            FILE *f = fopen(path, "r");
            ck_assert(f);
            int seen = 0;
            while (fgets(line, sizeof line, f))
                seen += strstr(line, "2x8x6 (B x T x C)") != NULL;
            fclose(f);
            ck_assert_int_eq(seen, 1);
            unlink(path);
            rmdir(dir);
        } else if (k == 1) {
            ck_assert(sl_net_add(net, "conv", sl_conv2d(6, 3, 1, 1, 0)) == SL_OK);
            th_assert_error(sl_net_output_shape(net, sl_shape_seq(2, 8, 1), &out), SL_ERR_SHAPE,
                            "Conv2d 'conv' reads NCHW images, but its input is 2x8x6 (B x T x C)");
        } else {
            ck_assert(sl_net_add(net, "fc", sl_linear(6, 3, 1)) == SL_OK);
            th_assert_error(sl_net_output_shape(net, sl_shape_seq(2, 8, 1), &out), SL_ERR_SHAPE,
                            "Linear 'fc' reads NCHW images");
            /* one position: a feature vector, which Linear takes */
            ck_assert_msg(sl_net_output_shape(net, sl_shape_seq(2, 1, 1), &out) == SL_OK, "%s",
                          sl_last_error());
            ck_assert(out.n == 2 && out.c == 3 && out.h == 1 && out.w == 1);
        }
        sl_net_free(net);
    }
    sl_context_free(ctx);
}
END_TEST

/* The embedding's input is int32 token ids: the network's input is an
 * I32 value of the plan, given through the _tokens runs only; the float
 * runs refuse such a network (and the _tokens runs a float one), leaving
 * it as it was (still open to layers); an embedding must be the first
 * layer. */
START_TEST(test_token_ids_are_an_int32_input_given_by_the_token_runs)
{
    enum { B = 2, T = 4, C = 6, VOCAB = 11 };
    sl_context *ctx = th_context(1);
    sl_net *net = one_layer(ctx, 1, "transformer", sl_embedding(VOCAB, T, C));
    sl_shape in = sl_shape_seq(B, T, 1), out = sl_shape_seq(B, T, C);
    int32_t *ids = token_ids(count_of(in), VOCAB, 7);
    float *dy = normal_input(out, 8, 1.0f, 0.0f), *y = malloc(count_of(out) * sizeof(float));
    float x[B * T];
    memcpy(x, ids, sizeof x); /* the ids' bits, as floats: refused */
    th_assert_error(sl_net_forward_backward(net, x, in, dy, y, NULL), SL_ERR_INVALID_ARG,
                    "input is int32 token ids");
    th_assert_error(sl_net_predict(net, x, in, y), SL_ERR_INVALID_ARG,
                    "give them to the _tokens functions");
    /* refused before finalising: layers can still be added */
    ck_assert_msg(sl_net_add(net, "ln_f", sl_layernorm(C, LN_EPS)) == SL_OK, "%s", sl_last_error());
    ck_assert_msg(sl_net_forward_backward_tokens(net, ids, B, T, dy, y) == SL_OK, "%s",
                  sl_last_error());
    float *pred = malloc(count_of(out) * sizeof(float));
    ck_assert(sl_net_predict_tokens(net, ids, B, T, pred) == SL_OK);
    ck_assert(memcmp(pred, y, count_of(out) * sizeof(float)) == 0); /* no dropout: the same */
    ids[3] = VOCAB; /* the embedding's vocabulary bounds the ids without a head */
    th_assert_error(sl_net_predict_tokens(net, ids, B, T, pred), SL_ERR_INVALID_ARG,
                    "token id 11 at position 3 is outside the vocabulary [0, 11)");
    ids[3] = 0;
    /* the plan's input value: I32 */
    sl_graph g;
    sl_layer *top[1] = {sl_embedding(VOCAB, T, C)};
    ck_assert(sl_graph_build(top, 1, &g) == SL_OK);
    sl_dtype dt;
    ck_assert(sl_graph_input_dtype(&g, &dt) == SL_OK && dt == SL_DTYPE_I32);
    sl_shapes sh;
    ck_assert(sl_shapes_compute(&g, ctx->backend, in, &sh) == SL_OK);
    ck_assert_int_eq(sl_shapes_dtype(&sh, 0), SL_DTYPE_I32);
    ck_assert_int_eq(sl_shapes_dtype(&sh, 1), SL_DTYPE_F32);
    sl_shapes_release(&sh);
    sl_graph_release(&g);
    sl_layer_free(top[0]);
    sl_net_free(net);

    /* a float network refuses ids */
    net = one_layer(ctx, C, "ln", sl_layernorm(C, LN_EPS));
    th_assert_error(sl_net_forward_backward_tokens(net, ids, B, T, dy, y), SL_ERR_INVALID_ARG,
                    "input is floats");
    sl_net_free(net);
    /* an embedding after another layer reads no ids */
    net = one_layer(ctx, 1, "c_in", sl_conv1d(1, 1));
    ck_assert(sl_net_add(net, "transformer", sl_embedding(VOCAB, T, C)) == SL_OK);
    th_assert_error(sl_net_output_shape(net, in, &out), SL_ERR_SHAPE,
                    "Embedding 'transformer' reads token ids, which only the network's input "
                    "holds: it must be the first layer");
    sl_net_free(net);
    free(ids);
    free(dy);
    free(y);
    free(pred);
    sl_context_free(ctx);
}
END_TEST

/* ------------------------------------------------------------------ */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int main(void)
{
    const char *py = getenv("SL_TEST_PYTHON");
    snprintf(g_python, sizeof g_python, "%s", py && *py ? py : "/usr/bin/python3");
    char cmd[PATH_LEN + 64];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torch, numpy' >/dev/null 2>&1", g_python);
    if (access(g_python, X_OK) == 0 && system(cmd) == 0) {
        snprintf(g_root, sizeof g_root, "/tmp/sl_transformer_XXXXXX");
        if (!mkdtemp(g_root)) {
            perror("mkdtemp");
            return 1;
        }
    }
    Suite *s = suite_create("transformer_layers");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_layernorm_gradients_match_finite_differences);
    tcase_add_test(tc, test_layouts_are_checked);
    tcase_add_test(tc, test_conv1d_gradients_match_finite_differences_on_tokens_and_vectors);
    tcase_add_test(tc, test_gelu_gradients_match_finite_differences);
    tcase_add_test(tc, test_embedding_parameter_gradients_match_finite_differences);
    tcase_add_test(tc, test_layernorm_conv1d_gelu_conv1d_gradients_match_finite_differences);
    tcase_add_test(tc, test_layers_match_torch_float64);
    tcase_add_test(tc, test_embedding_layernorm_gelu_bit_identical_on_one_and_two_threads);
    tcase_add_test(tc, test_checkpointed_mlp_stack_bit_identical_to_plain);
    tcase_add_test(tc, test_gpt2_inits_are_normal_with_their_std);
    tcase_add_test(tc, test_conv1d_set_init_std_refuses_other_layers_and_bad_std);
    tcase_add_test(tc, test_transformer_layers_name_their_shape_errors);
    tcase_add_test(tc, test_token_ids_are_an_int32_input_given_by_the_token_runs);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    if (g_root[0] && !getenv("SL_TEST_KEEP_TMP"))
        nftw(g_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return failed ? 1 : 0;
}
