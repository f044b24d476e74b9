/*
 * philox.c — Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random
 * numbers: as easy as 1, 2, 3", SC'11), the counter-based generator cuRAND
 * also offers (base stage). A draw is a pure function of (key, counter),
 * which is what lets a re-forward reproduce a dropout mask from a saved
 * counter, and the CPU and GPU backends draw identical masks.
 */
#include <math.h>

#include "base/base.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static inline void philox_round(uint32_t c[4], const uint32_t k[2])
{
    uint64_t p0 = (uint64_t)PHILOX_M0 * c[0];
    uint64_t p1 = (uint64_t)PHILOX_M1 * c[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c[1] ^ k[0];
    uint32_t n1 = lo1;
    uint32_t n2 = hi0 ^ c[3] ^ k[1];
    uint32_t n3 = lo0;
    c[0] = n0; c[1] = n1; c[2] = n2; c[3] = n3;
}

void sl_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
    uint32_t k[2] = {key[0], key[1]};
    for (int r = 0; r < 10; r++) {
        philox_round(c, k);
        if (r < 9) {
            k[0] += PHILOX_W0;
            k[1] += PHILOX_W1;
        }
    }
    out[0] = c[0]; out[1] = c[1]; out[2] = c[2]; out[3] = c[3];
}

/* Two words for element i of a stream: block i/2, words 2(i%2), 2(i%2)+1. */
static void stream_words(uint64_t seed, uint64_t stream, uint64_t i, uint32_t w[2])
{
    uint64_t block = i / 2;
    uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), (uint32_t)stream,
                       (uint32_t)(stream >> 32) ^ 0x5EED0000u};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t out[4];
    sl_philox4x32_10(ctr, key, out);
    int j = (int)(i % 2) * 2;
    w[0] = out[j];
    w[1] = out[j + 1];
}

float sl_random_uniform(uint64_t seed, uint64_t stream, uint64_t i)
{
    uint32_t w[2];
    stream_words(seed, stream, i, w);
    return (float)((w[0] >> 8) * (1.0 / 16777216.0));
}

float sl_random_normal(uint64_t seed, uint64_t stream, uint64_t i)
{
    uint32_t w[2];
    stream_words(seed, stream, i, w);
    /* Box-Muller on two 32-bit uniforms in (0, 1]. */
    double u1 = ((double)w[0] + 1.0) / 4294967296.0;
    double u2 = (double)w[1] / 4294967296.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
