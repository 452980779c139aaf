/*
 * xfa_cuda.h - engine integration for the CUDA backend: run xfa on the
 * caller's device and cudaStream_t, over the caller's device memory.
 *
 * Include with the CUDA runtime headers on the include path; link with libxfa
 * (which carries its own static CUDA runtime).
 *
 * Ownership: xfa never destroys the caller's stream nor frees the caller's
 * memory; they must outlive the xfa context and buffers made from them.
 *
 * Ordering: forward calls are enqueued on the context's stream and return
 * without waiting, so they order with the caller's other work on that stream.
 * Thread-safety as in xfa.h.
 */
#ifndef XFA_CUDA_H
#define XFA_CUDA_H

#include "xfa.h"

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A context on CUDA device `device` (as numbered by cudaGetDevice) that enqueues on `stream`
 * (0 / cudaStreamLegacy: the legacy default stream; cudaStreamPerThread works too). */
xfa_status xfa_cuda_context_create_from(int device, cudaStream_t stream, xfa_context **out);

/* A buffer over `bytes` of the caller's device memory at `ptr`, which must be on the context's
 * device and 4-byte aligned (so every dtype and the f32 LSE stay aligned; the tensor-core kernels
 * want 16). xfa_buffer_destroy forgets it and never frees it. */
xfa_status xfa_cuda_buffer_wrap(xfa_context *ctx, void *ptr, size_t bytes, xfa_buffer **out);

/* The stream a CUDA context enqueues on (its own for contexts from xfa_context_create); NULL
 * (the legacy stream's value) for a non-CUDA context. */
cudaStream_t xfa_cuda_stream(const xfa_context *ctx);
/* The CUDA device of a context; -1 for a non-CUDA context. */
int xfa_cuda_device(const xfa_context *ctx);
/* The device pointer where a buffer starts; NULL for a non-CUDA buffer. */
void *xfa_cuda_buffer_pointer(const xfa_buffer *buf);

#ifdef __cplusplus
}
#endif

#endif /* XFA_CUDA_H */
