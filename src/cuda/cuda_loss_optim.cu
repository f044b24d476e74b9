/*
 * cuda_loss_optim.cu — softmax cross-entropy and the optimizer updates on
 * the GPU (run stage), and the gradient norm's sum of squares. The per-row and per-parameter rules are
 * base/element.h's, the ones cpu_loss_optim.c calls, so both devices follow
 * PyTorch's rules the same way; here only launch geometry and the in-order
 * sum of the row losses.
 */
#include <string.h>

#include "base/element.h"
#include "cuda/cuda_common.h"

/* One thread per row: gradient row, and the row's loss and hit. */
static __global__ void xent_rows(int n, int classes, const float *logits, const int *labels,
                                 float *dlogits, double *row_loss, int *row_hit)
{
    float inv_n = 1.0f / (float)n;
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < n; r += gridDim.x * blockDim.x) {
        const float *x = logits + (size_t)r * classes;
        int arg;
        float mx = sl_row_max(x, classes, &arg);
        if (dlogits)
            sl_xent_row_grad(x, classes, mx, labels[r], inv_n, dlogits + (size_t)r * classes);
        row_loss[r] = sl_xent_row_loss(x, classes, mx, labels[r]);
        row_hit[r] = arg == labels[r];
    }
}

/* Rows summed in order by one thread. */
static __global__ void xent_total(int n, const double *row_loss, const int *row_hit, float *out)
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
extern "C" size_t sl_cuda_softmax_xent_workspace_bytes(const sl_backend *be, int n)
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
    char *base = (char *)ws; /* planned: see sl_cuda_softmax_xent_workspace_bytes */
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

/* One thread per row of a language model's loss chunk. */
static __global__ void lm_xent_k(int rows, int vocab, float *logits, const int *labels,
                                 int ignore_index, float scale, int grad, double *row_loss,
                                 int *row_hit)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x)
        sl_lm_xent_row(logits + (size_t)r * vocab, vocab, labels[r], ignore_index, scale, grad,
                       &row_loss[r], &row_hit[r]);
}

extern "C" void sl_cuda_lm_xent(const sl_exec *ex, int rows, int vocab, float *logits,
                                const int *labels, int ignore_index, float scale, int grad,
                                double *row_loss, int *row_hit)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    if (rows <= 0)
        return;
    lm_xent_k<<<(rows + 127) / 128, 128, 0, s->stream>>>(rows, vocab, logits, labels, ignore_index,
                                                         scale, grad, row_loss, row_hit);
    SL_CUDA_LAUNCHED(s);
}

static __global__ void sgd_k(size_t n, float *w, const float *g, float *mom, float lr,
                             float momentum, float wd, int nesterov, int first, float grad_scale)
{
    GRID_STRIDE(i, n) sl_sgd_element(i, w, g, mom, lr, momentum, wd, nesterov, first, grad_scale);
}

static __global__ void adam_k(size_t n, float *w, const float *g, float *m, float *v,
                              sl_adam_step a)
{
    GRID_STRIDE(i, n) sl_adam_element(i, w, g, m, v, &a);
}

extern "C" void sl_cuda_sgd_update(const sl_exec *ex, size_t count, float *w, const float *g,
                                   float *mom, float lr, float momentum, float weight_decay,
                                   int nesterov, int first, float grad_scale)
{
    SL_CUDA_LAUNCH(ex, sgd_k, count, count, w, g, mom, lr, momentum, weight_decay, nesterov,
                   first, grad_scale);
}

extern "C" void sl_cuda_adam_update(const sl_exec *ex, size_t count, float *w, const float *g,
                                    float *m, float *v, float lr, float beta1, float beta2,
                                    float eps, float weight_decay, int decoupled, int64_t step,
                                    float grad_scale)
{
    SL_CUDA_LAUNCH(ex, adam_k, count, count, w, g, m, v,
                   sl_adam_step_of(lr, beta1, beta2, eps, weight_decay, decoupled, step,
                                   grad_scale));
}

/* One thread per slot, striding by the slot count (adjacent threads read
 * adjacent elements): each slot's terms in the CPU's order. */
static __global__ void sum_squares_k(size_t n, const float *x, double *slots)
{
    size_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= SL_SUM_SQUARES_SLOTS)
        return;
    double acc = 0.0;
    for (size_t i = t; i < n; i += SL_SUM_SQUARES_SLOTS)
        acc = sl_square_add(acc, x[i]);
    slots[t] += acc;
}

extern "C" void sl_cuda_sum_squares(const sl_exec *ex, size_t count, const float *x,
                                    double *slots)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    sum_squares_k<<<SL_SUM_SQUARES_SLOTS / 128, 128, 0, s->stream>>>(count, x, slots);
    SL_CUDA_LAUNCHED(s);
}
