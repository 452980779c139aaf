/*
 * opencl_bench.c - forward-pass throughput of the OpenCL backend.
 *
 *   xfa_opencl_bench --list                 OpenCL devices with their index and path
 *   xfa_opencl_bench [--device N] [--dims 64,128] [--tokens 16384] [--reps R] [--long]
 *
 * Shapes follow the FlashAttention benchmarks: fp16, batch * N = tokens,
 * heads = 2048 / D, N = 1k .. tokens, causal and not; each shape runs on
 * every path the device has (XFA_OPENCL_PATH picks the path when the context
 * is made). TFLOP/s counts 4*B*H*N^2*D, halved for causal (xfa_attention_flops).
 * Median of R timed calls after two warm-ups, each call timed to completion.
 * --long adds one N = 131072 call (batch 1, 16 heads, D = 128): extra memory
 * beyond Q, K, V, O, LSE is O(N).
 * Prints one Markdown table row per measurement.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, setenv */
#include "xfa.h"

#include "dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        xfa_status st_ = (call);                                                                   \
        if (st_) {                                                                                 \
            fprintf(stderr, "%s: %s (%s)\n", #call, xfa_status_name(st_),                          \
                    ctx ? xfa_context_last_error(ctx) : xfa_last_error());                         \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

/* One shape on one context: prints a row; returns the median seconds or -1. */
static double run_shape(xfa_context *ctx, int64_t B, int64_t N, int64_t H, int64_t D, int causal, int reps)
{
    const size_t elems = (size_t)(B * N * H * D), bytes = elems * 2;
    xfa_buffer *q = NULL, *k = NULL, *v = NULL, *o = NULL, *lse = NULL;
    CHECK(xfa_buffer_create(ctx, bytes, &q));
    CHECK(xfa_buffer_create(ctx, bytes, &k));
    CHECK(xfa_buffer_create(ctx, bytes, &v));
    CHECK(xfa_buffer_create(ctx, bytes, &o));
    CHECK(xfa_buffer_create(ctx, (size_t)(B * H * N) * 4, &lse));
    uint16_t *host = malloc(bytes);
    uint64_t s = 12345;
    for (size_t i = 0; i < elems; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        host[i] = xfa_f32_to_f16((float)((double)(s >> 40) / (double)(1ull << 24) * 2.0 - 1.0));
    }
    CHECK(xfa_buffer_upload(q, 0, host, bytes));
    CHECK(xfa_buffer_upload(k, 0, host, bytes));
    CHECK(xfa_buffer_upload(v, 0, host, bytes));
    free(host);
    const xfa_tensor tq = xfa_tensor_bshd(q, 0, XFA_DTYPE_F16, B, N, H, D);
    const xfa_tensor tk = xfa_tensor_bshd(k, 0, XFA_DTYPE_F16, B, N, H, D);
    const xfa_tensor tv = xfa_tensor_bshd(v, 0, XFA_DTYPE_F16, B, N, H, D);
    const xfa_tensor to = xfa_tensor_bshd(o, 0, XFA_DTYPE_F16, B, N, H, D);
    const xfa_tensor tl = xfa_tensor_lse(lse, 0, B, N, H);
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.causal = causal;
    double times[64];
    if (reps > 64) reps = 64;
    for (int r = -2; r < reps; r++) {
        const double t0 = now();
        CHECK(xfa_attention_forward(ctx, &params, &tq, &tk, &tv, &to, &tl));
        CHECK(xfa_context_synchronize(ctx));
        if (r >= 0) times[r] = now() - t0;
    }
    qsort(times, (size_t)reps, sizeof times[0], cmp_double);
    const double t = times[reps / 2];
    xfa_device_info info;
    xfa_context_get_info(ctx, &info);
    xfa_plan plan;
    xfa_plan_get(ctx, (uint32_t)D, XFA_DTYPE_F16, &plan);
    const double tflops = xfa_attention_flops(B, H, N, N, D, causal) / t * 1e-12;
    printf("| xfa opencl %s | %lld | %lld | %lld | %lld | %s | %u x %u | %.3f | %.1f |\n", plan.path, (long long)D,
           (long long)N, (long long)B, (long long)H, causal ? "yes" : "no", plan.Br, plan.Bc, t * 1e3, tflops);
    fflush(stdout);
    xfa_buffer_destroy(&q);
    xfa_buffer_destroy(&k);
    xfa_buffer_destroy(&v);
    xfa_buffer_destroy(&o);
    xfa_buffer_destroy(&lse);
    return t;
}

static int list_devices(void)
{
    int count = 0;
    xfa_device_count(XFA_BACKEND_OPENCL, &count);
    for (int i = 0; i < count; i++) {
        xfa_device_info info;
        if (xfa_device_get_info(XFA_BACKEND_OPENCL, i, &info) == XFA_SUCCESS)
            printf("%d\t%s\t%s\t%s\tM=%llu\n", i, info.name, info.vendor, info.path,
                   (unsigned long long)info.local_mem_bytes);
    }
    return 0;
}

/* The first device whose path is not the portable one (a GPU with tensor cores), else 0. */
static int default_device(void)
{
    int count = 0;
    xfa_device_count(XFA_BACKEND_OPENCL, &count);
    for (int i = 0; i < count; i++) {
        xfa_device_info info;
        if (xfa_device_get_info(XFA_BACKEND_OPENCL, i, &info) == XFA_SUCCESS && strcmp(info.path, "portable") != 0)
            return i;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int device = -1, reps = 5, tokens = 16384, long_run = 0;
    int dims[8] = {64, 128}, n_dims = 2;
    const char *paths = "default,portable";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--list")) return list_devices();
        if (!strcmp(argv[i], "--device") && i + 1 < argc) device = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--paths") && i + 1 < argc) paths = argv[++i];
        else if (!strcmp(argv[i], "--long")) long_run = 1;
        else if (!strcmp(argv[i], "--dims") && i + 1 < argc) {
            n_dims = 0;
            for (char *tok = strtok(argv[++i], ","); tok && n_dims < 8; tok = strtok(NULL, ",")) dims[n_dims++] = atoi(tok);
        } else {
            fprintf(stderr, "usage: %s [--list] [--device N] [--dims 64,128] [--tokens T] [--reps R] [--paths default,portable] [--long]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (device < 0) device = default_device();

    printf("| kernel | D | N | batch | heads | causal | Br x Bc | ms | TFLOP/s |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    char list[128];
    snprintf(list, sizeof list, "%s", paths);
    for (char *path = strtok(list, ","); path; path = strtok(NULL, ",")) {
        /* The path is fixed when the context is made. */
        if (strcmp(path, "default") == 0) unsetenv("XFA_OPENCL_PATH");
        else setenv("XFA_OPENCL_PATH", path, 1);
        xfa_context *ctx = NULL;
        if (xfa_context_create(XFA_BACKEND_OPENCL, device, &ctx)) {
            fprintf(stderr, "xfa_context_create: %s\n", xfa_last_error());
            return 1;
        }
        xfa_device_info info;
        xfa_context_get_info(ctx, &info);
        fprintf(stderr, "device %d: %s (%s), %s, path %s\n", device, info.name, info.vendor, info.driver, info.path);
        for (int di = 0; di < n_dims; di++)
            for (int causal = 0; causal <= 1; causal++)
                for (int64_t n = 1024; n <= tokens; n *= 2)
                    run_shape(ctx, tokens / n, n, 2048 / dims[di], dims[di], causal, reps);
        if (long_run && strcmp(path, "default") == 0) run_shape(ctx, 1, 131072, 16, 128, 1, 1);
        xfa_context_destroy(&ctx);
    }
    return 0;
}
