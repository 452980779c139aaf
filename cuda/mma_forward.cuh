/*
 * mma_forward.cuh - the tensor-core FlashAttention-2 forward kernel
 * (mma.sync m16n8k16, sm_80 and later), instantiated per head dim by
 * cuda/mma_d*.cu.
 *
 * A work-group owns Br query rows of one (batch, head); each of its warps owns
 * MT m16 tiles of them. Per K/V block of Bc keys:
 *   S = Q Kᵀ        A = Q from shared memory (ldmatrix), B = K rows (ldmatrix)
 *   online softmax  in registers, log2 domain: exp2(s · scale·log2(e) − m) as one FFMA
 *                   and one EX2 (the host sends only scale > 0 here, so the raw max scales
 *                   to the row max)
 *   acc += P V      A = P straight from the S accumulators (the m16n8 C layout
 *                   of two n8 tiles is the m16k16 A layout), B = V (ldmatrix.trans)
 * Loads are cp.async into one K and one V buffer, interleaved as in
 * FlashAttention-2: V_j streams in while S_j is computed, K_{j+1} while P·V_j
 * is. Causal blocks past the diagonal are never loaded, and the blocks with the
 * most keys are scheduled first.
 *
 * Fragment layout (PTX ISA, mma.m16n8k16): lane = 4 g + t; a C tile holds
 * rows g and g + 8, columns 2t and 2t + 1. So each thread keeps m_i and l_i for
 * 2 MT rows; l_i is the thread's partial sum over its columns, reduced across
 * the 4 lanes of a row only at the end.
 */
#ifndef XFA_CUDA_MMA_FORWARD_CUH
#define XFA_CUDA_MMA_FORWARD_CUH

#include "device_util.cuh"
#include "extras.cuh"
#include "launch.h"
#include "mma_config.h"

#include <cuda_runtime.h>

namespace xfa {

__device__ __forceinline__ float fast_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x)); /* exp2(-inf) = +0 */
    return y;
}

/*
 * EXTRAS: windows, softcap, ALiBi, bias or packed sequences (one instantiation per head dim and
 * dtype, with CAUSAL false and causal read at run time as a window's right edge of 0). The
 * plain instantiation (EXTRAS false) compiles to exactly the kernel without them. With extras:
 *   - the work-group's rows come from its sequence (cuda/extras.cuh, offsets clamped);
 *   - only the K/V blocks some row of the work-group sees are loaded, and a warp skips the
 *     blocks none of its rows sees, so time scales with N·W, not N²;
 *   - each score is finished (scale, softcap, ALiBi, bias, log2 e) before the row max is taken,
 *     so the max is that of the final scores whatever their sign;
 *   - masking is per element unless every row of the warp sees the whole block.
 */
template <int D, int WARPS, typename T, bool CAUSAL, bool EXTRAS>
__device__ __forceinline__ void mma_forward_body(const xfa_cuda_forward &p)
{
    static_assert(!(CAUSAL && EXTRAS), "with extras causal is a run-time window edge");
    constexpr int Br = XFA_MMA_BR(D, WARPS), Bc = XFA_MMA_BC(D), THREADS = WARPS * 32;
    constexpr int MT = Br / WARPS / 16; /* m16 tiles per warp */
    constexpr int NT = Bc / 8;          /* n8 tiles of S */
    constexpr int DT = D / 8;           /* n8 tiles of O */
    constexpr int ROW = D + XFA_MMA_PAD;
    static_assert(MT >= 1 && Br % (WARPS * 16) == 0 && Bc % 16 == 0 && D % 16 == 0, "tile shape");

    extern __shared__ __align__(16) unsigned char smem[];
    T *Q_tile = reinterpret_cast<T *>(smem);
    T *K_tile = Q_tile + Br * ROW;
    T *V_tile = K_tile + Bc * ROW;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane >> 2, t = lane & 3;
    /* Causal (or a causal window): the q-blocks with the most keys first. */
    const bool late_first = CAUSAL || (EXTRAS && p.causal);
    const int q_block = late_first ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    const int h = blockIdx.y;
    const int hk = h / (p.heads_q / p.heads_kv);
    sequence_span seq = {(int)blockIdx.z, p.seqlen_q, p.seqlen_k, 0, 0};
    if constexpr (EXTRAS) seq = sequence_of(p, (int)blockIdx.z);
    const int b = seq.b;
    const int row0 = q_block * Br;
    if constexpr (EXTRAS)
        if (row0 >= seq.seqlen_q) return; /* the whole work-group: past its sequence's rows */
    const int warp_row0 = row0 + warp * MT * 16;
    const int seqlen_q = seq.seqlen_q, seqlen_k = seq.seqlen_k;
    const int diag = seqlen_k - seqlen_q; /* row i's diagonal is key i + diag (causal: it sees j <= i + diag) */

    const T *q = static_cast<const T *>(p.q) + b * p.q_stride[0] + seq.q0 * p.q_stride[1] + h * p.q_stride[2];
    const T *k = static_cast<const T *>(p.k) + b * p.k_stride[0] + seq.k0 * p.k_stride[1] + hk * p.k_stride[2];
    const T *v = static_cast<const T *>(p.v) + b * p.v_stride[0] + seq.k0 * p.v_stride[1] + hk * p.v_stride[2];

    /* The keys some row of the work-group sees: key_begin .. key_end-1, loaded Bc at a time
     * (K/V rows from key_end on are zero-filled and masked). */
    window w = {-1, -1};
    if constexpr (EXTRAS) w = window_of(p);
    int key_begin = 0, key_end = seqlen_k;
    if (CAUSAL) key_end = min(seqlen_k, max(0, row0 + Br + diag));
    if constexpr (EXTRAS) {
        const int last_row = min(row0 + Br, seqlen_q) - 1;
        if (w.left >= 0) key_begin = max(row0 + diag - w.left, 0);
        if (w.right >= 0) key_end = clamp_int(last_row + diag + w.right + 1, 0, seqlen_k);
    }
    int n_blocks = (key_end + Bc - 1) / Bc;
    if constexpr (EXTRAS) n_blocks = key_end > key_begin ? (key_end - key_begin + Bc - 1) / Bc : 0;
    const int kv_limit = EXTRAS ? key_end : seqlen_k;
    /* A warp's rows that exist: warp_row0 .. warp_last (none when warp_last < warp_row0). */
    const int warp_last = min(warp_row0 + MT * 16, seqlen_q) - 1;
    const bool warp_rows_all = warp_row0 + MT * 16 <= seqlen_q;
    const bool score_extras_on = EXTRAS && has_score_extras(p);
    score_extras<T> extra = {};
    if constexpr (EXTRAS) extra = score_extras_of<T>(p, b, h);

    load_rows_async<Br, D, XFA_MMA_PAD, THREADS>(Q_tile, q, p.q_stride[1], row0, seqlen_q, tid);
    if (n_blocks > 0) load_rows_async<Bc, D, XFA_MMA_PAD, THREADS>(K_tile, k, p.k_stride[1], key_begin, kv_limit, tid);
    cp_async_commit();

    const float scale_log2 = p.scale * 1.4426950408889634f;
    float acc[MT][DT][4];
    float m_i[MT][2], l_i[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int dt = 0; dt < DT; ++dt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mt][dt][e] = 0.0f;
        m_i[mt][0] = m_i[mt][1] = -INFINITY;
        l_i[mt][0] = l_i[mt][1] = 0.0f;
    }

    /* At small head dims Q's fragments fit in registers: each block then reads only K and V from
     * shared memory. */
    constexpr bool Q_IN_REGS = D <= 64;
    uint32_t q_frag[Q_IN_REGS ? MT : 1][Q_IN_REGS ? D / 16 : 1][4];
    if constexpr (Q_IN_REGS) {
        cp_async_wait_all();
        __syncthreads();
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk)
                ldmatrix_x4(smem_addr(Q_tile + (warp * MT * 16 + mt * 16 + (lane & 15)) * ROW + kk * 16 + (lane >> 4) * 8),
                            q_frag[mt][kk][0], q_frag[mt][kk][1], q_frag[mt][kk][2], q_frag[mt][kk][3]);
    }

    for (int j = 0; j < n_blocks; ++j) {
        const int col0 = key_begin + j * Bc;
        cp_async_wait_all();
        __syncthreads(); /* K_j is in; every warp is done with V_{j-1} */
        load_rows_async<Bc, D, XFA_MMA_PAD, THREADS>(V_tile, v, p.v_stride[1], col0, kv_limit, tid);
        cp_async_commit();

        /* With extras: whether some row of this warp sees a key of the block (else the warp only
         * joins the loads), and whether all its rows see all of it (then nothing is masked). */
        bool warp_sees = true, warp_sees_all = false;
        if constexpr (EXTRAS) {
            warp_sees = warp_last >= warp_row0 && (w.right < 0 || col0 <= warp_last + diag + w.right) &&
                        (w.left < 0 || col0 + Bc - 1 >= warp_row0 + diag - w.left);
            warp_sees_all = warp_rows_all && col0 + Bc <= seqlen_k &&
                            (w.left < 0 || col0 >= warp_row0 + MT * 16 - 1 + diag - w.left) &&
                            (w.right < 0 || col0 + Bc - 1 <= warp_row0 + diag + w.right);
        }

        float s[MT][NT][4];
        if (warp_sees) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk) {
                uint32_t a[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    if constexpr (Q_IN_REGS) {
#pragma unroll
                        for (int e = 0; e < 4; ++e) a[mt][e] = q_frag[mt][Q_IN_REGS ? kk : 0][e];
                    } else {
                        ldmatrix_x4(smem_addr(Q_tile + (warp * MT * 16 + mt * 16 + (lane & 15)) * ROW + kk * 16 +
                                              (lane >> 4) * 8),
                                    a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
                    }
                }
#pragma unroll
                for (int np = 0; np < NT / 2; ++np) {
                    uint32_t b0, b1, b2, b3;
                    ldmatrix_x4(smem_addr(K_tile + (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * ROW + kk * 16 +
                                          ((lane >> 3) & 1) * 8),
                                b0, b1, b2, b3);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma_16816<T>(s[mt][2 * np], a[mt], b0, b1);
                        mma_16816<T>(s[mt][2 * np + 1], a[mt], b2, b3);
                    }
                }
            }

            /* Masks only where a block crosses the end of K or this warp's diagonal. With extras the
             * scores are finished here (log2 units) and masked unless the warp sees the whole block. */
            const bool ragged = col0 + Bc > seqlen_k;
            const bool crosses = CAUSAL && col0 + Bc - 1 > warp_row0 + diag;
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        float x = s[mt][nt][e];
                        if constexpr (EXTRAS) {
                            const int row = warp_row0 + mt * 16 + g + (e >> 1) * 8;
                            const int col = col0 + nt * 8 + 2 * t + (e & 1);
                            const bool visible =
                                warp_sees_all || (row < seqlen_q && col < seqlen_k && w.sees(row, col, diag));
                            if (!visible) x = -INFINITY;
                            else if (score_extras_on) x = extra.apply(x * p.scale, row, col, diag);
                            else x *= scale_log2;
                        } else if (ragged || crosses) {
                            const int row = warp_row0 + mt * 16 + g + (e >> 1) * 8;
                            const int col = col0 + nt * 8 + 2 * t + (e & 1);
                            if (col >= seqlen_k || (CAUSAL && col > row + diag)) x = -INFINITY;
                        }
                        s[mt][nt][e] = x;
                    }

#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int hr = 0; hr < 2; ++hr) {
                    float mx = -INFINITY;
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * hr], s[mt][nt][2 * hr + 1]));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                    /* Plain: scale > 0 (the host sends only that here), so the raw max scales to the max.
                     * With extras the scores are final already. */
                    mx = fmaxf(m_i[mt][hr], EXTRAS ? mx : mx * scale_log2);
                    /* A row that has seen no key yet keeps -inf; subtract 0 then, so exp2 gives 0, not NaN. */
                    const float m_use = mx == -INFINITY ? 0.0f : mx;
                    const float alpha = fast_exp2(m_i[mt][hr] - m_use);
                    m_i[mt][hr] = mx;
                    float row_sum = 0.0f;
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt) {
                        if constexpr (EXTRAS) {
                            s[mt][nt][2 * hr] = fast_exp2(s[mt][nt][2 * hr] - m_use);
                            s[mt][nt][2 * hr + 1] = fast_exp2(s[mt][nt][2 * hr + 1] - m_use);
                        } else {
                            s[mt][nt][2 * hr] = fast_exp2(fmaf(s[mt][nt][2 * hr], scale_log2, -m_use));
                            s[mt][nt][2 * hr + 1] = fast_exp2(fmaf(s[mt][nt][2 * hr + 1], scale_log2, -m_use));
                        }
                        row_sum += s[mt][nt][2 * hr] + s[mt][nt][2 * hr + 1];
                    }
                    l_i[mt][hr] = l_i[mt][hr] * alpha + row_sum;
#pragma unroll
                    for (int dt = 0; dt < DT; ++dt) {
                        acc[mt][dt][2 * hr] *= alpha;
                        acc[mt][dt][2 * hr + 1] *= alpha;
                    }
                }
        }

        cp_async_wait_all();
        __syncthreads(); /* V_j is in; every warp is done with K_j */
        if (j + 1 < n_blocks) load_rows_async<Bc, D, XFA_MMA_PAD, THREADS>(K_tile, k, p.k_stride[1], col0 + Bc, kv_limit, tid);
        cp_async_commit();

        if (!warp_sees) continue; /* P is 0 for all of this warp's rows: acc stays */
#pragma unroll
        for (int kk = 0; kk < Bc / 16; ++kk) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                a[mt][0] = pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                a[mt][1] = pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                a[mt][2] = pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                a[mt][3] = pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < D / 16; ++dp) {
                uint32_t b0, b1, b2, b3;
                ldmatrix_x4_trans(smem_addr(V_tile + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * ROW + dp * 16 +
                                            (lane >> 4) * 8),
                                  b0, b1, b2, b3);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_16816<T>(acc[mt][2 * dp], a[mt], b0, b1);
                    mma_16816<T>(acc[mt][2 * dp + 1], a[mt], b2, b3);
                }
            }
        }
    }
    cp_async_wait_all(); /* nothing may still be in flight when the block exits (n_blocks == 0) */

    T *o = static_cast<T *>(p.o) + b * p.o_stride[0] + seq.q0 * p.o_stride[1] + h * p.o_stride[2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            float l = l_i[mt][hr];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            const int row = warp_row0 + mt * 16 + g + hr * 8;
            if (row >= seqlen_q) continue;
            const float inv_l = l > 0.0f ? 1.0f / l : 0.0f; /* rows that see nothing: O = 0 */
            T *o_row = o + (int64_t)row * p.o_stride[1];
#pragma unroll
            for (int dt = 0; dt < DT; ++dt)
                *reinterpret_cast<uint32_t *>(o_row + dt * 8 + 2 * t) =
                    pack2<T>(acc[mt][dt][2 * hr] * inv_l, acc[mt][dt][2 * hr + 1] * inv_l);
            if (p.lse && t == 0)
                p.lse[b * p.lse_stride[0] + (seq.q0 + row) * p.lse_stride[1] + h * p.lse_stride[2]] =
                    l > 0.0f ? (m_i[mt][hr] + __log2f(l)) * 0.6931471805599453f : -INFINITY;
        }
}

template <int D, int WARPS, typename T, bool CAUSAL, bool EXTRAS>
__global__ void __launch_bounds__(WARPS * 32) mma_forward_kernel(const xfa_cuda_forward p)
{
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 860 || __CUDA_ARCH__ == 890)
    /* A tile wider than these GPUs' shared memory is never planned for them: no code for it. */
    constexpr bool built = XFA_MMA_SMEM_BYTES(D, WARPS) <= XFA_MMA_SMEM_SM86;
#else
    constexpr bool built = true;
#endif
    if constexpr (built) mma_forward_body<D, WARPS, T, CAUSAL, EXTRAS>(p);
    else __trap();
}

template <int D, int WARPS, typename T, bool CAUSAL, bool EXTRAS>
static xfa_cuda_result mma_launch(const xfa_cuda_forward *p, cudaStream_t stream)
{
    constexpr int Br = XFA_MMA_BR(D, WARPS);
    const int smem = XFA_MMA_SMEM_BYTES(D, WARPS);
    void (*kernel)(const xfa_cuda_forward) = mma_forward_kernel<D, WARPS, T, CAUSAL, EXTRAS>;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return (xfa_cuda_result)err;
    /* A packed batch: z is the sequence, x covers the longest one (max_seqlen_q). */
    const int rows = p->cu_seqlens_q ? p->max_seqlen_q : p->seqlen_q;
    const unsigned entries = (unsigned)(p->cu_seqlens_q ? p->sequences : p->batch);
    if (rows <= 0 || entries == 0) return 0; /* nothing to compute */
    const dim3 grid((unsigned)((rows + Br - 1) / Br), (unsigned)p->heads_q, entries);
    kernel<<<grid, WARPS * 32, smem, stream>>>(*p);
    return (xfa_cuda_result)cudaGetLastError();
}

/* Plain calls: causal or not at compile time; any extra: the one EXTRAS kernel (causal at run time). */
template <int D, int WARPS, typename T> static xfa_cuda_result mma_variant(const xfa_cuda_forward *p, cudaStream_t s)
{
    if (xfa_cuda_forward_has_extras(p)) return mma_launch<D, WARPS, T, false, true>(p, s);
    return p->causal ? mma_launch<D, WARPS, T, true, false>(p, s) : mma_launch<D, WARPS, T, false, false>(p, s);
}

template <int D, int WARPS> static xfa_cuda_result mma_dtype(const xfa_cuda_forward *p, cudaStream_t s)
{
    if (p->dtype == XFA_CUDA_F16) return mma_variant<D, WARPS, __half>(p, s);
    if (p->dtype == XFA_CUDA_BF16) return mma_variant<D, WARPS, __nv_bfloat16>(p, s);
    return XFA_CUDA_NOT_HANDLED;
}

/* The launcher for one head dim: f16 or bf16, causal or not, one of the built tiles (by p->Br;
 * 0 takes the first). */
template <int D> static xfa_cuda_result mma_forward(const xfa_cuda_forward *p, void *stream)
{
    constexpr int W1 = XFA_MMA_WARPS_FIRST(D), W2 = XFA_MMA_WARPS_SECOND(D);
    if (p->head_dim != D || (p->Bc && p->Bc != XFA_MMA_BC(D))) return XFA_CUDA_NOT_HANDLED;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (!p->Br || p->Br == XFA_MMA_BR(D, W1)) return mma_dtype<D, W1>(p, s);
    if constexpr (W2 != W1)
        if (p->Br == XFA_MMA_BR(D, W2)) return mma_dtype<D, W2>(p, s);
    return XFA_CUDA_NOT_HANDLED;
}

} // namespace xfa

#endif
