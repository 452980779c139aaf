/* cmd_run.c - `xfa run`: one attention on random inputs, checked against the fp64 reference. */
#include "attention_case.h"
#include "cli.h"

#include <stdio.h>

/* The fp64 reference costs B*H*Sq*Sk*D multiply-adds; above this it is skipped unless --check. */
#define AFFORDABLE_REFERENCE 4e9

int cli_run(const cli_options *o)
{
    xfa_context *ctx = cli_open(o);
    if (!ctx) return 1;
    xfa_device_info info;
    xfa_context_get_info(ctx, &info);

    xfa_test_case tc = xfa_test_case_make(o->batch, o->seqlen, o->seqlen_k, o->heads, o->heads_kv, o->dim, o->dtype,
                                          o->causal, o->seed);
    tc.layout = o->bhsd ? XFA_LAYOUT_BHSD : XFA_LAYOUT_BSHD;
    tc.window_left = o->window_left;
    tc.window_right = o->causal ? -1 : o->window_right;
    tc.Br = o->Br;
    tc.Bc = o->Bc;
    const double work = (double)o->batch * o->heads * o->seqlen * o->seqlen_k * o->dim;
    tc.skip_reference = o->check == 0 || (o->check < 0 && work > AFFORDABLE_REFERENCE);

    xfa_plan plan;
    const xfa_status plan_st = xfa_plan_get(ctx, (uint32_t)o->dim, o->dtype, &plan);
    printf("backend %s, device %s, path %s\n", xfa_backend_name(info.backend), info.name, info.path);
    if (plan_st == XFA_SUCCESS)
        printf("plan: Br=%u Bc=%u work-items=%u local=%llu bytes%s\n", o->Br ? o->Br : plan.Br, o->Bc ? o->Bc : plan.Bc,
               plan.workgroup_size, (unsigned long long)plan.local_mem_bytes, o->Br || o->Bc ? " (overridden)" : "");
    char what[256];
    xfa_test_case_describe(&tc, what, sizeof what);
    printf("problem: %s\n", what);

    const xfa_test_result r = xfa_test_run_case(ctx, &tc);
    xfa_context_destroy(&ctx);
    if (r.status) {
        fprintf(stderr, "xfa run: %s\n", r.message);
        return 1;
    }
    const double flops = cli_attention_flops(o, o->batch, o->heads, o->seqlen, o->seqlen_k);
    printf("time: %.3f ms (first call, includes kernel build and upload wait), %.3f TFLOP/s\n", r.seconds * 1e3,
           flops / r.seconds * 1e-12);
    if (tc.skip_reference)
        printf("check: reference skipped (%.1e multiply-adds; --check forces it); every element written: %s\n", work,
               r.passed ? "yes" : "NO");
    else
        printf("check: max |o - ref| = %.3g (tolerance %.3g, relative %.3g), max |lse - ref| = %.3g\n", r.max_abs_err,
               r.tolerance, r.ref_max > 0 ? r.max_abs_err / r.ref_max : r.max_abs_err, r.lse_max_err);
    printf("%s%s%s\n", r.passed ? "PASS" : "FAIL", r.passed ? "" : ": ", r.passed ? "" : r.message);
    return r.passed ? 0 : 1;
}
