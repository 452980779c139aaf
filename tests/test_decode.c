/*
 * test_decode.c - decoding against a KV cache (contiguous and paged, with and
 * without appending new tokens, ragged lengths, split-KV) and merging partial
 * results, on one backend, against the fp64 reference.
 * Usage: test_decode <backend>; exit 77 when the backend has no decode path.
 */
#include "attention_case.h"
#include "backend_suite.h"
#include "dtype.h"
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static xfa_context *ctx;
static xfa_device_info info;

typedef struct decode_case {
    int64_t batch, seqlen_q, heads_q, heads_kv, head_dim, capacity;
    int64_t page_size; /* 0: contiguous cache */
    int64_t lens[8];   /* tokens cached per sequence before the call */
    bool append, causal, lse, alibi;
    int64_t window_left;
    float softcap;
    int splits;
    bool scratch;      /* the caller hands in the scratch (poisoned, at an offset) */
    xfa_dtype dtype;
    uint64_t seed;
} decode_case;

static decode_case make_case(int64_t B, int64_t Sq, int64_t Hq, int64_t Hkv, int64_t D, int64_t capacity, xfa_dtype dt,
                             uint64_t seed)
{
    decode_case c;
    memset(&c, 0, sizeof c);
    c.batch = B; c.seqlen_q = Sq; c.heads_q = Hq; c.heads_kv = Hkv; c.head_dim = D; c.capacity = capacity;
    c.causal = true; c.lse = true; c.window_left = -1; c.dtype = dt; c.seed = seed;
    uint64_t rng = seed;
    for (int64_t b = 0; b < B; b++) /* ragged, leaving room for the new tokens */
        c.lens[b] = 1 + (int64_t)(xfa_test_rand_u64(&rng) % (uint64_t)(capacity - Sq));
    return c;
}

static int64_t contiguous_stride(const int64_t shape[4], int64_t stride[4])
{
    stride[3] = 1;
    for (int i = 2; i >= 0; i--) stride[i] = stride[i + 1] * shape[i + 1];
    return stride[0] * shape[0];
}

static bool alloc_contiguous(xfa_test_tensor *t, xfa_dtype dtype, int64_t a, int64_t b, int64_t c, int64_t d)
{
    const int64_t shape[4] = {a, b, c, d};
    int64_t stride[4];
    contiguous_stride(shape, stride);
    return xfa_test_tensor_alloc(t, dtype, shape, stride);
}

/* Runs the case; returns a failure message or NULL. */
static const char *run_decode(const decode_case *c, char *msg, size_t size)
{
    const int64_t B = c->batch, Sq = c->seqlen_q, Hq = c->heads_q, Hkv = c->heads_kv, D = c->head_dim;
    const bool paged = c->page_size > 0;
    const int64_t pages_per_seq = paged ? (c->capacity + c->page_size - 1) / c->page_size : 0;
    const int64_t num_pages = paged ? B * pages_per_seq + 3 : 0; /* spare pages nobody uses */
    const char *why = NULL;
#define FAIL(...)                           \
    do {                                    \
        snprintf(msg, size, __VA_ARGS__);   \
        why = msg;                          \
        goto done;                          \
    } while (0)
    xfa_test_tensor q, o, lse, kc, vc, kn, vn, lens, table, slopes;
    memset(&lse, 0, sizeof lse); memset(&kn, 0, sizeof kn); memset(&vn, 0, sizeof vn);
    memset(&table, 0, sizeof table); memset(&slopes, 0, sizeof slopes);
    uint64_t rng = c->seed * 31 + 7;
    alloc_contiguous(&q, c->dtype, B, Sq, Hq, D);
    alloc_contiguous(&o, c->dtype, B, Sq, Hq, D);
    if (c->lse) {
        const int64_t shape[4] = {B, Sq, Hq, 1}, stride[4] = {Hq * Sq, 1, Sq, 1};
        xfa_test_tensor_alloc(&lse, XFA_DTYPE_F32, shape, stride);
    }
    if (paged) {
        alloc_contiguous(&kc, c->dtype, num_pages, c->page_size, Hkv, D);
        alloc_contiguous(&vc, c->dtype, num_pages, c->page_size, Hkv, D);
        alloc_contiguous(&table, XFA_DTYPE_I32, B, 1, 1, pages_per_seq);
    } else {
        alloc_contiguous(&kc, c->dtype, B, c->capacity, Hkv, D);
        alloc_contiguous(&vc, c->dtype, B, c->capacity, Hkv, D);
    }
    alloc_contiguous(&lens, XFA_DTYPE_I32, B, 1, 1, 1);
    if (c->append) {
        alloc_contiguous(&kn, c->dtype, B, Sq, Hkv, D);
        alloc_contiguous(&vn, c->dtype, B, Sq, Hkv, D);
    }
    if (c->alibi) alloc_contiguous(&slopes, XFA_DTYPE_F32, 1, 1, Hq, 1);

    xfa_test_tensor_fill_random(&q, &rng);
    xfa_test_tensor_fill_random(&kc, &rng);
    xfa_test_tensor_fill_random(&vc, &rng);
    if (c->append) {
        xfa_test_tensor_fill_random(&kn, &rng);
        xfa_test_tensor_fill_random(&vn, &rng);
    }
    xfa_test_tensor_poison(&o);
    if (c->lse) xfa_test_tensor_poison(&lse);
    int32_t *len_host = (int32_t *)(lens.host + lens.view.offset);
    for (int64_t b = 0; b < B; b++) len_host[b] = (int32_t)c->lens[b];
    if (paged) { /* a shuffled page order: sequence b's pages are scattered */
        int32_t *t = (int32_t *)(table.host + table.view.offset);
        const int64_t n = B * pages_per_seq;
        for (int64_t i = 0; i < n; i++) t[i] = (int32_t)(i + 3);
        for (int64_t i = n - 1; i > 0; i--) {
            const int64_t j = (int64_t)(xfa_test_rand_u64(&rng) % (uint64_t)(i + 1));
            const int32_t tmp = t[i]; t[i] = t[j]; t[j] = tmp;
        }
    }
    if (c->alibi)
        for (int64_t h = 0; h < Hq; h++) ((float *)(slopes.host + slopes.view.offset))[h] = 0.05f * (float)(h + 1);

    /* what the cache must hold afterwards: the new tokens appended, nothing else changed */
    unsigned char *k_expect = malloc(kc.bytes), *v_expect = malloc(vc.bytes);
    memcpy(k_expect, kc.host, kc.bytes);
    memcpy(v_expect, vc.host, vc.bytes);
    const int32_t *page_of = paged ? (const int32_t *)(table.host + table.view.offset) : NULL;
/* element (b, token, h, x) of a cache tensor, through the block table when paged */
#define CACHE_AT(t, b, tok, h, x) \
    xfa_tensor_index(&(t).view, paged ? page_of[(b) * pages_per_seq + (tok) / c->page_size] : (b), \
                     paged ? (tok) % c->page_size : (tok), h, x)
    bool fits = true; /* a case built to overflow the cache only checks that the call refuses */
    for (int64_t b = 0; b < B; b++) fits = fits && c->lens[b] + (c->append ? Sq : 0) <= c->capacity;
    if (c->append && fits)
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < Sq; t++)
                for (int64_t h = 0; h < Hkv; h++)
                    for (int64_t x = 0; x < D; x++) {
                        const int64_t src = xfa_tensor_index(&kn.view, b, t, h, x), dst = CACHE_AT(kc, b, c->lens[b] + t, h, x);
                        xfa_store_f32(k_expect + kc.view.offset, c->dtype, dst, xfa_load_f32(kn.host + kn.view.offset, c->dtype, src));
                        xfa_store_f32(v_expect + vc.view.offset, c->dtype, dst, xfa_load_f32(vn.host + vn.view.offset, c->dtype, src));
                    }

    xfa_status st;
    if ((st = xfa_test_tensor_upload(ctx, &q)) || (st = xfa_test_tensor_upload(ctx, &o)) ||
        (c->lse && (st = xfa_test_tensor_upload(ctx, &lse))) || (st = xfa_test_tensor_upload(ctx, &kc)) ||
        (st = xfa_test_tensor_upload(ctx, &vc)) || (st = xfa_test_tensor_upload(ctx, &lens)) ||
        (paged && (st = xfa_test_tensor_upload(ctx, &table))) ||
        (c->append && ((st = xfa_test_tensor_upload(ctx, &kn)) || (st = xfa_test_tensor_upload(ctx, &vn)))) ||
        (c->alibi && (st = xfa_test_tensor_upload(ctx, &slopes))))
        FAIL("setup: %s", xfa_context_last_error(ctx));
    xfa_kv_cache cache = {&kc.view, &vc.view, &lens.view, paged ? &table.view : NULL};
    xfa_decode_params params = XFA_DECODE_PARAMS_DEFAULT;
    params.causal = c->causal;
    params.window_left = c->window_left;
    params.softcap = c->softcap;
    params.alibi_slopes = c->alibi ? &slopes.view : NULL;
    params.num_splits = c->splits;
    xfa_buffer *scratch = NULL;
    if (c->scratch) {
        size_t need = 0;
        if ((st = xfa_attention_decode_scratch_size(ctx, &params, &q.view, &cache, c->append ? &kn.view : NULL,
                                                    c->append ? &vn.view : NULL, &o.view, c->lse ? &lse.view : NULL,
                                                    &need)))
            FAIL("scratch size: %s", xfa_context_last_error(ctx));
        if (need == 0) FAIL("a decode call needs no scratch%s", "");
        unsigned char *nan_bytes = malloc(need + 512);
        for (size_t i = 0; i < need + 512; i += 4) memcpy(nan_bytes + i, &(float){NAN}, 4);
        if ((st = xfa_buffer_create(ctx, need + 512, &scratch)) ||
            (st = xfa_buffer_upload(scratch, 0, nan_bytes, need + 512))) {
            free(nan_bytes);
            FAIL("scratch: %s", xfa_context_last_error(ctx));
        }
        free(nan_bytes);
        params.scratch = scratch;
        params.scratch_offset = 512;
    }
    st = xfa_attention_decode(ctx, &params, &q.view, &cache, c->append ? &kn.view : NULL, c->append ? &vn.view : NULL,
                              &o.view, c->lse ? &lse.view : NULL);
    if (st) FAIL("decode: %s", xfa_context_last_error(ctx));
    if (!fits) FAIL("a call past the cache's capacity succeeded%s", "");
    if (scratch) { /* the partials went through the caller's scratch, not memory of the backend's own */
        const size_t bytes = xfa_buffer_size(scratch);
        float *back = malloc(bytes);
        size_t before = 0, inside = 0; /* floats no longer NaN before the offset and within the scratch */
        if (xfa_buffer_download(scratch, 0, back, bytes) == XFA_SUCCESS)
            for (size_t i = 0; i < bytes / 4; i++) *(i < 512 / 4 ? &before : &inside) += !isnan(back[i]);
        free(back);
        /* With one split a backend may write o directly; forced splits > 1 must use the scratch. */
        if (before || (c->splits > 1 && inside == 0))
            FAIL("caller's scratch: %zu floats written before its offset, %zu inside", before, inside);
    }
    if ((st = xfa_test_tensor_download(&o)) || (c->lse && (st = xfa_test_tensor_download(&lse))) ||
        (st = xfa_test_tensor_download(&kc)) || (st = xfa_test_tensor_download(&vc)))
        FAIL("download: %s", xfa_context_last_error(ctx));
    if (memcmp(kc.host, k_expect, kc.bytes) || memcmp(vc.host, v_expect, vc.bytes))
        FAIL("the cache differs from the expected append%s", "");
    int64_t unwritten = 0, damage = 0, nonfinite = 0;
    xfa_test_tensor_check_written(&o, &unwritten, &damage);
    if (c->lse) xfa_test_tensor_check_written(&lse, &unwritten, &damage);
    if (unwritten || damage) FAIL("unwritten %lld, guard damage %lld", (long long)unwritten, (long long)damage);

    /* reference, one sequence at a time over its len_b keys */
    double worst = 0, ref_max = 0, unfused_err = 0, lse_worst = 0;
    bool lse_ok = true;
    for (int64_t b = 0; b < B; b++) {
        const int64_t len = c->lens[b] + (c->append ? Sq : 0);
        xfa_test_tensor kb, vb;
        alloc_contiguous(&kb, c->dtype, 1, len, Hkv, D);
        alloc_contiguous(&vb, c->dtype, 1, len, Hkv, D);
        for (int64_t t = 0; t < len; t++)
            for (int64_t h = 0; h < Hkv; h++)
                for (int64_t x = 0; x < D; x++) {
                    const int64_t src = CACHE_AT(kc, b, t, h, x), dst = xfa_tensor_index(&kb.view, 0, t, h, x);
                    xfa_store_f32(kb.host + kb.view.offset, c->dtype, dst, xfa_load_f32(kc.host + kc.view.offset, c->dtype, src));
                    xfa_store_f32(vb.host + vb.view.offset, c->dtype, dst, xfa_load_f32(vc.host + vc.view.offset, c->dtype, src));
                }
        xfa_host_view qb = xfa_host_view_of(&q.view, q.host);
        qb.data = (const char *)qb.data + (size_t)(b * q.view.stride[0]) * xfa_dtype_size(c->dtype);
        qb.shape[0] = 1;
        xfa_reference_problem p = xfa_reference_problem_make(qb, xfa_host_view_of(&kb.view, kb.host),
                                                             xfa_host_view_of(&vb.view, vb.host), 1.0 / sqrt((double)D), c->causal);
        p.window_left = c->window_left;
        p.softcap = c->softcap;
        if (c->alibi) p.alibi = xfa_host_view_of(&slopes.view, slopes.host);
        double *o_ref = malloc((size_t)(Sq * Hq * D) * sizeof *o_ref), *lse_ref = malloc((size_t)(Sq * Hq) * sizeof *lse_ref);
        float *o_unf = malloc((size_t)(Sq * Hq * D) * sizeof *o_unf);
        xfa_reference_forward(&p, o_ref, lse_ref);
        if (c->dtype != XFA_DTYPE_F32) xfa_reference_unfused(&p, c->dtype, o_unf);
        for (int64_t i = 0; i < Sq; i++)
            for (int64_t h = 0; h < Hq; h++) {
                for (int64_t x = 0; x < D; x++) {
                    const double want = o_ref[(i * Hq + h) * D + x];
                    const double got = xfa_load_f32(o.host + o.view.offset, c->dtype, xfa_tensor_index(&o.view, b, i, h, x));
                    nonfinite += !isfinite(got);
                    worst = fmax(worst, fabs(got - want));
                    ref_max = fmax(ref_max, fabs(want));
                    if (c->dtype != XFA_DTYPE_F32) unfused_err = fmax(unfused_err, fabs(o_unf[(i * Hq + h) * D + x] - want));
                }
                if (c->lse) {
                    const double want = lse_ref[h * Sq + i];
                    const double got = ((const float *)(lse.host + lse.view.offset))[xfa_tensor_index(&lse.view, b, i, h, 0)];
                    if (isinf(want) || !isfinite(got)) lse_ok = lse_ok && want == got;
                    else lse_worst = fmax(lse_worst, fabs(got - want) / fmax(1.0, fabs(want)));
                }
            }
        free(o_ref); free(lse_ref); free(o_unf);
        xfa_test_tensor_free(&kb);
        xfa_test_tensor_free(&vb);
    }
    const double tol = xfa_test_tolerance(c->dtype, ref_max, unfused_err);
    const double lse_tol = c->dtype == XFA_DTYPE_F32 ? 1e-5 : 1e-3;
    if (nonfinite || !(worst <= tol) || !lse_ok || lse_worst > lse_tol)
        FAIL("max |o-ref| %.3g (tol %.3g), lse rel %.3g (ok %d), non-finite %lld", worst, tol, lse_worst, lse_ok,
             (long long)nonfinite);
done:
    xfa_test_tensor_free(&q); xfa_test_tensor_free(&o); xfa_test_tensor_free(&lse); xfa_test_tensor_free(&kc);
    xfa_test_tensor_free(&vc); xfa_test_tensor_free(&kn); xfa_test_tensor_free(&vn); xfa_test_tensor_free(&lens);
    xfa_test_tensor_free(&table); xfa_test_tensor_free(&slopes);
    free(k_expect); free(v_expect);
    xfa_buffer_destroy(&scratch);
    return why;
#undef CACHE_AT
#undef FAIL
}

static void expect_decode(const decode_case *c, uint32_t features)
{
    if (!(info.dtypes & (1u << c->dtype)) || (info.features & features) != features) return;
    char msg[512];
    const char *why = run_decode(c, msg, sizeof msg);
    ck_assert_msg(why == NULL, "B=%lld Sq=%lld Hq=%lld Hkv=%lld D=%lld cap=%lld page=%lld append=%d splits=%d %s: %s",
                  (long long)c->batch, (long long)c->seqlen_q, (long long)c->heads_q, (long long)c->heads_kv,
                  (long long)c->head_dim, (long long)c->capacity, (long long)c->page_size, c->append, c->splits,
                  xfa_dtype_name(c->dtype), why);
}

START_TEST(test_seqlen_q)
{
    /* 1..8 new tokens, ragged lengths, contiguous and paged, appending or not */
    decode_case c = make_case(3, 1 + _i % 8, 4, 2, 64, 300, XFA_DTYPE_F32, 30000 + (uint64_t)_i);
    c.append = _i / 8 % 2;
    c.page_size = _i / 16 ? 16 : 0;
    expect_decode(&c, XFA_FEATURE_DECODE | (c.page_size ? XFA_FEATURE_PAGED_KV : 0));
}
END_TEST

START_TEST(test_splits)
{
    static const int splits[] = {0, 1, 2, 7, 64};
    decode_case c = make_case(2, 2, 8, 2, 128, 1000, XFA_DTYPE_F16, 31000 + (uint64_t)_i);
    c.splits = splits[_i % 5];
    c.page_size = _i / 5 ? 64 : 0;
    c.append = true;
    expect_decode(&c, XFA_FEATURE_DECODE | (c.page_size ? XFA_FEATURE_PAGED_KV : 0));
}
END_TEST

START_TEST(test_caller_scratch)
{
    /* the caller's scratch instead of the backend's: splits forced or chosen, paged or not */
    decode_case c = make_case(2, 1 + _i % 3, 8, 2, 64, 700, (xfa_dtype)(_i % XFA_DTYPE_COUNT_), 35000 + (uint64_t)_i);
    c.splits = _i % 2 ? 5 : 0;
    c.page_size = _i / 2 % 2 ? 32 : 0;
    c.append = true;
    c.scratch = true;
    expect_decode(&c, XFA_FEATURE_DECODE | (c.page_size ? XFA_FEATURE_PAGED_KV : 0));
}
END_TEST

START_TEST(test_long_cache)
{
    /* one sequence of 65536 tokens, GQA 8:1, bf16 or f16, paged into 256-token pages */
    decode_case c = make_case(1, 1, 8, 1, 64, 65536, _i ? XFA_DTYPE_BF16 : XFA_DTYPE_F16, 32000 + (uint64_t)_i);
    c.lens[0] = 65535;
    c.append = true;
    c.page_size = _i ? 256 : 0;
    expect_decode(&c, XFA_FEATURE_DECODE | (c.page_size ? XFA_FEATURE_PAGED_KV : 0));
}
END_TEST

START_TEST(test_short_and_features)
{
    decode_case c = make_case(4, 3, 2, 1, 32, 40, (xfa_dtype)(_i % XFA_DTYPE_COUNT_), 33000 + (uint64_t)_i);
    c.lens[0] = 0; /* an empty cache: only the appended tokens */
    c.append = _i % 2;
    if (!c.append) c.lens[0] = 1;
    uint32_t need = XFA_FEATURE_DECODE;
    switch (_i / 3 % 4) {
    case 1: c.window_left = 5; need |= XFA_FEATURE_WINDOW; break;
    case 2: c.softcap = 3.0f; c.alibi = true; need |= XFA_FEATURE_SOFTCAP | XFA_FEATURE_ALIBI; break;
    case 3: c.causal = false; c.lse = false; break;
    default: break;
    }
    expect_decode(&c, need);
}
END_TEST

START_TEST(test_bad_lengths)
{
    if (info.backend != XFA_BACKEND_CPU) return; /* GPU kernels clamp instead (see xfa.h) */
    decode_case c = make_case(2, 1, 2, 2, 64, 50, XFA_DTYPE_F32, 34000);
    c.lens[1] = 50; /* full: appending one more token does not fit */
    c.append = true;
    char msg[512];
    const char *why = run_decode(&c, msg, sizeof msg);
    ck_assert_ptr_nonnull(why);
    ck_assert_ptr_nonnull(strstr(xfa_context_last_error(ctx), "cache.seqlens[1]"));
}
END_TEST

/* Attention over all keys equals the merge of attention over n disjoint key ranges. */
START_TEST(test_merge_partials)
{
    static const int parts[] = {2, 5, 64};
    const int n = parts[_i % 3];
    const xfa_dtype dtype = _i / 3 ? XFA_DTYPE_F16 : XFA_DTYPE_F32;
    if (!(info.features & XFA_FEATURE_MERGE) || !(info.dtypes & (1u << dtype))) return;
    const int64_t B = 2, Sq = 5, H = 2, D = 64, Sk = 130;
    xfa_test_case whole = xfa_test_case_make(B, Sq, Sk, H, H, D, dtype, false, 35000 + (uint64_t)_i);
    xfa_test_inputs in;
    char msg[256];
    uint64_t rng = 99;
    ck_assert_int_eq(xfa_test_inputs_make(ctx, &whole, &rng, &in, msg, sizeof msg), XFA_SUCCESS);
    /* each part: the same q against keys [begin, end), partial O in f32 */
    xfa_tensor o_parts[64], lse_parts[64];
    xfa_buffer *part_buf = NULL;
    const size_t o_bytes = (size_t)(B * Sq * H * D) * 4, lse_bytes = (size_t)(B * Sq * H) * 4;
    ck_assert_int_eq(xfa_buffer_create(ctx, (size_t)n * (o_bytes + lse_bytes), &part_buf), XFA_SUCCESS);
    for (int i = 0; i < n; i++) {
        const int64_t begin = Sk * i / n, end = Sk * (i + 1) / n;
        xfa_tensor k = in.k.view, v = in.v.view;
        k.shape[1] = v.shape[1] = end - begin;
        k.offset += (size_t)(begin * k.stride[1]) * xfa_dtype_size(dtype);
        v.offset += (size_t)(begin * v.stride[1]) * xfa_dtype_size(dtype);
        /* an empty range (n > Sk cannot happen here) would need no call */
        o_parts[i] = xfa_tensor_bshd(part_buf, (size_t)i * o_bytes, dtype, B, Sq, H, D);
        lse_parts[i] = xfa_tensor_lse(part_buf, (size_t)n * o_bytes + (size_t)i * lse_bytes, B, Sq, H);
        ck_assert_int_eq(xfa_attention_forward(ctx, NULL, &in.q.view, &k, &v, &o_parts[i], &lse_parts[i]), XFA_SUCCESS);
    }
    xfa_test_tensor o, lse;
    const int64_t lse_shape[4] = {B, Sq, H, 1}, lse_stride[4] = {H * Sq, 1, Sq, 1};
    ck_assert_int_eq(xfa_test_output_make(ctx, &whole, Sq, H, &o), XFA_SUCCESS);
    ck_assert(xfa_test_tensor_alloc(&lse, XFA_DTYPE_F32, lse_shape, lse_stride));
    xfa_test_tensor_poison(&lse);
    ck_assert_int_eq(xfa_test_tensor_upload(ctx, &lse), XFA_SUCCESS);
    ck_assert_int_eq(xfa_merge_partials(ctx, n, o_parts, lse_parts, &o.view, &lse.view), XFA_SUCCESS);
    ck_assert_int_eq(xfa_test_tensor_download(&o), XFA_SUCCESS);
    ck_assert_int_eq(xfa_test_tensor_download(&lse), XFA_SUCCESS);

    double *o_ref = malloc((size_t)(B * Sq * H * D) * sizeof *o_ref), *lse_ref = malloc((size_t)(B * Sq * H) * sizeof *lse_ref);
    float *o_got = malloc((size_t)(B * Sq * H * D) * sizeof *o_got), *o_unf = malloc((size_t)(B * Sq * H * D) * sizeof *o_unf);
    int64_t nonfinite = 0, unwritten = 0, damage = 0;
    xfa_reference_forward(&in.reference, o_ref, lse_ref);
    xfa_test_tensor_gather(&o, o_got, &nonfinite);
    xfa_test_tensor_check_written(&o, &unwritten, &damage);
    double worst = 0, ref_max = 0, unfused = 0;
    if (dtype != XFA_DTYPE_F32) xfa_reference_unfused(&in.reference, dtype, o_unf);
    for (int64_t i = 0; i < B * Sq * H * D; i++) {
        worst = fmax(worst, fabs(o_got[i] - o_ref[i]));
        ref_max = fmax(ref_max, fabs(o_ref[i]));
        if (dtype != XFA_DTYPE_F32) unfused = fmax(unfused, fabs(o_unf[i] - o_ref[i]));
    }
    /* each part rounds its output once more: allow the dtype's tolerance twice */
    const double tol = 2 * xfa_test_tolerance(dtype, ref_max, unfused);
    ck_assert_msg(nonfinite == 0 && unwritten == 0 && damage == 0 && worst <= tol, "n=%d: err %g tol %g", n, worst, tol);
    const float *lse_got = (const float *)(lse.host + lse.view.offset);
    for (int64_t r = 0; r < B * H * Sq; r++) ck_assert_double_le(fabs(lse_got[r] - lse_ref[r]), 1e-4 * fmax(1, fabs(lse_ref[r])));
    free(o_ref); free(lse_ref); free(o_got); free(o_unf);
    xfa_test_tensor_free(&o);
    xfa_test_tensor_free(&lse);
    xfa_buffer_destroy(&part_buf);
    xfa_test_inputs_free(&in);
}
END_TEST

START_TEST(test_arguments)
{
    xfa_buffer *buf = NULL;
    ck_assert_int_eq(xfa_buffer_create(ctx, 1 << 16, &buf), XFA_SUCCESS);
    const xfa_tensor q = xfa_tensor_bshd(buf, 0, XFA_DTYPE_F32, 2, 1, 2, 32);
    const xfa_tensor o = xfa_tensor_bshd(buf, 1024, XFA_DTYPE_F32, 2, 1, 2, 32);
    const xfa_tensor k = xfa_tensor_bshd(buf, 4096, XFA_DTYPE_F32, 2, 16, 2, 32);
    const xfa_tensor v = xfa_tensor_bshd(buf, 12288, XFA_DTYPE_F32, 2, 16, 2, 32);
    const xfa_tensor lens = xfa_tensor_bshd(buf, 20480, XFA_DTYPE_I32, 2, 1, 1, 1);
    const xfa_tensor lens_f32 = xfa_tensor_bshd(buf, 20480, XFA_DTYPE_F32, 2, 1, 1, 1);
    xfa_kv_cache cache = {&k, &v, &lens_f32, NULL};
    ck_assert_int_eq(xfa_attention_decode(ctx, NULL, &q, &cache, NULL, NULL, &o, NULL), XFA_ERROR_DTYPE_MISMATCH);
    ck_assert_ptr_nonnull(strstr(xfa_context_last_error(ctx), "cache.seqlens.dtype"));
    cache.seqlens = &lens;
    ck_assert_int_eq(xfa_attention_decode(ctx, NULL, &q, &cache, &k, NULL, &o, NULL), XFA_ERROR_NULL_POINTER);
    ck_assert_int_eq(xfa_attention_decode(ctx, NULL, &q, NULL, NULL, NULL, &o, NULL), XFA_ERROR_NULL_POINTER);
    ck_assert_int_eq(xfa_attention_decode(ctx, NULL, &q, &cache, NULL, NULL, &k, NULL), XFA_ERROR_SHAPE_MISMATCH);
    xfa_decode_params params = XFA_DECODE_PARAMS_DEFAULT;
    params.num_splits = -1;
    ck_assert_int_eq(xfa_attention_decode(ctx, &params, &q, &cache, NULL, NULL, &o, NULL), XFA_ERROR_INVALID_ARGUMENT);
    const xfa_tensor o_over_k = xfa_tensor_bshd(buf, 4096, XFA_DTYPE_F32, 2, 1, 2, 32);
    ck_assert_int_eq(xfa_attention_decode(ctx, NULL, &q, &cache, NULL, NULL, &o_over_k, NULL), XFA_ERROR_ALIASING);
    /* scratch: sized by the query, refused when short, misaligned, from another context or overlapping */
    size_t need = 0;
    ck_assert_int_eq(xfa_attention_decode_scratch_size(ctx, NULL, &q, &cache, NULL, NULL, &o, NULL, NULL),
                     XFA_ERROR_NULL_POINTER);
    ck_assert_int_eq(xfa_attention_decode_scratch_size(ctx, NULL, &q, &cache, NULL, NULL, &o, NULL, &need), XFA_SUCCESS);
    ck_assert_uint_ge(need, 2 * 2 * 32 * sizeof(float)); /* at least one split's partial rows */
    params.num_splits = 3;
    size_t need3 = 0;
    ck_assert_int_eq(xfa_attention_decode_scratch_size(ctx, &params, &q, &cache, NULL, NULL, &o, NULL, &need3), XFA_SUCCESS);
    ck_assert_uint_ge(need3, 3 * 2 * 2 * 33 * sizeof(float));
    xfa_buffer *scratch = NULL;
    ck_assert_int_eq(xfa_buffer_create(ctx, need3 + 256, &scratch), XFA_SUCCESS);
    params.scratch = scratch;
    params.scratch_offset = 512; /* only need3 - 256 bytes left */
    ck_assert_int_eq(xfa_attention_decode(ctx, &params, &q, &cache, NULL, NULL, &o, NULL), XFA_ERROR_OUT_OF_BOUNDS);
    ck_assert_ptr_nonnull(strstr(xfa_context_last_error(ctx), "params.scratch"));
    params.scratch_offset = 100;
    ck_assert_int_eq(xfa_attention_decode(ctx, &params, &q, &cache, NULL, NULL, &o, NULL), XFA_ERROR_MISALIGNED);
    params.scratch = buf; /* the tensors' own buffer: overlaps q at offset 0 */
    params.scratch_offset = 0;
    ck_assert_int_eq(xfa_attention_decode(ctx, &params, &q, &cache, NULL, NULL, &o, NULL), XFA_ERROR_ALIASING);
    ck_assert_ptr_nonnull(strstr(xfa_context_last_error(ctx), "params.scratch overlaps"));
    xfa_buffer_destroy(&scratch);
    ck_assert_int_eq(xfa_merge_partials(ctx, 0, &o, &lens, &q, NULL), XFA_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(xfa_merge_partials(ctx, 1, &o, &lens, &q, NULL), XFA_ERROR_DTYPE_MISMATCH);
    xfa_buffer_destroy(&buf);
}
END_TEST

static Suite *decode_suite(const char *backend)
{
    Suite *s = suite_create(backend);
    TCase *tc = tcase_create("decode");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_seqlen_q, 0, 32);
    tcase_add_loop_test(tc, test_splits, 0, 10);
    tcase_add_loop_test(tc, test_caller_scratch, 0, 6);
    tcase_add_loop_test(tc, test_long_cache, 0, 2);
    tcase_add_loop_test(tc, test_short_and_features, 0, 12);
    tcase_add_test(tc, test_bad_lengths);
    tcase_add_loop_test(tc, test_merge_partials, 0, 6);
    tcase_add_test(tc, test_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return xfa_run_backend_suite(argc, argv, XFA_FEATURE_DECODE | XFA_FEATURE_MERGE, "decode path", decode_suite, &ctx, &info);
}
