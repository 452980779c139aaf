/*
 * decode_merge.cu - combines partial attention results by their LSE: the
 * splits of a decode call, and xfa_merge_partials (cuda/decode_launch.h).
 * Parts whose LSE is -inf are skipped (never read), as the CPU merge does.
 *
 * split_merge_kernel (the decode's f32 partials, up to 1024 splits, on the
 * hot path): a work-group per output row (b, s, h). The weights
 * exp(LSE_i - LSE) go to shared memory once; then the threads, as D/4 float4
 * columns x part groups, each sum every part-group-th split with 16-byte loads,
 * several in flight, and the part groups are added through shared memory.
 *
 * merge_kernel (any parts: strides, dtype, a running result; xfa_merge_partials):
 * a warp per output row; the lanes reduce the parts' LSEs, then each lane sums
 * its dims (d = lane, lane + 32, ...) over the parts, weights computed 32 parts
 * at a time, one per lane, and passed round by shuffles.
 */
#include "decode_launch.h"
#include "device_util.cuh"

#include <cuda_runtime.h>

namespace {

constexpr int WARPS = 4;
constexpr int MAX_DIMS_PER_LANE = 8; /* head_dim 256 / 32 lanes */
constexpr unsigned FULL_MASK = 0xffffffffu;

/* Part i's LSE at (b, s, h). STRIDED (the decode scratch) reads parts[0] only: a part picked by a
 * run-time index would make the compiler copy the whole parameter array to local memory. */
template <bool STRIDED>
__device__ __forceinline__ const float *part_lse(const xfa_cuda_merge_problem &m, int i, int b, int s, int h)
{
    const xfa_cuda_merge_part &pp = STRIDED ? m.parts[0] : m.parts[i];
    const int64_t step = STRIDED ? i * m.lse_step : 0;
    return pp.lse + step + b * pp.lse_stride[0] + s * pp.lse_stride[1] + h * pp.lse_stride[2];
}

/* Element (b, s, h, d) of part i, as f32. */
template <typename E, bool STRIDED>
__device__ __forceinline__ float part_value(const xfa_cuda_merge_problem &m, int i, int b, int s, int h, int d)
{
    const xfa_cuda_merge_part &pp = STRIDED ? m.parts[0] : m.parts[i];
    const int64_t at = (STRIDED ? i * m.o_step : 0) + b * pp.o_stride[0] + s * pp.o_stride[1] +
                       h * pp.o_stride[2] + d * pp.o_stride[3];
    return m.parts_f32 ? static_cast<const float *>(pp.o)[at] : xfa::to_f32(static_cast<const E *>(pp.o)[at]);
}

template <typename E, bool STRIDED> __global__ void __launch_bounds__(WARPS * 32) merge_kernel(const xfa_cuda_merge_problem m)
{
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (row >= (int64_t)m.batch * m.seqlen * m.heads) return; /* whole warps leave together */
    const int h = (int)(row % m.heads), s = (int)(row / m.heads % m.seqlen), b = (int)(row / m.heads / m.seqlen);
    const int D = m.head_dim;
    const float prev_lse = m.prev_lse ? m.prev_lse[row] : -INFINITY;

    float lse_max = prev_lse;
    for (int i = lane; i < m.n; i += 32) lse_max = fmaxf(lse_max, *part_lse<STRIDED>(m, i, b, s, h));
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) lse_max = fmaxf(lse_max, __shfl_xor_sync(FULL_MASK, lse_max, off));

    float val[MAX_DIMS_PER_LANE];
#pragma unroll
    for (int x = 0; x < MAX_DIMS_PER_LANE; x++) val[x] = 0.0f;
    float merged = -INFINITY;
    if (lse_max != -INFINITY) { /* uniform: every lane holds the same maximum */
        float sum = lane == 0 && prev_lse != -INFINITY ? expf(prev_lse - lse_max) : 0.0f;
        for (int i = lane; i < m.n; i += 32) sum += expf(*part_lse<STRIDED>(m, i, b, s, h) - lse_max);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(FULL_MASK, sum, off);
        merged = lse_max + logf(sum);
        if (prev_lse != -INFINITY) {
            const float w = expf(prev_lse - merged);
#pragma unroll
            for (int x = 0; x < MAX_DIMS_PER_LANE; x++)
                if (x * 32 + lane < D) val[x] = w * m.prev_o[row * D + x * 32 + lane];
        }
        for (int i0 = 0; i0 < m.n; i0 += 32) {
            const float l = i0 + lane < m.n ? *part_lse<STRIDED>(m, i0 + lane, b, s, h) : -INFINITY;
            const float w_mine = l == -INFINITY ? 0.0f : expf(l - merged);
            const int count = min(32, m.n - i0);
            for (int t = 0; t < count; t++) {
                const float w = __shfl_sync(FULL_MASK, w_mine, t);
                if (w == 0.0f) continue; /* uniform: a part that saw no key */
#pragma unroll
                for (int x = 0; x < MAX_DIMS_PER_LANE; x++)
                    if (x * 32 + lane < D) val[x] = fmaf(w, part_value<E, STRIDED>(m, i0 + t, b, s, h, x * 32 + lane), val[x]);
            }
        }
    }
    const int64_t o_row = b * m.out_stride[0] + s * m.out_stride[1] + h * m.out_stride[2];
#pragma unroll
    for (int x = 0; x < MAX_DIMS_PER_LANE; x++) {
        const int d = x * 32 + lane;
        if (d >= D) continue;
        if (m.out_f32)
            static_cast<float *>(m.out)[o_row + d * m.out_stride[3]] = val[x];
        else
            static_cast<E *>(m.out)[o_row + d * m.out_stride[3]] = xfa::from_f32<E>(val[x]);
    }
    if (m.out_lse && lane == 0)
        m.out_lse[b * m.out_lse_stride[0] + s * m.out_lse_stride[1] + h * m.out_lse_stride[2]] = merged;
}


constexpr int SPLIT_THREADS = 128;
constexpr int MAX_SPLITS = 1024; /* validate_decode.c's limit */

/* The block's reduction of one value per thread (max or sum). */
template <bool MAX> __device__ __forceinline__ float block_reduce(float x, float *s_red)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float y = __shfl_xor_sync(FULL_MASK, x, off);
        x = MAX ? fmaxf(x, y) : x + y;
    }
    __syncthreads(); /* s_red is free again */
    if ((threadIdx.x & 31) == 0) s_red[threadIdx.x >> 5] = x;
    __syncthreads();
    x = s_red[0];
#pragma unroll
    for (int w = 1; w < SPLIT_THREADS / 32; w++) x = MAX ? fmaxf(x, s_red[w]) : x + s_red[w];
    return x;
}

template <typename E> __global__ void __launch_bounds__(SPLIT_THREADS) split_merge_kernel(const xfa_cuda_merge_problem m)
{
    __shared__ float s_w[MAX_SPLITS];
    __shared__ float4 s_sum[SPLIT_THREADS];
    __shared__ float s_red[SPLIT_THREADS / 32];
    const int row = blockIdx.x, h = row % m.heads, s = row / m.heads % m.seqlen, b = row / m.heads / m.seqlen;
    const xfa_cuda_merge_part &pp = m.parts[0];
    const float *lse = pp.lse + b * pp.lse_stride[0] + s * pp.lse_stride[1] + h * pp.lse_stride[2];
    const float *part = static_cast<const float *>(pp.o) + b * pp.o_stride[0] + s * pp.o_stride[1] + h * pp.o_stride[2];
    const int n = m.n, tid = threadIdx.x;

    float x = -INFINITY;
    for (int i = tid; i < n; i += SPLIT_THREADS) x = fmaxf(x, lse[i * m.lse_step]);
    const float lse_max = block_reduce<true>(x, s_red);
    x = 0.0f;
    if (lse_max != -INFINITY)
        for (int i = tid; i < n; i += SPLIT_THREADS) x += expf(lse[i * m.lse_step] - lse_max);
    const float sum = block_reduce<false>(x, s_red);
    const float merged = lse_max == -INFINITY ? -INFINITY : lse_max + logf(sum);
    for (int i = tid; i < n; i += SPLIT_THREADS) {
        const float l = lse[i * m.lse_step];
        s_w[i] = l == -INFINITY ? 0.0f : expf(l - merged);
    }
    __syncthreads();

    const int columns = m.head_dim / 4, part_groups = SPLIT_THREADS / columns;
    const int col = tid % columns, pg = tid / columns;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (pg < part_groups) {
#pragma unroll 4
        for (int i = pg; i < n; i += part_groups) {
            const float w = s_w[i];
            if (w == 0.0f) continue;
            const float4 v = __ldg(reinterpret_cast<const float4 *>(part + i * m.o_step) + col);
            acc.x = fmaf(w, v.x, acc.x);
            acc.y = fmaf(w, v.y, acc.y);
            acc.z = fmaf(w, v.z, acc.z);
            acc.w = fmaf(w, v.w, acc.w);
        }
    }
    s_sum[tid] = acc;
    __syncthreads();
    if (tid < columns) {
        for (int g = 1; g < part_groups; g++) {
            const float4 v = s_sum[g * columns + tid];
            acc.x += v.x;
            acc.y += v.y;
            acc.z += v.z;
            acc.w += v.w;
        }
        const float out4[4] = {acc.x, acc.y, acc.z, acc.w};
        E *o = static_cast<E *>(m.out) + b * m.out_stride[0] + s * m.out_stride[1] + h * m.out_stride[2];
#pragma unroll
        for (int k = 0; k < 4; k++) o[(4 * tid + k) * m.out_stride[3]] = xfa::from_f32<E>(out4[k]);
    }
    if (m.out_lse && tid == 0)
        m.out_lse[b * m.out_lse_stride[0] + s * m.out_lse_stride[1] + h * m.out_lse_stride[2]] = merged;
}

/* Whether the split merge takes this problem: the decode's own f32 partials (16-byte rows). */
bool split_merge_fits(const xfa_cuda_merge_problem *m)
{
    const xfa_cuda_merge_part &pp = m->parts[0];
    bool ok = m->strided && m->parts_f32 && !m->prev_o && !m->out_f32 && m->n <= MAX_SPLITS && m->head_dim % 4 == 0 &&
              m->head_dim / 4 <= SPLIT_THREADS && pp.o_stride[3] == 1 && m->o_step % 4 == 0 &&
              reinterpret_cast<uintptr_t>(pp.o) % 16 == 0;
    for (int i = 0; i < 3; i++) ok = ok && pp.o_stride[i] % 4 == 0;
    return ok;
}

template <typename E> xfa_cuda_result launch(const xfa_cuda_merge_problem *m, cudaStream_t stream)
{
    const int64_t rows = (int64_t)m->batch * m->seqlen * m->heads;
    if (split_merge_fits(m)) {
        split_merge_kernel<E><<<(unsigned)rows, SPLIT_THREADS, 0, stream>>>(*m);
        return (xfa_cuda_result)cudaGetLastError();
    }
    const unsigned blocks = (unsigned)((rows + WARPS - 1) / WARPS);
    if (m->strided)
        merge_kernel<E, true><<<blocks, WARPS * 32, 0, stream>>>(*m);
    else
        merge_kernel<E, false><<<blocks, WARPS * 32, 0, stream>>>(*m);
    return (xfa_cuda_result)cudaGetLastError();
}

} // namespace

extern "C" xfa_cuda_result xfa_cuda_merge(const xfa_cuda_merge_problem *m, void *stream)
{
    if (m->head_dim > 32 * MAX_DIMS_PER_LANE || m->n < 1 || (!m->strided && m->n > XFA_CUDA_MERGE_MAX_PARTS))
        return XFA_CUDA_NOT_HANDLED;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    switch (m->dtype) {
    case XFA_CUDA_F16: return launch<__half>(m, s);
    case XFA_CUDA_BF16: return launch<__nv_bfloat16>(m, s);
    case XFA_CUDA_F32: return launch<float>(m, s);
    }
    return XFA_CUDA_NOT_HANDLED;
}
