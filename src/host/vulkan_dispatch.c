/*
 * vulkan_dispatch.c - records one forward call: pipeline, push descriptors for
 * the tensors, push constants with element offsets and strides, the features'
 * extra arguments when the call has any, and the dispatch over (query blocks,
 * query heads, batch or sequence). Shared by the simple call and
 * xfa_vulkan_record_forward; also the descriptor and dispatch helpers that
 * decode, merge and backward use.
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

/* Mirrors `Extra` in shaders/flash_forward.comp: the feature values that do not fit the
 * 128 bytes of push constants. */
typedef struct vk_extra_args {
    int32_t window_left, window_right;
    float softcap;
    uint32_t alibi_base, alibi_sb, alibi_sh;
    uint32_t bias_base, bias_sb, bias_ss, bias_sh, bias_sd;
    uint32_t cu_q_base, cu_q_s, cu_k_base, cu_k_s;
} vk_extra_args;

/* Element strides; a dimension of size 1 never steps, so its stride is 0 (it may not fit 32 bits). */
static void strides(const xfa_tensor *t, uint32_t *out, int n)
{
    for (int i = 0; i < n; i++) out[i] = t->shape[i] > 1 ? (uint32_t)t->stride[i] : 0;
}

xfa_status xfa_vk_write_extra(xfa_context *ctx, VkCommandBuffer cmd, const void *data, size_t bytes,
                              VkDescriptorBufferInfo *info)
{
    vk_context *vk = ctx->impl;
    if (bytes > VK_EXTRA_SLOT_BYTES)
        return xfa_fail(ctx, XFA_ERROR_BACKEND_FAILURE, "extra arguments of %zu bytes exceed a slot", bytes);
    const VkDeviceSize offset = (VkDeviceSize)(vk->extra_next++ % VK_EXTRA_SLOTS) * VK_EXTRA_SLOT_BYTES;
    /* The slot may still be read by an earlier dispatch (write-after-read), and the
     * dispatch that follows reads what is written here. */
    const VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0,
                         NULL, 0, NULL);
    vkCmdUpdateBuffer(cmd, vk->extra, offset, (VkDeviceSize)((bytes + 3) & ~(size_t)3), data);
    const VkMemoryBarrier after = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT,
    };
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &after, 0,
                         NULL, 0, NULL);
    info->buffer = vk->extra;
    info->offset = offset;
    info->range = VK_EXTRA_SLOT_BYTES;
    return XFA_SUCCESS;
}

/* A descriptor for one tensor: the aligned-down range of its native buffer it spans,
 * and the element index where the view starts inside that range. */
xfa_status xfa_vk_describe(xfa_context *ctx, const char *name, const xfa_tensor *t, VkDescriptorBufferInfo *info,
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

void xfa_vk_strides(const xfa_tensor *t, uint32_t *out, int n) { strides(t, out, n); }

bool xfa_vk_vec_ok(uint32_t base, const uint32_t stride[4], uint32_t n)
{
    return stride[3] == 1 && base % n == 0 && stride[0] % n == 0 && stride[1] % n == 0 && stride[2] % n == 0;
}

bool xfa_vk_vec4_ok(uint32_t base, const uint32_t stride[4]) { return xfa_vk_vec_ok(base, stride, 4); }

/* The extra arguments and descriptors 5..9 of a call with features beyond causal. */
static xfa_status describe_features(xfa_context *ctx, VkCommandBuffer cmd, const xfa_forward_args *a,
                                    VkDescriptorBufferInfo infos[VK_BINDINGS])
{
    vk_extra_args extra;
    memset(&extra, 0, sizeof extra);
    extra.window_left = (int32_t)a->window_left;
    extra.window_right = (int32_t)a->window_right;
    extra.softcap = a->softcap;
    xfa_status st;
    uint32_t s[4];
    if (a->has_alibi) {
        if ((st = xfa_vk_describe(ctx, "alibi_slopes", &a->alibi, &infos[6], &extra.alibi_base))) return st;
        strides(&a->alibi, s, 4);
        extra.alibi_sb = s[0];
        extra.alibi_sh = s[2];
    }
    if (a->has_bias) {
        if ((st = xfa_vk_describe(ctx, "bias", &a->bias, &infos[7], &extra.bias_base))) return st;
        strides(&a->bias, s, 4);
        extra.bias_sb = s[0];
        extra.bias_ss = s[1];
        extra.bias_sh = s[2];
        extra.bias_sd = s[3];
    }
    if (a->varlen) {
        if ((st = xfa_vk_describe(ctx, "cu_seqlens_q", &a->cu_seqlens_q, &infos[8], &extra.cu_q_base)) ||
            (st = xfa_vk_describe(ctx, "cu_seqlens_k", &a->cu_seqlens_k, &infos[9], &extra.cu_k_base)))
            return st;
        extra.cu_q_s = (uint32_t)a->cu_seqlens_q.stride[0];
        extra.cu_k_s = (uint32_t)a->cu_seqlens_k.stride[0];
    }
    return xfa_vk_write_extra(ctx, cmd, &extra, sizeof extra, &infos[5]);
}

bool xfa_vk_has_features(const xfa_forward_args *a)
{
    return a->window_left >= 0 || (a->window_right >= 0 && !a->causal) || a->softcap > 0.0f || a->has_alibi ||
           a->has_bias || a->varlen;
}

xfa_status xfa_vk_record_forward(xfa_context *ctx, VkCommandBuffer cmd, const xfa_forward_args *a)
{
    vk_context *vk = ctx->impl;
    const VkPhysicalDeviceLimits *lim = &vk->caps.props.limits;
    xfa_status st;
    const int64_t rows = a->varlen ? a->max_seqlen_q : a->seqlen_q, batch = a->varlen ? a->sequences : a->batch;
    const uint64_t groups_x = ((uint64_t)rows + a->plan.Br - 1) / a->plan.Br;
    if (groups_x > lim->maxComputeWorkGroupCount[0] || (uint64_t)a->heads_q > lim->maxComputeWorkGroupCount[1] ||
        (uint64_t)batch > lim->maxComputeWorkGroupCount[2])
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT,
                        "grid %llu x %lld x %lld exceeds maxComputeWorkGroupCount (%u, %u, %u)",
                        (unsigned long long)groups_x, (long long)a->heads_q, (long long)batch,
                        lim->maxComputeWorkGroupCount[0], lim->maxComputeWorkGroupCount[1],
                        lim->maxComputeWorkGroupCount[2]);

    vk_push_args push;
    memset(&push, 0, sizeof push);
    VkDescriptorBufferInfo infos[VK_BINDINGS];
    if ((st = xfa_vk_describe(ctx, "q", &a->q, &infos[0], &push.q_base)) ||
        (st = xfa_vk_describe(ctx, "k", &a->k, &infos[1], &push.k_base)) ||
        (st = xfa_vk_describe(ctx, "v", &a->v, &infos[2], &push.v_base)) ||
        (st = xfa_vk_describe(ctx, "o", &a->o, &infos[3], &push.o_base)))
        return st;
    if (a->has_lse) {
        if ((st = xfa_vk_describe(ctx, "lse", &a->lse, &infos[4], &push.lse_base))) return st;
    } else {
        infos[4] = infos[3]; /* never accessed when HAS_LSE is false, but every binding needs a buffer */
    }
    strides(&a->q, push.q_stride, 4);
    strides(&a->k, push.k_stride, 4);
    strides(&a->v, push.v_stride, 4);
    strides(&a->o, push.o_stride, 4);
    if (a->has_lse) strides(&a->lse, push.lse_stride, 3);
    /* Bindings a call does not use still need a buffer: the extra-arguments one. */
    for (uint32_t i = 5; i < VK_BINDINGS; i++) {
        infos[i].buffer = vk->extra;
        infos[i].offset = 0;
        infos[i].range = VK_EXTRA_SLOT_BYTES;
    }
    if (xfa_vk_has_features(a) && (st = describe_features(ctx, cmd, a, infos))) return st;
    push.seqlen_q = (uint32_t)a->seqlen_q;
    push.seqlen_k = (uint32_t)a->seqlen_k;
    push.heads_q = (uint32_t)a->heads_q;
    push.group = (uint32_t)(a->heads_q / a->heads_kv);
    push.scale_log2 = (float)(a->scale * 1.4426950408889634);

    VkPipeline pipeline;
    const bool vec4 = xfa_vk_vec4_ok(push.q_base, push.q_stride) && xfa_vk_vec4_ok(push.k_base, push.k_stride) &&
                      xfa_vk_vec4_ok(push.v_base, push.v_stride);
    const bool vec8 = xfa_vk_vec_ok(push.k_base, push.k_stride, 8) && xfa_vk_vec_ok(push.v_base, push.v_stride, 8);
    if ((st = xfa_vk_pipeline_get(ctx, a, vec4, vec8, &pipeline))) return st;
    VkWriteDescriptorSet writes[VK_BINDINGS];
    for (uint32_t i = 0; i < VK_BINDINGS; i++) {
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
    vk->push_descriptors(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vk->pipeline_layout, 0, VK_BINDINGS, writes);
    vkCmdPushConstants(cmd, vk->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof push, &push);
    vkCmdDispatch(cmd, (uint32_t)groups_x, (uint32_t)a->heads_q, (uint32_t)batch);
    return XFA_SUCCESS;
}

/* A view's base and four strides into out[0..4]. */
xfa_status xfa_vk_view_args(xfa_context *ctx, const char *name, const xfa_tensor *t, VkDescriptorBufferInfo *info,
                            uint32_t out[5])
{
    xfa_status st = xfa_vk_describe(ctx, name, t, info, &out[0]);
    if (!st) xfa_vk_strides(t, out + 1, 4);
    return st;
}

/* Bindings not used by a dispatch still need a buffer: the extra-arguments one. */
void xfa_vk_unused_bindings(const vk_context *vk, VkDescriptorBufferInfo infos[VK_BINDINGS])
{
    for (uint32_t i = 0; i < VK_BINDINGS; i++) {
        infos[i].buffer = vk->extra;
        infos[i].offset = 0;
        infos[i].range = VK_EXTRA_SLOT_BYTES;
    }
}

void xfa_vk_bind_and_dispatch(vk_context *vk, VkCommandBuffer cmd, VkPipeline pipeline, const VkDescriptorBufferInfo infos[VK_BINDINGS],
                              uint32_t gx, uint32_t gy, uint32_t gz)
{
    VkWriteDescriptorSet writes[VK_BINDINGS];
    for (uint32_t i = 0; i < VK_BINDINGS; i++) {
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
    vk->push_descriptors(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vk->pipeline_layout, 0, VK_BINDINGS, writes);
    vkCmdDispatch(cmd, gx, gy, gz);
}

/* What one dispatch wrote is what the next one reads. */
void xfa_vk_compute_barrier(VkCommandBuffer cmd)
{
    const VkMemoryBarrier barrier = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
    };
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                         &barrier, 0, NULL, 0, NULL);
}
