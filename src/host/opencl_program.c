/*
 * opencl_program.c - builds a path's kernel for a plan, once per (device,
 * build options), and keeps it in the context. The options carry everything
 * that sizes the kernel (head dim, Br, Bc, padding, work-items per row,
 * dtype); masks, extras, LSE, strides and lengths are run-time arguments so they add no builds.
 * The decode and merge programs (opencl_decode.c) share the cache, keyed the same way.
 */
#include "alloc.h"
#include "opencl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *xfa_opencl_dtype_macro(xfa_dtype dtype)
{
    switch (dtype) {
    case XFA_DTYPE_F16: return "XFA_DTYPE_F16";
    case XFA_DTYPE_BF16: return "XFA_DTYPE_BF16";
    default: return "XFA_DTYPE_F32";
    }
}

/* The options name the path's kernel first (-DXFA_PATH=...), so one string keys the cache. */
static void build_options(const opencl_context *cl, const opencl_path *path, const xfa_plan *plan, char *out,
                          size_t size)
{
    const xfa_tile_layout *L = &path->layout;
    const bool emulate = xfa_opencl_path_is_mma(path) && !cl->nvidia;
    snprintf(out, size, "-cl-std=CL1.2 -DXFA_PATH=%s -DD=%u -DBR=%u -DBC=%u -DPAD=%u -DTHREADS_PER_ROW=%u -D%s%s",
             xfa_opencl_path_is_mma(path) ? "mma" : "portable", plan->head_dim, plan->Br, plan->Bc, L->row_pad,
             L->threads_per_row ? L->threads_per_row : 1, xfa_opencl_dtype_macro(plan->dtype), emulate ? " -DXFA_MMA_EMULATE" : "");
}

/* The build log, trimmed to what fits in a message. */
static void build_log(cl_program program, cl_device_id device, char *out, size_t size)
{
    out[0] = '\0';
    size_t len = 0;
    if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &len) != CL_SUCCESS || len == 0) return;
    char *log = xfa_malloc(len + 1);
    if (!log) return;
    if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, len, log, NULL) == CL_SUCCESS) {
        log[len] = '\0';
        snprintf(out, size, "%s", log);
    }
    xfa_free(log);
}

static xfa_status build(xfa_context *ctx, opencl_context *cl, const char *what, const char *source, const char *options,
                        opencl_program *out)
{
    cl_int err;
    cl_program program = clCreateProgramWithSource(cl->context, 1, &source, NULL, &err);
    if (err != CL_SUCCESS)
        return xfa_fail(ctx, XFA_ERROR_BACKEND_FAILURE, "clCreateProgramWithSource: %s (%d)", xfa_opencl_error_name(err), err);
    err = clBuildProgram(program, 1, &cl->device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        char log[XFA_MESSAGE_SIZE - 512];
        build_log(program, cl->device, log, sizeof log);
        clReleaseProgram(program);
        return xfa_fail(ctx, XFA_ERROR_KERNEL_BUILD, "clBuildProgram (%s, options \"%s\"): %s (%d); log:\n%s",
                        what, options, xfa_opencl_error_name(err), err, log);
    }
    memset(out, 0, sizeof *out);
    out->options = xfa_malloc(strlen(options) + 1);
    if (!out->options) {
        clReleaseProgram(program);
        return xfa_fail(ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating the program cache");
    }
    strcpy(out->options, options);
    out->program = program;
    return XFA_SUCCESS;
}

xfa_status xfa_opencl_kernel_named(xfa_context *ctx, const char *what, const char *source, const char *name,
                                   const char *options, cl_kernel *kernel, bool *created)
{
    opencl_context *cl = ctx->impl;
    if (created) *created = false;
    opencl_program *entry = NULL;
    for (size_t i = 0; i < cl->program_count && !entry; i++)
        if (strcmp(cl->programs[i].options, options) == 0) entry = &cl->programs[i];
    if (!entry) {
        if (cl->program_count == cl->program_cap) {
            const size_t cap = cl->program_cap ? 2 * cl->program_cap : 8;
            opencl_program *grown = xfa_realloc(cl->programs, cap * sizeof *grown);
            if (!grown) return xfa_fail(ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "growing the program cache");
            cl->programs = grown;
            cl->program_cap = cap;
        }
        entry = &cl->programs[cl->program_count];
        xfa_status st = build(ctx, cl, what, source, options, entry);
        if (st) return st;
        cl->program_count++;
    }
    int slot = 0;
    while (slot < XFA_OPENCL_KERNELS_PER_PROGRAM && entry->names[slot] && strcmp(entry->names[slot], name) != 0) slot++;
    if (slot == XFA_OPENCL_KERNELS_PER_PROGRAM)
        return xfa_fail(ctx, XFA_ERROR_BACKEND_FAILURE, "more than %d kernels asked of one program (%s)",
                        XFA_OPENCL_KERNELS_PER_PROGRAM, what);
    if (!entry->names[slot]) {
        cl_int err;
        cl_kernel made = clCreateKernel(entry->program, name, &err);
        if (err != CL_SUCCESS)
            return xfa_fail(ctx, XFA_ERROR_KERNEL_BUILD, "clCreateKernel(%s): %s (%d)", name, xfa_opencl_error_name(err), err);
        entry->kernels[slot] = made;
        entry->names[slot] = name;
        if (created) *created = true;
    }
    *kernel = entry->kernels[slot];
    return XFA_SUCCESS;
}

xfa_status xfa_opencl_kernel_for(xfa_context *ctx, const xfa_plan *plan, cl_kernel *kernel, size_t *kernel_wg_out)
{
    opencl_context *cl = ctx->impl;
    const opencl_path *path = xfa_opencl_path_for(cl, plan->dtype);
    char options[256], what[64];
    build_options(cl, path, plan, options, sizeof options);
    snprintf(what, sizeof what, "%s path", path->name);
    xfa_status st = xfa_opencl_kernel_named(ctx, what, path->source, path->kernel_name, options, kernel, NULL);
    if (st) return st;

    /* Registers can hold a kernel below the device's work-group limit: say so instead of failing the launch
     * (asked every time: a cached kernel may meet a plan with more work-items than it allows). */
    size_t kernel_wg = 0;
    if (kernel_wg_out) *kernel_wg_out = 0;
    if (clGetKernelWorkGroupInfo(*kernel, cl->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kernel_wg, &kernel_wg,
                                 NULL) == CL_SUCCESS &&
        kernel_wg < plan->workgroup_size) {
        if (kernel_wg_out) *kernel_wg_out = kernel_wg;
        return xfa_fail(ctx, XFA_ERROR_INVALID_PLAN, "the %s kernel for D=%u allows %zu work-items per work-group, the plan needs %u",
                        path->name, plan->head_dim, kernel_wg, plan->workgroup_size);
    }
    return XFA_SUCCESS;
}

void xfa_opencl_programs_release(opencl_context *cl)
{
    for (size_t i = 0; i < cl->program_count; i++) {
        for (int k = 0; k < XFA_OPENCL_KERNELS_PER_PROGRAM; k++)
            if (cl->programs[i].names[k]) clReleaseKernel(cl->programs[i].kernels[k]);
        clReleaseProgram(cl->programs[i].program);
        xfa_free(cl->programs[i].options);
    }
    xfa_free(cl->programs);
    cl->programs = NULL;
    cl->program_count = cl->program_cap = 0;
}
