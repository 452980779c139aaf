/* conformance.c - generating, storing and checking conformance vectors (see conformance.h). */
#include "conformance.h"

#include "attention_case.h"
#include "dtype.h"
#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FORMAT_LINE "xfa-conformance 1"

typedef struct vector_spec {
    const char *name;
    xfa_dtype dtype;
    int64_t b, sq, sk, hq, hkv, d;
    bool causal;
    int64_t window_left, window_right;
    double softcap;
    bool alibi, bias;
} vector_spec;

static const vector_spec specs[] = {
    {"tiny_f32", XFA_DTYPE_F32, 1, 5, 7, 1, 1, 32, false, -1, -1, 0, false, false},
    {"causal_f32", XFA_DTYPE_F32, 2, 13, 13, 2, 2, 64, true, -1, -1, 0, false, false},
    {"gqa_causal_f16", XFA_DTYPE_F16, 1, 9, 17, 4, 1, 64, true, -1, -1, 0, false, false},
    {"bf16_d128", XFA_DTYPE_BF16, 1, 11, 11, 2, 2, 128, false, -1, -1, 0, false, false},
    {"empty_rows_f32", XFA_DTYPE_F32, 1, 6, 2, 1, 1, 32, true, -1, -1, 0, false, false},
    {"window_f32", XFA_DTYPE_F32, 1, 16, 16, 2, 1, 32, false, 3, 1, 0, false, false},
    {"softcap_alibi_f16", XFA_DTYPE_F16, 1, 8, 12, 2, 2, 64, false, -1, -1, 5.0, true, false},
    {"bias_mask_bf16", XFA_DTYPE_BF16, 1, 7, 9, 2, 2, 32, false, -1, -1, 0, false, true},
    {"d256_f32", XFA_DTYPE_F32, 1, 3, 4, 1, 1, 256, false, -1, -1, 0, false, false},
};

int xfa_vector_count(void) { return (int)(sizeof specs / sizeof specs[0]); }

void xfa_vector_free(xfa_vector *v)
{
    free(v->q16); free(v->k16); free(v->v16);
    free(v->q32); free(v->k32); free(v->v32);
    free(v->alibi); free(v->bias); free(v->o_ref); free(v->lse_ref);
    memset(v, 0, sizeof *v);
}

static size_t q_count(const xfa_vector *v) { return (size_t)(v->batch * v->seqlen_q * v->heads_q * v->head_dim); }
static size_t kv_count(const xfa_vector *v) { return (size_t)(v->batch * v->seqlen_k * v->heads_kv * v->head_dim); }
static size_t rows(const xfa_vector *v) { return (size_t)(v->batch * v->heads_q * v->seqlen_q); }

/* Allocates the arrays the header fields call for. */
static bool allocate(xfa_vector *v)
{
    const bool half = v->dtype != XFA_DTYPE_F32;
    if (half) {
        v->q16 = calloc(q_count(v), 2); v->k16 = calloc(kv_count(v), 2); v->v16 = calloc(kv_count(v), 2);
    } else {
        v->q32 = calloc(q_count(v), 4); v->k32 = calloc(kv_count(v), 4); v->v32 = calloc(kv_count(v), 4);
    }
    v->o_ref = calloc(q_count(v), sizeof(double));
    v->lse_ref = calloc(rows(v), sizeof(double));
    return (half ? v->q16 && v->k16 && v->v16 : v->q32 && v->k32 && v->v32) && v->o_ref && v->lse_ref;
}

static const void *data(const xfa_vector *v, int which)
{
    const void *half[3] = {v->q16, v->k16, v->v16}, *full[3] = {v->q32, v->k32, v->v32};
    return v->dtype == XFA_DTYPE_F32 ? full[which] : half[which];
}

static xfa_host_view bshd_view(const void *p, xfa_dtype dtype, int64_t B, int64_t S, int64_t H, int64_t D)
{
    xfa_host_view h = {p, dtype, {B, S, H, D}, {S * H * D, H * D, D, 1}};
    return h;
}

static xfa_reference_problem reference_problem(const xfa_vector *v)
{
    xfa_reference_problem p = xfa_reference_problem_make(
        bshd_view(data(v, 0), v->dtype, v->batch, v->seqlen_q, v->heads_q, v->head_dim),
        bshd_view(data(v, 1), v->dtype, v->batch, v->seqlen_k, v->heads_kv, v->head_dim),
        bshd_view(data(v, 2), v->dtype, v->batch, v->seqlen_k, v->heads_kv, v->head_dim), v->scale, v->causal);
    p.window_left = v->window_left;
    p.window_right = v->window_right;
    p.softcap = v->softcap;
    if (v->alibi) p.alibi = bshd_view(v->alibi, XFA_DTYPE_F32, 1, 1, v->heads_q, 1);
    if (v->bias) p.bias = bshd_view(v->bias, XFA_DTYPE_F32, 1, v->seqlen_q, 1, v->seqlen_k);
    return p;
}

bool xfa_vector_generate(int index, xfa_vector *v)
{
    if (index < 0 || index >= xfa_vector_count()) return false;
    const vector_spec *s = &specs[index];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", s->name);
    v->dtype = s->dtype;
    v->batch = s->b; v->seqlen_q = s->sq; v->seqlen_k = s->sk; v->heads_q = s->hq; v->heads_kv = s->hkv;
    v->head_dim = s->d;
    v->scale = 1.0 / sqrt((double)s->d);
    v->causal = s->causal;
    v->window_left = s->window_left;
    v->window_right = s->window_right;
    v->softcap = s->softcap;
    if (!allocate(v)) return false;
    uint64_t rng = 0xC0FFEEull + (uint64_t)index;
    for (int t = 0; t < 3; t++) {
        const size_t n = t == 0 ? q_count(v) : kv_count(v);
        void *dst = (void *)data(v, t);
        for (size_t i = 0; i < n; i++) xfa_store_f32(dst, v->dtype, (int64_t)i, (float)xfa_test_rand_normal(&rng));
    }
    if (s->alibi) {
        v->alibi = malloc((size_t)v->heads_q * sizeof *v->alibi);
        for (int64_t h = 0; h < v->heads_q; h++) v->alibi[h] = ldexpf(1.0f, -(int)(1 + h)); /* 1/2, 1/4, ... */
    }
    if (s->bias) {
        const size_t n = (size_t)(v->seqlen_q * v->seqlen_k);
        v->bias = malloc(n * sizeof *v->bias);
        for (size_t i = 0; i < n; i++)
            v->bias[i] = xfa_test_rand_u64(&rng) % 5 == 0 ? -INFINITY : (float)xfa_test_rand_normal(&rng);
    }
    const xfa_reference_problem p = reference_problem(v);
    if (xfa_reference_forward(&p, v->o_ref, v->lse_ref)) return false;
    double ref_max = 0, unfused_err = 0;
    for (size_t i = 0; i < q_count(v); i++) ref_max = fmax(ref_max, fabs(v->o_ref[i]));
    if (v->dtype != XFA_DTYPE_F32) {
        float *unfused = malloc(q_count(v) * sizeof *unfused);
        if (!unfused || xfa_reference_unfused(&p, v->dtype, unfused)) { free(unfused); return false; }
        for (size_t i = 0; i < q_count(v); i++) unfused_err = fmax(unfused_err, fabs(unfused[i] - v->o_ref[i]));
        free(unfused);
    }
    v->o_tolerance = xfa_test_tolerance(v->dtype, ref_max, unfused_err);
    v->lse_tolerance = v->dtype == XFA_DTYPE_F32 ? 1e-5 : 1e-3;
    return true;
}

/* ---- text format ---- */

static void write_bits(FILE *f, const char *name, const void *p, xfa_dtype dtype, size_t n)
{
    fprintf(f, "tensor %s %s %zu\n", name, xfa_dtype_name(dtype), n);
    for (size_t i = 0; i < n; i++) {
        if (dtype == XFA_DTYPE_F32) fprintf(f, "%08x", xfa_f32_bits(((const float *)p)[i]));
        else fprintf(f, "%04x", ((const uint16_t *)p)[i]);
        fputc(i % 16 == 15 || i + 1 == n ? '\n' : ' ', f);
    }
}

static void write_doubles(FILE *f, const char *name, const double *p, size_t n)
{
    fprintf(f, "output %s %zu\n", name, n);
    for (size_t i = 0; i < n; i++) fprintf(f, "%.17g%c", p[i], i % 8 == 7 || i + 1 == n ? '\n' : ' ');
}

bool xfa_vector_write(const xfa_vector *v, FILE *f)
{
    fprintf(f, "%s\nname %s\ndtype %s\n", FORMAT_LINE, v->name, xfa_dtype_name(v->dtype));
    fprintf(f, "shape %lld %lld %lld %lld %lld %lld\n", (long long)v->batch, (long long)v->seqlen_q,
            (long long)v->seqlen_k, (long long)v->heads_q, (long long)v->heads_kv, (long long)v->head_dim);
    fprintf(f, "scale %.17g\ncausal %d\nwindow %lld %lld\nsoftcap %.17g\ntolerance %.17g %.17g\n", v->scale,
            v->causal ? 1 : 0, (long long)v->window_left, (long long)v->window_right, v->softcap, v->o_tolerance,
            v->lse_tolerance);
    static const char *const names[3] = {"q", "k", "v"};
    for (int t = 0; t < 3; t++) write_bits(f, names[t], data(v, t), v->dtype, t == 0 ? q_count(v) : kv_count(v));
    if (v->alibi) write_bits(f, "alibi", v->alibi, XFA_DTYPE_F32, (size_t)v->heads_q);
    if (v->bias) write_bits(f, "bias", v->bias, XFA_DTYPE_F32, (size_t)(v->seqlen_q * v->seqlen_k));
    write_doubles(f, "o", v->o_ref, q_count(v));
    write_doubles(f, "lse", v->lse_ref, rows(v));
    fprintf(f, "end\n");
    return !ferror(f);
}

static bool fail(char *why, size_t size, const char *text)
{
    snprintf(why, size, "%s", text);
    return false;
}

bool xfa_vector_read(FILE *f, xfa_vector *v, char *why, size_t size)
{
    char line[256], word[32], dtype_name[16];
    memset(v, 0, sizeof *v);
    if (!fgets(line, sizeof line, f) || strncmp(line, FORMAT_LINE, strlen(FORMAT_LINE)))
        return fail(why, size, "not an xfa-conformance 1 file");
    long long b, sq, sk, hq, hkv, d, wl, wr;
    int causal;
    if (fscanf(f, " name %63s dtype %15s", v->name, dtype_name) != 2 || xfa_dtype_from_name(dtype_name, &v->dtype) ||
        fscanf(f, " shape %lld %lld %lld %lld %lld %lld", &b, &sq, &sk, &hq, &hkv, &d) != 6 ||
        fscanf(f, " scale %lf causal %d window %lld %lld softcap %lf tolerance %lf %lf", &v->scale, &causal, &wl, &wr,
               &v->softcap, &v->o_tolerance, &v->lse_tolerance) != 7)
        return fail(why, size, "malformed header");
    if (b <= 0 || sq <= 0 || sk <= 0 || hq <= 0 || hkv <= 0 || d <= 0 || hq % hkv || b * sq * hq * d > (1 << 24) ||
        b * sk * hkv * d > (1 << 24))
        return fail(why, size, "shape out of range");
    v->batch = b; v->seqlen_q = sq; v->seqlen_k = sk; v->heads_q = hq; v->heads_kv = hkv; v->head_dim = d;
    v->causal = causal != 0;
    v->window_left = wl;
    v->window_right = wr;
    if (!allocate(v)) return fail(why, size, "out of memory");
    for (;;) {
        size_t n;
        if (fscanf(f, " %31s", word) != 1) return fail(why, size, "missing 'end'");
        if (!strcmp(word, "end")) return true;
        char name[16];
        if (!strcmp(word, "tensor")) {
            if (fscanf(f, " %15s %15s %zu", name, dtype_name, &n) != 3) return fail(why, size, "malformed tensor line");
            void *dst = NULL;
            size_t want = 0;
            xfa_dtype dt = XFA_DTYPE_F32;
            if (!strcmp(name, "q")) dst = (void *)data(v, 0), want = q_count(v), dt = v->dtype;
            else if (!strcmp(name, "k")) dst = (void *)data(v, 1), want = kv_count(v), dt = v->dtype;
            else if (!strcmp(name, "v")) dst = (void *)data(v, 2), want = kv_count(v), dt = v->dtype;
            else if (!strcmp(name, "alibi")) dst = v->alibi = calloc((size_t)hq, 4), want = (size_t)hq;
            else if (!strcmp(name, "bias")) dst = v->bias = calloc((size_t)(sq * sk), 4), want = (size_t)(sq * sk);
            if (!dst || n != want) return fail(why, size, "unknown tensor or wrong element count");
            for (size_t i = 0; i < n; i++) {
                unsigned bits;
                if (fscanf(f, " %x", &bits) != 1) return fail(why, size, "short tensor data");
                if (dt == XFA_DTYPE_F32) ((float *)dst)[i] = xfa_bits_f32(bits);
                else ((uint16_t *)dst)[i] = (uint16_t)bits;
            }
        } else if (!strcmp(word, "output")) {
            if (fscanf(f, " %15s %zu", name, &n) != 2) return fail(why, size, "malformed output line");
            double *dst = !strcmp(name, "o") ? v->o_ref : !strcmp(name, "lse") ? v->lse_ref : NULL;
            if (!dst || n != (dst == v->o_ref ? q_count(v) : rows(v))) return fail(why, size, "bad output block");
            for (size_t i = 0; i < n; i++) {
                char num[40];
                if (fscanf(f, " %39s", num) != 1) return fail(why, size, "short output data");
                dst[i] = strtod(num, NULL); /* accepts "-inf" */
            }
        } else {
            return fail(why, size, "unknown section");
        }
    }
}

/* ---- checking ---- */

static xfa_status upload(xfa_context *ctx, const void *src, size_t bytes, xfa_buffer **buf)
{
    xfa_status st = xfa_buffer_create(ctx, bytes, buf);
    return st ? st : xfa_buffer_upload(*buf, 0, src, bytes);
}

xfa_status xfa_vector_check(xfa_context *ctx, const xfa_vector *v, bool *passed, double *o_err, double *lse_err)
{
    const size_t elem = xfa_dtype_size(v->dtype), nq = q_count(v), nkv = kv_count(v), nr = rows(v);
    xfa_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL, *blse = NULL, *balibi = NULL, *bbias = NULL;
    unsigned char *o_host = malloc(nq * elem);
    float *lse_host = malloc(nr * sizeof *lse_host);
    *passed = false;
    *o_err = *lse_err = 0;
    xfa_status st = XFA_ERROR_OUT_OF_HOST_MEMORY;
    if (!o_host || !lse_host) goto done;
    memset(o_host, 0xFF, nq * elem); /* poison */
    memset(lse_host, 0xFF, nr * sizeof *lse_host);
    if ((st = upload(ctx, data(v, 0), nq * elem, &bq)) || (st = upload(ctx, data(v, 1), nkv * elem, &bk)) ||
        (st = upload(ctx, data(v, 2), nkv * elem, &bv)) || (st = upload(ctx, o_host, nq * elem, &bo)) ||
        (st = upload(ctx, lse_host, nr * sizeof *lse_host, &blse)) ||
        (v->alibi && (st = upload(ctx, v->alibi, (size_t)v->heads_q * 4, &balibi))) ||
        (v->bias && (st = upload(ctx, v->bias, (size_t)(v->seqlen_q * v->seqlen_k) * 4, &bbias))))
        goto done;
    const xfa_tensor q = xfa_tensor_bshd(bq, 0, v->dtype, v->batch, v->seqlen_q, v->heads_q, v->head_dim);
    const xfa_tensor k = xfa_tensor_bshd(bk, 0, v->dtype, v->batch, v->seqlen_k, v->heads_kv, v->head_dim);
    const xfa_tensor vv = xfa_tensor_bshd(bv, 0, v->dtype, v->batch, v->seqlen_k, v->heads_kv, v->head_dim);
    const xfa_tensor o = xfa_tensor_bshd(bo, 0, v->dtype, v->batch, v->seqlen_q, v->heads_q, v->head_dim);
    const xfa_tensor lse = xfa_tensor_lse(blse, 0, v->batch, v->seqlen_q, v->heads_q);
    const xfa_tensor alibi = xfa_tensor_bshd(balibi, 0, XFA_DTYPE_F32, 1, 1, v->heads_q, 1);
    const xfa_tensor bias = xfa_tensor_bshd(bbias, 0, XFA_DTYPE_F32, 1, v->seqlen_q, 1, v->seqlen_k);
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.softmax_scale = (float)v->scale;
    params.causal = v->causal;
    params.window_left = v->window_left;
    params.window_right = v->causal ? -1 : v->window_right;
    params.softcap = (float)v->softcap;
    params.alibi_slopes = v->alibi ? &alibi : NULL;
    params.bias = v->bias ? &bias : NULL;
    if ((st = xfa_attention_forward(ctx, &params, &q, &k, &vv, &o, &lse)) ||
        (st = xfa_buffer_download(bo, 0, o_host, nq * elem)) ||
        (st = xfa_buffer_download(blse, 0, lse_host, nr * sizeof *lse_host)))
        goto done;
    bool ok = true;
    for (size_t i = 0; i < nq; i++) {
        const double e = fabs((double)xfa_load_f32(o_host, v->dtype, (int64_t)i) - v->o_ref[i]);
        *o_err = isnan(e) ? INFINITY : fmax(*o_err, e);
    }
    for (size_t r = 0; r < nr; r++) { /* ours is (B, H, S) like the file's */
        const double want = v->lse_ref[r], got = lse_host[r];
        if (isinf(want) || !isfinite(got)) {
            if (!(want == got)) ok = false, *lse_err = INFINITY;
            continue;
        }
        *lse_err = fmax(*lse_err, fabs(got - want) / fmax(1.0, fabs(want)));
    }
    *passed = ok && *o_err <= v->o_tolerance && *lse_err <= v->lse_tolerance;
    st = XFA_SUCCESS;
done:
    xfa_buffer_destroy(&bq); xfa_buffer_destroy(&bk); xfa_buffer_destroy(&bv); xfa_buffer_destroy(&bo);
    xfa_buffer_destroy(&blse); xfa_buffer_destroy(&balibi); xfa_buffer_destroy(&bbias);
    free(o_host);
    free(lse_host);
    return st;
}
