/*
 * registry.c - the one place that knows which backends are compiled in
 * (XFA_WITH_* is defined by CMake for this file only), and AUTO's order.
 */
#include "internal.h"

#include <stdlib.h>

extern const xfa_backend_ops xfa_cpu_backend;
#ifdef XFA_WITH_OPENCL
extern const xfa_backend_ops xfa_opencl_backend;
#endif
#ifdef XFA_WITH_VULKAN
extern const xfa_backend_ops xfa_vulkan_backend;
#endif
#ifdef XFA_WITH_CUDA
extern const xfa_backend_ops xfa_cuda_backend;
#endif

const xfa_backend_ops *xfa_backend_ops_get(xfa_backend backend)
{
    switch (backend) {
    case XFA_BACKEND_CPU: return &xfa_cpu_backend;
#ifdef XFA_WITH_OPENCL
    case XFA_BACKEND_OPENCL: return &xfa_opencl_backend;
#endif
#ifdef XFA_WITH_VULKAN
    case XFA_BACKEND_VULKAN: return &xfa_vulkan_backend;
#endif
#ifdef XFA_WITH_CUDA
    case XFA_BACKEND_CUDA: return &xfa_cuda_backend;
#endif
    default: return NULL;
    }
}

int xfa_backend_compiled(xfa_backend backend) { return xfa_backend_ops_get(backend) != NULL; }

xfa_status xfa_backend_resolve(xfa_backend requested, xfa_backend *out)
{
    if (!out) return XFA_ERROR_NULL_POINTER;
    if (requested != XFA_BACKEND_AUTO) {
        if ((unsigned)requested >= XFA_BACKEND_COUNT_) return XFA_ERROR_INVALID_ARGUMENT;
        *out = requested;
        return XFA_SUCCESS;
    }
    const char *env = getenv("XFA_BACKEND");
    if (env && *env) {
        xfa_backend named;
        if (xfa_backend_from_name(env, &named) != XFA_SUCCESS) {
            xfa_fail(NULL, XFA_ERROR_INVALID_ARGUMENT,
                     "XFA_BACKEND=%s is not one of auto, cpu, opencl, vulkan, cuda", env);
            return XFA_ERROR_INVALID_ARGUMENT;
        }
        if (named != XFA_BACKEND_AUTO) {
            *out = named;
            return XFA_SUCCESS;
        }
    }
    static const xfa_backend order[] = {XFA_BACKEND_CUDA, XFA_BACKEND_VULKAN, XFA_BACKEND_OPENCL};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        int count = 0;
        if (xfa_backend_compiled(order[i]) && xfa_device_count(order[i], &count) == XFA_SUCCESS && count > 0) {
            *out = order[i];
            return XFA_SUCCESS;
        }
    }
    *out = XFA_BACKEND_CPU;
    return XFA_SUCCESS;
}
