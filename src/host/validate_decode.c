/* validate_decode.c - the checks of xfa_attention_decode and xfa_merge_partials. */
#include "internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#define MAX_SPLITS 1024
#define MAX_PARTS 4096

static const char *const dim_names[4] = {"batch", "seqlen", "heads", "head_dim"};

/* Asserts a view's shape equals (a, b, c, d); -1 skips a dimension. */
static xfa_status require_shape(xfa_context *ctx, const char *name, const xfa_tensor *t, int64_t a, int64_t b,
                                int64_t c, int64_t d)
{
    const int64_t want[4] = {a, b, c, d};
    for (int i = 0; i < 4; i++)
        if (want[i] >= 0 && t->shape[i] != want[i])
            return xfa_fail(ctx, XFA_ERROR_SHAPE_MISMATCH, "%s.shape[%d] (%s) is %lld; it must be %lld", name, i,
                            dim_names[i], (long long)t->shape[i], (long long)want[i]);
    return XFA_SUCCESS;
}

static xfa_status require_dtype(xfa_context *ctx, const char *name, const xfa_tensor *t, xfa_dtype dtype)
{
    if (t->dtype == dtype) return XFA_SUCCESS;
    return xfa_fail(ctx, XFA_ERROR_DTYPE_MISMATCH, "%s.dtype is %s; it must be %s", name, xfa_dtype_name(t->dtype),
                    xfa_dtype_name(dtype));
}

int xfa_decode_choose_splits(uint32_t compute_units, int64_t batch, int64_t heads_kv, int64_t max_len,
                             int64_t min_keys)
{
    const int64_t groups = batch * heads_kv, target = 4 * (int64_t)(compute_units ? compute_units : 1);
    int64_t splits = (target + groups - 1) / groups;
    const int64_t by_length = (max_len + min_keys - 1) / (min_keys > 0 ? min_keys : 1);
    if (splits > by_length) splits = by_length;
    if (splits > MAX_SPLITS) splits = MAX_SPLITS;
    return splits < 1 ? 1 : (int)splits;
}

xfa_status xfa_validate_decode(xfa_context *ctx, const xfa_decode_params *params, const xfa_tensor *q,
                               const xfa_kv_cache *cache, const xfa_tensor *k_new, const xfa_tensor *v_new,
                               const xfa_tensor *o, const xfa_tensor *lse, xfa_decode_args *a)
{
    xfa_status st;
    const xfa_decode_params defaults = XFA_DECODE_PARAMS_DEFAULT;
    if (!params) params = &defaults;
    if (!cache) return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, "cache is NULL");
    if ((st = xfa_require_feature(ctx, XFA_FEATURE_DECODE, "decoding with a KV cache"))) return st;
    if (cache->block_table && (st = xfa_require_feature(ctx, XFA_FEATURE_PAGED_KV, "a paged KV cache"))) return st;
    if ((st = xfa_validate_tensor(ctx, "q", q)) || (st = xfa_validate_tensor(ctx, "o", o)) ||
        (st = xfa_validate_tensor(ctx, "cache.k", cache->k)) || (st = xfa_validate_tensor(ctx, "cache.v", cache->v)) ||
        (st = xfa_validate_tensor(ctx, "cache.seqlens", cache->seqlens)) ||
        (cache->block_table && (st = xfa_validate_tensor(ctx, "cache.block_table", cache->block_table))) ||
        (lse && (st = xfa_validate_tensor(ctx, "lse", lse))))
        return st;
    if (!k_new != !v_new)
        return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, "%s is NULL but %s is not; append both or neither",
                        k_new ? "v_new" : "k_new", k_new ? "k_new" : "v_new");
    if (k_new && ((st = xfa_validate_tensor(ctx, "k_new", k_new)) || (st = xfa_validate_tensor(ctx, "v_new", v_new))))
        return st;

    const xfa_dtype dtype = q->dtype;
    if ((st = require_dtype(ctx, "o", o, dtype)) || (st = require_dtype(ctx, "cache.k", cache->k, dtype)) ||
        (st = require_dtype(ctx, "cache.v", cache->v, dtype)) ||
        (k_new && ((st = require_dtype(ctx, "k_new", k_new, dtype)) || (st = require_dtype(ctx, "v_new", v_new, dtype)))) ||
        (st = require_dtype(ctx, "cache.seqlens", cache->seqlens, XFA_DTYPE_I32)) ||
        (cache->block_table && (st = require_dtype(ctx, "cache.block_table", cache->block_table, XFA_DTYPE_I32))) ||
        (lse && (st = require_dtype(ctx, "lse", lse, XFA_DTYPE_F32))))
        return st;
    if (!(ctx->info.dtypes & (1u << dtype)))
        return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_DTYPE, "dtype %s is not supported on %s", xfa_dtype_name(dtype),
                        ctx->info.name);

    const int64_t B = q->shape[0], Sq = q->shape[1], Hq = q->shape[2], D = q->shape[3], Hkv = cache->k->shape[2];
    if (!xfa_head_dim_supported(D))
        return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_HEAD_DIM, "head_dim %lld is not supported: use a multiple of %d from %d to %d",
                        (long long)D, XFA_HEAD_DIM_STEP, XFA_HEAD_DIM_MIN, XFA_HEAD_DIM_MAX);
    if (Hq % Hkv)
        return xfa_fail(ctx, XFA_ERROR_SHAPE_MISMATCH, "q has %lld heads, the cache %lld: query heads must be a multiple",
                        (long long)Hq, (long long)Hkv);
    if ((st = require_shape(ctx, "o", o, B, Sq, Hq, D)) || (lse && (st = require_shape(ctx, "lse", lse, B, Sq, Hq, 1))) ||
        (st = require_shape(ctx, "cache.seqlens", cache->seqlens, B, 1, 1, 1)) ||
        (st = require_shape(ctx, "cache.v", cache->v, cache->k->shape[0], cache->k->shape[1], Hkv, D)) ||
        (st = require_shape(ctx, "cache.k", cache->k, cache->block_table ? -1 : B, -1, Hkv, D)) ||
        (k_new && ((st = require_shape(ctx, "k_new", k_new, B, Sq, Hkv, D)) ||
                   (st = require_shape(ctx, "v_new", v_new, B, Sq, Hkv, D)))) ||
        (cache->block_table && (st = require_shape(ctx, "cache.block_table", cache->block_table, B, 1, 1, -1))))
        return st;
    a->paged = cache->block_table != NULL;
    a->page_size = a->paged ? cache->k->shape[1] : 0;
    a->num_pages = a->paged ? cache->k->shape[0] : 0;
    a->pages_per_sequence = a->paged ? cache->block_table->shape[3] : 0;
    a->capacity = a->paged ? a->pages_per_sequence * a->page_size : cache->k->shape[1];
    if (Sq > a->capacity)
        return xfa_fail(ctx, XFA_ERROR_SHAPE_MISMATCH, "%lld new tokens do not fit a cache of %lld tokens per sequence",
                        (long long)Sq, (long long)a->capacity);

    if (!isfinite(params->softmax_scale))
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "params.softmax_scale is %g; it must be finite",
                        (double)params->softmax_scale);
    if (params->window_left < -1)
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "params.window_left is %lld; >= 0, or -1 for no limit",
                        (long long)params->window_left);
    if (!(params->softcap >= 0.0f) || !isfinite(params->softcap))
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "params.softcap is %g; it must be finite and >= 0",
                        (double)params->softcap);
    if (params->num_splits < 0 || params->num_splits > MAX_SPLITS)
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "params.num_splits is %d; 0 (automatic) to %d",
                        params->num_splits, MAX_SPLITS);
    if ((params->causal && (st = xfa_require_feature(ctx, XFA_FEATURE_CAUSAL, "causal masking"))) ||
        (params->window_left >= 0 && (st = xfa_require_feature(ctx, XFA_FEATURE_WINDOW, "a sliding window"))) ||
        (params->softcap > 0 && (st = xfa_require_feature(ctx, XFA_FEATURE_SOFTCAP, "softcap"))) ||
        (Hq != Hkv && (st = xfa_require_feature(ctx, XFA_FEATURE_GQA, "fewer K/V heads than Q heads (GQA)"))) ||
        (lse && (st = xfa_require_feature(ctx, XFA_FEATURE_LSE, "the LSE output"))))
        return st;
    if (params->alibi_slopes) {
        const xfa_tensor *s = params->alibi_slopes;
        if ((st = xfa_validate_tensor(ctx, "alibi_slopes", s)) || (st = require_dtype(ctx, "alibi_slopes", s, XFA_DTYPE_F32)) ||
            (st = require_shape(ctx, "alibi_slopes", s, s->shape[0] == 1 ? 1 : B, 1, Hq, 1)) ||
            (st = xfa_require_feature(ctx, XFA_FEATURE_ALIBI, "ALiBi slopes")))
            return st;
    }

    /* what the call writes (o, lse, and the cache when appending) must not overlap what it reads */
    const xfa_tensor *const views[10] = {q, cache->seqlens, cache->block_table, params->alibi_slopes, k_new, v_new,
                                         cache->k, cache->v, o, lse};
    static const char *const names[10] = {"q", "cache.seqlens", "cache.block_table", "alibi_slopes", "k_new", "v_new",
                                          "cache.k", "cache.v", "o", "lse"};
    const int first_written = k_new ? 6 : 8; /* views[first_written..] are written */
    for (int w = first_written; w < 10; w++)
        for (int x = 0; x < w; x++)
            if (views[w] && views[x] && xfa_views_intersect(views[w], views[x]))
                return xfa_fail(ctx, XFA_ERROR_ALIASING, "%s overlaps %s in memory", names[w], names[x]);

    a->q = *q;
    a->o = *o;
    a->has_lse = lse != NULL;
    if (lse) a->lse = *lse;
    a->k_cache = *cache->k;
    a->v_cache = *cache->v;
    a->seqlens = *cache->seqlens;
    if (a->paged) a->block_table = *cache->block_table;
    a->append = k_new != NULL;
    if (k_new) {
        a->k_new = *k_new;
        a->v_new = *v_new;
    }
    a->dtype = dtype;
    a->batch = B;
    a->seqlen_q = Sq;
    a->heads_q = Hq;
    a->heads_kv = Hkv;
    a->head_dim = D;
    a->scale = params->softmax_scale != 0.0f ? params->softmax_scale : (float)(1.0 / sqrt((double)D));
    a->causal = params->causal != 0;
    a->window_left = params->window_left;
    a->softcap = params->softcap;
    a->has_alibi = params->alibi_slopes != NULL;
    if (a->has_alibi) a->alibi = *params->alibi_slopes;
    a->num_splits = params->num_splits;
    /* Sized for the most splits a backend picks by itself: CUDA splits down to 64 keys and takes up
     * to twice the choice where that fills the GPU's last wave better (cuda_decode.c); the others
     * pick at most choose_splits(..., 256), which is less. */
    const int chosen = xfa_decode_choose_splits(ctx->info.compute_units, B, Hkv, a->capacity, 64);
    a->max_splits = params->num_splits ? params->num_splits : chosen * 2 > MAX_SPLITS ? MAX_SPLITS : chosen * 2;
    a->scratch_bytes = xfa_decode_scratch_bytes(a, &a->scratch_lse_offset);
    if (!a->scratch_bytes)
        return xfa_fail(ctx, XFA_ERROR_SIZE_OVERFLOW, "the decode partials (%d splits) overflow a size_t", a->max_splits);
    if (params->scratch) {
        if ((st = xfa_validate_scratch(ctx, params->scratch, params->scratch_offset, a->scratch_bytes, views, names,
                                       10)))
            return st;
        a->scratch = params->scratch;
        a->scratch_offset = params->scratch_offset;
    }
    return XFA_SUCCESS;
}

size_t xfa_decode_scratch_bytes(const xfa_decode_args *a, size_t *lse_offset)
{
    const double rows = (double)a->max_splits * (double)a->batch * (double)a->heads_q * (double)a->seqlen_q;
    if (rows * (double)(a->head_dim + 1) * 4.0 + 512.0 > (double)SIZE_MAX / 2) return 0;
    const size_t parts = (size_t)rows * (size_t)a->head_dim * 4;
    *lse_offset = (parts + 255) / 256 * 256;
    return *lse_offset + (size_t)rows * 4;
}

xfa_status xfa_validate_merge(xfa_context *ctx, int n, const xfa_tensor *o_parts, const xfa_tensor *lse_parts,
                              const xfa_tensor *o, const xfa_tensor *lse, xfa_merge_args *a)
{
    xfa_status st;
    if (n < 1 || n > MAX_PARTS)
        return xfa_fail(ctx, XFA_ERROR_INVALID_ARGUMENT, "n is %d; merge 1 to %d parts", n, MAX_PARTS);
    if (!o_parts || !lse_parts)
        return xfa_fail(ctx, XFA_ERROR_NULL_POINTER, "%s is NULL", o_parts ? "lse_parts" : "o_parts");
    if ((st = xfa_require_feature(ctx, XFA_FEATURE_MERGE, "merging partial results"))) return st;
    if ((st = xfa_validate_tensor(ctx, "o", o)) || (lse && (st = xfa_validate_tensor(ctx, "lse", lse))) ||
        (lse && (st = require_dtype(ctx, "lse", lse, XFA_DTYPE_F32))) ||
        (lse && (st = require_shape(ctx, "lse", lse, o->shape[0], o->shape[1], o->shape[2], 1))))
        return st;
    if (!(ctx->info.dtypes & (1u << o->dtype)))
        return xfa_fail(ctx, XFA_ERROR_UNSUPPORTED_DTYPE, "dtype %s is not supported on %s", xfa_dtype_name(o->dtype),
                        ctx->info.name);
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "o_parts[%d]", i);
        if ((st = xfa_validate_tensor(ctx, name, &o_parts[i])) ||
            (st = require_shape(ctx, name, &o_parts[i], o->shape[0], o->shape[1], o->shape[2], o->shape[3])))
            return st;
        if (o_parts[i].dtype != o->dtype && o_parts[i].dtype != XFA_DTYPE_F32)
            return xfa_fail(ctx, XFA_ERROR_DTYPE_MISMATCH, "%s.dtype is %s; it must be f32 or o's dtype %s", name,
                            xfa_dtype_name(o_parts[i].dtype), xfa_dtype_name(o->dtype));
        if ((o->buffer && xfa_views_intersect(o, &o_parts[i])) || (lse && xfa_views_intersect(lse, &o_parts[i])))
            return xfa_fail(ctx, XFA_ERROR_ALIASING, "an output overlaps %s", name);
        snprintf(name, sizeof name, "lse_parts[%d]", i);
        if ((st = xfa_validate_tensor(ctx, name, &lse_parts[i])) ||
            (st = require_dtype(ctx, name, &lse_parts[i], XFA_DTYPE_F32)) ||
            (st = require_shape(ctx, name, &lse_parts[i], o->shape[0], o->shape[1], o->shape[2], 1)))
            return st;
        if (xfa_views_intersect(o, &lse_parts[i]) || (lse && xfa_views_intersect(lse, &lse_parts[i])))
            return xfa_fail(ctx, XFA_ERROR_ALIASING, "an output overlaps %s", name);
    }
    if (lse && xfa_views_intersect(o, lse)) return xfa_fail(ctx, XFA_ERROR_ALIASING, "lse overlaps o in memory");
    a->n = n;
    a->o_parts = o_parts;
    a->lse_parts = lse_parts;
    a->o = *o;
    a->has_lse = lse != NULL;
    if (lse) a->lse = *lse;
    a->batch = o->shape[0];
    a->seqlen = o->shape[1];
    a->heads = o->shape[2];
    a->head_dim = o->shape[3];
    return XFA_SUCCESS;
}
