/*
 * backward.cu - FlashAttention-2's backward on CUDA, the generic kernels: any
 * dtype, strides, alignment and head dim, every feature (window, softcap,
 * ALiBi, bias), computed in f32 on the CUDA cores. The algorithm and the
 * semantics of cl/flash_backward.cl: P is recomputed block by block from Q, K
 * and the forward's LSE, so no Sq x Sk matrix exists; deterministic, since each
 * block owns what it writes (no atomics):
 *   delta_kernel: D_i = rowsum(dO_i * O_i), f32 in scratch [b][h][i] (every path's first launch);
 *   kv_kernel:    per K/V block (Bc keys of KV head hk), dV_j = sum_i P_ij dO_i and
 *                 dK_j = scale sum_i dS_ij Q_i over every query row of the GQA group
 *                 (the group's heads are looped over inside the block, in order);
 *   q_kernel:     per query block (Br rows of head h), dQ_i = scale sum_j dS_ij K_j,
 * with dS_ij = P_ij (dO_i . V_j - D_i) * dcap_ij (softcap's derivative).
 *
 * T = 8 threads per row (key row in kv_kernel, query row in q_kernel) each own
 * D/T columns of their accumulator, columns t, t+T, ...
 * Shared memory (both kernels, as the host's "generic-backward" tile layout
 * describes it): K, V (Bc x (D+1)), Q, dO (Br x (D+1)), P, dS (Br x Bc), lse_i, D_i (Br), f32.
 */
#include "backward_launch.h"
#include "device_util.cuh"

#include <cuda_runtime.h>

namespace {

constexpr int T = XFA_CUDA_BACKWARD_THREADS_PER_ROW;
constexpr int MAX_COLS = 256 / T; /* accumulator entries per thread at the largest head dim */

__device__ __forceinline__ int64_t at4(const int64_t *s, int64_t b, int64_t i, int64_t h, int64_t d)
{
    return b * s[0] + i * s[1] + h * s[2] + d * s[3];
}

/* One warp per query row: D_i = sum_x dO_ix O_ix. Block: 4 warps = 4 rows; grid (rows/4, Hq, B). */
template <typename E> __global__ void delta_kernel(const xfa_cuda_backward p)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int i = blockIdx.x * 4 + warp, h = blockIdx.y, b = blockIdx.z;
    if (i >= p.seqlen_q) return;
    const E *o = static_cast<const E *>(p.o) + at4(p.o_stride, b, i, h, 0);
    const E *d_o = static_cast<const E *>(p.d_o) + at4(p.do_stride, b, i, h, 0);
    float sum = 0.0f;
    for (int x = lane; x < p.head_dim; x += 32)
        sum = fmaf(xfa::to_f32(d_o[x * p.do_stride[3]]), xfa::to_f32(o[x * p.o_stride[3]]), sum);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0) p.delta[((int64_t)b * p.heads_q + h) * p.seqlen_q + i] = sum;
}

__device__ __forceinline__ float slope_of(const xfa_cuda_backward &p, int b, int h)
{
    return p.alibi ? p.alibi[b * p.alibi_stride[0] + h * p.alibi_stride[1]] : 0.0f;
}

/* P_ij and dS_ij / scale of query row i (Q and dO rows in shared memory) and key j (K, V rows),
 * exactly as the forward defines the score: s = scale q.k, softcap, ALiBi, bias, masked outside
 * the window; P = exp(s - lse). */
template <typename E>
__device__ float2 p_and_ds(const xfa_cuda_backward &p, const float *Q_row, const float *dO_row, const float *K_row,
                           const float *V_row, float lse_i, float D_i, int b, int h, int i, int j, float slope)
{
    const int D = p.head_dim;
    const int diag = i + p.seqlen_k - p.seqlen_q;
    const bool visible = (p.window_left < 0 || j >= diag - p.window_left) &&
                         (p.window_right < 0 || j <= diag + p.window_right);
    float prob = 0.0f, dcap = 1.0f;
    if (visible && lse_i != -INFINITY) {
        float x = 0.0f;
        for (int c = 0; c < D; c++) x = fmaf(Q_row[c], K_row[c], x);
        x *= p.scale;
        float s = x;
        if (p.softcap > 0.0f) {
            const float th = tanhf(x / p.softcap);
            s = p.softcap * th;
            dcap = 1.0f - th * th;
        }
        s -= slope * fabsf((float)(diag - j));
        if (p.bias) {
            const int64_t at = at4(p.bias_stride, b, i, h, j);
            s += p.bias_f32 ? static_cast<const float *>(p.bias)[at] : xfa::to_f32(static_cast<const E *>(p.bias)[at]);
        }
        prob = expf(s - lse_i);
    }
    float dp = 0.0f;
    for (int c = 0; c < D; c++) dp = fmaf(dO_row[c], V_row[c], dp);
    return make_float2(prob, prob * (dp - D_i) * dcap);
}

/* Rows row0..row0+rows-1 of a (b, ., h, D) view into a ROWS x DP f32 tile (zeros past `rows`). */
template <typename E>
__device__ void load_rows(float *tile, const E *src, const int64_t *stride, int b, int h, int row0, int rows,
                          int ROWS, int D, int DP, int lid, int wg)
{
    for (int x = lid; x < ROWS * D; x += wg) {
        const int rr = x / D, c = x % D;
        tile[rr * DP + c] = rr < rows ? xfa::to_f32(src[at4(stride, b, row0 + rr, h, c)]) : 0.0f;
    }
}

/* dK, dV of Bc keys of KV head hk. Block: Bc * T threads; grid (key blocks, Hkv, B). */
template <typename E> __global__ void kv_kernel(const xfa_cuda_backward p)
{
    extern __shared__ float smem[];
    const int D = p.head_dim, DP = D + 1, Br = p.Br, Bc = p.Bc;
    float *K_tile = smem, *V_tile = K_tile + Bc * DP, *Q_tile = V_tile + Bc * DP, *dO_tile = Q_tile + Br * DP;
    float *P = dO_tile + Br * DP, *dS = P + Br * Bc, *lse_i = dS + Br * Bc, *D_i = lse_i + Br;

    const int lid = threadIdx.x, wg = blockDim.x;
    const int c_own = lid / T, t = lid % T;
    const int col0 = blockIdx.x * Bc, hk = blockIdx.y, b = blockIdx.z;
    const int cols = min(Bc, p.seqlen_k - col0);
    const int seqlen_q = p.seqlen_q, diag = p.seqlen_k - seqlen_q;
    const int group = p.heads_q / p.heads_kv, cols_per_item = D / T;

    load_rows(K_tile, static_cast<const E *>(p.k), p.k_stride, b, hk, col0, cols, Bc, D, DP, lid, wg);
    load_rows(V_tile, static_cast<const E *>(p.v), p.v_stride, b, hk, col0, cols, Bc, D, DP, lid, wg);
    float dk_acc[MAX_COLS], dv_acc[MAX_COLS];
#pragma unroll
    for (int x = 0; x < MAX_COLS; x++) dk_acc[x] = dv_acc[x] = 0.0f;

    /* Query rows that may see a key of this block: row i sees keys from i + diag - window_left to
     * i + diag + window_right. */
    int row_begin = 0, row_end = seqlen_q;
    if (p.window_right >= 0) row_begin = min(max(col0 - diag - p.window_right, 0), seqlen_q);
    if (p.window_left >= 0) row_end = min(max(col0 + cols - 1 - diag + p.window_left + 1, 0), seqlen_q);
    row_begin = row_begin / Br * Br;

    for (int h = hk * group; h < (hk + 1) * group; h++) {
        const float slope = slope_of(p, b, h);
        for (int row0 = row_begin; row0 < row_end; row0 += Br) {
            const int rows = min(Br, seqlen_q - row0);
            __syncthreads(); /* the previous query block is no longer read */
            load_rows(Q_tile, static_cast<const E *>(p.q), p.q_stride, b, h, row0, rows, Br, D, DP, lid, wg);
            load_rows(dO_tile, static_cast<const E *>(p.d_o), p.do_stride, b, h, row0, rows, Br, D, DP, lid, wg);
            for (int rr = lid; rr < Br; rr += wg) {
                lse_i[rr] = rr < rows ? p.lse[b * p.lse_stride[0] + (int64_t)(row0 + rr) * p.lse_stride[1] +
                                              h * p.lse_stride[2]]
                                      : -INFINITY;
                D_i[rr] = rr < rows ? p.delta[((int64_t)b * p.heads_q + h) * seqlen_q + row0 + rr] : 0.0f;
            }
            __syncthreads();
            for (int x = lid; x < Br * Bc; x += wg) {
                const int rr = x / Bc, cc = x % Bc;
                float2 pds = make_float2(0.0f, 0.0f);
                if (rr < rows && cc < cols)
                    pds = p_and_ds<E>(p, Q_tile + rr * DP, dO_tile + rr * DP, K_tile + cc * DP, V_tile + cc * DP,
                                      lse_i[rr], D_i[rr], b, h, row0 + rr, col0 + cc, slope);
                P[x] = pds.x;
                dS[x] = pds.y;
            }
            __syncthreads();
            for (int rr = 0; rr < rows; rr++) {
                const float pr = P[rr * Bc + c_own], ds = dS[rr * Bc + c_own] * p.scale;
#pragma unroll
                for (int x = 0; x < MAX_COLS; x++)
                    if (x < cols_per_item) {
                        dv_acc[x] = fmaf(pr, dO_tile[rr * DP + t + x * T], dv_acc[x]);
                        dk_acc[x] = fmaf(ds, Q_tile[rr * DP + t + x * T], dk_acc[x]);
                    }
            }
        }
    }
    if (c_own >= cols) return;
    E *dk = static_cast<E *>(p.dk) + at4(p.dk_stride, b, col0 + c_own, hk, 0);
    E *dv = static_cast<E *>(p.dv) + at4(p.dv_stride, b, col0 + c_own, hk, 0);
#pragma unroll
    for (int x = 0; x < MAX_COLS; x++)
        if (x < cols_per_item) {
            dk[(t + x * T) * p.dk_stride[3]] = xfa::from_f32<E>(dk_acc[x]);
            dv[(t + x * T) * p.dv_stride[3]] = xfa::from_f32<E>(dv_acc[x]);
        }
}

/* dQ of Br query rows of head h. Block: Br * T threads; grid (query blocks, Hq, B). */
template <typename E> __global__ void q_kernel(const xfa_cuda_backward p)
{
    extern __shared__ float smem[];
    const int D = p.head_dim, DP = D + 1, Br = p.Br, Bc = p.Bc;
    float *K_tile = smem, *V_tile = K_tile + Bc * DP, *Q_tile = V_tile + Bc * DP, *dO_tile = Q_tile + Br * DP;
    float *dS = dO_tile + Br * DP, *lse_i = dS + Br * Bc, *D_i = lse_i + Br;

    const int lid = threadIdx.x, wg = blockDim.x;
    const int r = lid / T, t = lid % T;
    const int row0 = blockIdx.x * Br, h = blockIdx.y, b = blockIdx.z;
    const int hk = h / (p.heads_q / p.heads_kv);
    const int rows = min(Br, p.seqlen_q - row0);
    const int diag = p.seqlen_k - p.seqlen_q, cols_per_item = D / T;
    const float slope = slope_of(p, b, h);

    load_rows(Q_tile, static_cast<const E *>(p.q), p.q_stride, b, h, row0, rows, Br, D, DP, lid, wg);
    load_rows(dO_tile, static_cast<const E *>(p.d_o), p.do_stride, b, h, row0, rows, Br, D, DP, lid, wg);
    for (int rr = lid; rr < Br; rr += wg) {
        lse_i[rr] = rr < rows ? p.lse[b * p.lse_stride[0] + (int64_t)(row0 + rr) * p.lse_stride[1] + h * p.lse_stride[2]]
                              : -INFINITY;
        D_i[rr] = rr < rows ? p.delta[((int64_t)b * p.heads_q + h) * p.seqlen_q + row0 + rr] : 0.0f;
    }
    float dq_acc[MAX_COLS];
#pragma unroll
    for (int x = 0; x < MAX_COLS; x++) dq_acc[x] = 0.0f;

    /* The keys some row of the block sees. */
    int key_begin = 0, key_end = p.seqlen_k;
    if (p.window_left >= 0) key_begin = max(row0 + diag - p.window_left, 0);
    if (p.window_right >= 0) key_end = min(max(row0 + rows - 1 + diag + p.window_right + 1, 0), p.seqlen_k);

    for (int col0 = key_begin; col0 < key_end; col0 += Bc) {
        const int cols = min(Bc, key_end - col0);
        __syncthreads(); /* the previous key block is no longer read (and Q, dO are loaded) */
        load_rows(K_tile, static_cast<const E *>(p.k), p.k_stride, b, hk, col0, cols, Bc, D, DP, lid, wg);
        load_rows(V_tile, static_cast<const E *>(p.v), p.v_stride, b, hk, col0, cols, Bc, D, DP, lid, wg);
        __syncthreads();
        for (int cc = t; cc < Bc; cc += T) {
            float ds = 0.0f;
            if (r < rows && cc < cols)
                ds = p_and_ds<E>(p, Q_tile + r * DP, dO_tile + r * DP, K_tile + cc * DP, V_tile + cc * DP, lse_i[r],
                                 D_i[r], b, h, row0 + r, col0 + cc, slope)
                         .y;
            dS[r * Bc + cc] = ds * p.scale;
        }
        __syncthreads();
        for (int cc = 0; cc < cols; cc++) {
            const float ds = dS[r * Bc + cc];
#pragma unroll
            for (int x = 0; x < MAX_COLS; x++)
                if (x < cols_per_item) dq_acc[x] = fmaf(ds, K_tile[cc * DP + t + x * T], dq_acc[x]);
        }
    }
    if (r >= rows) return;
    E *dq = static_cast<E *>(p.dq) + at4(p.dq_stride, b, row0 + r, h, 0);
#pragma unroll
    for (int x = 0; x < MAX_COLS; x++)
        if (x < cols_per_item) dq[(t + x * T) * p.dq_stride[3]] = xfa::from_f32<E>(dq_acc[x]);
}

template <typename E> xfa_cuda_result launch_delta(const xfa_cuda_backward *p, cudaStream_t stream)
{
    const dim3 grid((unsigned)((p->seqlen_q + 3) / 4), (unsigned)p->heads_q, (unsigned)p->batch);
    delta_kernel<E><<<grid, 128, 0, stream>>>(*p);
    return (xfa_cuda_result)cudaGetLastError();
}

template <typename E> xfa_cuda_result launch_generic(const xfa_cuda_backward *p, cudaStream_t stream)
{
    const int DP = p->head_dim + 1, Br = p->Br, Bc = p->Bc;
    /* kv_kernel's footprint; q_kernel's is smaller by the P tile. */
    const size_t smem = sizeof(float) * ((size_t)(2 * Bc + 2 * Br) * DP + 2 * (size_t)Br * Bc + 2 * (size_t)Br);
    cudaError_t err = cudaSuccess;
    if (smem > 48 * 1024) {
        err = cudaFuncSetAttribute(kv_kernel<E>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err == cudaSuccess)
            err = cudaFuncSetAttribute(q_kernel<E>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    }
    if (err != cudaSuccess) return (xfa_cuda_result)err;
    const dim3 kv_grid((unsigned)((p->seqlen_k + Bc - 1) / Bc), (unsigned)p->heads_kv, (unsigned)p->batch);
    kv_kernel<E><<<kv_grid, Bc * T, smem, stream>>>(*p);
    if ((err = cudaGetLastError()) != cudaSuccess) return (xfa_cuda_result)err;
    const dim3 q_grid((unsigned)((p->seqlen_q + Br - 1) / Br), (unsigned)p->heads_q, (unsigned)p->batch);
    q_kernel<E><<<q_grid, Br * T, smem, stream>>>(*p);
    return (xfa_cuda_result)cudaGetLastError();
}

} // namespace

extern "C" xfa_cuda_result xfa_cuda_backward_delta(const xfa_cuda_backward *p, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    switch (p->dtype) {
    case XFA_CUDA_F32: return launch_delta<float>(p, s);
    case XFA_CUDA_F16: return launch_delta<__half>(p, s);
    case XFA_CUDA_BF16: return launch_delta<__nv_bfloat16>(p, s);
    }
    return XFA_CUDA_NOT_HANDLED;
}

extern "C" xfa_cuda_result xfa_cuda_backward_generic(const xfa_cuda_backward *p, void *stream)
{
    if (p->head_dim % T || p->head_dim > 256 || p->Br <= 0 || p->Bc <= 0) return XFA_CUDA_NOT_HANDLED;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    switch (p->dtype) {
    case XFA_CUDA_F32: return launch_generic<float>(p, s);
    case XFA_CUDA_F16: return launch_generic<__half>(p, s);
    case XFA_CUDA_BF16: return launch_generic<__nv_bfloat16>(p, s);
    }
    return XFA_CUDA_NOT_HANDLED;
}
