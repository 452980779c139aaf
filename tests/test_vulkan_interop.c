/*
 * test_vulkan_interop.c - xfa_vulkan.h on a device the test makes itself, as
 * an engine would: a context from our VkInstance/VkDevice/queue, our VkBuffers
 * wrapped at an offset, and the dispatch recorded into our command buffer
 * between our barriers. Validation layer on when XFA_VULKAN_VALIDATION=1 (set by
 * CTest); any message fails the suite.
 */
#include "attention_case.h"
#include "check_run.h"
#include "reference.h"
#include "xfa_vulkan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static VkInstance instance;
static VkPhysicalDevice physical;
static VkDevice device;
static VkQueue queue;
static uint32_t family;
static VkDebugUtilsMessengerEXT messenger;
static int messages; /* validation warnings and errors on our instance */
static xfa_context *ctx;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)types;
    (void)user;
    if (severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)) {
        messages++;
        fprintf(stderr, "validation: %s\n", data->pMessage);
    }
    return VK_FALSE;
}

static int validation_on(void)
{
    const char *env = getenv("XFA_VULKAN_VALIDATION");
    return env && *env && strcmp(env, "0") != 0;
}

/* The engine's side: instance (+ validation), a device with what xfa_vulkan.h asks for. 0 = no device. */
static int engine_open(void)
{
    const VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_2};
    const char *layer = "VK_LAYER_KHRONOS_validation", *ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    VkDebugUtilsMessengerCreateInfoEXT mci = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_message,
    };
    const int validate = validation_on();
    const VkInstanceCreateInfo ici = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = validate ? &mci : NULL,
        .pApplicationInfo = &app,
        .enabledLayerCount = validate ? 1 : 0,
        .ppEnabledLayerNames = &layer,
        .enabledExtensionCount = validate ? 1 : 0,
        .ppEnabledExtensionNames = &ext,
    };
    if (vkCreateInstance(&ici, NULL, &instance) != VK_SUCCESS) return 0;
    if (validate) {
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT");
        if (!create || create(instance, &mci, NULL, &messenger) != VK_SUCCESS) return 0;
    }
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(instance, &n, NULL);
    if (n == 0) return 0;
    VkPhysicalDevice devices[16];
    if (n > 16) n = 16;
    vkEnumeratePhysicalDevices(instance, &n, devices);
    physical = devices[0];
    uint32_t nf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &nf, NULL);
    VkQueueFamilyProperties fams[16];
    if (nf > 16) nf = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &nf, fams);
    family = UINT32_MAX;
    for (uint32_t i = 0; i < nf && family == UINT32_MAX; i++)
        if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = i;
    if (family == UINT32_MAX) return 0;
    const float priority = 1.0f;
    const VkDeviceQueueCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = family, .queueCount = 1,
        .pQueuePriorities = &priority};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .storageBuffer16BitAccess = VK_TRUE};
    const char *dev_ext = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
    const VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &f11, .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci, .enabledExtensionCount = 1, .ppEnabledExtensionNames = &dev_ext};
    if (vkCreateDevice(physical, &dci, NULL, &device) != VK_SUCCESS) return 0;
    vkGetDeviceQueue(device, family, 0, &queue);
    return 1;
}

static void engine_close(void)
{
    if (device) vkDestroyDevice(device, NULL);
    if (messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy =
            (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT");
        destroy(instance, messenger, NULL);
    }
    if (instance) vkDestroyInstance(instance, NULL);
}

/* An engine buffer with its own memory (host-visible where possible, as a small engine might). */
typedef struct engine_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
} engine_buffer;

static engine_buffer engine_buffer_make(VkDeviceSize size)
{
    engine_buffer b = {0};
    const VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    ck_assert_int_eq(vkCreateBuffer(device, &bci, NULL, &b.buffer), VK_SUCCESS);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device, b.buffer, &req);
    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(physical, &mem);
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < mem.memoryTypeCount && type == UINT32_MAX; i++)
        if (req.memoryTypeBits & (1u << i)) type = i;
    const VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                                      .memoryTypeIndex = type};
    ck_assert_int_eq(vkAllocateMemory(device, &mai, NULL, &b.memory), VK_SUCCESS);
    ck_assert_int_eq(vkBindBufferMemory(device, b.buffer, b.memory, 0), VK_SUCCESS);
    return b;
}

static void engine_buffer_free(engine_buffer *b)
{
    vkDestroyBuffer(device, b->buffer, NULL);
    vkFreeMemory(device, b->memory, NULL);
}

/* The shared forward check, on the context made from our device (xfa allocates the buffers). */
START_TEST(test_shared_cases_on_engine_device)
{
    xfa_test_case tc = xfa_test_case_make(1, 37 + _i, 41, 4, 2, 64 * (1 + _i % 2), (xfa_dtype)(_i % 3), _i % 2,
                                          9100 + (uint64_t)_i);
    const xfa_test_result r = xfa_test_run_case(ctx, &tc);
    char what[256];
    xfa_test_case_describe(&tc, what, sizeof what);
    ck_assert_msg(r.status == XFA_SUCCESS && r.passed, "%s: %s", what, r.message);
}
END_TEST

static void barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkAccessFlags src, VkPipelineStageFlags dst_stage,
                    VkAccessFlags dst)
{
    const VkMemoryBarrier b = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = src, .dstAccessMask = dst};
    vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &b, 0, NULL, 0, NULL);
}

/* Our VkBuffer, wrapped at an offset; q/k/v written by xfa's upload, the dispatch recorded into
 * our command buffer (causal off/on; then with a window and softcap, whose values xfa records
 * into our command buffer too) with our barriers. */
START_TEST(test_record_into_engine_command_buffer)
{
    const int64_t B = 2, Sq = 29, Sk = 45, Hq = 4, Hkv = 2, D = 96;
    const int causal = _i % 2, features = _i / 2;
    const size_t q_elems = (size_t)(B * Sq * Hq * D), kv_elems = (size_t)(B * Sk * Hkv * D);
    const size_t q_bytes = q_elems * 4, kv_bytes = kv_elems * 4, lse_bytes = (size_t)(B * Hq * Sq) * 4;
    const size_t wrap_offset = 256; /* xfa's view starts inside our allocation */
    const size_t total = q_bytes * 2 + kv_bytes * 2 + lse_bytes;
    engine_buffer eb = engine_buffer_make(wrap_offset + total);
    xfa_buffer *buf = NULL;
    ck_assert_int_eq(xfa_vulkan_buffer_wrap(ctx, eb.buffer, wrap_offset, total, &buf), XFA_SUCCESS);
    VkBuffer handle;
    VkDeviceSize off;
    ck_assert_int_eq(xfa_vulkan_buffer_handle(buf, &handle, &off), XFA_SUCCESS);
    ck_assert(handle == eb.buffer && off == wrap_offset);

    float *host = malloc(total);
    uint64_t rng = 77 + (uint64_t)_i;
    for (size_t i = 0; i < q_elems + 2 * kv_elems; i++) host[i] = (float)xfa_test_rand_normal(&rng);
    ck_assert_int_eq(xfa_buffer_upload(buf, 0, host, q_bytes + 2 * kv_bytes), XFA_SUCCESS);

    const xfa_tensor q = xfa_tensor_bshd(buf, 0, XFA_DTYPE_F32, B, Sq, Hq, D);
    const xfa_tensor k = xfa_tensor_bhsd(buf, q_bytes, XFA_DTYPE_F32, B, Sk, Hkv, D);
    const xfa_tensor v = xfa_tensor_bshd(buf, q_bytes + kv_bytes, XFA_DTYPE_F32, B, Sk, Hkv, D);
    const xfa_tensor o = xfa_tensor_bshd(buf, q_bytes + 2 * kv_bytes, XFA_DTYPE_F32, B, Sq, Hq, D);
    const xfa_tensor lse = xfa_tensor_lse(buf, 2 * q_bytes + 2 * kv_bytes, B, Sq, Hq);

    VkCommandPool pool;
    const VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = family};
    ck_assert_int_eq(vkCreateCommandPool(device, &pci, NULL, &pool), VK_SUCCESS);
    VkCommandBuffer cmd;
    const VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                             .commandPool = pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                             .commandBufferCount = 1};
    ck_assert_int_eq(vkAllocateCommandBuffers(device, &cai, &cmd), VK_SUCCESS);
    const VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    ck_assert_int_eq(vkBeginCommandBuffer(cmd, &begin), VK_SUCCESS);
    /* before: the upload (a transfer on xfa's submission, finished) -> our compute */
    barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.causal = causal;
    if (features) {
        params.window_left = 9;
        params.softcap = 4.0f;
    }
    ck_assert_msg(xfa_vulkan_record_forward(ctx, cmd, &params, &q, &k, &v, &o, &lse) == XFA_SUCCESS, "%s",
                  xfa_context_last_error(ctx));
    /* after: compute writes -> transfer (xfa's download copies) */
    barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_TRANSFER_READ_BIT);
    ck_assert_int_eq(vkEndCommandBuffer(cmd), VK_SUCCESS);
    VkFence fence;
    const VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    ck_assert_int_eq(vkCreateFence(device, &fci, NULL, &fence), VK_SUCCESS);
    const VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    ck_assert_int_eq(vkQueueSubmit(queue, 1, &si, fence), VK_SUCCESS);
    ck_assert_int_eq(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX), VK_SUCCESS);

    float *out = malloc(q_bytes + lse_bytes);
    ck_assert_int_eq(xfa_buffer_download(buf, q_bytes + 2 * kv_bytes, out, q_bytes + lse_bytes), XFA_SUCCESS);

    xfa_reference_problem p = xfa_reference_problem_make(xfa_host_view_of(&q, host), xfa_host_view_of(&k, host),
                                                         xfa_host_view_of(&v, host), 1.0 / sqrt((double)D), causal);
    p.window_left = params.window_left;
    p.softcap = params.softcap;
    double *ref_o = malloc(q_elems * sizeof *ref_o), *ref_lse = malloc((size_t)(B * Hq * Sq) * sizeof *ref_lse);
    ck_assert_int_eq(xfa_reference_forward(&p, ref_o, ref_lse), XFA_SUCCESS);
    double max_ref = 0, max_err = 0, lse_err = 0;
    for (size_t i = 0; i < q_elems; i++) {
        max_ref = fmax(max_ref, fabs(ref_o[i]));
        max_err = fmax(max_err, fabs(ref_o[i] - out[i])); /* o is BSHD like the reference */
    }
    for (int64_t i = 0; i < B * Hq * Sq; i++)
        if (isfinite(ref_lse[i])) lse_err = fmax(lse_err, fabs(ref_lse[i] - out[q_elems + (size_t)i]));
        else ck_assert(isinf(out[q_elems + (size_t)i]) && out[q_elems + (size_t)i] < 0);
    ck_assert_msg(max_err <= 1e-5 * fmax(max_ref, 1e-30), "O error %g (max |ref| %g)", max_err, max_ref);
    ck_assert_msg(lse_err <= 1e-4, "LSE error %g", lse_err);

    vkDestroyFence(device, fence, NULL);
    vkDestroyCommandPool(device, pool, NULL);
    xfa_buffer_destroy(&buf);
    ck_assert_ptr_null(buf);
    engine_buffer_free(&eb);
    free(host);
    free(out);
    free(ref_o);
    free(ref_lse);
}
END_TEST

/* Clear statuses for what a caller can get wrong. */
START_TEST(test_errors)
{
    xfa_context *out = (xfa_context *)1;
    xfa_vulkan_context_params params;
    memset(&params, 0, sizeof params);
    ck_assert_int_eq(xfa_vulkan_context_create(&params, &out), XFA_ERROR_NULL_POINTER);
    ck_assert_ptr_null(out);
    xfa_buffer *buf = NULL;
    ck_assert_int_eq(xfa_vulkan_buffer_wrap(ctx, VK_NULL_HANDLE, 0, 16, &buf), XFA_ERROR_NULL_POINTER);
    xfa_context *cpu = NULL;
    ck_assert_int_eq(xfa_context_create(XFA_BACKEND_CPU, 0, &cpu), XFA_SUCCESS);
    engine_buffer eb = engine_buffer_make(4096);
    ck_assert_int_eq(xfa_vulkan_buffer_wrap(cpu, eb.buffer, 0, 4096, &buf), XFA_ERROR_WRONG_CONTEXT);
    ck_assert_int_eq(xfa_vulkan_buffer_wrap(ctx, eb.buffer, 0, 4096, &buf), XFA_SUCCESS);
    const xfa_tensor t = xfa_tensor_bshd(buf, 0, XFA_DTYPE_F32, 1, 2, 1, 64);
    ck_assert_int_eq(xfa_vulkan_record_forward(ctx, VK_NULL_HANDLE, NULL, &t, &t, &t, &t, NULL), XFA_ERROR_NULL_POINTER);
    /* A plan larger than the device's shared memory is refused before anything is recorded. */
    xfa_plan plan;
    ck_assert_int_eq(xfa_plan_get(ctx, 64, XFA_DTYPE_F32, &plan), XFA_SUCCESS);
    plan.Bc = 4096;
    xfa_attention_params ap = XFA_ATTENTION_PARAMS_DEFAULT;
    ap.plan = &plan;
    const xfa_tensor o = xfa_tensor_bshd(buf, 2048, XFA_DTYPE_F32, 1, 2, 1, 64);
    VkCommandBuffer fake = (VkCommandBuffer)(uintptr_t)1; /* never touched: the plan fails first */
    ck_assert_int_eq(xfa_vulkan_record_forward(ctx, fake, &ap, &t, &t, &t, &o, NULL), XFA_ERROR_INVALID_PLAN);
    xfa_buffer_destroy(&buf);
    engine_buffer_free(&eb);
    xfa_context_destroy(&cpu);
}
END_TEST

/* A caller device made without VK_KHR_push_descriptor: a clear status, no crash. */
START_TEST(test_device_without_push_descriptors)
{
    const float priority = 1.0f;
    const VkDeviceQueueCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = family, .queueCount = 1,
        .pQueuePriorities = &priority};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .storageBuffer16BitAccess = VK_TRUE};
    const VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &f11,
                                    .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci};
    VkDevice bare;
    ck_assert_int_eq(vkCreateDevice(physical, &dci, NULL, &bare), VK_SUCCESS);
    VkQueue bare_queue;
    vkGetDeviceQueue(bare, family, 0, &bare_queue);
    xfa_vulkan_context_params params;
    memset(&params, 0, sizeof params);
    params.instance = instance;
    params.physical_device = physical;
    params.device = bare;
    params.queue = bare_queue;
    params.queue_family = family;
    xfa_context *c = NULL;
    ck_assert_int_eq(xfa_vulkan_context_create(&params, &c), XFA_ERROR_UNSUPPORTED_FEATURE);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(xfa_last_error(), "VK_KHR_push_descriptor"));
    vkDestroyDevice(bare, NULL);
}
END_TEST

int main(void)
{
    if (!engine_open()) {
        printf("SKIP: no Vulkan device for the engine side\n");
        engine_close();
        return 77;
    }
    xfa_vulkan_context_params params;
    memset(&params, 0, sizeof params);
    params.instance = instance;
    params.physical_device = physical;
    params.device = device;
    params.queue = queue;
    params.queue_family = family;
    if (xfa_vulkan_context_create(&params, &ctx) != XFA_SUCCESS) {
        fprintf(stderr, "xfa_vulkan_context_create: %s\n", xfa_last_error());
        engine_close();
        return 1;
    }
    xfa_device_info info;
    xfa_context_get_info(ctx, &info);
    printf("engine device %s, path %s, subgroup %u, validation %s\n", info.name, info.path, info.subgroup_size,
           validation_on() ? "on" : "off");
    Suite *s = suite_create("vulkan_interop");
    TCase *tc = tcase_create("interop");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_shared_cases_on_engine_device, 0, 6);
    tcase_add_loop_test(tc, test_record_into_engine_command_buffer, 0, 4);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_device_without_push_descriptors);
    suite_add_tcase(s, tc);
    int rc = xfa_check_run(s, 0);
    xfa_context_destroy(&ctx);
    engine_close();
    if (messages > 0 || xfa_vulkan_validation_message_count() > 0) {
        fprintf(stderr, "FAIL: %d validation message(s) on the engine's instance, %llu on xfa's\n", messages,
                (unsigned long long)xfa_vulkan_validation_message_count());
        rc = EXIT_FAILURE;
    }
    return rc;
}
