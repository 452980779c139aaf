/* cli_timer_cuda.c - cli_timer.h through CUDA events on the context's stream (xfa_cuda_stream). */
#include "cli_timer.h"

#include "xfa_cuda.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>

struct cli_timer {
    cudaStream_t stream;
    cudaEvent_t start, end;
};

static int is_cuda(xfa_context *ctx)
{
    xfa_device_info info;
    return xfa_context_get_info(ctx, &info) == XFA_SUCCESS && info.backend == XFA_BACKEND_CUDA;
}

cli_timer *cli_timer_create(xfa_context *ctx)
{
    if (!is_cuda(ctx) || cudaSetDevice(xfa_cuda_device(ctx)) != cudaSuccess) return NULL;
    cli_timer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->stream = xfa_cuda_stream(ctx);
    if (cudaEventCreate(&t->start) != cudaSuccess || cudaEventCreate(&t->end) != cudaSuccess) {
        cli_timer_destroy(t);
        return NULL;
    }
    return t;
}

void cli_timer_start(cli_timer *t) { cudaEventRecord(t->start, t->stream); }

double cli_timer_stop(cli_timer *t)
{
    float ms = 0.0f;
    if (cudaEventRecord(t->end, t->stream) != cudaSuccess || cudaEventSynchronize(t->end) != cudaSuccess ||
        cudaEventElapsedTime(&ms, t->start, t->end) != cudaSuccess)
        return -1.0;
    return ms * 1e-3;
}

void cli_timer_destroy(cli_timer *t)
{
    if (!t) return;
    if (t->start) cudaEventDestroy(t->start);
    if (t->end) cudaEventDestroy(t->end);
    free(t);
}

const char *cli_timer_method(xfa_context *ctx) { return is_cuda(ctx) ? "cuda-events" : "host-clock"; }
