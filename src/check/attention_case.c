/* attention_case.c - the backend-neutral forward test body (see attention_case.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include "attention_case.h"

#include "dtype.h"
#include "internal.h"
#include "reference.h"
#include "test_tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


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

xfa_attention_params xfa_test_case_params(const xfa_test_case *tc, const xfa_tensor *alibi, const xfa_tensor *bias)
{
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.softmax_scale = tc->scale;
    params.causal = tc->causal;
    params.window_left = tc->window_left;
    params.window_right = tc->window_right;
    params.softcap = tc->softcap;
    params.alibi_slopes = tc->alibi ? alibi : NULL;
    params.bias = tc->bias ? bias : NULL;
    return params;
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
    if (tc->sequences) snprintf(extras + strlen(extras), sizeof extras - strlen(extras), " varlen(%d)", tc->sequences);
    snprintf(out, size, "B=%lld Sq=%lld Sk=%lld Hq=%lld Hkv=%lld D=%lld %s%s%s%s %s pad=%lld Br=%u Bc=%u seed=%llu",
             (long long)tc->batch, (long long)tc->seqlen_q, (long long)tc->seqlen_k, (long long)tc->heads_q,
             (long long)tc->heads_kv, (long long)tc->head_dim, xfa_dtype_name(tc->dtype), tc->causal ? " causal" : "",
             tc->lse ? " lse" : "", extras, tc->layout == XFA_LAYOUT_BHSD ? "BHSD" : "BSHD", (long long)tc->row_pad,
             tc->Br, tc->Bc, (unsigned long long)tc->seed);
}

void xfa_test_layout_strides(const xfa_test_case *tc, int64_t S, int64_t H, int64_t stride[4])
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

void xfa_test_case_varlen(xfa_test_case *tc, int n, const int64_t *seq_q, const int64_t *seq_k)
{
    tc->batch = 1;
    tc->sequences = n;
    tc->seqlen_q = tc->seqlen_k = 0;
    for (int b = 0; b < n; b++) {
        tc->seq_q[b] = seq_q[b];
        tc->seq_k[b] = seq_k[b];
        tc->seqlen_q += seq_q[b];
        tc->seqlen_k += seq_k[b];
    }
    /* the packed tensors need at least one row each */
    if (tc->seqlen_q == 0) tc->seq_q[n - 1] = tc->seqlen_q = 1;
    if (tc->seqlen_k == 0) tc->seq_k[n - 1] = tc->seqlen_k = 1;
}

/* The reference of one packed sequence: the views narrowed to its rows. */
static xfa_reference_problem sequence_problem(const xfa_reference_problem *all, int64_t q0, int64_t len_q, int64_t k0,
                                              int64_t len_k)
{
    xfa_reference_problem p = *all;
    const size_t elem = xfa_dtype_size(all->q.dtype);
    p.q.data = (const char *)p.q.data + (size_t)(q0 * p.q.stride[1]) * elem;
    p.k.data = (const char *)p.k.data + (size_t)(k0 * p.k.stride[1]) * elem;
    p.v.data = (const char *)p.v.data + (size_t)(k0 * p.v.stride[1]) * elem;
    p.q.shape[1] = len_q;
    p.k.shape[1] = p.v.shape[1] = len_k;
    return p;
}

xfa_status xfa_test_reference(const xfa_test_case *tc, const xfa_test_inputs *in, double *o, double *lse,
                              float *o_unfused)
{
    if (tc->sequences == 0) {
        xfa_status st = xfa_reference_forward(&in->reference, o, lse);
        if (!st && o_unfused) st = xfa_reference_unfused(&in->reference, tc->dtype, o_unfused);
        return st;
    }
    const int64_t Hq = tc->heads_q, D = tc->head_dim, total = tc->seqlen_q;
    double *o_seq = malloc((size_t)(total * Hq * D) * sizeof *o_seq), *lse_seq = malloc((size_t)(total * Hq) * sizeof *lse_seq);
    float *unf_seq = malloc((size_t)(total * Hq * D) * sizeof *unf_seq);
    xfa_status st = o_seq && lse_seq && unf_seq ? XFA_SUCCESS : XFA_ERROR_OUT_OF_HOST_MEMORY;
    int64_t q0 = 0, k0 = 0;
    for (int b = 0; b < tc->sequences && !st; b++) {
        const int64_t len_q = tc->seq_q[b], len_k = tc->seq_k[b];
        if (len_q > 0 && len_k > 0) {
            const xfa_reference_problem p = sequence_problem(&in->reference, q0, len_q, k0, len_k);
            st = xfa_reference_forward(&p, o_seq, lse_seq);
            if (!st && o_unfused) st = xfa_reference_unfused(&p, tc->dtype, unf_seq);
        } else { /* rows that see no key */
            for (int64_t i = 0; i < len_q * Hq * D; i++) o_seq[i] = 0, unf_seq[i] = 0;
            for (int64_t i = 0; i < len_q * Hq; i++) lse_seq[i] = -INFINITY;
        }
        /* scatter into the packed (1, total, Hq, D) and (1, Hq, total) arrays */
        for (int64_t i = 0; i < len_q && !st; i++)
            for (int64_t h = 0; h < Hq; h++) {
                for (int64_t x = 0; x < D; x++) {
                    o[((q0 + i) * Hq + h) * D + x] = o_seq[(i * Hq + h) * D + x];
                    if (o_unfused) o_unfused[((q0 + i) * Hq + h) * D + x] = unf_seq[(i * Hq + h) * D + x];
                }
                if (lse) lse[h * total + q0 + i] = lse_seq[h * len_q + i];
            }
        q0 += len_q;
        k0 += len_k;
    }
    free(o_seq);
    free(lse_seq);
    free(unf_seq);
    return st;
}

void xfa_test_inputs_free(xfa_test_inputs *in)
{
    xfa_test_tensor_free(&in->cu_q);
    xfa_test_tensor_free(&in->cu_k);
    xfa_test_tensor_free(&in->q);
    xfa_test_tensor_free(&in->k);
    xfa_test_tensor_free(&in->v);
    xfa_test_tensor_free(&in->alibi);
    xfa_test_tensor_free(&in->bias);
}

xfa_status xfa_test_inputs_make(xfa_context *ctx, const xfa_test_case *tc, uint64_t *rng, xfa_test_inputs *in,
                                char *message, size_t size)
{
    const int64_t B = tc->batch, Sq = tc->seqlen_q, Sk = tc->seqlen_k, Hq = tc->heads_q, Hkv = tc->heads_kv;
    const int64_t D = tc->head_dim;
    memset(in, 0, sizeof *in);
    int64_t q_stride[4], kv_stride[4];
    xfa_test_layout_strides(tc, Sq, Hq, q_stride);
    xfa_test_layout_strides(tc, Sk, Hkv, kv_stride);
    const int64_t q_shape[4] = {B, Sq, Hq, D}, kv_shape[4] = {B, Sk, Hkv, D};
    bool ok = xfa_test_tensor_alloc(&in->q, tc->dtype, q_shape, q_stride) &
              xfa_test_tensor_alloc(&in->k, tc->dtype, kv_shape, kv_stride) &
              xfa_test_tensor_alloc(&in->v, tc->dtype, kv_shape, kv_stride);
    if (tc->alibi) {
        const int64_t shape[4] = {tc->per_batch ? B : 1, 1, Hq, 1}, stride[4] = {Hq, 1, 1, 1};
        ok = xfa_test_tensor_alloc(&in->alibi, XFA_DTYPE_F32, shape, stride) && ok;
    }
    if (tc->bias) { /* (B|1, Sq, Hq|1, Sk) stored (B, H, Sq, Sk), the layout frameworks use */
        const int64_t bh = tc->per_batch ? Hq : 1;
        const int64_t shape[4] = {tc->per_batch ? B : 1, Sq, bh, Sk}, stride[4] = {bh * Sq * Sk, Sk, Sq * Sk, 1};
        ok = xfa_test_tensor_alloc(&in->bias, tc->bias_dtype, shape, stride) && ok;
    }
    if (!ok) {
        snprintf(message, size, "test allocation failed");
        return XFA_ERROR_OUT_OF_HOST_MEMORY;
    }
    xfa_test_tensor_fill_random(&in->q, rng);
    xfa_test_tensor_fill_random(&in->k, rng);
    xfa_test_tensor_fill_random(&in->v, rng);
    if (tc->alibi) /* slopes in (0, 0.5]: strong enough to matter over a few dozen keys */
        for (size_t i = 0; i < in->alibi.bytes / 4; i++) ((float *)in->alibi.host)[i] = (float)(0.5 * rand_unit(rng));
    if (tc->bias) { /* normal scores with about one key in eight masked */
        xfa_test_tensor_fill_random(&in->bias, rng);
        for (size_t i = 0; i < in->bias.bytes / xfa_dtype_size(tc->bias_dtype); i++)
            if (xfa_test_rand_u64(rng) % 8 == 0) xfa_store_f32(in->bias.host, tc->bias_dtype, (int64_t)i, -INFINITY);
    }
    xfa_status st;
    if ((st = xfa_test_tensor_upload(ctx, &in->q)) || (st = xfa_test_tensor_upload(ctx, &in->k)) ||
        (st = xfa_test_tensor_upload(ctx, &in->v)) || (tc->alibi && (st = xfa_test_tensor_upload(ctx, &in->alibi))) ||
        (tc->bias && (st = xfa_test_tensor_upload(ctx, &in->bias)))) {
        snprintf(message, size, "buffer setup: %s", xfa_context_last_error(ctx));
        return st;
    }

    in->params = xfa_test_case_params(tc, &in->alibi.view, &in->bias.view);
    if (tc->sequences > 0) { /* offsets of the packed sequences */
        const int64_t n = tc->sequences, shape[4] = {n + 1, 1, 1, 1}, stride[4] = {1, 1, 1, 1};
        if (!xfa_test_tensor_alloc(&in->cu_q, XFA_DTYPE_I32, shape, stride) ||
            !xfa_test_tensor_alloc(&in->cu_k, XFA_DTYPE_I32, shape, stride)) {
            snprintf(message, size, "test allocation failed");
            return XFA_ERROR_OUT_OF_HOST_MEMORY;
        }
        int32_t *cq = (int32_t *)(in->cu_q.host + in->cu_q.view.offset), *ck = (int32_t *)(in->cu_k.host + in->cu_k.view.offset);
        cq[0] = ck[0] = 0;
        int64_t longest = 1;
        for (int64_t b = 0; b < n; b++) {
            cq[b + 1] = cq[b] + (int32_t)tc->seq_q[b];
            ck[b + 1] = ck[b] + (int32_t)tc->seq_k[b];
            longest = tc->seq_q[b] > longest ? tc->seq_q[b] : longest;
        }
        if ((st = xfa_test_tensor_upload(ctx, &in->cu_q)) || (st = xfa_test_tensor_upload(ctx, &in->cu_k))) {
            snprintf(message, size, "buffer setup: %s", xfa_context_last_error(ctx));
            return st;
        }
        in->params.cu_seqlens_q = &in->cu_q.view;
        in->params.cu_seqlens_k = &in->cu_k.view;
        in->params.max_seqlen_q = longest;
    }
    if (tc->Br || tc->Bc) {
        if ((st = xfa_plan_get(ctx, (uint32_t)D, tc->dtype, &in->plan))) {
            snprintf(message, size, "xfa_plan_get: %s", xfa_context_last_error(ctx));
            return st;
        }
        if (tc->Br) in->plan.Br = tc->Br;
        if (tc->Bc) in->plan.Bc = tc->Bc;
        in->plan.workgroup_size = 0; /* derived from Br by the backend */
        in->params.plan = &in->plan;
    }

    /* the reference reads the same (rounded) values */
    in->reference = xfa_reference_problem_make(xfa_host_view_of(&in->q.view, in->q.host),
                                               xfa_host_view_of(&in->k.view, in->k.host),
                                               xfa_host_view_of(&in->v.view, in->v.host),
                                               tc->scale != 0.0f ? tc->scale : 1.0 / sqrt((double)D), tc->causal);
    in->reference.window_left = tc->window_left;
    in->reference.window_right = tc->window_right;
    in->reference.softcap = tc->softcap;
    if (tc->alibi) in->reference.alibi = xfa_host_view_of(&in->alibi.view, in->alibi.host);
    if (tc->bias) in->reference.bias = xfa_host_view_of(&in->bias.view, in->bias.host);
    return XFA_SUCCESS;
}

xfa_status xfa_test_output_make(xfa_context *ctx, const xfa_test_case *tc, int64_t S, int64_t H, xfa_test_tensor *t)
{
    int64_t stride[4];
    xfa_test_layout_strides(tc, S, H, stride);
    const int64_t shape[4] = {tc->batch, S, H, tc->head_dim};
    if (!xfa_test_tensor_alloc(t, tc->dtype, shape, stride)) return XFA_ERROR_OUT_OF_HOST_MEMORY;
    xfa_test_tensor_poison(t);
    return xfa_test_tensor_upload(ctx, t);
}

double xfa_test_tolerance(xfa_dtype dtype, double ref_max, double unfused_err)
{
    if (dtype == XFA_DTYPE_F32) return 1e-5 * fmax(ref_max, 1e-3);
    /* Floor: half an ulp of the largest value, which rounding to the dtype alone costs. */
    const double ulp = ref_max * (dtype == XFA_DTYPE_F16 ? ldexp(1.0, -10) : ldexp(1.0, -7));
    return 2.0 * fmax(unfused_err, 0.5 * ulp);
}

xfa_test_result xfa_test_run_case(xfa_context *ctx, const xfa_test_case *tc)
{
    xfa_test_result r;
    memset(&r, 0, sizeof r);
    const int64_t B = tc->batch, Sq = tc->seqlen_q, Hq = tc->heads_q, D = tc->head_dim;
    const size_t n_out = (size_t)(B * Sq * Hq * D), n_rows = (size_t)(B * Hq * Sq);
    xfa_test_inputs in;
    xfa_test_tensor o, lse;
    memset(&o, 0, sizeof o);
    memset(&lse, 0, sizeof lse);
    double *o_ref = malloc(n_out * sizeof *o_ref), *lse_ref = malloc(n_rows * sizeof *lse_ref);
    float *o_got = malloc(n_out * sizeof *o_got), *o_unfused = NULL;
    uint64_t rng = tc->seed ^ 0x5851F42D4C957F2Dull;

    xfa_status st = xfa_test_inputs_make(ctx, tc, &rng, &in, r.message, sizeof r.message);
    if (st) {
        r.status = st;
        goto done;
    }
    const int64_t lse_shape[4] = {B, Sq, Hq, 1}, lse_stride[4] = {Hq * Sq, 1, Sq, 1};
    if (!o_ref || !lse_ref || !o_got || (tc->lse && !xfa_test_tensor_alloc(&lse, XFA_DTYPE_F32, lse_shape, lse_stride))) {
        r = fail_setup(r, ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "test allocation");
        goto done;
    }
    if (tc->lse) xfa_test_tensor_poison(&lse);
    if ((st = xfa_test_output_make(ctx, tc, Sq, Hq, &o)) || (tc->lse && (st = xfa_test_tensor_upload(ctx, &lse)))) {
        r = fail_setup(r, ctx, st, "buffer setup");
        goto done;
    }

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    r.status = xfa_attention_forward(ctx, &in.params, &in.q.view, &in.k.view, &in.v.view, &o.view,
                                     tc->lse ? &lse.view : NULL);
    if (!r.status) r.status = xfa_context_synchronize(ctx);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r.seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (r.status) {
        snprintf(r.message, sizeof r.message, "xfa_attention_forward: %s", xfa_context_last_error(ctx));
        goto done;
    }
    if ((st = xfa_test_tensor_download(&o)) || (tc->lse && (st = xfa_test_tensor_download(&lse)))) {
        r = fail_setup(r, ctx, st, "download");
        goto done;
    }
    if (!tc->skip_reference) {
        if (tc->dtype != XFA_DTYPE_F32 && !(o_unfused = malloc(n_out * sizeof *o_unfused))) {
            r = fail_setup(r, ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "unfused reference");
            goto done;
        }
        if (xfa_test_reference(tc, &in, o_ref, lse_ref, o_unfused)) {
            r = fail_setup(r, ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "reference");
            goto done;
        }
    }

    if (tc->corrupt != XFA_CORRUPT_NONE) {
        const size_t elem = xfa_dtype_size(tc->dtype);
        unsigned char *base = o.host + o.view.offset;
        const int64_t at = xfa_tensor_index(&o.view, B - 1, Sq / 2, Hq - 1, D / 3);
        const float delta = tc->dtype == XFA_DTYPE_F32 ? 1e-3f : 0.1f; /* well above each dtype's tolerance */
        if (tc->corrupt == XFA_CORRUPT_VALUE) xfa_store_f32(base, tc->dtype, at, xfa_load_f32(base, tc->dtype, at) + delta);
        if (tc->corrupt == XFA_CORRUPT_UNWRITTEN) memset(base + (size_t)at * elem, XFA_TEST_POISON_BYTE, elem);
        if (tc->corrupt == XFA_CORRUPT_GUARD) memset(o.host + o.bytes - XFA_TEST_GUARD_BYTES, 0, elem);
    }

    if (!xfa_test_tensor_check_written(&o, &r.unwritten, &r.guard_damage) ||
        (tc->lse && !xfa_test_tensor_check_written(&lse, &r.unwritten, &r.guard_damage))) {
        r = fail_setup(r, ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "test allocation");
        goto done;
    }
    xfa_test_tensor_gather(&o, o_got, &r.nonfinite);
    if (tc->output) memcpy(tc->output, o_got, n_out * sizeof *o_got);
    if (tc->skip_reference) {
        r.passed = r.unwritten == 0 && r.guard_damage == 0 && r.nonfinite == 0;
        if (!r.passed)
            snprintf(r.message, sizeof r.message, "unwritten %lld, guard damage %lld, non-finite %lld",
                     (long long)r.unwritten, (long long)r.guard_damage, (long long)r.nonfinite);
        goto done;
    }
    for (size_t i = 0; i < n_out; i++) r.ref_max = fmax(r.ref_max, fabs(o_ref[i]));
    r.max_abs_err = r.nonfinite ? INFINITY : max_abs_diff_f(o_got, o_ref, n_out);
    if (o_unfused) r.unfused_err = max_abs_diff_f(o_unfused, o_ref, n_out);
    r.tolerance = xfa_test_tolerance(tc->dtype, r.ref_max, r.unfused_err);

    bool lse_ok = true;
    if (tc->lse) {
        const float *base = (const float *)(lse.host + lse.view.offset);
        const double lse_tol = tc->dtype == XFA_DTYPE_F32 ? 1e-5 : 1e-3;
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
        if (!lse_ok) snprintf(r.message, sizeof r.message, "LSE error %.3g", r.lse_max_err);
    }
    r.passed = lse_ok && r.max_abs_err <= r.tolerance && r.unwritten == 0 && r.guard_damage == 0 && r.nonfinite == 0;
    if (!r.passed && !r.message[0])
        snprintf(r.message, sizeof r.message,
                 "max |o-ref| %.3g > tolerance %.3g (max|ref| %.3g, unfused %.3g), unwritten %lld, guard damage %lld, "
                 "non-finite %lld",
                 r.max_abs_err, r.tolerance, r.ref_max, r.unfused_err, (long long)r.unwritten,
                 (long long)r.guard_damage, (long long)r.nonfinite);

done:
    xfa_test_inputs_free(&in);
    xfa_test_tensor_free(&o);
    xfa_test_tensor_free(&lse);
    free(o_ref);
    free(lse_ref);
    free(o_got);
    free(o_unfused);
    return r;
}
