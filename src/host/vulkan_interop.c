/*
 * vulkan_interop.c - xfa_vulkan.h: contexts on the caller's device, wrapped
 * VkBuffers, and recording the dispatch into the caller's command buffer.
 */
#include "alloc.h"
#include "vulkan_internal.h"

#include <stdlib.h>
#include <string.h>

extern const xfa_backend_ops xfa_vulkan_backend;

xfa_status xfa_vulkan_context_create(const xfa_vulkan_context_params *p, xfa_context **out)
{
    if (!out) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "out is NULL");
    *out = NULL;
    if (!p) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "params is NULL");
    if (!p->instance || !p->physical_device || !p->device || !p->queue)
        return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "instance, physical_device, device and queue are required");
    xfa_context *ctx = xfa_calloc(1, sizeof *ctx);
    vk_context *vk = xfa_calloc(1, sizeof *vk);
    if (!ctx || !vk) {
        xfa_free(ctx);
        xfa_free(vk);
        return xfa_fail(NULL, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating a context");
    }
    ctx->ops = &xfa_vulkan_backend;
    ctx->impl = vk;
    vk->instance = p->instance;
    vk->physical = p->physical_device;
    vk->device = p->device;
    vk->queue = p->queue;
    vk->cache = p->pipeline_cache;
    vk->lock_queue = p->lock_queue;
    vk->unlock_queue = p->unlock_queue;
    vk->user = p->user;
    const char *why = xfa_vk_query_caps(p->instance, p->physical_device, &vk->caps);
    xfa_status st = XFA_SUCCESS;
    if (why)
        st = xfa_fail(ctx, why == xfa_vk_out_of_host_memory ? XFA_ERROR_OUT_OF_HOST_MEMORY : XFA_ERROR_UNSUPPORTED_FEATURE,
                      "the caller's Vulkan device cannot run xfa: %s", why);
    if (!st) {
        vk->caps.queue_family = p->queue_family; /* the caller's choice, not the first compute family */
        vk->use_coopmat = false;
#ifdef XFA_VULKAN_COOPMAT
        vk->use_coopmat = p->enable_coopmat && vk->caps.coopmat;
#endif
        ctx->info.backend = XFA_BACKEND_VULKAN;
        xfa_vk_fill_info(&vk->caps, vk->use_coopmat, &ctx->info);
        st = xfa_vk_context_init(ctx, vk);
    }
    if (st) {
        xfa_set_thread_error(ctx->last_error);
        xfa_vk_context_release(vk);
        xfa_free(vk);
        xfa_free(ctx);
        return st;
    }
    *out = ctx;
    return XFA_SUCCESS;
}

xfa_status xfa_vulkan_buffer_wrap(xfa_context *ctx, VkBuffer buffer, VkDeviceSize offset, size_t bytes,
                                  xfa_buffer **out)
{
    if (!out) return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, "out is NULL");
    *out = NULL;
    if (!ctx) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "ctx is NULL");
    if (ctx->ops != &xfa_vulkan_backend) return xfa_fail(ctx, XFA_ERROR_WRONG_CONTEXT, "not a Vulkan context");
    if (buffer == VK_NULL_HANDLE) return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, "buffer is VK_NULL_HANDLE");
    if (bytes == 0) return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "buffer size is 0");
    xfa_buffer *buf = xfa_calloc(1, sizeof *buf);
    vk_buffer *b = xfa_calloc(1, sizeof *b);
    if (!buf || !b) {
        xfa_free(buf);
        xfa_free(b);
        return xfa_fail(ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating a buffer handle");
    }
    b->buffer = buffer;
    buf->ctx = ctx;
    buf->size = bytes;
    buf->owned = false;
    buf->impl = b;
    buf->native_offset = (size_t)offset;
    *out = buf;
    return XFA_SUCCESS;
}

xfa_status xfa_vulkan_buffer_handle(const xfa_buffer *buf, VkBuffer *buffer, VkDeviceSize *offset)
{
    if (!buf || !buffer || !offset) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "NULL argument");
    if (buf->ctx->ops != &xfa_vulkan_backend) return xfa_fail(NULL, XFA_ERROR_WRONG_CONTEXT, "not a Vulkan buffer");
    *buffer = ((const vk_buffer *)buf->impl)->buffer;
    *offset = buf->native_offset;
    return XFA_SUCCESS;
}

xfa_status xfa_vulkan_record_forward(xfa_context *ctx, VkCommandBuffer cmd, const xfa_attention_params *params,
                                     const xfa_tensor *q, const xfa_tensor *k, const xfa_tensor *v,
                                     const xfa_tensor *o, const xfa_tensor *lse)
{
    if (!ctx) return xfa_fail(NULL, XFA_ERROR_NULL_POINTER, "ctx is NULL");
    xfa_clear_error(ctx);
    if (ctx->ops != &xfa_vulkan_backend) return xfa_fail(ctx, XFA_ERROR_WRONG_CONTEXT, "not a Vulkan context");
    if (cmd == VK_NULL_HANDLE) return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, "cmd is VK_NULL_HANDLE");
    xfa_forward_args args;
    memset(&args, 0, sizeof args);
    xfa_status st = xfa_validate_forward(ctx, params, q, k, v, o, lse, &args);
    if (st) return st;
    /* The plan, as xfa_attention_forward resolves it. */
    if (!params || !params->plan) {
        st = xfa_vk_plan(ctx, (uint32_t)args.head_dim, args.dtype, &args.plan);
    } else {
        args.plan = *params->plan;
        if (args.plan.head_dim != (uint32_t)args.head_dim || args.plan.dtype != args.dtype)
            return xfa_fail(ctx, XFA_ERROR_INVALID_PLAN, "the plan is for head_dim %u, the call is head_dim %u",
                            args.plan.head_dim, (uint32_t)args.head_dim);
        st = xfa_vk_plan_check(ctx, &args.plan);
    }
    if (st) return st;
    st = xfa_vk_record_forward(ctx, cmd, &args);
    return st ? st : xfa_vk_check_validation(ctx);
}
