/*
 * cuda_backward.c - xfa_attention_backward on CUDA: D_i = rowsum(dO * O) into
 * scratch, then dK/dV per K/V block and dQ per query block, either on the
 * tensor-core kernels (cuda/backward_mma.cuh: f16/bf16, head dims 64 and 128,
 * no window/softcap/ALiBi/bias) or on the generic ones (cuda/backward.cu:
 * everything else). Enqueued on the context's stream without waiting, like the
 * forward. Deterministic: every kernel owns what it writes (no atomics).
 *
 * The delta scratch is the caller's (params.scratch) or the context's own,
 * grown on the stream when a call needs more and kept between calls.
 */
#include "cuda_internal.h"

#include "backward_config.h"
#include "backward_launch.h"

#include <string.h>

/* What the generic kernels keep in shared memory: Q and dO (Br x (d+1) f32 each), K and V
 * (Bc x (d+1) f32 each), P and dS (Br x Bc f32 each), lse_i and D_i (Br f32 each); 8 threads
 * per row (the K/V kernel's rows are its Bc keys, so Bc * 8 must fit a block too). */
static const xfa_tile_layout generic_backward_layout = {
    .path = "generic-backward",
    .q_elem_bytes = 8,
    .kv_elem_bytes = 4,
    .s_elem_bytes = 8,
    .o_elem_bytes = 0,
    .row_pad = 1,
    .stages = 1,
    .row_state_bytes = 8,
    .br_multiple = 4,
    .bc_multiple = 8,
    .br_max = 64,
    .bc_max = 64,
    .threads_per_row = XFA_CUDA_BACKWARD_THREADS_PER_ROW,
};

/* The tensor-core kernels' tiles (cuda/backward_config.h) as layouts for the shared plan, each Br and
 * Bc its own multiple and maximum: the plan is that tile when it fits M and fails otherwise (then
 * the generic kernels run). dK/dV kernel: K, V resident (Bc rows), Q, dO and their lse, D_i in two
 * stages (Br rows). dQ kernel: Q, dO resident (Br rows), K, V in two stages (Bc rows). */
static xfa_tile_layout mma_kv_layout(uint32_t d)
{
    (void)d; /* the tiles' macros take d even where they do not depend on it yet */
    const xfa_tile_layout layout = {
        .path = "mma.sync-backward",
        .q_elem_bytes = 2 * 2 * 2,
        .kv_elem_bytes = 2,
        .s_elem_bytes = 0,
        .o_elem_bytes = 0,
        .row_pad = XFA_BWD_PAD,
        .stages = 1,
        .row_state_bytes = 2 * 2 * 4,
        .br_multiple = XFA_BWD_KV_BR(d),
        .bc_multiple = XFA_BWD_KV_BC(d),
        .br_max = XFA_BWD_KV_BR(d),
        .bc_max = XFA_BWD_KV_BC(d),
        .threads_per_row = XFA_BWD_KV_WARPS(d) * 32 / XFA_BWD_KV_BR(d),
    };
    return layout;
}

static xfa_tile_layout mma_q_layout(uint32_t d)
{
    (void)d;
    const xfa_tile_layout layout = {
        .path = "mma.sync-backward",
        .q_elem_bytes = 2 * 2,
        .kv_elem_bytes = 2,
        .s_elem_bytes = 0,
        .o_elem_bytes = 0,
        .row_pad = XFA_BWD_PAD,
        .stages = 2,
        .row_state_bytes = 0,
        .br_multiple = XFA_BWD_Q_BR(d),
        .bc_multiple = XFA_BWD_Q_BC(d),
        .br_max = XFA_BWD_Q_BR(d),
        .bc_max = XFA_BWD_Q_BC(d),
        .threads_per_row = XFA_BWD_Q_WARPS(d) * 32 / XFA_BWD_Q_BR(d),
    };
    return layout;
}

/* A window bound as the kernels take it: -1 when unlimited or wider than the problem (32-bit math). */
static int32_t window_bound(int64_t w, int64_t span) { return w < 0 || w > span ? -1 : (int32_t)w; }

static void copy_strides(int64_t dst[4], const xfa_tensor *t)
{
    for (int i = 0; i < 4; i++) dst[i] = t->stride[i];
}

static void fill_problem(const xfa_backward_args *a, float *delta, xfa_cuda_backward *p)
{
    const xfa_forward_args *f = &a->fwd;
    memset(p, 0, sizeof *p);
    p->q = xfa_cuda_view_ptr(&f->q);
    p->k = xfa_cuda_view_ptr(&f->k);
    p->v = xfa_cuda_view_ptr(&f->v);
    p->o = xfa_cuda_view_ptr(&f->o);
    p->d_o = xfa_cuda_view_ptr(&a->d_o);
    p->lse = xfa_cuda_view_ptr(&f->lse);
    p->delta = delta;
    p->dq = xfa_cuda_view_ptr(&a->dq);
    p->dk = xfa_cuda_view_ptr(&a->dk);
    p->dv = xfa_cuda_view_ptr(&a->dv);
    p->dtype = xfa_cuda_dtype_of(f->dtype);
    p->batch = (int32_t)f->batch;
    p->heads_q = (int32_t)f->heads_q;
    p->heads_kv = (int32_t)f->heads_kv;
    p->seqlen_q = (int32_t)f->seqlen_q;
    p->seqlen_k = (int32_t)f->seqlen_k;
    p->head_dim = (int32_t)f->head_dim;
    copy_strides(p->q_stride, &f->q);
    copy_strides(p->k_stride, &f->k);
    copy_strides(p->v_stride, &f->v);
    copy_strides(p->o_stride, &f->o);
    copy_strides(p->do_stride, &a->d_o);
    copy_strides(p->dq_stride, &a->dq);
    copy_strides(p->dk_stride, &a->dk);
    copy_strides(p->dv_stride, &a->dv);
    for (int i = 0; i < 3; i++) p->lse_stride[i] = f->lse.stride[i];
    if (f->has_alibi) {
        p->alibi = xfa_cuda_view_ptr(&f->alibi);
        p->alibi_stride[0] = f->alibi.shape[0] == 1 ? 0 : f->alibi.stride[0];
        p->alibi_stride[1] = f->alibi.stride[2];
    }
    if (f->has_bias) {
        p->bias = xfa_cuda_view_ptr(&f->bias);
        copy_strides(p->bias_stride, &f->bias);
        if (f->bias.shape[0] == 1) p->bias_stride[0] = 0;
        if (f->bias.shape[2] == 1) p->bias_stride[2] = 0;
        p->bias_f32 = f->bias.dtype == XFA_DTYPE_F32;
    }
    p->scale = f->scale;
    p->softcap = f->softcap;
    p->window_left = window_bound(f->window_left, f->seqlen_q + f->seqlen_k);
    p->window_right = window_bound(f->window_right, f->seqlen_q + f->seqlen_k);
}

/* The delta rows: the caller's scratch, or the context's, grown (stream-ordered) when too small. */
static xfa_status delta_memory(xfa_context *ctx, const xfa_backward_args *a, float **delta)
{
    cuda_context *cu = ctx->impl;
    if (a->scratch) {
        *delta = (float *)((char *)a->scratch->impl + a->scratch->native_offset + a->scratch_offset);
        return XFA_SUCCESS;
    }
    if (cu->backward_scratch_bytes < a->scratch_bytes) {
        void *grown = NULL;
        int pools = 0;
        cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, cu->device);
        const cudaError_t err = pools ? cudaMallocAsync(&grown, a->scratch_bytes, cu->stream)
                                      : cudaMalloc(&grown, a->scratch_bytes);
        if (err != cudaSuccess) return xfa_cuda_fail(ctx, "allocating the backward's scratch", err);
        xfa_cuda_backward_release(cu);
        cu->backward_scratch = grown;
        cu->backward_scratch_bytes = a->scratch_bytes;
        cu->backward_scratch_pooled = pools != 0;
    }
    *delta = cu->backward_scratch;
    return XFA_SUCCESS;
}

void xfa_cuda_backward_release(cuda_context *cu)
{
    if (!cu->backward_scratch) return;
    /* Stream-ordered: kernels enqueued before still read it. */
    if (cu->backward_scratch_pooled) cudaFreeAsync(cu->backward_scratch, cu->stream);
    else if (cudaStreamSynchronize(cu->stream) == cudaSuccess) cudaFree(cu->backward_scratch);
    cudaGetLastError();
    cu->backward_scratch = NULL;
    cu->backward_scratch_bytes = 0;
}

/* The tensor-core launcher for this call, or NULL: f16/bf16 on sm_80+ (XFA_CUDA_PATH=generic off),
 * a built head dim, the library's tensor-core plan (a caller's generic plan runs generic), views
 * the kernels can read, and no feature beyond causal and GQA. */
static xfa_cuda_result (*mma_launcher(const cuda_context *cu, const xfa_backward_args *a))(const xfa_cuda_backward *,
                                                                                          void *)
{
    const xfa_forward_args *f = &a->fwd;
    if (f->dtype == XFA_DTYPE_F32 || !xfa_cuda_mma_available(cu->cc_major)) return NULL;
    if (strcmp(f->plan.path, "mma.sync") && strcmp(f->plan.path, "wgmma")) return NULL;
    const bool window = f->window_left >= 0 || (f->window_right >= 0 && !f->causal);
    if (window || f->softcap > 0.0f || f->has_alibi || f->has_bias) return NULL;
    const xfa_tensor *views[8] = {&f->q, &f->k, &f->v, &f->o, &a->d_o, &a->dq, &a->dk, &a->dv};
    for (int i = 0; i < 8; i++)
        if (!xfa_cuda_view_16byte_rows(views[i])) return NULL;
    if (f->head_dim != 64 && f->head_dim != 128) return NULL;
    /* Both kernels' tiles must fit this device's shared memory (not so on sm_86/89 at d = 128). */
    const xfa_tile_layout kv = mma_kv_layout((uint32_t)f->head_dim), q = mma_q_layout((uint32_t)f->head_dim);
    xfa_plan plan;
    char msg[XFA_MESSAGE_SIZE];
    if (xfa_plan_make(&cu->limits, &kv, (uint32_t)f->head_dim, f->dtype, &plan, msg) ||
        xfa_plan_make(&cu->limits, &q, (uint32_t)f->head_dim, f->dtype, &plan, msg))
        return NULL;
    return f->head_dim == 64 ? xfa_cuda_backward_mma_d64 : xfa_cuda_backward_mma_d128;
}

/* Br, Bc of the generic kernels: the backward layout's plan, no larger than the call's plan (so a
 * caller's small tiles are honoured). */
static xfa_status generic_tiles(xfa_context *ctx, const xfa_forward_args *f, int32_t *Br, int32_t *Bc)
{
    const cuda_context *cu = ctx->impl;
    const xfa_tile_layout *L = &generic_backward_layout;
    xfa_plan plan;
    char msg[XFA_MESSAGE_SIZE];
    const xfa_status st = xfa_plan_make(&cu->limits, L, (uint32_t)f->head_dim, f->dtype, &plan, msg);
    if (st) return xfa_fail(ctx, st, "%s (CUDA generic backward on %s)", msg, ctx->info.name);
    uint32_t br = plan.Br < f->plan.Br ? plan.Br : f->plan.Br / L->br_multiple * L->br_multiple;
    uint32_t bc = plan.Bc < f->plan.Bc ? plan.Bc : f->plan.Bc / L->bc_multiple * L->bc_multiple;
    if (br < L->br_multiple) br = L->br_multiple;
    if (bc < L->bc_multiple) bc = L->bc_multiple;
    *Br = (int32_t)br;
    *Bc = (int32_t)bc;
    return XFA_SUCCESS;
}

xfa_status xfa_cuda_backward_enqueue(xfa_context *ctx, const xfa_backward_args *a)
{
    cuda_context *cu = ctx->impl;
    const xfa_forward_args *f = &a->fwd;
    if (f->seqlen_q + f->seqlen_k > INT32_MAX / 4) /* row + diagonal + window stays in 32 bits */
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT,
                        "seqlen_q %lld, seqlen_k %lld: the CUDA backward indexes rows in 32 bits",
                        (long long)f->seqlen_q, (long long)f->seqlen_k);
    xfa_status st = xfa_cuda_use_device(ctx);
    if (st) return st;
    float *delta = NULL;
    st = delta_memory(ctx, a, &delta);
    if (st) return st;
    xfa_cuda_backward p;
    fill_problem(a, delta, &p);

    xfa_cuda_result r = xfa_cuda_backward_delta(&p, cu->stream);
    if (r != 0) return xfa_cuda_fail(ctx, "launching the backward's delta kernel", (cudaError_t)r);
    xfa_cuda_result (*mma)(const xfa_cuda_backward *, void *) = mma_launcher(cu, a);
    r = mma ? mma(&p, cu->stream) : XFA_CUDA_NOT_HANDLED;
    if (r == XFA_CUDA_NOT_HANDLED) {
        if ((st = generic_tiles(ctx, f, &p.Br, &p.Bc))) return st;
        r = xfa_cuda_backward_generic(&p, cu->stream);
    }
    if (r == XFA_CUDA_NOT_HANDLED)
        return xfa_fail(ctx, XFA_ERROR_BACKEND_FAILURE, "no CUDA backward kernel handles head_dim %lld",
                        (long long)f->head_dim);
    if (r != 0) return xfa_cuda_fail(ctx, "launching the backward kernels", (cudaError_t)r);
    return XFA_SUCCESS;
}
