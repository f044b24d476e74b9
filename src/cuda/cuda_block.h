/*
 * cuda_block.h — device helpers of the kernels where a warp or a block
 * works on one row (cuda_attention.cu, cuda_decode.cu, cuda_transformer.cu,
 * cuda_loss_optim.cu): maxima and double sums over fixed trees, in shared
 * memory or by warp shuffles, so every reduction has one order whatever
 * the scheduling. Only .cu files include it.
 *
 * The warp trees are xor butterflies: at each step lane i adds the value
 * of lane i ^ o to its own. Both lanes of a pair add the same two values
 * (in either order: IEEE addition commutes), so after the five steps every
 * lane holds the same bits, and a block's threads can each go on with the
 * result without a broadcast.
 */
#ifndef SL_CUDA_BLOCK_H
#define SL_CUDA_BLOCK_H

#include <math.h>

#include <cooperative_groups.h>

#include "base/col_grid.h"
#include "base/element.h"

/* The maximum of v over a block of `threads` threads (a power of two),
 * every thread's sh[threadIdx.x] a slot of its own; all threads get it. */
static __device__ inline float sl_cuda_block_max(float v, float *sh, int threads)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = threads / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

/* The sum of v over the block, in double, by the same tree. */
static __device__ inline double sl_cuda_block_sum(double v, double *sh, int threads)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = threads / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

/* Row kernels with a warp per row: blocks of SL_CUDA_ROW_THREADS threads
 * (8 warps, a row each); each warp visits rows warp, warp + warps, ...
 * (a warp's lanes share the row, so its shuffles see all 32), and
 * sl_cuda_warp_row_blocks(rows) is the launch's grid (at most 2^20
 * blocks; the loop strides past). */
#define SL_CUDA_ROW_THREADS 256

#define SL_CUDA_WARP_ROWS(row, rows)                                                           \
    for (size_t row = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5; row < (rows);      \
         row += ((size_t)gridDim.x * blockDim.x) >> 5)

static inline unsigned sl_cuda_warp_row_blocks(size_t rows)
{
    size_t per = SL_CUDA_ROW_THREADS / 32, b = (rows + per - 1) / per;
    return (unsigned)(b > (1u << 20) ? (1u << 20) : (b ? b : 1));
}

/* The maximum of v over the 32 lanes of a warp (all active). */
static __device__ inline float sl_cuda_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The sum of v over the 32 lanes of a warp (all active), every lane the
 * same bits. */
static __device__ inline double sl_cuda_warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The sum of v over a block of blockDim.x threads (a multiple of 32, at
 * most 1024): each warp's butterfly, then every warp's butterfly over the
 * warps' sums in warp order (zero past the last warp); every thread gets
 * the same bits. sh: 32 doubles of shared memory, free again at return. */
static __device__ inline double sl_cuda_block_sum_warps(double v, double *sh)
{
    int lane = (int)threadIdx.x & 31, w = (int)threadIdx.x >> 5, warps = (int)blockDim.x >> 5;
    v = sl_cuda_warp_sum(v);
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    v = sl_cuda_warp_sum(lane < warps ? sh[lane] : 0.0);
    __syncthreads();
    return v;
}

/* Column tiles: a block of SL_CUDA_COLS x SL_CUDA_RUNS threads sums
 * SL_CUDA_COLS adjacent columns of a row-major matrix, thread (x, y) the
 * rows y, y + RUNS, ... of column x in order (a warp reads 8 adjacent
 * columns of 4 rows: whole 32-byte sectors); sl_cuda_column_tree then
 * adds a column's RUNS partial sums v by a fixed tree over y (sh[y] +=
 * sh[y + s] for s = RUNS / 2 ... 1) and returns the column's sum to the
 * threads of y = 0. Narrow tiles give GPT-2's 768 columns 96 blocks and
 * each thread 64 of 8192 rows. The kernels unroll a thread's loop 16
 * times, so its loads go out 16 at a time ahead of its in-order adds
 * (nvcc's own 4 left the bias gradient and LayerNorm's parameter sums at
 * 23-35 us a call for 8192 x 768 on an H100, ncu 2026-11-27, several
 * times the bytes' time; not yet timed since). sh: RUNS x (COLS + 1)
 * doubles of shared memory, free again at return. */
#define SL_CUDA_COLS 8
#define SL_CUDA_RUNS 128

static __device__ inline double sl_cuda_column_tree(double v, double (*sh)[SL_CUDA_COLS + 1])
{
    int x = (int)threadIdx.x, y = (int)threadIdx.y;
    sh[y][x] = v;
    __syncthreads();
    for (int s = SL_CUDA_RUNS / 2; s > 0; s >>= 1) {
        if (y < s)
            sh[y][x] += sh[y + s][x];
        __syncthreads();
    }
    double r = sh[0][x];
    __syncthreads();
    return r;
}

/* The tiles of `cols` columns: a launch's blocks (dim3(SL_CUDA_COLS,
 * SL_CUDA_RUNS) threads each). */
static inline unsigned sl_cuda_tiles(int cols)
{
    return (unsigned)((cols + SL_CUDA_COLS - 1) / SL_CUDA_COLS);
}

/* A column-part thread's rows, lo + y, lo + y + RUNS, ... below hi, in
 * order: ld(r, u) loads row r's values into slot u, add(u) adds slot u's
 * terms. Batches of A rows are loaded before any of them is added, so
 * their loads are in flight together (a loop that loaded and added row
 * by row left ptxas to issue each load just ahead of its add: one memory
 * latency a row); past the whole batches (base/col_grid.h's
 * sl_col_batches_end, which test_bn_grid walks) the rows go one at a
 * time. The kernels load 8 rows a batch of one value (the bias) and 4 of
 * four (LayerNorm: x, dy and the row's two statistics). */
template <int A, class Ld, class Add>
static __device__ inline void sl_cuda_column_rows(int lo, int hi, Ld ld, Add add)
{
    int r = lo + (int)threadIdx.y, end = sl_col_batches_end(lo, hi, (int)threadIdx.y, A);
    for (; r < end; r += A * SL_COL_GRID_RUNS) {
#pragma unroll
        for (int u = 0; u < A; u++)
            ld(r + u * SL_COL_GRID_RUNS, u);
#pragma unroll
        for (int u = 0; u < A; u++)
            add(u);
    }
    for (; r < hi; r += SL_COL_GRID_RUNS) {
        ld(r, 0);
        add(0);
    }
}

/* Column parts (base/col_grid.h): a block of SL_COL_GRID_COLS x
 * SL_COL_GRID_RUNS threads has summed, thread by thread, its part of the
 * rows into v[0 .. K-1] (K sums a column: LayerNorm's weight and bias);
 * sl_cuda_column_parts joins them. First each sum's RUNS partials by a
 * fixed tree over y (sh[y][x] += sh[y + s][x], s = RUNS / 2 ... 1) into
 * the block's part[k][x]; then, when the tile's rows are split into
 * gridDim.y parts (the blocks of one cluster, (1, parts, 1), rank =
 * blockIdx.y), the threads y = 0 of part 0 add the other parts' sums in
 * part order, ((p0 + p1) + p2) + ..., read from their shared memory. The
 * tile's sums end in v of the threads (x, 0) of part 0, whose caller
 * writes them; every thread of every block must call this (it waits at
 * the cluster's barriers). Compiled for sm_90 and up only: the backend
 * launches these kernels where the device has clusters and the kernel
 * was built for them (cuda_backend.cu, col_parts), the column tiles above
 * elsewhere (built for less, a launch of several parts traps). */
template <int K>
static __device__ inline void sl_cuda_column_parts(double (&v)[K],
                                                   double (*sh)[SL_COL_GRID_COLS + 1],
                                                   double (*part)[SL_COL_GRID_COLS])
{
    int x = (int)threadIdx.x, y = (int)threadIdx.y;
#pragma unroll
    for (int k = 0; k < K; k++) {
        sh[y][x] = v[k];
        __syncthreads();
        for (int s = SL_COL_GRID_RUNS / 2; s > 0; s >>= 1) {
            if (y < s)
                sh[y][x] += sh[y + s][x];
            __syncthreads();
        }
        if (y == 0)
            part[k][x] = v[k] = sh[0][x];
        __syncthreads();
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (gridDim.y > 1) {
        cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
        cl.sync(); /* every part's sums written, and visible across the cluster */
        if (blockIdx.y == 0 && y == 0)
            for (unsigned p = 1; p < gridDim.y; p++)
#pragma unroll
                for (int k = 0; k < K; k++)
                    v[k] += *cl.map_shared_rank(&part[k][x], p);
        cl.sync(); /* no block leaves while part 0 may still read its sums */
    }
#else
    if (gridDim.y > 1) /* no join without clusters: fail, never return part 0's sums */
        __trap();
#endif
}

/* A warp's first maximum of its lanes' (v, i) by sl_argmax_takes over
 * the butterfly (lane 0's result is the one a caller reads). */
static __device__ inline void sl_cuda_warp_argmax(float *v, int *i)
{
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, *v, o);
        int oi = __shfl_xor_sync(0xffffffffu, *i, o);
        if (sl_argmax_takes(ov, oi, *v, *i)) {
            *v = ov;
            *i = oi;
        }
    }
}

/* A block's first maximum: each thread's (v, i) from its own scan, joined
 * by sl_argmax_takes over each warp's butterfly and then over the warps;
 * every thread gets (*v, *i) of warp 0's lane 0. fsh, ish: 32 slots each
 * of shared memory, free again at return. */
static __device__ inline void sl_cuda_block_argmax(float *v, int *i, float *fsh, int *ish)
{
    int lane = (int)threadIdx.x & 31, w = (int)threadIdx.x >> 5, warps = (int)blockDim.x >> 5;
    float bv = *v;
    int bi = *i;
    sl_cuda_warp_argmax(&bv, &bi);
    if (lane == 0) {
        fsh[w] = bv;
        ish[w] = bi;
    }
    __syncthreads();
    if (w == 0) {
        bv = lane < warps ? fsh[lane] : -INFINITY;
        bi = lane < warps ? ish[lane] : 0x7fffffff;
        sl_cuda_warp_argmax(&bv, &bi);
    }
    __syncthreads(); /* every warp has read fsh / ish */
    if (threadIdx.x == 0) {
        fsh[0] = bv;
        ish[0] = bi;
    }
    __syncthreads();
    *v = fsh[0];
    *i = ish[0];
    __syncthreads();
}

/* A row's first maximum and its index over n values read by ld(j), for a
 * block of THREADS threads: each thread scans j = threadIdx.x, + THREADS,
 * ... from (-inf, INT_MAX), so a NaN never wins; sl_cuda_block_argmax
 * then joins the threads, and every thread gets (*mx, *arg). fsh, ish as
 * there. */
template <int THREADS, class Ld>
static __device__ inline void sl_cuda_block_row_max(int n, Ld ld, float *mx, int *arg,
                                                    float *fsh, int *ish)
{
    float m = -INFINITY;
    int a = 0x7fffffff;
    for (int j = (int)threadIdx.x; j < n; j += THREADS) {
        float v = ld(j);
        if (sl_argmax_takes(v, j, m, a)) {
            m = v;
            a = j;
        }
    }
    sl_cuda_block_argmax(&m, &a, fsh, ish);
    *mx = m;
    *arg = a;
}

#endif
