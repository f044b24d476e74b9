/*
 * cpu_dropout.c — dropout on the CPU (run stage). The mask is a pure
 * function of (seed, counter): element i uses Philox4x32-10 block
 * counter + i / 4, word i % 4, and is kept iff that word >= p * 2^32. The
 * backward regenerates the same mask, so nothing is stored, and a
 * re-forward of a checkpointed segment draws the same mask as the CUDA
 * backend does.
 */
#include "core/core.h"
#include "cpu/cpu.h"

typedef struct dropout_mask {
    uint32_t key[2];
    uint32_t threshold;
    float scale;
    int drop_all;
} dropout_mask;

static dropout_mask dropout_mask_of(float p, uint64_t seed)
{
    dropout_mask m;
    double t = (double)p * 4294967296.0;
    m.key[0] = (uint32_t)seed;
    m.key[1] = (uint32_t)(seed >> 32);
    m.threshold = t <= 0.0 ? 0u : t >= 4294967295.0 ? 4294967295u : (uint32_t)t;
    m.drop_all = p >= 1.0f;
    m.scale = m.drop_all ? 0.0f : 1.0f / (1.0f - p);
    return m;
}

/* The four random words of block `b` past `counter`. */
static void dropout_words(const dropout_mask *m, uint64_t counter, size_t b, uint32_t out[4])
{
    uint64_t c = counter + (uint64_t)b;
    uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0u, 0u};
    sl_philox4x32_10(ctr, m->key, out);
}

/* x and y may alias: each element is read once, then written. */
void cpu_dropout_forward(const sl_exec *ex, size_t count, const float *x, float *y, float p,
                         uint64_t seed, uint64_t counter)
{
    dropout_mask m = dropout_mask_of(p, seed);
    long long blocks = (long long)((count + 3) / 4);
#pragma omp parallel for num_threads(cpu_threads(ex)) schedule(static) if (count >= CPU_PAR_MIN / 4)
    for (long long b = 0; b < blocks; b++) {
        uint32_t r[4];
        dropout_words(&m, counter, (size_t)b, r);
        size_t i0 = (size_t)b * 4;
        for (size_t u = 0; u < 4 && i0 + u < count; u++) {
            int keep = !m.drop_all && r[u] >= m.threshold;
            y[i0 + u] = keep ? x[i0 + u] * m.scale : 0.0f;
        }
    }
}

/* dx (+)= keep ? dy * scale : 0; dx and dy may alias. */
void cpu_dropout_backward(const sl_exec *ex, size_t count, const float *dy, float *dx, float p,
                          uint64_t seed, uint64_t counter, int accumulate)
{
    dropout_mask m = dropout_mask_of(p, seed);
    long long blocks = (long long)((count + 3) / 4);
#pragma omp parallel for num_threads(cpu_threads(ex)) schedule(static) if (count >= CPU_PAR_MIN / 4)
    for (long long b = 0; b < blocks; b++) {
        uint32_t r[4];
        dropout_words(&m, counter, (size_t)b, r);
        size_t i0 = (size_t)b * 4;
        for (size_t u = 0; u < 4 && i0 + u < count; u++) {
            int keep = !m.drop_all && r[u] >= m.threshold;
            float g = keep ? dy[i0 + u] * m.scale : 0.0f;
            if (accumulate)
                dx[i0 + u] += g;
            else
                dx[i0 + u] = g;
        }
    }
}
