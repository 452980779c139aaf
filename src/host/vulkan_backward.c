/*
 * vulkan_backward.c - xfa_attention_backward on Vulkan: three dispatches of
 * flash_backward.comp (delta = rowsum(dO * O) into scratch, then dK/dV per
 * K/V block, then dQ per query block), recorded into the context's command
 * buffer and submitted without waiting. Tiles come from the scalar path's
 * plan: the K/V pass stages Br rows of Q and dO, the Q pass Bc rows of K and
 * V, both within the forward's footprint.
 */
#include "vulkan_internal.h"

#include <string.h>

/* Mirrors `Extra` in shaders/flash_backward.comp. */
typedef struct vk_backward_args {
    uint32_t q[5], k[5], v[5], o[5], d_o[5], dq[5], dk[5], dv[5];
    uint32_t lse[4];
    uint32_t alibi_base, alibi_sb, alibi_sh;
    uint32_t bias_base, bias_sb, bias_ss, bias_sh, bias_sd;
    uint32_t batch, seqlen_q, seqlen_k, heads_q, group;
    int32_t window_left, window_right;
    float softcap, scale;
} vk_backward_args;

_Static_assert(sizeof(vk_backward_args) <= VK_EXTRA_SLOT_BYTES, "backward arguments fit a slot");

enum { MODE_DELTA = 0, MODE_KV = 1, MODE_Q = 2 };

static xfa_status record_backward(xfa_context *ctx, const xfa_backward_args *a)
{
    vk_context *vk = ctx->impl;
    const xfa_forward_args *f = &a->fwd;
    const VkPhysicalDeviceLimits *lim = &vk->caps.props.limits;
    xfa_plan plan;
    uint32_t brm;
    xfa_status st = xfa_vk_scalar_plan(ctx, (uint32_t)f->head_dim, f->dtype, &plan, &brm);
    if (st) return st;
    const uint32_t T = xfa_vk_threads_per_row(vk);
    /* The K/V pass has T invocations per key row: Bc rounded to whole subgroups. */
    uint32_t Bk = plan.Bc / brm * brm;
    const uint32_t max_wg = lim->maxComputeWorkGroupInvocations < lim->maxComputeWorkGroupSize[0]
                                ? lim->maxComputeWorkGroupInvocations
                                : lim->maxComputeWorkGroupSize[0];
    while (Bk > brm && Bk * T > max_wg) Bk -= brm;
    if (Bk < brm) Bk = brm;

    vk_backward_args x;
    memset(&x, 0, sizeof x);
    VkDescriptorBufferInfo infos[VK_BINDINGS];
    xfa_vk_unused_bindings(vk, infos);
    uint32_t lse[5], s[5];
    if ((st = xfa_vk_view_args(ctx, "q", &f->q, &infos[0], x.q)) || (st = xfa_vk_view_args(ctx, "k", &f->k, &infos[1], x.k)) ||
        (st = xfa_vk_view_args(ctx, "v", &f->v, &infos[2], x.v)) || (st = xfa_vk_view_args(ctx, "o", &f->o, &infos[3], x.o)) ||
        (st = xfa_vk_view_args(ctx, "lse", &f->lse, &infos[4], lse)) ||
        (st = xfa_vk_view_args(ctx, "d_o", &a->d_o, &infos[8], x.d_o)) ||
        (st = xfa_vk_view_args(ctx, "dq", &a->dq, &infos[9], x.dq)) ||
        (st = xfa_vk_view_args(ctx, "dk", &a->dk, &infos[10], x.dk)) ||
        (st = xfa_vk_view_args(ctx, "dv", &a->dv, &infos[11], x.dv)))
        return st;
    memcpy(x.lse, lse, sizeof x.lse);
    if (f->has_alibi) {
        if ((st = xfa_vk_view_args(ctx, "alibi_slopes", &f->alibi, &infos[6], s))) return st;
        x.alibi_base = s[0];
        x.alibi_sb = s[1];
        x.alibi_sh = s[3];
    }
    if (f->has_bias) {
        if ((st = xfa_vk_view_args(ctx, "bias", &f->bias, &infos[7], s))) return st;
        x.bias_base = s[0];
        x.bias_sb = s[1];
        x.bias_ss = s[2];
        x.bias_sh = s[3];
        x.bias_sd = s[4];
    }
    x.batch = (uint32_t)f->batch;
    x.seqlen_q = (uint32_t)f->seqlen_q;
    x.seqlen_k = (uint32_t)f->seqlen_k;
    x.heads_q = (uint32_t)f->heads_q;
    x.group = (uint32_t)(f->heads_q / f->heads_kv);
    x.window_left = (int32_t)f->window_left;
    x.window_right = (int32_t)f->window_right;
    x.softcap = f->softcap;
    x.scale = f->scale;

    const uint64_t rows = (uint64_t)(f->batch * f->heads_q * f->seqlen_q);
    VkDescriptorBufferInfo delta = {vk->scratch, 0, rows * 4};
    if (a->scratch) {
        if ((st = xfa_vk_caller_scratch(ctx, a->scratch, a->scratch_offset, &delta.buffer, &delta.offset))) return st;
    } else {
        if ((st = xfa_vk_ensure_scratch(ctx, rows * 4))) return st;
        delta.buffer = vk->scratch;
    }
    infos[12] = delta;
    if ((st = xfa_vk_write_extra(ctx, vk->cmd, &x, sizeof x, &infos[5]))) return st;

    const uint64_t kv_blocks = ((uint64_t)f->seqlen_k + Bk - 1) / Bk, q_blocks = ((uint64_t)f->seqlen_q + plan.Br - 1) / plan.Br;
    if ((rows + 63) / 64 > lim->maxComputeWorkGroupCount[0] || kv_blocks > lim->maxComputeWorkGroupCount[0] ||
        q_blocks > lim->maxComputeWorkGroupCount[0] || (uint64_t)f->heads_q > lim->maxComputeWorkGroupCount[1] ||
        (uint64_t)f->batch > lim->maxComputeWorkGroupCount[2])
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "the backward grid exceeds maxComputeWorkGroupCount");
    const uint32_t mode_groups[3][3] = {
        {(uint32_t)((rows + 63) / 64), 1, 1},
        {(uint32_t)kv_blocks, (uint32_t)f->heads_kv, (uint32_t)f->batch},
        {(uint32_t)q_blocks, (uint32_t)f->heads_q, (uint32_t)f->batch},
    };
    const uint32_t bias = !f->has_bias ? 0 : f->bias.dtype == XFA_DTYPE_F32 ? 1 : 2;
    const bool vec4 = xfa_vk_vec4_ok(x.q[0], x.q + 1) && xfa_vk_vec4_ok(x.k[0], x.k + 1) &&
                      xfa_vk_vec4_ok(x.v[0], x.v + 1) && xfa_vk_vec4_ok(x.d_o[0], x.d_o + 1);
    for (uint32_t mode = MODE_DELTA; mode <= MODE_Q; mode++) {
        const uint32_t local = mode == MODE_DELTA ? 64 : mode == MODE_KV ? Bk * T : plan.Br * T;
        const uint32_t spec[12] = {(uint32_t)f->head_dim, plan.Br, mode == MODE_KV ? Bk : plan.Bc, T,
                                   (uint32_t)f->dtype, mode, f->softcap > 0.0f, f->has_alibi, bias, 4, local,
                                   vec4 && mode != MODE_DELTA};
        VkPipeline pipeline;
        if ((st = xfa_vk_pipeline_spec(ctx, VK_SHADER_BACKWARD, spec, 12, &pipeline))) return st;
        xfa_vk_bind_and_dispatch(vk, vk->cmd, pipeline, infos, mode_groups[mode][0], mode_groups[mode][1],
                                 mode_groups[mode][2]);
        if (mode == MODE_DELTA) xfa_vk_compute_barrier(vk->cmd);
    }
    return XFA_SUCCESS;
}

xfa_status xfa_vk_backward(xfa_context *ctx, const xfa_backward_args *a)
{
    vk_context *vk = ctx->impl;
    xfa_status st = xfa_vk_begin(ctx);
    if (st) return st;
    st = record_backward(ctx, a);
    if (st) {
        vkEndCommandBuffer(vk->cmd); /* the next begin resets it */
        return st;
    }
    st = xfa_vk_submit(ctx, false);
    return st ? st : xfa_vk_check_validation(ctx);
}
