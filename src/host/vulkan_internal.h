/*
 * vulkan_internal.h - what the Vulkan backend's files share: the context and
 * buffer state, the process instance, command submission and the dispatch.
 */
#ifndef XFA_VULKAN_INTERNAL_H
#define XFA_VULKAN_INTERNAL_H

#include "internal.h"
#include "plan.h"
#include "xfa_vulkan.h"

#include <stdbool.h>

#ifndef VK_KHR_cooperative_matrix
/* Headers older than 1.3.255 (Debian 12 ships 1.3.239) lack VK_KHR_cooperative_matrix: the
 * few names xfa uses, as the Vulkan registry defines them (extension number 507). */
#define VK_KHR_cooperative_matrix 1
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR ((VkStructureType)1000506000)
#define VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR ((VkStructureType)1000506001)
typedef enum VkComponentTypeKHR {
    VK_COMPONENT_TYPE_FLOAT16_KHR = 0,
    VK_COMPONENT_TYPE_FLOAT32_KHR = 1,
    VK_COMPONENT_TYPE_MAX_ENUM_KHR = 0x7fffffff
} VkComponentTypeKHR;
typedef enum VkScopeKHR { VK_SCOPE_SUBGROUP_KHR = 3, VK_SCOPE_MAX_ENUM_KHR = 0x7fffffff } VkScopeKHR;
typedef struct VkCooperativeMatrixPropertiesKHR {
    VkStructureType sType;
    void *pNext;
    uint32_t MSize, NSize, KSize;
    VkComponentTypeKHR AType, BType, CType, ResultType;
    VkBool32 saturatingAccumulation;
    VkScopeKHR scope;
} VkCooperativeMatrixPropertiesKHR;
typedef struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrix;
    VkBool32 cooperativeMatrixRobustBufferAccess;
} VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
typedef VkResult(VKAPI_PTR *PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(
    VkPhysicalDevice physicalDevice, uint32_t *pPropertyCount, VkCooperativeMatrixPropertiesKHR *pProperties);
#endif

/* One compiled pipeline: the specialization it was made for. */
typedef struct vk_pipeline_key {
    uint32_t path;                /* VK_PATH_* */
    uint32_t head_dim, Br, Bc, threads_per_row, dtype;
    uint32_t causal, has_lse;
    uint32_t window, softcap, alibi, bias, varlen; /* specialization ids 9..13 of both shaders */
    uint32_t vec4;                                 /* id 14: q, k, v loaded 4 elements at a time (scalar path),
                                                    * k, v 8 at a time (coopmat path) */
} vk_pipeline_key;

enum { VK_PATH_SCALAR = 0, VK_PATH_COOPMAT = 1 };

/* Slots of the context's extra-arguments buffer (what does not fit the push constants),
 * written with vkCmdUpdateBuffer; each slot is aligned for any storage-buffer offset. */
#define VK_EXTRA_SLOTS 256u
#define VK_EXTRA_SLOT_BYTES 256u
/* Descriptor bindings of the one set layout every xfa pipeline uses. */
#define VK_BINDINGS 13u

typedef struct vk_pipeline_entry {
    vk_pipeline_key key;
    VkPipeline pipeline;
} vk_pipeline_entry;

/* The shaders besides the forward passes, each made into pipelines by xfa_vk_pipeline_spec. */
enum { VK_SHADER_DECODE = 0, VK_SHADER_APPEND = 1, VK_SHADER_MERGE = 2, VK_SHADER_BACKWARD = 3, VK_SHADER_COUNT_ };
#define VK_SPEC_MAX 16

/* A pipeline of one of those shaders: its specialization constants 0 .. n-1 (local size included). */
typedef struct vk_spec_entry {
    uint32_t shader, n, values[VK_SPEC_MAX];
    VkPipeline pipeline;
} vk_spec_entry;

/* What the device offers that decides paths and plans. */
typedef struct vk_device_caps {
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties memory;
    uint32_t subgroup_size;
    uint32_t queue_family;        /* a compute-capable family */
    uint32_t compute_units;       /* SMs / CUs where VK_NV_shader_sm_builtins or VK_AMD_shader_core_properties say; else 0 */
    bool coopmat;                 /* VK_KHR_cooperative_matrix with f16 x f16 -> f32 16x16x16 */
    char driver_name[64];
} vk_device_caps;

typedef struct vk_context {
    VkInstance instance;
    VkPhysicalDevice physical;
    VkDevice device;
    VkQueue queue;
    bool owns_device;             /* false: the caller's device (xfa_vulkan.h) */
    bool owns_cache;
    vk_device_caps caps;
    bool use_coopmat;
    void (*lock_queue)(void *);
    void (*unlock_queue)(void *);
    void *user;
    PFN_vkCmdPushDescriptorSetKHR push_descriptors;

    VkDescriptorSetLayout set_layout;
    VkPipelineLayout pipeline_layout;
    VkShaderModule scalar_module, coopmat_module;
    VkPipelineCache cache;
    vk_pipeline_entry *pipelines;
    size_t n_pipelines, cap_pipelines;
    VkShaderModule modules[VK_SHADER_COUNT_];
    vk_spec_entry *spec_pipelines;
    size_t n_spec, cap_spec;

    /* Device scratch for decode partials and merges, grown on demand (after the fence). */
    VkBuffer scratch;
    VkDeviceMemory scratch_memory;
    VkDeviceSize scratch_size;

    /* Simple path: one command buffer, reused after its fence signals. */
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
    bool pending;                 /* cmd submitted, fence not yet waited on */

    /* Extra arguments: VK_EXTRA_SLOTS slots used in turn (device-local). */
    VkBuffer extra;
    VkDeviceMemory extra_memory;
    uint32_t extra_next;

    /* Host-visible staging for uploads and downloads. */
    VkBuffer staging;
    VkDeviceMemory staging_memory;
    void *staging_map;
    VkDeviceSize staging_size;
} vk_context;

typedef struct vk_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;        /* VK_NULL_HANDLE when wrapping a caller's buffer */
} vk_buffer;

/* vulkan_instance.c: the process's instance (validation per XFA_VULKAN_VALIDATION), eligible devices. */
xfa_status xfa_vk_instance(VkInstance *instance, char *msg);
/* Eligible physical devices of the process instance (count only when devices is NULL). */
xfa_status xfa_vk_physical_devices(VkPhysicalDevice *devices, int *count, char *msg);
/* Why `device` cannot run xfa, or NULL when it can; fills caps. */
const char *xfa_vk_query_caps(VkInstance instance, VkPhysicalDevice device, vk_device_caps *caps);
extern const char xfa_vk_out_of_host_memory[];
void xfa_vk_fill_info(const vk_device_caps *caps, bool coopmat, xfa_device_info *info);
/* Fails (with the first message) once the validation layer has said anything. */
xfa_status xfa_vk_check_validation(xfa_context *ctx);

/* vulkan_context.c */
xfa_status xfa_vk_context_init(xfa_context *ctx, vk_context *vk);  /* after device/queue are set */
void xfa_vk_context_release(vk_context *vk);
/* Starts recording the context's command buffer (waits for its previous use). */
xfa_status xfa_vk_begin(xfa_context *ctx);
/* Ends and submits it; waits for it when `wait`. */
xfa_status xfa_vk_submit(xfa_context *ctx, bool wait);
xfa_status xfa_vk_wait(xfa_context *ctx);
/* "vkFoo failed: VK_ERROR_..." as XFA_ERROR_BACKEND_FAILURE (or the memory statuses). */
xfa_status xfa_vk_fail(xfa_context *ctx, VkResult result, const char *what);
const char *xfa_vk_result_name(VkResult result);

/* vulkan_memory.c */
xfa_status xfa_vk_buffer_create(xfa_context *ctx, xfa_buffer *buf);
void xfa_vk_buffer_destroy(xfa_context *ctx, xfa_buffer *buf);
xfa_status xfa_vk_upload(xfa_context *ctx, xfa_buffer *buf, size_t offset, const void *src, size_t bytes);
xfa_status xfa_vk_download(xfa_context *ctx, xfa_buffer *buf, size_t offset, void *dst, size_t bytes);
void xfa_vk_staging_release(vk_context *vk);
/* Device scratch of at least `bytes`; call after xfa_vk_begin (the old buffer is then idle). */
/* The caller's scratch (params.scratch at `offset`) as a VkBuffer and the byte where it starts,
 * which the device's minStorageBufferOffsetAlignment must divide (XFA_ERROR_MISALIGNED if not). */
xfa_status xfa_vk_caller_scratch(xfa_context *ctx, const xfa_buffer *scratch, size_t offset, VkBuffer *buffer,
                                 VkDeviceSize *start);
xfa_status xfa_vk_ensure_scratch(xfa_context *ctx, VkDeviceSize bytes);
void xfa_vk_scratch_release(vk_context *vk);
/* A device-local storage buffer (also a transfer source and destination). */
xfa_status xfa_vk_device_buffer(xfa_context *ctx, VkDeviceSize size, VkBuffer *buffer, VkDeviceMemory *memory);

/* vulkan_pipeline.c */
xfa_status xfa_vk_pipelines_init(xfa_context *ctx);
void xfa_vk_pipelines_release(vk_context *vk);
xfa_status xfa_vk_plan(xfa_context *ctx, uint32_t head_dim, xfa_dtype dtype, xfa_plan *plan);
xfa_status xfa_vk_plan_check(xfa_context *ctx, xfa_plan *plan);
/* The pipeline for a validated call, made (and cached) on first use. */
xfa_status xfa_vk_pipeline_get(xfa_context *ctx, const xfa_forward_args *args, bool vec4, bool vec8, VkPipeline *out);
uint32_t xfa_vk_threads_per_row(const vk_context *vk);
/* The scalar path's plan (and its row multiple: whole subgroups per work-group), whatever path f16 takes. */
xfa_status xfa_vk_scalar_plan(xfa_context *ctx, uint32_t head_dim, xfa_dtype dtype, xfa_plan *plan,
                              uint32_t *br_multiple);
/* The pipeline of `shader` specialised with values[0 .. n-1], made (and cached) on first use. */
xfa_status xfa_vk_pipeline_spec(xfa_context *ctx, uint32_t shader, const uint32_t *values, uint32_t n,
                                VkPipeline *out);

/* vulkan_dispatch.c: records one forward call into cmd. */
xfa_status xfa_vk_record_forward(xfa_context *ctx, VkCommandBuffer cmd, const xfa_forward_args *args);
/* Whether a call uses a feature beyond causal masking (window, softcap, ALiBi, bias, varlen). */
bool xfa_vk_has_features(const xfa_forward_args *args);
/* A storage-buffer descriptor for a view: its native buffer from the aligned-down start,
 * and the element index where the view begins in that range. */
xfa_status xfa_vk_describe(xfa_context *ctx, const char *name, const xfa_tensor *t, VkDescriptorBufferInfo *info,
                           uint32_t *base);
/* Whether a view given as base + 4 element strides can be read 4 elements per load:
 * unit head-dim stride, every row start a multiple of 4 elements. */
bool xfa_vk_vec4_ok(uint32_t base, const uint32_t stride[4]);
/* The same for n-element loads (unit d stride; base and other strides multiples of n). */
bool xfa_vk_vec_ok(uint32_t base, const uint32_t stride[4], uint32_t n);
/* Element strides of the first n dimensions (0 for a dimension of size 1). */
void xfa_vk_strides(const xfa_tensor *t, uint32_t *out, int n);
/* A view's descriptor, then its base and four strides into out[0..4]. */
xfa_status xfa_vk_view_args(xfa_context *ctx, const char *name, const xfa_tensor *t, VkDescriptorBufferInfo *info,
                            uint32_t out[5]);
/* Every binding pointed at the extra-arguments buffer, for those a dispatch does not use. */
void xfa_vk_unused_bindings(const vk_context *vk, VkDescriptorBufferInfo infos[VK_BINDINGS]);
void xfa_vk_bind_and_dispatch(vk_context *vk, VkCommandBuffer cmd, VkPipeline pipeline,
                              const VkDescriptorBufferInfo infos[VK_BINDINGS], uint32_t gx, uint32_t gy, uint32_t gz);
/* Shader writes before it -> shader reads and writes after it. */
void xfa_vk_compute_barrier(VkCommandBuffer cmd);
/* Records `data` into the next extra-arguments slot (with the barriers around it) and
 * describes that slot. */
xfa_status xfa_vk_write_extra(xfa_context *ctx, VkCommandBuffer cmd, const void *data, size_t bytes,
                              VkDescriptorBufferInfo *info);

/* vulkan_decode.c: xfa_attention_decode and xfa_merge_partials (simple path). */
xfa_status xfa_vk_decode(xfa_context *ctx, const xfa_decode_args *args);
xfa_status xfa_vk_merge(xfa_context *ctx, const xfa_merge_args *args);
/* vulkan_backward.c: xfa_attention_backward (simple path). */
xfa_status xfa_vk_backward(xfa_context *ctx, const xfa_backward_args *args);

extern const xfa_backend_ops xfa_vulkan_backend;

#endif /* XFA_VULKAN_INTERNAL_H */
