/*
 * device_util.cuh - what the CUDA kernels share: element conversion for the
 * three dtypes, and thin wrappers over the PTX the tensor-core kernel uses
 * (cp.async, ldmatrix, mma.sync), kept in one place so each appears once.
 */
#ifndef XFA_CUDA_DEVICE_UTIL_CUH
#define XFA_CUDA_DEVICE_UTIL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace xfa {

/* Storage <-> f32. */
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/* Two f32 -> one register of two 16-bit elements, the low half first (the mma operand order). */
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi)
{
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/* 16 bytes global -> shared, bypassing L1; src_bytes = 0 writes zeros (rows past the end). */
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

/* ROWS x D tile of 16-bit elements, rows first..first+ROWS-1 of src (zeros from `limit` on), into shared
 * memory rows padded to D + PAD elements, 16 bytes per cp.async; complete after cp_async_wait_all. */
template <int ROWS, int D, int PAD, int THREADS, typename T>
__device__ __forceinline__ void load_rows_async(T *dst, const T *src, int64_t row_stride, int first, int limit, int tid)
{
    constexpr int CHUNKS = D / 8, ROW = D + PAD;
    static_assert(ROWS * CHUNKS % THREADS == 0, "tile chunks must split evenly over the threads");
#pragma unroll
    for (int it = 0; it < ROWS * CHUNKS / THREADS; ++it) {
        const int i = tid + it * THREADS;
        const int r = i / CHUNKS, c = i % CHUNKS;
        const bool ok = first + r < limit;
        const T *s = src + (ok ? (int64_t)(first + r) * row_stride : 0) + c * 8;
        cp_async_16(smem_addr(dst + r * ROW + c * 8), s, ok ? 16 : 0);
    }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

/* Four 8x8 matrices of 16-bit elements; lane l names the row address of matrix l / 8. */
__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                                  uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

/* c += a * b for one m16n8k16 tile, f32 accumulate. */
template <typename T> __device__ __forceinline__ void mma_16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1);
template <> __device__ __forceinline__ void mma_16816<__half>(float *c, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float *c, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* exp2 on the SFU (ex2.approx.ftz.f32): exp2(-inf) = +0. */
__device__ __forceinline__ float ex2_approx(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

} // namespace xfa

#endif
