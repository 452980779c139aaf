/* plan.c - derives tile sizes from local memory (see plan.h). */
#include "plan.h"

#include "internal.h"

#include <stdio.h>
#include <string.h>

uint64_t xfa_tile_local_bytes(const xfa_tile_layout *L, uint32_t Br, uint32_t Bc, uint32_t d)
{
    const uint64_t row = (uint64_t)d + L->row_pad;
    const uint64_t stages = L->stages ? L->stages : 1;
    uint64_t bytes = 0;
    bytes += (uint64_t)Br * row * L->q_elem_bytes;
    bytes += 2 * stages * (uint64_t)Bc * row * L->kv_elem_bytes;
    bytes += (uint64_t)Br * Bc * L->s_elem_bytes;
    bytes += (uint64_t)Br * row * L->o_elem_bytes;
    bytes += (uint64_t)Br * L->row_state_bytes;
    return bytes;
}

static uint32_t round_down_to(uint64_t value, uint32_t multiple)
{
    const uint64_t m = multiple ? multiple : 1;
    uint64_t r = value / m * m;
    if (r < m) r = m;
    return r > UINT32_MAX ? (uint32_t)(UINT32_MAX / m * m) : (uint32_t)r;
}

static uint32_t threads_per_row(const xfa_tile_layout *L)
{
    return L->threads_per_row ? L->threads_per_row : 1;
}

/* Largest Br the work-group limit allows, or 0 if not even one multiple fits. */
static uint32_t br_limit(const xfa_plan_limits *lim, const xfa_tile_layout *L)
{
    uint64_t by_threads = lim->max_workgroup_size / threads_per_row(L);
    uint32_t m = L->br_multiple ? L->br_multiple : 1;
    uint64_t r = by_threads / m * m;
    if (L->br_max && r > L->br_max) r = L->br_max / m * m;
    return (uint32_t)r;
}

static void fill_plan(const xfa_tile_layout *L, uint32_t Br, uint32_t Bc, uint32_t d, xfa_dtype dtype,
                      xfa_plan *plan)
{
    plan->Br = Br;
    plan->Bc = Bc;
    plan->head_dim = d;
    plan->dtype = dtype;
    plan->workgroup_size = Br * threads_per_row(L);
    plan->stages = L->stages ? L->stages : 1;
    plan->local_mem_bytes = xfa_tile_local_bytes(L, Br, Bc, d);
    snprintf(plan->path, sizeof plan->path, "%s", L->path ? L->path : "");
}

xfa_status xfa_plan_make(const xfa_plan_limits *lim, const xfa_tile_layout *L, uint32_t d, xfa_dtype dtype,
                         xfa_plan *plan, char *msg)
{
    if (!lim || !L || !plan) return xfa_msg(msg, XFA_ERROR_NULL_POINTER, "xfa_plan_make: NULL argument");
    if (d == 0) return xfa_msg(msg, XFA_ERROR_UNSUPPORTED_HEAD_DIM, "head_dim is 0");
    const uint32_t br_mult = L->br_multiple ? L->br_multiple : 1;
    const uint32_t bc_mult = L->bc_multiple ? L->bc_multiple : 1;
    const uint32_t br_cap = br_limit(lim, L);
    if (br_cap == 0)
        return xfa_msg(msg, XFA_ERROR_LOCAL_MEMORY_TOO_SMALL,
                       "work-group limit %u is below one row block (%u rows x %u work-items)",
                       lim->max_workgroup_size, br_mult, threads_per_row(L));

    /* FlashAttention: Bc = ceil(M / 4d) in elements, Br = min(Bc, d). */
    const uint32_t elem = L->kv_elem_bytes ? L->kv_elem_bytes : xfa_dtype_size(dtype);
    const uint64_t m_elems = lim->local_mem_bytes / elem;
    const uint64_t bc0 = (m_elems + 4ull * d - 1) / (4ull * d);
    const uint64_t br0 = bc0 < d ? bc0 : d;

    uint32_t Bc = round_down_to(bc0, bc_mult);
    uint32_t Br = round_down_to(br0, br_mult);
    if (L->bc_max && Bc > L->bc_max) Bc = round_down_to(L->bc_max, bc_mult);
    if (Br > br_cap) Br = br_cap;

    while (xfa_tile_local_bytes(L, Br, Bc, d) > lim->local_mem_bytes) {
        const bool can_br = Br > br_mult, can_bc = Bc > bc_mult;
        if (!can_br && !can_bc) {
            return xfa_msg(msg, XFA_ERROR_LOCAL_MEMORY_TOO_SMALL,
                           "local memory of %llu bytes is too small for head_dim %u (%s): the smallest "
                           "tile Br=%u Bc=%u needs %llu bytes",
                           (unsigned long long)lim->local_mem_bytes, d, xfa_dtype_name(dtype), Br, Bc,
                           (unsigned long long)xfa_tile_local_bytes(L, Br, Bc, d));
        }
        /* Shrink the larger side: keeps the tile as square as the multiples allow. */
        if (can_bc && (Bc >= Br || !can_br)) Bc -= bc_mult;
        else Br -= br_mult;
    }
    fill_plan(L, Br, Bc, d, dtype, plan);
    return XFA_SUCCESS;
}

xfa_status xfa_plan_fit(const xfa_plan_limits *lim, const xfa_tile_layout *L, xfa_plan *plan, char *msg)
{
    if (!lim || !L || !plan) return xfa_msg(msg, XFA_ERROR_NULL_POINTER, "xfa_plan_fit: NULL argument");
    const uint32_t br_mult = L->br_multiple ? L->br_multiple : 1;
    const uint32_t bc_mult = L->bc_multiple ? L->bc_multiple : 1;
    if (plan->Br == 0 || plan->Bc == 0 || plan->Br % br_mult || plan->Bc % bc_mult)
        return xfa_msg(msg, XFA_ERROR_INVALID_PLAN,
                       "plan Br=%u Bc=%u: this kernel needs Br a positive multiple of %u and Bc of %u",
                       plan->Br, plan->Bc, br_mult, bc_mult);
    if ((L->br_max && plan->Br > L->br_max) || (L->bc_max && plan->Bc > L->bc_max))
        return xfa_msg(msg, XFA_ERROR_INVALID_PLAN, "plan Br=%u Bc=%u exceeds this kernel's maximum Br=%u Bc=%u",
                       plan->Br, plan->Bc, L->br_max, L->bc_max);
    const uint32_t wg = plan->Br * threads_per_row(L);
    if (plan->workgroup_size && plan->workgroup_size != wg)
        return xfa_msg(msg, XFA_ERROR_INVALID_PLAN, "plan workgroup_size %u: this kernel uses Br x %u = %u",
                       plan->workgroup_size, threads_per_row(L), wg);
    if (wg > lim->max_workgroup_size)
        return xfa_msg(msg, XFA_ERROR_INVALID_PLAN, "plan needs %u work-items, the device allows %u", wg,
                       lim->max_workgroup_size);
    const uint64_t bytes = xfa_tile_local_bytes(L, plan->Br, plan->Bc, plan->head_dim);
    if (bytes > lim->local_mem_bytes)
        return xfa_msg(msg, XFA_ERROR_INVALID_PLAN, "plan Br=%u Bc=%u needs %llu bytes of local memory, the device has %llu",
                       plan->Br, plan->Bc, (unsigned long long)bytes, (unsigned long long)lim->local_mem_bytes);
    fill_plan(L, plan->Br, plan->Bc, plan->head_dim, plan->dtype, plan);
    return XFA_SUCCESS;
}
