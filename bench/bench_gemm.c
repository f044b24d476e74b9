/*
 * bench_gemm.c — the CPU backend's GEMM (sl_cpu_gemm: tiles over the
 * OpenMP team) on the shapes the library's layers give it, with each
 * single-threaded engine a tile can call: OpenBLAS (as the environment
 * holds it, OPENBLAS_CORETYPE) and oneDNN's sgemm. The data behind
 * cpu_onednn.c's rule for GEMM tiles; one process, engines interleaved.
 *
 *   bench_gemm [--threads N] [--reps N] [--json]
 *
 * Shapes (M x N x K, row-major C = A B): GPT-2 small at 4 x 64 tokens
 * (Conv1D's attention projection, output projection, MLP up and down, the
 * LM head's three GEMMs on a chunk of 128 rows, attention scores of one
 * head), and ResNet-50's
 * im2col GEMMs per image at 224x224 (a 3x3 at 56x56, 28x28 and 14x14, a
 * 1x1 at 56x56). Each engine runs each shape once to warm up, then --reps
 * times; the median is kept and reported as GFLOP/s (2 M N K per GEMM).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backend.h"
#include "common.h"
#include "cpu/cpu.h"

typedef struct shape {
    const char *name;
    int m, n, k, trans_b, trans_a;
} shape;

static const shape shapes[] = {
    {"gpt2 c_attn (256x2304x768)", 256, 2304, 768, 0, 0},
    {"gpt2 c_proj (256x768x768)", 256, 768, 768, 0, 0},
    {"gpt2 c_fc (256x3072x768)", 256, 3072, 768, 0, 0},
    {"gpt2 mlp c_proj (256x768x3072)", 256, 768, 3072, 0, 0},
    {"gpt2 lm_head logits (128x50257x768)", 128, 50257, 768, 1, 0},
    {"gpt2 lm_head dh (128x768x50257)", 128, 768, 50257, 0, 0},
    {"gpt2 lm_head dW (50257x768x128, A^T)", 50257, 768, 128, 0, 1},
    {"gpt2 attention q.k (64x64x64)", 64, 64, 64, 1, 0},
    {"resnet50 3x3 56x56 (64x3136x576)", 64, 3136, 576, 0, 0},
    {"resnet50 3x3 28x28 (128x784x1152)", 128, 784, 1152, 0, 0},
    {"resnet50 3x3 14x14 (256x196x2304)", 256, 196, 2304, 0, 0},
    {"resnet50 1x1 56x56 (256x3136x64)", 256, 3136, 64, 0, 0},
    {"resnet50 1x1 14x14 (256x196x1024)", 256, 196, 1024, 0, 0},
    {"resnet50 1x1 7x7 (512x49x2048)", 512, 49, 2048, 0, 0},
};
#define N_SHAPES (int)(sizeof shapes / sizeof *shapes)

int main(int argc, char **argv)
{
    int threads = 2, reps = 7, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else {
            fprintf(stderr, "usage: bench_gemm [--threads N] [--reps N] [--json]\n");
            return 2;
        }
    }
    if (threads < 1 || reps < 1 || reps > 101) {
        fprintf(stderr, "bench_gemm: --threads must be >= 1 and --reps 1..101\n");
        return 2;
    }
    if (!sl_cpu_have_onednn()) {
        fprintf(stderr, "bench_gemm: this build has no oneDNN; nothing to compare\n");
        return 1;
    }
    sl_cpu_set_blas_threads(1);
    char kernels[256]; /* the process's own choice, before the engines are forced */
    sl_cpu_kernels_describe(kernels, sizeof kernels);
    size_t most = 0;
    for (int s = 0; s < N_SHAPES; s++) {
        size_t a = (size_t)shapes[s].m * shapes[s].k, b = (size_t)shapes[s].k * shapes[s].n,
               c = (size_t)shapes[s].m * shapes[s].n;
        if (a + b + c > most)
            most = a + b + c;
    }
    float *buf = malloc(most * sizeof(float));
    if (!buf)
        return 1;
    for (size_t i = 0; i < most; i++)
        buf[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    sl_backend *be;
    if (sl_cpu_backend_create(threads, &be) != SL_OK)
        return 1;
    sl_exec ex = {be, threads, 0, NULL};
    double gflops[N_SHAPES][2];
    bench_load load;
    bench_load_start(&load);
    for (int s = 0; s < N_SHAPES; s++) {
        const shape *q = &shapes[s];
        float *a = buf, *b = a + (size_t)q->m * q->k, *c = b + (size_t)q->k * q->n;
        double times[2][101];
        for (int r = -1; r < reps; r++)
            for (int e = 0; e < 2; e++) { /* interleaved: OpenBLAS, oneDNN */
                sl_cpu_kernels_force(e, 0);
                double t0 = bench_now_s();
                be->gemm(&ex, q->trans_a, q->trans_b, q->m, q->n, q->k, 1.0f, a,
                         q->trans_a ? q->m : q->k, b, q->trans_b ? q->k : q->n, 0.0f, c, q->n);
                if (r >= 0)
                    times[e][r] = bench_now_s() - t0;
            }
        for (int e = 0; e < 2; e++)
            gflops[s][e] = 2e-9 * q->m * (double)q->n * q->k / bench_median(times[e], reps);
    }
    double foreign = bench_load_foreign_pct(&load);
    if (json) {
        printf("{\"threads\":%d,\"reps\":%d,\"cpu_kernels_default\":\"%s\",", threads, reps,
               kernels);
        printf("\"foreign_cpu_pct\":%.1f,\"shapes\":[", foreign);
        for (int s = 0; s < N_SHAPES; s++)
            printf("%s{\"name\":\"%s\",\"openblas_gflops\":%.1f,\"onednn_gflops\":%.1f}",
                   s ? "," : "", shapes[s].name, gflops[s][0], gflops[s][1]);
        printf("]}\n");
    } else {
        printf("CPU GEMM tiles, %d threads, median of %d; by default: %s\n", threads, reps,
               kernels);
        printf("%-38s %12s %12s %8s\n", "shape", "OpenBLAS GF", "oneDNN GF", "ratio");
        for (int s = 0; s < N_SHAPES; s++)
            printf("%-38s %12.1f %12.1f %8.2f\n", shapes[s].name, gflops[s][0], gflops[s][1],
                   gflops[s][1] / gflops[s][0]);
        if (foreign >= 0.0)
            printf("other processes used %.1f%% of the cores meanwhile\n", foreign);
    }
    sl_backend_destroy(be);
    free(buf);
    return 0;
}
