/*
 * flash_forward_mma.cl - FlashAttention-2 forward on NVIDIA tensor cores
 * through inline PTX (mma.sync.m16n8k16, f16 or bf16 inputs, f32 accumulate)
 * in OpenCL C. f16/bf16 storage only (f32 takes the portable kernel).
 *
 * One warp (32 consecutive work-items) owns MT m16 tiles of query rows (16 or 32
 * rows); a work-group of BR / (16 MT) warps owns BR rows of one (batch, head).
 * Per warp, as in FA2:
 *   - Q stays in registers as mma A fragments (D/16 k-steps x 4 words);
 *   - S = Q K^T for a block of BC keys: BC/8 n-tiles of m16n8 f32 fragments,
 *     B fragments read from the K tile in local memory;
 *   - softmax statistics per row with quad shuffles (the 4 lanes of a row);
 *   - P is re-packed from the S fragments straight into A fragments (the
 *     m16n8 C layout of two neighbouring n-tiles is the m16k16 A layout) and
 *     O += P V with B fragments from the V tile.
 *
 * Local memory, as xfa_tile_layout "mma.sync" in opencl_device.c describes it:
 * K_tile and V_tile, BC x (D + PAD) 16-bit elements each (PAD = 8: rows start
 * on 16-byte boundaries and the fragment reads of 8 rows hit distinct banks).
 *
 * Fragment layouts (PTX ISA, mma.m16n8k16, g = lane / 4, tq = lane % 4):
 *   A (16x16, row): a[0] = (g, 2tq..2tq+1), a[1] = (g+8, same), a[2] = (g, 2tq+8..),
 *                   a[3] = (g+8, 2tq+8..)  -- two 16-bit values per 32-bit word, low = lower column
 *   B (16x8, col):  b[0] = (k = 2tq..2tq+1, n = g), b[1] = (k = 2tq+8.., n = g)
 *   C (16x8 f32):   c[0], c[1] = (g, 2tq, 2tq+1), c[2], c[3] = (g+8, same)
 *
 * XFA_MMA_EMULATE (set by the host on non-NVIDIA devices, for tests only)
 * replaces the three PTX instructions (mma, shfl, cvt) with OpenCL C that
 * follows the same fragment layouts through a scratch area in local memory,
 * so the fragment bookkeeping runs, and is checked, on any OpenCL device.
 * (That scratch exists only in the emulated build and is not in the layout.)
 *
 * Windows, softcap, ALiBi, bias and variable lengths as in flash_forward.cl (same
 * arguments, same rules): they act on the S fragments element by element, each
 * element knowing its row (my_rows) and key.
 *
 * Build options: -DD= -DBR= -DBC= -DPAD= -DTHREADS_PER_ROW=2|1 -DXFA_DTYPE_F16|BF16 [-DXFA_MMA_EMULATE]
 * THREADS_PER_ROW 1 ("mma.sync-wide") gives each warp 32 rows (two m16 tiles), so every K/V fragment
 * read from local memory feeds two mma instead of one, at twice the registers for Q, S and O.
 */

/* Full unrolling keeps the fragment arrays in registers on the GPU; the emulated build (tests
 * only) stays rolled, which compiles many times faster. */
#ifdef XFA_MMA_EMULATE
#define UNROLL
#else
#define UNROLL _Pragma("unroll")
#endif

#define DP (D + PAD)
#define MT (2 / THREADS_PER_ROW) /* m16 tiles per warp: 1 (16 rows, THREADS_PER_ROW 2) or 2 (32 rows, 1) */
#define RPL (2 * MT)              /* rows per lane: g and g + 8 of each m16 tile */
#define WARPS (BR / (16 * MT))
#define WG (WARPS * 32)
#define KSTEPS (D / 16)   /* k-steps of S = Q K^T */
#define NTILES (BC / 8)   /* n-tiles of S */
#define DTILES (D / 8)    /* n-tiles of O */
#define KBLOCKS (BC / 16) /* k-steps of O += P V */

#if !defined(XFA_DTYPE_F16) && !defined(XFA_DTYPE_BF16)
#error "the mma.sync kernel takes f16 or bf16 storage"
#endif

/* Bits of the `flags` argument, as in flash_forward.cl. */
#define HAS_LSE 1
#define HAS_ALIBI 2
#define HAS_BIAS 4
#define BIAS_F32 8
#define VARLEN 16

/* A bias element: f32, or 16-bit storage of the kernel's dtype. */
static inline float bias_at(__global const uchar *bias, long at, int f32)
{
    if (f32) return ((__global const float *)bias)[at];
    const ushort bits = ((__global const ushort *)bias)[at];
#ifdef XFA_DTYPE_F16
    return vload_half(0, (const __private half *)&bits);
#else
    return as_float((uint)bits << 16);
#endif
}

/* ---- the three warp-level operations: PTX on NVIDIA, emulated elsewhere ---- */

#ifndef XFA_MMA_EMULATE

#define EMU_PARAMS
#define EMU_ARGS

#ifdef XFA_DTYPE_F16
#define MMA_TYPE "f16"
#else
#define MMA_TYPE "bf16"
#endif

/* c = a * b + c on one m16n8k16 tile. */
static inline void mma_16816(float *c, const uint *a, uint b0, uint b1)
{
    float d0, d1, d2, d3;
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." MMA_TYPE "." MMA_TYPE ".f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]),
                   "f"(c[3]));
    c[0] = d0;
    c[1] = d1;
    c[2] = d2;
    c[3] = d3;
}

/* Four 8x8 matrices of 16-bit elements from local memory: lane l gives the address of row l % 8 of
 * matrix l / 8 (tile + off); r[i] gets row lane / 4, elements 2 (lane % 4) and the next, of matrix
 * i. One instruction instead of eight 16-bit loads, and conflict-free on the padded rows. The
 * shared-space address of a __local pointer is its integer value. */
static inline void ldsm_x4(uint *r, __local const ushort *tile, int off)
{
    const uint addr = (uint)(size_t)(tile + off);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* The same, transposed: r[i] gets column lane / 4, rows 2 (lane % 4) and the next, of matrix i. */
static inline void ldsm_x4_trans(uint *r, __local const ushort *tile, int off)
{
    const uint addr = (uint)(size_t)(tile + off);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* 16 bytes global -> local without passing through registers (zeros when !ok); completes by
 * copy_wait_all. The integer value of a __global pointer is its global address. */
static inline void copy16(__local ushort *dst, __global const ushort *src, const bool ok)
{
    const uint dst_addr = (uint)(size_t)dst;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst_addr), "l"((ulong)src), "r"(ok ? 16 : 0));
}
static inline void copy_commit(void) { asm volatile("cp.async.commit_group;"); }
static inline void copy_wait_all(void) { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

/* exp2 as the single SFU instruction (exp2(-inf) = +0), not the library's denormal-safe sequence. */
static inline float fast_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* x from the lane whose index differs from this one's by `mask` (butterfly). */
static inline float shfl_xor(float x, uint mask)
{
    uint out;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(out) : "r"(as_uint(x)), "r"(mask));
    return as_float(out);
}

/* Two f32 rounded to nearest even into one word of 16-bit values (lo in the low half). */
static inline uint pack2(float lo, float hi)
{
    uint out;
    asm("cvt.rn." MMA_TYPE "x2.f32 %0, %1, %2;" : "=r"(out) : "f"(hi), "f"(lo));
    return out;
}

#else /* XFA_MMA_EMULATE: the same contracts in plain OpenCL C through local scratch */

#define EMU_PARAMS , __local uint *scratch, const int lane
#define EMU_ARGS , scratch, lane
#define SCRATCH_WORDS_PER_WARP (32 * 6)

static inline float half_to_f32(uint word, int high)
{
    const ushort bits = (ushort)(high ? word >> 16 : word & 0xffffu);
#ifdef XFA_DTYPE_F16
    return vload_half(0, (const __private half *)&bits);
#else
    return as_float((uint)bits << 16);
#endif
}

static inline ushort f32_to_half_bits(float x)
{
#ifdef XFA_DTYPE_F16
    ushort bits;
    vstore_half_rte(x, 0, (__private half *)&bits);
    return bits;
#else
    const uint u = as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}

static inline uint pack2(float lo, float hi) { return (uint)f32_to_half_bits(lo) | ((uint)f32_to_half_bits(hi) << 16); }

static inline void mma_16816(float *c, const uint *a, uint b0, uint b1 EMU_PARAMS)
{
    __local uint *w = scratch;
    for (int i = 0; i < 4; i++) w[lane * 6 + i] = a[i];
    w[lane * 6 + 4] = b0;
    w[lane * 6 + 5] = b1;
    barrier(CLK_LOCAL_MEM_FENCE);
    const int g = lane / 4, tq = lane % 4;
    float d[4];
    for (int e = 0; e < 4; e++) {
        const int row = g + (e >= 2 ? 8 : 0), col = 2 * tq + (e & 1);
        float sum = c[e];
        for (int kk = 0; kk < 16; kk++) {
            const int a_lane = (row % 8) * 4 + (kk % 8) / 2, a_reg = (row >= 8 ? 1 : 0) + (kk >= 8 ? 2 : 0);
            const int b_lane = col * 4 + (kk % 8) / 2, b_reg = 4 + (kk >= 8 ? 1 : 0);
            sum += half_to_f32(w[a_lane * 6 + a_reg], kk & 1) * half_to_f32(w[b_lane * 6 + b_reg], kk & 1);
        }
        d[e] = sum;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int e = 0; e < 4; e++) c[e] = d[e];
}

/* ldmatrix: each lane posts its row offset, then reads the rows the PTX layout hands it. */
static inline void ldsm_x4_emulated(uint *r, __local const ushort *tile, int off, __local uint *scratch, const int lane,
                                    const int trans)
{
    scratch[lane] = (uint)off;
    barrier(CLK_LOCAL_MEM_FENCE);
    const int g = lane / 4, tq = lane % 4;
    for (int i = 0; i < 4; i++) {
        if (trans) {
            const int row0 = (int)scratch[i * 8 + 2 * tq], row1 = (int)scratch[i * 8 + 2 * tq + 1];
            r[i] = (uint)tile[row0 + g] | ((uint)tile[row1 + g] << 16);
        } else {
            const int row = (int)scratch[i * 8 + g];
            r[i] = (uint)tile[row + 2 * tq] | ((uint)tile[row + 2 * tq + 1] << 16);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}
static inline void ldsm_x4(uint *r, __local const ushort *tile, int off EMU_PARAMS)
{
    ldsm_x4_emulated(r, tile, off, scratch, lane, 0);
}
static inline void ldsm_x4_trans(uint *r, __local const ushort *tile, int off EMU_PARAMS)
{
    ldsm_x4_emulated(r, tile, off, scratch, lane, 1);
}
#define fast_exp2 exp2

static inline void copy16(__local ushort *dst, __global const ushort *src, const bool ok)
{
    *(__local uint4 *)dst = ok ? *(__global const uint4 *)src : (uint4)(0u);
}
static inline void copy_commit(void) {}
static inline void copy_wait_all(void) {}

static inline float shfl_xor(float x, uint mask EMU_PARAMS)
{
    __local float *w = (__local float *)scratch;
    w[lane] = x;
    barrier(CLK_LOCAL_MEM_FENCE);
    const float y = w[lane ^ (int)mask];
    barrier(CLK_LOCAL_MEM_FENCE);
    return y;
}

#endif /* XFA_MMA_EMULATE */

/* Rows first..first+BC-1 of a K or V view (rows at or past `limit` as zeros) into a local tile.
 * With 16-byte rows (vec) each work-item moves 16 bytes per step, asynchronously on the GPU
 * (cp.async: the copy overlaps the tensor-core work until copy_wait_all), else element by element. */
static inline void load_block(__local ushort *tile, __global const ushort *src, const long4 stride, const int first,
                              const int limit, const bool vec, const int lid)
{
    if (vec) {
        for (int i = lid; i < BC * (D / 8); i += WG) {
            const int r = i / (D / 8), c = (i % (D / 8)) * 8;
            const bool ok = first + r < limit;
            copy16(tile + r * DP + c, src + (ok ? (long)(first + r) * stride.s1 + c : 0), ok);
        }
    } else {
        for (int i = lid; i < BC * D; i += WG) {
            const int r = i / D, c = i % D;
            tile[r * DP + c] = first + r < limit ? src[(long)(first + r) * stride.s1 + c * stride.s3] : (ushort)0;
        }
    }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
xfa_flash_forward_mma(__global const ushort *q, __global const ushort *k, __global const ushort *v,
                      __global ushort *o, __global float *lse, __global const float *alibi,
                      __global const uchar *bias, __global const int *cu_q, __global const int *cu_k,
                      const ulong q_off, const ulong k_off, const ulong v_off, const ulong o_off, const ulong lse_off,
                      const ulong alibi_off, const ulong bias_off, const ulong cu_q_off, const ulong cu_k_off,
                      const long4 q_stride, const long4 k_stride, const long4 v_stride, const long4 o_stride,
                      const long4 lse_stride, const long4 bias_stride, const long2 alibi_stride, const long2 cu_stride,
                      const int seqlen_q, const int seqlen_k, const int group, const int window_left,
                      const int window_right, const float q_scale, const float softcap, const int flags)
{
    /* Declared as uint4 for 16-byte alignment (the copies and fragment reads are word-sized). */
    __local uint4 K_words[BC * DP / 8];
    __local uint4 V_words[BC * DP / 8];
    __local ushort *K_tile = (__local ushort *)K_words;
    __local ushort *V_tile = (__local ushort *)V_words;
#ifdef XFA_MMA_EMULATE
    __local uint emu_scratch[WARPS * SCRATCH_WORDS_PER_WARP];
#endif

    const int lid = (int)get_local_id(0);
    const int warp = lid / 32, lane = lid % 32;
    const int g = lane / 4, tq = lane % 4;
#ifdef XFA_MMA_EMULATE
    __local uint *scratch = emu_scratch + warp * SCRATCH_WORDS_PER_WARP;
#endif
    const int h = (int)get_group_id(1);
    const int hk = h / group;
    int b = (int)get_group_id(2), Sq = seqlen_q, Sk = seqlen_k;
    long q0 = 0, k0 = 0; /* first packed row of this sequence (variable lengths) */
    if (flags & VARLEN) {
        const int s = b;
        const int qa = clamp(cu_q[cu_q_off + s * cu_stride.s0], 0, seqlen_q);
        const int qb = clamp(cu_q[cu_q_off + (s + 1) * cu_stride.s0], qa, seqlen_q);
        const int ka = clamp(cu_k[cu_k_off + s * cu_stride.s1], 0, seqlen_k);
        const int kb = clamp(cu_k[cu_k_off + (s + 1) * cu_stride.s1], ka, seqlen_k);
        q0 = qa;
        k0 = ka;
        Sq = qb - qa;
        Sk = kb - ka;
        b = 0;
    }
    const int row0 = (int)get_group_id(0) * BR;
    if (row0 >= Sq) return; /* the whole work-group: past this sequence's rows */
    const int block_rows = min(BR, Sq - row0);
    const int warp_row0 = row0 + warp * 16 * MT;
    /* The rows this lane holds: r = 2 mt + hr is row g + 8 hr of the warp's m16 tile mt. */
    int my_rows[RPL];
    UNROLL
    for (int r = 0; r < RPL; r++) my_rows[r] = warp_row0 + (r >> 1) * 16 + g + (r & 1) * 8;

    q += q_off + b * q_stride.s0 + q0 * q_stride.s1 + h * q_stride.s2;
    k += k_off + b * k_stride.s0 + k0 * k_stride.s1 + hk * k_stride.s2;
    v += v_off + b * v_stride.s0 + k0 * v_stride.s1 + hk * v_stride.s2;

    /* Q as A fragments, straight from global memory (rows past seqlen_q as 0). */
    uint qa[MT][KSTEPS][4];
    UNROLL
    for (int mt = 0; mt < MT; mt++)
        UNROLL
        for (int ks = 0; ks < KSTEPS; ks++)
            UNROLL
            for (int i = 0; i < 4; i++) {
                const int row = my_rows[2 * mt + (i & 1)];
                const int col = ks * 16 + 2 * tq + (i >= 2 ? 8 : 0);
                uint word = 0;
                if (row < Sq) {
                    const long at = (long)row * q_stride.s1 + col * q_stride.s3;
                    word = (uint)q[at] | ((uint)q[at + q_stride.s3] << 16);
                }
                qa[mt][ks][i] = word;
            }

    /* Row i's diagonal is key i + Sk - Sq; it sees keys diag - window_left .. diag + window_right. */
    const int diag = Sk - Sq;
    int key_begin = 0, key_end = Sk; /* keys some row of the block sees */
    if (window_left >= 0) key_begin = max(row0 + diag - window_left, 0);
    if (window_right >= 0) key_end = clamp(row0 + block_rows - 1 + diag + window_right + 1, 0, Sk);
    /* The first and one past the last key each of this lane's rows sees (rows past Sq: none). */
    int row_begin[RPL], row_end[RPL];
    UNROLL
    for (int r = 0; r < RPL; r++) {
        row_begin[r] = window_left >= 0 ? my_rows[r] + diag - window_left : 0;
        row_end[r] = window_right >= 0 ? min(my_rows[r] + diag + window_right + 1, Sk) : Sk;
        if (my_rows[r] >= Sq) row_end[r] = row_begin[r];
    }
    const bool extras = softcap > 0.0f || (flags & (HAS_ALIBI | HAS_BIAS));
    const float slope = (flags & HAS_ALIBI) ? alibi[alibi_off + b * alibi_stride.s0 + h * alibi_stride.s1] : 0.0f;

    float m_i[RPL], l_part[RPL]; /* l_part: this lane's share of l_i; the quad's shares are summed at the end */
    UNROLL
    for (int r = 0; r < RPL; r++) {
        m_i[r] = -INFINITY;
        l_part[r] = 0.0f;
    }
    float acc[MT][DTILES][4];
    UNROLL
    for (int mt = 0; mt < MT; mt++)
        UNROLL
        for (int n = 0; n < DTILES; n++)
            UNROLL
            for (int e = 0; e < 4; e++) acc[mt][n][e] = 0.0f;

    /* K/V rows start on 8-element (16-byte) boundaries with unit column stride: copy 16 bytes at a time. */
    const bool kv_vec = k_stride.s3 == 1 && v_stride.s3 == 1 && ((k_off | v_off) & 7) == 0 &&
                        ((k_stride.s0 | k_stride.s1 | k_stride.s2) & 7) == 0 &&
                        ((v_stride.s0 | v_stride.s1 | v_stride.s2) & 7) == 0;

    /* K_j and V_j stream in while the block before is computed, as in FlashAttention-2: V_j during
     * S_j = Q K_j^T, K_{j+1} during O += P_j V_j (one K and one V tile, asynchronous copies). */
    if (key_begin < key_end) load_block(K_tile, k, k_stride, key_begin, key_end, kv_vec, lid);
    copy_commit();
    for (int col0 = key_begin; col0 < key_end; col0 += BC) {
        const int cols = min(BC, key_end - col0);
        copy_wait_all();
        barrier(CLK_LOCAL_MEM_FENCE); /* K_j is in; every warp is done with V_{j-1} */
        load_block(V_tile, v, v_stride, col0, key_end, kv_vec, lid);
        copy_commit();

        /* S = Q K^T (raw scores, f32). One ldmatrix gives the B fragments of two k-steps (matrices:
         * keys n*8.. by dims ks*16 + 0, 8, 16, 24; KSTEPS is even as D is a multiple of 32), used by
         * each of the warp's m16 tiles. */
        float s[MT][NTILES][4];
        UNROLL
        for (int mt = 0; mt < MT; mt++)
            UNROLL
            for (int n = 0; n < NTILES; n++)
                UNROLL
                for (int e = 0; e < 4; e++) s[mt][n][e] = 0.0f;
        UNROLL
        for (int n = 0; n < NTILES; n++) {
            const int key_row = (n * 8 + (lane & 7)) * DP + (lane >> 3) * 8;
            UNROLL
            for (int ks = 0; ks < KSTEPS; ks += 2) {
                uint kb[4];
                ldsm_x4(kb, K_tile, key_row + ks * 16 EMU_ARGS);
                UNROLL
                for (int mt = 0; mt < MT; mt++) {
                    mma_16816(s[mt][n], qa[mt][ks], kb[0], kb[1] EMU_ARGS);
                    mma_16816(s[mt][n], qa[mt][ks + 1], kb[2], kb[3] EMU_ARGS);
                }
            }
        }

        /* Scale (and finish with the extras) into the log2 domain, mask, and take each row's max over the quad. */
        float row_max[RPL];
        UNROLL
        for (int r = 0; r < RPL; r++) row_max[r] = -INFINITY;
        UNROLL
        for (int mt = 0; mt < MT; mt++)
            UNROLL
            for (int n = 0; n < NTILES; n++)
                UNROLL
                for (int e = 0; e < 4; e++) {
                    const int r = 2 * mt + (e >> 1);
                    const int key = col0 + n * 8 + 2 * tq + (e & 1), row = my_rows[r];
                    float x = -INFINITY;
                    if (key >= row_begin[r] && key < row_end[r] && key < col0 + cols) {
                        x = s[mt][n][e] * q_scale;
                        if (extras) {
                            if (softcap > 0.0f) x = softcap * tanh(x / softcap);
                            x -= slope * fabs((float)(row + diag - key));
                            if (flags & HAS_BIAS)
                                x += bias_at(bias, (long)bias_off + b * bias_stride.s0 + (long)row * bias_stride.s1 +
                                                       h * bias_stride.s2 + (long)key * bias_stride.s3,
                                             flags & BIAS_F32);
                            x *= M_LOG2E_F;
                        }
                    }
                    s[mt][n][e] = x;
                    row_max[r] = fmax(row_max[r], x);
                }
        float alpha[RPL], m_use[RPL];
        UNROLL
        for (int r = 0; r < RPL; r++) {
            row_max[r] = fmax(row_max[r], shfl_xor(row_max[r], 1 EMU_ARGS));
            row_max[r] = fmax(row_max[r], shfl_xor(row_max[r], 2 EMU_ARGS));
            const float m_new = fmax(m_i[r], row_max[r]);
            /* A row with nothing visible yet keeps acc = 0, l = 0: exponentiate against 0, not -inf. */
            m_use[r] = m_new == -INFINITY ? 0.0f : m_new;
            alpha[r] = fast_exp2(m_i[r] - m_use[r]);
            m_i[r] = m_new;
        }

        /* P = exp2(S - m), this lane's part of l, and the rescale of what acc holds. */
        float row_sum[RPL];
        UNROLL
        for (int r = 0; r < RPL; r++) row_sum[r] = 0.0f;
        UNROLL
        for (int mt = 0; mt < MT; mt++)
            UNROLL
            for (int n = 0; n < NTILES; n++)
                UNROLL
                for (int e = 0; e < 4; e++) {
                    const int r = 2 * mt + (e >> 1);
                    const float p = fast_exp2(s[mt][n][e] - m_use[r]);
                    s[mt][n][e] = p;
                    row_sum[r] += p;
                }
        UNROLL
        for (int r = 0; r < RPL; r++) l_part[r] = l_part[r] * alpha[r] + row_sum[r];
        UNROLL
        for (int mt = 0; mt < MT; mt++)
            UNROLL
            for (int n = 0; n < DTILES; n++) {
                acc[mt][n][0] *= alpha[2 * mt];
                acc[mt][n][1] *= alpha[2 * mt];
                acc[mt][n][2] *= alpha[2 * mt + 1];
                acc[mt][n][3] *= alpha[2 * mt + 1];
            }

        copy_wait_all();
        barrier(CLK_LOCAL_MEM_FENCE); /* V_j is in; every warp is done with K_j */
        if (col0 + BC < key_end) load_block(K_tile, k, k_stride, col0 + BC, key_end, kv_vec, lid);
        copy_commit();

        /* O += P V: P's C fragments (n-tiles 2kb, 2kb+1) are the A fragment of keys 16kb..16kb+15.
         * The B fragments come from ldmatrix.trans, two dim tiles per instruction (matrices: keys
         * kb*16 + 0 and + 8 by dims n*8, then the same by dims (n+1)*8), used by each m16 tile. */
        UNROLL
        for (int kb = 0; kb < KBLOCKS; kb++) {
            uint pa[MT][4];
            UNROLL
            for (int mt = 0; mt < MT; mt++) {
                pa[mt][0] = pack2(s[mt][2 * kb][0], s[mt][2 * kb][1]);
                pa[mt][1] = pack2(s[mt][2 * kb][2], s[mt][2 * kb][3]);
                pa[mt][2] = pack2(s[mt][2 * kb + 1][0], s[mt][2 * kb + 1][1]);
                pa[mt][3] = pack2(s[mt][2 * kb + 1][2], s[mt][2 * kb + 1][3]);
            }
            const int v_row = (kb * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * DP + (lane >> 4) * 8;
            UNROLL
            for (int n = 0; n < DTILES; n += 2) {
                uint vb[4];
                ldsm_x4_trans(vb, V_tile, v_row + n * 8 EMU_ARGS);
                UNROLL
                for (int mt = 0; mt < MT; mt++) {
                    mma_16816(acc[mt][n], pa[mt], vb[0], vb[1] EMU_ARGS);
                    mma_16816(acc[mt][n + 1], pa[mt], vb[2], vb[3] EMU_ARGS);
                }
            }
        }
    }

    /* l_i: the quad's shares together; then O = acc / l (0 for rows that see nothing). */
    o += o_off + b * o_stride.s0 + q0 * o_stride.s1 + h * o_stride.s2;
    UNROLL
    for (int r = 0; r < RPL; r++) {
        float l_i = l_part[r] + shfl_xor(l_part[r], 1 EMU_ARGS);
        l_i += shfl_xor(l_i, 2 EMU_ARGS);
        const float inv_l = l_i > 0.0f ? 1.0f / l_i : 0.0f;
        if (my_rows[r] >= Sq) continue;
        const int mt = r >> 1, hr = r & 1;
        __global ushort *o_row = o + (long)my_rows[r] * o_stride.s1;
        UNROLL
        for (int n = 0; n < DTILES; n++) {
            const uint word = pack2(acc[mt][n][2 * hr] * inv_l, acc[mt][n][2 * hr + 1] * inv_l);
            const int col = n * 8 + 2 * tq;
            o_row[col * o_stride.s3] = (ushort)(word & 0xffffu);
            o_row[(col + 1) * o_stride.s3] = (ushort)(word >> 16);
        }
        if ((flags & HAS_LSE) && tq == 0)
            lse[lse_off + b * lse_stride.s0 + (q0 + my_rows[r]) * lse_stride.s1 + h * lse_stride.s2] =
                l_i > 0.0f ? (m_i[r] + log2(l_i)) * M_LN2_F : -INFINITY;
    }
}
