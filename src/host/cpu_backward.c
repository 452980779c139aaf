/*
 * cpu_backward.c - FlashAttention-2's backward on the CPU, tiled, in f32.
 *
 * P is recomputed block by block from Q, K and the forward's LSE, so no
 * Sq x Sk matrix exists. Deterministic by construction: two passes that each
 * own what they write, instead of one pass with float atomics on dQ.
 *   pass 1, per K/V block (b, kv head, Bc rows): dV_j = sum_i P_ij dO_i and
 *           dK_j = scale sum_i dS_ij Q_i over every query row of the GQA group;
 *   pass 2, per query block (b, head, Br rows): dQ_i = scale sum_j dS_ij K_j,
 * with D_i = rowsum(dO_i * O_i) and dS_ij = P_ij (dO_i . V_j - D_i) * dcap_ij.
 */
#include "cpu_kernel.h"

#include "dtype.h"

#include <math.h>
#include <string.h>

size_t xfa_cpu_backward_scratch_floats(const xfa_plan *plan)
{
    const size_t Br = plan->Br, Bc = plan->Bc, d = plan->head_dim;
    /* K, V, dK/dQ-acc, dV (Bc x d or Br x d), Q, dO (Br x d), P, dS (Br x Bc), D_i, lse_i (Br) */
    const size_t tiles = 4 * (Bc > Br ? Bc : Br) * d + 2 * Br * d;
    return tiles + 2 * Br * Bc + 2 * Br;
}

static void load_rows(float *dst, const void *src, const xfa_tensor *t, xfa_dtype dtype, int64_t b, int64_t row0,
                      int64_t rows, int64_t h, int64_t d)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t x = 0; x < d; x++) dst[r * d + x] = xfa_load_f32(src, dtype, xfa_tensor_index(t, b, row0 + r, h, x));
}

static void store_rows(void *dst, const xfa_tensor *t, xfa_dtype dtype, const float *src, int64_t b, int64_t row0,
                       int64_t rows, int64_t h, int64_t d)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t x = 0; x < d; x++) xfa_store_f32(dst, dtype, xfa_tensor_index(t, b, row0 + r, h, x), src[r * d + x]);
}

/* What both passes need of a query block: Q, dO, D_i = rowsum(dO * O), lse_i. */
static void load_query_block(const xfa_backward_args *a, const xfa_cpu_views *mem, const xfa_cpu_grad_views *g,
                             int64_t b, int64_t h, int64_t row0, int64_t rows, float *Q_tile, float *dO_tile,
                             float *D_i, float *lse_i)
{
    const xfa_forward_args *f = &a->fwd;
    const int64_t d = f->head_dim;
    load_rows(Q_tile, mem->q, &f->q, f->dtype, b, row0, rows, h, d);
    load_rows(dO_tile, g->d_o, &a->d_o, f->dtype, b, row0, rows, h, d);
    for (int64_t r = 0; r < rows; r++) {
        float sum = 0;
        for (int64_t x = 0; x < d; x++)
            sum += dO_tile[r * d + x] * xfa_load_f32(g->o, f->dtype, xfa_tensor_index(&f->o, b, row0 + r, h, x));
        D_i[r] = sum;
        lse_i[r] = g->lse[xfa_tensor_index(&f->lse, b, row0 + r, h, 0)];
    }
}

/* P and dS of a (query block, key block) pair from the tiles, recomputed as the forward did. */
static void probabilities_and_dS(const xfa_backward_args *a, const xfa_cpu_views *mem, int64_t b, int64_t h,
                                 int64_t row0, int64_t rows, int64_t col0, int64_t cols, const float *Q_tile,
                                 const float *dO_tile, const float *K_tile, const float *V_tile, const float *D_i,
                                 const float *lse_i, float *P, float *dS)
{
    const xfa_forward_args *f = &a->fwd;
    const int64_t d = f->head_dim, Bc = f->plan.Bc;
    const float slope = xfa_cpu_alibi_slope(f, mem, b, h);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            const int64_t i = row0 + r, j = col0 + c;
            float p = 0.0f, dcap = 1.0f;
            if (lse_i[r] != -INFINITY &&
                xfa_key_visible(f->window_left, f->window_right, i, j, f->seqlen_q, f->seqlen_k)) {
                const float x = xfa_cpu_dot(Q_tile + r * d, K_tile + c * d, d) * f->scale;
                const float s = xfa_cpu_score_extras(f, mem, x, slope, b, h, i, j);
                p = expf(s - lse_i[r]);
                if (f->softcap > 0.0f) {
                    const float t = tanhf(x / f->softcap);
                    dcap = 1.0f - t * t;
                }
            }
            const float dp = xfa_cpu_dot(dO_tile + r * d, V_tile + c * d, d);
            P[r * Bc + c] = p;
            dS[r * Bc + c] = p * (dp - D_i[r]) * dcap;
        }
}

static bool block_visible(const xfa_forward_args *f, int64_t row0, int64_t rows, int64_t col0, int64_t cols)
{
    int64_t begin, end;
    xfa_cpu_key_range(f, row0, rows, &begin, &end);
    return begin < col0 + cols && col0 < end;
}

void xfa_cpu_backward_kv_block(const xfa_backward_args *a, const xfa_cpu_views *mem, const xfa_cpu_grad_views *g,
                               int64_t b, int64_t hk, int64_t kv_block, float *scratch)
{
    const xfa_forward_args *f = &a->fwd;
    const int64_t Br = f->plan.Br, Bc = f->plan.Bc, d = f->head_dim, Sq = f->seqlen_q, Sk = f->seqlen_k;
    const int64_t group = f->heads_q / f->heads_kv, col0 = kv_block * Bc, cols = Sk - col0 < Bc ? Sk - col0 : Bc;
    const int64_t tile = (Bc > Br ? Bc : Br) * d;
    float *K_tile = scratch, *V_tile = K_tile + tile, *dK_acc = V_tile + tile, *dV_acc = dK_acc + tile;
    float *Q_tile = dV_acc + tile, *dO_tile = Q_tile + Br * d, *P = dO_tile + Br * d, *dS = P + Br * Bc;
    float *D_i = dS + Br * Bc, *lse_i = D_i + Br;

    load_rows(K_tile, mem->k, &f->k, f->dtype, b, col0, cols, hk, d);
    load_rows(V_tile, mem->v, &f->v, f->dtype, b, col0, cols, hk, d);
    memset(dK_acc, 0, (size_t)(cols * d) * sizeof *dK_acc);
    memset(dV_acc, 0, (size_t)(cols * d) * sizeof *dV_acc);
    for (int64_t h = hk * group; h < (hk + 1) * group; h++)
        for (int64_t row0 = 0; row0 < Sq; row0 += Br) {
            const int64_t rows = Sq - row0 < Br ? Sq - row0 : Br;
            if (!block_visible(f, row0, rows, col0, cols)) continue;
            load_query_block(a, mem, g, b, h, row0, rows, Q_tile, dO_tile, D_i, lse_i);
            probabilities_and_dS(a, mem, b, h, row0, rows, col0, cols, Q_tile, dO_tile, K_tile, V_tile, D_i, lse_i, P,
                                 dS);
            for (int64_t c = 0; c < cols; c++)
                for (int64_t r = 0; r < rows; r++) {
                    const float p = P[r * Bc + c], ds = dS[r * Bc + c] * f->scale;
                    for (int64_t x = 0; x < d; x++) {
                        dV_acc[c * d + x] += p * dO_tile[r * d + x];
                        dK_acc[c * d + x] += ds * Q_tile[r * d + x];
                    }
                }
        }
    store_rows(g->dk, &a->dk, f->dtype, dK_acc, b, col0, cols, hk, d);
    store_rows(g->dv, &a->dv, f->dtype, dV_acc, b, col0, cols, hk, d);
}

void xfa_cpu_backward_q_block(const xfa_backward_args *a, const xfa_cpu_views *mem, const xfa_cpu_grad_views *g,
                              int64_t b, int64_t h, int64_t q_block, float *scratch)
{
    const xfa_forward_args *f = &a->fwd;
    const int64_t Br = f->plan.Br, Bc = f->plan.Bc, d = f->head_dim, Sq = f->seqlen_q;
    const int64_t hk = h / (f->heads_q / f->heads_kv), row0 = q_block * Br, rows = Sq - row0 < Br ? Sq - row0 : Br;
    const int64_t tile = (Bc > Br ? Bc : Br) * d;
    float *K_tile = scratch, *V_tile = K_tile + tile, *dQ_acc = V_tile + tile;
    float *Q_tile = dQ_acc + 2 * tile, *dO_tile = Q_tile + Br * d, *P = dO_tile + Br * d, *dS = P + Br * Bc;
    float *D_i = dS + Br * Bc, *lse_i = D_i + Br;

    load_query_block(a, mem, g, b, h, row0, rows, Q_tile, dO_tile, D_i, lse_i);
    memset(dQ_acc, 0, (size_t)(rows * d) * sizeof *dQ_acc);
    int64_t key_begin, key_end;
    xfa_cpu_key_range(f, row0, rows, &key_begin, &key_end);
    for (int64_t col0 = key_begin; col0 < key_end; col0 += Bc) {
        const int64_t cols = key_end - col0 < Bc ? key_end - col0 : Bc;
        load_rows(K_tile, mem->k, &f->k, f->dtype, b, col0, cols, hk, d);
        load_rows(V_tile, mem->v, &f->v, f->dtype, b, col0, cols, hk, d);
        probabilities_and_dS(a, mem, b, h, row0, rows, col0, cols, Q_tile, dO_tile, K_tile, V_tile, D_i, lse_i, P, dS);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                const float ds = dS[r * Bc + c] * f->scale;
                for (int64_t x = 0; x < d; x++) dQ_acc[r * d + x] += ds * K_tile[c * d + x];
            }
    }
    store_rows(g->dq, &a->dq, f->dtype, dQ_acc, b, row0, rows, h, d);
}
