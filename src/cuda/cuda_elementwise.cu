/*
 * cuda_elementwise.cu — the elementwise kernels of the CUDA backend (run
 * stage): ReLU, dropout (cuRAND's Philox4x32-10, keyed exactly as on the
 * CPU, so both draw the same mask), adds and copies, concatenation slices
 * and Linear's bias. Every backward is written as a gather (each output
 * element summed by one thread in a fixed order), never as an atomic
 * scatter, so results are deterministic.
 */
#include <curand_philox4x32_x.h>

#include "cuda/cuda_common.h"

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
    SL_CUDA_LAUNCH(ex, relu_fwd, count, count, x, y);
}

extern "C" void sl_cuda_relu_backward(const sl_exec *ex, size_t count, const float *y,
                                      const float *dy, float *dx, int accumulate)
{
    SL_CUDA_LAUNCH(ex, relu_bwd, count, count, y, dy, dx, accumulate);
}

/* Element i keeps iff word i % 4 of Philox block counter + i / 4 is at
 * least the threshold: the CPU's rule (cpu_elementwise.c). */
__device__ static bool keep(size_t i, uint64_t counter, uint2 key, uint32_t threshold, int drop_all)
{
    uint64_t c = counter + i / 4;
    uint4 ctr = make_uint4((uint32_t)c, (uint32_t)(c >> 32), 0u, 0u);
    uint4 r = curand_Philox4x32_10(ctr, key);
    uint32_t w = (i % 4 == 0) ? r.x : (i % 4 == 1) ? r.y : (i % 4 == 2) ? r.z : r.w;
    return !drop_all && w >= threshold;
}

/* dst (+)= keep ? src * scale : 0: the forward over x, the backward over
 * dy with the same mask. */
__global__ void dropout_mask_k(size_t n, const float *src, float *dst, uint64_t counter, uint2 key,
                               uint32_t threshold, float scale, int drop_all, int accumulate)
{
    GRID_STRIDE(i, n)
    {
        float v = keep(i, counter, key, threshold, drop_all) ? src[i] * scale : 0.0f;
        dst[i] = accumulate ? dst[i] + v : v;
    }
}

static void apply_mask(const sl_exec *ex, size_t count, const float *src, float *dst, float p,
                       uint64_t seed, uint64_t counter, int accumulate)
{
    double t = (double)p * 4294967296.0;
    uint2 key = make_uint2((uint32_t)seed, (uint32_t)(seed >> 32));
    uint32_t threshold = t <= 0.0 ? 0u : t >= 4294967295.0 ? 4294967295u : (uint32_t)t;
    int drop_all = p >= 1.0f;
    float scale = drop_all ? 0.0f : 1.0f / (1.0f - p);
    SL_CUDA_LAUNCH(ex, dropout_mask_k, count, count, src, dst, counter, key, threshold, scale,
                   drop_all, accumulate);
}

extern "C" void sl_cuda_dropout_forward(const sl_exec *ex, size_t count, const float *x, float *y,
                                        float p, uint64_t seed, uint64_t counter)
{
    apply_mask(ex, count, x, y, p, seed, counter, 0);
}

extern "C" void sl_cuda_dropout_backward(const sl_exec *ex, size_t count, const float *dy,
                                         float *dx, float p, uint64_t seed, uint64_t counter,
                                         int accumulate)
{
    apply_mask(ex, count, dy, dx, p, seed, counter, accumulate);
}

/* Element j is word e % 4 of block counter + e / 4, e = first + j: the
 * CPU's rule (cpu_random_uniform). */
__global__ void uniform_k(size_t n, uint64_t counter, uint64_t first, uint2 key, float *dst)
{
    GRID_STRIDE(j, n)
    {
        uint64_t e = first + j, c = counter + e / 4;
        uint4 ctr = make_uint4((uint32_t)c, (uint32_t)(c >> 32), 0u, 0u);
        uint4 r = curand_Philox4x32_10(ctr, key);
        uint32_t w = (e % 4 == 0) ? r.x : (e % 4 == 1) ? r.y : (e % 4 == 2) ? r.z : r.w;
        dst[j] = (float)(w >> 8) * (1.0f / 16777216.0f);
    }
}

extern "C" void sl_cuda_random_uniform(const sl_exec *ex, size_t count, uint64_t seed,
                                       uint64_t counter, uint64_t first, float *dst)
{
    if (count == 0)
        return;
    uint2 key = make_uint2((uint32_t)seed, (uint32_t)(seed >> 32));
    SL_CUDA_LAUNCH(ex, uniform_k, count, count, counter, first, key, dst);
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
    SL_CUDA_LAUNCH(ex, add_k, count, count, a, b, y);
}

extern "C" void sl_cuda_copy(const sl_exec *ex, size_t count, const float *src, float *dst,
                             int accumulate)
{
    if (src == dst && !accumulate)
        return;
    SL_CUDA_LAUNCH(ex, copy_k, count, count, src, dst, accumulate);
}

extern "C" void sl_cuda_fill(const sl_exec *ex, size_t count, float value, float *dst)
{
    SL_CUDA_LAUNCH(ex, fill_k, count, count, value, dst);
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
    size_t total = (size_t)n * c_count * hw;
    SL_CUDA_LAUNCH(ex, copy_channels_k, total, total, hw, c_count, src, src_c, src_off, dst, dst_c, dst_off,
           accumulate);
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
    size_t total = (size_t)rows * cols;
    SL_CUDA_LAUNCH(ex, bias_add_k, total, total, cols, bias, y);
}

extern "C" void sl_cuda_bias_backward(const sl_exec *ex, int rows, int cols, const float *dy,
                                      float *dbias)
{
    SL_CUDA_LAUNCH(ex, bias_bwd_k, (size_t)cols, rows, cols, dy, dbias);
}
