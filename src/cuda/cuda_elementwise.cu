/*
 * cuda_elementwise.cu — the elementwise kernels of the CUDA backend (run
 * stage): ReLU, dropout and uniforms (Philox4x32-10 keyed exactly as on
 * the CPU, so both draw the same mask), adds and copies, concatenation
 * slices and Linear's bias. The element rules are base/element.h's, the
 * ones cpu_elementwise.c calls; here only launch geometry. Every backward
 * is written as a gather (each output element summed by one thread in a
 * fixed order, or by cuda_block.h's fixed trees: the bias gradient's
 * column parts, or its column tiles where the device has no clusters),
 * never as an atomic scatter, so results are deterministic.
 */
#include <string.h>

#include "base/element.h"
#include "cuda/cuda_block.h"
#include "cuda/cuda_common.h"

/* ---- elementwise ---- */

/* The maps' ops (cuda_common.h's sl_cuda_map). */
struct relu_rule {
    static __device__ float of(float x) { return sl_relu_of(x); }
    static __device__ float grad(float y, float dy) { return sl_relu_grad_of(y, dy); }
};

/* T: the activations' type (cuda_common.h; SL_BF16_ADD) */
template <typename T>
struct add4 {
    const T *a, *b;
    T *y;
    __device__ void one(size_t i) const { sl_st(y, i, sl_ld(a, i) + sl_ld(b, i)); }
    __device__ void group(size_t g) const
    {
        float4 u = sl_ld4(a, g), v = sl_ld4(b, g);
        sl_st4(y, g, make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w));
    }
};

/* d (+)= s, element by element; S and D the two stored types (a cast
 * where they differ: widened as read, rounded as written) */
template <typename S, typename D = S>
struct copy4 {
    const S *s;
    D *d;
    int accumulate;
    __device__ void one(size_t i) const { sl_put_t(d, i, sl_ld(s, i), accumulate); }
    __device__ void group(size_t g) const { sl_put4_t(d, g, sl_ld4(s, g), accumulate); }
};

extern "C" void sl_cuda_relu_forward(const sl_exec *ex, size_t count, const float *x, float *y)
{
    sl_cuda_unary<relu_rule>(ex, count, x, y);
}

extern "C" void sl_cuda_relu_backward(const sl_exec *ex, size_t count, const float *y,
                                      const float *dy, float *dx, int accumulate)
{
    sl_cuda_grad<relu_rule>(ex, count, y, dy, dx, accumulate);
}

/* One thread per Philox block of four elements, as the CPU's loop. */
static __global__ void dropout_mask_k(size_t blocks, size_t n, const float *src, float *dst,
                                      uint64_t counter, const uint64_t *delta, sl_dropout_mask m,
                                      int accumulate)
{
    const uint64_t c = sl_cuda_counter(counter, delta);
    GRID_STRIDE(b, blocks) sl_dropout_block(&m, c, b, n, src, dst, accumulate);
}

static void apply_mask(const sl_exec *ex, size_t count, const float *src, float *dst, float p,
                       uint64_t seed, uint64_t counter, int accumulate)
{
    size_t blocks = (count + 3) / 4;
    SL_CUDA_LAUNCH(ex, dropout_mask_k, blocks, blocks, count, src, dst, counter,
                   ex->counter_delta, sl_dropout_mask_of(p, seed), accumulate);
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

/* One thread per Philox block b0 + k, as the CPU's loop. */
static __global__ void uniform_k(size_t blocks, uint64_t b0, size_t n, uint64_t counter,
                                 const uint64_t *delta, uint64_t first, sl_dropout_mask m,
                                 float *dst)
{
    const uint64_t c = sl_cuda_counter(counter, delta);
    GRID_STRIDE(k, blocks) sl_uniform_block(&m, c, b0 + k, first, n, dst);
}

extern "C" void sl_cuda_random_uniform(const sl_exec *ex, size_t count, uint64_t seed,
                                       uint64_t counter, uint64_t first, float *dst)
{
    if (count == 0)
        return;
    uint64_t b0 = first / 4, b1 = (first + count - 1) / 4;
    size_t blocks = (size_t)(b1 - b0 + 1);
    SL_CUDA_LAUNCH(ex, uniform_k, blocks, blocks, b0, count, counter, ex->counter_delta, first,
                   sl_dropout_mask_of(0.0f, seed), dst);
}

static __global__ void fill_k(size_t n, float v, float *d)
{
    GRID_STRIDE(i, n) d[i] = v;
}

extern "C" void sl_cuda_add(const sl_exec *ex, size_t count, const float *a, const float *b,
                            float *y)
{
    sl_cuda_map_typed(ex, count, a, b, y, [&](auto z) {
        using T = decltype(z);
        return add4<T>{sl_as<T>(a), sl_as<T>(b), sl_as<T>(y)};
    });
}

extern "C" void sl_cuda_copy(const sl_exec *ex, size_t count, const float *src, float *dst,
                             int accumulate)
{
    if (src == dst && !accumulate)
        return;
    sl_cuda_map_typed(ex, count, src, dst, dst, [&](auto z) {
        using T = decltype(z);
        return copy4<T>{sl_as<T>(src), sl_as<T>(dst), accumulate};
    });
}

/* Zeros (+0.0f, all bits clear) through cudaMemsetAsync, which
 * a step asks for once per parameter gradient (148 times in GPT-2 small:
 * 4 us a launch of fill_k, ncu 2026-11-27); other values through fill_k. */
extern "C" void sl_cuda_fill(const sl_exec *ex, size_t count, float value, float *dst)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    if (bits == 0u) {
        sl_cuda_state *s = sl_cuda_ex(ex);
        if (count)
            SL_CUDA_CHECK(s, cudaMemsetAsync(dst, 0, count * sizeof(float), s->stream));
        return;
    }
    SL_CUDA_LAUNCH(ex, fill_k, count, count, value, dst);
}

static __global__ void copy_channels_k(size_t total, int hw, int c_count, const float *src,
                                       int src_c, int src_off, float *dst, int dst_c,
                                       int dst_off, int accumulate)
{
    GRID_STRIDE(i, total)
    {
        size_t j = i % hw, ch = (i / hw) % c_count, img = i / ((size_t)hw * c_count);
        float v = src[sl_channel_plane(img, src_c, src_off, ch, hw) + j];
        sl_put(&dst[sl_channel_plane(img, dst_c, dst_off, ch, hw) + j], v, accumulate);
    }
}

extern "C" void sl_cuda_copy_channels(const sl_exec *ex, int n, int hw, int c_count,
                                      const float *src, int src_c, int src_off, float *dst,
                                      int dst_c, int dst_off, int accumulate)
{
    size_t total = (size_t)n * c_count * hw;
    SL_CUDA_LAUNCH(ex, copy_channels_k, total, total, hw, c_count, src, src_c, src_off, dst,
                   dst_c, dst_off, accumulate);
}

/* ---- casts between stored types ---- */

/* Through the maps: a group's float4 (or four bf16 in a uint2) where both
 * pointers allow it, else an element a thread; sl_ld widens and sl_st
 * rounds to nearest even either way, so the bits are element.h's. */
template <typename S, typename D>
static void cast_map(const sl_exec *ex, size_t count, const void *src, void *dst)
{
    bool aligned = (uintptr_t)src % (4 * sizeof(S)) == 0 && (uintptr_t)dst % (4 * sizeof(D)) == 0;
    sl_cuda_map(ex, count, aligned, copy4<S, D>{(const S *)src, (D *)dst, 0});
}

extern "C" void sl_cuda_cast(const sl_exec *ex, size_t count, const void *src, sl_dtype src_type,
                             void *dst, sl_dtype dst_type)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    if (count == 0)
        return;
    if (src_type == dst_type) {
        size_t bytes = count * (src_type == SL_DTYPE_BF16 ? sizeof(uint16_t) : sizeof(float));
        SL_CUDA_CHECK(s, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s->stream));
    } else if (dst_type == SL_DTYPE_BF16) {
        cast_map<float, uint16_t>(ex, count, src, dst);
    } else {
        cast_map<uint16_t, float>(ex, count, src, dst);
    }
}

static __global__ void bias_add_k(size_t total, int cols, const float *bias, float *y)
{
    GRID_STRIDE(i, total) y[i] += bias[i % cols];
}

/* Column tiles (cuda_block.h): 8 adjacent columns a block, each
 * column's rows in 128 interleaved runs summed in double, then a fixed
 * tree. T: float, or uint16_t for bf16 rows (SL_BF16_GEMM: each value
 * widened by cuda_common.h's sl_ld, the same sums) */
template <typename T>
static __global__ void __launch_bounds__(SL_CUDA_COLS *SL_CUDA_RUNS)
    bias_bwd_k(int rows, int cols, const T *dy, float *dbias)
{
    __shared__ double sh[SL_CUDA_RUNS][SL_CUDA_COLS + 1];
    int j = (int)(blockIdx.x * SL_CUDA_COLS + threadIdx.x);
    double acc = 0.0;
    if (j < cols)
#pragma unroll 16 /* see cuda_block.h, column tiles */
        for (int r = (int)threadIdx.y; r < rows; r += SL_CUDA_RUNS)
            acc += sl_ld(dy, (size_t)r * cols + j);
    acc = sl_cuda_column_tree(acc, sh);
    if (threadIdx.y == 0 && j < cols)
        dbias[j] += (float)acc;
}

/* Column parts (base/col_grid.h, cuda_block.h): 32 adjacent columns a
 * block, a part of the rows in 32 interleaved runs summed in double, a
 * fixed tree over the runs, then the parts in order across the cluster.
 * The traversal the backend takes where it has clusters (col_parts): a
 * warp reads 32 adjacent values of a row, and GPT-2's 768 columns make
 * 24 x 8 blocks instead of 96 column tiles. */
template <typename T>
static __global__ void __launch_bounds__(SL_COL_GRID_COLS *SL_COL_GRID_RUNS)
    bias_bwd_parts_k(int rows, int cols, int part_rows, const T *dy, float *dbias)
{
    __shared__ double sh[SL_COL_GRID_RUNS][SL_COL_GRID_COLS + 1];
    __shared__ double part[1][SL_COL_GRID_COLS];
    int j = (int)(blockIdx.x * SL_COL_GRID_COLS + threadIdx.x);
    int lo, hi;
    sl_col_part_rows(rows, part_rows, (int)blockIdx.y, &lo, &hi);
    double acc[1] = {0.0};
    float v[8];
    if (j < cols)
        sl_cuda_column_rows<8>(
            lo, hi, [&](int r, int u) { v[u] = sl_ld(dy, (size_t)r * cols + j); },
            [&](int u) { acc[0] += v[u]; });
    sl_cuda_column_parts(acc, sh, part);
    if (blockIdx.y == 0 && threadIdx.y == 0 && j < cols)
        dbias[j] += (float)acc[0];
}

extern "C" const char *sl_cuda_column_parts_ok(int device)
{
    int cluster = 0;
    cudaFuncAttributes fa;
    if (cudaDeviceGetAttribute(&cluster, cudaDevAttrClusterLaunch, device) != cudaSuccess ||
        cudaFuncGetAttributes(&fa, bias_bwd_parts_k<float>) != cudaSuccess) {
        (void)cudaGetLastError();
        return "the device's cluster support could not be read";
    }
    if (!cluster)
        return "the device launches no thread-block clusters";
    if (fa.ptxVersion < 90)
        return "the kernels were built for PTX below sm_90";
    /* the largest cluster these kernels launch must fit (a partitioned
     * device may hold fewer blocks) */
    sl_col_grid g = {1, SL_COL_GRID_MAX_PARTS, SL_COL_GRID_RUNS};
    cudaLaunchAttribute at;
    cudaLaunchConfig_t cfg = sl_cuda_column_parts_config(g, 0, &at);
    int fit = 0;
    if (cudaOccupancyMaxActiveClusters(&fit, bias_bwd_parts_k<float>, &cfg) != cudaSuccess) {
        (void)cudaGetLastError();
        return "the occupancy of a cluster of column parts could not be read";
    }
    return fit >= 1 ? NULL : "no cluster of column parts fits the device";
}

/* Rows of a multiple of 4 columns, 16-byte aligned: a block's threads
 * walk a row's 4-column groups (no division per element), blocks stride
 * over the rows. The same adds as bias_add_k. */
static __global__ void bias_add4_k(int rows, int groups, const float4 *bias, float4 *y)
{
    for (size_t r = blockIdx.x; r < (size_t)rows; r += gridDim.x)
        for (int g = (int)threadIdx.x; g < groups; g += (int)blockDim.x) {
            float4 b = bias[g], v = y[r * groups + g];
            y[r * groups + g] = make_float4(v.x + b.x, v.y + b.y, v.z + b.z, v.w + b.w);
        }
}

extern "C" void sl_cuda_bias_add(const sl_exec *ex, int rows, int cols, const float *bias,
                                 float *y)
{
    size_t total = (size_t)rows * cols;
    if (rows > 0 && cols % 4 == 0 && sl_cuda_aligned16(bias, y, y)) {
        sl_cuda_state *s = sl_cuda_ex(ex);
        int groups = cols / 4;
        unsigned threads = groups >= 256 ? 256u : (unsigned)((groups + 31) / 32 * 32);
        unsigned blocks = (unsigned)(rows < 65535 * 4 ? rows : 65535 * 4);
        bias_add4_k<<<blocks, threads, 0, s->stream>>>(rows, groups, SL_CF4(bias), SL_F4(y));
        SL_CUDA_LAUNCHED(s);
        return;
    }
    SL_CUDA_LAUNCH(ex, bias_add_k, total, total, cols, bias, y);
}

extern "C" void sl_cuda_bias_backward(const sl_exec *ex, int rows, int cols, const float *dy,
                                      float *dbias)
{
    if (rows <= 0 || cols <= 0)
        return;
    sl_cuda_state *s = sl_cuda_ex(ex);
    if (s->col_parts) {
        sl_cuda_typed(ex, [&](auto z) {
            using T = decltype(z);
            sl_cuda_launch_column_parts(s, rows, cols, bias_bwd_parts_k<T>, sl_as<T>(dy), dbias);
        });
        return;
    }
    sl_cuda_typed(ex, [&](auto z) {
        using T = decltype(z);
        bias_bwd_k<<<sl_cuda_tiles(cols), dim3(SL_CUDA_COLS, SL_CUDA_RUNS), 0, s->stream>>>(
            rows, cols, sl_as<T>(dy), dbias);
    });
    SL_CUDA_LAUNCHED(s);
}
