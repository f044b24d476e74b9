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

/* ---- bf16 rows (SL_BF16_LAYERNORM, SL_BF16_GELU): each value widened as
 * it is read and rounded as it is written, around the float arithmetic,
 * so the results are the float kernels' on float copies, bit for bit ---- */

static void widen_row(const uint16_t *s, int c, float *d)
{
    for (int j = 0; j < c; j++)
        d[j] = sl_bf16_widen(s[j]);
}

static void round_row(const float *s, int c, uint16_t *d)
{
    for (int j = 0; j < c; j++)
        d[j] = sl_bf16_round(s[j]);
}

static void layernorm_forward_bf16(const sl_exec *ex, int rows, int c, const uint16_t *x,
                                   const float *weight, const float *bias, float eps, uint16_t *y,
                                   float *mean, float *rstd)
{
    int par = (long long)rows * c >= CPU_PAR_MIN;
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int r = 0; r < rows; r++), {
        float xb[SL_BF16_ROW_MAX], yb[SL_BF16_ROW_MAX];
        widen_row(x + (size_t)r * c, c, xb);
        float m, s;
        sl_ln_row_stats(xb, c, eps, &m, &s);
        if (mean) {
            mean[r] = m;
            rstd[r] = s;
        }
        sl_ln_row_forward(xb, c, weight, bias, m, s, yb);
        round_row(yb, c, y + (size_t)r * c);
    });
}

void sl_cpu_layernorm_forward(const sl_exec *ex, int rows, int c, const float *x,
                              const float *weight, const float *bias, float eps, float *y,
                              float *mean, float *rstd)
{
    if (ex->bf16 && c <= SL_BF16_ROW_MAX) {
        layernorm_forward_bf16(ex, rows, c, (const uint16_t *)(const void *)x, weight, bias, eps,
                               (uint16_t *)(void *)y, mean, rstd);
        return;
    }
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
    /* bf16 rows (ex->bf16, rows of at most SL_BF16_ROW_MAX): x, dy and dx */
    int b16 = ex->bf16 && c <= SL_BF16_ROW_MAX;
    const uint16_t *x16 = (const uint16_t *)(const void *)x;
    const uint16_t *dy16 = (const uint16_t *)(const void *)dy;
    int par = (long long)rows * c >= CPU_PAR_MIN, blocks = column_blocks(c);
    /* the parameter sums read dy before any dx row is written */
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int b = 0; b < blocks; b++), {
        int j0 = b * COLUMN_BLOCK, nj = block_width(c, j0);
        double aw[COLUMN_BLOCK] = {0}, ab[COLUMN_BLOCK] = {0};
        if (b16) /* sl_ln_param_sums' order on the widened values */
            for (int r = 0; r < rows; r++) {
                const uint16_t *xr = x16 + (size_t)r * c + j0, *dr = dy16 + (size_t)r * c + j0;
                for (int j = 0; j < nj; j++)
                    sl_ln_param_terms(sl_bf16_widen(xr[j]), sl_bf16_widen(dr[j]), mean[r],
                                      rstd[r], &aw[j], &ab[j]);
            }
        else
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
        if (b16) { /* the rows widened first: dx may be dy */
            uint16_t *dx16 = (uint16_t *)(void *)dx;
            float xb[SL_BF16_ROW_MAX], gb[SL_BF16_ROW_MAX], db[SL_BF16_ROW_MAX];
            widen_row(x16 + off, c, xb);
            widen_row(dy16 + off, c, gb);
            if (accumulate)
                widen_row(dx16 + off, c, db);
            sl_ln_row_backward(xb, gb, c, weight, mean[r], rstd[r], db, accumulate);
            round_row(db, c, dx16 + off);
        } else
            sl_ln_row_backward(x + off, dy + off, c, weight, mean[r], rstd[r], dx + off,
                               accumulate);
    });
}

void sl_cpu_gelu_forward(const sl_exec *ex, size_t count, const float *x, float *y)
{
    if (ex->bf16) {
        const uint16_t *x16 = (const uint16_t *)(const void *)x;
        uint16_t *y16 = (uint16_t *)(void *)y;
        SL_PARALLEL_FOR(cpu_threads(ex), count >= CPU_PAR_MIN / 8,
                        (size_t i = 0; i < count; i++),
                        { y16[i] = sl_bf16_round(sl_gelu_of(sl_bf16_widen(x16[i]))); });
        return;
    }
    SL_PARALLEL_FOR(cpu_threads(ex), count >= CPU_PAR_MIN / 8, (size_t i = 0; i < count; i++),
                    { y[i] = sl_gelu_of(x[i]); });
}

void sl_cpu_gelu_backward(const sl_exec *ex, size_t count, const float *x, const float *dy,
                          float *dx, int accumulate)
{
    if (ex->bf16) { /* dx may be dy: each element read before it is written */
        const uint16_t *x16 = (const uint16_t *)(const void *)x;
        const uint16_t *d16 = (const uint16_t *)(const void *)dy;
        uint16_t *o16 = (uint16_t *)(void *)dx;
        SL_PARALLEL_FOR(cpu_threads(ex), count >= CPU_PAR_MIN / 8,
                        (size_t i = 0; i < count; i++), {
                            float g = sl_gelu_grad_of(sl_bf16_widen(x16[i]),
                                                      sl_bf16_widen(d16[i]));
                            float v = accumulate ? sl_bf16_widen(o16[i]) : 0.0f;
                            sl_put(&v, g, accumulate);
                            o16[i] = sl_bf16_round(v);
                        });
        return;
    }
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
