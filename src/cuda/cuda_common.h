/*
 * cuda_common.h — internal plumbing of the CUDA backend (run stage on a
 * GPU): the state of one backend instance (its stream, cuDNN and cuBLAS
 * handles, algorithm cache and sticky error; every byte of device memory
 * its kernels use is planned: none allocates), checked calls that
 * record the first failure in that instance instead of exiting, and the
 * prototypes the other src/cuda files implement.
 */
#ifndef SL_CUDA_COMMON_H
#define SL_CUDA_COMMON_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <mutex>

#include "base/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sl_cuda_conv_cache; /* cuda_conv.cu */

/* One CUDA backend instance's own state (sl_backend.impl). */
typedef struct sl_cuda_state {
    cudaStream_t stream;
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    int device;        /* the CUDA device ordinal every call runs on */
    int deterministic; /* deterministic cuDNN algorithms only */
    int tf32;          /* TF32 tensor-core math allowed in convolutions and GEMMs */
    struct sl_cuda_conv_cache *conv_cache; /* descriptors and algorithms per geometry */
    /* the first failure since the last sync: kernels return nothing; the
     * lock guards it (kernels of two networks of one context may record
     * from two threads) */
    std::mutex error_lock;
    int error_set;
    char error_text[768];
} sl_cuda_state;

/* Makes the instance's device current for the calling thread (a thread
 * may run contexts on two GPUs in turn). */
static inline void sl_cuda_bind(const sl_cuda_state *s)
{
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != s->device)
        cudaSetDevice(s->device);
}

/* The instance state behind an exec or a backend, its device made
 * current: every entry to the backend comes through here. */
static inline sl_cuda_state *sl_cuda_of(const sl_backend *be)
{
    sl_cuda_state *s = (sl_cuda_state *)be->impl;
    sl_cuda_bind(s);
    return s;
}
static inline sl_cuda_state *sl_cuda_ex(const sl_exec *ex) { return sl_cuda_of(ex->be); }

/* Records the first failure (file:line and what) until sync reports it. */
void sl_cuda_record(sl_cuda_state *s, const char *file, int line, const char *what,
                    const char *detail);

/* The recorded failure as the library's error (cleared), or SL_OK. */
sl_status sl_cuda_take_error(sl_cuda_state *s);

/* Records a failure when `call` does not return `ok`; `text` turns the
 * status into words. */
#define SL_CUDA_CHECK_STATUS(s, call, ok, text)                                                \
    do {                                                                                       \
        auto st_ = (call);                                                                     \
        if (st_ != (ok))                                                                       \
            sl_cuda_record((s), __FILE__, __LINE__, #call, text(st_));                         \
    } while (0)

#define SL_CUDA_CHECK(s, call) SL_CUDA_CHECK_STATUS(s, call, cudaSuccess, cudaGetErrorString)
#define SL_CUDNN_CHECK(s, call)                                                                \
    SL_CUDA_CHECK_STATUS(s, call, CUDNN_STATUS_SUCCESS, cudnnGetErrorString)
#define SL_CUBLAS_CHECK(s, call)                                                               \
    SL_CUDA_CHECK_STATUS(s, call, CUBLAS_STATUS_SUCCESS, cublasGetStatusString)

/* After a kernel launch. */
#define SL_CUDA_LAUNCHED(s) SL_CUDA_CHECK((s), cudaGetLastError())

/* Grid-stride loop over n elements. */
#define GRID_STRIDE(i, n)                                                                      \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                   \
         i += (size_t)gridDim.x * blockDim.x)

/* Launches kernel over n elements in 256-thread blocks on the instance's
 * stream of exec `ex`, and checks the launch. */
#define SL_CUDA_LAUNCH(ex, kernel, n, ...)                                                     \
    do {                                                                                       \
        sl_cuda_state *ls_ = sl_cuda_ex(ex);                                                   \
        kernel<<<sl_cuda_blocks(n), 256, 0, ls_->stream>>>(__VA_ARGS__);                       \
        SL_CUDA_LAUNCHED(ls_);                                                                 \
    } while (0)

/* Blocks of 256 threads covering n elements (grid-stride loops beyond). */
static inline unsigned sl_cuda_blocks(size_t n)
{
    size_t b = (n + 255) / 256;
    return (unsigned)(b > 65535 ? 65535 : (b ? b : 1));
}

/* ---- cuda_conv.cu: algorithms per the instance's deterministic flag ---- */
size_t sl_cuda_conv_workspace(const sl_backend *be, const sl_conv_desc *d, sl_conv_pass pass);
void sl_cuda_conv_forward(const sl_exec *ex, const sl_conv_desc *d, const float *x,
                          const float *w, const float *bias, float *y, void *ws);
void sl_cuda_conv_backward_data(const sl_exec *ex, const sl_conv_desc *d, const float *w,
                                const float *dy, float *dx, int accumulate, void *ws);
void sl_cuda_conv_backward_filter(const sl_exec *ex, const sl_conv_desc *d, const float *x,
                                  const float *dy, float *dw, float *dbias, void *ws);
/* Frees the instance's descriptors and cache (NULL is fine). */
void sl_cuda_conv_cache_free(struct sl_cuda_conv_cache *c);

/* ---- cuda_gemm.cu ---- */
void sl_cuda_gemm(const sl_exec *ex, int trans_a, int trans_b, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* ---- cuda_norm.cu ---- */
void sl_cuda_batchnorm_forward_train(const sl_exec *ex, int n, int c, int hw, const float *x,
                                     const float *gamma, const float *beta, float *y,
                                     float *save_mean, float *save_invstd, float *running_mean,
                                     float *running_var, float momentum, float eps);
void sl_cuda_batchnorm_forward_apply(const sl_exec *ex, int n, int c, int hw, const float *x,
                                     const float *gamma, const float *beta, const float *mean,
                                     const float *invstd, float *y);
void sl_cuda_batchnorm_forward_infer(const sl_exec *ex, int n, int c, int hw, const float *x,
                                     const float *gamma, const float *beta,
                                     const float *running_mean, const float *running_var,
                                     float eps, float *y, float *save_mean, float *save_invstd);
size_t sl_cuda_batchnorm_backward_workspace(const sl_backend *be, int c);
void sl_cuda_batchnorm_backward(const sl_exec *ex, int n, int c, int hw, const float *x,
                                const float *dy, const float *gamma, const float *save_mean,
                                const float *save_invstd, float *dx, int accumulate,
                                float *dgamma, float *dbeta, int frozen, void *ws);

/* ---- cuda_pool.cu ---- */
void sl_cuda_maxpool_forward(const sl_exec *ex, const sl_pool_desc *d, const float *x, float *y,
                             int32_t *argmax);
void sl_cuda_maxpool_backward(const sl_exec *ex, const sl_pool_desc *d, const int32_t *argmax,
                              const float *dy, float *dx, int accumulate);
void sl_cuda_avgpool_forward(const sl_exec *ex, const sl_pool_desc *d, const float *x, float *y);
void sl_cuda_avgpool_backward(const sl_exec *ex, const sl_pool_desc *d, const float *dy,
                              float *dx, int accumulate);
void sl_cuda_global_avgpool_forward(const sl_exec *ex, int nc, int hw, const float *x, float *y);
void sl_cuda_global_avgpool_backward(const sl_exec *ex, int nc, int hw, const float *dy,
                                     float *dx, int accumulate);

/* ---- cuda_elementwise.cu ---- */
void sl_cuda_relu_forward(const sl_exec *ex, size_t count, const float *x, float *y);
void sl_cuda_relu_backward(const sl_exec *ex, size_t count, const float *y, const float *dy,
                           float *dx, int accumulate);
void sl_cuda_dropout_forward(const sl_exec *ex, size_t count, const float *x, float *y, float p,
                             uint64_t seed, uint64_t counter);
void sl_cuda_dropout_backward(const sl_exec *ex, size_t count, const float *dy, float *dx,
                              float p, uint64_t seed, uint64_t counter, int accumulate);
void sl_cuda_random_uniform(const sl_exec *ex, size_t count, uint64_t seed, uint64_t counter,
                            uint64_t first, float *dst);
void sl_cuda_add(const sl_exec *ex, size_t count, const float *a, const float *b, float *y);
void sl_cuda_copy(const sl_exec *ex, size_t count, const float *src, float *dst, int accumulate);
void sl_cuda_fill(const sl_exec *ex, size_t count, float value, float *dst);
void sl_cuda_copy_channels(const sl_exec *ex, int n, int hw, int c_count, const float *src,
                           int src_c, int src_off, float *dst, int dst_c, int dst_off,
                           int accumulate);
void sl_cuda_bias_add(const sl_exec *ex, int rows, int cols, const float *bias, float *y);
void sl_cuda_bias_backward(const sl_exec *ex, int rows, int cols, const float *dy, float *dbias);

/* ---- cuda_loss_optim.cu ---- */
size_t sl_cuda_softmax_xent_workspace(const sl_backend *be, int n);
void sl_cuda_softmax_xent(const sl_exec *ex, int n, int classes, const float *logits,
                          const int *labels, float *dlogits, float *loss, int *correct, void *ws);
void sl_cuda_sgd_update(const sl_exec *ex, size_t count, float *w, const float *g, float *mom,
                        float lr, float momentum, float weight_decay, int nesterov, int first);
void sl_cuda_adam_update(const sl_exec *ex, size_t count, float *w, const float *g, float *m,
                         float *v, float lr, float beta1, float beta2, float eps,
                         float weight_decay, int64_t step);

#ifdef __cplusplus
}
#endif

#endif
