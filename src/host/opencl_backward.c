/*
 * opencl_backward.c - xfa_attention_backward on OpenCL: three launches of
 * cl/flash_backward.cl (D_i = rowsum(dO * O) into the context's scratch, then
 * dK/dV per K/V block, then dQ per query block), enqueued in order without
 * waiting, like the forward call. Deterministic: no atomics.
 *
 * Tiles: the backward keeps more per work-group than the forward (Q and dO,
 * K and V, P and dS), described once below; Br and Bc are the smaller of that
 * plan's and the call's plan (so a caller's small tiles are honoured).
 */
#include "opencl_internal.h"

#include <stdio.h>

extern const char xfa_cl_flash_backward[];

/* What cl/flash_backward.cl keeps in local memory: Q and dO (Br x (d+1) f32 each), K and V
 * (Bc x (d+1) f32 each), P and dS (Br x Bc f32 each), lse_i and D_i (Br f32 each). */
static const xfa_tile_layout backward_layout = {
    .path = "portable-backward",
    .q_elem_bytes = 8,
    .kv_elem_bytes = 4,
    .s_elem_bytes = 8,
    .o_elem_bytes = 0,
    .row_pad = 1,
    .stages = 1,
    .row_state_bytes = 8,
    .br_multiple = 4,
    .bc_multiple = 8,
    .br_max = 64,
    .bc_max = 64,
    .threads_per_row = 8,
};

/* Br, Bc for the call and the three kernels built for them. */
static xfa_status backward_kernels(xfa_context *ctx, const xfa_forward_args *f, cl_kernel kernels[3], uint32_t *Br,
                                   uint32_t *Bc)
{
    opencl_context *cl = ctx->impl;
    const xfa_tile_layout *L = &backward_layout;
    xfa_plan plan;
    char msg[XFA_MESSAGE_SIZE];
    xfa_status st = xfa_plan_make(&cl->limits, L, (uint32_t)f->head_dim, f->dtype, &plan, msg);
    if (st) return xfa_fail(ctx, st, "%s (OpenCL backward on %s)", msg, ctx->info.name);
    *Br = plan.Br < f->plan.Br ? plan.Br : f->plan.Br / L->br_multiple * L->br_multiple;
    *Bc = plan.Bc < f->plan.Bc ? plan.Bc : f->plan.Bc / L->bc_multiple * L->bc_multiple;
    /* The K/V pass has T work-items per key row. */
    while (*Bc > L->bc_multiple && *Bc * L->threads_per_row > cl->limits.max_workgroup_size) *Bc -= L->bc_multiple;
    if (*Br < L->br_multiple) *Br = L->br_multiple;
    if (*Bc < L->bc_multiple) *Bc = L->bc_multiple;
    char options[256];
    snprintf(options, sizeof options,
             "-cl-std=CL1.2 -DXFA_PATH=backward -DD=%u -DBR=%u -DBC=%u -DPAD=%u -DTHREADS_PER_ROW=%u -D%s",
             (unsigned)f->head_dim, *Br, *Bc, L->row_pad, L->threads_per_row, xfa_opencl_dtype_macro(f->dtype));
    static const char *const names[3] = {"xfa_bwd_delta", "xfa_bwd_kv", "xfa_bwd_q"};
    for (int i = 0; i < 3; i++)
        if ((st = xfa_opencl_kernel_named(ctx, "backward kernels", xfa_cl_flash_backward, names[i], options, &kernels[i],
                                          NULL)))
            return st;
    return XFA_SUCCESS;
}

/* The arguments every backward kernel starts with (PROBLEM_PARAMS in the kernel); returns the next index. */
static cl_int problem_args(cl_kernel kernel, const xfa_backward_args *a, cl_mem delta, cl_ulong delta_off, cl_uint *next)
{
    const xfa_forward_args *f = &a->fwd;
    const cl_mem q = xfa_opencl_mem(&f->q);
    const cl_mem mems[9] = {q, xfa_opencl_mem(&f->k), xfa_opencl_mem(&f->v), xfa_opencl_mem(&f->o), xfa_opencl_mem(&a->d_o), xfa_opencl_mem(&f->lse), delta,
                            f->has_alibi ? xfa_opencl_mem(&f->alibi) : q, f->has_bias ? xfa_opencl_mem(&f->bias) : q};
    const cl_ulong offs[9] = {xfa_opencl_elem_offset(&f->q), xfa_opencl_elem_offset(&f->k),
                              xfa_opencl_elem_offset(&f->v), xfa_opencl_elem_offset(&f->o),
                              xfa_opencl_elem_offset(&a->d_o), xfa_opencl_elem_offset(&f->lse), delta_off,
                              f->has_alibi ? xfa_opencl_elem_offset(&f->alibi) : 0,
                              f->has_bias ? xfa_opencl_elem_offset(&f->bias) : 0};
    const cl_long4 none = {{0, 0, 0, 0}};
    cl_long4 strides[7] = {xfa_opencl_strides(&f->q), xfa_opencl_strides(&f->k), xfa_opencl_strides(&f->v),
                           xfa_opencl_strides(&f->o), xfa_opencl_strides(&a->d_o), xfa_opencl_strides(&f->lse),
                           f->has_bias ? xfa_opencl_strides(&f->bias) : none};
    if (f->has_bias && f->bias.shape[0] == 1) strides[6].s[0] = 0;
    if (f->has_bias && f->bias.shape[2] == 1) strides[6].s[2] = 0;
    cl_long2 alibi_stride = {{0, 0}};
    if (f->has_alibi) {
        alibi_stride.s[0] = f->alibi.shape[0] == 1 ? 0 : f->alibi.stride[0];
        alibi_stride.s[1] = f->alibi.stride[2];
    }
    const cl_int ints[6] = {(cl_int)f->seqlen_q, (cl_int)f->seqlen_k, (cl_int)f->heads_q,
                            (cl_int)(f->heads_q / f->heads_kv),
                            xfa_opencl_window(f->window_left, f->seqlen_q + f->seqlen_k),
                            xfa_opencl_window(f->window_right, f->seqlen_q + f->seqlen_k)};
    const cl_float scale = f->scale, softcap = f->softcap;
    const cl_int flags = (f->has_alibi ? 2 : 0) | (f->has_bias ? 4 : 0) |
                         (f->has_bias && f->bias.dtype == XFA_DTYPE_F32 ? 8 : 0);
    cl_int err = CL_SUCCESS;
    cl_uint i = 0;
    for (int x = 0; x < 9; x++) err |= clSetKernelArg(kernel, i++, sizeof mems[x], &mems[x]);
    for (int x = 0; x < 9; x++) err |= clSetKernelArg(kernel, i++, sizeof offs[x], &offs[x]);
    for (int x = 0; x < 7; x++) err |= clSetKernelArg(kernel, i++, sizeof strides[x], &strides[x]);
    err |= clSetKernelArg(kernel, i++, sizeof alibi_stride, &alibi_stride);
    for (int x = 0; x < 6; x++) err |= clSetKernelArg(kernel, i++, sizeof ints[x], &ints[x]);
    err |= clSetKernelArg(kernel, i++, sizeof scale, &scale);
    err |= clSetKernelArg(kernel, i++, sizeof softcap, &softcap);
    err |= clSetKernelArg(kernel, i++, sizeof flags, &flags);
    *next = i;
    return err;
}

xfa_status xfa_opencl_backward(xfa_context *ctx, const xfa_backward_args *a)
{
    const xfa_forward_args *f = &a->fwd;
    if (f->seqlen_q + f->seqlen_k > INT32_MAX / 4) /* row + diagonal + window stays in 32 bits */
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "seqlen_q %lld, seqlen_k %lld: the OpenCL kernels index rows in 32 bits",
                        (long long)f->seqlen_q, (long long)f->seqlen_k);
    cl_kernel kernels[3];
    uint32_t Br, Bc;
    xfa_status st = backward_kernels(ctx, f, kernels, &Br, &Bc);
    if (st) return st;
    /* D_i in the caller's scratch (256-byte aligned offset) or the context's. */
    cl_mem delta;
    cl_ulong delta_off = 0;
    if (a->scratch) {
        delta = (cl_mem)a->scratch->impl;
        delta_off = (cl_ulong)((a->scratch->native_offset + a->scratch_offset) / sizeof(float));
    } else if ((st = xfa_opencl_scratch(ctx, a->scratch_bytes, &delta))) {
        return st;
    }
    const uint32_t T = backward_layout.threads_per_row;

    /* D_i */
    cl_uint next;
    cl_int err = problem_args(kernels[0], a, delta, delta_off, &next);
    if (err != CL_SUCCESS) return xfa_fail(ctx, XFA_ERROR_BACKEND_FAILURE, "clSetKernelArg (backward delta) failed (%d)", err);
    const size_t rows_global[3] = {(size_t)f->seqlen_q, (size_t)f->heads_q, (size_t)f->batch};
    if ((st = xfa_opencl_enqueue(ctx, "clEnqueueNDRangeKernel (backward delta)", kernels[0], 3, rows_global, NULL)))
        return st;

    /* dK, dV per K/V block */
    err = problem_args(kernels[1], a, delta, delta_off, &next);
    const cl_mem dk = xfa_opencl_mem(&a->dk), dv = xfa_opencl_mem(&a->dv), dq = xfa_opencl_mem(&a->dq);
    const cl_ulong dk_off = xfa_opencl_elem_offset(&a->dk), dv_off = xfa_opencl_elem_offset(&a->dv);
    const cl_ulong dq_off = xfa_opencl_elem_offset(&a->dq);
    const cl_long4 dk_s = xfa_opencl_strides(&a->dk), dv_s = xfa_opencl_strides(&a->dv), dq_s = xfa_opencl_strides(&a->dq);
    err |= clSetKernelArg(kernels[1], next++, sizeof dk, &dk);
    err |= clSetKernelArg(kernels[1], next++, sizeof dv, &dv);
    err |= clSetKernelArg(kernels[1], next++, sizeof dk_off, &dk_off);
    err |= clSetKernelArg(kernels[1], next++, sizeof dv_off, &dv_off);
    err |= clSetKernelArg(kernels[1], next++, sizeof dk_s, &dk_s);
    err |= clSetKernelArg(kernels[1], next++, sizeof dv_s, &dv_s);
    if (err != CL_SUCCESS) return xfa_fail(ctx, XFA_ERROR_BACKEND_FAILURE, "clSetKernelArg (backward dK/dV) failed (%d)", err);
    const size_t kv_wg = (size_t)Bc * T, kv_blocks = (size_t)((f->seqlen_k + Bc - 1) / Bc);
    const size_t kv_global[3] = {kv_blocks * kv_wg, (size_t)f->heads_kv, (size_t)f->batch}, kv_local[3] = {kv_wg, 1, 1};
    if ((st = xfa_opencl_enqueue(ctx, "clEnqueueNDRangeKernel (backward dK/dV)", kernels[1], 3, kv_global, kv_local)))
        return st;

    /* dQ per query block */
    err = problem_args(kernels[2], a, delta, delta_off, &next);
    err |= clSetKernelArg(kernels[2], next++, sizeof dq, &dq);
    err |= clSetKernelArg(kernels[2], next++, sizeof dq_off, &dq_off);
    err |= clSetKernelArg(kernels[2], next++, sizeof dq_s, &dq_s);
    if (err != CL_SUCCESS) return xfa_fail(ctx, XFA_ERROR_BACKEND_FAILURE, "clSetKernelArg (backward dQ) failed (%d)", err);
    const size_t q_wg = (size_t)Br * T, q_blocks = (size_t)((f->seqlen_q + Br - 1) / Br);
    const size_t q_global[3] = {q_blocks * q_wg, (size_t)f->heads_q, (size_t)f->batch}, q_local[3] = {q_wg, 1, 1};
    return xfa_opencl_enqueue(ctx, "clEnqueueNDRangeKernel (backward dQ)", kernels[2], 3, q_global, q_local);
}
