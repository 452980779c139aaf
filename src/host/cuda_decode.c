/*
 * cuda_decode.c - the CUDA backend's decode and merge slots: append the new
 * tokens, attend per split of the cache, merge the splits by their LSE
 * (cuda/decode*.cu behind cuda/decode_launch.h); and xfa_merge_partials.
 * Everything is enqueued on the context's stream and returns without waiting,
 * like the forward call. seqlens and block_table stay on the device: the
 * kernels clamp them (xfa.h).
 */
#include "alloc.h"
#include "cuda_internal.h"

#include "decode_launch.h"

#include <string.h>

/* Keys per split below which splitting more does not pay (xfa_decode_choose_splits). */
#define MIN_KEYS_PER_SPLIT 64

static size_t align256(size_t x) { return (x + 255) / 256 * 256; }


static xfa_status launched(xfa_context *ctx, xfa_cuda_result r, const char *what)
{
    if (r == 0) return XFA_SUCCESS;
    if (r == XFA_CUDA_NOT_HANDLED) return xfa_fail(ctx, XFA_ERROR_BACKEND_FAILURE, "no CUDA kernel handles %s", what);
    return xfa_cuda_fail(ctx, what, (cudaError_t)r);
}

/* The context's own scratch, at least `bytes`: kept and grown, never allocated per call. The old
 * one may still be read by kernels in flight, so the stream drains before it is freed. */
static xfa_status context_scratch(xfa_context *ctx, size_t bytes, void **ptr)
{
    cuda_context *cu = ctx->impl;
    if (cu->decode_scratch_bytes < bytes) {
        if (cu->decode_scratch) {
            cudaError_t err = cudaStreamSynchronize(cu->stream);
            if (err != cudaSuccess) return xfa_cuda_fail(ctx, "cudaStreamSynchronize (growing the decode scratch)", err);
            cudaFree(cu->decode_scratch);
            cu->decode_scratch = NULL;
            cu->decode_scratch_bytes = 0;
        }
        const size_t grown = align256(bytes + bytes / 4); /* headroom, so slowly growing calls rarely reallocate */
        cudaError_t err = cudaMalloc(&cu->decode_scratch, grown);
        if (err != cudaSuccess) {
            cu->decode_scratch = NULL;
            return xfa_cuda_fail(ctx, "cudaMalloc (decode scratch)", err);
        }
        cu->decode_scratch_bytes = grown;
    }
    *ptr = cu->decode_scratch;
    return XFA_SUCCESS;
}

void xfa_cuda_decode_scratch_free(cuda_context *cu)
{
    if (cu->decode_scratch) cudaFree(cu->decode_scratch);
    cu->decode_scratch = NULL;
    cu->decode_scratch_bytes = 0;
}

static void copy_strides(const xfa_tensor *t, int64_t *stride, int n)
{
    for (int i = 0; i < n; i++) stride[i] = t->stride[i];
}

/*
 * Splits: xfa_decode_choose_splits from the SM count (enough work-groups to fill the SMs), then,
 * up to twice that, the count whose work-groups fill the last wave of resident work-groups best:
 * at batch 32 x 8 KV heads, 3 splits would be 1.45 waves of 528 (the second half empty), 4 are 1.94.
 */
static int choose_splits(const xfa_context *ctx, const xfa_decode_args *a, int64_t row_blocks)
{
    const int64_t sms = ctx->info.compute_units ? ctx->info.compute_units : 1;
    const int64_t slots = sms * XFA_CUDA_DECODE_BLOCKS_PER_SM, groups = a->batch * a->heads_kv * row_blocks;
    const int s0 = xfa_decode_choose_splits((uint32_t)sms, a->batch, a->heads_kv * row_blocks, a->capacity,
                                            MIN_KEYS_PER_SPLIT);
    const int64_t by_length = (a->capacity + MIN_KEYS_PER_SPLIT - 1) / MIN_KEYS_PER_SPLIT;
    int best = s0;
    double best_fill = 0.0;
    for (int s = s0; s <= 2 * s0 && s <= by_length && s <= a->max_splits; s++) {
        const int64_t blocks = groups * s, waves = (blocks + slots - 1) / slots;
        const double fill = (double)blocks / (double)(waves * slots);
        if (fill > best_fill + 1e-9) {
            best = s;
            best_fill = fill;
        }
    }
    return best;
}

xfa_status xfa_cuda_decode(xfa_context *ctx, const xfa_decode_args *a)
{
    const int64_t group = a->heads_q / a->heads_kv, row_blocks = (group * a->seqlen_q + XFA_CUDA_DECODE_ROWS - 1) /
                                                                 XFA_CUDA_DECODE_ROWS;
    if (a->capacity + a->seqlen_q > INT32_MAX / 4 || a->batch * a->heads_q * a->seqlen_q > INT32_MAX ||
        a->batch > 65535 || a->heads_q * a->seqlen_q * 1024 > INT32_MAX || (a->paged && a->num_pages > INT32_MAX))
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "a cache of %lld tokens, %lld sequences, %lld KV heads: the CUDA "
                        "decode kernels index tokens in 32 bits and sequences and heads in grid dimensions",
                        (long long)a->capacity, (long long)a->batch, (long long)a->heads_kv);
    const cuda_context *cu = ctx->impl;
    xfa_status st = xfa_cuda_use_device(ctx);
    if (st) return st;

    xfa_cuda_decode_problem p;
    memset(&p, 0, sizeof p);
    p.q = xfa_cuda_view_ptr(&a->q);
    p.o = xfa_cuda_view_ptr(&a->o);
    p.lse = a->has_lse ? xfa_cuda_view_ptr(&a->lse) : NULL;
    p.k_cache = xfa_cuda_view_ptr(&a->k_cache);
    p.v_cache = xfa_cuda_view_ptr(&a->v_cache);
    p.seqlens = xfa_cuda_view_ptr(&a->seqlens);
    p.block_table = a->paged ? xfa_cuda_view_ptr(&a->block_table) : NULL;
    p.alibi = a->has_alibi ? xfa_cuda_view_ptr(&a->alibi) : NULL;
    p.dtype = xfa_cuda_dtype_of(a->dtype);
    p.batch = (int32_t)a->batch;
    p.seqlen_q = (int32_t)a->seqlen_q;
    p.heads_q = (int32_t)a->heads_q;
    p.heads_kv = (int32_t)a->heads_kv;
    p.head_dim = (int32_t)a->head_dim;
    p.capacity = (int32_t)a->capacity;
    p.page_size = a->paged ? (int32_t)a->page_size : 1;
    p.page_shift = -1;
    for (int s = 0; s < 31; s++)
        if ((int64_t)1 << s == p.page_size) p.page_shift = s;
    p.num_pages = a->paged ? (int32_t)a->num_pages : 1;
    p.appended = a->append ? (int32_t)a->seqlen_q : 0;
    /* a window wider than any sequence limits nothing */
    p.window_left = a->window_left < 0 || a->window_left > a->capacity + a->seqlen_q ? -1 : (int32_t)a->window_left;
    p.causal = a->causal;
    const bool extras = a->softcap > 0.0f || a->has_alibi;
    p.q_scale = extras ? a->scale : (float)(a->scale * 1.4426950408889634);
    p.softcap = a->softcap;
    copy_strides(&a->q, p.q_stride, 4);
    copy_strides(&a->o, p.o_stride, 4);
    copy_strides(&a->k_cache, p.k_stride, 4);
    copy_strides(&a->v_cache, p.v_stride, 4);
    if (a->has_lse) copy_strides(&a->lse, p.lse_stride, 3);
    p.seqlens_stride = a->seqlens.stride[0];
    if (a->paged) {
        p.block_table_stride[0] = a->block_table.stride[0];
        p.block_table_stride[1] = a->block_table.stride[3];
    }
    if (a->has_alibi) {
        p.alibi_stride[0] = a->alibi.shape[0] == 1 ? 0 : a->alibi.stride[0];
        p.alibi_stride[1] = a->alibi.stride[2];
    }
    p.vector_kv = xfa_cuda_view_16byte_rows(&a->k_cache) && xfa_cuda_view_16byte_rows(&a->v_cache);

    if (a->append) {
        p.k_new = xfa_cuda_view_ptr(&a->k_new);
        p.v_new = xfa_cuda_view_ptr(&a->v_new);
        copy_strides(&a->k_new, p.k_new_stride, 4);
        copy_strides(&a->v_new, p.v_new_stride, 4);
        if ((st = launched(ctx, xfa_cuda_decode_append(&p, cu->stream), "the KV append"))) return st;
    }

    /* The lengths are on the device: split for the capacity, the longest a sequence may be. */
    int splits = a->num_splits ? a->num_splits : choose_splits(ctx, a, row_blocks);
    if (splits > a->max_splits) splits = a->max_splits; /* what a caller's scratch was sized for */
    p.splits = splits;
    if (splits == 1) return launched(ctx, xfa_cuda_decode_attention(&p, cu->stream), "the decode attention");

    /* Partials [split][b][h][i] of D floats, then their LSEs: in the caller's scratch (laid out for
     * max_splits: the LSEs start at scratch_lse_offset) or the context's. */
    const int64_t rows = a->batch * a->heads_q * a->seqlen_q, Sq = a->seqlen_q, Hq = a->heads_q, D = a->head_dim;
    char *scratch;
    size_t lse_at;
    if (a->scratch) {
        scratch = (char *)a->scratch->impl + a->scratch->native_offset + a->scratch_offset;
        lse_at = a->scratch_lse_offset;
    } else {
        lse_at = align256((size_t)(splits * rows * D) * 4);
        void *own;
        if ((st = context_scratch(ctx, lse_at + (size_t)(splits * rows) * 4, &own))) return st;
        scratch = own;
    }
    p.part_o = (float *)scratch;
    p.part_lse = (float *)(scratch + lse_at);
    if ((st = launched(ctx, xfa_cuda_decode_attention(&p, cu->stream), "the decode attention"))) return st;

    xfa_cuda_merge_problem m;
    memset(&m, 0, sizeof m);
    m.n = splits;
    m.strided = 1;
    m.o_step = rows * D;
    m.lse_step = rows;
    m.parts[0].o = p.part_o;
    m.parts[0].lse = p.part_lse;
    const int64_t part_stride[4] = {Hq * Sq * D, D, Sq * D, 1}, part_lse_stride[3] = {Hq * Sq, 1, Sq};
    memcpy(m.parts[0].o_stride, part_stride, sizeof part_stride);
    memcpy(m.parts[0].lse_stride, part_lse_stride, sizeof part_lse_stride);
    m.parts_f32 = 1;
    m.out = p.o;
    copy_strides(&a->o, m.out_stride, 4);
    m.out_lse = p.lse;
    if (a->has_lse) copy_strides(&a->lse, m.out_lse_stride, 3);
    m.dtype = p.dtype;
    m.batch = p.batch;
    m.seqlen = p.seqlen_q;
    m.heads = p.heads_q;
    m.head_dim = p.head_dim;
    return launched(ctx, xfa_cuda_merge(&m, cu->stream), "the decode merge");
}

xfa_status xfa_cuda_merge_partials(xfa_context *ctx, const xfa_merge_args *a)
{
    const int64_t B = a->batch, S = a->seqlen, H = a->heads, D = a->head_dim, rows = B * S * H;
    if (rows > INT32_MAX || D > 256)
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "%lld rows of %lld: the CUDA merge indexes rows in 32 bits",
                        (long long)rows, (long long)D);
    const cuda_context *cu = ctx->impl;
    xfa_status st = xfa_cuda_use_device(ctx);
    if (st) return st;
    /* A launch takes up to XFA_CUDA_MERGE_MAX_PARTS parts of one kind (f32 or the output's dtype).
     * With more launches, two running results (compact f32 rows and LSEs) are used in turn, one
     * read while the other is written. */
    bool mixed = false;
    for (int i = 1; i < a->n; i++) mixed = mixed || (a->o_parts[i].dtype == XFA_DTYPE_F32) != (a->o_parts[0].dtype == XFA_DTYPE_F32);
    const size_t o_bytes = align256((size_t)(rows * D) * 4), region = o_bytes + align256((size_t)rows * 4);
    char *run = NULL;
    if (a->n > XFA_CUDA_MERGE_MAX_PARTS || mixed) {
        void *own;
        if ((st = context_scratch(ctx, 2 * region, &own))) return st;
        run = own;
    }
    const int64_t compact[4] = {S * H * D, H * D, D, 1}, compact_lse[3] = {S * H, H, 1};
    for (int first = 0, launch = 0; first < a->n; launch++) {
        xfa_cuda_merge_problem m;
        memset(&m, 0, sizeof m);
        m.parts_f32 = a->o_parts[first].dtype == XFA_DTYPE_F32;
        while (m.n < XFA_CUDA_MERGE_MAX_PARTS && first + m.n < a->n &&
               (a->o_parts[first + m.n].dtype == XFA_DTYPE_F32) == m.parts_f32) {
            const xfa_tensor *op = &a->o_parts[first + m.n], *lp = &a->lse_parts[first + m.n];
            m.parts[m.n].o = xfa_cuda_view_ptr(op);
            m.parts[m.n].lse = xfa_cuda_view_ptr(lp);
            copy_strides(op, m.parts[m.n].o_stride, 4);
            copy_strides(lp, m.parts[m.n].lse_stride, 3);
            m.n++;
        }
        if (launch > 0) { /* run is set: a second launch only happens when it was allocated */
            const char *prev = run + (size_t)((launch + 1) % 2) * region;
            m.prev_o = (const float *)prev;
            m.prev_lse = (const float *)(prev + o_bytes);
        }
        first += m.n;
        if (first >= a->n) {
            m.out = xfa_cuda_view_ptr(&a->o);
            copy_strides(&a->o, m.out_stride, 4);
            m.out_lse = a->has_lse ? xfa_cuda_view_ptr(&a->lse) : NULL;
            if (a->has_lse) copy_strides(&a->lse, m.out_lse_stride, 3);
        } else {
            char *next = run + (size_t)(launch % 2) * region;
            m.out = next;
            memcpy(m.out_stride, compact, sizeof compact);
            m.out_f32 = 1;
            m.out_lse = (float *)(next + o_bytes);
            memcpy(m.out_lse_stride, compact_lse, sizeof compact_lse);
        }
        m.dtype = xfa_cuda_dtype_of(a->o.dtype);
        m.batch = (int32_t)B;
        m.seqlen = (int32_t)S;
        m.heads = (int32_t)H;
        m.head_dim = (int32_t)D;
        if ((st = launched(ctx, xfa_cuda_merge(&m, cu->stream), "the merge"))) return st;
    }
    return XFA_SUCCESS;
}
