/*
 * test_gradcheck.c — every layer's and block's backward (input, weight and
 * bias gradients) against central finite differences, in every
 * configuration the layers support: strides, padding, groups, dilation,
 * non-square kernels, overlapping and ceil-mode pooling, BatchNorm in
 * training and frozen (evaluation statistics, sl_net_set_batchnorm_frozen),
 * dropout with its saved mask, and the composite blocks.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define EPS 4e-3f
#define RTOL 1e-2
#define ATOL 1e-3

typedef enum { INPUT_NORMAL, INPUT_AWAY_FROM_ZERO, INPUT_DISTINCT } input_kind;

/* Inside blocks, BatchNorm feeds ReLU: with BN's batch statistics a
 * perturbation moves every value of a channel, and some value crosses 0
 * within eps far too often for a finite difference to mean anything.
 * Shifting each BN's beta to +3 or -3 (alternating by channel) puts every
 * ReLU input well inside its linear or its zero region, so the block's
 * wiring (convs, BN, shortcuts, joins) is checked where the loss is smooth;
 * ReLU's own kink is checked alone. */
static void move_relu_inputs_from_zero(sl_net *net)
{
    int n = th_param_count(net);
    for (int i = 0; i < n; i++) {
        sl_param_info pi, beta;
        ck_assert(sl_net_param(net, i, &pi) == SL_OK);
        size_t len = strlen(pi.name);
        if (len < 13 || strcmp(pi.name + len - 13, ".running_mean") != 0)
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s.bias", (int)(len - 13), pi.name);
        ck_assert_msg(sl_net_find_param(net, name, &beta) == SL_OK, "%s", sl_last_error());
        for (size_t c = 0; c < beta.count; c++)
            beta.data[c] = c % 2 ? -3.0f : 3.0f;
    }
}

/* Checks a network built by the caller. */
static void check_net(sl_net *net, sl_shape in, input_kind kind, int coords)
{
    if (kind == INPUT_DISTINCT)
        move_relu_inputs_from_zero(net);
    size_t n = (size_t)in.n * in.c * in.h * in.w;
    float *x = malloc(n * sizeof(float));
    ck_assert(x);
    if (kind == INPUT_DISTINCT)
        th_fill_distinct(x, n, 3, 0.05f);
    else
        th_fill_normal(x, n, 3, 1.0f);
    if (kind == INPUT_AWAY_FROM_ZERO)
        th_push_from_zero(x, n, 0.1f);
    th_gradcheck_result r;
    th_gradcheck(net, x, in, 1, coords, EPS, RTOL, ATOL, &r);
    /* Kinks are rare: at most a quarter of the coordinates may be skipped. */
    ck_assert_msg(4 * r.checked >= 3 * r.candidates, "only %d of %d coordinates checked (%d kinks)",
                  r.checked, r.candidates, r.skipped_kinks);
    ck_assert_msg(r.worst_error <= 1.0, "worst %s (error %.3g of tolerance)", r.worst, r.worst_error);
    free(x);
}

static sl_net *one_layer_net(sl_context *ctx, sl_layer *layer, int in_c)
{
    sl_net *net = NULL;
    ck_assert_msg(sl_sequential(ctx, in_c, &net) == SL_OK, "%s", sl_last_error());
    ck_assert_msg(sl_net_add(net, "layer", layer) == SL_OK, "%s", sl_last_error());
    return net;
}

/* Builds a one-layer (or one-block) network, checks it, frees it. */
static void check_layer(sl_layer *layer, sl_shape in, input_kind kind, int coords)
{
    sl_context *ctx = th_context(7);
    sl_net *net = one_layer_net(ctx, layer, in.c);
    check_net(net, in, kind, coords);
    sl_net_free(net);
    sl_context_free(ctx);
}

static sl_layer *conv(int in, int out, int kh, int kw, int sh, int sw, int ph, int pw, int dil,
                      int groups, int bias)
{
    sl_conv2d_options o = {in, out, kh, kw, sh, sw, ph, pw, dil, dil, groups, bias};
    return sl_conv2d_with(&o);
}

START_TEST(test_conv_3x3_same)
{
    check_layer(conv(3, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1), sl_shape_nchw(2, 3, 6, 6), INPUT_NORMAL, 40);
}
END_TEST

START_TEST(test_conv_strided_padded)
{
    check_layer(conv(3, 5, 3, 3, 2, 2, 1, 1, 1, 1, 0), sl_shape_nchw(2, 3, 7, 7), INPUT_NORMAL, 40);
}
END_TEST

START_TEST(test_conv_dilated)
{
    check_layer(conv(2, 3, 3, 3, 1, 1, 2, 2, 2, 1, 1), sl_shape_nchw(2, 2, 7, 6), INPUT_NORMAL, 40);
}
END_TEST

START_TEST(test_conv_grouped)
{
    check_layer(conv(4, 6, 3, 3, 1, 1, 1, 1, 1, 2, 1), sl_shape_nchw(2, 4, 5, 5), INPUT_NORMAL, 40);
}
END_TEST

START_TEST(test_conv_depthwise_strided)
{
    check_layer(conv(4, 4, 3, 3, 2, 2, 1, 1, 1, 4, 0), sl_shape_nchw(2, 4, 6, 6), INPUT_NORMAL, 40);
}
END_TEST

START_TEST(test_conv_pointwise)
{
    check_layer(conv(5, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1), sl_shape_nchw(3, 5, 4, 4), INPUT_NORMAL, 40);
}
END_TEST

START_TEST(test_conv_pointwise_strided)
{
    check_layer(conv(4, 6, 1, 1, 2, 2, 0, 0, 1, 1, 0), sl_shape_nchw(2, 4, 5, 5), INPUT_NORMAL, 40);
}
END_TEST

START_TEST(test_conv_nonsquare_kernel_and_stride)
{
    check_layer(conv(2, 3, 3, 2, 2, 1, 1, 0, 1, 1, 1), sl_shape_nchw(2, 2, 7, 5), INPUT_NORMAL, 40);
}
END_TEST

START_TEST(test_batchnorm_train)
{
    check_layer(sl_batchnorm2d(3), sl_shape_nchw(4, 3, 3, 3), INPUT_NORMAL, 40);
}
END_TEST

START_TEST(test_batchnorm_train_one_pixel)
{
    sl_batchnorm2d_options o = {.channels = 4, .momentum = 0.2f, .eps = 1e-3f};
    check_layer(sl_batchnorm2d_with(&o), sl_shape_nchw(6, 4, 1, 1), INPUT_NORMAL, 24);
}
END_TEST

/* Frozen BatchNorm (evaluation statistics in training): running
 * statistics far from the batch's own, so that a backward written for
 * batch statistics would fail the check. */
START_TEST(test_batchnorm_frozen)
{
    sl_context *ctx = th_context(7);
    sl_net *net = one_layer_net(ctx, sl_batchnorm2d(3), 3);
    int n = 0;
    ck_assert_msg(sl_net_set_batchnorm_frozen(net, 1, &n) == SL_OK, "%s", sl_last_error());
    ck_assert_int_eq(n, 1);
    sl_param_info mean, var;
    ck_assert(sl_net_find_param(net, "layer.running_mean", &mean) == SL_OK);
    ck_assert(sl_net_find_param(net, "layer.running_var", &var) == SL_OK);
    for (int c = 0; c < 3; c++) {
        mean.data[c] = 0.5f - 0.4f * (float)c;
        var.data[c] = 0.3f + 0.9f * (float)c;
    }
    check_net(net, sl_shape_nchw(4, 3, 3, 3), INPUT_NORMAL, 40);
    /* frozen: the running statistics are read, never written */
    for (int c = 0; c < 3; c++) {
        ck_assert(mean.data[c] == 0.5f - 0.4f * (float)c);
        ck_assert(var.data[c] == 0.3f + 0.9f * (float)c);
    }
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_relu)
{
    check_layer(sl_relu(), sl_shape_nchw(2, 3, 4, 4), INPUT_AWAY_FROM_ZERO, 40);
}
END_TEST

START_TEST(test_maxpool_overlapping)
{
    check_layer(sl_maxpool2d(3, 2, 1), sl_shape_nchw(2, 3, 7, 7), INPUT_DISTINCT, 60);
}
END_TEST

START_TEST(test_maxpool_2x2)
{
    check_layer(sl_maxpool2d(2, 2, 0), sl_shape_nchw(2, 2, 6, 6), INPUT_DISTINCT, 40);
}
END_TEST

START_TEST(test_maxpool_ceil_mode)
{
    sl_maxpool2d_options o = {.kernel = 3, .stride = 2, .pad = 0, .ceil_mode = 1};
    check_layer(sl_maxpool2d_with(&o), sl_shape_nchw(2, 2, 8, 8), INPUT_DISTINCT, 40);
}
END_TEST

START_TEST(test_avgpool_overlapping_padded)
{
    check_layer(sl_avgpool2d(3, 2, 1), sl_shape_nchw(2, 3, 7, 7), INPUT_NORMAL, 40);
}
END_TEST

START_TEST(test_avgpool_2x2)
{
    check_layer(sl_avgpool2d(2, 2, 0), sl_shape_nchw(2, 2, 6, 6), INPUT_NORMAL, 40);
}
END_TEST

START_TEST(test_global_avgpool)
{
    check_layer(sl_global_avgpool(), sl_shape_nchw(2, 3, 5, 4), INPUT_NORMAL, 40);
}
END_TEST

START_TEST(test_linear_bias)
{
    check_layer(sl_linear(12, 5, 1), sl_shape_nchw(3, 12, 1, 1), INPUT_NORMAL, 40);
}
END_TEST

START_TEST(test_linear_no_bias_on_spatial_input)
{
    check_layer(sl_linear(18, 4, 0), sl_shape_nchw(3, 2, 3, 3), INPUT_NORMAL, 40);
}
END_TEST

START_TEST(test_dropout_fixed_mask)
{
    check_layer(sl_dropout(0.3f), sl_shape_nchw(2, 3, 4, 4), INPUT_NORMAL, 40);
}
END_TEST

START_TEST(test_flatten_then_linear)
{
    sl_context *ctx = th_context(1);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 2, &net) == SL_OK);
    ck_assert(sl_net_add(net, "flatten", sl_flatten()) == SL_OK);
    ck_assert_msg(sl_net_add(net, "fc", sl_linear(32, 3, 1)) == SL_OK, "%s", sl_last_error());
    sl_shape in = sl_shape_nchw(2, 2, 4, 4);
    float x[64];
    th_fill_normal(x, 64, 5, 1.0f);
    th_gradcheck_result r;
    th_gradcheck(net, x, in, 1, 30, EPS, RTOL, ATOL, &r);
    ck_assert_msg(r.worst_error <= 1.0, "worst %s", r.worst);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_basic_block_identity)
{
    check_layer(sl_basic_block(4, 4, 1), sl_shape_nchw(2, 4, 5, 5), INPUT_DISTINCT, 30);
}
END_TEST

START_TEST(test_basic_block_projection)
{
    check_layer(sl_basic_block(3, 6, 2), sl_shape_nchw(2, 3, 6, 6), INPUT_DISTINCT, 30);
}
END_TEST

START_TEST(test_bottleneck_projection)
{
    check_layer(sl_bottleneck(4, 2, 2), sl_shape_nchw(2, 4, 6, 6), INPUT_DISTINCT, 30);
}
END_TEST

START_TEST(test_bottleneck_identity)
{
    check_layer(sl_bottleneck(8, 2, 1), sl_shape_nchw(2, 8, 4, 4), INPUT_DISTINCT, 30);
}
END_TEST

START_TEST(test_conv_bn_relu)
{
    check_layer(sl_conv_bn_relu(3, 4, 3, 1, 1), sl_shape_nchw(3, 3, 5, 5), INPUT_DISTINCT, 30);
}
END_TEST

START_TEST(test_inception)
{
    check_layer(sl_inception(4, 2, 2, 3, 2, 2, 2), sl_shape_nchw(2, 4, 5, 5), INPUT_DISTINCT, 30);
}
END_TEST

/* The softmax cross-entropy loss: d(loss)/d(weights) of a Linear layer
 * against central differences of the loss itself. */
START_TEST(test_softmax_cross_entropy)
{
    sl_context *ctx = th_context(2);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 6, &net) == SL_OK);
    ck_assert(sl_net_add(net, "fc", sl_linear(6, 5, 1)) == SL_OK);
    sl_shape in = sl_shape_nchw(4, 6, 1, 1);
    float x[24];
    int labels[4] = {0, 3, 4, 3};
    th_fill_normal(x, 24, 9, 2.0f);
    sl_step_result res;
    ck_assert(sl_net_compute_gradients(net, x, in, labels, &res) == SL_OK);
    for (int p = 0; p < 2; p++) {
        sl_param_info pi;
        ck_assert(sl_net_param(net, p, &pi) == SL_OK);
        float *g = malloc(pi.count * sizeof(float));
        for (size_t i = 0; i < pi.count; i++)
            g[i] = pi.grad[i];
        for (size_t i = 0; i < pi.count; i++) {
            float w = pi.data[i];
            sl_step_result lp, lm;
            pi.data[i] = w + 1e-2f;
            ck_assert(sl_net_compute_gradients(net, x, in, labels, &lp) == SL_OK);
            pi.data[i] = w - 1e-2f;
            ck_assert(sl_net_compute_gradients(net, x, in, labels, &lm) == SL_OK);
            pi.data[i] = w;
            double fd = ((double)lp.loss - (double)lm.loss) / 2e-2;
            ck_assert_msg(fabs(fd - g[i]) <= 1e-3 + 1e-2 * fabs(fd), "%s[%zu]: fd %g analytic %g",
                          pi.name, i, fd, g[i]);
        }
        free(g);
    }
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gradcheck");
    TCase *conv_tc = tcase_create("conv");
    tcase_add_test(conv_tc, test_conv_3x3_same);
    tcase_add_test(conv_tc, test_conv_strided_padded);
    tcase_add_test(conv_tc, test_conv_dilated);
    tcase_add_test(conv_tc, test_conv_grouped);
    tcase_add_test(conv_tc, test_conv_depthwise_strided);
    tcase_add_test(conv_tc, test_conv_pointwise);
    tcase_add_test(conv_tc, test_conv_pointwise_strided);
    tcase_add_test(conv_tc, test_conv_nonsquare_kernel_and_stride);
    suite_add_tcase(s, conv_tc);
    TCase *other = tcase_create("layers");
    tcase_add_test(other, test_batchnorm_train);
    tcase_add_test(other, test_batchnorm_train_one_pixel);
    tcase_add_test(other, test_batchnorm_frozen);
    tcase_add_test(other, test_relu);
    tcase_add_test(other, test_maxpool_overlapping);
    tcase_add_test(other, test_maxpool_2x2);
    tcase_add_test(other, test_maxpool_ceil_mode);
    tcase_add_test(other, test_avgpool_overlapping_padded);
    tcase_add_test(other, test_avgpool_2x2);
    tcase_add_test(other, test_global_avgpool);
    tcase_add_test(other, test_linear_bias);
    tcase_add_test(other, test_linear_no_bias_on_spatial_input);
    tcase_add_test(other, test_dropout_fixed_mask);
    tcase_add_test(other, test_flatten_then_linear);
    tcase_add_test(other, test_softmax_cross_entropy);
    suite_add_tcase(s, other);
    TCase *blocks = tcase_create("blocks");
    tcase_add_test(blocks, test_basic_block_identity);
    tcase_add_test(blocks, test_basic_block_projection);
    tcase_add_test(blocks, test_bottleneck_projection);
    tcase_add_test(blocks, test_bottleneck_identity);
    tcase_add_test(blocks, test_conv_bn_relu);
    tcase_add_test(blocks, test_inception);
    suite_add_tcase(s, blocks);
    int failed = th_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
