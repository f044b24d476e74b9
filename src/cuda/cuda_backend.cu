/*
 * cuda_backend.cu — the CUDA backend's instances (run stage on a GPU):
 * each has its own stream, cuDNN and cuBLAS handles, convolution algorithm
 * cache and sticky first error that sync() turns into a library
 * error. Device memory and copies, and the table of the other cuda_*.cu
 * files' kernels. The deterministic flag of an instance restricts cuDNN to
 * deterministic algorithms (what bit-identical re-forward needs).
 */
#include <mutex>
#include <new>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.h"

extern "C" {
#include "base/base.h"
#include "base/conv_engine.h"
#include "base/conv_gemm.h"
}

static void *sl_cuda_alloc(const sl_backend *be, size_t bytes, const char *what)
{
    sl_cuda_state *s = sl_cuda_of(be);
    void *p = NULL;
    size_t n = sl_align_up(bytes ? bytes : 1);
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess) {
        /* reported here: clear the runtime's last error, or the next
         * kernel's launch check (cudaGetLastError) would record it again
         * and fail a later, smaller step that fits */
        (void)cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        sl_set_error(SL_ERR_NOMEM,
                     "out of device memory on GPU %d allocating %zu bytes for %s (%zu of %zu bytes "
                     "free)", s->device, bytes, what, free_b, total_b);
        return NULL;
    }
    /* on the instance's stream: ordered before every kernel that uses it */
    if (cudaMemsetAsync(p, 0, n, s->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaFree(p);
        sl_set_error(SL_ERR_BACKEND, "cudaMemset failed clearing %s", what);
        return NULL;
    }
    return p;
}

static void sl_cuda_free(const sl_backend *be, void *p)
{
    sl_cuda_of(be);
    if (p)
        cudaFree(p);
}

enum : size_t {
    kStageMax = (size_t)64 << 20, /* larger uploads are copied and waited for */
};

/* A pinned staging buffer of at least `bytes` whose previous copy is done,
 * or NULL (the upload then copies from the caller's buffer and waits). */
static void *stage_for(sl_cuda_state *s, size_t bytes)
{
    if (bytes > kStageMax)
        return NULL;
    int k = s->stage_next;
    if (!s->stage_done[k] &&
        cudaEventCreateWithFlags(&s->stage_done[k], cudaEventDisableTiming) != cudaSuccess) {
        (void)cudaGetLastError(); /* a slower path, not a failure */
        s->stage_done[k] = NULL;
        return NULL;
    }
    /* the copy that last read this buffer, two uploads ago */
    SL_CUDA_CHECK(s, cudaEventSynchronize(s->stage_done[k]));
    if (s->stage_cap[k] < bytes) {
        if (s->stage[k])
            cudaFreeHost(s->stage[k]);
        s->stage[k] = NULL;
        s->stage_cap[k] = 0;
        size_t cap = bytes < ((size_t)1 << 20) ? (size_t)1 << 20 : bytes;
        if (cudaHostAlloc(&s->stage[k], cap, cudaHostAllocDefault) != cudaSuccess) {
            (void)cudaGetLastError();
            s->stage[k] = NULL;
            return NULL;
        }
        s->stage_cap[k] = cap;
    }
    s->stage_next = k ^ 1;
    return s->stage[k];
}

static void sl_cuda_upload(const sl_exec *ex, void *dst, const void *src, size_t bytes)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    if (!bytes)
        return;
    void *stage = stage_for(s, bytes);
    if (stage) {
        /* the caller's bytes are in the staging buffer when this returns;
         * the queue goes on without waiting for the copy */
        memcpy(stage, src, bytes);
        int k = s->stage_next ^ 1;
        SL_CUDA_CHECK(s, cudaMemcpyAsync(dst, stage, bytes, cudaMemcpyHostToDevice, s->stream));
        SL_CUDA_CHECK(s, cudaEventRecord(s->stage_done[k], s->stream));
        return;
    }
    SL_CUDA_CHECK(s, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s->stream));
    /* The caller's buffer may change after return: finish the copy. */
    SL_CUDA_CHECK(s, cudaStreamSynchronize(s->stream));
}

static void sl_cuda_download(const sl_exec *ex, void *dst, const void *src, size_t bytes)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    if (bytes)
        SL_CUDA_CHECK(s, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s->stream));
    SL_CUDA_CHECK(s, cudaStreamSynchronize(s->stream));
}

static void sl_cuda_download_later(const sl_exec *ex, void *dst, const void *src, size_t bytes)
{
    sl_cuda_read_later(sl_cuda_ex(ex), dst, src, bytes);
}

static sl_status sl_cuda_sync(const sl_exec *ex)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    SL_CUDA_CHECK(s, cudaStreamSynchronize(s->stream));
    sl_cuda_flush_pending(s);
    return sl_cuda_take_error(s);
}

static void sl_cuda_wait(const sl_exec *ex)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    SL_CUDA_CHECK(s, cudaStreamSynchronize(s->stream));
    sl_cuda_flush_pending(s);
}

static size_t sl_cuda_device_free_bytes(const sl_backend *be, size_t *total)
{
    sl_cuda_of(be);
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        (void)cudaGetLastError(); /* not a kernel's failure */
        free_b = total_b = 0;
    }
    if (total)
        *total = total_b;
    return free_b;
}

/* Custom layers queue their own kernels on the instance's stream. */
static void *sl_cuda_native_stream(const sl_backend *be) { return (void *)sl_cuda_of(be)->stream; }

/* CUDA graphs of a run of program steps (the executor's graph ranges):
 * the stream captured in thread-local mode (which only decides whose
 * unsafe calls are refused: work any thread queues on the stream is drawn
 * in, so graphs rely on the rule of one thread at a time per context),
 * instantiated once, replayed by cudaGraphLaunch. The instances that
 * record give cuBLAS the cuBLASLt workspace (sl_cuda_backend_create), so
 * no GEMM asks for memory of its own while recorded. */

/* Forgets a failure the instance kept (a recording's, which never ran). */
static void forget_error(sl_cuda_state *s)
{
    std::lock_guard<std::mutex> lock(s->error_lock);
    s->error_set = 0;
    s->error_text[0] = '\0';
}
static int sl_cuda_graph_begin(const sl_exec *ex)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    {
        /* a failure already kept stays for the sync: graph_end's
         * forgetting covers only what the recording's calls report */
        std::lock_guard<std::mutex> lock(s->error_lock);
        if (s->error_set)
            return 2;
    }
    sl_cuda_bind(s);
    if (cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    return 0;
}

static void *sl_cuda_graph_end(const sl_exec *ex)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    cudaError_t e = cudaStreamEndCapture(s->stream, &g);
    if (e == cudaSuccess && g)
        e = cudaGraphInstantiate(&x, g, 0);
    if (g)
        cudaGraphDestroy(g);
    int failed;
    {
        /* a call that failed while recorded (graph_begin saw none kept)
         * left its work out of the recording */
        std::lock_guard<std::mutex> lock(s->error_lock);
        failed = s->error_set;
    }
    if (e != cudaSuccess || !x || failed) {
        /* nothing ran: forget what the recorded calls reported, the
         * caller queues them again */
        if (x)
            cudaGraphExecDestroy(x);
        (void)cudaGetLastError();
        forget_error(s);
        return NULL;
    }
    return (void *)x;
}

static void sl_cuda_graph_launch(const sl_exec *ex, void *graph)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    SL_CUDA_CHECK(s, cudaGraphLaunch((cudaGraphExec_t)graph, s->stream));
}

static void sl_cuda_graph_free(const sl_backend *be, void *graph)
{
    if (!graph)
        return;
    sl_cuda_bind(sl_cuda_of(be));
    cudaGraphExecDestroy((cudaGraphExec_t)graph);
    (void)cudaGetLastError(); /* not a kernel's failure */
}

static void state_free(sl_cuda_state *s)
{
    if (!s)
        return;
    sl_cuda_bind(s);
    if (s->stream)
        cudaStreamSynchronize(s->stream);
    for (int k = 0; k < 2; k++) {
        if (s->stage[k])
            cudaFreeHost(s->stage[k]);
        if (s->stage_done[k])
            cudaEventDestroy(s->stage_done[k]);
    }
    if (s->readback)
        cudaFreeHost(s->readback);
    sl_cuda_conv_cache_free(s->conv_cache);
    sl_cuda_lt_cache_free(s->lt_cache);
    if (s->lt_ws)
        cudaFree(s->lt_ws);
    if (s->cublaslt)
        cublasLtDestroy(s->cublaslt);
    if (s->cublas)
        cublasDestroy(s->cublas);
    if (s->cudnn)
        cudnnDestroy(s->cudnn);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    delete s;
}

static void sl_cuda_destroy(sl_backend *be)
{
    if (!be)
        return;
    state_free(sl_cuda_of(be));
    delete be;
}

/* cuBLASLt's workspace: SL_CUDA_LT_WORKSPACE_MIB MiB (32 when unset, as
 * cuBLAS keeps for its own handle on Hopper; 0: none). The GPU run of
 * 2026-11-27 saw cuBLASLt offer an Ampere kernel (at about 150 TFLOP/s
 * in TF32) for Conv1D's forward when allowed no workspace, where cuBLAS,
 * with its own, ran the backward's products on Hopper kernels. */
static size_t lt_workspace_bytes(void)
{
    const char *v = getenv("SL_CUDA_LT_WORKSPACE_MIB");
    long mib = 32;
    if (v && *v) {
        char *end = NULL;
        long x = strtol(v, &end, 10);
        if (end && *end == '\0' && x >= 0 && x <= 4096)
            mib = x;
    }
    return (size_t)mib << 20;
}

/* Stream and handles of a new instance; on failure the step that failed
 * is named and *out stays NULL. */
static sl_status state_create(int gpu, int deterministic, int tf32, sl_cuda_state **out)
{
    *out = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    /* Without a driver this is an error, not zero devices. */
    if (e != cudaSuccess || count < 1)
        return sl_set_error(SL_ERR_UNSUPPORTED, "CUDA backend unavailable: no usable CUDA device (%s)",
                            e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    if (gpu < 0 || gpu >= count)
        return sl_set_error(SL_ERR_INVALID_ARG,
                       "CUDA device %d requested, but this machine has %d (ordinals 0 to %d)", gpu,
                       count, count - 1);
    e = cudaSetDevice(gpu);
    if (e != cudaSuccess)
        return sl_set_error(SL_ERR_UNSUPPORTED, "CUDA backend unavailable: GPU %d cannot be used (%s)",
                            gpu, cudaGetErrorString(e));
    sl_cuda_state *s = new (std::nothrow) sl_cuda_state();
    if (!s)
        return sl_set_error(SL_ERR_NOMEM, "out of memory creating a CUDA backend");
    s->device = gpu;
    s->deterministic = deterministic != 0;
    s->tf32 = tf32 != 0;
    const char *step = "cudaStreamCreate";
    int ok = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking) == cudaSuccess;
    if (ok && (step = "cudnnCreate", cudnnCreate(&s->cudnn) != CUDNN_STATUS_SUCCESS))
        ok = 0;
    if (ok && (step = "cudnnSetStream", cudnnSetStream(s->cudnn, s->stream) != CUDNN_STATUS_SUCCESS))
        ok = 0;
    if (ok && (step = "cublasCreate", cublasCreate(&s->cublas) != CUBLAS_STATUS_SUCCESS))
        ok = 0;
    if (ok && (step = "cublasSetStream", cublasSetStream(s->cublas, s->stream) != CUBLAS_STATUS_SUCCESS))
        ok = 0;
    if (ok && (step = "cublasLtCreate", cublasLtCreate(&s->cublaslt) != CUBLAS_STATUS_SUCCESS))
        ok = 0;
    if (ok && (step = "the cuBLASLt plan cache", !(s->lt_cache = sl_cuda_lt_cache_new())))
        ok = 0;
    /* optional: without it the kernels that would ask for more than the
     * default shared memory take their other paths */
    int optin = 0;
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, gpu) != cudaSuccess)
        (void)cudaGetLastError();
    s->smem_optin = optin > 0 ? (size_t)optin : 0;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, gpu) != cudaSuccess)
        (void)cudaGetLastError();
    s->sms = sms > 0 ? sms : 1;
    s->lt_ws_bytes = lt_workspace_bytes();
    if (ok && s->lt_ws_bytes &&
        (step = "allocating cuBLASLt's workspace", cudaMalloc(&s->lt_ws, s->lt_ws_bytes) != cudaSuccess)) {
        cudaGetLastError();
        s->lt_ws = NULL;
        ok = 0;
    }
    /* Plain FP32 arithmetic unless TF32 is asked for. */
    if (ok && (step = "cublasSetMathMode",
               cublasSetMathMode(s->cublas, s->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                    : CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS))
        ok = 0;
    if (!ok) {
        state_free(s);
        return sl_set_error(SL_ERR_UNSUPPORTED,
                       "CUDA backend unavailable: initialisation failed at %s on GPU %d", step, gpu);
    }
    *out = s;
    return SL_OK;
}

/* 1 when environment variable name is "off" or "0". */
static int env_off(const char *name)
{
    const char *v = getenv(name);
    return v && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0);
}

/* 1 when environment variable name is "on" or "1". */
static int env_on(const char *name)
{
    const char *v = getenv(name);
    return v && (strcmp(v, "on") == 0 || strcmp(v, "1") == 0);
}

/* The table of every instance, impl and name aside. */
static sl_backend table_of(void)
{
    sl_backend t = {};
    sl_backend *b = &t;
    b->name = "cuda";
    b->host_memory = 0;
    b->counter_delta = 1; /* dropout, attention's dropout, random_uniform */
    b->destroy = sl_cuda_destroy;
    b->alloc = sl_cuda_alloc;
    b->free = sl_cuda_free;
    b->upload = sl_cuda_upload;
    b->download = sl_cuda_download;
    b->download_later = sl_cuda_download_later;
    b->sync = sl_cuda_sync;
    b->wait = sl_cuda_wait;
    b->device_free_bytes = sl_cuda_device_free_bytes;
    b->native_stream = sl_cuda_native_stream;
    b->graph_begin = sl_cuda_graph_begin;
    b->graph_end = sl_cuda_graph_end;
    b->graph_launch = sl_cuda_graph_launch;
    b->graph_free = sl_cuda_graph_free;
#define SL_CUDA_ENTRY(ret, member, params) b->member = sl_cuda_##member;
    SL_BACKEND_OPS(SL_CUDA_ENTRY, SL_CUDA_ENTRY)
#undef SL_CUDA_ENTRY
    return t;
}

extern "C" const sl_backend *sl_cuda_backend_template(void)
{
    static const sl_backend table = table_of();
    return &table;
}

extern "C" void *sl_cuda_backend_stream(const sl_backend *be)
{
    return (void *)sl_cuda_of(be)->stream;
}

extern "C" int sl_cuda_ln_regs(const sl_backend *be) { return sl_cuda_of(be)->ln_regs; }
extern "C" int sl_cuda_bn_fused(const sl_backend *be) { return sl_cuda_of(be)->bn_fused; }
extern "C" int sl_cuda_bn_vec(const sl_backend *be) { return sl_cuda_of(be)->bn_vec; }
extern "C" int sl_cuda_xent_blocks(const sl_backend *be) { return sl_cuda_of(be)->xent_blocks; }
extern "C" int sl_cuda_conv_tuned_passes(const sl_backend *be)
{
    return sl_cuda_conv_tuned(sl_cuda_of(be));
}
extern "C" int sl_cuda_conv_gemm_geometries(const sl_backend *be, sl_conv_pass pass)
{
    return sl_cuda_conv_gemm_count(sl_cuda_of(be), pass);
}

extern "C" int sl_cuda_column_parts(const sl_backend *be, const char **why)
{
    const sl_cuda_state *s = sl_cuda_of(be);
    if (why)
        *why = s->col_parts ? "" : s->col_parts_why;
    return s->col_parts;
}

extern "C" sl_status sl_cuda_backend_create(int gpu, int deterministic, int tf32, sl_backend **out)
{
    sl_cuda_state *s;
    sl_status st = state_create(gpu, deterministic, tf32, &s);
    if (st != SL_OK)
        return st;
    sl_backend *b = new (std::nothrow) sl_backend();
    if (!b) {
        state_free(s);
        return sl_set_error(SL_ERR_NOMEM, "out of memory creating a CUDA backend");
    }
    *b = *sl_cuda_backend_template();
    b->name = deterministic ? (tf32 ? "cuda (deterministic, tf32)" : "cuda (deterministic)")
                            : (tf32 ? "cuda (tf32)" : "cuda");
    b->impl = s;
    /* Switches for a GPU session whose new kernels misbehave (each "off"
     * goes back to the path before them): SL_CUDA_BF16_GEMM (a bf16
     * network's Conv1D layers then run on float copies),
     * SL_CUDA_BF16_KERNELS (ReLU, the adds, LayerNorm, GELU and the fused
     * attention on bf16 activations: then on float copies), SL_CUDA_LT
     * (gemm_bias: then gemm and bias_add), SL_CUDA_FLASH (the fused
     * attention: then the chunked cuBLAS one), SL_CUDA_FLASH_MMA (its
     * mma.sync kernels: then its wmma ones), SL_CUDA_FLASH_BF16 (its bf16
     * products for bf16 activations: then TF32 on widened tiles),
     * SL_CUDA_FLASH_DROPOUT (attention dropout inside its mma.sync
     * kernels: then dropout takes the chunked cuBLAS attention),
     * SL_CUDA_LN_REGS (LayerNorm's forward and input gradient with their
     * rows in registers: then their loops; the same bits either way),
     * SL_CUDA_CONV_API=legacy (convolutions through cuDNN's _v7 algorithm
     * choice instead of its graph API's engine heuristics),
     * SL_CUDA_XENT_STAGED (the language model's loss with each row staged
     * in shared memory: then three passes over global memory; the same
     * bits either way), SL_CUDA_COL_PARTS (the bias and LayerNorm
     * parameter gradients as column parts joined in clusters: then column
     * tiles; other sums), SL_CUDA_XENT_BLOCKS (a classifier's loss a block
     * per row: then a thread per row; other sums), SL_CUDA_BN_RELU
     * (BatchNorm and the in-place ReLU after it as one step each way:
     * then two; the same bits either way), SL_CUDA_BN_VEC (BatchNorm's
     * normalise and input gradient four values a thread where hw is a
     * multiple of 4: then one; the same bits; written without a GPU),
     * SL_CUDA_GRAPHS (runs of
     * layer steps captured once as CUDA graphs and replayed: then queued
     * kernel by kernel every run; the same kernels, so the same bits;
     * 2.5 % of ResNet-152's step and 0.8 % of GPT-2's on an H100,
     * 2026-11-28), SL_CUDA_CONV_GEMM (1x1 filter gradients, and strided
     * 1x1 input gradients, as cuBLAS GEMMs in a deterministic instance,
     * base/conv_gemm.h: then cuDNN's engines; "all" takes them in every
     * instance; written without a GPU; SL_CUDA_CONV_GEMM_CAP_KIB caps
     * their workspace, 64 MiB by default) and SL_CUDA_CONV_GEMM_STRIDED
     * (strided 1x1 geometries among them: then stride 1 only). Three
     * switches turn a path on: SL_CUDA_CONV_GEMM_FWD=on (the forward and
     * input gradient of stride-1 1x1 convolutions as cuBLAS GEMMs too,
     * where the GEMMs are taken; cuda_conv.cu; written without a GPU, to
     * be timed),
     * SL_CUDA_BN_FUSED=on (BatchNorm's statistics joined to its normalise
     * and its backward's means to its input gradient, instead of three
     * kernels each; the same bits; off by default, 1.4 % slower on an
     * H100, 2026-11-27-e), SL_CUDA_CONV_TUNE=on or
     * a count (each convolution pass's engine timed among the allowed
     * ones, as cudnn.benchmark does; cuda_conv.cu; within 1 % of the
     * heuristics' first on ResNet-152 with deterministic engines on an
     * H100, 2026-11-28) */
    b->bf16_kernels = (env_off("SL_CUDA_BF16_GEMM") ? 0u : (unsigned)SL_BF16_GEMM) |
                      (env_off("SL_CUDA_BF16_KERNELS")
                           ? 0u
                           : (unsigned)(SL_BF16_RELU | SL_BF16_ADD | SL_BF16_LAYERNORM |
                                        SL_BF16_GELU | SL_BF16_ATTENTION));
    if (env_off("SL_CUDA_LT"))
        b->gemm_bias = NULL;
    if (env_off("SL_CUDA_BN_RELU"))
        sl_backend_drop_bn_relu(b);
    if (env_off("SL_CUDA_GRAPHS")) {
        b->graph_begin = NULL;
        b->graph_end = NULL;
        b->graph_launch = NULL;
        b->graph_free = NULL;
    } else if (s->lt_ws_bytes > 0 &&
               cublasSetWorkspace(s->cublas, s->lt_ws, s->lt_ws_bytes) != CUBLAS_STATUS_SUCCESS) {
        sl_backend_destroy(b);
        return sl_set_error(SL_ERR_UNSUPPORTED, "CUDA backend: cublasSetWorkspace failed");
    }
    s->flash_fused = !env_off("SL_CUDA_FLASH");
    s->flash_mma = !env_off("SL_CUDA_FLASH_MMA");
    s->ln_regs = !env_off("SL_CUDA_LN_REGS");
    s->bn_fused = env_on("SL_CUDA_BN_FUSED");
    s->xent_blocks = !env_off("SL_CUDA_XENT_BLOCKS");
    s->bn_vec = !env_off("SL_CUDA_BN_VEC");
    s->flash_bf16 = !env_off("SL_CUDA_FLASH_BF16");
    const char *conv_api = getenv("SL_CUDA_CONV_API");
    s->conv_legacy = conv_api && strcmp(conv_api, "legacy") == 0;
    const char *tune = getenv("SL_CUDA_CONV_TUNE");
    s->conv_tune = sl_engine_tune_count(tune);
    if (s->conv_tune < 0) {
        sl_backend_destroy(b);
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "CUDA backend: SL_CUDA_CONV_TUNE=\"%s\" is not on, off, 0, 1 or a "
                            "count of engines from 2 to 64",
                            tune);
    }
    const char *gemm = getenv("SL_CUDA_CONV_GEMM");
    s->conv_gemm = sl_conv_gemm_mode(gemm);
    if (s->conv_gemm < 0) {
        sl_backend_destroy(b);
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "CUDA backend: SL_CUDA_CONV_GEMM=\"%s\" is not on, all or off", gemm);
    }
    const char *gemm_cap = getenv("SL_CUDA_CONV_GEMM_CAP_KIB");
    s->conv_gemm_cap = sl_conv_gemm_cap(gemm_cap);
    if (s->conv_gemm_cap == 0) {
        sl_backend_destroy(b);
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "CUDA backend: SL_CUDA_CONV_GEMM_CAP_KIB=\"%s\" is not a whole number "
                            "of KiB from 1 to 4194304",
                            gemm_cap);
    }
    s->conv_gemm_strided = !env_off("SL_CUDA_CONV_GEMM_STRIDED");
    s->conv_gemm_fwd = env_on("SL_CUDA_CONV_GEMM_FWD");
    s->flash_dropout = !env_off("SL_CUDA_FLASH_DROPOUT");
    s->xent_staged = !env_off("SL_CUDA_XENT_STAGED");
    s->col_parts_why = env_off("SL_CUDA_COL_PARTS") ? "SL_CUDA_COL_PARTS=off"
                                                     : sl_cuda_column_parts_ok(s->device);
    s->col_parts = s->col_parts_why == NULL;
    *out = b;
    return SL_OK;
}
