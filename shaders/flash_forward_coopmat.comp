/*
 * flash_forward_coopmat.comp - the cooperative-matrix path (VK_KHR_cooperative_matrix,
 * GL_KHR_cooperative_matrix; glslang >= 13): FlashAttention-2 forward for f16
 * storage with f16 x f16 -> f32 16x16x16 subgroup matrices.
 *
 * A work-group has Br/16 subgroups; each owns 16 query rows: its Q rows as
 * A matrices in registers and its output rows as D/16 f32 accumulators.
 * Per K/V block of Bc rows (shared, f16): S = Q K^T on matrices, stored to
 * shared f32; the online softmax runs on S rows in scalar code (SG/16
 * invocations per row, reduced with shuffles) and writes P (f16); the
 * accumulators are rescaled by each row's alpha, then O += P V on matrices.
 *
 * KHR cooperative matrices do not say which row an element lives in, so the
 * shader loads a matrix whose every element holds its own row number (rowidx)
 * once: elements with the same index in matrices of the same type share
 * their position, which turns the per-row rescale into element-wise code.
 *
 * Window, softcap, ALiBi and bias (specialization constants 9..12, values in
 * the `Extra` block as in flash_forward.comp) act on S in that scalar
 * softmax; packed variable lengths (13) shift every view to the sequence's
 * rows, as in flash_forward.comp.
 *
 * Shared memory (the host's xfa_tile_layout in vulkan_pipeline.c): K and V,
 * Bc x (D+PAD) f16 each (Q passes through the same space first: Br <= 2 Bc);
 * S (f32) and P (f16), Br x Bc; one float per row (alpha, then 1/l).
 */
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require

layout(constant_id = 0) const uint D = 64;        /* head dim, multiple of 16 */
layout(constant_id = 1) const uint Br = 64;       /* query rows: 16 per subgroup */
layout(constant_id = 2) const uint Bc = 64;       /* key rows per block, multiple of 16 */
layout(constant_id = 3) const uint SG = 32;       /* subgroup size, >= 16 */
layout(constant_id = 4) const uint DTYPE = 1;     /* f16 only (xfa_dtype 1) */
layout(constant_id = 5) const bool CAUSAL = false;
layout(constant_id = 6) const bool HAS_LSE = false;
layout(constant_id = 7) const uint PAD = 8;       /* halves added to each shared K/V row */
layout(local_size_x_id = 8) in;                   /* = Br / 16 * SG */
layout(constant_id = 9) const bool WINDOW = false;   /* window_left/right from Extra (CAUSAL is then unused) */
layout(constant_id = 10) const bool SOFTCAP = false;
layout(constant_id = 11) const bool ALIBI = false;
layout(constant_id = 12) const uint BIAS = 0;        /* 0 none, 1 f32, 2 f16 */
layout(constant_id = 13) const bool VARLEN = false;  /* packed sequences: z is the sequence */
layout(constant_id = 14) const bool VEC8 = false;    /* k, v: unit d stride, rows 8-element aligned */

layout(push_constant) uniform Args {
    uint q_base, k_base, v_base, o_base, lse_base;
    uint q_sb, q_ss, q_sh, q_sd;
    uint k_sb, k_ss, k_sh, k_sd;
    uint v_sb, v_ss, v_sh, v_sd;
    uint o_sb, o_ss, o_sh, o_sd;
    uint lse_sb, lse_ss, lse_sh;
    uint seqlen_q, seqlen_k, heads_q, group;
    float scale_log2;
} args;

layout(binding = 0, std430) readonly buffer Q16 { float16_t q16[]; };
layout(binding = 1, std430) readonly buffer K16 { float16_t k16[]; };
layout(binding = 2, std430) readonly buffer V16 { float16_t v16[]; };
/* VEC8 views of K and V: 8 elements (16 bytes) a load instead of one */
layout(binding = 1, std430) readonly buffer K128 { uvec4 k128[]; };
layout(binding = 2, std430) readonly buffer V128 { uvec4 v128[]; };
layout(binding = 3, std430) writeonly buffer O16 { float16_t o16[]; };
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
layout(binding = 7, std430) readonly buffer Bias16 { float16_t bias16[]; };
layout(binding = 8, std430) readonly buffer CuQ { int cu_q[]; };
layout(binding = 9, std430) readonly buffer CuK { int cu_k[]; };

const uint ROW = D + PAD;
const uint TPR = SG / 16;   /* invocations per query row in the softmax */
const uint WG = Br / 16 * SG;
const uint DT = D / 16;     /* matrix tiles along D */
const uint CT = Bc / 16;    /* matrix tiles along a K/V block */

shared float16_t KVs[2 * Bc * ROW];
shared float Ss[Br * Bc];
shared float16_t Ps[Br * Bc];
shared float row_scale[Br];

#define NEG_INF (-1.0 / 0.0)
const float LN2 = 0.6931471805599453;
const float LOG2E = 1.4426950408889634;
const bool EXTRAS = SOFTCAP || ALIBI || BIAS != 0;

/* tanh from exp of a non-positive argument: never inf/inf (as in xfa_common.glsl) */
float tanh_safe(float x)
{
    const float e = exp(-2.0 * abs(x));
    return sign(x) * (1.0 - e) / (1.0 + e);
}

#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define MAT_C16 coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

float row_group_max(float x)
{
    [[unroll]] for (uint m = 1; m < TPR; m <<= 1) x = max(x, subgroupShuffleXor(x, m));
    return x;
}

float row_group_sum(float x)
{
    [[unroll]] for (uint m = 1; m < TPR; m <<= 1) x += subgroupShuffleXor(x, m);
    return x;
}

/* Shared memory written by this subgroup is visible to it. */
void subgroup_sync()
{
    subgroupMemoryBarrierShared();
    subgroupBarrier();
}

void main()
{
    const uint sub = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    const uint tid = sub * SG + lane;
    const uint rr = lane / TPR, tr = lane % TPR;  /* softmax: row within the subgroup, slot in the row */
    const uint r = sub * 16 + rr;                 /* row within the work-group */
    const uint row0 = gl_WorkGroupID.x * Br;
    const uint h = gl_WorkGroupID.y;
    const uint hk = h / args.group;
    /* Packed sequences: z is the sequence, its rows an offset into batch 0 of every view,
     * its lengths from the offsets, clamped into the packed rows. */
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
    const int diag = int(Sk) - int(Sq);

    /* Q through shared memory into A matrices; the row-number matrix through S. */
    const uint q_bh = args.q_base + b * args.q_sb + q0 * args.q_ss + h * args.q_sh;
    for (uint i = tid; i < Br * D; i += WG) {
        const uint qr = i / D, x = i % D;
        KVs[qr * ROW + x] = qr < rows ? q16[q_bh + (row0 + qr) * args.q_ss + x * args.q_sd] : float16_t(0.0);
    }
    for (uint i = tid; i < 256; i += WG) Ss[i] = float(i / 16);
    barrier();
    MAT_A Qm[DT];
    [[unroll]] for (uint k = 0; k < DT; k++)
        coopMatLoad(Qm[k], KVs, sub * 16 * ROW + k * 16, ROW, gl_CooperativeMatrixLayoutRowMajor);
    MAT_C rowidx;
    coopMatLoad(rowidx, Ss, 0, 16, gl_CooperativeMatrixLayoutRowMajor);

    MAT_C Om[DT];
    [[unroll]] for (uint j = 0; j < DT; j++) Om[j] = MAT_C(0.0);
    float m_i = NEG_INF, l_i = 0.0;

    /* The keys some row of this block may see (xfa_key_visible); blocks outside are skipped. */
    int wl = -1, wr = CAUSAL ? 0 : -1;
    if (WINDOW) {
        wl = extra.window_left;
        wr = extra.window_right;
    }
    int key_begin = 0, key_end = int(Sk);
    if (wl >= 0) key_begin = clamp(int(row0) + diag - wl, 0, int(Sk));
    if (wr >= 0) key_end = clamp(int(row0 + rows) - 1 + diag + wr + 1, 0, int(Sk));
    const uint row = row0 + r;                                  /* this invocation's softmax row */
    const int lo = wl >= 0 ? int(row) + diag - wl : 0;          /* its visible keys lo..hi */
    const int hi = wr >= 0 ? int(row) + diag + wr : int(Sk) - 1;
    float slope = 0.0, softcap = 0.0;
    if (ALIBI) slope = alibi32[extra.alibi_base + b * extra.alibi_sb + h * extra.alibi_sh];
    if (SOFTCAP) softcap = extra.softcap;
    uint bias_row = 0;
    if (BIAS != 0) bias_row = extra.bias_base + b * extra.bias_sb + row * extra.bias_ss + h * extra.bias_sh;

    const uint k_bh = args.k_base + b * args.k_sb + k0 * args.k_ss + hk * args.k_sh;
    const uint v_bh = args.v_base + b * args.v_sb + k0 * args.v_ss + hk * args.v_sh;
    for (uint col0 = uint(key_begin); int(col0) < key_end; col0 += Bc) {
        const uint cols = min(Bc, uint(key_end) - col0);
        barrier(); /* Q (first block) or the previous K and V are no longer read */
        if (VEC8) {
            for (uint i = tid; i < Bc * D / 8; i += WG) {
                const uint c = i / (D / 8), x = i % (D / 8) * 8;
                uvec4 kw = uvec4(0), vw = uvec4(0);
                if (c < cols) {
                    kw = k128[(k_bh + (col0 + c) * args.k_ss + x) / 8];
                    vw = v128[(v_bh + (col0 + c) * args.v_ss + x) / 8];
                }
                [[unroll]] for (uint w = 0; w < 4; w++) {
                    const f16vec2 kp = unpackFloat2x16(kw[w]), vp = unpackFloat2x16(vw[w]);
                    KVs[c * ROW + x + 2 * w] = kp.x;
                    KVs[c * ROW + x + 2 * w + 1] = kp.y;
                    KVs[(Bc + c) * ROW + x + 2 * w] = vp.x;
                    KVs[(Bc + c) * ROW + x + 2 * w + 1] = vp.y;
                }
            }
        } else {
            for (uint i = tid; i < Bc * D; i += WG) {
                const uint c = i / D, x = i % D;
                float16_t kx = float16_t(0.0), vx = float16_t(0.0);
                if (c < cols) {
                    kx = k16[k_bh + (col0 + c) * args.k_ss + x * args.k_sd];
                    vx = v16[v_bh + (col0 + c) * args.v_ss + x * args.v_sd];
                }
                KVs[c * ROW + x] = kx;
                KVs[(Bc + c) * ROW + x] = vx;
            }
        }
        barrier();

        /* S = Q K^T for this subgroup's 16 rows (K^T read column-major out of row-major K). */
        [[unroll]] for (uint j = 0; j < CT; j++) {
            MAT_C s = MAT_C(0.0);
            [[unroll]] for (uint k = 0; k < DT; k++) {
                MAT_B kt;
                coopMatLoad(kt, KVs, j * 16 * ROW + k * 16, ROW, gl_CooperativeMatrixLayoutColumnMajor);
                s = coopMatMulAdd(Qm[k], kt, s);
            }
            coopMatStore(s, Ss, sub * 16 * Bc + j * 16, Bc, gl_CooperativeMatrixLayoutRowMajor);
        }
        subgroup_sync();

        /* Online softmax on row r, TPR invocations per row. */
        float block_max = NEG_INF;
        for (uint c = tr; c < Bc; c += TPR) {
            const int j = int(col0 + c);
            float s = NEG_INF;
            if (c < cols && r < rows && j >= lo && j <= hi) {
                s = Ss[r * Bc + c] * args.scale_log2;
                if (EXTRAS) { /* in natural-log units, as xfa.h defines them, then back to log2 */
                    s *= LN2;
                    if (SOFTCAP) s = softcap * tanh_safe(s / softcap);
                    if (ALIBI) s -= slope * abs(float(int(row) + diag - j));
                    if (BIAS == 1) s += bias32[bias_row + uint(j) * extra.bias_sd];
                    if (BIAS == 2) s += float(bias16[bias_row + uint(j) * extra.bias_sd]);
                    s *= LOG2E;
                }
            }
            Ss[r * Bc + c] = s;
            block_max = max(block_max, s);
        }
        block_max = row_group_max(block_max);
        const float m_new = max(m_i, block_max);
        const float alpha = m_new == NEG_INF ? 1.0 : exp2(m_i - m_new);
        float block_sum = 0.0;
        for (uint c = tr; c < Bc; c += TPR) {
            const float s = Ss[r * Bc + c];
            const float p = s == NEG_INF ? 0.0 : exp2(s - m_new);
            Ps[r * Bc + c] = float16_t(p);
            block_sum += p;
        }
        block_sum = row_group_sum(block_sum);
        l_i = l_i * alpha + block_sum;
        m_i = m_new;
        if (tr == 0) row_scale[r] = alpha;
        subgroup_sync();

        /* O = diag(alpha) O + P V */
        [[unroll]] for (uint i = 0; i < rowidx.length(); i++) {
            const float a = row_scale[sub * 16 + uint(rowidx[i])];
            [[unroll]] for (uint j = 0; j < DT; j++) Om[j][i] *= a;
        }
        [[unroll]] for (uint k = 0; k < CT; k++) {
            MAT_A p;
            coopMatLoad(p, Ps, sub * 16 * Bc + k * 16, Bc, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint j = 0; j < DT; j++) {
                MAT_B v;
                coopMatLoad(v, KVs, (Bc + k * 16) * ROW + j * 16, ROW, gl_CooperativeMatrixLayoutRowMajor);
                Om[j] = coopMatMulAdd(p, v, Om[j]);
            }
        }
        subgroup_sync(); /* Ps and row_scale are rewritten next block */
    }

    /* O / l, rounded to f16 through shared memory, then written with the caller's strides. */
    if (tr == 0) row_scale[r] = l_i > 0.0 ? 1.0 / l_i : 0.0;
    barrier(); /* every subgroup is done with K and V; row_scale is written */
    [[unroll]] for (uint i = 0; i < rowidx.length(); i++) {
        const float a = row_scale[sub * 16 + uint(rowidx[i])];
        [[unroll]] for (uint j = 0; j < DT; j++) Om[j][i] *= a;
    }
    [[unroll]] for (uint j = 0; j < DT; j++) {
        MAT_C16 o = MAT_C16(Om[j]);
        coopMatStore(o, KVs, sub * 16 * ROW + j * 16, ROW, gl_CooperativeMatrixLayoutRowMajor);
    }
    subgroup_sync();
    const uint o_bh = args.o_base + b * args.o_sb + q0 * args.o_ss + h * args.o_sh;
    for (uint i = lane; i < 16 * D; i += SG) {
        const uint orow = sub * 16 + i / D, x = i % D;
        if (orow < rows) o16[o_bh + (row0 + orow) * args.o_ss + x * args.o_sd] = KVs[orow * ROW + x];
    }
    if (HAS_LSE && tr == 0 && r < rows)
        lse32[args.lse_base + b * args.lse_sb + (q0 + row0 + r) * args.lse_ss + h * args.lse_sh] =
            l_i > 0.0 ? (m_i + log2(l_i)) * LN2 : NEG_INF;
}
