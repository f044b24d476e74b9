/*
 * test_bn_grid.c — the partial-sum grids of the CUDA reductions, checked
 * on the CPU: no GPU runs here, so the splits the kernels walk are proved
 * here to cover every value exactly once. BatchNorm's statistics
 * (base/bn_grid.h, cuda_norm.cu), with the scratch the plan reserves for
 * them, and the moments rule both backends share; the column sums of the
 * bias and LayerNorm parameter gradients (base/col_grid.h, cuda_block.h's
 * column parts).
 */
#include <check.h>
#include <stdlib.h>

#include "base/bn_grid.h"
#include "base/col_grid.h"
#include "base/element.h"
#include "cpu/cpu.h"
#include "harness.h"
#include "layers/layer.h"

/* The first of count read counts that is not 1 (count: none), and that
 * count in *times: one assertion a walk, not one a value. */
static size_t first_not_once(const unsigned char *seen, size_t count, int *times)
{
    size_t k = 0;
    while (k < count && seen[k] == 1)
        k++;
    *times = k < count ? seen[k] : 1;
    return k;
}

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
    int times;
    size_t bad = first_not_once(seen, count, &times);
    free(seen);
    ck_assert_msg(bad == count, "n %d c %d hw %d: value %zu read %d times", n, c, hw, bad, times);
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

/* Walks thread y's rows of a part [lo, hi) as cuda_block.h's
 * sl_cuda_column_rows does (whole batches of `batch` rows up to
 * sl_col_batches_end, then one row at a time), counting each row's visit
 * in seen[r * stride]; 1 when they come in increasing order, inside the
 * part, with no whole batch left to the one-at-a-time rows. */
static int walk_thread_rows(int lo, int hi, int y, int batch, unsigned char *seen,
                            size_t stride)
{
    int r = lo + y, end = sl_col_batches_end(lo, hi, y, batch), last = -1, ok = end >= r;
    for (; r < end; r += batch * SL_COL_GRID_RUNS)
        for (int u = 0; u < batch; u++) {
            int row = r + u * SL_COL_GRID_RUNS;
            ok &= row < hi && row > last; /* a whole batch lies in the part, in order */
            if (row < hi)
                seen[(size_t)row * stride]++;
            last = row;
        }
    for (; r < hi; r += SL_COL_GRID_RUNS) {
        ok &= r > last;
        seen[(size_t)r * stride]++;
        last = r;
    }
    /* and no whole batch was left to the one-at-a-time rows */
    ok &= (long long)end + (long long)(batch - 1) * SL_COL_GRID_RUNS >= hi;
    return ok;
}

/* Walks the column grid as the column-part kernels do (block (tile,
 * part), thread (x, y): column tile * COLS + x, rows lo + y, lo + y +
 * RUNS, ... below the part's end, in batches of `batch` rows as
 * walk_thread_rows says) and counts how often each element of a rows x
 * cols matrix is read. */
static void check_col_grid_covers_once(int rows, int cols, int batch)
{
    sl_col_grid g = sl_col_grid_for(rows, cols);
    ck_assert_int_ge(g.tiles, 1);
    ck_assert_int_ge((long long)g.tiles * SL_COL_GRID_COLS, cols);
    ck_assert_int_lt((long long)(g.tiles - 1) * SL_COL_GRID_COLS, cols); /* no empty tile */
    ck_assert_int_ge(g.parts, 1);
    ck_assert_int_le(g.parts, SL_COL_GRID_MAX_PARTS); /* a portable cluster */
    ck_assert_int_eq(g.part_rows % SL_COL_GRID_RUNS, 0);
    ck_assert_int_ge((long long)g.parts * g.part_rows, rows);
    ck_assert_int_lt((long long)(g.parts - 1) * g.part_rows, rows); /* no empty part */
    if (g.parts > 1) /* a part is not starved of rows */
        ck_assert_int_ge(rows, g.parts * SL_COL_GRID_MIN_ROWS);
    size_t count = (size_t)rows * cols;
    unsigned char *seen = calloc(count, 1);
    ck_assert_ptr_nonnull(seen);
    int ordered = 1;
    for (int tile = 0; tile < g.tiles; tile++)
        for (int p = 0; p < g.parts; p++) {
            int lo, hi;
            sl_col_part_rows(rows, g.part_rows, p, &lo, &hi);
            for (int x = 0; x < SL_COL_GRID_COLS; x++) {
                int j = tile * SL_COL_GRID_COLS + x;
                if (j >= cols)
                    continue;
                for (int y = 0; y < SL_COL_GRID_RUNS; y++)
                    ordered &= walk_thread_rows(lo, hi, y, batch, seen + j, cols);
            }
        }
    int times;
    size_t bad = first_not_once(seen, count, &times);
    free(seen);
    ck_assert_msg(bad == count, "rows %d cols %d batch %d: element %zu read %d times", rows, cols,
                  batch, bad, times);
    ck_assert_msg(ordered, "rows %d cols %d batch %d: a thread's rows out of order, past its part, "
                           "or a whole batch one at a time", rows, cols, batch);
}

START_TEST(test_col_grid_covers_every_value_once)
{
    static const int geometries[][2] = {
        {1, 1},   {16, 1000}, {1000, 768}, {8192, 768}, {8192, 3072}, {8195, 45},
        {511, 5}, {512, 33},  {4097, 100}, {100000, 3}, {257, 2304},  {64 * 1024, 64},
        {100, 3}, {250, 7}, /* batches of 4 and of 8 that end exactly at a part's end */
    };
    for (size_t i = 0; i < sizeof geometries / sizeof geometries[0]; i++)
        for (int batch = 4; batch <= 8; batch += 4) /* LayerNorm's, the bias's */
            check_col_grid_covers_once(geometries[i][0], geometries[i][1], batch);
}
END_TEST

START_TEST(test_col_grid_splits_gpt2_rows_and_keeps_short_ones_whole)
{
    /* GPT-2 small at 8 x 1024 tokens: 768 columns are 24 tiles, each
     * split into the largest cluster (96 column tiles of the old
     * traversal left 36 of an H100's 132 SMs idle) */
    sl_col_grid g = sl_col_grid_for(8192, 768);
    ck_assert_int_eq(g.tiles, 24);
    ck_assert_int_eq(g.parts, SL_COL_GRID_MAX_PARTS);
    ck_assert_int_eq(g.part_rows, 1024);
    /* its MLP's 3072 columns need fewer parts for the same blocks */
    sl_col_grid w = sl_col_grid_for(8192, 3072);
    ck_assert_int_eq(w.tiles, 96);
    ck_assert_int_lt(w.parts, SL_COL_GRID_MAX_PARTS);
    ck_assert_int_ge((long long)w.tiles * w.parts, SL_COL_GRID_TARGET_BLOCKS);
    /* a classifier's batch of 16 rows stays one block a tile */
    ck_assert_int_eq(sl_col_grid_for(16, 1000).parts, 1);
    ck_assert_int_eq(sl_col_grid_for(0, 10).parts, 1);
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
    tcase_add_test(tc, test_col_grid_covers_every_value_once);
    tcase_add_test(tc, test_col_grid_splits_gpt2_rows_and_keeps_short_ones_whole);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
