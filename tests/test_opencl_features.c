/*
 * test_opencl_features.c - what the shared suites do not express, on OpenCL:
 *   - a bias broadcast over only one of batch and heads (the shared cases broadcast
 *     over both or neither), and a split decode with window, softcap, ALiBi and GQA
 *     (the shared suite has those on one-split caches only), checked against the CPU
 *     backend on the same inputs (itself checked against the fp64 reference);
 *   - lengths the kernels read from device memory and clamp (xfa.h): varlen offsets
 *     past the packed rows or a sequence longer than max_seqlen_q, decode lengths past
 *     the capacity and page ids past num_pages. The call must succeed, write only
 *     inside its outputs (guard bytes, the cache's spare pages) and leave no NaN in
 *     the rows it writes.
 * Usage: test_opencl_features [device]; exit 77 without an OpenCL device.
 */
#include "attention_case.h"
#include "check_run.h"
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static xfa_context *ocl, *cpu;

static void contiguous(const int64_t shape[4], int64_t stride[4])
{
    stride[3] = 1;
    for (int i = 2; i >= 0; i--) stride[i] = stride[i + 1] * shape[i + 1];
}

/* A random f32 tensor of `shape` on ctx (same values for the same seed). */
static void make_input(xfa_context *ctx, xfa_test_tensor *t, const int64_t shape[4], uint64_t seed)
{
    int64_t stride[4];
    contiguous(shape, stride);
    ck_assert(xfa_test_tensor_alloc(t, XFA_DTYPE_F32, shape, stride));
    uint64_t rng = seed;
    xfa_test_tensor_fill_random(t, &rng);
    ck_assert_int_eq(xfa_test_tensor_upload(ctx, t), XFA_SUCCESS);
}

static void make_output(xfa_context *ctx, xfa_test_tensor *t, const int64_t shape[4])
{
    int64_t stride[4];
    contiguous(shape, stride);
    ck_assert(xfa_test_tensor_alloc(t, XFA_DTYPE_F32, shape, stride));
    xfa_test_tensor_poison(t);
    ck_assert_int_eq(xfa_test_tensor_upload(ctx, t), XFA_SUCCESS);
}

/* O of a causal, windowed, biased f32 forward with bias of shape (bb, Sq, bh, Sk) on ctx. */
static void biased_forward(xfa_context *ctx, int64_t bb, int64_t bh, float *o_out, int64_t *unwritten, int64_t *damage)
{
    const int64_t B = 2, Sq = 37, Sk = 53, H = 4, Hkv = 2, D = 64;
    const int64_t qs[4] = {B, Sq, H, D}, ks[4] = {B, Sk, Hkv, D}, bs[4] = {bb, Sq, bh, Sk};
    xfa_test_tensor q, k, v, bias, o;
    make_input(ctx, &q, qs, 1);
    make_input(ctx, &k, ks, 2);
    make_input(ctx, &v, ks, 3);
    int64_t stride[4];
    contiguous(bs, stride);
    ck_assert(xfa_test_tensor_alloc(&bias, XFA_DTYPE_F32, bs, stride));
    uint64_t rng = 4;
    xfa_test_tensor_fill_random(&bias, &rng);
    float *bias_host = (float *)(bias.host + bias.view.offset);
    for (int64_t i = 0; i < bb * Sq * bh * Sk; i += 7) bias_host[i] = -INFINITY; /* masked keys */
    ck_assert_int_eq(xfa_test_tensor_upload(ctx, &bias), XFA_SUCCESS);
    make_output(ctx, &o, qs);
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.causal = 1;
    params.window_left = 30;
    params.bias = &bias.view;
    ck_assert_msg(xfa_attention_forward(ctx, &params, &q.view, &k.view, &v.view, &o.view, NULL) == XFA_SUCCESS, "%s",
                  xfa_context_last_error(ctx));
    ck_assert_int_eq(xfa_test_tensor_download(&o), XFA_SUCCESS);
    int64_t nonfinite = 0;
    xfa_test_tensor_check_written(&o, unwritten, damage);
    xfa_test_tensor_gather(&o, o_out, &nonfinite);
    ck_assert_int_eq(nonfinite, 0);
    xfa_test_tensor_free(&q);
    xfa_test_tensor_free(&k);
    xfa_test_tensor_free(&v);
    xfa_test_tensor_free(&bias);
    xfa_test_tensor_free(&o);
}

START_TEST(test_bias_broadcast_one_dim)
{
    static const int64_t dims[][2] = {{1, 4}, {2, 1}}; /* over batch only, over heads only */
    const int64_t n = 2 * 37 * 4 * 64;
    float *got = malloc((size_t)n * sizeof *got), *want = malloc((size_t)n * sizeof *want);
    int64_t unwritten = 0, damage = 0, cpu_unwritten = 0, cpu_damage = 0;
    biased_forward(ocl, dims[_i][0], dims[_i][1], got, &unwritten, &damage);
    biased_forward(cpu, dims[_i][0], dims[_i][1], want, &cpu_unwritten, &cpu_damage);
    ck_assert_int_eq(unwritten + damage + cpu_unwritten + cpu_damage, 0);
    double worst = 0, top = 0;
    for (int64_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)got[i] - want[i]));
        top = fmax(top, fabs((double)want[i]));
    }
    /* two f32 computations of the same sums: both within 1e-5 of the reference */
    ck_assert_msg(worst <= 2e-5 * top, "bias (%lld, Sq, %lld, Sk): max |opencl - cpu| %g, max |o| %g",
                  (long long)dims[_i][0], (long long)dims[_i][1], worst, top);
    free(got);
    free(want);
}
END_TEST

/* Offsets past the packed rows, a decreasing pair and a sequence longer than max_seqlen_q. */
START_TEST(test_varlen_offsets_clamped)
{
    const int64_t total_q = 40, total_k = 50, H = 2, D = 32;
    const int64_t qs[4] = {1, total_q, H, D}, ks[4] = {1, total_k, H, D}, cs[4] = {4, 1, 1, 1}, cstride[4] = {1, 1, 1, 1};
    static const int32_t cu_q_bad[4] = {0, 30, 20, 1000}, cu_k_bad[4] = {-5, 60, 10, 50};
    xfa_test_tensor q, k, v, o, cu_q, cu_k;
    make_input(ocl, &q, qs, 5);
    make_input(ocl, &k, ks, 6);
    make_input(ocl, &v, ks, 7);
    make_output(ocl, &o, qs);
    ck_assert(xfa_test_tensor_alloc(&cu_q, XFA_DTYPE_I32, cs, cstride));
    ck_assert(xfa_test_tensor_alloc(&cu_k, XFA_DTYPE_I32, cs, cstride));
    memcpy(cu_q.host + cu_q.view.offset, cu_q_bad, sizeof cu_q_bad);
    memcpy(cu_k.host + cu_k.view.offset, cu_k_bad, sizeof cu_k_bad);
    ck_assert_int_eq(xfa_test_tensor_upload(ocl, &cu_q), XFA_SUCCESS);
    ck_assert_int_eq(xfa_test_tensor_upload(ocl, &cu_k), XFA_SUCCESS);
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.causal = _i;
    params.cu_seqlens_q = &cu_q.view;
    params.cu_seqlens_k = &cu_k.view;
    params.max_seqlen_q = 16; /* sequence 0 has 30 rows: its rows 16.. are not computed */
    ck_assert_msg(xfa_attention_forward(ocl, &params, &q.view, &k.view, &v.view, &o.view, NULL) == XFA_SUCCESS, "%s",
                  xfa_context_last_error(ocl));
    ck_assert_int_eq(xfa_test_tensor_download(&o), XFA_SUCCESS);
    int64_t unwritten = 0, damage = 0;
    xfa_test_tensor_check_written(&o, &unwritten, &damage);
    ck_assert_int_eq(damage, 0);
    /* clamped: sequence 0 is rows 0..29, sequence 1 is empty (its end is raised to its start, 30),
     * sequence 2 is rows 20..39; of each, rows 0..15 are computed for sure (past max_seqlen_q a
     * row may or may not be, as the row blocks fall) */
    const float *out = (const float *)(o.host + o.view.offset);
    for (int64_t s = 0; s < total_q; s++)
        for (int64_t x = 0; x < H * D; x++)
            if (s < 16 || (s >= 20 && s < 36))
                ck_assert_msg(isfinite(out[s * H * D + x]), "row %lld", (long long)s);
    xfa_test_tensor_free(&q);
    xfa_test_tensor_free(&k);
    xfa_test_tensor_free(&v);
    xfa_test_tensor_free(&o);
    xfa_test_tensor_free(&cu_q);
    xfa_test_tensor_free(&cu_k);
}
END_TEST

/* Lengths past the capacity, negative ones, page ids past num_pages or negative, with an append:
 * only the cache's real pages may change, the output is finite. */
START_TEST(test_decode_lengths_clamped)
{
    const int64_t B = 3, Sq = 2, H = 2, D = 32, page = 8, pages_per_seq = 4, num_pages = 12;
    const bool paged = _i;
    const int64_t capacity = pages_per_seq * page;
    const int64_t qs[4] = {B, Sq, H, D}, kn_s[4] = {B, Sq, H, D};
    const int64_t cache_s[4] = {paged ? num_pages : B, paged ? page : capacity, H, D};
    const int64_t ls[4] = {B, 1, 1, 1}, lstride[4] = {1, 1, 1, 1}, ts[4] = {B, 1, 1, pages_per_seq};
    int64_t tstride[4];
    contiguous(ts, tstride);
    xfa_test_tensor q, kc, vc, kn, vn, o, lens, table;
    make_input(ocl, &q, qs, 8);
    make_input(ocl, &kc, cache_s, 9);
    make_input(ocl, &vc, cache_s, 10);
    make_input(ocl, &kn, kn_s, 11);
    make_input(ocl, &vn, kn_s, 12);
    make_output(ocl, &o, qs);
    ck_assert(xfa_test_tensor_alloc(&lens, XFA_DTYPE_I32, ls, lstride));
    ck_assert(xfa_test_tensor_alloc(&table, XFA_DTYPE_I32, ts, tstride));
    const int32_t bad_lens[3] = {(int32_t)capacity + 100, -7, 5};
    memcpy(lens.host + lens.view.offset, bad_lens, sizeof bad_lens);
    int32_t *t = (int32_t *)(table.host + table.view.offset);
    for (int64_t i = 0; i < B * pages_per_seq; i++) t[i] = (int32_t)(i % 3 == 0 ? 999 : i % 3 == 1 ? -3 : i);
    ck_assert_int_eq(xfa_test_tensor_upload(ocl, &lens), XFA_SUCCESS);
    ck_assert_int_eq(xfa_test_tensor_upload(ocl, &table), XFA_SUCCESS);
    xfa_kv_cache cache = {&kc.view, &vc.view, &lens.view, paged ? &table.view : NULL};
    xfa_decode_params params = XFA_DECODE_PARAMS_DEFAULT;
    params.num_splits = 3;
    ck_assert_msg(xfa_attention_decode(ocl, &params, &q.view, &cache, &kn.view, &vn.view, &o.view, NULL) == XFA_SUCCESS,
                  "%s", xfa_context_last_error(ocl));
    ck_assert_int_eq(xfa_test_tensor_download(&o), XFA_SUCCESS);
    ck_assert_int_eq(xfa_test_tensor_download(&kc), XFA_SUCCESS);
    int64_t unwritten = 0, damage = 0, nonfinite = 0;
    xfa_test_tensor_check_written(&o, &unwritten, &damage);
    ck_assert_int_eq(unwritten + damage, 0);
    float *out = malloc((size_t)(B * Sq * H * D) * sizeof *out);
    xfa_test_tensor_gather(&o, out, &nonfinite);
    ck_assert_int_eq(nonfinite, 0);
    free(out);
    /* the cache's guard bytes are intact: every write stayed inside its pages */
    xfa_test_tensor reference;
    make_input(ocl, &reference, cache_s, 9);
    ck_assert_int_eq(memcmp(kc.host, reference.host, XFA_TEST_GUARD_BYTES), 0);
    ck_assert_int_eq(memcmp(kc.host + kc.bytes - XFA_TEST_GUARD_BYTES, reference.host + reference.bytes - XFA_TEST_GUARD_BYTES,
                            XFA_TEST_GUARD_BYTES),
                     0);
    xfa_test_tensor_free(&reference);
    xfa_test_tensor *all[] = {&q, &kc, &vc, &kn, &vn, &o, &lens, &table};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) xfa_test_tensor_free(all[i]);
}
END_TEST

/* O and LSE of a split decode with a window, softcap, ALiBi and GQA, appending, on ctx. */
static void featured_decode(xfa_context *ctx, bool paged, float *o_out, float *lse_out)
{
    const int64_t B = 2, Sq = 3, Hq = 8, Hkv = 2, D = 64, page = 32, pages_per_seq = 10, capacity = page * pages_per_seq;
    const int64_t num_pages = B * pages_per_seq + 1;
    const int64_t qs[4] = {B, Sq, Hq, D}, ns[4] = {B, Sq, Hkv, D};
    const int64_t cache_s[4] = {paged ? num_pages : B, paged ? page : capacity, Hkv, D};
    const int64_t ls[4] = {B, 1, 1, 1}, ts[4] = {B, 1, 1, pages_per_seq}, as[4] = {1, 1, Hq, 1};
    const int64_t lse_s[4] = {B, Sq, Hq, 1};
    int64_t tstride[4], astride[4];
    contiguous(ts, tstride);
    contiguous(as, astride);
    xfa_test_tensor q, kc, vc, kn, vn, o, lse, lens, table, slopes;
    make_input(ctx, &q, qs, 21);
    make_input(ctx, &kc, cache_s, 22);
    make_input(ctx, &vc, cache_s, 23);
    make_input(ctx, &kn, ns, 24);
    make_input(ctx, &vn, ns, 25);
    make_output(ctx, &o, qs);
    make_output(ctx, &lse, lse_s);
    ck_assert(xfa_test_tensor_alloc(&lens, XFA_DTYPE_I32, ls, (int64_t[4]){1, 1, 1, 1}));
    ck_assert(xfa_test_tensor_alloc(&table, XFA_DTYPE_I32, ts, tstride));
    ck_assert(xfa_test_tensor_alloc(&slopes, XFA_DTYPE_F32, as, astride));
    const int32_t cached[2] = {250, 97};
    memcpy(lens.host + lens.view.offset, cached, sizeof cached);
    int32_t *t = (int32_t *)(table.host + table.view.offset);
    for (int64_t i = 0; i < B * pages_per_seq; i++) t[i] = (int32_t)((i * 7 + 3) % (B * pages_per_seq)) + 1;
    for (int64_t h = 0; h < Hq; h++) ((float *)(slopes.host + slopes.view.offset))[h] = 0.03f * (float)(h + 1);
    ck_assert_int_eq(xfa_test_tensor_upload(ctx, &lens), XFA_SUCCESS);
    ck_assert_int_eq(xfa_test_tensor_upload(ctx, &table), XFA_SUCCESS);
    ck_assert_int_eq(xfa_test_tensor_upload(ctx, &slopes), XFA_SUCCESS);
    xfa_kv_cache cache = {&kc.view, &vc.view, &lens.view, paged ? &table.view : NULL};
    xfa_decode_params params = XFA_DECODE_PARAMS_DEFAULT;
    params.window_left = 40;
    params.softcap = 5.0f;
    params.alibi_slopes = &slopes.view;
    params.num_splits = 4;
    ck_assert_msg(xfa_attention_decode(ctx, &params, &q.view, &cache, &kn.view, &vn.view, &o.view, &lse.view) ==
                      XFA_SUCCESS,
                  "%s", xfa_context_last_error(ctx));
    ck_assert_int_eq(xfa_test_tensor_download(&o), XFA_SUCCESS);
    ck_assert_int_eq(xfa_test_tensor_download(&lse), XFA_SUCCESS);
    int64_t unwritten = 0, damage = 0, nonfinite = 0;
    xfa_test_tensor_check_written(&o, &unwritten, &damage);
    xfa_test_tensor_check_written(&lse, &unwritten, &damage);
    ck_assert_int_eq(unwritten + damage, 0);
    xfa_test_tensor_gather(&o, o_out, &nonfinite);
    xfa_test_tensor_gather(&lse, lse_out, &nonfinite);
    ck_assert_int_eq(nonfinite, 0);
    xfa_test_tensor *all[] = {&q, &kc, &vc, &kn, &vn, &o, &lse, &lens, &table, &slopes};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) xfa_test_tensor_free(all[i]);
}

/* Split decode with every decode feature at once: the shared suite runs the features on short caches
 * (one split); here 4 splits over ragged lengths, contiguous and paged, against the CPU backend. */
START_TEST(test_decode_features_split)
{
    const int64_t n = 2 * 3 * 8 * 64, rows = 2 * 3 * 8;
    float *got = malloc((size_t)n * sizeof *got), *want = malloc((size_t)n * sizeof *want);
    float *lse_got = malloc((size_t)rows * sizeof *lse_got), *lse_want = malloc((size_t)rows * sizeof *lse_want);
    featured_decode(ocl, _i, got, lse_got);
    featured_decode(cpu, _i, want, lse_want);
    double worst = 0, top = 0;
    for (int64_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)got[i] - want[i]));
        top = fmax(top, fabs((double)want[i]));
    }
    /* two f32 computations of the same sums: both within 1e-5 of the reference */
    ck_assert_msg(worst <= 2e-5 * top, "paged %d: max |opencl - cpu| %g, max |o| %g", _i, worst, top);
    for (int64_t r = 0; r < rows; r++)
        ck_assert_msg(fabs((double)lse_got[r] - lse_want[r]) <= 1e-4 * fmax(1.0, fabs((double)lse_want[r])),
                      "lse row %lld: %g vs %g", (long long)r, lse_got[r], lse_want[r]);
    free(got);
    free(want);
    free(lse_got);
    free(lse_want);
}
END_TEST

int main(int argc, char **argv)
{
    const int device = argc > 1 ? atoi(argv[1]) : 0;
    int count = 0;
    if (xfa_device_count(XFA_BACKEND_OPENCL, &count) != XFA_SUCCESS || count <= device) {
        printf("SKIP: no OpenCL device\n");
        return 77;
    }
    if (xfa_context_create(XFA_BACKEND_OPENCL, device, &ocl) != XFA_SUCCESS ||
        xfa_context_create(XFA_BACKEND_CPU, 0, &cpu) != XFA_SUCCESS) {
        fprintf(stderr, "xfa_context_create: %s\n", xfa_last_error());
        return 1;
    }
    xfa_device_info info;
    xfa_context_get_info(ocl, &info);
    printf("device %s, path %s\n", info.name, info.path);
    Suite *s = suite_create("opencl_features");
    TCase *tc = tcase_create("features");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_bias_broadcast_one_dim, 0, 2);
    tcase_add_loop_test(tc, test_varlen_offsets_clamped, 0, 2);
    tcase_add_loop_test(tc, test_decode_lengths_clamped, 0, 2);
    tcase_add_loop_test(tc, test_decode_features_split, 0, 2);
    suite_add_tcase(s, tc);
    const int rc = xfa_check_run(s, 0);
    xfa_context_destroy(&ocl);
    xfa_context_destroy(&cpu);
    return rc;
}
