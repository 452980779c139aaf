/*
 * sm90_launch.cu - xfa_cuda_sm90_supported / xfa_cuda_sm90_forward (cuda/launch.h): checks that TMA
 * can address the views, builds the three tensor maps on the host and launches the kernel for the
 * problem's head dim. cuTensorMapEncodeTiled is a driver function: it is looked up through the
 * runtime (cudaGetDriverEntryPointByVersion) so that nothing links against libcuda.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <math.h>
#include <atomic>

#include "../launch.h"
#include "sm90_configs.h"
#include "sm90_forward.cuh"

namespace {

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                     const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                     CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* Looked up once; two threads racing here both store the same pointer. */
encode_tiled_fn encode_tiled()
{
    static std::atomic<encode_tiled_fn> fn{nullptr};
    static std::atomic<bool> looked{false};
    if (looked.load(std::memory_order_acquire)) return fn.load(std::memory_order_relaxed);
    void *f = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
        fn.store(reinterpret_cast<encode_tiled_fn>(f), std::memory_order_relaxed);
    else
        (void)cudaGetLastError();
    looked.store(true, std::memory_order_release);
    return fn.load(std::memory_order_relaxed);
}

/* TMA wants 16-byte aligned bases and 16-byte multiples for every stride it actually steps. */
bool tma_view_ok(const void *ptr, const int64_t stride[3], int64_t batch, int64_t seqlen, int64_t heads)
{
    if (reinterpret_cast<uintptr_t>(ptr) % 16) return false;
    const int64_t size[3] = {batch, seqlen, heads};
    for (int i = 0; i < 3; i++) {
        if (size[i] <= 1) continue;
        const int64_t bytes = stride[i] * 2;
        if (bytes <= 0 || bytes % 16 || bytes >= (int64_t(1) << 40)) return false;
    }
    return true;
}

/* (dim, seqlen, head, batch) map over a (batch, seqlen, head) strided view; boxes of 64 x rows. */
bool make_map(CUtensorMap *map, const xfa_cuda_forward *p, const void *ptr, const int64_t stride[3], int64_t seqlen,
              int64_t heads, int rows)
{
    encode_tiled_fn encode = encode_tiled();
    if (!encode) return false;
    const int64_t size[3] = {p->batch, seqlen, heads};
    cuuint64_t dim[4] = {(cuuint64_t)p->head_dim, (cuuint64_t)seqlen, (cuuint64_t)heads, (cuuint64_t)p->batch};
    cuuint64_t step[3];
    const int order[3] = {1, 2, 0}; /* seqlen, head, batch */
    for (int i = 0; i < 3; i++) {
        const int k = order[i];
        /* a stride of a size-1 dim is never stepped; any legal value will do */
        step[i] = size[k] > 1 ? (cuuint64_t)(stride[k] * 2) : 16;
    }
    cuuint32_t box[4] = {64, (cuuint32_t)rows, 1, 1};
    cuuint32_t elem[4] = {1, 1, 1, 1};
    const CUtensorMapDataType type =
        p->dtype == XFA_CUDA_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    return encode(map, type, 4, const_cast<void *>(ptr), dim, step, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace

extern "C" int xfa_cuda_sm90_supported(const xfa_cuda_forward *p)
{
    if (!p || (p->dtype != XFA_CUDA_F16 && p->dtype != XFA_CUDA_BF16)) return 0;
    if (p->head_dim != 64 && p->head_dim != 128 && p->head_dim != 256) return 0;
    /* Windows, softcap, ALiBi, bias and packed sequences are not in this kernel: the mma.sync
     * kernel runs them. Its softmax takes the row max of the raw scores: scale > 0 only. */
    if (xfa_cuda_forward_has_extras(p) || !(p->scale > 0.0f)) return 0;
    if (p->batch < 1 || p->heads_q < 1 || p->heads_kv < 1 || p->seqlen_q < 1 || p->seqlen_k < 1) return 0;
    if (p->heads_q % p->heads_kv || p->batch > 65535 || p->heads_q > 65535) return 0;
    /* tiles (query blocks of 64 rows or more, times heads, times batch) are counted in 32 bits */
    if (((int64_t)p->seqlen_q / 64 + 1) * p->heads_q * p->batch >= ((int64_t)1 << 31)) return 0;
    if (!tma_view_ok(p->q, p->q_stride, p->batch, p->seqlen_q, p->heads_q)) return 0;
    if (!tma_view_ok(p->k, p->k_stride, p->batch, p->seqlen_k, p->heads_kv)) return 0;
    if (!tma_view_ok(p->v, p->v_stride, p->batch, p->seqlen_k, p->heads_kv)) return 0;
    /* O is written two elements (4 bytes) at a time */
    if (reinterpret_cast<uintptr_t>(p->o) % 4) return 0;
    for (int i = 0; i < 3; i++)
        if (p->o_stride[i] % 2) return 0;
    return 1;
}

extern "C" xfa_cuda_result xfa_cuda_sm90_forward(const xfa_cuda_forward *p, void *stream)
{
    if (!xfa_cuda_sm90_supported(p)) return XFA_CUDA_NOT_HANDLED;
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev)) {
        (void)cudaGetLastError();
        return XFA_CUDA_NOT_HANDLED;
    }
    if (major != 9 || minor != 0) return XFA_CUDA_NOT_HANDLED; /* sm_90a machine code runs on 9.0 only */

    xfa_sm90::Params prm;
    int Br = p->Br, Bc = p->Bc, stages = p->stages;
    xfa_sm90::resolve_config(p->head_dim, p->causal != 0, p->seqlen_k, &Br, &Bc, &stages);
    if (!make_map(&prm.tq, p, p->q, p->q_stride, p->seqlen_q, p->heads_q, Br) ||
        !make_map(&prm.tk, p, p->k, p->k_stride, p->seqlen_k, p->heads_kv, Bc) ||
        !make_map(&prm.tv, p, p->v, p->v_stride, p->seqlen_k, p->heads_kv, Bc))
        return XFA_CUDA_NOT_HANDLED;
    prm.o = p->o;
    prm.lse = p->lse;
    for (int i = 0; i < 3; i++) {
        prm.o_stride[i] = p->o_stride[i];
        prm.lse_stride[i] = p->lse_stride[i];
    }
    prm.seqlen_q = p->seqlen_q;
    prm.seqlen_k = p->seqlen_k;
    prm.group = p->heads_q / p->heads_kv;
    prm.causal = p->causal != 0;
    prm.scale = p->scale;
    prm.scale_log2 = p->scale * 1.4426950408889634f;

    prm.m_blocks = (p->seqlen_q + Br - 1) / Br;
    prm.heads = p->heads_q;
    prm.tiles = prm.m_blocks * p->heads_q * p->batch;
    /* Non-causal tiles cost the same: one CTA per SM walks them in turn (persistent), overlapping a
     * tile's tail with the next one's loads. Causal tiles differ up to Sk/Bc-fold: one CTA each,
     * longest first, and the hardware hands them out. */
    int ctas = prm.tiles, sms = 0;
#ifndef XFA_SM90_NO_PERSIST
    if (!prm.causal && cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && sms > 0)
        ctas = prm.tiles < sms ? prm.tiles : sms;
#endif
    (void)sms;
    const dim3 grid(ctas);
    const bool bf16 = p->dtype == XFA_CUDA_BF16;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    cudaError_t e = cudaErrorNotSupported;
    switch (p->head_dim) {
    case 64: e = xfa_sm90::launch_d64(bf16, prm, grid, s, Br, Bc, stages); break;
    case 128: e = xfa_sm90::launch_d128(bf16, prm, grid, s, Br, Bc, stages); break;
    case 256: e = xfa_sm90::launch_d256(bf16, prm, grid, s, Br, Bc, stages); break;
    }
    return e == cudaSuccess ? 0 : (int)e;
}
