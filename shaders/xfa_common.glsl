/*
 * xfa_common.glsl - what the scalar shaders share: constants, the 16-bit
 * storage conversions (f16 by the GLSL packers, bf16 by bit shifts) and the
 * overflow-free tanh of softcap. dtype values are xfa_dtype's: 0 f32, 1 f16,
 * 2 bf16.
 */
#define NEG_INF (-1.0 / 0.0)
const float LN2 = 0.6931471805599453;
const float LOG2E = 1.4426950408889634;

/* 16-bit storage word <-> f32 for dtype 1 (f16) or 2 (bf16) */
float bits16_to_f32(uint u, uint dtype)
{
    return dtype == 2 ? uintBitsToFloat(u << 16) : unpackHalf2x16(u).x;
}

uint f32_to_bits16(float x, uint dtype)
{
    if (dtype == 2) { /* bf16: round to nearest even, keep NaN a NaN */
        const uint u = floatBitsToUint(x);
        if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
        return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    }
    return packHalf2x16(vec2(x, 0.0)) & 0xffffu;
}

/* Four consecutive 16-bit words (one 64-bit load) as f32 */
vec4 bits16x4_to_f32(uvec2 w, uint dtype)
{
    if (dtype == 2)
        return vec4(uintBitsToFloat(w.x << 16), uintBitsToFloat(w.x & 0xffff0000u), uintBitsToFloat(w.y << 16),
                    uintBitsToFloat(w.y & 0xffff0000u));
    return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
}

/* tanh from exp of a non-positive argument: never inf/inf, whatever |x| */
float tanh_safe(float x)
{
    const float e = exp(-2.0 * abs(x));
    return sign(x) * (1.0 - e) / (1.0 + e);
}
