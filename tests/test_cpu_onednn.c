/*
 * test_cpu_onednn.c — the CPU backend's convolutions through oneDNN
 * (src/cpu/cpu_onednn.c) against its im2col path, pass by pass, on
 * geometries that exercise what the oneDNN path adds: blocked layouts
 * staged in the workspace, chunks of images, summing reorders for weight
 * gradients and for backward data that accumulates, groups, stride,
 * dilation, padding, and the stem-like few-channel input that stays on
 * im2col for backward data. oneDNN is forced on here (its AVX-512 rule
 * would leave it off on an AVX2 machine), so the test checks the same code
 * everywhere; it skips, saying so, in a build without oneDNN.
 *
 * What must hold: each pass within float rounding of im2col's (max
 * difference at most 1e-4 of the reference's largest value: a wrong index
 * or a lost chunk is off by the order of the values); the same bits when a
 * pass is run twice (a re-forward equals its forward); outputs that
 * accumulate add to what was there; and the workspace at most twice
 * im2col's.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backend.h"
#include "cpu/cpu.h"
#include "harness.h"

#define THREADS 2

typedef struct geometry {
    const char *name;
    sl_conv_desc d;
} geometry;

/* n c h w, k oh ow, kh kw sh sw ph pw dh dw, groups */
static const geometry geometries[] = {
    {"3x3 same", {6, 16, 10, 10, 32, 10, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1}},
    {"3x3 stride 2", {4, 32, 13, 11, 16, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1}},
    {"3x3 dilation 2", {3, 16, 12, 12, 16, 12, 12, 3, 3, 1, 1, 2, 2, 2, 2, 1}},
    {"3x3 groups 4", {4, 32, 8, 8, 64, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4}},
    {"5x5 no padding", {2, 16, 9, 9, 16, 5, 5, 5, 5, 1, 1, 0, 0, 1, 1, 1}},
    {"7x7 stride 2, 3 channels", {4, 3, 32, 32, 16, 16, 16, 7, 7, 2, 2, 3, 3, 1, 1, 1}},
};
#define N_GEOMETRIES (int)(sizeof geometries / sizeof *geometries)

static size_t x_count(const sl_conv_desc *d) { return (size_t)d->n * d->c * d->h * d->w; }
static size_t y_count(const sl_conv_desc *d) { return (size_t)d->n * d->k * d->oh * d->ow; }
static size_t w_count(const sl_conv_desc *d)
{
    return (size_t)d->k * (d->c / d->groups) * d->kh * d->kw;
}

/* The three passes of one geometry on one backend: y, dx (written, then
 * accumulated onto a copy of base_dx), dw (accumulated onto base_dw). */
typedef struct results {
    float *y, *dx, *dx_acc, *dw;
    size_t ws_bytes;
} results;

static float *copy_of(const float *src, size_t n)
{
    float *p = malloc(n * sizeof *p);
    ck_assert_ptr_nonnull(p);
    memcpy(p, src, n * sizeof *p);
    return p;
}

static void run_passes(sl_backend *be, const sl_conv_desc *d, const float *x, const float *w,
                       const float *dy, const float *base_dx, const float *base_dw, results *r)
{
    sl_exec ex = {be, THREADS};
    size_t ws = 0;
    for (int pass = 0; pass < 3; pass++) {
        size_t b = be->conv2d_workspace_bytes(be, d, (sl_conv_pass)pass);
        ck_assert_msg(b != SIZE_MAX, "%s", sl_last_error());
        if (b > ws)
            ws = b;
    }
    r->ws_bytes = ws;
    void *work = sl_aligned_zalloc(ws ? ws : 1, "a test workspace");
    ck_assert_ptr_nonnull(work);
    r->y = calloc(y_count(d), sizeof(float));
    r->dx = calloc(x_count(d), sizeof(float));
    r->dx_acc = copy_of(base_dx, x_count(d));
    r->dw = copy_of(base_dw, w_count(d));
    ck_assert(r->y && r->dx);
    be->conv2d_forward(&ex, d, x, w, NULL, r->y, work);
    be->conv2d_backward_data(&ex, d, w, dy, r->dx, 0, work);
    be->conv2d_backward_data(&ex, d, w, dy, r->dx_acc, 1, work);
    be->conv2d_backward_filter(&ex, d, x, dy, r->dw, NULL, work);
    ck_assert_msg(be->sync(&ex) == SL_OK, "%s", sl_last_error());
    sl_aligned_free(work);
}

static void results_free(results *r)
{
    free(r->y);
    free(r->dx);
    free(r->dx_acc);
    free(r->dw);
}

static void assert_close(const char *geom, const char *what, const float *got, const float *want,
                         size_t n)
{
    double scale = 0.0, diff = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(want[i]) > scale)
            scale = fabs(want[i]);
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= diff)) /* NaN counts */
            diff = e;
    }
    ck_assert_msg(scale > 0.0, "%s %s: the reference is all zeros", geom, what);
    ck_assert_msg(diff <= 1e-4 * scale, "%s %s: oneDNN differs from im2col by %g (largest %g)",
                  geom, what, diff, scale);
}

START_TEST(test_onednn_passes_match_im2col)
{
    if (!sl_cpu_have_onednn()) {
        printf("SKIPPED: test_onednn_passes_match_im2col: this build has no oneDNN\n");
        return;
    }
    int on_onednn = 0, chunked = 0;
    for (int gi = 0; gi < N_GEOMETRIES; gi++) {
        const geometry *g = &geometries[gi];
        const sl_conv_desc *d = &g->d;
        float *x = malloc(x_count(d) * sizeof(float)), *w = malloc(w_count(d) * sizeof(float));
        float *dy = malloc(y_count(d) * sizeof(float));
        float *base_dx = malloc(x_count(d) * sizeof(float));
        float *base_dw = malloc(w_count(d) * sizeof(float));
        ck_assert(x && w && dy && base_dx && base_dw);
        th_fill_normal(x, x_count(d), 1 + gi, 1.0f);
        th_fill_normal(w, w_count(d), 101 + gi, 0.2f);
        th_fill_normal(dy, y_count(d), 201 + gi, 1.0f);
        th_fill_normal(base_dx, x_count(d), 301 + gi, 1.0f);
        th_fill_normal(base_dw, w_count(d), 401 + gi, 1.0f);

        sl_backend *ref_be, *dnn_be;
        sl_cpu_kernels_force(0, 0);
        ck_assert_int_eq(sl_cpu_backend_create(THREADS, &ref_be), SL_OK);
        results ref;
        run_passes(ref_be, d, x, w, dy, base_dx, base_dw, &ref);

        sl_cpu_kernels_force(0, 1);
        ck_assert_int_eq(sl_cpu_backend_create(THREADS, &dnn_be), SL_OK);
        results a, b;
        run_passes(dnn_be, d, x, w, dy, base_dx, base_dw, &a);
        run_passes(dnn_be, d, x, w, dy, base_dx, base_dw, &b);
        for (int pass = 0; pass < 3; pass++) {
            int chunk = sl_cpu_onednn_conv_chunk(dnn_be, d, (sl_conv_pass)pass);
            printf("%-26s pass %d: %s", g->name, pass, chunk ? "oneDNN" : "im2col");
            if (chunk)
                printf(", %d of %d images a call", chunk, d->n);
            printf("\n");
            on_onednn += chunk > 0;
            chunked += chunk > 0 && chunk < d->n;
        }
        ck_assert_msg(a.ws_bytes <= 2 * ref.ws_bytes, "%s: workspace %zu, im2col's %zu", g->name,
                      a.ws_bytes, ref.ws_bytes);

        assert_close(g->name, "forward", a.y, ref.y, y_count(d));
        assert_close(g->name, "backward data", a.dx, ref.dx, x_count(d));
        assert_close(g->name, "backward data, accumulated", a.dx_acc, ref.dx_acc, x_count(d));
        assert_close(g->name, "backward filter, accumulated", a.dw, ref.dw, w_count(d));
        /* accumulating adds what writing gives, to what was there */
        for (size_t i = 0; i < x_count(d); i++)
            ck_assert_msg(fabsf(a.dx_acc[i] - (base_dx[i] + a.dx[i])) <=
                              1e-5f * (1.0f + fabsf(a.dx_acc[i])),
                          "%s: accumulated dx[%zu] %g is not %g + %g", g->name, i, a.dx_acc[i],
                          base_dx[i], a.dx[i]);
        /* the same inputs give the same bits */
        ck_assert_msg(!memcmp(a.y, b.y, y_count(d) * sizeof(float)), "%s forward", g->name);
        ck_assert_msg(!memcmp(a.dx, b.dx, x_count(d) * sizeof(float)), "%s dx", g->name);
        ck_assert_msg(!memcmp(a.dx_acc, b.dx_acc, x_count(d) * sizeof(float)), "%s dx", g->name);
        ck_assert_msg(!memcmp(a.dw, b.dw, w_count(d) * sizeof(float)), "%s dw", g->name);

        results_free(&ref);
        results_free(&a);
        results_free(&b);
        sl_backend_destroy(ref_be);
        sl_backend_destroy(dnn_be);
        free(x);
        free(w);
        free(dy);
        free(base_dx);
        free(base_dw);
    }
    /* the comparisons above were not im2col against itself */
    ck_assert_msg(on_onednn >= 2 * N_GEOMETRIES, "only %d passes went to oneDNN", on_onednn);
    ck_assert_msg(chunked > 0, "no pass ran in chunks of images");
}
END_TEST

/* The 3-channel input's backward data stays on im2col (padded to a block
 * of 16 channels it runs slower), and 1x1 convolutions never leave it. */
START_TEST(test_onednn_rule_keeps_pointwise_and_few_channels_on_im2col)
{
    if (!sl_cpu_have_onednn()) {
        printf("SKIPPED: test_onednn_rule_keeps_pointwise_and_few_channels_on_im2col: no oneDNN\n");
        return;
    }
    sl_cpu_kernels_force(0, 1);
    sl_backend *be;
    ck_assert_int_eq(sl_cpu_backend_create(THREADS, &be), SL_OK);
    sl_conv_desc stem = geometries[N_GEOMETRIES - 1].d;
    ck_assert_int_eq(sl_cpu_onednn_conv_chunk(be, &stem, SL_CONV_BWD_DATA), 0);
    sl_conv_desc pointwise = {4, 64, 14, 14, 128, 14, 14, 1, 1, 1, 1, 0, 0, 1, 1, 1};
    for (int pass = 0; pass < 3; pass++)
        ck_assert_int_eq(sl_cpu_onednn_conv_chunk(be, &pointwise, (sl_conv_pass)pass), 0);
    sl_backend_destroy(be);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_onednn");
    TCase *tc = tcase_create("cpu_onednn");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_onednn_passes_match_im2col);
    tcase_add_test(tc, test_onednn_rule_keeps_pointwise_and_few_channels_on_im2col);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
