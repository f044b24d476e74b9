/*
 * cuda_gemm.cu — GEMM with cuBLAS (run stage on a GPU), on the backend
 * instance's handle and stream, in the instance's math mode (set on the
 * handle when the instance is made): pedantic FP32 by default, TF32 tensor
 * cores when the context asks for them (sl_context_options.tf32, --tf32).
 */
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
