/*
 * validate.c - the checks every backend relies on, done once before a call
 * reaches a backend. Each failure has its own status and a message naming the
 * argument, so a caller can tell `k.shape[2]` from `o.offset` at a glance.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>

static const char *const dim_names[4] = {"batch", "seqlen", "heads", "head_dim"};

static bool mul_overflows(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a) return true;
    *out = a * b;
    return false;
}

static bool add_overflows(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b > UINT64_MAX - a) return true;
    *out = a + b;
    return false;
}

bool xfa_head_dim_supported(int64_t d)
{
    return d >= XFA_HEAD_DIM_MIN && d <= XFA_HEAD_DIM_MAX && d % XFA_HEAD_DIM_STEP == 0;
}

/* Bytes from the view's offset to one past its last element; false on overflow. */
static bool span_bytes(const xfa_tensor *t, uint64_t *out)
{
    uint64_t last = 0, elems = 1;
    for (int i = 0; i < 4; i++) {
        uint64_t term;
        if (mul_overflows((uint64_t)(t->shape[i] - 1), (uint64_t)t->stride[i], &term)) return false;
        if (add_overflows(last, term, &last)) return false;
        if (mul_overflows(elems, (uint64_t)t->shape[i], &elems)) return false;
    }
    uint64_t bytes;
    if (add_overflows(last, 1, &last) || mul_overflows(last, xfa_dtype_size(t->dtype), &bytes)) return false;
    uint64_t dense;
    if (mul_overflows(elems, xfa_dtype_size(t->dtype), &dense)) return false;
    *out = bytes;
    return true;
}

size_t xfa_tensor_span_bytes(const xfa_tensor *t)
{
    uint64_t bytes;
    if (!t || xfa_dtype_size(t->dtype) == 0) return 0;
    for (int i = 0; i < 4; i++)
        if (t->shape[i] <= 0 || t->stride[i] < 0) return 0;
    if (!span_bytes(t, &bytes) || bytes > SIZE_MAX) return 0;
    return (size_t)bytes;
}

/* Non-overlap: ordering the dims of size > 1 by stride, each stride must reach
 * past the whole extent of the dims below it. */
static bool strides_overlap(const xfa_tensor *t)
{
    int order[4], n = 0;
    for (int i = 0; i < 4; i++)
        if (t->shape[i] > 1) order[n++] = i;
    for (int i = 1; i < n; i++) /* insertion sort by stride */
        for (int j = i; j > 0 && t->stride[order[j]] < t->stride[order[j - 1]]; j--) {
            int tmp = order[j]; order[j] = order[j - 1]; order[j - 1] = tmp;
        }
    uint64_t extent = 1; /* elements spanned by the dims so far */
    for (int i = 0; i < n; i++) {
        const int d = order[i];
        if ((uint64_t)t->stride[d] < extent) return true;
        extent = (uint64_t)t->stride[d] * (uint64_t)t->shape[d]; /* no overflow: span_bytes passed */
    }
    return false;
}

xfa_status xfa_validate_tensor(xfa_context *ctx, const char *name, const xfa_tensor *t)
{
    if (!t) return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, "%s is NULL", name);
    if (!t->buffer) return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, "%s.buffer is NULL", name);
    if (t->buffer->ctx != ctx)
        return xfa_fail(ctx, XFA_ERROR_WRONG_CONTEXT, "%s.buffer was made for another context", name);
    const size_t elem = xfa_dtype_size(t->dtype);
    if (elem == 0) return xfa_fail(ctx, XFA_ERROR_INVALID_DTYPE, "%s.dtype = %d is not an xfa_dtype", name, (int)t->dtype);
    for (int i = 0; i < 4; i++)
        if (t->shape[i] <= 0)
            return xfa_fail(ctx, XFA_ERROR_EMPTY_TENSOR, "%s.shape[%d] (%s) is %lld; every dimension must be >= 1",
                            name, i, dim_names[i], (long long)t->shape[i]);
    for (int i = 0; i < 4; i++)
        if (t->stride[i] < 0 || (t->stride[i] == 0 && t->shape[i] > 1))
            return xfa_fail(ctx, XFA_ERROR_BAD_STRIDES, "%s.stride[%d] (%s) is %lld; strides must be positive",
                            name, i, dim_names[i], (long long)t->stride[i]);
    uint64_t bytes, end;
    if (!span_bytes(t, &bytes) || add_overflows(t->offset, bytes, &end))
        return xfa_fail(ctx, XFA_ERROR_SIZE_OVERFLOW,
                        "%s: shape (%lld, %lld, %lld, %lld) with its strides spans more than 2^64 bytes", name,
                        (long long)t->shape[0], (long long)t->shape[1], (long long)t->shape[2], (long long)t->shape[3]);
    if (strides_overlap(t))
        return xfa_fail(ctx, XFA_ERROR_BAD_STRIDES,
                        "%s: strides (%lld, %lld, %lld, %lld) make distinct elements share memory", name,
                        (long long)t->stride[0], (long long)t->stride[1], (long long)t->stride[2], (long long)t->stride[3]);
    if (t->offset % elem)
        return xfa_fail(ctx, XFA_ERROR_MISALIGNED, "%s.offset %zu is not a multiple of the %s element size %zu", name,
                        t->offset, xfa_dtype_name(t->dtype), elem);
    if (end > t->buffer->size)
        return xfa_fail(ctx, XFA_ERROR_OUT_OF_BOUNDS, "%s reaches byte %llu of a %zu-byte buffer", name,
                        (unsigned long long)end, t->buffer->size);
    return XFA_SUCCESS;
}

/* True if the byte ranges of two views on the same native memory intersect. */
bool xfa_views_intersect(const xfa_tensor *a, const xfa_tensor *b)
{
    if (a->buffer->impl != b->buffer->impl) return false;
    const uint64_t a0 = a->buffer->native_offset + a->offset, a1 = a0 + xfa_tensor_span_bytes(a);
    const uint64_t b0 = b->buffer->native_offset + b->offset, b1 = b0 + xfa_tensor_span_bytes(b);
    return a0 < b1 && b0 < a1;
}

xfa_status xfa_require_feature(xfa_context *ctx, uint32_t feature, const char *what)
{
    if (ctx->info.features & feature) return XFA_SUCCESS;
    return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_FEATURE, "%s is not supported by the %s backend (%s path)", what,
                    xfa_backend_name(ctx->info.backend), ctx->info.path);
}

static xfa_status require_same(xfa_context *ctx, const char *a_name, const xfa_tensor *a, int ai, const char *b_name,
                               const xfa_tensor *b, int bi)
{
    if (a->shape[ai] == b->shape[bi]) return XFA_SUCCESS;
    return xfa_fail(ctx, XFA_ERROR_SHAPE_MISMATCH, "%s.shape[%d] (%s) = %lld but %s.shape[%d] (%s) = %lld", a_name, ai,
                    dim_names[ai], (long long)a->shape[ai], b_name, bi, dim_names[bi], (long long)b->shape[bi]);
}

/* The optional parts of a call: scale, window, softcap, ALiBi slopes, bias. */
static xfa_status validate_extras(xfa_context *ctx, const xfa_attention_params *p, const xfa_tensor *q,
                                  const xfa_tensor *k)
{
    xfa_status st;
    const int64_t B = q->shape[0], Sq = q->shape[1], Hq = q->shape[2], Sk = k->shape[1];
    if (!isfinite(p->softmax_scale))
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "params.softmax_scale is %g; it must be finite",
                        (double)p->softmax_scale);
    if (p->window_left < -1 || p->window_right < -1)
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT,
                        "params.window_left = %lld, window_right = %lld; each is >= 0, or -1 for no limit",
                        (long long)p->window_left, (long long)p->window_right);
    if (p->causal && p->window_right > 0)
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT,
                        "params.causal with window_right = %lld: causal means window_right = 0",
                        (long long)p->window_right);
    if (!(p->softcap >= 0.0f) || !isfinite(p->softcap))
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "params.softcap is %g; it must be finite and >= 0 (0: off)",
                        (double)p->softcap);

    if (p->causal && (st = xfa_require_feature(ctx, XFA_FEATURE_CAUSAL, "causal masking"))) return st;
    if ((p->window_left >= 0 || (!p->causal && p->window_right >= 0)) &&
        (st = xfa_require_feature(ctx, XFA_FEATURE_WINDOW, "a sliding window (params.window_left/right)")))
        return st;
    if (p->softcap > 0.0f && (st = xfa_require_feature(ctx, XFA_FEATURE_SOFTCAP, "softcap"))) return st;

    if (p->alibi_slopes) {
        const xfa_tensor *a = p->alibi_slopes;
        if ((st = xfa_validate_tensor(ctx, "alibi_slopes", a))) return st;
        if (a->dtype != XFA_DTYPE_F32)
            return xfa_fail(ctx, XFA_ERROR_DTYPE_MISMATCH, "alibi_slopes.dtype is %s; ALiBi slopes are f32",
                            xfa_dtype_name(a->dtype));
        if ((a->shape[0] != 1 && a->shape[0] != B) || a->shape[1] != 1 || a->shape[2] != Hq || a->shape[3] != 1)
            return xfa_fail(ctx, XFA_ERROR_SHAPE_MISMATCH,
                            "alibi_slopes has shape (%lld, %lld, %lld, %lld); it must be (1 or %lld, 1, %lld, 1)",
                            (long long)a->shape[0], (long long)a->shape[1], (long long)a->shape[2],
                            (long long)a->shape[3], (long long)B, (long long)Hq);
        if ((st = xfa_require_feature(ctx, XFA_FEATURE_ALIBI, "ALiBi slopes"))) return st;
    }
    if (p->cu_seqlens_q || p->cu_seqlens_k) {
        const xfa_tensor *cq = p->cu_seqlens_q, *ck = p->cu_seqlens_k;
        if (!cq || !ck)
            return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, "params.%s is NULL; variable lengths need both offsets",
                            cq ? "cu_seqlens_k" : "cu_seqlens_q");
        if ((st = xfa_validate_tensor(ctx, "cu_seqlens_q", cq)) || (st = xfa_validate_tensor(ctx, "cu_seqlens_k", ck)))
            return st;
        if (cq->dtype != XFA_DTYPE_I32 || ck->dtype != XFA_DTYPE_I32)
            return xfa_fail(ctx, XFA_ERROR_DTYPE_MISMATCH, "cu_seqlens_%s.dtype is %s; offsets are i32",
                            cq->dtype != XFA_DTYPE_I32 ? "q" : "k",
                            xfa_dtype_name(cq->dtype != XFA_DTYPE_I32 ? cq->dtype : ck->dtype));
        if (cq->shape[0] < 2 || cq->shape[1] != 1 || cq->shape[2] != 1 || cq->shape[3] != 1 ||
            ck->shape[0] != cq->shape[0] || ck->shape[1] != 1 || ck->shape[2] != 1 || ck->shape[3] != 1)
            return xfa_fail(ctx, XFA_ERROR_SHAPE_MISMATCH,
                            "cu_seqlens_q and cu_seqlens_k must both be (B+1, 1, 1, 1) with B >= 1; got %lld and %lld "
                            "entries", (long long)cq->shape[0], (long long)ck->shape[0]);
        if (B != 1)
            return xfa_fail(ctx, XFA_ERROR_SHAPE_MISMATCH, "with cu_seqlens the sequences are packed: q.shape[0] is "
                            "%lld, it must be 1", (long long)B);
        if (p->max_seqlen_q < 1 || p->max_seqlen_q > Sq)
            return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "params.max_seqlen_q is %lld; it must be 1 .. %lld (q's rows)",
                            (long long)p->max_seqlen_q, (long long)Sq);
        if (p->bias)
            return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_FEATURE, "a bias with packed variable-length sequences");
        if ((st = xfa_require_feature(ctx, XFA_FEATURE_VARLEN, "variable-length sequences (cu_seqlens)"))) return st;
    }
    if (p->bias) {
        const xfa_tensor *b = p->bias;
        if ((st = xfa_validate_tensor(ctx, "bias", b))) return st;
        if (b->dtype != XFA_DTYPE_F32 && b->dtype != q->dtype)
            return xfa_fail(ctx, XFA_ERROR_DTYPE_MISMATCH, "bias.dtype is %s; it must be f32 or q's dtype %s",
                            xfa_dtype_name(b->dtype), xfa_dtype_name(q->dtype));
        if ((b->shape[0] != 1 && b->shape[0] != B) || b->shape[1] != Sq || (b->shape[2] != 1 && b->shape[2] != Hq) ||
            b->shape[3] != Sk)
            return xfa_fail(ctx, XFA_ERROR_SHAPE_MISMATCH,
                            "bias has shape (%lld, %lld, %lld, %lld); it must be (1 or %lld, %lld, 1 or %lld, %lld)",
                            (long long)b->shape[0], (long long)b->shape[1], (long long)b->shape[2],
                            (long long)b->shape[3], (long long)B, (long long)Sq, (long long)Hq, (long long)Sk);
        if ((st = xfa_require_feature(ctx, XFA_FEATURE_BIAS, "an additive bias"))) return st;
    }
    return XFA_SUCCESS;
}

xfa_status xfa_validate_forward(xfa_context *ctx, const xfa_attention_params *params, const xfa_tensor *q,
                                const xfa_tensor *k, const xfa_tensor *v, const xfa_tensor *o, const xfa_tensor *lse,
                                xfa_forward_args *args)
{
    xfa_status st;
    const xfa_tensor *const views[5] = {q, k, v, o, lse};
    static const char *const names[5] = {"q", "k", "v", "o", "lse"};
    for (int i = 0; i < 5; i++) {
        if (i == 4 && !lse) break;
        if ((st = xfa_validate_tensor(ctx, names[i], views[i])) != XFA_SUCCESS) return st;
    }

    for (int i = 1; i < 4; i++)
        if (views[i]->dtype != q->dtype)
            return xfa_fail(ctx, XFA_ERROR_DTYPE_MISMATCH, "%s.dtype is %s but q.dtype is %s; q, k, v, o share one dtype",
                            names[i], xfa_dtype_name(views[i]->dtype), xfa_dtype_name(q->dtype));
    if (lse && lse->dtype != XFA_DTYPE_F32)
        return xfa_fail(ctx, XFA_ERROR_DTYPE_MISMATCH, "lse.dtype is %s; the LSE output is always f32",
                        xfa_dtype_name(lse->dtype));
    if (!(ctx->info.dtypes & (1u << q->dtype)))
        return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_DTYPE, "dtype %s is not supported on %s (%s backend)",
                        xfa_dtype_name(q->dtype), ctx->info.name, xfa_backend_name(ctx->info.backend));

    /* q (B, Sq, Hq, D), k and v (B, Sk, Hkv, D), o like q, lse (B, Sq, Hq, 1) */
    if ((st = require_same(ctx, "k", k, 0, "q", q, 0)) || (st = require_same(ctx, "v", v, 0, "q", q, 0)) ||
        (st = require_same(ctx, "v", v, 1, "k", k, 1)) || (st = require_same(ctx, "v", v, 2, "k", k, 2)) ||
        (st = require_same(ctx, "k", k, 3, "q", q, 3)) || (st = require_same(ctx, "v", v, 3, "q", q, 3)))
        return st;
    for (int i = 0; i < 4; i++)
        if ((st = require_same(ctx, "o", o, i, "q", q, i))) return st;
    if (q->shape[2] % k->shape[2])
        return xfa_fail(ctx, XFA_ERROR_SHAPE_MISMATCH,
                        "q has %lld heads, k and v %lld: query heads must be a multiple of key/value heads",
                        (long long)q->shape[2], (long long)k->shape[2]);
    if (lse) {
        for (int i = 0; i < 3; i++)
            if ((st = require_same(ctx, "lse", lse, i, "q", q, i))) return st;
        if (lse->shape[3] != 1)
            return xfa_fail(ctx, XFA_ERROR_SHAPE_MISMATCH, "lse.shape[3] is %lld; the LSE has one value per row (1)",
                            (long long)lse->shape[3]);
    }
    if (!xfa_head_dim_supported(q->shape[3]))
        return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_HEAD_DIM, "head_dim %lld is not supported: use a multiple of %d from %d to %d",
                        (long long)q->shape[3], XFA_HEAD_DIM_STEP, XFA_HEAD_DIM_MIN, XFA_HEAD_DIM_MAX);

    const xfa_attention_params defaults = XFA_ATTENTION_PARAMS_DEFAULT;
    if (!params) params = &defaults;
    if ((st = validate_extras(ctx, params, q, k))) return st;

    /* outputs must not overlap any input (or each other) */
    const xfa_tensor *const inputs[8] = {q, k, v, params->alibi_slopes, params->bias, params->cu_seqlens_q,
                                         params->cu_seqlens_k, o};
    static const char *const input_names[8] = {"q", "k", "v", "alibi_slopes", "bias", "cu_seqlens_q", "cu_seqlens_k", "o"};
    for (int i = 0; i < 7; i++)
        if (inputs[i] && xfa_views_intersect(o, inputs[i]))
            return xfa_fail(ctx, XFA_ERROR_ALIASING, "o overlaps %s in memory", input_names[i]);
    if (lse)
        for (int i = 0; i < 8; i++)
            if (inputs[i] && xfa_views_intersect(lse, inputs[i]))
                return xfa_fail(ctx, XFA_ERROR_ALIASING, "lse overlaps %s in memory", input_names[i]);

    if (lse && (st = xfa_require_feature(ctx, XFA_FEATURE_LSE, "the LSE output"))) return st;
    if (q->shape[2] != k->shape[2] && (st = xfa_require_feature(ctx, XFA_FEATURE_GQA, "fewer K/V heads than Q heads (GQA)")))
        return st;
    if (q->shape[1] != k->shape[1] &&
        (st = xfa_require_feature(ctx, XFA_FEATURE_SEQLEN_QK_DIFFER, "seqlen_q different from seqlen_k")))
        return st;

    args->q = *q;
    args->k = *k;
    args->v = *v;
    args->o = *o;
    args->has_lse = lse != NULL;
    if (lse) args->lse = *lse;
    args->dtype = q->dtype;
    args->batch = q->shape[0];
    args->seqlen_q = q->shape[1];
    args->seqlen_k = k->shape[1];
    args->heads_q = q->shape[2];
    args->heads_kv = k->shape[2];
    args->head_dim = q->shape[3];
    args->scale = params->softmax_scale != 0.0f ? params->softmax_scale : (float)(1.0 / sqrt((double)q->shape[3]));
    args->causal = params->causal != 0;
    args->window_left = params->window_left;
    args->window_right = args->causal ? 0 : params->window_right;
    args->softcap = params->softcap;
    args->has_alibi = params->alibi_slopes != NULL;
    if (args->has_alibi) args->alibi = *params->alibi_slopes;
    args->has_bias = params->bias != NULL;
    if (args->has_bias) args->bias = *params->bias;
    args->varlen = params->cu_seqlens_q != NULL;
    if (args->varlen) {
        args->cu_seqlens_q = *params->cu_seqlens_q;
        args->cu_seqlens_k = *params->cu_seqlens_k;
        args->sequences = params->cu_seqlens_q->shape[0] - 1;
        args->max_seqlen_q = params->max_seqlen_q;
    }
    return XFA_SUCCESS;
}

/* A gradient must have the shape and dtype of the tensor it belongs to. */
static xfa_status require_like(xfa_context *ctx, const char *name, const xfa_tensor *t, const char *like_name,
                               const xfa_tensor *like)
{
    xfa_status st;
    if ((st = xfa_validate_tensor(ctx, name, t))) return st;
    if (t->dtype != like->dtype)
        return xfa_fail(ctx, XFA_ERROR_DTYPE_MISMATCH, "%s.dtype is %s but %s.dtype is %s", name,
                        xfa_dtype_name(t->dtype), like_name, xfa_dtype_name(like->dtype));
    for (int i = 0; i < 4; i++)
        if ((st = require_same(ctx, name, t, i, like_name, like, i))) return st;
    return XFA_SUCCESS;
}

xfa_status xfa_validate_backward(xfa_context *ctx, const xfa_attention_params *params, const xfa_tensor *q,
                                 const xfa_tensor *k, const xfa_tensor *v, const xfa_tensor *o, const xfa_tensor *d_o,
                                 const xfa_tensor *lse, const xfa_tensor *dq, const xfa_tensor *dk,
                                 const xfa_tensor *dv, xfa_backward_args *args)
{
    xfa_status st;
    if (!lse) return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, "lse is NULL; the backward pass needs the forward's LSE");
    if ((st = xfa_require_feature(ctx, XFA_FEATURE_BACKWARD, "the backward pass"))) return st;
    if (params && params->cu_seqlens_q)
        return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_FEATURE, "variable-length sequences in the backward pass");
    /* o and lse are inputs here, but the forward's checks (shapes, dtypes, features) all apply */
    if ((st = xfa_validate_forward(ctx, params, q, k, v, o, lse, &args->fwd))) return st;
    if ((st = require_like(ctx, "d_o", d_o, "o", o)) || (st = require_like(ctx, "dq", dq, "q", q)) ||
        (st = require_like(ctx, "dk", dk, "k", k)) || (st = require_like(ctx, "dv", dv, "v", v)))
        return st;
    const xfa_attention_params defaults = XFA_ATTENTION_PARAMS_DEFAULT;
    if (!params) params = &defaults;
    const xfa_tensor *const inputs[8] = {q, k, v, o, d_o, lse, params->alibi_slopes, params->bias};
    static const char *const input_names[8] = {"q", "k", "v", "o", "d_o", "lse", "alibi_slopes", "bias"};
    const xfa_tensor *const outputs[3] = {dq, dk, dv};
    static const char *const output_names[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 8; j++)
            if (inputs[j] && xfa_views_intersect(outputs[i], inputs[j]))
                return xfa_fail(ctx, XFA_ERROR_ALIASING, "%s overlaps %s in memory", output_names[i], input_names[j]);
        for (int j = i + 1; j < 3; j++)
            if (xfa_views_intersect(outputs[i], outputs[j]))
                return xfa_fail(ctx, XFA_ERROR_ALIASING, "%s overlaps %s in memory", output_names[i], output_names[j]);
    }
    args->d_o = *d_o;
    args->dq = *dq;
    args->dk = *dk;
    args->dv = *dv;
    const double rows = (double)args->fwd.batch * (double)args->fwd.heads_q * (double)args->fwd.seqlen_q;
    if (rows * 4.0 > (double)(SIZE_MAX / 2))
        return xfa_fail(ctx, XFA_ERROR_SIZE_OVERFLOW, "the backward's row statistics overflow a size_t");
    args->scratch_bytes = ((size_t)rows * 4 + 255) / 256 * 256;
    if (params->scratch) {
        const xfa_tensor *const views[11] = {q, k, v, o, d_o, lse, params->alibi_slopes, params->bias, dq, dk, dv};
        static const char *const names[11] = {"q", "k", "v", "o", "d_o", "lse", "alibi_slopes", "bias",
                                              "dq", "dk", "dv"};
        if ((st = xfa_validate_scratch(ctx, params->scratch, params->scratch_offset, args->scratch_bytes, views,
                                       names, 11)))
            return st;
        args->scratch = params->scratch;
        args->scratch_offset = params->scratch_offset;
    }
    return XFA_SUCCESS;
}

xfa_status xfa_validate_scratch(xfa_context *ctx, const xfa_buffer *scratch, size_t offset, size_t bytes,
                                const xfa_tensor *const *views, const char *const *names, int n)
{
    if (scratch->ctx != ctx) return xfa_fail(ctx, XFA_ERROR_WRONG_CONTEXT, "params.scratch was made for another context");
    if (offset % 256)
        return xfa_fail(ctx, XFA_ERROR_MISALIGNED, "params.scratch_offset is %zu; it must be a multiple of 256", offset);
    if (offset > scratch->size || scratch->size - offset < bytes)
        return xfa_fail(ctx, XFA_ERROR_OUT_OF_BOUNDS,
                        "params.scratch holds %zu bytes from offset %zu; this call needs %zu (the *_scratch_size call)",
                        offset <= scratch->size ? scratch->size - offset : (size_t)0, offset, bytes);
    /* the scratch as a flat f32 view, to check it overlaps nothing the call touches */
    const xfa_tensor flat = {(xfa_buffer *)scratch, offset, XFA_DTYPE_F32, {1, 1, 1, (int64_t)(bytes / 4)}, {0, 0, 0, 1}};
    for (int x = 0; x < n; x++)
        if (views[x] && xfa_views_intersect(&flat, views[x]))
            return xfa_fail(ctx, XFA_ERROR_ALIASING, "params.scratch overlaps %s in memory", names[x]);
    return XFA_SUCCESS;
}
