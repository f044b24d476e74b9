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

/* A new CPU backend instance whose kernels run on `threads` threads (its
 * oneDNN primitives are made for that team size; 0 or less means 1);
 * impl holds its sl_cpu_state. Free with sl_backend_destroy. */
sl_status sl_cpu_backend_create(int threads, sl_backend **out);

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

/* ---- cpu_onednn.c: oneDNN, and which engine runs what ---- */

/* The backend's state: its team size and, with oneDNN, the engine and the
 * convolution plans made at plan time (one per geometry and pass). */
typedef struct sl_cpu_state sl_cpu_state;

sl_status sl_cpu_state_create(int threads, sl_cpu_state **out);
void sl_cpu_state_free(sl_cpu_state *s);
/* SL_OK, or the first failure of a oneDNN primitive since the last call
 * (with sl_last_error() set). */
sl_status sl_cpu_state_sync(sl_cpu_state *s);
/* Records a kernel's failure (SL_ERR_BACKEND, message what) for the next
 * sl_cpu_state_sync, unless one is recorded already. */
void sl_cpu_state_fail(sl_cpu_state *s, const char *what);

/* Process-wide choices, made once (see cpu_onednn.c): 1 when GEMM tiles
 * run oneDNN's sgemm, 1 when convolutions go to oneDNN where it has a
 * non-reference implementation. */
int sl_cpu_gemm_onednn(void);
int sl_cpu_conv_onednn(void);
/* 1 when SL_CPU_KERNELS_LOG asks for the choices on stderr. */
int sl_cpu_kernels_log(void);
/* One line for logs: oneDNN's version and ISA, and the two choices. */
const char *sl_cpu_kernels_describe(char *buf, size_t n);

/* 1 in a build with oneDNN. */
int sl_cpu_have_onednn(void);
/* 1 when oneDNN's dispatch reaches bf16 dot products (avx512_core_bf16,
 * AMX): where bf16 convolutions run on bf16 activations themselves. */
int sl_cpu_has_bf16_dot(void);
/* Tests only: whether CPU backends created from now on take bf16
 * activations in their BatchNorm, ReLU and add kernels (default: yes,
 * unless SL_CPU_BF16_KERNELS=off). Not thread-safe. */
void sl_cpu_bf16_kernels_force(int on);
/* Of those on, only the SL_BF16_* families in `families` (default: all),
 * for backends made after the call (tests). */
void sl_cpu_bf16_kernels_mask(unsigned families);
/* Tests only: overrides both choices for the process from now on (plans
 * already made keep theirs). Not thread-safe. */
void sl_cpu_kernels_force(int gemm_onednn, int conv_onednn);
/* Images per oneDNN call of a convolution pass (making its plan if need
 * be); 0 when the pass runs im2col. */
int sl_cpu_onednn_conv_chunk(const sl_backend *be, const sl_conv_desc *d, sl_conv_pass pass);

/* oneDNN's sgemm on the calling thread alone (row-major, as cblas). */
void sl_cpu_sgemm_onednn(int trans_a, int trans_b, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc);

/* A convolution pass's workspace bytes as its plan chose them: oneDNN's,
 * or sl_cpu_im2col_bytes (always, without oneDNN); SIZE_MAX with the error
 * set when the plan could not be made. */
size_t sl_cpu_onednn_conv_workspace(const sl_backend *be, const sl_conv_desc *d,
                                    sl_conv_pass pass);
/* The passes through oneDNN: 1 when done, 0 when this geometry and pass
 * run im2col (the caller then does). Same arguments as the table's. */
int sl_cpu_onednn_conv_forward(const sl_exec *ex, const sl_conv_desc *d, const void *x,
                               const float *w, void *y, void *ws);
int sl_cpu_onednn_conv_backward_data(const sl_exec *ex, const sl_conv_desc *d, const float *w,
                                     const void *dy, void *dx, int accumulate, void *ws);
int sl_cpu_onednn_conv_backward_filter(const sl_exec *ex, const sl_conv_desc *d, const void *x,
                                       const void *dy, float *dw, void *ws);
/* The table's conv2d_native_bf16: 1 when all three passes of d have a
 * bf16 plan through oneDNN (a CPU with bf16 dot products, avx512_core_bf16
 * or AMX, and oneDNN chosen for convolutions). */
int sl_cpu_conv2d_native_bf16(const sl_backend *be, const sl_conv_desc *d);
/* The table's attention_native_bf16: flash mode (cpu_attention.c widens a
 * sequence's tiles into its workspace slot and rounds what it writes). */
int sl_cpu_attention_native_bf16(const sl_backend *be, const sl_attention_desc *d);
/* The table's gemm_bf16 and its workspace: oneDNN's matmul on bf16
 * operands, a plan per geometry made at the first ask (SIZE_MAX with the
 * error set where oneDNN or the CPU has none). */
size_t sl_cpu_gemm_bf16_workspace_bytes(const sl_backend *be, const sl_gemm_bf16_desc *d);
void sl_cpu_gemm_bf16(const sl_exec *ex, const sl_gemm_bf16_desc *d, const void *a, const void *b,
                      const float *bias, void *c, void *ws);

/* ---- the im2col path's geometry (cpu_conv.c; cpu_onednn.c compares) ---- */

/* A 1x1, stride-1, unpadded convolution: its input is the GEMM operand. */
static inline int sl_cpu_conv_pointwise(const sl_conv_desc *d)
{
    return d->kh == 1 && d->kw == 1 && d->sh == 1 && d->sw == 1 && d->ph == 0 && d->pw == 0 &&
           d->oh == d->h && d->ow == d->w;
}

/* The im2col path's workspace of a pass: one image's col, none for a
 * pointwise convolution. */
static inline size_t sl_cpu_im2col_bytes(const sl_conv_desc *d)
{
    if (sl_cpu_conv_pointwise(d))
        return 0;
    return (size_t)d->c * d->kh * d->kw * d->oh * d->ow * sizeof(float);
}

/* ---- cpu_gemm.c ---- */

/* The table's gemm (declared below with the other kernels) is tiled over
 * the team, or one call to threaded OpenBLAS. */

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

/* BatchNorm joined to the ReLU after it (cpu_norm.c; optional members the
 * CPU sets, unless SL_CPU_BN_RELU=off or sl_cpu_bn_relu_force(0)). */
sl_batchnorm_relu_forward_train_fn sl_cpu_batchnorm_relu_forward_train;
sl_batchnorm_relu_forward_apply_fn sl_cpu_batchnorm_relu_forward_apply;
sl_batchnorm_relu_backward_fn sl_cpu_batchnorm_relu_backward;
/* Tests: backends created after it join BatchNorm and ReLU (1) or not
 * (0), whatever SL_CPU_BN_RELU says; -1 goes back to the environment. */
void sl_cpu_bn_relu_force(int on);

/* The table's kernels (cpu_conv.c, cpu_norm.c, cpu_pool.c,
 * cpu_elementwise.c, cpu_loss_optim.c, cpu_transformer.c, cpu_attention.c,
 * cpu_decode.c; one file per op family): `sl_cpu_<member>` for every
 * required member of base/backend.h's SL_BACKEND_OPS, which also gives
 * their signatures and contracts. The CPU leaves the optional ones NULL,
 * except those above. */
#define SL_CPU_DECLARE(ret, member, params) sl_##member##_fn sl_cpu_##member;
SL_BACKEND_OPS(SL_CPU_DECLARE, SL_BACKEND_SKIP)
#undef SL_CPU_DECLARE

#endif
