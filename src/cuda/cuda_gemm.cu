/*
 * cuda_gemm.cu — GEMM with cuBLAS (run stage on a GPU), on the backend
 * instance's handle and stream, in the instance's math mode (set on the
 * handle when the instance is made): pedantic FP32 by default, TF32 tensor
 * cores when the context asks for them (sl_context_options.tf32, --tf32).
 * gemm_bias (Linear's and Conv1D's forward) goes through cuBLASLt with the
 * bias in the epilogue, so the output is written once instead of written,
 * read and written again by bias_add (2 ms of a GPT-2 small step on an
 * H100, ncu 2026-11-27); the bias is then added to the FP32 accumulator
 * before the one rounding, not to the rounded product: within the GEMM's
 * tolerance of the CPU, not its bits.
 */
#include <mutex>
#include <new>
#include <string.h>

#include "base/base.h"
#include "cuda/cuda_common.h"

/* Row-major C[m x n] = alpha op(A) op(B) + beta C through column-major
 * cuBLAS: C^T = op(B)^T op(A)^T. */
extern "C" void sl_cuda_gemm(const sl_exec *ex, int trans_a, int trans_b, int m, int n, int k,
                             float alpha, const float *a, int lda, const float *b, int ldb,
                             float beta, float *c, int ldc)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    SL_CUBLAS_CHECK(s, cublasSgemm(s->cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a, lda,
                                &beta, c, ldc));
}

/* ---- cuBLASLt: gemm_bias (the bias in the epilogue) and gemm_bf16 ---- */

/* The largest power of two (at most 16) dividing a pointer: cuBLASLt's
 * heuristics must only offer algorithms the buffers' alignment allows
 * (its default assumes 256 bytes); 16 is all its kernels ask, and capping
 * there keeps one plan (one algorithm, the same bits) for a shape whose
 * tensors the planner puts at different multiples of 64. */
enum { kLtAlign = 16 };
static uint32_t align_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uint32_t al = kLtAlign;
    while (al > 1 && a % al)
        al >>= 1;
    return al;
}

/* A product for cuBLASLt: row-major c[m x n] = op(a) op(b) (+ bias) (+ c
 * when accumulating), a and b of one type, c of another, and the buffers'
 * alignments (bytes) the algorithm must allow. */
struct lt_geom {
    int ta, tb, m, n, k, lda, ldb, ldc;
    int ab_bf16, c_bf16, bias, accumulate;
    int align[4]; /* a, b, c, bias */
};

/* One geometry's descriptors and algorithm. ok 0: cuBLASLt offered none. */
struct lt_plan {
    lt_geom g;
    int ok;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
};

/* Plans by geometry, made at a geometry's first ask and kept for the
 * instance's life, so every later call of a shape runs the same
 * algorithm: the same bits, a re-forward its forward's. The lock guards
 * the table and the bias pointer set on a plan's descriptor for the length
 * of one call (two networks of a context may run from two threads). */
enum { kLtPlans = 96 };
struct sl_cuda_lt_cache {
    std::mutex lock;
    int n;
    lt_plan plan[kLtPlans];
};

static void plan_release(lt_plan *p)
{
    if (p->op)
        cublasLtMatmulDescDestroy(p->op);
    if (p->la)
        cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb)
        cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc)
        cublasLtMatrixLayoutDestroy(p->lc);
    p->op = NULL;
    p->la = p->lb = p->lc = NULL;
}

extern "C" struct sl_cuda_lt_cache *sl_cuda_lt_cache_new(void)
{
    return new (std::nothrow) sl_cuda_lt_cache();
}

extern "C" void sl_cuda_lt_cache_free(struct sl_cuda_lt_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++)
        plan_release(&c->plan[i]);
    delete c;
}

/* A plan for the row-major product as the column-major C^T = op(B)^T
 * op(A)^T: cuBLASLt's A is our b, its B our a; the bias a column of C^T's
 * n rows (the BIAS epilogue adds bias[i] to row i of D), in float; the
 * instance's workspace (sl_cuda_state.lt_ws). bf16 operands compute in
 * float on the tensor cores; float ones in the instance's math (TF32 when
 * allowed, else pedantic FP32). */
static void plan_make(sl_cuda_state *s, lt_plan *p)
{
    const lt_geom &g = p->g;
    p->ok = 0;
    cublasComputeType_t ct = g.ab_bf16 ? CUBLAS_COMPUTE_32F
                             : s->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                       : CUBLAS_COMPUTE_32F_PEDANTIC;
    cudaDataType_t ab = g.ab_bf16 ? CUDA_R_16BF : CUDA_R_32F, ct_c = g.c_bf16 ? CUDA_R_16BF : CUDA_R_32F;
    /* the bias is D's type (cublasLt.h: outside int8 and fp8 kernels it
     * must be); the heuristics read the bias pointer for its alignment
     * only, so they get one with the alignment the calls will have */
    const void *bias_at = (const void *)(uintptr_t)kLtAlign;
    cublasOperation_t opa = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epi = g.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    if (cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) !=
            CUBLAS_STATUS_SUCCESS ||
        (g.bias && cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                  &ct_c, sizeof ct_c) != CUBLAS_STATUS_SUCCESS) ||
        (g.bias && cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                  &bias_at, sizeof bias_at) !=
                       CUBLAS_STATUS_SUCCESS) ||
        cublasLtMatrixLayoutCreate(&p->la, ab, g.tb ? g.k : g.n, g.tb ? g.n : g.k, g.ldb) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&p->lb, ab, g.ta ? g.m : g.k, g.ta ? g.k : g.m, g.lda) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&p->lc, ct_c, g.n, g.m, g.ldc) != CUBLAS_STATUS_SUCCESS)
        return;
    cublasLtMatmulPreference_t pref = NULL;
    if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS)
        return;
    size_t ws = s->lt_ws_bytes;
    uint32_t al_a = (uint32_t)g.align[1], al_b = (uint32_t)g.align[0], al_c = (uint32_t)g.align[2];
    int got = 0;
    cublasLtMatmulHeuristicResult_t res;
    if (cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                             sizeof ws) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                             &al_a, sizeof al_a) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                             &al_b, sizeof al_b) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                             &al_c, sizeof al_c) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                             &al_c, sizeof al_c) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoGetHeuristic(s->cublaslt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1,
                                       &res, &got) == CUBLAS_STATUS_SUCCESS &&
        got > 0 && res.state == CUBLAS_STATUS_SUCCESS) {
        p->algo = res.algo;
        p->ok = 1;
    }
    cublasLtMatmulPreferenceDestroy(pref);
}

/* The plan of geometry g, made at its first ask; NULL when the cache is
 * full. Called with the cache locked. */
static lt_plan *plan_of(sl_cuda_state *s, const lt_geom &g)
{
    sl_cuda_lt_cache *lc = s->lt_cache;
    for (int i = 0; i < lc->n; i++)
        if (memcmp(&lc->plan[i].g, &g, sizeof g) == 0)
            return &lc->plan[i];
    if (lc->n == kLtPlans)
        return NULL;
    lt_plan *p = &lc->plan[lc->n];
    memset(p, 0, sizeof *p);
    p->g = g;
    plan_make(s, p);
    if (!p->ok)
        plan_release(p); /* kept as "none": the same answer every time */
    lc->n++;
    return p;
}

/* Runs g's plan on the instance's stream; 0 (nothing written) where
 * cuBLASLt has no algorithm for it or refused the call. */
static int lt_run(sl_cuda_state *s, const lt_geom &g, const void *a, const void *b,
                  const float *bias, void *c)
{
    std::lock_guard<std::mutex> hold(s->lt_cache->lock);
    lt_plan *p = plan_of(s, g);
    if (!p || !p->ok)
        return 0;
    const float one = 1.0f, zero = 0.0f;
    if (g.bias && cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                 sizeof bias) != CUBLAS_STATUS_SUCCESS)
        return 0;
    return cublasLtMatmul(s->cublaslt, p->op, &one, b, p->la, a, p->lb,
                          g.accumulate ? &one : &zero, c, p->lc, c, p->lc, &p->algo, s->lt_ws,
                          s->lt_ws_bytes, s->stream) == CUBLAS_STATUS_SUCCESS;
}

extern "C" void sl_cuda_gemm_bias(const sl_exec *ex, int trans_a, int trans_b, int m, int n,
                                  int k, const float *a, int lda, const float *b, int ldb,
                                  const float *bias, float *c, int ldc)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    if (m <= 0 || n <= 0)
        return;
    lt_geom g = {trans_a, trans_b, m, n, k, lda, ldb, ldc, 0, 0, 1, 0,
                 {(int)align_of(a), (int)align_of(b), (int)align_of(c), kLtAlign}};
    /* a bias on less than 16 bytes (the epilogue may load it in vectors)
     * takes the two calls */
    if (align_of(bias) == kLtAlign && lt_run(s, g, a, b, bias, c))
        return;
    /* no cuBLASLt algorithm for this geometry: the two calls it replaces
     * (c's rows are n floats apart: gemm_bias's contract) */
    sl_cuda_gemm(ex, trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    sl_cuda_bias_add(ex, m, n, bias, c);
}

/* gemm_bf16 (the CUDA backend's SL_BF16_GEMM): cuBLASLt on bf16 operands,
 * float accumulation, the bias in the epilogue, accumulation as beta = 1
 * (c widened, added in float, rounded once). Planned tensors start on 64
 * bytes; the plans assume 16 and a call on less is refused at the next
 * sync. The epilogue's bias is D's type: with a bf16 c, the float bias is
 * rounded to bf16 into the workspace first (its only use). */
static lt_geom bf16_geom(const sl_gemm_bf16_desc *d)
{
    lt_geom g = {d->trans_a, d->trans_b, d->m, d->n, d->k, d->lda, d->ldb, d->ldc,
                 1, d->c_bf16, d->has_bias, d->accumulate,
                 {kLtAlign, kLtAlign, kLtAlign, d->has_bias ? kLtAlign : 0}};
    return g;
}

static size_t bf16_bias_bytes(const sl_gemm_bf16_desc *d)
{
    return d->has_bias && d->c_bf16 ? sl_align_up((size_t)d->n * sizeof(uint16_t)) : 0;
}

extern "C" size_t sl_cuda_gemm_bf16_workspace_bytes(const sl_backend *be,
                                                     const sl_gemm_bf16_desc *d)
{
    sl_cuda_state *s = sl_cuda_of(be);
    lt_geom g = bf16_geom(d);
    std::lock_guard<std::mutex> hold(s->lt_cache->lock);
    lt_plan *p = plan_of(s, g);
    if (!p || !p->ok) {
        sl_set_error(SL_ERR_UNSUPPORTED, "cuBLASLt has no bf16 GEMM for %d x %d x %d", d->m, d->n,
                     d->k);
        return SIZE_MAX;
    }
    return bf16_bias_bytes(d);
}

extern "C" void sl_cuda_gemm_bf16(const sl_exec *ex, const sl_gemm_bf16_desc *d, const void *a,
                                  const void *b, const float *bias, void *c, void *ws)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    if (d->m <= 0 || d->n <= 0)
        return;
    const void *epi_bias = bias;
    if (bf16_bias_bytes(d)) {
        sl_cuda_cast(ex, (size_t)d->n, bias, SL_DTYPE_F32, ws, SL_DTYPE_BF16);
        epi_bias = ws;
    }
    if (align_of(a) < kLtAlign || align_of(b) < kLtAlign || align_of(c) < kLtAlign ||
        (d->has_bias && align_of(epi_bias) < kLtAlign)) {
        sl_cuda_record(s, __FILE__, __LINE__, "gemm_bf16",
                       "a bf16 GEMM's tensors must start on 16 bytes");
        return;
    }
    if (!lt_run(s, bf16_geom(d), a, b, (const float *)epi_bias, c))
        sl_cuda_record(s, __FILE__, __LINE__, "gemm_bf16",
                       "cuBLASLt has no bf16 GEMM for this geometry, or refused the call");
}
