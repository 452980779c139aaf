/*
 * vulkan_memory.c - device buffers and the host-visible staging buffer that
 * uploads and downloads go through (in chunks, so staging stays small).
 */
#include "alloc.h"
#include "vulkan_internal.h"

#include <stdlib.h>
#include <string.h>

/* Staging is grown up to this size; larger copies go in several chunks. */
#define VK_STAGING_MAX ((VkDeviceSize)64 << 20)

static int find_memory_type(const VkPhysicalDeviceMemoryProperties *mem, uint32_t type_bits,
                            VkMemoryPropertyFlags want)
{
    for (uint32_t i = 0; i < mem->memoryTypeCount; i++)
        if ((type_bits & (1u << i)) && (mem->memoryTypes[i].propertyFlags & want) == want) return (int)i;
    return -1;
}

/* A buffer with memory bound; tries each property set in order. */
static xfa_status make_buffer(xfa_context *ctx, VkDeviceSize size, VkBufferUsageFlags usage,
                              const VkMemoryPropertyFlags *wants, int n_wants, VkBuffer *buffer,
                              VkDeviceMemory *memory)
{
    vk_context *vk = ctx->impl;
    const VkBufferCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = usage,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkResult r = vkCreateBuffer(vk->device, &info, NULL, buffer);
    if (r) return xfa_vk_fail(ctx, r, "vkCreateBuffer");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(vk->device, *buffer, &req);
    int type = -1;
    for (int i = 0; i < n_wants && type < 0; i++) type = find_memory_type(&vk->caps.memory, req.memoryTypeBits, wants[i]);
    if (type < 0) {
        vkDestroyBuffer(vk->device, *buffer, NULL);
        return xfa_fail(ctx, XFA_ERROR_OUT_OF_DEVICE_MEMORY, "no memory type fits a buffer of %llu bytes",
                        (unsigned long long)size);
    }
    const VkMemoryAllocateInfo alloc = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = (uint32_t)type,
    };
    if ((r = vkAllocateMemory(vk->device, &alloc, NULL, memory))) {
        vkDestroyBuffer(vk->device, *buffer, NULL);
        return xfa_vk_fail(ctx, r, "vkAllocateMemory");
    }
    if ((r = vkBindBufferMemory(vk->device, *buffer, *memory, 0))) {
        vkFreeMemory(vk->device, *memory, NULL);
        vkDestroyBuffer(vk->device, *buffer, NULL);
        return xfa_vk_fail(ctx, r, "vkBindBufferMemory");
    }
    return XFA_SUCCESS;
}

xfa_status xfa_vk_device_buffer(xfa_context *ctx, VkDeviceSize size, VkBuffer *buffer, VkDeviceMemory *memory)
{
    const VkMemoryPropertyFlags wants[] = {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0};
    return make_buffer(ctx, size,
                       VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                           VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                       wants, 2, buffer, memory);
}

xfa_status xfa_vk_buffer_create(xfa_context *ctx, xfa_buffer *buf)
{
    vk_buffer *b = xfa_calloc(1, sizeof *b);
    if (!b) return xfa_fail(ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating a buffer handle");
    /* Rounded up so a 16-bit view's last word and the descriptor range stay inside. */
    const VkDeviceSize size = ((VkDeviceSize)buf->size + 15) & ~(VkDeviceSize)15;
    const VkMemoryPropertyFlags wants[] = {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0};
    xfa_status st = make_buffer(ctx, size,
                                VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                    VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                wants, 2, &b->buffer, &b->memory);
    if (st) {
        xfa_free(b);
        return st;
    }
    buf->impl = b;
    buf->native_offset = 0;
    return XFA_SUCCESS;
}

void xfa_vk_buffer_destroy(xfa_context *ctx, xfa_buffer *buf)
{
    vk_context *vk = ctx->impl;
    vk_buffer *b = buf->impl;
    if (!b) return;
    /* The buffer may still be in use by our last submission. */
    xfa_vk_wait(ctx);
    if (buf->owned) {
        vkDestroyBuffer(vk->device, b->buffer, NULL);
        vkFreeMemory(vk->device, b->memory, NULL);
    }
    xfa_free(b);
    buf->impl = NULL;
}

void xfa_vk_staging_release(vk_context *vk)
{
    if (vk->staging_map) vkUnmapMemory(vk->device, vk->staging_memory);
    if (vk->staging) vkDestroyBuffer(vk->device, vk->staging, NULL);
    if (vk->staging_memory) vkFreeMemory(vk->device, vk->staging_memory, NULL);
    vk->staging_map = NULL;
    vk->staging = VK_NULL_HANDLE;
    vk->staging_memory = VK_NULL_HANDLE;
    vk->staging_size = 0;
}

/* Host-visible, coherent staging of at least min(bytes, VK_STAGING_MAX); returns its size. */
static xfa_status ensure_staging(xfa_context *ctx, size_t bytes, VkDeviceSize *size)
{
    vk_context *vk = ctx->impl;
    VkDeviceSize want = bytes < VK_STAGING_MAX ? (VkDeviceSize)bytes : VK_STAGING_MAX;
    if (vk->staging_size >= want) {
        *size = vk->staging_size;
        return XFA_SUCCESS;
    }
    xfa_status st = xfa_vk_wait(ctx);
    if (st) return st;
    xfa_vk_staging_release(vk);
    if (want < ((VkDeviceSize)1 << 20)) want = (VkDeviceSize)1 << 20;
    const VkMemoryPropertyFlags wants[] = {
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
    };
    st = make_buffer(ctx, want, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, wants, 2,
                     &vk->staging, &vk->staging_memory);
    if (st) return st;
    VkResult r = vkMapMemory(vk->device, vk->staging_memory, 0, VK_WHOLE_SIZE, 0, &vk->staging_map);
    if (r) {
        xfa_vk_staging_release(vk);
        return xfa_vk_fail(ctx, r, "vkMapMemory");
    }
    vk->staging_size = want;
    *size = want;
    return XFA_SUCCESS;
}

xfa_status xfa_vk_upload(xfa_context *ctx, xfa_buffer *buf, size_t offset, const void *src, size_t bytes)
{
    vk_context *vk = ctx->impl;
    const vk_buffer *b = buf->impl;
    VkDeviceSize chunk;
    xfa_status st = ensure_staging(ctx, bytes, &chunk);
    for (size_t done = 0; !st && done < bytes; done += (size_t)chunk) {
        const size_t n = bytes - done < chunk ? bytes - done : (size_t)chunk;
        if ((st = xfa_vk_wait(ctx))) break; /* staging may still feed the previous copy */
        memcpy(vk->staging_map, (const char *)src + done, n);
        if ((st = xfa_vk_begin(ctx))) break;
        const VkBufferCopy region = {0, buf->native_offset + offset + done, n};
        vkCmdCopyBuffer(vk->cmd, vk->staging, b->buffer, 1, &region);
        st = xfa_vk_submit(ctx, true);
    }
    return st ? st : xfa_vk_check_validation(ctx);
}

xfa_status xfa_vk_download(xfa_context *ctx, xfa_buffer *buf, size_t offset, void *dst, size_t bytes)
{
    vk_context *vk = ctx->impl;
    const vk_buffer *b = buf->impl;
    VkDeviceSize chunk;
    xfa_status st = ensure_staging(ctx, bytes, &chunk);
    for (size_t done = 0; !st && done < bytes; done += (size_t)chunk) {
        const size_t n = bytes - done < chunk ? bytes - done : (size_t)chunk;
        if ((st = xfa_vk_begin(ctx))) break;
        const VkBufferCopy region = {buf->native_offset + offset + done, 0, n};
        vkCmdCopyBuffer(vk->cmd, b->buffer, vk->staging, 1, &region);
        if ((st = xfa_vk_submit(ctx, true))) break;
        memcpy((char *)dst + done, vk->staging_map, n);
    }
    return st ? st : xfa_vk_check_validation(ctx);
}

void xfa_vk_scratch_release(vk_context *vk)
{
    if (vk->scratch) vkDestroyBuffer(vk->device, vk->scratch, NULL);
    if (vk->scratch_memory) vkFreeMemory(vk->device, vk->scratch_memory, NULL);
    vk->scratch = VK_NULL_HANDLE;
    vk->scratch_memory = VK_NULL_HANDLE;
    vk->scratch_size = 0;
}

/* At least `bytes` of scratch. Called after xfa_vk_begin, so the old buffer is idle. */
xfa_status xfa_vk_caller_scratch(xfa_context *ctx, const xfa_buffer *scratch, size_t offset, VkBuffer *buffer,
                                 VkDeviceSize *start)
{
    const vk_context *vk = ctx->impl;
    const VkDeviceSize align = vk->caps.props.limits.minStorageBufferOffsetAlignment;
    *start = (VkDeviceSize)scratch->native_offset + offset;
    if (align > 1 && *start % align)
        return xfa_fail(ctx, XFA_ERROR_MISALIGNED,
                        "params.scratch starts %llu bytes into its VkBuffer; the device needs a multiple of %llu",
                        (unsigned long long)*start, (unsigned long long)align);
    *buffer = ((const vk_buffer *)scratch->impl)->buffer;
    return XFA_SUCCESS;
}

xfa_status xfa_vk_ensure_scratch(xfa_context *ctx, VkDeviceSize bytes)
{
    vk_context *vk = ctx->impl;
    if (vk->scratch_size >= bytes) return XFA_SUCCESS;
    xfa_vk_scratch_release(vk);
    const VkDeviceSize size = bytes < ((VkDeviceSize)1 << 20) ? (VkDeviceSize)1 << 20 : bytes;
    if (size > vk->caps.props.limits.maxStorageBufferRange)
        return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_FEATURE,
                        "decode needs %llu bytes of scratch, more than the device's maxStorageBufferRange %u",
                        (unsigned long long)size, vk->caps.props.limits.maxStorageBufferRange);
    xfa_status st = xfa_vk_device_buffer(ctx, size, &vk->scratch, &vk->scratch_memory);
    if (st) return st;
    vk->scratch_size = size;
    return XFA_SUCCESS;
}
