/*
 * opencl_device.c - device discovery over every OpenCL platform, the device
 * description (xfa_device_info), and which kernel path a device gets.
 *
 * Devices are numbered in platform order, then in each platform's device
 * order, over CL_DEVICE_TYPE_ALL (PoCL's CPU device is not a GPU). Nothing is
 * cached between calls, so discovery is safe from any thread.
 */
#include "alloc.h"
#include "opencl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Vendor extensions' queries (values from cl_ext.h, which not every header set has). */
#define XFA_CL_DEVICE_WARP_SIZE_NV 0x4003
#define XFA_CL_DEVICE_WAVEFRONT_WIDTH_AMD 0x4043

#define MAX_PLATFORMS 16
#define MAX_DEVICES 64

extern const char xfa_cl_flash_forward[];
extern const char xfa_cl_flash_forward_mma[];

/* The portable kernel (cl/flash_forward.cl): Q, K, V and S tiles in local memory as f32,
 * rows padded by one element so the work-items of a row block read distinct banks. */
const opencl_path xfa_opencl_path_portable = {
    .name = "portable",
    .source = xfa_cl_flash_forward,
    .kernel_name = "xfa_flash_forward",
    .layout = {
        .path = "portable",
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
        .threads_per_row = 8,
    },
};

/* The NVIDIA tensor-core kernel (cl/flash_forward_mma.cl): Q in registers, K and V tiles as f16 bits
 * in local memory, rows padded by 8 halves (16 bytes) so ldmatrix row reads hit distinct banks. A warp
 * of 32 work-items owns 32 / THREADS_PER_ROW rows (one or two m16 tiles). */
#define MMA_PATH(name_, rows_per_warp, bc_max_)                                                                    \
    {                                                                                                              \
        .name = name_, .source = xfa_cl_flash_forward_mma, .kernel_name = "xfa_flash_forward_mma",                 \
        .layout = {                                                                                                \
            .path = name_,                                                                                         \
            .q_elem_bytes = 0,                                                                                     \
            .kv_elem_bytes = 2,                                                                                    \
            .s_elem_bytes = 0,                                                                                     \
            .o_elem_bytes = 0,                                                                                     \
            .row_pad = 8,                                                                                          \
            .stages = 1,                                                                                           \
            .row_state_bytes = 0,                                                                                  \
            .br_multiple = rows_per_warp,                                                                          \
            .bc_multiple = 16,                                                                                     \
            .br_max = 128,                                                                                         \
            .bc_max = bc_max_,                                                                                     \
            .threads_per_row = 32 / (rows_per_warp),                                                               \
        },                                                                                                         \
    }

/* One m16 tile per warp. */
const opencl_path xfa_opencl_path_mma = MMA_PATH("mma.sync", 16, 64);

/* Two m16 tiles per warp: every K/V fragment read from local memory feeds two mma instead of one, for
 * twice the registers of Q, S and O (so Bc stays at 32). Taken only on request
 * (XFA_OPENCL_PATH=mma.sync-wide) until a GPU run says it pays. */
const opencl_path xfa_opencl_path_mma_wide = MMA_PATH("mma.sync-wide", 32, 32);

bool xfa_opencl_path_is_mma(const opencl_path *path)
{
    return path == &xfa_opencl_path_mma || path == &xfa_opencl_path_mma_wide;
}

const char *xfa_opencl_error_name(cl_int err)
{
    switch (err) {
#define NAME_(e) case e: return #e;
        NAME_(CL_SUCCESS) NAME_(CL_DEVICE_NOT_FOUND) NAME_(CL_DEVICE_NOT_AVAILABLE)
        NAME_(CL_COMPILER_NOT_AVAILABLE) NAME_(CL_MEM_OBJECT_ALLOCATION_FAILURE) NAME_(CL_OUT_OF_RESOURCES)
        NAME_(CL_OUT_OF_HOST_MEMORY) NAME_(CL_BUILD_PROGRAM_FAILURE) NAME_(CL_INVALID_VALUE)
        NAME_(CL_INVALID_DEVICE) NAME_(CL_INVALID_CONTEXT) NAME_(CL_INVALID_COMMAND_QUEUE)
        NAME_(CL_INVALID_MEM_OBJECT) NAME_(CL_INVALID_BUILD_OPTIONS) NAME_(CL_INVALID_PROGRAM)
        NAME_(CL_INVALID_KERNEL_NAME) NAME_(CL_INVALID_KERNEL) NAME_(CL_INVALID_ARG_INDEX)
        NAME_(CL_INVALID_ARG_VALUE) NAME_(CL_INVALID_ARG_SIZE) NAME_(CL_INVALID_KERNEL_ARGS)
        NAME_(CL_INVALID_WORK_DIMENSION) NAME_(CL_INVALID_WORK_GROUP_SIZE) NAME_(CL_INVALID_WORK_ITEM_SIZE)
        NAME_(CL_INVALID_GLOBAL_OFFSET) NAME_(CL_INVALID_EVENT_WAIT_LIST) NAME_(CL_INVALID_EVENT)
        NAME_(CL_INVALID_BUFFER_SIZE) NAME_(CL_INVALID_GLOBAL_WORK_SIZE) NAME_(CL_INVALID_PLATFORM)
        NAME_(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) NAME_(CL_MISALIGNED_SUB_BUFFER_OFFSET)
#undef NAME_
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "unknown OpenCL error";
    }
}

/* Every device of every platform, in order; 0 devices (not an error) when there is no ICD. */
static cl_int list_devices(cl_platform_id *platforms_of, cl_device_id *devices, cl_uint *count)
{
    *count = 0;
    cl_platform_id platforms[MAX_PLATFORMS];
    cl_uint n_platforms = 0;
    cl_int err = clGetPlatformIDs(MAX_PLATFORMS, platforms, &n_platforms);
    if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR: no ICD installed */ || n_platforms == 0) return CL_SUCCESS;
    if (err != CL_SUCCESS) return err;
    if (n_platforms > MAX_PLATFORMS) n_platforms = MAX_PLATFORMS;
    for (cl_uint p = 0; p < n_platforms && *count < MAX_DEVICES; p++) {
        cl_uint n = 0;
        err = clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES - *count, devices + *count, &n);
        if (err == CL_DEVICE_NOT_FOUND) continue;
        if (err != CL_SUCCESS) continue; /* a broken platform hides its devices, not the others' */
        if (n > MAX_DEVICES - *count) n = MAX_DEVICES - *count;
        for (cl_uint i = 0; i < n; i++) platforms_of[*count + i] = platforms[p];
        *count += n;
    }
    return CL_SUCCESS;
}

xfa_status xfa_opencl_device_count(int *count, char *msg)
{
    cl_platform_id platforms[MAX_DEVICES];
    cl_device_id devices[MAX_DEVICES];
    cl_uint n = 0;
    cl_int err = list_devices(platforms, devices, &n);
    *count = 0;
    if (err != CL_SUCCESS)
        return xfa_msg(msg, XFA_ERROR_BACKEND_FAILURE, "clGetPlatformIDs failed: %s (%d)", xfa_opencl_error_name(err), err);
    *count = (int)n;
    return XFA_SUCCESS;
}

xfa_status xfa_opencl_device_at(int index, cl_platform_id *platform, cl_device_id *device, char *msg)
{
    cl_platform_id platforms[MAX_DEVICES];
    cl_device_id devices[MAX_DEVICES];
    cl_uint n = 0;
    cl_int err = list_devices(platforms, devices, &n);
    if (err != CL_SUCCESS)
        return xfa_msg(msg, XFA_ERROR_BACKEND_FAILURE, "clGetPlatformIDs failed: %s (%d)", xfa_opencl_error_name(err), err);
    if (index < 0 || (cl_uint)index >= n)
        return xfa_msg(msg, XFA_ERROR_INVALID_DEVICE, "OpenCL device %d: %u device(s) found", index, n);
    *platform = platforms[index];
    *device = devices[index];
    return XFA_SUCCESS;
}

/* A device string, cut to fit `out` (clGetDeviceInfo refuses a buffer shorter than the whole string). */
static void device_string(cl_device_id device, cl_device_info what, char *out, size_t size)
{
    out[0] = '\0';
    size_t len = 0;
    if (clGetDeviceInfo(device, what, 0, NULL, &len) != CL_SUCCESS || len == 0) return;
    char *full = xfa_malloc(len + 1);
    if (!full) return;
    if (clGetDeviceInfo(device, what, len, full, NULL) == CL_SUCCESS) {
        full[len] = '\0';
        snprintf(out, size, "%s", full);
    }
    xfa_free(full);
}

static bool has_extension(cl_device_id device, const char *name)
{
    size_t size = 0;
    if (clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, 0, NULL, &size) != CL_SUCCESS || size == 0) return false;
    char *ext = xfa_malloc(size + 1);
    if (!ext) return false;
    bool found = false;
    if (clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, size, ext, NULL) == CL_SUCCESS) {
        ext[size] = '\0';
        const size_t len = strlen(name);
        for (const char *p = strstr(ext, name); p && !found; p = strstr(p + 1, name))
            found = (p == ext || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0');
    }
    xfa_free(ext);
    return found;
}

bool xfa_opencl_is_nvidia(cl_platform_id platform)
{
    char vendor[128];
    vendor[0] = '\0';
    if (clGetPlatformInfo(platform, CL_PLATFORM_VENDOR, sizeof vendor, vendor, NULL) != CL_SUCCESS) vendor[0] = '\0';
    vendor[sizeof vendor - 1] = '\0';
    return strstr(vendor, "NVIDIA") != NULL;
}

const opencl_path *xfa_opencl_path_for(const opencl_context *cl, xfa_dtype dtype)
{
    return dtype == XFA_DTYPE_F32 ? &xfa_opencl_path_portable : cl->path;
}

/* The mma.sync path needs NVIDIA's compiler (inline PTX) on a tensor-core GPU (sm_80 or later:
 * m16n8k16 f16/bf16 mma); XFA_OPENCL_PATH=portable|mma.sync|mma.sync-wide overrides the choice (mma on
 * another vendor runs the emulated build: for tests, not speed). */
static const opencl_path *choose_path(cl_platform_id platform, cl_device_id device)
{
    const char *forced = getenv("XFA_OPENCL_PATH");
    if (forced && strcasecmp(forced, "portable") == 0) return &xfa_opencl_path_portable;
    const bool nvidia = xfa_opencl_is_nvidia(platform);
    cl_uint cc_major = 0;
#define XFA_CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV 0x4000
    if (nvidia && clGetDeviceInfo(device, XFA_CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, sizeof cc_major, &cc_major, NULL) != CL_SUCCESS)
        cc_major = 0;
    if (forced && strcasecmp(forced, "mma.sync") == 0) return &xfa_opencl_path_mma;
    if (forced && strcasecmp(forced, "mma.sync-wide") == 0) return &xfa_opencl_path_mma_wide;
    if (nvidia && cc_major >= 8 && has_extension(device, "cl_nv_device_attribute_query")) return &xfa_opencl_path_mma;
    return &xfa_opencl_path_portable;
}

xfa_status xfa_opencl_describe(cl_platform_id platform, cl_device_id device, xfa_device_info *info,
                               const opencl_path **path, char *msg)
{
    (void)msg;
    device_string(device, CL_DEVICE_NAME, info->name, sizeof info->name);
    device_string(device, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    char version[40], driver[16];
    device_string(device, CL_DEVICE_VERSION, version, sizeof version);
    device_string(device, CL_DRIVER_VERSION, driver, sizeof driver);
    snprintf(info->driver, sizeof info->driver, "%s, driver %s", version, driver);

    cl_ulong local = 0, global = 0;
    size_t max_wg = 0;
    cl_uint units = 0, warp = 0;
    clGetDeviceInfo(device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
    clGetDeviceInfo(device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global, &global, NULL);
    clGetDeviceInfo(device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
    clGetDeviceInfo(device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
    if (clGetDeviceInfo(device, XFA_CL_DEVICE_WARP_SIZE_NV, sizeof warp, &warp, NULL) != CL_SUCCESS &&
        clGetDeviceInfo(device, XFA_CL_DEVICE_WAVEFRONT_WIDTH_AMD, sizeof warp, &warp, NULL) != CL_SUCCESS)
        warp = 1;
    info->local_mem_bytes = local;
    info->global_mem_bytes = global;
    info->max_workgroup_size = max_wg > UINT32_MAX ? UINT32_MAX : (uint32_t)max_wg;
    info->compute_units = units;
    info->subgroup_size = warp ? warp : 1;
    /* f16 goes through vload_half/vstore_half (core OpenCL, no cl_khr_fp16), bf16 through bit shifts. */
    info->dtypes = (1u << XFA_DTYPE_F32) | (1u << XFA_DTYPE_F16) | (1u << XFA_DTYPE_BF16);
    /* Both forward kernels take windows, softcap, ALiBi, bias and variable lengths (same arguments);
     * decode, merge and backward have their own kernels, the same on every device. */
    info->features = XFA_FEATURE_CAUSAL | XFA_FEATURE_LSE | XFA_FEATURE_GQA | XFA_FEATURE_SEQLEN_QK_DIFFER |
                     XFA_FEATURE_ENGINE_HANDLES | XFA_FEATURE_WINDOW | XFA_FEATURE_SOFTCAP | XFA_FEATURE_ALIBI |
                     XFA_FEATURE_BIAS | XFA_FEATURE_VARLEN | XFA_FEATURE_DECODE | XFA_FEATURE_PAGED_KV |
                     XFA_FEATURE_MERGE | XFA_FEATURE_BACKWARD;
    const opencl_path *chosen = choose_path(platform, device);
    if (chosen == &xfa_opencl_path_portable) snprintf(info->path, sizeof info->path, "%s", chosen->name);
    else snprintf(info->path, sizeof info->path, "%s (f16/bf16), portable (f32)", chosen->name);
    if (path) *path = chosen;
    return XFA_SUCCESS;
}

xfa_plan_limits xfa_opencl_limits(const xfa_device_info *info)
{
    xfa_plan_limits lim = {info->local_mem_bytes, info->max_workgroup_size, info->subgroup_size};
    const char *cap = getenv("XFA_OPENCL_LOCAL_MEM_LIMIT");
    if (cap && *cap) {
        const unsigned long long bytes = strtoull(cap, NULL, 0);
        if (bytes < lim.local_mem_bytes) lim.local_mem_bytes = bytes;
    }
    return lim;
}
