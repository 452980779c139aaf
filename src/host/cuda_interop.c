/*
 * cuda_interop.c - the entry points of xfa_cuda.h: contexts on the caller's
 * device and stream, buffers over the caller's device memory, and access to
 * the native handles. Nothing taken from the caller is ever destroyed here.
 */
#include "xfa_cuda.h"

#include "cuda_internal.h"

#include <stdint.h>
#include <stdlib.h>

extern const xfa_backend_ops xfa_cuda_backend;

static bool is_cuda(const xfa_context *ctx) { return ctx && ctx->ops == &xfa_cuda_backend; }

xfa_status xfa_cuda_context_create_from(int device, cudaStream_t stream, xfa_context **out)
{
    if (!out) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "out is NULL");
    *out = NULL;
    int count = 0;
    char msg[XFA_MESSAGE_SIZE];
    xfa_cuda_device_count(&count, msg);
    if (device < 0 || device >= count)
        return xfa_fail(NULL, count ? XFA_ERROR_INVALID_DEVICE : XFA_ERROR_NO_DEVICE, "CUDA device %d: %d device(s) found",
                        device, count);
    xfa_context *ctx = calloc(1, sizeof *ctx);
    cuda_context *cu = calloc(1, sizeof *cu);
    if (!ctx || !cu) {
        free(ctx);
        free(cu);
        return xfa_fail(NULL, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating a context");
    }
    ctx->ops = &xfa_cuda_backend;
    ctx->info.backend = XFA_BACKEND_CUDA;
    ctx->info.index = device;
    cu->device = device;
    cu->stream = stream;
    cu->own_stream = false;
    cudaError_t err = cudaSetDevice(device);
    xfa_status st = err == cudaSuccess ? xfa_cuda_context_init(ctx, cu) : xfa_cuda_fail(ctx, "cudaSetDevice", err);
    if (st) {
        xfa_set_thread_error(ctx->last_error);
        xfa_cuda_context_free(cu);
        free(ctx);
        return st;
    }
    ctx->impl = cu;
    *out = ctx;
    return XFA_SUCCESS;
}

xfa_status xfa_cuda_buffer_wrap(xfa_context *ctx, void *ptr, size_t bytes, xfa_buffer **out)
{
    if (!ctx) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "ctx is NULL");
    xfa_clear_error(ctx);
    if (!out || !ptr) return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, out ? "ptr is NULL" : "out is NULL");
    *out = NULL;
    if (!is_cuda(ctx)) return xfa_fail(ctx, XFA_ERROR_WRONG_CONTEXT, "not a CUDA context");
    if (bytes == 0) return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "buffer size is 0");
    if ((uintptr_t)ptr % 4) return xfa_fail(ctx, XFA_ERROR_MISALIGNED, "device pointer %p is not 4-byte aligned", ptr);
    const cuda_context *cu = ctx->impl;
    struct cudaPointerAttributes attr;
    cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
    if (err != cudaSuccess) return xfa_cuda_fail(ctx, "cudaPointerGetAttributes", err);
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "%p is not CUDA device memory", ptr);
    if (attr.device != cu->device)
        return xfa_fail(ctx, XFA_ERROR_WRONG_CONTEXT, "%p is on CUDA device %d, the context on %d", ptr, attr.device,
                        cu->device);
    xfa_buffer *buf = calloc(1, sizeof *buf);
    if (!buf) return xfa_fail(ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating a buffer handle");
    buf->ctx = ctx;
    buf->size = bytes;
    buf->owned = false;
    buf->impl = ptr;
    buf->native_offset = 0;
    *out = buf;
    return XFA_SUCCESS;
}

cudaStream_t xfa_cuda_stream(const xfa_context *ctx)
{
    return is_cuda(ctx) ? ((const cuda_context *)ctx->impl)->stream : NULL;
}

int xfa_cuda_device(const xfa_context *ctx) { return is_cuda(ctx) ? ((const cuda_context *)ctx->impl)->device : -1; }

void *xfa_cuda_buffer_pointer(const xfa_buffer *buf)
{
    if (!buf || !is_cuda(buf->ctx)) return NULL;
    return (char *)buf->impl + buf->native_offset;
}
