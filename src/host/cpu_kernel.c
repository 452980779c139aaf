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
#include "reference.h"

#include <math.h>
#include <string.h>

#define LOG2E 1.4426950408889634
#define LN2 0.6931471805599453

/* q . k over d (a multiple of 8): eight partial sums so the compiler can vectorise
 * without reassociating floats behind our back. */
static float dot(const float *q, const float *k, int64_t d)
{
    float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t x = 0; x < d; x += 8)
        for (int j = 0; j < 8; j++) part[j] += q[x + j] * k[x + j];
    return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

size_t xfa_cpu_scratch_floats(const xfa_plan *plan)
{
    const size_t Br = plan->Br, Bc = plan->Bc, d = plan->head_dim;
    /* Q_tile, acc (Br x d), K_tile, V_tile (Bc x d), S (Br x Bc), m_i, l_i (Br) */
    return 2 * Br * d + 2 * Bc * d + Br * Bc + 2 * Br;
}

void xfa_cpu_forward_block(const xfa_forward_args *a, const void *q, const void *k, const void *v, void *o, float *lse,
                           int64_t b, int64_t h, int64_t q_block, float *scratch)
{
    const int64_t Br = a->plan.Br, Bc = a->plan.Bc, d = a->head_dim;
    const int64_t Sq = a->seqlen_q, Sk = a->seqlen_k;
    const int64_t hk = h / (a->heads_q / a->heads_kv);
    const int64_t row0 = q_block * Br;
    const int64_t rows = Sq - row0 < Br ? Sq - row0 : Br;
    const float scale_log2 = (float)(a->scale * LOG2E);

    float *Q_tile = scratch, *acc = Q_tile + Br * d, *K_tile = acc + Br * d, *V_tile = K_tile + Bc * d;
    float *S = V_tile + Bc * d, *m_i = S + Br * Bc, *l_i = m_i + Br;

    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < d; c++)
            Q_tile[r * d + c] = xfa_load_f32(q, a->dtype, xfa_tensor_index(&a->q, b, row0 + r, h, c)) * scale_log2;
        m_i[r] = -INFINITY;
        l_i[r] = 0.0f;
    }
    memset(acc, 0, (size_t)(Br * d) * sizeof *acc);

    /* Causal: the last key any row of this block sees; later blocks are skipped. */
    int64_t key_end = Sk;
    if (a->causal) {
        key_end = row0 + rows - 1 + Sk - Sq + 1;
        if (key_end > Sk) key_end = Sk;
    }
    for (int64_t col0 = 0; col0 < key_end; col0 += Bc) {
        const int64_t cols = key_end - col0 < Bc ? key_end - col0 : Bc;
        for (int64_t c = 0; c < cols; c++)
            for (int64_t x = 0; x < d; x++) {
                K_tile[c * d + x] = xfa_load_f32(k, a->dtype, xfa_tensor_index(&a->k, b, col0 + c, hk, x));
                V_tile[c * d + x] = xfa_load_f32(v, a->dtype, xfa_tensor_index(&a->v, b, col0 + c, hk, x));
            }
        for (int64_t r = 0; r < rows; r++) {
            float *S_row = S + r * Bc;
            float row_max = -INFINITY;
            for (int64_t c = 0; c < cols; c++) {
                float s = -INFINITY;
                if (xfa_visible(a->causal, row0 + r, col0 + c, Sq, Sk)) s = dot(Q_tile + r * d, K_tile + c * d, d);
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
            xfa_store_f32(o, a->dtype, xfa_tensor_index(&a->o, b, row0 + r, h, x), acc[r * d + x] * inv_l);
        if (lse)
            lse[xfa_tensor_index(&a->lse, b, row0 + r, h, 0)] =
                l_i[r] > 0.0f ? (float)((m_i[r] + log2((double)l_i[r])) * LN2) : -INFINITY;
    }
}
