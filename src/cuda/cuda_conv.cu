/*
 * cuda_conv.cu — convolution with cuDNN and GEMM with cuBLAS (run stage on
 * a GPU). Each geometry gets its descriptors and algorithms once, cached:
 * the workspace the planner reserves (conv2d_workspace_bytes, asked while
 * planning) and the algorithm a step runs come from the same entry, so the
 * planned peak includes cuDNN's workspaces. Algorithms are cuDNN's
 * heuristic order restricted to FP32 FMA math (no TF32) and, in the
 * deterministic table, to deterministic ones; a re-forward then repeats
 * the forward bit for bit.
 */
#include <map>
#include <mutex>
#include <string.h>

#include "cuda/cuda_common.h"

namespace {

const size_t kWorkspaceCap = (size_t)512 << 20; /* bytes one conv may ask for */

struct Key {
    sl_conv_desc d;
    int det;
    bool operator<(const Key &o) const
    {
        int c = memcmp(&d, &o.d, sizeof d);
        return c ? c < 0 : det < o.det;
    }
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

std::mutex lock;
std::map<Key, Entry> cache;

bool math_ok(cudnnMathType_t m) { return m == CUDNN_DEFAULT_MATH || m == CUDNN_FMA_MATH; }

template <typename Perf>
int pick(const Perf *perf, int count, int det, size_t *ws)
{
    for (int i = 0; i < count; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS || !math_ok(perf[i].mathType))
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

Entry build(const sl_conv_desc *d, int det)
{
    Entry e;
    memset(&e, 0, sizeof e);
    sl_cuda_state *s = sl_cuda_state_get();
    if (!s)
        return e;
    SL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e.x));
    SL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e.y));
    SL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e.bias));
    SL_CUDNN_CHECK(cudnnCreateFilterDescriptor(&e.w));
    SL_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&e.conv));
    SL_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n, d->c,
                                              d->h, d->w));
    SL_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n, d->k,
                                              d->oh, d->ow));
    SL_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e.bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, d->k,
                                              1, 1));
    SL_CUDNN_CHECK(cudnnSetFilter4dDescriptor(e.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, d->k,
                                              d->c / d->groups, d->kh, d->kw));
    SL_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(e.conv, d->ph, d->pw, d->sh, d->sw, d->dh, d->dw,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    SL_CUDNN_CHECK(cudnnSetConvolutionGroupCount(e.conv, d->groups));
    SL_CUDNN_CHECK(cudnnSetConvolutionMathType(e.conv, CUDNN_FMA_MATH));
    int n = 0, i;
    cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    SL_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(s->cudnn, e.x, e.w, e.conv, e.y,
                                                          CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, fp));
    i = pick(fp, n, det, &e.ws[SL_CONV_FWD]);
    if (i < 0) {
        sl_cuda_record(__FILE__, __LINE__, "choosing a forward convolution algorithm",
                       "no FP32 algorithm fits");
        return e;
    }
    e.fwd = fp[i].algo;
    cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    SL_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        s->cudnn, e.w, e.y, e.conv, e.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, dp));
    i = pick(dp, n, det, &e.ws[SL_CONV_BWD_DATA]);
    if (i < 0) {
        sl_cuda_record(__FILE__, __LINE__, "choosing a backward-data algorithm",
                       det ? "no deterministic FP32 algorithm fits" : "no FP32 algorithm fits");
        return e;
    }
    e.bwd_data = dp[i].algo;
    cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    SL_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        s->cudnn, e.x, e.y, e.conv, e.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, wp));
    i = pick(wp, n, det, &e.ws[SL_CONV_BWD_FILTER]);
    if (i < 0) {
        sl_cuda_record(__FILE__, __LINE__, "choosing a backward-filter algorithm",
                       det ? "no deterministic FP32 algorithm fits" : "no FP32 algorithm fits");
        return e;
    }
    e.bwd_filter = wp[i].algo;
    e.ok = !sl_cuda_failed();
    return e;
}

const Entry *lookup(const sl_conv_desc *d, int det)
{
    std::lock_guard<std::mutex> g(lock);
    Key k;
    memset(&k, 0, sizeof k);
    k.d = *d;
    k.det = det;
    auto it = cache.find(k);
    if (it == cache.end())
        it = cache.emplace(k, build(d, det)).first;
    return it->second.ok ? &it->second : NULL;
}

const float kOne = 1.0f, kZero = 0.0f;

} // namespace

extern "C" size_t sl_cuda_conv_workspace_det(const sl_conv_desc *d, sl_conv_pass pass, int det)
{
    const Entry *e = lookup(d, det);
    return e ? e->ws[pass] : 0;
}

extern "C" void sl_cuda_conv_forward_det(const sl_exec *ex, const sl_conv_desc *d, const float *x,
                                         const float *w, const float *bias, float *y, void *ws,
                                         int det)
{
    (void)ex;
    const Entry *e = lookup(d, det);
    sl_cuda_state *s = sl_cuda_state_get();
    if (!e || !s)
        return;
    SL_CUDNN_CHECK(cudnnConvolutionForward(s->cudnn, &kOne, e->x, x, e->w, w, e->conv, e->fwd, ws,
                                           e->ws[SL_CONV_FWD], &kZero, e->y, y));
    if (bias)
        SL_CUDNN_CHECK(cudnnAddTensor(s->cudnn, &kOne, e->bias, bias, &kOne, e->y, y));
}

extern "C" void sl_cuda_conv_backward_data_det(const sl_exec *ex, const sl_conv_desc *d,
                                               const float *w, const float *dy, float *dx,
                                               int accumulate, void *ws, int det)
{
    (void)ex;
    const Entry *e = lookup(d, det);
    sl_cuda_state *s = sl_cuda_state_get();
    if (!e || !s)
        return;
    SL_CUDNN_CHECK(cudnnConvolutionBackwardData(s->cudnn, &kOne, e->w, w, e->y, dy, e->conv,
                                                e->bwd_data, ws, e->ws[SL_CONV_BWD_DATA],
                                                accumulate ? &kOne : &kZero, e->x, dx));
}

extern "C" void sl_cuda_conv_backward_filter_det(const sl_exec *ex, const sl_conv_desc *d,
                                                 const float *x, const float *dy, float *dw,
                                                 float *dbias, void *ws, int det)
{
    (void)ex;
    const Entry *e = lookup(d, det);
    sl_cuda_state *s = sl_cuda_state_get();
    if (!e || !s)
        return;
    SL_CUDNN_CHECK(cudnnConvolutionBackwardFilter(s->cudnn, &kOne, e->x, x, e->y, dy, e->conv,
                                                  e->bwd_filter, ws, e->ws[SL_CONV_BWD_FILTER],
                                                  &kOne, e->w, dw));
    if (dbias)
        SL_CUDNN_CHECK(cudnnConvolutionBackwardBias(s->cudnn, &kOne, e->y, dy, &kOne, e->bias, dbias));
}

/* Row-major C[m x n] = alpha op(A) op(B) + beta C through column-major
 * cuBLAS: C^T = op(B)^T op(A)^T. */
extern "C" void sl_cuda_gemm(const sl_exec *ex, int trans_a, int trans_b, int m, int n, int k,
                             float alpha, const float *a, int lda, const float *b, int ldb,
                             float beta, float *c, int ldc)
{
    (void)ex;
    sl_cuda_state *s = sl_cuda_state_get();
    if (!s)
        return;
    SL_CUBLAS_CHECK(cublasSgemm(s->cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a, lda,
                                &beta, c, ldc));
}
