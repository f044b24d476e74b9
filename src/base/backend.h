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
 * cuDNN / cuBLAS, both with the per-element rules of base/element.h.
 * Kernels reach their instance through `ex->be`. Members listed as OPT
 * ("(optional)") may be NULL; every REQ one is set by every backend
 * (tests/test_backend_table.c checks it from the same lists).
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

/* Convolution geometry: input n x c x h x w, output n x k x oh x ow.
 * bf16: the activations (x, y, dx, dy) are bf16 storage, computed on in
 * bf16 with float accumulation (a backend that says so through
 * conv2d_native_bf16); the weights and their gradient stay float. */
typedef struct sl_conv_desc {
    int n, c, h, w;
    int k, oh, ow;
    int kh, kw, sh, sw, ph, pw, dh, dw;
    int groups;
    int bf16;
} sl_conv_desc;

/* A GEMM on bf16 operands (gemm_bf16): c[m x n] (+)= op(a) op(b) (+ bias),
 * row-major, a and b bf16 (op: transposed when trans_*), c bf16 (c_bf16)
 * or float, accumulate: added to c (a bf16 c is widened, added to in
 * float and rounded once); bias (has_bias): n floats added to every row.
 * Float accumulation throughout. */
typedef struct sl_gemm_bf16_desc {
    int trans_a, trans_b, m, n, k, lda, ldb, ldc;
    int c_bf16, accumulate, has_bias;
} sl_gemm_bf16_desc;

typedef enum sl_conv_pass { SL_CONV_FWD = 0, SL_CONV_BWD_DATA = 1, SL_CONV_BWD_FILTER = 2 } sl_conv_pass;

/* Pooling geometry: input n x c x h x w, output n x c x oh x ow. */
typedef struct sl_pool_desc {
    int n, c, h, w, oh, ow;
    int kh, kw, sh, sw, ph, pw;
} sl_pool_desc;

typedef struct sl_exec sl_exec; /* per-run state handed to kernels */

typedef struct sl_backend sl_backend;

/* One parameter (or a ZeRO piece of one) of a list update: its floats,
 * gradient, optimizer state (m: momentum or Adam's first moment; v: Adam's
 * second, NULL for SGD), length and weight decay. */
typedef struct sl_update_span {
    float *w;
    const float *g;
    float *m, *v;
    size_t count;
    float weight_decay;
} sl_update_span;

/* Partial sums of sum_squares: enough slots for a GPU to read at its
 * bandwidth (one thread per slot), rows of 64 KiB for a CPU. */
#define SL_SUM_SQUARES_SLOTS 16384

/* Element types of stored values: F32, bfloat16 (2 bytes: F32's
 * exponent, 8 significant bits; base/element.h's rounding rule), or int32
 * (the token ids a network whose first layer is an embedding takes as its
 * input: never cast, never in the arena). */
typedef enum sl_dtype { SL_DTYPE_F32 = 0, SL_DTYPE_BF16 = 1, SL_DTYPE_I32 = 2 } sl_dtype;

/* Causal multi-head self-attention over n sequences of t tokens: qkv holds
 * n*t rows of 3 * heads * d values (q, then k, then v; head h at columns
 * h*d .. h*d+d-1 of each), the output y n*t rows of heads * d. */
typedef struct sl_attention_desc {
    int n, t, heads, d; /* batch, tokens, heads, head size */
    int flash;          /* 1: tiled, saved = the log-sum-exp of each row (n*heads*t
                           floats); 0: plain, saved = the probabilities (n*heads*t*t) */
    float p;            /* dropout on the probabilities; 0: none */
    uint64_t seed;      /* the dropout mask's Philox key */
    uint64_t counter;   /* and its first block: element (b, h, i, j) is element
                           ((bh0 + b*heads + h)*t + i)*t + j of a dropout mask */
    int bh0;            /* pairs before this call's in the mask: heads times the
                           sequences before them when a batch runs in chunks (0) */
    int bf16;           /* 1: qkv, y, dy and dqkv are bf16 (a bf16 network's
                           attention on the backend's own bf16 kernels,
                           SL_BF16_ATTENTION; the call's ex->bf16 says the same),
                           and the workspace is asked for that; 0: float */
    const uint64_t *counter_delta; /* the call's sl_exec.counter_delta (NULL: none),
                                      added to counter where the backend honours it */
} sl_attention_desc;

/*
 * The interface, written once as two lists. Each entry is
 * X(return type, member, (parameters)) under REQ (every backend sets it)
 * or OPT ("(optional)": may be NULL, and the comment says what NULL
 * means). From the lists come the typedef `sl_<member>_fn` of each
 * signature, the members of struct sl_backend, the declarations and
 * tables of the backends (cpu/cpu.h and cpu_backend.c, cuda/cuda_common.h
 * and cuda_backend.cu: kernel `member` of backend B is `sl_B_member`) and
 * tests/test_backend_table.c's check of the required members. A new kernel
 * is one entry in SL_BACKEND_OPS plus its kernels.
 *
 * SL_BACKEND_DEVICE: memory, copies and waiting, whose functions each
 * backend names and lists by hand (the CPU's upload and download are one
 * memcpy).
 */
#define SL_BACKEND_DEVICE(REQ, OPT)                                                            \
    /* Frees the instance (impl included); be is not NULL. */                                  \
    REQ(void, destroy, (sl_backend * be))                                                      \
    /* Memory of the backend's device, 64-byte aligned and zeroed; NULL on                     \
     * failure (with the error recorded). free accepts NULL. */                                \
    REQ(void *, alloc, (const sl_backend *be, size_t bytes, const char *what))                 \
    REQ(void, free, (const sl_backend *be, void *p))                                           \
    /* Copies between the caller's host memory and device memory. The                          \
     * caller's buffer may change as soon as upload returns (a device                          \
     * backend stages it, without waiting for the copy); download's dst                        \
     * holds the bytes when it returns. */                                                     \
    REQ(void, upload, (const sl_exec *ex, void *dst, const void *src, size_t bytes))           \
    REQ(void, download, (const sl_exec *ex, void *dst, const void *src, size_t bytes))         \
    /* download whose dst is written by the next sync (or wait), so that                       \
     * reading a result back does not stop the queue mid-step; dst must                        \
     * stay valid until then. NULL: download (the CPU sets its memcpy). */                     \
    OPT(void, download_later, (const sl_exec *ex, void *dst, const void *src, size_t bytes))   \
    /* Waits for queued work; returns SL_OK, or the first failure since the                    \
     * previous call with sl_last_error() set (kernels return nothing: a                       \
     * failing kernel records its error here). */                                              \
    REQ(sl_status, sync, (const sl_exec *ex))                                                  \
    /* Waits for queued work and keeps any failure for the next sync (for                      \
     * timing); NULL where kernels finish before they return (the CPU). */                     \
    OPT(void, wait, (const sl_exec *ex))                                                       \
    /* Free bytes on the device now, and its size into *total when total is                    \
     * not NULL. NULL on the CPU. */                                                           \
    OPT(size_t, device_free_bytes, (const sl_backend *be, size_t *total))                      \
    /* The native stream kernels are queued on (a cudaStream_t), for custom                    \
     * layers' own kernels. NULL on the CPU. */                                                \
    OPT(void *, native_stream, (const sl_backend *be))                                         \
    /* Graphs of queued work (CUDA graphs; NULL where nothing is captured):                    \
     * graph_begin starts recording the instance's queue (0; 1 when it                        \
     * never can, 2 when not now: a failure is kept for the next sync);                        \
     * until graph_end, kernels queued are recorded, not run. graph_end                        \
     * stops and returns the recording made runnable, or NULL when the                         \
     * capture or a call recorded failed (the failure forgotten: the caller                    \
     * queues the same work again, unrecorded, and meets it again if it is                     \
     * real). graph_launch queues a recording's work; graph_free frees one. */                 \
    OPT(int, graph_begin, (const sl_exec *ex))                                                 \
    OPT(void *, graph_end, (const sl_exec *ex))                                                \
    OPT(void, graph_launch, (const sl_exec *ex, void *graph))                                  \
    OPT(void, graph_free, (const sl_backend *be, void *graph))

/* SL_BACKEND_OPS: the kernels. */
#define SL_BACKEND_OPS(REQ, OPT)                                                               \
    /* y[M x N] = alpha * op(A) op(B) + beta * y, row-major. */                                \
    REQ(void, gemm,                                                                            \
        (const sl_exec *ex, int trans_a, int trans_b, int m, int n, int k, float alpha,        \
         const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc))     \
    /* y[M x N] = op(A) op(B) + bias (bias of N, added to every row), row-major, ldc N:        \
     * the bias added in the GEMM's epilogue. NULL where gemm and bias_add do                  \
     * it (the CPU); the CUDA backend runs cuBLASLt's BIAS epilogue. */                        \
    OPT(void, gemm_bias,                                                                       \
        (const sl_exec *ex, int trans_a, int trans_b, int m, int n, int k, const float *a,     \
         int lda, const float *b, int ldb, const float *bias, float *c, int ldc))              \
    /* Workspace bytes a convolution pass needs; SIZE_MAX, with the error                      \
     * set, when the backend cannot run this geometry. */                                      \
    REQ(size_t, conv2d_workspace_bytes,                                                        \
        (const sl_backend *be, const sl_conv_desc *d, sl_conv_pass pass))                      \
    /* y = conv(x, w) + bias (bias may be NULL). w: k x c/groups x kh x kw.                    \
     * x, y (and dy, dx below) are float, or bf16 when d->bf16. */                             \
    REQ(void, conv2d_forward,                                                                  \
        (const sl_exec *ex, const sl_conv_desc *d, const void *x, const float *w,              \
         const float *bias, void *y, void *ws))                                                \
    /* dx (+)= conv_transpose(dy, w). */                                                       \
    REQ(void, conv2d_backward_data,                                                            \
        (const sl_exec *ex, const sl_conv_desc *d, const float *w, const void *dy, void *dx,   \
         int accumulate, void *ws))                                                            \
    /* dw += corr(x, dy); dbias += sum(dy) over n, oh, ow (dbias may be NULL). */              \
    REQ(void, conv2d_backward_filter,                                                          \
        (const sl_exec *ex, const sl_conv_desc *d, const void *x, const void *dy, float *dw,   \
         float *dbias, void *ws))                                                              \
    /* Whether the backend runs all three passes of d (d->bf16 set, no                         \
     * bias) on bf16 activations itself, each pass's workspace then being                      \
     * conv2d_workspace_bytes(be, d, pass); NULL or 0: the executor widens                     \
     * a bf16 network's activations into float copies for the convolution                      \
     * instead. Decided once per geometry, the same for every call. */                         \
    OPT(int, conv2d_native_bf16, (const sl_backend *be, const sl_conv_desc *d))                \
    /* Workspace bytes of gemm_bf16 on geometry d; SIZE_MAX, with the error                    \
     * set, when the backend cannot run it. Present where bf16_kernels has                     \
     * SL_BF16_GEMM. */                                                                        \
    OPT(size_t, gemm_bf16_workspace_bytes, (const sl_backend *be, const sl_gemm_bf16_desc *d)) \
    /* The GEMM of d on bf16 operands (sl_gemm_bf16_desc), with                                \
     * gemm_bf16_workspace_bytes(be, d) of workspace ws. The same geometry                     \
     * gives the same bits on every call (a fixed thread count). */                            \
    OPT(void, gemm_bf16,                                                                       \
        (const sl_exec *ex, const sl_gemm_bf16_desc *d, const void *a, const void *b,          \
         const float *bias, void *c, void *ws))                                                \
    /* Training BatchNorm over n x c x hw: batch mean and 1/sqrt(var+eps)                      \
     * (biased var) into save_mean / save_invstd, y = normalised * gamma +                     \
     * beta. When running_mean is not NULL the running statistics are                          \
     * updated with momentum (unbiased variance), as PyTorch does. ws:                         \
     * batchnorm_forward_workspace_bytes(n, c, hw) of planned scratch (NULL                    \
     * when that is 0). */                                                                     \
    REQ(void, batchnorm_forward_train,                                                         \
        (const sl_exec *ex, int n, int c, int hw, const float *x, const float *gamma,          \
         const float *beta, float *y, float *save_mean, float *save_invstd,                    \
         float *running_mean, float *running_var, float momentum, float eps, void *ws))        \
    /* Workspace bytes batchnorm_forward_train needs over n x c x hw (a                        \
     * GPU's partial sums); NULL: none (the CPU). */                                           \
    OPT(size_t, batchnorm_forward_workspace_bytes,                                             \
        (const sl_backend *be, int n, int c, int hw))                                          \
    /* y = (x - mean) * invstd * gamma + beta with given statistics (eval                      \
     * mode with running stats turned into invstd by the layer, or                             \
     * re-forward with the saved batch statistics). */                                         \
    REQ(void, batchnorm_forward_apply,                                                         \
        (const sl_exec *ex, int n, int c, int hw, const float *x, const float *gamma,          \
         const float *beta, const float *mean, const float *invstd, float *y))                 \
    /* Evaluation: y = (x - running_mean) / sqrt(running_var + eps) * gamma                    \
     * + beta, with invstd computed as 1.0f / sqrtf(var + eps) in float.                       \
     * When save_mean is not NULL (frozen BatchNorm in training) the running                   \
     * mean and that invstd are also written to save_mean / save_invstd, so                    \
     * batchnorm_forward_apply with them repeats y bit for bit. */                             \
    REQ(void, batchnorm_forward_infer,                                                         \
        (const sl_exec *ex, int n, int c, int hw, const float *x, const float *gamma,          \
         const float *beta, const float *running_mean, const float *running_var, float eps,    \
         float *y, float *save_mean, float *save_invstd))                                      \
    /* Backward: dx (+)= ..., dgamma += sum(dy * xhat), dbeta += sum(dy);                      \
     * dx may be NULL (parameter gradients only) or alias dy. With frozen 0                    \
     * the backward of normalising with the batch's own statistics; with 1                     \
     * of normalising with constant statistics (frozen BatchNorm: dx = dy *                    \
     * gamma * invstd). ws: batchnorm_backward_workspace_bytes(n, c, hw)                       \
     * of planned scratch (NULL when that is 0). */                                            \
    REQ(void, batchnorm_backward,                                                              \
        (const sl_exec *ex, int n, int c, int hw, const float *x, const float *dy,             \
         const float *gamma, const float *save_mean, const float *save_invstd, float *dx,      \
         int accumulate, float *dgamma, float *dbeta, int frozen, void *ws))                   \
    /* Workspace bytes batchnorm_backward needs over n x c x hw; NULL: none                    \
     * (the CPU). */                                                                           \
    OPT(size_t, batchnorm_backward_workspace_bytes,                                            \
        (const sl_backend *be, int n, int c, int hw))                                          \
    /* BatchNorm and the ReLU after it, one pass each way (the executor                        \
     * joins a BatchNorm step and the in-place ReLU step after it when a                       \
     * backend has all three): as batchnorm_forward_train / _apply with y =                    \
     * sl_relu_of(the normalised value), and as batchnorm_backward with dy                     \
     * the gradient at the ReLU's output, masked by sl_relu_grad_of on the                     \
     * normalised value recomputed from x, the saved statistics, gamma and                     \
     * beta (what the ReLU's backward reads from its output, so the same                       \
     * bits as the two layers' ops one after the other). Float activations                     \
     * only: the executor joins no step on bf16 storage (ex->bf16 is 0). */                    \
    OPT(void, batchnorm_relu_forward_train,                                                    \
        (const sl_exec *ex, int n, int c, int hw, const float *x, const float *gamma,          \
         const float *beta, float *y, float *save_mean, float *save_invstd,                    \
         float *running_mean, float *running_var, float momentum, float eps, void *ws))        \
    OPT(void, batchnorm_relu_forward_apply,                                                    \
        (const sl_exec *ex, int n, int c, int hw, const float *x, const float *gamma,          \
         const float *beta, const float *mean, const float *invstd, float *y))                 \
    OPT(void, batchnorm_relu_backward,                                                         \
        (const sl_exec *ex, int n, int c, int hw, const float *x, const float *dy,             \
         const float *gamma, const float *beta, const float *save_mean,                        \
         const float *save_invstd, float *dx, int accumulate, float *dgamma, float *dbeta,     \
         int frozen, void *ws))                                                                \
    /* Max pooling; argmax (may be NULL in eval) gets the flat h*w index of                    \
     * each window's maximum (first maximum on ties). Padding never wins. */                   \
    REQ(void, maxpool_forward,                                                                 \
        (const sl_exec *ex, const sl_pool_desc *d, const float *x, float *y, int32_t *argmax)) \
    REQ(void, maxpool_backward,                                                                \
        (const sl_exec *ex, const sl_pool_desc *d, const int32_t *argmax, const float *dy,     \
         float *dx, int accumulate))                                                           \
    /* Average pooling dividing by kh*kw (padding counted). */                                 \
    REQ(void, avgpool_forward,                                                                 \
        (const sl_exec *ex, const sl_pool_desc *d, const float *x, float *y))                  \
    REQ(void, avgpool_backward,                                                                \
        (const sl_exec *ex, const sl_pool_desc *d, const float *dy, float *dx, int accumulate)) \
    /* y = max(x, 0); x and y may alias. */                                                    \
    REQ(void, relu_forward, (const sl_exec *ex, size_t count, const float *x, float *y))       \
    /* dx (+)= dy * (y > 0); dx and dy may alias when accumulate is 0. */                      \
    REQ(void, relu_backward,                                                                   \
        (const sl_exec *ex, size_t count, const float *y, const float *dy, float *dx,          \
         int accumulate))                                                                      \
    /* y = x * keep / (1 - p), keep drawn by Philox4x32-10 keyed by seed at                    \
     * counter blocks starting at `counter` (element i uses block                              \
     * counter + i / 4, word i % 4; kept iff word >= p * 2^32). */                             \
    REQ(void, dropout_forward,                                                                 \
        (const sl_exec *ex, size_t count, const float *x, float *y, float p, uint64_t seed,    \
         uint64_t counter))                                                                    \
    REQ(void, dropout_backward,                                                                \
        (const sl_exec *ex, size_t count, const float *dy, float *dx, float p, uint64_t seed,  \
         uint64_t counter, int accumulate))                                                    \
    /* dst[j] = uniform in [0, 1) for element e = first + j: word e % 4 of                     \
     * Philox4x32-10 block counter + e / 4 keyed by seed (dropout's words),                    \
     * as (word >> 8) * 2^-24. Custom layers' random numbers. */                               \
    REQ(void, random_uniform,                                                                  \
        (const sl_exec *ex, size_t count, uint64_t seed, uint64_t counter, uint64_t first,     \
         float *dst))                                                                          \
    /* y = a + b (any may alias). */                                                           \
    REQ(void, add,                                                                             \
        (const sl_exec *ex, size_t count, const float *a, const float *b, float *y))           \
    /* dst (+)= src (may alias when accumulate is 0). */                                       \
    REQ(void, copy,                                                                            \
        (const sl_exec *ex, size_t count, const float *src, float *dst, int accumulate))       \
    REQ(void, fill, (const sl_exec *ex, size_t count, float value, float *dst))                \
    /* dst[i] = src[i] as dst_type (count elements; src and dst do not                         \
     * overlap): F32 to BF16 by sl_bf16_round, BF16 to F32 by sl_bf16_widen,                   \
     * a copy when the types agree. Elementwise, so the same bits on every                     \
     * device. */                                                                              \
    REQ(void, cast,                                                                            \
        (const sl_exec *ex, size_t count, const void *src, sl_dtype src_type, void *dst,       \
         sl_dtype dst_type))                                                                   \
    /* Channel slices for concatenation: for each of n images, dst channels                    \
     * [dst_off, dst_off + c_src) (+)= src channels [src_off, src_off +                        \
     * c_src); both hold hw values per channel. */                                             \
    REQ(void, copy_channels,                                                                   \
        (const sl_exec *ex, int n, int hw, int c_count, const float *src, int src_c,           \
         int src_off, float *dst, int dst_c, int dst_off, int accumulate))                     \
    /* Global average pool: y[n*c] = mean of hw values; backward spreads. */                   \
    REQ(void, global_avgpool_forward,                                                          \
        (const sl_exec *ex, int nc, int hw, const float *x, float *y))                         \
    REQ(void, global_avgpool_backward,                                                         \
        (const sl_exec *ex, int nc, int hw, const float *dy, float *dx, int accumulate))       \
    /* y[n x out] += bias broadcast; dbias[out] += column sums of dy. */                       \
    REQ(void, bias_add, (const sl_exec *ex, int rows, int cols, const float *bias, float *y))  \
    REQ(void, bias_backward,                                                                   \
        (const sl_exec *ex, int rows, int cols, const float *dy, float *dbias))                \
    /* Mean softmax cross-entropy of n rows of `classes` logits; writes                        \
     * dlogits = (softmax - onehot) / n, the loss and the count of correct                     \
     * arg-max predictions. labels, loss and correct are host memory; loss                     \
     * and correct are written by the next sync (at once on the CPU: a                         \
     * device backend does not stop its queue for them); ws is                                 \
     * softmax_xent_workspace_bytes(n) of planned scratch (NULL when that is                   \
     * 0). */                                                                                  \
    REQ(void, softmax_xent,                                                                    \
        (const sl_exec *ex, int n, int classes, const float *logits, const int *labels,        \
         float *dlogits, float *loss, int *correct, void *ws))                                 \
    /* Workspace bytes softmax_xent needs for n rows; NULL: none (the CPU). */                 \
    OPT(size_t, softmax_xent_workspace_bytes, (const sl_backend *be, int n))                   \
    /* A language model's loss on one chunk of rows x vocab logits, ld floats                  \
     * from one row to the next (ld >= vocab; device memory, as labels,                        \
     * row_loss and row_hit): for each row whose label                                         \
     * is not ignore_index, row_loss = -log softmax(row)[label] (double),                      \
     * row_hit = 1 when the row's first arg-max is the label, and with grad                    \
     * the row is overwritten by (softmax - onehot) * scale; an ignored row                    \
     * gets loss 0, hit 0 and (with grad) a zero gradient. With ex->bf16                       \
     * (SL_BF16_GEMM: a bf16 head's logits) the rows are bf16, ld of them                      \
     * apart: the results are the float rows' on the widened logits, the                       \
     * gradient rounded. */                                                                    \
    REQ(void, lm_xent,                                                                         \
        (const sl_exec *ex, int rows, int vocab, int ld, float *logits, const int *labels,     \
         int ignore_index, float scale, int grad, double *row_loss, int *row_hit))             \
    /* The loss of a language model's run from the rows lm_xent wrote                          \
     * (device memory; an ignored row holds 0): *loss = counted ? (float)(sum                  \
     * / counted) : 0 with the rows' losses summed in double over a fixed                      \
     * tree, and *hits = the sum of row_hit. loss and hits are host memory                     \
     * written by the next sync (the queue does not stop here); ws is 16                       \
     * bytes of device scratch. NULL: the caller sums the rows in order (the                   \
     * CPU, where they are host memory). */                                                    \
    OPT(void, lm_xent_total,                                                                   \
        (const sl_exec *ex, int rows, const double *row_loss, const int *row_hit,              \
         int counted, float *loss, int *hits, void *ws))                                       \
    /* Optimizer updates over count parameters (PyTorch's rules), with the                     \
     * gradient g * grad_scale (1.0f leaves g exactly as it is). Adam's                        \
     * weight_decay is L2 added to the gradient, or with decoupled 1                           \
     * AdamW's w *= 1 - lr * weight_decay before the step. */                                  \
    REQ(void, sgd_update,                                                                      \
        (const sl_exec *ex, size_t count, float *w, const float *g, float *mom, float lr,      \
         float momentum, float weight_decay, int nesterov, int first, float grad_scale))       \
    REQ(void, adam_update,                                                                     \
        (const sl_exec *ex, size_t count, float *w, const float *g, float *m, float *v,        \
         float lr, float beta1, float beta2, float eps, float weight_decay, int decoupled,     \
         int64_t step, float grad_scale))                                                      \
    /* The same over n spans at once, each span exactly as sgd_update /                        \
     * adam_update would update it (its weight decay its own): a few                           \
     * launches for a network's hundreds of parameters. NULL: one call per                     \
     * span (the CPU). */                                                                      \
    OPT(void, sgd_update_list,                                                                 \
        (const sl_exec *ex, int n, const sl_update_span *spans, float lr, float momentum,      \
         int nesterov, int first, float grad_scale))                                           \
    OPT(void, adam_update_list,                                                                \
        (const sl_exec *ex, int n, const sl_update_span *spans, float lr, float beta1,         \
         float beta2, float eps, int decoupled, int64_t step, float grad_scale))               \
    /* LayerNorm over each of `rows` rows of c values (row-major): y =                         \
     * (x - mean) * rstd * weight + bias with the row's mean and rstd = 1 /                    \
     * sqrt(biased var + eps), written to mean / rstd (rows floats each)                       \
     * unless they are NULL (evaluation). Deterministic, so a re-forward                       \
     * writes the same bits. */                                                                \
    REQ(void, layernorm_forward,                                                               \
        (const sl_exec *ex, int rows, int c, const float *x, const float *weight,              \
         const float *bias, float eps, float *y, float *mean, float *rstd))                    \
    /* dx (+)= LayerNorm's input gradient (dx may be NULL); dweight +=                         \
     * column sums of dy * xhat, dbias += column sums of dy (in double, in                     \
     * the backend's fixed order), from the forward's mean and rstd. */                        \
    REQ(void, layernorm_backward,                                                              \
        (const sl_exec *ex, int rows, int c, const float *x, const float *dy,                  \
         const float *weight, const float *mean, const float *rstd, float *dx, int accumulate, \
         float *dweight, float *dbias))                                                        \
    /* GPT-2's tanh GELU, y = sl_gelu_of(x) (x and y may alias), and                           \
     * dx (+)= sl_gelu_grad_of(x, dy) from the forward's input. */                             \
    REQ(void, gelu_forward, (const sl_exec *ex, size_t count, const float *x, float *y))       \
    REQ(void, gelu_backward,                                                                   \
        (const sl_exec *ex, size_t count, const float *x, const float *dy, float *dx,          \
         int accumulate))                                                                      \
    /* Token + position embedding of n x t token ids (int32, row-major):                       \
     * y[(b t) row] = wte[id] + wpe[t], rows of c values. Ids outside [0,                      \
     * vocab) must be rejected by the caller; the kernels read nothing out                     \
     * of bounds for them (a zero token row, no gradient). Backward:                           \
     * dwte[id] += dy row, dwpe[t] += dy row, in float, each element of a                      \
     * table getting its tokens' adds in token order (the same bits on                         \
     * every device). ws: embedding_workspace_bytes(n * t) of scratch. */                      \
    REQ(void, embedding_forward,                                                               \
        (const sl_exec *ex, int n, int t, int c, int vocab, const int32_t *ids,                \
         const float *wte, const float *wpe, float *y))                                        \
    REQ(void, embedding_backward,                                                              \
        (const sl_exec *ex, int n, int t, int c, int vocab, const int32_t *ids,                \
         const float *dy, float *dwte, float *dwpe, void *ws))                                 \
    /* Workspace bytes of embedding_backward over `tokens` ids. NULL: none                     \
     * (the CPU). */                                                                           \
    OPT(size_t, embedding_workspace_bytes, (const sl_backend *be, int tokens))                 \
    /* Workspace bytes causal self-attention's forward (backward 0) or                         \
     * backward (1) needs for d (it does not depend on d's dropout). */                        \
    REQ(size_t, attention_workspace_bytes,                                                     \
        (const sl_backend *be, const sl_attention_desc *d, int backward))                      \
    /* y = softmax(q k^T / sqrt(d), causal) (dropped out with d->p) v per                      \
     * sequence and head; saved (NULL in evaluation) gets the mode's state                     \
     * (see sl_attention_desc). ws: attention_workspace_bytes(d, 0). */                        \
    REQ(void, attention_forward,                                                               \
        (const sl_exec *ex, const sl_attention_desc *d, const float *qkv, float *y,            \
         float *saved, void *ws))                                                              \
    /* dqkv (+)= the gradient of y with respect to qkv, from the forward's                     \
     * input, output (read by the tiled mode) and saved state, with the                        \
     * same dropout mask. ws: attention_workspace_bytes(d, 1). */                              \
    REQ(void, attention_backward,                                                              \
        (const sl_exec *ex, const sl_attention_desc *d, const float *qkv, const float *y,      \
         const float *dy, const float *saved, float *dqkv, int accumulate, void *ws))          \
    /* Whether attention_forward and _backward run d on bf16 activations                      \
     * themselves when the call's ex->bf16 is set (SL_BF16_ATTENTION: qkv, y,                  \
     * dy and dqkv bf16, the saved state and workspace float), with the same                   \
     * workspace. NULL, or 0: a bf16 network's attention runs on float copies. */              \
    OPT(int, attention_native_bf16, (const sl_backend *be, const sl_attention_desc *d))        \
    /* slots[t] += the sum of squares, in double and index order, of the                       \
     * elements t, t + S, t + 2S ... of x (S = SL_SUM_SQUARES_SLOTS; see                       \
     * base/element.h's sl_square_add); slots is backend memory.                               \
     * Deterministic: the gradient norm. */                                                    \
    REQ(void, sum_squares, (const sl_exec *ex, size_t count, const float *x, double *slots))   \
    /* sum_squares over n tensors in turn, each slot's sums in exactly the                     \
     * order n calls would add them. NULL: n calls. */                                         \
    OPT(void, sum_squares_list,                                                                \
        (const sl_exec *ex, int n, const float *const *x, const size_t *count, double *slots)) \
    /* y = softmax(q k^T / sqrt(d)) v per head for one new token whose keys                    \
     * and values of every position so far (its own included, the last                         \
     * row) are k and v: the row of causal attention that attention_forward                    \
     * gives that token, with the same element rules (sl_attn_logit,                           \
     * sl_attn_exp, the sum in double, p = e / (float)sum). q and y hold                       \
     * heads * d values (head h at h*d), k and v t rows of ld floats each                      \
     * (head h at columns h*d .. h*d+d-1): a KV cache's decoding step. No                      \
     * dropout, no workspace; deterministic. */                                                \
    REQ(void, attention_decode,                                                                \
        (const sl_exec *ex, int heads, int d, int t, const float *q, const float *k,           \
         const float *v, int ld, float *y))

/* Expanders for the lists: SL_BACKEND_TYPEDEF gives `sl_<member>_fn`,
 * SL_BACKEND_MEMBER a member of struct sl_backend, SL_BACKEND_SKIP nothing
 * (for the OPT entries a backend leaves NULL). */
#define SL_BACKEND_TYPEDEF(ret, member, params) typedef ret sl_##member##_fn params;
#define SL_BACKEND_MEMBER(ret, member, params) sl_##member##_fn *member;
#define SL_BACKEND_SKIP(ret, member, params)

SL_BACKEND_DEVICE(SL_BACKEND_TYPEDEF, SL_BACKEND_TYPEDEF)
SL_BACKEND_OPS(SL_BACKEND_TYPEDEF, SL_BACKEND_TYPEDEF)

/* The kernel families that take bf16 activations when the call's
 * ex->bf16 is set (sl_backend.bf16_kernels): their x, y, dy and dx (a, b
 * and y of add; src and dst of copy) are then bf16, each element widened
 * as it is read and rounded to nearest even as it is written, so the
 * result is the float kernel's on widened copies, rounded (the bits of
 * the executor's float-copies path). Weights, statistics and workspaces
 * stay float. */
enum {
    SL_BF16_RELU = 1u << 0,      /* relu_forward, relu_backward */
    SL_BF16_ADD = 1u << 1,       /* add, copy */
    SL_BF16_BATCHNORM = 1u << 2, /* batchnorm_forward_train / _apply / _infer, _backward */
    SL_BF16_GEMM = 1u << 3,      /* gemm_bf16 (and its workspace), bias_backward's dy,
                                    lm_xent's logits */
    SL_BF16_LAYERNORM = 1u << 4, /* layernorm_forward, _backward (rows of at most
                                    SL_BF16_ROW_MAX columns) */
    SL_BF16_GELU = 1u << 5,      /* gelu_forward, gelu_backward */
    SL_BF16_ATTENTION = 1u << 6, /* attention_forward, _backward where
                                    attention_native_bf16 says so (qkv, y,
                                    dy and dqkv bf16; the saved state float) */
};

/* The widest row a bf16 LayerNorm kernel takes (its rows are widened into
 * stack buffers). */
#define SL_BF16_ROW_MAX 4096

struct sl_backend {
    const char *name;
    /* 1 when the backend's memory is host memory (the CPU): pointers the
     * library hands out can be read and written directly. */
    int host_memory;
    /* SL_BF16_* families that honour sl_exec.bf16 (0: none). */
    unsigned bf16_kernels;
    /* 1 when its random kernels honour sl_exec.counter_delta (a device
     * that records work: then the steps of layers that draw may be
     * recorded too, SL_LAYER_GRAPH_DRAWS). */
    int counter_delta;
    /* The instance's own state (NULL on the CPU). */
    void *impl;
    /* Members documented in the two lists above. */
    SL_BACKEND_DEVICE(SL_BACKEND_MEMBER, SL_BACKEND_MEMBER)
    SL_BACKEND_OPS(SL_BACKEND_MEMBER, SL_BACKEND_MEMBER)
};

/* Per-run state: which backend, how many threads, and whether the
 * activations of this call are bf16 (only for the kernel families in
 * be->bf16_kernels; a layer sets it on its own copy for the calls that
 * take its bf16 tensors). */
struct sl_exec {
    const sl_backend *be;
    int threads;
    int bf16;
    /* NULL, or (where be->counter_delta) a uint64 in the backend's memory
     * that the random kernels of this call (dropout_forward, _backward,
     * attention's dropout, random_uniform) add to the Philox counter they
     * are given, read when they run: work recorded once (CUDA graphs) then
     * draws each replay's own masks from the counters of the recording
     * run plus that run's offset (executor.c). */
    const uint64_t *counter_delta;
};

/* Whether be joins BatchNorm and the ReLU after it: it has all three
 * batchnorm_relu_* ops (the executor's test, sl_program_joins_relu). */
static inline int sl_backend_joins_bn_relu(const sl_backend *be)
{
    return be->batchnorm_relu_forward_train && be->batchnorm_relu_forward_apply &&
           be->batchnorm_relu_backward;
}

/* Takes the batchnorm_relu_* ops from an instance's table (its switch
 * says keep BatchNorm and ReLU apart). */
static inline void sl_backend_drop_bn_relu(sl_backend *be)
{
    be->batchnorm_relu_forward_train = NULL;
    be->batchnorm_relu_forward_apply = NULL;
    be->batchnorm_relu_backward = NULL;
}

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
