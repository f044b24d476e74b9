/*
 * element.h — the rules of the "run" stage that both backends must
 * compute the same way, written once: per-element maps (an optimizer
 * update, a normalised value, GELU, a dropout mask, a loss gradient
 * element), per-element terms of reductions, combines of partial results
 * with explicit tie rules (sl_argmax_takes) and finalisers (sums to a
 * mean and inverse std, to a loss). src/cpu's loops and src/cuda's kernels
 * call these same functions. The traversal — which thread visits which
 * elements and the tree that combines partial sums — is each backend's
 * own, fixed per shape and described at the top of its file; the row
 * walks here (sl_ln_row_stats, sl_lm_xent_row, ...) are the CPU's. So a
 * device is deterministic and re-forwards bit-identically, and the two
 * devices agree within a rounding tolerance, not bit for bit.
 *
 * Read by C11 (gcc) and by nvcc (C++17): SL_HD (base/philox.h) is
 * `__host__ __device__` under nvcc and empty in C. Each function keeps the
 * exact float operation order the CPU results (and their comparisons with
 * PyTorch and across checkpointed runs) depend on; both builds compile
 * without FP contraction (C11's default here; nvcc --fmad=false).
 */
#ifndef SL_ELEMENT_H
#define SL_ELEMENT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/backend.h"
#include "base/philox.h"

/* dst = v, or dst += v when accumulating (a gradient read by several
 * layers gets their sum). */
SL_HD static inline void sl_put(float *dst, float v, int accumulate)
{
    *dst = accumulate ? *dst + v : v;
}

/* ---- bfloat16: the one rounding rule (files, and activations stored in
 * bf16) ---- */

/* bf16 widens to F32 exactly: its bits are the float's top half. */
SL_HD static inline float sl_bf16_widen(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* F32 to bf16 rounded to nearest, ties to even (IEEE 754's default): a
 * value beyond bf16's largest finite one goes to infinity; a NaN stays a
 * quiet NaN of the same sign and top payload bits. No stochastic
 * rounding. */
SL_HD static inline uint16_t sl_bf16_round(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    /* Adding 0x7FFF plus the kept part's last bit carries into the kept
     * part exactly when the dropped half is above 0x8000, or equal with
     * an odd kept part; a carry out of the significand bumps the exponent,
     * up to infinity. Branch-free, so loops over it vectorise. */
    uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
    uint32_t nan = (x >> 16) | 0x0040u;
    return (uint16_t)((x & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

/* ---- ReLU ---- */

SL_HD static inline float sl_relu_of(float x) { return x > 0.0f ? x : 0.0f; }

/* The gradient through y = relu(x), from the output y. */
SL_HD static inline float sl_relu_grad_of(float y, float dy) { return y > 0.0f ? dy : 0.0f; }

/* ---- dropout and uniforms: Philox4x32-10 words of (seed, counter) ---- */

/* A dropout mask's constants: element i is kept iff word i % 4 of block
 * counter + i / 4 is at least threshold (= p * 2^32), and scaled by
 * 1 / (1 - p); p >= 1 drops all. */
typedef struct sl_dropout_mask {
    uint32_t key[2];
    uint32_t threshold;
    float scale;
    int drop_all;
} sl_dropout_mask;

SL_HD static inline sl_dropout_mask sl_dropout_mask_of(float p, uint64_t seed)
{
    sl_dropout_mask m;
    double t = (double)p * 4294967296.0;
    m.key[0] = (uint32_t)seed;
    m.key[1] = (uint32_t)(seed >> 32);
    m.threshold = t <= 0.0 ? 0u : t >= 4294967295.0 ? 4294967295u : (uint32_t)t;
    m.drop_all = p >= 1.0f;
    m.scale = m.drop_all ? 0.0f : 1.0f / (1.0f - p);
    return m;
}

/* The four words of block b past counter. */
SL_HD static inline void sl_dropout_words(const sl_dropout_mask *m, uint64_t counter, uint64_t b,
                                          uint32_t out[4])
{
    uint64_t c = counter + b;
    uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0u, 0u};
    sl_philox4x32_10(ctr, m->key, out);
}

/* Elements 4b .. 4b+3 (those below count) of dst (+)= keep ? src * scale
 * : 0. src and dst may alias: each element is read once, then written.
 * The forward is this over x; the backward the same mask over dy. */
SL_HD static inline void sl_dropout_block(const sl_dropout_mask *m, uint64_t counter, uint64_t b,
                                          size_t count, const float *src, float *dst,
                                          int accumulate)
{
    uint32_t r[4];
    sl_dropout_words(m, counter, b, r);
    size_t i0 = (size_t)b * 4;
    for (size_t u = 0; u < 4 && i0 + u < count; u++) {
        int keep = !m->drop_all && r[u] >= m->threshold;
        float v = keep ? src[i0 + u] * m->scale : 0.0f;
        sl_put(&dst[i0 + u], v, accumulate);
    }
}

/* A word's top 24 bits as a uniform float in [0, 1). */
SL_HD static inline float sl_uniform_of_word(uint32_t w)
{
    return (float)(w >> 8) * (1.0f / 16777216.0f);
}

/* dst[e - first] for the elements e of block b inside [first, first +
 * count): word e % 4 of block counter + e / 4 (dropout's words). */
SL_HD static inline void sl_uniform_block(const sl_dropout_mask *m, uint64_t counter, uint64_t b,
                                          uint64_t first, size_t count, float *dst)
{
    uint32_t r[4];
    sl_dropout_words(m, counter, b, r);
    for (uint64_t u = 0; u < 4; u++) {
        uint64_t e = 4 * b + u;
        if (e >= first && e < first + count)
            dst[e - first] = sl_uniform_of_word(r[u]);
    }
}

/* ---- concatenation slices ---- */

/* The offset of channel `off + ch` of image img in a tensor of c_total
 * channels of hw values. */
SL_HD static inline size_t sl_channel_plane(size_t img, int c_total, int off, size_t ch, int hw)
{
    return (img * c_total + off + ch) * hw;
}

/* ---- Linear's bias ---- */

/* acc[j] += column j0 + j of the rows x cols matrix dy (j < nj), rows in
 * order, in double: the bias gradient's column sums as the CPU's blocks
 * of columns add them (the GPU sums its own tree of rows in double, see
 * cuda_elementwise.cu). */
SL_HD static inline void sl_column_sums(const float *dy, int rows, int cols, int j0, int nj,
                                        double *acc)
{
    for (int r = 0; r < rows; r++) {
        const float *row = dy + (size_t)r * cols + j0;
        for (int j = 0; j < nj; j++)
            acc[j] += row[j];
    }
}

/* ---- BatchNorm ---- */

/* A channel's scale and shift; NULL (no affine parameters): 1 and 0. */
SL_HD static inline float sl_bn_gamma(const float *gamma, int ch)
{
    return gamma ? gamma[ch] : 1.0f;
}

SL_HD static inline float sl_bn_beta(const float *beta, int ch) { return beta ? beta[ch] : 0.0f; }

/* y = (x - mean) * invstd * gamma + beta: the one normalising expression
 * of train, apply and infer (a re-forward repeats the forward's bits). */
SL_HD static inline float sl_bn_normalise(float x, float mean, float invstd, float gamma,
                                          float beta)
{
    float xhat = (x - mean) * invstd;
    return xhat * gamma + beta;
}

/* A batch's mean and biased variance from the double sums of x and x * x
 * over count values (clamped at 0: rounding can make E[x^2] - mean^2
 * slightly negative). One pass over x on both devices. */
SL_HD static inline void sl_bn_batch_moments(double sum, double sum_sq, double count,
                                             double *mean, double *var)
{
    double m = sum / count;
    double v = sum_sq / count - m * m;
    *mean = m;
    *var = v < 0.0 ? 0.0 : v;
}

/* One value's terms of the backward's sums: dy, and dy * (x - mean), in
 * double (mean is the saved batch mean). */
SL_HD static inline double sl_bn_dy_xc(float dy, float x, double mean)
{
    return (double)dy * ((double)x - mean);
}

/* invstd of batch statistics (the variance in double). */
SL_HD static inline float sl_bn_batch_invstd(double var, float eps)
{
    return (float)(1.0 / sqrt(var + (double)eps));
}

/* invstd of running statistics, in float (eval and frozen BatchNorm). */
SL_HD static inline float sl_bn_running_invstd(float var, float eps)
{
    return 1.0f / sqrtf(var + eps);
}

/* PyTorch's running statistics update with the batch's mean and biased
 * variance var over count values (unbiased variance kept). */
SL_HD static inline void sl_bn_running_update(float *running_mean, float *running_var, float mean,
                                              double var, double count, float momentum)
{
    double unbiased = count > 1.0 ? var * count / (count - 1.0) : var;
    *running_mean = (1.0f - momentum) * *running_mean + momentum * mean;
    *running_var = (1.0f - momentum) * *running_var + momentum * (float)unbiased;
}

/* The per-channel means of dy and of dy * xhat over count values, from
 * their sums; zero when frozen (constant statistics: their terms vanish). */
SL_HD static inline void sl_bn_grad_means(double sum_dy, double sum_dy_xhat, double count,
                                          int frozen, float *mean_dy, float *mean_dy_xhat)
{
    *mean_dy = frozen ? 0.0f : (float)(sum_dy / count);
    *mean_dy_xhat = frozen ? 0.0f : (float)(sum_dy_xhat / count);
}

/* BatchNorm joined to the ReLU after it (batchnorm_relu_*): the output
 * relu(normalised), and the gradient at BatchNorm's output from dy at the
 * ReLU's, by the ReLU's rule on that output recomputed from x (the bits
 * the forward wrote, so the mask the ReLU's backward would read). */
SL_HD static inline float sl_bn_relu_out(float x, float mean, float invstd, float gamma,
                                         float beta)
{
    return sl_relu_of(sl_bn_normalise(x, mean, invstd, gamma, beta));
}

SL_HD static inline float sl_bn_relu_dy(float dy, float x, float mean, float invstd, float gamma,
                                        float beta)
{
    return sl_relu_grad_of(sl_bn_relu_out(x, mean, invstd, gamma, beta), dy);
}

/* dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)), with
 * scale = gamma * invstd. */
SL_HD static inline float sl_bn_dx(float x, float dy, float mean, float invstd, float scale,
                                   float mean_dy, float mean_dy_xhat)
{
    float xhat = (x - mean) * invstd;
    return scale * (dy - mean_dy - xhat * mean_dy_xhat);
}

/* ---- pooling ---- */

/* The input rows / columns [lo, hi) that output index o's window covers. */
SL_HD static inline void sl_pool_window(int o, int stride, int pad, int k, int size, int *lo,
                                        int *hi)
{
    int a = o * stride - pad;
    int b = a + k;
    *lo = a < 0 ? 0 : a;
    *hi = b > size ? size : b;
}

/* The first valid row / column of output index o's window: where a
 * window's argmax starts, so a window of -inf still names a cell inside it. */
SL_HD static inline int sl_pool_first(int o, int stride, int pad, int size)
{
    int a = o * stride - pad;
    return a < 0 ? 0 : a < size ? a : size - 1;
}

/* Max pooling's rule: v replaces the best so far when larger (the first
 * maximum wins ties) or NaN (a NaN wins, as in PyTorch). */
SL_HD static inline int sl_maxpool_takes(float v, float best) { return (v > best) | (v != v); }

/* Average pooling divides by the whole window (padding counted). */
SL_HD static inline float sl_avgpool_area(const sl_pool_desc *d) { return (float)(d->kh * d->kw); }

/* Each input cell of a window gets dy / area. */
SL_HD static inline float sl_avgpool_grad(float dy, float area) { return dy / area; }

/* The sum of a plane's window rows [y0, y1) x columns [x0, x1), row by row. */
SL_HD static inline float sl_avgpool_window_sum(const float *xp, int w, int y0, int y1, int x0,
                                                int x1)
{
    float s = 0.0f;
    for (int iy = y0; iy < y1; iy++)
        for (int ix = x0; ix < x1; ix++)
            s += xp[iy * w + ix];
    return s;
}

/* The mean of hw values, summed in order in double. */
SL_HD static inline float sl_gap_mean(const float *x, int hw)
{
    double s = 0.0;
    for (int j = 0; j < hw; j++)
        s += x[j];
    return (float)(s / hw);
}

/* Each of the hw inputs of a global average gets dy / hw. */
SL_HD static inline float sl_gap_grad(float dy, int hw) { return dy / (float)hw; }

/* ---- softmax cross-entropy, one row of logits ---- */

/* The row's maximum and the index of its first maximum. */
SL_HD static inline float sl_row_max(const float *x, int classes, int *arg)
{
    float best = x[0];
    int at = 0;
    for (int j = 1; j < classes; j++) {
        if (x[j] > best) {
            best = x[j];
            at = j;
        }
    }
    *arg = at;
    return best;
}

/* The terms of a row's softmax cross-entropy, given the row's maximum
 * mx, for the CPU's row walks below and the GPU's block per row: the
 * gradient's exponential (float, summed in double to s), the gradient
 * from it and inv_s = (float)(1.0 / s), the loss's exponential (double,
 * summed in double) and the loss from that sum. */
SL_HD static inline float sl_xent_exp(float x, float mx) { return expf(x - mx); }
SL_HD static inline float sl_xent_grad(float e, float inv_s, float inv_n)
{
    return e * inv_s * inv_n;
}
SL_HD static inline double sl_xent_loss_exp(float x, float mx)
{
    return exp((double)x - (double)mx);
}
SL_HD static inline double sl_xent_loss_of(double s, float at_label, float mx)
{
    return log(s) - ((double)at_label - (double)mx);
}

/* g = (softmax(x) - onehot(label)) * inv_n, with mx the row's maximum. */
SL_HD static inline void sl_xent_row_grad(const float *x, int classes, float mx, int label,
                                          float inv_n, float *g)
{
    double s = 0.0;
    for (int j = 0; j < classes; j++) {
        g[j] = sl_xent_exp(x[j], mx);
        s += g[j];
    }
    float inv_s = (float)(1.0 / s);
    for (int j = 0; j < classes; j++)
        g[j] = sl_xent_grad(g[j], inv_s, inv_n);
    g[label] -= inv_n;
}

/* The row's loss -log softmax(x)[label], in double. */
SL_HD static inline double sl_xent_row_loss(const float *x, int classes, float mx, int label)
{
    double s = 0.0;
    for (int j = 0; j < classes; j++)
        s += sl_xent_loss_exp(x[j], mx);
    return sl_xent_loss_of(s, x[label], mx);
}

/* e^v in float from arithmetic alone (no libm call), so that a loop of it
 * vectorises and every lane computes what the scalar code computes (the
 * library is built without FP contraction): v clamped to [-87, 88];
 * v = k ln2 + r, |r| <= ln2 / 2, with ln2 in two parts (k ln2_hi is exact);
 * e^r by its Taylor polynomial to r^7 (truncation below 6e-9 relative);
 * 2^k written into the exponent bits. Within 2 ulp of e^v. */
SL_HD static inline float sl_exp_poly(float v)
{
    v = v < -87.0f ? -87.0f : v;
    v = v > 88.0f ? 88.0f : v;
    float kf = floorf(v * 1.44269504088896341f + 0.5f);
    int k = (int)kf;
    float r = v - kf * 0.693145751953125f;
    r = r - kf * 1.42860682030941723212e-6f;
    float p = 1.0f / 5040.0f;
    p = 1.0f / 720.0f + r * p;
    p = 1.0f / 120.0f + r * p;
    p = 1.0f / 24.0f + r * p;
    p = 1.0f / 6.0f + r * p;
    p = 0.5f + r * p;
    p = 1.0f + r * p;
    p = 1.0f + r * p;
    uint32_t bits = (uint32_t)(k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* Whether (v, i) replaces (best, at) in a search for a row's first
 * maximum: larger, or as large at a smaller index. Partial searches
 * combined by it in any tree give the first maximum of what they cover,
 * as sl_row_max's scan does (a NaN compares false and never wins; the
 * scan differs only when x[0] itself is NaN). */
SL_HD static inline int sl_argmax_takes(float v, int i, float best, int at)
{
    return v > best || (v == best && i < at);
}

/* A language model's row loss from s, the double sum over the row of
 * sl_exp_poly(x - mx) (in any fixed order), the row's maximum mx and the
 * label's logit. */
SL_HD static inline double sl_lm_xent_loss(double s, float at_label, float mx)
{
    return log(s) - ((double)at_label - (double)mx);
}

/* The row's gradient is sl_exp_poly(x - mx) * f, f = this, and scale less
 * at the label ((softmax - onehot) * scale). */
SL_HD static inline float sl_lm_xent_factor(double s, float scale)
{
    return (float)(1.0 / s) * scale;
}

/* One row of a language model's loss (backend lm_xent) as the CPU walks
 * it: the loss and hit of row x against label, then, with grad, x
 * overwritten in place by (softmax(x) - onehot(label)) * scale. One
 * exponential per logit (float, summed in double, in order): the
 * vocabulary-sized rows make this the loss's cost. A row labelled
 * ignore_index counts nothing and gets a zero gradient. */
SL_HD static inline void sl_lm_xent_row(float *x, int vocab, int label, int ignore_index,
                                        float scale, int grad, double *loss, int *hit)
{
    if (label == ignore_index) {
        *loss = 0.0;
        *hit = 0;
        if (grad)
            for (int j = 0; j < vocab; j++)
                x[j] = 0.0f;
        return;
    }
    int arg;
    float mx = sl_row_max(x, vocab, &arg);
    float at_label = x[label];
    double s = 0.0;
    if (grad) {
        for (int j = 0; j < vocab; j++) /* vectorises: no libm call */
            x[j] = sl_exp_poly(x[j] - mx);
        for (int j = 0; j < vocab; j++) /* in order, in double */
            s += x[j];
        float f = sl_lm_xent_factor(s, scale);
        for (int j = 0; j < vocab; j++)
            x[j] *= f;
        x[label] -= scale;
    } else {
        for (int j = 0; j < vocab; j++)
            s += sl_exp_poly(x[j] - mx);
    }
    *loss = sl_lm_xent_loss(s, at_label, mx);
    *hit = arg == label;
}

/* sl_lm_xent_row on a row of bf16 logits (a bf16 head's, SL_BF16_GEMM):
 * each logit widened as it is read, the same float and double arithmetic
 * (the exponential recomputed for the gradient instead of kept in the
 * row), each gradient rounded once as it is written: the float row's
 * results on the widened row, rounded. */
SL_HD static inline void sl_lm_xent_row_bf16(uint16_t *x, int vocab, int label,
                                             int ignore_index, float scale, int grad,
                                             double *loss, int *hit)
{
    if (label == ignore_index) {
        *loss = 0.0;
        *hit = 0;
        if (grad)
            for (int j = 0; j < vocab; j++)
                x[j] = 0;
        return;
    }
    float mx = sl_bf16_widen(x[0]); /* sl_row_max's first maximum */
    int arg = 0;
    for (int j = 1; j < vocab; j++) {
        float v = sl_bf16_widen(x[j]);
        if (v > mx) {
            mx = v;
            arg = j;
        }
    }
    float at_label = sl_bf16_widen(x[label]);
    double s = 0.0;
    for (int j = 0; j < vocab; j++) /* in order, in double */
        s += sl_exp_poly(sl_bf16_widen(x[j]) - mx);
    if (grad) {
        float f = sl_lm_xent_factor(s, scale);
        for (int j = 0; j < vocab; j++) {
            float g = sl_exp_poly(sl_bf16_widen(x[j]) - mx) * f;
            x[j] = sl_bf16_round(j == label ? g - scale : g);
        }
    }
    *loss = sl_lm_xent_loss(s, at_label, mx);
    *hit = arg == label;
}

/* ---- optimizer updates (PyTorch's rules) ---- */

/* torch.optim.SGD with dampening 0 on parameter i; mom may be NULL when
 * momentum is 0. The gradient is g[i] * grad_scale (1.0f: g[i] exactly). */
SL_HD static inline void sl_sgd_element(size_t i, float *w, const float *g, float *mom, float lr,
                                        float momentum, float weight_decay, int nesterov,
                                        int first, float grad_scale)
{
    float d = g[i] * grad_scale;
    if (weight_decay != 0.0f)
        d = d + weight_decay * w[i];
    if (momentum != 0.0f) {
        float buf = first ? d : momentum * mom[i] + d;
        mom[i] = buf;
        d = nesterov ? d + momentum * buf : buf;
    }
    w[i] = w[i] - lr * d;
}

/* torch.optim.Adam's (and AdamW's) constants of one step: in float except
 * the bias corrections and AdamW's decay factor (Python doubles there). */
typedef struct sl_adam_step {
    float step_size; /* lr / (1 - beta1^step) */
    float bc2_sqrt;  /* sqrt(1 - beta2^step) */
    float beta1, beta2, one_b1, one_b2, eps;
    float weight_decay; /* L2, added to the gradient (Adam); 0 for AdamW */
    float decay;        /* AdamW: w *= 1 - lr * weight_decay first; 1: none */
    float grad_scale;   /* the gradient is g * grad_scale */
} sl_adam_step;

/* decoupled 0: Adam (weight_decay is L2); 1: AdamW (weight_decay decays w). */
static inline sl_adam_step sl_adam_step_of(float lr, float beta1, float beta2, float eps,
                                           float weight_decay, int decoupled, int64_t step,
                                           float grad_scale)
{
    sl_adam_step a;
    double bc1 = 1.0 - pow((double)beta1, (double)step);
    double bc2 = 1.0 - pow((double)beta2, (double)step);
    a.step_size = (float)((double)lr / bc1);
    a.bc2_sqrt = (float)sqrt(bc2);
    a.beta1 = beta1;
    a.beta2 = beta2;
    a.one_b1 = 1.0f - beta1;
    a.one_b2 = 1.0f - beta2;
    a.eps = eps;
    a.weight_decay = decoupled ? 0.0f : weight_decay;
    a.decay = decoupled ? (float)(1.0 - (double)lr * (double)weight_decay) : 1.0f;
    a.grad_scale = grad_scale;
    return a;
}

/* Adam (L2 weight decay added to the gradient) or AdamW (w *= decay first)
 * on parameter i: denom = sqrt(v) / sqrt(bc2) + eps;
 * w -= (lr / bc1) * m / denom. */
SL_HD static inline void sl_adam_element(size_t i, float *w, const float *g, float *m, float *v,
                                         const sl_adam_step *a)
{
    float d = g[i] * a->grad_scale;
    if (a->decay != 1.0f)
        w[i] = w[i] * a->decay;
    if (a->weight_decay != 0.0f)
        d = d + a->weight_decay * w[i];
    float mi = a->beta1 * m[i] + a->one_b1 * d;
    float vi = a->beta2 * v[i] + a->one_b2 * d * d;
    m[i] = mi;
    v[i] = vi;
    float denom = sqrtf(vi) / a->bc2_sqrt + a->eps;
    w[i] = w[i] - a->step_size * mi / denom;
}

/* ---- transformer layers: LayerNorm, GELU, token + position embedding ---- */

/* LayerNorm's statistics of a row of c values from the double sums s of
 * x and q of x * x (in any fixed order: the finaliser of each backend's
 * traversal): mean and 1 / sqrt(var + eps), biased variance, as
 * BatchNorm's batch moments. */
SL_HD static inline void sl_ln_moments(double s, double q, int c, float eps, float *mean,
                                       float *rstd)
{
    double m, var;
    sl_bn_batch_moments(s, q, (double)c, &m, &var);
    *mean = (float)m;
    *rstd = sl_bn_batch_invstd(var, eps);
}

/* One value's terms of those sums. */
SL_HD static inline void sl_ln_stat_terms(float x, double *s, double *q)
{
    double v = x;
    *s += v;
    *q += v * v;
}

/* The statistics of one row, its values summed in order (the CPU). */
SL_HD static inline void sl_ln_row_stats(const float *x, int c, float eps, float *mean,
                                         float *rstd)
{
    double s = 0.0, q = 0.0;
    for (int j = 0; j < c; j++)
        sl_ln_stat_terms(x[j], &s, &q);
    sl_ln_moments(s, q, c, eps, mean, rstd);
}

/* The normalised value of LayerNorm's forward and backward. */
SL_HD static inline float sl_ln_xhat(float x, float mean, float rstd) { return (x - mean) * rstd; }

/* One row of LayerNorm's output: y = xhat * weight + bias (BatchNorm's
 * normalising expression, so a re-forward repeats the bits). */
SL_HD static inline void sl_ln_row_forward(const float *x, int c, const float *weight,
                                           const float *bias, float mean, float rstd, float *y)
{
    for (int j = 0; j < c; j++)
        y[j] = sl_bn_normalise(x[j], mean, rstd, weight[j], bias[j]);
}

/* LayerNorm's input gradient, with g = dy * weight: dx = rstd * (g -
 * mean(g) - xhat * mean(g * xhat)). The two sums over the row are of the
 * terms sl_ln_dx_terms adds (in double, in any fixed order); sl_ln_dx_means
 * finishes them and sl_ln_dx_of gives each element. */
SL_HD static inline void sl_ln_dx_terms(float x, float dy, float weight, float mean, float rstd,
                                        double *sg, double *sgx)
{
    double g = (double)dy * (double)weight;
    *sg += g;
    *sgx += g * (double)sl_ln_xhat(x, mean, rstd);
}

SL_HD static inline void sl_ln_dx_means(double sg, double sgx, int c, float *mg, float *mgx)
{
    *mg = (float)(sg / c);
    *mgx = (float)(sgx / c);
}

SL_HD static inline float sl_ln_dx_of(float x, float dy, float weight, float mean, float rstd,
                                      float mg, float mgx)
{
    float xh = sl_ln_xhat(x, mean, rstd);
    return rstd * (dy * weight - mg - xh * mgx);
}

/* One row of it, the sums in order (the CPU); dx (+)=, and the sums come
 * first, so dx may alias dy. */
SL_HD static inline void sl_ln_row_backward(const float *x, const float *dy, int c,
                                            const float *weight, float mean, float rstd,
                                            float *dx, int accumulate)
{
    double sg = 0.0, sgx = 0.0;
    for (int j = 0; j < c; j++)
        sl_ln_dx_terms(x[j], dy[j], weight[j], mean, rstd, &sg, &sgx);
    float mg, mgx;
    sl_ln_dx_means(sg, sgx, c, &mg, &mgx);
    for (int j = 0; j < c; j++)
        sl_put(&dx[j], sl_ln_dx_of(x[j], dy[j], weight[j], mean, rstd, mg, mgx), accumulate);
}

/* One row's terms of LayerNorm's parameter gradients at a column, in
 * double: aw += dy * xhat (weight), ab += dy (bias). */
SL_HD static inline void sl_ln_param_terms(float x, float dy, float mean, float rstd, double *aw,
                                           double *ab)
{
    *aw += (double)dy * (double)sl_ln_xhat(x, mean, rstd);
    *ab += dy;
}

/* Those over columns j0 .. j0 + nj - 1 of the rows x c matrices x and
 * dy, rows in order (the CPU's blocks of columns; the GPU sums its own
 * tree of rows, see cuda_transformer.cu). */
SL_HD static inline void sl_ln_param_sums(const float *x, const float *dy, int rows, int c,
                                          const float *mean, const float *rstd, int j0, int nj,
                                          double *aw, double *ab)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * c + j0;
        const float *dr = dy + (size_t)r * c + j0;
        for (int j = 0; j < nj; j++)
            sl_ln_param_terms(xr[j], dr[j], mean[r], rstd[r], &aw[j], &ab[j]);
    }
}

/* GPT-2's tanh approximation of GELU (torch's F.gelu(approximate='tanh')):
 * 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), in float. */
#define SL_GELU_BETA 0.7978845608028654f /* sqrt(2 / pi) */
#define SL_GELU_KAPPA 0.044715f

/* As x sigmoid(2 inner) = x / (1 + e^(-2 inner)), the same function, which
 * needs only sl_exp_poly: the GELU loops vectorise (tanhf is a libm call
 * per element, 4x slower on GPT-2's MLP). */
SL_HD static inline float sl_gelu_of(float x)
{
    float inner = SL_GELU_BETA * (x + SL_GELU_KAPPA * (x * x * x));
    return x / (1.0f + sl_exp_poly(-2.0f * inner));
}

/* dy times the exact derivative of sl_gelu_of at x:
 * 0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3 kappa x^2), t = tanh(inner),
 * with 0.5 (1 + t) = s = 1 / (1 + e), e = e^(-2 inner), and
 * 1 - t^2 = 4 s (1 - s) = 4 s (e s). */
SL_HD static inline float sl_gelu_grad_of(float x, float dy)
{
    float x2 = x * x;
    float e = sl_exp_poly(-2.0f * (SL_GELU_BETA * (x + SL_GELU_KAPPA * (x2 * x))));
    float s = 1.0f / (1.0f + e);
    float d_inner = SL_GELU_BETA * (1.0f + 3.0f * SL_GELU_KAPPA * x2);
    float d = s + 2.0f * x * (s * (e * s)) * d_inner;
    return dy * d;
}

/* The token embedding row of id, or NULL for an id outside [0, vocab)
 * (callers validate ids; a bad one reads nothing out of bounds: it
 * embeds as zeros and gets no gradient). */
SL_HD static inline const float *sl_embedding_row(const float *wte, int32_t id, int vocab, int c)
{
    return id >= 0 && id < vocab ? wte + (size_t)id * c : NULL;
}

/* Element j of token (b, t)'s embedding: wte[id] + wpe[t]. */
SL_HD static inline float sl_embedding_of(const float *te_row, const float *pe_row, int j)
{
    return (te_row ? te_row[j] : 0.0f) + pe_row[j];
}

/* The embedding's parameter gradients over columns j0 .. j0 + nj - 1:
 * dwte[id] += dy row, dwpe[t] += dy row, tokens (b, t) in order, in float,
 * so each element of a table gets one fixed sequence of adds (the CPU sums
 * a block of columns per thread; the GPU makes the same sequences from
 * the tokens sorted stably by id, see cuda_transformer.cu). */
SL_HD static inline void sl_embedding_grad_columns(const int32_t *ids, const float *dy, int n,
                                                   int t_len, int c, int vocab, int j0, int nj,
                                                   float *dwte, float *dwpe)
{
    for (int b = 0; b < n; b++) {
        for (int t = 0; t < t_len; t++) {
            size_t tok = (size_t)b * t_len + t;
            const float *dr = dy + tok * c + j0;
            float *pe = dwpe + (size_t)t * c + j0;
            int32_t id = ids[tok];
            float *te = id >= 0 && id < vocab ? dwte + (size_t)id * c + j0 : NULL;
            for (int j = 0; j < nj; j++) {
                pe[j] += dr[j];
                if (te)
                    te[j] += dr[j];
            }
        }
    }
}

/* ---- causal self-attention ---- */

/* The factors of the dropout mask's elements e0 .. e0+n-1 (word e % 4 of
 * block counter + e / 4): scale when kept, 0 when dropped; all 1 when
 * nothing is dropped (p = 0: no words drawn). */
SL_HD static inline void sl_dropout_factors(const sl_dropout_mask *m, uint64_t counter,
                                            uint64_t e0, int n, float *f)
{
    if (m->threshold == 0u && !m->drop_all) {
        for (int k = 0; k < n; k++)
            f[k] = m->scale;
        return;
    }
    uint32_t r[4];
    uint64_t block = ~(uint64_t)0;
    for (int k = 0; k < n; k++) {
        uint64_t e = e0 + (uint64_t)k;
        if (e / 4 != block) {
            block = e / 4;
            sl_dropout_words(m, counter, block, r);
        }
        int keep = !m->drop_all && r[e % 4] >= m->threshold;
        f[k] = keep ? m->scale : 0.0f;
    }
}

/* Element (bh, i, j) of the attention probabilities of t tokens, bh =
 * b * heads + h: its index in the dropout mask. */
SL_HD static inline uint64_t sl_attn_element(int bh, int t, int i, int j)
{
    return ((uint64_t)bh * (uint64_t)t + (uint64_t)i) * (uint64_t)t + (uint64_t)j;
}

/* q . k as one decoding step computes it on both devices: in float, over
 * the head's channels in order. */
SL_HD static inline float sl_attn_dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int c = 0; c < n; c++)
        s += a[c] * b[c];
    return s;
}

/* Scores are q . k / sqrt(head size). */
SL_HD static inline float sl_attn_scale(int d) { return 1.0f / sqrtf((float)d); }

SL_HD static inline float sl_attn_logit(float qk, float scale) { return qk * scale; }

/* exp(logit - m): m a row maximum (then divided by the row's sum), or the
 * row's log-sum-exp (then the probability itself). */
SL_HD static inline float sl_attn_exp(float logit, float m) { return expf(logit - m); }

/* A row's log-sum-exp from its maximum m and sum of exp(logit - m). */
SL_HD static inline float sl_attn_lse(float m, double sum) { return m + (float)log(sum); }

/* The gradient of a logit (before the 1 / sqrt(d) scale) from probability
 * p, the gradient dpf of the dropped-out probability p * f, the dropout
 * factor f and the row's sum di of dpf * p * f (= rowsum(dO o O)). */
SL_HD static inline float sl_attn_grad_logit(float p, float dpf, float f, float di)
{
    return p * (dpf * f - di);
}

/* ---- gradient norm ---- */

/* The sum of squares of a tensor is kept in SL_SUM_SQUARES_SLOTS
 * (backend.h) doubles: slot t sums, from 0 and in index order, the squares
 * of elements t, t + SLOTS, t + 2 SLOTS ... (one term: sl_square_add),
 * then adds that to the slot; the caller sums the slots in order. Fixed on
 * every device, so the norm is the same bits on the CPU and the GPU (whose
 * threads read adjacent elements). */
SL_HD static inline double sl_square_add(double acc, float v) { return acc + (double)v * (double)v; }

#endif
