/*
 * cuda_backend.h — how the registry (net/context.c) creates a CUDA backend
 * instance. Plain C: it names no CUDA type, so a CPU-only build answers the
 * same call from cuda_none.c.
 */
#ifndef SL_CUDA_BACKEND_H
#define SL_CUDA_BACKEND_H

#include "base/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A new CUDA backend instance on device `gpu` with its own stream, cuDNN
 * and cuBLAS handles and algorithm cache; deterministic selects
 * deterministic cuDNN algorithms only, tf32 lets convolutions and GEMMs use
 * TF32 tensor cores. SL_ERR_UNSUPPORTED when this build has no CUDA or no
 * device can be used, SL_ERR_INVALID_ARG when `gpu` is not a device of
 * this machine; free with sl_backend_destroy. */
sl_status sl_cuda_backend_create(int gpu, int deterministic, int tf32, sl_backend **out);

/* The instance's CUDA stream (a cudaStream_t), for work queued from other
 * folders that must be ordered with its kernels (data-parallel NCCL
 * reductions, src/dist). NULL in a build without CUDA. */
void *sl_cuda_backend_stream(const sl_backend *be);

/* The function table every CUDA instance starts from (impl NULL, no
 * device touched): what tests check for unset members on a machine without
 * a GPU. NULL in a build without CUDA. */
const sl_backend *sl_cuda_backend_template(void);

/* Whether this instance's language-model loss runs a row of `vocab`
 * logits staged in shared memory (cuda_loss_optim.cu's lm_xent_staged_k):
 * on, and within the device's shared memory. Tests use it to know which
 * kernel they compare. 0 in a build without CUDA. */
int sl_cuda_lm_xent_staged(const sl_backend *be, int vocab);

/* Whether this instance sums the bias and LayerNorm parameter gradients
 * as column parts joined in thread-block clusters (base/col_grid.h) or,
 * 0, as column tiles; *why (when not NULL) says why not ("" when on).
 * Tests print it to say which kernels they compared. 0 in a build
 * without CUDA. */
int sl_cuda_column_parts(const sl_backend *be, const char **why);

/* Whether this instance's LayerNorm keeps a row in registers (1) or runs
 * its loops (0: SL_CUDA_LN_REGS=off). 0 in a build without CUDA. */
int sl_cuda_ln_regs(const sl_backend *be);

/* Whether this instance's BatchNorm joins its statistics to the
 * normalise, and its backward's means to the input gradient, in one
 * kernel each (1: SL_CUDA_BN_FUSED=on), or runs three kernels each (0,
 * the default).
 * 0 in a build without CUDA. */
int sl_cuda_bn_fused(const sl_backend *be);

/* Whether this instance's BatchNorm normalise and input gradient take
 * four values a thread where a plane allows (1) or one (0:
 * SL_CUDA_BN_VEC=off). 0 in a build without CUDA. */
int sl_cuda_bn_vec(const sl_backend *be);

/* Whether this instance's classifier loss (softmax_xent) takes a block
 * per row (1) or a thread per row (0: SL_CUDA_XENT_BLOCKS=off). 0 in a
 * build without CUDA. */
int sl_cuda_xent_blocks(const sl_backend *be);

/* How many convolution passes of this instance took their engine by
 * timing (SL_CUDA_CONV_TUNE, cuda_conv.cu) so far: 0 with tuning off,
 * and for passes with one allowed engine or timing that could not run.
 * 0 in a build without CUDA. */
int sl_cuda_conv_tuned_passes(const sl_backend *be);

/* How many convolution geometries this instance has built so far whose
 * `pass` runs as cuBLAS GEMMs instead of cuDNN (SL_CUDA_CONV_GEMM,
 * base/conv_gemm.h's sl_conv_gemm_passes): SL_CONV_BWD_FILTER, 1x1
 * without padding; SL_CONV_BWD_DATA, those of them strided, and with
 * SL_CUDA_CONV_GEMM_FWD=on those of stride 1 too; SL_CONV_FWD, those of
 * stride 1 with SL_CUDA_CONV_GEMM_FWD=on. A pass whose split would pass
 * the workspace cap (SL_CUDA_CONV_GEMM_CAP_KIB) is not counted: it runs
 * on cuDNN. 0 in a build without CUDA. */
int sl_cuda_conv_gemm_geometries(const sl_backend *be, sl_conv_pass pass);

#ifdef __cplusplus
}
#endif

#endif
