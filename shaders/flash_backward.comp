/*
 * flash_backward.comp - FlashAttention-2's backward on Vulkan, the algorithm
 * of cpu_backward.c: P is recomputed from Q, K and the forward's LSE, and
 * each pass owns what it writes, so there are no float atomics and the
 * result is deterministic. Three modes (MODE), dispatched in order:
 *   0 delta: D_i = rowsum(dO_i * O_i) per (b, h, i), into scratch;
 *   1 kv:    a work-group per (K/V block of Bc rows, kv head, b); T invocations
 *            per key row j hold K_j, V_j, dK_j, dV_j in registers and walk
 *            every query row of the GQA group (Q and dO staged in shared
 *            memory Br rows at a time): dV_j += P_ij dO_i, dK_j += dS_ij Q_i;
 *   2 q:     a work-group per (query block of Br rows, head, b); T invocations
 *            per query row hold Q_i, dO_i, dQ_i and walk the K/V blocks
 *            (shared): dQ_i += dS_ij K_j;
 * with dS_ij = scale * P_ij (dO_i . V_j - D_i) * (1 - tanh^2) under softcap.
 * Scores follow the forward exactly (flash_forward.comp; xfa.h).
 */
#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require

layout(constant_id = 0) const uint D = 64;
layout(constant_id = 1) const uint Br = 16;      /* query rows per block */
layout(constant_id = 2) const uint Bc = 16;      /* key rows per block */
layout(constant_id = 3) const uint T = 8;        /* invocations per row */
layout(constant_id = 4) const uint DTYPE = 0;
layout(constant_id = 5) const uint MODE = 0;     /* 0 delta, 1 kv, 2 q */
layout(constant_id = 6) const bool SOFTCAP = false;
layout(constant_id = 7) const bool ALIBI = false;
layout(constant_id = 8) const uint BIAS = 0;     /* 0 none, 1 f32, 2 the 16-bit DTYPE */
layout(constant_id = 9) const uint PAD = 4;
layout(local_size_x_id = 10) in;                 /* kv: Bc * T; q: Br * T; delta: 64 */
layout(constant_id = 11) const bool VEC4 = false; /* q, k, v, dO: unit d stride, rows 4-element aligned */

/* Mirrors vk_backward_args in vulkan_backward.c. */
layout(binding = 5, std430) readonly buffer Extra {
    uint q[5], k[5], v[5], o[5], d_o[5], dq[5], dk[5], dv[5];
    uint lse[4];
    uint alibi_base, alibi_sb, alibi_sh;
    uint bias_base, bias_sb, bias_ss, bias_sh, bias_sd;
    uint batch, seqlen_q, seqlen_k, heads_q, group;
    int window_left, window_right;
    float softcap, scale;
} args;

layout(binding = 0, std430) readonly buffer Q32 { float q32[]; };
layout(binding = 0, std430) readonly buffer Q16 { uint16_t q16[]; };
layout(binding = 0, std430) readonly buffer Q128 { vec4 q4[]; };
layout(binding = 0, std430) readonly buffer Q64 { uvec2 q16x4[]; };
layout(binding = 1, std430) readonly buffer K32 { float k32[]; };
layout(binding = 1, std430) readonly buffer K16 { uint16_t k16[]; };
layout(binding = 1, std430) readonly buffer K128 { vec4 k4[]; };
layout(binding = 1, std430) readonly buffer K64 { uvec2 k16x4[]; };
layout(binding = 2, std430) readonly buffer V32 { float v32[]; };
layout(binding = 2, std430) readonly buffer V16 { uint16_t v16[]; };
layout(binding = 2, std430) readonly buffer V128 { vec4 v4[]; };
layout(binding = 2, std430) readonly buffer V64 { uvec2 v16x4[]; };
layout(binding = 3, std430) readonly buffer O32 { float o32[]; };
layout(binding = 3, std430) readonly buffer O16 { uint16_t o16[]; };
layout(binding = 4, std430) readonly buffer LSE { float lse32[]; };
layout(binding = 6, std430) readonly buffer Alibi { float alibi32[]; };
layout(binding = 7, std430) readonly buffer Bias32 { float bias32[]; };
layout(binding = 7, std430) readonly buffer Bias16 { uint16_t bias16[]; };
layout(binding = 8, std430) readonly buffer DO32 { float do32[]; };
layout(binding = 8, std430) readonly buffer DO16 { uint16_t do16[]; };
layout(binding = 8, std430) readonly buffer DO128 { vec4 do4[]; };
layout(binding = 8, std430) readonly buffer DO64 { uvec2 do16x4[]; };
layout(binding = 9, std430) writeonly buffer DQ32 { float dq32[]; };
layout(binding = 9, std430) writeonly buffer DQ16 { uint16_t dq16[]; };
layout(binding = 10, std430) writeonly buffer DK32 { float dk32[]; };
layout(binding = 10, std430) writeonly buffer DK16 { uint16_t dk16[]; };
layout(binding = 11, std430) writeonly buffer DV32 { float dv32[]; };
layout(binding = 11, std430) writeonly buffer DV16 { uint16_t dv16[]; };
layout(binding = 12, std430) buffer Delta { float delta[]; }; /* [b][h][i] */

#include "xfa_common.glsl"

const uint ROW4 = (D + PAD) / 4;
const uint D4 = D / 4;
const uint ACC4 = D4 / T;
const uint STAGE = MODE == 1 ? Br : Bc;  /* rows staged in shared memory: query rows (kv) or keys (q) */

shared vec4 A_s[STAGE * ROW4]; /* kv: Q rows; q: K rows */
shared vec4 B_s[STAGE * ROW4]; /* kv: dO rows; q: V rows */
shared float row_lse[MODE == 1 ? Br : 1], row_delta[MODE == 1 ? Br : 1];

float ld(uint binding, uint i)
{
    if (DTYPE == 0) {
        if (binding == 0) return q32[i];
        if (binding == 1) return k32[i];
        if (binding == 2) return v32[i];
        if (binding == 3) return o32[i];
        return do32[i];
    }
    uint u;
    if (binding == 0) u = uint(q16[i]);
    else if (binding == 1) u = uint(k16[i]);
    else if (binding == 2) u = uint(v16[i]);
    else if (binding == 3) u = uint(o16[i]);
    else u = uint(do16[i]);
    return bits16_to_f32(u, DTYPE);
}

/* Elements base, +sd, +2sd, +3sd of q (0), k (1), v (2) or dO (8); with VEC4 in one load. */
vec4 ld4(uint binding, uint base, uint sd)
{
    if (VEC4) {
        const uint i = base / 4;
        if (DTYPE == 0) return binding == 0 ? q4[i] : binding == 1 ? k4[i] : binding == 2 ? v4[i] : do4[i];
        return bits16x4_to_f32(binding == 0 ? q16x4[i] : binding == 1 ? k16x4[i] : binding == 2 ? v16x4[i] : do16x4[i],
                               DTYPE);
    }
    return vec4(ld(binding, base), ld(binding, base + sd), ld(binding, base + 2 * sd), ld(binding, base + 3 * sd));
}

void st(uint binding, uint i, float x)
{
    if (DTYPE == 0) {
        if (binding == 9) dq32[i] = x;
        else if (binding == 10) dk32[i] = x;
        else dv32[i] = x;
        return;
    }
    const uint u = f32_to_bits16(x, DTYPE);
    if (binding == 9) dq16[i] = uint16_t(u);
    else if (binding == 10) dk16[i] = uint16_t(u);
    else dv16[i] = uint16_t(u);
}

float row_group_sum(float x)
{
    [[unroll]] for (uint m = 1; m < T; m <<= 1) x += subgroupShuffleXor(x, m);
    return x;
}

bool visible(int i, int j)
{
    const int diag = i + int(args.seqlen_k) - int(args.seqlen_q);
    return (args.window_left < 0 || j >= diag - args.window_left) && (args.window_right < 0 || j <= diag + args.window_right);
}

/* Keys [begin, end) some row of rows row0 .. row0+rows-1 may see (xfa_cpu_key_range). */
void key_range(int row0, int rows, out int begin, out int end)
{
    const int shift = int(args.seqlen_k) - int(args.seqlen_q);
    begin = 0;
    end = int(args.seqlen_k);
    if (args.window_left >= 0 && row0 + shift - args.window_left > 0) begin = row0 + shift - args.window_left;
    if (args.window_right >= 0 && row0 + rows + shift + args.window_right < int(args.seqlen_k))
        end = row0 + rows + shift + args.window_right;
}

/* P_ij and the factor dS_ij / (P_ij (dp - D_i)) from the unscaled dot q.k (qk), as the forward scores it. */
void probability(float qk, uint b, uint h, int i, int j, float lse_i, out float p, out float dcap)
{
    p = 0.0;
    dcap = 1.0;
    if (lse_i == NEG_INF || !visible(i, j)) return;
    const float x = qk * args.scale;
    float s = x;
    if (SOFTCAP) {
        const float t = tanh_safe(x / args.softcap);
        s = args.softcap * t;
        dcap = 1.0 - t * t;
    }
    if (ALIBI) s -= alibi32[args.alibi_base + b * args.alibi_sb + h * args.alibi_sh] *
                    abs(float(i + int(args.seqlen_k) - int(args.seqlen_q) - j));
    if (BIAS != 0) {
        const uint at = args.bias_base + b * args.bias_sb + uint(i) * args.bias_ss + h * args.bias_sh + uint(j) * args.bias_sd;
        s += BIAS == 1 ? bias32[at] : bits16_to_f32(uint(bias16[at]), DTYPE);
    }
    p = exp(s - lse_i);
}

void delta_mode()
{
    const uint e = gl_WorkGroupID.x * 64 + gl_LocalInvocationID.x; /* (b, h, i) */
    const uint Sq = args.seqlen_q, H = args.heads_q;
    if (e >= args.batch * H * Sq) return;
    const uint i = e % Sq, h = (e / Sq) % H, b = e / (Sq * H);
    const uint ob = args.o[0] + b * args.o[1] + i * args.o[2] + h * args.o[3];
    const uint db = args.d_o[0] + b * args.d_o[1] + i * args.d_o[2] + h * args.d_o[3];
    float sum = 0.0;
    for (uint x = 0; x < D; x++) sum += ld(8, db + x * args.d_o[4]) * ld(3, ob + x * args.o[4]);
    delta[e] = sum;
}

void kv_mode()
{
    const uint tid = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    const uint c = tid / T, t = tid % T, WG = Bc * T;
    const uint col0 = gl_WorkGroupID.x * Bc, hk = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    const uint Sq = args.seqlen_q, Sk = args.seqlen_k;
    const uint cols = min(Bc, Sk - col0);
    const int j = int(col0 + c);
    vec4 k_j[ACC4], v_j[ACC4], dk_j[ACC4], dv_j[ACC4];
    [[unroll]] for (uint a = 0; a < ACC4; a++) {
        const uint x = (t + a * T) * 4;
        k_j[a] = vec4(0.0);
        v_j[a] = vec4(0.0);
        if (c < cols) {
            k_j[a] = ld4(1, args.k[0] + b * args.k[1] + uint(j) * args.k[2] + hk * args.k[3] + x * args.k[4], args.k[4]);
            v_j[a] = ld4(2, args.v[0] + b * args.v[1] + uint(j) * args.v[2] + hk * args.v[3] + x * args.v[4], args.v[4]);
        }
        dk_j[a] = vec4(0.0);
        dv_j[a] = vec4(0.0);
    }
    for (uint h = hk * args.group; h < (hk + 1) * args.group; h++)
        for (uint row0 = 0; row0 < Sq; row0 += Br) {
            const uint rows = min(Br, Sq - row0);
            int begin, end;
            key_range(int(row0), int(rows), begin, end);
            if (!(begin < int(col0 + cols) && int(col0) < end)) continue; /* uniform: the block sees none of these rows */
            barrier(); /* the previous rows are no longer read */
            for (uint e = tid; e < Br * D4; e += WG) {
                const uint rr = e / D4, x = (e % D4) * 4;
                vec4 qv = vec4(0.0), dov = vec4(0.0);
                if (rr < rows) {
                    const uint i = row0 + rr;
                    qv = ld4(0, args.q[0] + b * args.q[1] + i * args.q[2] + h * args.q[3] + x * args.q[4], args.q[4]);
                    dov = ld4(8, args.d_o[0] + b * args.d_o[1] + i * args.d_o[2] + h * args.d_o[3] + x * args.d_o[4],
                              args.d_o[4]);
                }
                A_s[rr * ROW4 + x / 4] = qv;
                B_s[rr * ROW4 + x / 4] = dov;
            }
            for (uint rr = tid; rr < rows; rr += WG) {
                const uint i = row0 + rr;
                row_lse[rr] = lse32[args.lse[0] + b * args.lse[1] + i * args.lse[2] + h * args.lse[3]];
                row_delta[rr] = delta[(b * args.heads_q + h) * Sq + i];
            }
            barrier();
            for (uint rr = 0; rr < rows; rr++) {
                float qk = 0.0, dp = 0.0;
                [[unroll]] for (uint a = 0; a < ACC4; a++) {
                    qk += dot(A_s[rr * ROW4 + t + a * T], k_j[a]);
                    dp += dot(B_s[rr * ROW4 + t + a * T], v_j[a]);
                }
                qk = row_group_sum(qk);
                dp = row_group_sum(dp);
                float p = 0.0, dcap = 1.0;
                if (c < cols) probability(qk, b, h, int(row0 + rr), j, row_lse[rr], p, dcap);
                const float ds = p * (dp - row_delta[rr]) * dcap * args.scale;
                [[unroll]] for (uint a = 0; a < ACC4; a++) {
                    dv_j[a] += p * B_s[rr * ROW4 + t + a * T];
                    dk_j[a] += ds * A_s[rr * ROW4 + t + a * T];
                }
            }
        }
    if (c >= cols) return;
    [[unroll]] for (uint a = 0; a < ACC4; a++) {
        const uint x = (t + a * T) * 4;
        [[unroll]] for (uint e = 0; e < 4; e++) {
            st(10, args.dk[0] + b * args.dk[1] + uint(j) * args.dk[2] + hk * args.dk[3] + (x + e) * args.dk[4], dk_j[a][e]);
            st(11, args.dv[0] + b * args.dv[1] + uint(j) * args.dv[2] + hk * args.dv[3] + (x + e) * args.dv[4], dv_j[a][e]);
        }
    }
}

void q_mode()
{
    const uint tid = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    const uint r = tid / T, t = tid % T, WG = Br * T;
    const uint row0 = gl_WorkGroupID.x * Br, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    const uint hk = h / args.group, Sq = args.seqlen_q;
    const uint rows = min(Br, Sq - row0);
    const uint i = row0 + r;
    vec4 q_i[ACC4], do_i[ACC4], dq_i[ACC4];
    float lse_i = NEG_INF, delta_i = 0.0;
    [[unroll]] for (uint a = 0; a < ACC4; a++) {
        const uint x = (t + a * T) * 4;
        q_i[a] = vec4(0.0);
        do_i[a] = vec4(0.0);
        if (r < rows) {
            q_i[a] = ld4(0, args.q[0] + b * args.q[1] + i * args.q[2] + h * args.q[3] + x * args.q[4], args.q[4]);
            do_i[a] = ld4(8, args.d_o[0] + b * args.d_o[1] + i * args.d_o[2] + h * args.d_o[3] + x * args.d_o[4],
                          args.d_o[4]);
        }
        dq_i[a] = vec4(0.0);
    }
    if (r < rows) {
        lse_i = lse32[args.lse[0] + b * args.lse[1] + i * args.lse[2] + h * args.lse[3]];
        delta_i = delta[(b * args.heads_q + h) * Sq + i];
    }
    int key_begin, key_end;
    key_range(int(row0), int(rows), key_begin, key_end);
    for (int col0 = key_begin; col0 < key_end; col0 += int(Bc)) {
        const uint cols = min(Bc, uint(key_end - col0));
        barrier(); /* the previous K and V are no longer read */
        for (uint e = tid; e < Bc * D4; e += WG) {
            const uint cc = e / D4, x = (e % D4) * 4;
            vec4 kv = vec4(0.0), vv = vec4(0.0);
            if (cc < cols) {
                const uint j = uint(col0) + cc;
                kv = ld4(1, args.k[0] + b * args.k[1] + j * args.k[2] + hk * args.k[3] + x * args.k[4], args.k[4]);
                vv = ld4(2, args.v[0] + b * args.v[1] + j * args.v[2] + hk * args.v[3] + x * args.v[4], args.v[4]);
            }
            A_s[cc * ROW4 + x / 4] = kv;
            B_s[cc * ROW4 + x / 4] = vv;
        }
        barrier();
        for (uint cc = 0; cc < cols; cc++) {
            float qk = 0.0, dp = 0.0;
            [[unroll]] for (uint a = 0; a < ACC4; a++) {
                qk += dot(q_i[a], A_s[cc * ROW4 + t + a * T]);
                dp += dot(do_i[a], B_s[cc * ROW4 + t + a * T]);
            }
            qk = row_group_sum(qk);
            dp = row_group_sum(dp);
            float p, dcap;
            probability(qk, b, h, int(i), col0 + int(cc), lse_i, p, dcap);
            const float ds = p * (dp - delta_i) * dcap * args.scale;
            [[unroll]] for (uint a = 0; a < ACC4; a++) dq_i[a] += ds * A_s[cc * ROW4 + t + a * T];
        }
    }
    if (r >= rows) return;
    [[unroll]] for (uint a = 0; a < ACC4; a++) {
        const uint x = (t + a * T) * 4;
        [[unroll]] for (uint e = 0; e < 4; e++)
            st(9, args.dq[0] + b * args.dq[1] + i * args.dq[2] + h * args.dq[3] + (x + e) * args.dq[4], dq_i[a][e]);
    }
}

void main()
{
    if (MODE == 0) delta_mode();
    else if (MODE == 1) kv_mode();
    else q_mode();
}
