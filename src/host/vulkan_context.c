/*
 * vulkan_context.c - a context's queue machinery: the command pool, the one
 * command buffer and fence the simple calls reuse, submission, and Vulkan
 * error reporting.
 */
#include "vulkan_internal.h"

#include <stdlib.h>

const char *xfa_vk_result_name(VkResult r)
{
    switch (r) {
#define XFA_VK_RESULT_(name) case name: return #name;
    XFA_VK_RESULT_(VK_SUCCESS) XFA_VK_RESULT_(VK_NOT_READY) XFA_VK_RESULT_(VK_TIMEOUT)
    XFA_VK_RESULT_(VK_INCOMPLETE) XFA_VK_RESULT_(VK_ERROR_OUT_OF_HOST_MEMORY)
    XFA_VK_RESULT_(VK_ERROR_OUT_OF_DEVICE_MEMORY) XFA_VK_RESULT_(VK_ERROR_INITIALIZATION_FAILED)
    XFA_VK_RESULT_(VK_ERROR_DEVICE_LOST) XFA_VK_RESULT_(VK_ERROR_MEMORY_MAP_FAILED)
    XFA_VK_RESULT_(VK_ERROR_LAYER_NOT_PRESENT) XFA_VK_RESULT_(VK_ERROR_EXTENSION_NOT_PRESENT)
    XFA_VK_RESULT_(VK_ERROR_FEATURE_NOT_PRESENT) XFA_VK_RESULT_(VK_ERROR_INCOMPATIBLE_DRIVER)
    XFA_VK_RESULT_(VK_ERROR_TOO_MANY_OBJECTS) XFA_VK_RESULT_(VK_ERROR_FORMAT_NOT_SUPPORTED)
    XFA_VK_RESULT_(VK_ERROR_FRAGMENTED_POOL) XFA_VK_RESULT_(VK_ERROR_UNKNOWN)
    XFA_VK_RESULT_(VK_ERROR_INVALID_SHADER_NV)
#undef XFA_VK_RESULT_
    default: return "VkResult (unnamed)";
    }
}

xfa_status xfa_vk_fail(xfa_context *ctx, VkResult r, const char *what)
{
    xfa_status st = XFA_ERROR_BACKEND_FAILURE;
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY) st = XFA_ERROR_OUT_OF_DEVICE_MEMORY;
    if (r == VK_ERROR_OUT_OF_HOST_MEMORY) st = XFA_ERROR_OUT_OF_HOST_MEMORY;
    return xfa_fail(ctx, st, "%s failed: %s (%d)", what, xfa_vk_result_name(r), (int)r);
}

xfa_status xfa_vk_context_init(xfa_context *ctx, vk_context *vk)
{
    VkResult r;
    vk->push_descriptors =
        (PFN_vkCmdPushDescriptorSetKHR)vkGetDeviceProcAddr(vk->device, "vkCmdPushDescriptorSetKHR");
    if (!vk->push_descriptors)
        return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_FEATURE, "VK_KHR_push_descriptor is not enabled on the device");
    const VkCommandPoolCreateInfo pool_info = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = vk->caps.queue_family,
    };
    if ((r = vkCreateCommandPool(vk->device, &pool_info, NULL, &vk->pool))) return xfa_vk_fail(ctx, r, "vkCreateCommandPool");
    const VkCommandBufferAllocateInfo cmd_info = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = vk->pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    if ((r = vkAllocateCommandBuffers(vk->device, &cmd_info, &vk->cmd)))
        return xfa_vk_fail(ctx, r, "vkAllocateCommandBuffers");
    const VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((r = vkCreateFence(vk->device, &fence_info, NULL, &vk->fence))) return xfa_vk_fail(ctx, r, "vkCreateFence");
    return xfa_vk_pipelines_init(ctx);
}

void xfa_vk_context_release(vk_context *vk)
{
    if (vk->device == VK_NULL_HANDLE) return;
    /* Only our own submission is waited for: never the whole device. */
    if (vk->pending) vkWaitForFences(vk->device, 1, &vk->fence, VK_TRUE, UINT64_MAX);
    xfa_vk_pipelines_release(vk);
    xfa_vk_staging_release(vk);
    xfa_vk_scratch_release(vk);
    if (vk->fence) vkDestroyFence(vk->device, vk->fence, NULL);
    if (vk->pool) vkDestroyCommandPool(vk->device, vk->pool, NULL);
    if (vk->owns_device) vkDestroyDevice(vk->device, NULL);
    vk->device = VK_NULL_HANDLE;
}

xfa_status xfa_vk_wait(xfa_context *ctx)
{
    vk_context *vk = ctx->impl;
    if (!vk->pending) return XFA_SUCCESS;
    VkResult r = vkWaitForFences(vk->device, 1, &vk->fence, VK_TRUE, UINT64_MAX);
    if (r) return xfa_vk_fail(ctx, r, "vkWaitForFences");
    vk->pending = false;
    if ((r = vkResetFences(vk->device, 1, &vk->fence))) return xfa_vk_fail(ctx, r, "vkResetFences");
    return XFA_SUCCESS;
}

/* Orders this command buffer after everything submitted before it on the queue:
 * submission order alone gives no memory dependency between command buffers. */
static void barrier_after_previous_work(VkCommandBuffer cmd)
{
    const VkMemoryBarrier barrier = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                         VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0, NULL,
                         0, NULL);
}

xfa_status xfa_vk_begin(xfa_context *ctx)
{
    vk_context *vk = ctx->impl;
    xfa_status st = xfa_vk_wait(ctx);
    if (st) return st;
    VkResult r = vkResetCommandBuffer(vk->cmd, 0);
    if (r) return xfa_vk_fail(ctx, r, "vkResetCommandBuffer");
    const VkCommandBufferBeginInfo begin = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    if ((r = vkBeginCommandBuffer(vk->cmd, &begin))) return xfa_vk_fail(ctx, r, "vkBeginCommandBuffer");
    barrier_after_previous_work(vk->cmd);
    return XFA_SUCCESS;
}

xfa_status xfa_vk_submit(xfa_context *ctx, bool wait)
{
    vk_context *vk = ctx->impl;
    /* Results become visible to the host (downloads map the staging buffer after the fence). */
    const VkMemoryBarrier to_host = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
    };
    vkCmdPipelineBarrier(vk->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0, NULL, 0, NULL);
    VkResult r = vkEndCommandBuffer(vk->cmd);
    if (r) return xfa_vk_fail(ctx, r, "vkEndCommandBuffer");
    const VkSubmitInfo submit = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &vk->cmd,
    };
    if (vk->lock_queue) vk->lock_queue(vk->user);
    r = vkQueueSubmit(vk->queue, 1, &submit, vk->fence);
    if (vk->unlock_queue) vk->unlock_queue(vk->user);
    if (r) return xfa_vk_fail(ctx, r, "vkQueueSubmit");
    vk->pending = true;
    return wait ? xfa_vk_wait(ctx) : XFA_SUCCESS;
}
