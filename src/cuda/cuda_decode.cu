/*
 * cuda_decode.cu — one decoding step of causal self-attention on the GPU
 * (run stage): a new token's query row per head against t cached key /
 * value rows. One block per head: the maximum and the double sum over a
 * fixed tree in shared memory, then each output channel summed by one
 * thread in key order (cuda_block.h), with the element rules cpu_decode.c uses
 * (sl_attn_logit, sl_attn_exp, p = e / (float)sum): deterministic.
 */
#include <math.h>

#include "base/element.h"
#include "cuda/cuda_block.h"
#include "cuda/cuda_common.h"

#define DEC_THREADS 128

static __global__ void attn_decode(int d, int t, const float *q, const float *k, const float *v,
                                   int ld, float *y)
{
    __shared__ float fsh[DEC_THREADS];
    __shared__ double dsh[DEC_THREADS];
    __shared__ float pb[DEC_THREADS];
    int h = (int)blockIdx.x;
    float scale = sl_attn_scale(d);
    const float *qh = q + (size_t)h * d;
    const float *kh = k + (size_t)h * d, *vh = v + (size_t)h * d;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < t; j += DEC_THREADS)
        mx = fmaxf(mx, sl_attn_logit(sl_attn_dot(qh, kh + (size_t)j * ld, d), scale));
    mx = sl_cuda_block_max(mx, fsh, DEC_THREADS);
    double sum = 0.0;
    for (int j = threadIdx.x; j < t; j += DEC_THREADS)
        sum += sl_attn_exp(sl_attn_logit(sl_attn_dot(qh, kh + (size_t)j * ld, d), scale), mx);
    float sf = (float)sl_cuda_block_sum(sum, dsh, DEC_THREADS);
    for (int c0 = 0; c0 < d; c0 += DEC_THREADS) {
        int c = c0 + (int)threadIdx.x;
        float acc = 0.0f;
        for (int j0 = 0; j0 < t; j0 += DEC_THREADS) {
            int j = j0 + (int)threadIdx.x;
            __syncthreads();
            if (j < t)
                pb[threadIdx.x] = sl_attn_exp(sl_attn_logit(sl_attn_dot(qh, kh + (size_t)j * ld, d),
                                                            scale),
                                              mx) /
                                  sf;
            __syncthreads();
            int nj = t - j0 < DEC_THREADS ? t - j0 : DEC_THREADS;
            if (c < d)
                for (int u = 0; u < nj; u++)
                    acc += pb[u] * vh[(size_t)(j0 + u) * ld + c];
        }
        if (c < d)
            y[(size_t)h * d + c] = acc;
    }
}

extern "C" void sl_cuda_attention_decode(const sl_exec *ex, int heads, int d, int t,
                                         const float *q, const float *k, const float *v, int ld,
                                         float *y)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    if (heads < 1 || d < 1 || t < 1)
        return;
    attn_decode<<<(unsigned)heads, DEC_THREADS, 0, s->stream>>>(d, t, q, k, v, ld, y);
    SL_CUDA_LAUNCHED(s);
}
