/*
 * test_profile.c — profiling: the entries count exactly the program's
 * steps (each convolution once forward and once backward per step, the
 * loss and the optimizer update once, re-forwards only under
 * checkpointing), their times fit inside the steps' wall time, reading can
 * reset them, and a profiled run trains bit for bit like an unprofiled one.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define BATCH 4
#define STEPS 2

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static sl_net *build(sl_context *ctx, sl_schedule s)
{
    sl_net *net = NULL;
    ck_assert(sl_sublinear(ctx, 3, s, &net) == SL_OK);
    th_build_model(net, "resnet20", 32);
    sl_optimizer_options o = sl_optimizer_sgd(0.05f, 0.9f, 5e-4f, 0);
    ck_assert(sl_net_set_optimizer(net, &o) == SL_OK);
    return net;
}

/* Trains STEPS steps; returns their wall time. */
static double train(sl_net *net)
{
    sl_shape in = sl_shape_nchw(BATCH, 3, 32, 32);
    size_t nx = (size_t)BATCH * 3 * 32 * 32;
    float *x = malloc(nx * sizeof(float));
    int labels[BATCH] = {1, 4, 7, 9};
    double t = 0;
    for (int s = 0; s < STEPS; s++) {
        th_fill_normal(x, nx, 10 + (uint64_t)s, 1.0f);
        double t0 = now_s();
        ck_assert_msg(sl_net_train_step(net, x, in, labels, NULL) == SL_OK, "%s", sl_last_error());
        t += now_s() - t0;
    }
    free(x);
    return t;
}

/* Tensors of a kind, counted from the parameter names and shapes: an
 * account of the layers independent of the profiler. */
static int count_params(sl_net *net, int ndim, const char *suffix)
{
    int n = 0;
    for (int i = 0; i < th_param_count(net); i++) {
        sl_param_info p;
        ck_assert(sl_net_param(net, i, &p) == SL_OK);
        size_t len = strlen(p.name), sl = strlen(suffix);
        if (p.ndim == ndim && len >= sl && strcmp(p.name + len - sl, suffix) == 0)
            n++;
    }
    return n;
}

static const sl_profile_entry *find(const sl_profile_entry *e, int n, const char *type,
                                    const char *pass)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(e[i].layer_type, type) && !strcmp(e[i].pass, pass))
            return &e[i];
    return NULL;
}

static int64_t calls(const sl_profile_entry *e, int n, const char *type, const char *pass)
{
    const sl_profile_entry *f = find(e, n, type, pass);
    return f ? f->calls : 0;
}

static void check_schedule(sl_schedule s, int checkpointed)
{
    sl_context *ctx = th_context(5);
    sl_net *net = build(ctx, s);
    int n = -1;
    th_assert_error(sl_net_profile(net, NULL, 0, &n, 0), SL_ERR_STATE, "profiling is off");
    ck_assert(sl_net_set_profiling(net, 1) == SL_OK);
    double wall = train(net);
    sl_profile_entry e[64];
    ck_assert(sl_net_profile(net, e, 64, &n, 0) == SL_OK);
    ck_assert_int_gt(n, 0);
    ck_assert_int_le(n, 64);
    int counted = -1; /* the count alone: no buffer (UBSan: no copy to NULL) */
    ck_assert(sl_net_profile(net, NULL, 0, &counted, 0) == SL_OK);
    ck_assert_int_eq(counted, n);
    int convs = count_params(net, 4, ".weight");
    int bns = count_params(net, 1, ".running_mean");
    ck_assert_int_gt(convs, 10);
    ck_assert_int_eq(calls(e, n, "Conv2d", "forward"), STEPS * convs);
    ck_assert_int_eq(calls(e, n, "Conv2d", "backward"), STEPS * convs);
    ck_assert_int_eq(calls(e, n, "BatchNorm2d", "forward"), STEPS * bns);
    ck_assert_int_eq(calls(e, n, "SoftmaxCrossEntropy", "loss"), STEPS);
    ck_assert_int_eq(calls(e, n, "optimizer", "update"), STEPS);
    ck_assert_int_eq(calls(e, n, "Linear", "backward"), STEPS);
    if (checkpointed)
        ck_assert_int_gt(calls(e, n, "Conv2d", "re-forward"), 0);
    else
        ck_assert_int_eq(calls(e, n, "Conv2d", "re-forward"), 0);
    double sum = 0;
    for (int i = 0; i < n; i++) {
        ck_assert(e[i].seconds >= 0);
        ck_assert(i == 0 || e[i - 1].seconds >= e[i].seconds); /* slowest first */
        sum += e[i].seconds;
    }
    ck_assert_msg(sum > 0 && sum <= wall, "profiled %g s of %g s of steps", sum, wall);
    printf("%s: %d entries, %.1f%% of the steps' time profiled; slowest %s %s (%lld calls)\n",
           checkpointed ? "sqrt" : "none", n, 100 * sum / wall, e[0].layer_type, e[0].pass,
           (long long)e[0].calls);
    /* reading with reset empties it; predicting adds eval entries */
    ck_assert(sl_net_profile(net, e, 64, &n, 1) == SL_OK);
    ck_assert(sl_net_profile(net, e, 0, &n, 0) == SL_OK);
    ck_assert_int_eq(n, 0);
    float *x = calloc((size_t)BATCH * 3 * 32 * 32, sizeof(float)), logits[BATCH * 10];
    ck_assert(sl_net_predict(net, x, sl_shape_nchw(BATCH, 3, 32, 32), logits) == SL_OK);
    ck_assert(sl_net_profile(net, e, 64, &n, 0) == SL_OK);
    ck_assert_int_eq(calls(e, n, "Conv2d", "eval"), convs);
    ck_assert_int_eq(calls(e, n, "Conv2d", "backward"), 0);
    free(x);
    ck_assert(sl_net_set_profiling(net, 0) == SL_OK);
    th_assert_error(sl_net_profile(net, e, 64, &n, 0), SL_ERR_STATE, "profiling is off");
    sl_net_free(net);
    sl_context_free(ctx);
}

START_TEST(test_profile_counts_keep_everything) { check_schedule(SL_SCHEDULE_NONE, 0); }
END_TEST

START_TEST(test_profile_counts_sqrt) { check_schedule(SL_SCHEDULE_SQRT, 1); }
END_TEST

START_TEST(test_profiled_training_is_bit_identical)
{
    th_params plain, profiled;
    for (int k = 0; k < 2; k++) {
        sl_context *ctx = th_context(5);
        sl_net *net = build(ctx, SL_SCHEDULE_SQRT);
        ck_assert(sl_net_set_profiling(net, k) == SL_OK);
        train(net);
        th_params_capture(net, k ? &profiled : &plain);
        sl_net_free(net);
        sl_context_free(ctx);
    }
    th_params_assert_identical(&plain, &profiled, "profiled training");
    th_params_free(&plain);
    th_params_free(&profiled);
}
END_TEST

START_TEST(test_profile_bad_arguments)
{
    int n;
    th_assert_error(sl_net_set_profiling(NULL, 1), SL_ERR_INVALID_ARG, "network is NULL");
    th_assert_error(sl_net_profile(NULL, NULL, 0, &n, 0), SL_ERR_INVALID_ARG, "NULL");
    sl_context *ctx = th_context(5);
    sl_net *net = build(ctx, SL_SCHEDULE_NONE);
    ck_assert(sl_net_set_profiling(net, 1) == SL_OK);
    th_assert_error(sl_net_profile(net, NULL, 4, &n, 0), SL_ERR_INVALID_ARG, "out is NULL");
    th_assert_error(sl_net_profile(net, NULL, 0, NULL, 0), SL_ERR_INVALID_ARG, "NULL");
    sl_net_free(net); /* frees the profile too (ASan's leak check) */
    sl_context_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("profile");
    TCase *tc = tcase_create("profile");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_profile_counts_keep_everything);
    tcase_add_test(tc, test_profile_counts_sqrt);
    tcase_add_test(tc, test_profiled_training_is_bit_identical);
    tcase_add_test(tc, test_profile_bad_arguments);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
