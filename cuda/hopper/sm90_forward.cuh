/*
 * sm90_forward.cuh - the Hopper (sm_90a) attention forward kernel, FlashAttention-3 style.
 *
 * One CTA computes Br = 64 * NWG query rows of one (batch, head) with NWG + 1 warpgroups:
 *   warpgroup 0 (producer): one thread issues TMA loads of the Q tile and of the K and V tiles into a
 *     STAGES-deep ring of shared-memory buffers, each guarded by a full/empty mbarrier pair;
 *   warpgroups 1..NWG (consumers): 64 query rows each; S = Q K^T with both operands in shared memory,
 *     online softmax in registers, O += P V with P from registers (no trip through shared memory).
 * setmaxnreg moves registers from the producer (24) to the consumers (240; 32/160 for NWG = 3): they hold O
 * (D/2 floats), S (Bc/2 floats) and P at once.
 *
 * Overlap, as the FA3 paper describes:
 *   - ping-pong: named barriers hand the tensor cores from one consumer warpgroup to the next (round
 *     robin), so one warpgroup's softmax (exp2, max, sums: MUFU/FMA) hides under another's GEMMs;
 *   - intra-warpgroup: iteration i issues S_i = Q K_i^T and O += P_{i-1} V_{i-1} back to back. Whether
 *     the softmax of S_i then runs while P V is still on the tensor cores is up to ptxas, which hoists
 *     the wgmma wait to the top of the block; -DXFA_SM90_PIN forces the overlap (see pin()). Measured
 *     on an H100 it is no faster than letting ping-pong hide the softmax (docs/hopper.md), so it is off.
 * Key blocks are visited from the last to the first so that the blocks that need masking (the sequence
 * end, the causal diagonal) come first and the rest of the loop runs unmasked; causal CTAs skip the
 * blocks above the diagonal entirely and are scheduled heaviest first.
 *
 * Shared-memory tiles are written by TMA with 128-byte swizzle, D split into 64-element (128-byte)
 * column chunks: a tile of R rows is [D/64][R][64]. Q and K are K-major wgmma operands; V is read
 * MN-major (transposed by the wgmma itself), so no tile is ever transposed in memory.
 */
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "sm90_primitives.cuh"
#include "sm90_wgmma.cuh"

namespace xfa_sm90 {

struct Params {
    CUtensorMap tq, tk, tv;       /* 4-d maps (dim, seqlen, head, batch), 128-byte swizzle */
    void *o;
    float *lse;
    int64_t o_stride[3];          /* batch, seqlen, head (elements) */
    int64_t lse_stride[3];
    int32_t seqlen_q, seqlen_k, group; /* group = heads_q / heads_kv */
    int32_t causal;
    float scale;                  /* softmax scale */
    float scale_log2;             /* scale * log2(e) */
};

/* bar.sync ids: 0 is __syncthreads; 1 + w hands the tensor cores to consumer warpgroup w. */
constexpr int kSchedBar = 1;

/* NWG consumer warpgroups of 64 query rows each, plus the producer warpgroup. */
template <int D, int Bc, int STAGES, int NWG> struct Layout {
    static constexpr int Br = 64 * NWG;
    static constexpr int threads = 128 * (NWG + 1);
    /* setmaxnreg budgets (multiples of 8, summing to at most 64K registers over the CTA) */
    static constexpr int producer_regs = NWG == 2 ? 24 : 32;
    static constexpr int consumer_regs = NWG == 2 ? 240 : 160;
    static constexpr int q_bytes = Br * D * 2;
    static constexpr int kv_bytes = Bc * D * 2;
    static constexpr int q_off = 0;
    static constexpr int k_off = q_bytes;
    static constexpr int v_off = k_off + STAGES * kv_bytes;
    static constexpr int bar_off = v_off + STAGES * kv_bytes;
    static constexpr int bars = 1 + 4 * STAGES;
    static constexpr int pin_off = bar_off + bars * 8; /* one float per consumer thread, see pin() */
    /* +1024: the dynamic shared memory base is aligned up to a swizzle atom at run time */
    static constexpr int smem_bytes = pin_off + 128 * NWG * 4 + 1024;
    static_assert(Bc % 16 == 0 || Bc % 8 == 0, "Bc must be a multiple of 8");
    static_assert(D % 64 == 0, "D must be a multiple of 64");
};

template <class T> __device__ __forceinline__ uint32_t pack2(float a, float b);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float a, float b)
{
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t *>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float a, float b)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t *>(&h);
}

__device__ __forceinline__ float quad_max(float x)
{
    x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffff, x, 2));
}
__device__ __forceinline__ float quad_sum(float x)
{
    x += __shfl_xor_sync(0xffffffff, x, 1);
    return x + __shfl_xor_sync(0xffffffff, x, 2);
}

/* How many key blocks this CTA visits: causal rows never look past their diagonal. */
__device__ __forceinline__ int key_blocks(const Params &p, int m0, int Br, int Bc)
{
    int n = (p.seqlen_k + Bc - 1) / Bc;
    if (p.causal) {
        const int last_row = min(m0 + Br, p.seqlen_q) - 1;
        const int last_col = last_row + p.seqlen_k - p.seqlen_q;
        if (last_col < 0) return 0;
        n = min(n, last_col / Bc + 1);
    }
    return n;
}

template <class T, int D, int Bc, int STAGES, int NWG>
__device__ __forceinline__ void produce(const Params &p, uint8_t *smem, uint64_t *bars, int m0, int h, int b, int n_blocks)
{
    using L = Layout<D, Bc, STAGES, NWG>;
    uint64_t *q_full = bars, *k_full = bars + 1, *k_empty = k_full + STAGES, *v_full = k_empty + STAGES,
             *v_empty = v_full + STAGES;
    const int hk = h / p.group;
    tma_prefetch_desc(&p.tq);
    tma_prefetch_desc(&p.tk);
    tma_prefetch_desc(&p.tv);
    mbar_expect_tx(q_full, L::q_bytes);
#pragma unroll
    for (int c = 0; c < D / 64; c++) tma_load_4d(&p.tq, smem + L::q_off + c * L::Br * 128, q_full, c * 64, m0, h, b);
    for (int it = 0; it < n_blocks; it++) {
        const int j = n_blocks - 1 - it, s = it % STAGES;
        const uint32_t phase = (it / STAGES) & 1;
        uint8_t *k_dst = smem + L::k_off + s * L::kv_bytes, *v_dst = smem + L::v_off + s * L::kv_bytes;
        mbar_wait(&k_empty[s], phase ^ 1);
        mbar_expect_tx(&k_full[s], L::kv_bytes);
#pragma unroll
        for (int c = 0; c < D / 64; c++) tma_load_4d(&p.tk, k_dst + c * Bc * 128, &k_full[s], c * 64, j * Bc, hk, b);
        mbar_wait(&v_empty[s], phase ^ 1);
        mbar_expect_tx(&v_full[s], L::kv_bytes);
#pragma unroll
        for (int c = 0; c < D / 64; c++) tma_load_4d(&p.tv, v_dst + c * Bc * 128, &v_full[s], c * 64, j * Bc, hk, b);
    }
}

template <class T, int D, int Bc, int STAGES, int NWG> struct Consumer {
    using L = Layout<D, Bc, STAGES, NWG>;
    static constexpr int NS = Bc / 2; /* S floats per thread (64 x Bc over 128 threads) */
    static constexpr int NO = D / 2;  /* O floats per thread */
    static constexpr int KP = Bc / 16; /* P as wgmma A fragments: one per 16 keys */

    float s[NS];
    float acc[NO];
    uint32_t pf[KP][4];
    float m_i[2], l_i[2];
    float pending[2]; /* O's rescale factors for the P V product not yet issued */

    const Params &p;
    uint8_t *smem;
    uint64_t *k_full, *k_empty, *v_full, *v_empty;
    int wg, warp, lane, row0; /* row0: this thread's first query row (the second is row0 + 8) */

    __device__ __forceinline__ Consumer(const Params &p_, uint8_t *smem_, uint64_t *bars, int wg_, int m0)
        : p(p_), smem(smem_)
    {
        k_full = bars + 1;
        k_empty = k_full + STAGES;
        v_full = k_empty + STAGES;
        v_empty = v_full + STAGES;
        wg = wg_;
        warp = (threadIdx.x / 32) % 4;
        lane = threadIdx.x % 32;
        row0 = m0 + wg * 64 + warp * 16 + lane / 4;
    }

    __device__ __forceinline__ void sched_wait()
    {
#ifndef XFA_SM90_NO_PINGPONG
        named_bar_sync(kSchedBar + wg, 256);
#endif
    }
    __device__ __forceinline__ void sched_signal()
    {
#ifndef XFA_SM90_NO_PINGPONG
        named_bar_arrive(kSchedBar + (wg + 1) % NWG, 256);
#endif
    }
    /*
     * Keeps the softmax in the shadow of the P V product. Left alone, ptxas hoists the wgmma wait to
     * the top of its block and sinks the exponentials next to their use after it, serialising the
     * two. A shared store of a value that depends on every exponential (the row sums), followed by
     * an mbarrier arrive (release semantics: the store cannot sink past it, and the wait is not
     * hoisted above it), pins the order: softmax, store, arrive, wait.
     */
    __device__ __forceinline__ void pin(float x)
    {
        const uint32_t addr = smem_u32(smem + L::pin_off) + (threadIdx.x - 128) * 4;
        asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(addr), "f"(x) : "memory");
    }

    /* One arrival per warp: the empty barriers count the consumer warps. */
    __device__ __forceinline__ void release(uint64_t *bar)
    {
        __syncwarp();
        if (lane == 0) mbar_arrive(bar);
    }

    __device__ __forceinline__ void issue_qk(int stage)
    {
        const uint32_t q = smem_u32(smem + L::q_off) + wg * 64 * 128;
        const uint32_t k = smem_u32(smem + L::k_off + stage * L::kv_bytes);
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            const int c = kk / 4, w = (kk % 4) * 32;
            wgmma_ss<T, Bc>::run(s, smem_desc(q + c * L::Br * 128 + w, 16, 1024), smem_desc(k + c * Bc * 128 + w, 16, 1024),
                                 kk > 0);
        }
    }

    __device__ __forceinline__ void issue_pv(int stage)
    {
        const uint32_t v = smem_u32(smem + L::v_off + stage * L::kv_bytes);
#pragma unroll
        for (int kk = 0; kk < KP; kk++) wgmma_rs<T, D>::run(acc, pf[kk], smem_desc(v + kk * 16 * 128, Bc * 128, 1024));
    }

    /* -inf for keys past the sequence end and, if causal, past each row's diagonal (bottom-right). */
    __device__ __forceinline__ void mask(int j)
    {
        const int off = p.seqlen_k - p.seqlen_q;
        int lim0 = p.seqlen_k - 1, lim1 = p.seqlen_k - 1;
        if (p.causal) {
            lim0 = min(lim0, row0 + off);
            lim1 = min(lim1, row0 + 8 + off);
        }
        const int col0 = j * Bc + 2 * (lane % 4);
#pragma unroll
        for (int i = 0; i < Bc / 8; i++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int col = col0 + 8 * i + e;
                if (col > lim0) s[4 * i + e] = -INFINITY;
                if (col > lim1) s[4 * i + 2 + e] = -INFINITY;
            }
    }

    __device__ __forceinline__ bool needs_mask(int j, int m0) const
    {
        const int end = (j + 1) * Bc;
        return end > p.seqlen_k || (p.causal && end - 1 > m0 + p.seqlen_k - p.seqlen_q);
    }

    /* Online softmax of S (in place: S becomes the unnormalised P); returns O's rescale factors. */
    __device__ __forceinline__ void softmax(float (&rescale)[2])
    {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx = m_i[r];
#pragma unroll
            for (int i = 0; i < Bc / 8; i++) mx = fmaxf(mx, fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
            mx = quad_max(mx);
            /* a row with no visible key yet keeps m = -inf; subtract 0 so exp2 gives 0, not NaN */
            const float ms = mx == -INFINITY ? 0.f : mx * p.scale_log2;
            rescale[r] = exp2_approx(m_i[r] * p.scale_log2 - ms);
            m_i[r] = mx;
            float sum = 0.f;
#pragma unroll
            for (int i = 0; i < Bc / 8; i++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float &x = s[4 * i + 2 * r + e];
                    x = exp2_approx(fmaf(x, p.scale_log2, -ms));
                    sum += x;
                }
            l_i[r] = l_i[r] * rescale[r] + sum;
        }
    }

    __device__ __forceinline__ void rescale_o(const float (&rescale)[2])
    {
#pragma unroll
        for (int i = 0; i < D / 8; i++) {
            acc[4 * i + 0] *= rescale[0];
            acc[4 * i + 1] *= rescale[0];
            acc[4 * i + 2] *= rescale[1];
            acc[4 * i + 3] *= rescale[1];
        }
    }

    /* The S accumulator layout of two adjacent 8-column blocks is the A-operand layout of k16. */
    __device__ __forceinline__ void s_to_p()
    {
#pragma unroll
        for (int kk = 0; kk < KP; kk++)
#pragma unroll
            for (int r = 0; r < 4; r++) pf[kk][r] = pack2<T>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
    }

    __device__ __forceinline__ void run(int m0, int h, int b, int n_blocks)
    {
        m_i[0] = m_i[1] = -INFINITY;
        l_i[0] = l_i[1] = 0.f;
#pragma unroll
        for (int i = 0; i < NO; i++) acc[i] = 0.f;

        if (n_blocks > 0) {
            mbar_wait(smem_bar_q(), 0);
#ifndef XFA_SM90_NO_PINGPONG
            /* round robin over the consumer warpgroups, warpgroup 0 first */
            if (wg == NWG - 1) named_bar_arrive(kSchedBar + 0, 256);
#endif
            /* first block: S only */
            {
                mbar_wait(&k_full[0], 0);
                sched_wait();
                wgmma_fence();
                issue_qk(0);
                wgmma_commit();
                sched_signal();
                wgmma_wait<0>();
                fence_regs(s);
                release(&k_empty[0]);
                const int j = n_blocks - 1;
                if (needs_mask(j, m0)) mask(j);
                softmax(pending);
                s_to_p();
            }
            for (int it = 1; it < n_blocks; it++) {
                const int j = n_blocks - 1 - it, st = it % STAGES, pst = (it - 1) % STAGES;
                mbar_wait(&k_full[st], (it / STAGES) & 1);
                /* V_{it-1} came in before K_it: no wait (branch) between the two issues */
                mbar_wait(&v_full[pst], ((it - 1) / STAGES) & 1);
                sched_wait();
                fence_regs(pf); /* P and the rescaled O are final before wgmma reads them */
                fence_regs(acc);
                wgmma_fence();
                issue_qk(st);
                wgmma_commit();
#ifdef XFA_SM90_RESCALE_EARLY
                /* FA3's order: O's rescale while Q K^T is on the tensor cores. ptxas interleaves the
                 * multiplies with the Q K^T issue; measured 2-3% slower than rescaling after the wait. */
                rescale_o(pending);
                fence_regs(acc);
                wgmma_fence();
#endif
                issue_pv(pst);
                wgmma_commit();
                sched_signal();
                wgmma_wait<1>(); /* S ready; P V still running */
                fence_regs(s);
                if (needs_mask(j, m0)) mask(j);
                softmax(pending);
#ifdef XFA_SM90_PIN
                pin(l_i[0] + l_i[1]);
#endif
                release(&k_empty[st]);
                wgmma_wait<0>();
                fence_regs(acc);
                fence_regs(pf);
                release(&v_empty[pst]);
#ifndef XFA_SM90_RESCALE_EARLY
                rescale_o(pending);
#endif
                s_to_p();
            }
            {
                const int last = n_blocks - 1, st = last % STAGES;
                mbar_wait(&v_full[st], (last / STAGES) & 1);
#ifndef XFA_SM90_NO_PINGPONG
                named_bar_sync(kSchedBar + wg, 256);
                /* the last warpgroup's turn ends the round: nobody waits for its signal */
                if (wg != NWG - 1) named_bar_arrive(kSchedBar + wg + 1, 256);
#endif
#ifdef XFA_SM90_RESCALE_EARLY
                rescale_o(pending);
#endif
                fence_regs(pf);
                fence_regs(acc);
                wgmma_fence();
                issue_pv(st);
                wgmma_commit();
                wgmma_wait<0>();
                fence_regs(acc);
                release(&v_empty[st]);
            }
        }
        store(h, b);
    }

    __device__ __forceinline__ uint64_t *smem_bar_q() { return k_full - 1; }

    __device__ __forceinline__ void store(int h, int b)
    {
        T *o = static_cast<T *>(p.o) + b * p.o_stride[0] + h * p.o_stride[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const float l = quad_sum(l_i[r]);
            const int row = row0 + 8 * r;
            if (row >= p.seqlen_q) continue;
            const float inv = l > 0.f ? 1.f / l : 0.f;
            T *orow = o + row * p.o_stride[1] + 2 * (lane % 4);
#pragma unroll
            for (int i = 0; i < D / 8; i++)
                *reinterpret_cast<uint32_t *>(orow + 8 * i) = pack2<T>(acc[4 * i + 2 * r] * inv, acc[4 * i + 2 * r + 1] * inv);
            if (p.lse && lane % 4 == 0)
                p.lse[b * p.lse_stride[0] + row * p.lse_stride[1] + h * p.lse_stride[2]] =
                    l > 0.f ? m_i[r] * p.scale + logf(l) : -INFINITY;
        }
    }
};

template <class T, int D, int Bc, int STAGES, int NWG>
__global__ void __launch_bounds__(128 * (NWG + 1), 1) forward_kernel(const __grid_constant__ Params p)
{
    using L = Layout<D, Bc, STAGES, NWG>;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    uint64_t *bars = reinterpret_cast<uint64_t *>(smem + L::bar_off);

    /* causal: the longest rows first, so the short tail of the grid fills the gaps */
    const int m_block = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int m0 = m_block * L::Br, h = blockIdx.y, b = blockIdx.z;
    const int n_blocks = key_blocks(p, m0, L::Br, Bc);

    if (threadIdx.x == 0) {
        mbar_init(&bars[0], 1);
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&bars[1 + s], 1);                /* k_full: the producer's expect_tx */
            mbar_init(&bars[1 + STAGES + s], 4 * NWG); /* k_empty: one arrival per consumer warp */
            mbar_init(&bars[1 + 2 * STAGES + s], 1);   /* v_full */
            mbar_init(&bars[1 + 3 * STAGES + s], 4 * NWG); /* v_empty */
        }
        mbar_init_fence();
    }
    __syncthreads();

    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        regs_release<L::producer_regs>();
        if (threadIdx.x == 0 && n_blocks > 0) produce<T, D, Bc, STAGES, NWG>(p, smem, bars, m0, h, b, n_blocks);
    } else {
        regs_claim<L::consumer_regs>();
        Consumer<T, D, Bc, STAGES, NWG> c(p, smem, bars, wg - 1, m0);
        c.run(m0, h, b, n_blocks);
    }
}

/* Launches forward_kernel; instantiated in one .cu per head dim (they compile in parallel). */
template <class T, int D, int Bc, int STAGES, int NWG> cudaError_t launch(const Params &p, dim3 grid, cudaStream_t stream)
{
    using L = Layout<D, Bc, STAGES, NWG>;
    auto kernel = forward_kernel<T, D, Bc, STAGES, NWG>;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::smem_bytes);
    if (e != cudaSuccess) return e;
    kernel<<<grid, L::threads, L::smem_bytes, stream>>>(p);
    return cudaGetLastError();
}

}  // namespace xfa_sm90
