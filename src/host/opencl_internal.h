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

#define XFA_OPENCL_KERNELS_PER_PROGRAM 4

/* One built program and the kernels made from it, keyed by the build options (device is the context's;
 * the options name the source, e.g. -DXFA_PATH=portable). */
typedef struct opencl_program {
    char *options;
    cl_program program;
    cl_kernel kernels[XFA_OPENCL_KERNELS_PER_PROGRAM];
    const char *names[XFA_OPENCL_KERNELS_PER_PROGRAM]; /* static strings; NULL: slot free */
} opencl_program;

/* A kernel path: its source, its local-memory layout and its build options. */
typedef struct opencl_path {
    const char *name;             /* "portable", "mma.sync", "mma.sync-wide" */
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
    bool wide_decode_rows;        /* decode work-groups get 16-32 work-items per row (opencl_decode.c) */
    xfa_plan_limits limits;       /* what plans are sized with (M possibly capped by XFA_OPENCL_LOCAL_MEM_LIMIT) */
    opencl_program *programs;
    size_t program_count, program_cap;
    cl_event last_event;          /* of the last enqueued command, retained; NULL before the first */
    cl_mem scratch;               /* decode partials and merge running results, grown on demand */
    size_t scratch_bytes;
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
/* The tensor-core kernel with 32 rows per warp (opt-in: XFA_OPENCL_PATH=mma.sync-wide). */
extern const opencl_path xfa_opencl_path_mma_wide;
/* Whether a path is the tensor-core kernel (either shape). */
bool xfa_opencl_path_is_mma(const opencl_path *path);

/* opencl_decode.c: whether decode work-groups widen their rows on this device (decided once per context). */
bool xfa_opencl_wide_decode_rows(const opencl_context *cl);

/* The path a dtype runs on this context: mma.sync takes f16/bf16 only. */
const opencl_path *xfa_opencl_path_for(const opencl_context *cl, xfa_dtype dtype);
/* True on NVIDIA's OpenCL platform. */
bool xfa_opencl_is_nvidia(cl_platform_id platform);

/* opencl_program.c: the kernel for a plan, built on first use and cached in the context. */
/* The forward kernel for a plan; XFA_ERROR_INVALID_PLAN when the compiled kernel allows fewer
 * work-items than the plan has (its limit in *kernel_wg, which may be NULL). */
xfa_status xfa_opencl_kernel_for(xfa_context *ctx, const xfa_plan *plan, cl_kernel *kernel, size_t *kernel_wg);
/* Kernel `name` of `source` built with `options` (which must name the source), built on first use and
 * cached; *created (may be NULL) tells whether the kernel object was made by this call. */
xfa_status xfa_opencl_kernel_named(xfa_context *ctx, const char *what, const char *source, const char *name,
                                   const char *options, cl_kernel *kernel, bool *created);
void xfa_opencl_programs_release(opencl_context *cl);

/* opencl_backend.c: fills ctx->info and cl->limits/path once cl->device etc. are set. */
xfa_status xfa_opencl_context_init(xfa_context *ctx, opencl_context *cl);
void xfa_opencl_context_free(opencl_context *cl);

/* "CL_OUT_OF_RESOURCES" and the like, for messages. */
const char *xfa_opencl_error_name(cl_int err);

/* opencl_backend.c: enqueues a kernel after the context's last command (so an out-of-order queue keeps
 * the order of xfa's own commands), makes it the last command and flushes. */
xfa_status xfa_opencl_enqueue(xfa_context *ctx, const char *what, cl_kernel kernel, cl_uint dims, const size_t *global,
                              const size_t *local);
/* A context-owned scratch cl_mem of at least `bytes` (grown; commands still using the old one keep it alive). */
xfa_status xfa_opencl_scratch(xfa_context *ctx, size_t bytes, cl_mem *mem);

/* opencl_backward.c: the backward slot. */
xfa_status xfa_opencl_backward(xfa_context *ctx, const xfa_backward_args *args);
/* opencl_decode.c: the decode and merge slots. */
xfa_status xfa_opencl_decode(xfa_context *ctx, const xfa_decode_args *args);
xfa_status xfa_opencl_merge(xfa_context *ctx, const xfa_merge_args *args);

/* opencl_program.c: the kernels' -D name of a storage dtype ("XFA_DTYPE_F16", ...). */
const char *xfa_opencl_dtype_macro(xfa_dtype dtype);

/* A window bound as the kernels take it: -1 when unlimited or so wide that it limits nothing
 * (past `span` keys), so the kernels' 32-bit index arithmetic cannot overflow. */
static inline cl_int xfa_opencl_window(int64_t w, int64_t span) { return w < 0 || w > span ? -1 : (cl_int)w; }

static inline cl_mem xfa_opencl_mem(const xfa_tensor *t) { return (cl_mem)t->buffer->impl; }

/* Element offset of a view in its cl_mem: the wrapped buffer's start plus the view's offset. */
static inline cl_ulong xfa_opencl_elem_offset(const xfa_tensor *t)
{
    return (cl_ulong)((t->buffer->native_offset + t->offset) / xfa_dtype_size(t->dtype));
}

static inline cl_long4 xfa_opencl_strides(const xfa_tensor *t)
{
    cl_long4 s;
    for (int i = 0; i < 4; i++) s.s[i] = t->stride[i];
    return s;
}

#define XFA_CL_FAIL(ctx, what, err)                                                                               \
    xfa_fail((ctx), (err) == CL_MEM_OBJECT_ALLOCATION_FAILURE ? XFA_ERROR_OUT_OF_DEVICE_MEMORY                    \
                                                              : XFA_ERROR_BACKEND_FAILURE,                        \
             "%s: %s (%d)", (what), xfa_opencl_error_name(err), (int)(err))

#endif
