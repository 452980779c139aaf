/*
 * cpu_decode.c - Flash-Decoding on the CPU: the new query tokens of one
 * (sequence, head) attend to one split of the KV cache, leaving a partial
 * output normalised over that split and its LSE; merging the splits by their
 * LSE gives the attention over the whole cache. The merge is also
 * xfa_merge_partials.
 */
#include "cpu_kernel.h"

#include "dtype.h"

#include <math.h>
#include <string.h>

int64_t xfa_cpu_cache_row(const xfa_decode_args *a, const int32_t *block_table, int64_t b, int64_t t, int64_t *batch)
{
    if (!a->paged) {
        *batch = b;
        return t;
    }
    const int64_t entry = xfa_tensor_index(&a->block_table, b, 0, 0, t / a->page_size);
    *batch = block_table[entry];
    return t % a->page_size;
}

void xfa_cpu_decode_partial(const xfa_decode_args *a, const xfa_cpu_decode_views *mem, int64_t b, int64_t h,
                            int64_t key_begin, int64_t key_end, int64_t len, float *o_part, float *lse_part,
                            float *scratch)
{
    const int64_t d = a->head_dim, Sq = a->seqlen_q, hk = h / (a->heads_q / a->heads_kv);
    const float slope = a->has_alibi ? mem->alibi[xfa_tensor_index(&a->alibi, a->alibi.shape[0] == 1 ? 0 : b, 0, h, 0)]
                                     : 0.0f;
    float *q_row = scratch, *k_row = q_row + d;
    for (int64_t i = 0; i < Sq; i++) {
        for (int64_t x = 0; x < d; x++) q_row[x] = xfa_load_f32(mem->q, a->dtype, xfa_tensor_index(&a->q, b, i, h, x));
        float m_i = -INFINITY, l_i = 0.0f, *acc = o_part + i * d;
        memset(acc, 0, (size_t)d * sizeof *acc);
        for (int64_t j = key_begin; j < key_end; j++) {
            if (!xfa_key_visible(a->window_left, a->causal ? 0 : -1, i, j, Sq, len)) continue;
            int64_t cb;
            const int64_t row = xfa_cpu_cache_row(a, mem->block_table, b, j, &cb);
            for (int64_t x = 0; x < d; x++)
                k_row[x] = xfa_load_f32(mem->k_cache, a->dtype, xfa_tensor_index(&a->k_cache, cb, row, hk, x));
            float s = xfa_cpu_dot(q_row, k_row, d) * a->scale;
            if (a->softcap > 0.0f) s = a->softcap * tanhf(s / a->softcap);
            s -= slope * fabsf((float)(i + len - Sq - j));
            const float m_new = fmaxf(m_i, s), alpha = expf(m_i - m_new), p = expf(s - m_new);
            l_i = l_i * alpha + p;
            m_i = m_new;
            for (int64_t x = 0; x < d; x++)
                acc[x] = acc[x] * alpha +
                         p * xfa_load_f32(mem->v_cache, a->dtype, xfa_tensor_index(&a->v_cache, cb, row, hk, x));
        }
        const float inv_l = l_i > 0.0f ? 1.0f / l_i : 0.0f;
        for (int64_t x = 0; x < d; x++) acc[x] *= inv_l;
        lse_part[i] = l_i > 0.0f ? m_i + logf(l_i) : -INFINITY;
    }
}

void xfa_cpu_merge_row(int n, const float *o_parts, int64_t o_stride, const float *lse_parts, int64_t lse_stride,
                       int64_t d, float *o, float *lse)
{
    float lse_max = -INFINITY;
    for (int s = 0; s < n; s++) lse_max = fmaxf(lse_max, lse_parts[s * lse_stride]);
    memset(o, 0, (size_t)d * sizeof *o);
    if (lse_max == -INFINITY) { /* no part saw a key */
        *lse = -INFINITY;
        return;
    }
    float sum = 0.0f;
    for (int s = 0; s < n; s++) sum += expf(lse_parts[s * lse_stride] - lse_max);
    const float merged = lse_max + logf(sum);
    for (int s = 0; s < n; s++) {
        if (lse_parts[s * lse_stride] == -INFINITY) continue;
        const float w = expf(lse_parts[s * lse_stride] - merged);
        for (int64_t x = 0; x < d; x++) o[x] += w * o_parts[s * o_stride + x];
    }
    *lse = merged;
}
