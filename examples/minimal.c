/*
 * minimal.c - the smallest complete use of xfa: causal attention on random
 * f32 inputs with the simple API, checked against a naive computation.
 *
 *   cc minimal.c $(pkg-config --cflags --libs xfa) -lm && ./a.out [backend]
 */
#include <xfa.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 1, S = 100, H = 2, D = 64 };

#define CHECK(call)                                                                             \
    do {                                                                                        \
        xfa_status st_ = (call);                                                                \
        if (st_ != XFA_SUCCESS) {                                                               \
            fprintf(stderr, "%s failed: %s\n", #call, ctx ? xfa_context_last_error(ctx) : xfa_last_error()); \
            return 1;                                                                           \
        }                                                                                       \
    } while (0)

/* Row i of head h attends keys 0..i; BSHD layout. */
static double naive(const float *q, const float *k, const float *v, int i, int h, int d)
{
    double max = -INFINITY, sum = 0, out = 0, score[S];
    for (int j = 0; j <= i; j++) {
        double dot = 0;
        for (int x = 0; x < D; x++) dot += (double)q[(i * H + h) * D + x] * k[(j * H + h) * D + x];
        score[j] = dot / sqrt((double)D);
        max = fmax(max, score[j]);
    }
    for (int j = 0; j <= i; j++) {
        const double w = exp(score[j] - max);
        sum += w;
        out += w * v[(j * H + h) * D + d];
    }
    return out / sum;
}

int main(int argc, char **argv)
{
    xfa_context *ctx = NULL;
    xfa_backend backend = XFA_BACKEND_AUTO;
    if (argc > 1 && xfa_backend_from_name(argv[1], &backend) != XFA_SUCCESS) {
        fprintf(stderr, "unknown backend %s\n", argv[1]);
        return 2;
    }
    const xfa_status created = xfa_context_create(backend, 0, &ctx);
    if (created == XFA_ERROR_NO_DEVICE) {
        printf("%s\n", xfa_last_error());
        return 77; /* "skipped" to CTest */
    }
    CHECK(created);
    xfa_device_info info;
    CHECK(xfa_context_get_info(ctx, &info));
    printf("xfa %s on %s: %s (%s path)\n", xfa_version_string(), xfa_backend_name(info.backend), info.name, info.path);

    const size_t count = (size_t)B * S * H * D, bytes = count * sizeof(float);
    float *host = malloc(4 * bytes), *q = host, *k = host + count, *v = host + 2 * count, *o = host + 3 * count;
    srand(7);
    for (size_t i = 0; i < 3 * count; i++) host[i] = (float)rand() / RAND_MAX * 2.0f - 1.0f;

    xfa_buffer *qb, *kb, *vb, *ob;
    CHECK(xfa_buffer_create(ctx, bytes, &qb));
    CHECK(xfa_buffer_create(ctx, bytes, &kb));
    CHECK(xfa_buffer_create(ctx, bytes, &vb));
    CHECK(xfa_buffer_create(ctx, bytes, &ob));
    CHECK(xfa_buffer_upload(qb, 0, q, bytes));
    CHECK(xfa_buffer_upload(kb, 0, k, bytes));
    CHECK(xfa_buffer_upload(vb, 0, v, bytes));

    const xfa_tensor tq = xfa_tensor_bshd(qb, 0, XFA_DTYPE_F32, B, S, H, D);
    const xfa_tensor tk = xfa_tensor_bshd(kb, 0, XFA_DTYPE_F32, B, S, H, D);
    const xfa_tensor tv = xfa_tensor_bshd(vb, 0, XFA_DTYPE_F32, B, S, H, D);
    const xfa_tensor to = xfa_tensor_bshd(ob, 0, XFA_DTYPE_F32, B, S, H, D);
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.causal = 1;
    CHECK(xfa_attention_forward(ctx, &params, &tq, &tk, &tv, &to, NULL));
    CHECK(xfa_buffer_download(ob, 0, o, bytes)); /* waits for the forward pass */

    double worst = 0;
    for (int i = 0; i < S; i++)
        for (int h = 0; h < H; h++)
            for (int d = 0; d < D; d++) worst = fmax(worst, fabs(o[(i * H + h) * D + d] - naive(q, k, v, i, h, d)));
    printf("max |xfa - naive| = %.3g\n", worst);

    xfa_buffer_destroy(&qb);
    xfa_buffer_destroy(&kb);
    xfa_buffer_destroy(&vb);
    xfa_buffer_destroy(&ob);
    xfa_context_destroy(&ctx);
    free(host);
    return worst < 1e-5 ? 0 : 1;
}
