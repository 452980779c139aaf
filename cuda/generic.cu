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
 * Scores are in the log2 domain (scale·log2(e) folded into Q_tile), so the
 * softmax uses exp2.
 */
#include "device_util.cuh"
#include "launch.h"

#include <cuda_runtime.h>

namespace {

constexpr int T = XFA_CUDA_GENERIC_THREADS_PER_ROW;
constexpr int MAX_COLS = 256 / T; /* acc entries per thread at the largest head dim */

template <typename E>
__global__ void generic_forward_kernel(const xfa_cuda_forward p)
{
    extern __shared__ float smem[];
    const int D = p.head_dim, DP = D + 1, Br = p.Br, Bc = p.Bc;
    float *Q_tile = smem;
    float *K_tile = Q_tile + Br * DP;
    float *V_tile = K_tile + Bc * DP;
    float *S = V_tile + Bc * DP;

    const int lid = threadIdx.x, wg = blockDim.x;
    const int r = lid / T, t = lid % T;
    const int h = blockIdx.y, b = blockIdx.z;
    const int hk = h / (p.heads_q / p.heads_kv);
    const int row0 = blockIdx.x * Br;
    const int rows = min(Br, p.seqlen_q - row0);
    const int seqlen_k = p.seqlen_k;

    const E *q = static_cast<const E *>(p.q) + b * p.q_stride[0] + h * p.q_stride[2];
    const E *k = static_cast<const E *>(p.k) + b * p.k_stride[0] + hk * p.k_stride[2];
    const E *v = static_cast<const E *>(p.v) + b * p.v_stride[0] + hk * p.v_stride[2];
    const float scale_log2 = p.scale * 1.4426950408889634f;

    for (int i = lid; i < Br * D; i += wg) {
        const int rr = i / D, c = i % D;
        Q_tile[rr * DP + c] =
            rr < rows ? xfa::to_f32(q[(int64_t)(row0 + rr) * p.q_stride[1] + c * p.d_stride[0]]) * scale_log2 : 0.0f;
    }

    /* Causal (bottom-right aligned): row i sees keys j <= i + diag; blocks past the last row's keys are skipped. */
    const int diag = seqlen_k - p.seqlen_q;
    int key_end = seqlen_k;
    if (p.causal) key_end = min(seqlen_k, max(0, row0 + rows + diag));
    const int my_row = row0 + r;
    const int cols_per_item = D / T;

    float m_i = -INFINITY, l_i = 0.0f;
    float acc[MAX_COLS];
#pragma unroll
    for (int x = 0; x < MAX_COLS; x++) acc[x] = 0.0f;

    for (int col0 = 0; col0 < key_end; col0 += Bc) {
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

        /* Keys of this block the row sees: [0, visible). */
        const int visible = p.causal ? min(max(my_row + diag + 1 - col0, 0), cols) : cols;
        for (int j = t; j < Bc; j += T) {
            float s = -INFINITY;
            if (j < visible) {
                s = 0.0f;
                for (int x = 0; x < D; x++) s = fmaf(Q_tile[r * DP + x], K_tile[j * DP + x], s);
            }
            S[r * Bc + j] = s;
        }
        __syncthreads();

        float row_max = -INFINITY;
        for (int j = 0; j < Bc; j++) row_max = fmaxf(row_max, S[r * Bc + j]);
        const float m_new = fmaxf(m_i, row_max);
        if (m_new == -INFINITY) continue; /* nothing visible yet: keep the starting state */
        const float alpha = exp2f(m_i - m_new);
#pragma unroll
        for (int x = 0; x < MAX_COLS; x++) acc[x] *= alpha;
        float row_sum = 0.0f;
        for (int j = 0; j < visible; j++) {
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
    E *o = static_cast<E *>(p.o) + b * p.o_stride[0] + (int64_t)my_row * p.o_stride[1] + h * p.o_stride[2];
    const float inv_l = l_i > 0.0f ? 1.0f / l_i : 0.0f; /* rows that see nothing: O = 0 */
#pragma unroll
    for (int x = 0; x < MAX_COLS; x++)
        if (x < cols_per_item) o[(int64_t)(t + x * T) * p.d_stride[3]] = xfa::from_f32<E>(acc[x] * inv_l);
    if (p.lse && t == 0)
        p.lse[b * p.lse_stride[0] + (int64_t)my_row * p.lse_stride[1] + h * p.lse_stride[2]] =
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
    const dim3 grid((unsigned)((p->seqlen_q + p->Br - 1) / p->Br), (unsigned)p->heads_q, (unsigned)p->batch);
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
