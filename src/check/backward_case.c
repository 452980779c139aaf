/* backward_case.c - the backend-neutral backward check (see backward_case.h). */
#include "backward_case.h"

#include "dtype.h"
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const grad_names[3] = {"dq", "dk", "dv"};

xfa_backward_result xfa_test_run_backward(xfa_context *ctx, const xfa_test_case *tc)
{
    xfa_backward_result r;
    memset(&r, 0, sizeof r);
    const int64_t B = tc->batch, Sq = tc->seqlen_q, Sk = tc->seqlen_k, Hq = tc->heads_q, Hkv = tc->heads_kv;
    const int64_t D = tc->head_dim;
    const size_t n[3] = {(size_t)(B * Sq * Hq * D), (size_t)(B * Sk * Hkv * D), (size_t)(B * Sk * Hkv * D)};
    xfa_test_inputs in;
    xfa_test_tensor o, lse, d_o, grads[3];
    xfa_buffer *scratch = NULL;
    memset(&o, 0, sizeof o);
    memset(&lse, 0, sizeof lse);
    memset(&d_o, 0, sizeof d_o);
    memset(grads, 0, sizeof grads);
    double *ref[3] = {NULL, NULL, NULL}, *unfused[3] = {NULL, NULL, NULL};
    float *got[3] = {NULL, NULL, NULL};
    uint64_t rng = tc->seed ^ 0x2545F4914F6CDD1Dull;

    xfa_status st = xfa_test_inputs_make(ctx, tc, &rng, &in, r.message, sizeof r.message);
    if (st) {
        r.status = st;
        goto done;
    }
    const int64_t lse_shape[4] = {B, Sq, Hq, 1}, lse_stride[4] = {Hq * Sq, 1, Sq, 1};
    int64_t q_stride[4];
    xfa_test_layout_strides(tc, Sq, Hq, q_stride);
    const int64_t q_shape[4] = {B, Sq, Hq, D};
    bool ok = xfa_test_tensor_alloc(&lse, XFA_DTYPE_F32, lse_shape, lse_stride) &
              xfa_test_tensor_alloc(&d_o, tc->dtype, q_shape, q_stride);
    for (int g = 0; g < 3; g++) {
        ref[g] = malloc(n[g] * sizeof *ref[g]);
        unfused[g] = malloc(n[g] * sizeof *unfused[g]);
        got[g] = malloc(n[g] * sizeof *got[g]);
        ok = ok && ref[g] && unfused[g] && got[g];
    }
    if (!ok) {
        r.status = XFA_ERROR_OUT_OF_HOST_MEMORY;
        snprintf(r.message, sizeof r.message, "test allocation failed");
        goto done;
    }
    xfa_test_tensor_poison(&lse);
    xfa_test_tensor_fill_random(&d_o, &rng);
    if ((st = xfa_test_output_make(ctx, tc, Sq, Hq, &o)) || (st = xfa_test_tensor_upload(ctx, &lse)) ||
        (st = xfa_test_tensor_upload(ctx, &d_o)) || (st = xfa_test_output_make(ctx, tc, Sq, Hq, &grads[0])) ||
        (st = xfa_test_output_make(ctx, tc, Sk, Hkv, &grads[1])) ||
        (st = xfa_test_output_make(ctx, tc, Sk, Hkv, &grads[2]))) {
        r.status = st;
        snprintf(r.message, sizeof r.message, "buffer setup: %s", xfa_context_last_error(ctx));
        goto done;
    }

    r.status = xfa_attention_forward(ctx, &in.params, &in.q.view, &in.k.view, &in.v.view, &o.view, &lse.view);
    size_t scratch_bytes = 0;
    if (!r.status && tc->caller_scratch &&
        !(r.status = xfa_attention_backward_scratch_size(ctx, &in.params, &in.q.view, &in.k.view, &in.v.view, &o.view,
                                                         &d_o.view, &lse.view, &grads[0].view, &grads[1].view,
                                                         &grads[2].view, &scratch_bytes)) &&
        !(r.status = xfa_buffer_create(ctx, scratch_bytes + 256, &scratch))) {
        float *nan_fill = malloc(scratch_bytes + 256);
        for (size_t i = 0; i < (scratch_bytes + 256) / 4; i++) nan_fill[i] = NAN;
        r.status = xfa_buffer_upload(scratch, 0, nan_fill, scratch_bytes + 256);
        free(nan_fill);
        in.params.scratch = scratch;
        in.params.scratch_offset = 256;
    }
    if (!r.status)
        r.status = xfa_attention_backward(ctx, &in.params, &in.q.view, &in.k.view, &in.v.view, &o.view, &d_o.view,
                                          &lse.view, &grads[0].view, &grads[1].view, &grads[2].view);
    if (!r.status && scratch) { /* used (where the backend needs any) and nothing before the offset touched */
        xfa_device_info info;
        xfa_context_get_info(ctx, &info);
        float *back = malloc(scratch_bytes + 256);
        size_t before = 0, inside = 0;
        if (!(r.status = xfa_buffer_download(scratch, 0, back, scratch_bytes + 256)))
            for (size_t i = 0; i < (scratch_bytes + 256) / 4; i++) *(i < 64 ? &before : &inside) += !isnan(back[i]);
        free(back);
        if (!r.status && (before || (inside == 0 && info.backend != XFA_BACKEND_CPU))) {
            r.status = XFA_ERROR_BACKEND_FAILURE;
            snprintf(r.message, sizeof r.message, "caller's scratch: %zu floats written before the offset, %zu inside",
                     before, inside);
            goto done;
        }
    }
    for (int g = 0; g < 3 && !r.status; g++) r.status = xfa_test_tensor_download(&grads[g]);
    if (r.status) {
        snprintf(r.message, sizeof r.message, "%s", xfa_context_last_error(ctx));
        goto done;
    }

    const xfa_host_view d_o_host = xfa_host_view_of(&d_o.view, d_o.host);
    if (xfa_reference_backward(&in.reference, &d_o_host, ref[0], ref[1], ref[2]) ||
        (tc->dtype != XFA_DTYPE_F32 &&
         xfa_reference_backward_unfused(&in.reference, &d_o_host, tc->dtype, unfused[0], unfused[1], unfused[2]))) {
        r.status = XFA_ERROR_OUT_OF_HOST_MEMORY;
        snprintf(r.message, sizeof r.message, "reference allocation failed");
        goto done;
    }
    r.passed = true;
    for (int g = 0; g < 3; g++) {
        if (tc->corrupt == XFA_CORRUPT_VALUE && g == 1) { /* test hook: a wrong dK element */
            unsigned char *base = grads[g].host + grads[g].view.offset;
            const int64_t at = xfa_tensor_index(&grads[g].view, B - 1, Sk / 2, Hkv - 1, D / 3);
            xfa_store_f32(base, tc->dtype, at, xfa_load_f32(base, tc->dtype, at) + 0.05f);
        }
        xfa_test_tensor_check_written(&grads[g], &r.unwritten, &r.guard_damage);
        xfa_test_tensor_gather(&grads[g], got[g], &r.nonfinite);
        for (size_t i = 0; i < n[g]; i++) {
            r.ref_max[g] = fmax(r.ref_max[g], fabs(ref[g][i]));
            r.max_abs_err[g] = fmax(r.max_abs_err[g], fabs((double)got[g][i] - ref[g][i]));
            if (tc->dtype != XFA_DTYPE_F32) r.unfused_err[g] = fmax(r.unfused_err[g], fabs(unfused[g][i] - ref[g][i]));
        }
    }
    /* Errors in dS scale with |dO| |V|, not with the gradient they end up in (with one key,
     * dK is exactly 0 yet computed from a rounded O): relative to the call's largest gradient. */
    const double scale = fmax(r.ref_max[0], fmax(r.ref_max[1], r.ref_max[2]));
    for (int g = 0; g < 3; g++) {
        r.tolerance[g] = xfa_test_tolerance(tc->dtype, scale, r.unfused_err[g]);
        if (!(r.max_abs_err[g] <= r.tolerance[g])) {
            r.passed = false;
            snprintf(r.message, sizeof r.message, "%s: max |err| %.3g > tolerance %.3g (max|ref| %.3g, unfused %.3g)",
                     grad_names[g], r.max_abs_err[g], r.tolerance[g], r.ref_max[g], r.unfused_err[g]);
        }
    }
    if (r.unwritten || r.guard_damage || r.nonfinite) {
        r.passed = false;
        snprintf(r.message, sizeof r.message, "unwritten %lld, guard damage %lld, non-finite %lld",
                 (long long)r.unwritten, (long long)r.guard_damage, (long long)r.nonfinite);
    }

done:
    xfa_buffer_destroy(&scratch);
    xfa_test_inputs_free(&in);
    xfa_test_tensor_free(&o);
    xfa_test_tensor_free(&lse);
    xfa_test_tensor_free(&d_o);
    for (int g = 0; g < 3; g++) {
        xfa_test_tensor_free(&grads[g]);
        free(ref[g]);
        free(unfused[g]);
        free(got[g]);
    }
    return r;
}
