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

/* ---- gemm_bias: the bias in cuBLASLt's epilogue ---- */

/* The largest power of two (at most 256) dividing a pointer: cuBLASLt's
 * heuristics must only offer algorithms the buffers' alignment allows
 * (its default assumes 256 bytes). */
static uint32_t align_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && a % al)
        al >>= 1;
    return al;
}

/* One geometry's descriptors and algorithm. ok 0: cuBLASLt offered none
 * (gemm then bias_add run instead). */
struct lt_plan {
    int key[12];
    int ok;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
};

/* Plans by geometry and alignment, made at a geometry's first call and
 * kept for the instance's life, so every later call of a shape runs the
 * same algorithm: the same bits, a re-forward its forward's. The lock
 * guards the table and the bias pointer set on a plan's descriptor for
 * the length of one call (two networks of a context may run from two
 * threads). */
enum { kLtPlans = 64 };
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

/* A plan for the row-major product C[m x n] = op(A) op(B) + bias as the
 * column-major C^T = op(B)^T op(A)^T, the bias a column of C^T's n rows
 * (cuBLASLt's BIAS epilogue adds bias[i] to row i of D); no workspace. */
static void plan_make(sl_cuda_state *s, lt_plan *p, int ta, int tb, int m, int n, int k, int lda,
                      int ldb, int ldc, const uint32_t al[4])
{
    p->ok = 0;
    cublasComputeType_t ct = s->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F_PEDANTIC;
    cublasOperation_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    if (cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&p->la, CUDA_R_32F, tb ? k : n, tb ? n : k, ldb) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_32F, ta ? m : k, ta ? k : m, lda) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_32F, n, m, ldc) != CUBLAS_STATUS_SUCCESS)
        return;
    cublasLtMatmulPreference_t pref = NULL;
    if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS)
        return;
    size_t ws = 0;
    /* A is our B, B our A (see above); C and D are one buffer */
    uint32_t al_a = al[1], al_b = al[0], al_c = al[2];
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

/* The plan of a call, made at its geometry's first call; NULL when the
 * cache is full (gemm and bias_add then). Called with the cache locked. */
static lt_plan *plan_of(sl_cuda_state *s, int ta, int tb, int m, int n, int k, const float *a,
                        int lda, const float *b, int ldb, const float *bias, float *c, int ldc)
{
    uint32_t al[4] = {align_of(a), align_of(b), align_of(c), align_of(bias)};
    int key[12] = {ta, tb, m, n, k, lda, ldb, ldc, (int)al[0], (int)al[1], (int)al[2],
                   (int)al[3]};
    sl_cuda_lt_cache *lc = s->lt_cache;
    for (int i = 0; i < lc->n; i++)
        if (memcmp(lc->plan[i].key, key, sizeof key) == 0)
            return &lc->plan[i];
    if (lc->n == kLtPlans)
        return NULL;
    lt_plan *p = &lc->plan[lc->n];
    memset(p, 0, sizeof *p);
    memcpy(p->key, key, sizeof key);
    plan_make(s, p, ta, tb, m, n, k, lda, ldb, ldc, al);
    if (!p->ok)
        plan_release(p); /* kept as "none": the same fallback every time */
    lc->n++;
    return p;
}

extern "C" void sl_cuda_gemm_bias(const sl_exec *ex, int trans_a, int trans_b, int m, int n,
                                  int k, const float *a, int lda, const float *b, int ldb,
                                  const float *bias, float *c, int ldc)
{
    sl_cuda_state *s = sl_cuda_ex(ex);
    if (m <= 0 || n <= 0)
        return;
    {
        std::lock_guard<std::mutex> hold(s->lt_cache->lock);
        lt_plan *p = plan_of(s, trans_a, trans_b, m, n, k, a, lda, b, ldb, bias, c, ldc);
        if (p && p->ok) {
            const float one = 1.0f, zero = 0.0f;
            SL_CUBLAS_CHECK(s, cublasLtMatmulDescSetAttribute(
                                   p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
            SL_CUBLAS_CHECK(s, cublasLtMatmul(s->cublaslt, p->op, &one, b, p->la, a, p->lb, &zero,
                                              c, p->lc, c, p->lc, &p->algo, NULL, 0, s->stream));
            return;
        }
    }
    /* no cuBLASLt algorithm for this geometry: the two calls it replaces
     * (c's rows are n floats apart: gemm_bias's contract) */
    sl_cuda_gemm(ex, trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    sl_cuda_bias_add(ex, m, n, bias, c);
}

/* ---- gemm_bf16: not on the GPU yet (bf16_kernels has no SL_BF16_GEMM,
 * so no layer asks; issue 34's cuBLAS bf16 GEMMs will answer here) ---- */

extern "C" size_t sl_cuda_gemm_bf16_workspace_bytes(const sl_backend *be,
                                                     const sl_gemm_bf16_desc *d)
{
    (void)be;
    (void)d;
    sl_set_error(SL_ERR_UNSUPPORTED, "the CUDA backend has no bf16 GEMMs yet");
    return SIZE_MAX;
}

extern "C" void sl_cuda_gemm_bf16(const sl_exec *ex, const sl_gemm_bf16_desc *d, const void *a,
                                  const void *b, const float *bias, void *c, void *ws)
{
    (void)d, (void)a, (void)b, (void)bias, (void)c, (void)ws;
    sl_cuda_record(sl_cuda_ex(ex), __FILE__, __LINE__, "gemm_bf16",
                   "the CUDA backend has no bf16 GEMMs yet");
}
