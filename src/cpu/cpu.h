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
sl_gemm_fn sl_cpu_gemm;

/* 1 when kernels should split their GEMMs over their own OpenMP team
 * (OpenBLAS single-threaded, or an OpenMP build of it), 0 when each GEMM
 * should be one call from one thread (OpenBLAS runs its own threads). */
int sl_cpu_gemm_tiled(const sl_exec *ex);

/* A grid of tm x tn tiles of C, one per thread of a team. */
typedef struct sl_cpu_tiling {
    int tm, tn;
} sl_cpu_tiling;

sl_cpu_tiling sl_cpu_gemm_tiling(int threads, int m, int n);

/* Tile `part` (a thread number) of C = alpha op(A) op(B) + beta C, on the
 * calling thread; parts past tm * tn do nothing. */
void sl_cpu_gemm_part(const sl_cpu_tiling *t, int part, int trans_a, int trans_b, int m, int n,
                      int k, float alpha, const float *a, int lda, const float *b, int ldb,
                      float beta, float *c, int ldc);

/* The table's kernels, one file per op family; signatures and contracts
 * in base/backend.h. */

/* ---- cpu_conv.c ---- */
sl_conv2d_workspace_bytes_fn sl_cpu_conv2d_workspace_bytes;
sl_conv2d_forward_fn sl_cpu_conv2d_forward;
sl_conv2d_backward_data_fn sl_cpu_conv2d_backward_data;
sl_conv2d_backward_filter_fn sl_cpu_conv2d_backward_filter;

/* ---- cpu_norm.c ---- */
sl_batchnorm_forward_train_fn sl_cpu_batchnorm_forward_train;
sl_batchnorm_forward_apply_fn sl_cpu_batchnorm_forward_apply;
sl_batchnorm_forward_infer_fn sl_cpu_batchnorm_forward_infer;
sl_batchnorm_backward_fn sl_cpu_batchnorm_backward;

/* ---- cpu_pool.c ---- */
sl_maxpool_forward_fn sl_cpu_maxpool_forward;
sl_maxpool_backward_fn sl_cpu_maxpool_backward;
sl_avgpool_forward_fn sl_cpu_avgpool_forward;
sl_avgpool_backward_fn sl_cpu_avgpool_backward;
sl_global_avgpool_forward_fn sl_cpu_global_avgpool_forward;
sl_global_avgpool_backward_fn sl_cpu_global_avgpool_backward;

/* ---- cpu_elementwise.c ---- */
sl_dropout_forward_fn sl_cpu_dropout_forward;
sl_dropout_backward_fn sl_cpu_dropout_backward;
sl_random_uniform_fn sl_cpu_random_uniform;
sl_relu_forward_fn sl_cpu_relu_forward;
sl_relu_backward_fn sl_cpu_relu_backward;
sl_add_fn sl_cpu_add;
sl_copy_fn sl_cpu_copy;
sl_fill_fn sl_cpu_fill;
sl_copy_channels_fn sl_cpu_copy_channels;
sl_bias_add_fn sl_cpu_bias_add;
sl_bias_backward_fn sl_cpu_bias_backward;

/* ---- cpu_loss_optim.c ---- */
sl_softmax_xent_fn sl_cpu_softmax_xent;
sl_lm_xent_fn sl_cpu_lm_xent;
sl_sgd_update_fn sl_cpu_sgd_update;
sl_adam_update_fn sl_cpu_adam_update;
sl_sum_squares_fn sl_cpu_sum_squares;

/* ---- cpu_transformer.c ---- */
sl_layernorm_forward_fn sl_cpu_layernorm_forward;
sl_layernorm_backward_fn sl_cpu_layernorm_backward;
sl_gelu_forward_fn sl_cpu_gelu_forward;
sl_gelu_backward_fn sl_cpu_gelu_backward;
sl_embedding_forward_fn sl_cpu_embedding_forward;
sl_embedding_backward_fn sl_cpu_embedding_backward;
/* ---- cpu_attention.c ---- */
sl_attention_workspace_bytes_fn sl_cpu_attention_workspace_bytes;
sl_attention_forward_fn sl_cpu_attention_forward;
sl_attention_backward_fn sl_cpu_attention_backward;

#endif
