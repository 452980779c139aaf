/*
 * cpu_kernel.h - the tiled online-softmax forward on the CPU, in f32: the
 * algorithm the GPU kernels run, here where it can be tested anywhere.
 */
#ifndef XFA_CPU_KERNEL_H
#define XFA_CPU_KERNEL_H

#include "internal.h"

/* Scratch one worker needs for a plan, in floats. */
size_t xfa_cpu_scratch_floats(const xfa_plan *plan);

/* Computes the query block `q_block` (rows q_block*Br ..) of head h in batch b.
 * q, k, v, o, lse point at the start of each tensor's memory (view offsets applied). */
void xfa_cpu_forward_block(const xfa_forward_args *a, const void *q, const void *k, const void *v, void *o, float *lse,
                           int64_t b, int64_t h, int64_t q_block, float *scratch);

#endif /* XFA_CPU_KERNEL_H */
