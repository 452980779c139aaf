/*
 * test_cuda_features.c - the extras on the CUDA backend's tensor-core path, which the
 * shared forward suite reaches only in part: its window and varlen cases force Br = Bc = 16,
 * a tile only the generic kernel has. Here every case runs on the library's own plan (the
 * mma.sync kernel for f16/bf16 on sm_80+; the Hopper path declines extras), against the fp64
 * reference:
 *   - windows over several 128-row blocks and many key blocks, so whole blocks are skipped
 *     per work-group and per warp, with Sq > Sk (rows that see nothing: O = 0, LSE = -inf);
 *   - packed variable-length batches with sequences longer than one row block;
 *   - everything at once at every tensor-core head dim;
 *   - varlen offsets read from device memory that are out of range (clamped, as OpenCL).
 * Usage: test_cuda_features [device]; exit 77 without a CUDA device.
 */
#include "attention_case.h"
#include "check_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static xfa_context *ctx;
static xfa_device_info info;

static const xfa_dtype half_types[2] = {XFA_DTYPE_F16, XFA_DTYPE_BF16};
/* Every head dim the mma.sync kernel is built for (cuda/mma_d*.cu). */
static const int64_t tensor_core_dims[6] = {32, 64, 96, 128, 192, 256};

static void expect_pass(const xfa_test_case *tc)
{
    const xfa_test_result r = xfa_test_run_case(ctx, tc);
    char what[256];
    xfa_test_case_describe(tc, what, sizeof what);
    ck_assert_msg(r.status == XFA_SUCCESS && r.passed, "%s: %s", what, r.message);
}

/* Windows (left, right), causal or not, Sq = Sk, Sq < Sk and Sq > Sk, head dims 64 and 128. */
START_TEST(test_windows_on_tensor_cores)
{
    static const int64_t windows[][2] = {{0, 0}, {3, -1}, {-1, 2}, {100, 0}, {40, 7}, {200, 300}, {0, -1}, {130, 130}};
    static const int64_t lengths[][2] = {{600, 600}, {300, 700}, {700, 300}};
    const int64_t *w = windows[_i % 8];
    const int64_t *n = lengths[_i / 8 % 3];
    const bool causal = _i / 24 % 2 && w[1] <= 0;
    xfa_test_case tc = xfa_test_case_make(1, n[0], n[1], 4, 2, _i % 2 ? 128 : 64, half_types[_i / 48 % 2], causal,
                                          11000 + (uint64_t)_i);
    tc.window_left = w[0];
    tc.window_right = causal ? -1 : w[1];
    expect_pass(&tc);
}
END_TEST

/* Softcap, ALiBi, bias (f32 and the call's dtype, broadcast or not), causal or not, GQA. */
START_TEST(test_score_extras_on_tensor_cores)
{
    xfa_test_case tc = xfa_test_case_make(2, 150, 333, 4, 2, tensor_core_dims[_i % 6], half_types[_i / 6 % 2], _i / 12 % 2,
                                          12000 + (uint64_t)_i);
    switch (_i / 24) {
    case 0: tc.softcap = 5.0f; break;
    case 1: tc.alibi = true; tc.per_batch = _i % 2; break;
    case 2: tc.bias = true; break;
    default: tc.bias = true; tc.per_batch = true; tc.bias_dtype = tc.dtype; break;
    }
    expect_pass(&tc);
}
END_TEST

/* Everything at once: GQA, Sq != Sk, causal, window, softcap, ALiBi, bias, padded BHSD. */
START_TEST(test_all_extras_on_tensor_cores)
{
    xfa_test_case tc = xfa_test_case_make(2, 267, 190, 6, 2, tensor_core_dims[_i % 6], half_types[_i / 6 % 2], _i / 12 % 2,
                                          13000 + (uint64_t)_i);
    tc.window_left = 70;
    tc.window_right = tc.causal ? -1 : 20;
    tc.softcap = 10.0f;
    tc.alibi = true;
    tc.bias = true;
    tc.per_batch = _i % 2;
    tc.layout = XFA_LAYOUT_BHSD;
    tc.row_pad = 8; /* rows stay 16-byte aligned: still the tensor-core kernel */
    expect_pass(&tc);
}
END_TEST

/* Packed sequences longer than a row block, empty ones, with GQA, causal, a window and ALiBi. */
START_TEST(test_varlen_on_tensor_cores)
{
    static const int64_t lens[][2][5] = {
        {{130, 17, 1, 260, 9}, {130, 17, 1, 260, 9}},
        {{0, 300, 40, 3, 0}, {7, 129, 400, 0, 2}},
        {{1, 1, 1, 1, 1}, {640, 3, 100, 1, 200}},
        {{270, 2, 125, 0, 11}, {35, 500, 250, 8, 11}},
    };
    const int64_t (*l)[5] = lens[_i % 4];
    xfa_test_case tc = xfa_test_case_make(1, 1, 1, 4, 2, _i / 8 % 2 ? 128 : 64, half_types[_i / 4 % 2],
                                          _i / 16 % 2, 14000 + (uint64_t)_i);
    xfa_test_case_varlen(&tc, 5, l[0], l[1]);
    if (_i >= 32) {
        tc.window_left = 50;
        tc.alibi = true;
        tc.softcap = 8.0f;
    }
    tc.layout = _i % 3 ? XFA_LAYOUT_BSHD : XFA_LAYOUT_BHSD;
    expect_pass(&tc);
}
END_TEST

static void contiguous(const int64_t shape[4], int64_t stride[4])
{
    stride[3] = 1;
    for (int i = 2; i >= 0; i--) stride[i] = stride[i + 1] * shape[i + 1];
}

static void make_tensor(xfa_test_tensor *t, xfa_dtype dtype, const int64_t shape[4], uint64_t seed)
{
    int64_t stride[4];
    contiguous(shape, stride);
    ck_assert(xfa_test_tensor_alloc(t, dtype, shape, stride));
    if (seed) {
        uint64_t rng = seed;
        xfa_test_tensor_fill_random(t, &rng);
    } else {
        xfa_test_tensor_poison(t);
    }
    ck_assert_int_eq(xfa_test_tensor_upload(ctx, t), XFA_SUCCESS);
}

/* Offsets past the packed rows, a decreasing pair and a sequence longer than max_seqlen_q
 * (as test_opencl_features.c): f32 runs the generic kernel, bf16 the tensor-core one. */
START_TEST(test_varlen_offsets_clamped)
{
    const xfa_dtype dtype = _i / 2 ? XFA_DTYPE_BF16 : XFA_DTYPE_F32;
    const int64_t total_q = 40, total_k = 50, H = 2, D = 64;
    const int64_t qs[4] = {1, total_q, H, D}, ks[4] = {1, total_k, H, D}, cs[4] = {4, 1, 1, 1};
    static const int32_t cu_q_bad[4] = {0, 30, 20, 1000}, cu_k_bad[4] = {-5, 60, 10, 50};
    xfa_test_tensor q, k, v, o, lse, cu_q, cu_k;
    make_tensor(&q, dtype, qs, 5);
    make_tensor(&k, dtype, ks, 6);
    make_tensor(&v, dtype, ks, 7);
    make_tensor(&o, dtype, qs, 0);
    const int64_t ls[4] = {1, total_q, H, 1};
    make_tensor(&lse, XFA_DTYPE_F32, ls, 0);
    int64_t cstride[4];
    contiguous(cs, cstride);
    ck_assert(xfa_test_tensor_alloc(&cu_q, XFA_DTYPE_I32, cs, cstride));
    ck_assert(xfa_test_tensor_alloc(&cu_k, XFA_DTYPE_I32, cs, cstride));
    memcpy(cu_q.host + cu_q.view.offset, cu_q_bad, sizeof cu_q_bad);
    memcpy(cu_k.host + cu_k.view.offset, cu_k_bad, sizeof cu_k_bad);
    ck_assert_int_eq(xfa_test_tensor_upload(ctx, &cu_q), XFA_SUCCESS);
    ck_assert_int_eq(xfa_test_tensor_upload(ctx, &cu_k), XFA_SUCCESS);
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.causal = _i % 2;
    params.cu_seqlens_q = &cu_q.view;
    params.cu_seqlens_k = &cu_k.view;
    params.max_seqlen_q = 16; /* sequence 0 has 30 rows: its rows 16.. are not computed */
    ck_assert_msg(xfa_attention_forward(ctx, &params, &q.view, &k.view, &v.view, &o.view, &lse.view) == XFA_SUCCESS,
                  "%s", xfa_context_last_error(ctx));
    ck_assert_int_eq(xfa_test_tensor_download(&o), XFA_SUCCESS);
    ck_assert_int_eq(xfa_test_tensor_download(&lse), XFA_SUCCESS);
    int64_t unwritten = 0, damage = 0;
    xfa_test_tensor_check_written(&o, &unwritten, &damage);
    ck_assert_int_eq(damage, 0);
    xfa_test_tensor_check_written(&lse, &unwritten, &damage);
    ck_assert_int_eq(damage, 0);
    /* clamped: sequence 0 is rows 0..29, sequence 1 is empty (its end is raised to its start, 30),
     * sequence 2 is rows 20..39; of each, rows 0..15 are computed for sure */
    float *out = malloc((size_t)(total_q * H * D) * sizeof *out);
    float *lse_out = malloc((size_t)(total_q * H) * sizeof *lse_out);
    int64_t nonfinite = 0;
    xfa_test_tensor_gather(&o, out, &nonfinite);
    xfa_test_tensor_gather(&lse, lse_out, &nonfinite);
    for (int64_t s = 0; s < total_q; s++)
        if (s < 16 || (s >= 20 && s < 36)) {
            for (int64_t x = 0; x < H * D; x++)
                ck_assert_msg(isfinite(out[s * H * D + x]), "o row %lld", (long long)s);
            for (int64_t h = 0; h < H; h++) /* every such row sees a key: a finite LSE */
                ck_assert_msg(isfinite(lse_out[s * H + h]), "lse row %lld", (long long)s);
        }
    free(out);
    free(lse_out);
    xfa_test_tensor_free(&q);
    xfa_test_tensor_free(&k);
    xfa_test_tensor_free(&v);
    xfa_test_tensor_free(&o);
    xfa_test_tensor_free(&lse);
    xfa_test_tensor_free(&cu_q);
    xfa_test_tensor_free(&cu_k);
}
END_TEST

int main(int argc, char **argv)
{
    const int device = argc > 1 ? atoi(argv[1]) : 0;
    int count = 0;
    if (xfa_device_count(XFA_BACKEND_CUDA, &count) != XFA_SUCCESS || count <= device) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    if (xfa_context_create(XFA_BACKEND_CUDA, device, &ctx) != XFA_SUCCESS) {
        fprintf(stderr, "xfa_context_create: %s\n", xfa_last_error());
        return 1;
    }
    xfa_context_get_info(ctx, &info);
    printf("device %s, path %s\n", info.name, info.path);
    Suite *s = suite_create("cuda_features");
    TCase *tc = tcase_create("features");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_windows_on_tensor_cores, 0, 96);
    tcase_add_loop_test(tc, test_score_extras_on_tensor_cores, 0, 96);
    tcase_add_loop_test(tc, test_all_extras_on_tensor_cores, 0, 24);
    tcase_add_loop_test(tc, test_varlen_on_tensor_cores, 0, 64);
    tcase_add_loop_test(tc, test_varlen_offsets_clamped, 0, 4);
    suite_add_tcase(s, tc);
    const int rc = xfa_check_run(s, 0);
    xfa_context_destroy(&ctx);
    return rc;
}
