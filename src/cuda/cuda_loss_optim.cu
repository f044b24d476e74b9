/*
 * cuda_loss_optim.cu — softmax cross-entropy, a language model's loss and
 * the optimizer updates on the GPU (run stage), and the gradient norm's
 * sum of squares. The per-element and per-parameter rules are
 * base/element.h's, the ones cpu_loss_optim.c calls, so both devices
 * follow PyTorch's rules the same way. The traversals are this file's:
 * a classifier's rows (up to a few thousand classes, a batch of rows) a
 * block each, their losses summed in order by one thread; a language model's
 * vocabulary-wide rows a block each (staged in shared memory where it
 * holds them: lm_xent_staged_k) and their losses summed by one block
 * over a fixed tree (see lm_xent_k), read back once with the step's sync.
 */
#include <string.h>

#include "base/element.h"
#include "base/row_stage.h"
#include "cuda/cuda_block.h"
#include "cuda/cuda_common.h"

enum { XENT_THREADS = 256 };

/* A block of XENT_THREADS threads per row (a classifier's rows: up to a
 * few thousand classes, 16-256 rows): thread t scans the classes t, t +
 * XENT_THREADS, ... for its first maximum, joined by cuda_block.h's block
 * argmax (sl_argmax_takes); then adds the gradient's float exponentials
 * and the loss's double ones over the same classes, in order, in double,
 * each sum joined by the block's fixed tree; then writes its classes'
 * gradients. element.h's terms (sl_xent_exp, ...) as the CPU's row walk
 * calls them; only the order of the two sums differs from the CPU's, so
 * the results agree with the CPU's within rounding and are the same bits
 * on every run. A row's logits are not written (dlogits is another
 * tensor). The search skips NaNs, where the CPU's scan starts from x[0]:
 * a row whose first logit is NaN may count a hit on one device and not
 * the other (its loss and gradient are NaN on both). */
static __global__ void __launch_bounds__(XENT_THREADS)
    xent_rows_k(int n, int classes, const float *logits, const int *labels, float *dlogits,
                double *row_loss, int *row_hit)
{
    __shared__ double dsh[32];
    __shared__ float fsh[32];
    __shared__ int ish[32];
    float inv_n = 1.0f / (float)n;
    for (int r = (int)blockIdx.x; r < n; r += (int)gridDim.x) {
        const float *x = logits + (size_t)r * classes;
        int label = labels[r]; /* validated by the caller */
        float mx;
        int arg;
        sl_cuda_block_row_max<XENT_THREADS>(
            classes, [&](int j) { return x[j]; }, &mx, &arg, fsh, ish);
        double sg = 0.0, sl = 0.0;
        for (int j = (int)threadIdx.x; j < classes; j += XENT_THREADS) {
            float v = x[j];
            sg += sl_xent_exp(v, mx);
            sl += sl_xent_loss_exp(v, mx);
        }
        sg = sl_cuda_block_sum_warps(sg, dsh);
        sl = sl_cuda_block_sum_warps(sl, dsh);
        if (dlogits) {
            float inv_s = (float)(1.0 / sg), *g = dlogits + (size_t)r * classes;
            for (int j = (int)threadIdx.x; j < classes; j += XENT_THREADS) {
                float v = sl_xent_grad(sl_xent_exp(x[j], mx), inv_s, inv_n);
                g[j] = j == label ? v - inv_n : v;
            }
        }
        if (threadIdx.x == 0) {
            row_loss[r] = sl_xent_loss_of(sl, x[label], mx);
            row_hit[r] = arg == label;
        }
    }
}

/* The former traversal, one thread per row walking element.h's row
 * rules (the CPU's sums in the CPU's order): SL_CUDA_XENT_BLOCKS=off. */
static __global__ void xent_thread_rows(int n, int classes, const float *logits,
                                        const int *labels, float *dlogits, double *row_loss,
                                        int *row_hit)
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
    /* pageable labels are staged by the runtime before this returns; pinned
     * ones are read before the step's sync, while the caller still holds them */
    SL_CUDA_CHECK(s, cudaMemcpyAsync(d_labels, labels, (size_t)n * sizeof(int), cudaMemcpyHostToDevice,
                                  s->stream));
    if (s->xent_blocks)
        xent_rows_k<<<(unsigned)(n < 65536 ? n : 65536), XENT_THREADS, 0, s->stream>>>(
            n, classes, logits, d_labels, dlogits, row_loss, row_hit);
    else
        xent_thread_rows<<<(n + 127) / 128, 128, 0, s->stream>>>(n, classes, logits, d_labels,
                                                                  dlogits, row_loss, row_hit);
    SL_CUDA_LAUNCHED(s);
    xent_total<<<1, 1, 0, s->stream>>>(n, row_loss, row_hit, out);
    SL_CUDA_LAUNCHED(s);
    /* read back with the step's sync: the queue does not stop here */
    if (loss)
        sl_cuda_read_later(s, loss, out, sizeof(float));
    if (correct)
        sl_cuda_read_later(s, correct, out + 1, sizeof(int));
}

/* A language model's loss, a block of LM_THREADS threads per row of the
 * chunk: thread t scans the logits t, t + LM_THREADS, ... for its first
 * maximum, joined by cuda_block.h's block argmax (sl_argmax_takes); then
 * adds sl_exp_poly(x - max) over the same logits in order, in double,
 * joined by the block's fixed tree; then, with grad, writes its logits'
 * gradients in place. The rows' losses and hits stay on the device for
 * lm_xent_total. */
enum { LM_THREADS = 1024 };

/* An ignored row (its label the ignore index): gradient 0, loss 0, no hit. */
template <typename T>
static __device__ inline void ignored_row(T *x, int vocab, int grad, double *loss, int *hit)
{
    if (grad)
        for (int j = (int)threadIdx.x; j < vocab; j += LM_THREADS)
            sl_st(x, j, 0.0f);
    if (threadIdx.x == 0) {
        *loss = 0.0;
        *hit = 0;
    }
}

template <typename T> /* float, or bf16 logits (a bf16 head's, ex->bf16) */
static __global__ void __launch_bounds__(LM_THREADS)
    lm_xent_k(int rows, int vocab, int ld, T *logits, const int *labels, int ignore_index,
              float scale, int grad, double *row_loss, int *row_hit)
{
    __shared__ double dsh[32];
    __shared__ float fsh[32];
    __shared__ int ish[32];
    for (int r = (int)blockIdx.x; r < rows; r += (int)gridDim.x) {
        T *x = logits + (size_t)r * ld;
        int label = labels[r];
        if (label == ignore_index) {
            ignored_row(x, vocab, grad, row_loss + r, row_hit + r);
            continue;
        }
        /* read before any thread writes the row; a label outside the row
         * (the caller validates labels) reads nothing out of bounds */
        float at_label = label >= 0 && label < vocab ? sl_ld(x, label) : NAN;
        float mx;
        int arg;
        sl_cuda_block_row_max<LM_THREADS>(
            vocab, [&](int j) { return sl_ld(x, j); }, &mx, &arg, fsh, ish);
        double sum = 0.0;
        for (int j = (int)threadIdx.x; j < vocab; j += LM_THREADS)
            sum += sl_exp_poly(sl_ld(x, j) - mx);
        sum = sl_cuda_block_sum_warps(sum, dsh);
        if (grad) {
            float f = sl_lm_xent_factor(sum, scale);
            for (int j = (int)threadIdx.x; j < vocab; j += LM_THREADS) {
                float g = sl_exp_poly(sl_ld(x, j) - mx) * f;
                sl_st(x, j, j == label ? g - scale : g);
            }
        }
        if (threadIdx.x == 0) {
            row_loss[r] = sl_lm_xent_loss(sum, at_label, mx);
            row_hit[r] = arg == label;
        }
        __syncthreads(); /* the next row's at_label is read after this row's writes */
    }
}

/* A 16-byte piece in registers: 4 floats or 8 bf16. */
template <typename T>
static __device__ inline uint4 piece_load(const T *g)
{
    return *(const uint4 *)g;
}

/* A piece widened into 4-float-aligned shared memory. */
static __device__ inline void piece_put(const uint4 &u, const float *, float *sm)
{
    *(float4 *)sm = make_float4(__uint_as_float(u.x), __uint_as_float(u.y), __uint_as_float(u.z),
                                __uint_as_float(u.w));
}
static __device__ inline void piece_put(const uint4 &u, const uint16_t *, float *sm)
{
    ((float4 *)sm)[0] = sl_bf16x4_widen(make_uint2(u.x, u.y));
    ((float4 *)sm)[1] = sl_bf16x4_widen(make_uint2(u.z, u.w));
}

/* A piece of shared memory rounded into global memory. */
static __device__ inline void piece_out(const float *sm, float *g)
{
    *(float4 *)g = *(const float4 *)sm;
}
static __device__ inline void piece_out(const float *sm, uint16_t *g)
{
    uint2 lo = sl_bf16x4_round(((const float4 *)sm)[0]), hi = sl_bf16x4_round(((const float4 *)sm)[1]);
    *(uint4 *)g = make_uint4(lo.x, lo.y, hi.x, hi.y);
}

/* row[j] = x[j] widened (stage_in), or x[j] = row[j] rounded
 * (stage_out), j < n, by the block's threads: the head's and the tail's
 * values one a thread (ends), the pieces one a thread in turn. */
template <bool OUT, typename T>
static __device__ inline void stage_ends(T *x, float *row, int n, sl_row_stage st)
{
    for (int k = 0; k < 2; k++) {
        int j = sl_row_stage_end(st, n, (int)threadIdx.x, k);
        if (j < 0)
            continue;
        if (OUT)
            sl_st(x, j, row[j]);
        else
            row[j] = sl_ld(x, j);
    }
}

template <typename T>
static __device__ inline void stage_in(const T *x, float *row, int n, sl_row_stage st)
{
    stage_ends<false>((T *)x, row, n, st);
    /* PIECES loads in flight a thread before their stores to shared memory */
    enum { PIECES = 4 };
    for (int u0 = (int)threadIdx.x; u0 < st.units; u0 += PIECES * LM_THREADS) {
        uint4 p[PIECES];
#pragma unroll
        for (int k = 0; k < PIECES; k++) {
            int u = u0 + k * LM_THREADS;
            if (u < st.units)
                p[k] = piece_load(x + sl_row_stage_piece(st, u));
        }
#pragma unroll
        for (int k = 0; k < PIECES; k++) {
            int u = u0 + k * LM_THREADS;
            if (u < st.units)
                piece_put(p[k], x, row + sl_row_stage_piece(st, u));
        }
    }
}

template <typename T>
static __device__ inline void stage_out(const float *row, T *x, int n, sl_row_stage st)
{
    stage_ends<true>(x, (float *)row, n, st);
    for (int u = (int)threadIdx.x; u < st.units; u += LM_THREADS) {
        int j = sl_row_stage_piece(st, u);
        piece_out(row + j, x + j);
    }
}

/* The same loss with the row staged in shared memory (base/row_stage.h:
 * 16-byte loads and stores, widened to floats there): the row is read
 * from global memory once and its gradient written once, where
 * lm_xent_k reads it three times a value at a time. Each thread visits
 * the row's values in lm_xent_k's order and keeps its exponentials in
 * place for the gradient, the same function of the same value, so both
 * kernels give the same bits (SL_CUDA_XENT_STAGED=off runs lm_xent_k).
 * Launched with sl_row_stage_floats(vocab) floats of dynamic shared
 * memory where the device has them (any vocabulary to ~57k in float). */
template <typename T>
static __global__ void __launch_bounds__(LM_THREADS)
    lm_xent_staged_k(int rows, int vocab, int ld, T *logits, const int *labels, int ignore_index,
                     float scale, int grad, double *row_loss, int *row_hit)
{
    extern __shared__ float4 lm_row_smem[];
    __shared__ double dsh[32];
    __shared__ float fsh[32];
    __shared__ int ish[32];
    for (int r = (int)blockIdx.x; r < rows; r += (int)gridDim.x) {
        T *x = logits + (size_t)r * ld;
        int label = labels[r];
        if (label == ignore_index) {
            ignored_row(x, vocab, grad, row_loss + r, row_hit + r);
            continue;
        }
        sl_row_stage st = sl_row_stage_of((uintptr_t)x, vocab, (int)sizeof(T));
        float *row = (float *)lm_row_smem + st.off;
        stage_in(x, row, vocab, st);
        __syncthreads();
        float at_label = label >= 0 && label < vocab ? row[label] : NAN;
        float mx;
        int arg;
        /* its barriers also order every thread's read of at_label before
         * the writes below */
        sl_cuda_block_row_max<LM_THREADS>(
            vocab, [&](int j) { return row[j]; }, &mx, &arg, fsh, ish);
        double sum = 0.0;
        for (int j = (int)threadIdx.x; j < vocab; j += LM_THREADS) {
            float e = sl_exp_poly(row[j] - mx);
            sum += e;
            row[j] = e; /* a thread's own values: read back only by it */
        }
        sum = sl_cuda_block_sum_warps(sum, dsh);
        if (grad) {
            float f = sl_lm_xent_factor(sum, scale);
            for (int j = (int)threadIdx.x; j < vocab; j += LM_THREADS) {
                float g = row[j] * f;
                row[j] = j == label ? g - scale : g;
            }
            __syncthreads();
            stage_out(row, x, vocab, st);
        }
        if (threadIdx.x == 0) {
            row_loss[r] = sl_lm_xent_loss(sum, at_label, mx);
            row_hit[r] = arg == label;
        }
        __syncthreads(); /* the next row is staged after this row's reads */
    }
}

/* Dynamic shared memory of lm_xent_staged_k<T> for a vocabulary, or 0
 * where it is off or the device has not that much beside the kernel's
 * static arrays (as ptxas counted them). */
template <typename T>
static size_t staged_smem_bytes(const sl_cuda_state *s, int vocab)
{
    cudaFuncAttributes fa;
    if (!s->xent_staged)
        return 0;
    if (cudaFuncGetAttributes(&fa, lm_xent_staged_k<T>) != cudaSuccess) {
        (void)cudaGetLastError(); /* optional: the three passes run instead */
        return 0;
    }
    size_t bytes = ((size_t)sl_row_stage_floats(vocab) * sizeof(float) + 15) / 16 * 16;
    return bytes + fa.sharedSizeBytes <= s->smem_optin ? bytes : 0;
}

extern "C" int sl_cuda_lm_xent_staged(const sl_backend *be, int vocab)
{
    const sl_cuda_state *s = sl_cuda_of(be);
    return vocab > 0 && staged_smem_bytes<float>(s, vocab) && staged_smem_bytes<uint16_t>(s, vocab);
}

extern "C" void sl_cuda_lm_xent(const sl_exec *ex, int rows, int vocab, int ld, float *logits,
                                const int *labels, int ignore_index, float scale, int grad,
                                double *row_loss, int *row_hit)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    if (rows <= 0 || vocab <= 0)
        return;
    sl_cuda_typed(ex, [&](auto z) {
        using T = decltype(z);
        size_t smem = staged_smem_bytes<T>(s, vocab);
        if (smem && cudaFuncSetAttribute(lm_xent_staged_k<T>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem) != cudaSuccess) {
            (void)cudaGetLastError(); /* refused: the three passes, the same bits */
            smem = 0;
        }
        if (smem) {
            lm_xent_staged_k<<<(unsigned)rows, LM_THREADS, smem, s->stream>>>(
                rows, vocab, ld, sl_as<T>(logits), labels, ignore_index, scale, grad, row_loss,
                row_hit);
        } else {
            lm_xent_k<<<(unsigned)rows, LM_THREADS, 0, s->stream>>>(
                rows, vocab, ld, sl_as<T>(logits), labels, ignore_index, scale, grad, row_loss,
                row_hit);
        }
    });
    SL_CUDA_LAUNCHED(s);
}

/* One block: thread t adds the rows t, t + LM_THREADS, ... in order, in
 * double (hits as ints), joined by the block's fixed tree. */
static __global__ void __launch_bounds__(LM_THREADS)
    lm_total_k(int rows, const double *row_loss, const int *row_hit, int counted, float *out)
{
    __shared__ double dsh[32];
    double sum = 0.0, hits = 0.0;
    for (int r = (int)threadIdx.x; r < rows; r += LM_THREADS) {
        sum += row_loss[r];
        hits += row_hit[r];
    }
    sum = sl_cuda_block_sum_warps(sum, dsh);
    hits = sl_cuda_block_sum_warps(hits, dsh); /* exact: whole numbers below 2^53 */
    if (threadIdx.x == 0) {
        out[0] = counted ? (float)(sum / counted) : 0.0f;
        ((int *)out)[1] = (int)hits;
    }
}

extern "C" void sl_cuda_lm_xent_total(const sl_exec *ex, int rows, const double *row_loss,
                                      const int *row_hit, int counted, float *loss, int *hits,
                                      void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    float *out = (float *)ws; /* planned: 16 bytes */
    if (rows <= 0) {
        *loss = 0.0f;
        *hits = 0;
        return;
    }
    lm_total_k<<<1, LM_THREADS, 0, s->stream>>>(rows, row_loss, row_hit, counted, out);
    SL_CUDA_LAUNCHED(s);
    sl_cuda_read_later(s, loss, out, sizeof(float));
    sl_cuda_read_later(s, hits, out + 1, sizeof(int));
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

/* ---- list updates: a network's parameters in a few launches ---- */

/* One launch's spans and blocks, passed by value (under the 4 KiB of
 * kernel parameters): block b updates elements [chunk * kListChunk, +
 * kListChunk) of span span[b]. A span cut by a full launch goes on in
 * the next one. Each element gets the same element rule as the
 * one-tensor kernels, so a list update is bit for bit the updates one
 * span at a time. Where a span's tensors all start on 16 bytes (vec), a
 * thread loads 4 elements of each at once and applies the rule to each of
 * the 4 in registers: ncu (2026-11-27) had the one-element loop at 42 us
 * a launch of 2.6 M elements, 0.9 TB/s, each iteration's loads waiting
 * for the last one's stores. */
enum { kListSpans = 32, kListBlocks = 320, kListChunk = 256 * 32 };
static_assert(kListChunk % 4 == 0, "a chunk starts on whole float4s");
struct span_list {
    float *w[kListSpans];
    const float *g[kListSpans];
    float *m[kListSpans];
    float *v[kListSpans];
    size_t count[kListSpans];
    float wd[kListSpans];
    unsigned char adam_of[kListSpans]; /* which of two Adam constants */
    unsigned char vec[kListSpans];     /* w, g, m (and v) 16-byte aligned */
    unsigned char span[kListBlocks];
    unsigned int chunk[kListBlocks];
    sl_adam_step adam[2];
    int n_spans, n_blocks;
};
static_assert(sizeof(span_list) <= 4000, "kernel parameters are at most 4 KiB");

/* Block b's elements [lo, hi) of its span, 4 at a time where the span
 * allows: rule(e, w4, g4, m4, v4) on arrays of the 4 elements (m and v
 * may be NULL: SGD without momentum has neither), each element's
 * arithmetic that of the one-element rule. */
template <class Rule>
static __device__ inline void list_block(const span_list &L, Rule rule)
{
    int k = L.span[blockIdx.x];
    size_t lo = (size_t)L.chunk[blockIdx.x] * kListChunk;
    size_t hi = lo + kListChunk < L.count[k] ? lo + kListChunk : L.count[k];
    float *__restrict__ w = L.w[k];
    const float *__restrict__ g = L.g[k];
    float *__restrict__ m = L.m[k];
    float *__restrict__ v = L.v[k];
    size_t first = lo;
    if (L.vec[k]) {
        size_t hi4 = hi / 4;
#pragma unroll 2
        for (size_t j = lo / 4 + threadIdx.x; j < hi4; j += blockDim.x) {
            float4 W = ((const float4 *)w)[j], G = ((const float4 *)g)[j];
            float4 M = m ? ((const float4 *)m)[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            float4 V = v ? ((const float4 *)v)[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            float w4[4] = {W.x, W.y, W.z, W.w}, g4[4] = {G.x, G.y, G.z, G.w};
            float m4[4] = {M.x, M.y, M.z, M.w}, v4[4] = {V.x, V.y, V.z, V.w};
#pragma unroll
            for (int e = 0; e < 4; e++)
                rule((size_t)e, w4, g4, m4, v4);
            ((float4 *)w)[j] = make_float4(w4[0], w4[1], w4[2], w4[3]);
            if (m)
                ((float4 *)m)[j] = make_float4(m4[0], m4[1], m4[2], m4[3]);
            if (v)
                ((float4 *)v)[j] = make_float4(v4[0], v4[1], v4[2], v4[3]);
        }
        first = hi4 * 4 > lo ? hi4 * 4 : lo;
    }
    for (size_t i = first + threadIdx.x; i < hi; i += blockDim.x)
        rule(i, w, g, m, v);
}

static __global__ void sgd_list_k(span_list L, float lr, float momentum, int nesterov, int first,
                                  float grad_scale)
{
    float wd = L.wd[L.span[blockIdx.x]];
    list_block(L, [&](size_t i, float *w, const float *g, float *m, float *) {
        sl_sgd_element(i, w, g, m, lr, momentum, wd, nesterov, first, grad_scale);
    });
}

static __global__ void adam_list_k(span_list L)
{
    const sl_adam_step *a = &L.adam[L.adam_of[L.span[blockIdx.x]]];
    list_block(L, [&](size_t i, float *w, const float *g, float *m, float *v) {
        sl_adam_element(i, w, g, m, v, a);
    });
}

/* The Adam constants of one weight decay (sl_adam_step_of). */
struct adam_consts {
    float lr, beta1, beta2, eps;
    int decoupled;
    int64_t step;
    float grad_scale;
};

template <typename Launch>
static void run_list(int n, const sl_update_span *spans, const adam_consts *ac, Launch launch)
{
    span_list L;
    memset(&L, 0, sizeof L);
    float wd_of[2] = {0.0f, 0.0f};
    int n_wd = 0;
    for (int i = 0; i < n; i++) {
        size_t chunks = (spans[i].count + kListChunk - 1) / kListChunk;
        for (size_t c = 0; c < chunks; c++) {
            int new_span = c == 0;
            int slot = -1; /* the launch's Adam constants a new span needs */
            for (int q = 0; new_span && ac && q < n_wd; q++)
                if (wd_of[q] == spans[i].weight_decay)
                    slot = q;
            if (L.n_blocks == kListBlocks ||
                (new_span && (L.n_spans == kListSpans || (ac && slot < 0 && n_wd == 2)))) {
                launch(L);
                L.n_spans = L.n_blocks = 0;
                n_wd = 0;
                slot = -1;
                new_span = 1;
            }
            if (new_span) {
                if (ac && slot < 0) {
                    slot = n_wd;
                    wd_of[n_wd++] = spans[i].weight_decay;
                    L.adam[slot] = sl_adam_step_of(ac->lr, ac->beta1, ac->beta2, ac->eps,
                                                   spans[i].weight_decay, ac->decoupled, ac->step,
                                                   ac->grad_scale);
                }
                int k = L.n_spans++;
                L.w[k] = spans[i].w;
                L.g[k] = spans[i].g;
                L.m[k] = spans[i].m;
                L.v[k] = spans[i].v;
                L.count[k] = spans[i].count;
                L.wd[k] = spans[i].weight_decay;
                L.adam_of[k] = (unsigned char)(slot < 0 ? 0 : slot);
                L.vec[k] = sl_cuda_aligned16(spans[i].w, spans[i].g, spans[i].m) &&
                           sl_cuda_aligned16(spans[i].v, NULL, NULL);
            }
            L.span[L.n_blocks] = (unsigned char)(L.n_spans - 1);
            L.chunk[L.n_blocks++] = (unsigned int)c;
        }
    }
    if (L.n_blocks)
        launch(L);
}

extern "C" void sl_cuda_sgd_update_list(const sl_exec *ex, int n, const sl_update_span *spans,
                                        float lr, float momentum, int nesterov, int first,
                                        float grad_scale)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    run_list(n, spans, NULL, [&](const span_list &L) {
        sgd_list_k<<<L.n_blocks, 256, 0, s->stream>>>(L, lr, momentum, nesterov, first,
                                                      grad_scale);
        SL_CUDA_LAUNCHED(s);
    });
}

extern "C" void sl_cuda_adam_update_list(const sl_exec *ex, int n, const sl_update_span *spans,
                                         float lr, float beta1, float beta2, float eps,
                                         int decoupled, int64_t step, float grad_scale)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    adam_consts ac = {lr, beta1, beta2, eps, decoupled, step, grad_scale};
    run_list(n, spans, &ac, [&](const span_list &L) {
        adam_list_k<<<L.n_blocks, 256, 0, s->stream>>>(L);
        SL_CUDA_LAUNCHED(s);
    });
}

/* Slot t's sum of squares of x: elements t, t + S, t + 2S ... added in
 * index order (sl_square_add), their loads issued kSquareBatch at a time
 * ahead of the adds. 16384 slot threads keep few loads in flight each;
 * loading ahead gives the memory system more to do at once without
 * changing the order of a single addition. (ptxas keeps about 12 loads
 * ahead of the adds whatever the batch: GPT-2 small's 124 M gradients
 * took 0.38 ms a step, 1.3 TB/s, ncu 2026-11-27.) */
enum { kSquareBatch = 16 };
static __device__ double slot_squares(const float *x, size_t n, size_t t)
{
    const size_t S = SL_SUM_SQUARES_SLOTS;
    double acc = 0.0;
    size_t i = t;
    for (; i + (kSquareBatch - 1) * S < n; i += kSquareBatch * S) {
        float v[kSquareBatch];
#pragma unroll
        for (int b = 0; b < kSquareBatch; b++)
            v[b] = x[i + (size_t)b * S];
#pragma unroll
        for (int b = 0; b < kSquareBatch; b++)
            acc = sl_square_add(acc, v[b]);
    }
    for (; i < n; i += S)
        acc = sl_square_add(acc, x[i]);
    return acc;
}

/* One thread per slot, striding by the slot count (adjacent threads read
 * adjacent elements): each slot's terms in the CPU's order. */
static __global__ void sum_squares_k(size_t n, const float *x, double *slots)
{
    size_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= SL_SUM_SQUARES_SLOTS)
        return;
    slots[t] += slot_squares(x, n, t);
}

extern "C" void sl_cuda_sum_squares(const sl_exec *ex, size_t count, const float *x,
                                    double *slots)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    sum_squares_k<<<SL_SUM_SQUARES_SLOTS / 128, 128, 0, s->stream>>>(count, x, slots);
    SL_CUDA_LAUNCHED(s);
}

/* sum_squares over up to kSquareTensors tensors per launch: each slot's
 * thread adds each tensor's sum to its slot in turn, as one launch per
 * tensor would. */
enum { kSquareTensors = 200 };
struct square_list {
    const float *x[kSquareTensors];
    size_t count[kSquareTensors];
    int n;
};
static_assert(sizeof(square_list) <= 4000, "kernel parameters are at most 4 KiB");

static __global__ void sum_squares_list_k(square_list L, double *slots)
{
    size_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= SL_SUM_SQUARES_SLOTS)
        return;
    double slot = slots[t];
    for (int k = 0; k < L.n; k++) {
        slot += slot_squares(L.x[k], L.count[k], t);
    }
    slots[t] = slot;
}

extern "C" void sl_cuda_sum_squares_list(const sl_exec *ex, int n, const float *const *x,
                                         const size_t *count, double *slots)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    for (int first = 0; first < n; first += kSquareTensors) {
        square_list L;
        L.n = n - first < kSquareTensors ? n - first : kSquareTensors;
        for (int k = 0; k < L.n; k++) {
            L.x[k] = x[first + k];
            L.count[k] = count[first + k];
        }
        sum_squares_list_k<<<SL_SUM_SQUARES_SLOTS / 128, 128, 0, s->stream>>>(L, slots);
        SL_CUDA_LAUNCHED(s);
    }
}
