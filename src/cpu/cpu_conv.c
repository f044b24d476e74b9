/*
 * cpu_conv.c — 2-d convolution on the CPU (run stage): through oneDNN where
 * cpu_onednn.c chose it for the geometry and pass; otherwise (and always in
 * a build without oneDNN) im2col / col2im into the layer's planned
 * workspace, then the GEMM of cpu_gemm.c per image and group. The bias and
 * its gradient are this file's loops on both paths.
 * Groups, stride, padding and dilation are supported; a 1x1, stride-1,
 * unpadded convolution uses its input directly as the GEMM operand and needs
 * no workspace.
 *
 * Shapes, per image (cg = c / groups, kg = k / groups, taps = kh * kw,
 * kdim = cg * taps, ohw = oh * ow), for each group g:
 *   col     c * taps x ohw   (im2col of the whole image; group g owns the
 *                             kdim rows from g * kdim)
 *   y_g     kg x ohw    = W_g col_g        (W_g: kg x kdim rows of w)
 *   col_g   kdim x ohw  = W_g^T dy_g       (then col2im adds col into dx)
 *   dW_g   += dy_g col_g^T                  (images in order)
 *
 * Threads: with a tiled GEMM (see cpu_gemm.c) a whole pass runs in one
 * OpenMP team: im2col / col2im split over rows or channels, each GEMM split
 * into tiles of C, or whole groups handed out when there are at least as
 * many groups as threads. The tiling depends only on shape and team size,
 * so each output value (each dW value across the images included) is
 * always summed by one thread in the same order.
 */
#include <omp.h>
#include <string.h>

#include "cpu/cpu.h"

typedef struct conv_dims {
    int cg, kg, kdim, taps;
    size_t hw, ohw;
    int pointwise; /* 1x1, stride 1, no padding: col would equal x */
} conv_dims;

static conv_dims conv_dims_of(const sl_conv_desc *d)
{
    conv_dims g;
    g.cg = d->c / d->groups;
    g.kg = d->k / d->groups;
    g.taps = d->kh * d->kw;
    g.kdim = g.cg * g.taps;
    g.hw = (size_t)d->h * d->w;
    g.ohw = (size_t)d->oh * d->ow;
    g.pointwise = sl_cpu_conv_pointwise(d);
    return g;
}

/* What the pass's plan (cpu_onednn.c) chose: oneDNN's workspace, or
 * sl_cpu_im2col_bytes. */
size_t sl_cpu_conv2d_workspace_bytes(const sl_backend *be, const sl_conv_desc *d, sl_conv_pass pass)
{
    return sl_cpu_onednn_conv_workspace(be, d, pass);
}

/* Who runs a pass: in a team (tiled: id / size of this thread), or one
 * thread issuing whole GEMMs and opening `threads`-wide loops itself. */
typedef struct conv_team {
    int tiled, id, size, threads;
} conv_team;

static conv_team conv_team_here(const sl_exec *ex, int tiled)
{
    conv_team t = {tiled, 0, 1, cpu_threads(ex)};
    if (tiled) {
        t.id = omp_get_thread_num();
        t.size = omp_get_num_threads();
    }
    return t;
}

static void conv_team_barrier(const conv_team *t)
{
    if (t->tiled) {
#pragma omp barrier
    }
}

/* The output columns [lo, hi) of one kernel column offset whose input column
 * ox * sw + off lies inside [0, w). */
static void conv_col_range(int off, int sw, int w, int ow, int *lo, int *hi)
{
    int a = off < 0 ? (-off + sw - 1) / sw : 0;
    int b = w - 1 - off < 0 ? 0 : (w - 1 - off) / sw + 1;
    if (a > ow)
        a = ow;
    if (b > ow)
        b = ow;
    if (b < a)
        b = a;
    *lo = a;
    *hi = b;
}

/* One row of col: kernel tap (ki, kj) of input plane xc. */
static void im2col_row(const sl_conv_desc *d, const float *xc, int ki, int kj, float *out)
{
    int off = kj * d->dw - d->pw, lo, hi;
    conv_col_range(off, d->sw, d->w, d->ow, &lo, &hi);
    for (int oy = 0; oy < d->oh; oy++) {
        int iy = oy * d->sh - d->ph + ki * d->dh;
        float *o = out + (size_t)oy * d->ow;
        if (iy < 0 || iy >= d->h) {
            memset(o, 0, (size_t)d->ow * sizeof(float));
            continue;
        }
        const float *src = xc + (size_t)iy * d->w;
        for (int ox = 0; ox < lo; ox++)
            o[ox] = 0.0f;
        if (d->sw == 1) {
            if (hi > lo)
                memcpy(o + lo, src + lo + off, (size_t)(hi - lo) * sizeof(float));
        } else if (d->sw == 2) {
            for (int ox = lo; ox < hi; ox++)
                o[ox] = src[2 * ox + off];
        } else {
            for (int ox = lo; ox < hi; ox++)
                o[ox] = src[ox * d->sw + off];
        }
        for (int ox = hi; ox < d->ow; ox++)
            o[ox] = 0.0f;
    }
}

/* Adds one row of col back into input plane xc (the transpose of im2col_row). */
static void col2im_row(const sl_conv_desc *d, const float *in, int ki, int kj, float *xc)
{
    int off = kj * d->dw - d->pw, lo, hi;
    conv_col_range(off, d->sw, d->w, d->ow, &lo, &hi);
    for (int oy = 0; oy < d->oh; oy++) {
        int iy = oy * d->sh - d->ph + ki * d->dh;
        if (iy < 0 || iy >= d->h)
            continue;
        const float *o = in + (size_t)oy * d->ow;
        float *dst = xc + (size_t)iy * d->w;
        if (d->sw == 1) {
            float *drow = dst + lo + off;
            const float *orow = o + lo;
            for (int j = 0; j < hi - lo; j++)
                drow[j] += orow[j];
        } else {
            for (int ox = lo; ox < hi; ox++)
                dst[ox * d->sw + off] += o[ox];
        }
    }
}


/* col (c * taps x ohw) of one image: rows are independent. */
static void im2col_image(const conv_team *tm, const sl_conv_desc *d, const conv_dims *g,
                         const float *x, float *col)
{
    int rows = d->c * g->taps;
    if (tm->tiled) {
#pragma omp for schedule(static)
        for (int r = 0; r < rows; r++)
            im2col_row(d, x + (size_t)(r / g->taps) * g->hw, r % g->taps / d->kw,
                       r % g->taps % d->kw, col + (size_t)r * g->ohw);
    } else {
        int par = (double)rows * (double)g->ohw >= CPU_PAR_MIN;
        SL_PARALLEL_FOR(tm->threads, par, (int r = 0; r < rows; r++), {
            im2col_row(d, x + (size_t)(r / g->taps) * g->hw, r % g->taps / d->kw,
                       r % g->taps % d->kw, col + (size_t)r * g->ohw);
        });
    }
}

/* Input channel ci's plane (+)= its taps' rows of col, taps in order. */
static void col2im_channel(const sl_conv_desc *d, const conv_dims *g, const float *col, int ci,
                           float *plane, int accumulate)
{
    if (!accumulate)
        memset(plane, 0, g->hw * sizeof(float));
    for (int t = 0; t < g->taps; t++)
        col2im_row(d, col + ((size_t)ci * g->taps + t) * g->ohw, t / d->kw, t % d->kw, plane);
}

/* dx (+)= col2im(col) of one image: one thread per input channel. */
static void col2im_image(const conv_team *tm, const sl_conv_desc *d, const conv_dims *g,
                         const float *col, float *dx, int accumulate)
{
    if (tm->tiled) {
#pragma omp for schedule(static)
        for (int ci = 0; ci < d->c; ci++)
            col2im_channel(d, g, col, ci, dx + (size_t)ci * g->hw, accumulate);
    } else {
        int par = (double)d->c * g->taps * (double)g->ohw >= CPU_PAR_MIN;
        SL_PARALLEL_FOR(tm->threads, par, (int ci = 0; ci < d->c; ci++), {
            col2im_channel(d, g, col, ci, dx + (size_t)ci * g->hw, accumulate);
        });
    }
}

/* The same GEMM for every group, operands stepping by a fixed stride. */
typedef struct group_gemm {
    int trans_a, trans_b, m, n, k;
    const float *a;
    size_t a_step;
    int lda;
    const float *b;
    size_t b_step;
    int ldb;
    float beta;
    float *c;
    size_t c_step;
    int ldc;
} group_gemm;

static void group_gemm_whole(const group_gemm *q, int gr)
{
    sl_cpu_tiling one = {1, 1};
    sl_cpu_gemm_part(&one, 0, q->trans_a, q->trans_b, q->m, q->n, q->k, 1.0f,
                     q->a + gr * q->a_step, q->lda, q->b + gr * q->b_step, q->ldb, q->beta,
                     q->c + gr * q->c_step, q->ldc);
}

static void run_group_gemms(const conv_team *tm, const group_gemm *q, int groups)
{
    if (!tm->tiled) {
        for (int gr = 0; gr < groups; gr++)
            group_gemm_whole(q, gr);
    } else if (groups >= tm->size) {
        for (int gr = tm->id; gr < groups; gr += tm->size)
            group_gemm_whole(q, gr);
    } else {
        sl_cpu_tiling t = sl_cpu_gemm_tiling(tm->size, q->m, q->n);
        for (int gr = 0; gr < groups; gr++)
            sl_cpu_gemm_part(&t, tm->id, q->trans_a, q->trans_b, q->m, q->n, q->k, 1.0f,
                             q->a + gr * q->a_step, q->lda, q->b + gr * q->b_step, q->ldb,
                             q->beta, q->c + gr * q->c_step, q->ldc);
    }
}

/* ---- forward ---- */

static void conv_bias_add(const conv_team *tm, const sl_conv_desc *d, size_t ohw,
                          const float *bias, float *y);

static void conv_forward_run(const conv_team *tm, const sl_conv_desc *d, const float *x,
                             const float *w, const float *bias, float *y, float *col)
{
    conv_dims g = conv_dims_of(d);
    for (int i = 0; i < d->n; i++) {
        const float *xi = x + (size_t)i * d->c * g.hw;
        group_gemm q = {0, 0, g.kg, (int)g.ohw, g.kdim, w, (size_t)g.kg * g.kdim, g.kdim,
                        xi, (size_t)g.cg * g.hw, (int)g.hw, 0.0f,
                        y + (size_t)i * d->k * g.ohw, (size_t)g.kg * g.ohw, (int)g.ohw};
        if (!g.pointwise) {
            im2col_image(tm, d, &g, xi, col);
            q.b = col;
            q.b_step = (size_t)g.kdim * g.ohw;
            q.ldb = (int)g.ohw;
        }
        run_group_gemms(tm, &q, d->groups);
        if (!g.pointwise)
            conv_team_barrier(tm); /* col is refilled next */
    }
    if (bias)
        conv_bias_add(tm, d, g.ohw, bias, y);
}

/* y += bias, per output plane. */
static void conv_bias_add(const conv_team *tm, const sl_conv_desc *d, size_t ohw,
                          const float *bias, float *y)
{
    int planes = d->n * d->k;
    if (tm->tiled) {
        conv_team_barrier(tm);
#pragma omp for schedule(static)
        for (int p = 0; p < planes; p++)
            for (size_t j = 0; j < ohw; j++)
                y[(size_t)p * ohw + j] += bias[p % d->k];
    } else {
        int par = (double)planes * (double)ohw >= CPU_PAR_MIN;
        SL_PARALLEL_FOR(tm->threads, par, (int p = 0; p < planes; p++), {
            for (size_t j = 0; j < ohw; j++)
                y[(size_t)p * ohw + j] += bias[p % d->k];
        });
    }
}

/* A bf16 pass reaches here only through a plan that runs it on oneDNN
 * (conv2d_native_bf16 said so), and without a bias (the contract);
 * anything else is the caller's error, reported at the next sync. */
static int bf16_unplanned(const sl_exec *ex, const sl_conv_desc *d)
{
    if (!d->bf16)
        return 0;
    sl_cpu_state_fail(ex->be->impl, "a bf16 convolution was run without its oneDNN plan");
    return 1;
}

static int bf16_with_bias(const sl_exec *ex, const sl_conv_desc *d, const float *bias)
{
    if (!d->bf16 || !bias)
        return 0;
    sl_cpu_state_fail(ex->be->impl, "a bf16 convolution was given a bias (none is supported)");
    return 1;
}

void sl_cpu_conv2d_forward(const sl_exec *ex, const sl_conv_desc *d, const void *xv, const float *w,
                           const float *bias, void *yv, void *ws)
{
    const float *x = xv;
    float *y = yv;
    if (bf16_with_bias(ex, d, bias))
        return;
    if (sl_cpu_onednn_conv_forward(ex, d, x, w, y, ws)) {
        if (bias) {
            conv_team tm = conv_team_here(ex, 0);
            conv_bias_add(&tm, d, (size_t)d->oh * d->ow, bias, y);
        }
        return;
    }
    if (bf16_unplanned(ex, d))
        return;
    if (sl_cpu_gemm_tiled(ex)) {
#pragma omp parallel num_threads(cpu_threads(ex))
        {
            conv_team tm = conv_team_here(ex, 1);
            conv_forward_run(&tm, d, x, w, bias, y, ws);
        }
    } else {
        conv_team tm = conv_team_here(ex, 0);
        conv_forward_run(&tm, d, x, w, bias, y, ws);
    }
}

/* ---- backward data ---- */

static void conv_backward_data_run(const conv_team *tm, const sl_conv_desc *d, const float *w,
                                   const float *dy, float *dx, int accumulate, float *col)
{
    conv_dims g = conv_dims_of(d);
    for (int i = 0; i < d->n; i++) {
        float *dxi = dx + (size_t)i * d->c * g.hw;
        group_gemm q = {1, 0, g.kdim, (int)g.ohw, g.kg, w, (size_t)g.kg * g.kdim, g.kdim,
                        dy + (size_t)i * d->k * g.ohw, (size_t)g.kg * g.ohw, (int)g.ohw,
                        accumulate ? 1.0f : 0.0f, dxi, (size_t)g.cg * g.hw, (int)g.hw};
        if (g.pointwise) {
            run_group_gemms(tm, &q, d->groups);
            continue;
        }
        q.beta = 0.0f;
        q.c = col;
        q.c_step = (size_t)g.kdim * g.ohw;
        q.ldc = (int)g.ohw;
        run_group_gemms(tm, &q, d->groups);
        conv_team_barrier(tm);
        col2im_image(tm, d, &g, col, dxi, accumulate); /* ends in a barrier */
    }
}

void sl_cpu_conv2d_backward_data(const sl_exec *ex, const sl_conv_desc *d, const float *w,
                                 const void *dyv, void *dxv, int accumulate, void *ws)
{
    const float *dy = dyv;
    float *dx = dxv;
    if (sl_cpu_onednn_conv_backward_data(ex, d, w, dy, dx, accumulate, ws) ||
        bf16_unplanned(ex, d))
        return;
    if (sl_cpu_gemm_tiled(ex)) {
#pragma omp parallel num_threads(cpu_threads(ex))
        {
            conv_team tm = conv_team_here(ex, 1);
            conv_backward_data_run(&tm, d, w, dy, dx, accumulate, ws);
        }
    } else {
        conv_team tm = conv_team_here(ex, 0);
        conv_backward_data_run(&tm, d, w, dy, dx, accumulate, ws);
    }
}

/* ---- backward filter ---- */

static void conv_bias_sum(const sl_conv_desc *d, size_t ohw, const float *dy, int k,
                          float *dbias)
{
    double s = 0.0;
    for (int i = 0; i < d->n; i++) {
        const float *p = dy + ((size_t)i * d->k + k) * ohw;
        for (size_t j = 0; j < ohw; j++)
            s += p[j];
    }
    dbias[k] += (float)s;
}

/* dbias += the sums of dy's planes. */
static void conv_bias_grad(const conv_team *tm, const sl_conv_desc *d, size_t ohw,
                           const float *dy, float *dbias)
{
    if (tm->tiled) {
#pragma omp for schedule(static)
        for (int k = 0; k < d->k; k++)
            conv_bias_sum(d, ohw, dy, k, dbias);
    } else {
        int par = (double)d->n * d->k * (double)ohw >= CPU_PAR_MIN;
        SL_PARALLEL_FOR(tm->threads, par, (int k = 0; k < d->k; k++), {
            conv_bias_sum(d, ohw, dy, k, dbias);
        });
    }
}

static void conv_backward_filter_run(const conv_team *tm, const sl_conv_desc *d,
                                     const float *x, const float *dy, float *dw, float *dbias,
                                     float *col)
{
    conv_dims g = conv_dims_of(d);
    for (int i = 0; i < d->n; i++) {
        const float *xi = x + (size_t)i * d->c * g.hw;
        group_gemm q = {0, 1, g.kg, g.kdim, (int)g.ohw, dy + (size_t)i * d->k * g.ohw,
                        (size_t)g.kg * g.ohw, (int)g.ohw, xi, (size_t)g.cg * g.hw, (int)g.hw,
                        1.0f, dw, (size_t)g.kg * g.kdim, g.kdim};
        if (!g.pointwise) {
            im2col_image(tm, d, &g, xi, col);
            q.b = col;
            q.b_step = (size_t)g.kdim * g.ohw;
            q.ldb = (int)g.ohw;
        }
        run_group_gemms(tm, &q, d->groups);
        if (!g.pointwise)
            conv_team_barrier(tm);
    }
    if (dbias)
        conv_bias_grad(tm, d, g.ohw, dy, dbias);
}

void sl_cpu_conv2d_backward_filter(const sl_exec *ex, const sl_conv_desc *d, const void *xv,
                                   const void *dyv, float *dw, float *dbias, void *ws)
{
    const float *x = xv, *dy = dyv;
    if (bf16_with_bias(ex, d, dbias))
        return;
    if (sl_cpu_onednn_conv_backward_filter(ex, d, x, dy, dw, ws)) {
        if (dbias) {
            conv_team tm = conv_team_here(ex, 0);
            conv_bias_grad(&tm, d, (size_t)d->oh * d->ow, dy, dbias);
        }
        return;
    }
    if (bf16_unplanned(ex, d))
        return;
    if (sl_cpu_gemm_tiled(ex)) {
#pragma omp parallel num_threads(cpu_threads(ex))
        {
            conv_team tm = conv_team_here(ex, 1);
            conv_backward_filter_run(&tm, d, x, dy, dw, dbias, ws);
        }
    } else {
        conv_team tm = conv_team_here(ex, 0);
        conv_backward_filter_run(&tm, d, x, dy, dw, dbias, ws);
    }
}
