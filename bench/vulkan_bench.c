/*
 * vulkan_bench.c - forward-pass throughput of the Vulkan backend.
 *
 *   xfa_vulkan_bench [--long | --quick]
 *
 * fp16, D = 64 and 128, N = 1k..16k with batch * N = 16k tokens and
 * heads = 2048 / D, causal and not. TFLOP/s counts 4*B*H*N^2*D, halved for
 * causal (xfa_attention_flops). Each shape: one warm-up call (builds the
 * pipeline), then calls until 0.25 s have passed (at least 3), wall clock
 * around the calls and the final synchronize; the median of 3 such runs is
 * reported. --long adds N = 131072 (batch 1, 16 heads, D = 128), one call each.
 * --quick: 256 tokens, N = 128 and 256 (a smoke test for CPU drivers).
 * XFA_VULKAN_PATH=scalar selects the scalar path on a coopmat device.
 */
#define _POSIX_C_SOURCE 200809L
#include "xfa.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define CHECK(call)                                                                                           \
    do {                                                                                                      \
        xfa_status st_ = (call);                                                                              \
        if (st_) {                                                                                            \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, xfa_context_last_error(ctx)[0] ?      \
                    xfa_context_last_error(ctx) : xfa_last_error());                                        \
            return 1;                                                                                         \
        }                                                                                                     \
    } while (0)

/* Random f16 values in [-1, 1) as bits (exponent <= 14, so no specials). */
static void fill_f16(uint16_t *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const uint32_t r = (uint32_t)(seed >> 33);
        p[i] = (uint16_t)(((r & 1u) << 15) | ((10u + (r >> 1) % 5u) << 10) | ((r >> 4) & 0x3ffu));
    }
}

static int run_shape(xfa_context *ctx, const char *path, int64_t B, int64_t H, int64_t N, int64_t D, int causal,
                     int single)
{
    const size_t elems = (size_t)(B * N * H * D), bytes = elems * 2;
    xfa_buffer *q = NULL, *k = NULL, *v = NULL, *o = NULL;
    CHECK(xfa_buffer_create(ctx, bytes, &q));
    CHECK(xfa_buffer_create(ctx, bytes, &k));
    CHECK(xfa_buffer_create(ctx, bytes, &v));
    CHECK(xfa_buffer_create(ctx, bytes, &o));
    uint16_t *host = malloc(bytes);
    if (!host) return 1;
    fill_f16(host, elems, 1);
    CHECK(xfa_buffer_upload(q, 0, host, bytes));
    fill_f16(host, elems, 2);
    CHECK(xfa_buffer_upload(k, 0, host, bytes));
    fill_f16(host, elems, 3);
    CHECK(xfa_buffer_upload(v, 0, host, bytes));
    free(host);
    const xfa_tensor tq = xfa_tensor_bshd(q, 0, XFA_DTYPE_F16, B, N, H, D);
    const xfa_tensor tk = xfa_tensor_bshd(k, 0, XFA_DTYPE_F16, B, N, H, D);
    const xfa_tensor tv = xfa_tensor_bshd(v, 0, XFA_DTYPE_F16, B, N, H, D);
    const xfa_tensor to = xfa_tensor_bshd(o, 0, XFA_DTYPE_F16, B, N, H, D);
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.causal = causal;
    xfa_plan plan;
    CHECK(xfa_plan_get(ctx, (uint32_t)D, XFA_DTYPE_F16, &plan));

    CHECK(xfa_attention_forward(ctx, &params, &tq, &tk, &tv, &to, NULL)); /* warm-up: pipeline build */
    CHECK(xfa_context_synchronize(ctx));
    double ms[3];
    int iters = 0;
    const int runs = single ? 1 : 3;
    for (int run = 0; run < runs; run++) {
        const double t0 = now();
        int n = 0;
        do {
            CHECK(xfa_attention_forward(ctx, &params, &tq, &tk, &tv, &to, NULL));
            n++;
        } while (!single && (n < 3 || now() - t0 < 0.25));
        CHECK(xfa_context_synchronize(ctx));
        ms[run] = (now() - t0) * 1e3 / n;
        iters = n;
    }
    qsort(ms, (size_t)runs, sizeof ms[0], cmp_double);
    const double med = ms[runs / 2];
    const double tflops = xfa_attention_flops(B, H, N, N, D, causal) / (med * 1e-3) / 1e12;
    printf("| %s | %lld | %lld | %d | %lld | %lld | %u x %u | %.3f | %.1f | %d |\n", path, (long long)D, (long long)N,
           causal, (long long)B, (long long)H, plan.Br, plan.Bc, med, tflops, iters);
    fflush(stdout);
    xfa_buffer_destroy(&q);
    xfa_buffer_destroy(&k);
    xfa_buffer_destroy(&v);
    xfa_buffer_destroy(&o);
    return 0;
}

int main(int argc, char **argv)
{
    const int long_run = argc > 1 && strcmp(argv[1], "--long") == 0;
    const int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    const int64_t tokens = quick ? 256 : 16384, n_min = quick ? 128 : 1024;
    xfa_context *ctx = NULL;
    if (xfa_context_create(XFA_BACKEND_VULKAN, 0, &ctx)) {
        fprintf(stderr, "no Vulkan context: %s\n", xfa_last_error());
        return 1;
    }
    xfa_device_info info;
    xfa_context_get_info(ctx, &info);
    xfa_plan plan;
    CHECK(xfa_plan_get(ctx, 64, XFA_DTYPE_F16, &plan));
    printf("# xfa vulkan bench: %s, %s, f16 path %s, subgroup %u, shared %llu bytes\n", info.name, info.driver,
           plan.path, info.subgroup_size, (unsigned long long)info.local_mem_bytes);
    printf("| path | D | N | causal | B | H | Br x Bc | ms | TFLOP/s | iters |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    static const int64_t dims[] = {64, 128};
    for (int di = 0; di < 2; di++)
        for (int64_t N = n_min; N <= tokens; N *= 2)
            for (int causal = 0; causal <= 1; causal++)
                if (run_shape(ctx, plan.path, tokens / N, 2048 / dims[di], N, dims[di], causal, 0)) return 1;
    if (long_run)
        for (int causal = 0; causal <= 1; causal++)
            if (run_shape(ctx, plan.path, 1, 16, 131072, 128, causal, 1)) return 1;
    xfa_context_destroy(&ctx);
    return 0;
}
