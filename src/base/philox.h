/*
 * philox.h — Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random
 * numbers: as easy as 1, 2, 3", SC'11), the counter-based generator behind
 * every random number of the library: parameter initialisation while a
 * network is built (philox.c), and in the run stage dropout masks and
 * custom layers' uniforms on both backends (the CPU loop and the CUDA
 * kernel call this one function, through base/element.h). A draw is a pure
 * function of (key, counter), which is what lets a re-forward reproduce a
 * mask from a saved counter, and the CPU and GPU draw identical masks.
 *
 * Read by C11 and by nvcc: SL_HD makes a function callable from host and
 * device code under nvcc and is empty in C.
 */
#ifndef SL_PHILOX_H
#define SL_PHILOX_H

#include <stdint.h>

#ifndef SL_HD
#ifdef __CUDACC__
#define SL_HD __host__ __device__
#else
#define SL_HD
#endif
#endif

#define SL_PHILOX_M0 0xD2511F53u
#define SL_PHILOX_M1 0xCD9E8D57u
#define SL_PHILOX_W0 0x9E3779B9u
#define SL_PHILOX_W1 0xBB67AE85u

/* One round: two 32 x 32 -> 64-bit products mixed with the key. */
SL_HD static inline void sl_philox_round(uint32_t c[4], const uint32_t k[2])
{
    uint64_t p0 = (uint64_t)SL_PHILOX_M0 * c[0];
    uint64_t p1 = (uint64_t)SL_PHILOX_M1 * c[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c[1] ^ k[0];
    uint32_t n1 = lo1;
    uint32_t n2 = hi0 ^ c[3] ^ k[1];
    uint32_t n3 = lo0;
    c[0] = n0;
    c[1] = n1;
    c[2] = n2;
    c[3] = n3;
}

/* The four words of counter block ctr under key. */
SL_HD static inline void sl_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                                          uint32_t out[4])
{
    uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
    uint32_t k[2] = {key[0], key[1]};
    for (int r = 0; r < 10; r++) {
        sl_philox_round(c, k);
        if (r < 9) {
            k[0] += SL_PHILOX_W0;
            k[1] += SL_PHILOX_W1;
        }
    }
    out[0] = c[0];
    out[1] = c[1];
    out[2] = c[2];
    out[3] = c[3];
}

/* Standard normal and uniform draws for initialisation (philox.c, host
 * only): element i of a stream (seed, stream) is a pure function of those
 * three numbers. */
#ifdef __cplusplus
extern "C" {
#endif
float sl_random_normal(uint64_t seed, uint64_t stream, uint64_t i);
float sl_random_uniform(uint64_t seed, uint64_t stream, uint64_t i); /* [0,1) */
#ifdef __cplusplus
}
#endif

#endif
