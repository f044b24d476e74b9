/*
 * test_optim.c — training as GPT-2 users expect: AdamW (decay on >= 2-d
 * parameters only), global-norm gradient clipping and the warmup + cosine
 * learning rate against PyTorch (torch.optim.AdamW with two parameter
 * groups, clip_grad_norm_, float64) on a small MLP with the same weights
 * and data; the gradient norm's sum of squares against a double
 * computation; gradient accumulation (k micro-batches step as one batch of
 * k times the size, bit for bit the same checkpointed or not, and an
 * update before the k-th micro-batch is refused without changing
 * anything); the update kernels' grad_scale.
 *
 * The PyTorch test is skipped, visibly, without a python3 that imports
 * torch (/usr/bin/python3, or $SL_TEST_PYTHON).
 */
#define _XOPEN_SOURCE 700

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/backend.h"
#include "cpu/cpu.h"
#include "harness.h"

/* The MLP of the PyTorch comparison: flatten, linear, ReLU, linear. */
enum { MLP_C = 4, MLP_H = 2, MLP_W = 2, MLP_IN = MLP_C * MLP_H * MLP_W, MLP_HIDDEN = 12,
       MLP_CLASSES = 5 };

static sl_net *build_mlp(sl_context *ctx)
{
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, MLP_C, &net) == SL_OK);
    ck_assert(sl_net_add(net, NULL, sl_flatten()) == SL_OK);
    ck_assert(sl_net_add(net, NULL, sl_linear(MLP_IN, MLP_HIDDEN, 1)) == SL_OK);
    ck_assert(sl_net_add(net, NULL, sl_relu()) == SL_OK);
    ck_assert(sl_net_add(net, NULL, sl_linear(MLP_HIDDEN, MLP_CLASSES, 1)) == SL_OK);
    return net;
}

/* Batch `t` of n samples: normal inputs of a scale that varies with t
 * (so that gradient norms do, on both sides of a clip), labels spread
 * over the classes. */
static void mlp_batch(uint64_t t, int n, float *x, int *labels)
{
    th_fill_normal(x, (size_t)n * MLP_IN, 500 + t, 0.25f + 1.0f * (float)(t % 4));
    for (int i = 0; i < n; i++)
        labels[i] = (int)((t * 7 + (uint64_t)i * 3) % MLP_CLASSES);
}

static sl_shape mlp_shape(int n) { return sl_shape_nchw(n, MLP_C, MLP_H, MLP_W); }

/* ------------------------------------------------------------------ */
/* PyTorch: AdamW + clip_grad_norm_ + warmup/cosine                     */
/* ------------------------------------------------------------------ */

#define STEPS 7
#define BATCH 8
#define WARMUP 2
#define TOTAL 6
#define LR_MAX 0.02f
#define LR_MIN 0.002f
#define BETA1 0.9f
#define BETA2 0.95f
#define EPS 1e-8f
#define WD 0.1f
#define CLIP 0.9f
/* float32 against float64: a few ulps of float32 per operation, over a
 * handful of steps, relative to a tensor's largest value (the errors seen
 * are below 1e-6). */
#define REL_TOL 1e-5

static char g_python[512];

static int have_torch(void)
{
    const char *py = getenv("SL_TEST_PYTHON");
    snprintf(g_python, sizeof g_python, "%s", py && *py ? py : "/usr/bin/python3");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torch, numpy' >/dev/null 2>&1", g_python);
    return access(g_python, X_OK) == 0 && system(cmd) == 0;
}

static void write_file(const char *dir, const char *name, const void *data, size_t bytes)
{
    char path[768];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert(fwrite(data, 1, bytes, f) == bytes);
    ck_assert(fclose(f) == 0);
}

/* n float64 values of ref.<key>.bin into out. */
static void read_ref(const char *dir, const char *key, double *out, size_t n)
{
    char path[768];
    snprintf(path, sizeof path, "%s/ref.%s.bin", dir, key);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "PyTorch wrote no %s", path);
    ck_assert_msg(fread(out, sizeof(double), n, f) == n, "%s is short", path);
    fclose(f);
}

static double rel_error(const float *ours, const double *ref, size_t n)
{
    double worst = 0.0, scale = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)ours[i] - ref[i]);
        worst = d > worst ? d : worst;
        scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
    }
    return worst / scale;
}

static void remove_dir(const char *dir)
{
    if (getenv("SL_TEST_KEEP_TMP"))
        return;
    char cmd[768];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert(system(cmd) == 0);
}

/* Writes the weights, the data and config.txt for optim_reference.py. */
static void write_case(const char *dir, sl_net *net)
{
    char name[64];
    FILE *cfg;
    char path[768];
    snprintf(path, sizeof path, "%s/config.txt", dir);
    ck_assert((cfg = fopen(path, "w")) != NULL);
    fprintf(cfg, "steps %d\nbatch %d\nshape %d %d %d\nclasses %d\nhidden %d\n", STEPS, BATCH,
            MLP_C, MLP_H, MLP_W, MLP_CLASSES, MLP_HIDDEN);
    fprintf(cfg, "warmup %d\ntotal %d\nlr_max %.9g\nlr_min %.9g\n", WARMUP, TOTAL,
            (double)LR_MAX, (double)LR_MIN);
    fprintf(cfg, "beta1 %.9g\nbeta2 %.9g\neps %.9g\nweight_decay %.9g\nclip %.9g\n",
            (double)BETA1, (double)BETA2, (double)EPS, (double)WD, (double)CLIP);
    int n = th_param_count(net);
    for (int i = 0; i < n; i++) {
        sl_param_info p;
        ck_assert(sl_net_param(net, i, &p) == SL_OK);
        fprintf(cfg, "param %d %s %d", i, p.name, p.ndim);
        for (int k = 0; k < p.ndim; k++)
            fprintf(cfg, " %d", p.dims[k]);
        fprintf(cfg, "\n");
        snprintf(name, sizeof name, "param.%d.bin", i);
        write_file(dir, name, p.data, p.count * sizeof(float));
    }
    ck_assert(fclose(cfg) == 0);
    float x[BATCH * MLP_IN];
    int labels[BATCH];
    for (int s = 0; s < STEPS; s++) {
        mlp_batch((uint64_t)s, BATCH, x, labels);
        snprintf(name, sizeof name, "x.%d.bin", s);
        write_file(dir, name, x, sizeof x);
        snprintf(name, sizeof name, "labels.%d.bin", s);
        write_file(dir, name, labels, sizeof labels);
    }
}

static void run_reference(const char *dir)
{
    char cmd[2048], out[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s/optim_reference.py' '%s' 2>&1", g_python,
             SL_TEST_SOURCE_DIR, dir);
    FILE *p = popen(cmd, "r");
    ck_assert(p != NULL);
    size_t len = fread(out, 1, sizeof out - 1, p);
    out[len] = '\0';
    int rc = pclose(p);
    ck_assert_msg(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0,
                  "optim_reference.py failed: %s", out);
}

START_TEST(test_adamw_clip_cosine_match_torch)
{
    if (!have_torch()) {
        printf("SKIPPED: python3-torch not importable (%s)\n", g_python);
        return;
    }
    char dir[] = "/tmp/sl_optim_XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    sl_context *ctx = th_context(3);
    sl_net *net = build_mlp(ctx);
    int n = th_param_count(net);
    write_case(dir, net);

    sl_optimizer_options opt = sl_optimizer_adamw(LR_MAX, BETA1, BETA2, EPS, WD);
    ck_assert(sl_net_set_optimizer(net, &opt) == SL_OK);
    ck_assert(sl_net_set_grad_clip(net, CLIP) == SL_OK);
    float lr[STEPS], loss[STEPS], norm[STEPS];
    float x[BATCH * MLP_IN];
    int labels[BATCH], clipped = 0;
    for (int s = 0; s < STEPS; s++) {
        lr[s] = sl_lr_warmup_cosine(s, WARMUP, TOTAL, LR_MAX, LR_MIN);
        ck_assert(sl_net_set_lr(net, lr[s]) == SL_OK);
        mlp_batch((uint64_t)s, BATCH, x, labels);
        sl_step_result r;
        ck_assert_msg(sl_net_train_step(net, x, mlp_shape(BATCH), labels, &r) == SL_OK, "%s",
                      sl_last_error());
        loss[s] = r.loss;
        ck_assert(sl_net_last_grad_norm(net, &norm[s]) == SL_OK);
        clipped += norm[s] > CLIP;
    }
    /* The case exercises both sides of the clip. */
    ck_assert_msg(clipped > 0 && clipped < STEPS, "%d of %d steps clipped", clipped, STEPS);

    run_reference(dir);
    char key[64];
    double ref;
    for (int s = 0; s < STEPS; s++) {
        snprintf(key, sizeof key, "lr.%d", s);
        read_ref(dir, key, &ref, 1);
        ck_assert_msg(fabs(lr[s] - ref) <= 1e-6 * ref, "lr of step %d: %.9g, torch %.9g", s,
                      (double)lr[s], ref);
        snprintf(key, sizeof key, "loss.%d", s);
        read_ref(dir, key, &ref, 1);
        ck_assert_msg(rel_error(&loss[s], &ref, 1) <= REL_TOL, "loss of step %d: %.9g, torch %.9g",
                      s, (double)loss[s], ref);
        snprintf(key, sizeof key, "norm.%d", s);
        read_ref(dir, key, &ref, 1);
        ck_assert_msg(rel_error(&norm[s], &ref, 1) <= REL_TOL,
                      "gradient norm of step %d: %.9g, torch %.9g", s, (double)norm[s], ref);
    }
    for (int i = 0; i < n; i++) {
        sl_param_info p;
        ck_assert(sl_net_param(net, i, &p) == SL_OK);
        double *after = malloc(p.count * sizeof(double));
        ck_assert(after != NULL);
        snprintf(key, sizeof key, "after.%d", i);
        read_ref(dir, key, after, p.count);
        double e = rel_error(p.data, after, p.count);
        ck_assert_msg(e <= REL_TOL, "%s after %d AdamW steps: relative error %.3g", p.name, STEPS, e);
        free(after);
    }
    sl_net_free(net);
    sl_context_free(ctx);
    remove_dir(dir);
}
END_TEST

START_TEST(test_warmup_cosine_shape)
{
    const float hi = 0.6f, lo = 0.1f;
    ck_assert_float_eq(sl_lr_warmup_cosine(0, 4, 20, hi, lo), hi * 1 / 4.0f);
    ck_assert_float_eq(sl_lr_warmup_cosine(3, 4, 20, hi, lo), hi);
    ck_assert_float_eq(sl_lr_warmup_cosine(4, 4, 20, hi, lo), hi);
    ck_assert_float_eq_tol(sl_lr_warmup_cosine(12, 4, 20, hi, lo), (hi + lo) / 2, 1e-6f);
    ck_assert_float_eq(sl_lr_warmup_cosine(20, 4, 20, hi, lo), lo);
    ck_assert_float_eq(sl_lr_warmup_cosine(1000, 4, 20, hi, lo), lo);
    ck_assert_float_eq(sl_lr_warmup_cosine(0, 0, 10, hi, lo), hi);
    float prev = hi;
    for (int s = 5; s <= 20; s++) { /* decreasing along the cosine */
        float v = sl_lr_warmup_cosine(s, 4, 20, hi, lo);
        ck_assert(v < prev && v >= lo);
        prev = v;
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Sum of squares                                                      */
/* ------------------------------------------------------------------ */

START_TEST(test_sum_squares_matches_double)
{
    sl_backend *be = NULL;
    ck_assert(sl_cpu_backend_create(2, &be) == SL_OK);
    sl_exec ex = {be, 2, 0, NULL};
    const size_t sizes[] = {1, 7, 1024, 1025, 40000, 100003};
    double slots[SL_SUM_SQUARES_SLOTS], total_ref = 0.0;
    memset(slots, 0, sizeof slots);
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        float *x = malloc(sizes[k] * sizeof(float));
        ck_assert(x != NULL);
        th_fill_normal(x, sizes[k], 40 + k, 3.0f);
        double ref = 0.0;
        for (size_t i = 0; i < sizes[k]; i++)
            ref += (double)x[i] * (double)x[i];
        total_ref += ref;
        double mine[SL_SUM_SQUARES_SLOTS], rule[SL_SUM_SQUARES_SLOTS], sum = 0.0;
        memset(mine, 0, sizeof mine);
        be->sum_squares(&ex, sizes[k], x, mine);
        /* the slots of backend.h's rule, bit for bit (the GPU's too) */
        for (int t = 0; t < SL_SUM_SQUARES_SLOTS; t++) {
            rule[t] = 0.0;
            for (size_t i = (size_t)t; i < sizes[k]; i += SL_SUM_SQUARES_SLOTS)
                rule[t] += (double)x[i] * (double)x[i];
        }
        ck_assert_msg(memcmp(mine, rule, sizeof mine) == 0, "%zu values: slots differ", sizes[k]);
        for (int t = 0; t < SL_SUM_SQUARES_SLOTS; t++)
            sum += mine[t];
        ck_assert_msg(fabs(sum - ref) <= 1e-12 * ref, "%zu values: %.17g, double %.17g", sizes[k],
                      sum, ref);
        be->sum_squares(&ex, sizes[k], x, slots); /* accumulates across tensors */
        free(x);
    }
    double sum = 0.0;
    for (int t = 0; t < SL_SUM_SQUARES_SLOTS; t++)
        sum += slots[t];
    ck_assert(fabs(sum - total_ref) <= 1e-12 * total_ref);
    sl_backend_destroy(be);
}
END_TEST

/* The norm an update measures is that of every trainable gradient. */
START_TEST(test_grad_norm_matches_double)
{
    sl_context *ctx = th_context(5);
    sl_net *net = build_mlp(ctx);
    sl_optimizer_options opt = sl_optimizer_sgd(0.0f, 0.0f, 0.0f, 0);
    ck_assert(sl_net_set_optimizer(net, &opt) == SL_OK);
    float x[BATCH * MLP_IN], norm;
    int labels[BATCH];
    mlp_batch(1, BATCH, x, labels);
    th_assert_error(sl_net_last_grad_norm(net, &norm), SL_ERR_STATE, "no update");
    ck_assert(sl_net_compute_gradients(net, x, mlp_shape(BATCH), labels, NULL) == SL_OK);
    ck_assert(sl_net_update(net) == SL_OK);
    ck_assert(sl_net_last_grad_norm(net, &norm) == SL_OK);
    double sq = 0.0;
    int n = th_param_count(net);
    for (int i = 0; i < n; i++) {
        sl_param_info p;
        ck_assert(sl_net_param(net, i, &p) == SL_OK);
        for (size_t k = 0; k < p.count; k++)
            sq += (double)p.grad[k] * (double)p.grad[k];
    }
    ck_assert_msg(fabs(norm - sqrt(sq)) <= 1e-7 * sqrt(sq), "norm %.9g, double %.9g", (double)norm,
                  sqrt(sq));
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Gradient accumulation                                               */
/* ------------------------------------------------------------------ */

/* Trains `updates` updates of K micro-batches of MICRO samples (k = K) or
 * of one batch of K * MICRO samples (k = 1): the same samples. */
enum { K = 3, MICRO = 4 };

static void train_accumulated(sl_net *net, int k, int updates)
{
    float x[K * MICRO * MLP_IN];
    int labels[K * MICRO];
    for (int u = 0; u < updates; u++) {
        mlp_batch(100 + (uint64_t)u, K * MICRO, x, labels);
        int per = K * MICRO / k;
        for (int m = 0; m < k; m++)
            ck_assert_msg(sl_net_train_step(net, x + (size_t)m * per * MLP_IN, mlp_shape(per),
                                            labels + m * per, NULL) == SL_OK,
                          "%s", sl_last_error());
    }
}

START_TEST(test_accumulation_equals_one_large_batch)
{
    sl_context *ca = th_context(8), *cb = th_context(8);
    sl_net *a = build_mlp(ca), *b = build_mlp(cb);
    sl_optimizer_options opt = sl_optimizer_adamw(0.01f, 0.9f, 0.95f, 1e-8f, 0.1f);
    ck_assert(sl_net_set_optimizer(a, &opt) == SL_OK && sl_net_set_optimizer(b, &opt) == SL_OK);
    ck_assert(sl_net_set_grad_clip(a, 0.5f) == SL_OK && sl_net_set_grad_clip(b, 0.5f) == SL_OK);
    ck_assert(sl_net_set_grad_accumulation(a, K) == SL_OK);
    for (int u = 1; u <= 3; u++) {
        train_accumulated(a, K, 1);
        train_accumulated(b, 1, 1);
        ck_assert_int_eq(sl_net_step_count(a), u);
        ck_assert_int_eq(sl_net_step_count(b), u);
        float na, nb;
        ck_assert(sl_net_last_grad_norm(a, &na) == SL_OK && sl_net_last_grad_norm(b, &nb) == SL_OK);
        ck_assert_msg(fabsf(na - nb) <= 1e-5f * nb, "norm of the mean %.9g, one batch %.9g",
                      (double)na, (double)nb);
    }
    int n = th_param_count(a);
    for (int i = 0; i < n; i++) {
        sl_param_info pa, pb;
        ck_assert(sl_net_param(a, i, &pa) == SL_OK && sl_net_param(b, i, &pb) == SL_OK);
        float scale = 1e-6f, worst = 0.0f, gscale = 1e-6f, gworst = 0.0f;
        for (size_t k = 0; k < pa.count; k++) {
            scale = fmaxf(scale, fabsf(pb.data[k]));
            worst = fmaxf(worst, fabsf(pa.data[k] - pb.data[k]));
            /* the stored gradient is the sum of the micro-batch means */
            gscale = fmaxf(gscale, fabsf(pb.grad[k]));
            gworst = fmaxf(gworst, fabsf(pa.grad[k] / K - pb.grad[k]));
        }
        ck_assert_msg(worst <= 1e-5f * scale, "%s: accumulated and one-batch runs differ by %.3g",
                      pa.name, (double)worst);
        ck_assert_msg(gworst <= 1e-5f * gscale, "%s: mean of micro-batch gradients differs from "
                      "the one batch's by %.3g of %.3g", pa.name, (double)gworst, (double)gscale);
    }
    sl_net_free(a);
    sl_net_free(b);
    sl_context_free(ca);
    sl_context_free(cb);
}
END_TEST

/* A CNN with BatchNorm and a residual block: the checkpointed network
 * accumulates the same bits as the plain one. */
static sl_net *build_cnn(sl_context *ctx, int sublinear)
{
    sl_net *net = NULL;
    if (sublinear)
        ck_assert(sl_sublinear(ctx, 3, SL_SCHEDULE_SQRT, &net) == SL_OK);
    else
        ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    ck_assert(sl_net_add(net, "stem", sl_conv_bn_relu(3, 8, 3, 1, 1)) == SL_OK);
    ck_assert(sl_net_add(net, "layer1", sl_basic_block(8, 8, 1)) == SL_OK);
    ck_assert(sl_net_add(net, "layer2", sl_basic_block(8, 16, 2)) == SL_OK);
    ck_assert(sl_net_add(net, "layer3", sl_basic_block(16, 16, 1)) == SL_OK);
    th_add_classifier(net, 5);
    return net;
}

START_TEST(test_accumulation_checkpointed_bit_identical)
{
    sl_context *ca = th_context(21), *cb = th_context(21);
    sl_net *a = build_cnn(ca, 0), *b = build_cnn(cb, 1);
    sl_optimizer_options opt = sl_optimizer_adamw(0.01f, 0.9f, 0.95f, 1e-8f, 0.1f);
    sl_net *nets[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        ck_assert(sl_net_set_optimizer(nets[i], &opt) == SL_OK);
        ck_assert(sl_net_set_grad_clip(nets[i], 0.3f) == SL_OK);
        ck_assert(sl_net_set_grad_accumulation(nets[i], 2) == SL_OK);
    }
    float x[4 * 3 * 8 * 8];
    int labels[4];
    for (int t = 0; t < 6; t++) {
        th_fill_normal(x, sizeof x / sizeof *x, 300 + (uint64_t)t, 1.0f);
        for (int i = 0; i < 4; i++)
            labels[i] = (t + 2 * i) % 5;
        for (int i = 0; i < 2; i++)
            ck_assert_msg(sl_net_train_step(nets[i], x, sl_shape_nchw(4, 3, 8, 8), labels, NULL) ==
                              SL_OK, "%s", sl_last_error());
    }
    ck_assert_int_eq(sl_net_step_count(a), 3);
    ck_assert_msg(th_most_forwards(b) >= 2, "the schedule recomputes nothing");
    th_params pa, pb;
    th_params_capture(a, &pa);
    th_params_capture(b, &pb);
    th_params_assert_identical(&pa, &pb, "accumulated plain vs checkpointed");
    float na, nb;
    ck_assert(sl_net_last_grad_norm(a, &na) == SL_OK && sl_net_last_grad_norm(b, &nb) == SL_OK);
    ck_assert(memcmp(&na, &nb, sizeof na) == 0);
    th_params_free(&pa);
    th_params_free(&pb);
    sl_net_free(a);
    sl_net_free(b);
    sl_context_free(ca);
    sl_context_free(cb);
}
END_TEST

START_TEST(test_update_refused_before_k_micro_batches)
{
    sl_context *ctx = th_context(9);
    sl_net *net = build_mlp(ctx);
    sl_optimizer_options opt = sl_optimizer_adam(0.01f, 0.9f, 0.999f, 1e-8f, 0.0f);
    ck_assert(sl_net_set_optimizer(net, &opt) == SL_OK);
    th_assert_error(sl_net_set_grad_accumulation(net, 0), SL_ERR_INVALID_ARG, ">= 1");
    ck_assert(sl_net_set_grad_accumulation(net, K) == SL_OK);
    float x[MICRO * MLP_IN];
    int labels[MICRO];
    for (int m = 0; m < K - 1; m++) {
        mlp_batch(50 + (uint64_t)m, MICRO, x, labels);
        ck_assert(sl_net_compute_gradients(net, x, mlp_shape(MICRO), labels, NULL) == SL_OK);
    }
    th_params before, after;
    th_params_capture(net, &before);
    th_assert_error(sl_net_update(net), SL_ERR_STATE, "2 accumulated");
    th_params_capture(net, &after);
    th_params_assert_identical(&before, &after, "a refused update");
    th_params_free(&before);
    th_params_free(&after);
    ck_assert_int_eq(sl_net_step_count(net), 0);

    mlp_batch(60, MICRO, x, labels);
    ck_assert(sl_net_compute_gradients(net, x, mlp_shape(MICRO), labels, NULL) == SL_OK);
    th_assert_error(sl_net_compute_gradients(net, x, mlp_shape(MICRO), labels, NULL), SL_ERR_STATE,
                    "call sl_net_update");
    ck_assert(sl_net_update(net) == SL_OK);
    ck_assert_int_eq(sl_net_step_count(net), 1);
    th_assert_error(sl_net_update(net), SL_ERR_STATE, "0 accumulated");

    /* train_step updates after every K-th micro-batch only */
    for (int m = 0; m < 2 * K; m++) {
        ck_assert(sl_net_train_step(net, x, mlp_shape(MICRO), labels, NULL) == SL_OK);
        ck_assert_int_eq(sl_net_step_count(net), 1 + (m + 1) / K);
    }
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* ------------------------------------------------------------------ */
/* grad_scale of the update kernels                                    */
/* ------------------------------------------------------------------ */

START_TEST(test_grad_scale_kernels)
{
    sl_backend *be = NULL;
    ck_assert(sl_cpu_backend_create(2, &be) == SL_OK);
    sl_exec ex = {be, 2, 0, NULL};
    enum { N = 50000 }; /* above the CPU's threading threshold */
    static float w0[N], g[N], gs[N], w[2][N], m[2][N], v[2][N];
    th_fill_normal(w0, N, 1, 1.0f);
    th_fill_normal(g, N, 2, 0.1f);
    const float scale = 0.37f;
    for (int i = 0; i < N; i++)
        gs[i] = g[i] * scale;
    /* scale s on g is the unscaled rule on g * s; scale 1 is g itself,
     * with the arithmetic of torch.optim.SGD written out here. */
    for (int step = 1; step <= 2; step++) {
        if (step == 1)
            for (int c = 0; c < 2; c++)
                memcpy(w[c], w0, sizeof w0);
        be->sgd_update(&ex, N, w[0], g, m[0], 0.1f, 0.9f, 1e-3f, 1, step == 1, scale);
        be->sgd_update(&ex, N, w[1], gs, m[1], 0.1f, 0.9f, 1e-3f, 1, step == 1, 1.0f);
        ck_assert(memcmp(w[0], w[1], sizeof w0) == 0 && memcmp(m[0], m[1], sizeof w0) == 0);
    }
    static float wr[N], mr[N];
    memcpy(w[0], w0, sizeof w0);
    memcpy(wr, w0, sizeof w0);
    be->sgd_update(&ex, N, w[0], g, m[0], 0.1f, 0.9f, 1e-3f, 0, 1, 1.0f);
    for (int i = 0; i < N; i++) {
        float d = g[i] + 1e-3f * wr[i];
        mr[i] = d;
        wr[i] = wr[i] - 0.1f * mr[i];
    }
    ck_assert(memcmp(w[0], wr, sizeof w0) == 0 && memcmp(m[0], mr, sizeof w0) == 0);

    for (int decoupled = 0; decoupled < 2; decoupled++) {
        for (int c = 0; c < 2; c++) {
            memcpy(w[c], w0, sizeof w0);
            memset(m[c], 0, sizeof w0);
            memset(v[c], 0, sizeof w0);
        }
        for (int64_t step = 1; step <= 3; step++) {
            be->adam_update(&ex, N, w[0], g, m[0], v[0], 0.01f, 0.9f, 0.99f, 1e-8f, 0.1f,
                            decoupled, step, scale);
            be->adam_update(&ex, N, w[1], gs, m[1], v[1], 0.01f, 0.9f, 0.99f, 1e-8f, 0.1f,
                            decoupled, step, 1.0f);
        }
        ck_assert(memcmp(w[0], w[1], sizeof w0) == 0 && memcmp(v[0], v[1], sizeof w0) == 0);
    }
    sl_backend_destroy(be);
}
END_TEST

START_TEST(test_bad_settings_refused)
{
    sl_context *ctx = th_context(1);
    sl_net *net = build_mlp(ctx);
    th_assert_error(sl_net_set_grad_clip(net, -1.0f), SL_ERR_INVALID_ARG, "max_norm");
    th_assert_error(sl_net_set_grad_clip(net, INFINITY), SL_ERR_INVALID_ARG, "max_norm");
    th_assert_error(sl_net_set_grad_clip(NULL, 1.0f), SL_ERR_INVALID_ARG, "NULL");
    th_assert_error(sl_net_set_grad_accumulation(NULL, 2), SL_ERR_INVALID_ARG, "NULL");
    sl_optimizer_options bad = sl_optimizer_adamw(0.01f, 1.0f, 0.999f, 1e-8f, 0.1f);
    th_assert_error(sl_net_set_optimizer(net, &bad), SL_ERR_INVALID_ARG, "AdamW");
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("optim");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_adamw_clip_cosine_match_torch);
    tcase_add_test(tc, test_warmup_cosine_shape);
    tcase_add_test(tc, test_sum_squares_matches_double);
    tcase_add_test(tc, test_grad_norm_matches_double);
    tcase_add_test(tc, test_accumulation_equals_one_large_batch);
    tcase_add_test(tc, test_accumulation_checkpointed_bit_identical);
    tcase_add_test(tc, test_update_refused_before_k_micro_batches);
    tcase_add_test(tc, test_grad_scale_kernels);
    tcase_add_test(tc, test_bad_settings_refused);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
