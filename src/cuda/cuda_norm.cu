/*
 * cuda_norm.cu — BatchNorm on the GPU (run stage). Written as our own
 * kernels rather than cuDNN's batch-norm calls, for two guarantees cuDNN
 * does not give: the training forward and the re-forward with saved
 * statistics run the same normalising arithmetic (so a re-forward repeats
 * the forward bit for bit), and every reduction runs in a fixed order
 * (one block per channel, a fixed tree), so results do not depend on
 * scheduling. Statistics are accumulated in double as on the CPU. The
 * element rules (normalise, dx, the running statistics, invstd) are
 * base/element.h's, the ones cpu_norm.c calls; the per-channel block
 * reductions are the GPU's own.
 */
#include "base/element.h"
#include "cuda/cuda_common.h"

#define BN_THREADS 256

/* Sum over channel ch of f(i) for the M = n*hw elements, one block. */
template <typename F>
static __device__ double block_channel_sum(int n, int c, int hw, int ch, F f, double *shared)
{
    double acc = 0.0;
    long long m = (long long)n * hw;
    for (long long i = threadIdx.x; i < m; i += blockDim.x) {
        long long img = i / hw, j = i % hw;
        acc += f(((img * c) + ch) * hw + j);
    }
    shared[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            shared[threadIdx.x] += shared[threadIdx.x + s];
        __syncthreads();
    }
    double total = shared[0];
    __syncthreads();
    return total;
}

static __global__ void bn_stats(int n, int c, int hw, const float *x, float *save_mean,
                                float *save_invstd, float *running_mean, float *running_var,
                                float momentum, float eps)
{
    __shared__ double shared[BN_THREADS];
    int ch = blockIdx.x;
    double m = (double)n * hw;
    double sum = block_channel_sum(n, c, hw, ch, [=] __device__(long long k) { return (double)x[k]; }, shared);
    double mean = sum / m;
    double sq = block_channel_sum(
        n, c, hw, ch,
        [=] __device__(long long k) {
            double d = (double)x[k] - mean;
            return d * d;
        },
        shared);
    if (threadIdx.x == 0) {
        double var = sq / m;
        float mf = (float)mean;
        save_mean[ch] = mf;
        save_invstd[ch] = sl_bn_batch_invstd(var, eps);
        if (running_mean)
            sl_bn_running_update(&running_mean[ch], &running_var[ch], mf, var, m, momentum);
    }
}

/* y = sl_bn_normalise(x), the expression of train, apply and infer on both
 * devices; invstd from var when var is not NULL (eval). */
static __global__ void bn_apply(size_t total, int c, int hw, const float *x, const float *gamma,
                                const float *beta, const float *mean, const float *invstd,
                                const float *var, float eps, float *y)
{
    GRID_STRIDE(i, total)
    {
        int ch = (int)((i / hw) % c);
        float is = var ? sl_bn_running_invstd(var[ch], eps) : invstd[ch];
        y[i] = sl_bn_normalise(x[i], mean[ch], is, sl_bn_gamma(gamma, ch), sl_bn_beta(beta, ch));
    }
}

extern "C" void sl_cuda_batchnorm_forward_train(const sl_exec *ex, int n, int c, int hw,
                                                const float *x, const float *gamma,
                                                const float *beta, float *y, float *save_mean,
                                                float *save_invstd, float *running_mean,
                                                float *running_var, float momentum, float eps)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    bn_stats<<<c, BN_THREADS, 0, s->stream>>>(n, c, hw, x, save_mean, save_invstd, running_mean,
                                               running_var, momentum, eps);
    SL_CUDA_LAUNCHED(s);
    size_t total = (size_t)n * c * hw;
    bn_apply<<<sl_cuda_blocks(total), 256, 0, s->stream>>>(total, c, hw, x, gamma, beta, save_mean,
                                                            save_invstd, NULL, 0.0f, y);
    SL_CUDA_LAUNCHED(s);
}

extern "C" void sl_cuda_batchnorm_forward_apply(const sl_exec *ex, int n, int c, int hw,
                                                const float *x, const float *gamma,
                                                const float *beta, const float *mean,
                                                const float *invstd, float *y)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    size_t total = (size_t)n * c * hw;
    bn_apply<<<sl_cuda_blocks(total), 256, 0, s->stream>>>(total, c, hw, x, gamma, beta, mean,
                                                            invstd, NULL, 0.0f, y);
    SL_CUDA_LAUNCHED(s);
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
    size_t total = (size_t)n * c * hw;
    if (save_mean) {
        bn_frozen_stats<<<(c + 255) / 256, 256, 0, s->stream>>>(c, running_mean, running_var, eps,
                                                                save_mean, save_invstd);
        SL_CUDA_LAUNCHED(s);
        bn_apply<<<sl_cuda_blocks(total), 256, 0, s->stream>>>(
            total, c, hw, x, gamma, beta, save_mean, save_invstd, NULL, 0.0f, y);
        SL_CUDA_LAUNCHED(s);
        return;
    }
    bn_apply<<<sl_cuda_blocks(total), 256, 0, s->stream>>>(total, c, hw, x, gamma, beta,
                                                            running_mean, NULL, running_var, eps, y);
    SL_CUDA_LAUNCHED(s);
}

/* Per channel: the means of dy and dy * xhat into means[2c] (zero when
 * frozen); parameter gradients accumulate. */
static __global__ void bn_grad_sums(int n, int c, int hw, const float *x, const float *dy,
                                    const float *mean, const float *invstd, int frozen,
                                    float *means, float *dgamma, float *dbeta)
{
    __shared__ double shared[BN_THREADS];
    int ch = blockIdx.x;
    double mu = mean[ch];
    double s_dy = block_channel_sum(n, c, hw, ch, [=] __device__(long long k) { return (double)dy[k]; }, shared);
    double s_dyx = block_channel_sum(
        n, c, hw, ch, [=] __device__(long long k) { return (double)dy[k] * ((double)x[k] - mu); },
        shared);
    if (threadIdx.x == 0) {
        double s_dyxhat = s_dyx * (double)invstd[ch];
        sl_bn_grad_means(s_dy, s_dyxhat, (double)n * hw, frozen, &means[ch], &means[c + ch]);
        if (dbeta)
            dbeta[ch] += (float)s_dy;
        if (dgamma)
            dgamma[ch] += (float)s_dyxhat;
    }
}

static __global__ void bn_dx(size_t total, int c, int hw, const float *x, const float *dy,
                             const float *gamma, const float *mean, const float *invstd,
                             const float *means, float *dx, int accumulate)
{
    GRID_STRIDE(i, total)
    {
        int ch = (int)((i / hw) % c);
        float is = invstd[ch];
        float scale = sl_bn_gamma(gamma, ch) * is;
        sl_put(&dx[i], sl_bn_dx(x[i], dy[i], mean[ch], is, scale, means[ch], means[c + ch]),
               accumulate);
    }
}

/* The per-channel means of dy and dy * xhat. */
extern "C" size_t sl_cuda_batchnorm_backward_workspace_bytes(const sl_backend *be, int c)
{
    (void)be;
    return 2 * (size_t)c * sizeof(float);
}

extern "C" void sl_cuda_batchnorm_backward(const sl_exec *ex, int n, int c, int hw, const float *x,
                                           const float *dy, const float *gamma,
                                           const float *save_mean, const float *save_invstd,
                                           float *dx, int accumulate, float *dgamma, float *dbeta,
                                           int frozen, void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    float *means = (float *)ws; /* 2c per-channel means, planned */
    bn_grad_sums<<<c, BN_THREADS, 0, s->stream>>>(n, c, hw, x, dy, save_mean, save_invstd, frozen,
                                                   means, dgamma, dbeta);
    SL_CUDA_LAUNCHED(s);
    if (!dx)
        return;
    size_t total = (size_t)n * c * hw;
    bn_dx<<<sl_cuda_blocks(total), 256, 0, s->stream>>>(total, c, hw, x, dy, gamma, save_mean,
                                                         save_invstd, means, dx, accumulate);
    SL_CUDA_LAUNCHED(s);
}
