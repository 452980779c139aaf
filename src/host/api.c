/*
 * api.c - the public entry points: argument checks, then the backend's slot.
 * Backends never repeat what is checked here (see internal.h).
 */
#include "alloc.h"
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static xfa_status ops_for(xfa_backend backend, const xfa_backend_ops **ops)
{
    if ((unsigned)backend >= XFA_BACKEND_COUNT_ || backend == XFA_BACKEND_AUTO)
        return xfa_fail(NULL, XFA_ERROR_INVALID_ARGUMENT, "backend %d is not a concrete xfa_backend", (int)backend);
    *ops = xfa_backend_ops_get(backend);
    if (!*ops)
        return xfa_fail(NULL, XFA_ERROR_BACKEND_NOT_COMPILED, "the %s backend was not compiled into this library",
                        xfa_backend_name(backend));
    return XFA_SUCCESS;
}

xfa_status xfa_device_count(xfa_backend backend, int *count)
{
    const xfa_backend_ops *ops;
    xfa_status st;
    if (!count) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "count is NULL");
    *count = 0;
    if ((st = xfa_backend_resolve(backend, &backend)) || (st = ops_for(backend, &ops))) return st;
    char msg[XFA_MESSAGE_SIZE] = "";
    st = ops->device_count(count, msg);
    return st ? xfa_fail(NULL, st, "%s", msg) : XFA_SUCCESS;
}

xfa_status xfa_device_get_info(xfa_backend backend, int index, xfa_device_info *info)
{
    const xfa_backend_ops *ops;
    xfa_status st;
    int count = 0;
    if (!info) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "info is NULL");
    if ((st = xfa_backend_resolve(backend, &backend)) || (st = ops_for(backend, &ops))) return st;
    if ((st = xfa_device_count(backend, &count))) return st;
    if (count == 0) return xfa_fail(NULL, XFA_ERROR_NO_DEVICE, "the %s backend sees no device", xfa_backend_name(backend));
    if (index < 0 || index >= count)
        return xfa_fail(NULL, XFA_ERROR_INVALID_DEVICE, "device index %d: the %s backend has %d device(s)", index,
                        xfa_backend_name(backend), count);
    memset(info, 0, sizeof *info);
    char msg[XFA_MESSAGE_SIZE] = "";
    st = ops->device_info(index, info, msg);
    if (st) return xfa_fail(NULL, st, "%s", msg);
    info->backend = backend;
    info->index = index;
    return XFA_SUCCESS;
}

xfa_status xfa_context_create(xfa_backend backend, int index, xfa_context **out)
{
    const xfa_backend_ops *ops;
    xfa_status st;
    if (!out) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "out is NULL");
    *out = NULL;
    if ((st = xfa_backend_resolve(backend, &backend)) || (st = ops_for(backend, &ops))) return st;
    int count = 0;
    if ((st = xfa_device_count(backend, &count))) return st;
    if (count == 0) return xfa_fail(NULL, XFA_ERROR_NO_DEVICE, "the %s backend sees no device", xfa_backend_name(backend));
    if (index < 0 || index >= count)
        return xfa_fail(NULL, XFA_ERROR_INVALID_DEVICE, "device index %d: the %s backend has %d device(s)", index,
                        xfa_backend_name(backend), count);
    xfa_context *ctx = xfa_calloc(1, sizeof *ctx);
    if (!ctx) return xfa_fail(NULL, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating a context");
    ctx->ops = ops;
    ctx->info.backend = backend;
    ctx->info.index = index;
    st = ops->context_create(ctx, index);
    if (st) {
        xfa_fail(NULL, st, "%s", ctx->last_error[0] ? ctx->last_error : xfa_status_string(st));
        xfa_free(ctx);
        return st;
    }
    ctx->info.backend = backend;
    ctx->info.index = index;
    *out = ctx;
    return XFA_SUCCESS;
}

void xfa_context_destroy(xfa_context **ctx)
{
    if (!ctx || !*ctx) return;
    (*ctx)->ops->context_destroy(*ctx);
    xfa_free(*ctx);
    *ctx = NULL;
}

xfa_status xfa_context_get_info(const xfa_context *ctx, xfa_device_info *info)
{
    if (!ctx || !info) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, ctx ? "info is NULL" : "ctx is NULL");
    *info = ctx->info;
    return XFA_SUCCESS;
}

xfa_backend xfa_context_backend(const xfa_context *ctx) { return ctx ? ctx->info.backend : XFA_BACKEND_AUTO; }

xfa_status xfa_context_synchronize(xfa_context *ctx)
{
    if (!ctx) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "ctx is NULL");
    xfa_clear_error(ctx);
    return ctx->ops->synchronize(ctx);
}

xfa_status xfa_plan_get(xfa_context *ctx, uint32_t head_dim, xfa_dtype dtype, xfa_plan *plan)
{
    if (!ctx) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "ctx is NULL");
    xfa_clear_error(ctx);
    if (!plan) return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, "plan is NULL");
    if (xfa_dtype_size(dtype) == 0) return xfa_fail(ctx, XFA_ERROR_INVALID_DTYPE, "dtype %d is not an xfa_dtype", (int)dtype);
    if (!xfa_head_dim_supported(head_dim))
        return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_HEAD_DIM, "head_dim %u is not supported: use a multiple of %d from %d to %d",
                        head_dim, XFA_HEAD_DIM_STEP, XFA_HEAD_DIM_MIN, XFA_HEAD_DIM_MAX);
    if (!(ctx->info.dtypes & (1u << dtype)))
        return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_DTYPE, "dtype %s is not supported on %s", xfa_dtype_name(dtype),
                        ctx->info.name);
    memset(plan, 0, sizeof *plan);
    return ctx->ops->plan(ctx, head_dim, dtype, plan);
}

/* ---- buffers ---- */

xfa_status xfa_buffer_create(xfa_context *ctx, size_t bytes, xfa_buffer **out)
{
    if (!ctx) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "ctx is NULL");
    xfa_clear_error(ctx);
    if (!out) return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, "out is NULL");
    *out = NULL;
    if (bytes == 0) return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "buffer size is 0");
    xfa_buffer *buf = xfa_calloc(1, sizeof *buf);
    if (!buf) return xfa_fail(ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating a buffer handle");
    buf->ctx = ctx;
    buf->size = bytes;
    buf->owned = true;
    xfa_status st = ctx->ops->buffer_create(ctx, buf);
    if (st) {
        xfa_free(buf);
        return st;
    }
    *out = buf;
    return XFA_SUCCESS;
}

void xfa_buffer_destroy(xfa_buffer **buf)
{
    if (!buf || !*buf) return;
    (*buf)->ctx->ops->buffer_destroy((*buf)->ctx, *buf);
    xfa_free(*buf);
    *buf = NULL;
}

size_t xfa_buffer_size(const xfa_buffer *buf) { return buf ? buf->size : 0; }

static xfa_status check_copy(xfa_buffer *buf, size_t offset, const void *host, size_t bytes, const char *host_name)
{
    if (!buf) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "buf is NULL");
    xfa_clear_error(buf->ctx);
    if (!host && bytes) return xfa_fail(buf->ctx, XFA_ERROR_NULL_POINTER, "%s is NULL", host_name);
    if (offset > buf->size || bytes > buf->size - offset)
        return xfa_fail(buf->ctx, XFA_ERROR_OUT_OF_BOUNDS, "copy of %zu bytes at offset %zu passes the end of a %zu-byte buffer",
                        bytes, offset, buf->size);
    return XFA_SUCCESS;
}

xfa_status xfa_buffer_upload(xfa_buffer *buf, size_t offset, const void *src, size_t bytes)
{
    xfa_status st = check_copy(buf, offset, src, bytes, "src");
    if (st || bytes == 0) return st;
    return buf->ctx->ops->buffer_upload(buf->ctx, buf, offset, src, bytes);
}

xfa_status xfa_buffer_download(xfa_buffer *buf, size_t offset, void *dst, size_t bytes)
{
    xfa_status st = check_copy(buf, offset, dst, bytes, "dst");
    if (st || bytes == 0) return st;
    return buf->ctx->ops->buffer_download(buf->ctx, buf, offset, dst, bytes);
}

/* ---- tensors ---- */

static xfa_tensor make_view(xfa_buffer *buf, size_t offset, xfa_dtype dtype, const int64_t shape[4],
                            const int64_t stride[4])
{
    xfa_tensor t;
    memset(&t, 0, sizeof t);
    t.buffer = buf;
    t.offset = offset;
    t.dtype = dtype;
    memcpy(t.shape, shape, sizeof t.shape);
    memcpy(t.stride, stride, sizeof t.stride);
    return t;
}

xfa_tensor xfa_tensor_bshd(xfa_buffer *buf, size_t offset, xfa_dtype dtype, int64_t B, int64_t S, int64_t H, int64_t D)
{
    const int64_t shape[4] = {B, S, H, D}, stride[4] = {S * H * D, H * D, D, 1};
    return make_view(buf, offset, dtype, shape, stride);
}

xfa_tensor xfa_tensor_bhsd(xfa_buffer *buf, size_t offset, xfa_dtype dtype, int64_t B, int64_t S, int64_t H, int64_t D)
{
    const int64_t shape[4] = {B, S, H, D}, stride[4] = {H * S * D, D, S * D, 1};
    return make_view(buf, offset, dtype, shape, stride);
}

xfa_tensor xfa_tensor_lse(xfa_buffer *buf, size_t offset, int64_t B, int64_t S, int64_t H)
{
    const int64_t shape[4] = {B, S, H, 1}, stride[4] = {H * S, 1, S, 1};
    return make_view(buf, offset, XFA_DTYPE_F32, shape, stride);
}

/* ---- attention ---- */

static xfa_status resolve_plan(xfa_context *ctx, const xfa_attention_params *params, xfa_forward_args *args)
{
    const uint32_t d = (uint32_t)args->head_dim;
    if (!params || !params->plan) return ctx->ops->plan(ctx, d, args->dtype, &args->plan);
    args->plan = *params->plan;
    if (args->plan.head_dim != d || args->plan.dtype != args->dtype)
        return xfa_fail(ctx, XFA_ERROR_INVALID_PLAN, "the plan is for head_dim %u %s, the call is head_dim %u %s",
                        args->plan.head_dim, xfa_dtype_name(args->plan.dtype) ? xfa_dtype_name(args->plan.dtype) : "?",
                        d, xfa_dtype_name(args->dtype));
    return ctx->ops->plan_check(ctx, &args->plan);
}

xfa_status xfa_attention_forward(xfa_context *ctx, const xfa_attention_params *params, const xfa_tensor *q,
                                 const xfa_tensor *k, const xfa_tensor *v, const xfa_tensor *o, const xfa_tensor *lse)
{
    if (!ctx) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "ctx is NULL");
    xfa_clear_error(ctx);
    xfa_forward_args args;
    memset(&args, 0, sizeof args);
    xfa_status st = xfa_validate_forward(ctx, params, q, k, v, o, lse, &args);
    if (st) return st;
    if ((st = resolve_plan(ctx, params, &args))) return st;
    return ctx->ops->forward(ctx, &args);
}

xfa_status xfa_attention_backward(xfa_context *ctx, const xfa_attention_params *params, const xfa_tensor *q,
                                  const xfa_tensor *k, const xfa_tensor *v, const xfa_tensor *o,
                                  const xfa_tensor *d_o, const xfa_tensor *lse, const xfa_tensor *dq,
                                  const xfa_tensor *dk, const xfa_tensor *dv)
{
    if (!ctx) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "ctx is NULL");
    xfa_clear_error(ctx);
    xfa_backward_args args;
    memset(&args, 0, sizeof args);
    xfa_status st = xfa_validate_backward(ctx, params, q, k, v, o, d_o, lse, dq, dk, dv, &args);
    if (st) return st;
    if (!ctx->ops->backward)
        return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_FEATURE, "the %s backend has no backward pass",
                        xfa_backend_name(ctx->info.backend));
    if ((st = resolve_plan(ctx, params, &args.fwd))) return st;
    return ctx->ops->backward(ctx, &args);
}

xfa_status xfa_attention_decode(xfa_context *ctx, const xfa_decode_params *params, const xfa_tensor *q,
                                 const xfa_kv_cache *cache, const xfa_tensor *k_new, const xfa_tensor *v_new,
                                 const xfa_tensor *o, const xfa_tensor *lse)
{
    if (!ctx) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "ctx is NULL");
    xfa_clear_error(ctx);
    xfa_decode_args args;
    memset(&args, 0, sizeof args);
    xfa_status st = xfa_validate_decode(ctx, params, q, cache, k_new, v_new, o, lse, &args);
    if (st) return st;
    if (!ctx->ops->decode)
        return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_FEATURE, "the %s backend has no decode path",
                        xfa_backend_name(ctx->info.backend));
    return ctx->ops->decode(ctx, &args);
}

xfa_status xfa_attention_backward_scratch_size(xfa_context *ctx, const xfa_attention_params *params,
                                               const xfa_tensor *q, const xfa_tensor *k, const xfa_tensor *v,
                                               const xfa_tensor *o, const xfa_tensor *d_o, const xfa_tensor *lse,
                                               const xfa_tensor *dq, const xfa_tensor *dk, const xfa_tensor *dv,
                                               size_t *bytes)
{
    if (!ctx) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "ctx is NULL");
    if (!bytes) return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, "bytes is NULL");
    xfa_clear_error(ctx);
    xfa_backward_args args;
    memset(&args, 0, sizeof args);
    const xfa_status st = xfa_validate_backward(ctx, params, q, k, v, o, d_o, lse, dq, dk, dv, &args);
    *bytes = st ? 0 : args.scratch_bytes;
    return st;
}

xfa_status xfa_attention_decode_scratch_size(xfa_context *ctx, const xfa_decode_params *params, const xfa_tensor *q,
                                             const xfa_kv_cache *cache, const xfa_tensor *k_new,
                                             const xfa_tensor *v_new, const xfa_tensor *o, const xfa_tensor *lse,
                                             size_t *bytes)
{
    if (!ctx) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "ctx is NULL");
    if (!bytes) return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, "bytes is NULL");
    xfa_clear_error(ctx);
    xfa_decode_args args;
    memset(&args, 0, sizeof args);
    const xfa_status st = xfa_validate_decode(ctx, params, q, cache, k_new, v_new, o, lse, &args);
    *bytes = st ? 0 : args.scratch_bytes;
    return st;
}

xfa_status xfa_merge_partials(xfa_context *ctx, int n, const xfa_tensor *o_parts, const xfa_tensor *lse_parts,
                              const xfa_tensor *o, const xfa_tensor *lse)
{
    if (!ctx) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "ctx is NULL");
    xfa_clear_error(ctx);
    xfa_merge_args args;
    memset(&args, 0, sizeof args);
    xfa_status st = xfa_validate_merge(ctx, n, o_parts, lse_parts, o, lse, &args);
    if (st) return st;
    if (!ctx->ops->merge)
        return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_FEATURE, "the %s backend cannot merge partial results",
                        xfa_backend_name(ctx->info.backend));
    return ctx->ops->merge(ctx, &args);
}
