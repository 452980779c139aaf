/*
 * xfa_vulkan.h - engine integration for the Vulkan backend: run xfa on the
 * caller's VkDevice, on the caller's VkBuffers, inside the caller's command
 * buffers.
 *
 * Requirements on a caller's device (xfa cannot query what was enabled, so it
 * trusts these): Vulkan 1.2 or later; the device extension
 * VK_KHR_push_descriptor enabled; the feature storageBuffer16BitAccess
 * (VkPhysicalDeviceVulkan11Features) enabled; a queue family with
 * VK_QUEUE_COMPUTE_BIT. For the cooperative-matrix path additionally
 * VK_KHR_cooperative_matrix with cooperativeMatrix, shaderFloat16 and
 * vulkanMemoryModel enabled (see xfa_vulkan_context_params.enable_coopmat).
 *
 * Thread-safety: as in xfa.h (one thread per context at a time). The simple
 * calls (xfa_attention_forward, uploads, downloads) submit to the queue you
 * pass; if your engine submits to that queue from other threads, serialise
 * through the lock/unlock callbacks.
 */
#ifndef XFA_VULKAN_H
#define XFA_VULKAN_H

#include "xfa.h"

#include <vulkan/vulkan.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xfa_vulkan_context_params {
    VkInstance instance;              /* created with apiVersion >= 1.2 */
    VkPhysicalDevice physical_device;
    VkDevice device;                  /* see the requirements above */
    VkQueue queue;                    /* used by the simple (submit-and-wait) calls */
    uint32_t queue_family;            /* family of `queue`; must support compute */
    VkPipelineCache pipeline_cache;   /* optional: VK_NULL_HANDLE makes a private one */
    int enable_coopmat;               /* nonzero: VK_KHR_cooperative_matrix was enabled on `device` */
    void (*lock_queue)(void *user);   /* optional: called around each vkQueueSubmit */
    void (*unlock_queue)(void *user);
    void *user;
} xfa_vulkan_context_params;

/*
 * A context on the caller's device. xfa never destroys the instance, device,
 * queue or a caller's pipeline cache; xfa_context_destroy frees only what xfa
 * made (pipelines, command pool, staging memory). Destroy the context before
 * the device.
 */
xfa_status xfa_vulkan_context_create(const xfa_vulkan_context_params *params, xfa_context **out);

/*
 * Wraps `bytes` of the caller's buffer starting at `offset`. The VkBuffer needs
 * VK_BUFFER_USAGE_STORAGE_BUFFER_BIT (and TRANSFER_SRC/DST for
 * xfa_buffer_download/upload). xfa_buffer_destroy leaves the VkBuffer alone.
 */
xfa_status xfa_vulkan_buffer_wrap(xfa_context *ctx, VkBuffer buffer, VkDeviceSize offset, size_t bytes,
                                  xfa_buffer **out);

/* The VkBuffer behind an xfa buffer and the offset where the xfa buffer starts in it. */
xfa_status xfa_vulkan_buffer_handle(const xfa_buffer *buf, VkBuffer *buffer, VkDeviceSize *offset);

/*
 * Records the attention dispatch into `cmd` (in the recording state, outside a
 * render pass); nothing is submitted. Arguments are validated as in
 * xfa_attention_forward. The call binds a compute pipeline and push
 * descriptors and pushes constants: rebind your own compute state afterwards.
 *
 * Barriers (the caller records them):
 *   before: whatever wrote q, k, v (and o/lse if you read-modify) must be made
 *     available to the compute shader, e.g. for a transfer write
 *       srcStage TRANSFER, srcAccess TRANSFER_WRITE ->
 *       dstStage COMPUTE_SHADER, dstAccess SHADER_READ | SHADER_WRITE;
 *     for a previous compute write use srcStage COMPUTE_SHADER, srcAccess SHADER_WRITE.
 *     o and lse are written without being read: a previous reader of them needs an
 *     execution dependency (its stage -> COMPUTE_SHADER).
 *   after: o and lse are written by the compute shader:
 *       srcStage COMPUTE_SHADER, srcAccess SHADER_WRITE ->
 *       dstStage/dstAccess of the consumer (COMPUTE_SHADER/SHADER_READ, TRANSFER/TRANSFER_READ,
 *       HOST/HOST_READ after a fence wait, ...).
 * The buffers must stay alive until the command buffer has finished executing.
 *
 * A call with a sliding window, softcap, ALiBi, a bias or packed variable
 * lengths also records a vkCmdUpdateBuffer of its arguments into a small buffer
 * of the context (one of 256 slots, used in turn), between barriers of its own;
 * on one queue, its barriers order the slots; across queues running at once,
 * keep fewer than 256 such calls of one context in flight.
 */
xfa_status xfa_vulkan_record_forward(xfa_context *ctx, VkCommandBuffer cmd, const xfa_attention_params *params,
                                     const xfa_tensor *q, const xfa_tensor *k, const xfa_tensor *v,
                                     const xfa_tensor *o, const xfa_tensor *lse);

/*
 * Validation-layer messages (warnings and errors) seen by xfa's own instance,
 * which enables VK_LAYER_KHRONOS_validation when the environment has
 * XFA_VULKAN_VALIDATION=1. While the count is nonzero the backend's calls fail
 * with XFA_ERROR_BACKEND_FAILURE quoting the first message, so tests notice.
 */
uint64_t xfa_vulkan_validation_message_count(void);

#ifdef __cplusplus
}
#endif

#endif /* XFA_VULKAN_H */
