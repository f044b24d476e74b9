/*
 * philox.c — the host's streams of random numbers (parameter
 * initialisation while a network is built): uniforms and normals as pure
 * functions of (seed, stream, index), from Philox4x32-10 (base/philox.h,
 * the generator dropout uses on both backends; base stage).
 */
#include <math.h>

#include "base/philox.h"

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
