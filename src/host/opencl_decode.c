/*
 * opencl_decode.c - decoding against a KV cache and merging partial results
 * on OpenCL, as cpu_decode.c does: append the new tokens, attend per split of
 * the cache, merge the splits by their LSE (cl/flash_decode.cl); and
 * xfa_merge_partials, one merge per part into a running result. Everything is
 * enqueued in order and returns without waiting, like the forward call.
 * seqlens and block_table stay on the device: the kernels clamp them (xfa.h).
 */
#include "opencl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char xfa_cl_flash_decode[];

/* Keys per split below which splitting more does not pay. */
#define MIN_KEYS_PER_SPLIT 256
/* Rows (token x query head of a KV head) per decode work-group at most: decode has few. */
#define DECODE_MAX_ROWS 16u
/* Work-items a decode work-group aims for (rows x work-items per row). */
#define DECODE_THREADS 128u
/* Local memory the decode kernel uses beyond the portable layout: the page of each key of a block. */
#define DECODE_EXTRA_LOCAL (8u * 64u)

enum { DEC_LSE = 1, DEC_ALIBI = 2, DEC_CAUSAL = 4, DEC_PAGED = 8, DEC_DIRECT = 16 };
enum { MERGE_PART_F32 = 1, MERGE_OUT_F32 = 2, MERGE_PREV = 4, MERGE_OUT_LSE = 8 };

static size_t align256(size_t x) { return (x + 255) / 256 * 256; }

/* More work-items per row pay where a work-group's idle lanes are idle hardware (GPUs); on a CPU
 * device (PoCL) they only repeat each row's exponentials (2x slower there), so they stay at the
 * layout's 8. XFA_OPENCL_DECODE_WIDE=1 forces them (the tests' way to run the GPU shape on PoCL). */
bool xfa_opencl_wide_decode_rows(const opencl_context *cl)
{
    const char *forced = getenv("XFA_OPENCL_DECODE_WIDE");
    if (forced && *forced) return strcmp(forced, "0") != 0;
    cl_device_type type = 0;
    return clGetDeviceInfo(cl->device, CL_DEVICE_TYPE, sizeof type, &type, NULL) == CL_SUCCESS &&
           (type & CL_DEVICE_TYPE_GPU) != 0;
}

/* The decode program's kernel `name` for (D, dtype) and a call of `rows` rows per KV head (Sq tokens
 * times the query heads of a group): Bc from the portable layout's plan; Br the call's rows, at most
 * DECODE_MAX_ROWS and the plan's Br, so no work-item pads a row that does not exist; and as many
 * work-items per row (8, 16 or 32: they divide every head dim) as keep the work-group near
 * DECODE_THREADS, so the few rows still occupy a full work-group's keys and dims. */
static xfa_status decode_kernel(xfa_context *ctx, int64_t D, xfa_dtype dtype, int64_t rows, const char *name,
                                cl_kernel *kernel, uint32_t *Br, uint32_t *threads)
{
    opencl_context *cl = ctx->impl;
    const xfa_tile_layout *L = &xfa_opencl_path_portable.layout;
    xfa_plan_limits lim = cl->limits;
    lim.local_mem_bytes = lim.local_mem_bytes > DECODE_EXTRA_LOCAL ? lim.local_mem_bytes - DECODE_EXTRA_LOCAL : 0;
    xfa_plan plan;
    char msg[XFA_MESSAGE_SIZE];
    xfa_status st = xfa_plan_make(&lim, L, (uint32_t)D, dtype, &plan, msg);
    if (st) return xfa_fail(ctx, st, "%s (OpenCL decode on %s)", msg, ctx->info.name);
    *Br = plan.Br < DECODE_MAX_ROWS ? plan.Br : DECODE_MAX_ROWS;
    if (rows >= 1 && rows < (int64_t)*Br) *Br = (uint32_t)rows;
    uint32_t T = L->threads_per_row;
    if (cl->wide_decode_rows)
        while (T < 32 && *Br * T * 2 <= DECODE_THREADS && *Br * T * 2 <= cl->limits.max_workgroup_size) T *= 2;
    *threads = T;
    char options[256];
    snprintf(options, sizeof options, "-cl-std=CL1.2 -DXFA_PATH=decode -DD=%u -DBR=%u -DBC=%u -DPAD=%u -DTHREADS_PER_ROW=%u -D%s",
             (unsigned)D, *Br, plan.Bc, L->row_pad, T, xfa_opencl_dtype_macro(dtype));
    return xfa_opencl_kernel_named(ctx, "decode kernels", xfa_cl_flash_decode, name, options, kernel, NULL);
}

static xfa_status merge_kernel(xfa_context *ctx, xfa_dtype dtype, cl_kernel *kernel)
{
    char options[128];
    snprintf(options, sizeof options, "-cl-std=CL1.2 -DXFA_PATH=merge -DXFA_MERGE_ONLY -D%s", xfa_opencl_dtype_macro(dtype));
    return xfa_opencl_kernel_named(ctx, "merge kernel", xfa_cl_flash_decode, "xfa_merge", options, kernel, NULL);
}

/* Sets the arguments in order; each call site lists (size, pointer) pairs. */
typedef struct arg_list {
    cl_kernel kernel;
    cl_uint next;
    cl_int err;
} arg_list;

static void arg(arg_list *l, size_t size, const void *value)
{
    l->err |= clSetKernelArg(l->kernel, l->next++, size, value);
}

#define ARG(l, x) arg((l), sizeof(x), &(x))

static xfa_status args_done(xfa_context *ctx, const arg_list *l, const char *what)
{
    return l->err != CL_SUCCESS ? xfa_fail(ctx, XFA_ERROR_BACKEND_FAILURE, "clSetKernelArg (%s) failed (%d)", what, l->err)
                                : XFA_SUCCESS;
}

/* Block-table view: strides of the sequence and the page index; zero when contiguous. */
static void table_args(const xfa_decode_args *a, cl_mem *bt, cl_ulong *bt_off, cl_long2 *bt_stride)
{
    *bt = xfa_opencl_mem(&a->seqlens);
    *bt_off = 0;
    bt_stride->s[0] = bt_stride->s[1] = 0;
    if (!a->paged) return;
    *bt = xfa_opencl_mem(&a->block_table);
    *bt_off = xfa_opencl_elem_offset(&a->block_table);
    bt_stride->s[0] = a->block_table.stride[0];
    bt_stride->s[1] = a->block_table.stride[3];
}

static xfa_status enqueue_append(xfa_context *ctx, const xfa_decode_args *a)
{
    cl_kernel kernel;
    uint32_t Br, T;
    xfa_status st = decode_kernel(ctx, a->head_dim, a->dtype, a->heads_q / a->heads_kv * a->seqlen_q, "xfa_kv_append", &kernel, &Br, &T);
    if (st) return st;
    const cl_mem kn = xfa_opencl_mem(&a->k_new), vn = xfa_opencl_mem(&a->v_new), kc = xfa_opencl_mem(&a->k_cache), vc = xfa_opencl_mem(&a->v_cache);
    const cl_mem lens = xfa_opencl_mem(&a->seqlens);
    cl_mem bt;
    cl_ulong bt_off;
    cl_long2 bt_stride;
    table_args(a, &bt, &bt_off, &bt_stride);
    const cl_ulong kn_off = xfa_opencl_elem_offset(&a->k_new), vn_off = xfa_opencl_elem_offset(&a->v_new);
    const cl_ulong k_off = xfa_opencl_elem_offset(&a->k_cache), v_off = xfa_opencl_elem_offset(&a->v_cache);
    const cl_ulong len_off = xfa_opencl_elem_offset(&a->seqlens);
    const cl_long4 kn_s = xfa_opencl_strides(&a->k_new), vn_s = xfa_opencl_strides(&a->v_new);
    const cl_long4 k_s = xfa_opencl_strides(&a->k_cache), v_s = xfa_opencl_strides(&a->v_cache);
    const cl_long len_s = a->seqlens.stride[0];
    const cl_int heads_kv = (cl_int)a->heads_kv, capacity = (cl_int)a->capacity;
    const cl_int page_size = (cl_int)(a->paged ? a->page_size : 1), num_pages = (cl_int)(a->paged ? a->num_pages : 1);
    const cl_int paged = a->paged;
    arg_list l = {kernel, 0, CL_SUCCESS};
    ARG(&l, kn); ARG(&l, vn); ARG(&l, kc); ARG(&l, vc); ARG(&l, lens); ARG(&l, bt);
    ARG(&l, kn_off); ARG(&l, vn_off); ARG(&l, k_off); ARG(&l, v_off); ARG(&l, len_off); ARG(&l, bt_off);
    ARG(&l, kn_s); ARG(&l, vn_s); ARG(&l, k_s); ARG(&l, v_s); ARG(&l, len_s); ARG(&l, bt_stride);
    ARG(&l, heads_kv); ARG(&l, capacity); ARG(&l, page_size); ARG(&l, num_pages); ARG(&l, paged);
    if ((st = args_done(ctx, &l, "append"))) return st;
    const size_t global[3] = {(size_t)a->head_dim, (size_t)(a->seqlen_q * a->heads_kv), (size_t)a->batch};
    return xfa_opencl_enqueue(ctx, "clEnqueueNDRangeKernel (KV append)", kernel, 3, global, NULL);
}

/* Where the partial results go: `mem` at element offsets part_off (O rows) and lse_off (LSEs). */
typedef struct partials {
    cl_mem mem;
    cl_ulong part_off, lse_off;
} partials;

static xfa_status enqueue_attention(xfa_context *ctx, const xfa_decode_args *a, int splits, const partials *p)
{
    cl_kernel kernel;
    uint32_t Br, T;
    xfa_status st = decode_kernel(ctx, a->head_dim, a->dtype, a->heads_q / a->heads_kv * a->seqlen_q, "xfa_flash_decode", &kernel, &Br, &T);
    if (st) return st;
    const bool direct = splits == 1;
    const cl_mem q = xfa_opencl_mem(&a->q), kc = xfa_opencl_mem(&a->k_cache), vc = xfa_opencl_mem(&a->v_cache), o = xfa_opencl_mem(&a->o);
    const cl_mem lse = a->has_lse ? xfa_opencl_mem(&a->lse) : q, lens = xfa_opencl_mem(&a->seqlens);
    const cl_mem parts = direct ? q : p->mem, alibi = a->has_alibi ? xfa_opencl_mem(&a->alibi) : q;
    cl_mem bt;
    cl_ulong bt_off;
    cl_long2 bt_stride;
    table_args(a, &bt, &bt_off, &bt_stride);
    const cl_ulong q_off = xfa_opencl_elem_offset(&a->q), k_off = xfa_opencl_elem_offset(&a->k_cache);
    const cl_ulong v_off = xfa_opencl_elem_offset(&a->v_cache), o_off = xfa_opencl_elem_offset(&a->o);
    const cl_ulong lse_off = a->has_lse ? xfa_opencl_elem_offset(&a->lse) : 0;
    const cl_ulong part_off = direct ? 0 : p->part_off, part_lse_off = direct ? 0 : p->lse_off;
    const cl_ulong len_off = xfa_opencl_elem_offset(&a->seqlens);
    const cl_ulong alibi_off = a->has_alibi ? xfa_opencl_elem_offset(&a->alibi) : 0;
    const cl_long4 none = {{0, 0, 0, 0}};
    const cl_long4 q_s = xfa_opencl_strides(&a->q), k_s = xfa_opencl_strides(&a->k_cache);
    const cl_long4 v_s = xfa_opencl_strides(&a->v_cache), o_s = xfa_opencl_strides(&a->o);
    const cl_long4 lse_s = a->has_lse ? xfa_opencl_strides(&a->lse) : none;
    const cl_long len_s = a->seqlens.stride[0];
    cl_long2 alibi_s = {{0, 0}};
    if (a->has_alibi) {
        alibi_s.s[0] = a->alibi.shape[0] == 1 ? 0 : a->alibi.stride[0];
        alibi_s.s[1] = a->alibi.stride[2];
    }
    const cl_int batch = (cl_int)a->batch, seqlen_q = (cl_int)a->seqlen_q, heads_q = (cl_int)a->heads_q;
    const cl_int group = (cl_int)(a->heads_q / a->heads_kv), capacity = (cl_int)a->capacity;
    const cl_int page_size = (cl_int)(a->paged ? a->page_size : 1), num_pages = (cl_int)(a->paged ? a->num_pages : 1);
    const cl_int n_splits = splits, appended = a->append ? (cl_int)a->seqlen_q : 0;
    const cl_int window_left = xfa_opencl_window(a->window_left, a->capacity + a->seqlen_q);
    const bool extras = a->softcap > 0.0f || a->has_alibi;
    const cl_float q_scale = (cl_float)(extras ? a->scale : a->scale * 1.4426950408889634), softcap = a->softcap;
    const cl_int flags = (a->has_lse ? DEC_LSE : 0) | (a->has_alibi ? DEC_ALIBI : 0) | (a->causal ? DEC_CAUSAL : 0) |
                         (a->paged ? DEC_PAGED : 0) | (direct ? DEC_DIRECT : 0);
    arg_list l = {kernel, 0, CL_SUCCESS};
    ARG(&l, q); ARG(&l, kc); ARG(&l, vc); ARG(&l, o); ARG(&l, lse); ARG(&l, parts); ARG(&l, parts);
    ARG(&l, lens); ARG(&l, bt); ARG(&l, alibi);
    ARG(&l, q_off); ARG(&l, k_off); ARG(&l, v_off); ARG(&l, o_off); ARG(&l, lse_off); ARG(&l, part_off);
    ARG(&l, part_lse_off); ARG(&l, len_off); ARG(&l, bt_off); ARG(&l, alibi_off);
    ARG(&l, q_s); ARG(&l, k_s); ARG(&l, v_s); ARG(&l, o_s); ARG(&l, lse_s); ARG(&l, len_s); ARG(&l, bt_stride);
    ARG(&l, alibi_s);
    ARG(&l, batch); ARG(&l, seqlen_q); ARG(&l, heads_q); ARG(&l, group); ARG(&l, capacity); ARG(&l, page_size);
    ARG(&l, num_pages); ARG(&l, n_splits); ARG(&l, appended); ARG(&l, window_left); ARG(&l, q_scale);
    ARG(&l, softcap); ARG(&l, flags);
    if ((st = args_done(ctx, &l, "decode"))) return st;
    /* Rows are the Sq tokens of each query head of a KV head; x covers row blocks times splits. */
    const size_t R = (size_t)(group * a->seqlen_q), row_blocks = (R + Br - 1) / Br, wg = (size_t)Br * T;
    const size_t global[3] = {row_blocks * (size_t)splits * wg, (size_t)a->heads_kv, (size_t)a->batch};
    const size_t local[3] = {wg, 1, 1};
    return xfa_opencl_enqueue(ctx, "clEnqueueNDRangeKernel (decode)", kernel, 3, global, local);
}

/* One merge launch: n parts (part_step elements apart) plus an optional running result, into out. */
typedef struct merge_io {
    cl_mem parts, part_lse, prev, out, out_lse;
    cl_ulong part_off, part_lse_off, prev_off, prev_lse_off, out_off, out_lse_off;
    cl_long4 p_stride, pl_stride, o_stride, ol_stride;
    cl_long part_step, part_lse_step;
    cl_int n, flags;
} merge_io;

static xfa_status enqueue_merge(xfa_context *ctx, xfa_dtype dtype, const merge_io *io, int64_t B, int64_t S,
                                int64_t H, int64_t D)
{
    cl_kernel kernel;
    xfa_status st = merge_kernel(ctx, dtype, &kernel);
    if (st) return st;
    const cl_int heads = (cl_int)H;
    arg_list l = {kernel, 0, CL_SUCCESS};
    ARG(&l, io->parts); ARG(&l, io->part_lse); ARG(&l, io->prev); ARG(&l, io->prev); ARG(&l, io->out);
    ARG(&l, io->out_lse);
    ARG(&l, io->part_off); ARG(&l, io->part_lse_off); ARG(&l, io->prev_off); ARG(&l, io->prev_lse_off);
    ARG(&l, io->out_off); ARG(&l, io->out_lse_off);
    ARG(&l, io->p_stride); ARG(&l, io->part_step); ARG(&l, io->pl_stride); ARG(&l, io->part_lse_step);
    ARG(&l, io->o_stride); ARG(&l, io->ol_stride); ARG(&l, io->n); ARG(&l, heads); ARG(&l, io->flags);
    if ((st = args_done(ctx, &l, "merge"))) return st;
    const size_t global[3] = {(size_t)D, (size_t)(S * H), (size_t)B};
    return xfa_opencl_enqueue(ctx, "clEnqueueNDRangeKernel (merge)", kernel, 3, global, NULL);
}

xfa_status xfa_opencl_decode(xfa_context *ctx, const xfa_decode_args *a)
{
    if (a->capacity + a->seqlen_q > INT32_MAX / 4 || a->batch * a->heads_q * a->seqlen_q > INT32_MAX)
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "a cache of %lld tokens, %lld query rows: the OpenCL decode "
                        "kernels index in 32 bits", (long long)a->capacity, (long long)(a->batch * a->heads_q * a->seqlen_q));
    xfa_status st;
    if (a->append && (st = enqueue_append(ctx, a))) return st;
    /* The lengths are on the device: split for the capacity, the longest a sequence may be. */
    int splits = a->num_splits ? a->num_splits
                               : xfa_decode_choose_splits(ctx->info.compute_units, a->batch, a->heads_kv, a->capacity,
                                                          MIN_KEYS_PER_SPLIT);
    if (splits > a->max_splits) splits = a->max_splits; /* what a caller's scratch was sized for */
    if (splits == 1) return enqueue_attention(ctx, a, 1, NULL);

    /* Partials [split][b][h][i] of D floats, then their LSEs: in the caller's scratch (its layout is
     * sized for max_splits: the LSEs start at scratch_lse_offset) or the context's. */
    const int64_t rows = a->batch * a->heads_q * a->seqlen_q, Sq = a->seqlen_q, Hq = a->heads_q, D = a->head_dim;
    partials p;
    if (a->scratch) {
        const size_t base = a->scratch->native_offset + a->scratch_offset;
        p.mem = (cl_mem)a->scratch->impl;
        p.part_off = base / 4;
        p.lse_off = (base + a->scratch_lse_offset) / 4;
    } else {
        const size_t lse_at = align256((size_t)(splits * rows * D) * 4);
        if ((st = xfa_opencl_scratch(ctx, lse_at + (size_t)(splits * rows) * 4, &p.mem))) return st;
        p.part_off = 0;
        p.lse_off = lse_at / 4;
    }
    if ((st = enqueue_attention(ctx, a, splits, &p))) return st;

    merge_io io;
    memset(&io, 0, sizeof io);
    io.parts = io.part_lse = io.prev = p.mem;
    io.part_off = p.part_off;
    io.part_lse_off = p.lse_off;
    io.p_stride = (cl_long4){{Hq * Sq * D, D, Sq * D, 1}};
    io.part_step = rows * D;
    io.pl_stride = (cl_long4){{Hq * Sq, 1, Sq, 0}};
    io.part_lse_step = rows;
    io.out = xfa_opencl_mem(&a->o);
    io.out_off = xfa_opencl_elem_offset(&a->o);
    io.o_stride = xfa_opencl_strides(&a->o);
    io.out_lse = a->has_lse ? xfa_opencl_mem(&a->lse) : p.mem;
    io.out_lse_off = a->has_lse ? xfa_opencl_elem_offset(&a->lse) : 0;
    io.ol_stride = a->has_lse ? xfa_opencl_strides(&a->lse) : (cl_long4){{0, 0, 0, 0}};
    io.n = splits;
    io.flags = MERGE_PART_F32 | (a->has_lse ? MERGE_OUT_LSE : 0);
    return enqueue_merge(ctx, a->dtype, &io, a->batch, Sq, Hq, D);
}

xfa_status xfa_opencl_merge(xfa_context *ctx, const xfa_merge_args *a)
{
    const int64_t B = a->batch, S = a->seqlen, H = a->heads, D = a->head_dim, rows = B * S * H;
    if (rows > INT32_MAX || D > INT32_MAX)
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "%lld rows of %lld: the OpenCL merge indexes in 32 bits",
                        (long long)rows, (long long)D);
    /* Two running results (compact f32 rows and LSEs), used in turn: one is read while the other is written. */
    const size_t o_bytes = align256((size_t)(rows * D) * 4), region = o_bytes + align256((size_t)rows * 4);
    cl_mem run = NULL;
    xfa_status st;
    if (a->n > 1 && (st = xfa_opencl_scratch(ctx, 2 * region, &run))) return st;
    const cl_long4 compact = {{S * H * D, H * D, D, 1}}, compact_lse = {{S * H, H, 1, 0}};
    for (int i = 0; i < a->n; i++) {
        const xfa_tensor *op = &a->o_parts[i], *lp = &a->lse_parts[i];
        merge_io io;
        memset(&io, 0, sizeof io);
        io.parts = xfa_opencl_mem(op);
        io.part_off = xfa_opencl_elem_offset(op);
        io.p_stride = xfa_opencl_strides(op);
        io.part_lse = xfa_opencl_mem(lp);
        io.part_lse_off = xfa_opencl_elem_offset(lp);
        io.pl_stride = xfa_opencl_strides(lp);
        io.n = 1;
        io.flags = op->dtype == XFA_DTYPE_F32 ? MERGE_PART_F32 : 0;
        const size_t prev = (size_t)((i + 1) % 2) * region, next = (size_t)(i % 2) * region;
        io.prev = run ? run : io.parts;
        if (i > 0) {
            io.flags |= MERGE_PREV;
            io.prev_off = prev / 4;
            io.prev_lse_off = (prev + o_bytes) / 4;
        }
        if (i == a->n - 1) {
            io.out = xfa_opencl_mem(&a->o);
            io.out_off = xfa_opencl_elem_offset(&a->o);
            io.o_stride = xfa_opencl_strides(&a->o);
            io.out_lse = a->has_lse ? xfa_opencl_mem(&a->lse) : io.parts;
            io.out_lse_off = a->has_lse ? xfa_opencl_elem_offset(&a->lse) : 0;
            io.ol_stride = a->has_lse ? xfa_opencl_strides(&a->lse) : (cl_long4){{0, 0, 0, 0}};
            io.flags |= a->has_lse ? MERGE_OUT_LSE : 0;
        } else {
            io.out = io.out_lse = run;
            io.out_off = next / 4;
            io.out_lse_off = (next + o_bytes) / 4;
            io.o_stride = compact;
            io.ol_stride = compact_lse;
            io.flags |= MERGE_OUT_F32 | MERGE_OUT_LSE;
        }
        /* the output's dtype picks the program: parts are f32 or that dtype */
        if ((st = enqueue_merge(ctx, a->o.dtype, &io, B, S, H, D))) return st;
    }
    return XFA_SUCCESS;
}
