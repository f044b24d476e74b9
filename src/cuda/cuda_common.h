/*
 * cuda_common.h — internal plumbing of the CUDA backend (run stage on a
 * GPU): the state of one backend instance (its stream, cuDNN and cuBLAS
 * handles, algorithm cache and sticky error; every byte of device memory
 * its kernels use is planned: none allocates), checked calls that
 * record the first failure in that instance instead of exiting, and the
 * prototypes the other src/cuda files implement.
 */
#ifndef SL_CUDA_COMMON_H
#define SL_CUDA_COMMON_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <mutex>

#include "base/backend.h"
#include "base/col_grid.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sl_cuda_conv_cache; /* cuda_conv.cu */
struct sl_cuda_lt_cache;   /* cuda_gemm.cu */

/* One CUDA backend instance's own state (sl_backend.impl). */
typedef struct sl_cuda_state {
    cudaStream_t stream;
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    cublasLtHandle_t cublaslt; /* GEMMs with epilogues (gemm_bias) */
    struct sl_cuda_lt_cache *lt_cache; /* their algorithms per geometry */
    /* cuBLASLt's workspace, the instance's own (as cuBLAS keeps one per
     * handle): SL_CUDA_LT_WORKSPACE_MIB (32 by default; 0: none, the
     * algorithms that need none) */
    void *lt_ws;
    size_t lt_ws_bytes;
    int device;        /* the CUDA device ordinal every call runs on */
    int deterministic; /* deterministic cuDNN algorithms only */
    int tf32;          /* TF32 tensor-core math allowed in convolutions and GEMMs */
    int flash_fused;   /* cuda_flash.cu's fused attention where it applies (SL_CUDA_FLASH) */
    int flash_mma;     /* its mma.sync kernels; off: its wmma ones (SL_CUDA_FLASH_MMA) */
    int ln_regs;       /* LayerNorm's forward and input gradient from registers; off: their
                          loops (SL_CUDA_LN_REGS) */
    int bn_fused;      /* BatchNorm's final sums inside its normalise and its input
                          gradient (SL_CUDA_BN_FUSED=on); off (default): a
                          kernel of their own */
    int xent_blocks;   /* a classifier's loss a block per row; off: a thread per row
                          (SL_CUDA_XENT_BLOCKS) */
    int bn_vec;        /* BatchNorm's normalise and input gradient four values at a time
                          where hw allows; off: one (SL_CUDA_BN_VEC, cuda_norm.cu) */
    int flash_bf16;    /* its bf16 products for bf16 activations; off: TF32 on widened
                          tiles (SL_CUDA_FLASH_BF16) */
    int conv_legacy;   /* convolutions through cuDNN's legacy _v7 algorithm choice instead
                          of its graph API's engine heuristics (SL_CUDA_CONV_API=legacy) */
    int conv_tune;     /* the most engines timed per convolution pass (0: none, the
                          heuristics' first allowed; SL_CUDA_CONV_TUNE, cuda_conv.cu) */
    int conv_tuned;    /* passes whose engine timing took (under the cache's lock) */
    int conv_gemm;     /* 1x1 convolutions' passes as cuBLAS GEMMs: 0 never, 1 in a
                          deterministic instance, 2 always (SL_CUDA_CONV_GEMM,
                          base/conv_gemm.h: sl_conv_gemm_passes says which passes) */
    size_t conv_gemm_cap; /* the most workspace one such pass plans (SL_CUDA_CONV_GEMM_CAP_KIB) */
    int conv_gemm_strided; /* strided 1x1 geometries too; off: stride 1 only
                              (SL_CUDA_CONV_GEMM_STRIDED) */
    int conv_gemm_fwd; /* the forward and input gradient of stride-1 1x1 geometries too;
                          off by default (SL_CUDA_CONV_GEMM_FWD=on) */
    int sms;           /* the device's multiprocessors (how the GEMMs are cut) */
    int flash_dropout; /* attention dropout in its mma.sync kernels; off: dropout takes
                          the chunked path (SL_CUDA_FLASH_DROPOUT) */
    int xent_staged;   /* the language model's loss with its rows staged in shared memory;
                          off: three passes over global memory (SL_CUDA_XENT_STAGED) */
    size_t smem_optin; /* shared memory a block may ask for (cudaDevAttrMaxSharedMemoryPerBlockOptin) */
    int col_parts;     /* column sums (bias and LayerNorm parameter gradients) as column
                          parts joined in clusters (cuda_block.h); 0: column tiles, where
                          the device or the build has no clusters or SL_CUDA_COL_PARTS=off */
    const char *col_parts_why; /* why not, when col_parts is 0 (a static string) */
    struct sl_cuda_conv_cache *conv_cache; /* descriptors and plans or algorithms per geometry */
    /* the first failure since the last sync: kernels return nothing; the
     * lock guards it (kernels of two networks of one context may record
     * from two threads) */
    std::mutex error_lock;
    int error_set;
    char error_text[768];
    /* Uploads go through two pinned staging buffers in turn (the caller's
     * buffer is free once upload returns, and the copy does not hold up
     * the queue); each buffer's event says when its last copy is done. */
    void *stage[2];
    size_t stage_cap[2];
    cudaEvent_t stage_done[2];
    int stage_next;
    /* Read-backs deferred to the next sync (download_later, the loss): the
     * device-to-host copies land in pinned `readback`, then go to their
     * destinations once the stream has finished. */
    char *readback;
    size_t readback_used;
    int n_pending;
    struct sl_cuda_pending {
        void *dst;
        size_t off, bytes;
    } pending[16];
} sl_cuda_state;

/* gemm_bias's cached descriptors and algorithms (cuda_gemm.cu): an empty
 * cache (NULL when out of memory) and its release. */
struct sl_cuda_lt_cache *sl_cuda_lt_cache_new(void);
void sl_cuda_lt_cache_free(struct sl_cuda_lt_cache *c);

/* dst gets `bytes` of device memory src at the next sync (or wait); at
 * once, after a stream synchronisation, when the read-back room is full. */
void sl_cuda_read_later(sl_cuda_state *s, void *dst, const void *src, size_t bytes);
/* After the stream has finished: the deferred read-backs to their
 * destinations (cuda_readback.cu). */
void sl_cuda_flush_pending(sl_cuda_state *s);

/* Makes the instance's device current for the calling thread (a thread
 * may run contexts on two GPUs in turn). */
static inline void sl_cuda_bind(const sl_cuda_state *s)
{
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != s->device)
        cudaSetDevice(s->device);
}

/* The instance state behind an exec or a backend, its device made
 * current: every entry to the backend comes through here. */
static inline sl_cuda_state *sl_cuda_of(const sl_backend *be)
{
    sl_cuda_state *s = (sl_cuda_state *)be->impl;
    sl_cuda_bind(s);
    return s;
}
static inline sl_cuda_state *sl_cuda_ex(const sl_exec *ex) { return sl_cuda_of(ex->be); }

/* Records the first failure (file:line and what) until sync reports it. */
void sl_cuda_record(sl_cuda_state *s, const char *file, int line, const char *what,
                    const char *detail);

/* The recorded failure as the library's error (cleared), or SL_OK. */
sl_status sl_cuda_take_error(sl_cuda_state *s);

/* Records a failure when `call` does not return `ok`; `text` turns the
 * status into words. */
#define SL_CUDA_CHECK_STATUS(s, call, ok, text)                                                \
    do {                                                                                       \
        auto st_ = (call);                                                                     \
        if (st_ != (ok))                                                                       \
            sl_cuda_record((s), __FILE__, __LINE__, #call, text(st_));                         \
    } while (0)

/* A CUDA runtime call's failure is recorded, then cleared from the
 * runtime's last error: left there, the next launch check
 * (SL_CUDA_LAUNCHED, which reads cudaGetLastError) would record it again
 * and fail a later, healthy step after sync has reported this one (a
 * failed cudaMemcpyAsync of an upload, say). A sticky error (a kernel
 * fault) is not cleared by this: every later call reports it, as it
 * should. */
#define SL_CUDA_CHECK(s, call)                                                                 \
    do {                                                                                       \
        cudaError_t ce_ = (call);                                                              \
        if (ce_ != cudaSuccess) {                                                              \
            sl_cuda_record((s), __FILE__, __LINE__, #call, cudaGetErrorString(ce_));           \
            (void)cudaGetLastError();                                                          \
        }                                                                                      \
    } while (0)
#define SL_CUDNN_CHECK(s, call)                                                                \
    SL_CUDA_CHECK_STATUS(s, call, CUDNN_STATUS_SUCCESS, cudnnGetErrorString)
#define SL_CUBLAS_CHECK(s, call)                                                               \
    SL_CUDA_CHECK_STATUS(s, call, CUBLAS_STATUS_SUCCESS, cublasGetStatusString)

/* After a kernel launch. */
#define SL_CUDA_LAUNCHED(s) SL_CUDA_CHECK((s), cudaGetLastError())

/* NULL where the device launches thread-block clusters, the column-part
 * kernels were compiled for them (PTX of sm_90 or later) and their
 * largest cluster fits (cuda_elementwise.cu); else why not. The backend's
 * col_parts. */
const char *sl_cuda_column_parts_ok(int device);

/* Grid-stride loop over n elements. */
#define GRID_STRIDE(i, n)                                                                      \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                   \
         i += (size_t)gridDim.x * blockDim.x)

/* Launches kernel over n elements in 256-thread blocks on the instance's
 * stream of exec `ex`, and checks the launch. */
#define SL_CUDA_LAUNCH(ex, kernel, n, ...)                                                     \
    do {                                                                                       \
        sl_cuda_state *ls_ = sl_cuda_ex(ex);                                                   \
        kernel<<<sl_cuda_blocks(n), 256, 0, ls_->stream>>>(__VA_ARGS__);                       \
        SL_CUDA_LAUNCHED(ls_);                                                                 \
    } while (0)

/* Elementwise maps (cuda_elementwise.cu, cuda_transformer.cu), each an op
 * with the element rule once for one element (op.one(i)) and once for the
 * 4-element group g (op.group(g): elements 4g .. 4g + 3 through float4
 * loads and stores). Where every pointer of a map is 16-byte aligned,
 * map4_k gives thread t the groups t, t + threads, ... and thread 0 of
 * block 0 the last n % 4 elements; elsewhere map1_k a thread an element.
 * The same rule on each element either way: the same bits. On an H100
 * the one-element maps moved 1.8-2 TB/s (ncu, 2026-11-26). */
static inline bool sl_cuda_aligned16(const void *a, const void *b, const void *c)
{
    return ((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) % 16 == 0;
}

/* Blocks of 256 threads covering n elements (grid-stride loops beyond). */
static inline unsigned sl_cuda_blocks(size_t n)
{
    size_t b = (n + 255) / 256;
    return (unsigned)(b > 65535 ? 65535 : (b ? b : 1));
}

/* Launch geometry over `planes` planes (an image's channel) of len values
 * each: block x a plane (grid-stride beyond 2^31 - 1), block y a range of
 * the plane, blocks no wider than a small plane needs. Kernels find the
 * channel once per plane and index within it without 64-bit division. */
enum { SL_PLANE_ITEMS = 4 }; /* values per thread of a plane's row of blocks */
static inline void sl_cuda_plane_grid(size_t planes, int len, dim3 *grid, dim3 *block)
{
    unsigned threads = len >= 256 ? 256u : (unsigned)((len + 31) / 32 * 32);
    /* each thread takes SL_PLANE_ITEMS values (strided by the row's
     * threads, so a warp's reads stay adjacent): a block of 256 threads
     * for every 256 values spent more on scheduling blocks than on memory */
    size_t per = (size_t)threads * SL_PLANE_ITEMS;
    size_t ys = ((size_t)len + per - 1) / per;
    *block = dim3(threads);
    *grid = dim3((unsigned)(planes < 0x7fffffffu ? (planes ? planes : 1) : 0x7fffffffu),
                 (unsigned)(ys < 65535 ? (ys ? ys : 1) : 65535));
}

/* The loops of a kernel launched with sl_cuda_plane_grid: PLANES over its
 * planes, PLANE_VALUES over j, the index within one (a kernel hoists what
 * is the plane's own between them); PLANE_LOOP both. */
#define PLANES(plane, planes) for (size_t plane = blockIdx.x; plane < (planes); plane += gridDim.x)
#define PLANE_VALUES(j, len)                                                                   \
    for (int j = (int)(blockIdx.y * blockDim.x + threadIdx.x); j < (len);                      \
         j += (int)(gridDim.y * blockDim.x))
#define PLANE_LOOP(plane, j, planes, len) PLANES(plane, planes) PLANE_VALUES(j, len)

/* Launches kernel over `planes` planes of len values on the instance's
 * stream of exec `ex`, and checks the launch. */
#define SL_CUDA_LAUNCH_PLANES(ex, kernel, planes, len, ...)                                    \
    do {                                                                                       \
        sl_cuda_state *lp_ = sl_cuda_ex(ex);                                                   \
        if ((planes) == 0 || (len) <= 0)                                                       \
            break; /* nothing to do, and no empty grid to launch */                            \
        dim3 grid_, block_;                                                                    \
        sl_cuda_plane_grid((planes), (len), &grid_, &block_);                                  \
        kernel<<<grid_, block_, 0, lp_->stream>>>(__VA_ARGS__);                                \
        SL_CUDA_LAUNCHED(lp_);                                                                 \
    } while (0)

/* The table's kernels (cuda_conv.cu: engines or algorithms per the
 * instance's deterministic and tf32 flags; cuda_gemm.cu, cuda_norm.cu,
 * cuda_pool.cu, cuda_elementwise.cu, cuda_loss_optim.cu, cuda_transformer.cu,
 * cuda_attention.cu, cuda_decode.cu): `sl_cuda_<member>` for every member,
 * required and optional, of base/backend.h's SL_BACKEND_OPS, which also
 * gives their signatures and contracts. */
#define SL_CUDA_DECLARE(ret, member, params) sl_##member##_fn sl_cuda_##member;
SL_BACKEND_OPS(SL_CUDA_DECLARE, SL_CUDA_DECLARE)
#undef SL_CUDA_DECLARE

/* A random kernel's Philox counter: the one it was given, plus the
 * call's offset in device memory where it has one (sl_exec.counter_delta:
 * work recorded once draws each replay's own mask), read when it runs. */
static __device__ inline uint64_t sl_cuda_counter(uint64_t counter, const uint64_t *delta)
{
    return delta ? counter + *delta : counter;
}

/* Frees the instance's descriptors and cache (NULL is fine). */
void sl_cuda_conv_cache_free(struct sl_cuda_conv_cache *c);
/* How many passes took their engine by timing (SL_CUDA_CONV_TUNE). */
int sl_cuda_conv_tuned(sl_cuda_state *s);
/* How many geometries have their `pass` as cuBLAS GEMMs
 * (SL_CUDA_CONV_GEMM, base/conv_gemm.h). */
int sl_cuda_conv_gemm_count(sl_cuda_state *s, sl_conv_pass pass);

/* cuda_flash.cu: causal attention fused into TF32 tiles, for flash mode,
 * head size 64, TF32 allowed, dropout only in its mma.sync kernels
 * (sl_cuda_flash_applies: a function of d and the instance alone, the
 * switches included); cuda_attention.cu calls it and
 * plans its workspace (the backward's D = rowsum(dO o y), pairs x t
 * floats, which it also computes). lse: the saved state (NULL in
 * evaluation). bf16: qkv, y, dy and dqkv are bf16 storage (ex->bf16 of
 * the SL_BF16_ATTENTION family), widened as staged, rounded as written:
 * the float kernels' bits on widened copies, rounded. */
int sl_cuda_flash_applies(const sl_cuda_state *s, const sl_attention_desc *d);
void sl_cuda_flash_forward(sl_cuda_state *s, const sl_attention_desc *d, int bf16,
                           const float *qkv, float *y, float *lse);
void sl_cuda_flash_backward(sl_cuda_state *s, const sl_attention_desc *d, int bf16,
                            const float *qkv, const float *dy, const float *lse, const float *dd,
                            float *dqkv, int accumulate);

#ifdef __cplusplus
}
#endif

/* map4_k and its launch (see sl_cuda_aligned16 above): templates, outside
 * the C linkage block. */
#ifdef __CUDACC__
#include "base/element.h" /* sl_put */

/* The launch of a column-part grid g (base/col_grid.h) on stream st:
 * grid (tiles, parts) of SL_COL_GRID_COLS x SL_COL_GRID_RUNS threads in
 * clusters of (1, parts, 1), the cluster's attribute in *at. */
static inline cudaLaunchConfig_t sl_cuda_column_parts_config(sl_col_grid g, cudaStream_t st,
                                                             cudaLaunchAttribute *at)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)g.tiles, (unsigned)g.parts, 1);
    cfg.blockDim = dim3(SL_COL_GRID_COLS, SL_COL_GRID_RUNS, 1);
    cfg.stream = st;
    at->id = cudaLaunchAttributeClusterDimension;
    at->val.clusterDim.x = 1;
    at->val.clusterDim.y = (unsigned)g.parts;
    at->val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    return cfg;
}

/* Launches column-part kernel k (cuda_block.h's sl_cuda_column_parts)
 * over a rows x cols matrix on the instance's stream, k getting (rows,
 * cols, part_rows, args...). A refused launch is recorded like any
 * other. */
template <typename... P, typename... A>
static inline void sl_cuda_launch_column_parts(sl_cuda_state *s, int rows, int cols,
                                               void (*k)(int, int, int, P...), A... args)
{
    sl_col_grid g = sl_col_grid_for(rows, cols);
    cudaLaunchAttribute at;
    cudaLaunchConfig_t cfg = sl_cuda_column_parts_config(g, s->stream, &at);
    SL_CUDA_CHECK(s, cudaLaunchKernelEx(&cfg, k, rows, cols, g.part_rows, (P)args...));
}

template <class Op>
static __global__ void map4_k(size_t n, Op op)
{
    size_t groups = n / 4;
    GRID_STRIDE(g, groups) op.group(g);
    if (blockIdx.x == 0 && threadIdx.x == 0)
        for (size_t i = groups * 4; i < n; i++)
            op.one(i);
}

template <class Op>
static __global__ void map1_k(size_t n, Op op)
{
    GRID_STRIDE(i, n) op.one(i);
}

/* Launches op over n elements on ex's stream: map4_k where `aligned`
 * (sl_cuda_aligned16 of the op's pointers), else map1_k. */
template <class Op>
static void sl_cuda_map(const sl_exec *ex, size_t n, bool aligned, Op op)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    if (aligned)
        map4_k<<<sl_cuda_blocks(n / 4 + 1), 256, 0, s->stream>>>(n, op);
    else
        map1_k<<<sl_cuda_blocks(n), 256, 0, s->stream>>>(n, op);
    SL_CUDA_LAUNCHED(s);
}

/* float4 views of a float array. */
#define SL_F4(p) ((float4 *)(p))
#define SL_CF4(p) ((const float4 *)(p))

/* ---- activations of either stored type ----
 * A kernel of a SL_BF16_* family (base/backend.h) is a template on its
 * activations' type T: float, or uint16_t for bf16 (the call's ex->bf16).
 * bf16 values are widened as they are read and rounded to nearest even
 * as they are written (element.h's sl_bf16_widen / sl_bf16_round), with
 * the float kernel's arithmetic in between, so a bf16 call gives the
 * float kernel's results on widened copies, rounded: the bits of the
 * executor's float-copies path. For T = float these are plain loads and
 * stores. A group is 4 values (a float4, or 4 bf16 in a uint2). */
static __device__ inline float sl_ld(const float *p, size_t i) { return p[i]; }
static __device__ inline float sl_ld(const uint16_t *p, size_t i) { return sl_bf16_widen(p[i]); }
static __device__ inline void sl_st(float *p, size_t i, float v) { p[i] = v; }
static __device__ inline void sl_st(uint16_t *p, size_t i, float v) { p[i] = sl_bf16_round(v); }

/* p[i] = v, or p[i] + v (sl_put's order) */
template <typename T>
static __device__ inline void sl_put_t(T *p, size_t i, float v, int accumulate)
{
    sl_st(p, i, accumulate ? sl_ld(p, i) + v : v);
}

/* Four bf16 packed in a uint2 (little-endian: the first in u.x's low
 * half), widened; and four floats rounded into one. */
static __device__ inline float4 sl_bf16x4_widen(uint2 u)
{
    return make_float4(sl_bf16_widen((uint16_t)(u.x & 0xFFFFu)), sl_bf16_widen((uint16_t)(u.x >> 16)),
                       sl_bf16_widen((uint16_t)(u.y & 0xFFFFu)), sl_bf16_widen((uint16_t)(u.y >> 16)));
}
static __device__ inline uint2 sl_bf16x4_round(float4 v)
{
    uint2 u;
    u.x = (uint32_t)sl_bf16_round(v.x) | (uint32_t)sl_bf16_round(v.y) << 16;
    u.y = (uint32_t)sl_bf16_round(v.z) | (uint32_t)sl_bf16_round(v.w) << 16;
    return u;
}

static __device__ inline float4 sl_ld4(const float *p, size_t g) { return SL_CF4(p)[g]; }
static __device__ inline float4 sl_ld4(const uint16_t *p, size_t g)
{
    return sl_bf16x4_widen(((const uint2 *)p)[g]);
}
static __device__ inline void sl_st4(float *p, size_t g, float4 v) { SL_F4(p)[g] = v; }
static __device__ inline void sl_st4(uint16_t *p, size_t g, float4 v)
{
    ((uint2 *)p)[g] = sl_bf16x4_round(v);
}

/* group g of p = v, or p's group + v (sl_put's order on each) */
template <typename T>
static __device__ inline void sl_put4_t(T *p, size_t g, float4 v, int accumulate)
{
    if (accumulate) {
        float4 d = sl_ld4(p, g);
        v = make_float4(d.x + v.x, d.y + v.y, d.z + v.z, d.w + v.w);
    }
    sl_st4(p, g, v);
}

/* Whether a, b and c allow T's group loads (4 values a group). */
template <typename T>
static inline bool sl_cuda_aligned_groups(const void *a, const void *b, const void *c)
{
    return ((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) % (4 * sizeof(T)) == 0;
}

/* A float pointer of a call's activations as bf16 storage. */
#define SL_BF(p) ((uint16_t *)(void *)(p))
#define SL_CBF(p) ((const uint16_t *)(const void *)(p))

/* A float pointer of a call's activations as storage of type T. */
template <typename T>
static inline T *sl_as(float *p)
{
    return (T *)(void *)p;
}
template <typename T>
static inline const T *sl_as(const float *p)
{
    return (const T *)(const void *)p;
}

/* f(T{}) with T the activations' type of the call: uint16_t (bf16) when
 * ex->bf16, else float. A kernel launch on either type, written once. */
template <class F>
static void sl_cuda_typed(const sl_exec *ex, F f)
{
    if (ex->bf16)
        f(uint16_t{});
    else
        f(float{});
}

/* The maps' ops for an activation whose rule R gives R::of(x) and
 * R::grad(x, dy) (the value the gradient rule reads, then dy): y = of(x);
 * dx (+)= grad(x, dy). T: the activations' type. */
template <class R, typename T = float>
struct sl_unary4 {
    const T *x;
    T *y;
    __device__ void one(size_t i) const { sl_st(y, i, R::of(sl_ld(x, i))); }
    __device__ void group(size_t g) const
    {
        float4 a = sl_ld4(x, g);
        sl_st4(y, g, make_float4(R::of(a.x), R::of(a.y), R::of(a.z), R::of(a.w)));
    }
};

template <class R, typename T = float>
struct sl_grad4 {
    const T *x, *dy;
    T *dx;
    int accumulate;
    __device__ void one(size_t i) const
    {
        sl_put_t(dx, i, R::grad(sl_ld(x, i), sl_ld(dy, i)), accumulate);
    }
    __device__ void group(size_t g) const
    {
        float4 a = sl_ld4(x, g), b = sl_ld4(dy, g);
        sl_put4_t(dx, g,
                  make_float4(R::grad(a.x, b.x), R::grad(a.y, b.y), R::grad(a.z, b.z),
                              R::grad(a.w, b.w)),
                  accumulate);
    }
};

/* sl_cuda_map over the call's activations, a, b and c its pointers:
 * make(T{}) builds the op for T = float, or uint16_t when ex->bf16 (the
 * groups then as T's alignment allows). */
template <class Make>
static void sl_cuda_map_typed(const sl_exec *ex, size_t n, const void *a, const void *b,
                              const void *c, Make make)
{
    sl_cuda_typed(ex, [&](auto z) {
        using T = decltype(z);
        sl_cuda_map(ex, n, sl_cuda_aligned_groups<T>(a, b, c), make(z));
    });
}

/* y = R::of(x) and dx (+)= R::grad(x, dy) over n elements, on float or,
 * when ex->bf16, on bf16 activations. */
template <class R>
static void sl_cuda_unary(const sl_exec *ex, size_t n, const float *x, float *y)
{
    sl_cuda_map_typed(ex, n, x, y, y, [&](auto z) {
        using T = decltype(z);
        return sl_unary4<R, T>{sl_as<T>(x), sl_as<T>(y)};
    });
}

template <class R>
static void sl_cuda_grad(const sl_exec *ex, size_t n, const float *x, const float *dy, float *dx,
                         int accumulate)
{
    sl_cuda_map_typed(ex, n, x, dy, dx, [&](auto z) {
        using T = decltype(z);
        return sl_grad4<R, T>{sl_as<T>(x), sl_as<T>(dy), sl_as<T>(dx), accumulate};
    });
}
#endif

#endif
