/*
 * generic.cu - the CUDA fallback forward kernel: any GPU CUDA runs on, f32,
 * f16 or bf16 in any strides and alignment, head dims up to 256, computed in
 * f32 on the CUDA cores. The same algorithm as cl/flash_forward.cl.
 *
 * A work-group owns Br query rows of one (batch, head); T = 8 threads share
 * each row. K/V stream through shared memory (as f32) in blocks of Bc rows.
 * Shared memory, as the host's "generic" tile layout (src/host/cuda_device.c)
 * describes it: Q_tile Br x (D+1), K_tile and V_tile Bc x (D+1), S Br x Bc,
 * all f32; the +1 keeps the 8 threads of a row on distinct banks.
 * Scores are in the log2 domain (scale·log2(e) folded into Q_tile, or applied
 * after softcap, ALiBi and bias), so the softmax uses exp2. Windows, causal,
 * the extras and packed variable-length batches as in cl/flash_forward.cl
 * (cuda/extras.cuh): K/V blocks outside every row's window are not loaded.
 */
#include "device_util.cuh"
#include "extras.cuh"
#include "launch.h"

#include <cuda_runtime.h>

namespace {

constexpr int T = XFA_CUDA_GENERIC_THREADS_PER_ROW;
constexpr int MAX_COLS = 256 / T; /* acc entries per thread at the largest head dim */

/* The generic layout's largest tile is Br = 64 rows of T threads (src/host/cuda_device.c). */
template <typename E>
__global__ void __launch_bounds__(64 * T) generic_forward_kernel(const xfa_cuda_forward p)
{
    extern __shared__ float smem[];
    const int D = p.head_dim, DP = D + 1, Br = p.Br, Bc = p.Bc;
    float *Q_tile = smem;
    float *K_tile = Q_tile + Br * DP;
    float *V_tile = K_tile + Bc * DP;
    float *S = V_tile + Bc * DP;

    const int lid = threadIdx.x, wg = blockDim.x;
    const int r = lid / T, t = lid % T;
    const int h = blockIdx.y;
    const int hk = h / (p.heads_q / p.heads_kv);
    const xfa::sequence_span seq = xfa::sequence_of(p, (int)blockIdx.z);
    const int b = seq.b, Sq = seq.seqlen_q, Sk = seq.seqlen_k;
    const int row0 = blockIdx.x * Br;
    if (row0 >= Sq) return; /* the whole work-group: past this sequence's rows (packed batches) */
    const int rows = min(Br, Sq - row0);

    const E *q = static_cast<const E *>(p.q) + b * p.q_stride[0] + seq.q0 * p.q_stride[1] + h * p.q_stride[2];
    const E *k = static_cast<const E *>(p.k) + b * p.k_stride[0] + seq.k0 * p.k_stride[1] + hk * p.k_stride[2];
    const E *v = static_cast<const E *>(p.v) + b * p.v_stride[0] + seq.k0 * p.v_stride[1] + hk * p.v_stride[2];
    /* Without softcap, ALiBi or bias, scale·log2(e) is folded into Q; with them the score is
     * finished in natural units first (xfa::score_extras), then turned into log2 units. */
    const bool extras = xfa::has_score_extras(p);
    const xfa::score_extras<E> extra = xfa::score_extras_of<E>(p, b, h);
    const float q_scale = extras ? p.scale : p.scale * 1.4426950408889634f;

    for (int i = lid; i < Br * D; i += wg) {
        const int rr = i / D, c = i % D;
        Q_tile[rr * DP + c] =
            rr < rows ? xfa::to_f32(q[(int64_t)(row0 + rr) * p.q_stride[1] + c * p.d_stride[0]]) * q_scale : 0.0f;
    }

    /* Row i's diagonal is key i + diag; its window is lo..hi. Blocks of keys no row of the
     * work-group sees are never loaded: the loop covers key_begin..key_end-1 only. */
    const xfa::window w = xfa::window_of(p);
    const int diag = Sk - Sq;
    const int my_row = row0 + r;
    int key_begin = 0, key_end = Sk;
    if (w.left >= 0) key_begin = max(row0 + diag - w.left, 0);
    if (w.right >= 0) key_end = xfa::clamp_int(row0 + rows - 1 + diag + w.right + 1, 0, Sk);
    const int lo = w.left >= 0 ? my_row + diag - w.left : 0;
    const int hi = r >= rows ? lo - 1 /* padding rows see nothing */
                   : w.right >= 0 ? min(my_row + diag + w.right, Sk - 1)
                                  : Sk - 1;
    const int cols_per_item = D / T;

    float m_i = -INFINITY, l_i = 0.0f;
    float acc[MAX_COLS];
#pragma unroll
    for (int x = 0; x < MAX_COLS; x++) acc[x] = 0.0f;

    for (int col0 = key_begin; col0 < key_end; col0 += Bc) {
        const int cols = min(Bc, key_end - col0);
        __syncthreads(); /* the previous block is no longer read */
        for (int i = lid; i < Bc * D; i += wg) {
            const int cc = i / D, c = i % D;
            float kx = 0.0f, vx = 0.0f;
            if (cc < cols) {
                kx = xfa::to_f32(k[(int64_t)(col0 + cc) * p.k_stride[1] + c * p.d_stride[1]]);
                vx = xfa::to_f32(v[(int64_t)(col0 + cc) * p.v_stride[1] + c * p.d_stride[2]]);
            }
            K_tile[cc * DP + c] = kx;
            V_tile[cc * DP + c] = vx;
        }
        __syncthreads();

        /* This row's visible keys in this block, relative to col0 (c_lo > c_hi: none). */
        const int c_lo = max(lo - col0, 0), c_hi = min(hi - col0, cols - 1);
        for (int j = t; j < Bc; j += T) {
            float s = -INFINITY;
            if (j >= c_lo && j <= c_hi) {
                s = 0.0f;
                for (int x = 0; x < D; x++) s = fmaf(Q_tile[r * DP + x], K_tile[j * DP + x], s);
                if (extras) s = extra.apply(s, my_row, col0 + j, diag);
            }
            S[r * Bc + j] = s;
        }
        __syncthreads();

        float row_max = -INFINITY;
        for (int j = c_lo; j <= c_hi; j++) row_max = fmaxf(row_max, S[r * Bc + j]);
        const float m_new = fmaxf(m_i, row_max);
        if (m_new == -INFINITY) continue; /* nothing visible yet (or all masked): keep the starting state */
        const float alpha = exp2f(m_i - m_new); /* rescales what was accumulated under the old max */
#pragma unroll
        for (int x = 0; x < MAX_COLS; x++) acc[x] *= alpha;
        float row_sum = 0.0f;
        for (int j = c_lo; j <= c_hi; j++) {
            const float pj = exp2f(S[r * Bc + j] - m_new);
            row_sum += pj;
#pragma unroll
            for (int x = 0; x < MAX_COLS; x++)
                if (x < cols_per_item) acc[x] = fmaf(pj, V_tile[j * DP + t + x * T], acc[x]);
        }
        l_i = l_i * alpha + row_sum;
        m_i = m_new;
    }

    if (r >= rows) return;
    const int64_t out_row = seq.q0 + my_row; /* the row in the packed o and lse */
    E *o = static_cast<E *>(p.o) + b * p.o_stride[0] + out_row * p.o_stride[1] + h * p.o_stride[2];
    const float inv_l = l_i > 0.0f ? 1.0f / l_i : 0.0f; /* rows that see nothing: O = 0 */
#pragma unroll
    for (int x = 0; x < MAX_COLS; x++)
        if (x < cols_per_item) o[(int64_t)(t + x * T) * p.d_stride[3]] = xfa::from_f32<E>(acc[x] * inv_l);
    if (p.lse && t == 0)
        p.lse[b * p.lse_stride[0] + out_row * p.lse_stride[1] + h * p.lse_stride[2]] =
            l_i > 0.0f ? (m_i + log2f(l_i)) * 0.6931471805599453f : -INFINITY;
}

template <typename E> xfa_cuda_result launch(const xfa_cuda_forward *p, cudaStream_t stream)
{
    const int D = p->head_dim, DP = D + 1;
    const size_t smem = sizeof(float) * ((size_t)(p->Br + 2 * p->Bc) * DP + (size_t)p->Br * p->Bc);
    cudaError_t err = cudaSuccess;
    if (smem > 48 * 1024)
        err = cudaFuncSetAttribute(generic_forward_kernel<E>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err != cudaSuccess) return (xfa_cuda_result)err;
    /* A packed batch: z is the sequence, x covers the longest one (max_seqlen_q). */
    const int rows = p->cu_seqlens_q ? p->max_seqlen_q : p->seqlen_q;
    const unsigned entries = (unsigned)(p->cu_seqlens_q ? p->sequences : p->batch);
    if (rows <= 0 || entries == 0) return 0; /* nothing to compute */
    const dim3 grid((unsigned)((rows + p->Br - 1) / p->Br), (unsigned)p->heads_q, entries);
    generic_forward_kernel<E><<<grid, p->Br * T, smem, stream>>>(*p);
    return (xfa_cuda_result)cudaGetLastError();
}

} // namespace

extern "C" xfa_cuda_result xfa_cuda_generic_forward(const xfa_cuda_forward *p, void *stream)
{
    if (p->head_dim % T || p->head_dim > 256 || p->Br <= 0 || p->Bc <= 0) return XFA_CUDA_NOT_HANDLED;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    switch (p->dtype) {
    case XFA_CUDA_F32: return launch<float>(p, s);
    case XFA_CUDA_F16: return launch<__half>(p, s);
    case XFA_CUDA_BF16: return launch<__nv_bfloat16>(p, s);
    }
    return XFA_CUDA_NOT_HANDLED;
}
