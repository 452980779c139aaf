/*
 * vulkan_shaders.h - the SPIR-V modules compiled from shaders/ at build time
 * (cmake/backend_vulkan.cmake writes the arrays into the build dir).
 */
#ifndef XFA_VULKAN_SHADERS_H
#define XFA_VULKAN_SHADERS_H

#include <stddef.h>
#include <stdint.h>

/* shaders/flash_forward.comp: the scalar path. */
extern const uint32_t xfa_spv_flash_forward[];
extern const size_t xfa_spv_flash_forward_size;

/* shaders/flash_decode.comp, kv_append.comp, merge.comp: decoding and merging. */
extern const uint32_t xfa_spv_flash_decode[];
extern const size_t xfa_spv_flash_decode_size;
extern const uint32_t xfa_spv_kv_append[];
extern const size_t xfa_spv_kv_append_size;
extern const uint32_t xfa_spv_merge[];
extern const size_t xfa_spv_merge_size;
/* shaders/flash_backward.comp: the backward pass. */
extern const uint32_t xfa_spv_flash_backward[];
extern const size_t xfa_spv_flash_backward_size;

#ifdef XFA_VULKAN_COOPMAT
/* shaders/flash_forward_coopmat.comp: the VK_KHR_cooperative_matrix path (glslang >= 13). */
extern const uint32_t xfa_spv_flash_forward_coopmat[];
extern const size_t xfa_spv_flash_forward_coopmat_size;
#endif

#endif /* XFA_VULKAN_SHADERS_H */
