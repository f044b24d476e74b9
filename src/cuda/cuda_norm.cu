/*
 * cuda_norm.cu — BatchNorm on the GPU (run stage). Written as our own
 * kernels rather than cuDNN's batch-norm calls, for two guarantees cuDNN
 * does not give: the training forward and the re-forward with saved
 * statistics run the same normalising arithmetic (so a re-forward repeats
 * the forward bit for bit), and every reduction runs in a fixed order, so
 * results do not depend on scheduling. Statistics are accumulated in
 * double as on the CPU. The element rules (the moments, normalise, dx, the
 * running statistics, invstd, the backward's terms) are base/element.h's,
 * the ones cpu_norm.c calls; the block reductions are the GPU's own.
 *
 * The sums run at memory bandwidth: each channel's n x hw values are split
 * into base/bn_grid.h's parts, one block per (channel, part), so the
 * stem's 64 channels fill every SM instead of 64 of them; each block walks
 * its images, then a range of hw, with no division per value, and reads x
 * (or x and dy) once.
 *
 * Reduction order, and why it is deterministic:
 *   1. Block (ch, p), p = q * slices + s, thread t accumulates, in double,
 *      the values j = s * slice_len + t, + 256, ... below the slice's end,
 *      of image q, then image q + image_groups, ...: a fixed sequence that
 *      depends only on (n, c, hw) and t.
 *   2. The block adds its 256 accumulators by a fixed tree (stride 128,
 *      64, ..., 1, each step one add per pair, barriers between) and
 *      writes the pair of partial sums to partials[(ch * parts + p) * 2].
 *   3. Parts 0, 1, ... of a channel are added in order and the element
 *      rules applied: by a second kernel, one thread per channel, before
 *      the normalise (the default; also with no images or values, or a
 *      backward without an input gradient); or (SL_CUDA_BN_FUSED=on) by
 *      every block of the normalise (or of the input gradient) for its
 *      own plane's channel, the block of the channel's first plane
 *      writing the statistics. The same adds in the same order either
 *      way, so the same bits. The fused kernels save a launch a pass but
 *      every block re-adds its channel's parts: on an H100 ResNet-152's
 *      step (TF32 off) was 1.4 % slower with them (2026-11-27-e), so
 *      they are off by default.
 * No atomics and no dependence on which block runs first: every add has
 * fixed operands in a fixed order, so the statistics are the same bits on
 * every call. The training forward's normalise and the re-forward's are
 * one kernel (bn_apply) over equal statistics, so the re-forward repeats
 * the training output bit for bit; with memonger's rescale the re-forward
 * recomputes the statistics, and by the argument above gets the same bits.
 * The partial sums live in the planned workspace
 * (batchnorm_*_workspace_bytes): the backend allocates nothing.
 *
 * BatchNorm joined to the ReLU after it (batchnorm_relu_*, the executor's
 * joins): the same kernels with RELU true. The normalise writes
 * sl_bn_relu_out; the backward's sums and input gradient take dy through
 * sl_bn_relu_dy, the ReLU's rule on the output recomputed from x, the
 * saved statistics, gamma and beta, so the ReLU's output is never read
 * (its storage may already hold something else) and the bits are those
 * of BatchNorm's kernels after the ReLU's.
 *
 * bn_apply, bn_dx and their fused twins (bn_train_apply, bn_final_dx)
 * index by channel planes (bn_apply4 and bn_dx4 by planes of float4
 * where hw is a multiple of 4: SL_CUDA_BN_VEC=off keeps one value at a
 * time): block x takes plane n * c
 * (its channel and constants read once per plane, not per value), block y
 * a range of the plane's hw, each thread SL_PLANE_ITEMS values of it.
 *
 * Measured on an H100 (ncu, ResNet-152 batch 16, the stem's 16 x 64 x
 * 112²; bench/results/gpu-h100-2026-11-24-update): bn_stat_parts reads at
 * 66 % of peak DRAM throughput (51 MB in 24 us). bn_apply read and wrote at
 * 24 % (108 us) with one value per thread and per-value channel lookups,
 * and runs at 54-57 % (45-48 us) as written here.
 */
#include "base/bn_grid.h"
#include "base/element.h"
#include "cuda/cuda_common.h"

#define BN_THREADS SL_BN_GRID_THREADS

/* The two double sums of one block, by a fixed tree; thread 0 gets them. */
static __device__ void block_pair_sum(double a, double b, double *sa, double *sb)
{
    sa[threadIdx.x] = a;
    sb[threadIdx.x] = b;
    __syncthreads();
    for (int stride = BN_THREADS / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            sa[threadIdx.x] += sa[threadIdx.x + stride];
            sb[threadIdx.x] += sb[threadIdx.x + stride];
        }
        __syncthreads();
    }
}

/* Block (ch, p)'s values: images q, q + groups, ...; hw in [lo, hi). The
 * caller's f(k) adds the value at flat index k to its accumulators, in
 * this order for each thread: image by image, and within an image j,
 * j + 256, ... Where a slice is no longer than the block (a thread has at
 * most one value per image: ResNet's planes of 7² and 14², one part of
 * 16 images a channel), four images are taken per step, their f calls written one
 * after the other so that their loads are in flight together; the
 * f calls, and so the adds, come in the same order as one image at a
 * time. A thread with one load in flight at a time waited for DRAM 16
 * times in turn for a channel of 16 images. */
template <typename F>
static __device__ void for_part_values(int n, int c, int hw, sl_bn_grid g, F f)
{
    int ch = (int)(blockIdx.x / (unsigned)g.parts);
    int p = (int)(blockIdx.x - (unsigned)ch * (unsigned)g.parts);
    int q = p / g.slices, s = p - q * g.slices;
    int lo = s * g.slice_len;
    int hi = lo + g.slice_len < hw ? lo + g.slice_len : hw;
    /* from one of the part's images to its next */
    const size_t step = (size_t)g.image_groups * (size_t)c * (size_t)hw;
    size_t base = ((size_t)q * c + ch) * (size_t)hw;
    int img = q;
    if (hi - lo <= BN_THREADS) {
        int j = lo + (int)threadIdx.x;
        if (j >= hi)
            return;
        for (; img + 3 * g.image_groups < n; img += 4 * g.image_groups, base += 4 * step) {
            f(base + j);
            f(base + step + j);
            f(base + 2 * step + j);
            f(base + 3 * step + j);
        }
        for (; img < n; img += g.image_groups, base += step)
            f(base + j);
        return;
    }
    for (; img < n; img += g.image_groups, base += step) {
#pragma unroll 4
        for (int j = lo + (int)threadIdx.x; j < hi; j += BN_THREADS)
            f(base + j);
    }
}

/* Partial sums of x and x * x: partials[(ch * parts + p) * 2 + {0, 1}]. */
static __global__ void __launch_bounds__(BN_THREADS)
    bn_stat_parts(int n, int c, int hw, sl_bn_grid g, const float *x, double *partials)
{
    __shared__ double sa[BN_THREADS], sb[BN_THREADS];
    double s = 0.0, q = 0.0;
    for_part_values(n, c, hw, g, [&](size_t k) {
        double v = (double)x[k];
        s += v;
        q += v * v;
    });
    block_pair_sum(s, q, sa, sb);
    if (threadIdx.x == 0) {
        partials[(size_t)blockIdx.x * 2] = sa[0];
        partials[(size_t)blockIdx.x * 2 + 1] = sb[0];
    }
}

/* Channel ch's totals: parts 0, 1, ... in order. */
static __device__ void parts_total(const double *partials, int ch, int parts, double *a,
                                   double *b)
{
    const double *pp = partials + (size_t)ch * parts * 2;
    double ta = 0.0, tb = 0.0;
    for (int p = 0; p < parts; p++) {
        ta += pp[2 * p];
        tb += pp[2 * p + 1];
    }
    *a = ta;
    *b = tb;
}

/* Channel ch's batch statistics from its parts (element.h's moments and
 * invstd): what bn_stat_final and bn_train_apply both compute, so both
 * get the same floats. var is the double the running update takes. */
struct bn_stats {
    float mean, invstd;
    double var;
};

static __device__ bn_stats channel_stats(const double *partials, int ch, int parts, double count,
                                         float eps)
{
    double sum, sum_sq, mean, var;
    parts_total(partials, ch, parts, &sum, &sum_sq);
    sl_bn_batch_moments(sum, sum_sq, count, &mean, &var);
    return {(float)mean, sl_bn_batch_invstd(var, eps), var};
}

/* Channel ch's saved statistics, and its running ones when they are kept. */
static __device__ void channel_stats_store(const bn_stats &st, int ch, double count,
                                           float *save_mean, float *save_invstd,
                                           float *running_mean, float *running_var,
                                           float momentum)
{
    save_mean[ch] = st.mean;
    save_invstd[ch] = st.invstd;
    if (running_mean)
        sl_bn_running_update(&running_mean[ch], &running_var[ch], st.mean, st.var, count,
                             momentum);
}

/* In the fused kernels, whether this thread writes plane's channel's
 * results: thread 0 of the block of the channel's first plane (image 0)
 * and first range (y 0), which every channel has exactly one of. */
static __device__ inline bool channel_writer(size_t plane, int c)
{
    return plane < (size_t)c && blockIdx.y == 0 && threadIdx.x == 0;
}

static __global__ void bn_stat_final(int c, int parts, double count, const double *partials,
                                     float *save_mean, float *save_invstd, float *running_mean,
                                     float *running_var, float momentum, float eps)
{
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= c)
        return;
    channel_stats_store(channel_stats(partials, ch, parts, count, eps), ch, count, save_mean,
                        save_invstd, running_mean, running_var, momentum);
}

/* BatchNorm's output, and with RELU the ReLU's after it (batchnorm_relu_*:
 * the ReLU's own element rule on the normalised value). */
template <bool RELU>
static __device__ inline float bn_out(float x, float m, float is, float g, float b)
{
    return RELU ? sl_bn_relu_out(x, m, is, g, b) : sl_bn_normalise(x, m, is, g, b);
}

/* The gradient at BatchNorm's output: dy itself, or with RELU dy at the
 * ReLU's output through the ReLU's rule on the output recomputed from x
 * (sl_bn_relu_dy), so no read of that output. */
template <bool RELU>
static __device__ inline float bn_dy(float dy, float x, float m, float is, float g, float b)
{
    return RELU ? sl_bn_relu_dy(dy, x, m, is, g, b) : dy;
}

/* One plane's y = bn_out(x) with its channel's constants. */
template <bool RELU>
static __device__ inline void normalise_plane(size_t plane, int hw, const float *x, float *y,
                                              float m, float is, float g, float b)
{
    const float *xp = x + plane * (size_t)hw;
    float *yp = y + plane * (size_t)hw;
    PLANE_VALUES(j, hw)
    yp[j] = bn_out<RELU>(xp[j], m, is, g, b);
}

/* y = sl_bn_normalise(x), the expression of train, apply and infer on both
 * devices (then ReLU's with RELU); invstd from var when var is not NULL
 * (eval). */
template <bool RELU>
static __global__ void bn_apply(size_t planes, int c, int hw, const float *x, const float *gamma,
                                const float *beta, const float *mean, const float *invstd,
                                const float *var, float eps, float *y)
{
    PLANES(plane, planes)
    {
        /* the plane's channel and constants once, not per value */
        int ch = (int)(plane % (size_t)c);
        float m = mean[ch], is = var ? sl_bn_running_invstd(var[ch], eps) : invstd[ch];
        normalise_plane<RELU>(plane, hw, x, y, m, is, sl_bn_gamma(gamma, ch),
                              sl_bn_beta(beta, ch));
    }
}

/* The training forward's statistics and normalise in one kernel (the
 * switch bn_fused, SL_CUDA_BN_FUSED=on): every block of a plane adds its
 * channel's parts itself with bn_stat_final's channel_stats (the same
 * floats in every block and in bn_stat_final), and the block of the
 * channel's first plane (channel_writer) writes the saved statistics and
 * the running ones. No block reads what another
 * writes, and one launch a layer fewer: bn_stat_final ran on one or a few
 * blocks for 6 us (the stem, ncu 2026-11-24), a ResNet-152 step has 155
 * of them. */
template <bool RELU>
static __global__ void bn_train_apply(size_t planes, int c, int hw, int parts, double count,
                                      const double *partials, const float *x,
                                      const float *gamma, const float *beta, float *save_mean,
                                      float *save_invstd, float *running_mean,
                                      float *running_var, float momentum, float eps, float *y)
{
    PLANES(plane, planes)
    {
        int ch = (int)(plane % (size_t)c);
        bn_stats st = channel_stats(partials, ch, parts, count, eps);
        if (channel_writer(plane, c))
            channel_stats_store(st, ch, count, save_mean, save_invstd, running_mean, running_var,
                                momentum);
        normalise_plane<RELU>(plane, hw, x, y, st.mean, st.invstd, sl_bn_gamma(gamma, ch),
                              sl_bn_beta(beta, ch));
    }
}

/* bn_apply four values at a time (float4 loads and stores) where hw is a
 * multiple of 4 and x and y are 16-byte aligned (vec_ok): the same
 * element rule on each value, so the same bits. ResNet's planes of 14²
 * gave a thread one value to load and store, so a multiprocessor had a
 * few kilobytes in flight; four times as many per thread now. */
template <bool RELU>
static __global__ void bn_apply4(size_t planes, int c, int hw4, const float4 *x,
                                 const float *gamma, const float *beta, const float *mean,
                                 const float *invstd, const float *var, float eps, float4 *y)
{
    PLANES(plane, planes)
    {
        int ch = (int)(plane % (size_t)c);
        float m = mean[ch], is = var ? sl_bn_running_invstd(var[ch], eps) : invstd[ch];
        float g = sl_bn_gamma(gamma, ch), b = sl_bn_beta(beta, ch);
        const float4 *xp = x + plane * (size_t)hw4;
        float4 *yp = y + plane * (size_t)hw4;
        PLANE_VALUES(j, hw4)
        {
            float4 v = xp[j];
            v.x = bn_out<RELU>(v.x, m, is, g, b);
            v.y = bn_out<RELU>(v.y, m, is, g, b);
            v.z = bn_out<RELU>(v.z, m, is, g, b);
            v.w = bn_out<RELU>(v.w, m, is, g, b);
            yp[j] = v;
        }
    }
}

/* Whether the plane kernels may take hw's values four at a time: hw a
 * multiple of 4, every array 16-byte aligned (NULL ones aside), and the
 * instance's switch on (SL_CUDA_BN_VEC). */
static bool vec_ok(const sl_cuda_state *s, int hw, const void *a, const void *b,
                   const void *c = NULL)
{
    return s->bn_vec && hw % 4 == 0 && sl_cuda_aligned16(a, b, c);
}

static void launch_apply(sl_cuda_state *s, int n, int c, int hw, const float *x,
                         const float *gamma, const float *beta, const float *mean,
                         const float *invstd, const float *var, float eps, float *y,
                         bool relu = false)
{
    if (n <= 0 || c <= 0 || hw <= 0)
        return; /* no values, and no empty block to launch */
    size_t planes = (size_t)n * c;
    dim3 grid, block;
    if (vec_ok(s, hw, x, y)) {
        sl_cuda_plane_grid(planes, hw / 4, &grid, &block);
        (relu ? bn_apply4<true> : bn_apply4<false>)<<<grid, block, 0, s->stream>>>(
            planes, c, hw / 4, (const float4 *)x, gamma, beta, mean, invstd, var, eps,
            (float4 *)y);
        SL_CUDA_LAUNCHED(s);
        return;
    }
    sl_cuda_plane_grid(planes, hw, &grid, &block);
    (relu ? bn_apply<true> : bn_apply<false>)<<<grid, block, 0, s->stream>>>(
        planes, c, hw, x, gamma, beta, mean, invstd, var, eps, y);
    SL_CUDA_LAUNCHED(s);
}

/* The partial sums of forward and backward: c * parts pairs of doubles. */
extern "C" size_t sl_cuda_batchnorm_forward_workspace_bytes(const sl_backend *be, int n, int c,
                                                            int hw)
{
    (void)be;
    return sl_bn_grid_partials_bytes(n, c, hw);
}

static void forward_train(const sl_exec *ex, int n, int c, int hw, const float *x,
                          const float *gamma, const float *beta, float *y, float *save_mean,
                          float *save_invstd, float *running_mean, float *running_var,
                          float momentum, float eps, void *ws, bool relu)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    sl_bn_grid g = sl_bn_grid_for(n, c, hw);
    double *partials = (double *)ws; /* planned: forward_workspace_bytes */
    bn_stat_parts<<<(unsigned)c * (unsigned)g.parts, BN_THREADS, 0, s->stream>>>(n, c, hw, g, x,
                                                                                 partials);
    SL_CUDA_LAUNCHED(s);
    if (s->bn_fused && n > 0 && hw > 0) {
        size_t planes = (size_t)n * c;
        dim3 grid, block;
        sl_cuda_plane_grid(planes, hw, &grid, &block);
        (relu ? bn_train_apply<true> : bn_train_apply<false>)<<<grid, block, 0, s->stream>>>(
            planes, c, hw, g.parts, (double)n * hw, partials, x, gamma, beta, save_mean,
            save_invstd, running_mean, running_var, momentum, eps, y);
        SL_CUDA_LAUNCHED(s);
        return;
    }
    bn_stat_final<<<(c + 255) / 256, 256, 0, s->stream>>>(c, g.parts, (double)n * hw, partials,
                                                           save_mean, save_invstd, running_mean,
                                                           running_var, momentum, eps);
    SL_CUDA_LAUNCHED(s);
    launch_apply(s, n, c, hw, x, gamma, beta, save_mean, save_invstd, NULL, 0.0f, y, relu);
}

extern "C" void sl_cuda_batchnorm_forward_train(const sl_exec *ex, int n, int c, int hw,
                                                const float *x, const float *gamma,
                                                const float *beta, float *y, float *save_mean,
                                                float *save_invstd, float *running_mean,
                                                float *running_var, float momentum, float eps,
                                                void *ws)
{
    forward_train(ex, n, c, hw, x, gamma, beta, y, save_mean, save_invstd, running_mean,
                  running_var, momentum, eps, ws, false);
}

extern "C" void sl_cuda_batchnorm_relu_forward_train(const sl_exec *ex, int n, int c, int hw,
                                                     const float *x, const float *gamma,
                                                     const float *beta, float *y,
                                                     float *save_mean, float *save_invstd,
                                                     float *running_mean, float *running_var,
                                                     float momentum, float eps, void *ws)
{
    forward_train(ex, n, c, hw, x, gamma, beta, y, save_mean, save_invstd, running_mean,
                  running_var, momentum, eps, ws, true);
}

extern "C" void sl_cuda_batchnorm_forward_apply(const sl_exec *ex, int n, int c, int hw,
                                                const float *x, const float *gamma,
                                                const float *beta, const float *mean,
                                                const float *invstd, float *y)
{
    launch_apply(sl_cuda_ex(ex), n, c, hw, x, gamma, beta, mean, invstd, NULL, 0.0f, y);
}

extern "C" void sl_cuda_batchnorm_relu_forward_apply(const sl_exec *ex, int n, int c, int hw,
                                                     const float *x, const float *gamma,
                                                     const float *beta, const float *mean,
                                                     const float *invstd, float *y)
{
    launch_apply(sl_cuda_ex(ex), n, c, hw, x, gamma, beta, mean, invstd, NULL, 0.0f, y, true);
}

/* Frozen BatchNorm: the running statistics as the saved ones, invstd by
 * bn_apply's own expression. */
static __global__ void bn_frozen_stats(int c, const float *running_mean,
                                       const float *running_var, float eps, float *save_mean,
                                       float *save_invstd)
{
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch < c) {
        save_mean[ch] = running_mean[ch];
        save_invstd[ch] = sl_bn_running_invstd(running_var[ch], eps);
    }
}

extern "C" void sl_cuda_batchnorm_forward_infer(const sl_exec *ex, int n, int c, int hw,
                                                const float *x, const float *gamma,
                                                const float *beta, const float *running_mean,
                                                const float *running_var, float eps, float *y,
                                                float *save_mean, float *save_invstd)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    if (save_mean) {
        bn_frozen_stats<<<(c + 255) / 256, 256, 0, s->stream>>>(c, running_mean, running_var, eps,
                                                                save_mean, save_invstd);
        SL_CUDA_LAUNCHED(s);
        launch_apply(s, n, c, hw, x, gamma, beta, save_mean, save_invstd, NULL, 0.0f, y);
        return;
    }
    launch_apply(s, n, c, hw, x, gamma, beta, running_mean, NULL, running_var, eps, y);
}

/* Partial sums of dy and dy * (x - mean), in the order of bn_stat_parts
 * (dy through the ReLU's rule with RELU, bn_dy). */
template <bool RELU>
static __global__ void __launch_bounds__(BN_THREADS)
    bn_grad_parts(int n, int c, int hw, sl_bn_grid g, const float *x, const float *dy,
                  const float *gamma, const float *beta, const float *mean,
                  const float *invstd, double *partials)
{
    __shared__ double sa[BN_THREADS], sb[BN_THREADS];
    int ch = (int)(blockIdx.x / (unsigned)g.parts);
    float m = mean[ch];
    float is = RELU ? invstd[ch] : 0.0f, gm = RELU ? sl_bn_gamma(gamma, ch) : 0.0f;
    float bt = RELU ? sl_bn_beta(beta, ch) : 0.0f;
    double mu = m;
    double s = 0.0, p = 0.0;
    for_part_values(n, c, hw, g, [&](size_t k) {
        float d = bn_dy<RELU>(dy[k], x[k], m, is, gm, bt);
        s += (double)d;
        p += sl_bn_dy_xc(d, x[k], mu);
    });
    block_pair_sum(s, p, sa, sb);
    if (threadIdx.x == 0) {
        partials[(size_t)blockIdx.x * 2] = sa[0];
        partials[(size_t)blockIdx.x * 2 + 1] = sb[0];
    }
}

/* Channel ch's sums of dy and dy * xhat from its parts, and the means
 * bn_dx takes (sl_bn_grad_means): what bn_grad_final and bn_final_dx both
 * compute. */
struct bn_grad {
    double s_dy, s_dyxhat;
    float mdy, mdyx;
};

static __device__ bn_grad channel_grad(const double *partials, int ch, int parts, double count,
                                       float invstd, int frozen)
{
    bn_grad gr;
    double s_dyx;
    parts_total(partials, ch, parts, &gr.s_dy, &s_dyx);
    gr.s_dyxhat = s_dyx * (double)invstd;
    sl_bn_grad_means(gr.s_dy, gr.s_dyxhat, count, frozen, &gr.mdy, &gr.mdyx);
    return gr;
}

/* The parameter gradients accumulate channel ch's sums. */
static __device__ void channel_param_grads(const bn_grad &gr, int ch, float *dgamma, float *dbeta)
{
    if (dbeta)
        dbeta[ch] += (float)gr.s_dy;
    if (dgamma)
        dgamma[ch] += (float)gr.s_dyxhat;
}

static __global__ void bn_grad_final(int c, int parts, double count, const double *partials,
                                     const float *invstd, int frozen, float *means, float *dgamma,
                                     float *dbeta)
{
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= c)
        return;
    bn_grad gr = channel_grad(partials, ch, parts, count, invstd[ch], frozen);
    means[ch] = gr.mdy;
    means[c + ch] = gr.mdyx;
    channel_param_grads(gr, ch, dgamma, dbeta);
}

/* One plane's input gradient with its channel's constants (g and b:
 * gamma and beta, which the RELU mask reads). */
template <bool RELU>
static __device__ inline void dx_plane(size_t plane, int hw, const float *x, const float *dy,
                                       float m, float is, float g, float b, float mdy,
                                       float mdyx, float *dx, int accumulate)
{
    size_t base = plane * (size_t)hw;
    float scale = g * is;
    PLANE_VALUES(j, hw)
    {
        float xv = x[base + j];
        float d = bn_dy<RELU>(dy[base + j], xv, m, is, g, b);
        sl_put(&dx[base + j], sl_bn_dx(xv, d, m, is, scale, mdy, mdyx), accumulate);
    }
}

template <bool RELU>
static __global__ void bn_dx(size_t planes, int c, int hw, const float *x, const float *dy,
                             const float *gamma, const float *beta, const float *mean,
                             const float *invstd, const float *means, float *dx, int accumulate)
{
    PLANES(plane, planes)
    {
        int ch = (int)(plane % (size_t)c);
        dx_plane<RELU>(plane, hw, x, dy, mean[ch], invstd[ch], sl_bn_gamma(gamma, ch),
                       RELU ? sl_bn_beta(beta, ch) : 0.0f, means[ch], means[c + ch], dx,
                       accumulate);
    }
}

/* bn_dx four values at a time (vec_ok: hw a multiple of 4, x, dy and dx
 * 16-byte aligned): the same element rules and sl_put, value by value
 * (on the four old values where accumulating), so the same bits. */
template <bool RELU>
static __global__ void bn_dx4(size_t planes, int c, int hw4, const float4 *x, const float4 *dy,
                              const float *gamma, const float *beta, const float *mean,
                              const float *invstd, const float *means, float4 *dx, int accumulate)
{
    PLANES(plane, planes)
    {
        int ch = (int)(plane % (size_t)c);
        float m = mean[ch], is = invstd[ch], g = sl_bn_gamma(gamma, ch);
        float b = RELU ? sl_bn_beta(beta, ch) : 0.0f;
        float mdy = means[ch], mdyx = means[c + ch], scale = g * is;
        size_t base = plane * (size_t)hw4;
        PLANE_VALUES(j, hw4)
        {
            /* dx_plane's rule for one value */
            auto rule = [&](float xv, float dv) {
                return sl_bn_dx(xv, bn_dy<RELU>(dv, xv, m, is, g, b), m, is, scale, mdy, mdyx);
            };
            float4 xv = x[base + j], d = dy[base + j];
            float4 o = accumulate ? dx[base + j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            sl_put(&o.x, rule(xv.x, d.x), accumulate);
            sl_put(&o.y, rule(xv.y, d.y), accumulate);
            sl_put(&o.z, rule(xv.z, d.z), accumulate);
            sl_put(&o.w, rule(xv.w, d.w), accumulate);
            dx[base + j] = o;
        }
    }
}

/* bn_grad_final and bn_dx in one kernel (bn_fused): every block of a
 * plane adds its channel's parts and forms the means itself with
 * bn_grad_final's channel_grad (the same floats in every block), and the
 * block of the channel's first plane (channel_writer) adds the parameter
 * gradients. */
template <bool RELU>
static __global__ void bn_final_dx(size_t planes, int c, int hw, int parts, double count,
                                   const double *partials, const float *x, const float *dy,
                                   const float *gamma, const float *beta, const float *mean,
                                   const float *invstd, int frozen, float *dx, int accumulate,
                                   float *dgamma, float *dbeta)
{
    PLANES(plane, planes)
    {
        int ch = (int)(plane % (size_t)c);
        float m = mean[ch], is = invstd[ch];
        bn_grad gr = channel_grad(partials, ch, parts, count, is, frozen);
        if (channel_writer(plane, c))
            channel_param_grads(gr, ch, dgamma, dbeta);
        dx_plane<RELU>(plane, hw, x, dy, m, is, sl_bn_gamma(gamma, ch),
                       RELU ? sl_bn_beta(beta, ch) : 0.0f, gr.mdy, gr.mdyx, dx, accumulate);
    }
}

/* The partial sums, then the per-channel means of dy and dy * xhat
 * (2c floats after the doubles, so both stay aligned). */
extern "C" size_t sl_cuda_batchnorm_backward_workspace_bytes(const sl_backend *be, int n, int c,
                                                             int hw)
{
    (void)be;
    return sl_bn_grid_partials_bytes(n, c, hw) + 2 * (size_t)c * sizeof(float);
}

static void backward(const sl_exec *ex, int n, int c, int hw, const float *x, const float *dy,
                     const float *gamma, const float *beta, const float *save_mean,
                     const float *save_invstd, float *dx, int accumulate, float *dgamma,
                     float *dbeta, int frozen, void *ws, bool relu)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    sl_bn_grid g = sl_bn_grid_for(n, c, hw);
    double *partials = (double *)ws; /* planned: backward_workspace_bytes */
    float *means = (float *)((char *)ws + sl_bn_grid_partials_bytes(n, c, hw));
    unsigned blocks = (unsigned)c * (unsigned)g.parts;
    (relu ? bn_grad_parts<true> : bn_grad_parts<false>)<<<blocks, BN_THREADS, 0, s->stream>>>(
        n, c, hw, g, x, dy, gamma, beta, save_mean, save_invstd, partials);
    SL_CUDA_LAUNCHED(s);
    if (s->bn_fused && dx && n > 0 && hw > 0) {
        size_t planes = (size_t)n * c;
        dim3 grid, block;
        sl_cuda_plane_grid(planes, hw, &grid, &block);
        (relu ? bn_final_dx<true> : bn_final_dx<false>)<<<grid, block, 0, s->stream>>>(
            planes, c, hw, g.parts, (double)n * hw, partials, x, dy, gamma, beta, save_mean,
            save_invstd, frozen, dx, accumulate, dgamma, dbeta);
        SL_CUDA_LAUNCHED(s);
        return;
    }
    bn_grad_final<<<(c + 255) / 256, 256, 0, s->stream>>>(c, g.parts, (double)n * hw, partials,
                                                           save_invstd, frozen, means, dgamma,
                                                           dbeta);
    SL_CUDA_LAUNCHED(s);
    if (!dx || n <= 0 || hw <= 0)
        return; /* no values, and no empty block to launch */
    size_t planes = (size_t)n * c;
    dim3 grid, block;
    if (vec_ok(s, hw, x, dy, dx)) {
        sl_cuda_plane_grid(planes, hw / 4, &grid, &block);
        (relu ? bn_dx4<true> : bn_dx4<false>)<<<grid, block, 0, s->stream>>>(
            planes, c, hw / 4, (const float4 *)x, (const float4 *)dy, gamma, beta, save_mean,
            save_invstd, means, (float4 *)dx, accumulate);
        SL_CUDA_LAUNCHED(s);
        return;
    }
    sl_cuda_plane_grid(planes, hw, &grid, &block);
    (relu ? bn_dx<true> : bn_dx<false>)<<<grid, block, 0, s->stream>>>(
        planes, c, hw, x, dy, gamma, beta, save_mean, save_invstd, means, dx, accumulate);
    SL_CUDA_LAUNCHED(s);
}

extern "C" void sl_cuda_batchnorm_backward(const sl_exec *ex, int n, int c, int hw, const float *x,
                                           const float *dy, const float *gamma,
                                           const float *save_mean, const float *save_invstd,
                                           float *dx, int accumulate, float *dgamma, float *dbeta,
                                           int frozen, void *ws)
{
    backward(ex, n, c, hw, x, dy, gamma, NULL, save_mean, save_invstd, dx, accumulate, dgamma,
             dbeta, frozen, ws, false);
}

extern "C" void sl_cuda_batchnorm_relu_backward(const sl_exec *ex, int n, int c, int hw,
                                                const float *x, const float *dy,
                                                const float *gamma, const float *beta,
                                                const float *save_mean, const float *save_invstd,
                                                float *dx, int accumulate, float *dgamma,
                                                float *dbeta, int frozen, void *ws)
{
    backward(ex, n, c, hw, x, dy, gamma, beta, save_mean, save_invstd, dx, accumulate, dgamma,
             dbeta, frozen, ws, true);
}
