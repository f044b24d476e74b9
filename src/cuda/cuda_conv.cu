/*
 * cuda_conv.cu — convolution with cuDNN (run stage on a GPU). Each
 * geometry gets its descriptors and the choice of how each pass runs
 * once, cached in the backend instance: the workspace the planner
 * reserves (conv2d_workspace_bytes, asked while planning) and what a
 * step runs come from the same entry, so the planned peak includes
 * cuDNN's workspaces.
 *
 * The choice, by default, is cuDNN's graph API (cuda_conv_graph.cu): per
 * pass an execution plan from cuDNN's engine heuristics, mode A, then
 * mode B, then the fallback list, the first engine configuration whose
 * notes base/conv_engine.h allows (tensor cores only where the instance
 * allows TF32, never half-precision inputs or sums, deterministic engines
 * only in a deterministic instance), that finalizes into a plan and whose
 * workspace is within the cap. Beta belongs to a graph's operation (the
 * legacy API takes it per call), so the backward-data pass has two
 * plans, one writing dx and one adding to it; the filter gradient is
 * always added to. A pass no engine passes for falls back to the legacy
 * choice, for that pass of that geometry only, and the log says why.
 * SL_CUDA_CONV_API=legacy (read into the instance, cuda_backend.cu) takes
 * the legacy choice for every pass: the way back.
 *
 * The legacy choice is cudnnGetConvolution*Algorithm_v7's order
 * restricted to FP32 FMA math (TF32 tensor cores too when the instance
 * allows TF32) and, in a deterministic instance, to deterministic
 * algorithms.
 *
 * Either way the choice is a function of the geometry and the instance,
 * made once and cached: a re-forward runs the same plan or algorithm and
 * repeats the forward bit for bit. A bias is added by cudnnAddTensor
 * after the forward, its gradient summed by cudnnConvolutionBackwardBias.
 * SL_CUDA_CONV_LOG=1 prints each geometry's choice to stderr: per pass
 * the engine, its knobs and notes, the heuristics mode and workspace, or
 * the legacy algorithm and why the graph API was not used.
 *
 * SL_CUDA_CONV_TUNE=on (or a count from 2 to 64; 8 for "on") times the
 * allowed engines instead of taking the heuristics' first, as
 * cudnn.benchmark does: when a geometry is first planned, up to that many
 * distinct allowed configurations of heuristics A and B run on scratch
 * operands of its shapes (allocated and freed then, with the largest
 * candidate's workspace), and base/conv_engine.h's sl_engine_pick_timed
 * takes the fastest, or an earlier one within 3 % of it. The same rules
 * filter the candidates (a deterministic instance times deterministic
 * engines only), and the choice is still made once per geometry, so
 * every run and re-forward of the instance repeats its bits. What
 * changes: the choice depends on timings, so two processes may take
 * different engines and so differ in the last bits; off by default. The
 * log (SL_CUDA_CONV_LOG=1) gives each pass's time, the fastest's and the
 * heuristics' first.
 *
 * A 1x1 convolution without padding has its filter gradient computed
 * as cuBLAS's strided-batched GEMMs, one product per image (and piece of
 * its pixels; a strided one's input gathered at the stride's points
 * first), whose partials an ordered sum adds into dW; a strided one has
 * its input gradient as one batched GEMM per group of images, scattered
 * onto the stride's points (base/conv_gemm.h: why, and how the work is
 * cut). In deterministic instances by default, where cuDNN's
 * deterministic engines for those passes run far below the GPU's pace;
 * SL_CUDA_CONV_GEMM=all in every instance, =off never;
 * SL_CUDA_CONV_GEMM_STRIDED=off keeps strided geometries on cuDNN;
 * SL_CUDA_CONV_GEMM_FWD=on (off by default, to be timed) takes the
 * forward and the input gradient of stride-1 1x1 geometries to cuBLAS
 * too, one batched GEMM over the images each, written in place. The
 * partials, gathered inputs and products are the pass's workspace,
 * planned like an engine's, at most SL_CUDA_CONV_GEMM_CAP_KIB (64 MiB by
 * default: more images in a group, fewer GEMMs); the GEMMs run in the
 * instance's math (TF32 where allowed).
 */
#include <mutex>
#include <new>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/conv_gemm.h"
#include "cuda/cuda_common.h"
#include "cuda/cuda_conv_graph.h"

static const size_t kWorkspaceCap = (size_t)512 << 20; /* bytes one conv may ask for */

/* The ways a pass is run: the backward-data pass has two, by beta (0:
 * dx is written, 1: added to); the filter gradient is always added to. */
enum conv_slot { SLOT_FWD, SLOT_BWD_DATA, SLOT_BWD_DATA_ADD, SLOT_BWD_FILTER, SLOT_COUNT };
static const sl_conv_pass kSlotPass[SLOT_COUNT] = {SL_CONV_FWD, SL_CONV_BWD_DATA, SL_CONV_BWD_DATA,
                                                   SL_CONV_BWD_FILTER};
static const float kSlotBeta[SLOT_COUNT] = {0.0f, 0.0f, 1.0f, 1.0f};
static const char *const kSlotName[SLOT_COUNT] = {"fwd", "bwd-data", "bwd-data+=", "bwd-filter"};

/* One geometry's descriptors and choices. */
struct sl_conv_entry {
    sl_conv_desc key; /* the geometry (all ints: compared with memcmp) */
    /* legacy descriptors: the bias's add and sum use them, and a pass
     * that runs a legacy algorithm */
    cudnnTensorDescriptor_t x, y, bias;
    cudnnFilterDescriptor_t w;
    /* per pass that has a legacy algorithm (NULL where none was needed),
     * a convolution descriptor in that algorithm's math type (cuDNN runs
     * an algorithm in the math type of the descriptor it is given, and
     * its workspace depends on it) */
    cudnnConvolutionDescriptor_t conv[3];
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t legacy_ws[3];
    /* graph API: the tensors and each slot's plan (plan[i].plan NULL: slot
     * i runs its pass's legacy algorithm, fallback[i] saying why when the
     * graph API was tried) */
    sl_cuda_conv_tensors graph;
    sl_cuda_conv_plan plan[SLOT_COUNT];
    char fallback[SLOT_COUNT][320];
    char tune_note[128]; /* why tuning did not run for this geometry ("": it ran, or was off) */
    /* the filter gradient as cuBLAS GEMMs (gemm_filter; base/conv_gemm.h),
     * instead of plan[SLOT_BWD_FILTER] or the legacy algorithm; a strided
     * geometry's input gradient likewise (gemm_data), instead of
     * plan[SLOT_BWD_DATA] and plan[SLOT_BWD_DATA_ADD]; with
     * SL_CUDA_CONV_GEMM_FWD=on a stride-1 geometry's forward (gemm_fwd)
     * and input gradient (gemm_data) too */
    bool gemm_filter, gemm_data, gemm_fwd;
    sl_conv_gemm_split gemm;
    sl_conv_gemm_data_split gemm_d;
    size_t ws[3]; /* per pass, the most any of its slots needs: what is planned */
    bool ok;
    char why[256]; /* why build_into failed (this geometry's own reason) */
};

/* Whether slot i of e runs as cuBLAS GEMMs rather than through cuDNN. */
static bool slot_gemm(const sl_conv_entry &e, int i)
{
    return i == SLOT_FWD ? e.gemm_fwd : i == SLOT_BWD_FILTER ? e.gemm_filter : e.gemm_data;
}

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

/* pick over the n results of a _v7 query that returned st: the index
 * taken (its algorithm into *algo, its math type into *math), or -1. */
template <typename Perf, typename Algo>
static int take(cudnnStatus_t st, const Perf *perf, int n, int det, int tf32, size_t *ws,
                Algo *algo, cudnnMathType_t *math)
{
    int i = st == CUDNN_STATUS_SUCCESS ? pick(perf, n, det, tf32, ws) : -1;
    if (i >= 0) {
        *algo = perf[i].algo;
        *math = perf[i].mathType;
    }
    return i;
}

static const char *const kChoosing[3] = {"choosing a forward convolution algorithm",
                                         "choosing a backward-data algorithm",
                                         "choosing a backward-filter algorithm"};

/* Pass `pass`'s legacy algorithm, its descriptor e.conv[pass] and its
 * workspace e.legacy_ws[pass], asked through q (a descriptor in the
 * widest allowed math). */
static bool legacy_choose(sl_cuda_state *s, const sl_conv_desc *d, sl_conv_entry &e,
                          sl_conv_pass pass, cudnnConvolutionDescriptor_t q, char *why)
{
    int det = s->deterministic, n = 0, i = -1;
    cudnnMathType_t math = CUDNN_FMA_MATH;
    size_t *ws = &e.legacy_ws[pass], need = 0;
    cudnnStatus_t st;
    if (pass == SL_CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        st = cudnnGetConvolutionForwardAlgorithm_v7(s->cudnn, e.x, e.w, q, e.y,
                                                    CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf);
        i = take(st, perf, n, det, s->tf32, ws, &e.fwd, &math);
    } else if (pass == SL_CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        st = cudnnGetConvolutionBackwardDataAlgorithm_v7(
            s->cudnn, e.w, e.y, q, e.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf);
        i = take(st, perf, n, det, s->tf32, ws, &e.bwd_data, &math);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        st = cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            s->cudnn, e.x, e.y, q, e.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf);
        i = take(st, perf, n, det, s->tf32, ws, &e.bwd_filter, &math);
    }
    if (i < 0) {
        BUILD_FAIL(kChoosing[pass], st != CUDNN_STATUS_SUCCESS ? cudnnGetErrorString(st)
                                    : det && pass != SL_CONV_FWD
                                        ? "no deterministic FP32 algorithm fits"
                                        : "no FP32 algorithm fits (FMA math, or TF32 with --tf32)");
        return false;
    }
    if (!make_conv(d, math, &e.conv[pass], why))
        return false;
    if (pass == SL_CONV_FWD)
        BUILD_CHECK(cudnnGetConvolutionForwardWorkspaceSize(s->cudnn, e.x, e.w, e.conv[pass], e.y,
                                                            e.fwd, &need));
    else if (pass == SL_CONV_BWD_DATA)
        BUILD_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(s->cudnn, e.w, e.y, e.conv[pass],
                                                                 e.x, e.bwd_data, &need));
    else
        BUILD_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(s->cudnn, e.x, e.y, e.conv[pass],
                                                                   e.w, e.bwd_filter, &need));
    if (need > *ws)
        *ws = need;
    return true;
}

/* Frees what tuning_begin allocated (after the queue's last use of it:
 * cudaFree waits for the device). */
static void tuning_end(sl_cuda_conv_tuning *t)
{
    void *ptr[3] = {t->x, t->w, t->y};
    for (int i = 0; i < 3; i++)
        if (ptr[i])
            cudaFree(ptr[i]);
    memset(t, 0, sizeof *t);
}

/* Scratch operands of geometry d for engine tuning (SL_CUDA_CONV_TUNE)
 * into *t, filled with small floats; t->candidates stays 0, and note says
 * why, when tuning cannot run now: the queue is being captured into a
 * CUDA graph (no allocation or wait may happen in it), or memory is
 * short. Plan time only: the operands are freed by tuning_end before
 * the entry is used, so the planned peak is untouched. */
static void tuning_begin(sl_cuda_state *s, const sl_conv_desc *d, sl_cuda_conv_tuning *t,
                         char *note, size_t len)
{
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s->stream, &capturing) != cudaSuccess ||
        capturing != cudaStreamCaptureStatusNone) {
        (void)cudaGetLastError();
        snprintf(note, len, "not tuned: asked while the queue was being captured");
        return;
    }
    const size_t bytes[3] = {
        (size_t)d->n * (size_t)d->c * (size_t)d->h * (size_t)d->w * sizeof(float),
        (size_t)d->k * (size_t)(d->c / d->groups) * (size_t)d->kh * (size_t)d->kw * sizeof(float),
        (size_t)d->n * (size_t)d->k * (size_t)d->oh * (size_t)d->ow * sizeof(float)};
    void **ptr[3] = {&t->x, &t->w, &t->y};
    for (int i = 0; i < 3; i++) {
        cudaError_t e = cudaMalloc(ptr[i], bytes[i]);
        if (e != cudaSuccess)
            *ptr[i] = NULL;
        /* 0x3c in every byte: 0.0116 in every float, finite however many
         * times the accumulating passes add to it */
        else
            e = cudaMemsetAsync(*ptr[i], 0x3c, bytes[i], s->stream);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            snprintf(note, len, "not tuned: scratch operands of %zu B: %s", bytes[i],
                     cudaGetErrorString(e));
            tuning_end(t);
            return;
        }
    }
    t->candidates = s->conv_tune;
}

/* Each slot's plan through the graph API; a slot none passes for is
 * marked for its pass's legacy algorithm (needs_legacy), with the reason
 * kept for the log. */
static void graph_choose(sl_cuda_state *s, const sl_conv_desc *d, sl_conv_entry &e,
                         bool needs_legacy[3])
{
    const sl_engine_rules rules = {s->deterministic, s->tf32, kWorkspaceCap};
    char why[sizeof e.fallback[0]];
    bool tensors = sl_cuda_conv_tensors_make(d, &e.graph, why, sizeof why);
    sl_cuda_conv_tuning tuning = {0, NULL, NULL, NULL};
    if (tensors && s->conv_tune > 1)
        tuning_begin(s, d, &tuning, e.tune_note, sizeof e.tune_note);
    for (int i = 0; i < SLOT_COUNT; i++) {
        if (slot_gemm(e, i))
            continue; /* cuBLAS's */
        sl_engine_rules r = rules;
        /* dx += plans no more workspace than dx = (one legacy algorithm
         * served both): the planner reserves the larger of the two for
         * every convolution, most of which never accumulate */
        if (i == SLOT_BWD_DATA_ADD && e.plan[SLOT_BWD_DATA].plan)
            r.workspace_cap = e.plan[SLOT_BWD_DATA].ws_bytes;
        if (tensors && sl_cuda_conv_plan_make(s, &e.graph, kSlotPass[i], kSlotBeta[i], &r,
                                              tuning.candidates ? &tuning : NULL, &e.plan[i],
                                              why, sizeof why)) {
            s->conv_tuned += e.plan[i].tuned;
            continue;
        }
        snprintf(e.fallback[i], sizeof e.fallback[i], "%s", why);
        needs_legacy[kSlotPass[i]] = true;
    }
    tuning_end(&tuning);
}

static bool build_into(sl_cuda_state *s, const sl_conv_desc *d, sl_conv_entry &e)
{
    char *why = e.why;
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
    const unsigned gemms = sl_conv_gemm_passes(d, s->conv_gemm, s->deterministic,
                                               s->conv_gemm_strided, s->conv_gemm_fwd);
    e.gemm_filter = (gemms >> SL_CONV_BWD_FILTER & 1u) &&
                    sl_conv_gemm_filter_plan(d, s->sms, s->conv_gemm_cap, &e.gemm);
    e.gemm_data = (gemms >> SL_CONV_BWD_DATA & 1u) &&
                  sl_conv_gemm_data_plan(d, s->conv_gemm_cap, &e.gemm_d);
    e.gemm_fwd = gemms >> SL_CONV_FWD & 1u;
    bool needs_legacy[3] = {!e.gemm_fwd, !e.gemm_data, !e.gemm_filter};
    /* cuDNN's tensors and plans only where some pass is left to it */
    if (!s->conv_legacy && (needs_legacy[0] || needs_legacy[1] || needs_legacy[2])) {
        needs_legacy[0] = needs_legacy[1] = needs_legacy[2] = false;
        graph_choose(s, d, e, needs_legacy);
    }
    /* the legacy heuristics are asked through a descriptor in the widest
     * allowed math; each pass then gets its own in its algorithm's */
    cudnnConvolutionDescriptor_t q = NULL;
    bool ok = true;
    for (int p = 0; p < 3 && ok; p++)
        if (needs_legacy[p])
            ok = (q || make_conv(d, s->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH, &q, why)) &&
                 legacy_choose(s, d, e, (sl_conv_pass)p, q, why);
    if (q)
        cudnnDestroyConvolutionDescriptor(q);
    if (!ok) {
        /* the legacy API was the fallback: the graph API's reason too */
        for (int i = 0; i < SLOT_COUNT; i++)
            if (e.fallback[i][0]) {
                size_t used = strlen(e.why);
                snprintf(e.why + used, sizeof e.why - used, " (graph API, %s: %.160s)",
                         kSlotName[i], e.fallback[i]);
                break;
            }
        return false;
    }
    for (int i = 0; i < SLOT_COUNT; i++) {
        int p = kSlotPass[i];
        size_t need = !slot_gemm(e, i)        ? (e.plan[i].plan ? e.plan[i].ws_bytes
                                                                 : e.legacy_ws[p])
                      : i == SLOT_BWD_FILTER ? e.gemm.workspace_bytes
                      : i == SLOT_FWD        ? 0
                                             : e.gemm_d.workspace_bytes;
        if (need > e.ws[p])
            e.ws[p] = need;
    }
    return true;
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
    for (int i = 0; i < SLOT_COUNT; i++)
        sl_cuda_conv_plan_free(&e->plan[i]);
    sl_cuda_conv_tensors_free(&e->graph);
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

static int legacy_algo(const sl_conv_entry *e, int pass)
{
    return pass == SL_CONV_FWD ? (int)e->fwd
           : pass == SL_CONV_BWD_DATA ? (int)e->bwd_data
                                      : (int)e->bwd_filter;
}

/* printf onto text at *used (of cap bytes), stopping at its end. */
static void __attribute__((format(printf, 4, 5)))
append(char *text, size_t cap, size_t *used, const char *format, ...)
{
    if (*used >= cap)
        return;
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(text + *used, cap - *used, format, ap);
    va_end(ap);
    *used = n < 0 ? cap : *used + (size_t)n;
}

/* SL_CUDA_CONV_LOG=1: each geometry's choice per pass on stderr when first
 * built (what a GPU result ran): the graph API's engine, knobs, notes,
 * heuristics mode and workspace, or the legacy algorithm, its math type
 * and workspace, and why the graph API was not used. */
static void log_entry(const sl_cuda_state *s, const sl_conv_entry *e)
{
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("SL_CUDA_CONV_LOG");
        on = v && *v && strcmp(v, "0") != 0;
    }
    if (!on)
        return;
    const sl_conv_desc *d = &e->key;
    const char *api = s->conv_legacy ? "legacy" : "graph";
    if (!e->ok) {
        fprintf(stderr, "sublinear cuda conv n%d c%d %dx%d k%d %dx%d s%d p%d g%d (%s API): %s\n",
                d->n, d->c, d->h, d->w, d->k, d->kh, d->kw, d->sh, d->ph, d->groups, api, e->why);
        return;
    }
    char text[3072];
    size_t used = 0;
    for (int i = 0; i < SLOT_COUNT; i++) {
        int p = kSlotPass[i];
        append(text, sizeof text, &used, "%s%s ", i ? "; " : "", kSlotName[i]);
        if (i == SLOT_BWD_FILTER && e->gemm_filter)
            append(text, sizeof text, &used,
                   "cuBLAS GEMMs (%s%s): %d group(s) of %d images, %d piece(s) of %d pixels, "
                   "%zu B",
                   s->tf32 ? "TF32" : "FP32", e->gemm.gather_offset ? ", input gathered" : "",
                   e->gemm.groups, e->gemm.group, e->gemm.chunks, e->gemm.chunk,
                   e->gemm.workspace_bytes);
        else if (i == SLOT_FWD && e->gemm_fwd)
            append(text, sizeof text, &used, "cuBLAS GEMM (%s) over %d images, in place",
                   s->tf32 ? "TF32" : "FP32", d->n);
        else if (slot_gemm(*e, i))
            append(text, sizeof text, &used, "cuBLAS GEMMs (%s)%s: %d group(s) of %d images, %zu B",
                   s->tf32 ? "TF32" : "FP32", e->gemm_d.workspace_bytes ? " scattered" : ", in place",
                   e->gemm_d.groups, e->gemm_d.group, e->gemm_d.workspace_bytes);
        else if (e->plan[i].plan)
            append(text, sizeof text, &used, "%s", e->plan[i].how);
        else
            append(text, sizeof text, &used, "legacy algo %d (%s, %zu B)%s%s", legacy_algo(e, p),
                   math_name(math_of(e->conv[p])), e->legacy_ws[p],
                   e->fallback[i][0] ? ", graph API: " : "", e->fallback[i]);
    }
    if (e->tune_note[0])
        append(text, sizeof text, &used, "; %s", e->tune_note);
    fprintf(stderr, "sublinear cuda conv n%d c%d %dx%d k%d %dx%d s%d p%d g%d (%s API): %s\n",
            d->n, d->c, d->h, d->w, d->k, d->kh, d->kw, d->sh, d->ph, d->groups, api, text);
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
    log_entry(s, e);
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

/* f(cache) under the cache's lock, or 0 where the instance has no cache
 * yet: the counters the tests read. */
template <typename F>
static int count_in_cache(sl_cuda_state *s, F f)
{
    sl_cuda_conv_cache *c;
    {
        std::lock_guard<std::mutex> g(s->error_lock);
        c = s->conv_cache;
    }
    if (!c)
        return 0;
    std::lock_guard<std::mutex> g(c->lock);
    return f(c);
}

int sl_cuda_conv_gemm_count(sl_cuda_state *s, sl_conv_pass pass)
{
    const int slot = pass == SL_CONV_BWD_FILTER ? SLOT_BWD_FILTER
                     : pass == SL_CONV_BWD_DATA ? SLOT_BWD_DATA
                                                : SLOT_FWD;
    return count_in_cache(s, [slot](const sl_cuda_conv_cache *c) {
        int n = 0;
        for (int i = 0; i < c->count; i++)
            n += c->entries[i]->ok && slot_gemm(*c->entries[i], slot);
        return n;
    });
}

int sl_cuda_conv_tuned(sl_cuda_state *s)
{
    return count_in_cache(s, [s](const sl_cuda_conv_cache *) { return s->conv_tuned; });
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

/* The 1x1 GEMMs' math: the instance's (TF32 where allowed, else FP32
 * without TF32 or split tricks). */
static cublasComputeType_t gemm_math(const sl_cuda_state *s)
{
    return s->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F_PEDANTIC;
}

/* The forward of stride-1 1x1 geometry d (e->gemm_fwd): Y_i[k x hw] =
 * W X_i for every image in one batched GEMM, in place. Row-major Y_i is
 * column-major C[hw x k] = A B, A the column-major hw x c view of X_i
 * and B the column-major c x k view of W (the same for every image:
 * batch stride 0). */
static void gemm_forward(sl_cuda_state *s, const sl_conv_desc *d, const float *x, const float *w,
                         float *y)
{
    const int hw = d->h * d->w;
    const float one = 1.0f, zero = 0.0f;
    SL_CUBLAS_CHECK(s, cublasGemmStridedBatchedEx(
                           s->cublas, CUBLAS_OP_N, CUBLAS_OP_N, hw, d->k, d->c, &one, x,
                           CUDA_R_32F, hw, (long long)d->c * hw, w, CUDA_R_32F, d->c, 0LL, &zero,
                           y, CUDA_R_32F, hw, (long long)d->k * hw, d->n, gemm_math(s),
                           CUBLAS_GEMM_DEFAULT));
}

extern "C" void sl_cuda_conv2d_forward(const sl_exec *ex, const sl_conv_desc *d, const void *x,
                                       const float *w, const float *bias, void *y, void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    const sl_conv_entry *e = lookup(s, d);
    if (!e)
        return;
    const sl_cuda_conv_plan *p = &e->plan[SLOT_FWD];
    if (e->gemm_fwd)
        gemm_forward(s, d, (const float *)x, w, (float *)y);
    else if (p->plan)
        sl_cuda_conv_plan_run(s, &e->graph, p, x, w, y, ws);
    else
        SL_CUDNN_CHECK(s, cudnnConvolutionForward(s->cudnn, &kOne, e->x, x, e->w, w,
                                                  e->conv[SL_CONV_FWD], e->fwd, ws,
                                                  e->ws[SL_CONV_FWD], &kZero, e->y, y));
    if (bias)
        SL_CUDNN_CHECK(s, cudnnAddTensor(s->cudnn, &kOne, e->bias, bias, &kOne, e->y, y));
}

/* For `planes` planes of h x w (the images' channels, consecutive in
 * both): xs[plane][p] = x[plane][oy * sh][ox * sw], p = oy * ow + ox over
 * the oh x ow points of the stride. */
static __global__ void gather_k(size_t planes, int h, int w, int oh, int ow, int sh, int sw,
                                const float *x, float *xs)
{
    const int ohw = oh * ow;
    GRID_STRIDE(t, planes * ohw)
    {
        const size_t plane = t / ohw;
        const int p = (int)(t - plane * ohw), oy = p / ow, ox = p - oy * ow;
        xs[t] = x[plane * h * w + (size_t)oy * sh * w + (size_t)ox * sw];
    }
}

/* For `planes` planes of h x w: at the stride's points dx[plane][y][x]
 * = t[plane][y / sh][x / sw] (added to dx where accumulate), elsewhere 0
 * (left alone where accumulate). */
static __global__ void scatter_k(size_t planes, int h, int w, int oh, int ow, int sh, int sw,
                                 const float *t, float *dx, int accumulate)
{
    const int hw = h * w;
    GRID_STRIDE(i, planes * hw)
    {
        const size_t plane = i / hw;
        const int q = (int)(i - plane * hw), y = q / w, x = q - y * w;
        if (y % sh == 0 && x % sw == 0) {
            const float v = t[plane * oh * ow + (size_t)(y / sh) * ow + x / sw];
            dx[i] = accumulate ? dx[i] + v : v;
        } else if (!accumulate) {
            dx[i] = 0.0f;
        }
    }
}

/* The input gradient of 1x1 geometry d (e->gemm_d): for each group of
 * images, T_i[c x ohw] = W^T dY_i as one batched GEMM, into the
 * workspace t and scattered onto dx where d is strided, else into dx
 * itself (added to it where accumulate). Row-major T_i is column-major
 * C[ohw x c] = A op(B), A the column-major ohw x k view of dY_i and B
 * the column-major c x k view of W (transposed; the same for every
 * image: batch stride 0). */
static void gemm_data(sl_cuda_state *s, const sl_conv_desc *d, const sl_conv_gemm_data_split &g,
                      const float *w, const float *dy, float *dx, int accumulate, float *t)
{
    const int ohw = d->oh * d->ow;
    const bool direct = !sl_conv_gemm_strided(d);
    const float one = 1.0f, zero = 0.0f;
    for (int n0 = 0; n0 < d->n; n0 += g.group) {
        const int images = d->n - n0 < g.group ? d->n - n0 : g.group;
        float *dxs = dx + (size_t)n0 * d->c * d->h * d->w;
        SL_CUBLAS_CHECK(s, cublasGemmStridedBatchedEx(
                               s->cublas, CUBLAS_OP_N, CUBLAS_OP_T, ohw, d->c, d->k, &one,
                               dy + (size_t)n0 * d->k * ohw, CUDA_R_32F, ohw,
                               (long long)d->k * ohw, w, CUDA_R_32F, d->c, 0LL,
                               direct && accumulate ? &one : &zero, direct ? dxs : t, CUDA_R_32F,
                               ohw, (long long)d->c * ohw, images, gemm_math(s),
                               CUBLAS_GEMM_DEFAULT));
        if (direct)
            continue;
        const size_t planes = (size_t)images * d->c;
        scatter_k<<<sl_cuda_blocks(planes * d->h * d->w), 256, 0, s->stream>>>(
            planes, d->h, d->w, d->oh, d->ow, d->sh, d->sw, t, dxs, accumulate);
        SL_CUDA_LAUNCHED(s);
    }
}

extern "C" void sl_cuda_conv2d_backward_data(const sl_exec *ex, const sl_conv_desc *d,
                                             const float *w, const void *dy, void *dx,
                                             int accumulate, void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    const sl_conv_entry *e = lookup(s, d);
    if (!e)
        return;
    const sl_cuda_conv_plan *p = &e->plan[accumulate ? SLOT_BWD_DATA_ADD : SLOT_BWD_DATA];
    if (e->gemm_data)
        gemm_data(s, d, e->gemm_d, w, (const float *)dy, (float *)dx, accumulate, (float *)ws);
    else if (p->plan)
        sl_cuda_conv_plan_run(s, &e->graph, p, dx, w, dy, ws);
    else
        SL_CUDNN_CHECK(s, cudnnConvolutionBackwardData(s->cudnn, &kOne, e->w, w, e->y, dy,
                                                       e->conv[SL_CONV_BWD_DATA], e->bwd_data, ws,
                                                       e->ws[SL_CONV_BWD_DATA],
                                                       accumulate ? &kOne : &kZero, e->x, dx));
}

/* The partials are summed in two fixed levels, so that a few thousand
 * threads do not each walk hundreds of partials in turn (ResNet's first
 * stage: 4096 values, 512 partials): segments of kSegment consecutive
 * partials first, each into its first partial, in order; then the
 * segments' sums, in order, added into dw. The same adds in the same
 * order every run. */
enum { kSegment = 16 };

/* part[s * kSegment][i] = part[s * kSegment][i] + ... (the segment's
 * partials in order), for every segment s of `parts` partials of kc
 * floats (the last segment may be shorter). */
static __global__ void sum_segments_k(size_t kc, int parts, float *part)
{
    const size_t segments = ((size_t)parts + kSegment - 1) / kSegment;
    GRID_STRIDE(t, segments * kc)
    {
        const size_t s = t / kc, i = t - s * kc;
        float *p = part + s * kSegment * kc + i;
        const int len = parts - (int)(s * kSegment) < kSegment ? parts - (int)(s * kSegment)
                                                                : kSegment;
        float acc = p[0];
#pragma unroll 4
        for (int j = 1; j < len; j++)
            acc += p[(size_t)j * kc];
        p[0] = acc;
    }
}

/* dw[i] += part[0][i] + part[stride][i] + part[2 stride][i] + ..., in
 * that order, over the `parts` partials of kc floats (stride 1: every
 * partial; kSegment: the segments' sums). */
static __global__ void add_parts_k(size_t kc, int parts, int stride, const float *part, float *dw)
{
    GRID_STRIDE(i, kc)
    {
        float acc = part[i];
#pragma unroll 4
        for (int j = stride; j < parts; j += stride)
            acc += part[(size_t)j * kc + i];
        dw[i] += acc;
    }
}

/* The filter gradient of 1x1 geometry d (e->gemm) as batched GEMMs:
 * for each group of images (a strided geometry's inputs gathered at the
 * stride's points into the workspace after the partials), for each
 * piece of the output's pixels, one product per image into the
 * partials (piece-major), then their sum in two fixed levels added into
 * dw. Row-major dW_i[k x c] = dY_i[k x ohw] X_i[c x ohw]^T is
 * column-major C[c x k] = op(A) B with A the column-major ohw x c view
 * of X_i (transposed) and B the ohw x k view of dY_i. */
static void gemm_filter(sl_cuda_state *s, const sl_conv_desc *d, const sl_conv_gemm_split &g,
                        const float *x, const float *dy, float *dw, float *part)
{
    const int hw = d->h * d->w, ohw = d->oh * d->ow;
    const size_t kc = (size_t)d->k * (size_t)d->c;
    const float one = 1.0f, zero = 0.0f;
    float *gathered = g.gather_offset ? (float *)((char *)part + g.gather_offset) : NULL;
    for (int n0 = 0; n0 < d->n; n0 += g.group) {
        const int images = d->n - n0 < g.group ? d->n - n0 : g.group;
        const float *xs = x + (size_t)n0 * d->c * hw, *dys = dy + (size_t)n0 * d->k * ohw;
        if (gathered) {
            const size_t planes = (size_t)images * d->c;
            gather_k<<<sl_cuda_blocks(planes * ohw), 256, 0, s->stream>>>(
                planes, d->h, d->w, d->oh, d->ow, d->sh, d->sw, xs, gathered);
            SL_CUDA_LAUNCHED(s);
            xs = gathered;
        }
        for (int piece = 0; piece < g.chunks; piece++) {
            const int p0 = piece * g.chunk;
            const int len = ohw - p0 < g.chunk ? ohw - p0 : g.chunk;
            SL_CUBLAS_CHECK(s, cublasGemmStridedBatchedEx(
                                   s->cublas, CUBLAS_OP_T, CUBLAS_OP_N, d->c, d->k, len, &one,
                                   xs + p0, CUDA_R_32F, ohw, (long long)d->c * ohw, dys + p0,
                                   CUDA_R_32F, ohw, (long long)d->k * ohw, &zero,
                                   part + (size_t)piece * images * kc, CUDA_R_32F, d->c,
                                   (long long)kc, images, gemm_math(s), CUBLAS_GEMM_DEFAULT));
        }
        const int parts = images * g.chunks;
        int stride = 1;
        if (parts > kSegment) {
            const size_t segments = ((size_t)parts + kSegment - 1) / kSegment;
            sum_segments_k<<<sl_cuda_blocks(segments * kc), 256, 0, s->stream>>>(kc, parts, part);
            SL_CUDA_LAUNCHED(s);
            stride = kSegment;
        }
        add_parts_k<<<sl_cuda_blocks(kc), 256, 0, s->stream>>>(kc, parts, stride, part, dw);
        SL_CUDA_LAUNCHED(s);
    }
}

extern "C" void sl_cuda_conv2d_backward_filter(const sl_exec *ex, const sl_conv_desc *d,
                                               const void *x, const void *dy, float *dw,
                                               float *dbias, void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    const sl_conv_entry *e = lookup(s, d);
    if (!e)
        return;
    const sl_cuda_conv_plan *p = &e->plan[SLOT_BWD_FILTER];
    if (e->gemm_filter)
        gemm_filter(s, d, e->gemm, (const float *)x, (const float *)dy, dw, (float *)ws);
    else if (p->plan)
        sl_cuda_conv_plan_run(s, &e->graph, p, x, dw, dy, ws);
    else
        SL_CUDNN_CHECK(s, cudnnConvolutionBackwardFilter(s->cudnn, &kOne, e->x, x, e->y, dy,
                                                         e->conv[SL_CONV_BWD_FILTER], e->bwd_filter,
                                                         ws, e->ws[SL_CONV_BWD_FILTER], &kOne, e->w,
                                                         dw));
    if (dbias)
        SL_CUDNN_CHECK(s, cudnnConvolutionBackwardBias(s->cudnn, &kOne, e->y, dy, &kOne, e->bias,
                                                       dbias));
}
