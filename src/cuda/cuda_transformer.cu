/*
 * cuda_transformer.cu — the kernels of GPT-2's own layers on the GPU (run
 * stage): LayerNorm, the tanh GELU and the token + position embedding.
 * The arithmetic is base/element.h's (terms, finalisers, element maps);
 * the traversals are this file's, fixed per shape, so results are
 * deterministic and a re-forward repeats the forward's bits. LayerNorm and
 * GELU take bf16 activations too (ex->bf16; cuda_common.h's sl_ld / sl_st):
 *
 * - LayerNorm forward and input gradient: a warp per row (cuda_block.h's
 *   SL_CUDA_WARP_ROWS: 8 rows to a block of 256 threads). Lane l walks
 *   the row's columns l, l + 32, ... adding its terms in double; the 32
 *   lane sums are joined by the xor butterfly of cuda_block.h (every lane
 *   the same bits), then each lane writes its own columns.
 * - LayerNorm's weight and bias gradients: column parts (base/col_grid.h,
 *   cuda_block.h's sl_cuda_column_parts): a block of 32 x 32 threads
 *   takes 32 adjacent columns and one part of the rows, thread (x, y)
 *   adds the part's rows y, y + 32, ... of column x in order, in double;
 *   a fixed tree joins the 32 partial sums of a column, then the parts'
 *   sums are added in part order across their cluster. Where the device
 *   or the build has no clusters (or SL_CUDA_COL_PARTS=off), column
 *   tiles (sl_cuda_column_tree): a block of 8 x 128 threads takes 8
 *   adjacent columns, thread (x, y) adds the rows y, y + 128, ... of
 *   column x in order, in double; a fixed tree joins the 128 sums.
 * - The embedding's position table: a thread per element of wpe adds the
 *   sequences' rows in order, in float. Its token table: the token
 *   indices are sorted by id, stably (CUB's radix sort, in the planned
 *   workspace), and a block per distinct id adds that id's rows in token
 *   order, in float, a thread per column. Both are the CPU's sequences of
 *   adds, so the tables' gradients are the CPU's bits; no atomics.
 */
#include <type_traits>

#include <cub/device/device_radix_sort.cuh>

#include "base/base.h"
#include "base/element.h"
#include "cuda/cuda_block.h"
#include "cuda/cuda_common.h"

/* ---- LayerNorm ---- */

/* A row's mean and 1/std from its lanes' sums of x and x * x, joined
 * over the warp; lane 0 keeps them for the backward (when mean is not
 * NULL). */
static __device__ inline void ln_row_moments(double s, double q, int c, float eps, int lane,
                                             size_t r, float *mean, float *rstd, float *m,
                                             float *rs)
{
    s = sl_cuda_warp_sum(s);
    q = sl_cuda_warp_sum(q);
    sl_ln_moments(s, q, c, eps, m, rs);
    if (mean && lane == 0) {
        mean[r] = *m;
        rstd[r] = *rs;
    }
}

/* The block's copy of n floats (a row's weight or bias) in shared memory,
 * for the register paths' writes; the caller waits at a barrier before
 * reading it. */
static __device__ inline void block_copy(float *dst, const float *src, int n)
{
    for (int j = (int)threadIdx.x; j < n; j += (int)blockDim.x)
        dst[j] = src[j];
}

/* Rows of at most 32 * LN_REG columns keep their values in registers
 * (see ln_dx_k below; in the forward, see ln_fwd_k): R a lane, R the
 * least multiple of 8 that holds the row (ln_regs), so a kernel holds no
 * more registers than its rows need (GPT-2 small's 768 columns: 24), and
 * both kernels are held to 128 registers (two blocks an SM:
 * __launch_bounds__'s 2). ptxas then reports for R = 24 no spill but 8
 * bytes in the float input gradient; R = 32 for every width had spilled
 * 32 bytes in the bf16 input gradient. A lane's values, and so its sums,
 * are the same whatever R. Not yet timed on a GPU. */
enum { LN_REG = 32 };

/* f(std::integral_constant<int, R>) for c columns' R (8 for wider rows,
 * which the kernels take by their loops). */
template <typename F>
static void ln_regs(int c, F f)
{
    if (c <= 32 * 8)
        f(std::integral_constant<int, 8>{});
    else if (c <= 32 * 16)
        f(std::integral_constant<int, 16>{});
    else if (c <= 32 * 24)
        f(std::integral_constant<int, 24>{});
    else if (c <= 32 * LN_REG)
        f(std::integral_constant<int, LN_REG>{});
    else
        f(std::integral_constant<int, 8>{});
}

/* T: the activations' type (cuda_common.h; SL_BF16_LAYERNORM). A row of
 * at most 32 * LN_REG columns is loaded into registers first, all its
 * loads issued at once, then summed and normalised from there: the loop
 * that summed each value as it arrived waited on its loads one at a time
 * (a whole row's latency 24 times over: 25 us a call for GPT-2 small's
 * 8192 x 768 on an H100, about three times the bytes' time, ncu
 * 2026-11-27; not yet timed on a GPU: regs 0, SL_CUDA_LN_REGS=off, takes
 * the loop). The weight and bias the writes read are the block's copy in
 * shared memory. The same sums in the same order: the same bits. */
template <typename T, int R>
static __global__ void __launch_bounds__(SL_CUDA_ROW_THREADS, 2)
    ln_fwd_k(int rows, int c, const T *x, const float *weight, const float *bias, float eps,
             T *y, float *mean, float *rstd, int regs)
{
    int lane = (int)threadIdx.x & 31;
    if (regs && c <= 32 * R) {
        __shared__ float wsh[32 * R], bsh[32 * R];
        block_copy(wsh, weight, c);
        block_copy(bsh, bias, c);
        __syncthreads();
        SL_CUDA_WARP_ROWS(r, (size_t)rows)
        {
            const T *xr = x + r * c;
            float xv[R];
#pragma unroll
            for (int u = 0; u < R; u++)
                if (lane + 32 * u < c)
                    xv[u] = sl_ld(xr, lane + 32 * u);
            double s = 0.0, q = 0.0;
#pragma unroll
            for (int u = 0; u < R; u++)
                if (lane + 32 * u < c)
                    sl_ln_stat_terms(xv[u], &s, &q);
            float m, rs;
            ln_row_moments(s, q, c, eps, lane, r, mean, rstd, &m, &rs);
            T *yr = y + r * c; /* may be x: each lane has read its columns */
#pragma unroll
            for (int u = 0; u < R; u++) {
                int j = lane + 32 * u;
                if (j < c)
                    sl_st(yr, j, sl_bn_normalise(xv[u], m, rs, wsh[j], bsh[j]));
            }
        }
        return;
    }
    SL_CUDA_WARP_ROWS(r, (size_t)rows)
    {
        const T *xr = x + r * c;
        double s = 0.0, q = 0.0;
        for (int j = lane; j < c; j += 32)
            sl_ln_stat_terms(sl_ld(xr, j), &s, &q);
        float m, rs;
        ln_row_moments(s, q, c, eps, lane, r, mean, rstd, &m, &rs);
        T *yr = y + r * c;
        for (int j = lane; j < c; j += 32)
            sl_st(yr, j, sl_bn_normalise(sl_ld(xr, j), m, rs, weight[j], bias[j]));
    }
}

template <typename T>
static __global__ void __launch_bounds__(SL_CUDA_COLS *SL_CUDA_RUNS)
    ln_param_k(int rows, int c, const T *x, const T *dy, const float *mean,
               const float *rstd, float *dweight, float *dbias)
{
    __shared__ double sh[SL_CUDA_RUNS][SL_CUDA_COLS + 1];
    int j = (int)(blockIdx.x * SL_CUDA_COLS + threadIdx.x);
    double aw = 0.0, ab = 0.0;
    if (j < c)
#pragma unroll 16 /* see cuda_block.h, column tiles */
        for (int r = (int)threadIdx.y; r < rows; r += SL_CUDA_RUNS) {
            size_t at = (size_t)r * c + j;
            sl_ln_param_terms(sl_ld(x, at), sl_ld(dy, at), mean[r], rstd[r], &aw, &ab);
        }
    aw = sl_cuda_column_tree(aw, sh);
    ab = sl_cuda_column_tree(ab, sh);
    if (threadIdx.y == 0 && j < c) {
        dweight[j] += (float)aw;
        dbias[j] += (float)ab;
    }
}

/* The same sums by column parts (base/col_grid.h, cuda_block.h), where
 * the backend has clusters (col_parts): a warp reads 32 adjacent values
 * of a row and that row's mean and rstd once for all its lanes. */
template <typename T>
static __global__ void __launch_bounds__(SL_COL_GRID_COLS *SL_COL_GRID_RUNS)
    ln_param_parts_k(int rows, int c, int part_rows, const T *x, const T *dy, const float *mean,
                     const float *rstd, float *dweight, float *dbias)
{
    __shared__ double sh[SL_COL_GRID_RUNS][SL_COL_GRID_COLS + 1];
    __shared__ double part[2][SL_COL_GRID_COLS];
    int j = (int)(blockIdx.x * SL_COL_GRID_COLS + threadIdx.x);
    int lo, hi;
    sl_col_part_rows(rows, part_rows, (int)blockIdx.y, &lo, &hi);
    double acc[2] = {0.0, 0.0};
    enum { A = 4 };
    float xv[A], gv[A], mv[A], sv[A];
    if (j < c)
        sl_cuda_column_rows<A>(
            lo, hi,
            [&](int r, int u) {
                size_t at = (size_t)r * c + j;
                xv[u] = sl_ld(x, at);
                gv[u] = sl_ld(dy, at);
                mv[u] = __ldg(&mean[r]);
                sv[u] = __ldg(&rstd[r]);
            },
            [&](int u) { sl_ln_param_terms(xv[u], gv[u], mv[u], sv[u], &acc[0], &acc[1]); });
    sl_cuda_column_parts(acc, sh, part);
    if (blockIdx.y == 0 && threadIdx.y == 0 && j < c) {
        dweight[j] += (float)acc[0];
        dbias[j] += (float)acc[1];
    }
}

/* In the input gradient, rows of at most 32 * LN_REG columns keep their
 * x and dy in registers between the sums and the writes: the writes (dx
 * may be dy, so the compiler must keep every later read of x or dy
 * behind them) then read nothing but the old dx. Written so after an
 * H100 showed the loop that re-read x and dy after each write at 340 us a
 * call, 98 % of its cycles waiting on loads (ncu, 2026-11-26), where the
 * forward takes 27 us. Then the writes: each value first (into gv), then
 * the old dx where it accumulates (into xv), every load before the first
 * store, so they go out together; the weight is the block's copy in
 * shared memory, read once a block. One guarded load-add-store a column
 * had ptxas branch around each: one memory latency a column, 74 us a call
 * for GPT-2 small's bf16 8192 x 768 on an H100 (ncu 2026-11-27; not yet
 * timed since). The same sums in the same order, the same adds: the same
 * bits. regs 0 (SL_CUDA_LN_REGS=off) takes the loop below, as in the
 * forward. */

template <typename T, int R>
static __global__ void __launch_bounds__(SL_CUDA_ROW_THREADS, R > 24 ? 1 : 2)
    ln_dx_k(int rows, int c, const T *x, const T *dy, const float *weight,
            const float *mean, const float *rstd, T *dx, int accumulate, int regs)
{
    int lane = (int)threadIdx.x & 31;
    if (regs && c <= 32 * R) {
        __shared__ float wsh[32 * R];
        block_copy(wsh, weight, c);
        __syncthreads();
        SL_CUDA_WARP_ROWS(r, (size_t)rows)
        {
            const T *xr = x + r * c, *dr = dy + r * c;
            float m = mean[r], rs = rstd[r], xv[R], gv[R];
            double sg = 0.0, sgx = 0.0;
#pragma unroll
            for (int u = 0; u < R; u++) {
                int j = lane + 32 * u;
                if (j < c) {
                    xv[u] = sl_ld(xr, j);
                    gv[u] = sl_ld(dr, j);
                    sl_ln_dx_terms(xv[u], gv[u], wsh[j], m, rs, &sg, &sgx);
                }
            }
            sg = sl_cuda_warp_sum(sg);
            sgx = sl_cuda_warp_sum(sgx);
            float mg, mgx;
            sl_ln_dx_means(sg, sgx, c, &mg, &mgx);
            T *xo = dx + r * c;
#pragma unroll
            for (int u = 0; u < R; u++) {
                int j = lane + 32 * u;
                if (j < c) {
                    gv[u] = sl_ln_dx_of(xv[u], gv[u], wsh[j], m, rs, mg, mgx);
                    xv[u] = accumulate ? sl_ld(xo, j) : 0.0f;
                }
            }
#pragma unroll
            for (int u = 0; u < R; u++) {
                int j = lane + 32 * u;
                if (j < c)
                    sl_st(xo, j, accumulate ? xv[u] + gv[u] : gv[u]);
            }
        }
        return;
    }
    SL_CUDA_WARP_ROWS(r, (size_t)rows)
    {
        const T *xr = x + r * c, *dr = dy + r * c;
        float m = mean[r], rs = rstd[r];
        double sg = 0.0, sgx = 0.0;
        for (int j = lane; j < c; j += 32)
            sl_ln_dx_terms(sl_ld(xr, j), sl_ld(dr, j), weight[j], m, rs, &sg, &sgx);
        sg = sl_cuda_warp_sum(sg);
        sgx = sl_cuda_warp_sum(sgx);
        float mg, mgx;
        sl_ln_dx_means(sg, sgx, c, &mg, &mgx);
        T *xo = dx + r * c; /* may be dy: lane l reads its columns before writing them */
        for (int j = lane; j < c; j += 32)
            sl_put_t(xo, j, sl_ln_dx_of(sl_ld(xr, j), sl_ld(dr, j), weight[j], m, rs, mg, mgx),
                     accumulate);
    }
}

extern "C" void sl_cuda_layernorm_forward(const sl_exec *ex, int rows, int c, const float *x,
                                          const float *weight, const float *bias, float eps,
                                          float *y, float *mean, float *rstd)
{
    if (rows <= 0 || c <= 0)
        return;
    sl_cuda_state *s = sl_cuda_ex(ex);
    unsigned blocks = sl_cuda_warp_row_blocks((size_t)rows);
    sl_cuda_typed(ex, [&](auto z) {
        using T = decltype(z);
        ln_regs(c, [&](auto rc) {
            ln_fwd_k<T, decltype(rc)::value><<<blocks, SL_CUDA_ROW_THREADS, 0, s->stream>>>(
                rows, c, sl_as<T>(x), weight, bias, eps, sl_as<T>(y), mean, rstd, s->ln_regs);
        });
    });
    SL_CUDA_LAUNCHED(s);
}

extern "C" void sl_cuda_layernorm_backward(const sl_exec *ex, int rows, int c, const float *x,
                                           const float *dy, const float *weight,
                                           const float *mean, const float *rstd, float *dx,
                                           int accumulate, float *dweight, float *dbias)
{
    if (rows <= 0 || c <= 0)
        return;
    sl_cuda_state *s = sl_cuda_ex(ex);
    /* the parameter sums are queued first: they read dy before dx is written */
    dim3 tile(SL_CUDA_COLS, SL_CUDA_RUNS);
    sl_cuda_typed(ex, [&](auto z) {
        using T = decltype(z);
        if (s->col_parts)
            sl_cuda_launch_column_parts(s, rows, c, ln_param_parts_k<T>, sl_as<T>(x),
                                        sl_as<T>(dy), mean, rstd, dweight, dbias);
        else
            ln_param_k<<<sl_cuda_tiles(c), tile, 0, s->stream>>>(
                rows, c, sl_as<T>(x), sl_as<T>(dy), mean, rstd, dweight, dbias);
    });
    SL_CUDA_LAUNCHED(s);
    if (dx) {
        unsigned blocks = sl_cuda_warp_row_blocks((size_t)rows);
        sl_cuda_typed(ex, [&](auto z) {
            using T = decltype(z);
            ln_regs(c, [&](auto rc) {
                ln_dx_k<T, decltype(rc)::value><<<blocks, SL_CUDA_ROW_THREADS, 0, s->stream>>>(
                    rows, c, sl_as<T>(x), sl_as<T>(dy), weight, mean, rstd, sl_as<T>(dx),
                    accumulate, s->ln_regs);
            });
        });
        SL_CUDA_LAUNCHED(s);
    }
}

/* ---- GELU ---- */

/* GELU's rule for cuda_common.h's sl_cuda_map. */
struct gelu_rule {
    static __device__ float of(float x) { return sl_gelu_of(x); }
    static __device__ float grad(float x, float dy) { return sl_gelu_grad_of(x, dy); }
};

extern "C" void sl_cuda_gelu_forward(const sl_exec *ex, size_t count, const float *x, float *y)
{
    sl_cuda_unary<gelu_rule>(ex, count, x, y);
}

extern "C" void sl_cuda_gelu_backward(const sl_exec *ex, size_t count, const float *x,
                                      const float *dy, float *dx, int accumulate)
{
    sl_cuda_grad<gelu_rule>(ex, count, x, dy, dx, accumulate);
}

/* ---- token + position embedding ---- */

static __global__ void emb_fwd_k(size_t total, int t, int c, int vocab, const int32_t *ids,
                                 const float *wte, const float *wpe, float *y)
{
    GRID_STRIDE(i, total)
    {
        size_t k = i / (size_t)c;
        int j = (int)(i - k * c);
        const float *te = sl_embedding_row(wte, ids[k], vocab, c);
        const float *pe = wpe + (k % (size_t)t) * c;
        y[i] = sl_embedding_of(te, pe, j);
    }
}

extern "C" void sl_cuda_embedding_forward(const sl_exec *ex, int n, int t, int c, int vocab,
                                          const int32_t *ids, const float *wte, const float *wpe,
                                          float *y)
{
    size_t total = (size_t)n * t * c;
    SL_CUDA_LAUNCH(ex, emb_fwd_k, total, total, t, c, vocab, ids, wte, wpe, y);
}

/* The backward's workspace over `tokens` ids: the ids sorted, the token
 * indices in order and sorted, then CUB's own scratch. */
static size_t emb_index_bytes(int tokens) { return sl_align_up((size_t)tokens * sizeof(int32_t)); }

static size_t emb_sort_bytes(sl_cuda_state *s, int tokens)
{
    size_t bytes = 0;
    SL_CUDA_CHECK(s, cub::DeviceRadixSort::SortPairs(NULL, bytes, (const int32_t *)NULL,
                                                     (int32_t *)NULL, (const int32_t *)NULL,
                                                     (int32_t *)NULL, tokens, 0, 32, s->stream));
    return sl_align_up(bytes);
}

extern "C" size_t sl_cuda_embedding_workspace_bytes(const sl_backend *be, int tokens)
{
    if (tokens <= 0)
        return 0;
    return 3 * emb_index_bytes(tokens) + emb_sort_bytes(sl_cuda_of(be), tokens);
}

static __global__ void iota_k(int n, int32_t *v)
{
    GRID_STRIDE(i, (size_t)n) v[i] = (int32_t)i;
}

/* dwpe[pos][j] += the rows of position pos, sequences in order. */
static __global__ void emb_wpe_k(int n, int t, int c, const float *dy, float *dwpe)
{
    GRID_STRIDE(i, (size_t)t * c)
    {
        size_t pos = i / (size_t)c, j = i - pos * c;
        float acc = dwpe[i];
        for (int b = 0; b < n; b++)
            acc += dy[((size_t)b * t + pos) * c + j];
        dwpe[i] = acc;
    }
}

/* A block per sorted position that starts an id's run: dwte[id] += the
 * rows of its tokens, which the stable sort left in token order. */
static __global__ void emb_wte_k(int tokens, int c, int vocab, const int32_t *ids,
                                 const int32_t *order, const float *dy, float *dwte)
{
    for (int p = (int)blockIdx.x; p < tokens; p += (int)gridDim.x) {
        int32_t id = ids[p];
        if ((p > 0 && ids[p - 1] == id) || id < 0 || id >= vocab)
            continue; /* not a run's start, or an id that gets no gradient */
        float *te = dwte + (size_t)id * c;
        for (int j = (int)threadIdx.x; j < c; j += (int)blockDim.x) {
            float acc = te[j];
            for (int q = p; q < tokens && ids[q] == id; q++)
                acc += dy[(size_t)order[q] * c + j];
            te[j] = acc;
        }
    }
}

extern "C" void sl_cuda_embedding_backward(const sl_exec *ex, int n, int t, int c, int vocab,
                                           const int32_t *ids, const float *dy, float *dwte,
                                           float *dwpe, void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    int tokens = n * t; /* the layer refuses more than INT_MAX */
    if (tokens <= 0 || c <= 0)
        return;
    SL_CUDA_LAUNCH(ex, emb_wpe_k, (size_t)t * c, n, t, c, dy, dwpe);
    size_t ib = emb_index_bytes(tokens);
    char *w = (char *)ws; /* planned: sl_cuda_embedding_workspace_bytes(tokens) */
    int32_t *sorted = (int32_t *)w, *order_in = (int32_t *)(w + ib),
            *order = (int32_t *)(w + 2 * ib);
    void *scratch = w + 3 * ib;
    /* the same query as at planning (same count, bits and device), so the
     * same bytes the plan reserved */
    size_t scratch_bytes = emb_sort_bytes(s, tokens);
    SL_CUDA_LAUNCH(ex, iota_k, (size_t)tokens, tokens, order_in);
    SL_CUDA_CHECK(s, cub::DeviceRadixSort::SortPairs(scratch, scratch_bytes, ids, sorted,
                                                     order_in, order, tokens, 0, 32, s->stream));
    unsigned blocks = (unsigned)(tokens < 0x7fffffff ? tokens : 0x7fffffff);
    emb_wte_k<<<blocks, 256, 0, s->stream>>>(tokens, c, vocab, sorted, order, dy, dwte);
    SL_CUDA_LAUNCHED(s);
}
