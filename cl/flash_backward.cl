/*
 * flash_backward.cl - FlashAttention-2's backward on OpenCL (OpenCL C 1.2), the
 * algorithm of cpu_backward.c: P is recomputed block by block from Q, K and
 * the forward's LSE, so no Sq x Sk matrix exists; deterministic, since each
 * work-group owns what it writes (no atomics):
 *   xfa_bwd_delta: D_i = rowsum(dO_i * O_i), f32 in scratch [b][h][i] (the caller's or the context's);
 *   xfa_bwd_kv:    per K/V block (BC keys of KV head hk), dV_j = sum_i P_ij dO_i and
 *                  dK_j = scale sum_i dS_ij Q_i over every query row of the GQA group;
 *   xfa_bwd_q:     per query block (BR rows of head h), dQ_i = scale sum_j dS_ij K_j,
 * with dS_ij = P_ij (dO_i . V_j - D_i) * dcap_ij (softcap's derivative).
 *
 * Scores are recomputed exactly as the forward defines them (natural units):
 * s = scale q.k, softcap, ALiBi, bias, masked outside the window; P = exp(s - lse).
 * T work-items per row (query row in xfa_bwd_q, key row in xfa_bwd_kv) each own
 * D/T columns of their accumulator, columns t, t+T, ...
 *
 * Local memory: xfa_bwd_kv keeps K, V (BC x DP), Q, dO (BR x DP), P, dS (BR x BC),
 * lse_i, D_i (BR); xfa_bwd_q the same tiles with the roles of the rows swapped.
 * The host sizes BR, BC with that footprint (opencl_backward.c).
 *
 * Build options: -DD= -DBR= -DBC= -DPAD= -DTHREADS_PER_ROW= -DXFA_DTYPE_F32|F16|BF16.
 */

#define T THREADS_PER_ROW
#define DP (D + PAD)
#define COLS_PER_ITEM (D / T)

/* elem_t, LOAD, STORE: cl/xfa_storage.cl, prepended when embedded. */

/* Bits of `flags`, as in flash_forward.cl. */
#define HAS_ALIBI 2
#define HAS_BIAS 4
#define BIAS_F32 8

/* What every kernel needs to recompute a score: the problem and its optional tensors. */
#define PROBLEM_PARAMS                                                                                              \
    __global const elem_t *q, __global const elem_t *k, __global const elem_t *v, __global const elem_t *o,          \
        __global const elem_t *d_o, __global const float *lse, __global float *delta, __global const float *alibi,   \
        __global const uchar *bias, const ulong q_off, const ulong k_off, const ulong v_off, const ulong o_off,      \
        const ulong do_off, const ulong lse_off, const ulong delta_off, const ulong alibi_off, const ulong bias_off, \
        const long4 q_stride,                                                                                       \
        const long4 k_stride, const long4 v_stride, const long4 o_stride, const long4 do_stride,                    \
        const long4 lse_stride, const long4 bias_stride, const long2 alibi_stride, const int seqlen_q,              \
        const int seqlen_k, const int heads_q, const int group, const int window_left, const int window_right,     \
        const float scale, const float softcap, const int flags

/* D_i = rowsum(dO_i * O_i) of (b, h, i). Global size (Sq, Hq, B). */
__kernel void xfa_bwd_delta(PROBLEM_PARAMS)
{
    const int i = (int)get_global_id(0), h = (int)get_global_id(1), b = (int)get_global_id(2);
    delta += delta_off;
    const long o_at = o_off + b * o_stride.s0 + (long)i * o_stride.s1 + h * o_stride.s2;
    const long do_at = do_off + b * do_stride.s0 + (long)i * do_stride.s1 + h * do_stride.s2;
    float sum = 0.0f;
    for (int x = 0; x < D; x++) sum = fma(LOAD(d_o, do_at + x * do_stride.s3), LOAD(o, o_at + x * o_stride.s3), sum);
    delta[((long)b * heads_q + h) * seqlen_q + i] = sum;
}

/* P_ij and dS_ij / scale of query row i (Q and dO rows in local memory) and key j (K, V rows),
 * as the forward computed P. */
static inline float2 p_and_ds(__local const float *Q_row, __local const float *dO_row, __local const float *K_row,
                              __local const float *V_row, const float lse_i, const float D_i, const int b, const int h,
                              const int i, const int j, const float slope, __global const uchar *bias,
                              const ulong bias_off, const long4 bias_stride, const int seqlen_q, const int seqlen_k,
                              const int window_left, const int window_right, const float scale, const float softcap,
                              const int flags)
{
    const int diag = i + seqlen_k - seqlen_q;
    const bool visible = (window_left < 0 || j >= diag - window_left) && (window_right < 0 || j <= diag + window_right);
    float p = 0.0f, dcap = 1.0f;
    if (visible && lse_i != -INFINITY) {
        float x = 0.0f;
        for (int c = 0; c < D; c++) x = fma(Q_row[c], K_row[c], x);
        x *= scale;
        float s = x;
        if (softcap > 0.0f) {
            const float th = tanh(x / softcap);
            s = softcap * th;
            dcap = 1.0f - th * th;
        }
        s -= slope * fabs((float)(diag - j));
        if (flags & HAS_BIAS) {
            const long at = (long)bias_off + b * bias_stride.s0 + (long)i * bias_stride.s1 + h * bias_stride.s2 +
                            (long)j * bias_stride.s3;
            s += (flags & BIAS_F32) ? ((__global const float *)bias)[at] : LOAD((__global const elem_t *)bias, at);
        }
        p = exp(s - lse_i);
    }
    float dp = 0.0f;
    for (int c = 0; c < D; c++) dp = fma(dO_row[c], V_row[c], dp);
    return (float2)(p, p * (dp - D_i) * dcap);
}

static inline float slope_of(__global const float *alibi, ulong alibi_off, long2 alibi_stride, int b, int h, int flags)
{
    return (flags & HAS_ALIBI) ? alibi[alibi_off + b * alibi_stride.s0 + h * alibi_stride.s1] : 0.0f;
}

/* dK, dV of BC keys of KV head hk. Work-group: BC * T items, grid (key blocks * WG, Hkv, B). */
__kernel __attribute__((reqd_work_group_size(BC * T, 1, 1))) void
xfa_bwd_kv(PROBLEM_PARAMS, __global elem_t *dk, __global elem_t *dv, const ulong dk_off, const ulong dv_off,
           const long4 dk_stride, const long4 dv_stride)
{
    __local float K_tile[BC * DP];
    __local float V_tile[BC * DP];
    __local float Q_tile[BR * DP];
    __local float dO_tile[BR * DP];
    __local float P[BR * BC];
    __local float dS[BR * BC];
    __local float lse_i[BR];
    __local float D_i[BR];

    const int WG = BC * T;
    delta += delta_off;
    const int lid = (int)get_local_id(0), c_own = lid / T, t = lid % T;
    const int col0 = (int)get_group_id(0) * BC, hk = (int)get_group_id(1), b = (int)get_group_id(2);
    const int cols = min(BC, seqlen_k - col0);
    const int diag = seqlen_k - seqlen_q;

    for (int x = lid; x < BC * D; x += WG) {
        const int cc = x / D, c = x % D;
        float kx = 0.0f, vx = 0.0f;
        if (cc < cols) {
            kx = LOAD(k, k_off + b * k_stride.s0 + (long)(col0 + cc) * k_stride.s1 + hk * k_stride.s2 + c * k_stride.s3);
            vx = LOAD(v, v_off + b * v_stride.s0 + (long)(col0 + cc) * v_stride.s1 + hk * v_stride.s2 + c * v_stride.s3);
        }
        K_tile[cc * DP + c] = kx;
        V_tile[cc * DP + c] = vx;
    }
    float dk_acc[COLS_PER_ITEM], dv_acc[COLS_PER_ITEM];
    for (int x = 0; x < COLS_PER_ITEM; x++) dk_acc[x] = dv_acc[x] = 0.0f;

    /* Query rows that may see a key of this block: row i sees keys from i + diag - window_left to
     * i + diag + window_right. */
    int row_begin = 0, row_end = seqlen_q;
    if (window_right >= 0) row_begin = clamp(col0 - diag - window_right, 0, seqlen_q);
    if (window_left >= 0) row_end = clamp(col0 + cols - 1 - diag + window_left + 1, 0, seqlen_q);
    row_begin = row_begin / BR * BR;

    for (int h = hk * group; h < (hk + 1) * group; h++) {
        const float slope = slope_of(alibi, alibi_off, alibi_stride, b, h, flags);
        for (int row0 = row_begin; row0 < row_end; row0 += BR) {
            const int rows = min(BR, seqlen_q - row0);
            barrier(CLK_LOCAL_MEM_FENCE); /* the previous query block is no longer read */
            for (int x = lid; x < BR * D; x += WG) {
                const int rr = x / D, c = x % D;
                float qx = 0.0f, dox = 0.0f;
                if (rr < rows) {
                    qx = LOAD(q, q_off + b * q_stride.s0 + (long)(row0 + rr) * q_stride.s1 + h * q_stride.s2 + c * q_stride.s3);
                    dox = LOAD(d_o, do_off + b * do_stride.s0 + (long)(row0 + rr) * do_stride.s1 + h * do_stride.s2 +
                                        c * do_stride.s3);
                }
                Q_tile[rr * DP + c] = qx;
                dO_tile[rr * DP + c] = dox;
            }
            for (int rr = lid; rr < BR; rr += WG) {
                lse_i[rr] = rr < rows ? lse[lse_off + b * lse_stride.s0 + (long)(row0 + rr) * lse_stride.s1 + h * lse_stride.s2]
                                      : -INFINITY;
                D_i[rr] = rr < rows ? delta[((long)b * heads_q + h) * seqlen_q + row0 + rr] : 0.0f;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int x = lid; x < BR * BC; x += WG) {
                const int rr = x / BC, cc = x % BC;
                float2 pds = (float2)(0.0f, 0.0f);
                if (rr < rows && cc < cols)
                    pds = p_and_ds(Q_tile + rr * DP, dO_tile + rr * DP, K_tile + cc * DP, V_tile + cc * DP, lse_i[rr],
                                   D_i[rr], b, h, row0 + rr, col0 + cc, slope, bias, bias_off, bias_stride, seqlen_q,
                                   seqlen_k, window_left, window_right, scale, softcap, flags);
                P[x] = pds.x;
                dS[x] = pds.y;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int rr = 0; rr < rows; rr++) {
                const float p = P[rr * BC + c_own], ds = dS[rr * BC + c_own] * scale;
                for (int x = 0; x < COLS_PER_ITEM; x++) {
                    dv_acc[x] = fma(p, dO_tile[rr * DP + t + x * T], dv_acc[x]);
                    dk_acc[x] = fma(ds, Q_tile[rr * DP + t + x * T], dk_acc[x]);
                }
            }
        }
    }
    if (c_own >= cols) return;
    const long dk_at = dk_off + b * dk_stride.s0 + (long)(col0 + c_own) * dk_stride.s1 + hk * dk_stride.s2;
    const long dv_at = dv_off + b * dv_stride.s0 + (long)(col0 + c_own) * dv_stride.s1 + hk * dv_stride.s2;
    for (int x = 0; x < COLS_PER_ITEM; x++) {
        STORE(dk, dk_at + (t + x * T) * dk_stride.s3, dk_acc[x]);
        STORE(dv, dv_at + (t + x * T) * dv_stride.s3, dv_acc[x]);
    }
}

/* dQ of BR query rows of head h. Work-group: BR * T items, grid (query blocks * WG, Hq, B). */
__kernel __attribute__((reqd_work_group_size(BR * T, 1, 1))) void
xfa_bwd_q(PROBLEM_PARAMS, __global elem_t *dq, const ulong dq_off, const long4 dq_stride)
{
    __local float K_tile[BC * DP];
    __local float V_tile[BC * DP];
    __local float Q_tile[BR * DP];
    __local float dO_tile[BR * DP];
    __local float dS[BR * BC];
    __local float lse_i[BR];
    __local float D_i[BR];

    const int WG = BR * T;
    delta += delta_off;
    const int lid = (int)get_local_id(0), r = lid / T, t = lid % T;
    const int row0 = (int)get_group_id(0) * BR, h = (int)get_group_id(1), b = (int)get_group_id(2);
    const int hk = h / group;
    const int rows = min(BR, seqlen_q - row0);
    const int diag = seqlen_k - seqlen_q;
    const float slope = slope_of(alibi, alibi_off, alibi_stride, b, h, flags);

    for (int x = lid; x < BR * D; x += WG) {
        const int rr = x / D, c = x % D;
        float qx = 0.0f, dox = 0.0f;
        if (rr < rows) {
            qx = LOAD(q, q_off + b * q_stride.s0 + (long)(row0 + rr) * q_stride.s1 + h * q_stride.s2 + c * q_stride.s3);
            dox = LOAD(d_o, do_off + b * do_stride.s0 + (long)(row0 + rr) * do_stride.s1 + h * do_stride.s2 + c * do_stride.s3);
        }
        Q_tile[rr * DP + c] = qx;
        dO_tile[rr * DP + c] = dox;
    }
    for (int rr = lid; rr < BR; rr += WG) {
        lse_i[rr] = rr < rows ? lse[lse_off + b * lse_stride.s0 + (long)(row0 + rr) * lse_stride.s1 + h * lse_stride.s2]
                              : -INFINITY;
        D_i[rr] = rr < rows ? delta[((long)b * heads_q + h) * seqlen_q + row0 + rr] : 0.0f;
    }
    float dq_acc[COLS_PER_ITEM];
    for (int x = 0; x < COLS_PER_ITEM; x++) dq_acc[x] = 0.0f;

    /* The keys some row of the block sees, as the forward skips them. */
    int key_begin = 0, key_end = seqlen_k;
    if (window_left >= 0) key_begin = max(row0 + diag - window_left, 0);
    if (window_right >= 0) key_end = clamp(row0 + rows - 1 + diag + window_right + 1, 0, seqlen_k);

    for (int col0 = key_begin; col0 < key_end; col0 += BC) {
        const int cols = min(BC, key_end - col0);
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous key block is no longer read (and Q, dO are loaded) */
        for (int x = lid; x < BC * D; x += WG) {
            const int cc = x / D, c = x % D;
            float kx = 0.0f, vx = 0.0f;
            if (cc < cols) {
                kx = LOAD(k, k_off + b * k_stride.s0 + (long)(col0 + cc) * k_stride.s1 + hk * k_stride.s2 + c * k_stride.s3);
                vx = LOAD(v, v_off + b * v_stride.s0 + (long)(col0 + cc) * v_stride.s1 + hk * v_stride.s2 + c * v_stride.s3);
            }
            K_tile[cc * DP + c] = kx;
            V_tile[cc * DP + c] = vx;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int cc = t; cc < BC; cc += T) {
            float ds = 0.0f;
            if (r < rows && cc < cols)
                ds = p_and_ds(Q_tile + r * DP, dO_tile + r * DP, K_tile + cc * DP, V_tile + cc * DP, lse_i[r], D_i[r], b,
                              h, row0 + r, col0 + cc, slope, bias, bias_off, bias_stride, seqlen_q, seqlen_k,
                              window_left, window_right, scale, softcap, flags)
                         .y;
            dS[r * BC + cc] = ds * scale;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int cc = 0; cc < cols; cc++) {
            const float ds = dS[r * BC + cc];
            for (int x = 0; x < COLS_PER_ITEM; x++) dq_acc[x] = fma(ds, K_tile[cc * DP + t + x * T], dq_acc[x]);
        }
    }
    if (r >= rows) return;
    const long dq_at = dq_off + b * dq_stride.s0 + (long)(row0 + r) * dq_stride.s1 + h * dq_stride.s2;
    for (int x = 0; x < COLS_PER_ITEM; x++) STORE(dq, dq_at + (t + x * T) * dq_stride.s3, dq_acc[x]);
}
