/*
 * cuda_runtime.cu — the CUDA backend's table (run stage on a GPU): the
 * process-wide stream and cuDNN / cuBLAS handles, device memory, copies,
 * and the sticky first error that sync() turns into a library error.
 * Two tables: deterministic (deterministic cuDNN algorithms only, what
 * bit-identical re-forward needs) and fast.
 */
#include <mutex>
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_common.h"

extern "C" {
#include "core/core.h"
}

static std::mutex error_lock;
static int error_set;
static char error_text[768];

extern "C" void sl_cuda_record(const char *file, int line, const char *what, const char *detail)
{
    std::lock_guard<std::mutex> g(error_lock);
    if (error_set)
        return;
    error_set = 1;
    snprintf(error_text, sizeof error_text, "CUDA backend: %s failed (%s) at %s:%d", what, detail,
             file, line);
}

extern "C" int sl_cuda_failed(void)
{
    std::lock_guard<std::mutex> g(error_lock);
    return error_set;
}

static sl_cuda_state state;
static int state_ready = -1; /* -1 not tried, 0 failed, 1 ready */
static std::mutex state_lock;
static char state_error[512];

extern "C" sl_cuda_state *sl_cuda_state_get(void)
{
    std::lock_guard<std::mutex> g(state_lock);
    if (state_ready >= 0)
        return state_ready ? &state : NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    /* Without a driver this is an error, not zero devices. */
    if (e != cudaSuccess || count < 1) {
        snprintf(state_error, sizeof state_error, "no usable CUDA device (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        state_ready = 0;
        return NULL;
    }
    const char *step = "cudaStreamCreate";
    int ok = cudaStreamCreateWithFlags(&state.stream, cudaStreamNonBlocking) == cudaSuccess;
    if (ok && (step = "cudnnCreate", cudnnCreate(&state.cudnn) != CUDNN_STATUS_SUCCESS))
        ok = 0;
    if (ok && (step = "cudnnSetStream", cudnnSetStream(state.cudnn, state.stream) != CUDNN_STATUS_SUCCESS))
        ok = 0;
    if (ok && (step = "cublasCreate", cublasCreate(&state.cublas) != CUBLAS_STATUS_SUCCESS))
        ok = 0;
    if (ok && (step = "cublasSetStream", cublasSetStream(state.cublas, state.stream) != CUBLAS_STATUS_SUCCESS))
        ok = 0;
    /* Plain FP32 arithmetic: no TF32 tensor-core shortcuts. */
    if (ok && (step = "cublasSetMathMode",
               cublasSetMathMode(state.cublas, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS))
        ok = 0;
    if (!ok) {
        snprintf(state_error, sizeof state_error, "CUDA initialisation failed at %s", step);
        state_ready = 0;
        return NULL;
    }
    state_ready = 1;
    return &state;
}

static void *cu_alloc(size_t bytes, const char *what)
{
    void *p = NULL;
    size_t n = sl_align_up(bytes ? bytes : 1);
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        sl_fail(SL_ERR_NOMEM, "out of device memory allocating %zu bytes for %s (%zu of %zu bytes free)",
                bytes, what, free_b, total_b);
        return NULL;
    }
    if (cudaMemset(p, 0, n) != cudaSuccess) {
        cudaFree(p);
        sl_fail(SL_ERR_BACKEND, "cudaMemset failed clearing %s", what);
        return NULL;
    }
    return p;
}

static void cu_free(void *p)
{
    if (p)
        cudaFree(p);
}

static void cu_upload(const sl_exec *ex, void *dst, const void *src, size_t bytes)
{
    (void)ex;
    if (bytes)
        SL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, state.stream));
    /* The caller's buffer may change after return: finish the copy. */
    SL_CUDA_CHECK(cudaStreamSynchronize(state.stream));
}

static void cu_download(const sl_exec *ex, void *dst, const void *src, size_t bytes)
{
    (void)ex;
    if (bytes)
        SL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, state.stream));
    SL_CUDA_CHECK(cudaStreamSynchronize(state.stream));
}

static sl_status cu_sync(const sl_exec *ex)
{
    (void)ex;
    SL_CUDA_CHECK(cudaStreamSynchronize(state.stream));
    std::lock_guard<std::mutex> g(error_lock);
    if (!error_set)
        return SL_OK;
    error_set = 0;
    return sl_fail(SL_ERR_BACKEND, "%s", error_text);
}

static size_t cu_free_bytes(void)
{
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
        return 0;
    return free_b;
}

#define CONV_WRAPPERS(tag, det)                                                                  \
    static size_t ws_##tag(const sl_conv_desc *d, sl_conv_pass p)                                \
    {                                                                                            \
        return sl_cuda_conv_workspace_det(d, p, det);                                           \
    }                                                                                            \
    static void fwd_##tag(const sl_exec *ex, const sl_conv_desc *d, const float *x,             \
                          const float *w, const float *b, float *y, void *ws)                    \
    {                                                                                            \
        sl_cuda_conv_forward_det(ex, d, x, w, b, y, ws, det);                                   \
    }                                                                                            \
    static void bwd_data_##tag(const sl_exec *ex, const sl_conv_desc *d, const float *w,        \
                               const float *dy, float *dx, int acc, void *ws)                    \
    {                                                                                            \
        sl_cuda_conv_backward_data_det(ex, d, w, dy, dx, acc, ws, det);                         \
    }                                                                                            \
    static void bwd_filter_##tag(const sl_exec *ex, const sl_conv_desc *d, const float *x,      \
                                 const float *dy, float *dw, float *db, void *ws)                \
    {                                                                                            \
        sl_cuda_conv_backward_filter_det(ex, d, x, dy, dw, db, ws, det);                        \
    }

CONV_WRAPPERS(det, 1)
CONV_WRAPPERS(fast, 0)

static sl_backend make_table(int det)
{
    sl_backend b;
    memset(&b, 0, sizeof b);
    b.name = det ? "cuda (deterministic)" : "cuda";
    b.host_memory = 0;
    b.alloc = cu_alloc;
    b.free = cu_free;
    b.upload = cu_upload;
    b.download = cu_download;
    b.sync = cu_sync;
    b.device_free_bytes = cu_free_bytes;
    b.gemm = sl_cuda_gemm;
    b.conv2d_workspace_bytes = det ? ws_det : ws_fast;
    b.conv2d_forward = det ? fwd_det : fwd_fast;
    b.conv2d_backward_data = det ? bwd_data_det : bwd_data_fast;
    b.conv2d_backward_filter = det ? bwd_filter_det : bwd_filter_fast;
    b.batchnorm_forward_train = sl_cuda_batchnorm_forward_train;
    b.batchnorm_forward_apply = sl_cuda_batchnorm_forward_apply;
    b.batchnorm_forward_infer = sl_cuda_batchnorm_forward_infer;
    b.batchnorm_backward = sl_cuda_batchnorm_backward;
    b.maxpool_forward = sl_cuda_maxpool_forward;
    b.maxpool_backward = sl_cuda_maxpool_backward;
    b.avgpool_forward = sl_cuda_avgpool_forward;
    b.avgpool_backward = sl_cuda_avgpool_backward;
    b.relu_forward = sl_cuda_relu_forward;
    b.relu_backward = sl_cuda_relu_backward;
    b.dropout_forward = sl_cuda_dropout_forward;
    b.dropout_backward = sl_cuda_dropout_backward;
    b.add = sl_cuda_add;
    b.copy = sl_cuda_copy;
    b.fill = sl_cuda_fill;
    b.copy_channels = sl_cuda_copy_channels;
    b.global_avgpool_forward = sl_cuda_global_avgpool_forward;
    b.global_avgpool_backward = sl_cuda_global_avgpool_backward;
    b.bias_add = sl_cuda_bias_add;
    b.bias_backward = sl_cuda_bias_backward;
    b.softmax_xent = sl_cuda_softmax_xent;
    b.sgd_update = sl_cuda_sgd_update;
    b.adam_update = sl_cuda_adam_update;
    return b;
}

static sl_backend table_det, table_fast;

extern "C" const sl_backend *sl_cuda_backend(int deterministic)
{
    if (!sl_cuda_state_get()) {
        sl_fail(SL_ERR_UNSUPPORTED, "CUDA backend unavailable: %s", state_error);
        return NULL;
    }
    static std::once_flag once;
    std::call_once(once, [] {
        table_det = make_table(1);
        table_fast = make_table(0);
    });
    return deterministic ? &table_det : &table_fast;
}
