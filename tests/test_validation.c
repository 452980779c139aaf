/* test_validation.c - every argument check has its own status and a message naming the argument. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "check_run.h"
#include "internal.h" /* white-box: narrow a context's reported capabilities */
#include "xfa.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, S = 5, H = 4, D = 64 };
#define ELEMS ((size_t)B * S * H * D)

static xfa_context *ctx;
static xfa_buffer *buf; /* room for q, k, v, o, lse side by side, f32 */
static xfa_tensor q, k, v, o, lse;

static void setup(void)
{
    ck_assert_int_eq(xfa_context_create(XFA_BACKEND_CPU, 0, &ctx), XFA_SUCCESS);
    ck_assert_int_eq(xfa_buffer_create(ctx, 5 * ELEMS * 4 + 64, &buf), XFA_SUCCESS);
    q = xfa_tensor_bshd(buf, 0, XFA_DTYPE_F32, B, S, H, D);
    k = xfa_tensor_bshd(buf, ELEMS * 4, XFA_DTYPE_F32, B, S, H, D);
    v = xfa_tensor_bshd(buf, 2 * ELEMS * 4, XFA_DTYPE_F32, B, S, H, D);
    o = xfa_tensor_bshd(buf, 3 * ELEMS * 4, XFA_DTYPE_F32, B, S, H, D);
    lse = xfa_tensor_lse(buf, 4 * ELEMS * 4, B, S, H);
    float *zeros = calloc(5 * ELEMS, 4);
    for (size_t i = 0; i < 3 * ELEMS; i++) zeros[i] = (float)(i % 7) * 0.1f;
    ck_assert_int_eq(xfa_buffer_upload(buf, 0, zeros, 5 * ELEMS * 4), XFA_SUCCESS);
    free(zeros);
}

static void teardown(void)
{
    xfa_buffer_destroy(&buf);
    ck_assert_ptr_null(buf);
    xfa_context_destroy(&ctx);
    ck_assert_ptr_null(ctx);
}

static xfa_status forward(void) { return xfa_attention_forward(ctx, NULL, &q, &k, &v, &o, &lse); }

/* Asserts the status and that the message contains `needle`. */
#define EXPECT(call, status, needle)                                                                      \
    do {                                                                                                  \
        const xfa_status st_ = (call);                                                                    \
        ck_assert_msg(st_ == (status), "%s: got %s, want %s (%s)", #call, xfa_status_name(st_), #status, \
                      xfa_context_last_error(ctx));                                                       \
        ck_assert_msg(strstr(xfa_context_last_error(ctx), (needle)) != NULL, "message '%s' lacks '%s'",   \
                      xfa_context_last_error(ctx), (needle));                                             \
    } while (0)

START_TEST(test_valid_call_succeeds)
{
    ck_assert_int_eq(forward(), XFA_SUCCESS);
    ck_assert_str_eq(xfa_context_last_error(ctx), "");
}
END_TEST

START_TEST(test_null_pointers)
{
    ck_assert_int_eq(xfa_attention_forward(NULL, NULL, &q, &k, &v, &o, NULL), XFA_ERROR_NULL_POINTER);
    EXPECT(xfa_attention_forward(ctx, NULL, NULL, &k, &v, &o, NULL), XFA_ERROR_NULL_POINTER, "q is NULL");
    EXPECT(xfa_attention_forward(ctx, NULL, &q, &k, &v, NULL, NULL), XFA_ERROR_NULL_POINTER, "o is NULL");
    v.buffer = NULL;
    EXPECT(forward(), XFA_ERROR_NULL_POINTER, "v.buffer");
    ck_assert_int_eq(xfa_context_create(XFA_BACKEND_CPU, 0, NULL), XFA_ERROR_NULL_POINTER);
    ck_assert_int_eq(xfa_buffer_create(ctx, 16, NULL), XFA_ERROR_NULL_POINTER);
    EXPECT(xfa_buffer_upload(buf, 0, NULL, 4), XFA_ERROR_NULL_POINTER, "src");
    EXPECT(xfa_buffer_download(buf, 0, NULL, 4), XFA_ERROR_NULL_POINTER, "dst");
    EXPECT(xfa_plan_get(ctx, 64, XFA_DTYPE_F32, NULL), XFA_ERROR_NULL_POINTER, "plan");
    xfa_context_destroy(NULL); /* no-ops */
    xfa_buffer_destroy(NULL);
}
END_TEST

START_TEST(test_dtypes)
{
    k.dtype = (xfa_dtype)7;
    EXPECT(forward(), XFA_ERROR_INVALID_DTYPE, "k.dtype");
    k.dtype = XFA_DTYPE_F16;
    EXPECT(forward(), XFA_ERROR_DTYPE_MISMATCH, "k.dtype is f16");
    k.dtype = XFA_DTYPE_F32;
    lse.dtype = XFA_DTYPE_F16;
    EXPECT(forward(), XFA_ERROR_DTYPE_MISMATCH, "lse");
    xfa_plan plan;
    EXPECT(xfa_plan_get(ctx, 64, (xfa_dtype)-1, &plan), XFA_ERROR_INVALID_DTYPE, "dtype");
}
END_TEST

START_TEST(test_shape_mismatches)
{
    k.shape[1] = 4; /* k and v disagree on seqlen */
    EXPECT(forward(), XFA_ERROR_SHAPE_MISMATCH, "k.shape[1]");
    k.shape[1] = S;
    v.shape[0] = 1;
    EXPECT(forward(), XFA_ERROR_SHAPE_MISMATCH, "v.shape[0] (batch)");
    v.shape[0] = B;
    o.shape[2] = 2;
    EXPECT(forward(), XFA_ERROR_SHAPE_MISMATCH, "o.shape[2] (heads)");
    o.shape[2] = H;
    k = xfa_tensor_bshd(buf, ELEMS * 4, XFA_DTYPE_F32, B, S, H, 32);
    EXPECT(forward(), XFA_ERROR_SHAPE_MISMATCH, "head_dim");
    k = xfa_tensor_bshd(buf, ELEMS * 4, XFA_DTYPE_F32, B, S, 3, D);
    v = xfa_tensor_bshd(buf, 2 * ELEMS * 4, XFA_DTYPE_F32, B, S, 3, D);
    EXPECT(forward(), XFA_ERROR_SHAPE_MISMATCH, "multiple of key/value heads");
    k = xfa_tensor_bshd(buf, ELEMS * 4, XFA_DTYPE_F32, B, S, 2, D); /* GQA 4:2 is fine */
    v = xfa_tensor_bshd(buf, 2 * ELEMS * 4, XFA_DTYPE_F32, B, S, 2, D);
    ck_assert_int_eq(forward(), XFA_SUCCESS);
    lse.shape[2] = H - 1;
    EXPECT(forward(), XFA_ERROR_SHAPE_MISMATCH, "lse.shape[2]");
    lse.shape[2] = H;
    lse.shape[1] = S - 1;
    EXPECT(forward(), XFA_ERROR_SHAPE_MISMATCH, "lse.shape[1]");
}
END_TEST

START_TEST(test_empty_and_negative_dims)
{
    q.shape[1] = 0;
    EXPECT(forward(), XFA_ERROR_EMPTY_TENSOR, "q.shape[1] (seqlen) is 0");
    q.shape[1] = S;
    k.shape[0] = -3;
    EXPECT(forward(), XFA_ERROR_EMPTY_TENSOR, "k.shape[0] (batch) is -3");
}
END_TEST

START_TEST(test_head_dims)
{
    static const int64_t bad[] = {16, 48, 100, 288, 512};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const int64_t d = bad[i];
        q = xfa_tensor_bshd(buf, 0, XFA_DTYPE_F32, 1, 2, 1, d);
        k = xfa_tensor_bshd(buf, ELEMS * 4, XFA_DTYPE_F32, 1, 2, 1, d);
        v = xfa_tensor_bshd(buf, 2 * ELEMS * 4, XFA_DTYPE_F32, 1, 2, 1, d);
        o = xfa_tensor_bshd(buf, 3 * ELEMS * 4, XFA_DTYPE_F32, 1, 2, 1, d);
        lse = xfa_tensor_lse(buf, 4 * ELEMS * 4, 1, 2, 1);
        EXPECT(forward(), XFA_ERROR_UNSUPPORTED_HEAD_DIM, "head_dim");
    }
    xfa_plan plan;
    EXPECT(xfa_plan_get(ctx, 80, XFA_DTYPE_F32, &plan), XFA_ERROR_UNSUPPORTED_HEAD_DIM, "head_dim 80");
}
END_TEST

START_TEST(test_strides)
{
    q.stride[1] = -q.stride[1];
    EXPECT(forward(), XFA_ERROR_BAD_STRIDES, "q.stride[1]");
    q = xfa_tensor_bshd(buf, 0, XFA_DTYPE_F32, B, S, H, D);
    k.stride[2] = 0; /* heads broadcast onto each other */
    EXPECT(forward(), XFA_ERROR_BAD_STRIDES, "k.stride[2]");
    k = xfa_tensor_bshd(buf, ELEMS * 4, XFA_DTYPE_F32, B, S, H, D);
    v.stride[2] = D / 2; /* heads half-overlap */
    EXPECT(forward(), XFA_ERROR_BAD_STRIDES, "share memory");
    v = xfa_tensor_bshd(buf, 2 * ELEMS * 4, XFA_DTYPE_F32, B, S, H, D);
    o.stride[1] = 1; /* seqlen and head_dim interleave */
    EXPECT(forward(), XFA_ERROR_BAD_STRIDES, "o:");
    o = xfa_tensor_bshd(buf, 3 * ELEMS * 4, XFA_DTYPE_F32, B, S, H, D);
    /* A dimension of size 1 may have any stride, 0 included. */
    q.shape[0] = k.shape[0] = v.shape[0] = o.shape[0] = lse.shape[0] = 1;
    q.stride[0] = 0;
    ck_assert_int_eq(forward(), XFA_SUCCESS);
}
END_TEST

START_TEST(test_alignment_bounds_overflow)
{
    k.offset += 2; /* not a multiple of 4 bytes */
    EXPECT(forward(), XFA_ERROR_MISALIGNED, "k.offset");
    k.offset -= 2;
    lse.offset = xfa_buffer_size(buf) - 4 * (size_t)H; /* the last rows pass the end of the buffer */
    EXPECT(forward(), XFA_ERROR_OUT_OF_BOUNDS, "lse reaches byte");
    lse = xfa_tensor_lse(buf, 4 * ELEMS * 4, B, S, H);
    v = xfa_tensor_bshd(buf, 2 * ELEMS * 4, XFA_DTYPE_F32, (int64_t)1 << 40, (int64_t)1 << 30, H, D);
    EXPECT(forward(), XFA_ERROR_SIZE_OVERFLOW, "v:");
    v = xfa_tensor_bshd(buf, SIZE_MAX - 7, XFA_DTYPE_F32, B, S, H, D);
    EXPECT(forward(), XFA_ERROR_SIZE_OVERFLOW, "v:");
    v = xfa_tensor_bshd(buf, 2 * ELEMS * 4, XFA_DTYPE_F32, B, S, H, D);
    v.stride[0] = INT64_MAX / 2;
    EXPECT(forward(), XFA_ERROR_SIZE_OVERFLOW, "v:");
}
END_TEST

START_TEST(test_aliasing)
{
    o = q; /* in-place output */
    EXPECT(forward(), XFA_ERROR_ALIASING, "o overlaps q");
    o = xfa_tensor_bshd(buf, 3 * ELEMS * 4, XFA_DTYPE_F32, B, S, H, D);
    lse.offset = 3 * ELEMS * 4 + 64; /* inside o */
    EXPECT(forward(), XFA_ERROR_ALIASING, "lse overlaps o");
}
END_TEST

START_TEST(test_wrong_context)
{
    xfa_context *other = NULL;
    xfa_buffer *foreign = NULL;
    ck_assert_int_eq(xfa_context_create(XFA_BACKEND_CPU, 0, &other), XFA_SUCCESS);
    ck_assert_int_eq(xfa_buffer_create(other, ELEMS * 4, &foreign), XFA_SUCCESS);
    v.buffer = foreign;
    v.offset = 0;
    EXPECT(forward(), XFA_ERROR_WRONG_CONTEXT, "v.buffer");
    xfa_buffer_destroy(&foreign);
    xfa_context_destroy(&other);
}
END_TEST

START_TEST(test_params)
{
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.softmax_scale = NAN;
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_INVALID_ARGUMENT, "softmax_scale");
    params.softmax_scale = INFINITY;
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_INVALID_ARGUMENT, "softmax_scale");
}
END_TEST

START_TEST(test_extras)
{
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.window_left = -2;
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_INVALID_ARGUMENT, "window_left = -2");
    params.window_left = 4;
    params.window_right = 2;
    params.causal = 1;
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_INVALID_ARGUMENT, "causal means");
    params.causal = 0;
    ck_assert_int_eq(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_SUCCESS);
    params.softcap = -1.0f;
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_INVALID_ARGUMENT, "softcap");
    params.softcap = NAN;
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_INVALID_ARGUMENT, "softcap");
    params.softcap = 0.0f;

    /* ALiBi slopes live after the LSE in the same buffer: (1, 1, H, 1) f32 */
    const size_t tail = 4 * ELEMS * 4 + (size_t)B * S * H * 4;
    xfa_tensor slopes = xfa_tensor_bshd(buf, tail, XFA_DTYPE_F32, 1, 1, H, 1);
    params.alibi_slopes = &slopes;
    ck_assert_int_eq(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_SUCCESS);
    slopes.shape[2] = H - 1;
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_SHAPE_MISMATCH, "alibi_slopes has shape");
    slopes = xfa_tensor_bshd(buf, tail, XFA_DTYPE_F16, 1, 1, H, 1);
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_DTYPE_MISMATCH, "alibi_slopes.dtype");
    params.alibi_slopes = NULL;

    /* bias (1, S, 1, S) f32 in the k region (inputs may share memory; only outputs may not) */
    xfa_tensor bias = xfa_tensor_bshd(buf, ELEMS * 4, XFA_DTYPE_F32, 1, S, 1, S);
    params.bias = &bias;
    ck_assert_int_eq(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_SUCCESS);
    bias.shape[3] = S + 1;
    bias.stride[1] = S + 1;
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_SHAPE_MISMATCH, "bias has shape");
    bias = xfa_tensor_bshd(buf, ELEMS * 4, XFA_DTYPE_BF16, 1, S, 1, S);
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_DTYPE_MISMATCH, "bias.dtype");
    bias = xfa_tensor_bshd(buf, 3 * ELEMS * 4, XFA_DTYPE_F32, 1, S, 1, S); /* inside o */
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_ALIASING, "o overlaps bias");
    params.bias = NULL;

    /* a device without the feature */
    params.window_left = 3;
    params.window_right = -1;
    ctx->info.features &= ~(uint32_t)XFA_FEATURE_WINDOW;
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_UNSUPPORTED_FEATURE, "sliding window");
    params.window_left = -1;
    params.causal = 1; /* causal alone is not a window */
    ck_assert_int_eq(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_SUCCESS);
    params.softcap = 1.0f;
    ctx->info.features &= ~(uint32_t)XFA_FEATURE_SOFTCAP;
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_UNSUPPORTED_FEATURE, "softcap");
}
END_TEST

START_TEST(test_varlen_arguments)
{
    /* offsets (3 sequences) in the tail of the buffer, after the LSE */
    const size_t tail = 4 * ELEMS * 4 + (size_t)B * S * H * 4;
    xfa_tensor cu = xfa_tensor_bshd(buf, tail, XFA_DTYPE_I32, 4, 1, 1, 1);
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.cu_seqlens_q = &cu;
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_NULL_POINTER, "cu_seqlens_k");
    params.cu_seqlens_k = &cu;
    params.max_seqlen_q = 3;
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_SHAPE_MISMATCH, "q.shape[0] is 2");
    q.shape[0] = k.shape[0] = v.shape[0] = o.shape[0] = lse.shape[0] = 1;
    params.max_seqlen_q = 0;
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_INVALID_ARGUMENT, "max_seqlen_q");
    params.max_seqlen_q = 3;
    xfa_tensor cu_f32 = xfa_tensor_bshd(buf, tail, XFA_DTYPE_F32, 4, 1, 1, 1);
    params.cu_seqlens_k = &cu_f32;
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_DTYPE_MISMATCH, "i32");
    params.cu_seqlens_k = &cu;
    /* offsets 0, 2, 1, 5: decreasing, and past S = 5 rows is fine only up to 5 */
    const int32_t bad[4] = {0, 2, 1, 5};
    ck_assert_int_eq(xfa_buffer_upload(buf, tail, bad, sizeof bad), XFA_SUCCESS);
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_OUT_OF_BOUNDS, "cu_seqlens_q[2]");
    const int32_t good[4] = {0, 2, 2, 5};
    ck_assert_int_eq(xfa_buffer_upload(buf, tail, good, sizeof good), XFA_SUCCESS);
    ck_assert_int_eq(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_SUCCESS);
    params.max_seqlen_q = 2; /* the last sequence has 3 rows */
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_OUT_OF_BOUNDS, "max_seqlen_q = 2");
}
END_TEST

START_TEST(test_buffers)
{
    xfa_buffer *b = NULL;
    EXPECT(xfa_buffer_create(ctx, 0, &b), XFA_ERROR_INVALID_ARGUMENT, "size is 0");
    char host[16] = {0};
    EXPECT(xfa_buffer_upload(buf, xfa_buffer_size(buf) - 8, host, 16), XFA_ERROR_OUT_OF_BOUNDS, "passes the end");
    EXPECT(xfa_buffer_download(buf, SIZE_MAX, host, 16), XFA_ERROR_OUT_OF_BOUNDS, "passes the end");
    ck_assert_int_eq(xfa_buffer_upload(buf, 0, host, 0), XFA_SUCCESS);
}
END_TEST

START_TEST(test_contexts_and_backends)
{
    xfa_context *c = NULL;
    ck_assert_int_eq(xfa_context_create(XFA_BACKEND_CPU, 1, &c), XFA_ERROR_INVALID_DEVICE);
    ck_assert_ptr_nonnull(strstr(xfa_last_error(), "device index 1"));
    ck_assert_int_eq(xfa_context_create(XFA_BACKEND_CPU, -1, &c), XFA_ERROR_INVALID_DEVICE);
    ck_assert_int_eq(xfa_context_create((xfa_backend)42, 0, &c), XFA_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(c);
    for (int b = XFA_BACKEND_CPU; b < XFA_BACKEND_COUNT_; b++)
        if (!xfa_backend_compiled((xfa_backend)b)) {
            ck_assert_int_eq(xfa_context_create((xfa_backend)b, 0, &c), XFA_ERROR_BACKEND_NOT_COMPILED);
            ck_assert_ptr_nonnull(strstr(xfa_last_error(), "not compiled"));
        }
    xfa_device_info info;
    ck_assert_int_eq(xfa_device_get_info(XFA_BACKEND_CPU, 3, &info), XFA_ERROR_INVALID_DEVICE);
    ck_assert_int_eq(xfa_device_get_info(XFA_BACKEND_CPU, 0, &info), XFA_SUCCESS);
    ck_assert_uint_gt(info.local_mem_bytes, 0);
}
END_TEST

START_TEST(test_auto_backend_env)
{
    xfa_backend b;
    setenv("XFA_BACKEND", "CPU", 1);
    ck_assert_int_eq(xfa_backend_resolve(XFA_BACKEND_AUTO, &b), XFA_SUCCESS);
    ck_assert_int_eq(b, XFA_BACKEND_CPU);
    setenv("XFA_BACKEND", "quantum", 1);
    ck_assert_int_eq(xfa_backend_resolve(XFA_BACKEND_AUTO, &b), XFA_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(xfa_last_error(), "quantum"));
    unsetenv("XFA_BACKEND");
    ck_assert_int_eq(xfa_backend_resolve(XFA_BACKEND_AUTO, &b), XFA_SUCCESS);
    ck_assert(xfa_backend_compiled(b));
}
END_TEST

START_TEST(test_names)
{
    /* every status has a distinct sentence and name */
    for (int a = 0; a < XFA_STATUS_COUNT_; a++) {
        ck_assert_ptr_nonnull(xfa_status_string((xfa_status)a));
        ck_assert_str_ne(xfa_status_string((xfa_status)a), "unknown status");
        for (int b2 = a + 1; b2 < XFA_STATUS_COUNT_; b2++) {
            ck_assert_str_ne(xfa_status_string((xfa_status)a), xfa_status_string((xfa_status)b2));
            ck_assert_str_ne(xfa_status_name((xfa_status)a), xfa_status_name((xfa_status)b2));
        }
    }
    ck_assert_str_eq(xfa_status_string((xfa_status)999), "unknown status");
    ck_assert_str_eq(xfa_status_name(XFA_ERROR_ALIASING), "XFA_ERROR_ALIASING");
    xfa_dtype dt;
    ck_assert_int_eq(xfa_dtype_from_name("bfloat16", &dt), XFA_SUCCESS);
    ck_assert_int_eq(dt, XFA_DTYPE_BF16);
    ck_assert_int_eq(xfa_dtype_from_name("f8", &dt), XFA_ERROR_INVALID_DTYPE);
    ck_assert_int_eq(xfa_version(), XFA_VERSION);
    ck_assert_str_eq(xfa_version_string(), "0.1.0");
    ck_assert_double_eq(xfa_attention_flops(2, 3, 5, 5, 64, 0), 4.0 * 2 * 3 * 25 * 64);
    ck_assert_double_eq(xfa_attention_flops(2, 3, 5, 5, 64, 1), 2.0 * 2 * 3 * 25 * 64);
    /* Sq=2, Sk=4 causal: rows see 3 and 4 keys */
    ck_assert_double_eq(xfa_attention_flops(1, 1, 2, 4, 32, 1), 4.0 * 7 * 32);
}
END_TEST

/* The shared checks against what the device reports: a device without a dtype or feature. */
START_TEST(test_device_capabilities)
{
    ctx->info.dtypes &= ~(1u << XFA_DTYPE_F32);
    EXPECT(forward(), XFA_ERROR_UNSUPPORTED_DTYPE, "dtype f32 is not supported");
    xfa_plan plan;
    EXPECT(xfa_plan_get(ctx, 64, XFA_DTYPE_F32, &plan), XFA_ERROR_UNSUPPORTED_DTYPE, "f32");
    ctx->info.dtypes |= 1u << XFA_DTYPE_F32;

    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.causal = 1;
    ctx->info.features &= ~(uint32_t)XFA_FEATURE_CAUSAL;
    EXPECT(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, &lse), XFA_ERROR_UNSUPPORTED_FEATURE, "causal");
    ctx->info.features &= ~(uint32_t)XFA_FEATURE_LSE;
    EXPECT(forward(), XFA_ERROR_UNSUPPORTED_FEATURE, "LSE");
    ck_assert_int_eq(xfa_attention_forward(ctx, NULL, &q, &k, &v, &o, NULL), XFA_SUCCESS);
    ctx->info.features &= ~(uint32_t)XFA_FEATURE_GQA;
    k = xfa_tensor_bshd(buf, ELEMS * 4, XFA_DTYPE_F32, B, S, 2, D);
    v = xfa_tensor_bshd(buf, 2 * ELEMS * 4, XFA_DTYPE_F32, B, S, 2, D);
    EXPECT(xfa_attention_forward(ctx, NULL, &q, &k, &v, &o, NULL), XFA_ERROR_UNSUPPORTED_FEATURE, "GQA");
    ctx->info.features &= ~(uint32_t)XFA_FEATURE_SEQLEN_QK_DIFFER;
    k = xfa_tensor_bshd(buf, ELEMS * 4, XFA_DTYPE_F32, B, S - 1, H, D);
    v = xfa_tensor_bshd(buf, 2 * ELEMS * 4, XFA_DTYPE_F32, B, S - 1, H, D);
    EXPECT(xfa_attention_forward(ctx, NULL, &q, &k, &v, &o, NULL), XFA_ERROR_UNSUPPORTED_FEATURE, "seqlen_q");
}
END_TEST

/* A cache (the CPU path's M) too small for any tile: a clear error, not a wrong answer. */
START_TEST(test_local_memory_too_small)
{
    xfa_context *small = NULL;
    setenv("XFA_CPU_CACHE_BYTES", "1024", 1);
    ck_assert_int_eq(xfa_context_create(XFA_BACKEND_CPU, 0, &small), XFA_SUCCESS);
    unsetenv("XFA_CPU_CACHE_BYTES");
    xfa_device_info info;
    xfa_context_get_info(small, &info);
    ck_assert_uint_eq(info.local_mem_bytes, 1024);
    xfa_plan plan;
    ck_assert_int_eq(xfa_plan_get(small, 256, XFA_DTYPE_F32, &plan), XFA_ERROR_LOCAL_MEMORY_TOO_SMALL);
    ck_assert_ptr_nonnull(strstr(xfa_context_last_error(small), "too small for head_dim 256"));
    xfa_buffer *b = NULL;
    ck_assert_int_eq(xfa_buffer_create(small, 4 * 256 * 4, &b), XFA_SUCCESS);
    const xfa_tensor tq = xfa_tensor_bshd(b, 0, XFA_DTYPE_F32, 1, 1, 1, 256);
    const xfa_tensor tk = xfa_tensor_bshd(b, 1024, XFA_DTYPE_F32, 1, 1, 1, 256);
    const xfa_tensor tv = xfa_tensor_bshd(b, 2048, XFA_DTYPE_F32, 1, 1, 1, 256);
    const xfa_tensor to = xfa_tensor_bshd(b, 3072, XFA_DTYPE_F32, 1, 1, 1, 256);
    ck_assert_int_eq(xfa_attention_forward(small, NULL, &tq, &tk, &tv, &to, NULL), XFA_ERROR_LOCAL_MEMORY_TOO_SMALL);
    xfa_buffer_destroy(&b);
    xfa_context_destroy(&small);
}
END_TEST

static Suite *validation_suite(void)
{
    Suite *s = suite_create("validation");
    TCase *tc = tcase_create("validation");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_valid_call_succeeds);
    tcase_add_test(tc, test_null_pointers);
    tcase_add_test(tc, test_dtypes);
    tcase_add_test(tc, test_shape_mismatches);
    tcase_add_test(tc, test_empty_and_negative_dims);
    tcase_add_test(tc, test_head_dims);
    tcase_add_test(tc, test_strides);
    tcase_add_test(tc, test_alignment_bounds_overflow);
    tcase_add_test(tc, test_aliasing);
    tcase_add_test(tc, test_wrong_context);
    tcase_add_test(tc, test_params);
    tcase_add_test(tc, test_extras);
    tcase_add_test(tc, test_varlen_arguments);
    tcase_add_test(tc, test_buffers);
    tcase_add_test(tc, test_contexts_and_backends);
    tcase_add_test(tc, test_auto_backend_env);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_device_capabilities);
    tcase_add_test(tc, test_local_memory_too_small);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return xfa_check_run(validation_suite(), 1); }
