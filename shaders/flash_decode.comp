/*
 * flash_decode.comp - Flash-Decoding on Vulkan: the new query tokens of one
 * sequence attend to one split of its KV cache (contiguous or paged).
 *
 * A work-group is (split x row block, KV head, sequence). Its rows are the
 * Sq new tokens of every query head that reads this KV head (row r is token
 * r % Sq of head hk * group + r / Sq), so each K/V block is read once for the
 * whole GQA group. Inside, the algorithm and names are flash_forward.comp's:
 * T invocations per row, K/V blocks of Bc keys in shared memory as f32, the
 * online softmax (m_i, l_i, acc) in the log2 domain.
 *
 * With one split (DIRECT) the rows are finished here: O in the dtype and the
 * LSE. Otherwise each split leaves its partial O (f32, normalised over its
 * keys) and LSE in scratch, [split][b][h][i], for merge.comp.
 *
 * Lengths and page numbers are read on the device and clamped so that no
 * access leaves the cache: len = clamp(seqlens[b], 0, capacity) (+ Sq when
 * appending, at most capacity), page ids into 0 .. num_pages - 1.
 */
#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require

layout(constant_id = 0) const uint D = 64;
layout(constant_id = 1) const uint Br = 8;        /* rows (token x head) per work-group */
layout(constant_id = 2) const uint Bc = 16;       /* keys per K/V block */
layout(constant_id = 3) const uint T = 8;         /* invocations per row */
layout(constant_id = 4) const uint DTYPE = 0;
layout(constant_id = 5) const bool CAUSAL = true;
layout(constant_id = 6) const bool HAS_LSE = false; /* DIRECT only; partials always have theirs */
layout(constant_id = 7) const uint PAD = 4;
layout(local_size_x_id = 8) in;                   /* = Br * T */
layout(constant_id = 9) const bool WINDOW = false;  /* window_left >= 0 */
layout(constant_id = 10) const bool SOFTCAP = false;
layout(constant_id = 11) const bool ALIBI = false;
layout(constant_id = 12) const bool PAGED = false;
layout(constant_id = 13) const bool DIRECT = false;
layout(constant_id = 14) const bool VEC4 = false;   /* q, k, v: unit d stride, rows 4-element aligned */

/* Mirrors vk_decode_args in vulkan_decode.c. */
layout(binding = 5, std430) readonly buffer Extra {
    uint q_base, q_sb, q_ss, q_sh, q_sd;
    uint k_base, k_sb, k_ss, k_sh, k_sd;
    uint v_base, v_sb, v_ss, v_sh, v_sd;
    uint o_base, o_sb, o_ss, o_sh, o_sd;
    uint lse_base, lse_sb, lse_ss, lse_sh;
    uint len_base, len_sb;
    uint bt_base, bt_sb, bt_sd;
    uint alibi_base, alibi_sb, alibi_sh;
    uint batch, seqlen_q, heads_q, group, capacity, page_size, num_pages, splits, chunk_align;
    uint append;
    int window_left;
    float softcap, scale_log2;
} args;

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
layout(binding = 3, std430) writeonly buffer O32 { float o32[]; };   /* DIRECT: o; else f32 partials */
layout(binding = 3, std430) writeonly buffer O16 { uint16_t o16[]; };
layout(binding = 4, std430) writeonly buffer LSE { float lse32[]; }; /* DIRECT: lse; else partial LSEs */
layout(binding = 6, std430) readonly buffer Alibi { float alibi32[]; };
layout(binding = 7, std430) readonly buffer Lens { int seqlens[]; };
layout(binding = 8, std430) readonly buffer Table { int block_table[]; };

#include "xfa_common.glsl"

const uint ROW = D + PAD;
const uint ROW4 = ROW / 4;
const uint D4 = D / 4;
const uint ACC4 = D4 / T;
const uint WG = Br * T;

shared vec4 Qs[Br * ROW4];
shared vec4 Ks[Bc * ROW4];
shared vec4 Vs[Bc * ROW4];
shared float Ps[Br * Bc];
shared uint key_batch[Bc]; /* cache_batch() of each key of the block */

float load16or32_q(uint i) { return DTYPE == 0 ? q32[i] : bits16_to_f32(uint(q16[i]), DTYPE); }
float load_k(uint i) { return DTYPE == 0 ? k32[i] : bits16_to_f32(uint(k16[i]), DTYPE); }
float load_v(uint i) { return DTYPE == 0 ? v32[i] : bits16_to_f32(uint(v16[i]), DTYPE); }

/* Elements i, i+sd, i+2sd, i+3sd; with VEC4 (sd 1, i a multiple of 4) in one load. */
vec4 load4_q(uint i, uint sd)
{
    if (VEC4) return DTYPE == 0 ? q4[i / 4] : bits16x4_to_f32(q16x4[i / 4], DTYPE);
    return vec4(load16or32_q(i), load16or32_q(i + sd), load16or32_q(i + 2 * sd), load16or32_q(i + 3 * sd));
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

/* The cache's first index for token j of sequence b: b itself, or the token's page. */
uint cache_batch(uint b, uint j)
{
    if (!PAGED) return b;
    const int id = block_table[args.bt_base + b * args.bt_sb + (j / args.page_size) * args.bt_sd];
    return uint(clamp(id, 0, int(args.num_pages) - 1));
}

void main()
{
    const uint tid = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    const uint r = tid / T, t = tid % T;
    const uint Sq = args.seqlen_q, R = args.group * Sq; /* rows of this KV head */
    const uint row_blocks = (R + Br - 1) / Br;
    const uint split = gl_WorkGroupID.x / row_blocks, row0 = (gl_WorkGroupID.x % row_blocks) * Br;
    const uint hk = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    const uint rows = min(Br, R - row0);
    const uint row = row0 + r;
    const uint i = row % Sq, h = hk * args.group + row / Sq; /* meaningful for r < rows */

    const uint cached = uint(clamp(seqlens[args.len_base + b * args.len_sb], 0, int(args.capacity)));
    const uint len = args.append != 0 ? min(cached + Sq, args.capacity) : cached;
    /* This split's keys; chunks are whole K/V blocks so that only the last is ragged. */
    uint chunk = (len + args.splits - 1) / args.splits;
    chunk = (chunk + args.chunk_align - 1) / args.chunk_align * args.chunk_align;
    const uint key_begin = min(split * chunk, len), key_end = min(key_begin + chunk, len);

    for (uint x = tid; x < Br * D4; x += WG) {
        const uint rr = x / D4, c4 = (x % D4) * 4;
        vec4 val = vec4(0.0);
        if (rr < rows) {
            const uint qi = (row0 + rr) % Sq, qh = hk * args.group + (row0 + rr) / Sq;
            const uint base = args.q_base + b * args.q_sb + qi * args.q_ss + qh * args.q_sh + c4 * args.q_sd;
            val = load4_q(base, args.q_sd) * args.scale_log2;
        }
        Qs[rr * ROW4 + c4 / 4] = val;
    }

    float m_i = NEG_INF, l_i = 0.0;
    vec4 acc[ACC4];
    [[unroll]] for (uint j = 0; j < ACC4; j++) acc[j] = vec4(0.0);

    /* Row i's diagonal is cache token i + len - Sq; causal hides later keys, the window earlier ones. */
    const int diag = int(len) - int(Sq);
    const int lo = WINDOW ? int(i) + diag - args.window_left : 0;
    const int hi = CAUSAL ? int(i) + diag : int(len) - 1;
    /* Keys no row of the work-group sees are skipped (rows span tokens 0 .. Sq-1 at most). */
    int block_begin = int(key_begin), block_end = int(key_end);
    if (WINDOW) block_begin = max(block_begin, diag - args.window_left);
    if (CAUSAL) block_end = min(block_end, int(Sq) - 1 + diag + 1);
    float slope = 0.0;
    if (ALIBI && r < rows) slope = alibi32[args.alibi_base + b * args.alibi_sb + h * args.alibi_sh];
    const bool extras = SOFTCAP || ALIBI;

    for (int col0 = block_begin; col0 < block_end; col0 += int(Bc)) {
        const uint cols = min(Bc, uint(block_end - col0));
        barrier(); /* the previous block's K, V, P and pages are no longer read */
        for (uint c = tid; c < cols; c += WG) key_batch[c] = cache_batch(b, uint(col0) + c);
        barrier();
        for (uint x = tid; x < Bc * D4; x += WG) {
            const uint c = x / D4, c4 = (x % D4) * 4;
            vec4 kv = vec4(0.0), vv = vec4(0.0);
            if (c < cols) {
                const uint j = uint(col0) + c, in_page = PAGED ? j % args.page_size : j;
                const uint kb = args.k_base + key_batch[c] * args.k_sb + in_page * args.k_ss + hk * args.k_sh + c4 * args.k_sd;
                const uint vb = args.v_base + key_batch[c] * args.v_sb + in_page * args.v_ss + hk * args.v_sh + c4 * args.v_sd;
                kv = load4_k(kb, args.k_sd);
                vv = load4_v(vb, args.v_sd);
            }
            Ks[c * ROW4 + c4 / 4] = kv;
            Vs[c * ROW4 + c4 / 4] = vv;
        }
        barrier();

        float block_max = NEG_INF;
        for (uint c = t; c < Bc; c += T) {
            float s = NEG_INF;
            const int j = col0 + int(c);
            if (c < cols && r < rows && j >= lo && j <= hi) {
                vec4 dot4 = vec4(0.0);
                [[unroll]] for (uint x = 0; x < D4; x++) dot4 += Qs[r * ROW4 + x] * Ks[c * ROW4 + x];
                s = dot4.x + dot4.y + dot4.z + dot4.w;
                if (extras) {
                    s *= LN2;
                    if (SOFTCAP) s = args.softcap * tanh_safe(s / args.softcap);
                    if (ALIBI) s -= slope * abs(float(int(i) + diag - j));
                    s *= LOG2E;
                }
            }
            Ps[r * Bc + c] = s;
            block_max = max(block_max, s);
        }
        block_max = row_group_max(block_max);
        const float m_new = max(m_i, block_max);
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
        barrier();

        if (r < rows) { /* rows past R only helped load K and V */
            [[unroll]] for (uint j = 0; j < ACC4; j++) acc[j] *= alpha;
            for (uint c = 0; c < cols; c++) {
                const float p = Ps[r * Bc + c];
                [[unroll]] for (uint j = 0; j < ACC4; j++) acc[j] += p * Vs[c * ROW4 + t + j * T];
            }
        }
    }

    if (r >= rows) return;
    const float inv_l = l_i > 0.0 ? 1.0 / l_i : 0.0;
    const float lse = l_i > 0.0 ? (m_i + log2(l_i)) * LN2 : NEG_INF;
    if (DIRECT) {
        const uint o_row = args.o_base + b * args.o_sb + i * args.o_ss + h * args.o_sh;
        [[unroll]] for (uint j = 0; j < ACC4; j++) {
            const uint x = (t + j * T) * 4;
            const vec4 out4 = acc[j] * inv_l;
            [[unroll]] for (uint e = 0; e < 4; e++) {
                if (DTYPE == 0) o32[o_row + (x + e) * args.o_sd] = out4[e];
                else o16[o_row + (x + e) * args.o_sd] = uint16_t(f32_to_bits16(out4[e], DTYPE));
            }
        }
        if (HAS_LSE && t == 0) lse32[args.lse_base + b * args.lse_sb + i * args.lse_ss + h * args.lse_sh] = lse;
    } else {
        const uint part = ((split * args.batch + b) * args.heads_q + h) * Sq + i;
        [[unroll]] for (uint j = 0; j < ACC4; j++) {
            const uint x = (t + j * T) * 4;
            const vec4 out4 = acc[j] * inv_l;
            [[unroll]] for (uint e = 0; e < 4; e++) o32[part * D + x + e] = out4[e];
        }
        if (t == 0) lse32[part] = lse;
    }
}
