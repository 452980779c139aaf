/*
 * vulkan_engine.c - xfa inside an engine's own Vulkan frame.
 *
 * The program plays the engine: it owns the instance, the device, the queue, one
 * buffer with all its tensors at offsets, its own compute pipeline, and the
 * command buffer. Into that one command buffer it records
 *
 *     its pass        Q = 2 · X                       (axpby.comp)
 *     barrier         compute write -> compute read
 *     xfa attention   O = softmax(Q Kᵀ / √D) V, causal (xfa_vulkan_record_forward)
 *     barrier         compute write -> compute read
 *     its pass        Y = O + X                       (a residual add)
 *     barrier         compute write -> host read
 *
 * submits it once, waits on its own fence, and checks Y against a double-precision
 * attention computed here. xfa creates no device, submits nothing and never waits
 * in this flow. With XFA_VULKAN_VALIDATION=1 the Khronos validation layer watches
 * the whole program; any warning or error fails it.
 *
 * Exit status: 0 checked and right, 1 wrong or failed, 77 no Vulkan device here.
 */
#include <xfa_vulkan.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axpby_spv.h" /* the engine's shader, compiled by the build (examples/CMakeLists.txt) */

enum { B = 1, S = 67, H = 4, D = 64 }; /* odd S: the last query block is partial */
#define COUNT ((size_t)B * S * H * D)

typedef struct engine {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice physical;
    VkDevice device;
    VkQueue queue;
    uint32_t family;
    VkBuffer buffer;
    VkDeviceMemory memory;
    float *mapped;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout pipeline_layout;
    VkPipeline pipeline;
    VkDescriptorPool descriptor_pool;
    VkCommandPool command_pool;
} engine;

static int validation_messages;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                            VkDebugUtilsMessageTypeFlagsEXT types,
                                                            const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                            void *user)
{
    (void)severity;
    (void)types;
    (void)user;
    validation_messages++;
    fprintf(stderr, "validation: %s\n", data->pMessage);
    return VK_FALSE;
}

static int validation_requested(void)
{
    const char *env = getenv("XFA_VULKAN_VALIDATION");
    return env && *env && strcmp(env, "0") != 0;
}

/* Instance, device and queue as an engine would make them, with what xfa_vulkan.h asks for. 0: no device. */
static int engine_open_device(engine *e)
{
    const VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                                   .pApplicationName = "xfa vulkan_engine example",
                                   .apiVersion = VK_API_VERSION_1_2};
    const char *layer = "VK_LAYER_KHRONOS_validation", *debug_ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    const VkDebugUtilsMessengerCreateInfoEXT messenger_info = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
        .pfnUserCallback = on_validation_message,
    };
    /* Synchronization validation too: it is what checks the barriers between our passes and xfa's. */
    const VkValidationFeatureEnableEXT sync_validation = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
    const VkValidationFeaturesEXT validation_features = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
                                                         .pNext = &messenger_info,
                                                         .enabledValidationFeatureCount = 1,
                                                         .pEnabledValidationFeatures = &sync_validation};
    const int validate = validation_requested();
    const VkInstanceCreateInfo instance_info = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = validate ? &validation_features : NULL,
        .pApplicationInfo = &app,
        .enabledLayerCount = validate ? 1 : 0,
        .ppEnabledLayerNames = &layer,
        .enabledExtensionCount = validate ? 1 : 0,
        .ppEnabledExtensionNames = &debug_ext,
    };
    if (vkCreateInstance(&instance_info, NULL, &e->instance) != VK_SUCCESS) return 0;
    if (validate) {
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(e->instance, "vkCreateDebugUtilsMessengerEXT");
        if (!create || create(e->instance, &messenger_info, NULL, &e->messenger) != VK_SUCCESS) return 0;
    }
    uint32_t count = 1;
    VkResult r = vkEnumeratePhysicalDevices(e->instance, &count, &e->physical);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || count == 0) return 0;

    VkQueueFamilyProperties families[16];
    uint32_t family_count = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(e->physical, &family_count, families);
    e->family = UINT32_MAX;
    for (uint32_t i = 0; i < family_count && e->family == UINT32_MAX; i++)
        if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) e->family = i;
    if (e->family == UINT32_MAX) return 0;

    const float priority = 1.0f;
    const VkDeviceQueueCreateInfo queue_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                                .queueFamilyIndex = e->family,
                                                .queueCount = 1,
                                                .pQueuePriorities = &priority};
    VkPhysicalDeviceVulkan11Features features11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                                   .storageBuffer16BitAccess = VK_TRUE};
    const char *push_descriptor = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
    const VkDeviceCreateInfo device_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                            .pNext = &features11,
                                            .queueCreateInfoCount = 1,
                                            .pQueueCreateInfos = &queue_info,
                                            .enabledExtensionCount = 1,
                                            .ppEnabledExtensionNames = &push_descriptor};
    if (vkCreateDevice(e->physical, &device_info, NULL, &e->device) != VK_SUCCESS) return 0;
    vkGetDeviceQueue(e->device, e->family, 0, &e->queue);
    return 1;
}

/* One host-visible buffer holding every tensor of the frame. */
static int engine_make_buffer(engine *e, VkDeviceSize bytes)
{
    const VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                                     .size = bytes,
                                     .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                                     .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    if (vkCreateBuffer(e->device, &info, NULL, &e->buffer) != VK_SUCCESS) return 0;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(e->device, e->buffer, &req);
    VkPhysicalDeviceMemoryProperties props;
    vkGetPhysicalDeviceMemoryProperties(e->physical, &props);
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < props.memoryTypeCount && type == UINT32_MAX; i++)
        if ((req.memoryTypeBits & (1u << i)) && (props.memoryTypes[i].propertyFlags & want) == want) type = i;
    if (type == UINT32_MAX) return 0;
    const VkMemoryAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                        .allocationSize = req.size,
                                        .memoryTypeIndex = type};
    if (vkAllocateMemory(e->device, &alloc, NULL, &e->memory) != VK_SUCCESS) return 0;
    if (vkBindBufferMemory(e->device, e->buffer, e->memory, 0) != VK_SUCCESS) return 0;
    return vkMapMemory(e->device, e->memory, 0, VK_WHOLE_SIZE, 0, (void **)&e->mapped) == VK_SUCCESS;
}

/* The engine's axpby pipeline: three storage buffers, push constants (a, b, n). */
static int engine_make_pipeline(engine *e)
{
    VkDescriptorSetLayoutBinding bindings[3];
    for (uint32_t i = 0; i < 3; i++)
        bindings[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                                     .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                     .descriptorCount = 1,
                                                     .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    const VkDescriptorSetLayoutCreateInfo set_info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                                      .bindingCount = 3,
                                                      .pBindings = bindings};
    if (vkCreateDescriptorSetLayout(e->device, &set_info, NULL, &e->set_layout) != VK_SUCCESS) return 0;
    const VkPushConstantRange range = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = 3 * sizeof(float)};
    const VkPipelineLayoutCreateInfo layout_info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                                    .setLayoutCount = 1,
                                                    .pSetLayouts = &e->set_layout,
                                                    .pushConstantRangeCount = 1,
                                                    .pPushConstantRanges = &range};
    if (vkCreatePipelineLayout(e->device, &layout_info, NULL, &e->pipeline_layout) != VK_SUCCESS) return 0;
    const VkShaderModuleCreateInfo module_info = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                                  .codeSize = example_axpby_spv_size,
                                                  .pCode = example_axpby_spv};
    VkShaderModule module;
    if (vkCreateShaderModule(e->device, &module_info, NULL, &module) != VK_SUCCESS) return 0;
    const VkComputePipelineCreateInfo pipeline_info = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = module,
                  .pName = "main"},
        .layout = e->pipeline_layout};
    const VkResult r = vkCreateComputePipelines(e->device, VK_NULL_HANDLE, 1, &pipeline_info, NULL, &e->pipeline);
    vkDestroyShaderModule(e->device, module, NULL);
    if (r != VK_SUCCESS) return 0;
    const VkDescriptorPoolSize pool_size = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 6};
    const VkDescriptorPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                                  .maxSets = 2,
                                                  .poolSizeCount = 1,
                                                  .pPoolSizes = &pool_size};
    if (vkCreateDescriptorPool(e->device, &pool_info, NULL, &e->descriptor_pool) != VK_SUCCESS) return 0;
    const VkCommandPoolCreateInfo command_pool_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                                       .queueFamilyIndex = e->family};
    return vkCreateCommandPool(e->device, &command_pool_info, NULL, &e->command_pool) == VK_SUCCESS;
}

/* A descriptor set for y = a·x + b·z over regions (byte offsets) of the engine's buffer. */
static VkDescriptorSet engine_axpby_set(engine *e, VkDeviceSize x, VkDeviceSize z, VkDeviceSize y, VkDeviceSize bytes)
{
    VkDescriptorSet set = VK_NULL_HANDLE;
    const VkDescriptorSetAllocateInfo info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                              .descriptorPool = e->descriptor_pool,
                                              .descriptorSetCount = 1,
                                              .pSetLayouts = &e->set_layout};
    if (vkAllocateDescriptorSets(e->device, &info, &set) != VK_SUCCESS) return VK_NULL_HANDLE;
    const VkDescriptorBufferInfo regions[3] = {{e->buffer, x, bytes}, {e->buffer, z, bytes}, {e->buffer, y, bytes}};
    VkWriteDescriptorSet writes[3];
    for (uint32_t i = 0; i < 3; i++)
        writes[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                           .dstSet = set,
                                           .dstBinding = i,
                                           .descriptorCount = 1,
                                           .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                           .pBufferInfo = &regions[i]};
    vkUpdateDescriptorSets(e->device, 3, writes, 0, NULL);
    return set;
}

static void record_axpby(engine *e, VkCommandBuffer cmd, VkDescriptorSet set, float a, float b, uint32_t n)
{
    const struct { float a, b; uint32_t n; } push = {a, b, n};
    /* xfa binds its own pipeline and push constants: the engine (re)binds its state before each pass. */
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, e->pipeline);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, e->pipeline_layout, 0, 1, &set, 0, NULL);
    vkCmdPushConstants(cmd, e->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof push, &push);
    vkCmdDispatch(cmd, (n + 63) / 64, 1, 1);
}

static void record_barrier(VkCommandBuffer cmd, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access)
{
    const VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                     .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                                     .dstAccessMask = dst_access};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, dst_stage, 0, 1, &barrier, 0, NULL, 0, NULL);
}

static void engine_close(engine *e)
{
    if (!e->device) goto instance;
    vkDeviceWaitIdle(e->device);
    if (e->command_pool) vkDestroyCommandPool(e->device, e->command_pool, NULL);
    if (e->descriptor_pool) vkDestroyDescriptorPool(e->device, e->descriptor_pool, NULL);
    if (e->pipeline) vkDestroyPipeline(e->device, e->pipeline, NULL);
    if (e->pipeline_layout) vkDestroyPipelineLayout(e->device, e->pipeline_layout, NULL);
    if (e->set_layout) vkDestroyDescriptorSetLayout(e->device, e->set_layout, NULL);
    if (e->buffer) vkDestroyBuffer(e->device, e->buffer, NULL);
    if (e->memory) vkFreeMemory(e->device, e->memory, NULL);
    vkDestroyDevice(e->device, NULL);
instance:
    if (e->messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy =
            (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(e->instance, "vkDestroyDebugUtilsMessengerEXT");
        if (destroy) destroy(e->instance, e->messenger, NULL);
    }
    if (e->instance) vkDestroyInstance(e->instance, NULL);
}

/* Y = causal_attention(2X, K, V) + X in double precision, BSHD layout; returns the worst error of `y`. */
static double worst_error(const float *x, const float *k, const float *v, const float *y)
{
    double worst = 0;
    double *score = malloc(S * sizeof *score);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < S; i++) {
            const float *xi = x + ((size_t)i * H + h) * D;
            double max = -INFINITY, sum = 0;
            for (int j = 0; j <= i; j++) { /* causal: key j <= query i */
                const float *kj = k + ((size_t)j * H + h) * D;
                double s = 0;
                for (int d = 0; d < D; d++) s += 2.0 * xi[d] * kj[d];
                score[j] = s / sqrt((double)D);
                if (score[j] > max) max = score[j];
            }
            for (int j = 0; j <= i; j++) sum += score[j] = exp(score[j] - max);
            for (int d = 0; d < D; d++) {
                double o = 0;
                for (int j = 0; j <= i; j++) o += score[j] * v[((size_t)j * H + h) * D + d];
                const double want = o / sum + xi[d];
                const double err = fabs(y[((size_t)i * H + h) * D + d] - want) / (1.0 + fabs(want));
                if (!(err <= worst)) worst = err; /* NaN-propagating */
            }
        }
    free(score);
    return worst;
}

int main(void)
{
    engine e = {0};
    if (!engine_open_device(&e)) {
        printf("vulkan_engine: no Vulkan device with what xfa needs here; skipped\n");
        engine_close(&e);
        return 77;
    }
    int ok = 0;
    xfa_context *ctx = NULL;
    xfa_buffer *frame = NULL;

    /* The frame's tensors live at offsets in one engine buffer: X, Q, K, V, O, Y. */
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(e.physical, &props);
    const VkDeviceSize align = props.limits.minStorageBufferOffsetAlignment;
    const VkDeviceSize tensor_bytes = (COUNT * sizeof(float) + align - 1) / align * align;
    enum { X, Q, K, V, O, Y, TENSORS };
    if (!engine_make_buffer(&e, TENSORS * tensor_bytes) || !engine_make_pipeline(&e)) {
        fprintf(stderr, "vulkan_engine: could not set up the engine's buffer or pipeline\n");
        goto done;
    }
    float *tensor[TENSORS];
    for (int t = 0; t < TENSORS; t++) tensor[t] = e.mapped + t * tensor_bytes / sizeof(float);
    uint64_t seed = 2026;
    for (int t = X; t <= V; t++)
        for (size_t i = 0; i < COUNT; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            tensor[t][i] = (float)((double)(seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        }
    for (size_t i = 0; i < COUNT; i++) tensor[Q][i] = tensor[O][i] = tensor[Y][i] = NAN; /* poison */

    /* xfa on the engine's device and buffer: nothing of its own but pipelines and a command pool. */
    const xfa_vulkan_context_params params = {.instance = e.instance,
                                              .physical_device = e.physical,
                                              .device = e.device,
                                              .queue = e.queue,
                                              .queue_family = e.family};
    xfa_status st = xfa_vulkan_context_create(&params, &ctx);
    if (st == XFA_SUCCESS) st = xfa_vulkan_buffer_wrap(ctx, e.buffer, 0, TENSORS * tensor_bytes, &frame);
    if (st != XFA_SUCCESS) {
        fprintf(stderr, "vulkan_engine: %s: %s\n", xfa_status_string(st), ctx ? xfa_context_last_error(ctx) : xfa_last_error());
        goto done;
    }
    const xfa_tensor q = xfa_tensor_bshd(frame, Q * tensor_bytes, XFA_DTYPE_F32, B, S, H, D);
    const xfa_tensor k = xfa_tensor_bshd(frame, K * tensor_bytes, XFA_DTYPE_F32, B, S, H, D);
    const xfa_tensor v = xfa_tensor_bshd(frame, V * tensor_bytes, XFA_DTYPE_F32, B, S, H, D);
    const xfa_tensor o = xfa_tensor_bshd(frame, O * tensor_bytes, XFA_DTYPE_F32, B, S, H, D);
    xfa_attention_params attention = XFA_ATTENTION_PARAMS_DEFAULT;
    attention.causal = 1;

    const VkDescriptorSet scale_set = engine_axpby_set(&e, X * tensor_bytes, X * tensor_bytes, Q * tensor_bytes,
                                                       COUNT * sizeof(float));
    const VkDescriptorSet residual_set = engine_axpby_set(&e, O * tensor_bytes, X * tensor_bytes, Y * tensor_bytes,
                                                          COUNT * sizeof(float));
    VkCommandBuffer cmd;
    const VkCommandBufferAllocateInfo cmd_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                                  .commandPool = e.command_pool,
                                                  .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                                  .commandBufferCount = 1};
    const VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                            .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    if (!scale_set || !residual_set || vkAllocateCommandBuffers(e.device, &cmd_info, &cmd) != VK_SUCCESS ||
        vkBeginCommandBuffer(cmd, &begin) != VK_SUCCESS) {
        fprintf(stderr, "vulkan_engine: could not record\n");
        goto done;
    }
    record_axpby(&e, cmd, scale_set, 2.0f, 0.0f, (uint32_t)COUNT); /* Q = 2X */
    record_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
    st = xfa_vulkan_record_forward(ctx, cmd, &attention, &q, &k, &v, &o, NULL);
    if (st != XFA_SUCCESS) {
        fprintf(stderr, "vulkan_engine: record: %s\n", xfa_context_last_error(ctx));
        goto done;
    }
    record_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
    record_axpby(&e, cmd, residual_set, 1.0f, 1.0f, (uint32_t)COUNT); /* Y = O + X */
    record_barrier(cmd, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    vkEndCommandBuffer(cmd);

    VkFence fence;
    const VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    const VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    if (vkCreateFence(e.device, &fence_info, NULL, &fence) != VK_SUCCESS ||
        vkQueueSubmit(e.queue, 1, &submit, fence) != VK_SUCCESS ||
        vkWaitForFences(e.device, 1, &fence, VK_TRUE, UINT64_MAX) != VK_SUCCESS) {
        fprintf(stderr, "vulkan_engine: submit failed\n");
        goto done;
    }
    vkDestroyFence(e.device, fence, NULL);

    const double err = worst_error(tensor[X], tensor[K], tensor[V], tensor[Y]);
    ok = err <= 1e-5 && validation_messages == 0;
    printf("vulkan_engine: one command buffer (engine pass, xfa causal attention B=%d S=%d H=%d D=%d, engine pass)"
           " on %s: worst relative error %.2e, %d validation message(s): %s\n",
           B, S, H, D, props.deviceName, err, validation_messages, ok ? "ok" : "FAILED");
done:
    xfa_buffer_destroy(&frame);
    xfa_context_destroy(&ctx);
    engine_close(&e);
    return ok ? 0 : 1;
}
