/*
 * backend.h — the one interface of compute kernels (the "run" stage).
 *
 * A backend is an instance: this table of functions plus `impl`, the
 * instance's own state (the CPU has none; a CUDA instance holds its stream,
 * cuDNN and cuBLAS handles, convolution algorithm cache and sticky error).
 * A context owns one (net/context.c creates it through sl_backend_create by
 * device); nothing of a backend is process-global, so two contexts on one
 * GPU work independently. Layers (src/layers) call these functions through
 * the instance; src/cpu implements them with OpenBLAS, src/cuda with
 * cuDNN / cuBLAS / cuRAND. Kernels reach their instance through
 * `ex->be`.
 * Kernels are plain functions over raw pointers into planned memory: they
 * never allocate. Where a kernel writes a gradient with respect to an
 * activation it takes `accumulate`: 0 overwrites, 1 adds (a tensor read by
 * several layers gets the sum of their gradients). Gradients with respect
 * to parameters are always added to (the executor zeroes them first).
 *
 * Every kernel must be deterministic: the same inputs give the same bits,
 * which is what makes re-forward exact.
 */
#ifndef SL_BACKEND_H
#define SL_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "sublinear.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Convolution geometry: input n x c x h x w, output n x k x oh x ow. */
typedef struct sl_conv_desc {
    int n, c, h, w;
    int k, oh, ow;
    int kh, kw, sh, sw, ph, pw, dh, dw;
    int groups;
} sl_conv_desc;

typedef enum sl_conv_pass { SL_CONV_FWD = 0, SL_CONV_BWD_DATA = 1, SL_CONV_BWD_FILTER = 2 } sl_conv_pass;

/* Pooling geometry: input n x c x h x w, output n x c x oh x ow. */
typedef struct sl_pool_desc {
    int n, c, h, w, oh, ow;
    int kh, kw, sh, sw, ph, pw;
} sl_pool_desc;

typedef struct sl_exec sl_exec; /* per-run state handed to kernels */

typedef struct sl_backend sl_backend;

struct sl_backend {
    const char *name;
    /* 1 when the backend's memory is host memory (the CPU): pointers the
     * library hands out can be read and written directly. */
    int host_memory;
    /* The instance's own state (NULL on the CPU). */
    void *impl;
    /* Frees the instance (impl included); be may be NULL. */
    void (*destroy)(sl_backend *be);

    /* Memory of the backend's device, 64-byte aligned and zeroed; NULL on
     * failure (with the error recorded). free accepts NULL. */
    void *(*alloc)(const sl_backend *be, size_t bytes, const char *what);
    void (*free)(const sl_backend *be, void *p);
    /* Copies between the caller's host memory and device memory. */
    void (*upload)(const sl_exec *ex, void *dst, const void *src, size_t bytes);
    void (*download)(const sl_exec *ex, void *dst, const void *src, size_t bytes);
    /* Waits for queued work; returns SL_OK, or the first failure since the
     * previous call with sl_last_error() set (kernels return nothing: a
     * failing kernel records its error here). */
    sl_status (*sync)(const sl_exec *ex);
    /* Waits for queued work and keeps any failure for the next sync (for
     * timing); NULL where kernels finish before they return (the CPU). */
    void (*wait)(const sl_exec *ex);
    /* Free bytes on the device now, and its size into *total when total
     * is not NULL (NULL on the CPU). */
    size_t (*device_free_bytes)(const sl_backend *be, size_t *total);
    /* The native stream kernels are queued on (a cudaStream_t), for custom
     * layers' own kernels; NULL on the CPU. */
    void *(*native_stream)(const sl_backend *be);

    /* y[M x N] = alpha * op(A) op(B) + beta * y, row-major. */
    void (*gemm)(const sl_exec *ex, int trans_a, int trans_b, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc);

    /* Workspace bytes a convolution pass needs; SIZE_MAX, with the error
     * set, when the backend cannot run this geometry. */
    size_t (*conv2d_workspace_bytes)(const sl_backend *be, const sl_conv_desc *d,
                                     sl_conv_pass pass);
    /* y = conv(x, w) + bias (bias may be NULL). w: k x c/groups x kh x kw. */
    void (*conv2d_forward)(const sl_exec *ex, const sl_conv_desc *d, const float *x,
                           const float *w, const float *bias, float *y, void *ws);
    /* dx (+)= conv_transpose(dy, w). */
    void (*conv2d_backward_data)(const sl_exec *ex, const sl_conv_desc *d, const float *w,
                                 const float *dy, float *dx, int accumulate, void *ws);
    /* dw += corr(x, dy); dbias += sum(dy) over n, oh, ow (dbias may be NULL). */
    void (*conv2d_backward_filter)(const sl_exec *ex, const sl_conv_desc *d, const float *x,
                                   const float *dy, float *dw, float *dbias, void *ws);

    /* Training BatchNorm over n x c x hw: batch mean and 1/sqrt(var+eps)
     * (biased var) into save_mean / save_invstd, y = normalised * gamma +
     * beta. When running_mean is not NULL the running statistics are
     * updated with momentum (unbiased variance), as PyTorch does. */
    void (*batchnorm_forward_train)(const sl_exec *ex, int n, int c, int hw, const float *x,
                                    const float *gamma, const float *beta, float *y,
                                    float *save_mean, float *save_invstd,
                                    float *running_mean, float *running_var,
                                    float momentum, float eps);
    /* y = (x - mean) * invstd * gamma + beta with given statistics (eval
     * mode with running stats turned into invstd by the layer, or
     * re-forward with the saved batch statistics). */
    void (*batchnorm_forward_apply)(const sl_exec *ex, int n, int c, int hw, const float *x,
                                    const float *gamma, const float *beta, const float *mean,
                                    const float *invstd, float *y);
    /* Evaluation: y = (x - running_mean) / sqrt(running_var + eps) * gamma
     * + beta, with invstd computed as 1.0f / sqrtf(var + eps) in float.
     * When save_mean is not NULL (frozen BatchNorm in training) the running
     * mean and that invstd are also written to save_mean / save_invstd, so
     * batchnorm_forward_apply with them repeats y bit for bit. */
    void (*batchnorm_forward_infer)(const sl_exec *ex, int n, int c, int hw, const float *x,
                                    const float *gamma, const float *beta,
                                    const float *running_mean, const float *running_var,
                                    float eps, float *y, float *save_mean, float *save_invstd);
    /* Backward: dx (+)= ..., dgamma += sum(dy * xhat), dbeta += sum(dy);
     * dx may be NULL (parameter gradients only) or alias dy. With frozen 0
     * the backward of normalising with the batch's own statistics; with 1
     * of normalising with constant statistics (frozen BatchNorm: dx = dy *
     * gamma * invstd). ws: batchnorm_backward_workspace_bytes(c) of
     * planned scratch (NULL when that is 0). */
    void (*batchnorm_backward)(const sl_exec *ex, int n, int c, int hw, const float *x,
                               const float *dy, const float *gamma, const float *save_mean,
                               const float *save_invstd, float *dx, int accumulate,
                               float *dgamma, float *dbeta, int frozen, void *ws);
    /* Workspace bytes batchnorm_backward needs for c channels (0: none). */
    size_t (*batchnorm_backward_workspace_bytes)(const sl_backend *be, int c);

    /* Max pooling; argmax (may be NULL in eval) gets the flat h*w index of
     * each window's maximum (first maximum on ties). Padding never wins. */
    void (*maxpool_forward)(const sl_exec *ex, const sl_pool_desc *d, const float *x, float *y,
                            int32_t *argmax);
    void (*maxpool_backward)(const sl_exec *ex, const sl_pool_desc *d, const int32_t *argmax,
                             const float *dy, float *dx, int accumulate);
    /* Average pooling dividing by kh*kw (padding counted). */
    void (*avgpool_forward)(const sl_exec *ex, const sl_pool_desc *d, const float *x, float *y);
    void (*avgpool_backward)(const sl_exec *ex, const sl_pool_desc *d, const float *dy, float *dx,
                             int accumulate);

    /* y = max(x, 0); x and y may alias. */
    void (*relu_forward)(const sl_exec *ex, size_t count, const float *x, float *y);
    /* dx (+)= dy * (y > 0); dx and dy may alias when accumulate is 0. */
    void (*relu_backward)(const sl_exec *ex, size_t count, const float *y, const float *dy,
                          float *dx, int accumulate);

    /* y = x * keep / (1 - p), keep drawn by Philox4x32-10 keyed by seed at
     * counter blocks starting at `counter` (element i uses block
     * counter + i / 4, word i % 4; kept iff word >= p * 2^32). */
    void (*dropout_forward)(const sl_exec *ex, size_t count, const float *x, float *y, float p,
                            uint64_t seed, uint64_t counter);
    void (*dropout_backward)(const sl_exec *ex, size_t count, const float *dy, float *dx,
                             float p, uint64_t seed, uint64_t counter, int accumulate);
    /* dst[j] = uniform in [0, 1) for element e = first + j: word e % 4 of
     * Philox4x32-10 block counter + e / 4 keyed by seed (dropout's words),
     * as (word >> 8) * 2^-24. Custom layers' random numbers. */
    void (*random_uniform)(const sl_exec *ex, size_t count, uint64_t seed, uint64_t counter,
                           uint64_t first, float *dst);

    /* y = a + b (any may alias). */
    void (*add)(const sl_exec *ex, size_t count, const float *a, const float *b, float *y);
    /* dst (+)= src (may alias when accumulate is 0). */
    void (*copy)(const sl_exec *ex, size_t count, const float *src, float *dst, int accumulate);
    void (*fill)(const sl_exec *ex, size_t count, float value, float *dst);

    /* Channel slices for concatenation: for each of n images, dst channels
     * [dst_off, dst_off + c_src) (+)= src channels [src_off, src_off +
     * c_src); both hold hw values per channel. */
    void (*copy_channels)(const sl_exec *ex, int n, int hw, int c_count, const float *src,
                          int src_c, int src_off, float *dst, int dst_c, int dst_off,
                          int accumulate);

    /* Global average pool: y[n*c] = mean of hw values; backward spreads. */
    void (*global_avgpool_forward)(const sl_exec *ex, int nc, int hw, const float *x, float *y);
    void (*global_avgpool_backward)(const sl_exec *ex, int nc, int hw, const float *dy, float *dx,
                                    int accumulate);

    /* y[n x out] += bias broadcast; dbias[out] += column sums of dy. */
    void (*bias_add)(const sl_exec *ex, int rows, int cols, const float *bias, float *y);
    void (*bias_backward)(const sl_exec *ex, int rows, int cols, const float *dy, float *dbias);

    /* Mean softmax cross-entropy of n rows of `classes` logits; writes
     * dlogits = (softmax - onehot) / n, the loss and the count of correct
     * arg-max predictions. labels, loss and correct are host memory; ws
     * is softmax_xent_workspace_bytes(n) of planned scratch (NULL when that
     * is 0). */
    void (*softmax_xent)(const sl_exec *ex, int n, int classes, const float *logits,
                         const int *labels, float *dlogits, float *loss, int *correct,
                         void *ws);
    /* Workspace bytes softmax_xent needs for n rows (0: none). */
    size_t (*softmax_xent_workspace_bytes)(const sl_backend *be, int n);

    /* Optimizer updates over count parameters (PyTorch's rules). */
    void (*sgd_update)(const sl_exec *ex, size_t count, float *w, const float *g, float *mom,
                       float lr, float momentum, float weight_decay, int nesterov, int first);
    void (*adam_update)(const sl_exec *ex, size_t count, float *w, const float *g, float *m,
                        float *v, float lr, float beta1, float beta2, float eps,
                        float weight_decay, int64_t step);
};

/* Per-run state: which backend, how many threads. */
struct sl_exec {
    const sl_backend *be;
    int threads;
};

/* Frees a backend instance (NULL is fine). */
static inline void sl_backend_destroy(sl_backend *be)
{
    if (be)
        be->destroy(be);
}

#ifdef __cplusplus
}
#endif

#endif
