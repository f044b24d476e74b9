/*
 * test_bn_grid.c — the partial-sum grid of the CUDA BatchNorm statistics
 * (base/bn_grid.h), checked on the CPU: no GPU runs here, so the split the
 * kernels in cuda_norm.cu walk is proved here to cover every value of a
 * channel exactly once, with the scratch the plan reserves for it; and the
 * moments rule both backends now share.
 */
#include <check.h>
#include <stdlib.h>

#include "base/bn_grid.h"
#include "base/element.h"
#include "cpu/cpu.h"
#include "harness.h"
#include "layers/layer.h"

/* Walks the grid as bn_stat_parts does (part p = q * slices + s: images
 * q, q + groups, ...; hw in [s * slice_len, min(+slice_len, hw))) and
 * counts how often each of one channel's n * hw values is read. */
static void check_grid_covers_once(int n, int c, int hw)
{
    sl_bn_grid g = sl_bn_grid_for(n, c, hw);
    ck_assert_int_ge(g.parts, 1);
    ck_assert_int_eq(g.parts, g.slices * g.image_groups);
    ck_assert_int_ge(g.image_groups, 1);
    ck_assert_int_le(g.image_groups, n);
    ck_assert_int_eq(g.slice_len % 32, 0);
    ck_assert_int_ge((long long)g.slices * g.slice_len, hw);
    ck_assert_int_lt((long long)(g.slices - 1) * g.slice_len, hw); /* no empty slice */
    /* the split aims at about SL_BN_GRID_TARGET_BLOCKS blocks overall */
    ck_assert_int_le((long long)g.parts, (SL_BN_GRID_TARGET_BLOCKS + c - 1) / c + g.image_groups);
    size_t count = (size_t)n * hw;
    unsigned char *seen = calloc(count, 1);
    ck_assert_ptr_nonnull(seen);
    for (int p = 0; p < g.parts; p++) {
        int q = p / g.slices, s = p % g.slices;
        int lo = s * g.slice_len, hi = lo + g.slice_len < hw ? lo + g.slice_len : hw;
        for (int img = q; img < n; img += g.image_groups)
            for (int j = lo; j < hi; j++)
                seen[(size_t)img * hw + j]++;
    }
    for (size_t k = 0; k < count; k++)
        ck_assert_msg(seen[k] == 1, "n %d c %d hw %d: value %zu read %d times", n, c, hw, k,
                      seen[k]);
    free(seen);
    ck_assert_uint_eq(sl_bn_grid_partials_bytes(n, c, hw),
                      (size_t)c * (size_t)g.parts * 2 * sizeof(double));
}

START_TEST(test_bn_grid_covers_every_value_once)
{
    static const int geometries[][3] = {
        {1, 1, 1},      {2, 3, 5},     {64, 64, 12544}, {64, 512, 49}, {1, 64, 50176},
        {256, 2048, 1}, {7, 1, 100000}, {3, 1, 257},     {128, 16, 1024}, {1, 1, 4096},
    };
    for (size_t i = 0; i < sizeof geometries / sizeof geometries[0]; i++)
        check_grid_covers_once(geometries[i][0], geometries[i][1], geometries[i][2]);
}
END_TEST

START_TEST(test_bn_grid_spreads_a_few_wide_channels_over_many_blocks)
{
    /* ResNet's stem at batch 64 and 224^2: 64 channels of 64 x 112^2
     * values; one block per channel left half of an H100's SMs idle */
    sl_bn_grid g = sl_bn_grid_for(64, 64, 112 * 112);
    ck_assert_int_ge(64 * g.parts, 1024);
    /* a tiny layer stays one block per channel (no value-starved blocks) */
    ck_assert_int_eq(sl_bn_grid_for(2, 8, 16).parts, 1);
    /* the grid is a function of the geometry alone: the same on every call */
    sl_bn_grid a = sl_bn_grid_for(32, 256, 3136), b = sl_bn_grid_for(32, 256, 3136);
    ck_assert_int_eq(a.parts, b.parts);
    ck_assert_int_eq(a.slice_len, b.slice_len);
}
END_TEST

START_TEST(test_bn_batch_moments_clamps_a_negative_variance)
{
    double mean, var;
    sl_bn_batch_moments(6.0, 14.0, 3.0, &mean, &var); /* 1, 2, 3 */
    ck_assert_double_eq(mean, 2.0);
    ck_assert_double_eq_tol(var, 2.0 / 3.0, 1e-15);
    sl_bn_batch_moments(2.0, 1.0 - 1e-12, 2.0, &mean, &var); /* E[x^2] < mean^2 */
    ck_assert_double_eq(var, 0.0);
    ck_assert_double_eq(sl_bn_dy_xc(2.0f, 3.0f, 1.0), 4.0);
}
END_TEST

static size_t partials_only(const sl_backend *be, int n, int c, int hw)
{
    (void)be;
    return sl_bn_grid_partials_bytes(n, c, hw);
}

static size_t partials_and_means(const sl_backend *be, int n, int c, int hw)
{
    return partials_only(be, n, c, hw) + 2 * (size_t)c * sizeof(float);
}

/* BatchNorm2d asks its backend for both workspaces with the layer's own
 * geometry, and plans none on the CPU (whose sums live on the stack). */
START_TEST(test_bn_layer_plans_the_backends_statistics_workspaces)
{
    sl_backend *cpu = NULL;
    ck_assert_int_eq(sl_cpu_backend_create(1, &cpu), SL_OK);
    sl_layer *bn = sl_batchnorm2d(16);
    ck_assert_ptr_nonnull(bn);
    sl_shape in = sl_shape_nchw(8, 16, 28, 28), out;
    sl_layer_cost cost = {0};
    ck_assert_int_eq(bn->ops->infer(bn, cpu, 1, &in, &out, &cost), SL_OK);
    ck_assert_uint_eq(cost.ws_fwd_bytes, 0);
    ck_assert_uint_eq(cost.ws_bwd_bytes, 0);
    sl_backend gpu_like = *cpu;
    gpu_like.batchnorm_forward_workspace_bytes = partials_only;
    gpu_like.batchnorm_backward_workspace_bytes = partials_and_means;
    ck_assert_int_eq(bn->ops->infer(bn, &gpu_like, 1, &in, &out, &cost), SL_OK);
    ck_assert_uint_eq(cost.ws_fwd_bytes, sl_bn_grid_partials_bytes(8, 16, 784));
    ck_assert_uint_eq(cost.ws_bwd_bytes, sl_bn_grid_partials_bytes(8, 16, 784) + 2 * 16 * 4);
    sl_layer_free(bn);
    sl_backend_destroy(cpu);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bn_grid");
    TCase *tc = tcase_create("bn_grid");
    tcase_add_test(tc, test_bn_grid_covers_every_value_once);
    tcase_add_test(tc, test_bn_grid_spreads_a_few_wide_channels_over_many_blocks);
    tcase_add_test(tc, test_bn_layer_plans_the_backends_statistics_workspaces);
    tcase_add_test(tc, test_bn_batch_moments_clamps_a_negative_variance);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
