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
} xfa_cuda_forward;

/* Launcher result: 0 = launched; otherwise a cudaError_t value, or -1 when the
 * launcher does not handle this problem (the host then tries the next path). */
typedef int xfa_cuda_result;
#define XFA_CUDA_NOT_HANDLED (-1)

/*
 * The Hopper path (cuda/hopper/): wgmma + TMA + warp specialization, sm_90a only.
 * xfa_cuda_sm90_supported() answers without touching the GPU whether the
 * kernel handles this problem (dtype, head_dim, alignment); the launcher
 * enqueues on `stream` (a cudaStream_t) and never synchronizes.
 */
int xfa_cuda_sm90_supported(const xfa_cuda_forward *p);
xfa_cuda_result xfa_cuda_sm90_forward(const xfa_cuda_forward *p, void *stream);

#ifdef __cplusplus
}
#endif

#endif
