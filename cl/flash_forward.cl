/*
 * flash_forward.cl - the portable FlashAttention-2 forward kernel (OpenCL C 1.2).
 *
 * One work-group owns BR query rows of one (batch, head); THREADS_PER_ROW (T)
 * work-items share each row. K/V stream through local memory in blocks of BC
 * rows. Everything is computed in f32 whatever the storage dtype.
 *
 * Local memory, exactly as the host's xfa_tile_layout "portable" describes it
 * (opencl_device.c): Q_tile BR x (D + PAD) f32, K_tile and V_tile BC x (D + PAD)
 * f32, S BR x BC f32. m_i, l_i and acc live in registers.
 *
 * Per K/V block:
 *   1. the block is loaded (converted to f32), out-of-range rows as 0;
 *   2. scores: work-item t of row r computes columns t, t+T, ... of S
 *      (log2 domain: scale*log2(e) is folded into Q_tile);
 *   3. every work-item of a row reads the whole S row for the new max and
 *      the probabilities (identical order, so identical m_i and l_i in all T
 *      work-items), and accumulates its own D/T columns of acc: columns
 *      t, t+T, ... so neighbouring work-items touch neighbouring words.
 *
 * Masks and extras follow cpu_kernel.c: row i sees keys lo..hi of its window
 * (causal is window_right = 0, bottom-right aligned); K/V blocks no row of the
 * work-group sees are not loaded. Without extras, scale*log2(e) is folded into
 * Q; with softcap, ALiBi or a bias the score is finished in natural units
 * (q_scale = scale) and then converted to log2 units. A row that sees no key
 * keeps l_i = 0: O = 0, LSE = -inf, as the CPU backend and the reference.
 *
 * Variable-length batches: get_group_id(2) is the sequence; its offsets are
 * read here and clamped into the packed rows (the grid is sized from
 * max_seqlen_q; rows past it are not computed, xfa.h).
 *
 * Build options (from the host's plan): -DD= -DBR= -DBC= -DPAD= -DTHREADS_PER_ROW=
 * -DXFA_DTYPE_F32|F16|BF16.
 */

#define T THREADS_PER_ROW
#define DP (D + PAD)
#define WG (BR * T)
#define COLS_PER_ITEM (D / T)

/* elem_t, LOAD, STORE: cl/xfa_storage.cl, prepended when embedded. */

/* Bits of the `flags` argument (opencl_backend.c sets them). */
#define HAS_LSE 1
#define HAS_ALIBI 2
#define HAS_BIAS 4
#define BIAS_F32 8
#define VARLEN 16

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
xfa_flash_forward(__global const elem_t *q, __global const elem_t *k, __global const elem_t *v,
                  __global elem_t *o, __global float *lse, __global const float *alibi,
                  __global const uchar *bias, __global const int *cu_q, __global const int *cu_k,
                  const ulong q_off, const ulong k_off, const ulong v_off, const ulong o_off, const ulong lse_off,
                  const ulong alibi_off, const ulong bias_off, const ulong cu_q_off, const ulong cu_k_off,
                  const long4 q_stride, const long4 k_stride, const long4 v_stride, const long4 o_stride,
                  const long4 lse_stride, const long4 bias_stride, const long2 alibi_stride, const long2 cu_stride,
                  const int seqlen_q, const int seqlen_k, const int group, const int window_left,
                  const int window_right, const float q_scale, const float softcap, const int flags)
{
    __local float Q_tile[BR * DP];
    __local float K_tile[BC * DP];
    __local float V_tile[BC * DP];
    __local float S[BR * BC];

    const int lid = (int)get_local_id(0);
    const int r = lid / T, t = lid % T;
    const int q_block = (int)get_group_id(0);
    const int h = (int)get_group_id(1);
    const int hk = h / group;
    int b = (int)get_group_id(2), Sq = seqlen_q, Sk = seqlen_k;
    long q0 = 0, k0 = 0; /* first packed row of this sequence */
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
    const int row0 = q_block * BR;
    if (row0 >= Sq) return; /* the whole work-group: past this sequence's rows */
    const int rows = min(BR, Sq - row0);

    q += q_off + b * q_stride.s0 + q0 * q_stride.s1 + h * q_stride.s2;
    k += k_off + b * k_stride.s0 + k0 * k_stride.s1 + hk * k_stride.s2;
    v += v_off + b * v_stride.s0 + k0 * v_stride.s1 + hk * v_stride.s2;

    for (int i = lid; i < BR * D; i += WG) {
        const int rr = i / D, c = i % D;
        Q_tile[rr * DP + c] = rr < rows ? LOAD(q, (row0 + rr) * q_stride.s1 + c * q_stride.s3) * q_scale : 0.0f;
    }

    /* Row i's diagonal is key i + Sk - Sq; it sees keys diag - window_left .. diag + window_right. */
    const int diag = Sk - Sq;
    const int my_row = row0 + r;
    int key_begin = 0, key_end = Sk; /* keys some row of the block sees */
    if (window_left >= 0) key_begin = max(row0 + diag - window_left, 0);
    if (window_right >= 0) key_end = clamp(row0 + rows - 1 + diag + window_right + 1, 0, Sk);
    int lo = window_left >= 0 ? my_row + diag - window_left : 0;
    int hi = window_right >= 0 ? min(my_row + diag + window_right, Sk - 1) : Sk - 1;
    if (r >= rows) hi = lo - 1; /* padding rows see nothing */

    const bool extras = softcap > 0.0f || (flags & (HAS_ALIBI | HAS_BIAS));
    const float slope = (flags & HAS_ALIBI) ? alibi[alibi_off + b * alibi_stride.s0 + h * alibi_stride.s1] : 0.0f;
    const long bias_row = (long)bias_off + b * bias_stride.s0 + (long)my_row * bias_stride.s1 + h * bias_stride.s2;

    float m_i = -INFINITY, l_i = 0.0f;
    float acc[COLS_PER_ITEM];
    for (int x = 0; x < COLS_PER_ITEM; x++) acc[x] = 0.0f;

    for (int col0 = key_begin; col0 < key_end; col0 += BC) {
        const int cols = min(BC, key_end - col0);
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous block is no longer read */
        for (int i = lid; i < BC * D; i += WG) {
            const int cc = i / D, c = i % D;
            float kx = 0.0f, vx = 0.0f;
            if (cc < cols) {
                kx = LOAD(k, (long)(col0 + cc) * k_stride.s1 + c * k_stride.s3);
                vx = LOAD(v, (long)(col0 + cc) * v_stride.s1 + c * v_stride.s3);
            }
            K_tile[cc * DP + c] = kx;
            V_tile[cc * DP + c] = vx;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* This row's visible keys in this block, relative to col0 (c_lo > c_hi: none). */
        const int c_lo = max(lo - col0, 0), c_hi = min(hi - col0, cols - 1);
        for (int j = t; j < BC; j += T) {
            float s = -INFINITY;
            if (j >= c_lo && j <= c_hi) {
                s = 0.0f;
                for (int x = 0; x < D; x++) s = fma(Q_tile[r * DP + x], K_tile[j * DP + x], s);
                if (extras) {
                    const int key = col0 + j;
                    if (softcap > 0.0f) s = softcap * tanh(s / softcap);
                    s -= slope * fabs((float)(my_row + diag - key));
                    if (flags & HAS_BIAS) {
                        const long at = bias_row + key * bias_stride.s3;
                        s += (flags & BIAS_F32) ? ((__global const float *)bias)[at]
                                                : LOAD((__global const elem_t *)bias, at);
                    }
                    s *= M_LOG2E_F;
                }
            }
            S[r * BC + j] = s;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        float row_max = -INFINITY;
        for (int j = c_lo; j <= c_hi; j++) row_max = fmax(row_max, S[r * BC + j]);
        const float m_new = fmax(m_i, row_max);
        if (m_new == -INFINITY) continue; /* nothing visible yet (or all masked): keep the starting state */
        const float alpha = exp2(m_i - m_new); /* rescales what was accumulated under the old max */
        for (int x = 0; x < COLS_PER_ITEM; x++) acc[x] *= alpha;
        float row_sum = 0.0f;
        for (int j = c_lo; j <= c_hi; j++) {
            const float p = exp2(S[r * BC + j] - m_new);
            row_sum += p;
            for (int x = 0; x < COLS_PER_ITEM; x++) acc[x] = fma(p, V_tile[j * DP + t + x * T], acc[x]);
        }
        l_i = l_i * alpha + row_sum;
        m_i = m_new;
    }

    if (r >= rows) return;
    o += o_off + b * o_stride.s0 + (q0 + my_row) * o_stride.s1 + h * o_stride.s2;
    const float inv_l = l_i > 0.0f ? 1.0f / l_i : 0.0f; /* rows that see nothing: O = 0 */
    for (int x = 0; x < COLS_PER_ITEM; x++) STORE(o, (t + x * T) * o_stride.s3, acc[x] * inv_l);
    if ((flags & HAS_LSE) && t == 0) {
        /* natural log of the scaled scores' sum: (m + log2 l) * ln 2 */
        lse[lse_off + b * lse_stride.s0 + (q0 + my_row) * lse_stride.s1 + h * lse_stride.s2] =
            l_i > 0.0f ? (m_i + log2(l_i)) * M_LN2_F : -INFINITY;
    }
}
