/*
 * merge.comp - combines partial attention results by their log-sum-exp:
 * LSE = log sum_p exp(LSE_p), O = sum_p exp(LSE_p - LSE) O_p, parts with
 * LSE_p = -inf (they saw no key) contributing nothing; if all are, O = 0 and
 * LSE = -inf (cpu_decode.c's xfa_cpu_merge_row).
 *
 * One invocation per output element (row, x), rows being (b, s, h). The n
 * parts lie in one binding, `part_stride` elements apart (decode's split
 * scratch, or one caller tensor per dispatch); an optional previous result
 * (f32, with its LSE) is one more part, which is how xfa_merge_partials
 * folds any number of separately stored parts in, one dispatch each.
 */
#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_GOOGLE_include_directive : require

layout(constant_id = 0) const uint PART_DTYPE = 0; /* 0 f32, 1 f16, 2 bf16 */
layout(constant_id = 1) const uint OUT_DTYPE = 0;
layout(constant_id = 2) const bool HAS_PREV = false;
layout(constant_id = 3) const bool HAS_LSE = false;
layout(local_size_x = 64) in;

/* Mirrors vk_merge_args in vulkan_decode.c. */
layout(binding = 5, std430) readonly buffer Extra {
    uint n, part_stride, part_lse_stride;
    uint p_base, p_sb, p_ss, p_sh, p_sd;
    uint pl_base, pl_sb, pl_ss, pl_sh;
    uint prev_base, prev_lse_base; /* compact: row * D + x, row */
    uint o_base, o_sb, o_ss, o_sh, o_sd;
    uint lse_base, lse_sb, lse_ss, lse_sh;
    uint batch, seqlen, heads, head_dim;
    uint groups_x;
} args;

layout(binding = 0, std430) readonly buffer P32 { float p32[]; };
layout(binding = 0, std430) readonly buffer P16 { uint16_t p16[]; };
layout(binding = 1, std430) readonly buffer PL { float part_lse[]; };
layout(binding = 2, std430) readonly buffer Prev { float prev32[]; };
layout(binding = 6, std430) readonly buffer PrevL { float prev_lse[]; };
layout(binding = 3, std430) writeonly buffer O32 { float o32[]; };
layout(binding = 3, std430) writeonly buffer O16 { uint16_t o16[]; };
layout(binding = 4, std430) writeonly buffer L { float lse32[]; };

#include "xfa_common.glsl"

void main()
{
    const uint e = (gl_WorkGroupID.y * args.groups_x + gl_WorkGroupID.x) * 64 + gl_LocalInvocationID.x;
    const uint D = args.head_dim, H = args.heads, S = args.seqlen;
    if (e >= args.batch * S * H * D) return;
    const uint x = e % D, rw = e / D, h = rw % H, s = (rw / H) % S, b = rw / (H * S);
    const uint p_at = args.p_base + b * args.p_sb + s * args.p_ss + h * args.p_sh + x * args.p_sd;
    const uint pl_at = args.pl_base + b * args.pl_sb + s * args.pl_ss + h * args.pl_sh;

    float lse_max = HAS_PREV ? prev_lse[args.prev_lse_base + rw] : NEG_INF;
    for (uint p = 0; p < args.n; p++) lse_max = max(lse_max, part_lse[pl_at + p * args.part_lse_stride]);
    float out_o = 0.0, merged = NEG_INF;
    if (lse_max != NEG_INF) {
        float sum = HAS_PREV ? exp(prev_lse[args.prev_lse_base + rw] - lse_max) : 0.0;
        for (uint p = 0; p < args.n; p++) sum += exp(part_lse[pl_at + p * args.part_lse_stride] - lse_max);
        merged = lse_max + log(sum);
        if (HAS_PREV) {
            const float l = prev_lse[args.prev_lse_base + rw];
            if (l != NEG_INF) out_o += exp(l - merged) * prev32[args.prev_base + rw * D + x];
        }
        for (uint p = 0; p < args.n; p++) {
            const float l = part_lse[pl_at + p * args.part_lse_stride];
            if (l == NEG_INF) continue;
            const uint at = p_at + p * args.part_stride;
            const float v = PART_DTYPE == 0 ? p32[at] : bits16_to_f32(uint(p16[at]), PART_DTYPE);
            out_o += exp(l - merged) * v;
        }
    }
    const uint o_at = args.o_base + b * args.o_sb + s * args.o_ss + h * args.o_sh + x * args.o_sd;
    if (OUT_DTYPE == 0) o32[o_at] = out_o;
    else o16[o_at] = uint16_t(f32_to_bits16(out_o, OUT_DTYPE));
    if (HAS_LSE && x == 0) lse32[args.lse_base + b * args.lse_sb + s * args.lse_ss + h * args.lse_sh] = merged;
}
