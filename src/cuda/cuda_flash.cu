/*
 * cuda_flash.cu — causal self-attention fused into tiles on the tensor
 * cores (run stage): FlashAttention-2's scheme (Dao, 2023) in TF32, for
 * the case a GPT-2 trains in: tiled (flash) mode, head size 64, TF32
 * allowed by the instance, with or without dropout on the probabilities
 * (dropout in the mma.sync kernels only: see "Attention dropout" below).
 * Every other case goes through cuda_attention.cu's chunks of batched
 * cuBLAS GEMMs. sl_cuda_flash_applies
 * decides from the descriptor and the instance alone, so a forward, its
 * re-forward and its backward always take the same path, and the
 * workspace the plan reserved is the path's own. The kernels are
 * templates on the activations' type T (float, or bf16 as uint16_t: a
 * bf16 network's qkv, y, dy and dqkv, SL_BF16_ATTENTION): bf16 values are
 * widened as a tile is fetched (exact in TF32: bf16 has 8 significant
 * bits, TF32 11) and y and the gradients rounded as they are written, so
 * a bf16 call gives the float kernels' bits on widened copies, rounded.
 *
 * Two sets of the three kernels: by default PTX's mma.sync (the section
 * "the mma.sync kernels" below: the scores stay in registers, operands at
 * base/mma_frag.h's offsets); with SL_CUDA_FLASH_MMA=off the wmma ones
 * described here, the first that ran on a GPU, kept as the way back
 * until a GPU has run the others. Where this comment says wmma's
 * fragments, the mma.sync kernels use the ISA's documented ones and no
 * shared score tiles; the traversal, the tiles and the arithmetic per
 * element are the same.
 *
 * Tiles of 64 queries x 64 keys, a block of 4 warps (128 threads) per
 * tile; each warp owns 16 rows of every 64 x 64 x 64 product, computed
 * with nvcuda::wmma's m16n16k8 TF32 fragments from shared memory. The
 * operands are rounded to TF32 (cvt.rna) as they are staged in shared
 * memory, so the fragments load TF32 values as they are; accumulation is
 * FP32. Shared rows are 68 floats apart (16-byte multiples, as wmma wants,
 * off the 32 banks' period).
 *
 *  forward   a block per (pair, 64 queries), the key tiles up to the
 *            diagonal in order: S = Q K^T; per row (two lanes of its
 *            warp, 32 values each, joined by one shuffle) the online
 *            softmax, in base 2 (logits times log2 e, each exp one ex2
 *            instruction; no mask on tiles wholly below the diagonal):
 *            m' = max(m, max of the tile's logits), p =
 *            exp(logit - m'), l = l exp(m - m') + sum p, O = O exp(m - m')
 *            + P V, O in the warp's accumulator fragments (scaled row
 *            by row through acc_map's map of the fragment, P V added by
 *            the tensor cores onto it). Then y = O / l and, in training,
 *            the row's lse = m + log l (the saved state of flash mode). (A first version gave
 *            each row to the whole warp, two values a lane and two
 *            butterflies a row, 16 rows in turn: on the H100 the forward
 *            ran at 14 TFLOP/s.)
 *  backward  D = rowsum(dO o y) (cuda_attention.cu's kernel), then two
 *            kernels, each recomputing P = exp(logit - lse) and
 *            dS = P o (dO V^T - D):
 *            a block per (pair, 64 keys) over the query tiles from the
 *            diagonal down, each warp computing the transposed tiles
 *            S^T = K Q^T and dP^T = V dO^T for its 16 keys: dV += P^T
 *            dO, dK += dS^T Q;
 *            a block per (pair, 64 queries) over the key tiles up to the
 *            diagonal: dQ += dS K.
 *            P and dS are made in the accumulator fragments (grad_frags,
 *            each element's place from acc_map) and stored once, into
 *            rows only their warp reads.
 *            Every gradient element is summed in one warp's fragments in
 *            a fixed order and written once (added to the caller's value
 *            when accumulating): no atomics. The price is S and dO V^T
 *            computed twice.
 *
 * The loops fetch the next tile of K and V (forward, dQ) or of Q, dO and
 * the rows' lse and D (dK/dV) into registers before computing on the
 * current one (pending_tile), so the loads travel during the products.
 *
 * Attention dropout (p > 0; SL_CUDA_FLASH_DROPOUT=off sends it back to
 * the chunks, and so does SL_CUDA_FLASH_MMA=off: the wmma kernels have
 * none): the mma.sync kernels have a DROP instantiation each, launched
 * where p > 0 (in the forward only in training), the others compiled as
 * they were. The mask is the CPU's and the chunks', element
 * sl_attn_element(bh0 + bh, t, i, j) of base/element.h's Philox mask, and
 * the math theirs: m, l and lse from the undropped P, O += (P o F) V, y
 * = O / l; in the backward P = exp(logit - lse) as before, dV += (P o
 * F)^T dO, dS = P o (dP o F - D) with D = rowsum(dO o y). In each tile a
 * lane draws the Philox blocks of a run of consecutive mask elements once
 * (8 blocks where t is a multiple of 4, at most 10: the tile's 1024 over
 * its 128 lanes) and keeps a bit per element; the lanes holding those
 * elements read the bits by shuffles (base/flash_drop.h, checked by
 * test_flash_dropout).
 * Written 2026-11-27 without a GPU; test_cuda_attention's dropout shapes
 * with heads of 64 hold these instantiations to the CPU on one.
 *
 * Deterministic: the traversal is a function of (n, heads, t) alone, so a
 * run repeats its bits and a re-forward gives its forward's. Against the
 * CPU: within the TF32 bound test_cuda_attention holds cuBLAS's TF32
 * products to. Blocks take the heaviest tiles first (the last query
 * tiles in the forward and dQ, the first key tiles in dK/dV).
 */
#include <math.h>
#include <cuda_bf16.h>
#include <mma.h>

#include "base/flash_drop.h"
#include "base/mma_frag.h"
#include "cuda/cuda_block.h"
#include "cuda/cuda_common.h"

using namespace nvcuda;

enum {
    FL_D = 64,      /* head size */
    FL_TILE = 64,   /* rows of a tile (queries or keys) */
    FL_THREADS = 128, /* 4 warps, 16 rows each */
    FL_LD = 68,     /* floats between two rows of a shared tile */
    FL_TILE_FLOATS = FL_TILE * FL_LD,
    FL_MAX_TILES = 65535 /* a grid's y */
};

/* The softmax's base 2: x log2 e, and back. */
#define FL_LOG2E 1.4426950408889634f
#define FL_LN2 0.6931471805599453f

/* 2^x by the SFU's ex2.approx (relative error about 2^-22, far inside
 * TF32's 2^-11; 2^-inf = +0; results below 2^-126 flushed to 0): one
 * instruction, the same bits every run. */
static __device__ inline float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* wmma's rules for float fragments in shared memory: ldm a multiple of 4
 * floats, every fragment pointer 32-byte aligned. Fragments start at rows
 * that are multiples of 8 and columns that are multiples of 8, in tiles
 * that start 128-byte aligned (the dynamic shared array's alignment); the
 * 16-byte stores of pending_tile need rows on 16 bytes. */
static_assert(FL_LD % 4 == 0, "wmma: ldm must be a multiple of 4 floats");
static_assert(8 * FL_LD * sizeof(float) % 32 == 0, "rows 8 apart must stay 32-byte aligned");
static_assert(FL_TILE_FLOATS * sizeof(float) % 128 == 0, "tiles must start 128-byte aligned");
static_assert(FL_LD * sizeof(float) % 16 == 0, "rows must start 16-byte aligned");
static_assert(FL_TILE * FL_D % (4 * FL_THREADS) == 0, "a tile is whole float4s a thread");

typedef wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> frag_a_row;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major> frag_a_col;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> frag_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> frag_b_col;
typedef wmma::fragment<wmma::accumulator, 16, 16, 8, float> frag_acc;

/* Dropout runs in the mma.sync kernels alone (the wmma ones have none),
 * unless SL_CUDA_FLASH_DROPOUT=off sends it back to the chunks. */
extern "C" int sl_cuda_flash_applies(const sl_cuda_state *s, const sl_attention_desc *d)
{
    int drop_ok = d->p == 0.0f || (s->flash_mma && s->flash_dropout);
    return s->flash_fused && s->tf32 && d->flash && d->d == FL_D && drop_ok && d->n > 0 &&
           d->heads > 0 && d->t > 0 && (d->t + FL_TILE - 1) / FL_TILE <= FL_MAX_TILES;
}

/* A tile on its way from global to shared memory (rows x 64 floats of
 * global memory, rows ldg floats apart; the tile's rows from `rows` on
 * are zero), so that a loop can fetch the next tile before it computes on
 * the current one and the loads travel meanwhile. fetch issues the loads:
 * VEC (src and ldg allow 16-byte loads: the launch checks) each thread's
 * 8 float4s into registers, all before any is stored, so a tile costs
 * about one memory latency; otherwise it only notes where the tile is.
 * put rounds the values to TF32 and stores them (otherwise it loads and
 * stores them then, a float at a time). The same values either way. The
 * first version (a float a load, 32 a thread, each waited for in turn)
 * held the kernels to about 20 TFLOP/s on an H100 (ncu, 2026-11-26). */
enum { FL_PER = FL_TILE * FL_D / 4 / FL_THREADS }; /* float4s a thread: 8 */

template <bool VEC, typename T>
struct pending_tile {
    float4 v[VEC ? FL_PER : 1];
    const T *src;
    size_t ldg;
    int rows;
};

/* Thread threadIdx.x's float4 u of a tile: its row and first column. */
static __device__ inline void vec_at(int u, int *r, int *c)
{
    int e = (int)threadIdx.x + u * FL_THREADS;
    *r = e >> 4;
    *c = (e & 15) * 4;
}

template <bool VEC, typename T>
static __device__ inline void fetch(pending_tile<VEC, T> &p, const T *src, size_t ldg, int rows)
{
    p.src = src;
    p.ldg = ldg;
    p.rows = rows;
    if constexpr (VEC) {
#pragma unroll
        for (int u = 0; u < FL_PER; u++) {
            int r, c;
            vec_at(u, &r, &c);
            p.v[u] = r < rows ? sl_ld4(src, ((size_t)r * ldg + c) / 4)
                              : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }
}

/* Where a staged tile keeps (r, c): rows FL_LD floats apart (the wmma
 * kernels), or the mma kernels' XOR layout (SWZ, base/mma_frag.h). */
template <bool SWZ>
static __device__ inline int tile_at(int r, int c)
{
    return SWZ ? sl_mma_at(r, c) : r * FL_LD + c;
}

template <bool VEC, typename T, bool SWZ = false>
static __device__ inline void put(float *dst, const pending_tile<VEC, T> &p)
{
    if constexpr (VEC) {
#pragma unroll
        for (int u = 0; u < FL_PER; u++) {
            int r, c;
            vec_at(u, &r, &c);
            *(float4 *)(dst + tile_at<SWZ>(r, c)) =
                make_float4(wmma::__float_to_tf32(p.v[u].x), wmma::__float_to_tf32(p.v[u].y),
                            wmma::__float_to_tf32(p.v[u].z), wmma::__float_to_tf32(p.v[u].w));
        }
    } else {
        for (int e = (int)threadIdx.x; e < FL_TILE * FL_D; e += FL_THREADS) {
            int r = e >> 6, c = e & 63;
            float v = r < p.rows ? sl_ld(p.src, (size_t)r * p.ldg + c) : 0.0f;
            dst[tile_at<SWZ>(r, c)] = wmma::__float_to_tf32(v);
        }
    }
}

/* A tile staged at once: fetched and put. */
template <bool VEC, bool SWZ = false, typename T>
static __device__ inline void stage(float *dst, const T *src, size_t ldg, int rows)
{
    pending_tile<VEC, T> p;
    fetch(p, src, ldg, rows);
    put<VEC, T, SWZ>(dst, p);
}

/* A loop step over key tiles (the forward and dQ): key tile j0, fetched
 * into pk and pv, into Ks and Vs once every warp is done with the last
 * one; then the next tile up to key `last` fetched; the shared tiles
 * ready for every warp at return. */
template <bool VEC, typename T, bool SWZ = false>
static __device__ inline void key_tile_step(float *Ks, float *Vs, pending_tile<VEC, T> &pk,
                                            pending_tile<VEC, T> &pv, const T *k, const T *v,
                                            size_t w3, int j0, int last, int t)
{
    __syncthreads(); /* the last tile's K, V no longer read */
    put<VEC, T, SWZ>(Ks, pk);
    put<VEC, T, SWZ>(Vs, pv);
    __syncthreads();
    int jn = j0 + FL_TILE;
    if (jn <= last) {
        fetch(pk, k + (size_t)jn * w3, w3, min(FL_TILE, t - jn));
        fetch(pv, v + (size_t)jn * w3, w3, min(FL_TILE, t - jn));
    }
}

/* acc[nb] += A B for the warp's 16 x 64 block, k over 0..63: A's 16 x 8
 * slice at k from a_at(k), B's 8 x 16 slice at (k, 16 nb) from
 * b_at(k, nb); both already TF32 values in shared memory. */
template <class FA, class FB, class PA, class PB>
static __device__ inline void warp_product(frag_acc acc[4], PA a_at, PB b_at)
{
#pragma unroll 2
    for (int k = 0; k < 64; k += 8) {
        FA fa;
        wmma::load_matrix_sync(fa, a_at(k), FL_LD);
#pragma unroll
        for (int nb = 0; nb < 4; nb++) {
            FB fb;
            wmma::load_matrix_sync(fb, b_at(k, nb), FL_LD);
            wmma::mma_sync(acc[nb], fa, fb, acc[nb]);
        }
    }
}

static __device__ inline void zero(frag_acc acc[4])
{
#pragma unroll
    for (int nb = 0; nb < 4; nb++)
        wmma::fill_fragment(acc[nb], 0.0f);
}

/* The warp's 16 x 64 block of accumulators into rows 16 warp .. of a
 * shared tile. */
static __device__ inline void store_rows(float *tile, int warp, frag_acc acc[4])
{
#pragma unroll
    for (int nb = 0; nb < 4; nb++)
        wmma::store_matrix_sync(tile + warp * 16 * FL_LD + nb * 16, acc[nb], FL_LD,
                                wmma::mem_row_major);
}

/* acc = X Y^T for 16 rows of X (from xw) against the 64 rows of Y, in
 * the warp's fragments. */
static __device__ inline void xyt_frags(frag_acc acc[4], const float *xw, const float *y)
{
    zero(acc);
    warp_product<frag_a_row, frag_b_col>(acc, [&](int k) { return xw + k; },
                                         [&](int k, int nb) { return y + nb * 16 * FL_LD + k; });
}

/* S = X Y^T for the warp's 16 rows of X (a shared tile's rows 16 warp ..)
 * against the 64 rows of Y, into the same rows of out. */
static __device__ inline void warp_xyt(const float *x, const float *y, float *out, int warp)
{
    frag_acc acc[4];
    xyt_frags(acc, x + warp * 16 * FL_LD, y);
    store_rows(out, warp, acc);
}

/* The pointers of pair bh's head in qkv ([n, t, 3c]: q, k, v at columns
 * h d, c + h d, 2c + h d) and in a [n, t, c] tensor (y, dy). */
struct heads_at {
    size_t c, w3;
    size_t q, o; /* offsets of the pair's row 0: in qkv, in y */
};

static __device__ inline heads_at heads_of(int bh, int heads, int t)
{
    heads_at a;
    int b = bh / heads, h = bh % heads;
    a.c = (size_t)heads * FL_D;
    a.w3 = 3 * a.c;
    a.q = (size_t)b * t * a.w3 + (size_t)h * FL_D;
    a.o = (size_t)b * t * a.c + (size_t)h * FL_D;
    return a;
}

/* ------------------------------------------------------------ forward */

/* Where each of a lane's accumulator elements sits in its 16 x 16 block:
 * rows[i] and (where asked) cols[i]. wmma does not document a fragment's
 * layout, so the warp asks: it loads a block whose every entry is its row
 * number (small integers, exact in float) into an accumulator fragment
 * and reads the numbers back, then the same with column numbers. Every
 * accumulator fragment of the type has the same layout, so the answer
 * holds for all of them. `scratch` is 16 rows of the warp's own (FL_LD
 * floats apart), free at the call. */
static __device__ inline void acc_map(float *scratch, int rows[frag_acc::num_elements],
                                      int *cols)
{
    int lane = (int)threadIdx.x & 31;
    for (int pass = 0; pass < (cols ? 2 : 1); pass++) {
        for (int e = lane; e < 16 * 16; e += 32)
            scratch[(e >> 4) * FL_LD + (e & 15)] = (float)(pass ? e & 15 : e >> 4);
        __syncwarp();
        frag_acc id;
        wmma::load_matrix_sync(id, scratch, FL_LD, wmma::mem_row_major);
#pragma unroll
        for (int i = 0; i < frag_acc::num_elements; i++)
            (pass ? cols : rows)[i] = (int)id.x[i];
        __syncwarp();
    }
}

/* acc[nb] *= the factor of each element's row, the factor of row r held
 * by lane r of the warp (rows from acc_map). */
static __device__ inline void scale_rows(frag_acc acc[4], const int rows[frag_acc::num_elements],
                                         float factor)
{
#pragma unroll
    for (int i = 0; i < frag_acc::num_elements; i++) {
        float f = __shfl_sync(0xffffffffu, factor, rows[i]);
#pragma unroll
        for (int nb = 0; nb < 4; nb++)
            acc[nb].x[i] = acc[nb].x[i] * f;
    }
}

/* Shared memory: Q, K, V and S (then P, then at the end O) tiles. O
 * stays in each warp's accumulator fragments: scaled by its rows' alpha
 * (scale_rows) and then P V added by the tensor cores in place. (The
 * first fused version kept O in a fifth tile, updated a float at a time:
 * 87 KB a block, two blocks an SM, 12.5 % occupancy, shared stores in
 * 2.3-way bank conflicts; ncu 2026-11-27.) Four tiles, 68 KB: three
 * blocks an SM, which the register bound below holds to. */
enum { FL_FWD_SMEM = 4 * FL_TILE_FLOATS * (int)sizeof(float), FL_FWD_BLOCKS = 3 };

template <bool VEC, typename T>
static __global__ void __launch_bounds__(FL_THREADS, FL_FWD_BLOCKS)
    flash_fwd_k(int t, int heads, float scale, const T *qkv, T *y, float *lse)
{
    extern __shared__ __align__(128) float sm[];
    float *Qs = sm, *Ks = Qs + FL_TILE_FLOATS, *Vs = Ks + FL_TILE_FLOATS,
          *Ss = Vs + FL_TILE_FLOATS;
    int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
    int bh = (int)blockIdx.x;
    int i0 = (int)(gridDim.y - 1 - blockIdx.y) * FL_TILE, qrows = min(FL_TILE, t - i0);
    heads_at A = heads_of(bh, heads, t);
    const T *q = qkv + A.q, *k = q + A.c, *v = q + 2 * A.c;
    pending_tile<VEC, T> pk, pv; /* the next key tile, in flight */
    fetch(pk, k, A.w3, min(FL_TILE, t));
    fetch(pv, v, A.w3, min(FL_TILE, t));
    stage<VEC>(Qs, q + (size_t)i0 * A.w3, A.w3, qrows);
    int rows[frag_acc::num_elements];
    acc_map(Ss + warp * 16 * FL_LD, rows, NULL);
    frag_acc o[4]; /* the warp's 16 rows of O */
    zero(o);
    /* The softmax's rows: lane l of a warp takes row l % 16 of the warp's
     * 16, half l / 16 of its 64 columns, and walks its 32 values alone;
     * the two halves meet in one shuffle (lane l ^ 16). Both lanes of a
     * row hold its running max and sum, with the same bits. Columns are
     * visited from a lane's own offset ((u + row + 16 half) % 32), so
     * the 32 lanes' reads fall in 32 different banks. */
    int rr = lane & 15, half = lane >> 4, my_r = warp * 16 + rr, my_i = i0 + my_r;
    /* The softmax runs in base 2 (logits times scale log2 e, P = 2^(x -
     * m) by the ex2 instruction): the kernel is bound by its instruction
     * count, not its products (ncu, 2026-11-27: 28 instructions a tensor
     * core instruction, issue slots 47 % busy), and expf's accurate range
     * reduction was most of the softmax's. Tiles wholly below the diagonal
     * and inside the sequence skip the mask. */
    const float sc2 = scale * FL_LOG2E;
    float m_row = -INFINITY, l_row = 0.0f; /* m in base-2 units */
    int last = i0 + qrows - 1; /* the tile's last query: keys up to it */
    for (int j0 = 0; j0 <= last; j0 += FL_TILE) {
        key_tile_step(Ks, Vs, pk, pv, k, v, A.w3, j0, last, t);
        warp_xyt(Qs, Ks, Ss, warp);
        __syncwarp();
        float *srow = Ss + my_r * FL_LD + half * 32, xv[32];
        float mx = -INFINITY;
        if (j0 + FL_TILE - 1 <= i0 && j0 + FL_TILE <= t) { /* no key past a query or t */
#pragma unroll
            for (int u = 0; u < 32; u++) {
                int c = (u + rr + 16 * half) & 31;
                xv[u] = srow[c] * sc2;
                mx = fmaxf(mx, xv[u]);
            }
        } else {
#pragma unroll
            for (int u = 0; u < 32; u++) {
                int c = (u + rr + 16 * half) & 31, key = j0 + half * 32 + c;
                xv[u] = key <= my_i && key < t ? srow[c] * sc2 : -INFINITY;
                mx = fmaxf(mx, xv[u]);
            }
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
        /* every row sees key j0 <= i0 <= i in every tile: m' is finite */
        float mn = fmaxf(m_row, mx), sum = 0.0f;
#pragma unroll
        for (int u = 0; u < 32; u++) {
            int c = (u + rr + 16 * half) & 31;
            float p = ex2(xv[u] - mn); /* 0 for the masked (-inf) */
            sum += p;
            srow[c] = wmma::__float_to_tf32(p);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 16);
        float alpha = ex2(m_row - mn); /* 0 at the first tile (m = -inf) */
        l_row = l_row * alpha + sum;
        m_row = mn;
        __syncwarp(); /* every row's P in Ss */
        scale_rows(o, rows, alpha); /* O alpha (lane r < 16 holds row r's) */
        warp_product<frag_a_row, frag_b_row>(
            o, [&](int kk) { return Ss + warp * 16 * FL_LD + kk; },
            [&](int kk, int nb) { return Vs + kk * FL_LD + nb * 16; });
    }
    /* y = O / l: the rows' 1 / l onto O, O into the warp's rows of Ss (its
     * P fragments all loaded), then a row a step so the stores coalesce */
    scale_rows(o, rows, 1.0f / l_row);
    __syncwarp();
    store_rows(Ss, warp, o);
    __syncwarp();
    for (int wr = 0; wr < 16; wr++) {
        int r = warp * 16 + wr, i = i0 + r;
        float l_q = __shfl_sync(0xffffffffu, l_row, wr), m_q = __shfl_sync(0xffffffffu, m_row, wr);
        if (i < t) {
            T *yr = y + A.o + (size_t)i * A.c;
            sl_st(yr, lane, Ss[r * FL_LD + lane]);
            sl_st(yr, lane + 32, Ss[r * FL_LD + lane + 32]);
            if (lse && lane == 0) /* in natural units, as every path saves it */
                lse[(size_t)bh * t + i] = (m_q + log2f(l_q)) * FL_LN2;
        }
    }
}

/* ----------------------------------------------------------- backward */

/* The row statistics (lse, D) of a query tile from row row0 (qrows valid
 * rows), on their way to shared memory like a pending_tile: thread r < 64
 * holds row r's. */
struct pending_rows {
    float lse, d;
};

static __device__ inline void fetch_rows(pending_rows &p, const float *lse, const float *dd,
                                         size_t row0, int qrows)
{
    int r = (int)threadIdx.x;
    p.lse = r < qrows ? lse[row0 + r] : 0.0f;
    p.d = r < qrows ? dd[row0 + r] : 0.0f;
}

/* lse_s gets each row's lse in base 2 (grad_frags' units) */
static __device__ inline void put_rows(float *lse_s, float *d_s, const pending_rows &p)
{
    int r = (int)threadIdx.x;
    if (r < FL_TILE) {
        lse_s[r] = p.lse * FL_LOG2E;
        d_s[r] = p.d;
    }
}

/* P = exp(logit - lse) on the causal pairs (0 elsewhere) and dS = P o (dP
 * - D), element by element on a warp's fragments: s[nb] holds the scores
 * (unscaled), dp[nb] dO V^T, both as accumulators of one layout (rows,
 * cols from acc_map). at(i, nb, &query, &key, &row_stat) names an
 * element's query, key and the index of its query's lse (base 2) and D in
 * lse_s, d_s; sc2 is the logits' scale times log2 e, so P = 2^(s sc2 -
 * lse), as the forward's base-2 softmax. FULL: a tile with every key at
 * or before every query, every query before t (no mask). P and dS replace
 * s and dp, as TF32 values. */
template <bool FULL, class At>
static __device__ inline void grad_frags(frag_acc s[4], frag_acc dp[4], const float *lse_s,
                                         const float *d_s, int t, float sc2, At at)
{
#pragma unroll
    for (int i = 0; i < frag_acc::num_elements; i++) {
#pragma unroll
        for (int nb = 0; nb < 4; nb++) {
            int query, key, st;
            at(i, nb, &query, &key, &st);
            bool valid = FULL || (query < t && key <= query);
            float p = valid ? ex2(__fmaf_rn(s[nb].x[i], sc2, -lse_s[st])) : 0.0f;
            float ds = sl_attn_grad_logit(p, dp[nb].x[i], 1.0f, d_s[st]);
            s[nb].x[i] = wmma::__float_to_tf32(p);
            dp[nb].x[i] = wmma::__float_to_tf32(ds);
        }
    }
}

/* One 64-column slice of a gradient from a shared tile's rows: rows r of
 * the tile to global rows row0 + r < t (ld floats apart), times f, added
 * to what is there when accumulating. */
template <bool SWZ = false, typename T>
static __device__ inline void write_grad_rows(T *dst, size_t ld, const float *tile, int warp,
                                              int row0, int t, float f, int accumulate)
{
    for (int e = (int)threadIdx.x & 31; e < 16 * FL_D; e += 32) {
        int r = warp * 16 + (e >> 6), c = e & 63;
        if (row0 + r >= t)
            continue;
        sl_put_t(dst, (size_t)(row0 + r) * ld + c, tile[tile_at<SWZ>(r, c)] * f, accumulate);
    }
}

/* Shared memory of both backward kernels: Q, dO, K and V tiles, two tiles
 * of warp-private rows (P and dS in dK/dV; dS alone in dQ) and the query
 * rows' lse and D. */
enum {
    FL_KV_SMEM = 6 * FL_TILE_FLOATS * (int)sizeof(float) + 2 * FL_TILE * (int)sizeof(float),
    FL_Q_SMEM = 5 * FL_TILE_FLOATS * (int)sizeof(float) + 2 * FL_TILE * (int)sizeof(float)
};

/* dK and dV of a key tile: a block per (pair, 64 keys), each warp 16 of
 * the keys, over the query tiles from the diagonal down. The warp computes
 * the transposed tiles S^T = K Q^T and dP^T = V dO^T for its keys, P^T and
 * dS^T in its fragments (grad_frags), stores them into its own rows, and
 * adds dV += P^T dO, dK += dS^T Q: no warp reads another's rows, so the
 * block meets only to restage Q and dO. (The first version computed S and
 * dP by query rows and read P and dS by columns across all warps, behind
 * a block barrier, with P and dS made a float at a time in shared memory.) */
template <bool VEC, typename T>
static __global__ void __launch_bounds__(FL_THREADS)
    flash_bwd_kv_k(int t, int heads, float scale, const T *qkv, const T *dy,
                   const float *lse, const float *dd, T *dqkv, int accumulate)
{
    extern __shared__ __align__(128) float sm[];
    float *Qs = sm, *Os = Qs + FL_TILE_FLOATS, *Ks = Os + FL_TILE_FLOATS,
          *Vs = Ks + FL_TILE_FLOATS, *Ps = Vs + FL_TILE_FLOATS, *Gs = Ps + FL_TILE_FLOATS,
          *lse_s = Gs + FL_TILE_FLOATS, *d_s = lse_s + FL_TILE;
    int warp = (int)threadIdx.x >> 5;
    const float sc2 = scale * FL_LOG2E; /* grad_frags' base 2 */
    int bh = (int)blockIdx.x, j0 = (int)blockIdx.y * FL_TILE, krows = min(FL_TILE, t - j0);
    heads_at A = heads_of(bh, heads, t);
    const T *q = qkv + A.q, *k = q + A.c, *v = q + 2 * A.c, *o = dy + A.o;
    pending_tile<VEC, T> pq, po; /* the next query tile, in flight */
    pending_rows pr;
    fetch(pq, q + (size_t)j0 * A.w3, A.w3, min(FL_TILE, t - j0));
    fetch(po, o + (size_t)j0 * A.c, A.c, min(FL_TILE, t - j0));
    fetch_rows(pr, lse, dd, (size_t)bh * t + j0, min(FL_TILE, t - j0));
    stage<VEC>(Ks, k + (size_t)j0 * A.w3, A.w3, krows);
    stage<VEC>(Vs, v + (size_t)j0 * A.w3, A.w3, krows);
    int rows[frag_acc::num_elements], cols[frag_acc::num_elements];
    acc_map(Ps + warp * 16 * FL_LD, rows, cols);
    float *Pw = Ps + warp * 16 * FL_LD, *Gw = Gs + warp * 16 * FL_LD; /* the warp's rows */
    const float *Kw = Ks + warp * 16 * FL_LD, *Vw = Vs + warp * 16 * FL_LD;
    int key_of_row = j0 + warp * 16;
    frag_acc dk[4], dv[4];
    zero(dk);
    zero(dv);
    for (int i0 = j0; i0 < t; i0 += FL_TILE) { /* the diagonal tile first */
        __syncthreads(); /* every warp done with the last tile's Q and dO */
        put(Qs, pq);
        put(Os, po);
        put_rows(lse_s, d_s, pr);
        __syncthreads();
        int in = i0 + FL_TILE;
        if (in < t) {
            fetch(pq, q + (size_t)in * A.w3, A.w3, min(FL_TILE, t - in));
            fetch(po, o + (size_t)in * A.c, A.c, min(FL_TILE, t - in));
            fetch_rows(pr, lse, dd, (size_t)bh * t + in, min(FL_TILE, t - in));
        }
        frag_acc st[4], dpt[4]; /* S^T and dP^T: the warp's keys x 64 queries */
        xyt_frags(st, Kw, Qs);
        xyt_frags(dpt, Vw, Os);
        auto at = [&](int i, int nb, int *query, int *key, int *stat) {
            *stat = cols[i] + 16 * nb;
            *query = i0 + *stat;
            *key = key_of_row + rows[i];
        };
        if (i0 >= j0 + FL_TILE && i0 + FL_TILE <= t) /* below the diagonal, inside t */
            grad_frags<true>(st, dpt, lse_s, d_s, t, sc2, at);
        else
            grad_frags<false>(st, dpt, lse_s, d_s, t, sc2, at);
        store_rows(Ps, warp, st);
        store_rows(Gs, warp, dpt);
        __syncwarp(); /* the warp's P^T and dS^T rows written */
        warp_product<frag_a_row, frag_b_row>(
            dv, [&](int kk) { return Pw + kk; }, [&](int kk, int nb) { return Os + kk * FL_LD + nb * 16; });
        warp_product<frag_a_row, frag_b_row>(
            dk, [&](int kk) { return Gw + kk; }, [&](int kk, int nb) { return Qs + kk * FL_LD + nb * 16; });
    }
    __syncwarp(); /* the warp's P^T, dS^T rows read: they take its sums */
    store_rows(Ps, warp, dv);
    store_rows(Gs, warp, dk);
    __syncwarp();
    write_grad_rows(dqkv + A.q + A.c, A.w3, Gs, warp, j0, t, scale, accumulate);
    write_grad_rows(dqkv + A.q + 2 * A.c, A.w3, Ps, warp, j0, t, 1.0f, accumulate);
}

/* dQ of a query tile: a block per (pair, 64 queries), each warp 16 of the
 * queries, over the key tiles up to the diagonal: S = Q K^T and dP = dO
 * V^T in the warp's fragments, dS from them (grad_frags) into the warp's
 * rows of Gs, dQ += dS K. */
template <bool VEC, typename T>
static __global__ void __launch_bounds__(FL_THREADS)
    flash_bwd_q_k(int t, int heads, float scale, const T *qkv, const T *dy,
                  const float *lse, const float *dd, T *dqkv, int accumulate)
{
    extern __shared__ __align__(128) float sm[];
    float *Qs = sm, *Os = Qs + FL_TILE_FLOATS, *Ks = Os + FL_TILE_FLOATS,
          *Vs = Ks + FL_TILE_FLOATS, *Gs = Vs + FL_TILE_FLOATS, *lse_s = Gs + FL_TILE_FLOATS,
          *d_s = lse_s + FL_TILE;
    int warp = (int)threadIdx.x >> 5;
    const float sc2 = scale * FL_LOG2E; /* grad_frags' base 2 */
    int bh = (int)blockIdx.x;
    int i0 = (int)(gridDim.y - 1 - blockIdx.y) * FL_TILE, qrows = min(FL_TILE, t - i0);
    heads_at A = heads_of(bh, heads, t);
    const T *q = qkv + A.q, *k = q + A.c, *v = q + 2 * A.c, *o = dy + A.o;
    pending_tile<VEC, T> pk, pv; /* the next key tile, in flight */
    fetch(pk, k, A.w3, min(FL_TILE, t));
    fetch(pv, v, A.w3, min(FL_TILE, t));
    stage<VEC>(Qs, q + (size_t)i0 * A.w3, A.w3, qrows);
    stage<VEC>(Os, o + (size_t)i0 * A.c, A.c, qrows);
    pending_rows pr;
    fetch_rows(pr, lse, dd, (size_t)bh * t + i0, qrows);
    put_rows(lse_s, d_s, pr);
    int rows[frag_acc::num_elements], cols[frag_acc::num_elements];
    acc_map(Gs + warp * 16 * FL_LD, rows, cols);
    const float *Qw = Qs + warp * 16 * FL_LD, *Ow = Os + warp * 16 * FL_LD;
    const float *Gw = Gs + warp * 16 * FL_LD;
    frag_acc dq[4];
    zero(dq);
    int last = i0 + qrows - 1;
    for (int j0 = 0; j0 <= last; j0 += FL_TILE) {
        key_tile_step(Ks, Vs, pk, pv, k, v, A.w3, j0, last, t);
        frag_acc sf[4], dpf[4]; /* S and dP: the warp's queries x 64 keys */
        xyt_frags(sf, Qw, Ks);
        xyt_frags(dpf, Ow, Vs);
        auto at = [&](int i, int nb, int *query, int *key, int *stat) {
            *stat = warp * 16 + rows[i];
            *query = i0 + *stat;
            *key = j0 + cols[i] + 16 * nb;
        };
        if (j0 + FL_TILE <= i0 && i0 + FL_TILE <= t) /* below the diagonal, inside t */
            grad_frags<true>(sf, dpf, lse_s, d_s, t, sc2, at);
        else
            grad_frags<false>(sf, dpf, lse_s, d_s, t, sc2, at);
        store_rows(Gs, warp, dpf);
        __syncwarp(); /* the warp's dS rows written */
        warp_product<frag_a_row, frag_b_row>(
            dq, [&](int kk) { return Gw + kk; }, [&](int kk, int nb) { return Ks + kk * FL_LD + nb * 16; });
    }
    __syncwarp(); /* the warp's rows of dS read: they take its sums */
    store_rows(Gs, warp, dq);
    __syncwarp();
    write_grad_rows(dqkv + A.q, A.w3, Gs, warp, i0, t, scale, accumulate);
}

/* ------------------------------------------- the mma.sync kernels (v4) */

/* The same three kernels with the products written as PTX's documented
 * mma.sync m16n8k8 TF32 instruction instead of wmma (SL_CUDA_FLASH_MMA,
 * on by default; off: the wmma kernels above). Each lane's operands are
 * read from shared memory at offsets base/mma_frag.h computes (8-byte
 * loads wherever two values are adjacent; tiles of 64 x 64 floats in its
 * XOR layout, so no access has a bank conflict), and the scores stay in the registers they are computed in: the
 * softmax and grad_frags work on each lane's own accumulator elements,
 * whose rows and columns the ISA documents, a row's 16 elements held by
 * the 4 lanes of a quad and joined by two shuffles; P and dS are then the
 * A operands of the next products as they stand (sl_mma_c_as_a). So no
 * score tile goes through shared memory, no acc_map is asked, and the
 * loads are LDS rather than generic. The arithmetic per element is the
 * wmma kernels' (the same TF32 rounding of operands, ex2, grad_frags'
 * formulas); the summation order inside a product is the instruction's,
 * fixed, so the kernels stay deterministic and a re-forward gives its
 * forward's bits. Written without a GPU (2026-11-27): test_mma_frag
 * checks the offsets against the ISA's tables on the CPU;
 * test_cuda_attention holds these kernels to the CPU's results on a GPU.
 *
 * A warp's 16 x 64 block of scores or outputs is acc_t: 8 n-tiles of 8
 * columns, 4 floats a lane each. */
typedef float acc_t[8][4];

enum { FM_TILE_FLOATS = FL_TILE * SL_MMA_LD };
static_assert((int)FL_D == (int)SL_MMA_LD, "a tile row is one head");

static __device__ inline void mma_tf32(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static __device__ inline void acc_zero(acc_t c)
{
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            c[j][i] = 0.0f;
}

/* c = X Y^T: X the warp's 16 rows at xw, Y the 64 rows of a shared tile,
 * both TF32 values already (put rounds them), k over the 64 columns. */
static __device__ inline void mma_xyt(acc_t c, const float *xw, const float *y, int lane)
{
    acc_zero(c);
#pragma unroll 2
    for (int s = 0; s < 8; s++) {
        int off[2];
        sl_mma_a_pair(lane, s, off);
        float2 lo = *(const float2 *)(xw + off[0]), hi = *(const float2 *)(xw + off[1]);
        uint32_t a[4] = {__float_as_uint(lo.x), __float_as_uint(hi.x), __float_as_uint(lo.y),
                         __float_as_uint(hi.y)};
#pragma unroll
        for (int j = 0; j < 8; j++) {
            float2 b = *(const float2 *)(y + sl_mma_bt_pair(lane, j, s));
            mma_tf32(c[j], a, __float_as_uint(b.x), __float_as_uint(b.y));
        }
    }
}

/* o += P V: P the warp's 16 x 64 block in its accumulators (TF32 values
 * already), V the 64 rows x 64 columns of a shared tile. */
static __device__ inline void mma_pv(acc_t o, const acc_t p, const float *v, int lane)
{
#pragma unroll /* whole: p's registers are named by j */
    for (int j = 0; j < 8; j++) {
        uint32_t a[4];
#pragma unroll
        for (int r = 0; r < 4; r++)
            a[r] = __float_as_uint(p[j][sl_mma_c_as_a(r)]);
#pragma unroll
        for (int nb = 0; nb < 8; nb++)
            mma_tf32(o[nb], a, __float_as_uint(v[sl_mma_b_off(lane, j, nb, 0)]),
                     __float_as_uint(v[sl_mma_b_off(lane, j, nb, 1)]));
    }
}

/* The warp's 16 x 64 block into its rows of a shared tile (8-byte stores,
 * no bank conflicts), times the factor of each half's rows (f[0] for row
 * g, f[1] for row g + 8). */
static __device__ inline void acc_store(float *tile, int warp, const acc_t c, const float f[2],
                                        int lane)
{
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            *(float2 *)(tile + sl_mma_c_pair(lane, warp * 16, j, h)) =
                make_float2(c[j][2 * h] * f[h], c[j][2 * h + 1] * f[h]);
}

/* A row's value joined over the 4 lanes of its quad (rows g and g + 8 of
 * the warp's 16 are the lanes 4 g .. 4 g + 3). */
static __device__ inline float quad_max(float x)
{
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

static __device__ inline float quad_sum(float x)
{
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/* Attention dropout in the mma.sync kernels (their DROP instantiations,
 * launched where p > 0 and, in the forward, in training): the mask is
 * base/element.h's, element sl_attn_element(bh0 + bh, t, i, j) for query
 * i and key j, the CPU's and the chunked path's bit for bit; which lane
 * draws which Philox block, and where an accumulator element finds its
 * factor, is base/flash_drop.h's arithmetic (test_flash_dropout checks it
 * on the CPU). As the CPU does, the softmax's statistics (m, l, lse) are
 * those of the undropped P, the products take P o F (O += (P o F) V, dV
 * += (P o F)^T dO) and dS = P o (dP o F - D) (sl_attn_grad_logit with the
 * factor), D = rowsum(dO o y) of the dropped y. */
struct flash_drop {
    sl_dropout_mask m;
    uint64_t counter; /* the mask's first block */
    const uint64_t *delta; /* added to it on the device (sl_exec.counter_delta), or NULL */
    int bh0;          /* pairs before this call's in the mask */
};

/* A lane's factors of one tile by queries (rows queries, columns keys):
 * the words of its two rows' two column halves, from the lanes that drew
 * them (sl_drop_q_word's `mine`). tile(j) gives the words of n-tile j,
 * factor(w, j, i) element (j, i)'s factor. */
struct drop_by_q {
    uint32_t w[2][2];
    const sl_dropout_mask *m;
    int lane;
    __device__ drop_by_q(uint32_t mine, const sl_dropout_mask *mask, int ln) : m(mask), lane(ln)
    {
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int hf = 0; hf < 2; hf++)
                w[h][hf] = __shfl_sync(0xffffffffu, mine, sl_drop_q_lane(lane, h, hf));
    }
    __device__ uint2 tile(int j) const { return make_uint2(w[0][j >> 2], w[1][j >> 2]); }
    __device__ float factor(uint2 wj, int j, int i) const
    {
        return sl_drop_bit_factor(m, i >> 1 ? wj.y : wj.x, sl_drop_q_bit(lane, j, i));
    }
};

/* The same by keys (rows keys, columns queries: dK and dV): n-tile j's
 * elements lie in one word, fetched as the tile is reached. */
struct drop_by_k {
    uint32_t mine;
    const sl_dropout_mask *m;
    int lane;
    __device__ uint32_t tile(int j) const
    {
        return __shfl_sync(0xffffffffu, mine, sl_drop_k_lane(lane, j));
    }
    __device__ float factor(uint32_t wj, int j, int i) const
    {
        return sl_drop_bit_factor(m, wj, sl_drop_k_bit(lane, j, i));
    }
};

/* What the no-dropout instantiations pass: never read. */
struct no_drop {
    __device__ int tile(int) const { return 0; }
    __device__ float factor(int, int, int) const { return 1.0f; }
};

/* One key tile of the forward's online softmax on a warp's scores s (its
 * rows g and g + 8: queries my_i, running max m_row in base 2 and sum
 * l_row, the same bits in the 4 lanes of the quad), in place: s becomes
 * P (DROP: P o F, the sum still P's), rounded to TF32 (TF32P: the TF32
 * products) or left in FP32 (the bf16 products round it as they pack it),
 * and o is scaled by each row's alpha = 2^(m - m'). Keys past a query or
 * past t are masked unless the tile is full (no such key). */
template <bool TF32P, bool DROP = false, class Drop = no_drop>
static __device__ inline void online_softmax(acc_t s, acc_t o, float m_row[2], float l_row[2],
                                             const int my_i[2], int j0, bool full, int t,
                                             float sc2, int lane, const Drop &drop = Drop())
{
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int key = j0 + sl_mma_c_col(lane, j, i);
            float x = full || (key <= my_i[i >> 1] && key < t) ? s[j][i] * sc2 : -INFINITY;
            s[j][i] = x;
            mx[i >> 1] = fmaxf(mx[i >> 1], x);
        }
    float alpha[2], mn[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int h = 0; h < 2; h++) {
        /* every row sees key j0 <= i0 <= i in every tile: m' is finite */
        mn[h] = fmaxf(m_row[h], quad_max(mx[h]));
        alpha[h] = ex2(m_row[h] - mn[h]); /* 0 at the first tile (m = -inf) */
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        auto wj = drop.tile(j);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float p = ex2(s[j][i] - mn[i >> 1]); /* 0 for the masked (-inf) */
            sum[i >> 1] += p;
            if constexpr (DROP)
                p *= drop.factor(wj, j, i);
            s[j][i] = TF32P ? wmma::__float_to_tf32(p) : p;
        }
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l_row[h] = l_row[h] * alpha[h] + quad_sum(sum[h]);
        m_row[h] = mn[h];
    }
#pragma unroll
    for (int nb = 0; nb < 8; nb++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            o[nb][i] *= alpha[i >> 1];
}

/* Shared memory: Q, K and V tiles (48 KB), four blocks an SM by shared
 * memory; registers (the scores, O and the next key tile in flight) hold
 * it to three. */
enum { FM_FWD_SMEM = 3 * FM_TILE_FLOATS * (int)sizeof(float), FM_FWD_BLOCKS = 3 };

template <bool VEC, typename T, bool DROP>
static __global__ void __launch_bounds__(FL_THREADS, FM_FWD_BLOCKS)
    flash_fwd_mma_k(int t, int heads, float scale, const T *qkv, T *y, float *lse, flash_drop dr)
{
    extern __shared__ __align__(128) float sm[];
    float *Qs = sm, *Ks = Qs + FM_TILE_FLOATS, *Vs = Ks + FM_TILE_FLOATS;
    int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
    int bh = (int)blockIdx.x;
    int i0 = (int)(gridDim.y - 1 - blockIdx.y) * FL_TILE, qrows = min(FL_TILE, t - i0);
    heads_at A = heads_of(bh, heads, t);
    const T *q = qkv + A.q, *k = q + A.c, *v = q + 2 * A.c;
    pending_tile<VEC, T> pk, pv; /* the next key tile, in flight */
    fetch(pk, k, A.w3, min(FL_TILE, t));
    fetch(pv, v, A.w3, min(FL_TILE, t));
    stage<VEC, true>(Qs, q + (size_t)i0 * A.w3, A.w3, qrows);
    const float *Qw = Qs + warp * 16 * SL_MMA_LD; /* the warp's 16 queries */
    acc_t o, s;
    acc_zero(o);
    const float sc2 = scale * FL_LOG2E; /* base 2, as the wmma kernel */
    /* rows g and g + 8 of the warp's 16: running max (base 2) and sum,
     * the same bits in the 4 lanes of the quad */
    float m_row[2] = {-INFINITY, -INFINITY}, l_row[2] = {0.0f, 0.0f};
    int my_i[2] = {i0 + warp * 16 + sl_mma_c_row(lane, 0), i0 + warp * 16 + sl_mma_c_row(lane, 2)};
    int last = i0 + qrows - 1;
    for (int j0 = 0; j0 <= last; j0 += FL_TILE) {
        key_tile_step<VEC, T, true>(Ks, Vs, pk, pv, k, v, A.w3, j0, last, t);
        uint32_t mine = 0u; /* this lane's dropout word of the tile */
        if constexpr (DROP)
            mine = sl_drop_q_word(&dr.m, sl_cuda_counter(dr.counter, dr.delta), dr.bh0 + bh, t, i0 + warp * 16, j0, lane);
        mma_xyt(s, Qw, Ks, lane);
        bool full = j0 + FL_TILE - 1 <= i0 && j0 + FL_TILE <= t; /* no key past a query or t */
        if constexpr (DROP)
            online_softmax<true, true>(s, o, m_row, l_row, my_i, j0, full, t, sc2, lane,
                                       drop_by_q(mine, &dr.m, lane));
        else
            online_softmax<true>(s, o, m_row, l_row, my_i, j0, full, t, sc2, lane);
        mma_pv(o, s, Vs, lane);
    }
    /* y = O / l through the warp's own rows of Qs (only this warp read
     * them), then a row a step so the stores coalesce */
    float inv[2] = {1.0f / l_row[0], 1.0f / l_row[1]};
    __syncwarp();
    acc_store(Qs, warp, o, inv, lane);
    __syncwarp();
    for (int wr = 0; wr < 16; wr++) {
        int r = warp * 16 + wr, i = i0 + r;
        /* row wr's statistics are held by lane 4 (wr % 8), half wr / 8 */
        float l_q = __shfl_sync(0xffffffffu, wr < 8 ? l_row[0] : l_row[1], 4 * (wr & 7));
        float m_q = __shfl_sync(0xffffffffu, wr < 8 ? m_row[0] : m_row[1], 4 * (wr & 7));
        if (i < t) {
            T *yr = y + A.o + (size_t)i * A.c;
            sl_st(yr, lane, Qs[sl_mma_at(r, lane)]);
            sl_st(yr, lane + 32, Qs[sl_mma_at(r, lane + 32)]);
            if (lse && lane == 0) /* in natural units, as every path saves it */
                lse[(size_t)bh * t + i] = (m_q + log2f(l_q)) * FL_LN2;
        }
    }
}

/* grad_frags on a lane's own elements: s holds the scores (unscaled), dp
 * dO V^T, element (j, i) at row sl_mma_c_row(i) and column
 * sl_mma_c_col(j, i) of the warp's block; at(j, i, &query, &key, &stat)
 * names its query, key and the index of its query's lse and D in lse_s,
 * d_s; lse_s times lse2 is the lse in base 2 (1: put_rows scaled it; log2
 * e: as stored). P and dS replace s and dp, as TF32 values (TF32P) or in
 * FP32 (the bf16 products round them as they pack them). DROP: with the
 * element's dropout factor f from drop (drop_by_q or drop_by_k), P o F
 * replaces s and dS = P o (dP o F - D), as the CPU's flash backward. */
template <bool FULL, bool TF32P, bool DROP = false, class At, class Drop = no_drop>
static __device__ inline void grad_regs(acc_t s, acc_t dp, const float *lse_s, float lse2,
                                        const float *d_s, int t, float sc2, At at,
                                        const Drop &drop = Drop())
{
#pragma unroll
    for (int j = 0; j < 8; j++) {
        auto wj = drop.tile(j);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int query, key, st;
            at(j, i, &query, &key, &st);
            bool valid = FULL || (query < t && key <= query);
            float p = valid ? ex2(__fmaf_rn(s[j][i], sc2, -(lse_s[st] * lse2))) : 0.0f;
            if constexpr (DROP) {
                float f = drop.factor(wj, j, i);
                float ds = sl_attn_grad_logit(p, dp[j][i], f, d_s[st]);
                float pf = p * f;
                s[j][i] = TF32P ? wmma::__float_to_tf32(pf) : pf;
                dp[j][i] = TF32P ? wmma::__float_to_tf32(ds) : ds;
            } else {
                float ds = sl_attn_grad_logit(p, dp[j][i], 1.0f, d_s[st]);
                s[j][i] = TF32P ? wmma::__float_to_tf32(p) : p;
                dp[j][i] = TF32P ? wmma::__float_to_tf32(ds) : ds;
            }
        }
    }
}

/* Both backward kernels: Q, dO, K and V tiles and the query rows' lse and
 * D (64.5 KB); registers hold them to two blocks an SM. */
enum { FM_BWD_SMEM = 4 * FM_TILE_FLOATS * (int)sizeof(float) + 2 * FL_TILE * (int)sizeof(float),
       FM_BWD_BLOCKS = 2 };

/* dK and dV of a key tile, as flash_bwd_kv_k: each warp its 16 keys,
 * S^T = K Q^T and dP^T = V dO^T in its registers, then dV += P^T dO and
 * dK += dS^T Q with P^T and dS^T as the A operands where they stand. */
template <bool VEC, typename T, bool DROP>
static __global__ void __launch_bounds__(FL_THREADS, FM_BWD_BLOCKS)
    flash_bwd_kv_mma_k(int t, int heads, float scale, const T *qkv, const T *dy,
                       const float *lse, const float *dd, T *dqkv, int accumulate, flash_drop dr)
{
    extern __shared__ __align__(128) float sm[];
    float *Qs = sm, *Os = Qs + FM_TILE_FLOATS, *Ks = Os + FM_TILE_FLOATS,
          *Vs = Ks + FM_TILE_FLOATS, *lse_s = Vs + FM_TILE_FLOATS, *d_s = lse_s + FL_TILE;
    int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
    const float sc2 = scale * FL_LOG2E;
    int bh = (int)blockIdx.x, j0 = (int)blockIdx.y * FL_TILE, krows = min(FL_TILE, t - j0);
    heads_at A = heads_of(bh, heads, t);
    const T *q = qkv + A.q, *k = q + A.c, *v = q + 2 * A.c, *o = dy + A.o;
    pending_tile<VEC, T> pq, po; /* the next query tile, in flight */
    pending_rows pr;
    fetch(pq, q + (size_t)j0 * A.w3, A.w3, min(FL_TILE, t - j0));
    fetch(po, o + (size_t)j0 * A.c, A.c, min(FL_TILE, t - j0));
    fetch_rows(pr, lse, dd, (size_t)bh * t + j0, min(FL_TILE, t - j0));
    stage<VEC, true>(Ks, k + (size_t)j0 * A.w3, A.w3, krows);
    stage<VEC, true>(Vs, v + (size_t)j0 * A.w3, A.w3, krows);
    float *Kw = Ks + warp * 16 * SL_MMA_LD, *Vw = Vs + warp * 16 * SL_MMA_LD; /* the warp's keys */
    int key_of_row = j0 + warp * 16;
    acc_t dk, dv;
    acc_zero(dk);
    acc_zero(dv);
    for (int i0 = j0; i0 < t; i0 += FL_TILE) { /* the diagonal tile first */
        __syncthreads(); /* every warp done with the last tile's Q and dO */
        put<VEC, T, true>(Qs, pq);
        put<VEC, T, true>(Os, po);
        put_rows(lse_s, d_s, pr);
        __syncthreads();
        int in = i0 + FL_TILE;
        if (in < t) {
            fetch(pq, q + (size_t)in * A.w3, A.w3, min(FL_TILE, t - in));
            fetch(po, o + (size_t)in * A.c, A.c, min(FL_TILE, t - in));
            fetch_rows(pr, lse, dd, (size_t)bh * t + in, min(FL_TILE, t - in));
        }
        uint32_t mine = 0u; /* this lane's dropout word of the tile */
        if constexpr (DROP)
            mine = sl_drop_k_word(&dr.m, sl_cuda_counter(dr.counter, dr.delta), dr.bh0 + bh, t, key_of_row, i0, lane);
        acc_t st, dpt; /* S^T and dP^T: the warp's keys x 64 queries */
        mma_xyt(st, Kw, Qs, lane);
        mma_xyt(dpt, Vw, Os, lane);
        auto at = [&](int j, int i, int *query, int *key, int *stat) {
            sl_drop_k_at(lane, j, i, i0, key_of_row, query, key);
            *stat = *query - i0;
        };
        if constexpr (DROP) {
            drop_by_k drop = {mine, &dr.m, lane};
            if (i0 >= j0 + FL_TILE && i0 + FL_TILE <= t)
                grad_regs<true, true, true>(st, dpt, lse_s, 1.0f, d_s, t, sc2, at, drop);
            else
                grad_regs<false, true, true>(st, dpt, lse_s, 1.0f, d_s, t, sc2, at, drop);
        } else if (i0 >= j0 + FL_TILE && i0 + FL_TILE <= t) { /* below the diagonal, inside t */
            grad_regs<true, true>(st, dpt, lse_s, 1.0f, d_s, t, sc2, at);
        } else {
            grad_regs<false, true>(st, dpt, lse_s, 1.0f, d_s, t, sc2, at);
        }
        mma_pv(dv, st, Os, lane);
        mma_pv(dk, dpt, Qs, lane);
    }
    /* the sums through the warp's own rows of Ks and Vs (only this warp
     * read them), then written a row at a time */
    const float one[2] = {1.0f, 1.0f};
    __syncwarp();
    acc_store(Ks, warp, dk, one, lane);
    acc_store(Vs, warp, dv, one, lane);
    __syncwarp();
    write_grad_rows<true>(dqkv + A.q + A.c, A.w3, Ks, warp, j0, t, scale, accumulate);
    write_grad_rows<true>(dqkv + A.q + 2 * A.c, A.w3, Vs, warp, j0, t, 1.0f, accumulate);
}

/* dQ of a query tile, as flash_bwd_q_k: S = Q K^T and dP = dO V^T in the
 * warp's registers, dQ += dS K with dS as the A operand where it stands. */
template <bool VEC, typename T, bool DROP>
static __global__ void __launch_bounds__(FL_THREADS, FM_BWD_BLOCKS)
    flash_bwd_q_mma_k(int t, int heads, float scale, const T *qkv, const T *dy,
                      const float *lse, const float *dd, T *dqkv, int accumulate, flash_drop dr)
{
    extern __shared__ __align__(128) float sm[];
    float *Qs = sm, *Os = Qs + FM_TILE_FLOATS, *Ks = Os + FM_TILE_FLOATS,
          *Vs = Ks + FM_TILE_FLOATS, *lse_s = Vs + FM_TILE_FLOATS, *d_s = lse_s + FL_TILE;
    int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
    const float sc2 = scale * FL_LOG2E;
    int bh = (int)blockIdx.x;
    int i0 = (int)(gridDim.y - 1 - blockIdx.y) * FL_TILE, qrows = min(FL_TILE, t - i0);
    heads_at A = heads_of(bh, heads, t);
    const T *q = qkv + A.q, *k = q + A.c, *v = q + 2 * A.c, *o = dy + A.o;
    pending_tile<VEC, T> pk, pv; /* the next key tile, in flight */
    fetch(pk, k, A.w3, min(FL_TILE, t));
    fetch(pv, v, A.w3, min(FL_TILE, t));
    stage<VEC, true>(Qs, q + (size_t)i0 * A.w3, A.w3, qrows);
    stage<VEC, true>(Os, o + (size_t)i0 * A.c, A.c, qrows);
    pending_rows pr;
    fetch_rows(pr, lse, dd, (size_t)bh * t + i0, qrows);
    put_rows(lse_s, d_s, pr);
    float *Qw = Qs + warp * 16 * SL_MMA_LD;
    const float *Ow = Os + warp * 16 * SL_MMA_LD;
    acc_t dq;
    acc_zero(dq);
    int last = i0 + qrows - 1;
    for (int j0 = 0; j0 <= last; j0 += FL_TILE) {
        key_tile_step<VEC, T, true>(Ks, Vs, pk, pv, k, v, A.w3, j0, last, t); /* also publishes lse_s, d_s */
        uint32_t mine = 0u; /* this lane's dropout word of the tile */
        if constexpr (DROP)
            mine = sl_drop_q_word(&dr.m, sl_cuda_counter(dr.counter, dr.delta), dr.bh0 + bh, t, i0 + warp * 16, j0, lane);
        acc_t sf, dpf; /* S and dP: the warp's queries x 64 keys */
        mma_xyt(sf, Qw, Ks, lane);
        mma_xyt(dpf, Ow, Vs, lane);
        auto at = [&](int j, int i, int *query, int *key, int *stat) {
            sl_drop_q_at(lane, j, i, i0, warp * 16, j0, query, key);
            *stat = *query - i0;
        };
        if constexpr (DROP) {
            drop_by_q drop(mine, &dr.m, lane);
            if (j0 + FL_TILE <= i0 && i0 + FL_TILE <= t)
                grad_regs<true, true, true>(sf, dpf, lse_s, 1.0f, d_s, t, sc2, at, drop);
            else
                grad_regs<false, true, true>(sf, dpf, lse_s, 1.0f, d_s, t, sc2, at, drop);
        } else if (j0 + FL_TILE <= i0 && i0 + FL_TILE <= t) { /* below the diagonal, inside t */
            grad_regs<true, true>(sf, dpf, lse_s, 1.0f, d_s, t, sc2, at);
        } else {
            grad_regs<false, true>(sf, dpf, lse_s, 1.0f, d_s, t, sc2, at);
        }
        mma_pv(dq, dpf, Ks, lane);
    }
    const float one[2] = {1.0f, 1.0f};
    __syncwarp(); /* the warp's rows of Qs read for the last time */
    acc_store(Qs, warp, dq, one, lane);
    __syncwarp();
    write_grad_rows<true>(dqkv + A.q, A.w3, Qs, warp, i0, t, scale, accumulate);
}

/* ------------------------------------ the bf16 mma.sync kernels (v5) */

/* A bf16 network's fused attention on bf16 tensor-core products
 * (SL_CUDA_FLASH_BF16, on by default where the tensors allow 16-byte
 * loads; off: the TF32 kernels above on widened tiles, which give the
 * float kernels' bits on widened copies). Tiles are staged as bf16 as
 * they are (no widening), 8 KB each in base/mma_frag.h's XOR layout;
 * operands come by ldmatrix (.trans for a B that is stored k-major: V
 * in P V, dO in dV += P^T dO, Q in dK += dS^T Q, K in dQ += dS K); the
 * products are mma.sync m16n8k16 in bf16 with FP32 accumulation; in the
 * forward a warp's 16 rows of Q stay in its registers as A operands for
 * the whole loop (the backward kernels, short of registers, read theirs
 * from the staged tiles each time). The scores, the softmax
 * and grad_frags' formulas are the TF32 kernels', in FP32 per element;
 * what differs is that P and dS enter the next products rounded to bf16
 * (as cuDNN's and FlashAttention-2's bf16 kernels do) where the TF32
 * kernels round them to TF32: so these kernels agree with the CPU's bf16
 * attention (which computes on widened copies) within bf16's rounding,
 * not bit for bit, and test_cuda_attention holds them to that. They are
 * deterministic (fixed traversal and instruction order), so a re-forward
 * gives its forward's bits. Written without a GPU (2026-11-27):
 * test_mma_frag checks the ldmatrix and m16n8k16 layouts on the CPU. */
typedef uint32_t afrag16[4][4]; /* a warp's 16 x 64 A operand: 4 k-steps */

static __device__ inline void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static __device__ inline void ldm_x4(uint32_t r[4], const uint16_t *p)
{
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

static __device__ inline void ldm_x4_trans(uint32_t r[4], const uint16_t *p)
{
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

/* Two floats as a bf16 pair, the first in the low half: cvt.rn.bf16x2,
 * round to nearest even, which is base/element.h's sl_bf16_round on
 * every finite value and infinity (the operands P and dS are never NaN
 * unless an input is). */
static __device__ inline uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}

/* The warp's 16 rows (from row0) of a staged tile as A operands. */
static __device__ inline void ldm_rows(afrag16 a, const uint16_t *tile, int row0, int lane)
{
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        ldm_x4(a[kk], tile + row0 * 64 + sl_mma16_ldm_a(lane, kk));
}

/* c = X Y^T: X the warp's A operands, Y the 64 rows of a staged tile. */
static __device__ inline void mma16_xyt(acc_t c, const afrag16 x, const uint16_t *y, int lane)
{
    acc_zero(c);
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int kk2 = 0; kk2 < 2; kk2++) {
            uint32_t b[4];
            ldm_x4(b, y + sl_mma16_ldm_bt(lane, j, kk2));
            mma_bf16(c[j], x[2 * kk2], b[0], b[1]);
            mma_bf16(c[j], x[2 * kk2 + 1], b[2], b[3]);
        }
}

/* The same with X the warp's 16 rows (from row0) of a staged tile, read
 * two k-steps at a time (the backward kernels, short of registers to
 * hold X for the whole loop). */
static __device__ inline void mma16_xyt_rows(acc_t c, const uint16_t *x, int row0, const uint16_t *y,
                                             int lane)
{
    acc_zero(c);
#pragma unroll
    for (int kk2 = 0; kk2 < 2; kk2++) {
        uint32_t a0[4], a1[4];
        ldm_x4(a0, x + row0 * 64 + sl_mma16_ldm_a(lane, 2 * kk2));
        ldm_x4(a1, x + row0 * 64 + sl_mma16_ldm_a(lane, 2 * kk2 + 1));
#pragma unroll
        for (int j = 0; j < 8; j++) {
            uint32_t b[4];
            ldm_x4(b, y + sl_mma16_ldm_bt(lane, j, kk2));
            mma_bf16(c[j], a0, b[0], b[1]);
            mma_bf16(c[j], a1, b[2], b[3]);
        }
    }
}

/* o += P V: P the warp's 16 x 64 block in FP32 accumulators (rounded to
 * bf16 here), V the 64 rows (k) x 64 columns of a staged tile. */
static __device__ inline void mma16_pv(acc_t o, const acc_t p, const uint16_t *v, int lane)
{
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        uint32_t a[4] = {pack_bf16(p[2 * kk][0], p[2 * kk][1]), pack_bf16(p[2 * kk][2], p[2 * kk][3]),
                         pack_bf16(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                         pack_bf16(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
        for (int nb2 = 0; nb2 < 4; nb2++) {
            uint32_t b[4];
            ldm_x4_trans(b, v + sl_mma16_ldm_b(lane, kk, nb2));
            mma_bf16(o[2 * nb2], a, b[0], b[1]);
            mma_bf16(o[2 * nb2 + 1], a, b[2], b[3]);
        }
    }
}

/* Tiles go from global to shared memory by cp.async (16 bytes a copy,
 * rows from `rows` on zero-filled), into the buffer the loop does not
 * compute on, so the loads travel during the products without holding
 * registers; each thread copies 4 chunks of 8 values. A tile's row
 * statistics (lse, D) come the same way, 4 bytes a copy. */
enum { F16_PER = FL_TILE * FL_D / 8 / FL_THREADS };

static __device__ inline void async_copy(void *dst, const void *src, int bytes, bool valid)
{
    uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    if (bytes == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src),
                     "r"(valid ? 16 : 0));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(d), "l"(src),
                     "r"(valid ? 4 : 0));
}

static __device__ inline void async_commit() { asm volatile("cp.async.commit_group;"); }
static __device__ inline void async_wait() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

static __device__ inline void async_tile(uint16_t *dst, const uint16_t *src, size_t ldg, int rows)
{
#pragma unroll
    for (int u = 0; u < F16_PER; u++) {
        int e = (int)threadIdx.x + u * FL_THREADS, r = e >> 3, c = (e & 7) * 8;
        bool ok = r < rows; /* an invalid row copies nothing from row 0 */
        async_copy(dst + sl_mma16_at(r, c), src + (ok ? (size_t)r * ldg + c : 0), 16, ok);
    }
}

/* lse and D of query rows row0 .. (qrows valid), as they are stored
 * (lse in natural units; the kernels scale it by log2 e where they read
 * it, as put_rows does). */
static __device__ inline void async_rows(float *lse_s, float *d_s, const float *lse,
                                         const float *dd, size_t row0, int qrows)
{
    int r = (int)threadIdx.x;
    if (r < FL_TILE) {
        bool ok = r < qrows;
        async_copy(lse_s + r, lse + row0 + (ok ? r : 0), 4, ok);
        async_copy(d_s + r, dd + row0 + (ok ? r : 0), 4, ok);
    }
}

/* A gradient's two adjacent elements (row, col), (row, col + 1) of a
 * [.., ld] bf16 tensor, times f, added to what is there when accumulating. */
static __device__ inline void put_pair16(uint16_t *dst, size_t ld, int row, int col, float v0,
                                         float v1, float f, int accumulate)
{
    sl_put_t(dst, (size_t)row * ld + col, v0 * f, accumulate);
    sl_put_t(dst, (size_t)row * ld + col + 1, v1 * f, accumulate);
}

/* A warp's 16 x 64 block of sums into rows row0 + .. of a gradient,
 * rows at or past t left alone. */
static __device__ inline void write_acc16(uint16_t *dst, size_t ld, const acc_t c, int row0, int t,
                                          float f, int accumulate, int lane)
{
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int r = row0 + sl_mma_c_row(lane, 2 * h);
            if (r < t)
                put_pair16(dst, ld, r, sl_mma_c_col(lane, j, 0), c[j][2 * h], c[j][2 * h + 1], f,
                           accumulate);
        }
}

/* Shared memory: the forward Q and two buffers of K and V (40 KB); the
 * backward the block's own two tiles and two buffers of the two it walks
 * with their rows' lse and D (48.5 KB). */
enum { F16_TILE = FL_TILE * FL_D, /* bf16 elements of a tile */
       F16_FWD_SMEM = 5 * F16_TILE * 2, F16_FWD_BLOCKS = 3,
       F16_BWD_SMEM = 6 * F16_TILE * 2 + 4 * FL_TILE * (int)sizeof(float), F16_BWD_BLOCKS = 2 };

/* The forward: flash_fwd_mma_k's traversal and softmax, in bf16 products. */
template <bool DROP>
static __global__ void __launch_bounds__(FL_THREADS, F16_FWD_BLOCKS)
    flash_fwd_bf16_k(int t, int heads, float scale, const uint16_t *qkv, uint16_t *y, float *lse,
                     flash_drop dr)
{
    extern __shared__ __align__(128) uint16_t sm16[];
    /* Q, then buffer b's K and V at 1 + 2 b and 2 + 2 b tiles */
    uint16_t *Qs = sm16, *Ks = Qs + F16_TILE, *Vs = Qs + 2 * F16_TILE;
    int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
    int bh = (int)blockIdx.x;
    int i0 = (int)(gridDim.y - 1 - blockIdx.y) * FL_TILE, qrows = min(FL_TILE, t - i0);
    heads_at A = heads_of(bh, heads, t);
    const uint16_t *q = qkv + A.q, *k = q + A.c, *v = q + 2 * A.c;
    async_tile(Qs, q + (size_t)i0 * A.w3, A.w3, qrows);
    async_tile(Ks, k, A.w3, min(FL_TILE, t));
    async_tile(Vs, v, A.w3, min(FL_TILE, t));
    async_commit();
    afrag16 qa; /* the warp's 16 queries, for the whole loop */
    acc_t o, s;
    acc_zero(o);
    const float sc2 = scale * FL_LOG2E;
    float m_row[2] = {-INFINITY, -INFINITY}, l_row[2] = {0.0f, 0.0f};
    int my_i[2] = {i0 + warp * 16 + sl_mma_c_row(lane, 0), i0 + warp * 16 + sl_mma_c_row(lane, 2)};
    int last = i0 + qrows - 1, buf = 0;
    for (int j0 = 0; j0 <= last; j0 += FL_TILE, buf ^= 1) {
        async_wait();
        __syncthreads(); /* tile j0 in buffer buf; the other buffer no longer read */
        if (j0 == 0)
            ldm_rows(qa, Qs, warp * 16, lane);
        int jn = j0 + FL_TILE, other = (1 - 2 * buf) * 2 * F16_TILE;
        if (jn <= last) {
            async_tile(Ks + other, k + (size_t)jn * A.w3, A.w3, min(FL_TILE, t - jn));
            async_tile(Vs + other, v + (size_t)jn * A.w3, A.w3, min(FL_TILE, t - jn));
            async_commit();
        }
        uint32_t mine = 0u; /* this lane's dropout word of the tile */
        if constexpr (DROP)
            mine = sl_drop_q_word(&dr.m, sl_cuda_counter(dr.counter, dr.delta), dr.bh0 + bh, t, i0 + warp * 16, j0, lane);
        mma16_xyt(s, qa, Ks, lane);
        bool full = j0 + FL_TILE - 1 <= i0 && j0 + FL_TILE <= t;
        if constexpr (DROP)
            online_softmax<false, true>(s, o, m_row, l_row, my_i, j0, full, t, sc2, lane,
                                        drop_by_q(mine, &dr.m, lane));
        else
            online_softmax<false>(s, o, m_row, l_row, my_i, j0, full, t, sc2, lane);
        mma16_pv(o, s, Vs, lane);
        Ks += other;
        Vs += other;
    }
    /* y = O / l, each lane its pairs; lse by the quad's first lane */
    float inv[2] = {1.0f / l_row[0], 1.0f / l_row[1]};
    uint16_t *yh = y + A.o;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int i = my_i[h];
        if (i >= t)
            continue;
#pragma unroll
        for (int j = 0; j < 8; j++)
            *(uint32_t *)(yh + (size_t)i * A.c + sl_mma_c_col(lane, j, 0)) =
                pack_bf16(o[j][2 * h] * inv[h], o[j][2 * h + 1] * inv[h]);
        if (lse && (lane & 3) == 0)
            lse[(size_t)bh * t + i] = (m_row[h] + log2f(l_row[h])) * FL_LN2;
    }
}

/* dK and dV of a key tile (flash_bwd_kv_mma_k's traversal): the warp's K
 * and V rows as A operands; S^T = K Q^T, dP^T = V dO^T; dV += P^T dO and
 * dK += dS^T Q with dO and Q read by .trans. */
template <bool DROP>
static __global__ void __launch_bounds__(FL_THREADS, F16_BWD_BLOCKS)
    flash_bwd_kv_bf16_k(int t, int heads, float scale, const uint16_t *qkv, const uint16_t *dy,
                        const float *lse, const float *dd, uint16_t *dqkv, int accumulate,
                        flash_drop dr)
{
    extern __shared__ __align__(128) uint16_t sm16[];
    /* K, V, then buffer b's Q and dO at 2 + 2 b and 3 + 2 b tiles, then
     * buffer b's lse and D */
    uint16_t *Ks = sm16, *Vs = Ks + F16_TILE, *Qs = Ks + 2 * F16_TILE, *Os = Ks + 3 * F16_TILE;
    float *lse_s = (float *)(Ks + 6 * F16_TILE), *d_s = lse_s + FL_TILE;
    int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
    const float sc2 = scale * FL_LOG2E;
    int bh = (int)blockIdx.x, j0 = (int)blockIdx.y * FL_TILE, krows = min(FL_TILE, t - j0);
    heads_at A = heads_of(bh, heads, t);
    const uint16_t *q = qkv + A.q, *k = q + A.c, *v = q + 2 * A.c, *o = dy + A.o;
    async_tile(Ks, k + (size_t)j0 * A.w3, A.w3, krows);
    async_tile(Vs, v + (size_t)j0 * A.w3, A.w3, krows);
    async_tile(Qs, q + (size_t)j0 * A.w3, A.w3, min(FL_TILE, t - j0));
    async_tile(Os, o + (size_t)j0 * A.c, A.c, min(FL_TILE, t - j0));
    async_rows(lse_s, d_s, lse, dd, (size_t)bh * t + j0, min(FL_TILE, t - j0));
    async_commit();
    int key_of_row = j0 + warp * 16, buf = 0;
    acc_t dk, dv;
    acc_zero(dk);
    acc_zero(dv);
    for (int i0 = j0; i0 < t; i0 += FL_TILE, buf ^= 1) { /* the diagonal tile first */
        async_wait();
        __syncthreads(); /* tile i0 in buffer buf; the other buffer no longer read */
        int in = i0 + FL_TILE, other = (1 - 2 * buf) * 2 * F16_TILE,
            other_s = (1 - 2 * buf) * 2 * FL_TILE;
        if (in < t) {
            async_tile(Qs + other, q + (size_t)in * A.w3, A.w3, min(FL_TILE, t - in));
            async_tile(Os + other, o + (size_t)in * A.c, A.c, min(FL_TILE, t - in));
            async_rows(lse_s + other_s, d_s + other_s, lse, dd, (size_t)bh * t + in,
                       min(FL_TILE, t - in));
            async_commit();
        }
        uint32_t mine = 0u; /* this lane's dropout word of the tile */
        if constexpr (DROP)
            mine = sl_drop_k_word(&dr.m, sl_cuda_counter(dr.counter, dr.delta), dr.bh0 + bh, t, key_of_row, i0, lane);
        acc_t st, dpt;
        mma16_xyt_rows(st, Ks, warp * 16, Qs, lane);
        mma16_xyt_rows(dpt, Vs, warp * 16, Os, lane);
        auto at = [&](int j, int i, int *query, int *key, int *stat) {
            sl_drop_k_at(lane, j, i, i0, key_of_row, query, key);
            *stat = *query - i0;
        };
        if constexpr (DROP) {
            drop_by_k drop = {mine, &dr.m, lane};
            if (i0 >= j0 + FL_TILE && i0 + FL_TILE <= t)
                grad_regs<true, false, true>(st, dpt, lse_s, FL_LOG2E, d_s, t, sc2, at, drop);
            else
                grad_regs<false, false, true>(st, dpt, lse_s, FL_LOG2E, d_s, t, sc2, at, drop);
        } else if (i0 >= j0 + FL_TILE && i0 + FL_TILE <= t) {
            grad_regs<true, false>(st, dpt, lse_s, FL_LOG2E, d_s, t, sc2, at);
        } else {
            grad_regs<false, false>(st, dpt, lse_s, FL_LOG2E, d_s, t, sc2, at);
        }
        mma16_pv(dv, st, Os, lane);
        mma16_pv(dk, dpt, Qs, lane);
        Qs += other;
        Os += other;
        lse_s += other_s;
        d_s += other_s;
    }
    write_acc16(dqkv + A.q + A.c, A.w3, dk, key_of_row, t, scale, accumulate, lane);
    write_acc16(dqkv + A.q + 2 * A.c, A.w3, dv, key_of_row, t, 1.0f, accumulate, lane);
}

/* dQ of a query tile (flash_bwd_q_mma_k's traversal): the warp's Q and dO
 * rows as A operands; S = Q K^T, dP = dO V^T; dQ += dS K with K read by
 * .trans. */
template <bool DROP>
static __global__ void __launch_bounds__(FL_THREADS, F16_BWD_BLOCKS)
    flash_bwd_q_bf16_k(int t, int heads, float scale, const uint16_t *qkv, const uint16_t *dy,
                       const float *lse, const float *dd, uint16_t *dqkv, int accumulate,
                       flash_drop dr)
{
    extern __shared__ __align__(128) uint16_t sm16[];
    /* Q, dO, then buffer b's K and V at 2 + 2 b and 3 + 2 b tiles, then
     * the rows' lse and D */
    uint16_t *Qs = sm16, *Os = Qs + F16_TILE, *Ks = Qs + 2 * F16_TILE, *Vs = Qs + 3 * F16_TILE;
    float *lse_s = (float *)(Qs + 6 * F16_TILE), *d_s = lse_s + FL_TILE;
    int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
    const float sc2 = scale * FL_LOG2E;
    int bh = (int)blockIdx.x;
    int i0 = (int)(gridDim.y - 1 - blockIdx.y) * FL_TILE, qrows = min(FL_TILE, t - i0);
    heads_at A = heads_of(bh, heads, t);
    const uint16_t *q = qkv + A.q, *k = q + A.c, *v = q + 2 * A.c, *o = dy + A.o;
    async_tile(Qs, q + (size_t)i0 * A.w3, A.w3, qrows);
    async_tile(Os, o + (size_t)i0 * A.c, A.c, qrows);
    async_rows(lse_s, d_s, lse, dd, (size_t)bh * t + i0, qrows);
    async_tile(Ks, k, A.w3, min(FL_TILE, t));
    async_tile(Vs, v, A.w3, min(FL_TILE, t));
    async_commit();
    acc_t dq;
    acc_zero(dq);
    int last = i0 + qrows - 1, buf = 0;
    for (int j0 = 0; j0 <= last; j0 += FL_TILE, buf ^= 1) {
        async_wait();
        __syncthreads(); /* tile j0 in buffer buf; the other buffer no longer read */
        int jn = j0 + FL_TILE, other = (1 - 2 * buf) * 2 * F16_TILE;
        if (jn <= last) {
            async_tile(Ks + other, k + (size_t)jn * A.w3, A.w3, min(FL_TILE, t - jn));
            async_tile(Vs + other, v + (size_t)jn * A.w3, A.w3, min(FL_TILE, t - jn));
            async_commit();
        }
        uint32_t mine = 0u; /* this lane's dropout word of the tile */
        if constexpr (DROP)
            mine = sl_drop_q_word(&dr.m, sl_cuda_counter(dr.counter, dr.delta), dr.bh0 + bh, t, i0 + warp * 16, j0, lane);
        acc_t sf, dpf;
        mma16_xyt_rows(sf, Qs, warp * 16, Ks, lane);
        mma16_xyt_rows(dpf, Os, warp * 16, Vs, lane);
        auto at = [&](int j, int i, int *query, int *key, int *stat) {
            sl_drop_q_at(lane, j, i, i0, warp * 16, j0, query, key);
            *stat = *query - i0;
        };
        if constexpr (DROP) {
            drop_by_q drop(mine, &dr.m, lane);
            if (j0 + FL_TILE <= i0 && i0 + FL_TILE <= t)
                grad_regs<true, false, true>(sf, dpf, lse_s, FL_LOG2E, d_s, t, sc2, at, drop);
            else
                grad_regs<false, false, true>(sf, dpf, lse_s, FL_LOG2E, d_s, t, sc2, at, drop);
        } else if (j0 + FL_TILE <= i0 && i0 + FL_TILE <= t) {
            grad_regs<true, false>(sf, dpf, lse_s, FL_LOG2E, d_s, t, sc2, at);
        } else {
            grad_regs<false, false>(sf, dpf, lse_s, FL_LOG2E, d_s, t, sc2, at);
        }
        mma16_pv(dq, dpf, Ks, lane);
        Ks += other;
        Vs += other;
    }
    write_acc16(dqkv + A.q, A.w3, dq, i0 + warp * 16, t, scale, accumulate, lane);
}

/* ------------------------------------------------------------- entries */

static dim3 grid_of(const sl_attention_desc *d)
{
    return dim3((unsigned)(d->n * d->heads), (unsigned)((d->t + FL_TILE - 1) / FL_TILE));
}

/* Group loads where the tensors allow them (the planner's 64-byte
 * alignment and whole sequences always do; a caller's own buffers may
 * not): the rows' pitches (3c, c) are multiples of 4 values with heads of
 * 64, so the base addresses decide (16 bytes for float, 8 for bf16). */
template <typename T>
static bool vec_ok(const T *a, const T *b)
{
    return (uintptr_t)a % (4 * sizeof(T)) == 0 && (!b || (uintptr_t)b % (4 * sizeof(T)) == 0);
}

/* A kernel's dynamic shared memory above the default 48 KB, and all of
 * the SM's 228 KB as shared memory so that its blocks fit as the enums
 * above count them (three forward blocks of 68 KB, two dK/dV of 103 KB). */
template <class K>
static void set_smem(sl_cuda_state *s, K kernel, int bytes)
{
    SL_CUDA_CHECK(s, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          bytes));
    SL_CUDA_CHECK(s, cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          (int)cudaSharedmemCarveoutMaxShared));
}

/* The call's dropout for the kernels' DROP instantiations, which run
 * where p > 0 (sl_cuda_flash_applies lets dropout in only with the
 * mma.sync kernels on) and, in the forward, only in training: evaluation
 * (no lse) drops nothing, as on the CPU and in the chunks. */
static flash_drop drop_of(const sl_attention_desc *d)
{
    flash_drop dr;
    dr.m = sl_dropout_mask_of(d->p, d->seed);
    dr.counter = d->counter;
    dr.delta = d->counter_delta;
    dr.bh0 = d->bh0;
    return dr;
}

template <bool VEC, typename T, bool DROP>
static void forward_mma(sl_cuda_state *s, const sl_attention_desc *d, const T *qkv, T *y,
                        float *lse)
{
    set_smem(s, flash_fwd_mma_k<VEC, T, DROP>, FM_FWD_SMEM);
    flash_fwd_mma_k<VEC, T, DROP><<<grid_of(d), FL_THREADS, FM_FWD_SMEM, s->stream>>>(
        d->t, d->heads, sl_attn_scale(d->d), qkv, y, lse, drop_of(d));
    SL_CUDA_LAUNCHED(s);
}

template <bool VEC, typename T, bool DROP>
static void backward_mma(sl_cuda_state *s, const sl_attention_desc *d, const T *qkv, const T *dy,
                         const float *lse, const float *dd, T *dqkv, int accumulate)
{
    float scale = sl_attn_scale(d->d);
    set_smem(s, flash_bwd_kv_mma_k<VEC, T, DROP>, FM_BWD_SMEM);
    set_smem(s, flash_bwd_q_mma_k<VEC, T, DROP>, FM_BWD_SMEM);
    flash_bwd_kv_mma_k<VEC, T, DROP><<<grid_of(d), FL_THREADS, FM_BWD_SMEM, s->stream>>>(
        d->t, d->heads, scale, qkv, dy, lse, dd, dqkv, accumulate, drop_of(d));
    SL_CUDA_LAUNCHED(s);
    flash_bwd_q_mma_k<VEC, T, DROP><<<grid_of(d), FL_THREADS, FM_BWD_SMEM, s->stream>>>(
        d->t, d->heads, scale, qkv, dy, lse, dd, dqkv, accumulate, drop_of(d));
    SL_CUDA_LAUNCHED(s);
}

template <bool VEC, typename T>
static void forward_as(sl_cuda_state *s, const sl_attention_desc *d, const T *qkv, T *y,
                       float *lse)
{
    if (s->flash_mma) {
        if (lse && d->p > 0.0f)
            forward_mma<VEC, T, true>(s, d, qkv, y, lse);
        else
            forward_mma<VEC, T, false>(s, d, qkv, y, lse);
        return;
    }
    set_smem(s, flash_fwd_k<VEC, T>, FL_FWD_SMEM);
    flash_fwd_k<VEC, T><<<grid_of(d), FL_THREADS, FL_FWD_SMEM, s->stream>>>(
        d->t, d->heads, sl_attn_scale(d->d), qkv, y, lse);
    SL_CUDA_LAUNCHED(s);
}

template <bool VEC, typename T>
static void backward_as(sl_cuda_state *s, const sl_attention_desc *d, const T *qkv, const T *dy,
                        const float *lse, const float *dd, T *dqkv, int accumulate)
{
    if (s->flash_mma) {
        if (d->p > 0.0f)
            backward_mma<VEC, T, true>(s, d, qkv, dy, lse, dd, dqkv, accumulate);
        else
            backward_mma<VEC, T, false>(s, d, qkv, dy, lse, dd, dqkv, accumulate);
        return;
    }
    float scale = sl_attn_scale(d->d);
    set_smem(s, flash_bwd_kv_k<VEC, T>, FL_KV_SMEM);
    set_smem(s, flash_bwd_q_k<VEC, T>, FL_Q_SMEM);
    flash_bwd_kv_k<VEC, T><<<grid_of(d), FL_THREADS, FL_KV_SMEM, s->stream>>>(
        d->t, d->heads, scale, qkv, dy, lse, dd, dqkv, accumulate);
    SL_CUDA_LAUNCHED(s);
    flash_bwd_q_k<VEC, T><<<grid_of(d), FL_THREADS, FL_Q_SMEM, s->stream>>>(
        d->t, d->heads, scale, qkv, dy, lse, dd, dqkv, accumulate);
    SL_CUDA_LAUNCHED(s);
}

template <typename T>
static void forward_of(sl_cuda_state *s, const sl_attention_desc *d, const T *qkv, T *y,
                       float *lse)
{
    if (vec_ok(qkv, (const T *)NULL))
        forward_as<true>(s, d, qkv, y, lse);
    else
        forward_as<false>(s, d, qkv, y, lse);
}

template <typename T>
static void backward_of(sl_cuda_state *s, const sl_attention_desc *d, const T *qkv, const T *dy,
                        const float *lse, const float *dd, T *dqkv, int accumulate)
{
    if (vec_ok(qkv, dy))
        backward_as<true>(s, d, qkv, dy, lse, dd, dqkv, accumulate);
    else
        backward_as<false>(s, d, qkv, dy, lse, dd, dqkv, accumulate);
}

/* The bf16 kernels' 16-byte loads of the tiles: the rows' pitches (3c, c)
 * are multiples of 8 values with heads of 64, so the base addresses
 * decide; y and the gradients are written in pairs (4 bytes). */
static bool bf16_mma_ok(const sl_cuda_state *s, const void *qkv, const void *dy, const void *out)
{
    return s->flash_bf16 && (uintptr_t)qkv % 16 == 0 && (!dy || (uintptr_t)dy % 16 == 0) &&
           (uintptr_t)out % 4 == 0;
}

static dim3 grid_of(const sl_attention_desc *d);

template <bool DROP>
static void forward_bf16(sl_cuda_state *s, const sl_attention_desc *d, const float *qkv, float *y,
                         float *lse)
{
    set_smem(s, flash_fwd_bf16_k<DROP>, F16_FWD_SMEM);
    flash_fwd_bf16_k<DROP><<<grid_of(d), FL_THREADS, F16_FWD_SMEM, s->stream>>>(
        d->t, d->heads, sl_attn_scale(d->d), SL_CBF(qkv), SL_BF(y), lse, drop_of(d));
    SL_CUDA_LAUNCHED(s);
}

template <bool DROP>
static void backward_bf16(sl_cuda_state *s, const sl_attention_desc *d, const float *qkv,
                          const float *dy, const float *lse, const float *dd, float *dqkv,
                          int accumulate)
{
    float scale = sl_attn_scale(d->d);
    set_smem(s, flash_bwd_kv_bf16_k<DROP>, F16_BWD_SMEM);
    set_smem(s, flash_bwd_q_bf16_k<DROP>, F16_BWD_SMEM);
    flash_bwd_kv_bf16_k<DROP><<<grid_of(d), FL_THREADS, F16_BWD_SMEM, s->stream>>>(
        d->t, d->heads, scale, SL_CBF(qkv), SL_CBF(dy), lse, dd, SL_BF(dqkv), accumulate,
        drop_of(d));
    SL_CUDA_LAUNCHED(s);
    flash_bwd_q_bf16_k<DROP><<<grid_of(d), FL_THREADS, F16_BWD_SMEM, s->stream>>>(
        d->t, d->heads, scale, SL_CBF(qkv), SL_CBF(dy), lse, dd, SL_BF(dqkv), accumulate,
        drop_of(d));
    SL_CUDA_LAUNCHED(s);
}

extern "C" void sl_cuda_flash_forward(sl_cuda_state *s, const sl_attention_desc *d, int bf16,
                                      const float *qkv, float *y, float *lse)
{
    if (bf16 && bf16_mma_ok(s, qkv, NULL, y)) {
        if (lse && d->p > 0.0f)
            forward_bf16<true>(s, d, qkv, y, lse);
        else
            forward_bf16<false>(s, d, qkv, y, lse);
    } else if (bf16)
        forward_of(s, d, SL_CBF(qkv), SL_BF(y), lse);
    else
        forward_of(s, d, qkv, y, lse);
}

extern "C" void sl_cuda_flash_backward(sl_cuda_state *s, const sl_attention_desc *d, int bf16,
                                       const float *qkv, const float *dy, const float *lse,
                                       const float *dd, float *dqkv, int accumulate)
{
    if (bf16 && bf16_mma_ok(s, qkv, dy, dqkv)) {
        if (d->p > 0.0f)
            backward_bf16<true>(s, d, qkv, dy, lse, dd, dqkv, accumulate);
        else
            backward_bf16<false>(s, d, qkv, dy, lse, dd, dqkv, accumulate);
    } else if (bf16)
        backward_of(s, d, SL_CBF(qkv), SL_CBF(dy), lse, dd, SL_BF(dqkv), accumulate);
    else
        backward_of(s, d, qkv, dy, lse, dd, dqkv, accumulate);
}
