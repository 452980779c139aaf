/*
 * test_vulkan_vs_cpu.c - Vulkan against the CPU backend (the model every
 * backend follows) on shapes the shared suites do not reach: decode whose
 * rows (query heads of a GQA group x new tokens) span several work-groups,
 * with every decode feature at once. Same inputs on both contexts; O, LSE
 * and the appended cache must agree to f32 rounding.
 */
#include "attention_case.h"
#include "check_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static xfa_context *vk, *cpu;

/* One host image uploaded into a buffer of each context. */
typedef struct mirror {
    unsigned char *host;
    size_t bytes;
    xfa_buffer *on[2]; /* 0: Vulkan, 1: CPU */
} mirror;

static void mirror_make(mirror *m, size_t bytes, uint64_t seed)
{
    m->bytes = bytes;
    m->host = malloc(bytes);
    uint64_t rng = seed;
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
        const float x = (float)xfa_test_rand_normal(&rng);
        memcpy(m->host + i, &x, 4);
    }
    ck_assert_int_eq(xfa_buffer_create(vk, bytes, &m->on[0]), XFA_SUCCESS);
    ck_assert_int_eq(xfa_buffer_create(cpu, bytes, &m->on[1]), XFA_SUCCESS);
}

static void mirror_upload(mirror *m)
{
    for (int c = 0; c < 2; c++) ck_assert_int_eq(xfa_buffer_upload(m->on[c], 0, m->host, m->bytes), XFA_SUCCESS);
}

static void mirror_free(mirror *m)
{
    xfa_buffer_destroy(&m->on[0]);
    xfa_buffer_destroy(&m->on[1]);
    free(m->host);
}

/* 32 query heads on 1 KV head, 4 new tokens: 128 rows per KV head, more than one work-group. */
START_TEST(test_decode_many_rows)
{
    enum { B = 2, SQ = 4, HQ = 32, HKV = 1, D = 128, PAGE = 32, PPS = 6, PAGES = 14 };
    const bool paged = _i % 2, features = _i / 2 % 2;
    const int splits = 1 + 2 * (_i / 4); /* 1: written directly; 3: partials and merge */
    const size_t qb = (size_t)B * SQ * HQ * D * 4, nb = (size_t)B * SQ * HKV * D * 4;
    const size_t cache_rows = paged ? (size_t)PAGES * PAGE : (size_t)B * PPS * PAGE;
    const size_t cb = cache_rows * HKV * D * 4;
    size_t at = 0;
    const size_t q_at = at; at += qb;
    const size_t o_at = at; at += qb;
    const size_t lse_at = at; at += (size_t)B * SQ * HQ * 4 + 256;
    const size_t kn_at = at; at += nb;
    const size_t vn_at = at; at += nb;
    const size_t slopes_at = at; at += HQ * 4;
    const size_t lens_at = at; at += 256;
    const size_t table_at = at; at += (size_t)B * PPS * 4 + 256;
    const size_t k_at = at; at += cb;
    const size_t v_at = at; at += cb;
    mirror m;
    mirror_make(&m, at, 1234 + (uint64_t)_i);
    const int32_t lens[B] = {PPS * PAGE - SQ - 5, 77};
    memcpy(m.host + lens_at, lens, sizeof lens);
    int32_t table[B * PPS];
    for (int i = 0; i < B * PPS; i++) table[i] = (int32_t)((i * 5 + 3) % PAGES); /* scattered, distinct */
    memcpy(m.host + table_at, table, sizeof table);
    for (int h = 0; h < HQ; h++) ((float *)(m.host + slopes_at))[h] = 0.01f * (float)(h + 1);
    mirror_upload(&m);

    float *out[2];
    for (int c = 0; c < 2; c++) {
        xfa_buffer *buf = m.on[c];
        const xfa_tensor q = xfa_tensor_bshd(buf, q_at, XFA_DTYPE_F32, B, SQ, HQ, D);
        const xfa_tensor o = xfa_tensor_bshd(buf, o_at, XFA_DTYPE_F32, B, SQ, HQ, D);
        const xfa_tensor lse = xfa_tensor_lse(buf, lse_at, B, SQ, HQ);
        const xfa_tensor kn = xfa_tensor_bshd(buf, kn_at, XFA_DTYPE_F32, B, SQ, HKV, D);
        const xfa_tensor vn = xfa_tensor_bhsd(buf, vn_at, XFA_DTYPE_F32, B, SQ, HKV, D);
        const xfa_tensor slopes = xfa_tensor_bshd(buf, slopes_at, XFA_DTYPE_F32, 1, 1, HQ, 1);
        const xfa_tensor seqlens = xfa_tensor_bshd(buf, lens_at, XFA_DTYPE_I32, B, 1, 1, 1);
        const xfa_tensor block_table = xfa_tensor_bshd(buf, table_at, XFA_DTYPE_I32, B, 1, 1, PPS);
        const int64_t n0 = paged ? PAGES : B, n1 = paged ? PAGE : PPS * PAGE;
        const xfa_tensor k = xfa_tensor_bshd(buf, k_at, XFA_DTYPE_F32, n0, n1, HKV, D);
        const xfa_tensor v = xfa_tensor_bshd(buf, v_at, XFA_DTYPE_F32, n0, n1, HKV, D);
        const xfa_kv_cache cache = {&k, &v, &seqlens, paged ? &block_table : NULL};
        xfa_decode_params params = XFA_DECODE_PARAMS_DEFAULT;
        params.num_splits = splits;
        if (features) {
            params.window_left = 100;
            params.softcap = 20.0f;
            params.alibi_slopes = &slopes;
        }
        xfa_context *ctx = c ? cpu : vk;
        ck_assert_msg(xfa_attention_decode(ctx, &params, &q, &cache, &kn, &vn, &o, &lse) == XFA_SUCCESS, "%s: %s",
                      c ? "cpu" : "vulkan", xfa_context_last_error(ctx));
        out[c] = malloc(m.bytes);
        ck_assert_int_eq(xfa_buffer_download(buf, 0, out[c], m.bytes), XFA_SUCCESS);
    }
    const float *ov = (const float *)((unsigned char *)out[0] + o_at), *oc = (const float *)((unsigned char *)out[1] + o_at);
    double worst = 0;
    for (size_t i = 0; i < qb / 4; i++) {
        ck_assert_msg(isfinite(ov[i]), "o[%zu] = %g", i, ov[i]);
        worst = fmax(worst, fabs((double)ov[i] - oc[i]));
    }
    ck_assert_msg(worst <= 2e-5, "max |o_vulkan - o_cpu| = %g", worst);
    const float *lv = (const float *)((unsigned char *)out[0] + lse_at), *lc = (const float *)((unsigned char *)out[1] + lse_at);
    for (int i = 0; i < B * SQ * HQ; i++)
        ck_assert_msg(fabsf(lv[i] - lc[i]) <= 1e-4f * fmaxf(1.0f, fabsf(lc[i])), "lse[%d] %g vs %g", i, lv[i], lc[i]);
    ck_assert_int_eq(memcmp((unsigned char *)out[0] + k_at, (unsigned char *)out[1] + k_at, 2 * cb), 0);
    free(out[0]);
    free(out[1]);
    mirror_free(&m);
}
END_TEST

/* Usage: test_vulkan_vs_cpu [device]. */
int main(int argc, char **argv)
{
    const int device = argc > 1 ? atoi(argv[1]) : 0;
    int count = 0;
    if (xfa_device_count(XFA_BACKEND_VULKAN, &count) != XFA_SUCCESS || count <= device) {
        printf("SKIP: no Vulkan device %d (%s)\n", device, xfa_last_error());
        return 77;
    }
    if (xfa_context_create(XFA_BACKEND_VULKAN, device, &vk) != XFA_SUCCESS ||
        xfa_context_create(XFA_BACKEND_CPU, 0, &cpu) != XFA_SUCCESS) {
        fprintf(stderr, "xfa_context_create: %s\n", xfa_last_error());
        return 1;
    }
    Suite *suite = suite_create("vulkan vs cpu");
    TCase *tc = tcase_create("decode");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_decode_many_rows, 0, 8);
    suite_add_tcase(suite, tc);
    const int rc = xfa_check_run(suite, 0);
    xfa_context_destroy(&vk);
    xfa_context_destroy(&cpu);
    return rc;
}
