/*
 * test_forward.c - the forward pass of one backend against the fp64 reference.
 *
 * Usage: test_forward <backend> [device]. The same body runs for every backend
 * (CTest registers one test per backend compiled in); a backend that sees no
 * device is reported as skipped (exit 77), not passed.
 */
#include "attention_case.h"
#include "backend_suite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static xfa_context *ctx;
static xfa_device_info info;

/* Runs a case; skips dtypes the device lacks; fails with the case and the reason. */
static void expect_pass(const xfa_test_case *tc)
{
    if (!(info.dtypes & (1u << tc->dtype))) return;
    const xfa_test_result r = xfa_test_run_case(ctx, tc);
    char what[256];
    xfa_test_case_describe(tc, what, sizeof what);
    ck_assert_msg(r.status == XFA_SUCCESS && r.passed, "%s: %s", what, r.message);
}

static xfa_plan library_plan(uint32_t d, xfa_dtype dtype)
{
    xfa_plan plan;
    ck_assert_int_eq(xfa_plan_get(ctx, d, dtype, &plan), XFA_SUCCESS);
    return plan;
}

/* Every supported head dim, causal and not, f32, lengths that leave ragged tiles. */
START_TEST(test_head_dims)
{
    const int64_t d = XFA_HEAD_DIM_STEP * (1 + _i / 2);
    const xfa_plan plan = library_plan((uint32_t)d, XFA_DTYPE_F32);
    /* Sq covers one full row block and a ragged one; Sk a full and a ragged K/V block (capped for time). */
    int64_t sq = plan.Br + 3, sk = plan.Bc + 5;
    if (sq > 131) sq = 131;
    if (sk > 133) sk = 133;
    xfa_test_case tc = xfa_test_case_make(1, sq, sk, 2, 2, d, XFA_DTYPE_F32, _i % 2, 1000 + (uint64_t)_i);
    expect_pass(&tc);
}
END_TEST

/* Tile sizes forced small so that many blocks and ragged edges occur. */
START_TEST(test_small_tiles)
{
    const xfa_plan plan = library_plan(64, XFA_DTYPE_F32);
    (void)plan;
    xfa_test_case tc = xfa_test_case_make(2, 77, 83, 3, 3, 64, XFA_DTYPE_F32, _i % 2, 2000 + (uint64_t)_i);
    tc.Br = 16;
    tc.Bc = 16;
    expect_pass(&tc);
}
END_TEST

START_TEST(test_edge_lengths)
{
    static const int64_t shapes[][2] = {{1, 1}, {1, 200}, {200, 1}, {5, 3}, {3, 5}, {129, 127}};
    const int64_t *s = shapes[_i / 2];
    xfa_test_case tc = xfa_test_case_make(1, s[0], s[1], 2, 1, 64, XFA_DTYPE_F32, _i % 2, 3000 + (uint64_t)_i);
    expect_pass(&tc);
}
END_TEST

START_TEST(test_layouts)
{
    xfa_test_case tc = xfa_test_case_make(2, 45, 45, 4, 2, 128, XFA_DTYPE_F32, _i % 2, 4000 + (uint64_t)_i);
    tc.layout = _i / 2 % 2 ? XFA_LAYOUT_BHSD : XFA_LAYOUT_BSHD;
    tc.row_pad = _i / 4 ? 8 : 0;
    expect_pass(&tc);
}
END_TEST

START_TEST(test_half_precisions)
{
    const xfa_dtype dtype = _i % 2 ? XFA_DTYPE_BF16 : XFA_DTYPE_F16;
    const int64_t d = 64 * (1 + _i / 4);
    xfa_test_case tc = xfa_test_case_make(1, 93, 93, 2, 2, d, dtype, _i / 2 % 2, 5000 + (uint64_t)_i);
    expect_pass(&tc);
}
END_TEST

START_TEST(test_random_cases)
{
    const xfa_dtype dtype = (xfa_dtype)(_i % XFA_DTYPE_COUNT_);
    xfa_test_case tc = xfa_test_case_random(6000 + (uint64_t)_i, dtype);
    expect_pass(&tc);
}
END_TEST

START_TEST(test_scale_and_no_lse)
{
    xfa_test_case tc = xfa_test_case_make(1, 40, 60, 2, 2, 96, XFA_DTYPE_F32, false, 7000);
    tc.scale = 0.02f;
    tc.lse = false;
    expect_pass(&tc);
}
END_TEST

/* Runs the case only if the device lists every feature it needs. */
static void expect_pass_with(uint32_t features, const xfa_test_case *tc)
{
    if ((info.features & features) == features) expect_pass(tc);
}

START_TEST(test_windows)
{
    static const int64_t windows[][2] = {{0, 0}, {3, -1}, {-1, 2}, {5, 5}, {16, 0}, {0, -1}, {40, 7}};
    const int64_t *w = windows[_i / 2];
    /* Sq != Sk on odd cases: the window aligns to the bottom-right corner */
    xfa_test_case tc = xfa_test_case_make(1, 70, _i % 2 ? 55 : 70, 2, 1, 64, XFA_DTYPE_F32, false, 9000 + (uint64_t)_i);
    tc.window_left = w[0];
    tc.window_right = w[1];
    tc.Br = 16;
    tc.Bc = 16; /* many blocks, so blocks outside the window are skipped */
    expect_pass_with(XFA_FEATURE_WINDOW, &tc);
}
END_TEST

START_TEST(test_softcap_alibi_bias)
{
    const xfa_dtype dtype = (xfa_dtype)(_i % XFA_DTYPE_COUNT_);
    xfa_test_case tc = xfa_test_case_make(2, 45, 61, 4, 2, 96, dtype, _i / 3 % 2, 9100 + (uint64_t)_i);
    uint32_t need = 0;
    switch (_i / 6) {
    case 0: tc.softcap = 2.0f; need = XFA_FEATURE_SOFTCAP; break;
    case 1: tc.alibi = true; tc.per_batch = _i % 2; need = XFA_FEATURE_ALIBI; break;
    case 2: tc.bias = true; need = XFA_FEATURE_BIAS; break;
    default: tc.bias = true; tc.per_batch = true; tc.bias_dtype = dtype; need = XFA_FEATURE_BIAS; break;
    }
    expect_pass_with(need, &tc);
}
END_TEST

/* Everything at once: GQA, Sq != Sk, causal, window, softcap, ALiBi, bias, padded BHSD. */
START_TEST(test_feature_combination)
{
    xfa_test_case tc = xfa_test_case_make(2, 67, 90, 6, 2, 128, (xfa_dtype)(_i % XFA_DTYPE_COUNT_), true,
                                          9200 + (uint64_t)_i);
    tc.window_left = 20;
    tc.softcap = 10.0f;
    tc.alibi = true;
    tc.bias = true;
    tc.per_batch = _i % 2;
    tc.layout = XFA_LAYOUT_BHSD;
    tc.row_pad = 8;
    expect_pass_with(XFA_FEATURE_WINDOW | XFA_FEATURE_SOFTCAP | XFA_FEATURE_ALIBI | XFA_FEATURE_BIAS | XFA_FEATURE_GQA, &tc);
}
END_TEST

/* Packed variable-length batches: ragged and empty sequences, Sq != Sk per sequence,
 * combined with GQA, causal, windows and ALiBi. */
START_TEST(test_varlen)
{
    static const int64_t lens[][2][5] = {
        {{5, 17, 1, 33, 9}, {5, 17, 1, 33, 9}},   /* equal q and k lengths */
        {{0, 12, 40, 3, 0}, {7, 30, 40, 0, 2}},   /* empty sequences on either side */
        {{1, 1, 1, 1, 1}, {64, 3, 100, 1, 20}},   /* one query token each, decode-like */
        {{70, 2, 25, 0, 11}, {35, 50, 25, 8, 11}},
    };
    const int64_t (*l)[5] = lens[_i % 4];
    xfa_test_case tc = xfa_test_case_make(1, 1, 1, 4, 2, 64, (xfa_dtype)(_i % XFA_DTYPE_COUNT_), _i / 4 % 2,
                                          9300 + (uint64_t)_i);
    xfa_test_case_varlen(&tc, 5, l[0], l[1]);
    uint32_t need = XFA_FEATURE_VARLEN | XFA_FEATURE_GQA;
    if (_i >= 8) {
        tc.window_left = 6;
        tc.alibi = true;
        need |= XFA_FEATURE_WINDOW | XFA_FEATURE_ALIBI;
    }
    tc.Br = 16;
    tc.Bc = 16;
    tc.layout = _i % 3 ? XFA_LAYOUT_BSHD : XFA_LAYOUT_BHSD;
    expect_pass_with(need, &tc);
}
END_TEST

/* The check itself must be able to fail: a wrong value, an unwritten element and a
 * write past the view are each caught, in every dtype. */
START_TEST(test_corruption_is_caught)
{
    xfa_test_case tc = xfa_test_case_make(1, 33, 33, 1, 1, 64, (xfa_dtype)(_i % XFA_DTYPE_COUNT_), true, 8000);
    if (!(info.dtypes & (1u << tc.dtype))) return;
    tc.corrupt = (xfa_test_corruption)(1 + _i / XFA_DTYPE_COUNT_);
    const xfa_test_result r = xfa_test_run_case(ctx, &tc);
    ck_assert_int_eq(r.status, XFA_SUCCESS);
    ck_assert_msg(!r.passed, "a corrupted output (kind %d) passed the check (err %g, tol %g)", (int)tc.corrupt,
                  r.max_abs_err, r.tolerance);
    if (tc.corrupt == XFA_CORRUPT_UNWRITTEN) ck_assert_int_eq(r.unwritten, 1);
    if (tc.corrupt == XFA_CORRUPT_GUARD) ck_assert_int_gt(r.guard_damage, 0);
}
END_TEST

START_TEST(test_plan_override_checked)
{
    xfa_plan plan = library_plan(256, XFA_DTYPE_F32);
    plan.Br = 0;
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.plan = &plan;
    xfa_buffer *buf = NULL;
    ck_assert_int_eq(xfa_buffer_create(ctx, 4 * 4 * 256 * 4, &buf), XFA_SUCCESS);
    xfa_tensor q = xfa_tensor_bshd(buf, 0, XFA_DTYPE_F32, 1, 1, 1, 256);
    xfa_tensor k = xfa_tensor_bshd(buf, 1024, XFA_DTYPE_F32, 1, 1, 1, 256);
    xfa_tensor v = xfa_tensor_bshd(buf, 2048, XFA_DTYPE_F32, 1, 1, 1, 256);
    xfa_tensor o = xfa_tensor_bshd(buf, 3072, XFA_DTYPE_F32, 1, 1, 1, 256);
    ck_assert_int_eq(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, NULL), XFA_ERROR_INVALID_PLAN);
    plan = library_plan(128, XFA_DTYPE_F32); /* a plan for another head dim */
    ck_assert_int_eq(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, NULL), XFA_ERROR_INVALID_PLAN);
    ck_assert_ptr_nonnull(strstr(xfa_context_last_error(ctx), "head_dim"));
    xfa_buffer_destroy(&buf);
}
END_TEST

static Suite *forward_suite(const char *backend)
{
    Suite *s = suite_create(backend);
    TCase *tc = tcase_create("forward");
    tcase_set_timeout(tc, 600);
    const int n_dims = XFA_HEAD_DIM_MAX / XFA_HEAD_DIM_STEP;
    tcase_add_loop_test(tc, test_head_dims, 0, 2 * n_dims);
    tcase_add_loop_test(tc, test_small_tiles, 0, 2);
    tcase_add_loop_test(tc, test_edge_lengths, 0, 12);
    tcase_add_loop_test(tc, test_layouts, 0, 8);
    tcase_add_loop_test(tc, test_half_precisions, 0, 8);
    tcase_add_loop_test(tc, test_random_cases, 0, 24);
    tcase_add_test(tc, test_scale_and_no_lse);
    tcase_add_loop_test(tc, test_windows, 0, 14);
    tcase_add_loop_test(tc, test_softcap_alibi_bias, 0, 24);
    tcase_add_loop_test(tc, test_feature_combination, 0, 6);
    tcase_add_loop_test(tc, test_varlen, 0, 16);
    tcase_add_loop_test(tc, test_corruption_is_caught, 0, 3 * XFA_DTYPE_COUNT_);
    tcase_add_test(tc, test_plan_override_checked);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return xfa_run_backend_suite(argc, argv, 0, "forward pass", forward_suite, &ctx, &info);
}
