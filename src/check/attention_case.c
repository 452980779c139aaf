/* attention_case.c - the backend-neutral forward test body (see attention_case.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include "attention_case.h"

#include "dtype.h"
#include "internal.h"
#include "reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GUARD_BYTES 64
#define POISON_BYTE 0xFF /* all-ones: a NaN in f32, f16 and bf16 */

uint64_t xfa_test_rand_u64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rand_unit(uint64_t *state) { return ((xfa_test_rand_u64(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

double xfa_test_rand_normal(uint64_t *state)
{
    const double u = rand_unit(state), v = rand_unit(state);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

xfa_test_case xfa_test_case_make(int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q, int64_t heads_kv,
                                 int64_t head_dim, xfa_dtype dtype, bool causal, uint64_t seed)
{
    xfa_test_case tc;
    memset(&tc, 0, sizeof tc);
    tc.batch = batch;
    tc.seqlen_q = seqlen_q;
    tc.seqlen_k = seqlen_k;
    tc.heads_q = heads_q;
    tc.heads_kv = heads_kv;
    tc.head_dim = head_dim;
    tc.dtype = dtype;
    tc.causal = causal;
    tc.lse = true;
    tc.seed = seed;
    tc.window_left = tc.window_right = -1;
    tc.bias_dtype = XFA_DTYPE_F32;
    return tc;
}

xfa_test_case xfa_test_case_random(uint64_t seed, xfa_dtype dtype)
{
    uint64_t s = seed * 7919 + 17;
    const int64_t heads_kv = 1 + (int64_t)(xfa_test_rand_u64(&s) % 2);
    const int64_t group = 1 + (int64_t)(xfa_test_rand_u64(&s) % 3);
    const int64_t d = XFA_HEAD_DIM_STEP * (1 + (int64_t)(xfa_test_rand_u64(&s) % (XFA_HEAD_DIM_MAX / XFA_HEAD_DIM_STEP)));
    const int64_t sq = 1 + (int64_t)(xfa_test_rand_u64(&s) % 97);
    const int64_t sk = xfa_test_rand_u64(&s) % 2 ? sq : 1 + (int64_t)(xfa_test_rand_u64(&s) % 97);
    xfa_test_case tc = xfa_test_case_make(1 + (int64_t)(xfa_test_rand_u64(&s) % 2), sq, sk, heads_kv * group, heads_kv, d,
                                          dtype, xfa_test_rand_u64(&s) % 2, seed);
    tc.layout = xfa_test_rand_u64(&s) % 2 ? XFA_LAYOUT_BHSD : XFA_LAYOUT_BSHD;
    tc.row_pad = (int64_t)(xfa_test_rand_u64(&s) % 3) * 8;
    tc.lse = xfa_test_rand_u64(&s) % 4 != 0;
    return tc;
}

void xfa_test_case_describe(const xfa_test_case *tc, char *out, size_t size)
{
    char extras[128] = "";
    if (tc->window_left >= 0 || tc->window_right >= 0)
        snprintf(extras, sizeof extras, " window=(%lld,%lld)", (long long)tc->window_left, (long long)tc->window_right);
    if (tc->softcap > 0) snprintf(extras + strlen(extras), sizeof extras - strlen(extras), " softcap=%g", tc->softcap);
    if (tc->alibi) snprintf(extras + strlen(extras), sizeof extras - strlen(extras), " alibi");
    if (tc->bias)
        snprintf(extras + strlen(extras), sizeof extras - strlen(extras), " bias(%s)", xfa_dtype_name(tc->bias_dtype));
    if ((tc->alibi || tc->bias) && tc->per_batch) snprintf(extras + strlen(extras), sizeof extras - strlen(extras), "/full");
    snprintf(out, size, "B=%lld Sq=%lld Sk=%lld Hq=%lld Hkv=%lld D=%lld %s%s%s%s %s pad=%lld Br=%u Bc=%u seed=%llu",
             (long long)tc->batch, (long long)tc->seqlen_q, (long long)tc->seqlen_k, (long long)tc->heads_q,
             (long long)tc->heads_kv, (long long)tc->head_dim, xfa_dtype_name(tc->dtype), tc->causal ? " causal" : "",
             tc->lse ? " lse" : "", extras, tc->layout == XFA_LAYOUT_BHSD ? "BHSD" : "BSHD", (long long)tc->row_pad,
             tc->Br, tc->Bc, (unsigned long long)tc->seed);
}

/* One tensor of the case: its view, a host copy of its whole buffer, and the device buffer. */
typedef struct test_tensor {
    xfa_tensor view;
    unsigned char *host;
    size_t bytes;
} test_tensor;

static void layout_strides(const xfa_test_case *tc, int64_t S, int64_t H, int64_t stride[4])
{
    const int64_t D = tc->head_dim;
    stride[3] = 1;
    if (tc->layout == XFA_LAYOUT_BSHD) {
        stride[2] = D;
        stride[1] = H * D + tc->row_pad;
        stride[0] = S * stride[1];
    } else {
        stride[1] = D + tc->row_pad;
        stride[2] = S * stride[1];
        stride[0] = H * stride[2];
    }
}

static bool tensor_alloc(test_tensor *t, xfa_dtype dtype, const int64_t shape[4], const int64_t stride[4])
{
    memset(t, 0, sizeof *t);
    t->view.dtype = dtype;
    memcpy(t->view.shape, shape, sizeof t->view.shape);
    memcpy(t->view.stride, stride, sizeof t->view.stride);
    t->view.offset = GUARD_BYTES;
    t->bytes = GUARD_BYTES + xfa_tensor_span_bytes(&t->view) + GUARD_BYTES;
    t->host = malloc(t->bytes);
    return t->host != NULL;
}

static void tensor_fill_random(test_tensor *t, uint64_t *rng)
{
    /* Fill everything (gaps and guards too) so nothing reads as zero by accident. */
    const size_t elem = xfa_dtype_size(t->view.dtype), count = t->bytes / elem;
    for (size_t i = 0; i < count; i++) xfa_store_f32(t->host, t->view.dtype, (int64_t)i, (float)xfa_test_rand_normal(rng));
}

static xfa_status tensor_upload(xfa_context *ctx, test_tensor *t)
{
    xfa_status st = xfa_buffer_create(ctx, t->bytes, &t->view.buffer);
    if (st) return st;
    return xfa_buffer_upload(t->view.buffer, 0, t->host, t->bytes);
}

static void tensor_free(test_tensor *t)
{
    xfa_buffer_destroy(&t->view.buffer);
    free(t->host);
    t->host = NULL;
}

/* Marks which bytes of an output buffer belong to elements of its view. */
static unsigned char *element_mask(const test_tensor *t)
{
    unsigned char *mask = calloc(t->bytes, 1);
    if (!mask) return NULL;
    const xfa_tensor *v = &t->view;
    const size_t elem = xfa_dtype_size(v->dtype);
    for (int64_t b = 0; b < v->shape[0]; b++)
        for (int64_t s = 0; s < v->shape[1]; s++)
            for (int64_t h = 0; h < v->shape[2]; h++)
                for (int64_t d = 0; d < v->shape[3]; d++) {
                    const size_t at = v->offset + (size_t)(b * v->stride[0] + s * v->stride[1] + h * v->stride[2] +
                                                           d * v->stride[3]) * elem;
                    memset(mask + at, 1, elem);
                }
    return mask;
}

/* Counts poisoned elements and damaged non-element bytes of a downloaded output. */
static void check_written(const test_tensor *t, const unsigned char *mask, xfa_test_result *r)
{
    const size_t elem = xfa_dtype_size(t->view.dtype);
    for (size_t i = 0; i < t->bytes; i++)
        if (!mask[i] && t->host[i] != POISON_BYTE) r->guard_damage++;
    for (size_t i = 0; i + elem <= t->bytes; i += elem) {
        if (!mask[i]) continue;
        bool poisoned = true;
        for (size_t j = 0; j < elem; j++) poisoned = poisoned && t->host[i + j] == POISON_BYTE;
        if (poisoned) r->unwritten++;
    }
}

static double max_abs_diff_f(const float *a, const double *ref, size_t n)
{
    double e = 0;
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - ref[i]));
    return e;
}

static xfa_test_result fail_setup(xfa_test_result r, xfa_context *ctx, xfa_status st, const char *what)
{
    r.status = st;
    snprintf(r.message, sizeof r.message, "%s: %s (%s)", what, xfa_status_name(st),
             ctx ? xfa_context_last_error(ctx) : xfa_last_error());
    return r;
}

xfa_test_result xfa_test_run_case(xfa_context *ctx, const xfa_test_case *tc)
{
    xfa_test_result r;
    memset(&r, 0, sizeof r);
    const int64_t B = tc->batch, Sq = tc->seqlen_q, Sk = tc->seqlen_k, Hq = tc->heads_q, Hkv = tc->heads_kv,
                  D = tc->head_dim;
    int64_t q_stride[4], kv_stride[4];
    layout_strides(tc, Sq, Hq, q_stride);
    layout_strides(tc, Sk, Hkv, kv_stride);
    const int64_t q_shape[4] = {B, Sq, Hq, D}, kv_shape[4] = {B, Sk, Hkv, D};
    const int64_t lse_shape[4] = {B, Sq, Hq, 1}, lse_stride[4] = {Hq * Sq, 1, Sq, 1};

    test_tensor q, k, v, o, lse, alibi, bias;
    memset(&lse, 0, sizeof lse);
    memset(&alibi, 0, sizeof alibi);
    memset(&bias, 0, sizeof bias);
    double *o_ref = NULL, *lse_ref = NULL;
    float *o_got = NULL, *o_unfused = NULL;
    unsigned char *o_mask = NULL, *lse_mask = NULL;
    bool ok = tensor_alloc(&q, tc->dtype, q_shape, q_stride) & tensor_alloc(&k, tc->dtype, kv_shape, kv_stride) &
              tensor_alloc(&v, tc->dtype, kv_shape, kv_stride) & tensor_alloc(&o, tc->dtype, q_shape, q_stride);
    if (tc->lse) ok = ok && tensor_alloc(&lse, XFA_DTYPE_F32, lse_shape, lse_stride);
    if (tc->alibi) {
        const int64_t shape[4] = {tc->per_batch ? B : 1, 1, Hq, 1}, stride[4] = {Hq, 1, 1, 1};
        ok = ok && tensor_alloc(&alibi, XFA_DTYPE_F32, shape, stride);
    }
    if (tc->bias) { /* (B|1, Sq, Hq|1, Sk) stored (B, H, Sq, Sk), the layout frameworks use */
        const int64_t bh = tc->per_batch ? Hq : 1;
        const int64_t shape[4] = {tc->per_batch ? B : 1, Sq, bh, Sk}, stride[4] = {bh * Sq * Sk, Sk, Sq * Sk, 1};
        ok = ok && tensor_alloc(&bias, tc->bias_dtype, shape, stride);
    }
    const size_t n_out = (size_t)(B * Sq * Hq * D), n_rows = (size_t)(B * Hq * Sq);
    o_ref = malloc(n_out * sizeof *o_ref);
    lse_ref = malloc(n_rows * sizeof *lse_ref);
    o_got = malloc(n_out * sizeof *o_got);
    if (!ok || !o_ref || !lse_ref || !o_got) {
        r = fail_setup(r, ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "test allocation");
        goto done;
    }

    uint64_t rng = tc->seed ^ 0x5851F42D4C957F2Dull;
    tensor_fill_random(&q, &rng);
    tensor_fill_random(&k, &rng);
    tensor_fill_random(&v, &rng);
    if (tc->alibi) /* slopes in (0, 0.5]: strong enough to matter over a few dozen keys */
        for (size_t i = 0; i < alibi.bytes / 4; i++) ((float *)alibi.host)[i] = (float)(0.5 * rand_unit(&rng));
    if (tc->bias) { /* normal scores with about one key in eight masked */
        tensor_fill_random(&bias, &rng);
        for (size_t i = 0; i < bias.bytes / xfa_dtype_size(tc->bias_dtype); i++)
            if (xfa_test_rand_u64(&rng) % 8 == 0) xfa_store_f32(bias.host, tc->bias_dtype, (int64_t)i, -INFINITY);
    }
    memset(o.host, POISON_BYTE, o.bytes);
    if (tc->lse) memset(lse.host, POISON_BYTE, lse.bytes);

    xfa_status st;
    if ((st = tensor_upload(ctx, &q)) || (st = tensor_upload(ctx, &k)) || (st = tensor_upload(ctx, &v)) ||
        (st = tensor_upload(ctx, &o)) || (tc->lse && (st = tensor_upload(ctx, &lse))) ||
        (tc->alibi && (st = tensor_upload(ctx, &alibi))) || (tc->bias && (st = tensor_upload(ctx, &bias)))) {
        r = fail_setup(r, ctx, st, "buffer setup");
        goto done;
    }

    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.softmax_scale = tc->scale;
    params.causal = tc->causal;
    params.window_left = tc->window_left;
    params.window_right = tc->window_right;
    params.softcap = tc->softcap;
    params.alibi_slopes = tc->alibi ? &alibi.view : NULL;
    params.bias = tc->bias ? &bias.view : NULL;
    xfa_plan plan;
    if (tc->Br || tc->Bc) {
        if ((st = xfa_plan_get(ctx, (uint32_t)D, tc->dtype, &plan))) {
            r = fail_setup(r, ctx, st, "xfa_plan_get");
            goto done;
        }
        if (tc->Br) plan.Br = tc->Br;
        if (tc->Bc) plan.Bc = tc->Bc;
        plan.workgroup_size = 0; /* derived from Br by the backend */
        params.plan = &plan;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    r.status = xfa_attention_forward(ctx, &params, &q.view, &k.view, &v.view, &o.view, tc->lse ? &lse.view : NULL);
    if (!r.status) r.status = xfa_context_synchronize(ctx);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r.seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (r.status) {
        snprintf(r.message, sizeof r.message, "xfa_attention_forward: %s", xfa_context_last_error(ctx));
        goto done;
    }
    if ((st = xfa_buffer_download(o.view.buffer, 0, o.host, o.bytes)) ||
        (tc->lse && (st = xfa_buffer_download(lse.view.buffer, 0, lse.host, lse.bytes)))) {
        r = fail_setup(r, ctx, st, "download");
        goto done;
    }

    /* reference from the same (rounded) inputs */
    xfa_reference_problem p = xfa_reference_problem_make(
        xfa_host_view_of(&q.view, q.host), xfa_host_view_of(&k.view, k.host), xfa_host_view_of(&v.view, v.host),
        tc->scale != 0.0f ? tc->scale : 1.0 / sqrt((double)D), tc->causal);
    p.window_left = tc->window_left;
    p.window_right = tc->window_right;
    p.softcap = tc->softcap;
    if (tc->alibi) p.alibi = xfa_host_view_of(&alibi.view, alibi.host);
    if (tc->bias) p.bias = xfa_host_view_of(&bias.view, bias.host);
    if (!tc->skip_reference && xfa_reference_forward(&p, o_ref, lse_ref)) {
        r = fail_setup(r, ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "reference");
        goto done;
    }

    if (tc->corrupt != XFA_CORRUPT_NONE) {
        const size_t elem = xfa_dtype_size(tc->dtype);
        unsigned char *base = o.host + o.view.offset;
        const int64_t at = xfa_tensor_index(&o.view, B - 1, Sq / 2, Hq - 1, D / 3);
        const float delta = tc->dtype == XFA_DTYPE_F32 ? 1e-3f : 0.1f; /* well above each dtype's tolerance */
        if (tc->corrupt == XFA_CORRUPT_VALUE) xfa_store_f32(base, tc->dtype, at, xfa_load_f32(base, tc->dtype, at) + delta);
        if (tc->corrupt == XFA_CORRUPT_UNWRITTEN) memset(base + (size_t)at * elem, POISON_BYTE, elem);
        if (tc->corrupt == XFA_CORRUPT_GUARD) memset(o.host + o.bytes - GUARD_BYTES, 0, elem);
    }

    o_mask = element_mask(&o);
    if (tc->lse) lse_mask = element_mask(&lse);
    if (!o_mask || (tc->lse && !lse_mask)) {
        r = fail_setup(r, ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "test allocation");
        goto done;
    }
    check_written(&o, o_mask, &r);
    if (tc->lse) check_written(&lse, lse_mask, &r);

    /* gather O into BSHD floats */
    {
        const unsigned char *base = o.host + o.view.offset;
        size_t i = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t s = 0; s < Sq; s++)
                for (int64_t h = 0; h < Hq; h++)
                    for (int64_t d = 0; d < D; d++, i++) {
                        o_got[i] = xfa_load_f32(base, tc->dtype, xfa_tensor_index(&o.view, b, s, h, d));
                        if (!isfinite(o_got[i])) r.nonfinite++;
                        if (!tc->skip_reference) r.ref_max = fmax(r.ref_max, fabs(o_ref[i]));
                    }
    }
    if (tc->output) memcpy(tc->output, o_got, n_out * sizeof *o_got);
    if (tc->skip_reference) {
        r.passed = r.unwritten == 0 && r.guard_damage == 0 && r.nonfinite == 0;
        if (!r.passed)
            snprintf(r.message, sizeof r.message, "unwritten %lld, guard damage %lld, non-finite %lld",
                     (long long)r.unwritten, (long long)r.guard_damage, (long long)r.nonfinite);
        goto done;
    }
    r.max_abs_err = max_abs_diff_f(o_got, o_ref, n_out);
    if (r.nonfinite) r.max_abs_err = INFINITY;

    if (tc->dtype == XFA_DTYPE_F32) {
        r.tolerance = 1e-5 * fmax(r.ref_max, 1e-3);
    } else {
        o_unfused = malloc(n_out * sizeof *o_unfused);
        if (!o_unfused || xfa_reference_unfused(&p, tc->dtype, o_unfused)) {
            r = fail_setup(r, ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "unfused reference");
            goto done;
        }
        r.unfused_err = max_abs_diff_f(o_unfused, o_ref, n_out);
        /* Floor: half an ulp of the largest output, which rounding to the dtype alone costs. */
        const double ulp = r.ref_max * (tc->dtype == XFA_DTYPE_F16 ? ldexp(1.0, -10) : ldexp(1.0, -7));
        r.tolerance = 2.0 * fmax(r.unfused_err, 0.5 * ulp);
    }

    if (tc->lse) {
        const float *base = (const float *)(lse.host + lse.view.offset);
        const double lse_tol = tc->dtype == XFA_DTYPE_F32 ? 1e-5 : 1e-3;
        bool lse_ok = true;
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < Hq; h++)
                for (int64_t s = 0; s < Sq; s++) {
                    const double want = lse_ref[(b * Hq + h) * Sq + s];
                    const double got = base[xfa_tensor_index(&lse.view, b, s, h, 0)];
                    if (isinf(want) || isinf(got) || isnan(got)) {
                        if (!(want == got)) { lse_ok = false; r.lse_max_err = INFINITY; }
                        continue;
                    }
                    const double e = fabs(got - want);
                    r.lse_max_err = fmax(r.lse_max_err, e);
                    if (e > lse_tol * fmax(1.0, fabs(want))) lse_ok = false;
                }
        if (!lse_ok && !r.message[0]) snprintf(r.message, sizeof r.message, "LSE error %.3g", r.lse_max_err);
        r.passed = lse_ok;
    } else {
        r.passed = true;
    }
    r.passed = r.passed && r.max_abs_err <= r.tolerance && r.unwritten == 0 && r.guard_damage == 0 && r.nonfinite == 0;
    if (!r.passed && !r.message[0])
        snprintf(r.message, sizeof r.message,
                 "max |o-ref| %.3g > tolerance %.3g (max|ref| %.3g, unfused %.3g), unwritten %lld, guard damage %lld, "
                 "non-finite %lld",
                 r.max_abs_err, r.tolerance, r.ref_max, r.unfused_err, (long long)r.unwritten,
                 (long long)r.guard_damage, (long long)r.nonfinite);

done:
    tensor_free(&q);
    tensor_free(&k);
    tensor_free(&v);
    tensor_free(&o);
    if (tc->lse) tensor_free(&lse);
    if (tc->alibi) tensor_free(&alibi);
    if (tc->bias) tensor_free(&bias);
    free(o_ref);
    free(lse_ref);
    free(o_got);
    free(o_unfused);
    free(o_mask);
    free(lse_mask);
    return r;
}
