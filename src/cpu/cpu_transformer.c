/*
 * cpu_transformer.c — the kernels of GPT-2's own layers on the CPU (run
 * stage): LayerNorm, the tanh GELU and the token + position embedding. The
 * arithmetic is base/element.h's, shared with cuda_transformer.cu; here
 * only loop order and threading.
 *
 * Determinism: a row's statistics and gradient are one thread's; column
 * reductions (LayerNorm's weight and bias gradients, the embedding's
 * tables) go over blocks of columns, one block per thread, rows in order
 * inside, so the bits do not depend on the team size.
 */
#include "base/base.h"
#include "base/element.h"
#include "cpu/cpu.h"

/* Columns one thread reduces in a column pass. */
#define COLUMN_BLOCK 64

static int column_blocks(int c) { return (c + COLUMN_BLOCK - 1) / COLUMN_BLOCK; }

static int block_width(int c, int j0) { return c - j0 < COLUMN_BLOCK ? c - j0 : COLUMN_BLOCK; }

void sl_cpu_layernorm_forward(const sl_exec *ex, int rows, int c, const float *x,
                              const float *weight, const float *bias, float eps, float *y,
                              float *mean, float *rstd)
{
    int par = (long long)rows * c >= CPU_PAR_MIN;
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int r = 0; r < rows; r++), {
        const float *xr = x + (size_t)r * c;
        float m, s;
        sl_ln_row_stats(xr, c, eps, &m, &s);
        if (mean) {
            mean[r] = m;
            rstd[r] = s;
        }
        sl_ln_row_forward(xr, c, weight, bias, m, s, y + (size_t)r * c);
    });
}

void sl_cpu_layernorm_backward(const sl_exec *ex, int rows, int c, const float *x,
                               const float *dy, const float *weight, const float *mean,
                               const float *rstd, float *dx, int accumulate, float *dweight,
                               float *dbias)
{
    int par = (long long)rows * c >= CPU_PAR_MIN, blocks = column_blocks(c);
    /* the parameter sums read dy before any dx row is written */
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int b = 0; b < blocks; b++), {
        int j0 = b * COLUMN_BLOCK, nj = block_width(c, j0);
        double aw[COLUMN_BLOCK] = {0}, ab[COLUMN_BLOCK] = {0};
        sl_ln_param_sums(x, dy, rows, c, mean, rstd, j0, nj, aw, ab);
        for (int j = 0; j < nj; j++) {
            dweight[j0 + j] += (float)aw[j];
            dbias[j0 + j] += (float)ab[j];
        }
    });
    if (!dx)
        return;
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int r = 0; r < rows; r++), {
        size_t off = (size_t)r * c;
        sl_ln_row_backward(x + off, dy + off, c, weight, mean[r], rstd[r], dx + off, accumulate);
    });
}

void sl_cpu_gelu_forward(const sl_exec *ex, size_t count, const float *x, float *y)
{
    SL_PARALLEL_FOR(cpu_threads(ex), count >= CPU_PAR_MIN / 8, (size_t i = 0; i < count; i++),
                    { y[i] = sl_gelu_of(x[i]); });
}

void sl_cpu_gelu_backward(const sl_exec *ex, size_t count, const float *x, const float *dy,
                          float *dx, int accumulate)
{
    SL_PARALLEL_FOR(cpu_threads(ex), count >= CPU_PAR_MIN / 8, (size_t i = 0; i < count; i++),
                    { sl_put(&dx[i], sl_gelu_grad_of(x[i], dy[i]), accumulate); });
}

void sl_cpu_embedding_forward(const sl_exec *ex, int n, int t, int c, int vocab,
                              const int32_t *ids, const float *wte, const float *wpe, float *y)
{
    long long tokens = (long long)n * t;
    int par = tokens * c >= CPU_PAR_MIN;
    SL_PARALLEL_FOR(cpu_threads(ex), par, (long long k = 0; k < tokens; k++), {
        const float *te = sl_embedding_row(wte, ids[k], vocab, c);
        const float *pe = wpe + (size_t)(k % t) * c;
        float *yr = y + (size_t)k * c;
        for (int j = 0; j < c; j++)
            yr[j] = sl_embedding_of(te, pe, j);
    });
}

void sl_cpu_embedding_backward(const sl_exec *ex, int n, int t, int c, int vocab,
                               const int32_t *ids, const float *dy, float *dwte, float *dwpe,
                               void *ws)
{
    (void)ws; /* none: embedding_workspace_bytes is NULL here */
    int par = (long long)n * t * c >= CPU_PAR_MIN, blocks = column_blocks(c);
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int b = 0; b < blocks; b++), {
        int j0 = b * COLUMN_BLOCK;
        sl_embedding_grad_columns(ids, dy, n, t, c, vocab, j0, block_width(c, j0), dwte, dwpe);
    });
}
