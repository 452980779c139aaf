/*
 * cpu_kernel.c - one work-group's worth of FlashAttention-2 forward on the CPU.
 *
 * Names follow the GPU kernels: a block of Br query rows keeps its running
 * row max m_i, row sum l_i and unnormalised output acc; K/V stream through in
 * blocks of Bc rows. Scores are kept in the log2 domain (scale * log2(e)
 * folded into Q) so the exponentials are exp2, as on the GPUs.
 */
#include "cpu_kernel.h"

#include "dtype.h"

#include <math.h>
#include <string.h>

#define LOG2E 1.4426950408889634
#define LN2 0.6931471805599453

size_t xfa_cpu_scratch_floats(const xfa_plan *plan)
{
    const size_t Br = plan->Br, Bc = plan->Bc, d = plan->head_dim;
    /* Q_tile, acc (Br x d), K_tile, V_tile (Bc x d), S (Br x Bc), m_i, l_i (Br) */
    return 2 * Br * d + 2 * Bc * d + Br * Bc + 2 * Br;
}

float xfa_cpu_alibi_slope(const xfa_forward_args *a, const xfa_cpu_views *mem, int64_t b, int64_t h)
{
    return mem->alibi ? mem->alibi[xfa_tensor_index(&a->alibi, a->alibi.shape[0] == 1 ? 0 : b, 0, h, 0)] : 0.0f;
}

void xfa_cpu_key_range(const xfa_forward_args *a, int64_t row0, int64_t rows, int64_t *begin, int64_t *end)
{
    const int64_t shift = a->seqlen_k - a->seqlen_q;
    *begin = 0;
    *end = a->seqlen_k;
    if (a->window_left >= 0 && row0 + shift - a->window_left > 0) *begin = row0 + shift - a->window_left;
    if (a->window_right >= 0 && row0 + rows + shift + a->window_right < a->seqlen_k)
        *end = row0 + rows + shift + a->window_right;
}

float xfa_cpu_score_extras(const xfa_forward_args *a, const xfa_cpu_views *mem, float s, float slope, int64_t b,
                          int64_t h, int64_t i, int64_t j)
{
    if (a->softcap > 0.0f) s = a->softcap * tanhf(s / a->softcap);
    if (mem->alibi) s -= slope * fabsf((float)(i + a->seqlen_k - a->seqlen_q - j));
    if (mem->bias) {
        const int64_t bb = a->bias.shape[0] == 1 ? 0 : b, bh = a->bias.shape[2] == 1 ? 0 : h;
        s += xfa_load_f32(mem->bias, a->bias.dtype, xfa_tensor_index(&a->bias, bb, i, bh, j));
    }
    return s;
}

void xfa_cpu_forward_block(const xfa_forward_args *a, const xfa_cpu_views *mem, int64_t b, int64_t h, int64_t q_block,
                           float *scratch)
{
    const int64_t Br = a->plan.Br, Bc = a->plan.Bc, d = a->head_dim;
    const int64_t Sq = a->seqlen_q, Sk = a->seqlen_k;
    const int64_t hk = h / (a->heads_q / a->heads_kv);
    const int64_t row0 = q_block * Br;
    const int64_t rows = Sq - row0 < Br ? Sq - row0 : Br;
    /* Without extras, log2(e) is folded into Q so scores come out in log2 units; with
     * them, scores are finished in natural units and converted afterwards. */
    const bool extras = a->softcap > 0.0f || mem->alibi || mem->bias;
    const float q_scale = (float)(extras ? a->scale : a->scale * LOG2E);
    const float slope = xfa_cpu_alibi_slope(a, mem, b, h);

    float *Q_tile = scratch, *acc = Q_tile + Br * d, *K_tile = acc + Br * d, *V_tile = K_tile + Bc * d;
    float *S = V_tile + Bc * d, *m_i = S + Br * Bc, *l_i = m_i + Br;

    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < d; c++)
            Q_tile[r * d + c] = xfa_load_f32(mem->q, a->dtype, xfa_tensor_index(&a->q, b, row0 + r, h, c)) * q_scale;
        m_i[r] = -INFINITY;
        l_i[r] = 0.0f;
    }
    memset(acc, 0, (size_t)(Br * d) * sizeof *acc);

    /* The keys any row of this block may see (causal mask and window); blocks outside are skipped. */
    const int64_t wl = a->window_left, wr = a->window_right;
    int64_t key_begin, key_end;
    xfa_cpu_key_range(a, row0, rows, &key_begin, &key_end);
    for (int64_t col0 = key_begin; col0 < key_end; col0 += Bc) {
        const int64_t cols = key_end - col0 < Bc ? key_end - col0 : Bc;
        for (int64_t c = 0; c < cols; c++)
            for (int64_t x = 0; x < d; x++) {
                K_tile[c * d + x] = xfa_load_f32(mem->k, a->dtype, xfa_tensor_index(&a->k, b, col0 + c, hk, x));
                V_tile[c * d + x] = xfa_load_f32(mem->v, a->dtype, xfa_tensor_index(&a->v, b, col0 + c, hk, x));
            }
        for (int64_t r = 0; r < rows; r++) {
            float *S_row = S + r * Bc;
            float row_max = -INFINITY;
            for (int64_t c = 0; c < cols; c++) {
                const int64_t i = row0 + r, j = col0 + c;
                float s = -INFINITY;
                if (xfa_key_visible(wl, wr, i, j, Sq, Sk)) {
                    s = xfa_cpu_dot(Q_tile + r * d, K_tile + c * d, d);
                    if (extras) s = xfa_cpu_score_extras(a, mem, s, slope, b, h, i, j) * (float)LOG2E;
                }
                S_row[c] = s;
                row_max = fmaxf(row_max, s);
            }
            const float m_new = fmaxf(m_i[r], row_max);
            if (m_new == -INFINITY) continue; /* nothing visible yet: keep m_i, l_i, acc at their start */
            const float alpha = exp2f(m_i[r] - m_new); /* rescales what was accumulated under the old max */
            float row_sum = 0.0f;
            for (int64_t c = 0; c < cols; c++) {
                S_row[c] = exp2f(S_row[c] - m_new);
                row_sum += S_row[c];
            }
            l_i[r] = l_i[r] * alpha + row_sum;
            m_i[r] = m_new;
            float *acc_row = acc + r * d;
            for (int64_t x = 0; x < d; x++) acc_row[x] *= alpha;
            for (int64_t c = 0; c < cols; c++) {
                const float p = S_row[c];
                const float *V_row = V_tile + c * d;
                for (int64_t x = 0; x < d; x++) acc_row[x] += p * V_row[x];
            }
        }
    }

    for (int64_t r = 0; r < rows; r++) {
        const float inv_l = l_i[r] > 0.0f ? 1.0f / l_i[r] : 0.0f;
        for (int64_t x = 0; x < d; x++)
            xfa_store_f32(mem->o, a->dtype, xfa_tensor_index(&a->o, b, row0 + r, h, x), acc[r * d + x] * inv_l);
        if (mem->lse)
            mem->lse[xfa_tensor_index(&a->lse, b, row0 + r, h, 0)] =
                l_i[r] > 0.0f ? (float)((m_i[r] + log2((double)l_i[r])) * LN2) : -INFINITY;
    }
}
