/*
 * opencl_interop.c - the entry points of xfa_opencl.h: contexts and buffers
 * over the caller's OpenCL handles, and access to the native handles/events.
 * Each handle taken from the caller is retained once here and released once
 * by the ordinary destroy paths (opencl_backend.c).
 */
#include "alloc.h"
#include "xfa_opencl.h"

#include "opencl_internal.h"

#include <stdlib.h>
#include <string.h>

extern const xfa_backend_ops xfa_opencl_backend;

static bool is_opencl(const xfa_context *ctx) { return ctx && ctx->ops == &xfa_opencl_backend; }

xfa_status xfa_opencl_context_create_from(cl_context context, cl_device_id device, cl_command_queue queue,
                                          xfa_context **out)
{
    if (!out) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "out is NULL");
    *out = NULL;
    if (!context || !device || !queue)
        return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "cl_context, cl_device_id and cl_command_queue are required");
    cl_context queue_context = NULL;
    cl_device_id queue_device = NULL;
    cl_int err = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof queue_context, &queue_context, NULL);
    if (err == CL_SUCCESS) err = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof queue_device, &queue_device, NULL);
    if (err != CL_SUCCESS)
        return xfa_fail(NULL, XFA_ERROR_BACKEND_FAILURE, "clGetCommandQueueInfo: %s (%d)", xfa_opencl_error_name(err), err);
    if (queue_context != context || queue_device != device)
        return xfa_fail(NULL, XFA_ERROR_INVALID_ARGUMENT, "the queue belongs to another cl_context or device");
    cl_platform_id platform = NULL;
    err = clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL);
    if (err != CL_SUCCESS)
        return xfa_fail(NULL, XFA_ERROR_BACKEND_FAILURE, "clGetDeviceInfo(CL_DEVICE_PLATFORM): %s (%d)",
                        xfa_opencl_error_name(err), err);

    xfa_context *ctx = xfa_calloc(1, sizeof *ctx);
    opencl_context *cl = xfa_calloc(1, sizeof *cl);
    if (!ctx || !cl) {
        xfa_free(ctx);
        xfa_free(cl);
        return xfa_fail(NULL, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating a context");
    }
    ctx->ops = &xfa_opencl_backend;
    ctx->info.backend = XFA_BACKEND_OPENCL;
    ctx->info.index = -1; /* not one of the library's enumerated devices */
    cl->platform = platform;
    cl->device = device;
    clRetainContext(context);
    clRetainCommandQueue(queue);
    cl->context = context;
    cl->queue = queue;
    xfa_status st = xfa_opencl_context_init(ctx, cl);
    if (st) {
        xfa_set_thread_error(ctx->last_error);
        xfa_opencl_context_free(cl);
        xfa_free(ctx);
        return st;
    }
    ctx->impl = cl;
    *out = ctx;
    return XFA_SUCCESS;
}

xfa_status xfa_opencl_buffer_wrap(xfa_context *ctx, cl_mem mem, size_t offset, size_t bytes, xfa_buffer **out)
{
    if (!ctx) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "ctx is NULL");
    xfa_clear_error(ctx);
    if (!out || !mem) return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, out ? "mem is NULL" : "out is NULL");
    *out = NULL;
    if (!is_opencl(ctx)) return xfa_fail(ctx, XFA_ERROR_WRONG_CONTEXT, "not an OpenCL context");
    if (bytes == 0) return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "buffer size is 0");
    if (offset % 4) return xfa_fail(ctx, XFA_ERROR_MISALIGNED, "offset %zu into the cl_mem is not a multiple of 4", offset);
    const opencl_context *cl = ctx->impl;
    size_t mem_size = 0;
    cl_context mem_context = NULL;
    cl_int err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof mem_size, &mem_size, NULL);
    if (err == CL_SUCCESS) err = clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof mem_context, &mem_context, NULL);
    if (err != CL_SUCCESS)
        return xfa_fail(ctx, XFA_ERROR_BACKEND_FAILURE, "clGetMemObjectInfo: %s (%d)", xfa_opencl_error_name(err), err);
    if (mem_context != cl->context) return xfa_fail(ctx, XFA_ERROR_WRONG_CONTEXT, "the cl_mem belongs to another cl_context");
    if (offset > mem_size || bytes > mem_size - offset)
        return xfa_fail(ctx, XFA_ERROR_OUT_OF_BOUNDS, "%zu bytes at offset %zu pass the end of a %zu-byte cl_mem", bytes,
                        offset, mem_size);
    xfa_buffer *buf = xfa_calloc(1, sizeof *buf);
    if (!buf) return xfa_fail(ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating a buffer handle");
    clRetainMemObject(mem);
    buf->ctx = ctx;
    buf->size = bytes;
    buf->owned = false;
    buf->impl = mem;
    buf->native_offset = offset;
    *out = buf;
    return XFA_SUCCESS;
}

cl_context xfa_opencl_context_handle(const xfa_context *ctx)
{
    return is_opencl(ctx) ? ((const opencl_context *)ctx->impl)->context : NULL;
}

cl_command_queue xfa_opencl_queue_handle(const xfa_context *ctx)
{
    return is_opencl(ctx) ? ((const opencl_context *)ctx->impl)->queue : NULL;
}

cl_mem xfa_opencl_buffer_handle(const xfa_buffer *buf, size_t *offset)
{
    if (!buf || !is_opencl(buf->ctx)) return NULL;
    if (offset) *offset = buf->native_offset;
    return (cl_mem)buf->impl;
}

xfa_status xfa_opencl_last_event(xfa_context *ctx, cl_event *event)
{
    if (!ctx) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "ctx is NULL");
    xfa_clear_error(ctx);
    if (!event) return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, "event is NULL");
    *event = NULL;
    if (!is_opencl(ctx)) return xfa_fail(ctx, XFA_ERROR_WRONG_CONTEXT, "not an OpenCL context");
    opencl_context *cl = ctx->impl;
    if (!cl->last_event) return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "no call was enqueued on this context yet");
    clRetainEvent(cl->last_event);
    *event = cl->last_event;
    return XFA_SUCCESS;
}
