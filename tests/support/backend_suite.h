/* backend_suite.h - the main() of a test suite that runs on one backend named on the command line. */
#ifndef XFA_BACKEND_SUITE_H
#define XFA_BACKEND_SUITE_H

#include "check_run.h"
#include "xfa.h"

#include <stdio.h>
#include <stdlib.h>

/*
 * Opens device argv[2] (default 0) of backend argv[1] into *ctx and *info and runs
 * make_suite's suite on it. Exit status 77 (CTest's "skipped") when the backend sees
 * no such device or the device lacks one of the `required` features (`what` names them).
 */
static inline int xfa_run_backend_suite(int argc, char **argv, uint32_t required, const char *what,
                                        Suite *(*make_suite)(const char *backend), xfa_context **ctx,
                                        xfa_device_info *info)
{
    xfa_backend backend;
    if (argc < 2 || xfa_backend_from_name(argv[1], &backend) != XFA_SUCCESS || backend == XFA_BACKEND_AUTO) {
        fprintf(stderr, "usage: %s <cpu|opencl|vulkan|cuda> [device]\n", argv[0]);
        return 2;
    }
    const int device = argc > 2 ? atoi(argv[2]) : 0;
    int count = 0;
    if (xfa_device_count(backend, &count) != XFA_SUCCESS || count <= device) {
        printf("SKIP: the %s backend sees no device %d (%s)\n", argv[1], device, xfa_last_error());
        return 77;
    }
    if (xfa_context_create(backend, device, ctx) != XFA_SUCCESS) {
        fprintf(stderr, "xfa_context_create(%s): %s\n", argv[1], xfa_last_error());
        return 1;
    }
    xfa_context_get_info(*ctx, info);
    if ((info->features & required) != required) {
        printf("SKIP: the %s backend (%s path) has no %s\n", argv[1], info->path, what);
        xfa_context_destroy(ctx);
        return 77;
    }
    printf("backend %s, device %s, path %s, M = %llu bytes\n", argv[1], info->name, info->path,
           (unsigned long long)info->local_mem_bytes);
    /* GPU runtimes may not survive fork(); the CPU backend can be isolated per test. */
    const int rc = xfa_check_run(make_suite(argv[1]), backend == XFA_BACKEND_CPU);
    xfa_context_destroy(ctx);
    return rc;
}

#endif
