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
 *
 * bf16 (mixed precision, on a CPU with bf16 dot products): every pass of
 * every geometry runs on oneDNN with bf16 activations, and each output is
 * the float64 convolution of the bf16 operands (the weights rounded to
 * nearest even) within its own rounding: half a bf16 unit of the result
 * for bf16 outputs (twice that when backward data adds to a bf16
 * gradient), plus float accumulation (1e-5 of the largest value).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backend.h"
#include "base/element.h"
#include "cpu/cpu.h"
#include "harness.h"

#define THREADS 2

typedef struct geometry {
    const char *name;
    sl_conv_desc d;
} geometry;

/* n c h w, k oh ow, kh kw sh sw ph pw dh dw, groups */
static const geometry geometries[] = {
    {"3x3 same", {6, 16, 10, 10, 32, 10, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0}},
    {"3x3 stride 2", {4, 32, 13, 11, 16, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0}},
    {"3x3 dilation 2", {3, 16, 12, 12, 16, 12, 12, 3, 3, 1, 1, 2, 2, 2, 2, 1, 0}},
    {"3x3 groups 4", {4, 32, 8, 8, 64, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4, 0}},
    {"5x5 no padding", {2, 16, 9, 9, 16, 5, 5, 5, 5, 1, 1, 0, 0, 1, 1, 1, 0}},
    {"7x7 stride 2, 3 channels", {4, 3, 32, 32, 16, 16, 16, 7, 7, 2, 2, 3, 3, 1, 1, 1, 0}},
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
    sl_exec ex = {be, THREADS, 0, NULL};
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

/* ---- bf16 ---- */

static uint16_t *bf16_normal(size_t n, uint64_t seed, float std)
{
    float *f = malloc(n * sizeof *f);
    uint16_t *b = malloc(n * sizeof *b);
    ck_assert(f && b);
    th_fill_normal(f, n, seed, std);
    for (size_t i = 0; i < n; i++)
        b[i] = sl_bf16_round(f[i]);
    free(f);
    return b;
}

/* The float64 convolution's three passes on operands already widened:
 * y = conv(x, w), dx = conv_transpose(dy, w), dw = corr(x, dy). */
typedef enum { REF_Y, REF_DX, REF_DW } ref_pass;

static void conv_ref(const sl_conv_desc *d, const double *x, const double *w, const double *dy,
                     ref_pass pass, double *out)
{
    int cg = d->c / d->groups, kg = d->k / d->groups;
    size_t n_out = pass == REF_Y ? y_count(d) : pass == REF_DX ? x_count(d) : w_count(d);
    memset(out, 0, n_out * sizeof *out);
    for (int n = 0; n < d->n; n++)
        for (int k = 0; k < d->k; k++) {
            int gr = k / kg;
            for (int oi = 0; oi < d->oh; oi++)
                for (int oj = 0; oj < d->ow; oj++) {
                    size_t yi = (((size_t)n * d->k + k) * d->oh + oi) * d->ow + oj;
                    for (int c = 0; c < cg; c++)
                        for (int a = 0; a < d->kh; a++)
                            for (int b = 0; b < d->kw; b++) {
                                int ii = oi * d->sh - d->ph + a * d->dh;
                                int jj = oj * d->sw - d->pw + b * d->dw;
                                if (ii < 0 || ii >= d->h || jj < 0 || jj >= d->w)
                                    continue;
                                int ci = gr * cg + c;
                                size_t xi = (((size_t)n * d->c + ci) * d->h + ii) * d->w + jj;
                                size_t wi = (((size_t)k * cg + c) * d->kh + a) * d->kw + b;
                                if (pass == REF_Y)
                                    out[yi] += x[xi] * w[wi];
                                else if (pass == REF_DX)
                                    out[xi] += dy[yi] * w[wi];
                                else
                                    out[wi] += x[xi] * dy[yi];
                            }
                }
        }
}

static double *widen_all(const uint16_t *b, size_t n)
{
    double *d = malloc(n * sizeof *d);
    ck_assert_ptr_nonnull(d);
    for (size_t i = 0; i < n; i++)
        d[i] = sl_bf16_widen(b[i]);
    return d;
}

static double largest(const double *v, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fabs(v[i]) > m ? fabs(v[i]) : m;
    return m;
}

/* A bf16 output against want (float64): within half a unit of bf16
 * rounding of want (2^-8 of it), plus half a unit of `part` where the
 * result was rounded twice (backward data added to a gradient: part is
 * the added term, rounded first; NULL: none), plus 1e-5 of the largest. */
static void assert_bf16_close(const char *geom, const char *what, const uint16_t *got,
                              const double *want, const double *part, size_t n)
{
    double scale = largest(want, n);
    for (size_t i = 0; i < n; i++) {
        double e = fabs(sl_bf16_widen(got[i]) - want[i]);
        double tol = ldexp(fabs(want[i]) + (part ? fabs(part[i]) : 0.0), -8) + 1e-5 * scale;
        ck_assert_msg(e <= tol, "%s %s [%zu]: %.9g, the float64 result %.9g (off by %g, allowed %g)",
                      geom, what, i, sl_bf16_widen(got[i]), want[i], e, tol);
    }
}

START_TEST(test_onednn_bf16_passes)
{
    if (!sl_cpu_have_onednn() || !sl_cpu_has_bf16_dot()) {
        printf("SKIPPED: test_onednn_bf16_passes: %s\n",
               sl_cpu_have_onednn() ? "this CPU has no bf16 dot products (avx512_core_bf16 or AMX)"
                                    : "this build has no oneDNN");
        return;
    }
    sl_cpu_kernels_force(0, 1);
    sl_backend *be;
    ck_assert_int_eq(sl_cpu_backend_create(THREADS, &be), SL_OK);
    sl_exec ex = {be, THREADS, 0, NULL};
    /* the float geometries, a pointwise one (1x1 stays on im2col in
     * float), and one whose weights outweigh its activations (ResNet's last
     * stage), whose backward filter runs in chunks of images */
    static const geometry more[] = {
        {"1x1 pointwise", {4, 64, 14, 14, 128, 14, 14, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1}},
        {"1x1 wide, 7x7", {4, 512, 7, 7, 2048, 7, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1}},
    };
    int n_more = (int)(sizeof more / sizeof *more), chunked = 0;
    for (int gi = 0; gi < N_GEOMETRIES + n_more; gi++) {
        const geometry *g = gi < N_GEOMETRIES ? &geometries[gi] : &more[gi - N_GEOMETRIES];
        sl_conv_desc d = g->d;
        const char *name = g->name;
        d.bf16 = 1;
        ck_assert_msg(be->conv2d_native_bf16(be, &d), "%s: not on oneDNN in bf16", name);
        size_t nx = x_count(&d), ny = y_count(&d), nw = w_count(&d), ws = 0;
        for (int pass = 0; pass < 3; pass++) {
            size_t b = be->conv2d_workspace_bytes(be, &d, (sl_conv_pass)pass);
            ck_assert(b != SIZE_MAX);
            ws = b > ws ? b : ws;
        }
        void *work = sl_aligned_zalloc(ws ? ws : 1, "a test workspace");
        uint16_t *x = bf16_normal(nx, 1 + gi, 1.0f), *dy = bf16_normal(ny, 201 + gi, 1.0f);
        uint16_t *base_dx = bf16_normal(nx, 301 + gi, 1.0f);
        float *w = malloc(nw * sizeof *w), *dw = malloc(nw * sizeof *dw);
        uint16_t *y = malloc(ny * 2), *y2 = malloc(ny * 2), *dx = malloc(nx * 2);
        uint16_t *dx_acc = malloc(nx * 2);
        ck_assert(work && w && dw && y && y2 && dx && dx_acc);
        th_fill_normal(w, nw, 101 + gi, 0.2f);
        th_fill_normal(dw, nw, 401 + gi, 1.0f);
        float *dw0 = copy_of(dw, nw);
        memcpy(dx_acc, base_dx, nx * 2);

        be->conv2d_forward(&ex, &d, x, w, NULL, y, work);
        be->conv2d_forward(&ex, &d, x, w, NULL, y2, work);
        be->conv2d_backward_data(&ex, &d, w, dy, dx, 0, work);
        be->conv2d_backward_data(&ex, &d, w, dy, dx_acc, 1, work);
        be->conv2d_backward_filter(&ex, &d, x, dy, dw, NULL, work);
        ck_assert_msg(be->sync(&ex) == SL_OK, "%s", sl_last_error());
        ck_assert_msg(!memcmp(y, y2, ny * 2), "%s: a re-forward differs", name);

        double *xd = widen_all(x, nx), *dyd = widen_all(dy, ny), *wd = malloc(nw * sizeof *wd);
        double *ref = malloc((nx > ny ? (nx > nw ? nx : nw) : (ny > nw ? ny : nw)) * sizeof *ref);
        ck_assert(wd && ref);
        for (size_t i = 0; i < nw; i++)
            wd[i] = sl_bf16_widen(sl_bf16_round(w[i])); /* the weights as the passes read them */
        conv_ref(&d, xd, wd, dyd, REF_Y, ref);
        assert_bf16_close(name, "forward", y, ref, NULL, ny);
        double *part = malloc(nx * sizeof *part);
        ck_assert_ptr_nonnull(part);
        conv_ref(&d, xd, wd, dyd, REF_DX, part);
        assert_bf16_close(name, "backward data", dx, part, NULL, nx);
        for (size_t i = 0; i < nx; i++)
            ref[i] = part[i] + sl_bf16_widen(base_dx[i]);
        assert_bf16_close(name, "backward data, accumulated", dx_acc, ref, part, nx);
        free(part);
        conv_ref(&d, xd, NULL, dyd, REF_DW, ref);
        double scale = largest(ref, nw);
        for (size_t i = 0; i < nw; i++) {
            double want = dw0[i] + ref[i];
            ck_assert_msg(fabs(dw[i] - want) <= 1e-5 * (scale + 1.0),
                          "%s backward filter [%zu]: %.9g, the float64 result %.9g", name, i,
                          dw[i], want);
        }
        printf("%-26s bf16: images a call: forward %d, backward data %d, filter %d of %d\n", name,
               sl_cpu_onednn_conv_chunk(be, &d, SL_CONV_FWD),
               sl_cpu_onednn_conv_chunk(be, &d, SL_CONV_BWD_DATA),
               sl_cpu_onednn_conv_chunk(be, &d, SL_CONV_BWD_FILTER), d.n);
        for (int pass = 0; pass < 3; pass++)
            chunked += sl_cpu_onednn_conv_chunk(be, &d, (sl_conv_pass)pass) < d.n;
        free(xd), free(dyd), free(wd), free(ref), free(dw0);
        free(x), free(dy), free(base_dx), free(w), free(dw), free(y), free(y2), free(dx);
        free(dx_acc);
        sl_aligned_free(work);
    }
    ck_assert_msg(chunked > 0, "no bf16 pass ran in chunks of images");
    /* a bias is not part of the bf16 contract: refused at the next sync,
     * the output left alone */
    sl_conv_desc d = geometries[0].d;
    d.bf16 = 1;
    uint16_t *x = bf16_normal(x_count(&d), 7, 1.0f), *y = calloc(y_count(&d), 2);
    float *w = calloc(w_count(&d), sizeof(float)), *bias = calloc((size_t)d.k, sizeof(float));
    ck_assert(y && w && bias);
    be->conv2d_forward(&ex, &d, x, w, bias, y, NULL);
    ck_assert_int_eq(be->sync(&ex), SL_ERR_BACKEND);
    ck_assert_msg(strstr(sl_last_error(), "bias") != NULL, "%s", sl_last_error());
    for (size_t i = 0; i < y_count(&d); i++)
        ck_assert_int_eq(y[i], 0);
    free(x), free(y), free(w), free(bias);
    sl_backend_destroy(be);
}
END_TEST

/* gemm_bf16 (oneDNN's matmul) against float64 on the same bf16 operands:
 * the four transposes at an odd shape, float and bf16 outputs, with and
 * without accumulating, with a bias; a second call gives the same bits;
 * bias_backward on bf16 rows gives the float kernel's sums of the widened
 * values, bit for bit. */
START_TEST(test_onednn_bf16_gemm)
{
    if (!sl_cpu_have_onednn() || !sl_cpu_has_bf16_dot()) {
        printf("SKIPPED: test_onednn_bf16_gemm: %s\n",
               sl_cpu_have_onednn() ? "this CPU has no bf16 dot products (avx512_core_bf16 or AMX)"
                                    : "this build has no oneDNN");
        return;
    }
    sl_backend *be;
    ck_assert_int_eq(sl_cpu_backend_create(THREADS, &be), SL_OK);
    ck_assert(be->bf16_kernels & SL_BF16_GEMM);
    sl_exec ex = {be, THREADS, 0, NULL};
    enum { M = 67, N = 45, K = 130 };
    uint16_t *a = bf16_normal((size_t)M * K, 11, 1.0f), *b = bf16_normal((size_t)K * N, 12, 1.0f);
    float *bias = malloc(N * sizeof *bias), *c0 = malloc((size_t)M * N * sizeof *c0);
    float *c = malloc((size_t)M * N * sizeof *c), *c2 = malloc((size_t)M * N * sizeof *c2);
    uint16_t *h0 = bf16_normal((size_t)M * N, 13, 1.0f), *h = malloc((size_t)M * N * 2);
    uint16_t *h2 = malloc((size_t)M * N * 2);
    double *ad = widen_all(a, (size_t)M * K), *bd = widen_all(b, (size_t)K * N);
    double *ref = malloc((size_t)M * N * sizeof *ref), *part = malloc((size_t)M * N * sizeof *part);
    ck_assert(bias && c0 && c && c2 && h && h2 && ref && part);
    th_fill_normal(bias, N, 14, 1.0f);
    th_fill_normal(c0, (size_t)M * N, 15, 1.0f);
    int cases = 0;
    for (int t = 0; t < 4; t++)
        for (int out16 = 0; out16 < 2; out16++)
            for (int acc = 0; acc < 2; acc++) {
                int ta = t & 1, tb = t >> 1, has_bias = !acc;
                sl_gemm_bf16_desc d = {ta, tb, M, N, K, ta ? M : K, tb ? K : N, N,
                                       out16, acc, has_bias};
                size_t ws = be->gemm_bf16_workspace_bytes(be, &d);
                ck_assert_msg(ws != SIZE_MAX, "%s", sl_last_error());
                void *work = sl_aligned_zalloc(ws ? ws : 1, "a test workspace");
                ck_assert_ptr_nonnull(work);
                /* the operands are the same bytes whatever the transpose:
                 * op(a)[i][p] = a[p * M + i] when transposed */
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) {
                        double sum = 0.0;
                        for (int p = 0; p < K; p++)
                            sum += (ta ? ad[(size_t)p * M + i] : ad[(size_t)i * K + p]) *
                                   (tb ? bd[(size_t)j * K + p] : bd[(size_t)p * N + j]);
                        part[(size_t)i * N + j] = sum + (has_bias ? bias[j] : 0.0);
                    }
                for (int r = 0; r < 2; r++) {
                    void *dst = out16 ? (void *)(r ? h2 : h) : (void *)(r ? c2 : c);
                    if (out16)
                        memcpy(dst, h0, (size_t)M * N * 2);
                    else
                        memcpy(dst, c0, (size_t)M * N * sizeof(float));
                    be->gemm_bf16(&ex, &d, a, b, has_bias ? bias : NULL, dst, work);
                }
                ck_assert_msg(be->sync(&ex) == SL_OK, "%s", sl_last_error());
                char what[64];
                snprintf(what, sizeof what, "gemm_bf16 t%d %s%s", t, out16 ? "bf16" : "f32",
                         acc ? " +=" : "");
                ck_assert_msg(out16 ? !memcmp(h, h2, (size_t)M * N * 2)
                                    : !memcmp(c, c2, (size_t)M * N * sizeof(float)),
                              "%s: a second call differs", what);
                for (size_t i = 0; i < (size_t)M * N; i++)
                    ref[i] = part[i] + (acc ? (out16 ? sl_bf16_widen(h0[i]) : (double)c0[i]) : 0.0);
                if (out16)
                    assert_bf16_close(what, "c", h, ref, acc ? part : NULL, (size_t)M * N);
                else {
                    double scale = largest(ref, (size_t)M * N);
                    for (size_t i = 0; i < (size_t)M * N; i++)
                        ck_assert_msg(fabs(c[i] - ref[i]) <= 1e-5 * scale,
                                      "%s [%zu]: %.9g, the float64 result %.9g", what, i, c[i],
                                      ref[i]);
                }
                sl_aligned_free(work);
                cases++;
            }
    /* the column sums of bf16 rows: the float kernel's on widened values */
    float *wide = malloc((size_t)M * N * sizeof *wide), *db = calloc(N, sizeof *db);
    float *db16 = calloc(N, sizeof *db16);
    ck_assert(wide && db && db16);
    for (size_t i = 0; i < (size_t)M * N; i++)
        wide[i] = sl_bf16_widen(h0[i]);
    be->bias_backward(&ex, M, N, wide, db);
    sl_exec e16 = {be, THREADS, 0, NULL};
    e16.bf16 = 1;
    be->bias_backward(&e16, M, N, (const float *)(const void *)h0, db16);
    ck_assert(!memcmp(db, db16, N * sizeof *db));
    printf("gemm_bf16: %d cases within float64's bounds, bf16 bias sums the float bits\n", cases);
    free(wide), free(db), free(db16);
    free(a), free(b), free(bias), free(c0), free(c), free(c2), free(h0), free(h), free(h2);
    free(ad), free(bd), free(ref), free(part);
    sl_backend_destroy(be);
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
    sl_conv_desc pointwise = {4, 64, 14, 14, 128, 14, 14, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0};
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
    tcase_add_test(tc, test_onednn_bf16_passes);
    tcase_add_test(tc, test_onednn_bf16_gemm);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
