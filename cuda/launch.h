/*
 * launch.h - what the C host code (src/host/cuda_*.c) hands a CUDA kernel
 * launcher, and what every launcher in cuda/ returns. Plain C so the host side
 * never includes CUDA headers beyond the runtime API; the .cu files implement
 * the launchers with extern "C" linkage.
 *
 * All pointers are device pointers, already offset to the view's first element.
 * Strides are in elements; the head_dim stride is 1 (the host falls back to a
 * generic kernel otherwise).
 */
#ifndef XFA_CUDA_LAUNCH_H
#define XFA_CUDA_LAUNCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum xfa_cuda_dtype {
    XFA_CUDA_F32 = 0,
    XFA_CUDA_F16 = 1,
    XFA_CUDA_BF16 = 2
} xfa_cuda_dtype;

/* One forward problem, as a kernel sees it. */
typedef struct xfa_cuda_forward {
    const void *q, *k, *v;
    void *o;
    float *lse;                 /* NULL: no LSE output */
    xfa_cuda_dtype dtype;
    int32_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    /* (batch, seqlen, head) strides in elements; dim stride is 1 */
    int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];
    int64_t lse_stride[3];      /* (batch, seqlen, head) strides of the f32 LSE view */
    float scale;                /* softmax scale (not yet multiplied by log2(e)) */
    int32_t causal;             /* bottom-right aligned when seqlen_q != seqlen_k */
    /* Tile plan chosen on the host (0: the launcher's default for this head_dim). */
    int32_t Br, Bc, stages;
    /* head_dim strides of q, k, v, o in elements: 1 for every kernel but the generic one,
     * which takes any (added after the fields above, which keep their layout). */
    int64_t d_stride[4];

    /* The extras (include/xfa.h), appended after the fields above, which keep their layout.
     * Every one is off when zero/NULL, so a zeroed struct is a plain call. */
    int32_t has_window;         /* nonzero: window_left/right apply (each -1: no limit on that side) */
    int32_t window_left, window_right; /* bottom-right aligned; causal also caps the right at 0 */
    float softcap;              /* > 0: softcap * tanh(s / softcap) on the scaled score */
    const float *alibi;         /* NULL: off; slope of (b, h) is alibi[b * alibi_stride[0] + h * alibi_stride[1]] */
    int64_t alibi_stride[2];    /* batch (0 when broadcast), head */
    const void *bias;           /* NULL: off; f32 or the call's dtype, added to the score */
    int32_t bias_f32;           /* nonzero: bias is f32, else the call's dtype */
    int64_t bias_stride[4];     /* (batch, seqlen_q, head, seqlen_k), 0 where broadcast */
    /* Packed variable-length batch: NULL: off. batch is 1; seqlen_q/k are the packed totals;
     * sequence s is rows cu_seqlens_q[s] .. cu_seqlens_q[s+1]-1 (clamped into the totals). */
    const int32_t *cu_seqlens_q, *cu_seqlens_k;
    int64_t cu_stride[2];       /* element strides of cu_seqlens_q and cu_seqlens_k */
    int32_t sequences, max_seqlen_q; /* grid: sequences x ceil(max_seqlen_q / Br) */
} xfa_cuda_forward;

/* Whether a call uses any extra beyond causal, LSE, GQA and seqlen_q != seqlen_k. */
static inline int xfa_cuda_forward_has_extras(const xfa_cuda_forward *p)
{
    return p->has_window || p->softcap > 0.0f || p->alibi || p->bias || p->cu_seqlens_q;
}

/* Launcher result: 0 = launched; otherwise a cudaError_t value, or -1 when the
 * launcher does not handle this problem (the host then tries the next path). */
typedef int xfa_cuda_result;
#define XFA_CUDA_NOT_HANDLED (-1)

/*
 * The Hopper path (cuda/hopper/): wgmma + TMA + warp specialization, sm_90a only.
 * xfa_cuda_sm90_supported() answers without touching the GPU whether the
 * kernel handles this problem (dtype, head_dim, alignment; no extras, scale > 0:
 * other calls fall back to the mma.sync kernel); the launcher
 * enqueues on `stream` (a cudaStream_t) and never synchronizes.
 */
int xfa_cuda_sm90_supported(const xfa_cuda_forward *p);
xfa_cuda_result xfa_cuda_sm90_forward(const xfa_cuda_forward *p, void *stream);

/*
 * The mma.sync path (cuda/mma_d*.cu): m16n8k16 tensor cores, sm_80 and later,
 * f16/bf16, head dims 32, 64, 96, 128, 192 and 256 (160 and 224 run the generic
 * kernel), the tile of cuda/mma_config.h.
 * Needs 16-byte aligned q/k/v/o and (batch, seqlen, head) strides that are
 * multiples of 8 elements. One launcher per head dim; each raises its
 * kernels' dynamic shared-memory limit (the opt-in beyond 48 KiB) itself.
 */
xfa_cuda_result xfa_cuda_mma_forward_d32(const xfa_cuda_forward *p, void *stream);
xfa_cuda_result xfa_cuda_mma_forward_d64(const xfa_cuda_forward *p, void *stream);
xfa_cuda_result xfa_cuda_mma_forward_d96(const xfa_cuda_forward *p, void *stream);
xfa_cuda_result xfa_cuda_mma_forward_d128(const xfa_cuda_forward *p, void *stream);
xfa_cuda_result xfa_cuda_mma_forward_d192(const xfa_cuda_forward *p, void *stream);
xfa_cuda_result xfa_cuda_mma_forward_d256(const xfa_cuda_forward *p, void *stream);

/*
 * The generic path (cuda/generic.cu): any GPU, any dtype, strides and
 * alignment, head dims up to 256, computed in f32 without tensor cores. Uses
 * p->Br rows x 8 threads per row and p->Bc keys per block, with
 * xfa_cuda_generic_smem_bytes() of dynamic shared memory.
 */
xfa_cuda_result xfa_cuda_generic_forward(const xfa_cuda_forward *p, void *stream);
#define XFA_CUDA_GENERIC_THREADS_PER_ROW 8

#ifdef __cplusplus
}
#endif

#endif
