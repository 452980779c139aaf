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
/* The inner loops work on 8-float vectors (GCC/Clang vector extensions: AVX on x86-64-v3,
 * pairs of SSE registers or scalars elsewhere); P.V holds ACC_CHUNK elements of a row of
 * acc in registers across the keys. d is a multiple of 32. */
typedef float vec8 __attribute__((vector_size(32)));
typedef float vec8_unaligned __attribute__((vector_size(32), aligned(4)));
#define ACC_CHUNK 32

/* macros, not functions: a vector-returning function would change ABI with the target */
#define load8(p) (*(const vec8_unaligned *)(p))
#define store8(p, v) (*(vec8_unaligned *)(p) = (v))

/* Row (b, s, h, 0..d-1) of a view as floats; a straight copy when it is contiguous f32. */
static void load_row(float *dst, const void *base, const xfa_tensor *t, xfa_dtype dtype, int64_t b, int64_t s,
                     int64_t h, int64_t d)
{
    const int64_t at = xfa_tensor_index(t, b, s, h, 0);
    if (t->stride[3] == 1 && dtype == XFA_DTYPE_F32) {
        memcpy(dst, (const float *)base + at, (size_t)d * sizeof *dst);
        return;
    }
    for (int64_t x = 0; x < d; x++) dst[x] = xfa_load_f32(base, dtype, at + x * t->stride[3]);
}

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

XFA_CPU_HOT void xfa_cpu_forward_block(const xfa_forward_args *a, const xfa_cpu_views *mem, int64_t b, int64_t h, int64_t q_block,
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
    int64_t key_begin, key_end;
    xfa_cpu_key_range(a, row0, rows, &key_begin, &key_end);
    for (int64_t col0 = key_begin; col0 < key_end; col0 += Bc) {
        const int64_t cols = key_end - col0 < Bc ? key_end - col0 : Bc;
        for (int64_t c = 0; c < cols; c++) {
            load_row(K_tile + c * d, mem->k, &a->k, a->dtype, b, col0 + c, hk, d);
            load_row(V_tile + c * d, mem->v, &a->v, a->dtype, b, col0 + c, hk, d);
        }
        for (int64_t r = 0; r < rows; r++) {
            const int64_t i = row0 + r;
            float *S_row = S + r * Bc;
            const float *q_row = Q_tile + r * d;
            int64_t lo, hi; /* this row's visible keys */
            xfa_visible_keys(a->window_left, a->window_right, i, Sq, Sk, &lo, &hi);
            const int64_t c_lo = lo - col0 > 0 ? lo - col0 : 0, c_hi = hi - col0 < cols - 1 ? hi - col0 : cols - 1;
            for (int64_t c = 0; c < cols; c++) S_row[c] = -INFINITY;
            for (int64_t c = c_lo; c <= c_hi; c++) {
                const float *k_row = K_tile + c * d;
                vec8 part = {0};
                for (int64_t x = 0; x < d; x += 8) part += load8(q_row + x) * load8(k_row + x);
                float s = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
                if (extras) s = xfa_cpu_score_extras(a, mem, s, slope, b, h, i, col0 + c) * (float)LOG2E;
                S_row[c] = s;
            }
            float row_max = -INFINITY;
            for (int64_t c = c_lo; c <= c_hi; c++) row_max = S_row[c] > row_max ? S_row[c] : row_max;
            const float m_new = m_i[r] > row_max ? m_i[r] : row_max;
            if (m_new == -INFINITY) continue; /* nothing visible yet: keep m_i, l_i, acc at their start */
            const float alpha = exp2f(m_i[r] - m_new); /* rescales what was accumulated under the old max */
            float row_sum = 0.0f;
            for (int64_t c = 0; c < cols; c++) {
                S_row[c] = c < c_lo || c > c_hi ? 0.0f : exp2f(S_row[c] - m_new);
                row_sum += S_row[c];
            }
            l_i[r] = l_i[r] * alpha + row_sum;
            m_i[r] = m_new;
            /* acc = acc * alpha + P V, ACC_CHUNK columns of acc held in registers across the keys */
            float *acc_row = acc + r * d;
            for (int64_t x0 = 0; x0 < d; x0 += ACC_CHUNK) {
                vec8 a0 = load8(acc_row + x0) * alpha, a1 = load8(acc_row + x0 + 8) * alpha;
                vec8 a2 = load8(acc_row + x0 + 16) * alpha, a3 = load8(acc_row + x0 + 24) * alpha;
                for (int64_t c = 0; c < cols; c++) {
                    const float p = S_row[c];
                    const float *v_row = V_tile + c * d + x0;
                    a0 += p * load8(v_row);
                    a1 += p * load8(v_row + 8);
                    a2 += p * load8(v_row + 16);
                    a3 += p * load8(v_row + 24);
                }
                store8(acc_row + x0, a0);
                store8(acc_row + x0 + 8, a1);
                store8(acc_row + x0 + 16, a2);
                store8(acc_row + x0 + 24, a3);
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
