/*
 * transformer_block.c - one pre-norm attention block of a small transformer:
 *   h = RMSNorm(x); q, k, v = h Wq, h Wk, h Wv; RoPE on q and k;
 *   a = causal attention (xfa, grouped-query: 4 query heads share 2 K/V heads);
 *   y = x + a Wo.
 * The projections run on the host; the attention runs on the backend named on
 * the command line (default: auto) and again on the CPU backend, and the two
 * blocks' outputs must agree.
 *
 *   ./example_transformer_block [backend]
 */
#include <xfa.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH = 2, SEQ = 48, D_MODEL = 256, HEADS = 4, KV_HEADS = 2, HEAD_DIM = D_MODEL / HEADS };
#define KV_DIM (KV_HEADS * HEAD_DIM)
#define TOKENS (BATCH * SEQ)

static float frand(unsigned *state)
{
    *state = *state * 1664525u + 1013904223u;
    return ((float)(*state >> 8) / 16777216.0f - 0.5f) * 2.0f;
}

/* out (rows x cols) = in (rows x inner) * w (inner x cols) */
static void matmul(const float *in, const float *w, float *out, int rows, int inner, int cols)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            float acc = 0;
            for (int i = 0; i < inner; i++) acc += in[r * inner + i] * w[i * cols + c];
            out[r * cols + c] = acc;
        }
}

static void rms_norm(const float *x, float *out)
{
    for (int t = 0; t < TOKENS; t++) {
        float ss = 0;
        for (int i = 0; i < D_MODEL; i++) ss += x[t * D_MODEL + i] * x[t * D_MODEL + i];
        const float inv = 1.0f / sqrtf(ss / D_MODEL + 1e-6f);
        for (int i = 0; i < D_MODEL; i++) out[t * D_MODEL + i] = x[t * D_MODEL + i] * inv;
    }
}

/* Rotary embedding on (tokens, heads, HEAD_DIM) rows: pairs (i, i + HEAD_DIM/2) rotate by pos * theta_i. */
static void rope(float *x, int heads)
{
    for (int t = 0; t < TOKENS; t++) {
        const int pos = t % SEQ;
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < HEAD_DIM / 2; i++) {
                const float theta = (float)pos * powf(10000.0f, -2.0f * (float)i / HEAD_DIM);
                float *row = x + (t * heads + h) * HEAD_DIM;
                const float a = row[i], b = row[i + HEAD_DIM / 2];
                row[i] = a * cosf(theta) - b * sinf(theta);
                row[i + HEAD_DIM / 2] = a * sinf(theta) + b * cosf(theta);
            }
    }
}

/* Causal GQA attention of q (BSHD) over k, v on `backend`; writes attn (BSHD). */
static int attention(xfa_backend backend, const float *q, const float *k, const float *v, float *attn, char *name,
                     size_t name_size)
{
    xfa_context *ctx = NULL;
    if (xfa_context_create(backend, 0, &ctx) != XFA_SUCCESS) {
        fprintf(stderr, "context: %s\n", xfa_last_error());
        return 1;
    }
    xfa_device_info info;
    xfa_context_get_info(ctx, &info);
    snprintf(name, name_size, "%s (%s, %s path)", xfa_backend_name(info.backend), info.name, info.path);
    const size_t q_bytes = sizeof(float) * TOKENS * D_MODEL, kv_bytes = sizeof(float) * TOKENS * KV_DIM;
    xfa_buffer *buf = NULL;
    int rc = 1;
    if (xfa_buffer_create(ctx, 2 * q_bytes + 2 * kv_bytes, &buf) || xfa_buffer_upload(buf, 0, q, q_bytes) ||
        xfa_buffer_upload(buf, q_bytes, k, kv_bytes) || xfa_buffer_upload(buf, q_bytes + kv_bytes, v, kv_bytes))
        goto done;
    /* one buffer, four views: the library needs nothing else */
    const xfa_tensor tq = xfa_tensor_bshd(buf, 0, XFA_DTYPE_F32, BATCH, SEQ, HEADS, HEAD_DIM);
    const xfa_tensor tk = xfa_tensor_bshd(buf, q_bytes, XFA_DTYPE_F32, BATCH, SEQ, KV_HEADS, HEAD_DIM);
    const xfa_tensor tv = xfa_tensor_bshd(buf, q_bytes + kv_bytes, XFA_DTYPE_F32, BATCH, SEQ, KV_HEADS, HEAD_DIM);
    const xfa_tensor to = xfa_tensor_bshd(buf, q_bytes + 2 * kv_bytes, XFA_DTYPE_F32, BATCH, SEQ, HEADS, HEAD_DIM);
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.causal = 1;
    if (xfa_attention_forward(ctx, &params, &tq, &tk, &tv, &to, NULL) ||
        xfa_buffer_download(buf, q_bytes + 2 * kv_bytes, attn, q_bytes))
        goto done;
    rc = 0;
done:
    if (rc) fprintf(stderr, "%s: %s\n", name, xfa_context_last_error(ctx));
    xfa_buffer_destroy(&buf);
    xfa_context_destroy(&ctx);
    return rc;
}

int main(int argc, char **argv)
{
    xfa_backend backend = XFA_BACKEND_AUTO;
    if (argc > 1 && xfa_backend_from_name(argv[1], &backend) != XFA_SUCCESS) {
        fprintf(stderr, "unknown backend %s\n", argv[1]);
        return 2;
    }
    unsigned seed = 42;
    float *x = malloc(sizeof(float) * TOKENS * D_MODEL), *h = malloc(sizeof(float) * TOKENS * D_MODEL);
    float *wq = malloc(sizeof(float) * D_MODEL * D_MODEL), *wo = malloc(sizeof(float) * D_MODEL * D_MODEL);
    float *wk = malloc(sizeof(float) * D_MODEL * KV_DIM), *wv = malloc(sizeof(float) * D_MODEL * KV_DIM);
    float *q = malloc(sizeof(float) * TOKENS * D_MODEL), *k = malloc(sizeof(float) * TOKENS * KV_DIM);
    float *v = malloc(sizeof(float) * TOKENS * KV_DIM);
    float *attn[2], *y[2];
    for (int i = 0; i < 2; i++) {
        attn[i] = malloc(sizeof(float) * TOKENS * D_MODEL);
        y[i] = malloc(sizeof(float) * TOKENS * D_MODEL);
    }
    const float w_scale = 1.0f / sqrtf(D_MODEL);
    for (int i = 0; i < TOKENS * D_MODEL; i++) x[i] = frand(&seed);
    for (int i = 0; i < D_MODEL * D_MODEL; i++) wq[i] = frand(&seed) * w_scale, wo[i] = frand(&seed) * w_scale;
    for (int i = 0; i < D_MODEL * KV_DIM; i++) wk[i] = frand(&seed) * w_scale, wv[i] = frand(&seed) * w_scale;

    rms_norm(x, h);
    matmul(h, wq, q, TOKENS, D_MODEL, D_MODEL); /* (tokens, heads * head_dim) is BSHD already */
    matmul(h, wk, k, TOKENS, D_MODEL, KV_DIM);
    matmul(h, wv, v, TOKENS, D_MODEL, KV_DIM);
    rope(q, HEADS);
    rope(k, KV_HEADS);

    int devices = 0;
    if (xfa_device_count(backend, &devices) != XFA_SUCCESS || devices == 0) {
        printf("SKIP: no device for backend %s\n", argc > 1 ? argv[1] : "auto");
        return 77;
    }
    const xfa_backend backends[2] = {backend, XFA_BACKEND_CPU};
    char names[2][256];
    for (int i = 0; i < 2; i++) {
        if (attention(backends[i], q, k, v, attn[i], names[i], sizeof names[i])) return 1;
        matmul(attn[i], wo, y[i], TOKENS, D_MODEL, D_MODEL);
        for (int j = 0; j < TOKENS * D_MODEL; j++) y[i][j] += x[j];
    }
    double worst = 0, norm = 0;
    for (int j = 0; j < TOKENS * D_MODEL; j++) {
        worst = fmax(worst, fabs(y[0][j] - y[1][j]));
        norm = fmax(norm, fabs(y[1][j]));
    }
    printf("transformer block (%d tokens, d_model %d, %d/%d heads) on %s\n", TOKENS, D_MODEL, HEADS, KV_HEADS, names[0]);
    printf("max |y - y_cpu| = %.3g (max |y| %.3g)\n", worst, norm);
    const int ok = worst <= 1e-4 * fmax(1.0, norm);
    printf("%s\n", ok ? "PASS" : "FAIL");
    free(x); free(h); free(wq); free(wo); free(wk); free(wv); free(q); free(k); free(v);
    for (int i = 0; i < 2; i++) free(attn[i]), free(y[i]);
    return ok ? 0 : 1;
}
