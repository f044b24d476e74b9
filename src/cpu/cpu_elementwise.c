/*
 * cpu_elementwise.c — the elementwise kernels of the CPU backend (run
 * stage): dropout, ReLU, add, copy, fill, channel slices for
 * concatenation, and Linear's bias. Dropout's mask is a pure
 * function of (seed, counter): element i uses Philox4x32-10 block
 * counter + i / 4, word i % 4, and is kept iff that word >= p * 2^32. The
 * backward regenerates the same mask, so nothing is stored, and a
 * re-forward of a checkpointed segment draws the same mask as the CUDA
 * backend does.
 */
#include <string.h>

#include "base/base.h"
#include "base/element.h"
#include "cpu/cpu.h"

/* The mask of (seed, counter) over count elements, four (one Philox
 * block) per iteration. */
static void apply_mask(const sl_exec *ex, size_t count, const float *src, float *dst, float p,
                       uint64_t seed, uint64_t counter, int accumulate)
{
    sl_dropout_mask m = sl_dropout_mask_of(p, seed);
    long long blocks = (long long)((count + 3) / 4);
    SL_PARALLEL_FOR(cpu_threads(ex), count >= CPU_PAR_MIN / 4, (long long b = 0; b < blocks; b++), {
        sl_dropout_block(&m, counter, (uint64_t)b, count, src, dst, accumulate);
    });
}

void sl_cpu_dropout_forward(const sl_exec *ex, size_t count, const float *x, float *y, float p,
                            uint64_t seed, uint64_t counter)
{
    apply_mask(ex, count, x, y, p, seed, counter, 0);
}

void sl_cpu_dropout_backward(const sl_exec *ex, size_t count, const float *dy, float *dx, float p,
                             uint64_t seed, uint64_t counter, int accumulate)
{
    apply_mask(ex, count, dy, dx, p, seed, counter, accumulate);
}

/* Uniforms for custom layers from dropout's words: element e = first + j
 * is word e % 4 of block counter + e / 4, scaled from its top 24 bits. */
void sl_cpu_random_uniform(const sl_exec *ex, size_t count, uint64_t seed, uint64_t counter,
                           uint64_t first, float *dst)
{
    if (count == 0)
        return;
    sl_dropout_mask m = sl_dropout_mask_of(0.0f, seed);
    uint64_t b0 = first / 4, b1 = (first + count - 1) / 4;
    long long blocks = (long long)(b1 - b0 + 1);
    SL_PARALLEL_FOR(cpu_threads(ex), count >= CPU_PAR_MIN / 4, (long long k = 0; k < blocks; k++), {
        sl_uniform_block(&m, counter, b0 + (uint64_t)k, first, count, dst);
    });
}

/* ---- elementwise ---- */

/* bf16 activations (ex->bf16): widened as read, rounded as written. */
#define BF(p) ((uint16_t *)(p))
#define CBF(p) ((const uint16_t *)(p))

void sl_cpu_relu_forward(const sl_exec *ex, size_t count, const float *x, float *y)
{
    long long cnt = (long long)count;
    if (ex->bf16) {
        SL_PARALLEL_FOR(cpu_threads(ex), cnt >= CPU_PAR_MIN, (long long i = 0; i < cnt; i++), {
            BF(y)[i] = sl_bf16_round(sl_relu_of(sl_bf16_widen(CBF(x)[i])));
        });
        return;
    }
    SL_PARALLEL_FOR(cpu_threads(ex), cnt >= CPU_PAR_MIN, (long long i = 0; i < cnt; i++), {
        y[i] = sl_relu_of(x[i]);
    });
}

void sl_cpu_relu_backward(const sl_exec *ex, size_t count, const float *y, const float *dy,
                              float *dx, int accumulate)
{
    long long cnt = (long long)count;
    if (ex->bf16) {
        SL_PARALLEL_FOR(cpu_threads(ex), cnt >= CPU_PAR_MIN, (long long i = 0; i < cnt; i++), {
            float g = sl_relu_grad_of(sl_bf16_widen(CBF(y)[i]), sl_bf16_widen(CBF(dy)[i]));
            BF(dx)[i] = sl_bf16_round(accumulate ? sl_bf16_widen(BF(dx)[i]) + g : g);
        });
    } else if (accumulate) {
        SL_PARALLEL_FOR(cpu_threads(ex), cnt >= CPU_PAR_MIN, (long long i = 0; i < cnt; i++), {
            dx[i] += sl_relu_grad_of(y[i], dy[i]);
        });
    } else {
        SL_PARALLEL_FOR(cpu_threads(ex), cnt >= CPU_PAR_MIN, (long long i = 0; i < cnt; i++), {
            dx[i] = sl_relu_grad_of(y[i], dy[i]);
        });
    }
}

void sl_cpu_add(const sl_exec *ex, size_t count, const float *a, const float *b, float *y)
{
    long long cnt = (long long)count;
    if (ex->bf16) {
        SL_PARALLEL_FOR(cpu_threads(ex), cnt >= CPU_PAR_MIN, (long long i = 0; i < cnt; i++), {
            BF(y)[i] = sl_bf16_round(sl_bf16_widen(CBF(a)[i]) + sl_bf16_widen(CBF(b)[i]));
        });
        return;
    }
    SL_PARALLEL_FOR(cpu_threads(ex), cnt >= CPU_PAR_MIN, (long long i = 0; i < cnt; i++), {
        y[i] = a[i] + b[i];
    });
}

void sl_cpu_copy(const sl_exec *ex, size_t count, const float *src, float *dst,
                     int accumulate)
{
    long long cnt = (long long)count;
    if (ex->bf16 && accumulate) {
        SL_PARALLEL_FOR(cpu_threads(ex), cnt >= CPU_PAR_MIN, (long long i = 0; i < cnt; i++), {
            BF(dst)[i] = sl_bf16_round(sl_bf16_widen(BF(dst)[i]) + sl_bf16_widen(CBF(src)[i]));
        });
    } else if (accumulate) {
        SL_PARALLEL_FOR(cpu_threads(ex), cnt >= CPU_PAR_MIN, (long long i = 0; i < cnt; i++), {
            dst[i] += src[i];
        });
    } else if (src != dst) {
        memmove(dst, src, count * (ex->bf16 ? sizeof(uint16_t) : sizeof(float)));
    }
}

void sl_cpu_fill(const sl_exec *ex, size_t count, float value, float *dst)
{
    long long cnt = (long long)count;
    SL_PARALLEL_FOR(cpu_threads(ex), cnt >= CPU_PAR_MIN, (long long i = 0; i < cnt; i++), {
        dst[i] = value;
    });
}

void sl_cpu_cast(const sl_exec *ex, size_t count, const void *src, sl_dtype src_type, void *dst,
                 sl_dtype dst_type)
{
    long long cnt = (long long)count;
    int par = cnt >= CPU_PAR_MIN;
    if (src_type == dst_type) {
        memcpy(dst, src, count * (src_type == SL_DTYPE_BF16 ? sizeof(uint16_t) : sizeof(float)));
    } else if (dst_type == SL_DTYPE_BF16) {
        const float *s = src;
        uint16_t *d = dst;
        SL_PARALLEL_FOR(cpu_threads(ex), par, (long long i = 0; i < cnt; i++),
                        { d[i] = sl_bf16_round(s[i]); });
    } else {
        const uint16_t *s = src;
        float *d = dst;
        SL_PARALLEL_FOR(cpu_threads(ex), par, (long long i = 0; i < cnt; i++),
                        { d[i] = sl_bf16_widen(s[i]); });
    }
}

/* One (image, channel) plane per iteration: planes are disjoint. */
void sl_cpu_copy_channels(const sl_exec *ex, int n, int hw, int c_count, const float *src,
                              int src_c, int src_off, float *dst, int dst_c, int dst_off,
                              int accumulate)
{
    int planes = n * c_count;
    int par = (long long)planes * hw >= CPU_PAR_MIN;
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int p = 0; p < planes; p++), {
        int i = p / c_count, ch = p % c_count;
        const float *s = src + sl_channel_plane((size_t)i, src_c, src_off, (size_t)ch, hw);
        float *t = dst + sl_channel_plane((size_t)i, dst_c, dst_off, (size_t)ch, hw);
        if (accumulate) {
            for (int j = 0; j < hw; j++)
                t[j] += s[j];
        } else if (s != t) {
            memmove(t, s, (size_t)hw * sizeof(float));
        }
    });
}

/* ---- bias of a rows x cols row-major matrix (Linear) ---- */

void sl_cpu_bias_add(const sl_exec *ex, int rows, int cols, const float *bias, float *y)
{
    int par = (long long)rows * cols >= CPU_PAR_MIN;
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int r = 0; r < rows; r++), {
        float *yr = y + (size_t)r * cols;
        for (int j = 0; j < cols; j++)
            yr[j] += bias[j];
    });
}

#define BIAS_BLOCK 64

/* Column sums over blocks of columns: each column is summed by one thread,
 * rows in order, in double. */
void sl_cpu_bias_backward(const sl_exec *ex, int rows, int cols, const float *dy,
                              float *dbias)
{
    int blocks = (cols + BIAS_BLOCK - 1) / BIAS_BLOCK;
    int par = (long long)rows * cols >= CPU_PAR_MIN;
    const uint16_t *dy16 = ex->bf16 ? (const uint16_t *)(const void *)dy : NULL;
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int b = 0; b < blocks; b++), {
        int j0 = b * BIAS_BLOCK;
        int nj = cols - j0 < BIAS_BLOCK ? cols - j0 : BIAS_BLOCK;
        double acc[BIAS_BLOCK] = {0};
        if (dy16) /* bf16 dy (SL_BF16_GEMM): each value widened, the same sums */
            for (int r = 0; r < rows; r++)
                for (int j = 0; j < nj; j++)
                    acc[j] += (double)sl_bf16_widen(dy16[(size_t)r * cols + j0 + j]);
        else
            sl_column_sums(dy, rows, cols, j0, nj, acc);
        for (int j = 0; j < nj; j++)
            dbias[j0 + j] += (float)acc[j];
    });
}
