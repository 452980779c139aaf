/*
 * backward_launch.h - what the C host code (src/host/cuda_backward.c) hands the
 * CUDA backward launchers (cuda/backward*.cu): one backward problem as the
 * kernels see it. Plain C, like launch.h for the forward.
 *
 * All pointers are device pointers, already offset to the view's first
 * element. Strides are in elements, (batch, seqlen, head, dim); a broadcast
 * dimension of the bias or ALiBi view has stride 0.
 */
#ifndef XFA_CUDA_BACKWARD_LAUNCH_H
#define XFA_CUDA_BACKWARD_LAUNCH_H

#include "launch.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xfa_cuda_backward {
    const void *q, *k, *v, *o, *d_o;
    const float *lse;            /* the forward's LSE (natural log), f32 */
    float *delta;                /* scratch: D_i = rowsum(dO * O), f32 [batch][heads_q][seqlen_q] */
    void *dq, *dk, *dv;
    const float *alibi;          /* NULL: no ALiBi; slope of (b, h) at b * alibi_stride[0] + h * alibi_stride[1] */
    const void *bias;            /* NULL: no bias; f32 when bias_f32, else the call's dtype */
    xfa_cuda_dtype dtype;        /* of q, k, v, o, d_o, dq, dk, dv */
    int32_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    int64_t q_stride[4], k_stride[4], v_stride[4], o_stride[4], do_stride[4];
    int64_t dq_stride[4], dk_stride[4], dv_stride[4];
    int64_t lse_stride[3];       /* (batch, seqlen, head) */
    int64_t bias_stride[4];
    int64_t alibi_stride[2];     /* (batch, head) */
    int32_t bias_f32;
    float scale;                 /* softmax scale */
    float softcap;               /* 0: off */
    /* Row i sees keys i + Sk - Sq - window_left .. i + Sk - Sq + window_right; -1: unlimited
     * (causal is window_right = 0). */
    int32_t window_left, window_right;
    /* Tiles of the generic kernels (the tensor-core kernels have their own; see backward_config.h). */
    int32_t Br, Bc;
} xfa_cuda_backward;

/* D_i = rowsum(dO_i * O_i) into p->delta: every path's first launch. */
xfa_cuda_result xfa_cuda_backward_delta(const xfa_cuda_backward *p, void *stream);

/*
 * The generic kernels (cuda/backward.cu): any dtype, strides, alignment, head dim (multiple of 8
 * up to 256) and every feature, computed in f32 on the CUDA cores; the algorithm of
 * cl/flash_backward.cl. dK/dV with p->Bc key rows x 8 threads, dQ with p->Br query rows x 8 threads;
 * shared memory xfa_cuda_backward_generic_smem_bytes() (the larger of the two kernels').
 */
xfa_cuda_result xfa_cuda_backward_generic(const xfa_cuda_backward *p, void *stream);
#define XFA_CUDA_BACKWARD_THREADS_PER_ROW 8

/*
 * The tensor-core kernels (cuda/backward_mma_d*.cu): mma.sync m16n8k16, sm_80+, f16/bf16, head dims
 * 64 and 128, causal or not, any scale, GQA; no window, softcap, ALiBi or bias (the host sends those
 * to the generic kernels). Need 16-byte aligned views with unit dim stride and other strides
 * multiples of 8 elements. XFA_CUDA_NOT_HANDLED for anything else.
 */
xfa_cuda_result xfa_cuda_backward_mma_d64(const xfa_cuda_backward *p, void *stream);
xfa_cuda_result xfa_cuda_backward_mma_d128(const xfa_cuda_backward *p, void *stream);

#ifdef __cplusplus
}
#endif

#endif
