/*
 * cpu_decode.c — one decoding step of causal self-attention on the CPU
 * (run stage): a new token's query row per head against the keys and
 * values of every position so far (a KV cache), in O(t d) per head.
 *
 * Arithmetic per head, the same as cuda_decode.cu's: logit_j =
 * sl_attn_logit(sl_attn_dot(q, k_j), scale), the dot product in float over
 * the head's channels in order; the maximum m; the sum of sl_attn_exp(logit_j,
 * m) in double in key order; p_j = exp / (float)sum; y[c] = sum_j p_j
 * v_j[c] in float in key order. Scores are recomputed in each pass (no
 * workspace). Heads go to an OpenMP team, one head per thread from start
 * to end: the bits do not depend on the number of threads.
 */
#include <math.h>
#include <omp.h>

#include "base/element.h"
#include "cpu/cpu.h"

static void decode_head(int h, int d, int t, const float *q, const float *k, const float *v,
                        int ld, float *y)
{
    float scale = sl_attn_scale(d);
    const float *qh = q + (size_t)h * d;
    const float *kh = k + (size_t)h * d, *vh = v + (size_t)h * d;
    float *yh = y + (size_t)h * d;
    float mx = -INFINITY;
    for (int j = 0; j < t; j++) {
        float lg = sl_attn_logit(sl_attn_dot(qh, kh + (size_t)j * ld, d), scale);
        mx = lg > mx ? lg : mx;
    }
    double s = 0.0;
    for (int j = 0; j < t; j++)
        s += sl_attn_exp(sl_attn_logit(sl_attn_dot(qh, kh + (size_t)j * ld, d), scale), mx);
    float sf = (float)s;
    for (int c = 0; c < d; c++)
        yh[c] = 0.0f;
    for (int j = 0; j < t; j++) {
        float lg = sl_attn_logit(sl_attn_dot(qh, kh + (size_t)j * ld, d), scale);
        float p = sl_attn_exp(lg, mx) / sf;
        const float *vr = vh + (size_t)j * ld;
        for (int c = 0; c < d; c++)
            yh[c] += p * vr[c];
    }
}

void sl_cpu_attention_decode(const sl_exec *ex, int heads, int d, int t, const float *q,
                             const float *k, const float *v, int ld, float *y)
{
    if (heads < 1 || d < 1 || t < 1)
        return;
    int team = cpu_threads(ex) < heads ? cpu_threads(ex) : heads;
    if (team > 1 && (size_t)t * (size_t)d * (size_t)heads >= CPU_PAR_MIN) {
#pragma omp parallel for num_threads(team) schedule(static)
        for (int h = 0; h < heads; h++)
            decode_head(h, d, t, q, k, v, ld, y);
    } else {
        for (int h = 0; h < heads; h++)
            decode_head(h, d, t, q, k, v, ld, y);
    }
}
