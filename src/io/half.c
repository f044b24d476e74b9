/*
 * half.c — conversions between F32 and the 16-bit float types of
 * safetensors files (io stage). F16 and BF16 widen to F32 exactly (every
 * value of either is a float: F16's exponent range and BF16's 8-bit
 * significand both fit F32's). Narrowing rounds to nearest, ties to even
 * (IEEE 754's default), keeps NaN a quiet NaN of the same sign, and sends
 * values beyond the type's range to infinity, which the saver refuses.
 */
#include <string.h>

#include "base/element.h"
#include "io/safetensors.h"

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float sl_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    if (exp == 0x1F) /* infinity or NaN, payload kept */
        return float_of(sign | 0x7F800000u | (man << 13));
    if (exp != 0)
        return float_of(sign | ((exp + 112) << 23) | (man << 13));
    if (man == 0)
        return float_of(sign);
    /* Subnormal: man * 2^-24; normalise into F32's normal range. */
    int e = 113;
    while (!(man & 0x400)) {
        man <<= 1;
        e--;
    }
    return float_of(sign | ((uint32_t)e << 23) | ((man & 0x3FF) << 13));
}

/* BF16: base/element.h's rule, the one the backends' casts use. */
float sl_bf16_to_f32(uint16_t b) { return sl_bf16_widen(b); }

/* q plus one when the dropped bits rem (of `shift` bits) round it up. */
static uint32_t round_even(uint32_t q, uint32_t rem, int shift)
{
    uint32_t half = 1u << (shift - 1);
    return rem > half || (rem == half && (q & 1)) ? q + 1 : q;
}

uint16_t sl_f32_to_f16(float f)
{
    uint32_t x = bits_of(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) /* NaN: quiet, top payload bits kept */
        return (uint16_t)(sign | 0x7E00 | ((ax >> 13) & 0x3FF));
    if (ax >= 0x47800000u) /* 2^16 and above, infinity included */
        return (uint16_t)(sign | 0x7C00);
    if (ax < 0x38800000u) { /* below 2^-14: F16 subnormals */
        if (ax <= 0x33000000u) /* at most 2^-25: the tie goes to even zero */
            return sign;
        uint32_t m = (ax & 0x7FFFFF) | 0x800000;
        int shift = 126 - (int)(ax >> 23); /* value * 2^24 = m >> shift */
        return (uint16_t)(sign | round_even(m >> shift, m & ((1u << shift) - 1), shift));
    }
    uint32_t r = ax - 0x38000000u; /* exponent rebiased from 127 to 15 */
    /* A carry out of the significand bumps the exponent, up to infinity. */
    return (uint16_t)(sign | round_even(r >> 13, r & 0x1FFF, 13));
}

uint16_t sl_f32_to_bf16(float f) { return sl_bf16_round(f); }
