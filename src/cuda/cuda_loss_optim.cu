/*
 * cuda_loss_optim.cu — softmax cross-entropy and the optimizer updates on
 * the GPU (run stage), with the CPU backend's arithmetic (cpu_loss_optim.c)
 * so both devices follow PyTorch's rules the same way.
 */
#include <math.h>

#include "cuda/cuda_common.h"

/* One thread per row: gradient row, and the row's loss and hit. */
__global__ void xent_rows(int n, int classes, const float *logits, const int *labels,
                          float *dlogits, double *row_loss, int *row_hit)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < n; r += gridDim.x * blockDim.x) {
        const float *x = logits + (size_t)r * classes;
        float mx = x[0];
        int arg = 0;
        for (int j = 1; j < classes; j++)
            if (x[j] > mx) {
                mx = x[j];
                arg = j;
            }
        double s = 0.0, sd = 0.0;
        for (int j = 0; j < classes; j++) {
            float e = expf(x[j] - mx);
            if (dlogits)
                dlogits[(size_t)r * classes + j] = e;
            s += e;
            sd += exp((double)x[j] - (double)mx);
        }
        if (dlogits) {
            float inv_s = (float)(1.0 / s), inv_n = 1.0f / (float)n;
            float *g = dlogits + (size_t)r * classes;
            for (int j = 0; j < classes; j++)
                g[j] = g[j] * inv_s * inv_n;
            g[labels[r]] -= inv_n;
        }
        row_loss[r] = log(sd) - ((double)x[labels[r]] - (double)mx);
        row_hit[r] = arg == labels[r];
    }
}

/* Rows summed in order by one thread. */
__global__ void xent_total(int n, const double *row_loss, const int *row_hit, float *out)
{
    double t = 0.0;
    int hits = 0;
    for (int r = 0; r < n; r++) {
        t += row_loss[r];
        hits += row_hit[r];
    }
    out[0] = n > 0 ? (float)(t / n) : 0.0f;
    ((int *)out)[1] = hits;
}

/* Row losses (double), labels, row hits and the two results. */
extern "C" size_t sl_cuda_softmax_xent_workspace(const sl_backend *be, int n)
{
    (void)be;
    return (size_t)n * (sizeof(double) + 2 * sizeof(int)) + 64;
}

extern "C" void sl_cuda_softmax_xent(const sl_exec *ex, int n, int classes, const float *logits,
                                     const int *labels, float *dlogits, float *loss, int *correct, void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    if (n <= 0) { /* as the CPU: no rows, loss 0 (and no empty grid to launch) */
        if (loss)
            *loss = 0.0f;
        if (correct)
            *correct = 0;
        return;
    }
    char *base = (char *)ws; /* planned: see sl_cuda_softmax_xent_workspace */
    double *row_loss = (double *)base;
    int *d_labels = (int *)(base + (size_t)n * sizeof(double));
    int *row_hit = d_labels + n;
    float *out = (float *)(row_hit + n + (n & 1));
    SL_CUDA_CHECK(s, cudaMemcpyAsync(d_labels, labels, (size_t)n * sizeof(int), cudaMemcpyHostToDevice,
                                  s->stream));
    xent_rows<<<(n + 127) / 128, 128, 0, s->stream>>>(n, classes, logits, d_labels, dlogits,
                                                       row_loss, row_hit);
    SL_CUDA_LAUNCHED(s);
    xent_total<<<1, 1, 0, s->stream>>>(n, row_loss, row_hit, out);
    SL_CUDA_LAUNCHED(s);
    float host[2] = {0.0f, 0.0f}; /* defined even when a copy fails (recorded) */
    SL_CUDA_CHECK(s, cudaMemcpyAsync(host, out, sizeof host, cudaMemcpyDeviceToHost, s->stream));
    SL_CUDA_CHECK(s, cudaStreamSynchronize(s->stream));
    if (loss)
        *loss = host[0];
    if (correct)
        memcpy(correct, &host[1], sizeof(int));
}

__global__ void sgd_k(size_t n, float *w, const float *g, float *mom, float lr, float momentum,
                      float wd, int nesterov, int first)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float d = g[i];
        if (wd != 0.0f)
            d = d + wd * w[i];
        if (momentum != 0.0f) {
            float buf = first ? d : momentum * mom[i] + d;
            mom[i] = buf;
            d = nesterov ? d + momentum * buf : buf;
        }
        w[i] = w[i] - lr * d;
    }
}

__global__ void adam_k(size_t n, float *w, const float *g, float *m, float *v, float step_size,
                       float bc2_sqrt, float beta1, float beta2, float eps, float wd)
{
    float one_b1 = 1.0f - beta1, one_b2 = 1.0f - beta2;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float d = g[i];
        if (wd != 0.0f)
            d = d + wd * w[i];
        float mi = beta1 * m[i] + one_b1 * d;
        float vi = beta2 * v[i] + one_b2 * d * d;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        w[i] = w[i] - step_size * mi / denom;
    }
}

extern "C" void sl_cuda_sgd_update(const sl_exec *ex, size_t count, float *w, const float *g,
                                   float *mom, float lr, float momentum, float weight_decay,
                                   int nesterov, int first)
{
    SL_CUDA_LAUNCH(ex, sgd_k, count, count, w, g, mom, lr, momentum, weight_decay, nesterov,
                   first);
}

extern "C" void sl_cuda_adam_update(const sl_exec *ex, size_t count, float *w, const float *g,
                                    float *m, float *v, float lr, float beta1, float beta2,
                                    float eps, float weight_decay, int64_t step)
{
    double bc1 = 1.0 - pow((double)beta1, (double)step);
    double bc2 = 1.0 - pow((double)beta2, (double)step);
    SL_CUDA_LAUNCH(ex, adam_k, count, count, w, g, m, v, (float)((double)lr / bc1),
                   (float)sqrt(bc2), beta1, beta2, eps, weight_decay);
}
