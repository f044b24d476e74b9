/*
 * cuda_kernels.cu — the small kernels of the CUDA backend (run stage):
 * pooling, ReLU, dropout (cuRAND's Philox4x32-10, keyed exactly as on the
 * CPU, so both draw the same mask), adds and copies, concatenation slices,
 * global average pooling and bias. Every backward is written as a gather
 * (each output element summed by one thread in a fixed order), never as an
 * atomic scatter, so results are deterministic.
 */
#include <curand_philox4x32_x.h>

#include "cuda/cuda_common.h"

#define GRID_STRIDE(i, n)                                                                         \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                      \
         i += (size_t)gridDim.x * blockDim.x)

static cudaStream_t stream(void) { return sl_cuda_state_get()->stream; }

#define LAUNCH(kernel, n, ...)                                                                    \
    do {                                                                                          \
        kernel<<<sl_cuda_blocks(n), 256, 0, stream()>>>(__VA_ARGS__);                            \
        SL_CUDA_LAUNCHED();                                                                       \
    } while (0)

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
                if (at < 0 || v > best || (isnan(v) && !isnan(best))) {
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
    (void)ex;
    size_t total = (size_t)d->n * d->c * d->oh * d->ow;
    LAUNCH(maxpool_fwd, total, total, *d, x, y, argmax);
}

extern "C" void sl_cuda_maxpool_backward(const sl_exec *ex, const sl_pool_desc *d,
                                         const int32_t *argmax, const float *dy, float *dx,
                                         int accumulate)
{
    (void)ex;
    size_t total = (size_t)d->n * d->c * d->h * d->w;
    LAUNCH(maxpool_bwd, total, total, *d, argmax, dy, dx, accumulate);
}

extern "C" void sl_cuda_avgpool_forward(const sl_exec *ex, const sl_pool_desc *d, const float *x,
                                        float *y)
{
    (void)ex;
    size_t total = (size_t)d->n * d->c * d->oh * d->ow;
    LAUNCH(avgpool_fwd, total, total, *d, x, y);
}

extern "C" void sl_cuda_avgpool_backward(const sl_exec *ex, const sl_pool_desc *d, const float *dy,
                                         float *dx, int accumulate)
{
    (void)ex;
    size_t total = (size_t)d->n * d->c * d->h * d->w;
    LAUNCH(avgpool_bwd, total, total, *d, dy, dx, accumulate);
}

/* ---- elementwise ---- */

__global__ void relu_fwd(size_t n, const float *x, float *y)
{
    GRID_STRIDE(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void relu_bwd(size_t n, const float *y, const float *dy, float *dx, int accumulate)
{
    GRID_STRIDE(i, n)
    {
        float g = y[i] > 0.0f ? dy[i] : 0.0f;
        dx[i] = accumulate ? dx[i] + g : g;
    }
}

extern "C" void sl_cuda_relu_forward(const sl_exec *ex, size_t count, const float *x, float *y)
{
    (void)ex;
    LAUNCH(relu_fwd, count, count, x, y);
}

extern "C" void sl_cuda_relu_backward(const sl_exec *ex, size_t count, const float *y,
                                      const float *dy, float *dx, int accumulate)
{
    (void)ex;
    LAUNCH(relu_bwd, count, count, y, dy, dx, accumulate);
}

/* Element i keeps iff word i % 4 of Philox block counter + i / 4 is at
 * least the threshold: the CPU's rule (cpu_dropout.c). */
__device__ static bool keep(size_t i, uint64_t counter, uint2 key, uint32_t threshold, int drop_all)
{
    uint64_t c = counter + i / 4;
    uint4 ctr = make_uint4((uint32_t)c, (uint32_t)(c >> 32), 0u, 0u);
    uint4 r = curand_Philox4x32_10(ctr, key);
    uint32_t w = (i % 4 == 0) ? r.x : (i % 4 == 1) ? r.y : (i % 4 == 2) ? r.z : r.w;
    return !drop_all && w >= threshold;
}

__global__ void dropout_fwd(size_t n, const float *x, float *y, uint64_t counter, uint2 key,
                            uint32_t threshold, float scale, int drop_all)
{
    GRID_STRIDE(i, n) y[i] = keep(i, counter, key, threshold, drop_all) ? x[i] * scale : 0.0f;
}

__global__ void dropout_bwd(size_t n, const float *dy, float *dx, uint64_t counter, uint2 key,
                            uint32_t threshold, float scale, int drop_all, int accumulate)
{
    GRID_STRIDE(i, n)
    {
        float g = keep(i, counter, key, threshold, drop_all) ? dy[i] * scale : 0.0f;
        dx[i] = accumulate ? dx[i] + g : g;
    }
}

static void mask_params(float p, uint64_t seed, uint2 *key, uint32_t *threshold, float *scale,
                        int *drop_all)
{
    double t = (double)p * 4294967296.0;
    *key = make_uint2((uint32_t)seed, (uint32_t)(seed >> 32));
    *threshold = t <= 0.0 ? 0u : t >= 4294967295.0 ? 4294967295u : (uint32_t)t;
    *drop_all = p >= 1.0f;
    *scale = *drop_all ? 0.0f : 1.0f / (1.0f - p);
}

extern "C" void sl_cuda_dropout_forward(const sl_exec *ex, size_t count, const float *x, float *y,
                                        float p, uint64_t seed, uint64_t counter)
{
    (void)ex;
    uint2 key;
    uint32_t th;
    float scale;
    int all;
    mask_params(p, seed, &key, &th, &scale, &all);
    LAUNCH(dropout_fwd, count, count, x, y, counter, key, th, scale, all);
}

extern "C" void sl_cuda_dropout_backward(const sl_exec *ex, size_t count, const float *dy,
                                         float *dx, float p, uint64_t seed, uint64_t counter,
                                         int accumulate)
{
    (void)ex;
    uint2 key;
    uint32_t th;
    float scale;
    int all;
    mask_params(p, seed, &key, &th, &scale, &all);
    LAUNCH(dropout_bwd, count, count, dy, dx, counter, key, th, scale, all, accumulate);
}

__global__ void add_k(size_t n, const float *a, const float *b, float *y)
{
    GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}

__global__ void copy_k(size_t n, const float *s, float *d, int accumulate)
{
    GRID_STRIDE(i, n) d[i] = accumulate ? d[i] + s[i] : s[i];
}

__global__ void fill_k(size_t n, float v, float *d)
{
    GRID_STRIDE(i, n) d[i] = v;
}

extern "C" void sl_cuda_add(const sl_exec *ex, size_t count, const float *a, const float *b, float *y)
{
    (void)ex;
    LAUNCH(add_k, count, count, a, b, y);
}

extern "C" void sl_cuda_copy(const sl_exec *ex, size_t count, const float *src, float *dst,
                             int accumulate)
{
    (void)ex;
    if (src == dst && !accumulate)
        return;
    LAUNCH(copy_k, count, count, src, dst, accumulate);
}

extern "C" void sl_cuda_fill(const sl_exec *ex, size_t count, float value, float *dst)
{
    (void)ex;
    LAUNCH(fill_k, count, count, value, dst);
}

__global__ void copy_channels_k(size_t total, int hw, int c_count, const float *src, int src_c,
                                int src_off, float *dst, int dst_c, int dst_off, int accumulate)
{
    GRID_STRIDE(i, total)
    {
        size_t j = i % hw, ch = (i / hw) % c_count, img = i / ((size_t)hw * c_count);
        float v = src[(img * src_c + src_off + ch) * hw + j];
        float *d = &dst[(img * dst_c + dst_off + ch) * hw + j];
        *d = accumulate ? *d + v : v;
    }
}

extern "C" void sl_cuda_copy_channels(const sl_exec *ex, int n, int hw, int c_count,
                                      const float *src, int src_c, int src_off, float *dst,
                                      int dst_c, int dst_off, int accumulate)
{
    (void)ex;
    size_t total = (size_t)n * c_count * hw;
    LAUNCH(copy_channels_k, total, total, hw, c_count, src, src_c, src_off, dst, dst_c, dst_off,
           accumulate);
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
    (void)ex;
    LAUNCH(gap_fwd, (size_t)nc, (size_t)nc, hw, x, y);
}

extern "C" void sl_cuda_global_avgpool_backward(const sl_exec *ex, int nc, int hw, const float *dy,
                                                float *dx, int accumulate)
{
    (void)ex;
    size_t total = (size_t)nc * hw;
    LAUNCH(gap_bwd, total, total, hw, dy, dx, accumulate);
}

__global__ void bias_add_k(size_t total, int cols, const float *bias, float *y)
{
    GRID_STRIDE(i, total) y[i] += bias[i % cols];
}

/* One thread per column, rows in order, in double. */
__global__ void bias_bwd_k(int rows, int cols, const float *dy, float *dbias)
{
    GRID_STRIDE(j, (size_t)cols)
    {
        double acc = 0.0;
        for (int r = 0; r < rows; r++)
            acc += dy[(size_t)r * cols + j];
        dbias[j] += (float)acc;
    }
}

extern "C" void sl_cuda_bias_add(const sl_exec *ex, int rows, int cols, const float *bias, float *y)
{
    (void)ex;
    size_t total = (size_t)rows * cols;
    LAUNCH(bias_add_k, total, total, cols, bias, y);
}

extern "C" void sl_cuda_bias_backward(const sl_exec *ex, int rows, int cols, const float *dy,
                                      float *dbias)
{
    (void)ex;
    LAUNCH(bias_bwd_k, (size_t)cols, rows, cols, dy, dbias);
}
