/*
 * flash_decode.cl - decoding against a KV cache on OpenCL (OpenCL C 1.2), as
 * cpu_decode.c does it: append the new tokens (xfa_kv_append), attend per
 * split of the cache (xfa_flash_decode), merge the splits by their LSE
 * (xfa_merge, also xfa_merge_partials).
 *
 * xfa_flash_decode: a work-group is (split x row block, KV head, sequence).
 * Its rows are the Sq new tokens of every query head that reads this KV head
 * (row r is token r % Sq of head hk * group + r / Sq), so each K/V block is
 * loaded once for the whole GQA group. Inside, the algorithm and the names are
 * flash_forward.cl's: T work-items per row, K/V blocks of BC keys in local
 * memory as f32, the online softmax (m_i, l_i, acc) in the log2 domain.
 * With one split (DIRECT) the rows are finished here (O in the dtype, LSE);
 * otherwise each split leaves its partial O (f32, normalised over its keys)
 * and LSE in scratch, rows [split][b][h][i], for xfa_merge.
 *
 * Lengths and page numbers live on the device and are clamped so that no
 * access leaves the cache (xfa.h): len = min(clamp(seqlens[b], 0, capacity)
 * + appended, capacity), page ids into 0 .. num_pages - 1.
 *
 * Build options: -DD= -DBR= -DBC= -DPAD= -DTHREADS_PER_ROW= -DXFA_DTYPE_F32|F16|BF16; the merge
 * alone: -DXFA_MERGE_ONLY -DXFA_DTYPE_... (any head dim, one build per dtype).
 */

#define T THREADS_PER_ROW
#define DP (D + PAD)
#define WG (BR * T)
#define COLS_PER_ITEM (D / T)

/* Storage words: f32 as is; f16 and bf16 as 16-bit words (copied raw by the append, converted
 * with vload_half/vstore_half or bit shifts: no cl_khr_fp16 needed). */
#if defined(XFA_DTYPE_F32)
typedef float store_t;
#define LOAD(p, i) ((p)[i])
#define STORE(p, i, x) ((p)[i] = (x))
#elif defined(XFA_DTYPE_F16)
typedef ushort store_t;
#define LOAD(p, i) vload_half((i), (__global const half *)(p))
#define STORE(p, i, x) vstore_half_rte((x), (i), (__global half *)(p))
#elif defined(XFA_DTYPE_BF16)
typedef ushort store_t;
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

#ifndef XFA_MERGE_ONLY

/* Bits of xfa_flash_decode's `flags` (opencl_decode.c sets them). */
#define HAS_LSE 1
#define HAS_ALIBI 2
#define CAUSAL 4
#define PAGED 8
#define DIRECT 16

/* The cache's first index for token j of sequence b: b itself, or the token's page (clamped). */
static inline long cache_batch(__global const int *block_table, ulong bt_off, long2 bt_stride, int b, int j,
                               int page_size, int num_pages, int paged)
{
    if (!paged) return b;
    return clamp(block_table[bt_off + b * bt_stride.s0 + (j / page_size) * bt_stride.s1], 0, num_pages - 1);
}

/* Elements per 16-byte load: 4 f32 or 8 16-bit words. */
#define VEC (16 / (int)sizeof(store_t))

/* VEC elements p[i .. i+VEC-1] (16-byte aligned, unit stride) as f32 into dst[0 .. VEC-1]: one load
 * instead of VEC, which is most of what a decode work-group does. */
static inline void load_vec(__global const store_t *p, long i, __local float *dst)
{
#if defined(XFA_DTYPE_F32)
    const float4 w = *(__global const float4 *)(p + i);
    dst[0] = w.s0;
    dst[1] = w.s1;
    dst[2] = w.s2;
    dst[3] = w.s3;
#else
    const uint4 w4 = *(__global const uint4 *)(p + i);
    const uint words[4] = {w4.s0, w4.s1, w4.s2, w4.s3};
    for (int e = 0; e < 4; e++) {
        const ushort lo = (ushort)(words[e] & 0xffffu), hi = (ushort)(words[e] >> 16);
#if defined(XFA_DTYPE_F16)
        dst[2 * e] = vload_half(0, (const __private half *)&lo);
        dst[2 * e + 1] = vload_half(0, (const __private half *)&hi);
#else
        dst[2 * e] = as_float((uint)lo << 16);
        dst[2 * e + 1] = as_float((uint)hi << 16);
#endif
    }
#endif
}

/* Writes the Sq new tokens of every KV head at positions seqlens[b] .. (past the capacity: dropped).
 * Global size (D, Sq * Hkv, B). */
__kernel void xfa_kv_append(__global const store_t *k_new, __global const store_t *v_new, __global store_t *k_cache,
                            __global store_t *v_cache, __global const int *seqlens, __global const int *block_table,
                            const ulong kn_off, const ulong vn_off, const ulong k_off, const ulong v_off,
                            const ulong len_off, const ulong bt_off, const long4 kn_stride, const long4 vn_stride,
                            const long4 k_stride, const long4 v_stride, const long len_stride, const long2 bt_stride,
                            const int heads_kv, const int capacity, const int page_size, const int num_pages,
                            const int paged)
{
    const int x = (int)get_global_id(0), th = (int)get_global_id(1), b = (int)get_global_id(2);
    const int t = th / heads_kv, h = th % heads_kv;
    const int pos = clamp(seqlens[len_off + b * len_stride], 0, capacity) + t;
    if (pos >= capacity) return;
    const long cb = cache_batch(block_table, bt_off, bt_stride, b, pos, page_size, num_pages, paged);
    const long row = paged ? pos % page_size : pos;
    k_cache[k_off + cb * k_stride.s0 + row * k_stride.s1 + h * k_stride.s2 + x * k_stride.s3] =
        k_new[kn_off + b * kn_stride.s0 + t * kn_stride.s1 + h * kn_stride.s2 + x * kn_stride.s3];
    v_cache[v_off + cb * v_stride.s0 + row * v_stride.s1 + h * v_stride.s2 + x * v_stride.s3] =
        v_new[vn_off + b * vn_stride.s0 + t * vn_stride.s1 + h * vn_stride.s2 + x * vn_stride.s3];
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
xfa_flash_decode(__global const store_t *q, __global const store_t *k, __global const store_t *v,
                 __global store_t *o, __global float *lse, __global float *part_o, __global float *part_lse,
                 __global const int *seqlens, __global const int *block_table, __global const float *alibi,
                 const ulong q_off, const ulong k_off, const ulong v_off, const ulong o_off, const ulong lse_off,
                 const ulong part_off, const ulong part_lse_off, const ulong len_off, const ulong bt_off,
                 const ulong alibi_off, const long4 q_stride, const long4 k_stride, const long4 v_stride,
                 const long4 o_stride, const long4 lse_stride, const long len_stride, const long2 bt_stride,
                 const long2 alibi_stride, const int batch, const int seqlen_q, const int heads_q, const int group,
                 const int capacity, const int page_size, const int num_pages, const int splits,
                 const int appended, const int window_left, const float q_scale, const float softcap,
                 const int flags)
{
    __local float Q_tile[BR * DP];
    __local float K_tile[BC * DP];
    __local float V_tile[BC * DP];
    __local float S[BR * BC];
    __local long key_batch[BC]; /* cache_batch() of each key of the block */

    const int lid = (int)get_local_id(0);
    const int r = lid / T, t = lid % T;
    const int Sq = seqlen_q, R = group * Sq; /* rows of this KV head */
    const int row_blocks = (R + BR - 1) / BR;
    const int split = (int)get_group_id(0) / row_blocks, row0 = ((int)get_group_id(0) % row_blocks) * BR;
    const int hk = (int)get_group_id(1), b = (int)get_group_id(2);
    const int rows = min(BR, R - row0);
    const int row = row0 + r;
    const int i = row % Sq, h = hk * group + row / Sq; /* meaningful for r < rows */
    const int paged = (flags & PAGED) != 0;

    const int len = min(clamp(seqlens[len_off + b * len_stride], 0, capacity) + appended, capacity);
    /* This split's keys: chunks of whole K/V blocks, so only a split's last block is ragged. */
    int chunk = (len + splits - 1) / splits;
    chunk = (chunk + BC - 1) / BC * BC;
    const int key_begin = min(split * chunk, len), key_end = min(key_begin + chunk, len);

    for (int x = lid; x < BR * D; x += WG) {
        const int rr = x / D, c = x % D;
        float val = 0.0f;
        if (rr < rows) {
            const int qi = (row0 + rr) % Sq, qh = hk * group + (row0 + rr) / Sq;
            val = LOAD(q, q_off + b * q_stride.s0 + qi * q_stride.s1 + qh * q_stride.s2 + c * q_stride.s3) * q_scale;
        }
        Q_tile[rr * DP + c] = val;
    }

    /* Row i's diagonal is cache token i + len - Sq: causal hides later keys, the window earlier ones. */
    const int diag = len - Sq;
    int lo = window_left >= 0 ? i + diag - window_left : 0;
    int hi = (flags & CAUSAL) ? i + diag : len - 1;
    if (r >= rows) hi = lo - 1; /* padding rows see nothing */
    /* Keys before every row's window are skipped (row tokens are 0 .. Sq - 1). */
    const int block_begin = window_left >= 0 ? max(key_begin, diag - window_left) : key_begin;
    const bool extras = softcap > 0.0f || (flags & HAS_ALIBI);
    const float slope = (flags & HAS_ALIBI) && r < rows ? alibi[alibi_off + b * alibi_stride.s0 + h * alibi_stride.s1] : 0.0f;

    float m_i = -INFINITY, l_i = 0.0f;
    float acc[COLS_PER_ITEM];
    for (int x = 0; x < COLS_PER_ITEM; x++) acc[x] = 0.0f;
    /* Cache rows that start on 16-byte boundaries with unit dim stride load VEC elements at a time. */
    const bool kv_vec = k_stride.s3 == 1 && v_stride.s3 == 1 && (k_off % VEC) == 0 && (v_off % VEC) == 0 &&
                        ((k_stride.s0 | k_stride.s1 | k_stride.s2) % VEC) == 0 &&
                        ((v_stride.s0 | v_stride.s1 | v_stride.s2) % VEC) == 0;

    for (int col0 = block_begin; col0 < key_end; col0 += BC) {
        const int cols = min(BC, key_end - col0);
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous block's K, V, S and pages are no longer read */
        for (int c = lid; c < cols; c += WG)
            key_batch[c] = cache_batch(block_table, bt_off, bt_stride, b, col0 + c, page_size, num_pages, paged);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (kv_vec) {
            for (int x = lid; x < BC * (D / VEC); x += WG) {
                const int cc = x / (D / VEC), c = x % (D / VEC) * VEC;
                if (cc < cols) {
                    const long j = col0 + cc, in_page = paged ? j % page_size : j;
                    load_vec(k, k_off + key_batch[cc] * k_stride.s0 + in_page * k_stride.s1 + hk * k_stride.s2 + c,
                             K_tile + cc * DP + c);
                    load_vec(v, v_off + key_batch[cc] * v_stride.s0 + in_page * v_stride.s1 + hk * v_stride.s2 + c,
                             V_tile + cc * DP + c);
                } else {
                    for (int e = 0; e < VEC; e++) K_tile[cc * DP + c + e] = V_tile[cc * DP + c + e] = 0.0f;
                }
            }
        } else {
            for (int x = lid; x < BC * D; x += WG) {
                const int cc = x / D, c = x % D;
                float kx = 0.0f, vx = 0.0f;
                if (cc < cols) {
                    const long j = col0 + cc, in_page = paged ? j % page_size : j;
                    kx = LOAD(k, k_off + key_batch[cc] * k_stride.s0 + in_page * k_stride.s1 + hk * k_stride.s2 + c * k_stride.s3);
                    vx = LOAD(v, v_off + key_batch[cc] * v_stride.s0 + in_page * v_stride.s1 + hk * v_stride.s2 + c * v_stride.s3);
                }
                K_tile[cc * DP + c] = kx;
                V_tile[cc * DP + c] = vx;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        const int c_lo = max(lo - col0, 0), c_hi = min(hi - col0, cols - 1);
        for (int j = t; j < BC; j += T) {
            float s = -INFINITY;
            if (j >= c_lo && j <= c_hi) {
                s = 0.0f;
                for (int x = 0; x < D; x++) s = fma(Q_tile[r * DP + x], K_tile[j * DP + x], s);
                if (extras) {
                    if (softcap > 0.0f) s = softcap * tanh(s / softcap);
                    s -= slope * fabs((float)(i + diag - (col0 + j)));
                    s *= M_LOG2E_F;
                }
            }
            S[r * BC + j] = s;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        float row_max = -INFINITY;
        for (int j = c_lo; j <= c_hi; j++) row_max = fmax(row_max, S[r * BC + j]);
        const float m_new = fmax(m_i, row_max);
        if (m_new == -INFINITY) continue; /* nothing visible yet: keep the starting state */
        const float alpha = exp2(m_i - m_new);
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
    const float inv_l = l_i > 0.0f ? 1.0f / l_i : 0.0f; /* a split (or row) that sees nothing: 0, LSE -inf */
    const float row_lse = l_i > 0.0f ? (m_i + log2(l_i)) * M_LN2_F : -INFINITY;
    if (flags & DIRECT) {
        const long at = o_off + b * o_stride.s0 + i * o_stride.s1 + h * o_stride.s2;
        for (int x = 0; x < COLS_PER_ITEM; x++) STORE(o, at + (t + x * T) * o_stride.s3, acc[x] * inv_l);
        if ((flags & HAS_LSE) && t == 0) lse[lse_off + b * lse_stride.s0 + i * lse_stride.s1 + h * lse_stride.s2] = row_lse;
        return;
    }
    const long part_row = (((long)split * batch + b) * heads_q + h) * Sq + i;
    for (int x = 0; x < COLS_PER_ITEM; x++) part_o[part_off + part_row * D + t + x * T] = acc[x] * inv_l;
    if (t == 0) part_lse[part_lse_off + part_row] = row_lse;
}

#endif /* XFA_MERGE_ONLY */

/* Bits of xfa_merge's `flags`. */
#define PART_F32 1
#define OUT_F32 2
#define HAS_PREV 4
#define OUT_LSE 8

/*
 * O = sum_s exp(LSE_s - LSE) O_s over n parts (part_step elements apart, LSEs part_lse_step apart),
 * and optionally a previous running result (compact f32 rows (b, s, h) of `dim`, HAS_PREV), with
 * LSE = log sum_s exp(LSE_s); parts with LSE -inf add nothing, all -inf gives O = 0, LSE = -inf.
 * Global size (dim, seqlen * heads, batch); the parts' dtype is f32 or the storage dtype.
 */
__kernel void xfa_merge(__global const uchar *parts, __global const float *part_lse, __global const float *prev_o,
                        __global const float *prev_lse, __global uchar *out, __global float *out_lse,
                        const ulong part_off, const ulong part_lse_off, const ulong prev_off, const ulong prev_lse_off,
                        const ulong out_off, const ulong out_lse_off,
                        const long4 p_stride, const long part_step, const long4 pl_stride, const long part_lse_step,
                        const long4 o_stride, const long4 ol_stride, const int n, const int heads, const int flags)
{
    const int x = (int)get_global_id(0), sh = (int)get_global_id(1), b = (int)get_global_id(2);
    const int dim = (int)get_global_size(0), seqlen = (int)get_global_size(1) / heads;
    const int s = sh / heads, h = sh % heads;
    const long p_at = part_off + b * p_stride.s0 + s * p_stride.s1 + h * p_stride.s2 + x * p_stride.s3;
    const long pl_at = part_lse_off + b * pl_stride.s0 + s * pl_stride.s1 + h * pl_stride.s2;
    const long prev_row = ((long)b * seqlen + s) * heads + h;
    prev_o += prev_off;
    prev_lse += prev_lse_off;
    const bool prev = (flags & HAS_PREV) != 0;

    float lse_max = prev ? prev_lse[prev_row] : -INFINITY;
    for (int p = 0; p < n; p++) lse_max = fmax(lse_max, part_lse[pl_at + p * part_lse_step]);
    float val = 0.0f, merged = -INFINITY;
    if (lse_max != -INFINITY) {
        float sum = prev ? exp(prev_lse[prev_row] - lse_max) : 0.0f;
        for (int p = 0; p < n; p++) sum += exp(part_lse[pl_at + p * part_lse_step] - lse_max);
        merged = lse_max + log(sum);
        if (prev && prev_lse[prev_row] != -INFINITY) val = exp(prev_lse[prev_row] - merged) * prev_o[prev_row * dim + x];
        for (int p = 0; p < n; p++) {
            const float l = part_lse[pl_at + p * part_lse_step];
            if (l == -INFINITY) continue;
            const long at = p_at + p * part_step;
            const float part = (flags & PART_F32) ? ((__global const float *)parts)[at]
                                                  : LOAD((__global const store_t *)parts, at);
            val += exp(l - merged) * part;
        }
    }
    const long o_at = out_off + b * o_stride.s0 + s * o_stride.s1 + h * o_stride.s2 + x * o_stride.s3;
    if (flags & OUT_F32) ((__global float *)out)[o_at] = val;
    else STORE((__global store_t *)out, o_at, val);
    if ((flags & OUT_LSE) && x == 0) out_lse[out_lse_off + b * ol_stride.s0 + s * ol_stride.s1 + h * ol_stride.s2] = merged;
}
