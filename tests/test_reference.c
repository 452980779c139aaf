/* test_reference.c - the fp64 reference against a hand-worked example and an
 * independent naive computation; the f16/bf16 conversions against known values. */
#include "attention_case.h"
#include "check_run.h"
#include "dtype.h"
#include "reference.h"

#include <math.h>
#include <stdlib.h>

static xfa_host_view contiguous(const float *data, int64_t B, int64_t S, int64_t H, int64_t D)
{
    xfa_host_view v = {data, XFA_DTYPE_F32, {B, S, H, D}, {S * H * D, H * D, D, 1}};
    return v;
}

START_TEST(test_hand_worked)
{
    /* One head, d = 2 (the reference takes any d), Sq = 1, Sk = 2, scale 1:
     * q = (1, 0); k0 = (1, 0), k1 = (0, 1) -> scores (1, 0);
     * p = (e, 1) / (e + 1); v0 = (1, 2), v1 = (3, 4):
     * o = (e*1 + 3, e*2 + 4) / (e + 1); lse = log(e + 1). */
    const float q[2] = {1, 0}, k[4] = {1, 0, 0, 1}, v[4] = {1, 2, 3, 4};
    xfa_reference_problem p = xfa_reference_problem_make(contiguous(q, 1, 1, 1, 2), contiguous(k, 1, 2, 1, 2),
                                                         contiguous(v, 1, 2, 1, 2), 1.0, false);
    double o[2], lse[1];
    ck_assert_int_eq(xfa_reference_forward(&p, o, lse), XFA_SUCCESS);
    const double e = exp(1.0);
    ck_assert_double_eq_tol(o[0], (e + 3) / (e + 1), 1e-15);
    ck_assert_double_eq_tol(o[1], (2 * e + 4) / (e + 1), 1e-15);
    ck_assert_double_eq_tol(lse[0], log(e + 1), 1e-15);

    /* Causal with Sq = 2, Sk = 2: row 0 sees only key 0, so o = v0 and lse = score 0 * scale. */
    const float q2[4] = {1, 0, 1, 0};
    p.q = contiguous(q2, 1, 2, 1, 2);
    p.causal = true;
    p.scale = 0.5;
    double o2[4], lse2[2];
    ck_assert_int_eq(xfa_reference_forward(&p, o2, lse2), XFA_SUCCESS);
    ck_assert_double_eq_tol(o2[0], 1.0, 1e-15);
    ck_assert_double_eq_tol(o2[1], 2.0, 1e-15);
    ck_assert_double_eq_tol(lse2[0], 0.5, 1e-15);
    const double e5 = exp(0.5);
    ck_assert_double_eq_tol(o2[2], (e5 + 3) / (e5 + 1), 1e-15);
    ck_assert_double_eq_tol(lse2[1], log(e5 + 1), 1e-15);
}
END_TEST

START_TEST(test_empty_rows)
{
    /* Causal with Sq = 3 > Sk = 1 (bottom-right aligned): rows 0 and 1 see nothing. */
    const float q[6] = {1, 1, 1, 1, 1, 1}, k[2] = {1, 1}, v[2] = {5, 7};
    xfa_reference_problem p = xfa_reference_problem_make(contiguous(q, 1, 3, 1, 2), contiguous(k, 1, 1, 1, 2),
                                                         contiguous(v, 1, 1, 1, 2), 1.0, true);
    double o[6], lse[3];
    ck_assert_int_eq(xfa_reference_forward(&p, o, lse), XFA_SUCCESS);
    ck_assert(o[0] == 0 && o[1] == 0 && o[2] == 0 && o[3] == 0);
    ck_assert(isinf(lse[0]) && lse[0] < 0 && isinf(lse[1]));
    ck_assert_double_eq_tol(o[4], 5.0, 1e-15);
    ck_assert_double_eq_tol(o[5], 7.0, 1e-15);
    ck_assert_double_eq_tol(lse[2], 2.0, 1e-15);
}
END_TEST

START_TEST(test_hand_worked_extras)
{
    /* Sq = Sk = 3, d = 1, q = k = 0 so every score is 0 before the extras; v = (1, 2, 4). */
    const float zero[3] = {0, 0, 0}, v[3] = {1, 2, 4};
    xfa_reference_problem p = xfa_reference_problem_make(contiguous(zero, 1, 3, 1, 1), contiguous(zero, 1, 3, 1, 1),
                                                         contiguous(v, 1, 3, 1, 1), 1.0, false);
    double o[3], lse[3];
    /* window (1, 0): row 0 sees key 0; row 1 keys 0-1; row 2 keys 1-2 */
    p.window_left = 1;
    p.window_right = 0;
    ck_assert_int_eq(xfa_reference_forward(&p, o, lse), XFA_SUCCESS);
    ck_assert_double_eq_tol(o[0], 1.0, 1e-15);
    ck_assert_double_eq_tol(o[1], 1.5, 1e-15);
    ck_assert_double_eq_tol(o[2], 3.0, 1e-15);
    ck_assert_double_eq_tol(lse[2], log(2.0), 1e-15);
    /* window (0, 0) with Sq = 3 > Sk = 1: only row 2 has a diagonal key */
    p.k = contiguous(zero, 1, 1, 1, 1);
    p.v = contiguous(v, 1, 1, 1, 1);
    p.window_left = 0;
    ck_assert_int_eq(xfa_reference_forward(&p, o, lse), XFA_SUCCESS);
    ck_assert(o[0] == 0 && o[1] == 0 && isinf(lse[0]) && isinf(lse[1]));
    ck_assert_double_eq_tol(o[2], 1.0, 1e-15);

    /* ALiBi with slope 0.5 on one row that sees three keys (diagonal = key 2):
     * scores -1, -0.5, 0 -> weights e^-1, e^-0.5, 1. */
    p = xfa_reference_problem_make(contiguous(zero, 1, 1, 1, 1), contiguous(zero, 1, 3, 1, 1), contiguous(v, 1, 3, 1, 1),
                                   1.0, false);
    const float slope[1] = {0.5f};
    p.alibi = contiguous(slope, 1, 1, 1, 1);
    ck_assert_int_eq(xfa_reference_forward(&p, o, lse), XFA_SUCCESS);
    const double w0 = exp(-1.0), w1 = exp(-0.5);
    ck_assert_double_eq_tol(o[0], (w0 * 1 + w1 * 2 + 4) / (w0 + w1 + 1), 1e-15);
    ck_assert_double_eq_tol(lse[0], log(w0 + w1 + 1), 1e-15);

    /* Softcap 0.5 on scores (2, 0) (q = 1, k = (2, 0), scale 1): 0.5 tanh(4) and 0. */
    const float one[1] = {1}, k2[2] = {2, 0};
    p = xfa_reference_problem_make(contiguous(one, 1, 1, 1, 1), contiguous(k2, 1, 2, 1, 1), contiguous(v, 1, 2, 1, 1),
                                   1.0, false);
    p.softcap = 0.5;
    ck_assert_int_eq(xfa_reference_forward(&p, o, lse), XFA_SUCCESS);
    const double s0 = exp(0.5 * tanh(4.0));
    ck_assert_double_eq_tol(o[0], (s0 * 1 + 2) / (s0 + 1), 1e-15);

    /* A bias of (-inf, 0.25) hides key 0 and shifts key 1; a bias of all -inf empties the row. */
    const float bias[2] = {-INFINITY, 0.25f}, hide[2] = {-INFINITY, -INFINITY};
    p.softcap = 0;
    p.bias = contiguous(bias, 1, 1, 1, 2);
    ck_assert_int_eq(xfa_reference_forward(&p, o, lse), XFA_SUCCESS);
    ck_assert_double_eq_tol(o[0], 2.0, 1e-15);
    ck_assert_double_eq_tol(lse[0], 0.25, 1e-15);
    p.bias = contiguous(hide, 1, 1, 1, 2);
    ck_assert_int_eq(xfa_reference_forward(&p, o, lse), XFA_SUCCESS);
    ck_assert(o[0] == 0 && isinf(lse[0]) && lse[0] < 0);
}
END_TEST

/* Independent naive attention: the whole S matrix, softmax by division of
 * exponentials after a max shift, in long double, BHSD input layout. */
static void naive(const float *q, const float *k, const float *v, int64_t H, int64_t Hkv, int64_t S, int64_t D,
                  double scale, long double *o, long double *lse)
{
    long double *P = malloc(sizeof *P * (size_t)(S * S));
    for (int64_t h = 0; h < H; h++) {
        const int64_t hk = h / (H / Hkv);
        for (int64_t i = 0; i < S; i++)
            for (int64_t j = 0; j < S; j++) {
                long double dot = 0;
                for (int64_t d = 0; d < D; d++) dot += (long double)q[(h * S + i) * D + d] * k[(hk * S + j) * D + d];
                P[i * S + j] = dot * scale;
            }
        for (int64_t i = 0; i < S; i++) {
            long double mx = P[i * S];
            for (int64_t j = 1; j < S; j++) mx = fmaxl(mx, P[i * S + j]);
            long double sum = 0;
            for (int64_t j = 0; j < S; j++) sum += expl(P[i * S + j] - mx);
            lse[h * S + i] = mx + logl(sum);
            for (int64_t d = 0; d < D; d++) {
                long double acc = 0;
                for (int64_t j = 0; j < S; j++) acc += expl(P[i * S + j] - mx) / sum * v[(hk * S + j) * D + d];
                o[(h * S + i) * D + d] = acc;
            }
        }
    }
    free(P);
}

START_TEST(test_against_naive)
{
    const int64_t H = 4, Hkv = 2, S = 37, D = 24;
    uint64_t rng = 12345 + (uint64_t)_i;
    float *q = malloc(sizeof *q * H * S * D), *k = malloc(sizeof *k * Hkv * S * D), *v = malloc(sizeof *v * Hkv * S * D);
    for (int64_t i = 0; i < H * S * D; i++) q[i] = (float)xfa_test_rand_normal(&rng);
    for (int64_t i = 0; i < Hkv * S * D; i++) k[i] = (float)xfa_test_rand_normal(&rng), v[i] = (float)xfa_test_rand_normal(&rng);
    long double *o_naive = malloc(sizeof *o_naive * H * S * D), *lse_naive = malloc(sizeof *lse_naive * H * S);
    naive(q, k, v, H, Hkv, S, D, 0.3, o_naive, lse_naive);

    /* The reference reads the same data through BHSD strides. */
    xfa_host_view qv = {q, XFA_DTYPE_F32, {1, S, H, D}, {H * S * D, D, S * D, 1}};
    xfa_host_view kv = {k, XFA_DTYPE_F32, {1, S, Hkv, D}, {Hkv * S * D, D, S * D, 1}};
    xfa_host_view vv = {v, XFA_DTYPE_F32, {1, S, Hkv, D}, {Hkv * S * D, D, S * D, 1}};
    xfa_reference_problem p = xfa_reference_problem_make(qv, kv, vv, 0.3, false);
    double *o = malloc(sizeof *o * H * S * D), *lse = malloc(sizeof *lse * H * S);
    ck_assert_int_eq(xfa_reference_forward(&p, o, lse), XFA_SUCCESS);
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < S; i++) {
            ck_assert_double_eq_tol(lse[h * S + i], (double)lse_naive[h * S + i], 1e-12);
            for (int64_t d = 0; d < D; d++) /* reference is BSHD */
                ck_assert_double_eq_tol(o[(i * H + h) * D + d], (double)o_naive[(h * S + i) * D + d], 1e-12);
        }
    free(q); free(k); free(v); free(o_naive); free(lse_naive); free(o); free(lse);
}
END_TEST

/* L = sum(O * G) as a function of the inputs, for finite differences. */
static double loss(const xfa_reference_problem *p, const float *g, double *o_scratch, size_t n)
{
    ck_assert_int_eq(xfa_reference_forward(p, o_scratch, NULL), XFA_SUCCESS);
    double l = 0;
    for (size_t i = 0; i < n; i++) l += o_scratch[i] * g[i];
    return l;
}

/* The analytic backward of the reference against central differences, on tiny shapes
 * with each feature that changes the gradient (causal, GQA, softcap, ALiBi, bias, window). */
START_TEST(test_backward_finite_differences)
{
    enum { Sq = 3, Sk = 4, Hq = 2, Hkv = 1, D = 3 };
    float q[Sq * Hq * D], k[Sk * Hkv * D], v[Sk * Hkv * D], g[Sq * Hq * D], slopes[Hq] = {0.3f, 0.7f};
    float bias[Sq * Sk];
    uint64_t rng = 77 + (uint64_t)_i;
    for (int i = 0; i < Sq * Hq * D; i++) q[i] = (float)xfa_test_rand_normal(&rng), g[i] = (float)xfa_test_rand_normal(&rng);
    for (int i = 0; i < Sk * Hkv * D; i++) k[i] = (float)xfa_test_rand_normal(&rng), v[i] = (float)xfa_test_rand_normal(&rng);
    for (int i = 0; i < Sq * Sk; i++) bias[i] = (float)xfa_test_rand_normal(&rng);
    xfa_reference_problem p = xfa_reference_problem_make(contiguous(q, 1, Sq, Hq, D), contiguous(k, 1, Sk, Hkv, D),
                                                         contiguous(v, 1, Sk, Hkv, D), 0.8, _i == 1);
    if (_i == 2) p.softcap = 1.5;
    if (_i == 3) p.alibi = contiguous(slopes, 1, 1, Hq, 1);
    if (_i == 4) p.bias = contiguous(bias, 1, Sq, 1, Sk);
    if (_i == 5) p.window_left = 1, p.window_right = 0;
    const xfa_host_view gv = contiguous(g, 1, Sq, Hq, D);
    double dq[Sq * Hq * D], dk[Sk * Hkv * D], dv[Sk * Hkv * D], o[Sq * Hq * D];
    ck_assert_int_eq(xfa_reference_backward(&p, &gv, dq, dk, dv), XFA_SUCCESS);

    float *const inputs[3] = {q, k, v};
    const double *const grads[3] = {dq, dk, dv};
    const int counts[3] = {Sq * Hq * D, Sk * Hkv * D, Sk * Hkv * D};
    for (int t = 0; t < 3; t++)
        for (int e = 0; e < counts[t]; e++) {
            const float keep = inputs[t][e];
            inputs[t][e] = keep + 1e-2f;
            const double up_x = inputs[t][e], up = loss(&p, g, o, Sq * Hq * D);
            inputs[t][e] = keep - 1e-2f;
            const double down_x = inputs[t][e], down = loss(&p, g, o, Sq * Hq * D);
            inputs[t][e] = keep;
            const double numeric = (up - down) / (up_x - down_x);
            ck_assert_msg(fabs(numeric - grads[t][e]) <= 1e-4 * fmax(1.0, fabs(numeric)),
                          "variant %d tensor %d element %d: analytic %.8f numeric %.8f", _i, t, e, grads[t][e], numeric);
        }
}
END_TEST

START_TEST(test_f16_conversion)
{
    ck_assert_uint_eq(xfa_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(xfa_f32_to_f16(-2.0f), 0xc000);
    ck_assert_uint_eq(xfa_f32_to_f16(65504.0f), 0x7bff);
    ck_assert_uint_eq(xfa_f32_to_f16(65520.0f), 0x7c00);       /* rounds up to inf */
    ck_assert_uint_eq(xfa_f32_to_f16(5.9604645e-8f), 0x0001);  /* smallest subnormal */
    ck_assert_uint_eq(xfa_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00); /* tie rounds to even */
    ck_assert_uint_eq(xfa_f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);
    ck_assert(isnan(xfa_f16_to_f32(xfa_f32_to_f16(NAN))));
    ck_assert_float_eq(xfa_f16_to_f32(0x3555), 0.333251953125f);
    ck_assert_float_eq(xfa_f16_to_f32(0x0001), 5.9604645e-8f);
    /* every finite half survives the round trip */
    for (uint32_t h = 0; h < 0x10000; h++)
        if ((h & 0x7c00) != 0x7c00) ck_assert_uint_eq(xfa_f32_to_f16(xfa_f16_to_f32((uint16_t)h)), h);
}
END_TEST

START_TEST(test_bf16_conversion)
{
    ck_assert_uint_eq(xfa_f32_to_bf16(1.0f), 0x3f80);
    ck_assert_uint_eq(xfa_f32_to_bf16(-1.0f), 0xbf80);
    ck_assert_uint_eq(xfa_f32_to_bf16(1.0f + 1.0f / 256), 0x3f80); /* tie to even */
    ck_assert_uint_eq(xfa_f32_to_bf16(1.0f + 3.0f / 256), 0x3f82);
    ck_assert(isnan(xfa_bf16_to_f32(xfa_f32_to_bf16(NAN))));
    ck_assert_float_eq(xfa_bf16_to_f32(0x4049), 3.140625f);
}
END_TEST

static Suite *reference_suite(void)
{
    Suite *s = suite_create("reference");
    TCase *tc = tcase_create("reference");
    tcase_add_test(tc, test_hand_worked);
    tcase_add_test(tc, test_empty_rows);
    tcase_add_test(tc, test_hand_worked_extras);
    tcase_add_loop_test(tc, test_against_naive, 0, 3);
    tcase_add_loop_test(tc, test_backward_finite_differences, 0, 6);
    tcase_add_test(tc, test_f16_conversion);
    tcase_add_test(tc, test_bf16_conversion);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return xfa_check_run(reference_suite(), 1); }
