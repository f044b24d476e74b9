/*
 * cuda_conv.cu — convolution with cuDNN (run stage on a GPU). Each
 * geometry gets its descriptors and algorithms once, cached in the backend
 * instance:
 * the workspace the planner reserves (conv2d_workspace_bytes, asked while
 * planning) and the algorithm a step runs come from the same entry, so the
 * planned peak includes cuDNN's workspaces. Algorithms are cuDNN's
 * heuristic order restricted to FP32 FMA math (TF32 tensor cores too when
 * the instance allows TF32) and, in a deterministic instance, to
 * deterministic ones; a re-forward then repeats
 * the forward bit for bit. SL_CUDA_CONV_LOG=1 prints each geometry's
 * choice to stderr.
 */
#include <mutex>
#include <new>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_common.h"

static const size_t kWorkspaceCap = (size_t)512 << 20; /* bytes one conv may ask for */

/* One geometry's descriptors and algorithms. */
struct sl_conv_entry {
    sl_conv_desc key; /* the geometry (all ints: compared with memcmp) */
    cudnnTensorDescriptor_t x, y, bias;
    cudnnFilterDescriptor_t w;
    /* one convolution descriptor per pass, each with the math type of the
     * algorithm chosen for that pass (cuDNN runs an algorithm in the math
     * type of the descriptor it is given, and its workspace depends on it) */
    cudnnConvolutionDescriptor_t conv[3];
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws[3];
    bool ok;
    char why[256]; /* why build_into failed (this geometry's own reason) */
};

/* The math types an algorithm may run in. Without tf32, FMA math only:
 * cuDNN's default math lets FP32 use TF32 tensor cores on sm_80+, so an
 * algorithm the heuristics give in default math is left out rather than
 * run in another math type than the one it was chosen (and sized) for,
 * where it could fail at run time instead of at plan time. With tf32,
 * FMA, default or tensor-op math (never down-conversion to half). Each
 * pass then runs in exactly its algorithm's math type. */
static bool math_ok(cudnnMathType_t m, int tf32)
{
    if (!tf32)
        return m == CUDNN_FMA_MATH;
    return m == CUDNN_FMA_MATH || m == CUDNN_DEFAULT_MATH || m == CUDNN_TENSOR_OP_MATH;
}

template <typename Perf>
static int pick(const Perf *perf, int count, int det, int tf32, size_t *ws)
{
    for (int i = 0; i < count; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS || !math_ok(perf[i].mathType, tf32))
            continue;
        if (det && perf[i].determinism != CUDNN_DETERMINISTIC)
            continue;
        if (perf[i].memory > kWorkspaceCap)
            continue;
        *ws = perf[i].memory;
        return i;
    }
    return -1;
}

/* Writes why building an entry failed into `why` (the entry's own text:
 * the instance's sticky error may hold an unrelated failure, and must not
 * be taken for this geometry's reason, nor this one hidden behind it). */
#define BUILD_FAIL(what, detail) snprintf(why, sizeof(((sl_conv_entry *)0)->why), "%s: %s", (what), (detail))
#define BUILD_CHECK(call)                                                                      \
    do {                                                                                       \
        cudnnStatus_t bst_ = (call);                                                           \
        if (bst_ != CUDNN_STATUS_SUCCESS) {                                                    \
            BUILD_FAIL(#call, cudnnGetErrorString(bst_));                                      \
            return false;                                                                      \
        }                                                                                      \
    } while (0)

/* A convolution descriptor of geometry d in math type `math`. */
static bool make_conv(const sl_conv_desc *d, cudnnMathType_t math,
                      cudnnConvolutionDescriptor_t *out, char *why)
{
    BUILD_CHECK(cudnnCreateConvolutionDescriptor(out));
    BUILD_CHECK(cudnnSetConvolution2dDescriptor(*out, d->ph, d->pw, d->sh, d->sw, d->dh, d->dw,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    BUILD_CHECK(cudnnSetConvolutionGroupCount(*out, d->groups));
    BUILD_CHECK(cudnnSetConvolutionMathType(*out, math));
    return true;
}

static bool build_into(sl_cuda_state *s, const sl_conv_desc *d, sl_conv_entry &e)
{
    int det = s->deterministic;
    char *why = e.why;
    cudnnMathType_t query_math = s->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    BUILD_CHECK(cudnnCreateTensorDescriptor(&e.x));
    BUILD_CHECK(cudnnCreateTensorDescriptor(&e.y));
    BUILD_CHECK(cudnnCreateTensorDescriptor(&e.bias));
    BUILD_CHECK(cudnnCreateFilterDescriptor(&e.w));
    BUILD_CHECK(cudnnSetTensor4dDescriptor(e.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n, d->c,
                                           d->h, d->w));
    BUILD_CHECK(cudnnSetTensor4dDescriptor(e.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n, d->k,
                                           d->oh, d->ow));
    BUILD_CHECK(cudnnSetTensor4dDescriptor(e.bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, d->k,
                                           1, 1));
    BUILD_CHECK(cudnnSetFilter4dDescriptor(e.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, d->k,
                                           d->c / d->groups, d->kh, d->kw));
    /* the heuristics are asked through a descriptor in the widest allowed
     * math; each pass then gets its own in its algorithm's math type */
    cudnnConvolutionDescriptor_t q = NULL;
    if (!make_conv(d, query_math, &q, why)) {
        if (q)
            cudnnDestroyConvolutionDescriptor(q);
        return false;
    }
    bool ok = false;
    size_t need = 0;
    int n, i;
    do {
        cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        n = 0;
        cudnnStatus_t st = cudnnGetConvolutionForwardAlgorithm_v7(
            s->cudnn, e.x, e.w, q, e.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, fp);
        i = st == CUDNN_STATUS_SUCCESS ? pick(fp, n, det, s->tf32, &e.ws[SL_CONV_FWD]) : -1;
        if (i < 0) {
            BUILD_FAIL("choosing a forward convolution algorithm",
                           st != CUDNN_STATUS_SUCCESS ? cudnnGetErrorString(st)
                                                      : "no FP32 algorithm fits (FMA math, or TF32 with --tf32)");
            break;
        }
        e.fwd = fp[i].algo;
        if (!make_conv(d, fp[i].mathType, &e.conv[SL_CONV_FWD], why))
            break;
        st = cudnnGetConvolutionForwardWorkspaceSize(s->cudnn, e.x, e.w, e.conv[SL_CONV_FWD], e.y,
                                                     e.fwd, &need);
        if (st != CUDNN_STATUS_SUCCESS) {
            BUILD_FAIL("cudnnGetConvolutionForwardWorkspaceSize",
                           cudnnGetErrorString(st));
            break;
        }
        if (need > e.ws[SL_CONV_FWD])
            e.ws[SL_CONV_FWD] = need;

        cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        n = 0;
        st = cudnnGetConvolutionBackwardDataAlgorithm_v7(
            s->cudnn, e.w, e.y, q, e.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, dp);
        i = st == CUDNN_STATUS_SUCCESS ? pick(dp, n, det, s->tf32, &e.ws[SL_CONV_BWD_DATA]) : -1;
        if (i < 0) {
            BUILD_FAIL("choosing a backward-data algorithm",
                           st != CUDNN_STATUS_SUCCESS ? cudnnGetErrorString(st)
                           : det ? "no deterministic FP32 algorithm fits"
                                 : "no FP32 algorithm fits (FMA math, or TF32 with --tf32)");
            break;
        }
        e.bwd_data = dp[i].algo;
        if (!make_conv(d, dp[i].mathType, &e.conv[SL_CONV_BWD_DATA], why))
            break;
        st = cudnnGetConvolutionBackwardDataWorkspaceSize(s->cudnn, e.w, e.y,
                                                          e.conv[SL_CONV_BWD_DATA], e.x,
                                                          e.bwd_data, &need);
        if (st != CUDNN_STATUS_SUCCESS) {
            BUILD_FAIL("cudnnGetConvolutionBackwardDataWorkspaceSize",
                           cudnnGetErrorString(st));
            break;
        }
        if (need > e.ws[SL_CONV_BWD_DATA])
            e.ws[SL_CONV_BWD_DATA] = need;

        cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        n = 0;
        st = cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            s->cudnn, e.x, e.y, q, e.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, wp);
        i = st == CUDNN_STATUS_SUCCESS ? pick(wp, n, det, s->tf32, &e.ws[SL_CONV_BWD_FILTER])
                                       : -1;
        if (i < 0) {
            BUILD_FAIL("choosing a backward-filter algorithm",
                           st != CUDNN_STATUS_SUCCESS ? cudnnGetErrorString(st)
                           : det ? "no deterministic FP32 algorithm fits"
                                 : "no FP32 algorithm fits (FMA math, or TF32 with --tf32)");
            break;
        }
        e.bwd_filter = wp[i].algo;
        if (!make_conv(d, wp[i].mathType, &e.conv[SL_CONV_BWD_FILTER], why))
            break;
        st = cudnnGetConvolutionBackwardFilterWorkspaceSize(s->cudnn, e.x, e.y,
                                                            e.conv[SL_CONV_BWD_FILTER], e.w,
                                                            e.bwd_filter, &need);
        if (st != CUDNN_STATUS_SUCCESS) {
            BUILD_FAIL("cudnnGetConvolutionBackwardFilterWorkspaceSize",
                           cudnnGetErrorString(st));
            break;
        }
        if (need > e.ws[SL_CONV_BWD_FILTER])
            e.ws[SL_CONV_BWD_FILTER] = need;
        ok = true;
    } while (0);
    cudnnDestroyConvolutionDescriptor(q);
    return ok;
}

#undef BUILD_CHECK
#undef BUILD_FAIL

static void destroy_entry(sl_conv_entry *e)
{
    if (e->x)
        cudnnDestroyTensorDescriptor(e->x);
    if (e->y)
        cudnnDestroyTensorDescriptor(e->y);
    if (e->bias)
        cudnnDestroyTensorDescriptor(e->bias);
    if (e->w)
        cudnnDestroyFilterDescriptor(e->w);
    for (int p = 0; p < 3; p++)
        if (e->conv[p])
            cudnnDestroyConvolutionDescriptor(e->conv[p]);
}

/* The instance's entries, one allocation each so that a pointer handed
 * out stays valid while the table grows; found by a linear search (a
 * network has tens of geometries). */
struct sl_cuda_conv_cache {
    std::mutex lock;
    sl_conv_entry **entries;
    int count, capacity;
};

static const char *math_name(cudnnMathType_t m)
{
    return m == CUDNN_FMA_MATH ? "fma" : m == CUDNN_TENSOR_OP_MATH ? "tensor-op" : "default";
}

static cudnnMathType_t math_of(cudnnConvolutionDescriptor_t c)
{
    cudnnMathType_t m = CUDNN_DEFAULT_MATH;
    cudnnGetConvolutionMathType(c, &m);
    return m;
}

/* SL_CUDA_CONV_LOG=1: each geometry's algorithms, math types and
 * workspaces on stderr when first built (what a GPU result ran). */
static void log_entry(const sl_conv_entry *e)
{
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("SL_CUDA_CONV_LOG");
        on = v && *v && strcmp(v, "0") != 0;
    }
    if (!on)
        return;
    const sl_conv_desc *d = &e->key;
    if (!e->ok) {
        fprintf(stderr, "sublinear cuda conv n%d c%d %dx%d k%d %dx%d s%d p%d g%d: %s\n", d->n,
                d->c, d->h, d->w, d->k, d->kh, d->kw, d->sh, d->ph, d->groups, e->why);
        return;
    }
    fprintf(stderr,
            "sublinear cuda conv n%d c%d %dx%d k%d %dx%d s%d p%d g%d: fwd algo %d (%s, %zu B), "
            "bwd-data algo %d (%s, %zu B), bwd-filter algo %d (%s, %zu B)\n",
            d->n, d->c, d->h, d->w, d->k, d->kh, d->kw, d->sh, d->ph, d->groups, (int)e->fwd,
            math_name(math_of(e->conv[SL_CONV_FWD])), e->ws[SL_CONV_FWD], (int)e->bwd_data,
            math_name(math_of(e->conv[SL_CONV_BWD_DATA])), e->ws[SL_CONV_BWD_DATA],
            (int)e->bwd_filter, math_name(math_of(e->conv[SL_CONV_BWD_FILTER])),
            e->ws[SL_CONV_BWD_FILTER]);
}

/* A new entry for geometry d, built, appended to c (locked); NULL when out
 * of memory. */
static sl_conv_entry *add_entry(sl_cuda_state *s, sl_cuda_conv_cache *c, const sl_conv_desc *d)
{
    if (c->count == c->capacity) {
        int cap = c->capacity ? 2 * c->capacity : 16;
        sl_conv_entry **grown = (sl_conv_entry **)realloc(c->entries, (size_t)cap * sizeof *grown);
        if (!grown)
            return NULL;
        c->entries = grown;
        c->capacity = cap;
    }
    sl_conv_entry *e = (sl_conv_entry *)calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->key = *d;
    e->ok = build_into(s, d, *e);
    log_entry(e);
    c->entries[c->count++] = e;
    return e;
}

/* The cached entry of a geometry, built on first use; NULL when it has no
 * usable algorithm or memory ran out, with *why saying which. */
static const sl_conv_entry *find(sl_cuda_state *s, const sl_conv_desc *d, const char **why)
{
    sl_cuda_conv_cache *c;
    {
        /* kernels of two networks of one context may get here from two
         * threads: create the cache once */
        std::lock_guard<std::mutex> g(s->error_lock);
        if (!s->conv_cache)
            s->conv_cache = new (std::nothrow) sl_cuda_conv_cache();
        c = s->conv_cache;
    }
    if (!c) {
        *why = "allocating the algorithm cache: out of memory";
        return NULL;
    }
    std::lock_guard<std::mutex> g(c->lock);
    sl_conv_desc key = *d;
    sl_conv_entry *e = NULL;
    for (int i = 0; i < c->count && !e; i++)
        if (memcmp(&c->entries[i]->key, &key, sizeof key) == 0)
            e = c->entries[i];
    if (!e)
        e = add_entry(s, c, &key);
    if (!e) {
        *why = "growing the algorithm cache: out of memory";
        return NULL;
    }
    if (!e->ok) {
        *why = e->why; /* lives as long as the cache */
        return NULL;
    }
    return e;
}

/* find for a kernel: a failure is recorded in the instance for sync (every
 * use fails, so a later step cannot pass silently after the first sync
 * reported it). */
static const sl_conv_entry *lookup(sl_cuda_state *s, const sl_conv_desc *d)
{
    const char *why = NULL;
    const sl_conv_entry *e = find(s, d, &why);
    if (!e)
        sl_cuda_record(s, __FILE__, __LINE__, "convolution", why);
    return e;
}

static const float kOne = 1.0f, kZero = 0.0f;

extern "C" void sl_cuda_conv_cache_free(sl_cuda_conv_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->count; i++) {
        destroy_entry(c->entries[i]);
        free(c->entries[i]);
    }
    free(c->entries);
    delete c;
}

/* Asked while planning: a geometry cuDNN cannot run fails the plan now
 * (SIZE_MAX, the error set and taken from the instance), rather than a
 * later, unrelated sync. */
extern "C" size_t sl_cuda_conv2d_workspace_bytes(const sl_backend *be, const sl_conv_desc *d,
                                         sl_conv_pass pass)
{
    sl_cuda_state *s = sl_cuda_of(be);
    const char *why = NULL;
    const sl_conv_entry *e = find(s, d, &why);
    if (e)
        return e->ws[pass];
    /* this geometry's own reason, set here: the instance's sticky error is
     * neither consulted (it may hold an unrelated failure) nor changed */
    sl_set_error(SL_ERR_BACKEND,
                 "CUDA backend: cuDNN cannot run the convolution of %dx%dx%dx%d by %d filters "
                 "%dx%d (stride %dx%d, padding %dx%d, dilation %dx%d, groups %d): %s",
                 d->n, d->c, d->h, d->w, d->k, d->kh, d->kw, d->sh, d->sw, d->ph, d->pw, d->dh,
                 d->dw, d->groups, why);
    return SIZE_MAX;
}

/* bf16 activations through cuDNN: not yet (the mixed-precision issue's GPU
 * part); a bf16 network's convolutions widen into float copies. */
extern "C" int sl_cuda_conv2d_native_bf16(const sl_backend *be, const sl_conv_desc *d)
{
    (void)be;
    (void)d;
    return 0;
}

extern "C" void sl_cuda_conv2d_forward(const sl_exec *ex, const sl_conv_desc *d, const void *x,
                                         const float *w, const float *bias, void *y, void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    const sl_conv_entry *e = lookup(s, d);
    if (!e)
        return;
    SL_CUDNN_CHECK(s, cudnnConvolutionForward(s->cudnn, &kOne, e->x, x, e->w, w,
                                              e->conv[SL_CONV_FWD], e->fwd, ws,
                                              e->ws[SL_CONV_FWD], &kZero, e->y, y));
    if (bias)
        SL_CUDNN_CHECK(s, cudnnAddTensor(s->cudnn, &kOne, e->bias, bias, &kOne, e->y, y));
}

extern "C" void sl_cuda_conv2d_backward_data(const sl_exec *ex, const sl_conv_desc *d,
                                               const float *w, const void *dy, void *dx,
                                               int accumulate, void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    const sl_conv_entry *e = lookup(s, d);
    if (!e)
        return;
    SL_CUDNN_CHECK(s, cudnnConvolutionBackwardData(s->cudnn, &kOne, e->w, w, e->y, dy,
                                                   e->conv[SL_CONV_BWD_DATA],
                                                e->bwd_data, ws, e->ws[SL_CONV_BWD_DATA],
                                                accumulate ? &kOne : &kZero, e->x, dx));
}

extern "C" void sl_cuda_conv2d_backward_filter(const sl_exec *ex, const sl_conv_desc *d,
                                                 const void *x, const void *dy, float *dw,
                                                 float *dbias, void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    const sl_conv_entry *e = lookup(s, d);
    if (!e)
        return;
    SL_CUDNN_CHECK(s, cudnnConvolutionBackwardFilter(s->cudnn, &kOne, e->x, x, e->y, dy,
                                                     e->conv[SL_CONV_BWD_FILTER],
                                                  e->bwd_filter, ws, e->ws[SL_CONV_BWD_FILTER],
                                                  &kOne, e->w, dw));
    if (dbias)
        SL_CUDNN_CHECK(s, cudnnConvolutionBackwardBias(s->cudnn, &kOne, e->y, dy, &kOne, e->bias, dbias));
}
