/*
 * test_vulkan_features.c - the forward features in f16, the dtype that takes the
 * cooperative-matrix path on devices that have it (the shared suite tests
 * windows in f32 only): windows with Sq != Sk and ragged blocks, softcap, ALiBi,
 * bias (f32 and f16, with masked keys), everything at once, and varlen (which
 * the matrix path hands to the scalar one), against the fp64 reference. On
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

/* The shaders read q, k and v four elements per load when every row starts at a multiple
 * of 4 elements with unit head-dim stride, element by element otherwise: the same inputs
 * at an aligned and at a misaligned offset must give the same bits, forward and decode. */
START_TEST(test_unaligned_views)
{
    const xfa_dtype dtype = (xfa_dtype)(_i % XFA_DTYPE_COUNT_);
    const bool decode = _i / XFA_DTYPE_COUNT_;
    const int64_t B = 2, S = 45, H = 2, D = 64;
    const size_t elem = xfa_dtype_size(dtype), t_bytes = (size_t)(B * S * H * D) * elem, lens_at = 7 * t_bytes + 1024;
    xfa_buffer *buf = NULL;
    ck_assert_int_eq(xfa_buffer_create(ctx, lens_at + 256, &buf), XFA_SUCCESS);
    unsigned char *host = malloc(3 * t_bytes);
    uint64_t rng = 17 + (uint64_t)_i;
    for (size_t i = 0; i < 3 * (size_t)(B * S * H * D); i++)
        xfa_store_f32(host, dtype, (int64_t)i, (float)xfa_test_rand_normal(&rng));
    const int32_t lens[2] = {30, 41};
    ck_assert_int_eq(xfa_buffer_upload(buf, lens_at, lens, sizeof lens), XFA_SUCCESS);
    void *out[2];
    for (int shift = 0; shift < 2; shift++) {
        /* q, k, v packed after `skip` elements: 0 (aligned) or 1 (rows start at 4n + 1) */
        const size_t at = (size_t)shift * (3 * t_bytes + 512) + (size_t)shift * elem;
        ck_assert_int_eq(xfa_buffer_upload(buf, at, host, 3 * t_bytes), XFA_SUCCESS);
        const xfa_tensor q = xfa_tensor_bshd(buf, at, dtype, B, decode ? 1 : S, H, D);
        const xfa_tensor k = xfa_tensor_bshd(buf, at + t_bytes, dtype, B, S, H, D);
        const xfa_tensor v = xfa_tensor_bshd(buf, at + 2 * t_bytes, dtype, B, S, H, D);
        const xfa_tensor o = xfa_tensor_bshd(buf, 6 * t_bytes + 768, dtype, B, decode ? 1 : S, H, D);
        if (decode) {
            const xfa_tensor seqlens = xfa_tensor_bshd(buf, lens_at, XFA_DTYPE_I32, B, 1, 1, 1);
            const xfa_kv_cache cache = {&k, &v, &seqlens, NULL};
            xfa_decode_params params = XFA_DECODE_PARAMS_DEFAULT;
            params.num_splits = 2;
            ck_assert_msg(xfa_attention_decode(ctx, &params, &q, &cache, NULL, NULL, &o, NULL) == XFA_SUCCESS, "%s",
                          xfa_context_last_error(ctx));
        } else {
            xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
            params.causal = 1;
            params.window_left = 20;
            ck_assert_msg(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, NULL) == XFA_SUCCESS, "%s",
                          xfa_context_last_error(ctx));
        }
        out[shift] = malloc(t_bytes);
        ck_assert_int_eq(xfa_buffer_download(buf, o.offset, out[shift], xfa_tensor_span_bytes(&o)), XFA_SUCCESS);
    }
    ck_assert_int_eq(memcmp(out[0], out[1], xfa_tensor_span_bytes(&(xfa_tensor){.buffer = buf, .dtype = dtype,
                                                                                .shape = {B, decode ? 1 : S, H, D},
                                                                                .stride = {(decode ? 1 : S) * H * D, H * D, D, 1}})),
                     0);
    free(out[0]);
    free(out[1]);
    free(host);
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
    tcase_add_loop_test(tc, test_unaligned_views, 0, 2 * XFA_DTYPE_COUNT_);
    suite_add_tcase(suite, tc);
    const int rc = xfa_check_run(suite, 0);
    xfa_context_destroy(&ctx);
    return rc;
}
