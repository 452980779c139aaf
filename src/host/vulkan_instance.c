/*
 * vulkan_instance.c - the process's Vulkan instance (made once, shared by
 * discovery and by the contexts xfa opens itself), the validation-layer
 * messenger that counts messages, and which physical devices can run xfa.
 */
#include "alloc.h"
#include "vulkan_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t instance_once = PTHREAD_ONCE_INIT;
static VkInstance process_instance = VK_NULL_HANDLE;
static char instance_error[XFA_MESSAGE_SIZE];

static atomic_uint_fast64_t validation_messages;
static pthread_mutex_t first_message_lock = PTHREAD_MUTEX_INITIALIZER;
static char first_message[1024];

static VKAPI_ATTR VkBool32 VKAPI_CALL count_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                    VkDebugUtilsMessageTypeFlagsEXT types,
                                                    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)types;
    (void)user;
    if (!(severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)))
        return VK_FALSE;
    const char *text = data && data->pMessage ? data->pMessage : "(no text)";
    if (atomic_fetch_add(&validation_messages, 1) == 0) {
        pthread_mutex_lock(&first_message_lock);
        snprintf(first_message, sizeof first_message, "%s", text);
        pthread_mutex_unlock(&first_message_lock);
    }
    fprintf(stderr, "xfa vulkan validation: %s\n", text);
    return VK_FALSE;
}

uint64_t xfa_vulkan_validation_message_count(void) { return atomic_load(&validation_messages); }

xfa_status xfa_vk_check_validation(xfa_context *ctx)
{
    const uint64_t n = atomic_load(&validation_messages);
    if (n == 0) return XFA_SUCCESS;
    pthread_mutex_lock(&first_message_lock);
    xfa_status st = xfa_fail(ctx, XFA_ERROR_BACKEND_FAILURE, "the Vulkan validation layer reported %llu message(s); first: %s",
                             (unsigned long long)n, first_message);
    pthread_mutex_unlock(&first_message_lock);
    return st;
}

static bool validation_requested(void)
{
    const char *env = getenv("XFA_VULKAN_VALIDATION");
    return env && *env && strcmp(env, "0") != 0;
}

/* What xfa_vk_query_caps returns when it ran out of memory, told apart from a device that lacks something. */
const char xfa_vk_out_of_host_memory[] = "out of host memory";

static bool layer_present(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return false;
    VkLayerProperties *layers = xfa_calloc(n, sizeof *layers);
    bool found = false;
    if (layers && vkEnumerateInstanceLayerProperties(&n, layers) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = strcmp(layers[i].layerName, name) == 0;
    xfa_free(layers);
    return found;
}

static void make_instance(void)
{
    uint32_t version = 0;
    /* vkEnumerateInstanceVersion is 1.1; a 1.0 loader cannot run the 1.2 shaders anyway. */
    PFN_vkEnumerateInstanceVersion enum_version =
        (PFN_vkEnumerateInstanceVersion)vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkEnumerateInstanceVersion");
    if (!enum_version || enum_version(&version) != VK_SUCCESS || version < VK_API_VERSION_1_2) {
        snprintf(instance_error, sizeof instance_error, "the Vulkan loader is older than 1.2");
        return;
    }
    const bool validate = validation_requested();
    static const char *layer = "VK_LAYER_KHRONOS_validation";
    static const char *debug_ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    if (validate && !layer_present(layer)) {
        snprintf(instance_error, sizeof instance_error,
                 "XFA_VULKAN_VALIDATION is set but %s is not installed (Debian: vulkan-validationlayers)", layer);
        return;
    }
    const VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "xfa",
        .pEngineName = "xfa",
        .engineVersion = XFA_VERSION,
        .apiVersion = VK_API_VERSION_1_2,
    };
    VkDebugUtilsMessengerCreateInfoEXT messenger = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = count_message,
    };
    const VkInstanceCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = validate ? &messenger : NULL, /* also covers instance creation and destruction */
        .pApplicationInfo = &app,
        .enabledLayerCount = validate ? 1 : 0,
        .ppEnabledLayerNames = validate ? &layer : NULL,
        .enabledExtensionCount = validate ? 1 : 0,
        .ppEnabledExtensionNames = validate ? &debug_ext : NULL,
    };
    VkInstance instance;
    VkResult r = vkCreateInstance(&info, NULL, &instance);
    if (r != VK_SUCCESS) {
        snprintf(instance_error, sizeof instance_error, "vkCreateInstance failed: %s", xfa_vk_result_name(r));
        return;
    }
    if (validate) {
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT");
        VkDebugUtilsMessengerEXT handle;
        if (!create || create(instance, &messenger, NULL, &handle) != VK_SUCCESS) {
            snprintf(instance_error, sizeof instance_error, "could not install the validation messenger");
            vkDestroyInstance(instance, NULL);
            return;
        }
    }
    /* Kept for the life of the process: contexts and discovery share it. */
    process_instance = instance;
}

xfa_status xfa_vk_instance(VkInstance *instance, char *msg)
{
    pthread_once(&instance_once, make_instance);
    *instance = process_instance;
    if (process_instance == VK_NULL_HANDLE)
        return xfa_msg(msg, XFA_ERROR_NO_DEVICE, "no Vulkan instance: %s", instance_error);
    return XFA_SUCCESS;
}

static bool has_extension(const VkExtensionProperties *exts, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(exts[i].extensionName, name) == 0) return true;
    return false;
}

/* VK_KHR_cooperative_matrix with a 16x16x16 f16 x f16 -> f32 subgroup shape. */
static bool coopmat_shape_present(VkInstance instance, VkPhysicalDevice device)
{
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)vkGetInstanceProcAddr(
            instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
    if (!get) return false;
    uint32_t n = 0;
    if (get(device, &n, NULL) != VK_SUCCESS || n == 0) return false;
    VkCooperativeMatrixPropertiesKHR *props = xfa_calloc(n, sizeof *props);
    if (!props) return false;
    for (uint32_t i = 0; i < n; i++) props[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
    bool found = false;
    if (get(device, &n, props) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) {
            const VkCooperativeMatrixPropertiesKHR *p = &props[i];
            found = p->MSize == 16 && p->NSize == 16 && p->KSize == 16 && p->AType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
                    p->BType == VK_COMPONENT_TYPE_FLOAT16_KHR && p->CType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
                    p->ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR && p->scope == VK_SCOPE_SUBGROUP_KHR;
        }
    xfa_free(props);
    return found;
}

const char *xfa_vk_query_caps(VkInstance instance, VkPhysicalDevice device, vk_device_caps *caps)
{
    memset(caps, 0, sizeof *caps);
    vkGetPhysicalDeviceProperties(device, &caps->props);
    vkGetPhysicalDeviceMemoryProperties(device, &caps->memory);
    if (caps->props.apiVersion < VK_API_VERSION_1_2) return "the device supports Vulkan < 1.2";

    VkPhysicalDeviceDriverProperties driver = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties subgroup = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
                                                   .pNext = &driver};
    VkPhysicalDeviceProperties2 props2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &subgroup};
    vkGetPhysicalDeviceProperties2(device, &props2);
    caps->subgroup_size = subgroup.subgroupSize;
    snprintf(caps->driver_name, sizeof caps->driver_name, "%.24s %.38s", driver.driverName, driver.driverInfo);
    const VkSubgroupFeatureFlags need_ops = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
    if (!(subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) || (subgroup.supportedOperations & need_ops) != need_ops)
        return "no subgroup shuffle in compute shaders";
    if (caps->subgroup_size == 0 || (caps->subgroup_size & (caps->subgroup_size - 1)))
        return "subgroup size is not a power of two";

    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
    vkGetPhysicalDeviceFeatures2(device, &f2);
    if (!f11.storageBuffer16BitAccess) return "no storageBuffer16BitAccess";

    uint32_t n_ext = 0;
    vkEnumerateDeviceExtensionProperties(device, NULL, &n_ext, NULL);
    VkExtensionProperties *exts = xfa_calloc(n_ext ? n_ext : 1, sizeof *exts);
    if (!exts) return xfa_vk_out_of_host_memory;
    vkEnumerateDeviceExtensionProperties(device, NULL, &n_ext, exts);
    const bool push = has_extension(exts, n_ext, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
    const bool coop = has_extension(exts, n_ext, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    const bool nv_sm = has_extension(exts, n_ext, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
    const bool amd_cores = has_extension(exts, n_ext, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME);
    xfa_free(exts);
    /* Core Vulkan does not count compute units; two vendor extensions do (0: unknown). */
    if (nv_sm || amd_cores) {
        VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
        VkPhysicalDeviceShaderCorePropertiesAMD cores = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
        VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                          .pNext = nv_sm ? (void *)&sm : (void *)&cores};
        vkGetPhysicalDeviceProperties2(device, &p2);
        caps->compute_units = nv_sm ? sm.shaderSMCount
                                    : cores.shaderEngineCount * cores.shaderArraysPerEngineCount *
                                          cores.computeUnitsPerShaderArray;
    }
    if (!push) return "no VK_KHR_push_descriptor";

    uint32_t n_fam = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(device, &n_fam, NULL);
    VkQueueFamilyProperties *fams = xfa_calloc(n_fam ? n_fam : 1, sizeof *fams);
    if (!fams) return xfa_vk_out_of_host_memory;
    vkGetPhysicalDeviceQueueFamilyProperties(device, &n_fam, fams);
    uint32_t family = UINT32_MAX;
    for (uint32_t i = 0; i < n_fam && family == UINT32_MAX; i++)
        if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = i;
    xfa_free(fams);
    if (family == UINT32_MAX) return "no compute queue";
    caps->queue_family = family;

    if (coop) {
        VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
        VkPhysicalDeviceCooperativeMatrixFeaturesKHR fc = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, .pNext = &f12};
        VkPhysicalDeviceFeatures2 g = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &fc};
        vkGetPhysicalDeviceFeatures2(device, &g);
        /* The shader gives each 16-row block one subgroup of >= 16 invocations. */
        caps->coopmat = fc.cooperativeMatrix && f12.shaderFloat16 && f12.vulkanMemoryModel && caps->subgroup_size >= 16 &&
                        coopmat_shape_present(instance, device);
    }
    return NULL;
}

xfa_status xfa_vk_physical_devices(VkPhysicalDevice *devices, int *count, char *msg)
{
    *count = 0;
    VkInstance instance;
    if (xfa_vk_instance(&instance, msg) != XFA_SUCCESS) {
        /* No loader, no driver: that is "no device", not an error - unless validation was asked for. */
        if (validation_requested() && strstr(instance_error, "XFA_VULKAN_VALIDATION"))
            return xfa_msg(msg, XFA_ERROR_BACKEND_FAILURE, "%s", instance_error);
        return XFA_SUCCESS;
    }
    uint32_t n = 0;
    VkResult r = vkEnumeratePhysicalDevices(instance, &n, NULL);
    if (r != VK_SUCCESS || n == 0) return XFA_SUCCESS;
    VkPhysicalDevice *all = xfa_calloc(n, sizeof *all);
    if (!all) return xfa_msg(msg, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating the device list");
    r = vkEnumeratePhysicalDevices(instance, &n, all);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) n = 0;
    for (uint32_t i = 0; i < n; i++) {
        vk_device_caps caps;
        const char *unfit = xfa_vk_query_caps(instance, all[i], &caps);
        if (unfit == xfa_vk_out_of_host_memory) { /* not "this device lacks something" */
            xfa_free(all);
            *count = 0;
            return xfa_msg(msg, XFA_ERROR_OUT_OF_HOST_MEMORY, "querying the Vulkan devices: out of host memory");
        }
        if (unfit) continue;
        if (devices) devices[*count] = all[i];
        (*count)++;
    }
    xfa_free(all);
    return XFA_SUCCESS;
}

static const char *vendor_name(uint32_t id)
{
    switch (id) {
    case 0x10de: return "NVIDIA";
    case 0x1002: return "AMD";
    case 0x8086: return "Intel";
    case 0x13b5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x10005: return "Mesa";
    default: return "unknown";
    }
}

void xfa_vk_fill_info(const vk_device_caps *caps, bool coopmat, xfa_device_info *info)
{
    const VkPhysicalDeviceProperties *p = &caps->props;
    snprintf(info->name, sizeof info->name, "%.127s", p->deviceName);
    snprintf(info->vendor, sizeof info->vendor, "%s", vendor_name(p->vendorID));
    snprintf(info->driver, sizeof info->driver, "%.40s (Vulkan %u.%u.%u)", caps->driver_name,
             VK_API_VERSION_MAJOR(p->apiVersion), VK_API_VERSION_MINOR(p->apiVersion),
             VK_API_VERSION_PATCH(p->apiVersion));
    snprintf(info->path, sizeof info->path, "%s", coopmat ? "coopmat" : "scalar");
    info->local_mem_bytes = p->limits.maxComputeSharedMemorySize;
    info->global_mem_bytes = 0;
    for (uint32_t i = 0; i < caps->memory.memoryHeapCount; i++)
        if (caps->memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
            info->global_mem_bytes += caps->memory.memoryHeaps[i].size;
    info->subgroup_size = caps->subgroup_size;
    info->max_workgroup_size = p->limits.maxComputeWorkGroupInvocations;
    info->compute_units = caps->compute_units; /* 0 when the device does not say */
    info->dtypes = (1u << XFA_DTYPE_F32) | (1u << XFA_DTYPE_F16) | (1u << XFA_DTYPE_BF16);
    info->features = XFA_FEATURE_CAUSAL | XFA_FEATURE_LSE | XFA_FEATURE_GQA | XFA_FEATURE_SEQLEN_QK_DIFFER |
                     XFA_FEATURE_ENGINE_HANDLES | XFA_FEATURE_WINDOW | XFA_FEATURE_SOFTCAP | XFA_FEATURE_ALIBI |
                     XFA_FEATURE_BIAS | XFA_FEATURE_VARLEN | XFA_FEATURE_DECODE | XFA_FEATURE_PAGED_KV |
                     XFA_FEATURE_MERGE | XFA_FEATURE_BACKWARD;
}
