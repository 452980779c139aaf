/* reference.c - plain attention on the host (see reference.h). */
#include "alloc.h"
#include "reference.h"

#include "dtype.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

xfa_host_view xfa_host_view_of(const xfa_tensor *t, const void *buffer_base)
{
    xfa_host_view h;
    h.data = (const char *)buffer_base + t->offset;
    h.dtype = t->dtype;
    memcpy(h.shape, t->shape, sizeof h.shape);
    memcpy(h.stride, t->stride, sizeof h.stride);
    return h;
}

/* The view's values gathered into a dense (B, H, S, D) array of doubles, so the
 * loops below read contiguous rows. NULL on allocation failure. */
static double *gather(const xfa_host_view *t)
{
    const int64_t B = t->shape[0], S = t->shape[1], H = t->shape[2], D = t->shape[3];
    double *out = xfa_malloc((size_t)(B * H * S * D) * sizeof *out);
    if (!out) return NULL;
    double *dst = out;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++)
                for (int64_t d = 0; d < D; d++)
                    *dst++ = xfa_load_f32(t->data, t->dtype,
                                          b * t->stride[0] + s * t->stride[1] + h * t->stride[2] + d * t->stride[3]);
    return out;
}

xfa_reference_problem xfa_reference_problem_make(xfa_host_view q, xfa_host_view k, xfa_host_view v, double scale,
                                                 bool causal)
{
    xfa_reference_problem p;
    memset(&p, 0, sizeof p);
    p.q = q;
    p.k = k;
    p.v = v;
    p.scale = scale;
    p.causal = causal;
    p.window_left = -1;
    p.window_right = -1;
    return p;
}

static double view_at(const xfa_host_view *t, int64_t b, int64_t s, int64_t h, int64_t d)
{
    /* broadcast dimensions of size 1 */
    if (t->shape[0] == 1) b = 0;
    if (t->shape[2] == 1) h = 0;
    return xfa_load_f32(t->data, t->dtype, b * t->stride[0] + s * t->stride[1] + h * t->stride[2] + d * t->stride[3]);
}

static bool visible(const xfa_reference_problem *p, int64_t i, int64_t j)
{
    return xfa_key_visible(p->window_left, p->causal ? 0 : p->window_right, i, j, p->q.shape[1], p->k.shape[1]);
}

/* Softcap, ALiBi and bias applied to a scaled score, in double. */
static double score_extras(const xfa_reference_problem *p, double s, int64_t b, int64_t h, int64_t i, int64_t j)
{
    if (p->softcap > 0) s = p->softcap * tanh(s / p->softcap);
    if (p->alibi.data)
        s -= view_at(&p->alibi, b, 0, h, 0) * fabs((double)(i + p->k.shape[1] - p->q.shape[1] - j));
    if (p->bias.data) s += view_at(&p->bias, b, i, h, j);
    return s;
}

xfa_status xfa_reference_forward(const xfa_reference_problem *p, double *o, double *lse)
{
    const int64_t B = p->q.shape[0], Sq = p->q.shape[1], Hq = p->q.shape[2], D = p->q.shape[3];
    const int64_t Sk = p->k.shape[1], Hkv = p->k.shape[2], group = Hq / Hkv;
    double *score = xfa_malloc((size_t)Sk * sizeof *score);
    double *Q = gather(&p->q), *K = gather(&p->k), *V = gather(&p->v);
    xfa_status st = XFA_ERROR_OUT_OF_HOST_MEMORY;
    if (!score || !Q || !K || !V) goto done;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < Sq; i++) {
                const int64_t hk = h / group;
                const double *q_row = Q + ((b * Hq + h) * Sq + i) * D;
                const double *K_head = K + (b * Hkv + hk) * Sk * D, *V_head = V + (b * Hkv + hk) * Sk * D;
                double *out = o + ((b * Sq + i) * Hq + h) * D;
                double max = -INFINITY;
                for (int64_t j = 0; j < Sk; j++) {
                    if (!visible(p, i, j)) { score[j] = -INFINITY; continue; }
                    double dot = 0;
                    for (int64_t d = 0; d < D; d++) dot += q_row[d] * K_head[j * D + d];
                    score[j] = score_extras(p, dot * p->scale, b, h, i, j);
                    if (score[j] > max) max = score[j];
                }
                memset(out, 0, (size_t)D * sizeof *out);
                double sum = 0;
                if (max != -INFINITY) {
                    for (int64_t j = 0; j < Sk; j++) {
                        if (score[j] == -INFINITY) continue;
                        const double w = exp(score[j] - max);
                        sum += w;
                        for (int64_t d = 0; d < D; d++) out[d] += w * V_head[j * D + d];
                    }
                    for (int64_t d = 0; d < D; d++) out[d] /= sum;
                }
                if (lse) lse[(b * Hq + h) * Sq + i] = sum > 0 ? max + log(sum) : -INFINITY;
            }
    st = XFA_SUCCESS;
done:
    xfa_free(score);
    xfa_free(Q);
    xfa_free(K);
    xfa_free(V);
    return st;
}


xfa_status xfa_reference_unfused(const xfa_reference_problem *p, xfa_dtype prec, float *o)
{
    const int64_t B = p->q.shape[0], Sq = p->q.shape[1], Hq = p->q.shape[2], D = p->q.shape[3];
    const int64_t Sk = p->k.shape[1], Hkv = p->k.shape[2], group = Hq / Hkv;
    float *prob = xfa_malloc((size_t)Sk * sizeof *prob);
    double *Q = gather(&p->q), *K = gather(&p->k), *V = gather(&p->v); /* exact copies of the stored values */
    xfa_status st = XFA_ERROR_OUT_OF_HOST_MEMORY;
    if (!prob || !Q || !K || !V) goto done;
    const float scale = (float)p->scale;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < Sq; i++) {
                const int64_t hk = h / group;
                const double *q_row = Q + ((b * Hq + h) * Sq + i) * D;
                const double *K_head = K + (b * Hkv + hk) * Sk * D, *V_head = V + (b * Hkv + hk) * Sk * D;
                float *out = o + ((b * Sq + i) * Hq + h) * D;
                /* S = Q K^T * scale, f32 accumulation, stored in the dtype */
                float max = -INFINITY;
                for (int64_t j = 0; j < Sk; j++) {
                    if (!visible(p, i, j)) { prob[j] = -INFINITY; continue; }
                    float dot = 0;
                    for (int64_t d = 0; d < D; d++) dot += (float)q_row[d] * (float)K_head[j * D + d];
                    const float scaled = xfa_round_to(prec, xfa_round_to(prec, dot) * scale);
                    prob[j] = xfa_round_to(prec, (float)score_extras(p, scaled, b, h, i, j));
                    if (prob[j] > max) max = prob[j];
                }
                /* P = softmax(S) computed in f32, stored in the dtype */
                float sum = 0;
                for (int64_t j = 0; j < Sk; j++) {
                    prob[j] = max == -INFINITY || prob[j] == -INFINITY ? 0.0f : expf(prob[j] - max);
                    sum += prob[j];
                }
                for (int64_t j = 0; j < Sk; j++) prob[j] = sum > 0 ? xfa_round_to(prec, prob[j] / sum) : 0.0f;
                /* O = P V, f32 accumulation in key order, stored in the dtype */
                for (int64_t d = 0; d < D; d++) out[d] = 0.0f;
                for (int64_t j = 0; j < Sk; j++)
                    for (int64_t d = 0; d < D; d++) out[d] += prob[j] * (float)V_head[j * D + d];
                for (int64_t d = 0; d < D; d++) out[d] = xfa_round_to(prec, out[d]);
            }
    st = XFA_SUCCESS;
done:
    xfa_free(prob);
    xfa_free(Q);
    xfa_free(K);
    xfa_free(V);
    return st;
}

/*
 * Backward, for one (batch, head) at a time with the whole Sq x Sk matrices:
 *   P = softmax(S), dP_ij = dO_i . V_j, D_i = sum_j P_ij dP_ij,
 *   dS_ij = P_ij (dP_ij - D_i) * dcap_ij      (dcap: the softcap's derivative, else 1)
 *   dQ_i = scale sum_j dS_ij K_j,  dK_j += scale sum_i dS_ij Q_i,  dV_j += sum_i P_ij dO_i.
 * `round_to_dtype` rounds every stored matrix to `prec` (the unfused yardstick).
 */
static xfa_status backward(const xfa_reference_problem *p, const xfa_host_view *d_o, bool round_to_dtype,
                           xfa_dtype prec, double *dq, double *dk, double *dv)
{
#define R(x) (round_to_dtype ? (double)xfa_round_to(prec, (float)(x)) : (x))
    const int64_t B = p->q.shape[0], Sq = p->q.shape[1], Hq = p->q.shape[2], D = p->q.shape[3];
    const int64_t Sk = p->k.shape[1], Hkv = p->k.shape[2], group = Hq / Hkv;
    const size_t n_kv = (size_t)(B * Sk * Hkv * D), n_mat = (size_t)(Sq * Sk);
    double *P = xfa_malloc(n_mat * sizeof *P), *dS = xfa_malloc(n_mat * sizeof *dS), *dcap = xfa_malloc(n_mat * sizeof *dcap);
    double *Q = gather(&p->q), *K = gather(&p->k), *V = gather(&p->v), *dO = gather(d_o);
    xfa_status st = XFA_ERROR_OUT_OF_HOST_MEMORY;
    if (!P || !dS || !dcap || !Q || !K || !V || !dO) goto done;
    memset(dk, 0, n_kv * sizeof *dk);
    memset(dv, 0, n_kv * sizeof *dv);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            const int64_t hk = h / group;
            const double *Qh = Q + (b * Hq + h) * Sq * D, *dOh = dO + (b * Hq + h) * Sq * D;
            const double *Kh = K + (b * Hkv + hk) * Sk * D, *Vh = V + (b * Hkv + hk) * Sk * D;
            for (int64_t i = 0; i < Sq; i++) {
                double *Pi = P + i * Sk, max = -INFINITY, sum = 0;
                for (int64_t j = 0; j < Sk; j++) {
                    Pi[j] = -INFINITY;
                    dcap[i * Sk + j] = 0;
                    if (!visible(p, i, j)) continue;
                    double dot = 0;
                    for (int64_t d = 0; d < D; d++) dot += Qh[i * D + d] * Kh[j * D + d];
                    const double x = R(R(dot) * p->scale);
                    Pi[j] = R(score_extras(p, x, b, h, i, j));
                    const double t = p->softcap > 0 ? tanh(x / p->softcap) : 0;
                    dcap[i * Sk + j] = 1 - t * t;
                    if (Pi[j] > max) max = Pi[j];
                }
                for (int64_t j = 0; j < Sk; j++) {
                    Pi[j] = max == -INFINITY || Pi[j] == -INFINITY ? 0 : exp(Pi[j] - max);
                    sum += Pi[j];
                }
                for (int64_t j = 0; j < Sk; j++) Pi[j] = sum > 0 ? R(Pi[j] / sum) : 0;
                double Di = 0;
                for (int64_t j = 0; j < Sk; j++) {
                    double dp = 0;
                    for (int64_t d = 0; d < D; d++) dp += dOh[i * D + d] * Vh[j * D + d];
                    dS[i * Sk + j] = R(dp);
                    Di += Pi[j] * dS[i * Sk + j];
                }
                for (int64_t j = 0; j < Sk; j++) dS[i * Sk + j] = R(Pi[j] * (dS[i * Sk + j] - Di) * dcap[i * Sk + j]);
            }
            for (int64_t i = 0; i < Sq; i++) {
                double *dq_row = dq + ((b * Sq + i) * Hq + h) * D;
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < Sk; j++) acc += dS[i * Sk + j] * Kh[j * D + d];
                    dq_row[d] = R(acc * p->scale);
                }
            }
            for (int64_t j = 0; j < Sk; j++) {
                double *dk_row = dk + ((b * Sk + j) * Hkv + hk) * D, *dv_row = dv + ((b * Sk + j) * Hkv + hk) * D;
                for (int64_t i = 0; i < Sq; i++) {
                    const double ds = dS[i * Sk + j] * p->scale, pij = P[i * Sk + j];
                    for (int64_t d = 0; d < D; d++) {
                        dk_row[d] += ds * Qh[i * D + d];
                        dv_row[d] += pij * dOh[i * D + d];
                    }
                }
            }
        }
    if (round_to_dtype)
        for (size_t i = 0; i < n_kv; i++) {
            dk[i] = R(dk[i]);
            dv[i] = R(dv[i]);
        }
    st = XFA_SUCCESS;
#undef R
done:
    xfa_free(P);
    xfa_free(dS);
    xfa_free(dcap);
    xfa_free(Q);
    xfa_free(K);
    xfa_free(V);
    xfa_free(dO);
    return st;
}

xfa_status xfa_reference_backward(const xfa_reference_problem *p, const xfa_host_view *d_o, double *dq, double *dk,
                                  double *dv)
{
    return backward(p, d_o, false, XFA_DTYPE_F32, dq, dk, dv);
}

xfa_status xfa_reference_backward_unfused(const xfa_reference_problem *p, const xfa_host_view *d_o, xfa_dtype prec,
                                          double *dq, double *dk, double *dv)
{
    return backward(p, d_o, true, prec, dq, dk, dv);
}
