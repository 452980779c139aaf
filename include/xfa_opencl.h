/*
 * xfa_opencl.h - engine integration for the OpenCL backend: run xfa on the
 * caller's cl_context / cl_device_id / cl_command_queue and cl_mem buffers.
 *
 * Include <CL/cl.h> (or let this header include it) before use; link with
 * libxfa and the OpenCL ICD loader.
 *
 * Reference counting: xfa retains every handle it is given (context, queue,
 * cl_mem) and releases exactly that reference when the xfa context or buffer
 * is destroyed. The caller keeps, and eventually releases, its own references.
 *
 * Ordering: calls (forward, backward, decode, merge) are enqueued on the caller's queue and return
 * without waiting, so they order with the caller's other work on that queue
 * (an in-order queue is assumed; with an out-of-order queue, wait on the
 * event from xfa_opencl_last_event). Thread-safety as in xfa.h.
 */
#ifndef XFA_OPENCL_H
#define XFA_OPENCL_H

#include "xfa.h"

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A context on the caller's device, OpenCL context and queue (the queue must belong to that
 * context and device). xfa retains all three (device retains are no-ops for root devices). */
xfa_status xfa_opencl_context_create_from(cl_context context, cl_device_id device, cl_command_queue queue,
                                          xfa_context **out);

/* A buffer over bytes [offset, offset + bytes) of the caller's cl_mem, which must belong to the
 * context's cl_context. offset must be a multiple of 4 (so every dtype and the f32 LSE stay
 * aligned). xfa retains the cl_mem; xfa_buffer_destroy releases that reference only. */
xfa_status xfa_opencl_buffer_wrap(xfa_context *ctx, cl_mem mem, size_t offset, size_t bytes, xfa_buffer **out);

/* The native handles of an OpenCL context (not retained for the caller). */
cl_context xfa_opencl_context_handle(const xfa_context *ctx);
cl_command_queue xfa_opencl_queue_handle(const xfa_context *ctx);
/* The cl_mem under a buffer (not retained) and where the buffer starts in it. */
cl_mem xfa_opencl_buffer_handle(const xfa_buffer *buf, size_t *offset);

/* The event of the last command xfa enqueued on ctx (forward, backward, decode or merge: the last
 * kernel of the call; each of xfa's kernels waits on the one before it), retained for the caller
 * (who releases it with clReleaseEvent); XFA_ERROR_INVALID_ARGUMENT if none was enqueued yet. */
xfa_status xfa_opencl_last_event(xfa_context *ctx, cl_event *event);

#ifdef __cplusplus
}
#endif

#endif /* XFA_OPENCL_H */
