/*
 * cuda_transformer.cu — the kernels of GPT-2's own layers on the GPU (run
 * stage): LayerNorm, the tanh GELU and the token + position embedding.
 * The arithmetic is base/element.h's, the functions cpu_transformer.c
 * calls; here only launch geometry. Rows are one thread each, column
 * reductions one thread per column with rows in order (the CPU's order,
 * no atomics), so results are deterministic.
 */
#include "base/element.h"
#include "cuda/cuda_common.h"

/* ---- LayerNorm ---- */

static __global__ void ln_fwd_k(int rows, int c, const float *x, const float *weight,
                                const float *bias, float eps, float *y, float *mean, float *rstd)
{
    GRID_STRIDE(r, (size_t)rows)
    {
        const float *xr = x + r * c;
        float m, s;
        sl_ln_row_stats(xr, c, eps, &m, &s);
        if (mean) {
            mean[r] = m;
            rstd[r] = s;
        }
        sl_ln_row_forward(xr, c, weight, bias, m, s, y + r * c);
    }
}

static __global__ void ln_param_k(int rows, int c, const float *x, const float *dy,
                                  const float *mean, const float *rstd, float *dweight,
                                  float *dbias)
{
    GRID_STRIDE(j, (size_t)c)
    {
        double aw = 0.0, ab = 0.0;
        sl_ln_param_sums(x, dy, rows, c, mean, rstd, (int)j, 1, &aw, &ab);
        dweight[j] += (float)aw;
        dbias[j] += (float)ab;
    }
}

static __global__ void ln_dx_k(int rows, int c, const float *x, const float *dy,
                               const float *weight, const float *mean, const float *rstd,
                               float *dx, int accumulate)
{
    GRID_STRIDE(r, (size_t)rows)
    {
        sl_ln_row_backward(x + r * c, dy + r * c, c, weight, mean[r], rstd[r], dx + r * c,
                           accumulate);
    }
}

extern "C" void sl_cuda_layernorm_forward(const sl_exec *ex, int rows, int c, const float *x,
                                          const float *weight, const float *bias, float eps,
                                          float *y, float *mean, float *rstd)
{
    SL_CUDA_LAUNCH(ex, ln_fwd_k, (size_t)rows, rows, c, x, weight, bias, eps, y, mean, rstd);
}

extern "C" void sl_cuda_layernorm_backward(const sl_exec *ex, int rows, int c, const float *x,
                                           const float *dy, const float *weight,
                                           const float *mean, const float *rstd, float *dx,
                                           int accumulate, float *dweight, float *dbias)
{
    /* the parameter sums are queued first: they read dy before dx is written */
    SL_CUDA_LAUNCH(ex, ln_param_k, (size_t)c, rows, c, x, dy, mean, rstd, dweight, dbias);
    if (dx)
        SL_CUDA_LAUNCH(ex, ln_dx_k, (size_t)rows, rows, c, x, dy, weight, mean, rstd, dx,
                       accumulate);
}

/* ---- GELU ---- */

static __global__ void gelu_fwd_k(size_t n, const float *x, float *y)
{
    GRID_STRIDE(i, n) y[i] = sl_gelu_of(x[i]);
}

static __global__ void gelu_bwd_k(size_t n, const float *x, const float *dy, float *dx,
                                  int accumulate)
{
    GRID_STRIDE(i, n) sl_put(&dx[i], sl_gelu_grad_of(x[i], dy[i]), accumulate);
}

extern "C" void sl_cuda_gelu_forward(const sl_exec *ex, size_t count, const float *x, float *y)
{
    SL_CUDA_LAUNCH(ex, gelu_fwd_k, count, count, x, y);
}

extern "C" void sl_cuda_gelu_backward(const sl_exec *ex, size_t count, const float *x,
                                      const float *dy, float *dx, int accumulate)
{
    SL_CUDA_LAUNCH(ex, gelu_bwd_k, count, count, x, dy, dx, accumulate);
}

/* ---- token + position embedding ---- */

static __global__ void emb_fwd_k(size_t total, int t, int c, int vocab, const int32_t *ids,
                                 const float *wte, const float *wpe, float *y)
{
    GRID_STRIDE(i, total)
    {
        size_t k = i / (size_t)c;
        int j = (int)(i - k * c);
        const float *te = sl_embedding_row(wte, ids[k], vocab, c);
        const float *pe = wpe + (k % (size_t)t) * c;
        y[i] = sl_embedding_of(te, pe, j);
    }
}

static __global__ void emb_bwd_k(int n, int t, int c, int vocab, const int32_t *ids,
                                 const float *dy, float *dwte, float *dwpe)
{
    GRID_STRIDE(j, (size_t)c)
    sl_embedding_grad_columns(ids, dy, n, t, c, vocab, (int)j, 1, dwte, dwpe);
}

extern "C" void sl_cuda_embedding_forward(const sl_exec *ex, int n, int t, int c, int vocab,
                                          const int32_t *ids, const float *wte, const float *wpe,
                                          float *y)
{
    size_t total = (size_t)n * t * c;
    SL_CUDA_LAUNCH(ex, emb_fwd_k, total, total, t, c, vocab, ids, wte, wpe, y);
}

extern "C" void sl_cuda_embedding_backward(const sl_exec *ex, int n, int t, int c, int vocab,
                                           const int32_t *ids, const float *dy, float *dwte,
                                           float *dwpe)
{
    SL_CUDA_LAUNCH(ex, emb_bwd_k, (size_t)c, n, t, c, vocab, ids, dy, dwte, dwpe);
}
