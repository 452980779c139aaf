/* test_plan.c - the shared tiling plan against plans worked out by hand. */
#include "check_run.h"
#include "internal.h"
#include "plan.h"

#include <string.h>

/* A layout like the FlashAttention paper's: Q, K, V and the score tile in local memory, f32. */
static const xfa_tile_layout paper_layout = {
    .path = "test", .q_elem_bytes = 4, .kv_elem_bytes = 4, .s_elem_bytes = 4, .stages = 1,
    .br_multiple = 1, .bc_multiple = 1, .threads_per_row = 1,
};

START_TEST(test_fa_rule_48k_d64)
{
    /* M = 48 KiB = 12288 floats; Bc = ceil(12288 / 256) = 48; Br = min(48, 64) = 48.
     * Footprint: Q 48*64*4 + K,V 2*48*64*4 + S 48*48*4 = 12288 + 24576 + 9216 = 46080 <= 49152. */
    const xfa_plan_limits lim = {49152, 1024, 32};
    xfa_plan plan;
    char msg[XFA_MESSAGE_SIZE];
    ck_assert_int_eq(xfa_plan_make(&lim, &paper_layout, 64, XFA_DTYPE_F32, &plan, msg), XFA_SUCCESS);
    ck_assert_uint_eq(plan.Br, 48);
    ck_assert_uint_eq(plan.Bc, 48);
    ck_assert_uint_eq(plan.local_mem_bytes, 46080);
    ck_assert_uint_eq(plan.workgroup_size, 48);
    ck_assert_str_eq(plan.path, "test");
}
END_TEST

START_TEST(test_fa_rule_shrinks_to_fit)
{
    /* M = 48 KiB, d = 128: Bc = ceil(12288 / 512) = 24, Br = min(24, 128) = 24.
     * Q 24*128*4 = 12288, K,V 2*24*128*4 = 24576, S 24*24*4 = 2304: 39168 fits. */
    const xfa_plan_limits lim = {49152, 1024, 32};
    xfa_plan plan;
    char msg[XFA_MESSAGE_SIZE];
    ck_assert_int_eq(xfa_plan_make(&lim, &paper_layout, 128, XFA_DTYPE_F32, &plan, msg), XFA_SUCCESS);
    ck_assert_uint_eq(plan.Br, 24);
    ck_assert_uint_eq(plan.Bc, 24);
    ck_assert_uint_eq(plan.local_mem_bytes, 39168);

    /* M = 32 KiB, d = 256 with an acc tile too: Bc = ceil(8192/1024) = 8, Br = 8:
     * Q 8K + K,V 16K + S 256 + O 8K = 33024 > 32768, so Bc (the larger or equal side) drops to 7:
     * Q 8192 + K,V 14336 + S 224 + O 8192 = 30944. */
    xfa_tile_layout with_o = paper_layout;
    with_o.o_elem_bytes = 4;
    const xfa_plan_limits small = {32768, 1024, 32};
    ck_assert_int_eq(xfa_plan_make(&small, &with_o, 256, XFA_DTYPE_F32, &plan, msg), XFA_SUCCESS);
    ck_assert_uint_eq(plan.Br, 8);
    ck_assert_uint_eq(plan.Bc, 7);
    ck_assert_uint_eq(plan.local_mem_bytes, 30944);
}
END_TEST

START_TEST(test_rounding_to_multiples)
{
    /* f16 K/V tiles, multiples of 16 rows, padding 8, Q in registers, 4 work-items per row.
     * M = 48 KiB = 24576 halves; d = 128: Bc = ceil(24576/512) = 48, Br = min(48,128) = 48; both multiples of 16.
     * K,V: 2 * 48 * (128+8) * 2 = 26112; S f32 48*48*4 = 9216; total 35328 fits. Work-group 48*4 = 192. */
    const xfa_tile_layout L = {.path = "f16", .kv_elem_bytes = 2, .s_elem_bytes = 4, .row_pad = 8, .stages = 1,
                               .br_multiple = 16, .bc_multiple = 16, .threads_per_row = 4};
    const xfa_plan_limits lim = {49152, 1024, 32};
    xfa_plan plan;
    char msg[XFA_MESSAGE_SIZE];
    ck_assert_int_eq(xfa_plan_make(&lim, &L, 128, XFA_DTYPE_F16, &plan, msg), XFA_SUCCESS);
    ck_assert_uint_eq(plan.Br, 48);
    ck_assert_uint_eq(plan.Bc, 48);
    ck_assert_uint_eq(plan.local_mem_bytes, 35328);
    ck_assert_uint_eq(plan.workgroup_size, 192);

    /* The work-group limit caps Br: 128 work-items / 4 per row = 32 rows. */
    const xfa_plan_limits narrow = {49152, 128, 32};
    ck_assert_int_eq(xfa_plan_make(&narrow, &L, 128, XFA_DTYPE_F16, &plan, msg), XFA_SUCCESS);
    ck_assert_uint_eq(plan.Br, 32);
    ck_assert_uint_eq(plan.Bc, 48);

    /* 2 MiB (PoCL) at d = 32 would give Bc = 8192: clamped by bc_max, Br by d. */
    xfa_tile_layout capped = L;
    capped.bc_max = 64;
    const xfa_plan_limits big = {2u << 20, 4096, 8};
    ck_assert_int_eq(xfa_plan_make(&big, &capped, 32, XFA_DTYPE_F16, &plan, msg), XFA_SUCCESS);
    ck_assert_uint_eq(plan.Bc, 64);
    ck_assert_uint_eq(plan.Br, 32);
}
END_TEST

START_TEST(test_too_small)
{
    /* 1 KiB cannot hold even one 16-row f16 K and V tile of d = 256. */
    const xfa_tile_layout L = {.path = "f16", .kv_elem_bytes = 2, .s_elem_bytes = 4, .stages = 1,
                               .br_multiple = 16, .bc_multiple = 16, .threads_per_row = 1};
    const xfa_plan_limits lim = {1024, 1024, 32};
    xfa_plan plan;
    char msg[XFA_MESSAGE_SIZE] = "";
    ck_assert_int_eq(xfa_plan_make(&lim, &L, 256, XFA_DTYPE_F16, &plan, msg), XFA_ERROR_LOCAL_MEMORY_TOO_SMALL);
    ck_assert_ptr_nonnull(strstr(msg, "too small"));

    /* A work-group limit below one row block is the same kind of failure. */
    const xfa_plan_limits tiny_wg = {1 << 20, 8, 8};
    ck_assert_int_eq(xfa_plan_make(&tiny_wg, &L, 64, XFA_DTYPE_F16, &plan, msg), XFA_ERROR_LOCAL_MEMORY_TOO_SMALL);
}
END_TEST

START_TEST(test_fit_override)
{
    const xfa_plan_limits lim = {49152, 1024, 32};
    xfa_plan plan = {.Br = 16, .Bc = 32, .head_dim = 64, .dtype = XFA_DTYPE_F32};
    char msg[XFA_MESSAGE_SIZE];
    ck_assert_int_eq(xfa_plan_fit(&lim, &paper_layout, &plan, msg), XFA_SUCCESS);
    /* Q 16*64*4 + K,V 2*32*64*4 + S 16*32*4 = 4096 + 16384 + 2048 */
    ck_assert_uint_eq(plan.local_mem_bytes, 22528);

    plan.Br = 128; /* Q 32K + K,V 16K + S 16K = 64K > 48K */
    plan.workgroup_size = 0;
    ck_assert_int_eq(xfa_plan_fit(&lim, &paper_layout, &plan, msg), XFA_ERROR_INVALID_PLAN);

    const xfa_tile_layout by16 = {.kv_elem_bytes = 2, .stages = 1, .br_multiple = 16, .bc_multiple = 16,
                                  .threads_per_row = 1};
    xfa_plan odd = {.Br = 24, .Bc = 16, .head_dim = 64, .dtype = XFA_DTYPE_F16};
    ck_assert_int_eq(xfa_plan_fit(&lim, &by16, &odd, msg), XFA_ERROR_INVALID_PLAN);
    xfa_plan zero = {.Br = 0, .Bc = 16, .head_dim = 64, .dtype = XFA_DTYPE_F16};
    ck_assert_int_eq(xfa_plan_fit(&lim, &by16, &zero, msg), XFA_ERROR_INVALID_PLAN);
    xfa_plan wg = {.Br = 16, .Bc = 16, .head_dim = 64, .dtype = XFA_DTYPE_F16, .workgroup_size = 99};
    ck_assert_int_eq(xfa_plan_fit(&lim, &by16, &wg, msg), XFA_ERROR_INVALID_PLAN);
}
END_TEST

static Suite *plan_suite(void)
{
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, test_fa_rule_48k_d64);
    tcase_add_test(tc, test_fa_rule_shrinks_to_fit);
    tcase_add_test(tc, test_rounding_to_multiples);
    tcase_add_test(tc, test_too_small);
    tcase_add_test(tc, test_fit_override);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return xfa_check_run(plan_suite(), 1); }
