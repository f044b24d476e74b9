/*
 * cuda_attention.cu — causal multi-head self-attention on the GPU (run
 * stage): simple, correct kernels for both modes of sl_attention_desc,
 * with base/element.h's logit, exponent, log-sum-exp, gradient and
 * dropout rules (the ones cpu_attention.c calls). One block per query row
 * (forward, dQ) or key row (dK, dV); scores are recomputed from q and k
 * wherever they are needed, so nothing of t x t size exists in flash mode
 * (plain mode writes and reads the probabilities it saves). Reductions
 * run over a fixed tree in shared memory, and every output value is
 * summed by one thread in key (or query) order: results are
 * deterministic. The workspace of the backward holds D_i = rowsum(dO o O)
 * of every row (n * heads * t floats); the forward needs none.
 */
#include <math.h>

#include "base/element.h"
#include "cuda/cuda_block.h"
#include "cuda/cuda_common.h"

#define ATTN_THREADS 128

/* One (sequence, head, token) row's pointers. */
struct attn_row {
    const float *q, *k, *v; /* this token's q; the sequence's first k and v rows */
    size_t ldq, out;        /* qkv row length (3c); offset of the row's head output */
    int bh, i;
};

static __device__ attn_row attn_row_of(const sl_attention_desc &d, const float *qkv, size_t row)
{
    attn_row r;
    int i = (int)(row % (size_t)d.t);
    int bh = (int)(row / (size_t)d.t);
    int b = bh / d.heads, h = bh % d.heads;
    size_t c = (size_t)d.heads * d.d;
    r.ldq = 3 * c;
    const float *base = qkv + (size_t)b * d.t * r.ldq + (size_t)h * d.d;
    r.q = base + (size_t)i * r.ldq;
    r.k = base + c;
    r.v = base + 2 * c;
    r.out = ((size_t)b * d.t + i) * c + (size_t)h * d.d;
    r.bh = bh;
    r.i = i;
    return r;
}

static __device__ float factor_of(const sl_dropout_mask &m, const sl_attention_desc &d, int bh,
                                  int i, int j)
{
    float f;
    sl_dropout_factors(&m, d.counter, sl_attn_element(bh, d.t, i, j), 1, &f);
    return f;
}

/* One block per query row: its maximum and sum, then y = sum_j p f v_j
 * over chunks of keys; lse (flash) or the probabilities (plain) into
 * saved when it is not NULL (dropout only then: evaluation has none). */
static __global__ void attn_fwd(sl_attention_desc d, const float *qkv, float *y, float *saved)
{
    __shared__ float fsh[ATTN_THREADS];
    __shared__ double dsh[ATTN_THREADS];
    __shared__ float pf[ATTN_THREADS];
    size_t rows = (size_t)d.n * d.heads * d.t;
    float scale = sl_attn_scale(d.d);
    sl_dropout_mask m = sl_dropout_mask_of(saved ? d.p : 0.0f, d.seed);
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        attn_row r = attn_row_of(d, qkv, row);
        float mx = -INFINITY;
        for (int j = threadIdx.x; j <= r.i; j += ATTN_THREADS)
            mx = fmaxf(mx, sl_attn_logit(sl_attn_dot(r.q, r.k + (size_t)j * r.ldq, d.d), scale));
        mx = sl_cuda_block_max(mx, fsh, ATTN_THREADS);
        double s = 0.0;
        for (int j = threadIdx.x; j <= r.i; j += ATTN_THREADS)
            s += sl_attn_exp(
                sl_attn_logit(sl_attn_dot(r.q, r.k + (size_t)j * r.ldq, d.d), scale), mx);
        s = sl_cuda_block_sum(s, dsh, ATTN_THREADS);
        float sf = (float)s;
        float *yr = y + r.out;
        for (int c0 = 0; c0 < d.d; c0 += ATTN_THREADS) {
            int c = c0 + (int)threadIdx.x;
            float acc = 0.0f;
            for (int j0 = 0; j0 <= r.i; j0 += ATTN_THREADS) {
                int j = j0 + (int)threadIdx.x;
                if (j <= r.i) {
                    float lg = sl_attn_logit(sl_attn_dot(r.q, r.k + (size_t)j * r.ldq, d.d), scale);
                    float p = sl_attn_exp(lg, mx) / sf;
                    if (c0 == 0 && saved && !d.flash)
                        saved[row * d.t + j] = p;
                    pf[threadIdx.x] = p * factor_of(m, d, r.bh, r.i, j);
                }
                __syncthreads();
                int nj = r.i - j0 + 1 < ATTN_THREADS ? r.i - j0 + 1 : ATTN_THREADS;
                if (c < d.d)
                    for (int u = 0; u < nj; u++)
                        acc += pf[u] * r.v[(size_t)(j0 + u) * r.ldq + c];
                __syncthreads();
            }
            if (c < d.d)
                yr[c] = acc;
        }
        if (saved && !d.flash)
            for (int j = r.i + 1 + (int)threadIdx.x; j < d.t; j += ATTN_THREADS)
                saved[row * d.t + j] = 0.0f;
        if (saved && d.flash && threadIdx.x == 0)
            saved[row] = sl_attn_lse(mx, s);
    }
}

/* Probability (i, j): recomputed from the log-sum-exp (flash) or read. */
static __device__ float prob_of(const sl_attention_desc &d, const float *saved, const float *qi,
                                const float *kj, size_t row_i, int j, float scale)
{
    if (d.flash)
        return sl_attn_exp(sl_attn_logit(sl_attn_dot(qi, kj, d.d), scale), saved[row_i]);
    return saved[row_i * d.t + j];
}

/* One block per query row i: D_i into di, then dq_i (+)= scale sum_j dS_ij k_j. */
static __global__ void attn_bwd_q(sl_attention_desc d, const float *qkv, const float *y,
                                  const float *dy, const float *saved, float *dqkv,
                                  int accumulate, float *di)
{
    __shared__ double dsh[ATTN_THREADS];
    __shared__ float ds[ATTN_THREADS];
    size_t rows = (size_t)d.n * d.heads * d.t;
    float scale = sl_attn_scale(d.d);
    sl_dropout_mask m = sl_dropout_mask_of(d.p, d.seed);
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        attn_row r = attn_row_of(d, qkv, row);
        const float *o = y + r.out, *g = dy + r.out;
        double s = 0.0;
        for (int c = threadIdx.x; c < d.d; c += ATTN_THREADS)
            s += (double)(o[c] * g[c]);
        float dii = (float)sl_cuda_block_sum(s, dsh, ATTN_THREADS);
        if (threadIdx.x == 0)
            di[row] = dii;
        float *dq = dqkv + (r.q - qkv);
        for (int c0 = 0; c0 < d.d; c0 += ATTN_THREADS) {
            int c = c0 + (int)threadIdx.x;
            float acc = 0.0f;
            for (int j0 = 0; j0 <= r.i; j0 += ATTN_THREADS) {
                int j = j0 + (int)threadIdx.x;
                if (j <= r.i) {
                    const float *kj = r.k + (size_t)j * r.ldq;
                    float p = prob_of(d, saved, r.q, kj, row, j, scale);
                    float dpf = sl_attn_dot(g, r.v + (size_t)j * r.ldq, d.d);
                    float f = factor_of(m, d, r.bh, r.i, j);
                    ds[threadIdx.x] = sl_attn_grad_logit(p, dpf, f, dii);
                }
                __syncthreads();
                int nj = r.i - j0 + 1 < ATTN_THREADS ? r.i - j0 + 1 : ATTN_THREADS;
                if (c < d.d)
                    for (int u = 0; u < nj; u++)
                        acc += ds[u] * r.k[(size_t)(j0 + u) * r.ldq + c];
                __syncthreads();
            }
            if (c < d.d)
                sl_put(&dq[c], scale * acc, accumulate);
        }
    }
}

/* One block per key row j: dv_j (+)= sum_i p f dO_i, dk_j (+)= scale sum_i dS_ij q_i. */
static __global__ void attn_bwd_kv(sl_attention_desc d, const float *qkv, const float *dy,
                                   const float *saved, float *dqkv, int accumulate,
                                   const float *di)
{
    __shared__ float pf[ATTN_THREADS];
    __shared__ float ds[ATTN_THREADS];
    size_t rows = (size_t)d.n * d.heads * d.t;
    float scale = sl_attn_scale(d.d);
    sl_dropout_mask m = sl_dropout_mask_of(d.p, d.seed);
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        attn_row r = attn_row_of(d, qkv, row); /* r.i is the key's position j */
        int j = r.i;
        size_t first = row - (size_t)j; /* the sequence's row 0 */
        const float *kj = r.k + (size_t)j * r.ldq, *vj = r.v + (size_t)j * r.ldq;
        const float *q0 = r.q - (size_t)j * r.ldq; /* q of token 0 */
        size_t c_all = r.ldq / 3;
        const float *dy0 = dy + r.out - (size_t)j * c_all;
        float *dk = dqkv + (kj - qkv), *dv = dqkv + (vj - qkv);
        for (int c0 = 0; c0 < d.d; c0 += ATTN_THREADS) {
            int c = c0 + (int)threadIdx.x;
            float acc_k = 0.0f, acc_v = 0.0f;
            for (int i0 = j; i0 < d.t; i0 += ATTN_THREADS) {
                int i = i0 + (int)threadIdx.x;
                if (i < d.t) {
                    const float *qi = q0 + (size_t)i * r.ldq, *gi = dy0 + (size_t)i * c_all;
                    float p = prob_of(d, saved, qi, kj, first + i, j, scale);
                    float f = factor_of(m, d, r.bh, i, j);
                    pf[threadIdx.x] = p * f;
                    ds[threadIdx.x] =
                        sl_attn_grad_logit(p, sl_attn_dot(gi, vj, d.d), f, di[first + i]);
                }
                __syncthreads();
                int ni = d.t - i0 < ATTN_THREADS ? d.t - i0 : ATTN_THREADS;
                if (c < d.d)
                    for (int u = 0; u < ni; u++) {
                        acc_v += pf[u] * dy0[(size_t)(i0 + u) * c_all + c];
                        acc_k += ds[u] * q0[(size_t)(i0 + u) * r.ldq + c];
                    }
                __syncthreads();
            }
            if (c < d.d) {
                sl_put(&dv[c], acc_v, accumulate);
                sl_put(&dk[c], scale * acc_k, accumulate);
            }
        }
    }
}

static unsigned row_blocks(const sl_attention_desc *d)
{
    size_t rows = (size_t)d->n * d->heads * d->t;
    return (unsigned)(rows < 0x7fffffffu ? (rows ? rows : 1) : 0x7fffffffu);
}

extern "C" size_t sl_cuda_attention_workspace_bytes(const sl_backend *be,
                                                    const sl_attention_desc *d, int backward)
{
    (void)be;
    return backward ? (size_t)d->n * d->heads * d->t * sizeof(float) : 0;
}

extern "C" void sl_cuda_attention_forward(const sl_exec *ex, const sl_attention_desc *d,
                                          const float *qkv, float *y, float *saved, void *ws)
{
    (void)ws;
    sl_cuda_state *s = sl_cuda_ex(ex);
    if ((size_t)d->n * d->heads * d->t == 0)
        return;
    attn_fwd<<<row_blocks(d), ATTN_THREADS, 0, s->stream>>>(*d, qkv, y, saved);
    SL_CUDA_LAUNCHED(s);
}

extern "C" void sl_cuda_attention_backward(const sl_exec *ex, const sl_attention_desc *d,
                                           const float *qkv, const float *y, const float *dy,
                                           const float *saved, float *dqkv, int accumulate,
                                           void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    if ((size_t)d->n * d->heads * d->t == 0)
        return;
    float *di = (float *)ws; /* planned: see sl_cuda_attention_workspace_bytes */
    attn_bwd_q<<<row_blocks(d), ATTN_THREADS, 0, s->stream>>>(*d, qkv, y, dy, saved, dqkv,
                                                              accumulate, di);
    SL_CUDA_LAUNCHED(s);
    attn_bwd_kv<<<row_blocks(d), ATTN_THREADS, 0, s->stream>>>(*d, qkv, dy, saved, dqkv,
                                                               accumulate, di);
    SL_CUDA_LAUNCHED(s);
}
