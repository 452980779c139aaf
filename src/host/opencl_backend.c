/*
 * opencl_backend.c - the OpenCL backend's slots: contexts, buffers (cl_mem),
 * the forward launch, the shared enqueue and scratch, and synchronisation.
 * Discovery and paths are in opencl_device.c, the program cache in
 * opencl_program.c, decode and merge in opencl_decode.c, the backward in
 * opencl_backward.c, the caller-handle entry points (xfa_opencl.h) in
 * opencl_interop.c.
 *
 * The context holds one reference to its cl_context and cl_command_queue
 * (created here or retained from the caller) and drops exactly that one.
 * Calls are enqueued and return; blocking copies and xfa_context_synchronize
 * wait. Each kernel waits on the previous one's event and downloads on the
 * last, so an out-of-order queue still runs xfa's work in order and reads O
 * after it is written.
 */
#include "alloc.h"
#include "opencl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CL_FAIL XFA_CL_FAIL

static xfa_status opencl_device_info(int index, xfa_device_info *info, char *msg)
{
    cl_platform_id platform;
    cl_device_id device;
    xfa_status st = xfa_opencl_device_at(index, &platform, &device, msg);
    return st ? st : xfa_opencl_describe(platform, device, info, NULL, msg);
}

xfa_status xfa_opencl_context_init(xfa_context *ctx, opencl_context *cl)
{
    char msg[XFA_MESSAGE_SIZE];
    xfa_status st = xfa_opencl_describe(cl->platform, cl->device, &ctx->info, &cl->path, msg);
    if (st) return xfa_fail(ctx, st, "%s", msg);
    cl->limits = xfa_opencl_limits(&ctx->info);
    cl->nvidia = xfa_opencl_is_nvidia(cl->platform);
    cl->wide_decode_rows = xfa_opencl_wide_decode_rows(cl);
    return XFA_SUCCESS;
}

void xfa_opencl_context_free(opencl_context *cl)
{
    if (!cl) return;
    if (cl->queue) clFinish(cl->queue);
    if (cl->last_event) clReleaseEvent(cl->last_event);
    if (cl->scratch) clReleaseMemObject(cl->scratch);
    xfa_opencl_programs_release(cl);
    if (cl->queue) clReleaseCommandQueue(cl->queue);
    if (cl->context) clReleaseContext(cl->context);
    xfa_free(cl);
}

static xfa_status opencl_context_create(xfa_context *ctx, int index)
{
    char msg[XFA_MESSAGE_SIZE];
    opencl_context *cl = xfa_calloc(1, sizeof *cl);
    if (!cl) return xfa_fail(ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating the OpenCL context");
    xfa_status st = xfa_opencl_device_at(index, &cl->platform, &cl->device, msg);
    if (st) {
        xfa_free(cl);
        return xfa_fail(ctx, st, "%s", msg);
    }
    cl_int err;
    const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)cl->platform, 0};
    cl->context = clCreateContext(props, 1, &cl->device, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        xfa_opencl_context_free(cl);
        return CL_FAIL(ctx, "clCreateContext", err);
    }
    cl->own_context = true;
    cl->queue = clCreateCommandQueue(cl->context, cl->device, 0, &err);
    if (err != CL_SUCCESS) {
        cl->queue = NULL;
        xfa_opencl_context_free(cl);
        return CL_FAIL(ctx, "clCreateCommandQueue", err);
    }
    cl->own_queue = true;
    if ((st = xfa_opencl_context_init(ctx, cl))) {
        xfa_opencl_context_free(cl);
        return st;
    }
    ctx->impl = cl;
    return XFA_SUCCESS;
}

static void opencl_context_destroy(xfa_context *ctx)
{
    xfa_opencl_context_free(ctx->impl);
    ctx->impl = NULL;
}

static xfa_status opencl_plan(xfa_context *ctx, uint32_t head_dim, xfa_dtype dtype, xfa_plan *plan)
{
    const opencl_context *cl = ctx->impl;
    char msg[XFA_MESSAGE_SIZE];
    const opencl_path *path = xfa_opencl_path_for(cl, dtype);
    xfa_status st = xfa_plan_make(&cl->limits, &path->layout, head_dim, dtype, plan, msg);
    return st ? xfa_fail(ctx, st, "%s (OpenCL %s path on %s)", msg, path->name, ctx->info.name) : XFA_SUCCESS;
}

static xfa_status opencl_plan_check(xfa_context *ctx, xfa_plan *plan)
{
    const opencl_context *cl = ctx->impl;
    char msg[XFA_MESSAGE_SIZE];
    const opencl_path *path = xfa_opencl_path_for(cl, plan->dtype);
    xfa_status st = xfa_plan_fit(&cl->limits, &path->layout, plan, msg);
    return st ? xfa_fail(ctx, st, "%s (OpenCL %s path)", msg, path->name) : XFA_SUCCESS;
}

static xfa_status opencl_buffer_create(xfa_context *ctx, xfa_buffer *buf)
{
    opencl_context *cl = ctx->impl;
    cl_int err;
    cl_mem mem = clCreateBuffer(cl->context, CL_MEM_READ_WRITE, buf->size, NULL, &err);
    if (err != CL_SUCCESS) return CL_FAIL(ctx, "clCreateBuffer", err);
    buf->impl = mem;
    return XFA_SUCCESS;
}

/* Owned buffers were created here; wrapped ones hold one clRetainMemObject (opencl_interop.c). Either way
 * this drops the one reference xfa holds. */
static void opencl_buffer_destroy(xfa_context *ctx, xfa_buffer *buf)
{
    (void)ctx;
    if (buf->impl) clReleaseMemObject((cl_mem)buf->impl);
    buf->impl = NULL;
}

static xfa_status opencl_buffer_upload(xfa_context *ctx, xfa_buffer *buf, size_t offset, const void *src, size_t bytes)
{
    opencl_context *cl = ctx->impl;
    cl_int err = clEnqueueWriteBuffer(cl->queue, (cl_mem)buf->impl, CL_TRUE, buf->native_offset + offset, bytes, src, 0,
                                      NULL, NULL);
    return err != CL_SUCCESS ? CL_FAIL(ctx, "clEnqueueWriteBuffer", err) : XFA_SUCCESS;
}

static xfa_status opencl_buffer_download(xfa_context *ctx, xfa_buffer *buf, size_t offset, void *dst, size_t bytes)
{
    opencl_context *cl = ctx->impl;
    cl_int err = clEnqueueReadBuffer(cl->queue, (cl_mem)buf->impl, CL_TRUE, buf->native_offset + offset, bytes, dst,
                                     cl->last_event ? 1 : 0, cl->last_event ? &cl->last_event : NULL, NULL);
    return err != CL_SUCCESS ? CL_FAIL(ctx, "clEnqueueReadBuffer", err) : XFA_SUCCESS;
}

#define strides_of xfa_opencl_strides
#define elem_offset xfa_opencl_elem_offset

xfa_status xfa_opencl_enqueue(xfa_context *ctx, const char *what, cl_kernel kernel, cl_uint dims, const size_t *global,
                              const size_t *local)
{
    opencl_context *cl = ctx->impl;
    cl_event event = NULL;
    cl_int err = clEnqueueNDRangeKernel(cl->queue, kernel, dims, NULL, global, local, cl->last_event ? 1 : 0,
                                        cl->last_event ? &cl->last_event : NULL, &event);
    if (err != CL_SUCCESS) return CL_FAIL(ctx, what, err);
    if (cl->last_event) clReleaseEvent(cl->last_event);
    cl->last_event = event;
    /* Hand the work to the device now; return without waiting. */
    clFlush(cl->queue);
    return XFA_SUCCESS;
}

xfa_status xfa_opencl_scratch(xfa_context *ctx, size_t bytes, cl_mem *mem)
{
    opencl_context *cl = ctx->impl;
    if (!cl->scratch || cl->scratch_bytes < bytes) {
        cl_int err;
        cl_mem grown = clCreateBuffer(cl->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
        if (err != CL_SUCCESS) return CL_FAIL(ctx, "clCreateBuffer (decode scratch)", err);
        if (cl->scratch) clReleaseMemObject(cl->scratch);
        cl->scratch = grown;
        cl->scratch_bytes = bytes;
    }
    *mem = cl->scratch;
    return XFA_SUCCESS;
}

/* Bits of the forward kernels' `flags` argument (cl/flash_forward.cl). */
enum { FLAG_LSE = 1, FLAG_ALIBI = 2, FLAG_BIAS = 4, FLAG_BIAS_F32 = 8, FLAG_VARLEN = 16 };

/* The kernel for the call's plan. Registers may hold a compiled kernel below the work-group size
 * the plan assumed (NVIDIA's f32 portable kernel at D=64: 256 of 384): the library's own plan is
 * then refitted to what the kernel allows; a caller's override is refused with the reason. */
static xfa_status forward_kernel(xfa_context *ctx, const xfa_forward_args *a, xfa_plan *plan, cl_kernel *kernel)
{
    opencl_context *cl = ctx->impl;
    *plan = a->plan;
    size_t kernel_wg = 0;
    xfa_status st = xfa_opencl_kernel_for(ctx, plan, kernel, &kernel_wg);
    xfa_plan own;
    if (st != XFA_ERROR_INVALID_PLAN || !kernel_wg || opencl_plan(ctx, plan->head_dim, plan->dtype, &own) ||
        own.Br != plan->Br || own.Bc != plan->Bc || own.workgroup_size != plan->workgroup_size)
        return st;
    xfa_plan_limits lim = cl->limits;
    lim.max_workgroup_size = (uint32_t)kernel_wg;
    char msg[XFA_MESSAGE_SIZE];
    const opencl_path *path = xfa_opencl_path_for(cl, plan->dtype);
    if (xfa_plan_make(&lim, &path->layout, plan->head_dim, plan->dtype, plan, msg)) return st;
    xfa_clear_error(ctx);
    return xfa_opencl_kernel_for(ctx, plan, kernel, NULL);
}

static xfa_status opencl_forward(xfa_context *ctx, const xfa_forward_args *args)
{
    cl_kernel kernel;
    xfa_forward_args refitted = *args;
    const xfa_forward_args *a = &refitted;
    xfa_status st = forward_kernel(ctx, args, &refitted.plan, &kernel);
    if (st) return st;
    if (a->seqlen_q + a->seqlen_k > INT32_MAX / 4) /* row + diagonal + window stays in 32 bits */
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "seqlen_q %lld, seqlen_k %lld: the OpenCL kernels index rows in 32 bits",
                        (long long)a->seqlen_q, (long long)a->seqlen_k);

    /* Absent optional tensors still need a valid cl_mem: Q's, never read or written (flags say so). */
    const cl_mem q = a->q.buffer->impl;
    const cl_mem mems[9] = {q, a->k.buffer->impl, a->v.buffer->impl, a->o.buffer->impl,
                            a->has_lse ? (cl_mem)a->lse.buffer->impl : q,
                            a->has_alibi ? (cl_mem)a->alibi.buffer->impl : q,
                            a->has_bias ? (cl_mem)a->bias.buffer->impl : q,
                            a->varlen ? (cl_mem)a->cu_seqlens_q.buffer->impl : q,
                            a->varlen ? (cl_mem)a->cu_seqlens_k.buffer->impl : q};
    const cl_ulong offs[9] = {elem_offset(&a->q), elem_offset(&a->k), elem_offset(&a->v), elem_offset(&a->o),
                              a->has_lse ? elem_offset(&a->lse) : 0, a->has_alibi ? elem_offset(&a->alibi) : 0,
                              a->has_bias ? elem_offset(&a->bias) : 0, a->varlen ? elem_offset(&a->cu_seqlens_q) : 0,
                              a->varlen ? elem_offset(&a->cu_seqlens_k) : 0};
    const cl_long4 none = {{0, 0, 0, 0}};
    cl_long4 strides[6] = {strides_of(&a->q), strides_of(&a->k), strides_of(&a->v), strides_of(&a->o),
                           a->has_lse ? strides_of(&a->lse) : none, a->has_bias ? strides_of(&a->bias) : none};
    /* Broadcast dimensions read element 0: stride 0. */
    if (a->has_bias && a->bias.shape[0] == 1) strides[5].s[0] = 0;
    if (a->has_bias && a->bias.shape[2] == 1) strides[5].s[2] = 0;
    cl_long2 alibi_stride = {{0, 0}}, cu_stride = {{0, 0}};
    if (a->has_alibi) {
        alibi_stride.s[0] = a->alibi.shape[0] == 1 ? 0 : a->alibi.stride[0];
        alibi_stride.s[1] = a->alibi.stride[2];
    }
    if (a->varlen) {
        cu_stride.s[0] = a->cu_seqlens_q.stride[0];
        cu_stride.s[1] = a->cu_seqlens_k.stride[0];
    }
    const bool extras = a->softcap > 0.0f || a->has_alibi || a->has_bias;
    const cl_int ints[5] = {(cl_int)a->seqlen_q, (cl_int)a->seqlen_k, (cl_int)(a->heads_q / a->heads_kv),
                            xfa_opencl_window(a->window_left, a->seqlen_q + a->seqlen_k),
                            xfa_opencl_window(a->window_right, a->seqlen_q + a->seqlen_k)};
    /* Without extras log2(e) is folded into Q; with them scores are finished in natural units first. */
    const cl_float q_scale = (cl_float)(extras ? a->scale : a->scale * 1.4426950408889634), softcap = a->softcap;
    const cl_int flags = (a->has_lse ? FLAG_LSE : 0) | (a->has_alibi ? FLAG_ALIBI : 0) | (a->has_bias ? FLAG_BIAS : 0) |
                         (a->has_bias && a->bias.dtype == XFA_DTYPE_F32 ? FLAG_BIAS_F32 : 0) |
                         (a->varlen ? FLAG_VARLEN : 0);

    cl_int err = CL_SUCCESS;
    cl_uint arg = 0;
    for (int i = 0; i < 9; i++) err |= clSetKernelArg(kernel, arg++, sizeof mems[i], &mems[i]);
    for (int i = 0; i < 9; i++) err |= clSetKernelArg(kernel, arg++, sizeof offs[i], &offs[i]);
    for (int i = 0; i < 6; i++) err |= clSetKernelArg(kernel, arg++, sizeof strides[i], &strides[i]);
    err |= clSetKernelArg(kernel, arg++, sizeof alibi_stride, &alibi_stride);
    err |= clSetKernelArg(kernel, arg++, sizeof cu_stride, &cu_stride);
    for (int i = 0; i < 5; i++) err |= clSetKernelArg(kernel, arg++, sizeof ints[i], &ints[i]);
    err |= clSetKernelArg(kernel, arg++, sizeof q_scale, &q_scale);
    err |= clSetKernelArg(kernel, arg++, sizeof softcap, &softcap);
    err |= clSetKernelArg(kernel, arg++, sizeof flags, &flags);
    if (err != CL_SUCCESS) return xfa_fail(ctx, XFA_ERROR_BACKEND_FAILURE, "clSetKernelArg failed (%d)", err);

    /* With variable lengths z is the sequence and x covers the longest one (max_seqlen_q). */
    const size_t wg = a->plan.workgroup_size;
    const int64_t rows = a->varlen ? a->max_seqlen_q : a->seqlen_q;
    const size_t q_blocks = (size_t)((rows + a->plan.Br - 1) / a->plan.Br);
    const size_t global[3] = {q_blocks * wg, (size_t)a->heads_q, (size_t)(a->varlen ? a->sequences : a->batch)};
    const size_t local[3] = {wg, 1, 1};
    return xfa_opencl_enqueue(ctx, "clEnqueueNDRangeKernel (forward)", kernel, 3, global, local);
}

static xfa_status opencl_synchronize(xfa_context *ctx)
{
    opencl_context *cl = ctx->impl;
    cl_int err = clFinish(cl->queue);
    if (err != CL_SUCCESS) return CL_FAIL(ctx, "clFinish", err);
    if (cl->last_event) {
        cl_int status = CL_COMPLETE;
        clGetEventInfo(cl->last_event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
        if (status < 0) return CL_FAIL(ctx, "the last kernel", status);
    }
    return XFA_SUCCESS;
}

const xfa_backend_ops xfa_opencl_backend = {
    .id = XFA_BACKEND_OPENCL,
    .name = "opencl",
    .device_count = xfa_opencl_device_count,
    .device_info = opencl_device_info,
    .context_create = opencl_context_create,
    .context_destroy = opencl_context_destroy,
    .plan = opencl_plan,
    .plan_check = opencl_plan_check,
    .buffer_create = opencl_buffer_create,
    .buffer_destroy = opencl_buffer_destroy,
    .buffer_upload = opencl_buffer_upload,
    .buffer_download = opencl_buffer_download,
    .forward = opencl_forward,
    .synchronize = opencl_synchronize,
    .backward = xfa_opencl_backward,
    .decode = xfa_opencl_decode,
    .merge = xfa_opencl_merge,
};
