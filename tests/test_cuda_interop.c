/*
 * test_cuda_interop.c - the engine-integration API (xfa_cuda.h) on a real
 * GPU: the caller's device, stream and device memory, the forward enqueued
 * without waiting (it orders after the caller's work on the stream), the
 * caller's memory left alone, and the local-memory cap through the plan.
 * Skips (77) where the CUDA runtime sees no device.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "xfa_cuda.h"

#include "attention_case.h"
#include "check_run.h"
#include "reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_device;
static cudaStream_t stream;

/* A host function that holds the stream until the test opens it. */
static volatile int gate_open;
static void CUDART_CB hold_stream(void *arg)
{
    (void)arg;
    while (!gate_open) {
    }
}

START_TEST(test_caller_stream_and_memory)
{
    xfa_context *ctx = NULL;
    ck_assert_int_eq(xfa_cuda_context_create_from(test_device, stream, &ctx), XFA_SUCCESS);
    ck_assert_ptr_eq(xfa_cuda_stream(ctx), stream);
    ck_assert_int_eq(xfa_cuda_device(ctx), test_device);
    xfa_device_info info;
    xfa_context_get_info(ctx, &info);
    ck_assert_int_eq(info.backend, XFA_BACKEND_CUDA);
    ck_assert(info.features & XFA_FEATURE_ENGINE_HANDLES);

    /* GQA, Sq != Sk, causal, f32, K in BHSD: one caller allocation, xfa's views `base` bytes in. */
    const int64_t B = 2, Sq = 37, Sk = 53, Hq = 4, Hkv = 2, D = 64;
    const size_t qn = (size_t)(B * Sq * Hq * D), kn = (size_t)(B * Sk * Hkv * D), ln = (size_t)(B * Hq * Sq);
    const size_t base = 256, q_at = 0, k_at = qn * 4 + 64, v_at = k_at + kn * 4 + 64, o_at = v_at + kn * 4 + 64,
                 lse_at = o_at + qn * 4 + 64, total = lse_at + ln * 4;
    float *host = malloc(base + total), *out = malloc(base + total);
    uint64_t rng = 7;
    for (size_t i = 0; i < (base + total) / 4; i++) host[i] = (float)xfa_test_rand_normal(&rng);
    void *mem = NULL;
    ck_assert_int_eq(cudaMalloc(&mem, base + total), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(mem, host, base + total, cudaMemcpyHostToDevice), cudaSuccess);
    xfa_buffer *buf = NULL;
    ck_assert_int_eq(xfa_cuda_buffer_wrap(ctx, (char *)mem + base, total, &buf), XFA_SUCCESS);
    ck_assert_ptr_eq(xfa_cuda_buffer_pointer(buf), (char *)mem + base);

    const xfa_tensor q = xfa_tensor_bshd(buf, q_at, XFA_DTYPE_F32, B, Sq, Hq, D);
    const xfa_tensor k = xfa_tensor_bhsd(buf, k_at, XFA_DTYPE_F32, B, Sk, Hkv, D);
    const xfa_tensor v = xfa_tensor_bshd(buf, v_at, XFA_DTYPE_F32, B, Sk, Hkv, D);
    const xfa_tensor o = xfa_tensor_bshd(buf, o_at, XFA_DTYPE_F32, B, Sq, Hq, D);
    const xfa_tensor lse = xfa_tensor_lse(buf, lse_at, B, Sq, Hq);

    /* The caller's stream is held: a forward that waited for its work would never return. */
    gate_open = 0;
    ck_assert_int_eq(cudaLaunchHostFunc(stream, hold_stream, NULL), cudaSuccess);
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.causal = 1;
    ck_assert_int_eq(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_SUCCESS);
    ck_assert_int_eq(cudaStreamQuery(stream), cudaErrorNotReady);
    gate_open = 1;
    ck_assert_int_eq(cudaStreamSynchronize(stream), cudaSuccess);

    ck_assert_int_eq(cudaMemcpy(out, mem, base + total, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_int_eq(memcmp(out, host, base + o_at), 0); /* the caller's bytes and the inputs are untouched */

    const char *h = (const char *)host + base;
    const xfa_reference_problem rp = xfa_reference_problem_make(xfa_host_view_of(&q, h), xfa_host_view_of(&k, h),
                                                                xfa_host_view_of(&v, h), 1.0 / sqrt((double)D), true);
    double *o_ref = malloc(qn * sizeof *o_ref), *lse_ref = malloc(ln * sizeof *lse_ref);
    ck_assert_int_eq(xfa_reference_forward(&rp, o_ref, lse_ref), XFA_SUCCESS);
    const float *o_got = (const float *)((const char *)out + base + o_at);
    const float *lse_got = (const float *)((const char *)out + base + lse_at);
    double err_max = 0, ref_max = 0;
    for (size_t i = 0; i < qn; i++) {
        err_max = fmax(err_max, fabs(o_got[i] - o_ref[i]));
        ref_max = fmax(ref_max, fabs(o_ref[i]));
    }
    ck_assert_msg(err_max <= 1e-5 * ref_max, "max |o - ref| %g (max |ref| %g)", err_max, ref_max);
    for (size_t i = 0; i < ln; i++)
        ck_assert_msg(fabs(lse_got[i] - lse_ref[i]) <= 1e-5 * fmax(1.0, fabs(lse_ref[i])), "lse[%zu] %g vs %g", i,
                      lse_got[i], lse_ref[i]);

    /* Destroying the wrapper leaves the caller's memory allocated and intact. */
    xfa_buffer_destroy(&buf);
    ck_assert_int_eq(cudaMemcpy(out, mem, 64, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_int_eq(memcmp(out, host, 64), 0);

    /* Half precision through the tensor-core path on the caller's stream, checked by the shared harness. */
    xfa_test_case tc = xfa_test_case_make(2, 130, 77, 4, 2, 128, XFA_DTYPE_F16, true, 11);
    xfa_test_result r = xfa_test_run_case(ctx, &tc);
    ck_assert_msg(r.status == XFA_SUCCESS && r.passed, "%s", r.message);
    xfa_context_destroy(&ctx);
    ck_assert_int_eq(cudaStreamQuery(stream), cudaSuccess); /* the stream survives the context */
    cudaFree(mem);
    free(o_ref);
    free(lse_ref);
    free(host);
    free(out);
}
END_TEST

START_TEST(test_wrap_checks)
{
    xfa_context *ctx = NULL;
    ck_assert_int_eq(xfa_cuda_context_create_from(test_device, stream, &ctx), XFA_SUCCESS);
    void *mem = NULL;
    ck_assert_int_eq(cudaMalloc(&mem, 1024), cudaSuccess);
    xfa_buffer *buf = NULL;
    ck_assert_int_eq(xfa_cuda_buffer_wrap(ctx, (char *)mem + 2, 64, &buf), XFA_ERROR_MISALIGNED);
    ck_assert_int_eq(xfa_cuda_buffer_wrap(ctx, NULL, 64, &buf), XFA_ERROR_NULL_POINTER);
    ck_assert_int_eq(xfa_cuda_buffer_wrap(ctx, mem, 0, &buf), XFA_ERROR_INVALID_ARGUMENT);
    static float host_array[16];
    ck_assert_int_eq(xfa_cuda_buffer_wrap(ctx, host_array, sizeof host_array, &buf), XFA_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(buf);
    xfa_context *bad = NULL;
    ck_assert_int_eq(xfa_cuda_context_create_from(-1, stream, &bad), XFA_ERROR_INVALID_DEVICE);
    ck_assert_ptr_null(bad);

    xfa_context *cpu = NULL;
    ck_assert_int_eq(xfa_context_create(XFA_BACKEND_CPU, 0, &cpu), XFA_SUCCESS);
    ck_assert_int_eq(xfa_cuda_buffer_wrap(cpu, mem, 64, &buf), XFA_ERROR_WRONG_CONTEXT);
    ck_assert_int_eq(xfa_cuda_device(cpu), -1);
    xfa_context_destroy(&cpu);
    cudaFree(mem);
    xfa_context_destroy(&ctx);
}
END_TEST

/* With M capped (XFA_CUDA_LOCAL_MEM_LIMIT), the tensor-core tile no longer fits: f16 runs on the
 * generic kernel's smaller tile and is still right; a head dim nothing fits fails clearly. */
START_TEST(test_local_memory_cap)
{
    setenv("XFA_CUDA_LOCAL_MEM_LIMIT", "16384", 1);
    xfa_context *ctx = NULL;
    const xfa_status created = xfa_context_create(XFA_BACKEND_CUDA, test_device, &ctx);
    unsetenv("XFA_CUDA_LOCAL_MEM_LIMIT");
    ck_assert_int_eq(created, XFA_SUCCESS);
    xfa_plan plan;
    ck_assert_int_eq(xfa_plan_get(ctx, 128, XFA_DTYPE_F16, &plan), XFA_SUCCESS);
    ck_assert_str_eq(plan.path, "generic");
    ck_assert_uint_le(plan.local_mem_bytes, 16384);
    xfa_test_case tc = xfa_test_case_make(1, 50, 70, 2, 1, 128, XFA_DTYPE_F16, true, 12);
    xfa_test_result r = xfa_test_run_case(ctx, &tc);
    ck_assert_msg(r.status == XFA_SUCCESS && r.passed, "%s", r.message);
    xfa_context_destroy(&ctx);

    setenv("XFA_CUDA_LOCAL_MEM_LIMIT", "4096", 1);
    ck_assert_int_eq(xfa_context_create(XFA_BACKEND_CUDA, test_device, &ctx), XFA_SUCCESS);
    unsetenv("XFA_CUDA_LOCAL_MEM_LIMIT");
    ck_assert_int_eq(xfa_plan_get(ctx, 256, XFA_DTYPE_F32, &plan), XFA_ERROR_LOCAL_MEMORY_TOO_SMALL);
    ck_assert_ptr_nonnull(strstr(xfa_context_last_error(ctx), "too small"));
    xfa_context_destroy(&ctx);
}
END_TEST

START_TEST(test_info_and_plan)
{
    xfa_context *ctx = NULL;
    ck_assert_int_eq(xfa_context_create(XFA_BACKEND_CUDA, test_device, &ctx), XFA_SUCCESS);
    ck_assert_ptr_nonnull(xfa_cuda_stream(ctx));
    xfa_device_info info;
    xfa_context_get_info(ctx, &info);
    ck_assert_uint_eq(info.subgroup_size, 32);
    ck_assert_uint_gt(info.compute_units, 0);
    ck_assert_uint_ge(info.local_mem_bytes, 48 * 1024);
    ck_assert_uint_eq(info.dtypes, 7);
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, test_device);
    for (uint32_t d = 32; d <= 256; d += 32) {
        xfa_plan plan;
        ck_assert_int_eq(xfa_plan_get(ctx, d, XFA_DTYPE_BF16, &plan), XFA_SUCCESS);
        ck_assert_uint_le(plan.local_mem_bytes, info.local_mem_bytes);
        if (major >= 8) ck_assert_str_eq(plan.path, d == 160 || d == 224 ? "generic" : "mma.sync");
        ck_assert_int_eq(xfa_plan_get(ctx, d, XFA_DTYPE_F32, &plan), XFA_SUCCESS);
        ck_assert_str_eq(plan.path, "generic");
    }
    xfa_context_destroy(&ctx);
}
END_TEST

/* Usage: test_cuda_interop [device]. */
int main(int argc, char **argv)
{
    test_device = argc > 1 ? atoi(argv[1]) : 0;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count <= test_device) {
        printf("SKIP: the CUDA runtime sees no device %d\n", test_device);
        return 77;
    }
    if (cudaSetDevice(test_device) != cudaSuccess || cudaStreamCreate(&stream) != cudaSuccess) {
        fprintf(stderr, "cannot create a CUDA stream on device %d\n", test_device);
        return 1;
    }
    Suite *s = suite_create("cuda_interop");
    TCase *tc = tcase_create("interop");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_caller_stream_and_memory);
    tcase_add_test(tc, test_wrap_checks);
    tcase_add_test(tc, test_local_memory_cap);
    tcase_add_test(tc, test_info_and_plan);
    suite_add_tcase(s, tc);
    const int rc = xfa_check_run(s, false);
    cudaStreamDestroy(stream);
    return rc;
}
