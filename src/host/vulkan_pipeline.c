/*
 * vulkan_pipeline.c - the tile plan of each shader path, the shader modules
 * (SPIR-V embedded at build time), and compute pipelines specialised per plan
 * and made once per context (through a VkPipelineCache).
 */
#include "alloc.h"
#include "vulkan_internal.h"
#include "vulkan_shaders.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Push constants: must match `Args` in shaders/flash_forward.comp word for word. */
#define VK_PUSH_WORDS 29

/* Invocations sharing one query row in the scalar shader: a power of two that fits a
 * subgroup and divides D/4 for every head dim (D is a multiple of 32). */
uint32_t xfa_vk_threads_per_row(const vk_context *vk)
{
    const uint32_t sg = vk->caps.subgroup_size;
    return sg < 8 ? sg : 8;
}

/* What flash_forward.comp keeps in shared memory: f32 Q, K and V rows padded by
 * PAD floats, and the Br x Bc P tile; m_i, l_i and acc are in registers. */
static xfa_tile_layout scalar_layout(const vk_context *vk)
{
    const uint32_t T = xfa_vk_threads_per_row(vk);
    const uint32_t sg = vk->caps.subgroup_size;
    const xfa_tile_layout layout = {
        .path = "scalar",
        .q_elem_bytes = 4,
        .kv_elem_bytes = 4,
        .s_elem_bytes = 4,
        .o_elem_bytes = 0,
        .row_pad = 4, /* keeps rows 16-byte aligned for vec4 and staggers banks */
        .stages = 1,
        .row_state_bytes = 0,
        .br_multiple = sg > T ? sg / T : 1, /* whole subgroups per work-group */
        .bc_multiple = 1,
        .br_max = 64,
        .bc_max = 128,
        .threads_per_row = T,
    };
    return layout;
}

/* What flash_forward_coopmat.comp keeps in shared memory: f16 K and V rows padded by
 * PAD halves (Q passes through the same space, so Br <= 2 Bc), the S tile in f32 and
 * the P tile in f16, and one float per row; Q and O live in matrix registers. */
static xfa_tile_layout coopmat_layout(const vk_context *vk)
{
    const xfa_tile_layout layout = {
        .path = "coopmat",
        .q_elem_bytes = 0,
        .kv_elem_bytes = 2,
        .s_elem_bytes = 4 + 2,
        .o_elem_bytes = 0,
        .row_pad = 8,
        .stages = 1,
        .row_state_bytes = 4,
        .br_multiple = 16, /* one subgroup per 16 rows */
        .bc_multiple = 16,
        .br_max = 128,
        .bc_max = 128,
        .threads_per_row = vk->caps.subgroup_size / 16,
    };
    return layout;
}

/* f16 calls take the matrix path when the context runs it; everything else is scalar. */
static bool uses_coopmat(const vk_context *vk, xfa_dtype dtype)
{
    return vk->use_coopmat && dtype == XFA_DTYPE_F16;
}

static xfa_tile_layout layout_for(const vk_context *vk, xfa_dtype dtype)
{
    return uses_coopmat(vk, dtype) ? coopmat_layout(vk) : scalar_layout(vk);
}

static xfa_plan_limits limits(const vk_context *vk)
{
    const xfa_plan_limits lim = {
        .local_mem_bytes = vk->caps.props.limits.maxComputeSharedMemorySize,
        .max_workgroup_size = vk->caps.props.limits.maxComputeWorkGroupInvocations,
        .subgroup_size = vk->caps.subgroup_size,
    };
    return lim;
}

xfa_status xfa_vk_plan(xfa_context *ctx, uint32_t head_dim, xfa_dtype dtype, xfa_plan *plan)
{
    const vk_context *vk = ctx->impl;
    char msg[XFA_MESSAGE_SIZE];
    const xfa_plan_limits lim = limits(vk);
    const xfa_tile_layout layout = layout_for(vk, dtype);
    xfa_status st = xfa_plan_make(&lim, &layout, head_dim, dtype, plan, msg);
    if (st) return xfa_fail(ctx, st, "%s", msg);
    /* The work-group size limits per dimension too. */
    if (plan->workgroup_size > vk->caps.props.limits.maxComputeWorkGroupSize[0])
        return xfa_fail(ctx, XFA_ERROR_LOCAL_MEMORY_TOO_SMALL, "work-group of %u exceeds maxComputeWorkGroupSize[0] %u",
                        plan->workgroup_size, vk->caps.props.limits.maxComputeWorkGroupSize[0]);
    return XFA_SUCCESS;
}

xfa_status xfa_vk_plan_check(xfa_context *ctx, xfa_plan *plan)
{
    const vk_context *vk = ctx->impl;
    char msg[XFA_MESSAGE_SIZE];
    const xfa_plan_limits lim = limits(vk);
    const xfa_tile_layout layout = layout_for(vk, plan->dtype);
    xfa_status st = xfa_plan_fit(&lim, &layout, plan, msg);
    if (st) return xfa_fail(ctx, st, "%s", msg);
    if (uses_coopmat(vk, plan->dtype) && plan->Br > 2 * plan->Bc)
        return xfa_fail(ctx, XFA_ERROR_INVALID_PLAN, "coopmat plan Br=%u Bc=%u: Q passes through the K/V tile, so Br <= 2 Bc",
                        plan->Br, plan->Bc);
    if (plan->workgroup_size > vk->caps.props.limits.maxComputeWorkGroupSize[0])
        return xfa_fail(ctx, XFA_ERROR_INVALID_PLAN, "work-group of %u exceeds maxComputeWorkGroupSize[0] %u",
                        plan->workgroup_size, vk->caps.props.limits.maxComputeWorkGroupSize[0]);
    return XFA_SUCCESS;
}

static xfa_status make_module(xfa_context *ctx, const uint32_t *code, size_t size, VkShaderModule *out)
{
    vk_context *vk = ctx->impl;
    const VkShaderModuleCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = size,
        .pCode = code,
    };
    VkResult r = vkCreateShaderModule(vk->device, &info, NULL, out);
    if (r) return xfa_fail(ctx, XFA_ERROR_KERNEL_BUILD, "vkCreateShaderModule failed: %s", xfa_vk_result_name(r));
    return XFA_SUCCESS;
}

xfa_status xfa_vk_pipelines_init(xfa_context *ctx)
{
    vk_context *vk = ctx->impl;
    VkResult r;
    VkDescriptorSetLayoutBinding bindings[VK_BINDINGS];
    for (uint32_t i = 0; i < VK_BINDINGS; i++) {
        const VkDescriptorSetLayoutBinding b = {
            .binding = i,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
        bindings[i] = b;
    }
    /* Push descriptors: recorded into the command buffer, so nothing outlives a call. */
    const VkDescriptorSetLayoutCreateInfo set_info = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR,
        .bindingCount = VK_BINDINGS,
        .pBindings = bindings,
    };
    if ((r = vkCreateDescriptorSetLayout(vk->device, &set_info, NULL, &vk->set_layout)))
        return xfa_vk_fail(ctx, r, "vkCreateDescriptorSetLayout");
    const VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, VK_PUSH_WORDS * 4};
    if (range.size > vk->caps.props.limits.maxPushConstantsSize)
        return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_FEATURE, "the device allows %u bytes of push constants, xfa needs %u",
                        vk->caps.props.limits.maxPushConstantsSize, range.size);
    const VkPipelineLayoutCreateInfo layout_info = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &vk->set_layout,
        .pushConstantRangeCount = 1,
        .pPushConstantRanges = &range,
    };
    if ((r = vkCreatePipelineLayout(vk->device, &layout_info, NULL, &vk->pipeline_layout)))
        return xfa_vk_fail(ctx, r, "vkCreatePipelineLayout");
    xfa_status st = make_module(ctx, xfa_spv_flash_forward, xfa_spv_flash_forward_size, &vk->scalar_module);
    if (st) return st;
    if ((st = make_module(ctx, xfa_spv_flash_decode, xfa_spv_flash_decode_size, &vk->modules[VK_SHADER_DECODE])) ||
        (st = make_module(ctx, xfa_spv_kv_append, xfa_spv_kv_append_size, &vk->modules[VK_SHADER_APPEND])) ||
        (st = make_module(ctx, xfa_spv_merge, xfa_spv_merge_size, &vk->modules[VK_SHADER_MERGE])) ||
        (st = make_module(ctx, xfa_spv_flash_backward, xfa_spv_flash_backward_size, &vk->modules[VK_SHADER_BACKWARD])))
        return st;
#ifdef XFA_VULKAN_COOPMAT
    if (vk->use_coopmat &&
        (st = make_module(ctx, xfa_spv_flash_forward_coopmat, xfa_spv_flash_forward_coopmat_size, &vk->coopmat_module)))
        return st;
#endif
    if ((st = xfa_vk_device_buffer(ctx, (VkDeviceSize)VK_EXTRA_SLOTS * VK_EXTRA_SLOT_BYTES, &vk->extra,
                                   &vk->extra_memory)))
        return st;
    if (vk->cache == VK_NULL_HANDLE) {
        const VkPipelineCacheCreateInfo cache_info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
        if ((r = vkCreatePipelineCache(vk->device, &cache_info, NULL, &vk->cache)))
            return xfa_vk_fail(ctx, r, "vkCreatePipelineCache");
        vk->owns_cache = true;
    }
    return XFA_SUCCESS;
}

void xfa_vk_pipelines_release(vk_context *vk)
{
    for (size_t i = 0; i < vk->n_pipelines; i++) vkDestroyPipeline(vk->device, vk->pipelines[i].pipeline, NULL);
    xfa_free(vk->pipelines);
    vk->pipelines = NULL;
    vk->n_pipelines = vk->cap_pipelines = 0;
    for (size_t i = 0; i < vk->n_spec; i++) vkDestroyPipeline(vk->device, vk->spec_pipelines[i].pipeline, NULL);
    xfa_free(vk->spec_pipelines);
    vk->spec_pipelines = NULL;
    vk->n_spec = vk->cap_spec = 0;
    for (int i = 0; i < VK_SHADER_COUNT_; i++)
        if (vk->modules[i]) vkDestroyShaderModule(vk->device, vk->modules[i], NULL);
    if (vk->owns_cache && vk->cache) vkDestroyPipelineCache(vk->device, vk->cache, NULL);
    if (vk->extra) vkDestroyBuffer(vk->device, vk->extra, NULL);
    if (vk->extra_memory) vkFreeMemory(vk->device, vk->extra_memory, NULL);
    if (vk->scalar_module) vkDestroyShaderModule(vk->device, vk->scalar_module, NULL);
    if (vk->coopmat_module) vkDestroyShaderModule(vk->device, vk->coopmat_module, NULL);
    if (vk->pipeline_layout) vkDestroyPipelineLayout(vk->device, vk->pipeline_layout, NULL);
    if (vk->set_layout) vkDestroyDescriptorSetLayout(vk->device, vk->set_layout, NULL);
}

xfa_status xfa_vk_scalar_plan(xfa_context *ctx, uint32_t head_dim, xfa_dtype dtype, xfa_plan *plan,
                              uint32_t *br_multiple)
{
    const vk_context *vk = ctx->impl;
    char msg[XFA_MESSAGE_SIZE];
    const xfa_plan_limits lim = limits(vk);
    const xfa_tile_layout layout = scalar_layout(vk);
    *br_multiple = layout.br_multiple;
    xfa_status st = xfa_plan_make(&lim, &layout, head_dim, dtype, plan, msg);
    return st ? xfa_fail(ctx, st, "%s", msg) : XFA_SUCCESS;
}

xfa_status xfa_vk_pipeline_spec(xfa_context *ctx, uint32_t shader, const uint32_t *values, uint32_t n,
                                VkPipeline *out)
{
    static const char *const names[VK_SHADER_COUNT_] = {"flash_decode", "kv_append", "merge", "flash_backward"};
    vk_context *vk = ctx->impl;
    vk_spec_entry key;
    memset(&key, 0, sizeof key);
    key.shader = shader;
    key.n = n;
    memcpy(key.values, values, n * sizeof *values);
    for (size_t i = 0; i < vk->n_spec; i++)
        if (vk->spec_pipelines[i].shader == shader && vk->spec_pipelines[i].n == n &&
            memcmp(vk->spec_pipelines[i].values, key.values, sizeof key.values) == 0) {
            *out = vk->spec_pipelines[i].pipeline;
            return XFA_SUCCESS;
        }
    if (vk->n_spec == vk->cap_spec) {
        const size_t cap = vk->cap_spec ? 2 * vk->cap_spec : 16;
        vk_spec_entry *grown = xfa_realloc(vk->spec_pipelines, cap * sizeof *grown);
        if (!grown) return xfa_fail(ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "growing the pipeline table");
        vk->spec_pipelines = grown;
        vk->cap_spec = cap;
    }
    VkSpecializationMapEntry entries[VK_SPEC_MAX];
    for (uint32_t i = 0; i < n; i++) {
        const VkSpecializationMapEntry e = {i, i * 4, 4};
        entries[i] = e;
    }
    const VkSpecializationInfo spec = {n, entries, n * 4, key.values};
    const VkComputePipelineCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage =
            {
                .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = vk->modules[shader],
                .pName = "main",
                .pSpecializationInfo = &spec,
            },
        .layout = vk->pipeline_layout,
    };
    VkResult r = vkCreateComputePipelines(vk->device, vk->cache, 1, &info, NULL, &key.pipeline);
    if (r) return xfa_fail(ctx, XFA_ERROR_KERNEL_BUILD, "vkCreateComputePipelines (%s) failed: %s", names[shader],
                           xfa_vk_result_name(r));
    vk->spec_pipelines[vk->n_spec++] = key;
    *out = key.pipeline;
    return XFA_SUCCESS;
}

static vk_pipeline_key key_for(const vk_context *vk, const xfa_forward_args *a, bool vec4, bool vec8)
{
    vk_pipeline_key key;
    memset(&key, 0, sizeof key);
    key.path = uses_coopmat(vk, a->dtype) && strcmp(a->plan.path, "coopmat") == 0 ? VK_PATH_COOPMAT : VK_PATH_SCALAR;
    key.head_dim = (uint32_t)a->head_dim;
    key.Br = a->plan.Br;
    key.Bc = a->plan.Bc;
    key.threads_per_row = key.path == VK_PATH_COOPMAT ? vk->caps.subgroup_size / 16 : xfa_vk_threads_per_row(vk);
    key.dtype = (uint32_t)a->dtype;
    key.causal = a->causal;
    key.has_lse = a->has_lse;
    key.window = a->window_left >= 0 || (a->window_right >= 0 && !a->causal);
    key.softcap = a->softcap > 0.0f;
    key.alibi = a->has_alibi;
    key.bias = !a->has_bias ? 0 : a->bias.dtype == XFA_DTYPE_F32 ? 1 : 2;
    key.varlen = a->varlen;
    key.vec4 = key.path == VK_PATH_SCALAR ? vec4 : vec8;
    return key;
}

static xfa_status make_pipeline(xfa_context *ctx, const vk_pipeline_key *key, VkPipeline *out)
{
    vk_context *vk = ctx->impl;
    /* constant_id 0..8 of flash_forward.comp (id 3: invocations per row, PAD 4 floats) and of
     * flash_forward_coopmat.comp (id 3: subgroup size, PAD 8 halves), in order. */
    const bool coop = key->path == VK_PATH_COOPMAT;
    const uint32_t values[15] = {key->head_dim,
                                key->Br,
                                key->Bc,
                                coop ? vk->caps.subgroup_size : key->threads_per_row,
                                key->dtype,
                                key->causal ? VK_TRUE : VK_FALSE,
                                key->has_lse ? VK_TRUE : VK_FALSE,
                                coop ? 8 : 4,
                                key->Br * key->threads_per_row,
                                key->window ? VK_TRUE : VK_FALSE,
                                key->softcap ? VK_TRUE : VK_FALSE,
                                key->alibi ? VK_TRUE : VK_FALSE,
                                key->bias,
                                key->varlen ? VK_TRUE : VK_FALSE,
                                key->vec4 ? VK_TRUE : VK_FALSE};
    /* ids 9..13 (the features) and 14 (wide loads) are in both shaders */
    const uint32_t n_values = 15;
    VkSpecializationMapEntry entries[15];
    for (uint32_t i = 0; i < n_values; i++) {
        const VkSpecializationMapEntry e = {i, i * 4, 4};
        entries[i] = e;
    }
    const VkSpecializationInfo spec = {n_values, entries, n_values * 4, values};
    const VkComputePipelineCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage =
            {
                .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = coop ? vk->coopmat_module : vk->scalar_module,
                .pName = "main",
                .pSpecializationInfo = &spec,
            },
        .layout = vk->pipeline_layout,
    };
    VkResult r = vkCreateComputePipelines(vk->device, vk->cache, 1, &info, NULL, out);
    if (r)
        return xfa_fail(ctx, XFA_ERROR_KERNEL_BUILD,
                        "vkCreateComputePipelines (%s, D=%u Br=%u Bc=%u) failed: %s", coop ? "coopmat" : "scalar",
                        key->head_dim, key->Br,
                        key->Bc, xfa_vk_result_name(r));
    return XFA_SUCCESS;
}

xfa_status xfa_vk_pipeline_get(xfa_context *ctx, const xfa_forward_args *args, bool vec4, bool vec8, VkPipeline *out)
{
    vk_context *vk = ctx->impl;
    const vk_pipeline_key key = key_for(vk, args, vec4, vec8);
    for (size_t i = 0; i < vk->n_pipelines; i++)
        if (memcmp(&vk->pipelines[i].key, &key, sizeof key) == 0) {
            *out = vk->pipelines[i].pipeline;
            return XFA_SUCCESS;
        }
    if (vk->n_pipelines == vk->cap_pipelines) {
        const size_t cap = vk->cap_pipelines ? 2 * vk->cap_pipelines : 16;
        vk_pipeline_entry *grown = xfa_realloc(vk->pipelines, cap * sizeof *grown);
        if (!grown) return xfa_fail(ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "growing the pipeline table");
        vk->pipelines = grown;
        vk->cap_pipelines = cap;
    }
    VkPipeline pipeline;
    xfa_status st = make_pipeline(ctx, &key, &pipeline);
    if (st) return st;
    vk->pipelines[vk->n_pipelines].key = key;
    vk->pipelines[vk->n_pipelines].pipeline = pipeline;
    vk->n_pipelines++;
    *out = pipeline;
    return XFA_SUCCESS;
}
