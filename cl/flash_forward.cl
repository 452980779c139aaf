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
 * Build options (from the host's plan): -DD= -DBR= -DBC= -DPAD= -DTHREADS_PER_ROW=
 * -DXFA_DTYPE_F32|F16|BF16.
 */

#define T THREADS_PER_ROW
#define DP (D + PAD)
#define WG (BR * T)
#define COLS_PER_ITEM (D / T)

/* Storage: f32 as is; f16 through vload_half/vstore_half (no cl_khr_fp16 needed);
 * bf16 as the top 16 bits of an f32, rounded to nearest even on store. */
#if defined(XFA_DTYPE_F32)
typedef float elem_t;
#define LOAD(p, i) ((p)[i])
#define STORE(p, i, x) ((p)[i] = (x))
#elif defined(XFA_DTYPE_F16)
typedef half elem_t;
#define LOAD(p, i) vload_half((i), (p))
#define STORE(p, i, x) vstore_half_rte((x), (i), (p))
#elif defined(XFA_DTYPE_BF16)
typedef ushort elem_t;
#define LOAD(p, i) as_float((uint)(p)[i] << 16)
#define STORE(p, i, x) ((p)[i] = bf16_from_f32(x))
static inline ushort bf16_from_f32(float x)
{
    const uint u = as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u); /* quiet NaN */
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#else
#error "define XFA_DTYPE_F32, XFA_DTYPE_F16 or XFA_DTYPE_BF16"
#endif

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
xfa_flash_forward(__global const elem_t *q, __global const elem_t *k, __global const elem_t *v,
                  __global elem_t *o, __global float *lse,
                  const ulong q_off, const ulong k_off, const ulong v_off, const ulong o_off, const ulong lse_off,
                  const long4 q_stride, const long4 k_stride, const long4 v_stride, const long4 o_stride,
                  const long4 lse_stride,
                  const int seqlen_q, const int seqlen_k, const int group, const float scale_log2,
                  const int causal, const int has_lse)
{
    __local float Q_tile[BR * DP];
    __local float K_tile[BC * DP];
    __local float V_tile[BC * DP];
    __local float S[BR * BC];

    const int lid = (int)get_local_id(0);
    const int r = lid / T, t = lid % T;
    const int q_block = (int)get_group_id(0);
    const int h = (int)get_group_id(1), b = (int)get_group_id(2);
    const int hk = h / group;
    const int row0 = q_block * BR;
    const int rows = min(BR, seqlen_q - row0);

    q += q_off + b * q_stride.s0 + h * q_stride.s2;
    k += k_off + b * k_stride.s0 + hk * k_stride.s2;
    v += v_off + b * v_stride.s0 + hk * v_stride.s2;

    for (int i = lid; i < BR * D; i += WG) {
        const int rr = i / D, c = i % D;
        Q_tile[rr * DP + c] = rr < rows ? LOAD(q, (row0 + rr) * q_stride.s1 + c * q_stride.s3) * scale_log2 : 0.0f;
    }

    /* Causal (bottom-right aligned): row i sees keys j <= i + seqlen_k - seqlen_q.
     * Blocks past the last row's last key are never loaded. */
    const int diag = seqlen_k - seqlen_q;
    int key_end = seqlen_k;
    if (causal) key_end = clamp(row0 + rows + diag, 0, seqlen_k);
    const int my_row = row0 + r;

    float m_i = -INFINITY, l_i = 0.0f;
    float acc[COLS_PER_ITEM];
    for (int x = 0; x < COLS_PER_ITEM; x++) acc[x] = 0.0f;

    for (int col0 = 0; col0 < key_end; col0 += BC) {
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

        /* Last key this row sees in this block (exclusive), relative to col0. */
        const int visible = causal ? clamp(my_row + diag + 1 - col0, 0, cols) : cols;
        for (int j = t; j < BC; j += T) {
            float s = -INFINITY;
            if (j < visible) {
                s = 0.0f;
                for (int x = 0; x < D; x++) s = fma(Q_tile[r * DP + x], K_tile[j * DP + x], s);
            }
            S[r * BC + j] = s;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        float row_max = -INFINITY;
        for (int j = 0; j < BC; j++) row_max = fmax(row_max, S[r * BC + j]);
        const float m_new = fmax(m_i, row_max);
        if (m_new == -INFINITY) continue; /* nothing visible yet: keep the starting state */
        const float alpha = exp2(m_i - m_new); /* rescales what was accumulated under the old max */
        for (int x = 0; x < COLS_PER_ITEM; x++) acc[x] *= alpha;
        float row_sum = 0.0f;
        for (int j = 0; j < visible; j++) {
            const float p = exp2(S[r * BC + j] - m_new);
            row_sum += p;
            for (int x = 0; x < COLS_PER_ITEM; x++) acc[x] = fma(p, V_tile[j * DP + t + x * T], acc[x]);
        }
        l_i = l_i * alpha + row_sum;
        m_i = m_new;
    }

    if (r >= rows) return;
    o += o_off + b * o_stride.s0 + (long)my_row * o_stride.s1 + h * o_stride.s2;
    const float inv_l = l_i > 0.0f ? 1.0f / l_i : 0.0f; /* rows that see nothing: O = 0 */
    for (int x = 0; x < COLS_PER_ITEM; x++) STORE(o, (t + x * T) * o_stride.s3, acc[x] * inv_l);
    if (has_lse && t == 0) {
        /* natural log of the scaled scores' sum: (m + log2 l) * ln 2 */
        lse[lse_off + b * lse_stride.s0 + (long)my_row * lse_stride.s1 + h * lse_stride.s2] =
            l_i > 0.0f ? (m_i + log2(l_i)) * M_LN2_F : -INFINITY;
    }
}
