/*
 * flash_forward.comp - the scalar Vulkan path: FlashAttention-2 forward, one
 * work-group per (query block of Br rows, query head, batch).
 *
 * T consecutive invocations of one subgroup share a query row ("row group"):
 * each computes the scores of columns t, t+T, ... of the K/V block and owns
 * the vec4 columns t, t+T, ... of the row's output accumulator acc. Row max
 * and row sum are reduced across the row group with subgroup shuffles.
 * Q (scaled by scale*log2(e), so exponentials are exp2), the K and V blocks
 * and the P tile live in shared memory as f32; this is the footprint the host
 * describes in its xfa_tile_layout (vulkan_plan.c): Br x (D+PAD) + 2 x Bc x
 * (D+PAD) + Br x Bc floats.
 *
 * Everything that shapes the code is a specialization constant, so one
 * SPIR-V module serves every plan, dtype and feature combination; everything
 * that only addresses memory (element offsets, strides, lengths) arrives as
 * push constants. Storage is f32, f16 or bf16 (16-bit values through 16-bit
 * storage, converted by bit manipulation), compute is f32.
 *
 * The features beyond causal (window, softcap, ALiBi, bias, packed variable
 * lengths) are switched on by specialization constants, so a call without
 * them runs the code above unchanged; their values do not fit the 128 bytes
 * of push constants every device offers, so they come in a small `Extra`
 * block the host writes into the command buffer (vkCmdUpdateBuffer).
 * Visibility follows xfa_key_visible() (internal.h): row i sees key j when
 * i + Sk - Sq - window_left <= j <= i + Sk - Sq + window_right.
 */
#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require

layout(constant_id = 0) const uint D = 64;        /* head dim, multiple of 4 * T */
layout(constant_id = 1) const uint Br = 16;       /* query rows per work-group */
layout(constant_id = 2) const uint Bc = 16;       /* key rows per K/V block */
layout(constant_id = 3) const uint T = 8;         /* invocations per query row; power of two <= subgroup size */
layout(constant_id = 4) const uint DTYPE = 0;     /* 0 f32, 1 f16, 2 bf16 (xfa_dtype) */
layout(constant_id = 5) const bool CAUSAL = false;
layout(constant_id = 6) const bool HAS_LSE = false;
layout(constant_id = 7) const uint PAD = 4;       /* floats added to each shared row; multiple of 4 */
layout(local_size_x_id = 8) in;                   /* = Br * T, set by the host */
layout(constant_id = 9) const bool WINDOW = false;   /* window_left/right from Extra (CAUSAL is then unused) */
layout(constant_id = 10) const bool SOFTCAP = false;
layout(constant_id = 11) const bool ALIBI = false;
layout(constant_id = 12) const uint BIAS = 0;        /* 0 none, 1 f32, 2 the 16-bit DTYPE */
layout(constant_id = 13) const bool VARLEN = false;  /* packed sequences: z is the sequence */
layout(constant_id = 14) const bool VEC4 = false;    /* q, k, v: unit d stride, rows 4-element aligned */

/* Element offsets and strides (in elements of each tensor's dtype). */
layout(push_constant) uniform Args {
    uint q_base, k_base, v_base, o_base, lse_base;
    uint q_sb, q_ss, q_sh, q_sd;
    uint k_sb, k_ss, k_sh, k_sd;
    uint v_sb, v_ss, v_sh, v_sd;
    uint o_sb, o_ss, o_sh, o_sd;
    uint lse_sb, lse_ss, lse_sh;
    uint seqlen_q, seqlen_k, heads_q, group; /* group = heads_q / heads_kv */
    float scale_log2;                         /* softmax scale * log2(e) */
} args;

/* Each binding is seen as f32 and as 16-bit words; DTYPE picks which one is used. */
layout(binding = 0, std430) readonly buffer Q32 { float q32[]; };
layout(binding = 0, std430) readonly buffer Q16 { uint16_t q16[]; };
layout(binding = 0, std430) readonly buffer Q128 { vec4 q4[]; };   /* VEC4 views: 4 elements a load */
layout(binding = 0, std430) readonly buffer Q64 { uvec2 q16x4[]; };
layout(binding = 1, std430) readonly buffer K32 { float k32[]; };
layout(binding = 1, std430) readonly buffer K16 { uint16_t k16[]; };
layout(binding = 1, std430) readonly buffer K128 { vec4 k4[]; };
layout(binding = 1, std430) readonly buffer K64 { uvec2 k16x4[]; };
layout(binding = 2, std430) readonly buffer V32 { float v32[]; };
layout(binding = 2, std430) readonly buffer V16 { uint16_t v16[]; };
layout(binding = 2, std430) readonly buffer V128 { vec4 v4[]; };
layout(binding = 2, std430) readonly buffer V64 { uvec2 v16x4[]; };
layout(binding = 3, std430) writeonly buffer O32 { float o32[]; };
layout(binding = 3, std430) writeonly buffer O16 { uint16_t o16[]; };
layout(binding = 4, std430) writeonly buffer LSE { float lse32[]; };
/* Mirrors vk_extra_args in vulkan_dispatch.c. */
layout(binding = 5, std430) readonly buffer Extra {
    int window_left, window_right; /* -1: no limit */
    float softcap;
    uint alibi_base, alibi_sb, alibi_sh;
    uint bias_base, bias_sb, bias_ss, bias_sh, bias_sd;
    uint cu_q_base, cu_q_s, cu_k_base, cu_k_s;
} extra;
layout(binding = 6, std430) readonly buffer Alibi { float alibi32[]; };
layout(binding = 7, std430) readonly buffer Bias32 { float bias32[]; };
layout(binding = 7, std430) readonly buffer Bias16 { uint16_t bias16[]; };
layout(binding = 8, std430) readonly buffer CuQ { int cu_q[]; };
layout(binding = 9, std430) readonly buffer CuK { int cu_k[]; };

const uint ROW = D + PAD;       /* floats per shared row */
const uint ROW4 = ROW / 4;      /* vec4s per shared row */
const uint D4 = D / 4;
const uint ACC4 = D4 / T;       /* vec4 accumulators per invocation */
const uint WG = Br * T;

shared vec4 Qs[Br * ROW4];
shared vec4 Ks[Bc * ROW4];
shared vec4 Vs[Bc * ROW4];
shared float Ps[Br * Bc];

#include "xfa_common.glsl"

const bool EXTRAS = SOFTCAP || ALIBI || BIAS != 0; /* scores leave the log2 domain for these */

float half_bits_to_f32(uint u) { return bits16_to_f32(u, DTYPE); }
uint f32_to_half_bits(float x) { return f32_to_bits16(x, DTYPE); }

float load_q(uint i) { return DTYPE == 0 ? q32[i] : half_bits_to_f32(uint(q16[i])); }
float load_k(uint i) { return DTYPE == 0 ? k32[i] : half_bits_to_f32(uint(k16[i])); }
float load_v(uint i) { return DTYPE == 0 ? v32[i] : half_bits_to_f32(uint(v16[i])); }

/* Elements i, i+sd, i+2sd, i+3sd; with VEC4 (sd 1, i a multiple of 4) in one load. */
vec4 load4_q(uint i, uint sd)
{
    if (VEC4) return DTYPE == 0 ? q4[i / 4] : bits16x4_to_f32(q16x4[i / 4], DTYPE);
    return vec4(load_q(i), load_q(i + sd), load_q(i + 2 * sd), load_q(i + 3 * sd));
}

vec4 load4_k(uint i, uint sd)
{
    if (VEC4) return DTYPE == 0 ? k4[i / 4] : bits16x4_to_f32(k16x4[i / 4], DTYPE);
    return vec4(load_k(i), load_k(i + sd), load_k(i + 2 * sd), load_k(i + 3 * sd));
}

vec4 load4_v(uint i, uint sd)
{
    if (VEC4) return DTYPE == 0 ? v4[i / 4] : bits16x4_to_f32(v16x4[i / 4], DTYPE);
    return vec4(load_v(i), load_v(i + sd), load_v(i + 2 * sd), load_v(i + 3 * sd));
}

void store_o(uint i, float x)
{
    if (DTYPE == 0) o32[i] = x;
    else o16[i] = uint16_t(f32_to_half_bits(x));
}

/* Reductions over the T invocations of a row group (aligned, consecutive lanes). */
float row_group_max(float x)
{
    [[unroll]] for (uint m = 1; m < T; m <<= 1) x = max(x, subgroupShuffleXor(x, m));
    return x;
}

float row_group_sum(float x)
{
    [[unroll]] for (uint m = 1; m < T; m <<= 1) x += subgroupShuffleXor(x, m);
    return x;
}

void main()
{
    /* Invocation number in subgroup order, so a row group is T lanes of one subgroup. */
    const uint tid = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    const uint r = tid / T, t = tid % T;
    const uint row0 = gl_WorkGroupID.x * Br;
    const uint h = gl_WorkGroupID.y;
    const uint hk = h / args.group;
    /* Packed sequences: z is the sequence, its rows are an offset into batch 0 of every view,
     * its lengths come from the offsets, clamped so that no access leaves the views. */
    uint b = gl_WorkGroupID.z, Sq = args.seqlen_q, Sk = args.seqlen_k, q0 = 0, k0 = 0;
    if (VARLEN) {
        const uint s = b;
        b = 0;
        q0 = uint(clamp(cu_q[extra.cu_q_base + s * extra.cu_q_s], 0, int(Sq)));
        k0 = uint(clamp(cu_k[extra.cu_k_base + s * extra.cu_k_s], 0, int(Sk)));
        Sq = uint(clamp(cu_q[extra.cu_q_base + (s + 1) * extra.cu_q_s], int(q0), int(Sq))) - q0;
        Sk = uint(clamp(cu_k[extra.cu_k_base + (s + 1) * extra.cu_k_s], int(k0), int(Sk))) - k0;
        if (row0 >= Sq) return; /* the grid covers max_seqlen_q rows; the whole work-group leaves */
    }
    const uint rows = min(Br, Sq - row0);
    const uint row = row0 + r;

    /* Q tile, pre-scaled; rows past Sq are zero (never stored). */
    const uint q_bh = args.q_base + b * args.q_sb + q0 * args.q_ss + h * args.q_sh;
    for (uint i = tid; i < Br * D4; i += WG) {
        const uint rr = i / D4, x = (i % D4) * 4;
        vec4 val = vec4(0.0);
        if (rr < rows) {
            const uint base = q_bh + (row0 + rr) * args.q_ss + x * args.q_sd;
            val = load4_q(base, args.q_sd) * args.scale_log2;
        }
        Qs[rr * ROW4 + x / 4] = val;
    }

    float m_i = NEG_INF, l_i = 0.0;
    vec4 acc[ACC4];
    [[unroll]] for (uint j = 0; j < ACC4; j++) acc[j] = vec4(0.0);

    /* The keys some row of this block may see; blocks outside are skipped. Row i's
     * diagonal is key i + diag (bottom-right alignment). */
    const int diag = int(Sk) - int(Sq);
    int wl = -1, wr = CAUSAL ? 0 : -1;
    if (WINDOW) {
        wl = extra.window_left;
        wr = extra.window_right;
    }
    int key_begin = 0, key_end = int(Sk);
    if (wl >= 0) key_begin = clamp(int(row0) + diag - wl, 0, int(Sk));
    if (wr >= 0) key_end = clamp(int(row0 + rows) - 1 + diag + wr + 1, 0, int(Sk));
    const int lo = wl >= 0 ? int(row) + diag - wl : 0;           /* this row's visible keys lo..hi */
    const int hi = wr >= 0 ? int(row) + diag + wr : int(Sk) - 1;

    float slope = 0.0;
    if (ALIBI) slope = alibi32[extra.alibi_base + b * extra.alibi_sb + h * extra.alibi_sh];
    uint bias_row = 0;
    if (BIAS != 0) bias_row = extra.bias_base + b * extra.bias_sb + row * extra.bias_ss + h * extra.bias_sh;
    float softcap = 0.0;
    if (SOFTCAP) softcap = extra.softcap;

    const uint k_bh = args.k_base + b * args.k_sb + k0 * args.k_ss + hk * args.k_sh;
    const uint v_bh = args.v_base + b * args.v_sb + k0 * args.v_ss + hk * args.v_sh;
    for (uint col0 = uint(key_begin); int(col0) < key_end; col0 += Bc) {
        const uint cols = min(Bc, uint(key_end) - col0);
        barrier(); /* the previous block's K, V and P are no longer read */
        for (uint i = tid; i < Bc * D4; i += WG) {
            const uint c = i / D4, x = (i % D4) * 4;
            vec4 kv = vec4(0.0), vv = vec4(0.0);
            if (c < cols) {
                const uint kb = k_bh + (col0 + c) * args.k_ss + x * args.k_sd;
                const uint vb = v_bh + (col0 + c) * args.v_ss + x * args.v_sd;
                kv = load4_k(kb, args.k_sd);
                vv = load4_v(vb, args.v_sd);
            }
            Ks[c * ROW4 + x / 4] = kv;
            Vs[c * ROW4 + x / 4] = vv;
        }
        barrier();

        /* Scores of this invocation's columns, and the row max over the row group. */
        float block_max = NEG_INF;
        for (uint c = t; c < Bc; c += T) {
            float s = NEG_INF;
            const int j = int(col0 + c);
            const bool visible = c < cols && r < rows && j >= lo && j <= hi;
            if (visible) {
                vec4 dot4 = vec4(0.0);
                [[unroll]] for (uint x = 0; x < D4; x++) dot4 += Qs[r * ROW4 + x] * Ks[c * ROW4 + x];
                s = dot4.x + dot4.y + dot4.z + dot4.w;
                if (EXTRAS) { /* in natural-log units, as xfa.h defines them, then back to log2 */
                    s *= LN2;
                    if (SOFTCAP) s = softcap * tanh_safe(s / softcap);
                    if (ALIBI) s -= slope * abs(float(int(row) + diag - j));
                    if (BIAS == 1) s += bias32[bias_row + uint(j) * extra.bias_sd];
                    if (BIAS == 2) s += half_bits_to_f32(uint(bias16[bias_row + uint(j) * extra.bias_sd]));
                    s *= LOG2E;
                }
            }
            Ps[r * Bc + c] = s;
            block_max = max(block_max, s);
        }
        block_max = row_group_max(block_max);
        const float m_new = max(m_i, block_max);
        /* A row that has seen nothing yet keeps m_i = -inf, l_i = 0, acc = 0 (and P = 0 below). */
        const float alpha = m_new == NEG_INF ? 1.0 : exp2(m_i - m_new);
        float block_sum = 0.0;
        for (uint c = t; c < Bc; c += T) {
            const float s = Ps[r * Bc + c];
            const float p = s == NEG_INF ? 0.0 : exp2(s - m_new);
            Ps[r * Bc + c] = p;
            block_sum += p;
        }
        block_sum = row_group_sum(block_sum);
        l_i = l_i * alpha + block_sum;
        m_i = m_new;
        barrier(); /* P of the whole row is written */

        [[unroll]] for (uint j = 0; j < ACC4; j++) acc[j] *= alpha;
        for (uint c = 0; c < cols; c++) {
            const float p = Ps[r * Bc + c];
            [[unroll]] for (uint j = 0; j < ACC4; j++) acc[j] += p * Vs[c * ROW4 + t + j * T];
        }
    }

    if (r >= rows) return;
    const float inv_l = l_i > 0.0 ? 1.0 / l_i : 0.0;
    const uint o_row = args.o_base + b * args.o_sb + (q0 + row) * args.o_ss + h * args.o_sh;
    [[unroll]] for (uint j = 0; j < ACC4; j++) {
        const uint x = (t + j * T) * 4;
        const vec4 out4 = acc[j] * inv_l;
        [[unroll]] for (uint e = 0; e < 4; e++) store_o(o_row + (x + e) * args.o_sd, out4[e]);
    }
    if (HAS_LSE && t == 0)
        lse32[args.lse_base + b * args.lse_sb + (q0 + row) * args.lse_ss + h * args.lse_sh] =
            l_i > 0.0 ? (m_i + log2(l_i)) * LN2 : NEG_INF;
}
