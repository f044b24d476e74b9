/*
 * cpu.h — internal prototypes of the CPU backend (the "run" stage on a
 * host): OpenBLAS for every GEMM, OpenMP for the loops. cpu_backend.c
 * gathers the kernels of the other src/cpu files into one sl_backend table.
 *
 * Determinism: every output value is computed by one thread in a fixed
 * order (no OpenMP reductions, no atomics on floats), so a kernel given the
 * same inputs and thread count returns the same bits.
 */
#ifndef SL_CPU_H
#define SL_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "base/backend.h"
#include "base/base.h"

/* A new CPU backend instance (it has no state of its own: impl is NULL);
 * free with sl_backend_destroy. */
sl_status sl_cpu_backend_create(sl_backend **out);

/* Sets OpenBLAS's (process-wide) thread count; the only global thread
 * state the CPU backend touches. */
void sl_cpu_set_blas_threads(int n);

/* OpenMP team size for a kernel: ex->threads, at least 1. */
static inline int cpu_threads(const sl_exec *ex)
{
    return ex && ex->threads > 1 ? ex->threads : 1;
}

/* Below this many elements a loop runs on one thread: waking a team costs
 * more than it saves. */
#define CPU_PAR_MIN 32768

/* ---- cpu_gemm.c ---- */

/* The table's gemm: tiled over the team, or one call to threaded OpenBLAS. */
void cpu_gemm(const sl_exec *ex, int trans_a, int trans_b, int m, int n, int k, float alpha,
              const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* 1 when kernels should split their GEMMs over their own OpenMP team
 * (OpenBLAS single-threaded, or an OpenMP build of it), 0 when each GEMM
 * should be one call from one thread (OpenBLAS runs its own threads). */
int cpu_gemm_tiled(const sl_exec *ex);

/* A grid of tm x tn tiles of C, one per thread of a team. */
typedef struct cpu_tiling {
    int tm, tn;
} cpu_tiling;

cpu_tiling cpu_gemm_tiling(int threads, int m, int n);

/* Tile `part` (a thread number) of C = alpha op(A) op(B) + beta C, on the
 * calling thread; parts past tm * tn do nothing. */
void cpu_gemm_part(const cpu_tiling *t, int part, int trans_a, int trans_b, int m, int n, int k,
                   float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                   float *c, int ldc);

/* ---- cpu_conv.c ---- */
size_t cpu_conv2d_workspace_bytes(const sl_backend *be, const sl_conv_desc *d, sl_conv_pass pass);
void cpu_conv2d_forward(const sl_exec *ex, const sl_conv_desc *d, const float *x, const float *w,
                        const float *bias, float *y, void *ws);
void cpu_conv2d_backward_data(const sl_exec *ex, const sl_conv_desc *d, const float *w,
                              const float *dy, float *dx, int accumulate, void *ws);
void cpu_conv2d_backward_filter(const sl_exec *ex, const sl_conv_desc *d, const float *x,
                                const float *dy, float *dw, float *dbias, void *ws);

/* ---- cpu_norm.c ---- */
void cpu_batchnorm_forward_train(const sl_exec *ex, int n, int c, int hw, const float *x,
                                 const float *gamma, const float *beta, float *y,
                                 float *save_mean, float *save_invstd, float *running_mean,
                                 float *running_var, float momentum, float eps);
void cpu_batchnorm_forward_apply(const sl_exec *ex, int n, int c, int hw, const float *x,
                                 const float *gamma, const float *beta, const float *mean,
                                 const float *invstd, float *y);
void cpu_batchnorm_forward_infer(const sl_exec *ex, int n, int c, int hw, const float *x,
                                 const float *gamma, const float *beta, const float *running_mean,
                                 const float *running_var, float eps, float *y, float *save_mean,
                                 float *save_invstd);
void cpu_batchnorm_backward(const sl_exec *ex, int n, int c, int hw, const float *x,
                            const float *dy, const float *gamma, const float *save_mean,
                            const float *save_invstd, float *dx, int accumulate, float *dgamma,
                            float *dbeta, int frozen, void *ws);

/* ---- cpu_pool.c ---- */
void cpu_maxpool_forward(const sl_exec *ex, const sl_pool_desc *d, const float *x, float *y,
                         int32_t *argmax);
void cpu_maxpool_backward(const sl_exec *ex, const sl_pool_desc *d, const int32_t *argmax,
                          const float *dy, float *dx, int accumulate);
void cpu_avgpool_forward(const sl_exec *ex, const sl_pool_desc *d, const float *x, float *y);
void cpu_avgpool_backward(const sl_exec *ex, const sl_pool_desc *d, const float *dy, float *dx,
                          int accumulate);
void cpu_global_avgpool_forward(const sl_exec *ex, int nc, int hw, const float *x, float *y);
void cpu_global_avgpool_backward(const sl_exec *ex, int nc, int hw, const float *dy, float *dx,
                                 int accumulate);

/* ---- cpu_elementwise.c ---- */
void cpu_dropout_forward(const sl_exec *ex, size_t count, const float *x, float *y, float p,
                         uint64_t seed, uint64_t counter);
void cpu_dropout_backward(const sl_exec *ex, size_t count, const float *dy, float *dx, float p,
                          uint64_t seed, uint64_t counter, int accumulate);
void cpu_random_uniform(const sl_exec *ex, size_t count, uint64_t seed, uint64_t counter,
                        uint64_t first, float *dst);
void cpu_relu_forward(const sl_exec *ex, size_t count, const float *x, float *y);
void cpu_relu_backward(const sl_exec *ex, size_t count, const float *y, const float *dy,
                       float *dx, int accumulate);
void cpu_add(const sl_exec *ex, size_t count, const float *a, const float *b, float *y);
void cpu_copy(const sl_exec *ex, size_t count, const float *src, float *dst, int accumulate);
void cpu_fill(const sl_exec *ex, size_t count, float value, float *dst);
void cpu_copy_channels(const sl_exec *ex, int n, int hw, int c_count, const float *src,
                       int src_c, int src_off, float *dst, int dst_c, int dst_off,
                       int accumulate);
void cpu_bias_add(const sl_exec *ex, int rows, int cols, const float *bias, float *y);
void cpu_bias_backward(const sl_exec *ex, int rows, int cols, const float *dy, float *dbias);

/* ---- cpu_loss_optim.c ---- */
void cpu_softmax_xent(const sl_exec *ex, int n, int classes, const float *logits,
                      const int *labels, float *dlogits, float *loss, int *correct, void *ws);
void cpu_sgd_update(const sl_exec *ex, size_t count, float *w, const float *g, float *mom,
                    float lr, float momentum, float weight_decay, int nesterov, int first);
void cpu_adam_update(const sl_exec *ex, size_t count, float *w, const float *g, float *m,
                     float *v, float lr, float beta1, float beta2, float eps, float weight_decay,
                     int64_t step);

#endif
