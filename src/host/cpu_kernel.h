/*
 * cpu_kernel.h - the tiled online-softmax forward on the CPU, in f32: the
 * algorithm the GPU kernels run, here where it can be tested anywhere.
 */
#ifndef XFA_CPU_KERNEL_H
#define XFA_CPU_KERNEL_H

#include "internal.h"

/* Scratch one worker needs for a plan, in floats. */
size_t xfa_cpu_scratch_floats(const xfa_plan *plan);

/* Where each tensor of a call starts in host memory (view offsets applied); NULL when absent. */
typedef struct xfa_cpu_views {
    const void *q, *k, *v;
    void *o;
    float *lse;
    const float *alibi;
    const void *bias;
} xfa_cpu_views;

/* Computes the query block `q_block` (rows q_block*Br ..) of head h in batch b. */
void xfa_cpu_forward_block(const xfa_forward_args *a, const xfa_cpu_views *mem, int64_t b, int64_t h, int64_t q_block,
                           float *scratch);

#endif /* XFA_CPU_KERNEL_H */
