/*
 * test_opencl_interop.c - the engine-integration API (xfa_opencl.h) on a real
 * OpenCL runtime: the caller's cl_context, queue and cl_mem buffers (with
 * offsets), non-blocking forward with its event, reference counts left as
 * found, and the local-memory-too-small status through the backend's plan.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "xfa_opencl.h"

#include "attention_case.h"
#include "check_run.h"
#include "dtype.h"
#include "reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cl_device_id device;
static cl_context context;
static cl_command_queue queue;
static int test_device; /* the same device as xfa numbers it */

static cl_uint ref_count_mem(cl_mem m)
{
    cl_uint n = 0;
    clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof n, &n, NULL);
    return n;
}

static cl_uint ref_count_context(cl_context c)
{
    cl_uint n = 0;
    clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, sizeof n, &n, NULL);
    return n;
}

/* The caller's problem: Q, K, V, O, LSE packed into one cl_mem after `base` bytes the caller keeps for itself. */
typedef struct packed_problem {
    int64_t B, Sq, Sk, Hq, Hkv, D;
    size_t base, q_at, k_at, v_at, o_at, lse_at, total;
    float *host;
} packed_problem;

static packed_problem packed_make(int64_t B, int64_t Sq, int64_t Sk, int64_t Hq, int64_t Hkv, int64_t D)
{
    packed_problem p = {B, Sq, Sk, Hq, Hkv, D, 256, 0, 0, 0, 0, 0, 0, NULL};
    const size_t qn = (size_t)(B * Sq * Hq * D), kn = (size_t)(B * Sk * Hkv * D);
    p.q_at = 0;
    p.k_at = p.q_at + qn * 4 + 64;
    p.v_at = p.k_at + kn * 4 + 64;
    p.o_at = p.v_at + kn * 4 + 64;
    p.lse_at = p.o_at + qn * 4 + 64;
    p.total = p.lse_at + (size_t)(B * Hq * Sq) * 4;
    p.host = malloc(p.base + p.total);
    uint64_t rng = 42;
    for (size_t i = 0; i < (p.base + p.total) / 4; i++) p.host[i] = (float)xfa_test_rand_normal(&rng);
    return p;
}

START_TEST(test_caller_handles_forward)
{
    const cl_uint ctx_refs = ref_count_context(context);
    xfa_context *ctx = NULL;
    ck_assert_int_eq(xfa_opencl_context_create_from(context, device, queue, &ctx), XFA_SUCCESS);
    ck_assert_ptr_eq(xfa_opencl_context_handle(ctx), context);
    ck_assert_ptr_eq(xfa_opencl_queue_handle(ctx), queue);
    xfa_device_info info;
    xfa_context_get_info(ctx, &info);
    ck_assert_int_eq(info.backend, XFA_BACKEND_OPENCL);
    ck_assert(info.path[0] != '\0');
    ck_assert(info.features & XFA_FEATURE_ENGINE_HANDLES);
    cl_event none;
    ck_assert_int_eq(xfa_opencl_last_event(ctx, &none), XFA_ERROR_INVALID_ARGUMENT);

    /* GQA, Sq != Sk, causal, D = 64, f32: the caller's buffer, xfa's view starting `base` bytes in. */
    packed_problem p = packed_make(2, 37, 53, 4, 2, 64);
    cl_int err;
    cl_mem mem = clCreateBuffer(context, CL_MEM_READ_WRITE, p.base + p.total, NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    ck_assert_int_eq(clEnqueueWriteBuffer(queue, mem, CL_TRUE, 0, p.base + p.total, p.host, 0, NULL, NULL), CL_SUCCESS);
    xfa_buffer *buf = NULL;
    ck_assert_int_eq(xfa_opencl_buffer_wrap(ctx, mem, p.base, p.total, &buf), XFA_SUCCESS);
    ck_assert_uint_eq(ref_count_mem(mem), 2);
    size_t at = 1;
    ck_assert_ptr_eq(xfa_opencl_buffer_handle(buf, &at), mem);
    ck_assert_uint_eq(at, p.base);

    const xfa_tensor q = xfa_tensor_bshd(buf, p.q_at, XFA_DTYPE_F32, p.B, p.Sq, p.Hq, p.D);
    const xfa_tensor k = xfa_tensor_bhsd(buf, p.k_at, XFA_DTYPE_F32, p.B, p.Sk, p.Hkv, p.D);
    const xfa_tensor v = xfa_tensor_bshd(buf, p.v_at, XFA_DTYPE_F32, p.B, p.Sk, p.Hkv, p.D);
    const xfa_tensor o = xfa_tensor_bshd(buf, p.o_at, XFA_DTYPE_F32, p.B, p.Sq, p.Hq, p.D);
    const xfa_tensor lse = xfa_tensor_lse(buf, p.lse_at, p.B, p.Sq, p.Hq);

    /* Gate the caller's in-order queue on a user event: a forward that waited would never return. */
    cl_event gate = clCreateUserEvent(context, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    ck_assert_int_eq(clEnqueueBarrierWithWaitList(queue, 1, &gate, NULL), CL_SUCCESS);
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.causal = 1;
    ck_assert_int_eq(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_SUCCESS);
    cl_event done = NULL;
    ck_assert_int_eq(xfa_opencl_last_event(ctx, &done), XFA_SUCCESS);
    cl_int state = CL_COMPLETE;
    clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, NULL);
    ck_assert_msg(state != CL_COMPLETE, "the forward ran before the queue's gate opened");
    clSetUserEventStatus(gate, CL_COMPLETE);
    ck_assert_int_eq(clWaitForEvents(1, &done), CL_SUCCESS);
    clReleaseEvent(done);
    clReleaseEvent(gate);

    float *out = malloc(p.base + p.total);
    ck_assert_int_eq(clEnqueueReadBuffer(queue, mem, CL_TRUE, 0, p.base + p.total, out, 0, NULL, NULL), CL_SUCCESS);
    /* The caller's bytes before the view and the inputs are untouched. */
    ck_assert_int_eq(memcmp(out, p.host, p.base + p.o_at), 0);

    const xfa_reference_problem rp = xfa_reference_problem_make(
        xfa_host_view_of(&q, (const char *)p.host + p.base), xfa_host_view_of(&k, (const char *)p.host + p.base),
        xfa_host_view_of(&v, (const char *)p.host + p.base), 1.0 / sqrt((double)p.D), true);
    const size_t n_out = (size_t)(p.B * p.Sq * p.Hq * p.D);
    double *o_ref = malloc(n_out * sizeof *o_ref), *lse_ref = malloc((size_t)(p.B * p.Hq * p.Sq) * sizeof *lse_ref);
    ck_assert_int_eq(xfa_reference_forward(&rp, o_ref, lse_ref), XFA_SUCCESS);
    const float *o_got = (const float *)((const char *)out + p.base + p.o_at);
    const float *lse_got = (const float *)((const char *)out + p.base + p.lse_at);
    double err_max = 0, ref_max = 0;
    for (size_t i = 0; i < n_out; i++) {
        err_max = fmax(err_max, fabs(o_got[i] - o_ref[i]));
        ref_max = fmax(ref_max, fabs(o_ref[i]));
    }
    ck_assert_msg(err_max <= 1e-5 * ref_max, "max |o - ref| %g (max |ref| %g)", err_max, ref_max);
    for (size_t i = 0; i < (size_t)(p.B * p.Hq * p.Sq); i++)
        ck_assert_msg(fabs(lse_got[i] - lse_ref[i]) <= 1e-5 * fmax(1.0, fabs(lse_ref[i])), "lse[%zu] %g vs %g", i,
                      lse_got[i], lse_ref[i]);

    /* xfa drops exactly the references it took. */
    xfa_buffer_destroy(&buf);
    ck_assert_uint_eq(ref_count_mem(mem), 1);
    xfa_context_destroy(&ctx);
    clReleaseMemObject(mem); /* a cl_mem holds a reference on its context: compare after it goes */
    ck_assert_uint_eq(ref_count_context(context), ctx_refs);
    free(out);
    free(o_ref);
    free(lse_ref);
    free(p.host);
}
END_TEST

START_TEST(test_wrap_checks)
{
    xfa_context *ctx = NULL;
    ck_assert_int_eq(xfa_opencl_context_create_from(context, device, queue, &ctx), XFA_SUCCESS);
    cl_int err;
    cl_mem mem = clCreateBuffer(context, CL_MEM_READ_WRITE, 1024, NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    xfa_buffer *buf = NULL;
    ck_assert_int_eq(xfa_opencl_buffer_wrap(ctx, mem, 2, 64, &buf), XFA_ERROR_MISALIGNED);
    ck_assert_int_eq(xfa_opencl_buffer_wrap(ctx, mem, 1024, 4, &buf), XFA_ERROR_OUT_OF_BOUNDS);
    ck_assert_int_eq(xfa_opencl_buffer_wrap(ctx, NULL, 0, 4, &buf), XFA_ERROR_NULL_POINTER);
    ck_assert_ptr_null(buf);
    ck_assert_uint_eq(ref_count_mem(mem), 1);

    /* A cl_mem of another cl_context is refused. */
    cl_context other = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    cl_mem foreign = clCreateBuffer(other, CL_MEM_READ_WRITE, 64, NULL, &err);
    ck_assert_int_eq(xfa_opencl_buffer_wrap(ctx, foreign, 0, 64, &buf), XFA_ERROR_WRONG_CONTEXT);
    /* A queue of another context is refused. */
    xfa_context *bad = NULL;
    ck_assert_int_eq(xfa_opencl_context_create_from(other, device, queue, &bad), XFA_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(bad);
    clReleaseMemObject(foreign);
    clReleaseContext(other);

    /* A CPU context is not an OpenCL one. */
    xfa_context *cpu = NULL;
    ck_assert_int_eq(xfa_context_create(XFA_BACKEND_CPU, 0, &cpu), XFA_SUCCESS);
    ck_assert_int_eq(xfa_opencl_buffer_wrap(cpu, mem, 0, 64, &buf), XFA_ERROR_WRONG_CONTEXT);
    ck_assert_ptr_null(xfa_opencl_queue_handle(cpu));
    xfa_context_destroy(&cpu);
    clReleaseMemObject(mem);
    xfa_context_destroy(&ctx);
}
END_TEST

/* A device whose local memory cannot hold the head dim's smallest tile fails with a clear status,
 * through the backend's own plan (M capped by the XFA_OPENCL_LOCAL_MEM_LIMIT hook). */
START_TEST(test_local_memory_too_small)
{
    setenv("XFA_OPENCL_LOCAL_MEM_LIMIT", "16384", 1);
    xfa_context *ctx = NULL;
    const xfa_status created = xfa_opencl_context_create_from(context, device, queue, &ctx);
    unsetenv("XFA_OPENCL_LOCAL_MEM_LIMIT");
    ck_assert_int_eq(created, XFA_SUCCESS);

    xfa_plan plan;
    ck_assert_int_eq(xfa_plan_get(ctx, 256, XFA_DTYPE_F32, &plan), XFA_ERROR_LOCAL_MEMORY_TOO_SMALL);
    ck_assert_ptr_nonnull(strstr(xfa_context_last_error(ctx), "too small"));

    /* The forward call says the same instead of computing anything. */
    xfa_buffer *buf = NULL;
    ck_assert_int_eq(xfa_buffer_create(ctx, 4 * 256 * 4 + 64, &buf), XFA_SUCCESS);
    const xfa_tensor q = xfa_tensor_bshd(buf, 0, XFA_DTYPE_F32, 1, 1, 1, 256);
    const xfa_tensor k = xfa_tensor_bshd(buf, 1024, XFA_DTYPE_F32, 1, 1, 1, 256);
    const xfa_tensor v = xfa_tensor_bshd(buf, 2048, XFA_DTYPE_F32, 1, 1, 1, 256);
    const xfa_tensor o = xfa_tensor_bshd(buf, 3072, XFA_DTYPE_F32, 1, 1, 1, 256);
    ck_assert_int_eq(xfa_attention_forward(ctx, NULL, &q, &k, &v, &o, NULL), XFA_ERROR_LOCAL_MEMORY_TOO_SMALL);
    xfa_buffer_destroy(&buf);

    /* A small head dim still fits, with the smaller tile the capped M gives, and is right. */
    ck_assert_int_eq(xfa_plan_get(ctx, 32, XFA_DTYPE_F32, &plan), XFA_SUCCESS);
    ck_assert_uint_le(plan.local_mem_bytes, 16384);
    xfa_test_case tc = xfa_test_case_make(1, 50, 70, 2, 1, 32, XFA_DTYPE_F32, true, 9100);
    const xfa_test_result r = xfa_test_run_case(ctx, &tc);
    ck_assert_msg(r.status == XFA_SUCCESS && r.passed, "%s", r.message);
    xfa_context_destroy(&ctx);
}
END_TEST

/* A library-made context reports the device and plans that fit it. */
START_TEST(test_info_and_plan)
{
    xfa_context *ctx = NULL;
    ck_assert_int_eq(xfa_context_create(XFA_BACKEND_OPENCL, test_device, &ctx), XFA_SUCCESS);
    xfa_device_info info;
    xfa_context_get_info(ctx, &info);
    ck_assert(info.local_mem_bytes > 0);
    ck_assert(info.max_workgroup_size > 0);
    ck_assert_uint_eq(info.dtypes, 7);
    xfa_plan plan;
    ck_assert_int_eq(xfa_plan_get(ctx, 128, XFA_DTYPE_F16, &plan), XFA_SUCCESS);
    ck_assert_str_eq(plan.path, info.path);
    ck_assert_uint_le(plan.local_mem_bytes, info.local_mem_bytes);
    xfa_context_destroy(&ctx);
}
END_TEST

/* Usage: test_opencl_interop [device] (an index over all platforms' devices, as xfa numbers them). */
int main(int argc, char **argv)
{
    const cl_uint want = argc > 1 ? (cl_uint)atoi(argv[1]) : 0;
    cl_platform_id platforms[8];
    cl_uint n_platforms = 0;
    if (clGetPlatformIDs(8, platforms, &n_platforms) != CL_SUCCESS || n_platforms == 0) {
        printf("SKIP: no OpenCL platform\n");
        return 77;
    }
    cl_uint seen = 0;
    bool found = false;
    for (cl_uint i = 0; i < n_platforms && !found; i++) {
        cl_device_id devices[16];
        cl_uint n = 0;
        if (clGetDeviceIDs(platforms[i], CL_DEVICE_TYPE_ALL, 16, devices, &n) != CL_SUCCESS) continue;
        if (want < seen + n) {
            device = devices[want - seen];
            found = true;
        }
        seen += n;
    }
    if (!found) {
        printf("SKIP: no OpenCL device %u\n", want);
        return 77;
    }
    test_device = (int)want;
    cl_int err;
    context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    if (err == CL_SUCCESS) queue = clCreateCommandQueue(context, device, 0, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "creating the caller's OpenCL context: %d\n", err);
        return 1;
    }
    Suite *s = suite_create("opencl_interop");
    TCase *tc = tcase_create("interop");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_caller_handles_forward);
    tcase_add_test(tc, test_wrap_checks);
    tcase_add_test(tc, test_local_memory_too_small);
    tcase_add_test(tc, test_info_and_plan);
    suite_add_tcase(s, tc);
    const int rc = xfa_check_run(s, 0);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    return rc;
}
