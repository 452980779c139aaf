/*
 * cuda_internal.h - what the CUDA backend's host files share: the context
 * state, device discovery and description, and the kernel paths' tile layouts.
 * Plain C against the CUDA runtime API; the kernels are behind cuda/launch.h.
 */
#ifndef XFA_CUDA_INTERNAL_H
#define XFA_CUDA_INTERNAL_H

#include <cuda_runtime_api.h>

#include "internal.h"
#include "launch.h"
#include "plan.h"

typedef struct cuda_context {
    int device;
    cudaStream_t stream;
    bool own_stream;             /* created by xfa (else the caller's) */
    int cc_major, cc_minor;
    bool sm90;                   /* the Hopper path is built and this is a major-9 device */
    xfa_plan_limits limits;      /* M = sharedMemPerBlockOptin (possibly capped, XFA_CUDA_LOCAL_MEM_LIMIT) */
    void *backward_scratch;      /* the backward's delta rows when the caller gives no scratch (cuda_backward.c) */
    size_t backward_scratch_bytes;
    bool backward_scratch_pooled; /* from cudaMallocAsync: freed on the stream */
    void *decode_scratch;        /* decode partials and merge running results (cuda_decode.c); grown, kept */
    size_t decode_scratch_bytes;
} cuda_context;

/* cuda_device.c: discovery; 0 devices (not an error) when there is no driver or GPU. */
xfa_status xfa_cuda_device_count(int *count, char *msg);
/* Fills info (everything but backend/index) from the device's properties. */
xfa_status xfa_cuda_describe(int device, xfa_device_info *info, char *msg);
/* The limits plans are made with. */
xfa_plan_limits xfa_cuda_limits(const xfa_device_info *info);
/* Layouts: a tensor-core tile for head_dim d with `warps` warps (cuda/mma_config.h), and the
 * generic kernel's. */
xfa_tile_layout xfa_cuda_mma_layout(uint32_t d, uint32_t warps);
extern const xfa_tile_layout xfa_cuda_generic_layout;
/* Whether a device of this compute capability gets the mma.sync kernel (sm_80+, XFA_CUDA_PATH=generic off). */
bool xfa_cuda_mma_available(int cc_major);
/* cuda_backend.c: whether the tensor-core kernel is built for this head dim. */
bool xfa_cuda_mma_head_dim(int64_t d);
/* The Hopper path's presence in this build (and not switched off by XFA_CUDA_PATH=mma.sync). */
bool xfa_cuda_sm90_built(void);

/* cuda_backend.c: fills ctx->info and cu's device fields once cu->device and cu->stream are set. */
xfa_status xfa_cuda_context_init(xfa_context *ctx, cuda_context *cu);
void xfa_cuda_context_free(cuda_context *cu);

/* cuda_backward.c: the backward slot, and the release of its scratch (stream-ordered). */
xfa_status xfa_cuda_backward_enqueue(xfa_context *ctx, const xfa_backward_args *args);
void xfa_cuda_backward_release(cuda_context *cu);

/* cuda_backend.c, for every CUDA host file: make the context's device current on this thread; a
 * view's device address; the kernels' dtype code; and whether a view's rows can be read as 16-byte
 * vectors (aligned base, unit dim stride, the other strides whole vectors) as the tensor-core and
 * decode kernels read them. */
xfa_status xfa_cuda_use_device(xfa_context *ctx);
void *xfa_cuda_view_ptr(const xfa_tensor *t);
xfa_cuda_dtype xfa_cuda_dtype_of(xfa_dtype dtype);
bool xfa_cuda_view_16byte_rows(const xfa_tensor *t);

/* Failure from a CUDA call: out-of-memory gets its own status, the rest XFA_ERROR_BACKEND_FAILURE. */
xfa_status xfa_cuda_fail(xfa_context *ctx, const char *what, cudaError_t err);

/* cuda_decode.c: the decode and merge slots, and the context scratch they keep. */
xfa_status xfa_cuda_decode(xfa_context *ctx, const xfa_decode_args *args);
xfa_status xfa_cuda_merge_partials(xfa_context *ctx, const xfa_merge_args *args);
void xfa_cuda_decode_scratch_free(cuda_context *cu);

#endif
