/*
 * test_vulkan_features.c - the forward features in f16, the dtype that takes the
 * cooperative-matrix path on devices that have it (the shared suite tests
 * windows in f32 only): windows with Sq != Sk and ragged blocks, softcap, ALiBi,
 * bias (f32 and f16, with masked keys), everything at once, and varlen, against
 * the fp64 reference. On
 * lavapipe they run on the scalar path; on a coopmat device, on both paths
 * (XFA_VULKAN_PATH=scalar selects the scalar one for a context).
 * Usage: test_vulkan_features [device].
 */
#include "attention_case.h"
#include "check_run.h"
#include "dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static xfa_context *ctx;

static void expect_pass(const xfa_test_case *tc)
{
    const xfa_test_result r = xfa_test_run_case(ctx, tc);
    char what[256];
    xfa_test_case_describe(tc, what, sizeof what);
    ck_assert_msg(r.status == XFA_SUCCESS && r.passed, "%s: %s", what, r.message);
}

START_TEST(test_f16_windows)
{
    static const int64_t windows[][2] = {{0, 0}, {5, -1}, {-1, 3}, {40, 20}, {100, 0}, {0, -1}};
    const int64_t *w = windows[_i / 2];
    /* lengths past one block of the matrix path (Br, Bc up to 128) so blocks are skipped */
    xfa_test_case tc = xfa_test_case_make(1, 300, _i % 2 ? 230 : 300, 2, 1, 64, XFA_DTYPE_F16, false,
                                          41000 + (uint64_t)_i);
    tc.window_left = w[0];
    tc.window_right = w[1];
    expect_pass(&tc);
}
END_TEST

START_TEST(test_f16_scores)
{
    xfa_test_case tc = xfa_test_case_make(2, 70, 150, 4, 2, 128, XFA_DTYPE_F16, _i % 2, 42000 + (uint64_t)_i);
    switch (_i / 2) {
    case 0: tc.softcap = 3.0f; break;
    case 1: tc.alibi = true; tc.per_batch = true; break;
    case 2: tc.bias = true; break;
    case 3: tc.bias = true; tc.per_batch = true; tc.bias_dtype = XFA_DTYPE_F16; break;
    default: /* everything at once */
        tc.window_left = 33;
        tc.softcap = 8.0f;
        tc.alibi = true;
        tc.bias = true;
        tc.bias_dtype = XFA_DTYPE_F16;
        tc.layout = XFA_LAYOUT_BHSD;
        tc.row_pad = 8;
        break;
    }
    expect_pass(&tc);
}
END_TEST

START_TEST(test_f16_varlen)
{
    static const int64_t q[5] = {40, 0, 130, 1, 17}, k[5] = {40, 9, 160, 50, 0};
    xfa_test_case tc = xfa_test_case_make(1, 1, 1, 4, 1, 64, XFA_DTYPE_F16, _i, 43000 + (uint64_t)_i);
    xfa_test_case_varlen(&tc, 5, q, k);
    tc.window_left = 25;
    expect_pass(&tc);
}
END_TEST

/* Random shapes with a random mix of the features (and small forced tiles, so that many
 * blocks are skipped or ragged), every dtype, against the fp64 reference. */
START_TEST(test_random_mixes)
{
    const xfa_dtype dtype = (xfa_dtype)(_i % XFA_DTYPE_COUNT_);
    xfa_test_case tc = xfa_test_case_random(44000 + (uint64_t)_i, dtype);
    uint64_t rng = 977 + (uint64_t)_i;
    const uint64_t pick = xfa_test_rand_u64(&rng);
    if (pick & 1) tc.window_left = (int64_t)(xfa_test_rand_u64(&rng) % 40);
    if ((pick & 2) && !tc.causal) tc.window_right = (int64_t)(xfa_test_rand_u64(&rng) % 40);
    if (pick & 4) tc.softcap = 1.0f + (float)(xfa_test_rand_u64(&rng) % 30);
    if (pick & 8) {
        tc.alibi = true;
        tc.per_batch = pick & 16;
    }
    if (pick & 32) {
        tc.bias = true;
        tc.per_batch = pick & 16;
        tc.bias_dtype = pick & 64 ? dtype : XFA_DTYPE_F32;
    } else if (pick & 64) {
        static const int64_t q[4] = {7, 0, 33, 12}, k[4] = {20, 5, 33, 0};
        xfa_test_case_varlen(&tc, 4, q, k);
    }
    if ((pick & 128) && tc.head_dim <= 128) { /* 16 x 16 f32 tiles fit 32 KiB of shared memory up to d = 128 */
        tc.Br = 16;
        tc.Bc = 16;
    }
    expect_pass(&tc);
}
END_TEST

/* The shaders read q, k, v (and dO) four elements per load when every row starts at a
 * multiple of 4 elements with unit head-dim stride, element by element otherwise: the same
 * inputs at an aligned and at a misaligned offset must give the same bits, in the forward,
 * decode and backward shaders. */
START_TEST(test_unaligned_views)
{
    const xfa_dtype dtype = (xfa_dtype)(_i % XFA_DTYPE_COUNT_);
    const int mode = _i / XFA_DTYPE_COUNT_; /* 0 forward, 1 decode, 2 backward */
    const int64_t B = 2, S = 45, H = 2, D = 64, Sq = mode == 1 ? 1 : S;
    const size_t elem = xfa_dtype_size(dtype), t_bytes = (size_t)(B * S * H * D) * elem;
    const size_t region = 4 * t_bytes + 512; /* q, k, v, dO; the second copy starts one element later */
    const size_t o_at = 2 * region + 256, lse_at = o_at + t_bytes + 256, out_at = lse_at + (size_t)(B * S * H) * 4 + 256;
    const size_t lens_at = out_at + 3 * t_bytes + 256;
    xfa_buffer *buf = NULL;
    ck_assert_int_eq(xfa_buffer_create(ctx, lens_at + 256, &buf), XFA_SUCCESS);
    unsigned char *host = malloc(5 * t_bytes);
    float *lse_host = malloc((size_t)(B * S * H) * 4);
    uint64_t rng = 17 + (uint64_t)_i;
    for (size_t i = 0; i < 5 * (size_t)(B * S * H * D); i++)
        xfa_store_f32(host, dtype, (int64_t)i, (float)xfa_test_rand_normal(&rng));
    for (int64_t i = 0; i < B * S * H; i++) lse_host[i] = 3.0f + (float)xfa_test_rand_normal(&rng);
    ck_assert_int_eq(xfa_buffer_upload(buf, o_at, host + 4 * t_bytes, t_bytes), XFA_SUCCESS);
    ck_assert_int_eq(xfa_buffer_upload(buf, lse_at, lse_host, (size_t)(B * S * H) * 4), XFA_SUCCESS);
    const int32_t lens[2] = {30, 41};
    ck_assert_int_eq(xfa_buffer_upload(buf, lens_at, lens, sizeof lens), XFA_SUCCESS);
    const xfa_tensor o_in = xfa_tensor_bshd(buf, o_at, dtype, B, S, H, D), lse = xfa_tensor_lse(buf, lse_at, B, S, H);
    const xfa_tensor dq = xfa_tensor_bshd(buf, out_at, dtype, B, S, H, D);
    const xfa_tensor dk = xfa_tensor_bshd(buf, out_at + t_bytes, dtype, B, S, H, D);
    const xfa_tensor dv = xfa_tensor_bshd(buf, out_at + 2 * t_bytes, dtype, B, S, H, D);
    const size_t out_bytes = mode == 2 ? 3 * t_bytes : (size_t)(B * Sq * H * D) * elem;
    void *out[2];
    for (int shift = 0; shift < 2; shift++) {
        const size_t at = (size_t)shift * (region + elem);
        ck_assert_int_eq(xfa_buffer_upload(buf, at, host, 4 * t_bytes), XFA_SUCCESS);
        const xfa_tensor q = xfa_tensor_bshd(buf, at, dtype, B, Sq, H, D);
        const xfa_tensor k = xfa_tensor_bshd(buf, at + t_bytes, dtype, B, S, H, D);
        const xfa_tensor v = xfa_tensor_bshd(buf, at + 2 * t_bytes, dtype, B, S, H, D);
        const xfa_tensor d_o = xfa_tensor_bshd(buf, at + 3 * t_bytes, dtype, B, S, H, D);
        const xfa_tensor o = xfa_tensor_bshd(buf, out_at, dtype, B, Sq, H, D);
        xfa_status st;
        if (mode == 1) {
            const xfa_tensor seqlens = xfa_tensor_bshd(buf, lens_at, XFA_DTYPE_I32, B, 1, 1, 1);
            const xfa_kv_cache cache = {&k, &v, &seqlens, NULL};
            xfa_decode_params params = XFA_DECODE_PARAMS_DEFAULT;
            params.num_splits = 2;
            st = xfa_attention_decode(ctx, &params, &q, &cache, NULL, NULL, &o, NULL);
        } else {
            xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
            params.causal = 1;
            params.window_left = 20;
            st = mode == 0 ? xfa_attention_forward(ctx, &params, &q, &k, &v, &o, NULL)
                           : xfa_attention_backward(ctx, &params, &q, &k, &v, &o_in, &d_o, &lse, &dq, &dk, &dv);
        }
        ck_assert_msg(st == XFA_SUCCESS, "%s", xfa_context_last_error(ctx));
        out[shift] = malloc(out_bytes);
        ck_assert_int_eq(xfa_buffer_download(buf, out_at, out[shift], out_bytes), XFA_SUCCESS);
    }
    ck_assert_int_eq(memcmp(out[0], out[1], out_bytes), 0);
    free(out[0]);
    free(out[1]);
    free(host);
    free(lse_host);
    xfa_buffer_destroy(&buf);
}
END_TEST

int main(int argc, char **argv)
{
    const int device = argc > 1 ? atoi(argv[1]) : 0;
    int count = 0;
    if (xfa_device_count(XFA_BACKEND_VULKAN, &count) != XFA_SUCCESS || count <= device) {
        printf("SKIP: no Vulkan device %d (%s)\n", device, xfa_last_error());
        return 77;
    }
    if (xfa_context_create(XFA_BACKEND_VULKAN, device, &ctx) != XFA_SUCCESS) {
        fprintf(stderr, "xfa_context_create: %s\n", xfa_last_error());
        return 1;
    }
    xfa_plan plan;
    if (xfa_plan_get(ctx, 64, XFA_DTYPE_F16, &plan) == XFA_SUCCESS)
        printf("f16 path %s (Br %u, Bc %u)\n", plan.path, plan.Br, plan.Bc);
    Suite *suite = suite_create("vulkan features");
    TCase *tc = tcase_create("f16");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_f16_windows, 0, 12);
    tcase_add_loop_test(tc, test_f16_scores, 0, 10);
    tcase_add_loop_test(tc, test_f16_varlen, 0, 2);
    tcase_add_loop_test(tc, test_unaligned_views, 0, 3 * XFA_DTYPE_COUNT_);
    tcase_add_loop_test(tc, test_random_mixes, 0, 48);
    suite_add_tcase(suite, tc);
    const int rc = xfa_check_run(suite, 0);
    xfa_context_destroy(&ctx);
    return rc;
}
