/*
 * cuda_device.c - device discovery and description for the CUDA backend, and
 * the tile layouts of its kernel paths (what the shared plan sizes tiles with).
 *
 * The runtime is linked statically, so these calls work, and answer "no
 * device", on machines without the NVIDIA driver.
 */
#include "cuda_internal.h"

#include "mma_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "launch.h"

/* The generic kernel (cuda/generic.cu): Q, K, V and S tiles in shared memory as f32, rows padded
 * by one element; 8 threads per query row. */
const xfa_tile_layout xfa_cuda_generic_layout = {
    .path = "generic",
    .q_elem_bytes = 4,
    .kv_elem_bytes = 4,
    .s_elem_bytes = 4,
    .o_elem_bytes = 0,
    .row_pad = 1,
    .stages = 1,
    .row_state_bytes = 0,
    .br_multiple = 4,
    .bc_multiple = 8,
    .br_max = 64,
    .bc_max = 64,
    .threads_per_row = XFA_CUDA_GENERIC_THREADS_PER_ROW,
};

/* One of the tensor-core kernel's tiles for head dim d (cuda/mma_config.h): Br and Bc are both
 * their own multiple and maximum, so a plan is exactly that tile when it fits M and fails when
 * it does not (the next tile, then the generic path, is tried). Q, K and V as 16-bit elements;
 * S, P, m_i, l_i and acc in registers. */
xfa_tile_layout xfa_cuda_mma_layout(uint32_t d, uint32_t warps)
{
    const uint32_t br = XFA_MMA_BR(d, warps), bc = XFA_MMA_BC(d);
    const xfa_tile_layout layout = {
        .path = "mma.sync",
        .q_elem_bytes = 2,
        .kv_elem_bytes = 2,
        .s_elem_bytes = 0,
        .o_elem_bytes = 0,
        .row_pad = XFA_MMA_PAD,
        .stages = 1,
        .row_state_bytes = 0,
        .br_multiple = br,
        .bc_multiple = bc,
        .br_max = br,
        .bc_max = bc,
        .threads_per_row = warps * 32 / br ? warps * 32 / br : 1,
    };
    return layout;
}

/* XFA_CUDA_PATH=mma.sync leaves the Hopper path out (to test or time mma.sync on an H100). */
bool xfa_cuda_sm90_built(void)
{
#ifdef XFA_CUDA_HAVE_SM90
    const char *forced = getenv("XFA_CUDA_PATH");
    return !(forced && strcasecmp(forced, "mma.sync") == 0);
#else
    return false;
#endif
}

bool xfa_cuda_mma_available(int cc_major)
{
    const char *forced = getenv("XFA_CUDA_PATH");
    if (forced && strcasecmp(forced, "generic") == 0) return false;
    return cc_major >= 8;
}

xfa_status xfa_cuda_device_count(int *count, char *msg)
{
    (void)msg;
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    /* No driver, no GPU, a driver older than the runtime: all mean "no CUDA device here". */
    if (err != cudaSuccess) {
        cudaGetLastError();
        n = 0;
    }
    *count = n;
    return XFA_SUCCESS;
}

xfa_status xfa_cuda_describe(int device, xfa_device_info *info, char *msg)
{
    struct cudaDeviceProp prop;
    cudaError_t err = cudaGetDeviceProperties(&prop, device);
    if (err != cudaSuccess)
        return xfa_msg(msg, XFA_ERROR_BACKEND_FAILURE, "cudaGetDeviceProperties(%d): %s", device, cudaGetErrorString(err));
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    snprintf(info->name, sizeof info->name, "%.127s", prop.name);
    snprintf(info->vendor, sizeof info->vendor, "NVIDIA");
    snprintf(info->driver, sizeof info->driver, "CUDA driver %d.%d, runtime %d.%d, sm_%d%d", driver / 1000,
             driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10, prop.major, prop.minor);
    /* M: what one block may use once it opts in beyond the default 48 KiB (each kernel raises its limit). */
    info->local_mem_bytes = prop.sharedMemPerBlockOptin ? prop.sharedMemPerBlockOptin : prop.sharedMemPerBlock;
    info->global_mem_bytes = prop.totalGlobalMem;
    info->subgroup_size = (uint32_t)prop.warpSize;
    info->max_workgroup_size = (uint32_t)prop.maxThreadsPerBlock;
    info->compute_units = (uint32_t)prop.multiProcessorCount;
    info->dtypes = (1u << XFA_DTYPE_F32) | (1u << XFA_DTYPE_F16) | (1u << XFA_DTYPE_BF16);
    info->features = XFA_FEATURE_CAUSAL | XFA_FEATURE_LSE | XFA_FEATURE_GQA | XFA_FEATURE_SEQLEN_QK_DIFFER |
                     XFA_FEATURE_ENGINE_HANDLES;
    info->features |= XFA_FEATURE_WINDOW | XFA_FEATURE_SOFTCAP | XFA_FEATURE_ALIBI | XFA_FEATURE_BIAS | XFA_FEATURE_VARLEN;
    info->features |= XFA_FEATURE_BACKWARD; /* cuda_backward.c */
    info->features |= XFA_FEATURE_DECODE | XFA_FEATURE_PAGED_KV | XFA_FEATURE_MERGE; /* cuda_decode.c */
    /* The path f16/bf16 take (f32 always runs the generic kernel). */
    const char *path = !xfa_cuda_mma_available(prop.major)                  ? "generic"
                       : prop.major == 9 && xfa_cuda_sm90_built() ? "wgmma"
                                                                          : "mma.sync";
    snprintf(info->path, sizeof info->path, "%s", path);
    return XFA_SUCCESS;
}

xfa_plan_limits xfa_cuda_limits(const xfa_device_info *info)
{
    xfa_plan_limits lim = {info->local_mem_bytes, info->max_workgroup_size, info->subgroup_size};
    const char *cap = getenv("XFA_CUDA_LOCAL_MEM_LIMIT");
    if (cap && *cap) {
        const unsigned long long bytes = strtoull(cap, NULL, 0);
        if (bytes < lim.local_mem_bytes) lim.local_mem_bytes = bytes;
    }
    return lim;
}
