/*
 * reference.h - attention computed plainly on the host, the yardstick every
 * backend is tested against:
 *   - xfa_reference_forward: softmax(Q K^T * scale) V in double precision, no tiling;
 *   - xfa_reference_unfused: the same, unfused, in the storage precision (S and P
 *     rounded to the dtype, f32 accumulation), the way a framework's plain
 *     attention computes it; its error sets the f16/bf16 test tolerance.
 */
#ifndef XFA_REFERENCE_H
#define XFA_REFERENCE_H

#include "xfa.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A tensor in host memory: the xfa_tensor layout with a pointer instead of a buffer. */
typedef struct xfa_host_view {
    const void *data;
    xfa_dtype dtype;
    int64_t shape[4];  /* batch, seqlen, heads, head_dim */
    int64_t stride[4]; /* elements */
} xfa_host_view;

/* The host view of a tensor whose memory starts at `base` (the buffer's host copy). */
xfa_host_view xfa_host_view_of(const xfa_tensor *t, const void *buffer_base);

typedef struct xfa_reference_problem {
    xfa_host_view q, k, v; /* shapes as in xfa_attention_forward */
    double scale;          /* already resolved (not 0 for default) */
    bool causal;           /* bottom-right aligned; implies window_right = 0 */
    int64_t window_left, window_right; /* -1: no limit */
    double softcap;        /* 0: off */
    xfa_host_view alibi;   /* (1|B, 1, Hq, 1) f32 slopes; data NULL: off */
    xfa_host_view bias;    /* (1|B, Sq, 1|Hq, Sk); data NULL: off */
} xfa_reference_problem;

/* A problem with no window, softcap, ALiBi or bias. */
xfa_reference_problem xfa_reference_problem_make(xfa_host_view q, xfa_host_view k, xfa_host_view v, double scale,
                                                 bool causal);

/* o: B*Sq*Hq*D doubles in BSHD order; lse: B*Hq*Sq doubles in (B, H, S) order, or NULL.
 * Rows that see no key get o = 0 and lse = -inf. Returns XFA_ERROR_OUT_OF_HOST_MEMORY on allocation failure. */
xfa_status xfa_reference_forward(const xfa_reference_problem *p, double *o, double *lse);

/* Gradients of the forward pass for incoming gradient d_o (shape of o), in double:
 * dq (B*Sq*Hq*D), dk and dv (B*Sk*Hkv*D), BSHD order. dk, dv sum over a GQA group. */
xfa_status xfa_reference_backward(const xfa_reference_problem *p, const xfa_host_view *d_o, double *dq, double *dk,
                                  double *dv);

/* The same, unfused, in the dtype's precision: each intermediate matrix (S, P, dP, dS)
 * and each gradient rounded to the dtype, as a framework's plain attention backward
 * stores them. Its error against xfa_reference_backward sets the f16/bf16 tolerance. */
xfa_status xfa_reference_backward_unfused(const xfa_reference_problem *p, const xfa_host_view *d_o,
                                          xfa_dtype precision, double *dq, double *dk, double *dv);

/* Unfused attention in the dtype's precision; o: B*Sq*Hq*D floats in BSHD order (values rounded to the dtype). */
xfa_status xfa_reference_unfused(const xfa_reference_problem *p, xfa_dtype precision, float *o);

#ifdef __cplusplus
}
#endif

#endif /* XFA_REFERENCE_H */
