/*
 * cpu_gemm.c — GEMM for the CPU backend (run stage): single-threaded
 * sgemm calls (OpenBLAS's, or oneDNN's on AVX-512 machines: cpu_onednn.c
 * chooses once per process) split into tiles over the OpenMP team of a
 * kernel.
 *
 * Why tiles instead of OpenBLAS's own threads: the other kernels run on an
 * OpenMP team, and a libgomp team spins for milliseconds after each
 * parallel region. Alternating OpenMP loops with a pthread-threaded sgemm
 * makes the two pools fight for the cores (measured: convolution twice as
 * slow). With OpenBLAS at one thread (sl_cpu_set_blas_threads(1)) every
 * kernel runs on the one OpenMP team, and each thread calls a
 * single-threaded sgemm on its own tile of C. When OpenBLAS is itself
 * threaded (pthreads build, more than one thread) the GEMMs are issued whole
 * from one thread instead, and OpenBLAS spreads them.
 *
 * Determinism: a tile covers whole rows of K, so every element of C is one
 * single-threaded dot product over K in OpenBLAS's fixed blocking; the tiles
 * depend only on the shape and the team size.
 */
#include <cblas.h>
#include <omp.h>

#include "cpu/cpu.h"

void openblas_set_num_threads(int);
int openblas_get_num_threads(void);
int openblas_get_parallel(void);

void sl_cpu_set_blas_threads(int n)
{
    openblas_set_num_threads(n > 0 ? n : 1);
}

int sl_cpu_gemm_tiled(const sl_exec *ex)
{
    if (cpu_threads(ex) <= 1)
        return 0;
    /* An OpenMP OpenBLAS runs single-threaded inside a parallel region. */
    return openblas_get_num_threads() <= 1 || openblas_get_parallel() == 2;
}

/* One single-threaded GEMM on the calling thread: oneDNN's sgemm or
 * OpenBLAS's, as cpu_onednn.c chose for the process. */
static void cpu_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                      int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
#ifdef SL_HAVE_ONEDNN
    if (sl_cpu_gemm_onednn()) {
        sl_cpu_sgemm_onednn(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
#endif
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* Tile sides are rounded to the register blocking of sgemm kernels. */
#define TILE_ALIGN_M 8
#define TILE_ALIGN_N 16

static int tile_chunk(int size, int parts, int align)
{
    int c = (size + parts - 1) / parts;
    c = (c + align - 1) / align * align;
    return c > size ? size : c;
}

/* Chooses tm x tn <= threads tiles minimising the largest tile's work: its
 * multiply-adds plus the packing of its slices of A and B (each element
 * packed costs about as much as 8 multiply-adds per K). */
sl_cpu_tiling sl_cpu_gemm_tiling(int threads, int m, int n)
{
    sl_cpu_tiling best = {1, 1};
    double best_cost = -1.0;
    if (threads < 1)
        threads = 1;
    for (int tm = 1; tm <= threads; tm++) {
        int tn = threads / tm;
        int rm = tile_chunk(m, tm, TILE_ALIGN_M), rn = tile_chunk(n, tn, TILE_ALIGN_N);
        double cost = (double)rm * rn + 8.0 * (rm + rn);
        if (best_cost < 0.0 || cost < best_cost) {
            best_cost = cost;
            best.tm = tm;
            best.tn = tn;
        }
    }
    return best;
}

void sl_cpu_gemm_part(const sl_cpu_tiling *t, int part, int trans_a, int trans_b, int m, int n,
                      int k, float alpha, const float *a, int lda, const float *b, int ldb,
                      float beta, float *c, int ldc)
{
    if (part >= t->tm * t->tn)
        return;
    int cm = tile_chunk(m, t->tm, TILE_ALIGN_M), cn = tile_chunk(n, t->tn, TILE_ALIGN_N);
    int m0 = (part / t->tn) * cm, n0 = (part % t->tn) * cn;
    if (m0 >= m || n0 >= n)
        return;
    int mm = m - m0 < cm ? m - m0 : cm, nn = n - n0 < cn ? n - n0 : cn;
    const float *as = trans_a ? a + m0 : a + (size_t)m0 * lda;
    const float *bs = trans_b ? b + (size_t)n0 * ldb : b + n0;
    cpu_sgemm(trans_a, trans_b, mm, nn, k, alpha, as, lda, bs, ldb, beta,
              c + (size_t)m0 * ldc + n0, ldc);
}

/* Below this many multiply-adds a GEMM runs on the calling thread. */
#define GEMM_PAR_MIN_FLOPS 262144.0

void sl_cpu_gemm(const sl_exec *ex, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    if (!sl_cpu_gemm_tiled(ex) || (double)m * n * k < GEMM_PAR_MIN_FLOPS) {
        if (!sl_cpu_gemm_tiled(ex) && cpu_threads(ex) > 1) {
            /* a threaded OpenBLAS spreads this GEMM over its own threads */
            cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                        trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta,
                        c, ldc);
            return;
        }
        cpu_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
#pragma omp parallel num_threads(cpu_threads(ex))
    {
        sl_cpu_tiling t = sl_cpu_gemm_tiling(omp_get_num_threads(), m, n);
        sl_cpu_gemm_part(&t, omp_get_thread_num(), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                         beta, c, ldc);
    }
}
