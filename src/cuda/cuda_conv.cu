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
 * the forward bit for bit.
 */
#include <map>
#include <mutex>
#include <new>
#include <string.h>

#include "cuda/cuda_common.h"

namespace {

const size_t kWorkspaceCap = (size_t)512 << 20; /* bytes one conv may ask for */

struct Key {
    sl_conv_desc d;
    bool operator<(const Key &o) const { return memcmp(&d, &o.d, sizeof d) < 0; }
};

struct Entry {
    cudnnTensorDescriptor_t x, y, bias;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws[3];
    bool ok;
};

/* FP32 FMA math, or with tf32 also TF32 tensor cores (never down
 * conversion to half precision). */
bool math_ok(cudnnMathType_t m, int tf32)
{
    return m == CUDNN_FMA_MATH || m == CUDNN_DEFAULT_MATH || (tf32 && m == CUDNN_TENSOR_OP_MATH);
}

template <typename Perf>
int pick(const Perf *perf, int count, int det, int tf32, size_t *ws)
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

Entry build(sl_cuda_state *s, const sl_conv_desc *d)
{
    Entry e;
    memset(&e, 0, sizeof e);
    int det = s->deterministic;
    SL_CUDNN_CHECK(s, cudnnCreateTensorDescriptor(&e.x));
    SL_CUDNN_CHECK(s, cudnnCreateTensorDescriptor(&e.y));
    SL_CUDNN_CHECK(s, cudnnCreateTensorDescriptor(&e.bias));
    SL_CUDNN_CHECK(s, cudnnCreateFilterDescriptor(&e.w));
    SL_CUDNN_CHECK(s, cudnnCreateConvolutionDescriptor(&e.conv));
    SL_CUDNN_CHECK(s, cudnnSetTensor4dDescriptor(e.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n, d->c,
                                              d->h, d->w));
    SL_CUDNN_CHECK(s, cudnnSetTensor4dDescriptor(e.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n, d->k,
                                              d->oh, d->ow));
    SL_CUDNN_CHECK(s, cudnnSetTensor4dDescriptor(e.bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, d->k,
                                              1, 1));
    SL_CUDNN_CHECK(s, cudnnSetFilter4dDescriptor(e.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, d->k,
                                              d->c / d->groups, d->kh, d->kw));
    SL_CUDNN_CHECK(s, cudnnSetConvolution2dDescriptor(e.conv, d->ph, d->pw, d->sh, d->sw, d->dh, d->dw,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    SL_CUDNN_CHECK(s, cudnnSetConvolutionGroupCount(e.conv, d->groups));
    SL_CUDNN_CHECK(s, cudnnSetConvolutionMathType(e.conv, s->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    int n = 0, i;
    cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    SL_CUDNN_CHECK(s, cudnnGetConvolutionForwardAlgorithm_v7(s->cudnn, e.x, e.w, e.conv, e.y,
                                                          CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, fp));
    i = pick(fp, n, det, s->tf32, &e.ws[SL_CONV_FWD]);
    if (i < 0) {
        sl_cuda_record(s, __FILE__, __LINE__, "choosing a forward convolution algorithm",
                       "no FP32 algorithm fits");
        return e;
    }
    e.fwd = fp[i].algo;
    cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    SL_CUDNN_CHECK(s, cudnnGetConvolutionBackwardDataAlgorithm_v7(
        s->cudnn, e.w, e.y, e.conv, e.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, dp));
    i = pick(dp, n, det, s->tf32, &e.ws[SL_CONV_BWD_DATA]);
    if (i < 0) {
        sl_cuda_record(s, __FILE__, __LINE__, "choosing a backward-data algorithm",
                       det ? "no deterministic FP32 algorithm fits" : "no FP32 algorithm fits");
        return e;
    }
    e.bwd_data = dp[i].algo;
    cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    SL_CUDNN_CHECK(s, cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        s->cudnn, e.x, e.y, e.conv, e.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, wp));
    i = pick(wp, n, det, s->tf32, &e.ws[SL_CONV_BWD_FILTER]);
    if (i < 0) {
        sl_cuda_record(s, __FILE__, __LINE__, "choosing a backward-filter algorithm",
                       det ? "no deterministic FP32 algorithm fits" : "no FP32 algorithm fits");
        return e;
    }
    e.bwd_filter = wp[i].algo;
    e.ok = !s->error_set;
    return e;
}

void destroy_entry(Entry &e)
{
    if (e.x)
        cudnnDestroyTensorDescriptor(e.x);
    if (e.y)
        cudnnDestroyTensorDescriptor(e.y);
    if (e.bias)
        cudnnDestroyTensorDescriptor(e.bias);
    if (e.w)
        cudnnDestroyFilterDescriptor(e.w);
    if (e.conv)
        cudnnDestroyConvolutionDescriptor(e.conv);
}

} // namespace

struct sl_cuda_conv_cache {
    std::mutex lock;
    std::map<Key, Entry> entries;
};

namespace {

/* The cached entry of a geometry, built on first use; NULL when no
 * algorithm fits (the failure is recorded in the instance). */
const Entry *lookup(sl_cuda_state *s, const sl_conv_desc *d)
{
    if (!s->conv_cache) {
        s->conv_cache = new (std::nothrow) sl_cuda_conv_cache();
        if (!s->conv_cache) {
            sl_cuda_record(s, __FILE__, __LINE__, "allocating the algorithm cache", "out of memory");
            return NULL;
        }
    }
    sl_cuda_conv_cache *c = s->conv_cache;
    std::lock_guard<std::mutex> g(c->lock);
    Key k;
    memset(&k, 0, sizeof k);
    k.d = *d;
    auto it = c->entries.find(k);
    if (it == c->entries.end())
        it = c->entries.emplace(k, build(s, d)).first;
    return it->second.ok ? &it->second : NULL;
}

const float kOne = 1.0f, kZero = 0.0f;

} // namespace

extern "C" void sl_cuda_conv_cache_free(sl_cuda_conv_cache *c)
{
    if (!c)
        return;
    for (auto &kv : c->entries)
        destroy_entry(kv.second);
    delete c;
}

extern "C" size_t sl_cuda_conv_workspace(const sl_backend *be, const sl_conv_desc *d,
                                         sl_conv_pass pass)
{
    const Entry *e = lookup(sl_cuda_of(be), d);
    return e ? e->ws[pass] : 0;
}

extern "C" void sl_cuda_conv_forward(const sl_exec *ex, const sl_conv_desc *d, const float *x,
                                         const float *w, const float *bias, float *y, void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    const Entry *e = lookup(s, d);
    if (!e)
        return;
    SL_CUDNN_CHECK(s, cudnnConvolutionForward(s->cudnn, &kOne, e->x, x, e->w, w, e->conv, e->fwd, ws,
                                           e->ws[SL_CONV_FWD], &kZero, e->y, y));
    if (bias)
        SL_CUDNN_CHECK(s, cudnnAddTensor(s->cudnn, &kOne, e->bias, bias, &kOne, e->y, y));
}

extern "C" void sl_cuda_conv_backward_data(const sl_exec *ex, const sl_conv_desc *d,
                                               const float *w, const float *dy, float *dx,
                                               int accumulate, void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    const Entry *e = lookup(s, d);
    if (!e)
        return;
    SL_CUDNN_CHECK(s, cudnnConvolutionBackwardData(s->cudnn, &kOne, e->w, w, e->y, dy, e->conv,
                                                e->bwd_data, ws, e->ws[SL_CONV_BWD_DATA],
                                                accumulate ? &kOne : &kZero, e->x, dx));
}

extern "C" void sl_cuda_conv_backward_filter(const sl_exec *ex, const sl_conv_desc *d,
                                                 const float *x, const float *dy, float *dw,
                                                 float *dbias, void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    const Entry *e = lookup(s, d);
    if (!e)
        return;
    SL_CUDNN_CHECK(s, cudnnConvolutionBackwardFilter(s->cudnn, &kOne, e->x, x, e->y, dy, e->conv,
                                                  e->bwd_filter, ws, e->ws[SL_CONV_BWD_FILTER],
                                                  &kOne, e->w, dw));
    if (dbias)
        SL_CUDNN_CHECK(s, cudnnConvolutionBackwardBias(s->cudnn, &kOne, e->y, dy, &kOne, e->bias, dbias));
}
