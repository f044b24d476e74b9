/*
 * cuda_pool.cu — pooling on the GPU (run stage): max and average pooling
 * and global average pooling. Backward passes are gathers (each input
 * element summed by one thread over the windows that cover it, in a fixed
 * order), never atomic scatters, so results are deterministic.
 */
#include "cuda/cuda_common.h"

/* ---- pooling ---- */

__global__ void maxpool_fwd(size_t total, sl_pool_desc d, const float *x, float *y, int32_t *argmax)
{
    GRID_STRIDE(i, total)
    {
        int ow = (int)(i % d.ow), oh = (int)((i / d.ow) % d.oh);
        size_t plane = i / ((size_t)d.ow * d.oh);
        const float *xp = x + plane * d.h * d.w;
        float best = 0.0f;
        int at = -1;
        for (int ky = 0; ky < d.kh; ky++) {
            int ih = oh * d.sh - d.ph + ky;
            if (ih < 0 || ih >= d.h)
                continue;
            for (int kx = 0; kx < d.kw; kx++) {
                int iw = ow * d.sw - d.pw + kx;
                if (iw < 0 || iw >= d.w)
                    continue;
                float v = xp[ih * d.w + iw];
                if (at < 0 || v > best || isnan(v)) { /* the CPU's rule: every NaN is taken */
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
__device__ static void windows(int i, int k, int s, int p, int out, int *lo, int *hi)
{
    int a = i + p - k + 1;
    *lo = a <= 0 ? 0 : (a + s - 1) / s;
    int b = (i + p) / s;
    *hi = b < out - 1 ? b : out - 1;
}

__global__ void maxpool_bwd(size_t total, sl_pool_desc d, const int32_t *argmax, const float *dy,
                            float *dx, int accumulate)
{
    GRID_STRIDE(i, total)
    {
        int iw = (int)(i % d.w), ih = (int)((i / d.w) % d.h);
        size_t plane = i / ((size_t)d.w * d.h);
        int ylo, yhi, xlo, xhi;
        windows(ih, d.kh, d.sh, d.ph, d.oh, &ylo, &yhi);
        windows(iw, d.kw, d.sw, d.pw, d.ow, &xlo, &xhi);
        const float *g = dy + plane * d.oh * d.ow;
        const int32_t *am = argmax + plane * d.oh * d.ow;
        int me = ih * d.w + iw;
        float acc = 0.0f;
        for (int oy = ylo; oy <= yhi; oy++)
            for (int ox = xlo; ox <= xhi; ox++)
                if (am[oy * d.ow + ox] == me)
                    acc += g[oy * d.ow + ox];
        dx[i] = accumulate ? dx[i] + acc : acc;
    }
}

__global__ void avgpool_fwd(size_t total, sl_pool_desc d, const float *x, float *y)
{
    GRID_STRIDE(i, total)
    {
        int ow = (int)(i % d.ow), oh = (int)((i / d.ow) % d.oh);
        size_t plane = i / ((size_t)d.ow * d.oh);
        const float *xp = x + plane * d.h * d.w;
        float acc = 0.0f;
        for (int ky = 0; ky < d.kh; ky++) {
            int ih = oh * d.sh - d.ph + ky;
            if (ih < 0 || ih >= d.h)
                continue;
            for (int kx = 0; kx < d.kw; kx++) {
                int iw = ow * d.sw - d.pw + kx;
                if (iw >= 0 && iw < d.w)
                    acc += xp[ih * d.w + iw];
            }
        }
        y[i] = acc / (float)(d.kh * d.kw);
    }
}

__global__ void avgpool_bwd(size_t total, sl_pool_desc d, const float *dy, float *dx, int accumulate)
{
    GRID_STRIDE(i, total)
    {
        int iw = (int)(i % d.w), ih = (int)((i / d.w) % d.h);
        size_t plane = i / ((size_t)d.w * d.h);
        int ylo, yhi, xlo, xhi;
        windows(ih, d.kh, d.sh, d.ph, d.oh, &ylo, &yhi);
        windows(iw, d.kw, d.sw, d.pw, d.ow, &xlo, &xhi);
        const float *g = dy + plane * d.oh * d.ow;
        float acc = 0.0f;
        for (int oy = ylo; oy <= yhi; oy++)
            for (int ox = xlo; ox <= xhi; ox++)
                acc += g[oy * d.ow + ox];
        acc /= (float)(d.kh * d.kw);
        dx[i] = accumulate ? dx[i] + acc : acc;
    }
}

extern "C" void sl_cuda_maxpool_forward(const sl_exec *ex, const sl_pool_desc *d, const float *x,
                                        float *y, int32_t *argmax)
{
    size_t total = (size_t)d->n * d->c * d->oh * d->ow;
    SL_CUDA_LAUNCH(ex, maxpool_fwd, total, total, *d, x, y, argmax);
}

extern "C" void sl_cuda_maxpool_backward(const sl_exec *ex, const sl_pool_desc *d,
                                         const int32_t *argmax, const float *dy, float *dx,
                                         int accumulate)
{
    size_t total = (size_t)d->n * d->c * d->h * d->w;
    SL_CUDA_LAUNCH(ex, maxpool_bwd, total, total, *d, argmax, dy, dx, accumulate);
}

extern "C" void sl_cuda_avgpool_forward(const sl_exec *ex, const sl_pool_desc *d, const float *x,
                                        float *y)
{
    size_t total = (size_t)d->n * d->c * d->oh * d->ow;
    SL_CUDA_LAUNCH(ex, avgpool_fwd, total, total, *d, x, y);
}

extern "C" void sl_cuda_avgpool_backward(const sl_exec *ex, const sl_pool_desc *d, const float *dy,
                                         float *dx, int accumulate)
{
    size_t total = (size_t)d->n * d->c * d->h * d->w;
    SL_CUDA_LAUNCH(ex, avgpool_bwd, total, total, *d, dy, dx, accumulate);
}

/* One thread per plane: the mean summed in order (as the CPU). */
__global__ void gap_fwd(size_t nc, int hw, const float *x, float *y)
{
    GRID_STRIDE(i, nc)
    {
        double acc = 0.0;
        for (int j = 0; j < hw; j++)
            acc += x[i * hw + j];
        y[i] = (float)(acc / hw);
    }
}

__global__ void gap_bwd(size_t total, int hw, const float *dy, float *dx, int accumulate)
{
    GRID_STRIDE(i, total)
    {
        float g = dy[i / hw] / (float)hw;
        dx[i] = accumulate ? dx[i] + g : g;
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
    size_t total = (size_t)nc * hw;
    SL_CUDA_LAUNCH(ex, gap_bwd, total, total, hw, dy, dx, accumulate);
}

