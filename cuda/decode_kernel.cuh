/*
 * decode_kernel.cuh - the split-KV decode kernel (Flash-Decoding): the Sq new
 * tokens of every query head of one KV head attend to one split of that KV
 * head's cache, so each K/V element is read from DRAM once for the whole GQA
 * group. cuda/decode_{f16,bf16,f32}.cu instantiate it per head dim.
 *
 * A work-group is (split x row block x KV head, sequence), 4 warps. Its rows
 * (up to XFA_CUDA_DECODE_ROWS) are token r % Sq of query head
 * hk * group + r / Sq, as in cl/flash_decode.cl; each thread keeps its share
 * of every row's q and acc in registers. The warps are cut into lane groups of
 * LPR lanes; a lane group reads one key row at a time, each lane 16 bytes of it
 * (at D = 128 f16: 16 lanes a row, two rows per warp load), U keys per step, so
 * every lane has 2U 16-byte loads per step. The loads are cp.async into a
 * per-warp ring of STAGES steps in shared memory, issued STAGES - 1 steps
 * ahead, so while a warp computes one step the next ones stream in; each lane
 * reads back only what it copied itself, so the ring needs no barrier, and a
 * step's 32 lanes touch 512 contiguous bytes (no bank conflicts). Dot products are reduced across
 * the lane group with xor shuffles; each lane group runs its own online
 * softmax (m_i, l_i, acc) in the log2 domain over its keys, and the lane groups
 * are combined once at the end through shared memory (the ring's, reused).
 *
 * K/V that are not 16-byte vectors (odd strides, misaligned views) take the
 * element-wise layout instead: 32 lanes a row, lane l owning dims l, l + 32, ...,
 * loaded straight into registers.
 *
 * Lengths and pages come from the device and are clamped (xfa.h): no access
 * leaves the cache whatever seqlens and block_table hold.
 */
#ifndef XFA_CUDA_DECODE_KERNEL_CUH
#define XFA_CUDA_DECODE_KERNEL_CUH

#include "decode_launch.h"
#include "device_util.cuh"

#include <climits>
#include <cuda_runtime.h>

namespace xfa_decode {

constexpr int WARPS = 4;
constexpr int THREADS = WARPS * 32;
constexpr int RB = XFA_CUDA_DECODE_ROWS;
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;
constexpr unsigned FULL_MASK = 0xffffffffu;
constexpr int STAGES = 3; /* steps in each warp's cp.async ring */

/* 16 bytes global -> shared, zero-filled when !valid (src is then not read). Before sm_80 (no
 * cp.async) a plain copy. */
__device__ __forceinline__ void copy_16(uint4 *dst, const void *src, bool valid)
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(xfa::smem_addr(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
#else
    *dst = valid ? *static_cast<const uint4 *>(src) : make_uint4(0, 0, 0, 0);
#endif
}
__device__ __forceinline__ void copy_commit()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
/* Waits until at most N of this thread's groups are still in flight. */
template <int N> __device__ __forceinline__ void copy_wait()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

/* 16 bytes of K or V widened to f32: 8 f16 / bf16 elements or 4 f32. */
template <typename E> struct chunk;
template <> struct chunk<__half> {
    static constexpr int C = 8;
    __device__ __forceinline__ static void widen(const uint4 &w, float *x)
    {
        const __half2 *h = reinterpret_cast<const __half2 *>(&w);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 f = __half22float2(h[i]);
            x[2 * i] = f.x;
            x[2 * i + 1] = f.y;
        }
    }
};
template <> struct chunk<__nv_bfloat16> {
    static constexpr int C = 8;
    __device__ __forceinline__ static void widen(const uint4 &w, float *x)
    {
        const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int i = 0; i < 4; i++) { /* bf16 is the top half of an f32 */
            x[2 * i] = __uint_as_float(u[i] << 16);
            x[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
        }
    }
};
template <> struct chunk<float> {
    static constexpr int C = 4;
    __device__ __forceinline__ static void widen(const uint4 &w, float *x)
    {
        x[0] = __uint_as_float(w.x);
        x[1] = __uint_as_float(w.y);
        x[2] = __uint_as_float(w.z);
        x[3] = __uint_as_float(w.w);
    }
};

/*
 * A lane layout says which dims of a key row a lane owns and how it loads them:
 *   LPR lanes per key row (a power of two; xor shuffles stay inside the group),
 *   EL elements per lane, U keys per lane group and step, DMAX the shared-memory row,
 *   has(li, e, D): whether element e of lane li is a real dim; dim(li, e): which dim.
 */

/* 16-byte vectors: lane li owns chunks li, li + LPR, ... of C elements (C = 8 at 16 bits). */
template <typename E, int D_> struct vector_layout {
    static constexpr int C = chunk<E>::C;
    static constexpr int CPR = D_ / C; /* chunks per row */
    static constexpr int LPR = CPR <= 4 ? 4 : CPR <= 8 ? 8 : CPR <= 16 ? 16 : 32;
    static constexpr int NC = (CPR + LPR - 1) / LPR; /* chunks per lane */
    static constexpr int EL = NC * C;
    static constexpr int U = NC == 1 ? 4 : 2; /* 2U x NC 16-byte loads in flight: 8 (f32 D > 128: NC = 2) */
    static constexpr int DMAX = D_;
    static constexpr int MIN_BLOCKS = XFA_CUDA_DECODE_BLOCKS_PER_SM;
    static constexpr bool ASYNC = true;
    /* One step of one warp in the ring: [u][K, V][chunk][lane] of 16 bytes. */
    static constexpr int STEP_VECTORS = U * 2 * NC * 32;
    static_assert(D_ % (2 * C) == 0 || C == 4, "head dims are multiples of 32");
    struct raw {
        uint4 c[NC];
    };
    /* Copies this lane's chunks of key slot u's K (kv 0) or V (kv 1) row into the step. */
    __device__ __forceinline__ static void issue(uint4 *step, int u, int kv, const E *row, int li, int lane,
                                                 bool valid)
    {
#pragma unroll
        for (int c = 0; c < NC; c++)
            if (c * LPR + li < CPR)
                copy_16(step + ((u * 2 + kv) * NC + c) * 32 + lane, row + (c * LPR + li) * C, valid);
    }
    __device__ __forceinline__ static void fetch(raw &r, const uint4 *step, int u, int kv, int li, int lane)
    {
#pragma unroll
        for (int c = 0; c < NC; c++)
            r.c[c] = c * LPR + li < CPR ? step[((u * 2 + kv) * NC + c) * 32 + lane] : make_uint4(0, 0, 0, 0);
    }
    __device__ __forceinline__ static int head_dim(int) { return D_; }
    __device__ __forceinline__ static bool has(int li, int e, int) { return (e / C) * LPR + li < CPR; }
    __device__ __forceinline__ static int dim(int li, int e) { return ((e / C) * LPR + li) * C + e % C; }
    __device__ __forceinline__ static void load(raw &r, const E *row, int li, int64_t, int)
    {
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const int ci = c * LPR + li;
            r.c[c] = ci < CPR ? __ldg(reinterpret_cast<const uint4 *>(row + ci * C)) : make_uint4(0, 0, 0, 0);
        }
    }
    __device__ __forceinline__ static void zero(raw &r)
    {
#pragma unroll
        for (int c = 0; c < NC; c++) r.c[c] = make_uint4(0, 0, 0, 0);
    }
    __device__ __forceinline__ static void widen(const raw &r, float (&x)[EL])
    {
#pragma unroll
        for (int c = 0; c < NC; c++) chunk<E>::widen(r.c[c], x + c * C);
    }
};

/* Any strides and alignment: 32 lanes a row, lane li owns dims li, li + 32, ... (D / 32 of them). */
template <typename E> struct element_layout {
    static constexpr int LPR = 32;
    static constexpr int EL = 8;
    static constexpr int U = 2;
    static constexpr int DMAX = 256;
    static constexpr int MIN_BLOCKS = 2;
    static constexpr bool ASYNC = false;
    static constexpr int STEP_VECTORS = 0;
    struct raw {
        float x[EL];
    };
    __device__ __forceinline__ static int head_dim(int d) { return d; }
    __device__ __forceinline__ static bool has(int, int e, int D) { return e * 32 < D; }
    __device__ __forceinline__ static int dim(int li, int e) { return e * 32 + li; }
    __device__ __forceinline__ static void load(raw &r, const E *row, int li, int64_t d_stride, int D)
    {
#pragma unroll
        for (int e = 0; e < EL; e++) r.x[e] = e * 32 < D ? xfa::to_f32(row[(int64_t)(e * 32 + li) * d_stride]) : 0.0f;
    }
    __device__ __forceinline__ static void zero(raw &r)
    {
#pragma unroll
        for (int e = 0; e < EL; e++) r.x[e] = 0.0f;
    }
    __device__ __forceinline__ static void widen(const raw &r, float (&x)[EL])
    {
#pragma unroll
        for (int e = 0; e < EL; e++) x[e] = r.x[e];
    }
};

__device__ __forceinline__ int clamp_int(int x, int lo, int hi) { return min(max(x, lo), hi); }

/* Dynamic shared memory of the kernel for layout L: the warps' rings, or (after the key loop, in
 * the same bytes) the lane groups' results, whichever is larger. */
template <class L> constexpr size_t smem_bytes()
{
    constexpr int NG = WARPS * (32 / L::LPR);
    constexpr size_t ring = (size_t)WARPS * STAGES * L::STEP_VECTORS * 16;
    constexpr size_t combine = ((size_t)NG * RB * (L::DMAX + 3) + 2 * RB) * sizeof(float);
    return ring > combine ? ring : combine;
}

template <typename E, class L>
__global__ void __launch_bounds__(THREADS, L::MIN_BLOCKS) decode_kernel(const xfa_cuda_decode_problem p)
{
    constexpr int LPR = L::LPR, RPW = 32 / LPR, NG = WARPS * RPW, EL = L::EL, U = L::U;
    constexpr int KB = NG * U; /* keys a work-group reads per step */
    extern __shared__ uint4 smem[];

    const int D = L::head_dim(p.head_dim);
    const int lane = threadIdx.x & 31, li = lane % LPR, warp = threadIdx.x >> 5;
    const int g = (threadIdx.x >> 5) * RPW + lane / LPR; /* this thread's lane group */
    const int Sq = p.seqlen_q, group = p.heads_q / p.heads_kv, R = group * Sq;
    const int row_blocks = (R + RB - 1) / RB;
    /* x = (split, row block, KV head), the KV head fastest: the work-groups that run side by side
     * read neighbouring pieces of the same tokens (a token's KV heads are adjacent in the cache),
     * and a split's row blocks read the same keys (the second from L2). */
    const int hk = blockIdx.x % p.heads_kv, rb = blockIdx.x / p.heads_kv % row_blocks;
    const int split = blockIdx.x / p.heads_kv / row_blocks, row0 = rb * RB;
    const int rows = min(RB, R - row0);
    const int b = blockIdx.y;
    const bool paged = p.block_table != nullptr;

    const int len = min(clamp_int(p.seqlens[b * p.seqlens_stride], 0, p.capacity) + p.appended, p.capacity);
    const int diag = len - Sq; /* row i's diagonal is cache token i + diag */
    /* This split's keys: whole steps of KB keys, so only a split's last step is ragged. */
    int chunk_keys = (len + p.splits - 1) / p.splits;
    chunk_keys = (chunk_keys + KB - 1) / KB * KB;
    const int key_begin = min(split * chunk_keys, len), key_end = min(key_begin + chunk_keys, len);

    /* Rows: q (scaled) in registers, and the keys each row sees, lo .. hi (causal, window). */
    const E *q = static_cast<const E *>(p.q);
    const bool extras = p.softcap > 0.0f || p.alibi != nullptr;
    /* (a multiply: an IEEE division in the loop is a subroutine call that spills at D <= 128) */
    const float inv_softcap = p.softcap > 0.0f ? 1.0f / p.softcap : 0.0f;
    float q_reg[RB][EL];
    int pos[RB]; /* row's diagonal key: it sees lo = pos - window_left (or 0) .. hi = pos (causal, or len - 1) */
    float slope[RB];
    int lo_min = INT_MAX, lo_max = INT_MIN, hi_min = INT_MAX, hi_max = INT_MIN;
#pragma unroll
    for (int rr = 0; rr < RB; rr++) {
        const int row = row0 + rr, i = row % Sq, h = hk * group + row / Sq;
        const bool live = rr < rows;
        pos[rr] = i + diag;
        const int lo = p.window_left >= 0 ? pos[rr] - p.window_left : 0, hi = p.causal ? pos[rr] : len - 1;
        slope[rr] = live && p.alibi ? p.alibi[b * p.alibi_stride[0] + h * p.alibi_stride[1]] : 0.0f;
        const E *q_row = q + b * p.q_stride[0] + i * p.q_stride[1] + h * p.q_stride[2];
#pragma unroll
        for (int e = 0; e < EL; e++)
            q_reg[rr][e] = live && L::has(li, e, D) ? xfa::to_f32(q_row[L::dim(li, e) * p.q_stride[3]]) * p.q_scale : 0.0f;
        if (live) {
            lo_min = min(lo_min, lo);
            lo_max = max(lo_max, lo);
            hi_min = min(hi_min, hi);
            hi_max = max(hi_max, hi);
        }
    }
    /* Keys no row of this block sees are not read: before the earliest window, after the last diagonal. */
    const int kbeg = max(key_begin, lo_min), kend = min(key_end, hi_max + 1);

    float m_i[RB], l_i[RB], acc[RB][EL];
#pragma unroll
    for (int rr = 0; rr < RB; rr++) {
        m_i[rr] = -INFINITY;
        l_i[rr] = 0.0f;
#pragma unroll
        for (int e = 0; e < EL; e++) acc[rr][e] = 0.0f;
    }

    const E *k_head = static_cast<const E *>(p.k_cache) + hk * p.k_stride[2];
    const E *v_head = static_cast<const E *>(p.v_cache) + hk * p.v_stride[2];
    if (!paged) {
        k_head += b * p.k_stride[0];
        v_head += b * p.v_stride[0];
    }
    const int32_t *table = paged ? p.block_table + b * p.block_table_stride[0] : nullptr;

    /* Where key j's K and V rows start (a page through the clamped block table). */
    auto key_rows = [&](int j, const E *&k_row, const E *&v_row) {
        if (paged) {
            const int page = p.page_shift >= 0 ? j >> p.page_shift : j / p.page_size;
            const int in_page = j - page * p.page_size;
            const int64_t cb = clamp_int(__ldg(table + page * p.block_table_stride[1]), 0, p.num_pages - 1);
            k_row = k_head + cb * p.k_stride[0] + in_page * p.k_stride[1];
            v_row = v_head + cb * p.v_stride[0] + in_page * p.v_stride[1];
        } else {
            k_row = k_head + j * p.k_stride[1];
            v_row = v_head + j * p.v_stride[1];
        }
    };
    uint4 *ring = smem + warp * STAGES * L::STEP_VECTORS;
    /* Starts the copies of the step at key k into ring slot `slot`; always one commit group per step. */
    auto issue_step = [&](int k, int slot) {
        if constexpr (L::ASYNC) {
            if (k < kend) {
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const int j = k + g * U + u;
                    const E *k_row = k_head, *v_row = v_head; /* any valid address when out of range */
                    if (j < kend) key_rows(j, k_row, v_row);
                    L::issue(ring + slot * L::STEP_VECTORS, u, 0, k_row, li, lane, j < kend);
                    L::issue(ring + slot * L::STEP_VECTORS, u, 1, v_row, li, lane, j < kend);
                }
            }
            copy_commit();
        }
    };
#pragma unroll
    for (int t = 0; t < STAGES - 1; t++) issue_step(kbeg + t * KB, t);

    for (int k0 = kbeg, step = 0; k0 < kend; k0 += KB, step++) {
        const int j0 = k0 + g * U; /* this lane group's first key */
        typename L::raw k_raw[U], v_raw[U];
        if constexpr (L::ASYNC) {
            issue_step(k0 + (STAGES - 1) * KB, (step + STAGES - 1) % STAGES);
            copy_wait<STAGES - 1>(); /* this step's group has landed */
            const uint4 *slot = ring + (step % STAGES) * L::STEP_VECTORS;
#pragma unroll
            for (int u = 0; u < U; u++) {
                L::fetch(k_raw[u], slot, u, 0, li, lane);
                L::fetch(v_raw[u], slot, u, 1, li, lane);
            }
        } else {
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int j = j0 + u;
                if (j < kend) {
                    const E *k_row, *v_row;
                    key_rows(j, k_row, v_row);
                    L::load(k_raw[u], k_row, li, p.k_stride[3], D);
                    L::load(v_raw[u], v_row, li, p.v_stride[3], D);
                } else {
                    L::zero(k_raw[u]);
                    L::zero(v_raw[u]);
                }
            }
        }

        /* s = q . k for every row and key of the lane group, summed over its lanes */
        float s[U][RB];
#pragma unroll
        for (int u = 0; u < U; u++) {
            float kf[EL];
            L::widen(k_raw[u], kf);
#pragma unroll
            for (int rr = 0; rr < RB; rr++) {
                float x = 0.0f;
#pragma unroll
                for (int e = 0; e < EL; e++) x = fmaf(q_reg[rr][e], kf[e], x);
                s[u][rr] = x;
            }
        }
        /* (rows past `rows` are reduced too: a guard would put a branch around every shuffle) */
#pragma unroll
        for (int off = LPR / 2; off > 0; off >>= 1)
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int rr = 0; rr < RB; rr++) s[u][rr] += __shfl_xor_sync(FULL_MASK, s[u][rr], off);

        /* Softcap and ALiBi, then masks only where the step crosses a row's first or last key or the
         * split's end: each test once per step (inside the loops it became a branch per score). */
        if (extras) {
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int rr = 0; rr < RB; rr++) {
                    float x = s[u][rr];
                    if (p.softcap > 0.0f) x = p.softcap * tanhf(x * inv_softcap);
                    s[u][rr] = (x - slope[rr] * fabsf((float)(pos[rr] - (j0 + u)))) * LOG2E;
                }
        }
        if (k0 + KB > kend || k0 < lo_max || k0 + KB - 1 > hi_min) {
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int rr = 0; rr < RB; rr++) {
                    const int j = j0 + u;
                    const int lo = p.window_left >= 0 ? pos[rr] - p.window_left : 0, hi = p.causal ? pos[rr] : len - 1;
                    if (!(j < kend && j >= lo && j <= hi)) s[u][rr] = -INFINITY;
                }
        }

        /* online softmax per row over the step's U keys; s becomes p */
#pragma unroll
        for (int rr = 0; rr < RB; rr++) {
            if (rr >= rows) continue;
            float mx = s[0][rr];
#pragma unroll
            for (int u = 1; u < U; u++) mx = fmaxf(mx, s[u][rr]);
            const float m_new = fmaxf(m_i[rr], mx);
            const float m_use = m_new == -INFINITY ? 0.0f : m_new; /* nothing seen yet: p = alpha = 0 */
            const float alpha = exp2f(m_i[rr] - m_use);
            float row_sum = 0.0f;
#pragma unroll
            for (int u = 0; u < U; u++) {
                s[u][rr] = exp2f(s[u][rr] - m_use);
                row_sum += s[u][rr];
            }
            l_i[rr] = l_i[rr] * alpha + row_sum;
            m_i[rr] = m_new;
#pragma unroll
            for (int e = 0; e < EL; e++) acc[rr][e] *= alpha;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            float vf[EL];
            L::widen(v_raw[u], vf);
#pragma unroll
            for (int rr = 0; rr < RB; rr++) {
                if (rr >= rows) continue;
#pragma unroll
                for (int e = 0; e < EL; e++) acc[rr][e] = fmaf(s[u][rr], vf[e], acc[rr][e]);
            }
        }
    }

    /* Combine the lane groups: weights exp2(m_g - m) per group and row, then O = sum_g w_g acc_g / l.
     * The ring's bytes are reused once every warp is past its loop (and no copy is in flight). */
    if constexpr (L::ASYNC) copy_wait<0>();
    __syncthreads();
    float(*s_acc)[RB][L::DMAX] = reinterpret_cast<float(*)[RB][L::DMAX]>(smem);
    float(*s_m)[RB] = reinterpret_cast<float(*)[RB]>(&s_acc[NG][0][0]);
    float(*s_l)[RB] = s_m + NG;
    float(*s_w)[RB] = s_l + NG;
    float *s_inv = &s_w[NG][0], *s_lse = s_inv + RB;
#pragma unroll
    for (int rr = 0; rr < RB; rr++) {
        if (rr >= rows) continue;
#pragma unroll
        for (int e = 0; e < EL; e++)
            if (L::has(li, e, D)) s_acc[g][rr][L::dim(li, e)] = acc[rr][e];
        if (li == 0) {
            s_m[g][rr] = m_i[rr];
            s_l[g][rr] = l_i[rr];
        }
    }
    __syncthreads();
    if ((int)threadIdx.x < rows) {
        const int r = threadIdx.x;
        float m = -INFINITY;
        for (int gg = 0; gg < NG; gg++) m = fmaxf(m, s_m[gg][r]);
        float l = 0.0f;
        for (int gg = 0; gg < NG; gg++) {
            const float w = s_m[gg][r] == -INFINITY ? 0.0f : exp2f(s_m[gg][r] - m);
            s_w[gg][r] = w;
            l += w * s_l[gg][r];
        }
        /* a split (or row) that sees nothing: O = 0, LSE = -inf */
        s_inv[r] = l > 0.0f ? 1.0f / l : 0.0f;
        s_lse[r] = l > 0.0f ? (m + log2f(l)) * LN2 : -INFINITY;
    }
    __syncthreads();

    const bool direct = p.part_o == nullptr;
    for (int idx = threadIdx.x; idx < rows * D; idx += THREADS) {
        const int r = idx / D, d = idx - r * D;
        float val = 0.0f;
#pragma unroll 4
        for (int gg = 0; gg < NG; gg++) val = fmaf(s_w[gg][r], s_acc[gg][r][d], val);
        val *= s_inv[r];
        const int row = row0 + r, i = row % Sq, h = hk * group + row / Sq;
        if (direct) {
            E *o = static_cast<E *>(p.o);
            o[b * p.o_stride[0] + i * p.o_stride[1] + h * p.o_stride[2] + d * p.o_stride[3]] = xfa::from_f32<E>(val);
        } else {
            const int64_t part_row = (((int64_t)split * p.batch + b) * p.heads_q + h) * Sq + i;
            p.part_o[part_row * D + d] = val;
        }
    }
    if ((int)threadIdx.x < rows) {
        const int r = threadIdx.x, row = row0 + r, i = row % Sq, h = hk * group + row / Sq;
        if (!direct)
            p.part_lse[(((int64_t)split * p.batch + b) * p.heads_q + h) * Sq + i] = s_lse[r];
        else if (p.lse)
            p.lse[b * p.lse_stride[0] + i * p.lse_stride[1] + h * p.lse_stride[2]] = s_lse[r];
    }
}

template <typename E, class L>
xfa_cuda_result launch_layout(const xfa_cuda_decode_problem *p, dim3 grid, cudaStream_t stream)
{
    constexpr size_t smem = smem_bytes<L>();
    if (smem > 48 * 1024) { /* beyond the default: opt in (once per kernel is enough, but cheap) */
        const cudaError_t err =
            cudaFuncSetAttribute(decode_kernel<E, L>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess) return (xfa_cuda_result)err;
    }
    decode_kernel<E, L><<<grid, THREADS, smem, stream>>>(*p);
    return (xfa_cuda_result)cudaGetLastError();
}

/* Launches the kernel for dtype E: the vector layout templated on the head dim, else the element one. */
template <typename E> xfa_cuda_result launch_attention(const xfa_cuda_decode_problem *p, cudaStream_t stream)
{
    const int R = (p->heads_q / p->heads_kv) * p->seqlen_q, row_blocks = (R + RB - 1) / RB;
    const dim3 grid((unsigned)(p->splits * row_blocks * p->heads_kv), (unsigned)p->batch);
    if (!p->vector_kv) return launch_layout<E, element_layout<E>>(p, grid, stream);
    switch (p->head_dim) {
#define XFA_DECODE_CASE(D) \
    case D: return launch_layout<E, vector_layout<E, D>>(p, grid, stream);
        XFA_DECODE_CASE(32)
        XFA_DECODE_CASE(64)
        XFA_DECODE_CASE(96)
        XFA_DECODE_CASE(128)
        XFA_DECODE_CASE(160)
        XFA_DECODE_CASE(192)
        XFA_DECODE_CASE(224)
        XFA_DECODE_CASE(256)
#undef XFA_DECODE_CASE
    default: return XFA_CUDA_NOT_HANDLED;
    }
}

} // namespace xfa_decode

/* The per-dtype launchers (cuda/decode_<dtype>.cu), dispatched by cuda/decode.cu. */
xfa_cuda_result xfa_decode_attention_f16(const xfa_cuda_decode_problem *p, cudaStream_t stream);
xfa_cuda_result xfa_decode_attention_bf16(const xfa_cuda_decode_problem *p, cudaStream_t stream);
xfa_cuda_result xfa_decode_attention_f32(const xfa_cuda_decode_problem *p, cudaStream_t stream);

#endif
