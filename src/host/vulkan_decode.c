/*
 * vulkan_decode.c - decoding against a KV cache and merging partial results
 * on Vulkan, as cpu_decode.c does: append the new tokens (kv_append.comp),
 * attend per split of the cache (flash_decode.comp), merge the splits by
 * their LSE (merge.comp); and xfa_merge_partials, one merge dispatch per
 * part. Everything is recorded into the context's command buffer and
 * submitted without waiting, like the forward call. seqlens and block_table
 * stay on the device: the shaders clamp them (xfa.h).
 */
#include "vulkan_internal.h"

#include <string.h>

/* Mirrors `Extra` in shaders/flash_decode.comp. */
typedef struct vk_decode_args {
    uint32_t q[5], k[5], v[5], o[5], lse[4];
    uint32_t len_base, len_sb;
    uint32_t bt_base, bt_sb, bt_sd;
    uint32_t alibi_base, alibi_sb, alibi_sh;
    uint32_t batch, seqlen_q, heads_q, group, capacity, page_size, num_pages, splits, chunk_align;
    uint32_t append;
    int32_t window_left;
    float softcap, scale_log2;
} vk_decode_args;

/* Mirrors `Extra` in shaders/kv_append.comp. */
typedef struct vk_append_args {
    uint32_t kn[5], vn[5], k[5], v[5];
    uint32_t len_base, len_sb;
    uint32_t bt_base, bt_sb, bt_sd;
    uint32_t batch, seqlen_q, heads_kv, head_dim, capacity, page_size, num_pages;
    uint32_t groups_x;
} vk_append_args;

/* Mirrors `Extra` in shaders/merge.comp. */
typedef struct vk_merge_args {
    uint32_t n, part_stride, part_lse_stride;
    uint32_t p[5], pl[4];
    uint32_t prev_base, prev_lse_base;
    uint32_t o[5], lse[4];
    uint32_t batch, seqlen, heads, head_dim;
    uint32_t groups_x;
} vk_merge_args;

_Static_assert(sizeof(vk_decode_args) <= VK_EXTRA_SLOT_BYTES, "decode arguments fit a slot");
_Static_assert(sizeof(vk_append_args) <= VK_EXTRA_SLOT_BYTES, "append arguments fit a slot");
_Static_assert(sizeof(vk_merge_args) <= VK_EXTRA_SLOT_BYTES, "merge arguments fit a slot");

/* Rows of a decode work-group at least (T invocations each). */
#define MIN_DECODE_ROWS 16
/* Keys per split below which splitting more does not pay. */
#define MIN_KEYS_PER_SPLIT 256
/* Compute units the split choice assumes where the device does not report them. */
#define ASSUMED_COMPUTE_UNITS 64

/* Scratch regions start at multiples of this: the largest minStorageBufferOffsetAlignment Vulkan allows. */
#define SCRATCH_ALIGN ((VkDeviceSize)256)

static VkDeviceSize align_up(VkDeviceSize x) { return (x + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN; }

/* Scratch results: `count` f32 rows of D (at base) and their LSEs (at base + lse_offset), in the
 * context's own scratch buffer or in the caller's (xfa_decode_params.scratch). */
typedef struct scratch_layout {
    VkBuffer buffer;
    VkDeviceSize base, o_bytes, lse_offset, lse_bytes, total;
} scratch_layout;

static scratch_layout layout_of(uint64_t count, int64_t D)
{
    scratch_layout l;
    l.buffer = VK_NULL_HANDLE;
    l.base = 0;
    l.o_bytes = (VkDeviceSize)count * (VkDeviceSize)D * 4;
    l.lse_offset = align_up(l.o_bytes);
    l.lse_bytes = (VkDeviceSize)count * 4;
    l.total = align_up(l.lse_offset + l.lse_bytes);
    return l;
}

static VkDescriptorBufferInfo scratch_range(const scratch_layout *l, VkDeviceSize offset, VkDeviceSize bytes)
{
    const VkDescriptorBufferInfo info = {l->buffer, l->base + offset, bytes};
    return info;
}

/* A 2-D grid of 64-invocation groups covering `elements` (x capped by the device). */
static xfa_status element_grid(xfa_context *ctx, uint64_t elements, uint32_t *gx, uint32_t *gy)
{
    const vk_context *vk = ctx->impl;
    const uint64_t groups = (elements + 63) / 64, max_x = vk->caps.props.limits.maxComputeWorkGroupCount[0];
    if (elements > UINT32_MAX)
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "%llu elements exceed the 32-bit indexing of the shaders",
                        (unsigned long long)elements);
    if (groups == 0) { /* nothing to cover: one idle group keeps the dispatch valid */
        *gx = *gy = 1;
        return XFA_SUCCESS;
    }
    *gx = (uint32_t)(groups < max_x ? groups : max_x);
    *gy = (uint32_t)((groups + *gx - 1) / *gx);
    return XFA_SUCCESS;
}

static void cache_args(const xfa_decode_args *a, uint32_t *capacity, uint32_t *page_size, uint32_t *num_pages)
{
    *capacity = (uint32_t)a->capacity;
    *page_size = (uint32_t)(a->paged ? a->page_size : 1);
    *num_pages = (uint32_t)(a->paged ? a->num_pages : 1);
}

/* Lengths and block table: descriptors 7 and 8, their bases and strides. */
static xfa_status table_args(xfa_context *ctx, const xfa_decode_args *a, VkDescriptorBufferInfo infos[VK_BINDINGS],
                             uint32_t *len_base, uint32_t *len_sb, uint32_t *bt_base, uint32_t *bt_sb, uint32_t *bt_sd)
{
    uint32_t s[4];
    xfa_status st = xfa_vk_describe(ctx, "cache.seqlens", &a->seqlens, &infos[7], len_base);
    if (st) return st;
    xfa_vk_strides(&a->seqlens, s, 4);
    *len_sb = s[0];
    if (!a->paged) return XFA_SUCCESS;
    if ((st = xfa_vk_describe(ctx, "cache.block_table", &a->block_table, &infos[8], bt_base))) return st;
    xfa_vk_strides(&a->block_table, s, 4);
    *bt_sb = s[0];
    *bt_sd = s[3];
    return XFA_SUCCESS;
}

static xfa_status record_append(xfa_context *ctx, const xfa_decode_args *a)
{
    vk_context *vk = ctx->impl;
    vk_append_args x;
    memset(&x, 0, sizeof x);
    VkDescriptorBufferInfo infos[VK_BINDINGS];
    xfa_vk_unused_bindings(vk, infos);
    xfa_status st;
    if ((st = xfa_vk_view_args(ctx, "k_new", &a->k_new, &infos[0], x.kn)) || (st = xfa_vk_view_args(ctx, "v_new", &a->v_new, &infos[1], x.vn)) ||
        (st = xfa_vk_view_args(ctx, "cache.k", &a->k_cache, &infos[2], x.k)) ||
        (st = xfa_vk_view_args(ctx, "cache.v", &a->v_cache, &infos[3], x.v)) ||
        (st = table_args(ctx, a, infos, &x.len_base, &x.len_sb, &x.bt_base, &x.bt_sb, &x.bt_sd)))
        return st;
    x.batch = (uint32_t)a->batch;
    x.seqlen_q = (uint32_t)a->seqlen_q;
    x.heads_kv = (uint32_t)a->heads_kv;
    x.head_dim = (uint32_t)a->head_dim;
    cache_args(a, &x.capacity, &x.page_size, &x.num_pages);
    uint32_t gx = 1, gy = 1;
    if ((st = element_grid(ctx, (uint64_t)(a->batch * a->seqlen_q * a->heads_kv * a->head_dim), &gx, &gy))) return st;
    x.groups_x = gx;
    const uint32_t spec[2] = {(uint32_t)a->dtype, a->paged};
    VkPipeline pipeline;
    if ((st = xfa_vk_pipeline_spec(ctx, VK_SHADER_APPEND, spec, 2, &pipeline)) ||
        (st = xfa_vk_write_extra(ctx, vk->cmd, &x, sizeof x, &infos[5])))
        return st;
    xfa_vk_bind_and_dispatch(vk, vk->cmd, pipeline, infos, gx, gy, 1);
    xfa_vk_compute_barrier(vk->cmd);
    return XFA_SUCCESS;
}

/* Shared memory of flash_decode.comp: Q, K, V rows of D + 4 floats, P, and a page number per key. */
static uint64_t decode_shared_bytes(uint32_t Br, uint32_t Bc, uint32_t D)
{
    return 4 * ((uint64_t)Br * (D + 4) + 2 * (uint64_t)Bc * (D + 4) + (uint64_t)Br * Bc + Bc);
}

/* The attention dispatch: DIRECT into o/lse with one split, else into the scratch partials. */
static xfa_status record_attention(xfa_context *ctx, const xfa_decode_args *a, int splits, const scratch_layout *parts)
{
    vk_context *vk = ctx->impl;
    const bool direct = splits == 1;
    xfa_plan plan;
    uint32_t br_multiple;
    xfa_status st = xfa_vk_scalar_plan(ctx, (uint32_t)a->head_dim, a->dtype, &plan, &br_multiple);
    if (st) return st;
    /* Rows are the Sq tokens of each query head of a KV head, no more than that (up to the
     * plan's Br), but at least MIN_DECODE_ROWS: rows past R compute nothing, yet their
     * invocations help load the K/V blocks, which is what decode spends its time on. */
    const uint64_t R = (uint64_t)(a->heads_q / a->heads_kv) * (uint64_t)a->seqlen_q;
    uint64_t want = R > MIN_DECODE_ROWS ? R : MIN_DECODE_ROWS;
    uint32_t Br = (uint32_t)((want + br_multiple - 1) / br_multiple * br_multiple);
    if (Br > plan.Br) Br = plan.Br;
    const VkPhysicalDeviceLimits *lim = &vk->caps.props.limits;
    /* The forward's footprint plus one page number per key (flash_decode.comp's key_batch). */
    uint32_t Bc = plan.Bc;
    while (decode_shared_bytes(Br, Bc, (uint32_t)a->head_dim) > lim->maxComputeSharedMemorySize) {
        if (Br > br_multiple) Br -= br_multiple;
        else if (Bc > 1) Bc--;
        else
            return xfa_fail(ctx, XFA_ERROR_LOCAL_MEMORY_TOO_SMALL, "no decode tile fits %u bytes of shared memory",
                            lim->maxComputeSharedMemorySize);
    }
    const uint32_t T = xfa_vk_threads_per_row(vk);
    const uint64_t row_blocks = (R + Br - 1) / Br, gx = row_blocks * (uint64_t)splits;
    if (gx > lim->maxComputeWorkGroupCount[0] || (uint64_t)a->heads_kv > lim->maxComputeWorkGroupCount[1] ||
        (uint64_t)a->batch > lim->maxComputeWorkGroupCount[2])
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "decode grid %llu x %lld x %lld exceeds maxComputeWorkGroupCount",
                        (unsigned long long)gx, (long long)a->heads_kv, (long long)a->batch);

    vk_decode_args x;
    memset(&x, 0, sizeof x);
    VkDescriptorBufferInfo infos[VK_BINDINGS];
    xfa_vk_unused_bindings(vk, infos);
    if ((st = xfa_vk_view_args(ctx, "q", &a->q, &infos[0], x.q)) || (st = xfa_vk_view_args(ctx, "cache.k", &a->k_cache, &infos[1], x.k)) ||
        (st = xfa_vk_view_args(ctx, "cache.v", &a->v_cache, &infos[2], x.v)) ||
        (st = table_args(ctx, a, infos, &x.len_base, &x.len_sb, &x.bt_base, &x.bt_sb, &x.bt_sd)))
        return st;
    if (direct) {
        if ((st = xfa_vk_view_args(ctx, "o", &a->o, &infos[3], x.o))) return st;
        if (a->has_lse) {
            uint32_t s[5];
            if ((st = xfa_vk_view_args(ctx, "lse", &a->lse, &infos[4], s))) return st;
            memcpy(x.lse, s, sizeof x.lse); /* base, then the strides of b, s, h */
        }
    } else {
        infos[3] = scratch_range(parts, 0, parts->o_bytes);
        infos[4] = scratch_range(parts, parts->lse_offset, parts->lse_bytes);
    }
    if (a->has_alibi) {
        uint32_t s[5];
        if ((st = xfa_vk_view_args(ctx, "alibi_slopes", &a->alibi, &infos[6], s))) return st;
        x.alibi_base = s[0];
        x.alibi_sb = s[1];
        x.alibi_sh = s[3];
    }
    x.batch = (uint32_t)a->batch;
    x.seqlen_q = (uint32_t)a->seqlen_q;
    x.heads_q = (uint32_t)a->heads_q;
    x.group = (uint32_t)(a->heads_q / a->heads_kv);
    cache_args(a, &x.capacity, &x.page_size, &x.num_pages);
    x.splits = (uint32_t)splits;
    x.chunk_align = Bc;
    x.append = a->append;
    x.window_left = (int32_t)a->window_left;
    x.softcap = a->softcap;
    x.scale_log2 = (float)(a->scale * 1.4426950408889634);

    const bool vec4 = xfa_vk_vec4_ok(x.q[0], x.q + 1) && xfa_vk_vec4_ok(x.k[0], x.k + 1) && xfa_vk_vec4_ok(x.v[0], x.v + 1);
    const uint32_t spec[15] = {(uint32_t)a->head_dim, Br, Bc, T, (uint32_t)a->dtype, a->causal,
                               direct && a->has_lse, 4, Br * T, a->window_left >= 0,
                               a->softcap > 0.0f, a->has_alibi, a->paged, direct, vec4};
    VkPipeline pipeline;
    if ((st = xfa_vk_pipeline_spec(ctx, VK_SHADER_DECODE, spec, 15, &pipeline)) ||
        (st = xfa_vk_write_extra(ctx, vk->cmd, &x, sizeof x, &infos[5])))
        return st;
    xfa_vk_bind_and_dispatch(vk, vk->cmd, pipeline, infos, (uint32_t)gx, (uint32_t)a->heads_kv, (uint32_t)a->batch);
    return XFA_SUCCESS;
}

/* One merge dispatch: `n` parts (part_stride apart) in parts/part_lse, plus the
 * previous result when prev_o is given, into o/lse (lse may be NULL). */
typedef struct merge_io {
    VkDescriptorBufferInfo parts, part_lse, prev_o, prev_lse, o, lse;
    uint32_t n, part_stride, part_lse_stride, part_dtype, out_dtype;
    uint32_t p[5], pl[4], o_view[5], lse_view[4];
    bool has_prev, has_lse;
} merge_io;

static xfa_status record_merge(xfa_context *ctx, const merge_io *io, int64_t B, int64_t S, int64_t H, int64_t D)
{
    vk_context *vk = ctx->impl;
    vk_merge_args x;
    memset(&x, 0, sizeof x);
    VkDescriptorBufferInfo infos[VK_BINDINGS];
    xfa_vk_unused_bindings(vk, infos);
    infos[0] = io->parts;
    infos[1] = io->part_lse;
    if (io->has_prev) {
        infos[2] = io->prev_o;
        infos[6] = io->prev_lse;
    }
    infos[3] = io->o;
    if (io->has_lse) infos[4] = io->lse;
    x.n = io->n;
    x.part_stride = io->part_stride;
    x.part_lse_stride = io->part_lse_stride;
    memcpy(x.p, io->p, sizeof x.p);
    memcpy(x.pl, io->pl, sizeof x.pl);
    memcpy(x.o, io->o_view, sizeof x.o);
    memcpy(x.lse, io->lse_view, sizeof x.lse);
    x.batch = (uint32_t)B;
    x.seqlen = (uint32_t)S;
    x.heads = (uint32_t)H;
    x.head_dim = (uint32_t)D;
    uint32_t gx = 1, gy = 1;
    xfa_status st = element_grid(ctx, (uint64_t)(B * S * H * D), &gx, &gy);
    if (st) return st;
    x.groups_x = gx;
    const uint32_t spec[4] = {io->part_dtype, io->out_dtype, io->has_prev, io->has_lse};
    VkPipeline pipeline;
    if ((st = xfa_vk_pipeline_spec(ctx, VK_SHADER_MERGE, spec, 4, &pipeline)) ||
        (st = xfa_vk_write_extra(ctx, vk->cmd, &x, sizeof x, &infos[5])))
        return st;
    xfa_vk_bind_and_dispatch(vk, vk->cmd, pipeline, infos, gx, gy, 1);
    return XFA_SUCCESS;
}

/* Compact f32 rows (b, s, h) of D: the layout of scratch results. */
static void compact_view(int64_t S, int64_t H, int64_t D, uint32_t o[5], uint32_t lse[4])
{
    o[0] = 0;
    o[1] = (uint32_t)(S * H * D);
    o[2] = (uint32_t)(H * D);
    o[3] = (uint32_t)D;
    o[4] = 1;
    lse[0] = 0;
    lse[1] = (uint32_t)(S * H);
    lse[2] = (uint32_t)H;
    lse[3] = 1;
}

static xfa_status record_decode(xfa_context *ctx, const xfa_decode_args *a)
{
    vk_context *vk = ctx->impl;
    xfa_status st;
    if (a->append && (st = record_append(ctx, a))) return st;
    /* The lengths are on the device: split for the capacity, the longest a sequence may be. */
    int splits = a->num_splits ? a->num_splits
                               : xfa_decode_choose_splits(ctx->info.compute_units ? ctx->info.compute_units
                                                                                   : ASSUMED_COMPUTE_UNITS,
                                                          a->batch, a->heads_kv, a->capacity, MIN_KEYS_PER_SPLIT);
    if (splits > a->max_splits) splits = a->max_splits; /* what a caller's scratch was sized for */
    const int64_t rows = a->batch * a->heads_q * a->seqlen_q, D = a->head_dim;
    scratch_layout parts = layout_of((uint64_t)splits * (uint64_t)rows, D);
    if (splits > 1 && a->scratch) {
        if ((st = xfa_vk_caller_scratch(ctx, a->scratch, a->scratch_offset, &parts.buffer, &parts.base))) return st;
        parts.lse_offset = a->scratch_lse_offset; /* the shared layout, sized for max_splits */
    } else if (splits > 1) {
        if ((st = xfa_vk_ensure_scratch(ctx, parts.total))) return st;
        parts.buffer = vk->scratch;
    }
    if ((st = record_attention(ctx, a, splits, &parts))) return st;
    if (splits == 1) return XFA_SUCCESS;
    xfa_vk_compute_barrier(vk->cmd);

    /* Partials are [split][b][h][i] rows: merge them into o (b, i, h). */
    merge_io io;
    memset(&io, 0, sizeof io);
    io.parts = scratch_range(&parts, 0, parts.o_bytes);
    io.part_lse = scratch_range(&parts, parts.lse_offset, parts.lse_bytes);
    io.n = (uint32_t)splits;
    io.part_stride = (uint32_t)(rows * D);
    io.part_lse_stride = (uint32_t)rows;
    io.part_dtype = XFA_DTYPE_F32;
    io.out_dtype = (uint32_t)a->dtype;
    const int64_t Sq = a->seqlen_q, Hq = a->heads_q;
    const uint32_t p[5] = {0, (uint32_t)(Hq * Sq * D), (uint32_t)D, (uint32_t)(Sq * D), 1};
    const uint32_t pl[4] = {0, (uint32_t)(Hq * Sq), 1, (uint32_t)Sq};
    memcpy(io.p, p, sizeof p);
    memcpy(io.pl, pl, sizeof pl);
    if ((st = xfa_vk_view_args(ctx, "o", &a->o, &io.o, io.o_view))) return st;
    io.has_lse = a->has_lse;
    if (a->has_lse) {
        uint32_t s[5];
        if ((st = xfa_vk_view_args(ctx, "lse", &a->lse, &io.lse, s))) return st;
        memcpy(io.lse_view, s, sizeof io.lse_view);
    }
    return record_merge(ctx, &io, a->batch, Sq, Hq, D);
}

static xfa_status record_merge_partials(xfa_context *ctx, const xfa_merge_args *a)
{
    vk_context *vk = ctx->impl;
    const int64_t B = a->batch, S = a->seqlen, H = a->heads, D = a->head_dim, rows = B * S * H;
    scratch_layout l = layout_of((uint64_t)rows, D);
    xfa_status st;
    /* Two scratch results, used in turn: one is read while the other is written. */
    if (a->n > 1 && (st = xfa_vk_ensure_scratch(ctx, 2 * l.total))) return st;
    l.buffer = vk->scratch;
    for (int i = 0; i < a->n; i++) {
        merge_io io;
        memset(&io, 0, sizeof io);
        uint32_t s[5];
        if ((st = xfa_vk_view_args(ctx, "o_parts[i]", &a->o_parts[i], &io.parts, io.p)) ||
            (st = xfa_vk_view_args(ctx, "lse_parts[i]", &a->lse_parts[i], &io.part_lse, s)))
            return st;
        memcpy(io.pl, s, sizeof io.pl);
        io.n = 1;
        io.part_dtype = (uint32_t)a->o_parts[i].dtype;
        const VkDeviceSize prev = (VkDeviceSize)((i + 1) % 2) * l.total, next = (VkDeviceSize)(i % 2) * l.total;
        io.has_prev = i > 0;
        if (io.has_prev) {
            io.prev_o = scratch_range(&l, prev, l.o_bytes);
            io.prev_lse = scratch_range(&l, prev + l.lse_offset, l.lse_bytes);
        }
        if (i == a->n - 1) {
            io.out_dtype = (uint32_t)a->o.dtype;
            if ((st = xfa_vk_view_args(ctx, "o", &a->o, &io.o, io.o_view))) return st;
            io.has_lse = a->has_lse;
            if (a->has_lse) {
                if ((st = xfa_vk_view_args(ctx, "lse", &a->lse, &io.lse, s))) return st;
                memcpy(io.lse_view, s, sizeof io.lse_view);
            }
        } else {
            io.out_dtype = XFA_DTYPE_F32;
            io.o = scratch_range(&l, next, l.o_bytes);
            io.lse = scratch_range(&l, next + l.lse_offset, l.lse_bytes);
            io.has_lse = true;
            compact_view(S, H, D, io.o_view, io.lse_view);
        }
        if ((st = record_merge(ctx, &io, B, S, H, D))) return st;
        if (i < a->n - 1) xfa_vk_compute_barrier(vk->cmd);
    }
    return XFA_SUCCESS;
}

/* Records with `record` into the context's command buffer and submits without waiting. */
static xfa_status run(xfa_context *ctx, xfa_status (*record)(xfa_context *, const void *), const void *args)
{
    vk_context *vk = ctx->impl;
    xfa_status st = xfa_vk_begin(ctx);
    if (st) return st;
    st = record(ctx, args);
    if (st) {
        vkEndCommandBuffer(vk->cmd); /* the next begin resets it */
        return st;
    }
    st = xfa_vk_submit(ctx, false);
    return st ? st : xfa_vk_check_validation(ctx);
}

static xfa_status record_decode_any(xfa_context *ctx, const void *args) { return record_decode(ctx, args); }
static xfa_status record_merge_any(xfa_context *ctx, const void *args) { return record_merge_partials(ctx, args); }

xfa_status xfa_vk_decode(xfa_context *ctx, const xfa_decode_args *a) { return run(ctx, record_decode_any, a); }
xfa_status xfa_vk_merge(xfa_context *ctx, const xfa_merge_args *a) { return run(ctx, record_merge_any, a); }
