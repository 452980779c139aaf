/*
 * cmd_bench_decode.c - `xfa bench-decode`: one new token per sequence against a
 * KV cache, over batch sizes and cache lengths, the way inference runtimes call
 * it. Decoding is bound by reading K and V, so the figure that matters is the
 * bandwidth: bytes of K and V read / time, to compare with the device's copy
 * bandwidth and the peers (bench/peers.py --decode) on the same shapes.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "cli.h"


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct decode_point {
    double median_s, min_s;
    xfa_status status;
} decode_point;

/* One decode call of the point being measured. */
typedef struct decode_call {
    xfa_context *ctx;
    const xfa_decode_params *params;
    const xfa_tensor *q, *o;
    const xfa_kv_cache *cache;
} decode_call;

static xfa_status run_decode(void *arg)
{
    const decode_call *c = arg;
    return xfa_attention_decode(c->ctx, c->params, c->q, c->cache, NULL, NULL, c->o, NULL);
}

static decode_point measure(xfa_context *ctx, const cli_options *o, int64_t batch, int64_t cache_len)
{
    decode_point p = {0};
    const int64_t Hq = o->heads, Hkv = o->heads_kv, D = o->dim;
    const size_t elem = xfa_dtype_size(o->dtype);
    const size_t q_count = (size_t)(batch * Hq * D), kv_count = (size_t)(batch * cache_len * Hkv * D);
    xfa_buffer *q = NULL, *k = NULL, *v = NULL, *out = NULL, *lens = NULL, *scratch = NULL;
    int32_t *len_host = malloc((size_t)batch * sizeof *len_host);
    if (!len_host) {
        p.status = XFA_ERROR_OUT_OF_HOST_MEMORY;
        goto done;
    }
    for (int64_t b = 0; b < batch; b++) len_host[b] = (int32_t)cache_len;
    if ((p.status = xfa_buffer_create(ctx, q_count * elem, &q)) ||
        (p.status = xfa_buffer_create(ctx, kv_count * elem, &k)) ||
        (p.status = xfa_buffer_create(ctx, kv_count * elem, &v)) ||
        (p.status = xfa_buffer_create(ctx, q_count * elem, &out)) ||
        (p.status = xfa_buffer_create(ctx, (size_t)batch * sizeof(int32_t), &lens)) ||
        (p.status = cli_fill_random(q, o->dtype, q_count, 1)) || (p.status = cli_fill_random(k, o->dtype, kv_count, 2)) ||
        (p.status = cli_fill_random(v, o->dtype, kv_count, 3)) ||
        (p.status = xfa_buffer_upload(lens, 0, len_host, (size_t)batch * sizeof(int32_t))))
        goto done;
    const xfa_tensor tq = xfa_tensor_bshd(q, 0, o->dtype, batch, 1, Hq, D);
    const xfa_tensor tk = xfa_tensor_bshd(k, 0, o->dtype, batch, cache_len, Hkv, D);
    const xfa_tensor tv = xfa_tensor_bshd(v, 0, o->dtype, batch, cache_len, Hkv, D);
    const xfa_tensor to = xfa_tensor_bshd(out, 0, o->dtype, batch, 1, Hq, D);
    const xfa_tensor tlens = xfa_tensor_bshd(lens, 0, XFA_DTYPE_I32, batch, 1, 1, 1);
    const xfa_kv_cache cache = {&tk, &tv, &tlens, NULL};
    xfa_decode_params params = XFA_DECODE_PARAMS_DEFAULT;
    /* The scratch is the caller's, made once, as a runtime would: the timed calls allocate nothing. */
    size_t scratch_bytes = 0;
    if ((p.status = xfa_attention_decode_scratch_size(ctx, &params, &tq, &cache, NULL, NULL, &to, NULL, &scratch_bytes)) ||
        (p.status = xfa_buffer_create(ctx, scratch_bytes, &scratch)))
        goto done;
    params.scratch = scratch;

    /* Decode calls take microseconds: samples of >= 5 ms, or the wait is what gets timed. */
    decode_call call = {ctx, &params, &tq, &to, &cache};
    p.status = cli_time_calls(ctx, run_decode, &call, o->warmup, o->iters, 5e-3, &p.median_s, &p.min_s);
done:
    xfa_buffer_destroy(&q);
    xfa_buffer_destroy(&k);
    xfa_buffer_destroy(&v);
    xfa_buffer_destroy(&out);
    xfa_buffer_destroy(&lens);
    xfa_buffer_destroy(&scratch);
    free(len_host);
    return p;
}

int cli_bench_decode(const cli_options *o)
{
    xfa_context *ctx = cli_open(o);
    if (!ctx) return 1;
    xfa_device_info info;
    xfa_context_get_info(ctx, &info);
    const bool on_cpu = info.backend == XFA_BACKEND_CPU;
    xfa_plan plan;
    const char *path = xfa_plan_get(ctx, (uint32_t)o->dim, o->dtype, &plan) == XFA_SUCCESS ? plan.path : info.path;
    const char *batches = o->batches ? o->batches : on_cpu ? "1,4" : "1,8,32";
    const char *caches = o->caches ? o->caches : on_cpu ? "1024,8192" : "1024,8192,32768,131072";
    printf("backend,device,path,dtype,head_dim,causal,batch,seqlen,heads,median_ms,min_ms,tflops,gbps\n");
    if (!o->csv)
        fprintf(stderr, "xfa bench-decode: %s on %s, %s, D=%lld, %lld query heads / %lld KV heads, one new token; "
                        "seqlen = cache length, gbps = K and V bytes read / time\n",
                xfa_backend_name(info.backend), info.name, xfa_dtype_name(o->dtype), (long long)o->dim,
                (long long)o->heads, (long long)o->heads_kv);
    char *batch_list = strdup(batches), *save_b = NULL;
    int failures = 0;
    for (char *bt = strtok_r(batch_list, ",", &save_b); bt; bt = strtok_r(NULL, ",", &save_b)) {
        const int64_t batch = atoll(bt);
        char *cache_list = strdup(caches), *save_c = NULL;
        for (char *ct = strtok_r(cache_list, ",", &save_c); ct; ct = strtok_r(NULL, ",", &save_c)) {
            const int64_t len = atoll(ct);
            if (batch <= 0 || len <= 0) continue;
            fprintf(stderr, "\r[xfa bench-decode] batch %lld cache %lld ...", (long long)batch, (long long)len);
            const decode_point p = measure(ctx, o, batch, len);
            fprintf(stderr, "\r%60s\r", "");
            if (p.status) {
                failures++;
                fprintf(stderr, "batch %lld cache %lld: %s\n", (long long)batch, (long long)len,
                        xfa_context_last_error(ctx));
                continue;
            }
            const double kv_bytes = 2.0 * (double)batch * (double)len * (double)o->heads_kv * (double)o->dim *
                                    (double)xfa_dtype_size(o->dtype);
            const double flops = 4.0 * (double)batch * (double)o->heads * (double)len * (double)o->dim;
            printf("%s,\"%s\",\"decode:%s\",%s,%lld,0,%lld,%lld,%lld,%.4f,%.4f,%.3f,%.2f\n", xfa_backend_name(info.backend),
                   info.name, path, xfa_dtype_name(o->dtype), (long long)o->dim, (long long)batch, (long long)len,
                   (long long)o->heads, p.median_s * 1e3, p.min_s * 1e3, flops / p.median_s * 1e-12,
                   kv_bytes / p.median_s * 1e-9);
            fflush(stdout);
        }
        free(cache_list);
    }
    free(batch_list);
    xfa_context_destroy(&ctx);
    return failures ? 1 : 0;
}
