/*
 * cuda_pool.cu — pooling on the GPU (run stage): max and average pooling
 * and global average pooling. Backward passes are gathers (each input
 * element summed by one thread over the windows that cover it, in a fixed
 * order), never atomic scatters, so results are deterministic. Windows,
 * the max rule (NaN included) and the averages are base/element.h's, the
 * ones cpu_pool.c calls.
 */
#include <math.h>

#include "base/element.h"
#include "cuda/cuda_common.h"

/* ---- pooling ---- */

/* One thread per output: its window's taps in the CPU's order (row by
 * row), the first maximum or a NaN winning. Kernels run over channel
 * planes (sl_cuda_plane_grid): j indexes the plane, so a row and column
 * cost one 32-bit division, never a 64-bit one per element. */
static __global__ void maxpool_fwd(size_t planes, sl_pool_desc d, const float *x, float *y,
                                   int32_t *argmax)
{
    int len = d.oh * d.ow;
    PLANE_LOOP(plane, j, planes, len)
    {
        int oh = j / d.ow, ow = j - oh * d.ow;
        size_t i = plane * (size_t)len + (size_t)j;
        const float *xp = x + plane * d.h * d.w;
        int y0, y1, x0, x1;
        sl_pool_window(oh, d.sh, d.ph, d.kh, d.h, &y0, &y1);
        sl_pool_window(ow, d.sw, d.pw, d.kw, d.w, &x0, &x1);
        float best = -INFINITY;
        int at = sl_pool_first(oh, d.sh, d.ph, d.h) * d.w + sl_pool_first(ow, d.sw, d.pw, d.w);
        for (int ih = y0; ih < y1; ih++) {
            for (int iw = x0; iw < x1; iw++) {
                float v = xp[ih * d.w + iw];
                if (sl_maxpool_takes(v, best)) {
                    best = v;
                    at = ih * d.w + iw;
                }
            }
        }
        y[i] = best;
        if (argmax)
            argmax[i] = at;
    }
}

/* Output windows covering input row/column `i`: [lo, hi]. */
static __device__ void windows(int i, int k, int s, int p, int out, int *lo, int *hi)
{
    int a = i + p - k + 1;
    *lo = a <= 0 ? 0 : (a + s - 1) / s;
    int b = (i + p) / s;
    *hi = b < out - 1 ? b : out - 1;
}

/* The outputs whose windows hold cell j of an input plane: rows
 * ylo..yhi, columns xlo..xhi (the backward gathers' loop bounds). */
struct out_range {
    int ylo, yhi, xlo, xhi;
};

static __device__ out_range outputs_reading(int j, const sl_pool_desc &d)
{
    int ih = j / d.w, iw = j - ih * d.w;
    out_range r;
    windows(ih, d.kh, d.sh, d.ph, d.oh, &r.ylo, &r.yhi);
    windows(iw, d.kw, d.sw, d.pw, d.ow, &r.xlo, &r.xhi);
    return r;
}

static __global__ void maxpool_bwd(size_t planes, sl_pool_desc d, const int32_t *argmax,
                                   const float *dy, float *dx, int accumulate)
{
    int len = d.h * d.w;
    PLANE_LOOP(plane, j, planes, len)
    {
        size_t i = plane * (size_t)len + (size_t)j;
        out_range r = outputs_reading(j, d);
        const float *g = dy + plane * d.oh * d.ow;
        const int32_t *am = argmax + plane * d.oh * d.ow;
        /* accumulating, start from dx as the CPU's scatter does: its sum
         * is ((dx + g1) + g2) ..., in the same window order */
        float acc = accumulate ? dx[i] : 0.0f;
        for (int oy = r.ylo; oy <= r.yhi; oy++)
            for (int ox = r.xlo; ox <= r.xhi; ox++)
                if (am[oy * d.ow + ox] == j) /* argmax: the flat h*w index */
                    acc += g[oy * d.ow + ox];
        dx[i] = acc;
    }
}

static __global__ void avgpool_fwd(size_t planes, sl_pool_desc d, const float *x, float *y)
{
    int len = d.oh * d.ow;
    PLANE_LOOP(plane, j, planes, len)
    {
        int oh = j / d.ow, ow = j - oh * d.ow;
        size_t i = plane * (size_t)len + (size_t)j;
        int y0, y1, x0, x1;
        sl_pool_window(oh, d.sh, d.ph, d.kh, d.h, &y0, &y1);
        sl_pool_window(ow, d.sw, d.pw, d.kw, d.w, &x0, &x1);
        y[i] = sl_avgpool_window_sum(x + plane * d.h * d.w, d.w, y0, y1, x0, x1) /
               sl_avgpool_area(&d);
    }
}

static __global__ void avgpool_bwd(size_t planes, sl_pool_desc d, const float *dy, float *dx,
                                   int accumulate)
{
    int len = d.h * d.w;
    PLANE_LOOP(plane, j, planes, len)
    {
        size_t i = plane * (size_t)len + (size_t)j;
        out_range r = outputs_reading(j, d);
        const float *g = dy + plane * d.oh * d.ow;
        float area = sl_avgpool_area(&d), acc = accumulate ? dx[i] : 0.0f;
        for (int oy = r.ylo; oy <= r.yhi; oy++)
            for (int ox = r.xlo; ox <= r.xhi; ox++)
                acc += sl_avgpool_grad(g[oy * d.ow + ox], area);
        dx[i] = acc;
    }
}

extern "C" void sl_cuda_maxpool_forward(const sl_exec *ex, const sl_pool_desc *d, const float *x,
                                        float *y, int32_t *argmax)
{
    size_t planes = (size_t)d->n * d->c;
    SL_CUDA_LAUNCH_PLANES(ex, maxpool_fwd, planes, d->oh * d->ow, planes, *d, x, y, argmax);
}

extern "C" void sl_cuda_maxpool_backward(const sl_exec *ex, const sl_pool_desc *d,
                                         const int32_t *argmax, const float *dy, float *dx,
                                         int accumulate)
{
    size_t planes = (size_t)d->n * d->c;
    SL_CUDA_LAUNCH_PLANES(ex, maxpool_bwd, planes, d->h * d->w, planes, *d, argmax, dy, dx,
                          accumulate);
}

extern "C" void sl_cuda_avgpool_forward(const sl_exec *ex, const sl_pool_desc *d, const float *x,
                                        float *y)
{
    size_t planes = (size_t)d->n * d->c;
    SL_CUDA_LAUNCH_PLANES(ex, avgpool_fwd, planes, d->oh * d->ow, planes, *d, x, y);
}

extern "C" void sl_cuda_avgpool_backward(const sl_exec *ex, const sl_pool_desc *d, const float *dy,
                                         float *dx, int accumulate)
{
    size_t planes = (size_t)d->n * d->c;
    SL_CUDA_LAUNCH_PLANES(ex, avgpool_bwd, planes, d->h * d->w, planes, *d, dy, dx, accumulate);
}

/* One thread per plane: the mean summed in order (as the CPU). */
static __global__ void gap_fwd(size_t nc, int hw, const float *x, float *y)
{
    GRID_STRIDE(i, nc) y[i] = sl_gap_mean(x + i * hw, hw);
}

static __global__ void gap_bwd(size_t nc, int hw, const float *dy, float *dx, int accumulate)
{
    PLANE_LOOP(plane, j, nc, hw)
    {
        sl_put(&dx[plane * (size_t)hw + (size_t)j], sl_gap_grad(dy[plane], hw), accumulate);
    }
}

extern "C" void sl_cuda_global_avgpool_forward(const sl_exec *ex, int nc, int hw, const float *x,
                                               float *y)
{
    SL_CUDA_LAUNCH(ex, gap_fwd, (size_t)nc, (size_t)nc, hw, x, y);
}

extern "C" void sl_cuda_global_avgpool_backward(const sl_exec *ex, int nc, int hw, const float *dy,
                                                float *dx, int accumulate)
{
    SL_CUDA_LAUNCH_PLANES(ex, gap_bwd, (size_t)nc, hw, (size_t)nc, hw, dy, dx, accumulate);
}

