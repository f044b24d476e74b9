/*
 * attn_chunks.h — how the CUDA backend cuts causal self-attention into
 * batched GEMMs over chunks of queries (run stage; the plan reserves the
 * workspace through the backend's attention_workspace_bytes). Plain
 * arithmetic that C and nvcc both read: cuda_attention.cu runs exactly
 * these products on cuBLAS, and tests/test_attn_chunks.c runs the same
 * list with cblas on the CPU against cpu_attention.c, so every index,
 * leading dimension, transposition and beta of the GPU's schedule is
 * checked where no GPU is.
 *
 * Words. A pair is one (sequence b, head h), bh = b * heads + h, of
 * `pairs` = n * heads. A chunk is `chunk` consecutive query rows of every
 * pair, [i0, i0 + rows), with rows = chunk except in the last chunk; its
 * causal key range is [0, keys), keys = i0 + rows (no key past the
 * chunk's last query is ever multiplied). A group is `group` consecutive
 * pairs whose chunk is one batched GEMM; a slot is a pair's place in its
 * group, and owns `slab` floats of each score buffer: the chunk's rows x
 * keys scores, row-major with `ld` floats between rows.
 *
 * The chunk and the group are pure functions of (n, heads, t) and the
 * scratch size, never of the device or the call, so a forward and its
 * re-forward run the same GEMMs in the same order: the same bits.
 *
 * Workspace (bytes from the workspace pointer, each region starting on
 * SL_ATTN_ALIGN bytes):
 *   pointers   `entries` device pointers, the batched GEMMs' arrays (one
 *              array per operand, see sl_attn_entry_offset);
 *   scores     group * slab floats: S = Q K^T, then P o F in place;
 *   grads      (backward) group * slab floats: dPF = dO V^T, then dS;
 *   rowsum     (backward, flash) pairs * t floats: D_i = rowsum(dO o O).
 * Forward: pointers + scores. T x T is never stored: a slab is chunk x t.
 */
#ifndef SL_ATTN_CHUNKS_H
#define SL_ATTN_CHUNKS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/backend.h"
#include "base/philox.h" /* SL_HD */

/* Bytes of one score buffer the chunk is sized to (a ceiling, except
 * where even one group of the smallest chunk needs more). 24 MiB: at
 * GPT-2 small's B=8 T=1024 (96 pairs) that is 64 query rows of every
 * pair in one GEMM, and the forward's one buffer stays resident in an
 * H100's 50 MB L2 between the score GEMM, the softmax and the value GEMM;
 * the backward's two buffers and the rest come to 48.4 MiB. */
#define SL_ATTN_SCRATCH_BYTES ((size_t)24 << 20)
/* The smallest chunk (rows of a tensor-core tile; shorter sequences take
 * one chunk of t), and the step chunks are rounded down to. */
#define SL_ATTN_MIN_CHUNK 64
#define SL_ATTN_CHUNK_STEP 16
/* The most matrices one batched GEMM is given (a CUDA grid's y and z
 * limit, where batched kernels may put the batch). */
#define SL_ATTN_MAX_GROUP 65535
/* Alignment of each workspace region. */
#define SL_ATTN_ALIGN 256

/* The batched GEMMs' operand arrays. O is the output y in the forward and
 * its gradient dy in the backward (the same layout); S and G the two score
 * buffers. */
enum {
    SL_ATTN_Q,
    SL_ATTN_K,
    SL_ATTN_V,
    SL_ATTN_O,
    SL_ATTN_DQ,
    SL_ATTN_DK,
    SL_ATTN_DV,
    SL_ATTN_S,
    SL_ATTN_G,
    SL_ATTN_ARRAYS
};

/* What an array's entries are indexed by: (chunk, pair) for the query-side
 * rows of a chunk, the pair for the key side (always from key row 0), the
 * slot for the score buffers. */
enum { SL_ATTN_PER_CHUNK, SL_ATTN_PER_PAIR, SL_ATTN_PER_SLOT };

SL_HD static inline int sl_attn_kind(int array)
{
    switch (array) {
    case SL_ATTN_K:
    case SL_ATTN_V:
    case SL_ATTN_DK:
    case SL_ATTN_DV:
        return SL_ATTN_PER_PAIR;
    case SL_ATTN_S:
    case SL_ATTN_G:
        return SL_ATTN_PER_SLOT;
    default:
        return SL_ATTN_PER_CHUNK;
    }
}

typedef struct sl_attn_layout {
    int t, heads, d;     /* tokens, heads, head size */
    int pairs;           /* n * heads */
    int chunk, chunks;   /* query rows per chunk (the last may be fewer); ceil(t / chunk) */
    int group, groups;   /* pairs per batched GEMM (the last may be fewer); ceil(pairs / group) */
    int ld;              /* floats between two score rows: t rounded up to 4 */
    size_t slab;         /* floats of one slot's scores: chunk * ld */
    size_t first[SL_ATTN_ARRAYS], count[SL_ATTN_ARRAYS]; /* each array's entries */
    size_t entries;      /* pointers in all */
    size_t scores_off, grads_off, rowsum_off; /* byte offsets (0 where absent) */
    size_t bytes;        /* the workspace */
} sl_attn_layout;

static inline size_t sl_attn_align(size_t bytes)
{
    return (bytes + SL_ATTN_ALIGN - 1) / SL_ATTN_ALIGN * SL_ATTN_ALIGN;
}

/* The layout of d's forward (backward 0) or backward (1) under a score
 * buffer of scratch_bytes (the backend passes SL_ATTN_SCRATCH_BYTES; tests
 * pass less to reach several chunks and groups). All zero (bytes 0) when
 * there is nothing to compute. The chunk: the rows of every pair that fit
 * the buffer, rounded down to SL_ATTN_CHUNK_STEP, at least
 * min(t, SL_ATTN_MIN_CHUNK), at most t; the group: the pairs whose chunks
 * then fit, at least 1, at most all (and SL_ATTN_MAX_GROUP). */
static inline sl_attn_layout sl_attn_layout_for(const sl_attention_desc *d, int backward,
                                                size_t scratch_bytes)
{
    sl_attn_layout L;
    memset(&L, 0, sizeof L);
    if (d->n < 1 || d->heads < 1 || d->t < 1 || d->d < 1)
        return L;
    size_t pairs = (size_t)d->n * (size_t)d->heads, t = (size_t)d->t;
    L.t = d->t;
    L.heads = d->heads;
    L.d = d->d;
    L.pairs = (int)pairs;
    L.ld = (int)((t + 3) / 4 * 4);
    size_t rows = scratch_bytes / sizeof(float) / (size_t)L.ld;
    if (rows < 1)
        rows = 1;
    size_t chunk = rows / pairs / SL_ATTN_CHUNK_STEP * SL_ATTN_CHUNK_STEP;
    size_t least = t < SL_ATTN_MIN_CHUNK ? t : SL_ATTN_MIN_CHUNK;
    if (chunk < least)
        chunk = least;
    if (chunk > t)
        chunk = t;
    size_t group = rows / chunk;
    if (group < 1)
        group = 1;
    if (group > pairs)
        group = pairs;
    if (group > SL_ATTN_MAX_GROUP)
        group = SL_ATTN_MAX_GROUP;
    L.chunk = (int)chunk;
    L.chunks = (int)((t + chunk - 1) / chunk);
    L.group = (int)group;
    L.groups = (int)((pairs + group - 1) / group);
    L.slab = chunk * (size_t)L.ld;
    for (int a = 0; a < SL_ATTN_ARRAYS; a++) {
        int fwd = a == SL_ATTN_Q || a == SL_ATTN_K || a == SL_ATTN_V || a == SL_ATTN_O ||
                  a == SL_ATTN_S;
        int kind = sl_attn_kind(a);
        L.first[a] = L.entries;
        L.count[a] = !backward && !fwd                ? 0
                     : kind == SL_ATTN_PER_CHUNK ? (size_t)L.chunks * pairs
                     : kind == SL_ATTN_PER_PAIR  ? pairs
                                                 : group;
        L.entries += L.count[a];
    }
    size_t off = sl_attn_align(L.entries * sizeof(float *));
    size_t buffer = sl_attn_align(group * L.slab * sizeof(float));
    L.scores_off = off;
    off += buffer;
    if (backward) {
        L.grads_off = off;
        off += buffer;
        if (d->flash) {
            L.rowsum_off = off;
            off += sl_attn_align(pairs * t * sizeof(float));
        }
    }
    L.bytes = off;
    return L;
}

/* Chunk ci's query rows [*i0, *i0 + *rows) and its causal key range
 * [0, *keys). */
static inline void sl_attn_chunk_rows(const sl_attn_layout *L, int ci, int *i0, int *rows,
                                      int *keys)
{
    *i0 = ci * L->chunk;
    *rows = L->t - *i0 < L->chunk ? L->t - *i0 : L->chunk;
    *keys = *i0 + *rows;
}

/* Group g's pairs [*pair0, *pair0 + *count). */
static inline void sl_attn_group_pairs(const sl_attn_layout *L, int g, int *pair0, int *count)
{
    *pair0 = g * L->group;
    *count = L->pairs - *pair0 < L->group ? L->pairs - *pair0 : L->group;
}

/* The floats between array a's base and the first element of its entry e
 * (e counted from the array's own start). Bases: Q, K, V at qkv, and DQ,
 * DK, DV at dqkv (n*t rows of 3c, c = heads * d: q at column h*d, k at
 * c + h*d, v at 2c + h*d); O at y or dy (n*t rows of c, head h at h*d); S
 * and G at their buffers. A PER_CHUNK entry e is (chunk e / pairs, pair
 * e % pairs) and points at the pair's row i0 of that chunk; a PER_PAIR
 * entry is the pair, at its row 0; a PER_SLOT entry the slot's slab.
 * Called by the GPU kernel that writes the arrays. */
SL_HD static inline size_t sl_attn_entry_offset(const sl_attn_layout *L, int a, size_t e)
{
    int kind = sl_attn_kind(a);
    if (kind == SL_ATTN_PER_SLOT)
        return e * L->slab;
    size_t pairs = (size_t)L->pairs;
    size_t pair = kind == SL_ATTN_PER_CHUNK ? e % pairs : e;
    size_t row0 = kind == SL_ATTN_PER_CHUNK ? e / pairs * (size_t)L->chunk : 0;
    size_t b = pair / (size_t)L->heads, h = pair % (size_t)L->heads;
    size_t c = (size_t)L->heads * (size_t)L->d;
    size_t width = a == SL_ATTN_O ? c : 3 * c;
    size_t col = a == SL_ATTN_K || a == SL_ATTN_DK   ? c
                 : a == SL_ATTN_V || a == SL_ATTN_DV ? 2 * c
                                                     : 0;
    return (b * (size_t)L->t + row0) * width + col + h * (size_t)L->d;
}

/* The index (among all `entries`) of the first matrix of array a that
 * the batched GEMM of chunk ci over the group starting at pair0 reads;
 * its next ones follow, one per pair of the group. */
static inline size_t sl_attn_entry_first(const sl_attn_layout *L, int a, int ci, int pair0)
{
    int kind = sl_attn_kind(a);
    if (kind == SL_ATTN_PER_CHUNK)
        return L->first[a] + (size_t)ci * (size_t)L->pairs + (size_t)pair0;
    if (kind == SL_ATTN_PER_PAIR)
        return L->first[a] + (size_t)pair0;
    return L->first[a];
}

/* Row pitch (floats) of array a's matrices. */
static inline int sl_attn_ld_of(const sl_attn_layout *L, int a)
{
    if (a == SL_ATTN_S || a == SL_ATTN_G)
        return L->ld;
    return (a == SL_ATTN_O ? 1 : 3) * L->heads * L->d;
}

/* Every entry's offset is a multiple of 4 floats (16 bytes), so the
 * matrices are 16-byte aligned wherever the bases are: the condition
 * cuBLAS sets for TF32 on arrays of pointers. The score offsets are
 * (ld a multiple of 4); the others are when d is. */
static inline int sl_attn_offsets_aligned16(const sl_attn_layout *L) { return L->d % 4 == 0; }

/* A score row's elements j in [0, len), whose dropout-mask elements are
 * e_row + j, cut where the mask's 4-element Philox blocks are cut: quad q
 * (q = 0, 1, ...) is elements [*j0, *j0 + *n), all in one block (one
 * Philox call draws their factors), the first *nv of them (none when
 * *nv <= 0) below `valid` (the causal ones). Returns 0 past the last
 * quad. A GPU lane takes quads lane, lane + 32, ... of its warp's row. */
SL_HD static inline int sl_attn_quad(uint64_t e_row, int len, int valid, uint64_t q, int *j0,
                                     int *n, int *nv)
{
    if (len <= 0)
        return 0;
    uint64_t block = e_row / 4 + q, end = e_row + (uint64_t)len;
    if (block > (end - 1) / 4)
        return 0;
    uint64_t lo = block * 4 > e_row ? block * 4 : e_row;
    uint64_t hi = block * 4 + 4 < end ? block * 4 + 4 : end;
    *j0 = (int)(lo - e_row);
    *n = (int)(hi - lo);
    *nv = valid - *j0 < *n ? valid - *j0 : *n;
    return 1;
}

/* One batched product, row-major as cpu_attention.c writes its sgemm
 * calls: for each pair of the group, C[m x n] = alpha op(A) op(B) + beta C
 * with op(X) = X^T where trans_x, A, B, C the arrays' matrices. */
typedef struct sl_attn_gemm {
    int trans_a, trans_b;
    int m, n, k;
    int a, b, c; /* arrays */
    int lda, ldb, ldc;
    float alpha, beta;
} sl_attn_gemm;

static inline sl_attn_gemm sl_attn_gemm_of(const sl_attn_layout *L, int ta, int tb, int m, int n,
                                           int k, int a, int b, int c, float alpha, float beta)
{
    sl_attn_gemm g;
    g.trans_a = ta;
    g.trans_b = tb;
    g.m = m;
    g.n = n;
    g.k = k;
    g.a = a;
    g.b = b;
    g.c = c;
    g.lda = sl_attn_ld_of(L, a);
    g.ldb = sl_attn_ld_of(L, b);
    g.ldc = sl_attn_ld_of(L, c);
    g.alpha = alpha;
    g.beta = beta;
    return g;
}

/* The products of chunk ci (rows x keys scores, d = head size):
 *   scores  S[rows x keys]  = Q_c[rows x d] K[keys x d]^T
 *   output  O_c[rows x d]   = PF[rows x keys] V[keys x d]          (PF in S)
 *   dpf     G[rows x keys]  = dO_c[rows x d] V[keys x d]^T
 *   dv      dV[keys x d]   (+)= PF^T dO_c                          (PF in S)
 *   dq      dQ_c[rows x d] (+)= scale dS[rows x keys] K[keys x d]   (dS in G)
 *   dk      dK[keys x d]   (+)= scale dS^T Q_c                     (dS in G)
 * dQ_c's rows belong to chunk ci alone: beta = accumulate. dK and dV rows
 * [0, keys) are summed over chunks: the backward runs the chunks from the
 * last down, whose key range [0, t) covers every row, so that one writes
 * (beta = 0, unless accumulating) and every later one adds (beta = 1). */
enum { SL_ATTN_SCORES, SL_ATTN_OUTPUT, SL_ATTN_DPF, SL_ATTN_DVG, SL_ATTN_DQG, SL_ATTN_DKG };

static inline sl_attn_gemm sl_attn_product(const sl_attn_layout *L, int which, int ci,
                                           int accumulate, float scale)
{
    int i0, rows, keys, d = L->d;
    sl_attn_chunk_rows(L, ci, &i0, &rows, &keys);
    float beta_q = accumulate ? 1.0f : 0.0f;
    float beta_kv = accumulate || ci < L->chunks - 1 ? 1.0f : 0.0f;
    switch (which) {
    case SL_ATTN_SCORES:
        return sl_attn_gemm_of(L, 0, 1, rows, keys, d, SL_ATTN_Q, SL_ATTN_K, SL_ATTN_S, 1.0f, 0.0f);
    case SL_ATTN_OUTPUT:
        return sl_attn_gemm_of(L, 0, 0, rows, d, keys, SL_ATTN_S, SL_ATTN_V, SL_ATTN_O, 1.0f, 0.0f);
    case SL_ATTN_DPF:
        return sl_attn_gemm_of(L, 0, 1, rows, keys, d, SL_ATTN_O, SL_ATTN_V, SL_ATTN_G, 1.0f, 0.0f);
    case SL_ATTN_DVG:
        return sl_attn_gemm_of(L, 1, 0, keys, d, rows, SL_ATTN_S, SL_ATTN_O, SL_ATTN_DV, 1.0f,
                               beta_kv);
    case SL_ATTN_DQG:
        return sl_attn_gemm_of(L, 0, 0, rows, d, keys, SL_ATTN_G, SL_ATTN_K, SL_ATTN_DQ, scale,
                               beta_q);
    default: /* SL_ATTN_DKG */
        return sl_attn_gemm_of(L, 1, 0, keys, d, rows, SL_ATTN_G, SL_ATTN_Q, SL_ATTN_DK, scale,
                               beta_kv);
    }
}

/* The same product as cuBLAS (column-major) takes it: row-major C = op(A)
 * op(B) is column-major C^T = op(B)^T op(A)^T, so B's array comes first
 * with B's transposition, then A's, m and n swap, and every leading
 * dimension stays (cuda_gemm.cu's mapping). cuBLAS's checks, op N: ld >=
 * rows of the operand as stored (first: m, second: k), op T: ld >= k (first)
 * or n (second), ldc >= m, are the row-major ones: ld >= columns. */
typedef struct sl_attn_colmajor {
    int trans_first, trans_second;
    int m, n, k;
    int first, second, c; /* arrays */
    int ld_first, ld_second, ldc;
    float alpha, beta;
} sl_attn_colmajor;

static inline sl_attn_colmajor sl_attn_colmajor_of(const sl_attn_gemm *g)
{
    sl_attn_colmajor x;
    x.trans_first = g->trans_b;
    x.trans_second = g->trans_a;
    x.m = g->n;
    x.n = g->m;
    x.k = g->k;
    x.first = g->b;
    x.second = g->a;
    x.c = g->c;
    x.ld_first = g->ldb;
    x.ld_second = g->lda;
    x.ldc = g->ldc;
    x.alpha = g->alpha;
    x.beta = g->beta;
    return x;
}

#endif
