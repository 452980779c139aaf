/*
 * cuda_backend.c - the CUDA backend's slots: contexts (a device and a
 * stream), buffers (device memory), plans and the forward launch. Discovery
 * and tile layouts are in cuda_device.c, the caller-handle entry points
 * (xfa_cuda.h) in cuda_interop.c, the kernels behind cuda/launch.h.
 *
 * Every call first makes the context's device current on the calling thread
 * (contexts may sit on different devices). Forward calls are enqueued on the
 * context's stream and return; uploads, downloads and synchronize block.
 */
#include "alloc.h"
#include "cuda_internal.h"

#include "launch.h"
#include "mma_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

xfa_status xfa_cuda_fail(xfa_context *ctx, const char *what, cudaError_t err)
{
    cudaGetLastError(); /* a non-sticky error must not resurface in the next call */
    return xfa_fail(ctx, err == cudaErrorMemoryAllocation ? XFA_ERROR_OUT_OF_DEVICE_MEMORY : XFA_ERROR_BACKEND_FAILURE,
                    "%s: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

#define CU_CHECK(ctx, call)                                                                                       \
    do {                                                                                                          \
        const cudaError_t err_ = (call);                                                                          \
        if (err_ != cudaSuccess) return xfa_cuda_fail((ctx), #call, err_);                                        \
    } while (0)

xfa_status xfa_cuda_use_device(xfa_context *ctx)
{
    const cuda_context *cu = ctx->impl;
    CU_CHECK(ctx, cudaSetDevice(cu->device));
    return XFA_SUCCESS;
}

static xfa_status cuda_device_info(int index, xfa_device_info *info, char *msg)
{
    int count = 0;
    xfa_cuda_device_count(&count, msg);
    if (index < 0 || index >= count)
        return xfa_msg(msg, XFA_ERROR_INVALID_DEVICE, "CUDA device %d: %d device(s) found", index, count);
    return xfa_cuda_describe(index, info, msg);
}

xfa_status xfa_cuda_context_init(xfa_context *ctx, cuda_context *cu)
{
    char msg[XFA_MESSAGE_SIZE];
    xfa_status st = xfa_cuda_describe(cu->device, &ctx->info, msg);
    if (st) return xfa_fail(ctx, st, "%s", msg);
    CU_CHECK(ctx, cudaDeviceGetAttribute(&cu->cc_major, cudaDevAttrComputeCapabilityMajor, cu->device));
    CU_CHECK(ctx, cudaDeviceGetAttribute(&cu->cc_minor, cudaDevAttrComputeCapabilityMinor, cu->device));
    cu->sm90 = cu->cc_major == 9 && xfa_cuda_sm90_built() && xfa_cuda_mma_available(cu->cc_major);
    cu->limits = xfa_cuda_limits(&ctx->info);
    return XFA_SUCCESS;
}

void xfa_cuda_context_free(cuda_context *cu)
{
    if (!cu) return;
    if (cudaSetDevice(cu->device) == cudaSuccess) {
        xfa_cuda_backward_release(cu);
        cudaStreamSynchronize(cu->stream);
        xfa_cuda_decode_scratch_free(cu);
        if (cu->own_stream && cu->stream) cudaStreamDestroy(cu->stream);
    }
    cudaGetLastError();
    xfa_free(cu);
}

static xfa_status cuda_context_create(xfa_context *ctx, int index)
{
    int count = 0;
    char msg[XFA_MESSAGE_SIZE];
    xfa_cuda_device_count(&count, msg);
    if (index < 0 || index >= count)
        return xfa_fail(ctx, XFA_ERROR_INVALID_DEVICE, "CUDA device %d: %d device(s) found", index, count);
    cuda_context *cu = xfa_calloc(1, sizeof *cu);
    if (!cu) return xfa_fail(ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating the CUDA context");
    cu->device = index;
    cudaError_t err = cudaSetDevice(index);
    if (err == cudaSuccess) err = cudaStreamCreateWithFlags(&cu->stream, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
        xfa_free(cu);
        return xfa_cuda_fail(ctx, "creating a CUDA stream", err);
    }
    cu->own_stream = true;
    xfa_status st = xfa_cuda_context_init(ctx, cu);
    if (st) {
        xfa_cuda_context_free(cu);
        return st;
    }
    ctx->impl = cu;
    return XFA_SUCCESS;
}

static void cuda_context_destroy(xfa_context *ctx)
{
    xfa_cuda_context_free(ctx->impl);
    ctx->impl = NULL;
}

/* The tensor-core path for f16/bf16 on sm_80+, when its tile fits M; otherwise the generic one. */
static xfa_status cuda_plan(xfa_context *ctx, uint32_t head_dim, xfa_dtype dtype, xfa_plan *plan)
{
    const cuda_context *cu = ctx->impl;
    char msg[XFA_MESSAGE_SIZE];
    if (dtype != XFA_DTYPE_F32 && xfa_cuda_mma_available(cu->cc_major) && xfa_cuda_mma_head_dim(head_dim)) {
        const uint32_t warps[2] = {XFA_MMA_WARPS_FIRST(head_dim), XFA_MMA_WARPS_SECOND(head_dim)};
        for (int i = 0; i < 2; i++) {
            const xfa_tile_layout mma = xfa_cuda_mma_layout(head_dim, warps[i]);
            if (xfa_plan_make(&cu->limits, &mma, head_dim, dtype, plan, msg) == XFA_SUCCESS) {
                /* On Hopper the wgmma kernel runs these (its tile is its own; this one is the fallback's). */
                if (cu->sm90 && (head_dim == 64 || head_dim == 128 || head_dim == 256))
                    snprintf(plan->path, sizeof plan->path, "wgmma");
                return XFA_SUCCESS;
            }
        }
    }
    xfa_status st = xfa_plan_make(&cu->limits, &xfa_cuda_generic_layout, head_dim, dtype, plan, msg);
    return st ? xfa_fail(ctx, st, "%s (CUDA generic path on %s)", msg, ctx->info.name) : XFA_SUCCESS;
}

/* A caller's plan runs on the tensor-core kernel when it is that kernel's tile, else on the generic kernel. */
static xfa_status cuda_plan_check(xfa_context *ctx, xfa_plan *plan)
{
    const cuda_context *cu = ctx->impl;
    char msg[XFA_MESSAGE_SIZE];
    if (plan->dtype != XFA_DTYPE_F32 && xfa_cuda_mma_available(cu->cc_major) && xfa_cuda_mma_head_dim(plan->head_dim)) {
        const uint32_t warps[2] = {XFA_MMA_WARPS_FIRST(plan->head_dim), XFA_MMA_WARPS_SECOND(plan->head_dim)};
        for (int i = 0; i < 2; i++) {
            const xfa_tile_layout mma = xfa_cuda_mma_layout(plan->head_dim, warps[i]);
            xfa_plan tried = *plan;
            if (xfa_plan_fit(&cu->limits, &mma, &tried, msg) == XFA_SUCCESS) {
                *plan = tried;
                return XFA_SUCCESS;
            }
        }
    }
    xfa_status st = xfa_plan_fit(&cu->limits, &xfa_cuda_generic_layout, plan, msg);
    return st ? xfa_fail(ctx, st, "%s (CUDA generic path)", msg) : XFA_SUCCESS;
}

static xfa_status cuda_buffer_create(xfa_context *ctx, xfa_buffer *buf)
{
    xfa_status st = xfa_cuda_use_device(ctx);
    if (st) return st;
    void *ptr = NULL;
    CU_CHECK(ctx, cudaMalloc(&ptr, buf->size));
    buf->impl = ptr;
    return XFA_SUCCESS;
}

static void cuda_buffer_destroy(xfa_context *ctx, xfa_buffer *buf)
{
    const cuda_context *cu = ctx->impl;
    if (buf->owned && buf->impl && cudaSetDevice(cu->device) == cudaSuccess) {
        /* The stream may still read it: the forward calls are asynchronous. */
        cudaStreamSynchronize(cu->stream);
        cudaFree(buf->impl);
    }
    cudaGetLastError();
    buf->impl = NULL;
}

static char *device_ptr(const xfa_buffer *buf, size_t offset)
{
    return (char *)buf->impl + buf->native_offset + offset;
}

/* Blocking copies on the context's stream, so they order after the forward calls enqueued before them. */
static xfa_status cuda_buffer_upload(xfa_context *ctx, xfa_buffer *buf, size_t offset, const void *src, size_t bytes)
{
    const cuda_context *cu = ctx->impl;
    xfa_status st = xfa_cuda_use_device(ctx);
    if (st) return st;
    CU_CHECK(ctx, cudaMemcpyAsync(device_ptr(buf, offset), src, bytes, cudaMemcpyHostToDevice, cu->stream));
    CU_CHECK(ctx, cudaStreamSynchronize(cu->stream));
    return XFA_SUCCESS;
}

static xfa_status cuda_buffer_download(xfa_context *ctx, xfa_buffer *buf, size_t offset, void *dst, size_t bytes)
{
    const cuda_context *cu = ctx->impl;
    xfa_status st = xfa_cuda_use_device(ctx);
    if (st) return st;
    CU_CHECK(ctx, cudaMemcpyAsync(dst, device_ptr(buf, offset), bytes, cudaMemcpyDeviceToHost, cu->stream));
    CU_CHECK(ctx, cudaStreamSynchronize(cu->stream));
    return XFA_SUCCESS;
}

void *xfa_cuda_view_ptr(const xfa_tensor *t) { return device_ptr(t->buffer, t->offset); }

xfa_cuda_dtype xfa_cuda_dtype_of(xfa_dtype dtype)
{
    return dtype == XFA_DTYPE_F16 ? XFA_CUDA_F16 : dtype == XFA_DTYPE_BF16 ? XFA_CUDA_BF16 : XFA_CUDA_F32;
}

bool xfa_cuda_view_16byte_rows(const xfa_tensor *t)
{
    const int64_t per_vector = 16 / (int64_t)xfa_dtype_size(t->dtype);
    if ((uintptr_t)xfa_cuda_view_ptr(t) % 16 || t->stride[3] != 1) return false;
    for (int i = 0; i < 3; i++)
        if (t->shape[i] > 1 && t->stride[i] % per_vector) return false;
    return true;
}

/* By head_dim / 32 - 1; NULL: no tensor-core build of that head dim (the generic kernel runs it). */
static xfa_cuda_result (*const mma_launchers[8])(const xfa_cuda_forward *, void *) = {
    xfa_cuda_mma_forward_d32, xfa_cuda_mma_forward_d64,  xfa_cuda_mma_forward_d96, xfa_cuda_mma_forward_d128,
    NULL,                     xfa_cuda_mma_forward_d192, NULL,                     xfa_cuda_mma_forward_d256,
};

bool xfa_cuda_mma_head_dim(int64_t d) { return d % 32 == 0 && d >= 32 && d <= 256 && mma_launchers[d / 32 - 1]; }

/* A window wider than both lengths limits nothing: -1, so row + diagonal + window stays in 32 bits. */
static int32_t window_side(int64_t w, int64_t span) { return w < 0 || w > span ? -1 : (int32_t)w; }

/* Window, softcap, ALiBi, bias and packed sequences into the launch struct (cuda/launch.h). */
static xfa_status fill_extras(xfa_context *ctx, const xfa_forward_args *a, xfa_cuda_forward *p)
{
    if (a->seqlen_q + a->seqlen_k > INT32_MAX / 4)
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "seqlen_q %lld, seqlen_k %lld: the CUDA kernels index rows in 32 bits",
                        (long long)a->seqlen_q, (long long)a->seqlen_k);
    p->window_left = window_side(a->window_left, a->seqlen_q + a->seqlen_k);
    p->window_right = a->causal ? 0 : window_side(a->window_right, a->seqlen_q + a->seqlen_k);
    p->has_window = p->window_left >= 0 || (!a->causal && p->window_right >= 0);
    p->softcap = a->softcap;
    if (a->has_alibi) {
        p->alibi = (const float *)xfa_cuda_view_ptr(&a->alibi);
        p->alibi_stride[0] = a->alibi.shape[0] == 1 ? 0 : a->alibi.stride[0]; /* broadcast: element 0 */
        p->alibi_stride[1] = a->alibi.stride[2];
    }
    if (a->has_bias) {
        p->bias = xfa_cuda_view_ptr(&a->bias);
        p->bias_f32 = a->bias.dtype == XFA_DTYPE_F32;
        for (int i = 0; i < 4; i++) p->bias_stride[i] = a->bias.stride[i];
        if (a->bias.shape[0] == 1) p->bias_stride[0] = 0;
        if (a->bias.shape[2] == 1) p->bias_stride[2] = 0;
    }
    if (a->varlen) {
        p->cu_seqlens_q = (const int32_t *)xfa_cuda_view_ptr(&a->cu_seqlens_q);
        p->cu_seqlens_k = (const int32_t *)xfa_cuda_view_ptr(&a->cu_seqlens_k);
        p->cu_stride[0] = a->cu_seqlens_q.stride[0];
        p->cu_stride[1] = a->cu_seqlens_k.stride[0];
        p->sequences = (int32_t)a->sequences;
        p->max_seqlen_q = (int32_t)a->max_seqlen_q;
    }
    return XFA_SUCCESS;
}

static xfa_status cuda_forward(xfa_context *ctx, const xfa_forward_args *a)
{
    const cuda_context *cu = ctx->impl;
    xfa_status st = xfa_cuda_use_device(ctx);
    if (st) return st;

    xfa_cuda_forward p;
    memset(&p, 0, sizeof p);
    p.q = xfa_cuda_view_ptr(&a->q);
    p.k = xfa_cuda_view_ptr(&a->k);
    p.v = xfa_cuda_view_ptr(&a->v);
    p.o = (void *)xfa_cuda_view_ptr(&a->o);
    p.lse = a->has_lse ? (float *)xfa_cuda_view_ptr(&a->lse) : NULL;
    p.dtype = xfa_cuda_dtype_of(a->dtype);
    p.batch = (int32_t)a->batch;
    p.heads_q = (int32_t)a->heads_q;
    p.heads_kv = (int32_t)a->heads_kv;
    p.seqlen_q = (int32_t)a->seqlen_q;
    p.seqlen_k = (int32_t)a->seqlen_k;
    p.head_dim = (int32_t)a->head_dim;
    const xfa_tensor *views[4] = {&a->q, &a->k, &a->v, &a->o};
    int64_t(*strides[4])[3] = {&p.q_stride, &p.k_stride, &p.v_stride, &p.o_stride};
    for (int t = 0; t < 4; t++) {
        for (int i = 0; i < 3; i++) (*strides[t])[i] = views[t]->stride[i];
        p.d_stride[t] = views[t]->stride[3];
    }
    if (a->has_lse)
        for (int i = 0; i < 3; i++) p.lse_stride[i] = a->lse.stride[i];
    p.scale = a->scale;
    p.causal = a->causal;
    p.Br = (int32_t)a->plan.Br;
    p.Bc = (int32_t)a->plan.Bc;
    p.stages = (int32_t)a->plan.stages;
    st = fill_extras(ctx, a, &p);
    if (st) return st;

    const bool mma_plan = !strcmp(a->plan.path, "mma.sync") || !strcmp(a->plan.path, "wgmma");
    const bool tensor_views = mma_plan && xfa_cuda_view_16byte_rows(&a->q) && xfa_cuda_view_16byte_rows(&a->k) && xfa_cuda_view_16byte_rows(&a->v) &&
                              xfa_cuda_view_16byte_rows(&a->o) && xfa_cuda_mma_head_dim(a->head_dim);
    /* The mma.sync kernel takes the row max before scaling: scale > 0 (others run generic). */
    const bool mma_ok = tensor_views && a->scale > 0.0f;
    xfa_cuda_result r = XFA_CUDA_NOT_HANDLED;
#ifdef XFA_CUDA_HAVE_SM90
    if (tensor_views && cu->sm90) {
        /* The library's tile is the mma.sync kernel's; the Hopper kernel picks its own. */
        xfa_cuda_forward hp = p;
        hp.Br = hp.Bc = hp.stages = 0;
        if (xfa_cuda_sm90_supported(&hp)) r = xfa_cuda_sm90_forward(&hp, cu->stream);
    }
#endif
    if (r == XFA_CUDA_NOT_HANDLED && mma_ok) r = mma_launchers[a->head_dim / 32 - 1](&p, cu->stream);
    if (r == XFA_CUDA_NOT_HANDLED) {
        /* The generic kernel, with the plan when it is the generic one, else the generic plan for this call. */
        if (!strcmp(a->plan.path, "generic")) {
            r = xfa_cuda_generic_forward(&p, cu->stream);
        } else {
            xfa_plan generic;
            char msg[XFA_MESSAGE_SIZE];
            st = xfa_plan_make(&cu->limits, &xfa_cuda_generic_layout, (uint32_t)a->head_dim, a->dtype, &generic, msg);
            if (st) return xfa_fail(ctx, st, "%s (CUDA generic path)", msg);
            p.Br = (int32_t)generic.Br;
            p.Bc = (int32_t)generic.Bc;
            p.stages = 1;
            r = xfa_cuda_generic_forward(&p, cu->stream);
        }
    }
    if (r == XFA_CUDA_NOT_HANDLED)
        return xfa_fail(ctx, XFA_ERROR_BACKEND_FAILURE, "no CUDA kernel handles head_dim %lld", (long long)a->head_dim);
    if (r != 0) return xfa_cuda_fail(ctx, "launching the forward kernel", (cudaError_t)r);
    return XFA_SUCCESS;
}

static xfa_status cuda_synchronize(xfa_context *ctx)
{
    const cuda_context *cu = ctx->impl;
    xfa_status st = xfa_cuda_use_device(ctx);
    if (st) return st;
    CU_CHECK(ctx, cudaStreamSynchronize(cu->stream));
    return XFA_SUCCESS;
}

const xfa_backend_ops xfa_cuda_backend = {
    .id = XFA_BACKEND_CUDA,
    .name = "cuda",
    .device_count = xfa_cuda_device_count,
    .device_info = cuda_device_info,
    .context_create = cuda_context_create,
    .context_destroy = cuda_context_destroy,
    .plan = cuda_plan,
    .plan_check = cuda_plan_check,
    .buffer_create = cuda_buffer_create,
    .buffer_destroy = cuda_buffer_destroy,
    .buffer_upload = cuda_buffer_upload,
    .buffer_download = cuda_buffer_download,
    .forward = cuda_forward,
    .synchronize = cuda_synchronize,
    .backward = xfa_cuda_backward_enqueue,
    .decode = xfa_cuda_decode,
    .merge = xfa_cuda_merge_partials,
};
