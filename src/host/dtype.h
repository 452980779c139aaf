/*
 * dtype.h - conversions between f32 and the 16-bit storage types, done in
 * software so every backend's host side and the reference round the same way
 * (round to nearest even; NaN stays NaN; overflow goes to infinity).
 */
#ifndef XFA_DTYPE_H
#define XFA_DTYPE_H

#include "xfa.h"

#include <string.h>

static inline uint32_t xfa_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float xfa_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float xfa_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) return xfa_bits_f32(sign | 0x7f800000u | (man << 13)); /* inf / nan */
    if (exp != 0) return xfa_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
    if (man == 0) return xfa_bits_f32(sign);
    /* subnormal: man * 2^-24 is exact in f32 */
    const float v = (float)man * (1.0f / 16777216.0f);
    return sign ? -v : v;
}

static inline uint16_t xfa_f32_to_f16(float f)
{
    const uint32_t u = xfa_f32_bits(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t abs = u & 0x7fffffffu;
    if (abs >= 0x7f800000u) /* inf or nan: keep nan quiet and nonzero */
        return (uint16_t)(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
    if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (abs < 0x38800000u) { /* below the smallest normal 2^-14: subnormal or zero */
        const float a = xfa_bits_f32(abs);
        /* a * 2^24 rounded to nearest even gives the subnormal mantissa (may carry into the normal range). */
        const float scaled = a * 16777216.0f;
        uint32_t m = (uint32_t)scaled;
        const float rem = scaled - (float)m;
        if (rem > 0.5f || (rem == 0.5f && (m & 1u))) m++;
        return (uint16_t)(sign | m);
    }
    /* normal: rebias the exponent, round 13 dropped bits to nearest even */
    uint32_t v = abs - 0x38000000u; /* exponent 127 -> 15 */
    const uint32_t dropped = v & 0x1fffu;
    v >>= 13;
    if (dropped > 0x1000u || (dropped == 0x1000u && (v & 1u))) v++;
    return (uint16_t)(sign | v);
}

static inline float xfa_bf16_to_f32(uint16_t b) { return xfa_bits_f32((uint32_t)b << 16); }

static inline uint16_t xfa_f32_to_bf16(float f)
{
    const uint32_t u = xfa_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet nan */
    const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)((u + rounding) >> 16);
}

/* Element `i` of a typed array as f32. */
static inline float xfa_load_f32(const void *base, xfa_dtype dtype, int64_t i)
{
    switch (dtype) {
    case XFA_DTYPE_F16: return xfa_f16_to_f32(((const uint16_t *)base)[i]);
    case XFA_DTYPE_BF16: return xfa_bf16_to_f32(((const uint16_t *)base)[i]);
    default: return ((const float *)base)[i];
    }
}

/* Stores f32 `x` as element `i`, rounding to the dtype. */
static inline void xfa_store_f32(void *base, xfa_dtype dtype, int64_t i, float x)
{
    switch (dtype) {
    case XFA_DTYPE_F16: ((uint16_t *)base)[i] = xfa_f32_to_f16(x); break;
    case XFA_DTYPE_BF16: ((uint16_t *)base)[i] = xfa_f32_to_bf16(x); break;
    default: ((float *)base)[i] = x; break;
    }
}

/* x rounded to the dtype's precision and back. */
static inline float xfa_round_to(xfa_dtype dtype, float x)
{
    switch (dtype) {
    case XFA_DTYPE_F16: return xfa_f16_to_f32(xfa_f32_to_f16(x));
    case XFA_DTYPE_BF16: return xfa_bf16_to_f32(xfa_f32_to_bf16(x));
    default: return x;
    }
}

#endif /* XFA_DTYPE_H */
