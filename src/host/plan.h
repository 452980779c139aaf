/*
 * plan.h - the shared tiling plan: Br, Bc and the work-group size from the
 * device's local memory M, the head dim and the dtype.
 *
 * Each kernel describes what it keeps in local memory once, in an
 * xfa_tile_layout; the plan sizes tiles with that description and the kernel
 * receives Br, Bc (and the padding) as build options or specialization
 * constants, so host and kernel never disagree about the footprint.
 */
#ifndef XFA_PLAN_H
#define XFA_PLAN_H

#include "xfa.h"

/* What the device allows a work-group. */
typedef struct xfa_plan_limits {
    uint64_t local_mem_bytes;    /* M */
    uint32_t max_workgroup_size;
    uint32_t subgroup_size;
} xfa_plan_limits;

/* What one kernel keeps in local memory per work-group, and how it maps rows to work-items. */
typedef struct xfa_tile_layout {
    const char *path;             /* kernel path name, copied into the plan */
    uint32_t q_elem_bytes;        /* bytes per element of the Br x d Q tile (0: Q lives in registers) */
    uint32_t kv_elem_bytes;       /* bytes per element of each Bc x d K and V tile */
    uint32_t s_elem_bytes;        /* bytes per element of the Br x Bc score tile (0: in registers) */
    uint32_t o_elem_bytes;        /* bytes per element of a Br x d output tile (0: acc in registers) */
    uint32_t row_pad;             /* elements added to each d-long row (bank conflicts) */
    uint32_t stages;              /* K/V blocks resident at once (>= 1) */
    uint32_t row_state_bytes;     /* per query row: m_i, l_i and the like */
    uint32_t br_multiple;         /* Br is a multiple of this */
    uint32_t bc_multiple;         /* Bc is a multiple of this */
    uint32_t br_max, bc_max;      /* 0: no limit */
    uint32_t threads_per_row;     /* work-items per query row: work-group = Br * this */
} xfa_tile_layout;

/* Bytes of local memory a work-group of this layout needs for (Br, Bc, d). */
uint64_t xfa_tile_local_bytes(const xfa_tile_layout *layout, uint32_t Br, uint32_t Bc, uint32_t head_dim);

/*
 * FlashAttention's rule, then fitted: Bc = ceil(M / (4 d)) elements of the K/V
 * dtype, Br = min(Bc, d); each rounded down to its multiple and clamped to the
 * layout's maximum and the work-group limit; then, while the footprint exceeds
 * M, the larger of Br and Bc shrinks by one multiple. Fails with
 * XFA_ERROR_LOCAL_MEMORY_TOO_SMALL (message in msg) when even the smallest tile
 * does not fit.
 */
xfa_status xfa_plan_make(const xfa_plan_limits *limits, const xfa_tile_layout *layout,
                         uint32_t head_dim, xfa_dtype dtype, xfa_plan *plan, char *msg);

/* Checks a caller's plan (Br, Bc, and workgroup_size if nonzero) against the
 * layout and limits; fills the derived fields. XFA_ERROR_INVALID_PLAN on misfit. */
xfa_status xfa_plan_fit(const xfa_plan_limits *limits, const xfa_tile_layout *layout,
                        xfa_plan *plan, char *msg);

#endif /* XFA_PLAN_H */
