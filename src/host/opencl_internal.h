/*
 * opencl_internal.h - what the OpenCL backend's files share: the context
 * state, device discovery, the kernel paths and their tile layouts, and the
 * program cache.
 */
#ifndef XFA_OPENCL_INTERNAL_H
#define XFA_OPENCL_INTERNAL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "internal.h"
#include "plan.h"

/* One built program and its kernel, keyed by the build options (device is the context's). */
typedef struct opencl_program {
    char *options;
    cl_program program;
    cl_kernel kernel;
} opencl_program;

/* A kernel path: its source, its local-memory layout and its build options. */
typedef struct opencl_path {
    const char *name;             /* "portable", "mma.sync" */
    const char *source;           /* embedded OpenCL C */
    const char *kernel_name;
    xfa_tile_layout layout;
} opencl_path;

typedef struct opencl_context {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    bool own_context, own_queue;  /* created by xfa (else retained from the caller) */
    const opencl_path *path;      /* the device's path for f16/bf16 (f32 always runs portable) */
    bool nvidia;                  /* NVIDIA's platform: inline PTX compiles; elsewhere mma.sync is emulated */
    xfa_plan_limits limits;       /* what plans are sized with (M possibly capped by XFA_OPENCL_LOCAL_MEM_LIMIT) */
    opencl_program *programs;
    size_t program_count, program_cap;
    cl_event last_event;          /* of the last forward, retained; NULL before the first */
} opencl_context;

/* opencl_device.c: discovery over every platform (CL_DEVICE_TYPE_ALL), in platform order. */
xfa_status xfa_opencl_device_count(int *count, char *msg);
/* Finds device `index`: its platform and id. */
xfa_status xfa_opencl_device_at(int index, cl_platform_id *platform, cl_device_id *device, char *msg);
/* Fills info (everything but backend/index) and picks the path for the device. */
xfa_status xfa_opencl_describe(cl_platform_id platform, cl_device_id device, xfa_device_info *info,
                               const opencl_path **path, char *msg);
/* The limits plans are made with: the device's, with M capped by XFA_OPENCL_LOCAL_MEM_LIMIT if set (a test hook). */
xfa_plan_limits xfa_opencl_limits(const xfa_device_info *info);
/* The portable path (every device) and the NVIDIA tensor-core path. */
extern const opencl_path xfa_opencl_path_portable;
extern const opencl_path xfa_opencl_path_mma;

/* The path a dtype runs on this context: mma.sync takes f16/bf16 only. */
const opencl_path *xfa_opencl_path_for(const opencl_context *cl, xfa_dtype dtype);
/* True on NVIDIA's OpenCL platform. */
bool xfa_opencl_is_nvidia(cl_platform_id platform);

/* opencl_program.c: the kernel for a plan, built on first use and cached in the context. */
xfa_status xfa_opencl_kernel_for(xfa_context *ctx, const xfa_plan *plan, cl_kernel *kernel);
void xfa_opencl_programs_release(opencl_context *cl);

/* opencl_backend.c: fills ctx->info and cl->limits/path once cl->device etc. are set. */
xfa_status xfa_opencl_context_init(xfa_context *ctx, opencl_context *cl);
void xfa_opencl_context_free(opencl_context *cl);

/* "CL_OUT_OF_RESOURCES" and the like, for messages. */
const char *xfa_opencl_error_name(cl_int err);

#endif
