/*
 * backward_case.h - the backend-neutral backward check: the case's forward on
 * the device gives O and the LSE, then the backward's dQ, dK, dV (poisoned
 * beforehand, guard bytes around) are compared with the fp64 reference
 * gradient; f32 to 1e-5 of the call's largest |gradient|, f16/bf16 to twice the
 * error of an unfused backward in the same precision (at least an ulp of it).
 */
#ifndef XFA_BACKWARD_CASE_H
#define XFA_BACKWARD_CASE_H

#include "attention_case.h"

typedef struct xfa_backward_result {
    xfa_status status;
    bool passed;
    double max_abs_err[3]; /* dq, dk, dv */
    double ref_max[3];
    double tolerance[3];
    double unfused_err[3];
    int64_t unwritten, guard_damage, nonfinite;
    char message[1024];
} xfa_backward_result;

xfa_backward_result xfa_test_run_backward(xfa_context *ctx, const xfa_test_case *tc);

#endif /* XFA_BACKWARD_CASE_H */
