/*
 * test_backward.c - the backward pass of one backend against the fp64
 * reference gradient. Usage: test_backward <backend>; exit 77 (skipped) when
 * the backend has no device or no backward pass.
 */
#include "backward_case.h"
#include "backend_suite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static xfa_context *ctx;
static xfa_device_info info;

static void expect_pass(const xfa_test_case *tc, uint32_t features)
{
    if (!(info.dtypes & (1u << tc->dtype)) || (info.features & features) != features) return;
    const xfa_backward_result r = xfa_test_run_backward(ctx, tc);
    char what[256];
    xfa_test_case_describe(tc, what, sizeof what);
    ck_assert_msg(r.status == XFA_SUCCESS && r.passed, "%s: %s", what, r.message);
    if (getenv("XFA_TEST_VERBOSE"))
        printf("%s: err/tol dq %.3f dk %.3f dv %.3f\n", what, r.max_abs_err[0] / r.tolerance[0],
               r.max_abs_err[1] / r.tolerance[1], r.max_abs_err[2] / r.tolerance[2]);
}

START_TEST(test_head_dims)
{
    const int64_t d = XFA_HEAD_DIM_STEP * (1 + _i / 2);
    xfa_test_case tc = xfa_test_case_make(1, 37, 41, 2, 2, d, XFA_DTYPE_F32, _i % 2, 20000 + (uint64_t)_i);
    expect_pass(&tc, 0);
}
END_TEST

START_TEST(test_shapes)
{
    static const int64_t shapes[][5] = {/* Sq, Sk, Hq, Hkv, D */
                                        {1, 1, 1, 1, 64},   {1, 90, 4, 2, 64}, {90, 1, 2, 1, 64},
                                        {70, 70, 6, 2, 128}, {65, 30, 3, 3, 96}, {30, 65, 2, 1, 32}};
    const int64_t *s = shapes[_i / 2];
    xfa_test_case tc = xfa_test_case_make(2, s[0], s[1], s[2], s[3], s[4], XFA_DTYPE_F32, _i % 2, 21000 + (uint64_t)_i);
    tc.Br = 16;
    tc.Bc = 16;
    tc.layout = _i % 3 ? XFA_LAYOUT_BSHD : XFA_LAYOUT_BHSD;
    tc.row_pad = _i % 4 ? 0 : 8;
    expect_pass(&tc, 0);
}
END_TEST

START_TEST(test_half_precisions)
{
    xfa_test_case tc = xfa_test_case_make(1, 53, 53, 4, 2, 64 * (1 + _i / 4), _i % 2 ? XFA_DTYPE_BF16 : XFA_DTYPE_F16,
                                          _i / 2 % 2, 22000 + (uint64_t)_i);
    expect_pass(&tc, 0);
}
END_TEST

START_TEST(test_long)
{
    /* Several query and key blocks of the tensor-core tiles (64..128 rows), ragged ends, the causal
     * diagonal crossing blocks, Sq != Sk both ways, GQA; f16/bf16 at D = 64 and 128. */
    static const int64_t lengths[][2] = {{300, 300}, {257, 520}, {520, 257}};
    const int64_t *n = lengths[_i / 8 % 3];
    xfa_test_case tc = xfa_test_case_make(1, n[0], n[1], 4, 2, 64 * (1 + _i % 2), _i / 2 % 2 ? XFA_DTYPE_BF16 : XFA_DTYPE_F16,
                                          _i / 4 % 2, 26000 + (uint64_t)_i);
    tc.layout = _i % 3 ? XFA_LAYOUT_BSHD : XFA_LAYOUT_BHSD;
    expect_pass(&tc, 0);
}
END_TEST

START_TEST(test_features)
{
    xfa_test_case tc = xfa_test_case_make(2, 47, 59, 4, 2, 64, (xfa_dtype)(_i % XFA_DTYPE_COUNT_), _i / 3 % 2,
                                          23000 + (uint64_t)_i);
    uint32_t need = 0;
    switch (_i / 6) {
    case 0: tc.window_left = 9; tc.window_right = tc.causal ? -1 : 4; need = XFA_FEATURE_WINDOW; break;
    case 1: tc.softcap = 1.5f; need = XFA_FEATURE_SOFTCAP; break;
    case 2: tc.alibi = true; tc.per_batch = true; need = XFA_FEATURE_ALIBI; break;
    default: tc.bias = true; tc.per_batch = _i % 2; need = XFA_FEATURE_BIAS; break;
    }
    tc.Br = 16;
    tc.Bc = 16;
    expect_pass(&tc, need);
}
END_TEST

START_TEST(test_caller_scratch)
{
    /* the caller's scratch instead of the backend's own memory */
    xfa_test_case tc = xfa_test_case_make(2, 37, 45, 4, 2, 64, (xfa_dtype)(_i % XFA_DTYPE_COUNT_), _i % 2,
                                          25000 + (uint64_t)_i);
    tc.caller_scratch = true;
    expect_pass(&tc, 0);
}
END_TEST

START_TEST(test_corruption_is_caught)
{
    xfa_test_case tc = xfa_test_case_make(1, 33, 33, 2, 1, 64, XFA_DTYPE_F32, true, 24000);
    tc.corrupt = XFA_CORRUPT_VALUE;
    const xfa_backward_result r = xfa_test_run_backward(ctx, &tc);
    ck_assert_int_eq(r.status, XFA_SUCCESS);
    ck_assert_msg(!r.passed, "a corrupted dK passed the check");
}
END_TEST

START_TEST(test_arguments)
{
    enum { S = 8, H = 2, D = 64 };
    const size_t bytes = (size_t)S * H * D * 4;
    xfa_buffer *buf = NULL;
    ck_assert_int_eq(xfa_buffer_create(ctx, 9 * bytes, &buf), XFA_SUCCESS);
    xfa_tensor t[8];
    for (int i = 0; i < 8; i++) t[i] = xfa_tensor_bshd(buf, (size_t)i * bytes, XFA_DTYPE_F32, 1, S, H, D);
    xfa_tensor lse = xfa_tensor_lse(buf, 8 * bytes, 1, S, H);
    /* q k v o d_o dq dk dv = t[0..7] */
    ck_assert_int_eq(xfa_attention_backward(ctx, NULL, &t[0], &t[1], &t[2], &t[3], &t[4], NULL, &t[5], &t[6], &t[7]),
                     XFA_ERROR_NULL_POINTER);
    ck_assert_ptr_nonnull(strstr(xfa_context_last_error(ctx), "lse"));
    xfa_tensor short_dk = xfa_tensor_bshd(buf, 6 * bytes, XFA_DTYPE_F32, 1, S - 1, H, D);
    ck_assert_int_eq(xfa_attention_backward(ctx, NULL, &t[0], &t[1], &t[2], &t[3], &t[4], &lse, &t[5], &short_dk, &t[7]),
                     XFA_ERROR_SHAPE_MISMATCH);
    ck_assert_ptr_nonnull(strstr(xfa_context_last_error(ctx), "dk.shape[1]"));
    ck_assert_int_eq(xfa_attention_backward(ctx, NULL, &t[0], &t[1], &t[2], &t[3], &t[4], &lse, &t[0], &t[6], &t[7]),
                     XFA_ERROR_ALIASING);
    ck_assert_ptr_nonnull(strstr(xfa_context_last_error(ctx), "dq overlaps q"));
    ck_assert_int_eq(xfa_attention_backward(ctx, NULL, &t[0], &t[1], &t[2], &t[3], &t[4], &lse, &t[5], &t[6], &t[6]),
                     XFA_ERROR_ALIASING);
    /* scratch: sized by the query; refused when short, misaligned or overlapping */
    size_t need = 0;
    ck_assert_int_eq(xfa_attention_backward_scratch_size(ctx, NULL, &t[0], &t[1], &t[2], &t[3], &t[4], &lse, &t[5],
                                                         &t[6], &t[7], &need),
                     XFA_SUCCESS);
    ck_assert_uint_ge(need, (size_t)S * H * sizeof(float));
    xfa_buffer *scratch = NULL;
    ck_assert_int_eq(xfa_buffer_create(ctx, need, &scratch), XFA_SUCCESS);
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.scratch = scratch;
    params.scratch_offset = 256;
    ck_assert_int_eq(xfa_attention_backward(ctx, &params, &t[0], &t[1], &t[2], &t[3], &t[4], &lse, &t[5], &t[6], &t[7]),
                     XFA_ERROR_OUT_OF_BOUNDS);
    params.scratch_offset = 4;
    ck_assert_int_eq(xfa_attention_backward(ctx, &params, &t[0], &t[1], &t[2], &t[3], &t[4], &lse, &t[5], &t[6], &t[7]),
                     XFA_ERROR_MISALIGNED);
    params.scratch = buf;
    params.scratch_offset = 0;
    ck_assert_int_eq(xfa_attention_backward(ctx, &params, &t[0], &t[1], &t[2], &t[3], &t[4], &lse, &t[5], &t[6], &t[7]),
                     XFA_ERROR_ALIASING);
    ck_assert_ptr_nonnull(strstr(xfa_context_last_error(ctx), "params.scratch overlaps q"));
    xfa_buffer_destroy(&scratch);
    xfa_buffer_destroy(&buf);
}
END_TEST

static Suite *backward_suite(const char *backend)
{
    Suite *s = suite_create(backend);
    TCase *tc = tcase_create("backward");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_head_dims, 0, 2 * (XFA_HEAD_DIM_MAX / XFA_HEAD_DIM_STEP));
    tcase_add_loop_test(tc, test_shapes, 0, 12);
    tcase_add_loop_test(tc, test_half_precisions, 0, 8);
    tcase_add_loop_test(tc, test_long, 0, 24);
    tcase_add_loop_test(tc, test_features, 0, 24);
    tcase_add_loop_test(tc, test_caller_scratch, 0, 3);
    tcase_add_test(tc, test_corruption_is_caught);
    tcase_add_test(tc, test_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return xfa_run_backend_suite(argc, argv, XFA_FEATURE_BACKWARD, "backward pass", backward_suite, &ctx, &info);
}
