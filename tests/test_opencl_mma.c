/*
 * test_opencl_mma.c - the mma.sync kernel's fragment bookkeeping against the
 * fp64 reference on any OpenCL device, in the shape XFA_OPENCL_PATH names
 * (mma.sync by default: 16 rows per warp; mma.sync-wide: 32). Off NVIDIA the kernel is built with
 * XFA_MMA_EMULATE (mma, shuffles and conversions done in OpenCL C with the
 * PTX fragment layouts), so tiles, masks, the P re-packing and the epilogue
 * are checked here; on NVIDIA the same cases run the real tensor cores.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "attention_case.h"
#include "check_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static xfa_context *ctx;
static const char *path_name; /* "mma.sync" or "mma.sync-wide" */
static uint32_t rows_per_warp, bc_max;

/* A tile override for this shape: Br in warps of the same count, Bc within the kernel's maximum. */
static uint32_t tile_br(uint32_t warps) { return warps * rows_per_warp; }
static uint32_t tile_bc(uint32_t bc) { return bc < bc_max ? bc : bc_max; }

static void expect_pass(const xfa_test_case *tc)
{
    const xfa_test_result r = xfa_test_run_case(ctx, tc);
    char what[256];
    xfa_test_case_describe(tc, what, sizeof what);
    ck_assert_msg(r.status == XFA_SUCCESS && r.passed, "%s: %s", what, r.message);
}

START_TEST(test_plan_is_mma)
{
    xfa_plan plan;
    ck_assert_int_eq(xfa_plan_get(ctx, 128, XFA_DTYPE_F16, &plan), XFA_SUCCESS);
    ck_assert_str_eq(plan.path, path_name);
    ck_assert_uint_eq(plan.Br % rows_per_warp, 0);
    ck_assert_uint_eq(plan.Bc % 16, 0);
    ck_assert_uint_le(plan.Bc, bc_max);
    ck_assert_uint_eq(plan.workgroup_size, plan.Br / rows_per_warp * 32);
    /* f32 cannot go through f16 tensor cores within its tolerance: it stays portable. */
    ck_assert_int_eq(xfa_plan_get(ctx, 128, XFA_DTYPE_F32, &plan), XFA_SUCCESS);
    ck_assert_str_eq(plan.path, "portable");
}
END_TEST

/* Every head dim, f16 and bf16, causal and not, ragged lengths. */
START_TEST(test_head_dims)
{
    const int64_t d = 32 * (1 + _i / 4);
    const xfa_dtype dtype = _i % 2 ? XFA_DTYPE_BF16 : XFA_DTYPE_F16;
    xfa_test_case tc = xfa_test_case_make(1, 37, 45, 2, 1, d, dtype, _i / 2 % 2, 11000 + (uint64_t)_i);
    expect_pass(&tc);
}
END_TEST

/* Small and uneven tile overrides: several warps, several K/V blocks, Sq != Sk both ways. */
START_TEST(test_tiles_and_masks)
{
    static const uint32_t tiles[][2] = {{1, 16}, {2, 16}, {3, 32}, {4, 64}}; /* warps, Bc */
    static const int64_t lens[][2] = {{70, 70}, {19, 83}, {83, 19}, {1, 1}};
    xfa_test_case tc = xfa_test_case_make(2, lens[_i % 4][0], lens[_i % 4][1], 4, 2, 64, XFA_DTYPE_F16, _i / 4 % 2 == 0,
                                          12000 + (uint64_t)_i);
    tc.Br = tile_br(tiles[_i / 2 % 4][0]);
    tc.Bc = tile_bc(tiles[_i / 2 % 4][1]);
    expect_pass(&tc);
}
END_TEST

/* Strided views (BHSD, padded rows: the element-wise K/V copy) and the 16-byte copy (BSHD, no pad). */
START_TEST(test_layouts)
{
    xfa_test_case tc = xfa_test_case_make(2, 41, 57, 4, 4, 96, _i % 2 ? XFA_DTYPE_BF16 : XFA_DTYPE_F16, true,
                                          13000 + (uint64_t)_i);
    tc.layout = _i / 2 % 2 ? XFA_LAYOUT_BHSD : XFA_LAYOUT_BSHD;
    tc.row_pad = _i / 4 ? 3 : 0;
    tc.lse = _i != 5;
    expect_pass(&tc);
}
END_TEST

START_TEST(test_random_cases)
{
    xfa_test_case tc = xfa_test_case_random(14000 + (uint64_t)_i, _i % 2 ? XFA_DTYPE_BF16 : XFA_DTYPE_F16);
    expect_pass(&tc);
}
END_TEST

/* Windows (Sq != Sk both ways, rows that see nothing), softcap, ALiBi, bias (f32 and 16-bit, broadcast
 * or full) on the S fragments, with several warps and K/V blocks. */
START_TEST(test_features)
{
    static const int64_t windows[][2] = {{0, 0}, {5, -1}, {-1, 3}, {20, 0}};
    static const int64_t lens[][2] = {{70, 55}, {40, 90}};
    const xfa_dtype dtype = _i % 2 ? XFA_DTYPE_BF16 : XFA_DTYPE_F16;
    xfa_test_case tc = xfa_test_case_make(2, lens[_i % 2][0], lens[_i % 2][1], 4, 2, 64, dtype, false, 15000 + (uint64_t)_i);
    tc.Br = tile_br(2);
    tc.Bc = 16;
    tc.window_left = windows[_i / 2 % 4][0];
    tc.window_right = windows[_i / 2 % 4][1];
    switch (_i / 8) {
    case 0: tc.softcap = 5.0f; break;
    case 1: tc.alibi = true; tc.bias = true; tc.bias_dtype = dtype; break;
    default: tc.alibi = true; tc.per_batch = true; tc.bias = true; break;
    }
    expect_pass(&tc);
}
END_TEST

/* Packed sequences (empty and ragged ones) with GQA, causal and a window: each sequence its own offsets. */
START_TEST(test_varlen)
{
    static const int64_t seq_q[5] = {0, 37, 5, 16, 1}, seq_k[5] = {9, 40, 0, 70, 33};
    xfa_test_case tc = xfa_test_case_make(1, 1, 1, 6, 2, 96, _i % 2 ? XFA_DTYPE_BF16 : XFA_DTYPE_F16, _i / 2 % 2,
                                          16000 + (uint64_t)_i);
    xfa_test_case_varlen(&tc, 5, seq_q, seq_k);
    tc.window_left = _i / 2 ? 7 : -1;
    tc.Br = tile_br(1);
    tc.Bc = 32;
    tc.layout = _i % 3 ? XFA_LAYOUT_BSHD : XFA_LAYOUT_BHSD;
    expect_pass(&tc);
}
END_TEST

/* Usage: test_opencl_mma [device [wide]] (an OpenCL device index as xfa numbers them; 0 by default);
 * `wide` (or XFA_OPENCL_PATH=mma.sync-wide) tests the 32-rows-per-warp shape. */
int main(int argc, char **argv)
{
    const int device = argc > 1 ? atoi(argv[1]) : 0;
    if (argc > 2 && strcmp(argv[2], "wide") == 0) setenv("XFA_OPENCL_PATH", "mma.sync-wide", 1);
    setenv("XFA_OPENCL_PATH", "mma.sync", 0); /* unless the environment or argv asks for mma.sync-wide */
    const bool wide = strcmp(getenv("XFA_OPENCL_PATH"), "mma.sync-wide") == 0;
    path_name = wide ? "mma.sync-wide" : "mma.sync";
    rows_per_warp = wide ? 32 : 16;
    bc_max = wide ? 32 : 64;
    int count = 0;
    if (xfa_device_count(XFA_BACKEND_OPENCL, &count) != XFA_SUCCESS || count <= device) {
        printf("SKIP: no OpenCL device\n");
        return 77;
    }
    if (xfa_context_create(XFA_BACKEND_OPENCL, device, &ctx) != XFA_SUCCESS) {
        fprintf(stderr, "xfa_context_create: %s\n", xfa_last_error());
        return 1;
    }
    xfa_device_info info;
    xfa_context_get_info(ctx, &info);
    printf("device %s, path %s\n", info.name, info.path);
    Suite *s = suite_create("opencl_mma");
    TCase *tc = tcase_create("mma");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_plan_is_mma);
    tcase_add_loop_test(tc, test_head_dims, 0, 32);
    tcase_add_loop_test(tc, test_tiles_and_masks, 0, 8);
    tcase_add_loop_test(tc, test_layouts, 0, 8);
    tcase_add_loop_test(tc, test_random_cases, 0, 12);
    tcase_add_loop_test(tc, test_features, 0, 24);
    tcase_add_loop_test(tc, test_varlen, 0, 4);
    suite_add_tcase(s, tc);
    const int rc = xfa_check_run(s, 0);
    xfa_context_destroy(&ctx);
    return rc;
}
