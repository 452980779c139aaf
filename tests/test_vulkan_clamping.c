/*
 * test_vulkan_clamping.c - what the shared suites leave out on Vulkan: lengths,
 * page ids and packed offsets that only the device sees (xfa.h: GPU kernels
 * clamp them so that no access leaves the views), and a merge of one part.
 * A clamped call must give the same bits as the call with the clamped values,
 * and write nothing outside its views (a poisoned tail after the cache).
 * Validation layer on under CTest; any message fails the suite.
 */
#include "attention_case.h"
#include "check_run.h"
#include "xfa_vulkan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static xfa_context *ctx;

enum { D = 32, CAP = 48, PAGE = 16, PAGES = 4, TAIL = 64 };

/* One buffer: q (1,1,2,D), o (1,1,2,D), lse (1,1,2,1), seqlens (1), block table (1,1,1,3),
 * k_new/v_new (1,1,1,D), then the cache k, v (CAP tokens, or PAGES pages) and a poisoned tail. */
typedef struct decode_setup {
    xfa_buffer *buf;
    xfa_tensor q, o, lse, lens, table, kn, vn, k, v;
    size_t tail_offset, bytes;
} decode_setup;

static void setup_make(decode_setup *s, bool paged)
{
    const size_t row = D * 4, cache_rows = paged ? PAGES * PAGE : CAP;
    size_t at = 0;
    s->bytes = 2 * row * 2 + 256 + 256 + 2 * row + 2 * cache_rows * row + TAIL * 4;
    ck_assert_int_eq(xfa_buffer_create(ctx, s->bytes, &s->buf), XFA_SUCCESS);
    s->q = xfa_tensor_bshd(s->buf, at, XFA_DTYPE_F32, 1, 1, 2, D), at += 2 * row;
    s->o = xfa_tensor_bshd(s->buf, at, XFA_DTYPE_F32, 1, 1, 2, D), at += 2 * row;
    s->lse = xfa_tensor_lse(s->buf, at, 1, 1, 2), at += 256;
    s->lens = xfa_tensor_bshd(s->buf, at, XFA_DTYPE_I32, 1, 1, 1, 1);
    s->table = xfa_tensor_bshd(s->buf, at + 16, XFA_DTYPE_I32, 1, 1, 1, 3), at += 256;
    s->kn = xfa_tensor_bshd(s->buf, at, XFA_DTYPE_F32, 1, 1, 1, D), at += row;
    s->vn = xfa_tensor_bshd(s->buf, at, XFA_DTYPE_F32, 1, 1, 1, D), at += row;
    if (paged) {
        s->k = xfa_tensor_bshd(s->buf, at, XFA_DTYPE_F32, PAGES, PAGE, 1, D), at += cache_rows * row;
        s->v = xfa_tensor_bshd(s->buf, at, XFA_DTYPE_F32, PAGES, PAGE, 1, D), at += cache_rows * row;
    } else {
        s->k = xfa_tensor_bshd(s->buf, at, XFA_DTYPE_F32, 1, CAP, 1, D), at += cache_rows * row;
        s->v = xfa_tensor_bshd(s->buf, at, XFA_DTYPE_F32, 1, CAP, 1, D), at += cache_rows * row;
    }
    s->tail_offset = at;
    float *host = malloc(s->bytes);
    uint64_t rng = 5;
    for (size_t i = 0; i < s->bytes / 4; i++) host[i] = (float)xfa_test_rand_normal(&rng);
    for (size_t i = s->tail_offset / 4; i < s->bytes / 4; i++) host[i] = 12345.0f;
    ck_assert_int_eq(xfa_buffer_upload(s->buf, 0, host, s->bytes), XFA_SUCCESS);
    free(host);
}

static void set_ints(const xfa_tensor *t, const int32_t *values, int n)
{
    ck_assert_int_eq(xfa_buffer_upload(t->buffer, t->offset, values, (size_t)n * 4), XFA_SUCCESS);
}

/* o and lse of a decode call (q, then lse right after o in the buffer). */
static void decode_run(decode_setup *s, bool paged, bool append, int splits, float out[2 * D + 2])
{
    const xfa_kv_cache cache = {&s->k, &s->v, &s->lens, paged ? &s->table : NULL};
    xfa_decode_params params = XFA_DECODE_PARAMS_DEFAULT;
    params.num_splits = splits;
    ck_assert_msg(xfa_attention_decode(ctx, &params, &s->q, &cache, append ? &s->kn : NULL, append ? &s->vn : NULL,
                                       &s->o, &s->lse) == XFA_SUCCESS,
                  "%s", xfa_context_last_error(ctx));
    ck_assert_int_eq(xfa_buffer_download(s->buf, s->o.offset, out, 2 * D * 4), XFA_SUCCESS);
    ck_assert_int_eq(xfa_buffer_download(s->buf, s->lse.offset, out + 2 * D, 8), XFA_SUCCESS);
    for (int i = 0; i < 2 * D + 2; i++) /* an empty cache gives LSE -inf */
        ck_assert_msg(i < 2 * D ? isfinite(out[i]) : !isnan(out[i]), "out[%d] = %g", i, out[i]);
}

static void expect_tail_intact(const decode_setup *s)
{
    float tail[TAIL];
    ck_assert_int_eq(xfa_buffer_download(s->buf, s->tail_offset, tail, sizeof tail), XFA_SUCCESS);
    for (int i = 0; i < TAIL; i++) ck_assert_msg(tail[i] == 12345.0f, "tail[%d] written: %g", i, tail[i]);
}

/* A length past the capacity is the capacity; appending to a full cache drops the tokens. */
START_TEST(test_decode_lengths_clamped)
{
    const bool paged = _i / 2, append = _i % 2;
    const int splits = 1 + _i % 3;
    decode_setup s;
    setup_make(&s, paged);
    const int32_t table[3] = {2, 0, 3};
    set_ints(&s.table, table, 3);
    const int32_t capacity = paged ? 3 * PAGE : CAP;
    float want[2 * D + 2], got[2 * D + 2];
    set_ints(&s.lens, &capacity, 1);
    decode_run(&s, paged, false, splits, want);
    const int32_t too_long = append ? capacity : 1000;
    set_ints(&s.lens, &too_long, 1);
    decode_run(&s, paged, append, splits, got);
    ck_assert_int_eq(memcmp(want, got, sizeof want), 0);
    const int32_t negative = -7, zero = 0;
    set_ints(&s.lens, &negative, 1);
    decode_run(&s, paged, false, splits, got);
    set_ints(&s.lens, &zero, 1);
    decode_run(&s, paged, false, splits, want);
    ck_assert_int_eq(memcmp(want, got, sizeof want), 0);
    expect_tail_intact(&s);
    xfa_buffer_destroy(&s.buf);
}
END_TEST

/* Page ids past the pages (or negative) are clamped into 0 .. num_pages - 1. */
START_TEST(test_decode_pages_clamped)
{
    decode_setup s;
    setup_make(&s, true);
    const int32_t len = 3 * PAGE;
    set_ints(&s.lens, &len, 1);
    float want[2 * D + 2], got[2 * D + 2];
    const int32_t clamped[3] = {PAGES - 1, 0, 1}, wild[3] = {PAGES + 40, -3, 1};
    set_ints(&s.table, clamped, 3);
    decode_run(&s, true, true, 1 + _i, want);
    set_ints(&s.table, wild, 3);
    decode_run(&s, true, true, 1 + _i, got);
    ck_assert_int_eq(memcmp(want, got, sizeof want), 0);
    expect_tail_intact(&s);
    xfa_buffer_destroy(&s.buf);
}
END_TEST

/* Packed offsets past the rows are clamped to the rows. */
START_TEST(test_varlen_offsets_clamped)
{
    const int64_t rows_q = 9, rows_k = 13, H = 2;
    xfa_buffer *buf = NULL;
    const size_t qb = (size_t)(rows_q * H * D) * 4, kb = (size_t)(rows_k * H * D) * 4;
    ck_assert_int_eq(xfa_buffer_create(ctx, 2 * qb + 2 * kb + 512, &buf), XFA_SUCCESS);
    const xfa_tensor q = xfa_tensor_bshd(buf, 0, XFA_DTYPE_F32, 1, rows_q, H, D);
    const xfa_tensor k = xfa_tensor_bshd(buf, qb, XFA_DTYPE_F32, 1, rows_k, H, D);
    const xfa_tensor v = xfa_tensor_bshd(buf, qb + kb, XFA_DTYPE_F32, 1, rows_k, H, D);
    const xfa_tensor o = xfa_tensor_bshd(buf, qb + 2 * kb, XFA_DTYPE_F32, 1, rows_q, H, D);
    const xfa_tensor cu_q = xfa_tensor_bshd(buf, 2 * qb + 2 * kb, XFA_DTYPE_I32, 3, 1, 1, 1);
    const xfa_tensor cu_k = xfa_tensor_bshd(buf, 2 * qb + 2 * kb + 256, XFA_DTYPE_I32, 3, 1, 1, 1);
    float *host = malloc(2 * qb + 2 * kb);
    uint64_t rng = 11;
    for (size_t i = 0; i < (2 * qb + 2 * kb) / 4; i++) host[i] = (float)xfa_test_rand_normal(&rng);
    ck_assert_int_eq(xfa_buffer_upload(buf, 0, host, qb + 2 * kb), XFA_SUCCESS);
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.cu_seqlens_q = &cu_q;
    params.cu_seqlens_k = &cu_k;
    params.max_seqlen_q = rows_q;
    params.causal = _i;
    float *want = malloc(qb), *got = malloc(qb);
    const int32_t q_ok[3] = {0, 4, 9}, k_ok[3] = {0, 13, 13}, q_wild[3] = {0, 4, 900}, k_wild[3] = {-5, 70, 13};
    const int32_t *sets[2][2] = {{q_ok, k_ok}, {q_wild, k_wild}};
    for (int pass = 0; pass < 2; pass++) {
        ck_assert_int_eq(xfa_buffer_upload(buf, o.offset, host, qb), XFA_SUCCESS); /* same poison both times */
        set_ints(&cu_q, sets[pass][0], 3);
        set_ints(&cu_k, sets[pass][1], 3);
        ck_assert_msg(xfa_attention_forward(ctx, &params, &q, &k, &v, &o, NULL) == XFA_SUCCESS, "%s",
                      xfa_context_last_error(ctx));
        ck_assert_int_eq(xfa_buffer_download(buf, o.offset, pass ? got : want, qb), XFA_SUCCESS);
    }
    ck_assert_int_eq(memcmp(want, got, qb), 0);
    free(host);
    free(want);
    free(got);
    xfa_buffer_destroy(&buf);
}
END_TEST

/* A merge of one part is that part (cast to o's dtype), its LSE copied. */
START_TEST(test_merge_one_part)
{
    const int64_t B = 2, S = 3, H = 2;
    const size_t ob = (size_t)(B * S * H * D) * 4, lb = (size_t)(B * S * H) * 4;
    xfa_buffer *buf = NULL;
    ck_assert_int_eq(xfa_buffer_create(ctx, 2 * ob + 2 * lb + 256, &buf), XFA_SUCCESS);
    const xfa_tensor part = xfa_tensor_bhsd(buf, 0, XFA_DTYPE_F32, B, S, H, D);
    const xfa_tensor part_lse = xfa_tensor_lse(buf, ob, B, S, H);
    const xfa_tensor o = xfa_tensor_bshd(buf, ob + lb + 64, XFA_DTYPE_F32, B, S, H, D);
    const xfa_tensor lse = xfa_tensor_lse(buf, 2 * ob + lb + 128, B, S, H);
    float *host = malloc(ob + lb), *out = malloc(ob + lb);
    uint64_t rng = 3;
    for (size_t i = 0; i < (ob + lb) / 4; i++) host[i] = (float)xfa_test_rand_normal(&rng);
    host[ob / 4 + 1] = -INFINITY; /* a part that saw no key: O = 0 there */
    ck_assert_int_eq(xfa_buffer_upload(buf, 0, host, ob + lb), XFA_SUCCESS);
    ck_assert_int_eq(xfa_merge_partials(ctx, 1, &part, &part_lse, &o, &lse), XFA_SUCCESS);
    ck_assert_int_eq(xfa_buffer_download(buf, o.offset, out, ob), XFA_SUCCESS);
    ck_assert_int_eq(xfa_buffer_download(buf, lse.offset, out + ob / 4, lb), XFA_SUCCESS);
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t h = 0; h < H; h++) {
                const int64_t l = b * H * S + h * S + s; /* lse is stored (b, h, s) */
                const float part_l = host[ob / 4 + (size_t)l];
                ck_assert(out[ob / 4 + (size_t)l] == part_l);
                for (int64_t x = 0; x < D; x++) {
                    const float want = part_l == -INFINITY ? 0.0f : host[((b * H + h) * S + s) * D + x];
                    const float got = out[((b * S + s) * H + h) * D + x];
                    ck_assert_msg(fabsf(got - want) <= 1e-6f * fabsf(want), "(%lld,%lld,%lld,%lld): %g vs %g",
                                  (long long)b, (long long)s, (long long)h, (long long)x, got, want);
                }
            }
    free(host);
    free(out);
    xfa_buffer_destroy(&buf);
}
END_TEST

START_TEST(test_no_validation_messages)
{
    ck_assert_uint_eq(xfa_vulkan_validation_message_count(), 0);
}
END_TEST

/* Usage: test_vulkan_clamping [device]. */
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
    Suite *suite = suite_create("vulkan clamping");
    TCase *tc = tcase_create("clamping");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_decode_lengths_clamped, 0, 4);
    tcase_add_loop_test(tc, test_decode_pages_clamped, 0, 2);
    tcase_add_loop_test(tc, test_varlen_offsets_clamped, 0, 2);
    tcase_add_test(tc, test_merge_one_part);
    tcase_add_test(tc, test_no_validation_messages);
    suite_add_tcase(suite, tc);
    const int rc = xfa_check_run(suite, 0);
    xfa_context_destroy(&ctx);
    return rc;
}
