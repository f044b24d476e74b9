/*
 * cuda_attention.cu — causal multi-head self-attention on the GPU (run
 * stage), both modes of sl_attention_desc. GPT-2's case (flash mode, head
 * size 64, TF32 allowed; with dropout too unless the fused kernels'
 * switches say otherwise) runs fused in tiles, cuda_flash.cu;
 * every other one here: the products on the tensor
 * cores through cuBLAS's batched GEMM, the softmax and the gradient of
 * the scores in small kernels between them, chunk by chunk of queries
 * (base/attn_chunks.h says how a call is cut, where each matrix lies, and
 * lists the products; tests/test_attn_chunks.c runs that same list on the
 * CPU). Per chunk of `chunk` query rows of a group of (sequence, head)
 * pairs, keys [0, keys) only (keys = the chunk's last query + 1):
 *
 *   forward   S = Q_c K^T                            batched GEMM
 *             softmax rows (scaled, causal) -> P o F  in place; lse or P saved
 *             Y_c = (P o F) V                         batched GEMM
 *   backward  (once) D_i = rowsum(dO o O) per row     flash only
 *             S = Q_c K^T                             flash only (plain reads P)
 *             G = dO_c V^T                            batched GEMM
 *             rows: P (exp(logit - lse), or read), F -> S = P o F,
 *                   G = dS = P o (G o F - D_i)
 *             dV (+)= S^T dO_c, dQ_c (+)= scale G K, dK (+)= scale G^T Q_c
 *
 * with F the dropout factors (base/element.h's sl_dropout_factors of mask
 * element sl_attn_element(bh, t, i, j): the CPU's mask, bit for bit). In
 * flash mode nothing of t x t size exists: a score buffer holds a chunk
 * (chunk x t per pair); plain mode writes (forward) and reads (backward)
 * the n*heads*t*t probabilities it saves.
 *
 * Traversal (fixed per shape; deterministic run to run):
 *  - GEMMs: cuBLAS, which gives the same bits for the same call on the
 *    same GPU; the calls are a function of (n, heads, t, d) and the
 *    instance's tf32 setting alone. Groups in order; chunks in order in
 *    the forward, from the last down in the backward (so the first one
 *    writes every dK/dV row and the others add, base/attn_chunks.h). No
 *    atomics anywhere.
 *  - Row kernels: one warp per score row. The row's maximum: each lane
 *    over keys j = lane, lane + 32, ... then a butterfly of
 *    __shfl_xor_sync (offsets 16, 8, 4, 2, 1). The row's sum of
 *    sl_attn_exp(logit, max): the same, in double (the CPU's rule and what
 *    sl_attn_lse takes; these kernels are memory-bound, and an H100's
 *    double rate costs nothing here); every lane ends with the same value
 *    (each node of the butterfly adds the same two numbers). The dropout
 *    factors: each lane takes whole 4-element Philox blocks of the row (a
 *    "quad": the row's mask elements grouped by element / 4), one Philox
 *    call per block.
 *  - D_i = rowsum(dO o O) (flash) and, in plain mode, D_i = sum_j
 *    (dPF F)_ij P_ij: a warp per row, each lane in order over its indices,
 *    then the same butterfly in double.
 * A forward and its re-forward are the same calls on the same shapes:
 * the same bits wherever the tensors lie (the products' math type does
 * not depend on the addresses as long as they are 16-byte aligned, which
 * the planner's 64-byte alignment gives).
 *
 * Probabilities: the forward's p = exp(logit - max) / (float)sum (the
 * CPU's plain rule, and sl_attention_decode's), so both modes give the
 * same y; the flash backward recomputes p = exp(logit - lse) (the CPU's
 * flash rule).
 *
 * Math: FP32 (CUBLAS_COMPUTE_32F_PEDANTIC) unless the instance allows
 * TF32, then CUBLAS_COMPUTE_32F_FAST_TF32: the same choice as the
 * handle's math mode that cuda_gemm.cu's cublasSgemm follows, written
 * out here because cuBLAS reads the matrices of a pointer-array GEMM in
 * fast modes with 16-byte loads: where some matrix is not 16-byte aligned
 * (a head size that is not a multiple of 4), these products stay FP32.
 *
 * The workspace (attention_workspace_bytes) is base/attn_chunks.h's
 * layout: the pointer arrays (written by a kernel at each call: no host
 * sync, nothing allocated), the score buffer(s) and, in the flash
 * backward, D.
 */
#include <math.h>
#include <stdint.h>

#include "base/attn_chunks.h"
#include "base/element.h"
#include "cuda/cuda_block.h"
#include "cuda/cuda_common.h"

/* ---------------------------------------------------------------- rows */

/* Row kernels: a warp per row (cuda_block.h's SL_CUDA_WARP_ROWS). */

/* Visits elements j in [0, len) of a row whose mask element j is e_row + j:
 * this lane's quads (sl_attn_quad: elements that share one Philox block),
 * each with its dropout factors drawn once for those below `valid` (the
 * causal ones); f(j, causal, factor) for each element. */
template <class F>
static __device__ inline void row_quads(uint64_t e_row, int len, int valid,
                                        const sl_dropout_mask &m, uint64_t counter, F f)
{
    int j0, n, nv;
    for (uint64_t q = threadIdx.x & 31; sl_attn_quad(e_row, len, valid, q, &j0, &n, &nv);
         q += 32) {
        float fac[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (nv > 0)
            sl_dropout_factors(&m, counter, e_row + (uint64_t)j0, nv, fac);
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (u < n)
                f(j0 + u, u < nv, fac[u]);
    }
}

/* One chunk's rows of one group: score row r of slot s is query i0 + r of
 * pair pair0 + s, at scores + s * slab + r * ld. */
struct chunk_rows {
    int t, i0, rows, keys, ld, pair0, pairs;
    int bh0; /* pairs before this call's in the dropout mask */
    size_t slab;
    float scale;
    uint64_t counter; /* the dropout mask's first block */
    const uint64_t *delta; /* added to it on the device (sl_exec.counter_delta), or NULL */
};

static chunk_rows chunk_rows_of(const sl_attn_layout &L, const sl_attention_desc *d, int ci,
                                int pair0, int pairs)
{
    chunk_rows c;
    c.t = L.t;
    sl_attn_chunk_rows(&L, ci, &c.i0, &c.rows, &c.keys);
    c.ld = L.ld;
    c.pair0 = pair0;
    c.pairs = pairs;
    c.slab = L.slab;
    c.scale = sl_attn_scale(d->d);
    c.counter = d->counter;
    c.delta = d->counter_delta;
    c.bh0 = d->bh0;
    return c;
}

/* The forward's row: logits S -> P o F in place (zero past the diagonal,
 * up to `keys`); plain and training (saved): P into the saved row (zero
 * from the diagonal to t); flash and training: the row's lse into saved. */
static __global__ void softmax_rows(chunk_rows c, float *scores, float *saved, int flash,
                                    sl_dropout_mask m)
{
    size_t rows = (size_t)c.pairs * (size_t)c.rows;
    int lane = (int)(threadIdx.x & 31);
    SL_CUDA_WARP_ROWS(row, rows)
    {
        int slot = (int)(row / (size_t)c.rows), r = (int)(row % (size_t)c.rows);
        int bh = c.pair0 + slot, i = c.i0 + r, valid = i + 1;
        float *s = scores + (size_t)slot * c.slab + (size_t)r * c.ld;
        float mx = -INFINITY;
        for (int j = lane; j < valid; j += 32)
            mx = fmaxf(mx, sl_attn_logit(s[j], c.scale));
        mx = sl_cuda_warp_max(mx);
        double sum = 0.0;
        for (int j = lane; j < valid; j += 32)
            sum += sl_attn_exp(sl_attn_logit(s[j], c.scale), mx);
        sum = sl_cuda_warp_sum(sum);
        float sf = (float)sum;
        __syncwarp(); /* every lane's reads of s above come before the quads' writes */
        float *p = saved && !flash ? saved + ((size_t)bh * c.t + i) * c.t : NULL;
        row_quads(sl_attn_element(c.bh0 + bh, c.t, i, 0), c.keys, valid, m, sl_cuda_counter(c.counter, c.delta),
                  [&](int j, bool causal, float f) {
                      float pj = causal ? sl_attn_exp(sl_attn_logit(s[j], c.scale), mx) / sf : 0.0f;
                      if (p)
                          p[j] = pj;
                      s[j] = pj * f;
                  });
        if (p)
            for (int j = c.keys + lane; j < c.t; j += 32)
                p[j] = 0.0f;
        if (saved && flash && lane == 0)
            saved[(size_t)bh * c.t + i] = sl_attn_lse(mx, sum);
    }
}

/* The backward's row: from the scores (flash: logits, recomputed by the
 * scores product; plain: the saved P is read instead) and G = dPF, writes
 * P o F into the scores and dS into G, both zero past the diagonal. D_i:
 * rowsum[] (flash) or, in plain mode, sum_j (dPF F) P here (the CPU's
 * plain rule; plain mode keeps no output to take rowsum(dO o O) from). */
static __global__ void grad_rows(chunk_rows c, float *scores, float *grads, const float *saved,
                                 const float *rowsum, int flash, sl_dropout_mask m)
{
    size_t rows = (size_t)c.pairs * (size_t)c.rows;
    SL_CUDA_WARP_ROWS(row, rows)
    {
        int slot = (int)(row / (size_t)c.rows), r = (int)(row % (size_t)c.rows);
        int bh = c.pair0 + slot, i = c.i0 + r, valid = i + 1;
        size_t at = (size_t)slot * c.slab + (size_t)r * c.ld;
        float *s = scores + at, *g = grads + at;
        uint64_t e_row = sl_attn_element(c.bh0 + bh, c.t, i, 0);
        size_t ri = (size_t)bh * c.t + i;
        const float *p = flash ? NULL : saved + ri * c.t;
        float lse = flash ? saved[ri] : 0.0f, di;
        if (flash) {
            di = rowsum[ri];
        } else {
            double acc = 0.0;
            row_quads(e_row, valid, valid, m, sl_cuda_counter(c.counter, c.delta), [&](int j, bool causal, float f) {
                (void)causal;
                acc += (double)(g[j] * f) * p[j];
            });
            di = (float)sl_cuda_warp_sum(acc);
        }
        row_quads(e_row, c.keys, valid, m, sl_cuda_counter(c.counter, c.delta), [&](int j, bool causal, float f) {
            if (causal) {
                float pj = flash ? sl_attn_exp(sl_attn_logit(s[j], c.scale), lse) : p[j];
                s[j] = pj * f;
                g[j] = sl_attn_grad_logit(pj, g[j], f, di);
            } else {
                s[j] = 0.0f;
                g[j] = 0.0f;
            }
        });
    }
}

/* D_i = rowsum(dO o O) of every row (pair-major: row bh * t + i), in
 * double over the head's channels. */
template <typename T> /* the activations' type (cuda_common.h) */
static __global__ void rowsum_rows(int pairs, int t, int heads, int hd, const T *y, const T *dy,
                                   float *out)
{
    size_t rows = (size_t)pairs * (size_t)t, c = (size_t)heads * hd;
    int lane = (int)(threadIdx.x & 31);
    SL_CUDA_WARP_ROWS(row, rows)
    {
        size_t bh = row / (size_t)t, i = row % (size_t)t;
        size_t b = bh / (size_t)heads, h = bh % (size_t)heads;
        size_t off = (b * (size_t)t + i) * c + h * (size_t)hd;
        double acc = 0.0;
        for (int k = lane; k < hd; k += 32)
            acc += (double)(sl_ld(y, off + k) * sl_ld(dy, off + k));
        acc = sl_cuda_warp_sum(acc);
        if (lane == 0)
            out[row] = (float)acc;
    }
}

/* ------------------------------------------------------------ pointers */

struct array_bases {
    float *at[SL_ATTN_ARRAYS];
};

/* Every pointer of the layout's arrays: entry e of array a is
 * base[a] + sl_attn_entry_offset(a, e). */
static __global__ void fill_pointers(sl_attn_layout L, array_bases base, float **out)
{
    GRID_STRIDE(e, L.entries)
    {
        int a = 0;
        while (a < SL_ATTN_ARRAYS - 1 && e >= L.first[a] + L.count[a])
            a++;
        out[e] = base.at[a] + sl_attn_entry_offset(&L, a, e - L.first[a]);
    }
}

/* ---------------------------------------------------------------- GEMMs */

/* Chunk ci's product `which` over the group's `pairs` pairs from pair0,
 * through cublasGemmBatchedEx, in base/attn_chunks.h's column-major form
 * (sl_attn_colmajor_of): row-major C[m x n] = alpha op(A) op(B) + beta C
 * is column-major C^T = alpha op(B)^T op(A)^T, so cuBLAS gets
 *   (op_b, op_a, M = n, N = m, K = k, B's array, ldb, A's array, lda,
 *    C's array, ldc),
 * cuda_gemm.cu's mapping, one matrix per pair. The products' pitches (3c,
 * c and ld) are at least their column counts (d, d and keys <= t), which
 * is what cuBLAS checks in column-major words. */
/* TF32 where the instance allows it and the product's three arrays are
 * 16-byte aligned; FP32 otherwise (see the top of the file). Decided per
 * product from its own arrays, so the flash backward's S = Q K^T runs in
 * the forward's math whatever the alignment of dy or dqkv. */
static cublasComputeType_t attn_math(const sl_cuda_state *s, const sl_attn_layout &L,
                                     const array_bases &b, const sl_attn_colmajor &x)
{
    if (!s->tf32 || !sl_attn_offsets_aligned16(&L))
        return CUBLAS_COMPUTE_32F_PEDANTIC;
    const int used[3] = {x.first, x.second, x.c};
    for (int a : used)
        if ((uintptr_t)b.at[a] % 16 != 0)
            return CUBLAS_COMPUTE_32F_PEDANTIC;
    return CUBLAS_COMPUTE_32F_FAST_TF32;
}

static void chunk_gemm(sl_cuda_state *s, const array_bases &b, const sl_attn_layout &L,
                       float **ptrs, int which, int ci, int pair0, int pairs, int accumulate)
{
    sl_attn_gemm g = sl_attn_product(&L, which, ci, accumulate, sl_attn_scale(L.d));
    sl_attn_colmajor x = sl_attn_colmajor_of(&g);
    cublasComputeType_t math = attn_math(s, L, b, x);
    const void *const *first =
        (const void *const *)(ptrs + sl_attn_entry_first(&L, x.first, ci, pair0));
    const void *const *second =
        (const void *const *)(ptrs + sl_attn_entry_first(&L, x.second, ci, pair0));
    void *const *c = (void *const *)(ptrs + sl_attn_entry_first(&L, x.c, ci, pair0));
    SL_CUBLAS_CHECK(s, cublasGemmBatchedEx(s->cublas, x.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                                           x.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, x.m, x.n,
                                           x.k, &x.alpha, first, CUDA_R_32F, x.ld_first, second,
                                           CUDA_R_32F, x.ld_second, &x.beta, c, CUDA_R_32F, x.ldc,
                                           pairs, math, CUBLAS_GEMM_DEFAULT));
}

/* Writes the layout's arrays for bases b into the workspace's pointers. */
static float **write_pointers(sl_cuda_state *s, const sl_attn_layout &L, const array_bases &b,
                              void *ws)
{
    float **ptrs = (float **)ws;
    fill_pointers<<<sl_cuda_blocks(L.entries), 256, 0, s->stream>>>(L, b, ptrs);
    SL_CUDA_LAUNCHED(s);
    return ptrs;
}

/* D_i = rowsum(dO o O) of every row of d's call into out (both flash
 * backwards). */
static void launch_rowsum(sl_cuda_state *s, const sl_attention_desc *d, int bf16, const float *y,
                          const float *dy, float *out)
{
    int pairs = d->n * d->heads;
    unsigned blocks = sl_cuda_warp_row_blocks((size_t)pairs * d->t);
    if (bf16)
        rowsum_rows<<<blocks, SL_CUDA_ROW_THREADS, 0, s->stream>>>(pairs, d->t, d->heads, d->d,
                                                                   SL_CBF(y), SL_CBF(dy), out);
    else
        rowsum_rows<<<blocks, SL_CUDA_ROW_THREADS, 0, s->stream>>>(pairs, d->t, d->heads, d->d, y,
                                                                   dy, out);
    SL_CUDA_LAUNCHED(s);
}

/* ---------------------------------------------------------------- table */

/* The fused path's workspace: the backward's D, one float per row. */
static size_t flash_rowsum_bytes(const sl_attention_desc *d, int backward)
{
    return backward ? sl_attn_align((size_t)d->n * d->heads * d->t * sizeof(float)) : 0;
}

extern "C" size_t sl_cuda_attention_workspace_bytes(const sl_backend *be,
                                                    const sl_attention_desc *d, int backward)
{
    if (sl_cuda_flash_applies(sl_cuda_of(be), d))
        return flash_rowsum_bytes(d, backward);
    return sl_attn_layout_for(d, backward, SL_ATTN_SCRATCH_BYTES).bytes;
}

/* bf16 activations in the fused kernels (SL_BF16_ATTENTION) wherever
 * they run d; the chunked path takes float copies. */
extern "C" int sl_cuda_attention_native_bf16(const sl_backend *be, const sl_attention_desc *d)
{
    return sl_cuda_flash_applies(sl_cuda_of(be), d);
}

extern "C" void sl_cuda_attention_forward(const sl_exec *ex, const sl_attention_desc *d,
                                          const float *qkv, float *y, float *saved, void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    if (sl_cuda_flash_applies(s, d)) {
        sl_cuda_flash_forward(s, d, ex->bf16, qkv, y, saved);
        return;
    }
    sl_attn_layout L = sl_attn_layout_for(d, 0, SL_ATTN_SCRATCH_BYTES);
    if (L.bytes == 0)
        return;
    float *scores = (float *)((char *)ws + L.scores_off);
    array_bases b = {};
    b.at[SL_ATTN_Q] = b.at[SL_ATTN_K] = b.at[SL_ATTN_V] = (float *)qkv;
    b.at[SL_ATTN_O] = y;
    b.at[SL_ATTN_S] = scores;
    float **ptrs = write_pointers(s, L, b, ws);
    /* evaluation (no saved state) drops nothing */
    sl_dropout_mask m = sl_dropout_mask_of(saved ? d->p : 0.0f, d->seed);
    for (int gi = 0; gi < L.groups; gi++) {
        int pair0, pairs;
        sl_attn_group_pairs(&L, gi, &pair0, &pairs);
        for (int ci = 0; ci < L.chunks; ci++) {
            chunk_rows c = chunk_rows_of(L, d, ci, pair0, pairs);
            chunk_gemm(s, b, L, ptrs, SL_ATTN_SCORES, ci, pair0, pairs, 0);
            unsigned blocks = sl_cuda_warp_row_blocks((size_t)pairs * c.rows);
            softmax_rows<<<blocks, SL_CUDA_ROW_THREADS, 0, s->stream>>>(c, scores, saved,
                                                                        d->flash, m);
            SL_CUDA_LAUNCHED(s);
            chunk_gemm(s, b, L, ptrs, SL_ATTN_OUTPUT, ci, pair0, pairs, 0);
        }
    }
}

extern "C" void sl_cuda_attention_backward(const sl_exec *ex, const sl_attention_desc *d,
                                           const float *qkv, const float *y, const float *dy,
                                           const float *saved, float *dqkv, int accumulate,
                                           void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    if (sl_cuda_flash_applies(s, d)) {
        float *rowsum = (float *)ws;
        launch_rowsum(s, d, ex->bf16, y, dy, rowsum);
        sl_cuda_flash_backward(s, d, ex->bf16, qkv, dy, saved, rowsum, dqkv, accumulate);
        return;
    }
    sl_attn_layout L = sl_attn_layout_for(d, 1, SL_ATTN_SCRATCH_BYTES);
    if (L.bytes == 0)
        return;
    float *scores = (float *)((char *)ws + L.scores_off);
    float *grads = (float *)((char *)ws + L.grads_off);
    float *rowsum = d->flash ? (float *)((char *)ws + L.rowsum_off) : NULL;
    array_bases b = {};
    b.at[SL_ATTN_Q] = b.at[SL_ATTN_K] = b.at[SL_ATTN_V] = (float *)qkv;
    b.at[SL_ATTN_O] = (float *)dy;
    b.at[SL_ATTN_DQ] = b.at[SL_ATTN_DK] = b.at[SL_ATTN_DV] = dqkv;
    b.at[SL_ATTN_S] = scores;
    b.at[SL_ATTN_G] = grads;
    float **ptrs = write_pointers(s, L, b, ws);
    if (d->flash)
        launch_rowsum(s, d, 0, y, dy, rowsum);
    sl_dropout_mask m = sl_dropout_mask_of(d->p, d->seed);
    for (int gi = 0; gi < L.groups; gi++) {
        int pair0, pairs;
        sl_attn_group_pairs(&L, gi, &pair0, &pairs);
        /* from the last chunk down: see sl_attn_product's beta */
        for (int ci = L.chunks - 1; ci >= 0; ci--) {
            chunk_rows c = chunk_rows_of(L, d, ci, pair0, pairs);
            if (d->flash)
                chunk_gemm(s, b, L, ptrs, SL_ATTN_SCORES, ci, pair0, pairs, accumulate);
            chunk_gemm(s, b, L, ptrs, SL_ATTN_DPF, ci, pair0, pairs, accumulate);
            unsigned blocks = sl_cuda_warp_row_blocks((size_t)pairs * c.rows);
            grad_rows<<<blocks, SL_CUDA_ROW_THREADS, 0, s->stream>>>(c, scores, grads, saved,
                                                                     rowsum, d->flash, m);
            SL_CUDA_LAUNCHED(s);
            chunk_gemm(s, b, L, ptrs, SL_ATTN_DVG, ci, pair0, pairs, accumulate);
            chunk_gemm(s, b, L, ptrs, SL_ATTN_DQG, ci, pair0, pairs, accumulate);
            chunk_gemm(s, b, L, ptrs, SL_ATTN_DKG, ci, pair0, pairs, accumulate);
        }
    }
}
