/*
 * vulkan_dispatch.c - records one forward call: pipeline, push descriptors for
 * the five tensors, push constants with element offsets and strides, and the
 * dispatch over (query blocks, query heads, batch). Shared by the simple call
 * and xfa_vulkan_record_forward.
 */
#include "vulkan_internal.h"

#include <string.h>

/* Mirrors `Args` in shaders/flash_forward.comp. */
typedef struct vk_push_args {
    uint32_t q_base, k_base, v_base, o_base, lse_base;
    uint32_t q_stride[4], k_stride[4], v_stride[4], o_stride[4];
    uint32_t lse_stride[3];
    uint32_t seqlen_q, seqlen_k, heads_q, group;
    float scale_log2;
} vk_push_args;

_Static_assert(sizeof(vk_push_args) == 29 * 4, "push constants must match the shader's Args block");

/* A descriptor for one tensor: the aligned-down range of its native buffer it spans,
 * and the element index where the view starts inside that range. */
static xfa_status describe(xfa_context *ctx, const char *name, const xfa_tensor *t, VkDescriptorBufferInfo *info,
                           uint32_t *base)
{
    const vk_context *vk = ctx->impl;
    const vk_buffer *b = t->buffer->impl;
    const VkDeviceSize align = vk->caps.props.limits.minStorageBufferOffsetAlignment;
    const VkDeviceSize start = (VkDeviceSize)t->buffer->native_offset + t->offset;
    const VkDeviceSize aligned = align > 1 ? start / align * align : start;
    const VkDeviceSize range = start - aligned + xfa_tensor_span_bytes(t);
    if (range > vk->caps.props.limits.maxStorageBufferRange)
        return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_FEATURE,
                        "%s spans %llu bytes, more than the device's maxStorageBufferRange %u", name,
                        (unsigned long long)range, vk->caps.props.limits.maxStorageBufferRange);
    info->buffer = b->buffer;
    info->offset = aligned;
    info->range = range;
    *base = (uint32_t)((start - aligned) / xfa_dtype_size(t->dtype));
    return XFA_SUCCESS;
}

/* Element strides; a dimension of size 1 never steps, so its stride is 0 (it may not fit 32 bits). */
static void strides(const xfa_tensor *t, uint32_t *out, int n)
{
    for (int i = 0; i < n; i++) out[i] = t->shape[i] > 1 ? (uint32_t)t->stride[i] : 0;
}

xfa_status xfa_vk_record_forward(xfa_context *ctx, VkCommandBuffer cmd, const xfa_forward_args *a)
{
    vk_context *vk = ctx->impl;
    const VkPhysicalDeviceLimits *lim = &vk->caps.props.limits;
    const uint64_t groups_x = ((uint64_t)a->seqlen_q + a->plan.Br - 1) / a->plan.Br;
    if (groups_x > lim->maxComputeWorkGroupCount[0] || (uint64_t)a->heads_q > lim->maxComputeWorkGroupCount[1] ||
        (uint64_t)a->batch > lim->maxComputeWorkGroupCount[2])
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT,
                        "grid %llu x %lld x %lld exceeds maxComputeWorkGroupCount (%u, %u, %u)",
                        (unsigned long long)groups_x, (long long)a->heads_q, (long long)a->batch,
                        lim->maxComputeWorkGroupCount[0], lim->maxComputeWorkGroupCount[1],
                        lim->maxComputeWorkGroupCount[2]);

    vk_push_args push;
    memset(&push, 0, sizeof push);
    VkDescriptorBufferInfo infos[5];
    xfa_status st;
    if ((st = describe(ctx, "q", &a->q, &infos[0], &push.q_base)) || (st = describe(ctx, "k", &a->k, &infos[1], &push.k_base)) ||
        (st = describe(ctx, "v", &a->v, &infos[2], &push.v_base)) || (st = describe(ctx, "o", &a->o, &infos[3], &push.o_base)))
        return st;
    if (a->has_lse) {
        if ((st = describe(ctx, "lse", &a->lse, &infos[4], &push.lse_base))) return st;
    } else {
        infos[4] = infos[3]; /* never accessed when HAS_LSE is false, but every binding needs a buffer */
    }
    strides(&a->q, push.q_stride, 4);
    strides(&a->k, push.k_stride, 4);
    strides(&a->v, push.v_stride, 4);
    strides(&a->o, push.o_stride, 4);
    if (a->has_lse) strides(&a->lse, push.lse_stride, 3);
    push.seqlen_q = (uint32_t)a->seqlen_q;
    push.seqlen_k = (uint32_t)a->seqlen_k;
    push.heads_q = (uint32_t)a->heads_q;
    push.group = (uint32_t)(a->heads_q / a->heads_kv);
    push.scale_log2 = (float)(a->scale * 1.4426950408889634);

    VkPipeline pipeline;
    if ((st = xfa_vk_pipeline_get(ctx, a, &pipeline))) return st;
    VkWriteDescriptorSet writes[5];
    for (uint32_t i = 0; i < 5; i++) {
        const VkWriteDescriptorSet w = {
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstBinding = i,
            .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &infos[i],
        };
        writes[i] = w;
    }
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    vk->push_descriptors(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vk->pipeline_layout, 0, 5, writes);
    vkCmdPushConstants(cmd, vk->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof push, &push);
    vkCmdDispatch(cmd, (uint32_t)groups_x, (uint32_t)a->heads_q, (uint32_t)a->batch);
    return XFA_SUCCESS;
}
