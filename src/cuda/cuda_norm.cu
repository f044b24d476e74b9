/*
 * cuda_norm.cu — BatchNorm on the GPU (run stage). Written as our own
 * kernels rather than cuDNN's batch-norm calls, for two guarantees cuDNN
 * does not give: the training forward and the re-forward with saved
 * statistics run the same normalising arithmetic (so a re-forward repeats
 * the forward bit for bit), and every reduction runs in a fixed order
 * (one block per channel, a fixed tree), so results do not depend on
 * scheduling. Statistics are accumulated in double as on the CPU.
 */
#include "cuda/cuda_common.h"

#define BN_THREADS 256

/* Sum over channel ch of f(i) for the M = n*hw elements, one block. */
template <typename F>
__device__ double block_channel_sum(int n, int c, int hw, int ch, F f, double *shared)
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

__global__ void bn_stats(int n, int c, int hw, const float *x, float *save_mean,
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
        save_invstd[ch] = (float)(1.0 / sqrt(var + (double)eps));
        if (running_mean) {
            double unbiased = m > 1 ? var * m / (m - 1) : var;
            running_mean[ch] = (1.0f - momentum) * running_mean[ch] + momentum * mf;
            running_var[ch] = (1.0f - momentum) * running_var[ch] + momentum * (float)unbiased;
        }
    }
}

/* The one normalising expression, shared by train, apply and infer. */
__global__ void bn_apply(size_t total, int c, int hw, const float *x, const float *gamma,
                         const float *beta, const float *mean, const float *invstd,
                         const float *var, float eps, float *y)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int ch = (int)((i / hw) % c);
        float is = var ? 1.0f / sqrtf(var[ch] + eps) : invstd[ch];
        float xhat = (x[i] - mean[ch]) * is;
        y[i] = xhat * (gamma ? gamma[ch] : 1.0f) + (beta ? beta[ch] : 0.0f);
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
__global__ void bn_frozen_stats(int c, const float *running_mean, const float *running_var,
                                float eps, float *save_mean, float *save_invstd)
{
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch < c) {
        save_mean[ch] = running_mean[ch];
        save_invstd[ch] = 1.0f / sqrtf(running_var[ch] + eps);
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

/* Per channel: sum(dy) and sum(dy * xhat) into sums[2c]; parameter
 * gradients accumulate. */
__global__ void bn_grad_sums(int n, int c, int hw, const float *x, const float *dy,
                             const float *mean, const float *invstd, float *sums, float *dgamma,
                             float *dbeta)
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
        sums[ch] = (float)s_dy;
        sums[c + ch] = (float)s_dyxhat;
        if (dbeta)
            dbeta[ch] += (float)s_dy;
        if (dgamma)
            dgamma[ch] += (float)s_dyxhat;
    }
}

__global__ void bn_dx(size_t total, int c, int hw, float m, const float *x, const float *dy,
                      const float *gamma, const float *mean, const float *invstd, const float *sums,
                      float *dx, int accumulate, int frozen)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int ch = (int)((i / hw) % c);
        float is = invstd[ch];
        float scale = (gamma ? gamma[ch] : 1.0f) * is;
        /* frozen: constant statistics, their terms vanish (as on the CPU) */
        float mean_dy = frozen ? 0.0f : sums[ch] / m;
        float mean_dyxhat = frozen ? 0.0f : sums[c + ch] / m;
        float xhat = (x[i] - mean[ch]) * is;
        float g = scale * (dy[i] - mean_dy - xhat * mean_dyxhat);
        dx[i] = accumulate ? dx[i] + g : g;
    }
}

/* The per-channel sums of dy and dy * xhat. */
extern "C" size_t sl_cuda_batchnorm_backward_workspace(const sl_backend *be, int c)
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
    float *sums = (float *)ws; /* 2c per-channel sums, planned */
    bn_grad_sums<<<c, BN_THREADS, 0, s->stream>>>(n, c, hw, x, dy, save_mean, save_invstd, sums,
                                                   dgamma, dbeta);
    SL_CUDA_LAUNCHED(s);
    if (!dx)
        return;
    size_t total = (size_t)n * c * hw;
    bn_dx<<<sl_cuda_blocks(total), 256, 0, s->stream>>>(total, c, hw, (float)((double)n * hw), x,
                                                         dy, gamma, save_mean, save_invstd, sums,
                                                         dx, accumulate, frozen);
    SL_CUDA_LAUNCHED(s);
}
