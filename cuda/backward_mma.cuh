/*
 * backward_mma.cuh - FlashAttention-2's backward on tensor cores (mma.sync
 * m16n8k16, f16/bf16 in, f32 accumulate, sm_80+), instantiated per head dim by
 * cuda/backward_mma_d*.cu. Two kernels, each owning what it writes (no atomics,
 * deterministic); D_i = rowsum(dO * O) comes first from cuda/backward.cu.
 *
 * dK/dV kernel, per block of Bc keys of KV head hk (warp w owns keys w*16..w*16+15),
 * looping over the query blocks of every query head of the GQA group, in order:
 *   Sᵀ  = K Qᵀ          A = K (ldmatrix),  B = Q rows (ldmatrix)
 *   dPᵀ = V dOᵀ         A = V,             B = dO rows
 *   Pᵀ  = exp2(Sᵀ·scale·log2e − lse_i·log2e), dSᵀ = Pᵀ ∘ (dPᵀ − D_i)   (per column i)
 *   dV += Pᵀ dO         A = Pᵀ straight from the accumulators, B = dO (ldmatrix.trans)
 *   dK += dSᵀ Q         A = dSᵀ,                                B = Q (ldmatrix.trans)
 * Computing the transposes keeps P and dS in registers: a warp's rows are its keys,
 * which is what dK and dV are indexed by. dK is scaled once at the end.
 *
 * dQ kernel, per block of Br query rows of head h (warp w owns rows w*16..w*16+15),
 * looping over key blocks:
 *   S = Q Kᵀ, dP = dO Vᵀ, P = exp2(S·scale·log2e − lse·log2e), dS = P ∘ (dP − D_i),
 *   dQ += dS K          A = dS from the accumulators, B = K (ldmatrix.trans).
 *
 * Fragment layout (PTX ISA, mma.m16n8k16): lane = 4 g + t; a C tile holds rows g
 * and g + 8, columns 2t and 2t + 1; two n8 C tiles side by side are one m16k16 A
 * fragment (as in cuda/mma_forward.cuh).
 *
 * Masks: rows past the end of Q carry lse = +inf (P = 0, dS = 0); rows whose LSE is
 * -inf (they saw no key) likewise. Keys past the end of K are masked in the dQ kernel;
 * in the dK/dV kernel they only touch their own rows of dK/dV, never stored. Causal
 * (bottom-right): key j > i + Sk − Sq gets P = 0, tested only where a warp's tile
 * crosses the diagonal.
 */
#ifndef XFA_CUDA_BACKWARD_MMA_CUH
#define XFA_CUDA_BACKWARD_MMA_CUH

#include "backward_config.h"
#include "backward_launch.h"
#include "device_util.cuh"

#include <cuda_runtime.h>

namespace xfa {
namespace bwd {

constexpr float LOG2E = 1.4426950408889634f;

/* The m16k16 A fragment of rows row0.. of a row-major [row][k] tile at column k0. */
template <int ROW, typename T> __device__ __forceinline__ void load_a(uint32_t a[4], const T *tile, int row0, int k0, int lane)
{
    ldmatrix_x4(smem_addr(tile + (row0 + (lane & 15)) * ROW + k0 + (lane >> 4) * 8), a[0], a[1], a[2], a[3]);
}

/* B fragments of two n8 tiles (n0.., n0+8..) at k0 from a [n][k] tile (rows are n): b[0..1], b[2..3]. */
template <int ROW, typename T> __device__ __forceinline__ void load_b(uint32_t b[4], const T *tile, int n0, int k0, int lane)
{
    ldmatrix_x4(smem_addr(tile + (n0 + (lane & 7) + ((lane >> 4) << 3)) * ROW + k0 + ((lane >> 3) & 1) * 8), b[0], b[1],
                b[2], b[3]);
}

/* B fragments of two n8 tiles (n0.., n0+8..) at k0 from a [k][n] tile (rows are k): ldmatrix.trans. */
template <int ROW, typename T>
__device__ __forceinline__ void load_b_trans(uint32_t b[4], const T *tile, int k0, int n0, int lane)
{
    ldmatrix_x4_trans(smem_addr(tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ROW + n0 + (lane >> 4) * 8), b[0],
                      b[1], b[2], b[3]);
}

/* Two n8 C tiles (k = 16 columns) as one A fragment. */
template <typename T> __device__ __forceinline__ void c_to_a(uint32_t a[4], const float *c0, const float *c1)
{
    a[0] = pack2<T>(c0[0], c0[1]);
    a[1] = pack2<T>(c0[2], c0[3]);
    a[2] = pack2<T>(c1[0], c1[1]);
    a[3] = pack2<T>(c1[2], c1[3]);
}

/* This warp's A fragments of two row-major tiles (its rows start at warp*MT*16), loaded once and
 * kept in registers while the other operands stream past. */
template <int MT, int KD, int ROW, typename T>
__device__ __forceinline__ void a_frags_to_regs(uint32_t (&f1)[MT][KD][4], uint32_t (&f2)[MT][KD][4], const T *A1,
                                                const T *A2, int warp, int lane)
{
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int kk = 0; kk < KD; ++kk) {
            load_a<ROW>(f1[mt][kk], A1, (warp * MT + mt) * 16, kk * 16, lane);
            load_a<ROW>(f2[mt][kk], A2, (warp * MT + mt) * 16, kk * 16, lane);
        }
}

/*
 * Both products the kernels need per block, sharing one walk over the head dim: x += A1·B1ᵀ and
 * y += A2·B2ᵀ for this warp's MT m16 tiles by N n8 tiles (S and dP, or their transposes). A comes
 * from the fragments kept in registers (IN_REGS) or else from the row-major tiles A1/A2 (this
 * warp's rows start at warp*MT*16); B from the [n][k] tiles B1/B2.
 */
template <int MT, int N, int KD, int ROW, bool IN_REGS, typename T, int FM, int FK>
__device__ __forceinline__ void two_products(float (&x)[MT][N][4], float (&y)[MT][N][4],
                                             const uint32_t (&a1_frag)[FM][FK][4], const uint32_t (&a2_frag)[FM][FK][4],
                                             const T *A1, const T *A2, const T *B1, const T *B2, int warp, int lane)
{
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < N; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) x[mt][nt][e] = y[mt][nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) {
        uint32_t a1[MT][4], a2[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            if constexpr (IN_REGS) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    a1[mt][e] = a1_frag[IN_REGS ? mt : 0][IN_REGS ? kk : 0][e];
                    a2[mt][e] = a2_frag[IN_REGS ? mt : 0][IN_REGS ? kk : 0][e];
                }
            } else {
                load_a<ROW>(a1[mt], A1, (warp * MT + mt) * 16, kk * 16, lane);
                load_a<ROW>(a2[mt], A2, (warp * MT + mt) * 16, kk * 16, lane);
            }
        }
#pragma unroll
        for (int np = 0; np < N / 2; ++np) {
            uint32_t b1[4], b2[4];
            load_b<ROW>(b1, B1, np * 16, kk * 16, lane);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma_16816<T>(x[mt][2 * np], a1[mt], b1[0], b1[1]);
                mma_16816<T>(x[mt][2 * np + 1], a1[mt], b1[2], b1[3]);
            }
            load_b<ROW>(b2, B2, np * 16, kk * 16, lane);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma_16816<T>(y[mt][2 * np], a2[mt], b2[0], b2[1]);
                mma_16816<T>(y[mt][2 * np + 1], a2[mt], b2[2], b2[3]);
            }
        }
    }
}

/* lse in log2 units as the kernels use it: +inf where P must be 0 (row past the end, or a row that saw no key). */
__device__ __forceinline__ float lse_log2(const xfa_cuda_backward &p, int b, int h, int i)
{
    if (i >= p.seqlen_q) return INFINITY;
    const float lse = p.lse[b * p.lse_stride[0] + (int64_t)i * p.lse_stride[1] + h * p.lse_stride[2]];
    return lse == -INFINITY ? INFINITY : lse * LOG2E;
}

__device__ __forceinline__ float delta_of(const xfa_cuda_backward &p, int b, int h, int i)
{
    return i < p.seqlen_q ? p.delta[((int64_t)b * p.heads_q + h) * p.seqlen_q + i] : 0.0f;
}

/* One C-layout row (a thread's two columns of each n8 tile) of an accumulator, scaled, to 16-bit storage. */
template <int DT, typename T>
__device__ __forceinline__ void store_row(T *row, const float (*acc)[4], int hr, float scale, int t)
{
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
        *reinterpret_cast<uint32_t *>(row + dt * 8 + 2 * t) =
            pack2<T>(acc[dt][2 * hr] * scale, acc[dt][2 * hr + 1] * scale);
}

template <int D, typename T, bool CAUSAL> __device__ __forceinline__ void kv_body(const xfa_cuda_backward &p)
{
    constexpr int WARPS = XFA_BWD_KV_WARPS(D), MT = XFA_BWD_KV_MT(D), THREADS = WARPS * 32;
    constexpr int Bc = XFA_BWD_KV_BC(D), Br = XFA_BWD_KV_BR(D), ROW = D + XFA_BWD_PAD;
    constexpr int NQ = Br / 8;  /* n8 tiles of Sᵀ: query columns */
    constexpr int DT = D / 8;   /* n8 tiles of dK, dV */
    constexpr int KD = D / 16;  /* k16 steps over the head dim */
    constexpr bool KV_IN_REGS = D * MT <= 64;
    static_assert(Bc == WARPS * 16 * MT && Br % 16 == 0 && D % 16 == 0, "tile shape");

    extern __shared__ __align__(16) unsigned char smem[];
    T *K_tile = reinterpret_cast<T *>(smem);
    T *V_tile = K_tile + Bc * ROW;
    T *Q_tile = V_tile + Bc * ROW;    /* [2][Br][ROW] */
    T *dO_tile = Q_tile + 2 * Br * ROW; /* [2][Br][ROW] */
    float *lse_s = reinterpret_cast<float *>(dO_tile + 2 * Br * ROW); /* [2][Br] */
    float *D_s = lse_s + 2 * Br;                                        /* [2][Br] */

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane >> 2, t = lane & 3;
    const int hk = blockIdx.y, b = blockIdx.z;
    const int col0 = blockIdx.x * Bc, warp_key0 = col0 + warp * 16 * MT;
    const int seqlen_q = p.seqlen_q, seqlen_k = p.seqlen_k, diag = seqlen_k - seqlen_q;
    const int group = p.heads_q / p.heads_kv;

    /* Query rows that see a key of this block: causal row i sees keys j <= i + diag. */
    int row_begin = 0;
    if (CAUSAL) row_begin = max(0, col0 - diag) / Br * Br;
    const int q_blocks = row_begin < seqlen_q ? (seqlen_q - row_begin + Br - 1) / Br : 0;
    const int n_steps = group * q_blocks;

    /* Step `it`: query block it % q_blocks of head hk * group + it / q_blocks, into stage s. */
    auto load_step = [&](int it, int s) {
        const int h = hk * group + it / q_blocks, q0 = row_begin + it % q_blocks * Br;
        const T *q = static_cast<const T *>(p.q) + b * p.q_stride[0] + h * p.q_stride[2];
        const T *d_o = static_cast<const T *>(p.d_o) + b * p.do_stride[0] + h * p.do_stride[2];
        load_rows_async<Br, D, XFA_BWD_PAD, THREADS>(Q_tile + s * Br * ROW, q, p.q_stride[1], q0, seqlen_q, tid);
        load_rows_async<Br, D, XFA_BWD_PAD, THREADS>(dO_tile + s * Br * ROW, d_o, p.do_stride[1], q0, seqlen_q, tid);
        for (int r = tid; r < Br; r += THREADS) {
            lse_s[s * Br + r] = lse_log2(p, b, h, q0 + r);
            D_s[s * Br + r] = delta_of(p, b, h, q0 + r);
        }
    };

    const T *k = static_cast<const T *>(p.k) + b * p.k_stride[0] + hk * p.k_stride[2];
    const T *v = static_cast<const T *>(p.v) + b * p.v_stride[0] + hk * p.v_stride[2];
    load_rows_async<Bc, D, XFA_BWD_PAD, THREADS>(K_tile, k, p.k_stride[1], col0, seqlen_k, tid);
    load_rows_async<Bc, D, XFA_BWD_PAD, THREADS>(V_tile, v, p.v_stride[1], col0, seqlen_k, tid);
    if (n_steps > 0) load_step(0, 0);
    cp_async_commit();

    float dk_acc[MT][DT][4], dv_acc[MT][DT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int dt = 0; dt < DT; ++dt)
#pragma unroll
            for (int e = 0; e < 4; ++e) dk_acc[mt][dt][e] = dv_acc[mt][dt][e] = 0.0f;

    /* Where they fit, the warp's K and V fragments stay in registers for the whole block. */
    uint32_t k_frag[KV_IN_REGS ? MT : 1][KV_IN_REGS ? KD : 1][4], v_frag[KV_IN_REGS ? MT : 1][KV_IN_REGS ? KD : 1][4];
    if constexpr (KV_IN_REGS) {
        cp_async_wait_all();
        __syncthreads();
        a_frags_to_regs<MT, KD, ROW>(k_frag, v_frag, K_tile, V_tile, warp, lane);
    }
    const float scale_log2 = p.scale * LOG2E;

    for (int it = 0; it < n_steps; ++it) {
        const int s = it & 1;
        cp_async_wait_all();
        __syncthreads(); /* stage s is in; every warp is done with stage s ^ 1 */
        if (it + 1 < n_steps) load_step(it + 1, s ^ 1);
        cp_async_commit();
        const T *Qs = Q_tile + s * Br * ROW, *dOs = dO_tile + s * Br * ROW;
        const float *lse_c = lse_s + s * Br, *D_c = D_s + s * Br;
        const int q0 = row_begin + it % q_blocks * Br;

        float st[MT][NQ][4], dpt[MT][NQ][4];
        two_products<MT, NQ, KD, ROW, KV_IN_REGS>(st, dpt, k_frag, v_frag, K_tile, V_tile, Qs, dOs, warp, lane);

        /* Pᵀ and dSᵀ in place; the causal test only where this warp's keys cross the block's diagonal. */
        const bool crosses = CAUSAL && warp_key0 + 16 * MT - 1 > q0 + diag;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NQ; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int col = nt * 8 + 2 * t + (e & 1);
                    float pr = ex2_approx(fmaf(st[mt][nt][e], scale_log2, -lse_c[col]));
                    if (crosses && warp_key0 + mt * 16 + g + (e >> 1) * 8 > q0 + col + diag) pr = 0.0f;
                    dpt[mt][nt][e] = pr * (dpt[mt][nt][e] - D_c[col]);
                    st[mt][nt][e] = pr;
                }

#pragma unroll
        for (int kk = 0; kk < Br / 16; ++kk) {
            uint32_t a_p[MT][4], a_ds[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                c_to_a<T>(a_p[mt], st[mt][2 * kk], st[mt][2 * kk + 1]);
                c_to_a<T>(a_ds[mt], dpt[mt][2 * kk], dpt[mt][2 * kk + 1]);
            }
#pragma unroll
            for (int dp = 0; dp < D / 16; ++dp) {
                uint32_t bo[4], bq[4];
                load_b_trans<ROW>(bo, dOs, kk * 16, dp * 16, lane);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_16816<T>(dv_acc[mt][2 * dp], a_p[mt], bo[0], bo[1]);
                    mma_16816<T>(dv_acc[mt][2 * dp + 1], a_p[mt], bo[2], bo[3]);
                }
                load_b_trans<ROW>(bq, Qs, kk * 16, dp * 16, lane);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_16816<T>(dk_acc[mt][2 * dp], a_ds[mt], bq[0], bq[1]);
                    mma_16816<T>(dk_acc[mt][2 * dp + 1], a_ds[mt], bq[2], bq[3]);
                }
            }
        }
    }
    cp_async_wait_all(); /* nothing may still be in flight when the block exits */

    T *dk = static_cast<T *>(p.dk) + b * p.dk_stride[0] + hk * p.dk_stride[2];
    T *dv = static_cast<T *>(p.dv) + b * p.dv_stride[0] + hk * p.dv_stride[2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const int key = warp_key0 + mt * 16 + g + hr * 8;
            if (key >= seqlen_k) continue;
            store_row<DT>(dk + (int64_t)key * p.dk_stride[1], dk_acc[mt], hr, p.scale, t);
            store_row<DT>(dv + (int64_t)key * p.dv_stride[1], dv_acc[mt], hr, 1.0f, t);
        }
}

template <int D, typename T, bool CAUSAL> __device__ __forceinline__ void q_body(const xfa_cuda_backward &p)
{
    constexpr int WARPS = XFA_BWD_Q_WARPS(D), MT = XFA_BWD_Q_MT(D), THREADS = WARPS * 32;
    constexpr int Br = XFA_BWD_Q_BR(D), Bc = XFA_BWD_Q_BC(D), ROW = D + XFA_BWD_PAD;
    constexpr int NK = Bc / 8;  /* n8 tiles of S: key columns */
    constexpr int DT = D / 8;   /* n8 tiles of dQ */
    constexpr int KD = D / 16;  /* k16 steps over the head dim */
    constexpr bool Q_IN_REGS = D * MT <= 64;
    static_assert(Br == WARPS * 16 * MT && Bc % 16 == 0 && D % 16 == 0, "tile shape");

    extern __shared__ __align__(16) unsigned char smem[];
    T *Q_tile = reinterpret_cast<T *>(smem);
    T *dO_tile = Q_tile + Br * ROW;
    T *K_tile = dO_tile + Br * ROW;   /* [2][Bc][ROW] */
    T *V_tile = K_tile + 2 * Bc * ROW; /* [2][Bc][ROW] */

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane >> 2, t = lane & 3;
    /* Causal: the last query blocks see the most keys; start them first. */
    const int q_block = CAUSAL ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    const int h = blockIdx.y, b = blockIdx.z;
    const int hk = h / (p.heads_q / p.heads_kv);
    const int row0 = q_block * Br, warp_row0 = row0 + warp * 16 * MT;
    const int seqlen_q = p.seqlen_q, seqlen_k = p.seqlen_k, diag = seqlen_k - seqlen_q;

    int key_end = seqlen_k;
    if (CAUSAL) key_end = min(seqlen_k, max(0, row0 + Br + diag));
    const int n_blocks = (key_end + Bc - 1) / Bc;

    const T *q = static_cast<const T *>(p.q) + b * p.q_stride[0] + h * p.q_stride[2];
    const T *d_o = static_cast<const T *>(p.d_o) + b * p.do_stride[0] + h * p.do_stride[2];
    const T *k = static_cast<const T *>(p.k) + b * p.k_stride[0] + hk * p.k_stride[2];
    const T *v = static_cast<const T *>(p.v) + b * p.v_stride[0] + hk * p.v_stride[2];
    load_rows_async<Br, D, XFA_BWD_PAD, THREADS>(Q_tile, q, p.q_stride[1], row0, seqlen_q, tid);
    load_rows_async<Br, D, XFA_BWD_PAD, THREADS>(dO_tile, d_o, p.do_stride[1], row0, seqlen_q, tid);
    if (n_blocks > 0) {
        load_rows_async<Bc, D, XFA_BWD_PAD, THREADS>(K_tile, k, p.k_stride[1], 0, seqlen_k, tid);
        load_rows_async<Bc, D, XFA_BWD_PAD, THREADS>(V_tile, v, p.v_stride[1], 0, seqlen_k, tid);
    }
    cp_async_commit();

    /* This thread's rows: g and g + 8 of each of the warp's m16 tiles. */
    float lse2[MT][2], D_i[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            lse2[mt][hr] = lse_log2(p, b, h, warp_row0 + mt * 16 + g + hr * 8);
            D_i[mt][hr] = delta_of(p, b, h, warp_row0 + mt * 16 + g + hr * 8);
        }
    float dq_acc[MT][DT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int dt = 0; dt < DT; ++dt)
#pragma unroll
            for (int e = 0; e < 4; ++e) dq_acc[mt][dt][e] = 0.0f;

    uint32_t q_frag[Q_IN_REGS ? MT : 1][Q_IN_REGS ? KD : 1][4], do_frag[Q_IN_REGS ? MT : 1][Q_IN_REGS ? KD : 1][4];
    if constexpr (Q_IN_REGS) {
        cp_async_wait_all();
        __syncthreads();
        a_frags_to_regs<MT, KD, ROW>(q_frag, do_frag, Q_tile, dO_tile, warp, lane);
    }
    const float scale_log2 = p.scale * LOG2E;

    for (int j = 0; j < n_blocks; ++j) {
        const int s = j & 1, col0 = j * Bc;
        cp_async_wait_all();
        __syncthreads(); /* stage s is in; every warp is done with stage s ^ 1 */
        if (j + 1 < n_blocks) {
            load_rows_async<Bc, D, XFA_BWD_PAD, THREADS>(K_tile + (s ^ 1) * Bc * ROW, k, p.k_stride[1], col0 + Bc, seqlen_k, tid);
            load_rows_async<Bc, D, XFA_BWD_PAD, THREADS>(V_tile + (s ^ 1) * Bc * ROW, v, p.v_stride[1], col0 + Bc, seqlen_k, tid);
        }
        cp_async_commit();
        const T *Ks = K_tile + s * Bc * ROW, *Vs = V_tile + s * Bc * ROW;

        float sc[MT][NK][4], dp[MT][NK][4];
        two_products<MT, NK, KD, ROW, Q_IN_REGS>(sc, dp, q_frag, do_frag, Q_tile, dO_tile, Ks, Vs, warp, lane);

        /* dS in place of S; masks only where the block crosses the end of K or this warp's diagonal. */
        const bool masked = col0 + Bc > seqlen_k || (CAUSAL && col0 + Bc - 1 > warp_row0 + diag);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NK; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int hr = e >> 1;
                    float pr = ex2_approx(fmaf(sc[mt][nt][e], scale_log2, -lse2[mt][hr]));
                    if (masked) {
                        const int key = col0 + nt * 8 + 2 * t + (e & 1), row = warp_row0 + mt * 16 + g + hr * 8;
                        if (key >= seqlen_k || (CAUSAL && key > row + diag)) pr = 0.0f;
                    }
                    sc[mt][nt][e] = pr * (dp[mt][nt][e] - D_i[mt][hr]);
                }

#pragma unroll
        for (int kk = 0; kk < Bc / 16; ++kk) {
            uint32_t a_ds[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) c_to_a<T>(a_ds[mt], sc[mt][2 * kk], sc[mt][2 * kk + 1]);
#pragma unroll
            for (int dd = 0; dd < D / 16; ++dd) {
                uint32_t bk[4];
                load_b_trans<ROW>(bk, Ks, kk * 16, dd * 16, lane);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_16816<T>(dq_acc[mt][2 * dd], a_ds[mt], bk[0], bk[1]);
                    mma_16816<T>(dq_acc[mt][2 * dd + 1], a_ds[mt], bk[2], bk[3]);
                }
            }
        }
    }
    cp_async_wait_all(); /* nothing may still be in flight when the block exits (n_blocks == 0) */

    T *dq = static_cast<T *>(p.dq) + b * p.dq_stride[0] + h * p.dq_stride[2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const int row = warp_row0 + mt * 16 + g + hr * 8;
            if (row < seqlen_q) store_row<DT>(dq + (int64_t)row * p.dq_stride[1], dq_acc[mt], hr, p.scale, t);
        }
}

/* sm_86/89 (99 KiB of shared memory) never get these tiles planned: no code for them there. */
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 860 || __CUDA_ARCH__ == 890)
#define XFA_BWD_BUILT(bytes) ((bytes) <= 101376)
#else
#define XFA_BWD_BUILT(bytes) true
#endif

template <int D, typename T, bool CAUSAL>
__global__ void __launch_bounds__(XFA_BWD_KV_WARPS(D) * 32) kv_kernel(const xfa_cuda_backward p)
{
    if constexpr (XFA_BWD_BUILT(XFA_BWD_KV_SMEM_BYTES(D))) kv_body<D, T, CAUSAL>(p);
    else __trap();
}

template <int D, typename T, bool CAUSAL>
__global__ void __launch_bounds__(XFA_BWD_Q_WARPS(D) * 32) q_kernel(const xfa_cuda_backward p)
{
    if constexpr (XFA_BWD_BUILT(XFA_BWD_Q_SMEM_BYTES(D))) q_body<D, T, CAUSAL>(p);
    else __trap();
}

template <int D, typename T, bool CAUSAL> xfa_cuda_result launch(const xfa_cuda_backward *p, cudaStream_t stream)
{
    void (*kv)(const xfa_cuda_backward) = kv_kernel<D, T, CAUSAL>;
    void (*qk)(const xfa_cuda_backward) = q_kernel<D, T, CAUSAL>;
    const int kv_smem = XFA_BWD_KV_SMEM_BYTES(D), q_smem = XFA_BWD_Q_SMEM_BYTES(D);
    cudaError_t err = cudaFuncSetAttribute(kv, cudaFuncAttributeMaxDynamicSharedMemorySize, kv_smem);
    if (err == cudaSuccess) err = cudaFuncSetAttribute(qk, cudaFuncAttributeMaxDynamicSharedMemorySize, q_smem);
    if (err != cudaSuccess) return (xfa_cuda_result)err;
    constexpr int kv_bc = XFA_BWD_KV_BC(D), q_br = XFA_BWD_Q_BR(D);
    const dim3 kv_grid((unsigned)((p->seqlen_k + kv_bc - 1) / kv_bc), (unsigned)p->heads_kv, (unsigned)p->batch);
    kv<<<kv_grid, XFA_BWD_KV_WARPS(D) * 32, kv_smem, stream>>>(*p);
    if ((err = cudaGetLastError()) != cudaSuccess) return (xfa_cuda_result)err;
    const dim3 q_grid((unsigned)((p->seqlen_q + q_br - 1) / q_br), (unsigned)p->heads_q, (unsigned)p->batch);
    qk<<<q_grid, XFA_BWD_Q_WARPS(D) * 32, q_smem, stream>>>(*p);
    return (xfa_cuda_result)cudaGetLastError();
}

/* The launcher for one head dim: f16 or bf16, causal (window_right 0, no left limit) or no mask. */
template <int D> xfa_cuda_result backward_mma(const xfa_cuda_backward *p, void *stream)
{
    if (p->head_dim != D || p->window_left >= 0 || p->window_right > 0 || p->softcap > 0.0f || p->alibi || p->bias)
        return XFA_CUDA_NOT_HANDLED;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    const bool causal = p->window_right == 0;
    if (p->dtype == XFA_CUDA_F16) return causal ? launch<D, __half, true>(p, s) : launch<D, __half, false>(p, s);
    if (p->dtype == XFA_CUDA_BF16)
        return causal ? launch<D, __nv_bfloat16, true>(p, s) : launch<D, __nv_bfloat16, false>(p, s);
    return XFA_CUDA_NOT_HANDLED;
}

} // namespace bwd
} // namespace xfa

#endif
