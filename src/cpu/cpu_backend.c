/*
 * cpu_backend.c — the CPU backend's sl_backend table and its small
 * elementwise kernels (ReLU, add, copy, fill, channel slices for
 * concatenation, Linear's bias). Part of the "run" stage: the executor calls
 * these through the table at planned offsets.
 */
#include <string.h>

#include "core/core.h"
#include "cpu/cpu.h"

/* ---- elementwise ---- */

static void cpu_relu_forward(const sl_exec *ex, size_t count, const float *x, float *y)
{
    long long cnt = (long long)count;
#pragma omp parallel for num_threads(cpu_threads(ex)) schedule(static) if (cnt >= CPU_PAR_MIN)
    for (long long i = 0; i < cnt; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static void cpu_relu_backward(const sl_exec *ex, size_t count, const float *y, const float *dy,
                              float *dx, int accumulate)
{
    long long cnt = (long long)count;
    if (accumulate) {
#pragma omp parallel for num_threads(cpu_threads(ex)) schedule(static) if (cnt >= CPU_PAR_MIN)
        for (long long i = 0; i < cnt; i++)
            dx[i] += y[i] > 0.0f ? dy[i] : 0.0f;
    } else {
#pragma omp parallel for num_threads(cpu_threads(ex)) schedule(static) if (cnt >= CPU_PAR_MIN)
        for (long long i = 0; i < cnt; i++)
            dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    }
}

static void cpu_add(const sl_exec *ex, size_t count, const float *a, const float *b, float *y)
{
    long long cnt = (long long)count;
#pragma omp parallel for num_threads(cpu_threads(ex)) schedule(static) if (cnt >= CPU_PAR_MIN)
    for (long long i = 0; i < cnt; i++)
        y[i] = a[i] + b[i];
}

static void cpu_copy(const sl_exec *ex, size_t count, const float *src, float *dst,
                     int accumulate)
{
    long long cnt = (long long)count;
    if (accumulate) {
#pragma omp parallel for num_threads(cpu_threads(ex)) schedule(static) if (cnt >= CPU_PAR_MIN)
        for (long long i = 0; i < cnt; i++)
            dst[i] += src[i];
    } else if (src != dst) {
        memmove(dst, src, count * sizeof(float));
    }
}

static void cpu_fill(const sl_exec *ex, size_t count, float value, float *dst)
{
    long long cnt = (long long)count;
#pragma omp parallel for num_threads(cpu_threads(ex)) schedule(static) if (cnt >= CPU_PAR_MIN)
    for (long long i = 0; i < cnt; i++)
        dst[i] = value;
}

/* One (image, channel) plane per iteration: planes are disjoint. */
static void cpu_copy_channels(const sl_exec *ex, int n, int hw, int c_count, const float *src,
                              int src_c, int src_off, float *dst, int dst_c, int dst_off,
                              int accumulate)
{
    int planes = n * c_count;
    int par = (long long)planes * hw >= CPU_PAR_MIN;
#pragma omp parallel for num_threads(cpu_threads(ex)) schedule(static) if (par)
    for (int p = 0; p < planes; p++) {
        int i = p / c_count, ch = p % c_count;
        const float *s = src + ((size_t)i * src_c + src_off + ch) * hw;
        float *t = dst + ((size_t)i * dst_c + dst_off + ch) * hw;
        if (accumulate) {
            for (int j = 0; j < hw; j++)
                t[j] += s[j];
        } else if (s != t) {
            memmove(t, s, (size_t)hw * sizeof(float));
        }
    }
}

/* ---- bias of a rows x cols row-major matrix (Linear) ---- */

static void cpu_bias_add(const sl_exec *ex, int rows, int cols, const float *bias, float *y)
{
    int par = (long long)rows * cols >= CPU_PAR_MIN;
#pragma omp parallel for num_threads(cpu_threads(ex)) schedule(static) if (par)
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * cols;
        for (int j = 0; j < cols; j++)
            yr[j] += bias[j];
    }
}

#define BIAS_BLOCK 64

/* Column sums over blocks of columns: each column is summed by one thread,
 * rows in order, in double. */
static void cpu_bias_backward(const sl_exec *ex, int rows, int cols, const float *dy,
                              float *dbias)
{
    int blocks = (cols + BIAS_BLOCK - 1) / BIAS_BLOCK;
    int par = (long long)rows * cols >= CPU_PAR_MIN;
#pragma omp parallel for num_threads(cpu_threads(ex)) schedule(static) if (par)
    for (int b = 0; b < blocks; b++) {
        int j0 = b * BIAS_BLOCK;
        int nj = cols - j0 < BIAS_BLOCK ? cols - j0 : BIAS_BLOCK;
        double acc[BIAS_BLOCK] = {0};
        for (int r = 0; r < rows; r++) {
            const float *row = dy + (size_t)r * cols + j0;
            for (int j = 0; j < nj; j++)
                acc[j] += row[j];
        }
        for (int j = 0; j < nj; j++)
            dbias[j0 + j] += (float)acc[j];
    }
}

static void *cpu_alloc(size_t bytes, const char *what) { return sl_aligned_zalloc(bytes, what); }

static void cpu_free(void *p) { sl_aligned_free(p); }

static void cpu_memcpy(const sl_exec *ex, void *dst, const void *src, size_t bytes)
{
    (void)ex;
    if (dst != src && bytes)
        memcpy(dst, src, bytes);
}

static sl_status cpu_sync(const sl_exec *ex)
{
    (void)ex;
    return SL_OK;
}

static const sl_backend cpu_backend = {
    .name = "cpu",
    .host_memory = 1,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_memcpy,
    .download = cpu_memcpy,
    .sync = cpu_sync,
    .gemm = cpu_gemm,
    .conv2d_workspace_bytes = cpu_conv2d_workspace_bytes,
    .conv2d_forward = cpu_conv2d_forward,
    .conv2d_backward_data = cpu_conv2d_backward_data,
    .conv2d_backward_filter = cpu_conv2d_backward_filter,
    .batchnorm_forward_train = cpu_batchnorm_forward_train,
    .batchnorm_forward_apply = cpu_batchnorm_forward_apply,
    .batchnorm_forward_infer = cpu_batchnorm_forward_infer,
    .batchnorm_backward = cpu_batchnorm_backward,
    .maxpool_forward = cpu_maxpool_forward,
    .maxpool_backward = cpu_maxpool_backward,
    .avgpool_forward = cpu_avgpool_forward,
    .avgpool_backward = cpu_avgpool_backward,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .dropout_forward = cpu_dropout_forward,
    .dropout_backward = cpu_dropout_backward,
    .add = cpu_add,
    .copy = cpu_copy,
    .fill = cpu_fill,
    .copy_channels = cpu_copy_channels,
    .global_avgpool_forward = cpu_global_avgpool_forward,
    .global_avgpool_backward = cpu_global_avgpool_backward,
    .bias_add = cpu_bias_add,
    .bias_backward = cpu_bias_backward,
    .softmax_xent = cpu_softmax_xent,
    .sgd_update = cpu_sgd_update,
    .adam_update = cpu_adam_update,
};

const sl_backend *sl_cpu_backend(void)
{
    return &cpu_backend;
}
