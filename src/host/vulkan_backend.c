/*
 * vulkan_backend.c - the Vulkan backend's entry points (xfa_backend_ops):
 * discovery, contexts on xfa's own logical device, and the simple forward
 * call, which records into the context's command buffer and submits without
 * waiting (the next call, a download or xfa_context_synchronize waits on the
 * fence; never vkDeviceWaitIdle).
 */
#include "alloc.h"
#include "vulkan_internal.h"

#include <stdlib.h>
#include <string.h>

static xfa_status vk_device_count(int *count, char *msg) { return xfa_vk_physical_devices(NULL, count, msg); }

/* The eligible physical device `index` (bounds already checked by the caller or here). */
static xfa_status physical_device(int index, VkPhysicalDevice *out, char *msg)
{
    int count = 0;
    xfa_status st = xfa_vk_physical_devices(NULL, &count, msg);
    if (st) return st;
    if (index < 0 || index >= count)
        return xfa_msg(msg, XFA_ERROR_INVALID_DEVICE, "Vulkan device %d: %d device(s) can run xfa", index, count);
    VkPhysicalDevice *devices = xfa_calloc((size_t)count, sizeof *devices);
    if (!devices) return xfa_msg(msg, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating the device list");
    st = xfa_vk_physical_devices(devices, &count, msg);
    if (!st) *out = devices[index];
    xfa_free(devices);
    return st;
}

/* The cooperative-matrix path runs when compiled in, offered by the device, and not
 * turned off with XFA_VULKAN_PATH=scalar. */
static bool want_coopmat(const vk_device_caps *caps)
{
#ifdef XFA_VULKAN_COOPMAT
    const char *env = getenv("XFA_VULKAN_PATH");
    return caps->coopmat && !(env && strcmp(env, "scalar") == 0);
#else
    (void)caps;
    return false;
#endif
}

static xfa_status vk_device_info(int index, xfa_device_info *info, char *msg)
{
    VkPhysicalDevice device = VK_NULL_HANDLE;
    VkInstance instance;
    xfa_status st = physical_device(index, &device, msg);
    if (st || (st = xfa_vk_instance(&instance, msg))) return st;
    vk_device_caps caps;
    xfa_vk_query_caps(instance, device, &caps);
    xfa_vk_fill_info(&caps, want_coopmat(&caps), info);
    return XFA_SUCCESS;
}

static xfa_status open_context(xfa_context *ctx, int index)
{
    char msg[XFA_MESSAGE_SIZE];
    vk_context *vk = xfa_calloc(1, sizeof *vk);
    if (!vk) return xfa_fail(ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating the Vulkan context");
    ctx->impl = vk;
    xfa_status st = xfa_vk_instance(&vk->instance, msg);
    if (!st) st = physical_device(index, &vk->physical, msg);
    if (st) return xfa_fail(ctx, st, "%s", msg);
    const char *why = xfa_vk_query_caps(vk->instance, vk->physical, &vk->caps);
    if (why)
        return xfa_fail(ctx, why == xfa_vk_out_of_host_memory ? XFA_ERROR_OUT_OF_HOST_MEMORY : XFA_ERROR_UNSUPPORTED_FEATURE,
                        "Vulkan device %d: %s", index, why);
    vk->use_coopmat = want_coopmat(&vk->caps);

    const float priority = 1.0f;
    const VkDeviceQueueCreateInfo queue_info = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = vk->caps.queue_family,
        .queueCount = 1,
        .pQueuePriorities = &priority,
    };
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR coop = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
        .cooperativeMatrix = VK_TRUE,
    };
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .pNext = vk->use_coopmat ? &coop : NULL,
        .shaderFloat16 = vk->use_coopmat,
        .vulkanMemoryModel = vk->use_coopmat,
    };
    VkPhysicalDeviceVulkan11Features f11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
        .pNext = &f12,
        .storageBuffer16BitAccess = VK_TRUE,
    };
    const char *extensions[2] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME};
    const VkDeviceCreateInfo device_info = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &f11,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &queue_info,
        .enabledExtensionCount = vk->use_coopmat ? 2 : 1,
        .ppEnabledExtensionNames = extensions,
    };
    VkResult r = vkCreateDevice(vk->physical, &device_info, NULL, &vk->device);
    if (r) return xfa_vk_fail(ctx, r, "vkCreateDevice");
    vk->owns_device = true;
    vkGetDeviceQueue(vk->device, vk->caps.queue_family, 0, &vk->queue);
    xfa_vk_fill_info(&vk->caps, vk->use_coopmat, &ctx->info);
    st = xfa_vk_context_init(ctx, vk);
    return st ? st : xfa_vk_check_validation(ctx);
}

static void vk_context_destroy(xfa_context *ctx)
{
    vk_context *vk = ctx->impl;
    if (!vk) return;
    xfa_vk_context_release(vk);
    xfa_free(vk);
    ctx->impl = NULL;
}

/* A context that fails half-way gives back what it made (the caller only frees ctx). */
static xfa_status vk_context_create(xfa_context *ctx, int index)
{
    xfa_status st = open_context(ctx, index);
    if (st) vk_context_destroy(ctx);
    return st;
}

static xfa_status vk_forward(xfa_context *ctx, const xfa_forward_args *args)
{
    vk_context *vk = ctx->impl;
    xfa_status st = xfa_vk_begin(ctx);
    if (st) return st;
    st = xfa_vk_record_forward(ctx, vk->cmd, args);
    if (st) {
        vkEndCommandBuffer(vk->cmd); /* leaves it executable but unsubmitted; the next begin resets it */
        return st;
    }
    st = xfa_vk_submit(ctx, false);
    return st ? st : xfa_vk_check_validation(ctx);
}

static xfa_status vk_synchronize(xfa_context *ctx)
{
    xfa_status st = xfa_vk_wait(ctx);
    return st ? st : xfa_vk_check_validation(ctx);
}

const xfa_backend_ops xfa_vulkan_backend = {
    .id = XFA_BACKEND_VULKAN,
    .name = "vulkan",
    .device_count = vk_device_count,
    .device_info = vk_device_info,
    .context_create = vk_context_create,
    .context_destroy = vk_context_destroy,
    .plan = xfa_vk_plan,
    .plan_check = xfa_vk_plan_check,
    .buffer_create = xfa_vk_buffer_create,
    .buffer_destroy = xfa_vk_buffer_destroy,
    .buffer_upload = xfa_vk_upload,
    .buffer_download = xfa_vk_download,
    .forward = vk_forward,
    .synchronize = vk_synchronize,
    .backward = xfa_vk_backward,
    .decode = xfa_vk_decode,
    .merge = xfa_vk_merge,
};
