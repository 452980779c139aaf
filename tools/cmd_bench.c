/*
 * cmd_bench.c - `xfa bench`: forward-pass time over a sweep of sequence
 * lengths at a fixed token count (batch = tokens / seqlen), as FlashAttention's
 * benchmarks do. Each point: warm-up calls, then `iters` timed samples (each a
 * few calls back to back and one wait); the median and the minimum are reported.
 * --backward times xfa_attention_backward alone (O and the LSE from one forward
 * call first), with TFLOP/s counted as 2.5x the forward's FLOPs, as
 * FlashAttention's benchmarks count the backward.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "cli.h"
#include "cli_timer.h"


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench_point {
    int64_t batch, seqlen, heads;
    double median_s, min_s, tflops, gbps;
    xfa_status status;
} bench_point;

/* One forward call of the point being measured. */
typedef struct forward_call {
    xfa_context *ctx;
    const xfa_attention_params *params;
    const xfa_tensor *q, *k, *v, *o;
} forward_call;

static xfa_status run_forward(void *arg)
{
    const forward_call *c = arg;
    return xfa_attention_forward(c->ctx, c->params, c->q, c->k, c->v, c->o, NULL);
}

/* One backward call of the point being measured (--backward). */
typedef struct backward_call {
    forward_call fwd;
    const xfa_tensor *d_o, *lse, *dq, *dk, *dv;
} backward_call;

static xfa_status run_backward(void *arg)
{
    const backward_call *c = arg;
    const forward_call *f = &c->fwd;
    return xfa_attention_backward(f->ctx, f->params, f->q, f->k, f->v, f->o, c->d_o, c->lse, c->dq, c->dk, c->dv);
}

static xfa_tensor bench_view(const cli_options *o, xfa_buffer *buf, int64_t batch, int64_t seqlen, int64_t heads)
{
    return o->bhsd ? xfa_tensor_bhsd(buf, 0, o->dtype, batch, seqlen, heads, o->dim)
                   : xfa_tensor_bshd(buf, 0, o->dtype, batch, seqlen, heads, o->dim);
}

/* The backward's extra buffers (dO random; dQ, dK, dV; the LSE), O and the LSE from one forward
 * call, then the timing; 2.5x the forward's FLOPs, bytes of q, k, v, o, dO read and dQ, dK, dV written. */
static xfa_status measure_backward(xfa_context *ctx, const cli_options *o, forward_call *fwd, bench_point *p,
                                   size_t q_count, size_t kv_count, int64_t heads_kv)
{
    xfa_buffer *d_o = NULL, *dq = NULL, *dk = NULL, *dv = NULL, *lse = NULL;
    const size_t elem = xfa_dtype_size(o->dtype);
    xfa_status st;
    if ((st = xfa_buffer_create(ctx, q_count * elem, &d_o)) || (st = xfa_buffer_create(ctx, q_count * elem, &dq)) ||
        (st = xfa_buffer_create(ctx, kv_count * elem, &dk)) || (st = xfa_buffer_create(ctx, kv_count * elem, &dv)) ||
        (st = xfa_buffer_create(ctx, (size_t)(p->batch * p->seqlen * p->heads) * sizeof(float), &lse)) ||
        (st = cli_fill_random(d_o, o->dtype, q_count, 4)))
        goto done;
    const xfa_tensor t_do = bench_view(o, d_o, p->batch, p->seqlen, p->heads);
    const xfa_tensor t_dq = bench_view(o, dq, p->batch, p->seqlen, p->heads);
    const xfa_tensor t_dk = bench_view(o, dk, p->batch, p->seqlen, heads_kv);
    const xfa_tensor t_dv = bench_view(o, dv, p->batch, p->seqlen, heads_kv);
    const xfa_tensor t_lse = xfa_tensor_lse(lse, 0, p->batch, p->seqlen, p->heads);
    if ((st = xfa_attention_forward(ctx, fwd->params, fwd->q, fwd->k, fwd->v, fwd->o, &t_lse))) goto done;
    backward_call call = {*fwd, &t_do, &t_lse, &t_dq, &t_dk, &t_dv};
    if ((st = cli_time_calls(ctx, run_backward, &call, o->warmup, o->iters, 2e-3, &p->median_s, &p->min_s))) goto done;
    p->tflops = 2.5 * cli_attention_flops(o, p->batch, p->heads, p->seqlen, p->seqlen) / p->median_s * 1e-12;
    p->gbps = (double)(4 * q_count + 4 * kv_count) * elem / p->median_s * 1e-9;
done:
    xfa_buffer_destroy(&d_o);
    xfa_buffer_destroy(&dq);
    xfa_buffer_destroy(&dk);
    xfa_buffer_destroy(&dv);
    xfa_buffer_destroy(&lse);
    return st;
}

static bench_point measure(xfa_context *ctx, const cli_options *o, int64_t seqlen, int64_t tokens, int64_t heads,
                           int64_t heads_kv)
{
    bench_point p = {.seqlen = seqlen, .heads = heads};
    p.batch = tokens / seqlen > 0 ? tokens / seqlen : 1;
    const size_t elem = xfa_dtype_size(o->dtype);
    const size_t q_count = (size_t)(p.batch * seqlen * heads * o->dim);
    const size_t kv_count = (size_t)(p.batch * seqlen * heads_kv * o->dim);
    xfa_buffer *q = NULL, *k = NULL, *v = NULL, *out = NULL;
    if ((p.status = xfa_buffer_create(ctx, q_count * elem, &q)) ||
        (p.status = xfa_buffer_create(ctx, kv_count * elem, &k)) ||
        (p.status = xfa_buffer_create(ctx, kv_count * elem, &v)) ||
        (p.status = xfa_buffer_create(ctx, q_count * elem, &out)) ||
        (p.status = cli_fill_random(q, o->dtype, q_count, 1)) || (p.status = cli_fill_random(k, o->dtype, kv_count, 2)) ||
        (p.status = cli_fill_random(v, o->dtype, kv_count, 3)))
        goto done;

    xfa_tensor tq = bench_view(o, q, p.batch, seqlen, heads), tk = bench_view(o, k, p.batch, seqlen, heads_kv);
    xfa_tensor tv = bench_view(o, v, p.batch, seqlen, heads_kv), to = bench_view(o, out, p.batch, seqlen, heads);
    xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
    params.causal = o->causal;
    params.window_left = o->window_left;
    params.window_right = o->causal ? -1 : o->window_right;
    xfa_plan plan;
    if (o->Br || o->Bc) {
        if ((p.status = xfa_plan_get(ctx, (uint32_t)o->dim, o->dtype, &plan))) goto done;
        if (o->Br) plan.Br = o->Br;
        if (o->Bc) plan.Bc = o->Bc;
        plan.workgroup_size = 0;
        params.plan = &plan;
    }
    /* Samples of >= 2 ms: on a GPU the wait's own latency stays under ~1% of a sample. */
    forward_call call = {ctx, &params, &tq, &tk, &tv, &to};
    if (o->backward) {
        p.status = measure_backward(ctx, o, &call, &p, q_count, kv_count, heads_kv);
        goto done;
    }
    if ((p.status = cli_time_calls(ctx, run_forward, &call, o->warmup, o->iters, 2e-3, &p.median_s, &p.min_s)))
        goto done;
    p.tflops = cli_attention_flops(o, p.batch, heads, seqlen, seqlen) / p.median_s * 1e-12;
    p.gbps = (double)(2 * q_count + 2 * kv_count) * elem / p.median_s * 1e-9;
done:
    xfa_buffer_destroy(&q);
    xfa_buffer_destroy(&k);
    xfa_buffer_destroy(&v);
    xfa_buffer_destroy(&out);
    return p;
}

int cli_bench(const cli_options *o)
{
    xfa_context *ctx = cli_open(o);
    if (!ctx) return 1;
    xfa_device_info info;
    xfa_context_get_info(ctx, &info);
    const bool on_cpu = info.backend == XFA_BACKEND_CPU;
    /* The kernel path for this head dim and dtype (the device's path lists every one it has). */
    xfa_plan plan;
    const char *path = xfa_plan_get(ctx, (uint32_t)o->dim, o->dtype, &plan) == XFA_SUCCESS ? plan.path : info.path;
    /* FlashAttention's sweep: 16k tokens, 2048/D heads; the CPU gets a smaller default. */
    const char *seqlens = o->seqlens ? o->seqlens : on_cpu ? "128,256,512,1024" : "1024,2048,4096,8192,16384";
    const int64_t tokens = o->tokens ? o->tokens : on_cpu ? 1024 : 16384;
    const int64_t heads = o->heads;
    const int64_t heads_kv = o->heads_kv;

    if (o->csv) printf("backend,device,path,dtype,head_dim,causal,batch,seqlen,heads,median_ms,min_ms,tflops,gbps\n");
    else if (o->json)
        printf("{\"backend\":\"%s\",\"device\":\"%s\",\"path\":\"%s\",\"timing\":\"%s\",\"results\":[",
               xfa_backend_name(info.backend), info.name, info.path, cli_timer_method(ctx));
    else {
        printf("xfa bench%s: %s on %s (%s path), %s, D=%lld, %s, %lld tokens, %d warm-up + %d timed calls (%s)\n",
               o->backward ? " --backward" : "", xfa_backend_name(info.backend), info.name, path,
               xfa_dtype_name(o->dtype), (long long)o->dim, o->causal ? "causal" : "non-causal", (long long)tokens,
               o->warmup, o->iters, cli_timer_method(ctx));
        printf("%8s %6s %6s %12s %12s %10s %10s\n", "seqlen", "batch", "heads", "median ms", "min ms", "TFLOP/s", "GB/s");
    }
    /* GQA and windows change the work: the CSV's path says so after a '+' (TFLOP/s count visible pairs only) */
    char variant[96] = "";
    if (o->backward) snprintf(variant, sizeof variant, "+backward");
    if (o->heads_kv != o->heads) snprintf(variant + strlen(variant), sizeof variant - strlen(variant), "+gqa%lld:%lld", (long long)o->heads, (long long)o->heads_kv);
    if (o->window_left >= 0 || (!o->causal && o->window_right >= 0))
        snprintf(variant + strlen(variant), sizeof variant - strlen(variant), "+window%lld:%lld", (long long)o->window_left,
                 (long long)(o->causal ? 0 : o->window_right));
    char *list = strdup(seqlens);
    int failures = 0, n = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        const int64_t seqlen = atoll(tok);
        if (seqlen <= 0) continue;
        fprintf(stderr, "\r[xfa bench] seqlen %lld ...", (long long)seqlen);
        fflush(stderr);
        const bench_point p = measure(ctx, o, seqlen, tokens, heads, heads_kv);
        fprintf(stderr, "\r%40s\r", "");
        if (p.status) {
            failures++;
            fprintf(stderr, "seqlen %lld: %s\n", (long long)seqlen, xfa_context_last_error(ctx));
            continue;
        }
        if (o->csv)
            printf("%s,\"%s\",\"%s%s\",%s,%lld,%d,%lld,%lld,%lld,%.4f,%.4f,%.3f,%.2f\n", xfa_backend_name(info.backend),
                   info.name, path, variant, xfa_dtype_name(o->dtype), (long long)o->dim, o->causal, (long long)p.batch,
                   (long long)p.seqlen, (long long)p.heads, p.median_s * 1e3, p.min_s * 1e3, p.tflops, p.gbps);
        else if (o->json)
            printf("%s{\"dtype\":\"%s\",\"head_dim\":%lld,\"causal\":%s,\"batch\":%lld,\"seqlen\":%lld,\"heads\":%lld,"
                   "\"median_ms\":%.4f,\"min_ms\":%.4f,\"tflops\":%.3f,\"gbps\":%.2f}",
                   n ? "," : "", xfa_dtype_name(o->dtype), (long long)o->dim, o->causal ? "true" : "false",
                   (long long)p.batch, (long long)p.seqlen, (long long)p.heads, p.median_s * 1e3, p.min_s * 1e3,
                   p.tflops, p.gbps);
        else
            printf("%8lld %6lld %6lld %12.3f %12.3f %10.3f %10.2f\n", (long long)p.seqlen, (long long)p.batch,
                   (long long)p.heads, p.median_s * 1e3, p.min_s * 1e3, p.tflops, p.gbps);
        fflush(stdout);
        n++;
    }
    if (o->json) printf("]}\n");
    free(list);
    xfa_context_destroy(&ctx);
    return failures ? 1 : 0;
}
